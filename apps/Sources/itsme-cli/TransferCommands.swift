import ArgumentParser
import Foundation
import ItsMeKit
import RelayClient

#if canImport(Glibc)
    import Glibc
#endif

// Moving an identity to a new device (docs/PROTOCOL.md 17): a password
// export (`export`, `import`) or a live transfer through a relay room
// (`transfer receive` on the new device, `transfer send` on the old one).
// Both end in the same install.

// MARK: Options

/// `--password-fd` / `--password-file`: the export password, for scripts.
struct PasswordOptions: ParsableArguments {
    @Option(
        name: .customLong("password-fd"),
        help: ArgumentHelp("Read the export password from this open file descriptor (scripts).", valueName: "n"))
    var passwordFD: Int32?

    @Option(
        name: .customLong("password-file"),
        help: ArgumentHelp("Read the export password from the first line of this file (scripts).", valueName: "path"))
    var passwordFile: String?

    var given: Bool { passwordFD != nil || passwordFile != nil }

    func read() throws -> String {
        try Input.firstLine(fd: passwordFD, file: passwordFile, fdOption: "--password-fd", fileOption: "--password-file")
    }

    /// Refuses to go on without a way to ask the password.
    func requireSource() throws {
        if !given && !Input.standardInputIsTerminal {
            throw CLIError("no terminal to ask for the export password: pass --password-fd N or --password-file PATH")
        }
    }
}

/// How an imported or received identity is installed.
struct InstallOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Copy this contact store (contacts.db of the old device's data directory) into the data directory first.",
            valueName: "path"))
    var contacts: String?

    @Flag(
        help: """
            Replace what the data directory holds (another identity, contacts the imported identity cannot read, \
            a different contacts.db) without asking.
            """)
    var replace = false

    @Flag(help: "Encrypt the new secret files with a passphrase, as `init --passphrase` does.")
    var passphrase = false
}

// MARK: export

struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Export your identity for a new device, sealed with a password.",
        discussion: """
            Asks your PIN, then seals your identity key, contacts key and name with a password the library \
            generates (or one you choose: --chosen-password), by Argon2id over 256 MiB. With --with-contacts FILE \
            it writes one file holding your identity and your contacts (the way to move everything); with \
            --output, the identity alone as a file; else the identity alone as a QR code and a line of text. On \
            the new device: itsme import, one command, one password. This device's secrets never leave it, so \
            each contact sees a device change at your next verification with them.
            """)

    @OptionGroup var global: GlobalOptions
    @Option(
        help: ArgumentHelp(
            "Write the export's text to this new file (mode 0600; an existing file is never overwritten).", valueName: "file"))
    var output: String?
    @Option(
        name: .customLong("with-contacts"),
        help: ArgumentHelp(
            "Write your identity and your contacts, sealed together, to this new file (mode 0600; up to 64 MiB of contacts; no QR form).",
            valueName: "file"))
    var withContacts: String?
    @Flag(help: "Choose the password (at least 8 characters, typed twice) instead of a generated one.")
    var chosenPassword = false
    @OptionGroup var password: PasswordOptions
    @OptionGroup var display: CodeDisplay

    func validate() throws {
        if withContacts != nil, output != nil || display.png != nil || display.textOnly {
            throw ValidationError("--with-contacts writes a file of its own: give it without --output, --png or --text-only")
        }
    }

    func run() async throws {
        try await execute(global) { profile in
            for (file, option) in [(output, "--output"), (withContacts, "--with-contacts")] {
                guard let file else { continue }
                var st = stat()
                if lstat(file, &st) == 0 {
                    throw CLIError("\(file) already exists: an export never overwrites a file; choose another \(option)")
                }
            }
            let kind: IdentityExport.PasswordKind = chosenPassword || password.given ? .chosen : .generated
            if kind == .chosen { try password.requireSource() }
            let identity = try profile.identity()
            let pin = try profile.unlockReturningPIN()
            let minimum = IdentityExport.minimumChosenPasswordCount
            var random = SystemRandom()
            let secret: String
            switch kind {
            case .generated:
                secret = IdentityExport.generatePassword(using: &random)
            case .chosen:
                if password.given {
                    secret = try password.read()
                } else {
                    secret = try Input.newSecret(.exportPassword) {
                        $0.unicodeScalars.count >= minimum ? nil : "an export password is at least \(minimum) characters"
                    }
                }
                guard secret.unicodeScalars.count >= minimum else {
                    throw CLIError("an export password is at least \(minimum) characters")
                }
            }
            let out = profile.output
            var snapshot: [UInt8]? = nil
            var contactCount = 0
            if withContacts != nil {
                let store = try profile.contacts()
                contactCount = try store.count()
                do { snapshot = try store.snapshot() } catch let error as ItsMeError { throw CLIError(error.message) }
            }
            out.notice(snapshot == nil ? "Sealing your identity (Argon2id over 256 MiB)..." : "Sealing your identity and \(counted(contactCount, "contact")) (Argon2id over 256 MiB)...")
            let blob = try IdentityExport.export(
                identity, pin: pin, now: profile.clock.now(), password: secret, kind: kind, contactStore: snapshot, random: &random)
            var document: [String: Any] = [
                "name": identity.name, "fingerprint": identity.fingerprint,
                "passwordKind": kind == .generated ? "generated" : "chosen", "contactStore": absolutePath(profile.contactsPath),
            ]
            if let withContacts {
                try writeNewFile(withContacts, Data(blob))
                out.line("Wrote the export of \(identity.name) and \(counted(contactCount, "contact")) to \(withContacts) (readable by you only).")
                out.line("On the new device: \(suggest("import", absolutePath(withContacts), elsewhere: true))")
                document["file"] = withContacts
                document["contacts"] = contactCount
            } else if let output {
                let text = IdentityExport.text(blob)
                try writeNewFile(output, Data((text + "\n").utf8))
                out.line("Wrote the export of \(identity.name) to \(output) (readable by you only).")
                out.line("On the new device: \(suggest("import", absolutePath(output), elsewhere: true))")
                document["file"] = output
            } else {
                let text = IdentityExport.text(blob)
                try display.show(text, out)
                out.line(text)
                out.line("")
                out.line("On the new device, give a photo of the QR code to \(suggest("import", "--image", blank: "FILE", elsewhere: true)), or run:")
                out.line(suggest("import", "--text", text, elsewhere: true))
                document["export"] = text
            }
            out.line("")
            if kind == .generated {
                out.line("Export password: \(secret)")
                out.line("You need this password to import the export on the new device. It is not stored anywhere and")
                out.line("is shown only now: write it down. Keep it apart from the export: whoever has both has your identity.")
                document["password"] = secret
            } else {
                out.line("The password is the one you chose; it is not stored anywhere. Whoever has it and the export has your identity.")
            }
            out.line("")
            if withContacts == nil {
                out.line("Your contacts are not in this export. To move them too: \(suggest("export", "--with-contacts", blank: "FILE"))")
                out.line("(one file with both), or a live transfer (\(suggest("transfer", "receive", elsewhere: true)) on the new device).")
            }
            out.line("This device's secrets stay here: each contact sees a device change at your next verification with them.")
            out.document(document)
            return .ok
        }
    }
}

// MARK: import

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Install an identity exported on another device (itsme export) in this data directory.",
        discussion: """
            Run it on the new device, with the export's file or its text. The export is checked before anything is \
            asked: one that is damaged, of another version, or of the old app's format costs nothing. Then the \
            password (three tries at a terminal; every wrong one counts: after 5, entry locks for 5 minutes, then \
            longer). An export made with --with-contacts brings the contacts too; for one without, --contacts \
            copies contacts.db from the old device in first. If this data directory holds \
            another identity, or contacts the imported identity cannot read, it says what would be replaced and \
            asks (without a terminal: --replace). A PIN already set here stays (and is asked); else you choose one.
            """)

    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("The export file (written by itsme export --output).", valueName: "file"))
    var file: String?
    @Option(help: ArgumentHelp("The export's text (ITSMEXP1:...), instead of a file.", valueName: "text"))
    var text: String?
    @Option(help: ArgumentHelp("A photo or screenshot of the export's QR code (PNG or JPEG), instead of a file.", valueName: "file"))
    var image: String?
    @OptionGroup var install: InstallOptions
    @OptionGroup var password: PasswordOptions

    func validate() throws {
        if [file != nil, text != nil, image != nil].filter({ $0 }).count != 1 {
            throw ValidationError("give the export file, its text with --text, or a picture of its QR code with --image (one of them)")
        }
    }

    func run() async throws {
        try await execute(global) { profile in
            let scanned = try image.map { try readCode(imageAt: $0, prefixes: [IdentityExport.textPrefix], what: "an identity export") }
            let (blob, header) = try readExport(file: file, text: scanned ?? text)
            if header.carriesContacts, install.contacts != nil {
                throw CLIError("this export carries the contacts already: import it without --contacts")
            }
            let copy = try profile.contactsToCopy(install.contacts, replace: install.replace)
            try password.requireSource()
            let store = try profile.storeForImport(passphrase: install.passphrase)
            let contents = try profile.openExport(blob, kind: header.passwordKind, store: store, password: password)
            return try profile.installImported(contents, store: store, copy: copy, replace: install.replace)
        }
    }
}

/// An export from a file (its text form, or the raw export) or from its
/// text, checked as far as it can be without the password: the form, the
/// header (version, key derivation and its parameters, password kind) and
/// the length. A refusal here costs no attempt.
func readExport(file: String?, text: String?) throws -> ([UInt8], IdentityExport.Header) {
    let blob: [UInt8]
    if let file {
        let bytes: [UInt8]
        do {
            guard let read = try RegularFile.contents(of: file, followLinks: true, limit: IdentityExport.maxBlobCount + 4_096) else {
                throw CLIError("cannot read \(file): \(String(cString: strerror(ENOENT)))")
            }
            bytes = read
        } catch let error as RegularFileError where error.isDamage {
            throw CLIError("\(file) is not an identity export (a file written by itsme export): it \(error.reason)")
        } catch let error as RegularFileError {
            throw CLIError("\(file) \(error.reason)")
        }
        // The raw export has its version as a byte after the magic; the
        // text has it as a digit, then ":".
        let magic = IdentityExport.magic
        if bytes.count > magic.count, Array(bytes.prefix(magic.count)) == magic, bytes[magic.count] < 0x20 {
            blob = bytes
        } else {
            blob = try IdentityExport.blob(text: String(decoding: bytes, as: UTF8.self))
        }
    } else {
        blob = try IdentityExport.blob(text: text ?? "")
    }
    let header = try IdentityExport.Header(parsing: blob)
    return (blob, header)
}

extension Profile {
    /// Opens an export with its password (three tries at a terminal, one
    /// from a file descriptor or file), each a counted attempt under the
    /// attempt limiter of this data directory: after five wrong ones entry
    /// locks for 5 minutes, then longer. A password that cannot be one
    /// (a typing error) is not counted.
    func openExport(_ blob: [UInt8], kind: IdentityExport.PasswordKind, store: SecretStore, password: PasswordOptions)
        throws -> IdentityExport.Contents
    {
        let limiter = IdentityExport.limiter(store: store)
        try password.requireSource()
        let tries = password.given ? 1 : 3
        let prompt = kind == .generated ? "Export password (like ABCD-EFGH-JKMNP): " : "Export password: "
        for attempt in 1...tries {
            try checkNotLocked(limiter)
            let typed = password.given ? try password.read() : try Input.secret(prompt, .exportPassword)
            do {
                return try IdentityExport.open(blob, password: typed, limiter: limiter, now: clock.now())
            } catch let error as ItsMeError where error.kind == .invalidArgument {
                let message = "\(error.message) (not counted as a wrong password)"
                if attempt == tries { throw CLIError(message) }
                output.warn(message)
            } catch let error as ItsMeError where error.kind == .authenticationFailed {
                let after = try limiter.status(now: clock.now())
                if after.waitSeconds > 0 {
                    throw CLIError(
                        "wrong export password, or an altered export; locked for \(duration(Int64(after.waitSeconds))) after \(after.failures) wrong passwords",
                        exit: .locked)
                }
                let left = AttemptLimiter.freeFailures - min(after.failures, AttemptLimiter.freeFailures)
                let message = "wrong export password, or an altered export (\(left) more before a lockout)"
                if attempt == tries { throw CLIError(message, exit: .checkFailed) }
                output.warn(message)
            } catch let error as ItsMeError where error.kind == .locked {
                try checkNotLocked(limiter)
                throw CLIError(error.message, exit: .locked)
            }
        }
        throw CLIError("wrong export password", exit: .checkFailed)
    }

    /// Locked: said before the password is asked, with the time left.
    private func checkNotLocked(_ limiter: AttemptLimiter) throws {
        let status = try limiter.status(now: clock.now())
        if status.waitSeconds > 0 {
            throw CLIError(
                "export passwords are locked after \(status.failures) wrong ones: try again in \(duration(Int64(status.waitSeconds)))",
                exit: .locked)
        }
    }
}

// MARK: Installing

extension Profile {
    private var stagedContactsPath: String { contactsPath + ".import" }

    /// `--contacts PATH`, checked before anything is asked: the contact
    /// store to copy in, or nil when there is nothing to copy (none given,
    /// or this data directory's contacts.db is the same file). A different
    /// contacts.db here is refused unless `replace`.
    func contactsToCopy(_ source: String?, replace: Bool) throws -> String? {
        guard let source else { return nil }
        let data = try contactStoreCopy(source)
        guard data.count >= 100, data.prefix(16) == Data("SQLite format 3\0".utf8) else {
            throw CLIError("\(source) is not a contact store (the file contacts.db of the old device's data directory)")
        }
        if let local = try readContactStore(contactsPath), !local.isEmpty {
            if local == data { return nil }
            if !replace {
                throw CLIError(
                    "\(contactsPath) already exists and differs from \(source): import without --contacts to keep it, or pass --replace to overwrite it with the copy")
            }
        }
        return source
    }

    /// Copies the contact store (and a write-ahead log left beside it) next
    /// to contacts.db, where it is checked before it takes its place.
    private func stageContacts(from source: String) throws -> String {
        let staged = stagedContactsPath
        removeStagedContacts()
        let data = try contactStoreCopy(source)
        try makePrivateDirectory()
        try writeNewFile(staged, data)
        if let log = try readContactStore(source + "-wal"), !log.isEmpty {
            try writeNewFile(staged + "-wal", log)
        }
        return staged
    }

    /// A contact store file (or its log), nil if there is none: a link is
    /// followed (as SQLite does), but only to a regular file.
    private func readContactStore(_ path: String) throws -> Data? {
        do {
            return try RegularFile.contents(of: path, followLinks: true, limit: FileLimit.contactStore).map { Data($0) }
        } catch let error as RegularFileError {
            throw CLIError("the contact store \(error.description)")
        }
    }

    /// The contact store named by `--contacts`.
    private func contactStoreCopy(_ source: String) throws -> Data {
        guard let data = try readContactStore(source) else {
            throw CLIError("cannot read the contact store \(source): \(String(cString: strerror(ENOENT)))")
        }
        return data
    }

    private func removeStagedContacts() {
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(stagedContactsPath + suffix) }
    }

    /// The staged copy replaces contacts.db (with its log, if one is left).
    private func placeStagedContacts() throws {
        for suffix in ["-wal", "-shm", "-journal"] { unlink(contactsPath + suffix) }
        let staged = stagedContactsPath
        unlink(staged + "-shm")
        if FileManager.default.fileExists(atPath: staged + "-wal"), rename(staged + "-wal", contactsPath + "-wal") != 0 {
            throw CLIError("cannot move the copied contact store into place: \(String(cString: strerror(errno)))")
        }
        guard rename(staged, contactsPath) == 0 else {
            throw CLIError("cannot move the copied contact store into place: \(String(cString: strerror(errno)))")
        }
    }

    /// Installs an identity an export or a live transfer carried
    /// (PROTOCOL.md 17.4): copies the contact store in (`copy`), checks
    /// what the install would replace and asks (or needs `replace`), asks
    /// the PIN of this data directory or a new one, then installs, Ctrl-C
    /// held off until it is done. Nothing changes before the install.
    ///
    /// Contacts that came inside the export or the transfer are written
    /// where a copy is staged, and take its place the same way.
    func installImported(_ contents: borrowing IdentityExport.Contents, store: SecretStore, copy: String?, replace: Bool)
        throws -> Exit
    {
        let staged: String?
        let storeName: String
        if contents.contactStore != nil {
            removeStagedContacts()
            try makePrivateDirectory()
            do { try contents.writeContactStore(to: stagedContactsPath) } catch let error as ItsMeError { throw CLIError(error.message) }
            staged = stagedContactsPath
            storeName = "the contacts that came with it"
        } else {
            staged = try copy.map { try stageContacts(from: $0) }
            storeName = staged == nil ? contactsPath : copy ?? contactsPath
        }
        defer { if staged != nil { removeStagedContacts() } }
        let found = try IdentityExport.check(contents, secretStore: store, contactStorePath: staged ?? contactsPath)
        let existing = try? Identity.load(store: store)

        var reasons: [String] = []
        if let other = found.otherIdentity {
            if let existing {
                reasons.append(
                    "the identity of \(existing.name) (fingerprint \(formatFingerprint(existing.fingerprint))) would be replaced by that of \(contents.name)")
            } else {
                reasons.append("an identity record that cannot be read (\(other)) would be replaced by that of \(contents.name)")
            }
        }
        if found.store.unreadable > 0 {
            reasons.append(
                "\(counted(found.store.unreadable, "contact")) in \(storeName) that \(contents.name)'s contacts key cannot read (saved under another identity) would be deleted; \(found.store.readable) readable would stay")
        }
        if found.otherIdentity == nil, existing != nil, staged == nil, found.store.deviceSecrets > 0 {
            reasons.append(
                "the identity of \(contents.name) is already here: this device's secrets for \(counted(found.store.deviceSecrets, "contact")) would be forgotten, and each of those contacts would see a device change")
        }
        if staged != nil, let local = try readContactStore(contactsPath), !local.isEmpty {
            let here = try IdentityExport.check(contents, secretStore: store, contactStorePath: contactsPath).store
            reasons.append(
                "\(contactsPath) (\(counted(here.readable + here.unreadable, "contact"))) would be overwritten by \(contents.contactStore != nil ? storeName : "the copy of " + storeName)")
        }

        if !reasons.isEmpty {
            if replace {
                for reason in reasons { output.notice("Replacing (--replace): \(reason).") }
            } else {
                guard Input.standardInputIsTerminal else {
                    throw CLIError(
                        "importing here would replace what this data directory holds: \(reasons.joined(separator: "; ")). Nothing was changed: pass --replace to replace it")
                }
                output.notice("Importing here would replace what this data directory holds:")
                for reason in reasons { output.notice("  - \(reason)") }
                guard try Input.confirmDefaultNo("Replace?") else {
                    output.line("Cancelled: nothing was changed.")
                    output.document(["installed": false])
                    return .checkFailed
                }
            }
        }

        // This data directory's PIN stays and is asked; else a new one.
        let pin = PIN(store: store)
        var newPIN: String? = nil
        if try pin.isSet() {
            if case .terminal = pinSource { output.notice("The PIN of this data directory stays: type it to go on.") }
            let clock = self.clock
            _ = try askPIN(pin) { try pin.verify($0, now: clock.now()) }
        } else {
            if case .terminal = pinSource { output.notice("Choose the PIN of this device (6 digits).") }
            newPIN = try choosePIN()
        }

        let identity: Identity
        do {
            deferInterrupts()
            defer { allowInterrupts() }
            if staged != nil { try placeStagedContacts() }
            identity = try IdentityExport.install(
                contents, secretStore: store, contactStorePath: contactsPath, replacing: !reasons.isEmpty
            ).identity
            if let newPIN {
                try pin.set(newPIN)
                keepChosen(pin: newPIN)
            }
            // An exchange in progress belonged to the identity replaced.
            if found.otherIdentity != nil { clearPending() }
        }
        adopt(identity)

        let count = try contacts().count()
        output.line("Installed the identity of \(identity.name) in \(directory).")
        output.line("Fingerprint: \(formatFingerprint(identity.fingerprint))")
        output.line("Contacts:    \(count)")
        if let other = found.otherIdentity {
            output.line("Replaced the identity \(other == "unreadable" ? "that could not be read" : formatFingerprint(other)).")
        }
        if found.store.unreadable > 0 {
            output.line("Deleted \(counted(found.store.unreadable, "contact")) that this identity could not read.")
        }
        output.line("")
        if count > 0 {
            output.line("This device holds none of the old device's secrets: every contact sees \"device changed\" at your")
            output.line("next verification with them. Give each one a device-change code: \(suggest("device-change-code", blank: "NAME"))")
        } else if staged == nil {
            output.line(
                "No contacts came along. To bring them, on the old device: \(suggest("export", "--with-contacts", blank: "FILE", elsewhere: true))")
            output.line("then import that file here, or send them live: \(suggest("transfer", "receive"))")
        }
        var document: [String: Any] = [
            "installed": true, "name": identity.name, "fingerprint": identity.fingerprint, "dataDir": directory,
            "contacts": count, "deletedContacts": found.store.unreadable,
        ]
        if let other = found.otherIdentity { document["replacedIdentity"] = other }
        output.document(document)
        return .ok
    }
}

func counted(_ count: Int, _ noun: String) -> String { "\(count) \(noun)\(count == 1 ? "" : "s")" }

/// The path from the root, for a line a person copies.
func absolutePath(_ path: String) -> String {
    path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
}

/// Writes a new file readable by its owner only; an existing file (or
/// link) is never replaced.
func writeNewFile(_ path: String, _ data: Data) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
    guard fd >= 0 else {
        if errno == EEXIST { throw CLIError("\(path) already exists: nothing was written over it") }
        throw CLIError("cannot write \(path): \(String(cString: strerror(errno)))")
    }
    let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    let synced = fsync(fd) == 0
    close(fd)
    guard written == data.count, synced else {
        unlink(path)
        throw CLIError("cannot write \(path): \(String(cString: strerror(errno)))")
    }
}

// MARK: transfer

struct Transfer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Move your identity to a new device beside the old one, through a relay: no password.",
        discussion: """
            On the new device, `itsme transfer receive` shows a code (a QR code and a line of text); on the old one, \
            `itsme transfer send CODE` asks the PIN. Both then show a SAS: when they match, confirm on both; the old \
            device sends the identity and your contacts (unless `send --without-contacts`), and the new one installs \
            them, as `itsme import` does. Compare the SAS within 2 minutes (the relay closes a quiet room).
            """,
        subcommands: [Receive.self, Send.self])

    struct Receive: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "On the new device: show a code for the old device, receive the identity and install it.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var relay: RelayOption
        @OptionGroup var install: InstallOptions
        @Option(help: "Give up after this many seconds.") var timeout: Double = Double(DeviceTransfer.lifetime)
        @OptionGroup var display: CodeDisplay

        func run() async throws {
            try await execute(global) { profile in
                let url = try profile.relayURL(relay.relay, ca: relay.relayCA)
                let copy = try profile.contactsToCopy(install.contacts, replace: install.replace)
                let store = try profile.storeForImport(passphrase: install.passphrase)
                let out = profile.output
                let clock = profile.clock
                var random = SystemRandom()
                let transfer = try DeviceTransfer(receiverAt: clock.now(), random: &random)
                try display.show(transfer.offerText, out)
                out.notice(transfer.offerText)
                out.notice("")
                out.notice(
                    "On the old device, give a photo of this code to \(suggest("transfer", "send", "--image", blank: "FILE", elsewhere: true)), or run:")
                out.notice(suggest("transfer", "send", transfer.offerText, elsewhere: true))
                out.notice("Waiting for the old device in the relay room (relay \(url.text); up to \(Int(timeout)) s)...")
                var decided = false
                let state: DeviceTransfer.State
                do {
                    state = try await liveTransfer(url, transfer: transfer, timeout: timeout, now: { clock.now() }) { transfer in
                        decided = true
                        return try sasMatches(transfer, out, other: "old")
                    }
                } catch let error as RelayError where error.kind == RelayError.peerLeft && decided {
                    throw CLIError(
                        "the old device sent no identity (the SAS was rejected there, or it gave up): nothing was installed",
                        exit: .checkFailed)
                } catch {
                    throw roomFailure(
                        error, timedOut: decided ? "the identity did not come in time" : "the old device did not come, or sent no key, in time",
                        outcome: "nothing was installed")
                }
                if state == .rejected { return rejected(out, nothing: "installed") }
                guard state == .done else { throw CLIError("the transfer ended \(state): nothing was installed") }
                let contents = try transfer.takeIdentity()
                out.notice(
                    "Received the identity of \(contents.name)\(contents.contactStore == nil ? " (no contacts came with it)" : " and the contacts").")
                if contents.contactStore != nil, let copy {
                    out.notice("The contacts came with the transfer (the old device's, as they are now): \(copy) is not used.")
                }
                return try profile.installImported(
                    contents, store: store, copy: contents.contactStore == nil ? copy : nil, replace: install.replace)
            }
        }
    }

    struct Send: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "On the old device: send your identity to the new device showing CODE (asks the PIN).")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var relay: RelayOption
        @Argument(help: ArgumentHelp("The code the new device shows (ITSMETR2:...; asked if not given).", valueName: "code"))
        var code: String?
        @Flag(help: "Send the identity alone: your contacts stay on this device.") var withoutContacts = false
        @Option(help: ArgumentHelp("A photo or screenshot of the new device's QR code (PNG or JPEG).", valueName: "file"))
        var image: String?
        @Option(help: "Give up after this many seconds.") var timeout: Double = Double(DeviceTransfer.lifetime)

        func validate() throws {
            if code != nil, image != nil { throw ValidationError("give the new device's code or --image, not both") }
        }

        func run() async throws {
            try await execute(global) { profile in
                let url = try profile.relayURL(relay.relay, ca: relay.relayCA)
                let identity = try profile.identity()
                let scanned = try image.map {
                    try readCode(imageAt: $0, prefixes: [DeviceTransfer.offerPrefix], what: "the new device's transfer code")
                }
                let offer =
                    try (scanned ?? code).map(checkTransferCode)
                    ?? Input.ask("The new device's code (\(DeviceTransfer.offerPrefix)...): ") { text in refusal { try checkTransferCode(text) } }
                let pin = PIN(store: identity.store)
                guard try pin.isSet() else { throw CLIError("no PIN is set in \(profile.directory)") }
                let clock = profile.clock
                var made: DeviceTransfer? = nil
                _ = try profile.askPIN(pin) { typed in
                    var random = SystemRandom()
                    made = try DeviceTransfer(sending: identity, pin: typed, offer: offer, now: clock.now(), random: &random)
                }
                guard let transfer = made, let sas = transfer.sas else { throw CLIError("the transfer could not start") }
                profile.markUnlocked()
                let out = profile.output
                var contactCount = 0
                if !withoutContacts, FileManager.default.fileExists(atPath: profile.contactsPath) {
                    let store = try profile.contacts()
                    contactCount = try store.count()
                    do { try transfer.include(contactStore: try store.snapshot()) } catch let error as ItsMeError {
                        throw CLIError("\(error.message) (--without-contacts sends the identity alone)")
                    }
                }
                out.notice("Joining the new device in the relay room...")
                var decided = false
                let state: DeviceTransfer.State
                do {
                    state = try await liveTransfer(url, transfer: transfer, timeout: timeout, now: { clock.now() }) { transfer in
                        decided = true
                        return try sasMatches(transfer, out, other: "new")
                    }
                } catch let error as RelayError where error.kind == RelayError.peerLeft && decided {
                    throw CLIError(
                        "the new device left the transfer (the SAS was rejected there, or it gave up): nothing was sent",
                        exit: .checkFailed)
                } catch {
                    throw roomFailure(
                        error,
                        timedOut: decided
                            ? "the relay did not answer in time"
                            : "the new device is not in the relay room (is `itsme transfer receive` still waiting there?)",
                        outcome: "nothing was sent")
                }
                if state == .rejected { return rejected(out, nothing: "sent") }
                guard state == .done else { throw CLIError("the transfer ended \(state): nothing was sent") }
                out.line(
                    "Sent: the new device has the identity of \(identity.name) (fingerprint \(formatFingerprint(identity.fingerprint)))"
                        + (withoutContacts ? "" : " and \(counted(contactCount, "contact"))") + ", and installs them.")
                out.line("This device keeps it too; your contacts see a device change at your next verification from the new one.")
                out.document(["sent": true, "name": identity.name, "fingerprint": identity.fingerprint, "contacts": withoutContacts ? 0 : contactCount])
                return .ok
            }
        }
    }
}

/// A device transfer code as the new device shows it, checked before the
/// PIN is asked.
func checkTransferCode(_ text: String) throws -> String {
    do { return try DeviceTransfer.checkOffer(text) } catch let e as ItsMeError {
        throw CLIError(e.message + ", shown by `itsme transfer receive` on the new device")
    }
}

/// Shows the SAS and asks whether the `other` device shows the same.
private func sasMatches(_ transfer: DeviceTransfer, _ out: Output, other: String) throws -> Bool {
    guard let sas = transfer.sas else { return false }
    out.notice("")
    out.notice("SAS: \(sas.text)   (the \(other) device shows a SAS too: compare them)")
    return try SASCheck.typed(sas, prompt: "Type the SAS the \(other) device shows (or reject): ", out)
}

/// The transfer was rejected here: says that nothing was `nothing`.
private func rejected(_ out: Output, nothing: String) -> Exit {
    out.line("Rejected: nothing was \(nothing). If the SAS differed, another device answered: start again.")
    out.document([nothing: false, "state": "rejected"])
    return .checkFailed
}

/// A failure while the devices talk, as the line a person needs: a wait
/// that ran out, a relay failure (exit 4), or a message the transfer
/// refused.
private func roomFailure(_ error: Error, timedOut: String, outcome: String) -> Error {
    switch error {
    case let e as RelayError where e.kind == "timeout":
        return CLIError("\(timedOut): \(outcome)", exit: .relay)
    case let e as RelayError:
        return CLIError("relay: \(e.inWords); \(outcome)", exit: .relay)
    case let e as ItsMeError:
        return CLIError("the transfer failed: \(e.message.isEmpty ? "\(e.kind.message)" : e.message); \(outcome)")
    default:
        return error
    }
}

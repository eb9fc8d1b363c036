import ArgumentParser
import Foundation
import ItsMeKit
import RelayClient

#if canImport(Glibc)
    import Glibc
#endif

struct ItsMe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "itsme",
        abstract: "ItsMe: add people you know, then check it is really them on any call.",
        discussion: """
            Exchange keys once (in person by QR code, or at a distance through a relay), compare a short code \
            aloud, and from then on `itsme verify NAME` gives both of you fresh matching codes that a cloned \
            voice or face cannot produce.

            Your data lives in a data directory: --data-dir, else $ITSME_DATA_DIR, else $XDG_DATA_HOME/itsme, \
            else ~/.local/share/itsme.

            What protects it: by default your identity key, contacts key and PIN hash are plain files readable \
            by your user account only (mode 0600 in a 0700 directory); they are not encrypted, so anyone who can \
            read your files (you, root, your backups) can read them. Your contacts are encrypted in contacts.db \
            under the contacts key. The 6-digit PIN, asked before anything that uses secrets, locks for 5 minutes \
            (then longer) after 5 wrong tries; it does not encrypt the files. `itsme init --passphrase` encrypts \
            the secret files with a passphrase (Argon2id, 256 MiB), asked with the PIN, as ssh does for keys.

            The PIN once per sitting: after a correct PIN (and passphrase) typed at a terminal, the data directory \
            stays unlocked in that terminal for 5 minutes without a command and 30 minutes at most, or until the \
            terminal's session ends, through an agent process of yours that runs the later commands typed there (as \
            ssh-agent keeps keys); `itsme lock` ends it, `itsme unlock-time` sets it, --no-cache skips it. Without a \
            terminal there is no window. `export`, `transfer send`, `contacts remove`, `device reset` and `contacts \
            accept-loss` always ask for the PIN.

            Scripts pass the PIN with --pin-fd N (an open descriptor) or --pin-file PATH (a regular file), never \
            on the command line, where `ps` shows it, and read results with --json.

            \(Exit.helpText)
            """,
        version: "\(ItsMeKit.Version.string)",
        subcommands: [
            Init.self, WhoAmI.self, Contacts.self, QR.self, Invite.self, Realtime.self, SAS.self, Verify.self,
            OnlineVerifyCommand.self, RollCallCommand.self, DeviceChangeCode.self, AcknowledgeDeviceChange.self, Device.self, Export.self,
            Import.self, Transfer.self, ProfileCommand.self, Lock.self, UnlockTime.self, Relay.self, Demo.self,
        ]
    )
}

/// Runs a command's body: every error becomes one line on standard error
/// and an exit code (Exit), never a stack trace.
///
/// Within an unlock window (`UnlockAgent`), the command runs in the agent
/// of its data directory instead, unless `unlockAgent` is false (the
/// commands that manage the window) or the options rule the agent out.
func execute(_ global: GlobalOptions, unlockAgent: Bool = true, _ body: (Profile) async throws -> Exit) async throws {
    if unlockAgent, UnlockAgent.session == nil, global.mayUseUnlockAgent, (try? checkArgumentsAreUTF8()) != nil,
        let directory = try? GlobalOptions.dataDirectory(global.dataDir), let code = UnlockAgent.delegate(directory)
    {
        if code != 0 { throw ExitCode(code) }
        return
    }
    installInterruptHandler()
    // Line by line even into a pipe, so prompts and lines keep their order.
    setvbuf(standardOutput, nil, _IOLBF, 0)
    let code: Exit
    var profile: Profile? = nil
    defer { profile?.keepUnlocked() }
    do {
        try Sodium.initialize()
        if UnlockAgent.session == nil { try checkArgumentsAreUTF8() }
        let opened = try global.makeProfile()
        profile = opened
        code = try await body(opened)
    } catch let error as ExitCode {
        throw error
    } catch {
        let (message, exit) = explain(error)
        FileHandle.standardError.write(Data("itsme: \(message)\(storeLossHint(error))\n".utf8))
        throw ExitCode(exit.rawValue)
    }
    if code != .ok { throw ExitCode(code.rawValue) }
}

/// Ctrl-C puts the terminal back (echo may be off at a PIN prompt) and
/// exits with 5; what a command saved is saved.
private func installInterruptHandler() {
    guard isatty(STDIN_FILENO) == 1 else { return }
    tcgetattr(STDIN_FILENO, &savedTerminal)
    signal(SIGINT) { _ in
        if interruptsDeferred != 0 {
            interruptPending = 1
            return
        }
        tcsetattr(STDIN_FILENO, TCSANOW, &savedTerminal)
        let text = "\nitsme: interrupted\n"
        _ = text.withCString { write(STDERR_FILENO, $0, strlen($0)) }
        _exit(Exit.interrupted.rawValue)
    }
}

nonisolated(unsafe) private var savedTerminal = termios()
nonisolated(unsafe) private var interruptsDeferred: sig_atomic_t = 0
nonisolated(unsafe) private var interruptPending: sig_atomic_t = 0

/// From here until `allowInterrupts`, Ctrl-C waits: for a step that must
/// not stop half way (installing an imported identity).
func deferInterrupts() {
    interruptsDeferred = 1
}

/// Ends `deferInterrupts`; a Ctrl-C that came meanwhile exits now, with 5,
/// the step done.
func allowInterrupts() {
    interruptsDeferred = 0
    if interruptPending != 0 {
        tcsetattr(STDIN_FILENO, TCSANOW, &savedTerminal)
        let text = "\nitsme: interrupted (after the step in progress had finished)\n"
        _ = text.withCString { write(STDERR_FILENO, $0, strlen($0)) }
        _exit(Exit.interrupted.rawValue)
    }
}

// MARK: init, whoami

struct Init: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create your identity: your name and a 6-digit PIN.",
        discussion: "Refuses a data directory that already holds an identity. See `itsme --help` for what protects it.")

    @OptionGroup var global: GlobalOptions
    @Option(help: "Your name, as your contacts will see it (asked if not given).") var name: String?
    @Flag(help: "Encrypt the secret files with a passphrase (asked now and by every later command).") var passphrase = false

    func run() async throws {
        try await execute(global) { profile in
            try profile.refuseExistingIdentity()
            let name = try self.name.map { try DisplayName.validated($0) }
                ?? Input.ask("Your name: ") { text in refusal { try DisplayName.validated(text) } }
            let pin = try profile.choosePIN()
            let secret = passphrase ? try profile.choosePassphrase() : nil
            let identity = try profile.create(name: name, pin: pin, passphrase: secret)
            profile.output.line("Created the identity of \(identity.name) in \(profile.directory)")
            profile.output.line("Fingerprint: \(formatFingerprint(identity.fingerprint))")
            profile.output.line(
                secret == nil
                    ? "Secret files: readable by your account only, not encrypted (itsme --help)."
                    : "Secret files: encrypted with your passphrase.")
            profile.output.document(["name": identity.name, "fingerprint": identity.fingerprint, "dataDir": profile.directory])
            return .ok
        }
    }
}

func formatFingerprint(_ fingerprint: String) -> String {
    var groups: [String] = []
    var rest = Substring(fingerprint)
    while !rest.isEmpty {
        groups.append(String(rest.prefix(4)))
        rest = rest.dropFirst(4)
    }
    return groups.joined(separator: " ")
}

struct WhoAmI: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "whoami", abstract: "Show your name and fingerprint.")
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await execute(global) { profile in
            let identity = try profile.identity()
            let relay = try? profile.config().relay
            profile.output.line("Name:        \(identity.name)")
            profile.output.line("Fingerprint: \(formatFingerprint(identity.fingerprint))")
            profile.output.line("Data:        \(profile.directory)")
            profile.output.line("Secrets:     \(profile.isWrapped ? "encrypted with a passphrase" : "files readable by your account only")")
            if let relay { profile.output.line("Relay:       \(relay)") }
            var document: [String: Any] = [
                "name": identity.name, "fingerprint": identity.fingerprint, "dataDir": profile.directory,
                "passphrase": profile.isWrapped,
            ]
            if let relay { document["relay"] = relay }
            profile.output.document(document)
            return .ok
        }
    }
}

// MARK: contacts

struct Contacts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, show, rename or remove contacts; accept a contact store's loss.",
        subcommands: [List.self, Show.self, Rename.self, Remove.self, AcceptLoss.self], defaultSubcommand: List.self)

    static func document(_ c: Contact) -> [String: Any] {
        var d: [String: Any] = [
            "id": c.id, "name": c.name, "fingerprint": c.fingerprint,
            "state": c.state == .degraded
                ? "device-changed" : c.state == .awaitingPeer ? "awaiting-peer" : stateName(c.state, acknowledged: false),
            "deviceChangeAcknowledged": c.degradationAcknowledged, "method": methodName(c.exchangeMethod),
            "added": isoTime(c.createdAt), "authenticated": c.isAuthenticated,
        ]
        if let at = c.verifiedAt { d["verified"] = isoTime(at) }
        if !c.note.isEmpty { d["note"] = c.note }
        return d
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List your contacts.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await execute(global) { profile in
                let all = try profile.contacts().list()
                if all.isEmpty { profile.output.line("No contacts yet (\(suggest("qr", "show")), \(suggest("invite", "create"))).") }
                for c in all {
                    let name = c.name.padding(toLength: max(c.name.count, 20), withPad: " ", startingAt: 0)
                    profile.output.line(
                        "#\(c.id)  \(name)  \(formatFingerprint(c.fingerprint))  \(stateName(c.state, acknowledged: c.degradationAcknowledged))")
                }
                profile.output.document(["contacts": all.map(Contacts.document)])
                return .ok
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one contact.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The contact: its #id, name or fingerprint.") var contact: String

        func run() async throws {
            try await execute(global) { profile in
                let c = try profile.contact(contact)
                profile.output.line("#\(c.id) \(c.name)")
                profile.output.line("Fingerprint: \(formatFingerprint(c.fingerprint))\(c.isAuthenticated ? "" : " (unauthenticated: old format)")")
                profile.output.line("State:       \(stateName(c.state, acknowledged: c.degradationAcknowledged))")
                profile.output.line("Added:       \(isoTime(c.createdAt)) (\(methodName(c.exchangeMethod)))")
                if let at = c.verifiedAt { profile.output.line("Verified:    \(isoTime(at))") }
                if !c.note.isEmpty { profile.output.line("Note:        \(c.note)") }
                profile.output.document(Contacts.document(c))
                return .ok
            }
        }
    }

    struct Rename: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Rename a contact (on this device only).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The contact: its #id, name or fingerprint.") var contact: String
        @Argument(help: "The new name.") var name: String

        func run() async throws {
            try await execute(global) { profile in
                let c = try profile.contact(contact)
                try profile.contacts().setName(id: c.id, try DisplayName.validated(name))
                profile.output.line("#\(c.id) \(c.name) is now \(name)")
                return .ok
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a contact and its secrets.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The contact: its #id, name or fingerprint.") var contact: String
        @Flag(help: "Do not ask for confirmation.") var yes = false

        func run() async throws {
            try await execute(global) { profile in
                try profile.unlockAgain()
                let c = try profile.contact(contact)
                if !yes {
                    guard try Input.confirm("Remove \(c.name) (#\(c.id))? Codes with them stop working.") else {
                        profile.output.line("Kept \(c.name).")
                        return .ok
                    }
                }
                try profile.contacts().delete(id: c.id)
                profile.output.line("Removed \(c.name).")
                return .ok
            }
        }
    }
}

// MARK: device reset

struct Device: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "This device's secrets.", subcommands: [Reset.self])

    struct Reset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Forget this device's secrets, as a new device would.",
            discussion: """
                Each contact then hears a device tag their device does not expect at your next verification \
                and sees "device changed"; give them `itsme device-change-code` so they can acknowledge it. \
                Your identity and contacts stay.
                """)
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Do not ask for confirmation.") var yes = false

        func run() async throws {
            try await execute(global) { profile in
                try profile.unlockAgain()
                let count = try profile.contacts().count()
                if !yes {
                    guard
                        try Input.confirm(
                            "Forget this device's secrets for all \(count) contacts? Each will see a device change.")
                    else {
                        profile.output.line("Nothing changed.")
                        return .ok
                    }
                }
                let forgotten = try profile.resetDevice()
                profile.output.line(
                    "Forgot the device secrets of \(forgotten) contact\(forgotten == 1 ? "" : "s"). At the next verification they will see that your device changed; give each one the code \(suggest("device-change-code", blank: "NAME")) shows.")
                profile.output.document(["forgotten": forgotten])
                return .ok
            }
        }
    }
}

// MARK: relay

struct Relay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a relay, or set the one this data directory uses.",
        subcommands: [Serve.self, Set.self, Show.self])

    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run itsme-relay (installed beside itsme) with these arguments.",
            discussion: "Example: itsme relay serve -- --host 127.0.0.1 --port 8080 (itsme relay serve -- --help lists them).")
        @Argument(parsing: .captureForPassthrough, help: "Arguments for itsme-relay.") var arguments: [String] = []

        func run() async throws {
            let own = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
            let beside = URL(fileURLWithPath: own).deletingLastPathComponent().appendingPathComponent("itsme-relay").path
            let path =
                FileManager.default.isExecutableFile(atPath: beside)
                ? beside
                : (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/itsme-relay" }
                    .first { FileManager.default.isExecutableFile(atPath: $0) }
            guard let path else {
                FileHandle.standardError.write(Data("itsme: itsme-relay is not installed beside itsme nor on PATH\n".utf8))
                throw ExitCode(Exit.error.rawValue)
            }
            let argv = ([path] + arguments.drop { $0 == "--" }).map { strdup($0) } + [nil]
            execv(path, argv)
            FileHandle.standardError.write(Data("itsme: cannot run \(path): \(String(cString: strerror(errno)))\n".utf8))
            throw ExitCode(Exit.error.rawValue)
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Use this relay (http:// or https://) from now on.",
            discussion: "With --relay-ca FILE, its certificate may come from the private CA in FILE (the path is saved; without it, no CA is).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The relay's URL.") var url: String
        @Option(
            name: .customLong("relay-ca"),
            help: ArgumentHelp("Also trust the CA (or self-signed certificate) in this PEM file for this relay.", valueName: "file"))
        var relayCA: String?

        func run() async throws {
            try await execute(global) { profile in
                let ca = relayCA.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
                var relay: RelayURL
                do { relay = try RelayURL(url) } catch { throw CLIError("bad relay URL \(url): \(explain(error).0)") }
                if let ca {
                    do { try relay.addTrustRoots(pemFile: ca) } catch { throw CLIError("--relay-ca: \(explain(error).0)") }
                }
                var config = try profile.config()
                config.relay = relay.text
                config.relayCA = ca
                try profile.saveConfig(config)
                profile.output.line("Relay: \(relay.text)")
                if let ca { profile.output.line("Relay CA: \(ca)") }
                return .ok
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show the relay in use and where the setting comes from.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await execute(global) { profile in
                let environment = ProcessInfo.processInfo.environment["ITSME_RELAY"].flatMap { $0.isEmpty ? nil : $0 }
                let configured = try profile.config().relay
                let (url, source): (String?, String) =
                    environment != nil ? (environment, "ITSME_RELAY") : configured != nil ? (configured, "config") : (nil, "none")
                profile.output.line(url.map { "Relay: \($0) (from \(source == "config" ? "itsme relay set" : source))" } ?? "No relay set (\(suggest("relay", "set", blank: "URL"))).")
                let ca = try profile.config().relayCA
                if let ca { profile.output.line("Relay CA: \(ca)") }
                var document: [String: Any] = ["source": source]
                if let url { document["relay"] = url }
                if let ca { document["relay_ca"] = ca }
                profile.output.document(document)
                return .ok
            }
        }
    }
}

/// `--relay` and `--relay-ca`, for the commands that use a relay.
struct RelayOption: ParsableArguments {
    @Option(help: ArgumentHelp("The relay's URL (default: $ITSME_RELAY, else `itsme relay set`).", valueName: "url"))
    var relay: String?

    @Option(
        name: .customLong("relay-ca"),
        help: ArgumentHelp(
            "Also trust the CA (or self-signed certificate) in this PEM file for the relay's certificate (default: the one `itsme relay set --relay-ca` saved; $SSL_CERT_FILE replaces the system's trust roots).",
            valueName: "file"))
    var relayCA: String?
}

import ArgumentParser
import Foundation
import ItsMeKit
import ItsMePrimitives
import RelayClient

/// Options every command takes.
struct GlobalOptions: ParsableArguments {
    @Option(
        name: .customLong("data-dir"),
        help: ArgumentHelp(
            "Where this person's identity and contacts live (default: $ITSME_DATA_DIR, else $XDG_DATA_HOME/itsme, else ~/.local/share/itsme).",
            valueName: "path"))
    var dataDir: String?

    @Option(name: .customLong("pin-fd"), help: ArgumentHelp("Read the PIN from this open file descriptor (scripts).", valueName: "n"))
    var pinFD: Int32?

    @Option(name: .customLong("pin-file"), help: ArgumentHelp("Read the PIN from the first line of this file (scripts).", valueName: "path"))
    var pinFile: String?

    @Option(
        name: .customLong("passphrase-fd"),
        help: ArgumentHelp("Read the store's passphrase from this file descriptor (scripts).", valueName: "n"))
    var passphraseFD: Int32?

    @Option(
        name: .customLong("passphrase-file"),
        help: ArgumentHelp("Read the store's passphrase from the first line of this file (scripts).", valueName: "path"))
    var passphraseFile: String?

    @Flag(help: "Print JSON instead of text (read commands).")
    var json = false

    @Flag(
        name: .customLong("no-cache"),
        help: "Ask for the PIN even within an unlock window, and keep nothing unlocked after this command (also: ITSME_NO_CACHE=1, itsme unlock-time off).")
    var noCache = false

    /// Tests only: the current Unix time is read from this file.
    @Option(name: .customLong("test-clock"), help: .private)
    var testClock: String?

    func makeProfile() throws -> Profile {
        let clock: Clock
        if let testClock {
            FileHandle.standardError.write(Data("itsme: using the test clock in \(testClock): for tests only\n".utf8))
            clock = FileClock(path: testClock)
        } else {
            clock = SystemClock()
        }
        let pinFD = self.pinFD, pinFile = self.pinFile
        let passphraseFD = self.passphraseFD, passphraseFile = self.passphraseFile
        let pin = { try Input.firstLine(fd: pinFD, file: pinFile, fdOption: "--pin-fd", fileOption: "--pin-file") }
        let passphrase = {
            try Input.firstLine(fd: passphraseFD, file: passphraseFile, fdOption: "--passphrase-fd", fileOption: "--passphrase-file")
        }
        if let dataDir, !dataDir.isEmpty { Suggestions.dataDir = dataDir }
        let profile = Profile(
            directory: try Self.dataDirectory(dataDir), output: Output(json: json), clock: clock,
            pinSource: pinFD != nil || pinFile != nil ? .once(pin) : .terminal,
            passphraseSource: passphraseFD != nil || passphraseFile != nil ? .once(passphrase) : .terminal)
        if let session = UnlockAgent.session {
            // A command an unlock agent runs: this data directory is open.
            if UnlockAgent.realDirectory(profile.directory) == session.realDirectory {
                profile.adopt(store: session.store, identity: session.identity)
            }
        } else {
            profile.keepsUnlocked = mayUseUnlockAgent
        }
        return profile
    }

    /// Whether this command may run in an unlock agent, or start one: not
    /// with `--no-cache` or ITSME_NO_CACHE=1, nor when a secret comes from
    /// a file descriptor or a file (a script).
    var mayUseUnlockAgent: Bool {
        let off = ProcessInfo.processInfo.environment["ITSME_NO_CACHE"].map { !$0.isEmpty && $0 != "0" } ?? false
        return !noCache && !off && pinFD == nil && pinFile == nil && passphraseFD == nil && passphraseFile == nil
    }

    static func dataDirectory(_ flag: String?) throws -> String {
        let environment = ProcessInfo.processInfo.environment
        if let flag, !flag.isEmpty { return flag }
        if let path = environment["ITSME_DATA_DIR"], !path.isEmpty { return path }
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") { return xdg + "/itsme" }
        guard let home = environment["HOME"], !home.isEmpty else {
            throw CLIError("no data directory: set HOME, XDG_DATA_HOME or ITSME_DATA_DIR, or pass --data-dir")
        }
        return home + "/.local/share/itsme"
    }
}

/// Where a secret typed by the person comes from.
enum SecretSource {
    /// The terminal, without echo; a wrong PIN may be typed again.
    case terminal
    /// A file descriptor, a file, or the demo: one answer, no retry.
    case once(() throws -> String)
}

/// One person's data directory: the secret store (`secrets/`, optionally
/// wrapped by a passphrase), the identity in it, the contact store
/// (`contacts.db`), the relay setting (`config.json`) and the exchange in
/// progress (`pending.json`).
final class Profile {
    let directory: String
    let output: Output
    let clock: Clock
    let pinSource: SecretSource
    let passphraseSource: SecretSource

    private var openedStore: SecretStore?
    private var openedIdentity: Identity?
    private var openedContacts: ContactStore?
    private var unlocked = false
    /// Whether `unlocked` came from an unlock window rather than a PIN
    /// typed for this command.
    private var unlockedByWindow = false
    /// Whether a correct PIN typed at the terminal starts an unlock agent
    /// (`GlobalOptions.mayUseUnlockAgent`).
    var keepsUnlocked = false
    /// What an unlock agent started after this command needs: the PIN and
    /// passphrase as typed at the terminal (kept only when `keepsUnlocked`).
    private var typedPIN: [UInt8]?
    private var typedPassphrase: [UInt8]?

    init(directory: String, output: Output, clock: Clock, pinSource: SecretSource, passphraseSource: SecretSource) {
        var path = directory
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        self.directory = path
        self.output = output
        self.clock = clock
        self.pinSource = pinSource
        self.passphraseSource = passphraseSource
    }

    var secretsPath: String { directory + "/secrets" }
    /// `secrets.wrap`, beside `secrets/` (the library's rule).
    var wrapPath: String { get throws { try PassphraseSecretStore.wrapPath(directory: secretsPath) } }
    var contactsPath: String { directory + "/contacts.db" }
    var configPath: String { directory + "/config.json" }
    var pendingPath: String { directory + "/pending.json" }

    /// Anything at `secrets.wrap` (even a link or a FIFO, which opening
    /// the store then refuses) means the secret items are wrapped; so does
    /// a path that cannot be inspected, which opening then reports.
    var isWrapped: Bool { (try? PassphraseSecretStore.isWrapped(directory: secretsPath)) ?? true }

    deinit {
        if typedPIN != nil { wipe(&typedPIN!) }
        if typedPassphrase != nil { wipe(&typedPassphrase!) }
    }

    /// After the command: starts the unlock agent when a correct PIN was
    /// typed at the terminal, and forgets the PIN and passphrase.
    func keepUnlocked() {
        guard var pin = typedPIN else { return }
        UnlockAgent.start(self, pin: pin, passphrase: typedPassphrase)
        wipe(&pin)
        wipe(&typedPIN!)
        typedPIN = nil
        if typedPassphrase != nil { wipe(&typedPassphrase!) }
        typedPassphrase = nil
    }

    private func readSecret(_ source: SecretSource, prompt: String, _ what: Secret) throws -> String {
        switch source {
        case .terminal: return try Input.secret(prompt, what)
        case .once(let read): return try read()
        }
    }

    /// Creates the data directory with mode 0700, or, if it exists and
    /// others may write into it (group or world write bits), narrows it to
    /// 0700 and says so: anyone who can write there could swap the files
    /// the identity and the contacts live in.
    func makePrivateDirectory() throws {
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var info = stat()
        guard stat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw CLIError("\(directory) is not a directory")
        }
        let permissions = Int(info.st_mode & 0o777)
        if permissions & 0o022 != 0 {
            guard chmod(directory, 0o700) == 0 else {
                throw CLIError(
                    "\(directory) may be written by others (mode \(String(permissions, radix: 8))) and cannot be changed: "
                        + "use a directory of your own (--data-dir)")
            }
            output.warn(
                "\(directory) could be written by others (mode \(String(permissions, radix: 8))); it is now readable and writable by you only (700)")
        }
    }

    // MARK: Secret store and identity

    /// Creates the directory (mode 0700), the secret store (wrapped when
    /// `passphrase` is given), the identity and its PIN.
    /// Refuses a data directory where a person lives already: an identity
    /// item, wrapped or not. `init` asks it before asking anything.
    func refuseExistingIdentity() throws {
        guard !FileManager.default.fileExists(atPath: secretsPath + "/" + Identity.itemName), !isWrapped else {
            throw CLIError("\(directory) already holds an identity (\(suggest("whoami"))); use another --data-dir")
        }
    }

    /// Creates the identity with `pin` (and `passphrase` for wrapped
    /// secret files). Chosen at the terminal, they open the unlock window
    /// as a PIN typed there does: the next commands ask for nothing.
    func create(name: String, pin: String, passphrase: String?) throws -> Identity {
        try refuseExistingIdentity()
        try makePrivateDirectory()
        let store = try newSecretStore(passphrase: passphrase)
        let pinCheck = PIN(store: store)
        let identity = try Identity.create(store: store, name: name)
        try pinCheck.set(pin)
        openedStore = store
        openedIdentity = identity
        unlocked = true
        keepChosen(pin: pin, passphrase: passphrase)
        return identity
    }

    func secretStore() throws -> SecretStore {
        if let openedStore { return openedStore }
        guard FileManager.default.fileExists(atPath: secretsPath) else {
            throw CLIError("no identity in \(directory): run \(suggest("init")) first (or pass --data-dir)")
        }
        let store: SecretStore
        if isWrapped {
            var passphrase = Array(try readSecret(passphraseSource, prompt: "Passphrase of \(directory): ", .passphrase).utf8)
            defer { wipe(&passphrase) }
            store = try PassphraseSecretStore.open(directory: secretsPath, passphrase: passphrase)
            if keepsUnlocked, case .terminal = passphraseSource { typedPassphrase = passphrase }
        } else {
            store = try FileSecretStore(directory: secretsPath)
        }
        openedStore = store
        return store
    }

    /// The secret store an imported identity goes into: this data
    /// directory's (opened as any command opens it), or a new one (the
    /// directory made with mode 0700, the store wrapped with a new
    /// passphrase when `passphrase`). Made before the export password is
    /// tried, since its attempt counter lives there.
    func storeForImport(passphrase: Bool) throws -> SecretStore {
        if let openedStore { return openedStore }
        if FileManager.default.fileExists(atPath: secretsPath) {
            if passphrase && !isWrapped {
                throw CLIError(
                    "\(directory) already has secret files without a passphrase: import without --passphrase, or into another --data-dir")
            }
            return try secretStore()
        }
        let secret = passphrase ? try choosePassphrase() : nil
        try makePrivateDirectory()
        let store = try newSecretStore(passphrase: secret)
        openedStore = store
        return store
    }

    /// A new secret store in `secrets/` (callers have made sure it holds no
    /// identity): a stale `secrets.wrap` left without its items is
    /// removed, then the store is wrapped under `passphrase` if given, else
    /// plain files.
    private func newSecretStore(passphrase: String?) throws -> SecretStore {
        if isWrapped { try FileManager.default.removeItem(atPath: try wrapPath) }
        if let passphrase {
            var bytes = Array(passphrase.utf8)
            defer { wipe(&bytes) }
            return try PassphraseSecretStore.create(directory: secretsPath, passphrase: bytes)
        }
        return try FileSecretStore(directory: secretsPath)
    }

    /// After an install: `identity` is this directory's, its PIN checked or
    /// just set.
    func adopt(_ identity: Identity) {
        openedIdentity = identity
        openedContacts = nil
        unlocked = true
    }

    /// In a command an unlock agent runs: the store and identity it opened.
    func adopt(store: SecretStore, identity: Identity) {
        openedStore = store
        adopt(identity)
        unlockedByWindow = true
    }

    func identity() throws -> Identity {
        if let openedIdentity { return openedIdentity }
        do {
            let identity = try Identity.load(store: try secretStore())
            openedIdentity = identity
            return identity
        } catch let error as ItsMeError where error.kind == .notFound {
            throw CLIError("no identity in \(directory): run \(suggest("init")) first (or pass --data-dir)")
        }
    }

    /// Asks for the PIN (up to three times at a terminal, once from a file
    /// descriptor or file) before anything that uses secrets. Every wrong
    /// PIN counts: after five, the PIN is locked for 5 minutes, then longer.
    func unlock() throws {
        guard !unlocked else { return }
        _ = try unlockReturningPIN()
    }

    /// For a command that removes what cannot be had back (a contact, this
    /// device's secrets, the contacts a damaged store lost): the PIN, asked
    /// even inside an unlock window, as `export` and `transfer send` ask
    /// it. Asked once: not again when this command has already checked it.
    func unlockAgain() throws {
        guard !unlocked || unlockedByWindow else { return }
        _ = try unlockReturningPIN()
    }

    /// A PIN (and passphrase) just chosen at the terminal and set opens the
    /// unlock window after the command, as one typed there does.
    func keepChosen(pin: String, passphrase: String? = nil) {
        guard keepsUnlocked, case .terminal = pinSource else { return }
        typedPIN = Array(pin.utf8)
        if let passphrase, case .terminal = passphraseSource { typedPassphrase = Array(passphrase.utf8) }
    }

    /// After a call that checked the PIN itself (a transfer's sender): this
    /// command asks for it no more.
    func markUnlocked() {
        unlocked = true
        unlockedByWindow = false
    }

    /// `unlock`, for a command that hands the PIN to the library again (an
    /// export checks it itself): the PIN as typed.
    func unlockReturningPIN() throws -> String {
        let pin = PIN(store: try identity().store)
        guard try pin.isSet() else { throw CLIError("no PIN is set in \(directory)") }
        let clock = self.clock
        let typed = try askPIN(pin) { try pin.verify($0, now: clock.now()) }
        unlocked = true
        unlockedByWindow = false
        return typed
    }

    /// The PIN loop: asks for the PIN of `pin` and runs `check` (which
    /// throws the library's `.wrongPIN` or `.locked`, as `PIN.verify` and
    /// every call that checks the PIN itself do) with it, until it passes:
    /// three tries at a terminal, one from a file descriptor or file. A PIN
    /// that is not 6 digits is asked again without counting. Returns the
    /// PIN that passed.
    func askPIN(_ pin: PIN, prompt: String = "PIN: ", check: (String) throws -> Void) throws -> String {
        let tries: Int
        if case .terminal = pinSource { tries = 3 } else { tries = 1 }
        for attempt in 1...tries {
            let status = try pin.status(now: clock.now())
            if status.waitSeconds > 0 {
                throw CLIError(
                    "the PIN is locked after \(status.failures) wrong PINs: try again in \(duration(Int64(status.waitSeconds)))",
                    exit: .locked)
            }
            let typed = try readSecret(pinSource, prompt: prompt, .pin)
            guard typed.count == PIN.length, typed.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                output.warn("a PIN is exactly \(PIN.length) digits (not counted as a wrong PIN)")
                if attempt < tries { continue }
                throw CLIError("a PIN is exactly \(PIN.length) digits")
            }
            do {
                try check(typed)
                if keepsUnlocked, case .terminal = pinSource { typedPIN = Array(typed.utf8) }
                return typed
            } catch let error as ItsMeError where error.kind == .wrongPIN {
                let after = try pin.status(now: clock.now())
                let left = after.failures < AttemptLimiter.freeFailures ? AttemptLimiter.freeFailures - after.failures : 0
                let message =
                    after.waitSeconds > 0
                    ? "wrong PIN; locked for \(duration(Int64(after.waitSeconds))) after \(after.failures) wrong PINs"
                    : "wrong PIN (\(left) more before a lockout)"
                if after.waitSeconds > 0 { throw CLIError(message, exit: .locked) }
                if attempt == tries { throw CLIError(message, exit: .checkFailed) }
                output.warn(message)
            } catch let error as ItsMeError where error.kind == .locked {
                let after = try pin.status(now: clock.now())
                throw CLIError("the PIN is locked: try again in \(duration(Int64(after.waitSeconds)))", exit: .locked)
            }
        }
        throw CLIError("wrong PIN", exit: .checkFailed)
    }

    /// A new PIN: typed twice at a terminal, or read once from the PIN's
    /// file descriptor or file (`init`, and an import onto a device
    /// without one).
    func choosePIN() throws -> String {
        let valid = { (text: String) in text.count == PIN.length && text.allSatisfy({ $0.isASCII && $0.isNumber }) }
        switch pinSource {
        case .once(let read):
            let pin = try read()
            guard valid(pin) else { throw CLIError("a PIN is exactly \(PIN.length) digits") }
            return pin
        case .terminal:
            return try Input.newSecret(.pin) { valid($0) ? nil : "a PIN is exactly \(PIN.length) digits" }
        }
    }

    /// The contact store, after the PIN.
    func contacts() throws -> ContactStore {
        if let openedContacts { return openedContacts }
        try unlock()
        let store = try ContactStore(path: contactsPath, identity: try identity())
        openedContacts = store
        return store
    }

    /// A new passphrase for the secret files (`--passphrase`): typed twice
    /// at a terminal, or read once from its file descriptor or file.
    func choosePassphrase() throws -> String {
        let secret: String
        switch passphraseSource {
        case .once(let read): secret = try read()
        case .terminal:
            secret = try Input.newSecret(.passphrase) { $0.count >= 10 ? nil : "a passphrase is at least 10 characters" }
        }
        guard secret.count >= 10 else { throw CLIError("a passphrase is at least 10 characters") }
        return secret
    }

    // MARK: Contacts by what a person types

    /// A contact by id ("3" or "#3"), exact name (any case), or fingerprint.
    func contact(_ text: String) throws -> Contact {
        let store = try contacts()
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        var digits = Substring(trimmed)
        if digits.hasPrefix("#") { digits = digits.dropFirst() }
        if let id = Int64(digits), id > 0 {
            do { return try store.contact(id: id) } catch let e as ItsMeError where e.kind == .notFound {}
        }
        // Names are sealed, so only a scan finds one; fingerprints are indexed.
        let byName = try store.list().filter { $0.name.caseInsensitiveCompare(trimmed) == .orderedSame }
        if byName.count == 1 { return byName[0] }
        if byName.count > 1 {
            throw CLIError("\(byName.count) contacts are named \(trimmed): give the id (\(suggest("contacts", "list")))")
        }
        let fingerprint = trimmed.uppercased().filter { $0 != " " && $0 != "-" }
        if fingerprint.utf8.count == Fingerprint.textCount, Hex.decode(fingerprint) != nil {
            let byFingerprint = try store.contacts(fingerprint: fingerprint)
            if byFingerprint.count == 1 { return byFingerprint[0] }
        }
        throw CLIError("no contact \"\(trimmed)\" (\(suggest("contacts", "list")) shows them)")
    }

    // MARK: Configuration

    struct Config: Codable {
        var relay: String?
        /// A PEM file of trust roots for the relay (`itsme relay set --relay-ca`).
        var relayCA: String?
        /// `itsme unlock-time`: seconds idle and at most, or off.
        var unlockIdle: Int?
        var unlockAbsolute: Int?
        var unlockOff: Bool?

        /// The unlock window this data directory uses; nil when off.
        var unlockWindow: UnlockAgent.Window? {
            if unlockOff == true { return nil }
            let standard = UnlockAgent.Window.standard
            let window = UnlockAgent.Window(idle: unlockIdle ?? standard.idle, absolute: unlockAbsolute ?? standard.absolute)
            guard window.idle > 0, window.absolute >= window.idle, window.absolute <= UnlockAgent.Window.longest else { return standard }
            return window
        }
    }

    func config() throws -> Config {
        guard let data = try readDataFile(configPath, advice: "remove it, or fix it by hand") else { return Config() }
        do { return try JSONDecoder().decode(Config.self, from: data) } catch {
            throw CLIError("\(configPath) is damaged: remove it, or fix it by hand")
        }
    }

    func saveConfig(_ config: Config) throws {
        try makePrivateDirectory()
        try writePrivateFile(configPath, try JSONEncoder().encode(config))
    }

    /// The relay: `--relay`, else $ITSME_RELAY, else `itsme relay set`;
    /// trusting, besides the system's roots (or $SSL_CERT_FILE's), the
    /// certificates of `--relay-ca`, else those saved by `itsme relay set
    /// --relay-ca`.
    func relayURL(_ flag: String?, ca: String? = nil) throws -> RelayURL {
        let environment = ProcessInfo.processInfo.environment["ITSME_RELAY"]
        let saved = try config()
        guard let text = flag ?? environment.flatMap({ $0.isEmpty ? nil : $0 }) ?? saved.relay else {
            throw CLIError("no relay: pass --relay URL, set ITSME_RELAY, or run \(suggest("relay", "set", blank: "URL"))")
        }
        var url: RelayURL
        do { url = try RelayURL(text) } catch { throw CLIError("bad relay URL \(text): \(explain(error).0)") }
        if let file = ca ?? saved.relayCA {
            do { try url.addTrustRoots(pemFile: file) } catch { throw CLIError("--relay-ca: \(explain(error).0)") }
        }
        return url
    }

    /// A relay URL saved with an exchange in progress or a published
    /// profile, trusting the roots saved by `itsme relay set --relay-ca`.
    func savedRelayURL(_ text: String) throws -> RelayURL {
        var url = try RelayURL(text)
        if let file = try config().relayCA {
            do { try url.addTrustRoots(pemFile: file) } catch { throw CLIError("the saved relay CA: \(explain(error).0)") }
        }
        return url
    }

    // MARK: The exchange in progress

    /// The exchange between commands: sealed (encrypted under the device
    /// key), with what carries it.
    struct Pending: Codable {
        var version = 1
        var method: String
        var sealed: String
        var relay: String?
        var session: InviteSession.SavedState?
    }

    func pending() throws -> (Pending, Exchange)? {
        guard let data = try readDataFile(pendingPath, advice: "remove it to start again") else { return nil }
        guard let file = try? JSONDecoder().decode(Pending.self, from: data), file.version == 1,
            let sealed = Data(base64Encoded: file.sealed)
        else {
            throw CLIError("\(pendingPath) is damaged: remove it to start again")
        }
        try unlock()
        let exchange = try Exchange.restore(identity: try identity(), store: try contacts(), sealed: Array(sealed), now: clock.now())
        return (file, exchange)
    }

    func savePending(_ exchange: Exchange, relay: RelayURL? = nil, session: InviteSession.SavedState? = nil) throws {
        let file = Pending(
            method: methodName(exchange.method), sealed: Data(try exchange.seal()).base64EncodedString(),
            relay: relay?.text, session: session)
        try writePrivateFile(pendingPath, try JSONEncoder().encode(file))
    }

    func clearPending() {
        unlink(pendingPath)
    }

    /// Refuses to start an exchange while another is in progress. A
    /// `pending.json` that is not a regular file is refused as damaged
    /// (and left as it is).
    func requireNoPending() throws {
        try unlock()
        guard try readDataFile(pendingPath, advice: "remove it to start again") != nil else { return }
        if let (file, exchange) = try? pending() {
            switch exchange.state {
            case .compareSAS:
                throw CLIError(
                    "a \(file.method) exchange waits for its SAS: \(suggest("sas", "confirm")) (the same) or \(suggest("sas", "reject")) (different, or to drop it)")
            case .awaitingPeer:
                // Only QR and invite exchanges wait in pending.json.
                let next = exchange.method == .invite ? suggest("invite", "status") : suggest("qr", "scan")
                throw CLIError("a \(file.method) exchange is in progress: carry it on (\(next)) or drop it (\(suggest("sas", "reject")))")
            default:
                break
            }
        }
        clearPending()
    }
}

/// An exchange's method by the name its contact will record.
func methodName(_ method: Exchange.Method) -> String {
    Contact.ExchangeMethod(rawValue: UInt8(method.rawValue)).map(methodName) ?? "method \(method.rawValue)"
}

func methodName(_ method: Contact.ExchangeMethod) -> String {
    switch method {
    case .qr: return "qr"
    case .bluetooth: return "bluetooth"
    case .invite: return "invite"
    case .realtime: return "realtime"
    }
}

func stateName(_ state: Contact.State, acknowledged: Bool) -> String {
    switch state {
    case .unverified: return "unverified"
    case .verified: return "verified"
    case .degraded: return acknowledged ? "device changed (acknowledged)" : "device changed"
    case .awaitingPeer: return "awaiting their confirmation"
    }
}

import CUnlockAgent
import Foundation
import ItsMeKit

#if canImport(Glibc)
    import Glibc
#endif

/// The unlock window (docs/CLI.md, "The unlock window"): after a correct
/// PIN typed at a terminal (and the passphrase, for a wrapped store), a
/// process of the user's own, the agent, keeps this data directory
/// unlocked for a while, and later commands run inside it instead of
/// asking again.
///
/// The agent never hands out key material. A client (any later `itsme`
/// command) connects to the agent's Unix socket, passes its standard
/// input, output and error (SCM_RIGHTS), its arguments, working directory
/// and environment; the agent forks, and its child, which holds the
/// unlocked store and identity the agent opened, runs the command on
/// those descriptors. The client forwards Ctrl-C and waits for the exit
/// code. Key material stays in the agent and the children it forks:
/// processes that are not dumpable (no core file, no ptrace by the same
/// user), whose secrets are in locked memory (sodium_malloc).
///
/// The agent answers only its own user (SO_PEERCRED), lives for at most
/// the window's absolute time and ends when idle for the window's idle
/// time, when `itsme lock` asks, or when what it unlocked changes on disk
/// (an import, a reset, a new PIN or passphrase). It starts only from a
/// command whose PIN came from the terminal, never with `--pin-fd`,
/// `--pin-file` or their passphrase twins, nor with `--no-cache`,
/// `ITSME_NO_CACHE=1` or `itsme unlock-time off`.
///
/// It is forked without threads: it is entered from `main` before any
/// asynchronous code or Dispatch runs, and forks only while it has a
/// single thread, so each child starts the runtime afresh.
enum UnlockAgent {
    /// `argv[1]` of the agent process.
    static let serveArgument = "__unlock-agent"

    /// How long a data directory stays unlocked.
    struct Window: Equatable {
        /// Seconds without a command after which the agent ends.
        var idle: Int
        /// Seconds after the PIN was typed after which the agent ends, busy or not.
        var absolute: Int

        static let standard = Window(idle: 5 * 60, absolute: 30 * 60)
        /// The longest either time may be set to.
        static let longest = 12 * 3600

        var text: String { "\(duration(Int64(idle))) idle, \(duration(Int64(absolute))) at most" }
    }

    /// In the agent and the children it forks: what the agent unlocked.
    /// Nil in every other process.
    nonisolated(unsafe) static var session: Session?

    final class Session {
        /// The data directory as the agent resolved it (`realpath`).
        let realDirectory: String
        let store: SecretStore
        let identity: Identity

        init(realDirectory: String, store: SecretStore, identity: Identity) {
            self.realDirectory = realDirectory
            self.store = store
            self.identity = identity
        }
    }

    // MARK: Where the socket lives

    /// This user's agent sockets: `$XDG_RUNTIME_DIR/itsme` when
    /// XDG_RUNTIME_DIR is set, else `/tmp/itsme-UID`; created with mode
    /// 0700 when `create`, and checked to be a directory (not a link)
    /// owned by this user that nobody else may enter.
    static func socketDirectory(create: Bool) throws -> String {
        let environment = ProcessInfo.processInfo.environment
        let path: String
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            path = (runtime.hasSuffix("/") ? String(runtime.dropLast()) : runtime) + "/itsme"
        } else {
            path = "/tmp/itsme-\(getuid())"
        }
        if create && mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw CLIError("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        var info = stat()
        guard lstat(path, &info) == 0 else { throw CLIError("no socket directory \(path)") }
        guard info.st_mode & S_IFMT == S_IFDIR, info.st_uid == getuid() else {
            throw CLIError("\(path) is not a directory of yours: the PIN is not kept unlocked")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw CLIError(
                "\(path) may be entered by others (mode \(String(info.st_mode & 0o777, radix: 8))): the PIN is not kept unlocked")
        }
        return path
    }

    /// The socket of the agent for the data directory `realDirectory`
    /// (resolved with `realpath`): named by a digest of that path, so
    /// there is one agent per data directory.
    static func socketPath(realDirectory: String, create: Bool) throws -> String {
        let digest = SHA256.hash(Array(realDirectory.utf8)).prefix(8).map { String(format: "%02x", $0) }.joined()
        let path = try socketDirectory(create: create) + "/agent-\(digest).sock"
        guard path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw CLIError("the socket path \(path) is too long: set XDG_RUNTIME_DIR to a shorter directory")
        }
        return path
    }

    static func realDirectory(_ directory: String) -> String? {
        guard let resolved = realpath(directory, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// A digest of what an unlock rests on, as stored: the identity and
    /// PIN items and the wrap file (present or not). Any import, transfer,
    /// reset, new PIN or new passphrase changes it. Nil when the identity
    /// item cannot be read.
    static func stamp(realDirectory: String) -> [UInt8]? {
        let secrets = realDirectory + "/secrets"
        var material: [UInt8] = []
        for (index, path) in [secrets + "/" + Identity.itemName, secrets + "/itsme.pin", secrets + ".wrap"].enumerated() {
            guard let data = FileManager.default.contents(atPath: path) else {
                if index == 0 { return nil }
                material += [0, 0, 0, 0]
                continue
            }
            let digest = SHA256.hash(Array(data))
            material += [1, 0, 0, 0] + digest
        }
        return SHA256.hash(material)
    }

    // MARK: Messages

    /// One message on an agent connection: a 4-byte big-endian length and
    /// a JSON object, with any passed descriptors attached to its first
    /// bytes.
    struct Connection {
        let fd: Int32
        static let maxMessage = 1 << 20

        func send(_ object: [String: Any], fds: [Int32] = []) throws {
            let body = try JSONSerialization.data(withJSONObject: object)
            let length = UInt32(body.count)
            let bytes = [UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF)] + body
            let sent = bytes.withUnsafeBytes { raw in
                fds.withUnsafeBufferPointer { unlockagent_send(fd, raw.baseAddress, raw.count, $0.baseAddress, Int32($0.count)) }
            }
            guard sent == 0 else { throw CLIError("the unlock agent's socket: \(String(cString: strerror(errno)))") }
        }

        /// The next message and the descriptors that came with it; nil at
        /// the end of the stream, or when nothing came within `timeout`
        /// seconds.
        func receive(timeout: Double) -> ([String: Any], [Int32])? {
            var fds: [Int32] = []
            guard let header = read(4, timeout: timeout, fds: &fds) else { return nil }
            let length = Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
            guard length <= Self.maxMessage, let body = read(length, timeout: timeout, fds: &fds),
                let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]
            else {
                fds.forEach { close($0) }
                return nil
            }
            return (object, fds)
        }

        private func read(_ count: Int, timeout: Double, fds: inout [Int32]) -> [UInt8]? {
            var bytes = [UInt8](repeating: 0, count: count)
            var have = 0
            let deadline = monotonicNow() + timeout
            while have < count {
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let left = deadline - monotonicNow()
                guard left > 0, poll(&poller, 1, Int32(left * 1000) + 1) > 0 else { return nil }
                var carried = [Int32](repeating: -1, count: Int(UNLOCKAGENT_MAX_FDS))
                var carriedCount: Int32 = 0
                let got = bytes.withUnsafeMutableBytes { raw in
                    unlockagent_receive(fd, raw.baseAddress! + have, count - have, &carried, &carriedCount)
                }
                fds += carried.prefix(Int(carriedCount))
                guard got > 0 else { return nil }
                have += got
            }
            return bytes
        }
    }

    static func monotonicNow() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// A connected socket to the agent at `path`, when one listens there
    /// and runs as this user.
    static func connect(_ path: String) -> Connection? {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = socketAddress(path)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        var uid: uid_t = 0
        guard connected == 0, unlockagent_peer(fd, &uid, nil) == 0, uid == getuid() else {
            close(fd)
            return nil
        }
        return Connection(fd: fd)
    }

    /// The address of the socket at `path` (which `socketPath` keeps
    /// short enough).
    static func socketAddress(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in raw.copyBytes(from: Array(path.utf8).prefix(raw.count - 1)) }
        return address
    }

    // MARK: Client side

    /// What the agent for a data directory says when a client connects.
    struct Greeting {
        let fingerprint: String
        let name: String
        let idleLeft: Int
        let absoluteLeft: Int
    }

    /// The agent of the data directory `directory`, when one answers for
    /// the identity stored there now (the stamps agree). An agent that
    /// answers for something else is asked to end.
    static func attach(_ directory: String) -> (Connection, Greeting)? {
        guard session == nil, let real = realDirectory(directory),
            let path = try? socketPath(realDirectory: real, create: false),
            let connection = connect(path)
        else { return nil }
        // An agent still unlocking (Argon2id for a wrapped store) answers
        // within seconds.
        guard let (greeting, fds) = connection.receive(timeout: 20) else {
            close(connection.fd)
            return nil
        }
        fds.forEach { close($0) }
        guard let stampText = greeting["stamp"] as? String, let fingerprint = greeting["fingerprint"] as? String,
            let name = greeting["name"] as? String, let idleLeft = greeting["idle_left"] as? Int,
            let absoluteLeft = greeting["absolute_left"] as? Int
        else {
            close(connection.fd)
            return nil
        }
        guard let stamp = stamp(realDirectory: real), Hex.encodeUpper(stamp) == stampText else {
            try? connection.send(["op": "lock"])
            close(connection.fd)
            return nil
        }
        return (connection, Greeting(fingerprint: fingerprint, name: name, idleLeft: idleLeft, absoluteLeft: absoluteLeft))
    }

    /// Runs this command in the agent of `directory`: its exit code, or
    /// nil when no agent answers for it (the command then runs here).
    static func delegate(_ directory: String) -> Int32? {
        guard let (connection, _) = attach(directory) else { return nil }
        defer { close(connection.fd) }
        var pipeFDs: [Int32] = [-1, -1]
        guard unlockagent_pipe(&pipeFDs, O_CLOEXEC | O_NONBLOCK) == 0 else { return nil }
        forwardSignalsTo = pipeFDs[1]
        for signal in forwardedSignals {
            Glibc.signal(signal) { number in
                var byte = UInt8(truncatingIfNeeded: number)
                _ = Glibc.write(UnlockAgent.forwardSignalsTo, &byte, 1)
            }
        }
        let request: [String: Any] = [
            "op": "run", "argv": Array(CommandLine.arguments.dropFirst()),
            "cwd": FileManager.default.currentDirectoryPath, "env": ProcessInfo.processInfo.environment,
        ]
        guard (try? connection.send(request, fds: [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO])) != nil else { return nil }
        while true {
            var pollers = [pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0), pollfd(fd: pipeFDs[0], events: Int16(POLLIN), revents: 0)]
            if poll(&pollers, 2, -1) < 0 { continue }
            if pollers[1].revents != 0 {
                var byte: UInt8 = 0
                while Glibc.read(pipeFDs[0], &byte, 1) == 1 { try? connection.send(["op": "signal", "signal": Int(byte)]) }
            }
            guard pollers[0].revents != 0 else { continue }
            guard let (reply, fds) = connection.receive(timeout: 10) else {
                FileHandle.standardError.write(Data("itsme: the unlock agent ended while it ran this command\n".utf8))
                return Exit.error.rawValue
            }
            fds.forEach { close($0) }
            if let code = reply["exit"] as? Int { return Int32(truncatingIfNeeded: code) }
            if let signal = reply["signal"] as? Int { return 128 + Int32(truncatingIfNeeded: signal) }
            // Refused before the command started (what it unlocked changed): run it here.
            if reply["refused"] != nil { return nil }
        }
    }

    static let forwardedSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]
    nonisolated(unsafe) static var forwardSignalsTo: Int32 = -1

    /// Starts the agent for `profile`'s data directory after a correct
    /// `pin` typed at a terminal (with `passphrase`, the one that opened a
    /// wrapped store), when the profile allows it and the window is not
    /// off. Says why when it cannot.
    static func start(_ profile: Profile, pin: [UInt8], passphrase: [UInt8]?) {
        guard session == nil, profile.keepsUnlocked, isatty(STDIN_FILENO) == 1,
            let window = (try? profile.config())?.unlockWindow, let real = realDirectory(profile.directory),
            let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        else { return }
        do {
            _ = try socketPath(realDirectory: real, create: true)
        } catch {
            profile.output.warn("\(explain(error).0)")
            return
        }
        var message = Array("\(window.idle) \(window.absolute)\n".utf8) + pin + [0x0A]
        if let passphrase { message += passphrase }
        defer { wipe(&message) }
        var pipeFDs: [Int32] = [-1, -1]
        guard message.count < 60_000, unlockagent_pipe(&pipeFDs, O_CLOEXEC) == 0 else { return }
        let written = message.withUnsafeBytes { Glibc.write(pipeFDs[1], $0.baseAddress, $0.count) }
        close(pipeFDs[1])
        defer { close(pipeFDs[0]) }
        guard written == message.count else { return }
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup(executable), strdup(serveArgument), strdup(real), nil]
        defer { argv.forEach { free($0) } }
        if unlockagent_spawn(executable, &argv, pipeFDs[0]) < 0 {
            profile.output.warn("the PIN is not kept unlocked: \(String(cString: strerror(errno)))")
        }
    }

    // MARK: The agent

    /// The agent process (`itsme __unlock-agent REALDIR`, started by
    /// `start`): reads the window, PIN and passphrase from standard input,
    /// unlocks, serves until its window ends. Never returns.
    static func serve(_ directory: String) -> Never {
        _ = unlockagent_harden()
        signal(SIGPIPE, SIG_IGN)
        guard (try? Sodium.initialize()) != nil else { exit(Exit.error.rawValue) }
        var message: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while message.count < 65536 {
            let got = Glibc.read(STDIN_FILENO, &chunk, chunk.count)
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { break }
            message += chunk.prefix(got)
        }
        wipe(&chunk)
        let null = open("/dev/null", O_RDONLY)
        if null >= 0 && null != STDIN_FILENO {
            dup2(null, STDIN_FILENO)
            close(null)
        }
        guard let agent = Agent(directory: directory, message: &message) else { exit(0) }
        wipe(&message)
        agent.run()
    }

    final class Agent {
        let realDirectory: String
        let window: Window
        let socketPath: String
        let listener: Int32
        var socketInode: ino_t = 0
        let stamp: [UInt8]
        /// When the store was open and the PIN checked: the window starts.
        var started = 0.0
        var lastActivity = 0.0
        var lastStampCheck = 0.0
        var accepting = true
        var children: [Child] = []

        struct Child {
            let pid: pid_t
            var connection: Int32
            /// Readable at its end when the child exits (or execs).
            var exitPipe: Int32
        }

        /// Parses the start message ("IDLE ABSOLUTE\nPIN\nPASSPHRASE"),
        /// binds the socket (nil if another agent serves this directory),
        /// unlocks (nil on any failure).
        init?(directory: String, message: inout [UInt8]) {
            guard UnlockAgent.realDirectory(directory) == directory else { return nil }
            let lines = message.split(separator: 0x0A, maxSplits: 2, omittingEmptySubsequences: false)
            guard lines.count >= 2, let header = String(validating: lines[0], as: UTF8.self) else { return nil }
            let times = header.split(separator: " ").compactMap { Int($0) }
            guard times.count == 2, times[0] > 0, times[1] >= times[0], times[1] <= Window.longest else { return nil }
            var pin = String(decoding: lines[1], as: UTF8.self)
            var passphrase = lines.count == 3 ? String(decoding: lines[2], as: UTF8.self) : ""
            defer {
                pin = ""
                passphrase = ""
            }
            window = Window(idle: times[0], absolute: times[1])
            realDirectory = directory
            guard let path = try? UnlockAgent.socketPath(realDirectory: directory, create: true),
                let listener = Self.listen(path)
            else { return nil }
            socketPath = path
            self.listener = listener
            var info = stat()
            if stat(path, &info) == 0 { socketInode = info.st_ino }
            // From here on, failing must take the socket away again.
            let pinText = pin, passphraseText = passphrase
            let profile = Profile(
                directory: directory, output: Output(json: false), clock: SystemClock(), pinSource: .once({ pinText }),
                passphraseSource: .once({ passphraseText }))
            guard let before = UnlockAgent.stamp(realDirectory: directory),
                let store = try? profile.secretStore(), let identity = try? profile.identity(),
                (try? profile.unlock()) != nil, UnlockAgent.stamp(realDirectory: directory) == before
            else {
                Self.unlinkIfOurs(path, inode: socketInode)
                return nil
            }
            stamp = before
            UnlockAgent.session = Session(realDirectory: directory, store: store, identity: identity)
            _ = unlockagent_lock_memory()
            started = UnlockAgent.monotonicNow()
            lastActivity = started
            lastStampCheck = started
        }

        /// A listening socket at `path`; a socket left there by an agent
        /// that ended is replaced, one that answers is left alone (nil).
        static func listen(_ path: String) -> Int32? {
            for _ in 0..<2 {
                let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                guard fd >= 0 else { return nil }
                var address = UnlockAgent.socketAddress(path)
                let previous = umask(0o177)
                let bound = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
                }
                umask(previous)
                if bound == 0 && Glibc.listen(fd, 16) == 0 { return fd }
                let reason = errno
                close(fd)
                guard reason == EADDRINUSE else { return nil }
                if let live = UnlockAgent.connect(path) {
                    close(live.fd)
                    return nil
                }
                var info = stat()
                guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFSOCK else { return nil }
                unlink(path)
            }
            return nil
        }

        static func unlinkIfOurs(_ path: String, inode: ino_t) {
            var info = stat()
            if lstat(path, &info) == 0, info.st_ino == inode { unlink(path) }
        }

        /// Takes no more commands: the socket goes, the unlocked store and
        /// identity are released (wiped); commands running finish.
        func stopAccepting() {
            guard accepting else { return }
            accepting = false
            Self.unlinkIfOurs(socketPath, inode: socketInode)
            close(listener)
            UnlockAgent.session = nil
        }

        func run() -> Never {
            while accepting || !children.isEmpty {
                let now = UnlockAgent.monotonicNow()
                if accepting {
                    if now >= started + Double(window.absolute) { stopAccepting() }
                    if children.isEmpty && now >= lastActivity + Double(window.idle) { stopAccepting() }
                    if now >= lastStampCheck + 5 {
                        lastStampCheck = now
                        if UnlockAgent.stamp(realDirectory: realDirectory) != stamp { stopAccepting() }
                    }
                }
                var pollers: [pollfd] = []
                if accepting { pollers.append(pollfd(fd: listener, events: Int16(POLLIN), revents: 0)) }
                for child in children {
                    pollers.append(pollfd(fd: child.connection, events: Int16(POLLIN), revents: 0))
                    pollers.append(pollfd(fd: child.exitPipe, events: Int16(POLLIN), revents: 0))
                }
                var wait = 5.0
                if accepting {
                    wait = min(wait, started + Double(window.absolute) - now)
                    if children.isEmpty { wait = min(wait, lastActivity + Double(window.idle) - now) }
                }
                if children.contains(where: { $0.exitPipe < 0 }) { wait = min(wait, 0.2) }
                let ready = poll(&pollers, nfds_t(pollers.count), Int32(max(wait, 0) * 1000) + 1)
                if ready < 0 && errno != EINTR { break }
                // The children polled, then a new connection (which may add one).
                let listened = accepting
                var index = listened ? 1 : 0
                var ended: [Int] = []
                for (position, child) in children.enumerated() {
                    if child.connection >= 0 && pollers[index].revents != 0 { fromClient(position) }
                    if child.exitPipe >= 0 && pollers[index + 1].revents != 0 {
                        close(child.exitPipe)
                        children[position].exitPipe = -1
                    }
                    index += 2
                    if children[position].exitPipe < 0, reap(children[position]) { ended.append(position) }
                }
                for position in ended.reversed() { children.remove(at: position) }
                if !ended.isEmpty {
                    lastActivity = UnlockAgent.monotonicNow()
                    if accepting && UnlockAgent.stamp(realDirectory: realDirectory) != stamp { stopAccepting() }
                }
                if listened && accepting && pollers[0].revents != 0 { accept() }
            }
            stopAccepting()
            exit(0)
        }

        /// Whether `child` has ended: its exit code (or signal) is sent
        /// to its client.
        func reap(_ child: Child) -> Bool {
            var status: Int32 = 0
            let result = waitpid(child.pid, &status, WNOHANG)
            guard result == child.pid || (result < 0 && errno == ECHILD) else { return false }
            if child.connection >= 0 {
                let signalled = status & 0x7F
                let reply: [String: Any] =
                    result < 0 ? ["exit": Int(Exit.error.rawValue)]
                    : signalled == 0 ? ["exit": Int((status >> 8) & 0xFF)] : ["signal": Int(signalled)]
                try? Connection(fd: child.connection).send(reply)
                close(child.connection)
            }
            return true
        }

        /// A message from a running command's client: a signal to pass on;
        /// its end (the client went away) hangs the command up.
        func fromClient(_ position: Int) {
            let child = children[position]
            let connection = Connection(fd: child.connection)
            guard let (message, fds) = connection.receive(timeout: 1) else {
                kill(child.pid, SIGHUP)
                close(child.connection)
                children[position].connection = -1
                return
            }
            fds.forEach { close($0) }
            if let signal = message["signal"] as? Int, UnlockAgent.forwardedSignals.contains(Int32(signal)) {
                kill(child.pid, Int32(signal))
            }
        }

        func accept() {
            let fd = unlockagent_accept(listener)
            guard fd >= 0 else { return }
            let connection = Connection(fd: fd)
            var uid: uid_t = 0
            guard unlockagent_peer(fd, &uid, nil) == 0, uid == getuid() else {
                try? connection.send(["refused": "this agent answers only user \(getuid())"])
                close(fd)
                return
            }
            guard let session = UnlockAgent.session else {
                close(fd)
                return
            }
            let now = UnlockAgent.monotonicNow()
            let greeting: [String: Any] = [
                "agent": 1, "fingerprint": session.identity.fingerprint, "name": session.identity.name,
                "stamp": Hex.encodeUpper(stamp), "idle_left": Int(lastActivity + Double(window.idle) - now),
                "absolute_left": Int(started + Double(window.absolute) - now),
            ]
            guard (try? connection.send(greeting)) != nil, let (request, fds) = connection.receive(timeout: 10) else {
                close(fd)
                return
            }
            switch request["op"] as? String {
            case "lock":
                stopAccepting()
                try? connection.send(["locked": true])
                close(fd)
            case "run":
                guard fds.count == 3, let argv = request["argv"] as? [String], let cwd = request["cwd"] as? String,
                    let environment = request["env"] as? [String: String]
                else {
                    fds.forEach { close($0) }
                    try? connection.send(["refused": "a malformed request"])
                    close(fd)
                    return
                }
                if UnlockAgent.stamp(realDirectory: realDirectory) != stamp {
                    fds.forEach { close($0) }
                    stopAccepting()
                    try? connection.send(["refused": "the data directory changed"])
                    close(fd)
                    return
                }
                lastActivity = UnlockAgent.monotonicNow()
                launch(argv: argv, cwd: cwd, environment: environment, fds: fds, connection: fd)
            default:
                fds.forEach { close($0) }
                close(fd)
            }
        }

        /// Forks a child that runs `argv` on the client's descriptors,
        /// with the unlocked session this process holds.
        func launch(argv: [String], cwd: String, environment: [String: String], fds: [Int32], connection: Int32) {
            var exitPipe: [Int32] = [-1, -1]
            // Forking is safe only while this process has one thread.
            guard unlockagent_pipe(&exitPipe, O_CLOEXEC) == 0, Self.threadCount() == 1 else {
                fds.forEach { close($0) }
                try? Connection(fd: connection).send(["refused": "the agent cannot run commands"])
                close(connection)
                stopAccepting()
                return
            }
            let pid = fork()
            if pid == 0 {
                for (target, source) in fds.enumerated() { dup2(source, Int32(target)) }
                // Kept across an exec (`itsme relay serve`), so that its end
                // still says when the program ends.
                let keep = dup(exitPipe[1])
                unlockagent_close_others(keep)
                signal(SIGPIPE, SIG_DFL)
                clearenv()
                for (key, value) in environment { setenv(key, value, 1) }
                guard chdir(cwd) == 0 else {
                    let text = "itsme: cannot enter \(cwd): \(String(cString: strerror(errno)))\n"
                    _ = text.withCString { Glibc.write(STDERR_FILENO, $0, strlen($0)) }
                    _exit(Exit.error.rawValue)
                }
                runCommandLine(argv)
            }
            fds.forEach { close($0) }
            close(exitPipe[1])
            guard pid > 0 else {
                close(exitPipe[0])
                try? Connection(fd: connection).send(["refused": "fork: \(String(cString: strerror(errno)))"])
                close(connection)
                return
            }
            children.append(Child(pid: pid, connection: connection, exitPipe: exitPipe[0]))
        }

        static func threadCount() -> Int {
            (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? 0
        }
    }

    // MARK: Ending an agent

    /// Asks the agent of `directory` to end: whether one was running.
    static func lock(_ directory: String) -> Bool {
        guard let real = realDirectory(directory), let path = try? socketPath(realDirectory: real, create: false) else {
            return false
        }
        return lock(socket: path)
    }

    /// Ends every agent of this user: how many were running.
    static func lockAll() -> Int {
        guard let directory = try? socketDirectory(create: false),
            let names = try? FileManager.default.contentsOfDirectory(atPath: directory)
        else { return 0 }
        return names.filter { $0.hasPrefix("agent-") && $0.hasSuffix(".sock") && lock(socket: directory + "/" + $0) }.count
    }

    /// Asks the agent listening at `path` (if any) to end.
    static func lock(socket path: String) -> Bool {
        guard let connection = connect(path) else { return false }
        defer { close(connection.fd) }
        guard let (_, fds) = connection.receive(timeout: 20) else { return false }
        fds.forEach { close($0) }
        guard (try? connection.send(["op": "lock"])) != nil, let (reply, more) = connection.receive(timeout: 10) else { return false }
        more.forEach { close($0) }
        return reply["locked"] as? Bool == true
    }
}

/// Runs the command line `arguments` (without the program's name) and
/// exits: the asynchronous entry point, started from synchronous code
/// (`main`, and each command an unlock agent forks).
func runCommandLine(_ arguments: [String]) -> Never {
    Task.detached {
        await ItsMe.main(arguments)
        exit(0)
    }
    dispatchMain()
}

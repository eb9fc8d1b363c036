import CUnlockAgent
import Foundation
import ItsMeKit
import ItsMePrimitives

#if canImport(Glibc)
    import Glibc
#endif

/// The unlock window (docs/CLI.md, "The unlock window"): after a correct
/// PIN typed at a terminal (and the passphrase, for a wrapped store), a
/// process of the user's own, the agent, keeps this data directory
/// unlocked for a while for that terminal session, and later commands of
/// the session run inside it instead of asking again.
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
/// The agent answers only its own user (SO_PEERCRED) and runs commands
/// only for processes of its terminal session (`TerminalSession`); it
/// keeps the opened store and identity, never the PIN. It lives for at
/// most the window's absolute time and ends when idle for the window's
/// idle time, when its terminal session ends, when `itsme lock` asks, or
/// when what it unlocked changes on disk (an import, a reset, a new PIN or
/// passphrase). It starts only from a command whose PIN came from the
/// terminal, in a process with a controlling terminal, never with `--pin-fd`,
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

    // MARK: Whose window

    /// The terminal session a window belongs to, as `sudo`'s tty tickets
    /// are: the session (its ID, the leader's process ID, and the leader's
    /// start time, so that a reused process ID is another session) and its
    /// controlling terminal (the device number). A process without a
    /// controlling terminal has none, and neither opens nor uses a window.
    struct TerminalSession: Equatable {
        let id: pid_t
        let terminal: UInt64
        let leaderStart: UInt64

        /// The fields of /proc/PID/stat after the command's name (which
        /// may hold spaces and parentheses): the third field is index 0.
        static func statFields(_ pid: pid_t) -> [Substring]? {
            guard let bytes = UnlockAgent.readProcFile("/proc/\(pid)/stat"),
                let text = String(validating: bytes, as: UTF8.self), let close = text.lastIndex(of: ")")
            else { return nil }
            return text[text.index(after: close)...].split(separator: " ")
        }

        /// The session of process `pid` (0: this one), nil when it has no
        /// controlling terminal or its session leader cannot be seen.
        static func of(_ pid: pid_t) -> TerminalSession? {
            guard let fields = statFields(pid == 0 ? getpid() : pid), fields.count > 19,
                let session = pid_t(fields[3]), session > 0, let terminal = UInt64(fields[4]), terminal != 0,
                let leader = statFields(session), leader.count > 19, let start = UInt64(leader[19])
            else { return nil }
            return TerminalSession(id: session, terminal: terminal, leaderStart: start)
        }

        static func current() -> TerminalSession? { of(0) }

        /// Whether the session still is: its leader runs (the same process,
        /// by its start time) with the same controlling terminal. A closed
        /// terminal, a logout, an exited shell ends it.
        var isAlive: Bool {
            guard let fields = Self.statFields(id), fields.count > 19, fields[0] != "Z", fields[0] != "X" else { return false }
            return UInt64(fields[19]) == leaderStart && UInt64(fields[4]) == terminal
        }

        /// How the start message and the lock file's name carry it.
        var text: String { "\(id) \(terminal) \(leaderStart)" }

        /// The suffix of this session's lock file in a data directory.
        var key: String {
            SHA256.hash(Array("itsme terminal session \(text)".utf8)).prefix(8).map { String(format: "%02x", $0) }.joined()
        }
    }

    /// A small file of /proc, read whole.
    static func readProcFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 4096)
        var have = 0
        while have < bytes.count {
            let got = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + have, $0.count - have) }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { break }
            have += got
        }
        return Array(bytes.prefix(have))
    }

    // MARK: Where the agent is

    /// Where an agent makes its socket's directory: `$XDG_RUNTIME_DIR`
    /// when it is set and is a private directory of this user, else /tmp.
    static func socketBase() -> String {
        if let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            let path = runtime.count > 1 && runtime.hasSuffix("/") ? String(runtime.dropLast()) : runtime
            if (try? checkPrivate(path, directory: true)) != nil, path.utf8.count < 64 { return path }
        }
        return "/tmp"
    }

    /// A new directory for one agent's socket, as ssh-agent makes one:
    /// `mkdtemp` under `socketBase()`, an unpredictable name, mode 0700.
    /// Nobody can hold its name in advance; commands find it through the
    /// agent's lock file in the data directory, never by its name.
    static func makeSocketDirectory() throws -> String {
        var template = Array((socketBase() + "/itsme-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw CLIError("cannot create a directory for the unlock agent's socket: \(String(cString: strerror(errno)))")
        }
        let path = String(cString: made)
        try checkPrivate(path, directory: true)
        return path
    }

    /// `path` is a directory (or a socket) of this user's, not a link,
    /// that nobody else may enter (use); else a clear refusal.
    static func checkPrivate(_ path: String, directory: Bool) throws {
        var info = stat()
        let kind = directory ? "directory" : "socket"
        guard lstat(path, &info) == 0 else { throw CLIError("the unlock agent's \(kind) \(path) is gone") }
        guard info.st_mode & S_IFMT == (directory ? S_IFDIR : S_IFSOCK) else {
            throw CLIError("\(path) is not a \(kind): the unlock window is not used")
        }
        guard info.st_uid == getuid() else {
            throw CLIError("\(path) belongs to user \(info.st_uid), not to you: the unlock window is not used")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw CLIError(
                "\(path) may be used by others (mode \(String(info.st_mode & 0o777, radix: 8))): the unlock window is not used")
        }
    }

    /// The prefix of the agents' lock files in a data directory.
    static let lockFilePrefix = ".unlock-agent-"

    /// `.unlock-agent-KEY` in the data directory: the agent of one terminal
    /// session holds a lock on it for its life (one agent per data
    /// directory and session, whatever environment each command has) and
    /// writes its socket's path in it, which is how a command finds the
    /// agent.
    static func lockFile(_ realDirectory: String, _ session: TerminalSession) -> String {
        realDirectory + "/" + lockFilePrefix + session.key
    }

    /// The socket named in the lock file `lockPath`, when that socket and
    /// its directory are private to this user. `report`: a refusal is said
    /// on standard error (the command then asks for the PIN).
    static func agentSocket(lockPath: String, report: Bool) -> String? {
        guard let bytes = readSmallFile(lockPath, limit: 4096), !bytes.isEmpty,
            let path = String(validating: bytes, as: UTF8.self), path.hasPrefix("/"), !path.contains("\0")
        else { return nil }
        do {
            try checkPrivate((path as NSString).deletingLastPathComponent, directory: true)
            try checkPrivate(path, directory: false)
        } catch {
            if report { FileHandle.standardError.write(Data("itsme: \(explain(error).0); the PIN is asked\n".utf8)) }
            return nil
        }
        return path
    }

    static func realDirectory(_ directory: String) -> String? {
        guard let resolved = realpath(directory, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The bytes of the regular file at `path` (no link followed, never
    /// waiting on a FIFO), nil if there is none, it is something else, or
    /// it is longer than `limit`.
    static func readSmallFile(_ path: String, limit: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, Int(info.st_size) <= limit else { return nil }
        var bytes = [UInt8](repeating: 0, count: limit + 1)
        var have = 0
        while have <= limit {
            let got = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + have, limit + 1 - have) }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { break }
            have += got
        }
        guard have <= limit else { return nil }
        return Array(bytes.prefix(have))
    }

    /// A digest of what an unlock rests on, as stored: the identity and
    /// PIN items and the wrap file (present or not). Any import, transfer,
    /// reset, new PIN or new passphrase changes it. Nil when the identity
    /// item cannot be read, or any of the three is not a small regular file.
    static func stamp(realDirectory: String) -> [UInt8]? {
        let secrets = realDirectory + "/secrets"
        var material: [UInt8] = []
        for (index, path) in [secrets + "/" + Identity.itemName, secrets + "/itsme.pin", secrets + ".wrap"].enumerated() {
            var info = stat()
            if lstat(path, &info) != 0 && errno == ENOENT && index > 0 {
                material += [0, 0, 0, 0]
                continue
            }
            guard let data = readSmallFile(path, limit: 65536) else { return nil }
            material += [1, 0, 0, 0] + SHA256.hash(data)
        }
        return SHA256.hash(material)
    }

    // MARK: Messages

    /// One message on an agent connection: a 4-byte big-endian length and
    /// a JSON object, with any passed descriptors attached to its first
    /// bytes.
    static let maxMessage = 1 << 20

    static func frame(_ object: [String: Any]) throws -> [UInt8] {
        let body = try JSONSerialization.data(withJSONObject: object)
        let length = UInt32(body.count)
        return [UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF)] + body
    }

    /// Collects what arrives on a connection into whole messages, without
    /// blocking (the agent reads every connection this way).
    struct Reader {
        private var buffer: [UInt8] = []
        private(set) var fds: [Int32] = []

        enum Read {
            case message([String: Any], [Int32])
            /// Nothing whole yet.
            case pending
            /// The end of the stream, an error, or a message that is not one.
            case closed
        }

        /// Reads what is there and returns the first whole message, if any.
        mutating func read(_ fd: Int32) -> Read {
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                if let whole = take() { return whole }
                if buffer.count > UnlockAgent.maxMessage + 4 { return fail() }
                var carried = [Int32](repeating: -1, count: Int(UNLOCKAGENT_MAX_FDS))
                var count: Int32 = 0
                let got = chunk.withUnsafeMutableBytes { unlockagent_receive(fd, $0.baseAddress, $0.count, &carried, &count) }
                fds += carried.prefix(Int(count))
                if got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return .pending }
                guard got > 0 else { return fail() }
                buffer += chunk.prefix(got)
            }
        }

        private mutating func take() -> Read? {
            guard buffer.count >= 4 else { return nil }
            let length = Int(buffer[0]) << 24 | Int(buffer[1]) << 16 | Int(buffer[2]) << 8 | Int(buffer[3])
            guard length <= UnlockAgent.maxMessage else { return fail() }
            guard buffer.count >= 4 + length else { return nil }
            let body = Data(buffer[4..<4 + length])
            buffer.removeFirst(4 + length)
            guard let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] else { return fail() }
            defer { fds = [] }
            return .message(object, fds)
        }

        /// Closes what was carried: nothing of a broken stream is kept.
        mutating func fail() -> Read {
            fds.forEach { close($0) }
            fds = []
            buffer = []
            return .closed
        }
    }

    /// A client's blocking connection to an agent.
    struct Connection {
        let fd: Int32

        func send(_ object: [String: Any], fds: [Int32] = []) throws {
            let bytes = try UnlockAgent.frame(object)
            let sent = bytes.withUnsafeBytes { raw in
                fds.withUnsafeBufferPointer { unlockagent_send(fd, raw.baseAddress, raw.count, $0.baseAddress, Int32($0.count)) }
            }
            guard sent == 0 else { throw CLIError("the unlock agent's socket: \(String(cString: strerror(errno)))") }
        }

        /// The next message (descriptors that come with it are closed: an
        /// agent passes none); nil at the end of the stream, or when
        /// nothing whole came within `timeout` seconds.
        func receive(timeout: Double) -> [String: Any]? {
            var reader = Reader()
            let deadline = UnlockAgent.monotonicNow() + timeout
            while true {
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let left = deadline - UnlockAgent.monotonicNow()
                guard left > 0 else {
                    _ = reader.fail()
                    return nil
                }
                let ready = poll(&poller, 1, Int32(left * 1000) + 1)
                if ready < 0 && errno == EINTR { continue }
                guard ready > 0 else { continue }
                switch reader.read(fd) {
                case .message(let object, let fds):
                    fds.forEach { close($0) }
                    return object
                case .pending: continue
                case .closed: return nil
                }
            }
        }
    }

    static func monotonicNow() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// The address of the socket at `path` (which `socketBase` keeps
    /// short enough).
    static func socketAddress(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in raw.copyBytes(from: Array(path.utf8).prefix(raw.count - 1)) }
        return address
    }

    /// A connected (blocking) socket to the agent at `path`, when one
    /// listens there and runs as this user.
    static func connect(_ path: String) -> Connection? {
        guard path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else { return nil }
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

    // MARK: Client side

    /// What the agent for a data directory says when a client connects.
    struct Greeting {
        let fingerprint: String
        let name: String
        let idleLeft: Int
        let absoluteLeft: Int
    }

    /// The agent of the data directory `directory` in this terminal
    /// session, when one answers for the identity stored there now (the
    /// stamps agree). An agent that answers for something else is asked
    /// to end. `report`: a socket or directory refused is said.
    static func attach(_ directory: String, report: Bool = true) -> (Connection, Greeting)? {
        guard session == nil, let terminal = TerminalSession.current(), let real = realDirectory(directory),
            let path = agentSocket(lockPath: lockFile(real, terminal), report: report), let connection = connect(path)
        else { return nil }
        // An agent still unlocking (Argon2id for a wrapped store) answers
        // within seconds.
        guard let greeting = connection.receive(timeout: 20), let stampText = greeting["stamp"] as? String,
            let fingerprint = greeting["fingerprint"] as? String, let name = greeting["name"] as? String,
            let idleLeft = greeting["idle_left"] as? Int, let absoluteLeft = greeting["absolute_left"] as? Int
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

    /// The signals a client passes on to the command the agent runs; the
    /// agent stops the command for SIGTSTP (it has no terminal to stop it).
    static let forwardedSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGCONT, SIGWINCH]
    nonisolated(unsafe) static var forwardSignalsTo: Int32 = -1

    private static func catchForwardedSignals() {
        for signal in forwardedSignals {
            Glibc.signal(signal) { number in
                var byte = UInt8(truncatingIfNeeded: number)
                _ = Glibc.write(UnlockAgent.forwardSignalsTo, &byte, 1)
            }
        }
    }

    /// Runs this command in the agent of `directory`: its exit code, or
    /// nil when no agent answers for it (the command then runs here, with
    /// the signals as they were). Not from a background job: a command
    /// whose terminal belongs to another process group runs here.
    static func delegate(_ directory: String) -> Int32? {
        if isatty(STDIN_FILENO) == 1 && tcgetpgrp(STDIN_FILENO) != getpgrp() { return nil }
        guard let (connection, _) = attach(directory) else { return nil }
        defer { close(connection.fd) }
        var pipeFDs: [Int32] = [-1, -1]
        guard unlockagent_pipe(&pipeFDs, O_CLOEXEC | O_NONBLOCK) == 0 else { return nil }
        forwardSignalsTo = pipeFDs[1]
        catchForwardedSignals()
        var finished = false
        defer {
            if !finished {
                // Back to running here: the signals as they were.
                for signal in forwardedSignals { Glibc.signal(signal, SIG_DFL) }
                close(pipeFDs[0])
                close(pipeFDs[1])
            }
        }
        let request: [String: Any] = [
            "op": "run", "argv": Array(CommandLine.arguments.dropFirst()),
            "cwd": FileManager.default.currentDirectoryPath, "env": ProcessInfo.processInfo.environment,
        ]
        guard (try? connection.send(request, fds: [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO])) != nil else { return nil }
        var reader = Reader()
        while true {
            var pollers = [
                pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0), pollfd(fd: pipeFDs[0], events: Int16(POLLIN), revents: 0),
            ]
            if poll(&pollers, 2, -1) < 0 { continue }
            if pollers[1].revents != 0 {
                var byte: UInt8 = 0
                while Glibc.read(pipeFDs[0], &byte, 1) == 1 {
                    try? connection.send(["op": "signal", "signal": Int(byte)])
                    if Int32(byte) == SIGTSTP {
                        // Stop here too, as the shell expects; SIGCONT resumes both.
                        Glibc.signal(SIGTSTP, SIG_DFL)
                        raise(SIGTSTP)
                        catchForwardedSignals()
                    }
                }
            }
            guard pollers[0].revents != 0 else { continue }
            switch reader.read(connection.fd) {
            case .pending:
                continue
            case .closed:
                finished = true
                FileHandle.standardError.write(Data("itsme: the unlock agent ended while it ran this command\n".utf8))
                return Exit.error.rawValue
            case .message(let reply, let fds):
                fds.forEach { close($0) }
                if let code = reply["exit"] as? Int, let exit = Int32(exactly: code) {
                    finished = true
                    return exit
                }
                if let signal = reply["signal"] as? Int, let number = Int32(exactly: signal), (1...64).contains(number) {
                    finished = true
                    return 128 + number
                }
                // Refused before the command started (what it unlocked changed): run it here.
                if reply["refused"] != nil { return nil }
            }
        }
    }

    /// Starts the agent for `profile`'s data directory and this terminal
    /// session after a correct `pin` typed at the terminal (with
    /// `passphrase`, the one that opened a wrapped store), when the
    /// profile allows it and the window is not off. Without a controlling
    /// terminal, none starts.
    static func start(_ profile: Profile, pin: [UInt8], passphrase: [UInt8]?) {
        guard session == nil, profile.keepsUnlocked, isatty(STDIN_FILENO) == 1, let terminal = TerminalSession.current(),
            let window = (try? profile.config())?.unlockWindow, let real = realDirectory(profile.directory),
            let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        else { return }
        var message = Array("\(window.idle) \(window.absolute) \(terminal.text)\n".utf8) + pin + [0x0A]
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
        let agent = unlockagent_spawn(executable, &argv, pipeFDs[0])
        guard agent > 0 else {
            profile.output.warn("the PIN is not kept unlocked: \(String(cString: strerror(errno)))")
            return
        }
        // Until the agent names its socket (it then answers as soon as the
        // store is open), at most 2 seconds: the next command typed at once
        // finds it. Not while it unlocks, which a command waits for itself.
        let lockPath = lockFile(real, terminal)
        let deadline = monotonicNow() + 2
        while monotonicNow() < deadline && agentSocket(lockPath: lockPath, report: false) == nil {
            var status: Int32 = 0
            if waitpid(agent, &status, WNOHANG) == agent { break }
            usleep(20_000)
        }
    }

    // MARK: The agent

    /// Bytes in memory of their own: locked into RAM (where RLIMIT_MEMLOCK
    /// allows), left out of core dumps, wiped when released. For the PIN
    /// and passphrase the agent reads.
    final class LockedBuffer: ByteView {
        let capacity: Int
        private(set) var count = 0
        private let base: UnsafeMutableRawPointer

        /// A buffer of one page that holds nothing.
        static var empty: LockedBuffer { LockedBuffer(capacity: 1)! }

        init?(capacity: Int) {
            let mapped = mmap(nil, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
            guard let mapped, mapped != MAP_FAILED else { return nil }
            base = mapped
            self.capacity = capacity
            _ = mlock(base, capacity)
            _ = madvise(base, capacity, MADV_DONTDUMP)
        }

        deinit {
            explicit_bzero(base, capacity)
            munlock(base, capacity)
            munmap(base, capacity)
        }

        func withBytes<R: ~Copyable>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
            try body(UnsafeRawBufferPointer(start: base, count: count))
        }

        /// Reads `fd` to its end (or to `capacity`).
        func fill(from fd: Int32) {
            while count < capacity {
                let got = Glibc.read(fd, base + count, capacity - count)
                if got < 0 && errno == EINTR { continue }
                guard got > 0 else { break }
                count += got
            }
        }

        /// A copy of `range` of this buffer, locked as this one is.
        func copy(_ range: Range<Int>) -> LockedBuffer? {
            guard range.lowerBound >= 0, range.upperBound <= count, let copy = LockedBuffer(capacity: max(range.count, 1)) else {
                return nil
            }
            copy.base.copyMemory(from: base + range.lowerBound, byteCount: range.count)
            copy.count = range.count
            return copy
        }
    }

    /// The agent process (`itsme __unlock-agent REALDIR`, started by
    /// `start`): reads the window, PIN and passphrase from standard input
    /// into locked memory, unlocks, serves until its window ends. Never
    /// returns.
    static func serve(_ directory: String) -> Never {
        _ = unlockagent_harden()
        signal(SIGPIPE, SIG_IGN)
        guard (try? Sodium.initialize()) != nil, var message = LockedBuffer(capacity: 65536) else { exit(Exit.error.rawValue) }
        message.fill(from: STDIN_FILENO)
        let null = open("/dev/null", O_RDONLY)
        if null >= 0 && null != STDIN_FILENO {
            dup2(null, STDIN_FILENO)
            close(null)
        }
        let agent = Agent(directory: directory, message: message)
        // The PIN and passphrase are needed no more: the store is open and
        // the PIN checked. Their buffer is wiped (and unmapped) now, and so
        // is the stack the check ran on, where copies of the PIN's digits
        // were passed along; the agent keeps only the opened store and
        // identity.
        message = LockedBuffer.empty
        unlockagent_burn_stack()
        guard let agent else { exit(0) }
        agent.run()
    }

    final class Agent {
        let realDirectory: String
        let window: Window
        /// The terminal session this window belongs to: only its commands
        /// run here, and the agent ends with it.
        let terminal: TerminalSession
        /// The socket, in a directory of its own (`makeSocketDirectory`).
        let socketPath: String
        /// `.unlock-agent-KEY`, locked for as long as this agent accepts commands.
        let lockPath: String
        var lockFD: Int32
        var lockInode: ino_t = 0
        let listener: Int32
        var socketInode: ino_t = 0
        let stamp: [UInt8]
        /// When the store was open and the PIN checked: the window starts.
        var started = 0.0
        var lastActivity = 0.0
        var lastStampCheck = 0.0
        var accepting = true
        /// Connections that have not sent their request yet.
        var clients: [Client] = []
        var children: [Child] = []

        struct Client {
            let fd: Int32
            var reader = Reader()
            let deadline: Double
            /// Whether it runs in this agent's terminal session (it may then
            /// run commands; any other process of the user may only lock).
            var sameSession = false
        }

        struct Child {
            let pid: pid_t
            /// The client's connection, -1 once it went away.
            var connection: Int32
            var reader = Reader()
            /// Readable at its end when the child exits (or execs); -1 after.
            var exitPipe: Int32
        }

        /// Parses the start message ("IDLE ABSOLUTE SESSION TERMINAL
        /// LEADER-START\nPIN\nPASSPHRASE", in locked memory), takes the lock
        /// of the data directory and session (nil if another agent holds
        /// it), binds the socket in a new directory, unlocks (nil on any
        /// failure).
        init?(directory: String, message: LockedBuffer) {
            guard UnlockAgent.realDirectory(directory) == directory else { return nil }
            // Where the lines end, and the window.
            let count = message.count
            let (firstEnd, secondEnd, header) = message.withBytes { bytes -> (Int?, Int?, String?) in
                let first = bytes.firstIndex(of: 0x0A)
                let second = first.flatMap { f in bytes[(f + 1)...].firstIndex(of: 0x0A) }
                return (first, second, first.map { String(decoding: bytes[0..<$0], as: UTF8.self) })
            }
            guard let firstEnd, let header else { return nil }
            let numbers = header.split(separator: " ")
            let times = numbers.prefix(2).compactMap { Int($0) }
            guard numbers.count == 5, times.count == 2, times[0] > 0, times[1] >= times[0], times[1] <= Window.longest,
                let sessionID = pid_t(numbers[2]), let device = UInt64(numbers[3]), let leaderStart = UInt64(numbers[4])
            else { return nil }
            let terminal = TerminalSession(id: sessionID, terminal: device, leaderStart: leaderStart)
            guard terminal.isAlive else { return nil }
            let pinEnd = secondEnd ?? count
            guard pinEnd - firstEnd - 1 == PIN.length else { return nil }
            guard let secret = message.copy(min(pinEnd + 1, count)..<count) else { return nil }
            window = Window(idle: times[0], absolute: times[1])
            realDirectory = directory
            self.terminal = terminal
            // One agent per data directory and terminal session.
            lockPath = UnlockAgent.lockFile(directory, terminal)
            guard let (fd, inode) = Self.takeLock(lockPath) else { return nil }
            lockFD = fd
            lockInode = inode
            guard let socketDirectory = try? UnlockAgent.makeSocketDirectory() else {
                Self.releaseLock(lockPath, fd: fd, inode: inode)
                return nil
            }
            let path = socketDirectory + "/agent.sock"
            guard let listener = Self.listen(path) else {
                rmdir(socketDirectory)
                Self.releaseLock(lockPath, fd: fd, inode: inode)
                return nil
            }
            socketPath = path
            self.listener = listener
            var info = stat()
            if stat(path, &info) == 0 { socketInode = info.st_ino }
            // Clients find the socket through the lock file, and wait while
            // the store opens (Argon2id, for a wrapped one).
            let written = Array(path.utf8).withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
            // From here on, failing must take the socket away again.
            let secrets = directory + "/secrets"
            let opened: (SecretStore, Identity)? = {
                do {
                    let store: SecretStore =
                        try PassphraseSecretStore.isWrapped(directory: secrets)
                        ? try PassphraseSecretStore.open(directory: secrets, passphrase: secret) : try FileSecretStore(directory: secrets)
                    let identity = try Identity.load(store: store)
                    let check = PIN(store: store)
                    let now = Int64(Date().timeIntervalSince1970)
                    guard try check.isSet(), try check.status(now: now).waitSeconds == 0 else { return nil }
                    // A PIN of 6 digits is a small string: held inline (in
                    // registers and on the stack, which `serve` wipes), not
                    // on the heap; the library copies it to guarded memory.
                    let pin = message.withBytes { String(decoding: $0[(firstEnd + 1)..<pinEnd], as: UTF8.self) }
                    try check.verify(pin, now: now)
                    return (store, identity)
                } catch {
                    return nil
                }
            }()
            guard written == path.utf8.count, let before = UnlockAgent.stamp(realDirectory: directory),
                let (store, identity) = opened, UnlockAgent.stamp(realDirectory: directory) == before
            else {
                Self.unlinkIfOurs(path, inode: socketInode)
                rmdir(socketDirectory)
                close(listener)
                Self.releaseLock(lockPath, fd: fd, inode: inode)
                return nil
            }
            stamp = before
            UnlockAgent.session = Session(realDirectory: directory, store: store, identity: identity)
            _ = unlockagent_lock_memory()
            started = UnlockAgent.monotonicNow()
            lastActivity = started
            lastStampCheck = started
        }

        /// The lock file at `path`, created if need be and locked: its
        /// descriptor and inode; nil when another agent holds it. A file an
        /// ending agent removed between the open and the lock is opened again.
        static func takeLock(_ path: String) -> (Int32, ino_t)? {
            for _ in 0..<3 {
                let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
                guard fd >= 0 else { return nil }
                guard unlockagent_try_lock(fd) == 0 else {
                    close(fd)
                    return nil
                }
                var held = stat()
                var named = stat()
                if fstat(fd, &held) == 0, lstat(path, &named) == 0, held.st_ino == named.st_ino, held.st_dev == named.st_dev {
                    _ = ftruncate(fd, 0)
                    return (fd, held.st_ino)
                }
                close(fd)
            }
            return nil
        }

        /// Removes the lock file (while still holding it, so that no other
        /// agent takes a file about to go) and lets it go.
        static func releaseLock(_ path: String, fd: Int32, inode: ino_t) {
            _ = ftruncate(fd, 0)
            unlinkIfOurs(path, inode: inode)
            close(fd)
        }

        /// A listening socket at `path` (in a directory just made: nothing
        /// is there), mode 0600.
        static func listen(_ path: String) -> Int32? {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            guard fd >= 0 else { return nil }
            var address = UnlockAgent.socketAddress(path)
            let previous = umask(0o177)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            umask(previous)
            guard bound == 0, Glibc.listen(fd, 16) == 0 else {
                close(fd)
                return nil
            }
            return fd
        }

        static func unlinkIfOurs(_ path: String, inode: ino_t) {
            var info = stat()
            if lstat(path, &info) == 0, info.st_ino == inode { unlink(path) }
        }

        /// Takes no more commands: the socket and the lock go, the unlocked
        /// store and identity are released (wiped); commands running finish.
        func stopAccepting() {
            guard accepting else { return }
            accepting = false
            Self.unlinkIfOurs(socketPath, inode: socketInode)
            rmdir((socketPath as NSString).deletingLastPathComponent)
            close(listener)
            Self.releaseLock(lockPath, fd: lockFD, inode: lockInode)
            lockFD = -1
            for client in clients { close(client.fd) }
            clients = []
            UnlockAgent.session = nil
        }

        func run() -> Never {
            while accepting || !children.isEmpty {
                let now = UnlockAgent.monotonicNow()
                if accepting {
                    // The terminal session ended (its shell exited, its
                    // terminal closed): so does its window.
                    if !terminal.isAlive { stopAccepting() }
                    if now >= started + Double(window.absolute) { stopAccepting() }
                    if children.isEmpty && clients.isEmpty && now >= lastActivity + Double(window.idle) { stopAccepting() }
                    if now >= lastStampCheck + 5 {
                        lastStampCheck = now
                        if UnlockAgent.stamp(realDirectory: realDirectory) != stamp { stopAccepting() }
                    }
                }
                clients.removeAll { client in
                    guard now >= client.deadline else { return false }
                    close(client.fd)
                    return true
                }
                // The children, the clients, then the listener (which may add a client).
                var pollers: [pollfd] = []
                for child in children {
                    pollers.append(pollfd(fd: child.connection, events: Int16(POLLIN), revents: 0))
                    pollers.append(pollfd(fd: child.exitPipe, events: Int16(POLLIN), revents: 0))
                }
                for client in clients { pollers.append(pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0)) }
                let listened = accepting
                if listened { pollers.append(pollfd(fd: listener, events: Int16(POLLIN), revents: 0)) }
                // Each second at least: whether the session still is.
                var wait = 1.0
                if accepting {
                    wait = min(wait, started + Double(window.absolute) - now)
                    if children.isEmpty { wait = min(wait, lastActivity + Double(window.idle) - now) }
                }
                for client in clients { wait = min(wait, client.deadline - now) }
                if children.contains(where: { $0.exitPipe < 0 }) { wait = min(wait, 0.2) }
                // A negative descriptor is left out by poll.
                let ready = poll(&pollers, nfds_t(pollers.count), Int32(max(wait, 0) * 1000) + 1)
                if ready < 0 && errno != EINTR { break }
                var index = 0
                var ended: [Int] = []
                for position in children.indices {
                    if children[position].connection >= 0 && pollers[index].revents != 0 { fromClient(position) }
                    if children[position].exitPipe >= 0 && pollers[index + 1].revents != 0 {
                        close(children[position].exitPipe)
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
                var done: [Int] = []
                let clientCount = clients.count
                for position in 0..<clientCount {
                    guard index < pollers.count, pollers[index].revents != 0 else {
                        index += 1
                        continue
                    }
                    index += 1
                    if request(position) { done.append(position) }
                }
                for position in done.reversed() where position < clients.count { clients.remove(at: position) }
                if listened && accepting && index < pollers.count && pollers[index].revents != 0 { accept() }
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
                send(reply, on: child.connection)
                close(child.connection)
            }
            return true
        }

        /// Sends a small reply on a non-blocking connection; a client that
        /// does not read it loses it.
        func send(_ object: [String: Any], on fd: Int32) {
            guard let bytes = try? UnlockAgent.frame(object) else { return }
            _ = bytes.withUnsafeBytes { unlockagent_send(fd, $0.baseAddress, $0.count, nil, 0) }
        }

        /// Messages from a running command's client: signals to pass on;
        /// its end (the client went away) hangs the command up.
        func fromClient(_ position: Int) {
            while true {
                switch children[position].reader.read(children[position].connection) {
                case .pending:
                    return
                case .closed:
                    kill(children[position].pid, SIGHUP)
                    kill(children[position].pid, SIGCONT)
                    close(children[position].connection)
                    children[position].connection = -1
                    return
                case .message(let message, let fds):
                    fds.forEach { close($0) }
                    guard let value = message["signal"] as? Int, let signal = Int32(exactly: value),
                        UnlockAgent.forwardedSignals.contains(signal)
                    else { continue }
                    kill(children[position].pid, signal == SIGTSTP ? SIGSTOP : signal)
                }
            }
        }

        /// A new connection: refused unless it is this user's; else greeted
        /// and kept until its request comes (or 10 seconds pass). A process
        /// of another terminal session (or of none) may only ask it to end.
        func accept() {
            let fd = unlockagent_accept(listener)
            guard fd >= 0 else { return }
            var uid: uid_t = 0
            var pid: pid_t = 0
            guard unlockagent_peer(fd, &uid, &pid) == 0, uid == getuid() else {
                send(["refused": "this agent answers only user \(getuid())"], on: fd)
                close(fd)
                return
            }
            guard let session = UnlockAgent.session else {
                close(fd)
                return
            }
            let now = UnlockAgent.monotonicNow()
            guard pid > 0, TerminalSession.of(pid) == terminal else {
                send(["agent": 1, "other_session": true], on: fd)
                clients.append(Client(fd: fd, deadline: now + 10, sameSession: false))
                return
            }
            send(
                [
                    "agent": 1, "fingerprint": session.identity.fingerprint, "name": session.identity.name,
                    "stamp": Hex.encodeUpper(stamp), "idle_left": Int(lastActivity + Double(window.idle) - now),
                    "absolute_left": Int(started + Double(window.absolute) - now),
                ], on: fd)
            clients.append(Client(fd: fd, deadline: now + 10, sameSession: true))
        }

        /// Reads from client `position`; whether it is done with (its
        /// connection closed or handed to a command).
        func request(_ position: Int) -> Bool {
            let fd = clients[position].fd
            switch clients[position].reader.read(fd) {
            case .pending:
                return false
            case .closed:
                close(fd)
                return true
            case .message(let request, let fds):
                switch request["op"] as? String {
                case "lock":
                    fds.forEach { close($0) }
                    send(["locked": true], on: fd)
                    close(fd)
                    // Closes the other clients: this one is removed by the caller.
                    clients[position] = Client(fd: -1, deadline: 0)
                    stopAccepting()
                    return true
                case "run":
                    guard clients[position].sameSession else {
                        fds.forEach { close($0) }
                        send(["refused": "this unlock window belongs to another terminal session"], on: fd)
                        close(fd)
                        return true
                    }
                    guard fds.count == 3, let argv = request["argv"] as? [String], let cwd = request["cwd"] as? String,
                        let environment = request["env"] as? [String: String]
                    else {
                        fds.forEach { close($0) }
                        send(["refused": "a malformed request"], on: fd)
                        close(fd)
                        return true
                    }
                    if UnlockAgent.stamp(realDirectory: realDirectory) != stamp {
                        fds.forEach { close($0) }
                        send(["refused": "the data directory changed"], on: fd)
                        close(fd)
                        clients[position] = Client(fd: -1, deadline: 0)
                        stopAccepting()
                        return true
                    }
                    lastActivity = UnlockAgent.monotonicNow()
                    launch(argv: argv, cwd: cwd, environment: environment, fds: fds, connection: fd)
                    return true
                default:
                    fds.forEach { close($0) }
                    close(fd)
                    return true
                }
            }
        }

        /// Forks a child that runs `argv` on the client's descriptors,
        /// with the unlocked session this process holds.
        func launch(argv: [String], cwd: String, environment: [String: String], fds: [Int32], connection: Int32) {
            var exitPipe: [Int32] = [-1, -1]
            // Forking is safe only while this process has one thread.
            guard unlockagent_pipe(&exitPipe, O_CLOEXEC) == 0, Self.threadCount() == 1 else {
                fds.forEach { close($0) }
                send(["refused": "the agent cannot run commands"], on: connection)
                close(connection)
                stopAccepting()
                return
            }
            let agent = getpid()
            let pid = fork()
            if pid == 0 {
                _ = unlockagent_die_with(agent)
                for (target, source) in fds.enumerated() { dup2(source, Int32(target)) }
                // Kept across an exec (`itsme relay serve`), so that its end
                // still says when the program ends.
                let keep = dup(exitPipe[1])
                unlockagent_close_others(keep)
                signal(SIGPIPE, SIG_DFL)
                // Memory locks are not inherited: lock again what is mapped.
                _ = unlockagent_lock_memory()
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
                send(["refused": "fork: \(String(cString: strerror(errno)))"], on: connection)
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

    /// Ends every window of the data directory `directory`, in every
    /// terminal session: how many were open.
    static func lock(_ directory: String) -> Int {
        guard let real = realDirectory(directory), let names = try? FileManager.default.contentsOfDirectory(atPath: real) else {
            return 0
        }
        return names.filter { name in
            guard name.hasPrefix(lockFilePrefix), let path = agentSocket(lockPath: real + "/" + name, report: false) else { return false }
            return lock(socket: path)
        }.count
    }

    /// Ends every agent of this user (every data directory, every terminal
    /// session) whose socket is in a private directory of this user's
    /// under $XDG_RUNTIME_DIR or /tmp: how many were running.
    static func lockAll() -> Int {
        var bases = ["/tmp"]
        let base = socketBase()
        if base != "/tmp" { bases.insert(base, at: 0) }
        var count = 0
        for base in bases {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: base) else { continue }
            for name in names where name.hasPrefix("itsme-") {
                let directory = base + "/" + name
                let socket = directory + "/agent.sock"
                guard (try? checkPrivate(directory, directory: true)) != nil, (try? checkPrivate(socket, directory: false)) != nil
                else { continue }
                if lock(socket: socket) { count += 1 }
            }
        }
        return count
    }

    /// Asks the agent listening at `path` (if any) to end.
    static func lock(socket path: String) -> Bool {
        guard let connection = connect(path) else { return false }
        defer { close(connection.fd) }
        guard connection.receive(timeout: 20) != nil, (try? connection.send(["op": "lock"])) != nil,
            let reply = connection.receive(timeout: 10)
        else { return false }
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

import Foundation
import ItsMeKit
import RelayClient

#if canImport(Glibc)
    import Glibc
#endif

// MARK: Exit codes

/// The exit codes of every command (also in `itsme --help` and docs/CLI.md).
enum Exit: Int32 {
    case ok = 0
    /// What was checked did not hold: a wrong code, a SAS the person
    /// rejected, a demo check that failed.
    case checkFailed = 1
    /// An error: bad input, nothing to act on, a store that cannot be read.
    case error = 2
    /// Locked: too many wrong PINs or codes; the message says for how long.
    case locked = 3
    /// The relay could not be reached, refused, or the invite is gone.
    case relay = 4
    /// Interrupted, or input ended before the command had what it needed.
    case interrupted = 5
    // ArgumentParser exits with 64 for a usage error.

    static let helpText = """
        Exit codes: 0 success; 1 what was checked did not hold (a wrong code, a rejected SAS); \
        2 an error (bad input, nothing to act on, unreadable data); 3 locked after too many wrong \
        PINs or codes; 4 the relay could not be reached or refused; 5 input ended or interrupted; \
        64 a usage error.
        """
}

/// A failure the CLI reports as one line and an exit code.
struct CLIError: Error, CustomStringConvertible {
    let message: String
    let exit: Exit
    init(_ message: String, exit: Exit = .error) {
        self.message = message
        self.exit = exit
    }
    var description: String { message }
}

extension RelayError {
    /// For a person: the message and the relay's HTTP status when it
    /// answered, without the kinds (`connection`, `bad-url`) that programs
    /// switch on.
    var inWords: String { message + (status.map { " (the relay answered HTTP \($0))" } ?? "") }
}

/// One line for a person, and the exit code, for any error a command throws.
func explain(_ error: Error) -> (String, Exit) {
    switch error {
    case let e as CLIError:
        return (e.message, e.exit)
    case let e as RelayError:
        return ("relay: \(e.inWords)", .relay)
    case let e as ItsMeError:
        let text = e.message.isEmpty ? "\(e.kind.message)" : e.message
        switch e.kind {
        case .locked: return (text, .locked)
        case .authenticationFailed, .wrongPIN: return (text, .checkFailed)
        default: return (text, .error)
        }
    case let e as DecodingError:
        return ("a data file is damaged: \(e)", .error)
    default:
        return ("\(error)", .error)
    }
}

// MARK: Output

/// Where a command writes: lines for a person, or one JSON document.
struct Output {
    var json: Bool

    func line(_ text: String = "") {
        guard !json else { return }
        print(text)
    }

    /// Prints `value` as JSON when `--json` was given.
    func document(_ value: [String: Any]) {
        guard json else { return }
        print(jsonText(value))
    }

    /// What a person needs while the command runs (codes to give, a
    /// wait): on standard output, or on standard error with `--json`, so
    /// that standard output stays one JSON document.
    func notice(_ text: String) {
        if json {
            FileHandle.standardError.write(Data((text + "\n").utf8))
        } else {
            print(text)
            fflush(standardOutput)
        }
    }

    func warn(_ text: String) {
        FileHandle.standardError.write(Data("itsme: \(text)\n".utf8))
    }
}

func jsonText(_ value: Any) -> String {
    guard let data = try? JSONSerialization.data(withJSONObject: value, options: [.prettyPrinted, .sortedKeys]) else {
        return "{}"
    }
    return String(decoding: data, as: UTF8.self)
}

func isoTime(_ seconds: Int64) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime]
    return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
}

func duration(_ seconds: Int64) -> String {
    if seconds < 60 { return "\(seconds) s" }
    if seconds < 3600 { return seconds % 60 == 0 ? "\(seconds / 60) min" : "\(seconds / 60) min \(seconds % 60) s" }
    return "\(seconds / 3600) h \(seconds % 3600 / 60) min"
}

// MARK: Clocks

/// The time every command uses. Only the real clock exists in a normal
/// command; the demo runs its own, and tests may pass a clock file with the
/// hidden `--test-clock` (a warning is printed whenever one is in use).
protocol Clock: AnyObject, Sendable {
    func now() -> Int64
    /// Waits until `now()` may have moved on by up to `seconds`.
    func pause(_ seconds: Double) async
}

final class SystemClock: Clock, @unchecked Sendable {
    func now() -> Int64 { Int64(Date().timeIntervalSince1970) }
    func pause(_ seconds: Double) async { try? await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1e9)) }
}

/// Tests: the current Unix time is the number in a file another process
/// advances (as the relay's `--clock-file`).
final class FileClock: Clock, @unchecked Sendable {
    let path: String
    init(path: String) { self.path = path }
    func now() -> Int64 {
        guard let bytes = try? RegularFile.contents(of: path, followLinks: true, limit: 64),
            let value = Int64(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        else { return Int64(Date().timeIntervalSince1970) }
        return value
    }
    func pause(_ seconds: Double) async { try? await Task.sleep(nanoseconds: UInt64(min(max(0, seconds), 0.1) * 1e9)) }
}

// MARK: Terminal input

/// Refuses a command line with an argument that is not valid UTF-8: the
/// process would see it repaired (U+FFFD in place of each bad byte), and a
/// name or a path would silently become another.
func checkArgumentsAreUTF8() throws {
    for i in 1..<Int(CommandLine.argc) {
        guard let argument = CommandLine.unsafeArgv[i] else { continue }
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(argument).assumingMemoryBound(to: UInt8.self), count: strlen(argument))
        guard String(validating: bytes, as: UTF8.self) != nil else {
            throw CLIError("argument \(i) is not valid UTF-8 text; type it again in UTF-8")
        }
    }
}

/// The secrets the CLI asks for without echo, with the options that give
/// them to a script instead.
enum Secret: String {
    case pin = "PIN"
    case passphrase
    case exportPassword = "export password"

    var option: String {
        switch self {
        case .pin: return "pin"
        case .passphrase: return "passphrase"
        case .exportPassword: return "password"
        }
    }
}

/// Reads what a command asks for: from the terminal, or, for scripts, from
/// standard input, a file descriptor or a file.
enum Input {
    static var standardInputIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }

    /// One line from standard input after a prompt (nil at end of input).
    /// A line that is not valid UTF-8 is refused (`CLIError`), never
    /// repaired into another text.
    static func line(_ prompt: String) throws -> String? {
        print(prompt, terminator: "")
        fflush(standardOutput)
        var bytes: [UInt8] = []
        while true {
            let c = getchar()
            if c == EOF {
                if bytes.isEmpty {
                    print()
                    return nil
                }
                break
            }
            if c == 0x0A { break }
            bytes.append(UInt8(c))
        }
        if bytes.last == 0x0D { bytes.removeLast() }
        // A terminal echoes the answer and its newline; piped input does not.
        if !standardInputIsTerminal { print() }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw CLIError("that is not valid UTF-8 text (check the terminal's character set)")
        }
        return text
    }

    /// Asks until `parse` accepts; each refusal prints its message and asks
    /// again (a person gets a second chance, and a third...). At most
    /// `attempts` answers; end of input is `.interrupted`.
    static func ask<T>(_ prompt: String, attempts: Int = 5, _ parse: (String) -> Result<T, CLIError>) throws -> T {
        try ask(prompt, attempts: attempts, retryingOn: { $0 is CLIError }) { try parse($0).get() }
    }

    /// Asks until `read` accepts an answer, for a step whose refusals can
    /// end what it acts on: a refusal for which `retry` holds asks again (up
    /// to `attempts` answers), any other is thrown at once.
    static func ask<T>(
        _ prompt: String, attempts: Int = 5, retryingOn retry: (Error) -> Bool, _ read: (String) throws -> T
    ) throws -> T {
        for attempt in 1...attempts {
            let answer: String?
            do { answer = try line(prompt) } catch let error as CLIError {
                print(error.message + (attempt < attempts ? "; try again." : "."))
                continue
            }
            guard let text = answer else { throw CLIError("input ended", exit: .interrupted) }
            do {
                return try read(text.trimmingCharacters(in: .whitespaces))
            } catch where retry(error) {
                print(explain(error).0 + (attempt < attempts ? "; try again." : "."))
            }
        }
        throw CLIError("no valid answer after \(attempts) tries")
    }

    /// A yes/no question.
    static func confirm(_ prompt: String) throws -> Bool {
        try ask(prompt + " [y/n] ") { text in
            switch text.lowercased() {
            case "y", "yes": return .success(true)
            case "n", "no": return .success(false)
            default: return .failure(CLIError("answer y or n"))
            }
        }
    }

    /// A yes/no question whose answer is no unless the person types yes:
    /// for a step that destroys something.
    static func confirmDefaultNo(_ prompt: String) throws -> Bool {
        try ask(prompt + " [y/N] ") { text in
            switch text.lowercased() {
            case "y", "yes": return .success(true)
            case "", "n", "no": return .success(false)
            default: return .failure(CLIError("answer y or n"))
            }
        }
    }

    /// A new secret (a PIN, a passphrase, an export password), typed twice
    /// without echo; `problem` says what is wrong with a first one.
    static func newSecret(_ kind: Secret, _ problem: (String) -> String?) throws -> String {
        let what = kind.rawValue
        let article = "aeiou".contains(what.first ?? "x") ? "an" : "a"
        for _ in 1...3 {
            let first = try secret("Choose \(article) \(what): ", kind)
            if let problem = problem(first) {
                print(problem + "; try again.")
                continue
            }
            let second = try secret("Type the \(what) again: ", kind)
            if first == second { return first }
            print("The two differ; try again.")
        }
        throw CLIError("no \(what) chosen")
    }

    /// A line typed without echo on the terminal (PIN, passphrase); `what`
    /// names it and its script options for the refusal without a terminal.
    static func secret(_ prompt: String, _ what: Secret) throws -> String {
        guard standardInputIsTerminal else {
            throw CLIError("no terminal to ask for the \(what.rawValue): pass --\(what.option)-fd N or --\(what.option)-file PATH")
        }
        var saved = termios()
        tcgetattr(STDIN_FILENO, &saved)
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet)
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
            print()
        }
        print(prompt, terminator: "")
        fflush(standardOutput)
        guard let text = readLine(strippingNewline: true) else { throw CLIError("input ended", exit: .interrupted) }
        return text
    }

    /// The longest first line `firstLine` takes (a PIN, a passphrase, an
    /// export password).
    static let maxLine = 4096

    /// The first line of a file descriptor (read byte by byte to its end or
    /// its first newline, so nothing after it is taken) or of a file: how
    /// scripts pass a secret without `ps` showing it. `fdOption` and
    /// `fileOption` name the options in the messages: a descriptor that is
    /// not open, a directory, a first line longer than `maxLine` bytes, a
    /// file that is not a regular file are each refused, saying so.
    static func firstLine(fd: Int32? = nil, file: String? = nil, fdOption: String, fileOption: String) throws -> String {
        var bytes: [UInt8] = []
        defer { wipe(&bytes) }
        if let fd {
            let name = "\(fdOption) \(fd)"
            var info = stat()
            guard fd >= 0, fstat(fd, &info) == 0 else { throw CLIError("\(name): not an open file descriptor") }
            guard info.st_mode & S_IFMT != S_IFDIR else {
                throw CLIError("\(name): a directory, not a file or a pipe to read from")
            }
            defer { if fd > 2 { close(fd) } }
            var byte: UInt8 = 0
            while true {
                let n = read(fd, &byte, 1)
                if n < 0 && errno == EINTR { continue }
                if n < 0 { throw CLIError("\(name): cannot read: \(String(cString: strerror(errno)))") }
                if n == 0 || byte == 10 { break }
                guard bytes.count < maxLine else {
                    throw CLIError("\(name): the first line is longer than \(maxLine) bytes")
                }
                bytes.append(byte)
            }
        } else if let file {
            var contents = try readNamedFile(file, what: "\(fileOption) \(file)", limit: 65_536, pipeHint: fdOption)
            defer { wipe(&contents) }
            let line = contents.prefix { $0 != 10 }
            guard line.count <= maxLine else {
                throw CLIError("\(fileOption) \(file): the first line is longer than \(maxLine) bytes")
            }
            bytes = Array(line)
        }
        if bytes.last == 13 { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}

// MARK: Files

/// How many bytes the CLI reads at most from each kind of file: its own
/// small JSON files, and a contact store copied along an import.
enum FileLimit {
    static let dataFile = 1 << 20
    static let contactStore = 1 << 30
    /// A photo or screenshot of a QR code.
    static let image = 64 << 20
}

/// A file the CLI keeps in the data directory (`pending.json`,
/// `profile.json`, `config.json`, `secrets.wrap`): nil if there is none.
/// Anything else than a regular file of at most `FileLimit.dataFile`
/// bytes in its place (a FIFO, a directory, a symbolic link, which is not
/// followed) is a damaged file: an error that names it and says what is
/// wrong and what to do (`advice`); it is never waited on, replaced or
/// removed.
func readDataFile(_ path: String, advice: String) throws -> Data? {
    do {
        return try RegularFile.contents(of: path, limit: FileLimit.dataFile).map { Data($0) }
    } catch let error as RegularFileError where error.isDamage {
        throw CLIError("\(path) is damaged: it \(error.reason); \(advice)")
    } catch let error as RegularFileError {
        throw CLIError("\(path) \(error.reason)")
    }
}

/// Writes a file readable by its owner only, atomically (a temporary file
/// renamed over it).
func writePrivateFile(_ path: String, _ data: Data) throws {
    let temporary = path + ".tmp"
    let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
    guard fd >= 0 else { throw CLIError("cannot write \(temporary): \(String(cString: strerror(errno)))") }
    let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    let synced = fsync(fd) == 0
    close(fd)
    guard written == data.count, synced, rename(temporary, path) == 0 else {
        unlink(temporary)
        throw CLIError("cannot write \(path): \(String(cString: strerror(errno)))")
    }
}

/// A file named on the command line (`what` names it in messages, e.g.
/// "the photo PATH"): a link is followed, but what it reaches must be a
/// regular file of at most `limit` bytes; a missing file is an error too.
/// `pipeHint`, for an option that has a descriptor twin, says to pass a
/// pipe there.
func readNamedFile(_ path: String, what: String, limit: Int, pipeHint: String? = nil) throws -> [UInt8] {
    do {
        guard let bytes = try RegularFile.contents(of: path, followLinks: true, limit: limit) else {
            throw CLIError("cannot read \(what): \(String(cString: strerror(ENOENT)))")
        }
        return bytes
    } catch let error as RegularFileError {
        var text = "\(what) \(error.reason)"
        if let pipeHint, case .notRegular = error.problem { text += " (pass a pipe with \(pipeHint) N)" }
        throw CLIError(text)
    }
}

/// Renders an `ItsMeError` from a typed value as a refusal to ask again.
func refusal<T>(_ body: () throws -> T) -> Result<T, CLIError> {
    do { return .success(try body()) } catch {
        return .failure(CLIError(explain(error).0))
    }
}

/// `text` as one word for a POSIX shell: as it is when it has only
/// characters no shell treats specially, else in single quotes (each `'`
/// written as `'\''`), so that a suggested command runs as printed.
func shellQuoted(_ text: String) -> String {
    let plain = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@%+=,#")
    if !text.isEmpty, text.allSatisfy({ plain.contains($0) }), !text.hasPrefix("#") { return text }
    return "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

// MARK: Waiting

/// A line on standard error that counts down while a command waits for the
/// other person, at a terminal only (a pipe gets nothing more: the notice
/// printed before the wait says how long). `stop` erases it; the command's
/// next line then starts on a clean line.
final class WaitingLine: @unchecked Sendable {
    private let lock = NSLock()
    private var stopped = false
    private var width = 0
    private var ticker: Task<Void, Never>?

    /// Starts counting down `seconds` from now, saying `what` ("Waiting for
    /// Bob"); nothing is drawn unless standard error is a terminal.
    init(_ what: String, seconds: Double) {
        guard isatty(STDERR_FILENO) == 1, seconds > 0 else { return }
        let deadline = Date().addingTimeInterval(seconds)
        ticker = Task.detached { [weak self] in
            let frames = ["|", "/", "-", "\\"]
            var frame = 0
            while !Task.isCancelled {
                let left = max(0, Int(deadline.timeIntervalSinceNow.rounded(.up)))
                let clock = "\(left / 60):" + (left % 60 < 10 ? "0" : "") + "\(left % 60)"
                guard let self, self.draw("\(frames[frame % 4]) \(what): \(clock) left (Ctrl-C stops)") else { return }
                frame += 1
                try? await Task.sleep(nanoseconds: 250_000_000)
            }
        }
    }

    /// Draws `text` over the line; false once stopped.
    private func draw(_ text: String) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { return false }
        let padding = String(repeating: " ", count: max(0, width - text.count))
        width = text.count
        FileHandle.standardError.write(Data(("\r" + text + padding).utf8))
        return true
    }

    /// Ends the countdown and erases its line (idempotent).
    func stop() {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { return }
        stopped = true
        ticker?.cancel()
        if width > 0 { FileHandle.standardError.write(Data(("\r" + String(repeating: " ", count: width) + "\r").utf8)) }
    }

    deinit { stop() }
}

/// Runs `body` while a countdown says `what`.
func counting<T>(_ what: String, seconds: Double, _ body: () async throws -> T) async rethrows -> T {
    let countdown = WaitingLine(what, seconds: seconds)
    defer { countdown.stop() }
    return try await body()
}

// MARK: Suggested commands

/// Every command a message suggests is built by `suggest`, so that each
/// runs as printed.
enum Suggestions {
    /// The `--data-dir` the person gave, added to every suggestion (a
    /// suggestion without it would act on another data directory).
    nonisolated(unsafe) static var dataDir: String?

    /// Tests only: $ITSME_TEST_SUGGESTIONS names a file each suggestion is
    /// appended to, one JSON object a line (`command`, `blank`,
    /// `elsewhere`), so that a test can run every one as printed.
    static let log = ProcessInfo.processInfo.environment["ITSME_TEST_SUGGESTIONS"].flatMap { $0.isEmpty ? nil : $0 }

    static func record(_ command: String, blank: String?, elsewhere: Bool) {
        guard let log else { return }
        var entry: [String: Any] = ["command": command, "elsewhere": elsewhere]
        if let blank { entry["blank"] = blank }
        guard let data = try? JSONSerialization.data(withJSONObject: entry, options: [.sortedKeys]) else { return }
        let fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let line = data + Data("\n".utf8)
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}

/// The command `itsme WORDS...` as a person types it: each word quoted for
/// a POSIX shell, then `blank` (a word the person fills in, in capitals:
/// URL, FILE) if any, then `--data-dir` when the person gave one.
/// `elsewhere`: the command is for the other person's device (or the
/// person's other device), so this data directory is not added.
func suggest(_ words: String..., blank: String? = nil, elsewhere: Bool = false) -> String {
    var parts = ["itsme"] + words.map(shellQuoted)
    if let blank { parts.append(blank) }
    if !elsewhere, let dir = Suggestions.dataDir { parts += ["--data-dir", shellQuoted(dir)] }
    let command = parts.joined(separator: " ")
    Suggestions.record(command, blank: blank, elsewhere: elsewhere)
    return command
}

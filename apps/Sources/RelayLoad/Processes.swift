// The servers under test, each a child process: started, its listening port
// read from its stdout, stopped with SIGTERM and waited for.
import Foundation

final class ChildServer: @unchecked Sendable {
    let name: String
    let process = Process()
    let logPath: String
    private let lock = NSLock()
    private var lines: [String] = []
    private var port: Int?
    private let found = DispatchSemaphore(value: 0)
    private var input: Pipe?

    /// Starts `executable` with `arguments` in `directory`; stderr goes to
    /// `logPath`. `portIn` extracts the port from a stdout line. With
    /// `holdInput`, the child's stdin stays open until `stop`.
    init(name: String, executable: String, arguments: [String], directory: String, logPath: String,
         holdInput: Bool = false, portIn: @escaping @Sendable (String) -> Int?) throws {
        self.name = name
        self.logPath = logPath
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: logPath)
        if holdInput {
            let input = Pipe()
            process.standardInput = input
            self.input = input
        } else {
            process.standardInput = FileHandle.nullDevice
        }
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let reader = pipe.fileHandleForReading
        // Reads stdout to the end (so the child never blocks on a full pipe).
        Thread.detachNewThread { [self] in
            var pending = Data()
            while true {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: 10) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    lock.lock()
                    if lines.count < 50 { lines.append(line) }
                    let first = port == nil ? portIn(line) : nil
                    if let first { port = first }
                    lock.unlock()
                    if first != nil { found.signal() }
                }
            }
            found.signal()  // end of output: the child is gone
        }
    }

    var pid: Int32 { process.processIdentifier }

    /// The port, once the child printed it; nil after `seconds` or if it exited.
    func waitForPort(seconds: Double) -> Int? {
        _ = found.wait(timeout: .now() + seconds)
        lock.lock()
        defer { lock.unlock() }
        return port
    }

    /// The first lines of stdout (at most 50).
    func output() -> [String] {
        lock.lock()
        defer { lock.unlock() }
        return lines
    }

    /// The last lines of stdout and stderr, for an error message.
    func tail() -> String {
        lock.lock()
        let out = lines.suffix(3)
        lock.unlock()
        let err = (try? String(contentsOfFile: logPath, encoding: .utf8))?.split(separator: "\n").suffix(5).map(String.init) ?? []
        return (out + err).joined(separator: " | ")
    }

    /// SIGTERM, then waits up to `seconds` (SIGKILL after); the seconds it took.
    @discardableResult
    func stop(seconds: Double = 15) -> (seconds: Double, status: Int32?, killed: Bool) {
        let start = monoNanos()
        try? input?.fileHandleForWriting.close()
        input = nil
        guard process.isRunning else { return (0, process.terminationStatus, false) }
        kill(process.processIdentifier, SIGTERM)
        let deadline = start + UInt64(seconds * 1e9)
        while process.isRunning && monoNanos() < deadline { usleep(10_000) }
        var killed = false
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            killed = true
            process.waitUntilExit()
        }
        return (Double(monoNanos() - start) / 1e9, process.terminationStatus, killed)
    }
}

/// "itsme-relay listening on http(s)://127.0.0.1:PORT" -> PORT
func relayPort(_ line: String) -> Int? {
    for prefix in ["itsme-relay listening on http://127.0.0.1:", "itsme-relay listening on https://127.0.0.1:"] where line.hasPrefix(prefix) {
        return Int(line.dropFirst(prefix.count).prefix { $0.isNumber })
    }
    return nil
}

/// "itsme-relay cluster listening on http://127.0.0.1:PORT" -> PORT
func clusterPort(_ line: String) -> Int? {
    let prefix = "itsme-relay cluster listening on http://127.0.0.1:"
    return line.hasPrefix(prefix) ? Int(line.dropFirst(prefix.count).prefix { $0.isNumber }) : nil
}

/// Twisted's "PrivacyEnhancedSite starting on PORT" -> PORT
func twistedPort(_ line: String) -> Int? {
    guard let range = line.range(of: "Site starting on ") else { return nil }
    return Int(line[range.upperBound...].prefix { $0.isNumber })
}

func makeTemporaryDirectory() throws -> String {
    var template = Array((NSTemporaryDirectory() + "itsme-relay-bench-XXXXXX").utf8CString)
    guard let path = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw LoadError("cannot create a temporary directory")
    }
    return String(cString: path)
}

struct LoadError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The build this program is: a debug load generator runs the debug relay.
#if DEBUG
let buildConfiguration = "debug"
#else
let buildConfiguration = "release"
#endif

/// The relay of this program's build: apps/.build/CONFIG/itsme-relay from
/// the repository, else the one next to this executable.
func defaultRelay() -> String? {
    locate("apps/.build/\(buildConfiguration)/itsme-relay", sibling: "itsme-relay")
}

/// `relative` under the current directory or one of its parents, or next to
/// this executable (`sibling`), whichever exists first.
func locate(_ relative: String, sibling: String? = nil) -> String? {
    let fm = FileManager.default
    var dir = URL(fileURLWithPath: fm.currentDirectoryPath)
    for _ in 0..<6 {
        let candidate = dir.appendingPathComponent(relative).path
        if fm.fileExists(atPath: candidate) { return candidate }
        dir = dir.deletingLastPathComponent()
    }
    if let sibling, let exe = try? fm.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        let candidate = URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent(sibling).path
        if fm.fileExists(atPath: candidate) { return candidate }
    }
    return nil
}

import Foundation
import Logging

/// `--log-format json`: one JSON object a line on standard error, for a log
/// collector (journald, Loki, Elasticsearch) to read without a pattern:
/// `{"time":"2026-11-26T16:00:00.123Z","level":"info","label":"itsme-relay",
/// "message":"...","metadata":{...}}`. What is logged is the same as in
/// text: the relay never logs a body, a token or more of an ID than its
/// first 8 characters (docs/PROTOCOL.md 15.7).
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    private let label: String
    private let output: JSONLogOutput

    public init(label: String, level: Logger.Level, output: JSONLogOutput = .standardError) {
        self.label = label
        self.logLevel = level
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = metadata
        if let explicit = event.metadata { all.merge(explicit) { $1 } }
        if let error = event.error { all["error"] = "\(error)" }
        var text = "{\"time\":" + Self.quoted(Self.timestamp(Date()))
        text += ",\"level\":" + Self.quoted(event.level.rawValue)
        text += ",\"label\":" + Self.quoted(label)
        text += ",\"message\":" + Self.quoted(event.message.description)
        text += ",\"metadata\":" + Self.encode(.dictionary(all))
        text += "}\n"
        output.write(text)
    }

    // MARK: Encoding

    static func encode(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let text): return quoted(text)
        case .stringConvertible(let convertible): return quoted(convertible.description)
        case .array(let values): return "[" + values.map(encode).joined(separator: ",") + "]"
        case .dictionary(let entries):
            return "{" + entries.sorted { $0.key < $1.key }.map { quoted($0.key) + ":" + encode($0.value) }.joined(separator: ",") + "}"
        }
    }

    /// A JSON string: quotes, backslashes and control characters escaped,
    /// so that a line holds exactly one object whatever a message carries.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || scalar == "\u{2028}" || scalar == "\u{2029}":
                out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// UTC, to the millisecond: `2026-11-26T16:00:00.123Z`.
    static func timestamp(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        let millis = Int((date.timeIntervalSince1970 - Double(seconds)) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
            Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), min(max(millis, 0), 999))
    }
}

/// Where JSON log lines go: each line in one write, under a lock, so that
/// lines from several threads never interleave.
public final class JSONLogOutput: @unchecked Sendable {
    private let lock = NSLock()
    private let handle: FileHandle

    public static let standardError = JSONLogOutput(handle: .standardError)

    public init(handle: FileHandle) { self.handle = handle }

    func write(_ line: String) {
        lock.withLock { handle.write(Data(line.utf8)) }
    }
}

// A small strict JSON reader and writer for the library's own saved states
// and the relay's JSON (neither the core nor this target has Foundation). It reads what Python's json and Swift's
// JSONEncoder write: any JSON value, nested at most a few levels, integers
// only as numbers.

/// A JSON value.
package enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    case int(Int)
    /// A number with a fraction or an exponent (the relay's `expires`).
    case fraction(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    package static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.bool(let x), .bool(let y)): return x == y
        case (.int(let x), .int(let y)): return x == y
        case (.fraction(let x), .fraction(let y)): return x == y
        case (.string(let x), .string(let y)): return x == y
        case (.array(let x), .array(let y)): return x == y
        case (.object(let x), .object(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// The member `key` of an object (the last one if repeated); nil if
    /// absent or if this is not an object.
    package subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.last(where: { $0.0 == key })?.1
    }

    // MARK: Writing

    /// Compact text with `", "` and `": "` separators, as Python's
    /// `json.dumps` writes by default.
    package var text: String {
        var out = ""
        write(to: &out, comma: ", ", colon: ": ")
        return out
    }

    /// Text without spaces, as the relay writes it (and JavaScript's
    /// `JSON.stringify`).
    package var compact: String {
        var out = ""
        write(to: &out, comma: ",", colon: ":")
        return out
    }

    private func write(to out: inout String, comma: String, colon: String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .fraction(let d): out += d.isFinite ? String(d) : "null"
        case .string(let s): Self.writeString(s, to: &out)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += comma }
                item.write(to: &out, comma: comma, colon: colon)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out += comma }
                Self.writeString(key, to: &out)
                out += colon
                value.write(to: &out, comma: comma, colon: colon)
            }
            out += "}"
        }
    }

    private static func writeString(_ s: String, to out: inout String) {
        let hex = Array("0123456789abcdef".utf8)
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    let v = Int(scalar.value)
                    out += "\\u00" + String(decoding: [hex[v >> 4], hex[v & 15]], as: UTF8.self)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }

    // MARK: Reading

    /// Parses `text`; nil for anything that is not one JSON value (with
    /// surrounding white space), for numbers that are not integers in
    /// range, and for nesting deeper than `maxDepth`.
    package static func parse(_ text: String, maxDepth: Int = 8) -> JSONValue? {
        var reader = Reader(bytes: Array(text.utf8), maxDepth: maxDepth)
        guard let value = reader.value(depth: 0) else { return nil }
        reader.skipSpace()
        return reader.index == reader.bytes.count ? value : nil
    }

    private struct Reader {
        let bytes: [UInt8]
        let maxDepth: Int
        var index = 0

        init(bytes: [UInt8], maxDepth: Int) {
            self.bytes = bytes
            self.maxDepth = maxDepth
        }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func literal(_ word: String) -> Bool {
            let w = Array(word.utf8)
            guard bytes.count - index >= w.count, Array(bytes[index..<index + w.count]) == w else { return false }
            index += w.count
            return true
        }

        mutating func value(depth: Int) -> JSONValue? {
            guard depth <= maxDepth else { return nil }
            skipSpace()
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "n"): return literal("null") ? .null : nil
            case UInt8(ascii: "t"): return literal("true") ? .bool(true) : nil
            case UInt8(ascii: "f"): return literal("false") ? .bool(false) : nil
            case UInt8(ascii: "\""): return string().map { .string($0) }
            case UInt8(ascii: "["):
                index += 1
                var items: [JSONValue] = []
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return .array(items)
                }
                while true {
                    guard let item = value(depth: depth + 1) else { return nil }
                    items.append(item)
                    skipSpace()
                    guard index < bytes.count else { return nil }
                    if bytes[index] == UInt8(ascii: ",") {
                        index += 1
                    } else if bytes[index] == UInt8(ascii: "]") {
                        index += 1
                        return .array(items)
                    } else {
                        return nil
                    }
                }
            case UInt8(ascii: "{"):
                index += 1
                var members: [(String, JSONValue)] = []
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return .object(members)
                }
                while true {
                    skipSpace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), let key = string() else { return nil }
                    skipSpace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
                    index += 1
                    guard let item = value(depth: depth + 1) else { return nil }
                    members.append((key, item))
                    skipSpace()
                    guard index < bytes.count else { return nil }
                    if bytes[index] == UInt8(ascii: ",") {
                        index += 1
                    } else if bytes[index] == UInt8(ascii: "}") {
                        index += 1
                        return .object(members)
                    } else {
                        return nil
                    }
                }
            default: return number()
            }
        }

        mutating func digits() -> Int {
            let start = index
            while index < bytes.count, (0x30...0x39).contains(bytes[index]) { index += 1 }
            return index - start
        }

        /// An integer of at most 18 digits, or a fraction.
        mutating func number() -> JSONValue? {
            let start = index
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            let intStart = index
            let intDigits = digits()
            guard intDigits > 0, !(intDigits > 1 && bytes[intStart] == 0x30) else { return nil }
            var isInteger = true
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                isInteger = false
                guard digits() > 0 else { return nil }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                isInteger = false
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard digits() > 0 else { return nil }
            }
            guard index - start <= 64 else { return nil }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            if isInteger {
                guard intDigits <= 18 else { return nil }
                return Int(text).map { .int($0) }
            }
            return Double(text).flatMap { $0.isFinite ? .fraction($0) : nil }
        }

        mutating func hex4() -> UInt32? {
            guard bytes.count - index >= 4 else { return nil }
            var v: UInt32 = 0
            for _ in 0..<4 {
                let c = bytes[index]
                let d: UInt32
                switch c {
                case 0x30...0x39: d = UInt32(c - 0x30)
                case 0x41...0x46: d = UInt32(c - 0x41 + 10)
                case 0x61...0x66: d = UInt32(c - 0x61 + 10)
                default: return nil
                }
                v = v << 4 | d
                index += 1
            }
            return v
        }

        /// A string starting at the opening quote.
        mutating func string() -> String? {
            index += 1
            var scalars = String.UnicodeScalarView()
            var run: [UInt8] = []
            func flushRun() -> Bool {
                guard !run.isEmpty else { return true }
                guard let s = String(validating: run, as: UTF8.self) else { return false }
                scalars.append(contentsOf: s.unicodeScalars)
                run.removeAll()
                return true
            }
            while index < bytes.count {
                let c = bytes[index]
                if c == UInt8(ascii: "\"") {
                    index += 1
                    guard flushRun() else { return nil }
                    return String(scalars)
                }
                if c < 0x20 { return nil }
                if c != UInt8(ascii: "\\") {
                    run.append(c)
                    index += 1
                    continue
                }
                guard flushRun() else { return nil }
                index += 1
                guard index < bytes.count else { return nil }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    guard var v = hex4() else { return nil }
                    if (0xD800...0xDBFF).contains(v) {
                        guard literal("\\u"), let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                        v = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(v) else { return nil }
                    scalars.append(scalar)
                default: return nil
                }
            }
            return nil
        }
    }
}

/// Strict base64 in two variants: unpadded base64url (our formats) and
/// padded standard base64 (the source format). Exactly one text is accepted
/// per byte string: no whitespace, no foreign characters, no missing or
/// extra padding, no non-zero unused bits.
public enum Base64 {
    /// The two alphabets and padding rules.
    public enum Variant: Sendable {
        /// base64url (RFC 4648 section 5) without `=` padding: the project's own formats.
        case urlUnpadded
        /// Standard base64 (RFC 4648 section 4) with `=` padding: the source format.
        case standardPadded
    }

    private static let standard = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let url = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// The canonical encoding of `bytes` in `variant`. Never fails.
    public static func encode(_ bytes: [UInt8], _ variant: Variant) -> String {
        let alphabet = variant == .urlUnpadded ? url : standard
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= bytes.count {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [alphabet[Int(v >> 18)], alphabet[Int(v >> 12 & 63)], alphabet[Int(v >> 6 & 63)], alphabet[Int(v & 63)]]
            i += 3
        }
        let rest = bytes.count - i
        if rest > 0 {
            let v = UInt32(bytes[i]) << 16 | (rest == 2 ? UInt32(bytes[i + 1]) << 8 : 0)
            out += [alphabet[Int(v >> 18)], alphabet[Int(v >> 12 & 63)]]
            if rest == 2 { out.append(alphabet[Int(v >> 6 & 63)]) }
            if variant == .standardPadded { out += Array(repeating: UInt8(ascii: "="), count: 3 - rest) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// nil for anything but the canonical encoding of some byte string.
    /// Inlined so that a caller in another module gets it specialised for
    /// its string type; the work is `decode(utf8:_:)`.
    @inlinable
    public static func decode(_ text: some StringProtocol, _ variant: Variant) -> [UInt8]? {
        decode(utf8: Array(text.utf8), variant)
    }

    /// `decode` of a text's UTF-8 bytes.
    public static func decode(utf8 text: [UInt8], _ variant: Variant) -> [UInt8]? {
        var chars = text
        if variant == .standardPadded {
            guard chars.count % 4 == 0 else { return nil }
            var pad = 0
            while pad < 2, chars.last == UInt8(ascii: "=") {
                chars.removeLast()
                pad += 1
            }
        }
        guard chars.count % 4 != 1 else { return nil }
        if variant == .standardPadded, chars.contains(UInt8(ascii: "=")) { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count * 3 / 4)
        var acc: UInt32 = 0
        var bits = 0
        for c in chars {
            guard let v = value(c, variant) else { return nil }
            acc = acc << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
            }
        }
        // Unused low bits of the last character must be zero.
        guard acc & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return out
    }

    private static func value(_ c: UInt8, _ variant: Variant) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return c - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return c - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-") where variant == .urlUnpadded, UInt8(ascii: "+") where variant == .standardPadded: return 62
        case UInt8(ascii: "_") where variant == .urlUnpadded, UInt8(ascii: "/") where variant == .standardPadded: return 63
        default: return nil
        }
    }
}

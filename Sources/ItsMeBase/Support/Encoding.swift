import ItsMePrimitives

/// The encodings of docs/PROTOCOL.md section 1.

/// Length-prefixed concatenation (the CPace draft's `lv_cat`): each part is
/// preceded by its length in unsigned LEB128.
package enum LV {
    package static func lengthPrefix(_ count: Int) -> [UInt8] {
        var n = UInt64(count)
        var out: [UInt8] = []
        repeat {
            let low = UInt8(n & 0x7f)
            n >>= 7
            out.append(n == 0 ? low : low | 0x80)
        } while n != 0
        return out
    }

    package static func cat(_ parts: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(parts.reduce(0) { $0 + $1.count + 2 })
        for p in parts {
            out += lengthPrefix(p.count)
            out += p
        }
        return out
    }

    package static func cat(_ parts: [UInt8]...) -> [UInt8] { cat(parts) }

    /// ASCII bytes of a label or text.
    @inline(__always) package static func b(_ s: String) -> [UInt8] { Array(s.utf8) }
}

/// The 26 NATO words of the source, in index order.
public enum NATO {
    /// The one table. Static strings, so the C layer hands out pointers
    /// that live as long as the library (`itsme_nato_word`).
    package static let staticWords: [StaticString] = [
        "ALFA", "BRAVO", "CHARLIE", "DELTA", "ECHO", "FOXTROT", "GOLF", "HOTEL", "INDIA", "JULIET", "KILO", "LIMA",
        "MIKE", "NOVEMBER", "OSCAR", "PAPA", "QUEBEC", "ROMEO", "SIERRA", "TANGO", "UNIFORM", "VICTOR", "WHISKEY",
        "XRAY", "YANKEE", "ZULU",
    ]

    /// The 26 words of the NATO alphabet in upper case, ALFA to ZULU.
    public static let words: [String] = staticWords.map { $0.description }

    private static let wordBytes: [[UInt8]] = words.map { Array($0.utf8) }

    /// The index of a word typed in any ASCII case, compared byte by byte
    /// (TypedInput): a look-alike letter is no letter.
    package static func index(of word: some StringProtocol) -> Int? { index(ofBytes: word.utf8) }

    static func index(ofBytes word: some Collection<UInt8>) -> Int? {
        wordBytes.firstIndex(of: word.map(TypedInput.upper))
    }
}

/// The one reader of what a person types or hears and types back (PROTOCOL.md
/// section 1, "Typed input"): short codes, heard voice codes, device tags,
/// invite and encryption codes, generated export passwords and degradation
/// codes. It reads UTF-8 bytes and knows ASCII only: no Unicode case folding,
/// no normalisation, no other script's digits. A character that merely looks
/// like or folds to an ASCII letter or digit (U+212A KELVIN SIGN, U+017F long
/// s, U+0131 dotless i, fullwidth forms, Arabic-Indic digits) is refused, never
/// read as that letter: Swift's `String ==` compares canonically equivalent
/// text as equal, so no reader here compares `String`s. "Space" is U+0020.
public enum TypedInput {
    static let space = UInt8(ascii: " ")
    static let dash = UInt8(ascii: "-")

    /// `a-z` upper-cased; every other byte unchanged.
    @inline(__always)
    package static func upper(_ c: UInt8) -> UInt8 { (0x61...0x7a).contains(c) ? c - 0x20 : c }

    @inline(__always)
    static func isDigit(_ c: UInt8) -> Bool { (0x30...0x39).contains(c) }

    /// U+0009, U+000A, U+000D and U+0020: the white space a pasted or
    /// scanned text may carry around it (PROTOCOL.md 17.1, 17.3).
    static func isASCIIWhitespace(_ c: Unicode.Scalar) -> Bool {
        c == " " || c == "\t" || c == "\n" || c == "\r"
    }

    /// The text without leading and trailing ASCII white space (and nothing
    /// else: no other Unicode white space is removed).
    package static func withoutASCIIWhitespaceAround(_ text: String) -> String {
        let scalars = Array(text.unicodeScalars)
        var start = 0, end = scalars.count
        while start < end, isASCIIWhitespace(scalars[start]) { start += 1 }
        while end > start, isASCIIWhitespace(scalars[end - 1]) { end -= 1 }
        var view = String.UnicodeScalarView()
        view.append(contentsOf: scalars[start..<end])
        return String(view)
    }

    /// The text without any ASCII white space.
    package static func withoutASCIIWhitespace(_ text: String) -> String {
        var view = String.UnicodeScalarView()
        view.append(contentsOf: text.unicodeScalars.filter { !isASCIIWhitespace($0) })
        return String(view)
    }

    /// The bytes without leading and trailing U+0020.
    package static func trimmed(_ input: String) -> ArraySlice<UInt8> {
        var bytes = ArraySlice(Array(input.utf8))
        while bytes.first == space { bytes.removeFirst() }
        while bytes.last == space { bytes.removeLast() }
        return bytes
    }

    /// A NATO word in any ASCII case, one U+0020 or `-`, and exactly `digits`
    /// ASCII digits, with leading and trailing spaces ignored: the short code
    /// (4 digits, section 4) and the heard voice code (3 digits, section 10).
    package static func wordAndNumber(_ input: String, digits: Int) -> (word: Int, number: UInt32)? {
        let bytes = trimmed(input)
        guard let sep = bytes.firstIndex(where: { $0 == space || $0 == dash }) else { return nil }
        let number = bytes[(sep + 1)...]
        guard number.count == digits, number.allSatisfy(isDigit),
            let word = NATO.index(ofBytes: bytes[..<sep])
        else { return nil }
        return (word, number.reduce(UInt32(0)) { $0 * 10 + UInt32($1 - 0x30) })
    }

    /// A NATO word alone, as a person types it (a voice word): any ASCII
    /// case, leading and trailing spaces ignored. Only the spellings of
    /// `NATO.words` are words ("ALFA", "JULIET", "XRAY", "WHISKEY"); the
    /// ICAO spellings "ALPHA" and "JULIETT" are not, here as in every code.
    public static func natoWord(_ input: String) -> Int? { NATO.index(ofBytes: trimmed(input)) }

    /// A two-digit device tag as typed: one or two ASCII digits ("5" and "05"
    /// are both 5), leading and trailing spaces ignored.
    public static func tag(_ input: String) -> UInt32? {
        let bytes = trimmed(input)
        guard (1...2).contains(bytes.count), bytes.allSatisfy(isDigit) else { return nil }
        return bytes.reduce(UInt32(0)) { $0 * 10 + UInt32($1 - 0x30) }
    }

    /// The values, in `alphabet` (upper-case ASCII), of the characters typed,
    /// in any ASCII case, with every U+0020 and `-` skipped wherever it is.
    /// A character outside the alphabet ends the reading: `.failure` with its
    /// byte (the first byte of a non-ASCII character).
    package static func alphabetValues(_ input: String, alphabet: [UInt8]) -> Result<[Int], Refused> {
        var values: [Int] = []
        for c in input.utf8 where c != space && c != dash {
            guard let v = alphabet.firstIndex(of: upper(c)) else { return .failure(Refused(byte: c)) }
            values.append(v)
        }
        return .success(values)
    }

    /// The first character that is not in a code's alphabet.
    package struct Refused: Error, Equatable, Sendable {
        /// The refused byte, as typed.
        package let byte: UInt8
        /// "'1'" for a printable ASCII character, else "a character" (a
        /// non-ASCII character is never shown as the letter it resembles).
        package var shown: String {
            (0x21..<0x7f).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "a character"
        }
    }
}

/// A NATO word and four digits (PROTOCOL.md section 4): the SAS and the
/// Bluetooth session code. 260,000 values, 17.99 bits.
public struct ShortCode: Equatable, Sendable, CustomStringConvertible {
    package static let valueCount: UInt32 = 260_000
    /// The code as one number: word index * 10,000 + the four digits.
    package let value: UInt32

    /// The code of `value`; nil unless it is below 260,000.
    package init?(value: UInt32) {
        guard value < Self.valueCount else { return nil }
        self.value = value
    }

    package var wordIndex: Int { Int(value / 10_000) }
    /// The four-digit number, 0 to 9999.
    package var number: Int { Int(value % 10_000) }

    /// "ECHO 0042".
    public var text: String {
        let digits = String(number)
        return NATO.words[wordIndex] + " " + String(repeating: "0", count: 4 - digits.count) + digits
    }

    public var description: String { text }

    /// Parses what a person typed (TypedInput.wordAndNumber): surrounding
    /// spaces ignored, the word in any ASCII case, one space or "-",
    /// exactly four ASCII digits; nil for anything else. A host compares
    /// the SAS the other person reads aloud this way (`==` with
    /// `Exchange.sas`) rather than asking "the same? yes/no".
    public init?(parsing input: String) {
        guard let (word, number) = TypedInput.wordAndNumber(input, digits: 4) else { return nil }
        self.value = UInt32(word) * 10_000 + number
    }

    /// A uniformly random code: 4 random bytes at a time, rejecting values
    /// at or above the largest multiple of 260,000 below 2^32.
    package static func random<R: RandomSource>(using rng: inout R) -> ShortCode {
        let limit: UInt32 = 4_294_940_000
        while true {
            let b = rng.bytes(4)
            let r = b.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            if r < limit { return ShortCode(value: r % valueCount)! }
        }
    }

    /// The SAS of section 4.1: HKDF(seed, info = lv_cat("itsme-sas-v1",
    /// th)) to 8 bytes, big-endian, modulo 260,000.
    /// Throws only if HKDF refuses its input (`.invalidArgument`), which a
    /// 32-byte seed never makes it do.
    package static func sas<S: ByteView & ~Copyable>(seed: borrowing S, transcriptHash: [UInt8]) throws -> ShortCode {
        let info = LV.cat(LV.b("itsme-sas-v1"), transcriptHash)
        let v = try withScratch(8) { okm -> UInt64 in
            try HKDF.derive(ikm: seed, salt: [UInt8](), info: info, into: okm)
            return okm.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        }
        return ShortCode(value: UInt32(v % UInt64(valueCount)))!
    }
}

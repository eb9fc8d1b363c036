import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

/// Every reader of typed codes goes through TypedInput, which reads ASCII
/// only (PROTOCOL.md section 1, "Typed input"). Each reader is fed its valid
/// inputs with one ASCII letter or digit replaced by every Unicode character
/// that case-folds, case-maps, compatibility-normalises (NFKC) or counts as a
/// decimal digit of the same value: each such input must be refused.
final class TypedInputTests: XCTestCase {
    override func setUpWithError() throws {
        try Sodium.initialize()
    }

    /// (look-alike, the ASCII letter or digit it stands for), over every
    /// assigned non-ASCII scalar.
    static let lookAlikes: [(Unicode.Scalar, UInt8)] = {
        var pairs: [(Unicode.Scalar, UInt8)] = []
        for value in UInt32(0x80)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value),
                ![.unassigned, .privateUse, .surrogate].contains(scalar.properties.generalCategory)
            else { continue }
            let alone = String(Character(scalar))
            var targets = Set<UInt8>()
            for mapped in [
                scalar.properties.uppercaseMapping, scalar.properties.lowercaseMapping,
                scalar.properties.titlecaseMapping, alone.precomposedStringWithCompatibilityMapping,
                alone.precomposedStringWithCanonicalMapping, alone.decomposedStringWithCanonicalMapping,
                alone.folding(options: [.caseInsensitive, .widthInsensitive, .diacriticInsensitive], locale: nil),
            ] {
                let bytes = Array(mapped.utf8)
                if bytes.count == 1, isAlphanumeric(bytes[0]) { targets.insert(TypedInput.upper(bytes[0])) }
            }
            if scalar.properties.numericType == .decimal, let digit = scalar.properties.numericValue,
                (0...9).contains(digit)
            {
                targets.insert(UInt8(ascii: "0") + UInt8(digit))
            }
            for target in targets.sorted() { pairs.append((scalar, target)) }
        }
        return pairs
    }()

    static func isAlphanumeric(_ c: UInt8) -> Bool {
        (0x30...0x39).contains(c) || (0x41...0x5a).contains(c) || (0x61...0x7a).contains(c)
    }

    func testTheLookAlikesIncludeTheKnownOnes() {
        let found = Dictionary(grouping: Self.lookAlikes, by: { $0.0 }).mapValues { Set($0.map(\.1)) }
        for (scalar, ascii): (UInt32, Character) in [
            (0x212A, "K"), (0x017F, "S"), (0x0131, "I"), (0xFF21, "A"), (0xFF41, "A"), (0xFF10, "0"),
            (0x0660, "0"), (0x0969, "3"), (0x1D7CE, "0"), (0x00B2, "2"),
        ] {
            XCTAssertEqual(found[Unicode.Scalar(scalar)!], [ascii.asciiValue!], "U+\(String(scalar, radix: 16))")
        }
        XCTAssertGreaterThan(Self.lookAlikes.count, 500)
    }

    /// Feeds `read` each valid input, then each valid input with one ASCII
    /// letter or digit replaced by each of its look-alikes. Fails unless
    /// every valid input is read, and every look-alike of every character
    /// the reader accepts was tried and refused.
    func assertRefusesLookAlikes(
        _ reader: String, valid: [String], _ read: (String) -> Bool, file: StaticString = #filePath, line: UInt = #line
    ) {
        var covered = Set<UInt8>()
        var tried = 0
        for input in valid {
            XCTAssertTrue(read(input), "\(reader): a valid input \(input) refused", file: file, line: line)
            let bytes = Array(input.utf8)
            for (i, b) in bytes.enumerated() where Self.isAlphanumeric(b) {
                let target = TypedInput.upper(b)
                guard !covered.contains(target) else { continue }
                covered.insert(target)
                for (scalar, ascii) in Self.lookAlikes where ascii == target {
                    let altered =
                        String(decoding: bytes[..<i], as: UTF8.self) + String(Character(scalar))
                        + String(decoding: bytes[(i + 1)...], as: UTF8.self)
                    tried += 1
                    XCTAssertFalse(
                        read(altered), "\(reader) read U+\(String(scalar.value, radix: 16, uppercase: true)) as "
                            + "\(Character(Unicode.Scalar(ascii))) in \(altered)", file: file, line: line)
                }
            }
        }
        XCTAssertGreaterThan(tried, 0, file: file, line: line)
        // The valid inputs use every letter and digit the reader accepts.
        let wanted = Set(valid.joined().utf8.filter(Self.isAlphanumeric).map(TypedInput.upper))
        XCTAssertEqual(covered, wanted, file: file, line: line)
    }

    /// One NATO word per letter, and numbers that use every digit.
    static func wordInputs(digits: Int) -> [String] {
        NATO.words.enumerated().map { i, word in
            let number = (0..<digits).map { String((i * digits + $0) % 10) }.joined()
            return (i % 2 == 0 ? word : word.lowercased()) + (i % 3 == 0 ? "-" : " ") + number
        }
    }

    func testShortCodes() {
        assertRefusesLookAlikes("ShortCode(parsing:)", valid: Self.wordInputs(digits: 4)) { ShortCode(parsing: $0) != nil }
    }

    func testHeardVoiceCodes() {
        assertRefusesLookAlikes("VoiceProtocol.parseCode", valid: Self.wordInputs(digits: 3)) {
            VoiceProtocol.parseCode($0) != nil
        }
    }

    func testTags() {
        assertRefusesLookAlikes("TypedInput.tag", valid: (0...9).map { "\($0)" } + ["05", "42", "99", " 7 "]) {
            TypedInput.tag($0) != nil
        }
        XCTAssertEqual(TypedInput.tag("5"), 5)
        XCTAssertEqual(TypedInput.tag("05"), 5)
        XCTAssertEqual(TypedInput.tag(" 42 "), 42)
        for refused in ["", " ", "100", "005", "-1", "4 2", "4\u{00A0}", "\u{00A0}4", "+5", "0x5"] {
            XCTAssertNil(TypedInput.tag(refused), refused)
        }
    }

    /// Codes drawn until every character of the alphabet has appeared.
    func drawn(_ alphabet: [UInt8], _ draw: (inout DeterministicRandom) -> String) -> [String] {
        var rng = DeterministicRandom(seed: Array(repeating: 7, count: 32))
        var seen = Set<UInt8>(), codes: [String] = []
        while seen.count < alphabet.count {
            let code = draw(&rng)
            codes.append(codes.count % 2 == 0 ? code : code.lowercased())
            seen.formUnion(code.utf8.map(TypedInput.upper).filter { alphabet.contains($0) })
        }
        return codes
    }

    func testInviteAndEncryptionCodes() {
        let codes = drawn(RemoteCode.alphabet) { RemoteCode.random(using: &$0).text }
        assertRefusesLookAlikes("RemoteCode(parsing:)", valid: codes) { (try? RemoteCode(parsing: $0)) != nil }
    }

    func testGeneratedExportPasswords() {
        let passwords = drawn(RemoteCode.alphabet) { IdentityExport.generatePassword(using: &$0) }
        assertRefusesLookAlikes("IdentityExport.passwordBytes", valid: passwords) {
            (try? IdentityExport.passwordBytes($0, kind: .generated)) != nil
        }
    }

    func testDegradationCodes() {
        let codes = drawn(DegradationCode.alphabet) { rng in
            var bytes = [UInt8](repeating: 0, count: 15)
            bytes.withUnsafeMutableBytes { rng.fill($0) }
            return DegradationCode.format(bytes)
        }
        assertRefusesLookAlikes("DegradationCode.parse", valid: codes) { DegradationCode.parse($0) != nil }
    }

    /// Separators and spaces are U+0020 and `-` only.
    func testOtherSpacesAndDashesAreRefused() {
        for separator in ["\u{00A0}", "\u{2007}", "\u{3000}", "\u{2010}", "\u{2011}", "\u{2212}", "\u{FF0D}", "\t"] {
            XCTAssertNil(ShortCode(parsing: "ECHO\(separator)0042"), separator.debugDescription)
            XCTAssertNil(VoiceProtocol.parseCode("ECHO\(separator)512"), separator.debugDescription)
            XCTAssertThrowsError(try RemoteCode(parsing: "K7X2\(separator)M9PM"), separator.debugDescription)
            XCTAssertNil(ShortCode(parsing: "\(separator)ECHO 0042"), separator.debugDescription)
        }
        XCTAssertEqual(ShortCode(parsing: "  echo-0042 ")?.text, "ECHO 0042")
        XCTAssertEqual(VoiceProtocol.parseCode(" Echo 512").map(VoiceProtocol.codeText), "ECHO 512")
    }

    /// The CLI's reader of NATO words and its aliases go through the same
    /// byte-wise comparison: KILO with a Kelvin sign is no word.
    func testNATOIndexIsByteWise() {
        XCTAssertEqual(NATO.index(of: "kilo"), 10)
        XCTAssertNil(NATO.index(of: "\u{212A}ILO"))
        XCTAssertNil(NATO.index(of: "\u{0131}ndia"))
        XCTAssertNil(NATO.index(of: "\u{FF25}CHO"))
    }

    /// A voice word typed alone: the same reader as the word of every code,
    /// so a program (the CLI) accepts exactly what the library does.
    func testVoiceWordsAloneAreReadAsInCodes() {
        XCTAssertEqual(TypedInput.natoWord("alfa"), 0)
        XCTAssertEqual(TypedInput.natoWord("  Juliet "), 9)
        XCTAssertEqual(TypedInput.natoWord("XRAY"), 23)
        for refused in ["ALPHA", "JULIETT", "X-RAY", "WHISKY", "", "ECHO 512", "\u{212A}ILO", "ECHO\t", "\u{00A0}ECHO"] {
            XCTAssertNil(TypedInput.natoWord(refused), refused)
            XCTAssertNil(TypedInput.wordAndNumber(refused + " 512", digits: 3), refused)
        }
        XCTAssertEqual(NATO.words.count, 26)
        XCTAssertEqual(NATO.words, NATO.staticWords.map { "\($0)" })
    }
}

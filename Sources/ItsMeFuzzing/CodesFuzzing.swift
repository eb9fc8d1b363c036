import ItsMePrimitives
import ItsMeBase
import ItsMeStore
import ItsMeFlows

/// The body of the typed-code fuzz target (fuzz/CodesFuzz.swift), here so
/// the tests replay its corpus through exactly the same code.
///
/// Every reader of what a person types: short codes and Bluetooth session
/// codes, heard voice codes and device tags, invite and encryption codes,
/// degradation codes, PINs, generated and chosen export passwords, display
/// names, photo filenames and scope lists. Besides never crashing,
/// whatever a reader accepts must read back the same from the form the
/// library shows it in.
enum CodesFuzzing {
    /// The number of readers; the first byte, modulo this, picks one.
    static let kinds = 11

    /// Feeds the text after the first byte to the reader the first byte
    /// picks. True if the reader accepted it.
    @discardableResult
    static func run(_ input: [UInt8]) -> Bool {
        guard let selector = input.first else { return false }
        let text = String(decoding: input.dropFirst(), as: UTF8.self)
        switch Int(selector) % kinds {
        case 0:
            // A SAS or a Bluetooth session code: "ECHO 0042".
            guard let code = ShortCode(parsing: text) else { return false }
            check(code.value < ShortCode.valueCount, "a short code out of range")
            check(ShortCode(parsing: code.text) == code, "a short code does not read back")
            check(ShortCode(parsing: code.text.lowercased().replacingFirstSpace(with: "-")) == code, "a short code's other form")
            return true
        case 1:
            // An invite or encryption code: "ABCD-EFGH".
            guard let code = try? RemoteCode(parsing: text) else { return false }
            check((try? RemoteCode(parsing: code.text)) == code, "a remote code does not read back")
            check((try? RemoteCode(parsing: code.canonical.lowercased())) == code, "a remote code in lower case")
            return true
        case 2:
            // A heard voice code: "ECHO 042".
            guard let value = VoiceProtocol.parseCode(text) else { return false }
            check(UInt64(value) < VoiceProtocol.codeValues, "a voice code out of range")
            check(VoiceProtocol.parseCode(VoiceProtocol.codeText(value)) == value, "a voice code does not read back")
            return true
        case 3:
            // A two-digit device tag.
            guard let tag = TypedInput.tag(text) else { return false }
            check(UInt64(tag) < VoiceProtocol.tagValues, "a device tag out of range")
            return true
        case 4:
            // A degradation code: six groups of four base-32 characters.
            guard let bytes = DegradationCode.parse(text) else { return false }
            check(bytes.count == DegradationCode.secretCount + DegradationCode.macCount, "a degradation code's size")
            check(DegradationCode.parse(DegradationCode.format(bytes)) == bytes, "a degradation code does not read back")
            return true
        case 5:
            // A PIN.
            guard let pin = try? PIN.validated(text) else { return false }
            check(pin.count == PIN.length, "a PIN's length")
            return true
        case 6:
            // A generated export password: "ABCD-EFGH-JKMNP".
            guard let canonical = try? IdentityExport.passwordBytes(text, kind: .generated) else { return false }
            check(canonical.count == IdentityExport.generatedPasswordCount, "a generated password's length")
            check(
                (try? IdentityExport.passwordBytes(IdentityExport.shown(canonical), kind: .generated)) == canonical,
                "a generated password does not read back")
            return true
        case 7:
            // A chosen export password, used exactly as typed.
            guard let bytes = try? IdentityExport.passwordBytes(text, kind: .chosen) else { return false }
            check(bytes == Array(text.utf8), "a chosen password is changed")
            return true
        case 8:
            // A display name (a person's own, a device label, a service name).
            guard let name = try? DisplayName.validated(text) else {
                check(!DisplayName.isValid(text), "a valid name refused")
                return false
            }
            check(DisplayName.isValid(name) && (1...DisplayName.maxBytes).contains(name.utf8.count), "an invalid name accepted")
            return true
        case 9:
            // A photo filename, as a profile record or the contact store takes it.
            guard PhotoFilename.isValid(text) else { return false }
            check(
                text.utf8.count <= PhotoFilename.maxBytes && !text.utf8.contains(UInt8(ascii: "/"))
                    && !text.utf8.contains(UInt8(ascii: "\\")) && text != "." && text != "..",
                "a photo filename that leaves its directory")
            return true
        default:
            // A scope list, as a service or a person gives it.
            guard let scopes = try? ServiceApproval.scopes(parsing: text) else { return false }
            check(
                (try? ServiceApproval.scopes(parsing: ServiceApproval.scopesText(scopes))) == scopes,
                "a scope list does not read back")
            return true
        }
    }

    /// Honest inputs of every kind, for the seed corpus.
    static func seeds() throws -> [[UInt8]] {
        var random = DeterministicRandom(seed: [UInt8](repeating: 21, count: 32))
        var texts: [(Int, String)] = []
        let short = ShortCode.random(using: &random)
        texts += [(0, short.text), (0, "  " + short.text.lowercased() + " "), (0, "alfa-0000"), (0, "ZULU 9999")]
        let remote = RemoteCode.random(using: &random)
        texts += [(1, remote.text), (1, remote.canonical.lowercased()), (1, " " + remote.text.prefix(4) + " " + remote.text.suffix(4))]
        texts += [(2, VoiceProtocol.codeText(12_345)), (2, "xray-007"), (2, "whiskey 999")]
        texts += [(3, "5"), (3, "05"), (3, " 99 ")]
        let degradation = DegradationCode.format(random.bytes(DegradationCode.secretCount + DegradationCode.macCount))
        texts += [(4, degradation), (4, degradation.lowercased().replacingOccurrences(of: "-", with: " "))]
        texts += [(5, "123456"), (5, "000000")]
        let password = IdentityExport.generatePassword(using: &random)
        texts += [(6, password), (6, password.lowercased().replacingOccurrences(of: "-", with: ""))]
        texts += [(7, "correct horse battery staple"), (7, "пароль-пароль")]
        texts += [(8, "Alice"), (8, "Zoë Ødegård"), (8, "محمد"), (8, "👩‍👩‍👧 Family")]
        texts += [(9, "photo.jpg"), (9, "Portrait 2024 (1).HEIC"), (9, "")]
        texts += [(10, "profile email"), (10, "pay:42.00 address openid"), (10, "")]
        return texts.map { [UInt8($0.0)] + Array($0.1.utf8) }
    }

    static func check(_ condition: Bool, _ what: StaticString) {
        if !condition { fatalError("codes fuzz: \(what)") }
    }
}

extension String {
    fileprivate func replacingFirstSpace(with replacement: String) -> String {
        guard let i = firstIndex(of: " ") else { return self }
        return String(self[..<i]) + replacement + String(self[index(after: i)...])
    }

    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        split(separator: Character(target), omittingEmptySubsequences: false).joined(separator: replacement)
    }
}

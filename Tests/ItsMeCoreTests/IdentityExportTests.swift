import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

/// The password-protected identity export: round trip, the header checked
/// before any key derivation, wrong passwords counted, tampering refused.
final class IdentityExportTests: XCTestCase {
    private let t0: Int64 = 1_800_000_000

    override func setUpWithError() throws { try Sodium.initialize() }

    private func kind(_ body: () throws -> Void) -> ItsMeError.Kind? { errorKind(body) }

    private func limiter() -> AttemptLimiter { AttemptLimiter(store: MemorySecretStore(), purpose: "import") }

    func testGeneratedPasswordsRoundTrip() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Alice")
        var random = SystemRandom()
        let password = IdentityExport.generatePassword(using: &random)
        XCTAssertEqual(password.count, 15)
        XCTAssertEqual(password.split(separator: "-").map(\.count), [4, 4, 5])
        let blob = try IdentityExport.export(identity, password: password, kind: .generated, random: &random)
        let header = try IdentityExport.Header(parsing: blob)
        XCTAssertEqual(header.passes, 3)
        XCTAssertEqual(header.memoryKiB, 256 * 1024)
        XCTAssertEqual(header.passwordKind, .generated)
        // Typed in lower case, with spaces instead of dashes: the same password.
        let typed = password.lowercased().replacingOccurrences(of: "-", with: " ")
        let text = IdentityExport.text(blob)
        XCTAssertTrue(text.hasPrefix("ITSMEXP1:"))
        let opened = try IdentityExport.open(try IdentityExport.blob(text: " \(text)\n"), password: typed, limiter: limiter(), now: t0)
        XCTAssertEqual(opened.name, "Alice")
        XCTAssertEqual(opened.fingerprint, identity.fingerprint)
        XCTAssertTrue(opened.contactsKey.constantTimeEquals(identity.contactsKey))
    }

    func testChosenPasswordsAreUsedAsTyped() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Bob")
        var random = SystemRandom()
        XCTAssertEqual(kind { _ = try IdentityExport.export(identity, password: "short", kind: .chosen, random: &random) }, .invalidArgument)
        let blob = try IdentityExport.export(identity, password: "Correct Horse", kind: .chosen, random: &random)
        let limits = limiter()
        XCTAssertEqual(kind { _ = try IdentityExport.open(blob, password: "correct horse", limiter: limits, now: self.t0) }, .authenticationFailed)
        XCTAssertEqual(try limits.status(now: t0).failures, 1)
        XCTAssertEqual(try IdentityExport.open(blob, password: "Correct Horse", limiter: limits, now: t0).fingerprint, identity.fingerprint)
        XCTAssertEqual(try limits.status(now: t0).failures, 0, "a right password resets the count")
    }

    func testHeaderIsCheckedBeforeAnyDerivation() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Carol")
        var random = SystemRandom()
        let blob = try IdentityExport.export(identity, password: "ABCD-EFGH-JKMNP", kind: .generated, random: &random)
        let limits = limiter()
        func open(_ bytes: [UInt8]) -> ItsMeError.Kind? {
            kind { _ = try IdentityExport.open(bytes, password: "ABCD-EFGH-JKMNP", limiter: limits, now: self.t0) }
        }
        XCTAssertEqual(open(Array(blob.prefix(20))), .malformedMessage, "truncated")
        XCTAssertEqual(open([]), .malformedMessage)
        var foreign = blob
        foreign[0] ^= 1
        XCTAssertEqual(open(foreign), .malformedMessage, "not an export")
        var future = blob
        future[7] = 3
        XCTAssertEqual(open(future), .invalidArgument, "unknown version")
        // Parameters outside the window: refused at once, whatever the password.
        for (at, value) in [(9, [0, 0, 0, 11]), (9, [0, 0, 0, 2]), (13, [0, 0x10, 0, 1]), (13, [0, 0, 0x40, 0]), (9, [0xFF, 0xFF, 0xFF, 0xFF])] {
            var crafted = blob
            crafted.replaceSubrange(at..<at + 4, with: value.map(UInt8.init))
            XCTAssertEqual(open(crafted), .invalidArgument, "parameters \(value) at \(at)")
        }
        var unknownKind = blob
        unknownKind[17] = 9
        XCTAssertEqual(open(unknownKind), .invalidArgument)
        XCTAssertEqual(try limits.status(now: t0).failures, 0, "no header refusal is counted")
        XCTAssertEqual(kind { _ = try IdentityExport.blob(text: "ITSMEXP1:***") }, .malformedMessage)
        XCTAssertEqual(kind { _ = try IdentityExport.blob(text: "v3:abcdef") }, .malformedMessage)
    }

    /// PROTOCOL.md 17.1: tab, line feed, carriage return and space around
    /// a text are ignored, and no other white space is (it was any Unicode
    /// white space, whose set depends on the Unicode version).
    func testOnlyASCIIWhiteSpaceAroundATextIsIgnored() throws {
        let text = "ITSMEXP1:" + Base64.encode([1, 2, 3], .urlUnpadded)
        for around in [" ", "\n", "\r\n", "\t", " \r\n\t "] {
            XCTAssertEqual(try IdentityExport.blob(text: around + text + around), [1, 2, 3])
        }
        for other in ["\u{A0}", "\u{2028}", "\u{3000}", "\u{85}", "\u{0B}", "\u{0C}", "\u{FEFF}"] {
            XCTAssertEqual(kind { _ = try IdentityExport.blob(text: other + text) }, .malformedMessage, other.unicodeScalars.first!.debugDescription)
            XCTAssertEqual(kind { _ = try IdentityExport.blob(text: text + other) }, .malformedMessage, other.unicodeScalars.first!.debugDescription)
        }
        // The source's JSON form is recognised with ASCII white space removed.
        XCTAssertEqual(kind { _ = try IdentityExport.blob(text: "{ \"version\" :\t3 }") }, .invalidArgument)
        XCTAssertEqual(kind { _ = try IdentityExport.blob(text: "{\"version\":\u{A0}3}") }, .malformedMessage)
        // The live transfer's offer text alike.
        var random = SystemRandom()
        let offer = try DeviceTransfer(receiverAt: t0, random: &random).offerText
        XCTAssertEqual(try DeviceTransfer.checkOffer("\r\n " + offer + "\t\n"), offer)
        XCTAssertEqual(kind { _ = try DeviceTransfer.checkOffer("\u{A0}" + offer) }, .malformedMessage)
        XCTAssertEqual(kind { _ = try DeviceTransfer.checkOffer(offer + "\u{3000}") }, .malformedMessage)
    }

    func testTamperingAndWrongPasswordsAreCountedFailures() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Dan")
        var random = SystemRandom()
        let password = IdentityExport.generatePassword(using: &random)
        let blob = try IdentityExport.export(identity, password: password, kind: .generated, random: &random)
        let limits = limiter()
        // A changed salt, nonce or body byte: the AEAD refuses, counted.
        for at in [20, IdentityExport.headerCount - 1, IdentityExport.headerCount + 3, blob.count - 1] {
            var tampered = blob
            tampered[at] ^= 0x40
            XCTAssertEqual(kind { _ = try IdentityExport.open(tampered, password: password, limiter: limits, now: self.t0) }, .authenticationFailed, "byte \(at)")
        }
        XCTAssertEqual(kind { _ = try IdentityExport.open(blob, password: "2222-2222-22222", limiter: limits, now: self.t0) }, .authenticationFailed)
        // The fifth failure locks: even the right password waits.
        XCTAssertEqual(try limits.status(now: t0).failures, 5)
        XCTAssertEqual(kind { _ = try IdentityExport.open(blob, password: password, limiter: limits, now: self.t0) }, .locked)
        XCTAssertEqual(try IdentityExport.open(blob, password: password, limiter: limits, now: t0 + 301).fingerprint, identity.fingerprint)
        // A password that is not of the generated form is a typing error, not counted.
        XCTAssertEqual(kind { _ = try IdentityExport.open(blob, password: "ABCD-EFGH-JKMN0", limiter: limits, now: self.t0 + 301) }, .invalidArgument)
        XCTAssertEqual(try limits.status(now: t0 + 301).failures, 0)
    }
}

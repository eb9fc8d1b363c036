import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

final class VoiceTests: XCTestCase {
    private var directory: String!
    /// A window boundary: 1_800_000_000 = 30 x 60_000_000.
    private let t0: Int64 = 1_800_000_000

    override func setUpWithError() throws {
        try Sodium.initialize()
        directory = NSTemporaryDirectory() + "itsme-voice-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private typealias Side = PairSide

    private func kind(_ body: () throws -> Void) -> ItsMeError.Kind? { errorKind(body) }

    private func pair() throws -> (Side, Side) { try exchangedPair(in: directory, label: "voice", now: t0 - 100) }

    private func toCodes(_ a: Side, _ b: Side, now: Int64, pick: Int = 0) throws -> (VoiceSession, VoiceSession) {
        try voiceCodes(a, b, now: now, pick: pick)
    }

    /// Section 9.1: windows are non-negative. A negative one (which u64()
    /// would encode as its 64-bit two's complement) is refused as
    /// `invalid_argument` wherever a window enters: the pure derivations,
    /// the room and session code of Online Verify and PIN Update, and their
    /// sessions at a time whose previous window would be -1.
    func testANegativeWindowIsRefused() throws {
        let seed = [UInt8](repeating: 7, count: 32)
        let a = [UInt8](repeating: 1, count: 32), b = [UInt8](repeating: 2, count: 32)
        let secret = [UInt8](repeating: 3, count: 16)
        for w: Int64 in [-1, -2, Int64.min] {
            XCTAssertEqual(kind { _ = try VoiceProtocol.sessionID(seed: seed, window: w) }, .invalidArgument, "\(w)")
            XCTAssertEqual(kind { _ = try VoiceProtocol.words(seed: seed, window: w, pid: a) }, .invalidArgument, "\(w)")
            XCTAssertEqual(kind { _ = try VoiceProtocol.lowerSelectsFirst(seed: seed, window: w) }, .invalidArgument, "\(w)")
            XCTAssertEqual(
                kind { _ = try VoiceProtocol.code(seed: seed, window: w, first: a, firstWord: 1, second: b, secondWord: 2, speaker: a) },
                .invalidArgument, "\(w)")
            XCTAssertEqual(kind { _ = try VoiceProtocol.tag(seed: seed, window: w, speaker: a, deviceSecret: secret) }, .invalidArgument, "\(w)")
            XCTAssertEqual(
                kind {
                    try secret.withUnsafeBytes { s in
                        _ = try VoiceProtocol.derive(
                            seed: seed, window: w, myPID: a, theirPID: b, mySecret: s, theirSecret: s, firstWord: 1, secondWord: 2)
                    }
                }, .invalidArgument, "\(w)")
            XCTAssertEqual(kind { _ = try OnlineVerify.roomID(seed: seed, window: w) }, .invalidArgument, "\(w)")
            XCTAssertEqual(kind { _ = try PinUpdate.sessionCode(seed: seed, window: w) }, .invalidArgument, "\(w)")
        }
        // Window 0 is a window like any other.
        XCTAssertNoThrow(try VoiceProtocol.sessionID(seed: seed, window: 0))
        XCTAssertNoThrow(try VoiceProtocol.tag(seed: seed, window: 0, speaker: a, deviceSecret: secret))
        XCTAssertNoThrow(try OnlineVerify.roomID(seed: seed, window: 0))
        // At a time in window 0, "the window before" is -1: refused.
        let (alice, _) = try pair()
        var r = DeterministicRandom(seed: [UInt8](repeating: 9, count: 32))
        for now: Int64 in [0, 29] {
            XCTAssertEqual(
                kind { _ = try OnlineVerify(store: alice.store, contactID: alice.contactID, window: -1, now: now, random: &r) },
                .invalidArgument, "Online Verify at \(now)")
            XCTAssertEqual(
                kind { _ = try PinUpdate(store: alice.store, contactID: alice.contactID, window: -1, now: now, random: &r) },
                .invalidArgument, "PIN Update at \(now)")
        }
        XCTAssertNoThrow(try OnlineVerify(store: alice.store, contactID: alice.contactID, window: 0, now: 29, random: &r))
    }

    func testBothSidesAgreeAndVerify() throws {
        let (a, b) = try pair()
        let va = try VoiceSession(store: a.store, contactID: a.contactID, now: t0 + 7)
        let vb = try VoiceSession(store: b.store, contactID: b.contactID, now: t0 + 9)
        XCTAssertEqual(va.window, 60_000_001)
        XCTAssertEqual(va.window, vb.window)
        XCTAssertEqual(va.startsIn(now: t0 + 7), 23)
        XCTAssertEqual(va.sessionIDText, vb.sessionIDText)
        XCTAssertNotEqual(va.iSelectFirst, vb.iSelectFirst)
        XCTAssertEqual(va.myWords.count, 5)
        XCTAssertEqual(va.myWords, va.myWords.sorted())
        XCTAssertEqual(kind { try va.start(now: t0 + 7) }, .invalidState, "too early")
        XCTAssertEqual(va.state, .waiting)
        XCTAssertEqual(kind { try va.select(va.myWords[0], now: t0 + 7) }, .invalidState)

        let (sa, sb) = try toCodes(a, b, now: t0 + 7)
        XCTAssertEqual(sa.state, .comparing)
        XCTAssertEqual(sa.yourCode, sb.theirCode)
        XCTAssertEqual(sb.yourCode, sa.theirCode)
        XCTAssertEqual(sa.yourTag, sb.theirTag)
        XCTAssertEqual(sb.yourTag, sa.theirTag)
        XCTAssertNotEqual(sa.yourCode, sa.theirCode, "directional (1 in 26000 to collide)")
        let heard = VoiceProtocol.codeText(sb.yourCode!).lowercased()
        XCTAssertEqual(try sa.check(heardCode: heard, heardTag: sb.yourTag!, now: t0 + 40), .verified)
        XCTAssertEqual(sa.state, .finished)
        XCTAssertEqual(try a.store.contact(id: a.contactID).state, .verified)
        XCTAssertEqual(try a.store.contact(id: a.contactID).lastWindow, 60_000_001)
    }

    /// 9.7: a session bound to the call. Bound alike, it verifies; bound to
    /// two calls, or one bound and one not, the two read different session
    /// IDs, and codes repeated between them (an attacker on both calls)
    /// fail.
    func testACallBindingEntersTheSessionIDAndTheCodes() throws {
        let call1 = Array(repeating: UInt8(1), count: 32), call2 = Array(repeating: UInt8(2), count: 16)
        let (a, b) = try pair()
        // The same call: verified.
        let (sa, sb) = try voiceCodes(a, b, now: t0 + 7, bindings: (call1, call1))
        XCTAssertTrue(sa.isBound)
        XCTAssertEqual(sa.sessionIDText, sb.sessionIDText)
        XCTAssertEqual(sa.yourCode, sb.theirCode)
        XCTAssertEqual(try sa.check(heardCode: VoiceProtocol.codeText(sb.yourCode!), heardTag: sb.yourTag!, now: t0 + 40), .verified)
        // Each bound to its own call, and one bound beside one that is not.
        for (n, bindings) in [(call1, call2), (call1, nil)].enumerated() {
            let now = t0 + 67 + Int64(n) * 60
            let (xa, xb) = try voiceCodes(a, b, now: now, bindings: bindings)
            XCTAssertNotEqual(xa.sessionIDText, xb.sessionIDText, "the session IDs show it before any word")
            XCTAssertNotEqual(xa.yourCode, xb.theirCode)
            let relayed = VoiceProtocol.codeText(xb.yourCode!)
            XCTAssertEqual(try xa.check(heardCode: relayed, heardTag: xb.yourTag!, now: xa.window * 30 + 10), .mismatch)
            XCTAssertEqual(try a.store.contact(id: a.contactID).state, .verified, "a mismatch changes nothing")
        }
        // Unbound, the same pair and window would have read 9.2's session ID.
        let unbound = try VoiceSession(store: a.store, contactID: a.contactID, now: t0 + 300)
        let bound = try VoiceSession(store: a.store, contactID: a.contactID, binding: call1, now: t0 + 300)
        XCTAssertEqual(unbound.window, bound.window)
        XCTAssertFalse(unbound.isBound)
        XCTAssertNotEqual(unbound.sessionIDText, bound.sessionIDText)
        for length in [0, 15, 65] {
            XCTAssertEqual(
                kind { _ = try VoiceSession(store: a.store, contactID: a.contactID, binding: [UInt8](repeating: 7, count: length), now: t0) },
                .invalidArgument, "\(length) bytes")
        }
    }

    func testAWrongCodeOrAnEchoChangesNothing() throws {
        let (a, b) = try pair()
        let (sa, sb) = try toCodes(a, b, now: t0)
        // Bob echoes Alice's own code back.
        let echo = VoiceProtocol.codeText(sa.yourCode!)
        XCTAssertEqual(try sa.check(heardCode: echo, heardTag: sa.yourTag!, now: t0 + 35), .mismatch)
        XCTAssertEqual(try a.store.contact(id: a.contactID).state, .verified)
        XCTAssertEqual(kind { try sb.check(heardCode: "not a code", heardTag: 1, now: t0 + 35) }, .invalidArgument)
        XCTAssertEqual(sb.state, .comparing, "a typo does not end the session")
        XCTAssertEqual(kind { try sb.check(heardCode: "ECHO 512", heardTag: 100, now: t0 + 35) }, .invalidArgument)
    }

    func testRightCodeWrongTagMeansTheirDeviceChanged() throws {
        let (a, b) = try pair()
        let (sa, sb) = try toCodes(a, b, now: t0)
        let code = VoiceProtocol.codeText(sb.yourCode!)
        XCTAssertEqual(try sa.check(heardCode: code, heardTag: (sb.yourTag! + 1) % 100, now: t0 + 35), .deviceChanged)
        let c = try a.store.contact(id: a.contactID)
        XCTAssertEqual(c.state, .degraded)
        XCTAssertFalse(c.degradationAcknowledged)
        // A degraded contact still verifies, and stays degraded.
        let (sa2, sb2) = try toCodes(a, b, now: t0 + 60)
        XCTAssertEqual(
            try sa2.check(heardCode: VoiceProtocol.codeText(sb2.yourCode!), heardTag: sb2.yourTag!, now: t0 + 95),
            .verified)
        XCTAssertEqual(try a.store.contact(id: a.contactID).state, .degraded)
    }

    func testAWordNotAmongTheSelectorsEndsTheSession() throws {
        let (a, b) = try pair()
        let va = try VoiceSession(store: a.store, contactID: a.contactID, now: t0)
        let vb = try VoiceSession(store: b.store, contactID: b.contactID, now: t0)
        try va.start(now: t0 + 30)
        try vb.start(now: t0 + 30)
        let (selector, listener) = va.turn == .mine ? (va, vb) : (vb, va)
        let notTheirs = (0..<26).first { !selector.myWords.contains($0) }!
        XCTAssertEqual(kind { try selector.select(notTheirs, now: t0 + 31) }, .invalidArgument, "own picker misuse")
        XCTAssertEqual(selector.state, .selecting)
        XCTAssertEqual(kind { try listener.select(notTheirs, now: t0 + 31) }, .authenticationFailed)
        XCTAssertEqual(listener.state, .failed)
        XCTAssertEqual(kind { try listener.select(selector.myWords[0], now: t0 + 31) }, .invalidState, "no retry")
        XCTAssertEqual(kind { try listener.select(30, now: t0 + 31) }, .invalidState)
    }

    func testWordsInTheWrongOrderGiveCodesThatDoNotMatch() throws {
        let (a, b) = try pair()
        let (sa, sb) = try toCodes(a, b, now: t0, pick: 1)
        XCTAssertEqual(sa.yourCode, sb.theirCode)
        // Alice's device with the same two words entered the other way round.
        let (w1, w2) = (sa.selections[0], sa.selections[1])
        let (first, second) = sa.iSelectFirst ? (a.identity.publicKey, b.identity.publicKey) : (b.identity.publicKey, a.identity.publicKey)
        let seed = try a.store.seed(id: a.contactID)
        let swapped = try VoiceProtocol.code(
            seed: seed, window: sa.window, first: first, firstWord: w2, second: second, secondWord: w1, speaker: a.identity.publicKey)
        let swappedRoles = try VoiceProtocol.code(
            seed: seed, window: sa.window, first: second, firstWord: w1, second: first, secondWord: w2, speaker: a.identity.publicKey)
        if w1 != w2 { XCTAssertNotEqual(swapped, sb.theirCode) }
        XCTAssertNotEqual(swappedRoles, sb.theirCode)
    }

    func testAWindowIsUsedOnceAndSessionsExpire() throws {
        let (a, b) = try pair()
        let v1 = try VoiceSession(store: a.store, contactID: a.contactID, now: t0)
        let v2 = try VoiceSession(store: a.store, contactID: a.contactID, now: t0)
        XCTAssertEqual(v1.window, v2.window)
        try v1.start(now: t0 + 30)
        XCTAssertEqual(kind { try v2.start(now: t0 + 30) }, .windowUsed)
        XCTAssertEqual(v2.state, .failed)
        // Planning again gives the next window; a clock set back too.
        XCTAssertEqual(try VoiceSession(store: a.store, contactID: a.contactID, now: t0 + 31).window, v1.window + 1)
        XCTAssertEqual(try VoiceSession(store: a.store, contactID: a.contactID, now: t0 - 3000).window, v1.window + 1)
        // The session lasts until the end of the next window.
        XCTAssertEqual(kind { try v1.select(v1.myWords[0], now: t0 + 90) }, .expired)
        XCTAssertEqual(v1.state, .failed)
        XCTAssertEqual(try b.store.contact(id: b.contactID).lastWindow, nil, "Bob's side is separate")
    }

    func testSkewToleranceAtStart() throws {
        let (a, _) = try pair()
        let v = try VoiceSession(store: a.store, contactID: a.contactID, now: t0)
        XCTAssertEqual(kind { try v.start(now: t0 + 14) }, .invalidState)
        try v.start(now: t0 + 15)
        XCTAssertEqual(v.state, .selecting)
    }

    func testNoDeviceSecretsLeavesTheTagUnchecked() throws {
        let (a, b) = try pair()
        // Alice's contact store on a new device: the device key differs, so
        // the device secrets cannot be opened.
        let storeOnNewDevice = try onNewDevice(a).store
        let va = try VoiceSession(store: storeOnNewDevice, contactID: a.contactID, now: t0)
        let vb = try VoiceSession(store: b.store, contactID: b.contactID, now: t0)
        try va.start(now: t0 + 30)
        try vb.start(now: t0 + 30)
        for _ in 0..<2 {
            let (s, l) = va.turn == .mine ? (va, vb) : (vb, va)
            try s.select(s.myWords[2], now: t0 + 31)
            try l.select(s.myWords[2], now: t0 + 31)
        }
        XCTAssertNil(va.theirTag)
        XCTAssertEqual(va.yourCode, vb.theirCode)
        XCTAssertNotEqual(va.yourTag, vb.theirTag, "Bob hears a tag from the wrong device secret (1 in 100 to collide)")
        XCTAssertEqual(
            try va.check(heardCode: VoiceProtocol.codeText(vb.yourCode!), heardTag: vb.yourTag!, now: t0 + 40),
            .verifiedTagUnchecked)
        XCTAssertEqual(
            try vb.check(heardCode: VoiceProtocol.codeText(va.yourCode!), heardTag: va.yourTag!, now: t0 + 40),
            .deviceChanged)
        XCTAssertEqual(try b.store.contact(id: b.contactID).state, .degraded)
    }

    func testOneCallDerivationMatchesTheSessions() throws {
        let (a, b) = try pair()
        let (sa, sb) = try toCodes(a, b, now: t0, pick: 3)
        let seed = try a.store.seed(id: a.contactID)
        let da = try a.store.deviceSecrets(id: a.contactID)
        let d = try da.mine.withBytes { mine in
            try da.theirs.withBytes { theirs in
                try VoiceProtocol.derive(
                    seed: seed, window: sa.window, myPID: a.identity.publicKey, theirPID: b.identity.publicKey,
                    mySecret: mine, theirSecret: theirs, firstWord: sa.selections[0], secondWord: sa.selections[1])
            }
        }
        XCTAssertEqual(d.sessionID, sa.sessionID)
        XCTAssertEqual(d.myWords, sa.myWords)
        XCTAssertEqual(d.theirWords, sb.myWords)
        XCTAssertEqual(d.iSelectFirst, sa.iSelectFirst)
        XCTAssertEqual([d.myCode, d.theirCode, d.myTag, d.theirTag], [sa.yourCode!, sa.theirCode!, sa.yourTag!, sa.theirTag!])
    }

    private func moveToNewDevice(_ a: Side) throws -> Side { try onNewDevice(a) }

    private func verify(_ x: Side, _ y: Side, now: Int64) throws -> (VoiceSession.Outcome, VoiceSession.Outcome) {
        try voiceVerify(x, y, now: now)
    }

    func testDegradationCodeAfterADeviceChange() throws {
        let (oldAlice, bob) = try pair()
        let alice = try moveToNewDevice(oldAlice)
        // Before any code: Bob detects the change.
        var (fromAlice, fromBob) = try verify(alice, bob, now: t0)
        XCTAssertEqual(fromAlice, .verifiedTagUnchecked)
        XCTAssertEqual(fromBob, .deviceChanged)
        XCTAssertEqual(try bob.store.contact(id: bob.contactID).state, .degraded)

        var rng = DeterministicRandom(seed: SHA256.hash(Array("degradation".utf8)))
        let code = try DegradationCode.create(store: alice.store, contactID: alice.contactID, random: &rng)
        XCTAssertEqual(code.count, 29)
        XCTAssertEqual(code.split(separator: "-").map(\.count), [4, 4, 4, 4, 4, 4])
        // A typo is not counted; a wrong code is.
        XCTAssertEqual(kind { try DegradationCode.accept(store: bob.store, contactID: bob.contactID, code: "hello", now: t0) }, .invalidArgument)
        var wrong = Array(code)
        wrong[0] = wrong[0] == "A" ? "B" : "A"
        XCTAssertEqual(
            kind { try DegradationCode.accept(store: bob.store, contactID: bob.contactID, code: String(wrong), now: t0) },
            .authenticationFailed)
        XCTAssertEqual(try AttemptLimiter(store: bob.identity.store, purpose: "degradation-code").status(now: t0).failures, 1)
        let typed = code.lowercased().replacingOccurrences(of: "-", with: " ")
        try DegradationCode.accept(store: bob.store, contactID: bob.contactID, code: typed, now: t0 + 100)
        var c = try bob.store.contact(id: bob.contactID)
        XCTAssertEqual(c.state, .degraded)
        XCTAssertTrue(c.degradationAcknowledged)
        XCTAssertEqual(try AttemptLimiter(store: bob.identity.store, purpose: "degradation-code").status(now: t0).failures, 0)

        // Now Alice's tag matches again; Bob's contact stays degraded (acknowledged).
        (fromAlice, fromBob) = try verify(alice, bob, now: t0 + 200)
        XCTAssertEqual(fromBob, .verified)
        XCTAssertEqual(fromAlice, .verifiedTagUnchecked)
        c = try bob.store.contact(id: bob.contactID)
        XCTAssertEqual(c.state, .degraded)
    }

    func testWrongDegradationCodesLockOut() throws {
        let (alice, bob) = try pair()
        var rng = DeterministicRandom(seed: SHA256.hash(Array("degradation-2".utf8)))
        let code = try DegradationCode.create(store: alice.store, contactID: alice.contactID, random: &rng)
        var wrong = Array(code)
        wrong[wrong.count - 1] = wrong[wrong.count - 1] == "A" ? "B" : "A"
        for _ in 0..<5 {
            XCTAssertEqual(
                kind { try DegradationCode.accept(store: bob.store, contactID: bob.contactID, code: String(wrong), now: t0) },
                .authenticationFailed)
        }
        XCTAssertEqual(kind { try DegradationCode.accept(store: bob.store, contactID: bob.contactID, code: code, now: t0) }, .locked)
        XCTAssertEqual(try bob.store.contact(id: bob.contactID).state, .verified, "nothing changed")
        try DegradationCode.accept(store: bob.store, contactID: bob.contactID, code: code, now: t0 + 301)
        XCTAssertTrue(try bob.store.contact(id: bob.contactID).degradationAcknowledged)
    }

    func testDegradationCodeFormat() throws {
        let bytes = Array(0..<15).map { UInt8($0 * 17) }
        let text = DegradationCode.format(bytes)
        XCTAssertEqual(DegradationCode.parse(text), bytes)
        XCTAssertEqual(DegradationCode.parse(text.lowercased().replacingOccurrences(of: "-", with: "  ")), bytes)
        XCTAssertNil(DegradationCode.parse(String(text.dropLast())))
        XCTAssertNil(DegradationCode.parse(text + "A"))
        XCTAssertNil(DegradationCode.parse(text.replacingOccurrences(of: "A", with: "1")))
    }

    func testTimesAndWindowsOutOfRangeAreRefused() throws {
        let (a, _) = try pair()
        XCTAssertEqual(kind { _ = try VoiceSession(store: a.store, contactID: a.contactID, now: Int64.max) }, .invalidArgument)
        XCTAssertEqual(kind { _ = try VoiceSession(store: a.store, contactID: a.contactID, now: -1) }, .invalidArgument)
        XCTAssertEqual(kind { try a.store.useWindow(id: a.contactID, window: Int64.max / 30) }, .invalidArgument)
        try a.store.useWindow(id: a.contactID, window: VoiceProtocol.maxWindow)
        XCTAssertEqual(kind { _ = try VoiceSession(store: a.store, contactID: a.contactID, now: t0) }, .invalidState)
    }

    func testPropertiesOverRandomInputs() throws {
        var rng = DeterministicRandom(seed: SHA256.hash(Array("voice-properties".utf8)))
        for _ in 0..<200 {
            let seed = rng.bytes(32), pa = rng.bytes(32), pb = rng.bytes(32), ds = rng.bytes(16)
            let window = Int64(rng.bytes(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            let wa = try VoiceProtocol.words(seed: seed, window: window, pid: pa)
            XCTAssertEqual(Set(wa).count, 5)
            XCTAssertTrue(wa.allSatisfy { (0..<26).contains($0) })
            let code = try VoiceProtocol.code(seed: seed, window: window, first: pa, firstWord: wa[0], second: pb, secondWord: wa[1], speaker: pa)
            var otherSeed = seed
            otherSeed[0] ^= 1
            let changed = [
                try VoiceProtocol.code(seed: otherSeed, window: window, first: pa, firstWord: wa[0], second: pb, secondWord: wa[1], speaker: pa),
                try VoiceProtocol.code(seed: seed, window: window + 1, first: pa, firstWord: wa[0], second: pb, secondWord: wa[1], speaker: pa),
                try VoiceProtocol.code(seed: seed, window: window, first: pa, firstWord: wa[2], second: pb, secondWord: wa[1], speaker: pa),
                try VoiceProtocol.code(seed: seed, window: window, first: pa, firstWord: wa[1], second: pb, secondWord: wa[0], speaker: pa),
                try VoiceProtocol.code(seed: seed, window: window, first: pa, firstWord: wa[0], second: pb, secondWord: wa[1], speaker: pb),
            ]
            // Each differs but for a 1 in 26000 chance; 5 x 200 trials.
            XCTAssertLessThanOrEqual(changed.filter { $0 == code }.count, 1)
            let tag = try VoiceProtocol.tag(seed: seed, window: window, speaker: pa, deviceSecret: ds)
            XCTAssertLessThan(tag, 100)
        }
    }

    func testDescriptionShowsNoSecrets() throws {
        let (a, _) = try pair()
        let v = try VoiceSession(store: a.store, contactID: a.contactID, now: t0)
        XCTAssertEqual("\(v)", "VoiceSession(contact: \(a.contactID), window: 60000001, state: waiting)")
    }
}

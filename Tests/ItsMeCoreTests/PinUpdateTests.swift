import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

final class PinUpdateTests: XCTestCase {
    private var directory: String!
    private let t0: Int64 = 1_800_000_000

    override func setUpWithError() throws {
        try Sodium.initialize()
        directory = NSTemporaryDirectory() + "itsme-pin-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: directory) }

    private typealias Side = PairSide

    private func kind(_ body: () throws -> Void) -> ItsMeError.Kind? { errorKind(body) }

    private func pair() throws -> (Side, Side) { try exchangedPair(in: directory, label: "pin", now: t0) }

    private var sessionCounter = 0
    private func update(_ s: Side, now: Int64) throws -> PinUpdate {
        sessionCounter += 1
        var r = DeterministicRandom(seed: SHA256.hash(Array("pin-session-\(sessionCounter)".utf8)))
        return try PinUpdate(store: s.store, contactID: s.contactID, window: VoiceProtocol.window(now), now: now, random: &r)
    }

    /// Delivers at most `limit` frames, alternating sides; returns how many.
    @discardableResult
    private func pump(_ a: PinUpdate, _ b: PinUpdate, now: Int64, limit: Int = .max) throws -> Int {
        var delivered = 0
        var moved = true
        while moved, delivered < limit {
            moved = false
            for (from, to) in [(a, b), (b, a)] where delivered < limit {
                if let f = from.peekOutgoing() {
                    from.markSent()
                    try to.receive(f, now: now)
                    delivered += 1
                    moved = true
                }
            }
        }
        return delivered
    }

    /// Records an honest update's frames between the initiator's side and
    /// the responder's: keyI, keyR, newI, newR and done (peeked, not yet
    /// sent); returns them with the two updates, done still outgoing.
    private func recordHonestRun(_ ini: Side, _ resp: Side, now: Int64) throws
        -> (frames: [String: [UInt8]], initiator: PinUpdate, responder: PinUpdate)
    {
        let ui = try update(ini, now: now), ur = try update(resp, now: now)
        var frames: [String: [UInt8]] = [:]
        frames["keyI"] = ui.peekOutgoing()!
        ui.markSent()
        frames["keyR"] = ur.peekOutgoing()!
        ur.markSent()
        try ur.receive(frames["keyI"]!, now: now)
        try ui.receive(frames["keyR"]!, now: now)
        frames["newI"] = ui.peekOutgoing()!
        ui.markSent()
        try ur.receive(frames["newI"]!, now: now)
        frames["newR"] = ur.peekOutgoing()!
        ur.markSent()
        try ui.receive(frames["newR"]!, now: now)
        frames["done"] = ui.peekOutgoing()!
        return (frames, ui, ur)
    }

    /// Two voice sessions started and both words selected: both sides show
    /// their codes. Returns them and the time the window started.
    private func comparing(_ x: Side, _ y: Side, now: Int64) throws -> (VoiceSession, VoiceSession, Int64) {
        let vx = try VoiceSession(store: x.store, contactID: x.contactID, now: now)
        let vy = try VoiceSession(store: y.store, contactID: y.contactID, now: now)
        let start = vx.window * 30
        try vx.start(now: start)
        try vy.start(now: start)
        for _ in 0..<2 {
            let (s, l) = vx.turn == .mine ? (vx, vy) : (vy, vx)
            try s.select(s.myWords[0], now: start + 1)
            try l.select(s.myWords[0], now: start + 1)
        }
        return (vx, vy, start)
    }

    /// A full voice verification; returns each side's outcome.
    private func verify(_ x: Side, _ y: Side, now: Int64) throws -> (VoiceSession.Outcome, VoiceSession.Outcome) {
        let (vx, vy, start) = try comparing(x, y, now: now)
        return (
            try vx.check(heardCode: VoiceProtocol.codeText(vy.yourCode!), heardTag: vy.yourTag!, now: start + 2),
            try vy.check(heardCode: VoiceProtocol.codeText(vx.yourCode!), heardTag: vx.yourTag!, now: start + 2)
        )
    }

    private func moveToNewDevice(_ a: Side) throws -> Side { try onNewDevice(a) }

    func testAnUpdateRestoresADegradedContact() throws {
        let (oldAlice, bob) = try pair()
        let alice = try moveToNewDevice(oldAlice)
        var (oa, ob) = try verify(alice, bob, now: t0)
        XCTAssertEqual(ob, .deviceChanged)
        XCTAssertEqual(oa, .verifiedTagUnchecked)
        XCTAssertEqual(try bob.store.contact(id: bob.contactID).state, .degraded)

        let now = t0 + 300
        let ua = try update(alice, now: now), ub = try update(bob, now: now)
        XCTAssertEqual(ua.sessionCode, ub.sessionCode, "both derive the session code from the seed and the time")
        XCTAssertNotEqual(ua.isInitiator, ub.isInitiator)
        XCTAssertEqual(try pump(ua, ub, now: now), 5)
        XCTAssertEqual(ua.state, .done)
        XCTAssertEqual(ub.state, .done)
        XCTAssertEqual(try bob.store.contact(id: bob.contactID).state, .verified)
        XCTAssertEqual(try alice.store.contact(id: alice.contactID).state, .verified)
        (oa, ob) = try verify(alice, bob, now: now + 60)
        XCTAssertEqual(oa, .verified)
        XCTAssertEqual(ob, .verified)
        // Bob held Alice's old secret, so hearing her new one completes his
        // side. Alice's new device held none of Bob's: a two-digit tag
        // changes nothing there (PROTOCOL.md 10.3), and she keeps accepting
        // his new secret as pending until an Online Verify session.
        XCTAssertFalse(try bob.store.deviceSecrets(id: bob.contactID).hasPending)
        XCTAssertTrue(try alice.store.deviceSecrets(id: alice.contactID).hasPending)
        var r1 = DeterministicRandom(seed: [UInt8](repeating: 11, count: 32))
        var r2 = DeterministicRandom(seed: [UInt8](repeating: 12, count: 32))
        let t = now + 600
        let oa2 = try OnlineVerify(store: alice.store, contactID: alice.contactID, window: VoiceProtocol.window(t), now: t, random: &r1)
        let ob2 = try OnlineVerify(store: bob.store, contactID: bob.contactID, window: VoiceProtocol.window(t), now: t, random: &r2)
        var moved = true
        while moved {
            moved = false
            for (from, to) in [(oa2, ob2), (ob2, oa2)] {
                if let m = from.takeOutgoing() { try to.receive(m, now: t); moved = true }
            }
        }
        XCTAssertEqual(try oa2.confirm(now: t), .verified)
        XCTAssertEqual(try ob2.confirm(now: t), .verified)
        XCTAssertFalse(try alice.store.deviceSecrets(id: alice.contactID).hasPending)
        (oa, ob) = try verify(alice, bob, now: t + 60)
        XCTAssertEqual([oa, ob], [.verified, .verified])
    }

    /// After a completed update each side says its new secret, and "Their
    /// Code" shows the tag the person will hear: the peer's new one, not the
    /// tag of the secret it replaced (PROTOCOL.md 10.3, "What a listener
    /// shows").
    /// A degradation code accepted while this side has committed an update
    /// keeps the secret this side says now, the update's new one (10.2):
    /// writing back the one from before would make the peer, which adopted
    /// the new one, see a changed device.
    func testADegradationCodeAcceptedAfterCommittingKeepsTheSecretSaidNow() throws {
        let (alice, bob) = try pair()
        let now = t0 + 300
        let (a, b) = try update(alice, now: now).isInitiator ? (alice, bob) : (bob, alice)
        _ = try recordHonestRun(a, b, now: now)
        let said = try a.store.deviceSecrets(id: a.contactID)
        XCTAssertTrue(said.committed, "the initiator committed on the responder's NEW")
        let newMine = try said.pendingMine.copy()
        var random = DeterministicRandom(seed: SHA256.hash(Array("degradation-after-commit".utf8)))
        let code = try DegradationCode.create(store: b.store, contactID: b.contactID, random: &random)
        try DegradationCode.accept(store: a.store, contactID: a.contactID, code: code, now: now)
        let after = try a.store.deviceSecrets(id: a.contactID)
        XCTAssertFalse(after.hasPending)
        XCTAssertTrue(newMine.withBytes { n in after.mine.withBytes { m in Array(n) == Array(m) } }, "the secret said now")
    }

    func testTheirTagAfterACompletedUpdateIsTheOneThePeerSays() throws {
        let (alice, bob) = try pair()
        let now = t0 + 300
        let ua = try update(alice, now: now), ub = try update(bob, now: now)
        XCTAssertEqual(try pump(ua, ub, now: now), 5)
        let (va, vb, start) = try comparing(alice, bob, now: now + 60)
        XCTAssertEqual(va.theirTag, vb.yourTag, "Alice's screen shows the tag Bob says")
        XCTAssertEqual(vb.theirTag, va.yourTag, "Bob's screen shows the tag Alice says")
        XCTAssertEqual(va.theirCode, vb.yourCode)
        XCTAssertEqual(
            try va.check(heardCode: VoiceProtocol.codeText(vb.yourCode!), heardTag: va.theirTag!, now: start + 2),
            .verified)
        XCTAssertEqual(
            try vb.check(heardCode: VoiceProtocol.codeText(va.yourCode!), heardTag: vb.theirTag!, now: start + 2),
            .verified)
        // Hearing the new secret completed both sides; the next session
        // shows the same (now current) tags.
        XCTAssertFalse(try alice.store.deviceSecrets(id: alice.contactID).hasPending)
        XCTAssertFalse(try bob.store.deviceSecrets(id: bob.contactID).hasPending)
    }

    /// Every interruption point: deliver the first k frames, stop, and
    /// check that verification keeps working and a later update completes.
    func testEveryInterruptionPointRecovers() throws {
        for k in 0...5 {
            let (alice, bob) = try pair()
            let now = t0 + 300
            let ua = try update(alice, now: now), ub = try update(bob, now: now)
            XCTAssertEqual(try pump(ua, ub, now: now, limit: k), min(k, 5))
            // Two verifications in a row: never a false "device changed".
            for round in 0..<2 {
                let (oa, ob) = try verify(alice, bob, now: now + 60 + Int64(round) * 90)
                XCTAssertEqual(oa, .verified, "k = \(k), round \(round)")
                XCTAssertEqual(ob, .verified, "k = \(k), round \(round)")
            }
            XCTAssertEqual(try alice.store.contact(id: alice.contactID).state, .verified)
            XCTAssertEqual(try bob.store.contact(id: bob.contactID).state, .verified)
            // A complete update afterwards leaves nothing pending.
            let later = now + 600
            let va = try update(alice, now: later), vb = try update(bob, now: later)
            XCTAssertEqual(try pump(va, vb, now: later), 5, "k = \(k)")
            let (oa, ob) = try verify(alice, bob, now: later + 60)
            XCTAssertEqual(oa, .verified)
            XCTAssertEqual(ob, .verified)
            XCTAssertFalse(try alice.store.deviceSecrets(id: alice.contactID).hasPending, "k = \(k)")
            XCTAssertFalse(try bob.store.deviceSecrets(id: bob.contactID).hasPending, "k = \(k)")
        }
    }

    /// Two updates in a row, each interrupted anywhere, with zero or one
    /// verification between them: tags never falsely report a changed
    /// device, and a final complete update leaves nothing pending.
    func testTwoInterruptedUpdatesInARowRecover() throws {
        for k1 in 0...5 {
            for between in 0...1 {
                for k2 in 0...5 {
                    let label = "k1 \(k1), between \(between), k2 \(k2)"
                    let (alice, bob) = try pair()
                    var now = t0 + 300
                    try pump(try update(alice, now: now), try update(bob, now: now), now: now, limit: k1)
                    for _ in 0..<between {
                        now += 60
                        let (oa, ob) = try verify(alice, bob, now: now)
                        XCTAssertEqual([oa, ob], [.verified, .verified], label)
                        now += 60
                    }
                    now += 30
                    try pump(try update(alice, now: now), try update(bob, now: now), now: now, limit: k2)
                    for round in 0..<3 {
                        now += 60
                        let (oa, ob) = try verify(alice, bob, now: now)
                        XCTAssertEqual([oa, ob], [.verified, .verified], "\(label), round \(round)")
                        now += 60
                    }
                    now += 30
                    XCTAssertEqual(try pump(try update(alice, now: now), try update(bob, now: now), now: now), 5, label)
                    for _ in 0..<2 {
                        now += 60
                        let (oa, ob) = try verify(alice, bob, now: now)
                        XCTAssertEqual([oa, ob], [.verified, .verified], label)
                        now += 60
                    }
                    XCTAssertFalse(try alice.store.deviceSecrets(id: alice.contactID).hasPending, label)
                    XCTAssertFalse(try bob.store.deviceSecrets(id: bob.contactID).hasPending, label)
                }
            }
        }
    }

    func testTamperedReplayedAndReflectedFramesFail() throws {
        let (alice, bob) = try pair()
        let now = t0 + 300
        // Reflection.
        let ua = try update(alice, now: now)
        XCTAssertEqual(kind { try ua.receive(ua.peekOutgoing()!, now: now) }, .invalidKey)
        XCTAssertEqual(ua.state, .failed)
        // Someone without the seed: the confirmation fails.
        let ds = try bob.store.deviceSecrets(id: bob.contactID)
        try bob.store.replaceExchanged(
            id: bob.contactID, publicKey: alice.identity.publicKey, seed: try SecretBytes(copying: SHA256.hash([7])),
            mine: try ds.mine.copy(), theirs: try ds.theirs.copy(), method: .qr, now: t0)
        let x = try update(alice, now: now), y = try update(bob, now: now)
        XCTAssertNotEqual(x.sessionCode, y.sessionCode, "the devices would not even find each other")
        let k = kind { try pump(x, y, now: now) }
        XCTAssertEqual(k, .authenticationFailed)
        XCTAssertFalse(try alice.store.deviceSecrets(id: alice.contactID).hasPending)
    }

    func testForbiddenTransitions() throws {
        let (alice, bob) = try pair()
        let now = t0 + 300
        let (ini, resp) = try update(alice, now: now).isInitiator ? (alice, bob) : (bob, alice)
        let (frames, ui, ur) = try recordHonestRun(ini, resp, now: now)
        ui.markSent()
        try ur.receive(frames["done"]!, now: now)
        XCTAssertEqual(kind { try ur.receive(frames["done"]!, now: now) }, .invalidState, "done on this side")
        XCTAssertEqual(kind { try ui.receive(frames["newR"]!, now: now) }, .invalidState)
        // Out of order, each in a fresh pair with the same randomness.
        let sequences: [(String, [String], Bool)] = [
            ("NEW before KEY (responder)", ["newI"], false),
            ("DONE before NEW (responder)", ["keyI", "done"], false),
            ("KEY twice (responder)", ["keyI", "keyI"], false),
            ("NEW twice (responder)", ["keyI", "newI", "newI"], false),
            ("DONE to the initiator", ["keyR", "done"], true),
            ("NEW_R before KEY (initiator)", ["newR"], true),
        ]
        for (what, seq, toInitiator) in sequences {
            sessionCounter -= 2  // the same randomness as the recorded run
            let x = try update(ini, now: now), y = try update(resp, now: now)
            let receiver = toInitiator ? x : y
            var error: ItsMeError.Kind?
            for name in seq {
                error = kind { try receiver.receive(frames[name]!, now: now) }
                if error != nil { break }
            }
            XCTAssertNotNil(error, what)
            XCTAssertEqual(receiver.state, .failed, what)
            XCTAssertEqual(kind { try receiver.receive(frames["keyI"]!, now: now) }, .invalidState, what)
        }
    }

    /// Section 10.3: a frame of the wrong length is `malformed_message`, as
    /// in section 7, found before anything is decrypted (a NEW or DONE
    /// frame one byte short or long used to fail authentication instead).
    func testFramesOfTheWrongLengthAreMalformed() throws {
        let (alice, bob) = try pair()
        let now = t0 + 300
        let (ini, resp) = try update(alice, now: now).isInitiator ? (alice, bob) : (bob, alice)
        let (frames, _, _) = try recordHonestRun(ini, resp, now: now)
        XCTAssertEqual(frames["newI"]!.count, 2 + 48 + 16)
        XCTAssertEqual(frames["done"]!.count, 2 + 16)
        // (frames before, the frame to change, to the initiator)
        let cases: [([String], String, Bool)] = [
            (["keyI"], "newI", false), (["keyR"], "newR", true), (["keyI", "newI"], "done", false), ([], "keyI", false),
        ]
        for (before, name, toInitiator) in cases {
            let frame = frames[name]!
            for variant in [Array(frame.dropLast()), frame + [0], Array(frame.prefix(2)), Array(frame.prefix(18)), frame + frame] {
                sessionCounter -= 2  // the same randomness as the recorded run
                let x = try update(ini, now: now), y = try update(resp, now: now)
                let receiver = toInitiator ? x : y
                if toInitiator {
                    x.markSent()  // the initiator's KEY
                }
                for b in before { try receiver.receive(frames[b]!, now: now) }
                if variant.count == frame.count { continue }
                XCTAssertEqual(kind { try receiver.receive(variant, now: now) }, .malformedMessage, "\(name) of \(variant.count) bytes")
                XCTAssertEqual(receiver.state, .failed, name)
            }
        }
    }

    func testOnlyTheCurrentOrPreviousWindowAndExpiry() throws {
        let (alice, bob) = try pair()
        let now = t0 + 300
        var r = DeterministicRandom(seed: [UInt8](repeating: 1, count: 32))
        XCTAssertEqual(
            kind { _ = try PinUpdate(store: alice.store, contactID: alice.contactID, window: VoiceProtocol.window(now) + 1, now: now, random: &r) },
            .invalidArgument)
        let ua = try update(alice, now: now), ub = try update(bob, now: now)
        let f = ub.peekOutgoing()!
        XCTAssertEqual(kind { try ua.receive(f, now: now + PinUpdate.lifetime + 1) }, .expired)
    }
}

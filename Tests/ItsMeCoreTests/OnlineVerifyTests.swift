import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

final class OnlineVerifyTests: XCTestCase {
    private var directory: String!
    private let t0: Int64 = 1_800_000_000

    override func setUpWithError() throws {
        try Sodium.initialize()
        directory = NSTemporaryDirectory() + "itsme-ov-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: directory) }

    private typealias Side = PairSide

    private func kind(_ body: () throws -> Void) -> ItsMeError.Kind? { errorKind(body) }

    private func pair(_ label: String = "ov") throws -> (Side, Side) { try exchangedPair(in: directory, label: label, now: t0) }

    private func session(_ s: Side, _ n: Int, window: Int64? = nil, binding: [UInt8]? = nil) throws -> OnlineVerify {
        var r = DeterministicRandom(seed: SHA256.hash(Array("ov-session-\(n)".utf8)))
        return try OnlineVerify(
            store: s.store, contactID: s.contactID, window: window ?? VoiceProtocol.window(t0 + 100), binding: binding,
            now: t0 + 100, random: &r)
    }

    /// The in-memory two-party pipe: moves messages until both are quiet.
    /// Returns the messages in the order delivered, each with whether the
    /// initiator sent it.
    @discardableResult
    private func pump(_ a: OnlineVerify, _ b: OnlineVerify) throws -> [(fromInitiator: Bool, message: [UInt8])] {
        var log: [(Bool, [UInt8])] = []
        var moved = true
        while moved {
            moved = false
            for (from, to) in [(a, b), (b, a)] {
                if let m = from.takeOutgoing() {
                    log.append((from.isInitiator, m))
                    try to.receive(m, now: t0 + 101)
                    moved = true
                }
            }
        }
        return log
    }

    func testBothProveAndAgreeOnTheSAS() throws {
        let (a, b) = try pair()
        let va = try session(a, 1), vb = try session(b, 2)
        XCTAssertEqual(va.roomName, vb.roomName)
        XCTAssertEqual(va.roomName.count, 32)
        XCTAssertNotEqual(va.isInitiator, vb.isInitiator)
        let log = try pump(va, vb)
        XCTAssertEqual(log.count, 5)
        XCTAssertEqual(va.state, .compareSAS)
        XCTAssertEqual(va.sas, vb.sas)
        XCTAssertEqual(va.outcome, .verified)
        XCTAssertEqual(try va.confirm(now: t0 + 102), .verified)
        XCTAssertEqual(try a.store.contact(id: a.contactID).state, .verified)
        XCTAssertNil(try a.store.contact(id: a.contactID).lastWindow, "Online Verify uses no window")
    }

    /// 11.4: sessions bound to one call verify; a peer bound differently
    /// ends both sessions as "binding differs" or "other call" (not a
    /// failure: it holds the seed), with no SAS and nothing recorded.
    func testACallBindingEndsInItsOwnStatesNotAsAnImpostor() throws {
        let call1 = Array(repeating: UInt8(1), count: 32), call2 = Array(repeating: UInt8(2), count: 64)
        let (a, b) = try pair()
        let cases: [([UInt8]?, [UInt8]?, OnlineVerify.State)] = [
            (call1, call1, .compareSAS), (call1, nil, .bindingDiffers), (nil, call2, .bindingDiffers), (call1, call2, .otherCall),
        ]
        for (n, (ba, bb, expected)) in cases.enumerated() {
            let va = try session(a, 10 + 2 * n, binding: ba), vb = try session(b, 11 + 2 * n, binding: bb)
            let log = try pump(va, vb)
            XCTAssertEqual(log.count, 5)
            XCTAssertEqual(log.filter { $0.message[1] == 2 }.map(\.message.count).sorted(), [ba, bb].map { $0 == nil ? 66 : 98 }.sorted())
            XCTAssertEqual(va.state, expected, "case \(n)")
            XCTAssertEqual(vb.state, expected, "case \(n)")
            XCTAssertNil(va.failure)
            guard expected != .compareSAS else {
                XCTAssertEqual(va.sas, vb.sas)
                XCTAssertEqual(try va.confirm(now: t0 + 102), .verified)
                continue
            }
            XCTAssertNil(va.sas)
            XCTAssertNil(va.outcome)
            XCTAssertEqual(kind { try va.confirm(now: t0 + 102) }, .invalidState)
            XCTAssertEqual(kind { try va.reject() }, .invalidState)
            XCTAssertEqual(kind { try va.receive(log[0].message, now: t0 + 102) }, .invalidState)
            XCTAssertEqual(va.state, expected, "final")
        }
        XCTAssertEqual(try a.store.contact(id: a.contactID).verifiedAt, t0 + 102, "only the session bound alike recorded anything")
        XCTAssertEqual(try b.store.contact(id: b.contactID).verifiedAt, t0, "as the exchange left it")
        for length in [0, 15, 65] {
            XCTAssertEqual(kind { _ = try session(a, 99, binding: [UInt8](repeating: 7, count: length)) }, .invalidArgument)
        }
    }

    /// 11.4: a relay that changes a KEY's `bind` on the way (to make two
    /// calls look like one) changes one side's transcript: the PROOFs do
    /// not open.
    func testARelayThatAltersABindFailsTheSession() throws {
        let (a, b) = try pair()
        let call1 = Array(repeating: UInt8(1), count: 32), call2 = Array(repeating: UInt8(2), count: 32)
        let va = try session(a, 1, binding: call1), vb = try session(b, 2, binding: call2)
        let (initiator, responder) = va.isInitiator ? (va, vb) : (vb, va)
        let commit = try XCTUnwrap(initiator.takeOutgoing())
        try responder.receive(commit, now: t0 + 101)
        var keyR = try XCTUnwrap(responder.takeOutgoing())
        XCTAssertEqual(keyR.count, 98)
        // The relay puts the initiator's own call's bind in place of the responder's.
        let initiatorBind = try OnlineVerifyMachine.bind(
            seed: SecretBox(try a.store.seed(id: a.contactID)), window: va.window,
            binding: try SecretBox(copying: initiator === va ? call1 : call2))
        keyR.replaceSubrange(66..<98, with: initiatorBind)
        try initiator.receive(keyR, now: t0 + 101)
        let keyI = try XCTUnwrap(initiator.takeOutgoing()), proofI = try XCTUnwrap(initiator.takeOutgoing())
        try responder.receive(keyI, now: t0 + 101)
        let proofR = try XCTUnwrap(responder.takeOutgoing())
        XCTAssertEqual(kind { try responder.receive(proofI, now: t0 + 101) }, .authenticationFailed)
        XCTAssertEqual(kind { try initiator.receive(proofR, now: t0 + 101) }, .authenticationFailed)
        XCTAssertEqual(initiator.state, .failed)
        XCTAssertEqual(responder.state, .failed)
    }

    func testADeviceChangeIsDetectedInsideTheSession() throws {
        let (a, b) = try pair()
        let newA = try onNewDevice(a)
        let va = try session(newA, 1), vb = try session(b, 2)
        try pump(va, vb)
        XCTAssertEqual(va.outcome, .verifiedTagUnchecked)
        XCTAssertEqual(vb.outcome, .deviceChanged)
        XCTAssertEqual(try vb.confirm(now: t0 + 102), .deviceChanged)
        XCTAssertEqual(try b.store.contact(id: b.contactID).state, .degraded)
    }

    func testSomeoneWithoutTheSeedFails() throws {
        let (a, b) = try pair()
        // Bob's device holds a different seed for Alice (an impersonator
        // with Bob's key but not the secret).
        let ds = try b.store.deviceSecrets(id: b.contactID)
        try b.store.replaceExchanged(
            id: b.contactID, publicKey: a.identity.publicKey, seed: try SecretBytes(copying: SHA256.hash([9])),
            mine: try ds.mine.copy(), theirs: try ds.theirs.copy(), method: .qr, now: t0)
        // Same room only if the seeds agree: put them together anyway.
        let va = try session(a, 1), vb = try session(b, 2)
        XCTAssertNotEqual(va.roomName, vb.roomName)
        let k = kind { try pump(va, vb) }
        XCTAssertEqual(k, .authenticationFailed)
        XCTAssertTrue(va.state == .failed || vb.state == .failed)
        XCTAssertNotEqual(va.state, .compareSAS)
    }

    func testReflectionReplayAndTamperingAreRejected() throws {
        let (a, b) = try pair()
        // Reflection: the initiator's own COMMIT, or a KEY of its own.
        let (ini, resp) = try { () throws -> (Side, Side) in
            let x = try session(a, 1)
            return x.isInitiator ? (a, b) : (b, a)
        }()
        let i1 = try session(ini, 1)
        let commit = i1.takeOutgoing()!
        XCTAssertEqual(kind { try i1.receive(commit, now: t0 + 101) }, .malformedMessage)
        // A responder given its own KEY back: it does not open the
        // initiator's COMMIT, and authentication comes before contents
        // (PROTOCOL.md section 1), so it is a failed authentication.
        let r1 = try session(resp, 2)
        try r1.receive(commit, now: t0 + 101)
        let key = r1.takeOutgoing()!
        XCTAssertEqual(kind { try r1.receive(key, now: t0 + 101) }, .authenticationFailed)
        // An initiator given its own KEY back (it checks no commitment): a reflection.
        let i2 = try session(ini, 9), twin = try session(ini, 9), r2 = try session(resp, 10)
        _ = i2.takeOutgoing()
        try r2.receive(twin.takeOutgoing()!, now: t0 + 101)
        try twin.receive(r2.takeOutgoing()!, now: t0 + 101)
        let ownKey = twin.takeOutgoing()!
        XCTAssertEqual(ownKey[1], 2)
        XCTAssertEqual(kind { try i2.receive(ownKey, now: t0 + 101) }, .invalidKey)

        // Replay: a PROOF from an earlier session does not open in a new one.
        let oldLog = try pump(try session(ini, 3), try session(resp, 4))
        let oldProof = oldLog.first { $0.message[1] == 3 && !$0.fromInitiator }!.message
        let n1 = try session(ini, 5), n2 = try session(resp, 6)
        try n2.receive(n1.takeOutgoing()!, now: t0 + 101)  // COMMIT
        try n1.receive(n2.takeOutgoing()!, now: t0 + 101)  // the responder's KEY
        XCTAssertEqual(kind { try n1.receive(oldProof, now: t0 + 101) }, .authenticationFailed)
        XCTAssertEqual(n1.state, .failed)

        // Every byte of every message flipped, truncated or extended, in a
        // fresh pair each time (the same randomness): never accepted.
        let honest = try pump(try session(ini, 7), try session(resp, 8))
        XCTAssertEqual(honest.count, 5)
        for n in honest.indices {
            var variants: [[UInt8]] = honest[n].message.indices.map { i in
                var m = honest[n].message
                m[i] ^= 1
                return m
            }
            variants.append(Array(honest[n].message.dropLast()))
            variants.append(honest[n].message + [0])
            for v in variants {
                let x = try session(ini, 7), y = try session(resp, 8)
                var rejected = false
                for (k, entry) in honest.enumerated() {
                    let receiver = entry.fromInitiator ? y : x
                    // Take what the sender queued, so the two stay in step.
                    _ = (entry.fromInitiator ? x : y).takeOutgoing()
                    do { try receiver.receive(k == n ? v : entry.message, now: t0 + 101) } catch {
                        rejected = true
                        break
                    }
                }
                XCTAssertTrue(rejected, "message \(n) variant accepted")
            }
        }
    }

    func testForbiddenTransitions() throws {
        let (a, b) = try pair()
        let va = try session(a, 1), vb = try session(b, 2)
        XCTAssertEqual(kind { try va.confirm(now: t0 + 101) }, .invalidState, "no SAS yet")
        XCTAssertEqual(va.state, .running)
        try pump(va, vb)
        XCTAssertEqual(kind { try va.receive([1, 1] + [UInt8](repeating: 0, count: 32), now: t0 + 101) }, .invalidState)
        XCTAssertEqual(va.state, .compareSAS, "refused without ending the session")
        try va.confirm(now: t0 + 101)
        XCTAssertEqual(kind { try va.confirm(now: t0 + 101) }, .invalidState)
        XCTAssertEqual(kind { try va.reject() }, .invalidState)
        try vb.reject()
        XCTAssertEqual(vb.state, .rejected)
        XCTAssertEqual(kind { try vb.confirm(now: t0 + 101) }, .invalidState)
        // After a failure every call is refused.
        let vc = try session(a, 3)
        XCTAssertNotNil(kind { try vc.receive([9, 9], now: t0 + 101) })
        XCTAssertEqual(vc.state, .failed)
        XCTAssertNil(vc.peekOutgoing())
        XCTAssertEqual(kind { try vc.receive([1, 2], now: t0 + 101) }, .invalidState)
        XCTAssertEqual(kind { try vc.confirm(now: t0 + 101) }, .invalidState)
        // Expiry.
        let vd = try session(a, 4), ve = try session(b, 5)
        let first = (vd.isInitiator ? vd : ve).takeOutgoing()!
        XCTAssertEqual(kind { try (vd.isInitiator ? ve : vd).receive(first, now: t0 + 100 + OnlineVerify.lifetime + 1) }, .expired)
    }

    func testOnlyTheCurrentOrPreviousWindow() throws {
        let (a, _) = try pair()
        let now = t0 + 100
        XCTAssertNoThrow(try session(a, 1, window: VoiceProtocol.window(now) - 1))
        XCTAssertEqual(kind { _ = try self.session(a, 1, window: VoiceProtocol.window(now) - 2) }, .invalidArgument)
        XCTAssertEqual(kind { _ = try self.session(a, 1, window: VoiceProtocol.window(now) + 1) }, .invalidArgument)
    }
}

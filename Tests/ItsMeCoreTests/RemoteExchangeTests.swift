import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

/// The remote exchange's protocol core (PROTOCOL.md 16), with messages moved
/// by hand. The same cases against a real relay are in apps/tests.
final class RemoteExchangeTests: XCTestCase {
    private var directory: String!
    private let t0: Int64 = 1_800_000_000

    override func setUpWithError() throws {
        try Sodium.initialize()
        directory = NSTemporaryDirectory() + "itsme-remote-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private struct Person {
        let identity: Identity
        let secrets: MemorySecretStore
        let store: ContactStore
    }

    private var counter = 0
    private func person(_ name: String) throws -> Person {
        counter += 1
        let secrets = MemorySecretStore()
        let identity = try Identity.create(store: secrets, name: name)
        return Person(identity: identity, secrets: secrets, store: try ContactStore(path: "\(directory!)/\(counter).db", identity: identity))
    }

    private func rng(_ n: Int) -> DeterministicRandom { DeterministicRandom(seed: SHA256.hash(Array("remote-test-\(n)".utf8))) }

    private func kind(_ body: () throws -> Void) -> ItsMeError.Kind? {
        do {
            try body()
            return nil
        } catch { return (error as? ItsMeError)?.kind }
    }

    private func invite(_ p: Person, realtime: Bool = false, _ seed: Int = 1, now: Int64? = nil) throws -> Exchange {
        var r = rng(seed)
        return try Exchange.invite(identity: p.identity, store: p.store, realtime: realtime, now: now ?? t0, random: &r)
    }

    private func accept(_ p: Person, _ inviter: Exchange, code: String? = nil, _ seed: Int = 2) throws -> Exchange {
        var r = rng(seed)
        return try Exchange.acceptInvite(
            identity: p.identity, store: p.store, inviteCode: inviter.inviteCode!.text, encryptionCode: code ?? inviter.encryptionCode!.text,
            realtime: inviter.method == .realtime, now: t0, random: &r)
    }

    private func take(_ ex: Exchange) -> [UInt8]? {
        guard let m = ex.peekOutgoing() else { return nil }
        ex.markSent()
        return m
    }

    // MARK: Codes

    func testCodesRoundTripAndCatchTypos() throws {
        var r = rng(9)
        for _ in 0..<200 {
            let code = RemoteCode.random(using: &r)
            XCTAssertEqual(code.canonical.count, 8)
            XCTAssertEqual(try RemoteCode(parsing: code.text), code)
            XCTAssertEqual(try RemoteCode(parsing: code.canonical.lowercased()), code, "case-insensitive")
            XCTAssertEqual(try RemoteCode(parsing: " " + code.text.replacingOccurrences(of: "-", with: " ")), code)
            var chars = Array(code.canonical.utf8)
            // Every single substitution is caught.
            for i in 0..<8 {
                for c in RemoteCode.alphabet where c != chars[i] {
                    var typo = chars
                    typo[i] = c
                    XCTAssertThrowsError(try RemoteCode(parsing: String(decoding: typo, as: UTF8.self)))
                }
            }
            // Every swap of two different characters is caught.
            for i in 0..<8 {
                for j in (i + 1)..<8 where chars[i] != chars[j] {
                    chars.swapAt(i, j)
                    XCTAssertThrowsError(try RemoteCode(parsing: String(decoding: chars, as: UTF8.self)))
                    chars.swapAt(i, j)
                }
            }
        }
        for bad in ["", "ABCD-EFG", "ABCD-EFGHJ", "ABCD-EF0H", "OOOO-OOOO", "ABCD EFG\u{e9}"] {
            XCTAssertThrowsError(try RemoteCode(parsing: bad)) { XCTAssertEqual(($0 as? ItsMeError)?.kind, .invalidArgument) }
        }
        XCTAssertFalse("\(RemoteCode.random(using: &r))".contains("-"), "description never shows the code")
    }

    // MARK: The exchange

    func testInviteExchangeEndToEnd() throws {
        for realtime in [false, true] {
            let alice = try person("Alice"), bob = try person("Bob")
            let a = try invite(alice, realtime: realtime)
            XCTAssertTrue(a.isInviter)
            XCTAssertEqual(a.relayID?.count, 16)
            let m1 = try XCTUnwrap(take(a))
            XCTAssertEqual(m1.count, 82)
            XCTAssertNil(a.peekOutgoing(), "the inviter waits for the ACCEPT")

            let b = try accept(bob, a)
            XCTAssertFalse(b.isInviter)
            XCTAssertEqual(b.relayID, a.relayID)
            XCTAssertNil(b.peekOutgoing(), "the invitee speaks only after the INVITE")
            try b.receive(m1, now: t0)
            let m2 = try XCTUnwrap(take(b))
            XCTAssertEqual(b.state, .awaitingPeer)
            try a.receive(m2, now: t0 + 3600)
            XCTAssertEqual(a.state, .compareSAS, "the inviter sees the SAS on the ACCEPT")
            let m3 = try XCTUnwrap(take(a))
            try b.receive(m3, now: t0 + 3600)
            XCTAssertEqual(b.state, .compareSAS)
            XCTAssertEqual(a.sas, b.sas)
            XCTAssertEqual(a.peer?.publicKey, bob.identity.publicKey)
            XCTAssertEqual(b.peer?.name, "Alice")

            // Alice confirms first: her contact awaits Bob's decision. Through
            // the mailbox her DECISION is held until Bob's has arrived.
            let idA = try a.confirm(now: t0 + 3600)
            XCTAssertEqual(a.state, .awaitingDecision)
            XCTAssertEqual(try alice.store.contact(id: idA).state, .awaitingPeer)
            XCTAssertEqual(kind { _ = try VoiceSession(store: alice.store, contactID: idA, now: self.t0 + 3600) }, .invalidState)
            let decisionA = take(a)
            XCTAssertEqual(decisionA == nil, !realtime, "the inviter's confirmation waits in the mailbox, not in a room")
            let idB = try b.confirm(now: t0 + 3600)
            XCTAssertEqual(b.state, .awaitingDecision)
            let decisionB = try XCTUnwrap(take(b))
            XCTAssertEqual(decisionB.count, RemoteProtocol.decisionCount)
            try a.receive(decisionB, now: t0 + 3600)
            XCTAssertTrue(a.flags.contains(.peerConfirmed))
            XCTAssertEqual(try a.settle(now: t0 + 3600), idA)
            XCTAssertEqual(a.state, .confirmed)
            let decisionA2 = try XCTUnwrap(decisionA ?? take(a))
            XCTAssertNil(take(a))
            XCTAssertEqual(try bob.store.contact(id: idB).state, .awaitingPeer)
            try b.receive(decisionA2, now: t0 + 3600)
            XCTAssertEqual(kind { try b.receive(decisionA2, now: self.t0 + 3600) }, .invalidState, "one decision from the peer")
            XCTAssertEqual(try b.settle(now: t0 + 3600), idB)
            XCTAssertEqual(try bob.store.contact(id: idB).state, .verified)
            XCTAssertEqual(try alice.store.contact(id: idA).state, .verified)
            XCTAssertEqual(try alice.store.contact(id: idA).exchangeMethod, realtime ? .realtime : .invite)
            XCTAssertTrue(try alice.store.seed(id: idA).constantTimeEquals(try bob.store.seed(id: idB)))
            let dA = try alice.store.deviceSecrets(id: idA), dB = try bob.store.deviceSecrets(id: idB)
            XCTAssertTrue(dA.mine.constantTimeEquals(dB.theirs))
            XCTAssertTrue(dA.theirs.constantTimeEquals(dB.mine))
            // The PAKE scalars are gone from both secret stores.
            XCTAssertEqual(try PendingPAKE.pendingCount(alice.secrets), 0)
            XCTAssertEqual(try PendingPAKE.pendingCount(bob.secrets), 0)
            XCTAssertFalse(alice.secrets.names.contains { $0.hasPrefix("itsme.pake") })
        }
    }

    // MARK: Both decisions (PROTOCOL.md 8.1)

    /// Runs an exchange up to both SAS; returns the two sides.
    private func toTheSAS(_ alice: Person, _ bob: Person, realtime: Bool, seeds: (Int, Int) = (1, 2)) throws -> (Exchange, Exchange) {
        let a = try invite(alice, realtime: realtime, seeds.0)
        let b = try accept(bob, a, seeds.1)
        try b.receive(take(a)!, now: t0)
        try a.receive(take(b)!, now: t0)
        try b.receive(take(a)!, now: t0)
        XCTAssertEqual(a.sas, b.sas)
        return (a, b)
    }

    func testEitherSidesRejectionLeavesNothingOnEitherSide() throws {
        for realtime in [false, true] {
            for inviterRejects in [false, true] {
                let alice = try person("Alice"), bob = try person("Bob")
                let (a, b) = try toTheSAS(alice, bob, realtime: realtime)
                let (rejecting, rejectingStore) = inviterRejects ? (a, alice.store) : (b, bob.store)
                let (confirming, confirmingStore) = inviterRejects ? (b, bob.store) : (a, alice.store)
                let id = try confirming.confirm(now: t0)
                XCTAssertEqual(confirming.state, .awaitingDecision)
                XCTAssertEqual(try confirmingStore.contact(id: id).state, .awaitingPeer)
                _ = try rejecting.save(now: t0)
                try rejecting.reject()
                XCTAssertEqual(try rejectingStore.count(), 0)
                // The rejection crosses (a held confirmation goes out after it).
                while let m = take(rejecting) { try confirming.receive(m, now: t0) }
                XCTAssertTrue(confirming.flags.contains(.peerRejected))
                XCTAssertEqual(kind { _ = try confirming.confirm(now: self.t0) }, .invalidState)
                XCTAssertNil(try confirming.settle(now: t0))
                XCTAssertEqual(confirming.state, .rejected)
                XCTAssertEqual(try confirmingStore.count(), 0, "realtime \(realtime), inviter rejects \(inviterRejects)")
                while let m = take(confirming) { try rejecting.receive(m, now: t0) }
                XCTAssertEqual(try PendingPAKE.pendingCount(alice.secrets) + PendingPAKE.pendingCount(bob.secrets), 0)
            }
        }
    }

    func testAPeerRejectionBeforeThisSideDecidesRefusesTheConfirmation() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let (a, b) = try toTheSAS(alice, bob, realtime: true)
        try b.reject()
        try a.receive(take(b)!, now: t0)
        XCTAssertTrue(a.flags.contains(.peerRejected))
        XCTAssertEqual(a.state, .compareSAS)
        XCTAssertEqual(kind { _ = try a.confirm(now: self.t0) }, .invalidState)
        try a.reject()
        XCTAssertEqual(try alice.store.count(), 0)
    }

    func testADecisionDroppedByTheRelayLeavesTheContactUnverifiedUntilItExpires() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let (a, b) = try toTheSAS(alice, bob, realtime: false)
        let idA = try a.confirm(now: t0 + 60)
        let idB = try b.confirm(now: t0 + 60)
        _ = take(b)  // Bob's DECISION never reaches Alice.
        XCTAssertNil(take(a), "Alice's confirmation waits for Bob's decision")
        XCTAssertEqual(try alice.store.contact(id: idA).state, .awaitingPeer)
        XCTAssertEqual(try bob.store.contact(id: idB).state, .awaitingPeer)
        XCTAssertEqual(kind { _ = try VoiceSession(store: alice.store, contactID: idA, now: self.t0 + 60) }, .invalidState)
        XCTAssertEqual(
            kind { try alice.store.setState(id: idA, .verified, acknowledged: false, now: self.t0) }, .invalidState,
            "no host can mark it verified by hand")
        // A forged or altered decision is refused and changes nothing.
        var forged = [UInt8](repeating: 0, count: RemoteProtocol.decisionCount)
        forged[0] = 1
        forged[1] = 4
        XCTAssertEqual(kind { try a.receive(forged, now: self.t0 + 60) }, .authenticationFailed)
        XCTAssertEqual(kind { try a.receive([1, 4, 0], now: self.t0 + 60) }, .malformedMessage)
        XCTAssertEqual(a.state, .awaitingDecision)
        // 24 hours after the exchange began, both contacts are deleted.
        XCTAssertEqual(try alice.store.expireAwaiting(now: t0 + Exchange.lifetime), 0, "not before the deadline")
        XCTAssertEqual(try alice.store.expireAwaiting(now: t0 + Exchange.lifetime + 1), 1)
        XCTAssertEqual(try bob.store.expireAwaiting(now: t0 + Exchange.lifetime + 1), 1)
        XCTAssertEqual(kind { _ = try alice.store.contact(id: idA) }, .notFound)
        XCTAssertEqual(kind { _ = try a.settle(now: self.t0 + Exchange.lifetime + 1) }, .expired)
    }

    func testAReExchangeKeepsTheOldSeedUntilBothConfirm() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        // A first exchange, confirmed by both.
        let (a1, b1) = try toTheSAS(alice, bob, realtime: true, seeds: (1, 2))
        let id = try a1.confirm(now: t0)
        try b1.confirm(now: t0)
        try b1.receive(take(a1)!, now: t0)
        try a1.receive(take(b1)!, now: t0)
        XCTAssertNotNil(try a1.settle(now: t0))
        XCTAssertNotNil(try b1.settle(now: t0))
        let oldSeed = try alice.store.seed(id: id)

        // Again, and Bob rejects: Alice keeps the old seed, still verified.
        let (a2, b2) = try toTheSAS(alice, bob, realtime: true, seeds: (3, 4))
        XCTAssertEqual(try a2.confirm(now: t0 + 10), id)
        XCTAssertTrue(a2.flags.contains(.knownContact))
        XCTAssertEqual(try alice.store.contact(id: id).state, .verified)
        XCTAssertTrue(try alice.store.seed(id: id).constantTimeEquals(oldSeed), "the old seed stays in use while Bob decides")
        try b2.reject()
        try a2.receive(take(b2)!, now: t0 + 10)
        XCTAssertNil(try a2.settle(now: t0 + 10))
        XCTAssertTrue(try alice.store.seed(id: id).constantTimeEquals(oldSeed))
        XCTAssertEqual(try alice.store.contact(id: id).state, .verified)
        XCTAssertEqual(try bob.store.count(), 1, "Bob's stored contact is untouched too")

        // A third time, both confirm: the seed is replaced only with Bob's confirmation.
        let (a3, b3) = try toTheSAS(alice, bob, realtime: true, seeds: (5, 6))
        try a3.confirm(now: t0 + 20)
        XCTAssertTrue(try alice.store.seed(id: id).constantTimeEquals(oldSeed))
        try b3.confirm(now: t0 + 20)
        try a3.receive(take(b3)!, now: t0 + 20)
        XCTAssertEqual(try a3.settle(now: t0 + 20), id)
        XCTAssertFalse(try alice.store.seed(id: id).constantTimeEquals(oldSeed))
        try b3.receive(take(a3)!, now: t0 + 20)
        XCTAssertNotNil(try b3.settle(now: t0 + 20))
        let bobsID = try bob.store.contact(publicKey: alice.identity.publicKey).id
        XCTAssertTrue(try alice.store.seed(id: id).constantTimeEquals(try bob.store.seed(id: bobsID)))
    }

    func testWrongEncryptionCodeFailsBothSidesAndSpendsTheInvite() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let a = try invite(alice)
        let m1 = take(a)!
        // A code that passes the typo check but is not the inviter's.
        var r = rng(77)
        var wrong = RemoteCode.random(using: &r)
        while wrong == a.encryptionCode! { wrong = RemoteCode.random(using: &r) }
        let b = try accept(bob, a, code: wrong.text)
        try b.receive(m1, now: t0)
        let m2 = take(b)!
        XCTAssertEqual(kind { try a.receive(m2, now: t0) }, .authenticationFailed)
        XCTAssertEqual(a.state, .failed)
        XCTAssertTrue(a.failure!.message.contains("wrong encryption code"))
        XCTAssertNil(a.peekOutgoing(), "the inviter never answers a wrong guess")
        XCTAssertEqual(try PendingPAKE.pendingCount(alice.secrets), 0, "the invite is spent: its scalar is wiped")
        // The right code cannot be tried on the same invite any more.
        let honest = try accept(try person("Bob"), a, 3)
        try honest.receive(m1, now: t0)
        XCTAssertEqual(kind { try a.receive(take(honest)!, now: t0) }, .invalidState)
        XCTAssertEqual(try alice.store.count(), 0)
        XCTAssertEqual(try bob.store.count(), 0)
    }

    func testARelayAnsweringAsTheInviteeCannotCompleteThePAKE() throws {
        // The relay holds the INVITE and guesses the code: one guess, and the
        // invite is spent. It also cannot reuse an old ACCEPT (another sid).
        let alice = try person("Alice"), mallory = try person("Mallory")
        let a = try invite(alice)
        let m1 = take(a)!
        var r = rng(5)
        let guess = try Exchange.acceptInvite(
            identity: mallory.identity, store: mallory.store, inviteCode: a.inviteCode!.text, encryptionCode: RemoteCode.random(using: &r).text,
            realtime: false, now: t0, random: &r)
        try guess.receive(m1, now: t0)
        XCTAssertEqual(kind { try a.receive(take(guess)!, now: t0) }, .authenticationFailed)

        // An ACCEPT recorded from another invite with the same codes' holder:
        let a2 = try invite(alice, 11)
        let b2 = try accept(try person("Bob"), a2)
        try b2.receive(take(a2)!, now: t0)
        let recorded = take(b2)!
        let a3 = try invite(alice, 12)
        _ = take(a3)
        XCTAssertNotNil(kind { try a3.receive(recorded, now: t0) })
        XCTAssertEqual(a3.state, .failed)
    }

    func testEveryByteOfEveryMessageIsChecked() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let a0 = try invite(alice)
        let m1 = take(a0)!
        let b0 = try accept(bob, a0)
        try b0.receive(m1, now: t0)
        let m2 = take(b0)!
        try a0.receive(m2, now: t0)
        let m3 = take(a0)!
        // Flip each byte of each message: the receiver fails, never shows a SAS.
        for i in 0..<m1.count {
            var t = m1
            t[i] ^= 0x01
            let b = try accept(try person("Bob"), a0, 2)
            // A changed INVITE either fails at once or makes keys the inviter
            // cannot confirm; the invitee never reaches a SAS without the REPLY.
            if (try? b.receive(t, now: t0)) != nil {
                let a = try invite(alice)
                _ = take(a)
                XCTAssertNotNil(kind { try a.receive(take(b)!, now: t0) }, "byte \(i) of the INVITE")
            }
        }
        for i in 0..<m2.count {
            var t = m2
            t[i] ^= 0x01
            let a = try invite(alice)
            _ = take(a)
            XCTAssertNotNil(kind { try a.receive(t, now: t0) }, "byte \(i) of the ACCEPT")
            XCTAssertEqual(a.state, .failed)
        }
        for i in 0..<m3.count {
            var t = m3
            t[i] ^= 0x01
            let b = try accept(bob, a0)
            try b.receive(m1, now: t0)
            _ = take(b)
            XCTAssertNotNil(kind { try b.receive(t, now: t0) }, "byte \(i) of the REPLY")
            XCTAssertEqual(b.state, .failed)
        }
        // Truncated and extended messages.
        for m in [m1, m2, m3] {
            for bad in [Array(m.dropLast()), m + [0], Array(m.prefix(1)), []] {
                let b = try accept(bob, a0)
                let a = try invite(alice)
                _ = take(a)
                XCTAssertNotNil(kind { try b.receive(bad, now: t0) })
                XCTAssertNotNil(kind { try a.receive(bad, now: t0) })
            }
        }
    }

    func testReplayedReflectedAndReorderedMessagesAreRefused() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let a = try invite(alice)
        let m1 = take(a)!
        XCTAssertEqual(kind { try a.receive(m1, now: t0) }, .malformedMessage, "its own INVITE reflected")
        let a2 = try invite(alice)
        let m1b = take(a2)!
        let b = try accept(bob, a2)
        try b.receive(m1b, now: t0)
        let m2 = take(b)!
        XCTAssertEqual(kind { try b.receive(m1b, now: t0) }, .malformedMessage, "a replayed INVITE")
        let b2 = try accept(bob, a2, 4)
        XCTAssertEqual(kind { try b2.receive(m2, now: t0) }, .malformedMessage, "an ACCEPT before the INVITE")
        // The ACCEPT with Yb replaced by Ya (a reflected share) is refused.
        let a3 = try invite(alice, 21)
        let m1c = take(a3)!
        var reflected = m2
        reflected.replaceSubrange(2..<34, with: m1c[18..<50])
        XCTAssertEqual(kind { try a3.receive(reflected, now: t0) }, .invalidKey)
        // Our own payload back: the inviter's own identity key is refused.
        let self2 = try Exchange.acceptInvite(
            identity: alice.identity, store: alice.store, inviteCode: a2.inviteCode!.text, encryptionCode: a2.encryptionCode!.text, realtime: false,
            now: t0, random: &counterRandom)
        try self2.receive(m1b, now: t0)
        let a4 = try Exchange.restore(identity: alice.identity, store: alice.store, sealed: try a2.seal(), now: t0)
        XCTAssertEqual(kind { try a4.receive(take(self2)!, now: t0) }, .invalidKey)
    }
    private var counterRandom = DeterministicRandom(seed: [UInt8](repeating: 3, count: 32))

    func testSomeoneWhoReadBothCodesInTheMiddleChangesTheSAS() throws {
        // Eve read both codes and controls the relay: she accepts Alice's
        // invite as herself and plays the inviter towards Bob with the same
        // codes. Both PAKE runs complete, but each person's SAS is shared
        // with Eve, not with the other: comparing them on the call fails.
        let alice = try person("Alice"), bob = try person("Bob"), eve = try person("Eve")
        let a = try invite(alice)
        let eveAsInvitee = try accept(eve, a, 31)
        var r = rng(32)
        let eveAsInviter = try Exchange.invite(
            identity: eve.identity, store: eve.store, realtime: false, inviteCode: a.inviteCode!, encryptionCode: a.encryptionCode!, now: t0, random: &r)
        let b = try accept(bob, a, 33)

        try eveAsInvitee.receive(take(a)!, now: t0)
        try a.receive(take(eveAsInvitee)!, now: t0)
        try eveAsInvitee.receive(take(a)!, now: t0)
        try b.receive(take(eveAsInviter)!, now: t0)
        try eveAsInviter.receive(take(b)!, now: t0)
        try b.receive(take(eveAsInviter)!, now: t0)

        XCTAssertEqual(a.state, .compareSAS)
        XCTAssertEqual(b.state, .compareSAS)
        XCTAssertEqual(a.sas, eveAsInvitee.sas)
        XCTAssertEqual(b.sas, eveAsInviter.sas)
        XCTAssertNotEqual(a.sas, b.sas)
        XCTAssertEqual(a.peer?.publicKey, eve.identity.publicKey)
        XCTAssertEqual(b.peer?.publicKey, eve.identity.publicKey)
    }

    func testTheInviterResumesFromTheSealedMachineAfterARestart() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let a = try invite(alice)
        let m1 = take(a)!
        let sealed = try a.seal()
        XCTAssertFalse(sealed.count < 40)
        // The sealed bytes hold neither the scalar nor the codes in clear.
        let scalarItem = try XCTUnwrap(alice.secrets.names.first { $0.hasPrefix("itsme.pake.") && $0.hasSuffix(".inviter") })
        let record = try alice.secrets.get(scalarItem)!.unsafeExportedArray()
        XCTAssertNil(sealed.firstRange(of: Array(record[9...])))
        XCTAssertNil(sealed.firstRange(of: Array(a.encryptionCode!.canonical.utf8)))
        let b = try accept(bob, a)
        try b.receive(m1, now: t0)
        let m2 = take(b)!
        let sealedB = try b.seal()

        // Both devices restart.
        let a2 = try Exchange.restore(identity: alice.identity, store: alice.store, sealed: sealed, now: t0 + 7200)
        XCTAssertEqual(a2.inviteCode, a.inviteCode)
        XCTAssertNil(a2.peekOutgoing(), "the INVITE was already posted")
        try a2.receive(m2, now: t0 + 7200)
        let b2 = try Exchange.restore(identity: bob.identity, store: bob.store, sealed: sealedB, now: t0 + 7300)
        XCTAssertNil(b2.peekOutgoing(), "the ACCEPT was already posted")
        try b2.receive(take(a2)!, now: t0 + 7300)
        XCTAssertEqual(a2.sas, b2.sas)
        try a2.confirm(now: t0 + 7300)
        // Alice awaits Bob's decision: she may stop again and resume.
        let a3 = try Exchange.restore(identity: alice.identity, store: alice.store, sealed: try a2.seal(), now: t0 + 7350)
        XCTAssertEqual(a3.state, .awaitingDecision)
        XCTAssertNil(a3.peekOutgoing(), "her confirmation is held until Bob's decision")
        try b2.confirm(now: t0 + 7350)
        try a3.receive(take(b2)!, now: t0 + 7400)
        XCTAssertNotNil(try a3.settle(now: t0 + 7400))
        try b2.receive(take(a3)!, now: t0 + 7400)
        XCTAssertNotNil(try b2.settle(now: t0 + 7400))
        // The invite has ended: the old sealed copy cannot be restored.
        XCTAssertEqual(kind { _ = try Exchange.restore(identity: alice.identity, store: alice.store, sealed: sealed, now: t0 + 7400) }, .invalidState)
    }

    func testInvitesExpireAndAbandonedScalarsAreSwept() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let a = try invite(alice)
        let m1 = take(a)!
        let sealed = try a.seal()
        let b = try accept(bob, a)
        XCTAssertEqual(kind { try b.receive(m1, now: t0 + 86_401) }, .expired)
        XCTAssertEqual(kind { _ = try Exchange.restore(identity: alice.identity, store: alice.store, sealed: sealed, now: t0 + 86_401) }, .expired)
        XCTAssertEqual(try PendingPAKE.pendingCount(alice.secrets), 1, "abandoned: still there")
        _ = try invite(alice, 40, now: t0 + 86_401)
        XCTAssertEqual(try PendingPAKE.pendingCount(alice.secrets), 1, "the new invite's only: the old one was swept")
        XCTAssertEqual(kind { _ = try Exchange.restore(identity: alice.identity, store: alice.store, sealed: sealed, now: t0 + 100) }, .invalidState)
    }

    func testCodesAreCheckedBeforeAnythingElse() throws {
        let bob = try person("Bob")
        var r = rng(50)
        XCTAssertEqual(kind {
            _ = try Exchange.acceptInvite(
                identity: bob.identity, store: bob.store, inviteCode: "ABCD-EFGH", encryptionCode: "2345-6789", realtime: false, now: t0, random: &r)
        }, .invalidArgument)
        let code = RemoteCode.random(using: &r).text
        XCTAssertEqual(kind {
            _ = try Exchange.acceptInvite(identity: bob.identity, store: bob.store, inviteCode: code, encryptionCode: code, realtime: false, now: t0, random: &r)
        }, .invalidArgument)
        XCTAssertEqual(try PendingPAKE.pendingCount(bob.secrets), 0)
    }

    func testDescriptionShowsNoCodes() throws {
        let a = try invite(try person("Alice"))
        let text = "\(a) \(a.encryptionCode!) \(a.inviteCode!)"
        XCTAssertFalse(text.contains(a.encryptionCode!.canonical))
        XCTAssertFalse(text.contains(a.inviteCode!.canonical))
    }
}

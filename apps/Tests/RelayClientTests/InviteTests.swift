import Foundation
import ItsMeKit
import ItsMePrimitives
import RelayServer
import RelayClient
import XCTest

// The two sides of an exchange: free functions rather than the test case's
// methods, so that what they make belongs to the person and the mailbox
// alone, not to the test case, and can go to a task of its own.

private func inviter(_ person: Person, _ mailbox: InviteMailbox, now: Int64) throws -> InviteSession {
    var random = SystemRandom()
    return try InviteSession(
        mailbox: mailbox, exchange: try Exchange.invite(identity: person.identity, store: person.contacts, realtime: false, now: now, random: &random))
}

private func invitee(
    _ person: Person, _ mailbox: InviteMailbox, inviteCode: String, encryptionCode: String, now: Int64
) throws -> InviteSession {
    var random = SystemRandom()
    let exchange = try Exchange.acceptInvite(
        identity: person.identity, store: person.contacts, inviteCode: inviteCode, encryptionCode: encryptionCode, realtime: false, now: now, random: &random)
    return try InviteSession(mailbox: mailbox, exchange: exchange)
}

/// Exchanges at a distance through the invite mailbox of a relay run in
/// this process (docs/PROTOCOL.md 15.2, 16.5, 16.6).
final class InviteTests: RelayTestCase {

    /// Saves a side as a host would between steps (the sealed exchange and
    /// the session's state as JSON), drops it, and resumes it.
    private func saveAndResume(_ session: InviteSession, _ person: Person, now: Int64) throws -> InviteSession {
        let sealed = try session.exchange.seal()
        let json = try JSONEncoder().encode(session.saved)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        XCTAssertEqual(Set(object.keys).isSuperset(of: ["version", "relay_id", "inviter", "token", "last_seq", "unsent", "done"]), true)
        let state = try JSONDecoder().decode(InviteSession.SavedState.self, from: json)
        XCTAssertEqual(state, session.saved)
        let exchange = try Exchange.restore(identity: person.identity, store: person.contacts, sealed: sealed, now: now)
        return try InviteSession(mailbox: session.mailbox, exchange: exchange, saved: state)
    }

    func testInviteExchangeWithStateSavedBetweenSteps() async throws {
        let url = try await startRelay()
        let alice = try Person("Alice", in: directory), bob = try Person("Bob", in: directory)
        let now = unixNow()
        let aliceMailbox = InviteMailbox(url, timeout: 5), bobMailbox = InviteMailbox(url, timeout: 5)

        var a = try inviter(alice, aliceMailbox, now: now)
        let inviteCode = try XCTUnwrap(a.exchange.inviteCode).text
        let encryptionCode = try XCTUnwrap(a.exchange.encryptionCode).text
        var state = try await a.step(now: now)  // creates the invite, posts INVITE
        XCTAssertEqual(state, .awaitingPeer)
        XCTAssertNotNil(a.token)
        XCTAssertEqual(a.accepted, false)
        XCTAssertEqual(a.lastSeq, 0)
        let expires = try XCTUnwrap(aliceMailbox.lastExpires)
        XCTAssertGreaterThan(expires, Double(now))
        XCTAssertFalse("\(a)".contains(try XCTUnwrap(a.token)), "the description never shows the token")
        a = try saveAndResume(a, alice, now: now)

        var b = try invitee(bob, bobMailbox, inviteCode: inviteCode, encryptionCode: encryptionCode, now: now)
        XCTAssertEqual(b.relayID, a.relayID)
        XCTAssertFalse(b.isInviter)
        state = try await b.step(now: now)  // accepts, reads INVITE, posts ACCEPT
        XCTAssertEqual(state, .awaitingPeer)
        XCTAssertEqual(b.lastSeq, 1)
        XCTAssertEqual(b.accepted, true)
        b = try saveAndResume(b, bob, now: now)

        state = try await a.step(wait: 5, now: now)  // reads ACCEPT, posts REPLY
        XCTAssertEqual(state, .compareSAS)
        XCTAssertFalse(a.done, "the decisions are still to come")
        XCTAssertEqual(a.accepted, true)
        a = try saveAndResume(a, alice, now: now)

        state = try await b.step(wait: 5, now: now)  // reads REPLY
        XCTAssertEqual(state, .compareSAS)
        XCTAssertFalse(b.done)
        b = try saveAndResume(b, bob, now: now)

        let sasA = try XCTUnwrap(a.exchange.sas), sasB = try XCTUnwrap(b.exchange.sas)
        XCTAssertEqual(sasA, sasB)
        XCTAssertEqual(a.exchange.peer?.name, "Bob")
        XCTAssertEqual(b.exchange.peer?.name, "Alice")

        // Alice confirms first; her confirmation waits for Bob's decision.
        let idA = try a.exchange.confirm(now: now)
        state = try await a.step(now: now)
        XCTAssertEqual(state, .awaitingDecision)
        a = try saveAndResume(a, alice, now: now)
        let idB = try b.exchange.confirm(now: now)
        state = try await b.step(now: now)  // posts Bob's decision
        XCTAssertEqual(state, .awaitingDecision)
        XCTAssertFalse(b.done)
        state = try await a.step(wait: 5, now: now)  // reads Bob's, posts Alice's
        XCTAssertTrue(a.done)
        XCTAssertTrue(a.exchange.flags.contains(.peerConfirmed))
        XCTAssertEqual(try a.exchange.settle(now: now), idA)
        state = try await b.step(wait: 5, now: now)  // reads Alice's, ends the invite
        XCTAssertTrue(b.done)
        XCTAssertEqual(try b.exchange.settle(now: now), idB)
        XCTAssertEqual(try alice.contacts.contact(id: idA).state, .verified)
        XCTAssertEqual(try bob.contacts.contact(id: idB).state, .verified)

        // Nothing is left on the relay: the invitee ended the invite.
        let token = try XCTUnwrap(a.token)
        let gone = await relayError { _ = try await aliceMailbox.fetch(inviteID: a.relayID, token: token, after: 0, wait: 0) }
        XCTAssertEqual(gone?.inviteEnded, true)
        XCTAssertEqual(gone?.status, 404)
        XCTAssertEqual(gone?.kind, "not-found")
        // The inviter's finish finds it gone, which is fine; steps now change nothing.
        let failure = await a.finish()
        XCTAssertNil(failure)
        state = try await b.step(now: now)
        XCTAssertEqual(state, .confirmed)
    }

    func testAnInviteThatEndsBeforeThePeersDecisionCountsAsNone() async throws {
        let url = try await startRelay()
        let alice = try Person("Alice", in: directory), bob = try Person("Bob", in: directory)
        let now = unixNow()
        let a = try inviter(alice, InviteMailbox(url, timeout: 5), now: now)
        _ = try await a.step(now: now)
        let b = try invitee(
            bob, InviteMailbox(url, timeout: 5), inviteCode: try XCTUnwrap(a.exchange.inviteCode).text,
            encryptionCode: try XCTUnwrap(a.exchange.encryptionCode).text, now: now)
        let bobContacts = bob.contacts
        async let runA = Self.runUntilSAS(a, now: now)
        async let runB = Self.runUntilSAS(b, now: now)
        let ((aliceSession, _), (bobSession, _)) = try await (runA, runB)
        // Bob confirms; Alice rejects and ends the invite (cancel).
        let idB = try bobSession.exchange.confirm(now: now)
        _ = try await bobSession.step(now: now)
        let cancelled = await aliceSession.cancel()
        XCTAssertNil(cancelled)
        let ended = await relayError { _ = try await bobSession.step(wait: 1, now: now) }
        XCTAssertEqual(ended?.inviteEnded, true)
        // The host rejects what awaited the peer: nothing is kept.
        XCTAssertEqual(bobSession.exchange.state, .awaitingDecision)
        try bobSession.exchange.reject()
        XCTAssertEqual(try bobContacts.count(), 0)
        let missing = await coreErrorKind { _ = try bobContacts.contact(id: idB) }
        XCTAssertEqual(missing, .notFound)
    }

    /// Steps `session` until its exchange leaves `.awaitingPeer`, in a task
    /// of its own when run by an `async let`: the session is handed to it and
    /// back, for the test to go on with.
    private static func runUntilSAS(
        _ session: sending InviteSession, now: Int64
    ) async throws -> (session: InviteSession, state: Exchange.State) {
        var state = try await session.step(wait: 10, now: now)
        while state == .awaitingPeer { state = try await session.step(wait: 10, now: now) }
        return (session, state)
    }

    func testInviteExchangeWithBothSidesOnlineUsesLongPoll() async throws {
        let url = try await startRelay()
        let alice = try Person("Alice", in: directory), bob = try Person("Bob", in: directory)
        let now = unixNow()
        let a = try inviter(alice, InviteMailbox(url, timeout: 5), now: now)
        let firstState = try await a.step(now: now)
        XCTAssertEqual(firstState, .awaitingPeer)
        let b = try invitee(
            bob, InviteMailbox(url, timeout: 5), inviteCode: try XCTUnwrap(a.exchange.inviteCode).text,
            encryptionCode: try XCTUnwrap(a.exchange.encryptionCode).text, now: now)
        async let runA = Self.runUntilSAS(a, now: now)
        async let runB = Self.runUntilSAS(b, now: now)
        let (endA, endB) = try await (runA, runB)
        XCTAssertEqual(endA.state, .compareSAS)
        XCTAssertEqual(endB.state, .compareSAS)
        XCTAssertEqual(endA.session.exchange.sas, endB.session.exchange.sas)
        XCTAssertFalse(endA.session.done || endB.session.done, "the decisions are still to come")
    }

    func testWrongEncryptionCodeFailsBothSidesAndEndsTheInvite() async throws {
        let url = try await startRelay()
        let alice = try Person("Alice", in: directory), bob = try Person("Bob", in: directory)
        let now = unixNow()
        let mailbox = InviteMailbox(url, timeout: 5)
        let a = try inviter(alice, mailbox, now: now)
        _ = try await a.step(now: now)
        let inviteCode = try XCTUnwrap(a.exchange.inviteCode), encryptionCode = try XCTUnwrap(a.exchange.encryptionCode)
        var random = SystemRandom()
        var wrong = RemoteCode.random(using: &random)
        while wrong == encryptionCode || wrong == inviteCode { wrong = RemoteCode.random(using: &random) }

        let b = try invitee(bob, InviteMailbox(url, timeout: 5), inviteCode: inviteCode.text, encryptionCode: wrong.text, now: now)
        let bState = try await b.step(now: now)  // posts an ACCEPT under the wrong code
        XCTAssertEqual(bState, .awaitingPeer)

        // The inviter's check of the ACCEPT fails: its exchange fails, and it
        // ends the invite so that the other side fails too.
        let kind = await coreErrorKind { _ = try await a.step(now: now) }
        XCTAssertNotNil(kind)
        XCTAssertEqual(a.exchange.state, .failed)
        XCTAssertTrue(a.done)

        let ended = await relayError { _ = try await b.step(wait: 5, now: now) }
        XCTAssertEqual(ended?.inviteEnded, true)
        XCTAssertEqual(b.exchange.state, .rejected)
        XCTAssertTrue(b.done)

        let token = try XCTUnwrap(a.token)
        let gone = await relayError { try await mailbox.delete(inviteID: a.relayID, token: token) }
        XCTAssertEqual(gone?.inviteEnded, true)
        XCTAssertNil(a.exchange.sas)
        XCTAssertNil(b.exchange.sas)
    }

    func testAThirdPersonCannotAcceptAnAcceptedInvite() async throws {
        let url = try await startRelay()
        let alice = try Person("Alice", in: directory), bob = try Person("Bob", in: directory)
        let carol = try Person("Carol", in: directory)
        let now = unixNow()
        let a = try inviter(alice, InviteMailbox(url, timeout: 5), now: now)
        _ = try await a.step(now: now)
        let codes = (try XCTUnwrap(a.exchange.inviteCode).text, try XCTUnwrap(a.exchange.encryptionCode).text)
        let b = try invitee(bob, InviteMailbox(url, timeout: 5), inviteCode: codes.0, encryptionCode: codes.1, now: now)
        _ = try await b.step(now: now)
        let c = try invitee(carol, InviteMailbox(url, timeout: 5), inviteCode: codes.0, encryptionCode: codes.1, now: now)
        let conflict = await relayError { _ = try await c.step(now: now) }
        XCTAssertEqual(conflict?.kind, "conflict")
        XCTAssertEqual(conflict?.status, 409)
        XCTAssertEqual(conflict?.inviteEnded, false)
        XCTAssertEqual(c.exchange.state, .rejected)
        XCTAssertTrue(c.done)
        // The first two are not disturbed.
        let endA = try await a.step(wait: 5, now: now)
        let endB = try await b.step(wait: 5, now: now)
        XCTAssertEqual(endA, .compareSAS)
        XCTAssertEqual(endB, .compareSAS)
    }

    func testUnknownAndExpiredInvitesEndTheExchange() async throws {
        let clock = directory + "/clock"
        let t = unixNow()
        try "\(t)".write(toFile: clock, atomically: true, encoding: .utf8)
        let url = try await startRelay { $0.clockFile = clock }
        let mailbox = InviteMailbox(url, timeout: 5)

        let unknown = await relayError {
            _ = try await mailbox.fetch(
                inviteID: String(repeating: "ab", count: 16), token: String(repeating: "A", count: 43), after: 0, wait: 0)
        }
        XCTAssertEqual(unknown?.inviteEnded, true)
        XCTAssertEqual(unknown?.status, 404)
        XCTAssertEqual(unknown?.kind, "not-found")

        // An invitee whose invite was never created.
        var random = SystemRandom()
        let inviteCode = RemoteCode.random(using: &random)
        var encryptionCode = RemoteCode.random(using: &random)
        while encryptionCode == inviteCode { encryptionCode = RemoteCode.random(using: &random) }
        let bob = try Person("Bob", in: directory)
        let lost = try invitee(bob, mailbox, inviteCode: inviteCode.text, encryptionCode: encryptionCode.text, now: t)
        let never = await relayError { _ = try await lost.step(now: t) }
        XCTAssertEqual(never?.inviteEnded, true, "\(String(describing: never))")
        XCTAssertEqual(lost.exchange.state, .rejected)
        XCTAssertTrue(lost.done)

        // An invite the relay let expire (its clock moved a day on).
        let alice = try Person("Alice", in: directory)
        let a = try inviter(alice, mailbox, now: t)
        _ = try await a.step(now: t)
        XCTAssertEqual(mailbox.lastExpires, Double(t + 24 * 3600))
        try "\(t + 25 * 3600)".write(toFile: clock, atomically: true, encoding: .utf8)
        let expired = await relayError { _ = try await a.step(now: t) }
        XCTAssertEqual(expired?.inviteEnded, true)
        XCTAssertEqual(expired?.status, 404)
        XCTAssertEqual(a.exchange.state, .rejected)
        XCTAssertTrue(a.done)
        let after = try await a.step(now: t)
        XCTAssertEqual(after, .rejected, "a finished session does nothing more")
    }

    func testRateLimitCarriesRetryAfter() async throws {
        let url = try await startRelay { $0.lookupRatePerMinute = 1 }
        let mailbox = InviteMailbox(url, timeout: 5)
        var limited: RelayError?
        for _ in 0..<5 {
            let error = await relayError {
                _ = try await mailbox.fetch(
                    inviteID: String(repeating: "cd", count: 16), token: String(repeating: "B", count: 42) + "A", after: 0, wait: 0)
            }
            if error?.kind == "rate-limited" {
                limited = error
                break
            }
            XCTAssertEqual(error?.inviteEnded, true, "\(String(describing: error))")
        }
        let error = try XCTUnwrap(limited)
        XCTAssertEqual(error.status, 429)
        XCTAssertFalse(error.inviteEnded)
        XCTAssertGreaterThan(try XCTUnwrap(error.retryAfter), 0)
        XCTAssertTrue(error.description.contains("429 rate-limited"))
    }

    func testSavedStateIsChecked() async throws {
        let alice = try Person("Alice", in: directory)
        let url = try RelayURL("http://127.0.0.1:1")
        let mailbox = InviteMailbox(url)
        let session = try inviter(alice, mailbox, now: unixNow())
        let good = session.saved
        XCTAssertEqual(good.version, InviteSession.SavedState.currentVersion)
        XCTAssertNil(good.token)
        XCTAssertNoThrow(try InviteSession(mailbox: mailbox, exchange: session.exchange, saved: good))

        var states: [InviteSession.SavedState] = []
        var s = good
        s.version = 2
        states.append(s)
        s = good
        s.relayID = String(repeating: "0", count: 32)
        states.append(s)
        s = good
        s.inviter = false
        states.append(s)
        s = good
        s.token = "not a token"
        states.append(s)
        s = good
        s.lastSeq = -1
        states.append(s)
        s = good
        s.unsent = ["not base64url!"]
        states.append(s)
        s = good
        s.unsent = [""]
        states.append(s)
        s = good
        s.unsent = [Base64.encode([UInt8](repeating: 1, count: RemoteProtocol.maxMessageCount + 1), .urlUnpadded)]
        states.append(s)
        for state in states {
            XCTAssertThrowsError(try InviteSession(mailbox: mailbox, exchange: session.exchange, saved: state)) {
                XCTAssertEqual(($0 as? ItsMeError)?.kind, .invalidArgument)
            }
        }
        // Python's to_dict has no "accepted" and writes a null token: both read.
        let python = #"{"version": 1, "relay_id": "\#(good.relayID)", "inviter": true, "token": null, "last_seq": 0, "unsent": [], "done": false}"#
        let decoded = try JSONDecoder().decode(InviteSession.SavedState.self, from: Data(python.utf8))
        XCTAssertEqual(decoded, good)

        // A real-time exchange goes through a room, not the mailbox.
        var random = SystemRandom()
        let realtime = try Exchange.invite(identity: alice.identity, store: alice.contacts, realtime: true, now: unixNow(), random: &random)
        XCTAssertThrowsError(try InviteSession(mailbox: mailbox, exchange: realtime)) {
            XCTAssertEqual(($0 as? ItsMeError)?.kind, .invalidArgument)
        }
    }
}

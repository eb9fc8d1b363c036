import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

/// An in-memory invite mailbox with the relay's rules (docs/PROTOCOL.md
/// 15.2): one invite, two tokens, messages numbered in order of posting.
private final class FakeMailbox {
    var exists = false
    var gone = false
    var inviterToken: String?
    var inviteeToken: String?
    var messages: [(seq: Int, fromInviter: Bool, body: [UInt8])] = []
    var deletes = 0

    static func token(_ n: UInt8) -> String { Base64.encode([UInt8](repeating: n, count: 32), .urlUnpadded) }

    /// The answer the relay gives to `request` from the side holding `inviter`.
    func answer(_ request: MailboxSession.Request, inviter: Bool) -> MailboxSession.Answer {
        switch request {
        case .create:
            if exists || gone { return .conflict }
            exists = true
            inviterToken = Self.token(1)
            return .created(token: Self.token(1))
        case .accept:
            guard exists, !gone else { return .inviteGone }
            if inviteeToken != nil { return .conflict }
            inviteeToken = Self.token(2)
            return .accepted(token: Self.token(2))
        case .post(let body):
            guard exists, !gone else { return .inviteGone }
            messages.append((messages.count + 1, inviter, body))
            return .posted(seq: messages.count)
        case .fetch(let after, _):
            guard exists, !gone else { return .inviteGone }
            let theirs = messages.filter { $0.fromInviter != inviter && $0.seq > after }.map { MailboxSession.Message(seq: $0.seq, body: $0.body) }
            return .fetched(accepted: inviteeToken != nil, messages: theirs)
        case .delete:
            deletes += 1
            guard exists, !gone else { return .inviteGone }
            gone = true
            return .deleted
        case .idle, .done:
            return .transientFailure
        }
    }
}

final class MailboxSessionTests: XCTestCase {
    private var directory: String!
    private let t0: Int64 = 1_800_000_000

    override func setUpWithError() throws {
        try Sodium.initialize()
        directory = NSTemporaryDirectory() + "itsme-mailbox-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: directory) }

    private struct Person {
        let identity: Identity
        let store: ContactStore
    }

    private var counter = 0
    private func person(_ name: String) throws -> Person {
        counter += 1
        var r = DeterministicRandom(seed: SHA256.hash(Array("mailbox-\(name)".utf8)))
        let identity = try Identity.create(store: MemorySecretStore(), name: name, random: &r)
        return Person(identity: identity, store: try ContactStore(path: "\(directory!)/\(counter).db", identity: identity))
    }

    private func pair() throws -> (Person, Exchange, Person, Exchange) {
        let alice = try person("Alice")
        let bob = try person("Bob")
        var ra = DeterministicRandom(seed: SHA256.hash(Array("mailbox-invite".utf8)))
        var rb = DeterministicRandom(seed: SHA256.hash(Array("mailbox-accept".utf8)))
        let inviter = try Exchange.invite(identity: alice.identity, store: alice.store, realtime: false, now: t0, random: &ra)
        let invitee = try Exchange.acceptInvite(
            identity: bob.identity, store: bob.store, inviteCode: inviter.inviteCode!.text, encryptionCode: inviter.encryptionCode!.text, realtime: false,
            now: t0, random: &rb)
        return (alice, inviter, bob, invitee)
    }

    /// One step against `mailbox`; the requests made, in order.
    @discardableResult
    private func step(_ session: MailboxSession, _ mailbox: FakeMailbox, outcome: inout MailboxSession.Outcome) throws -> [MailboxSession.Request] {
        try session.begin(wait: 0)
        var made: [MailboxSession.Request] = []
        while true {
            let request = session.nextRequest()
            if request == .idle || request == .done { return made }
            made.append(request)
            outcome = try session.answer(mailbox.answer(request, inviter: session.isInviter), now: t0 + 10)
            if outcome != .proceed { return made }
        }
    }

    @discardableResult
    private func step(_ session: MailboxSession, _ mailbox: FakeMailbox) throws -> [MailboxSession.Request] {
        var outcome = MailboxSession.Outcome.proceed
        let made = try step(session, mailbox, outcome: &outcome)
        XCTAssertEqual(outcome, .proceed)
        return made
    }

    private func names(_ requests: [MailboxSession.Request]) -> [String] {
        requests.map {
            switch $0 {
            case .create: return "create"
            case .accept: return "accept"
            case .post: return "post"
            case .fetch: return "fetch"
            case .delete: return "delete"
            case .idle: return "idle"
            case .done: return "done"
            }
        }
    }

    func testAWholeInviteExchangeThroughTheMailbox() throws {
        let (alice, inviter, bob, invitee) = try pair()
        let mailbox = FakeMailbox()
        let a = try MailboxSession(exchange: inviter)
        let b = try MailboxSession(exchange: invitee)
        XCTAssertEqual(a.nextRequest(), .idle, "nothing before a step begins")
        XCTAssertEqual(names(try step(a, mailbox)), ["create", "post", "fetch"])
        XCTAssertEqual(a.accepted, false)
        XCTAssertEqual(names(try step(b, mailbox)).prefix(2), ["accept", "fetch"])
        for _ in 0..<4 where inviter.state != .compareSAS || invitee.state != .compareSAS {
            try step(a, mailbox)
            try step(b, mailbox)
        }
        XCTAssertEqual(inviter.state, .compareSAS)
        XCTAssertEqual(invitee.state, .compareSAS)
        XCTAssertEqual(inviter.sas, invitee.sas)
        XCTAssertEqual(a.accepted, true)
        XCTAssertFalse(a.done)
        XCTAssertFalse(b.done)

        // The decisions: the invitee's first; the inviter's goes out once it has read it.
        _ = try inviter.save(now: t0 + 20)
        _ = try invitee.save(now: t0 + 20)
        _ = try invitee.confirm(now: t0 + 20)
        _ = try inviter.confirm(now: t0 + 20)
        for _ in 0..<4 where !(a.done && b.done) {
            try step(b, mailbox)
            try step(a, mailbox)
        }
        XCTAssertTrue(a.done)
        XCTAssertTrue(b.done)
        XCTAssertTrue(mailbox.gone, "the invitee ended the invite once it read the inviter's decision")
        XCTAssertEqual(mailbox.deletes, 1)
        XCTAssertNotNil(try inviter.settle(now: t0 + 30))
        XCTAssertNotNil(try invitee.settle(now: t0 + 30))
        XCTAssertEqual(inviter.state, .confirmed)
        XCTAssertEqual(invitee.state, .confirmed)
        XCTAssertEqual(a.nextRequest(), .done)
        try a.begin()
        XCTAssertEqual(a.nextRequest(), .done, "done is final")
    }

    func testAReplayedMessageIsSkippedAndOutOfOrderOnesAreSorted() throws {
        let (_, inviter, _, invitee) = try pair()
        let mailbox = FakeMailbox()
        let a = try MailboxSession(exchange: inviter)
        let b = try MailboxSession(exchange: invitee)
        try step(a, mailbox)  // create, INVITE posted as seq 1
        try step(b, mailbox)  // accept, reads seq 1, posts its answer
        XCTAssertEqual(b.lastSeq, 1)
        let invite = try XCTUnwrap(mailbox.messages.first).body

        // The relay (or a man in the middle) sends seq 1 again: skipped by its number.
        try b.begin()
        guard case .fetch(let after, _) = b.nextRequest() else { return XCTFail("a fetch is due") }
        XCTAssertEqual(after, 1)
        XCTAssertEqual(try b.answer(.fetched(accepted: true, messages: [.init(seq: 1, body: invite)]), now: t0 + 10), .proceed)
        XCTAssertEqual(invitee.state, .awaitingPeer, "the replayed INVITE was not fed again")
        XCTAssertEqual(b.lastSeq, 1)

        // The inviter gets the invitee's messages in reverse order of seq: fed in order.
        let theirs = mailbox.messages.filter { !$0.fromInviter }
        XCTAssertGreaterThanOrEqual(theirs.count, 1)
        try a.begin()
        guard case .fetch = a.nextRequest() else { return XCTFail("a fetch is due") }
        try a.answer(.fetched(accepted: true, messages: theirs.reversed().map { .init(seq: $0.seq, body: $0.body) }), now: t0 + 10)
        XCTAssertNotEqual(inviter.state, .failed)
        XCTAssertEqual(a.lastSeq, theirs.map(\.seq).max())
        for _ in 0..<4 where inviter.state != .compareSAS || invitee.state != .compareSAS {
            try step(a, mailbox)
            try step(b, mailbox)
        }
        XCTAssertEqual(inviter.sas, invitee.sas)
    }

    func testARefusedMessageFailsTheExchangeAndEndsTheInvite() throws {
        let (_, inviter, _, invitee) = try pair()
        let mailbox = FakeMailbox()
        let a = try MailboxSession(exchange: inviter)
        let b = try MailboxSession(exchange: invitee)
        try step(a, mailbox)
        // The relay hands over bytes that are not an exchange message.
        mailbox.messages[0].body = [UInt8](repeating: 0xEE, count: 40)
        XCTAssertThrowsError(try step(b, mailbox)) { XCTAssertNotNil($0 as? ItsMeError) }
        XCTAssertEqual(invitee.state, .failed)
        XCTAssertEqual(b.lastSeq, 0)
        XCTAssertEqual(b.nextRequest(), .delete, "the invite is ended so the inviter fails too")
        try b.answer(mailbox.answer(.delete, inviter: false), now: t0)
        XCTAssertTrue(b.done)
        XCTAssertEqual(b.nextRequest(), .done)

        // The inviter finds the invite gone: its exchange is rejected.
        var outcome = MailboxSession.Outcome.proceed
        try step(a, mailbox, outcome: &outcome)
        XCTAssertEqual(outcome, .inviteEnded)
        XCTAssertEqual(inviter.state, .rejected)
        XCTAssertTrue(a.done)
    }

    func testAnEndedInviteRejectsAndAConflictEnds() throws {
        let (_, inviter, _, invitee) = try pair()
        let a = try MailboxSession(exchange: inviter)
        try a.begin()
        XCTAssertEqual(a.nextRequest(), .create)
        XCTAssertEqual(try a.answer(.conflict, now: t0), .conflict)
        XCTAssertTrue(a.done)
        XCTAssertEqual(inviter.state, .rejected)

        let b = try MailboxSession(exchange: invitee)
        try b.begin()
        XCTAssertEqual(b.nextRequest(), .accept)
        XCTAssertEqual(try b.answer(.inviteGone, now: t0), .inviteEnded)
        XCTAssertEqual(invitee.state, .rejected)
        XCTAssertEqual(b.nextRequest(), .done)
    }

    func testARejectionIsPostedThenTheInviteEnds() throws {
        let (_, inviter, _, invitee) = try pair()
        let mailbox = FakeMailbox()
        let a = try MailboxSession(exchange: inviter)
        let b = try MailboxSession(exchange: invitee)
        for _ in 0..<4 where inviter.state != .compareSAS || invitee.state != .compareSAS {
            try step(a, mailbox)
            try step(b, mailbox)
        }
        try invitee.reject()
        XCTAssertEqual(names(try step(b, mailbox)), ["post", "delete"])
        XCTAssertTrue(b.done)
        var outcome = MailboxSession.Outcome.proceed
        try step(a, mailbox, outcome: &outcome)
        XCTAssertEqual(outcome, .inviteEnded)
        XCTAssertEqual(inviter.state, .rejected)
    }

    func testTransientFailuresAndMisuse() throws {
        let (_, inviter, _, _) = try pair()
        let a = try MailboxSession(exchange: inviter)
        XCTAssertEqual(errorKind { try a.answer(.deleted, now: self.t0) }, .invalidState, "nothing pending")
        XCTAssertEqual(errorKind { try a.begin(wait: 31) }, .invalidArgument)
        try a.begin(wait: 30)
        XCTAssertEqual(a.nextRequest(), .create)
        XCTAssertEqual(a.nextRequest(), .create, "asking again gives the same request")
        XCTAssertEqual(errorKind { try a.answer(.posted(seq: 1), now: self.t0) }, .invalidState)
        XCTAssertEqual(errorKind { try a.answer(.created(token: "not a token"), now: self.t0) }, .invalidArgument)
        XCTAssertEqual(a.nextRequest(), .create, "still pending")
        XCTAssertEqual(try a.answer(.transientFailure, now: t0), .stepEnded)
        XCTAssertEqual(a.nextRequest(), .idle, "the step ended; nothing changed")
        XCTAssertNil(a.token)
        try a.begin(wait: 30)
        XCTAssertEqual(a.nextRequest(), .create)
        try a.answer(.created(token: FakeMailbox.token(7)), now: t0)
        guard case .post(let invite) = a.nextRequest() else { return XCTFail("the INVITE is due") }
        try a.answer(.posted(seq: 1), now: t0)
        XCTAssertEqual(a.nextRequest(), .fetch(after: 0, wait: 30))
        XCTAssertFalse(invite.isEmpty)
        XCTAssertFalse(a.description.contains(FakeMailbox.token(7)), "the token stays out of descriptions")
    }

    func testTheRelaysHTTPAnswers() throws {
        let (_, inviter, _, _) = try pair()
        let a = try MailboxSession(exchange: inviter)
        try a.begin(wait: 5)
        XCTAssertEqual(a.nextRequest(), .create)
        XCTAssertEqual(a.pendingHTTP?.method, "POST")
        XCTAssertEqual(a.pendingHTTP?.path, "/v1/invites/\(a.relayID)")
        XCTAssertEqual(a.pendingHeaders.map(\.name), ["Accept"], "a create presents no token")
        XCTAssertEqual(try a.answer(status: 503, body: [], now: t0), .stepEnded)
        XCTAssertNil(a.pendingHTTP)
        try a.begin(wait: 5)
        XCTAssertEqual(a.nextRequest(), .create)
        XCTAssertEqual(errorKind { try a.answer(status: 201, body: Array("{\"token\": 3}".utf8), now: self.t0) }, .malformedMessage)
        XCTAssertNil(a.token, "a malformed answer ends the step")
        try a.begin(wait: 5)
        _ = a.nextRequest()
        let token = FakeMailbox.token(4)
        try a.answer(status: 201, body: Array("{\"token\":\"\(token)\",\"expires\":1800086400.5}".utf8), now: t0)
        XCTAssertEqual(a.token, token)
        guard case .post = a.nextRequest() else { return XCTFail("the INVITE is due") }
        try a.answer(status: 201, body: Array("{\"seq\": 1}".utf8), now: t0)
        XCTAssertEqual(a.nextRequest(), .fetch(after: 0, wait: 5))
        XCTAssertEqual(a.pendingHTTP?.method, "GET")
        XCTAssertEqual(a.pendingHTTP?.path, "/v1/invites/\(a.relayID)/messages?after=0&wait=5")
        try a.answer(status: 200, body: Array("{\"accepted\": false, \"messages\": []}".utf8), now: t0)
        XCTAssertEqual(a.accepted, false)
        XCTAssertEqual(a.nextRequest(), .idle)
        try a.begin()
        _ = a.nextRequest()
        XCTAssertEqual(try a.answer(status: 404, body: Array("{\"error\":\"not-found\"}".utf8), now: t0), .inviteEnded)
        XCTAssertEqual(inviter.state, .rejected)
    }

    /// Every cut and every changed byte of a saved state and of the relay's
    /// answers: a clear error or a result, never a crash.
    func testTruncatedAndChangedInputsAreRefusedCleanly() throws {
        let (alice, _, _, _) = try pair()
        let token = FakeMailbox.token(2)
        let saved = MailboxSession.SavedState(
            relayID: String(repeating: "ab", count: 16), inviter: true, token: token, lastSeq: 3, unsent: [[1, 2, 3]], done: false,
            accepted: true
        ).json
        let bytes = Array(saved.utf8)
        for i in 0...bytes.count {
            for variant in [Array(bytes[..<i]), i < bytes.count ? bytes.enumerated().map { $0.offset == i ? $0.element ^ 0x21 : $0.element } : bytes] {
                let text = String(decoding: variant, as: UTF8.self)
                do { _ = try MailboxSession.SavedState(json: text) } catch let error as ItsMeError {
                    XCTAssertEqual(error.kind, .invalidArgument, text)
                }
            }
        }
        let fetched = Array("{\"accepted\": true, \"messages\": [{\"seq\": 1, \"body\": \"AQID\"}]}".utf8)
        for i in 0...fetched.count {
            var r = DeterministicRandom(seed: SHA256.hash(Array("mailbox-cut-\(i)".utf8)))
            let a = try MailboxSession(exchange: try Exchange.invite(identity: alice.identity, store: alice.store, realtime: false, now: t0, random: &r))
            try a.begin()
            _ = a.nextRequest()
            try a.answer(.created(token: token), now: t0)
            guard case .post = a.nextRequest() else { return XCTFail("a post is due") }
            try a.answer(.posted(seq: 1), now: t0)
            guard case .fetch = a.nextRequest() else { return XCTFail("a fetch is due") }
            do { try a.answer(status: 200, body: Array(fetched[..<i]), now: t0) } catch let error as ItsMeError {
                XCTAssertTrue([.malformedMessage, .invalidState, .authenticationFailed, .invalidKey].contains(error.kind), "\(error)")
            }
        }
    }

    func testFinishAndCancel() throws {
        let (_, inviter, _, invitee) = try pair()
        let a = try MailboxSession(exchange: inviter)
        a.finish()
        XCTAssertEqual(a.nextRequest(), .done, "without a token there is nothing to end")

        let b = try MailboxSession(exchange: invitee)
        try b.begin()
        _ = b.nextRequest()
        try b.answer(.accepted(token: FakeMailbox.token(2)), now: t0)
        b.finish()
        XCTAssertEqual(b.nextRequest(), .delete)
        try b.answer(.transientFailure, now: t0)
        XCTAssertFalse(b.done, "finish tries again later")
        b.cancel()
        XCTAssertEqual(b.nextRequest(), .delete)
        try b.answer(.transientFailure, now: t0)
        XCTAssertTrue(b.done, "a cancelled session is done even if the relay was not reached")
    }

    func testResumeFromSavedStateAndTheOtherWritersJSON() throws {
        let (alice, inviter, _, invitee) = try pair()
        let mailbox = FakeMailbox()
        let a = try MailboxSession(exchange: inviter)
        let b = try MailboxSession(exchange: invitee)
        try step(a, mailbox)
        // The inviter's post of a later message fails: it stays unsent.
        try step(b, mailbox)
        try a.begin()
        guard case .fetch = a.nextRequest() else { return XCTFail("a fetch is due") }
        try a.answer(mailbox.answer(a.nextRequest(), inviter: true), now: t0 + 10)
        guard case .post(let pendingMessage) = a.nextRequest() else { return XCTFail("a post is due") }
        try a.answer(.transientFailure, now: t0 + 10)

        let saved = a.saved
        XCTAssertEqual(saved.unsent, [pendingMessage])
        let json = saved.json
        XCTAssertTrue(json.hasPrefix("{\"version\": 1, \"relay_id\": \"\(a.relayID)\", \"inviter\": true, \"token\": \""), json)
        XCTAssertEqual(try MailboxSession.SavedState(json: json), saved)
        let sealed = try inviter.seal()

        // Another process: the exchange restored, the session resumed.
        let restored = try Exchange.restore(identity: alice.identity, store: alice.store, sealed: sealed, now: t0 + 15)
        let resumed = try MailboxSession(exchange: restored, saved: try MailboxSession.SavedState(json: json))
        XCTAssertEqual(resumed.lastSeq, a.lastSeq)
        XCTAssertEqual(resumed.token, a.token)
        try resumed.begin()
        XCTAssertEqual(resumed.nextRequest(), .post(pendingMessage), "the unsent message goes first")
        try resumed.answer(mailbox.answer(resumed.nextRequest(), inviter: true), now: t0 + 15)
        for _ in 0..<4 where restored.state != .compareSAS || invitee.state != .compareSAS {
            try step(resumed, mailbox)
            try step(b, mailbox)
        }
        XCTAssertEqual(restored.sas, invitee.sas)

        // The Python binding's to_dict (json.dumps) and the relay client's
        // JSONEncoder forms read alike; a state of another exchange does not resume.
        let token = FakeMailbox.token(2)
        let python = "{\"version\": 1, \"relay_id\": \"\(b.relayID)\", \"inviter\": false, \"token\": \"\(token)\", \"last_seq\": 3, \"unsent\": [], \"done\": false}"
        let swift = "{\"done\":false,\"inviter\":false,\"last_seq\":3,\"relay_id\":\"\(b.relayID)\",\"token\":\"\(token)\",\"unsent\":[],\"version\":1,\"accepted\":true}"
        let fromPython = try MailboxSession.SavedState(json: python)
        XCTAssertEqual(fromPython.lastSeq, 3)
        XCTAssertNil(fromPython.accepted)
        XCTAssertEqual(try MailboxSession.SavedState(json: swift).accepted, true)
        XCTAssertEqual(try MailboxSession(exchange: invitee, saved: fromPython).lastSeq, 3)
        XCTAssertEqual(errorKind { _ = try MailboxSession(exchange: inviter, saved: fromPython) }, .invalidArgument)
        for bad in [
            "", "[]", "{\"version\": 2}", python.replacingOccurrences(of: "\"last_seq\": 3", with: "\"last_seq\": -1"),
            python.replacingOccurrences(of: "\"last_seq\": 3", with: "\"last_seq\": 3.5"),
            python.replacingOccurrences(of: "\"unsent\": []", with: "\"unsent\": [\"!!\"]"),
            python.replacingOccurrences(of: "\"unsent\": []", with: "\"unsent\": [\"\"]"),
            python.replacingOccurrences(of: token, with: "short"), python + "x", String(repeating: "[", count: 100),
        ] {
            XCTAssertEqual(errorKind { _ = try MailboxSession.SavedState(json: bad) }, .invalidArgument, bad)
        }
    }
}

final class OnlineVerifyRendezvousTests: XCTestCase {
    private var directory: String!
    private let t0: Int64 = 1_800_000_000

    override func setUpWithError() throws {
        try Sodium.initialize()
        directory = NSTemporaryDirectory() + "itsme-rendezvous-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: directory) }

    private func rendezvous(_ side: PairSide, now: Int64, _ n: Int) throws -> OnlineVerifyRendezvous {
        var r = DeterministicRandom(seed: SHA256.hash(Array("rendezvous-\(n)".utf8)))
        return try OnlineVerifyRendezvous(store: side.store, contactID: side.contactID, now: now, random: &r)
    }

    func testTwoSidesAcrossAWindowBoundaryMeetInTheEarlierRoom() throws {
        let (alice, bob) = try exchangedPair(in: directory, label: "rendezvous", now: t0)
        let boundary = (VoiceProtocol.window(t0) + 1) * VoiceProtocol.windowSeconds
        let a = try rendezvous(alice, now: boundary - 2, 1)  // still in the old window
        let b = try rendezvous(bob, now: boundary + 1, 2)  // already in the new one
        XCTAssertEqual(a.roomsToJoin, [a.candidates[0].room])
        XCTAssertEqual(a.candidates[0].session.window, VoiceProtocol.window(boundary - 2))
        XCTAssertEqual(b.candidates[1].room, a.candidates[0].room, "Bob's previous window is Alice's current one")
        XCTAssertTrue(a.dropped.isEmpty)
        XCTAssertNil(a.chosen)

        // Alice waits alone in her room; Bob is alone in his current room and widens.
        b.alone(in: b.candidates[0].room)
        XCTAssertEqual(b.roomsToJoin, [b.candidates[0].room, b.candidates[1].room])
        XCTAssertEqual(errorKind { try a.peerJoined(in: b.candidates[0].room) }, .invalidArgument, "not a room Alice is in")
        let sa = try a.peerJoined(in: a.candidates[0].room)
        let sb = try b.peerJoined(in: b.candidates[1].room)
        XCTAssertTrue(try b.peerJoined(in: b.candidates[0].room) === sb, "the first meeting counts")
        XCTAssertEqual(b.roomsToJoin, [b.candidates[1].room])
        XCTAssertEqual(b.dropped.map(\.room), [b.candidates[0].room])
        XCTAssertEqual(sa.roomName, sb.roomName)

        // The two chosen sessions run to the SAS.
        var moved = true
        while moved {
            moved = false
            for (from, to) in [(sa, sb), (sb, sa)] {
                if let m = from.takeOutgoing() {
                    try to.receive(m, now: boundary + 2)
                    moved = true
                }
            }
        }
        XCTAssertEqual(sa.state, .compareSAS)
        XCTAssertEqual(sa.sas, sb.sas)
    }

    func testAloneInThePreviousRoomChangesNothingAndBadInputThrows() throws {
        let (alice, _) = try exchangedPair(in: directory, label: "rendezvous-2", now: t0)
        let a = try rendezvous(alice, now: t0 + 100, 3)
        a.alone(in: a.candidates[1].room)
        XCTAssertFalse(a.widened)
        XCTAssertEqual(errorKind { try a.peerJoined(in: a.candidates[1].room) }, .invalidArgument, "not joined yet")
        var r = DeterministicRandom(seed: [UInt8](repeating: 0, count: 32))
        XCTAssertEqual(errorKind { _ = try OnlineVerifyRendezvous(store: alice.store, contactID: 999, now: self.t0, random: &r) }, .notFound)
        XCTAssertEqual(errorKind { _ = try OnlineVerifyRendezvous(store: alice.store, contactID: alice.contactID, now: -1, random: &r) }, .invalidArgument)
    }
}

import Foundation
import ItsMeKit
import ItsMePrimitives
import RelayServer
import RelayClient
import XCTest

// Alice's real-time invite, and Bob's side joined with the text of her
// codes: free functions, so that each exchange belongs to its person alone
// (not to the test case, nor to the other) and can go to a task of its own.

private func realtimeInvite(_ alice: Person, now: Int64) throws -> Exchange {
    var random = SystemRandom()
    return try Exchange.invite(identity: alice.identity, store: alice.contacts, realtime: true, now: now, random: &random)
}

private func realtimeAcceptance(_ bob: Person, codes: (invite: String, encryption: String), now: Int64) throws -> Exchange {
    var random = SystemRandom()
    return try Exchange.acceptInvite(
        identity: bob.identity, store: bob.contacts, inviteCode: codes.invite, encryptionCode: codes.encryption, realtime: true, now: now, random: &random)
}

private func codes(of invite: Exchange) throws -> (invite: String, encryption: String) {
    (try XCTUnwrap(invite.inviteCode).text, try XCTUnwrap(invite.encryptionCode).text)
}

/// Relay rooms (docs/PROTOCOL.md 15.3) and what runs through them: the
/// real-time exchange (16.5) and Online Verify (11).
final class RoomTests: RelayTestCase {

    private func randomID() -> String {
        var random = SystemRandom()
        return Hex.encodeUpper(random.bytes(16)).lowercased()
    }

    func testRoomEvents() async throws {
        let url = try await startRelay()
        let id = randomID()
        let first = try await RelayRoom.join(url, roomID: id, timeout: 5)
        XCTAssertEqual(first.roomID, id)
        var event = try await first.nextEvent(timeout: 5)
        XCTAssertEqual(event, .waiting)
        XCTAssertFalse(first.peerPresent)

        // Alone, a frame is not forwarded.
        try await first.send([1, 2, 3])
        event = try await first.nextEvent(timeout: 5)
        XCTAssertEqual(event, .refused(reason: "no-peer"))
        let quiet = await relayError { _ = try await first.nextEvent(timeout: 0.1) }
        XCTAssertEqual(quiet?.kind, "timeout")

        let second = try await RelayRoom.join(url, roomID: id, timeout: 5)
        event = try await second.nextEvent(timeout: 5)
        XCTAssertEqual(event, .peerJoined)
        XCTAssertTrue(second.peerPresent)
        try await first.waitForPeer(timeout: 5)
        XCTAssertTrue(first.peerPresent)
        try await second.waitForPeer(timeout: 5)

        // Frames pass unchanged, up to the largest the relay forwards.
        try await first.send([0, 255, 7])
        var received = try await second.receive(timeout: 5)
        XCTAssertEqual(received, [0, 255, 7])
        let large = (0..<RelayRoom.maxFrame).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try await second.send(large)
        received = try await first.receive(timeout: 5)
        XCTAssertEqual(received, large)
        let tooLarge = await coreErrorKind { try await first.send([UInt8](repeating: 0, count: RelayRoom.maxFrame + 1)) }
        XCTAssertEqual(tooLarge, .invalidArgument)

        // A third person is turned away.
        let third = try await RelayRoom.join(url, roomID: id, timeout: 5)
        let full = await relayError { _ = try await third.nextEvent(timeout: 5) }
        XCTAssertEqual(full?.kind, "room-full")
        await third.close()

        // The first leaves: the second is told, then its connection closes.
        await first.close()
        await first.close()  // idempotent
        let left = await relayError { _ = try await second.receive(timeout: 5) }
        XCTAssertEqual(left?.kind, "peer-left")
        XCTAssertFalse(second.peerPresent)
        let closed = await relayError { _ = try await second.nextEvent(timeout: 5) }
        XCTAssertEqual(closed?.kind, "closed")
        let again = await relayError { _ = try await second.nextEvent(timeout: 5) }
        XCTAssertEqual(again?.kind, "closed", "the end is reported again")
        await second.close()
        let afterClose = await relayError { try await first.send([1]) }
        XCTAssertEqual(afterClose?.kind, "closed")

        // A relay under another path prefix: no upgrade, the status is kept.
        let elsewhere = try RelayURL(try XCTUnwrap(relay).url + "/elsewhere")
        let refused = await relayError { _ = try await RelayRoom.join(elsewhere, roomID: id, timeout: 5) }
        XCTAssertEqual(refused?.kind, "connection")
        XCTAssertEqual(refused?.status, 400, "the relay refuses an upgrade it does not route with 400")
    }

    func testRealtimeExchangeThroughARoom() async throws {
        let url = try await startRelay { $0.roomIdleSeconds = 2 }
        let alice = try Person("Alice", in: directory), bob = try Person("Bob", in: directory)
        let now = unixNow()
        let a = try realtimeInvite(alice, now: now)
        let b = try realtimeAcceptance(bob, codes: try codes(of: a), now: now)
        let aliceContacts = alice.contacts, bobContacts = bob.contacts
        // Bob takes a while to answer: the room stays open past its idle
        // limit (2 s here) because the clients ping it.
        async let sideA = realtimeSide(url, a, timeout: 20, pingInterval: 0.5, now: now)
        async let sideB = realtimeSide(
            url, b, timeout: 20, pingInterval: 0.5, now: now,
            decide: { _ in
                try await Task.sleep(nanoseconds: 3_000_000_000)
                return true
            })
        let (endA, endB) = await (sideA, sideB)
        XCTAssertEqual(try endA.end.get(), .confirmed)
        XCTAssertEqual(try endB.end.get(), .confirmed)
        XCTAssertEqual(try XCTUnwrap(endA.exchange.sas), try XCTUnwrap(endB.exchange.sas))
        XCTAssertEqual(try aliceContacts.contact(id: try XCTUnwrap(endA.exchange.contactID)).state, .verified)
        XCTAssertEqual(try bobContacts.contact(id: try XCTUnwrap(endB.exchange.contactID)).state, .verified)
    }

    func testAnInviteExchangeDoesNotGoThroughARoom() async throws {
        let url = try await startRelay()
        let alice = try Person("Alice", in: directory)
        let now = unixNow()
        // An invite exchange goes through the mailbox, not a room.
        var random = SystemRandom()
        let invite = try Exchange.invite(identity: alice.identity, store: alice.contacts, realtime: false, now: now, random: &random)
        let kind = await coreErrorKind {
            _ = try await realtimeExchange(url, exchange: invite, timeout: 5, now: { now }, decide: { _ in true })
        }
        XCTAssertEqual(kind, .invalidArgument)
    }

    func testARejectionInTheRoomLeavesNothingOnEitherSide() async throws {
        let url = try await startRelay()
        let alice = try Person("Alice", in: directory), bob = try Person("Bob", in: directory)
        let now = unixNow()
        let a = try realtimeInvite(alice, now: now)
        let b = try realtimeAcceptance(bob, codes: try codes(of: a), now: now)
        let aliceContacts = alice.contacts, bobContacts = bob.contacts
        // Alice confirms, Bob says the SAS differs.
        async let sideA = realtimeSide(url, a, now: now, decide: { _ in true })
        async let sideB = realtimeSide(url, b, now: now, decide: { _ in false })
        let (endA, endB) = await (sideA, sideB)
        XCTAssertEqual(try endA.end.get(), .rejected)
        XCTAssertEqual(try endB.end.get(), .rejected)
        XCTAssertTrue(endA.exchange.flags.contains(.peerRejected))
        XCTAssertEqual(try aliceContacts.count(), 0, "Bob's rejection deleted the contact Alice confirmed")
        XCTAssertEqual(try bobContacts.count(), 0)
    }

    func testAPeerThatLeavesBeforeItsDecisionCountsAsNone() async throws {
        let url = try await startRelay()
        let alice = try Person("Alice", in: directory), bob = try Person("Bob", in: directory)
        let now = unixNow()
        let a = try realtimeInvite(alice, now: now)
        let b = try realtimeAcceptance(bob, codes: try codes(of: a), now: now)
        let aliceContacts = alice.contacts, bobContacts = bob.contacts
        // Bob's device stops (the decision throws) before he decides: his
        // side leaves the room without a DECISION.
        struct Stopped: Error {}
        async let sideA = realtimeSide(url, a, now: now, decide: { _ in true })
        async let sideB = realtimeSide(
            url, b, now: now,
            decide: { _ in
                try await Task.sleep(nanoseconds: 300_000_000)
                throw Stopped()
            })
        let (endA, endB) = await (sideA, sideB)
        var bobStopped = false
        do { _ = try endB.end.get() } catch is Stopped { bobStopped = true }
        XCTAssertTrue(bobStopped)
        XCTAssertEqual(try endA.end.get(), .rejected)
        XCTAssertTrue(endA.exchange.flags.isDisjoint(with: [.peerConfirmed, .peerRejected]), "no decision came from Bob")
        XCTAssertEqual(try aliceContacts.count(), 0, "no decision from the peer deletes the contact awaiting it")
        XCTAssertEqual(try bobContacts.count(), 0)
    }

    func testRealtimeExchangeFailsWhenThePeerLeaves() async throws {
        let url = try await startRelay()
        let alice = try Person("Alice", in: directory)
        let now = unixNow()
        var random = SystemRandom()
        let a = try Exchange.invite(identity: alice.identity, store: alice.contacts, realtime: true, now: now, random: &random)
        let id = Hex.encodeUpper(try XCTUnwrap(a.relayID)).lowercased()
        // A peer that joins and leaves at once, without a word.
        async let side = realtimeSide(url, a, now: now, decide: { _ in true })
        let peer = try await RelayRoom.join(url, roomID: id, timeout: 5)
        try await peer.waitForPeer(timeout: 5)
        _ = try await peer.receive(timeout: 5)  // the INVITE
        await peer.close()
        let end: (exchange: Exchange, end: Result<Exchange.State, any Error>) = await side
        var error: RelayError?
        do {
            _ = try end.end.get()
        } catch let e as RelayError {
            error = e
        }
        XCTAssertEqual(error?.kind, "peer-left")
        XCTAssertEqual(end.exchange.state, .rejected)
    }

    /// Two contacts made by a QR exchange.
    private func contacts(now: Int64) throws -> (Person, Int64, Person, Int64) {
        let alice = try Person("Alice", in: directory), bob = try Person("Bob", in: directory)
        var random = SystemRandom()
        let xa = try Exchange.qr(identity: alice.identity, store: alice.contacts, now: now, random: &random)
        let xb = try Exchange.qr(identity: bob.identity, store: bob.contacts, now: now, random: &random)
        try xa.receive(Array(xb.outgoingText.utf8), now: now)
        try xb.receive(Array(xa.outgoingText.utf8), now: now)
        XCTAssertEqual(xa.sas, xb.sas)
        return (alice, try xa.confirm(now: now), bob, try xb.confirm(now: now))
    }

    func testOnlineVerifyBetweenContacts() async throws {
        let url = try await startRelay()
        // Bob starts in the same window as Alice, then in the next one: the
        // two still meet, in Alice's room (the rule of section 11.1).
        for offset: Int64 in [0, VoiceProtocol.windowSeconds] {
            let now = unixNow()
            let (alice, aliceContact, bob, bobContact) = try contacts(now: now)
            let aliceContacts = alice.contacts, bobContacts = bob.contacts
            async let sessionA = startOnlineVerify(url, store: aliceContacts, contactID: aliceContact, timeout: 10, now: { now })
            async let sessionB = startOnlineVerify(url, store: bobContacts, contactID: bobContact, timeout: 10, now: { now + offset })
            let (a, b) = try await (sessionA, sessionB)
            XCTAssertEqual(a.state, .compareSAS)
            XCTAssertEqual(b.state, .compareSAS)
            XCTAssertEqual(a.window, b.window)
            XCTAssertEqual(a.window, VoiceProtocol.window(now))
            XCTAssertEqual(a.roomID, b.roomID)
            let sasA = try XCTUnwrap(a.sas), sasB = try XCTUnwrap(b.sas)
            XCTAssertEqual(sasA, sasB)
            XCTAssertEqual(try a.confirm(now: now), .verified)
            XCTAssertEqual(try b.confirm(now: now + offset), .verified)
        }
    }

    func testOnlineVerifyTimesOutWhenNobodyComes() async throws {
        let url = try await startRelay()
        let now = unixNow()
        let (alice, aliceContact, _, _) = try contacts(now: now)
        let error = await relayError {
            _ = try await startOnlineVerify(url, store: alice.contacts, contactID: aliceContact, timeout: 0.5, now: { now })
        }
        XCTAssertEqual(error?.kind, "timeout")
    }

    func testUnreachableRelayFailsAtOnce() async throws {
        let port = try closedPort()
        let url = try RelayURL("http://127.0.0.1:\(port)")
        let mailbox = InviteMailbox(url, timeout: 5)
        let id = randomID()
        let create = await relayError { _ = try await mailbox.create(inviteID: id) }
        XCTAssertEqual(create?.kind, "connection")
        XCTAssertNil(create?.status)
        XCTAssertEqual(create?.inviteEnded, false)
        let join = await relayError { _ = try await RelayRoom.join(url, roomID: id, timeout: 5) }
        XCTAssertEqual(join?.kind, "connection")

        let alice = try Person("Alice", in: directory)
        let now = unixNow()
        var random = SystemRandom()
        // A session whose relay cannot be reached is left as it was: step again later.
        let session = try InviteSession(
            mailbox: mailbox, exchange: try Exchange.invite(identity: alice.identity, store: alice.contacts, realtime: false, now: now, random: &random))
        let step = await relayError { _ = try await session.step(now: now) }
        XCTAssertEqual(step?.kind, "connection")
        XCTAssertFalse(session.done)
        XCTAssertNil(session.token)
        XCTAssertEqual(session.exchange.state, .awaitingPeer)
        // So is a real-time exchange whose room cannot be joined.
        let realtime = try Exchange.invite(identity: alice.identity, store: alice.contacts, realtime: true, now: now, random: &random)
        let run = await relayError {
            _ = try await realtimeExchange(url, exchange: realtime, timeout: 5, now: { now }, decide: { _ in true })
        }
        XCTAssertEqual(run?.kind, "connection")
        XCTAssertEqual(realtime.state, .awaitingPeer)
    }

    func testHTTPSAndWSSWithAPrivateCertificate() async throws {
        let cert = directory + "/cert.pem", key = directory + "/key.pem"
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        openssl.arguments = [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,digitalSignature,keyCertSign", "-addext", "extendedKeyUsage=serverAuth",
        ]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        do {
            try openssl.run()
            openssl.waitUntilExit()
        } catch {
            throw XCTSkip("openssl is not available to make a certificate")
        }
        guard openssl.terminationStatus == 0 else { throw XCTSkip("openssl could not make a certificate") }

        let started = try await TestRelay.start {
            $0.tlsCertificatePath = cert
            $0.tlsKeyPath = key
        }
        relay = started
        XCTAssertTrue(started.url.hasPrefix("https://"))
        var url = try RelayURL("https://localhost:\(started.port)")
        let id = randomID()

        // The system's trust roots do not know this certificate.
        let untrusted = await relayError { _ = try await InviteMailbox(url, timeout: 5).create(inviteID: id) }
        XCTAssertEqual(untrusted?.kind, "connection")
        XCTAssertThrowsError(try url.addTrustRoots(pemFile: directory + "/missing.pem"))

        try url.addTrustRoots(pemFile: cert)
        let mailbox = InviteMailbox(url, timeout: 5)
        let token = try await mailbox.create(inviteID: id)
        let seq = try await mailbox.post(inviteID: id, token: token, body: [9, 8, 7])
        XCTAssertEqual(seq, 1)
        try await mailbox.delete(inviteID: id, token: token)

        // By address: the certificate is checked against it (no server name
        // is sent).
        var byAddress = try RelayURL("https://127.0.0.1:\(started.port)")
        try byAddress.addTrustRoots(pemFile: cert)
        let other = randomID()
        let otherToken = try await InviteMailbox(byAddress, timeout: 5).create(inviteID: other)
        try await InviteMailbox(byAddress, timeout: 5).delete(inviteID: other, token: otherToken)
        let alone = try await RelayRoom.join(byAddress, roomID: other, timeout: 5)
        let waiting = try await alone.nextEvent(timeout: 5)
        XCTAssertEqual(waiting, .waiting)
        await alone.close()

        let first = try await RelayRoom.join(url, roomID: id, timeout: 5)
        let second = try await RelayRoom.join(url, roomID: id, timeout: 5)
        try await first.waitForPeer(timeout: 5)
        try await second.waitForPeer(timeout: 5)
        try await first.send([42])
        let received = try await second.receive(timeout: 5)
        XCTAssertEqual(received, [42])
        await first.close()
        await second.close()
    }
}

import ItsMePrimitives
import ItsMeRelayProtocol
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore

/// The room driver against a room played in memory as the relay plays it
/// (docs/PROTOCOL.md 15.3): events as the relay writes them, each side's
/// frames forwarded in order, a side's last frames before its `peer-left`.
final class RoomSessionTests: XCTestCase {
    private let t0: Int64 = 1_800_000_000
    private var directory = ""

    override func setUpWithError() throws {
        try Sodium.initialize()
        directory = NSTemporaryDirectory() + "room-session-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private enum Input {
        case text(String)
        case binary([UInt8])
        case closed(Int?)
    }

    /// The relay's room: an inbox per side.
    private final class Room {
        var inbox: [[Input]] = [[], []]
        var left = [false, false]

        func join(_ side: Int) {
            if side == 0 {
                inbox[0].append(.text(RoomEvent.waiting.json))
            } else {
                inbox[0].append(.text(RoomEvent.peerJoined(slot: nil).json))
                inbox[1].append(.text(RoomEvent.peerJoined(slot: nil).json))
            }
        }

        func send(_ side: Int, _ bytes: [UInt8]) -> Bool {
            guard !left[1 - side] else { return false }
            inbox[1 - side].append(.binary(bytes))
            return true
        }

        func leave(_ side: Int) {
            guard !left[side] else { return }
            left[side] = true
            if !left[1 - side] {
                inbox[1 - side].append(.text(RoomEvent.peerLeft(slot: nil).json))
                inbox[1 - side].append(.closed(RoomCloseCode.normal))
            }
        }
    }

    private func person(_ name: String) throws -> (Identity, ContactStore) {
        var random = DeterministicRandom(seed: SHA256.hash(Array(name.utf8)))
        let identity = try Identity.create(store: MemorySecretStore(), name: name, random: &random)
        return (identity, try ContactStore(path: directory + "/\(name).db", identity: identity))
    }

    private func realtimePair() throws -> (Exchange, Exchange, ContactStore, ContactStore) {
        let (a, sa) = try person("Alice"), (b, sb) = try person("Bob")
        var ra = DeterministicRandom(seed: SHA256.hash(Array("room-a".utf8)))
        var rb = DeterministicRandom(seed: SHA256.hash(Array("room-b".utf8)))
        let xa = try Exchange.invite(identity: a, store: sa, realtime: true, now: t0, random: &ra)
        let xb = try Exchange.acceptInvite(
            identity: b, store: sb, inviteCode: xa.inviteCode!.text, encryptionCode: xa.encryptionCode!.text, realtime: true,
            now: t0, random: &rb)
        return (xa, xb, sa, sb)
    }

    /// Steps both sessions until both are done; `decide[i]` answers side
    /// i's `.decide` (nil: that side never gets there). `tamper` changes
    /// the n-th frame side 1 sends. Returns the steps each took.
    @discardableResult
    private func run(
        _ sessions: [RoomSession], _ exchanges: [Exchange?], room: Room = Room(), decide: [Bool?] = [true, true],
        tamper: Int? = nil, thrown: inout [Error?]
    ) throws -> [[RoomSession.Step]] {
        var steps: [[RoomSession.Step]] = [[], []]
        var sentBySide1 = 0
        room.join(0)
        room.join(1)
        var idle = 0
        var done = [false, false]
        while done != [true, true], idle < 4 {
            var moved = false
            for side in 0..<2 where !done[side] {
                let session = sessions[side]
                let step: RoomSession.Step
                do { step = try session.next(now: t0 + 1) } catch { thrown[side] = error; continue }
                if step != .receive || !room.inbox[side].isEmpty, step != .done { steps[side].append(step) }
                switch step {
                case .send(var bytes):
                    if side == 1 {
                        sentBySide1 += 1
                        if sentBySide1 == tamper { bytes[bytes.count - 1] ^= 1 }
                    }
                    if room.send(side, bytes) { try session.sent() } else { try session.sendFailed() }
                    moved = true
                case .receive:
                    guard !room.inbox[side].isEmpty else { continue }
                    switch room.inbox[side].removeFirst() {
                    case .text(let text): session.event(text: Array(text.utf8))
                    case .binary(let bytes):
                        do { try session.frame(bytes, now: t0 + 1) } catch { thrown[side] = error }
                    case .closed(let code): session.closed(code: code)
                    }
                    moved = true
                case .decide:
                    let exchange = exchanges[side]!
                    if decide[side]! { _ = try exchange.confirm(now: t0 + 1) } else { try exchange.reject() }
                    moved = true
                case .leave:
                    room.leave(side)
                    try session.left()
                    moved = true
                case .checkPeer, .rejoin:
                    XCTFail("an exchange or Online Verify session neither checks nor rejoins")
                    done[side] = true
                case .done:
                    done[side] = true
                }
            }
            idle = moved ? 0 : idle + 1
        }
        return steps
    }

    func testARealTimeExchangeRunsToBothDecisions() throws {
        let (xa, xb, sa, sb) = try realtimePair()
        let a = try RoomSession(exchange: xa), b = try RoomSession(exchange: xb)
        XCTAssertEqual(a.roomID, b.roomID)
        XCTAssertEqual(a.path, "/v1/rooms/\(a.roomID)")
        var thrown: [Error?] = [nil, nil]
        let steps = try run([a, b], [xa, xb], thrown: &thrown)
        XCTAssertNil(thrown[0] ?? thrown[1])
        XCTAssertEqual(xa.state, .confirmed)
        XCTAssertEqual(xb.state, .confirmed)
        XCTAssertEqual(try sa.contact(id: xa.contactID!).state, .verified)
        XCTAssertEqual(try sb.contact(id: xb.contactID!).state, .verified)
        XCTAssertNil(a.failure)
        XCTAssertNil(b.failure)
        XCTAssertEqual(steps[0].filter { $0 == .decide }.count, 1)
        XCTAssertEqual(steps[0].last, .leave)
        XCTAssertEqual(try a.next(now: t0), .done)
    }

    func testARejectionOnEitherSideRejectsBoth() throws {
        let (xa, xb, sa, sb) = try realtimePair()
        var thrown: [Error?] = [nil, nil]
        try run([try RoomSession(exchange: xa), try RoomSession(exchange: xb)], [xa, xb], decide: [true, false], thrown: &thrown)
        XCTAssertEqual(xa.state, .rejected)
        XCTAssertEqual(xb.state, .rejected)
        XCTAssertEqual(try sa.list().count, 0, "the contact saved at the SAS is gone")
        XCTAssertEqual(try sb.list().count, 0)
    }

    func testAFrameTheExchangeRefusesFailsItAndLeavesSoThePeerFailsToo() throws {
        let (xa, xb, sa, _) = try realtimePair()
        let a = try RoomSession(exchange: xa), b = try RoomSession(exchange: xb)
        var thrown: [Error?] = [nil, nil]
        try run([a, b], [xa, xb], tamper: 1, thrown: &thrown)
        XCTAssertNotNil(thrown[0], "the inviter refused the tampered frame")
        XCTAssertEqual(xa.state, .failed)
        XCTAssertEqual(b.failure, .peerLeft)
        XCTAssertEqual(xb.state, .rejected)
        XCTAssertEqual(try sa.list().count, 0)
    }

    func testThePeerLeavingBeforeItsDecisionCountsAsNone() throws {
        let (xa, xb, sa, _) = try realtimePair()
        let a = try RoomSession(exchange: xa), b = try RoomSession(exchange: xb)
        let room = Room()
        // Bob never decides: he leaves at the SAS.
        var steps = 0
        room.join(0)
        room.join(1)
        while try a.next(now: t0 + 1) != .done, steps < 200 {
            steps += 1
            for (side, session) in [(0, a), (1, b)] {
                let step = try session.next(now: t0 + 1)
                switch step {
                case .send(let bytes): _ = room.send(side, bytes); try session.sent()
                case .receive:
                    guard !room.inbox[side].isEmpty else { continue }
                    switch room.inbox[side].removeFirst() {
                    case .text(let text): session.event(text: Array(text.utf8))
                    case .binary(let bytes): try session.frame(bytes, now: t0 + 1)
                    case .closed(let code): session.closed(code: code)
                    }
                case .decide:
                    if side == 0 { _ = try xa.confirm(now: t0 + 1) } else { room.leave(1) }
                case .leave: room.leave(side); try session.left()
                case .checkPeer, .rejoin: XCTFail("an exchange neither checks nor rejoins")
                case .done: break
                }
            }
        }
        XCTAssertEqual(xa.state, .rejected, "no decision came from Bob")
        XCTAssertNil(a.failure, "the exchange's state says it")
        XCTAssertEqual(try sa.list().count, 0, "the contact saved at the SAS is deleted")
    }

    func testARoomThatFailsBeforeTheSASRejectsTheExchangeAndSaysHow() throws {
        for (name, end, expected) in [
            ("full", { (s: RoomSession) in s.closed(code: RoomCloseCode.roomFull) }, RoomSession.Failure.roomFull),
            ("idle", { $0.closed(code: RoomCloseCode.idle) }, .closed(code: 4000)),
            ("broken", { $0.closed(code: nil) }, .closed(code: nil)),
            ("deadline", { $0.timedOut() }, .timeout),
            ("not an event", { $0.event(text: Array("{\"kind\":1}".utf8)) }, .badResponse("the relay sent a text frame that is not a room's event")),
            ("group event", { $0.event(text: Array(RoomEvent.peerJoined(slot: 2).json.utf8)) }, .badResponse("the relay sent a group room's event in a room")),
        ] as [(String, (RoomSession) -> Void, RoomSession.Failure)] {
            let (xa, _, _, _) = try realtimePair()
            let a = try RoomSession(exchange: xa)
            XCTAssertEqual(try a.next(now: t0), .receive, name)
            a.event(text: Array(RoomEvent.waiting.json.utf8))
            end(a)
            XCTAssertEqual(a.failure, expected, name)
            XCTAssertEqual(xa.state, .rejected, name)
            XCTAssertEqual(try a.next(now: t0), .leave, name)
            XCTAssertEqual(try a.next(now: t0), .leave, name)
            try a.left()
            XCTAssertEqual(try a.next(now: t0), .done, name)
            XCTAssertThrowsError(try a.left(), name)
        }
        // A frame before the peer joined: no relay forwards one.
        let (xa, _, _, _) = try realtimePair()
        let a = try RoomSession(exchange: xa)
        try a.frame([1, 2, 3], now: t0)
        XCTAssertEqual(a.failure, .badResponse("a frame arrived before the peer joined"))
        XCTAssertEqual(RoomSession.Failure.peerLeft.kind, "peer-left")
        XCTAssertEqual(RoomSession.Failure.roomFull.kind, "room-full")
        XCTAssertEqual(RoomSession.Failure.refused(reason: "no-peer").kind, "refused")
    }

    func testThePeerLeavingOrARefusalBeforeTheSASEndsTheRoom() throws {
        for event in [RoomEvent.peerLeft(slot: nil), .refused(reason: RoomEvent.noPeer)] {
            let (xa, _, _, _) = try realtimePair()
            let a = try RoomSession(exchange: xa)
            a.event(text: Array(RoomEvent.peerJoined(slot: nil).json.utf8))
            guard case .send = try a.next(now: t0) else { return XCTFail("the inviter sends once the peer is in") }
            try a.sent()
            a.event(text: Array(event.json.utf8))
            XCTAssertEqual(a.failure, event == .peerLeft(slot: nil) ? .peerLeft : .refused(reason: "no-peer"))
            XCTAssertEqual(xa.state, .rejected)
        }
    }

    func testAStepIsAskedAgainUntilDone() throws {
        let (xa, _, _, _) = try realtimePair()
        let a = try RoomSession(exchange: xa)
        XCTAssertThrowsError(try a.sent())
        a.event(text: Array(RoomEvent.peerJoined(slot: nil).json.utf8))
        let first = try a.next(now: t0)
        XCTAssertEqual(try a.next(now: t0), first, "the same message until it is sent")
        try a.sent()
        XCTAssertEqual(try a.next(now: t0), .receive)
        XCTAssertThrowsError(try a.sendFailed())
        let (carol, store) = try person("Carol")
        var random = DeterministicRandom(seed: [UInt8](repeating: 7, count: 32))
        XCTAssertThrowsError(try RoomSession(exchange: Exchange.qr(identity: carol, store: store, now: t0, random: &random)))
    }

    func testAnOnlineVerifySessionRunsToItsSAS() throws {
        let (a, b) = try exchangedPair(in: directory, label: "room-ov", now: t0)
        let now = t0 + 600
        var ra = DeterministicRandom(seed: SHA256.hash(Array("ov-a".utf8)))
        var rb = DeterministicRandom(seed: SHA256.hash(Array("ov-b".utf8)))
        let window = VoiceProtocol.window(now)
        let va = try OnlineVerify(store: a.store, contactID: a.contactID, window: window, now: now, random: &ra)
        let vb = try OnlineVerify(store: b.store, contactID: b.contactID, window: window, now: now, random: &rb)
        let sa = RoomSession(onlineVerify: va), sb = RoomSession(onlineVerify: vb)
        XCTAssertEqual(sa.roomID, va.roomName)
        var thrown: [Error?] = [nil, nil]
        let steps = try run([sa, sb], [nil, nil], decide: [nil, nil], thrown: &thrown)
        XCTAssertNil(thrown[0] ?? thrown[1])
        XCTAssertEqual(va.state, .compareSAS)
        XCTAssertEqual(vb.state, .compareSAS)
        XCTAssertEqual(va.sas, vb.sas)
        XCTAssertFalse(steps[0].contains(.decide), "Online Verify's decision needs no room")
        // A session whose room failed is rejected.
        var rc = DeterministicRandom(seed: SHA256.hash(Array("ov-c".utf8)))
        let vc = try OnlineVerify(store: a.store, contactID: a.contactID, window: window, now: now, random: &rc)
        let sc = RoomSession(onlineVerify: vc, peerPresent: true)
        guard case .send = try sc.next(now: now) else { return XCTFail("a present peer gets the first message") }
        try sc.sendFailed()
        XCTAssertEqual(sc.failure, .closed(code: nil))
        XCTAssertEqual(vc.state, .rejected)
    }

    // MARK: A live device transfer

    private func transferPair(_ label: String) throws -> (receiver: DeviceTransfer, sender: DeviceTransfer, identity: Identity) {
        let (alice, _) = try person("Alice-\(label)")
        try PIN(store: alice.store, parameters: Argon2id.Parameters(opsLimit: 1, memLimit: 8192)).set("246810")
        var rr = DeterministicRandom(seed: SHA256.hash(Array("rx-\(label)".utf8)))
        var rs = DeterministicRandom(seed: SHA256.hash(Array("tx-\(label)".utf8)))
        let receiver = try DeviceTransfer(receiverAt: t0, random: &rr)
        let sender = try DeviceTransfer(sending: alice, pin: "246810", offer: receiver.offerText, now: t0, random: &rs)
        return (receiver, sender, alice)
    }

    /// Steps a transfer's two sessions (side 0 the new device, which joins
    /// first; side 1 the old one) until both are done. `decide[i]` answers
    /// side i's `.decide`; `after` makes that side wait for the other to be
    /// done before deciding. `.checkPeer` reads what is there, then times out.
    @discardableResult
    private func runTransfer(
        _ sessions: [RoomSession], _ transfers: [DeviceTransfer], room: Room = Room(), decide: [Bool] = [true, true],
        after: Int? = nil
    ) throws -> [[RoomSession.Step]] {
        var steps: [[RoomSession.Step]] = [[], []]
        room.join(0)
        room.join(1)
        var done = [false, false]
        var idle = 0
        while done != [true, true], idle < 4 {
            var moved = false
            for side in 0..<2 where !done[side] {
                let session = sessions[side]
                let step = try session.next(now: t0 + 1)
                if step == .decide, side == after, !done[1 - side] { continue }
                if step != .receive || !room.inbox[side].isEmpty, step != .done { steps[side].append(step) }
                switch step {
                case .send(let bytes):
                    if room.send(side, bytes) { try session.sent() } else { try session.sendFailed() }
                    moved = true
                case .receive, .checkPeer:
                    guard !room.inbox[side].isEmpty else {
                        if step == .checkPeer {
                            session.timedOut()
                            moved = true
                        }
                        continue
                    }
                    switch room.inbox[side].removeFirst() {
                    case .text(let text): session.event(text: Array(text.utf8))
                    case .binary(let bytes): try session.frame(bytes, now: t0 + 1)
                    case .closed(let code): session.closed(code: code)
                    }
                    moved = true
                case .decide:
                    if decide[side] { try transfers[side].confirm(now: t0 + 1) } else { try transfers[side].reject() }
                    moved = true
                case .rejoin:
                    XCTFail("no quiet room here")
                case .leave:
                    room.leave(side)
                    try session.left()
                    moved = true
                case .done:
                    done[side] = true
                }
            }
            idle = moved ? 0 : idle + 1
        }
        XCTAssertEqual(done, [true, true], "both sessions end")
        return steps
    }

    func testALiveTransferRunsThroughTheRoom() throws {
        let (receiver, sender, alice) = try transferPair("ok")
        let sessions = [RoomSession(transfer: receiver), RoomSession(transfer: sender)]
        XCTAssertEqual(sessions[0].roomID, receiver.roomName)
        XCTAssertEqual(sessions[1].path, RelayPath.room(sender.roomName).text)
        let steps = try runTransfer(sessions, [receiver, sender])
        XCTAssertNil(sessions[0].failure ?? sessions[1].failure)
        XCTAssertEqual(receiver.state, .done)
        XCTAssertEqual(sender.state, .done)
        XCTAssertTrue(steps[1].contains(.checkPeer), "the old device checks that the new one is there before sending")
        XCTAssertFalse(steps[0].contains(.checkPeer))
        let contents = try receiver.takeIdentity()
        XCTAssertEqual(contents.name, alice.name)
    }

    func testANewDeviceThatRejectedAndLeftGetsNothing() throws {
        let (receiver, sender, _) = try transferPair("rx-rejects")
        let room = Room()
        let sessions = [RoomSession(transfer: receiver), RoomSession(transfer: sender)]
        // The new device rejects and leaves while the old one's person still compares.
        try runTransfer(sessions, [receiver, sender], room: room, decide: [false, true], after: 1)
        XCTAssertEqual(receiver.state, .rejected)
        XCTAssertNil(sessions[0].failure)
        XCTAssertEqual(sessions[1].failure, .peerLeft, "the old device's check finds the new one gone")
        XCTAssertNil(sessions[1].pendingMessage)
        XCTAssertTrue(room.inbox[0].allSatisfy { if case .binary = $0 { false } else { true } }, "no identity went out")
    }

    func testAnOldDeviceThatRejectedSendsNothingAndTheNewOneSaysSo() throws {
        let (receiver, sender, _) = try transferPair("tx-rejects")
        let sessions = [RoomSession(transfer: receiver), RoomSession(transfer: sender)]
        try runTransfer(sessions, [receiver, sender], decide: [true, false], after: 0)
        XCTAssertEqual(sender.state, .rejected)
        XCTAssertNil(sessions[1].failure)
        XCTAssertEqual(sessions[0].failure, .peerLeft, "the identity never came")
        XCTAssertEqual(receiver.state, .rejected, "the new device's transfer ends")
        XCTAssertThrowsError(try { _ = try receiver.takeIdentity() }())
    }

    func testANewDeviceWaitingAloneJoinsAQuietRoomAgain() throws {
        let (receiver, _, _) = try transferPair("quiet")
        let session = RoomSession(transfer: receiver)
        XCTAssertEqual(try session.next(now: t0), .receive)
        session.event(text: Array(RoomEvent.waiting.json.utf8))
        XCTAssertThrowsError(try session.rejoined(), "not before the room closed")
        session.closed(code: RoomCloseCode.idle)
        XCTAssertEqual(try session.next(now: t0), .rejoin)
        XCTAssertEqual(try session.next(now: t0), .rejoin, "asked again: the same step")
        XCTAssertFalse(session.peerPresent)
        try session.rejoined()
        XCTAssertEqual(try session.next(now: t0), .receive)
        XCTAssertNil(session.failure)
        // The deadline passing while joining again ends it.
        session.closed(code: RoomCloseCode.idle)
        session.timedOut()
        XCTAssertEqual(session.failure, .timeout)
        XCTAssertEqual(try session.next(now: t0), .leave)
        XCTAssertEqual(receiver.state, .rejected)
        // A full room is not joined again.
        let (other, _, _) = try transferPair("full")
        let full = RoomSession(transfer: other)
        full.closed(code: RoomCloseCode.roomFull)
        XCTAssertEqual(full.failure, .roomFull)
        XCTAssertEqual(try full.next(now: t0), .leave)
    }

    func testAFrameTheNewDeviceRefusesEndsTheTransfer() throws {
        let (receiver, sender, _) = try transferPair("tamper")
        let session = RoomSession(transfer: receiver)
        session.event(text: Array(RoomEvent.peerJoined(slot: nil).json.utf8))
        var key = try XCTUnwrap(sender.peekOutgoing())
        key[key.count - 1] ^= 1
        XCTAssertThrowsError(try session.frame(Array(key.prefix(3)), now: t0 + 1))
        XCTAssertEqual(try session.next(now: t0 + 1), .leave)
        XCTAssertEqual(receiver.state, .failed)
    }
}

import Foundation
import ItsMeKit
import ItsMeRelayProtocol

/// Carries `session` through `room` until it is done: the host's side of
/// the core's room driver (`RoomSession`, docs/PROTOCOL.md 16.5), which
/// holds every rule; this moves the bytes, keeps the time and pings while
/// people decide. `decide` answers `.decide`. A frame the flow refuses is
/// thrown (the room is left, so the peer fails too); a room that failed is
/// thrown as `RelayError`.
private func drive(
    _ session: RoomSession, in joined: RelayRoom, url: RelayURL, deadline: Deadline, pingInterval: Double, now: () -> Int64,
    decide: () async throws -> Void = {}
) async throws {
    var room = joined
    var pinger: Task<Void, Never>?
    defer { pinger?.cancel() }
    // The connection's own account of its end, more precise than the
    // session's ("connection" with the TLS failure, say).
    var ended: RelayError?
    do {
        while true {
            let step = try session.next(now: now())
            switch step {
            case .send(let message):
                do {
                    try await room.send(message)
                    try session.sent()
                } catch let error as RelayError {
                    ended = ended ?? error
                    try session.sendFailed()
                }
            case .receive, .checkPeer:
                // `.checkPeer` reads for a moment only; its time out means the peer is there.
                let wait = step == .checkPeer ? min(Double(RoomSession.peerCheckWait) / 1000, deadline.remaining) : deadline.remaining
                switch try await room.nextInput(timeout: wait) {
                case nil: session.timedOut()
                case .text(let text)?: session.event(text: text)
                case .binary(let bytes)?: try session.frame(bytes, now: now())
                case .ended(let code, let error)?:
                    ended = ended ?? error
                    session.closed(code: code)
                }
            case .rejoin:
                await room.close()
                try await Task.sleep(nanoseconds: UInt64(RoomSession.rejoinPause) * 1_000_000)
                if deadline.hasPassed {
                    session.timedOut()
                    continue
                }
                room = try await RelayRoom.join(url, roomID: session.roomID, timeout: deadline.remaining)
                try session.rejoined()
            case .decide:
                if pinger == nil {
                    let pinged = room
                    pinger = Task {
                        while !Task.isCancelled {
                            try? await Task.sleep(nanoseconds: UInt64(pingInterval * 1e9))
                            if Task.isCancelled { break }
                            try? await pinged.ping()
                        }
                    }
                }
                try await decide()
            case .leave:
                await room.close()
                try session.left()
            case .done:
                if let failure = session.failure { throw ended ?? RelayError(failure.message, kind: failure.kind) }
                return
            }
        }
    } catch {
        if session.failure == nil { session.abandon() }
        await room.close()
        throw error
    }
}

/// Runs a real-time exchange (`Exchange.invite(..., realtime: true, ...)`
/// or `Exchange.acceptInvite(..., realtime: true, ...)`) through the relay
/// room `Exchange.relayID` to the end, both decisions included
/// (docs/PROTOCOL.md 8.1, 16.5). Both sides call it while on a call; the
/// inviter sends its INVITE once the other person is in the room. When the
/// SAS is ready the contact is saved in the exchange's store and `decide` is asked (the person compares the SAS
/// on the call; true: it matches) while the room is pinged every
/// `pingInterval` seconds so that it does not close as idle; this side's
/// decision is sent (`Exchange.confirm` or `reject`) and the
/// peer's awaited, still pinging; then `Exchange.settle` applies it. The
/// room is left once both decisions passed. A `peer-left` (or a closed
/// room) before the peer's decision counts as none: the exchange is
/// rejected. Returns the final state: `.confirmed` (the contact is
/// verified) or `.rejected`.
///
/// `timeout` (seconds) bounds the whole run; `now` gives the Unix time.
/// Throws the library's `ItsMeError` when a frame is refused before the SAS
/// (the room is left, so the peer fails too), and `RelayError`
/// (`"peer-left"`, `"timeout"`, ...) when the room fails before the SAS,
/// after rejecting the exchange. A room that cannot be joined at all
/// (`"connection"`) leaves the exchange as it was: try again.
@discardableResult
public func realtimeExchange(
    _ url: RelayURL, exchange: Exchange, timeout: Double = 300, pingInterval: Double = Double(RoomSession.pingInterval),
    now: @escaping () -> Int64, decide: (Exchange) async throws -> Bool
) async throws -> Exchange.State {
    let session = try RoomSession(exchange: exchange)
    let deadline = Deadline(seconds: try Checks.seconds(timeout, "timeout"))
    let room = try await RelayRoom.join(url, roomID: session.roomID, timeout: deadline.remaining)
    try await drive(session, in: room, url: url, deadline: deadline, pingInterval: pingInterval, now: now) {
        if try await decide(exchange) { try exchange.confirm(now: now()) } else { try exchange.reject() }
    }
    return exchange.state
}

/// Runs a live device transfer (docs/PROTOCOL.md 17.3) through its relay
/// room (`DeviceTransfer.roomName`), on either device, by the core's room
/// driver: the old device sends its key once the new one is in the room;
/// when both keys are known `decide` is asked (the person compares the SAS;
/// true: it matches) while the room is pinged, and the transfer is
/// confirmed or rejected; the old device then checks that the new one is
/// still there, sends the identity and leaves; the new device takes it and
/// leaves. A room closed while this side waits alone is joined again.
/// Returns the transfer's state (`.done`: sent, or ready to install with
/// `DeviceTransfer.takeIdentity`; `.rejected`).
///
/// `timeout` (seconds) bounds the whole run; `now` gives the Unix time.
/// Throws the library's `ItsMeError` for a message the transfer refused,
/// and `RelayError` (`"peer-left"`, `"timeout"`, ...) when the room ended
/// the transfer first: nothing was sent or installed.
@discardableResult
public func liveTransfer(
    _ url: RelayURL, transfer: DeviceTransfer, timeout: Double = Double(DeviceTransfer.lifetime),
    pingInterval: Double = Double(RoomSession.pingInterval), now: @escaping () -> Int64,
    decide: (DeviceTransfer) async throws -> Bool
) async throws -> DeviceTransfer.State {
    let session = RoomSession(transfer: transfer)
    let deadline = Deadline(seconds: try Checks.seconds(timeout, "timeout"))
    let room = try await RelayRoom.join(url, roomID: session.roomID, timeout: deadline.remaining)
    try await drive(session, in: room, url: url, deadline: deadline, pingInterval: pingInterval, now: now) {
        if try await decide(transfer) { try transfer.confirm(now: now()) } else { try transfer.reject() }
    }
    return transfer.state
}

/// Runs an Online Verify session through its relay room
/// (`OnlineVerify.roomName`, or `room`, already joined) until both proofs
/// are checked, and leaves the room; returns the state (`.compareSAS`: both
/// read the SAS aloud, then `OnlineVerify.confirm` or `reject`).
///
/// `timeout` (seconds) bounds the whole run; `now` gives the Unix time
/// passed to `OnlineVerify.receive`. Throws the library's `ItsMeError` when
/// a message is refused (the room is left, so the peer fails too), and
/// `RelayError` when the room fails (the session is then rejected: start a
/// new one).
@discardableResult
public func onlineVerify(
    _ url: RelayURL, session: OnlineVerify, room: RelayRoom? = nil, timeout: Double = 60, now: @escaping () -> Int64
) async throws -> OnlineVerify.State {
    let deadline = Deadline(seconds: try Checks.seconds(timeout, "timeout"))
    let driver = RoomSession(onlineVerify: session, peerPresent: room?.peerPresent ?? false)
    let joined: RelayRoom
    if let room { joined = room } else { joined = try await RelayRoom.join(url, roomID: driver.roomID, timeout: deadline.remaining) }
    try await drive(driver, in: joined, url: url, deadline: deadline, pingInterval: Double(RoomSession.pingInterval), now: now)
    return session.state
}

/// Online Verify with contact `contactID` by the room rule of
/// docs/PROTOCOL.md 11.1 (the library's `OnlineVerifyRendezvous`), run
/// until the SAS: joins the room of the current window and, finding no peer
/// there, also the one of the window before; the session of the room where
/// the two meet goes on, the other is left. Returns that session (state
/// `.compareSAS`, or `.bindingDiffers` or `.otherCall` when the two devices
/// are bound differently, PROTOCOL.md 11.4).
///
/// `now` (Unix seconds) picks the window and is passed to the session.
/// `binding` binds both sessions to the host's own call (16 to 64 bytes,
/// `OnlineVerify`). `timeout` (seconds) bounds the whole run. `prepare` is called on each
/// session as it is made, before any message is fed to it (to share a
/// profile reference: `OnlineVerify.shareProfile`). Throws `RelayError`
/// (`"timeout"` if nobody came), or the library's `ItsMeError` for a
/// refused message.
public func startOnlineVerify(
    _ url: RelayURL, store: ContactStore, contactID: Int64, binding: [UInt8]? = nil, timeout: Double = 60,
    now: @escaping () -> Int64, prepare: (OnlineVerify) throws -> Void = { _ in }
) async throws -> OnlineVerify {
    let deadline = Deadline(seconds: try Checks.seconds(timeout, "timeout"))
    var random = SystemRandom()
    let rendezvous = try OnlineVerifyRendezvous(store: store, contactID: contactID, binding: binding, now: now(), random: &random)
    for candidate in rendezvous.candidates { try prepare(candidate.session) }
    var joined: [(name: String, room: RelayRoom)] = []
    func closeAll() async {
        for entry in joined { await entry.room.close() }
    }
    do {
        // Each room's first event says whether the peer is there already.
        while rendezvous.chosen == nil, let name = rendezvous.roomsToJoin.first(where: { n in !joined.contains { $0.name == n } }) {
            let room = try await RelayRoom.join(url, roomID: name, timeout: deadline.remaining)
            joined.append((name, room))
            if try await room.nextEvent(timeout: deadline.remaining) == .peerJoined {
                try rendezvous.peerJoined(in: name)
            } else {
                rendezvous.alone(in: name)
            }
        }
        while rendezvous.chosen == nil {
            if deadline.hasPassed { throw RelayError.timeout("nobody joined the room in time") }
            for entry in joined {
                let event: RoomEvent
                do {
                    event = try await entry.room.nextEvent(timeout: min(0.05, deadline.remaining))
                } catch let error as RelayError where error.kind == "timeout" {
                    continue
                }
                if event == .peerJoined {
                    try rendezvous.peerJoined(in: entry.name)
                    break
                }
            }
        }
        guard let session = rendezvous.chosen, let room = joined.first(where: { rendezvous.roomsToJoin.contains($0.name) })?.room else {
            throw RelayError.timeout("nobody joined the room in time")
        }
        try await onlineVerify(url, session: session, room: room, timeout: deadline.remaining, now: now)
        await closeAll()
        return session
    } catch {
        await closeAll()
        throw error
    }
}

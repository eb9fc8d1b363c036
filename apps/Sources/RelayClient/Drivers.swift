import Foundation
import ItsMeKit
import ItsMeRelayProtocol

/// A state machine carried through a room: an exchange or an Online Verify
/// session.
private struct RoomMachine {
    let peekOutgoing: () -> [UInt8]?
    let markSent: () -> Void
    let receive: ([UInt8], Int64) throws -> Void
    let isRunning: () -> Bool
}

/// Sends what `machine` has, feeds it every frame, until it is no longer
/// running; then sends what is left. A refused frame leaves the room (the
/// peer sees `peer-left`) and is thrown; a relay failure calls `onFailure`
/// and is thrown.
private func runInRoom(
    _ room: RelayRoom, _ machine: RoomMachine, _ deadline: Deadline, _ now: () -> Int64, onFailure: () -> Void
) async throws {
    func flush() async throws {
        while let message = machine.peekOutgoing() {
            try await room.send(message)
            machine.markSent()
        }
    }
    do {
        try await room.waitForPeer(timeout: deadline.remaining)
        try await flush()
        while machine.isRunning() {
            let frame = try await room.receive(timeout: deadline.remaining)
            do {
                try machine.receive(frame, now())
            } catch {
                await room.close()
                throw error
            }
            try await flush()
        }
    } catch let error as RelayError {
        onFailure()
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
    _ url: RelayURL, exchange: Exchange, timeout: Double = 300, pingInterval: Double = 30,
    now: @escaping () -> Int64, decide: (Exchange) async throws -> Bool
) async throws -> Exchange.State {
    guard exchange.method == .realtime, let id = exchange.relayID else {
        throw ItsMeError(.invalidArgument, "realtimeExchange carries a real-time exchange (an invite goes through the mailbox)")
    }
    let deadline = Deadline(seconds: try Checks.seconds(timeout, "timeout"))
    let room = try await RelayRoom.join(url, roomID: try Checks.hex(id), timeout: deadline.remaining)
    let machine = RoomMachine(
        peekOutgoing: exchange.peekOutgoing, markSent: exchange.markSent,
        receive: { try exchange.receive($0, now: $1) }, isRunning: { exchange.state == .awaitingPeer })
    func peerDecided() -> Bool { !exchange.flags.isDisjoint(with: [.peerConfirmed, .peerRejected]) }
    var pinger: Task<Void, Never>?
    defer { pinger?.cancel() }
    do {
        try await runInRoom(room, machine, deadline, now, onFailure: { InviteSession.giveUp(exchange) })
        guard exchange.state == .compareSAS else {
            await room.close()
            return exchange.state
        }
        // From here a person decides, and the peer's person too: ping.
        pinger = Task {
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(pingInterval * 1e9))
                if Task.isCancelled { break }
                try? await room.ping()
            }
        }
        _ = try exchange.save(now: now())
        if try await decide(exchange) { try exchange.confirm(now: now()) } else { try exchange.reject() }
        do {
            while let message = exchange.peekOutgoing() {
                try await room.send(message)
                exchange.markSent()
            }
        } catch is RelayError {
            // The peer decided and left first: what it sent is still to read.
        }
        // Both stay until both decisions passed (PROTOCOL.md 16.5).
        while !peerDecided(), exchange.state == .awaitingDecision || exchange.state == .rejected {
            let frame: [UInt8]
            do {
                frame = try await room.receive(timeout: deadline.remaining)
            } catch let error as RelayError where error.kind != "timeout" || exchange.state == .rejected {
                // The peer left (or the room closed) before its decision:
                // none came. Confirmed here, that deletes the contact.
                if exchange.state == .awaitingDecision { try exchange.reject() }
                break
            }
            do { try exchange.receive(frame, now: now()) } catch { continue }
        }
        if exchange.state == .awaitingDecision, peerDecided() { _ = try exchange.settle(now: now()) }
    } catch {
        if exchange.state == .awaitingDecision || exchange.state == .compareSAS { try? exchange.reject() }
        await room.close()
        throw error
    }
    await room.close()
    return exchange.state
}

/// Runs an Online Verify session through its relay room
/// (`OnlineVerify.roomName`, or `room`, already joined and left open) until
/// both proofs are checked; returns the state (`.compareSAS`: both read the
/// SAS aloud, then `OnlineVerify.confirm` or `reject`).
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
    let owned = room == nil
    let joined: RelayRoom
    if let room { joined = room } else { joined = try await RelayRoom.join(url, roomID: session.roomName, timeout: deadline.remaining) }
    let machine = RoomMachine(
        peekOutgoing: session.peekOutgoing, markSent: session.markSent,
        receive: { try session.receive($0, now: $1) }, isRunning: { session.state == .running })
    do {
        try await runInRoom(joined, machine, deadline, now, onFailure: { stop(session) })
    } catch {
        if owned { await joined.close() }
        throw error
    }
    if owned { await joined.close() }
    return session.state
}

/// Rejects an Online Verify session that can no longer finish.
private func stop(_ session: OnlineVerify) {
    if session.state == .running || session.state == .compareSAS { try? session.reject() }
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

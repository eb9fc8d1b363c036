// Exported functions for the roll call (PROTOCOL.md 20), in the order of include/itsme.h.
import CItsMe
import ItsMeKit
import ItsMePrimitives

private func onRollCall(_ p: UnsafeRawPointer?, _ body: (RollCall) throws -> Void) -> itsme_result {
    onSession(p, "rollcall", body)
}

/// A relay slot of a group room: 1 to 65535 (its 2-byte prefix); 0 is no slot.
private func relaySlot(_ slot: UInt32) throws -> Int {
    guard slot >= 1, slot <= 0xFFFF else { throw invalid("a relay slot is 1 to 65535, not \(slot)") }
    return Int(slot)
}

@c(itsme_meeting_code_new)
public func ffiMeetingCodeNew(
    _ rng: UnsafeMutablePointer<itsme_random>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        // Nothing is drawn unless the code fits.
        let needed = UInt(ITSME_REMOTE_CODE_SIZE)
        guard cap >= needed else {
            outLen!.pointee = needed
            throw ItsMeError(.bufferTooSmall, "buffer of \(cap) bytes is too small: \(needed) needed")
        }
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        try writeText(RemoteCode.random(using: &random).text, to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_rollcall_new)
public func ffiRollCallNew(
    _ store: UnsafeMutablePointer<itsme_store>?, _ meetingCode: UnsafePointer<CChar>?,
    _ binding: UnsafePointer<UInt8>?, _ bindingLen: UInt, _ rng: UnsafeMutablePointer<itsme_random>?, _ now: Int64,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_rollcall>?>?
) -> itsme_result {
    newSession(store, out) { s in
        let code = try RemoteCode(
            parsing: try text(meetingCode, "meeting_code", max: TextLimit.typedCode), what: "meeting code")
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        return try RollCall(store: s, meetingCode: code, binding: try callBinding(binding, bindingLen), now: now, random: &random)
    }
}

@c(itsme_rollcall_free)
public func ffiRollCallFree(_ rollcall: UnsafeMutablePointer<itsme_rollcall>?) {
    release(rollcall, as: SessionHandle<RollCall>.self)
}

@c(itsme_rollcall_last_error)
public func ffiRollCallLastError(
    _ rollcall: UnsafePointer<itsme_rollcall>?, _ buf: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    sessionLastError(rollcall, RollCall.self, buf, cap, outLen)
}

@c(itsme_rollcall_status)
public func ffiRollCallStatus(
    _ rollcall: UnsafePointer<itsme_rollcall>?, _ outPhase: UnsafeMutablePointer<itsme_rollcall_phase>?
) -> itsme_result {
    onRollCall(rollcall) { r in try required(outPhase, "out_phase").pointee = r.phase.rawValue }
}

@c(itsme_rollcall_room)
public func ffiRollCallRoom(
    _ rollcall: UnsafePointer<itsme_rollcall>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onRollCall(rollcall) { r in try writeText(r.roomName, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_rollcall_next_outgoing)
public func ffiRollCallNextOutgoing(
    _ rollcall: UnsafeMutablePointer<itsme_rollcall>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onRollCall(rollcall) { r in try writeNextMessage(try r.peekOutgoing(), r.markSent, out, cap, outLen) }
}

@c(itsme_rollcall_joined)
public func ffiRollCallJoined(
    _ rollcall: UnsafeMutablePointer<itsme_rollcall>?, _ slot: UInt32, _ peers: UnsafePointer<UInt8>?, _ peerCount: UInt,
    _ now: Int64
) -> itsme_result {
    onRollCall(rollcall) { r in
        guard peerCount <= 0xFFFF else { throw invalid("a group room has at most 65535 slots, not \(peerCount)") }
        let list = peerCount == 0 ? [] : try bytes(peers, peerCount * UInt(ITSME_ROLLCALL_SLOT_BYTES), "peers")
        let slots = try stride(from: 0, to: list.count, by: 2).map { try relaySlot(UInt32(list[$0]) << 8 | UInt32(list[$0 + 1])) }
        try r.joined(slot: try relaySlot(slot), peers: slots, now: now)
    }
}

@c(itsme_rollcall_receive)
public func ffiRollCallReceive(
    _ rollcall: UnsafeMutablePointer<itsme_rollcall>?, _ bytesIn: UnsafePointer<UInt8>?, _ len: UInt, _ slot: UInt32,
    _ now: Int64
) -> itsme_result {
    onRollCall(rollcall) { r in
        let message = try bytes(bytesIn, len, "bytes")
        try r.receive(message, from: try relaySlot(slot), now: now)
    }
}

@c(itsme_rollcall_room_text)
public func ffiRollCallRoomText(
    _ rollcall: UnsafeMutablePointer<itsme_rollcall>?, _ text: UnsafePointer<UInt8>?, _ len: UInt, _ now: Int64
) -> itsme_result {
    onRollCall(rollcall) { r in try r.roomText(try bytes(text, len, "text"), now: now) }
}

@c(itsme_rollcall_room_binary)
public func ffiRollCallRoomBinary(
    _ rollcall: UnsafeMutablePointer<itsme_rollcall>?, _ frame: UnsafePointer<UInt8>?, _ len: UInt, _ now: Int64
) -> itsme_result {
    onRollCall(rollcall) { r in try r.roomBinary(try bytes(frame, len, "frame"), now: now) }
}

@c(itsme_rollcall_peer_joined)
public func ffiRollCallPeerJoined(_ rollcall: UnsafeMutablePointer<itsme_rollcall>?, _ slot: UInt32, _ now: Int64)
    -> itsme_result
{
    onRollCall(rollcall) { r in try r.peerJoined(slot: try relaySlot(slot), now: now) }
}

@c(itsme_rollcall_peer_left)
public func ffiRollCallPeerLeft(_ rollcall: UnsafeMutablePointer<itsme_rollcall>?, _ slot: UInt32, _ now: Int64)
    -> itsme_result
{
    onRollCall(rollcall) { r in try r.peerLeft(slot: try relaySlot(slot), now: now) }
}

@c(itsme_rollcall_tick)
public func ffiRollCallTick(_ rollcall: UnsafeMutablePointer<itsme_rollcall>?, _ now: Int64) -> itsme_result {
    onRollCall(rollcall) { r in try r.tick(now: now) }
}

@c(itsme_rollcall_head_count)
public func ffiRollCallHeadCount(
    _ rollcall: UnsafePointer<itsme_rollcall>?, _ outCount: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onRollCall(rollcall) { r in try required(outCount, "out_count").pointee = UInt(r.headCount) }
}

@c(itsme_rollcall_split)
public func ffiRollCallSplit(_ rollcall: UnsafePointer<itsme_rollcall>?, _ outSplit: UnsafeMutablePointer<Bool>?)
    -> itsme_result
{
    onRollCall(rollcall) { r in try required(outSplit, "out_split").pointee = r.isSplit }
}

@c(itsme_rollcall_roster)
public func ffiRollCallRoster(
    _ rollcall: UnsafePointer<itsme_rollcall>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onRollCall(rollcall) { r in try r.rosterHash.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) } }
}

@c(itsme_rollcall_confirm_roster)
public func ffiRollCallConfirmRoster(
    _ rollcall: UnsafeMutablePointer<itsme_rollcall>?, _ roster: UnsafePointer<UInt8>?, _ rosterLen: UInt,
    _ rng: UnsafeMutablePointer<itsme_random>?, _ now: Int64
) -> itsme_result {
    onRollCall(rollcall) { r in
        let hash = try bytes(roster, rosterLen, "roster")
        guard hash.count == Int(ITSME_ROLLCALL_ROSTER_BYTES) else {
            throw invalid("a roster is \(ITSME_ROLLCALL_ROSTER_BYTES) bytes, not \(rosterLen)")
        }
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        try r.confirmRoster(hash, now: now, random: &random)
    }
}

@c(itsme_rollcall_code)
public func ffiRollCallCode(
    _ rollcall: UnsafePointer<itsme_rollcall>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onRollCall(rollcall) { r in
        try checkOutput(out, cap, outLen)
        guard let code = r.myCode else {
            throw ItsMeError(.invalidState, "no code yet: the roster of this round is not confirmed")
        }
        try writeText(code, to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_rollcall_confirm_said)
public func ffiRollCallConfirmSaid(
    _ rollcall: UnsafeMutablePointer<itsme_rollcall>?, _ rng: UnsafeMutablePointer<itsme_random>?, _ now: Int64
) -> itsme_result {
    onRollCall(rollcall) { r in
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        try r.confirmSaid(now: now, random: &random)
    }
}

@c(itsme_rollcall_participant_count)
public func ffiRollCallParticipantCount(
    _ rollcall: UnsafePointer<itsme_rollcall>?, _ outCount: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onRollCall(rollcall) { r in try required(outCount, "out_count").pointee = UInt(r.participants.count) }
}

@c(itsme_rollcall_participant)
public func ffiRollCallParticipant(
    _ rollcall: UnsafePointer<itsme_rollcall>?, _ index: UInt,
    _ outParticipant: UnsafeMutablePointer<itsme_rollcall_participant_info>?
) -> itsme_result {
    onRollCall(rollcall) { r in
        let out = try required(outParticipant, "out_participant")
        try checkStructSize(out, "out_participant")
        let all = r.participants
        guard index < UInt(all.count) else { throw invalid("no participant \(index): the roll call has \(all.count)") }
        let p = all[Int(index)]
        out.pointee = itsme_rollcall_participant_info(
            size: out.pointee.size, index: p.index, slot: UInt32(clamping: p.slot ?? 0), contact_id: p.contactID ?? 0,
            state: p.state.rawValue, left: p.left, agrees: p.agrees)
    }
}

@c(itsme_rollcall_enter_heard)
public func ffiRollCallEnterHeard(
    _ rollcall: UnsafeMutablePointer<itsme_rollcall>?, _ index: UInt, _ code: UnsafePointer<CChar>?, _ now: Int64,
    _ outState: UnsafeMutablePointer<itsme_rollcall_state>?
) -> itsme_result {
    onRollCall(rollcall) { r in
        let out = try required(outState, "out_state")
        let heard = try text(code, "code", max: TextLimit.typedCode)
        out.pointee = try r.enterHeard(heard, from: Int(clamping: index), now: now).rawValue
    }
}

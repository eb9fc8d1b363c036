// Exported functions for Online Verify, in the order of include/itsme.h.
import CItsMe
import ItsMeKit
import ItsMePrimitives

private func onSession(_ p: UnsafeRawPointer?, _ body: (OnlineVerify) throws -> Void) -> itsme_result {
    ItsMeFFI.onSession(p, "session", body)
}

@c(itsme_online_verify_new)
public func ffiOnlineVerifyNew(
    _ store: UnsafeMutablePointer<itsme_store>?, _ contactID: Int64, _ window: Int64, _ binding: UnsafePointer<UInt8>?,
    _ bindingLen: UInt, _ rng: UnsafeMutablePointer<itsme_random>?, _ now: Int64,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_online_verify>?>?
) -> itsme_result {
    newSession(store, out) { s in
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        return try OnlineVerify(
            store: s, contactID: contactID, window: window, binding: try callBinding(binding, bindingLen), now: now, random: &random)
    }
}

@c(itsme_online_verify_free)
public func ffiOnlineVerifyFree(_ session: UnsafeMutablePointer<itsme_online_verify>?) {
    release(session, as: SessionHandle<OnlineVerify>.self)
}

@c(itsme_online_verify_last_error)
public func ffiOnlineVerifyLastError(
    _ session: UnsafePointer<itsme_online_verify>?, _ buf: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    sessionLastError(session, OnlineVerify.self, buf, cap, outLen)
}

@c(itsme_online_verify_status)
public func ffiOnlineVerifyStatus(
    _ session: UnsafePointer<itsme_online_verify>?, _ outState: UnsafeMutablePointer<itsme_online_verify_state>?
) -> itsme_result {
    onSession(session) { s in try required(outState, "out_state").pointee = s.state.rawValue }
}

@c(itsme_online_verify_room)
public func ffiOnlineVerifyRoom(
    _ session: UnsafePointer<itsme_online_verify>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onSession(session) { s in try writeText(s.roomName, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_online_verify_next_outgoing)
public func ffiOnlineVerifyNextOutgoing(
    _ session: UnsafeMutablePointer<itsme_online_verify>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onSession(session) { s in try writeNextMessage(s.peekOutgoing(), s.markSent, out, cap, outLen) }
}

@c(itsme_online_verify_receive)
public func ffiOnlineVerifyReceive(
    _ session: UnsafeMutablePointer<itsme_online_verify>?, _ bytesIn: UnsafePointer<UInt8>?, _ len: UInt, _ now: Int64
) -> itsme_result {
    onSession(session) { s in try s.receive(try bytes(bytesIn, len, "bytes"), now: now) }
}

@c(itsme_online_verify_sas)
public func ffiOnlineVerifySAS(
    _ session: UnsafePointer<itsme_online_verify>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onSession(session) { s in
        try checkOutput(out, cap, outLen)
        try writeText(try s.requireSAS().text, to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_online_verify_confirm)
public func ffiOnlineVerifyConfirm(
    _ session: UnsafeMutablePointer<itsme_online_verify>?, _ now: Int64,
    _ outOutcome: UnsafeMutablePointer<itsme_voice_outcome>?
) -> itsme_result {
    onSession(session) { s in
        let out = try required(outOutcome, "out_outcome")
        out.pointee = try s.confirm(now: now).rawValue
    }
}

@c(itsme_online_verify_reject)
public func ffiOnlineVerifyReject(_ session: UnsafeMutablePointer<itsme_online_verify>?) -> itsme_result {
    onSession(session) { s in try s.reject() }
}

@c(itsme_online_verify_share_profile)
public func ffiOnlineVerifyShareProfile(
    _ session: UnsafeMutablePointer<itsme_online_verify>?, _ reference: UnsafePointer<UInt8>?, _ referenceLen: UInt
) -> itsme_result {
    onSession(session) { s in
        guard referenceLen == UInt(ProfileRecord.referenceCount) else {
            throw invalid("a profile reference is \(ProfileRecord.referenceCount) bytes, not \(referenceLen)")
        }
        let p = try required(reference, "reference")
        try s.shareProfile(reference: try SecretBytes(copying: UnsafeRawBufferPointer(start: p, count: Int(referenceLen))))
    }
}

@c(itsme_online_verify_peer_profile)
public func ffiOnlineVerifyPeerProfile(
    _ session: UnsafePointer<itsme_online_verify>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onSession(session) { s in
        try checkOutput(out, cap, outLen)
        try s.peerProfileReference().withBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

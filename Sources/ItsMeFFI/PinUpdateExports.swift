// Exported functions for Security PIN Update, in the order of
// include/itsme.h.
import CItsMe
import ItsMeKit
import ItsMePrimitives

private func onUpdate(_ p: UnsafeRawPointer?, _ body: (PinUpdate) throws -> Void) -> itsme_result {
    onSession(p, "update", body)
}

@c(itsme_pin_update_new)
public func ffiPinUpdateNew(
    _ store: UnsafeMutablePointer<itsme_store>?, _ contactID: Int64, _ window: Int64,
    _ rng: UnsafeMutablePointer<itsme_random>?, _ now: Int64,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_pin_update>?>?
) -> itsme_result {
    newSession(store, out) { s in
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        return try PinUpdate(store: s, contactID: contactID, window: window, now: now, random: &random)
    }
}

@c(itsme_pin_update_free)
public func ffiPinUpdateFree(_ update: UnsafeMutablePointer<itsme_pin_update>?) {
    release(update, as: SessionHandle<PinUpdate>.self)
}

@c(itsme_pin_update_last_error)
public func ffiPinUpdateLastError(
    _ update: UnsafePointer<itsme_pin_update>?, _ buf: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    sessionLastError(update, PinUpdate.self, buf, cap, outLen)
}

@c(itsme_pin_update_status)
public func ffiPinUpdateStatus(
    _ update: UnsafePointer<itsme_pin_update>?, _ outState: UnsafeMutablePointer<itsme_pin_update_state>?
) -> itsme_result {
    onUpdate(update) { u in try required(outState, "out_state").pointee = u.state.rawValue }
}

@c(itsme_pin_update_session_code)
public func ffiPinUpdateSessionCode(
    _ update: UnsafePointer<itsme_pin_update>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onUpdate(update) { u in try writeText(u.sessionCode.text, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_pin_update_next_outgoing)
public func ffiPinUpdateNextOutgoing(
    _ update: UnsafeMutablePointer<itsme_pin_update>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onUpdate(update) { u in try writeNextMessage(u.peekOutgoing(), u.markSent, out, cap, outLen) }
}

@c(itsme_pin_update_receive)
public func ffiPinUpdateReceive(
    _ update: UnsafeMutablePointer<itsme_pin_update>?, _ bytesIn: UnsafePointer<UInt8>?, _ len: UInt, _ now: Int64
) -> itsme_result {
    onUpdate(update) { u in try u.receive(try bytes(bytesIn, len, "bytes"), now: now) }
}

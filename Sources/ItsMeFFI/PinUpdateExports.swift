// Exported functions for Security PIN Update, in the order of
// include/itsme.h.
import CItsMe
import ItsMeCore
import Synchronization

final class PinUpdateHandle: @unchecked Sendable {
    private let lock = Mutex<Void>(())
    private let update: PinUpdate
    /// Keeps the store the update writes to alive.
    let store: ContactStoreHandle
    let lastError = LastError()

    init(_ update: PinUpdate, _ store: ContactStoreHandle) {
        self.update = update
        self.store = store
    }

    func run(_ body: (PinUpdate) throws -> Void) -> itsme_result {
        lock.withLock { _ in guarded(lastError.set) { try body(update) } }
    }
}

private func onUpdate(_ p: UnsafeRawPointer?, _ body: (PinUpdate) throws -> Void) -> itsme_result {
    guard let handle = unbox(p, as: PinUpdateHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("update is NULL") }
    }
    return handle.run(body)
}

@c(itsme_pin_update_new)
public func ffiPinUpdateNew(
    _ store: UnsafeMutablePointer<itsme_store>?, _ contactID: Int64, _ window: Int64,
    _ rng: UnsafeMutablePointer<itsme_random>?, _ now: Int64,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_pin_update>?>?
) -> itsme_result {
    guard let handle = unbox(store, as: ContactStoreHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("store is NULL") }
    }
    return guarded(handle.lastError.set) {
        let out = try required(out, "out")
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        let update = try PinUpdate(store: handle.store, contactID: contactID, window: window, now: now, random: &random)
        out.pointee = box(PinUpdateHandle(update, handle), as: itsme_pin_update.self)
    }
}

@c(itsme_pin_update_free)
public func ffiPinUpdateFree(_ update: UnsafeMutablePointer<itsme_pin_update>?) {
    release(update, as: PinUpdateHandle.self)
}

@c(itsme_pin_update_last_error)
public func ffiPinUpdateLastError(
    _ update: UnsafePointer<itsme_pin_update>?, _ buf: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guard let handle = unbox(update, as: PinUpdateHandle.self) else { return ITSME_E_INVALID_ARGUMENT }
    return copyLastError(handle.lastError.get(), buf, cap, outLen)
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
    onUpdate(update) { u in
        try checkOutput(out, cap, outLen)
        guard let next = u.peekOutgoing() else {
            outLen!.pointee = 0
            return
        }
        try next.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
        u.markSent()
    }
}

@c(itsme_pin_update_receive)
public func ffiPinUpdateReceive(
    _ update: UnsafeMutablePointer<itsme_pin_update>?, _ bytesIn: UnsafePointer<UInt8>?, _ len: UInt, _ now: Int64
) -> itsme_result {
    onUpdate(update) { u in try u.receive(try bytes(bytesIn, len, "bytes"), now: now) }
}

// Exported functions for randomness, short codes, exchanges and the pure
// derivations, in the order of include/itsme.h.
import CItsMe
import ItsMeKit
import ItsMePrimitives
import Synchronization

// MARK: - Deterministic randomness

package final class RandomHandle: @unchecked Sendable {
    var source: DeterministicRandom
    package init(_ source: DeterministicRandom) { self.source = source }
}

/// The host's choice of random source: the system, or a test stream.
package struct HostRandom: RandomSource {
    let handle: RandomHandle?
    package init(handle: RandomHandle?) { self.handle = handle }
    package mutating func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        if let handle { handle.source.fill(buffer) } else {
            var system = SystemRandom()
            system.fill(buffer)
        }
    }
}

@c(itsme_random_free)
public func ffiRandomFree(_ rng: UnsafeMutablePointer<itsme_random>?) {
    release(rng, as: RandomHandle.self)
}

// MARK: - Short codes

@c(itsme_short_code_parse)
public func ffiShortCodeParse(_ text: UnsafePointer<CChar>?, _ outValue: UnsafeMutablePointer<UInt32>?) -> itsme_result {
    guarded(ThreadLastError.set) {
        let s = try ItsMeFFI.text(text, "text", max: TextLimit.typedCode)
        let out = try required(outValue, "out_value")
        guard let code = ShortCode(parsing: s) else {
            throw invalid("not a short code: a NATO word, a space or '-', and four digits (\"ECHO 0042\")")
        }
        out.pointee = code.value
    }
}

@c(itsme_short_code_format)
public func ffiShortCodeFormat(
    _ value: UInt32, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        guard let code = ShortCode(value: value) else { throw invalid("a short code value is below 260000, got \(value)") }
        try writeText(code.text, to: out, cap: cap, outLen: outLen)
    }
}

// MARK: - Exchanges

/// Box of an `itsme_exchange`: it holds counted references to its
/// identity's handle (whose lock serialises the exchange's calls) and to
/// the contact store the exchange saves to.
final class ExchangeHandle: @unchecked Sendable {
    let exchange: Exchange
    let identity: IdentityHandle
    let store: ContactStoreHandle
    let lastError = LastError()
    init(_ exchange: Exchange, _ identity: IdentityHandle, _ store: ContactStoreHandle) {
        self.exchange = exchange
        self.identity = identity
        self.store = store
    }
}

/// Runs `body` on the exchange under its identity's lock, recording
/// failures on the exchange.
func onExchange(_ p: UnsafeRawPointer?, _ body: (Exchange) throws -> Void) -> itsme_result {
    guard let handle = unbox(p, as: ExchangeHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("exchange is NULL") }
    }
    return guarded(handle.lastError.set) { try handle.identity.locked { _ in try body(handle.exchange) } }
}

/// Makes an exchange of `identity` that saves to `store`; a store of
/// another identity is refused by the core (`.wrongIdentity`).
func newExchange(
    _ identity: UnsafeMutablePointer<itsme_identity>?, _ store: UnsafeMutablePointer<itsme_store>?,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_exchange>?>?, _ make: (Identity, ContactStore) throws -> Exchange
) -> itsme_result {
    guard let handle = unbox(identity, as: IdentityHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("identity is NULL") }
    }
    return handle.run { id in
        guard let storeHandle = unbox(store, as: ContactStoreHandle.self) else { throw invalid("store is NULL") }
        let out = try required(out, "out")
        out.pointee = box(ExchangeHandle(try make(id, storeHandle.store), handle, storeHandle), as: itsme_exchange.self)
    }
}

@c(itsme_exchange_new_qr)
public func ffiExchangeNewQR(
    _ identity: UnsafeMutablePointer<itsme_identity>?, _ store: UnsafeMutablePointer<itsme_store>?, _ rng: UnsafeMutablePointer<itsme_random>?,
    _ now: Int64, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_exchange>?>?
) -> itsme_result {
    newExchange(identity, store, out) { id, store in
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        return try Exchange.qr(identity: id, store: store, now: now, random: &random)
    }
}

@c(itsme_exchange_new_bluetooth)
public func ffiExchangeNewBluetooth(
    _ identity: UnsafeMutablePointer<itsme_identity>?, _ store: UnsafeMutablePointer<itsme_store>?, _ sessionCode: UnsafePointer<CChar>?,
    _ rng: UnsafeMutablePointer<itsme_random>?, _ now: Int64, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_exchange>?>?
) -> itsme_result {
    newExchange(identity, store, out) { id, store in
        var code: ShortCode?
        if let sessionCode {
            guard let parsed = ShortCode(parsing: try text(sessionCode, "session_code", max: TextLimit.typedCode)) else {
                throw invalid("session_code is not a NATO word and four digits (\"ECHO 0042\")")
            }
            code = parsed
        }
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        return try Exchange.bluetooth(identity: id, store: store, sessionCode: code, now: now, random: &random)
    }
}

@c(itsme_exchange_free)
public func ffiExchangeFree(_ exchange: UnsafeMutablePointer<itsme_exchange>?) {
    release(exchange, as: ExchangeHandle.self)
}

@c(itsme_exchange_last_error)
public func ffiExchangeLastError(
    _ exchange: UnsafePointer<itsme_exchange>?, _ buf: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guard let handle = unbox(exchange, as: ExchangeHandle.self) else { return ITSME_E_INVALID_ARGUMENT }
    return copyLastError(handle.lastError.get(), buf, cap, outLen)
}

@c(itsme_exchange_status)
public func ffiExchangeStatus(
    _ exchange: UnsafePointer<itsme_exchange>?, _ outState: UnsafeMutablePointer<itsme_exchange_state>?,
    _ outFlags: UnsafeMutablePointer<UInt32>?
) -> itsme_result {
    onExchange(exchange) { ex in
        let state = try required(outState, "out_state")
        state.pointee = ex.state.rawValue
        outFlags?.pointee = ex.flags.rawValue
    }
}

@c(itsme_exchange_get_method)
public func ffiExchangeGetMethod(
    _ exchange: UnsafePointer<itsme_exchange>?, _ outMethod: UnsafeMutablePointer<itsme_exchange_method>?
) -> itsme_result {
    onExchange(exchange) { ex in
        try required(outMethod, "out_method").pointee = itsme_exchange_method(ex.method.rawValue)
    }
}

@c(itsme_exchange_session_code)
public func ffiExchangeSessionCode(
    _ exchange: UnsafePointer<itsme_exchange>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onExchange(exchange) { ex in
        guard let code = ex.sessionCode else { throw ItsMeError(.invalidState, "a QR exchange has no session code") }
        try writeText(code.text, to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_exchange_next_outgoing)
public func ffiExchangeNextOutgoing(
    _ exchange: UnsafeMutablePointer<itsme_exchange>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onExchange(exchange) { ex in
        try checkOutput(out, cap, outLen)
        let outLen = outLen!
        guard let next = ex.peekOutgoing() else {
            outLen.pointee = 0  // nothing to send
            return
        }
        try next.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
        ex.markSent()
    }
}

@c(itsme_exchange_receive)
public func ffiExchangeReceive(
    _ exchange: UnsafeMutablePointer<itsme_exchange>?, _ bytesIn: UnsafePointer<UInt8>?, _ len: UInt, _ now: Int64
) -> itsme_result {
    onExchange(exchange) { ex in try ex.receive(try bytes(bytesIn, len, "bytes"), now: now) }
}

@c(itsme_exchange_sas)
public func ffiExchangeSAS(
    _ exchange: UnsafePointer<itsme_exchange>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onExchange(exchange) { ex in
        try checkOutput(out, cap, outLen)
        try writeText(try ex.requireSAS().text, to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_exchange_peer_name)
public func ffiExchangePeerName(
    _ exchange: UnsafePointer<itsme_exchange>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onExchange(exchange) { ex in try writeText(try ex.requirePeer().name, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_exchange_peer_fingerprint)
public func ffiExchangePeerFingerprint(
    _ exchange: UnsafePointer<itsme_exchange>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onExchange(exchange) { ex in try writeText(try ex.requirePeer().fingerprint, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_exchange_peer_public_key)
public func ffiExchangePeerPublicKey(
    _ exchange: UnsafePointer<itsme_exchange>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onExchange(exchange) { ex in
        guard let key = try ex.requirePeer().publicKey else {
            throw ItsMeError(.notFound, "a source-format peer has no identity key")
        }
        try key.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

/// save, confirm and settle: the exchange and the contact id out.
private func withContactID(
    _ exchange: UnsafeMutablePointer<itsme_exchange>?, _ outID: UnsafeMutablePointer<Int64>?,
    _ body: (Exchange) throws -> Int64
) -> itsme_result {
    onExchange(exchange) { ex in
        let out = try required(outID, "out_contact_id")
        out.pointee = try body(ex)
    }
}

@c(itsme_exchange_save)
public func ffiExchangeSave(
    _ exchange: UnsafeMutablePointer<itsme_exchange>?, _ now: Int64, _ outID: UnsafeMutablePointer<Int64>?
) -> itsme_result {
    withContactID(exchange, outID) { ex in try ex.save(now: now) }
}

@c(itsme_exchange_confirm)
public func ffiExchangeConfirm(
    _ exchange: UnsafeMutablePointer<itsme_exchange>?, _ now: Int64, _ outID: UnsafeMutablePointer<Int64>?
) -> itsme_result {
    withContactID(exchange, outID) { ex in try ex.confirm(now: now) }
}

@c(itsme_exchange_settle)
public func ffiExchangeSettle(
    _ exchange: UnsafeMutablePointer<itsme_exchange>?, _ now: Int64, _ outID: UnsafeMutablePointer<Int64>?
) -> itsme_result {
    withContactID(exchange, outID) { ex in try ex.settle(now: now) ?? 0 }
}

@c(itsme_exchange_reject)
public func ffiExchangeReject(_ exchange: UnsafeMutablePointer<itsme_exchange>?) -> itsme_result {
    onExchange(exchange) { ex in try ex.reject() }
}

@c(itsme_exchange_seal)
public func ffiExchangeSeal(
    _ exchange: UnsafeMutablePointer<itsme_exchange>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onExchange(exchange) { ex in
        try checkOutput(out, cap, outLen)
        let sealed = try ex.seal()
        try sealed.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

@c(itsme_exchange_restore)
public func ffiExchangeRestore(
    _ identity: UnsafeMutablePointer<itsme_identity>?, _ store: UnsafeMutablePointer<itsme_store>?, _ sealed: UnsafePointer<UInt8>?, _ len: UInt,
    _ now: Int64, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_exchange>?>?
) -> itsme_result {
    newExchange(identity, store, out) { id, store in
        try Exchange.restore(identity: id, store: store, sealed: try bytes(sealed, len, "sealed"), now: now)
    }
}

// Exported functions for randomness, short codes, exchanges and the pure
// derivations, in the order of include/itsme.h.
import CItsMe
import ItsMeCore
import Synchronization

// MARK: - Deterministic randomness

final class RandomHandle: @unchecked Sendable {
    var source: DeterministicRandom
    init(_ source: DeterministicRandom) { self.source = source }
}

/// The host's choice of random source: the system, or a test stream.
struct HostRandom: RandomSource {
    let handle: RandomHandle?
    mutating func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        if let handle { handle.source.fill(buffer) } else {
            var system = SystemRandom()
            system.fill(buffer)
        }
    }
}

@c(itsme_random_new_deterministic)
public func ffiRandomNewDeterministic(
    _ seed: UnsafePointer<UInt8>?, _ seedLen: UInt, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_random>?>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let seed = try bytes(seed, seedLen, "seed")
        guard seed.count == 32 else { throw invalid("a deterministic random seed is 32 bytes, got \(seed.count)") }
        let out = try required(out, "out")
        out.pointee = box(RandomHandle(DeterministicRandom(seed: seed)), as: itsme_random.self)
    }
}

@c(itsme_random_free)
public func ffiRandomFree(_ rng: UnsafeMutablePointer<itsme_random>?) {
    release(rng, as: RandomHandle.self)
}

@c(itsme_identity_create_with_random)
public func ffiIdentityCreateWithRandom(
    _ store: UnsafeMutablePointer<itsme_secret_store>?, _ name: UnsafePointer<CChar>?,
    _ rng: UnsafeMutablePointer<itsme_random>?, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_identity>?>?
) -> itsme_result {
    onStore(store) { handle in
        let name = try text(name, "name")
        let out = try required(out, "out")
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        let identity = try Identity.create(store: handle.store, name: name, random: &random)
        out.pointee = box(IdentityHandle(identity), as: itsme_identity.self)
    }
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

final class ExchangeHandle: @unchecked Sendable {
    let exchange: Exchange
    let identity: IdentityHandle
    let lastError = LastError()
    init(_ exchange: Exchange, _ identity: IdentityHandle) {
        self.exchange = exchange
        self.identity = identity
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

func newExchange(
    _ identity: UnsafeMutablePointer<itsme_identity>?, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_exchange>?>?,
    _ make: (Identity) throws -> Exchange
) -> itsme_result {
    guard let handle = unbox(identity, as: IdentityHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("identity is NULL") }
    }
    return handle.run { id in
        let out = try required(out, "out")
        out.pointee = box(ExchangeHandle(try make(id), handle), as: itsme_exchange.self)
    }
}

@c(itsme_exchange_new_qr)
public func ffiExchangeNewQR(
    _ identity: UnsafeMutablePointer<itsme_identity>?, _ rng: UnsafeMutablePointer<itsme_random>?, _ now: Int64,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_exchange>?>?
) -> itsme_result {
    newExchange(identity, out) { id in
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        return try Exchange.qr(identity: id, now: now, random: &random)
    }
}

@c(itsme_exchange_new_bluetooth)
public func ffiExchangeNewBluetooth(
    _ identity: UnsafeMutablePointer<itsme_identity>?, _ sessionCode: UnsafePointer<CChar>?,
    _ rng: UnsafeMutablePointer<itsme_random>?, _ now: Int64, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_exchange>?>?
) -> itsme_result {
    newExchange(identity, out) { id in
        var code: ShortCode?
        if let sessionCode {
            guard let parsed = ShortCode(parsing: try text(sessionCode, "session_code", max: TextLimit.typedCode)) else {
                throw invalid("session_code is not a NATO word and four digits (\"ECHO 0042\")")
            }
            code = parsed
        }
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        return try Exchange.bluetooth(identity: id, sessionCode: code, now: now, random: &random)
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

/// The peer, or `.invalidState` before one was received.
private func peer(_ ex: Exchange) throws -> Exchange.Peer {
    guard let peer = ex.peer, ex.state != .failed else {
        throw ItsMeError(.invalidState, ex.state == .failed ? "the exchange has failed" : "nothing received from the peer yet")
    }
    return peer
}

@c(itsme_exchange_sas)
public func ffiExchangeSAS(
    _ exchange: UnsafePointer<itsme_exchange>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onExchange(exchange) { ex in
        try checkOutput(out, cap, outLen)
        guard let sas = ex.sas, ex.state != .failed else {
            throw ItsMeError(
                .invalidState,
                ex.state == .imported ? "a source-format payload has no SAS" : "there is no SAS: the exchange is \(ex.state)")
        }
        try writeText(sas.text, to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_exchange_peer_name)
public func ffiExchangePeerName(
    _ exchange: UnsafePointer<itsme_exchange>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onExchange(exchange) { ex in try writeText(try peer(ex).name, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_exchange_peer_fingerprint)
public func ffiExchangePeerFingerprint(
    _ exchange: UnsafePointer<itsme_exchange>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onExchange(exchange) { ex in try writeText(try peer(ex).fingerprint, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_exchange_peer_public_key)
public func ffiExchangePeerPublicKey(
    _ exchange: UnsafePointer<itsme_exchange>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onExchange(exchange) { ex in
        guard let key = try peer(ex).publicKey else {
            throw ItsMeError(.notFound, "a source-format peer has no identity key")
        }
        try key.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

private func contactStore(_ p: UnsafeMutablePointer<itsme_store>?) throws -> ContactStore {
    guard let handle = unbox(p, as: ContactStoreHandle.self) else { throw invalid("store is NULL") }
    return handle.store
}

/// save, confirm and settle: the exchange, its store and the contact id out.
private func withStore(
    _ exchange: UnsafeMutablePointer<itsme_exchange>?, _ store: UnsafeMutablePointer<itsme_store>?,
    _ outID: UnsafeMutablePointer<Int64>?, _ body: (Exchange, ContactStore) throws -> Int64
) -> itsme_result {
    onExchange(exchange) { ex in
        let store = try contactStore(store)
        let out = try required(outID, "out_contact_id")
        out.pointee = try body(ex, store)
    }
}

@c(itsme_exchange_save)
public func ffiExchangeSave(
    _ exchange: UnsafeMutablePointer<itsme_exchange>?, _ store: UnsafeMutablePointer<itsme_store>?, _ now: Int64,
    _ outID: UnsafeMutablePointer<Int64>?
) -> itsme_result {
    withStore(exchange, store, outID) { ex, store in try ex.save(to: store, now: now) }
}

@c(itsme_exchange_confirm)
public func ffiExchangeConfirm(
    _ exchange: UnsafeMutablePointer<itsme_exchange>?, _ store: UnsafeMutablePointer<itsme_store>?, _ now: Int64,
    _ outID: UnsafeMutablePointer<Int64>?
) -> itsme_result {
    withStore(exchange, store, outID) { ex, store in try ex.confirm(store: store, now: now) }
}

@c(itsme_exchange_settle)
public func ffiExchangeSettle(
    _ exchange: UnsafeMutablePointer<itsme_exchange>?, _ store: UnsafeMutablePointer<itsme_store>?, _ now: Int64,
    _ outID: UnsafeMutablePointer<Int64>?
) -> itsme_result {
    withStore(exchange, store, outID) { ex, store in try ex.settle(store: store, now: now) ?? 0 }
}

@c(itsme_exchange_reject)
public func ffiExchangeReject(
    _ exchange: UnsafeMutablePointer<itsme_exchange>?, _ store: UnsafeMutablePointer<itsme_store>?
) -> itsme_result {
    onExchange(exchange) { ex in try ex.reject(store: store == nil ? nil : try contactStore(store)) }
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
    _ identity: UnsafeMutablePointer<itsme_identity>?, _ sealed: UnsafePointer<UInt8>?, _ len: UInt, _ now: Int64,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_exchange>?>?
) -> itsme_result {
    newExchange(identity, out) { id in try Exchange.restore(identity: id, sealed: try bytes(sealed, len, "sealed"), now: now) }
}

// MARK: - Pure derivations

private func exact(_ p: UnsafePointer<UInt8>?, _ len: UInt, _ count: Int, _ what: String) throws -> [UInt8] {
    let b = try bytes(p, len, what)
    guard b.count == count else { throw invalid("\(what) is \(count) bytes, got \(b.count)") }
    return b
}

private func fingerprintText(_ p: UnsafePointer<CChar>?, _ what: String) throws -> String {
    let s = try text(p, what)
    guard s.utf8.count == Fingerprint.textCount, let b = Hex.decode(s) else { throw invalid("\(what) is not 16 hex digits") }
    return Hex.encodeUpper(b)
}

/// A Bluetooth contact-data plaintext: 114 to 241 bytes (PROTOCOL.md 7.4).
private func plaintext(_ p: UnsafePointer<UInt8>?, _ len: UInt, _ what: String) throws -> [UInt8] {
    let b = try bytes(p, len, what)
    guard (114...(113 + DisplayName.maxBytes)).contains(b.count) else {
        throw invalid("\(what) is 114 to \(113 + DisplayName.maxBytes) bytes, got \(b.count)")
    }
    return b
}

private func writeHash(_ h: [UInt8], _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?) throws {
    try h.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_derive_seed)
public func ffiDeriveSeed(
    _ secret: UnsafePointer<UInt8>?, _ secretLen: UInt, _ peerPublic: UnsafePointer<UInt8>?, _ publicLen: UInt,
    _ fpA: UnsafePointer<CChar>?, _ fpB: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        let sk = try required(secret, "ephemeral_secret")
        guard secretLen == 32 else { throw invalid("ephemeral_secret is 32 bytes, got \(secretLen)") }
        let pk = try exact(peerPublic, publicLen, 32, "peer_ephemeral_public")
        let a = try fingerprintText(fpA, "fingerprint_a"), b = try fingerprintText(fpB, "fingerprint_b")
        var seed = try SecretBytes(count: ExchangeProtocol.seedCount)
        try seed.withMutableBytes {
            try ExchangeProtocol.deriveSeed(
                ephemeralSecret: UnsafeRawBufferPointer(start: sk, count: 32), peerEphemeralKey: pk, fingerprints: a, b, into: $0)
        }
        try seed.withBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

@c(itsme_derive_sas)
public func ffiDeriveSAS(
    _ seed: UnsafePointer<UInt8>?, _ seedLen: UInt, _ th: UnsafePointer<UInt8>?, _ thLen: UInt,
    _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        let s = try required(seed, "seed")
        guard seedLen == 32 else { throw invalid("seed is 32 bytes, got \(seedLen)") }
        let hash = try exact(th, thLen, 32, "transcript_hash")
        let sas = try ShortCode.sas(seed: UnsafeRawBufferPointer(start: s, count: 32), transcriptHash: hash)
        try writeText(sas.text, to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_qr_transcript_hash)
public func ffiQRTranscriptHash(
    _ a: UnsafePointer<UInt8>?, _ aLen: UInt, _ b: UnsafePointer<UInt8>?, _ bLen: UInt,
    _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        func text(_ p: UnsafePointer<UInt8>?, _ n: UInt, _ what: String) throws -> String {
            guard let s = String(validating: try bytes(p, n, what), as: UTF8.self) else { throw invalid("\(what) is not UTF-8") }
            return s
        }
        let th = try ExchangeProtocol.qrTranscriptHash(texts: try text(a, aLen, "payload_a"), try text(b, bLen, "payload_b"))
        try writeHash(th, out, cap, outLen)
    }
}

@c(itsme_bluetooth_commitment)
public func ffiBluetoothCommitment(
    _ identityPublic: UnsafePointer<UInt8>?, _ identityLen: UInt, _ ephemeralPublic: UnsafePointer<UInt8>?,
    _ ephemeralLen: UInt, _ name: UnsafePointer<CChar>?, _ deviceSecret: UnsafePointer<UInt8>?, _ deviceSecretLen: UInt,
    _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        let ik = try exact(identityPublic, identityLen, 32, "identity_public")
        let ek = try exact(ephemeralPublic, ephemeralLen, 32, "ephemeral_public")
        let name = try DisplayName.validated(try text(name, "name"))
        let ds = try exact(deviceSecret, deviceSecretLen, ExchangeProtocol.deviceSecretCount, "device_secret")
        let c = ds.withBytes {
            ExchangeProtocol.commitment(identityKey: ik, ephemeralKey: ek, name: Array(name.utf8), deviceSecret: $0)
        }
        try writeHash(c, out, cap, outLen)
    }
}

@c(itsme_bluetooth_th1)
public func ffiBluetoothTH1(
    _ sessionCode: UnsafePointer<CChar>?, _ helloI: UnsafePointer<UInt8>?, _ helloILen: UInt,
    _ helloR: UnsafePointer<UInt8>?, _ helloRLen: UInt, _ keyI: UnsafePointer<UInt8>?, _ keyILen: UInt,
    _ keyR: UnsafePointer<UInt8>?, _ keyRLen: UInt, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        guard let code = ShortCode(parsing: try text(sessionCode, "session_code", max: TextLimit.typedCode)) else {
            throw invalid("session_code is not a short code")
        }
        let th1 = ExchangeProtocol.bluetoothTH1(
            sessionCode: code, helloI: try exact(helloI, helloILen, 42, "hello_i"),
            helloR: try exact(helloR, helloRLen, 42, "hello_r"), keyI: try exact(keyI, keyILen, 34, "key_i"),
            keyR: try exact(keyR, keyRLen, 34, "key_r"))
        try writeHash(th1, out, cap, outLen)
    }
}

@c(itsme_bluetooth_session_keys)
public func ffiBluetoothSessionKeys(
    _ secret: UnsafePointer<UInt8>?, _ secretLen: UInt, _ peerPublic: UnsafePointer<UInt8>?, _ publicLen: UInt,
    _ th1: UnsafePointer<UInt8>?, _ th1Len: UInt, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        let sk = try required(secret, "ephemeral_secret")
        guard secretLen == 32 else { throw invalid("ephemeral_secret is 32 bytes, got \(secretLen)") }
        let pk = try exact(peerPublic, publicLen, 32, "peer_ephemeral_public")
        let th = try exact(th1, th1Len, 32, "th1")
        var keys = try SecretBytes(count: 64)
        try keys.withMutableBytes { k in
            try ExchangeProtocol.bluetoothKeys(
                ephemeralSecret: UnsafeRawBufferPointer(start: sk, count: 32), peerEphemeralKey: pk, th1: th, into: k)
        }
        try keys.withBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

@c(itsme_bluetooth_transcript_hash)
public func ffiBluetoothTranscriptHash(
    _ th1: UnsafePointer<UInt8>?, _ th1Len: UInt, _ plainI: UnsafePointer<UInt8>?, _ plainILen: UInt,
    _ plainR: UnsafePointer<UInt8>?, _ plainRLen: UInt, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        let th = ExchangeProtocol.bluetoothTranscriptHash(
            th1: try exact(th1, th1Len, 32, "th1"), plaintextI: try plaintext(plainI, plainILen, "plaintext_i"),
            plaintextR: try plaintext(plainR, plainRLen, "plaintext_r"))
        try writeHash(th, out, cap, outLen)
    }
}

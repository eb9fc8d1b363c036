// itsme-bench exchange: a whole two-party QR exchange through the exported
// C functions, against the libsodium calls that make up its floor
// (docs/PROTOCOL.md section 14.1), measured in the same run.
import CItsMe
import CSodium
import ItsMeFFI
import ItsMeKit
import ItsMePrimitives

#if canImport(Glibc)
import Glibc
#endif

private func check(_ rc: itsme_result, _ what: String) throws {
    guard rc == ITSME_OK else { throw ItsMeError(.internal, "\(what) failed with result code \(rc)") }
}

/// One whole exchange: both sides start, show, scan, and read the SAS.
/// Returns whether the two SAS agree.
private func qrExchange(
    _ alice: UnsafeMutablePointer<itsme_identity>, _ bob: UnsafeMutablePointer<itsme_identity>,
    _ stores: (UnsafeMutablePointer<itsme_store>, UnsafeMutablePointer<itsme_store>), now: Int64,
    keep: ((UnsafeMutablePointer<itsme_exchange>, UnsafeMutablePointer<itsme_exchange>) throws -> Void)? = nil
) throws -> Bool {
    var a: UnsafeMutablePointer<itsme_exchange>?
    var b: UnsafeMutablePointer<itsme_exchange>?
    try check(ffiExchangeNewQR(alice, stores.0, nil, now, &a), "new_qr")
    try check(ffiExchangeNewQR(bob, stores.1, nil, now, &b), "new_qr")
    defer {
        ffiExchangeFree(a)
        ffiExchangeFree(b)
    }
    var pa = [UInt8](repeating: 0, count: Int(ITSME_QR_PAYLOAD_MAX))
    var pb = pa
    var la: UInt = 0, lb: UInt = 0
    try check(ffiExchangeNextOutgoing(a, &pa, UInt(pa.count), &la), "next_outgoing")
    try check(ffiExchangeNextOutgoing(b, &pb, UInt(pb.count), &lb), "next_outgoing")
    try check(ffiExchangeReceive(a, pb, lb, now), "receive")
    try check(ffiExchangeReceive(b, pa, la, now), "receive")
    var sa = [CChar](repeating: 0, count: Int(ITSME_SHORT_CODE_SIZE))
    var sb = sa
    var n: UInt = 0
    try check(ffiExchangeSAS(a, &sa, UInt(sa.count), &n), "sas")
    try check(ffiExchangeSAS(b, &sb, UInt(sb.count), &n), "sas")
    try keep?(a!, b!)
    return sa == sb
}

/// The libsodium calls one side of a QR exchange cannot avoid.
private func floorOneSide(
    signingKey: [UInt8], peerPublic: [UInt8], peerSignature: [UInt8], message: [UInt8], out: inout [UInt8]
) -> Bool {
    var secret = [UInt8](repeating: 0, count: 48)
    randombytes_buf(&secret, 48)  // ephemeral secret and device secret
    var ephemeral = [UInt8](repeating: 0, count: 32)
    crypto_scalarmult_base(&ephemeral, secret)
    var signature = [UInt8](repeating: 0, count: 64)
    crypto_sign_detached(&signature, nil, message, UInt64(message.count), signingKey)
    var hash = [UInt8](repeating: 0, count: 32)
    crypto_hash_sha256(&hash, peerPublic, 32)  // the peer's fingerprint
    let ok = crypto_sign_verify_detached(peerSignature, message, UInt64(message.count), peerPublic) == 0
    var shared = [UInt8](repeating: 0, count: 32)
    _ = crypto_scalarmult(&shared, secret, ephemeral)
    // Seed: HKDF = extract + one expand block; SAS: the same.
    crypto_auth_hmacsha256(&out, shared, 32, hash)
    crypto_auth_hmacsha256(&out, hash, 32, out)
    crypto_hash_sha256(&hash, message, UInt64(message.count))  // transcript
    crypto_auth_hmacsha256(&out, out, 32, hash)
    crypto_auth_hmacsha256(&out, hash, 32, out)
    sodium_memzero(&secret, 48)
    return ok
}

func exchangeSuite(_ scale: Scale) throws -> Figures {
    var figures = Figures()
    let runs = scale.count(max(scale.loops / 10, 100), quick: max(scale.loops / 10, 10))
    print("exchange suite (\(runs) two-party QR exchanges through the exported C functions)")
    var sa: UnsafeMutablePointer<itsme_secret_store>?, sb: UnsafeMutablePointer<itsme_secret_store>?
    var alice: UnsafeMutablePointer<itsme_identity>?, bob: UnsafeMutablePointer<itsme_identity>?
    try check(ffiSecretStoreNewMemory(&sa), "memory store")
    try check(ffiSecretStoreNewMemory(&sb), "memory store")
    try check(ffiIdentityCreate(sa, "Alice", &alice), "identity")
    try check(ffiIdentityCreate(sb, "Bob", &bob), "identity")
    defer {
        ffiIdentityFree(alice)
        ffiIdentityFree(bob)
        ffiSecretStoreFree(sa)
        ffiSecretStoreFree(sb)
    }
    let now: Int64 = 1_800_000_000
    // Each side's contact store (the exchanges are given them; only the
    // store figure below writes to them).
    let path = try makeTemporaryDirectory("exchange")
    var storeA: UnsafeMutablePointer<itsme_store>?, storeB: UnsafeMutablePointer<itsme_store>?
    try check(ffiStoreOpen(alice, path + "/a.db", &storeA), "store")
    try check(ffiStoreOpen(bob, path + "/b.db", &storeB), "store")
    defer {
        ffiStoreFree(storeA)
        ffiStoreFree(storeB)
        removeDirectory(path)
    }
    let stores = (storeA!, storeB!)

    // Inputs for the floor: a real key pair and a payload-sized message.
    var pk = [UInt8](repeating: 0, count: 32), sk = [UInt8](repeating: 0, count: 64)
    crypto_sign_keypair(&pk, &sk)
    let message = [UInt8](repeating: 7, count: 110)
    var sig = [UInt8](repeating: 0, count: 64)
    crypto_sign_detached(&sig, nil, message, UInt64(message.count), sk)
    var out = [UInt8](repeating: 0, count: 32)

    // Warm up both, then alternate rounds so drift hits both alike.
    _ = try qrExchange(alice!, bob!, stores, now: now)
    _ = floorOneSide(signingKey: sk, peerPublic: pk, peerSignature: sig, message: message, out: &out)
    var full = 0.0, floor = 0.0
    let rounds = 5
    for _ in 0..<rounds {
        full += try measure(runs / rounds) { _ in
            guard try qrExchange(alice!, bob!, stores, now: now) else { throw ItsMeError(.internal, "the two SAS differ") }
        }
        floor += measure(runs / rounds) { _ in
            for _ in 0..<2 {
                guard floorOneSide(signingKey: sk, peerPublic: pk, peerSignature: sig, message: message, out: &out) else {
                    fatalError("signature check failed in the floor")
                }
            }
        }
    }
    full /= Double(rounds)
    floor /= Double(rounds)
    print("  full QR exchange, both sides (create, payload, scan, SAS): \(format(full))")
    print("  crypto floor, both sides (per side: random, X25519 base, Ed25519 sign, SHA-256, Ed25519 verify, X25519, 2 HKDF, SHA-256): \(format(floor))")
    print("  exchange / floor: \((full / floor * 100).rounded() / 100)x (target: at most 1.5x)")
    figures.add("qr_exchange_us", full * 1e6)
    figures.add("qr_floor_us", floor * 1e6)
    figures.add("qr_exchange_over_floor", full / floor)

    // Store costs, apart: save and confirm on both sides.
    let storeRuns = scale.count(50, quick: 5)
    var storeTime = 0.0
    for i in 0..<storeRuns {
        _ = try qrExchange(alice!, bob!, stores, now: now) { a, b in
            var id: Int64 = 0
            let start = nowSeconds()
            // Each round after the first re-exchanges a known contact: save
            // finds it, confirm replaces its seed.
            try check(ffiExchangeConfirm(a, now + Int64(i), &id), "confirm")
            try check(ffiExchangeConfirm(b, now + Int64(i), &id), "confirm")
            storeTime += nowSeconds() - start
        }
    }
    print("  store: save + confirm on both sides (synchronous=FULL commits): \(format(storeTime / Double(storeRuns))), \(storeRuns) runs")
    figures.add("store_confirm_both_ms", storeTime / Double(storeRuns) * 1e3)
    return figures
}

// itsme-bench verify: one complete two-sided voice verification derivation
// through the exported C function (both sides: session ID, both word sets,
// both code pairs, both tags), against the raw HMAC-SHA256 calls it needs
// (docs/PROTOCOL.md section 14.2), measured in the same run; the store's
// window burn apart; and a TOTP code from pyotp as the reference a user
// would otherwise reach for.
import CItsMe
import CSodium
import ItsMeFFI
import ItsMeKit
import ItsMePrimitives
import ItsMeTestingFFI

#if canImport(Glibc)
import Glibc
#endif

/// The HMAC-SHA256 calls of one side (16): session ID 1; words of both
/// parties 2 x (HKDF 2 + 1 block); first selector 1; code key (HKDF) 2 +
/// two codes; tag key (HKDF) 2 + two tags.
private func hmacFloorOneSide(_ seed: [UInt8], _ out: inout [UInt8], _ message: [UInt8]) {
    for _ in 0..<16 {
        crypto_auth_hmacsha256(&out, message, UInt64(message.count), seed)
    }
}

/// Runs pyotp for `count` codes and returns seconds per code, or nil if
/// pyotp is not installed.
private func pyotpSecondsPerCode(_ count: Int) -> Double? {
    let script = """
        import time
        try:
            import pyotp
        except ImportError:
            print("missing"); raise SystemExit
        totp = pyotp.TOTP("JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP")
        start = time.perf_counter()
        for i in range(\(count)):
            totp.at(1800000000 + 30 * i)
        print((time.perf_counter() - start) / \(count))
        """
    guard let pipe = popen("python3 -c '\(script)' 2>/dev/null", "r") else { return nil }
    defer { pclose(pipe) }
    var buffer = [CChar](repeating: 0, count: 256)
    guard fgets(&buffer, 256, pipe) != nil else { return nil }
    return Double(string(fromCString: buffer).filter { !$0.isWhitespace })
}

func verifySuite(_ scale: Scale) throws -> Figures {
    var figures = Figures()
    let runs = scale.count(max(scale.loops, 1000), quick: max(scale.loops, 100))
    print("verify suite (\(runs) two-sided voice verification derivations through the exported C function)")
    let seed = SHA256.hash(Array("bench-seed".utf8))
    let pa = SHA256.hash(Array("bench-a".utf8)), pb = SHA256.hash(Array("bench-b".utf8))
    let da = Array(SHA256.hash(Array("bench-da".utf8)).prefix(16)), db = Array(SHA256.hash(Array("bench-db".utf8)).prefix(16))
    let window: Int64 = 60_000_001
    var out = itsme_voice_derivation()
    var other = itsme_voice_derivation()
    out.size = MemoryLayout<itsme_voice_derivation>.size
    other.size = out.size
    func both() throws {
        let rc1 = ffiDeriveVoice(seed, 32, window, pa, 32, pb, 32, da, 16, db, 16, 3, 7, &out)
        let rc2 = ffiDeriveVoice(seed, 32, window, pb, 32, pa, 32, db, 16, da, 16, 3, 7, &other)
        guard rc1 == ITSME_OK, rc2 == ITSME_OK else { throw ItsMeError(.internal, "itsme_derive_voice failed") }
        guard out.my_code == other.their_code, out.my_tag == other.their_tag else {
            throw ItsMeError(.internal, "the two sides disagree")
        }
    }
    var mac = [UInt8](repeating: 0, count: 32)
    let message = [UInt8](repeating: 5, count: 80)
    try both()
    var full = 0.0, floor = 0.0
    let rounds = 5
    for _ in 0..<rounds {
        full += try measure(runs / rounds) { _ in try both() }
        floor += measure(runs / rounds) { _ in
            hmacFloorOneSide(seed, &mac, message)
            hmacFloorOneSide(seed, &mac, message)
        }
    }
    full /= Double(rounds)
    floor /= Double(rounds)
    print("  two-sided derivation (session ID, words of both, first selector, both codes, both tags, each side): \(format(full))")
    print("  HMAC-SHA256 floor: 32 calls (16 per side): \(format(floor))")
    print("  derivation / floor: \((full / floor * 100).rounded() / 100)x (target: at most 1.5x)")
    figures.add("voice_derivation_us", full * 1e6)
    figures.add("voice_hmac_floor_us", floor * 1e6)
    figures.add("voice_over_floor", full / floor)

    // The window burn, apart: one write transaction per session.
    let path = try makeTemporaryDirectory("verify")
    defer { removeDirectory(path) }
    let identity = try Identity.create(store: MemorySecretStore(), name: "Bench")
    let store = try ContactStore(path: path + "/bench.db", identity: identity)
    let id = try store.add(
        name: "Peer", publicKey: pb, seed: try SecretBytes(copying: seed), method: .qr, now: 1_800_000_000)
    let burns = scale.count(200, quick: 20)
    let burn = try measure(burns) { i in try store.useWindow(id: id, window: window + Int64(i)) }
    print("  store: using a window (one synchronous=FULL write transaction): \(format(burn)), \(burns) runs")
    figures.add("window_burn_ms", burn * 1e3)

    if let totp = pyotpSecondsPerCode(scale.count(10_000, quick: 500)) {
        print("  reference: one TOTP code with pyotp (Python, 6 digits, 19.9 bits): \(format(totp))")
        figures.add("pyotp_totp_us", totp * 1e6)
    } else {
        print("  reference: pyotp is not installed (pip install pyotp); skipped")
    }
    return figures
}

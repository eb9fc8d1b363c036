// itsme-bench: benchmark suites that print readable lines and, last, one
// JSON line with their figures. `--quick` makes any suite a smoke run of
// seconds through the same code paths, printing the same keys (CI runs every
// suite so, scripts/bench-smoke, against the keys scripts/bench-keys.txt lists).
//
//   swift run -c release itsme-bench crypto|store|exchange|verify [--quick] [--iterations N]
//   swift run -c release itsme-bench relay [options]   (RelaySuite.swift: runs the load generator of apps/)
//   swift run -c release itsme-bench remote [options]  (RemoteSuite.swift: the exchange at a distance vs Magic Wormhole)
//   swift run -c release itsme-bench roll-call [options]  (RelaySuite.swift: a roll call of 50 through a relay)
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CSodium
import ItsMeKit
import ItsMePrimitives

func nowSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Runs `body` `count` times; returns seconds per call.
func measure(_ count: Int, _ body: (Int) throws -> Void) rethrows -> Double {
    let start = nowSeconds()
    for i in 0..<count { try body(i) }
    return (nowSeconds() - start) / Double(count)
}

func format(_ seconds: Double) -> String {
    if seconds >= 1e-3 { return "\((seconds * 1e5).rounded() / 100) ms" }
    return "\((seconds * 1e8).rounded() / 100) µs"
}

/// The build this program is, whose programs of apps/ it runs: a debug
/// itsme-bench runs a debug load generator and relay.
#if DEBUG
let buildConfiguration = "debug"
#else
let buildConfiguration = "release"
#endif

/// The text of a NUL-terminated C string in `buffer`.
func string(fromCString buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// `n` with thousands separated by commas: 100,000.
func grouped(_ n: Int) -> String {
    let digits = String(n.magnitude)
    var out = ""
    for (i, c) in digits.enumerated() {
        if i > 0 && (digits.count - i) % 3 == 0 { out += "," }
        out.append(c)
    }
    return (n < 0 ? "-" : "") + out
}

/// How much a suite does: the full run, or a smoke run (`--quick`) of
/// seconds through the same code paths, printing the same keys.
struct Scale {
    var quick = false
    /// `--iterations N`: the crypto suite's loops, and what the exchange and
    /// verify suites' runs are drawn from (10,000 by default, 200 quick).
    var iterations: Int?

    var loops: Int { iterations ?? (quick ? 200 : 10_000) }

    /// `full` in a full run, `smoke` in a quick one.
    func count(_ full: Int, quick smoke: Int) -> Int { quick ? smoke : full }
}

/// A suite's figures, printed as one JSON line. A value that is not a
/// finite number (a figure a quick run does not judge, a ratio over a zero)
/// is `null`.
struct Figures {
    var entries: [(String, Double?)] = []
    mutating func add(_ key: String, _ value: Double?) { entries.append((key, value)) }
    func json(suite: String) -> String {
        let body = entries.map { key, value in
            "\"\(key)\": " + (value.map { $0.isFinite ? "\($0)" : "null" } ?? "null")
        }.joined(separator: ", ")
        return "{\"suite\": \"\(suite)\", \(body)}"
    }
}

func cryptoSuite(_ scale: Scale) throws -> Figures {
    var figures = Figures()
    let iterations = scale.loops
    print("crypto suite (\(iterations) iterations where not stated)\(scale.quick ? ", quick" : "")")

    let creations = max(iterations / 10, 10)
    let create = try measure(creations) { _ in
        _ = try Identity.create(store: MemorySecretStore(), name: "Bench")
    }
    print("  identity creation (key pair, contacts key, record saved): \(format(create)) per identity, \(creations) runs")
    figures.add("identity_create_us", create * 1e6)

    let store = MemorySecretStore()
    let pin = PIN(store: store)
    try pin.set("123456")
    let verifications = scale.count(10, quick: 2)
    let verify = try measure(verifications) { _ in try pin.verify("123456", now: 1_800_000_000) }
    print("  PIN verify (Argon2id \(Argon2id.Parameters.interactive), limiter saved twice): \(format(verify)) per check, \(verifications) runs")
    figures.add("pin_verify_ms", verify * 1e3)

    // One guess at an export password costs what one Argon2id at the
    // export's parameters costs (PROTOCOL.md 17.1).
    let exportSalt = [UInt8](repeating: 7, count: Argon2id.saltCount)
    let guesses = scale.count(5, quick: 1)
    let guess = try measure(guesses) { i in
        _ = try Argon2id.deriveKey(password: Array("ABCDEFGHJKMN\(i)".utf8), salt: exportSalt, parameters: .moderate)
    }
    print("  export: Argon2id \(Argon2id.Parameters.moderate), one password guess: \(format(guess)) per guess, \(guesses) runs")
    figures.add("export_guess_ms", guess * 1e3)

    // HKDF for a 32-byte key is one extract and one expand block: two HMACs.
    let ikm = [UInt8](repeating: 0x0b, count: 32)
    let salt = [UInt8](repeating: 1, count: 16)
    let info = Array("itsme-bench-v1".utf8)
    let hkdf = try measure(iterations) { _ in
        _ = try HKDF.derive(ikm: ikm, salt: salt, info: info, count: 32)
    }
    var reused = try SecretBytes(count: 32)
    let hkdfInto = try measure(iterations) { _ in
        try reused.withMutableBytes { try HKDF.derive(ikm: ikm, salt: salt, info: info, into: $0) }
    }
    let allocation = try measure(iterations) { _ in _ = try SecretBytes(count: 32) }
    var out = [UInt8](repeating: 0, count: 32)
    let raw = measure(iterations) { _ in
        _ = crypto_auth_hmacsha256(&out, ikm, UInt64(ikm.count), salt)  // libsodium keys HMAC with 32 bytes
        _ = crypto_auth_hmacsha256(&out, info, UInt64(info.count), out)
    }
    print("  HKDF-SHA256, 32-byte output, through our layer: \(format(hkdf)) per derivation (new guarded key each time)")
    print("  HKDF-SHA256 into a reused guarded buffer: \(format(hkdfInto)) per derivation")
    print("  the same 2 HMAC-SHA256 calls straight to libsodium: \(format(raw)) per pair")
    print("  one guarded allocation (sodium_malloc + sodium_free of 32 bytes): \(format(allocation))")
    print("  our layer / raw: \((hkdf / raw * 100).rounded() / 100)x with a new key, \((hkdfInto / raw * 100).rounded() / 100)x into a reused buffer")
    figures.add("hkdf_us", hkdf * 1e6)
    figures.add("hkdf_into_us", hkdfInto * 1e6)
    figures.add("raw_hmac_pair_us", raw * 1e6)
    figures.add("secret_alloc_us", allocation * 1e6)
    figures.add("hkdf_over_raw", hkdf / raw)
    figures.add("hkdf_into_over_raw", hkdfInto / raw)
    return figures
}

let suites: [String: (Scale) throws -> Figures] = ["crypto": cryptoSuite, "store": storeSuite, "exchange": exchangeSuite, "verify": verifySuite]

var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "relay" {
    relaySuite(Array(arguments.dropFirst()))
}
if arguments.first == "remote" {
    remoteSuite(Array(arguments.dropFirst()))
}
if arguments.first == "roll-call" {
    rollCallSuite(Array(arguments.dropFirst()))
}
var scale = Scale()
if let i = arguments.firstIndex(of: "--quick") {
    scale.quick = true
    arguments.remove(at: i)
}
if let i = arguments.firstIndex(of: "--iterations"), i + 1 < arguments.count, let n = Int(arguments[i + 1]), n > 0 {
    scale.iterations = n
    arguments.removeSubrange(i...(i + 1))
}
guard arguments.count == 1, let suite = suites[arguments[0]] else {
    print("usage: itsme-bench SUITE [--quick] [--iterations N]\nsuites: \(suites.keys.sorted().joined(separator: ", "))\n"
        + "       itsme-bench relay [--quick] [--rooms N] [--duration S] [--rate R] ... (itsme-bench relay --help)\n"
        + "       itsme-bench remote [--quick] [--runs N] [--relay-bin PATH] [--skip-reference]\n"
        + "       itsme-bench roll-call [--quick] [--participants N] [--runs N] [--relay-bin PATH]\n"
        + "--quick: a smoke run of seconds, the same code paths and the same keys in the JSON line")
    exit(2)
}
do {
    try Sodium.initialize()
    let figures = try suite(scale)
    print(figures.json(suite: arguments[0]))
} catch {
    print("itsme-bench: \(error)")
    exit(1)
}

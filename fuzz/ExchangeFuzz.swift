// libFuzzer target for everything a peer can send during an in-person
// exchange: QR payload texts (ours and the source format) and Bluetooth
// frames. Any input must give a result or a thrown error, never a crash.
// Build and run with scripts/fuzz; the inputs it finds are kept in
// Tests/FuzzCorpus/exchange and replayed by the Swift tests.

@testable import ItsMeKit

private var identities: (Identity, Identity)?

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    if identities == nil {
        try! Sodium.initialize()
        var r1 = DeterministicRandom(seed: [UInt8](repeating: 1, count: 32))
        var r2 = DeterministicRandom(seed: [UInt8](repeating: 2, count: 32))
        identities = (
            try! Identity.create(store: MemorySecretStore(), name: "Fuzz A", random: &r1),
            try! Identity.create(store: MemorySecretStore(), name: "Fuzz B", random: &r2)
        )
    }
    let (a, b) = identities!
    ExchangeFuzzing.run(Array(UnsafeBufferPointer(start: data, count: size)), a, b)
    return 0
}

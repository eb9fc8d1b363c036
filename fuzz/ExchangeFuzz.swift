// libFuzzer target for everything a peer can send during an in-person
// exchange: QR payload texts (ours and the source format) and Bluetooth
// frames. Any input must give a result or a thrown error, never a crash.
// Build and run with scripts/fuzz; the inputs it finds are kept in
// Tests/FuzzCorpus/exchange and replayed by the Swift tests.

import ItsMePrimitives
@testable import ItsMeFuzzing

private var context: ExchangeFuzzing?

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    if context == nil {
        try! Sodium.initialize()
        context = try! ExchangeFuzzing(directory: try! fuzzStoreDirectory("exchange"))
    }
    context!.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

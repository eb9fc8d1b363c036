// libFuzzer target for sealed exchanges, as a host gives them back to
// Exchange.restore, and the records inside them. Any input must give a
// result or a thrown error, never a crash. Build and run with
// scripts/fuzz; the inputs it finds are kept in Tests/FuzzCorpus/sealed
// and replayed by the Swift tests. The body is SealedFuzzing in ItsMeFuzzing.

import ItsMePrimitives
@testable import ItsMeFuzzing

private var context: SealedFuzzing?

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    if context == nil {
        try! Sodium.initialize()
        context = try! SealedFuzzing(directory: try! fuzzStoreDirectory("sealed"))
    }
    context!.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

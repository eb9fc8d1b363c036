// libFuzzer target for everything a peer can send during Online Verify and
// a Security PIN Update (after zero to three honest messages). Any input
// must give a result or a thrown error, never a crash. Build and run with
// scripts/fuzz; the inputs it finds are kept in Tests/FuzzCorpus/verify and
// replayed by the Swift tests.
import ItsMePrimitives
@testable import ItsMeFuzzing

private var context: VerifyFuzzing?

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    if context == nil {
        try! Sodium.initialize()
        context = try! VerifyFuzzing(directory: try! fuzzStoreDirectory("verify"))
    }
    context!.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

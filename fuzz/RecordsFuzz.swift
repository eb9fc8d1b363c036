// libFuzzer target for every record read from outside: identity export
// texts, headers and contents, device transfer offers and messages,
// profile records, approval requests, approvals and enrollments. Any input
// must give a result or a thrown error, never a crash. Build and run with
// scripts/fuzz; the inputs it finds are kept in Tests/FuzzCorpus/records
// and replayed by the Swift tests. The body is RecordsFuzzing in ItsMeFuzzing.

import ItsMePrimitives
@testable import ItsMeFuzzing

private var context: RecordsFuzzing?

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    if context == nil {
        try! Sodium.initialize()
        context = try! RecordsFuzzing()
    }
    context!.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

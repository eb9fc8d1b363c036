// libFuzzer target for everything a person types: short codes, voice
// codes and tags, invite and encryption codes, degradation codes, PINs,
// export passwords, names, photo filenames, scope lists. Any input must
// give a result or a refusal, never a crash. Build and run with
// scripts/fuzz; the inputs it finds are kept in Tests/FuzzCorpus/codes and
// replayed by the Swift tests. The body is CodesFuzzing in ItsMeFuzzing.

import ItsMePrimitives
@testable import ItsMeFuzzing

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    try! Sodium.initialize()
    CodesFuzzing.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

// libFuzzer target for everything a peer can send during Online Verify and
// a Security PIN Update (after zero to three honest messages). Any input
// must give a result or a thrown error, never a crash. Build and run with
// scripts/fuzz; the inputs it finds are kept in Tests/FuzzCorpus/verify and
// replayed by the Swift tests.
#if canImport(Glibc)
import Glibc
#endif
@testable import ItsMeKit

private var context: VerifyFuzzing?

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    if context == nil {
        try! Sodium.initialize()
        // Its contact stores commit on most runs: on a memory file system
        // where there is one, so that fsync does not set the pace.
        let base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"
        var template = Array((base + "/itsme-fuzz-verify-XXXXXX").utf8CString)
        guard mkdtemp(&template) != nil else { fatalError("mkdtemp failed") }
        context = try! VerifyFuzzing(directory: String(cString: template))
    }
    context!.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import ItsMePrimitives
import ItsMeBase
import ItsMeStore
import ItsMeFlows

/// A new directory for a fuzz target's contact stores, made once per
/// process: on a memory file system where there is one, so that fsync does
/// not set the pace of the stores that commit on most runs.
func fuzzStoreDirectory(_ target: String) throws -> String {
    let base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"
    var template = Array((base + "/itsme-fuzz-\(target)-XXXXXX").utf8CString)
    let path = template.withUnsafeMutableBufferPointer { buffer in
        mkdtemp(buffer.baseAddress!).map { String(cString: $0) }
    }
    guard let path else { throw ItsMeError(.internal, "mkdtemp failed for the fuzz target's stores") }
    return path
}

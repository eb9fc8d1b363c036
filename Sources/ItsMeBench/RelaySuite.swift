// itsme-bench relay: the relay's benchmark (rooms held and the relay's
// memory per connection, plaintext and TLS apart; forwarded frames per second
// saturated and the relay's and the load generator's CPU per forwarded
// frame; open-loop latency at 25,000 and 100,000 frames/s offered; invite
// lifecycles per second; and Magic Wormhole's mailbox server as a
// reference; with --cluster, invite lifecycles and forwarded frames per
// second through nginx in front of 2 relays on PostgreSQL against 1 relay on
// SQLite). Each measured phase runs 3 times (--runs) and is reported as a
// median with its spread; a run disturbed by other processes is run again.
// The relay is in the programs' package (apps/); its load generator,
// itsme-relay-load, starts the relay as a child process on 127.0.0.1 and does
// the measuring. This suite finds it (the build of this program's
// configuration: a debug itsme-bench runs apps/.build/debug/itsme-relay-load)
// and runs it in place of this process, passing the options through, so its
// exit status is the suite's.
//
//   swift build -c release --package-path apps
//   swift run -c release itsme-bench relay [--quick] [--runs N] [--rooms N] [--duration S] [--rate R] [--high-rate R] ...
//   swift run -c release itsme-bench relay --cluster   (also needs python3, PostgreSQL and nginx: apps/tests/services.py)
//   swift run -c release itsme-bench relay --load-bin PATH ...   (another build of the load generator)
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

private let loadGenerator = "apps/.build/\(buildConfiguration)/itsme-relay-load"

func isExecutable(_ path: String) -> Bool {
    access(path, X_OK) == 0
}

func currentDirectory() -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    guard getcwd(&buffer, buffer.count) != nil else { return "." }
    return string(fromCString: buffer)
}

/// `relative` under the current directory or one of its parents (so the
/// suite runs from the repository root or below it).
func locate(_ relative: String) -> String? {
    var dir = currentDirectory()
    for _ in 0..<8 {
        let candidate = dir == "/" ? "/" + relative : dir + "/" + relative
        if isExecutable(candidate) { return candidate }
        guard let slash = dir.lastIndex(of: "/"), dir != "/" else { break }
        dir = slash == dir.startIndex ? "/" : String(dir[..<slash])
    }
    return nil
}

func relaySuite(_ arguments: [String]) -> Never {
    var passed = arguments
    var binary: String?
    if let i = passed.firstIndex(of: "--load-bin") {
        guard i + 1 < passed.count else {
            print("itsme-bench relay: --load-bin needs a path")
            exit(2)
        }
        binary = passed[i + 1]
        passed.removeSubrange(i...(i + 1))
    }
    guard let path = binary ?? locate(loadGenerator), isExecutable(path) else {
        print("itsme-bench relay: \(binary ?? loadGenerator) not found; build it first: swift build -c \(buildConfiguration) --package-path apps")
        exit(1)
    }
    fflush(nil)
    var argv: [UnsafeMutablePointer<CChar>?] = ([path] + passed).map { strdup($0) }
    argv.append(nil)
    execv(path, &argv)
    print("itsme-bench relay: cannot run \(path): \(String(cString: strerror(errno)))")
    exit(1)
}

/// itsme-bench roll-call: a roll call of 50 devices (PROTOCOL.md 20), each
/// through the library and its own connection to a relay the load
/// generator starts; the time from the last "I said it" to every device
/// holding every code, each device's library time, and the 1,225 pairwise
/// Online Verify sessions it replaces (RollCallBench.swift in apps/). Runs
/// `itsme-relay-load roll-call` in place of this process.
///
///   swift build -c release --package-path apps
///   swift run -c release itsme-bench roll-call [--quick] [--participants N] [--runs N] [--relay-bin PATH]
func rollCallSuite(_ arguments: [String]) -> Never {
    relaySuite(["roll-call"] + arguments)
}

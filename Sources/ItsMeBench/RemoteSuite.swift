// itsme-bench remote: the exchange at a distance end to end (create the
// invite, accept it, complete it, SAS ready on both sides) between two
// clients through a real itsme-relay on loopback, against Magic Wormhole's
// end-to-end exchange of a short text through its own mailbox server on
// loopback, in the same run and measured the same way. Both clients are
// Python programs (the ItsMe side through the Python binding and its relay
// client over the C library), so the driver is scripts/bench-remote; this
// suite finds it, a Python with magic-wormhole (apps/.build/wormhole-venv,
// which `make bench-remote` fills, else python3), the release library (or
// $ITSME_LIBRARY) and the relay of this program's configuration (a debug
// itsme-bench runs apps/.build/debug/itsme-relay), and runs it in place of
// this process.
//
//   make bench-remote
//   swift run -c release itsme-bench remote [--quick] [--runs N] [--relay-bin PATH] [--skip-reference]
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func remoteSuite(_ arguments: [String]) -> Never {
    guard let script = locate("scripts/bench-remote") else {
        print("itsme-bench remote: scripts/bench-remote not found; run from the repository")
        exit(1)
    }
    let root = String(script.dropLast("/scripts/bench-remote".count))
    let python = locate("apps/.build/wormhole-venv/bin/python") ?? "/usr/bin/env"
    var argv = python.hasSuffix("/env") ? [python, "python3"] : [python]
    argv += [script] + arguments
    if !arguments.contains("--relay-bin") {
        argv += ["--relay-bin", root + "/apps/.build/\(buildConfiguration)/itsme-relay"]
    }
    if getenv("ITSME_LIBRARY") == nil {
        let library = root + "/.build/release/libitsme.so"
        guard access(library, R_OK) == 0 else {
            print("itsme-bench remote: \(library) not found; build it: make lib (or set ITSME_LIBRARY)")
            exit(1)
        }
        setenv("ITSME_LIBRARY", library, 1)
    }
    let pythonPath = root + "/bindings/python"
    if let existing = getenv("PYTHONPATH") {
        setenv("PYTHONPATH", pythonPath + ":" + String(cString: existing), 1)
    } else {
        setenv("PYTHONPATH", pythonPath, 1)
    }
    fflush(nil)
    var cargv: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) }
    cargv.append(nil)
    execv(argv[0], &cargv)
    print("itsme-bench remote: cannot run \(argv[0]): \(String(cString: strerror(errno)))")
    exit(1)
}

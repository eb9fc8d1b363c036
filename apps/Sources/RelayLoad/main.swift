// itsme-relay-load: the load generator behind `itsme-bench relay`. It starts
// the relay as a child process on 127.0.0.1, loads it from this separate
// process and prints a report, then one JSON line with the figures:
//
//   (1) ramp-up of R rooms (2R WebSocket connections) and the relay's memory
//       per held connection; after the rooms close, a second ramp-up shows
//       whether the memory they left is reused
//   (2) saturated throughput: 64-byte binary frames, a bounded window each
//       way; the relay's and the generator's CPU per forwarded frame
//   (3) open-loop latency at two fixed offered rates (intended send times,
//       so a stall is charged to every frame it delays), over --latency-rooms
//       more rooms from a one-thread epoll generator (OpenLoop.swift) while
//       the held rooms stay open; (3c) the same over all the held
//       connections, from the event-loop workers, shown apart
//   (4) invite lifecycles per second over keep-alive HTTP/1.1
//   (5) a reference: the same small room workload through the relay and
//       through Magic Wormhole's mailbox server
//   (6) memory per held TLS connection, on a second relay with a certificate
//   (7) with --cluster: invite lifecycles/s and saturated frames/s through
//       nginx in front of 2 relays on one PostgreSQL database, against 1
//       relay on SQLite, in the same run (Cluster.swift)
//
// Phases 2 to 4 run --runs times; a run disturbed by other processes (more
// than 10 % of a core, from /proc/stat) is discarded and run again; the
// figures are medians, printed with their spread. Bounded in count and time;
// never asserts timing. Exits non-zero when the relay cannot be started or
// the load fails, not when a number is low.
import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import ItsMeRelayProtocol

struct LoadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "itsme-relay-load",
        abstract: "Benchmark itsme-relay on loopback: rooms, throughput, latency, invites, and a Magic Wormhole reference."
    )

    @Option(help: "The relay executable (default: the one of this program's build, apps/.build/release/itsme-relay or apps/.build/debug/itsme-relay, else the one next to this program).")
    var relayBin: String?

    @Flag(help: "Tiny counts and 1-second phases: a smoke run that finishes in seconds, also against a debug build.")
    var quick = false

    @Option(help: "Rooms to hold (two WebSocket connections each; default 5000, --quick 50).")
    var rooms: Int?

    @Option(help: "Rooms opened at a time during the ramp-up.")
    var batch = 500

    @Option(help: "Seconds of each measured frame phase (default 10, --quick 1).")
    var duration: Double?

    @Option(help: "Warm-up seconds before each measured frame phase (default 2, --quick 0.5).")
    var warmup: Double?

    @Option(help: "Frames per second offered in the open-loop latency phase (default 25000, --quick 2000).")
    var rate: Double?

    @Option(help: "Frames per second offered in the second open-loop latency phase (default 100000, --quick 5000).")
    var highRate: Double?

    @Option(help: ArgumentHelp(
        "Rooms of the open-loop latency phase, opened beside the held ones (default 100, --quick 10).",
        discussion: "Their connections take the offered frames round robin; the held rooms stay open and idle. The phase is then run again over all the held connections, reported apart."))
    var latencyRooms: Int?

    @Option(help: "Runs of each measured phase; the figures are their median (default 3, --quick 1).")
    var runs: Int?

    @Option(help: "Rooms held over TLS, on a second relay, to measure a TLS connection's memory (default 1000, --quick 20; 0 skips).")
    var tlsRooms: Int?

    @Option(help: "Frames in flight per direction of a room in the saturated phase.")
    var window = 16

    @Option(help: "Frames in flight per direction of a room in the reference workload.")
    var referenceWindow = 4

    @Option(help: "Concurrent invite lifecycles (default 32, --quick 4).")
    var inviteWorkers: Int?

    @Option(help: "Seconds of the invite phase (default 5, --quick 1).")
    var inviteSeconds: Double?

    @Option(help: "Rooms of the reference workload (default 100, --quick 10).")
    var referenceRooms: Int?

    @Option(help: "Frames per room of the reference workload, half each way (default 200, --quick 20).")
    var referenceFrames: Int?

    @Flag(help: "Skip the Magic Wormhole reference (phase 5).")
    var skipReference = false

    @Flag(help: ArgumentHelp(
        "Also compare 2 relays on PostgreSQL behind nginx with 1 relay on SQLite (phase 7): invite lifecycles/s and saturated frames/s.",
        discussion: "Starts PostgreSQL, nginx (the shipped config) and the relays through apps/tests/services.py; needs python3, PostgreSQL and nginx installed."))
    var cluster = false

    @Option(help: "Python with magic-wormhole-mailbox-server installed (default: apps/.build/wormhole-venv/bin/python, else python3).")
    var wormholePython: String?

    @Option(help: "Event-loop threads of the load generator.")
    var threads = 1

    @Option(help: ArgumentHelp(
        "Niceness the servers run at.",
        discussion: "Load generator and server share the CPUs; a nicer server lets the generator send and read first. On a quiet machine it changed nothing measurable, so the default is none."))
    var serverNice = 0

    mutating func validate() throws {
        if let rooms, rooms < 1 { throw ValidationError("--rooms must be at least 1") }
        if let latencyRooms, latencyRooms < 1 { throw ValidationError("--latency-rooms must be at least 1") }
        if serverNice < 0 || serverNice > 19 { throw ValidationError("--server-nice must be 0 to 19") }
        if batch < 1 || window < 1 || referenceWindow < 1 || threads < 1 {
            throw ValidationError("--batch, --window, --reference-window and --threads must be at least 1")
        }
        if let rate, rate <= 0 { throw ValidationError("--rate must be positive") }
        if let highRate, highRate <= 0 { throw ValidationError("--high-rate must be positive") }
        if let runs, runs < 1 { throw ValidationError("--runs must be at least 1") }
        if let tlsRooms, tlsRooms < 0 { throw ValidationError("--tls-rooms must be 0 or more") }
        if let duration, duration <= 0 { throw ValidationError("--duration must be positive") }
        if let referenceFrames, referenceFrames < 2 { throw ValidationError("--reference-frames must be at least 2") }
    }

    func run() throws {
        let settings = Settings(
            rooms: rooms ?? (quick ? 50 : 5000),
            batch: batch,
            duration: duration ?? (quick ? 1 : 10),
            warmup: warmup ?? (quick ? 0.5 : 2),
            rate: rate ?? (quick ? 2000 : 25000),
            highRate: highRate ?? (quick ? 5000 : 100_000),
            runs: runs ?? (quick ? 1 : 3),
            tlsRooms: tlsRooms ?? (quick ? 20 : 1000),
            window: window,
            referenceWindow: referenceWindow,
            inviteWorkers: inviteWorkers ?? (quick ? 4 : 32),
            inviteSeconds: inviteSeconds ?? (quick ? 1 : 5),
            referenceRooms: referenceRooms ?? (quick ? 10 : 100),
            referenceFrames: referenceFrames ?? (quick ? 20 : 200),
            latencyRooms: latencyRooms ?? (quick ? 10 : 100),
            skipReference: skipReference,
            cluster: cluster,
            threads: threads,
            serverNice: serverNice,
            quick: quick
        )
        guard let relay = (relayBin ?? defaultRelay()).map(absolute) else {
            fatal("no relay executable: build it with `swift build -c \(buildConfiguration) --package-path apps`, or pass --relay-bin")
        }
        guard FileManager.default.isExecutableFile(atPath: relay) else {
            fatal("\(relay) is not an executable: build it with `swift build -c \(buildConfiguration) --package-path apps`")
        }
        let python = wormholePython.map(absolute)
            ?? locate("apps/.build/wormhole-venv/bin/python", sibling: "../../wormhole-venv/bin/python")
            ?? "/usr/bin/env"
        var bench = Bench(settings: settings, relayPath: relay, python: python)
        bench.run()
    }
}

/// The servers run in a temporary directory: paths must not be relative.
func absolute(_ path: String) -> String {
    path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
}

struct Settings {
    var rooms: Int
    var batch: Int
    var duration: Double
    var warmup: Double
    var rate: Double
    var highRate: Double
    var runs: Int
    var tlsRooms: Int
    var window: Int
    var referenceWindow: Int
    var inviteWorkers: Int
    var inviteSeconds: Double
    var referenceRooms: Int
    var referenceFrames: Int
    var latencyRooms: Int
    var skipReference: Bool
    var cluster: Bool
    var threads: Int
    var serverNice: Int
    var quick: Bool

    /// The two offered rates of phase 3, with the name the figures' keys
    /// give each: `latency_p99_ms_at_rate`, `latency_p99_ms_at_high_rate`.
    var offeredRates: [(String, Double)] { [("rate", rate), ("high_rate", highRate)] }

    /// `executable` and `arguments` behind nice(1), when asked and present.
    func niced(_ executable: String, _ arguments: [String]) -> (String, [String]) {
        let nice = "/usr/bin/nice"
        guard serverNice > 0, FileManager.default.isExecutableFile(atPath: nice) else { return (executable, arguments) }
        return (nice, ["-n", String(serverNice), executable] + arguments)
    }
}

/// The servers still running, stopped by `fatal`.
nonisolated(unsafe) var runningServers: [ChildServer] = []
nonisolated(unsafe) var temporaryDirectory: String?

func cleanUp() {
    for server in runningServers { server.stop(seconds: 5) }
    runningServers = []
    if let temporaryDirectory { try? FileManager.default.removeItem(atPath: temporaryDirectory) }
    temporaryDirectory = nil
}

func fatal(_ message: String) -> Never {
    say("itsme-relay-load: error: \(message)")
    cleanUp()
    exit(1)
}

/// Waits for a future on the main thread, or dies with `what`.
func settle<T: Sendable>(_ future: EventLoopFuture<T>, _ what: String) -> T {
    do { return try future.wait() } catch { fatal("\(what): \(error)") }
}

struct Bench {
    let settings: Settings
    let relayPath: String
    let python: String
    var figures: [(String, Double)] = []
    var problems: [String] = []
    var group: MultiThreadedEventLoopGroup!
    var workers: [Worker] = []

    init(settings: Settings, relayPath: String, python: String) {
        self.settings = settings
        self.relayPath = relayPath
        self.python = python
    }

    mutating func add(_ key: String, _ value: Double) { figures.append((key, value)) }

    // MARK: - helpers over all workers

    func totals() -> WorkerStats {
        var total = WorkerStats()
        for worker in workers {
            let s = settle(worker.snapshot(), "reading counters")
            total.opened += s.opened
            total.readyRooms += s.readyRooms
            total.failures += s.failures
            if total.firstFailure == nil { total.firstFailure = s.firstFailure }
            total.unexpectedCloses += s.unexpectedCloses
            for (code, count) in s.closeCodes { total.closeCodes[code, default: 0] += count }
            total.sent += s.sent
            total.received += s.received
            total.completedSides += s.completedSides
            total.firstSend = min(total.firstSend, s.firstSend)
            total.lastReceive = max(total.lastReceive, s.lastReceive)
            total.maxSendLag = max(total.maxSendLag, s.maxSendLag)
            total.scheduleDone = total.scheduleDone && s.scheduleDone
            total.histogram.merge(s.histogram)
            total.transit.merge(s.transit)
            total.sendLag.merge(s.sendLag)
            for (i, h) in s.perSecond.enumerated() {
                if total.perSecond.count <= i { total.perSecond.append(Histogram()) }
                total.perSecond[i].merge(h)
            }
        }
        return total
    }

    func onAll(_ what: String, _ body: (Worker) -> EventLoopFuture<Void>) {
        for worker in workers { settle(body(worker), what) }
    }

    /// Polls until `done` or `seconds` pass; returns the last totals.
    func poll(seconds: Double, until done: (WorkerStats) -> Bool) -> (WorkerStats, Bool) {
        let deadline = monoNanos() + UInt64(seconds * 1e9)
        while true {
            let t = totals()
            if done(t) { return (t, true) }
            if monoNanos() > deadline { return (t, false) }
            usleep(5_000)
        }
    }

    /// Fails the run if connections failed or were closed by the server.
    func checkHealth(_ phase: String, _ t: WorkerStats) {
        if t.failures > 0 {
            fatal("\(phase): \(t.failures) failures, the first: \(t.firstFailure ?? "?")")
        }
        if t.unexpectedCloses > 0 || !t.closeCodes.isEmpty {
            let codes = t.closeCodes.sorted { $0.key < $1.key }.map { "\($0.value) with \($0.key)" }.joined(separator: ", ")
            fatal("\(phase): the server closed \(t.unexpectedCloses) connections (close frames: \(codes.isEmpty ? "none" : codes))")
        }
    }

    func distribute(_ rooms: [LoadRoom]) -> [[LoadRoom]] {
        var shares = [[LoadRoom]](repeating: [], count: workers.count)
        for room in rooms { shares[room.index % workers.count].append(room) }
        return shares
    }

    // MARK: - the run

    mutating func run() {
        let limit = raiseOpenFileLimit()
        let needed = max(settings.rooms, settings.tlsRooms) * 2 + 2 * settings.latencyRooms + 2 * settings.inviteWorkers + 2 * settings.referenceRooms + 64
        if UInt64(needed) > limit {
            fatal("\(needed) open files needed, the limit is \(limit) (ulimit -n)")
        }
        let dir: String
        do { dir = try makeTemporaryDirectory() } catch { fatal("\(error)") }
        temporaryDirectory = dir

        let relay = startRelay(dir: dir, name: "itsme-relay", database: "relay.sqlite", extra: [])
        guard let port = relay.waitForPort(seconds: 60) else {
            usleep(200_000)
            fatal("the relay did not print `itsme-relay listening on http://127.0.0.1:PORT` (\(relay.process.isRunning ? "still running" : "exited")): \(relay.tail())")
        }
        let baseline = procStatus(relay.pid)

        group = MultiThreadedEventLoopGroup(numberOfThreads: settings.threads)
        var loops: [EventLoop] = []
        for loop in group.makeIterator() { loops.append(loop) }
        workers = loops.enumerated().map { Worker(loop: $0.element, index: $0.offset) }

        say("itsme-bench relay: \(relayPath) (pid \(relay.pid)) on 127.0.0.1:\(port); load generator pid \(getpid()), "
            + "\(settings.threads) event-loop thread\(settings.threads == 1 ? "" : "s"); \(ProcessInfo.processInfo.activeProcessorCount) CPUs; open-file limit \(limit)")
        say("  relay at start: VmRSS \(mib(baseline["VmRSS"] ?? 0))" + (settings.serverNice > 0 ? "; servers run at nice \(settings.serverNice)" : ""))
        say("  each measured phase runs \(settings.runs) times; a run in which other processes took more than 10 % of a core is discarded and run again "
            + "(at most \(settings.runs * 3) attempts); figures are the median, with the spread (min - max) of the runs kept")

        let first = ramp(relay: relay, port: port, baseline: baseline, rooms: settings.rooms, tls: nil, label: "(1) ramp-up")
        add("rooms", Double(settings.rooms))
        add("connections", Double(settings.rooms * 2))
        add("rate", settings.rate)
        add("high_rate", settings.highRate)
        add("ramp_s", first.seconds)
        add("relay_vmrss_kib", Double(first.rss))
        add("relay_vmhwm_kib", Double(first.hwm))
        add("relay_bytes_per_connection", first.perConnection)

        say("\n(2) saturated throughput: every connection sends 64-byte binary frames to its peer, \(settings.window) in flight per direction; "
            + "\(fixed(settings.warmup, 1)) s warm-up, \(fixed(settings.duration, 1)) s measured")
        let saturated = repeatedly { $0.throughput(pids: [relay.pid]) }
        summarize(saturated, generatorKey: "saturated_load_cpu_percent")

        let generator = OpenLoopGenerator(port: port)
        if let failure = generator.open(rooms: settings.latencyRooms) { fatal("opening the latency phase's rooms: \(failure)") }
        for (label, rate) in settings.offeredRates {
            let connections = settings.latencyRooms * 2
            say("\n(3) open-loop latency: \(grouped(rate)) frames/s offered on a fixed schedule over the \(grouped(connections)) connections of "
                + "\(grouped(settings.latencyRooms)) more rooms (\(fixed(rate / Double(connections), 2)) frames/s each; the \(grouped(settings.rooms * 2)) "
                + "held connections stay open, idle), from a one-thread epoll generator; latency = arrival - intended send time; "
                + "\(fixed(settings.warmup, 1)) s warm-up, \(fixed(settings.duration, 1)) s measured")
            let runs = repeatedly { $0.latency(relay: relay, rate: rate, label: label, generator: generator) }
            summarize(runs, generatorKey: "latency_load_cpu_percent_at_\(label)")
        }
        generator.closeAll()
        for (label, rate) in settings.offeredRates {
            let connections = settings.rooms * 2
            say("\n(3c) open-loop latency over all the held connections: \(grouped(rate)) frames/s offered over \(grouped(connections)) connections "
                + "(\(fixed(rate / Double(connections), 2)) frames/s each) from the event-loop workers; "
                + "\(fixed(settings.warmup, 1)) s warm-up, \(fixed(settings.duration, 1)) s measured")
            let runs = repeatedly { $0.latency(relay: relay, rate: rate, label: label, generator: nil) }
            summarize(runs, generatorKey: "latency_load_cpu_percent_at_\(label)_all_connections")
        }

        onAll("closing rooms") { $0.closeAll() }
        // The relay hands freed memory back within a second or two of rooms closing.
        sleepSeconds(2.5)
        let after = procStatus(relay.pid)
        say("\n  relay after closing the rooms: VmRSS \(mib(after["VmRSS"] ?? 0)), VmHWM \(mib(after["VmHWM"] ?? 0))")
        add("relay_vmrss_after_close_kib", Double(after["VmRSS"] ?? 0))

        // The same rooms again: resident memory that stayed after the first
        // ramp is the allocator's, reused rather than grown.
        let second = ramp(relay: relay, port: port, baseline: baseline, rooms: settings.rooms, tls: nil, label: "(1b) second ramp-up")
        say("  resident memory at the second ramp's peak: \(mib(second.rss)) against \(mib(first.rss)) at the first "
            + "(\(second.rss <= first.rss + first.rss / 20 ? "reused" : "grown by \(mib(second.rss - first.rss))"))")
        add("relay_vmrss_second_ramp_kib", Double(second.rss))
        onAll("closing rooms") { $0.closeAll() }
        sleepSeconds(2.5)
        let afterSecond = procStatus(relay.pid)
        say("  relay after closing them again: VmRSS \(mib(afterSecond["VmRSS"] ?? 0))")
        add("relay_vmrss_after_second_close_kib", Double(afterSecond["VmRSS"] ?? 0))

        let count = settings.inviteWorkers
        say("\n(4) invites: \(count) concurrent lifecycles for \(fixed(settings.inviteSeconds, 1)) s, each an inviter and an invitee on their own "
            + "keep-alive HTTP/1.1 connection: create, accept, post 64 bytes each way, fetch each way, delete (7 requests)")
        let invited = repeatedly { $0.invites(pids: [relay.pid], port: port, count: count) }
        summarize(invited, generatorKey: nil)

        if !settings.skipReference {
            reference(relay: relay, port: port, dir: dir)
        }

        let peak = procStatus(relay.pid)["VmHWM"] ?? 0
        let stopped = relay.stop()
        runningServers.removeAll { $0 === relay }
        say("\nrelay stopped with SIGTERM in \(fixed(stopped.seconds, 2)) s (exit status \(stopped.status.map(String.init) ?? "?")\(stopped.killed ? ", killed after 15 s" : "")); peak memory over the whole run: VmHWM \(mib(peak))")
        add("relay_vmhwm_run_kib", Double(peak))

        if settings.tlsRooms > 0 { tlsMemory(dir: dir) }
        if settings.cluster { clusterComparison(dir: dir) }
        try? group.syncShutdownGracefully()

        printTargets()
        let body = figures.map { "\"\($0.0)\": \(fixed($0.1, 3))" }.joined(separator: ", ")
        say("{\"suite\": \"relay\", \(body)}")
        cleanUp()
        if !problems.isEmpty {
            say("itsme-relay-load: error: \(problems.joined(separator: "; "))")
            exit(1)
        }
    }

    /// The limits of a relay under load: `connections` open connections
    /// from this one address, rates that no phase reaches, rooms kept
    /// while a phase pauses.
    static func loadLimits(connections: Int) -> [String] {
        ["--max-connections", String(connections), "--max-connections-per-address", String(connections),
         "--lookup-rate", "1000000", "--create-rate", "1000000", "--group-join-rate", "1000000", "--room-idle", "600"]
    }

    func startRelay(dir: String, name: String, database: String, extra: [String]) -> ChildServer {
        let maxConnections = max(12_000, max(settings.rooms, settings.tlsRooms) * 2 + 2 * settings.latencyRooms + 2 * settings.inviteWorkers + 2 * settings.referenceRooms + 64)
        do {
            let (executable, arguments) = settings.niced(relayPath, [
                "--host", "127.0.0.1", "--port", "0", "--database", dir + "/" + database]
                + Self.loadLimits(connections: maxConnections) + extra)
            let relay = try ChildServer(
                name: name, executable: executable, arguments: arguments,
                directory: dir, logPath: dir + "/\(name).log", portIn: relayPort)
            runningServers.append(relay)
            return relay
        } catch {
            fatal("cannot start \(relayPath): \(error)")
        }
    }

    // MARK: repeated runs

    /// One run of a measured phase: its figures, and the CPU other
    /// processes took meanwhile (percent of one core).
    struct Measured {
        var figures: [(String, Double)] = []
        var others = 0.0
        mutating func add(_ key: String, _ value: Double) { figures.append((key, value)) }
    }

    /// `settings.runs` runs of a phase; a run disturbed by other processes
    /// (more than 10 % of a core) is discarded and run again, up to three
    /// times the runs asked for; if too few quiet runs remain, the disturbed
    /// ones are kept and the figures marked noisy.
    mutating func repeatedly(discarding: Bool = true, _ once: (inout Bench) -> Measured) -> (kept: [Measured], noisy: Bool) {
        var quiet: [Measured] = []
        var disturbed: [Measured] = []
        var attempts = 0
        while quiet.count < settings.runs && attempts < settings.runs * 3 {
            attempts += 1
            let run = once(&self)
            if discarding && run.others > 10 {
                say("  run \(attempts) discarded: other processes took \(grouped(run.others)) % of a core")
                disturbed.append(run)
            } else {
                quiet.append(run)
            }
        }
        if quiet.count >= settings.runs { return (quiet, false) }
        let kept = quiet + disturbed.sorted { $0.others < $1.others }.prefix(settings.runs - quiet.count)
        return (kept, true)
    }

    /// Prints each figure's median and spread over the runs, and records
    /// the median (and the min and max) as the figure.
    mutating func summarize(_ result: (kept: [Measured], noisy: Bool), generatorKey: String?) {
        guard let first = result.kept.first else { return }
        let generatorBound = generatorKey.map { key in
            median(result.kept.compactMap { $0.figures.first { $0.0 == key }?.1 }) > 90
        } ?? false
        say("  median of \(result.kept.count) run\(result.kept.count == 1 ? "" : "s") (min - max):"
            + (result.noisy ? " NOISY: other processes took more than 10 % of a core in some of these runs" : "")
            + (generatorBound ? " GENERATOR-BOUND: the load generator used more than 90 % of a core" : ""))
        for (key, _) in first.figures {
            let values = result.kept.compactMap { $0.figures.first { $0.0 == key }?.1 }
            let mid = median(values)
            say("    \(key) \(fixed(mid, 3)) (\(fixed(values.min() ?? 0, 3)) - \(fixed(values.max() ?? 0, 3)))")
            add(key, mid)
            add(key + "_min", values.min() ?? 0)
            add(key + "_max", values.max() ?? 0)
        }
        if let generatorKey { add(generatorKey.replacingOccurrences(of: "load_cpu_percent", with: "generator_bound"), generatorBound ? 1 : 0) }
        if result.noisy { add("noisy_" + (first.figures.first?.0 ?? "phase"), 1) }
    }

    func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        let n = sorted.count
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2
    }

    // MARK: (1) ramp-up

    struct Ramp {
        var seconds: Double
        var rss: Int
        var hwm: Int
        var perConnection: Double
    }

    mutating func ramp(relay: ChildServer, port: Int, baseline: [String: Int], rooms total: Int, tls: NIOSSLContext?, label: String) -> Ramp {
        say("\n\(label): \(grouped(total)) rooms = \(grouped(total * 2)) WebSocket connections\(tls == nil ? "" : " over TLS"), "
            + "\(settings.batch) rooms at a time, each room waits for both `peer-joined`")
        let start = monoNanos()
        var opened = 0
        var slowest = 0.0
        let readyBefore = totals().readyRooms
        while opened < total {
            let count = min(settings.batch, total - opened)
            let batchStart = monoNanos()
            let rooms = (opened..<(opened + count)).map { LoadRoom(index: $0, transport: .relay, name: randomID()) }
            for (worker, share) in zip(workers, distribute(rooms)) where !share.isEmpty {
                settle(worker.open(share, port: port, tls: tls) { RelayPath.room($0.name).text }, "opening rooms")
            }
            opened += count
            let target = readyBefore + opened
            let (t, ok) = poll(seconds: 60) { $0.readyRooms >= target || $0.failures > 0 || $0.unexpectedCloses > 0 }
            checkHealth("ramp-up", t)
            if !ok {
                fatal("ramp-up: only \(t.readyRooms - readyBefore) of \(opened) rooms joined within 60 s (\(t.opened) connections upgraded)")
            }
            slowest = max(slowest, Double(monoNanos() - batchStart) / 1e9)
        }
        let seconds = Double(monoNanos() - start) / 1e9
        sleepSeconds(0.2)
        let status = procStatus(relay.pid)
        let rss = status["VmRSS"] ?? 0, hwm = status["VmHWM"] ?? 0
        let perConnection = Double(rss - (baseline["VmRSS"] ?? 0)) * 1024 / Double(total * 2)
        say("  \(grouped(total)) rooms (\(grouped(total * 2)) connections) open and joined in \(fixed(seconds, 2)) s "
            + "(\(grouped(Double(total * 2) / seconds)) connections/s; slowest batch \(fixed(slowest, 2)) s)")
        say("  (c) relay memory at \(grouped(total * 2)) connections: VmRSS \(mib(rss)), VmHWM \(mib(hwm)) "
            + "(\(grouped(perConnection)) bytes per connection above the \(mib(baseline["VmRSS"] ?? 0)) at start); "
            + "threads \(status["Threads"] ?? 0)")
        return Ramp(seconds: seconds, rss: rss, hwm: hwm, perConnection: perConnection)
    }

    /// Resident memory per held TLS connection, on a relay of its own
    /// (with a self-signed certificate made by openssl; skipped without it).
    mutating func tlsMemory(dir: String) {
        let cert = dir + "/cert.pem", key = dir + "/key.pem"
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        openssl.arguments = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                             "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1",
                             "-addext", "subjectAltName=IP:127.0.0.1"]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        do { try openssl.run(); openssl.waitUntilExit() } catch {}
        guard openssl.terminationReason == .exit, openssl.terminationStatus == 0 else {
            say("\n(6) TLS connections' memory: skipped, openssl could not make a certificate")
            return
        }
        let relay = startRelay(dir: dir, name: "itsme-relay-tls", database: "relay-tls.sqlite", extra: ["--tls-cert", cert, "--tls-key", key])
        defer {
            relay.stop(seconds: 10)
            runningServers.removeAll { $0 === relay }
        }
        guard let port = relay.waitForPort(seconds: 60) else {
            say("\n(6) TLS connections' memory: skipped, the TLS relay did not start: \(relay.tail())")
            return
        }
        let context: NIOSSLContext
        do {
            var configuration = TLSConfiguration.makeClientConfiguration()
            // The relay is this run's own child with a certificate made a
            // moment ago: memory is measured here, not verification.
            configuration.certificateVerification = .none
            context = try NIOSSLContext(configuration: configuration)
        } catch {
            say("\n(6) TLS connections' memory: skipped, \(error)")
            return
        }
        let baseline = procStatus(relay.pid)
        let held = ramp(relay: relay, port: port, baseline: baseline, rooms: settings.tlsRooms, tls: context,
                        label: "(6) TLS connections' memory, on a second relay with a certificate")
        add("tls_connections", Double(settings.tlsRooms * 2))
        add("tls_relay_bytes_per_connection", held.perConnection)
        onAll("closing TLS rooms") { $0.closeAll() }
        sleepSeconds(0.5)
    }

    // MARK: (2) saturated throughput

    mutating func throughput(pids: [Int32], warmup: Double? = nil, duration: Double? = nil) -> Measured {
        var m = Measured()
        onAll("starting the throughput phase") { $0.startClosedLoop(window: settings.window, perSide: 0, record: false) }
        sleepSeconds(warmup ?? settings.warmup)
        let first = totals()
        let t1 = monoNanos()
        let meter = CPUMeter(pids: pids)
        sleepSeconds(duration ?? settings.duration)
        let second = totals()
        let t2 = monoNanos()
        let cpu = meter.percent(), used = meter.seconds(), cpuLine = meter.line("relay")
        onAll("stopping") { $0.stopSending() }
        let (drained, ok) = poll(seconds: 15) { $0.received >= $0.sent || $0.failures > 0 }
        checkHealth("throughput", drained)
        if !ok { problems.append("throughput: \(drained.sent - drained.received) frames still in flight 15 s after stopping") }
        let seconds = Double(t2 - t1) / 1e9
        let frames = Double(second.received - first.received)
        let fps = frames / seconds
        say("  (a) \(grouped(frames)) frames forwarded in \(fixed(seconds, 2)) s: \(grouped(fps)) frames/s; "
            + "relay \(fixed(used.server / max(frames, 1) * 1e6, 2)) us of CPU per frame, load generator \(fixed(used.generator / max(frames, 1) * 1e6, 2)) us")
        say("      " + cpuLine)
        m.others = cpu.others
        m.add("saturated_frames_per_s", fps)
        m.add("relay_cpu_us_per_frame", used.server / max(frames, 1) * 1e6)
        m.add("load_cpu_us_per_frame", used.generator / max(frames, 1) * 1e6)
        m.add("saturated_relay_cpu_percent", cpu.server)
        m.add("saturated_load_cpu_percent", cpu.generator)
        m.add("saturated_other_cpu_percent", cpu.others)
        m.add("saturated_interrupt_cpu_percent", cpu.interrupts)
        return m
    }

    // MARK: (3) open-loop latency

    /// One run at `rate` (`rate` is --rate, `high_rate` --high-rate, in the
    /// figures' keys): from `generator` over its rooms, or (nil) from the
    /// event-loop workers over all the held connections.
    mutating func latency(relay: ChildServer, rate: Double, label rateLabel: String, generator: OpenLoopGenerator?) -> Measured {
        var m = Measured()
        let label = rateLabel + (generator == nil ? "_all_connections" : "")
        let span = settings.warmup + settings.duration
        let start = monoNanos() + 50_000_000
        let recordFrom = start + UInt64(settings.warmup * 1e9)
        let recordUntil = start + UInt64(span * 1e9)
        let meter = CPUMeter(pid: relay.pid)
        let t: WorkerStats, ok: Bool
        let cpu: (server: Double, generator: Double, others: Double, interrupts: Double)
        let used: (server: Double, generator: Double), cpuLine: String
        if let generator {
            t = generator.run(start: start, interval: 1e9 / rate, total: Int((rate * span).rounded()),
                              recordFrom: recordFrom, recordUntil: recordUntil, drain: 15)
            (cpu, used, cpuLine) = (meter.percent(), meter.seconds(), meter.line("relay"))
            ok = t.scheduleDone && t.received >= t.sent
        } else {
            (t, ok, cpu, used, cpuLine) = latencyFromWorkers(
                rate: rate, span: span, start: start, recordFrom: recordFrom, recordUntil: recordUntil, meter: meter)
        }
        checkHealth("latency", t)
        if !ok { problems.append("latency at \(grouped(rate)) frames/s\(generator == nil ? " over the held connections" : ""): \(t.sent - min(t.sent, t.received)) of \(t.sent) frames not received 15 s after the schedule ended") }
        let h = t.histogram, lag = t.sendLag, transit = t.transit
        say("  (b) \(grouped(h.total)) frames measured of \(grouped(t.received)) received: p50 \(ms(h.quantile(0.5))), p99 \(ms(h.quantile(0.99))), "
            + "p99.9 \(ms(h.quantile(0.999))), max \(ms(Double(h.maxValue))); generator's send lag p99 \(ms(lag.quantile(0.99))); "
            + "from the actual write p99 \(ms(transit.quantile(0.99)))")
        say("      p99 in each second: " + t.perSecond.map { ms($0.quantile(0.99)).replacingOccurrences(of: " ms", with: "") }.joined(separator: ", ") + " ms")
        say("      " + cpuLine)
        m.others = cpu.others
        m.add("latency_p50_ms_at_\(label)", h.quantile(0.5) / 1e6)
        m.add("latency_p99_ms_at_\(label)", h.quantile(0.99) / 1e6)
        m.add("latency_p999_ms_at_\(label)", h.quantile(0.999) / 1e6)
        m.add("latency_max_ms_at_\(label)", Double(h.maxValue) / 1e6)
        m.add("latency_send_lag_p99_ms_at_\(label)", lag.quantile(0.99) / 1e6)
        m.add("latency_frames_received_at_\(label)", Double(t.received))
        m.add("relay_cpu_us_per_frame_at_\(label)", used.server / Double(max(t.received, 1)) * 1e6)
        m.add("latency_relay_cpu_percent_at_\(label)", cpu.server)
        m.add("latency_load_cpu_percent_at_\(label)", cpu.generator)
        m.add("latency_other_cpu_percent_at_\(label)", cpu.others)
        m.add("latency_interrupt_cpu_percent_at_\(label)", cpu.interrupts)
        return m
    }

    /// The open-loop schedule from the event-loop workers, over all the
    /// held connections; the CPU figures are read when the schedule ends.
    func latencyFromWorkers(rate: Double, span: Double, start: UInt64, recordFrom: UInt64, recordUntil: UInt64, meter: CPUMeter)
        -> (WorkerStats, Bool, (server: Double, generator: Double, others: Double, interrupts: Double), (server: Double, generator: Double), String)
    {
        onAll("resetting") { $0.resetStats() }
        for worker in workers {
            // Each worker's share of the rate, in proportion to its connections.
            let share = Double(distributeCount(worker.index)) / Double(settings.rooms)
            guard share > 0 else { continue }
            let workerRate = rate * share
            let total = Int((workerRate * span).rounded())
            settle(worker.startOpenLoop(start: start, interval: 1e9 / workerRate, total: total,
                                       recordFrom: recordFrom, recordUntil: recordUntil), "starting the latency phase")
        }
        sleepSeconds(span + 0.05)
        let cpu = meter.percent(), used = meter.seconds(), cpuLine = meter.line("relay")
        let (t, ok) = poll(seconds: 15) { ($0.scheduleDone && $0.received >= $0.sent) || $0.failures > 0 }
        return (t, ok, cpu, used, cpuLine)
    }

    /// Rooms of the ramp-up held by worker `index` (rooms go round robin).
    func distributeCount(_ index: Int) -> Int {
        let n = workers.count
        return settings.rooms / n + (index < settings.rooms % n ? 1 : 0)
    }

    // MARK: (4) invites

    mutating func invites(pids: [Int32], port: Int, count: Int) -> Measured {
        var m = Measured()
        let runners = (0..<count).map { InviteRunner(loop: workers[$0 % workers.count].loop, port: port) }
        for runner in runners { settle(runner.connect(), "connecting the invite clients") }
        let meter = CPUMeter(pids: pids)
        let start = monoNanos()
        let deadline = start + UInt64(settings.inviteSeconds * 1e9)
        let done = runners.map { $0.run(until: deadline) }
        for future in done { settle(future, "invite phase") }
        let seconds = Double(monoNanos() - start) / 1e9
        let cpu = meter.percent(), cpuLine = meter.line("relay")
        var histogram = Histogram()
        var lifecycles = 0, failures = 0
        var firstFailure: String?
        for runner in runners {
            let r = settle(runner.loop.submit { (runner.histogram, runner.lifecycles, runner.failures, runner.firstFailure) }, "reading")
            histogram.merge(r.0)
            lifecycles += r.1
            failures += r.2
            if firstFailure == nil { firstFailure = r.3 }
        }
        if failures > 0 { fatal("invites: \(failures) lifecycles failed, the first: \(firstFailure ?? "?")") }
        let perSecond = Double(lifecycles) / seconds
        say("  (d) \(grouped(lifecycles)) lifecycles in \(fixed(seconds, 2)) s: \(grouped(perSecond)) lifecycles/s "
            + "(\(grouped(perSecond * 7)) requests/s); per lifecycle p50 \(ms(histogram.quantile(0.5))), p99 \(ms(histogram.quantile(0.99)))")
        say("      " + cpuLine)
        m.others = cpu.others
        m.add("invite_lifecycles_per_s", perSecond)
        m.add("invite_p50_ms", histogram.quantile(0.5) / 1e6)
        m.add("invite_p99_ms", histogram.quantile(0.99) / 1e6)
        return m
    }

    // MARK: (5) reference

    mutating func reference(relay: ChildServer, port: Int, dir: String) {
        let rooms = settings.referenceRooms, frames = settings.referenceFrames
        say("\n(5) reference: \(rooms) rooms x \(frames) frames of 64 bytes (\(frames / 2) each way, \(settings.referenceWindow) in flight per direction), "
            + "the same client code against both servers; time from first send to last arrival")
        guard let ours = referenceRun(.relay, port: port, server: relay, label: "itsme-relay") else { return }
        add("ref_relay_frames_per_s", ours.fps)
        add("ref_relay_p50_ms", ours.p50 / 1e6)
        add("ref_relay_p99_ms", ours.p99 / 1e6)

        // Magic Wormhole's mailbox server, if its package is installed.
        let pythonArgs = python == "/usr/bin/env" ? ["python3"] : []
        let check = Process()
        check.executableURL = URL(fileURLWithPath: python)
        check.arguments = pythonArgs + ["-c", "import wormhole_mailbox_server, twisted"]
        check.standardError = FileHandle.nullDevice
        check.standardOutput = FileHandle.nullDevice
        do { try check.run(); check.waitUntilExit() } catch {}
        guard check.terminationReason == .exit, check.terminationStatus == 0 else {
            say("  magic-wormhole-mailbox-server: skipped, not importable by \(pythonArgs.first ?? python) "
                + "(`make bench-relay` installs it into apps/.build/wormhole-venv; or pip install magic-wormhole-mailbox-server)")
            return
        }
        let wormhole: ChildServer
        do {
            let (executable, arguments) = settings.niced(python, pythonArgs + [
                "-m", "twisted", "wormhole-mailbox", "--port=tcp:0:interface=127.0.0.1",
                "--channel-db=\(dir)/wormhole.sqlite", "--blur-usage=3600"])
            wormhole = try ChildServer(
                name: "wormhole-mailbox", executable: executable, arguments: arguments,
                directory: dir, logPath: dir + "/wormhole.log", portIn: twistedPort)
        } catch {
            say("  magic-wormhole-mailbox-server: skipped, cannot start \(python): \(error)")
            return
        }
        runningServers.append(wormhole)
        defer {
            wormhole.stop(seconds: 5)
            runningServers.removeAll { $0 === wormhole }
        }
        guard let wormholePort = wormhole.waitForPort(seconds: 30) else {
            say("  magic-wormhole-mailbox-server: skipped, it did not start listening: \(wormhole.tail())")
            return
        }
        guard let theirs = referenceRun(.wormhole, port: wormholePort, server: wormhole, label: "magic-wormhole-mailbox-server \(wormholeVersion())") else { return }
        add("ref_wormhole_frames_per_s", theirs.fps)
        add("ref_wormhole_p50_ms", theirs.p50 / 1e6)
        add("ref_wormhole_p99_ms", theirs.p99 / 1e6)
        say("  itsme-relay / mailbox server: \(fixed(ours.fps / theirs.fps, 1))x the frames per second, "
            + "p50 latency \(fixed(theirs.p50 / max(ours.p50, 1), 1))x lower")
        say("""
              What differs: the relay forwards each binary frame to the one other peer of the room and
              stores nothing. The mailbox server (Twisted, one thread) takes JSON text messages with the
              body in hex (64 bytes travel as ~180 bytes in, ~260 out), inserts each into SQLite and
              commits (its database on this disk, in the run's temporary directory), acknowledges it to
              the sender and sends it to every connection that opened the mailbox, the sender's included
              (an echo the client drops): three outgoing messages per frame where the relay has one.
              Its rooms are set up with bind, claim and open; the relay's with one WebSocket upgrade per
              peer. Neither setup is timed.
            """)
    }

    func wormholeVersion() -> String {
        let check = Process()
        let pipe = Pipe()
        check.executableURL = URL(fileURLWithPath: python)
        check.arguments = (python == "/usr/bin/env" ? ["python3"] : [])
            + ["-c", "import wormhole_mailbox_server; print(wormhole_mailbox_server.__version__)"]
        check.standardOutput = pipe
        check.standardError = FileHandle.nullDevice
        do { try check.run(); check.waitUntilExit() } catch { return "" }
        let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    struct ReferenceResult { var fps: Double; var p50: Double; var p99: Double }

    mutating func referenceRun(_ transport: Transport, port: Int, server: ChildServer, label: String) -> ReferenceResult? {
        let count = settings.referenceRooms, perSide = settings.referenceFrames / 2
        onAll("resetting") { $0.resetStats() }
        let base = 1000 + Int(monoNanos() % 1000) * 1000
        let rooms = (0..<count).map {
            LoadRoom(index: $0, transport: transport, name: transport == .relay ? randomID() : String(base + $0))
        }
        for (worker, share) in zip(workers, distribute(rooms)) where !share.isEmpty {
            settle(worker.open(share, port: port) { room in room.transport == .relay ? RelayPath.room(room.name).text : "/v1" }, "opening reference rooms")
        }
        let before = totals().readyRooms
        let (ready, joined) = poll(seconds: 30) { $0.readyRooms >= before + count || $0.failures > 0 }
        if ready.failures > 0 || !joined {
            let why = ready.failures > 0 ? (ready.firstFailure ?? "?") : "only \(ready.readyRooms - before) of \(count) rooms ready after 30 s"
            onAll("closing") { $0.closeAll() }
            if transport == .relay { fatal("reference through the relay: \(why)") }
            say("  \(label): skipped, \(why)")
            return nil
        }
        onAll("resetting") { $0.resetStats() }
        let meter = CPUMeter(pid: server.pid)
        onAll("starting the reference") { $0.startClosedLoop(window: settings.referenceWindow, perSide: perSide, record: true) }
        let (t, finished) = poll(seconds: 120) { $0.completedSides >= 2 * count || $0.failures > 0 || $0.unexpectedCloses > 0 }
        let cpu = meter.percent()
        onAll("closing") { $0.closeAll() }
        if t.failures > 0 || t.unexpectedCloses > 0 || !finished {
            let why = t.failures > 0 ? (t.firstFailure ?? "?")
                : t.unexpectedCloses > 0 ? "the server closed \(t.unexpectedCloses) connections"
                : "\(grouped(t.received)) of \(grouped(count * perSide * 2)) frames arrived within 120 s"
            if transport == .relay { fatal("reference through the relay: \(why)") }
            say("  \(label): incomplete, \(why)")
            return nil
        }
        let seconds = Double(t.lastReceive - t.firstSend) / 1e9
        let fps = Double(t.received) / seconds
        let h = t.histogram
        say("  \(label): \(grouped(t.received)) frames in \(fixed(seconds * 1000, 1)) ms = \(grouped(fps)) frames/s; "
            + "per frame p50 \(ms(h.quantile(0.5))), p99 \(ms(h.quantile(0.99))), max \(ms(Double(h.maxValue))); CPU (% of one core): server \(grouped(cpu.server)), load generator \(grouped(cpu.generator)), other processes \(grouped(cpu.others))")
        return ReferenceResult(fps: fps, p50: h.quantile(0.5), p99: h.quantile(0.99))
    }

    // MARK: targets

    func printTargets() {
        func value(_ key: String) -> Double? { figures.first { $0.0 == key }?.1 }
        if settings.quick {
            say("\ntargets: not judged in a --quick run (they apply to the default run: 5,000 rooms held, 25,000 and 100,000 frames/s over 100 more)")
            return
        }
        say("\ntargets (printed, not asserted; medians of the runs):")
        func judge(_ what: String, _ key: String, _ met: (Double) -> Bool, _ target: String, _ digits: Int = 2) {
            guard let v = value(key) else { return }
            say("  \(what) \(fixed(v, digits)) (target \(target)): \(met(v) ? "met" : "not met")")
        }
        judge("relay CPU per forwarded frame, us:", "relay_cpu_us_per_frame", { $0 <= 4 }, "at most 4")
        judge("forwarded frames/s saturated:", "saturated_frames_per_s", { $0 >= 150_000 }, "at least 150,000", 0)
        judge("p99 ms at \(grouped(settings.rate)) frames/s:", "latency_p99_ms_at_rate", { $0 < 10 }, "under 10 at 25,000")
        judge("p99 ms at \(grouped(settings.highRate)) frames/s:", "latency_p99_ms_at_high_rate", { $0 < 25 }, "under 25 at 100,000")
        for (label, rate) in settings.offeredRates {
            if let v = value("latency_p99_ms_at_\(label)_all_connections") {
                say("  (shown, not judged) p99 ms at \(grouped(rate)) frames/s over all the \(grouped(settings.rooms * 2)) held connections: \(fixed(v, 2))")
            }
        }
        if let rooms = value("rooms") {
            judge("bytes resident per held plaintext connection at \(grouped(rooms * 2)) connections:", "relay_bytes_per_connection",
                  { $0 <= 10_240 && rooms >= 5000 }, "at most 10 KB at 10,000", 0)
        }
        judge("invite lifecycles/s:", "invite_lifecycles_per_s", { $0 >= 1000 }, "at least 1,000", 0)
    }
}

// `itsme-relay-load roll-call ...`: the roll call's benchmark (RollCallBench.swift).
if CommandLine.arguments.count > 1 && CommandLine.arguments[1] == "roll-call" {
    let done = DispatchSemaphore(value: 0)
    // Detached: the main thread waits below, so nothing may need it.
    Task.detached {
        await RollCallBench.run(Array(CommandLine.arguments.dropFirst(2)))
        done.signal()
    }
    done.wait()
    exit(0)
}
LoadCommand.main()

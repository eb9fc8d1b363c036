// (7) several instances, with --cluster: 2 relays on one PostgreSQL
// database behind nginx (the shipped config; plain HTTP on loopback) against
// 1 relay on SQLite, in the same run: saturated forwarded frames/s over a
// few rooms, and invite lifecycles/s. apps/tests/services.py starts
// PostgreSQL, the relays and nginx (the servers of the multi-instance tests)
// and stops them when its stdin closes. On a machine of 2 CPUs the relays,
// nginx, PostgreSQL and the load generator share the same two cores: the
// comparison measures what nginx, PostgreSQL and a second process cost, not
// how the relay scales.
import Foundation
import ItsMeRelayProtocol

extension Bench {
    mutating func clusterComparison(dir: String) {
        let rooms = settings.quick ? 4 : 16
        let inviters = min(settings.inviteWorkers, 16)
        let warmup = min(settings.warmup, 1), duration = min(settings.duration, 3)
        let cpus = ProcessInfo.processInfo.activeProcessorCount
        say("\n(7) several instances: 2 relays on one PostgreSQL database behind nginx (the shipped config, plain HTTP on loopback) "
            + "against 1 relay on SQLite, in the same run: \(rooms) rooms saturated (\(fixed(warmup, 1)) s warm-up, \(fixed(duration, 1)) s measured), "
            + "then \(inviters) concurrent invite lifecycles for \(fixed(settings.inviteSeconds, 1)) s; each \(settings.runs) times")
        say("  On \(cpus) CPU\(cpus == 1 ? "" : "s") this measures the overhead of nginx, PostgreSQL and a second relay process, not scaling: "
            + "every server and the load generator share the same cores. The relays' CPU is both relays'; nginx and PostgreSQL count "
            + "as other processes, so no run here is discarded for disturbance.")
        guard let script = locate("apps/tests/services.py", sibling: "../../tests/services.py") else {
            problems.append("--cluster: apps/tests/services.py not found (run from the repository)")
            return
        }

        let single = startRelay(dir: dir, name: "itsme-relay-single", database: "relay-single.sqlite", extra: [])
        guard let singlePort = single.waitForPort(seconds: 60) else {
            fatal("the SQLite relay of phase 7 did not start: \(single.tail())")
        }
        say("  1 relay on SQLite (pid \(single.pid)), on 127.0.0.1:\(singlePort):")
        let alone = compare(pids: [single.pid], port: singlePort, rooms: rooms, inviters: inviters, warmup: warmup, duration: duration, prefix: "single_")
        single.stop()
        runningServers.removeAll { $0 === single }

        let maxConnections = max(4096, rooms * 2 + inviters * 2 + 64)
        let cluster: ChildServer
        do {
            cluster = try ChildServer(
                name: "cluster", executable: "/usr/bin/env",
                arguments: ["python3", script, "cluster", "--relay-bin", relayPath, "--instances", "2", "--"]
                    + Self.loadLimits(connections: maxConnections),
                directory: dir, logPath: dir + "/cluster.log", holdInput: true, portIn: clusterPort)
        } catch {
            problems.append("--cluster: cannot start \(script): \(error)")
            return
        }
        runningServers.append(cluster)
        defer {
            cluster.stop(seconds: 60)
            runningServers.removeAll { $0 === cluster }
        }
        guard let port = cluster.waitForPort(seconds: 120) else {
            problems.append("--cluster: PostgreSQL, nginx and the relays did not start: \(cluster.tail())")
            return
        }
        let pids = cluster.output().compactMap { line in line.hasPrefix("relay pid ") ? Int32(line.dropFirst("relay pid ".count)) : nil }
        say("  2 relays on PostgreSQL (pids \(pids.map(String.init).joined(separator: ", "))) behind nginx on 127.0.0.1:\(port):")
        let behind = compare(pids: pids, port: port, rooms: rooms, inviters: inviters, warmup: warmup, duration: duration, prefix: "cluster_")

        say("  2 relays on PostgreSQL behind nginx / 1 relay on SQLite (medians): "
            + "\(fixed(behind.frames / max(alone.frames, 1), 2))x the forwarded frames/s, "
            + "\(fixed(behind.invites / max(alone.invites, 1), 2))x the invite lifecycles/s")
        add("cluster_frames_ratio", behind.frames / max(alone.frames, 1))
        add("cluster_invites_ratio", behind.invites / max(alone.invites, 1))
    }

    /// Saturated frames/s over `rooms` rooms, then invite lifecycles/s, each
    /// `settings.runs` times, against the server on `port`; the medians.
    mutating func compare(pids: [Int32], port: Int, rooms count: Int, inviters: Int, warmup: Double, duration: Double,
                          prefix: String) -> (frames: Double, invites: Double) {
        onAll("resetting") { $0.resetStats() }
        let rooms = (0..<count).map { LoadRoom(index: $0, transport: .relay, name: randomID()) }
        let before = totals().readyRooms
        for (worker, share) in zip(workers, distribute(rooms)) where !share.isEmpty {
            settle(worker.open(share, port: port) { RelayPath.room($0.name).text }, "opening rooms")
        }
        let (ready, joined) = poll(seconds: 30) { $0.readyRooms >= before + count || $0.failures > 0 || $0.unexpectedCloses > 0 }
        checkHealth("phase 7 rooms", ready)
        if !joined { fatal("phase 7: only \(ready.readyRooms - before) of \(count) rooms joined within 30 s") }
        let saturated = repeatedly(discarding: false) { $0.throughput(pids: pids, warmup: warmup, duration: duration) }
        onAll("closing rooms") { $0.closeAll() }
        sleepSeconds(0.5)
        let invited = repeatedly(discarding: false) { $0.invites(pids: pids, port: port, count: inviters) }
        let frames = select(saturated, ["saturated_frames_per_s", "relay_cpu_us_per_frame", "saturated_relay_cpu_percent",
                                        "saturated_load_cpu_percent", "saturated_other_cpu_percent"], prefix: prefix)
        let invites = select(invited, ["invite_lifecycles_per_s", "invite_p50_ms", "invite_p99_ms"], prefix: prefix)
        summarize(frames, generatorKey: nil)
        summarize(invites, generatorKey: nil)
        func middle(_ result: (kept: [Measured], noisy: Bool), _ key: String) -> Double {
            median(result.kept.compactMap { $0.figures.first { $0.0 == prefix + key }?.1 })
        }
        return (middle(frames, "saturated_frames_per_s"), middle(invites, "invite_lifecycles_per_s"))
    }

    /// The figures named `keys` of each run, renamed with `prefix`.
    func select(_ result: (kept: [Measured], noisy: Bool), _ keys: [String], prefix: String) -> (kept: [Measured], noisy: Bool) {
        let kept = result.kept.map { run in
            var m = Measured()
            m.others = run.others
            for (key, value) in run.figures where keys.contains(key) { m.add(prefix + key, value) }
            return m
        }
        return (kept, result.noisy)
    }
}

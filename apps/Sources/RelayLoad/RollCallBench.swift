// itsme-relay-load roll-call (run by `itsme-bench roll-call`): a roll call
// of N participants (default 50, PROTOCOL.md 20), each device in this
// process through the library and its own group-room connection to a real
// relay started as a child process on 127.0.0.1. Every pair of devices has
// exchanged (by QR code, through the library, before the clock starts).
// Prints, per run and as the median and spread over --runs runs:
//   roster_converged_after_last_join_s
//                             from the moment the last device starts
//                             connecting to the room to every device
//                             holding the same roster of all N
//   messages_per_join         the messages all devices sent because of the
//                             last join (PROTOCOL.md 20.6: at most 3M + 3
//                             with M = N - 1 present), counted until every
//                             device's due VIEW went out
//   ready_after_last_said_s   from the last device's "I said it" to every
//                             device holding (opened) every other's code
//   device_cpu_ms             the CPU one device spends in the library over
//                             the whole roll call, its creation included
//                             (the calling thread's CPU clock around each
//                             call; median over devices)
// and, in the same run, the cost of the N(N-1)/2 pairwise Online Verify
// sessions the roll call replaces (both sides, in memory, no relay).
// Never asserts timing; exits non-zero only when the run cannot be made.
import Foundation
import ItsMeKit
import NIOPosix
import RelayClient

enum RollCallBench {
    struct Options {
        var participants = 50
        var runs = 3
        var relayBin: String?
    }

    /// The options; `--quick`, a smoke run of seconds through the same code
    /// paths and JSON keys, has 5 participants and 1 run unless told.
    static func parse(_ arguments: [String]) -> Options {
        var options = Options()
        var participants: Int?, runs: Int?, quick = false
        var i = 0
        func value() -> String {
            i += 1
            guard i < arguments.count else {
                print("itsme-relay-load roll-call: \(arguments[i - 1]) needs a value")
                exit(2)
            }
            return arguments[i]
        }
        while i < arguments.count {
            switch arguments[i] {
            case "--participants": participants = Int(value()) ?? 0
            case "--runs": runs = Int(value()) ?? 0
            case "--relay-bin": options.relayBin = value()
            case "--quick": quick = true
            case "-h", "--help":
                print("usage: itsme-relay-load roll-call [--quick] [--participants N (2 to 50; default 50, --quick 5)] [--runs N (default 3, --quick 1)] [--relay-bin PATH]")
                exit(0)
            default:
                print("itsme-relay-load roll-call: unknown option \(arguments[i])")
                exit(2)
            }
            i += 1
        }
        options.participants = participants ?? (quick ? 5 : 50)
        options.runs = runs ?? (quick ? 1 : 3)
        guard (2...RollCall.maxParticipants).contains(options.participants), options.runs >= 1 else {
            print("itsme-relay-load roll-call: --participants is 2 to \(RollCall.maxParticipants), --runs at least 1")
            exit(2)
        }
        return options
    }

    /// One device: its store, its roll call and its connection, used by one
    /// task at a time (the lock), and the CPU its library calls used.
    final class Device: @unchecked Sendable {
        let store: ContactStore
        let fingerprint: String
        var random = SystemRandom()
        var call: RollCall?
        var room: GroupRoom?
        var cpuTime = 0.0
        var saidFrom: Set<[UInt8]> = []
        var sent = 0
        /// Messages sent, by type (HELLO 1, SAID 2, VIEW 3).
        var sentByType: [UInt8: Int] = [:]
        var readyAt = 0.0
        let lock = NSLock()

        init(store: ContactStore, fingerprint: String) {
            self.store = store
            self.fingerprint = fingerprint
        }

        /// Runs `body` on the roll call under the lock, counting its CPU.
        /// The library's calls are synchronous: the calling thread's CPU
        /// clock, read before and after, is what the call used.
        func timed<T>(_ body: (RollCall) throws -> T) rethrows -> T? {
            lock.lock()
            defer { lock.unlock() }
            guard let call else { return nil }
            let start = RollCallBench.threadCPU()
            defer { cpuTime += RollCallBench.threadCPU() - start }
            return try body(call)
        }

        /// A new roll call of `meeting` for this device.
        func reset(meeting: RemoteCode, now: Int64) throws {
            try lock.withLock {
                saidFrom = []
                sent = 0
                sentByType = [:]
                readyAt = 0
                let start = RollCallBench.threadCPU()
                defer { cpuTime = RollCallBench.threadCPU() - start }
                call = try RollCall(store: store, meetingCode: meeting, now: now, random: &random)
            }
        }

        /// A sealed code taken from `speaker` (its roll-call key); the time
        /// once all `n - 1` are in (a SAID sent again counts once).
        func countSaid(from speaker: [UInt8], of n: Int) {
            lock.withLock {
                saidFrom.insert(speaker)
                if saidFrom.count == n - 1 && readyAt == 0 { readyAt = RollCallBench.monotonic() }
            }
        }

        /// Sends what the roll call has queued.
        func flush() async throws {
            while let message = try timed({ try $0.takeOutgoing() }) ?? nil {
                try await room?.send(message)
                lock.withLock {
                    sent += 1
                    sentByType[message[1], default: 0] += 1
                }
            }
        }

        var sentCount: Int { lock.withLock { sent } }
    }

    static func monotonic() -> Double { seconds(of: CLOCK_MONOTONIC) }

    /// The CPU time the calling thread has used.
    static func threadCPU() -> Double { seconds(of: CLOCK_THREAD_CPUTIME_ID) }

    static func seconds(of clock: clockid_t) -> Double {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }

    static func run(_ arguments: [String]) async {
        let options = parse(arguments)
        do {
            try await measure(options)
        } catch {
            print("itsme-relay-load roll-call: error: \(error)")
            exit(1)
        }
    }

    static func measure(_ options: Options) async throws {
        try Sodium.initialize()
        let n = options.participants
        guard let relayPath = options.relayBin ?? defaultRelay() else {
            throw LoadError("no itsme-relay: build it (swift build -c \(buildConfiguration) --package-path apps) or pass --relay-bin")
        }
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        print("roll call of \(n) devices through \(relayPath)")
        // Everyone exchanges with everyone, by QR code through the library.
        let now = Int64(Date().timeIntervalSince1970)
        var identities: [Identity] = []
        var devices: [Device] = []
        for i in 0..<n {
            let identity = try Identity.create(store: MemorySecretStore(), name: "Person \(i)")
            identities.append(identity)
            devices.append(Device(store: try ContactStore(path: dir + "/\(i).db", identity: identity), fingerprint: identity.fingerprint))
        }
        var random = SystemRandom()
        let setup = monotonic()
        for i in 0..<n {
            for j in (i + 1)..<n {
                let x = try Exchange.qr(identity: identities[i], store: devices[i].store, now: now, random: &random)
                let y = try Exchange.qr(identity: identities[j], store: devices[j].store, now: now, random: &random)
                guard let mx = x.peekOutgoing(), let my = y.peekOutgoing() else { throw LoadError("an exchange sent nothing") }
                try x.receive(my, now: now)
                try y.receive(mx, now: now)
                _ = try x.confirm(now: now)
                _ = try y.confirm(now: now)
            }
        }
        print("  \(n * (n - 1) / 2) pairs exchanged in \(String(format: "%.1f", monotonic() - setup)) s (not measured)")

        let relay = try ChildServer(
            name: "relay", executable: relayPath,
            arguments: ["--host", "127.0.0.1", "--port", "0", "--database", dir + "/relay.db"] + Bench.loadLimits(connections: 1024),
            directory: dir, logPath: dir + "/relay.log", portIn: relayPort)
        defer { _ = relay.stop() }
        guard let port = relay.waitForPort(seconds: 30) else { throw LoadError("the relay did not start: \(relay.tail())") }
        let url = try RelayURL("http://127.0.0.1:\(port)")

        var readies: [Double] = []
        var cpus: [Double] = []
        var converged: [Double] = []
        var joinMessages: [Double] = []
        for run in 1...options.runs {
            let result = try await rollCall(devices, url: url)
            readies.append(result.ready)
            cpus.append(result.cpu)
            converged.append(result.converged)
            joinMessages.append(Double(result.joinMessages))
            print(
                "  run \(run): roster_converged_after_last_join_s \(String(format: "%.3f", result.converged)), messages_per_join \(result.joinMessages), ready_after_last_said_s \(String(format: "%.3f", result.ready)), device_cpu_ms \(String(format: "%.1f", result.cpu * 1e3))"
            )
        }
        // What the roll call replaces: every pair by Online Verify, in memory.
        let pairs = n * (n - 1) / 2
        let ovStart = monotonic()
        var ovCPU = clock()
        for i in 0..<n {
            for j in (i + 1)..<n {
                try onlineVerify(devices[i].store, devices[j].store, identities[i], identities[j], now: now + 60)
            }
        }
        ovCPU = clock() - ovCPU
        let ovWall = monotonic() - ovStart
        let readyMedian = median(readies), cpuMedian = median(cpus)
        let convergedMedian = median(converged), messagesMedian = median(joinMessages)
        print(
            "roster_converged_after_last_join_s: median \(String(format: "%.3f", convergedMedian)) (min \(String(format: "%.3f", converged.min() ?? 0)), max \(String(format: "%.3f", converged.max() ?? 0)), \(options.runs) runs; target under 1)"
        )
        print("messages_per_join (the last join, \(n - 1) present): median \(Int(messagesMedian)) (bound 3M + 3 = \(3 * (n - 1) + 3))")
        print(
            "ready_after_last_said_s: median \(String(format: "%.3f", readyMedian)) (min \(String(format: "%.3f", readies.min() ?? 0)), max \(String(format: "%.3f", readies.max() ?? 0)), \(options.runs) runs; target under 2)"
        )
        print("device_cpu_ms (CPU of one device in the library, median over devices): median \(String(format: "%.1f", cpuMedian * 1e3)) over \(options.runs) runs")
        print(
            "\(pairs) pairwise Online Verify sessions (both sides, in memory): \(String(format: "%.2f", ovWall)) s wall, \(String(format: "%.2f", Double(ovCPU) / Double(CLOCKS_PER_SEC))) s CPU; the roll call's devices together: \(String(format: "%.2f", cpuMedian * Double(n))) s"
        )
        print(
            "{\"suite\": \"roll-call\", \"participants\": \(n), \"roster_converged_after_last_join_s\": \(convergedMedian), \"converged_min_s\": \(converged.min() ?? 0), \"converged_max_s\": \(converged.max() ?? 0), \"messages_per_join\": \(Int(messagesMedian)), \"messages_per_join_bound\": \(3 * (n - 1) + 3), \"ready_after_last_said_s\": \(readyMedian), \"ready_min_s\": \(readies.min() ?? 0), \"ready_max_s\": \(readies.max() ?? 0), \"device_cpu_ms\": \(cpuMedian * 1e3), \"online_verify_pairs\": \(pairs), \"online_verify_wall_s\": \(ovWall), \"online_verify_cpu_s\": \(Double(ovCPU) / Double(CLOCKS_PER_SEC))}"
        )
    }

    /// One roll call among `devices`: they join one after the other; from
    /// the last join, the time until every device holds the same roster of
    /// all, and the messages that join cost. Then every device confirms the
    /// roster and its code; from the last "I said it", the time until every
    /// device opened every other's sealed code.
    static func rollCall(_ devices: [Device], url: RelayURL) async throws
        -> (ready: Double, cpu: Double, converged: Double, joinMessages: Int)
    {
        var random = SystemRandom()
        let meeting = RemoteCode.random(using: &random)
        let n = devices.count
        func now() -> Int64 { Int64(Date().timeIntervalSince1970) }
        let start = now()
        for device in devices { try device.reset(meeting: meeting, now: start) }
        guard let name = devices[0].call?.roomName else { throw LoadError("no roll call") }
        // The host's loop for each device: the room's events and messages
        // into its roll call, what it queues out.
        func read(_ device: Device, _ room: GroupRoom) -> Task<Void, Never> {
            Task {
                while !Task.isCancelled {
                    guard let event = try? await room.nextEvent(timeout: 60) else { return }
                    switch event {
                    case .joined(let slot, let peers):
                        _ = try? device.timed { try $0.joined(slot: slot, peers: peers, now: now()) }
                    case .peerJoined(let slot):
                        _ = try? device.timed { try $0.peerJoined(slot: slot, now: now()) }
                    case .peerLeft(let slot):
                        _ = try? device.timed { try $0.peerLeft(slot: slot, now: now()) }
                    case .message(let from, let bytes):
                        let taken = (try? device.timed { try $0.receive(bytes, from: from, now: now()) }) != nil
                        if taken && bytes.count > 34 && bytes[1] == 2 { device.countSaid(from: Array(bytes[2..<34]), of: n) }
                    default:
                        break
                    }
                    try? await device.flush()
                }
            }
        }
        // Each device's clock: a tick a second (due VIEWs, re-sends).
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: 1_000_000_000)
                for device in devices where device.room != nil {
                    _ = try? device.timed { try $0.tick(now: now()) }
                    try? await device.flush()
                }
            }
        }
        var readers: [Task<Void, Never>] = []
        defer {
            ticker.cancel()
            readers.forEach { $0.cancel() }
        }
        func holdsAll() -> Bool {
            let rosters = devices.map { $0.timed { ($0.rosterHash, $0.headCount) } ?? nil }
            return rosters.allSatisfy { $0?.1 == n } && Set(rosters.map { $0?.0 ?? [] }).count == 1
        }
        var converged = 0.0
        var joinMessages = 0
        for (i, device) in devices.enumerated() {
            // The last join, into a quiet room: the due VIEWs of the join
            // before it went out at the ticks since (20.6, rule 5), so what
            // is counted is what this join costs.
            if i == n - 1 { try await Task.sleep(nanoseconds: 2_500_000_000) }
            let before = devices.reduce(0) { $0 + $1.sentCount }
            let typesBefore = devices.map { d in d.lock.withLock { d.sentByType } }
            let joinedAt = monotonic()
            let room = try await GroupRoom.join(url, groupID: name, timeout: 20)
            device.room = room
            readers.append(read(device, room))
            guard i == n - 1 else {
                // Until this one holds everyone there before it.
                let deadline = monotonic() + 30
                while (device.timed { $0.headCount } ?? 0) < i + 1 {
                    guard monotonic() < deadline else { throw LoadError("device \(i + 1) did not see the others within 30 s") }
                    try await Task.sleep(nanoseconds: 2_000_000)
                }
                continue
            }
            let deadline = monotonic() + 60
            while !holdsAll() {
                guard monotonic() < deadline else { throw LoadError("the rosters did not converge within 60 s") }
                try await Task.sleep(nanoseconds: 1_000_000)
            }
            converged = monotonic() - joinedAt
            // The due VIEWs go out at the next tick.
            try await Task.sleep(nanoseconds: 2_500_000_000)
            joinMessages = devices.reduce(0) { $0 + $1.sentCount } - before
            var types: [UInt8: Int] = [:]
            for (d, earlier) in zip(devices, typesBefore) {
                for (type, count) in d.lock.withLock({ d.sentByType }) { types[type, default: 0] += count - (earlier[type] ?? 0) }
            }
            print("  the last join: \(types[1] ?? 0) HELLO, \(types[3] ?? 0) VIEW, \(types[2] ?? 0) SAID sent")
        }
        for device in devices {
            try device.timed { call in
                var r = SystemRandom()
                try call.confirmRoster(call.rosterHash, now: now(), random: &r)
            }
        }
        var lastSaid = 0.0
        for device in devices {
            // The moment its owner says "I said it".
            lastSaid = monotonic()
            try device.timed { call in
                var r = SystemRandom()
                try call.confirmSaid(now: now(), random: &r)
            }
            try await device.flush()
        }
        let deadline = monotonic() + 60
        while devices.contains(where: { device in device.lock.withLock { device.readyAt == 0 } }) {
            guard monotonic() < deadline else { throw LoadError("the sealed codes did not all arrive within 60 s") }
            try await Task.sleep(nanoseconds: 1_000_000)
        }
        // Every code opened: each device types every other's (the check).
        let codes = devices.map { $0.timed { $0.myCode } ?? nil }
        let fingerprints = devices.map(\.fingerprint)
        for device in devices {
            try device.timed { call in
                for participant in call.participants where participant.index > 0 {
                    guard let id = participant.contactID, let contact = try? device.store.contact(id: id),
                        let other = fingerprints.firstIndex(of: contact.fingerprint), let code = codes[other]
                    else { continue }
                    _ = try call.enterHeard(code, from: participant.index, now: now())
                }
            }
        }
        let ready = (devices.map { device in device.lock.withLock { device.readyAt } }.max() ?? 0) - lastSaid
        let cpu = median(devices.map { device in device.lock.withLock { device.cpuTime } })
        for device in devices {
            await device.room?.leave()
            device.room = nil
        }
        return (max(ready, 0), cpu, converged, joinMessages)
    }

    /// One Online Verify between two contacts, both sides in memory, to the
    /// confirmed SAS.
    static func onlineVerify(_ a: ContactStore, _ b: ContactStore, _ ia: Identity, _ ib: Identity, now: Int64) throws {
        guard let idA = try a.contacts(fingerprint: ib.fingerprint).first?.id,
            let idB = try b.contacts(fingerprint: ia.fingerprint).first?.id
        else { throw LoadError("a pair that did not exchange") }
        var random = SystemRandom()
        let ra = try OnlineVerifyRendezvous(store: a, contactID: idA, now: now, random: &random)
        let rb = try OnlineVerifyRendezvous(store: b, contactID: idB, now: now, random: &random)
        let room = ra.roomsToJoin[0]
        let sa = try ra.peerJoined(in: room), sb = try rb.peerJoined(in: room)
        var moved = true
        while moved {
            moved = false
            if let m = sa.peekOutgoing() {
                sa.markSent()
                try sb.receive(m, now: now)
                moved = true
            }
            if let m = sb.peekOutgoing() {
                sb.markSent()
                try sa.receive(m, now: now)
                moved = true
            }
        }
        _ = try sa.confirm(now: now)
        _ = try sb.confirm(now: now)
    }
}

// Clock, latency histogram, random numbers, /proc readings and output
// helpers of the load generator.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Monotonic nanoseconds (CLOCK_MONOTONIC, the clock NIODeadline uses).
@inline(__always)
func monoNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

func sleepSeconds(_ seconds: Double) {
    guard seconds > 0 else { return }
    var ts = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
    var left = timespec()
    while nanosleep(&ts, &left) != 0 && errno == EINTR { ts = left }
}

/// Log-linear histogram of nanosecond values: exact below 128, then 128
/// buckets per power of two (under 0.8 % relative error). Fixed size, no
/// allocation when recording; merged by adding counts.
struct Histogram: Sendable {
    private(set) var counts = [UInt64](repeating: 0, count: 128 + 57 * 128)
    private(set) var total: UInt64 = 0
    private(set) var maxValue: UInt64 = 0
    private(set) var sum: Double = 0

    @inline(__always)
    mutating func record(_ value: UInt64) {
        let index: Int
        if value < 128 {
            index = Int(value)
        } else {
            let msb = 63 - value.leadingZeroBitCount
            let shift = msb - 7
            let top = Int(truncatingIfNeeded: value >> UInt64(shift))  // 128...255
            index = 128 + shift * 128 + (top - 128)
        }
        counts[index] &+= 1
        total &+= 1
        sum += Double(value)
        if value > maxValue { maxValue = value }
    }

    mutating func merge(_ other: Histogram) {
        for i in 0..<counts.count { counts[i] &+= other.counts[i] }
        total &+= other.total
        sum += other.sum
        maxValue = max(maxValue, other.maxValue)
    }

    /// The middle of bucket `index`.
    private func value(of index: Int) -> Double {
        if index < 128 { return Double(index) }
        let shift = (index - 128) / 128
        let top = 128 + (index - 128) % 128
        let low = Double(top) * Double(UInt64(1) << UInt64(shift))
        return low + Double(UInt64(1) << UInt64(shift)) / 2
    }

    /// The value at quantile q (0...1), in nanoseconds.
    func quantile(_ q: Double) -> Double {
        guard total > 0 else { return 0 }
        let target = max(UInt64(1), UInt64((q * Double(total)).rounded(.up)))
        var seen: UInt64 = 0
        for i in 0..<counts.count where counts[i] > 0 {
            seen += counts[i]
            if seen >= target { return min(value(of: i), Double(maxValue)) }
        }
        return Double(maxValue)
    }

    var mean: Double { total > 0 ? sum / Double(total) : 0 }
}

/// xorshift64*: cheap per-loop randomness for masking keys.
struct FastRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed | 1 }
    @inline(__always)
    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 2_685_821_657_736_338_717
    }
}

func systemRandom(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
}

private let hexDigits = Array("0123456789abcdef".utf8)

func hex(_ bytes: [UInt8]) -> String {
    var out = [UInt8]()
    out.reserveCapacity(bytes.count * 2)
    for b in bytes {
        out.append(hexDigits[Int(b >> 4)])
        out.append(hexDigits[Int(b & 15)])
    }
    return String(decoding: out, as: UTF8.self)
}

func randomID() -> String { hex(systemRandom(16)) }

/// Fields of /proc/PID/status in KiB (VmHWM, VmRSS, ...); empty if gone.
func procStatus(_ pid: Int32) -> [String: Int] {
    guard let text = readSmallFile("/proc/\(pid)/status") else { return [:] }
    var fields: [String: Int] = [:]
    for line in text.split(separator: "\n") {
        let parts = line.split(whereSeparator: { $0 == ":" || $0 == " " || $0 == "\t" })
        if parts.count >= 2, let value = Int(parts[1]) { fields[String(parts[0])] = value }
    }
    return fields
}

/// User + system CPU seconds of a process (from /proc/PID/stat).
func procCPUSeconds(_ pid: Int32) -> Double? {
    guard let text = readSmallFile("/proc/\(pid)/stat"),
          let close = text.lastIndex(of: ")") else { return nil }
    let fields = text[text.index(after: close)...].split(separator: " ")
    // After "pid (comm)": state is field 3; utime 14 and stime 15.
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// The CPU seconds of `pids` added up; nil if one is gone.
func serverSeconds(_ pids: [Int32]) -> Double? {
    var total = 0.0
    for pid in pids {
        guard let seconds = procCPUSeconds(pid) else { return nil }
        total += seconds
    }
    return total
}

func ownCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

func readSmallFile(_ path: String) -> String? {
    guard let file = fopen(path, "r") else { return nil }
    defer { fclose(file) }
    var out = [UInt8]()
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = fread(&buffer, 1, buffer.count, file)
        if n <= 0 { break }
        out.append(contentsOf: buffer[0..<n])
    }
    return String(decoding: out, as: UTF8.self)
}

/// Raises RLIMIT_NOFILE to the hard limit; returns the soft limit now in force.
func raiseOpenFileLimit() -> UInt64 {
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
    return UInt64(limit.rlim_cur)
}

// MARK: - formatting

/// 12345.6 -> "12,346".
func grouped(_ value: Double) -> String {
    let n = Int(value.rounded())
    let digits = String(abs(n))
    var out = ""
    for (i, c) in digits.enumerated() {
        if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
        out.append(c)
    }
    return n < 0 ? "-" + out : out
}

func grouped(_ value: Int) -> String { grouped(Double(value)) }
func grouped(_ value: UInt64) -> String { grouped(Double(value)) }

/// Fixed decimals without Foundation.
func fixed(_ value: Double, _ decimals: Int) -> String {
    guard value.isFinite else { return "\(value)" }
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let scaled = (abs(value) * scale).rounded()
    let whole = Int(scaled / scale)
    var text = String(whole)
    if decimals > 0 {
        let frac = Int(scaled - Double(whole) * scale)
        var fracText = String(frac)
        while fracText.count < decimals { fracText = "0" + fracText }
        text += "." + fracText
    }
    return value < 0 && scaled != 0 ? "-" + text : text
}

/// Nanoseconds as milliseconds with 2 decimals ("0.43 ms").
func ms(_ nanos: Double) -> String { fixed(nanos / 1e6, nanos < 1e8 ? 2 : 0) + " ms" }

func mib(_ kib: Int) -> String { fixed(Double(kib) / 1024, 1) + " MiB" }

/// Prints and flushes at once (the report is read while it runs).
func say(_ line: String = "") {
    print(line)
    fflush(nil)
}

/// CPU seconds the whole machine spent in processes (user, nice, system,
/// steal), and apart in interrupts (irq, softirq), from /proc/stat. On
/// loopback the kernel's packet processing for the benchmark's own traffic
/// runs as softirq, charged to no process: it is not another process.
func machineBusySeconds() -> (processes: Double, interrupts: Double)? {
    guard let text = readSmallFile("/proc/stat"), let line = text.split(separator: "\n").first, line.hasPrefix("cpu ") else { return nil }
    let fields = line.split(separator: " ").dropFirst().compactMap { Double($0) }
    guard fields.count >= 8 else { return nil }
    // user nice system idle iowait irq softirq steal
    let tick = Double(sysconf(Int32(_SC_CLK_TCK)))
    return ((fields[0] + fields[1] + fields[2] + fields[7]) / tick, (fields[5] + fields[6]) / tick)
}

/// CPU use over an interval: the server's, this process's, and the rest of
/// the machine's (other processes disturb a benchmark on 2 CPUs).
struct CPUMeter {
    let pids: [Int32]
    let wall: UInt64
    let server: Double
    let own: Double
    let machine: (processes: Double, interrupts: Double)

    /// `pids`: the server's processes (their CPU is added up).
    init(pids: [Int32]) {
        self.pids = pids
        wall = monoNanos()
        server = serverSeconds(pids) ?? 0
        own = ownCPUSeconds()
        machine = machineBusySeconds() ?? (0, 0)
    }

    init(pid: Int32) { self.init(pids: [pid]) }

    /// Percent of one core since `init`: (server, generator, other
    /// processes, interrupts).
    func percent() -> (server: Double, generator: Double, others: Double, interrupts: Double) {
        let seconds = max(Double(monoNanos() - wall) / 1e9, 1e-9)
        let server = ((serverSeconds(pids) ?? self.server) - self.server) / seconds * 100
        let own = (ownCPUSeconds() - self.own) / seconds * 100
        let now = machineBusySeconds() ?? machine
        let processes = (now.processes - machine.processes) / seconds * 100
        let interrupts = (now.interrupts - machine.interrupts) / seconds * 100
        return (server, own, max(0, processes - server - own), interrupts)
    }

    /// CPU seconds since `init`: the server's and this process's.
    func seconds() -> (server: Double, generator: Double) {
        ((serverSeconds(pids) ?? server) - server, ownCPUSeconds() - own)
    }

    func line(_ server: String) -> String {
        let p = percent()
        return "CPU (% of one core): \(server) \(grouped(p.server)), load generator \(grouped(p.generator)), other processes \(grouped(p.others)), "
            + "interrupts (the kernel's loopback packet processing) \(grouped(p.interrupts))"
    }
}

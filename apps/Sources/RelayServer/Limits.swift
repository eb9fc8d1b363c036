import Foundation

/// Per-address token buckets: `ratePerMinute` tokens a minute, refilled
/// continuously, holding at most `ratePerMinute`.
final class RateLimiter: @unchecked Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: Double
    }

    private let lock = NSLock()
    private var buckets: [String: Bucket] = [:]
    let ratePerMinute: Double

    init(ratePerMinute: Int) { self.ratePerMinute = Double(max(ratePerMinute, 1)) }

    private static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    private func refreshed(_ key: String, at now: Double) -> Bucket {
        var bucket = buckets[key] ?? Bucket(tokens: ratePerMinute, updated: now)
        bucket.tokens = min(ratePerMinute, bucket.tokens + (now - bucket.updated) * ratePerMinute / 60)
        bucket.updated = now
        return bucket
    }

    /// Seconds until `key` has a token again, or nil if it has one now.
    func retryAfter(_ key: String) -> Int? {
        let now = Self.now()
        return lock.withLock {
            let bucket = refreshed(key, at: now)
            buckets[key] = bucket
            if bucket.tokens >= 1 { return nil }
            return max(1, Int(((1 - bucket.tokens) * 60 / ratePerMinute).rounded(.up)))
        }
    }

    /// Takes a token if there is one; returns the wait otherwise.
    func take(_ key: String) -> Int? {
        let now = Self.now()
        return lock.withLock {
            var bucket = refreshed(key, at: now)
            defer { buckets[key] = bucket }
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                return nil
            }
            return max(1, Int(((1 - bucket.tokens) * 60 / ratePerMinute).rounded(.up)))
        }
    }

    /// Spends a token whether or not there is one (a counted miss).
    func charge(_ key: String) {
        let now = Self.now()
        lock.withLock {
            var bucket = refreshed(key, at: now)
            bucket.tokens = max(bucket.tokens - 1, -ratePerMinute)
            buckets[key] = bucket
        }
    }

    /// Forgets full buckets.
    func prune() {
        let now = Self.now()
        lock.withLock {
            buckets = buckets.filter { refreshed($0.key, at: now).tokens < ratePerMinute }
        }
    }
}

/// The join rate of group rooms (docs/PROTOCOL.md 15.9, `--group-join-rate`):
/// a bucket per client address, the address taken as the other per-address
/// limits take it (the TCP peer, or behind a trusted proxy the address it
/// forwarded).
struct GroupJoinLimit: Sendable {
    let limiter: RateLimiter
    let trustedProxies: TrustedProxies

    /// Takes a join for the client of an upgrade request from `peer` with
    /// these `X-Forwarded-For` values; returns the seconds to wait if the
    /// client has none left.
    func take(peer: String, forwardedFor: [String]) -> Int? {
        let client = trustedProxies.clientAddress(
            peer: peer, forwardedFor: forwardedFor.isEmpty ? nil : forwardedFor.joined(separator: ","))
        return limiter.take(client)
    }
}

/// Open connections, in all and per address. A trusted proxy's
/// connections count in the total but not against the per-address limit:
/// they carry many clients, whom the proxy limits (docs/OPERATIONS.md).
final class ConnectionCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var total = 0
    private var perAddress: [String: Int] = [:]
    let maxTotal: Int
    let maxPerAddress: Int
    let exempt: TrustedProxies

    init(maxTotal: Int, maxPerAddress: Int, exempt: TrustedProxies = TrustedProxies()) {
        self.maxTotal = maxTotal
        self.maxPerAddress = maxPerAddress
        self.exempt = exempt
    }

    /// Counts a new connection; false if it is beyond a limit (then it is
    /// not counted).
    func open(_ address: String) -> Bool {
        let perAddressLimited = !exempt.contains(address)
        return lock.withLock {
            guard total < maxTotal else { return false }
            if perAddressLimited {
                let mine = perAddress[address, default: 0]
                guard mine < maxPerAddress else { return false }
                perAddress[address] = mine + 1
            }
            total += 1
            return true
        }
    }

    func close(_ address: String) {
        let perAddressLimited = !exempt.contains(address)
        lock.withLock {
            total -= 1
            guard perAddressLimited else { return }
            let mine = perAddress[address, default: 1] - 1
            perAddress[address] = mine > 0 ? mine : nil
        }
    }

    var open: Int { lock.withLock { total } }
}

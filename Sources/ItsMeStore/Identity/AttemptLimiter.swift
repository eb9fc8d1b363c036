import ItsMePrimitives
import ItsMeBase

/// Limits guesses at a secret a person types (PIN, export password,
/// degradation code). One rule for all of them: 5 failures are free; the
/// 5th locks further attempts for 5 minutes, and each further failure
/// doubles the wait, up to 24 hours. A success clears the count.
///
/// The state lives in the secret store, so it survives restarts, and a
/// failure is counted *before* the secret is checked: killing the process
/// while the check runs does not erase the attempt.
public struct AttemptLimiter: Sendable {
    /// Consecutive failures allowed before the first lock (5 minutes, doubling
    /// with each further failure up to 24 hours).
    public static let freeFailures: UInt32 = 5
    package static let firstLockSeconds: Int64 = 5 * 60
    package static let maxLockSeconds: Int64 = 24 * 60 * 60
    static let recordVersion: UInt8 = 1

    /// The counter as it stands: failures so far and the wait they impose.
    public struct Status: Equatable, Sendable {
        /// Consecutive failed attempts.
        public let failures: UInt32
        /// Seconds until the next attempt is allowed; 0 if allowed now.
        public let waitSeconds: UInt64
    }

    private struct State {
        var failures: UInt32 = 0
        /// When the current lock started (the time of the failure that set it).
        var lockStart: Int64 = 0
    }

    let store: any SecretStore
    /// Secret store item holding the counter, e.g. `itsme.limiter.pin`.
    package let itemName: String

    /// A limiter whose counter is the item `itsme.limiter.<purpose>` in `store`.
    /// Reads nothing until used.
    package init(store: any SecretStore, purpose: String) {
        self.store = store
        self.itemName = "itsme.limiter." + purpose
    }

    /// The wait imposed after `failures` consecutive failures.
    package static func lockSeconds(failures: UInt32) -> Int64 {
        guard failures >= freeFailures else { return 0 }
        let doublings = failures - freeFailures
        // 300 * 2^9 already exceeds the cap.
        guard doublings < 9 else { return maxLockSeconds }
        return min(firstLockSeconds << Int64(doublings), maxLockSeconds)
    }

    private static func wait(_ state: State, now: Int64) -> Int64 {
        let duration = lockSeconds(failures: state.failures)
        guard duration > 0 else { return 0 }
        let (end, overflow) = state.lockStart.addingReportingOverflow(duration)
        let remaining = overflow ? duration : end - now
        // A clock set back cannot stretch a wait beyond its full length.
        return min(max(remaining, 0), duration)
    }

    /// The failures so far and the seconds to wait at `now` (Unix seconds).
    /// Throws `.invalidArgument` for a time out of range, `.corruptData` for a
    /// malformed counter, `.secretStore` if the store fails.
    public func status(now: Int64) throws -> Status {
        try UnixTime.check(now)
        let state = try load()
        return Status(failures: state.failures, waitSeconds: UInt64(Self.wait(state, now: now)))
    }

    /// Runs `check` if an attempt is allowed at `now`. `check` returns
    /// whether the secret was right. Throws `.locked` (nothing checked or
    /// counted) while a lock lasts, and an error of kind `failure` when the
    /// secret was wrong.
    package func attempt(now: Int64, failure: ItsMeError.Kind, what: String, _ check: () throws -> Bool) throws {
        try UnixTime.check(now)
        // The whole attempt (count, check, resolve) holds the store's
        // exclusive access, so attempts through several handles, threads or
        // processes take turns: each is counted, none sees another's
        // in-flight count as a failure, and the lock applies to all.
        try store.withExclusiveAccess {
            var state = try load()
            let wait = Self.wait(state, now: now)
            if wait > 0 {
                throw ItsMeError(.locked, "too many wrong \(what) attempts: try again in \(wait) seconds")
            }
            // Count first, then check: killing the process during the check
            // cannot erase the attempt.
            let before = state
            state.failures = state.failures == UInt32.max ? UInt32.max : state.failures + 1
            state.lockStart = now
            try save(state)
            let ok: Bool
            do { ok = try check() } catch {
                // Not a guess (e.g. the store failed): give the attempt back.
                try? save(before)
                throw error
            }
            if ok {
                try save(State())
                return
            }
            throw Self.wrongGuess(failures: state.failures, kind: failure, what: what)
        }
    }

    /// The error for a wrong secret, saying what comes next.
    private static func wrongGuess(failures: UInt32, kind: ItsMeError.Kind, what: String) -> ItsMeError {
        let lock = lockSeconds(failures: failures)
        if lock > 0 {
            return ItsMeError(kind, "wrong \(what); locked for \(lock) seconds")
        }
        let left = freeFailures - failures
        return ItsMeError(kind, "wrong \(what); \(left) attempt\(left == 1 ? "" : "s") left before a lockout")
    }

    /// Forgets all failures (after the secret itself was replaced).
    /// Throws the secret store's error if the counter cannot be written.
    package func reset() throws { try store.withExclusiveAccess { try save(State()) } }


    /// Record v1: version (1) | failures (4) | lock start (8), big-endian.
    private func load() throws -> State {
        guard let record = try store.get(itemName) else { return State() }
        return try record.withBytes { bytes in
            var r = RecordReader(bytes, what: "attempt counter")
            let version = try r.byte()
            guard version == Self.recordVersion else {
                throw ItsMeError(.corruptData, "attempt counter has unknown format version \(version)")
            }
            let state = State(failures: try r.uint32(), lockStart: try r.int64())
            try r.finish()
            return state
        }
    }

    private func save(_ state: State) throws {
        var w = try RecordWriter(count: 13)
        w.append(Self.recordVersion)
        w.append(state.failures)
        w.append(state.lockStart)
        let record = w.finish()
        try store.put(itemName, bytes: record)
    }
}

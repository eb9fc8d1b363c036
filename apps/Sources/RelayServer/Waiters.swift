import Foundation

/// Held invite fetches (docs/PROTOCOL.md 15.2): a fetch that found nothing
/// waits here until the invite changes (a post or its end, on this relay or,
/// through the store's feed, on another sharing its database), its time is
/// up, or the relay shuts down. Each invite has a version; a waiter registers
/// against the version it read, so a change between its read and its
/// registration is never missed.
final class InviteWaiters: @unchecked Sendable {
    private struct Waiter {
        let continuation: CheckedContinuation<Void, Never>
    }

    private let lock = NSLock()
    private var versions: [String: UInt64] = [:]
    private var waiters: [String: [UInt64: Waiter]] = [:]
    private var nextKey: UInt64 = 0
    /// Waits whose time was up before they were registered.
    private var timedOut: Set<UInt64> = []
    private var closed = false

    func version(of id: String) -> UInt64 {
        lock.lock()
        defer { lock.unlock() }
        return versions[id, default: 0]
    }

    /// The invite changed: wake everyone waiting on it.
    func changed(_ id: String) {
        lock.lock()
        versions[id, default: 0] &+= 1
        let woken = waiters.removeValue(forKey: id)
        lock.unlock()
        woken?.values.forEach { $0.continuation.resume() }
    }

    /// Changes may have been missed (another relay's feed was down): every
    /// held fetch reads again.
    func changedAll() {
        lock.lock()
        for id in waiters.keys { versions[id, default: 0] &+= 1 }
        let woken = waiters
        waiters = [:]
        lock.unlock()
        for group in woken.values { group.values.forEach { $0.continuation.resume() } }
    }

    /// The invite ended: wake its waiters and forget its version.
    func ended(_ id: String) {
        changed(id)
        lock.lock()
        versions.removeValue(forKey: id)
        lock.unlock()
    }

    /// Waits until `id` moves past `version`, or `seconds` pass, or shutdown.
    /// The timer may fire before the waiter is registered (a wait of a few
    /// microseconds): it then leaves the key in `timedOut`, and the
    /// registration answers at once instead of waiting for nothing.
    func wait(_ id: String, version: UInt64, seconds: Double) async {
        let key: UInt64 = lock.withLock {
            nextKey &+= 1
            return nextKey
        }
        let timeout = Task {
            do {
                try await Task.sleep(for: .nanoseconds(Int64(max(0, seconds) * 1e9)))
            } catch {
                return
            }
            self.resume(id, key)
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            lock.lock()
            if closed || versions[id, default: 0] != version || timedOut.remove(key) != nil {
                lock.unlock()
                continuation.resume()
                return
            }
            waiters[id, default: [:]][key] = Waiter(continuation: continuation)
            lock.unlock()
        }
        timeout.cancel()
        // Once the timer is done, nothing can add the key any more.
        await timeout.value
        lock.withLock { _ = timedOut.remove(key) }
    }

    private func resume(_ id: String, _ key: UInt64) {
        lock.lock()
        let waiter = waiters[id]?.removeValue(forKey: key)
        if waiters[id]?.isEmpty == true { waiters.removeValue(forKey: id) }
        if waiter == nil { timedOut.insert(key) }
        lock.unlock()
        waiter?.continuation.resume()
    }

    var isClosed: Bool { lock.withLock { closed } }

    /// Shutdown: every held fetch answers now, and none waits again.
    func closeAll() {
        lock.lock()
        closed = true
        let all = waiters
        waiters = [:]
        lock.unlock()
        for group in all.values { group.values.forEach { $0.continuation.resume() } }
    }

    /// Drops versions of invites nobody waits on (called by the sweep).
    func prune() {
        lock.lock()
        versions = versions.filter { waiters[$0.key] != nil }
        lock.unlock()
    }
}

import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A mutex that a thread holding it cannot take again: the second
/// acquisition throws the error given instead of trapping, as Swift's
/// `Mutex` does, or deadlocking.
///
/// Every lock that is held across a call into a host (a secret store
/// callback, a random source) is one of these, because the host may call
/// back in on the same thread: a callback that uses the same handle, or
/// Python's garbage collector freeing a handle inside the callback, whose
/// release closes a contact store that raises its mark. Such a call fails
/// with a clear error and the outer call goes on.
package struct CheckedLock: ~Copyable, Sendable {
    private let mutex = Mutex<Void>(())
    /// The thread holding `mutex`, or 0 when none does. Only the holder
    /// writes it, so a thread reading its own ID here holds the lock.
    private let owner = Atomic<UInt>(0)

    package init() {}

    /// Runs `body` holding the lock. Throws `reentered()` without waiting
    /// when the calling thread holds the lock already (from inside `body`),
    /// and rethrows what `body` throws.
    package func withLock<R: ~Copyable>(
        reentered: @autoclosure () -> ItsMeError, _ body: () throws -> R
    ) throws -> R {
        let me = Self.currentThread()
        guard owner.load(ordering: .relaxed) != me else { throw reentered() }
        return try mutex.withLock { _ in
            owner.store(me, ordering: .relaxed)
            defer { owner.store(0, ordering: .relaxed) }
            return try body()
        }
    }

    private static func currentThread() -> UInt {
        #if canImport(Glibc)
            UInt(pthread_self())
        #else
            UInt(bitPattern: pthread_self())
        #endif
    }
}

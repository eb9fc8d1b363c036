// When a contact store's mark is raised after its commits (docs/STORAGE.md,
// "When the mark is raised").
import Glibc
import Synchronization
import ItsMePrimitives
import ItsMeBase

/// Raises one store handle's mark in the identity's secret store. A commit
/// raises it at once when the last raise began `interval` ago or more; a
/// commit sooner waits, and the newest waiting commit is raised when the
/// interval is up: by a thread of the library (so no commit of a burst pays
/// for the mark's fsyncs) when the secret store allows it, else at the
/// handle's next commit after the interval. Closing raises what waits.
final class StoreMarkRaiser: Sendable {
    let secretStore: any SecretStore
    let item: String
    let storeID: [UInt8]

    private struct State {
        var interval: Duration
        /// When the last raise began.
        var lastRaise: ContinuousClock.Instant?
        /// The newest commit not raised yet.
        var pending: StoreManifest?
        var threadRunning = false
        var closed = false
    }

    private let state: Mutex<State>

    init(secretStore: any SecretStore, item: String, storeID: [UInt8], interval: Duration) {
        self.secretStore = secretStore
        self.item = item
        self.storeID = storeID
        state = Mutex(State(interval: interval))
    }

    var interval: Duration {
        get { state.withLock { $0.interval } }
        set { state.withLock { $0.interval = newValue } }
    }

    /// After a commit whose manifest is `manifest`.
    func committed(_ manifest: StoreManifest) {
        enum Next { case raise(StoreManifest), startThread, nothing }
        let now = ContinuousClock.now
        let background = secretStore.allowsLibraryThreads
        let next: Next = state.withLock { s in
            let newest = s.pending.map { $0.commits > manifest.commits ? $0 : manifest } ?? manifest
            if s.threadRunning {
                s.pending = newest  // the thread raises it when its turn comes
                return .nothing
            }
            if let last = s.lastRaise, now - last < s.interval {
                s.pending = newest
                guard background, !s.closed else { return .nothing }
                s.threadRunning = true
                return .startThread
            }
            s.lastRaise = now
            s.pending = nil
            return .raise(newest)
        }
        switch next {
        case .raise(let manifest): raise(manifest)
        case .startThread: startThread()
        case .nothing: break
        }
    }

    /// At the handle's close: raises what waits, on the closing thread; a
    /// running thread stops at its next turn without waiting for it.
    func close() {
        let pending: StoreManifest? = state.withLock { s in
            s.closed = true
            defer { s.pending = nil }
            return s.pending
        }
        if let pending { raise(pending) }
    }

    /// Best effort: the commit stands if the secret store fails, and the
    /// mark then trails until the next commit or open raises it (a file
    /// ahead of its mark is fine). Never lowers the mark.
    private func raise(_ manifest: StoreManifest) {
        try? secretStore.withExclusiveAccess {
            if let mark = try ContactStore.readMark(secretStore, item: item),
                mark.storeID != storeID || mark.commits >= manifest.commits
            {
                return
            }
            try secretStore.put(
                item, bytes: StoreMark(storeID: storeID, commits: manifest.commits, contacts: manifest.counts.contacts).encoded(),
                accessibility: .whenUnlockedThisDeviceOnly)
        }
    }

    /// The thread's turns: sleeps until the interval since the last raise
    /// is up, raises the newest waiting commit, and ends when nothing waits
    /// or the handle closed. It holds the raiser, never the store handle.
    private func run() {
        enum Turn { case sleep(Duration), raise(StoreManifest), end }
        while true {
            let now = ContinuousClock.now
            let turn: Turn = state.withLock { s in
                guard !s.closed, let pending = s.pending else {
                    s.threadRunning = false
                    return .end
                }
                // In slices, so that a closed handle or a new interval is
                // seen soon.
                if let last = s.lastRaise, now - last < s.interval { return .sleep(min(s.interval - (now - last), .milliseconds(10))) }
                s.lastRaise = now
                s.pending = nil
                return .raise(pending)
            }
            switch turn {
            case .sleep(let d):
                let (seconds, attoseconds) = d.components
                var ts = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
                var left = timespec()
                while nanosleep(&ts, &left) != 0 && errno == EINTR { ts = left }
            case .raise(let manifest): raise(manifest)
            case .end: return
            }
        }
    }

    private func startThread() {
        let context = Unmanaged.passRetained(self).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        var thread = pthread_t()
        let rc = pthread_create(&thread, &attributes, { context in
            guard let context else { return nil }
            Unmanaged<StoreMarkRaiser>.fromOpaque(context).takeRetainedValue().run()
            return nil
        }, context)
        if rc != 0 {
            // No thread: what waits is raised at the next commit after the
            // interval, or at close.
            Unmanaged<StoreMarkRaiser>.fromOpaque(context).release()
            state.withLock { $0.threadRunning = false }
        }
    }
}

import Logging
import ServiceLifecycle

/// Periodic work and the shutdown of rooms and held fetches: idle rooms
/// every second, expired invites and stale rate-limit entries every minute;
/// and, for a store several relays share, the feed of invites changed by
/// the others, which wakes the fetches held here.
struct Housekeeping: Service {
    let configuration: RelayConfiguration
    let storage: any RelayStorage
    let clock: RelayClock
    let metrics: RelayMetrics
    let hub: RoomHub
    let waiters: InviteWaiters
    let limiters: [RateLimiter]
    let logger: Logger

    func run() async throws {
        await sweep()
        let watch = Task { [storage, waiters] in
            await storage.watchInvites { id in
                if let id { waiters.changed(id) } else { waiters.changedAll() }
            }
        }
        let periodic = Task {
            var ticks = 0
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(Int(min(1, configuration.roomIdleSeconds / 4) * 1000)))
                if Task.isCancelled { break }
                await hub.closeIdle(olderThan: configuration.roomIdleSeconds)
                ticks += 1
                if Double(ticks) * min(1, configuration.roomIdleSeconds / 4) >= 60 {
                    ticks = 0
                    await sweep()
                }
            }
        }
        try? await gracefulShutdown()
        periodic.cancel()
        watch.cancel()
        logger.info("shutting down: closing rooms and held requests")
        waiters.closeAll()
        await hub.closeAll()
    }

    private func sweep() async {
        do {
            let now = clock.now()
            let removed = try await storage.sweep(now: now)
            if removed > 0 { logger.info("expired invites erased", metadata: ["count": "\(removed)"]) }
            metrics.invitesLive.set(to: Double(try await storage.liveInvites(now: now)))
        } catch {
            logger.error("sweep failed", metadata: ["error": "\(error)"])
        }
        waiters.prune()
        limiters.forEach { $0.prune() }
    }
}

import Logging
import ServiceLifecycle

/// Periodic work and the shutdown of rooms and held fetches: idle rooms
/// every second, expired invites and stale rate-limit entries every minute.
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
        sweep()
        let periodic = Task {
            var ticks = 0
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(Int(min(1, configuration.roomIdleSeconds / 4) * 1000)))
                if Task.isCancelled { break }
                await hub.closeIdle(olderThan: configuration.roomIdleSeconds)
                ticks += 1
                if Double(ticks) * min(1, configuration.roomIdleSeconds / 4) >= 60 {
                    ticks = 0
                    sweep()
                }
            }
        }
        try? await gracefulShutdown()
        periodic.cancel()
        logger.info("shutting down: closing rooms and held requests")
        waiters.closeAll()
        await hub.closeAll()
    }

    private func sweep() {
        do {
            let now = clock.now()
            let removed = try storage.sweep(now: now)
            if removed > 0 { logger.info("expired invites erased", metadata: ["count": "\(removed)"]) }
            metrics.invitesLive.set(to: Double(try storage.liveInvites(now: now)))
        } catch {
            logger.error("sweep failed", metadata: ["error": "\(error)"])
        }
        waiters.prune()
        limiters.forEach { $0.prune() }
    }
}

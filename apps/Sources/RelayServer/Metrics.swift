import Prometheus

/// `/metrics` (docs/PROTOCOL.md 15.6).
final class RelayMetrics: Sendable {
    static let rejectionReasons = [
        "bad-id", "bad-request", "unauthorized", "forbidden", "not-found", "conflict", "limit", "too-large",
        "rate-limited", "busy", "room-full", "no-peer", "idle", "slow-request", "method-not-allowed", "protocol-error",
        "unavailable",
    ]

    let registry = PrometheusCollectorRegistry()
    let invitesLive: Gauge
    let roomsOpen: Gauge
    let groupRoomsOpen: Gauge
    let connectionsOpen: Gauge
    let framesForwarded: Counter
    private let rejections: [String: Counter]

    init() {
        invitesLive = registry.makeGauge(name: "itsme_relay_invites_live", help: "Invites created and not yet ended or expired")
        roomsOpen = registry.makeGauge(name: "itsme_relay_rooms_open", help: "Rooms with at least one peer")
        groupRoomsOpen = registry.makeGauge(name: "itsme_relay_group_rooms_open", help: "Group rooms with at least one peer")
        connectionsOpen = registry.makeGauge(name: "itsme_relay_connections_open", help: "Open TCP connections")
        framesForwarded = registry.makeCounter(
            name: "itsme_relay_frames_forwarded_total", help: "Binary room messages forwarded to a peer, one per recipient")
        var rejections: [String: Counter] = [:]
        for reason in Self.rejectionReasons {
            rejections[reason] = registry.makeCounter(
                name: "itsme_relay_rejections_total", labels: [("reason", reason)], help: "Requests and frames refused, by reason")
        }
        self.rejections = rejections
    }

    func reject(_ reason: String) {
        rejections[reason]?.increment()
    }

    func text() -> String { registry.emitToString() }
}

import ItsMeRelayProtocol
import Prometheus

/// `/metrics` (docs/PROTOCOL.md 15.6).
final class RelayMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    let invitesLive: Gauge
    let roomsOpen: Gauge
    let groupRoomsOpen: Gauge
    let connectionsOpen: Gauge
    let framesForwarded: Counter
    private let rejections: [RelayRejection: Counter]

    init() {
        invitesLive = registry.makeGauge(name: "itsme_relay_invites_live", help: "Invites created and not yet ended or expired")
        roomsOpen = registry.makeGauge(name: "itsme_relay_rooms_open", help: "Rooms with at least one peer")
        groupRoomsOpen = registry.makeGauge(name: "itsme_relay_group_rooms_open", help: "Group rooms with at least one peer")
        connectionsOpen = registry.makeGauge(name: "itsme_relay_connections_open", help: "Open TCP connections")
        framesForwarded = registry.makeCounter(
            name: "itsme_relay_frames_forwarded_total", help: "Binary room messages forwarded to a peer, one per recipient")
        var rejections: [RelayRejection: Counter] = [:]
        for reason in RelayRejection.allCases {
            rejections[reason] = registry.makeCounter(
                name: "itsme_relay_rejections_total", labels: [("reason", reason.rawValue)], help: "Requests and frames refused, by reason")
        }
        self.rejections = rejections
    }

    func reject(_ reason: RelayRejection) {
        rejections[reason]?.increment()
    }

    /// Counts an error answer under its kind (`internal` is not counted).
    func reject(kind: RelayErrorKind) {
        if let reason = RelayRejection(kind) { reject(reason) }
    }

    func text() -> String { registry.emitToString() }
}

import Foundation
import ItsMeRelayProtocol

/// The relay refused a request, answered something unexpected, or could not
/// be reached (docs/PROTOCOL.md section 15).
///
/// `kind` says which, for a program to switch on:
/// - the relay's own error kinds (15.1): `"not-found"`, `"conflict"`,
///   `"limit"`, `"rate-limited"`, `"busy"`, `"bad-request"`, ...;
/// - the client's: `"connection"` (the relay could not be reached, the
///   connection broke, or its TLS handshake failed: the message then says
///   why, e.g. a certificate from an unknown CA, expired, or for another
///   name), `"timeout"` (no answer in time), `"bad-response"` (the answer
///   was not what the API promises), `"bad-url"` (the relay's URL is not
///   usable);
/// - for rooms: `"peer-left"`, `"refused"`, `"room-full"`, `"closed"`.
///
/// An invite that is no longer on the relay (`404`: the other side ended
/// it, it expired, or it never existed) sets `inviteEnded`; start a new
/// exchange. The message is a line for a person and never carries a token,
/// a code or a message body.
public struct RelayError: Error, CustomStringConvertible, Sendable {
    /// A line for a person.
    public let message: String
    /// The HTTP status of the relay's answer; nil when there was no answer,
    /// and for room events.
    public let status: Int?
    /// The relay's error kind or the client's (see the type's documentation).
    public let kind: String?
    /// The seconds the relay asked to wait before trying again (`429` and
    /// `503`), else nil.
    public let retryAfter: Int?
    /// The invite is gone (`404` on an invite route): the other side ended
    /// it, it expired, or it never existed. Start a new exchange.
    public var inviteEnded: Bool

    /// A relay error; `inviteEnded` only for a `404` on an invite route.
    public init(_ message: String, status: Int? = nil, kind: String? = nil, retryAfter: Int? = nil, inviteEnded: Bool = false) {
        self.message = message
        self.status = status
        self.kind = kind
        self.retryAfter = retryAfter
        self.inviteEnded = inviteEnded
    }

    /// The message, followed by the status and kind when known:
    /// `no such invite (404 not-found)`.
    public var description: String {
        let parts = [status.map { String($0) }, kind].compactMap { $0 }
        return parts.isEmpty ? message : "\(message) (\(parts.joined(separator: " ")))"
    }
}

extension RelayError: LocalizedError {
    /// The same text as `description`, for `localizedDescription`.
    public var errorDescription: String? { description }
}

extension RelayError {
    /// The kind of a room the other peer left (the relay's event's name).
    public static let peerLeft = ItsMeRelayProtocol.RoomEvent.peerLeft(slot: nil).type
    /// The kind of a frame the relay refused (its event's name).
    public static let refused = ItsMeRelayProtocol.RoomEvent.refused(reason: "").type
    /// The kind of a room that is full (the relay's rejection reason).
    public static let roomFull = RelayRejection.roomFull.rawValue

    static func timeout(_ message: String) -> RelayError { RelayError(message, kind: "timeout") }
    static func connection(_ message: String) -> RelayError { RelayError(message, kind: "connection") }
    static func badResponse(_ message: String) -> RelayError { RelayError(message, kind: "bad-response") }
}

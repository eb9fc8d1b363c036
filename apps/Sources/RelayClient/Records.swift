import Foundation
import ItsMeKit
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import ItsMeRelayProtocol

/// The relay's records (docs/PROTOCOL.md 15.4): immutable bytes stored
/// under an ID the client chooses (for a profile record, its
/// `ProfileRecord.recordName`) until the holder of the delete token given
/// when it was stored deletes it.
///
/// Each request goes on a connection of its own, over TLS for an https://
/// relay, bounded by `timeout`. Refusals throw `RelayError` with the relay's
/// kind (`"not-found"`, `"conflict"`, `"forbidden"`, `"too-large"`, ...) and
/// status; `inviteEnded` is never set. Arguments of the wrong form (an ID
/// that is not 32 lowercase hex digits, empty bytes, a token that is not the
/// relay's) throw `ItsMeError(.invalidArgument)` before any network call.
///
/// Not for use by two tasks at once.
public final class RecordStore {
    /// The relay.
    public let url: RelayURL
    /// Seconds each request may take.
    public let timeout: Double

    private let group: any EventLoopGroup
    private var sslContext: NIOSSLContext?

    /// A record store at `url`. `timeout` is in seconds (a value that is not
    /// a positive number is taken as 15).
    public init(_ url: RelayURL, timeout: Double = 15, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.url = url
        self.timeout = timeout.isFinite && timeout > 0 ? min(timeout, Checks.maxSeconds) : 15
        self.group = eventLoopGroup
    }

    /// Stores `bytes` (1 to 262,144 bytes by default) under `id`. Returns
    /// the delete token when the record is new (`201`), nil when the same
    /// bytes were stored already (`200`: the token was given then, once).
    /// Other bytes under a stored ID: `409 conflict`; too many:
    /// `413 too-large`.
    public func put(id: String, bytes: [UInt8]) async throws -> String? {
        try Checks.id(id, "record ID")
        guard !bytes.isEmpty else { throw ItsMeError(.invalidArgument, "a record is at least 1 byte") }
        let answer = try await send(.PUT, id, body: bytes)
        guard RelayAnswer(.record(id), method: "PUT", status: answer.status) == .success else { throw Self.refusal(answer) }
        switch RecordStored(json: answer.body) {
        case .created(let token)?: return token
        case .alreadyStored?: return nil  // the same bytes again: the token was given then, once
        case nil: throw RelayError.badResponse("the relay's answer carries no valid delete token")
        }
    }

    /// The bytes stored under `id`; `404 not-found` if there are none
    /// (never stored, or deleted).
    public func get(id: String) async throws -> [UInt8] {
        try Checks.id(id, "record ID")
        let answer = try await send(.GET, id)
        guard RelayAnswer(.record(id), method: "GET", status: answer.status) == .success else { throw Self.refusal(answer) }
        guard !answer.body.isEmpty else { throw RelayError.badResponse("the relay answered an empty record") }
        return answer.body
    }

    /// Deletes the record `id` with the delete token `put` returned. A wrong
    /// token: `403 forbidden`; no such record: `404 not-found`.
    public func delete(id: String, token: String) async throws {
        try Checks.id(id, "record ID")
        try Checks.token(token)
        let answer = try await send(.DELETE, id, token: token)
        guard RelayAnswer(.record(id), method: "DELETE", status: answer.status) == .success else { throw Self.refusal(answer) }
    }

    // MARK: Requests

    private func send(_ method: HTTPMethod, _ id: String, token: String? = nil, body: [UInt8]? = nil) async throws
        -> HTTPAnswer
    {
        let route = RelayPath.record(id)
        return try await HTTPRequester.send(
            url, sslContext: try context(), method: method, path: route.text,
            headers: route.requestHeaders(method.rawValue, token: token).map { ($0.name, $0.value) }, body: body,
            timeout: timeout, group: group)
    }

    /// The relay's refusal, as the mailbox reads it, without `inviteEnded`.
    static func refusal(_ answer: HTTPAnswer) -> RelayError {
        var error = InviteMailbox.refusal(answer)
        error.inviteEnded = false
        return error
    }

    private func context() throws -> NIOSSLContext? {
        guard url.isSecure else { return nil }
        if let sslContext { return sslContext }
        let made = try url.makeSSLContext()
        sslContext = made
        return made
    }
}

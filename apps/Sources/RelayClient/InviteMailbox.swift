import Foundation
import ItsMeKit
import ItsMePrimitives
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import ItsMeRelayProtocol

/// The relay's invite mailbox (docs/PROTOCOL.md 15.2): an invite with two
/// sides, the inviter who creates it and the invitee who accepts it, each
/// posting opaque messages and reading the other's in order.
///
/// Each request goes on a connection of its own (a program makes few of
/// them), over TLS for an https:// relay. `timeout` bounds each request; a
/// held fetch gets its `wait` on top. Refusals throw `RelayError`; a `404`
/// (the invite is gone) sets its `inviteEnded`. Arguments of the wrong form
/// (an ID that is not 32 lowercase hex digits, a token that is not the
/// relay's) throw `ItsMeError(.invalidArgument)` before any network call.
///
/// Not for use by two tasks at once.
public final class InviteMailbox {
    /// The relay.
    public let url: RelayURL
    /// Seconds each request may take (a held fetch: plus its wait).
    public let timeout: Double
    /// The `expires` (Unix seconds) of the last invite created or accepted.
    public private(set) var lastExpires: Double?

    private let group: any EventLoopGroup
    private var sslContext: NIOSSLContext?

    /// The longest hold of a fetch (15.2).
    public static let maxWait = Double(RelayProtocol.maxFetchWait)

    /// A mailbox at `url`. `timeout` is in seconds (a value that is not a
    /// positive number is taken as 15).
    public init(_ url: RelayURL, timeout: Double = 15, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.url = url
        self.timeout = timeout.isFinite && timeout > 0 ? min(timeout, Checks.maxSeconds) : 15
        self.group = eventLoopGroup
    }

    // MARK: The routes

    /// Creates the invite `inviteID`; returns the inviter's token.
    /// `409 conflict` if the ID is in use.
    public func create(inviteID: String) async throws -> String {
        try Checks.id(inviteID, "invite ID")
        return try tokenAnswer(try await call(.invite(inviteID), .POST))
    }

    /// Binds the caller as the invitee; returns the invitee's token.
    /// `409 conflict` if someone accepted it already.
    public func accept(inviteID: String) async throws -> String {
        try Checks.id(inviteID, "invite ID")
        return try tokenAnswer(try await call(.inviteAccept(inviteID), .POST))
    }

    /// Posts one message (1 to 65,536 bytes by default); returns its
    /// sequence number.
    @discardableResult
    public func post(inviteID: String, token: String, body: [UInt8]) async throws -> Int {
        try Checks.id(inviteID, "invite ID")
        try Checks.token(token)
        let data = try await call(.inviteMessages(inviteID), .POST, token: token, body: body)
        struct Posted: Decodable { let seq: Int }
        guard let posted = try? JSONDecoder().decode(Posted.self, from: Data(data)), posted.seq >= 1 else {
            throw RelayError.badResponse("the relay's answer carries no sequence number")
        }
        return posted.seq
    }

    /// The other side's messages with `seq > after`, oldest first;
    /// `accepted` tells whether an invitee is bound. With `wait` (0 to 30
    /// seconds, whole seconds) and nothing to return, the relay holds the
    /// request until something arrives, the invite ends, or the time is up.
    public func fetch(
        inviteID: String, token: String, after: Int, wait: Double
    ) async throws -> (accepted: Bool, messages: [(seq: Int, body: [UInt8])]) {
        try Checks.id(inviteID, "invite ID")
        try Checks.token(token)
        guard after >= 0 else { throw ItsMeError(.invalidArgument, "after must be a whole number, 0 or more") }
        guard !wait.isNaN, wait >= 0, wait <= Self.maxWait else {
            throw ItsMeError(.invalidArgument, "wait must be 0 to 30 seconds")
        }
        let seconds = Int(wait)
        let data = try await call(
            .inviteMessages(inviteID), .GET, path: RelayPath.fetch(inviteID, after: after, wait: seconds), token: token,
            timeout: timeout + Double(seconds))
        struct Message: Decodable {
            let seq: Int
            let body: String
        }
        struct Answer: Decodable {
            let accepted: Bool
            let messages: [Message]
        }
        guard let answer = try? JSONDecoder().decode(Answer.self, from: Data(data)) else {
            throw RelayError.badResponse("the relay's answer is not a list of messages")
        }
        var messages: [(seq: Int, body: [UInt8])] = []
        for message in answer.messages {
            guard let body = Base64.decode(message.body, .urlUnpadded) else {
                throw RelayError.badResponse("the relay sent a message body that is not unpadded base64url")
            }
            messages.append((message.seq, body))
        }
        return (answer.accepted, messages)
    }

    /// Ends the invite (either side's token): the relay erases it.
    public func delete(inviteID: String, token: String) async throws {
        try Checks.id(inviteID, "invite ID")
        try Checks.token(token)
        _ = try await call(.invite(inviteID), .DELETE, token: token)
    }

    // MARK: Requests

    /// Makes `method` on `route` (at `path`, when it carries a query) with
    /// the route's headers; the body of a success, else the refusal thrown.
    private func call(
        _ route: RelayPath, _ method: HTTPMethod, path: String? = nil, token: String? = nil, body: [UInt8]? = nil,
        timeout: Double? = nil
    ) async throws -> [UInt8] {
        let headers = route.requestHeaders(method.rawValue, token: token).map { ($0.name, $0.value) }
        let answer = try await HTTPRequester.send(
            url, sslContext: try context(), method: method, path: path ?? route.text, headers: headers, body: body,
            timeout: timeout ?? self.timeout, group: group)
        if RelayAnswer(route, method: method.rawValue, status: answer.status) == .success { return answer.body }
        throw Self.refusal(answer)
    }

    /// The relay's refusal: its JSON error's kind and message when it sent
    /// one, the status, and `Retry-After`.
    static func refusal(_ answer: HTTPAnswer) -> RelayError {
        let refusal = RelayRefusal(status: answer.status, body: answer.body)
        var retryAfter: Int?
        if let header = answer.headers.first(name: RelayProtocol.retryAfterHeader)?.trimmingCharacters(in: .whitespaces),
            !header.isEmpty, header.count <= 9, header.allSatisfy({ $0.isASCII && $0.isNumber })
        {
            retryAfter = Int(header)
        }
        let ended = answer.status == RelayErrorKind.notFound.status
        return RelayError(
            refusal.message, status: answer.status, kind: refusal.kind ?? (ended ? RelayErrorKind.notFound.rawValue : nil),
            retryAfter: retryAfter, inviteEnded: ended)
    }

    private func tokenAnswer(_ data: [UInt8]) throws -> String {
        struct Answer: Decodable {
            let token: String
            let expires: Double?

            enum CodingKeys: String, CodingKey { case token, expires }

            init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: CodingKeys.self)
                token = try c.decode(String.self, forKey: .token)
                // Anything but a number is taken as no expiry given.
                expires = try? c.decode(Double.self, forKey: .expires)
            }
        }
        guard let answer = try? JSONDecoder().decode(Answer.self, from: Data(data)), RelayProtocol.isToken(answer.token) else {
            throw RelayError.badResponse("the relay's answer carries no valid token")
        }
        lastExpires = answer.expires
        return answer.token
    }

    private func context() throws -> NIOSSLContext? {
        guard url.isSecure else { return nil }
        if let sslContext { return sslContext }
        let made = try url.makeSSLContext()
        sslContext = made
        return made
    }
}

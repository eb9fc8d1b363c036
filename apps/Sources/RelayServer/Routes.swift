import Foundation
import Hummingbird
import HTTPTypes
import ItsMePrimitives
import ItsMeRelayProtocol
import Logging
import NIOCore

/// Every HTTP route (docs/PROTOCOL.md 15.2, 15.4, 15.6; the paths of rooms
/// and group rooms, 15.3 and 15.9, only to refuse a request without an
/// upgrade), matched by hand so that a known path with a wrong method gets
/// 405 and its Allow list.
struct RelayResponder: HTTPResponder {
    typealias Context = RelayContext

    let configuration: RelayConfiguration
    let storage: any RelayStorage
    let clock: RelayClock
    let metrics: RelayMetrics
    let waiters: InviteWaiters
    let lookups: RateLimiter
    let creations: RateLimiter
    let logger: Logger

    private static func allowed(_ route: RelayPath) -> [HTTPRequest.Method] {
        route.methods.compactMap { HTTPRequest.Method($0) }
    }

    func respond(to request: Request, context: RelayContext) async throws -> Response {
        do {
            return try await dispatch(request, context)
        } catch let error as RelayError {
            metrics.reject(kind: error.kind)
            return error.response()
        } catch let error as StorageUnavailable {
            metrics.reject(.unavailable)
            // Logged without the connection string: `reason` never has it.
            logger.warning("database unavailable", metadata: ["error": "\(error.reason)"])
            return RelayError(.unavailable, message: "the relay's database does not answer; try again shortly",
                headers: [.retryAfter: "5"]
            ).response()
        } catch is NIOTooManyBytesError {
            metrics.reject(.tooLarge)
            return RelayError(.tooLarge, message: "the body is too large", headers: [.connection: "close"])
                .response()
        } catch {
            logger.error("request failed", metadata: ["error": "\(error)"])
            return RelayError(.internal, message: "the relay failed; try again").response()
        }
    }

    private func dispatch(_ request: Request, _ context: RelayContext) async throws -> Response {
        // A WebSocket handshake that broke a rule (HandshakeCheck), on any path.
        if let marker = request.headers[.refusedHandshake], let refusal = HandshakeCheck.Refusal(rawValue: marker) {
            throw refusal.error
        }
        guard let route = RelayPath(request.uri.path) else {
            throw RelayError(.notFound, message: "no such route")
        }
        let allowed = Self.allowed(route)
        guard allowed.contains(request.method) else {
            throw RelayError(.methodNotAllowed, message: "\(request.method.rawValue) is not allowed here",
                headers: [.allow: allowed.map(\.rawValue).joined(separator: ", ")])
        }
        let client = clientAddress(request, context)
        var request = request
        switch (route, request.method) {
        case (.health, _):
            try await storage.check()
            return JSON.response(.ok, ["status": "ok"])
        case (.metrics, _):
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                body: .init(byteBuffer: ByteBuffer(string: metrics.text())))
        case (.room(let id), _), (.group(let id), _):
            guard RelayProtocol.isID(id) else { throw RelayError.badID("room") }
            throw RelayError(.badRequest, status: .upgradeRequired, message: "rooms are joined with a WebSocket upgrade",
                headers: [.upgrade: "websocket", .connection: "Upgrade"])
        case (.invite(let id), .post):
            try checkID(id, "invite")
            try await emptyBody(&request)
            return try await createInvite(id, client)
        case (.inviteAccept(let id), _):
            try checkID(id, "invite")
            try lookupAllowed(client)
            try await emptyBody(&request)
            return try await acceptInvite(id, client)
        case (.inviteMessages(let id), .post):
            try checkID(id, "invite")
            try lookupAllowed(client)
            let side = try await authenticate(request, id, client).side
            let body = try await collect(&request, limit: configuration.maxMessage)
            return try await post(id, side, body, client)
        case (.inviteMessages(let id), _):
            try checkID(id, "invite")
            try lookupAllowed(client)
            let (after, wait) = try fetchParameters(request)
            _ = try await authenticate(request, id, client)
            return try await fetch(request, id, after: after, wait: wait, client)
        case (.invite(let id), _):
            try checkID(id, "invite")
            try lookupAllowed(client)
            _ = try await authenticate(request, id, client)
            if try await storage.deleteInvite(id: id) {
                metrics.invitesLive.decrement()
                logger.info("invite ended", metadata: ["invite": "\(RelayProtocol.shortID(id))"])
            }
            waiters.ended(id)
            return Response(status: .noContent)
        case (.record(let id), .put):
            guard RelayProtocol.isID(id) else { throw RelayError.badID("record") }
            if let retry = creations.take(client) { throw RelayError.rateLimited(retry) }
            let body = try await collect(&request, limit: configuration.maxRecord)
            guard !body.isEmpty else { throw RelayError.badRequest("a record is 1 to \(configuration.maxRecord) bytes") }
            let token = Token.make()
            switch try await storage.putRecord(id: id, bytes: body, tokenHash: token.hash, now: clock.now()) {
            case .created: return JSON.response(.created, RecordStored.created(deleteToken: token.text))
            case .same: return JSON.response(.ok, RecordStored.alreadyStored)
            case .conflict:
                throw RelayError(.conflict, message: "a record with other bytes has this ID")
            }
        case (.record(let id), .get):
            guard RelayProtocol.isID(id) else { throw RelayError.badID("record") }
            guard let bytes = try await storage.record(id: id) else {
                throw RelayError(.notFound, message: "no such record")
            }
            return Response(
                status: .ok, headers: [.contentType: "application/octet-stream"], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
        case (.record(let id), _):
            guard RelayProtocol.isID(id) else { throw RelayError.badID("record") }
            guard let hash = presentedToken(request) else { throw RelayError.unauthorized }
            switch try await storage.deleteRecord(id: id, tokenHash: hash) {
            case .deleted: return Response(status: .noContent)
            case .forbidden: throw RelayError(.forbidden, message: "wrong delete token")
            case .notFound: throw RelayError(.notFound, message: "no such record")
            }
        default:
            throw RelayError(.notFound, message: "no such route")
        }
    }

    // MARK: Invites

    private func createInvite(_ id: String, _ client: String) async throws -> Response {
        if let retry = creations.take(client) { throw RelayError.rateLimited(retry) }
        let token = Token.make()
        let now = clock.now()
        let expires = now + RelayConfiguration.inviteLifetime
        switch try await storage.createInvite(id: id, tokenHash: token.hash, now: now, expires: expires, maxInvites: configuration.maxInvites)
        {
        case .created:
            metrics.invitesLive.increment()
            logger.info("invite created", metadata: ["invite": "\(RelayProtocol.shortID(id))"])
            return JSON.response(.created, ["token": token.text, "expires": expires])
        case .exists:
            throw RelayError(.conflict, message: "an invite with this ID exists")
        case .full:
            throw RelayError(.busy, message: "the relay holds too many invites; try again later",
                headers: [.retryAfter: "60"])
        }
    }

    private func acceptInvite(_ id: String, _ client: String) async throws -> Response {
        let token = Token.make()
        switch try await storage.acceptInvite(id: id, tokenHash: token.hash, now: clock.now()) {
        case .accepted(let expires):
            waiters.changed(id)
            logger.info("invite accepted", metadata: ["invite": "\(RelayProtocol.shortID(id))"])
            return JSON.response(.ok, ["token": token.text, "expires": expires])
        case .alreadyAccepted:
            throw RelayError(.conflict, message: "this invite was already accepted")
        case .notFound:
            throw miss(client)
        }
    }

    private func post(_ id: String, _ side: InviteSide, _ body: [UInt8], _ client: String) async throws -> Response {
        guard !body.isEmpty else { throw RelayError.badRequest("a message is 1 to \(configuration.maxMessage) bytes") }
        switch try await storage.post(invite: id, side: side, body: body, maxMessages: configuration.maxMessagesPerSide, now: clock.now()) {
        case .posted(let seq):
            waiters.changed(id)
            return JSON.response(.created, ["seq": seq])
        case .limit:
            throw RelayError(.limit, message: "each side may post at most \(configuration.maxMessagesPerSide) messages")
        case .notFound:
            throw miss(client)
        }
    }

    private func fetch(_ request: Request, _ id: String, after: Int64, wait: Double, _ client: String) async throws -> Response {
        let deadline = ContinuousClock.now + .milliseconds(Int(wait * 1000))
        while true {
            let version = waiters.version(of: id)
            // The token is checked again each round: the invite may have
            // ended or expired while this request waited.
            guard let (side, accepted) = try await storage.side(invite: id, tokenHash: presentedToken(request) ?? [], now: clock.now()) else {
                throw miss(client)
            }
            let found = try await storage.messages(invite: id, from: side.other, after: after)
            let left = deadline - ContinuousClock.now
            // Under a millisecond left counts as the time being up.
            if !found.isEmpty || left < .milliseconds(1) {
                let messages: [[String: Any]] = found.map { ["seq": $0.seq, "body": Base64.encode($0.body, .urlUnpadded)] }
                return JSON.response(.ok, ["accepted": accepted, "messages": messages])
            }
            let seconds = Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18
            await waiters.wait(id, version: version, seconds: seconds)
            if waiters.isClosed {
                return JSON.response(.ok, ["accepted": accepted, "messages": [] as [Any]])
            }
        }
    }

    private func fetchParameters(_ request: Request) throws -> (after: Int64, wait: Double) {
        var after: Int64 = 0
        var wait = 0.0
        for (name, value) in request.uri.queryParameters {
            switch name {
            case "after":
                guard let n = Int64(value), n >= 0 else { throw RelayError.badRequest("after is a whole number, 0 or more") }
                after = n
            case "wait":
                guard let s = Double(value), s.isFinite, s >= 0, s <= configuration.maxWaitSeconds else {
                    throw RelayError.badRequest("wait is a number of seconds from 0 to \(Int(configuration.maxWaitSeconds))")
                }
                wait = s
            default:
                throw RelayError.badRequest("unknown parameter \(name.prefix(32))")
            }
        }
        return (after, wait)
    }

    private func authenticate(_ request: Request, _ id: String, _ client: String) async throws -> (side: InviteSide, accepted: Bool) {
        guard let hash = presentedToken(request) else { throw RelayError.unauthorized }
        guard let found = try await storage.side(invite: id, tokenHash: hash, now: clock.now()) else { throw miss(client) }
        return found
    }

    /// A miss on an invite route: counted against the address, then the
    /// one answer for unknown, expired, ended and wrongly-keyed invites.
    private func miss(_ client: String) -> RelayError {
        lookups.charge(client)
        return .notFoundInvite
    }

    private func lookupAllowed(_ client: String) throws {
        if let retry = lookups.retryAfter(client) { throw RelayError.rateLimited(retry) }
    }

    // MARK: Helpers

    private func checkID(_ id: String, _ what: String) throws {
        guard RelayProtocol.isID(id) else { throw RelayError.badID(what) }
    }

    private func presentedToken(_ request: Request) -> [UInt8]? {
        guard let header = request.headers[.authorization], let token = RelayProtocol.token(fromAuthorization: header) else { return nil }
        return Token.hash(ofPresented: token)
    }

    private func emptyBody(_ request: inout Request) async throws {
        let body = try await collect(&request, limit: 0, allowEmpty: true)
        guard body.isEmpty else { throw RelayError.badRequest("this request takes no body") }
    }

    /// The body, refused with 413 as soon as it is known to be too large
    /// (from Content-Length, before reading any of it).
    private func collect(_ request: inout Request, limit: Int, allowEmpty: Bool = false) async throws -> [UInt8] {
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
            if limit == 0 { throw RelayError.badRequest("this request takes no body") }
            throw RelayError.tooLarge(limit)
        }
        do {
            let buffer = try await request.collectBody(upTo: max(limit, 0))
            return Array(buffer.readableBytesView)
        } catch is NIOTooManyBytesError {
            if limit == 0 { throw RelayError.badRequest("this request takes no body") }
            throw RelayError.tooLarge(limit)
        }
    }

    /// The client: the TCP peer, or for the trusted proxy the last address
    /// it put in X-Forwarded-For.
    private func clientAddress(_ request: Request, _ context: RelayContext) -> String {
        let forwarded = request.headers[values: .xForwardedFor]
        return configuration.trustedProxies.clientAddress(
            peer: context.peer, forwardedFor: forwarded.isEmpty ? nil : forwarded.joined(separator: ","))
    }
}

extension HTTPField.Name {
    static let xForwardedFor = HTTPField.Name("X-Forwarded-For")!
}

// The relay's contract (docs/PROTOCOL.md 15) as data, in one place: the
// form of IDs and tokens, every path, the headers the two sides exchange,
// the error kinds with their statuses, the room events in both directions
// and the close codes. The relay server writes and reads its side from here;
// the core (the sans-I/O sessions of the invite mailbox and the rooms), the
// relay client and the load generator read theirs. No program or binding
// spells a path, an event name, a status or a close code of its own
// (scripts/check-relay-protocol).
//
// No Foundation and no dependency: the target is small enough for the
// relay, the core and the tests to share.

/// IDs, tokens and headers (docs/PROTOCOL.md 15.1).
public enum RelayProtocol {
    /// An ID (invite, room, group room, record) is this many bytes...
    public static let idByteCount = 16
    /// ... written as this many lower-case hex characters.
    public static let idLength = 32

    /// A group room's message as the relay forwards it (15.3): the sender's
    /// slot, 2 bytes big-endian, then the message; nil for a frame shorter
    /// than a slot.
    public static func groupMessage(_ frame: [UInt8]) -> (slot: Int, message: [UInt8])? {
        guard frame.count >= 2 else { return nil }
        return (Int(frame[0]) << 8 | Int(frame[1]), Array(frame[2...]))
    }

    /// Whether `id` is an ID: 32 lower-case hex characters.
    public static func isID(_ id: some StringProtocol) -> Bool {
        id.utf8.count == idLength && id.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// The ID that names `bytes` (16 of them): lower-case hex.
    public static func id(of bytes: some Collection<UInt8>) -> String? {
        guard bytes.count == idByteCount else { return nil }
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(idLength)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// What logs may show of an ID (15.7).
    public static func shortID(_ id: some StringProtocol) -> String { String(id.prefix(8)) }

    /// A token is this many random bytes...
    public static let tokenByteCount = 32
    /// ... written as this many unpadded base64url characters.
    public static let tokenLength = 43

    /// Whether `token` has a token's form: 43 unpadded base64url characters
    /// whose last one carries no bits beyond the 32 bytes (so each token has
    /// one spelling).
    public static func isToken(_ token: some StringProtocol) -> Bool {
        let bytes = Array(token.utf8)
        guard bytes.count == tokenLength, bytes.allSatisfy(isBase64URL) else { return false }
        // 43 characters carry 258 bits: the last one's low 2 bits are zero.
        return base64URLValue(bytes[tokenLength - 1]) & 0x03 == 0
    }

    /// The `Authorization` header's name...
    public static let authorizationHeader = "Authorization"
    /// ... and its value for `token`.
    public static func authorization(token: String) -> String { bearerPrefix + token }
    /// The token an `Authorization` value presents, or nil when it is not
    /// `Bearer ` and a token's form.
    public static func token(fromAuthorization value: some StringProtocol) -> Substring? {
        let text = Substring(value)
        guard text.hasPrefix(bearerPrefix) else { return nil }
        let token = text.dropFirst(bearerPrefix.count)
        return isToken(token) ? token : nil
    }
    static let bearerPrefix = "Bearer "

    /// The header of a request that names what answer it takes.
    public static let acceptHeader = "Accept"
    /// The header of a request that names the type of its body.
    public static let contentTypeHeader = "Content-Type"
    /// The header that says how many seconds to wait (429, 503).
    public static let retryAfterHeader = "Retry-After"
    /// The header that lists a path's methods (405).
    public static let allowHeader = "Allow"
    /// The content type of a message, a record and a frame's bytes...
    public static let bytesContentType = "application/octet-stream"
    /// ... and of every JSON answer.
    public static let jsonContentType = "application/json"

    /// The longest `wait` of a fetch, in seconds (15.2).
    public static let maxFetchWait = 30

    private static func isBase64URL(_ c: UInt8) -> Bool {
        (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x5F
    }

    private static func base64URLValue(_ c: UInt8) -> UInt8 {
        switch c {
        case 0x41...0x5A: c - 0x41
        case 0x61...0x7A: c - 0x61 + 26
        case 0x30...0x39: c - 0x30 + 52
        case 0x2D: 62
        default: 63
        }
    }
}

/// A path of the relay (15.2 to 15.6, 15.9), with its ID where it has one.
public enum RelayPath: Equatable, Hashable, Sendable {
    /// `/v1/invites/{id}`: create (POST) or end (DELETE) an invite.
    case invite(String)
    /// `/v1/invites/{id}/accept` (POST).
    case inviteAccept(String)
    /// `/v1/invites/{id}/messages`: post (POST) or fetch (GET).
    case inviteMessages(String)
    /// `/v1/rooms/{id}`: a two-party room (WebSocket).
    case room(String)
    /// `/v1/groups/{id}`: a group room (WebSocket).
    case group(String)
    /// `/v1/records/{id}`: PUT, GET, DELETE.
    case record(String)
    /// `/health`.
    case health
    /// `/metrics`.
    case metrics

    /// The path's text, without a query.
    public var text: String {
        switch self {
        case .invite(let id): "/v1/invites/\(id)"
        case .inviteAccept(let id): "/v1/invites/\(id)/accept"
        case .inviteMessages(let id): "/v1/invites/\(id)/messages"
        case .room(let id): "/v1/rooms/\(id)"
        case .group(let id): "/v1/groups/\(id)"
        case .record(let id): "/v1/records/\(id)"
        case .health: "/health"
        case .metrics: "/metrics"
        }
    }

    /// The path's ID, if it has one (not checked: `RelayProtocol.isID`).
    public var id: String? {
        switch self {
        case .invite(let id), .inviteAccept(let id), .inviteMessages(let id), .room(let id), .group(let id), .record(let id): id
        case .health, .metrics: nil
        }
    }

    /// A fetch of the other side's messages after `after`, held up to
    /// `wait` seconds (15.2): the path with its query.
    public static func fetch(_ id: String, after: Int, wait: Int) -> String {
        RelayPath.inviteMessages(id).text + "?after=\(after)&wait=\(wait)"
    }

    /// Reads a request's path (the query already cut off); nil for a path
    /// the relay does not serve. The ID is taken as it stands: the relay
    /// answers `bad-id` for one that is not `RelayProtocol.isID`.
    public init?(_ path: some StringProtocol) {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].isEmpty else { return nil }
        switch parts.count {
        case 2 where parts[1] == "health": self = .health
        case 2 where parts[1] == "metrics": self = .metrics
        case 4 where parts[1] == "v1":
            let id = String(parts[3])
            switch parts[2] {
            case "invites": self = .invite(id)
            case "records": self = .record(id)
            case "rooms": self = .room(id)
            case "groups": self = .group(id)
            default: return nil
            }
        case 5 where parts[1] == "v1" && parts[2] == "invites" && parts[4] == "accept": self = .inviteAccept(String(parts[3]))
        case 5 where parts[1] == "v1" && parts[2] == "invites" && parts[4] == "messages": self = .inviteMessages(String(parts[3]))
        default: return nil
        }
    }
}

/// What a request on a path may be and what its answer means (15.2, 15.4).
extension RelayPath {
    /// The methods the path serves, as the relay lists them in `Allow`
    /// (a room and a group room: GET, with the WebSocket upgrade).
    public var methods: [String] {
        switch self {
        case .invite: ["POST", "DELETE"]
        case .inviteAccept: ["POST"]
        case .inviteMessages: ["GET", "POST"]
        case .record: ["GET", "PUT", "DELETE"]
        case .room, .group, .health, .metrics: ["GET"]
        }
    }

    /// The statuses that answer `method` on this path with success: a
    /// create or a post 201, a read or an accept 200, a delete 204, a
    /// record stored 201 (its delete token) or 200 (the same bytes again).
    /// Empty for a method the path does not serve, and for the WebSocket
    /// paths.
    public func successStatuses(_ method: String) -> [Int] {
        guard methods.contains(method) else { return [] }
        switch (self, method) {
        case (.invite, "POST"), (.inviteMessages, "POST"): return [RelayStatus.created]
        case (.record, "PUT"): return [RelayStatus.created, RelayStatus.ok]
        case (_, "DELETE"): return [RelayStatus.noContent]
        case (.room, _), (.group, _): return []
        default: return [RelayStatus.ok]
        }
    }

    /// Whether `method` on this path carries bytes (a message, a record).
    public func carriesBytes(_ method: String) -> Bool {
        switch (self, method) {
        case (.inviteMessages, "POST"), (.record, "PUT"): true
        default: false
        }
    }

    /// Whether `method` on this path presents a token: every invite request
    /// after the create and the accept, and a record's delete.
    public func needsToken(_ method: String) -> Bool {
        switch (self, method) {
        case (.invite, "DELETE"), (.inviteMessages, _), (.record, "DELETE"): true
        default: false
        }
    }

    /// The headers of a request with `method` on this path: the token's
    /// `Authorization` where the route takes one (`token` nil: none), the
    /// content type of the bytes it carries, and that JSON is the answer.
    public func requestHeaders(_ method: String, token: String?) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = [(RelayProtocol.acceptHeader, RelayProtocol.jsonContentType)]
        if let token, needsToken(method) { headers.append((RelayProtocol.authorizationHeader, RelayProtocol.authorization(token: token))) }
        if carriesBytes(method) { headers.append((RelayProtocol.contentTypeHeader, RelayProtocol.bytesContentType)) }
        return headers
    }
}

/// What an answer of the relay means for the request it answers.
public enum RelayAnswer: Equatable, Sendable {
    /// A success status of the route.
    case success
    /// 404: nothing there (an invite ended or expired, a record deleted, or
    /// never there).
    case gone
    /// Anything else: a refusal (the body says which, `RelayRefusal`), or
    /// no answer (status 0).
    case refused

    /// The meaning of `status` answering `method` on `path`.
    public init(_ path: RelayPath, method: String, status: Int) {
        if path.successStatuses(method).contains(status) {
            self = .success
        } else if status == RelayErrorKind.notFound.status {
            self = .gone
        } else {
            self = .refused
        }
    }
}

/// The relay's refusal as its answer says it (15.1): the kind its body
/// names (when it names none, the kind its status stands for if it stands
/// for one: 404 `not-found`, 429 `rate-limited`; else nil), and a line for
/// a person (the body's message, or one that names the status).
public struct RelayRefusal: Equatable, Sendable {
    /// The error kind the body names, or its status stands for.
    public var kind: String?
    /// A line for a person.
    public var message: String

    /// Reads an answer with `status` (0: none came) and `body`.
    public init(status: Int, body: some Collection<UInt8>) {
        let object = body.count <= 65_536 ? String(validating: body, as: UTF8.self).flatMap { JSONValue.parse($0) } : nil
        if case .string(let kind)? = object?["error"], !kind.isEmpty {
            self.kind = String(kind.prefix(64))
        } else {
            // A status that stands for one kind names it (404: not-found).
            let kinds = RelayErrorKind.allCases.filter { $0.status == status }
            self.kind = kinds.count == 1 ? kinds[0].rawValue : nil
        }
        if case .string(let message)? = object?["message"], !message.isEmpty {
            // One line: control characters become spaces; long ones are cut.
            let line = String(String.UnicodeScalarView(message.unicodeScalars.map { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) ? " " : $0 }))
            self.message = line.count > 300 ? String(line.prefix(300)) + "..." : line
        } else {
            self.message = status == 0 ? "the relay did not answer" : "the relay answered \(status)"
        }
    }
}

/// What a record's successful PUT says (15.4): a new record and the delete
/// token given for it, this once (201); or these very bytes stored under
/// the ID already (200: the token was given then).
public enum RecordStored: Equatable, Sendable {
    /// The record is new: its delete token.
    case created(deleteToken: String)
    /// The same bytes were stored under the ID already.
    case alreadyStored

    /// The answer's body as the relay writes it: `{"delete_token":...}`
    /// or `{}`.
    public var json: String {
        switch self {
        case .created(let token): JSONValue.object([("delete_token", .string(token))]).compact
        case .alreadyStored: JSONValue.object([]).compact
        }
    }

    /// Reads a successful PUT's body; nil for anything else (a delete
    /// token of another form included).
    public init?(json: some Collection<UInt8>) {
        guard json.count <= 1024, let text = String(validating: json, as: UTF8.self),
            let object = JSONValue.parse(text, maxDepth: 2), case .object(let members) = object
        else { return nil }
        if members.isEmpty {
            self = .alreadyStored
            return
        }
        guard members.count == 1, case .string(let token)? = object["delete_token"], RelayProtocol.isToken(token) else {
            return nil
        }
        self = .created(deleteToken: token)
    }
}

/// The success statuses of the relay's routes (15.2, 15.4).
public enum RelayStatus {
    /// A GET, an accept, a record stored again.
    public static let ok = 200
    /// A create, a post, a record stored.
    public static let created = 201
    /// A delete.
    public static let noContent = 204
    /// A path a WebSocket serves, asked without the upgrade.
    public static let upgradeRequired = 426
    /// A request head too large (15.5).
    public static let headTooLarge = 431
}

/// The kinds of the relay's error answers, `{"error": kind, "message": ...}`
/// (15.1), each with its status.
public enum RelayErrorKind: String, CaseIterable, Sendable {
    /// 400: malformed JSON, parameter or body.
    case badRequest = "bad-request"
    /// 400: an ID that is not 32 lower-case hex characters.
    case badID = "bad-id"
    /// 401: a token missing or malformed.
    case unauthorized
    /// 403: a wrong record delete token.
    case forbidden
    /// 404: nothing there (or nothing this token may see).
    case notFound = "not-found"
    /// 405, with `Allow`.
    case methodNotAllowed = "method-not-allowed"
    /// 409: the ID is taken, or the invite accepted already.
    case conflict
    /// 409: a per-invite count reached.
    case limit
    /// 413 (431 for a request head).
    case tooLarge = "too-large"
    /// 429, with `Retry-After`.
    case rateLimited = "rate-limited"
    /// 503, with `Retry-After`: too many connections or invites.
    case busy
    /// 503, with `Retry-After`: the relay's database does not answer.
    case unavailable
    /// 500.
    case `internal`

    /// The status the relay answers it with (`too-large` is 431 for a
    /// request head: `RelayStatus.headTooLarge`).
    public var status: Int {
        switch self {
        case .badRequest, .badID: 400
        case .unauthorized: 401
        case .forbidden: 403
        case .notFound: 404
        case .methodNotAllowed: 405
        case .conflict, .limit: 409
        case .tooLarge: 413
        case .rateLimited: 429
        case .busy, .unavailable: 503
        case .internal: 500
        }
    }

    /// The error body: `{"error":kind,"message":message}`.
    public func body(message: String) -> String {
        JSONValue.object([("error", .string(rawValue)), ("message", .string(message))]).compact
    }

    /// The kind an error body names, if it is one.
    public init?(body: some Collection<UInt8>) {
        guard body.count <= 4096, let text = String(validating: body, as: UTF8.self),
            case .string(let kind)? = JSONValue.parse(text)?["error"], let known = RelayErrorKind(rawValue: kind)
        else { return nil }
        self = known
    }
}

/// An event the relay sends in a text frame of a room (15.3) or a group
/// room (15.9).
public enum RoomEvent: Equatable, Sendable {
    /// Room: the room was empty when this side joined.
    case waiting
    /// Group room: this side's slot, and the slots present before it.
    case joined(slot: Int, peers: [Int])
    /// The other peer (room: slot nil) or a new one (group room) arrived.
    case peerJoined(slot: Int?)
    /// The other peer (room: slot nil) or one of them (group room) left.
    case peerLeft(slot: Int?)
    /// A binary message came while this side was alone: not forwarded.
    case refused(reason: String)
    /// An event this version does not know (its type, at most 64 characters).
    case other(type: String)

    /// The reason of `refused` for a message sent while alone.
    public static let noPeer = "no-peer"

    /// The event's `type`, as the relay names it.
    public var type: String {
        switch self {
        case .waiting: "waiting"
        case .joined: "joined"
        case .peerJoined: "peer-joined"
        case .peerLeft: "peer-left"
        case .refused: "refused"
        case .other(let type): type
        }
    }

    /// The event as the relay writes it: compact JSON.
    public var json: String {
        var members: [(String, JSONValue)] = [("type", .string(type))]
        switch self {
        case .joined(let slot, let peers): members += [("slot", .int(slot)), ("peers", .array(peers.map { .int($0) }))]
        case .peerJoined(let slot?), .peerLeft(let slot?): members.append(("slot", .int(slot)))
        case .refused(let reason): members.append(("reason", .string(reason)))
        case .waiting, .peerJoined(nil), .peerLeft(nil), .other: break
        }
        return JSONValue.object(members).compact
    }

    /// Reads a text frame from the relay; nil for one that is not a JSON
    /// object with a `type`, or whose event lacks what its type carries (a
    /// slot from 1 to 65,535, the peers of `joined`). A `refused` without a
    /// reason reads as `no reason given`.
    public init?(json: some Collection<UInt8>) {
        guard json.count <= 65_536, let text = String(validating: json, as: UTF8.self), let object = JSONValue.parse(text, maxDepth: 3),
            case .string(let type)? = object["type"]
        else { return nil }
        func slot() -> Int?? {
            guard let value = object["slot"] else { return .some(nil) }
            guard case .int(let slot) = value, (1...0xFFFF).contains(slot) else { return nil }
            return .some(slot)
        }
        switch type {
        case RoomEvent.waiting.type: self = .waiting
        case RoomEvent.joined(slot: 1, peers: []).type:
            guard case .int(let slot)? = object["slot"], (1...0xFFFF).contains(slot), case .array(let items)? = object["peers"] else { return nil }
            var peers: [Int] = []
            for item in items {
                guard case .int(let peer) = item, (1...0xFFFF).contains(peer) else { return nil }
                peers.append(peer)
            }
            self = .joined(slot: slot, peers: peers)
        case RoomEvent.peerJoined(slot: nil).type:
            guard let slot = slot() else { return nil }
            self = .peerJoined(slot: slot)
        case RoomEvent.peerLeft(slot: nil).type:
            guard let slot = slot() else { return nil }
            self = .peerLeft(slot: slot)
        case RoomEvent.refused(reason: "").type:
            if case .string(let reason)? = object["reason"] {
                self = .refused(reason: String(reason.prefix(64)))
            } else {
                self = .refused(reason: "no reason given")
            }
        default: self = .other(type: String(type.prefix(64)))
        }
    }
}

/// The close codes the relay ends a room connection with (15.3, 15.5, 15.9).
public enum RoomCloseCode {
    /// The other peer left, or a close answered.
    public static let normal = 1000
    /// The relay is shutting down, or a ping went unanswered.
    public static let goingAway = 1001
    /// A framing rule was broken.
    public static let protocolError = 1002
    /// A text message from a peer.
    public static let unsupportedData = 1003
    /// A close whose reason is not UTF-8.
    public static let invalidPayload = 1007
    /// A message larger than `--max-frame`.
    public static let tooLarge = 1009
    /// The room was idle for `--room-idle` seconds.
    public static let idle = 4000
    /// The room (or group room) is full.
    public static let roomFull = 4009
}

/// The reasons `itsme_relay_rejections_total` counts refusals by (15.6):
/// each error kind but `internal`, and what only rooms and connections
/// meet.
public enum RelayRejection: String, CaseIterable, Sendable {
    /// An ID that is not one.
    case badID = "bad-id"
    /// A malformed request, handshake or frame (as `bad-request`).
    case badRequest = "bad-request"
    /// A token missing or malformed.
    case unauthorized
    /// A wrong record delete token.
    case forbidden
    /// Nothing at that ID or route.
    case notFound = "not-found"
    /// An ID taken, an invite accepted already, a record's other bytes.
    case conflict
    /// A per-invite count reached.
    case limit
    /// A body, head or frame over its limit.
    case tooLarge = "too-large"
    /// An address over a rate.
    case rateLimited = "rate-limited"
    /// Too many connections or invites.
    case busy
    /// A join to a full room, or beyond a group room's joins.
    case roomFull = "room-full"
    /// A binary message sent while alone.
    case noPeer = "no-peer"
    /// A room closed for idleness.
    case idle
    /// A request that did not arrive in time.
    case slowRequest = "slow-request"
    /// A method the path does not serve.
    case methodNotAllowed = "method-not-allowed"
    /// A broken framing rule.
    case protocolError = "protocol-error"
    /// The database did not answer.
    case unavailable

    /// The reason an error answer counts as; nil for `internal`.
    public init?(_ kind: RelayErrorKind) {
        self.init(rawValue: kind.rawValue)
    }
}

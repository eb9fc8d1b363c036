import ItsMeRelayProtocol
import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// The invite-mailbox driver of docs/PROTOCOL.md 16.5, without I/O: it
/// carries an invite exchange (`Exchange.invite` or `acceptInvite`, not
/// real-time) through the relay's invite mailbox (15.2) by saying which
/// request the host makes next and consuming each answer. The host (the
/// relay client, a binding, an app) moves the requests over HTTP.
///
/// The host runs it in steps. `begin(wait:)` starts one; then, until
/// `nextRequest()` says `.idle` or `.done`, it makes the request and gives
/// the answer to `answer(_:now:)`. One step creates (inviter) or accepts
/// (invitee) the invite on first use, posts what the exchange has to send,
/// fetches the other side's new messages once and feeds them to the
/// exchange in order (a message already seen, by its sequence number, is
/// skipped), and posts the answers. Then:
///
/// - once the SAS is ready, the session goes on carrying the two decisions
///   (8.1, 16.3 step 5): it posts this side's (after `Exchange.confirm` or
///   `reject`) and fetches the peer's, which sets `.peerConfirmed` or
///   `.peerRejected`: the host then calls `Exchange.settle`;
/// - the invitee ends the invite (`.delete`) once it has read the inviter's
///   decision; a side that rejects ends it at once;
/// - a message the exchange refuses makes `answer` throw the exchange's
///   error; the exchange has failed and the next request ends the invite,
///   so that the other side fails too;
/// - an invite that is gone (`.inviteGone`: the relay answered 404) rejects
///   the pending exchange (unless the host saved its contact) and
///   `answer` returns `.inviteEnded`;
/// - `.conflict` to a create or an accept (the ID is taken, or someone else
///   accepted) ends the session the same way and returns `.conflict`.
///
/// A transient failure (`.transientFailure`: the relay unreachable, busy,
/// rate-limiting) ends the step and changes nothing: begin another later.
///
/// `saved` is the state to keep with the sealed exchange between steps
/// (JSON, under the keys of the Python binding's `InviteSession.to_dict`);
/// `init(exchange:saved:)` resumes from it. It holds this side's relay
/// token: keep it as privately as the sealed exchange.
///
/// Not for use by two threads at once, nor with the exchange used
/// elsewhere during a step.
public final class MailboxSession: CustomStringConvertible {
    /// What the host asks the relay next (docs/PROTOCOL.md 15.2).
    public enum Request: Equatable, Sendable {
        /// `POST /v1/invites/{id}`: answer `.created(token:)`.
        case create
        /// `POST /v1/invites/{id}/accept`: answer `.accepted(token:)`.
        case accept
        /// `POST /v1/invites/{id}/messages` with these bytes: answer `.posted(seq:)`.
        case post([UInt8])
        /// `GET /v1/invites/{id}/messages?after=...&wait=...`: answer `.fetched`.
        case fetch(after: Int, wait: Int)
        /// `DELETE /v1/invites/{id}`: answer `.deleted` (a 404 is fine too).
        case delete
        /// Nothing more in this step: `begin` another later.
        case idle
        /// Nothing more to do on the relay, ever.
        case done
    }

    /// One message of a fetch.
    public struct Message: Sendable {
        /// The relay's sequence number of the message in its mailbox.
        public var seq: Int
        /// The message as posted: an exchange message, opaque to the relay.
        public var body: [UInt8]
        /// A fetched message, as the host parsed it from the relay's answer.
        public init(seq: Int, body: [UInt8]) {
            self.seq = seq
            self.body = body
        }
    }

    /// The relay's answer to the pending request.
    public enum Answer: Sendable {
        /// 201 to a create: the inviter's bearer token for the mailbox.
        case created(token: String)
        /// 200 to an accept: the invitee's bearer token for the mailbox.
        case accepted(token: String)
        /// 201 to a post: the sequence number the relay gave the message.
        case posted(seq: Int)
        /// 200 to a fetch: whether an invitee has accepted, and the other side's
        /// messages after the last one seen.
        case fetched(accepted: Bool, messages: [Message])
        /// 204 to a delete: the mailbox is gone.
        case deleted
        /// 404: the invite is gone (ended by the other side, or expired).
        case inviteGone
        /// 409 to a create or an accept.
        case conflict
        /// Any other failure: the relay unreachable, busy, rate-limiting.
        case transientFailure
    }

    /// What an answer means for the host, beyond the exchange's state.
    public enum Outcome: Equatable, Sendable {
        /// Go on: ask `nextRequest()`.
        case proceed
        /// The invite is gone; the exchange was rejected if still pending.
        case inviteEnded
        /// The invite ID is taken (inviter) or someone else accepted it
        /// (invitee); the exchange was rejected if still pending.
        case conflict
        /// The relay refused the request or did not answer (a transient
        /// failure): the step ended and nothing changed; begin another
        /// later. `RelayRefusal` reads what the relay said.
        case stepEnded
    }

    /// The state a host keeps between steps (with the sealed exchange).
    public struct SavedState: Equatable, Sendable {
        /// The version this library writes and reads.
        public static let currentVersion = 1

        /// The format version of this saved state (`currentVersion` when written).
        public var version: Int
        /// The invite ID (32 lowercase hex digits).
        public var relayID: String
        /// Whether this side created the invite.
        public var inviter: Bool
        /// This side's bearer token for the mailbox, once created or accepted.
        public var token: String?
        /// The sequence number of the last message fetched (0 before any).
        public var lastSeq: Int
        /// Messages taken from the exchange and not yet posted, oldest first.
        public var unsent: [[UInt8]]
        /// Whether the exchange finished and only the mailbox's deletion remains.
        public var done: Bool
        /// Whether an invitee was bound as of the last fetch; nil before one.
        public var accepted: Bool?

        /// A saved state from its fields, as `init(json:)` reads them; hosts normally
        /// take `MailboxSession.saved` instead of building one.
        public init(
            version: Int = SavedState.currentVersion, relayID: String, inviter: Bool, token: String?, lastSeq: Int,
            unsent: [[UInt8]], done: Bool, accepted: Bool? = nil
        ) {
            self.version = version
            self.relayID = relayID
            self.inviter = inviter
            self.token = token
            self.lastSeq = lastSeq
            self.unsent = unsent
            self.done = done
            self.accepted = accepted
        }

        /// The state as JSON under the keys `version`, `relay_id`,
        /// `inviter`, `token` (null while there is none), `last_seq`,
        /// `unsent` (unpadded base64url) and `done`, and `accepted` once
        /// known: the keys of the Python binding's `InviteSession.to_dict`
        /// and of the relay client's `InviteSession.SavedState`.
        public var json: String {
            var members: [(String, JSONValue)] = [
                ("version", .int(version)), ("relay_id", .string(relayID)), ("inviter", .bool(inviter)),
                ("token", token.map { .string($0) } ?? .null), ("last_seq", .int(lastSeq)),
                ("unsent", .array(unsent.map { .string(Base64.encode($0, .urlUnpadded)) })), ("done", .bool(done)),
            ]
            if let accepted { members.append(("accepted", .bool(accepted))) }
            return JSONValue.object(members).text
        }

        /// Reads `json` as written by `json`, the Python binding or the
        /// relay client, and checks every field: `.invalidArgument` for an
        /// unknown version or a malformed state. Unknown keys are ignored.
        public init(json: String) throws {
            guard json.utf8.count <= Self.maxJSONCount, let value = JSONValue.parse(json), case .object = value else {
                throw ItsMeError(.invalidArgument, "the saved mailbox state is not a JSON object")
            }
            guard case .int(let version)? = value["version"], version == Self.currentVersion else {
                throw ItsMeError(.invalidArgument, "not a saved InviteSession state of a known version")
            }
            guard case .string(let relayID)? = value["relay_id"], RelayProtocol.isID(relayID),
                case .bool(let inviter)? = value["inviter"]
            else {
                throw ItsMeError(.invalidArgument, "the saved state is of another exchange")
            }
            var token: String?
            switch value["token"] {
            case .string(let t)?:
                guard RelayProtocol.isToken(t) else { throw ItsMeError(.invalidArgument, "the saved state's token is not a relay token") }
                token = t
            case .null?, nil: token = nil
            default: throw ItsMeError(.invalidArgument, "the saved state's token is not a relay token")
            }
            guard case .int(let lastSeq)? = value["last_seq"], lastSeq >= 0 else {
                throw ItsMeError(.invalidArgument, "the saved state's last_seq is not a non-negative integer")
            }
            guard case .array(let texts)? = value["unsent"], case .bool(let done)? = value["done"] else {
                throw ItsMeError(.invalidArgument, "the saved state is malformed")
            }
            var unsent: [[UInt8]] = []
            for text in texts {
                guard case .string(let s) = text, let message = Base64.decode(s, .urlUnpadded) else {
                    throw ItsMeError(.invalidArgument, "the saved state's unsent messages are not base64url")
                }
                guard (1...RemoteProtocol.maxMessageCount).contains(message.count) else {
                    throw ItsMeError(.invalidArgument, "the saved state's unsent messages have impossible sizes")
                }
                unsent.append(message)
            }
            var accepted: Bool?
            switch value["accepted"] {
            case .bool(let a)?: accepted = a
            case .null?, nil: accepted = nil
            default: throw ItsMeError(.invalidArgument, "the saved state is malformed")
            }
            self.init(
                version: version, relayID: relayID, inviter: inviter, token: token, lastSeq: lastSeq, unsent: unsent, done: done,
                accepted: accepted)
        }

        /// The longest saved state read: a few messages and the fields.
        public static let maxJSONCount = 1 << 20
    }

    /// The longest hold of a fetch (15.2), in seconds.
    public static let maxWait = RelayProtocol.maxFetchWait

    /// The exchange this session carries.
    public let exchange: Exchange
    /// The invite ID (lowercase hex of `Exchange.relayID`).
    public let relayID: String
    /// True on the inviter's side.
    public let isInviter: Bool
    /// This side's relay token, once the invite was created or accepted.
    public private(set) var token: String?
    /// The sequence number of the last message fed to the exchange.
    public private(set) var lastSeq = 0
    /// Nothing more to do on the relay.
    public private(set) var done = false
    /// Whether an invitee is bound, as of the last fetch (nil before one).
    public private(set) var accepted: Bool?
    private var unsent: [[UInt8]] = []

    private enum Phase: Equatable {
        /// No step under way.
        case idle
        /// A step: whether its fetch was made, and its wait.
        case running(fetched: Bool, wait: Int)
    }

    private var phase = Phase.idle
    /// The request made and not answered yet.
    private var pending: Request?
    /// The host asked to end the invite (`finish`, `cancel`).
    private var ending = false
    /// The host gave up (`cancel`): the session is done even if the relay
    /// cannot be reached to end the invite (it then expires there).
    private var givingUp = false

    /// A new session for `exchange`, which must be an invite exchange
    /// (`.invalidArgument` otherwise).
    public init(exchange: Exchange) throws {
        guard exchange.method == .invite, let id = exchange.relayID else {
            throw ItsMeError(.invalidArgument, "a mailbox session carries an invite exchange (a real-time one goes through a room)")
        }
        self.exchange = exchange
        self.relayID = Hex.encodeUpper(id).lowercased()
        self.isInviter = exchange.isInviter
    }

    /// A session resumed from `saved`, with the exchange restored from the
    /// seal saved at the same time. `.invalidArgument` for a state of
    /// another exchange or of an unknown version.
    public convenience init(exchange: Exchange, saved: SavedState) throws {
        try self.init(exchange: exchange)
        guard saved.version == SavedState.currentVersion else {
            throw ItsMeError(.invalidArgument, "not a saved InviteSession state of a known version")
        }
        guard saved.relayID == relayID, saved.inviter == isInviter else {
            throw ItsMeError(.invalidArgument, "the saved state is of another exchange")
        }
        if let token = saved.token, !RelayProtocol.isToken(token) {
            throw ItsMeError(.invalidArgument, "the saved state's token is not a relay token")
        }
        guard saved.lastSeq >= 0 else {
            throw ItsMeError(.invalidArgument, "the saved state's last_seq is not a non-negative integer")
        }
        guard saved.unsent.allSatisfy({ (1...RemoteProtocol.maxMessageCount).contains($0.count) }) else {
            throw ItsMeError(.invalidArgument, "the saved state's unsent messages have impossible sizes")
        }
        token = saved.token
        lastSeq = saved.lastSeq
        unsent = saved.unsent
        done = saved.done
        accepted = saved.accepted
    }

    /// The session's state, to save with the sealed exchange after every
    /// step (messages the exchange still holds are sealed with it).
    public var saved: SavedState {
        SavedState(
            relayID: relayID, inviter: isInviter, token: token, lastSeq: lastSeq, unsent: unsent, done: done, accepted: accepted)
    }

    public var description: String {
        "MailboxSession(\(isInviter ? "inviter" : "invitee") \(relayID.prefix(8))..., lastSeq: \(lastSeq), done: \(done))"
    }

    // MARK: Steps

    /// Starts a step; `wait` (0 to 30 seconds) is how long its fetch may
    /// be held on the relay. A step already under way goes on with the new
    /// wait.
    /// Throws `.invalidArgument` for a wait outside 0 to 30 seconds.
    public func begin(wait: Int = 0) throws {
        guard (0...Self.maxWait).contains(wait) else { throw ItsMeError(.invalidArgument, "wait must be 0 to 30 seconds") }
        switch phase {
        case .idle: phase = .running(fetched: false, wait: wait)
        case .running(let fetched, _): phase = .running(fetched: fetched, wait: wait)
        }
    }

    /// Asks to end the invite on the relay (idempotent): the next request
    /// is `.delete` (none if this side holds no token), after which the
    /// session is done. The inviter may do it once the two people compared
    /// the SAS; the invitee's steps do it by themselves. Starts a step if
    /// none is under way.
    public func finish() {
        ending = true
        if phase == .idle { phase = .running(fetched: false, wait: 0) }
    }

    /// Gives up: drops the unsent messages and ends the invite as `finish`
    /// does, except that the session is done after the delete whatever the
    /// relay answered (an invite it could not end expires there). The host
    /// rejects the exchange itself (`Exchange.reject`).
    public func cancel() {
        unsent.removeAll()
        givingUp = true
        finish()
    }

    /// The request to make next. Calling it again before answering gives
    /// the same request.
    public func nextRequest() -> Request {
        if let pending { return pending }
        if done { return .done }
        guard case .running(let fetched, let wait) = phase else { return .idle }
        if ending || exchange.state == .failed {
            unsent.removeAll()
            guard token != nil else { return finished() }
            return issue(.delete)
        }
        guard token != nil else { return issue(isInviter ? .create : .accept) }
        takeOutgoing()
        if let first = unsent.first { return issue(.post(first)) }
        if !fetched, needsPeer { return issue(.fetch(after: lastSeq, wait: wait)) }
        if exchange.state == .rejected, !peerDecided {
            // This side rejected: its decision is posted; ending the invite
            // now tells the peer no less (no decision counts as none).
            return issue(.delete)
        }
        if peerDecided, exchange.state != .compareSAS {
            // Both decisions were read: the inviter posted its own only
            // after reading the invitee's, so the invitee, reading it, ends
            // the invite; nothing about the exchange stays on the relay.
            return isInviter ? finished() : issue(.delete)
        }
        phase = .idle
        return .idle
    }

    /// Consumes the relay's answer to the pending request. `now` (Unix
    /// seconds) is passed to `Exchange.receive`. Throws the exchange's
    /// error for a message it refused (the exchange has failed: the next
    /// request ends the invite), `.invalidState` when no request is
    /// pending or the answer is not one to it, and `.invalidArgument` for
    /// an answer of the wrong form (a token that is not the relay's, a
    /// sequence number below 1), which leaves the request pending.
    @discardableResult
    public func answer(_ answer: Answer, now: Int64) throws -> Outcome {
        guard let request = pending else {
            throw ItsMeError(.invalidState, "no request is pending: ask for the next one first")
        }
        switch (request, answer) {
        case (.delete, .transientFailure) where givingUp:
            pending = nil
            _ = finished()
            return .stepEnded
        case (_, .transientFailure):
            pending = nil
            phase = .idle
            return .stepEnded
        case (.delete, .deleted), (.delete, .inviteGone):
            pending = nil
            _ = finished()
            return .proceed
        case (_, .inviteGone):
            pending = nil
            unsent.removeAll()
            _ = finished()
            giveUp()
            return .inviteEnded
        case (.create, .conflict), (.accept, .conflict):
            pending = nil
            _ = finished()
            giveUp()
            return .conflict
        case (.create, .created(let t)), (.accept, .accepted(let t)):
            guard RelayProtocol.isToken(t) else { throw ItsMeError(.invalidArgument, "token must be the 43 base64url characters the relay gave") }
            pending = nil
            token = t
            return .proceed
        case (.post, .posted(let seq)):
            guard seq >= 1 else { throw ItsMeError(.invalidArgument, "a posted message's sequence number is 1 or more") }
            pending = nil
            if !unsent.isEmpty { unsent.removeFirst() }
            return .proceed
        case (.fetch(let after, _), .fetched(let isAccepted, let messages)):
            guard messages.allSatisfy({ $0.seq >= 1 }) else {
                throw ItsMeError(.invalidArgument, "a fetched message's sequence number is 1 or more")
            }
            pending = nil
            if case .running(_, let wait) = phase { phase = .running(fetched: true, wait: wait) }
            accepted = isAccepted
            for message in messages.sorted(by: { $0.seq < $1.seq }) where message.seq > max(after, lastSeq) {
                do {
                    try exchange.receive(message.body, now: now)
                } catch {
                    // Refused: the exchange has failed. The next request
                    // ends the invite, so the other side fails too.
                    unsent.removeAll()
                    throw error
                }
                lastSeq = message.seq
            }
            return .proceed
        default:
            throw ItsMeError(.invalidState, "this answer does not answer the pending request (\(Self.name(request)))")
        }
    }

    // MARK: HTTP

    /// The pending request as HTTP (docs/PROTOCOL.md 15.2): the method, and
    /// the path with its query. nil when no request is pending. Its headers
    /// are `pendingHeaders`; a post carries the message as its body.
    public var pendingHTTP: (method: String, path: String)? {
        guard let (route, method) = pendingRoute else { return nil }
        if case .fetch(let after, let wait)? = pending { return (method, RelayPath.fetch(relayID, after: after, wait: wait)) }
        return (method, route.text)
    }

    /// The headers of the pending request, `(name, value)`: this side's
    /// token as `Authorization` on every request after the create or accept,
    /// the content type of a post's message, the answer taken (JSON). Empty
    /// when no request is pending.
    public var pendingHeaders: [(name: String, value: String)] {
        guard let (route, method) = pendingRoute else { return [] }
        return route.requestHeaders(method, token: token)
    }

    /// The route and method of the pending request.
    private var pendingRoute: (RelayPath, String)? {
        switch pending {
        case .create?: (.invite(relayID), "POST")
        case .accept?: (.inviteAccept(relayID), "POST")
        case .post?: (.inviteMessages(relayID), "POST")
        case .fetch?: (.inviteMessages(relayID), "GET")
        case .delete?: (.invite(relayID), "DELETE")
        case .idle?, .done?, nil: nil
        }
    }

    /// Consumes the relay's HTTP answer to the pending request: its status
    /// (0 when none came: the relay unreachable, a timeout) and body. 404
    /// is `.inviteGone`, 409 to a create or an accept `.conflict`, the
    /// route's success status (201, 200, 201, 200, 204) the answer its body
    /// carries, anything else `.transientFailure`. A success whose body is
    /// not the route's JSON ends the step as a transient failure and throws
    /// `.malformedMessage`. Otherwise as `answer(_:now:)`.
    @discardableResult
    public func answer(status: Int, body: [UInt8], now: Int64) throws -> Outcome {
        guard let request = pending else {
            throw ItsMeError(.invalidState, "no request is pending: ask for the next one first")
        }
        guard let (route, method) = pendingRoute else { return try answer(.transientFailure, now: now) }
        switch RelayAnswer(route, method: method, status: status) {
        case .gone: return try answer(.inviteGone, now: now)
        case .refused:
            if status == RelayErrorKind.conflict.status, request == .create || request == .accept { return try answer(.conflict, now: now) }
            return try answer(.transientFailure, now: now)
        case .success: break
        }
        func malformed(_ what: String) throws -> Never {
            _ = try answer(.transientFailure, now: now)
            throw ItsMeError(.malformedMessage, "the relay's answer \(what)")
        }
        let json = body.count <= SavedState.maxJSONCount ? String(validating: body, as: UTF8.self).flatMap { JSONValue.parse($0) } : nil
        switch request {
        case .create, .accept:
            guard case .string(let token)? = json?["token"], RelayProtocol.isToken(token) else { try malformed("carries no valid token") }
            return try answer(request == .create ? .created(token: token) : .accepted(token: token), now: now)
        case .post:
            guard case .int(let seq)? = json?["seq"], seq >= 1 else { try malformed("carries no sequence number") }
            return try answer(.posted(seq: seq), now: now)
        case .fetch:
            guard case .bool(let isAccepted)? = json?["accepted"], case .array(let items)? = json?["messages"] else {
                try malformed("is not a list of messages")
            }
            var messages: [Message] = []
            for item in items {
                guard case .int(let seq)? = item["seq"], seq >= 1, case .string(let text)? = item["body"],
                    let bytes = Base64.decode(text, .urlUnpadded)
                else { try malformed("carries a message that is not a sequence number and an unpadded base64url body") }
                messages.append(Message(seq: seq, body: bytes))
            }
            return try answer(.fetched(accepted: isAccepted, messages: messages), now: now)
        case .delete:
            return try answer(.deleted, now: now)
        case .idle, .done:
            return try answer(.transientFailure, now: now)
        }
    }

    // MARK: Rules

    private func issue(_ request: Request) -> Request {
        pending = request
        return request
    }

    private func finished() -> Request {
        done = true
        ending = false
        phase = .idle
        return .done
    }

    /// Moves what the exchange queued to `unsent`.
    private func takeOutgoing() {
        while let message = exchange.peekOutgoing() {
            unsent.append(message)
            exchange.markSent()
        }
    }

    private var peerDecided: Bool { !exchange.flags.isDisjoint(with: [.peerConfirmed, .peerRejected]) }

    /// Whether the peer has more to send: its messages up to the SAS, then
    /// its decision.
    private var needsPeer: Bool {
        switch exchange.state {
        case .awaitingPeer: return true
        case .compareSAS, .awaitingDecision: return !peerDecided
        case .imported, .confirmed, .rejected, .failed: return false
        }
    }

    /// Rejects a pending exchange whose invite is gone, when nothing was
    /// saved; an exchange the host saved is left for the host to decide.
    private func giveUp() {
        guard exchange.contactID == nil else { return }
        switch exchange.state {
        case .awaitingPeer, .compareSAS, .awaitingDecision: try? exchange.reject()
        case .imported, .confirmed, .rejected, .failed: break
        }
    }

    private static func name(_ request: Request) -> String {
        switch request {
        case .create: return "create"
        case .accept: return "accept"
        case .post: return "post"
        case .fetch: return "fetch"
        case .delete: return "delete"
        case .idle: return "idle"
        case .done: return "done"
        }
    }
}

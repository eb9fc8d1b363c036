import Foundation
import ItsMeCore

/// Drives an invite exchange (`Exchange.invite` or `Exchange.acceptInvite`,
/// not real-time) through an invite mailbox (docs/PROTOCOL.md 16.5).
///
/// Each `step` creates (inviter) or accepts (invitee) the invite on first
/// use, posts what the exchange has to send, fetches the other side's new
/// messages and feeds them to the exchange in order (a message already
/// seen, by its sequence number, is skipped), posts the answers, and
/// returns the exchange's state. Then:
///
/// - once the SAS is ready, the session goes on carrying the two
///   decisions (docs/PROTOCOL.md 8.1, 16.3 step 5): it posts this side's
///   (after `Exchange.confirm` or `reject`; the inviter's confirmation goes
///   out once the invitee's decision arrived) and fetches the peer's, which
///   sets `.peerConfirmed` or `.peerRejected`: the host then calls
///   `Exchange.settle` with its store;
/// - the invitee ends the invite on the relay once it has read the
///   inviter's decision, so nothing about a completed exchange stays there
///   (a side that rejects ends it at once: for the peer, no decision counts
///   as a rejection);
/// - a message the exchange refuses (a wrong encryption code, a relay that
///   changed, replayed or reordered messages) ends the invite on the relay
///   too, so the other side fails as well, and the library's `ItsMeError`
///   is thrown;
/// - an invite that is gone (the other side ended it, or it expired)
///   rejects the exchange and throws a `RelayError` with `inviteEnded`.
///
/// Other relay failures (unreachable, busy, rate-limiting) change nothing:
/// step again later.
///
/// Between steps either side may go offline: save `saved` (JSON through
/// `Codable`) with the sealed exchange (`Exchange.seal`), and later resume
/// with `init(mailbox:exchange:saved:)` and the restored exchange. Save
/// both after every step: a step that ran after the last save may have
/// posted messages the saved state does not know about. The saved state
/// holds this side's relay token: keep it as privately as the sealed
/// exchange.
///
/// Not for use by two tasks at once.
public final class InviteSession {
    /// What a session keeps between steps, with the sealed exchange. Its
    /// JSON keys are those of the Python binding's `InviteSession.to_dict`,
    /// so either can resume the other's state.
    public struct SavedState: Codable, Equatable, Sendable {
        /// The form of this state: `SavedState.currentVersion`.
        public var version: Int
        /// The invite ID (32 lowercase hex digits).
        public var relayID: String
        /// True on the inviter's side.
        public var inviter: Bool
        /// This side's relay token, once the invite was created or accepted.
        public var token: String?
        /// The sequence number of the last message fed to the exchange.
        public var lastSeq: Int
        /// Messages taken from the exchange and not yet posted, oldest first,
        /// in unpadded base64url.
        public var unsent: [String]
        /// Nothing more to do on the relay.
        public var done: Bool
        /// Whether an invitee was bound as of the last fetch; nil before one.
        public var accepted: Bool?

        /// The version this library writes and reads.
        public static let currentVersion = 1

        enum CodingKeys: String, CodingKey {
            case version, inviter, token, unsent, done, accepted
            case relayID = "relay_id"
            case lastSeq = "last_seq"
        }

        /// A state as written by a session; `init(mailbox:exchange:saved:)`
        /// checks it.
        public init(
            version: Int = SavedState.currentVersion, relayID: String, inviter: Bool, token: String?, lastSeq: Int, unsent: [String],
            done: Bool, accepted: Bool? = nil
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

        /// Writes the state under the Python binding's keys, the token as
        /// null while there is none.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(version, forKey: .version)
            try c.encode(relayID, forKey: .relayID)
            try c.encode(inviter, forKey: .inviter)
            // Written even when nil, as the Python binding writes it.
            try c.encode(token, forKey: .token)
            try c.encode(lastSeq, forKey: .lastSeq)
            try c.encode(unsent, forKey: .unsent)
            try c.encode(done, forKey: .done)
            try c.encodeIfPresent(accepted, forKey: .accepted)
        }
    }

    /// The mailbox the messages go through.
    public let mailbox: InviteMailbox
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
    /// Nothing more to do on the relay (the exchange has its SAS and its
    /// messages are out, or it ended).
    public private(set) var done = false
    /// Whether an invitee is bound, as of the last fetch (nil before one).
    public private(set) var accepted: Bool?
    private var unsent: [[UInt8]] = []

    /// A new session for `exchange`, which must be an invite exchange
    /// (`.invalidArgument` otherwise).
    public init(mailbox: InviteMailbox, exchange: Exchange) throws {
        guard exchange.method == .invite, let id = exchange.relayID else {
            throw ItsMeError(.invalidArgument, "an InviteSession carries an invite exchange (a real-time one goes through a room)")
        }
        self.mailbox = mailbox
        self.exchange = exchange
        self.relayID = Checks.hex(id)
        self.isInviter = exchange.isInviter
    }

    /// A session resumed from `saved`, with the exchange restored from the
    /// seal saved at the same time. `.invalidArgument` for a state of
    /// another exchange, of an unknown version, or malformed.
    public convenience init(mailbox: InviteMailbox, exchange: Exchange, saved: SavedState) throws {
        try self.init(mailbox: mailbox, exchange: exchange)
        guard saved.version == SavedState.currentVersion else {
            throw ItsMeError(.invalidArgument, "not a saved InviteSession state of a known version")
        }
        guard saved.relayID == relayID, saved.inviter == isInviter else {
            throw ItsMeError(.invalidArgument, "the saved state is of another exchange")
        }
        if let token = saved.token { try Checks.token(token) }
        guard saved.lastSeq >= 0 else {
            throw ItsMeError(.invalidArgument, "the saved state's last_seq is not a non-negative integer")
        }
        var messages: [[UInt8]] = []
        for text in saved.unsent {
            guard let message = Base64.decode(text, .urlUnpadded) else {
                throw ItsMeError(.invalidArgument, "the saved state's unsent messages are not base64url")
            }
            guard (1...RemoteProtocol.maxMessageCount).contains(message.count) else {
                throw ItsMeError(.invalidArgument, "the saved state's unsent messages have impossible sizes")
            }
            messages.append(message)
        }
        token = saved.token
        lastSeq = saved.lastSeq
        unsent = messages
        done = saved.done
        accepted = saved.accepted
    }

    /// The session's state, to save with the sealed exchange.
    public var saved: SavedState {
        SavedState(
            relayID: relayID, inviter: isInviter, token: token, lastSeq: lastSeq,
            unsent: unsent.map { Base64.encode($0, .urlUnpadded) }, done: done, accepted: accepted)
    }

    // MARK: Running

    /// One round with the relay; returns `Exchange.state`.
    ///
    /// `wait` (0 to 30 seconds) holds the fetch on the relay until the other
    /// side posts: the exchange then moves at network speed. `now` (Unix
    /// seconds) is passed to `Exchange.receive`. Transient failures (a
    /// `RelayError` without `inviteEnded`: the relay unreachable, busy or
    /// rate-limiting) change nothing: step again later.
    @discardableResult
    public func step(wait: Double = 0, now: Int64) async throws -> Exchange.State {
        if done { return exchange.state }
        if exchange.state == .failed {
            try await endInvite()
            done = true
            return exchange.state
        }
        do {
            if token == nil { try await open() }
            try await flush()
            if needsPeer {
                try await feed(wait: wait, now: now)
                try await flush()
            }
        } catch let error as RelayError where error.inviteEnded {
            done = true
            unsent.removeAll()
            Self.giveUp(exchange)
            throw RelayError(
                "the invite is no longer on the relay: the other side ended it (its check failed, or it gave up), or it expired; "
                    + "this exchange is rejected, start a new one",
                status: error.status, kind: error.kind, inviteEnded: true)
        }
        guard unsent.isEmpty else { return exchange.state }
        if exchange.state == .rejected, !peerDecided {
            // This side rejected: its decision is posted; ending the invite
            // now tells the peer no less (no decision counts as none).
            try await endInvite()
            done = true
        } else if peerDecided, exchange.state != .compareSAS {
            // Both decisions were read: the inviter posted its own only after
            // reading the invitee's, so the invitee, reading it, ends the
            // invite; nothing about the exchange stays on the relay.
            if !isInviter { try await endInvite() }
            done = true
        }
        return exchange.state
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

    /// Ends the invite on the relay now (idempotent; an invite already gone
    /// is fine). The inviter may call it once the two people compared the
    /// SAS: by then the invitee has every message. The invitee's `step`
    /// does it by itself. Returns the relay's failure, if any (the invite
    /// then stays until it expires; `done` stays false so a later call may
    /// try again).
    @discardableResult
    public func finish() async -> RelayError? {
        do {
            try await endInvite()
        } catch let error as RelayError {
            return error
        } catch {
            return RelayError.connection("cannot end the invite (\(error))")
        }
        done = true
        return nil
    }

    /// Gives up: ends the invite on the relay (so the other side fails) and
    /// rejects the exchange if it is still pending (`store`: the one a
    /// contact was saved in, if any). The exchange is rejected even if the
    /// relay cannot be reached; the failure is then returned (the relay's
    /// first, else the rejection's), and the invite stays on the relay until
    /// it expires.
    @discardableResult
    public func cancel(store: ContactStore?) async -> (any Error)? {
        var failure: (any Error)?
        do { try await endInvite() } catch { failure = error }
        done = true
        unsent.removeAll()
        if Self.isPending(exchange.state) {
            do { try exchange.reject(store: store) } catch { failure = failure ?? error }
        }
        return failure
    }

    // MARK: Steps

    private static func isPending(_ state: Exchange.State) -> Bool {
        state == .awaitingPeer || state == .compareSAS || state == .awaitingDecision
    }

    /// Rejects a pending exchange whose invite is gone (the drivers saved
    /// nothing, so no store is needed); an exchange the host saved is left
    /// for the host to decide.
    static func giveUp(_ exchange: Exchange) {
        if isPending(exchange.state) { try? exchange.reject(store: nil) }
    }

    private func open() async throws {
        do {
            token = isInviter ? try await mailbox.create(inviteID: relayID) : try await mailbox.accept(inviteID: relayID)
        } catch let error as RelayError where !error.inviteEnded && error.kind == "conflict" {
            done = true
            Self.giveUp(exchange)
            throw RelayError(
                isInviter
                    ? "an invite with this ID already exists: start a new exchange"
                    : "someone else already accepted this invite: ask for a new one",
                status: error.status, kind: error.kind)
        }
    }

    /// Posts the unsent messages, oldest first, keeping any that fails.
    private func flush() async throws {
        while let message = exchange.peekOutgoing() {
            unsent.append(message)
            exchange.markSent()
        }
        while let first = unsent.first, let token {
            try await mailbox.post(inviteID: relayID, token: token, body: first)
            unsent.removeFirst()
        }
    }

    private func feed(wait: Double, now: Int64) async throws {
        guard let token else { return }
        let (isAccepted, messages) = try await mailbox.fetch(inviteID: relayID, token: token, after: lastSeq, wait: wait)
        accepted = isAccepted
        for (seq, body) in messages.sorted(by: { $0.seq < $1.seq }) where seq > lastSeq {
            do {
                try exchange.receive(body, now: now)
            } catch {
                // Refused: the exchange has failed. End the invite, so that
                // the other side fails too instead of waiting (if the relay
                // cannot be reached now, the next step tries again).
                unsent.removeAll()
                if (try? await endInvite()) != nil { done = true }
                throw error
            }
            lastSeq = seq
        }
    }

    /// DELETEs the invite if this side holds a token; an invite already
    /// gone is fine. Other failures are thrown.
    private func endInvite() async throws {
        guard let token else { return }
        do {
            try await mailbox.delete(inviteID: relayID, token: token)
        } catch let error as RelayError where error.inviteEnded {}
    }
}

extension InviteSession: CustomStringConvertible {
    /// The role, the start of the invite ID and the progress; never the token.
    public var description: String {
        "InviteSession(\(isInviter ? "inviter" : "invitee") \(relayID.prefix(8))..., lastSeq: \(lastSeq), done: \(done))"
    }
}

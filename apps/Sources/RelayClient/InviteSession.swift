import Foundation
import ItsMeKit
import ItsMePrimitives
import ItsMeRelayProtocol

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
    public var exchange: Exchange { core.exchange }
    /// The invite ID (lowercase hex of `Exchange.relayID`).
    public var relayID: String { core.relayID }
    /// True on the inviter's side.
    public var isInviter: Bool { core.isInviter }
    /// This side's relay token, once the invite was created or accepted.
    public var token: String? { core.token }
    /// The sequence number of the last message fed to the exchange.
    public var lastSeq: Int { core.lastSeq }
    /// Nothing more to do on the relay (the exchange has its SAS and its
    /// messages are out, or it ended).
    public var done: Bool { core.done }
    /// Whether an invitee is bound, as of the last fetch (nil before one).
    public var accepted: Bool? { core.accepted }

    /// The library's driver (docs/PROTOCOL.md 16.5): this class only moves
    /// its requests over HTTP.
    private let core: MailboxSession

    /// A new session for `exchange`, which must be an invite exchange
    /// (`.invalidArgument` otherwise).
    public init(mailbox: InviteMailbox, exchange: Exchange) throws {
        guard exchange.method == .invite, exchange.relayID != nil else {
            throw ItsMeError(.invalidArgument, "an InviteSession carries an invite exchange (a real-time one goes through a room)")
        }
        self.mailbox = mailbox
        self.core = try MailboxSession(exchange: exchange)
    }

    /// A session resumed from `saved`, with the exchange restored from the
    /// seal saved at the same time. `.invalidArgument` for a state of
    /// another exchange, of an unknown version, or malformed.
    public init(mailbox: InviteMailbox, exchange: Exchange, saved: SavedState) throws {
        guard exchange.method == .invite, exchange.relayID != nil else {
            throw ItsMeError(.invalidArgument, "an InviteSession carries an invite exchange (a real-time one goes through a room)")
        }
        var messages: [[UInt8]] = []
        for text in saved.unsent {
            guard let message = Base64.decode(text, .urlUnpadded) else {
                throw ItsMeError(.invalidArgument, "the saved state's unsent messages are not base64url")
            }
            messages.append(message)
        }
        self.mailbox = mailbox
        self.core = try MailboxSession(
            exchange: exchange,
            saved: MailboxSession.SavedState(
                version: saved.version, relayID: saved.relayID, inviter: saved.inviter, token: saved.token, lastSeq: saved.lastSeq,
                unsent: messages, done: saved.done, accepted: saved.accepted))
    }

    /// The session's state, to save with the sealed exchange.
    public var saved: SavedState {
        let state = core.saved
        return SavedState(
            version: state.version, relayID: state.relayID, inviter: state.inviter, token: state.token, lastSeq: state.lastSeq,
            unsent: state.unsent.map { Base64.encode($0, .urlUnpadded) }, done: state.done, accepted: state.accepted)
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
        guard !wait.isNaN, wait >= 0, wait <= InviteMailbox.maxWait else {
            throw ItsMeError(.invalidArgument, "wait must be 0 to 30 seconds")
        }
        try core.begin(wait: Int(wait))
        try await run(now: now)
        return exchange.state
    }

    /// Makes the core's requests until it says the step is over.
    private func run(now: Int64) async throws {
        while true {
            let request = core.nextRequest()
            let answer: MailboxSession.Answer?
            do {
                answer = try await perform(request)
            } catch let error as RelayError {
                if error.inviteEnded {
                    if try core.answer(.inviteGone, now: now) == .inviteEnded {
                        throw RelayError(
                            "the invite is no longer on the relay: the other side ended it (its check failed, or it gave up), or it expired; "
                                + "this exchange is rejected, start a new one",
                            status: error.status, kind: error.kind, inviteEnded: true)
                    }
                    continue
                }
                if error.kind == RelayErrorKind.conflict.rawValue, request == .create || request == .accept {
                    _ = try core.answer(.conflict, now: now)
                    throw RelayError(
                        isInviter
                            ? "an invite with this ID already exists: start a new exchange"
                            : "someone else already accepted this invite: ask for a new one",
                        status: error.status, kind: error.kind)
                }
                _ = try core.answer(.transientFailure, now: now)
                throw error
            }
            guard let answer else { return }
            do {
                _ = try core.answer(answer, now: now)
            } catch let refusal {
                // Refused: the exchange has failed. End the invite now, so
                // that the other side fails too instead of waiting (if the
                // relay cannot be reached now, the next step tries again).
                if exchange.state == .failed { try? await run(now: now) }
                throw refusal
            }
        }
    }

    /// Makes one request; nil for `.idle` and `.done`.
    private func perform(_ request: MailboxSession.Request) async throws -> MailboxSession.Answer? {
        switch request {
        case .idle, .done:
            return nil
        case .create:
            return .created(token: try await mailbox.create(inviteID: relayID))
        case .accept:
            return .accepted(token: try await mailbox.accept(inviteID: relayID))
        case .post(let body):
            return .posted(seq: try await mailbox.post(inviteID: relayID, token: try heldToken(), body: body))
        case .fetch(let after, let wait):
            let (isAccepted, messages) = try await mailbox.fetch(inviteID: relayID, token: try heldToken(), after: after, wait: Double(wait))
            return .fetched(accepted: isAccepted, messages: messages.map { MailboxSession.Message(seq: $0.seq, body: $0.body) })
        case .delete:
            try await mailbox.delete(inviteID: relayID, token: try heldToken())
            return .deleted
        }
    }

    private func heldToken() throws -> String {
        guard let token else { throw ItsMeError(.invalidState, "no relay token yet") }
        return token
    }

    /// Ends the invite on the relay now (idempotent; an invite already gone
    /// is fine). The inviter may call it once the two people compared the
    /// SAS: by then the invitee has every message. The invitee's `step`
    /// does it by itself. Returns the relay's failure, if any (the invite
    /// then stays until it expires; `done` stays false so a later call may
    /// try again).
    @discardableResult
    public func finish() async -> RelayError? {
        if done { return nil }
        core.finish()
        do {
            try await run(now: 0)
        } catch let error as RelayError {
            return error
        } catch {
            return RelayError.connection("cannot end the invite (\(error))")
        }
        return nil
    }

    /// Gives up: ends the invite on the relay (so the other side fails) and
    /// rejects the exchange if it is still pending, deleting a contact saved
    /// for it. The exchange is rejected even if the
    /// relay cannot be reached; the failure is then returned (the relay's
    /// first, else the rejection's), and the invite stays on the relay until
    /// it expires.
    @discardableResult
    public func cancel() async -> (any Error)? {
        var failure: (any Error)?
        if !done {
            core.cancel()
            do { try await run(now: 0) } catch { failure = error }
        }
        if Self.isPending(exchange.state) {
            do { try exchange.reject() } catch { failure = failure ?? error }
        }
        return failure
    }

    // MARK: Steps

    private static func isPending(_ state: Exchange.State) -> Bool {
        state == .awaitingPeer || state == .compareSAS || state == .awaitingDecision
    }
}

extension InviteSession: CustomStringConvertible {
    /// The role, the start of the invite ID and the progress; never the token.
    public var description: String {
        "InviteSession(\(isInviter ? "inviter" : "invitee") \(relayID.prefix(8))..., lastSeq: \(lastSeq), done: \(done))"
    }
}

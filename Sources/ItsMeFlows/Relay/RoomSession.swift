import ItsMeRelayProtocol
import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// The room driver of docs/PROTOCOL.md 16.5, 11.1 and 17.3, without I/O:
/// it carries a real-time exchange (`Exchange.invite` or `acceptInvite`
/// with `realtime`), an Online Verify session or a live device transfer
/// through a relay room (15.3) by saying what the host does next and taking
/// what the room sends, as the relay sent it. The host joins the WebSocket at `path`, moves bytes and
/// keeps time; every rule is here, so every host follows the same one.
///
/// The host loops on `next(now:)`:
///
/// - `.send(bytes)`: send the bytes as one binary message, then `sent()`;
///   if the connection failed while sending, `sendFailed()` instead.
/// - `.receive`: wait for the next thing the room sends, and give it:
///   a text frame to `event(text:now:)`, a binary one to `frame(_:now:)`;
///   the end of the connection to `closed(code:)` (its close code, nil
///   when none came); the host's deadline passing to `timedOut()`.
/// - `.decide`: the SAS is ready (for an exchange, the contact is saved):
///   the person compares it; the host calls `Exchange.confirm` or `reject`
///   and asks again. From here on the host pings the room every
///   `pingInterval` seconds (15.3), so that it does not close as idle while
///   people decide. An Online Verify session ends at its SAS instead: its
///   decision needs no room.
/// - `.checkPeer`: as `.receive`, but wait at most `peerCheckWait` seconds
///   and then call `timedOut()`, which here means the peer is still there
///   (a transfer's sender, after the person confirmed: nothing is sent to
///   a room the new device left).
/// - `.rejoin`: the relay closed the room while this side waited alone (a
///   quiet room, 15.3): join `path` again after `rejoinPause` seconds,
///   then `rejoined()`; the host's deadline still runs (a transfer).
/// - `.leave`: close the connection (the peer gets `peer-left`), then
///   `left()`.
/// - `.done`: the session is over. `failure` says why it ended early, if it
///   did; the flow's state says the rest.
///
/// The rules: the inviter sends once the peer is in the room; every frame
/// goes to the flow in order and what it answers is sent; a frame the flow
/// refuses fails it, `frame` throws the flow's error and the room is left
/// (so that the peer fails too). A room that fails before the SAS (the peer
/// left, a refused frame, the connection closed, the host's deadline)
/// rejects a pending exchange that was not saved, and rejects a running
/// Online Verify session; `failure` says how. After the SAS both sides stay
/// until both decisions passed: this side's is sent, the peer's awaited
/// (frames it refuses are skipped, the peer's decision may still come),
/// then `Exchange.settle` applies it. The peer leaving, or the room
/// closing, before the peer's decision counts as none: the exchange is
/// rejected. The host's deadline passing then rejects it too, with the
/// failure `.timeout`.
///
/// A transfer (`init(transfer:)`): the sender sends its key once the new
/// device is in the room; both compare the SAS at `.decide` (`confirm` or
/// `reject` on the transfer); the sender, once confirmed, checks that the
/// new device is still in the room (`.checkPeer`) and then sends the
/// identity and leaves; the receiver takes every frame (those that come
/// while its person decides are kept by the transfer) until the identity
/// is in, then leaves. The peer leaving, a refused frame or the room
/// closing before that ends the transfer (`failure` says how; a running
/// transfer is rejected, and nothing is sent or installed). A room closed
/// while this side waits alone is joined again (`.rejoin`).
///
/// `next(now:)` makes the exchange's writes (the contact at the SAS, the
/// settled decision); one that fails rejects the exchange, the room is to
/// be left, and `next` throws the store's error.
///
/// Not for use by two threads at once, nor with its flow used elsewhere
/// meanwhile, except for the decision at `.decide`.
public final class RoomSession: CustomStringConvertible {
    /// What the host does next.
    public enum Step: Equatable, Sendable {
        /// Send these bytes as one binary message, then `sent()`.
        case send([UInt8])
        /// Wait for what the room sends next.
        case receive
        /// The person compares the SAS; confirm or reject the exchange (or
        /// the transfer).
        case decide
        /// Read what the room sends for at most `peerCheckWait` seconds,
        /// then `timedOut()`: the peer is still there.
        case checkPeer
        /// Join the room at `path` again after `rejoinPause` seconds, then
        /// `rejoined()`.
        case rejoin
        /// Leave the room, then `left()`.
        case leave
        /// Nothing more.
        case done
    }

    /// Why a room ended the session early.
    public enum Failure: Equatable, Sendable {
        /// The other peer left the room (`peer-left`).
        case peerLeft
        /// The relay did not forward a frame (`refused`, with its reason).
        case refused(reason: String)
        /// The room already held two people (close code 4009).
        case roomFull
        /// The connection ended: the relay's close code, nil when none
        /// came (the connection broke, or a send failed).
        case closed(code: Int?)
        /// The host's deadline passed.
        case timeout
        /// The relay sent what no relay sends (a text frame that is not a
        /// room's event, a frame before the peer joined).
        case badResponse(String)

        /// A name for a program to switch on: `peer-left`, `refused`,
        /// `room-full`, `closed`, `timeout` or `bad-response`.
        public var kind: String {
            switch self {
            case .peerLeft: RoomEvent.peerLeft(slot: nil).type
            case .refused: RoomEvent.refused(reason: "").type
            case .roomFull: RelayRejection.roomFull.rawValue
            case .closed: "closed"
            case .timeout: "timeout"
            case .badResponse: "bad-response"
            }
        }

        /// A line for a person.
        public var message: String {
            switch self {
            case .peerLeft: return "the other person left the room"
            case .refused(let reason): return "the relay refused a frame (\(reason))"
            case .roomFull: return "the room already holds two people"
            case .closed(let code):
                switch code {
                case RoomCloseCode.idle?: return "the room was idle for too long and the relay closed it"
                case RoomCloseCode.goingAway?: return "the relay is shutting down"
                case RoomCloseCode.tooLarge?: return "a frame was too large for the relay"
                case let code?: return "the relay closed the room connection (code \(code))"
                case nil: return "the room connection closed"
                }
            case .timeout: return "nothing arrived from the room in time"
            case .badResponse(let what): return what
            }
        }
    }

    /// How often the host pings the room from `.decide` on, in seconds (15.3).
    public static let pingInterval = 30
    /// How long `.checkPeer` reads the room, in milliseconds: what the relay
    /// said so far, and a moment longer.
    public static let peerCheckWait = 200
    /// How long the host waits before `.rejoin`, in milliseconds.
    public static let rejoinPause = 500

    private enum Flow {
        case exchange(Exchange)
        case onlineVerify(OnlineVerify)
        case transfer(DeviceTransfer)
    }

    private enum Phase {
        /// Joined; the peer is not in the room yet.
        case awaitingPeer
        /// Both in: messages up to the SAS (or the end of Online Verify).
        case running
        /// The person decides (exchange).
        case deciding
        /// This side decided; the peer's decision is awaited (exchange).
        case awaitingPeerDecision
        /// The sender confirmed a transfer: is the new device still there?
        case checkingPeer
        /// The relay closed the room while this side waited alone: the
        /// host joins it again.
        case rejoining
        /// A transfer after the decision: the sender sends the identity,
        /// the receiver takes it.
        case finishing
        /// The host is to leave.
        case leaving
        case done
    }

    private let flow: Flow
    private var phase: Phase
    private var sending: [UInt8]?
    private var decisionUnsent = false
    /// The room's ID (32 lower-case hex characters).
    public let roomID: String
    /// Why the room ended the session early; nil while it runs, and when it
    /// ended as the flow did.
    public private(set) var failure: Failure?

    /// A session for `exchange`, a real-time exchange (`.invalidArgument`
    /// otherwise: an invite goes through `MailboxSession`).
    public init(exchange: Exchange) throws {
        guard exchange.method == .realtime, let id = exchange.relayID, let roomID = RelayProtocol.id(of: id) else {
            throw ItsMeError(.invalidArgument, "a room session carries a real-time exchange (an invite goes through the mailbox)")
        }
        self.flow = .exchange(exchange)
        self.roomID = roomID
        self.phase = .awaitingPeer
    }

    /// A session for a live device transfer in its room
    /// (`DeviceTransfer.roomName`), on either device.
    public init(transfer: DeviceTransfer) {
        self.flow = .transfer(transfer)
        self.roomID = transfer.roomName
        self.phase = .awaitingPeer
    }

    /// A session for `session` in its room (`OnlineVerify.roomName`).
    /// `peerPresent`: the host already saw the peer join (the rendezvous of
    /// 11.1 reads each room's first event to choose one).
    public init(onlineVerify session: OnlineVerify, peerPresent: Bool = false) {
        self.flow = .onlineVerify(session)
        self.roomID = session.roomName
        self.phase = peerPresent ? .running : .awaitingPeer
    }

    /// The room's path, below the relay's base URL (`/v1/rooms/{id}`).
    public var path: String { RelayPath.room(roomID).text }

    /// Whether the peer has been in the room: the relay said `peer-joined`
    /// (or the host did, with `peerPresent`). The rendezvous of 11.1 reads
    /// it after each room's first event.
    public var peerPresent: Bool { phase != .awaitingPeer && phase != .rejoining }

    /// The message of the `.send` step under way; nil in another step.
    public var pendingMessage: [UInt8]? { sending }

    /// What the host does next. Asking again before doing it gives the
    /// same step. Throws the store's error
    /// when the exchange's contact or decision cannot be written: the
    /// exchange was rejected; leave the room.
    public func next(now: Int64) throws -> Step {
        if let sending { return .send(sending) }
        switch phase {
        case .awaitingPeer:
            return .receive
        case .running:
            if let message = outgoing() { return send(message) }
            switch flow {
            case .onlineVerify(let session):
                if session.state == .running { return .receive }
                return leave()
            case .transfer(let transfer):
                switch transfer.state {
                case .awaitingPeer: return .receive
                case .compareSAS:
                    phase = .deciding
                    return .decide
                default: return leave()
                }
            case .exchange(let exchange):
                if exchange.state == .awaitingPeer { return .receive }
                guard exchange.state == .compareSAS else { return leave() }
                do {
                    _ = try exchange.save(now: now)
                } catch {
                    rejectPending(exchange)
                    phase = .leaving
                    throw error
                }
                phase = .deciding
                return .decide
            }
        case .deciding:
            if case .transfer(let transfer) = flow {
                switch transfer.state {
                case .compareSAS: return .decide
                case .done where transfer.role == .sender:
                    phase = .checkingPeer
                    return .checkPeer
                case .awaitingIdentity, .done:
                    phase = .finishing
                    return try next(now: now)
                case .awaitingPeer, .rejected, .failed:
                    return leave()
                }
            }
            guard case .exchange(let exchange) = flow, exchange.state == .compareSAS else {
                phase = .awaitingPeerDecision
                return try next(now: now)
            }
            return .decide
        case .checkingPeer:
            return .checkPeer
        case .rejoining:
            return .rejoin
        case .finishing:
            if let message = outgoing() { return send(message) }
            guard case .transfer(let transfer) = flow, transfer.state == .awaitingIdentity else { return leave() }
            return .receive
        case .awaitingPeerDecision:
            guard case .exchange(let exchange) = flow else { return leave() }
            if !decisionUnsent, let message = outgoing() { return send(message) }
            let decided = !exchange.flags.isDisjoint(with: [.peerConfirmed, .peerRejected])
            if !decided, exchange.state == .awaitingDecision || exchange.state == .rejected { return .receive }
            if decided, exchange.state == .awaitingDecision {
                do {
                    _ = try exchange.settle(now: now)
                } catch {
                    rejectPending(exchange)
                    phase = .leaving
                    throw error
                }
            }
            return leave()
        case .leaving:
            return leave()
        case .done:
            return .done
        }
    }

    /// The message of `.send` went out.
    public func sent() throws {
        guard sending != nil else { throw ItsMeError(.invalidState, "no message is being sent: ask for the next step first") }
        sending = nil
        switch flow {
        case .exchange(let exchange): exchange.markSent()
        case .onlineVerify(let session): session.markSent()
        case .transfer(let transfer): _ = transfer.takeOutgoing()
        }
    }

    /// The host joined the room again (after `.rejoin`).
    public func rejoined() throws {
        guard phase == .rejoining else { throw ItsMeError(.invalidState, "the room is not to be joined again: ask for the next step first") }
        phase = .awaitingPeer
    }

    /// The host left the room (after `.leave`); the next step is `.done`.
    public func left() throws {
        guard phase == .leaving else { throw ItsMeError(.invalidState, "the room is not to be left: ask for the next step first") }
        phase = .done
    }

    /// The host gives up (its own failure, or the person's): a pending
    /// exchange is rejected, a running Online Verify session too, and the
    /// next step is `.leave`.
    public func abandon() {
        switch flow {
        case .exchange(let exchange): rejectPending(exchange)
        case .onlineVerify(let session):
            if session.state == .running || session.state == .compareSAS { try? session.reject() }
        case .transfer(let transfer): rejectRunning(transfer)
        }
        sending = nil
        if phase != .done { phase = .leaving }
    }

    /// The connection failed while sending the message of `.send`. Before
    /// the SAS the room has failed; after it, what the peer sent before
    /// leaving is still to be read: the next step is `.receive`.
    public func sendFailed() throws {
        guard sending != nil else { throw ItsMeError(.invalidState, "no message is being sent: ask for the next step first") }
        sending = nil
        switch phase {
        case .deciding, .awaitingPeerDecision:
            decisionUnsent = true
            phase = .awaitingPeerDecision
        case .finishing:
            transferEnded(.closed(code: nil))
        default:
            roomFailed(.closed(code: nil))
        }
    }

    /// A text frame the relay sent (a room's event, 15.3), as it came.
    public func event(text: [UInt8]) {
        guard let event = RoomEvent(json: text) else {
            return roomFailed(.badResponse("the relay sent a text frame that is not a room's event"))
        }
        switch (phase, event) {
        case (.awaitingPeer, .peerJoined(nil)):
            phase = .running
        case (.running, .peerLeft(nil)):
            roomFailed(.peerLeft)
        case (.running, .refused(let reason)):
            roomFailed(.refused(reason: reason))
        case (.deciding, .peerLeft(nil)), (.checkingPeer, .peerLeft(nil)), (.finishing, .peerLeft(nil)):
            if isTransfer { transferEnded(.peerLeft) } else { noPeerDecision() }
        case (.checkingPeer, .refused(let reason)), (.finishing, .refused(let reason)):
            transferEnded(.refused(reason: reason))
        case (.deciding, .refused), (.awaitingPeerDecision, .peerLeft(nil)), (.awaitingPeerDecision, .refused):
            if !isTransfer { noPeerDecision() }
        case (_, .joined), (_, .peerJoined(_?)), (_, .peerLeft(_?)):
            roomFailed(.badResponse("the relay sent a group room's event in a room"))
        default:
            break // waiting, an event this version does not know, anything after the end
        }
    }

    /// A binary frame from the peer. Before the SAS, throws the flow's error
    /// for a frame it refuses (the flow has failed; leave the room, so that
    /// the peer fails too). After it, a refused frame is skipped.
    public func frame(_ bytes: [UInt8], now: Int64) throws {
        switch phase {
        case .awaitingPeer:
            roomFailed(.badResponse("a frame arrived before the peer joined"))
        case .running:
            do {
                switch flow {
                case .exchange(let exchange): try exchange.receive(bytes, now: now)
                case .onlineVerify(let session): try session.receive(bytes, now: now)
                case .transfer(let transfer): try transfer.receive(bytes, now: now)
                }
            } catch {
                phase = .leaving
                throw error
            }
        case .deciding, .finishing, .checkingPeer:
            if case .transfer(let transfer) = flow {
                // The sender receives nothing: a frame to it is refused.
                do { try transfer.receive(bytes, now: now) } catch {
                    rejectRunning(transfer)
                    sending = nil
                    phase = .leaving
                    throw error
                }
            } else if case .exchange(let exchange) = flow {
                try? exchange.receive(bytes, now: now)
            }
        case .awaitingPeerDecision:
            if case .exchange(let exchange) = flow { try? exchange.receive(bytes, now: now) }
        case .rejoining, .leaving, .done:
            break
        }
    }

    /// The connection ended: the relay's close `code` (4009: the room was
    /// full), nil when it ended without one. Nothing more will arrive.
    public func closed(code: Int?) {
        switch phase {
        case .deciding, .checkingPeer, .finishing:
            if isTransfer { transferEnded(.closed(code: code)) } else { noPeerDecision() }
        case .awaitingPeerDecision:
            noPeerDecision()
        case .awaitingPeer:
            if isTransfer, code != RoomCloseCode.roomFull {
                // A quiet room the relay closed while this side waited alone.
                phase = .rejoining
                return
            }
            roomFailed(code == RoomCloseCode.roomFull ? .roomFull : .closed(code: code))
        case .running:
            roomFailed(code == RoomCloseCode.roomFull ? .roomFull : .closed(code: code))
        case .rejoining, .leaving, .done:
            break
        }
    }

    /// The host's deadline passed while waiting for the room.
    public func timedOut() {
        switch phase {
        case .awaitingPeer, .running:
            roomFailed(.timeout)
        case .rejoining:
            phase = .awaitingPeer
            roomFailed(.timeout)
        case .checkingPeer:
            // Nothing said the new device left: the identity goes out.
            phase = .finishing
        case .finishing:
            transferEnded(.timeout)
        case .deciding where isTransfer:
            transferEnded(.timeout)
        case .deciding, .awaitingPeerDecision:
            guard case .exchange(let exchange) = flow else { return }
            if exchange.state == .awaitingDecision || exchange.state == .compareSAS {
                try? exchange.reject()
                failure = .timeout
            }
            sending = nil
            phase = .leaving
        case .leaving, .done:
            break
        }
    }

    /// The room's ID and the phase; never a message.
    public var description: String { "RoomSession(\(roomID.prefix(8))..., \(phase))" }

    // MARK: Rules

    private var isTransfer: Bool {
        if case .transfer = flow { return true }
        return false
    }

    private func outgoing() -> [UInt8]? {
        switch flow {
        case .exchange(let exchange): exchange.peekOutgoing()
        case .onlineVerify(let session): session.peekOutgoing()
        case .transfer(let transfer): transfer.peekOutgoing()
        }
    }

    private func send(_ message: [UInt8]) -> Step {
        sending = message
        return .send(message)
    }

    private func leave() -> Step {
        phase = .leaving
        return .leave
    }

    /// The room failed before the SAS: the flow cannot finish.
    private func roomFailed(_ why: Failure) {
        guard phase == .awaitingPeer || phase == .running else { return }
        failure = why
        sending = nil
        phase = .leaving
        switch flow {
        case .exchange(let exchange):
            if exchange.contactID == nil { rejectPending(exchange) }
        case .onlineVerify(let session):
            if session.state == .running || session.state == .compareSAS { try? session.reject() }
        case .transfer(let transfer): rejectRunning(transfer)
        }
    }

    /// A transfer's room failed after the SAS: the transfer ends as it is
    /// (a running one rejected), nothing more is sent.
    private func transferEnded(_ why: Failure) {
        guard case .transfer(let transfer) = flow, phase != .leaving, phase != .done else { return }
        // The receiver's identity arrived: the room's end changes nothing.
        if transfer.role == .receiver, transfer.state == .done { return }
        failure = why
        sending = nil
        phase = .leaving
        rejectRunning(transfer)
    }

    private func rejectRunning(_ transfer: DeviceTransfer) {
        switch transfer.state {
        case .awaitingPeer, .compareSAS, .awaitingIdentity: try? transfer.reject()
        case .done, .rejected, .failed: break
        }
    }

    /// The peer left (or the room closed) before its decision: none came.
    private func noPeerDecision() {
        if case .exchange(let exchange) = flow, exchange.state == .awaitingDecision || exchange.state == .compareSAS {
            try? exchange.reject()
        }
        sending = nil
        phase = .leaving
    }

    private func rejectPending(_ exchange: Exchange) {
        switch exchange.state {
        case .awaitingPeer, .compareSAS, .awaitingDecision: try? exchange.reject()
        case .imported, .confirmed, .rejected, .failed: break
        }
    }
}

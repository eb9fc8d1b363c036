import Foundation
import ItsMeKit
import RelayClient

/// The steps of every flow, without prompts: the commands ask a person for
/// what these take, the demo passes it directly. Each step leaves the data
/// directory consistent (the exchange in progress is sealed to
/// `pending.json` after every change).
extension Profile {
    // MARK: In person, by QR code

    /// Our QR payload: the pending QR exchange, or a new one.
    func showQR() throws -> Exchange {
        try unlock()
        if let (_, exchange) = try pending(), exchange.method == .qr, exchange.state == .awaitingPeer {
            return exchange
        }
        try requireNoPending()
        var random = SystemRandom()
        let exchange = try Exchange.qr(identity: try identity(), store: try contacts(), now: clock.now(), random: &random)
        try savePending(exchange)
        return exchange
    }

    /// Reads the other person's payload into the pending QR exchange: on
    /// success the SAS is ready and the contact is saved unverified. A text
    /// that is no payload leaves the exchange as it was (scan again);
    /// anything else ends it.
    func scanQR(_ text: String) throws -> Exchange {
        guard let (_, exchange) = try pending(), exchange.method == .qr else {
            throw CLIError("no QR exchange in progress: run \(suggest("qr", "show")) first (the other person scans yours too)")
        }
        guard exchange.state == .awaitingPeer else {
            throw CLIError(
                "the other person's payload was already read: \(suggest("sas", "confirm")) (the same SAS) or \(suggest("sas", "reject"))")
        }
        do {
            try exchange.receive(Array(text.utf8), now: clock.now())
        } catch let error as ItsMeError {
            if exchange.state == .failed { clearPending() }
            throw error
        }
        return try afterPeer(exchange, relay: nil, session: nil)
    }

    /// Saves what an exchange with its SAS ready (or a source-format
    /// payload) produced, and keeps the exchange for `sas confirm|reject`.
    func afterPeer(_ exchange: Exchange, relay: RelayURL?, session: InviteSession.SavedState?) throws -> Exchange {
        switch exchange.state {
        case .compareSAS:
            _ = try exchange.save(now: clock.now())
            try savePending(exchange, relay: relay, session: session)
        case .imported:
            _ = try exchange.save(now: clock.now())
            clearPending()
        case .awaitingPeer:
            try savePending(exchange, relay: relay, session: session)
        case .awaitingDecision:
            if exchange.flags.isDisjoint(with: [.peerConfirmed, .peerRejected]) {
                try savePending(exchange, relay: relay, session: session)
            } else {
                _ = try exchange.settle(now: clock.now())
                clearPending()
            }
        case .confirmed, .rejected, .failed:
            clearPending()
        }
        return exchange
    }

    // MARK: At a distance, through the invite mailbox

    /// Creates an invite and posts its first message.
    func createInvite(relay: RelayURL) async throws -> Exchange {
        try requireNoPending()
        var random = SystemRandom()
        let exchange = try Exchange.invite(identity: try identity(), store: try contacts(), realtime: false, now: clock.now(), random: &random)
        let session = try InviteSession(mailbox: InviteMailbox(relay), exchange: exchange)
        // Saved before the first network call: a crash leaves a pending
        // exchange that `invite status` carries on.
        try savePending(exchange, relay: relay, session: session.saved)
        do {
            _ = try await session.step(wait: 0, now: clock.now())
        } catch {
            clearPending()
            throw error
        }
        try savePending(exchange, relay: relay, session: session.saved)
        return exchange
    }

    /// Joins the invite with the two codes the inviter gave.
    func acceptInvite(relay: RelayURL, inviteCode: String, encryptionCode: String, wait: Double) async throws -> Exchange {
        try requireNoPending()
        var random = SystemRandom()
        let exchange = try Exchange.acceptInvite(
            identity: try identity(), store: try contacts(), inviteCode: inviteCode, encryptionCode: encryptionCode, realtime: false,
            now: clock.now(), random: &random)
        let session = try InviteSession(mailbox: InviteMailbox(relay), exchange: exchange)
        try savePending(exchange, relay: relay, session: session.saved)
        return try await stepInvite(exchange, session: session, relay: relay, wait: wait)
    }

    /// Carries the pending invite exchange on: fetches, answers, until its
    /// SAS is ready or `wait` seconds passed.
    func continueInvite(wait: Double) async throws -> Exchange {
        guard let (file, exchange) = try pending() else {
            throw CLIError("no exchange in progress (\(suggest("invite", "create")), \(suggest("invite", "accept")))")
        }
        guard exchange.method == .invite, let relayText = file.relay, let saved = file.session else {
            throw CLIError("the exchange in progress is a \(file.method) exchange, not an invite")
        }
        let relay = try savedRelayURL(relayText)
        let session = try InviteSession(mailbox: InviteMailbox(relay), exchange: exchange, saved: saved)
        if exchange.state != .awaitingPeer && exchange.state != .awaitingDecision {
            return exchange
        }
        return try await stepInvite(exchange, session: session, relay: relay, wait: wait)
    }

    private func stepInvite(_ exchange: Exchange, session: InviteSession, relay: RelayURL, wait: Double) async throws
        -> Exchange
    {
        // Short slices, saved after each: an interrupted wait loses nothing.
        let start = Date()
        repeat {
            let slice = min(5, max(0, wait - Date().timeIntervalSince(start)))
            do {
                _ = try await session.step(wait: slice, now: clock.now())
            } catch {
                if let relayError = error as? RelayError, relayError.inviteEnded, exchange.state == .awaitingDecision {
                    // The invite ended before the peer's decision: none came.
                    try? exchange.reject()
                }
                if exchange.state == .failed || exchange.state == .rejected { clearPending() }
                else { try? savePending(exchange, relay: relay, session: session.saved) }
                throw error
            }
            try savePending(exchange, relay: relay, session: session.saved)
        } while waitsForPeer(exchange) && Date().timeIntervalSince(start) < wait
        return try afterPeer(exchange, relay: relay, session: session.saved)
    }

    private func waitsForPeer(_ exchange: Exchange) -> Bool {
        exchange.state == .awaitingPeer
            || (exchange.state == .awaitingDecision && exchange.flags.isDisjoint(with: [.peerConfirmed, .peerRejected]))
    }

    // MARK: At a distance, in a room while on a call

    /// A real-time exchange from the codes to both decisions, in one room:
    /// `decide` shows the SAS and asks the person whether it matches.
    func realtimeExchange(relay: RelayURL, codes: (invite: String, encryption: String)?, timeout: Double,
        started: (Exchange) -> Void, decide: (Exchange) async throws -> Bool) async throws -> Exchange
    {
        try requireNoPending()
        var random = SystemRandom()
        let exchange: Exchange
        if let codes {
            exchange = try Exchange.acceptInvite(
                identity: try identity(), store: try contacts(), inviteCode: codes.invite, encryptionCode: codes.encryption, realtime: true,
                now: clock.now(), random: &random)
        } else {
            exchange = try Exchange.invite(identity: try identity(), store: try contacts(), realtime: true, now: clock.now(), random: &random)
        }
        started(exchange)
        let clock = self.clock
        _ = try await RelayClient.realtimeExchange(
            relay, exchange: exchange, timeout: timeout, now: { clock.now() }, decide: decide)
        return exchange
    }

    // MARK: The SAS

    /// The person said the SAS matches: the contact is verified at once for
    /// QR or when the peer's confirmation already came; for an invite this
    /// side's confirmation is posted and the peer's awaited up to `wait`
    /// seconds (`invite status` carries it on later). Returns the contact
    /// (nil if the peer rejected) and the exchange.
    func confirmPending(wait: Double = 10) async throws -> (contact: Contact?, exchange: Exchange) {
        guard let (file, exchange) = try pending() else { throw CLIError("no exchange is waiting for its SAS") }
        guard exchange.state == .compareSAS else {
            throw CLIError(
                exchange.state == .awaitingDecision
                    ? "this side confirmed already: \(suggest("invite", "status")) waits for the other person's decision"
                    : exchange.method == .qr
                        ? "the exchange has no SAS yet: read the other person's code with \(suggest("qr", "scan"))"
                        : "the exchange has no SAS yet (\(suggest("invite", "status")) waits for the other side)")
        }
        let store = try contacts()
        let id = try exchange.confirm(now: clock.now())
        if exchange.method == .invite, let relayText = file.relay, let saved = file.session {
            let relay = try savedRelayURL(relayText)
            let session = try InviteSession(mailbox: InviteMailbox(relay), exchange: exchange, saved: saved)
            try savePending(exchange, relay: relay, session: session.saved)
            _ = try await stepInvite(exchange, session: session, relay: relay, wait: wait)
        } else {
            _ = try afterPeer(exchange, relay: nil, session: nil)
        }
        let contact = exchange.state == .rejected ? nil : try store.contact(id: id)
        return (contact, exchange)
    }

    /// The SAS differed, or the person gives up: the contact the exchange
    /// saved is deleted, and an invite still on the relay is ended.
    func rejectPending() async throws {
        try unlock()
        let found: (Pending, Exchange)?
        do {
            found = try pending()
        } catch let error as ItsMeError where error.kind != .locked {
            // Expired, or unreadable: nothing of it can be used; drop it.
            clearPending()
            output.warn("dropped the exchange in progress: \(error.message)")
            return
        }
        guard let (file, exchange) = found else { throw CLIError("no exchange in progress") }
        if exchange.state == .awaitingPeer || exchange.state == .compareSAS || exchange.state == .awaitingDecision {
            if exchange.method == .invite, let relayText = file.relay, let saved = file.session,
                let relay = try? savedRelayURL(relayText),
                let session = try? InviteSession(mailbox: InviteMailbox(relay), exchange: exchange, saved: saved)
            {
                await session.cancel()
            } else {
                try exchange.reject()
            }
        }
        clearPending()
    }

    // MARK: Devices

    /// Forgets this device's secrets for every contact, as a new device
    /// has none (`import` and `transfer receive` install an identity
    /// without any). Returns how many contacts had some.
    func resetDevice() throws -> Int {
        try contacts().forgetDeviceSecrets()
    }
}

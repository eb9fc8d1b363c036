import ArgumentParser
import Foundation
import ItsMeKit
import RelayClient

/// What to do once an exchange has its SAS, in words and as JSON.
func reportSAS(_ exchange: Exchange, _ output: Output) {
    guard let sas = exchange.sas, let peer = exchange.peer else { return }
    output.line("")
    output.line("SAS: \(sas.text)")
    output.line("\(peer.name) (fingerprint \(formatFingerprint(peer.fingerprint))) should see the same SAS.")
    output.line("Compare it aloud, then: itsme sas confirm (the same) or itsme sas reject (different).")
    output.document(exchangeDocument(exchange))
}

func exchangeDocument(_ exchange: Exchange) -> [String: Any] {
    var d: [String: Any] = ["method": methodName(exchange.method), "state": exchangeStateName(exchange.state)]
    if let sas = exchange.sas { d["sas"] = sas.text }
    if let peer = exchange.peer {
        d["peer"] = ["name": peer.name, "fingerprint": peer.fingerprint, "authenticated": peer.publicKey != nil]
    }
    if exchange.flags.contains(.knownContact) { d["knownContact"] = true }
    // The inviter may show its codes again while the exchange waits.
    if exchange.isInviter, exchange.state == .awaitingPeer, let invite = exchange.inviteCode,
        let encryption = exchange.encryptionCode
    {
        d["inviteCode"] = invite.text
        d["encryptionCode"] = encryption.text
    }
    if let failure = exchange.failure { d["failure"] = failure.message }
    return d
}

func exchangeStateName(_ state: Exchange.State) -> String {
    switch state {
    case .awaitingPeer: return "awaiting-peer"
    case .compareSAS: return "compare-sas"
    case .imported: return "imported"
    case .confirmed: return "confirmed"
    case .rejected: return "rejected"
    case .failed: return "failed"
    case .awaitingDecision: return "awaiting-decision"
    }
}

/// Asks for a remote code until it parses (a typo is caught by its check
/// character before any network call).
func askRemoteCode(_ what: String) throws -> String {
    try Input.ask("\(what): ") { text in refusal { try RemoteCode(parsing: text, what: what.lowercased()).text } }
}

// MARK: qr

struct QR: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add someone in person: show your code, read theirs.",
        discussion: """
            Both run `itsme qr show`; each reads the other's code: a phone scans the QR code; here, give a photo \
            or screenshot of it to `itsme qr scan --image FILE`, or paste its text line into `itsme qr scan`. \
            Both then see a SAS to compare aloud. A reading that is cut short or damaged changes nothing: read \
            the code again.
            """,
        subcommands: [Show.self, Scan.self])

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show your payload, as text and as a QR code (dark on light on any terminal theme).")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var display: CodeDisplay

        func run() async throws {
            try await execute(global) { profile in
                let exchange = try profile.showQR()
                let text = exchange.outgoingText
                try display.show(text, profile.output)
                profile.output.line(text)
                profile.output.line("")
                profile.output.line(
                    "The other person reads this code; then read theirs with: itsme qr scan --image PHOTO (or paste its text into itsme qr scan)")
                profile.output.document(["payload": text])
                return .ok
            }
        }
    }

    struct Scan: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Read the other person's payload: from a photo or screenshot, as text, or asked for.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Their payload text (ITSME1:...).") var payload: String?
        @Option(help: ArgumentHelp("A photo or screenshot of their QR code (PNG or JPEG).", valueName: "file"))
        var image: String?

        func validate() throws {
            if payload != nil, image != nil { throw ValidationError("give their payload text or --image, not both") }
        }

        func run() async throws {
            try await execute(global) { profile in
                var exchange: Exchange
                if let image {
                    _ = try profile.contacts()
                    let text = try readCode(imageAt: image, prefixes: Exchange.qrTextPrefixes, what: "the other person's ItsMe code")
                    exchange = try profile.scanQR(text)
                } else if let payload {
                    exchange = try profile.scanQR(payload)
                } else {
                    _ = try profile.contacts()
                    // A text that is not a whole payload (cut short, another
                    // code) leaves the exchange as it was: ask again.
                    exchange = try Input.ask("Their payload (ITSME1:...): ", retryingOn: isReadAgain) { text in
                        try profile.scanQR(text)
                    }
                }
                if exchange.state == .imported {
                    profile.output.line(
                        "Added \(exchange.peer?.name ?? "the contact") from an old-format payload: unauthenticated (no key, no SAS).")
                    profile.output.document(exchangeDocument(exchange))
                    return .ok
                }
                reportSAS(exchange, profile.output)
                return .ok
            }
        }
    }
}

/// A refusal of a scanned or pasted text that leaves the exchange as it
/// was (PROTOCOL.md 5.2: not a whole payload): the person reads it again.
func isReadAgain(_ error: Error) -> Bool {
    (error as? ItsMeError)?.kind == .invalidArgument
}

// MARK: invite

struct Invite: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add someone at a distance through a relay, with two codes.",
        discussion: """
            You run `itsme invite create` and give the other person both codes: the invite code by message, \
            the encryption code another way (say it on a call). They run `itsme invite accept`. Either side may \
            go offline between steps: `itsme invite status` carries on. A relay that guesses or changes anything \
            makes both sides fail; it never learns who you are.
            """,
        subcommands: [Create.self, Accept.self, Status.self, Cancel.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an invite: prints the two codes to give.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var relay: RelayOption
        @Option(help: "Wait up to this many seconds for the other person.") var wait: Double = 0

        func run() async throws {
            try await execute(global) { profile in
                let url = try profile.relayURL(relay.relay, ca: relay.relayCA)
                _ = try profile.contacts()
                var exchange = try await profile.createInvite(relay: url)
                guard let invite = exchange.inviteCode, let encryption = exchange.encryptionCode else {
                    throw CLIError("the invite has no codes")
                }
                let output = profile.output
                output.notice("Invite code:     \(invite.text)")
                output.notice("Encryption code: \(encryption.text)")
                output.notice("")
                output.notice("Give the other person both codes: the invite code by message, the encryption code")
                output.notice("another way (say it on a call). They run: itsme invite accept")
                output.notice("The invite lasts 24 hours. Then: itsme invite status --wait 30")
                if wait > 0 {
                    output.notice("Waiting up to \(Int(wait)) s for them...")
                    exchange = try await profile.continueInvite(wait: wait)
                }
                if exchange.state == .compareSAS {
                    reportSAS(exchange, output)
                } else {
                    output.document(exchangeDocument(exchange))
                }
                return .ok
            }
        }
    }

    struct Accept: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Accept an invite with its two codes (the encryption code is asked, not passed).")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var relay: RelayOption
        @Argument(help: "The invite code (asked if not given).") var inviteCode: String?
        @Option(help: "Wait up to this many seconds for the other side's answer.") var wait: Double = 30

        func run() async throws {
            try await execute(global) { profile in
                let url = try profile.relayURL(relay.relay, ca: relay.relayCA)
                try profile.requireNoPending()
                let invite: String
                if let inviteCode {
                    invite = try RemoteCode(parsing: inviteCode, what: "invite code").text
                } else {
                    invite = try askRemoteCode("Invite code")
                }
                let encryption = try askRemoteCode("Encryption code")
                profile.output.notice("Joining the invite; waiting up to \(Int(wait)) s for the other side...")
                let exchange = try await profile.acceptInvite(
                    relay: url, inviteCode: invite, encryptionCode: encryption, wait: wait)
                return try report(exchange, profile)
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Carry the invite on: fetch, answer, show the SAS when ready.")
        @OptionGroup var global: GlobalOptions
        @Option(help: "Wait up to this many seconds for the other side.") var wait: Double = 30

        func run() async throws {
            try await execute(global) { profile in
                let exchange = try await profile.continueInvite(wait: wait)
                return try report(exchange, profile)
            }
        }
    }

    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "End the invite in progress (on the relay too).")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await execute(global) { profile in
                try await profile.rejectPending()
                profile.output.line("The exchange is ended.")
                return .ok
            }
        }
    }

    static func report(_ exchange: Exchange, _ profile: Profile) throws -> Exit {
        switch exchange.state {
        case .compareSAS:
            reportSAS(exchange, profile.output)
        case .awaitingPeer:
            profile.output.line("Still waiting for the other side. Later: itsme invite status --wait 30")
            profile.output.document(exchangeDocument(exchange))
        case .awaitingDecision:
            let name = exchange.peer?.name ?? "the other person"
            profile.output.line("You confirmed; waiting for \(name) to confirm too. Later: itsme invite status --wait 30")
            profile.output.document(exchangeDocument(exchange))
        case .confirmed:
            guard let id = exchange.contactID else { return .checkFailed }
            let contact = try profile.contacts().contact(id: id)
            profile.output.line("\(contact.name) (#\(contact.id)) is a verified contact: you both confirmed the SAS.")
            profile.output.document(Contacts.document(contact))
        case .rejected where !exchange.flags.isDisjoint(with: [.peerRejected]):
            profile.output.line("The other person rejected the SAS: nothing was kept. If it differed, exchange again.")
            profile.output.document(exchangeDocument(exchange))
            return .checkFailed
        default:
            profile.output.line("The exchange ended: \(exchangeStateName(exchange.state)).")
            profile.output.document(exchangeDocument(exchange))
            return .checkFailed
        }
        return .ok
    }
}

// MARK: realtime

struct Realtime: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add someone at a distance while you are both on a call, through a relay room.",
        discussion: """
            One runs `itsme realtime` and reads both codes to the other, who runs `itsme realtime --join`. \
            Both then see a SAS to compare on the call.
            """)
    @OptionGroup var global: GlobalOptions
    @OptionGroup var relay: RelayOption
    @Flag(help: "Join with the codes the other person reads to you (asked).") var join = false
    @Option(help: "Give up after this many seconds.") var timeout: Double = 300

    func run() async throws {
        try await execute(global) { profile in
            let url = try profile.relayURL(relay.relay, ca: relay.relayCA)
            try profile.requireNoPending()
            var codes: (String, String)? = nil
            if join { codes = (try askRemoteCode("Invite code"), try askRemoteCode("Encryption code")) }
            let output = profile.output
            let exchange = try await profile.realtimeExchange(
                relay: url, codes: codes, timeout: timeout,
                started: { exchange in
                    if !join, let invite = exchange.inviteCode, let encryption = exchange.encryptionCode {
                        output.notice("Invite code:     \(invite.text)")
                        output.notice("Encryption code: \(encryption.text)")
                        output.notice("Read both to the other person; they run: itsme realtime --join")
                    }
                    output.notice("Waiting for the other person in the room (up to \(Int(timeout)) s)...")
                },
                decide: { exchange in
                    guard let sas = exchange.sas, let peer = exchange.peer else { return false }
                    output.line("")
                    output.line("SAS: \(sas.text)")
                    output.line("\(peer.name) (fingerprint \(formatFingerprint(peer.fingerprint))) should see the same SAS.")
                    let same = try Input.confirmDefaultNo("Does \(peer.name) read the same SAS?")
                    if same { output.notice("Waiting for \(peer.name)'s answer...") }
                    return same
                })
            guard exchange.state == .confirmed, let id = exchange.contactID else {
                output.line("The exchange ended: \(exchangeStateName(exchange.state)); nothing was kept.")
                return .checkFailed
            }
            let contact = try profile.contacts().contact(id: id)
            output.line("\(contact.name) (#\(contact.id)) is a verified contact.")
            output.document(Contacts.document(contact))
            return .ok
        }
    }
}

// MARK: sas

struct SAS: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The SAS of the exchange in progress: show, confirm or reject it.",
        subcommands: [Show.self, Confirm.self, Reject.self], defaultSubcommand: Show.self)

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show the exchange in progress and its SAS.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await execute(global) { profile in
                guard let (_, exchange) = try profile.pending() else {
                    profile.output.line("No exchange in progress.")
                    profile.output.document(["state": "none"])
                    return .ok
                }
                if exchange.state == .compareSAS {
                    reportSAS(exchange, profile.output)
                } else {
                    profile.output.line("A \(methodName(exchange.method)) exchange: \(exchangeStateName(exchange.state)).")
                    profile.output.document(exchangeDocument(exchange))
                }
                return .ok
            }
        }
    }

    struct Confirm: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The other person's SAS is the same: keep the contact; verified once their confirmation arrives too.")
        @OptionGroup var global: GlobalOptions
        @Option(help: "For an invite: wait this many seconds for the other person's confirmation.") var wait: Double = 10

        func run() async throws {
            try await execute(global) { profile in
                let (contact, exchange) = try await profile.confirmPending(wait: wait)
                guard let contact else {
                    profile.output.line("The other person rejected the SAS: nothing was kept.")
                    return .checkFailed
                }
                if contact.state == .awaitingPeer {
                    profile.output.line(
                        "Confirmed. \(contact.name) (#\(contact.id)) awaits their confirmation: itsme invite status carries it on.")
                } else {
                    profile.output.line("\(contact.name) (#\(contact.id)) is a verified contact.")
                }
                _ = exchange
                profile.output.document(Contacts.document(contact))
                return .ok
            }
        }
    }

    struct Reject: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The SAS differs (or you give up): drop the exchange.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await execute(global) { profile in
                try await profile.rejectPending()
                profile.output.line("Rejected: nothing was kept. If the SAS differed, someone may be in the middle; exchange again.")
                return .ok
            }
        }
    }
}

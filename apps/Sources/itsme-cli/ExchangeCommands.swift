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
    output.line("Compare it aloud, then: \(suggest("sas", "confirm")) (the same) or \(suggest("sas", "reject")) (different).")
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

// MARK: Comparing the SAS

/// How a person at a terminal compares a SAS: by typing the one the other
/// person reads aloud (at a distance) or shows (in person), which the CLI
/// compares with this screen's. A bare "the same? [y/N]" invites a
/// habitual yes.
enum SASCheck {
    /// True when this command settles the exchange by asking: standard
    /// input is a terminal and standard output is not a JSON document (a
    /// script gets the SAS in the document and runs `itsme sas confirm` or
    /// `reject`).
    static func atTerminal(_ output: Output) -> Bool { Input.standardInputIsTerminal && !output.json }

    /// Shows this screen's SAS (`together`: both people look at each
    /// other's screens; else this person reads it aloud) and asks for the
    /// other person's: true when they are the same; false when the person
    /// types `reject`, or a SAS that differs three times. End of input
    /// throws (`.interrupted`): the exchange stays as it was.
    static func ask(_ sas: ShortCode, peer: Exchange.Peer, together: Bool, _ output: Output) throws -> Bool {
        output.notice("")
        output.notice("SAS: \(sas.text)")
        output.notice("It is \(peer.name)'s device (fingerprint \(formatFingerprint(peer.fingerprint))) only if \(peer.name) has the same SAS.")
        if !together { output.notice("Read yours aloud to \(peer.name); \(peer.name) reads theirs to you.") }
        let prompt = together ? "Type the SAS on \(peer.name)'s screen (or reject): " : "Type the SAS \(peer.name) reads to you (or reject): "
        return try typed(sas, prompt: prompt, output)
    }

    /// Asks with `prompt` for the SAS the other side has until the person
    /// types it (true) or types `reject`, or three times a SAS that
    /// differs from `sas` (false); `ask` and the device transfer's and
    /// Online Verify's comparisons.
    static func typed(_ sas: ShortCode, prompt: String, _ output: Output) throws -> Bool {
        var different = 0
        for _ in 1...10 {
            guard let answer = try Input.line(prompt) else {
                throw CLIError("input ended before the SAS was compared", exit: .interrupted)
            }
            let text = answer.trimmingCharacters(in: .whitespaces)
            if text.isEmpty { continue }
            if ["reject", "r", "no", "n"].contains(text.lowercased()) { return false }
            guard let heard = ShortCode(parsing: text) else {
                output.notice("A SAS is a word and four digits, as ECHO 0042; type it again.")
                continue
            }
            if heard == sas { return true }
            different += 1
            if different == 3 {
                output.notice("Three times a SAS that differs from this screen's: rejected.")
                return false
            }
            output.notice("\(heard.text) is not the SAS on this screen: read or ask for the other one again and type it, or type reject.")
        }
        throw CLIError("no SAS typed after 10 answers", exit: .interrupted)
    }
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
                    "The other person reads this code; then read theirs: give a photo of it to \(suggest("qr", "scan", "--image", blank: "FILE")), "
                        + "or paste its text into \(suggest("qr", "scan"))")
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
                guard SASCheck.atTerminal(profile.output), let sas = exchange.sas, let peer = exchange.peer else {
                    reportSAS(exchange, profile.output)
                    return .ok
                }
                // Together: each types the SAS the other's screen shows.
                guard try SASCheck.ask(sas, peer: peer, together: true, profile.output) else {
                    try await profile.rejectPending()
                    profile.output.line("Rejected: nothing was kept. If the SAS differed, someone may be in the middle; exchange again.")
                    return .checkFailed
                }
                guard let contact = try await profile.confirmPending().contact else { return .checkFailed }
                profile.output.line("\(contact.name) (#\(contact.id)) is a verified contact.")
                profile.output.line("\(peer.name) types the SAS on your screen the same way.")
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

/// How long `invite create`, `accept` and `status` wait for the other
/// person at a terminal unless `--wait` says otherwise; a script (standard
/// input not a terminal, or `--json`) does not wait unless asked.
let inviteWaitAtTerminal: Double = 600

struct Invite: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add someone at a distance through a relay, with two codes.",
        discussion: """
            You run `itsme invite create` and give the other person both codes: the invite code by message, \
            the encryption code another way (say it on a call). They run `itsme invite accept`. At a terminal \
            each command waits for the other (up to 10 minutes), shows the SAS, and asks for the SAS the other \
            person reads aloud; each screen then says what the other decided. With --no-wait, or from a \
            script, a command does its step and returns: `itsme invite status` carries the exchange on, and \
            `itsme sas confirm|reject` decides. A relay that guesses or changes anything makes both sides \
            fail; it never learns who you are.
            """,
        subcommands: [Create.self, Accept.self, Status.self, Cancel.self])

    /// `--wait` and `--no-wait`.
    struct Waiting: ParsableArguments {
        @Option(
            help: ArgumentHelp(
                "Wait up to this many seconds for the other person (default: 600 at a terminal; else 0 for create, 30 for accept).",
                valueName: "seconds"))
        var wait: Double?
        @Flag(help: "Do this step and return; `itsme invite status` carries the exchange on.") var noWait = false

        func validate() throws {
            if noWait, wait != nil { throw ValidationError("give --wait or --no-wait, not both") }
            if let wait, !(wait >= 0) { throw ValidationError("--wait is a number of seconds, 0 or more") }
        }

        /// The seconds to wait; `script` is the wait without a terminal.
        func seconds(_ output: Output, script: Double = 0) -> Double {
            if noWait { return 0 }
            return wait ?? (SASCheck.atTerminal(output) ? inviteWaitAtTerminal : script)
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create an invite: prints the two codes to give, then waits for the other person.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var relay: RelayOption
        @OptionGroup var waiting: Waiting

        func run() async throws {
            try await execute(global) { profile in
                let url = try profile.relayURL(relay.relay, ca: relay.relayCA)
                _ = try profile.contacts()
                let exchange = try await profile.createInvite(relay: url)
                guard let invite = exchange.inviteCode, let encryption = exchange.encryptionCode else {
                    throw CLIError("the invite has no codes")
                }
                let output = profile.output
                let wait = waiting.seconds(output)
                output.notice("Invite code:     \(invite.text)")
                output.notice("Encryption code: \(encryption.text)")
                output.notice("")
                output.notice("Give the other person both codes: the invite code by message, the encryption code")
                output.notice("another way (say it on a call). They run: \(suggest("invite", "accept", elsewhere: true))")
                guard wait > 0 else {
                    output.notice("The invite lasts 24 hours. Then: \(suggest("invite", "status"))")
                    output.document(exchangeDocument(exchange))
                    return .ok
                }
                return try await Invite.carryOn(profile, wait: wait) { wait in
                    try await profile.continueInvite(wait: wait)
                }
            }
        }
    }

    struct Accept: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Accept an invite with its two codes (the encryption code is asked, not passed); waits for the other side.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var relay: RelayOption
        @Argument(help: "The invite code (asked if not given).") var inviteCode: String?
        @OptionGroup var waiting: Waiting

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
                let wait = waiting.seconds(profile.output, script: 30)
                profile.output.notice("Joining the invite; waiting up to \(duration(Int64(wait))) for the other side...")
                return try await Invite.carryOn(profile, wait: wait) { wait in
                    try await profile.acceptInvite(relay: url, inviteCode: invite, encryptionCode: encryption, wait: wait)
                }
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Carry the invite on: fetch, answer; at a terminal, compare the SAS and wait for the other's decision.")
        @OptionGroup var global: GlobalOptions
        @Option(
            help: ArgumentHelp(
                "Wait up to this many seconds for the other side (default: 600 at a terminal, else 30).", valueName: "seconds"))
        var wait: Double?

        func validate() throws {
            if let wait, !(wait >= 0) { throw ValidationError("--wait is a number of seconds, 0 or more") }
        }

        func run() async throws {
            try await execute(global) { profile in
                let seconds = wait ?? (SASCheck.atTerminal(profile.output) ? inviteWaitAtTerminal : 30)
                return try await Invite.carryOn(profile, wait: seconds) { wait in
                    try await profile.continueInvite(wait: wait)
                }
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

    /// Waits (a countdown at a terminal) while `step` carries the invite
    /// toward its SAS; then, at a terminal, the person compares the SAS by
    /// typing the other's, this side's decision is posted and the other's
    /// awaited, and the screen says what the other person decided. Without
    /// a terminal the SAS is reported for `itsme sas confirm|reject`.
    static func carryOn(_ profile: Profile, wait: Double, _ step: (Double) async throws -> Exchange) async throws -> Exit {
        let start = Date()
        var exchange = try await counting("Waiting for the other person", seconds: wait) {
            try await step(wait)
        }
        if exchange.state == .compareSAS, SASCheck.atTerminal(profile.output), let sas = exchange.sas, let peer = exchange.peer {
            guard try SASCheck.ask(sas, peer: peer, together: false, profile.output) else {
                try await profile.rejectPending()
                profile.output.line("Rejected: nothing was kept. \(peer.name)'s side is told the exchange ended.")
                profile.output.line("If the SAS differed, someone may be in the middle: exchange again, another way if you can.")
                return .checkFailed
            }
            profile.output.line("The same SAS: your confirmation goes to \(peer.name).")
            let left = max(inviteDecisionWait, wait - Date().timeIntervalSince(start))
            do {
                exchange = try await counting("Waiting for \(peer.name)'s decision", seconds: left) {
                    try await profile.confirmPending(wait: left).exchange
                }
            } catch let error as RelayError where error.inviteEnded {
                profile.output.line("\(peer.name) ended the exchange (rejected the SAS, or gave up): nothing was kept.")
                return .checkFailed
            }
        }
        return try report(exchange, profile)
    }

    /// At least this long for the other person's decision after one's own.
    static let inviteDecisionWait: Double = 120

    static func report(_ exchange: Exchange, _ profile: Profile) throws -> Exit {
        let name = exchange.peer?.name ?? "the other person"
        switch exchange.state {
        case .compareSAS:
            reportSAS(exchange, profile.output)
        case .awaitingPeer:
            profile.output.line("Still waiting for the other side. Later: \(suggest("invite", "status"))")
            profile.output.document(exchangeDocument(exchange))
        case .awaitingDecision:
            profile.output.line("You confirmed; \(name) has not decided yet. Later: \(suggest("invite", "status"))")
            profile.output.document(exchangeDocument(exchange))
        case .confirmed:
            guard let id = exchange.contactID else { return .checkFailed }
            let contact = try profile.contacts().contact(id: id)
            profile.output.line("\(name) confirmed too: \(contact.name) (#\(contact.id)) is a verified contact.")
            profile.output.document(Contacts.document(contact))
        case .rejected where !exchange.flags.isDisjoint(with: [.peerRejected]):
            profile.output.line("\(name) rejected the SAS: nothing was kept. If it differed, exchange again.")
            profile.output.document(exchangeDocument(exchange))
            return .checkFailed
        default:
            profile.output.line("The exchange ended: \(exchangeStateName(exchange.state)); nothing was kept.")
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
            var countdown: WaitingLine?
            var decided = false
            var peerName = "the other person"
            let exchange = try await profile.realtimeExchange(
                relay: url, codes: codes, timeout: timeout,
                started: { exchange in
                    if !join, let invite = exchange.inviteCode, let encryption = exchange.encryptionCode {
                        output.notice("Invite code:     \(invite.text)")
                        output.notice("Encryption code: \(encryption.text)")
                        output.notice("Read both to the other person; they run: \(suggest("realtime", "--join", elsewhere: true))")
                    }
                    output.notice("Waiting for the other person in the room (up to \(duration(Int64(timeout))))...")
                    countdown = WaitingLine("Waiting for the other person", seconds: timeout)
                },
                decide: { exchange in
                    countdown?.stop()
                    guard let sas = exchange.sas, let peer = exchange.peer else { return false }
                    peerName = peer.name
                    let same = try SASCheck.ask(sas, peer: peer, together: false, output)
                    decided = same
                    if same { output.notice("The same SAS: your confirmation goes to \(peer.name); waiting for theirs...") }
                    return same
                })
            countdown?.stop()
            let rejectedByPeer = !exchange.flags.isDisjoint(with: [.peerRejected])
            guard exchange.state == .confirmed, let id = exchange.contactID else {
                if rejectedByPeer {
                    output.line("\(peerName) rejected the SAS: nothing was kept. If it differed, exchange again.")
                } else if exchange.state == .rejected && !decided && exchange.peer != nil {
                    output.line("Rejected: nothing was kept. \(peerName)'s side is told.")
                } else if exchange.state == .rejected && decided {
                    output.line("\(peerName) left before deciding: nothing was kept.")
                } else {
                    output.line("The exchange ended: \(exchangeStateName(exchange.state)); nothing was kept.")
                }
                return .checkFailed
            }
            let contact = try profile.contacts().contact(id: id)
            output.line("\(peerName) confirmed too: \(contact.name) (#\(contact.id)) is a verified contact.")
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
                        "Confirmed. \(contact.name) (#\(contact.id)) awaits their confirmation: \(suggest("invite", "status")) carries it on.")
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

import ArgumentParser
import Foundation
import ItsMeKit
import QRCode
import RelayServer
import RelayClient
import Logging

/// The demo's clock: it starts at the real time and jumps forward instead of
/// waiting. It exists only here and in tests; no normal command has one.
final class DemoClock: Clock, @unchecked Sendable {
    private let lock = NSLock()
    private var value: Int64
    init(_ start: Int64) { value = start }
    func now() -> Int64 { lock.withLock { value } }
    func pause(_ seconds: Double) async { advance(Int64(max(1, seconds.rounded(.up)))) }
    func advance(_ seconds: Int64) { lock.withLock { value += seconds } }
}

struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show ItsMe working: three people, a relay on 127.0.0.1, every flow, checked.",
        discussion: """
            Alice, Bob and Carol get temporary data directories; a relay runs on 127.0.0.1 inside this process. \
            The demo adds contacts by QR code and by invite, verifies by voice and through the relay, and shows \
            a device change being detected and acknowledged. It runs its own clock so it never waits for a \
            30-second window. Exits 0 only if every check held.
            """)

    @Flag(help: "Keep the data directories (their path is printed).") var keep = false

    func run() async throws {
        let demo = DemoRun()
        do {
            try Sodium.initialize()
            try await demo.run(keep: keep)
        } catch {
            demo.fail("the demo stopped: \(explain(error).0)")
        }
        print("")
        if demo.failures == 0 {
            print("Summary: all \(demo.checks) checks held.")
        } else {
            print("Summary: \(demo.failures) of \(demo.checks) checks FAILED.")
            throw ExitCode(Exit.checkFailed.rawValue)
        }
    }
}

/// One run of the demo: its people, its relay, its checks.
final class DemoRun {
    private(set) var checks = 0
    private(set) var failures = 0
    let clock = DemoClock(Int64(Date().timeIntervalSince1970))
    static let pin = "246810"

    func check(_ holds: Bool, _ what: String) {
        checks += 1
        if !holds { failures += 1 }
        print("   \(holds ? "ok  " : "FAIL") \(what)")
    }

    func fail(_ what: String) {
        checks += 1
        failures += 1
        print("   FAIL \(what)")
    }

    func step(_ number: Int, _ title: String) {
        print("")
        print("\(number). \(title)")
    }

    func say(_ text: String) { print("   \(text)") }

    private func person(_ name: String, in base: String) throws -> Profile {
        let profile = Profile(
            directory: base + "/" + name.lowercased(), output: Output(json: false), clock: clock,
            pinSource: .once({ DemoRun.pin }), passphraseSource: .terminal)
        let identity = try profile.create(name: name, pin: DemoRun.pin, passphrase: nil)
        say("\(name): fingerprint \(formatFingerprint(identity.fingerprint)), PIN set")
        return profile
    }

    /// Starts the relay in this process on a free port of 127.0.0.1.
    private func startRelay() async throws -> (RelayURL, Task<Void, Error>) {
        var configuration = RelayConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.databasePath = ":memory:"
        var logger = Logger(label: "itsme-demo-relay")
        // Stopping the relay at the end logs the cancelled listener.
        logger.logLevel = .critical
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        let task = Task {
            try await RelayServer(configuration: configuration, logger: logger).run { url in
                continuation.yield(url)
                continuation.finish()
            }
        }
        var iterator = stream.makeAsyncIterator()
        guard let url = await iterator.next() else { throw CLIError("the relay did not start") }
        return (try RelayURL(url), task)
    }

    func run(keep: Bool) async throws {
        var template = Array((NSTemporaryDirectory() + "itsme-demo-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw CLIError("cannot create a temporary directory") }
        let base = String(cString: made)
        defer {
            if keep { print("\nData directories kept in \(base)") } else { try? FileManager.default.removeItem(atPath: base) }
        }
        let (relay, relayTask) = try await startRelay()
        defer { relayTask.cancel() }

        print("ItsMe demo. A relay listens on \(relay.text); every person has a data directory under \(base).")
        print("The demo runs its own clock and jumps it forward instead of waiting for 30-second windows;")
        print("no normal command has such a clock.")

        step(1, "Alice, Bob and Carol create their identities")
        let alice = try person("Alice", in: base)
        let bob = try person("Bob", in: base)
        let carol = try person("Carol", in: base)

        step(2, "Alice and Bob add each other in person, by QR code (itsme qr show / qr scan)")
        let aliceQR = try alice.showQR()
        let bobQR = try bob.showQR()
        say("Alice's screen shows her code:")
        print(try QRCode(encoding: aliceQR.outgoingText).terminalDrawing().split(separator: "\n").map { "   " + $0 }.joined(separator: "\n"))
        say(aliceQR.outgoingText)
        let atBob = try bob.scanQR(aliceQR.outgoingText)
        let atAlice = try alice.scanQR(bobQR.outgoingText)
        say("Bob scans Alice's code; Alice scans Bob's.")
        say("Alice's screen: SAS \(atAlice.sas?.text ?? "-"); Bob's screen: SAS \(atBob.sas?.text ?? "-")")
        check(atAlice.sas != nil && atAlice.sas == atBob.sas, "both screens show the same SAS")
        let bobAtAlice = try demoContact(try await alice.confirmPending().contact)
        let aliceAtBob = try demoContact(try await bob.confirmPending().contact)
        say("Both say it matches (itsme sas confirm).")
        check(bobAtAlice.state == .verified && aliceAtBob.state == .verified, "Alice has Bob, and Bob has Alice, as verified contacts")

        step(3, "Alice invites Carol at a distance, through the relay (itsme invite create / accept / status)")
        let invite = try await alice.createInvite(relay: relay)
        guard let inviteCode = invite.inviteCode?.text, let encryptionCode = invite.encryptionCode?.text else {
            throw CLIError("the invite has no codes")
        }
        say("Alice: invite code \(inviteCode) (sent by message), encryption code \(encryptionCode) (said on a call)")
        var atCarol = try await carol.acceptInvite(relay: relay, inviteCode: inviteCode, encryptionCode: encryptionCode, wait: 0)
        say("Carol accepts with both codes; her answer waits on the relay.")
        let inviteAtAlice = try await alice.continueInvite(wait: 5)
        atCarol = try await carol.continueInvite(wait: 5)
        say("Alice's screen: SAS \(inviteAtAlice.sas?.text ?? "-"); Carol's screen: SAS \(atCarol.sas?.text ?? "-")")
        check(inviteAtAlice.sas != nil && inviteAtAlice.sas == atCarol.sas, "both screens show the same SAS")
        // Each confirms; the two decisions cross through the mailbox (the
        // inviter's goes out once Carol's has arrived).
        _ = try await alice.confirmPending(wait: 0)
        _ = try await carol.confirmPending(wait: 0)
        let decidedAtAlice = try await alice.continueInvite(wait: 5)
        let decidedAtCarol = try await carol.continueInvite(wait: 5)
        say("Both say it matches (itsme sas confirm); each side's confirmation reaches the other (itsme invite status).")
        let carolAtAlice = try alice.contacts().contact(id: try demoContactID(decidedAtAlice))
        let aliceAtCarol = try carol.contacts().contact(id: try demoContactID(decidedAtCarol))
        check(
            carolAtAlice.state == .verified && aliceAtCarol.state == .verified && carolAtAlice.exchangeMethod == .invite,
            "Alice and Carol are verified contacts, added by invite")

        step(4, "Alice and Bob, on a call, verify each other by voice (itsme verify)")
        let first = try await voice(alice, bobAtAlice, bob, aliceAtBob)
        check(first.alice == .verified && first.bob == .verified, "both checks: verified, codes and device tags match")

        step(5, "Alice and Carol verify each other through the relay (itsme online-verify)")
        let aliceStore = try alice.contacts(), carolStore = try carol.contacts()
        let clock = self.clock
        async let aliceSide = startOnlineVerify(relay, store: aliceStore, contactID: carolAtAlice.id, timeout: 20, now: { clock.now() })
        async let carolSide = startOnlineVerify(relay, store: carolStore, contactID: aliceAtCarol.id, timeout: 20, now: { clock.now() })
        let (aliceOnline, carolOnline) = try await (aliceSide, carolSide)
        say("Alice's screen: SAS \(aliceOnline.sas?.text ?? "-"); Carol's screen: SAS \(carolOnline.sas?.text ?? "-")")
        check(aliceOnline.sas != nil && aliceOnline.sas == carolOnline.sas, "both screens show the same SAS")
        let onlineOutcomes = (
            try aliceOnline.confirm(now: clock.now()), try carolOnline.confirm(now: clock.now())
        )
        check(onlineOutcomes.0 == .verified && onlineOutcomes.1 == .verified, "both confirm: verified, device tags match")

        step(6, "Bob's device changes: he forgets its secrets, as a new phone would (itsme device reset)")
        let forgotten = try bob.resetDevice()
        say("Bob's device forgot its secrets for \(forgotten) contact.")
        var second = try await voice(alice, bobAtAlice, bob, aliceAtBob)
        // A tag is two digits: in one window in 100 the new device's tag is
        // the old one's by chance; the next window's tag is drawn afresh.
        for _ in 0..<3 where second.alice == .verified {
            say("By chance (1 in 100) Bob's new device said the tag his old one would have: the next window tells.")
            second = try await voice(alice, bobAtAlice, bob, aliceAtBob)
        }
        let bobNow = try alice.contacts().contact(id: bobAtAlice.id)
        check(second.alice == .deviceChanged, "Alice's check: Bob's code is right, his device tag is not: device changed")
        check(bobNow.state == .degraded && !bobNow.degradationAcknowledged, "Alice now sees Bob as \"device changed\"")

        step(7, "Bob gives Alice his device-change code; she enters it (itsme device-change-code / acknowledge-device-change)")
        var random = SystemRandom()
        let code = try DegradationCode.create(store: try bob.contacts(), contactID: aliceAtBob.id, random: &random)
        say("Bob's device-change code for Alice: \(code)")
        try DegradationCode.accept(store: try alice.contacts(), contactID: bobAtAlice.id, code: code, now: clock.now())
        let acknowledged = try alice.contacts().contact(id: bobAtAlice.id)
        check(acknowledged.state == .degraded && acknowledged.degradationAcknowledged, "Alice's device accepts it: device change acknowledged")
        let third = try await voice(alice, bobAtAlice, bob, aliceAtBob)
        check(third.alice == .verified, "at the next verification Bob's new device tag matches again")
    }

    /// One voice session between Alice and Bob, as two people on a call
    /// would run it; the demo clock jumps to the window.
    private func voice(_ alice: Profile, _ bobAtAlice: Contact, _ bob: Profile, _ aliceAtBob: Contact) async throws
        -> (alice: VoiceSession.Outcome, bob: VoiceSession.Outcome)
    {
        let aliceStore = try alice.contacts(), bobStore = try bob.contacts()
        let a = try VoiceSession(store: aliceStore, contactID: bobAtAlice.id, now: clock.now())
        let b = try VoiceSession(store: bobStore, contactID: aliceAtBob.id, now: clock.now())
        let wait = max(a.startsIn(now: clock.now()), b.startsIn(now: clock.now()))
        say("The next window starts in \(wait) s: the demo clock jumps there.")
        if wait > 0 { clock.advance(wait) }
        try a.start(now: clock.now())
        try b.start(now: clock.now())
        say("Session ID: Alice's screen \(a.sessionIDText), Bob's screen \(b.sessionIDText)")
        check(a.sessionIDText == b.sessionIDText, "the same session ID on both screens")
        for _ in 0..<2 {
            let (speaker, listener, says) = a.turn == .mine ? (a, b, "Alice chooses %@, one of her five words, and says it; Bob types it.") : (b, a, "Bob chooses %@, one of his five words, and says it; Alice types it.")
            let word = speaker.myWords[0]
            try speaker.select(word, now: clock.now())
            try listener.select(word, now: clock.now())
            say(says.replacingOccurrences(of: "%@", with: NATO.words[word]))
        }
        guard let aliceCode = a.yourCode, let aliceTag = a.yourTag, let bobCode = b.yourCode, let bobTag = b.yourTag else {
            throw CLIError("the session has no codes")
        }
        say("Alice's Your Code: \(VoiceProtocol.codeText(aliceCode)) tag \(pad2(aliceTag)); Bob's Your Code: \(VoiceProtocol.codeText(bobCode)) tag \(pad2(bobTag))")
        clock.advance(4)
        let outcomes = (
            alice: try a.check(heardCode: VoiceProtocol.codeText(bobCode), heardTag: bobTag, now: clock.now()),
            bob: try b.check(heardCode: VoiceProtocol.codeText(aliceCode), heardTag: aliceTag, now: clock.now())
        )
        check(a.theirCode == bobCode && b.theirCode == aliceCode, "each one's Their Code is the code the other read aloud")
        say("Alice types what she heard: \(outcomeName(outcomes.alice)); Bob types what he heard: \(outcomeName(outcomes.bob))")
        clock.advance(30)
        return outcomes
    }
}

/// The demo's contact, or a clear failure when the other side rejected.
private func demoContact(_ contact: Contact?) throws -> Contact {
    guard let contact else { throw CLIError("the other person rejected the SAS") }
    return contact
}

/// The id of the contact a settled exchange verified.
private func demoContactID(_ exchange: Exchange) throws -> Int64 {
    guard exchange.state == .confirmed, let id = exchange.contactID else {
        throw CLIError("the exchange is \(exchange.state), not confirmed by both")
    }
    return id
}

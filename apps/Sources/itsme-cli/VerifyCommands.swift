import ArgumentParser
import Foundation
import ItsMeKit
import RelayClient

func wordList(_ words: [Int]) -> String { words.map { NATO.words[$0] }.joined(separator: ", ") }

/// What a verification outcome means, in a line, and its exit code.
func describe(_ outcome: VoiceSession.Outcome, _ name: String) -> (String, Exit) {
    switch outcome {
    case .verified:
        return ("Verified: this is \(name).", .ok)
    case .verifiedTagUnchecked:
        return ("Verified: this is \(name). (This device holds no device secret for \(name), so the device tag was not checked.)", .ok)
    case .deviceChanged:
        return (
            "The code is right, but \(name)'s device changed: \(name) is now marked \"device changed\". If \(name) says so too, "
                + "ask for their device-change code and enter it with: \(suggest("acknowledge-device-change", name))", .ok
        )
    case .mismatch:
        return ("NOT VERIFIED: the code is wrong. It is not \(name), or a word or number was misheard. Start again: \(suggest("verify", name))", .checkFailed)
    }
}

func outcomeName(_ outcome: VoiceSession.Outcome) -> String {
    switch outcome {
    case .verified: return "verified"
    case .verifiedTagUnchecked: return "verified-tag-unchecked"
    case .deviceChanged: return "device-changed"
    case .mismatch: return "mismatch"
    }
}

// MARK: verify

struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check it is really them, on a call: a session of spoken words and codes.",
        discussion: """
            Both run `itsme verify` at about the same time. The session starts at the next 30-second window \
            (a countdown shows); both screens show the same session ID. Each of you chooses one of your words \
            in turn and says it; the other types it. Then each reads their code aloud ("Your Code") and types \
            the code they heard; the result compares it with "Their Code".
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The contact: #id, name or fingerprint.") var contact: String

    func run() async throws {
        try await execute(global) { profile in
            let store = try profile.contacts()
            let c = try profile.contact(contact)
            let clock = profile.clock
            let session = try VoiceSession(store: store, contactID: c.id, now: clock.now())
            print("Verifying \(c.name). The session starts with the next 30-second window.")
            var shown: Int64 = -1
            while true {
                let left = session.startsIn(now: clock.now())
                if left <= 0 { break }
                if left != shown {
                    print("\rStarting in \(left) s \u{1B}[K", terminator: "")
                    fflush(standardOutput)
                    shown = left
                }
                await clock.pause(0.2)
            }
            print("\rStarting now.\u{1B}[K")
            try session.start(now: clock.now())
            print("Session ID: \(session.sessionIDText)   (\(c.name)'s screen shows the same: say it)")
            print("Your words: \(wordList(session.myWords))")
            while session.state == .selecting {
                switch session.turn {
                case .mine:
                    let word = try Input.ask("Your turn: choose one of your words, say it, and type it: ") { text -> Result<Int, CLIError> in
                        guard let w = TypedInput.natoWord(text), session.myWords.contains(w) else {
                            return .failure(CLIError("that is not one of your words (\(wordList(session.myWords)))"))
                        }
                        return .success(w)
                    }
                    try session.select(word, now: clock.now())
                case .theirs:
                    let word = try Input.ask("\(c.name)'s turn: type the word \(c.name) says: ") { text -> Result<Int, CLIError> in
                        guard let w = TypedInput.natoWord(text) else {
                            return .failure(CLIError("that is not a word of the alphabet ALFA, BRAVO, ... ZULU (spelt as shown: ALFA, JULIET, XRAY)"))
                        }
                        return .success(w)
                    }
                    do {
                        try session.select(word, now: clock.now())
                    } catch let error as ItsMeError where error.kind == .authenticationFailed {
                        print("NOT VERIFIED: \(c.name)'s device could not have offered \(NATO.words[word]). It is not \(c.name), or the word was misheard. Start again.")
                        return .checkFailed
                    }
                case .none:
                    break
                }
            }
            guard session.state == .comparing, let yourCode = session.yourCode, let yourTag = session.yourTag else {
                throw CLIError("the session ended: \(session.failure?.message ?? "\(session.state)")")
            }
            print("")
            print("Your Code:  \(VoiceProtocol.codeText(yourCode))  tag \(pad2(yourTag))   (say it aloud)")
            let heard = try Input.ask("Type the code \(c.name) says (like ECHO 512): ") { text -> Result<String, CLIError> in
                guard VoiceProtocol.parseCode(text) != nil else {
                    return .failure(CLIError("a code is a word of the alphabet and three digits, like ECHO 512"))
                }
                return .success(text)
            }
            // A device with no secret of theirs (a new one) cannot check a
            // tag: it does not ask for one it would ignore.
            let heardTag: UInt32
            if session.theirTag == nil {
                print("No tag to type: this device holds no device secret for \(c.name) (it is new to them), so it cannot check one.")
                heardTag = 0
            } else {
                heardTag = try Input.ask("Type the two-digit tag \(c.name) says: ") { text -> Result<UInt32, CLIError> in
                    guard let value = TypedInput.tag(text) else { return .failure(CLIError("a tag is two digits, 00 to 99 (7 is read as 07)")) }
                    return .success(value)
                }
            }
            let outcome = try session.check(heardCode: heard, heardTag: heardTag, now: clock.now())
            if let theirCode = session.theirCode {
                print("Their Code: \(VoiceProtocol.codeText(theirCode))  tag \(session.theirTag.map(pad2) ?? "--")   (what \(c.name)'s device says)")
            }
            let (text, exit) = describe(outcome, c.name)
            print(text)
            return exit
        }
    }
}

func pad2(_ value: UInt32) -> String { value < 10 ? "0\(value)" : "\(value)" }

// MARK: online-verify

struct OnlineVerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "online-verify",
        abstract: "Check it is really them through the relay, while you talk: compare one code.",
        discussion: """
            Both run it within the same minute; both screens then show a SAS to read aloud. A profile set with \
            `itsme profile set` is shared in the session; once the SAS is confirmed, a profile the contact shares \
            is fetched from the relay, shown, and applied to the contact if you say so.
            """)
    @OptionGroup var global: GlobalOptions
    @OptionGroup var relay: RelayOption
    @Argument(help: "The contact: #id, name or fingerprint.") var contact: String
    @Option(help: "Give up after this many seconds.") var timeout: Double = 60
    @Flag(help: "Apply a profile the contact shares without asking.") var applyProfile = false
    @Flag(help: "Ignore a profile the contact shares (it is not fetched).") var ignoreProfile = false

    func validate() throws {
        if applyProfile && ignoreProfile { throw ValidationError("--apply-profile and --ignore-profile exclude each other") }
    }

    func run() async throws {
        try await execute(global) { profile in
            let url = try profile.relayURL(relay.relay, ca: relay.relayCA)
            let store = try profile.contacts()
            let c = try profile.contact(contact)
            let clock = profile.clock
            var shared = profileToShare(profile)
            defer { if shared != nil { wipe(&shared!) } }
            if shared != nil { print("Your profile is shared with \(c.name) in this session.") }
            print("Waiting for \(c.name) in the relay room (up to \(Int(timeout)) s)...")
            let session = try await startOnlineVerify(
                url, store: store, contactID: c.id, timeout: timeout, now: { clock.now() },
                prepare: { if let shared { try $0.shareProfile(reference: shared) } })
            switch session.state {
            case .bindingDiffers, .otherCall:
                // This command binds to no call; the contact's app bound its session to one (PROTOCOL.md 11.4).
                print(
                    "NOT VERIFIED: \(c.name)'s app bound its session to a call, and this command cannot. Verify from the same app on both sides, or by voice (itsme verify).")
                return .checkFailed
            case .running, .compareSAS, .confirmed, .rejected, .failed:
                break
            }
            guard session.state == .compareSAS, let sas = session.sas else {
                throw CLIError("the session ended: \(session.failure?.message ?? "no SAS")")
            }
            print("SAS: \(sas.text)   (read it aloud; \(c.name) reads theirs to you)")
            guard try SASCheck.typed(sas, prompt: "Type the SAS \(c.name) reads to you (or reject): ", profile.output) else {
                try session.reject()
                print("NOT VERIFIED: the SAS differs. Someone may be in the middle; try again, or verify by voice.")
                return .checkFailed
            }
            let outcome = try session.confirm(now: clock.now())
            let (text, exit) = describe(outcome, c.name)
            print(text)
            if !ignoreProfile {
                await offerPeerProfile(
                    session, contact: c, url: url, store: store, apply: applyProfile ? true : nil, output: profile.output)
            }
            return exit
        }
    }
}

// MARK: device change

struct DeviceChangeCode: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device-change-code",
        abstract: "After your device changed: the code that lets a contact acknowledge it.",
        discussion: "Give it to the contact (say it on a call); they run `itsme acknowledge-device-change YOUR-NAME`.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The contact: #id, name or fingerprint.") var contact: String

    func run() async throws {
        try await execute(global) { profile in
            let c = try profile.contact(contact)
            var random = SystemRandom()
            let code = try DegradationCode.create(store: try profile.contacts(), contactID: c.id, random: &random)
            profile.output.line("Device-change code for \(c.name): \(code)")
            let me = try profile.identity().name
            profile.output.line(
                "Give it to \(c.name); they run: \(suggest("acknowledge-device-change", me, elsewhere: true)) (or the name they gave you)")
            profile.output.document(["contact": c.id, "code": code])
            return .ok
        }
    }
}

struct AcknowledgeDeviceChange: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "acknowledge-device-change",
        abstract: "Enter the device-change code a contact gave you (asked).",
        discussion: """
            A right code records that the change is their own: the contact stays marked "device changed", \
            acknowledged, and their device tags match again. Wrong codes count: after 5, entry locks for 5 minutes.
            """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The contact: #id, name or fingerprint.") var contact: String

    func run() async throws {
        try await execute(global) { profile in
            let store = try profile.contacts()
            let c = try profile.contact(contact)
            let limiter = DegradationCode.limiter(store: try profile.identity().store)
            for attempt in 1...3 {
                try checkNotLocked(limiter, profile.clock)
                let code = try Input.ask("\(c.name)'s device-change code: ") { text -> Result<String, CLIError> in
                    DegradationCode.parse(text) != nil
                        ? .success(text) : .failure(CLIError("a device-change code is 24 letters A-Z and digits 2-7"))
                }
                do {
                    try DegradationCode.accept(store: store, contactID: c.id, code: code, now: profile.clock.now())
                    profile.output.line("Acknowledged: \(c.name)'s new device is theirs. They stay marked \"device changed\" (acknowledged).")
                    return .ok
                } catch let error as ItsMeError where error.kind == .authenticationFailed || error.kind == .locked {
                    try checkNotLocked(limiter, profile.clock)
                    let left = AttemptLimiter.freeFailures - min(AttemptLimiter.freeFailures, try limiter.status(now: profile.clock.now()).failures)
                    let message = "that device-change code is wrong (\(left) more before a lockout)"
                    if attempt == 3 { throw CLIError(message, exit: .checkFailed) }
                    print(message + "; try again.")
                }
            }
            throw CLIError("the code is wrong", exit: .checkFailed)
        }
    }

    /// Locked: said before anything is asked, with the time left.
    private func checkNotLocked(_ limiter: AttemptLimiter, _ clock: Clock) throws {
        let status = try limiter.status(now: clock.now())
        if status.waitSeconds > 0 {
            throw CLIError(
                "device-change codes are locked after \(status.failures) wrong ones: try again in \(duration(Int64(status.waitSeconds)))",
                exit: .locked)
        }
    }
}

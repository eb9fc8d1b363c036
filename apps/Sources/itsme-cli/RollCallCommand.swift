import ArgumentParser
import Foundation
import ItsMeKit
import RelayClient

#if canImport(Glibc)
    import Glibc
#endif

// MARK: roll-call

struct RollCallCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "roll-call",
        abstract: "Check everyone on a conference call at once: who is a contact whose device holds your seed.",
        discussion: """
            One person runs `itsme roll-call` and shares the meeting code it prints on the call; everyone else \
            runs `itsme roll-call CODE`. Each screen lists your contacts present; once everyone is in, type `yes` \
            if those people are on your call. Then read the code shown aloud and type `said`. Type what each \
            contact reads as its row number and the code (`2 ECHO 042`). `done` ends with a summary, which asks \
            how many people are on the call: a face without a device in the roll call is what a deepfake looks \
            like. docs/PROTOCOL.md section 20.
            """)
    @OptionGroup var global: GlobalOptions
    @OptionGroup var relay: RelayOption
    @Argument(help: ArgumentHelp("The meeting code someone shared (without one, a new code is drawn for you to share).", valueName: "code"))
    var code: String?
    @Option(help: "How many people are on the call, you included (asked at the end if not given).") var people: Int?
    @Option(help: "Give up after this many seconds (a roll call lasts 10 minutes at most).") var timeout: Double = 600

    /// What the loop reacts to: a line typed, something from the room (of
    /// the connection `generation`: a connection that dropped is replaced by
    /// the next), or the clock, every second (the roll call's re-sends; a
    /// ping every 20 seconds keeps the room open).
    enum Event: Sendable {
        case line(String?)
        case room(GroupInput, generation: Int)
        case failed(String, generation: Int)
        case tick
    }

    func run() async throws {
        try await execute(global) { profile in
            let url = try profile.relayURL(relay.relay, ca: relay.relayCA)
            let output = profile.output
            var random = SystemRandom()
            let meeting: RemoteCode
            if let code {
                do { meeting = try RemoteCode(parsing: code, what: "meeting code") } catch { throw CLIError(explain(error).0) }
            } else {
                meeting = RemoteCode.random(using: &random)
                output.notice("Meeting code: \(meeting.text)")
                output.notice("Share it on the call; everyone else runs: \(suggest("roll-call", meeting.text, elsewhere: true))")
            }
            if let people, people < 1 { throw CLIError("--people is 1 or more") }
            try profile.unlock()
            let store = try profile.contacts()
            let names = Dictionary(uniqueKeysWithValues: try store.list().map { ($0.id, $0.name) })
            let call = try RollCall(store: store, meetingCode: meeting, now: profile.clock.now(), random: &random)
            let room: GroupRoom
            do { room = try await GroupRoom.join(url, groupID: call.roomName, timeout: 20) } catch {
                throw CLIError("the relay \(url.text): \(explain(error).0)", exit: .relay)
            }
            let session = RollCallSession(call: call, names: names, output: output, profile: profile, room: room)
            let (events, feed) = AsyncStream.makeStream(of: Event.self)
            let reader = Thread {
                while true {
                    let line = readLine(strippingNewline: true)
                    feed.yield(.line(line))
                    if line == nil { break }
                }
            }
            reader.start()
            func listen(_ room: GroupRoom, _ generation: Int) -> Task<Void, Never> {
                Task {
                    do {
                        while true { feed.yield(.room(try await room.nextInput(timeout: 3600), generation: generation)) }
                    } catch {
                        feed.yield(.failed(explain(error).0, generation: generation))
                    }
                }
            }
            var generation = 0
            var listener = listen(room, generation)
            let ticker = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(nanoseconds: 1_000_000_000)
                    feed.yield(.tick)
                }
            }
            output.notice("Joined roll call \(meeting.text). When everyone is in, check the list and type yes.")
            let deadline = Date().addingTimeInterval(min(timeout, Double(RollCall.lifetime)))
            var asking = false
            var count = people
            var ticks = 0
            loop: for await event in events {
                if Date() > deadline {
                    output.notice("The roll call's time is up.")
                    break
                }
                switch event {
                case .tick:
                    ticks += 1
                    if ticks % 20 == 0 { try? await session.room.ping() }
                    try await session.tick()
                case .failed(let reason, let failed):
                    guard failed == generation else { continue }
                    // The connection dropped: join again (a new slot); the
                    // roll call keeps this device's place (PROTOCOL.md 20.7).
                    guard let again = await session.rejoin(url, until: deadline) else {
                        output.warn("the room ended: \(reason)")
                        break loop
                    }
                    generation += 1
                    listener = listen(again, generation)
                case .room(let event, let from):
                    if !asking, from == generation { try await session.handle(event) }
                case .line(nil):
                    break loop
                case .line(let text?):
                    if asking {
                        guard let n = Int(text.trimmingCharacters(in: .whitespaces)), n >= 1, n <= 1000 else {
                            output.notice("A number of people, 1 or more:")
                            continue
                        }
                        count = n
                        break loop
                    }
                    if try await session.command(text) {
                        guard count == nil, Input.standardInputIsTerminal else { break loop }
                        asking = true
                        output.notice("How many people are on the call, you included?")
                    }
                }
            }
            listener.cancel()
            ticker.cancel()
            await session.room.leave()
            return session.summary(people: count)
        }
    }
}

/// One device's roll call at the terminal: the table, the prompts, and
/// what moves between the room and the `RollCall`.
final class RollCallSession {
    let call: RollCall
    let names: [Int64: String]
    let output: Output
    let profile: Profile
    private(set) var room: GroupRoom
    private var shownRoster: [UInt8] = []
    private var shownStates: [RollCall.ParticipantState] = []
    private var shownPhase: RollCall.Phase = .gathering
    private var shownAgreement: [Bool] = []
    private var shownSplit = false

    init(call: RollCall, names: [Int64: String], output: Output, profile: Profile, room: GroupRoom) {
        self.call = call
        self.names = names
        self.output = output
        self.profile = profile
        self.room = room
    }

    var now: Int64 { profile.clock.now() }

    /// Sends what the roll call has to send, then shows what changed. A
    /// send that fails leaves the message queued: the connection is being
    /// replaced, and what was lost goes again (PROTOCOL.md 20.6).
    func flush() async throws {
        while let message = try call.peekOutgoing() {
            do { try await room.send(message) } catch { break }
            call.markSent()
        }
        show()
    }

    /// The clock: the roll call's re-sends and due VIEWs.
    func tick() async throws {
        do { try call.tick(now: now) } catch let error as ItsMeError where error.kind == .expired { throw CLIError(error.message) }
        try await flush()
    }

    /// Joins the room again after the connection dropped: a few tries with
    /// a growing pause, within the roll call's time. Nil when it could not.
    func rejoin(_ url: RelayURL, until deadline: Date) async -> GroupRoom? {
        await room.leave()
        var pause = 0.5
        while Date().addingTimeInterval(pause) < deadline {
            try? await Task.sleep(nanoseconds: UInt64(pause * 1e9))
            if let again = try? await GroupRoom.join(url, groupID: call.roomName, timeout: 10) {
                room = again
                return again
            }
            pause = min(pause * 2, 8)
        }
        return nil
    }

    func name(_ p: RollCall.Participant) -> String {
        if p.index == 0 { return "you" }
        guard let id = p.contactID else { return "unknown device" }
        return names[id] ?? "contact #\(id)"
    }

    func stateText(_ p: RollCall.Participant) -> String {
        if p.index == 0 { return "" }
        let text: String
        switch p.state {
        case .notYet: text = "not yet"
        case .verified: text = "VERIFIED"
        case .wrong: text = "WRONG CODE"
        case .deviceChanged: text = "verified, but their DEVICE CHANGED"
        case .verifiedTagUnchecked: text = "verified (device not checked)"
        case .refused: text = "REFUSED (their device sent a code not sealed for you)"
        case .unknown: text = "no seed with you: not a contact"
        case .bindingDiffers: text = "BOUND DIFFERENTLY (one of you started the roll call from the call, the other not)"
        case .otherCall: text = "IN ANOTHER CALL (bound to another call: not the person on yours)"
        }
        return text + (p.left ? " (left)" : p.agrees ? "" : " (not agreeing yet)")
    }

    /// Prints the table when the roster or a state changed.
    func show() {
        let participants = call.participants
        let states = participants.map(\.state)
        let agreement = participants.map { $0.agrees || $0.left }
        let roster = call.rosterHash
        if roster != shownRoster && shownPhase != .gathering && call.phase == .gathering {
            output.notice("Someone joined or left: a new round. Check the list again, type yes, and read your new code.")
        }
        if call.isSplit && !shownSplit {
            output.warn(
                "the devices here do not all see the same people (a split): someone shows different participants to different devices. Do not trust this roll call; start a new one.")
        }
        shownSplit = call.isSplit
        guard roster != shownRoster || states != shownStates || call.phase != shownPhase || agreement != shownAgreement else { return }
        shownRoster = roster
        shownStates = states
        shownPhase = call.phase
        shownAgreement = agreement
        output.notice("")
        for p in participants where p.index > 0 {
            output.notice("  \(p.index)  \(name(p).padding(toLength: 20, withPad: " ", startingAt: 0))  \(stateText(p))")
        }
        if participants.count == 1 { output.notice("  (no one else yet)") }
        switch call.phase {
        case .gathering:
            let contacts = participants.filter { $0.index > 0 && !$0.left && $0.contactID != nil }.map(name)
            let unknown = participants.filter { $0.index > 0 && !$0.left && $0.contactID == nil }.count
            output.notice(
                "Your contacts here: \(contacts.isEmpty ? "none" : contacts.joined(separator: ", "))"
                    + (unknown > 0 ? "; \(unknown) unknown device\(unknown == 1 ? "" : "s")" : "")
                    + ". Are they on your call? Type yes (or wait for more).")
        case .confirmed:
            output.notice("Your code: \(call.myCode ?? "?"). Read it aloud to the call, then type said.")
        case .said:
            output.notice("Type what each contact reads: row and code (2 ECHO 042); done to finish.")
        case .expired:
            output.notice("The roll call has ended (10 minutes).")
        }
    }

    /// A frame of the group room, handed to the roll call as it came: the
    /// core reads the relay's events and the slot before each message.
    func handle(_ input: GroupInput) async throws {
        switch input {
        case .text(let text):
            try step { try call.roomText(text, now: now) }
        case .binary(let frame):
            do { try call.roomBinary(frame, now: now) } catch let error as ItsMeError {
                if error.kind == .expired { throw CLIError(error.message) }
                output.warn("refused a message: \(error.message)")
            }
        }
        try await flush()
    }

    /// A relay event applied: only the end of the roll call's time ends it.
    private func step(_ body: () throws -> Void) throws {
        do { try body() } catch let error as ItsMeError {
            if error.kind == .expired { throw CLIError(error.message) }
            output.warn(error.message)
        }
    }

    /// A line typed; true when it ends the roll call.
    func command(_ text: String) async throws -> Bool {
        let line = text.trimmingCharacters(in: .whitespaces)
        let lower = line.lowercased()
        do {
            if lower == "done" || lower == "quit" { return true }
            if lower == "yes" || lower == "y" {
                try call.confirmRoster(call.rosterHash, now: now, random: &randomSource)
            } else if lower == "said" {
                try call.confirmSaid(now: now, random: &randomSource)
            } else if let space = line.firstIndex(of: " "), let row = Int(line[..<space]) {
                let state = try call.enterHeard(String(line[line.index(after: space)...]), from: row, now: now)
                if state == .notYet { output.notice("Noted; checked when their sealed code arrives.") }
            } else if !line.isEmpty {
                output.notice("Type yes, said, a row and a code (2 ECHO 042), or done.")
            }
        } catch let error as ItsMeError {
            if error.kind == .expired { throw CLIError(error.message) }
            output.warn(error.message)
            shownStates = []
        }
        try await flush()
        return false
    }

    private var randomSource = SystemRandom()

    /// The summary, with the head count: the exit code is 0 only when every
    /// contact here was verified and every person on the call has a device
    /// in it.
    func summary(people count: Int?) -> Exit {
        // Everyone present at some point: one who checked out and left stays checked.
        let others = call.participants.filter { $0.index > 0 }
        func named(_ states: Set<RollCall.ParticipantState>) -> [String] {
            others.filter { states.contains($0.state) && $0.contactID != nil }.map(name)
        }
        let verified = named([.verified, .verifiedTagUnchecked])
        let changed = named([.deviceChanged])
        let failed = named([.wrong, .refused])
        let pending = named([.notYet])
        let unknown = others.filter { $0.contactID == nil && $0.state == .unknown }.count
        let elsewhere = others.filter { $0.state == .otherCall || $0.state == .bindingDiffers }.count
        output.line("")
        output.line("Roll call: \(others.count + 1) devices, yours included.")
        output.line("  Verified:       \(verified.isEmpty ? "no one" : verified.joined(separator: ", "))")
        if !changed.isEmpty { output.line("  Device changed: \(changed.joined(separator: ", ")) (the code matched; ask why)") }
        if !failed.isEmpty { output.line("  NOT VERIFIED:   \(failed.joined(separator: ", "))") }
        if !pending.isEmpty { output.line("  Not checked:    \(pending.joined(separator: ", "))") }
        if unknown > 0 { output.line("  Unknown devices: \(unknown) (no seed with you)") }
        if elsewhere > 0 { output.line("  Devices of another call: \(elsewhere) (bound to another call, or not to yours)") }
        if call.isSplit { output.line("  SPLIT: the devices did not all see the same people; do not trust this roll call.") }
        var missing = 0
        if let count {
            missing = max(0, count - (others.count + 1))
            output.line(
                missing == 0
                    ? "  Everyone on the call (\(count)) has a device in the roll call."
                    : "  \(missing) of the \(count) people on the call \(missing == 1 ? "has" : "have") NO DEVICE in the roll call: no device vouches for \(missing == 1 ? "that person" : "them").")
        }
        output.document([
            "verified": verified, "deviceChanged": changed, "notVerified": failed, "notChecked": pending, "unknown": unknown,
            "devices": others.count + 1, "withoutDevice": missing, "otherCall": elsewhere, "split": call.isSplit,
        ])
        return failed.isEmpty && pending.isEmpty && changed.isEmpty && missing == 0 && elsewhere == 0 && !call.isSplit
            ? .ok : .checkFailed
    }
}

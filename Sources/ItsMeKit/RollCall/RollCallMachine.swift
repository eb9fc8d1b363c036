/// The roll-call state machine (docs/PROTOCOL.md section 20), as a value:
/// each transition checks its input against the state and returns what the
/// driver must do (send bytes to the group room, record an outcome on a
/// contact). It reads and writes no store.
///
///     gathering --confirmRoster--> confirmed --confirmSaid--> said
///     a new participant (a HELLO not in the roster): back to gathering,
///     with a new roster, new codes, and what this round heard forgotten
///
/// A participant's check (heard code against the sealed one) is kept
/// across rounds. Peer input that does not fit is refused with an error
/// and changes nothing: one participant's bad message never ends the roll
/// call for the others. Only the lifetime ends it.
struct RollCallMachine {
    /// One of this device's contacts, with what the roll call needs of it.
    struct Member {
        let contactID: Int64
        let pid: [UInt8]
        let seed: SecretBox
        let tagSecrets: TagSecrets
    }

    /// Where the check of one participant stands.
    enum Check: Equatable {
        /// No heard code, or no sealed code, yet.
        case notYet
        /// The codes matched and so did the device tag.
        case verified
        /// The codes matched; the device tag is not the one stored: their device changed.
        case deviceChanged
        /// The codes matched; this device holds no device secret of theirs to check.
        case verifiedTagUnchecked
        /// The heard code differs from the one their device sealed.
        case wrong
        /// Their sealed code did not open or was not a code (tampered with,
        /// or sealed for another roster): neither verified nor wrong.
        case refused
    }

    struct Participant {
        let hello: RollCallHello
        /// The relay slot it spoke from; nil for this device.
        var slot: Int?
        /// Index into `members` when it is a contact of ours.
        var member: Int?
        var left = false
        /// What our owner typed this round.
        var heard: UInt32?
        /// Its entry for us in its SAID of this round.
        var sealed: [UInt8]?
        /// Its SAID of this round, whole (a replay of it is ignored).
        var said: [UInt8]?
        var check: Check = .notYet
        /// Heard codes compared against this round's sealed one.
        var attempts = 0
    }

    enum Phase: Equatable {
        /// Participants arrive; the owner has not confirmed this roster.
        case gathering
        /// The owner confirmed `roster`; `code` is shown, not yet sent.
        case confirmed(roster: [UInt8], code: UInt32)
        /// The owner said the code aloud; its SAID went out.
        case said(roster: [UInt8], code: UInt32)
        case expired
    }

    /// Heard codes compared for one participant in one round, at most.
    static let maxAttempts = 3

    let rollCallID: [UInt8]
    let roomID: [UInt8]
    let createdAt: Int64
    let myPID: [UInt8]
    let members: [Member]
    private(set) var participants: [Participant]
    private(set) var phase: Phase = .gathering

    /// The machine and its HELLO to send. The random source gives the
    /// nonce, then the padding tags.
    static func start<R: RandomSource>(
        meetingCode: RemoteCode, members: [Member], myPID: [UInt8], now: Int64, random: inout R
    ) throws -> (RollCallMachine, [SessionAction]) {
        try UnixTime.check(now)
        let rollCallID = RollCallProtocol.rollCallID(meetingCode)
        let window = VoiceProtocol.window(now)
        let nonce = random.bytes(RollCallProtocol.nonceCount)
        var tags = members.map {
            RollCallProtocol.presenceTag(seed: $0.seed, rollCallID: rollCallID, window: window, nonce: nonce, from: myPID, to: $0.pid)
        }
        let count = try RollCallProtocol.paddedTagCount(members.count)
        var drawn = Set(tags)
        while tags.count < count {
            let tag = random.bytes(RollCallProtocol.tagCount)
            if drawn.insert(tag).inserted { tags.append(tag) }
        }
        let hello = RollCallHello(window: window, nonce: nonce, tags: tags)
        let machine = RollCallMachine(
            rollCallID: rollCallID, roomID: RollCallProtocol.roomID(meetingCode), createdAt: now, myPID: myPID, members: members,
            participants: [Participant(hello: hello, slot: nil, member: nil)])
        return (machine, [.send(hello.bytes)])
    }

    private init(
        rollCallID: [UInt8], roomID: [UInt8], createdAt: Int64, myPID: [UInt8], members: [Member], participants: [Participant]
    ) {
        self.rollCallID = rollCallID
        self.roomID = roomID
        self.createdAt = createdAt
        self.myPID = myPID
        self.members = members
        self.participants = participants
    }

    // MARK: What the state shows

    /// The hash of the roster as this device sees it now: every HELLO's.
    var rosterHash: [UInt8] {
        RollCallProtocol.rosterHash(
            rollCallID: rollCallID, sortedHelloHashes: participants.map(\.hello.hash).sorted { $0.lexicographicallyPrecedes($1) })
    }

    /// The code to read aloud, once the roster is confirmed.
    var myCode: UInt32? {
        switch phase {
        case .confirmed(_, let code), .said(_, let code): code
        case .gathering, .expired: nil
        }
    }

    // MARK: Transitions

    /// `.expired` once the lifetime has passed (and for good).
    private mutating func checkAlive(now: Int64) throws {
        try UnixTime.check(now)
        if phase == .expired || now > createdAt + RollCallProtocol.lifetime || now < createdAt - 30 {
            phase = .expired
            throw ItsMeError(.expired, "the roll call ended (it lasts \(RollCallProtocol.lifetime / 60) minutes): start a new one")
        }
    }

    /// Feeds one message a participant sent from relay slot `slot`.
    /// Throws `.malformedMessage`, `.invalidArgument` (a HELLO from outside
    /// the time window, a 51st participant), `.invalidState` (a SAID of
    /// another roster or an unknown speaker) or `.authenticationFailed`; a
    /// refused message changes nothing.
    mutating func receive(_ bytes: [UInt8], from slot: Int, now: Int64) throws -> [SessionAction] {
        try checkAlive(now: now)
        guard bytes.count >= 2 else { throw ItsMeError(.malformedMessage, "a roll-call message is at least 2 bytes") }
        guard bytes[0] == RollCallProtocol.version else {
            throw ItsMeError(.malformedMessage, "a roll-call message of version \(bytes[0]) (this device knows 1)")
        }
        switch RollCallProtocol.MessageType(rawValue: bytes[1]) {
        case .hello: try hello(try RollCallHello(parsing: bytes), from: slot, now: now)
        case .said: return try said(try RollCallSaid(parsing: bytes), from: slot, now: now)
        case nil: throw ItsMeError(.malformedMessage, "a roll-call message of unknown type \(bytes[1])")
        }
        return []
    }

    private mutating func hello(_ hello: RollCallHello, from slot: Int, now: Int64) throws {
        if participants.contains(where: { $0.hello.hash == hello.hash }) { return }  // a replay, or ours
        if participants.contains(where: { $0.slot == slot }) {
            throw ItsMeError(.malformedMessage, "slot \(slot) sent a second HELLO")
        }
        let current = VoiceProtocol.window(now)
        guard hello.window >= current - RollCallProtocol.windowsBefore, hello.window <= current + RollCallProtocol.windowsAfter
        else {
            throw ItsMeError(.invalidArgument, "a HELLO of window \(hello.window) is outside this roll call's time (now \(current))")
        }
        guard participants.count < RollCallProtocol.maxParticipants else {
            throw ItsMeError(.invalidArgument, "a roll call has at most \(RollCallProtocol.maxParticipants) participants")
        }
        var member: Int? = nil
        for (index, candidate) in members.enumerated() {
            let tag = RollCallProtocol.presenceTag(
                seed: candidate.seed, rollCallID: rollCallID, window: hello.window, nonce: hello.nonce, from: candidate.pid,
                to: myPID)
            if hello.contains(tag) {
                member = index
                break
            }
        }
        participants.append(Participant(hello: hello, slot: slot, member: member))
        newRound()
    }

    /// The roster changed: the round starts again for everyone.
    private mutating func newRound() {
        if phase != .expired { phase = .gathering }
        for i in participants.indices {
            participants[i].heard = nil
            participants[i].sealed = nil
            participants[i].said = nil
            participants[i].attempts = 0
        }
    }

    private mutating func said(_ said: RollCallSaid, from slot: Int, now: Int64) throws -> [SessionAction] {
        guard let speaker = participants.firstIndex(where: { $0.hello.hash == said.speaker }) else {
            throw ItsMeError(.invalidState, "a SAID from a participant this device has no HELLO of")
        }
        guard speaker != 0 else { throw ItsMeError(.invalidKey, "a SAID naming this device as its speaker (a reflected message)") }
        // Only the relay assigns slots: another participant cannot speak for this one.
        guard participants[speaker].slot == slot else {
            throw ItsMeError(.invalidState, "a SAID from slot \(slot) for the participant of slot \(participants[speaker].slot ?? 0)")
        }
        guard said.roster == rosterHash else {
            throw ItsMeError(.invalidState, "a SAID for another roster (another round, or a participant this device has not seen)")
        }
        if participants[speaker].said == said.bytes { return [] }  // a replay
        guard participants[speaker].said == nil else {
            throw ItsMeError(.malformedMessage, "a second SAID from one participant in one round")
        }
        let others = participants.indices.filter { $0 != speaker }.map { participants[$0].hello.hash }
            .sorted { $0.lexicographicallyPrecedes($1) }
        guard said.entries.count == others.count, let mine = others.firstIndex(of: participants[0].hello.hash) else {
            throw ItsMeError(.malformedMessage, "a SAID with \(said.entries.count) entries for a roster of \(others.count + 1)")
        }
        participants[speaker].said = said.bytes
        guard participants[speaker].member != nil else { return [] }  // not a contact: its entry for us is padding
        participants[speaker].sealed = said.entries[mine]
        return try compare(speaker)
    }

    /// The owner confirmed that the contacts listed are on the call; `roster`
    /// is the hash they were shown (`.invalidState` if it changed since).
    /// Draws this round's code.
    mutating func confirmRoster<R: RandomSource>(_ roster: [UInt8], now: Int64, random: inout R) throws {
        try checkAlive(now: now)
        guard phase == .gathering else { throw ItsMeError(.invalidState, "the roster is already confirmed for this round") }
        guard participants.count > 1 else { throw ItsMeError(.invalidState, "no one else has joined the roll call yet") }
        guard roster == rosterHash else {
            throw ItsMeError(.invalidState, "the roster changed since it was shown: show it again and confirm that one")
        }
        var value: UInt32 = RollCallProtocol.codeValues
        while value >= RollCallProtocol.codeValues {
            // Rejection sampling over 15 bits: 26,000 of 32,768 values kept.
            let bytes = random.bytes(2)
            value = (UInt32(bytes[0]) << 8 | UInt32(bytes[1])) & 0x7FFF
        }
        phase = .confirmed(roster: roster, code: value)
    }

    /// The owner read the code aloud: the SAID, one sealed entry for every
    /// other participant (random bytes for those that are not contacts).
    mutating func confirmSaid<R: RandomSource>(now: Int64, random: inout R) throws -> [SessionAction] {
        try checkAlive(now: now)
        guard case .confirmed(let roster, let code) = phase else {
            throw ItsMeError(.invalidState, "confirm the roster first (or the code was already sent this round)")
        }
        let mine = participants[0].hello
        var entries: [[UInt8]] = []
        for other in participants.dropFirst().sorted(by: { $0.hello.hash.lexicographicallyPrecedes($1.hello.hash) }) {
            guard let index = other.member else {
                entries.append(random.bytes(RollCallProtocol.entryCount))
                continue
            }
            let member = members[index]
            let key = try RollCallProtocol.codeKey(
                seed: member.seed, roster: roster, rollCallID: rollCallID, speakerHello: mine.hash, listenerHello: other.hello.hash,
                speaker: myPID, listener: member.pid)
            var plain =
                [UInt8(code >> 8), UInt8(code & 0xFF)]
                + (try RollCallProtocol.deviceTag(
                    seed: member.seed, speaker: myPID, roster: roster, deviceSecret: member.tagSecrets.speaking))
            defer { wipe(&plain) }
            entries.append(
                try AEAD.seal(
                    .chacha20Poly1305, key: key, nonce: RollCallProtocol.entryNonce, plaintext: plain,
                    aad: RollCallProtocol.entryAAD(roster: roster)))
        }
        phase = .said(roster: roster, code: code)
        return [.send(RollCallSaid(speaker: mine.hash, roster: roster, entries: entries).bytes)]
    }

    /// The owner typed the code they heard from participant `index`.
    /// Compared now if its sealed code is in, else when it comes.
    /// Throws `.invalidArgument` (no such participant, or this device),
    /// `.invalidState` (before the roster is confirmed, or once checked),
    /// `.locked` after `maxAttempts` wrong codes in one round.
    mutating func enterHeard(_ code: UInt32, from index: Int, now: Int64) throws -> [SessionAction] {
        try checkAlive(now: now)
        guard index > 0, index < participants.count else {
            throw ItsMeError(.invalidArgument, "no participant \(index) (this device is 0)")
        }
        guard code < RollCallProtocol.codeValues else { throw ItsMeError(.invalidArgument, "a code is 0 to 25999") }
        switch phase {
        case .gathering, .expired:
            throw ItsMeError(.invalidState, "confirm the roster before entering codes")
        case .confirmed, .said:
            break
        }
        guard participants[index].member != nil else {
            throw ItsMeError(.invalidState, "participant \(index) is not a contact: there is nothing to check its code against")
        }
        switch participants[index].check {
        case .verified, .deviceChanged, .verifiedTagUnchecked:
            if participants[index].heard != nil || participants[index].attempts > 0 {
                throw ItsMeError(.invalidState, "participant \(index) is already checked in this round")
            }
        case .notYet, .wrong, .refused:
            break
        }
        guard participants[index].attempts < Self.maxAttempts else {
            throw ItsMeError(.locked, "\(Self.maxAttempts) wrong codes for participant \(index) in this round")
        }
        participants[index].heard = code
        return try compare(index)
    }

    /// Compares the heard and the sealed code of `index`, once both are in.
    private mutating func compare(_ index: Int) throws -> [SessionAction] {
        guard let heard = participants[index].heard, let sealed = participants[index].sealed,
            let memberIndex = participants[index].member, let roster = phase.roster
        else { return [] }
        let member = members[memberIndex]
        participants[index].heard = nil
        participants[index].attempts += 1
        let key = try RollCallProtocol.codeKey(
            seed: member.seed, roster: roster, rollCallID: rollCallID, speakerHello: participants[index].hello.hash,
            listenerHello: participants[0].hello.hash, speaker: member.pid, listener: myPID)
        let opened: SecretBytes
        do {
            opened = try AEAD.open(
                .chacha20Poly1305, key: key, nonce: RollCallProtocol.entryNonce, ciphertext: sealed,
                aad: RollCallProtocol.entryAAD(roster: roster))
        } catch {
            participants[index].check = .refused
            participants[index].sealed = nil
            throw ItsMeError(.authenticationFailed, "participant \(index)'s sealed code does not open: it was not sealed for this device")
        }
        let (value, tag) = opened.withBytes { raw -> (UInt32, [UInt8]) in
            let bytes = Array(raw)
            return (UInt32(bytes[0]) << 8 | UInt32(bytes[1]), Array(bytes[2...]))
        }
        let heardBytes = [UInt8(heard >> 8), UInt8(heard & 0xFF)]
        guard value < RollCallProtocol.codeValues else {
            participants[index].check = .refused
            throw ItsMeError(.authenticationFailed, "participant \(index)'s sealed code is not a code")
        }
        guard ConstantTime.equal(heardBytes, [UInt8(value >> 8), UInt8(value & 0xFF)]) else {
            participants[index].check = .wrong
            return []
        }
        func matches(_ secret: SecretBox) throws -> Bool {
            try secret.count > 0
                && ConstantTime.equal(tag, RollCallProtocol.deviceTag(seed: member.seed, speaker: member.pid, roster: roster, deviceSecret: secret))
        }
        let secrets = member.tagSecrets
        let matchesCurrent = try matches(secrets.theirs)
        let matchesPrevious = try matches(secrets.theirsPrevious)
        let matchesPending = try matches(secrets.theirsPending)
        let outcome: VoiceSession.Outcome =
            matchesCurrent || matchesPrevious || matchesPending
            ? .verified : secrets.theirs.count == 0 ? .verifiedTagUnchecked : .deviceChanged
        let peerSecret: PeerDeviceSecret =
            matchesCurrent ? .current : matchesPrevious ? .previous : matchesPending ? .pending : .current
        participants[index].check =
            switch outcome {
            case .verified: .verified
            case .deviceChanged: .deviceChanged
            case .verifiedTagUnchecked: .verifiedTagUnchecked
            case .mismatch: .wrong  // invariant: the codes matched, so the outcome is never a mismatch
            }
        return [.persist(ContactWrite.verification(contactID: member.contactID, outcome: outcome, peerSecret: peerSecret))]
    }

    /// The participant of relay slot `slot` left: it stays in the roster.
    mutating func peerLeft(slot: Int) {
        for i in participants.indices where participants[i].slot == slot { participants[i].left = true }
    }
}

extension RollCallMachine.Phase {
    var roster: [UInt8]? {
        switch self {
        case .confirmed(let roster, _), .said(let roster, _): roster
        case .gathering, .expired: nil
        }
    }
}

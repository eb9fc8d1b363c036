import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// The roll-call state machine (docs/PROTOCOL.md section 20, version 2),
/// as a value: each transition checks its input against the state, queues
/// what the device must send to the group room, and returns the outcomes to
/// record on contacts. It reads and writes no store, and does no I/O: the
/// host reports the relay's events (`joined`, `peerJoined`, `peerLeft`),
/// feeds the room's messages (`receive`), calls `tick` about once a second,
/// and sends what `peekOutgoing` gives. Every rule of 20.6 (what to send,
/// and when to send it again) is here.
///
/// A participant is named by its HELLO's body hash and speaks under its
/// roll-call key; it is present once it signed a VIEW listing this device
/// from a slot that is in the room. The roster is this device and the
/// present participants; a new roster is a new round, and a roster that
/// comes back brings its round back (20.4).
///
/// Peer input that does not fit is refused with an error and changes
/// nothing: one participant's bad message never ends the roll call for the
/// others. Only the lifetime ends it.
struct RollCallMachine: SteppedMachine {
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
        /// The heard code differs from the one their device sealed (this round).
        case wrong
        /// Their sealed code did not open or was not a code (this round):
        /// neither verified nor wrong.
        case refused
    }

    /// How a participant's call binding compares with this device's (20.1).
    enum Binding: Equatable {
        case same
        /// One of the two binds to its call, the other does not.
        case differs
        /// Both bind, to different calls.
        case otherCall
    }

    /// A HELLO held (20.2).
    struct Held {
        let hello: RollCallHello
        /// The present slots that brought it.
        var bringers: Set<Int>
        /// Index into `members` when it is a contact of ours.
        let member: Int?
        let binding: Binding
        /// Its latest VIEW.
        var view: RollCallView?
        /// Verified, device changed or tag unchecked, once checked in some round.
        var outcome: Check?
        /// `joins` when its HELLO last reached this device.
        var joinsAtHello = 0
    }

    /// One participant's part of one round.
    struct Heard {
        /// What our owner typed, not yet compared.
        var heard: UInt32?
        /// Its entry for us in its SAID of this round.
        var sealed: [UInt8]?
        /// The body of its SAID of this round (a repeat is ignored).
        var said: [UInt8]?
        /// Heard codes compared against this round's sealed one.
        var attempts = 0
        /// `.wrong` or `.refused` in this round, else `.notYet`.
        var check: Check = .notYet
    }

    /// A round, named by its roster (20.4).
    struct Round {
        let roster: [UInt8]
        /// The names present, this device's included, ascending.
        let names: [[UInt8]]
        /// Drawn when the owner confirmed the roster.
        var code: UInt32?
        /// This device's SAID of this round, once its owner said the code.
        var said: [UInt8]?
        /// By roll-call key.
        var others: [[UInt8]: Heard] = [:]
    }

    enum Phase: Equatable {
        /// Participants arrive; the owner has not confirmed this roster.
        case gathering
        /// The owner confirmed the roster; the code is shown, not yet sent.
        case confirmed
        /// The owner said the code aloud; its SAID went out.
        case said
        case expired
    }

    /// What waits to be sent: bytes, or a VIEW made when it is sent.
    private enum Outgoing: Equatable {
        case bytes([UInt8])
        case view
    }

    /// Heard codes compared for one participant in one round, at most.
    static let maxAttempts = 3

    let rollCallID: [UInt8]
    let roomID: [UInt8]
    let sessionID: [UInt8]
    let createdAt: Int64
    let myPID: [UInt8]
    let members: [Member]
    let signingKey: SecretBox
    /// This device's HELLO.
    let me: RollCallHello
    /// The roll-call keys of every participant ever present, in that order; this device's first.
    private(set) var shown: [[UInt8]]
    private(set) var held: [[UInt8]: Held] = [:]
    /// The slots in the room, this device's own apart.
    private var present: Set<Int> = []
    /// The joins to the room this device has seen (its own and `peer-joined`).
    private var joins = 0
    private(set) var mySlot: Int?
    private var seq: UInt32 = 0
    private(set) var round: Round
    private var earlier: [Round] = []
    private var expired = false
    private var outbox: [Outgoing] = []
    /// What the last VIEW listed.
    private var listed: [[UInt8]] = []
    private var now: Int64
    private var viewDue = false
    private var lastViewAt: Int64?
    private(set) var rosterChangedAt: Int64
    private var nextResendAt: Int64
    private var resends = 0

    /// A roll call named by `meetingCode`, bound to the host's call when
    /// `binding` is given (16 to 64 bytes). The random source gives the
    /// roll-call key, then the HELLO's padding tags. Nothing is queued
    /// before the relay's `joined`.
    static func start<R: RandomSource>(
        meetingCode: RemoteCode, binding: [UInt8]?, members: [Member], myPID: [UInt8], now: Int64, random: inout R
    ) throws -> RollCallMachine {
        try UnixTime.check(now)
        try CallBinding.check(binding)
        let rollCallID = RollCallProtocol.rollCallID(meetingCode)
        let sessionID = RollCallProtocol.sessionID(rollCallID: rollCallID, binding: binding)
        let pair = try Ed25519.keyPair(seed: try SecretBytes(randomCount: Ed25519.seedCount, using: &random))
        let signingKey = SecretBox(try pair.secretKey.copy())
        // Two contacts' tags are equal with chance 2^-128; one carried then stands for both.
        var drawn: Set<[UInt8]> = []
        var tags = members.map {
            RollCallProtocol.presenceTag(seed: $0.seed, sessionID: sessionID, key: pair.publicKey, from: myPID, to: $0.pid)
        }.filter { drawn.insert($0).inserted }
        let count = try RollCallProtocol.paddedTagCount(members.count)
        while tags.count < count {
            let tag = random.bytes(RollCallProtocol.tagCount)
            if drawn.insert(tag).inserted { tags.append(tag) }
        }
        let hello = try RollCallHello(
            bound: binding != nil, key: pair.publicKey,
            bindingCheck: RollCallProtocol.bindingCheck(rollCallID: rollCallID, binding: binding), tags: tags,
            rollCallID: rollCallID, signingKey: signingKey)
        return RollCallMachine(
            rollCallID: rollCallID, roomID: RollCallProtocol.roomID(meetingCode), sessionID: sessionID, createdAt: now,
            myPID: myPID, members: members, signingKey: signingKey, me: hello)
    }

    private init(
        rollCallID: [UInt8], roomID: [UInt8], sessionID: [UInt8], createdAt: Int64, myPID: [UInt8], members: [Member],
        signingKey: SecretBox, me: RollCallHello
    ) {
        self.rollCallID = rollCallID
        self.roomID = roomID
        self.sessionID = sessionID
        self.createdAt = createdAt
        self.myPID = myPID
        self.members = members
        self.signingKey = signingKey
        self.me = me
        self.shown = [me.key]
        self.now = createdAt
        self.rosterChangedAt = createdAt
        self.nextResendAt = createdAt + RollCallProtocol.firstResend
        self.round = Round(roster: RollCallProtocol.rosterHash(rollCallID: rollCallID, sortedNames: [me.name]), names: [me.name])
        self.listed = [me.name]
    }

    // MARK: What the state shows

    var phase: Phase {
        if expired { return .expired }
        if round.code == nil { return .gathering }
        return round.said == nil ? .confirmed : .said
    }

    /// The code to read aloud, once the roster of this round is confirmed.
    var myCode: UInt32? { expired ? nil : round.code }

    /// Whether participant `key` is present now: it listed this device, from a slot in the room.
    func isPresent(_ key: [UInt8]) -> Bool {
        guard let view = held[key]?.view else { return false }
        return view.lists(me.name) && present.contains(view.slot)
    }

    /// Whether present participant `key` holds this device's roster.
    func agrees(_ key: [UInt8]) -> Bool { key == me.key || (isPresent(key) && held[key]?.view?.roster == round.roster) }

    /// What to show beside participant `key` (not this device's).
    func check(_ key: [UInt8]) -> Check { held[key]?.outcome ?? round.others[key]?.check ?? .notYet }

    /// The roster has not changed for a while and a present participant holds another (20.3).
    var isSplit: Bool {
        now - rosterChangedAt >= RollCallProtocol.splitAfter
            && held.keys.contains { isPresent($0) && !agrees($0) }
    }

    /// The names a VIEW lists now: this device's, and each HELLO whose bringer or VIEW slot is present.
    private func listedNames() -> [[UInt8]] {
        var names = [me.name]
        for entry in held.values
        where !entry.bringers.isEmpty || entry.view.map({ present.contains($0.slot) }) == true {
            names.append(entry.hello.name)
        }
        return names.sorted { $0.lexicographicallyPrecedes($1) }
    }

    // MARK: Transitions

    /// `.expired` once the lifetime has passed (and for good).
    private mutating func checkAlive(now: Int64) throws {
        try UnixTime.check(now)
        if expired || now > createdAt + RollCallProtocol.lifetime || now < createdAt - 30 {
            expired = true
            throw ItsMeError(.expired, "the roll call ended (it lasts \(RollCallProtocol.lifetime / 60) minutes): start a new one")
        }
        self.now = max(self.now, now)
    }

    private static func checkSlot(_ slot: Int) throws {
        guard slot >= 1, slot <= 65535 else { throw ItsMeError(.invalidArgument, "a relay slot is 1 to 65535") }
    }

    /// The relay's `joined` (a first join or a rejoin): this device's slot
    /// and the slots present before it. Sends the HELLO and a VIEW (20.6, rule 1).
    mutating func joined(slot: Int, peers: [Int], now: Int64) throws {
        try checkAlive(now: now)
        try Self.checkSlot(slot)
        for peer in peers { try Self.checkSlot(peer) }
        mySlot = slot
        joins += 1
        present = Set(peers).subtracting([slot])
        for key in Array(held.keys) { held[key]?.bringers.formIntersection(present) }
        forgetPending()
        queue(.bytes(me.bytes))
        queueView()
        update()
    }

    /// The relay's `peer-joined`: the newcomer needs this device's HELLO (rule 2).
    mutating func peerJoined(slot: Int, now: Int64) throws {
        try checkAlive(now: now)
        try Self.checkSlot(slot)
        // Before its own `joined` a device has no room: `joined` gives the slots present.
        guard mySlot != nil, slot != mySlot else { return }
        joins += 1
        present.insert(slot)
        queue(.bytes(me.bytes))
    }

    /// The relay's `peer-left`: its participant is no longer present (rule 3).
    mutating func peerLeft(slot: Int, now: Int64) throws {
        try checkAlive(now: now)
        try Self.checkSlot(slot)
        present.remove(slot)
        for key in Array(held.keys) { held[key]?.bringers.remove(slot) }
        forgetPending()
        update()
    }

    /// Forgets each HELLO never present whose bringers and VIEW slot left.
    private mutating func forgetPending() {
        held = held.filter { key, entry in
            shown.contains(key) || !entry.bringers.isEmpty || entry.view.map { present.contains($0.slot) } == true
        }
    }

    /// Feeds one message a participant sent, carried by relay slot `slot`.
    /// Throws `.malformedMessage`, `.authenticationFailed` (a signature, or
    /// a sealed code that does not open), `.invalidKey` (a reflection),
    /// `.invalidState` (a VIEW or SAID whose sender this device does not
    /// hold or see, a VIEW carried by another slot, a SAID of another
    /// roster) or `.invalidArgument` (too many HELLOs or participants); a
    /// refused message changes nothing, but a sealed code that does not
    /// open makes its participant refused for the round.
    mutating func receive(_ bytes: [UInt8], from slot: Int, now: Int64) throws -> [Action] {
        try checkAlive(now: now)
        try Self.checkSlot(slot)
        guard bytes.count >= 2 else { throw ItsMeError(.malformedMessage, "a roll-call message is at least 2 bytes") }
        guard bytes[0] == RollCallProtocol.version else {
            throw ItsMeError(
                .malformedMessage, "a roll-call message of version \(bytes[0]) (this device speaks version \(RollCallProtocol.version))")
        }
        // A message this device holds already, byte for byte, was checked
        // when it came first: a HELLO sent again for a newcomer, a VIEW
        // or SAID repeated. Only what depends on the slot is done again.
        let isHello = bytes[1] == RollCallProtocol.MessageType.hello.rawValue
        let keyStart = isHello ? 3 : 2
        if bytes.count >= keyStart + 32, let entry = held[Array(bytes[keyStart..<keyStart + 32])] {
            if isHello, entry.hello.bytes == bytes {
                try hello(entry.hello, from: slot)
                return []
            }
            if bytes[1] == RollCallProtocol.MessageType.view.rawValue, entry.view?.bytes == bytes { return [] }
        }
        switch RollCallProtocol.MessageType(rawValue: bytes[1]) {
        case .hello: try hello(try RollCallHello(parsing: bytes, rollCallID: rollCallID), from: slot)
        case .view: try view(try RollCallView(parsing: bytes), from: slot)
        case .said: return try said(try RollCallSaid(parsing: bytes, rollCallID: rollCallID))
        case nil: throw ItsMeError(.malformedMessage, "a roll-call message of unknown type \(bytes[1])")
        }
        return []
    }

    private mutating func hello(_ hello: RollCallHello, from slot: Int) throws {
        guard hello.key != me.key else { throw ItsMeError(.invalidKey, "a HELLO in this device's own roll-call key (a reflection)") }
        guard present.contains(slot) else {
            throw ItsMeError(.invalidState, "a HELLO from slot \(slot), which is not in the room (no peer-joined for it)")
        }
        if let entry = held[hello.key], entry.hello.name != hello.name {
            throw ItsMeError(.malformedMessage, "a second, different HELLO for one roll-call key")
        }
        if held.contains(where: { $0.key != hello.key && $0.value.bringers.contains(slot) }) {
            throw ItsMeError(.malformedMessage, "slot \(slot) brought another HELLO before (a slot brings one)")
        }
        // A present participant that sends its HELLO again from its own slot,
        // with no join since its previous one (which it would answer, rule 2),
        // is unsettled: this device's latest VIEW may not have reached it (rule 5).
        if isPresent(hello.key), let entry = held[hello.key], entry.view?.slot == slot, entry.joinsAtHello == joins {
            viewDue = true
        }
        if held[hello.key] == nil {
            guard listedNames().count < RollCallProtocol.maxHeld else {
                throw ItsMeError(.invalidArgument, "this device holds \(RollCallProtocol.maxHeld) HELLOs already")
            }
            held[hello.key] = Held(hello: hello, bringers: [], member: lookUp(hello), binding: binding(of: hello))
        }
        held[hello.key]?.bringers.insert(slot)
        held[hello.key]?.joinsAtHello = joins
        update()
    }

    private func binding(of hello: RollCallHello) -> Binding {
        if hello.bound != me.bound { return .differs }
        return ConstantTime.equal(hello.bindingCheck, me.bindingCheck) ? .same : .otherCall
    }

    /// The contact whose presence tag the HELLO carries (the first in the members' order), if any.
    private func lookUp(_ hello: RollCallHello) -> Int? {
        guard binding(of: hello) == .same else { return nil }
        return members.indices.first { index in
            hello.contains(
                RollCallProtocol.presenceTag(
                    seed: members[index].seed, sessionID: sessionID, key: hello.key, from: members[index].pid, to: myPID))
        }
    }

    private mutating func view(_ view: RollCallView, from slot: Int) throws {
        // Older, or the same as the latest in all this device reads of it:
        // ignored unchecked, since it would change nothing (20.3).
        if let latest = held[view.key]?.view, view.seq <= latest.seq || view.reading(for: me.name) == latest.reading(for: me.name) {
            return
        }
        try view.checkSignature(rollCallID: rollCallID)
        guard view.key != me.key else { throw ItsMeError(.invalidKey, "a VIEW in this device's own roll-call key (a reflection)") }
        guard let entry = held[view.key] else {
            throw ItsMeError(.invalidState, "a VIEW from a participant whose HELLO this device does not hold (yet)")
        }
        guard view.lists(entry.hello.name) else { throw ItsMeError(.malformedMessage, "a VIEW that does not list its sender") }
        guard view.slot == slot, present.contains(slot) else {
            throw ItsMeError(.invalidState, "a VIEW for slot \(view.slot) carried by slot \(slot)")
        }
        if held.contains(where: { $0.key != view.key && $0.value.view?.slot == slot && isPresent($0.key) }) {
            throw ItsMeError(.invalidState, "a VIEW for the slot of another participant")
        }
        if view.lists(me.name) && !isPresent(view.key) {
            let count = 1 + held.keys.filter(isPresent).count
            guard count < RollCallProtocol.maxParticipants else {
                throw ItsMeError(.invalidArgument, "a roll call has at most \(RollCallProtocol.maxParticipants) participants")
            }
            guard shown.contains(view.key) || shown.count < RollCallProtocol.maxShown else {
                throw ItsMeError(
                    .invalidArgument,
                    "a roll call has at most \(RollCallProtocol.maxShown) participants over its life (a relay admits as many joins): start a new one")
            }
        }
        held[view.key]?.view = view
        update()
    }

    private mutating func said(_ said: RollCallSaid) throws -> [Action] {
        guard said.speaker != me.key else {
            throw ItsMeError(.invalidKey, "a SAID naming this device as its speaker (a reflected message)")
        }
        guard let entry = held[said.speaker], isPresent(said.speaker) else {
            throw ItsMeError(.invalidState, "a SAID from a participant this device does not see present")
        }
        guard said.roster == round.roster else {
            throw ItsMeError(.invalidState, "a SAID for another roster (another round, or a participant this device does not see)")
        }
        let body = Array(said.bytes.dropLast(RollCallProtocol.signatureCount))
        var heard = round.others[said.speaker] ?? Heard()
        if heard.said == body { return [] }  // a repeat
        guard heard.said == nil else { throw ItsMeError(.malformedMessage, "a second, different SAID from one participant in one round") }
        let others = round.names.filter { $0 != entry.hello.name }
        guard said.entries.count == others.count, let mine = others.firstIndex(of: me.name) else {
            throw ItsMeError(.malformedMessage, "a SAID with \(said.entries.count) entries for a roster of \(round.names.count)")
        }
        heard.said = body
        if entry.member != nil { heard.sealed = said.entries[mine] }  // else its entry for us is padding
        round.others[said.speaker] = heard
        viewDue = true
        return try compare(said.speaker)
    }

    /// The owner confirmed that the contacts listed are on the call; `roster`
    /// is the hash they were shown (`.invalidState` if it changed since).
    /// Draws this round's code.
    mutating func confirmRoster<R: RandomSource>(_ roster: [UInt8], now: Int64, random: inout R) throws {
        try checkAlive(now: now)
        guard round.code == nil else { throw ItsMeError(.invalidState, "the roster is already confirmed for this round") }
        guard round.names.count > 1 else { throw ItsMeError(.invalidState, "no one else is present in the roll call yet") }
        guard roster == round.roster else {
            throw ItsMeError(.invalidState, "the roster changed since it was shown: show it again and confirm that one")
        }
        var value: UInt32 = RollCallProtocol.codeValues
        while value >= RollCallProtocol.codeValues {
            // Rejection sampling over 15 bits: 26,000 of 32,768 values kept.
            let bytes = random.bytes(2)
            value = (UInt32(bytes[0]) << 8 | UInt32(bytes[1])) & 0x7FFF
        }
        round.code = value
    }

    /// The owner read the code aloud: the SAID, one sealed entry for every
    /// other participant (random bytes for those that are not contacts).
    mutating func confirmSaid<R: RandomSource>(now: Int64, random: inout R) throws {
        try checkAlive(now: now)
        guard let code = round.code, round.said == nil else {
            throw ItsMeError(.invalidState, "confirm the roster first (or the code was already sent this round)")
        }
        let byName = Dictionary(uniqueKeysWithValues: held.values.map { ($0.hello.name, $0) })
        var entries: [[UInt8]] = []
        for name in round.names where name != me.name {
            guard let other = byName[name], let index = other.member else {
                entries.append(random.bytes(RollCallProtocol.entryCount))
                continue
            }
            let member = members[index]
            let key = try RollCallProtocol.codeKey(
                seed: member.seed, roster: round.roster, sessionID: sessionID, speakerName: me.name, listenerName: name,
                speaker: myPID, listener: member.pid)
            var plain =
                [UInt8(code >> 8), UInt8(code & 0xFF)]
                + (try RollCallProtocol.deviceTag(
                    seed: member.seed, speaker: myPID, roster: round.roster, deviceSecret: member.tagSecrets.speaking))
            defer { wipe(&plain) }
            entries.append(
                try AEAD.seal(
                    .chacha20Poly1305, key: key, nonce: RollCallProtocol.entryNonce, plaintext: plain,
                    aad: RollCallProtocol.entryAAD(roster: round.roster)))
        }
        let said = try RollCallSaid(
            speaker: me.key, roster: round.roster, entries: entries, rollCallID: rollCallID, signingKey: signingKey)
        round.said = said.bytes
        queue(.bytes(said.bytes))
        viewDue = true
        resends = 0
        nextResendAt = now + RollCallProtocol.firstResend
    }

    /// The owner typed the code they heard from participant `index` (of
    /// `shown`). Compared now if its sealed code is in, else when it comes.
    /// Throws `.invalidArgument` (no such participant, or this device),
    /// `.invalidState` (before the roster is confirmed, not a contact, not
    /// present, already checked), `.locked` after `maxAttempts` wrong codes
    /// in one round.
    mutating func enterHeard(_ code: UInt32, from index: Int, now: Int64) throws -> [Action] {
        try checkAlive(now: now)
        guard index > 0, index < shown.count else {
            throw ItsMeError(.invalidArgument, "no participant \(index) (this device is 0)")
        }
        guard code < RollCallProtocol.codeValues else { throw ItsMeError(.invalidArgument, "a code is 0 to 25999") }
        guard round.code != nil else { throw ItsMeError(.invalidState, "confirm the roster before entering codes") }
        let key = shown[index]
        guard let entry = held[key], entry.member != nil else {
            throw ItsMeError(.invalidState, "participant \(index) is not a contact: there is nothing to check its code against")
        }
        guard isPresent(key) else { throw ItsMeError(.invalidState, "participant \(index) is not in the roll call now") }
        guard entry.outcome == nil else { throw ItsMeError(.invalidState, "participant \(index) is already checked") }
        var heard = round.others[key] ?? Heard()
        guard heard.check != .refused else {
            throw ItsMeError(.invalidState, "participant \(index)'s sealed code of this round was refused: wait for a new round")
        }
        guard heard.attempts < Self.maxAttempts else {
            throw ItsMeError(.locked, "\(Self.maxAttempts) wrong codes for participant \(index) in this round")
        }
        heard.heard = code
        round.others[key] = heard
        return try compare(key)
    }

    /// Compares the heard and the sealed code of `key`, once both are in.
    private mutating func compare(_ key: [UInt8]) throws -> [Action] {
        guard var heard = round.others[key], let value = heard.heard, let sealed = heard.sealed, let entry = held[key],
            let memberIndex = entry.member, entry.outcome == nil
        else { return [] }
        let member = members[memberIndex]
        heard.heard = nil
        heard.attempts += 1
        let codeKey = try RollCallProtocol.codeKey(
            seed: member.seed, roster: round.roster, sessionID: sessionID, speakerName: entry.hello.name, listenerName: me.name,
            speaker: member.pid, listener: myPID)
        let index = shown.firstIndex(of: key) ?? 0
        let opened: SecretBytes
        do {
            opened = try AEAD.open(
                .chacha20Poly1305, key: codeKey, nonce: RollCallProtocol.entryNonce, ciphertext: sealed,
                aad: RollCallProtocol.entryAAD(roster: round.roster))
        } catch {
            heard.check = .refused
            heard.sealed = nil
            round.others[key] = heard
            throw ItsMeError(.authenticationFailed, "participant \(index)'s sealed code does not open: it was not sealed for this device")
        }
        let (sealedValue, tag) = opened.withBytes { raw -> (UInt32, [UInt8]) in
            let bytes = Array(raw)
            return (UInt32(bytes[0]) << 8 | UInt32(bytes[1]), Array(bytes[2...]))
        }
        guard sealedValue < RollCallProtocol.codeValues else {
            heard.check = .refused
            heard.sealed = nil
            round.others[key] = heard
            throw ItsMeError(.authenticationFailed, "participant \(index)'s sealed code is not a code")
        }
        guard
            ConstantTime.equal(
                [UInt8(value >> 8), UInt8(value & 0xFF)], [UInt8(sealedValue >> 8), UInt8(sealedValue & 0xFF)])
        else {
            heard.check = .wrong
            round.others[key] = heard
            return []
        }
        func matches(_ secret: SecretBox) throws -> Bool {
            try secret.count > 0
                && ConstantTime.equal(
                    tag, RollCallProtocol.deviceTag(seed: member.seed, speaker: member.pid, roster: round.roster, deviceSecret: secret))
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
        heard.check = .notYet
        round.others[key] = heard
        held[key]?.outcome =
            switch outcome {
            case .verified: .verified
            case .deviceChanged: .deviceChanged
            case .verifiedTagUnchecked: .verifiedTagUnchecked
            case .mismatch: .wrong  // invariant: the codes matched, so the outcome is never a mismatch
            }
        return [.contact(ContactWrite.verification(contactID: member.contactID, outcome: outcome, peerSecret: peerSecret))]
    }

    /// About once a second: a due VIEW goes out, and while this device is
    /// unsettled its messages go out again with a backoff (20.6, rules 5, 6).
    mutating func tick(now: Int64) throws {
        try checkAlive(now: now)
        guard mySlot != nil else { return }
        if viewDue, now >= (lastViewAt ?? .min) + 1 { queue(.view) }
        guard now >= nextResendAt, unsettled else { return }
        queue(.bytes(me.bytes))
        queue(.view)
        if let said = round.said { queue(.bytes(said)) }
        resends += 1
        nextResendAt = now + (resends == 1 ? 4 : 8)
    }

    /// Whether something this device sent may not have arrived, or it lacks something sent to it (rule 6).
    var unsettled: Bool {
        for (key, entry) in held where !entry.bringers.isEmpty || entry.view.map({ present.contains($0.slot) }) == true {
            guard let view = entry.view, view.lists(me.name) else { return true }
            guard isPresent(key) else { continue }
            if view.roster != round.roster { return true }
            if view.said, round.others[key]?.said == nil { return true }
            if round.said != nil, !view.has(said: me.name, roster: round.roster) { return true }
        }
        return false
    }

    /// Recomputes the roster after any change: a new roster is a new round
    /// (or an earlier one back), and a new list goes out in a VIEW.
    private mutating func update() {
        let presentKeys = held.keys.filter(isPresent)
        let presentNames = presentKeys.compactMap { key in held[key].map { (key, $0.hello.name) } }
        let names = ([me.name] + presentNames.map(\.1)).sorted { $0.lexicographicallyPrecedes($1) }
        if names != round.names {
            let roster = RollCallProtocol.rosterHash(rollCallID: rollCallID, sortedNames: names)
            let back = earlier.firstIndex { $0.roster == roster }
            let next = back.map { earlier.remove(at: $0) } ?? Round(roster: roster, names: names)
            if round.names.count > 1 { earlier.append(round) }
            if earlier.count > RollCallProtocol.roundsKept { earlier.removeFirst() }
            round = next
            for (key, _) in presentNames.sorted(by: { $0.1.lexicographicallyPrecedes($1.1) }) where !shown.contains(key) {
                shown.append(key)
            }
            rosterChangedAt = now
            resends = 0
            nextResendAt = now + RollCallProtocol.firstResend
            viewDue = true
        }
        let names2 = listedNames()
        if names2 != listed, !awaitingHello {
            listed = names2
            queue(.view)
        } else if names2 != listed {
            viewDue = true
        }
    }

    /// Whether a slot in the room has brought no HELLO yet: every device
    /// sends one on its `joined` and on `peer-joined`, so one is on its way
    /// (rule 4 waits for it, or for the tick).
    private var awaitingHello: Bool {
        present.contains { slot in !held.values.contains { $0.bringers.contains(slot) } }
    }

    /// Queues a VIEW now, or makes it due while a HELLO is awaited (rules 1, 4).
    private mutating func queueView() {
        if awaitingHello { viewDue = true } else { queue(.view) }
    }

    /// Queues a message, unless the same one already waits (a VIEW waiting
    /// is made when sent, so it covers a later one).
    private mutating func queue(_ item: Outgoing) {
        guard mySlot != nil else { return }
        if item == .view { viewDue = false }
        if outbox.contains(item) { return }
        outbox.append(item)
    }

    /// The next message to send, left in the queue (a VIEW is made now, from the state as it is).
    mutating func peekOutgoing() throws -> [UInt8]? {
        guard let first = outbox.first else { return nil }
        if case .bytes(let bytes) = first { return bytes }
        seq += 1
        let names = listedNames()
        let saidBy = Set(round.others.compactMap { key, heard in heard.said == nil ? nil : held[key]?.hello.name })
        let view = try RollCallView(
            key: me.key, seq: seq, slot: mySlot ?? 0, roster: round.roster, said: round.said != nil, names: names,
            have: names.map(saidBy.contains),
            rollCallID: rollCallID, signingKey: signingKey)
        listed = names
        lastViewAt = now
        outbox[0] = .bytes(view.bytes)
        return view.bytes
    }

    /// Removes the message `peekOutgoing` gave.
    mutating func markSent() {
        if !outbox.isEmpty { outbox.removeFirst() }
    }
}

extension RollCallMachine {
    /// A roll call never fails as a whole: a participant is refused for a
    /// round, or the roll call expires (`.expired`, for good).
    var failure: ItsMeError? { nil }
    /// Never called: no write ends a roll call (`failedWriteEnds`).
    mutating func fail(_ error: ItsMeError) {}
    /// A step that refused a participant's sealed code records it for the
    /// round (`.authenticationFailed`), and one past the lifetime records
    /// the end (`.expired`): both are kept, though they throw.
    func keepsStep(throwing error: ItsMeError) -> Bool { error.kind == .authenticationFailed || error.kind == .expired }
}

import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// The wire formats and derivations of the roll call (docs/PROTOCOL.md
/// section 20, version 2): one round of codes among everyone in a call,
/// each checked against the seed its listener shares with the speaker,
/// every message signed by its sender's key for this roll call.
package enum RollCallProtocol {
    static let version: UInt8 = 2

    package enum MessageType: UInt8 {
        case hello = 1
        case said = 2
        case view = 3
    }

    /// The most devices present in one roll call, this one included.
    package static let maxParticipants = 50
    /// The most participants present over a roll call's life, this device
    /// included: as many as the joins a relay admits to a group room (20.3, 15.9).
    static let maxShown = 200
    /// The most HELLOs a device holds whose bringers are present (20.2),
    /// and the most names a VIEW lists (20.3).
    static let maxHeld = 100
    /// A roll call ends this long after it started on a device.
    package static let lifetime: Int64 = 600
    /// A presence tag's length.
    static let tagCount = 16
    /// The fewest and the most tags a HELLO carries; in between, a power of two.
    static let minTags = 32
    package static let maxTags = 2048
    /// A roll-call code is a NATO word and three digits (0 to 25,999).
    static let codeValues: UInt32 = 26_000
    /// One SAID entry: AEAD of code (2) || device tag (32), with its tag.
    static let entryCount = 2 + 32 + AEAD.tagCount
    static let nameCount = 32
    static let signatureCount = Ed25519.signatureCount
    /// u8 version, u8 type, u8 b, RK, bind, u16 n.
    static let helloHeaderCount = 3 + 32 + 32 + 2
    /// u8 version, u8 type, RK, u32 seq, u16 slot, roster, u8 flags, u8 k.
    static let viewHeaderCount = 2 + 32 + 4 + 2 + 32 + 1 + 1
    /// u8 version, u8 type, RK, roster, u8 m.
    static let saidHeaderCount = 2 + 32 + 32 + 1
    /// Rounds kept besides the current one (20.4).
    static let roundsKept = 8
    /// Seconds after a roster change or "I said it" before an unsettled device sends again (20.6, rule 6).
    static let firstResend: Int64 = 3
    /// Seconds a roster stays unchanged before a disagreement is a split (20.3).
    static let splitAfter: Int64 = 5
    /// The longest message: a HELLO of 2048 tags.
    package static let messageMax = helloHeaderCount + maxTags * tagCount + signatureCount

    /// The roll call's ID, bound into every signature and roster: SHA-256
    /// of the meeting code's canonical form.
    package static func rollCallID(_ code: RemoteCode) -> [UInt8] {
        SHA256.hash(LV.cat(LV.b("itsme-rollcall-v2"), LV.b(code.canonical)))
    }

    /// The relay's group room (15.9): 16 bytes, named by their lowercase hex.
    package static func roomID(_ code: RemoteCode) -> [UInt8] {
        Array(SHA256.hash(LV.cat(LV.b("itsme-rollcall-room-v1"), LV.b(code.canonical))).prefix(16))
    }

    /// `sid` of 20.1: bound into every tag and code key.
    static func sessionID(rollCallID: [UInt8], binding: [UInt8]?) -> [UInt8] {
        SHA256.hash(LV.cat(LV.b("itsme-rc-session-v2"), rollCallID, [binding == nil ? 0 : 1], binding ?? []))
    }

    /// `bind` of 20.1: what a HELLO says of its binding (32 zero bytes without one).
    static func bindingCheck(rollCallID: [UInt8], binding: [UInt8]?) -> [UInt8] {
        guard let binding else { return [UInt8](repeating: 0, count: 32) }
        return SHA256.hash(LV.cat(LV.b("itsme-rc-binding-v2"), rollCallID, binding))
    }


    /// How many tags a device with `contacts` contacts sends: the next
    /// power of two from `minTags`, so that the size says only that.
    /// `.invalidArgument` beyond `maxTags`.
    package static func paddedTagCount(_ contacts: Int) throws -> Int {
        guard contacts <= maxTags else {
            throw ItsMeError(.invalidArgument, "a roll call takes at most \(maxTags) contacts; this store has \(contacts)")
        }
        var count = minTags
        while count < contacts { count *= 2 }
        return count
    }

    /// tag(S→P): says to P that the HELLO of `key` is S's.
    static func presenceTag<S: ByteView & ~Copyable>(
        seed: borrowing S, sessionID: [UInt8], key: [UInt8], from: [UInt8], to: [UInt8]
    ) -> [UInt8] {
        Array(
            HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-rc-presence-v2"), sessionID, key, from, to)).prefix(tagCount))
    }

    /// The roster of a round: the names of the participants present, in ascending order.
    static func rosterHash(rollCallID: [UInt8], sortedNames: [[UInt8]]) -> [UInt8] {
        SHA256.hash(LV.cat([LV.b("itsme-rc-roster-v2"), rollCallID] + sortedNames))
    }

    /// What a roll-call key signs: the body under the roll call's ID.
    static func signedInput(rollCallID: [UInt8], body: [UInt8]) -> [UInt8] {
        LV.cat(LV.b("itsme-rc-sign-v2"), rollCallID, body)
    }

    /// `.authenticationFailed` unless `signature` is `key`'s over `body`.
    static func verify(rollCallID: [UInt8], body: ArraySlice<UInt8>, signature: ArraySlice<UInt8>, key: [UInt8], what: String) throws {
        guard Ed25519.verify(signature: Array(signature), message: signedInput(rollCallID: rollCallID, body: Array(body)), publicKey: key)
        else { throw ItsMeError(.authenticationFailed, "a roll-call \(what) whose signature does not verify") }
    }

    /// k(S→P): seals the code S said for P in the round of `roster`.
    static func codeKey<S: ByteView & ~Copyable>(
        seed: borrowing S, roster: [UInt8], sessionID: [UInt8], speakerName: [UInt8], listenerName: [UInt8],
        speaker: [UInt8], listener: [UInt8]
    ) throws -> SecretBytes {
        try HKDF.derive(
            ikm: seed, salt: roster,
            info: LV.cat(LV.b("itsme-rc-code-v2"), sessionID, speakerName, listenerName, speaker, listener), count: 32)
    }

    /// dtag(S) of 20.5: the speaker's device, under the tag key T of 10.1.
    static func deviceTag<S: ByteView & ~Copyable>(
        seed: borrowing S, speaker: [UInt8], roster: [UInt8], deviceSecret: SecretBox
    ) throws -> [UInt8] {
        try VoiceProtocol.withTagKey(seed: seed) { t in
            var message = deviceSecret.withBytes { LV.cat(LV.b("itsme-rc-device-v2"), speaker, roster, Array($0)) }
            defer { wipe(&message) }
            return message.withUnsafeBytes { HMACSHA256.mac(keyBytes: t, messageBytes: $0) }
        }
    }

    /// The associated data of every SAID entry: the header and the roster.
    static func entryAAD(roster: [UInt8]) -> [UInt8] { [version, MessageType.said.rawValue] + roster }

    static let entryNonce = [UInt8](repeating: 0, count: AEAD.nonceCount)

    static func u16(_ value: Int) -> [UInt8] { [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    static func u32(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(value >> (24 - 8 * $0) & 0xFF) } }

    /// Checks the version and type of a message before it is parsed.
    static func checkHeader(_ bytes: [UInt8], _ type: MessageType, minimum: Int, what: String) throws {
        guard bytes.count >= minimum else { throw ItsMeError(.malformedMessage, "a roll-call \(what) is too short") }
        guard bytes[0] == version else {
            throw ItsMeError(.malformedMessage, "a roll-call message of version \(bytes[0]) (this device speaks version \(version))")
        }
        guard bytes[1] == type.rawValue else { throw ItsMeError(.malformedMessage, "not a roll-call \(what)") }
    }
}

/// HELLO (20.2): `u8(2) || u8(1) || u8(b) || RK (32) || bind (32) || u16(n) ||
/// n tags of 16 bytes || signature (64)`, the tags in ascending order, n a
/// power of two from 32 to 2048.
struct RollCallHello: Equatable {
    let bound: Bool
    /// The sender's roll-call key: names it in this roll call.
    let key: [UInt8]
    let bindingCheck: [UInt8]
    /// Sorted, for a binary search.
    let tags: [[UInt8]]
    let bytes: [UInt8]
    /// `h`: SHA-256 of the body (without the signature).
    let name: [UInt8]

    /// Builds and signs this device's HELLO.
    init(bound: Bool, key: [UInt8], bindingCheck: [UInt8], tags: [[UInt8]], rollCallID: [UInt8], signingKey: SecretBox) throws {
        let sorted = tags.sorted { $0.lexicographicallyPrecedes($1) }
        var body = [RollCallProtocol.version, RollCallProtocol.MessageType.hello.rawValue, bound ? 1 : 0] + key + bindingCheck
        body += RollCallProtocol.u16(sorted.count)
        for tag in sorted { body += tag }
        self.bound = bound
        self.key = key
        self.bindingCheck = bindingCheck
        self.tags = sorted
        self.name = SHA256.hash(body)
        self.bytes = body + (try Ed25519.sign(RollCallProtocol.signedInput(rollCallID: rollCallID, body: body), secretKey: signingKey.bytes))
    }

    /// `.malformedMessage` for anything but a HELLO of this form,
    /// `.authenticationFailed` for a signature that does not verify.
    init(parsing bytes: [UInt8], rollCallID: [UInt8]) throws {
        let header = RollCallProtocol.helloHeaderCount
        try RollCallProtocol.checkHeader(bytes, .hello, minimum: header + RollCallProtocol.signatureCount, what: "HELLO")
        let count = Int(bytes[header - 2]) << 8 | Int(bytes[header - 1])
        guard count >= RollCallProtocol.minTags, count <= RollCallProtocol.maxTags, count & (count - 1) == 0,
            bytes.count == header + count * RollCallProtocol.tagCount + RollCallProtocol.signatureCount
        else {
            throw ItsMeError(.malformedMessage, "a roll-call HELLO's tags are not 32 to 2048, a power of two, of 16 bytes")
        }
        guard bytes[2] <= 1 else { throw ItsMeError(.malformedMessage, "a roll-call HELLO's binding flag is not 0 or 1") }
        let bound = bytes[2] == 1
        let bindingCheck = Array(bytes[35..<67])
        guard bound || bindingCheck.allSatisfy({ $0 == 0 }) else {
            throw ItsMeError(.malformedMessage, "a roll-call HELLO without a binding carries a binding check")
        }
        var tags: [[UInt8]] = []
        tags.reserveCapacity(count)
        for i in 0..<count {
            let start = header + i * RollCallProtocol.tagCount
            tags.append(Array(bytes[start..<start + RollCallProtocol.tagCount]))
        }
        for i in 1..<count where !tags[i - 1].lexicographicallyPrecedes(tags[i]) {
            throw ItsMeError(.malformedMessage, "a roll-call HELLO's tags are not in ascending order")
        }
        let split = bytes.count - RollCallProtocol.signatureCount
        let key = Array(bytes[3..<35])
        try RollCallProtocol.verify(
            rollCallID: rollCallID, body: bytes[..<split], signature: bytes[split...], key: key, what: "HELLO")
        self.bound = bound
        self.key = key
        self.bindingCheck = bindingCheck
        self.tags = tags
        self.bytes = bytes
        self.name = SHA256.hash(Array(bytes[..<split]))
    }

    /// Whether `tag` is one of the HELLO's (the tags are sorted).
    func contains(_ tag: [UInt8]) -> Bool {
        var low = 0
        var high = tags.count
        while low < high {
            let middle = (low + high) / 2
            if tags[middle] == tag { return true }
            if tags[middle].lexicographicallyPrecedes(tag) { low = middle + 1 } else { high = middle }
        }
        return false
    }
}

/// VIEW (20.3): `u8(2) || u8(3) || RK (32) || u32(seq) || u16(slot) ||
/// roster (32) || u8(flags) || u8(k) || k names of 32 bytes || have
/// (ceil(k/8)) || signature (64)`.
struct RollCallView: Equatable {
    let key: [UInt8]
    let seq: UInt32
    let slot: Int
    let roster: [UInt8]
    /// Its SAID of `roster` went out.
    let said: Bool
    /// The names it lists, ascending.
    let names: [[UInt8]]
    private let nameSet: Set<[UInt8]>
    /// `have[j]`: it holds the SAID of round `roster` of `names[j]`.
    let have: [Bool]
    let bytes: [UInt8]

    static func haveCount(_ k: Int) -> Int { (k + 7) / 8 }

    init(
        key: [UInt8], seq: UInt32, slot: Int, roster: [UInt8], said: Bool, names: [[UInt8]], have: [Bool], rollCallID: [UInt8],
        signingKey: SecretBox
    ) throws {
        var body = [RollCallProtocol.version, RollCallProtocol.MessageType.view.rawValue] + key + RollCallProtocol.u32(seq)
        body += RollCallProtocol.u16(slot) + roster + [said ? 1 : 0, UInt8(names.count)]
        for name in names { body += name }
        var bits = [UInt8](repeating: 0, count: Self.haveCount(names.count))
        for (j, set) in have.enumerated() where set { bits[j / 8] |= 0x80 >> UInt8(j % 8) }
        body += bits
        self.key = key
        self.seq = seq
        self.slot = slot
        self.roster = roster
        self.said = said
        self.names = names
        self.nameSet = Set(names)
        self.have = have
        self.bytes = body + (try Ed25519.sign(RollCallProtocol.signedInput(rollCallID: rollCallID, body: body), secretKey: signingKey.bytes))
    }

    /// `.malformedMessage` for anything but a VIEW of this form. The
    /// signature is not checked here: `checkSignature` does (a VIEW that
    /// would change nothing is ignored unchecked, 20.3).
    init(parsing bytes: [UInt8]) throws {
        let header = RollCallProtocol.viewHeaderCount
        try RollCallProtocol.checkHeader(bytes, .view, minimum: header + RollCallProtocol.signatureCount, what: "VIEW")
        let k = Int(bytes[header - 1])
        let nameCount = RollCallProtocol.nameCount
        guard k >= 1, k <= RollCallProtocol.maxHeld,
            bytes.count == header + k * nameCount + Self.haveCount(k) + RollCallProtocol.signatureCount
        else { throw ItsMeError(.malformedMessage, "a roll-call VIEW's length does not fit 1 to 100 names") }
        guard bytes[header - 2] <= 1 else { throw ItsMeError(.malformedMessage, "a roll-call VIEW's flags are not 0 or 1") }
        var names: [[UInt8]] = []
        for i in 0..<k {
            let start = header + i * nameCount
            names.append(Array(bytes[start..<start + nameCount]))
        }
        for i in 1..<k where !names[i - 1].lexicographicallyPrecedes(names[i]) {
            throw ItsMeError(.malformedMessage, "a roll-call VIEW's names are not in ascending order")
        }
        let bitsStart = header + k * nameCount
        var have: [Bool] = []
        for j in 0..<Self.haveCount(k) * 8 {
            let set = bytes[bitsStart + j / 8] & (0x80 >> UInt8(j % 8)) != 0
            if j < k { have.append(set) } else if set { throw ItsMeError(.malformedMessage, "a roll-call VIEW sets a bit past its names") }
        }
        self.key = Array(bytes[2..<34])
        self.seq = bytes[34..<38].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        self.slot = Int(bytes[38]) << 8 | Int(bytes[39])
        self.roster = Array(bytes[40..<72])
        self.said = bytes[72] == 1
        self.names = names
        self.nameSet = Set(names)
        self.have = have
        self.bytes = bytes
    }

    /// `.authenticationFailed` unless its key signed it.
    func checkSignature(rollCallID: [UInt8]) throws {
        let split = bytes.count - RollCallProtocol.signatureCount
        try RollCallProtocol.verify(rollCallID: rollCallID, body: bytes[..<split], signature: bytes[split...], key: key, what: "VIEW")
    }

    /// What a receiver named `name` reads of it (20.3): its slot, roster
    /// and flags, whether it lists `name`, and `name`'s bit.
    func reading(for name: [UInt8]) -> [UInt8] {
        let bit: UInt8 = names.firstIndex(of: name).map { have[$0] ? 2 : 1 } ?? 0
        return RollCallProtocol.u16(slot) + roster + [said ? 1 : 0, bit]
    }

    /// Whether it lists `name` (the names are sorted).
    func lists(_ name: [UInt8]) -> Bool { nameSet.contains(name) }

    /// Whether it holds the SAID of round `roster` of `name`.
    func has(said name: [UInt8], roster: [UInt8]) -> Bool {
        guard roster == self.roster, let j = names.firstIndex(of: name) else { return false }
        return have[j]
    }
}

/// SAID (20.5): `u8(2) || u8(2) || RK_S (32) || roster (32) || u8(m) || m
/// entries of 50 bytes || signature (64)`, one entry for every other
/// participant of the roster, in the order of their names.
struct RollCallSaid: Equatable {
    let speaker: [UInt8]
    let roster: [UInt8]
    let entries: [[UInt8]]
    let bytes: [UInt8]

    init(speaker: [UInt8], roster: [UInt8], entries: [[UInt8]], rollCallID: [UInt8], signingKey: SecretBox) throws {
        self.speaker = speaker
        self.roster = roster
        self.entries = entries
        let body =
            [RollCallProtocol.version, RollCallProtocol.MessageType.said.rawValue] + speaker + roster + [UInt8(entries.count)]
            + entries.flatMap { $0 }
        bytes = body + (try Ed25519.sign(RollCallProtocol.signedInput(rollCallID: rollCallID, body: body), secretKey: signingKey.bytes))
    }

    /// `.malformedMessage` for anything but a SAID of this form,
    /// `.authenticationFailed` for a signature that does not verify.
    init(parsing bytes: [UInt8], rollCallID: [UInt8]) throws {
        let header = RollCallProtocol.saidHeaderCount
        try RollCallProtocol.checkHeader(bytes, .said, minimum: header + RollCallProtocol.signatureCount, what: "SAID")
        let count = Int(bytes[header - 1])
        guard count >= 1, count < RollCallProtocol.maxParticipants,
            bytes.count == header + count * RollCallProtocol.entryCount + RollCallProtocol.signatureCount
        else { throw ItsMeError(.malformedMessage, "a roll-call SAID's entries are not 1 to 49 of 50 bytes") }
        let split = bytes.count - RollCallProtocol.signatureCount
        speaker = Array(bytes[2..<34])
        try RollCallProtocol.verify(
            rollCallID: rollCallID, body: bytes[..<split], signature: bytes[split...], key: speaker, what: "SAID")
        roster = Array(bytes[34..<66])
        entries = (0..<count).map { i in
            let start = header + i * RollCallProtocol.entryCount
            return Array(bytes[start..<start + RollCallProtocol.entryCount])
        }
        self.bytes = bytes
    }
}

/// The wire formats and derivations of the roll call (docs/PROTOCOL.md
/// section 20): one round of codes among everyone in a call, each checked
/// against the seed its listener shares with the speaker.
package enum RollCallProtocol {
    static let version: UInt8 = 1

    package enum MessageType: UInt8 {
        case hello = 1
        case said = 2
    }

    /// The most devices in one roll call, this one included.
    package static let maxParticipants = 50
    /// A roll call ends this long after its device joined.
    package static let lifetime: Int64 = 600
    /// A HELLO is accepted from this many windows before the receiver's
    /// current one (the lifetime) to one after (a clock a little ahead).
    static let windowsBefore: Int64 = 20
    static let windowsAfter: Int64 = 1
    static let nonceCount = 16
    /// A presence tag's length.
    static let tagCount = 16
    /// The fewest and the most tags a HELLO carries; in between, a power of two.
    static let minTags = 32
    package static let maxTags = 2048
    /// A roll-call code is a NATO word and three digits (0 to 25,999).
    static let codeValues: UInt32 = 26_000
    /// One SAID entry: AEAD of code (2) || device tag (32), with its tag.
    static let entryCount = 2 + 32 + AEAD.tagCount
    static let helloHeaderCount = 2 + 8 + nonceCount + 2
    static let saidHeaderCount = 2 + 32 + 32 + 1

    /// The roll call's ID, bound into every tag and key: SHA-256 of the
    /// meeting code's canonical form.
    package static func rollCallID(_ code: RemoteCode) -> [UInt8] {
        SHA256.hash(LV.cat(LV.b("itsme-rollcall-v1"), LV.b(code.canonical)))
    }

    /// The relay's group room (15.9): 16 bytes, named by their lowercase hex.
    package static func roomID(_ code: RemoteCode) -> [UInt8] {
        Array(SHA256.hash(LV.cat(LV.b("itsme-rollcall-room-v1"), LV.b(code.canonical))).prefix(16))
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

    /// tag(S→P): says to P that the HELLO (window, nonce) is S's.
    static func presenceTag<S: ByteView & ~Copyable>(
        seed: borrowing S, rollCallID: [UInt8], window: Int64, nonce: [UInt8], from: [UInt8], to: [UInt8]
    ) -> [UInt8] {
        Array(
            HMACSHA256.mac(
                key: seed, message: LV.cat(LV.b("itsme-rc-presence-v1"), rollCallID, VoiceProtocol.u64(window), nonce, from, to)
            ).prefix(tagCount))
    }

    /// The roster of a round: every HELLO's hash, in ascending order.
    static func rosterHash(rollCallID: [UInt8], sortedHelloHashes: [[UInt8]]) -> [UInt8] {
        SHA256.hash(LV.cat([LV.b("itsme-rc-roster-v1"), rollCallID] + sortedHelloHashes))
    }

    /// k(S→P): seals the code S said for P in the round of `roster`.
    static func codeKey<S: ByteView & ~Copyable>(
        seed: borrowing S, roster: [UInt8], rollCallID: [UInt8], speakerHello: [UInt8], listenerHello: [UInt8],
        speaker: [UInt8], listener: [UInt8]
    ) throws -> SecretBytes {
        try HKDF.derive(
            ikm: seed, salt: roster,
            info: LV.cat(LV.b("itsme-rc-code-v1"), rollCallID, speakerHello, listenerHello, speaker, listener), count: 32)
    }

    /// dtag(S) of 20.4: the speaker's device, under the tag key T of 10.1.
    static func deviceTag<S: ByteView & ~Copyable>(
        seed: borrowing S, speaker: [UInt8], roster: [UInt8], deviceSecret: SecretBox
    ) throws -> [UInt8] {
        try VoiceProtocol.withTagKey(seed: seed) { t in
            var message = deviceSecret.withBytes { LV.cat(LV.b("itsme-rc-device-v1"), speaker, roster, Array($0)) }
            defer { wipe(&message) }
            return message.withUnsafeBytes { HMACSHA256.mac(keyBytes: t, messageBytes: $0) }
        }
    }

    /// The associated data of every SAID entry: the header and the roster.
    static func entryAAD(roster: [UInt8]) -> [UInt8] { [version, MessageType.said.rawValue] + roster }

    static let entryNonce = [UInt8](repeating: 0, count: AEAD.nonceCount)
}

/// HELLO: `u8(1) || u8(1) || u64(window) || nonce(16) || u16(n) || n tags of 16
/// bytes`, the tags in ascending order, n a power of two from 32 to 2048.
struct RollCallHello: Equatable {
    let window: Int64
    let nonce: [UInt8]
    /// Sorted, for a binary search.
    let tags: [[UInt8]]
    let bytes: [UInt8]
    /// SHA-256 of `bytes`: how the roster and the keys name this device.
    let hash: [UInt8]

    init(window: Int64, nonce: [UInt8], tags: [[UInt8]]) {
        let sorted = tags.sorted { $0.lexicographicallyPrecedes($1) }
        var bytes = [RollCallProtocol.version, RollCallProtocol.MessageType.hello.rawValue] + VoiceProtocol.u64(window) + nonce
        bytes += [UInt8(sorted.count >> 8), UInt8(sorted.count & 0xFF)]
        for tag in sorted { bytes += tag }
        self.window = window
        self.nonce = nonce
        self.tags = sorted
        self.bytes = bytes
        self.hash = SHA256.hash(bytes)
    }

    /// `.malformedMessage` for anything but a HELLO of this form.
    init(parsing bytes: [UInt8]) throws {
        let header = RollCallProtocol.helloHeaderCount
        guard bytes.count >= header, bytes[0] == RollCallProtocol.version,
            bytes[1] == RollCallProtocol.MessageType.hello.rawValue
        else { throw ItsMeError(.malformedMessage, "not a roll-call HELLO") }
        let count = Int(bytes[header - 2]) << 8 | Int(bytes[header - 1])
        guard count >= RollCallProtocol.minTags, count <= RollCallProtocol.maxTags, count & (count - 1) == 0,
            bytes.count == header + count * RollCallProtocol.tagCount
        else { throw ItsMeError(.malformedMessage, "a roll-call HELLO's tags are not 32 to 2048, a power of two, of 16 bytes") }
        var tags: [[UInt8]] = []
        tags.reserveCapacity(count)
        for i in 0..<count {
            let start = header + i * RollCallProtocol.tagCount
            tags.append(Array(bytes[start..<start + RollCallProtocol.tagCount]))
        }
        for i in 1..<count where !tags[i - 1].lexicographicallyPrecedes(tags[i]) {
            throw ItsMeError(.malformedMessage, "a roll-call HELLO's tags are not in ascending order")
        }
        let window = bytes[2..<10].reduce(Int64(0)) { $0 << 8 | Int64($1) }
        self.window = window
        self.nonce = Array(bytes[10..<10 + RollCallProtocol.nonceCount])
        self.tags = tags
        self.bytes = bytes
        self.hash = SHA256.hash(bytes)
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

/// SAID: `u8(1) || u8(2) || speaker's HELLO hash (32) || roster hash (32) ||
/// u8(n) || n entries of 50 bytes`, one for every other participant of the
/// roster, in the order of their HELLO hashes.
struct RollCallSaid: Equatable {
    let speaker: [UInt8]
    let roster: [UInt8]
    let entries: [[UInt8]]
    let bytes: [UInt8]

    init(speaker: [UInt8], roster: [UInt8], entries: [[UInt8]]) {
        self.speaker = speaker
        self.roster = roster
        self.entries = entries
        bytes = [RollCallProtocol.version, RollCallProtocol.MessageType.said.rawValue] + speaker + roster + [UInt8(entries.count)]
            + entries.flatMap { $0 }
    }

    /// `.malformedMessage` for anything but a SAID of this form.
    init(parsing bytes: [UInt8]) throws {
        let header = RollCallProtocol.saidHeaderCount
        guard bytes.count >= header, bytes[0] == RollCallProtocol.version,
            bytes[1] == RollCallProtocol.MessageType.said.rawValue
        else { throw ItsMeError(.malformedMessage, "not a roll-call SAID") }
        let count = Int(bytes[header - 1])
        guard count >= 1, count < RollCallProtocol.maxParticipants,
            bytes.count == header + count * RollCallProtocol.entryCount
        else { throw ItsMeError(.malformedMessage, "a roll-call SAID's entries are not 1 to 49 of 50 bytes") }
        speaker = Array(bytes[2..<34])
        roster = Array(bytes[34..<66])
        entries = (0..<count).map { i in
            let start = header + i * RollCallProtocol.entryCount
            return Array(bytes[start..<start + RollCallProtocol.entryCount])
        }
        self.bytes = bytes
    }
}

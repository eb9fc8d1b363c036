import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// An invite code or encryption code (PROTOCOL.md 16.1): 8 characters from
/// a 31-character alphabet without look-alikes (no 0, 1, I, L, O), the last
/// a check character: sum(i * value(c_i), i = 1...8) = 0 mod 31. Because 31
/// is prime and the weights 1 to 8 are distinct, every single wrong
/// character and every swap of two characters is caught before any network
/// call; other typos slip through 1 time in 31.
public struct RemoteCode: Sendable, Equatable, CustomStringConvertible {
    /// The 31 characters a code may hold: digits and upper-case letters without
    /// 0, 1, I, L and O, which are easily confused.
    package static let alphabet = Array("23456789ABCDEFGHJKMNPQRSTUVWXYZ".utf8)
    /// The number of characters of a code, the check character included.
    package static let count = 8

    /// The 8 canonical characters (upper case, no separator).
    package let canonical: String

    private init(canonical: String) { self.canonical = canonical }

    /// Shown as two groups of four: `ABCD-EFGH`.
    public var text: String {
        let c = Array(canonical)
        return String(c[0..<4]) + "-" + String(c[4..<8])
    }

    /// The canonical form is not secret for an invite code, but it is for an
    /// encryption code: never printed by `description`.
    public var description: String { "RemoteCode(8 characters)" }

    static func checkValue(_ values: [Int]) -> Int {
        // value_8 = -(sum of i * value_i, i = 1...7) * 8^-1 mod 31, and 8^-1 = 4.
        let s = values.enumerated().reduce(0) { $0 + ($1.offset + 1) * $1.element } % 31
        return ((31 - s) % 31) * 4 % 31
    }

    /// The alphabet values of `count` characters a person typed (an invite
    /// or encryption code, a generated export password): ASCII letters in
    /// either case, spaces and `-` ignored. `.invalidArgument`, saying what
    /// is wrong, for a character outside the alphabet or another count.
    static func typedValues(_ input: String, count: Int, what: String) throws -> [Int] {
        let values: [Int]
        switch TypedInput.alphabetValues(input, alphabet: alphabet) {
        case .success(let read): values = read
        case .failure(let refused):
            throw ItsMeError(
                .invalidArgument,
                "the \(what) contains \(refused.shown), which codes never use (they use 2-9 and A-Z without I, L, O)")
        }
        guard values.count == count else {
            throw ItsMeError(.invalidArgument, "the \(what) has \(count) characters, got \(values.count)")
        }
        return values
    }

    /// A fresh code: 7 characters by rejection sampling (bytes below 248 =
    /// 8 x 31), then the check character.
    public static func random<R: RandomSource>(using rng: inout R) -> RemoteCode {
        var values: [Int] = []
        while values.count < count - 1 {
            var b: UInt8 = 0
            withUnsafeMutableBytes(of: &b) { rng.fill($0) }
            if b < 248 { values.append(Int(b) % 31) }
        }
        values.append(checkValue(values))
        return RemoteCode(canonical: String(decoding: values.map { alphabet[$0] }, as: UTF8.self))
    }

    /// Parses what a person typed: ASCII letters in either case, spaces and
    /// `-` ignored. Throws `.invalidArgument` with a message saying what is
    /// wrong (a character outside the alphabet, the wrong length, or a typo
    /// the check character caught).
    public init(parsing input: String, what: String = "code") throws {
        let values = try Self.typedValues(input, count: Self.count, what: what)
        guard Self.checkValue(Array(values.prefix(7))) == values[7] else {
            throw ItsMeError(.invalidArgument, "the \(what) has a typo: check it character by character")
        }
        canonical = String(decoding: values.map { Self.alphabet[$0] }, as: UTF8.self)
    }
}

/// The wire formats and derivations of the remote exchange (PROTOCOL.md
/// 16), as pure functions.
public enum RemoteProtocol {
    /// The version byte every remote exchange message starts with.
    package static let version: UInt8 = 1
    package static let sidCount = 16
    package static let tagCount = 32
    static let exchangeLabel = "itsme-online-exchange-v1"
    static let confirmLabel = "itsme-online-confirm-v1"
    static let payloadLabel = "itsme-online-payload-v1"

    package enum MessageType: UInt8 {
        case invite = 1
        case accept = 2
        case reply = 3
        /// A side's decision on the SAS (16.4).
        case decision = 4
    }

    /// The relay ID (16 bytes) of an invite's mailbox and of the PAKE's
    /// binding: first 16 bytes of SHA-256(lv_cat("itsme-invite-id-v1", code)).
    package static func inviteID(_ code: RemoteCode) -> [UInt8] {
        Array(SHA256.hash(LV.cat(LV.b("itsme-invite-id-v1"), LV.b(code.canonical))).prefix(16))
    }

    /// The relay room of a real-time exchange.
    package static func roomID(_ code: RemoteCode) -> [UInt8] {
        Array(SHA256.hash(LV.cat(LV.b("itsme-realtime-room-v1"), LV.b(code.canonical))).prefix(16))
    }

    /// CPace's channel identifier: lv_cat("itsme-online-exchange-v1", invite code).
    package static func channelIdentifier(_ code: RemoteCode) -> [UInt8] {
        LV.cat(LV.b(exchangeLabel), LV.b(code.canonical))
    }

    package static let inviteCount = 2 + sidCount + CPace.pointCount + 32
    /// The smallest sealed payload: 145 + 1 bytes of plaintext and the tag.
    static let minPayloadBox = 145 + 1 + AEAD.tagCount
    static let maxPayloadBox = 145 + DisplayName.maxBytes + AEAD.tagCount
    /// The size in bytes of the largest message of a remote exchange (
    /// an ACCEPT with the longest name): the relay's message limit must allow it.
    public static let maxMessageCount = 2 + CPace.pointCount + tagCount + maxPayloadBox

    /// tpake = SHA-256(lv_cat("itsme-online-transcript-v1", invite_id, INVITE, Yb)).
    package static func pakeTranscript(inviteID: [UInt8], invite: [UInt8], yb: [UInt8]) -> [UInt8] {
        SHA256.hash(LV.cat(LV.b("itsme-online-transcript-v1"), inviteID, invite, yb))
    }

    /// kc_I || kc_R || kp_I || kp_R || kd_I || kd_R (192 bytes) from the ISK.
    static func keys(isk: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) throws {
        guard out.count == 192 else { throw ItsMeError(.invalidArgument, "six 32-byte keys") }
        let salt = LV.b(exchangeLabel)
        for (i, label) in [confirmLabel, "payload-encryption", decisionLabel].enumerated() {
            try SessionFrames.directionKeys(
                shared: isk, salt: salt, label: label, into: UnsafeMutableRawBufferPointer(rebasing: out[(64 * i)..<(64 * i + 64)]))
        }
    }

    static let decisionLabel = "itsme-online-decision-v1"
    /// A DECISION message: version, type, one sealed byte and its tag.
    package static let decisionCount = 2 + 1 + AEAD.tagCount

    static func decisionAAD(initiator: Bool, th: [UInt8]) -> [UInt8] {
        LV.cat(LV.b(decisionLabel), [version], LV.b(initiator ? "initiator" : "responder"), th)
    }

    /// DECISION = u8(1) || u8(4) || AES-256-GCM(kd_X, zero nonce, aad, u8(1 confirmed | 0 rejected)).
    /// Each kd_X seals exactly one message, so the fixed nonce never repeats under a key.
    static func decisionMessage(key: UnsafeRawBufferPointer, initiator: Bool, th: [UInt8], confirmed: Bool) throws -> [UInt8] {
        let box = try AEAD.seal(
            .aes256GCM, key: key, nonce: [UInt8](repeating: 0, count: AEAD.nonceCount), plaintext: [confirmed ? 1 : 0],
            aad: decisionAAD(initiator: initiator, th: th))
        return [version, MessageType.decision.rawValue] + box
    }

    /// The peer's decision, from a DECISION message whose size, version and
    /// type were checked: `.authenticationFailed` if the box does not open,
    /// `.malformedMessage` if it holds anything but 0 or 1.
    static func openDecision(key: UnsafeRawBufferPointer, initiator: Bool, th: [UInt8], _ m: [UInt8]) throws -> Bool {
        let plain: [UInt8]
        do {
            plain = try AEAD.open(
                .aes256GCM, key: key, nonce: [UInt8](repeating: 0, count: AEAD.nonceCount), ciphertext: Array(m[2...]),
                aad: decisionAAD(initiator: initiator, th: th)
            ).unsafeExportedArray()
        } catch let e as ItsMeError where e.kind == .authenticationFailed {
            throw ItsMeError(.authenticationFailed, "the peer's decision failed authentication (forged or changed)")
        }
        guard plain.count == 1, plain[0] <= 1 else { throw ItsMeError(.malformedMessage, "a decision carries 0 or 1") }
        return plain[0] == 1
    }

    /// The responder's tag: HMAC(kc_R, lv_cat(label, "responder", tpake)).
    /// The initiator's: HMAC(kc_I, lv_cat(label, "initiator", tpake, SHA-256(ACCEPT))).
    package static func confirmationTag(key: UnsafeRawBufferPointer, initiator: Bool, tpake: [UInt8], accept: [UInt8]?) -> [UInt8] {
        var parts = [LV.b(confirmLabel), LV.b(initiator ? "initiator" : "responder"), tpake]
        if let accept { parts.append(SHA256.hash(accept)) }
        return HMACSHA256.mac(key: key, message: LV.cat(parts))
    }

    static func payloadAAD(initiator: Bool, inviteID: [UInt8]) -> [UInt8] {
        LV.cat(LV.b(payloadLabel), [version], LV.b(initiator ? "initiator" : "responder"), inviteID)
    }

    /// The contact data a side sends, signed over the PAKE transcript:
    /// identity_pk || ephemeral_pk || device_secret || u8(n) || name || signature.
    static func payload(
        identity: Identity, ephemeralKey: [UInt8], deviceSecret: UnsafeRawBufferPointer, tpake: [UInt8], initiator: Bool
    ) throws -> [UInt8] {
        let name = Array(identity.name.utf8)
        var data = identity.publicKey + ephemeralKey
        data += deviceSecret
        data.append(UInt8(name.count))
        data += name
        return data + (try identity.sign(LV.cat(LV.b(payloadLabel), tpake, LV.b(initiator ? "initiator" : "responder"), data)))
    }

    /// AES-256-GCM under the sender's payload key; each key seals exactly one
    /// message, so the nonce is fixed (12 zero bytes).
    static func sealPayload(key: UnsafeRawBufferPointer, initiator: Bool, inviteID: [UInt8], _ plaintext: [UInt8]) throws -> [UInt8] {
        try AEAD.seal(
            .aes256GCM, key: key, nonce: [UInt8](repeating: 0, count: AEAD.nonceCount), plaintext: plaintext,
            aad: payloadAAD(initiator: initiator, inviteID: inviteID))
    }

    static func openPayload(key: UnsafeRawBufferPointer, initiator: Bool, inviteID: [UInt8], _ box: [UInt8]) throws -> [UInt8] {
        do {
            return try AEAD.open(
                .aes256GCM, key: key, nonce: [UInt8](repeating: 0, count: AEAD.nonceCount), ciphertext: box,
                aad: payloadAAD(initiator: initiator, inviteID: inviteID)
            ).unsafeExportedArray()
        } catch let e as ItsMeError where e.kind == .authenticationFailed {
            throw ItsMeError(.authenticationFailed, "the peer's sealed contact data failed authentication (tampered)")
        }
    }

    /// A checked peer payload.
    struct Payload {
        let identityKey: [UInt8]
        let ephemeralKey: [UInt8]
        let deviceSecret: [UInt8]
        let nameBytes: [UInt8]
        let name: String
    }

    /// Checks a decrypted payload: length, name, signature over tpake with
    /// the sender's role. The caller checks the key against its own.
    static func parsePayload(_ plain: [UInt8], tpake: [UInt8], senderInitiator: Bool) throws -> Payload {
        guard plain.count >= 145 + 1, plain.count == 145 + Int(plain[80]) else {
            throw ItsMeError(.malformedMessage, "the peer's contact data has the wrong length")
        }
        let key = Array(plain[0..<32])
        let nameBytes = Array(plain[81..<(plain.count - 64)])
        guard let name = String(validating: nameBytes, as: UTF8.self), DisplayName.isValid(name) else {
            throw ItsMeError(.malformedMessage, "the peer's name is not valid UTF-8 without control, invisible or bidi-override characters")
        }
        let data = Array(plain[..<(plain.count - 64)])
        guard
            Ed25519.verify(
                signature: Array(plain[(plain.count - 64)...]),
                message: LV.cat(LV.b(payloadLabel), tpake, LV.b(senderInitiator ? "initiator" : "responder"), data),
                publicKey: key)
        else { throw ItsMeError(.authenticationFailed, "the peer's signature does not verify") }
        return Payload(
            identityKey: key, ephemeralKey: Array(plain[32..<64]), deviceSecret: Array(plain[64..<80]), nameBytes: nameBytes, name: name)
    }

    /// th = SHA-256(lv_cat("itsme-online-sas-transcript-v1", tpake, payload_I, payload_R)).
    package static func transcriptHash(tpake: [UInt8], payloadI: [UInt8], payloadR: [UInt8]) -> [UInt8] {
        SHA256.hash(LV.cat(LV.b("itsme-online-sas-transcript-v1"), tpake, payloadI, payloadR))
    }
}

/// The PAKE scalars of pending remote exchanges, kept in the secret store
/// (never in a sealed exchange) for at most 24 hours: item
/// `itsme.pake.<invite id hex>.<inviter|invitee>` = u8(1) || u64(created)
/// || scalar, and an index `itsme.pake-index` of (id, role, created) so
/// that scalars of abandoned exchanges are swept. docs/STORAGE.md lists them.
enum PendingPAKE {
    static let indexItem = "itsme.pake-index"
    static let recordVersion: UInt8 = 1

    static func itemName(_ inviteID: [UInt8], inviter: Bool) -> String {
        "itsme.pake." + Hex.encodeUpper(inviteID).lowercased() + (inviter ? ".inviter" : ".invitee")
    }

    private struct Entry: Equatable {
        let inviteID: [UInt8]
        let inviter: Bool
        let createdAt: Int64
    }

    private static func readIndex(_ store: any SecretStore) throws -> [Entry] {
        guard let record = try store.get(indexItem) else { return [] }
        return try record.withBytes { b in
            var r = RecordReader(b, what: "pending PAKE index")
            guard try r.byte() == recordVersion else { throw ItsMeError(.corruptData, "pending PAKE index of unknown version") }
            var entries: [Entry] = []
            for _ in 0..<(try r.uint16()) {
                entries.append(Entry(inviteID: try r.array(16), inviter: try r.byte() == 1, createdAt: try r.int64()))
            }
            try r.finish()
            return entries
        }
    }

    private static func writeIndex(_ store: any SecretStore, _ entries: [Entry]) throws {
        if entries.isEmpty {
            _ = try store.remove(indexItem)
            return
        }
        var w = try RecordWriter(count: 3 + entries.count * 25)
        w.append(recordVersion)
        w.append(UInt16(entries.count))
        for e in entries {
            w.append(e.inviteID)
            w.append(UInt8(e.inviter ? 1 : 0))
            w.append(e.createdAt)
        }
        try store.put(indexItem, bytes: w.finish())
    }

    static func keep(
        _ store: any SecretStore, inviteID: [UInt8], inviter: Bool, createdAt: Int64, scalar: UnsafeRawBufferPointer
    ) throws {
        var w = try RecordWriter(count: 1 + 8 + scalar.count)
        w.append(recordVersion)
        w.append(createdAt)
        w.append(scalar)
        let record = w.finish()
        try store.withExclusiveAccess {
            var entries = try readIndex(store)
            guard entries.count < Int(UInt16.max) else { throw ItsMeError(.invalidState, "too many pending invites") }
            try store.put(itemName(inviteID, inviter: inviter), bytes: record)
            entries.removeAll { $0.inviteID == inviteID && $0.inviter == inviter }
            entries.append(Entry(inviteID: inviteID, inviter: inviter, createdAt: createdAt))
            try writeIndex(store, entries)
        }
    }

    /// Copies the scalar into `out`; false if it is gone (the exchange
    /// ended, or was swept).
    static func load(_ store: any SecretStore, inviteID: [UInt8], inviter: Bool, into out: UnsafeMutableRawBufferPointer) throws -> Bool {
        guard let record = try store.get(itemName(inviteID, inviter: inviter)) else { return false }
        try record.withBytes { b in
            guard b.count == 1 + 8 + out.count, b[0] == recordVersion else {
                throw ItsMeError(.corruptData, "a pending PAKE secret of unknown format")
            }
            out.copyMemory(from: UnsafeRawBufferPointer(rebasing: b[9...]))
        }
        return true
    }

    /// Removes the scalar and its index entry. Never throws: a store that
    /// fails here leaves an entry the next sweep removes.
    static func forget(_ store: any SecretStore, inviteID: [UInt8], inviter: Bool) {
        try? store.withExclusiveAccess {
            _ = try store.remove(itemName(inviteID, inviter: inviter))
            var entries = try readIndex(store)
            let before = entries.count
            entries.removeAll { $0.inviteID == inviteID && $0.inviter == inviter }
            if entries.count != before { try writeIndex(store, entries) }
        }
    }

    /// Removes every scalar older than the exchange lifetime.
    static func sweep(_ store: any SecretStore, now: Int64) throws {
        try store.withExclusiveAccess {
            let entries = try readIndex(store)
            let keep = entries.filter { now - $0.createdAt <= Exchange.lifetime }
            guard keep.count != entries.count else { return }
            for e in entries where !keep.contains(e) { _ = try store.remove(itemName(e.inviteID, inviter: e.inviter)) }
            try writeIndex(store, keep)
        }
    }

    /// How many scalars are pending (for tests and hosts' diagnostics).
    static func pendingCount(_ store: any SecretStore) throws -> Int { try readIndex(store).count }
}

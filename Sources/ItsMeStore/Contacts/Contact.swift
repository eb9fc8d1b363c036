import ItsMePrimitives
import ItsMeBase

/// A contact as the store keeps it, without its secrets (the verification
/// seed and device secrets are read separately, only when needed).
public struct Contact: Sendable, Equatable, CustomStringConvertible {
    /// Where the contact stands in verification. The raw values are stored and
    /// are the C interface's `ITSME_CONTACT_*` constants.
    public enum State: UInt8, Sendable {
        /// Added by an exchange, not (yet) verified: the SAS was not confirmed, or
        /// the contact came from an import.
        case unverified = 0
        /// Verified in person or by a voice or Online Verify session on the device
        /// that was exchanged with.
        case verified = 1
        /// Their device changed (device binding); see `degradationAcknowledged`.
        case degraded = 2
        /// Added by an exchange whose SAS this side confirmed, while the
        /// peer's confirmation has not arrived (PROTOCOL.md 8.1). Not usable
        /// for verification; deleted when the peer rejects or `awaitingUntil`
        /// passes. Only an exchange sets or leaves this state.
        case awaitingPeer = 3
    }

    /// How the contact was added. The raw values are stored.
    public enum ExchangeMethod: UInt8, Sendable {
        /// By QR codes, in person.
        case qr = 0
        /// By Bluetooth, in person.
        case bluetooth = 1
        /// By an invite at a distance, through the relay's mailbox.
        case invite = 2
        /// By a real-time exchange at a distance, both online at once.
        case realtime = 3
    }

    /// The row id: stable, never reused (AUTOINCREMENT). 0 before adding.
    public internal(set) var id: Int64
    /// The display name the person gave, or a new one set with
    /// `ContactStore.setName`.
    public var name: String
    /// 16 uppercase hex digits; for display and lookup only.
    public internal(set) var fingerprint: String
    /// The contact's Ed25519 identity key, which identifies the contact.
    /// nil for a contact imported from the source's v5 format, which
    /// carries no key: such a contact is unauthenticated.
    public internal(set) var publicKey: [UInt8]?
    /// Where the contact stands in verification.
    public var state: State
    /// The person confirmed a device change (degradation code entered).
    public var degradationAcknowledged: Bool
    /// How the contact was added.
    public internal(set) var exchangeMethod: ExchangeMethod
    /// When the contact was added, in Unix seconds.
    public internal(set) var createdAt: Int64
    /// When the contact was last verified, in Unix seconds; nil if never.
    public var verifiedAt: Int64?
    /// The last voice-verification window used; a window W is usable only
    /// if W is greater. Changed only through `ContactStore.useWindow`.
    package internal(set) var lastWindow: Int64?
    /// For a contact awaiting the peer: the last second at which the peer's
    /// decision may still arrive; `ContactStore.expireAwaiting` deletes it after.
    package internal(set) var awaitingUntil: Int64?
    /// A private note about the contact, at most 4096 bytes of UTF-8.
    public var note: String
    /// Whether the contact has a photo (`ContactStore.photo`). The record
    /// says so, so that a photo row that went missing is noticed rather
    /// than taken for no photo. Changed only through the store.
    package internal(set) var hasPhoto: Bool = false
    /// Fields written by a newer version, kept as they are on update.
    var unknownFields: [RecordField] = []

    /// Whether the contact has an identity key (false only for a contact imported
    /// from the source's v5 format).
    public var isAuthenticated: Bool { publicKey != nil }

    /// The contact's id in verification (PROTOCOL.md section 9): its
    /// identity key, or the 8 fingerprint bytes of an unauthenticated one.
    package var pid: [UInt8] { publicKey ?? Hex.decode(fingerprint)! }

    package static let maxNoteBytes = 4096

    /// The id, fingerprint and state, for logs; no name and no secret.
    public var description: String { "Contact(id: \(id), fingerprint: \(fingerprint), state: \(state))" }
}

/// One field of a sealed record: a tag and its bytes.
struct RecordField: Sendable, Equatable {
    let tag: UInt8
    let value: [UInt8]
}

/// The plaintext of a contact record: a format version byte, then fields as
/// tag (1 byte) | length (2 bytes, big-endian) | value. Readers skip tags
/// they do not know and keep them, so later versions can add fields without
/// rewriting existing rows. See docs/STORAGE.md.
enum ContactRecord {
    static let version: UInt8 = 1

    enum Tag: UInt8 {
        case name = 1
        case fingerprint = 2
        case publicKey = 3
        case seed = 4
        case state = 5
        case acknowledged = 6
        case method = 7
        case createdAt = 8
        case verifiedAt = 9
        case lastWindow = 10
        case note = 11
        case awaitingUntil = 12
        case photo = 13
    }

    static let seedCount = 32

    /// Serialises into guarded memory (the record carries the seed).
    static func encode(_ c: Contact, seed: borrowing SecretBytes) throws -> SecretBytes {
        var fields: [(UInt8, [UInt8])] = [
            (Tag.name.rawValue, Array(c.name.utf8)),
            (Tag.fingerprint.rawValue, Hex.decode(c.fingerprint) ?? []),
            (Tag.state.rawValue, [c.state.rawValue]),
            (Tag.acknowledged.rawValue, [c.degradationAcknowledged ? 1 : 0]),
            (Tag.method.rawValue, [c.exchangeMethod.rawValue]),
            (Tag.createdAt.rawValue, bigEndian(c.createdAt)),
            (Tag.note.rawValue, Array(c.note.utf8)),
        ]
        if let key = c.publicKey { fields.append((Tag.publicKey.rawValue, key)) }
        if let v = c.verifiedAt { fields.append((Tag.verifiedAt.rawValue, bigEndian(v))) }
        if let w = c.lastWindow { fields.append((Tag.lastWindow.rawValue, bigEndian(w))) }
        if let u = c.awaitingUntil { fields.append((Tag.awaitingUntil.rawValue, bigEndian(u))) }
        if c.hasPhoto { fields.append((Tag.photo.rawValue, [1])) }
        fields += c.unknownFields.map { ($0.tag, $0.value) }
        let size = 1 + fields.reduce(0) { $0 + 3 + $1.1.count } + 3 + seed.count
        var w = try RecordWriter(count: size)
        w.append(version)
        for (tag, value) in fields {
            w.append(tag)
            w.append(UInt16(value.count))
            w.append(value)
        }
        w.append(Tag.seed.rawValue)
        w.append(UInt16(seed.count))
        w.append(seed)
        return w.finish()
    }

    /// Parses a record; `seedInto` receives the seed when given.
    static func decode(_ bytes: UnsafeRawBufferPointer, id: Int64, seedInto: UnsafeMutableRawBufferPointer? = nil) throws
        -> Contact
    {
        var r = RecordReader(bytes, what: "contact record")
        let v = try r.byte()
        guard v == version else { throw ItsMeError(.corruptData, "contact record has unknown format version \(v)") }
        var name: String?, fingerprint: [UInt8]?, publicKey: [UInt8]?, state: Contact.State?
        var acknowledged = false, method: Contact.ExchangeMethod?, createdAt: Int64?
        var verifiedAt: Int64?, lastWindow: Int64?, awaitingUntil: Int64?, note = "", unknown: [RecordField] = []
        var sawSeed = false, hasPhoto = false
        while !r.isAtEnd {
            let tag = try r.byte()
            let length = Int(try r.uint16())
            if tag == Tag.seed.rawValue {
                guard length == seedCount else { throw ItsMeError(.corruptData, "contact record has a bad seed") }
                let seed = try r.slice(length)
                if let out = seedInto, out.count == seedCount { out.copyMemory(from: seed) }
                sawSeed = true
                continue
            }
            let value = try r.array(length)
            switch Tag(rawValue: tag) {
            case .name: name = String(validating: value, as: UTF8.self)
            case .fingerprint: fingerprint = value
            case .publicKey: publicKey = value
            case .state: state = value.count == 1 ? Contact.State(rawValue: value[0]) : nil
            case .acknowledged: acknowledged = value == [1]
            case .method: method = value.count == 1 ? Contact.ExchangeMethod(rawValue: value[0]) : nil
            case .createdAt: createdAt = int64(value)
            case .verifiedAt: verifiedAt = int64(value)
            case .lastWindow: lastWindow = int64(value)
            case .awaitingUntil: awaitingUntil = int64(value)
            case .note: note = String(validating: value, as: UTF8.self) ?? ""
            case .photo:
                guard value == [1] else { throw ItsMeError(.corruptData, "contact record \(id) has a malformed photo field") }
                hasPhoto = true
            case .seed, nil: unknown.append(RecordField(tag: tag, value: value))
            }
        }
        guard let name, DisplayName.isValid(name), let fingerprint, fingerprint.count == 8, let state, let method,
            let createdAt, sawSeed, (state == .awaitingPeer) == (awaitingUntil != nil)
        else { throw ItsMeError(.corruptData, "contact record \(id) lacks a required field") }
        if let key = publicKey {
            guard key.count == Ed25519.publicKeyCount, Fingerprint.of(publicKey: key) == Hex.encodeUpper(fingerprint) else {
                throw ItsMeError(.corruptData, "contact record \(id) has a key that does not match its fingerprint")
            }
        }
        return Contact(
            id: id, name: name, fingerprint: Hex.encodeUpper(fingerprint), publicKey: publicKey, state: state,
            degradationAcknowledged: acknowledged, exchangeMethod: method, createdAt: createdAt, verifiedAt: verifiedAt,
            lastWindow: lastWindow, awaitingUntil: awaitingUntil, note: note, hasPhoto: hasPhoto, unknownFields: unknown)
    }

    static func bigEndian(_ v: Int64) -> [UInt8] { withUnsafeBytes(of: v.bigEndian) { Array($0) } }

    static func int64(_ b: [UInt8]) -> Int64? {
        guard b.count == 8 else { return nil }
        return Int64(bitPattern: b.reduce(0) { $0 << 8 | UInt64($1) })
    }
}

/// What a verification found (PROTOCOL.md 10.1), as the contact store
/// records it (`VoiceSession.Outcome`).
public enum VerificationOutcome: UInt32, Sendable {
    /// Code and device tag as expected.
    case verified = 1
    /// The code is right, the device tag is not: their device changed.
    /// The contact is now degraded.
    case deviceChanged = 2
    /// The code is wrong: not the person, or a mistake. Nothing stored
    /// changed; start again at a new window.
    case mismatch = 3
    /// The code is right; this device holds no device secret for the
    /// contact (it is new, or the contact was added without one), so
    /// the tag could not be checked.
    case verifiedTagUnchecked = 4
}

import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// The Bluetooth frames (docs/PROTOCOL.md 7) and the messages of the
/// exchange at a distance (16.3), parsed into typed values. Every byte
/// offset of them is in this file (and in `ExchangeFormats` and
/// `RemoteFormats` for the payloads); the machine sees only the values.
///
/// A sealed frame or message stays whole here, header included, because
/// its AEAD binds the header.

/// Checks the size, version byte and type byte every frame and message
/// starts with (sections 7.1 and 16.3).
private func header<T: RawRepresentable>(_ m: [UInt8], maxCount: Int, version: UInt8, what: String) throws -> T
where T.RawValue == UInt8 {
    guard m.count >= 2, m.count <= maxCount else {
        throw ItsMeError(.malformedMessage, "a \(what) is 2 to \(maxCount) bytes, got \(m.count)")
    }
    guard m[0] == version else { throw ItsMeError(.malformedMessage, "\(what) of unknown version \(m[0])") }
    guard let type = T(rawValue: m[1]) else { throw ItsMeError(.malformedMessage, "\(what) of unknown type \(m[1])") }
    return type
}

/// A Bluetooth frame.
enum BluetoothFrame {
    /// The sender's fingerprint (8 bytes) and its commitment (32).
    case hello(fingerprint: [UInt8], commitment: [UInt8])
    /// The sender's ephemeral X25519 key.
    case key(ephemeralKey: [UInt8])
    /// The sealed contact data, whole.
    case data(sealed: [UInt8])
    /// The sealed decision, whole.
    case confirm(sealed: [UInt8])

    typealias Kind = ExchangeProtocol.FrameType

    static let helloCount = 2 + 8 + 32
    static let keyCount = 2 + X25519.keyCount
    static let minDataCount = 2 + BluetoothData.minCount + AEAD.tagCount
    static let confirmCount = 2 + 1 + AEAD.tagCount

    var kind: Kind {
        switch self {
        case .hello: .hello
        case .key: .key
        case .data: .data
        case .confirm: .confirm
        }
    }

    init(parsing f: [UInt8]) throws {
        let kind: Kind = try header(f, maxCount: ExchangeProtocol.maxFrameCount, version: ExchangeProtocol.version, what: "Bluetooth frame")
        switch kind {
        case .hello:
            guard f.count == Self.helloCount else { throw ItsMeError(.malformedMessage, "a HELLO frame is 42 bytes") }
            self = .hello(fingerprint: Array(f[2..<10]), commitment: Array(f[10...]))
        case .key:
            guard f.count == Self.keyCount else { throw ItsMeError(.malformedMessage, "a KEY frame is 34 bytes") }
            self = .key(ephemeralKey: Array(f[2...]))
        case .data:
            // The length first (a name of 1 to 128 bytes): a wrong one is
            // malformed, not a failed tag.
            guard f.count >= Self.minDataCount else {
                throw ItsMeError(.malformedMessage, "a DATA frame is \(Self.minDataCount) to \(ExchangeProtocol.maxFrameCount) bytes")
            }
            self = .data(sealed: f)
        case .confirm:
            guard f.count == Self.confirmCount else { throw ItsMeError(.malformedMessage, "a CONFIRM frame is 19 bytes") }
            self = .confirm(sealed: f)
        }
    }

    static func helloBytes(fingerprint: [UInt8], commitment: [UInt8]) -> [UInt8] {
        [ExchangeProtocol.version, Kind.hello.rawValue] + fingerprint + commitment
    }

    static func keyBytes(_ ephemeralKey: [UInt8]) -> [UInt8] { [ExchangeProtocol.version, Kind.key.rawValue] + ephemeralKey }
}

/// The contact data a Bluetooth DATA frame carries: identity key (32) ||
/// device secret (16) || u8(n) || name (n) || signature (64).
struct BluetoothData {
    static let minCount = 32 + 16 + 1 + 1 + 64

    let identityKey: [UInt8]
    let deviceSecret: [UInt8]
    let nameBytes: [UInt8]
    let name: String
    /// What the signature covers: everything before it.
    let signed: [UInt8]
    let signature: [UInt8]

    init(parsing plain: [UInt8]) throws {
        guard plain.count >= Self.minCount, plain.count == Self.minCount - 1 + Int(plain[48]) else {
            throw ItsMeError(.malformedMessage, "the peer's contact data has the wrong length")
        }
        identityKey = Array(plain[0..<32])
        deviceSecret = Array(plain[32..<48])
        nameBytes = Array(plain[49..<(plain.count - 64)])
        guard let name = String(validating: nameBytes, as: UTF8.self), DisplayName.isValid(name) else {
            throw ItsMeError(.malformedMessage, "the peer's name is not valid UTF-8 without control, invisible or bidi-override characters")
        }
        self.name = name
        signed = Array(plain[..<(plain.count - 64)])
        signature = Array(plain[(plain.count - 64)...])
    }

    /// The unsigned part: identity key, device secret, name.
    static func unsigned(identityKey: [UInt8], deviceSecret: UnsafeRawBufferPointer, name: [UInt8]) -> [UInt8] {
        var data = identityKey
        data += deviceSecret
        data.append(UInt8(name.count))
        return data + name
    }
}

/// A message of the exchange at a distance.
enum RemoteMessage {
    /// The inviter's: session id (16), CPace share Ya (32), commitment (32).
    case invite(sid: [UInt8], share: [UInt8], commitment: [UInt8])
    /// The invitee's: CPace share Yb (32), confirmation tag (32), sealed payload.
    case accept(share: [UInt8], tag: [UInt8], box: [UInt8])
    /// The inviter's: confirmation tag (32), sealed payload.
    case reply(tag: [UInt8], box: [UInt8])
    /// A sealed decision, whole.
    case decision(sealed: [UInt8])

    typealias Kind = RemoteProtocol.MessageType

    var kind: Kind {
        switch self {
        case .invite: .invite
        case .accept: .accept
        case .reply: .reply
        case .decision: .decision
        }
    }

    init(parsing m: [UInt8]) throws {
        let kind: Kind = try header(m, maxCount: RemoteProtocol.maxMessageCount, version: RemoteProtocol.version, what: "exchange message")
        // Each type's own row of 16.3, before anything is decrypted.
        let boxes = RemoteProtocol.minPayloadBox...RemoteProtocol.maxPayloadBox
        func boxed(_ what: String, after fixed: Int) throws {
            let row = (fixed + boxes.lowerBound)...(fixed + boxes.upperBound)
            guard row.contains(m.count) else {
                throw ItsMeError(.malformedMessage, "\(what) message is \(row.lowerBound) to \(row.upperBound) bytes, got \(m.count)")
            }
        }
        switch kind {
        case .invite:
            guard m.count == RemoteProtocol.inviteCount else { throw ItsMeError(.malformedMessage, "an INVITE message is 82 bytes") }
            self = .invite(sid: Array(m[2..<18]), share: Array(m[18..<50]), commitment: Array(m[50..<82]))
        case .accept:
            try boxed("an ACCEPT", after: 2 + 32 + 32)
            self = .accept(share: Array(m[2..<34]), tag: Array(m[34..<66]), box: Array(m[66...]))
        case .reply:
            try boxed("a REPLY", after: 2 + 32)
            self = .reply(tag: Array(m[2..<34]), box: Array(m[34...]))
        case .decision:
            guard m.count == RemoteProtocol.decisionCount else {
                throw ItsMeError(.malformedMessage, "a DECISION message is \(RemoteProtocol.decisionCount) bytes")
            }
            self = .decision(sealed: m)
        }
    }

    var bytes: [UInt8] {
        let v = RemoteProtocol.version
        switch self {
        case .invite(let sid, let share, let commitment): return [v, Kind.invite.rawValue] + sid + share + commitment
        case .accept(let share, let tag, let box): return [v, Kind.accept.rawValue] + share + tag + box
        case .reply(let tag, let box): return [v, Kind.reply.rawValue] + tag + box
        case .decision(let sealed): return sealed
        }
    }
}

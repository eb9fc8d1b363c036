import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// The messages of Online Verify (docs/PROTOCOL.md 11.2) and the frames of
/// Security PIN Update (10.3), parsed into typed values. Every byte offset
/// of these messages is in this file; the machines see only the values.
///
/// Each message is `version || type || body`. A sealed body (PROOF, NEW,
/// DONE) stays whole here, header included, because its AEAD binds the
/// header: the machine opens it with its key and parses the plaintext with
/// the `…Plaintext` types below.

/// An Online Verify message.
enum OnlineVerifyMessage: Equatable {
    /// SHA-256 of the initiator's key and challenge (32 bytes).
    case commit(hash: [UInt8])
    /// An ephemeral X25519 public key and a 32-byte challenge, and a bound
    /// session's 32-byte `bind` (11.4), nil for an unbound one.
    case key(ephemeralKey: [UInt8], challenge: [UInt8], bind: [UInt8]?)
    /// The sealed PROOF frame, whole.
    case proof(sealed: [UInt8])

    enum Kind: UInt8, CustomStringConvertible {
        case commit = 1
        case key = 2
        case proof = 3

        var description: String {
            switch self {
            case .commit: "COMMIT"
            case .key: "KEY"
            case .proof: "PROOF"
            }
        }
    }

    var kind: Kind {
        switch self {
        case .commit: .commit
        case .key: .key
        case .proof: .proof
        }
    }

    /// `.malformedMessage` for anything but a message of this version, a
    /// known type and that type's length.
    init(parsing m: [UInt8]) throws {
        guard m.count >= 2, m[0] == SessionFrames.version, let kind = Kind(rawValue: m[1]) else {
            throw ItsMeError(.malformedMessage, "not an Online Verify message of a known version and type")
        }
        let body = Array(m[2...])
        switch kind {
        case .commit:
            guard body.count == 32 else { throw ItsMeError(.malformedMessage, "a COMMIT message is 34 bytes") }
            self = .commit(hash: body)
        case .key:
            guard body.count == 64 || body.count == 96 else {
                throw ItsMeError(.malformedMessage, "a KEY message is 66 bytes, or 98 in a session bound to a call")
            }
            self = .key(
                ephemeralKey: Array(body[0..<32]), challenge: Array(body[32..<64]), bind: body.count == 96 ? Array(body[64...]) : nil)
        case .proof:
            guard OnlineVerifyProof.plaintextCounts.contains(body.count - AEAD.tagCount) else {
                throw ItsMeError(.malformedMessage, "a PROOF message is 82 bytes, or 114 with a profile reference")
            }
            self = .proof(sealed: m)
        }
    }

    /// The message as sent (a PROOF is sealed by the machine, which passes
    /// the frame whole).
    var bytes: [UInt8] {
        switch self {
        case .commit(let hash): [SessionFrames.version, Kind.commit.rawValue] + hash
        case .key(let key, let challenge, let bind): [SessionFrames.version, Kind.key.rawValue] + key + challenge + (bind ?? [])
        case .proof(let sealed): sealed
        }
    }
}

/// The plaintext of a PROOF: the proof that the sender holds the seed, its
/// device tag, and optionally its profile reference (PROTOCOL.md 18.3).
struct OnlineVerifyProof {
    static let plaintextCounts = [64, 64 + ProfileRecord.referenceCount]

    let proof: [UInt8]
    let deviceTag: [UInt8]
    let profileReference: SecretBox?

    init(proof: [UInt8], deviceTag: [UInt8], profileReference: SecretBox?) {
        self.proof = proof
        self.deviceTag = deviceTag
        self.profileReference = profileReference
    }

    init(parsing plain: [UInt8]) throws {
        guard Self.plaintextCounts.contains(plain.count) else {
            throw ItsMeError(.malformedMessage, "a PROOF carries 64 bytes, or 96 with a profile reference")
        }
        proof = Array(plain[0..<32])
        deviceTag = Array(plain[32..<64])
        profileReference = plain.count > 64
            ? try plain.withUnsafeBytes { try SecretBox(copying: UnsafeRawBufferPointer(rebasing: $0[64...])) } : nil
    }

    /// The plaintext; wipe it after sealing.
    var plaintext: [UInt8] {
        var out = proof + deviceTag
        profileReference?.withBytes { out += $0 }
        return out
    }
}

/// A Security PIN Update frame.
enum PinUpdateFrame: Equatable {
    /// An ephemeral X25519 public key.
    case key(ephemeralKey: [UInt8])
    /// The sealed NEW frame, whole: the sender's new device secret and its
    /// confirmation.
    case new(sealed: [UInt8])
    /// The sealed, empty DONE frame, whole.
    case done(sealed: [UInt8])

    enum Kind: UInt8, CustomStringConvertible {
        case key = 1
        case new = 2
        case done = 3

        var description: String {
            switch self {
            case .key: "KEY"
            case .new: "NEW"
            case .done: "DONE"
            }
        }
    }

    var kind: Kind {
        switch self {
        case .key: .key
        case .new: .new
        case .done: .done
        }
    }

    /// `.malformedMessage` for anything but a frame of this version, a
    /// known type and that type's length.
    init(parsing f: [UInt8]) throws {
        guard f.count >= 2, f[0] == SessionFrames.version, let kind = Kind(rawValue: f[1]) else {
            throw ItsMeError(.malformedMessage, "not a PIN Update frame of a known version and type")
        }
        switch kind {
        case .key:
            guard f.count == 2 + X25519.keyCount else { throw ItsMeError(.malformedMessage, "a KEY frame is 34 bytes") }
            self = .key(ephemeralKey: Array(f[2...]))
        case .new:
            // The length first: a wrong one is malformed, not a failed tag.
            guard f.count == 2 + PinUpdateNew.plaintextCount + AEAD.tagCount else {
                throw ItsMeError(.malformedMessage, "a NEW frame is 66 bytes")
            }
            self = .new(sealed: f)
        case .done:
            guard f.count == 2 + AEAD.tagCount else { throw ItsMeError(.malformedMessage, "a DONE frame is 18 bytes") }
            self = .done(sealed: f)
        }
    }

    var bytes: [UInt8] {
        switch self {
        case .key(let key): [SessionFrames.version, Kind.key.rawValue] + key
        case .new(let sealed), .done(let sealed): sealed
        }
    }
}

/// The plaintext of a NEW frame: a 16-byte device secret, then the
/// sender's 32-byte confirmation.
struct PinUpdateNew {
    static let secretCount = 16
    static let plaintextCount = secretCount + 32

    let secret: SecretRange
    let confirmation: [UInt8]

    init(secret: SecretRange, confirmation: [UInt8]) {
        self.secret = secret
        self.confirmation = confirmation
    }

    init(parsing plain: [UInt8]) throws {
        guard plain.count == Self.plaintextCount else {
            throw ItsMeError(.malformedMessage, "a NEW frame carries \(Self.plaintextCount) bytes")
        }
        secret = SecretRange(
            try plain.withUnsafeBytes { try SecretBox(copying: UnsafeRawBufferPointer(rebasing: $0[0..<Self.secretCount])) })
        confirmation = Array(plain[Self.secretCount...])
    }

    /// The plaintext; wipe it after sealing.
    var plaintext: [UInt8] { secret.withBytes { Array($0) } + confirmation }
}

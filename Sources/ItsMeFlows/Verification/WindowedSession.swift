import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// What Online Verify (docs/PROTOCOL.md section 11) and Security PIN Update
/// (section 10.3) share: two devices that already share a seed meet in the
/// room (or over the Bluetooth link) of a 30-second window, the current one
/// or the one before; each draws an ephemeral X25519 key; the one whose
/// public identity key sorts first is the initiator; the transcript hash and
/// the seed give two direction keys; the session lasts at most `lifetime`
/// seconds from its creation, and a failure is final.
///
/// A value: it reads no store and writes none. The drivers (`OnlineVerify`,
/// `PinUpdate`) read the contact and its seed from the contact store and
/// pass them in; the rules on them (the window, a contact still awaiting
/// the peer) are the session's.
struct WindowedSession {
    /// How long a session may take, from its creation.
    static let lifetime: Int64 = 600

    let contactID: Int64
    let window: Int64
    let createdAt: Int64
    let seed: SecretBox
    let myPID: [UInt8]
    let peerPID: [UInt8]
    let isInitiator: Bool
    let ephemeralSecret: SecretRange
    let ephemeralKey: [UInt8]

    /// A session with `contact` as the store holds it. `ephemeralSecret`
    /// is 32 bytes drawn by the caller (each protocol draws its randomness
    /// in its own order, which the vectors fix). The window must be the
    /// current one or the one before (`.invalidArgument`), and the contact
    /// settled (`.invalidState` while it awaits the peer).
    init(contact: Contact, window: Int64, now: Int64, seed: SecretBox, myPID: [UInt8], ephemeralSecret: SecretRange) throws {
        try VoiceProtocol.checkMeetingWindow(window, now: now)
        try ContactStore.checkSettled(contact)
        let contactID = contact.id
        let peerPID = contact.pid
        guard ephemeralSecret.count == X25519.keyCount else {
            throw ItsMeError(.invalidArgument, "an X25519 secret key is \(X25519.keyCount) bytes")
        }
        self.contactID = contactID
        self.window = window
        self.createdAt = now
        self.seed = seed
        self.myPID = myPID
        self.peerPID = peerPID
        self.isInitiator = myPID.lexicographicallyPrecedes(peerPID)
        self.ephemeralSecret = ephemeralSecret
        self.ephemeralKey = ephemeralSecret.withBytes { X25519.publicKey(secretKey: $0) }
    }

    var role: String { isInitiator ? "initiator" : "responder" }
    var peerRole: String { isInitiator ? "responder" : "initiator" }

    /// `(initiator's, responder's)` of a pair given as (mine, the peer's).
    func ordered<T>(mine: T, peers: T) -> (initiator: T, responder: T) { isInitiator ? (mine, peers) : (peers, mine) }

    /// `.expired` once the session has lasted longer than `lifetime`.
    func checkAlive(now: Int64, _ what: String) throws {
        try UnixTime.check(now)
        if now - createdAt > Self.lifetime {
            throw ItsMeError(.expired, "\(what) took more than \(Self.lifetime) seconds")
        }
    }

    /// The direction keys of `transcriptHash`: salt = HMAC(seed, saltLabel
    /// || hash), then `ExchangeProtocol.directionKeys` under `keyLabel`.
    func keys(transcriptHash: [UInt8], saltLabel: String, keyLabel: String, peerEphemeralKey: [UInt8]) throws -> DirectionKeys {
        let salt = HMACSHA256.mac(key: seed, message: LV.cat(LV.b(saltLabel), transcriptHash))
        var both = try SecretBytes(count: 64)
        try ephemeralSecret.withBytes { secret in
            try both.withMutableBytes { out in
                try SessionFrames.directionKeys(
                    ephemeralSecret: secret, peerEphemeralKey: peerEphemeralKey, salt: salt, label: keyLabel, into: out)
            }
        }
        return try DirectionKeys(both, isInitiator: isInitiator)
    }

    /// HMAC(seed, LV(label) || LV(role) || transcript hash): the proof or
    /// confirmation that a side holds the seed.
    func roleMAC(_ label: String, role: String, transcriptHash: [UInt8]) -> [UInt8] {
        HMACSHA256.mac(key: seed, message: LV.cat(LV.b(label), LV.b(role), transcriptHash))
    }
}

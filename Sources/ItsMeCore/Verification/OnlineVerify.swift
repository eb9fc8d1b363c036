/// Online Verify (docs/PROTOCOL.md section 11): the two devices prove to
/// each other, through a two-party relay room, that each holds the seed,
/// and check each other's device tag inside the encrypted session. A
/// sans-I/O state machine: the host carries the messages.
///
/// A failure is final. Not thread-safe: serialise calls (the C layer does).
public final class OnlineVerify: CustomStringConvertible {
    public enum State: UInt32, Sendable {
        /// Messages are still to be exchanged.
        case running = 1
        /// Both proofs checked: show the SAS for the two to read aloud.
        case compareSAS = 2
        case confirmed = 3
        case rejected = 4
        case failed = 5
    }

    enum MessageType: UInt8 {
        case commit = 1
        case key = 2
        case proof = 3
    }

    /// How long a session may take, from its creation.
    public static let lifetime: Int64 = 600

    public let contactID: Int64
    public let window: Int64
    /// 16 bytes; the relay room's name is its lowercase hex.
    public let roomID: [UInt8]
    public let isInitiator: Bool
    public let createdAt: Int64
    public private(set) var state: State = .running
    public private(set) var failure: ItsMeError?
    public private(set) var sas: ShortCode?
    /// The outcome of the device tag check, known once proofs are checked.
    public private(set) var outcome: VoiceSession.Outcome?

    private let storeID: [UInt8]
    private let seed: SecretBytes
    /// ephemeral secret (32) | k_I (32) | k_R (32)
    private var secrets: SecretBytes
    private let myDevice: SecretBytes
    private let theirDevice: SecretBytes
    private let theirPending: SecretBytes
    private let theirPrevious: SecretBytes
    private var peerUsesNewSecret = false, peerUsesPreviousSecret = false
    private let myPID: [UInt8], peerPID: [UInt8]
    private let ephemeralKey: [UInt8]
    private let challenge: [UInt8]
    private var commitMine: [UInt8]?, commitPeer: [UInt8]?
    private var keyMine: [UInt8]?, keyPeer: [UInt8]?
    private var th: [UInt8]?
    private var proofReceived = false
    private var outbox: [[UInt8]] = []
    /// Profile references (PROTOCOL.md 18.3): ours to send in the PROOF,
    /// the peer's as received in its PROOF.
    private var myProfile: SecretBytes?
    private var peerProfile: SecretBytes?

    public var roomName: String { Hex.encodeUpper(roomID).lowercased() }

    public static func roomID<S: ByteView & ~Copyable>(seed: borrowing S, window: Int64) throws -> [UInt8] {
        Array(HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-room-id-v1"), try VoiceProtocol.windowBytes(window))).prefix(16))
    }

    /// A session with contact `contactID` in the room of `window`, which
    /// must be the current window or the one before (a host that finds no
    /// peer in the current room tries the previous one).
    public init<R: RandomSource>(store: ContactStore, contactID: Int64, window: Int64, now: Int64, random: inout R) throws {
        try VoiceProtocol.checkMeetingWindow(window, now: now)
        let contact = try store.contact(id: contactID)
        try ContactStore.checkSettled(contact)
        self.contactID = contactID
        self.window = window
        self.createdAt = now
        storeID = store.storeID
        seed = try store.seed(id: contactID)
        myPID = store.ownerPublicKey
        peerPID = contact.pid
        isInitiator = myPID.lexicographicallyPrecedes(peerPID)
        roomID = try Self.roomID(seed: seed, window: window)
        let tagSecrets = try store.tagSecrets(id: contactID)
        myDevice = tagSecrets.speaking
        theirDevice = tagSecrets.theirs
        theirPending = tagSecrets.theirsPending
        theirPrevious = tagSecrets.theirsPrevious
        var s = try SecretBytes(count: 96)
        s.withMutableBytes { random.fill(UnsafeMutableRawBufferPointer(rebasing: $0[0..<32])) }
        secrets = s
        ephemeralKey = secrets.withBytes { X25519.publicKey(secretKey: UnsafeRawBufferPointer(rebasing: $0[0..<32])) }
        challenge = random.bytes(32)
        if isInitiator {
            let c = Self.frame(.commit, SHA256.hash(LV.cat(LV.b("itsme-ov-commit-v1"), ephemeralKey, challenge)))
            commitMine = c
            outbox.append(c)
        }
    }

    public var description: String { "OnlineVerify(contact: \(contactID), state: \(state))" }

    static func frame(_ type: MessageType, _ body: [UInt8]) -> [UInt8] { [ExchangeProtocol.version, type.rawValue] + body }

    /// The next message to send, left in the queue; nil if none.
    public func peekOutgoing() -> [UInt8]? {
        guard state != .failed else { return nil }
        return outbox.first
    }

    /// Removes the message `peekOutgoing` gave (it was handed to the relay).
    public func markSent() {
        if !outbox.isEmpty { outbox.removeFirst() }
    }

    /// The next message to send, removed from the queue; nil if none.
    public func takeOutgoing() -> [UInt8]? {
        defer { markSent() }
        return peekOutgoing()
    }

    private func fail(_ error: ItsMeError) {
        state = .failed
        failure = error
        secrets.withMutableBytes { wipe($0) }
        myProfile = nil
        peerProfile = nil
        outbox.removeAll()
    }

    private func checkUsable(now: Int64) throws {
        try UnixTime.check(now)
        if state == .failed {
            throw ItsMeError(.invalidState, "the session has failed (\(failure?.message ?? "")); start a new one")
        }
        if now - createdAt > Self.lifetime, state == .running || state == .compareSAS {
            let e = ItsMeError(.expired, "the session took more than \(Self.lifetime) seconds")
            fail(e)
            throw e
        }
    }

    /// Feeds one message from the peer.
    public func receive(_ message: [UInt8], now: Int64) throws {
        try checkUsable(now: now)
        guard state == .running else { throw ItsMeError(.invalidState, "the messages are complete (\(state))") }
        do { try handle(message) } catch let e as ItsMeError {
            fail(e)
            throw e
        }
    }

    private func handle(_ m: [UInt8]) throws {
        guard m.count >= 2, m[0] == ExchangeProtocol.version, let type = MessageType(rawValue: m[1]) else {
            throw ItsMeError(.malformedMessage, "not an Online Verify message of a known version and type")
        }
        func outOfOrder() -> ItsMeError { ItsMeError(.malformedMessage, "Online Verify \(type) message out of order") }
        switch type {
        case .commit:
            guard !isInitiator, commitPeer == nil else { throw outOfOrder() }
            guard m.count == 2 + 32 else { throw ItsMeError(.malformedMessage, "a COMMIT message is 34 bytes") }
            commitPeer = m
            keyMine = Self.frame(.key, ephemeralKey + challenge)
            outbox.append(keyMine!)
        case .key:
            guard keyPeer == nil, isInitiator ? commitMine != nil : keyMine != nil else { throw outOfOrder() }
            guard m.count == 2 + 64 else { throw ItsMeError(.malformedMessage, "a KEY message is 66 bytes") }
            let peerEphemeral = Array(m[2..<34]), peerChallenge = Array(m[34..<66])
            // Authentication (the commitment) before contents (a reflection),
            // as PROTOCOL.md section 1 orders the checks.
            if !isInitiator {
                let expected = SHA256.hash(LV.cat(LV.b("itsme-ov-commit-v1"), peerEphemeral, peerChallenge))
                guard ConstantTime.equal(expected, Array(commitPeer![2...])) else {
                    throw ItsMeError(.authenticationFailed, "the peer's key does not match its commitment")
                }
            }
            guard peerEphemeral != ephemeralKey, peerChallenge != challenge else {
                throw ItsMeError(.invalidKey, "the peer's key or challenge equals ours (a reflected message)")
            }
            keyPeer = m
            if isInitiator {
                keyMine = Self.frame(.key, ephemeralKey + challenge)
                outbox.append(keyMine!)
            }
            try deriveKeys(peerEphemeral: peerEphemeral)
            outbox.append(try proofMessage())
        case .proof:
            guard th != nil, !proofReceived else { throw outOfOrder() }
            try checkProof(m)
            proofReceived = true
            sas = try ShortCode.sas(seed: seed, transcriptHash: th!)
            state = .compareSAS
        }
    }

    private var role: String { isInitiator ? "initiator" : "responder" }
    private var peerRole: String { isInitiator ? "responder" : "initiator" }

    private func deriveKeys(peerEphemeral: [UInt8]) throws {
        let (commit, keyR, keyI) = isInitiator ? (commitMine!, keyPeer!, keyMine!) : (commitPeer!, keyMine!, keyPeer!)
        let (pidI, pidR) = isInitiator ? (myPID, peerPID) : (peerPID, myPID)
        let hash = SHA256.hash(
            LV.cat(LV.b("itsme-online-verify-v1"), roomID, VoiceProtocol.u64(window), pidI, pidR, commit, keyR, keyI))
        th = hash
        let salt = HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-ov-salt-v1"), hash))
        try secrets.withMutableBytes { s in
            try ExchangeProtocol.directionKeys(
                ephemeralSecret: UnsafeRawBufferPointer(rebasing: s[0..<32]), peerEphemeralKey: peerEphemeral, salt: salt,
                label: "itsme-ov-key-v1", into: UnsafeMutableRawBufferPointer(rebasing: s[32..<96]))
        }
    }

    private func proof(_ role: String) -> [UInt8] {
        HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-ov-proof-v1"), LV.b(role), th!))
    }

    /// dtag of section 11.3 under the tag key `t`.
    private func deviceTag(key t: UnsafeRawBufferPointer, pid: [UInt8], secret: borrowing SecretBytes) -> [UInt8] {
        var message = secret.withBytes { LV.cat(LV.b("itsme-ov-device-v1"), pid, th!, Array($0)) }
        defer { wipe(&message) }
        return HMACSHA256.mac(key: t, message: message)
    }

    /// The key for messages sent by the initiator or the responder.
    private func withKey<R>(fromInitiator: Bool, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try secrets.withBytes { try body(UnsafeRawBufferPointer(rebasing: $0[fromInitiator ? 32..<64 : 64..<96])) }
    }

    /// Sends the reference of our profile record (record ID || record key,
    /// PROTOCOL.md 18.3) inside our PROOF, encrypted for the peer. Only
    /// before the PROOF is made (before the peer's KEY is received); again
    /// replaces it.
    public func shareProfile<Ref: ByteView & ~Copyable>(reference: borrowing Ref) throws {
        guard reference.withBytes({ $0.count }) == ProfileRecord.referenceCount else {
            throw ItsMeError(.invalidArgument, "a profile reference is \(ProfileRecord.referenceCount) bytes")
        }
        guard state == .running, th == nil else {
            throw ItsMeError(.invalidState, "a profile reference must be shared before the PROOF is made (the session is \(state))")
        }
        myProfile = try SecretBytes(copying: reference)
    }

    /// The profile reference the peer sent in its PROOF, once the person has
    /// confirmed the SAS; `.notFound` if the peer sent none.
    public func peerProfileReference() throws -> SecretBytes {
        guard state == .confirmed else {
            throw ItsMeError(.invalidState, "the peer's profile is offered once the SAS is confirmed (the session is \(state))")
        }
        guard let reference = try peerProfile?.copy() else {
            throw ItsMeError(.notFound, "the peer shared no profile in this session")
        }
        return reference
    }

    private func proofMessage() throws -> [UInt8] {
        var plain = proof(role) + (try VoiceProtocol.withTagKey(seed: seed) { deviceTag(key: $0, pid: myPID, secret: myDevice) })
        if var reference = myProfile?.withBytes({ Array($0) }) {
            plain += reference
            wipe(&reference)
        }
        defer { wipe(&plain) }
        return try withKey(fromInitiator: isInitiator) {
            try ExchangeProtocol.sealFrame(type: MessageType.proof.rawValue, key: $0, counter: 0, plain)
        }
    }

    private func checkProof(_ m: [UInt8]) throws {
        let plainCounts = [64, 64 + ProfileRecord.referenceCount]
        guard plainCounts.contains(m.count - 2 - AEAD.tagCount) else {
            throw ItsMeError(.malformedMessage, "a PROOF message is 82 bytes, or 114 with a profile reference")
        }
        var plain = try withKey(fromInitiator: !isInitiator) {
            try ExchangeProtocol.openFrame(m, key: $0, counter: 0, what: "the peer's PROOF")
        }
        defer { wipe(&plain) }
        guard ConstantTime.equal(Array(plain[0..<32]), proof(peerRole)) else {
            throw ItsMeError(.authenticationFailed, "the peer's proof is wrong: it does not hold the shared secret")
        }
        let heard = Array(plain[32..<64])
        let (matchesOld, matchesNew, matchesPrevious) = try VoiceProtocol.withTagKey(seed: seed) { t in
            func matches(_ secret: borrowing SecretBytes) -> Bool {
                secret.count > 0 && ConstantTime.equal(heard, deviceTag(key: t, pid: peerPID, secret: secret))
            }
            return (matches(theirDevice), matches(theirPending), matches(theirPrevious))
        }
        // The current secret wins a tie, then the previous, then the pending.
        peerUsesPreviousSecret = matchesPrevious && !matchesOld
        peerUsesNewSecret = matchesNew && !matchesOld && !matchesPrevious
        if matchesOld || matchesNew || matchesPrevious {
            outcome = .verified
        } else {
            outcome = theirDevice.count == 0 ? .verifiedTagUnchecked : .deviceChanged
        }
        if plain.count > 64 { peerProfile = try SecretBytes(copying: Array(plain[64...])) }
    }

    /// The two people read the SAS aloud and it matched: records the
    /// outcome on the contact (as voice verification does, PROTOCOL.md
    /// 10.1) and returns it.
    @discardableResult
    public func confirm(store: ContactStore, now: Int64) throws -> VoiceSession.Outcome {
        guard store.storeID == storeID else { throw ItsMeError(.invalidArgument, "this session belongs to another contact store") }
        try checkUsable(now: now)
        guard state == .compareSAS, let outcome else { throw ItsMeError(.invalidState, "there is no SAS to confirm (\(state))") }
        switch outcome {
        case .verified, .verifiedTagUnchecked:
            if try store.contact(id: contactID).state != .degraded {
                try store.setState(id: contactID, .verified, acknowledged: false, now: now)
            }
        case .deviceChanged:
            try store.setState(id: contactID, .degraded, acknowledged: false, now: now)
        case .mismatch:
            break
        }
        if peerUsesNewSecret {
            try store.finalizePendingDeviceSecrets(id: contactID)
            try store.setState(id: contactID, .verified, acknowledged: false, now: now)
        } else if peerUsesPreviousSecret {
            try store.adoptPreviousDeviceSecret(id: contactID)
            try store.setState(id: contactID, .verified, acknowledged: false, now: now)
        }
        state = .confirmed
        return outcome
    }

    /// The SAS differed: nothing is recorded.
    public func reject() throws {
        guard state == .compareSAS || state == .running else { throw ItsMeError(.invalidState, "the session is \(state)") }
        state = .rejected
    }
}

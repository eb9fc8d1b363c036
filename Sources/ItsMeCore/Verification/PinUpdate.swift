/// Security PIN Update (docs/PROTOCOL.md section 10.3): two people together
/// replace the device secrets of their contact with fresh ones over the
/// host's Bluetooth, restoring a degraded contact. A sans-I/O state
/// machine; it writes the new secrets to the store as the protocol
/// requires (pending, then committed), so an interruption at any point
/// leaves both sides able to verify.
///
/// A failure is final. Not thread-safe: serialise calls (the C layer does).
public final class PinUpdate: CustomStringConvertible {
    public enum State: UInt32, Sendable {
        case running = 1
        /// This side has committed its new secret; nothing more to do
        /// (the initiator may still have DONE to send).
        case done = 2
        case failed = 3
    }

    enum FrameType: UInt8 {
        case key = 1
        case new = 2
        case done = 3
    }

    public static let lifetime: Int64 = 600

    public let contactID: Int64
    public let window: Int64
    public let sessionCode: ShortCode
    public let isInitiator: Bool
    public let createdAt: Int64
    public private(set) var state: State = .running
    public private(set) var failure: ItsMeError?

    private let store: ContactStore
    private let seed: SecretBytes
    /// ephemeral secret (32) | new device secret (16) | k_I (32) | k_R (32)
    private var secrets: SecretBytes
    private let myPID: [UInt8], peerPID: [UInt8]
    private let ephemeralKey: [UInt8]
    private var keyMine: [UInt8], keyPeer: [UInt8]?
    private var th: [UInt8]?
    private var newReceived = false, doneReceived = false, newSent = false
    private var outbox: [[UInt8]] = []

    /// The session code both devices show, from the seed and the window.
    public static func sessionCode<S: ByteView & ~Copyable>(seed: borrowing S, window: Int64) throws -> ShortCode {
        let v = VoiceProtocol.prefix64(key: seed, LV.cat(LV.b("itsme-pin-update-code-v1"), try VoiceProtocol.windowBytes(window)))
        return ShortCode(value: UInt32(v % UInt64(ShortCode.valueCount)))!
    }

    /// An update with contact `contactID` in `window` (the current one or
    /// the one before, as for Online Verify).
    public init<R: RandomSource>(store: ContactStore, contactID: Int64, window: Int64, now: Int64, random: inout R) throws {
        try VoiceProtocol.checkMeetingWindow(window, now: now)
        let contact = try store.contact(id: contactID)
        try ContactStore.checkSettled(contact)
        self.store = store
        self.contactID = contactID
        self.window = window
        self.createdAt = now
        seed = try store.seed(id: contactID)
        myPID = store.ownerPublicKey
        peerPID = contact.pid
        isInitiator = myPID.lexicographicallyPrecedes(peerPID)
        sessionCode = try Self.sessionCode(seed: seed, window: window)
        var s = try SecretBytes(count: 112)
        s.withMutableBytes { random.fill(UnsafeMutableRawBufferPointer(rebasing: $0[0..<48])) }
        secrets = s
        ephemeralKey = secrets.withBytes { X25519.publicKey(secretKey: UnsafeRawBufferPointer(rebasing: $0[0..<32])) }
        keyMine = [ExchangeProtocol.version, FrameType.key.rawValue] + ephemeralKey
        outbox.append(keyMine)
    }

    public var description: String { "PinUpdate(contact: \(contactID), state: \(state))" }

    public func peekOutgoing() -> [UInt8]? { state == .failed ? nil : outbox.first }
    public func markSent() { if !outbox.isEmpty { outbox.removeFirst() } }

    private func fail(_ e: ItsMeError) {
        state = .failed
        failure = e
        secrets.withMutableBytes { wipe($0) }
        outbox.removeAll()
    }

    /// Feeds one frame from the peer. Store writes happen here, in the
    /// order PROTOCOL.md 10.3 gives.
    public func receive(_ frame: [UInt8], now: Int64) throws {
        try UnixTime.check(now)
        if state == .failed {
            throw ItsMeError(.invalidState, "the update has failed (\(failure?.message ?? "")); start a new one")
        }
        guard state == .running else { throw ItsMeError(.invalidState, "the update is complete on this side") }
        if now - createdAt > Self.lifetime {
            let e = ItsMeError(.expired, "the update took more than \(Self.lifetime) seconds")
            fail(e)
            throw e
        }
        do { try handle(frame, now: now) } catch let e as ItsMeError {
            fail(e)
            throw e
        }
    }

    private var role: String { isInitiator ? "initiator" : "responder" }
    private var peerRole: String { isInitiator ? "responder" : "initiator" }

    private func handle(_ f: [UInt8], now: Int64) throws {
        guard f.count >= 2, f[0] == ExchangeProtocol.version, let type = FrameType(rawValue: f[1]) else {
            throw ItsMeError(.malformedMessage, "not a PIN Update frame of a known version and type")
        }
        func outOfOrder() -> ItsMeError { ItsMeError(.malformedMessage, "PIN Update \(type) frame out of order") }
        switch type {
        case .key:
            guard keyPeer == nil else { throw outOfOrder() }
            guard f.count == 34 else { throw ItsMeError(.malformedMessage, "a KEY frame is 34 bytes") }
            guard Array(f[2...]) != ephemeralKey else { throw ItsMeError(.invalidKey, "the peer's key equals ours (reflected)") }
            keyPeer = f
            try deriveKeys()
            if isInitiator { try sendNew() }
        case .new:
            guard th != nil, !newReceived, isInitiator ? newSent : true else { throw outOfOrder() }
            // The length first: a wrong one is malformed, not a failed tag.
            guard f.count == 2 + 16 + 32 + AEAD.tagCount else { throw ItsMeError(.malformedMessage, "a NEW frame is 66 bytes") }
            var plain = try open(f, counter: 0)
            defer { wipe(&plain) }
            guard plain.count == 16 + 32 else { throw ItsMeError(.malformedMessage, "a NEW frame carries 48 bytes") }
            guard ConstantTime.equal(Array(plain[16...]), confirm(peerRole)) else {
                throw ItsMeError(.authenticationFailed, "the peer's confirmation is wrong: it does not hold the shared secret")
            }
            newReceived = true
            let theirs = try SecretBytes(copying: plain[0..<16])
            let mine = try secrets.withBytes { try SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[32..<48])) }
            if isInitiator {
                // Both sides hold both new secrets now: commit, then DONE.
                try store.setPendingDeviceSecrets(id: contactID, mine: mine, theirs: theirs, committed: true)
                try store.setState(id: contactID, .verified, acknowledged: false, now: now)
                outbox.append(try seal(.done, counter: 1, []))
                state = .done
            } else {
                // Stored as pending before this side's NEW goes out.
                try store.setPendingDeviceSecrets(id: contactID, mine: mine, theirs: theirs, committed: false)
                try sendNew()
            }
        case .done:
            guard !isInitiator, newSent, !doneReceived else { throw outOfOrder() }
            guard f.count == 2 + AEAD.tagCount else { throw ItsMeError(.malformedMessage, "a DONE frame is 18 bytes") }
            let plain = try open(f, counter: 1)
            guard plain.isEmpty else { throw ItsMeError(.malformedMessage, "a DONE frame carries nothing") }
            doneReceived = true
            try store.commitPendingDeviceSecrets(id: contactID)
            try store.setState(id: contactID, .verified, acknowledged: false, now: now)
            state = .done
        }
    }

    private func deriveKeys() throws {
        let (ki, kr) = isInitiator ? (keyMine, keyPeer!) : (keyPeer!, keyMine)
        let (pi, pr) = isInitiator ? (myPID, peerPID) : (peerPID, myPID)
        let hash = SHA256.hash(
            LV.cat(LV.b("itsme-pin-update-v1"), LV.b(sessionCode.text), VoiceProtocol.u64(window), pi, pr, ki, kr))
        th = hash
        let salt = HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-pin-update-salt-v1"), hash))
        let peer = Array(keyPeer![2...])
        try secrets.withMutableBytes { s in
            try ExchangeProtocol.directionKeys(
                ephemeralSecret: UnsafeRawBufferPointer(rebasing: s[0..<32]), peerEphemeralKey: peer, salt: salt,
                label: "itsme-pin-update-key-v1", into: UnsafeMutableRawBufferPointer(rebasing: s[48..<112]))
        }
    }

    private func confirm(_ role: String) -> [UInt8] {
        HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-pin-update-confirm-v1"), LV.b(role), th!))
    }

    /// The key for frames sent by the initiator or the responder.
    private func withKey<R>(fromInitiator: Bool, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try secrets.withBytes { try body(UnsafeRawBufferPointer(rebasing: $0[fromInitiator ? 48..<80 : 80..<112])) }
    }

    private func seal(_ type: FrameType, counter: UInt64, _ plain: [UInt8]) throws -> [UInt8] {
        try withKey(fromInitiator: isInitiator) {
            try ExchangeProtocol.sealFrame(type: type.rawValue, key: $0, counter: counter, plain)
        }
    }

    private func open(_ f: [UInt8], counter: UInt64) throws -> [UInt8] {
        try withKey(fromInitiator: !isInitiator) {
            try ExchangeProtocol.openFrame(f, key: $0, counter: counter, what: "a PIN Update frame")
        }
    }

    private func sendNew() throws {
        var plain = secrets.withBytes { Array($0[32..<48]) } + confirm(role)
        defer { wipe(&plain) }
        outbox.append(try seal(.new, counter: 0, plain))
        newSent = true
    }
}

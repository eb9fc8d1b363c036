/// A contact exchange, in person (QR or Bluetooth) or at a distance
/// (invite or real-time, through the relay), as a sans-I/O state machine:
/// peer bytes and the current time in, bytes to send and a state out. It
/// never touches a socket, a radio or a camera; saving the result is a
/// separate step against a `ContactStore`. docs/PROTOCOL.md sections 5 to 8
/// and 16 define what it says.
///
/// A failure is final: once `receive` has rejected a peer message, every
/// later call fails with `.invalidState`. Calls in the wrong order also get
/// `.invalidState` but do not end the exchange.
///
/// Not thread-safe: serialise calls on one instance (the C layer does).
public final class Exchange: CustomStringConvertible {
    public enum Method: UInt32, Sendable {
        case qr = 0
        case bluetooth = 1
        /// At a distance, through the relay's invite mailbox (PROTOCOL.md 16).
        case invite = 2
        /// At a distance, through a relay room while both are on a call.
        case realtime = 3

        var contactMethod: Contact.ExchangeMethod { Contact.ExchangeMethod(rawValue: UInt8(rawValue))! }
        var isRemote: Bool { self == .invite || self == .realtime }
    }

    public enum State: UInt32, Sendable {
        /// Waiting for the peer's payload (QR), frames (Bluetooth) or
        /// messages (invite, real-time).
        case awaitingPeer = 1
        /// The SAS is ready for the two people to compare.
        case compareSAS = 2
        /// A source-format (v5) payload was read: no SAS exists; `save`
        /// stores the contact flagged unauthenticated.
        case imported = 3
        /// Both decisions are in and applied: the contact is verified.
        case confirmed = 4
        /// This side or the peer rejected the SAS, or this side gave up
        /// waiting for the peer's decision: nothing was kept.
        case rejected = 5
        case failed = 6
        /// This side confirmed the SAS; the peer's decision has not arrived
        /// (Bluetooth, invite, real-time: PROTOCOL.md 8.1). A new contact is
        /// stored awaiting the peer; a known one is unchanged. When the
        /// peer's decision arrives (`.peerConfirmed` or `.peerRejected`),
        /// `settle` applies it.
        case awaitingDecision = 7
    }

    public struct Flags: OptionSet, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// The peer sent the source format: nothing, its name included, is
        /// authenticated.
        public static let unauthenticated = Flags(rawValue: 1)
        /// A contact with the peer's identity key is already stored; it is
        /// replaced only when the new SAS is confirmed (set by `save`).
        public static let knownContact = Flags(rawValue: 2)
        /// The peer's authenticated confirmation of the SAS arrived
        /// (Bluetooth, invite, real-time).
        public static let peerConfirmed = Flags(rawValue: 4)
        /// The peer rejected the SAS and will not keep the contact.
        public static let peerRejected = Flags(rawValue: 8)
    }

    /// What the peer sent, once received and checked.
    public struct Peer: Sendable {
        public let name: String
        public let fingerprint: String
        /// nil for a source-format peer.
        public let publicKey: [UInt8]?
    }

    /// Pending exchanges expire this long after they began.
    public static let lifetime: Int64 = 24 * 3600

    public let method: Method
    public let createdAt: Int64
    public private(set) var state: State = .awaitingPeer
    public private(set) var flags: Flags = []
    public private(set) var sas: ShortCode?
    public private(set) var peer: Peer?
    /// Bluetooth only: the code the two devices use to find each other.
    public let sessionCode: ShortCode?
    /// Why the exchange failed, once it has.
    public private(set) var failure: ItsMeError?

    let identity: Identity
    let ephemeralKey: [UInt8]
    /// ephemeral secret (32) | our device secret (16) | seed (32) | key_I | key_R (Bluetooth)
    /// | PAKE scalar (32) | kc_I | kc_R | kp_I | kp_R | kd_I | kd_R (invite, real-time)
    private var secrets: SecretBytes
    private static let ephemeralRange = 0..<32, deviceRange = 32..<48, seedRange = 48..<80, keysRange = 80..<144
    private static let scalarRange = 144..<176, remoteKeysRange = 176..<368

    private var peerDeviceSecret: [UInt8] = []
    /// Every peer message accepted, in order: a sealed exchange is restored
    /// by replaying them.
    private var accepted: [[UInt8]] = []
    private var outbox: [[UInt8]] = []
    private var taken = 0
    private var savedContactID: Int64?
    /// The id of the contact `save` stored or found, once saved.
    public var contactID: Int64? { savedContactID }
    /// The store `save` wrote to: confirm and reject must use the same one.
    private var savedStoreID: [UInt8]?
    private var existingContact = false

    // QR
    private var ownPayload: [UInt8] = []

    // Bluetooth
    private var isInitiator = false
    private var helloMine: [UInt8] = [], helloPeer: [UInt8]?
    private var keyMine: [UInt8] = [], keyPeer: [UInt8]?
    private var plaintextMine: [UInt8] = [], plaintextPeer: [UInt8]?

    // Invite and real-time (the inviter is the Bluetooth fields' initiator)
    /// The codes the inviter shows and the invitee types.
    public private(set) var inviteCode: RemoteCode?
    public private(set) var encryptionCode: RemoteCode?
    private var sid: [UInt8] = []
    private var inviteMessage: [UInt8]?, acceptMessage: [UInt8]?
    private var pakeShare: [UInt8] = []
    private var tpake: [UInt8] = []
    /// The transcript hash the SAS was derived from (remote: it binds the decisions).
    private var th: [UInt8] = []
    private var sentConfirm = false
    /// This side's decision on the SAS, and the peer's: 0 none, 1 confirmed, 2 rejected.
    private var decision: UInt8 = 0
    private var peerDecision: UInt8 = 0
    /// The inviter's confirmation through the mailbox, held until the
    /// invitee's decision arrives (16.5): then the invitee, on reading it,
    /// knows both decisions were read and ends the invite.
    private var heldDecision: [UInt8]?

    // MARK: Creation

    private init(
        identity: Identity, method: Method, now: Int64, sessionCode: ShortCode?, secrets: consuming SecretBytes,
        remote: RemoteSetup? = nil
    ) throws {
        self.identity = identity
        self.method = method
        self.createdAt = now
        self.sessionCode = sessionCode
        self.ephemeralKey = secrets.withBytes { X25519.publicKey(secretKey: UnsafeRawBufferPointer(rebasing: $0[Self.ephemeralRange])) }
        self.secrets = secrets
        if let remote {
            isInitiator = remote.inviter
            inviteCode = remote.inviteCode
            encryptionCode = remote.encryptionCode
            sid = remote.sid
        }
        switch method {
        case .qr:
            ownPayload = try self.secrets.withBytes { s in
                try ExchangeProtocol.buildQRPayload(
                    identity: identity, ephemeralKey: ephemeralKey,
                    deviceSecret: UnsafeRawBufferPointer(rebasing: s[Self.deviceRange]))
            }
        case .bluetooth:
            let commitment = self.secrets.withBytes { s in
                ExchangeProtocol.commitment(
                    identityKey: identity.publicKey, ephemeralKey: ephemeralKey, name: Array(identity.name.utf8),
                    deviceSecret: UnsafeRawBufferPointer(rebasing: s[Self.deviceRange]))
            }
            helloMine = [ExchangeProtocol.version, ExchangeProtocol.FrameType.hello.rawValue]
                + Hex.decode(identity.fingerprint)! + commitment
            outbox.append(helloMine)
        case .invite, .realtime:
            if isInitiator { try startInvite() }
        }
    }

    private static func drawSecrets<R: RandomSource>(_ rng: inout R) throws -> SecretBytes {
        var s = try SecretBytes(count: remoteKeysRange.upperBound)
        s.withMutableBytes { rng.fill(UnsafeMutableRawBufferPointer(rebasing: $0[0..<deviceRange.upperBound])) }
        return s
    }

    /// Starts a QR exchange: show `outgoing()` as a QR code, scan the
    /// peer's and pass its text to `receive`.
    public static func qr<R: RandomSource>(identity: Identity, now: Int64, random: inout R) throws -> Exchange {
        try UnixTime.check(now)
        return try Exchange(identity: identity, method: .qr, now: now, sessionCode: nil, secrets: drawSecrets(&random))
    }

    /// Starts a Bluetooth exchange. Give the session code the peer shows,
    /// or nil to draw one for this device to show.
    public static func bluetooth<R: RandomSource>(
        identity: Identity, sessionCode: ShortCode?, now: Int64, random: inout R
    ) throws -> Exchange {
        try UnixTime.check(now)
        let secrets = try drawSecrets(&random)
        let code = sessionCode ?? ShortCode.random(using: &random)
        return try Exchange(identity: identity, method: .bluetooth, now: now, sessionCode: code, secrets: secrets)
    }

    public var description: String { "Exchange(\(method), state: \(state))" }

    deinit {
        // The guarded secrets wipe themselves; these copies carry device
        // secrets too.
        wipe(&peerDeviceSecret)
        wipe(&plaintextMine)
        if plaintextPeer != nil { wipe(&plaintextPeer!) }
        wipe(&ownPayload)
    }

    // MARK: Bytes out

    /// The next bytes to send without removing them: for QR the payload
    /// text (ASCII, shown for as long as the exchange is pending), for
    /// Bluetooth the next frame. nil when there is nothing to send.
    public func peekOutgoing() -> [UInt8]? {
        guard state != .failed else { return nil }
        switch method {
        case .qr: return state == .awaitingPeer || state == .compareSAS ? Array(outgoingText.utf8) : nil
        case .bluetooth, .invite, .realtime: return taken < outbox.count ? outbox[taken] : nil
        }
    }

    /// Marks the bytes `peekOutgoing` gave as handed to the transport (QR:
    /// no effect, the code stays on screen).
    public func markSent() {
        if method != .qr, taken < outbox.count { taken += 1 }
    }

    /// Our QR payload text.
    public var outgoingText: String { ExchangeProtocol.qrText(ownPayload) }

    // MARK: Bytes in

    /// Feeds the peer's bytes: the scanned QR text, or one Bluetooth frame.
    public func receive(_ bytes: [UInt8], now: Int64) throws {
        try checkUsable(now: now)
        if method == .qr {
            guard state == .awaitingPeer else {
                throw ItsMeError(.invalidState, "the peer's payload was already received")
            }
            // A text that is not an exchange payload (another QR code) does
            // not end the exchange: the person scans again.
            guard bytes.starts(with: Array(ExchangeProtocol.qrPrefix.utf8)) || bytes.starts(with: Array("5|".utf8)) else {
                throw ItsMeError(.invalidArgument, "this is not an ItsMe exchange payload (scan the other person's ItsMe code)")
            }
        }
        if method != .qr, peerDecision != 0 {
            // The peer's decision was its last message: the exchange has
            // them all (PROTOCOL.md 7.1, 16.3; as Online Verify, 11.2).
            throw ItsMeError(.invalidState, "the peer's decision is in; nothing more comes from the peer")
        }
        if state == .awaitingDecision || state == .confirmed || state == .rejected {
            guard method != .qr else {
                throw ItsMeError(.invalidState, "the exchange is \(state); nothing more comes from the peer")
            }
            // This side has decided: only the peer's decision may still
            // come, and a bad message is refused without undoing ours.
            if method == .bluetooth { try receiveFrame(bytes) } else { try receiveRemote(bytes) }
            accepted.append(bytes)
            return
        }
        do {
            switch method {
            case .qr: try receiveQR(bytes)
            case .bluetooth: try receiveFrame(bytes)
            case .invite, .realtime: try receiveRemote(bytes)
            }
            accepted.append(bytes)
        } catch {
            fail(error)
            throw error
        }
    }

    private func checkUsable(now: Int64) throws {
        try UnixTime.check(now)
        if state == .failed {
            throw ItsMeError(.invalidState, "the exchange has failed (\(failure?.message ?? "")); start a new one")
        }
        if now - createdAt > Self.lifetime, state == .awaitingPeer || state == .compareSAS || state == .imported || state == .awaitingDecision {
            let error = ItsMeError(.expired, "the exchange began more than 24 hours ago; start a new one")
            fail(error)
            throw error
        }
    }

    private func fail(_ error: Error) {
        state = .failed
        failure = (error as? ItsMeError) ?? ItsMeError(.internal, "\(error)")
        secrets.withMutableBytes { wipe($0) }
        outbox.removeAll()
        forgetPAKEScalar()
    }

    private func receiveQR(_ bytes: [UInt8]) throws {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ItsMeError(.malformedMessage, "the payload is not UTF-8 text")
        }
        if text.hasPrefix(ExchangeProtocol.qrPrefix) {
            let p = try ExchangeProtocol.parseQR(text.dropFirst(ExchangeProtocol.qrPrefix.count))
            guard !ConstantTime.equal(p.identityKey, identity.publicKey) else {
                throw ItsMeError(.invalidKey, "the scanned payload carries our own identity key")
            }
            try deriveSeed(peerEphemeral: p.ephemeralKey, peerFingerprint: p.fingerprint)
            let th = ExchangeProtocol.qrTranscriptHash(ownPayload, keyA: identity.publicKey, p.raw, keyB: p.identityKey)
            sas = try secrets.withBytes { try ShortCode.sas(seed: UnsafeRawBufferPointer(rebasing: $0[Self.seedRange]), transcriptHash: th) }
            peer = Peer(name: p.name, fingerprint: p.fingerprint, publicKey: p.identityKey)
            peerDeviceSecret = p.deviceSecret
            state = .compareSAS
        } else {
            let p = try ExchangeProtocol.parseSource(text)
            guard p.fingerprint != identity.fingerprint else {
                throw ItsMeError(.invalidKey, "the scanned payload carries our own fingerprint")
            }
            try deriveSeed(peerEphemeral: p.ephemeralKey, peerFingerprint: p.fingerprint)
            peer = Peer(name: p.name, fingerprint: p.fingerprint, publicKey: nil)
            peerDeviceSecret = p.deviceSecret
            flags.insert(.unauthenticated)
            state = .imported
        }
    }

    private func deriveSeed(peerEphemeral: [UInt8], peerFingerprint: String) throws {
        try secrets.withMutableBytes { s in
            try ExchangeProtocol.deriveSeed(
                ephemeralSecret: UnsafeRawBufferPointer(rebasing: s[Self.ephemeralRange]), peerEphemeralKey: peerEphemeral,
                fingerprints: identity.fingerprint, peerFingerprint, into: UnsafeMutableRawBufferPointer(rebasing: s[Self.seedRange]))
        }
    }

    // MARK: Bluetooth frames

    /// The type of a frame or message after checking its size, version
    /// byte and type byte (sections 7.1 and 16.3).
    private static func messageType<T: RawRepresentable>(
        _ m: [UInt8], maxCount: Int, version: UInt8, what: String
    ) throws -> T where T.RawValue == UInt8 {
        guard m.count >= 2, m.count <= maxCount else {
            throw ItsMeError(.malformedMessage, "a \(what) is 2 to \(maxCount) bytes, got \(m.count)")
        }
        guard m[0] == version else { throw ItsMeError(.malformedMessage, "\(what) of unknown version \(m[0])") }
        guard let type = T(rawValue: m[1]) else { throw ItsMeError(.malformedMessage, "\(what) of unknown type \(m[1])") }
        return type
    }

    private func receiveFrame(_ frame: [UInt8]) throws {
        typealias T = ExchangeProtocol.FrameType
        let type: T = try Self.messageType(
            frame, maxCount: ExchangeProtocol.maxFrameCount, version: ExchangeProtocol.version, what: "Bluetooth frame")
        func outOfOrder() -> ItsMeError {
            ItsMeError(.malformedMessage, "Bluetooth \(type) frame out of order (replayed or reordered)")
        }
        switch type {
        case .hello:
            guard helloPeer == nil else { throw outOfOrder() }
            guard frame.count == 2 + 8 + 32 else { throw ItsMeError(.malformedMessage, "a HELLO frame is 42 bytes") }
            let fp = Array(frame[2..<10])
            let own = Hex.decode(identity.fingerprint)!
            guard fp != own else { throw ItsMeError(.invalidKey, "the peer's HELLO carries our own fingerprint") }
            isInitiator = own.lexicographicallyPrecedes(fp)
            helloPeer = frame
            keyMine = [ExchangeProtocol.version, T.key.rawValue] + ephemeralKey
            outbox.append(keyMine)
        case .key:
            guard helloPeer != nil, keyPeer == nil else { throw outOfOrder() }
            guard frame.count == 2 + 32 else { throw ItsMeError(.malformedMessage, "a KEY frame is 34 bytes") }
            // Public keys: a plain comparison is enough (sections 7.2, 10.3, 11.2).
            guard Array(frame[2...]) != ephemeralKey else {
                throw ItsMeError(.invalidKey, "the peer's KEY carries our own ephemeral key (reflected)")
            }
            keyPeer = frame
            try deriveSessionKeys()
            outbox.append(try dataFrame())
        case .data:
            guard keyPeer != nil, plaintextPeer == nil else { throw outOfOrder() }
            try receiveData(frame)
            state = .compareSAS
        case .confirm:
            guard plaintextPeer != nil, peerDecision == 0 else { throw outOfOrder() }
            guard frame.count == 2 + 1 + AEAD.tagCount else { throw ItsMeError(.malformedMessage, "a CONFIRM frame is 19 bytes") }
            let plain = try open(frame, counter: 1)
            guard plain.count == 1, plain[0] <= 1 else { throw ItsMeError(.malformedMessage, "a CONFIRM frame carries 0 or 1") }
            peerDecided(confirmed: plain[0] == 1)
        }
    }

    private var th1: [UInt8] {
        let (hi, hr) = isInitiator ? (helloMine, helloPeer!) : (helloPeer!, helloMine)
        let (ki, kr) = isInitiator ? (keyMine, keyPeer!) : (keyPeer!, keyMine)
        return ExchangeProtocol.bluetoothTH1(sessionCode: sessionCode!, helloI: hi, helloR: hr, keyI: ki, keyR: kr)
    }

    private var role: String { isInitiator ? "initiator" : "responder" }

    private func deriveSessionKeys() throws {
        let th1 = self.th1
        let peerKey = Array(keyPeer![2...])
        try secrets.withMutableBytes { s in
            try ExchangeProtocol.bluetoothKeys(
                ephemeralSecret: UnsafeRawBufferPointer(rebasing: s[Self.ephemeralRange]), peerEphemeralKey: peerKey, th1: th1,
                into: UnsafeMutableRawBufferPointer(rebasing: s[Self.keysRange]))
        }
    }

    /// The key for frames sent by the initiator (`fromInitiator`) or responder.
    private func withKey<R>(fromInitiator: Bool, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try secrets.withBytes { s in
            try body(UnsafeRawBufferPointer(rebasing: s[fromInitiator ? 80..<112 : 112..<144]))
        }
    }

    private func seal(_ type: ExchangeProtocol.FrameType, counter: UInt64, _ plaintext: [UInt8]) throws -> [UInt8] {
        try withKey(fromInitiator: isInitiator) {
            try ExchangeProtocol.sealFrame(type: type.rawValue, key: $0, counter: counter, plaintext)
        }
    }

    private func open(_ frame: [UInt8], counter: UInt64) throws -> [UInt8] {
        try withKey(fromInitiator: !isInitiator) {
            try ExchangeProtocol.openFrame(frame, key: $0, counter: counter, what: "a Bluetooth frame")
        }
    }

    private func dataFrame() throws -> [UInt8] {
        let name = Array(identity.name.utf8)
        var data = identity.publicKey
        secrets.withBytes { data += UnsafeRawBufferPointer(rebasing: $0[Self.deviceRange]) }
        data.append(UInt8(name.count))
        data += name
        let signature = try identity.sign(LV.cat(LV.b("itsme-bluetooth-payload-v1"), th1, LV.b(role), data))
        plaintextMine = data + signature
        return try seal(.data, counter: 0, plaintextMine)
    }

    private func receiveData(_ frame: [UInt8]) throws {
        // The length first (a name of 1 to 128 bytes): a wrong one is
        // malformed, not a failed tag.
        guard frame.count >= 2 + 113 + 1 + AEAD.tagCount, frame.count <= ExchangeProtocol.maxFrameCount else {
            throw ItsMeError(.malformedMessage, "a DATA frame is \(2 + 113 + 1 + AEAD.tagCount) to \(ExchangeProtocol.maxFrameCount) bytes")
        }
        let plain = try open(frame, counter: 0)
        guard plain.count >= 113 + 1, plain.count == 113 + Int(plain[48]) else {
            throw ItsMeError(.malformedMessage, "the peer's contact data has the wrong length")
        }
        let key = Array(plain[0..<32])
        let deviceSecret = Array(plain[32..<48])
        let nameBytes = Array(plain[49..<(plain.count - 64)])
        guard let name = String(validating: nameBytes, as: UTF8.self), DisplayName.isValid(name) else {
            throw ItsMeError(.malformedMessage, "the peer's name is not valid UTF-8 without control, invisible or bidi-override characters")
        }
        guard Array(SHA256.hash(key).prefix(8)) == Array(helloPeer![2..<10]) else {
            throw ItsMeError(.authenticationFailed, "the peer's identity key does not match the fingerprint in its HELLO")
        }
        let peerEphemeral = Array(keyPeer![2...])
        let commitment = deviceSecret.withBytes {
            ExchangeProtocol.commitment(identityKey: key, ephemeralKey: peerEphemeral, name: nameBytes, deviceSecret: $0)
        }
        guard ConstantTime.equal(commitment, Array(helloPeer![10...])) else {
            throw ItsMeError(.authenticationFailed, "the peer's keys do not match its commitment")
        }
        let peerRole = isInitiator ? "responder" : "initiator"
        let data = Array(plain[..<(plain.count - 64)])
        guard
            Ed25519.verify(
                signature: Array(plain[(plain.count - 64)...]),
                message: LV.cat(LV.b("itsme-bluetooth-payload-v1"), th1, LV.b(peerRole), data), publicKey: key)
        else { throw ItsMeError(.authenticationFailed, "the peer's signature does not verify") }
        // Contents, once authenticated (PROTOCOL.md 1.1, 7.4).
        guard !ConstantTime.equal(key, identity.publicKey) else {
            throw ItsMeError(.invalidKey, "the peer's contact data carries our own identity key")
        }
        let fingerprint = Fingerprint.of(publicKey: key)
        try deriveSeed(peerEphemeral: peerEphemeral, peerFingerprint: fingerprint)
        plaintextPeer = plain
        let th = ExchangeProtocol.bluetoothTranscriptHash(
            th1: th1, plaintextI: isInitiator ? plaintextMine : plain, plaintextR: isInitiator ? plain : plaintextMine)
        sas = try secrets.withBytes { try ShortCode.sas(seed: UnsafeRawBufferPointer(rebasing: $0[Self.seedRange]), transcriptHash: th) }
        peer = Peer(name: name, fingerprint: fingerprint, publicKey: key)
        peerDeviceSecret = deviceSecret
    }

    // MARK: Invite and real-time (PROTOCOL.md 16)

    struct RemoteSetup {
        let inviter: Bool
        let inviteCode: RemoteCode
        let encryptionCode: RemoteCode
        let sid: [UInt8]
    }

    /// Starts an exchange at a distance as the inviter: draws the invite
    /// code and encryption code (show both; the other person types them),
    /// and queues the INVITE message. `realtime` runs it in a relay room
    /// while both people are on a call, otherwise through the relay's invite
    /// mailbox, where each side may go offline between its steps.
    public static func invite<R: RandomSource>(identity: Identity, realtime: Bool, now: Int64, random: inout R) throws -> Exchange {
        try UnixTime.check(now)
        let secrets = try drawSecrets(&random)
        let inviteCode = RemoteCode.random(using: &random)
        return try invite(
            identity: identity, realtime: realtime, inviteCode: inviteCode, encryptionCode: RemoteCode.random(using: &random),
            secrets: secrets, now: now, random: &random)
    }

    /// The inviter with given codes: only for tests of an attacker who read
    /// them (the public constructor always draws fresh codes).
    static func invite<R: RandomSource>(
        identity: Identity, realtime: Bool, inviteCode: RemoteCode, encryptionCode: RemoteCode, now: Int64, random: inout R
    ) throws -> Exchange {
        try invite(
            identity: identity, realtime: realtime, inviteCode: inviteCode, encryptionCode: encryptionCode,
            secrets: try drawSecrets(&random), now: now, random: &random)
    }

    private static func invite<R: RandomSource>(
        identity: Identity, realtime: Bool, inviteCode: RemoteCode, encryptionCode: RemoteCode, secrets: consuming SecretBytes,
        now: Int64, random: inout R
    ) throws -> Exchange {
        let setup = RemoteSetup(
            inviter: true, inviteCode: inviteCode, encryptionCode: encryptionCode, sid: random.bytes(RemoteProtocol.sidCount))
        return try startRemote(identity: identity, realtime: realtime, setup: setup, secrets: secrets, now: now, random: &random)
    }

    /// Draws the PAKE scalar (after everything else the side draws), sweeps
    /// abandoned scalars, builds the exchange and keeps its scalar in the
    /// secret store.
    private static func startRemote<R: RandomSource>(
        identity: Identity, realtime: Bool, setup: RemoteSetup, secrets: consuming SecretBytes, now: Int64, random: inout R
    ) throws -> Exchange {
        var secrets = secrets
        secrets.withMutableBytes { CPace.sampleScalar(into: UnsafeMutableRawBufferPointer(rebasing: $0[scalarRange]), using: &random) }
        try PendingPAKE.sweep(identity.store, now: now)
        let ex = try Exchange(
            identity: identity, method: realtime ? .realtime : .invite, now: now, sessionCode: nil, secrets: secrets, remote: setup)
        try ex.keepPAKEScalar()
        return ex
    }

    /// Joins an exchange at a distance as the invitee, with the two codes
    /// the inviter shared. A typo in either code is caught here
    /// (`.invalidArgument`), before any network call.
    public static func acceptInvite<R: RandomSource>(
        identity: Identity, inviteCode: String, encryptionCode: String, realtime: Bool, now: Int64, random: inout R
    ) throws -> Exchange {
        try UnixTime.check(now)
        let setup = RemoteSetup(
            inviter: false, inviteCode: try RemoteCode(parsing: inviteCode, what: "invite code"),
            encryptionCode: try RemoteCode(parsing: encryptionCode, what: "encryption code"), sid: [])
        guard setup.inviteCode != setup.encryptionCode else {
            throw ItsMeError(.invalidArgument, "the invite code and the encryption code are the same: type both as shown")
        }
        return try startRemote(
            identity: identity, realtime: realtime, setup: setup, secrets: try drawSecrets(&random), now: now, random: &random)
    }

    /// True for the side that created the invite (CPace's initiator).
    public var isInviter: Bool { method.isRemote && isInitiator }

    /// The relay ID this exchange uses, 16 bytes: the invite mailbox, or
    /// for a real-time exchange the room.
    public var relayID: [UInt8]? {
        guard let code = inviteCode else { return nil }
        return method == .realtime ? RemoteProtocol.roomID(code) : RemoteProtocol.inviteID(code)
    }

    private var inviteID: [UInt8] { RemoteProtocol.inviteID(inviteCode!) }

    private func keepPAKEScalar() throws {
        try secrets.withBytes { s in
            try PendingPAKE.keep(
                identity.store, inviteID: inviteID, inviter: isInitiator, createdAt: createdAt,
                scalar: UnsafeRawBufferPointer(rebasing: s[Self.scalarRange]))
        }
    }

    /// Wipes the PAKE scalar from the secret store once the exchange ends:
    /// a copy of the sealed exchange can no longer be restored.
    private func forgetPAKEScalar() {
        guard method.isRemote, let code = inviteCode else { return }
        PendingPAKE.forget(identity.store, inviteID: RemoteProtocol.inviteID(code), inviter: isInitiator)
    }

    private func withScalar<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try secrets.withBytes { try body(UnsafeRawBufferPointer(rebasing: $0[Self.scalarRange])) }
    }

    /// Y = y * g, with g from the encryption code, the invite code and sid.
    private func computePAKEShare() throws -> [UInt8] {
        let prs = Array(encryptionCode!.canonical.utf8)
        let g = try CPace.generator(prs: prs, ci: RemoteProtocol.channelIdentifier(inviteCode!), sid: sid)
        return try g.withBytes { gp in
            try withScalar { y in
                guard let share = CPace.scalarMult(scalar: y, point: gp) else {
                    throw ItsMeError(.internal, "the CPace share is the identity")
                }
                return share
            }
        }
    }

    private func startInvite() throws {
        pakeShare = try computePAKEShare()
        let commitment = secrets.withBytes { s in
            ExchangeProtocol.commitment(
                identityKey: identity.publicKey, ephemeralKey: ephemeralKey, name: Array(identity.name.utf8),
                deviceSecret: UnsafeRawBufferPointer(rebasing: s[Self.deviceRange]))
        }
        let m = [RemoteProtocol.version, RemoteProtocol.MessageType.invite.rawValue] + sid + pakeShare + commitment
        inviteMessage = m
        outbox.append(m)
    }

    /// K = y * peerShare, then the ISK and the four keys into the secrets.
    private func completePAKE(ya: [UInt8], yb: [UInt8], commitment: [UInt8]) throws {
        let peerShare = isInitiator ? yb : ya
        guard !ConstantTime.equal(ya, yb) else {
            throw ItsMeError(.invalidKey, "the peer's PAKE share equals ours (a reflected message)")
        }
        var k = try withScalar { y in
            try peerShare.withUnsafeBytes { p in
                guard let k = CPace.scalarMult(scalar: y, point: p) else {
                    throw ItsMeError(.authenticationFailed, "the peer's PAKE share is not a valid ristretto255 element")
                }
                return k
            }
        }
        defer { wipe(&k) }
        let isk = try CPace.isk(sid: sid, k: k, ya: ya, ada: commitment, yb: yb, adb: [])
        try isk.withBytes { i in
            try secrets.withMutableBytes { try RemoteProtocol.keys(isk: i, into: UnsafeMutableRawBufferPointer(rebasing: $0[Self.remoteKeysRange])) }
        }
        tpake = RemoteProtocol.pakeTranscript(inviteID: inviteID, invite: inviteMessage!, yb: yb)
    }

    /// kc_I, kc_R, kp_I, kp_R, kd_I, kd_R by index 0 to 5.
    private func withRemoteKey<R>(_ index: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let start = Self.remoteKeysRange.lowerBound + 32 * index
        return try secrets.withBytes { try body(UnsafeRawBufferPointer(rebasing: $0[start..<(start + 32)])) }
    }

    private func signedPayload() throws -> [UInt8] {
        try secrets.withBytes { s in
            try RemoteProtocol.payload(
                identity: identity, ephemeralKey: ephemeralKey, deviceSecret: UnsafeRawBufferPointer(rebasing: s[Self.deviceRange]),
                tpake: tpake, initiator: isInitiator)
        }
    }

    /// Opens and checks the peer's sealed payload, derives the seed and SAS.
    private func receivePayload(_ box: [UInt8]) throws {
        let plain = try withRemoteKey(isInitiator ? 3 : 2) {
            try RemoteProtocol.openPayload(key: $0, initiator: !isInitiator, inviteID: inviteID, box)
        }
        let p = try RemoteProtocol.parsePayload(plain, tpake: tpake, senderInitiator: !isInitiator)
        if !isInitiator {
            let commitment = p.deviceSecret.withBytes {
                ExchangeProtocol.commitment(identityKey: p.identityKey, ephemeralKey: p.ephemeralKey, name: p.nameBytes, deviceSecret: $0)
            }
            guard ConstantTime.equal(commitment, Array(inviteMessage![50..<82])) else {
                throw ItsMeError(.authenticationFailed, "the inviter's keys do not match its commitment")
            }
        }
        // Contents, once authenticated (PROTOCOL.md 1.1, 16.3).
        guard !ConstantTime.equal(p.identityKey, identity.publicKey) else {
            throw ItsMeError(.invalidKey, "the peer's contact data carries our own identity key")
        }
        let fingerprint = Fingerprint.of(publicKey: p.identityKey)
        try deriveSeed(peerEphemeral: p.ephemeralKey, peerFingerprint: fingerprint)
        plaintextPeer = plain
        th = RemoteProtocol.transcriptHash(
            tpake: tpake, payloadI: isInitiator ? plaintextMine : plain, payloadR: isInitiator ? plain : plaintextMine)
        sas = try secrets.withBytes { try ShortCode.sas(seed: UnsafeRawBufferPointer(rebasing: $0[Self.seedRange]), transcriptHash: th) }
        peer = Peer(name: p.name, fingerprint: fingerprint, publicKey: p.identityKey)
        peerDeviceSecret = p.deviceSecret
        state = .compareSAS
    }

    private func receiveRemote(_ m: [UInt8]) throws {
        typealias T = RemoteProtocol.MessageType
        let type: T = try Self.messageType(
            m, maxCount: RemoteProtocol.maxMessageCount, version: RemoteProtocol.version, what: "exchange message")
        let outOfOrder = ItsMeError(.malformedMessage, "\(type) message out of order (replayed, reflected or reordered)")
        let minBox = RemoteProtocol.minPayloadBox
        switch type {
        case .invite:
            guard !isInitiator, inviteMessage == nil else { throw outOfOrder }
            guard m.count == RemoteProtocol.inviteCount else { throw ItsMeError(.malformedMessage, "an INVITE message is 82 bytes") }
            sid = Array(m[2..<18])
            inviteMessage = m
            let ya = Array(m[18..<50])
            pakeShare = try computePAKEShare()
            try completePAKE(ya: ya, yb: pakeShare, commitment: Array(m[50..<82]))
            let tag = withRemoteKey(1) { RemoteProtocol.confirmationTag(key: $0, initiator: false, tpake: tpake, accept: nil) }
            plaintextMine = try signedPayload()
            let box = try withRemoteKey(3) {
                try RemoteProtocol.sealPayload(key: $0, initiator: false, inviteID: inviteID, plaintextMine)
            }
            let accept = [RemoteProtocol.version, T.accept.rawValue] + pakeShare + tag + box
            acceptMessage = accept
            outbox.append(accept)
        case .accept:
            guard isInitiator, acceptMessage == nil else { throw outOfOrder }
            guard m.count >= 2 + 32 + 32 + minBox else { throw ItsMeError(.malformedMessage, "the ACCEPT message is too short") }
            let yb = Array(m[2..<34])
            try completePAKE(ya: pakeShare, yb: yb, commitment: Array(inviteMessage![50..<82]))
            let tag = withRemoteKey(1) { RemoteProtocol.confirmationTag(key: $0, initiator: false, tpake: tpake, accept: nil) }
            guard ConstantTime.equal(tag, Array(m[34..<66])) else {
                throw ItsMeError(
                    .authenticationFailed,
                    "the invitee's confirmation does not verify: a wrong encryption code, or a relay that changed the messages; the invite is spent")
            }
            acceptMessage = m
            plaintextMine = try signedPayload()
            try receivePayload(Array(m[66...]))
            let replyTag = withRemoteKey(0) { RemoteProtocol.confirmationTag(key: $0, initiator: true, tpake: tpake, accept: m) }
            let box = try withRemoteKey(2) {
                try RemoteProtocol.sealPayload(key: $0, initiator: true, inviteID: inviteID, plaintextMine)
            }
            outbox.append([RemoteProtocol.version, T.reply.rawValue] + replyTag + box)
        case .reply:
            guard !isInitiator, let accept = acceptMessage, plaintextPeer == nil else { throw outOfOrder }
            guard m.count >= 2 + 32 + minBox else { throw ItsMeError(.malformedMessage, "the REPLY message is too short") }
            let tag = withRemoteKey(0) { RemoteProtocol.confirmationTag(key: $0, initiator: true, tpake: tpake, accept: accept) }
            guard ConstantTime.equal(tag, Array(m[2..<34])) else {
                throw ItsMeError(
                    .authenticationFailed,
                    "the inviter's confirmation does not verify: a wrong encryption code, or a relay that changed the messages; the invite is spent")
            }
            try receivePayload(Array(m[34...]))
        case .decision:
            guard plaintextPeer != nil, peerDecision == 0 else { throw outOfOrder }
            guard m.count == RemoteProtocol.decisionCount else {
                throw ItsMeError(.malformedMessage, "a DECISION message is \(RemoteProtocol.decisionCount) bytes")
            }
            let confirmed = try withRemoteKey(isInitiator ? 5 : 4) {
                try RemoteProtocol.openDecision(key: $0, initiator: !isInitiator, th: th, m)
            }
            peerDecided(confirmed: confirmed)
        }
    }

    /// Records the peer's authenticated decision; releases a held one of ours.
    private func peerDecided(confirmed: Bool) {
        peerDecision = confirmed ? 1 : 2
        flags.insert(confirmed ? .peerConfirmed : .peerRejected)
        if let held = heldDecision {
            outbox.append(held)
            heldDecision = nil
        }
    }

    // MARK: Finishing

    /// Stores the new contact unverified (PROTOCOL.md 8.1), or, if one with
    /// the peer's identity key exists, sets `.knownContact` and stores
    /// nothing until the exchange is confirmed. Returns the contact's id.
    /// Idempotent. Deletes contacts of other exchanges whose peer's
    /// decision did not come in time (`ContactStore.expireAwaiting`).
    @discardableResult
    public func save(to store: ContactStore, now: Int64) throws -> Int64 {
        try checkUsable(now: now)
        guard state == .compareSAS || state == .imported, let peer else {
            throw ItsMeError(.invalidState, "nothing to save: the exchange is \(state)")
        }
        try checkStore(store)
        if let id = savedContactID { return id }
        try store.expireAwaiting(now: now)
        var existing: Contact?
        if let key = peer.publicKey {
            do { existing = try store.contact(publicKey: key) } catch let e as ItsMeError where e.kind == .notFound {}
        }
        let id: Int64
        if let existing {
            id = existing.id
            existingContact = true
            flags.insert(.knownContact)
        } else {
            id = try store.addExchanged(
                name: peer.name, publicKey: peer.publicKey, fingerprint: peer.fingerprint, seed: try seedCopy(),
                mine: try mineDeviceSecret(), theirs: try SecretBytes(copying: peerDeviceSecret),
                method: method.contactMethod, now: now)
        }
        savedContactID = id
        savedStoreID = store.storeID
        return id
    }

    private func seedCopy() throws -> SecretBytes {
        try secrets.withBytes { try SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[Self.seedRange])) }
    }

    private func mineDeviceSecret() throws -> SecretBytes {
        try secrets.withBytes { try SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[Self.deviceRange])) }
    }

    /// The person said the SAS matches: saves if needed and sends this
    /// side's confirmation (Bluetooth CONFIRM, remote DECISION). A contact
    /// becomes verified only with both decisions (PROTOCOL.md 8.1): for QR
    /// (both screens seen in person), or once the peer's confirmation has
    /// arrived, at once, state `.confirmed` (a known contact gets the new
    /// seed and device secrets); otherwise state `.awaitingDecision`, a new
    /// contact stored awaiting the peer, a known one unchanged, until
    /// `settle`.
    @discardableResult
    public func confirm(store: ContactStore, now: Int64) throws -> Int64 {
        try checkUsable(now: now)
        guard state == .compareSAS else {
            throw ItsMeError(
                .invalidState,
                state == .imported
                    ? "a source-format contact has no SAS to confirm: save it, it stays unauthenticated"
                    : "there is no SAS to confirm: the exchange is \(state)")
        }
        guard peerDecision != 2 else {
            throw ItsMeError(.invalidState, "the peer rejected the SAS; the exchange cannot be confirmed: reject it")
        }
        let id = try save(to: store, now: now)
        if method == .qr || peerDecision == 1 {
            try keep(store: store, id: id, now: now)
            try decide(confirmed: true)
            state = .confirmed
            forgetPAKEScalar()
        } else {
            if !existingContact { try store.setAwaiting(id: id, until: createdAt + Self.lifetime) }
            try decide(confirmed: true)
            state = .awaitingDecision
        }
        return id
    }

    /// Makes the exchanged contact verified: a new one, or a known one
    /// with the new seed and device secrets.
    private func keep(store: ContactStore, id: Int64, now: Int64) throws {
        if existingContact {
            try store.replaceExchanged(
                id: id, publicKey: peer!.publicKey!, seed: try seedCopy(), mine: try mineDeviceSecret(),
                theirs: try SecretBytes(copying: peerDeviceSecret), method: method.contactMethod, now: now)
        } else {
            try store.settleVerified(id: id, now: now)
        }
    }

    /// Applies the peer's decision, once it arrived, to a confirmed
    /// exchange (state `.awaitingDecision`): the peer confirmed, the contact
    /// becomes verified (a known contact gets the new seed), state
    /// `.confirmed`, and its id is returned; the peer rejected, a new
    /// contact is deleted (a known one keeps its old seed), state
    /// `.rejected`, and nil is returned. `.invalidState` before the peer's
    /// decision has arrived.
    @discardableResult
    public func settle(store: ContactStore, now: Int64) throws -> Int64? {
        try checkUsable(now: now)
        guard state == .awaitingDecision, peerDecision != 0, let id = savedContactID else {
            throw ItsMeError(
                .invalidState,
                state == .awaitingDecision
                    ? "the peer's decision has not arrived yet" : "nothing to settle: the exchange is \(state)")
        }
        try checkStore(store)
        if peerDecision == 1 {
            try keep(store: store, id: id, now: now)
            state = .confirmed
        } else {
            if !existingContact { try store.delete(id: id) }
            state = .rejected
        }
        forgetPAKEScalar()
        return state == .confirmed ? id : nil
    }

    /// The SAS did not match, the person gave up, or (state
    /// `.awaitingDecision`) the peer's decision will not come: the room or
    /// Bluetooth session ended first. Deletes the contact `save` added (a
    /// known contact is left exactly as it was) and sends this side's
    /// rejection when it has not decided yet and the peer's contact data
    /// was received. `store` may be nil if nothing was saved. A failed
    /// exchange may be rejected too, to delete what it saved.
    public func reject(store: ContactStore?) throws {
        let open = state == .compareSAS || state == .imported || state == .awaitingPeer || state == .awaitingDecision
        guard open || (state == .failed && savedContactID != nil && !existingContact) else {
            throw ItsMeError(.invalidState, "the exchange is \(state) and cannot be rejected")
        }
        if let id = savedContactID, !existingContact {
            guard let store else { throw ItsMeError(.invalidArgument, "the contact was saved: give its store to delete it") }
            try checkStore(store)
            do { try store.delete(id: id) } catch let e as ItsMeError where e.kind == .notFound && state != .compareSAS {
                // Already deleted by expireAwaiting, or by an earlier reject
                // of this failed exchange.
            }
        }
        if state == .failed {
            savedContactID = nil
            return
        }
        if decision == 0 { try decide(confirmed: false) }
        state = .rejected
        forgetPAKEScalar()
    }

    /// Records this side's decision and queues the message that carries it
    /// once the peer's contact data was received: a Bluetooth CONFIRM, a
    /// remote DECISION (the inviter's confirmation through the mailbox is
    /// held until the invitee's decision arrives).
    private func decide(confirmed: Bool) throws {
        decision = confirmed ? 1 : 2
        guard plaintextPeer != nil, !sentConfirm else { return }
        sentConfirm = true
        switch method {
        case .qr: return
        case .bluetooth: outbox.append(try seal(.confirm, counter: 1, [confirmed ? 1 : 0]))
        case .invite, .realtime:
            let m = try withRemoteKey(isInitiator ? 4 : 5) {
                try RemoteProtocol.decisionMessage(key: $0, initiator: isInitiator, th: th, confirmed: confirmed)
            }
            if method == .invite, isInitiator, confirmed, peerDecision == 0 { heldDecision = m } else { outbox.append(m) }
        }
    }

    /// Checks that `store` belongs to this exchange's identity and, once
    /// the contact is saved, is the store it was saved in.
    private func checkStore(_ store: ContactStore) throws {
        guard ConstantTime.equal(store.ownerPublicKey, identity.publicKey) else {
            throw ItsMeError(.wrongIdentity, "the contact store belongs to another identity than the exchange")
        }
        if let saved = savedStoreID, saved != store.storeID {
            throw ItsMeError(.invalidArgument, "the contact was saved in another contact store: use that one")
        }
    }

    // MARK: Sealing

    /// 2: the decision byte may be 3 (confirmed and settled); a version 1
    /// blob (from 0.1) is still read, its 1 meaning what 3 means now.
    static let sealVersion: UInt8 = 2
    static let sealLabel = "itsme-exchange-seal-v1"

    private static func sealKey(_ store: any SecretStore) throws -> SecretBytes {
        let deviceKey = try ContactStore.loadOrCreateDeviceKey(store)
        return try HKDF.derive(ikm: deviceKey, salt: [UInt8](), info: LV.b(sealLabel), count: AEAD.keyCount)
    }

    private static func sealAAD(_ identity: Identity, version: UInt8 = sealVersion) -> [UInt8] {
        LV.cat(LV.b(sealLabel), [version], identity.publicKey)
    }

    /// The pending exchange as bytes, encrypted under a key derived from
    /// this device's device key (in the identity's secret store), so a host
    /// can stop between steps and `restore` later. A pending exchange
    /// (awaiting the peer, comparing the SAS, imported, or awaiting the
    /// peer's decision) can be sealed, and so can a finished Bluetooth one,
    /// which may still have its CONFIRM frame to send and the peer's to
    /// receive.
    public func seal() throws -> [UInt8] {
        let pending = state == .awaitingPeer || state == .compareSAS || state == .imported || state == .awaitingDecision
        let finishedBluetooth = method == .bluetooth && (state == .confirmed || state == .rejected)
        guard pending || finishedBluetooth else {
            throw ItsMeError(.invalidState, "only a pending or finished Bluetooth exchange can be sealed; this one is \(state)")
        }
        let remoteCount = method.isRemote ? 1 + 8 + 8 + 1 + (isInitiator ? sid.count : 0) : 0
        let size = 1 + 8 + remoteCount + 32 + 16 + 4 + 4 + 8 + 16 + 1 + 1 + 2 + accepted.reduce(0) { $0 + 2 + $1.count }
        var w = try RecordWriter(count: size)
        w.append(UInt8(method.rawValue))
        w.append(createdAt)
        if method.isRemote {
            // The scalar is not here: it stays in the secret store.
            w.append(UInt8(isInitiator ? 1 : 0))
            w.append(Array(inviteCode!.canonical.utf8))
            w.append(Array(encryptionCode!.canonical.utf8))
            w.append(UInt8(isInitiator ? sid.count : 0))
            if isInitiator { w.append(sid) }
        }
        secrets.withBytes { w.append(UnsafeRawBufferPointer(rebasing: $0[0..<Self.deviceRange.upperBound])) }
        w.append(sessionCode?.value ?? UInt32.max)
        w.append(UInt32(taken))
        w.append(savedContactID ?? -1)
        w.append(savedStoreID ?? [UInt8](repeating: 0, count: 16))
        w.append(UInt8(existingContact ? 1 : 0))
        w.append(state == .confirmed ? 3 : decision)
        w.append(UInt16(accepted.count))
        for m in accepted {
            w.append(UInt16(m.count))
            w.append(m)
        }
        let plain = w.finish()
        var rng = SystemRandom()
        let nonce = rng.bytes(AEAD.nonceCount)
        let key = try Self.sealKey(identity.store)
        return [Self.sealVersion] + nonce
            + (try AEAD.seal(.chacha20Poly1305, key: key, nonce: nonce, plaintext: plain, aad: Self.sealAAD(identity)))
    }

    /// Restores a sealed exchange for `identity`. `.authenticationFailed` if
    /// it was sealed on another device, for another identity, or changed;
    /// `.expired` after 24 hours. Restore a sealed exchange once: the
    /// library cannot tell a second copy from the first.
    public static func restore(identity: Identity, sealed: [UInt8], now: Int64) throws -> Exchange {
        try UnixTime.check(now)
        guard sealed.count > 1 + AEAD.nonceCount + AEAD.tagCount, sealed[0] == 1 || sealed[0] == sealVersion else {
            throw ItsMeError(.corruptData, "not a sealed exchange of a known version")
        }
        let key = try sealKey(identity.store)
        let plain = try AEAD.open(
            .chacha20Poly1305, key: key, nonce: Array(sealed[1..<13]), ciphertext: Array(sealed[13...]),
            aad: sealAAD(identity, version: sealed[0]))
        return try plain.withBytes { b in
            var r = RecordReader(b, what: "sealed exchange")
            guard let method = Method(rawValue: UInt32(try r.byte())) else {
                throw ItsMeError(.corruptData, "sealed exchange of unknown method")
            }
            let createdAt = try r.int64()
            guard (0...UnixTime.max).contains(createdAt) else {
                throw ItsMeError(.corruptData, "sealed exchange has an invalid creation time")
            }
            guard now - createdAt <= lifetime else {
                throw ItsMeError(.expired, "the exchange began more than 24 hours ago; start a new one")
            }
            var remote: RemoteSetup?
            if method.isRemote {
                let inviter = try r.byte() == 1
                let codes = try [r.array(8), r.array(8)].map {
                    try RemoteCode(parsing: String(decoding: $0, as: UTF8.self))
                }
                let sid = try r.array(Int(try r.byte()))
                guard sid.count == (inviter ? RemoteProtocol.sidCount : 0) else {
                    throw ItsMeError(.corruptData, "sealed exchange has an invalid session id")
                }
                remote = RemoteSetup(inviter: inviter, inviteCode: codes[0], encryptionCode: codes[1], sid: sid)
            }
            var secrets = try SecretBytes(count: remoteKeysRange.upperBound)
            let drawn = try r.slice(deviceRange.upperBound)
            secrets.withMutableBytes { $0.baseAddress!.copyMemory(from: drawn.baseAddress!, byteCount: drawn.count) }
            let code = try r.uint32()
            let sessionCode = method == .bluetooth ? ShortCode(value: code) : nil
            guard method != .bluetooth || sessionCode != nil else {
                throw ItsMeError(.corruptData, "sealed exchange has an invalid session code")
            }
            let taken = Int(try r.uint32())
            let saved = try r.int64()
            let storeID = try r.array(16)
            let existing = try r.byte() == 1
            var decision = try r.byte()
            if sealed[0] == 1, decision == 1 { decision = 3 }
            let validDecisions: ClosedRange<UInt8> = method == .qr ? 0...0 : method == .bluetooth ? 0...3 : 0...1
            guard validDecisions.contains(decision) else {
                throw ItsMeError(.corruptData, "sealed exchange has an invalid decision")
            }
            var inputs: [[UInt8]] = []
            for _ in 0..<(try r.uint16()) { inputs.append(try r.array(Int(try r.uint16()))) }
            try r.finish()
            if let remote {
                let found = try secrets.withMutableBytes {
                    try PendingPAKE.load(
                        identity.store, inviteID: RemoteProtocol.inviteID(remote.inviteCode), inviter: remote.inviter,
                        into: UnsafeMutableRawBufferPointer(rebasing: $0[scalarRange]))
                }
                guard found else {
                    throw ItsMeError(.invalidState, "this invite has ended (its PAKE secret is gone from the secret store); start a new one")
                }
            }
            let ex = try Exchange(
                identity: identity, method: method, now: createdAt,
                sessionCode: sessionCode, secrets: secrets, remote: remote)
            for input in inputs { try ex.receive(input, now: createdAt) }
            if decision != 0 {
                try ex.decide(confirmed: decision != 2)
                ex.state = decision == 1 ? .awaitingDecision : decision == 2 ? .rejected : .confirmed
            }
            ex.taken = min(taken, ex.outbox.count)
            ex.savedContactID = saved >= 0 ? saved : nil
            ex.savedStoreID = saved >= 0 ? storeID : nil
            ex.existingContact = existing
            if existing { ex.flags.insert(.knownContact) }
            return ex
        }
    }
}

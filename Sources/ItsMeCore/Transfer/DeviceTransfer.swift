/// The live device transfer (docs/PROTOCOL.md 17.3): the new device shows a
/// one-time X25519 key as a QR code; the old device scans it and answers
/// with its own key; both show a SAS the person compares; only after the
/// person confirms on the old device does it send the identity, sealed to
/// the new device's key. No password. A sans-I/O state machine: the host
/// carries the messages (the relay room named by `roomName`, or any other
/// link), one way, from the old device to the new one.
///
/// A failure is final. Not thread-safe: serialise calls (the C layer does).
public final class DeviceTransfer: CustomStringConvertible {
    public enum Role: UInt32, Sendable {
        /// The new device: shows the offer, receives the identity.
        case receiver = 1
        /// The old device: scans the offer, sends the identity.
        case sender = 2
    }

    public enum State: UInt32, Sendable {
        /// The receiver waits for the sender's key.
        case awaitingPeer = 1
        /// Both keys known: show the SAS for the person to compare.
        case compareSAS = 2
        /// The receiver's person confirmed; the identity has not arrived yet.
        case awaitingIdentity = 3
        /// Sender: the identity is queued. Receiver: it is ready to install.
        case done = 4
        case rejected = 5
        case failed = 6
    }

    enum MessageType: UInt8 {
        case key = 1
        case identity = 2
    }

    public static let version: UInt8 = 1
    public static let offerPrefix = "ITSMETR1:"
    public static let offerCount = 1 + 16 + X25519.keyCount
    static let keyMessageCount = 2 + X25519.keyCount
    /// An identity message: the header and the sealed contents of a 1- to
    /// 128-byte name, 101 to 228 bytes (PROTOCOL.md 17.3).
    static let identityMessageCounts =
        identityMessageCount(nameByteCount: 1)...identityMessageCount(nameByteCount: DisplayName.maxBytes)

    static func identityMessageCount(nameByteCount: Int) -> Int {
        2 + IdentityExport.blobCount(nameByteCount: nameByteCount) - IdentityExport.headerCount
    }
    /// How long a transfer may take, from its creation.
    public static let lifetime: Int64 = 600

    public let role: Role
    public let createdAt: Int64
    public private(set) var state: State
    public private(set) var failure: ItsMeError?
    public private(set) var sas: ShortCode?
    /// The relay room: lowercase hex of 16 bytes derived from the transfer id.
    public let roomName: String
    /// The offer text (receiver only; the sender scanned it).
    public let offerText: String

    private let transferID: [UInt8]
    private let receiverKey: [UInt8]
    private var ephemeral: SecretBytes
    private var key: SecretBytes?
    private var th: [UInt8] = []
    private var outbox: [[UInt8]] = []
    /// Sender: the identity's contents, sealed on confirm.
    private var plain: SecretBytes?
    /// Receiver: the identity message if it came before the person confirmed.
    private var early: [UInt8]?
    private var received: IdentityExport.Contents?

    public var description: String { "DeviceTransfer(role: \(role), state: \(state))" }

    /// The new device's side: draws the one-time key and the transfer id.
    public init<R: RandomSource>(receiverAt now: Int64, random: inout R) throws {
        try UnixTime.check(now)
        role = .receiver
        createdAt = now
        state = .awaitingPeer
        ephemeral = try SecretBytes(randomCount: X25519.keyCount, using: &random)
        receiverKey = try X25519.publicKey(secretKey: ephemeral)
        transferID = random.bytes(16)
        roomName = Self.roomName(transferID)
        offerText = Self.offerPrefix + Base64.encode([Self.version] + transferID + receiverKey, .urlUnpadded)
    }

    /// The old device's side: reads the offer the new device shows (one
    /// that does not parse costs no attempt), then checks the PIN at `now`
    /// (a counted attempt) and queues its key. The SAS is known at once.
    public init<R: RandomSource>(
        sending identity: Identity, pin: String, offer: String, now: Int64, random: inout R
    ) throws {
        try UnixTime.check(now)
        let (offerBytes, offerText) = try Self.parseOffer(offer)
        try PIN(store: identity.store).verify(pin, now: now)
        role = .sender
        createdAt = now
        state = .compareSAS
        transferID = Array(offerBytes[1..<17])
        receiverKey = Array(offerBytes[17...])
        roomName = Self.roomName(transferID)
        self.offerText = offerText
        ephemeral = try SecretBytes(randomCount: X25519.keyCount, using: &random)
        let senderKey = try X25519.publicKey(secretKey: ephemeral)
        try derive(shared: try X25519.sharedSecret(secretKey: ephemeral, peerPublicKey: receiverKey), senderKey: senderKey)
        plain = try identity.exportContents()
        outbox.append([Self.version, MessageType.key.rawValue] + senderKey)
    }

    static func roomName(_ transferID: [UInt8]) -> String {
        Hex.encodeUpper(SHA256.hash(LV.cat(LV.b("itsme-transfer-room-v1"), transferID)).prefix(16)).lowercased()
    }

    /// An offer as the new device shows it, checked (`.malformedMessage`
    /// if it is not one), without the white space around it: a host can
    /// refuse a mistyped code before asking for the PIN.
    public static func checkOffer(_ text: String) throws -> String { try parseOffer(text).1 }

    /// The offer's bytes, version (1) | transfer id (16) | receiver key
    /// (32), and its text without the white space around it.
    static func parseOffer(_ text: String) throws -> ([UInt8], String) {
        let s = TypedInput.withoutASCIIWhitespaceAround(text)
        guard s.hasPrefix(offerPrefix), let bytes = Base64.decode(String(s.dropFirst(offerPrefix.count)), .urlUnpadded) else {
            throw ItsMeError(.malformedMessage, "this is not a device transfer code (ITSMETR1:...)")
        }
        guard bytes.count == offerCount, bytes[0] == version else {
            throw ItsMeError(.malformedMessage, "this device transfer code is damaged or of another version")
        }
        return (bytes, String(s))
    }

    /// th, the SAS and the key from the shared secret (PROTOCOL.md 17.3).
    private func derive(shared: consuming SecretBytes, senderKey: [UInt8]) throws {
        th = SHA256.hash(LV.cat(LV.b("itsme-transfer-v1"), transferID, receiverKey, senderKey))
        let seed = try HKDF.derive(ikm: shared, salt: transferID, info: LV.b("itsme-transfer-seed-v1"), count: 32)
        sas = try ShortCode.sas(seed: seed, transcriptHash: th)
        key = try HKDF.derive(ikm: seed, salt: [UInt8](), info: LV.cat(LV.b("itsme-transfer-key-v1"), th), count: AEAD.keyCount)
    }

    private var identityAAD: [UInt8] { [Self.version, MessageType.identity.rawValue] + th }

    // MARK: Messages

    /// The next message to send, removed from the queue; nil if none.
    public func takeOutgoing() -> [UInt8]? {
        guard state != .failed, !outbox.isEmpty else { return nil }
        return outbox.removeFirst()
    }

    /// The next message to send, left in the queue; nil if none.
    public func peekOutgoing() -> [UInt8]? { state == .failed ? nil : outbox.first }

    private func fail(_ error: ItsMeError) {
        state = .failed
        failure = error
        ephemeral.withMutableBytes { wipe($0) }
        key = nil
        plain = nil
        early = nil
        received = nil
        outbox.removeAll()
    }

    private func checkUsable(now: Int64) throws {
        try UnixTime.check(now)
        if state == .failed {
            throw ItsMeError(.invalidState, "the transfer has failed (\(failure?.message ?? "")); start a new one")
        }
        if now - createdAt > Self.lifetime, state == .awaitingPeer || state == .compareSAS || state == .awaitingIdentity {
            let e = ItsMeError(.expired, "the transfer took more than \(Self.lifetime) seconds")
            fail(e)
            throw e
        }
    }

    /// Feeds one message from the old device (receiver only).
    public func receive(_ message: [UInt8], now: Int64) throws {
        try checkUsable(now: now)
        guard role == .receiver else { throw ItsMeError(.invalidState, "the sending device receives no messages") }
        guard state == .awaitingPeer || state == .compareSAS || state == .awaitingIdentity else {
            throw ItsMeError(.invalidState, "the transfer is over (\(state))")
        }
        do {
            guard message.count >= 2, message[0] == Self.version else {
                throw ItsMeError(.malformedMessage, "not a device transfer message of version \(Self.version)")
            }
            switch (MessageType(rawValue: message[1]), state) {
            case (.key, .awaitingPeer):
                guard message.count == Self.keyMessageCount else {
                    throw ItsMeError(.malformedMessage, "a transfer key message is \(Self.keyMessageCount) bytes, got \(message.count)")
                }
                let senderKey = Array(message[2...])
                guard senderKey != receiverKey else { throw ItsMeError(.invalidKey, "the peer sent back this device's own key") }
                try derive(shared: try X25519.sharedSecret(secretKey: ephemeral, peerPublicKey: senderKey), senderKey: senderKey)
                ephemeral.withMutableBytes { wipe($0) }
                state = .compareSAS
            case (.identity, .compareSAS) where early == nil:
                try Self.checkIdentityCount(message)
                early = message
            case (.identity, .awaitingIdentity):
                try Self.checkIdentityCount(message)
                try open(message)
            default:
                throw ItsMeError(.malformedMessage, "a transfer message out of order (type \(message[1]) while \(state))")
            }
        } catch let e as ItsMeError {
            fail(e)
            throw e
        }
    }

    /// A wrong length is `.malformedMessage`, found before any decryption.
    private static func checkIdentityCount(_ message: [UInt8]) throws {
        guard identityMessageCounts.contains(message.count) else {
            throw ItsMeError(
                .malformedMessage,
                "a transfer identity message is \(identityMessageCounts.lowerBound) to \(identityMessageCounts.upperBound) bytes, got \(message.count)")
        }
    }

    /// Opens an identity message whose length was checked on arrival.
    private func open(_ message: [UInt8]) throws {
        guard let key = key.take() else { throw ItsMeError(.internal, "no transfer key") }
        let opened = try AEAD.open(
            .aes256GCM, key: key, nonce: [UInt8](repeating: 0, count: AEAD.nonceCount), ciphertext: message[2...],
            aad: identityAAD)
        received = try IdentityExport.Contents(opened)
        state = .done
    }

    // MARK: The person's decision

    /// The SAS matched. Sender: queues the sealed identity. Receiver: opens
    /// the identity if it has arrived (else waits for it).
    public func confirm(now: Int64) throws {
        try checkUsable(now: now)
        guard state == .compareSAS else { throw ItsMeError(.invalidState, "there is no SAS to confirm (\(state))") }
        do {
            switch role {
            case .sender:
                guard let key = key.take(), let plain = plain.take() else { throw ItsMeError(.internal, "no transfer key") }
                let sealed = try AEAD.seal(
                    .aes256GCM, key: key, nonce: [UInt8](repeating: 0, count: AEAD.nonceCount), plaintext: plain,
                    aad: identityAAD)
                outbox.append([Self.version, MessageType.identity.rawValue] + sealed)
                ephemeral.withMutableBytes { wipe($0) }
                state = .done
            case .receiver:
                state = .awaitingIdentity
                if let message = early.take() { try open(message) }
            }
        } catch let e as ItsMeError {
            fail(e)
            throw e
        }
    }

    /// The SAS differed, or the person gave up: nothing is sent or kept.
    public func reject() throws {
        guard state == .awaitingPeer || state == .compareSAS || state == .awaitingIdentity else {
            throw ItsMeError(.invalidState, "the transfer is over (\(state))")
        }
        fail(ItsMeError(.invalidState, "the transfer was rejected"))
        state = .rejected
    }

    /// The received identity, once `done` (receiver only), handed over once;
    /// install it with `IdentityExport.install`.
    public func takeIdentity() throws -> IdentityExport.Contents {
        guard role == .receiver, state == .done, let contents = received.take() else {
            throw ItsMeError(.invalidState, "no received identity to take (\(role), \(state))")
        }
        return contents
    }
}

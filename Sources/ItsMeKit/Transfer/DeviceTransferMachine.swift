/// The live device transfer's state machine (docs/PROTOCOL.md 17.3), as a
/// value. It reads no store: the driver checks the PIN and reads the
/// identity's contents before the sender's machine is made, and installs
/// what the receiver's machine hands over.
///
///     receiver: awaitingKey --KEY--> comparing --confirm--> awaitingIdentity --IDENTITY--> received
///               (an IDENTITY that arrives while comparing is kept, and opened on confirm)
///     sender:   comparing --confirm--> sent (the sealed identity queued)
///     any running state --reject--> rejected
///
/// Peer input that is wrong throws and leaves the machine `failed`, for
/// good; a call the state does not allow throws `.invalidState`.
struct DeviceTransferMachine {
    /// What both keys give: the transcript hash, the SAS and the key.
    struct Keyed {
        let transcriptHash: [UInt8]
        let sas: ShortCode
        let key: SecretBox
    }

    enum State {
        /// Receiver: waiting for the sender's key, with our one-time secret.
        case awaitingKey(ephemeral: SecretBox)
        /// Receiver: the SAS to compare; an identity message that came early.
        case receiverComparing(Keyed, early: [UInt8]?)
        /// Receiver: the person confirmed; waiting for the identity.
        case awaitingIdentity(Keyed)
        /// Receiver: the identity's contents, until taken (then nil).
        case received(sas: ShortCode, contents: SecretBox?)
        /// Sender: the SAS to compare, and the identity's contents to seal.
        case senderComparing(Keyed, contents: SecretBox)
        /// Sender: the sealed identity is queued.
        case sent(sas: ShortCode)
        case rejected(sas: ShortCode?)
        case failed(ItsMeError)
    }

    let role: DeviceTransfer.Role
    let createdAt: Int64
    let offer: TransferOffer
    private(set) var state: State

    /// The new device's side: draws the one-time key, then the transfer id.
    static func receiver<R: RandomSource>(now: Int64, random: inout R) throws -> DeviceTransferMachine {
        try UnixTime.check(now)
        let ephemeral = SecretBox(try SecretBytes(randomCount: X25519.keyCount, using: &random))
        let receiverKey = try X25519.publicKey(secretKey: ephemeral.bytes)
        let offer = TransferOffer(transferID: random.bytes(16), receiverKey: receiverKey)
        return DeviceTransferMachine(role: .receiver, createdAt: now, offer: offer, state: .awaitingKey(ephemeral: ephemeral))
    }

    /// The old device's side, from the offer it scanned and the identity's
    /// contents (`Identity.exportContents`): its key message, and the SAS
    /// known at once.
    static func sender<R: RandomSource>(
        offer: TransferOffer, contents: SecretBox, now: Int64, random: inout R
    ) throws -> (DeviceTransferMachine, [UInt8]) {
        try UnixTime.check(now)
        let ephemeral = try SecretBytes(randomCount: X25519.keyCount, using: &random)
        let senderKey = try X25519.publicKey(secretKey: ephemeral)
        let keyed = try derive(
            offer, shared: try X25519.sharedSecret(secretKey: ephemeral, peerPublicKey: offer.receiverKey), senderKey: senderKey)
        let machine = DeviceTransferMachine(
            role: .sender, createdAt: now, offer: offer, state: .senderComparing(keyed, contents: contents))
        return (machine, TransferMessage.key(senderKey: senderKey).bytes)
    }

    private init(role: DeviceTransfer.Role, createdAt: Int64, offer: TransferOffer, state: State) {
        self.role = role
        self.createdAt = createdAt
        self.offer = offer
        self.state = state
    }

    /// th, the SAS and the key from the shared secret (PROTOCOL.md 17.3).
    private static func derive(_ offer: TransferOffer, shared: consuming SecretBytes, senderKey: [UInt8]) throws -> Keyed {
        let th = SHA256.hash(LV.cat(LV.b("itsme-transfer-v1"), offer.transferID, offer.receiverKey, senderKey))
        let seed = try HKDF.derive(ikm: shared, salt: offer.transferID, info: LV.b("itsme-transfer-seed-v1"), count: 32)
        return Keyed(
            transcriptHash: th, sas: try ShortCode.sas(seed: seed, transcriptHash: th),
            key: SecretBox(
                try HKDF.derive(ikm: seed, salt: [UInt8](), info: LV.cat(LV.b("itsme-transfer-key-v1"), th), count: AEAD.keyCount)))
    }

    private static func aad(_ keyed: Keyed) -> [UInt8] {
        [DeviceTransfer.version, TransferMessage.Kind.identity.rawValue] + keyed.transcriptHash
    }

    private static let zeroNonce = [UInt8](repeating: 0, count: AEAD.nonceCount)

    // MARK: What the state shows

    /// The SAS, once both keys are known, unless the transfer failed.
    var sas: ShortCode? {
        switch state {
        case .receiverComparing(let k, _), .awaitingIdentity(let k), .senderComparing(let k, _): k.sas
        case .received(let sas, _), .sent(let sas): sas
        case .rejected(let sas): sas
        case .awaitingKey, .failed: nil
        }
    }

    var failure: ItsMeError? {
        if case .failed(let error) = state { return error }
        return nil
    }

    var isRunning: Bool {
        switch state {
        case .awaitingKey, .receiverComparing, .awaitingIdentity, .senderComparing: true
        case .received, .sent, .rejected, .failed: false
        }
    }

    var stateName: String {
        switch state {
        case .awaitingKey: "awaitingPeer"
        case .receiverComparing, .senderComparing: "compareSAS"
        case .awaitingIdentity: "awaitingIdentity"
        case .received, .sent: "done"
        case .rejected: "rejected"
        case .failed: "failed"
        }
    }

    // MARK: Transitions

    mutating func fail(_ error: ItsMeError) {
        if case .awaitingKey(let ephemeral) = state { ephemeral.wipe() }
        state = .failed(error)
    }

    private mutating func checkUsable(now: Int64) throws {
        try UnixTime.check(now)
        if let failure {
            throw ItsMeError(.invalidState, "the transfer has failed (\(failure.message)); start a new one")
        }
        if now - createdAt > DeviceTransfer.lifetime, isRunning {
            let e = ItsMeError(.expired, "the transfer took more than \(DeviceTransfer.lifetime) seconds")
            fail(e)
            throw e
        }
    }

    /// Feeds one message from the old device (receiver only).
    mutating func receive(_ bytes: [UInt8], now: Int64) throws {
        try checkUsable(now: now)
        guard role == .receiver else { throw ItsMeError(.invalidState, "the sending device receives no messages") }
        guard isRunning else { throw ItsMeError(.invalidState, "the transfer is over (\(stateName))") }
        do {
            let message = try TransferMessage(parsing: bytes)
            switch (state, message) {
            case (.awaitingKey(let ephemeral), .key(let senderKey)):
                guard senderKey != offer.receiverKey else {
                    throw ItsMeError(.invalidKey, "the peer sent back this device's own key")
                }
                let keyed = try Self.derive(
                    offer, shared: try X25519.sharedSecret(secretKey: ephemeral.bytes, peerPublicKey: senderKey),
                    senderKey: senderKey)
                ephemeral.wipe()
                state = .receiverComparing(keyed, early: nil)
            case (.receiverComparing(let keyed, nil), .identity(let sealed)):
                state = .receiverComparing(keyed, early: sealed)
            case (.awaitingIdentity(let keyed), .identity(let sealed)):
                state = .received(sas: keyed.sas, contents: try Self.open(sealed, keyed))
            case (.awaitingKey, _), (.receiverComparing, _), (.awaitingIdentity, _), (.senderComparing, _), (.received, _),
                (.sent, _), (.rejected, _), (.failed, _):
                throw ItsMeError(.malformedMessage, "a transfer message out of order (type \(bytes[1]) while \(stateName))")
            }
        } catch let e as ItsMeError {
            fail(e)
            throw e
        }
    }

    /// Opens an identity message and checks its contents.
    private static func open(_ sealed: [UInt8], _ keyed: Keyed) throws -> SecretBox {
        let opened = try keyed.key.withBytes { key in
            try AEAD.open(.aes256GCM, key: key, nonce: zeroNonce, ciphertext: sealed, aad: aad(keyed))
        }
        _ = try IdentityExport.Contents(opened)
        return SecretBox(opened)
    }

    /// The SAS matched. Sender: returns the sealed identity to send.
    /// Receiver: opens the identity if it has arrived (else waits for it).
    mutating func confirm(now: Int64) throws -> [UInt8]? {
        try checkUsable(now: now)
        do {
            switch state {
            case .senderComparing(let keyed, let contents):
                let sealed = try keyed.key.withBytes { key in
                    try AEAD.seal(.aes256GCM, key: key, nonce: Self.zeroNonce, plaintext: contents.bytes, aad: Self.aad(keyed))
                }
                contents.wipe()
                state = .sent(sas: keyed.sas)
                return TransferMessage.identity(sealed: sealed).bytes
            case .receiverComparing(let keyed, let early):
                state = .awaitingIdentity(keyed)
                if let early { state = .received(sas: keyed.sas, contents: try Self.open(early, keyed)) }
                return nil
            case .awaitingKey, .awaitingIdentity, .received, .sent, .rejected, .failed:
                throw ItsMeError(.invalidState, "there is no SAS to confirm (\(stateName))")
            }
        } catch let e as ItsMeError where e.kind != .invalidState {
            fail(e)
            throw e
        }
    }

    /// The SAS differed, or the person gave up: nothing is sent or kept.
    mutating func reject() throws {
        guard isRunning else { throw ItsMeError(.invalidState, "the transfer is over (\(stateName))") }
        let sas = self.sas
        switch state {
        case .awaitingKey(let ephemeral): ephemeral.wipe()
        case .senderComparing(_, let contents): contents.wipe()
        case .receiverComparing, .awaitingIdentity, .received, .sent, .rejected, .failed: break
        }
        state = .rejected(sas: sas)
    }

    /// The received identity's contents, once (receiver only).
    mutating func takeIdentity() throws -> SecretBox {
        guard case .received(let sas, let contents?) = state else {
            throw ItsMeError(.invalidState, "no received identity to take (\(role), \(stateName))")
        }
        state = .received(sas: sas, contents: nil)
        return contents
    }
}

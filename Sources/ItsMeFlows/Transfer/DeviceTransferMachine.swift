import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// The live device transfer's state machine (docs/PROTOCOL.md 17.3), as a
/// value. It reads no store: the driver checks the PIN and reads the
/// identity's contents before the sender's machine is made, and installs
/// what the receiver's machine hands over.
///
///     receiver: awaitingKey --KEY--> comparing --confirm--> awaitingIdentity --IDENTITY--> received
///               (an IDENTITY announcing a contact store goes to awaitingStore, which takes
///               its STORE chunks in order, then received; messages that arrive while
///               comparing are kept, in order, and opened on confirm)
///     sender:   comparing --confirm--> sent (the sealed identity and store queued)
///     any running state --reject--> rejected
///
/// Peer input that is wrong throws and leaves the machine `failed`, for
/// good; a call the state does not allow throws `.invalidState`.
struct DeviceTransferMachine: SteppedMachine {
    /// What both keys give: the transcript hash, the SAS and the key.
    struct Keyed {
        let transcriptHash: [UInt8]
        let sas: ShortCode
        let key: SecretBox
    }

    enum State {
        /// Receiver: waiting for the sender's key, with our one-time secret.
        case awaitingKey(ephemeral: SecretBox)
        /// Receiver: the SAS to compare; the messages that came early, in
        /// order (an identity message, then store messages).
        case receiverComparing(Keyed, early: [TransferMessage])
        /// Receiver: the person confirmed; waiting for the identity.
        case awaitingIdentity(Keyed)
        /// Receiver: the identity opened; the contact store's chunks come
        /// in, `store` holding those opened so far, of `total` bytes.
        case awaitingStore(Keyed, contents: SecretBox, store: [UInt8], total: Int)
        /// Receiver: the identity's contents, until taken (then nil), and
        /// the contact store that came with it.
        case received(sas: ShortCode, contents: SecretBox?, store: [UInt8]?)
        /// Sender: the SAS to compare, the identity's contents and the
        /// contact store (if any) to seal.
        case senderComparing(Keyed, contents: SecretBox, store: [UInt8]?)
        /// Sender: the sealed identity (and store) is queued.
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
            role: .sender, createdAt: now, offer: offer, state: .senderComparing(keyed, contents: contents, store: nil))
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
        let th = SHA256.hash(LV.cat(LV.b("itsme-transfer-v2"), offer.transferID, offer.receiverKey, senderKey))
        let seed = try HKDF.derive(ikm: shared, salt: offer.transferID, info: LV.b("itsme-transfer-seed-v2"), count: 32)
        return Keyed(
            transcriptHash: th, sas: try ShortCode.sas(seed: seed, transcriptHash: th),
            key: SecretBox(
                try HKDF.derive(ikm: seed, salt: [UInt8](), info: LV.cat(LV.b("itsme-transfer-key-v2"), th), count: AEAD.keyCount)))
    }

    /// The identity message's associated data: version, type, th.
    private static func identityAAD(_ keyed: Keyed) -> [UInt8] {
        [DeviceTransfer.version, TransferMessage.Kind.identity.rawValue] + keyed.transcriptHash
    }

    /// Store message `index`'s associated data: version, type, th, u32(index).
    private static func storeAAD(_ keyed: Keyed, _ index: Int) -> [UInt8] {
        [DeviceTransfer.version, TransferMessage.Kind.store.rawValue] + keyed.transcriptHash + u32(index)
    }

    /// The identity's nonce is 0; store chunk `index`'s is `index + 1`, 12 bytes big-endian.
    private static func nonce(_ n: Int) -> [UInt8] { [UInt8](repeating: 0, count: AEAD.nonceCount - 4) + u32(n) }

    private static func u32(_ n: Int) -> [UInt8] { withUnsafeBytes(of: UInt32(n).bigEndian, Array.init) }

    /// The most store messages a transfer carries (64 MiB in 32 KiB chunks).
    static let maxStoreMessages = TransferMessage.chunks(total: IdentityExport.maxContactStoreCount)

    // MARK: What the state shows

    /// The SAS, once both keys are known, unless the transfer failed.
    var sas: ShortCode? {
        switch state {
        case .receiverComparing(let k, _), .awaitingIdentity(let k), .awaitingStore(let k, _, _, _), .senderComparing(let k, _, _): k.sas
        case .received(let sas, _, _), .sent(let sas): sas
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
        case .awaitingKey, .receiverComparing, .awaitingIdentity, .awaitingStore, .senderComparing: true
        case .received, .sent, .rejected, .failed: false
        }
    }

    var stateName: String {
        switch state {
        case .awaitingKey: "awaitingPeer"
        case .receiverComparing, .senderComparing: "compareSAS"
        case .awaitingIdentity, .awaitingStore: "awaitingIdentity"
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
                state = .receiverComparing(keyed, early: [])
            case (.receiverComparing(let keyed, var early), .identity), (.receiverComparing(let keyed, var early), .store):
                // Held unopened until the person confirms, in order: the
                // identity first, then no more store messages than can be due.
                if case .identity = message, !early.isEmpty {
                    throw ItsMeError(.malformedMessage, "a second transfer identity message")
                }
                if case .store = message, early.isEmpty {
                    throw ItsMeError(.malformedMessage, "a transfer store message before the identity")
                }
                guard early.count <= Self.maxStoreMessages else {
                    throw ItsMeError(.malformedMessage, "more transfer messages than a contact store of 64 MiB needs")
                }
                state = .awaitingIdentity(keyed)  // the array is this function's alone: appending copies nothing
                early.append(message)
                state = .receiverComparing(keyed, early: early)
            case (.awaitingIdentity, .identity), (.awaitingStore, .store):
                try accept(message)
            case (.awaitingKey, _), (.receiverComparing, _), (.awaitingIdentity, _), (.awaitingStore, _), (.senderComparing, _),
                (.received, _), (.sent, _), (.rejected, _), (.failed, _):
                throw ItsMeError(.malformedMessage, "a transfer message out of order (type \(bytes[1]) while \(stateName))")
            }
        } catch let e as ItsMeError {
            fail(e)
            throw e
        }
    }

    /// Opens an identity or store message once the person confirmed.
    private mutating func accept(_ message: TransferMessage) throws {
        switch (state, message) {
        case (.awaitingIdentity(let keyed), .identity(let sealed)):
            let (contents, total) = try Self.openIdentity(sealed, keyed)
            state =
                total == 0
                ? .received(sas: keyed.sas, contents: contents, store: nil)
                : .awaitingStore(keyed, contents: contents, store: [], total: total)
        case (.awaitingStore(let keyed, let contents, var store, let total), .store(let sealed)):
            state = .awaitingIdentity(keyed)  // the store array is this function's alone
            let index = store.count / TransferMessage.chunkCount
            let length = TransferMessage.chunkLength(index, total: total)
            guard sealed.count == length + AEAD.tagCount else {
                throw ItsMeError(
                    .malformedMessage, "transfer store message \(index) is \(sealed.count + 2) bytes, not \(length + AEAD.tagCount + 2)")
            }
            let start = store.count
            store.append(contentsOf: repeatElement(0, count: length))
            _ = try keyed.key.withBytes { key in
                try store.withUnsafeMutableBytes { out in
                    try AEAD.open(
                        .aes256GCM, key: key, nonce: Self.nonce(index + 1), ciphertext: sealed, aad: Self.storeAAD(keyed, index),
                        into: UnsafeMutableRawBufferPointer(rebasing: out[start...]))
                }
            }
            if store.count < total {
                state = .awaitingStore(keyed, contents: contents, store: store, total: total)
                return
            }
            guard store.starts(with: IdentityExport.sqliteHeader) else {
                throw ItsMeError(.corruptData, "the contact store that came is not a SQLite database file")
            }
            state = .received(sas: keyed.sas, contents: contents, store: store)
        default:
            throw ItsMeError(.malformedMessage, "a transfer message out of order (while \(stateName))")
        }
    }

    /// Opens an identity message: the contents, checked, and the length of
    /// the contact store that follows (0: none).
    private static func openIdentity(_ sealed: [UInt8], _ keyed: Keyed) throws -> (SecretBox, Int) {
        let opened = try keyed.key.withBytes { key in
            try AEAD.open(.aes256GCM, key: key, nonce: nonce(0), ciphertext: sealed, aad: identityAAD(keyed))
        }
        guard opened.count > 4 else { throw ItsMeError(.corruptData, "the transfer's identity is truncated") }
        let total = opened.withBytes { b in b[(b.count - 4)...].reduce(0) { $0 << 8 | Int($1) } }
        let contents = try opened.withBytes { b in try SecretBytes(copying: UnsafeRawBufferPointer(rebasing: b[..<(b.count - 4)])) }
        guard total <= IdentityExport.maxContactStoreCount else {
            throw ItsMeError(.corruptData, "the transfer announces a contact store of \(total) bytes, more than 64 MiB")
        }
        _ = try IdentityExport.Contents(contents)
        return (SecretBox(contents), total)
    }

    /// Sender, before the confirmation: the contact store to send after the
    /// identity (`ContactStore.snapshot`: checked, `.invalidArgument`).
    mutating func include(store: [UInt8]) throws {
        guard role == .sender, case .senderComparing(let keyed, let contents, _) = state else {
            throw ItsMeError(.invalidState, "only the sending device, before the confirmation, adds a contact store (\(stateName))")
        }
        try IdentityExport.checkContactStore(store)
        state = .senderComparing(keyed, contents: contents, store: store)
    }

    /// The SAS matched. Sender: sends the sealed identity and store
    /// messages. Receiver: opens what has arrived (else waits).
    mutating func confirm(now: Int64) throws -> [Action] {
        try checkUsable(now: now)
        do {
            switch state {
            case .senderComparing(let keyed, let contents, let store):
                let total = store?.count ?? 0
                var plain = try SecretBytes(count: contents.count + 4)
                contents.withBytes { c in
                    plain.withMutableBytes { p in
                        p.copyMemory(from: c)
                        Self.u32(total).withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: p[c.count...]).copyMemory(from: $0) }
                    }
                }
                let sealed = try keyed.key.withBytes { key in
                    try AEAD.seal(.aes256GCM, key: key, nonce: Self.nonce(0), plaintext: plain, aad: Self.identityAAD(keyed))
                }
                var messages = [TransferMessage.identity(sealed: sealed).bytes]
                if let store {
                    for index in 0..<TransferMessage.chunks(total: total) {
                        let from = index * TransferMessage.chunkCount
                        let chunk = store[from..<(from + TransferMessage.chunkLength(index, total: total))]
                        let sealedChunk = try keyed.key.withBytes { key in
                            try chunk.withUnsafeBytes { c in
                                try AEAD.seal(.aes256GCM, key: key, nonce: Self.nonce(index + 1), plaintext: c, aad: Self.storeAAD(keyed, index))
                            }
                        }
                        messages.append(TransferMessage.store(sealed: sealedChunk).bytes)
                    }
                }
                contents.wipe()
                state = .sent(sas: keyed.sas)
                return messages.map(Action.send)
            case .receiverComparing(let keyed, let early):
                state = .awaitingIdentity(keyed)
                for message in early { try accept(message) }
                return []
            case .awaitingKey, .awaitingIdentity, .awaitingStore, .received, .sent, .rejected, .failed:
                throw ItsMeError(.invalidState, "there is no SAS to confirm (\(stateName))")
            }
        } catch let e as ItsMeError where e.kind != .invalidState {
            fail(e)
            throw e
        }
    }

    /// The SAS differed, or the person gave up: nothing is sent or kept,
    /// not even what is still queued.
    mutating func reject() throws -> [Action] {
        guard isRunning else { throw ItsMeError(.invalidState, "the transfer is over (\(stateName))") }
        let sas = self.sas
        switch state {
        case .awaitingKey(let ephemeral): ephemeral.wipe()
        case .senderComparing(_, let contents, _): contents.wipe()
        case .awaitingStore(_, let contents, _, _): contents.wipe()
        case .receiverComparing, .awaitingIdentity, .received, .sent, .rejected, .failed: break
        }
        state = .rejected(sas: sas)
        return [.discardQueued]
    }

    /// The received identity's contents and the contact store that came
    /// with it, once (receiver only).
    mutating func takeIdentity() throws -> (SecretBox, store: [UInt8]?) {
        guard case .received(let sas, let contents?, let store) = state else {
            throw ItsMeError(.invalidState, "no received identity to take (\(role), \(stateName))")
        }
        state = .received(sas: sas, contents: nil, store: nil)
        return (contents, store)
    }
}

import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// A contact exchange, in person (QR or Bluetooth) or at a distance
/// (invite or real-time, through the relay): peer bytes and the current
/// time in, bytes to send and a state out. It never touches a socket, a
/// radio or a camera; saving the result is a separate step, into the
/// `ContactStore` the exchange was made with. docs/PROTOCOL.md sections 5
/// to 8 and 16 define what it says.
///
/// The driver of `ExchangeMachine`: it keeps the outbox and the messages
/// accepted (a sealed exchange is restored by replaying them), the contact
/// `save` stored, and applies the machine's actions to the contact store
/// and the identity's secret store. Every rule about which state allows
/// what is the machine's; the C layer and the Swift API both go through
/// this type.
///
/// A failure is final: once `receive` has rejected a peer message, every
/// later call fails with `.invalidState`. Calls in the wrong order also get
/// `.invalidState` but do not end the exchange.
///
/// Not thread-safe: serialise calls on one instance (the C layer does).
public final class Exchange: CustomStringConvertible {
    /// How the two sides exchange their contact data. The raw values are the C
    /// interface's `ITSME_EXCHANGE_*` constants.
    public enum Method: UInt32, Sendable {
        /// In person, each camera reading the other's QR code.
        case qr = 0
        /// In person, over Bluetooth frames the host carries.
        case bluetooth = 1
        /// At a distance, through the relay's invite mailbox (PROTOCOL.md 16).
        case invite = 2
        /// At a distance, through a relay room while both are on a call.
        case realtime = 3

        var contactMethod: Contact.ExchangeMethod {
            switch self {
            case .qr: .qr
            case .bluetooth: .bluetooth
            case .invite: .invite
            case .realtime: .realtime
            }
        }
        var isRemote: Bool { self == .invite || self == .realtime }
    }

    /// Where the exchange stands. The raw values are the C interface's.
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
        /// A step failed (a bad message, a wrong code, a timeout): final; `failure`
        /// says why and nothing was kept.
        case failed = 6
        /// This side confirmed the SAS; the peer's decision has not arrived
        /// (Bluetooth, invite, real-time: PROTOCOL.md 8.1). A new contact is
        /// stored awaiting the peer; a known one is unchanged. When the
        /// peer's decision arrives (`.peerConfirmed` or `.peerRejected`),
        /// `settle` applies it.
        case awaitingDecision = 7
    }

    /// Facts about an exchange the host shows or acts on.
    public struct Flags: OptionSet, Sendable {
        /// The flags as the C interface's bit mask.
        public let rawValue: UInt32
        /// The flags of the bit mask `rawValue`; unknown bits are kept.
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
        /// The display name the peer sent (authenticated unless the flag
        /// `.unauthenticated` is set).
        public let name: String
        /// The fingerprint of the peer's identity key (16 upper-case hex digits).
        public let fingerprint: String
        /// nil for a source-format peer.
        public let publicKey: [UInt8]?
    }

    /// Pending exchanges expire this long after they began.
    public static let lifetime: Int64 = 24 * 3600

    private let driver: Driver<ExchangeMachine>
    private var machine: ExchangeMachine { driver.machine }
    /// The contact store the exchange saves to, given when it is created.
    private let store: ContactStore
    /// Every peer message accepted, in order: a sealed exchange is restored
    /// by replaying them.
    private var accepted: [[UInt8]] = []

    var identity: Identity { machine.identity }
    /// How this exchange runs.
    public var method: Method { machine.method }
    /// When the exchange started, in Unix seconds; it expires 24 hours later.
    public var createdAt: Int64 { machine.createdAt }
    /// Where the exchange stands.
    public var state: State { machine.publicState }
    /// The SAS, once the peer's contact data is in (nil once failed).
    public var sas: ShortCode? { machine.sas }
    /// What the peer sent, once received and checked (nil once failed).
    public var peer: Peer? { machine.peer }

    /// The SAS, or `.invalidState` saying why there is none.
    package func requireSAS() throws -> ShortCode {
        guard let sas else {
            throw ItsMeError(
                .invalidState, state == .imported ? "a source-format payload has no SAS" : "there is no SAS: the exchange is \(state)")
        }
        return sas
    }

    /// The peer, or `.invalidState` saying why there is none.
    package func requirePeer() throws -> Peer {
        guard let peer else {
            throw ItsMeError(.invalidState, state == .failed ? "the exchange has failed" : "nothing received from the peer yet")
        }
        return peer
    }
    /// Bluetooth only: the code the two devices use to find each other.
    public var sessionCode: ShortCode? { machine.sessionCode }
    /// Why the exchange failed, once it has.
    public var failure: ItsMeError? { machine.failure }
    /// The id of the contact `save` stored or found, once saved.
    public var contactID: Int64? { machine.saved?.id }
    /// The codes the inviter shows and the invitee types.
    public var inviteCode: RemoteCode? { machine.remote?.inviteCode }
    /// The invite's encryption code: the inviter passes it on by another channel
    /// than the invite code, and the invitee types both.
    public var encryptionCode: RemoteCode? { machine.remote?.encryptionCode }

    /// Facts about the peer and the decisions: an unauthenticated peer, a
    /// contact already known, the peer's confirmation or rejection.
    public var flags: Flags {
        var flags: Flags = machine.saved?.known == true ? [.knownContact] : []
        if let agreement = machine.agreement, agreement.sas == nil { flags.insert(.unauthenticated) }
        switch machine.decisions?.peers {
        case .confirmed?: flags.insert(.peerConfirmed)
        case .rejected?: flags.insert(.peerRejected)
        case nil: break
        }
        return flags
    }

    // MARK: Creation

    /// An exchange whose machine begins with `actions` (made at its creation time).
    private init(_ machine: ExchangeMachine, _ actions: [Action], store: ContactStore) throws {
        self.store = store
        driver = try Driver(machine, actions: actions, write: Self.writer(store, now: machine.createdAt))
    }

    /// A new exchange: applies the machine's first actions.
    private static func started(_ machine: ExchangeMachine, _ actions: [Action], store: ContactStore) throws -> Exchange {
        try Exchange(machine, actions, store: store)
    }

    /// `.wrongIdentity` unless `store` is a contact store of `identity`.
    private static func check(_ store: ContactStore, of identity: Identity) throws {
        guard ConstantTime.equal(store.ownerPublicKey, identity.publicKey) else {
            throw ItsMeError(.wrongIdentity, "the contact store belongs to another identity than the exchange")
        }
    }

    /// What every exchange draws first: the ephemeral and device secrets.
    private static func drawOwn<R: RandomSource>(_ rng: inout R) throws -> ExchangeMachine.Own {
        try ExchangeMachine.Own(drawing: &rng)
    }

    /// Starts a QR exchange: show `outgoing()` as a QR code, scan the
    /// peer's and pass its text to `receive`. The exchange saves the new
    /// contact to `store`, a contact store of `identity` (else
    /// `.wrongIdentity`), and keeps it.
    public static func qr<R: RandomSource>(identity: Identity, store: ContactStore, now: Int64, random: inout R) throws -> Exchange {
        try UnixTime.check(now)
        try check(store, of: identity)
        let (machine, actions) = try ExchangeMachine.start(
            identity: identity, method: .qr, now: now, sessionCode: nil, own: try drawOwn(&random), remote: nil)
        return try started(machine, actions, store: store)
    }

    /// Starts a Bluetooth exchange. Give the session code the peer shows,
    /// or nil to draw one for this device to show. `store` as for `qr`.
    /// Throws `.invalidArgument` for a time out of range, `.wrongIdentity`
    /// for a store of another identity.
    public static func bluetooth<R: RandomSource>(
        identity: Identity, store: ContactStore, sessionCode: ShortCode?, now: Int64, random: inout R
    ) throws -> Exchange {
        try UnixTime.check(now)
        try check(store, of: identity)
        let own = try drawOwn(&random)
        let code = sessionCode ?? ShortCode.random(using: &random)
        let (machine, actions) = try ExchangeMachine.start(
            identity: identity, method: .bluetooth, now: now, sessionCode: code, own: own, remote: nil)
        return try started(machine, actions, store: store)
    }

    public var description: String { "Exchange(\(method), state: \(state))" }

    // MARK: Bytes out

    /// The next bytes to send without removing them: for QR the payload
    /// text (ASCII, shown for as long as the exchange is pending), for
    /// Bluetooth the next frame. nil when there is nothing to send.
    public func peekOutgoing() -> [UInt8]? {
        switch (method, state) {
        case (_, .failed): return nil
        case (.qr, .awaitingPeer), (.qr, .compareSAS): return Array(outgoingText.utf8)
        case (.qr, _): return nil
        case (.bluetooth, _), (.invite, _), (.realtime, _): return driver.nextOutgoing
        }
    }

    /// Marks the bytes `peekOutgoing` gave as handed to the transport (QR:
    /// no effect, the code stays on screen).
    public func markSent() {
        if method != .qr { driver.markSent() }
    }

    /// How the texts a QR exchange reads begin (PROTOCOL.md 5.2 and 6): our
    /// payload's `ITSME1:` and the source app's `5|`. A host that finds
    /// several QR codes in one picture gives `receive` the one that begins so.
    public static let qrTextPrefixes = [ExchangeProtocol.qrPrefix, "5|"]

    /// Our QR payload text.
    public var outgoingText: String {
        ExchangeProtocol.qrText(machine.ownPayload?.withBytes { Array($0) } ?? [])
    }

    // MARK: Steps

    /// Runs a step on a copy of the machine (`Driver.step`): a step that
    /// failed the machine is kept as failed (its PAKE scalar forgotten,
    /// nothing more sent); a step whose writes could not all be made
    /// changes nothing in the machine.
    private func step(now: Int64?, _ body: (inout ExchangeMachine) throws -> [Action]) throws {
        try driver.step({ ((), try body(&$0)) }, write: Self.writer(store, now: now))
    }

    /// Makes one write of a step, on the step's copy of the machine: the
    /// contact store's writes the machine says the exchange's writes mean
    /// (`ExchangeMachine.contactWrites`), and the PAKE scalar's.
    private static func writer(_ store: ContactStore, now: Int64?) -> Driver<ExchangeMachine>.Write {
        { action, machine in
            let identityStore = machine.identity.store
            switch action {
            case .secret(.keepPAKEScalar(let inviteID, let inviter, let createdAt, let scalar)):
                try scalar.withBytes {
                    try PendingPAKE.keep(identityStore, inviteID: inviteID, inviter: inviter, createdAt: createdAt, scalar: $0)
                }
            case .secret(.forgetPAKEScalar(let inviteID, let inviter)):
                PendingPAKE.forget(identityStore, inviteID: inviteID, inviter: inviter)
            case .exchanged(let write):
                let (save, writes) = try machine.contactWrites(for: write)
                if let save {
                    guard let now else { throw ItsMeError(.internal, "an exchange's save without the time") }
                    let (id, known) = try store.saveExchanged(save, now: now)
                    machine.recordSaved(id: id, known: known)
                }
                for w in writes { try store.apply(w, now: now ?? machine.createdAt) }
            case .contact(let write):
                try store.apply(write, now: now ?? machine.createdAt)
            case .send, .discardQueued:
                throw ItsMeError(.internal, "an exchange step asked for a write it does not make")
            }
        }
    }

    private func required<T>(_ value: T?) throws -> T {
        guard let value else { throw ItsMeError(.internal, "an exchange step without the time or contact it needs") }
        return value
    }

    // MARK: Bytes in

    /// Feeds the peer's bytes: the scanned QR text, or one Bluetooth frame.
    /// Throws `.malformedMessage` for bytes that do not parse or do not fit the
    /// state, `.invalidKey` for a key that is not a valid point,
    /// `.authenticationFailed` for a proof or signature that does not verify,
    /// `.expired` past the exchange's lifetime: the exchange fails then.
    /// Throws `.invalidState` if the exchange does not expect bytes (nothing
    /// changes).
    public func receive(_ bytes: [UInt8], now: Int64) throws {
        try step(now: now) { m in
            try m.checkUsable(now: now)
            return try m.receive(bytes)
        }
        accepted.append(bytes)
    }

    // MARK: Invite and real-time (PROTOCOL.md 16)

    /// Starts an exchange at a distance as the inviter: draws the invite
    /// code and encryption code (show both; the other person types them),
    /// and queues the INVITE message. `realtime` runs it in a relay room
    /// while both people are on a call, otherwise through the relay's invite
    /// mailbox, where each side may go offline between its steps.
    /// `store` as for `qr`. Throws `.invalidArgument` for a time out of
    /// range, `.wrongIdentity` for a store of another identity.
    public static func invite<R: RandomSource>(
        identity: Identity, store: ContactStore, realtime: Bool, now: Int64, random: inout R
    ) throws -> Exchange {
        try UnixTime.check(now)
        let own = try drawOwn(&random)
        let inviteCode = RemoteCode.random(using: &random)
        return try invite(
            identity: identity, store: store, realtime: realtime, inviteCode: inviteCode, encryptionCode: RemoteCode.random(using: &random),
            own: own, now: now, random: &random)
    }

    /// The inviter with given codes: only for tests of an attacker who read
    /// them (the public constructor always draws fresh codes).
    static func invite<R: RandomSource>(
        identity: Identity, store: ContactStore, realtime: Bool, inviteCode: RemoteCode, encryptionCode: RemoteCode, now: Int64,
        random: inout R
    ) throws -> Exchange {
        try invite(
            identity: identity, store: store, realtime: realtime, inviteCode: inviteCode, encryptionCode: encryptionCode,
            own: try drawOwn(&random), now: now, random: &random)
    }

    private static func invite<R: RandomSource>(
        identity: Identity, store: ContactStore, realtime: Bool, inviteCode: RemoteCode, encryptionCode: RemoteCode, own: ExchangeMachine.Own,
        now: Int64, random: inout R
    ) throws -> Exchange {
        let sid = random.bytes(RemoteProtocol.sidCount)
        return try startRemote(
            identity: identity, store: store, realtime: realtime, own: own, now: now, random: &random,
            setup: { ExchangeMachine.Remote(inviter: true, inviteCode: inviteCode, encryptionCode: encryptionCode, sid: sid, scalar: $0) })
    }

    /// Draws the PAKE scalar (after everything else the side draws), sweeps
    /// abandoned scalars, and starts the machine, which keeps its scalar in
    /// the secret store.
    private static func startRemote<R: RandomSource>(
        identity: Identity, store: ContactStore, realtime: Bool, own: ExchangeMachine.Own, now: Int64, random: inout R,
        setup: (SecretBox) -> ExchangeMachine.Remote
    ) throws -> Exchange {
        try check(store, of: identity)
        var scalar = try SecretBytes(count: CPace.scalarCount)
        scalar.withMutableBytes { CPace.sampleScalar(into: $0, using: &random) }
        try PendingPAKE.sweep(identity.store, now: now)
        let (machine, actions) = try ExchangeMachine.start(
            identity: identity, method: realtime ? .realtime : .invite, now: now, sessionCode: nil, own: own,
            remote: setup(SecretBox(scalar)))
        return try started(machine, actions, store: store)
    }

    /// Joins an exchange at a distance as the invitee, with the two codes
    /// the inviter shared. A typo in either code is caught here
    /// (`.invalidArgument`), before any network call. `store` as for `qr`.
    public static func acceptInvite<R: RandomSource>(
        identity: Identity, store: ContactStore, inviteCode: String, encryptionCode: String, realtime: Bool, now: Int64, random: inout R
    ) throws -> Exchange {
        try UnixTime.check(now)
        let invite = try RemoteCode(parsing: inviteCode, what: "invite code")
        let encryption = try RemoteCode(parsing: encryptionCode, what: "encryption code")
        guard invite != encryption else {
            throw ItsMeError(.invalidArgument, "the invite code and the encryption code are the same: type both as shown")
        }
        return try startRemote(
            identity: identity, store: store, realtime: realtime, own: try drawOwn(&random), now: now, random: &random,
            setup: { ExchangeMachine.Remote(inviter: false, inviteCode: invite, encryptionCode: encryption, sid: [], scalar: $0) })
    }

    /// True for the side that created the invite (CPace's initiator).
    public var isInviter: Bool { machine.remote?.inviter ?? false }

    /// The relay ID this exchange uses, 16 bytes: the invite mailbox, or
    /// for a real-time exchange the room.
    public var relayID: [UInt8]? {
        guard let code = inviteCode else { return nil }
        return method == .realtime ? RemoteProtocol.roomID(code) : RemoteProtocol.inviteID(code)
    }

    // MARK: Finishing

    /// Stores the new contact unverified (PROTOCOL.md 8.1), or, if one with
    /// the peer's identity key exists, sets `.knownContact` and stores
    /// nothing until the exchange is confirmed. Returns the contact's id.
    /// Idempotent. Deletes contacts of other exchanges whose peer's
    /// decision did not come in time (`ContactStore.expireAwaiting`).
    @discardableResult
    public func save(now: Int64) throws -> Int64 {
        try step(now: now) { m in
            try m.checkUsable(now: now)
            return try m.save()
        }
        return try required(contactID)
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
    public func confirm(now: Int64) throws -> Int64 {
        try step(now: now) { m in
            try m.checkUsable(now: now)
            return try m.confirm()
        }
        return try required(contactID)
    }

    /// Applies the peer's decision, once it arrived, to a confirmed
    /// exchange (state `.awaitingDecision`): the peer confirmed, the contact
    /// becomes verified (a known contact gets the new seed), state
    /// `.confirmed`, and its id is returned; the peer rejected, a new
    /// contact is deleted (a known one keeps its old seed), state
    /// `.rejected`, and nil is returned. `.invalidState` before the peer's
    /// decision has arrived.
    @discardableResult
    public func settle(now: Int64) throws -> Int64? {
        try step(now: now) { m in
            try m.checkUsable(now: now)
            return try m.settle()
        }
        return state == .confirmed ? contactID : nil
    }

    /// The SAS did not match, the person gave up, or (state
    /// `.awaitingDecision`) the peer's decision will not come: the room or
    /// Bluetooth session ended first. Deletes the contact `save` added (a
    /// known contact is left exactly as it was) and sends this side's
    /// rejection when it has not decided yet and the peer's contact data
    /// was received. A failed exchange may be rejected too, to delete
    /// what it saved.
    public func reject() throws {
        try step(now: nil) { try $0.reject() }
    }

    // MARK: Sealing

    /// 2: the decision byte may be 3 (confirmed and settled); a version 1
    /// blob (from 0.1) is still read, its 1 meaning what 3 means now.
    package static let sealVersion: UInt8 = 2
    package static let sealLabel = "itsme-exchange-seal-v1"

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
    /// receive. The nonce comes from the system's generator.
    /// Throws `.invalidState` for an exchange that cannot be sealed, or the secret
    /// store's error if the device key cannot be read or made.
    public func seal() throws -> [UInt8] {
        var random = SystemRandom()
        return try seal(random: &random)
    }

    /// `seal()` with the nonce from `random`.
    package func seal<R: RandomSource>(random: inout R) throws -> [UInt8] {
        guard machine.sealable else {
            throw ItsMeError(.invalidState, "only a pending or finished Bluetooth exchange can be sealed; this one is \(state)")
        }
        let remote = machine.remote
        let sid = remote?.inviter == true ? remote?.sid ?? [] : []
        let remoteCount = remote == nil ? 0 : 1 + 8 + 8 + 1 + sid.count
        let size = 1 + 8 + remoteCount + ExchangeMachine.Own.count + 4 + 4 + 8 + 16 + 1 + 1 + 2
            + accepted.reduce(0) { $0 + 2 + $1.count }
        var w = try RecordWriter(count: size)
        w.append(UInt8(method.rawValue))
        w.append(createdAt)
        if let remote {
            // The scalar is not here: it stays in the secret store.
            w.append(UInt8(remote.inviter ? 1 : 0))
            w.append(Array(remote.inviteCode.canonical.utf8))
            w.append(Array(remote.encryptionCode.canonical.utf8))
            w.append(UInt8(sid.count))
            w.append(sid)
        }
        machine.own.drawn.withBytes { w.append($0) }
        w.append(sessionCode?.value ?? UInt32.max)
        w.append(UInt32(driver.sent))
        w.append(machine.saved?.id ?? -1)
        w.append(machine.saved == nil ? [UInt8](repeating: 0, count: 16) : store.storeID)
        w.append(UInt8(machine.saved?.known == true ? 1 : 0))
        w.append(machine.decisionCode)
        w.append(UInt16(accepted.count))
        for m in accepted {
            w.append(UInt16(m.count))
            w.append(m)
        }
        let plain = w.finish()
        let nonce = random.bytes(AEAD.nonceCount)
        let key = try Self.sealKey(identity.store)
        return [Self.sealVersion] + nonce
            + (try AEAD.seal(.chacha20Poly1305, key: key, nonce: nonce, plaintext: plain, aad: Self.sealAAD(identity)))
    }

    /// Restores a sealed exchange for `identity`, saving to `store` (as for
    /// `qr`). `.authenticationFailed` if it was sealed on another device,
    /// for another identity, or changed; `.expired` after 24 hours;
    /// `.invalidArgument` if it had saved its contact in another contact
    /// store than `store`. Restore a sealed exchange once: the library
    /// cannot tell a second copy from the first.
    public static func restore(identity: Identity, store: ContactStore, sealed: [UInt8], now: Int64) throws -> Exchange {
        try UnixTime.check(now)
        try check(store, of: identity)
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
            var setup: (inviter: Bool, codes: [RemoteCode], sid: [UInt8])?
            if method.isRemote {
                let inviter = try r.byte() == 1
                let codes = try [r.array(8), r.array(8)].map {
                    try RemoteCode(parsing: String(decoding: $0, as: UTF8.self))
                }
                let sid = try r.array(Int(try r.byte()))
                guard sid.count == (inviter ? RemoteProtocol.sidCount : 0) else {
                    throw ItsMeError(.corruptData, "sealed exchange has an invalid session id")
                }
                setup = (inviter, codes, sid)
            }
            let own = try ExchangeMachine.Own(drawn: try r.slice(ExchangeMachine.Own.count))
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
            var inputs: [[UInt8]] = []
            for _ in 0..<(try r.uint16()) { inputs.append(try r.array(Int(try r.uint16()))) }
            try r.finish()
            var remote: ExchangeMachine.Remote?
            if let setup {
                var scalar = try SecretBytes(count: CPace.scalarCount)
                let found = try scalar.withMutableBytes {
                    try PendingPAKE.load(
                        identity.store, inviteID: RemoteProtocol.inviteID(setup.codes[0]), inviter: setup.inviter, into: $0)
                }
                guard found else {
                    throw ItsMeError(.invalidState, "this invite has ended (its PAKE secret is gone from the secret store); start a new one")
                }
                remote = ExchangeMachine.Remote(
                    inviter: setup.inviter, inviteCode: setup.codes[0], encryptionCode: setup.codes[1], sid: setup.sid,
                    scalar: SecretBox(scalar))
            }
            let (machine, actions) = try ExchangeMachine.start(
                identity: identity, method: method, now: createdAt, sessionCode: sessionCode, own: own, remote: remote)
            guard saved < 0 || storeID == store.storeID else {
                throw ItsMeError(.invalidArgument, "the exchange saved its contact in another contact store: restore it with that one")
            }
            // The scalar is in the secret store already: only the messages.
            let ex = try Exchange(machine, actions.filter { if case .send = $0 { true } else { false } }, store: store)
            for input in inputs { try ex.receive(input, now: createdAt) }
            try ex.step(now: createdAt) { try $0.restoreDecision(decision) }
            try ex.step(now: createdAt) { $0.restoreSaved(saved >= 0 ? ExchangeMachine.Saved(id: saved, known: existing) : nil) }
            ex.driver.skipSent(taken)
            return ex
        }
    }
}

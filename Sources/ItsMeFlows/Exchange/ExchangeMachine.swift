import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// The contact exchange's state machine (docs/PROTOCOL.md sections 5 to 8
/// and 16), as a value. Each method has its own handshake state; once the
/// peer's contact data is in, the three share one `Agreement` (the peer,
/// the seed, the SAS, the channel that carries the two decisions).
///
///     exchanging --peer's data--> agreed (compareSAS / imported)
///     agreed --confirm--> awaiting the peer's decision, or settled confirmed
///     agreed --settle--> settled; exchanging or agreed --reject--> rejected
///
/// Transitions return `Action`s: send bytes, keep or forget the PAKE
/// scalar in the secret store, save, keep or drop the contact. The machine
/// writes to no store; `Exchange` applies the actions. Peer input that is
/// wrong throws and fails the machine for good (unless this side has
/// decided: then the bad message is refused and nothing changes); a call
/// the state does not allow throws `.invalidState` and changes nothing.
struct ExchangeMachine: SteppedMachine {
    typealias Method = Exchange.Method

    enum Decision: Equatable, Sendable {
        case confirmed
        case rejected
    }

    /// What this side drew, in one draw: its ephemeral secret (32 bytes),
    /// then its device secret (16), in one allocation that also keeps the
    /// slot of the seed derived with the peer (32). A sealed exchange keeps
    /// the drawn part.
    struct Own {
        static let count = X25519.keyCount + ExchangeProtocol.deviceSecretCount
        private static let seedRange = count..<(count + ExchangeProtocol.seedCount)

        private let box: SecretBox
        let ephemeralKey: [UInt8]

        /// `drawn`: the `count` bytes drawn.
        init<B: ByteView & ~Copyable>(drawn: borrowing B) throws {
            guard drawn.withBytes({ $0.count }) == Self.count else {
                throw ItsMeError(.invalidArgument, "an exchange draws \(Self.count) bytes")
            }
            var all = try SecretBytes(count: Self.seedRange.upperBound)
            all.withMutableBytes { out in drawn.withBytes { UnsafeMutableRawBufferPointer(rebasing: out[0..<Self.count]).copyMemory(from: $0) } }
            box = SecretBox(all)
            ephemeralKey = SecretRange(box, 0..<X25519.keyCount).withBytes { X25519.publicKey(secretKey: $0) }
        }

        /// Draws the `count` bytes from `rng` in one call, into the allocation.
        init<R: RandomSource>(drawing rng: inout R) throws {
            var all = try SecretBytes(count: Self.seedRange.upperBound)
            all.withMutableBytes { rng.fill(UnsafeMutableRawBufferPointer(rebasing: $0[0..<Self.count])) }
            box = SecretBox(all)
            ephemeralKey = SecretRange(box, 0..<X25519.keyCount).withBytes { X25519.publicKey(secretKey: $0) }
        }

        var drawn: SecretRange { SecretRange(box, 0..<Self.count) }
        var ephemeralSecret: SecretRange { SecretRange(box, 0..<X25519.keyCount) }
        var deviceSecret: SecretRange { SecretRange(box, X25519.keyCount..<Self.count) }

        /// Derives the seed with the peer (section 3) into its slot.
        func deriveSeed(peerEphemeralKey: [UInt8], fingerprints a: String, _ b: String) throws -> SecretRange {
            try box.withMutableBytes { all in
                try ExchangeProtocol.deriveSeed(
                    ephemeralSecret: UnsafeRawBufferPointer(rebasing: all[0..<X25519.keyCount]), peerEphemeralKey: peerEphemeralKey,
                    fingerprints: a, b, into: UnsafeMutableRawBufferPointer(rebasing: all[Self.seedRange]))
            }
            return SecretRange(box, Self.seedRange)
        }

        func wipe() { box.wipe() }
    }

    /// The exchange at a distance's setup: the two codes, the session id
    /// (the inviter draws it; the invitee reads it from INVITE) and the
    /// CPace scalar.
    struct Remote {
        let inviter: Bool
        let inviteCode: RemoteCode
        let encryptionCode: RemoteCode
        let sid: [UInt8]
        let scalar: SecretBox

        var inviteID: [UInt8] { RemoteProtocol.inviteID(inviteCode) }
    }

    /// kc_I, kc_R, kp_I, kp_R, kd_I, kd_R of section 16.3, in one allocation.
    struct RemoteKeys {
        private let all: SecretBox

        init(isk: borrowing SecretBytes) throws {
            var all = try SecretBytes(count: 192)
            try isk.withBytes { i in try all.withMutableBytes { try RemoteProtocol.keys(isk: i, into: $0) } }
            self.all = SecretBox(all)
        }

        private func key(_ n: Int) -> SecretRange { SecretRange(all, (32 * n)..<(32 * n + 32)) }

        var confirmI: SecretRange { key(0) }
        var confirmR: SecretRange { key(1) }
        var payloadI: SecretRange { key(2) }
        var payloadR: SecretRange { key(3) }
        var decisionI: SecretRange { key(4) }
        var decisionR: SecretRange { key(5) }
    }

    /// The CPace result: the transcript and the keys.
    struct Paked {
        let tpake: [UInt8]
        let keys: RemoteKeys
    }

    enum BluetoothStep {
        /// Our HELLO sent, waiting for the peer's.
        case sentHello(hello: [UInt8])
        /// Our KEY sent, waiting for the peer's.
        case sentKey(hello: [UInt8], peerHello: [UInt8], peerFingerprint: [UInt8], peerCommitment: [UInt8], key: [UInt8], isInitiator: Bool)
        /// Our DATA sent, waiting for the peer's.
        case sentData(BluetoothKeyed)
    }

    struct BluetoothKeyed {
        let isInitiator: Bool
        let th1: [UInt8]
        let keys: DirectionKeys
        let peerFingerprint: [UInt8]
        let peerCommitment: [UInt8]
        let peerEphemeralKey: [UInt8]
        let plaintextMine: [UInt8]
    }

    enum RemoteStep {
        /// The inviter: INVITE sent, waiting for ACCEPT.
        case sentInvite(invite: [UInt8], share: [UInt8], commitment: [UInt8])
        /// The invitee: waiting for INVITE.
        case awaitingInvite
        /// The invitee: ACCEPT sent, waiting for REPLY.
        case sentAccept(Paked, accept: [UInt8], commitment: [UInt8], plaintextMine: [UInt8], sid: [UInt8])
    }

    enum Handshake {
        case qr
        case bluetooth(BluetoothStep)
        case remote(RemoteStep)
    }

    /// What carries the two decisions once the SAS is shown.
    enum Channel {
        /// QR: both screens were seen in person.
        case inPerson
        case bluetooth(DirectionKeys)
        case remote(RemoteKeys, th: [UInt8])
    }

    /// The peer's checked contact data, and what the two now share.
    struct Agreement {
        let peer: Exchange.Peer
        let peerDeviceSecret: SensitiveBytes
        let seed: SecretRange
        /// nil for a source-format payload: nothing is authenticated.
        let sas: ShortCode?
        let channel: Channel
    }

    struct Decisions {
        var mine: Decision?
        var peers: Decision?
        /// This side's decision message has been made.
        var sent = false
        /// The inviter's confirmation through the mailbox, held until the
        /// invitee's decision arrives (16.5).
        var held: [UInt8]?
        /// The outcome, once applied: the contact kept, or not.
        var settled: Decision?
    }

    enum State {
        case exchanging(Handshake)
        case agreed(Agreement, Decisions)
        /// Rejected before the peer's contact data arrived.
        case abandoned
        case failed(ItsMeError)
    }

    let identity: Identity
    let method: Method
    let createdAt: Int64
    /// Bluetooth only: the code the two devices use to find each other.
    let sessionCode: ShortCode?
    let own: Own
    let remote: Remote?
    /// QR: our payload, shown for as long as the exchange is pending.
    let ownPayload: SensitiveBytes?
    private(set) var state: State

    /// The contact the exchange saved (`ExchangedWrite.save`): its id, and
    /// whether it was a contact before the exchange (`known`: it is
    /// replaced once confirmed, never inserted or deleted).
    struct Saved: Equatable {
        let id: Int64
        let known: Bool
    }
    private(set) var saved: Saved?

    /// The machine, and what to do first: a Bluetooth HELLO or an INVITE to
    /// send, and for an exchange at a distance the PAKE scalar to keep.
    static func start(
        identity: Identity, method: Method, now: Int64, sessionCode: ShortCode?, own: Own, remote: Remote?
    ) throws -> (ExchangeMachine, [Action]) {
        guard method.isRemote == (remote != nil), (method == .bluetooth) == (sessionCode != nil) else {
            throw ItsMeError(.invalidArgument, "an exchange's setup does not fit its method")
        }
        var actions: [Action] = []
        let handshake: Handshake
        var ownPayload: SensitiveBytes?
        switch method {
        case .qr:
            ownPayload = SensitiveBytes(
                try own.deviceSecret.withBytes {
                    try ExchangeProtocol.buildQRPayload(identity: identity, ephemeralKey: own.ephemeralKey, deviceSecret: $0)
                })
            handshake = .qr
        case .bluetooth:
            let hello = BluetoothFrame.helloBytes(fingerprint: try fingerprintBytes(identity), commitment: commitment(identity, own))
            actions.append(.send(hello))
            handshake = .bluetooth(.sentHello(hello: hello))
        case .invite, .realtime:
            guard let remote else { throw ItsMeError(.invalidArgument, "an exchange at a distance needs its codes") }
            actions.append(
                .secret(.keepPAKEScalar(inviteID: remote.inviteID, inviter: remote.inviter, createdAt: now, scalar: remote.scalar)))
            if remote.inviter {
                let share = try pakeShare(remote, sid: remote.sid)
                let c = commitment(identity, own)
                let invite = RemoteMessage.invite(sid: remote.sid, share: share, commitment: c).bytes
                actions.append(.send(invite))
                handshake = .remote(.sentInvite(invite: invite, share: share, commitment: c))
            } else {
                handshake = .remote(.awaitingInvite)
            }
        }
        let machine = ExchangeMachine(
            identity: identity, method: method, createdAt: now, sessionCode: sessionCode, own: own, remote: remote,
            ownPayload: ownPayload, state: .exchanging(handshake))
        return (machine, actions)
    }

    private init(
        identity: Identity, method: Method, createdAt: Int64, sessionCode: ShortCode?, own: Own, remote: Remote?,
        ownPayload: SensitiveBytes?, state: State
    ) {
        self.identity = identity
        self.method = method
        self.createdAt = createdAt
        self.sessionCode = sessionCode
        self.own = own
        self.remote = remote
        self.ownPayload = ownPayload
        self.state = state
    }

    static func fingerprintBytes(_ identity: Identity) throws -> [UInt8] {
        guard let bytes = Hex.decode(identity.fingerprint) else { throw ItsMeError(.internal, "our fingerprint is not hex") }
        return bytes
    }

    private static func commitment(_ identity: Identity, _ own: Own) -> [UInt8] {
        own.deviceSecret.withBytes {
            ExchangeProtocol.commitment(
                identityKey: identity.publicKey, ephemeralKey: own.ephemeralKey, name: Array(identity.name.utf8), deviceSecret: $0)
        }
    }

    /// Y = y * g, with g from the encryption code, the invite code and sid.
    static func pakeShare(_ remote: Remote, sid: [UInt8]) throws -> [UInt8] {
        let prs = Array(remote.encryptionCode.canonical.utf8)
        let g = try CPace.generator(prs: prs, ci: RemoteProtocol.channelIdentifier(remote.inviteCode), sid: sid)
        return try g.withBytes { gp in
            try remote.scalar.withBytes { y in
                guard let share = CPace.scalarMult(scalar: y, point: gp) else {
                    throw ItsMeError(.internal, "the CPace share is the identity")
                }
                return share
            }
        }
    }

    // MARK: What the state shows

    var publicState: Exchange.State {
        switch state {
        case .exchanging: .awaitingPeer
        case .agreed(let agreement, let d):
            if let settled = d.settled { settled == .confirmed ? .confirmed : .rejected }
            else if d.mine == .confirmed { .awaitingDecision }
            else { agreement.sas == nil ? .imported : .compareSAS }
        case .abandoned: .rejected
        case .failed: .failed
        }
    }

    var agreement: Agreement? {
        if case .agreed(let agreement, _) = state { return agreement }
        return nil
    }

    var decisions: Decisions? {
        if case .agreed(_, let d) = state { return d }
        return nil
    }

    var failure: ItsMeError? {
        if case .failed(let error) = state { return error }
        return nil
    }

    /// The SAS, once the peer's data is in and unless the exchange failed.
    var sas: ShortCode? { agreement?.sas }

    var peer: Exchange.Peer? { agreement?.peer }

    /// For a sealed exchange: 0 no decision, 1 confirmed and waiting for
    /// the peer, 2 rejected, 3 confirmed and settled.
    var decisionCode: UInt8 {
        switch state {
        case .exchanging, .failed: 0
        case .abandoned: 2
        case .agreed(_, let d):
            switch (d.settled, d.mine) {
            case (.confirmed?, _): 3
            case (.rejected?, _): 2
            case (nil, .confirmed?): 1
            case (nil, .rejected?): 2
            case (nil, nil): 0
            }
        }
    }

    /// The exchanged contact's data, once agreed.
    private func exchanged(_ a: Agreement) -> ExchangedContact {
        ExchangedContact(
            name: a.peer.name, fingerprint: a.peer.fingerprint, publicKey: a.peer.publicKey, seed: a.seed,
            mine: own.deviceSecret, theirs: a.peerDeviceSecret, method: method.contactMethod)
    }

    // MARK: Transitions

    /// Ends the machine for good and wipes what this side drew. The driver
    /// then forgets the PAKE scalar (`forgetPAKEScalar`).
    mutating func fail(_ error: ItsMeError) {
        own.wipe()
        remote?.scalar.wipe()
        state = .failed(error)
    }

    /// The exchange ended: its scalar is wiped, so that a copy of the sealed
    /// exchange cannot be restored.
    var actionsOnFailure: [Action] { forgetPAKEScalar }

    var forgetPAKEScalar: [Action] {
        guard let remote else { return [] }
        return [.secret(.forgetPAKEScalar(inviteID: remote.inviteID, inviter: remote.inviter))]
    }

    /// `.invalidState` once failed; `.expired` (and failed) once a pending
    /// exchange is older than `Exchange.lifetime`.
    mutating func checkUsable(now: Int64) throws {
        try UnixTime.check(now)
        if let failure {
            throw ItsMeError(.invalidState, "the exchange has failed (\(failure.message)); start a new one")
        }
        let pending: Bool
        switch state {
        case .exchanging: pending = true
        case .agreed(_, let d): pending = d.settled == nil
        case .abandoned, .failed: pending = false
        }
        if now - createdAt > Exchange.lifetime, pending {
            let error = ItsMeError(.expired, "the exchange began more than 24 hours ago; start a new one")
            fail(error)
            throw error
        }
    }

    /// Feeds the peer's bytes: the scanned QR text, a Bluetooth frame, a
    /// message of the exchange at a distance.
    mutating func receive(_ bytes: [UInt8]) throws -> [Action] {
        if method == .qr {
            guard case .exchanging = state else { throw ItsMeError(.invalidState, "the peer's payload was already received") }
            // A text that is not an exchange payload (another QR code) does
            // not end the exchange: the person scans again.
            guard Exchange.qrTextPrefixes.contains(where: { bytes.starts(with: $0.utf8) }) else {
                throw ItsMeError(.invalidArgument, "this is not an ItsMe exchange payload (scan the other person's ItsMe code)")
            }
            try ExchangeProtocol.checkQRTextLength(bytes)
        }
        switch state {
        case .agreed(_, let d) where d.peers != nil:
            // The peer's decision was its last message: the exchange has
            // them all (PROTOCOL.md 7.1, 16.3; as Online Verify, 11.2).
            throw ItsMeError(.invalidState, "the peer's decision is in; nothing more comes from the peer")
        case .agreed(_, let d) where d.mine != nil || d.settled != nil:
            // This side has decided: only the peer's decision may still
            // come, and a bad message is refused without undoing ours.
            return try handle(bytes)
        case .abandoned:
            throw ItsMeError(.invalidState, "the exchange was rejected; nothing more comes from the peer")
        case .failed(let error):
            throw ItsMeError(.invalidState, "the exchange has failed (\(error.message)); start a new one")
        case .exchanging, .agreed:
            do {
                return try handle(bytes)
            } catch let e as ItsMeError {
                // A scanned or pasted text that is not a whole payload
                // changes nothing: the person reads it again (5.2).
                if !(method == .qr && e.kind == .invalidArgument) { fail(e) }
                throw e
            }
        }
    }

    private mutating func handle(_ bytes: [UInt8]) throws -> [Action] {
        switch method {
        case .qr: return try receiveQR(bytes)
        case .bluetooth: return advance(to: try receiveFrame(bytes))
        case .invite, .realtime: return advance(to: try receiveRemote(bytes))
        }
    }

    func deriveSeed(peerEphemeralKey: [UInt8], peerFingerprint: String) throws -> SecretRange {
        try own.deriveSeed(peerEphemeralKey: peerEphemeralKey, fingerprints: identity.fingerprint, peerFingerprint)
    }

    // MARK: QR (sections 5 and 6)

    /// A next state and what to do, as the handshakes compute them.
    typealias Step = (state: State, actions: [Action])

    private mutating func advance(to step: Step) -> [Action] {
        state = step.state
        return step.actions
    }

    private mutating func receiveQR(_ bytes: [UInt8]) throws -> [Action] {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            // After the prefix, a misread (5.2 step 2); a source text is
            // malformed (section 6).
            guard bytes.starts(with: Array(ExchangeProtocol.qrPrefix.utf8)) else {
                throw ItsMeError(.malformedMessage, "the payload is not UTF-8 text")
            }
            throw ItsMeError(.invalidArgument, "the QR payload is not whole: it is not UTF-8 text; read it again")
        }
        guard let ownPayload else { throw ItsMeError(.internal, "a QR exchange without its payload") }
        if text.hasPrefix(ExchangeProtocol.qrPrefix) {
            let p = try ExchangeProtocol.parseQR(text.dropFirst(ExchangeProtocol.qrPrefix.count))
            guard !ConstantTime.equal(p.identityKey, identity.publicKey) else {
                throw ItsMeError(.invalidKey, "the scanned payload carries our own identity key")
            }
            let seed = try deriveSeed(peerEphemeralKey: p.ephemeralKey, peerFingerprint: p.fingerprint)
            let th = ExchangeProtocol.qrTranscriptHash(
                ownPayload.withBytes { Array($0) }, keyA: identity.publicKey, p.raw, keyB: p.identityKey)
            state = .agreed(
                Agreement(
                    peer: Exchange.Peer(name: p.name, fingerprint: p.fingerprint, publicKey: p.identityKey),
                    peerDeviceSecret: SensitiveBytes(p.deviceSecret), seed: seed,
                    sas: try ShortCode.sas(seed: seed, transcriptHash: th), channel: .inPerson),
                Decisions())
        } else {
            let p = try ExchangeProtocol.parseSource(text)
            guard p.fingerprint != identity.fingerprint else {
                throw ItsMeError(.invalidKey, "the scanned payload carries our own fingerprint")
            }
            let seed = try deriveSeed(peerEphemeralKey: p.ephemeralKey, peerFingerprint: p.fingerprint)
            state = .agreed(
                Agreement(
                    peer: Exchange.Peer(name: p.name, fingerprint: p.fingerprint, publicKey: nil),
                    peerDeviceSecret: SensitiveBytes(p.deviceSecret), seed: seed, sas: nil, channel: .inPerson),
                Decisions())
        }
        return []
    }

    // MARK: Decisions (section 8.1)

    /// Records the peer's authenticated decision; releases a held one of ours.
    func peerDecided(_ decision: Decision) -> Step {
        guard case .agreed(let a, var d) = state else { return (state, []) }
        d.peers = decision
        var actions: [Action] = []
        if let held = d.held {
            actions.append(.send(held))
            d.held = nil
        }
        return (.agreed(a, d), actions)
    }

    /// Records this side's decision and makes the message that carries it:
    /// a Bluetooth CONFIRM, a remote DECISION (the inviter's confirmation
    /// through the mailbox is held until the invitee's decision arrives).
    private func decide(_ decision: Decision, _ a: Agreement, _ d: inout Decisions) throws -> [Action] {
        d.mine = decision
        guard !d.sent else { return [] }
        d.sent = true
        switch a.channel {
        case .inPerson:
            return []
        case .bluetooth(let keys):
            return [.send(try keys.seal(type: BluetoothFrame.Kind.confirm.rawValue, counter: 1, [decision == .confirmed ? 1 : 0]))]
        case .remote(let keys, let th):
            guard let remote else { throw ItsMeError(.internal, "an exchange at a distance without its codes") }
            let m = try (remote.inviter ? keys.decisionI : keys.decisionR).withBytes {
                try RemoteProtocol.decisionMessage(key: $0, initiator: remote.inviter, th: th, confirmed: decision == .confirmed)
            }
            if method == .invite, remote.inviter, decision == .confirmed, d.peers == nil {
                d.held = m
                return []
            }
            return [.send(m)]
        }
    }

    // MARK: The contact it saved

    /// What one of the exchange's writes (`ExchangedWrite`) means for the
    /// contact store, given the contact saved so far: `save`, the contact
    /// to save while none is (the driver saves it, `ContactStore.saveExchanged`,
    /// and tells the step's copy, `recordSaved`); then the store's writes:
    /// a known contact replaced, a new one settled; only a new one awaits
    /// the peer or is deleted.
    func contactWrites(for write: ExchangedWrite) throws -> (save: ExchangedContact?, writes: [ContactWrite]) {
        switch (write, saved) {
        case (.save(let contact), nil): return (contact, [])
        case (.save, _?), (.drop, nil): return (nil, [])
        case (.drop, let saved?): return (nil, saved.known ? [] : [.deleteExchanged(contactID: saved.id)])
        case (.keep(let contact), let saved?):
            return (nil, [saved.known ? .replaceExchanged(contactID: saved.id, contact) : .settleExchanged(contactID: saved.id)])
        case (.awaitPeer(let until), let saved?): return (nil, saved.known ? [] : [.awaitPeer(contactID: saved.id, until: until)])
        case (.keep, nil), (.awaitPeer, nil): throw ItsMeError(.internal, "an exchange write before its contact was saved")
        }
    }

    /// The driver saved the contact (`contactWrites`' save).
    mutating func recordSaved(id: Int64, known: Bool) { saved = Saved(id: id, known: known) }

    /// A restored exchange's saved contact, as it was sealed.
    mutating func restoreSaved(_ saved: Saved?) -> [Action] {
        self.saved = saved
        return []
    }

    /// Saves the contact before a decision (`Exchange.save`): only while the
    /// SAS is compared, or a source-format payload was read (8.1). Saving
    /// again saves nothing more (the driver's write is idempotent).
    mutating func save() throws -> [Action] {
        guard case .agreed(let a, let d) = state, d.mine == nil, d.settled == nil else {
            throw ItsMeError(.invalidState, "nothing to save: the exchange is \(publicState)")
        }
        return [.exchanged(.save(exchanged(a)))]
    }

    /// Whether the exchange may be sealed (`Exchange.seal`): a pending one
    /// (awaiting the peer, comparing the SAS, imported, or awaiting the
    /// peer's decision), or a finished Bluetooth one, which may still have
    /// its CONFIRM frame to send and the peer's to receive.
    var sealable: Bool {
        switch publicState {
        case .awaitingPeer, .compareSAS, .imported, .awaitingDecision: true
        case .confirmed, .rejected: method == .bluetooth
        case .failed: false
        }
    }

    /// The person said the SAS matches. Settled at once for QR, or when the
    /// peer's confirmation is in; else waiting for the peer's decision.
    mutating func confirm() throws -> [Action] {
        guard case .agreed(let a, var d) = state, d.mine == nil, d.settled == nil, a.sas != nil else {
            let s = publicState
            throw ItsMeError(
                .invalidState,
                s == .imported
                    ? "a source-format contact has no SAS to confirm: save it, it stays unauthenticated"
                    : "there is no SAS to confirm: the exchange is \(s)")
        }
        guard d.peers != .rejected else {
            throw ItsMeError(.invalidState, "the peer rejected the SAS; the exchange cannot be confirmed: reject it")
        }
        let contact = exchanged(a)
        if method == .qr || d.peers == .confirmed {
            let sends = try decide(.confirmed, a, &d)
            d.settled = .confirmed
            state = .agreed(a, d)
            return [.exchanged(.save(contact)), .exchanged(.keep(contact))] + sends + forgetPAKEScalar
        }
        let sends = try decide(.confirmed, a, &d)
        state = .agreed(a, d)
        return [.exchanged(.save(contact)), .exchanged(.awaitPeer(until: createdAt + Exchange.lifetime))] + sends
    }

    /// Applies the peer's decision to a confirmed exchange that waits for it.
    mutating func settle() throws -> [Action] {
        guard case .agreed(let a, var d) = state, d.mine == .confirmed, d.settled == nil, let peers = d.peers else {
            throw ItsMeError(
                .invalidState,
                publicState == .awaitingDecision
                    ? "the peer's decision has not arrived yet" : "nothing to settle: the exchange is \(publicState)")
        }
        d.settled = peers
        state = .agreed(a, d)
        let apply: Action = .exchanged(peers == .confirmed ? .keep(exchanged(a)) : .drop)
        return [apply] + forgetPAKEScalar
    }

    /// The SAS did not match, the person gave up, or the peer's decision
    /// will not come: drops the contact `save` added, and sends this side's
    /// rejection if it has not decided yet.
    mutating func reject() throws -> [Action] {
        switch state {
        case .exchanging:
            state = .abandoned
            return [.exchanged(.drop)] + forgetPAKEScalar
        case .agreed(let a, var d) where d.settled == nil:
            let sends = d.mine == nil ? try decide(.rejected, a, &d) : []
            // An inviter's confirmation held for the invitee's decision
            // (16.5) is never sent once this side rejected.
            d.held = nil
            d.settled = .rejected
            state = .agreed(a, d)
            return [.exchanged(.drop)] + sends + forgetPAKEScalar
        case .failed:
            // A failed exchange is rejected only to delete the new contact
            // it saved.
            guard let s = saved, !s.known else {
                throw ItsMeError(.invalidState, "the exchange is failed and cannot be rejected")
            }
            saved = nil
            return [.contact(.deleteExchanged(contactID: s.id))]
        case .agreed, .abandoned:
            throw ItsMeError(.invalidState, "the exchange is \(publicState) and cannot be rejected")
        }
    }

    /// A restored exchange's decision (`decisionCode`), after its peer
    /// messages were replayed: the same state, the same messages queued.
    /// A QR exchange is sealed before any decision, an exchange at a
    /// distance before it settled; a Bluetooth one also after.
    mutating func restoreDecision(_ code: UInt8) throws -> [Action] {
        let possible: ClosedRange<UInt8> = method == .qr ? 0...0 : method == .bluetooth ? 0...3 : 0...1
        guard possible.contains(code) else { throw ItsMeError(.corruptData, "sealed exchange has an invalid decision") }
        switch (code, state) {
        case (0, _):
            return []
        case (2, .exchanging):
            state = .abandoned
            return []
        case (1, .agreed(let a, var d)), (2, .agreed(let a, var d)), (3, .agreed(let a, var d)):
            guard d.mine == nil, d.settled == nil, a.sas != nil || code == 2 else { break }
            let sends = try decide(code == 2 ? .rejected : .confirmed, a, &d)
            if code != 1 { d.settled = code == 2 ? .rejected : .confirmed }
            state = .agreed(a, d)
            return sends
        default:
            break
        }
        throw ItsMeError(.corruptData, "the sealed exchange's decision does not fit its messages")
    }
}

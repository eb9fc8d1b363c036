import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// The Online Verify state machine (docs/PROTOCOL.md section 11), as a
/// value: each transition checks the message against the state, moves to
/// the next state and returns what the driver must do (send bytes, write
/// the outcome to the contact). It reads and writes no store.
///
///     initiator: sentCommit --KEY--> awaitingProof --PROOF--> comparingSAS
///     responder: awaitingCommit --COMMIT--> sentKey --KEY--> awaitingProof --PROOF--> comparingSAS
///     comparingSAS --confirm--> confirmed;  running or comparingSAS --reject--> rejected
///     awaitingProof --PROOF of a device bound differently--> bindingDiffers (11.4)
///
/// Peer input that is wrong throws and leaves the machine `failed`, for
/// good; a call the state does not allow throws `.invalidState` and changes
/// nothing.
struct OnlineVerifyMachine: SteppedMachine {
    /// What both proofs checked give.
    struct Checked {
        let sas: ShortCode
        let outcome: VoiceSession.Outcome
        let peerSecret: PeerDeviceSecret
        let peerProfile: SecretBox?
    }

    /// Keys derived and our PROOF sent: waiting for the peer's PROOF.
    struct Keyed {
        let transcriptHash: [UInt8]
        let keys: DirectionKeys
        /// The `bind` the peer's KEY carried (11.4), nil if it is not bound.
        let peerBind: [UInt8]?
    }

    enum State {
        /// Initiator: COMMIT sent, waiting for the responder's KEY.
        case sentCommit(commit: [UInt8])
        /// Responder: waiting for the initiator's COMMIT.
        case awaitingCommit
        /// Responder: KEY sent, waiting for the initiator's KEY (which must
        /// match `commitment`, the hash its COMMIT carried).
        case sentKey(commit: [UInt8], commitment: [UInt8], key: [UInt8])
        case awaitingProof(Keyed)
        /// Both proofs checked: the two read the SAS aloud.
        case comparingSAS(Checked)
        case confirmed(Checked)
        /// The SAS differed, or the host gave up (`sas` if it was shown).
        case rejected(sas: ShortCode?)
        /// The peer's PROOF checked, but its device is bound differently
        /// (11.4): one of the two binds and the other does not, or
        /// (`otherCall`) both bind, to different calls. Nothing is recorded.
        case bindingDiffers(otherCall: Bool)
        case failed(ItsMeError)
    }

    let session: WindowedSession
    /// 16 bytes; the relay room's name is its lowercase hex.
    let roomID: [UInt8]
    private let challenge: [UInt8]
    private let tagSecrets: TagSecrets
    /// This session's `bind` (11.4), nil if it is not bound to a call.
    let bind: [UInt8]?
    /// Our profile reference (PROTOCOL.md 18.3), sent in our PROOF.
    private var myProfile: SecretBox?
    private(set) var state: State

    static func roomID<S: ByteView & ~Copyable>(seed: borrowing S, window: Int64) throws -> [UInt8] {
        Array(HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-room-id-v1"), try VoiceProtocol.windowBytes(window))).prefix(16))
    }

    /// `bind` of 11.4: what a KEY says of the session's call binding.
    static func bind<S: ByteView & ~Copyable>(seed: borrowing S, window: Int64, binding: SecretBox) throws -> [UInt8] {
        var cb = binding.withBytes { Array($0) }
        var message = LV.cat(LV.b("itsme-ov-binding-v1"), try VoiceProtocol.windowBytes(window), cb)
        defer {
            wipe(&cb)
            wipe(&message)
        }
        return HMACSHA256.mac(key: seed, message: message)
    }

    /// The machine and the first message to send (the initiator's COMMIT;
    /// none for the responder). The random source gives the ephemeral
    /// secret, then the challenge.
    static func start<R: RandomSource>(
        contact: Contact, window: Int64, now: Int64, seed: SecretBox, myPID: [UInt8], tagSecrets: TagSecrets,
        binding: SecretBox? = nil, random: inout R
    ) throws -> (OnlineVerifyMachine, [Action]) {
        let secret = SecretRange(SecretBox(try SecretBytes(randomCount: X25519.keyCount, using: &random)))
        let session = try WindowedSession(
            contact: contact, window: window, now: now, seed: seed, myPID: myPID, ephemeralSecret: secret)
        let challenge = random.bytes(32)
        let roomID = try Self.roomID(seed: seed, window: window)
        let bind = try binding.map { try Self.bind(seed: seed, window: window, binding: $0) }
        guard session.isInitiator else {
            return (OnlineVerifyMachine(session, roomID, challenge, tagSecrets, bind, .awaitingCommit), [])
        }
        let commit = OnlineVerifyMessage.commit(hash: Self.commitment(session.ephemeralKey, challenge)).bytes
        return (OnlineVerifyMachine(session, roomID, challenge, tagSecrets, bind, .sentCommit(commit: commit)), [.send(commit)])
    }

    private init(
        _ session: WindowedSession, _ roomID: [UInt8], _ challenge: [UInt8], _ tags: TagSecrets, _ bind: [UInt8]?, _ state: State
    ) {
        self.session = session
        self.roomID = roomID
        self.challenge = challenge
        self.tagSecrets = tags
        self.bind = bind
        self.state = state
    }

    private static func commitment(_ key: [UInt8], _ challenge: [UInt8]) -> [UInt8] {
        SHA256.hash(LV.cat(LV.b("itsme-ov-commit-v1"), key, challenge))
    }

    // MARK: What the state shows

    var isRunning: Bool {
        switch state {
        case .sentCommit, .awaitingCommit, .sentKey, .awaitingProof: true
        case .comparingSAS, .confirmed, .rejected, .bindingDiffers, .failed: false
        }
    }

    /// The SAS, once both proofs are checked and unless the session failed.
    var sas: ShortCode? {
        switch state {
        case .comparingSAS(let c), .confirmed(let c): c.sas
        case .rejected(let sas): sas
        case .sentCommit, .awaitingCommit, .sentKey, .awaitingProof, .bindingDiffers, .failed: nil
        }
    }

    /// The device tag check's outcome, once both proofs are checked.
    var outcome: VoiceSession.Outcome? {
        switch state {
        case .comparingSAS(let c), .confirmed(let c): c.outcome
        case .sentCommit, .awaitingCommit, .sentKey, .awaitingProof, .rejected, .bindingDiffers, .failed: nil
        }
    }

    var failure: ItsMeError? {
        if case .failed(let error) = state { return error }
        return nil
    }

    // MARK: Transitions

    /// Ends the machine for good (a peer's bad message, a failed write).
    mutating func fail(_ error: ItsMeError) {
        myProfile = nil
        session.ephemeralSecret.wipe()
        state = .failed(error)
    }

    /// `.invalidState` once failed; `.expired` (and failed) once the
    /// session outlived its lifetime before it ended.
    private mutating func checkUsable(now: Int64) throws {
        try UnixTime.check(now)
        if let failure {
            throw ItsMeError(.invalidState, "the session has failed (\(failure.message)); start a new one")
        }
        do {
            try session.checkAlive(now: now, "the session")
        } catch let e as ItsMeError {
            switch state {
            case .confirmed, .rejected, .bindingDiffers, .failed:
                return
            case .sentCommit, .awaitingCommit, .sentKey, .awaitingProof, .comparingSAS:
                fail(e)
                throw e
            }
        }
    }

    /// Feeds one message from the peer.
    mutating func receive(_ bytes: [UInt8], now: Int64) throws -> [Action] {
        try checkUsable(now: now)
        guard isRunning else { throw ItsMeError(.invalidState, "the messages are complete (\(stateName))") }
        do {
            return try handle(try OnlineVerifyMessage(parsing: bytes))
        } catch let e as ItsMeError {
            fail(e)
            throw e
        }
    }

    private mutating func handle(_ message: OnlineVerifyMessage) throws -> [Action] {
        let outOfOrder = ItsMeError(.malformedMessage, "Online Verify \(message.kind) message out of order")
        switch (state, message) {
        case (.awaitingCommit, .commit(let hash)):
            let key = OnlineVerifyMessage.key(ephemeralKey: session.ephemeralKey, challenge: challenge, bind: bind).bytes
            state = .sentKey(commit: message.bytes, commitment: hash, key: key)
            return [.send(key)]

        case (.sentCommit(let commit), .key(let peerKey, let peerChallenge, let peerBind)):
            try checkNotReflected(peerKey, peerChallenge)
            let key = OnlineVerifyMessage.key(ephemeralKey: session.ephemeralKey, challenge: challenge, bind: bind).bytes
            let proof = try keyed(commit: commit, keyR: message.bytes, keyI: key, peerKey: peerKey, peerBind: peerBind)
            return [.send(key), .send(proof)]

        case (.sentKey(let commit, let commitment, let key), .key(let peerKey, let peerChallenge, let peerBind)):
            // Authentication (the commitment) before contents (a reflection),
            // as PROTOCOL.md section 1 orders the checks.
            guard ConstantTime.equal(Self.commitment(peerKey, peerChallenge), commitment) else {
                throw ItsMeError(.authenticationFailed, "the peer's key does not match its commitment")
            }
            try checkNotReflected(peerKey, peerChallenge)
            return [.send(try keyed(commit: commit, keyR: key, keyI: message.bytes, peerKey: peerKey, peerBind: peerBind))]

        case (.awaitingProof(let keyed), .proof(let sealed)):
            let checked = try check(sealed, keyed)
            // Only now, from a device shown to hold the seed, does the peer's
            // binding say anything (11.4).
            switch (bind, keyed.peerBind) {
            case (nil, nil): state = .comparingSAS(checked)
            case (let mine?, let theirs?) where ConstantTime.equal(mine, theirs): state = .comparingSAS(checked)
            case (.some, .some): state = .bindingDiffers(otherCall: true)
            case (nil, .some), (.some, nil): state = .bindingDiffers(otherCall: false)
            }
            if case .bindingDiffers = state { myProfile = nil }
            return []

        case (.awaitingCommit, _), (.sentCommit, _), (.sentKey, _), (.awaitingProof, _):
            throw outOfOrder
        case (.comparingSAS, _), (.confirmed, _), (.rejected, _), (.bindingDiffers, _), (.failed, _):
            throw outOfOrder  // invariant: `receive` lets only the running states through
        }
    }

    private func checkNotReflected(_ peerKey: [UInt8], _ peerChallenge: [UInt8]) throws {
        guard peerKey != session.ephemeralKey, peerChallenge != challenge else {
            throw ItsMeError(.invalidKey, "the peer's key or challenge equals ours (a reflected message)")
        }
    }

    /// Derives the keys from the transcript, moves to `awaitingProof` and
    /// returns our PROOF.
    private mutating func keyed(commit: [UInt8], keyR: [UInt8], keyI: [UInt8], peerKey: [UInt8], peerBind: [UInt8]?) throws
        -> [UInt8]
    {
        let pids = session.ordered(mine: session.myPID, peers: session.peerPID)
        let hash = SHA256.hash(
            LV.cat(
                LV.b("itsme-online-verify-v1"), roomID, VoiceProtocol.u64(session.window), pids.initiator, pids.responder,
                commit, keyR, keyI))
        let keys = try session.keys(
            transcriptHash: hash, saltLabel: "itsme-ov-salt-v1", keyLabel: "itsme-ov-key-v1", peerEphemeralKey: peerKey)
        let keyed = Keyed(transcriptHash: hash, keys: keys, peerBind: peerBind)
        let proof = OnlineVerifyProof(
            proof: session.roleMAC("itsme-ov-proof-v1", role: session.role, transcriptHash: hash),
            deviceTag: try deviceTag(pid: session.myPID, secret: tagSecrets.speaking, keyed), profileReference: myProfile)
        var plain = proof.plaintext
        defer { wipe(&plain) }
        let sealed = try keys.seal(type: OnlineVerifyMessage.Kind.proof.rawValue, counter: 0, plain)
        state = .awaitingProof(keyed)
        return sealed
    }

    /// dtag of section 11.3.
    private func deviceTag(pid: [UInt8], secret: SecretBox, _ keyed: Keyed) throws -> [UInt8] {
        try VoiceProtocol.withTagKey(seed: session.seed) { t in
            var message = secret.withBytes { LV.cat(LV.b("itsme-ov-device-v1"), pid, keyed.transcriptHash, Array($0)) }
            defer { wipe(&message) }
            return HMACSHA256.mac(key: t, message: message)
        }
    }

    private func check(_ sealed: [UInt8], _ keyed: Keyed) throws -> Checked {
        var plain = try keyed.keys.open(sealed, counter: 0, what: "the peer's PROOF")
        defer { wipe(&plain) }
        let proof = try OnlineVerifyProof(parsing: plain)
        let expected = session.roleMAC("itsme-ov-proof-v1", role: session.peerRole, transcriptHash: keyed.transcriptHash)
        guard ConstantTime.equal(proof.proof, expected) else {
            throw ItsMeError(.authenticationFailed, "the peer's proof is wrong: it does not hold the shared secret")
        }
        func matches(_ secret: SecretBox) throws -> Bool {
            try secret.count > 0 && ConstantTime.equal(proof.deviceTag, deviceTag(pid: session.peerPID, secret: secret, keyed))
        }
        let matchesCurrent = try matches(tagSecrets.theirs)
        let matchesPrevious = try matches(tagSecrets.theirsPrevious)
        let matchesPending = try matches(tagSecrets.theirsPending)
        let outcome: VoiceSession.Outcome
        if matchesCurrent || matchesPrevious || matchesPending {
            outcome = .verified
        } else {
            outcome = tagSecrets.theirs.count == 0 ? .verifiedTagUnchecked : .deviceChanged
        }
        // The current secret wins a tie, then the previous, then the pending.
        let peerSecret: PeerDeviceSecret =
            matchesCurrent ? .current : matchesPrevious ? .previous : matchesPending ? .pending : .current
        return Checked(
            sas: try ShortCode.sas(seed: session.seed, transcriptHash: keyed.transcriptHash), outcome: outcome,
            peerSecret: peerSecret, peerProfile: proof.profileReference)
    }

    /// Sets the profile reference to send in our PROOF; only before the
    /// PROOF is made (before the peer's KEY arrives).
    mutating func shareProfile(_ reference: SecretBox) throws {
        guard reference.count == ProfileRecord.referenceCount else {
            throw ItsMeError(.invalidArgument, "a profile reference is \(ProfileRecord.referenceCount) bytes")
        }
        switch state {
        case .sentCommit, .awaitingCommit, .sentKey:
            myProfile = reference
        case .awaitingProof, .comparingSAS, .confirmed, .rejected, .bindingDiffers, .failed:
            throw ItsMeError(.invalidState, "a profile reference must be shared before the PROOF is made (the session is \(stateName))")
        }
    }

    /// The peer's profile reference, once the SAS is confirmed.
    func peerProfileReference() throws -> SecretBox {
        guard case .confirmed(let checked) = state else {
            throw ItsMeError(.invalidState, "the peer's profile is offered once the SAS is confirmed (the session is \(stateName))")
        }
        guard let reference = checked.peerProfile else { throw ItsMeError(.notFound, "the peer shared no profile in this session") }
        return reference
    }

    /// The SAS matched: the outcome, and the write that records it.
    mutating func confirm(now: Int64) throws -> (VoiceSession.Outcome, [Action]) {
        try checkUsable(now: now)
        guard case .comparingSAS(let checked) = state else {
            throw ItsMeError(.invalidState, "there is no SAS to confirm (\(stateName))")
        }
        state = .confirmed(checked)
        let write = ContactWrite.verification(contactID: session.contactID, outcome: checked.outcome, peerSecret: checked.peerSecret)
        return (checked.outcome, [.contact(write)])
    }

    /// The SAS differed, or the host stops: nothing is recorded.
    mutating func reject() throws {
        switch state {
        case .sentCommit, .awaitingCommit, .sentKey, .awaitingProof, .comparingSAS:
            myProfile = nil
            state = .rejected(sas: sas)
        case .confirmed, .rejected, .bindingDiffers, .failed:
            throw ItsMeError(.invalidState, "the session is \(stateName)")
        }
    }

    /// The public state's name, for messages.
    var stateName: String {
        switch state {
        case .sentCommit, .awaitingCommit, .sentKey, .awaitingProof: "running"
        case .comparingSAS: "compareSAS"
        case .confirmed: "confirmed"
        case .rejected: "rejected"
        case .bindingDiffers(let otherCall): otherCall ? "otherCall" : "bindingDiffers"
        case .failed: "failed"
        }
    }
}

import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// The Security PIN Update state machine (docs/PROTOCOL.md 10.3), as a
/// value. It reads and writes no store: it asks its driver to store the new
/// secrets as pending, to commit them, and to send frames, in the order the
/// protocol requires (a write always before the frame that follows it).
///
///     initiator: sentKey --KEY--> sentNew --NEW--> done (DONE sent)
///     responder: sentKey --KEY--> awaitingNew --NEW--> sentNew --DONE--> done
///
/// Peer input that is wrong throws and leaves the machine `failed`, for
/// good; a call the state does not allow throws `.invalidState`.
struct PinUpdateMachine: SteppedMachine {
    /// Keys derived from both KEY frames.
    struct Keyed {
        let transcriptHash: [UInt8]
        let keys: DirectionKeys
    }

    enum State {
        /// Our KEY sent, waiting for the peer's.
        case sentKey
        /// Responder: keys derived, waiting for the initiator's NEW.
        case awaitingNew(Keyed)
        /// Our NEW sent: the initiator waits for the responder's NEW, the
        /// responder (its new secrets stored as pending) for DONE.
        case sentNew(Keyed)
        /// This side has committed its new secret: nothing more to do (the
        /// initiator may still have DONE to send).
        case done
        case failed(ItsMeError)
    }

    let session: WindowedSession
    let sessionCode: ShortCode
    /// This side's new device secret (16 bytes).
    private let newSecret: SecretRange
    private let key: [UInt8]
    private(set) var state: State = .sentKey

    /// The session code both devices show, from the seed and the window.
    static func sessionCode<S: ByteView & ~Copyable>(seed: borrowing S, window: Int64) throws -> ShortCode {
        let v = VoiceProtocol.prefix64(key: seed, LV.cat(LV.b("itsme-pin-update-code-v1"), try VoiceProtocol.windowBytes(window)))
        // v % valueCount is below valueCount, which ShortCode accepts.
        guard let code = ShortCode(value: UInt32(v % UInt64(ShortCode.valueCount))) else {
            throw ItsMeError(.internal, "a session code out of range")
        }
        return code
    }

    /// The machine and its KEY. The random source gives the ephemeral
    /// secret and the new device secret in one draw (48 bytes).
    static func start<R: RandomSource>(
        contact: Contact, window: Int64, now: Int64, seed: SecretBox, myPID: [UInt8], random: inout R
    ) throws -> (PinUpdateMachine, [Action]) {
        let drawn = SecretBox(try SecretBytes(randomCount: X25519.keyCount + PinUpdateNew.secretCount, using: &random))
        let ephemeral = SecretRange(drawn, 0..<X25519.keyCount)
        let fresh = SecretRange(drawn, X25519.keyCount..<drawn.count)
        let session = try WindowedSession(
            contact: contact, window: window, now: now, seed: seed, myPID: myPID, ephemeralSecret: ephemeral)
        let machine = PinUpdateMachine(
            session: session, sessionCode: try sessionCode(seed: seed, window: window), newSecret: fresh,
            key: PinUpdateFrame.key(ephemeralKey: session.ephemeralKey).bytes)
        return (machine, [.send(machine.key)])
    }

    private init(session: WindowedSession, sessionCode: ShortCode, newSecret: SecretRange, key: [UInt8]) {
        self.session = session
        self.sessionCode = sessionCode
        self.newSecret = newSecret
        self.key = key
    }

    var failure: ItsMeError? {
        if case .failed(let error) = state { return error }
        return nil
    }

    mutating func fail(_ error: ItsMeError) {
        session.ephemeralSecret.wipe()
        newSecret.wipe()
        state = .failed(error)
    }

    /// Feeds one frame from the peer.
    mutating func receive(_ bytes: [UInt8], now: Int64) throws -> [Action] {
        try UnixTime.check(now)
        switch state {
        case .failed(let error):
            throw ItsMeError(.invalidState, "the update has failed (\(error.message)); start a new one")
        case .done:
            throw ItsMeError(.invalidState, "the update is complete on this side")
        case .sentKey, .awaitingNew, .sentNew:
            break
        }
        do {
            try session.checkAlive(now: now, "the update")
            return try handle(try PinUpdateFrame(parsing: bytes))
        } catch let e as ItsMeError {
            fail(e)
            throw e
        }
    }

    private mutating func handle(_ frame: PinUpdateFrame) throws -> [Action] {
        let c = session.contactID
        switch (state, frame) {
        case (.sentKey, .key(let peerKey)):
            guard peerKey != session.ephemeralKey else { throw ItsMeError(.invalidKey, "the peer's key equals ours (reflected)") }
            let keyed = try derive(peerFrame: frame.bytes, peerKey: peerKey)
            guard session.isInitiator else {
                state = .awaitingNew(keyed)
                return []
            }
            state = .sentNew(keyed)
            return [.send(try newFrame(keyed))]

        case (.sentNew(let keyed), .new(let sealed)) where session.isInitiator:
            // Both sides hold both new secrets now: commit, then DONE.
            let theirs = try open(sealed, keyed)
            state = .done
            return [
                .contact(.pendingDeviceSecrets(contactID: c, mine: newSecret, theirs: theirs, committed: true)),
                .send(try keyed.keys.seal(type: PinUpdateFrame.Kind.done.rawValue, counter: 1, [])),
            ]

        case (.awaitingNew(let keyed), .new(let sealed)):
            // Stored as pending before this side's NEW goes out.
            let theirs = try open(sealed, keyed)
            state = .sentNew(keyed)
            return [
                .contact(.pendingDeviceSecrets(contactID: c, mine: newSecret, theirs: theirs, committed: false)),
                .send(try newFrame(keyed)),
            ]

        case (.sentNew(let keyed), .done(let sealed)) where !session.isInitiator:
            let plain = try keyed.keys.open(sealed, counter: 1, what: "a PIN Update frame")
            guard plain.isEmpty else { throw ItsMeError(.malformedMessage, "a DONE frame carries nothing") }
            state = .done
            return [.contact(.commitPendingDeviceSecrets(contactID: c))]

        case (.sentKey, _), (.awaitingNew, _), (.sentNew, _):
            throw ItsMeError(.malformedMessage, "PIN Update \(frame.kind) frame out of order")
        case (.done, _), (.failed, _):
            // invariant: `receive` lets only the running states through.
            throw ItsMeError(.invalidState, "the update is not running")
        }
    }

    private func derive(peerFrame: [UInt8], peerKey: [UInt8]) throws -> Keyed {
        let keys = session.ordered(mine: key, peers: peerFrame)
        let pids = session.ordered(mine: session.myPID, peers: session.peerPID)
        let hash = SHA256.hash(
            LV.cat(
                LV.b("itsme-pin-update-v1"), LV.b(sessionCode.text), VoiceProtocol.u64(session.window), pids.initiator,
                pids.responder, keys.initiator, keys.responder))
        return Keyed(
            transcriptHash: hash,
            keys: try session.keys(
                transcriptHash: hash, saltLabel: "itsme-pin-update-salt-v1", keyLabel: "itsme-pin-update-key-v1",
                peerEphemeralKey: peerKey))
    }

    private func confirmation(_ role: String, _ keyed: Keyed) -> [UInt8] {
        session.roleMAC("itsme-pin-update-confirm-v1", role: role, transcriptHash: keyed.transcriptHash)
    }

    private func newFrame(_ keyed: Keyed) throws -> [UInt8] {
        var plain = PinUpdateNew(secret: newSecret, confirmation: confirmation(session.role, keyed)).plaintext
        defer { wipe(&plain) }
        return try keyed.keys.seal(type: PinUpdateFrame.Kind.new.rawValue, counter: 0, plain)
    }

    /// The peer's new secret from its NEW, once its confirmation checks.
    private func open(_ sealed: [UInt8], _ keyed: Keyed) throws -> SecretRange {
        var plain = try keyed.keys.open(sealed, counter: 0, what: "a PIN Update frame")
        defer { wipe(&plain) }
        let new = try PinUpdateNew(parsing: plain)
        guard ConstantTime.equal(new.confirmation, confirmation(session.peerRole, keyed)) else {
            throw ItsMeError(.authenticationFailed, "the peer's confirmation is wrong: it does not hold the shared secret")
        }
        return new.secret
    }
}

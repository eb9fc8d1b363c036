// The exchange at a distance's handshake (docs/PROTOCOL.md section 16):
// INVITE, ACCEPT and REPLY around CPace, until the two share an Agreement.
import ItsMePrimitives
import ItsMeBase
import ItsMeStore


extension ExchangeMachine {

    /// The next state and what to do, for one message.
    func receiveRemote(_ bytes: [UInt8]) throws -> Step {
        let message = try RemoteMessage(parsing: bytes)
        let outOfOrder = ItsMeError(.malformedMessage, "\(message.kind) message out of order (replayed, reflected or reordered)")
        guard let remote else { throw ItsMeError(.internal, "an exchange at a distance without its codes") }
        switch (state, message) {
        case (.exchanging(.remote(.awaitingInvite)), .invite(let sid, let ya, let commitment)):
            let share = try Self.pakeShare(remote, sid: sid)
            let paked = try pake(remote, sid: sid, invite: bytes, ya: ya, yb: share, commitment: commitment)
            let tag = paked.keys.confirmR.withBytes {
                RemoteProtocol.confirmationTag(key: $0, initiator: false, tpake: paked.tpake, accept: nil)
            }
            let plaintext = try signedPayload(paked, inviter: false)
            let box = try paked.keys.payloadR.withBytes {
                try RemoteProtocol.sealPayload(key: $0, initiator: false, inviteID: remote.inviteID, plaintext)
            }
            let accept = RemoteMessage.accept(share: share, tag: tag, box: box).bytes
            let next = RemoteStep.sentAccept(paked, accept: accept, commitment: commitment, plaintextMine: plaintext, sid: sid)
            return (.exchanging(.remote(next)), [.send(accept)])

        case (.exchanging(.remote(.sentInvite(let invite, let share, let commitment))), .accept(let yb, let tag, let box)):
            let paked = try pake(remote, sid: remote.sid, invite: invite, ya: share, yb: yb, commitment: commitment)
            let expected = paked.keys.confirmR.withBytes {
                RemoteProtocol.confirmationTag(key: $0, initiator: false, tpake: paked.tpake, accept: nil)
            }
            guard ConstantTime.equal(expected, tag) else {
                throw ItsMeError(
                    .authenticationFailed,
                    "the invitee's confirmation does not verify: a wrong encryption code, or a relay that changed the messages; the invite is spent")
            }
            let plaintext = try signedPayload(paked, inviter: true)
            let agreement = try remoteAgreement(box, paked, remote, plaintextMine: plaintext, inviteCommitment: nil)
            let replyTag = paked.keys.confirmI.withBytes {
                RemoteProtocol.confirmationTag(key: $0, initiator: true, tpake: paked.tpake, accept: bytes)
            }
            let replyBox = try paked.keys.payloadI.withBytes {
                try RemoteProtocol.sealPayload(key: $0, initiator: true, inviteID: remote.inviteID, plaintext)
            }
            return (.agreed(agreement, Decisions()), [.send(RemoteMessage.reply(tag: replyTag, box: replyBox).bytes)])

        case (.exchanging(.remote(.sentAccept(let paked, let accept, let commitment, let plaintext, _))), .reply(let tag, let box)):
            let expected = paked.keys.confirmI.withBytes {
                RemoteProtocol.confirmationTag(key: $0, initiator: true, tpake: paked.tpake, accept: accept)
            }
            guard ConstantTime.equal(expected, tag) else {
                throw ItsMeError(
                    .authenticationFailed,
                    "the inviter's confirmation does not verify: a wrong encryption code, or a relay that changed the messages; the invite is spent")
            }
            let agreement = try remoteAgreement(box, paked, remote, plaintextMine: plaintext, inviteCommitment: commitment)
            return (.agreed(agreement, Decisions()), [])

        case (.agreed(let a, let d), .decision(let sealed)) where d.peers == nil:
            guard case .remote(let keys, let th) = a.channel else {
                throw ItsMeError(.internal, "an exchange at a distance without its keys")
            }
            let confirmed = try (remote.inviter ? keys.decisionR : keys.decisionI).withBytes {
                try RemoteProtocol.openDecision(key: $0, initiator: !remote.inviter, th: th, sealed)
            }
            return peerDecided(confirmed ? .confirmed : .rejected)

        case (.exchanging, _), (.agreed, _), (.abandoned, _), (.failed, _):
            throw outOfOrder
        }
    }

    /// K = y * peer's share, then the ISK, the keys and tpake.
    private func pake(_ remote: Remote, sid: [UInt8], invite: [UInt8], ya: [UInt8], yb: [UInt8], commitment: [UInt8]) throws -> Paked {
        guard !ConstantTime.equal(ya, yb) else {
            throw ItsMeError(.invalidKey, "the peer's PAKE share equals ours (a reflected message)")
        }
        let peerShare = remote.inviter ? yb : ya
        var k = try remote.scalar.withBytes { y in
            try peerShare.withUnsafeBytes { p in
                guard let k = CPace.scalarMult(scalar: y, point: p) else {
                    throw ItsMeError(.authenticationFailed, "the peer's PAKE share is not a valid ristretto255 element")
                }
                return k
            }
        }
        defer { wipe(&k) }
        let isk = try CPace.isk(sid: sid, k: k, ya: ya, ada: commitment, yb: yb, adb: [])
        return Paked(
            tpake: RemoteProtocol.pakeTranscript(inviteID: remote.inviteID, invite: invite, yb: yb), keys: try RemoteKeys(isk: isk))
    }

    private func signedPayload(_ paked: Paked, inviter: Bool) throws -> [UInt8] {
        try own.deviceSecret.withBytes {
            try RemoteProtocol.payload(
                identity: identity, ephemeralKey: own.ephemeralKey, deviceSecret: $0, tpake: paked.tpake, initiator: inviter)
        }
    }

    /// Opens and checks the peer's sealed payload; the seed and the SAS.
    private func remoteAgreement(
        _ box: [UInt8], _ paked: Paked, _ remote: Remote, plaintextMine: [UInt8], inviteCommitment: [UInt8]?
    ) throws -> Agreement {
        var plain = try (remote.inviter ? paked.keys.payloadR : paked.keys.payloadI).withBytes {
            try RemoteProtocol.openPayload(key: $0, initiator: !remote.inviter, inviteID: remote.inviteID, box)
        }
        defer { wipe(&plain) }
        let p = try RemoteProtocol.parsePayload(plain, tpake: paked.tpake, senderInitiator: !remote.inviter)
        if let inviteCommitment {
            let commitment = p.deviceSecret.withBytes {
                ExchangeProtocol.commitment(identityKey: p.identityKey, ephemeralKey: p.ephemeralKey, name: p.nameBytes, deviceSecret: $0)
            }
            guard ConstantTime.equal(commitment, inviteCommitment) else {
                throw ItsMeError(.authenticationFailed, "the inviter's keys do not match its commitment")
            }
        }
        // Contents, once authenticated (PROTOCOL.md 1.1, 16.3).
        guard !ConstantTime.equal(p.identityKey, identity.publicKey) else {
            throw ItsMeError(.invalidKey, "the peer's contact data carries our own identity key")
        }
        let fingerprint = Fingerprint.of(publicKey: p.identityKey)
        let seed = try deriveSeed(peerEphemeralKey: p.ephemeralKey, peerFingerprint: fingerprint)
        let th = RemoteProtocol.transcriptHash(
            tpake: paked.tpake, payloadI: remote.inviter ? plaintextMine : plain, payloadR: remote.inviter ? plain : plaintextMine)
        return Agreement(
            peer: Exchange.Peer(name: p.name, fingerprint: fingerprint, publicKey: p.identityKey),
            peerDeviceSecret: SensitiveBytes(p.deviceSecret), seed: seed,
            sas: try ShortCode.sas(seed: seed, transcriptHash: th), channel: .remote(paked.keys, th: th))
    }

}

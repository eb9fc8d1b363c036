// The Bluetooth exchange's handshake (docs/PROTOCOL.md section 7): HELLO,
// KEY and DATA, until the two share an Agreement.
import ItsMePrimitives
import ItsMeBase
import ItsMeStore


extension ExchangeMachine {

    /// The next state and what to do, for one frame.
    func receiveFrame(_ bytes: [UInt8]) throws -> Step {
        let frame = try BluetoothFrame(parsing: bytes)
        switch (state, frame) {
        case (.exchanging(.bluetooth(.sentHello(let hello))), .hello(let fingerprint, let commitment)):
            let mine = try Self.fingerprintBytes(identity)
            guard fingerprint != mine else { throw ItsMeError(.invalidKey, "the peer's HELLO carries our own fingerprint") }
            let key = BluetoothFrame.keyBytes(own.ephemeralKey)
            let next = BluetoothStep.sentKey(
                hello: hello, peerHello: bytes, peerFingerprint: fingerprint, peerCommitment: commitment, key: key,
                isInitiator: mine.lexicographicallyPrecedes(fingerprint))
            return (.exchanging(.bluetooth(next)), [.send(key)])

        case (.exchanging(.bluetooth(.sentKey(let hello, let peerHello, let fingerprint, let commitment, let key, let isInitiator))),
            .key(let peerKey)):
            // Public keys: a plain comparison is enough (sections 7.2, 10.3, 11.2).
            guard peerKey != own.ephemeralKey else {
                throw ItsMeError(.invalidKey, "the peer's KEY carries our own ephemeral key (reflected)")
            }
            guard let sessionCode else { throw ItsMeError(.internal, "a Bluetooth exchange without its session code") }
            let th1 =
                isInitiator
                ? ExchangeProtocol.bluetoothTH1(sessionCode: sessionCode, helloI: hello, helloR: peerHello, keyI: key, keyR: bytes)
                : ExchangeProtocol.bluetoothTH1(sessionCode: sessionCode, helloI: peerHello, helloR: hello, keyI: bytes, keyR: key)
            var both = try SecretBytes(count: 64)
            try own.ephemeralSecret.withBytes { secret in
                try both.withMutableBytes {
                    try ExchangeProtocol.bluetoothKeys(ephemeralSecret: secret, peerEphemeralKey: peerKey, th1: th1, into: $0)
                }
            }
            let keys = try DirectionKeys(both, isInitiator: isInitiator)
            let data = own.deviceSecret.withBytes {
                BluetoothData.unsigned(identityKey: identity.publicKey, deviceSecret: $0, name: Array(identity.name.utf8))
            }
            let role = isInitiator ? "initiator" : "responder"
            let plaintext = data + (try identity.sign(LV.cat(LV.b("itsme-bluetooth-payload-v1"), th1, LV.b(role), data)))
            let sealed = try keys.seal(type: BluetoothFrame.Kind.data.rawValue, counter: 0, plaintext)
            let keyed = BluetoothKeyed(
                isInitiator: isInitiator, th1: th1, keys: keys, peerFingerprint: fingerprint, peerCommitment: commitment,
                peerEphemeralKey: peerKey, plaintextMine: plaintext)
            return (.exchanging(.bluetooth(.sentData(keyed))), [.send(sealed)])

        case (.exchanging(.bluetooth(.sentData(let k))), .data(let sealed)):
            return (.agreed(try bluetoothAgreement(sealed, k), Decisions()), [])

        case (.agreed(let a, let d), .confirm(let sealed)) where d.peers == nil:
            guard case .bluetooth(let keys) = a.channel else { throw ItsMeError(.internal, "a Bluetooth exchange without its keys") }
            let plain = try keys.open(sealed, counter: 1, what: "a Bluetooth frame")
            guard plain.count == 1, plain[0] <= 1 else { throw ItsMeError(.malformedMessage, "a CONFIRM frame carries 0 or 1") }
            return peerDecided(plain[0] == 1 ? .confirmed : .rejected)

        case (.exchanging, _), (.agreed, _), (.abandoned, _), (.failed, _):
            throw ItsMeError(.malformedMessage, "Bluetooth \(frame.kind) frame out of order (replayed or reordered)")
        }
    }

    private func bluetoothAgreement(_ sealed: [UInt8], _ k: BluetoothKeyed) throws -> Agreement {
        var plain = try k.keys.open(sealed, counter: 0, what: "a Bluetooth frame")
        defer { wipe(&plain) }
        let data = try BluetoothData(parsing: plain)
        guard Array(SHA256.hash(data.identityKey).prefix(8)) == k.peerFingerprint else {
            throw ItsMeError(.authenticationFailed, "the peer's identity key does not match the fingerprint in its HELLO")
        }
        let commitment = data.deviceSecret.withBytes {
            ExchangeProtocol.commitment(
                identityKey: data.identityKey, ephemeralKey: k.peerEphemeralKey, name: data.nameBytes, deviceSecret: $0)
        }
        guard ConstantTime.equal(commitment, k.peerCommitment) else {
            throw ItsMeError(.authenticationFailed, "the peer's keys do not match its commitment")
        }
        let peerRole = k.isInitiator ? "responder" : "initiator"
        guard
            Ed25519.verify(
                signature: data.signature, message: LV.cat(LV.b("itsme-bluetooth-payload-v1"), k.th1, LV.b(peerRole), data.signed),
                publicKey: data.identityKey)
        else { throw ItsMeError(.authenticationFailed, "the peer's signature does not verify") }
        // Contents, once authenticated (PROTOCOL.md 1.1, 7.4).
        guard !ConstantTime.equal(data.identityKey, identity.publicKey) else {
            throw ItsMeError(.invalidKey, "the peer's contact data carries our own identity key")
        }
        let fingerprint = Fingerprint.of(publicKey: data.identityKey)
        let seed = try deriveSeed(peerEphemeralKey: k.peerEphemeralKey, peerFingerprint: fingerprint)
        let th = ExchangeProtocol.bluetoothTranscriptHash(
            th1: k.th1, plaintextI: k.isInitiator ? k.plaintextMine : plain, plaintextR: k.isInitiator ? plain : k.plaintextMine)
        return Agreement(
            peer: Exchange.Peer(name: data.name, fingerprint: fingerprint, publicKey: data.identityKey),
            peerDeviceSecret: SensitiveBytes(data.deviceSecret), seed: seed,
            sas: try ShortCode.sas(seed: seed, transcriptHash: th), channel: .bluetooth(k.keys))
    }

}

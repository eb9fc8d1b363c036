// The functions only a test build of libitsme exports (include/itsme_testing.h):
// a deterministic random source and the pure derivations of docs/PROTOCOL.md,
// for test vectors and independent implementations. The release library is
// built without this target.
import CItsMe
import ItsMeFFI
import ItsMeKit
import ItsMePrimitives

// MARK: - Deterministic randomness

@c(itsme_random_new_deterministic)
public func ffiRandomNewDeterministic(
    _ seed: UnsafePointer<UInt8>?, _ seedLen: UInt, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_random>?>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let seed = try bytes(seed, seedLen, "seed")
        guard seed.count == 32 else { throw invalid("a deterministic random seed is 32 bytes, got \(seed.count)") }
        let out = try required(out, "out")
        out.pointee = box(RandomHandle(DeterministicRandom(seed: seed)), as: itsme_random.self)
    }
}

@c(itsme_identity_create_with_random)
public func ffiIdentityCreateWithRandom(
    _ store: UnsafeMutablePointer<itsme_secret_store>?, _ name: UnsafePointer<CChar>?,
    _ rng: UnsafeMutablePointer<itsme_random>?, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_identity>?>?
) -> itsme_result {
    onStore(store) { handle in
        let name = try text(name, "name")
        let out = try required(out, "out")
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        let identity = try Identity.create(store: handle.store, name: name, random: &random)
        out.pointee = box(IdentityHandle(identity), as: itsme_identity.self)
    }
}

// MARK: - Pure derivations

private func exact(_ p: UnsafePointer<UInt8>?, _ len: UInt, _ count: Int, _ what: String) throws -> [UInt8] {
    let b = try bytes(p, len, what)
    guard b.count == count else { throw invalid("\(what) is \(count) bytes, got \(b.count)") }
    return b
}

private func fingerprintText(_ p: UnsafePointer<CChar>?, _ what: String) throws -> String {
    let s = try text(p, what)
    guard s.utf8.count == Fingerprint.textCount, let b = Hex.decode(s) else { throw invalid("\(what) is not 16 hex digits") }
    return Hex.encodeUpper(b)
}

/// A Bluetooth contact-data plaintext: 114 to 241 bytes (PROTOCOL.md 7.4).
private func plaintext(_ p: UnsafePointer<UInt8>?, _ len: UInt, _ what: String) throws -> [UInt8] {
    let b = try bytes(p, len, what)
    guard (114...(113 + DisplayName.maxBytes)).contains(b.count) else {
        throw invalid("\(what) is 114 to \(113 + DisplayName.maxBytes) bytes, got \(b.count)")
    }
    return b
}

private func writeHash(_ h: [UInt8], _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?) throws {
    try h.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_derive_seed)
public func ffiDeriveSeed(
    _ secret: UnsafePointer<UInt8>?, _ secretLen: UInt, _ peerPublic: UnsafePointer<UInt8>?, _ publicLen: UInt,
    _ fpA: UnsafePointer<CChar>?, _ fpB: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        let sk = try required(secret, "ephemeral_secret")
        guard secretLen == 32 else { throw invalid("ephemeral_secret is 32 bytes, got \(secretLen)") }
        let pk = try exact(peerPublic, publicLen, 32, "peer_ephemeral_public")
        let a = try fingerprintText(fpA, "fingerprint_a"), b = try fingerprintText(fpB, "fingerprint_b")
        var seed = try SecretBytes(count: ExchangeProtocol.seedCount)
        try seed.withMutableBytes {
            try ExchangeProtocol.deriveSeed(
                ephemeralSecret: UnsafeRawBufferPointer(start: sk, count: 32), peerEphemeralKey: pk, fingerprints: a, b, into: $0)
        }
        try seed.withBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

@c(itsme_derive_sas)
public func ffiDeriveSAS(
    _ seed: UnsafePointer<UInt8>?, _ seedLen: UInt, _ th: UnsafePointer<UInt8>?, _ thLen: UInt,
    _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        let s = try required(seed, "seed")
        guard seedLen == 32 else { throw invalid("seed is 32 bytes, got \(seedLen)") }
        let hash = try exact(th, thLen, 32, "transcript_hash")
        let sas = try ShortCode.sas(seed: UnsafeRawBufferPointer(start: s, count: 32), transcriptHash: hash)
        try writeText(sas.text, to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_qr_transcript_hash)
public func ffiQRTranscriptHash(
    _ a: UnsafePointer<UInt8>?, _ aLen: UInt, _ b: UnsafePointer<UInt8>?, _ bLen: UInt,
    _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        func text(_ p: UnsafePointer<UInt8>?, _ n: UInt, _ what: String) throws -> String {
            guard let s = String(validating: try bytes(p, n, what), as: UTF8.self) else { throw invalid("\(what) is not UTF-8") }
            return s
        }
        let th = try ExchangeProtocol.qrTranscriptHash(texts: try text(a, aLen, "payload_a"), try text(b, bLen, "payload_b"))
        try writeHash(th, out, cap, outLen)
    }
}

@c(itsme_bluetooth_commitment)
public func ffiBluetoothCommitment(
    _ identityPublic: UnsafePointer<UInt8>?, _ identityLen: UInt, _ ephemeralPublic: UnsafePointer<UInt8>?,
    _ ephemeralLen: UInt, _ name: UnsafePointer<CChar>?, _ deviceSecret: UnsafePointer<UInt8>?, _ deviceSecretLen: UInt,
    _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        let ik = try exact(identityPublic, identityLen, 32, "identity_public")
        let ek = try exact(ephemeralPublic, ephemeralLen, 32, "ephemeral_public")
        let name = try DisplayName.validated(try text(name, "name"))
        let ds = try exact(deviceSecret, deviceSecretLen, ExchangeProtocol.deviceSecretCount, "device_secret")
        let c = ds.withBytes {
            ExchangeProtocol.commitment(identityKey: ik, ephemeralKey: ek, name: Array(name.utf8), deviceSecret: $0)
        }
        try writeHash(c, out, cap, outLen)
    }
}

@c(itsme_bluetooth_th1)
public func ffiBluetoothTH1(
    _ sessionCode: UnsafePointer<CChar>?, _ helloI: UnsafePointer<UInt8>?, _ helloILen: UInt,
    _ helloR: UnsafePointer<UInt8>?, _ helloRLen: UInt, _ keyI: UnsafePointer<UInt8>?, _ keyILen: UInt,
    _ keyR: UnsafePointer<UInt8>?, _ keyRLen: UInt, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        guard let code = ShortCode(parsing: try text(sessionCode, "session_code", max: TextLimit.typedCode)) else {
            throw invalid("session_code is not a short code")
        }
        let th1 = ExchangeProtocol.bluetoothTH1(
            sessionCode: code, helloI: try exact(helloI, helloILen, 42, "hello_i"),
            helloR: try exact(helloR, helloRLen, 42, "hello_r"), keyI: try exact(keyI, keyILen, 34, "key_i"),
            keyR: try exact(keyR, keyRLen, 34, "key_r"))
        try writeHash(th1, out, cap, outLen)
    }
}

@c(itsme_bluetooth_session_keys)
public func ffiBluetoothSessionKeys(
    _ secret: UnsafePointer<UInt8>?, _ secretLen: UInt, _ peerPublic: UnsafePointer<UInt8>?, _ publicLen: UInt,
    _ th1: UnsafePointer<UInt8>?, _ th1Len: UInt, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        let sk = try required(secret, "ephemeral_secret")
        guard secretLen == 32 else { throw invalid("ephemeral_secret is 32 bytes, got \(secretLen)") }
        let pk = try exact(peerPublic, publicLen, 32, "peer_ephemeral_public")
        let th = try exact(th1, th1Len, 32, "th1")
        var keys = try SecretBytes(count: 64)
        try keys.withMutableBytes { k in
            try ExchangeProtocol.bluetoothKeys(
                ephemeralSecret: UnsafeRawBufferPointer(start: sk, count: 32), peerEphemeralKey: pk, th1: th, into: k)
        }
        try keys.withBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

@c(itsme_bluetooth_transcript_hash)
public func ffiBluetoothTranscriptHash(
    _ th1: UnsafePointer<UInt8>?, _ th1Len: UInt, _ plainI: UnsafePointer<UInt8>?, _ plainILen: UInt,
    _ plainR: UnsafePointer<UInt8>?, _ plainRLen: UInt, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        let th = ExchangeProtocol.bluetoothTranscriptHash(
            th1: try exact(th1, th1Len, 32, "th1"), plaintextI: try plaintext(plainI, plainILen, "plaintext_i"),
            plaintextR: try plaintext(plainR, plainRLen, "plaintext_r"))
        try writeHash(th, out, cap, outLen)
    }
}

// MARK: - Pure derivations

private func secret(_ p: UnsafePointer<UInt8>?, _ len: UInt, _ what: String) throws -> UnsafeRawBufferPointer {
    let p = try required(p, what)
    guard len == 32 else { throw invalid("\(what) is 32 bytes, got \(len)") }
    return UnsafeRawBufferPointer(start: p, count: 32)
}

private func pid(_ p: UnsafePointer<UInt8>?, _ len: UInt, _ what: String) throws -> [UInt8] {
    let b = try bytes(p, len, what)
    guard b.count == 32 || b.count == 8 else { throw invalid("\(what) is 32 bytes (an identity key) or 8 (a fingerprint)") }
    return b
}

@c(itsme_derive_session_id)
public func ffiDeriveSessionID(
    _ seed: UnsafePointer<UInt8>?, _ seedLen: UInt, _ window: Int64, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        let v = try VoiceProtocol.sessionID(seed: try secret(seed, seedLen, "seed"), window: window)
        try writeText(VoiceProtocol.sessionIDText(v), to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_derive_words)
public func ffiDeriveWords(
    _ seed: UnsafePointer<UInt8>?, _ seedLen: UInt, _ window: Int64, _ pidIn: UnsafePointer<UInt8>?, _ pidLen: UInt,
    _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        let words = try VoiceProtocol.words(seed: try secret(seed, seedLen, "seed"), window: window, pid: try pid(pidIn, pidLen, "pid"))
        try writeWords(words, out, cap, outLen)
    }
}

@c(itsme_derive_lower_selects_first)
public func ffiDeriveLowerSelectsFirst(
    _ seed: UnsafePointer<UInt8>?, _ seedLen: UInt, _ window: Int64, _ out: UnsafeMutablePointer<Bool>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let out = try required(out, "out_lower_first")
        out.pointee = try VoiceProtocol.lowerSelectsFirst(seed: try secret(seed, seedLen, "seed"), window: window)
    }
}

@c(itsme_derive_code)
public func ffiDeriveCode(
    _ seed: UnsafePointer<UInt8>?, _ seedLen: UInt, _ window: Int64, _ first: UnsafePointer<UInt8>?, _ firstLen: UInt,
    _ firstWord: UInt32, _ second: UnsafePointer<UInt8>?, _ secondLen: UInt, _ secondWord: UInt32,
    _ speaker: UnsafePointer<UInt8>?, _ speakerLen: UInt, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        guard firstWord < 26, secondWord < 26 else { throw invalid("a word index is 0 to 25") }
        let v = try VoiceProtocol.code(
            seed: try secret(seed, seedLen, "seed"), window: window, first: try pid(first, firstLen, "first"),
            firstWord: Int(firstWord), second: try pid(second, secondLen, "second"), secondWord: Int(secondWord),
            speaker: try pid(speaker, speakerLen, "speaker"))
        try writeText(VoiceProtocol.codeText(v), to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_derive_device_tag)
public func ffiDeriveDeviceTag(
    _ seed: UnsafePointer<UInt8>?, _ seedLen: UInt, _ window: Int64, _ speaker: UnsafePointer<UInt8>?, _ speakerLen: UInt,
    _ secretIn: UnsafePointer<UInt8>?, _ secretLen: UInt, _ outTag: UnsafeMutablePointer<UInt32>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let out = try required(outTag, "out_tag")
        let ds = try deviceSecret(secretIn, secretLen, "secret")
        out.pointee = try VoiceProtocol.tag(
            seed: try secret(seed, seedLen, "seed"), window: window, speaker: try pid(speaker, speakerLen, "speaker"),
            deviceSecret: ds)
    }
}

private func deviceSecret(_ p: UnsafePointer<UInt8>?, _ len: UInt, _ what: String) throws -> UnsafeRawBufferPointer {
    guard len <= 64 else { throw invalid("\(what) is at most 64 bytes") }
    guard p != nil || len == 0 else { throw invalid("\(what) is NULL") }
    return UnsafeRawBufferPointer(start: p, count: Int(len))
}

@c(itsme_derive_voice)
public func ffiDeriveVoice(
    _ seed: UnsafePointer<UInt8>?, _ seedLen: UInt, _ window: Int64, _ myPID: UnsafePointer<UInt8>?, _ myPIDLen: UInt,
    _ theirPID: UnsafePointer<UInt8>?, _ theirPIDLen: UInt, _ mySecret: UnsafePointer<UInt8>?, _ mySecretLen: UInt,
    _ theirSecret: UnsafePointer<UInt8>?, _ theirSecretLen: UInt, _ firstWord: UInt32, _ secondWord: UInt32,
    _ out: UnsafeMutablePointer<itsme_voice_derivation>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let out = try required(out, "out")
        try checkStructSize(out, "out")
        guard firstWord < 26, secondWord < 26 else { throw invalid("a word index is 0 to 25") }
        let d = try VoiceProtocol.derive(
            seed: try secret(seed, seedLen, "seed"), window: window, myPID: try pid(myPID, myPIDLen, "my_pid"),
            theirPID: try pid(theirPID, theirPIDLen, "their_pid"),
            mySecret: try deviceSecret(mySecret, mySecretLen, "my_secret"),
            theirSecret: try deviceSecret(theirSecret, theirSecretLen, "their_secret"), firstWord: Int(firstWord),
            secondWord: Int(secondWord))
        var r = itsme_voice_derivation()
        r.size = out.pointee.size
        r.session_id = d.sessionID
        withUnsafeMutableBytes(of: &r.my_words) { b in for (i, w) in d.myWords.enumerated() { b[i] = UInt8(w) } }
        withUnsafeMutableBytes(of: &r.their_words) { b in for (i, w) in d.theirWords.enumerated() { b[i] = UInt8(w) } }
        r.i_select_first = d.iSelectFirst
        r.my_code = d.myCode
        r.their_code = d.theirCode
        r.my_tag = d.myTag
        r.their_tag = d.theirTag
        out.pointee = r
    }
}

// MARK: - Degradation code

@c(itsme_derive_degradation_code)
public func ffiDeriveDegradationCode(
    _ seed: UnsafePointer<UInt8>?, _ seedLen: UInt, _ pidIn: UnsafePointer<UInt8>?, _ pidLen: UInt,
    _ secretIn: UnsafePointer<UInt8>?, _ secretLen: UInt, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        let r = try bytes(secretIn, secretLen, "secret")
        guard r.count == DegradationCode.secretCount else { throw invalid("secret is 10 bytes, got \(r.count)") }
        let p = try pid(pidIn, pidLen, "pid")
        let m = try r.withBytes { try DegradationCode.mac(seed: try secret(seed, seedLen, "seed"), pid: p, secret: $0) }
        try writeText(DegradationCode.format(r + m), to: out, cap: cap, outLen: outLen)
    }
}

// MARK: - Contacts with given device secrets

/// A device secret argument: 0 to 64 bytes (NULL when its length is 0),
/// copied straight into guarded memory.
private func givenDeviceSecret(_ p: UnsafePointer<UInt8>?, _ len: UInt, _ what: String) throws -> SecretBytes {
    guard len <= 64 else { throw invalid("\(what) is at most 64 bytes, got \(len)") }
    guard len > 0 else { return try SecretBytes(count: 0) }
    let p = try required(p, what)
    return try SecretBytes(copying: UnsafeRawBufferPointer(start: p, count: Int(len)))
}

@c(itsme_store_set_device_secrets)
public func ffiStoreSetDeviceSecrets(
    _ store: UnsafeMutablePointer<itsme_store>?, _ id: Int64, _ mine: UnsafePointer<UInt8>?, _ mineLen: UInt,
    _ theirs: UnsafePointer<UInt8>?, _ theirsLen: UInt
) -> itsme_result {
    onContactStore(store) { s in
        try s.setDeviceSecrets(
            id: id, mine: try givenDeviceSecret(mine, mineLen, "mine"), theirs: try givenDeviceSecret(theirs, theirsLen, "theirs"))
    }
}

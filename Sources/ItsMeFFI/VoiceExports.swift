// Exported functions for voice verification, in the order of
// include/itsme.h.
import CItsMe
import ItsMeCore

private func onVoice(_ p: UnsafeRawPointer?, _ body: (VoiceSession) throws -> Void) -> itsme_result {
    onSession(p, "voice", body)
}

private func storeOf(_ p: UnsafeMutablePointer<itsme_store>?) throws -> ContactStore {
    guard let handle = unbox(p, as: ContactStoreHandle.self) else { throw invalid("store is NULL") }
    return handle.store
}

private let natoWords: [StaticString] = [
    "ALFA", "BRAVO", "CHARLIE", "DELTA", "ECHO", "FOXTROT", "GOLF", "HOTEL", "INDIA", "JULIET", "KILO", "LIMA", "MIKE",
    "NOVEMBER", "OSCAR", "PAPA", "QUEBEC", "ROMEO", "SIERRA", "TANGO", "UNIFORM", "VICTOR", "WHISKEY", "XRAY", "YANKEE",
    "ZULU",
]

@c(itsme_nato_word)
public func ffiNatoWord(_ index: UInt32) -> UnsafePointer<CChar>? {
    index < 26 ? cString(natoWords[Int(index)]) : nil
}

@c(itsme_voice_new)
public func ffiVoiceNew(
    _ store: UnsafeMutablePointer<itsme_store>?, _ contactID: Int64, _ now: Int64,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_voice>?>?
) -> itsme_result {
    newSession(store, out) { s in try VoiceSession(store: s, contactID: contactID, now: now) }
}

@c(itsme_voice_free)
public func ffiVoiceFree(_ voice: UnsafeMutablePointer<itsme_voice>?) {
    release(voice, as: SessionHandle<VoiceSession>.self)
}

@c(itsme_voice_last_error)
public func ffiVoiceLastError(
    _ voice: UnsafePointer<itsme_voice>?, _ buf: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    sessionLastError(voice, VoiceSession.self, buf, cap, outLen)
}

@c(itsme_voice_status)
public func ffiVoiceStatus(
    _ voice: UnsafePointer<itsme_voice>?, _ outState: UnsafeMutablePointer<itsme_voice_state>?,
    _ outTurn: UnsafeMutablePointer<UInt32>?
) -> itsme_result {
    onVoice(voice) { v in
        let state = try required(outState, "out_state")
        state.pointee = v.state.rawValue
        outTurn?.pointee = v.turn.rawValue
    }
}

@c(itsme_voice_timing)
public func ffiVoiceTiming(
    _ voice: UnsafePointer<itsme_voice>?, _ now: Int64, _ outWindow: UnsafeMutablePointer<Int64>?,
    _ outStartsIn: UnsafeMutablePointer<Int64>?, _ outEndsIn: UnsafeMutablePointer<Int64>?
) -> itsme_result {
    onVoice(voice) { v in
        try UnixTime.check(now)
        outWindow?.pointee = v.window
        outStartsIn?.pointee = v.startsIn(now: now)
        outEndsIn?.pointee = v.lastMoment - now
    }
}

@c(itsme_voice_start)
public func ffiVoiceStart(
    _ voice: UnsafeMutablePointer<itsme_voice>?, _ store: UnsafeMutablePointer<itsme_store>?, _ now: Int64
) -> itsme_result {
    onVoice(voice) { v in try v.start(store: try storeOf(store), now: now) }
}

@c(itsme_voice_session_id)
public func ffiVoiceSessionID(
    _ voice: UnsafePointer<itsme_voice>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onVoice(voice) { v in try writeText(v.sessionIDText, to: out, cap: cap, outLen: outLen) }
}

private func writeWords(_ words: [Int], _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt) throws {
    let out = try required(out, "out")
    guard cap >= UInt(words.count) else {
        throw ItsMeError(.bufferTooSmall, "five word indices need a buffer of 5 bytes, got \(cap)")
    }
    for (i, w) in words.enumerated() { out[i] = UInt8(w) }
}

@c(itsme_voice_words)
public func ffiVoiceWords(_ voice: UnsafePointer<itsme_voice>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt)
    -> itsme_result
{
    onVoice(voice) { v in try writeWords(v.myWords, out, cap) }
}

@c(itsme_voice_select)
public func ffiVoiceSelect(_ voice: UnsafeMutablePointer<itsme_voice>?, _ word: UInt32, _ now: Int64) -> itsme_result {
    onVoice(voice) { v in
        guard word < 26 else { throw invalid("a word index is 0 to 25, got \(word)") }
        try v.select(Int(word), now: now)
    }
}

private func writeCode(
    _ v: VoiceSession, _ code: UInt32?, _ tag: UInt32?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?, _ outTag: UnsafeMutablePointer<UInt32>?
) throws {
    let outTag = try required(outTag, "out_tag")
    try checkOutput(out, cap, outLen)
    guard let code, v.state == .comparing || v.state == .finished else {
        throw ItsMeError(.invalidState, "there are no codes yet (\(v.state))")
    }
    try writeText(VoiceProtocol.codeText(code), to: out, cap: cap, outLen: outLen)
    outTag.pointee = tag ?? UInt32(ITSME_VOICE_TAG_UNKNOWN)
}

@c(itsme_voice_your_code)
public func ffiVoiceYourCode(
    _ voice: UnsafePointer<itsme_voice>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?, _ outTag: UnsafeMutablePointer<UInt32>?
) -> itsme_result {
    onVoice(voice) { v in try writeCode(v, v.yourCode, v.yourTag, out, cap, outLen, outTag) }
}

@c(itsme_voice_their_code)
public func ffiVoiceTheirCode(
    _ voice: UnsafePointer<itsme_voice>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?, _ outTag: UnsafeMutablePointer<UInt32>?
) -> itsme_result {
    onVoice(voice) { v in try writeCode(v, v.theirCode, v.theirTag, out, cap, outLen, outTag) }
}

@c(itsme_voice_check)
public func ffiVoiceCheck(
    _ voice: UnsafeMutablePointer<itsme_voice>?, _ store: UnsafeMutablePointer<itsme_store>?,
    _ heardCode: UnsafePointer<CChar>?, _ heardTag: UInt32, _ now: Int64,
    _ outOutcome: UnsafeMutablePointer<itsme_voice_outcome>?
) -> itsme_result {
    onVoice(voice) { v in
        let store = try storeOf(store)
        let heard = try text(heardCode, "heard_code", max: TextLimit.typedCode)
        let out = try required(outOutcome, "out_outcome")
        out.pointee = try v.check(heardCode: heard, heardTag: heardTag, store: store, now: now).rawValue
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
    _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt
) -> itsme_result {
    guarded(ThreadLastError.set) {
        _ = try required(out, "out")
        let words = try VoiceProtocol.words(seed: try secret(seed, seedLen, "seed"), window: window, pid: try pid(pidIn, pidLen, "pid"))
        try writeWords(words, out, cap)
    }
}

@c(itsme_derive_lower_selects_first)
public func ffiDeriveLowerSelectsFirst(
    _ seed: UnsafePointer<UInt8>?, _ seedLen: UInt, _ window: Int64, _ out: UnsafeMutablePointer<Int32>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let out = try required(out, "out_lower_first")
        out.pointee = try VoiceProtocol.lowerSelectsFirst(seed: try secret(seed, seedLen, "seed"), window: window) ? 1 : 0
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
        guard firstWord < 26, secondWord < 26 else { throw invalid("a word index is 0 to 25") }
        let d = try VoiceProtocol.derive(
            seed: try secret(seed, seedLen, "seed"), window: window, myPID: try pid(myPID, myPIDLen, "my_pid"),
            theirPID: try pid(theirPID, theirPIDLen, "their_pid"),
            mySecret: try deviceSecret(mySecret, mySecretLen, "my_secret"),
            theirSecret: try deviceSecret(theirSecret, theirSecretLen, "their_secret"), firstWord: Int(firstWord),
            secondWord: Int(secondWord))
        var r = itsme_voice_derivation()
        r.session_id = d.sessionID
        withUnsafeMutableBytes(of: &r.my_words) { b in for (i, w) in d.myWords.enumerated() { b[i] = UInt8(w) } }
        withUnsafeMutableBytes(of: &r.their_words) { b in for (i, w) in d.theirWords.enumerated() { b[i] = UInt8(w) } }
        r.i_select_first = d.iSelectFirst ? 1 : 0
        r.my_code = d.myCode
        r.their_code = d.theirCode
        r.my_tag = d.myTag
        r.their_tag = d.theirTag
        out.pointee = r
    }
}

// MARK: - Degradation code

@c(itsme_store_degradation_code)
public func ffiStoreDegradationCode(
    _ store: UnsafeMutablePointer<itsme_store>?, _ contactID: Int64, _ rng: UnsafeMutablePointer<itsme_random>?,
    _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onContactStore(store) { s in
        // Check the buffer first: a code that cannot be handed out must not
        // replace the device secret.
        try checkOutput(out, cap, outLen)
        let size = DegradationCode.characterCount + 5 + 1
        guard cap >= UInt(size) else {
            outLen!.pointee = UInt(size)
            throw ItsMeError(.bufferTooSmall, "a degradation code needs \(size) bytes")
        }
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        let code = try DegradationCode.create(store: s, contactID: contactID, random: &random)
        try writeText(code, to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_store_accept_degradation_code)
public func ffiStoreAcceptDegradationCode(
    _ store: UnsafeMutablePointer<itsme_store>?, _ contactID: Int64, _ code: UnsafePointer<CChar>?, _ now: Int64
) -> itsme_result {
    onContactStore(store) { s in
        try DegradationCode.accept(store: s, contactID: contactID, code: try text(code, "code", max: TextLimit.typedCode), now: now)
    }
}

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

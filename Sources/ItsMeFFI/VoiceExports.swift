// Exported functions for voice verification, in the order of
// include/itsme.h.
import CItsMe
import ItsMeKit
import ItsMePrimitives

private func onVoice(_ p: UnsafeRawPointer?, _ body: (VoiceSession) throws -> Void) -> itsme_result {
    onSession(p, "voice", body)
}

@c(itsme_nato_word)
public func ffiNatoWord(_ index: UInt32) -> UnsafePointer<CChar>? {
    index < 26 ? cString(NATO.staticWords[Int(index)]) : nil
}

@c(itsme_window_of)
public func ffiWindowOf(_ now: Int64, _ outWindow: UnsafeMutablePointer<Int64>?) -> itsme_result {
    guarded(ThreadLastError.set) {
        try UnixTime.check(now)
        try required(outWindow, "out_window").pointee = VoiceProtocol.window(now)
    }
}

@c(itsme_voice_new)
public func ffiVoiceNew(
    _ store: UnsafeMutablePointer<itsme_store>?, _ contactID: Int64, _ binding: UnsafePointer<UInt8>?, _ bindingLen: UInt,
    _ now: Int64, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_voice>?>?
) -> itsme_result {
    newSession(store, out) { s in
        try VoiceSession(store: s, contactID: contactID, binding: try callBinding(binding, bindingLen), now: now)
    }
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
    _ voice: UnsafeMutablePointer<itsme_voice>?, _ now: Int64
) -> itsme_result {
    onVoice(voice) { v in try v.start(now: now) }
}

@c(itsme_voice_session_id)
public func ffiVoiceSessionID(
    _ voice: UnsafePointer<itsme_voice>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onVoice(voice) { v in try writeText(v.sessionIDText, to: out, cap: cap, outLen: outLen) }
}

/// Word indices, with the buffer convention (ITSME_VOICE_WORD_COUNT bytes).
package func writeWords(
    _ words: [Int], _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) throws {
    let indices = words.map { UInt8($0) }
    try indices.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_voice_words)
public func ffiVoiceWords(
    _ voice: UnsafePointer<itsme_voice>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onVoice(voice) { v in try writeWords(v.myWords, out, cap, outLen) }
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
    guard let code else { throw ItsMeError(.invalidState, "there are no codes (the session is \(v.state))") }
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
    _ voice: UnsafeMutablePointer<itsme_voice>?, _ heardCode: UnsafePointer<CChar>?, _ heardTag: UInt32, _ now: Int64,
    _ outOutcome: UnsafeMutablePointer<itsme_voice_outcome>?
) -> itsme_result {
    onVoice(voice) { v in
        let heard = try text(heardCode, "heard_code", max: TextLimit.typedCode)
        let out = try required(outOutcome, "out_outcome")
        out.pointee = try v.check(heardCode: heard, heardTag: heardTag, now: now).rawValue
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

// Exported functions for the invite-mailbox driver and the Online Verify
// room rule, in the order of include/itsme.h. The rules live in the core
// (MailboxSession, OnlineVerifyRendezvous); this file checks arguments and
// boxes handles.
import CItsMe
import ItsMeKit
import ItsMePrimitives
import Synchronization

// MARK: - Invite mailbox sessions

/// Box of an `itsme_mailbox_session`: calls run under the exchange's
/// identity lock, as the exchange's own do.
final class MailboxSessionHandle: @unchecked Sendable {
    let session: MailboxSession
    let exchange: ExchangeHandle
    let lastError = LastError()
    init(_ session: MailboxSession, _ exchange: ExchangeHandle) {
        self.session = session
        self.exchange = exchange
    }
}

private func onMailbox(_ p: UnsafeRawPointer?, _ body: (MailboxSession) throws -> Void) -> itsme_result {
    guard let handle = unbox(p, as: MailboxSessionHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("session is NULL") }
    }
    return guarded(handle.lastError.set) { try handle.exchange.identity.locked { _ in try body(handle.session) } }
}

private func newMailbox(
    _ exchange: UnsafeMutablePointer<itsme_exchange>?, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_mailbox_session>?>?,
    _ make: (Exchange) throws -> MailboxSession
) -> itsme_result {
    guard let handle = unbox(exchange, as: ExchangeHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("exchange is NULL") }
    }
    return guarded(handle.lastError.set) {
        let out = try required(out, "out")
        let session = try handle.identity.locked { _ in try make(handle.exchange) }
        out.pointee = box(MailboxSessionHandle(session, handle), as: itsme_mailbox_session.self)
    }
}

@c(itsme_mailbox_session_new)
public func ffiMailboxSessionNew(
    _ exchange: UnsafeMutablePointer<itsme_exchange>?, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_mailbox_session>?>?
) -> itsme_result {
    newMailbox(exchange, out) { try MailboxSession(exchange: $0) }
}

@c(itsme_mailbox_session_resume)
public func ffiMailboxSessionResume(
    _ exchange: UnsafeMutablePointer<itsme_exchange>?, _ saved: UnsafePointer<CChar>?,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_mailbox_session>?>?
) -> itsme_result {
    newMailbox(exchange, out) { ex in
        let state = try MailboxSession.SavedState(json: try text(saved, "saved"))
        return try MailboxSession(exchange: ex, saved: state)
    }
}

@c(itsme_mailbox_session_free)
public func ffiMailboxSessionFree(_ session: UnsafeMutablePointer<itsme_mailbox_session>?) {
    release(session, as: MailboxSessionHandle.self)
}

@c(itsme_mailbox_session_last_error)
public func ffiMailboxSessionLastError(
    _ session: UnsafePointer<itsme_mailbox_session>?, _ buf: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guard let handle = unbox(session, as: MailboxSessionHandle.self) else { return ITSME_E_INVALID_ARGUMENT }
    return copyLastError(handle.lastError.get(), buf, cap, outLen)
}

@c(itsme_mailbox_session_begin)
public func ffiMailboxSessionBegin(_ session: UnsafeMutablePointer<itsme_mailbox_session>?, _ wait: UInt32) -> itsme_result {
    onMailbox(session) { s in
        guard wait <= UInt32(MailboxSession.maxWait) else { throw invalid("wait must be 0 to 30 seconds, not \(wait)") }
        try s.begin(wait: Int(wait))
    }
}

private func requestCode(_ request: MailboxSession.Request) -> itsme_mailbox_request {
    switch request {
    case .create: return itsme_mailbox_request(ITSME_MAILBOX_REQUEST_CREATE)
    case .accept: return itsme_mailbox_request(ITSME_MAILBOX_REQUEST_ACCEPT)
    case .post: return itsme_mailbox_request(ITSME_MAILBOX_REQUEST_POST)
    case .fetch: return itsme_mailbox_request(ITSME_MAILBOX_REQUEST_FETCH)
    case .delete: return itsme_mailbox_request(ITSME_MAILBOX_REQUEST_DELETE)
    case .idle: return itsme_mailbox_request(ITSME_MAILBOX_REQUEST_IDLE)
    case .done: return itsme_mailbox_request(ITSME_MAILBOX_REQUEST_DONE)
    }
}

@c(itsme_mailbox_session_next_request)
public func ffiMailboxSessionNextRequest(
    _ session: UnsafeMutablePointer<itsme_mailbox_session>?, _ outRequest: UnsafeMutablePointer<itsme_mailbox_request>?
) -> itsme_result {
    onMailbox(session) { s in
        let out = try required(outRequest, "out_request")
        out.pointee = requestCode(s.nextRequest())
    }
}

/// Writes a text of the pending request (`.invalidState` when none is).
private func pendingText(
    _ session: UnsafePointer<itsme_mailbox_session>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?, _ part: (MailboxSession, (method: String, path: String)) -> String
) -> itsme_result {
    onMailbox(session) { s in
        try checkOutput(out, cap, outLen)
        guard let http = s.pendingHTTP else { throw ItsMeError(.invalidState, "no request is pending: ask for the next one first") }
        try writeText(part(s, http), to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_mailbox_session_request_path)
public func ffiMailboxSessionRequestPath(
    _ session: UnsafePointer<itsme_mailbox_session>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    pendingText(session, out, cap, outLen) { $1.path }
}

@c(itsme_mailbox_session_request_method)
public func ffiMailboxSessionRequestMethod(
    _ session: UnsafePointer<itsme_mailbox_session>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    pendingText(session, out, cap, outLen) { $1.method }
}

@c(itsme_mailbox_session_request_headers)
public func ffiMailboxSessionRequestHeaders(
    _ session: UnsafePointer<itsme_mailbox_session>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    pendingText(session, out, cap, outLen) { s, _ in headerLines(s.pendingHeaders) }
}

@c(itsme_mailbox_session_request_body)
public func ffiMailboxSessionRequestBody(
    _ session: UnsafePointer<itsme_mailbox_session>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onMailbox(session) { s in
        try checkOutput(out, cap, outLen)
        guard s.pendingHTTP != nil else { throw ItsMeError(.invalidState, "no request is pending: ask for the next one first") }
        var body: [UInt8] = []
        if case .post(let message) = s.nextRequest() { body = message }
        try body.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

@c(itsme_mailbox_session_token)
public func ffiMailboxSessionToken(
    _ session: UnsafePointer<itsme_mailbox_session>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onMailbox(session) { s in
        try checkOutput(out, cap, outLen)
        guard let token = s.token else { throw ItsMeError(.notFound, "no relay token yet: the invite is not created or accepted") }
        try writeText(token, to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_mailbox_session_answer)
public func ffiMailboxSessionAnswer(
    _ session: UnsafeMutablePointer<itsme_mailbox_session>?, _ status: UInt32, _ body: UnsafePointer<UInt8>?, _ len: UInt,
    _ now: Int64, _ outOutcome: UnsafeMutablePointer<itsme_mailbox_outcome>?
) -> itsme_result {
    onMailbox(session) { s in
        let out = try required(outOutcome, "out_outcome")
        let bytes = try optionalBytes(body, len, "body")
        try UnixTime.check(now)
        guard status <= 999 else { throw invalid("status must be an HTTP status (0 when no answer came), not \(status)") }
        let outcome = try s.answer(status: Int(status), body: bytes, now: now)
        switch outcome {
        case .proceed: out.pointee = itsme_mailbox_outcome(ITSME_MAILBOX_OUTCOME_PROCEED)
        case .inviteEnded: out.pointee = itsme_mailbox_outcome(ITSME_MAILBOX_OUTCOME_INVITE_ENDED)
        case .conflict: out.pointee = itsme_mailbox_outcome(ITSME_MAILBOX_OUTCOME_CONFLICT)
        case .stepEnded: out.pointee = itsme_mailbox_outcome(ITSME_MAILBOX_OUTCOME_STEP_ENDED)
        }
    }
}

@c(itsme_mailbox_session_finish)
public func ffiMailboxSessionFinish(_ session: UnsafeMutablePointer<itsme_mailbox_session>?, _ giveUp: Bool) -> itsme_result {
    onMailbox(session) { s in giveUp ? s.cancel() : s.finish() }
}

@c(itsme_mailbox_session_save)
public func ffiMailboxSessionSave(
    _ session: UnsafeMutablePointer<itsme_mailbox_session>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onMailbox(session) { s in
        try checkOutput(out, cap, outLen)
        try writeText(s.saved.json, to: out, cap: cap, outLen: outLen)
    }
}

// MARK: - The Online Verify room rule

/// Box of an `itsme_online_verify_rendezvous`: its two sessions are boxed
/// once, so every handle given out for one shares its lock.
final class RendezvousHandle: @unchecked Sendable {
    private let lock = CheckedLock()
    let rendezvous: OnlineVerifyRendezvous
    let sessions: [SessionHandle<OnlineVerify>]
    let lastError = LastError()

    init(_ rendezvous: OnlineVerifyRendezvous, _ store: ContactStoreHandle) {
        self.rendezvous = rendezvous
        self.sessions = rendezvous.candidates.map { SessionHandle($0.session, store) }
    }

    func run(_ body: (RendezvousHandle) throws -> Void) -> itsme_result {
        guarded(lastError.set) { try lock.withLock(reentered: reentered("the rendezvous")) { try body(self) } }
    }
}

private func onRendezvous(_ p: UnsafeRawPointer?, _ body: (RendezvousHandle) throws -> Void) -> itsme_result {
    guard let handle = unbox(p, as: RendezvousHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("rendezvous is NULL") }
    }
    return handle.run(body)
}

@c(itsme_online_verify_rendezvous_new)
public func ffiOnlineVerifyRendezvousNew(
    _ store: UnsafeMutablePointer<itsme_store>?, _ contactID: Int64, _ binding: UnsafePointer<UInt8>?, _ bindingLen: UInt,
    _ rng: UnsafeMutablePointer<itsme_random>?, _ now: Int64,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_online_verify_rendezvous>?>?
) -> itsme_result {
    guard let handle = unbox(store, as: ContactStoreHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("store is NULL") }
    }
    return guarded(handle.lastError.set) {
        let out = try required(out, "out")
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        let rendezvous = try OnlineVerifyRendezvous(
            store: handle.store, contactID: contactID, binding: try callBinding(binding, bindingLen), now: now, random: &random)
        out.pointee = box(RendezvousHandle(rendezvous, handle), as: itsme_online_verify_rendezvous.self)
    }
}

@c(itsme_online_verify_rendezvous_free)
public func ffiOnlineVerifyRendezvousFree(_ rendezvous: UnsafeMutablePointer<itsme_online_verify_rendezvous>?) {
    release(rendezvous, as: RendezvousHandle.self)
}

@c(itsme_online_verify_rendezvous_last_error)
public func ffiOnlineVerifyRendezvousLastError(
    _ rendezvous: UnsafePointer<itsme_online_verify_rendezvous>?, _ buf: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guard let handle = unbox(rendezvous, as: RendezvousHandle.self) else { return ITSME_E_INVALID_ARGUMENT }
    return copyLastError(handle.lastError.get(), buf, cap, outLen)
}

@c(itsme_online_verify_rendezvous_room_count)
public func ffiOnlineVerifyRendezvousRoomCount(
    _ rendezvous: UnsafePointer<itsme_online_verify_rendezvous>?, _ outCount: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onRendezvous(rendezvous) { h in try required(outCount, "out_count").pointee = UInt(h.rendezvous.roomsToJoin.count) }
}

@c(itsme_online_verify_rendezvous_room)
public func ffiOnlineVerifyRendezvousRoom(
    _ rendezvous: UnsafePointer<itsme_online_verify_rendezvous>?, _ index: UInt, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onRendezvous(rendezvous) { h in
        try checkOutput(out, cap, outLen)
        let rooms = h.rendezvous.roomsToJoin
        guard index < UInt(rooms.count) else { throw invalid("index \(index) is not below the room count \(rooms.count)") }
        try writeText(rooms[Int(index)], to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_online_verify_rendezvous_session)
public func ffiOnlineVerifyRendezvousSession(
    _ rendezvous: UnsafeMutablePointer<itsme_online_verify_rendezvous>?, _ index: UInt,
    _ outSession: UnsafeMutablePointer<UnsafeMutablePointer<itsme_online_verify>?>?
) -> itsme_result {
    onRendezvous(rendezvous) { h in
        let out = try required(outSession, "out_session")
        guard index < UInt(h.sessions.count) else { throw invalid("index is 0 (the current window) or 1 (the previous one), not \(index)") }
        out.pointee = box(h.sessions[Int(index)], as: itsme_online_verify.self)
    }
}

@c(itsme_online_verify_rendezvous_alone)
public func ffiOnlineVerifyRendezvousAlone(
    _ rendezvous: UnsafeMutablePointer<itsme_online_verify_rendezvous>?, _ room: UnsafePointer<CChar>?
) -> itsme_result {
    onRendezvous(rendezvous) { h in h.rendezvous.alone(in: try text(room, "room")) }
}

@c(itsme_online_verify_rendezvous_peer_joined)
public func ffiOnlineVerifyRendezvousPeerJoined(
    _ rendezvous: UnsafeMutablePointer<itsme_online_verify_rendezvous>?, _ room: UnsafePointer<CChar>?,
    _ outSession: UnsafeMutablePointer<UnsafeMutablePointer<itsme_online_verify>?>?
) -> itsme_result {
    onRendezvous(rendezvous) { h in
        let name = try text(room, "room")
        let out = try required(outSession, "out_session")
        try h.rendezvous.peerJoined(in: name)
        guard let index = h.rendezvous.chosenIndex else { throw ItsMeError(.internal, "no session was chosen") }
        out.pointee = box(h.sessions[index], as: itsme_online_verify.self)
    }
}

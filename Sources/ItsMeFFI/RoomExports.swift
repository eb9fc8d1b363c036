// Exported functions for the relay's paths and the room driver, in the
// order of include/itsme.h. The rules live in the core (RoomSession) and
// the relay's contract (ItsMeRelayProtocol); this file checks arguments and
// boxes handles.
import CItsMe
import ItsMeKit
import ItsMePrimitives
import ItsMeRelayProtocol

// MARK: - The relay's paths

/// The path of `route` for `id` (any ID where only the route matters).
private func relayRoute(_ route: itsme_relay_route, _ id: String = String(repeating: "0", count: RelayProtocol.idLength)) throws
    -> RelayPath
{
    guard RelayProtocol.isID(id) else { throw invalid("id must be 32 lower-case hex characters") }
    switch Int32(bitPattern: route) {
    case ITSME_RELAY_ROUTE_INVITE: return .invite(id)
    case ITSME_RELAY_ROUTE_INVITE_ACCEPT: return .inviteAccept(id)
    case ITSME_RELAY_ROUTE_INVITE_MESSAGES: return .inviteMessages(id)
    case ITSME_RELAY_ROUTE_ROOM: return .room(id)
    case ITSME_RELAY_ROUTE_GROUP: return .group(id)
    case ITSME_RELAY_ROUTE_RECORD: return .record(id)
    default: throw invalid("route \(route) is not an ITSME_RELAY_ROUTE_ this version knows")
    }
}

/// A method `route` serves.
private func relayMethod(_ method: UnsafePointer<CChar>?, on route: RelayPath) throws -> String {
    let method = try text(method, "method", max: 16)
    guard route.methods.contains(method) else {
        throw invalid("\(method) is not a method of this route (\(route.methods.joined(separator: ", ")))")
    }
    return method
}

private func relayStatus(_ status: UInt32) throws -> Int {
    guard status <= 999 else { throw invalid("status must be an HTTP status (0 when no answer came), not \(status)") }
    return Int(status)
}

/// Header lines as the header says: "Name: value", separated by CRLF.
func headerLines(_ headers: [(name: String, value: String)]) -> String {
    headers.map { "\($0.name): \($0.value)" }.joined(separator: "\r\n")
}

@c(itsme_relay_path)
public func ffiRelayPath(
    _ route: itsme_relay_route, _ id: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let id = try text(id, "id")
        try checkOutput(out, cap, outLen)
        try writeText(try relayRoute(route, id).text, to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_relay_answer_of)
public func ffiRelayAnswerOf(
    _ route: itsme_relay_route, _ method: UnsafePointer<CChar>?, _ status: UInt32,
    _ outAnswer: UnsafeMutablePointer<itsme_relay_answer>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let path = try relayRoute(route)
        let method = try relayMethod(method, on: path)
        let out = try required(outAnswer, "out_answer")
        let code: Int32
        switch RelayAnswer(path, method: method, status: try relayStatus(status)) {
        case .success: code = ITSME_RELAY_ANSWER_SUCCESS
        case .gone: code = ITSME_RELAY_ANSWER_GONE
        case .refused: code = ITSME_RELAY_ANSWER_REFUSED
        }
        out.pointee = itsme_relay_answer(code)
    }
}

@c(itsme_relay_request_headers)
public func ffiRelayRequestHeaders(
    _ route: itsme_relay_route, _ method: UnsafePointer<CChar>?, _ token: UnsafePointer<CChar>?,
    _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let path = try relayRoute(route)
        let method = try relayMethod(method, on: path)
        let token = token == nil ? nil : try text(token, "token", max: 64)
        if let token, !RelayProtocol.isToken(token) { throw invalid("token must be the 43 base64url characters the relay gave") }
        try checkOutput(out, cap, outLen)
        try writeText(headerLines(path.requestHeaders(method, token: token)), to: out, cap: cap, outLen: outLen)
    }
}

/// Writes a part of the refusal an answer says.
private func refusalText(
    _ status: UInt32, _ body: UnsafePointer<UInt8>?, _ len: UInt, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?, _ part: (RelayRefusal) -> String
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let refusal = RelayRefusal(status: try relayStatus(status), body: try optionalBytes(body, len, "body"))
        try checkOutput(out, cap, outLen)
        try writeText(part(refusal), to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_relay_refusal_kind)
public func ffiRelayRefusalKind(
    _ status: UInt32, _ body: UnsafePointer<UInt8>?, _ len: UInt, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    refusalText(status, body, len, out, cap, outLen) { $0.kind ?? "" }
}

@c(itsme_relay_refusal_message)
public func ffiRelayRefusalMessage(
    _ status: UInt32, _ body: UnsafePointer<UInt8>?, _ len: UInt, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    refusalText(status, body, len, out, cap, outLen) { $0.message }
}

@c(itsme_relay_record_stored)
public func ffiRelayRecordStored(
    _ body: UnsafePointer<UInt8>?, _ len: UInt, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let body = try optionalBytes(body, len, "body")
        try checkOutput(out, cap, outLen)
        switch RecordStored(json: body) {
        case .created(let token)?: try writeText(token, to: out, cap: cap, outLen: outLen)
        case .alreadyStored?: try writeText("", to: out, cap: cap, outLen: outLen)
        case nil: throw ItsMeError(.malformedMessage, "the relay's answer to a record's PUT carries no valid delete token")
        }
    }
}

@c(itsme_relay_header_name)
public func ffiRelayHeaderName(
    _ header: itsme_relay_header, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let name: String
        switch Int32(bitPattern: header) {
        case ITSME_RELAY_HEADER_AUTHORIZATION: name = RelayProtocol.authorizationHeader
        case ITSME_RELAY_HEADER_RETRY_AFTER: name = RelayProtocol.retryAfterHeader
        case ITSME_RELAY_HEADER_CONTENT_TYPE: name = RelayProtocol.contentTypeHeader
        case ITSME_RELAY_HEADER_ACCEPT: name = RelayProtocol.acceptHeader
        case ITSME_RELAY_HEADER_ALLOW: name = RelayProtocol.allowHeader
        default: throw invalid("header \(header) is not an ITSME_RELAY_HEADER_ this version knows")
        }
        try checkOutput(out, cap, outLen)
        try writeText(name, to: out, cap: cap, outLen: outLen)
    }
}

// MARK: - The room driver

/// Box of an `itsme_room_session`: calls run under the lock of its flow
/// (the exchange's identity lock, the Online Verify session's lock), whose
/// handle it keeps alive.
final class RoomSessionHandle: @unchecked Sendable {
    let session: RoomSession
    let lastError = LastError()
    private let locked: (() throws -> Void) throws -> Void

    init(_ session: RoomSession, exchange: ExchangeHandle) {
        self.session = session
        self.locked = { body in try exchange.identity.locked { _ in try body() } }
    }

    init(_ session: RoomSession, onlineVerify: SessionHandle<OnlineVerify>) {
        self.session = session
        self.locked = { body in try onlineVerify.locked { _ in try body() } }
    }

    init(_ session: RoomSession, transfer: TransferHandle) {
        self.session = session
        self.locked = { body in try transfer.locked { _ in try body() } }
    }

    func run(_ body: (RoomSession) throws -> Void) -> itsme_result {
        guarded(lastError.set) { try locked { try body(session) } }
    }
}

private func onRoom(_ p: UnsafeRawPointer?, _ body: (RoomSession) throws -> Void) -> itsme_result {
    guard let handle = unbox(p, as: RoomSessionHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("session is NULL") }
    }
    return handle.run(body)
}

@c(itsme_room_session_for_exchange)
public func ffiRoomSessionForExchange(
    _ exchange: UnsafeMutablePointer<itsme_exchange>?, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_room_session>?>?
) -> itsme_result {
    guard let handle = unbox(exchange, as: ExchangeHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("exchange is NULL") }
    }
    return guarded(handle.lastError.set) {
        let out = try required(out, "out")
        let session = try handle.identity.locked { _ in try RoomSession(exchange: handle.exchange) }
        out.pointee = box(RoomSessionHandle(session, exchange: handle), as: itsme_room_session.self)
    }
}

@c(itsme_room_session_for_online_verify)
public func ffiRoomSessionForOnlineVerify(
    _ session: UnsafeMutablePointer<itsme_online_verify>?, _ peerPresent: Bool,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_room_session>?>?
) -> itsme_result {
    guard let handle = unbox(session, as: SessionHandle<OnlineVerify>.self) else {
        return guarded(ThreadLastError.set) { throw invalid("session is NULL") }
    }
    return handle.run { verify in
        let out = try required(out, "out")
        out.pointee = box(
            RoomSessionHandle(RoomSession(onlineVerify: verify, peerPresent: peerPresent), onlineVerify: handle),
            as: itsme_room_session.self)
    }
}

@c(itsme_room_session_for_transfer)
public func ffiRoomSessionForTransfer(
    _ transfer: UnsafeMutablePointer<itsme_transfer>?, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_room_session>?>?
) -> itsme_result {
    guard let handle = unbox(transfer, as: TransferHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("transfer is NULL") }
    }
    return handle.run { transfer in
        let out = try required(out, "out")
        out.pointee = box(RoomSessionHandle(RoomSession(transfer: transfer), transfer: handle), as: itsme_room_session.self)
    }
}

@c(itsme_room_session_free)
public func ffiRoomSessionFree(_ session: UnsafeMutablePointer<itsme_room_session>?) {
    release(session, as: RoomSessionHandle.self)
}

@c(itsme_room_session_last_error)
public func ffiRoomSessionLastError(
    _ session: UnsafePointer<itsme_room_session>?, _ buf: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guard let handle = unbox(session, as: RoomSessionHandle.self) else { return ITSME_E_INVALID_ARGUMENT }
    return copyLastError(handle.lastError.get(), buf, cap, outLen)
}

@c(itsme_room_session_path)
public func ffiRoomSessionPath(
    _ session: UnsafePointer<itsme_room_session>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onRoom(session) { s in
        try checkOutput(out, cap, outLen)
        try writeText(s.path, to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_room_session_next)
public func ffiRoomSessionNext(
    _ session: UnsafeMutablePointer<itsme_room_session>?, _ now: Int64, _ outStep: UnsafeMutablePointer<itsme_room_step>?
) -> itsme_result {
    onRoom(session) { s in
        let out = try required(outStep, "out_step")
        try UnixTime.check(now)
        let code: Int32
        switch try s.next(now: now) {
        case .send: code = ITSME_ROOM_STEP_SEND
        case .receive: code = ITSME_ROOM_STEP_RECEIVE
        case .decide: code = ITSME_ROOM_STEP_DECIDE
        case .checkPeer: code = ITSME_ROOM_STEP_CHECK_PEER
        case .rejoin: code = ITSME_ROOM_STEP_REJOIN
        case .leave: code = ITSME_ROOM_STEP_LEAVE
        case .done: code = ITSME_ROOM_STEP_DONE
        }
        out.pointee = itsme_room_step(code)
    }
}

@c(itsme_room_session_message)
public func ffiRoomSessionMessage(
    _ session: UnsafePointer<itsme_room_session>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onRoom(session) { s in
        try checkOutput(out, cap, outLen)
        guard let message = s.pendingMessage else { throw ItsMeError(.invalidState, "the step is not SEND: ask for the next step first") }
        try message.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

@c(itsme_room_session_sent)
public func ffiRoomSessionSent(_ session: UnsafeMutablePointer<itsme_room_session>?) -> itsme_result {
    onRoom(session) { try $0.sent() }
}

@c(itsme_room_session_send_failed)
public func ffiRoomSessionSendFailed(_ session: UnsafeMutablePointer<itsme_room_session>?) -> itsme_result {
    onRoom(session) { try $0.sendFailed() }
}

@c(itsme_room_session_text)
public func ffiRoomSessionText(
    _ session: UnsafeMutablePointer<itsme_room_session>?, _ text: UnsafePointer<UInt8>?, _ len: UInt
) -> itsme_result {
    onRoom(session) { s in
        guard len <= UInt(ITSME_TEXT_MAX) else { throw invalid("text is \(len) bytes, above ITSME_TEXT_MAX") }
        s.event(text: try optionalBytes(text, len, "text"))
    }
}

@c(itsme_room_session_binary)
public func ffiRoomSessionBinary(
    _ session: UnsafeMutablePointer<itsme_room_session>?, _ bytes: UnsafePointer<UInt8>?, _ len: UInt, _ now: Int64
) -> itsme_result {
    onRoom(session) { s in
        let frame = try optionalBytes(bytes, len, "bytes")
        try UnixTime.check(now)
        try s.frame(frame, now: now)
    }
}

@c(itsme_room_session_closed)
public func ffiRoomSessionClosed(_ session: UnsafeMutablePointer<itsme_room_session>?, _ code: UInt32) -> itsme_result {
    onRoom(session) { s in
        guard code <= 4999 else { throw invalid("code must be a WebSocket close code (0 when none came), not \(code)") }
        s.closed(code: code == 0 ? nil : Int(code))
    }
}

@c(itsme_room_session_timed_out)
public func ffiRoomSessionTimedOut(_ session: UnsafeMutablePointer<itsme_room_session>?) -> itsme_result {
    onRoom(session) { $0.timedOut() }
}

@c(itsme_room_session_rejoined)
public func ffiRoomSessionRejoined(_ session: UnsafeMutablePointer<itsme_room_session>?) -> itsme_result {
    onRoom(session) { try $0.rejoined() }
}

@c(itsme_room_session_left)
public func ffiRoomSessionLeft(_ session: UnsafeMutablePointer<itsme_room_session>?) -> itsme_result {
    onRoom(session) { try $0.left() }
}

@c(itsme_room_session_abandon)
public func ffiRoomSessionAbandon(_ session: UnsafeMutablePointer<itsme_room_session>?) -> itsme_result {
    onRoom(session) { $0.abandon() }
}

@c(itsme_room_session_peer_present)
public func ffiRoomSessionPeerPresent(
    _ session: UnsafePointer<itsme_room_session>?, _ outPresent: UnsafeMutablePointer<Bool>?
) -> itsme_result {
    onRoom(session) { s in try required(outPresent, "out_present").pointee = s.peerPresent }
}

@c(itsme_room_session_failure)
public func ffiRoomSessionFailure(
    _ session: UnsafePointer<itsme_room_session>?, _ outFailure: UnsafeMutablePointer<itsme_room_failure>?
) -> itsme_result {
    onRoom(session) { s in
        let out = try required(outFailure, "out_failure")
        let code: Int32
        switch s.failure {
        case nil: code = ITSME_ROOM_FAILURE_NONE
        case .peerLeft?: code = ITSME_ROOM_FAILURE_PEER_LEFT
        case .refused?: code = ITSME_ROOM_FAILURE_REFUSED
        case .roomFull?: code = ITSME_ROOM_FAILURE_ROOM_FULL
        case .closed?: code = ITSME_ROOM_FAILURE_CLOSED
        case .timeout?: code = ITSME_ROOM_FAILURE_TIMEOUT
        case .badResponse?: code = ITSME_ROOM_FAILURE_BAD_RESPONSE
        }
        out.pointee = itsme_room_failure(code)
    }
}

/// Writes a part of the session's failure ("" for none).
private func failureText(
    _ session: UnsafePointer<itsme_room_session>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?, _ part: (RoomSession.Failure) -> String
) -> itsme_result {
    onRoom(session) { s in
        try checkOutput(out, cap, outLen)
        try writeText(s.failure.map(part) ?? "", to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_room_session_failure_kind)
public func ffiRoomSessionFailureKind(
    _ session: UnsafePointer<itsme_room_session>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    failureText(session, out, cap, outLen) { $0.kind }
}

@c(itsme_room_session_failure_message)
public func ffiRoomSessionFailureMessage(
    _ session: UnsafePointer<itsme_room_session>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    failureText(session, out, cap, outLen) { $0.message }
}

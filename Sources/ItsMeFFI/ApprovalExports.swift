// Exported functions for service approvals, in the order of
// include/itsme.h.
import CItsMe
import ItsMeKit
import ItsMePrimitives

// MARK: - Replay stores

/// Box of an `itsme_replay_store`.
final class ReplayStoreHandle: Sendable {
    let store: any ReplayStore
    init(_ store: any ReplayStore) { self.store = store }
}

/// A replay store backed by host callbacks; `destroy` runs when the last
/// reference goes.
final class CallbackReplayStore: ReplayStore, @unchecked Sendable {
    private let callbacks: itsme_replay_store_callbacks

    init(_ callbacks: itsme_replay_store_callbacks) { self.callbacks = callbacks }

    deinit { callbacks.destroy?(callbacks.ctx) }

    func insert(key: [UInt8], expiresAt: Int64, now: Int64) throws -> Bool {
        var seen = false
        let rc = key.withUnsafeBufferPointer { callbacks.insert!(callbacks.ctx, $0.baseAddress, expiresAt, now, &seen) }
        guard rc == ITSME_OK else {
            let kind = ItsMeError.Kind.all.first { $0.code == rc && rc != ITSME_OK } ?? .internal
            throw ItsMeError(kind, "the host's replay store failed (its insert returned \(rc))")
        }
        return seen
    }
}

/// Copies `s` and a NUL into a fixed C char array (a tuple), which the
/// checks before guarantee it fits.
private func copyText<T>(_ s: String, into field: inout T) {
    withUnsafeMutableBytes(of: &field) { dst in
        let u = Array(s.utf8)
        precondition(u.count < dst.count, "text longer than its field")
        dst.copyBytes(from: u)
        dst[u.count] = 0
    }
}

private func copyBytes<T>(_ b: [UInt8], into field: inout T) {
    withUnsafeMutableBytes(of: &field) { dst in
        precondition(b.count == dst.count, "bytes of the wrong size for their field")
        dst.copyBytes(from: b)
    }
}

private func decision(_ raw: itsme_approval_decision) throws -> ServiceApproval.Decision {
    guard raw <= UInt32(UInt8.max), let d = ServiceApproval.Decision(rawValue: UInt8(raw)) else {
        throw invalid("unknown decision \(raw): ITSME_APPROVAL_APPROVE or ITSME_APPROVAL_DENY")
    }
    return d
}

// MARK: - Device side

@c(itsme_credential_enroll)
public func ffiCredentialEnroll(
    _ store: UnsafeMutablePointer<itsme_secret_store>?, _ serviceID: UnsafePointer<CChar>?, _ label: UnsafePointer<CChar>?,
    _ nonce: UnsafePointer<UInt8>?, _ nonceLen: UInt, _ rng: UnsafeMutablePointer<itsme_random>?,
    _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onStore(store) { handle in
        try checkOutput(out, cap, outLen)
        let (service, label) = (try text(serviceID, "service_id"), try text(label, "label"))
        let nonce = try bytes(nonce, nonceLen, "nonce")
        // Nothing is saved unless the message fits.
        let size = try ServiceApproval.enrollmentSize(serviceID: service, label: label, nonce: nonce)
        guard let outLen, cap >= UInt(size) else {
            outLen?.pointee = UInt(size)
            throw ItsMeError(.bufferTooSmall, "buffer of \(cap) bytes is too small: \(size) needed")
        }
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        let made = try ServiceApproval.enroll(store: handle.store, serviceID: service, label: label, nonce: nonce, random: &random)
        try made.enrollment.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

@c(itsme_credential_id)
public func ffiCredentialID(
    _ store: UnsafeMutablePointer<itsme_secret_store>?, _ serviceID: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<UInt8>?,
    _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onStore(store) { handle in
        try checkOutput(out, cap, outLen)
        let id = try ServiceApproval.credentialID(store: handle.store, serviceID: try text(serviceID, "service_id"))
        try id.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

@c(itsme_credential_remove)
public func ffiCredentialRemove(_ store: UnsafeMutablePointer<itsme_secret_store>?, _ serviceID: UnsafePointer<CChar>?)
    -> itsme_result
{
    onStore(store) { handle in try ServiceApproval.removeCredential(store: handle.store, serviceID: try text(serviceID, "service_id")) }
}

@c(itsme_approval_request_parse)
public func ffiApprovalRequestParse(
    _ request: UnsafePointer<UInt8>?, _ len: UInt, _ now: Int64, _ out: UnsafeMutablePointer<itsme_approval_request_info>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let out = try required(out, "out")
        try checkStructSize(out, "out")
        guard len <= UInt(ServiceApproval.requestMaxCount) else {
            throw ItsMeError(.malformedMessage, "an approval request is at most \(ServiceApproval.requestMaxCount) bytes, got \(len)")
        }
        let r = try ServiceApproval.Request(parsing: try bytes(request, len, "request"), now: now)
        var info = itsme_approval_request_info()
        info.size = out.pointee.size
        copyText(r.serviceID, into: &info.service_id)
        copyText(r.serviceName, into: &info.service_name)
        copyText(r.sessionID, into: &info.session_id)
        copyText(r.otp, into: &info.otp)
        info.issued_at = r.issuedAt
        info.expires_at = r.expiresAt
        copyText(ServiceApproval.scopesText(r.scopes), into: &info.scopes)
        out.pointee = info
    }
}

@c(itsme_approval_sign)
public func ffiApprovalSign(
    _ store: UnsafeMutablePointer<itsme_secret_store>?, _ request: UnsafePointer<UInt8>?, _ requestLen: UInt,
    _ rawDecision: itsme_approval_decision, _ grantedScopes: UnsafePointer<CChar>?, _ now: Int64,
    _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onStore(store) { handle in
        try checkOutput(out, cap, outLen)
        guard requestLen <= UInt(ServiceApproval.requestMaxCount) else {
            throw ItsMeError(.malformedMessage, "an approval request is at most \(ServiceApproval.requestMaxCount) bytes")
        }
        let granted = try ServiceApproval.scopes(parsing: try optionalText(grantedScopes, "granted_scopes"))
        let approval = try ServiceApproval.sign(
            store: handle.store, request: try bytes(request, requestLen, "request"), decision: try decision(rawDecision),
            granted: granted, now: now)
        try approval.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

// MARK: - Service side

@c(itsme_enrollment_verify)
public func ffiEnrollmentVerify(
    _ serviceID: UnsafePointer<CChar>?, _ nonce: UnsafePointer<UInt8>?, _ nonceLen: UInt, _ enrollment: UnsafePointer<UInt8>?,
    _ len: UInt, _ out: UnsafeMutablePointer<itsme_credential_info>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let out = try required(out, "out")
        try checkStructSize(out, "out")
        let service = try text(serviceID, "service_id"), nonce = try bytes(nonce, nonceLen, "nonce")
        guard len <= UInt(ServiceApproval.enrollmentMaxCount) else {
            throw ItsMeError(.malformedMessage, "an enrollment is at most \(ServiceApproval.enrollmentMaxCount) bytes, got \(len)")
        }
        let c = try ServiceApproval.verifyEnrollment(serviceID: service, nonce: nonce, enrollment: try bytes(enrollment, len, "enrollment"))
        var info = itsme_credential_info()
        info.size = out.pointee.size
        copyBytes(c.credentialID, into: &info.credential_id)
        copyBytes(c.publicKey, into: &info.public_key)
        copyText(c.label, into: &info.label)
        out.pointee = info
    }
}

@c(itsme_approval_request_create)
public func ffiApprovalRequestCreate(
    _ serviceID: UnsafePointer<CChar>?, _ serviceName: UnsafePointer<CChar>?, _ sessionID: UnsafePointer<CChar>?,
    _ scopes: UnsafePointer<CChar>?, _ lifetime: Int64, _ rng: UnsafeMutablePointer<itsme_random>?, _ now: Int64,
    _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        let requested = try ServiceApproval.scopes(parsing: try optionalText(scopes, "scopes"))
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        let request = try ServiceApproval.Request.create(
            serviceID: try text(serviceID, "service_id"), serviceName: try text(serviceName, "service_name"),
            sessionID: try text(sessionID, "session_id"), scopes: requested, lifetime: lifetime, now: now, random: &random)
        try request.bytes.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

@c(itsme_replay_store_new_memory)
public func ffiReplayStoreNewMemory(_ capacity: UInt, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_replay_store>?>?)
    -> itsme_result
{
    guarded(ThreadLastError.set) {
        let out = try required(out, "out")
        guard capacity <= UInt(Int.max) else { throw invalid("capacity \(capacity) is too large") }
        let store = MemoryReplayStore(capacity: Int(capacity))
        out.pointee = box(ReplayStoreHandle(store), as: itsme_replay_store.self)
    }
}

@c(itsme_replay_store_new_callbacks)
public func ffiReplayStoreNewCallbacks(
    _ callbacks: UnsafePointer<itsme_replay_store_callbacks>?, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_replay_store>?>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let table = try required(callbacks, "callbacks").pointee
        let out = try required(out, "out")
        guard table.version == UInt32(ITSME_REPLAY_STORE_CALLBACKS_VERSION) else {
            throw invalid("callbacks->version is \(table.version): this library knows version \(ITSME_REPLAY_STORE_CALLBACKS_VERSION)")
        }
        guard table.insert != nil else { throw invalid("the insert callback is NULL") }
        out.pointee = box(ReplayStoreHandle(CallbackReplayStore(table)), as: itsme_replay_store.self)
    }
}

@c(itsme_replay_store_free)
public func ffiReplayStoreFree(_ store: UnsafeMutablePointer<itsme_replay_store>?) {
    release(store, as: ReplayStoreHandle.self)
}

@c(itsme_approval_verify)
public func ffiApprovalVerify(
    _ request: UnsafePointer<UInt8>?, _ requestLen: UInt, _ approval: UnsafePointer<UInt8>?, _ approvalLen: UInt,
    _ publicKeys: UnsafePointer<UInt8>?, _ keyCount: UInt, _ replay: UnsafeMutablePointer<itsme_replay_store>?, _ now: Int64,
    _ out: UnsafeMutablePointer<itsme_approval_result>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let out = try required(out, "out")
        try checkStructSize(out, "out")
        guard let replay = unbox(replay, as: ReplayStoreHandle.self) else { throw invalid("replay is NULL") }
        guard requestLen <= UInt(ServiceApproval.requestMaxCount) else {
            throw invalid("the service's own request is more than \(ServiceApproval.requestMaxCount) bytes")
        }
        guard approvalLen <= UInt(ServiceApproval.approvalMaxCount) else {
            throw ItsMeError(.malformedMessage, "an approval is at most \(ServiceApproval.approvalMaxCount) bytes, got \(approvalLen)")
        }
        guard keyCount <= 4096 else { throw invalid("at most 4096 enrolled keys per call") }
        let keys = keyCount == 0 ? [] : try bytes(publicKeys, keyCount * UInt(Ed25519.publicKeyCount), "public_keys")
        let list = stride(from: 0, to: keys.count, by: Ed25519.publicKeyCount).map { Array(keys[$0..<$0 + Ed25519.publicKeyCount]) }
        let v = try ServiceApproval.verify(
            request: try bytes(request, requestLen, "request"), approval: try bytes(approval, approvalLen, "approval"), publicKeys: list,
            replay: replay.store, now: now)
        var result = itsme_approval_result()
        result.size = out.pointee.size
        result.decision = itsme_approval_decision(v.decision.rawValue)
        copyBytes(v.credentialID, into: &result.credential_id)
        result.timestamp = v.timestamp
        copyText(v.grantedText, into: &result.granted_scopes)
        out.pointee = result
    }
}

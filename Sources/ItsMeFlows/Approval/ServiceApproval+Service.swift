// The service's side of service approvals (docs/PROTOCOL.md section 19):
// making requests, checking enrollments and approvals.
import ItsMePrimitives
import ItsMeBase
import ItsMeStore


import CSodium
import Synchronization

extension ServiceApproval {

    /// What a service learns from a valid enrollment, to keep with the
    /// user's account.
    public struct Credential: Equatable, Sendable {
        /// The credential's 16-byte ID, which approvals name.
        public let credentialID: [UInt8]
        /// The credential's Ed25519 public key (32 bytes), which verifies approvals.
        public let publicKey: [UInt8]
        /// The device as the service will list it.
        public let label: String
    }

    /// Checks an enrollment against the service's own `serviceID` and the
    /// `nonce` it issued, never values read from the message (the service
    /// must then spend the nonce). Errors, in this order: `.invalidArgument`
    /// (a bad service ID or nonce), `.malformedMessage` (length, version,
    /// label), `.authenticationFailed` (not a valid Ed25519 public key),
    /// `.authenticationFailed` (bad signature, another nonce or service).
    public static func verifyEnrollment(serviceID: String, nonce: [UInt8], enrollment: [UInt8]) throws -> Credential {
        let service = try checkedServiceID(serviceID)
        guard enrollmentNonceCounts.contains(nonce.count) else {
            throw invalid("an enrollment nonce is 16 to 64 bytes, got \(nonce.count)")
        }
        guard enrollment.count > enrollmentFixedCount, enrollment.count <= enrollmentMaxCount else {
            throw malformed("an enrollment is 99 to \(enrollmentMaxCount) bytes, got \(enrollment.count)")
        }
        guard enrollment[0] == version else {
            throw malformed("the enrollment has version \(enrollment[0]); this library reads version 1")
        }
        let labelCount = Int(enrollment[1 + Ed25519.publicKeyCount])
        guard enrollment.count == enrollmentFixedCount + labelCount else {
            throw malformed(
                "the enrollment is \(enrollment.count) bytes, but its label length says \(enrollmentFixedCount + labelCount)")
        }
        let publicKey = Array(enrollment[1..<(1 + Ed25519.publicKeyCount)])
        let labelStart = 2 + Ed25519.publicKeyCount
        let labelBytes = Array(enrollment[labelStart..<(labelStart + labelCount)])
        guard let label = String(validating: labelBytes, as: UTF8.self), DisplayName.isValid(label) else {
            throw malformed("the enrollment's label is not 1 to 128 bytes of UTF-8 without control, invisible or bidi-override characters")
        }
        guard Ed25519.isValidPublicKey(publicKey) else {
            throw ItsMeError(.authenticationFailed, "the enrollment's public key is not a valid Ed25519 key")
        }
        let message = enrollmentMessage(serviceID: service, nonce: nonce, publicKey: publicKey, label: labelBytes)
        guard
            Ed25519.verify(
                signature: Array(enrollment[(labelStart + labelCount)...]), message: message, publicKey: publicKey)
        else {
            throw ItsMeError(
                .authenticationFailed, "the enrollment's signature does not verify for this service and nonce")
        }
        return Credential(credentialID: credentialID(publicKey: publicKey), publicKey: publicKey, label: label)
    }

    /// What a verified answer says.
    public struct Verified: Equatable, Sendable {
        /// A verified denial: the person refused.
        public let decision: Decision
        /// Which enrolled key signed.
        public let credentialID: [UInt8]
        /// The device's clock when it signed (informational).
        public let timestamp: Int64
        /// In increasing byte order; always empty for a denial.
        public let granted: [String]

        /// The granted scopes as text ("" for none).
        public var grantedText: String { granted.joined(separator: " ") }
    }

    /// Verifies `approval` against the service's own record of the request
    /// (the bytes `Request.create` gave), the user's enrolled public keys,
    /// the service's clock and `replay`, in the order of PROTOCOL.md 19.5:
    ///
    /// 0. `now` and the keys are checked (`.invalidArgument`);
    /// 1. the request parses (else `.invalidArgument`); the approval parses
    ///    exactly (else `.malformedMessage`);
    /// 2. `now > expires_at`: `.expired`;
    /// 3. the credential ID is none of the keys': `.notFound`;
    /// 4. the OTP differs (constant time): `.authenticationFailed`;
    /// 5. a granted scope not requested: `.malformedMessage`;
    /// 6. the signature does not verify: `.authenticationFailed`;
    /// 7. the replay key was in `replay` already: `.replayed` (or the
    ///    store's own error).
    ///
    /// Only an answer that passed steps 1 to 6 reaches the replay store, so
    /// a forged one cannot spend the request. A verified denial returns
    /// normally with `decision == .deny`.
    public static func verify(
        request requestBytes: [UInt8], approval approvalBytes: [UInt8], publicKeys: [[UInt8]], replay: any ReplayStore,
        now: Int64
    ) throws -> Verified {
        try UnixTime.check(now)
        for (i, key) in publicKeys.enumerated() where key.count != Ed25519.publicKeyCount {
            throw invalid("enrolled public key \(i + 1) is \(key.count) bytes; an Ed25519 public key is 32")
        }
        // 1. The service's own record, then the answer.
        let request: Request
        do {
            request = try Request(parsing: requestBytes)
        } catch let e as ItsMeError where e.kind == .malformedMessage {
            throw invalid("the service's own request does not parse: \(e.message)")
        }
        let approval = try Approval(parsing: approvalBytes)
        // 2.
        try request.checkNotExpired(now: now)
        // 3.
        guard let publicKey = publicKeys.first(where: { credentialID(publicKey: $0) == approval.credentialID }) else {
            throw ItsMeError(.notFound, "the approval is signed by none of the user's enrolled keys")
        }
        // 4.
        guard ConstantTime.equal(approval.otp, Array(request.otp.utf8)) else {
            throw ItsMeError(.authenticationFailed, "the approval's OTP is not the request's")
        }
        // 5.
        let requested = Set(request.scopes.map { Array($0.utf8) })
        for scope in approval.granted where !requested.contains(scope) {
            throw malformed("the approval grants the scope '\(String(decoding: scope, as: UTF8.self))', which was not requested")
        }
        // 6.
        let message = approvalMessage(
            request: request, credentialID: approval.credentialID, timestamp: approval.timestamp, granted: approval.granted,
            decision: approval.decision)
        guard Ed25519.verify(signature: approval.signature, message: message, publicKey: publicKey) else {
            throw ItsMeError(.authenticationFailed, "the approval's signature does not verify")
        }
        // 7. Single use.
        guard try !replay.insert(key: request.replayKey, expiresAt: request.expiresAt, now: now) else {
            throw ItsMeError(.replayed, "this request has been answered already")
        }
        return Verified(
            decision: approval.decision, credentialID: approval.credentialID, timestamp: approval.timestamp,
            granted: approval.granted.map { String(decoding: $0, as: UTF8.self) })
    }
}

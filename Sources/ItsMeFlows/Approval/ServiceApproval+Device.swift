// The device's side of service approvals (docs/PROTOCOL.md section 19):
// enrolling a credential, and reading and approving a request.
import ItsMePrimitives
import ItsMeBase
import ItsMeStore


import CSodium
import Synchronization

extension ServiceApproval {

    /// Checks the arguments of `enroll` as it does (`.invalidArgument`) and
    /// gives the size of the enrollment message, 98 + len(label) bytes, so
    /// a caller can check its buffer before anything is saved.
    public static func enrollmentSize(serviceID: String, label: String, nonce: [UInt8]) throws -> Int {
        try checkedEnrollment(serviceID: serviceID, label: label, nonce: nonce).label.count + enrollmentFixedCount
    }

    static func checkedEnrollment(serviceID: String, label: String, nonce: [UInt8]) throws -> (service: [UInt8], label: [UInt8]) {
        let service = try checkedServiceID(serviceID)
        let labelBytes = try checkedName(label, "a device label")
        guard enrollmentNonceCounts.contains(nonce.count) else {
            throw invalid("an enrollment nonce is 16 to 64 bytes, got \(nonce.count)")
        }
        return (service, labelBytes)
    }

    /// Makes a new Ed25519 key pair for `serviceID` (32 random bytes of
    /// seed, one draw), replacing the one this device had for it, saves it
    /// in `store`, and returns the enrollment message for the service (19.2),
    /// signed over the service's `nonce`, and the credential ID.
    /// `.invalidArgument` for an invalid service ID, label or nonce; the
    /// store's errors.
    public static func enroll<R: RandomSource>(
        store: any SecretStore, serviceID: String, label: String, nonce: [UInt8], random: inout R
    ) throws -> (enrollment: [UInt8], credentialID: [UInt8]) {
        let (service, labelBytes) = try checkedEnrollment(serviceID: serviceID, label: label, nonce: nonce)
        let seed = try SecretBytes(randomCount: Ed25519.seedCount, using: &random)
        let pair = try Ed25519.keyPair(seed: seed)
        let signature = try Ed25519.sign(
            enrollmentMessage(serviceID: service, nonce: nonce, publicKey: pair.publicKey, label: labelBytes), secretKey: pair.secretKey)
        let enrollment = [version] + pair.publicKey + [UInt8(labelBytes.count)] + labelBytes + signature
        // Record v1: version | seed (32) | u8(len(service_id)) | service_id | u8(len(label)) | label.
        var w = try RecordWriter(count: 1 + Ed25519.seedCount + 1 + service.count + 1 + labelBytes.count)
        w.append(credentialRecordVersion)
        w.append(seed)
        w.append(UInt8(service.count))
        w.append(service)
        w.append(UInt8(labelBytes.count))
        w.append(labelBytes)
        try store.put(credentialItemName(serviceID: serviceID), bytes: w.finish())
        return (enrollment, credentialID(publicKey: pair.publicKey))
    }

    /// `enroll` with the operating system's random source.
    public static func enroll(
        store: any SecretStore, serviceID: String, label: String, nonce: [UInt8]
    ) throws -> (enrollment: [UInt8], credentialID: [UInt8]) {
        var random = SystemRandom()
        return try enroll(store: store, serviceID: serviceID, label: label, nonce: nonce, random: &random)
    }

    /// The key pair stored for `service`: `.notFound` if none,
    /// `.corruptData` for a malformed record or one of another service.
    static func storedKeyPair(store: any SecretStore, serviceID: String, service: [UInt8]) throws -> Ed25519.KeyPair {
        guard let record = try store.get(credentialItemName(serviceID: serviceID)) else {
            throw ItsMeError(.notFound, "this device holds no credential for the service \(serviceID)")
        }
        return try record.withBytes { raw in
            var r = RecordReader(raw, what: "the stored credential for \(serviceID)")
            let version = try r.byte()
            guard version == credentialRecordVersion else {
                throw ItsMeError(.corruptData, "the stored credential for \(serviceID) has unknown format version \(version)")
            }
            let seed = try r.secret(Ed25519.seedCount)
            let storedService = try r.array(Int(try r.byte()))
            guard storedService == service else {
                throw ItsMeError(.corruptData, "the stored credential for \(serviceID) names another service")
            }
            let label = try r.array(Int(try r.byte()))
            guard let text = String(validating: label, as: UTF8.self), DisplayName.isValid(text) else {
                throw ItsMeError(.corruptData, "the stored credential for \(serviceID) has an invalid label")
            }
            try r.finish()
            return try Ed25519.keyPair(seed: seed)
        }
    }

    /// The credential ID this device holds for `serviceID`: `.notFound` if
    /// not enrolled, `.corruptData` for a damaged item.
    public static func credentialID(store: any SecretStore, serviceID: String) throws -> [UInt8] {
        let service = try checkedServiceID(serviceID)
        let pair = try storedKeyPair(store: store, serviceID: serviceID, service: service)
        return credentialID(publicKey: pair.publicKey)
    }

    /// Deletes this device's key for `serviceID`; `.notFound` if none.
    public static func removeCredential(store: any SecretStore, serviceID: String) throws {
        _ = try checkedServiceID(serviceID)
        guard try store.remove(credentialItemName(serviceID: serviceID)) else {
            throw ItsMeError(.notFound, "this device holds no credential for the service \(serviceID)")
        }
    }

    /// Answers a request with the key enrolled for its service, signing at
    /// `now`: `.approve` with `granted` (some of the requested scopes, in
    /// any order; none is fine), or `.deny` (no scope). Errors, in this
    /// order: `.invalidArgument` (a time out of range), `.malformedMessage`
    /// (the request), `.expired` (`now` past its expiry), `.invalidArgument`
    /// (a scope not requested, a repeated one, a scope with a denial),
    /// `.notFound` (no key for the service), `.corruptData`, the store's.
    public static func sign(
        store: any SecretStore, request requestBytes: [UInt8], decision: Decision, granted: [String], now: Int64
    ) throws -> [UInt8] {
        let request = try Request(parsing: requestBytes, now: now)
        guard decision == .approve || granted.isEmpty else { throw invalid("a denial grants no scope") }
        let sorted = try checkedScopes(granted, what: "granted scope")
        let requested = Set(request.scopes.map { Array($0.utf8) })
        for scope in sorted where !requested.contains(scope) {
            throw invalid("the scope '\(String(decoding: scope, as: UTF8.self))' was not requested")
        }
        let pair = try storedKeyPair(store: store, serviceID: request.serviceID, service: Array(request.serviceID.utf8))
        let id = credentialID(publicKey: pair.publicKey)
        let message = approvalMessage(request: request, credentialID: id, timestamp: now, granted: sorted, decision: decision)
        let signature = try Ed25519.sign(message, secretKey: pair.secretKey)
        return Approval.encode(
            credentialID: id, decision: decision, timestamp: now, otp: request.otp, granted: sorted, signature: signature)
    }

}

import Foundation
import ItsMeKit
import ItsMePrimitives

/// The service approval vectors (PROTOCOL.md 19): approval.json, built from
/// fixed inputs and checked against the documented formulas as they are
/// built.
extension VectorGenerator {
    private typealias SA = ServiceApproval

    /// `scopes(s_1, ..., s_n)` of 19.1.
    private func scopesField(_ scopes: [String]) -> [UInt8] {
        scopes.reduce([UInt8(scopes.count)]) { $0 + [UInt8($1.utf8.count)] + Array($1.utf8) }
    }

    private struct VectorEnrollment {
        let store: MemorySecretStore
        let seed: [UInt8]
        let publicKey: [UInt8]
        let credentialID: [UInt8]
        let json: [String: Any]
    }

    private func approvalEnrollment(_ n: Int, serviceID: String, label: String, nonceCount: Int) throws -> VectorEnrollment {
        let randomSeed = fixed("itsme-vector-approval-device-\(n)")
        var mirror = DeterministicRandom(seed: randomSeed)
        let seed = mirror.bytes(32)
        let nonce = Array(fixed("itsme-vector-approval-enroll-nonce-\(n)").prefix(nonceCount))
        var rng = DeterministicRandom(seed: randomSeed)
        let store = MemorySecretStore()
        let (enrollment, id) = try SA.enroll(store: store, serviceID: serviceID, label: label, nonce: nonce, random: &rng)
        // The documented formulas (19.2), step by step.
        let pair = try Ed25519.keyPair(seed: seed)
        let credentialID = Array(SHA256.hash(LV.cat(LV.b("itsme-credential-id-v1"), pair.publicKey)).prefix(16))
        let signed = LV.cat(LV.b("itsme-enroll-v1"), LV.b(serviceID), nonce, pair.publicKey, LV.b(label))
        let signature = try Ed25519.sign(signed, secretKey: pair.secretKey)
        expectEqual(id, credentialID)
        expectEqual(enrollment, [1] + pair.publicKey + [UInt8(label.utf8.count)] + LV.b(label) + signature)
        expectEqual(enrollment.count, 98 + label.utf8.count)
        let credential = try SA.verifyEnrollment(serviceID: serviceID, nonce: nonce, enrollment: enrollment)
        expectEqual(credential.credentialID, credentialID)
        expectEqual(credential.publicKey, pair.publicKey)
        expectEqual(credential.label, label)
        // The stored item (docs/STORAGE.md).
        let itemName = "itsme.credential." + hex(Array(SHA256.hash(LV.cat(LV.b("itsme-credential-name-v1"), LV.b(serviceID))).prefix(16)))
        expectEqual(store.names, [itemName])
        let item = [1] + seed + [UInt8(serviceID.utf8.count)] + LV.b(serviceID) + [UInt8(label.utf8.count)] + LV.b(label)
        expectEqual(try stored(store, itemName), item)
        return VectorEnrollment(
            store: store, seed: seed, publicKey: pair.publicKey, credentialID: credentialID,
            json: [
                "random_seed": hex(randomSeed), "credential_seed": hex(seed), "service_id_text": serviceID, "nonce": hex(nonce),
                "label_text": label, "public_key": hex(pair.publicKey), "credential_id": hex(credentialID),
                "signed_message": hex(signed), "signature": hex(signature), "enrollment": hex(enrollment),
                "credential_item_text": itemName, "credential_item": hex(item),
            ])
    }

    private func approvalRequest(
        _ n: Int, serviceID: String, serviceName: String, sessionID: String, scopes: [String], lifetime: Int64
    ) throws -> (SA.Request, [String: Any]) {
        let randomSeed = fixed("itsme-vector-approval-request-\(n)")
        var mirror = DeterministicRandom(seed: randomSeed)
        let nonce = mirror.bytes(32)
        // The OTP: 4 bytes at a time, big-endian, rejected from 4,294,000,000.
        var draws: [[UInt8]] = []
        var value: UInt32 = 0
        repeat {
            draws.append(mirror.bytes(4))
            value = draws.last!.reduce(0) { $0 << 8 | UInt32($1) }
        } while value >= 4_294_000_000
        let otp = String(format: "%06u", value % 1_000_000)
        var rng = DeterministicRandom(seed: randomSeed)
        let request = try SA.Request.create(
            serviceID: serviceID, serviceName: serviceName, sessionID: sessionID, scopes: scopes, lifetime: lifetime, now: now,
            random: &rng)
        let sorted = scopes.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        var bytes: [UInt8] = [1, UInt8(serviceID.utf8.count)] + LV.b(serviceID) + [UInt8(serviceName.utf8.count)] + LV.b(serviceName)
        bytes += [UInt8(sessionID.utf8.count)] + LV.b(sessionID) + LV.b(otp) + nonce + VoiceProtocol.u64(now) + VoiceProtocol.u64(now + lifetime)
        bytes += scopesField(sorted)
        expectEqual(request.bytes, bytes)
        expectEqual(request.otp, otp)
        expectEqual(request.nonce, nonce)
        expectEqual(request.scopes, sorted)
        expectEqual(try SA.Request(parsing: bytes, now: now), request)
        let replayKey = SHA256.hash(LV.cat(LV.b("itsme-approval-replay-v1"), LV.b(serviceID), nonce))
        expectEqual(request.replayKey, replayKey)
        return (
            request,
            [
                "random_seed": hex(randomSeed), "service_id_text": serviceID, "service_name_text": serviceName,
                "session_id_text": sessionID, "scopes_given_text": scopes.joined(separator: " "),
                "scopes_text": sorted.joined(separator: " "), "lifetime": Int(lifetime), "now": Int(now), "nonce": hex(nonce),
                "otp_random": draws.map(hex), "otp_text": otp, "issued_at": Int(now), "expires_at": Int(now + lifetime),
                "request": hex(bytes), "request_hash": hex(SHA256.hash(bytes)), "replay_key": hex(replayKey),
            ]
        )
    }

    /// An approval built from the formulas of 19.4 (any values, so refusals
    /// can be signed too).
    private func formulaApproval(
        _ request: SA.Request, seed: [UInt8], decision: UInt8, timestamp: Int64, granted: [String], otp: String? = nil,
        signedGranted: [String]? = nil
    ) throws -> (message: [UInt8], signature: [UInt8], approval: [UInt8]) {
        let pair = try Ed25519.keyPair(seed: seed)
        let id = Array(SHA256.hash(LV.cat(LV.b("itsme-credential-id-v1"), pair.publicKey)).prefix(16))
        let message = LV.cat(
            LV.b("itsme-approval-v1"), LV.b(request.serviceID), id, request.nonce, SHA256.hash(request.bytes), LV.b(request.sessionID),
            LV.b(request.otp), VoiceProtocol.u64(timestamp), LV.cat((signedGranted ?? granted).map(LV.b)), [decision])
        let signature = try Ed25519.sign(message, secretKey: pair.secretKey)
        let approval = [1] + id + [decision] + VoiceProtocol.u64(timestamp) + LV.b(otp ?? request.otp) + scopesField(granted) + signature
        return (message, signature, approval)
    }

    func approvalVectors() throws -> [String: Any] {
        let service = "bank.example"
        let phone = try approvalEnrollment(1, serviceID: service, label: "Alice's phone", nonceCount: 16)
        let tablet = try approvalEnrollment(2, serviceID: service, label: "Zoë's tablet", nonceCount: 64)
        let devices = [phone, tablet]
        let stores = devices.map(\.store)

        let (r1, r1JSON) = try approvalRequest(
            1, serviceID: service, serviceName: "Example Bank", sessionID: "login-7f3a9c", scopes: ["profile", "email", "payments"],
            lifetime: 120)
        let (r2, r2JSON) = try approvalRequest(
            2, serviceID: service, serviceName: "Exämple Bänk", sessionID: "tx-000042", scopes: [], lifetime: 600)
        let (r3, r3JSON) = try approvalRequest(
            3, serviceID: service, serviceName: "Example Bank", sessionID: "login-7f3a9c", scopes: ["email"], lifetime: 60)
        expectNotEqual(r1.otp, r3.otp)
        let requests = [r1, r2, r3]

        // Approvals, each made by the library and rebuilt from the formulas.
        let cases: [(String, Int, Int, SA.Decision, [String], Int64)] = [
            ("approve with a subset of the scopes, given unsorted", 0, 0, .approve, ["profile", "email"], now + 7),
            ("deny", 1, 0, .deny, [], now + 9),
            ("approve a request without scopes", 1, 1, .approve, [], now + 300),
        ]
        var approvals: [[String: Any]] = []
        var made: [[UInt8]] = []
        for (name, d, r, decision, granted, timestamp) in cases {
            let request = requests[r]
            let approval = try SA.sign(store: stores[d], request: request.bytes, decision: decision, granted: granted, now: timestamp)
            let sorted = granted.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
            let f = try formulaApproval(request, seed: devices[d].seed, decision: decision.rawValue, timestamp: timestamp, granted: sorted)
            expectEqual(approval, f.approval, name)
            let verifyNow = timestamp + 1
            let verified = try SA.verify(
                request: request.bytes, approval: approval, publicKeys: [phone.publicKey, tablet.publicKey], replay: MemoryReplayStore(),
                now: verifyNow)
            expectEqual(verified.decision, decision)
            expectEqual(verified.credentialID, devices[d].credentialID)
            expectEqual(verified.timestamp, timestamp)
            expectEqual(verified.granted, sorted)
            made.append(approval)
            approvals.append([
                "case_text": name, "enrollment": d, "request": r, "decision": Int(decision.rawValue),
                "granted_given_text": granted.joined(separator: " "), "granted_text": sorted.joined(separator: " "),
                "timestamp": Int(timestamp), "request_hash": hex(SHA256.hash(request.bytes)), "signed_message": hex(f.message),
                "signature": hex(f.signature), "approval": hex(approval),
                "public_keys": [hex(phone.publicKey), hex(tablet.publicKey)], "verify_now": Int(verifyNow),
                "credential_id": hex(devices[d].credentialID),
            ])
        }

        // Refusals of 19.5: each list of approvals is presented in order to
        // one fresh replay store; all but the last verify.
        let a1 = made[0], deny1 = made[1]
        let bothKeys = [phone.publicKey, tablet.publicKey]
        let t = now + 10
        func flipped(_ b: [UInt8], _ at: Int) -> [UInt8] {
            var c = b
            c[at] ^= 0x01
            return c
        }
        func patched(_ b: [UInt8], _ at: Int, _ bytes: [UInt8]) -> [UInt8] {
            var c = b
            c.replaceSubrange(at..<at + bytes.count, with: bytes)
            return c
        }
        func signed(_ r: SA.Request, decision: UInt8 = 1, granted: [String] = [], otp: String? = nil, timestamp: Int64? = nil,
            signedGranted: [String]? = nil) throws -> [UInt8]
        {
            try formulaApproval(
                r, seed: phone.seed, decision: decision, timestamp: timestamp ?? now + 7, granted: granted, otp: otp,
                signedGranted: signedGranted
            ).approval
        }
        let answerTo3 = try SA.sign(store: stores[0], request: r3.bytes, decision: .approve, granted: [], now: now + 7)
        let otherOTP = r1.otp == "000000" ? "000001" : "000000"
        let refusalCases: [(String, [UInt8], [[UInt8]], [[UInt8]], Int64, String)] = [
            // Step 1.
            ("the service's request is truncated", Array(r1.bytes.dropLast()), [a1], bothKeys, t, "invalid_argument"),
            ("the service's request has a trailing byte", r1.bytes + [0], [a1], bothKeys, t, "invalid_argument"),
            ("approval truncated", r1.bytes, [Array(a1.dropLast())], bothKeys, t, "malformed_message"),
            ("approval with a trailing byte", r1.bytes, [a1 + [0]], bothKeys, t, "malformed_message"),
            ("approval empty", r1.bytes, [[]], bothKeys, t, "malformed_message"),
            ("approval version 2", r1.bytes, [patched(a1, 0, [2])], bothKeys, t, "malformed_message"),
            ("decision 0", r1.bytes, [try signed(r1, decision: 0)], bothKeys, t, "malformed_message"),
            ("decision 3", r1.bytes, [try signed(r1, decision: 3)], bothKeys, t, "malformed_message"),
            ("a denial with a scope", r1.bytes, [try signed(r1, decision: 2, granted: ["email"])], bothKeys, t, "malformed_message"),
            ("granted scopes unsorted", r1.bytes, [try signed(r1, granted: ["profile", "email"])], bothKeys, t, "malformed_message"),
            ("a granted scope twice", r1.bytes, [try signed(r1, granted: ["email", "email"])], bothKeys, t, "malformed_message"),
            ("an empty granted scope", r1.bytes, [try signed(r1, granted: [""])], bothKeys, t, "malformed_message"),
            ("an OTP that is not six digits", r1.bytes, [try signed(r1, otp: "12345x")], bothKeys, t, "malformed_message"),
            ("a timestamp after the year 9999", r1.bytes, [try signed(r1, timestamp: 253_402_300_800)], bothKeys, t,
                "malformed_message"),
            ("malformed and expired: step 1 first", r1.bytes, [a1 + [0]], bothKeys, r1.expiresAt + 1, "malformed_message"),
            // Step 2.
            ("expired", r1.bytes, [a1], bothKeys, r1.expiresAt + 1, "expired"),
            ("expired and signed by an unknown key: step 2 first", r1.bytes, [a1], [tablet.publicKey], r1.expiresAt + 1, "expired"),
            // Step 3.
            ("signed by a key not enrolled", r1.bytes, [a1], [tablet.publicKey], t, "not_found"),
            ("no key enrolled", r1.bytes, [a1], [], t, "not_found"),
            ("unknown key and wrong OTP: step 3 first", r1.bytes, [answerTo3], [tablet.publicKey], t, "not_found"),
            // Step 4.
            ("an answer to another request (another OTP)", r1.bytes, [answerTo3], bothKeys, t, "authentication_failed"),
            ("the OTP field modified", r1.bytes, [patched(a1, 26, LV.b(otherOTP))], bothKeys, t, "authentication_failed"),
            ("wrong OTP and a scope not requested: step 4 first", r1.bytes, [try signed(r1, granted: ["admin"], otp: otherOTP)],
                bothKeys, t, "authentication_failed"),
            // Step 5.
            ("a scope not requested, signed", r1.bytes, [try signed(r1, granted: ["admin", "email"])], bothKeys, t, "malformed_message"),
            ("a scope not requested, badly signed: step 5 first", r1.bytes,
                [flipped(try signed(r1, granted: ["admin"]), 50)], bothKeys, t, "malformed_message"),
            // Step 6.
            ("a signature byte flipped", r1.bytes, [flipped(a1, a1.count - 1)], bothKeys, t, "authentication_failed"),
            ("the timestamp altered", r1.bytes, [flipped(a1, 25)], bothKeys, t, "authentication_failed"),
            ("the decision altered (approve to deny, scopes removed)", r1.bytes,
                [[1] + a1[1..<17] + [2] + a1[18..<32] + [0] + a1.suffix(64)], bothKeys, t, "authentication_failed"),
            ("a granted scope removed", r1.bytes, [try signed(r1, granted: ["email"], signedGranted: ["email", "profile"])],
                bothKeys, t, "authentication_failed"),
            ("another enrolled device's credential ID", r1.bytes, [patched(a1, 1, tablet.credentialID)], bothKeys, t,
                "authentication_failed"),
            ("the answer to another request with this request's OTP", r1.bytes, [patched(answerTo3, 26, LV.b(r1.otp))], bothKeys, t,
                "authentication_failed"),
            // Step 7.
            ("the same approval twice", r1.bytes, [a1, a1], bothKeys, t, "replayed"),
            ("an approval, then a denial of the same request", r1.bytes, [a1, deny1], bothKeys, t, "replayed"),
            ("a denial, then an approval of the same request", r1.bytes, [deny1, a1], bothKeys, t, "replayed"),
            ("a forged approval spends nothing; the real one twice", r1.bytes, [flipped(a1, a1.count - 1), a1, a1], bothKeys, t,
                "replayed"),
        ]
        var refusals: [[String: Any]] = []
        for (name, request, presented, keys, at, error) in refusalCases {
            let replay = MemoryReplayStore()
            var failed: String? = nil
            for (i, approval) in presented.enumerated() {
                let kind = errorKind {
                    _ = try SA.verify(request: request, approval: approval, publicKeys: keys, replay: replay, now: at)
                }
                if i < presented.count - 1 {
                    // Earlier presentations succeed unless they are forgeries, which spend nothing.
                    if kind != nil { expectEqual(replay.count, 0, "\(name): step \(i)") }
                } else {
                    failed = kind.map(Self.errorName)
                }
            }
            expectEqual(failed, error, name)
            refusals.append([
                "case_text": name, "request": hex(request), "approvals": presented.map(hex), "public_keys": keys.map(hex),
                "now": Int(at), "error_text": error,
            ])
        }
        // The forgery in the last case is refused, the two real ones are not both accepted.
        expectEqual(refusals.count, refusalCases.count)

        // Requests a device refuses to show (19.3).
        func request(_ change: (inout [UInt8]) -> Void) -> [UInt8] {
            var b = r1.bytes
            change(&b)
            return b
        }
        let sidAt = 2 + service.utf8.count + 1 + "Example Bank".utf8.count  // the session ID's length byte
        let otpAt = sidAt + 1 + "login-7f3a9c".utf8.count
        let timesAt = otpAt + 6 + 32
        let scopesAt = timesAt + 16
        func times(_ issued: UInt64, _ expires: UInt64) -> [UInt8] {
            withUnsafeBytes(of: issued.bigEndian, Array.init) + withUnsafeBytes(of: expires.bigEndian, Array.init)
        }
        let requestCases: [(String, [UInt8], Int64, String)] = [
            ("version 2", request { $0[0] = 2 }, now, "malformed_message"),
            ("truncated", Array(r1.bytes.dropLast()), now, "malformed_message"),
            ("a trailing byte", r1.bytes + [0], now, "malformed_message"),
            ("an empty service ID", [1, 0] + r1.bytes.dropFirst(2 + service.utf8.count), now, "malformed_message"),
            ("a space in the service ID", request { $0[6] = 0x20 }, now, "malformed_message"),
            ("a control character in the service name", request { $0[2 + service.utf8.count + 1] = 0x0a }, now, "malformed_message"),
            ("a service name that is not UTF-8", request { $0[2 + service.utf8.count + 1] = 0xff }, now, "malformed_message"),
            ("a space in the session ID", request { $0[sidAt + 1] = 0x20 }, now, "malformed_message"),
            ("an OTP with a letter", request { $0[otpAt] = UInt8(ascii: "a") }, now, "malformed_message"),
            ("expires when issued", request { $0.replaceSubrange(timesAt..<timesAt + 16, with: times(1_800_000_000, 1_800_000_000)) },
                now, "malformed_message"),
            ("lives 601 seconds", request { $0.replaceSubrange(timesAt..<timesAt + 16, with: times(1_800_000_000, 1_800_000_601)) },
                now, "malformed_message"),
            ("expires after the year 9999",
                request { $0.replaceSubrange(timesAt..<timesAt + 16, with: times(253_402_300_700, 253_402_300_800)) }, now,
                "malformed_message"),
            ("scopes unsorted", Array(r1.bytes.prefix(scopesAt)) + scopesField(["payments", "email"]), now, "malformed_message"),
            ("a scope twice", Array(r1.bytes.prefix(scopesAt)) + scopesField(["email", "email"]), now, "malformed_message"),
            ("33 scopes", Array(r1.bytes.prefix(scopesAt)) + scopesField((0..<33).map { String(format: "s%02d", $0) }), now,
                "malformed_message"),
            ("a scope of 65 bytes", Array(r1.bytes.prefix(scopesAt)) + scopesField([String(repeating: "a", count: 65)]), now,
                "malformed_message"),
            ("expired on the device", r1.bytes, r1.expiresAt + 1, "expired"),
        ]
        var requestRefusals: [[String: Any]] = []
        for (name, bytes, at, error) in requestCases {
            expectEqual(errorKind { _ = try SA.Request(parsing: bytes, now: at) }.map(Self.errorName), error, name)
            requestRefusals.append(["case_text": name, "request": hex(bytes), "now": Int(at), "error_text": error])
        }
        expectNoThrow(try SA.Request(parsing: r1.bytes, now: r1.expiresAt))

        // Enrollments a service refuses (19.2), against the first one's service and nonce.
        let e1 = Hex.decode(phone.json["enrollment"] as! String)!
        let nonce1 = Hex.decode(phone.json["nonce"] as! String)!
        var otherNonce = nonce1
        otherNonce[0] ^= 0x01
        let enrollmentCases: [(String, String, [UInt8], [UInt8], String)] = [
            ("another nonce", service, otherNonce, e1, "authentication_failed"),
            ("another service", "shop.example", nonce1, e1, "authentication_failed"),
            ("the label altered", service, nonce1, patched(e1, 34, LV.b("B")), "authentication_failed"),
            ("a signature byte flipped", service, nonce1, flipped(e1, e1.count - 1), "authentication_failed"),
            ("another device's key", service, nonce1, patched(e1, 1, tablet.publicKey), "authentication_failed"),
            ("version 2", service, nonce1, patched(e1, 0, [2]), "malformed_message"),
            ("truncated", service, nonce1, Array(e1.dropLast()), "malformed_message"),
            ("a trailing byte", service, nonce1, e1 + [0], "malformed_message"),
            ("a control character in the label", service, nonce1, patched(e1, 34, [0x0a]), "malformed_message"),
            ("an empty label", service, nonce1, Array(e1.prefix(33)) + [0] + e1.suffix(64), "malformed_message"),
        ]
        var enrollmentRefusals: [[String: Any]] = []
        for (name, serviceID, nonce, enrollment, error) in enrollmentCases {
            expectEqual(
                errorKind { _ = try SA.verifyEnrollment(serviceID: serviceID, nonce: nonce, enrollment: enrollment) }.map(Self.errorName),
                error, name)
            enrollmentRefusals.append([
                "case_text": name, "service_id_text": serviceID, "nonce": hex(nonce), "enrollment": hex(enrollment), "error_text": error,
            ])
        }

        return [
            "enrollments": devices.map(\.json), "requests": [r1JSON, r2JSON, r3JSON], "approvals": approvals,
            "refusals": refusals, "request_refusals": requestRefusals, "enrollment_refusals": enrollmentRefusals,
        ]
    }
}

import Foundation
import Synchronization
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

/// Service approvals (PROTOCOL.md 19): enrollment, requests, approvals and
/// denials, every refusal of 19.5 in its order, the stored credential item,
/// and the in-memory replay store.
final class ServiceApprovalTests: XCTestCase {
    private typealias SA = ServiceApproval
    private let t0: Int64 = 1_800_000_000
    private let service = "bank.example"

    override func setUpWithError() throws { try Sodium.initialize() }

    private func kind(_ body: () throws -> Void) -> ItsMeError.Kind? { errorKind(body) }

    private func random(_ label: String) -> DeterministicRandom {
        DeterministicRandom(seed: SHA256.hash(Array("itsme-approval-test-\(label)".utf8)))
    }

    /// A device enrolled for `serviceID`: its store, the seed of its key
    /// (what the deterministic source drew) and what the service keeps.
    private struct Device {
        let store: MemorySecretStore
        let seed: [UInt8]
        let credential: SA.Credential
        var publicKey: [UInt8] { credential.publicKey }
    }

    private func enrolledDevice(_ label: String, serviceID: String? = nil, name: String = "Alice's phone") throws -> Device {
        let serviceID = serviceID ?? service
        let store = MemorySecretStore()
        var mirror = random(label)
        let seed = mirror.bytes(32)
        var rng = random(label)
        let nonce = Array(SHA256.hash(Array(label.utf8)).prefix(24))
        let (enrollment, id) = try SA.enroll(store: store, serviceID: serviceID, label: name, nonce: nonce, random: &rng)
        XCTAssertEqual(enrollment.count, 98 + name.utf8.count)
        XCTAssertEqual(try SA.enrollmentSize(serviceID: serviceID, label: name, nonce: nonce), enrollment.count)
        let credential = try SA.verifyEnrollment(serviceID: serviceID, nonce: nonce, enrollment: enrollment)
        XCTAssertEqual(credential.credentialID, id)
        XCTAssertEqual(credential.label, name)
        XCTAssertEqual(credential.publicKey, try Ed25519.keyPair(seed: seed).publicKey)
        XCTAssertEqual(try SA.credentialID(store: store, serviceID: serviceID), id)
        return Device(store: store, seed: seed, credential: credential)
    }

    private func request(
        _ label: String = "r", scopes: [String] = ["email", "profile", "payments"], lifetime: Int64 = 120, now: Int64? = nil,
        serviceID: String? = nil
    ) throws -> SA.Request {
        var rng = random("request-" + label)
        return try SA.Request.create(
            serviceID: serviceID ?? service, serviceName: "Example Bank", sessionID: "login-\(label)", scopes: scopes,
            lifetime: lifetime, now: now ?? t0, random: &rng)
    }

    private func verify(
        _ request: SA.Request, _ approval: [UInt8], keys: [[UInt8]], replay: any ReplayStore = MemoryReplayStore(), now: Int64? = nil
    ) throws -> SA.Verified {
        try SA.verify(request: request.bytes, approval: approval, publicKeys: keys, replay: replay, now: now ?? t0 + 10)
    }

    /// A replay store that counts its calls, to show which refusals reach it.
    private final class CountingReplayStore: ReplayStore {
        let inner = MemoryReplayStore()
        let calls = Atomic<Int>(0)
        func insert(key: [UInt8], expiresAt: Int64, now: Int64) throws -> Bool {
            calls.add(1, ordering: .relaxed)
            return try inner.insert(key: key, expiresAt: expiresAt, now: now)
        }
        var count: Int { calls.load(ordering: .relaxed) }
    }

    private final class FailingReplayStore: ReplayStore {
        func insert(key: [UInt8], expiresAt: Int64, now: Int64) throws -> Bool {
            throw ItsMeError(.database, "the replay table is unavailable")
        }
    }

    /// An approval built by hand from the documented formulas (19.4), signed
    /// with `seed`: what a device, honest or not, could send.
    private func craftedApproval(
        _ request: SA.Request, seed: [UInt8], decision: UInt8 = 1, timestamp: Int64? = nil, otp: [UInt8]? = nil,
        granted: [[UInt8]] = [], signedGranted: [[UInt8]]? = nil, signedOTP: [UInt8]? = nil
    ) throws -> [UInt8] {
        let pair = try Ed25519.keyPair(seed: seed)
        let id = Array(SHA256.hash(LV.cat(LV.b("itsme-credential-id-v1"), pair.publicKey)).prefix(16))
        let ts = timestamp ?? t0 + 5
        let tsBytes = withUnsafeBytes(of: UInt64(bitPattern: ts).bigEndian, Array.init)
        let message = LV.cat(
            LV.b("itsme-approval-v1"), LV.b(request.serviceID), id, request.nonce, SHA256.hash(request.bytes), LV.b(request.sessionID),
            signedOTP ?? LV.b(request.otp), tsBytes, LV.cat(signedGranted ?? granted), [decision])
        let signature = try Ed25519.sign(message, secretKey: pair.secretKey)
        var scopes: [UInt8] = [UInt8(granted.count)]
        for g in granted { scopes += [UInt8(g.count)] + g }
        return [1] + id + [decision] + tsBytes + (otp ?? LV.b(request.otp)) + scopes + signature
    }

    // MARK: Round trips

    func testEnrollRequestApproveVerify() throws {
        let device = try enrolledDevice("alice")
        let r = try request()
        XCTAssertEqual(r.scopes, ["email", "payments", "profile"])
        XCTAssertEqual(r.scopesText, "email payments profile")
        XCTAssertEqual(r.issuedAt, t0)
        XCTAssertEqual(r.expiresAt, t0 + 120)
        XCTAssertEqual(r.otp.utf8.count, 6)
        XCTAssertTrue(r.otp.utf8.allSatisfy { (0x30...0x39).contains($0) })

        // The device reads what it shows.
        let shown = try SA.Request(parsing: r.bytes, now: t0 + 3)
        XCTAssertEqual(shown, r)
        XCTAssertEqual(shown.serviceName, "Example Bank")
        XCTAssertEqual(shown.sessionID, "login-r")
        XCTAssertEqual(shown.secondsLeft(now: t0 + 3), 117)
        XCTAssertEqual(shown.secondsLeft(now: t0 + 500), 0)

        let approval = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: ["profile", "email"], now: t0 + 5)
        XCTAssertEqual(approval.count, 96 + 1 + 6 + 8)
        let replay = MemoryReplayStore()
        let verified = try verify(r, approval, keys: [device.publicKey], replay: replay)
        XCTAssertEqual(verified.decision, .approve)
        XCTAssertEqual(verified.credentialID, device.credential.credentialID)
        XCTAssertEqual(verified.timestamp, t0 + 5)
        XCTAssertEqual(verified.granted, ["email", "profile"])
        XCTAssertEqual(verified.grantedText, "email profile")
        XCTAssertEqual(replay.count, 1)
        // At the last second of the request's life it still verifies.
        let late = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: [], now: t0 + 120)
        XCTAssertEqual(try verify(r, late, keys: [device.publicKey], now: t0 + 120).granted, [])
    }

    func testTheApprovalIsTheDocumentedBytes() throws {
        let device = try enrolledDevice("alice")
        let r = try request()
        let approval = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: ["profile", "email"], now: t0 + 5)
        // Ed25519 signatures are deterministic: the hand-built one is the same.
        XCTAssertEqual(approval, try craftedApproval(r, seed: device.seed, granted: [LV.b("email"), LV.b("profile")]))
        let denial = try SA.sign(store: device.store, request: r.bytes, decision: .deny, granted: [], now: t0 + 5)
        XCTAssertEqual(denial, try craftedApproval(r, seed: device.seed, decision: 2))
    }

    func testSeveralDevicesOfOneUser() throws {
        let phone = try enrolledDevice("phone")
        let tablet = try enrolledDevice("tablet", name: "Alice's tablet")
        XCTAssertNotEqual(phone.credential.credentialID, tablet.credential.credentialID)
        let keys = [phone.publicKey, tablet.publicKey]
        for (i, device) in [phone, tablet].enumerated() {
            let r = try request("multi-\(i)")
            let approval = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: ["email"], now: t0 + 1)
            let verified = try verify(r, approval, keys: keys)
            XCTAssertEqual(verified.credentialID, device.credential.credentialID)
            XCTAssertEqual(verified.granted, ["email"])
        }
    }

    func testEachServiceHasItsOwnKey() throws {
        let store = MemorySecretStore()
        var rng = SystemRandom()
        let nonce = rng.bytes(16)
        let a = try SA.enroll(store: store, serviceID: "bank.example", label: "Phone", nonce: nonce, random: &rng)
        let b = try SA.enroll(store: store, serviceID: "shop.example", label: "Phone", nonce: nonce, random: &rng)
        XCTAssertNotEqual(a.credentialID, b.credentialID)
        XCTAssertEqual(
            store.names, [SA.credentialItemName(serviceID: "bank.example"), SA.credentialItemName(serviceID: "shop.example")].sorted())
        let shop = try SA.verifyEnrollment(serviceID: "shop.example", nonce: nonce, enrollment: b.enrollment)
        // A request of the bank is answered with the bank's key, which the shop does not know.
        let r = try request()
        let approval = try SA.sign(store: store, request: r.bytes, decision: .approve, granted: [], now: t0)
        XCTAssertEqual(kind { _ = try self.verify(r, approval, keys: [shop.publicKey]) }, .notFound)
    }

    func testADenialVerifiesAsADenial() throws {
        let device = try enrolledDevice("alice")
        let r = try request()
        let denial = try SA.sign(store: device.store, request: r.bytes, decision: .deny, granted: [], now: t0 + 5)
        let verified = try verify(r, denial, keys: [device.publicKey])
        XCTAssertEqual(verified.decision, .deny)
        XCTAssertEqual(verified.granted, [])
        XCTAssertEqual(verified.grantedText, "")
        XCTAssertEqual(verified.credentialID, device.credential.credentialID)
    }

    func testARequestWithoutScopes() throws {
        let device = try enrolledDevice("alice")
        let r = try request("none", scopes: [])
        XCTAssertEqual(r.scopes, [])
        XCTAssertEqual(r.bytes.last, 0)
        XCTAssertEqual(kind { _ = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: ["email"], now: self.t0) }, .invalidArgument)
        let approval = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: [], now: t0)
        XCTAssertEqual(try verify(r, approval, keys: [device.publicKey]).decision, .approve)
    }

    func testTheLargestMessagesHaveTheHeaderSizes() throws {
        XCTAssertEqual(SA.enrollmentMaxCount, 226)
        XCTAssertEqual(SA.requestMaxCount, 2650)
        XCTAssertEqual(SA.approvalMaxCount, 2177)
        XCTAssertEqual(SA.scopesTextMaxBytes + 1, 2080)
        let scopes = (0..<32).map { i in String(format: "%02d", i) + String(repeating: "s", count: 62) }
        let name = String(repeating: "N", count: 128)
        var rng = random("largest")
        let r = try SA.Request.create(
            serviceID: String(repeating: "b", count: 255), serviceName: name, sessionID: String(repeating: "x", count: 128),
            scopes: scopes.reversed(), lifetime: 600, now: t0, random: &rng)
        XCTAssertEqual(r.bytes.count, SA.requestMaxCount)
        XCTAssertEqual(r.scopesText.utf8.count, SA.scopesTextMaxBytes)
        let store = MemorySecretStore()
        let nonce = rng.bytes(64)
        let (enrollment, _) = try SA.enroll(store: store, serviceID: r.serviceID, label: name, nonce: nonce, random: &rng)
        XCTAssertEqual(enrollment.count, SA.enrollmentMaxCount)
        let credential = try SA.verifyEnrollment(serviceID: r.serviceID, nonce: nonce, enrollment: enrollment)
        let approval = try SA.sign(store: store, request: r.bytes, decision: .approve, granted: scopes, now: t0)
        XCTAssertEqual(approval.count, SA.approvalMaxCount)
        XCTAssertEqual(try verify(r, approval, keys: [credential.publicKey]).granted, scopes)
    }

    // MARK: Refusals of 19.5

    func testAFlippedSignatureByteIsRefusedAndSpendsNothing() throws {
        let device = try enrolledDevice("alice")
        let r = try request()
        let approval = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: ["email"], now: t0 + 5)
        let replay = CountingReplayStore()
        for i in [approval.count - 64, approval.count - 33, approval.count - 1] {
            var forged = approval
            forged[i] ^= 0x01
            XCTAssertEqual(kind { _ = try self.verify(r, forged, keys: [device.publicKey], replay: replay) }, .authenticationFailed)
        }
        // Every signed field matters: timestamp, credential-independent parts.
        var otherTime = approval
        otherTime[25] ^= 0x01
        XCTAssertEqual(kind { _ = try self.verify(r, otherTime, keys: [device.publicKey], replay: replay) }, .authenticationFailed)
        XCTAssertEqual(replay.count, 0)
        // The forgeries did not spend the request: the real answer counts.
        XCTAssertEqual(try verify(r, approval, keys: [device.publicKey], replay: replay).decision, .approve)
        XCTAssertEqual(replay.count, 1)
    }

    func testAnUnknownKeyIsNotFound() throws {
        let device = try enrolledDevice("alice")
        let other = try enrolledDevice("mallory")
        let r = try request()
        let approval = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: [], now: t0 + 5)
        XCTAssertEqual(kind { _ = try self.verify(r, approval, keys: [other.publicKey]) }, .notFound)
        XCTAssertEqual(kind { _ = try self.verify(r, approval, keys: []) }, .notFound)
        // Another key under the signer's credential ID is still not the signer's key.
        var renamed = try SA.sign(store: other.store, request: r.bytes, decision: .approve, granted: [], now: t0 + 5)
        renamed.replaceSubrange(1..<17, with: device.credential.credentialID)
        XCTAssertEqual(kind { _ = try self.verify(r, renamed, keys: [device.publicKey, other.publicKey]) }, .authenticationFailed)
    }

    func testAWrongOTPIsRefused() throws {
        let device = try enrolledDevice("alice")
        let r1 = try request("one"), r2 = try request("two")
        XCTAssertNotEqual(r1.otp, r2.otp)
        let replay = CountingReplayStore()
        // An answer to another request (another OTP).
        let answer2 = try SA.sign(store: device.store, request: r2.bytes, decision: .approve, granted: [], now: t0 + 5)
        XCTAssertEqual(kind { _ = try self.verify(r1, answer2, keys: [device.publicKey], replay: replay) }, .authenticationFailed)
        // The same answer with its OTP field set to this request's: the OTP
        // check passes, the signature (over another request) does not.
        var patched = answer2
        patched.replaceSubrange(26..<32, with: Array(r1.otp.utf8))
        XCTAssertEqual(kind { _ = try self.verify(r1, patched, keys: [device.publicKey], replay: replay) }, .authenticationFailed)
        // This request's answer with a modified OTP field.
        let answer1 = try SA.sign(store: device.store, request: r1.bytes, decision: .approve, granted: [], now: t0 + 5)
        var modified = answer1
        modified[31] = modified[31] == UInt8(ascii: "9") ? UInt8(ascii: "0") : modified[31] + 1
        XCTAssertEqual(kind { _ = try self.verify(r1, modified, keys: [device.publicKey], replay: replay) }, .authenticationFailed)
        // A device that signed the wrong OTP in the message but sent the right one.
        let lying = try craftedApproval(r1, seed: device.seed, signedOTP: LV.b("000000"))
        XCTAssertEqual(kind { _ = try self.verify(r1, lying, keys: [device.publicKey], replay: replay) }, .authenticationFailed)
        XCTAssertEqual(replay.count, 0)
        XCTAssertEqual(try verify(r1, answer1, keys: [device.publicKey], replay: replay).decision, .approve)
    }

    func testExpiredRequests() throws {
        let device = try enrolledDevice("alice")
        let r = try request(lifetime: 60)
        // The device refuses to show or sign once the request expired.
        XCTAssertEqual(kind { _ = try SA.Request(parsing: r.bytes, now: self.t0 + 61) }, .expired)
        XCTAssertEqual(kind { _ = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: [], now: self.t0 + 61) }, .expired)
        XCTAssertEqual(kind { _ = try SA.sign(store: device.store, request: r.bytes, decision: .deny, granted: [], now: self.t0 + 61) }, .expired)
        XCTAssertNoThrow(try SA.Request(parsing: r.bytes, now: t0 + 60))
        // The service refuses an answer once its clock is past the expiry.
        let approval = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: [], now: t0 + 59)
        let replay = CountingReplayStore()
        XCTAssertEqual(kind { _ = try self.verify(r, approval, keys: [device.publicKey], replay: replay, now: self.t0 + 61) }, .expired)
        XCTAssertEqual(replay.count, 0)
        XCTAssertEqual(try verify(r, approval, keys: [device.publicKey], replay: replay, now: t0 + 60).decision, .approve)
        // Expired before unknown key (step 2 before step 3).
        XCTAssertEqual(kind { _ = try self.verify(r, approval, keys: [], now: self.t0 + 61) }, .expired)
    }

    func testAnAnswerCountsOnce() throws {
        let device = try enrolledDevice("alice")
        let r = try request()
        let approval = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: ["email"], now: t0 + 5)
        let denial = try SA.sign(store: device.store, request: r.bytes, decision: .deny, granted: [], now: t0 + 6)
        let replay = MemoryReplayStore()
        XCTAssertEqual(try verify(r, approval, keys: [device.publicKey], replay: replay).decision, .approve)
        XCTAssertEqual(kind { _ = try self.verify(r, approval, keys: [device.publicKey], replay: replay) }, .replayed)
        // Approve then deny: the first one counted.
        XCTAssertEqual(kind { _ = try self.verify(r, denial, keys: [device.publicKey], replay: replay) }, .replayed)
        // Deny then approve, on another request.
        let r2 = try request("second")
        let denial2 = try SA.sign(store: device.store, request: r2.bytes, decision: .deny, granted: [], now: t0 + 5)
        let approval2 = try SA.sign(store: device.store, request: r2.bytes, decision: .approve, granted: [], now: t0 + 6)
        XCTAssertEqual(try verify(r2, denial2, keys: [device.publicKey], replay: replay).decision, .deny)
        XCTAssertEqual(kind { _ = try self.verify(r2, approval2, keys: [device.publicKey], replay: replay) }, .replayed)
        // Another device of the same user answering the same request.
        let tablet = try enrolledDevice("tablet")
        let fromTablet = try SA.sign(store: tablet.store, request: r2.bytes, decision: .approve, granted: [], now: t0 + 7)
        XCTAssertEqual(kind { _ = try self.verify(r2, fromTablet, keys: [device.publicKey, tablet.publicKey], replay: replay) }, .replayed)
        XCTAssertEqual(replay.count, 2)
    }

    func testTheReplayStoresErrorIsTheResult() throws {
        let device = try enrolledDevice("alice")
        let r = try request()
        let approval = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: [], now: t0 + 5)
        XCTAssertEqual(kind { _ = try self.verify(r, approval, keys: [device.publicKey], replay: FailingReplayStore()) }, .database)
        let full = MemoryReplayStore(capacity: 1)
        XCTAssertFalse(try full.insert(key: [UInt8](repeating: 9, count: 32), expiresAt: t0 + 600, now: t0))
        XCTAssertEqual(kind { _ = try self.verify(r, approval, keys: [device.publicKey], replay: full) }, .locked)
    }

    func testScopesNotRequested() throws {
        let device = try enrolledDevice("alice")
        let r = try request(scopes: ["email", "profile"])
        // The device refuses to grant what was not asked.
        XCTAssertEqual(kind { _ = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: ["payments"], now: self.t0) }, .invalidArgument)
        XCTAssertEqual(kind { _ = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: ["email", "email"], now: self.t0) }, .invalidArgument)
        XCTAssertEqual(kind { _ = try SA.sign(store: device.store, request: r.bytes, decision: .deny, granted: ["email"], now: self.t0) }, .invalidArgument)
        XCTAssertEqual(kind { _ = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: ["bad scope"], now: self.t0) }, .invalidArgument)
        // A device that signs it anyway: refused at step 5, before the signature.
        let replay = CountingReplayStore()
        let extra = try craftedApproval(r, seed: device.seed, granted: [LV.b("admin"), LV.b("email")])
        XCTAssertEqual(kind { _ = try self.verify(r, extra, keys: [device.publicKey], replay: replay) }, .malformedMessage)
        // Step 5 comes after step 4 (the OTP) and before step 6 (the signature).
        let extraBadOTP = try craftedApproval(r, seed: device.seed, otp: LV.b("000000"), granted: [LV.b("admin")])
        if r.otp != "000000" {
            XCTAssertEqual(kind { _ = try self.verify(r, extraBadOTP, keys: [device.publicKey], replay: replay) }, .authenticationFailed)
        }
        var extraBadSignature = extra
        extraBadSignature[extraBadSignature.count - 1] ^= 1
        XCTAssertEqual(kind { _ = try self.verify(r, extraBadSignature, keys: [device.publicKey], replay: replay) }, .malformedMessage)
        // Scopes signed but not sent: the signature fails.
        let hidden = try craftedApproval(r, seed: device.seed, granted: [], signedGranted: [LV.b("email")])
        XCTAssertEqual(kind { _ = try self.verify(r, hidden, keys: [device.publicKey], replay: replay) }, .authenticationFailed)
        XCTAssertEqual(replay.count, 0)
        // Well-formed and signed: granted.
        let good = try craftedApproval(r, seed: device.seed, granted: [LV.b("email"), LV.b("profile")])
        XCTAssertEqual(try verify(r, good, keys: [device.publicKey], replay: replay).granted, ["email", "profile"])
    }

    func testApprovalsThatDoNotParse() throws {
        let device = try enrolledDevice("alice")
        let r = try request(scopes: ["email", "profile"])
        let seed = device.seed
        let good = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: ["email"], now: t0 + 5)
        var cases: [(String, [UInt8])] = [
            ("empty", []),
            ("truncated by one", Array(good.dropLast())),
            ("extended by one", good + [0]),
            ("version 2", [2] + good.dropFirst()),
            ("version 0", [0] + good.dropFirst()),
            ("unsorted scopes", try craftedApproval(r, seed: seed, granted: [LV.b("profile"), LV.b("email")])),
            ("duplicated scopes", try craftedApproval(r, seed: seed, granted: [LV.b("email"), LV.b("email")])),
            ("a denial with a scope", try craftedApproval(r, seed: seed, decision: 2, granted: [LV.b("email")])),
            ("decision 0", try craftedApproval(r, seed: seed, decision: 0)),
            ("decision 3", try craftedApproval(r, seed: seed, decision: 3)),
            ("an empty scope", try craftedApproval(r, seed: seed, granted: [[]])),
            ("a scope with a space", try craftedApproval(r, seed: seed, granted: [LV.b("e mail")])),
            ("a scope of 65 bytes", try craftedApproval(r, seed: seed, granted: [[UInt8](repeating: 0x61, count: 65)])),
            ("33 scopes", try craftedApproval(r, seed: seed, granted: (0..<33).map { LV.b(String(format: "s%02d", $0)) })),
            ("an OTP that is not digits", try craftedApproval(r, seed: seed, otp: LV.b("12345a"))),
            ("a timestamp after 9999", try craftedApproval(r, seed: seed, timestamp: UnixTime.max + 1)),
            ("a negative timestamp", try craftedApproval(r, seed: seed, timestamp: -1)),
            ("larger than any approval", good + [UInt8](repeating: 0, count: SA.approvalMaxCount)),
        ]
        for n in 1..<good.count { cases.append(("truncated to \(n) bytes", Array(good.prefix(n)))) }
        var longer = good
        longer.insert(0x61, at: 36)  // a scope byte more, the count unchanged
        cases.append(("a scope length that disagrees", longer))
        let replay = CountingReplayStore()
        for (name, approval) in cases {
            XCTAssertEqual(kind { _ = try self.verify(r, approval, keys: [device.publicKey], replay: replay) }, .malformedMessage, name)
            // Step 1 comes before step 2 (expired) and step 3 (unknown key).
            XCTAssertEqual(kind { _ = try self.verify(r, approval, keys: [], replay: replay, now: self.t0 + 1000) }, .malformedMessage, name)
        }
        XCTAssertEqual(replay.count, 0)
        XCTAssertEqual(try verify(r, good, keys: [device.publicKey], replay: replay).granted, ["email"])
    }

    func testVerifyArguments() throws {
        let device = try enrolledDevice("alice")
        let r = try request()
        let approval = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: [], now: t0 + 5)
        XCTAssertEqual(kind { _ = try self.verify(r, approval, keys: [device.publicKey], now: -1) }, .invalidArgument)
        XCTAssertEqual(kind { _ = try self.verify(r, approval, keys: [device.publicKey], now: UnixTime.max + 1) }, .invalidArgument)
        XCTAssertEqual(kind { _ = try self.verify(r, approval, keys: [Array(device.publicKey.dropLast())]) }, .invalidArgument)
        // The service's own request must parse: a damaged record is the caller's error.
        for damaged in [Array(r.bytes.dropLast()), r.bytes + [0], [], [2] + r.bytes.dropFirst()] {
            XCTAssertEqual(
                kind { _ = try SA.verify(request: damaged, approval: approval, publicKeys: [device.publicKey], replay: MemoryReplayStore(), now: self.t0) },
                .invalidArgument)
        }
        // ... checked before the approval.
        XCTAssertEqual(
            kind { _ = try SA.verify(request: [], approval: [], publicKeys: [], replay: MemoryReplayStore(), now: self.t0) }, .invalidArgument)
    }

    // MARK: Requests

    /// The fields of a request, encoded by hand (19.3) so each rule can be broken.
    private struct Fields {
        var version: UInt8 = 1
        var serviceID = LV.b("bank.example")
        var serviceName = LV.b("Example Bank")
        var sessionID = LV.b("login-1")
        var otp = LV.b("042017")
        var nonce = [UInt8](repeating: 7, count: 32)
        var issuedAt: UInt64 = 1_800_000_000
        var expiresAt: UInt64 = 1_800_000_120
        var scopes: [[UInt8]] = [LV.b("email"), LV.b("profile")]
        var scopeCount: Int? = nil

        var bytes: [UInt8] {
            var out: [UInt8] = [version]
            for field in [serviceID, serviceName, sessionID] { out += [UInt8(truncatingIfNeeded: field.count)] + field }
            out += otp + nonce
            out += withUnsafeBytes(of: issuedAt.bigEndian, Array.init) + withUnsafeBytes(of: expiresAt.bigEndian, Array.init)
            out.append(UInt8(scopeCount ?? scopes.count))
            for s in scopes { out += [UInt8(s.count)] + s }
            return out
        }
    }

    func testEveryRequestParsingRule() throws {
        let good = Fields()
        let parsed = try SA.Request(parsing: good.bytes)
        XCTAssertEqual(parsed.serviceID, "bank.example")
        XCTAssertEqual(parsed.serviceName, "Example Bank")
        XCTAssertEqual(parsed.sessionID, "login-1")
        XCTAssertEqual(parsed.otp, "042017")
        XCTAssertEqual(parsed.nonce, good.nonce)
        XCTAssertEqual(parsed.issuedAt, t0)
        XCTAssertEqual(parsed.expiresAt, t0 + 120)
        XCTAssertEqual(parsed.scopes, ["email", "profile"])
        XCTAssertEqual(parsed.bytes, good.bytes)

        func with(_ change: (inout Fields) -> Void) -> [UInt8] {
            var f = Fields()
            change(&f)
            return f.bytes
        }
        var accepted: [(String, [UInt8])] = [
            ("a lifetime of 600 seconds", with { $0.expiresAt = $0.issuedAt + 600 }),
            ("a lifetime of 1 second", with { $0.expiresAt = $0.issuedAt + 1 }),
            ("no scope", with { $0.scopes = [] }),
            ("32 scopes", with { $0.scopes = (0..<32).map { LV.b(String(format: "s%02d", $0)) } }),
            ("a scope of 64 bytes", with { $0.scopes = [[UInt8](repeating: 0x7e, count: 64)] }),
            ("a service ID of 255 bytes", with { $0.serviceID = [UInt8](repeating: 0x21, count: 255) }),
            ("a session ID of 128 bytes", with { $0.sessionID = [UInt8](repeating: 0x7e, count: 128) }),
            ("a UTF-8 service name", with { $0.serviceName = LV.b("Bänk Ø 銀行") }),
            ("a service name of 128 bytes", with { $0.serviceName = [UInt8](repeating: 0x41, count: 128) }),
            ("times at 0", with { $0.issuedAt = 0; $0.expiresAt = 600 }),
            ("an expiry at the end of 9999", with { $0.issuedAt = UInt64(UnixTime.max) - 1; $0.expiresAt = UInt64(UnixTime.max) }),
            ("scopes ordered by bytes, not case", with { $0.scopes = [LV.b("Z"), LV.b("a"), LV.b("ab")] }),
        ]
        accepted.append(("OTP 000000", with { $0.otp = LV.b("000000") }))
        for (name, bytes) in accepted {
            XCTAssertNoThrow(try SA.Request(parsing: bytes), name)
            XCTAssertEqual(try SA.Request(parsing: bytes).bytes, bytes, name)
        }

        var refused: [(String, [UInt8])] = [
            ("version 2", with { $0.version = 2 }),
            ("version 0", with { $0.version = 0 }),
            ("an empty service ID", with { $0.serviceID = [] }),
            ("a service ID with a space", with { $0.serviceID = LV.b("bank example") }),
            ("a service ID with DEL", with { $0.serviceID = LV.b("bank") + [0x7f] }),
            ("a service ID with a non-ASCII byte", with { $0.serviceID = LV.b("bänk") }),
            ("an empty service name", with { $0.serviceName = [] }),
            ("a service name of 129 bytes", with { $0.serviceName = [UInt8](repeating: 0x41, count: 129) }),
            ("a service name with a control character", with { $0.serviceName = LV.b("Bank\n") }),
            ("a service name that is not UTF-8", with { $0.serviceName = [0x42, 0xff] }),
            ("an empty session ID", with { $0.sessionID = [] }),
            ("a session ID of 129 bytes", with { $0.sessionID = [UInt8](repeating: 0x41, count: 129) }),
            ("a session ID with a space", with { $0.sessionID = LV.b("login 1") }),
            ("a session ID with a control character", with { $0.sessionID = LV.b("login\t1") }),
            ("an OTP with a letter", with { $0.otp = LV.b("04201a") }),
            ("an OTP with a space", with { $0.otp = LV.b(" 42017") }),
            ("expires when issued", with { $0.expiresAt = $0.issuedAt }),
            ("expires before issued", with { $0.expiresAt = $0.issuedAt - 1 }),
            ("a lifetime of 601 seconds", with { $0.expiresAt = $0.issuedAt + 601 }),
            ("issued after 9999", with { $0.issuedAt = UInt64(UnixTime.max) + 1; $0.expiresAt = UInt64(UnixTime.max) + 2 }),
            ("expires after 9999", with { $0.issuedAt = UInt64(UnixTime.max) - 1; $0.expiresAt = UInt64(UnixTime.max) + 1 }),
            ("times with the top bit set", with { $0.issuedAt = 1 << 63; $0.expiresAt = (1 << 63) + 10 }),
            ("33 scopes", with { $0.scopes = (0..<33).map { LV.b(String(format: "s%02d", $0)) } }),
            ("an empty scope", with { $0.scopes = [[]] }),
            ("a scope of 65 bytes", with { $0.scopes = [[UInt8](repeating: 0x61, count: 65)] }),
            ("a scope with a space", with { $0.scopes = [LV.b("e mail")] }),
            ("a scope with a non-ASCII byte", with { $0.scopes = [LV.b("é")] }),
            ("unsorted scopes", with { $0.scopes = [LV.b("profile"), LV.b("email")] }),
            ("a prefix after its extension", with { $0.scopes = [LV.b("ab"), LV.b("a")] }),
            ("duplicated scopes", with { $0.scopes = [LV.b("email"), LV.b("email")] }),
            ("a scope count larger than the scopes", with { $0.scopeCount = 3 }),
            ("a scope count smaller than the scopes", with { $0.scopeCount = 1 }),
            ("a trailing byte", good.bytes + [0]),
            ("empty", []),
            ("larger than any request", good.bytes + [UInt8](repeating: 0, count: SA.requestMaxCount)),
        ]
        for n in 0..<good.bytes.count { refused.append(("truncated to \(n) bytes", Array(good.bytes.prefix(n)))) }
        for (name, bytes) in refused {
            XCTAssertEqual(kind { _ = try SA.Request(parsing: bytes) }, .malformedMessage, name)
            XCTAssertEqual(kind { _ = try SA.Request(parsing: bytes, now: self.t0) }, .malformedMessage, name)
        }
        // Each refusal says which rule failed.
        do {
            _ = try SA.Request(parsing: with { $0.expiresAt = $0.issuedAt + 601 })
        } catch let e as ItsMeError {
            XCTAssertTrue(e.message.contains("601"), e.message)
        }
        XCTAssertEqual(kind { _ = try SA.Request(parsing: good.bytes, now: -1) }, .invalidArgument)
    }

    func testRequestCreationChecksItsArguments() throws {
        var rng = random("args")
        func create(
            serviceID: String = "bank.example", serviceName: String = "Bank", sessionID: String = "s1", scopes: [String] = [],
            lifetime: Int64 = 60, now: Int64 = 1_800_000_000
        ) throws -> SA.Request {
            try SA.Request.create(
                serviceID: serviceID, serviceName: serviceName, sessionID: sessionID, scopes: scopes, lifetime: lifetime, now: now,
                random: &rng)
        }
        let cases: [(String, () throws -> SA.Request)] = [
            ("empty service ID", { try create(serviceID: "") }),
            ("service ID with a space", { try create(serviceID: "bank example") }),
            ("service ID of 256 bytes", { try create(serviceID: String(repeating: "b", count: 256)) }),
            ("empty service name", { try create(serviceName: "") }),
            ("service name with a control character", { try create(serviceName: "Bank\u{7}") }),
            ("service name of 129 bytes", { try create(serviceName: String(repeating: "B", count: 129)) }),
            ("empty session ID", { try create(sessionID: "") }),
            ("session ID of 129 bytes", { try create(sessionID: String(repeating: "s", count: 129)) }),
            ("session ID with a space", { try create(sessionID: "s 1") }),
            ("a repeated scope", { try create(scopes: ["email", "profile", "email"]) }),
            ("an empty scope", { try create(scopes: [""]) }),
            ("a scope with a space", { try create(scopes: ["e mail"]) }),
            ("a scope of 65 bytes", { try create(scopes: [String(repeating: "a", count: 65)]) }),
            ("33 scopes", { try create(scopes: (0..<33).map { "s\($0)" }) }),
            ("lifetime 0", { try create(lifetime: 0) }),
            ("lifetime 601", { try create(lifetime: 601) }),
            ("negative lifetime", { try create(lifetime: -5) }),
            ("negative time", { try create(now: -1) }),
            ("time after 9999", { try create(now: UnixTime.max + 1) }),
            ("expiry after 9999", { try create(lifetime: 2, now: UnixTime.max - 1) }),
        ]
        for (name, body) in cases { XCTAssertEqual(kind { _ = try body() }, .invalidArgument, name) }
        let r = try create(scopes: ["profile", "Zeta", "email"], lifetime: 600)
        XCTAssertEqual(r.scopes, ["Zeta", "email", "profile"])
        XCTAssertEqual(r.expiresAt, t0 + 600)
        XCTAssertNoThrow(try create(lifetime: 1, now: UnixTime.max - 1))
        // Each request has its own nonce.
        XCTAssertNotEqual(try create().nonce, try create().nonce)
        XCTAssertNoThrow(try SA.Request.create(serviceID: "a", serviceName: "A", sessionID: "1", scopes: [], lifetime: 1, now: 0))
    }

    func testTheDescriptionShowsNoOTPNonceOrSession() throws {
        let r = try request()
        let text = "\(r)"
        XCTAssertFalse(text.contains(r.otp), text)
        XCTAssertFalse(text.contains(r.sessionID), text)
        XCTAssertTrue(text.contains(r.serviceID), text)
    }

    /// A source that hands out fixed bytes, then zeros.
    private struct ScriptedRandom: RandomSource {
        var bytes: [UInt8]
        mutating func fill(_ buffer: UnsafeMutableRawBufferPointer) {
            for i in 0..<buffer.count { buffer[i] = bytes.isEmpty ? 0 : bytes.removeFirst() }
        }
    }

    func testTheOTPIsRejectionSampled() throws {
        // 4,294,000,000 = 0xFFF13D80 and above are rejected; below, mod 10^6.
        let cases: [([UInt8], String)] = [
            ([0, 0, 0, 42], "000042"),
            ([0xff, 0xf1, 0x3d, 0x80, 0, 0, 0, 7], "000007"),
            ([0xff, 0xff, 0xff, 0xff, 0xff, 0xf1, 0x3d, 0x7f], "999999"),
            ([0x3b, 0x9a, 0xca, 0x00], "000000"),  // 10^9
            ([0x00, 0x0f, 0x42, 0x3f], "999999"),  // 999,999
            ([0x00, 0x0f, 0x42, 0x40], "000000"),  // 10^6
        ]
        for (bytes, otp) in cases {
            var rng = ScriptedRandom(bytes: bytes)
            XCTAssertEqual(SA.randomOTP(using: &rng), otp)
        }
        // In a request: the nonce first (32 bytes), then the OTP.
        var rng = ScriptedRandom(bytes: [UInt8](repeating: 5, count: 32) + [0xff, 0xff, 0xff, 0xff, 0, 1, 0xe2, 0x40])
        let r = try SA.Request.create(serviceID: "s", serviceName: "S", sessionID: "1", scopes: [], lifetime: 60, now: t0, random: &rng)
        XCTAssertEqual(r.nonce, [UInt8](repeating: 5, count: 32))
        XCTAssertEqual(r.otp, "123456")
        // Roughly uniform digits over many draws.
        var system = SystemRandom()
        var counts = [Int](repeating: 0, count: 10)
        for _ in 0..<2000 { for d in SA.randomOTP(using: &system).utf8 { counts[Int(d - 0x30)] += 1 } }
        for c in counts { XCTAssertTrue((900...1500).contains(c), "\(counts)") }
    }

    func testScopeText() throws {
        XCTAssertEqual(try SA.scopes(parsing: ""), [])
        XCTAssertEqual(try SA.scopes(parsing: "email"), ["email"])
        XCTAssertEqual(try SA.scopes(parsing: "profile email"), ["email", "profile"])
        XCTAssertEqual(try SA.scopes(parsing: "b a B"), ["B", "a", "b"])
        let max = (0..<32).map { String(format: "%02d", $0) + String(repeating: "x", count: 62) }
        XCTAssertEqual(try SA.scopes(parsing: max.reversed().joined(separator: " ")), max)
        XCTAssertEqual(SA.scopesText(max.reversed()).utf8.count, SA.scopesTextMaxBytes)
        for bad in [" ", "a  b", " a", "a ", "a a", "a\tb", "a\nb", "é", String(repeating: "a", count: 65),
            (0..<33).map { "s\($0)" }.joined(separator: " "), "a b a"]
        {
            XCTAssertEqual(kind { _ = try SA.scopes(parsing: bad) }, .invalidArgument, bad)
        }
        XCTAssertEqual(SA.scopesText([]), "")
        XCTAssertEqual(SA.scopesText(["profile", "email", "Z"]), "Z email profile")
    }

    // MARK: Enrollment

    func testEnrollmentRefusals() throws {
        let store = MemorySecretStore()
        var mirror = random("enroll"), rng = random("enroll")
        let seed = mirror.bytes(32)
        let nonce = Array(0..<32 as Range<UInt8>)
        let (enrollment, id) = try SA.enroll(store: store, serviceID: service, label: "Alice's phone", nonce: nonce, random: &rng)
        // The documented bytes.
        let pair = try Ed25519.keyPair(seed: seed)
        let label = LV.b("Alice's phone")
        let signed = LV.cat(LV.b("itsme-enroll-v1"), LV.b(service), nonce, pair.publicKey, label)
        XCTAssertEqual(enrollment, [1] + pair.publicKey + [UInt8(label.count)] + label + (try Ed25519.sign(signed, secretKey: pair.secretKey)))
        XCTAssertEqual(id, Array(SHA256.hash(LV.cat(LV.b("itsme-credential-id-v1"), pair.publicKey)).prefix(16)))

        func check(_ serviceID: String = "bank.example", _ n: [UInt8]? = nil, _ e: [UInt8]) -> ItsMeError.Kind? {
            kind { _ = try SA.verifyEnrollment(serviceID: serviceID, nonce: n ?? nonce, enrollment: e) }
        }
        XCTAssertNil(check(service, nonce, enrollment))
        var otherNonce = nonce
        otherNonce[0] ^= 1
        XCTAssertEqual(check(service, otherNonce, enrollment), .authenticationFailed)
        XCTAssertEqual(check(service, Array(nonce.prefix(16)), enrollment), .authenticationFailed)
        XCTAssertEqual(check("shop.example", nonce, enrollment), .authenticationFailed)
        var tamperedLabel = enrollment
        tamperedLabel[34] = UInt8(ascii: "B")  // "Blice's phone"
        XCTAssertEqual(check(service, nonce, tamperedLabel), .authenticationFailed)
        var badSignature = enrollment
        badSignature[badSignature.count - 10] ^= 0x40
        XCTAssertEqual(check(service, nonce, badSignature), .authenticationFailed)
        var otherKey = enrollment
        otherKey.replaceSubrange(1..<33, with: try Ed25519.keyPair(seed: [UInt8](repeating: 3, count: 32)).publicKey)
        XCTAssertEqual(check(service, nonce, otherKey), .authenticationFailed)
        // Malformed.
        XCTAssertEqual(check(service, nonce, [2] + enrollment.dropFirst()), .malformedMessage)
        XCTAssertEqual(check(service, nonce, Array(enrollment.dropLast())), .malformedMessage)
        XCTAssertEqual(check(service, nonce, enrollment + [0]), .malformedMessage)
        XCTAssertEqual(check(service, nonce, []), .malformedMessage)
        for n in 0..<enrollment.count { XCTAssertEqual(check(service, nonce, Array(enrollment.prefix(n))), .malformedMessage, "\(n)") }
        var longerLabel = enrollment
        longerLabel[33] += 1
        XCTAssertEqual(check(service, nonce, longerLabel), .malformedMessage)
        var emptyLabel = Array(enrollment.prefix(33)) + [0] + Array(enrollment.suffix(64))
        XCTAssertEqual(check(service, nonce, emptyLabel), .malformedMessage)
        emptyLabel = Array(enrollment.prefix(34)) + [0x0a] + Array(enrollment.suffix(64 + label.count - 1))
        XCTAssertEqual(check(service, nonce, emptyLabel), .malformedMessage)  // a control character in the label
        var notUTF8 = enrollment
        notUTF8[34] = 0xff
        XCTAssertEqual(check(service, nonce, notUTF8), .malformedMessage)
        // Not a valid key: a small-order point, a non-canonical encoding.
        var smallOrder = enrollment
        smallOrder.replaceSubrange(1..<33, with: [1] + [UInt8](repeating: 0, count: 31))
        XCTAssertEqual(check(service, nonce, smallOrder), .authenticationFailed)
        var nonCanonical = enrollment
        nonCanonical.replaceSubrange(1..<33, with: [UInt8](repeating: 0xff, count: 31) + [0x7f])
        XCTAssertEqual(check(service, nonce, nonCanonical), .authenticationFailed)
        // The service's own arguments.
        XCTAssertEqual(check("", nonce, enrollment), .invalidArgument)
        XCTAssertEqual(check("bank example", nonce, enrollment), .invalidArgument)
        XCTAssertEqual(check(service, Array(nonce.prefix(15)), enrollment), .invalidArgument)
        XCTAssertEqual(check(service, nonce + nonce + [0], enrollment), .invalidArgument)
    }

    func testEnrollChecksItsArgumentsAndSavesNothingThen() throws {
        let store = MemorySecretStore()
        var rng = SystemRandom()
        let nonce = rng.bytes(16)
        let cases: [(String, String, [UInt8])] = [
            ("", "Phone", nonce), ("bank example", "Phone", nonce), (String(repeating: "b", count: 256), "Phone", nonce),
            ("bank.example", "", nonce), ("bank.example", "Phone\n", nonce), ("bank.example", String(repeating: "P", count: 129), nonce),
            ("bank.example", "Phone", Array(nonce.prefix(15))), ("bank.example", "Phone", [UInt8](repeating: 1, count: 65)),
        ]
        for (serviceID, label, n) in cases {
            XCTAssertEqual(kind { _ = try SA.enrollmentSize(serviceID: serviceID, label: label, nonce: n) }, .invalidArgument)
            XCTAssertEqual(kind { _ = try SA.enroll(store: store, serviceID: serviceID, label: label, nonce: n, random: &rng) }, .invalidArgument)
        }
        XCTAssertEqual(store.names, [])
        XCTAssertEqual(try SA.enrollmentSize(serviceID: "b", label: "Zoë", nonce: nonce), 102)
        XCTAssertNoThrow(try SA.enroll(store: store, serviceID: "b", label: "P", nonce: [UInt8](repeating: 1, count: 64)))
    }

    func testEnrollingAgainReplacesTheKey() throws {
        let device = try enrolledDevice("alice")
        let nonce = [UInt8](repeating: 0x11, count: 16)
        var rng = random("again")
        let (enrollment, newID) = try SA.enroll(store: device.store, serviceID: service, label: "Alice's phone", nonce: nonce, random: &rng)
        XCTAssertNotEqual(newID, device.credential.credentialID)
        XCTAssertEqual(try SA.credentialID(store: device.store, serviceID: service), newID)
        XCTAssertEqual(device.store.names, [SA.credentialItemName(serviceID: service)])
        let renewed = try SA.verifyEnrollment(serviceID: service, nonce: nonce, enrollment: enrollment)
        let r = try request()
        let approval = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: [], now: t0)
        XCTAssertEqual(kind { _ = try self.verify(r, approval, keys: [device.publicKey]) }, .notFound)
        XCTAssertEqual(try verify(r, approval, keys: [device.publicKey, renewed.publicKey]).credentialID, newID)
    }

    func testRemovingACredential() throws {
        let device = try enrolledDevice("alice")
        let r = try request()
        try SA.removeCredential(store: device.store, serviceID: service)
        XCTAssertEqual(device.store.names, [])
        XCTAssertEqual(kind { _ = try SA.credentialID(store: device.store, serviceID: self.service) }, .notFound)
        XCTAssertEqual(kind { _ = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: [], now: self.t0) }, .notFound)
        XCTAssertEqual(kind { _ = try SA.sign(store: device.store, request: r.bytes, decision: .deny, granted: [], now: self.t0) }, .notFound)
        XCTAssertEqual(kind { try SA.removeCredential(store: device.store, serviceID: self.service) }, .notFound)
        XCTAssertEqual(kind { try SA.removeCredential(store: device.store, serviceID: "bad id") }, .invalidArgument)
        XCTAssertEqual(kind { _ = try SA.credentialID(store: device.store, serviceID: "") }, .invalidArgument)
        // A request of a service never enrolled.
        let other = try request(serviceID: "shop.example")
        XCTAssertEqual(kind { _ = try SA.sign(store: device.store, request: other.bytes, decision: .deny, granted: [], now: self.t0) }, .notFound)
    }

    func testSignRefusesInItsOrder() throws {
        let store = MemorySecretStore()
        let r = try request(lifetime: 10)
        // An invalid time before anything; a malformed request before expiry.
        XCTAssertEqual(kind { _ = try SA.sign(store: store, request: [], decision: .approve, granted: [], now: -1) }, .invalidArgument)
        XCTAssertEqual(kind { _ = try SA.sign(store: store, request: Array(r.bytes.dropLast()), decision: .approve, granted: [], now: self.t0) }, .malformedMessage)
        // Expired before the missing key; the granted scopes before the missing key.
        XCTAssertEqual(kind { _ = try SA.sign(store: store, request: r.bytes, decision: .approve, granted: [], now: self.t0 + 11) }, .expired)
        XCTAssertEqual(kind { _ = try SA.sign(store: store, request: r.bytes, decision: .approve, granted: ["admin"], now: self.t0) }, .invalidArgument)
        XCTAssertEqual(kind { _ = try SA.sign(store: store, request: r.bytes, decision: .approve, granted: [], now: self.t0) }, .notFound)
    }

    // MARK: The stored item

    func testTheStoredItemIsTheDocumentedRecord() throws {
        let device = try enrolledDevice("alice")
        let name = SA.credentialItemName(serviceID: service)
        let hash = SHA256.hash(LV.cat(LV.b("itsme-credential-name-v1"), LV.b(service))).prefix(16)
        XCTAssertEqual(name, "itsme.credential." + hash.map { String(format: "%02x", $0) }.joined())
        XCTAssertTrue(SecretStoreName.isValid(name))
        XCTAssertTrue(SecretStoreName.isValid(SA.credentialItemName(serviceID: String(repeating: "~", count: 255))))
        let label = LV.b("Alice's phone")
        XCTAssertEqual(
            try stored(device.store, name), [1] + device.seed + [UInt8(service.utf8.count)] + LV.b(service) + [UInt8(label.count)] + label)
    }

    func testACorruptStoredCredential() throws {
        let device = try enrolledDevice("alice")
        let name = SA.credentialItemName(serviceID: service)
        let good = try XCTUnwrap(try stored(device.store, name))
        let r = try request()
        let other = try enrolledDevice("other", serviceID: "shop.example")
        let otherItem = try XCTUnwrap(try stored(other.store, SA.credentialItemName(serviceID: "shop.example")))
        let label = LV.b("Alice's phone")
        let cases: [(String, [UInt8])] = [
            ("empty", []),
            ("version 2", [2] + good.dropFirst()),
            ("truncated", Array(good.dropLast())),
            ("a trailing byte", good + [0]),
            ("another service's item", otherItem),
            ("an empty label", Array(good.prefix(1 + 32 + 1 + service.utf8.count)) + [0]),
            ("a label with a control character", Array(good.dropLast(label.count + 1)) + [3] + LV.b("a\u{0}b")),
            ("a seed only", Array(good.prefix(33))),
        ]
        for (what, item) in cases {
            try device.store.put(name, bytes: item)
            XCTAssertEqual(kind { _ = try SA.credentialID(store: device.store, serviceID: self.service) }, .corruptData, what)
            XCTAssertEqual(
                kind { _ = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: [], now: self.t0) }, .corruptData, what)
        }
        // Removing a damaged item works, and enrolling again repairs it.
        try SA.removeCredential(store: device.store, serviceID: service)
        try device.store.put(name, bytes: [1, 2, 3])
        var rng = random("repair")
        _ = try SA.enroll(store: device.store, serviceID: service, label: "Phone", nonce: [UInt8](repeating: 0, count: 16), random: &rng)
        XCTAssertNoThrow(try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: [], now: t0))
    }

    // MARK: The replay store

    func testTheMemoryReplayStoreForgetsExpiredEntries() throws {
        let store = MemoryReplayStore()
        XCTAssertEqual(store.capacity, 1_000_000)
        XCTAssertEqual(MemoryReplayStore(capacity: -3).capacity, 1_000_000)
        XCTAssertEqual(MemoryReplayStore(capacity: 7).capacity, 7)
        let k1 = SHA256.hash([1]), k2 = SHA256.hash([2])
        XCTAssertFalse(try store.insert(key: k1, expiresAt: 100, now: 0))
        XCTAssertTrue(try store.insert(key: k1, expiresAt: 100, now: 50))
        // Seen is seen, whatever expiry the second insert names.
        XCTAssertTrue(try store.insert(key: k1, expiresAt: 500, now: 100))
        XCTAssertFalse(try store.insert(key: k2, expiresAt: 300, now: 100))
        XCTAssertEqual(store.count, 2)
        // Past its expiry an entry is forgotten.
        XCTAssertFalse(try store.insert(key: k1, expiresAt: 400, now: 101))
        XCTAssertTrue(try store.insert(key: k1, expiresAt: 400, now: 300))
        XCTAssertEqual(store.count, 2)
        XCTAssertFalse(try store.insert(key: SHA256.hash([3]), expiresAt: 1000, now: 401))
        XCTAssertEqual(store.count, 1)
        // An entry already expired is not kept.
        XCTAssertFalse(try store.insert(key: SHA256.hash([4]), expiresAt: 10, now: 401))
        XCTAssertFalse(try store.insert(key: SHA256.hash([4]), expiresAt: 10, now: 401))
        XCTAssertEqual(kind { _ = try store.insert(key: [1, 2, 3], expiresAt: 10, now: 0) }, .invalidArgument)
    }

    func testTheMemoryReplayStoreRefusesWhenFullOfLiveEntries() throws {
        let store = MemoryReplayStore(capacity: 3)
        for i in 0..<3 { XCTAssertFalse(try store.insert(key: SHA256.hash([UInt8(i)]), expiresAt: 100 + Int64(i), now: 0)) }
        XCTAssertEqual(kind { _ = try store.insert(key: SHA256.hash([9]), expiresAt: 500, now: 50) }, .locked)
        do {
            _ = try store.insert(key: SHA256.hash([9]), expiresAt: 500, now: 50)
        } catch let e as ItsMeError {
            XCTAssertTrue(e.message.contains("full"), e.message)
        }
        // A key it holds is still reported as seen.
        XCTAssertTrue(try store.insert(key: SHA256.hash([1]), expiresAt: 101, now: 50))
        // Once the first expires there is room for one.
        XCTAssertFalse(try store.insert(key: SHA256.hash([9]), expiresAt: 500, now: 101))
        XCTAssertEqual(kind { _ = try store.insert(key: SHA256.hash([10]), expiresAt: 500, now: 101) }, .locked)
        XCTAssertFalse(try store.insert(key: SHA256.hash([10]), expiresAt: 500, now: 103))
        XCTAssertEqual(store.count, 2)
    }

    func testTheMemoryReplayStoreDropsInExpiryOrder() throws {
        let store = MemoryReplayStore(capacity: 1000)
        var rng = random("heap")
        let expiries = (0..<500).map { _ in Int64(rng.bytes(2).reduce(0) { $0 << 8 | Int($1) } % 1000) + 1 }
        for (i, e) in expiries.enumerated() {
            XCTAssertFalse(try store.insert(key: SHA256.hash(withUnsafeBytes(of: i, Array.init)), expiresAt: e, now: 0))
        }
        for now in stride(from: Int64(0), through: 1001, by: 37) {
            _ = try store.insert(key: SHA256.hash([0xee]), expiresAt: now - 1, now: now)  // drops, keeps nothing
            XCTAssertEqual(store.count, expiries.filter { $0 >= now }.count, "\(now)")
            for (i, e) in expiries.enumerated().prefix(40) where e >= now {
                XCTAssertTrue(try store.insert(key: SHA256.hash(withUnsafeBytes(of: i, Array.init)), expiresAt: e, now: now))
            }
        }
    }

    func testTheMemoryReplayStoreFromManyThreads() throws {
        let store = MemoryReplayStore()
        let keys = (0..<50).map { SHA256.hash([UInt8($0)]) }
        let fresh = Atomic<Int>(0), failures = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for key in keys {
                do {
                    if try !store.insert(key: key, expiresAt: 1000, now: 1) { fresh.add(1, ordering: .relaxed) }
                } catch { failures.add(1, ordering: .relaxed) }
            }
        }
        XCTAssertEqual(fresh.load(ordering: .relaxed), keys.count)
        XCTAssertEqual(failures.load(ordering: .relaxed), 0)
    }

    func testOneRequestAnsweredFromManyThreadsCountsOnce() throws {
        let device = try enrolledDevice("alice")
        let r = try request()
        let approval = try SA.sign(store: device.store, request: r.bytes, decision: .approve, granted: [], now: t0)
        let replay = MemoryReplayStore()
        let ok = Atomic<Int>(0), replayed = Atomic<Int>(0)
        let keys = [device.publicKey]
        let bytes = r.bytes, now = t0
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            do {
                _ = try SA.verify(request: bytes, approval: approval, publicKeys: keys, replay: replay, now: now)
                ok.add(1, ordering: .relaxed)
            } catch let e as ItsMeError where e.kind == .replayed {
                replayed.add(1, ordering: .relaxed)
            } catch {}
        }
        XCTAssertEqual(ok.load(ordering: .relaxed), 1)
        XCTAssertEqual(replayed.load(ordering: .relaxed), 7)
    }

    // MARK: The result code

    func testTheReplayedKind() {
        XCTAssertEqual(ItsMeError.Kind.replayed.code, 22)
        XCTAssertEqual(ItsMeError.Kind.replayed.symbol, "ITSME_E_REPLAYED")
        XCTAssertEqual(ItsMeError.Kind.replayed.message.description, "replayed: this single-use message was presented already")
        XCTAssertEqual(
            ItsMeError.Kind.expired.message.description,
            "expired: too late (an exchange older than 24 hours, a session or request past its lifetime)")
        XCTAssertEqual(ItsMeError.Kind.all[21], .replayed)
        XCTAssertEqual(ItsMeError.Kind.all.map(\.code), Array(1...23))
    }
}

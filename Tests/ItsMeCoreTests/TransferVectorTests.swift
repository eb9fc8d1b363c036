import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

/// export.json and transfer.json (section 17), played through the library.
extension ProtocolVectorTests {
    /// The identity the file's `random_seed` and `name_text` give, with its PIN set.
    func transferIdentity(_ p: J) throws -> Identity {
        let (id, _) = try party(p)
        XCTAssertEqual(hex(id.publicKey), text(p, "identity_public"))
        try PIN(store: id.store, parameters: .interactive).set(text(p, "pin_text"))
        return id
    }

    func testExport() throws {
        let v = try object("export")
        for e in list(v, "passwords") {
            XCTAssertEqual(IdentityExport.shown(Array(IdentityExport.password(fromRandom: bytes(e, "random")).prefix(13))), text(e, "password_text"))
        }
        let typed = list(v, "typed")
        XCTAssertFalse(typed.isEmpty)
        for e in typed {
            let input = text(e, "input_text")
            if e["error_text"] != nil {
                XCTAssertEqual(errorKind { _ = try IdentityExport.passwordBytes(input, kind: .generated) }.map(Self.errorName), text(e, "error_text"), input)
            } else {
                XCTAssertEqual(String(decoding: try IdentityExport.passwordBytes(input, kind: .generated), as: UTF8.self), text(e, "canonical_text"), input)
            }
        }
        let exports = list(v, "exports")
        XCTAssertEqual(exports.count, 2)
        for e in exports {
            let identity = try transferIdentity(e)
            let kind = try XCTUnwrap(IdentityExport.PasswordKind(rawValue: UInt8(int(e, "password_kind"))))
            XCTAssertEqual(hex(try IdentityExport.passwordBytes(text(e, "password_text"), kind: kind)), text(e, "password_bytes"))
            var rng = DeterministicRandom(seed: bytes(e, "export_random_seed"))
            let blob = try IdentityExport.export(
                identity, pin: text(e, "pin_text"), now: now, password: text(e, "password_text"), kind: kind, random: &rng)
            XCTAssertEqual(hex(blob), text(e, "export"))
            XCTAssertEqual(IdentityExport.text(blob), text(e, "text"))
            let opened = try IdentityExport.open(
                try IdentityExport.blob(text: text(e, "text")), password: text(e, "typed_text"),
                limiter: AttemptLimiter(store: MemorySecretStore(), purpose: "v"), now: now)
            XCTAssertEqual(opened.fingerprint, text(e, "fingerprint_text"))
            XCTAssertEqual(opened.name, text(e, "name_text"))
        }
        // With the contacts: format version 2, a file only.
        let withContacts = list(v, "exports_with_contacts")
        XCTAssertEqual(withContacts.count, 2)
        for e in withContacts {
            let identity = try transferIdentity(e)
            var rng = DeterministicRandom(seed: bytes(e, "export_random_seed"))
            let blob = try IdentityExport.export(
                identity, pin: text(e, "pin_text"), now: now, password: text(e, "password_text"), kind: .generated,
                contactStore: bytes(e, "store"), random: &rng)
            XCTAssertEqual(hex(blob), text(e, "export"))
            XCTAssertEqual(Array(blob.prefix(IdentityExport.headerCount)), bytes(e, "header"))
            let opened = try IdentityExport.open(
                blob, password: text(e, "typed_text"), limiter: AttemptLimiter(store: MemorySecretStore(), purpose: "v"), now: now)
            XCTAssertEqual(opened.fingerprint, text(e, "fingerprint_text"))
            XCTAssertEqual(opened.contactStore, bytes(e, "store"))
            // It has no text form.
            XCTAssertEqual(
                errorKind { _ = try IdentityExport.blob(text: IdentityExport.text(blob)) }.map(Self.errorName), "invalid_argument")
        }
        let rejections = list(v, "rejections")
        XCTAssertFalse(rejections.isEmpty)
        for r in rejections {
            let what = text(r, "case_text"), error = text(r, "error_text")
            let limiter = AttemptLimiter(store: MemorySecretStore(), purpose: "v")
            let kind = errorKind {
                let blob = r["export"] != nil ? self.bytes(r, "export") : try IdentityExport.blob(text: self.text(r, "text"))
                _ = try IdentityExport.open(blob, password: self.text(r, "password_text"), limiter: limiter, now: self.now)
            }
            XCTAssertEqual(kind.map(Self.errorName), error, what)
            XCTAssertEqual(try limiter.status(now: now).failures, error == "authentication_failed" ? 1 : 0, what)
        }
    }

    func testTransfer() throws {
        let v = try object("transfer")
        let transfers = list(v, "transfers")
        XCTAssertEqual(transfers.count, 2)
        for e in transfers {
            let sender = sub(e, "sender")
            let identity = try transferIdentity(sender)
            let pin = text(sender, "pin_text")
            var rrng = DeterministicRandom(seed: bytes(e, "receiver_random_seed"))
            var srng = DeterministicRandom(seed: bytes(e, "sender_random_seed"))
            let receiver = try DeviceTransfer(receiverAt: now, random: &rrng)
            XCTAssertEqual(receiver.offerText, text(e, "offer_text"))
            XCTAssertEqual(receiver.roomName, text(e, "room_text"))
            let transfer = try DeviceTransfer(sending: identity, pin: pin, offer: receiver.offerText, now: now, random: &srng)
            XCTAssertEqual(transfer.roomName, text(e, "room_text"))
            let keyMessage = try XCTUnwrap(transfer.takeOutgoing())
            XCTAssertEqual(hex(keyMessage), text(e, "key_message"))
            try receiver.receive(keyMessage, now: now)
            checkSAS(receiver.sas, e)
            checkSAS(transfer.sas, e)
            let store = bytes(e, "store")
            if !store.isEmpty { try transfer.include(contactStore: store) }
            try transfer.confirm(now: now)
            let identityMessage = try XCTUnwrap(transfer.takeOutgoing())
            XCTAssertEqual(hex(identityMessage), text(e, "identity_message"))
            var storeMessages: [String] = []
            while let m = transfer.takeOutgoing() { storeMessages.append(hex(m)) }
            XCTAssertEqual(storeMessages, e["store_messages"] as? [String] ?? ["(no store_messages)"])
            // The receiver takes them before its confirmation (held), in order.
            try receiver.receive(identityMessage, now: now)
            for m in storeMessages { try receiver.receive(try XCTUnwrap(Hex.decode(m)), now: now) }
            XCTAssertEqual(receiver.state, .compareSAS)
            try receiver.confirm(now: now)
            XCTAssertEqual(receiver.state, .done)
            let received = try receiver.takeIdentity()
            XCTAssertEqual(received.fingerprint, text(sender, "fingerprint_text"))
            XCTAssertEqual(received.name, text(sender, "name_text"))
            XCTAssertEqual(received.contactStore, store.isEmpty ? nil : store)
        }
        let e = transfers[0]
        let identity = try transferIdentity(sub(e, "sender"))
        let pin = text(sub(e, "sender"), "pin_text")

        // Refusals, each against a fresh receiver of the transfer.
        let rejections = list(v, "rejections")
        XCTAssertFalse(rejections.isEmpty)
        for r in rejections {
            let what = text(r, "case_text")
            var rng = DeterministicRandom(seed: bytes(e, "receiver_random_seed"))
            let fresh = try DeviceTransfer(receiverAt: now, random: &rng)
            let steps = list(r, "steps")
            var failed: String?
            for (i, step) in steps.enumerated() {
                let kind = errorKind {
                    if step["receive"] != nil {
                        try fresh.receive(self.bytes(step, "receive"), now: self.now)
                    } else {
                        XCTAssertTrue(self.flag(step, "confirm"), what)
                        try fresh.confirm(now: self.now)
                    }
                }
                if i < steps.count - 1 { XCTAssertNil(kind, "\(what): step \(i)") } else { failed = kind.map(Self.errorName) }
            }
            XCTAssertEqual(failed, text(r, "error_text"), what)
        }
        // Offers the sender refuses.
        let offers = list(v, "offer_rejections")
        XCTAssertFalse(offers.isEmpty)
        for r in offers {
            var rng = DeterministicRandom(seed: bytes(e, "sender_random_seed"))
            let kind = errorKind { _ = try DeviceTransfer(sending: identity, pin: pin, offer: self.text(r, "offer_text"), now: self.now, random: &rng) }
            XCTAssertEqual(kind.map(Self.errorName), text(r, "error_text"), text(r, "case_text"))
        }
    }

    // MARK: profile.json (section 18)

    func testProfile() throws {
        let v = try object("profile")
        let owner = try Ed25519.keyPair(seed: bytes(v, "owner_seed")).publicKey
        XCTAssertEqual(hex(owner), text(v, "owner_public"))
        XCTAssertEqual(int(v, "max_record_bytes"), ProfileRecord.maxRecordBytes)
        let records = list(v, "records")
        XCTAssertEqual(records.count, 3)
        for e in records {
            let fields = list(e, "fields")
            XCTAssertEqual(fields.map { text($0, "field_name_text") }, ["name", "photo", "photo-filename"])
            let photo = bytes(fields[1], "value")
            XCTAssertEqual(bytes(fields[0], "value"), Array(text(e, "name_text").utf8))
            var rng = DeterministicRandom(seed: bytes(e, "random_seed"))
            let record = try ProfileRecord.create(
                ownerKey: owner, name: text(e, "name_text"), photo: photo, photoFilename: text(e, "photo_filename_text"), random: &rng)
            XCTAssertEqual(hex(record.record), text(e, "record"))
            XCTAssertEqual(record.record.count, int(e, "size"))
            XCTAssertEqual(hex(record.recordID), text(e, "record_id"))
            XCTAssertEqual(record.recordName, text(e, "record_name_text"))
            XCTAssertEqual(hex(try record.reference().unsafeExportedArray()), text(e, "reference"))
            // Opened with its reference, it gives its values back.
            let opened = try ProfileRecord.open(record: bytes(e, "record"), reference: bytes(e, "reference"), ownerKey: owner)
            XCTAssertEqual(opened.name, text(e, "name_text"))
            XCTAssertEqual(opened.photo, photo)
            XCTAssertEqual(opened.photoFilename, text(e, "photo_filename_text"))
        }
        let refusals = list(v, "refusals")
        XCTAssertEqual(refusals.count, 15)
        for r in refusals {
            let record = r["record_zero_bytes"] != nil ? [UInt8](repeating: 0, count: int(r, "record_zero_bytes")) : bytes(r, "record")
            let kind = errorKind { _ = try ProfileRecord.open(record: record, reference: self.bytes(r, "reference"), ownerKey: self.bytes(r, "owner_public")) }
            XCTAssertEqual(kind.map(Self.errorName), text(r, "error_text"), text(r, "case_text"))
        }
    }

    // MARK: approval.json (section 19)

    func testApproval() throws {
        typealias SA = ServiceApproval
        let v = try object("approval")
        let enrollments = list(v, "enrollments")
        XCTAssertEqual(enrollments.count, 2)
        var stores: [MemorySecretStore] = []
        for e in enrollments {
            let store = MemorySecretStore()
            var rng = DeterministicRandom(seed: bytes(e, "random_seed"))
            let (enrollment, id) = try SA.enroll(
                store: store, serviceID: text(e, "service_id_text"), label: text(e, "label_text"), nonce: bytes(e, "nonce"), random: &rng)
            XCTAssertEqual(hex(enrollment), text(e, "enrollment"))
            XCTAssertEqual(hex(id), text(e, "credential_id"))
            XCTAssertEqual(store.names, [text(e, "credential_item_text")])
            XCTAssertEqual(try stored(store, text(e, "credential_item_text")).map(hex), text(e, "credential_item"))
            XCTAssertEqual(hex(try Ed25519.keyPair(seed: bytes(e, "credential_seed")).publicKey), text(e, "public_key"))
            let credential = try SA.verifyEnrollment(serviceID: text(e, "service_id_text"), nonce: bytes(e, "nonce"), enrollment: enrollment)
            XCTAssertEqual(hex(credential.credentialID), text(e, "credential_id"))
            XCTAssertEqual(hex(credential.publicKey), text(e, "public_key"))
            XCTAssertEqual(credential.label, text(e, "label_text"))
            stores.append(store)
        }
        let requests = list(v, "requests")
        XCTAssertEqual(requests.count, 3)
        var made: [SA.Request] = []
        for e in requests {
            var rng = DeterministicRandom(seed: bytes(e, "random_seed"))
            let given = text(e, "scopes_given_text").split(separator: " ").map(String.init)
            let request = try SA.Request.create(
                serviceID: text(e, "service_id_text"), serviceName: text(e, "service_name_text"), sessionID: text(e, "session_id_text"),
                scopes: given, lifetime: Int64(int(e, "lifetime")), now: Int64(int(e, "now")), random: &rng)
            XCTAssertEqual(hex(request.bytes), text(e, "request"))
            XCTAssertEqual(request.otp, text(e, "otp_text"))
            XCTAssertEqual(hex(request.nonce), text(e, "nonce"))
            XCTAssertEqual(request.scopesText, text(e, "scopes_text"))
            XCTAssertEqual(Int(request.issuedAt), int(e, "issued_at"))
            XCTAssertEqual(Int(request.expiresAt), int(e, "expires_at"))
            XCTAssertEqual(hex(request.replayKey), text(e, "replay_key"))
            XCTAssertEqual(hex(SHA256.hash(request.bytes)), text(e, "request_hash"))
            XCTAssertEqual(try SA.Request(parsing: request.bytes, now: Int64(int(e, "now"))), request)
            made.append(request)
        }
        XCTAssertNotEqual(made[0].otp, made[2].otp)
        let approvals = list(v, "approvals")
        XCTAssertEqual(approvals.count, 3)
        for e in approvals {
            let what = text(e, "case_text")
            let request = made[int(e, "request")]
            let decision = try XCTUnwrap(SA.Decision(rawValue: UInt8(int(e, "decision"))))
            let granted = text(e, "granted_given_text").split(separator: " ").map(String.init)
            let approval = try SA.sign(
                store: stores[int(e, "enrollment")], request: request.bytes, decision: decision, granted: granted,
                now: Int64(int(e, "timestamp")))
            XCTAssertEqual(hex(approval), text(e, "approval"), what)
            let verified = try SA.verify(
                request: request.bytes, approval: approval, publicKeys: hexList(e, "public_keys"), replay: MemoryReplayStore(),
                now: Int64(int(e, "verify_now")))
            XCTAssertEqual(verified.decision, decision, what)
            XCTAssertEqual(hex(verified.credentialID), text(e, "credential_id"), what)
            XCTAssertEqual(Int(verified.timestamp), int(e, "timestamp"), what)
            XCTAssertEqual(verified.granted.joined(separator: " "), text(e, "granted_text"), what)
        }
        // Refusals of 19.5: each list presented in order to one fresh replay store.
        let refusals = list(v, "refusals")
        XCTAssertFalse(refusals.isEmpty)
        for r in refusals {
            let what = text(r, "case_text")
            let replay = MemoryReplayStore()
            let presented = hexList(r, "approvals")
            var failed: String?
            for (i, approval) in presented.enumerated() {
                let kind = errorKind {
                    _ = try SA.verify(
                        request: self.bytes(r, "request"), approval: approval, publicKeys: self.hexList(r, "public_keys"), replay: replay,
                        now: Int64(self.int(r, "now")))
                }
                if i < presented.count - 1 {
                    // Earlier presentations verify, unless they are forgeries, which spend nothing.
                    if kind != nil { XCTAssertEqual(replay.count, 0, "\(what): step \(i)") }
                } else {
                    failed = kind.map(Self.errorName)
                }
            }
            XCTAssertEqual(failed, text(r, "error_text"), what)
        }
        let requestRefusals = list(v, "request_refusals")
        XCTAssertFalse(requestRefusals.isEmpty)
        for r in requestRefusals {
            XCTAssertEqual(
                errorKind { _ = try SA.Request(parsing: self.bytes(r, "request"), now: Int64(self.int(r, "now"))) }.map(Self.errorName),
                text(r, "error_text"), text(r, "case_text"))
        }
        XCTAssertNoThrow(try SA.Request(parsing: made[0].bytes, now: made[0].expiresAt))
        let enrollmentRefusals = list(v, "enrollment_refusals")
        XCTAssertFalse(enrollmentRefusals.isEmpty)
        for r in enrollmentRefusals {
            XCTAssertEqual(
                errorKind {
                    _ = try SA.verifyEnrollment(
                        serviceID: self.text(r, "service_id_text"), nonce: self.bytes(r, "nonce"), enrollment: self.bytes(r, "enrollment"))
                }.map(Self.errorName), text(r, "error_text"), text(r, "case_text"))
        }
    }
}

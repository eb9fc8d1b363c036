import ItsMePrimitives
import ItsMeBase
import ItsMeStore
import ItsMeFlows

/// The body of the records fuzz target (fuzz/RecordsFuzz.swift), here so
/// the tests replay its corpus through exactly the same code.
///
/// Every record a device or a service reads from outside: identity export
/// texts, their headers and (opened) contents; device transfer offers and
/// messages; profile records; service approval requests, approvals and
/// enrollments. Besides never crashing, what a reader accepts must hold
/// together: a header reads back to its bytes, a profile record opens to
/// the values sealed in it, any request the device reads can be answered
/// and the answer verifies once, and only once.
final class RecordsFuzzing {
    enum Kind: Int, CaseIterable {
        /// `ITSMEXP1:...`, then its header.
        case exportText
        /// An export blob's header.
        case exportHeader
        /// An export's contents as they are once opened.
        case exportContents
        /// `ITSMETR1:...`.
        case transferOffer
        /// Messages to a new device's transfer (length byte, message, ...).
        case transferMessages
        /// A profile record fetched from the relay.
        case profileRecord
        /// Three profile values (u16 length, value, ...), sealed here under
        /// the fixed record key so that their checks are reached.
        case profileValues
        /// An approval request as the device reads and answers it.
        case approvalRequest
        /// An approval as the service verifies it.
        case approval
        /// An enrollment as the service verifies it.
        case enrollment
    }

    static let now: Int64 = 1_800_000_000
    static let serviceID = "bank.example"
    static let enrollmentNonce = [UInt8](repeating: 0x5a, count: 32)
    static let transferSeed = [UInt8](repeating: 31, count: 32)
    static let profileOwner = [UInt8](repeating: 0x42, count: 32)
    static let profileKey = [UInt8](repeating: 0x33, count: ProfileRecord.recordKeyCount)
    static let profileNonces: [[UInt8]] = (1...3).map { [UInt8](repeating: UInt8($0), count: ChaCha20.nonceCount) }

    /// The device's secret store, holding its credential for `serviceID`.
    let credentialStore = MemorySecretStore()
    /// The enrollment that made it, for `enrollmentNonce`.
    let enrollment: [UInt8]
    /// The credential's public key, as the service keeps it.
    let credentialKey: [UInt8]
    /// A request of the service, for approvals that come without one.
    let request: ServiceApproval.Request

    init() throws {
        var random = DeterministicRandom(seed: [UInt8](repeating: 32, count: 32))
        enrollment = try ServiceApproval.enroll(
            store: credentialStore, serviceID: Self.serviceID, label: "Fuzz phone", nonce: Self.enrollmentNonce, random: &random
        ).enrollment
        credentialKey = Array(enrollment[1..<(1 + Ed25519.publicKeyCount)])
        request = try ServiceApproval.Request.create(
            serviceID: Self.serviceID, serviceName: "Fuzz Bank", sessionID: "session-1", scopes: ["profile", "email"],
            lifetime: 300, now: Self.now, random: &random)
    }

    /// The first byte picks the kind (modulo the number of kinds) and an
    /// option (the quotient); the rest is the record. True if it was
    /// accepted.
    @discardableResult
    func run(_ input: [UInt8]) -> Bool {
        guard let selector = input.first else { return false }
        let rest = Array(input.dropFirst())
        let option = Int(selector) / Kind.allCases.count
        switch Kind(rawValue: Int(selector) % Kind.allCases.count)! {
        case .exportText:
            guard let blob = try? IdentityExport.blob(text: String(decoding: rest, as: UTF8.self)) else { return false }
            check((try? IdentityExport.blob(text: IdentityExport.text(blob))) == blob, "an export text does not read back")
            return Self.header(blob)
        case .exportHeader:
            return Self.header(rest)
        case .exportContents:
            do {
                let contents = try IdentityExport.Contents(try SecretBytes(copying: rest))
                check(DisplayName.isValid(contents.name), "an export's name")
                return true
            } catch { return false }
        case .transferOffer:
            guard let offer = try? TransferOffer(parsing: String(decoding: rest, as: UTF8.self)) else { return false }
            check(offer.transferID.count == 16 && offer.receiverKey.count == X25519.keyCount, "a transfer offer's fields")
            check(TransferOffer(transferID: offer.transferID, receiverKey: offer.receiverKey).text == offer.text, "a transfer offer's text")
            check((try? DeviceTransfer.checkOffer(offer.text)) == offer.text, "a transfer offer does not read back")
            return true
        case .transferMessages:
            return transfer(Self.messages(rest), confirmBefore: option)
        case .profileRecord:
            // The reference either comes first (option 1) or names the
            // record's own ID under the fixed record key.
            var record = rest, reference = [UInt8](repeating: 0, count: ProfileRecord.recordIDCount) + Self.profileKey
            if option & 1 == 1 {
                guard rest.count >= ProfileRecord.referenceCount else { return false }
                reference = Array(rest.prefix(ProfileRecord.referenceCount))
                record = Array(rest.dropFirst(ProfileRecord.referenceCount))
            } else if rest.count >= HMACSHA256.byteCount {
                reference = Array(rest.suffix(HMACSHA256.byteCount).prefix(ProfileRecord.recordIDCount)) + Self.profileKey
            }
            guard let opened = try? ProfileRecord.open(record: record, reference: reference, ownerKey: Self.profileOwner)
            else { return false }
            check(opened.record == record && opened.recordID == Array(reference.prefix(16)), "a profile record's ID")
            return true
        case .profileValues:
            var values = Self.fields(rest)
            while values.count < 3 { values.append([]) }
            guard let record = try? Self.sealProfile(Array(values.prefix(3))) else { return false }
            let reference = Array(record.suffix(HMACSHA256.byteCount).prefix(ProfileRecord.recordIDCount)) + Self.profileKey
            guard let opened = try? ProfileRecord.open(record: record, reference: reference, ownerKey: Self.profileOwner)
            else { return false }
            check(
                Array(opened.name.utf8) == values[0] && opened.photo == values[1] && Array(opened.photoFilename.utf8) == values[2],
                "a profile record opens to other values than were sealed")
            return true
        case .approvalRequest:
            return answer(rest)
        case .approval:
            var requestBytes = request.bytes, approval = rest
            if option & 1 == 0 {
                guard rest.count >= 2 else { return false }
                let n = Int(rest[0]) << 8 | Int(rest[1])
                requestBytes = Array(rest.dropFirst(2).prefix(n))
                approval = Array(rest.dropFirst(2 + n))
            }
            return verify(request: requestBytes, approval: approval) != nil
        case .enrollment:
            guard
                let credential = try? ServiceApproval.verifyEnrollment(
                    serviceID: Self.serviceID, nonce: Self.enrollmentNonce, enrollment: rest)
            else { return false }
            check(
                credential.publicKey == Array(rest[1..<33])
                    && credential.credentialID == ServiceApproval.credentialID(publicKey: credential.publicKey),
                "an enrollment's credential")
            return true
        }
    }

    private static func header(_ blob: [UInt8]) -> Bool {
        guard let header = try? IdentityExport.Header(parsing: blob) else { return false }
        check(header.bytes == Array(blob.prefix(IdentityExport.headerCount)), "an export header does not read back")
        return true
    }

    /// A new device's transfer, fed `messages`, the person confirming
    /// before message i when bit i of `confirmBefore` is set (bit 4: after
    /// the last). True if it received an identity.
    private func transfer(_ messages: [[UInt8]], confirmBefore: Int) -> Bool {
        var random = DeterministicRandom(seed: Self.transferSeed)
        guard let receiver = try? DeviceTransfer(receiverAt: Self.now, random: &random) else { return false }
        for (i, m) in messages.enumerated() {
            if i < 4, confirmBefore & (1 << i) != 0 { _ = try? receiver.confirm(now: Self.now) }
            _ = try? receiver.receive(m, now: Self.now)
            _ = receiver.sas
        }
        if confirmBefore & 16 != 0 { _ = try? receiver.confirm(now: Self.now) }
        guard receiver.state == .done else {
            _ = try? receiver.reject()
            return false
        }
        do {
            let contents = try receiver.takeIdentity()
            check(DisplayName.isValid(contents.name), "a transferred identity's name")
            return true
        } catch {
            check(false, "a finished transfer gives no identity")
            return false
        }
    }

    /// The device reads a request and answers it both ways; both answers
    /// must verify, once.
    private func answer(_ bytes: [UInt8]) -> Bool {
        guard let request = try? ServiceApproval.Request(parsing: bytes, now: Self.now) else { return false }
        check(request.bytes == bytes && request.otp.utf8.count == ServiceApproval.otpCount, "a request's fields")
        for decision in [ServiceApproval.Decision.approve, .deny] {
            let granted = decision == .approve ? request.scopes : []
            guard
                let approval = try? ServiceApproval.sign(
                    store: credentialStore, request: bytes, decision: decision, granted: granted, now: Self.now)
            else {
                check(request.serviceID != Self.serviceID, "a request of the enrolled service cannot be answered")
                return true
            }
            let verified = verify(request: bytes, approval: approval)
            check(verified?.decision == decision && verified?.granted == granted, "an honest answer does not verify")
        }
        return true
    }

    /// The service verifies `approval`; a second time, it must be refused
    /// as replayed.
    private func verify(request: [UInt8], approval: [UInt8]) -> ServiceApproval.Verified? {
        let replay = MemoryReplayStore(capacity: 4)
        func once() throws -> ServiceApproval.Verified {
            try ServiceApproval.verify(
                request: request, approval: approval, publicKeys: [credentialKey], replay: replay, now: Self.now)
        }
        guard let verified = try? once() else { return nil }
        do {
            _ = try once()
            check(false, "an approval verified twice")
        } catch let e as ItsMeError {
            check(e.kind == .replayed, "a second verification refused for another reason than replay")
        } catch {
            check(false, "an unexpected error")
        }
        return verified
    }

    /// A profile record of `values` (name, photo, filename bytes, as given:
    /// no value check), sealed under the fixed record key and nonces.
    static func sealProfile(_ values: [[UInt8]]) throws -> [UInt8] {
        let keys = try ProfileRecord.subkeys(try SecretBytes(copying: profileKey))
        return try keys.withBytes { k in
            let k1 = UnsafeRawBufferPointer(rebasing: k[0..<32]), k2 = UnsafeRawBufferPointer(rebasing: k[32..<64])
            var record: [UInt8] = [ProfileRecord.version], macs: [[UInt8]] = []
            for i in 0..<3 {
                let ciphertext = values[i].withUnsafeBytes { ChaCha20.xor($0, key: k1, nonce: profileNonces[i]) }
                let mac = ProfileRecord.fieldMAC(k2, field: i, nonce: profileNonces[i], ciphertext: ciphertext)
                record += profileNonces[i] + withUnsafeBytes(of: UInt32(ciphertext.count).bigEndian, Array.init) + ciphertext + mac
                macs.append(mac)
            }
            return record
                + (try ProfileRecord.recordMAC(
                    UnsafeRawBufferPointer(rebasing: k[64..<96]), fieldMACs: macs, ownerKey: profileOwner))
        }
    }

    /// Messages framed as a length byte and that many bytes (the last may be short).
    static func messages(_ bytes: [UInt8]) -> [[UInt8]] {
        var out: [[UInt8]] = [], i = 0
        while i < bytes.count {
            let end = min(bytes.count, i + 1 + Int(bytes[i]))
            out.append(Array(bytes[(i + 1)..<end]))
            i = end
        }
        return out
    }

    /// Fields framed as a big-endian u16 length and that many bytes.
    static func fields(_ bytes: [UInt8]) -> [[UInt8]] {
        var out: [[UInt8]] = [], i = 0
        while i + 1 < bytes.count {
            let end = min(bytes.count, i + 2 + (Int(bytes[i]) << 8 | Int(bytes[i + 1])))
            out.append(Array(bytes[(i + 2)..<end]))
            i = end
        }
        return out
    }

    static func frame(_ messages: [[UInt8]]) -> [UInt8] { messages.flatMap { [UInt8($0.count)] + $0 } }
    static func frame16(_ fields: [[UInt8]]) -> [UInt8] { fields.flatMap { [UInt8($0.count >> 8), UInt8($0.count & 0xff)] + $0 } }

    static func selector(_ kind: Kind, option: Int = 0) -> UInt8 { UInt8(kind.rawValue + option * Kind.allCases.count) }

    /// Honest records of every kind, for the seed corpus.
    func seeds() throws -> [[UInt8]] {
        var out: [[UInt8]] = []
        func add(_ kind: Kind, option: Int = 0, _ bytes: [UInt8]) { out.append([Self.selector(kind, option: option)] + bytes) }
        var random = DeterministicRandom(seed: [UInt8](repeating: 33, count: 32))

        // An identity with a PIN, its export and its transfer.
        let old = try Identity.create(store: MemorySecretStore(), name: "Fuzz Ålice", random: &random)
        try PIN(store: old.store).set("123456")
        for kind in [IdentityExport.PasswordKind.generated, .chosen] {
            let password = kind == .generated ? IdentityExport.generatePassword(using: &random) : "correct horse"
            let blob = try IdentityExport.export(old, password: password, kind: kind, random: &random)
            add(.exportText, Array(IdentityExport.text(blob).utf8))
            add(.exportText, Array(("\n " + IdentityExport.text(blob) + "\r\n").utf8))
            add(.exportHeader, blob)
        }
        add(.exportContents, try old.exportContents().unsafeExportedArray())

        var transferRandom = DeterministicRandom(seed: Self.transferSeed)
        let receiver = try DeviceTransfer(receiverAt: Self.now, random: &transferRandom)
        add(.transferOffer, Array(receiver.offerText.utf8))
        add(.transferOffer, Array((" " + receiver.offerText + "\n").utf8))
        let sender = try DeviceTransfer(sending: old, pin: "123456", offer: receiver.offerText, now: Self.now, random: &random)
        let key = try unwrap(sender.takeOutgoing())
        try sender.confirm(now: Self.now)
        let identity = try unwrap(sender.takeOutgoing())
        add(.transferMessages, option: 2, Self.frame([key, identity]))  // confirmed before the identity came
        add(.transferMessages, option: 16, Self.frame([key, identity]))  // the identity came first

        // Profile records.
        let profiles: [(String, [UInt8], String)] = [
            ("Fuzz Ålice", [], ""), ("", [0xff, 0xd8, 0xff, 0xe0] + [UInt8](repeating: 7, count: 60), "me.jpg"),
            ("Bob", [0x89, 0x50, 0x4e, 0x47], "Bob (2024).png"),
        ]
        for (name, photo, filename) in profiles {
            let record = try ProfileRecord.seal(
                ownerKey: Self.profileOwner, name: name, photo: photo, photoFilename: filename,
                recordKey: try SecretBytes(copying: Self.profileKey), nonces: Self.profileNonces)
            add(.profileRecord, record.record)
            add(.profileRecord, option: 1, try record.reference().unsafeExportedArray() + record.record)
            add(.profileValues, Self.frame16([Array(name.utf8), photo, Array(filename.utf8)]))
        }

        // Service approvals: requests, both answers, enrollments.
        var requests = [request]
        requests.append(
            try ServiceApproval.Request.create(
                serviceID: Self.serviceID, serviceName: "Fuzz Bank", sessionID: "login-7f3a", scopes: [], lifetime: 600,
                now: Self.now, random: &random))
        requests.append(
            try ServiceApproval.Request.create(
                serviceID: "shop.example", serviceName: "Ünicode Shop", sessionID: "s", scopes: ["pay:42.00", "address"],
                lifetime: 60, now: Self.now, random: &random))
        for r in requests {
            add(.approvalRequest, r.bytes)
            guard r.serviceID == Self.serviceID else { continue }
            for (decision, granted) in [(ServiceApproval.Decision.approve, r.scopes), (.approve, Array(r.scopes.prefix(1))), (.deny, [])] {
                let approval = try ServiceApproval.sign(
                    store: credentialStore, request: r.bytes, decision: decision, granted: granted, now: Self.now)
                add(.approval, [UInt8(r.bytes.count >> 8), UInt8(r.bytes.count & 0xff)] + r.bytes + approval)
                if r == request { add(.approval, option: 1, approval) }
            }
        }
        add(.enrollment, enrollment)
        return out
    }

    private func unwrap<T>(_ value: T?) throws -> T {
        guard let value else { throw ItsMeError(.internal, "no message") }
        return value
    }

    static func check(_ condition: Bool, _ what: StaticString) {
        if !condition { fatalError("records fuzz: \(what)") }
    }

    private func check(_ condition: Bool, _ what: StaticString) { Self.check(condition, what) }
}

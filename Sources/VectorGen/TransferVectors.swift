import Foundation
import ItsMeKit
import ItsMePrimitives

/// The device transfer vectors (PROTOCOL.md 17): export.json and
/// transfer.json, built from fixed inputs and checked against the
/// documented formulas as they are built.
extension VectorGenerator {
    static let vectorPIN = "123456"

    /// An identity created by the library from `fixed(label)`, with its PIN
    /// set, and the seed and contacts key that source draws.
    func transferIdentity(_ label: String, name: String) throws -> (Identity, [String: Any], seed: [UInt8], contactsKey: [UInt8]) {
        let randomSeed = fixed("itsme-vector-random-" + label)
        var mirror = DeterministicRandom(seed: randomSeed)
        let seed = mirror.bytes(32), contactsKey = mirror.bytes(32)
        var rng = DeterministicRandom(seed: randomSeed)
        let identity = try Identity.create(store: MemorySecretStore(), name: name, random: &rng)
        try PIN(store: identity.store, parameters: .interactive).set(Self.vectorPIN)
        let json: [String: Any] = [
            "random_seed": hex(randomSeed), "identity_seed": hex(seed), "identity_public": hex(identity.publicKey),
            "contacts_key": hex(contactsKey), "fingerprint_text": identity.fingerprint, "name_text": name,
            "pin_text": Self.vectorPIN,
        ]
        return (identity, json, seed, contactsKey)
    }

    func contents(seed: [UInt8], contactsKey: [UInt8], name: String, fingerprint: String) -> [UInt8] {
        let n = Array(name.utf8)
        return seed + contactsKey + [UInt8(n.count >> 8), UInt8(n.count & 0xff)] + n + Array(fingerprint.utf8)
    }

    func exportVectors() throws -> [String: Any] {
        let randoms: [[UInt8]] = [
            Array(0..<16),
            [248, 0, 255, 30, 31, 249, 61, 62, 250, 92, 93, 123, 251, 154, 185, 216, 247, 252, 253, 7, 8, 9],
            fixed("itsme-vector-export-password"),
        ]
        let passwords: [[String: Any]] = randoms.map { r in
            ["random": hex(r), "password_text": IdentityExport.shown(Array(IdentityExport.password(fromRandom: r).prefix(13)))]
        }
        let accepted = ["ABCD-EFGH-JKMNP", "abcd-efgh-jkmnp", "ABCDEFGHJKMNP", " abcd efgh jkmnp ", "aBcD-eFgH-jKmNp"]
        let refused = ["ABCD-EFGH-JKMN", "ABCD-EFGH-JKMNPQ", "ABCD-EFGH-JKMNO", "ABCD-EFGH-JKMN0", "ABCD-EFGH-JKMN1",
            "ABCD-EFGH-JKMNI", "ABCD-EFGH-JKMNL", "ABCD_EFGH_JKMNP", "ÄBCD-EFGH-JKMNP", ""]
        var typed: [[String: Any]] = try accepted.map {
            ["input_text": $0, "canonical_text": String(decoding: try IdentityExport.passwordBytes($0, kind: .generated), as: UTF8.self)]
        }
        for input in refused {
            expectEqual(errorKind { _ = try IdentityExport.passwordBytes(input, kind: .generated) }, .invalidArgument, input)
            typed.append(["input_text": input, "error_text": "invalid_argument"])
        }

        var exports: [[String: Any]] = []
        var first: (blob: [UInt8], password: String, key: [UInt8], header: [UInt8], contents: [UInt8])? = nil
        let cases: [(label: String, name: String, password: String, typed: String, kind: IdentityExport.PasswordKind)] = [
            ("export-alice", "Alice", passwords[2]["password_text"] as! String,
                (passwords[2]["password_text"] as! String).lowercased().replacingOccurrences(of: "-", with: " "), .generated),
            ("export-zoe", "Zoë Ørsted", "correct horse battery", "correct horse battery", .chosen),
        ]
        for (i, c) in cases.enumerated() {
            let (identity, idJSON, seed, contactsKey) = try transferIdentity(c.label, name: c.name)
            let exportSeed = fixed("itsme-vector-export-random-\(i + 1)")
            var mirror = DeterministicRandom(seed: exportSeed)
            let salt = mirror.bytes(16), nonce = mirror.bytes(12)
            var rng = DeterministicRandom(seed: exportSeed)
            let blob = try IdentityExport.export(
                identity, pin: Self.vectorPIN, now: now, password: c.password, kind: c.kind, random: &rng)
            // The documented formulas, byte for byte.
            let passwordBytes = try IdentityExport.passwordBytes(c.password, kind: c.kind)
            let header = Array("ITSMEXP".utf8) + [1, 1, 0, 0, 0, 3, 0, 4, 0, 0, c.kind.rawValue] + salt + nonce
            let key = try Argon2id.deriveKey(password: passwordBytes, salt: salt, parameters: .moderate).unsafeExportedArray()
            let plain = contents(seed: seed, contactsKey: contactsKey, name: c.name, fingerprint: identity.fingerprint)
            let sealed = try AEAD.seal(.aes256GCM, key: key, nonce: nonce, plaintext: plain, aad: header)
            expectEqual(blob, header + sealed)
            let text = IdentityExport.text(blob)
            let opened = try IdentityExport.open(
                try IdentityExport.blob(text: text), password: c.typed, limiter: AttemptLimiter(store: MemorySecretStore(), purpose: "v"),
                now: now)
            expectEqual(opened.fingerprint, identity.fingerprint)
            expectEqual(opened.name, c.name)
            var entry = idJSON
            entry.merge([
                "case_text": c.kind == .generated ? "generated password" : "chosen password",
                "export_random_seed": hex(exportSeed), "password_text": c.password, "typed_text": c.typed,
                "password_kind": Int(c.kind.rawValue), "password_bytes": hex(passwordBytes), "passes": 3, "memory_kib": 262144,
                "salt": hex(salt), "nonce": hex(nonce), "header": hex(header), "key": hex(key), "contents": hex(plain),
                "export": hex(blob), "text": text,
            ]) { $1 }
            exports.append(entry)
            if first == nil { first = (blob, c.password, key, header, plain) }
        }

        // With the contacts (format version 2): a file, no text form.
        var withContacts: [[String: Any]] = []
        var firstWith: (blob: [UInt8], password: String, key: [UInt8], header: [UInt8], contents: [UInt8])? = nil
        for (i, size) in [200, 1_000].enumerated() {
            let label = "export-contacts-\(i + 1)"
            let (identity, idJSON, seed, contactsKey) = try transferIdentity(label, name: i == 0 ? "Alice" : "Zoë Ørsted")
            let store = syntheticStore(label, count: size)
            let exportSeed = fixed("itsme-vector-export-random-contacts-\(i + 1)")
            var mirror = DeterministicRandom(seed: exportSeed)
            let salt = mirror.bytes(16), nonce = mirror.bytes(12)
            var rng = DeterministicRandom(seed: exportSeed)
            let password = passwords[2]["password_text"] as! String
            let blob = try IdentityExport.export(
                identity, pin: Self.vectorPIN, now: now, password: password, kind: .generated, contactStore: store, random: &rng)
            let passwordBytes = try IdentityExport.passwordBytes(password, kind: .generated)
            let header = Array("ITSMEXP".utf8) + [2, 1, 0, 0, 0, 3, 0, 4, 0, 0, 1] + salt + nonce
            let key = try Argon2id.deriveKey(password: passwordBytes, salt: salt, parameters: .moderate).unsafeExportedArray()
            let plain = contents(seed: seed, contactsKey: contactsKey, name: identity.name, fingerprint: identity.fingerprint)
            let sealed = try AEAD.seal(.aes256GCM, key: key, nonce: nonce, plaintext: plain + store, aad: header)
            expectEqual(blob, header + sealed)
            let opened = try IdentityExport.open(
                blob, password: password, limiter: AttemptLimiter(store: MemorySecretStore(), purpose: "v"), now: now)
            expectEqual(opened.contactStore, store)
            var entry = idJSON
            entry.merge([
                "case_text": "with a contact store of \(size) bytes", "export_random_seed": hex(exportSeed), "password_text": password,
                "typed_text": password, "password_kind": 1, "password_bytes": hex(passwordBytes), "passes": 3, "memory_kib": 262144,
                "salt": hex(salt), "nonce": hex(nonce), "header": hex(header), "key": hex(key), "contents": hex(plain),
                "store": hex(store), "export": hex(blob),
            ]) { $1 }
            withContacts.append(entry)
            if firstWith == nil { firstWith = (blob, password, key, header, plain) }
        }

        // Rejections, each against the first export.
        let f = first!
        let g = firstWith!
        func resealed(_ header: [UInt8], _ plaintext: [UInt8]) throws -> [UInt8] {
            header + (try AEAD.seal(.aes256GCM, key: g.key, nonce: Array(header.suffix(12)), plaintext: plaintext, aad: header))
        }
        func patched(_ at: Int, _ bytes: [UInt8]) -> [UInt8] {
            var b = f.blob
            b.replaceSubrange(at..<at + bytes.count, with: bytes)
            return b
        }
        let forged = Array(f.contents.dropLast(16)) + Array("0000000000000000".utf8)
        let wrongFingerprint = f.header
            + (try AEAD.seal(.aes256GCM, key: f.key, nonce: Array(f.header.suffix(12)), plaintext: forged, aad: f.header))
        var tamperedBody = f.blob
        tamperedBody[tamperedBody.count - 1] ^= 0x01
        let blobCases: [(String, [UInt8], String, String)] = [
            ("truncated", Array(f.blob.prefix(60)), f.password, "malformed_message"),
            ("empty", [], f.password, "malformed_message"),
            ("not an export (magic)", patched(0, [0x49 ^ 1]), f.password, "malformed_message"),
            ("format version 3", patched(7, [3]), f.password, "invalid_argument"),
            ("an identity-only export relabelled format version 2 (the header is authenticated)", patched(7, [2]), f.password,
                "authentication_failed"),
            ("format version 2 with no contact store", try resealed(g.header, g.contents), g.password, "corrupt_data"),
            ("format version 2 whose store is not a SQLite file", try resealed(g.header, g.contents + Array("not a database".utf8)),
                g.password, "corrupt_data"),
            ("format version 2 cut to the size of an identity-only export of a 128-byte name",
                Array(g.blob.prefix(IdentityExport.blobCount(nameByteCount: 128))), g.password, "authentication_failed"),
            ("format version 2, 145 bytes (the shortest is 146)", Array(g.blob.prefix(145)), g.password, "malformed_message"),
            ("format version 2 with the last byte of its store altered",
                { var b = g.blob; b[b.count - AEAD.tagCount - 1] ^= 0x01; return b }(), g.password, "authentication_failed"),
            ("format version 2 with the last byte of its tag altered",
                { var b = g.blob; b[b.count - 1] ^= 0x01; return b }(), g.password, "authentication_failed"),
            ("unknown key derivation", patched(8, [2]), f.password, "invalid_argument"),
            ("2 passes", patched(9, [0, 0, 0, 2]), f.password, "invalid_argument"),
            ("11 passes", patched(9, [0, 0, 0, 11]), f.password, "invalid_argument"),
            ("128 MiB", patched(13, [0, 2, 0, 0]), f.password, "invalid_argument"),
            ("2 GiB", patched(13, [0, 0x20, 0, 0]), f.password, "invalid_argument"),
            ("4 GiB - 1 KiB", patched(13, [0xff, 0xff, 0xff, 0xff]), f.password, "invalid_argument"),
            ("unknown password kind", patched(17, [3]), f.password, "invalid_argument"),
            ("password not of the header's kind", f.blob, "ABCD-EFGH-JKMNO", "invalid_argument"),
            ("wrong password", f.blob, "ABCD-EFGH-JKMNP", "authentication_failed"),
            ("salt altered", patched(18, [f.blob[18] ^ 0x80]), f.password, "authentication_failed"),
            ("password kind altered", patched(17, [2]), "a chosen password", "authentication_failed"),
            ("ciphertext altered", tamperedBody, f.password, "authentication_failed"),
            ("fingerprint does not match the key", wrongFingerprint, f.password, "corrupt_data"),
        ]
        var rejections: [[String: Any]] = []
        for (name, blob, password, error) in blobCases {
            let limiter = AttemptLimiter(store: MemorySecretStore(), purpose: "v")
            let kind = errorKind { _ = try IdentityExport.open(blob, password: password, limiter: limiter, now: self.now) }
            expectEqual(kind.map(Self.errorName), error, name)
            expectEqual(try limiter.status(now: now).failures, error == "authentication_failed" ? 1 : 0, name)
            rejections.append(["case_text": name, "export": hex(blob), "password_text": password, "error_text": error])
        }
        let v3 = Base64.encode(fixed("itsme-vector-source-v3-nonce").prefix(12) + fixed("a") + fixed("b"), .standardPadded)
        let textCases: [(String, String, String)] = [
            ("the source's version 3 export (base64 of a sealed box)", v3, "invalid_argument"),
            ("the source's version 3 payload (JSON)", #"{"version": 3, "name": "Alice", "privateKey": "AAAA"}"#, "invalid_argument"),
            ("another text version", "ITSMEXP2:" + Base64.encode(f.blob, .urlUnpadded), "invalid_argument"),
            ("a text holding an export of format version 2 (which has no text form)",
                "ITSMEXP1:" + Base64.encode(g.blob, .urlUnpadded), "invalid_argument"),
            ("damaged base64url", "ITSMEXP1:" + Base64.encode(f.blob, .urlUnpadded) + "=", "malformed_message"),
            ("not an export", "hello", "malformed_message"),
            ("text of nothing", "ITSMEXP1:", "malformed_message"),
        ]
        for (name, text, error) in textCases {
            let limiter = AttemptLimiter(store: MemorySecretStore(), purpose: "v")
            let kind = errorKind {
                _ = try IdentityExport.open(try IdentityExport.blob(text: text), password: f.password, limiter: limiter, now: self.now)
            }
            expectEqual(kind.map(Self.errorName), error, name)
            rejections.append(["case_text": name, "text": text, "password_text": f.password, "error_text": error])
        }
        return [
            "passwords": passwords, "typed": typed, "exports": exports, "exports_with_contacts": withContacts, "rejections": rejections,
        ]
    }

    /// A stand-in for a contact store file: SQLite's 16-byte header, then
    /// bytes drawn from `label` (the protocol carries the file as it is).
    func syntheticStore(_ label: String, count: Int) -> [UInt8] {
        var rng = DeterministicRandom(seed: fixed("itsme-vector-store-" + label))
        return Array("SQLite format 3".utf8) + [0] + rng.bytes(count - 16)
    }

    static func errorName(_ kind: ItsMeError.Kind) -> String {
        kind.symbol.replacingOccurrences(of: "ITSME_E_", with: "").lowercased()
    }

    /// One transfer, checked against the documented formulas as it runs:
    /// its JSON and what the rejections are built from.
    struct TransferRun {
        var json: [String: Any]
        let offer: [UInt8], transferID: [UInt8], R: [UInt8], S: [UInt8]
        let keyMessage: [UInt8], identityMessage: [UInt8], storeMessages: [[UInt8]]
        let key: [UInt8], th: [UInt8], contents: [UInt8]
        let identity: Identity
        let receiverSeed: [UInt8], senderSeed: [UInt8]
    }

    func transferRun(_ label: String, store: [UInt8]?) throws -> TransferRun {
        let (identity, senderJSON, seed, contactsKey) = try transferIdentity("transfer-alice" + label, name: "Alice")
        let receiverSeed = fixed("itsme-vector-transfer-receiver" + label), senderSeed = fixed("itsme-vector-transfer-sender" + label)
        var rm = DeterministicRandom(seed: receiverSeed), sm = DeterministicRandom(seed: senderSeed)
        let r = rm.bytes(32), transferID = rm.bytes(16), s = sm.bytes(32)
        func pub(_ sk: [UInt8]) -> [UInt8] { sk.withBytes { X25519.publicKey(secretKey: $0) } }
        let (R, S) = (pub(r), pub(s))

        var rrng = DeterministicRandom(seed: receiverSeed), srng = DeterministicRandom(seed: senderSeed)
        let receiver = try DeviceTransfer(receiverAt: now, random: &rrng)
        let sender = try DeviceTransfer(sending: identity, pin: Self.vectorPIN, offer: receiver.offerText, now: now, random: &srng)
        let offer = [2] + transferID + R
        expectEqual(receiver.offerText, "ITSMETR2:" + Base64.encode(offer, .urlUnpadded))
        let room = hex(Array(SHA256.hash(LV.cat(LV.b("itsme-transfer-room-v1"), transferID)).prefix(16)))
        expectEqual(receiver.roomName, room)
        expectEqual(sender.roomName, room)
        let keyMessage = try unwrap(sender.takeOutgoing())
        expectEqual(keyMessage, [2, 1] + S)
        try receiver.receive(keyMessage, now: now)

        let shared = try X25519.sharedSecret(secretKey: try SecretBytes(copying: r), peerPublicKey: S).unsafeExportedArray()
        let thInput = LV.cat(LV.b("itsme-transfer-v2"), transferID, R, S)
        let th = SHA256.hash(thInput)
        let tseed = try HKDF.derive(ikm: shared, salt: transferID, info: LV.b("itsme-transfer-seed-v2"), count: 32).unsafeExportedArray()
        let sas = try sasValue(tseed, th)
        expectEqual(receiver.sas?.value, sas.value)
        expectEqual(sender.sas?.value, sas.value)
        let key = try HKDF.derive(ikm: tseed, salt: [UInt8](), info: LV.cat(LV.b("itsme-transfer-key-v2"), th), count: 32)
            .unsafeExportedArray()
        let plain = contents(seed: seed, contactsKey: contactsKey, name: "Alice", fingerprint: identity.fingerprint)
        let total = store?.count ?? 0
        let identityPlain = plain + Self.u32(total)
        if let store { try sender.include(contactStore: store) }
        try sender.confirm(now: now)
        let identityMessage = try unwrap(sender.takeOutgoing())
        expectEqual(
            identityMessage,
            [2, 2] + (try AEAD.seal(.aes256GCM, key: key, nonce: [UInt8](repeating: 0, count: 12), plaintext: identityPlain, aad: [2, 2] + th)))
        var storeMessages: [[UInt8]] = []
        while let m = sender.takeOutgoing() { storeMessages.append(m) }
        // Chunks of 32,768 bytes, chunk i under nonce i + 1 and u32(i) in its associated data.
        var expected: [[UInt8]] = []
        var from = 0, index = 0
        while from < total {
            let chunk = Array(store![from..<min(total, from + 32_768)])
            let nonce = [UInt8](repeating: 0, count: 8) + Self.u32(index + 1)
            expected.append([2, 3] + (try AEAD.seal(.aes256GCM, key: key, nonce: nonce, plaintext: chunk, aad: [2, 3] + th + Self.u32(index))))
            from += 32_768
            index += 1
        }
        expectEqual(storeMessages, expected)
        try receiver.confirm(now: now)
        try receiver.receive(identityMessage, now: now)
        for m in storeMessages { try receiver.receive(m, now: now) }
        expectEqual(receiver.state, .done)
        let taken = try receiver.takeIdentity()
        expectEqual(taken.fingerprint, identity.fingerprint)
        expectEqual(taken.contactStore, store)

        let json: [String: Any] = [
            "case_text": store == nil ? "without contacts" : "with a contact store of \(total) bytes",
            "receiver_random_seed": hex(receiverSeed), "receiver_ephemeral_secret": hex(r), "receiver_public": hex(R),
            "transfer_id": hex(transferID), "offer": hex(offer), "offer_text": receiver.offerText, "room_text": room,
            "sender": senderJSON, "sender_random_seed": hex(senderSeed), "sender_ephemeral_secret": hex(s), "sender_public": hex(S),
            "key_message": hex(keyMessage), "shared": hex(shared), "transcript_input": hex(thInput), "transcript_hash": hex(th),
            "seed": hex(tseed), "sas_value": Int(sas.value), "sas_text": ShortCode(value: sas.value)!.text, "key": hex(key),
            "contents": hex(plain), "store": hex(store ?? []), "identity_plaintext": hex(identityPlain),
            "identity_message": hex(identityMessage), "store_messages": storeMessages.map(hex),
        ]
        return TransferRun(
            json: json, offer: offer, transferID: transferID, R: R, S: S, keyMessage: keyMessage, identityMessage: identityMessage,
            storeMessages: storeMessages, key: key, th: th, contents: plain, identity: identity, receiverSeed: receiverSeed,
            senderSeed: senderSeed)
    }

    static func u32(_ n: Int) -> [UInt8] { withUnsafeBytes(of: UInt32(n).bigEndian, Array.init) }

    func transferVectors() throws -> [String: Any] {
        // The first transfer carries a contact store of three chunks (the
        // last one short); the second none. Rejections play the first.
        let first = try transferRun("", store: syntheticStore("transfer", count: 2 * 32_768 + 4_000))
        let second = try transferRun("-no-contacts", store: nil)
        let (identity, keyMessage, identityMessage) = (first.identity, first.keyMessage, first.identityMessage)
        let (receiverSeed, senderSeed, offer, transferID, R, S) =
            (first.receiverSeed, first.senderSeed, first.offer, first.transferID, first.R, first.S)
        let chunks = first.storeMessages
        /// An identity message sealed under the first transfer's key.
        func sealedIdentity(_ plaintext: [UInt8]) throws -> [UInt8] {
            [2, 2] + (try AEAD.seal(.aes256GCM, key: first.key, nonce: [UInt8](repeating: 0, count: 12), plaintext: plaintext, aad: [2, 2] + first.th))
        }
        let tooLarge = try sealedIdentity(first.contents + Self.u32(64 << 20 + 1))
        let smallStore = try sealedIdentity(first.contents + Self.u32(14))
        let notSQLite =
            [2, 3]
            + (try AEAD.seal(
                .aes256GCM, key: first.key, nonce: [UInt8](repeating: 0, count: 8) + Self.u32(1), plaintext: Array("not a database".utf8),
                aad: [2, 3] + first.th + Self.u32(0)))
        // The transfer without contacts has no chunk: one of its key's own, sealed as chunk 2.
        let foreignChunk =
            [2, 3]
            + (try AEAD.seal(
                .aes256GCM, key: second.key, nonce: [UInt8](repeating: 0, count: 8) + Self.u32(3),
                plaintext: [UInt8](repeating: 7, count: 4_000), aad: [2, 3] + second.th + Self.u32(2)))
        var lastPadded = chunks[2]
        lastPadded.append(0)
        var chunkAltered = chunks[1]
        chunkAltered[100] ^= 0x01

        // Rejections, each against a fresh receiver of this transfer.
        enum Step { case receive([UInt8]), confirm }
        var tampered = identityMessage
        tampered[tampered.count - 1] ^= 0x01
        let done: [Step] = [.receive(keyMessage), .confirm, .receive(identityMessage)] + chunks.map { .receive($0) }
        let cases: [(String, [Step], String)] = [
            ("identity before the key", [.receive(identityMessage)], "malformed_message"),
            ("key message too short", [.receive(Array(keyMessage.dropLast()))], "malformed_message"),
            ("key message too long", [.receive(keyMessage + [0])], "malformed_message"),
            ("message version 1 (the transfer of the identity only, no longer spoken)", [.receive([1] + keyMessage.dropFirst())],
                "malformed_message"),
            ("message version 3", [.receive([3] + keyMessage.dropFirst())], "malformed_message"),
            ("unknown message type", [.receive([2, 4] + S)], "malformed_message"),
            ("empty message", [.receive([])], "malformed_message"),
            ("the receiver's own key sent back", [.receive([2, 1] + R)], "invalid_key"),
            ("a low-order key (all zeros)", [.receive([2, 1] + [UInt8](repeating: 0, count: 32))], "invalid_key"),
            ("the key twice", [.receive(keyMessage), .receive(keyMessage)], "malformed_message"),
            ("confirm before the key", [.confirm], "invalid_state"),
            ("identity altered", [.receive(keyMessage), .confirm, .receive(tampered)], "authentication_failed"),
            ("identity altered, arriving before the confirmation", [.receive(keyMessage), .receive(tampered), .confirm],
                "authentication_failed"),
            ("identity message too short (104 bytes)", [.receive(keyMessage), .confirm, .receive(Array(identityMessage.prefix(104)))],
                "malformed_message"),
            ("identity message too long (233 bytes), arriving before the confirmation",
                [.receive(keyMessage), .receive(identityMessage + [UInt8](repeating: 0, count: 233 - identityMessage.count))],
                "malformed_message"),
            ("identity twice before the confirmation", [.receive(keyMessage), .receive(identityMessage), .receive(identityMessage)],
                "malformed_message"),
            ("identity twice, the second while the store comes",
                [.receive(keyMessage), .confirm, .receive(identityMessage), .receive(identityMessage)], "malformed_message"),
            ("a message after the transfer is done", done + [.receive(chunks[0])], "invalid_state"),
            // Every message of 17.3 at and beyond the bounds of its length.
            ("key message of its header only (2 bytes)", [.receive([2, 1])], "malformed_message"),
            ("identity message of its header only (2 bytes)", [.receive(keyMessage), .confirm, .receive([2, 2])], "malformed_message"),
            ("identity message too short (104 bytes), arriving before the confirmation",
                [.receive(keyMessage), .receive(Array(identityMessage.prefix(104)))], "malformed_message"),
            ("identity message too long (233 bytes)",
                [.receive(keyMessage), .confirm, .receive(identityMessage + [UInt8](repeating: 0, count: 233 - identityMessage.count))],
                "malformed_message"),
            ("identity message cut to 105 bytes (the shortest length: it is opened, and fails)",
                [.receive(keyMessage), .confirm, .receive(Array(identityMessage.prefix(105)))], "authentication_failed"),
            ("identity message padded to 232 bytes (the longest length), arriving before the confirmation",
                [.receive(keyMessage), .receive(identityMessage + [UInt8](repeating: 0, count: 232 - identityMessage.count)), .confirm],
                "authentication_failed"),
            // The contact store's messages.
            ("a store message before the identity", [.receive(keyMessage), .confirm, .receive(chunks[0])], "malformed_message"),
            ("a store message before the identity, before the confirmation", [.receive(keyMessage), .receive(chunks[0])],
                "malformed_message"),
            ("store message of its header only (2 bytes)", [.receive(keyMessage), .confirm, .receive(identityMessage), .receive([2, 3])],
                "malformed_message"),
            ("store message too long (32,787 bytes)",
                [.receive(keyMessage), .confirm, .receive(identityMessage), .receive(chunks[0] + [0])], "malformed_message"),
            ("the last chunk one byte longer than the store's length leaves",
                [.receive(keyMessage), .confirm, .receive(identityMessage), .receive(chunks[0]), .receive(chunks[1]), .receive(lastPadded)],
                "malformed_message"),
            ("the chunks in another order", [.receive(keyMessage), .confirm, .receive(identityMessage), .receive(chunks[1])],
                "authentication_failed"),
            ("a chunk twice", [.receive(keyMessage), .confirm, .receive(identityMessage), .receive(chunks[0]), .receive(chunks[0])],
                "authentication_failed"),
            ("a chunk altered", [.receive(keyMessage), .confirm, .receive(identityMessage), .receive(chunks[0]), .receive(chunkAltered)],
                "authentication_failed"),
            ("a chunk altered, arriving before the confirmation",
                [.receive(keyMessage), .receive(identityMessage), .receive(chunks[0]), .receive(chunkAltered), .confirm],
                "authentication_failed"),
            ("a last chunk sealed under another transfer's key",
                [.receive(keyMessage), .confirm, .receive(identityMessage), .receive(chunks[0]), .receive(chunks[1]), .receive(foreignChunk)],
                "authentication_failed"),
            ("an identity announcing a store over 64 MiB", [.receive(keyMessage), .confirm, .receive(tooLarge)], "corrupt_data"),
            ("a store that is not a SQLite file", [.receive(keyMessage), .confirm, .receive(smallStore), .receive(notSQLite)],
                "corrupt_data"),
        ]
        var rejections: [[String: Any]] = []
        for (name, steps, error) in cases {
            var rng = DeterministicRandom(seed: receiverSeed)
            let fresh = try DeviceTransfer(receiverAt: now, random: &rng)
            var failed: String? = nil
            for (i, step) in steps.enumerated() {
                let kind = errorKind {
                    switch step {
                    case .receive(let m): try fresh.receive(m, now: self.now)
                    case .confirm: try fresh.confirm(now: self.now)
                    }
                }
                if i < steps.count - 1 { expectNil(kind, "\(name): step \(i)") } else { failed = kind.map(Self.errorName) }
            }
            expectEqual(failed, error, name)
            rejections.append([
                "case_text": name, "error_text": error,
                "steps": steps.map { step -> [String: Any] in
                    switch step {
                    case .receive(let m): return ["receive": hex(m)]
                    case .confirm: return ["confirm": true]
                    }
                },
            ])
        }
        // Offers the sender refuses (17.3: version 1, 16 + 32 bytes, a key
        // that is not of low order), each read by the transfer's sender.
        func offerText(_ bytes: [UInt8]) -> String { DeviceTransfer.offerPrefix + Base64.encode(bytes, .urlUnpadded) }
        let offerCases: [(String, String, String)] = [
            ("offer cut to 48 bytes", offerText(Array(offer.dropLast())), "malformed_message"),
            ("offer padded to 50 bytes", offerText(offer + [0]), "malformed_message"),
            ("offer of version 1 (under the prefix of version 2)", offerText([1] + offer.dropFirst()), "malformed_message"),
            ("offer of its version byte only", offerText([2]), "malformed_message"),
            ("offer text of version 1 (ITSMETR1:), the transfer of the identity only",
                "ITSMETR1:" + Base64.encode([1] + offer.dropFirst(), .urlUnpadded), "malformed_message"),
            ("offer text of another version (ITSMETR3:)", "ITSMETR3:" + Base64.encode(offer, .urlUnpadded), "malformed_message"),
            ("offer with a low-order key (all zeros)", offerText([2] + transferID + [UInt8](repeating: 0, count: 32)), "invalid_key"),
        ]
        var offerRejections: [[String: Any]] = []
        for (name, text, error) in offerCases {
            var rng = DeterministicRandom(seed: senderSeed)
            let kind = errorKind { _ = try DeviceTransfer(sending: identity, pin: Self.vectorPIN, offer: text, now: self.now, random: &rng) }
            expectEqual(kind.map(Self.errorName), error, name)
            offerRejections.append(["case_text": name, "offer_text": text, "error_text": error])
        }
        return ["transfers": [first.json, second.json], "rejections": rejections, "offer_rejections": offerRejections]
    }
}

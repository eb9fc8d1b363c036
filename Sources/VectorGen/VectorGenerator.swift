import Foundation
import ItsMeKit
import ItsMePrimitives

/// Builds the test vectors of docs/PROTOCOL.md (Tests/ProtocolVectors/*.json)
/// from fixed inputs, and checks as it goes that the library's state
/// machines produce exactly the bytes the documented formulas give. A
/// disagreement is recorded in `failures`; the program then writes nothing.
final class VectorGenerator {
    let now: Int64 = 1_800_000_000
    /// The checks that failed while the vectors were built, each with its line.
    private(set) var failures: [String] = []

    /// Where the parties' contact stores are: a temporary directory,
    /// removed with the generator.
    let storeDirectory: String

    init() throws {
        try Sodium.initialize()
        storeDirectory = NSTemporaryDirectory() + "itsme-vectors-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: storeDirectory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: storeDirectory) }

    func fail(_ message: String, _ line: UInt) { failures.append("line \(line): \(message)") }

    // MARK: Helpers

    func hex(_ b: [UInt8]) -> String { b.map { String(format: "%02x", $0) }.joined() }
    func fixed(_ label: String) -> [UInt8] { SHA256.hash(Array(label.utf8)) }

    /// A party of an exchange: what the deterministic source draws for it,
    /// and its identity and exchange built from the same stream.
    struct Party {
        let randomSeed: [UInt8]
        let identitySeed: [UInt8]
        let ephemeralSecret: [UInt8]
        let deviceSecret: [UInt8]
        let identity: Identity
        /// Its contact store (a new file for each party).
        let store: ContactStore
        let name: String
        var publicKey: [UInt8] { identity.publicKey }
        var fingerprint: String { identity.fingerprint }
        var ephemeralPublic: [UInt8] {
            ephemeralSecret.withBytes { X25519.publicKey(secretKey: $0) }
        }
        func sign(_ m: [UInt8]) throws -> [UInt8] {
            try Ed25519.sign(m, secretKey: try Ed25519.keyPair(seed: identitySeed).secretKey)
        }
    }

    /// Draws as the library does: identity (Ed25519 seed, contacts key) in
    /// two calls, then the exchange's ephemeral secret and device secret in
    /// one call of 48 bytes. Returns the party and the random source,
    /// positioned where the exchange starts drawing.
    func party(_ label: String, name: String) throws -> (Party, DeterministicRandom) {
        let seed = fixed("itsme-vector-random-" + label)
        var mirror = DeterministicRandom(seed: seed)
        let identitySeed = mirror.bytes(32)
        _ = mirror.bytes(32)
        let drawn = mirror.bytes(48)
        var rng = DeterministicRandom(seed: seed)
        let identity = try Identity.create(store: MemorySecretStore(), name: name, random: &rng)
        let store = try ContactStore(path: storeDirectory + "/\(UUID().uuidString).db", identity: identity)
        return (
            Party(
                randomSeed: seed, identitySeed: identitySeed, ephemeralSecret: Array(drawn[0..<32]),
                deviceSecret: Array(drawn[32..<48]), identity: identity, store: store, name: name), rng
        )
    }

    func seed(_ a: Party, _ b: Party) throws -> (shared: [UInt8], salt: String, seed: [UInt8]) {
        let shared = try X25519.sharedSecret(secretKey: try SecretBytes(copying: a.ephemeralSecret), peerPublicKey: b.ephemeralPublic)
            .unsafeExportedArray()
        let salt = String(decoding: ExchangeProtocol.seedSalt(a.fingerprint, b.fingerprint), as: UTF8.self)
        let seed = try HKDF.derive(ikm: shared, salt: Array(salt.utf8), info: LV.b("itsme-verification-seed-v1"), count: 32)
            .unsafeExportedArray()
        return (shared, salt, seed)
    }

    func sasValue(_ seed: [UInt8], _ th: [UInt8]) throws -> (info: [UInt8], okm: [UInt8], value: UInt32) {
        let info = LV.cat(LV.b("itsme-sas-v1"), th)
        let okm = try HKDF.derive(ikm: seed, salt: [UInt8](), info: info, count: 8).unsafeExportedArray()
        let v = okm.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 260_000
        return (info, okm, UInt32(v))
    }

    // MARK: Sections

    func encodingVectors() -> [String: Any] {
        let lv: [[[UInt8]]] = [
            [Array("1234".utf8), Array("5".utf8), [], Array("678".utf8)], [], [[]], [Array(0..<127)], [Array(0..<128)],
            [Array(repeating: 0xab, count: 300), [1]],
        ]
        let urlValid: [[UInt8]] = [[], [0], [0xff], [0xfb, 0xff], Array("hello".utf8), Array(0..<32)]
        let stdValid: [[UInt8]] = [[], [0], [1, 2], [0xfb, 0xff, 0xbf], Array(0..<32)]
        let formats: [UInt32] = [0, 9999, 10_000, 40_042, 130_000, 259_999]
        let parseValid = ["ECHO 0042", "echo-0042", "  Echo 0042  ", "november 0000", "zulu 9999", "Alfa 0001"]
        let parseInvalid = [
            "ECHO 42", "ECHO  0042", "ECHO_0042", "ECHO 00420", "ECH 0042", "ECHO 004a", "", "ECHO", "ÉCHO 0042",
            "ECHO -0042", "ECHO\t0042", "ALPHA 0042", "ECHO 0042 X",
        ]
        return [
            "lv_cat": lv.map { ["args": $0.map(hex), "output": hex(LV.cat($0))] },
            "base64url": [
                "valid": urlValid.map { ["bytes": hex($0), "text": Base64.encode($0, .urlUnpadded)] },
                "invalid": ["A", "AB=", "AB==", "AR", "ab+/", "ab c", "ab\n", "ab/d", "AAAA=", "QQ=="],
            ],
            "base64": [
                "valid": stdValid.map { ["bytes": hex($0), "text": Base64.encode($0, .standardPadded)] },
                "invalid": ["AA", "AA=", "AB==", "A===", "AA==AA==", "-_8=", " AA==", "AQI", "AQJ="],
            ],
            "names": nameVectors(),
            "short_code": [
                "format": formats.map { ["value": Int($0), "text": ShortCode(value: $0)!.text] },
                "parse_valid": parseValid.map { ["input_text": $0, "value": Int(ShortCode(parsing: $0)!.value)] },
                "parse_invalid": parseInvalid,
            ],
        ]
    }

    /// Names (section 1): accepted ones, and one name for each refused code
    /// point, checked against the library's rule as they are written.
    func nameVectors() -> [String: Any] {
        let valid = [
            "Alice", "Zoë", "Zoe\u{0301}", "محمد", "नमस्ते", "می\u{200C}خواهم", "क\u{94D}\u{200D}ष",
            "\u{1F469}\u{200D}\u{1F4BB}", "\u{1F3F3}\u{FE0F}\u{200D}\u{1F308}", "a\u{200A}b", "a\u{200E}b", "a\u{2065}b",
            "a\u{206A}b", "\u{A0}Ann", String(repeating: "x", count: 128), String(repeating: "é", count: 64),
        ]
        for name in valid { expectTrue(DisplayName.isValid(name), name) }
        var invalid: [[String: Any]] = []
        for range in DisplayName.refusedScalars {
            for value in range {
                let text = "A" + String(Unicode.Scalar(value)!) + "B"
                expectFalse(DisplayName.isValid(text))
                invalid.append(["text": text, "code_point": Int(value)])
            }
        }
        return ["valid": valid, "invalid": invalid]
    }

    func partyJSON(_ p: Party) -> [String: Any] {
        [
            "random_seed": hex(p.randomSeed), "identity_seed": hex(p.identitySeed), "identity_public": hex(p.publicKey),
            "fingerprint_text": p.fingerprint, "name_text": p.name, "ephemeral_secret": hex(p.ephemeralSecret),
            "ephemeral_public": hex(p.ephemeralPublic), "device_secret": hex(p.deviceSecret),
        ]
    }

    func qrPayload(_ p: Party) throws -> (body: [UInt8], signed: [UInt8], signature: [UInt8], payload: [UInt8]) {
        let name = Array(p.name.utf8)
        let body = [1] + p.publicKey + Array(SHA256.hash(p.publicKey).prefix(8)) + p.ephemeralPublic + p.deviceSecret
            + [UInt8(name.count)] + name
        let signed = LV.cat(LV.b("itsme-qr-payload-v1"), body)
        let signature = try p.sign(signed)
        return (body, signed, signature, body + signature)
    }

    func qrVectors() throws -> [String: Any] {
        var exchanges: [[String: Any]] = []
        var rejections: [[String: Any]] = []
        // The third: names in Arabic script and an emoji family joined by U+200D (ZWJ).
        for (i, names) in [
            ("Alice", "Bob"), ("Zoë | \\ Ünïcode 名前", String(repeating: "n", count: 128)),
            ("محمد", "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}\u{200D}\u{1F466}"),
        ].enumerated() {
            var (a, rngA) = try party("qr-\(i)-a", name: names.0)
            var (b, rngB) = try party("qr-\(i)-b", name: names.1)
            let exA = try Exchange.qr(identity: a.identity, store: a.store, now: now, random: &rngA)
            let exB = try Exchange.qr(identity: b.identity, store: b.store, now: now, random: &rngB)
            let pa = try qrPayload(a), pb = try qrPayload(b)
            let textA = ExchangeProtocol.qrPrefix + Base64.encode(pa.payload, .urlUnpadded)
            let textB = ExchangeProtocol.qrPrefix + Base64.encode(pb.payload, .urlUnpadded)
            expectEqual(exA.outgoingText, textA)
            expectEqual(exB.outgoingText, textB)
            try exA.receive(Array(textB.utf8), now: now)
            try exB.receive(Array(textA.utf8), now: now)
            let s = try seed(a, b)
            expectEqual(try seed(b, a).seed, s.seed)
            let (low, high) = a.publicKey.lexicographicallyPrecedes(b.publicKey) ? (pa.payload, pb.payload) : (pb.payload, pa.payload)
            let thInput = LV.cat(LV.b("itsme-qr-transcript-v1"), low, high)
            let th = SHA256.hash(thInput)
            let sas = try sasValue(s.seed, th)
            expectEqual(exA.sas?.value, sas.value)
            expectEqual(exB.sas?.value, sas.value)
            func pj(_ p: Party, _ x: (body: [UInt8], signed: [UInt8], signature: [UInt8], payload: [UInt8]), _ text: String)
                -> [String: Any]
            {
                partyJSON(p).merging([
                    "body": hex(x.body), "signed_message": hex(x.signed), "signature": hex(x.signature),
                    "payload": hex(x.payload), "payload_text": text,
                ]) { $1 }
            }
            exchanges.append([
                "a": pj(a, pa, textA), "b": pj(b, pb, textB), "shared": hex(s.shared), "salt_text": s.salt,
                "seed": hex(s.seed), "transcript_input": hex(thInput), "transcript_hash": hex(th),
                "sas_value": Int(sas.value), "sas_text": ShortCode(value: sas.value)!.text,
            ])
            guard i == 0 else { continue }
            // Payloads every implementation must reject, received by B
            // (or by A for the reflected one).
            func receiver(_ p: Party) -> [String: Any] {
                ["identity_seed": hex(p.identitySeed), "identity_public": hex(p.publicKey), "ephemeral_secret": hex(p.ephemeralSecret)]
            }
            func text(_ payload: [UInt8]) -> String { ExchangeProtocol.qrPrefix + Base64.encode(payload, .urlUnpadded) }
            var cases: [(String, String, Party)] = []
            var x = pa.payload
            x[x.count - 1] ^= 1
            cases.append(("signature byte flipped", text(x), b))
            x = pa.payload
            x[90] ^= 0x20
            cases.append(("name byte flipped", text(x), b))
            x = pa.payload
            x[33] ^= 1
            cases.append(("fingerprint does not match the key", text(x), b))
            x = pa.payload
            x[0] = 2
            cases.append(("unknown version", text(x), b))
            cases.append(("truncated", text(Array(pa.payload.dropLast())), b))
            cases.append(("extended", text(pa.payload + [0]), b))
            x = pa.payload
            x[89] = UInt8(x[89] + 1)
            cases.append(("name length does not match", text(x), b))
            var body = pa.body
            body[41] ^= 1
            cases.append(("ephemeral key changed, signature over the old one", text(body + pa.signature), b))
            let padded = textA + String(repeating: "=", count: (4 - (textA.count - 7) % 4) % 4)
            if padded != textA { cases.append(("padded base64url", padded, b)) }
            cases.append(("standard base64 alphabet", ExchangeProtocol.qrPrefix + Base64.encode(pa.payload, .standardPadded), b))
            cases.append(("lowercase prefix", "itsme1:" + String(textA.dropFirst(7)), b))
            // A paste or a partial read, cut within the text.
            cases.append(("text cut short", String(textA.prefix(100)), b))
            cases.append(("the prefix alone", ExchangeProtocol.qrPrefix, b))
            // A reading run on past the longest payload text of its format
            // (383 and 327 bytes) is refused before decoding: whatever a
            // decoder would make of it (here a payload of version 0, a
            // source text with a name too long), the exchange goes on.
            x = pa.payload + [UInt8](repeating: 0, count: 285 - pa.payload.count)
            x[0] = 0
            cases.append(("a text of 387 bytes, run on past the longest payload", text(x), b))
            cases.append((
                "a source-format text of 328 bytes, run on past the longest",
                "5|" + String(repeating: "x", count: 257) + "|A1B2C3D4E5F60718|" + Base64.encode([UInt8](repeating: 9, count: 32), .standardPadded)
                    + "|123456", b))
            cases.append(("own payload reflected", textA, a))
            let lowParty = try party("qr-lowkey", name: "Low").0
            let lowBody = [1] + lowParty.publicKey + Array(SHA256.hash(lowParty.publicKey).prefix(8)) + [UInt8](repeating: 0, count: 32)
                + lowParty.deviceSecret + [3] + Array("Low".utf8)
            cases.append(
                ("low-order ephemeral key", text(lowBody + (try lowParty.sign(LV.cat(LV.b("itsme-qr-payload-v1"), lowBody)))), b))
            for (what, t, r) in cases {
                // The library rejects each one too; a text that is not a
                // whole payload (invalid_argument) leaves the exchange as it
                // was, every other refusal ends it (section 5.2).
                var rng = DeterministicRandom(seed: fixed("reject"))
                let ex = try Exchange.qr(identity: r.identity, store: r.store, now: now, random: &rng)
                var kind: ItsMeError.Kind?
                do { try ex.receive(Array(t.utf8), now: now) } catch let error as ItsMeError { kind = error.kind }
                let refused = try unwrap(kind, "\(what) was accepted")
                let ends = ex.state == .failed
                expectEqual(ends, refused != .invalidArgument, what)
                rejections.append([
                    "case_text": what, "receiver": receiver(r), "payload_text": t, "error_text": Self.errorName(refused),
                    "ends_exchange": ends,
                ])
            }
        }
        return ["exchanges": exchanges, "rejections": rejections]
    }

    func sourceVectors() throws -> [String: Any] {
        let (b, rngB) = try party("v5-receiver", name: "Bob")
        var rng = rngB
        let ex = try Exchange.qr(identity: b.identity, store: b.store, now: now, random: &rng)
        let peerSecret = fixed("itsme-vector-v5-ephemeral")
        let peerPublic = peerSecret.withBytes { X25519.publicKey(secretKey: $0) }
        let key64 = Base64.encode(peerPublic, .standardPadded)
        let text = "5|Al\\|ice \\\\ Smith|a1b2c3d4e5f60718|\(key64)|123456"
        try ex.receive(Array(text.utf8), now: now)
        expectEqual(ex.state, .imported)
        let shared = try X25519.sharedSecret(secretKey: try SecretBytes(copying: b.ephemeralSecret), peerPublicKey: peerPublic)
            .unsafeExportedArray()
        let salt = String(decoding: ExchangeProtocol.seedSalt(b.fingerprint, "A1B2C3D4E5F60718"), as: UTF8.self)
        let seed = try HKDF.derive(ikm: shared, salt: Array(salt.utf8), info: LV.b("itsme-verification-seed-v1"), count: 32)
        let imports: [[String: Any]] = [[
            "text": text, "name_text": "Al|ice \\ Smith", "fingerprint_text": "A1B2C3D4E5F60718",
            "ephemeral_public": hex(peerPublic), "device_secret_text": "123456",
            "receiver": [
                "random_seed": hex(b.randomSeed), "identity_seed": hex(b.identitySeed), "identity_public": hex(b.publicKey), "fingerprint_text": b.fingerprint,
                "ephemeral_secret": hex(b.ephemeralSecret),
            ],
            "shared": hex(shared), "salt_text": salt, "seed": hex(seed.unsafeExportedArray()),
        ]]
        expectEqual(ex.peer?.name, "Al|ice \\ Smith")
        let bad: [(String, String)] = [
            ("four fields", "5|Alice|A1B2C3D4E5F60718|\(key64)"),
            ("six fields", "5|Alice|A1B2C3D4E5F60718|\(key64)|123456|x"),
            ("wrong version", "4|Alice|A1B2C3D4E5F60718|\(key64)|123456"),
            ("unknown escape", "5|Al\\ice|A1B2C3D4E5F60718|\(key64)|123456"),
            ("escape outside the name", "5|Alice|A1B2C3D4E5F6071\\8|\(key64)|123456"),
            ("trailing backslash", "5|Alice|A1B2C3D4E5F60718|\(key64)|123456\\"),
            ("source example fingerprint (not hex)", "5|Alice|A1B2C3D4E5F6G7H8|\(key64)|123456"),
            ("short fingerprint", "5|Alice|A1B2C3D4E5F6071|\(key64)|123456"),
            ("empty name", "5||A1B2C3D4E5F60718|\(key64)|123456"),
            ("control character in name", "5|Al\u{7}ice|A1B2C3D4E5F60718|\(key64)|123456"),
            ("unpadded key", "5|Alice|A1B2C3D4E5F60718|\(String(key64.dropLast()))|123456"),
            ("31-byte key", "5|Alice|A1B2C3D4E5F60718|\(Base64.encode(Array(peerPublic.dropLast()), .standardPadded))|123456"),
            ("five-digit device secret", "5|Alice|A1B2C3D4E5F60718|\(key64)|12345"),
            ("non-digit device secret", "5|Alice|A1B2C3D4E5F60718|\(key64)|12345a"),
            ("receiver's own fingerprint", "5|Alice|\(b.fingerprint)|\(key64)|123456"),
            // Section 6's order: every check of the form before the reflection,
            // the reflection before the shared secret.
            ("receiver's own fingerprint in lower case", "5|Alice|\(b.fingerprint.lowercased())|\(key64)|123456"),
            (
                "receiver's own fingerprint and a 31-byte key: the key's form first",
                "5|Alice|\(b.fingerprint)|\(Base64.encode(Array(peerPublic.dropLast()), .standardPadded))|123456"
            ),
            ("low-order ephemeral key (all zeros)", "5|Alice|A1B2C3D4E5F60718|\(Base64.encode([UInt8](repeating: 0, count: 32), .standardPadded))|123456"),
            (
                "receiver's own fingerprint and a low-order key: the fingerprint first",
                "5|Alice|\(b.fingerprint)|\(Base64.encode([UInt8](repeating: 0, count: 32), .standardPadded))|123456"
            ),
        ]
        // Each fed to a fresh exchange of the receiver: `invalid_key` for
        // the reflection and the low-order key, `malformed_message` for the
        // rest of the source texts, each ending the exchange.
        var rejections: [[String: Any]] = []
        for (what, t) in bad {
            var r = DeterministicRandom(seed: fixed("reject"))
            let e = try Exchange.qr(identity: b.identity, store: b.store, now: now, random: &r)
            var got = "accepted"
            do { try e.receive(Array(t.utf8), now: now) } catch let error as ItsMeError { got = Self.errorName(error.kind) }
            // A text that does not start with "5|" is no source text: the
            // retryable refusal of 5.2, which leaves the exchange waiting.
            let source = t.hasPrefix("5|")
            let reflected = what.hasPrefix("receiver's own fingerprint") && !what.contains("31-byte")
            expectEqual(
                got, !source ? "invalid_argument" : reflected || what.hasPrefix("low-order") ? "invalid_key" : "malformed_message", what)
            expectEqual(e.state, source ? .failed : .awaitingPeer, what)
            rejections.append(["case_text": what, "text": t, "error_text": got, "ends_exchange": e.state == .failed])
        }
        return ["imports": imports, "rejections": rejections]
    }

    func bluetoothVectors() throws -> [String: Any] {
        var exchanges: [[String: Any]] = []
        // The third: a's random source draws a session code of 2^32 - 22338
        // first, which is redrawn (4.2); its label was found by a search
        // over bt-redraw-<n> for the first n whose first draw is rejected.
        for (i, names) in [("Alice", "Bob"), ("Ćarol", "Dave the Builder"), ("Erin", "Frank")].enumerated() {
            var (a, rngA) = try party(i == 2 ? "bt-redraw-33047" : "bt-\(i)-a", name: names.0)
            var (b, rngB) = try party("bt-\(i)-b", name: names.1)
            let exA = try Exchange.bluetooth(identity: a.identity, store: a.store, sessionCode: nil, now: now, random: &rngA)
            let code = exA.sessionCode!
            let exB = try Exchange.bluetooth(identity: b.identity, store: b.store, sessionCode: code, now: now, random: &rngB)
            // Pump frames until both are quiet, recording what each sent.
            var sentA: [[UInt8]] = [], sentB: [[UInt8]] = []
            func pump() throws {
                var moved = true
                while moved {
                    moved = false
                    if let f = exA.peekOutgoing() {
                        exA.markSent(); sentA.append(f); try exB.receive(f, now: now); moved = true
                    }
                    if let f = exB.peekOutgoing() {
                        exB.markSent(); sentB.append(f); try exA.receive(f, now: now); moved = true
                    }
                }
            }
            try pump()
            expectEqual(exA.state, .compareSAS)
            expectEqual(exA.sas, exB.sas)
            try exA.confirm(now: now)
            try exB.confirm(now: now)
            try pump()
            expectTrue(exA.flags.contains(.peerConfirmed))
            expectEqual(sentA.count, 4)
            expectEqual(sentB.count, 4)

            // The documented formulas, step by step.
            let aIsInitiator = Array(SHA256.hash(a.publicKey).prefix(8)).lexicographicallyPrecedes(Array(SHA256.hash(b.publicKey).prefix(8)))
            func commitment(_ p: Party) -> (rest: [UInt8], c: [UInt8]) {
                let rest = LV.cat(Array(p.name.utf8), p.deviceSecret)
                return (rest, SHA256.hash(LV.cat(LV.b("itsme-sas-commit-v1"), [1], p.publicKey, p.ephemeralPublic, SHA256.hash(rest))))
            }
            func hello(_ p: Party) -> [UInt8] { [1, 1] + Array(SHA256.hash(p.publicKey).prefix(8)) + commitment(p).c }
            func key(_ p: Party) -> [UInt8] { [1, 2] + p.ephemeralPublic }
            let (ini, res) = aIsInitiator ? (a, b) : (b, a)
            let th1Input = LV.cat(LV.b("itsme-bluetooth-v1"), LV.b(code.text), hello(ini), hello(res), key(ini), key(res))
            let th1 = SHA256.hash(th1Input)
            let s = try seed(a, b)
            let prk = try HKDF.extract(salt: th1, ikm: s.shared)
            let keyI = try HKDF.expand(prk: prk, info: LV.cat(LV.b("itsme-bluetooth-key-v1"), LV.b("initiator")), count: 32)
                .unsafeExportedArray()
            let keyR = try HKDF.expand(prk: prk, info: LV.cat(LV.b("itsme-bluetooth-key-v1"), LV.b("responder")), count: 32)
                .unsafeExportedArray()
            func data(_ p: Party, initiator: Bool) throws -> [String: Any] {
                let name = Array(p.name.utf8)
                let d = p.publicKey + p.deviceSecret + [UInt8(name.count)] + name
                let signed = LV.cat(LV.b("itsme-bluetooth-payload-v1"), th1, LV.b(initiator ? "initiator" : "responder"), d)
                let sig = try p.sign(signed)
                let plain = d + sig
                let k = initiator ? keyI : keyR
                let frame = [1, 3] + (try AEAD.seal(.chacha20Poly1305, key: k, nonce: SessionFrames.nonce(0), plaintext: plain, aad: [1, 3]))
                let confirm = [1, 4] + (try AEAD.seal(.chacha20Poly1305, key: k, nonce: SessionFrames.nonce(1), plaintext: [1], aad: [1, 4]))
                let c = commitment(p)
                return partyJSON(p).merging([
                    "role_text": initiator ? "initiator" : "responder", "rest": hex(c.rest), "commitment": hex(c.c),
                    "hello": hex(hello(p)), "key": hex(key(p)), "data": hex(d), "signed_message": hex(signed),
                    "signature": hex(sig), "plaintext": hex(plain), "data_frame": hex(frame), "confirm_frame": hex(confirm),
                ]) { $1 }
            }
            var pa = try data(a, initiator: aIsInitiator), pb = try data(b, initiator: !aIsInitiator)
            pa["random_seed"] = hex(a.randomSeed)
            pb["random_seed"] = hex(b.randomSeed)
            for (p, sent) in [(pa, sentA), (pb, sentB)] {
                expectEqual(sent.map(hex), [p["hello"], p["key"], p["data_frame"], p["confirm_frame"]].map { $0 as! String })
            }
            let plainI = Hex.decode((aIsInitiator ? pa : pb)["plaintext"] as! String)!
            let plainR = Hex.decode((aIsInitiator ? pb : pa)["plaintext"] as! String)!
            let thInput = LV.cat(LV.b("itsme-bluetooth-transcript-v1"), th1, plainI, plainR)
            let th = SHA256.hash(thInput)
            let sas = try sasValue(s.seed, th)
            expectEqual(exA.sas?.value, sas.value)
            // The session code's draws (4.2): 4 bytes at a time after the
            // identity (32, 32) and the exchange's secrets (48).
            var mirror = DeterministicRandom(seed: a.randomSeed)
            for n in [32, 32, 48] { _ = mirror.bytes(n) }
            var draws: [[UInt8]] = []
            while draws.last.map({ $0.reduce(UInt32(0)) { $0 << 8 | UInt32($1) } >= 4_294_940_000 }) ?? true { draws.append(mirror.bytes(4)) }
            expectEqual(draws.last!.reduce(UInt32(0)) { $0 << 8 | UInt32($1) } % 260_000, code.value)
            expectEqual(draws.count, i == 2 ? 2 : 1)
            exchanges.append([
                "transcript_input": hex(thInput), "salt_text": s.salt, "session_code_draws": draws.map(hex),
                "session_code_text": code.text, "session_code_value": Int(code.value), "a": pa, "b": pb,
                "th1_input": hex(th1Input), "th1": hex(th1), "shared": hex(s.shared), "key_initiator": hex(keyI),
                "key_responder": hex(keyR), "seed": hex(s.seed), "transcript_hash": hex(th), "sas_value": Int(sas.value),
                "sas_text": ShortCode(value: sas.value)!.text,
            ])
        }
        return ["exchanges": exchanges]
    }

    func seedVectors() throws -> [[String: Any]] {
        try (0..<3).map { i in
            let (a, _) = try party("seed-\(i)-a", name: "A")
            let (b, _) = try party("seed-\(i)-b", name: "B")
            let s = try seed(a, b)
            var out = try SecretBytes(count: 32)
            try out.withMutableBytes { o in
                try a.ephemeralSecret.withBytes {
                    try ExchangeProtocol.deriveSeed(
                        ephemeralSecret: $0, peerEphemeralKey: b.ephemeralPublic, fingerprints: a.fingerprint, b.fingerprint, into: o)
                }
            }
            expectEqual(out.unsafeExportedArray(), s.seed)
            return [
                "a_ephemeral_secret": hex(a.ephemeralSecret), "a_ephemeral_public": hex(a.ephemeralPublic),
                "b_ephemeral_secret": hex(b.ephemeralSecret), "b_ephemeral_public": hex(b.ephemeralPublic),
                "a_fingerprint_text": a.fingerprint, "b_fingerprint_text": b.fingerprint, "shared": hex(s.shared),
                "salt_text": s.salt, "seed": hex(s.seed),
            ]
        }
    }

    func sasVectors() throws -> [[String: Any]] {
        try (0..<4).map { i in
            let seed = fixed("itsme-vector-sas-seed-\(i)"), th = fixed("itsme-vector-sas-th-\(i)")
            let v = try sasValue(seed, th)
            expectEqual(try ShortCode.sas(seed: seed, transcriptHash: th).value, v.value)
            return [
                "seed": hex(seed), "transcript_hash": hex(th), "info": hex(v.info), "okm": hex(v.okm), "value": Int(v.value),
                "text": ShortCode(value: v.value)!.text,
            ]
        }
    }

    func voiceVectors() throws -> [String: Any] {
        let plans: [(Int64, Int64?)] = [
            (1_800_000_000, nil), (1_800_000_007, nil), (1_800_000_029, nil), (1_800_000_007, 60_000_000),
            (1_800_000_007, 60_000_005), (1_800_000_030, 59_999_999),
        ]
        let planJSON: [[String: Any]] = plans.map { p in
            let r = VoiceProtocol.plan(now: p.0, lastWindow: p.1)
            return ["now": Int(p.0), "last_window": p.1.map { Int($0) } ?? NSNull(), "window": Int(r.window), "starts_in": Int(r.startsIn)]
        }
        let parseValid = ["ECHO 512", "echo-512", "  Zulu 000 ", "november 999"]
        let parseInvalid = ["ECHO 51", "ECHO 5120", "ECHO  512", "ECHO_512", "ECH 512", "", "512", "ECHO 51a"]
        var sessions: [[String: Any]] = []
        for i in 0..<4 {
            let seed = fixed("itsme-vector-voice-seed-\(i)")
            let window = Int64(60_000_000 + i * 7)
            let aPID = fixed("itsme-vector-voice-a-\(i)")
            // The last session has a source-format party: 8 fingerprint bytes.
            let bPID = i == 3 ? Array(fixed("itsme-vector-voice-b-\(i)").prefix(8)) : fixed("itsme-vector-voice-b-\(i)")
            func wordsDetail(_ pid: [UInt8]) throws -> (key: [UInt8], blocks: [[UInt8]], words: [Int]) {
                let key = try HKDF.derive(
                    ikm: seed, salt: LV.cat(VoiceProtocol.u64(window), pid), info: LV.b("itsme-word-options-v1"), count: 32
                ).unsafeExportedArray()
                var chosen: [Int] = [], blocks: [[UInt8]] = []
                while chosen.count < 5 {
                    let block = HMACSHA256.mac(key: key, message: LV.b("word-options") + (blocks.isEmpty ? [] : [UInt8(blocks.count)]))
                    blocks.append(block)
                    for b in block where b < 234 && chosen.count < 5 {
                        if !chosen.contains(Int(b % 26)) { chosen.append(Int(b % 26)) }
                    }
                }
                expectEqual(try VoiceProtocol.words(seed: seed, window: window, pid: pid), chosen.sorted())
                return (key, blocks, chosen.sorted())
            }
            let wa = try wordsDetail(aPID), wb = try wordsDetail(bPID)
            let firstHMAC = HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-first-selector-v1"), VoiceProtocol.u64(window)))
            let firstByte = firstHMAC[0]
            let lowerFirst = firstByte & 1 == 0
            expectEqual(try VoiceProtocol.lowerSelectsFirst(seed: seed, window: window), lowerFirst)
            let aFirst = aPID.lexicographicallyPrecedes(bPID) == lowerFirst
            let (first, second) = aFirst ? (aPID, bPID) : (bPID, aPID)
            let w1 = (aFirst ? wa.words : wb.words)[i % 5], w2 = (aFirst ? wb.words : wa.words)[(i + 2) % 5]
            let info = LV.cat(LV.b("itsme-interactive-code-v1"), first, [UInt8(w1)], second, [UInt8(w2)])
            let k = try HKDF.derive(ikm: seed, salt: VoiceProtocol.u64(window), info: info, count: 32).unsafeExportedArray()
            func codeValue(_ pid: [UInt8]) throws -> UInt32 {
                let v = UInt32(HMACSHA256.mac(key: k, message: LV.cat(LV.b("itsme-code-v1"), pid)).prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 26_000)
                expectEqual(
                    try VoiceProtocol.code(seed: seed, window: window, first: first, firstWord: w1, second: second, secondWord: w2, speaker: pid), v)
                return v
            }
            let t = try HKDF.derive(ikm: seed, salt: [UInt8](), info: LV.b("itsme-device-tag-v1"), count: 32).unsafeExportedArray()
            let dsA = Array(fixed("itsme-vector-voice-ds-a-\(i)").prefix(16)), dsB = i == 3 ? Array("123456".utf8) : Array(fixed("itsme-vector-voice-ds-b-\(i)").prefix(16))
            func tag(_ pid: [UInt8], _ ds: [UInt8]) throws -> UInt32 {
                let v = UInt32(HMACSHA256.mac(key: t, message: LV.cat(pid, VoiceProtocol.u64(window), ds)).prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 100)
                expectEqual(try VoiceProtocol.tag(seed: seed, window: window, speaker: pid, deviceSecret: ds), v)
                return v
            }
            let sid = UInt32(HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-session-id-v1"), VoiceProtocol.u64(window))).prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 2600)
            expectEqual(try VoiceProtocol.sessionID(seed: seed, window: window), sid)
            let ca = try codeValue(aPID), cb = try codeValue(bPID)
            sessions.append([
                "seed": hex(seed), "window": Int(window), "a_pid": hex(aPID), "b_pid": hex(bPID),
                "session_id_value": Int(sid), "session_id_text": VoiceProtocol.sessionIDText(sid),
                "a_words_key": hex(wa.key), "a_words_blocks": wa.blocks.map(hex), "a_words": wa.words,
                "b_words_key": hex(wb.key), "b_words_blocks": wb.blocks.map(hex), "b_words": wb.words,
                "first_selector_byte": Int(firstByte), "first_selector_hmac": hex(firstHMAC), "lower_selects_first": lowerFirst, "first_text": aFirst ? "a" : "b",
                "w1": w1, "w2": w2, "code_info": hex(info), "code_key": hex(k),
                "a_code_value": Int(ca), "a_code_text": VoiceProtocol.codeText(ca),
                "b_code_value": Int(cb), "b_code_text": VoiceProtocol.codeText(cb),
                "tag_key": hex(t), "a_device_secret": hex(dsA), "b_device_secret": hex(dsB),
                "a_tag": Int(try tag(aPID, dsA)), "b_tag": Int(try tag(bPID, dsB)),
            ])
        }
        var degradation: [[String: Any]] = []
        for i in 0..<3 {
            let seed = fixed("itsme-vector-degradation-seed-\(i)")
            let pid = i == 2 ? Array(fixed("itsme-vector-degradation-pid-\(i)").prefix(8)) : fixed("itsme-vector-degradation-pid-\(i)")
            let r = Array(fixed("itsme-vector-degradation-secret-\(i)").prefix(10))
            let key = try HKDF.derive(ikm: seed, salt: [UInt8](), info: LV.b("itsme-degradation-code-v1"), count: 32).unsafeExportedArray()
            let m = Array(HMACSHA256.mac(key: key, message: LV.cat(pid, r)).prefix(5))
            expectEqual(try r.withBytes { try DegradationCode.mac(seed: seed, pid: pid, secret: $0) }, m)
            degradation.append([
                "seed": hex(seed), "pid": hex(pid), "secret": hex(r), "key": hex(key), "mac": hex(m),
                "code_text": DegradationCode.format(r + m),
            ])
        }
        let degradationValid = ["abcd-efgh-ijkl-mnop-qrst-uvwx", "ABCD EFGH IJKL MNOP QRST UVWX", "abcdefghijklmnopqrstuvwx", "2345-67AB-CDEF-GHIJ-KLMN-OPQR"]
        let degradationInvalid = ["ABCD-EFGH-IJKL-MNOP-QRST-UVW", "ABCD-EFGH-IJKL-MNOP-QRST-UVWXY", "ABCD-EFGH-IJKL-MNOP-QRST-UVW1", "ABCD-EFGH-IJKL-MNOP-QRST-UVW0", "ABCD_EFGH_IJKL_MNOP_QRST_UVWX", ""]
        return [
            "degradation": degradation,
            "degradation_parse": [
                "valid": degradationValid.map { ["input_text": $0, "bytes": hex(DegradationCode.parse($0)!)] },
                "invalid": degradationInvalid.filter { DegradationCode.parse($0) == nil },
            ],
            "plans": planJSON,
            "code_parse": [
                "valid": parseValid.map { ["input_text": $0, "value": Int(VoiceProtocol.parseCode($0)!)] },
                "invalid": parseInvalid.filter { VoiceProtocol.parseCode($0) == nil },
            ],
            "sessions": sessions,
            "bound_sessions": try boundVoiceVectors(),
            "word_reading": wordReadingVectors(),
        ]
    }

    /// Sessions bound to a call (9.7): the session ID and the code key take
    /// `u8(1) || cb`; words, the first selector and tags are those of 9.3 to 10.1.
    func boundVoiceVectors() throws -> [[String: Any]] {
        try (0..<2).map { i in
            let seed = fixed("itsme-vector-voice-bound-seed-\(i)")
            let window = Int64(60_000_100 + i * 3)
            let aPID = fixed("itsme-vector-voice-bound-a-\(i)"), bPID = fixed("itsme-vector-voice-bound-b-\(i)")
            let binding = i == 0 ? fixed("itsme-vector-voice-call-\(i)") : Array(fixed("itsme-vector-voice-call-\(i)").prefix(16))
            let box = try SecretBox(copying: binding)
            func value(_ mac: [UInt8], _ modulus: UInt64) -> UInt32 {
                UInt32(mac.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % modulus)
            }
            let sidInput = LV.cat(LV.b("itsme-session-id-v1"), VoiceProtocol.u64(window), [1], binding)
            let sid = value(HMACSHA256.mac(key: seed, message: sidInput), 2600)
            expectEqual(try VoiceProtocol.sessionID(seed: seed, window: window, binding: box), sid)
            let unboundSID = try VoiceProtocol.sessionID(seed: seed, window: window)
            let wa = try VoiceProtocol.words(seed: seed, window: window, pid: aPID)
            let wb = try VoiceProtocol.words(seed: seed, window: window, pid: bPID)
            let aFirst = aPID.lexicographicallyPrecedes(bPID) == (try VoiceProtocol.lowerSelectsFirst(seed: seed, window: window))
            let (first, second) = aFirst ? (aPID, bPID) : (bPID, aPID)
            let w1 = (aFirst ? wa : wb)[i + 1], w2 = (aFirst ? wb : wa)[4 - i]
            let info = LV.cat(LV.b("itsme-interactive-code-v1"), first, [UInt8(w1)], second, [UInt8(w2)], [1], binding)
            let k = try HKDF.derive(ikm: seed, salt: VoiceProtocol.u64(window), info: info, count: 32).unsafeExportedArray()
            func code(_ pid: [UInt8]) throws -> UInt32 {
                let v = value(HMACSHA256.mac(key: k, message: LV.cat(LV.b("itsme-code-v1"), pid)), 26_000)
                expectEqual(
                    try VoiceProtocol.codes(
                        seed: seed, window: window, first: first, firstWord: w1, second: second, secondWord: w2, speakers: [pid],
                        binding: box)[0], v)
                return v
            }
            let ca = try code(aPID), cb = try code(bPID)
            let unbound = try VoiceProtocol.codes(
                seed: seed, window: window, first: first, firstWord: w1, second: second, secondWord: w2, speakers: [aPID, bPID])
            return [
                "seed": hex(seed), "window": Int(window), "a_pid": hex(aPID), "b_pid": hex(bPID), "binding": hex(binding),
                "session_id_input": hex(sidInput), "session_id_value": Int(sid), "session_id_text": VoiceProtocol.sessionIDText(sid),
                "unbound_session_id_value": Int(unboundSID), "a_words": wa, "b_words": wb, "first_text": aFirst ? "a" : "b",
                "w1": w1, "w2": w2, "code_info": hex(info), "code_key": hex(k),
                "a_code_value": Int(ca), "a_code_text": VoiceProtocol.codeText(ca),
                "b_code_value": Int(cb), "b_code_text": VoiceProtocol.codeText(cb),
                "unbound_a_code_value": Int(unbound[0]), "unbound_b_code_value": Int(unbound[1]),
            ]
        }
    }

    func onlineVerifyVectors() throws -> [String: Any] {
        // Sessions 0 to 2 are not bound to a call; session 2's PROOFs carry a
        // profile reference (11.3, 18.3). Bound sessions 3 to 5 (11.4): both
        // bound to one call; Alice bound, Bob not; each bound to its own call.
        let cb1 = Array(fixed("itsme-vector-ov-call-1")), cb2 = Array(fixed("itsme-vector-ov-call-2").prefix(20))
        let sessions = try (0..<3).map { try onlineVerifySession($0, bindings: (nil, nil)) }
        let bound = try [(cb1, cb1), (cb1, nil), (cb1, cb2)].enumerated().map {
            try onlineVerifySession(3 + $0.offset, bindings: $0.element)
        }
        return ["sessions": sessions, "bound_sessions": bound, "rejections": try onlineVerifyRejections(sessions[0])]
    }

    func onlineVerifySession(_ i: Int, bindings: ([UInt8]?, [UInt8]?)) throws -> [String: Any] {
        let seed = fixed("itsme-vector-ov-seed-\(i)")
        let references = i == 2 ? (fixed("itsme-vector-ov-reference-a"), fixed("itsme-vector-ov-reference-b")) : nil
        let (a, _) = try party("ov-\(i)-a", name: "Alice")
        let (b, _) = try party("ov-\(i)-b", name: "Bob")
        let dir = NSTemporaryDirectory() + "itsme-ov-vec-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let dsA = Array(fixed("itsme-vector-ov-ds-a-\(i)").prefix(16)), dsB = Array(fixed("itsme-vector-ov-ds-b-\(i)").prefix(16))
        func store(_ me: Party, _ peer: Party, mine: [UInt8], theirs: [UInt8]) throws -> (ContactStore, Int64) {
            let st = try ContactStore(path: dir + "/\(me.name).db", identity: me.identity)
            let id = try st.add(name: peer.name, publicKey: peer.publicKey, seed: try SecretBytes(copying: seed), method: .qr, now: now)
            try st.setDeviceSecrets(id: id, mine: try SecretBytes(copying: mine), theirs: try SecretBytes(copying: theirs))
            return (st, id)
        }
        let (sa, ia) = try store(a, b, mine: dsA, theirs: dsB)
        let (sb, ib) = try store(b, a, mine: dsB, theirs: dsA)
        let t = now + Int64(i) * 1000
        let w = VoiceProtocol.window(t)
        let ra = fixed("itsme-vector-ov-random-a-\(i)"), rb = fixed("itsme-vector-ov-random-b-\(i)")
        var ga = DeterministicRandom(seed: ra), gb = DeterministicRandom(seed: rb)
        let va = try OnlineVerify(store: sa, contactID: ia, window: w, binding: bindings.0, now: t, random: &ga)
        let vb = try OnlineVerify(store: sb, contactID: ib, window: w, binding: bindings.1, now: t, random: &gb)
        if let references {
            try va.shareProfile(reference: references.0)
            try vb.shareProfile(reference: references.1)
        }
        var log: [(Bool, [UInt8])] = []
        var moved = true
        while moved {
            moved = false
            for (from, to) in [(va, vb), (vb, va)] {
                if let m = from.takeOutgoing() { log.append((from.isInitiator, m)); try to.receive(m, now: t); moved = true }
            }
        }
        // The states 11.4 gives.
        func bindOf(_ cb: [UInt8]?) -> [UInt8]? {
            cb.map { HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-ov-binding-v1"), VoiceProtocol.u64(w), $0)) }
        }
        let bindA = bindOf(bindings.0), bindB = bindOf(bindings.1)
        let expected: OnlineVerify.State =
            bindA == bindB ? .compareSAS : (bindA == nil) != (bindB == nil) ? .bindingDiffers : .otherCall
        expectEqual(va.state, expected)
        expectEqual(vb.state, expected)
        expectEqual(va.sas, vb.sas)
        // The documented formulas.
        func drawn(_ r: [UInt8]) -> (eph: [UInt8], chal: [UInt8]) {
            var g = DeterministicRandom(seed: r)
            return (g.bytes(32), g.bytes(32))
        }
        let da = drawn(ra), db = drawn(rb)
        let aInit = a.publicKey.lexicographicallyPrecedes(b.publicKey)
        let (iP, rP) = aInit ? (a, b) : (b, a)
        let (iD, rD) = aInit ? (da, db) : (db, da)
        let (iDS, rDS) = aInit ? (dsA, dsB) : (dsB, dsA)
        func pub(_ sk: [UInt8]) -> [UInt8] { sk.withBytes { X25519.publicKey(secretKey: $0) } }
        let room = Array(HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-room-id-v1"), VoiceProtocol.u64(w))).prefix(16))
        let commit: [UInt8] = [1, 1] + SHA256.hash(LV.cat(LV.b("itsme-ov-commit-v1"), pub(iD.eph), iD.chal))
        let (iBind, rBind) = aInit ? (bindA, bindB) : (bindB, bindA)
        let keyR: [UInt8] = [1, 2] + pub(rD.eph) + rD.chal + (rBind ?? [])
        let keyI: [UInt8] = [1, 2] + pub(iD.eph) + iD.chal + (iBind ?? [])
        let thInput = LV.cat(LV.b("itsme-online-verify-v1"), room, VoiceProtocol.u64(w), iP.publicKey, rP.publicKey, commit, keyR, keyI)
        let th = SHA256.hash(thInput)
        let salt = HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-ov-salt-v1"), th))
        let shared = try X25519.sharedSecret(secretKey: try SecretBytes(copying: iD.eph), peerPublicKey: pub(rD.eph)).unsafeExportedArray()
        let prk = try HKDF.extract(salt: salt, ikm: shared)
        let kI = try HKDF.expand(prk: prk, info: LV.cat(LV.b("itsme-ov-key-v1"), LV.b("initiator")), count: 32).unsafeExportedArray()
        let kR = try HKDF.expand(prk: prk, info: LV.cat(LV.b("itsme-ov-key-v1"), LV.b("responder")), count: 32).unsafeExportedArray()
        let tagKey = try HKDF.derive(ikm: seed, salt: [UInt8](), info: LV.b("itsme-device-tag-v1"), count: 32).unsafeExportedArray()
        func proof(_ role: String) -> [UInt8] { HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-ov-proof-v1"), LV.b(role), th)) }
        func dtag(_ p: Party, _ ds: [UInt8]) -> [UInt8] {
            HMACSHA256.mac(key: tagKey, message: LV.cat(LV.b("itsme-ov-device-v1"), p.publicKey, th, ds))
        }
        func proofMessage(_ k: [UInt8], _ plain: [UInt8]) throws -> [UInt8] {
            [1, 3] + (try AEAD.seal(.chacha20Poly1305, key: k, nonce: SessionFrames.nonce(0), plaintext: plain, aad: [1, 3]))
        }
        let (iRef, rRef) = references.map { aInit ? ($0.0, $0.1) : ($0.1, $0.0) } ?? ([], [])
        let proofI = try proofMessage(kI, proof("initiator") + dtag(iP, iDS) + iRef)
        let proofR = try proofMessage(kR, proof("responder") + dtag(rP, rDS) + rRef)
        let sent = Dictionary(grouping: log, by: { $0.0 }).mapValues { $0.map { hex($0.1) } }
        expectEqual(sent[true], [commit, keyI, proofI].map(hex))
        expectEqual(sent[false], [keyR, proofR].map(hex))
        let sas = try sasValue(seed, th)
        expectEqual(va.sas?.value, expected == .compareSAS ? sas.value : nil)
        if let references {
            try va.confirm(now: t)
            try vb.confirm(now: t)
            expectEqual(try va.peerProfileReference().unsafeExportedArray(), references.1)
            expectEqual(try vb.peerProfileReference().unsafeExportedArray(), references.0)
        }
        func side(_ p: Party, _ d: (eph: [UInt8], chal: [UInt8]), _ r: [UInt8], _ ds: [UInt8], _ reference: [UInt8]?) -> [String: Any] {
            var json: [String: Any] = [
                "random_seed": hex(r), "identity_random_seed": hex(p.randomSeed), "identity_seed": hex(p.identitySeed),
                "pid": hex(p.publicKey),
                "ephemeral_secret": hex(d.eph), "ephemeral_public": hex(pub(d.eph)), "challenge": hex(d.chal),
                "device_secret": hex(ds),
            ]
            if let reference { json["profile_reference"] = hex(reference) }
            return json
        }
        var json: [String: Any] = [
            "seed": hex(seed), "window": Int(w), "room": hex(room), "initiator_text": aInit ? "a" : "b",
            "a": side(a, da, ra, dsA, references?.0), "b": side(b, db, rb, dsB, references?.1), "commit": hex(commit), "key_r": hex(keyR), "key_i": hex(keyI),
            "th_input": hex(thInput), "th": hex(th), "salt": hex(salt), "shared": hex(shared), "k_i": hex(kI), "k_r": hex(kR),
            "proof_i": hex(proof("initiator")), "proof_r": hex(proof("responder")), "tag_key": hex(tagKey),
            "dtag_i": hex(dtag(iP, iDS)), "dtag_r": hex(dtag(rP, rDS)), "proof_message_i": hex(proofI),
            "proof_message_r": hex(proofR),
        ]
        if expected == .compareSAS {
            json["sas_value"] = Int(sas.value)
            json["sas_text"] = ShortCode(value: sas.value)!.text
        }
        if i >= 3 {
            func orNull(_ b: [UInt8]?) -> Any { b.map(hex) ?? NSNull() }
            json["a_binding"] = orNull(bindings.0)
            json["b_binding"] = orNull(bindings.1)
            json["a_bind"] = orNull(bindA)
            json["b_bind"] = orNull(bindB)
            json["state_text"] = expected == .compareSAS ? "compare_sas" : expected == .bindingDiffers ? "binding_differs" : "other_call"
        }
        return json
    }

    func pinUpdateVectors() throws -> [String: Any] {
        var sessions: [[String: Any]] = []
        for i in 0..<2 {
            let seed = fixed("itsme-vector-pin-seed-\(i)")
            let (a, _) = try party("pin-\(i)-a", name: "Alice")
            let (b, _) = try party("pin-\(i)-b", name: "Bob")
            let dir = NSTemporaryDirectory() + "itsme-pin-vec-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: dir) }
            func store(_ me: Party, _ peer: Party) throws -> (ContactStore, Int64) {
                let st = try ContactStore(path: dir + "/\(me.name).db", identity: me.identity)
                return (st, try st.add(name: peer.name, publicKey: peer.publicKey, seed: try SecretBytes(copying: seed), method: .qr, now: now))
            }
            let (sa, ia) = try store(a, b)
            let (sb, ib) = try store(b, a)
            let t = now + 5000 + Int64(i) * 1000
            let w = VoiceProtocol.window(t)
            let ra = fixed("itsme-vector-pin-random-a-\(i)"), rb = fixed("itsme-vector-pin-random-b-\(i)")
            var ga = DeterministicRandom(seed: ra), gb = DeterministicRandom(seed: rb)
            let ua = try PinUpdate(store: sa, contactID: ia, window: w, now: t, random: &ga)
            let ub = try PinUpdate(store: sb, contactID: ib, window: w, now: t, random: &gb)
            var log: [(Bool, [UInt8])] = []
            var moved = true
            while moved {
                moved = false
                for (from, to) in [(ua, ub), (ub, ua)] {
                    if let f = from.peekOutgoing() { from.markSent(); log.append((from.isInitiator, f)); try to.receive(f, now: t); moved = true }
                }
            }
            expectEqual(ua.state, .done)
            expectEqual(ub.state, .done)
            func drawn(_ r: [UInt8]) -> (eph: [UInt8], secret: [UInt8]) {
                var g = DeterministicRandom(seed: r)
                let d = g.bytes(48)
                return (Array(d[0..<32]), Array(d[32..<48]))
            }
            let da = drawn(ra), db = drawn(rb)
            let aInit = a.publicKey.lexicographicallyPrecedes(b.publicKey)
            let (iP, rP) = aInit ? (a, b) : (b, a)
            let (iD, rD) = aInit ? (da, db) : (db, da)
            func pub(_ sk: [UInt8]) -> [UInt8] { sk.withBytes { X25519.publicKey(secretKey: $0) } }
            let code = ShortCode(value: UInt32(
                HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-pin-update-code-v1"), VoiceProtocol.u64(w))).prefix(8)
                    .reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 260_000))!
            expectEqual(ua.sessionCode, code)
            let keyI: [UInt8] = [1, 1] + pub(iD.eph), keyR: [UInt8] = [1, 1] + pub(rD.eph)
            let thInput = LV.cat(LV.b("itsme-pin-update-v1"), LV.b(code.text), VoiceProtocol.u64(w), iP.publicKey, rP.publicKey, keyI, keyR)
            let th = SHA256.hash(thInput)
            let salt = HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-pin-update-salt-v1"), th))
            let shared = try X25519.sharedSecret(secretKey: try SecretBytes(copying: iD.eph), peerPublicKey: pub(rD.eph)).unsafeExportedArray()
            let prk = try HKDF.extract(salt: salt, ikm: shared)
            let kI = try HKDF.expand(prk: prk, info: LV.cat(LV.b("itsme-pin-update-key-v1"), LV.b("initiator")), count: 32).unsafeExportedArray()
            let kR = try HKDF.expand(prk: prk, info: LV.cat(LV.b("itsme-pin-update-key-v1"), LV.b("responder")), count: 32).unsafeExportedArray()
            func confirm(_ role: String) -> [UInt8] { HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-pin-update-confirm-v1"), LV.b(role), th)) }
            func sealed(_ type: UInt8, _ k: [UInt8], _ counter: UInt64, _ plain: [UInt8]) throws -> [UInt8] {
                [1, type] + (try AEAD.seal(.chacha20Poly1305, key: k, nonce: SessionFrames.nonce(counter), plaintext: plain, aad: [1, type]))
            }
            let newI = try sealed(2, kI, 0, iD.secret + confirm("initiator"))
            let newR = try sealed(2, kR, 0, rD.secret + confirm("responder"))
            let done = try sealed(3, kI, 1, [])
            let sent = Dictionary(grouping: log, by: { $0.0 }).mapValues { $0.map { hex($0.1) } }
            expectEqual(sent[true], [keyI, newI, done].map(hex))
            expectEqual(sent[false], [keyR, newR].map(hex))
            func side(_ p: Party, _ d: (eph: [UInt8], secret: [UInt8]), _ r: [UInt8]) -> [String: Any] {
                [
                    "random_seed": hex(r), "identity_random_seed": hex(p.randomSeed), "identity_seed": hex(p.identitySeed),
                    "pid": hex(p.publicKey), "ephemeral_secret": hex(d.eph), "ephemeral_public": hex(pub(d.eph)),
                    "new_device_secret": hex(d.secret),
                ]
            }
            sessions.append([
                "seed": hex(seed), "window": Int(w), "session_code_value": Int(code.value), "session_code_text": code.text,
                "initiator_text": aInit ? "a" : "b", "a": side(a, da, ra), "b": side(b, db, rb), "key_i": hex(keyI),
                "key_r": hex(keyR), "th_input": hex(thInput), "th": hex(th), "salt": hex(salt), "shared": hex(shared),
                "k_i": hex(kI), "k_r": hex(kR), "confirm_i": hex(confirm("initiator")), "confirm_r": hex(confirm("responder")),
                "new_i": hex(newI), "new_r": hex(newR), "done": hex(done),
                "new_plaintext_i": hex(iD.secret + confirm("initiator")), "new_plaintext_r": hex(rD.secret + confirm("responder")),
            ])
        }
        return ["sessions": sessions, "commit_order": try pinUpdateCommitOrder(sessions[0])]
    }

    func remoteVectors() throws -> [String: Any] {
        // Codes as typed, and what a checker makes of them (16.1).
        var typed: [[String: Any]] = []
        for input in ["k7x2-m9pm", "K7X2M9PM", " K7X2 M9PM ", "K7X2-M9PN", "K7X2-9MPM", "K7X2-M9P", "K7X2-M9PM2", "K0X2-M9PM", "ILO1-0000"] {
            if let code = try? RemoteCode(parsing: input) {
                typed.append(["input_text": input, "canonical_text": code.canonical, "shown_text": code.text])
            } else {
                typed.append(["input_text": input, "error_text": "invalid"])
            }
        }
        var exchanges: [[String: Any]] = []
        for (i, (names, realtime)) in [(("Alice", "Bob"), false), (("Ćarol", "Dave the Builder"), true)].enumerated() {
            var (a, rngA) = try party("remote-\(i)-a", name: names.0)
            var (b, rngB) = try party("remote-\(i)-b", name: names.1)
            // Mirror what each side draws after its ephemeral key and device secret.
            var mirrorA = DeterministicRandom(seed: a.randomSeed), mirrorB = DeterministicRandom(seed: b.randomSeed)
            for n in [32, 32, 48] {  // identity seed, contacts key, exchange secrets: one call each
                _ = mirrorA.bytes(n)
                _ = mirrorB.bytes(n)
            }
            let inviteCode = RemoteCode.random(using: &mirrorA), encryptionCode = RemoteCode.random(using: &mirrorA)
            let sid = mirrorA.bytes(16)
            var ya = mirrorA.bytes(32), yb = mirrorB.bytes(32)
            ya[31] &= 0x0f
            yb[31] &= 0x0f

            let exA = try Exchange.invite(identity: a.identity, store: a.store, realtime: realtime, now: now, random: &rngA)
            expectEqual(exA.inviteCode, inviteCode)
            expectEqual(exA.encryptionCode, encryptionCode)
            let exB = try Exchange.acceptInvite(
                identity: b.identity, store: b.store, inviteCode: inviteCode.text.lowercased(), encryptionCode: encryptionCode.text, realtime: realtime,
                now: now, random: &rngB)
            var sent: [[UInt8]] = []
            for (from, to) in [(exA, exB), (exB, exA), (exA, exB)] {
                let m = from.peekOutgoing()!
                from.markSent()
                sent.append(m)
                try to.receive(m, now: now)
            }
            expectEqual(exA.sas, exB.sas)

            // The documented formulas, step by step (16.2 to 16.5).
            let inviteID = Array(SHA256.hash(LV.cat(LV.b("itsme-invite-id-v1"), LV.b(inviteCode.canonical))).prefix(16))
            let roomID = Array(SHA256.hash(LV.cat(LV.b("itsme-realtime-room-v1"), LV.b(inviteCode.canonical))).prefix(16))
            expectEqual(exA.relayID, realtime ? roomID : inviteID)
            let prs = Array(encryptionCode.canonical.utf8)
            let ci = LV.cat(LV.b("itsme-online-exchange-v1"), LV.b(inviteCode.canonical))
            let genString = CPace.generatorString(prs: prs, ci: ci, sid: sid)!.unsafeExportedArray()
            let genHash = SHA512.hash(genString)
            let g = try CPace.generator(prs: prs, ci: ci, sid: sid).unsafeExportedArray()
            func mult(_ s: [UInt8], _ p: [UInt8]) -> [UInt8] {
                s.withUnsafeBytes { sp in p.withUnsafeBytes { CPace.scalarMult(scalar: sp, point: $0)! } }
            }
            let bigYa = mult(ya, g), bigYb = mult(yb, g)
            let k = mult(ya, bigYb)
            expectEqual(k, mult(yb, bigYa))
            let rest = LV.cat(Array(a.name.utf8), a.deviceSecret)
            let commitment = SHA256.hash(LV.cat(LV.b("itsme-sas-commit-v1"), [1], a.publicKey, a.ephemeralPublic, SHA256.hash(rest)))
            let m1 = [1, 1] + sid + bigYa + commitment
            let iskInput = LV.cat(LV.b("CPaceRistretto255_ISK"), sid, k) + LV.cat(bigYa, commitment) + LV.cat(bigYb, [])
            let isk = SHA512.hash(iskInput)
            let prk = try HKDF.extract(salt: LV.b("itsme-online-exchange-v1"), ikm: isk)
            func expand(_ label: String, _ role: String) throws -> [UInt8] {
                try HKDF.expand(prk: prk, info: LV.cat(LV.b(label), LV.b(role)), count: 32).unsafeExportedArray()
            }
            let kcI = try expand("itsme-online-confirm-v1", "initiator"), kcR = try expand("itsme-online-confirm-v1", "responder")
            let kpI = try expand("payload-encryption", "initiator"), kpR = try expand("payload-encryption", "responder")
            let tpakeInput = LV.cat(LV.b("itsme-online-transcript-v1"), inviteID, m1, bigYb)
            let tpake = SHA256.hash(tpakeInput)
            let tagR = HMACSHA256.mac(key: kcR, message: LV.cat(LV.b("itsme-online-confirm-v1"), LV.b("responder"), tpake))
            func payload(_ p: Party, _ role: String) throws -> (data: [UInt8], signed: [UInt8], plain: [UInt8]) {
                let name = Array(p.name.utf8)
                let data = p.publicKey + p.ephemeralPublic + p.deviceSecret + [UInt8(name.count)] + name
                let signed = LV.cat(LV.b("itsme-online-payload-v1"), tpake, LV.b(role), data)
                return (data, signed, data + (try p.sign(signed)))
            }
            func seal(_ key: [UInt8], _ role: String, _ plain: [UInt8]) throws -> (aad: [UInt8], box: [UInt8]) {
                let aad = LV.cat(LV.b("itsme-online-payload-v1"), [1], LV.b(role), inviteID)
                return (aad, try AEAD.seal(.aes256GCM, key: key, nonce: [UInt8](repeating: 0, count: 12), plaintext: plain, aad: aad))
            }
            let payR = try payload(b, "responder"), payI = try payload(a, "initiator")
            let boxR = try seal(kpR, "responder", payR.plain), boxI = try seal(kpI, "initiator", payI.plain)
            let m2 = [1, 2] + bigYb + tagR + boxR.box
            let tagI = HMACSHA256.mac(key: kcI, message: LV.cat(LV.b("itsme-online-confirm-v1"), LV.b("initiator"), tpake, SHA256.hash(m2)))
            let m3 = [1, 3] + tagI + boxI.box
            expectEqual(sent.map(hex), [m1, m2, m3].map(hex))
            let s = try seed(a, b)
            let thInput = LV.cat(LV.b("itsme-online-sas-transcript-v1"), tpake, payI.plain, payR.plain)
            let th = SHA256.hash(thInput)
            let sas = try sasValue(s.seed, th)
            expectEqual(exA.sas?.value, sas.value)

            // The decisions (16.3 step 5): in the invite exchange both
            // confirm (the inviter's waits for the invitee's), in the
            // real-time one the invitee rejects.
            let kdI = try expand("itsme-online-decision-v1", "initiator"), kdR = try expand("itsme-online-decision-v1", "responder")
            let inviteeConfirms = !realtime
            func decision(_ key: [UInt8], _ role: String, _ d: UInt8) throws -> (aad: [UInt8], message: [UInt8]) {
                let aad = LV.cat(LV.b("itsme-online-decision-v1"), [1], LV.b(role), th)
                return (aad, [1, 4] + (try AEAD.seal(.aes256GCM, key: key, nonce: [UInt8](repeating: 0, count: 12), plaintext: [d], aad: aad)))
            }
            let decisionI = try decision(kdI, "initiator", 1), decisionR = try decision(kdR, "responder", inviteeConfirms ? 1 : 0)
            try exA.confirm(now: now)
            if inviteeConfirms { try exB.confirm(now: now) } else { try exB.reject() }
            let outB = try unwrap(exB.peekOutgoing())
            exB.markSent()
            expectEqual(hex(outB), hex(decisionR.message))
            try exA.receive(outB, now: now)
            let outA = try unwrap(exA.peekOutgoing())
            exA.markSent()
            expectEqual(hex(outA), hex(decisionI.message))
            expectEqual(try exA.settle(now: now) != nil, inviteeConfirms)
            try exB.receive(outA, now: now)
            expectTrue(exB.flags.contains(.peerConfirmed))

            func side(_ p: Party, _ pay: (data: [UInt8], signed: [UInt8], plain: [UInt8]), _ box: (aad: [UInt8], box: [UInt8])) -> [String: Any] {
                partyJSON(p).merging([
                    "payload_data": hex(pay.data), "signed_message": hex(pay.signed), "payload": hex(pay.plain), "aad": hex(box.aad),
                    "sealed_payload": hex(box.box),
                ]) { $1 }
            }
            var inviter = side(a, payI, boxI), invitee = side(b, payR, boxR)
            inviter.merge(["scalar": hex(ya), "share": hex(bigYa), "rest": hex(rest), "commitment": hex(commitment)]) { $1 }
            invitee.merge(["scalar": hex(yb), "share": hex(bigYb)]) { $1 }
            inviter.merge(["decision": 1, "decision_aad": hex(decisionI.aad), "decision_message": hex(decisionI.message)]) { $1 }
            invitee.merge([
                "decision": inviteeConfirms ? 1 : 0, "decision_aad": hex(decisionR.aad), "decision_message": hex(decisionR.message),
            ]) { $1 }
            exchanges.append([
                "realtime": realtime, "invite_code_text": inviteCode.text, "encryption_code_text": encryptionCode.text,
                "invite_id": hex(inviteID), "room_id": hex(roomID), "sid": hex(sid), "prs": hex(prs), "ci": hex(ci),
                "generator_string": hex(genString), "generator_hash": hex(genHash), "generator": hex(g), "k": hex(k),
                "isk_input": hex(iskInput), "isk": hex(isk), "kc_i": hex(kcI), "kc_r": hex(kcR), "kp_i": hex(kpI), "kp_r": hex(kpR),
                "kd_i": hex(kdI), "kd_r": hex(kdR),
                "tpake_input": hex(tpakeInput), "tpake": hex(tpake), "tag_r": hex(tagR), "tag_i": hex(tagI),
                "invite_message": hex(m1), "accept_message": hex(m2), "reply_message": hex(m3), "inviter": inviter,
                "invitee": invitee, "shared": hex(s.shared), "seed": hex(s.seed), "transcript_input": hex(thInput),
                "transcript_hash": hex(th), "sas_value": Int(sas.value), "sas_text": ShortCode(value: sas.value)!.text,
            ])
        }
        return ["codes": typed, "exchanges": exchanges, "rejections": try remoteRejections()]
    }

    /// Messages of the invite exchange (the first of remote.json) that a
    /// fresh side refuses, each with the result code 16.3 gives: every
    /// message but the last is accepted, the last refused.
    func remoteRejections() throws -> [[String: Any]] {
        func sides() throws -> (inviter: Exchange, invitee: Exchange) {
            var (a, rngA) = try party("remote-0-a", name: "Alice")
            var (b, rngB) = try party("remote-0-b", name: "Bob")
            let inviter = try Exchange.invite(identity: a.identity, store: a.store, realtime: false, now: now, random: &rngA)
            let invitee = try Exchange.acceptInvite(
                identity: b.identity, store: b.store, inviteCode: inviter.inviteCode!.text, encryptionCode: inviter.encryptionCode!.text,
                realtime: false, now: now, random: &rngB)
            return (inviter, invitee)
        }
        func take(_ ex: Exchange) -> [UInt8] {
            let m = ex.peekOutgoing()!
            ex.markSent()
            return m
        }
        // The honest messages, and each side's confirmation.
        let honest = try sides()
        let m1 = take(honest.inviter)
        try honest.invitee.receive(m1, now: now)
        let m2 = take(honest.invitee)
        try honest.inviter.receive(m2, now: now)
        let m3 = take(honest.inviter)
        try honest.invitee.receive(m3, now: now)
        try honest.inviter.confirm(now: now)
        try honest.invitee.confirm(now: now)
        let dR = take(honest.invitee)
        try honest.inviter.receive(dR, now: now)
        let dI = take(honest.inviter)
        func flipped(_ m: [UInt8], _ i: Int) -> [UInt8] {
            var c = m
            c[i] ^= 1
            return c
        }
        func with(_ m: [UInt8], _ i: Int, _ value: UInt8) -> [UInt8] {
            var c = m
            c[i] = value
            return c
        }
        func padded(_ m: [UInt8], to count: Int) -> [UInt8] { m + [UInt8](repeating: 0, count: count - m.count) }
        let ya = Array(m1[18..<50])
        let cases: [(String, String, [[UInt8]], String)] = [
            ("INVITE of 81 bytes", "invitee", [Array(m1.prefix(81))], "malformed_message"),
            ("INVITE of version 2", "invitee", [with(m1, 0, 2)], "malformed_message"),
            ("INVITE of an unknown type", "invitee", [with(m1, 1, 9)], "malformed_message"),
            ("INVITE whose share is not a ristretto255 encoding", "invitee",
             [Array(m1[0..<18]) + [UInt8](repeating: 0xff, count: 32) + Array(m1[50...])], "authentication_failed"),
            ("INVITE twice", "invitee", [m1, m1], "malformed_message"),
            ("an ACCEPT sent to the invitee", "invitee", [m2], "malformed_message"),
            ("REPLY before INVITE", "invitee", [m3], "malformed_message"),
            ("REPLY of 195 bytes", "invitee", [m1, Array(m3.prefix(195))], "malformed_message"),
            // Each type's own row bounds it (16.3), before any key is used:
            // one byte past the longest REPLY is malformed, the longest one
            // is read and its box fails.
            ("REPLY of 324 bytes", "invitee", [m1, padded(m3, to: 324)], "malformed_message"),
            ("REPLY padded to 323 bytes", "invitee", [m1, padded(m3, to: 323)], "authentication_failed"),
            ("REPLY with a changed tag", "invitee", [m1, flipped(m3, 10)], "authentication_failed"),
            ("REPLY with a changed box", "invitee", [m1, flipped(m3, m3.count - 1)], "authentication_failed"),
            ("DECISION before the SAS", "invitee", [m1, dI], "malformed_message"),
            ("DECISION of 18 bytes", "invitee", [m1, m3, Array(dI.prefix(18))], "malformed_message"),
            ("DECISION with a changed box", "invitee", [m1, m3, flipped(dI, 2)], "authentication_failed"),
            ("the invitee's own DECISION reflected", "invitee", [m1, m3, dR], "authentication_failed"),
            ("a message after the peer's DECISION", "invitee", [m1, m3, dI, m3], "invalid_state"),
            ("the inviter's own INVITE reflected", "inviter", [m1], "malformed_message"),
            ("ACCEPT of 227 bytes", "inviter", [Array(m2.prefix(227))], "malformed_message"),
            ("ACCEPT of 356 bytes", "inviter", [padded(m2, to: 356)], "malformed_message"),
            ("ACCEPT padded to 355 bytes", "inviter", [padded(m2, to: 355)], "authentication_failed"),
            ("ACCEPT with a changed tag", "inviter", [flipped(m2, 40)], "authentication_failed"),
            ("ACCEPT reflecting the inviter's share", "inviter", [[1, 2] + ya + Array(m2[34...])], "invalid_key"),
            ("ACCEPT twice", "inviter", [m2, m2], "malformed_message"),
            ("the inviter's own DECISION reflected", "inviter", [m2, dI], "authentication_failed"),
        ]
        var out: [[String: Any]] = []
        for (name, receiver, messages, result) in cases {
            let fresh = try sides()
            let ex = receiver == "inviter" ? fresh.inviter : fresh.invitee
            _ = ex.peekOutgoing()  // the inviter's INVITE, drawn at creation, is not needed
            for m in messages.dropLast() { expectNoThrow(try ex.receive(m, now: now), name) }
            var got = "accepted"
            do { try ex.receive(messages.last!, now: now) } catch let e as ItsMeError {
                got = e.kind.symbol.replacingOccurrences(of: "ITSME_E_", with: "").lowercased()
            }
            expectEqual(got, result, name)
            out.append(["case_text": name, "receiver_text": receiver, "messages": messages.map(hex), "result": result])
        }
        return out
    }

    /// Section 8.2: the same two people exchange by QR, confirm, and
    /// exchange again (Bob renamed meanwhile). Each exchange draws its
    /// ephemeral secret and device secret (48 bytes) next from the party's
    /// random source. After both confirmed the second exchange, Alice's
    /// stored contact keeps its id and the name she stored, and holds the
    /// second seed and device secrets.
    func reexchangeVectors() throws -> [String: Any] {
        var (a, rngA) = try party("reexchange-a", name: "Alice")
        var (b, rngB) = try party("reexchange-b", name: "Bob")
        let storeA = a.store, storeB = b.store
        var mirrorA = DeterministicRandom(seed: a.randomSeed), mirrorB = DeterministicRandom(seed: b.randomSeed)
        for _ in 0..<2 {
            _ = mirrorA.bytes(32)
            _ = mirrorB.bytes(32)
        }
        var rounds: [[String: Any]] = []
        var contactID: Int64 = 0
        for round in 0..<2 {
            if round == 1 { try b.identity.setName("Robert") }
            let drawnA = mirrorA.bytes(48), drawnB = mirrorB.bytes(48)
            let exA = try Exchange.qr(identity: a.identity, store: a.store, now: now + Int64(round), random: &rngA)
            let exB = try Exchange.qr(identity: b.identity, store: b.store, now: now + Int64(round), random: &rngB)
            try exA.receive(Array(exB.outgoingText.utf8), now: now + Int64(round))
            try exB.receive(Array(exA.outgoingText.utf8), now: now + Int64(round))
            expectEqual(exA.sas, exB.sas)
            let idA = try exA.confirm(now: now + Int64(round))
            try exB.confirm(now: now + Int64(round))
            expectEqual(exA.flags.contains(.knownContact), round == 1)
            if round == 0 { contactID = idA } else { expectEqual(idA, contactID, "the same contact, its id kept") }
            let stored = try storeA.contact(id: idA)
            expectEqual(stored.name, "Bob", "the stored name is kept")
            expectEqual(stored.state, .verified)
            expectEqual(stored.verifiedAt, now + Int64(round))
            let seed = try storeA.seed(id: idA).unsafeExportedArray()
            expectTrue(try storeB.seed(id: try storeB.contact(publicKey: a.publicKey).id).constantTimeEquals(seed))
            let secrets = try storeA.deviceSecrets(id: idA)
            expectEqual(secrets.mine.unsafeExportedArray(), Array(drawnA[32..<48]))
            expectEqual(secrets.theirs.unsafeExportedArray(), Array(drawnB[32..<48]))
            rounds.append([
                "now": Int(now) + round, "a_ephemeral_secret": hex(Array(drawnA[0..<32])), "a_device_secret": hex(Array(drawnA[32..<48])),
                "b_ephemeral_secret": hex(Array(drawnB[0..<32])), "b_device_secret": hex(Array(drawnB[32..<48])),
                "a_payload_text": exA.outgoingText, "b_payload_text": exB.outgoingText, "b_name_text": b.identity.name,
                "seed": hex(seed), "sas_text": exA.sas!.text, "known_contact": round == 1,
                "a_stored": ["name_text": stored.name, "seed": hex(seed), "verified_at": Int(now) + round, "method_text": "qr"],
            ])
        }
        expectEqual(try storeA.count(), 1)
        return [
            "a": ["random_seed": hex(a.randomSeed), "identity_public": hex(a.publicKey), "fingerprint_text": a.fingerprint, "name_text": "Alice"],
            "b": ["random_seed": hex(b.randomSeed), "identity_public": hex(b.publicKey), "fingerprint_text": b.fingerprint, "name_text": "Bob"],
            "exchanges": rounds,
        ]
    }

    // MARK: Every file

    /// Every vector file, by name without ".json", in the order written.
    func files() throws -> [(name: String, content: Any)] {
        [
            ("encoding", encodingVectors()), ("seed", try seedVectors()), ("sas", try sasVectors()), ("qr", try qrVectors()),
            ("source-v5", try sourceVectors()), ("bluetooth", try bluetoothVectors()), ("voice", try voiceVectors()),
            ("online-verify", try onlineVerifyVectors()), ("pin-update", try pinUpdateVectors()), ("remote", try remoteVectors()),
            ("export", try exportVectors()), ("transfer", try transferVectors()), ("profile", try profileVectors()),
            ("approval", try approvalVectors()), ("reexchange", try reexchangeVectors()), ("rollcall", try rollCallVectors()),
        ]
    }
}

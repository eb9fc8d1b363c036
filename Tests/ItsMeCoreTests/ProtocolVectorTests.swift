import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

/// docs/PROTOCOL.md's test vectors, Tests/ProtocolVectors/*.json (written by
/// itsme-vectors, Sources/VectorGen): every entry's inputs are played through
/// the library, which must give the entry's outputs and refuse each refusal
/// with its result code. The files' layout is Tests/ProtocolVectors/README.md.
final class ProtocolVectorTests: XCTestCase {
    typealias J = [String: Any]
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("ProtocolVectors")
    let now: Int64 = 1_800_000_000

    override func setUpWithError() throws { try Sodium.initialize() }

    // MARK: Reading the files

    func load(_ name: String) throws -> Any {
        try JSONSerialization.jsonObject(with: try Data(contentsOf: Self.directory.appendingPathComponent(name + ".json")))
    }
    func object(_ name: String) throws -> J { try XCTUnwrap(try load(name) as? J, name) }
    func hex(_ b: [UInt8]) -> String { b.map { String(format: "%02x", $0) }.joined() }
    func bytes(_ v: J, _ key: String) -> [UInt8] {
        guard let text = v[key] as? String, let b = Hex.decode(text) else {
            XCTFail("\(key) is not hex")
            return []
        }
        return b
    }
    func text(_ v: J, _ key: String) -> String {
        guard let s = v[key] as? String else {
            XCTFail("\(key) is not a string")
            return ""
        }
        return s
    }
    func int(_ v: J, _ key: String) -> Int {
        if let n = v[key] as? Int { return n }
        if let n = v[key] as? NSNumber { return n.intValue }
        XCTFail("\(key) is not a number")
        return -1
    }
    func flag(_ v: J, _ key: String) -> Bool {
        if let b = v[key] as? Bool { return b }
        if let n = v[key] as? NSNumber { return n.boolValue }
        XCTFail("\(key) is not a boolean")
        return false
    }
    func list(_ v: J, _ key: String) -> [J] { (v[key] as? [Any])?.compactMap { $0 as? J } ?? [] }
    func strings(_ v: J, _ key: String) -> [String] { (v[key] as? [Any])?.compactMap { $0 as? String } ?? [] }
    func hexList(_ v: J, _ key: String) -> [[UInt8]] { strings(v, key).map { Hex.decode($0) ?? [] } }
    func sub(_ v: J, _ key: String) -> J { v[key] as? J ?? [:] }
    func optionalInt(_ v: J, _ key: String) -> Int? { v[key] is NSNull || v[key] == nil ? nil : int(v, key) }

    static func errorName(_ kind: ItsMeError.Kind) -> String {
        kind.symbol.replacingOccurrences(of: "ITSME_E_", with: "").lowercased()
    }

    /// A directory removed when the test ends.
    func temporaryDirectory() throws -> String {
        let dir = NSTemporaryDirectory() + "itsme-vectors-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        return dir
    }

    /// A new contact store of `identity`, in a directory removed when the
    /// test ends.
    func contacts(_ identity: Identity) throws -> ContactStore {
        try ContactStore(path: try temporaryDirectory() + "/contacts.db", identity: identity)
    }

    /// The identity the library creates from `randomSeed`, and that random
    /// source where the identity's draws end.
    func identity(_ randomSeed: [UInt8], name: String) throws -> (Identity, DeterministicRandom) {
        var rng = DeterministicRandom(seed: randomSeed)
        let identity = try Identity.create(store: MemorySecretStore(), name: name, random: &rng)
        return (identity, rng)
    }

    /// A party of an exchange (qr.json's party): its identity, checked
    /// against the file, and its random source.
    func party(_ p: J, name: String? = nil) throws -> (Identity, DeterministicRandom) {
        let (id, rng) = try identity(bytes(p, "random_seed"), name: name ?? text(p, "name_text"))
        if p["identity_public"] != nil { XCTAssertEqual(hex(id.publicKey), text(p, "identity_public")) }
        if p["pid"] != nil { XCTAssertEqual(hex(id.publicKey), text(p, "pid")) }
        if p["fingerprint_text"] != nil { XCTAssertEqual(id.fingerprint, text(p, "fingerprint_text")) }
        return (id, rng)
    }

    func deriveSeed(_ secret: [UInt8], _ peer: [UInt8], _ fa: String, _ fb: String) throws -> [UInt8] {
        var out = try SecretBytes(count: 32)
        try out.withMutableBytes { o in
            try secret.withBytes { try ExchangeProtocol.deriveSeed(ephemeralSecret: $0, peerEphemeralKey: peer, fingerprints: fa, fb, into: o) }
        }
        return out.unsafeExportedArray()
    }

    func shared(_ secret: [UInt8], _ peer: [UInt8]) throws -> [UInt8] {
        try X25519.sharedSecret(secretKey: try SecretBytes(copying: secret), peerPublicKey: peer).unsafeExportedArray()
    }

    func publicKey(_ secret: [UInt8]) -> [UInt8] { secret.withBytes { X25519.publicKey(secretKey: $0) } }

    /// Section 3 for `e`'s two sides: the shared secret, the salt (where the
    /// file gives it) and the seed, both ways.
    func checkSeed(_ e: J, secretA: [UInt8], publicA: [UInt8], secretB: [UInt8]?, publicB: [UInt8], fa: String, fb: String,
        line: UInt = #line) throws
    {
        XCTAssertEqual(hex(try shared(secretA, publicB)), text(e, "shared"), line: line)
        if e["salt_text"] != nil {
            XCTAssertEqual(String(decoding: ExchangeProtocol.seedSalt(fa, fb), as: UTF8.self), text(e, "salt_text"), line: line)
            XCTAssertEqual(String(decoding: ExchangeProtocol.seedSalt(fb, fa), as: UTF8.self), text(e, "salt_text"), line: line)
        }
        XCTAssertEqual(hex(try deriveSeed(secretA, publicB, fa, fb)), text(e, "seed"), line: line)
        if let secretB {
            XCTAssertEqual(hex(try shared(secretB, publicA)), text(e, "shared"), line: line)
            XCTAssertEqual(hex(try deriveSeed(secretB, publicA, fb, fa)), text(e, "seed"), line: line)
        }
    }

    /// `prk` of 7.3, 10.3 and 11.3: HKDF-Extract(salt, shared), which the
    /// library's direction keys of `label` expand to the entry's two keys.
    func checkPRK(_ e: J, salt: [UInt8], label: String, keys: (String, String), line: UInt = #line) throws {
        let shared = bytes(e, "shared")
        XCTAssertEqual(hex(try HKDF.extract(salt: salt, ikm: shared).unsafeExportedArray()), text(e, "prk"), line: line)
        var both = [UInt8](repeating: 0, count: 64)
        try shared.withUnsafeBytes { s in
            try both.withUnsafeMutableBytes { try SessionFrames.directionKeys(shared: s, salt: salt, label: label, into: $0) }
        }
        XCTAssertEqual(hex(both), text(e, keys.0) + text(e, keys.1), line: line)
        for (role, key) in [("initiator", keys.0), ("responder", keys.1)] {
            let k = try HKDF.expand(prk: bytes(e, "prk"), info: LV.cat(LV.b(label), LV.b(role)), count: 32)
            XCTAssertEqual(hex(k.unsafeExportedArray()), text(e, key), line: line)
        }
    }

    func checkSAS(_ sas: ShortCode?, _ e: J, _ what: String = "", line: UInt = #line) {
        XCTAssertEqual(sas.map { Int($0.value) }, int(e, "sas_value"), what, line: line)
        XCTAssertEqual(sas?.text, text(e, "sas_text"), what, line: line)
    }

    // MARK: encoding.json

    func testEncoding() throws {
        let v = try object("encoding")
        for e in list(v, "lv_cat") {
            XCTAssertEqual(hex(LV.cat(hexList(e, "args"))), text(e, "output"))
        }
        for (key, variant) in [("base64url", Base64.Variant.urlUnpadded), ("base64", .standardPadded)] {
            let section = sub(v, key)
            XCTAssertFalse(list(section, "valid").isEmpty)
            for e in list(section, "valid") {
                XCTAssertEqual(Base64.encode(bytes(e, "bytes"), variant), text(e, "text"), key)
                XCTAssertEqual(Base64.decode(text(e, "text"), variant), bytes(e, "bytes"), key)
            }
            for t in strings(section, "invalid") { XCTAssertNil(Base64.decode(t, variant), "\(key): \(t)") }
        }
        let names = sub(v, "names")
        XCTAssertFalse(strings(names, "valid").isEmpty)
        for name in strings(names, "valid") { XCTAssertTrue(DisplayName.isValid(name), name) }
        let refused = list(names, "invalid")
        XCTAssertEqual(refused.count, DisplayName.refusedScalars.reduce(0) { $0 + $1.count }, "a name for every refused code point")
        for e in refused {
            let name = text(e, "text")
            XCTAssertTrue(name.unicodeScalars.contains { Int($0.value) == int(e, "code_point") }, name)
            XCTAssertFalse(DisplayName.isValid(name), "U+\(String(int(e, "code_point"), radix: 16))")
        }
        let codes = sub(v, "short_code")
        for e in list(codes, "format") { XCTAssertEqual(ShortCode(value: UInt32(int(e, "value")))?.text, text(e, "text")) }
        for e in list(codes, "parse_valid") {
            XCTAssertEqual(ShortCode(parsing: text(e, "input_text")).map { Int($0.value) }, int(e, "value"), text(e, "input_text"))
        }
        for t in strings(codes, "parse_invalid") { XCTAssertNil(ShortCode(parsing: t), t) }
    }

    // MARK: seed.json, sas.json

    func testSeed() throws {
        let entries = try XCTUnwrap(try load("seed") as? [J])
        XCTAssertFalse(entries.isEmpty)
        for e in entries {
            let sa = bytes(e, "a_ephemeral_secret"), sb = bytes(e, "b_ephemeral_secret")
            XCTAssertEqual(hex(publicKey(sa)), text(e, "a_ephemeral_public"))
            XCTAssertEqual(hex(publicKey(sb)), text(e, "b_ephemeral_public"))
            try checkSeed(
                e, secretA: sa, publicA: bytes(e, "a_ephemeral_public"), secretB: sb, publicB: bytes(e, "b_ephemeral_public"),
                fa: text(e, "a_fingerprint_text"), fb: text(e, "b_fingerprint_text"))
        }
    }

    func testSAS() throws {
        let entries = try XCTUnwrap(try load("sas") as? [J])
        XCTAssertFalse(entries.isEmpty)
        for e in entries {
            let seed = bytes(e, "seed"), th = bytes(e, "transcript_hash")
            let sas = try ShortCode.sas(seed: seed, transcriptHash: th)
            XCTAssertEqual(Int(sas.value), int(e, "value"))
            XCTAssertEqual(sas.text, text(e, "text"))
            // The intermediate values of 4.1.
            let info = LV.cat(LV.b("itsme-sas-v1"), th)
            XCTAssertEqual(hex(info), text(e, "info"))
            let okm = try HKDF.derive(ikm: seed, salt: [UInt8](), info: info, count: 8).unsafeExportedArray()
            XCTAssertEqual(hex(okm), text(e, "okm"))
            XCTAssertEqual(Int(okm.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 260_000), int(e, "value"))
        }
    }

    // MARK: qr.json, source-v5.json

    func testQR() throws {
        let v = try object("qr")
        let exchanges = list(v, "exchanges")
        XCTAssertEqual(exchanges.count, 3)
        for e in exchanges {
            let pa = sub(e, "a"), pb = sub(e, "b")
            var (a, ra) = try party(pa)
            var (b, rb) = try party(pb)
            let xa = try Exchange.qr(identity: a, store: try contacts(a), now: now, random: &ra)
            let xb = try Exchange.qr(identity: b, store: try contacts(b), now: now, random: &rb)
            for (x, p) in [(xa, pa), (xb, pb)] {
                XCTAssertEqual(x.outgoingText, text(p, "payload_text"))
                XCTAssertEqual(ExchangeProtocol.qrPrefix + Base64.encode(bytes(p, "payload"), .urlUnpadded), text(p, "payload_text"))
                XCTAssertEqual(hex(publicKey(bytes(p, "ephemeral_secret"))), text(p, "ephemeral_public"))
            }
            try xa.receive(Array(text(pb, "payload_text").utf8), now: now)
            try xb.receive(Array(text(pa, "payload_text").utf8), now: now)
            checkSAS(xa.sas, e)
            checkSAS(xb.sas, e)
            XCTAssertEqual(xa.peer?.name, text(pb, "name_text"))
            XCTAssertEqual(xb.peer?.name, text(pa, "name_text"))
            XCTAssertEqual(xa.peer?.fingerprint, text(pb, "fingerprint_text"))
            try checkSeed(
                e, secretA: bytes(pa, "ephemeral_secret"), publicA: bytes(pa, "ephemeral_public"), secretB: bytes(pb, "ephemeral_secret"),
                publicB: bytes(pb, "ephemeral_public"), fa: text(pa, "fingerprint_text"), fb: text(pb, "fingerprint_text"))
            XCTAssertEqual(hex(SHA256.hash(bytes(e, "transcript_input"))), text(e, "transcript_hash"))
        }
        // Each rejection received by a fresh exchange of its receiver (a party of the first exchange).
        let parties = [sub(exchanges[0], "a"), sub(exchanges[0], "b")]
        let rejections = list(v, "rejections")
        XCTAssertFalse(rejections.isEmpty)
        for r in rejections {
            let receiver = sub(r, "receiver")
            let p = try XCTUnwrap(parties.first { text($0, "identity_public") == text(receiver, "identity_public") }, text(r, "case_text"))
            var (id, rng) = try party(p)
            let x = try Exchange.qr(identity: id, store: try contacts(id), now: now, random: &rng)
            let what = text(r, "case_text")
            let kind = errorKind { try x.receive(Array(text(r, "payload_text").utf8), now: now) }
            XCTAssertEqual(kind.map(Self.errorName), text(r, "error_text"), what)
            // A text that is not a whole payload leaves the exchange as it was (5.2).
            let ends = try XCTUnwrap(r["ends_exchange"] as? Bool, what)
            XCTAssertEqual(x.state, ends ? .failed : .awaitingPeer, what)
        }
    }

    func testSourceV5() throws {
        let v = try object("source-v5")
        let imports = list(v, "imports")
        XCTAssertFalse(imports.isEmpty)
        for e in imports {
            let receiver = sub(e, "receiver")
            var (b, rng) = try party(receiver, name: "Bob")
            let x = try Exchange.qr(identity: b, store: try contacts(b), now: now, random: &rng)
            try x.receive(Array(text(e, "text").utf8), now: now)
            XCTAssertEqual(x.state, .imported)
            XCTAssertEqual(x.peer?.name, text(e, "name_text"))
            XCTAssertEqual(x.peer?.fingerprint, text(e, "fingerprint_text"))
            XCTAssertNil(x.peer?.publicKey)
            try checkSeed(
                e, secretA: bytes(receiver, "ephemeral_secret"), publicA: publicKey(bytes(receiver, "ephemeral_secret")), secretB: nil,
                publicB: bytes(e, "ephemeral_public"), fa: b.fingerprint, fb: text(e, "fingerprint_text"))
        }
        let receiver = sub(imports[0], "receiver")
        let rejections = list(v, "rejections")
        XCTAssertFalse(rejections.isEmpty)
        for r in rejections {
            var (b, rng) = try party(receiver, name: "Bob")
            let x = try Exchange.qr(identity: b, store: try contacts(b), now: now, random: &rng)
            let what = text(r, "case_text")
            let kind = errorKind { try x.receive(Array(text(r, "text").utf8), now: now) }
            XCTAssertEqual(kind.map(Self.errorName), text(r, "error_text"), what)
            // Section 6 (and 5.2 for a text that is no source text).
            XCTAssertEqual(x.state, flag(r, "ends_exchange") ? .failed : .awaitingPeer, what)
        }
        XCTAssertTrue(rejections.contains { text($0, "case_text").contains("the key's form first") && text($0, "error_text") == "malformed_message" })
    }

    // MARK: bluetooth.json

    func testBluetooth() throws {
        let v = try object("bluetooth")
        let exchanges = list(v, "exchanges")
        XCTAssertEqual(exchanges.count, 3)
        for e in exchanges {
            let pa = sub(e, "a"), pb = sub(e, "b")
            var (a, ra) = try party(pa)
            var (b, rb) = try party(pb)
            let xa = try Exchange.bluetooth(identity: a, store: try contacts(a), sessionCode: nil, now: now, random: &ra)
            let code = try XCTUnwrap(xa.sessionCode)
            XCTAssertEqual(code.text, text(e, "session_code_text"))
            XCTAssertEqual(Int(code.value), int(e, "session_code_value"))
            let draws = hexList(e, "session_code_draws")
            func value(_ d: [UInt8]) -> UInt32 { d.reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }
            XCTAssertEqual(draws.last.map { value($0) % 260_000 }, code.value)
            XCTAssertTrue(draws.dropLast().allSatisfy { value($0) >= 4_294_940_000 })
            let xb = try Exchange.bluetooth(
                identity: b, store: try contacts(b), sessionCode: ShortCode(parsing: text(e, "session_code_text")), now: now, random: &rb)
            var sentA: [[UInt8]] = [], sentB: [[UInt8]] = []
            func pump() throws {
                var moved = true
                while moved {
                    moved = false
                    if let f = xa.peekOutgoing() {
                        xa.markSent(); sentA.append(f); try xb.receive(f, now: now); moved = true
                    }
                    if let f = xb.peekOutgoing() {
                        xb.markSent(); sentB.append(f); try xa.receive(f, now: now); moved = true
                    }
                }
            }
            try pump()
            XCTAssertEqual(xa.state, .compareSAS)
            checkSAS(xa.sas, e)
            checkSAS(xb.sas, e)
            try xa.confirm(now: now)
            try xb.confirm(now: now)
            try pump()
            XCTAssertTrue(xa.flags.contains(.peerConfirmed))
            XCTAssertTrue(xb.flags.contains(.peerConfirmed))
            for (sent, p) in [(sentA, pa), (sentB, pb)] {
                XCTAssertEqual(sent.map(hex), ["hello", "key", "data_frame", "confirm_frame"].map { text(p, $0) })
            }
            XCTAssertEqual(xa.peer?.name, text(pb, "name_text"))
            XCTAssertEqual(xb.peer?.name, text(pa, "name_text"))
            try checkSeed(
                e, secretA: bytes(pa, "ephemeral_secret"), publicA: bytes(pa, "ephemeral_public"), secretB: bytes(pb, "ephemeral_secret"),
                publicB: bytes(pb, "ephemeral_public"), fa: text(pa, "fingerprint_text"), fb: text(pb, "fingerprint_text"))
            try checkPRK(e, salt: bytes(e, "th1"), label: "itsme-bluetooth-key-v1", keys: ("key_initiator", "key_responder"))
        }
    }

    // MARK: voice.json

    func testVoice() throws {
        let v = try object("voice")
        for e in list(v, "plans") {
            let r = VoiceProtocol.plan(now: Int64(int(e, "now")), lastWindow: optionalInt(e, "last_window").map(Int64.init))
            XCTAssertEqual(Int(r.window), int(e, "window"))
            XCTAssertEqual(Int(r.startsIn), int(e, "starts_in"))
        }
        let parse = sub(v, "code_parse")
        for e in list(parse, "valid") {
            XCTAssertEqual(VoiceProtocol.parseCode(text(e, "input_text")).map { Int($0) }, int(e, "value"), text(e, "input_text"))
        }
        for t in strings(parse, "invalid") { XCTAssertNil(VoiceProtocol.parseCode(t), t) }
        let sessions = list(v, "sessions")
        XCTAssertEqual(sessions.count, 4)
        for e in sessions {
            let seed = bytes(e, "seed"), window = Int64(int(e, "window"))
            let aPID = bytes(e, "a_pid"), bPID = bytes(e, "b_pid")
            XCTAssertEqual(try VoiceProtocol.words(seed: seed, window: window, pid: aPID), (e["a_words"] as? [Int]) ?? [-1])
            XCTAssertEqual(try VoiceProtocol.words(seed: seed, window: window, pid: bPID), (e["b_words"] as? [Int]) ?? [-1])
            XCTAssertEqual(try VoiceProtocol.lowerSelectsFirst(seed: seed, window: window), flag(e, "lower_selects_first"))
            let aFirst = text(e, "first_text") == "a"
            XCTAssertEqual(aPID.lexicographicallyPrecedes(bPID) == flag(e, "lower_selects_first"), aFirst)
            let (first, second) = aFirst ? (aPID, bPID) : (bPID, aPID)
            let w1 = int(e, "w1"), w2 = int(e, "w2")
            for (pid, side) in [(aPID, "a"), (bPID, "b")] {
                let code = try VoiceProtocol.code(
                    seed: seed, window: window, first: first, firstWord: w1, second: second, secondWord: w2, speaker: pid)
                XCTAssertEqual(Int(code), int(e, side + "_code_value"))
                XCTAssertEqual(VoiceProtocol.codeText(code), text(e, side + "_code_text"))
                let tag = try VoiceProtocol.tag(seed: seed, window: window, speaker: pid, deviceSecret: bytes(e, side + "_device_secret"))
                XCTAssertEqual(Int(tag), int(e, side + "_tag"))
            }
            let sid = try VoiceProtocol.sessionID(seed: seed, window: window)
            XCTAssertEqual(Int(sid), int(e, "session_id_value"))
            XCTAssertEqual(VoiceProtocol.sessionIDText(sid), text(e, "session_id_text"))
            XCTAssertEqual(
                Int(HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-first-selector-v1"), VoiceProtocol.u64(window)))[0]),
                int(e, "first_selector_byte"))
            // The HMAC messages of 9.2, 9.4 and 10.1.
            XCTAssertEqual(hex(LV.cat(LV.b("itsme-session-id-v1"), VoiceProtocol.u64(window))), text(e, "session_id_input"))
            XCTAssertEqual(Int(VoiceProtocol.prefix64(key: seed, bytes(e, "session_id_input")) % 2600), int(e, "session_id_value"))
            XCTAssertEqual(hex(LV.cat(LV.b("itsme-first-selector-v1"), VoiceProtocol.u64(window))), text(e, "first_selector_input"))
            XCTAssertEqual(hex(HMACSHA256.mac(key: seed, message: bytes(e, "first_selector_input"))), text(e, "first_selector_hmac"))
            for (pid, side) in [(aPID, "a"), (bPID, "b")] {
                let input = LV.cat(pid, VoiceProtocol.u64(window), bytes(e, side + "_device_secret"))
                XCTAssertEqual(hex(input), text(e, side + "_tag_input"))
                XCTAssertEqual(Int(VoiceProtocol.prefix64(key: bytes(e, "tag_key"), input) % 100), int(e, side + "_tag"))
            }
        }
        // Sessions bound to a call (9.7).
        let bound = list(v, "bound_sessions")
        XCTAssertEqual(bound.count, 2)
        for e in bound {
            let seed = bytes(e, "seed"), window = Int64(int(e, "window")), binding = try SecretBox(copying: bytes(e, "binding"))
            let aPID = bytes(e, "a_pid"), bPID = bytes(e, "b_pid")
            XCTAssertEqual(
                hex(LV.cat(LV.b("itsme-session-id-v1"), VoiceProtocol.u64(window), [1], bytes(e, "binding"))), text(e, "session_id_input"))
            let sid = try VoiceProtocol.sessionID(seed: seed, window: window, binding: binding)
            XCTAssertEqual(Int(sid), int(e, "session_id_value"))
            XCTAssertEqual(VoiceProtocol.sessionIDText(sid), text(e, "session_id_text"))
            XCTAssertEqual(Int(try VoiceProtocol.sessionID(seed: seed, window: window)), int(e, "unbound_session_id_value"))
            XCTAssertNotEqual(int(e, "session_id_value"), int(e, "unbound_session_id_value"))
            XCTAssertEqual(try VoiceProtocol.words(seed: seed, window: window, pid: aPID), (e["a_words"] as? [Int]) ?? [-1])
            XCTAssertEqual(try VoiceProtocol.words(seed: seed, window: window, pid: bPID), (e["b_words"] as? [Int]) ?? [-1])
            let aFirst = aPID.lexicographicallyPrecedes(bPID) == (try VoiceProtocol.lowerSelectsFirst(seed: seed, window: window))
            XCTAssertEqual(aFirst, text(e, "first_text") == "a")
            let (first, second) = aFirst ? (aPID, bPID) : (bPID, aPID)
            let (w1, w2) = (int(e, "w1"), int(e, "w2"))
            let codes = try VoiceProtocol.codes(
                seed: seed, window: window, first: first, firstWord: w1, second: second, secondWord: w2, speakers: [aPID, bPID],
                binding: binding)
            let unbound = try VoiceProtocol.codes(
                seed: seed, window: window, first: first, firstWord: w1, second: second, secondWord: w2, speakers: [aPID, bPID])
            for (i, side) in ["a", "b"].enumerated() {
                XCTAssertEqual(Int(codes[i]), int(e, side + "_code_value"))
                XCTAssertEqual(VoiceProtocol.codeText(codes[i]), text(e, side + "_code_text"))
                XCTAssertEqual(Int(unbound[i]), int(e, "unbound_" + side + "_code_value"))
            }
            XCTAssertEqual(
                hex(LV.cat(LV.b("itsme-interactive-code-v1"), first, [UInt8(w1)], second, [UInt8(w2)], [1], bytes(e, "binding"))),
                text(e, "code_info"))
        }
        for e in list(v, "degradation") {
            let seed = bytes(e, "seed"), pid = bytes(e, "pid"), secret = bytes(e, "secret")
            let mac = try secret.withBytes { try DegradationCode.mac(seed: seed, pid: pid, secret: $0) }
            XCTAssertEqual(hex(mac), text(e, "mac"))
            XCTAssertEqual(hex(LV.cat(pid, secret)), text(e, "mac_input"))
            XCTAssertEqual(hex(Array(HMACSHA256.mac(key: bytes(e, "key"), message: bytes(e, "mac_input")).prefix(5))), text(e, "mac"))
            XCTAssertEqual(DegradationCode.format(secret + mac), text(e, "code_text"))
            XCTAssertEqual(DegradationCode.parse(text(e, "code_text")), secret + mac)
        }
        let degradationParse = sub(v, "degradation_parse")
        for e in list(degradationParse, "valid") {
            XCTAssertEqual(DegradationCode.parse(text(e, "input_text")).map(hex), text(e, "bytes"), text(e, "input_text"))
        }
        XCTAssertFalse(strings(degradationParse, "invalid").isEmpty)
        for t in strings(degradationParse, "invalid") { XCTAssertNil(DegradationCode.parse(t), t) }
        // Section 9.3's reading procedure, whole and block by block.
        let streams = list(v, "word_reading")
        XCTAssertEqual(streams.count, 4)
        for e in streams {
            let stream = bytes(e, "stream"), what = text(e, "case_text")
            var reader = VoiceProtocol.WordReader()
            let complete = reader.read(stream)
            XCTAssertEqual(complete ? reader.words : nil, e["words"] as? [Int], what)
            var byBlock = VoiceProtocol.WordReader()
            for i in stride(from: 0, to: stream.count, by: 32) where !byBlock.isComplete {
                byBlock.read(stream[i..<min(i + 32, stream.count)])
            }
            XCTAssertEqual(byBlock.words, reader.words, what)
        }
    }

    // MARK: online-verify.json

    /// One side of an Online Verify session of the file: its identity, its
    /// contact (the session's seed, both device secrets), its random source.
    func onlineVerifySide(_ session: J, _ side: String, in dir: String, binding: [UInt8]? = nil) throws -> OnlineVerify {
        let me = sub(session, side), peer = sub(session, side == "a" ? "b" : "a")
        let (id, _) = try identity(bytes(me, "identity_random_seed"), name: side == "a" ? "Alice" : "Bob")
        XCTAssertEqual(hex(id.publicKey), text(me, "pid"))
        let store = try ContactStore(path: dir + "/\(side)-\(UUID().uuidString).db", identity: id)
        let contact = try store.add(
            name: "Peer", publicKey: bytes(peer, "pid"), seed: try SecretBytes(copying: bytes(session, "seed")), method: .qr, now: now)
        try store.setDeviceSecrets(
            id: contact, mine: try SecretBytes(copying: bytes(me, "device_secret")), theirs: try SecretBytes(copying: bytes(peer, "device_secret")))
        let window = Int64(int(session, "window"))
        var g = DeterministicRandom(seed: bytes(me, "random_seed"))
        return try OnlineVerify(
            store: store, contactID: contact, window: window, binding: binding, now: window * VoiceProtocol.windowSeconds, random: &g)
    }

    /// Moves the messages of two sides of session `e` until both are quiet,
    /// and checks each side sent the file's messages in order.
    func exchangeOnlineVerify(_ va: OnlineVerify, _ vb: OnlineVerify, at t: Int64, as e: J) throws {
        var log: [(Bool, [UInt8])] = []
        var moved = true
        while moved {
            moved = false
            for (from, to) in [(va, vb), (vb, va)] {
                if let m = from.takeOutgoing() { log.append((from.isInitiator, m)); try to.receive(m, now: t); moved = true }
            }
        }
        XCTAssertEqual(log.filter { $0.0 }.map { hex($0.1) }, ["commit", "key_i", "proof_message_i"].map { text(e, $0) })
        XCTAssertEqual(log.filter { !$0.0 }.map { hex($0.1) }, ["key_r", "proof_message_r"].map { text(e, $0) })
    }

    /// 11.1's room message (HMAC'd with the seed to the room ID) and 11.3's `prk`.
    func checkOnlineVerifyIntermediates(_ e: J, line: UInt = #line) throws {
        let window = Int64(int(e, "window"))
        XCTAssertEqual(hex(LV.cat(LV.b("itsme-room-id-v1"), VoiceProtocol.u64(window))), text(e, "room_input"), line: line)
        XCTAssertEqual(hex(Array(HMACSHA256.mac(key: bytes(e, "seed"), message: bytes(e, "room_input")).prefix(16))), text(e, "room"), line: line)
        try checkPRK(e, salt: bytes(e, "salt"), label: "itsme-ov-key-v1", keys: ("k_i", "k_r"), line: line)
    }

    func testOnlineVerify() throws {
        let v = try object("online-verify")
        let sessions = list(v, "sessions")
        XCTAssertEqual(sessions.count, 3)
        for e in sessions {
            let dir = try temporaryDirectory()
            let va = try onlineVerifySide(e, "a", in: dir)
            let vb = try onlineVerifySide(e, "b", in: dir)
            let t = Int64(int(e, "window")) * VoiceProtocol.windowSeconds
            let refA = sub(e, "a")["profile_reference"] != nil ? bytes(sub(e, "a"), "profile_reference") : nil
            let refB = sub(e, "b")["profile_reference"] != nil ? bytes(sub(e, "b"), "profile_reference") : nil
            if let refA, let refB {
                try va.shareProfile(reference: refA)
                try vb.shareProfile(reference: refB)
            }
            XCTAssertEqual(va.isInitiator, text(e, "initiator_text") == "a")
            XCTAssertEqual(vb.isInitiator, text(e, "initiator_text") == "b")
            try checkOnlineVerifyIntermediates(e)
            try exchangeOnlineVerify(va, vb, at: t, as: e)
            checkSAS(va.sas, e)
            checkSAS(vb.sas, e)
            if let refA, let refB {
                try va.confirm(now: t)
                try vb.confirm(now: t)
                XCTAssertEqual(try va.peerProfileReference().unsafeExportedArray(), refB)
                XCTAssertEqual(try vb.peerProfileReference().unsafeExportedArray(), refA)
            }
        }
        // Sessions bound to a call (11.4): the KEYs carry `bind`, and a peer
        // bound differently ends both sides in their own state.
        let bound = list(v, "bound_sessions")
        XCTAssertEqual(bound.map { text($0, "state_text") }, ["compare_sas", "binding_differs", "other_call"])
        for e in bound {
            let dir = try temporaryDirectory()
            let bindings = ["a", "b"].map { e[$0 + "_binding"] is String ? bytes(e, $0 + "_binding") : nil }
            let va = try onlineVerifySide(e, "a", in: dir, binding: bindings[0])
            let vb = try onlineVerifySide(e, "b", in: dir, binding: bindings[1])
            let t = Int64(int(e, "window")) * VoiceProtocol.windowSeconds
            try checkOnlineVerifyIntermediates(e)
            for (session, side) in [(va, "a"), (vb, "b")] {
                let bind = e[side + "_bind"] as? String
                XCTAssertEqual(session.isInitiator ? text(e, "key_i").count : text(e, "key_r").count, bind == nil ? 132 : 196)
            }
            try exchangeOnlineVerify(va, vb, at: t, as: e)
            let expected: OnlineVerify.State =
                switch text(e, "state_text") {
                case "compare_sas": .compareSAS
                case "binding_differs": .bindingDiffers
                default: .otherCall
                }
            XCTAssertEqual(va.state, expected)
            XCTAssertEqual(vb.state, expected)
            if expected == .compareSAS {
                checkSAS(va.sas, e)
                checkSAS(vb.sas, e)
            } else {
                XCTAssertNil(va.sas)
                XCTAssertNil(e["sas_value"])
            }
        }
        // Refusals (11.2), each against a fresh side of its session.
        let rejections = list(v, "rejections")
        XCTAssertFalse(rejections.isEmpty)
        for r in rejections {
            let what = text(r, "case_text"), side = text(r, "receiver_text")
            let session = sessions[int(r, "session")]
            let x = try onlineVerifySide(session, side, in: try temporaryDirectory())
            XCTAssertEqual(x.isInitiator, side == text(session, "initiator_text"), what)
            let t = Int64(int(session, "window")) * VoiceProtocol.windowSeconds
            let messages = hexList(r, "messages")
            var failed: String?
            for (n, m) in messages.enumerated() {
                let kind = errorKind { try x.receive(m, now: t) }
                if n < messages.count - 1 { XCTAssertNil(kind, "\(what): message \(n)") } else { failed = kind.map(Self.errorName) }
            }
            XCTAssertEqual(failed, text(r, "result"), what)
        }
    }

    // MARK: pin-update.json

    func testPinUpdateSessions() throws {
        let v = try object("pin-update")
        let sessions = list(v, "sessions")
        XCTAssertEqual(sessions.count, 2)
        for e in sessions {
            let dir = try temporaryDirectory()
            let seed = bytes(e, "seed"), w = Int64(int(e, "window"))
            let t = w * VoiceProtocol.windowSeconds
            func side(_ name: String) throws -> PinUpdate {
                let me = sub(e, name), peer = sub(e, name == "a" ? "b" : "a")
                let (id, _) = try identity(bytes(me, "identity_random_seed"), name: name == "a" ? "Alice" : "Bob")
                XCTAssertEqual(hex(id.publicKey), text(me, "pid"))
                let store = try ContactStore(path: dir + "/\(name).db", identity: id)
                let contact = try store.add(name: "Peer", publicKey: bytes(peer, "pid"), seed: try SecretBytes(copying: seed), method: .qr, now: now)
                var g = DeterministicRandom(seed: bytes(me, "random_seed"))
                return try PinUpdate(store: store, contactID: contact, window: w, now: t, random: &g)
            }
            let ua = try side("a"), ub = try side("b")
            XCTAssertEqual(ua.isInitiator, text(e, "initiator_text") == "a")
            XCTAssertEqual(ua.sessionCode.text, text(e, "session_code_text"))
            XCTAssertEqual(Int(ub.sessionCode.value), int(e, "session_code_value"))
            // 10.3's session code message, HMAC'd with the seed, and prk.
            XCTAssertEqual(hex(LV.cat(LV.b("itsme-pin-update-code-v1"), VoiceProtocol.u64(w))), text(e, "session_code_input"))
            XCTAssertEqual(Int(VoiceProtocol.prefix64(key: seed, bytes(e, "session_code_input")) % 260_000), int(e, "session_code_value"))
            try checkPRK(e, salt: bytes(e, "salt"), label: "itsme-pin-update-key-v1", keys: ("k_i", "k_r"))
            var log: [(Bool, [UInt8])] = []
            var moved = true
            while moved {
                moved = false
                for (from, to) in [(ua, ub), (ub, ua)] {
                    if let f = from.peekOutgoing() { from.markSent(); log.append((from.isInitiator, f)); try to.receive(f, now: t); moved = true }
                }
            }
            XCTAssertEqual(ua.state, .done)
            XCTAssertEqual(ub.state, .done)
            XCTAssertEqual(log.filter { $0.0 }.map { hex($0.1) }, ["key_i", "new_i", "done"].map { text(e, $0) })
            XCTAssertEqual(log.filter { !$0.0 }.map { hex($0.1) }, ["key_r", "new_r"].map { text(e, $0) })
        }
    }

    /// Section 10.3's commit order: the steps of each case replayed, and
    /// after each what both sides store, say, show and accept.
    func testPinUpdateCommitOrder() throws {
        let v = try object("pin-update")
        let session = try XCTUnwrap(list(v, "sessions").first)
        let cases = list(v, "commit_order")
        XCTAssertEqual(cases.count, 2)
        let seed = bytes(session, "seed")
        let aInit = text(session, "initiator_text") == "a"
        for c in cases {
            let what = text(c, "case_text")
            XCTAssertEqual(int(c, "session"), 0)
            let dir = try temporaryDirectory()
            let tagWindow = Int64(int(c, "tag_window"))
            let oldA = bytes(c, "a_device_secret"), oldB = bytes(c, "b_device_secret")
            let (ia, _) = try identity(bytes(sub(session, "a"), "identity_random_seed"), name: "Alice")
            let (ib, _) = try identity(bytes(sub(session, "b"), "identity_random_seed"), name: "Bob")
            func side(_ me: Identity, _ peer: Identity, mine: [UInt8], theirs: [UInt8]) throws -> PairSide {
                let store = try ContactStore(path: dir + "/\(me.name).db", identity: me)
                let id = try store.add(name: peer.name, publicKey: peer.publicKey, seed: try SecretBytes(copying: seed), method: .qr, now: now)
                try store.setDeviceSecrets(id: id, mine: try SecretBytes(copying: mine), theirs: try SecretBytes(copying: theirs))
                try store.setState(id: id, .degraded, acknowledged: false, now: now)
                return PairSide(identity: me, store: store, contactID: id)
            }
            let sa = try side(ia, ib, mine: oldA, theirs: oldB), sb = try side(ib, ia, mine: oldB, theirs: oldA)
            /// The side's state as the file gives it.
            func check(_ s: PairSide, _ peer: Identity, _ expected: J, _ step: String) throws {
                let d = try s.store.deviceSecrets(id: s.contactID)
                let (mine, theirs) = (d.mine.unsafeExportedArray(), d.theirs.unsafeExportedArray())
                let (pMine, pTheirs) = (d.pendingMine.unsafeExportedArray(), d.pendingTheirs.unsafeExportedArray())
                let previous = d.previousTheirs.unsafeExportedArray()
                let at = "\(what): \(step): \(s.identity.name)"
                XCTAssertEqual(hex(mine), text(expected, "mine"), at)
                XCTAssertEqual(hex(theirs), text(expected, "theirs"), at)
                XCTAssertEqual(hex(pMine), text(expected, "pending_mine"), at)
                XCTAssertEqual(hex(pTheirs), text(expected, "pending_theirs"), at)
                XCTAssertEqual(hex(previous), text(expected, "previous_theirs"), at)
                XCTAssertEqual(d.committed, flag(expected, "committed"), at)
                XCTAssertEqual("\(try s.store.contact(id: s.contactID).state)", text(expected, "state_text"), at)
                // What it says, accepts and shows follows from those (10.3), and is given as tags.
                let says = bytes(expected, "says"), accepts = hexList(expected, "accepts")
                let shows = expected["shows"] as? String
                XCTAssertEqual(says, d.committed ? pMine : mine, at)
                XCTAssertEqual(accepts, [theirs, previous, pTheirs].filter { !$0.isEmpty }, at)
                XCTAssertEqual(shows, d.committed && !pTheirs.isEmpty ? hex(pTheirs) : (theirs.isEmpty ? nil : hex(theirs)), at)
                func tag(_ pid: [UInt8], _ secret: [UInt8]) throws -> Int {
                    Int(try VoiceProtocol.tag(seed: seed, window: tagWindow, speaker: pid, deviceSecret: secret))
                }
                XCTAssertEqual(try tag(s.identity.publicKey, says), int(expected, "says_tag"), at)
                XCTAssertEqual(try accepts.map { try tag(peer.publicKey, $0) }, (expected["accepts_tags"] as? [Int]) ?? [-1], at)
                XCTAssertEqual(try shows.map { try tag(peer.publicKey, Hex.decode($0)!) }, optionalInt(expected, "shows_tag"), at)
            }
            /// What a side says and shows now.
            func s(_ side: PairSide) throws -> (says: [UInt8], shows: [UInt8]?) {
                let d = try side.store.deviceSecrets(id: side.contactID)
                let (mine, theirs) = (d.mine.unsafeExportedArray(), d.theirs.unsafeExportedArray())
                let (pMine, pTheirs) = (d.pendingMine.unsafeExportedArray(), d.pendingTheirs.unsafeExportedArray())
                return (d.committed ? pMine : mine, d.committed && !pTheirs.isEmpty ? pTheirs : (theirs.isEmpty ? nil : theirs))
            }
            let updates = list(c, "updates")
            XCTAssertEqual(text(updates[0], "a_random_seed"), text(sub(session, "a"), "random_seed"))
            var running: [Int: (a: PinUpdate, b: PinUpdate)] = [:]
            var clock = now + 10_000
            let steps = list(c, "steps")
            XCTAssertEqual(text(steps[0], "step_text"), "before")
            for step in steps {
                let name = text(step, "step_text")
                if let voice = step["voice"] as? J {
                    let before = (a: try s(sa), b: try s(sb))
                    let (va, vb) = try voiceCodes(sa, sb, now: clock)
                    clock += 1000
                    XCTAssertEqual(Int(va.window), int(voice, "window"), what)
                    // What each session says and shows is the tag of the secret it said and showed before.
                    XCTAssertEqual(va.yourTag, try VoiceProtocol.tag(seed: seed, window: va.window, speaker: ia.publicKey, deviceSecret: before.a.says))
                    XCTAssertEqual(vb.yourTag, try VoiceProtocol.tag(seed: seed, window: vb.window, speaker: ib.publicKey, deviceSecret: before.b.says))
                    XCTAssertEqual(va.theirTag, try before.a.shows.map { try VoiceProtocol.tag(seed: seed, window: va.window, speaker: ib.publicKey, deviceSecret: $0) })
                    XCTAssertEqual(vb.theirTag, try before.b.shows.map { try VoiceProtocol.tag(seed: seed, window: vb.window, speaker: ia.publicKey, deviceSecret: $0) })
                    XCTAssertEqual(va.yourTag.map { Int($0) }, int(voice, "a_says_tag"), what)
                    XCTAssertEqual(vb.yourTag.map { Int($0) }, int(voice, "b_says_tag"), what)
                    XCTAssertEqual(va.theirTag.map { Int($0) }, optionalInt(voice, "a_shows_tag"), what)
                    XCTAssertEqual(vb.theirTag.map { Int($0) }, optionalInt(voice, "b_shows_tag"), what)
                    let end = va.window * 30 + 10
                    let oa = try va.check(heardCode: VoiceProtocol.codeText(vb.yourCode!), heardTag: vb.yourTag!, now: end)
                    let ob = try vb.check(heardCode: VoiceProtocol.codeText(va.yourCode!), heardTag: va.yourTag!, now: end)
                    XCTAssertEqual("\(oa)", text(voice, "a_outcome_text"), what)
                    XCTAssertEqual("\(ob)", text(voice, "b_outcome_text"), what)
                } else if name != "before" {
                    let u = int(step, "update"), frame = text(step, "frame_text")
                    let update = updates[u]
                    let window = Int64(int(update, "window"))
                    let t = window * VoiceProtocol.windowSeconds
                    if running[u] == nil {
                        var ga = DeterministicRandom(seed: bytes(update, "a_random_seed"))
                        var gb = DeterministicRandom(seed: bytes(update, "b_random_seed"))
                        running[u] = (
                            try PinUpdate(store: sa.store, contactID: sa.contactID, window: window, now: t, random: &ga),
                            try PinUpdate(store: sb.store, contactID: sb.contactID, window: window, now: t, random: &gb)
                        )
                    }
                    let (ua, ub) = running[u]!
                    let fromA = (frame.hasSuffix("_i") || frame == "done") == aInit
                    XCTAssertEqual(text(step, "to_text"), fromA ? "b" : "a", what)
                    let (from, to) = fromA ? (ua, ub) : (ub, ua)
                    let f = try XCTUnwrap(from.peekOutgoing(), "\(what): \(name)")
                    from.markSent()
                    XCTAssertEqual(hex(f), text(step, "frame"), "\(what): \(name)")
                    if u == 0 { XCTAssertEqual(hex(f), text(session, frame), "\(what): \(name)") }
                    if name.hasPrefix("delivered: ") {
                        try to.receive(f, now: t)
                    } else {
                        XCTAssertTrue(name.hasPrefix("lost: "), name)
                    }
                }
                try check(sa, ib, sub(step, "a"), name)
                try check(sb, ia, sub(step, "b"), name)
            }
        }
    }
}

import Foundation
import XCTest

@testable import ItsMeKit

/// rollcall.json (PROTOCOL.md 20): the formulas through the library's own
/// derivations, then the whole roll call replayed through `RollCall` with
/// the parties' identities and contacts, and each refusal with its code.
final class RollCallVectorTests: XCTestCase {
    typealias J = [String: Any]

    override func setUpWithError() throws { try Sodium.initialize() }

    private func vectors() throws -> J {
        let url = ProtocolVectorTests.directory.appendingPathComponent("rollcall.json")
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? J)
    }

    private func bytes(_ v: J, _ key: String) throws -> [UInt8] { try XCTUnwrap(Hex.decode(try XCTUnwrap(v[key] as? String)), key) }
    private func list(_ v: J, _ key: String) throws -> [J] { try XCTUnwrap(v[key] as? [J], key) }
    private func text(_ v: J, _ key: String) throws -> String { try XCTUnwrap(v[key] as? String, key) }

    func testTheFormulas() throws {
        let v = try vectors()
        let code = try RemoteCode(parsing: try text(v, "meeting_code_text"))
        let rcid = RollCallProtocol.rollCallID(code)
        XCTAssertEqual(rcid, try bytes(v, "rcid"))
        XCTAssertEqual(RollCallProtocol.roomID(code), try bytes(v, "room_id"))
        let participants = try list(v, "participants")
        let keys = Dictionary(uniqueKeysWithValues: try participants.map { (try text($0, "name_text"), try bytes($0, "identity_public")) })
        let contacts = try list(v, "contacts")
        func seed(_ a: String, _ b: String) throws -> [UInt8]? {
            try contacts.first { ($0["owner_text"] as? String) == a && ($0["peer_text"] as? String) == b }.map { try bytes($0, "seed") }
        }
        var hashes: [[UInt8]] = []
        for p in participants {
            let helloBytes = try bytes(p, "hello")
            let hello = try RollCallHello(parsing: helloBytes)
            XCTAssertEqual(hello.hash, try bytes(p, "hello_hash"))
            XCTAssertEqual(hello.nonce, try bytes(p, "nonce"))
            hashes.append(hello.hash)
            let name = try text(p, "name_text")
            for t in try list(p, "tags_for_contacts") {
                let to = try text(t, "to_text")
                let s = try XCTUnwrap(try seed(name, to))
                let tag = RollCallProtocol.presenceTag(
                    seed: s, rollCallID: rcid, window: hello.window, nonce: hello.nonce, from: try XCTUnwrap(keys[name]),
                    to: try XCTUnwrap(keys[to]))
                XCTAssertEqual(tag, try bytes(t, "tag"))
                XCTAssertTrue(hello.contains(tag))
            }
        }
        let roster = RollCallProtocol.rosterHash(rollCallID: rcid, sortedHelloHashes: hashes.sorted { $0.lexicographicallyPrecedes($1) })
        XCTAssertEqual(roster, try bytes(v, "roster"))
        let hashByName = Dictionary(uniqueKeysWithValues: zip(try participants.map { try text($0, "name_text") }, hashes))
        for said in try list(v, "saids") {
            let parsed = try RollCallSaid(parsing: try bytes(said, "said"))
            let speaker = try text(said, "name_text")
            XCTAssertEqual(parsed.roster, roster)
            XCTAssertEqual(parsed.speaker, hashByName[speaker])
            for (position, entry) in try list(said, "entries").enumerated() {
                XCTAssertEqual(parsed.entries[position], try bytes(entry, "entry"))
                guard entry["padding"] as? Bool == false else { continue }
                let listener = try text(entry, "for_text")
                let s = try XCTUnwrap(try seed(speaker, listener))
                let key = try RollCallProtocol.codeKey(
                    seed: s, roster: roster, rollCallID: rcid, speakerHello: try XCTUnwrap(hashByName[speaker]),
                    listenerHello: try XCTUnwrap(hashByName[listener]), speaker: try XCTUnwrap(keys[speaker]),
                    listener: try XCTUnwrap(keys[listener]))
                XCTAssertEqual(key.unsafeExportedArray(), try bytes(entry, "key"))
                let dtag = try RollCallProtocol.deviceTag(
                    seed: s, speaker: try XCTUnwrap(keys[speaker]), roster: roster,
                    deviceSecret: SecretBox(try SecretBytes(copying: try bytes(entry, "device_secret"))))
                XCTAssertEqual(dtag, try bytes(entry, "device_tag"))
                let plain = try bytes(entry, "plaintext")
                XCTAssertEqual(Array(plain.dropFirst(2)), dtag)
                XCTAssertEqual(Int(plain[0]) << 8 | Int(plain[1]), said["code"] as? Int)
                XCTAssertEqual(VoiceProtocol.codeText(UInt32(try XCTUnwrap(said["code"] as? Int))), try text(said, "code_text"))
                let sealed = try AEAD.seal(
                    .chacha20Poly1305, key: key, nonce: RollCallProtocol.entryNonce, plaintext: plain,
                    aad: RollCallProtocol.entryAAD(roster: roster))
                XCTAssertEqual(sealed, try bytes(entry, "entry"))
            }
        }
    }

    /// The parties rebuilt (identities from their random seeds, contacts
    /// from `contacts`), and each roll call made again as the vectors did.
    func testTheLibraryReplaysTheRollCallAndItsRefusals() throws {
        let v = try vectors()
        let code = try RemoteCode(parsing: try text(v, "meeting_code_text"))
        let t = Int64(try XCTUnwrap(v["now"] as? Int))
        let participants = try list(v, "participants")
        let names = try participants.map { try text($0, "name_text") }
        let directory = NSTemporaryDirectory() + "itsme-rcv-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var stores: [String: ContactStore] = [:]
        var ids: [String: [String: Int64]] = [:]
        for p in participants {
            var r = DeterministicRandom(seed: try bytes(p, "identity_random_seed"))
            let identity = try Identity.create(store: MemorySecretStore(), name: try text(p, "name_text"), random: &r)
            XCTAssertEqual(identity.publicKey, try bytes(p, "identity_public"))
            stores[identity.name] = try ContactStore(path: directory + "/\(identity.name).db", identity: identity)
        }
        let keys = Dictionary(uniqueKeysWithValues: try participants.map { (try text($0, "name_text"), try bytes($0, "identity_public")) })
        for c in try list(v, "contacts") {
            let owner = try text(c, "owner_text"), peer = try text(c, "peer_text")
            let store = try XCTUnwrap(stores[owner])
            let id = try store.add(
                name: peer, publicKey: try XCTUnwrap(keys[peer]), seed: try SecretBytes(copying: try bytes(c, "seed")), method: .qr,
                now: t - 7_000)
            let mine = try bytes(c, "device_secret_mine"), theirs = try bytes(c, "device_secret_theirs")
            if !mine.isEmpty {
                try store.setDeviceSecrets(id: id, mine: try SecretBytes(copying: mine), theirs: try SecretBytes(copying: theirs))
            }
            ids[owner, default: [:]][peer] = id
        }
        var sources = try participants.map { DeterministicRandom(seed: try bytes($0, "random_seed")) }
        var calls: [RollCall] = []
        for (i, name) in names.enumerated() {
            calls.append(try RollCall(store: try XCTUnwrap(stores[name]), meetingCode: code, now: t, random: &sources[i]))
        }
        let hellos = calls.map { $0.takeOutgoing() }
        for (i, p) in participants.enumerated() { XCTAssertEqual(hellos[i], try bytes(p, "hello")) }
        for (i, hello) in hellos.enumerated() {
            for (j, call) in calls.enumerated() where j != i { try call.receive(try XCTUnwrap(hello), from: i + 1, now: t) }
        }
        for (i, call) in calls.enumerated() {
            XCTAssertEqual(call.rosterHash, try bytes(v, "roster"))
            try call.confirmRoster(call.rosterHash, now: t, random: &sources[i])
            try call.confirmSaid(now: t, random: &sources[i])
        }
        let saids = try list(v, "saids")
        let sent = calls.map { $0.takeOutgoing() }
        for (i, said) in saids.enumerated() {
            XCTAssertEqual(sent[i], try bytes(said, "said"))
            XCTAssertEqual(calls[i].myCode, try text(said, "code_text"))
            for (j, call) in calls.enumerated() where j != i { try call.receive(try XCTUnwrap(sent[i]), from: i + 1, now: t) }
        }
        let stateText: [RollCall.ParticipantState: String] = [
            .notYet: "not_yet", .verified: "verified", .wrong: "wrong", .deviceChanged: "device_changed",
            .verifiedTagUnchecked: "verified_tag_unchecked", .refused: "refused", .unknown: "unknown",
        ]
        for outcome in try list(v, "outcomes") {
            let listener = try text(outcome, "listener_text"), speaker = try text(outcome, "speaker_text")
            let li = try XCTUnwrap(names.firstIndex(of: listener)), si = try XCTUnwrap(names.firstIndex(of: speaker))
            let id = try XCTUnwrap(ids[listener]?[speaker])
            let index = try XCTUnwrap(calls[li].participants.first { $0.contactID == id }?.index)
            let state = try calls[li].enterHeard(try text(saids[si], "code_text"), from: index, now: t)
            XCTAssertEqual(stateText[state], try text(outcome, "state_text"), "\(listener) hearing \(speaker)")
        }
        // Refusals, each at a fresh roll call of Ben's.
        let benIndex = try XCTUnwrap(names.firstIndex(of: "Ben"))
        let caiHello = try bytes(participants[try XCTUnwrap(names.firstIndex(of: "Cai"))], "hello")
        for r in try list(v, "rejections") {
            var random = DeterministicRandom(seed: try bytes(participants[benIndex], "random_seed"))
            let call = try RollCall(store: try XCTUnwrap(stores["Ben"]), meetingCode: code, now: t, random: &random)
            _ = call.takeOutgoing()
            let messages = try XCTUnwrap(r["messages"] as? [String]).map { try XCTUnwrap(Hex.decode($0)) }
            for m in messages.dropLast() { try call.receive(m, from: m == caiHello ? 3 : 1, now: t) }
            var got = "accepted"
            do {
                let last = try XCTUnwrap(messages.last)
                try call.receive(last, from: last == caiHello ? 3 : 1, now: t)
            } catch let e as ItsMeError {
                got = e.kind.symbol.replacingOccurrences(of: "ITSME_E_", with: "").lowercased()
            }
            let expected = try text(r, "result"), name = try text(r, "case_text")
            XCTAssertEqual(got, expected, name)
        }
    }
}

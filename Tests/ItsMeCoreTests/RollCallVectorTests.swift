import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

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
        let sid = RollCallProtocol.sessionID(rollCallID: rcid, binding: nil)
        XCTAssertEqual(sid, try bytes(v, "sid"))
        let participants = try list(v, "participants")
        let keys = Dictionary(uniqueKeysWithValues: try participants.map { (try text($0, "name_text"), try bytes($0, "identity_public")) })
        let contacts = try list(v, "contacts")
        func seed(_ a: String, _ b: String) throws -> [UInt8]? {
            try contacts.first { ($0["owner_text"] as? String) == a && ($0["peer_text"] as? String) == b }.map { try bytes($0, "seed") }
        }
        var names: [[UInt8]] = []
        for p in participants {
            let hello = try RollCallHello(parsing: try bytes(p, "hello"), rollCallID: rcid)
            XCTAssertEqual(hello.name, try bytes(p, "name"))
            XCTAssertEqual(hello.name, SHA256.hash(try bytes(p, "hello_body")))
            XCTAssertEqual(hello.key, try bytes(p, "roll_call_key"))
            XCTAssertEqual(try Ed25519.keyPair(seed: try SecretBytes(copying: try bytes(p, "roll_call_key_seed"))).publicKey, hello.key)
            names.append(hello.name)
            let name = try text(p, "name_text")
            for t in try list(p, "tags_for_contacts") {
                let to = try text(t, "to_text")
                let tag = RollCallProtocol.presenceTag(
                    seed: try XCTUnwrap(try seed(name, to)), sessionID: sid, key: hello.key, from: try XCTUnwrap(keys[name]),
                    to: try XCTUnwrap(keys[to]))
                XCTAssertEqual(tag, try bytes(t, "tag"))
                XCTAssertTrue(hello.contains(tag))
            }
        }
        let sorted = names.sorted { $0.lexicographicallyPrecedes($1) }
        let roster = RollCallProtocol.rosterHash(rollCallID: rcid, sortedNames: sorted)
        XCTAssertEqual(roster, try bytes(v, "roster"))
        for view in try list(v, "views") {
            let parsed = try RollCallView(parsing: try bytes(view, "view"))
            try parsed.checkSignature(rollCallID: rcid)
            XCTAssertEqual(parsed.roster, roster)
            XCTAssertEqual(parsed.names, sorted)
            XCTAssertEqual(parsed.names.map { Hex.encodeUpper($0).lowercased() }, view["names"] as? [String])
            XCTAssertEqual(Int(parsed.seq), view["seq"] as? Int)
            XCTAssertEqual(parsed.slot, view["slot"] as? Int)
            XCTAssertTrue(parsed.said)
        }
        let nameOf = Dictionary(uniqueKeysWithValues: zip(try participants.map { try text($0, "name_text") }, names))
        for said in try list(v, "saids") {
            let parsed = try RollCallSaid(parsing: try bytes(said, "said"), rollCallID: rcid)
            let speaker = try text(said, "name_text")
            XCTAssertEqual(parsed.roster, roster)
            XCTAssertEqual(parsed.speaker, try bytes(participants.first { ($0["name_text"] as? String) == speaker }!, "roll_call_key"))
            for (position, entry) in try list(said, "entries").enumerated() {
                XCTAssertEqual(parsed.entries[position], try bytes(entry, "entry"))
                guard entry["padding"] as? Bool == false else { continue }
                let listener = try text(entry, "for_text")
                let s = try XCTUnwrap(try seed(speaker, listener))
                let key = try RollCallProtocol.codeKey(
                    seed: s, roster: roster, sessionID: sid, speakerName: try XCTUnwrap(nameOf[speaker]),
                    listenerName: try XCTUnwrap(nameOf[listener]), speaker: try XCTUnwrap(keys[speaker]),
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
        for p in try list(try XCTUnwrap(v["bound"] as? J), "participants") {
            let binding = try bytes(p, "binding")
            XCTAssertEqual(RollCallProtocol.sessionID(rollCallID: rcid, binding: binding), try bytes(p, "sid"))
            XCTAssertEqual(RollCallProtocol.bindingCheck(rollCallID: rcid, binding: binding), try bytes(p, "bind"))
            let hello = try RollCallHello(parsing: try bytes(p, "hello"), rollCallID: rcid)
            XCTAssertTrue(hello.bound)
            XCTAssertEqual(hello.bindingCheck, try bytes(p, "bind"))
        }
    }

    /// A group room in memory for the replay: events and in-order forwarding.
    private final class Room {
        var present: [(slot: Int, call: RollCall)] = []
        var sent: [(slot: Int, message: [UInt8])] = []
        let now: Int64
        init(now: Int64) { self.now = now }

        func join(_ call: RollCall, slot: Int) throws {
            for (_, other) in present { try other.peerJoined(slot: slot, now: now) }
            try call.joined(slot: slot, peers: present.map(\.slot), now: now)
            present.append((slot, call))
            try pump()
        }

        func pump() throws {
            var moved = true
            while moved {
                moved = false
                for (slot, call) in present {
                    while let message = try call.takeOutgoing() {
                        moved = true
                        guard present.count > 1 else { continue }
                        sent.append((slot, message))
                        for (other, receiver) in present where other != slot { try receiver.receive(message, from: slot, now: now) }
                    }
                }
            }
        }
    }

    private static let stateText: [RollCall.ParticipantState: String] = [
        .notYet: "not_yet", .verified: "verified", .wrong: "wrong", .deviceChanged: "device_changed",
        .verifiedTagUnchecked: "verified_tag_unchecked", .refused: "refused", .unknown: "unknown",
        .bindingDiffers: "binding_differs", .otherCall: "other_call",
    ]

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
        let room = Room(now: t)
        for (i, call) in calls.enumerated() { try room.join(call, slot: i + 1) }
        XCTAssertEqual(room.sent.count, v["join_messages"] as? Int)
        for (i, p) in participants.enumerated() {
            XCTAssertEqual(room.sent.first { $0.slot == i + 1 && $0.message[1] == 1 }?.message, try bytes(p, "hello"))
        }
        for (i, call) in calls.enumerated() {
            XCTAssertEqual(call.rosterHash, try bytes(v, "roster"))
            try call.confirmRoster(call.rosterHash, now: t, random: &sources[i])
        }
        for call in calls {
            try call.confirmSaid(now: t, random: &sources[calls.firstIndex { $0 === call }!])
            try room.pump()
        }
        let saids = try list(v, "saids")
        for (i, said) in saids.enumerated() {
            XCTAssertEqual(room.sent.first { $0.slot == i + 1 && $0.message[1] == 2 }?.message, try bytes(said, "said"))
            XCTAssertEqual(calls[i].myCode, try text(said, "code_text"))
        }
        for call in calls { try call.tick(now: t + 1) }
        let later = Room(now: t + 1)
        later.present = room.present
        try later.pump()
        for (i, view) in try list(v, "views").enumerated() {
            XCTAssertEqual(later.sent.last { $0.slot == i + 1 && $0.message[1] == 3 }?.message, try bytes(view, "view"))
        }
        for outcome in try list(v, "outcomes") {
            let listener = try text(outcome, "listener_text"), speaker = try text(outcome, "speaker_text")
            let li = try XCTUnwrap(names.firstIndex(of: listener)), si = try XCTUnwrap(names.firstIndex(of: speaker))
            let id = try XCTUnwrap(ids[listener]?[speaker])
            let index = try XCTUnwrap(calls[li].participants.first { $0.contactID == id }?.index)
            let state = try calls[li].enterHeard(try text(saids[si], "code_text"), from: index, now: t + 1)
            XCTAssertEqual(Self.stateText[state], try text(outcome, "state_text"), "\(listener) hearing \(speaker)")
        }
        // Bound: Ana and Ben to one call, Cai to another.
        let bound = try list(try XCTUnwrap(v["bound"] as? J), "participants")
        var boundCalls: [RollCall] = []
        for (i, p) in bound.enumerated() {
            var random = DeterministicRandom(seed: try bytes(p, "random_seed"))
            boundCalls.append(
                try RollCall(
                    store: try XCTUnwrap(stores[names[i]]), meetingCode: code, binding: try bytes(p, "binding"), now: t,
                    random: &random))
        }
        let boundRoom = Room(now: t)
        for (i, call) in boundCalls.enumerated() { try boundRoom.join(call, slot: i + 1) }
        for (i, p) in bound.enumerated() {
            XCTAssertEqual(boundRoom.sent.first { $0.slot == i + 1 && $0.message[1] == 1 }?.message, try bytes(p, "hello"))
            let seen = try list(p, "sees").map { [($0["slot"] as? Int) ?? 0: (try text($0, "state_text"))] }
            let shown = boundCalls[i].participants.dropFirst().map { [$0.slot ?? 0: Self.stateText[$0.state] ?? ""] }
            XCTAssertEqual(shown, seen)
        }
        // Refusals, each at a fresh roll call of Ben's, joined in slot 2 beside 1 and 3.
        let benIndex = try XCTUnwrap(names.firstIndex(of: "Ben"))
        for r in try list(v, "rejections") {
            var random = DeterministicRandom(seed: try bytes(participants[benIndex], "random_seed"))
            let call = try RollCall(store: try XCTUnwrap(stores["Ben"]), meetingCode: code, now: t, random: &random)
            try call.joined(slot: 2, peers: [1, 3], now: t)
            let messages = try list(r, "messages").map { (try bytes($0, "message"), try XCTUnwrap($0["slot"] as? Int)) }
            let name = try text(r, "case_text")
            for (m, slot) in messages.dropLast() { XCTAssertNoThrow(try call.receive(m, from: slot, now: t), name) }
            var got = "accepted"
            do {
                let (last, slot) = try XCTUnwrap(messages.last)
                try call.receive(last, from: slot, now: t)
            } catch let e as ItsMeError {
                got = e.kind.symbol.replacingOccurrences(of: "ITSME_E_", with: "").lowercased()
            }
            XCTAssertEqual(got, try text(r, "result"), name)
        }
    }
}

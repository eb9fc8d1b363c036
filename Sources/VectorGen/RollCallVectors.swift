import Foundation
import ItsMeKit
import ItsMePrimitives

/// The roll-call vectors (PROTOCOL.md 20, version 2): rollcall.json. Three
/// people in one roll call: Ana and Ben share a seed and each other's
/// device secrets; Ana and Cai share a seed, and Cai holds no device secret
/// of Ana's (Ana's tag goes unchecked there) while Ana holds one of Cai's
/// that Cai's device no longer has (Cai's device changed); Ben and Cai share
/// nothing. They join one after the other (slots 1, 2, 3) through a group
/// room that delivers every message to the others in order (15.9). Every
/// HELLO, VIEW, roster, key, device tag and SAID entry is recomputed here
/// from the documented formulas and compared with what the library sent.
extension VectorGenerator {
    /// A group room in memory: the relay's events and in-order forwarding.
    private final class VectorRoom {
        var present: [(slot: Int, call: RollCall)] = []
        /// Every message sent while another peer was there, in order.
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
                        guard present.count > 1 else { continue }  // alone: the relay refuses it
                        sent.append((slot, message))
                        for (other, receiver) in present where other != slot { try receiver.receive(message, from: slot, now: now) }
                    }
                }
            }
        }
    }

    func rollCallVectors() throws -> [String: Any] {
        let t = now + 7_000
        var codeSource = DeterministicRandom(seed: fixed("itsme-vector-rc-meeting"))
        let meeting = RemoteCode.random(using: &codeSource)
        let rcid = SHA256.hash(LV.cat(LV.b("itsme-rollcall-v2"), LV.b(meeting.canonical)))
        let roomID = Array(SHA256.hash(LV.cat(LV.b("itsme-rollcall-room-v1"), LV.b(meeting.canonical))).prefix(16))
        let sid = SHA256.hash(LV.cat(LV.b("itsme-rc-session-v2"), rcid, [0], []))

        let names = ["Ana", "Ben", "Cai"]
        var people: [Party] = []
        for name in names { people.append(try party("rc-\(name)", name: name).0) }
        let seedAB = fixed("itsme-vector-rc-seed-ab"), seedAC = fixed("itsme-vector-rc-seed-ac")
        let ds = names.map { Array(fixed("itsme-vector-rc-ds-\($0)").prefix(16)) }
        // (owner, peer, seed, owner's secret for the peer, the peer's secret held by the owner)
        let links: [(Int, Int, [UInt8], [UInt8], [UInt8])] = [
            (0, 1, seedAB, ds[0], ds[1]), (1, 0, seedAB, ds[1], ds[0]),
            (0, 2, seedAC, ds[0], ds[2]),  // Ana holds Cai's old secret
            (2, 0, seedAC, [], []),  // Cai's new device: none either way
        ]
        var contactIDs: [[Int: Int64]] = Array(repeating: [:], count: 3)
        for (owner, peer, seed, mine, theirs) in links {
            let id = try people[owner].store.add(
                name: names[peer], publicKey: people[peer].publicKey, seed: try SecretBytes(copying: seed), method: .qr, now: now)
            if !mine.isEmpty {
                try people[owner].store.setDeviceSecrets(id: id, mine: try SecretBytes(copying: mine), theirs: try SecretBytes(copying: theirs))
            }
            contactIDs[owner][peer] = id
        }
        func seedOf(_ a: Int, _ b: Int) -> [UInt8]? {
            let pair = Set([a, b])
            return pair == [0, 1] ? seedAB : pair == [0, 2] ? seedAC : nil
        }
        func secretSpoken(by speaker: Int, to listener: Int) -> [UInt8] {
            links.first { $0.0 == speaker && $0.1 == listener }?.3 ?? []
        }
        // Each person's roll call: the roll-call key is the first 32 bytes drawn.
        let randomSeeds = names.map { fixed("itsme-vector-rc-random-\($0)") }
        var sources = randomSeeds.map { DeterministicRandom(seed: $0) }
        let keySeeds = randomSeeds.map(keySeed)
        var calls: [RollCall] = []
        for i in 0..<3 { calls.append(try RollCall(store: people[i].store, meetingCode: meeting, now: t, random: &sources[i])) }
        let room = VectorRoom(now: t)
        for i in 0..<3 { try room.join(calls[i], slot: i + 1) }
        let hellos = (1...3).map { slot in room.sent.first { $0.slot == slot && $0.message[1] == 1 }!.message }
        let bodies = hellos.map { Array($0.dropLast(64)) }
        let helloNames = bodies.map { SHA256.hash($0) }
        let keys = hellos.map { Array($0[3..<35]) }

        var helloJSON: [[String: Any]] = []
        for (i, hello) in hellos.enumerated() {
            // The documented form: version, type, b, RK, bind, count, tags, signature.
            expectEqual(Array(hello[0..<3]), [2, 1, 0])
            expectEqual(Array(hello[35..<67]), [UInt8](repeating: 0, count: 32))
            let count = Int(hello[67]) << 8 | Int(hello[68])
            expectEqual(count, 32)
            expectEqual(hello.count, 133 + 16 * count)
            let tags = (0..<count).map { Array(hello[(69 + 16 * $0)..<(85 + 16 * $0)]) }
            expectEqual(tags, tags.sorted { $0.lexicographicallyPrecedes($1) })
            expectTrue(
                Ed25519.verify(
                    signature: Array(hello.suffix(64)), message: LV.cat(LV.b("itsme-rc-sign-v2"), rcid, bodies[i]), publicKey: keys[i]),
                "\(names[i])'s HELLO is signed")
            let pair = try Ed25519.keyPair(seed: try SecretBytes(copying: keySeeds[i]))
            expectEqual(pair.publicKey, keys[i], "the roll-call key is the first 32 bytes drawn")
            var real: [[String: Any]] = []
            for j in 0..<3 where j != i {
                guard let seed = seedOf(i, j) else { continue }
                let tag = Array(
                    HMACSHA256.mac(
                        key: seed,
                        message: LV.cat(LV.b("itsme-rc-presence-v2"), sid, keys[i], people[i].publicKey, people[j].publicKey)
                    ).prefix(16))
                expectTrue(tags.contains(tag), "\(names[i])'s HELLO carries its tag for \(names[j])")
                real.append(["to_text": names[j], "tag": hex(tag)])
            }
            helloJSON.append([
                "name_text": names[i], "random_seed": hex(randomSeeds[i]), "identity_public": hex(people[i].publicKey),
                "identity_random_seed": hex(people[i].randomSeed), "slot": i + 1, "roll_call_key_seed": hex(keySeeds[i]),
                "roll_call_key": hex(keys[i]), "tags_for_contacts": real, "hello": hex(hello), "hello_body": hex(bodies[i]),
                "name": hex(helloNames[i]),
            ])
        }
        let sortedNames = helloNames.sorted { $0.lexicographicallyPrecedes($1) }
        let roster = SHA256.hash(LV.cat([LV.b("itsme-rc-roster-v2"), rcid] + sortedNames))
        for call in calls {
            expectEqual(call.rosterHash, roster)
            expectEqual(call.headCount, 3)
        }
        let joinMessages = room.sent.count

        // Each confirms the roster, reads its code, confirms it said it.
        for i in 0..<3 { try calls[i].confirmRoster(roster, now: t, random: &sources[i]) }
        let codes = try calls.map { try unwrap($0.myCode, "code") }
        for i in 0..<3 {
            try calls[i].confirmSaid(now: t, random: &sources[i])
            try room.pump()
        }
        let saids = (1...3).map { slot in room.sent.first { $0.slot == slot && $0.message[1] == 2 }!.message }
        var saidJSON: [[String: Any]] = []
        for (i, said) in saids.enumerated() {
            let value = try unwrap(VoiceProtocol.parseCode(codes[i]), "a code")
            expectEqual(Array(said[0..<2]), [2, 2])
            expectEqual(Array(said[2..<34]), keys[i])
            expectEqual(Array(said[34..<66]), roster)
            expectEqual(Int(said[66]), 2)
            expectEqual(said.count, 131 + 50 * 2)
            let body = Array(said.dropLast(64))
            expectTrue(
                Ed25519.verify(signature: Array(said.suffix(64)), message: LV.cat(LV.b("itsme-rc-sign-v2"), rcid, body), publicKey: keys[i]),
                "\(names[i])'s SAID is signed")
            let others = (0..<3).filter { $0 != i }.sorted { helloNames[$0].lexicographicallyPrecedes(helloNames[$1]) }
            var entries: [[String: Any]] = []
            for (position, j) in others.enumerated() {
                let entry = Array(said[(67 + 50 * position)..<(117 + 50 * position)])
                guard let seed = seedOf(i, j) else {
                    entries.append(["for_text": names[j], "entry": hex(entry), "padding": true])
                    continue
                }
                let key = try HKDF.derive(
                    ikm: seed, salt: roster,
                    info: LV.cat(LV.b("itsme-rc-code-v2"), sid, helloNames[i], helloNames[j], people[i].publicKey, people[j].publicKey),
                    count: 32
                ).unsafeExportedArray()
                let tagKey = try HKDF.derive(ikm: seed, salt: [UInt8](), info: LV.b("itsme-device-tag-v1"), count: 32).unsafeExportedArray()
                let dtag = HMACSHA256.mac(
                    key: tagKey, message: LV.cat(LV.b("itsme-rc-device-v2"), people[i].publicKey, roster, secretSpoken(by: i, to: j)))
                let plaintext = [UInt8(value >> 8), UInt8(value & 0xFF)] + dtag
                let sealed = try AEAD.seal(
                    .chacha20Poly1305, key: key, nonce: [UInt8](repeating: 0, count: 12), plaintext: plaintext, aad: [2, 2] + roster)
                expectEqual(sealed, entry, "\(names[i])'s entry for \(names[j])")
                entries.append([
                    "for_text": names[j], "key": hex(key), "device_secret": hex(secretSpoken(by: i, to: j)), "device_tag": hex(dtag),
                    "plaintext": hex(plaintext), "entry": hex(entry), "padding": false,
                ])
            }
            saidJSON.append([
                "name_text": names[i], "code_text": codes[i], "code": Int(value), "said": hex(said), "entries": entries,
            ])
        }
        // A second later each one's VIEW is due (it took SAIDs): the last VIEW of each says who said.
        for call in calls { try call.tick(now: t + 1) }
        let tickRoom = VectorRoom(now: t + 1)
        tickRoom.present = room.present
        try tickRoom.pump()
        var viewJSON: [[String: Any]] = []
        for i in 0..<3 {
            let view = try unwrap(tickRoom.sent.last { $0.slot == i + 1 && $0.message[1] == 3 }?.message, "VIEW")
            let k = Int(view[73])
            expectEqual(k, 3)
            expectEqual(view.count, 138 + 32 * k + (k + 7) / 8)
            expectEqual(Array(view[2..<34]), keys[i])
            expectEqual(Int(view[38]) << 8 | Int(view[39]), i + 1)
            expectEqual(Array(view[40..<72]), roster)
            expectEqual(view[72], 1)
            let listed = (0..<k).map { Array(view[(74 + 32 * $0)..<(106 + 32 * $0)]) }
            expectEqual(listed, sortedNames)
            // Bits for the two others (their SAIDs are held), not its own.
            let have = view[74 + 32 * k]
            let expected = sortedNames.enumerated().reduce(UInt8(0)) { bits, item in
                item.element == helloNames[i] ? bits : bits | (0x80 >> UInt8(item.offset))
            }
            expectEqual(have, expected)
            let body = Array(view.dropLast(64))
            expectTrue(
                Ed25519.verify(signature: Array(view.suffix(64)), message: LV.cat(LV.b("itsme-rc-sign-v2"), rcid, body), publicKey: keys[i]),
                "\(names[i])'s VIEW is signed")
            viewJSON.append([
                "name_text": names[i], "view": hex(view), "seq": Int(view[34..<38].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }),
                "slot": i + 1, "said": true, "names": listed.map(hex), "have": hex([have]),
            ])
        }
        // Each types the codes of its contacts: the outcomes.
        var outcomes: [[String: Any]] = []
        for listener in 0..<3 {
            for speaker in 0..<3 where speaker != listener {
                guard let id = contactIDs[listener][speaker],
                    let index = calls[listener].participants.first(where: { $0.contactID == id })?.index
                else { continue }
                let state = try calls[listener].enterHeard(codes[speaker], from: index, now: t + 1)
                outcomes.append(["listener_text": names[listener], "speaker_text": names[speaker], "state_text": stateText(state)])
            }
        }
        expectEqual(outcomes.map { $0["state_text"] as? String }, ["verified", "device_changed", "verified", "verified_tag_unchecked"])

        return [
            "meeting_code_text": meeting.canonical, "rcid": hex(rcid), "room_id": hex(roomID), "sid": hex(sid), "now": Int(t),
            "participants": helloJSON, "roster": hex(roster), "views": viewJSON, "saids": saidJSON, "outcomes": outcomes,
            "join_messages": joinMessages,
            "contacts": links.map { owner, peer, seed, mine, theirs in
                [
                    "owner_text": names[owner], "peer_text": names[peer], "seed": hex(seed), "device_secret_mine": hex(mine),
                    "device_secret_theirs": hex(theirs),
                ]
            },
            "bound": try rollCallBindingVectors(meeting: meeting, rcid: rcid, people: people, t: t),
            "rejections": try rollCallRejections(
                meeting: meeting, hellos: hellos, saids: saids, sent: room.sent, t: t, people: people),
        ]
    }

    /// The roll-call key's private key: the first 32 bytes its random source gives.
    private func keySeed(_ randomSeed: [UInt8]) -> [UInt8] {
        var mirror = DeterministicRandom(seed: randomSeed)
        return mirror.bytes(32)
    }

    private func stateText(_ state: RollCall.ParticipantState) -> String {
        switch state {
        case .notYet: "not_yet"
        case .verified: "verified"
        case .wrong: "wrong"
        case .deviceChanged: "device_changed"
        case .verifiedTagUnchecked: "verified_tag_unchecked"
        case .refused: "refused"
        case .unknown: "unknown"
        case .bindingDiffers: "binding_differs"
        case .otherCall: "other_call"
        }
    }

    /// Ana and Ben bound to one call, Cai bound to another (20.1): their
    /// HELLOs, `sid` and `bind`, and what each shows of the others.
    private func rollCallBindingVectors(meeting: RemoteCode, rcid: [UInt8], people: [Party], t: Int64) throws -> [String: Any] {
        let callBinding = fixed("itsme-vector-rc-binding-1")
        let otherBinding = fixed("itsme-vector-rc-binding-2")
        let bindings = [callBinding, callBinding, otherBinding]
        var sources = ["Ana", "Ben", "Cai"].map { DeterministicRandom(seed: fixed("itsme-vector-rc-bound-\($0)")) }
        var calls: [RollCall] = []
        for i in 0..<3 {
            calls.append(try RollCall(store: people[i].store, meetingCode: meeting, binding: bindings[i], now: t, random: &sources[i]))
        }
        let room = VectorRoom(now: t)
        for i in 0..<3 { try room.join(calls[i], slot: i + 1) }
        var out: [[String: Any]] = []
        for i in 0..<3 {
            let hello = room.sent.first { $0.slot == i + 1 && $0.message[1] == 1 }!.message
            let sid = SHA256.hash(LV.cat(LV.b("itsme-rc-session-v2"), rcid, [1], bindings[i]))
            let bind = SHA256.hash(LV.cat(LV.b("itsme-rc-binding-v2"), rcid, bindings[i]))
            expectEqual(hello[2], 1)
            expectEqual(Array(hello[35..<67]), bind)
            var seen: [[String: Any]] = []
            for p in calls[i].participants where p.index > 0 {
                let slot = try unwrap(p.slot, "slot")
                seen.append(["slot": slot, "state_text": stateText(p.state)])
            }
            out.append([
                "name_text": ["Ana", "Ben", "Cai"][i], "binding": hex(bindings[i]), "sid": hex(sid), "bind": hex(bind),
                "roll_call_key_seed": hex(keySeed(fixed("itsme-vector-rc-bound-\(["Ana", "Ben", "Cai"][i])"))),
                "random_seed": hex(fixed("itsme-vector-rc-bound-\(["Ana", "Ben", "Cai"][i])")), "hello": hex(hello), "sees": seen,
            ])
        }
        // Ana and Ben, bound to the same call, know each other; Cai is in another call for both.
        expectEqual((out[0]["sees"] as? [[String: Any]])?.map { $0["state_text"] as? String }, ["not_yet", "other_call"])
        return ["participants": out]
    }

    /// Messages a participant refuses (20.2, 20.3, 20.5), each fed to a
    /// fresh roll call of Ben's (the same random seed: the same key and
    /// HELLO as in the roll call above), joined in slot 2 beside slots 1 and
    /// 3, after the messages before it: the result code of the last.
    private func rollCallRejections(
        meeting: RemoteCode, hellos: [[UInt8]], saids: [[UInt8]], sent: [(slot: Int, message: [UInt8])], t: Int64, people: [Party]
    ) throws -> [[String: Any]] {
        func flipped(_ m: [UInt8], _ at: Int) -> [UInt8] {
            var c = m
            c[at] ^= 0x01
            return c
        }
        let ana = hellos[0], ben = hellos[1], cai = hellos[2]
        // Ana's and Cai's last VIEWs that list Ben, before the SAIDs.
        func lists(_ view: [UInt8], _ hello: [UInt8]) -> Bool {
            let k = Int(view[73])
            let name = SHA256.hash(Array(hello.dropLast(64)))
            return (0..<k).contains { Array(view[(74 + 32 * $0)..<(106 + 32 * $0)]) == name }
        }
        let anaView = sent.last { $0.slot == 1 && $0.message[1] == 3 && lists($0.message, ben) && $0.message[72] == 0 }!.message
        let caiView = sent.last { $0.slot == 3 && $0.message[1] == 3 && lists($0.message, ben) && $0.message[72] == 0 }!.message
        let anaSaid = saids[0], benSaid = saids[1]
        var unsorted = ana
        unsorted.replaceSubrange(69..<101, with: Array(ana[85..<101]) + Array(ana[69..<85]))
        // Ana's HELLO with 32 more tags (a power of two again), her signature kept.
        var extended = Array(ana.dropLast(64))
        extended.replaceSubrange(67..<69, with: [0, 64])
        extended += (0..<32).flatMap { i in [UInt8](repeating: 0xFF, count: 15) + [UInt8(i)] } + Array(ana.suffix(64))
        // The same roll-call key as Ana's with another body: a second roll call from her random seed on another store.
        var anaSource = DeterministicRandom(seed: fixed("itsme-vector-rc-random-Ana"))
        let twin = try RollCall(store: people[1].store, meetingCode: meeting, now: t, random: &anaSource)
        try twin.joined(slot: 9, peers: [], now: t)
        let anaTwin = try unwrap(twin.takeOutgoing(), "twin HELLO")
        expectEqual(Array(anaTwin[3..<35]), Array(ana[3..<35]))
        expectTrue(anaTwin != ana, "another body")
        // (message, slot it came from)
        typealias M = ([UInt8], Int)
        let cases: [(String, [M], String)] = [
            ("a HELLO one byte short", [(Array(ana.dropLast()), 1)], "malformed_message"),
            ("a HELLO of 31 tags", [(Array(ana[0..<67]) + [0, 31] + Array(ana[69..<(69 + 31 * 16)]) + Array(ana.suffix(64)), 1)], "malformed_message"),
            ("a HELLO whose tags are out of order", [(unsorted, 1)], "malformed_message"),
            ("a HELLO of version 1", [([1] + ana.dropFirst(), 1)], "malformed_message"),
            ("a HELLO with a binding flag of 2", [(Array(ana[0..<2]) + [2] + ana.dropFirst(3), 1)], "malformed_message"),
            ("a HELLO with one tag changed", [(flipped(ana, 100), 1)], "authentication_failed"),
            ("a HELLO extended by 32 tags", [(extended, 1)], "authentication_failed"),
            ("this device's own HELLO, reflected", [(ben, 1)], "invalid_key"),
            ("a second HELLO for one roll-call key", [(ana, 1), (anaTwin, 3)], "malformed_message"),
            ("a second HELLO from one slot", [(ana, 1), (cai, 1)], "malformed_message"),
            ("a HELLO already held, from another slot", [(ana, 1), (ana, 3)], "accepted"),
            ("a message of unknown type 4", [([2, 4] + ana.dropFirst(2), 1)], "malformed_message"),
            ("a VIEW before its sender's HELLO", [(anaView, 1)], "invalid_state"),
            ("a VIEW one byte short", [(ana, 1), (Array(anaView.dropLast()), 1)], "malformed_message"),
            ("a VIEW with one byte changed", [(ana, 1), (flipped(anaView, 45), 1)], "authentication_failed"),
            ("a VIEW carried by another slot than its own", [(ana, 1), (anaView, 3)], "invalid_state"),
            ("a VIEW already held, again", [(ana, 1), (anaView, 1), (anaView, 1)], "accepted"),
            ("a SAID from a participant not present", [(ana, 1), (anaSaid, 1)], "invalid_state"),
            ("a SAID one byte short", [(ana, 1), (anaView, 1), (cai, 3), (caiView, 3), (Array(anaSaid.dropLast()), 1)], "malformed_message"),
            ("a SAID with one byte of an entry changed", [(ana, 1), (anaView, 1), (cai, 3), (caiView, 3), (flipped(anaSaid, 80), 1)], "authentication_failed"),
            ("this device's own SAID, reflected", [(ana, 1), (anaView, 1), (cai, 3), (caiView, 3), (benSaid, 1)], "invalid_key"),
            ("a SAID of another roster (Cai not present here)", [(ana, 1), (anaView, 1), (anaSaid, 1)], "invalid_state"),
            ("a SAID already taken, again", [(ana, 1), (anaView, 1), (cai, 3), (caiView, 3), (anaSaid, 1), (anaSaid, 1)], "accepted"),
            ("a SAID carried by another slot than its speaker's", [(ana, 1), (anaView, 1), (cai, 3), (caiView, 3), (anaSaid, 3)], "accepted"),
        ]
        var out: [[String: Any]] = []
        for (name, messages, result) in cases {
            var random = DeterministicRandom(seed: fixed("itsme-vector-rc-random-Ben"))
            let call = try RollCall(store: people[1].store, meetingCode: meeting, now: t, random: &random)
            try call.joined(slot: 2, peers: [1, 3], now: t)
            for (m, slot) in messages.dropLast() { expectNoThrow(try call.receive(m, from: slot, now: t), name) }
            var got = "accepted"
            do {
                let (last, slot) = try unwrap(messages.last, name)
                try call.receive(last, from: slot, now: t)
            } catch let e as ItsMeError {
                got = e.kind.symbol.replacingOccurrences(of: "ITSME_E_", with: "").lowercased()
            }
            expectEqual(got, result, name)
            out.append([
                "case_text": name, "receiver_text": "Ben",
                "messages": messages.map { ["message": hex($0.0), "slot": $0.1] as [String: Any] }, "result": result,
            ])
        }
        return out
    }
}

import Foundation
import ItsMeKit

/// The roll-call vectors (PROTOCOL.md 20): rollcall.json. Three people in
/// one roll call: Ana and Ben share a seed and each other's device
/// secrets; Ana and Cai share a seed, and Cai holds no device secret of
/// Ana's (Ana's tag goes unchecked there) while Ana holds one of Cai's that
/// Cai's device no longer has (Cai's device changed); Ben and Cai share
/// nothing. Every HELLO, roster, key, device tag and SAID entry is
/// recomputed here from the documented formulas and compared with what the
/// library sent.
extension VectorGenerator {
    func rollCallVectors() throws -> [String: Any] {
        let t = now + 7_000
        let window = VoiceProtocol.window(t)
        var codeSource = DeterministicRandom(seed: fixed("itsme-vector-rc-meeting"))
        let meeting = RemoteCode.random(using: &codeSource)
        let rcid = SHA256.hash(LV.cat(LV.b("itsme-rollcall-v1"), LV.b(meeting.canonical)))
        let roomID = Array(SHA256.hash(LV.cat(LV.b("itsme-rollcall-room-v1"), LV.b(meeting.canonical))).prefix(16))

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

        // Each joins (slots 1, 2, 3) and sends its HELLO to the others.
        let randomSeeds = names.map { fixed("itsme-vector-rc-random-\($0)") }
        var sources = randomSeeds.map { DeterministicRandom(seed: $0) }
        var calls: [RollCall] = []
        for i in 0..<3 { calls.append(try RollCall(store: people[i].store, meetingCode: meeting, now: t, random: &sources[i])) }
        let hellos = try calls.map { try unwrap($0.takeOutgoing(), "HELLO") }
        for (i, hello) in hellos.enumerated() {
            for (j, call) in calls.enumerated() where j != i { try call.receive(hello, from: i + 1, now: t) }
        }
        var helloJSON: [[String: Any]] = []
        for (i, hello) in hellos.enumerated() {
            // The documented form: version, type, window, nonce, count, tags.
            expectEqual(Array(hello[0..<2]), [1, 1])
            expectEqual(Array(hello[2..<10]), VoiceProtocol.u64(window))
            let nonce = Array(hello[10..<26])
            let count = Int(hello[26]) << 8 | Int(hello[27])
            expectEqual(count, 32)
            expectEqual(hello.count, 28 + 16 * count)
            let tags = (0..<count).map { Array(hello[(28 + 16 * $0)..<(44 + 16 * $0)]) }
            expectEqual(tags, tags.sorted { $0.lexicographicallyPrecedes($1) })
            var real: [[String: Any]] = []
            for j in 0..<3 where j != i {
                guard let seed = seedOf(i, j) else { continue }
                let tag = Array(
                    HMACSHA256.mac(
                        key: seed,
                        message: LV.cat(
                            LV.b("itsme-rc-presence-v1"), rcid, VoiceProtocol.u64(window), nonce, people[i].publicKey,
                            people[j].publicKey)
                    ).prefix(16))
                expectTrue(tags.contains(tag), "\(names[i])'s HELLO carries its tag for \(names[j])")
                real.append(["to_text": names[j], "tag": hex(tag)])
            }
            helloJSON.append([
                "name_text": names[i], "random_seed": hex(randomSeeds[i]), "identity_public": hex(people[i].publicKey),
                "identity_random_seed": hex(people[i].randomSeed),
                "slot": i + 1, "window": Int(window), "nonce": hex(nonce), "tags_for_contacts": real, "hello": hex(hello),
                "hello_hash": hex(SHA256.hash(hello)),
            ])
        }
        let sortedHashes = hellos.map { SHA256.hash($0) }.sorted { $0.lexicographicallyPrecedes($1) }
        let roster = SHA256.hash(LV.cat([LV.b("itsme-rc-roster-v1"), rcid] + sortedHashes))
        for call in calls { expectEqual(call.rosterHash, roster) }

        // Each confirms the roster, reads its code, confirms it said it.
        for i in 0..<3 { try calls[i].confirmRoster(roster, now: t, random: &sources[i]) }
        let codes = try calls.map { try unwrap($0.myCode, "code") }
        for i in 0..<3 { try calls[i].confirmSaid(now: t, random: &sources[i]) }
        let saids = try calls.map { try unwrap($0.takeOutgoing(), "SAID") }
        var saidJSON: [[String: Any]] = []
        for (i, said) in saids.enumerated() {
            let value = try unwrap(VoiceProtocol.parseCode(codes[i]), "a code")
            let speakerHash = SHA256.hash(hellos[i])
            expectEqual(Array(said[0..<2]), [1, 2])
            expectEqual(Array(said[2..<34]), speakerHash)
            expectEqual(Array(said[34..<66]), roster)
            expectEqual(Int(said[66]), 2)
            expectEqual(said.count, 67 + 50 * 2)
            let others = (0..<3).filter { $0 != i }.sorted { SHA256.hash(hellos[$0]).lexicographicallyPrecedes(SHA256.hash(hellos[$1])) }
            var entries: [[String: Any]] = []
            for (position, j) in others.enumerated() {
                let entry = Array(said[(67 + 50 * position)..<(117 + 50 * position)])
                guard let seed = seedOf(i, j) else {
                    entries.append(["for_text": names[j], "entry": hex(entry), "padding": true])
                    continue
                }
                let key = try HKDF.derive(
                    ikm: seed, salt: roster,
                    info: LV.cat(
                        LV.b("itsme-rc-code-v1"), rcid, speakerHash, SHA256.hash(hellos[j]), people[i].publicKey, people[j].publicKey),
                    count: 32
                ).unsafeExportedArray()
                let tagKey = try HKDF.derive(ikm: seed, salt: [UInt8](), info: LV.b("itsme-device-tag-v1"), count: 32).unsafeExportedArray()
                let dtag = HMACSHA256.mac(
                    key: tagKey, message: LV.cat(LV.b("itsme-rc-device-v1"), people[i].publicKey, roster, secretSpoken(by: i, to: j)))
                let plaintext = [UInt8(value >> 8), UInt8(value & 0xFF)] + dtag
                let sealed = try AEAD.seal(
                    .chacha20Poly1305, key: key, nonce: [UInt8](repeating: 0, count: 12), plaintext: plaintext, aad: [1, 2] + roster)
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
        for (i, said) in saids.enumerated() {
            for (j, call) in calls.enumerated() where j != i { try call.receive(said, from: i + 1, now: t) }
        }
        // Each types the codes of its contacts: the outcomes.
        var outcomes: [[String: Any]] = []
        for listener in 0..<3 {
            for speaker in 0..<3 where speaker != listener {
                guard let id = contactIDs[listener][speaker],
                    let index = calls[listener].participants.first(where: { $0.contactID == id })?.index
                else { continue }
                let state = try calls[listener].enterHeard(codes[speaker], from: index, now: t)
                let text: String
                switch state {
                case .notYet: text = "not_yet"
                case .verified: text = "verified"
                case .wrong: text = "wrong"
                case .deviceChanged: text = "device_changed"
                case .verifiedTagUnchecked: text = "verified_tag_unchecked"
                case .refused: text = "refused"
                case .unknown: text = "unknown"
                }
                outcomes.append(["listener_text": names[listener], "speaker_text": names[speaker], "state_text": text])
            }
        }
        expectEqual(outcomes.map { $0["state_text"] as? String }, ["verified", "device_changed", "verified", "verified_tag_unchecked"])

        return [
            "meeting_code_text": meeting.canonical, "rcid": hex(rcid), "room_id": hex(roomID), "now": Int(t),
            "participants": helloJSON, "roster": hex(roster), "saids": saidJSON, "outcomes": outcomes,
            "contacts": links.map { owner, peer, seed, mine, theirs in
                [
                    "owner_text": names[owner], "peer_text": names[peer], "seed": hex(seed), "device_secret_mine": hex(mine),
                    "device_secret_theirs": hex(theirs),
                ]
            },
            "rejections": try rollCallRejections(meeting: meeting, hellos: hellos, saids: saids, t: t, people: people),
        ]
    }

    /// Messages a participant refuses (20.2, 20.4), each fed to a fresh
    /// roll call of Ben's after the HELLOs it needs: the result code.
    private func rollCallRejections(meeting: RemoteCode, hellos: [[UInt8]], saids: [[UInt8]], t: Int64, people: [Party]) throws
        -> [[String: Any]]
    {
        func flipped(_ m: [UInt8], _ at: Int) -> [UInt8] {
            var c = m
            c[at] ^= 0x01
            return c
        }
        let ana = hellos[0], cai = hellos[2], anaSaid = saids[0], benHello = hellos[1]
        var unsorted = ana
        unsorted.replaceSubrange(28..<60, with: Array(ana[44..<60]) + Array(ana[28..<44]))
        var stale = ana
        stale.replaceSubrange(2..<10, with: VoiceProtocol.u64(VoiceProtocol.window(t) - 21))
        let reflected = [1, 2] + SHA256.hash(benHello) + Array(anaSaid[34...])
        let cases: [(String, [[UInt8]], String)] = [
            ("a HELLO one byte short", [Array(ana.dropLast())], "malformed_message"),
            ("a HELLO of 31 tags", [Array(ana[0..<26]) + [0, 31] + Array(ana[28..<(28 + 31 * 16)])], "malformed_message"),
            ("a HELLO whose tags are out of order", [unsorted], "malformed_message"),
            ("a HELLO of version 2", [[2] + ana.dropFirst()], "malformed_message"),
            ("a HELLO 21 windows old", [stale], "invalid_argument"),
            ("a message of unknown type 3", [[1, 3] + ana.dropFirst(2)], "malformed_message"),
            ("a SAID from a participant without a HELLO", [cai, anaSaid], "invalid_state"),
            ("a SAID one byte short", [ana, cai, Array(anaSaid.dropLast())], "malformed_message"),
            ("a SAID naming this device as its speaker", [ana, cai, reflected], "invalid_key"),
            ("a SAID of another roster", [ana, cai, flipped(anaSaid, 40)], "invalid_state"),
            ("a second, different SAID from one speaker", [ana, cai, anaSaid, flipped(anaSaid, 80)], "malformed_message"),
            ("a SAID already taken, again", [ana, cai, anaSaid, anaSaid], "accepted"),
            ("a SAID from another slot than its speaker's HELLO", [ana, cai, saids[2]], "invalid_state"),
        ]
        var out: [[String: Any]] = []
        for (name, messages, result) in cases {
            var random = DeterministicRandom(seed: fixed("itsme-vector-rc-random-Ben"))
            let call = try RollCall(store: people[1].store, meetingCode: meeting, now: t, random: &random)
            _ = call.takeOutgoing()
            // Ana from slot 1, Cai from slot 3; the messages after the first are Ana's unless a HELLO of Cai.
            for m in messages.dropLast() { expectNoThrow(try call.receive(m, from: m == cai ? 3 : 1, now: t), name) }
            var got = "accepted"
            do {
                let last = try unwrap(messages.last, name)
                try call.receive(last, from: last == cai ? 3 : 1, now: t)
            } catch let e as ItsMeError {
                got = e.kind.symbol.replacingOccurrences(of: "ITSME_E_", with: "").lowercased()
            }
            expectEqual(got, result, name)
            out.append(["case_text": name, "receiver_text": "Ben", "messages": messages.map(hex), "result": result])
        }
        return out
    }
}

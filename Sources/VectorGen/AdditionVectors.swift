import Foundation
import ItsMeKit
import ItsMePrimitives

/// The vectors of Tests/ProtocolVectors that are not one exchange or
/// session run honestly: Online Verify's refusals (11.2), the states of a
/// Security PIN Update through its commit order (10.3) and section 9.3's
/// reading procedure on given byte streams. Each is checked against the
/// library as it is written.
extension VectorGenerator {
    func bytes(_ v: [String: Any], _ key: String) -> [UInt8] { Hex.decode(v[key] as! String)! }

    // MARK: Online Verify refusals (section 11.2)

    /// Messages every implementation must refuse, each played against a
    /// fresh side of `session` (its identity, contact, device secrets and
    /// random source): every message before the last is accepted, the last
    /// refused with `result`.
    func onlineVerifyRejections(_ v: [String: Any]) throws -> [[String: Any]] {
        let seed = bytes(v, "seed")
        let window = Int64(v["window"] as! Int)
        let t = window * VoiceProtocol.windowSeconds
        let ini = v["initiator_text"] as! String, res = ini == "a" ? "b" : "a"
        let commit = bytes(v, "commit"), keyR = bytes(v, "key_r"), keyI = bytes(v, "key_i")
        let proofI = bytes(v, "proof_message_i"), proofR = bytes(v, "proof_message_r")
        let dir = NSTemporaryDirectory() + "itsme-ov-refusals-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var made = 0
        func fresh(_ side: String) throws -> OnlineVerify {
            let me = v[side] as! [String: Any], peer = v[side == "a" ? "b" : "a"] as! [String: Any]
            let (p, _) = try party("ov-0-\(side)", name: side == "a" ? "Alice" : "Bob")
            expectEqual(hex(p.publicKey), me["pid"] as? String)
            made += 1
            let store = try ContactStore(path: dir + "/\(side)-\(made).db", identity: p.identity)
            let id = try store.add(name: "Peer", publicKey: bytes(peer, "pid"), seed: try SecretBytes(copying: seed), method: .qr, now: now)
            try store.setDeviceSecrets(
                id: id, mine: try SecretBytes(copying: bytes(me, "device_secret")),
                theirs: try SecretBytes(copying: bytes(peer, "device_secret")))
            var g = DeterministicRandom(seed: bytes(me, "random_seed"))
            return try OnlineVerify(store: store, contactID: id, window: window, now: t, random: &g)
        }
        func flipped(_ m: [UInt8]) -> [UInt8] {
            var x = m
            x[x.count - 1] ^= 0x01
            return x
        }
        // A PROOF well sealed under the responder's key whose proof is the
        // initiator's (the role label is what makes a proof not reflectable).
        let wrongRole =
            [1, 3]
            + (try AEAD.seal(
                .chacha20Poly1305, key: bytes(v, "k_r"), nonce: SessionFrames.nonce(0),
                plaintext: bytes(v, "proof_i") + bytes(v, "dtag_r"), aad: [1, 3]))
        func commitTo(_ key: [UInt8]) -> [UInt8] {
            [1, 1] + SHA256.hash(LV.cat(LV.b("itsme-ov-commit-v1"), Array(key[2..<34]), Array(key[34..<66])))
        }
        let ownEphemeral = Array(keyR.prefix(34)) + keyI.dropFirst(34), ownChallenge = Array(keyI.prefix(34)) + keyR.dropFirst(34)
        let cases: [(String, String, [[UInt8]], String)] = [
            ("empty message", res, [[]], "malformed_message"),
            ("one byte", res, [[1]], "malformed_message"),
            ("COMMIT of version 2", res, [[2] + commit.dropFirst()], "malformed_message"),
            ("unknown type 0", res, [[1, 0] + commit.dropFirst(2)], "malformed_message"),
            ("unknown type 4", res, [[1, 4] + commit.dropFirst(2)], "malformed_message"),
            ("COMMIT cut to 33 bytes", res, [Array(commit.dropLast())], "malformed_message"),
            ("COMMIT padded to 35 bytes", res, [commit + [0]], "malformed_message"),
            ("COMMIT twice", res, [commit, commit], "malformed_message"),
            ("COMMIT sent to the initiator", ini, [commit], "malformed_message"),
            ("KEY before the COMMIT", res, [keyI], "malformed_message"),
            ("KEY cut to 65 bytes", res, [commit, Array(keyI.dropLast())], "malformed_message"),
            ("KEY padded to 67 bytes", res, [commit, keyI + [0]], "malformed_message"),
            ("KEY of version 2", res, [commit, [2] + keyI.dropFirst()], "malformed_message"),
            // A reflection the COMMIT opens (made over the reflected values),
            // so it is refused as a reflection whichever check comes first.
            ("KEY reflected: the responder's own KEY, under a COMMIT to it", res, [commitTo(keyR), keyR], "invalid_key"),
            ("KEY with the responder's own ephemeral key, under a COMMIT to it", res,
                [commitTo(ownEphemeral), ownEphemeral], "invalid_key"),
            ("KEY with the responder's own challenge, under a COMMIT to it", res, [commitTo(ownChallenge), ownChallenge], "invalid_key"),
            ("KEY that does not open the COMMIT", res, [commit, flipped(keyI)], "authentication_failed"),
            ("KEY twice", res, [commit, keyI, keyI], "malformed_message"),
            ("KEY reflected: the initiator's own KEY", ini, [keyI], "invalid_key"),
            ("KEY with a low-order ephemeral key (all zeros)", ini, [[1, 2] + [UInt8](repeating: 0, count: 32) + keyR.dropFirst(34)],
                "invalid_key"),
            ("PROOF before the KEYs", res, [commit, proofI], "malformed_message"),
            ("PROOF before the responder's KEY", ini, [proofR], "malformed_message"),
            ("PROOF with a flipped tag byte", res, [commit, keyI, flipped(proofI)], "authentication_failed"),
            ("PROOF reflected: the responder's own PROOF", res, [commit, keyI, proofR], "authentication_failed"),
            ("PROOF sealed with the responder's key, carrying the initiator's proof", ini, [keyR, wrongRole], "authentication_failed"),
            ("PROOF cut to 81 bytes", res, [commit, keyI, Array(proofI.dropLast())], "malformed_message"),
            ("PROOF padded to 83 bytes", res, [commit, keyI, proofI + [0]], "malformed_message"),
            ("PROOF padded to 113 bytes", res, [commit, keyI, proofI + [UInt8](repeating: 0, count: 31)], "malformed_message"),
            ("PROOF padded to 114 bytes (the length with a profile reference)", res,
                [commit, keyI, proofI + [UInt8](repeating: 0, count: 32)], "authentication_failed"),
            ("PROOF padded to 115 bytes", res, [commit, keyI, proofI + [UInt8](repeating: 0, count: 33)], "malformed_message"),
            ("PROOF of version 2", res, [commit, keyI, [2] + proofI.dropFirst()], "malformed_message"),
            ("a message after both PROOFs", res, [commit, keyI, proofI, proofI], "invalid_state"),
        ]
        var out: [[String: Any]] = []
        for (what, side, messages, result) in cases {
            let session = try fresh(side)
            expectEqual(session.isInitiator, side == ini, what)
            var failed: String?
            for (n, m) in messages.enumerated() {
                let kind = errorKind { try session.receive(m, now: t) }
                if n < messages.count - 1 { expectNil(kind, "\(what): message \(n)") } else { failed = kind.map(Self.errorName) }
            }
            expectEqual(failed, result, what)
            out.append(["case_text": what, "session": 0, "receiver_text": side, "messages": messages.map(hex), "result": result])
        }
        return out
    }

    // MARK: Security PIN Update: the commit order (section 10.3)

    /// Runs updates between the two sides of pin-update.json's first session,
    /// whose contacts start degraded with old device secrets, delivering
    /// frames one at a time (some lost), with voice verifications between,
    /// and records after each step what each side stores, says, shows and
    /// accepts.
    func pinUpdateCommitOrder(_ v: [String: Any]) throws -> [[String: Any]] {
        let seed = bytes(v, "seed")
        let dir = NSTemporaryDirectory() + "itsme-pin-order-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let oldA = Array(fixed("itsme-vector-pin-old-a").prefix(16)), oldB = Array(fixed("itsme-vector-pin-old-b").prefix(16))
        let (pa, _) = try party("pin-0-a", name: "Alice")
        let (pb, _) = try party("pin-0-b", name: "Bob")
        let aInit = (v["initiator_text"] as! String) == "a"
        let tagWindow = Int64(v["window"] as! Int) + 1000
        // The first update is the session's own; the second has its own
        // random sources, in a later window.
        let firstWindow = Int64(v["window"] as! Int)
        let updates: [(window: Int64, a: [UInt8], b: [UInt8])] = [
            (firstWindow, bytes(v["a"] as! [String: Any], "random_seed"), bytes(v["b"] as! [String: Any], "random_seed")),
            (firstWindow + 2, fixed("itsme-vector-pin-order-random-a"), fixed("itsme-vector-pin-order-random-b")),
        ]
        enum Step { case frame(update: Int, name: String), lost(update: Int, name: String), voice }
        let scenarios: [(String, [Step])] = [
            ("an update that completes, then a voice verification",
                [.frame(update: 0, name: "key_i"), .frame(update: 0, name: "key_r"), .frame(update: 0, name: "new_i"),
                 .frame(update: 0, name: "new_r"), .frame(update: 0, name: "done"), .voice]),
            ("DONE lost; a second update whose responder's NEW is lost; then a voice verification",
                [.frame(update: 0, name: "key_i"), .frame(update: 0, name: "key_r"), .frame(update: 0, name: "new_i"),
                 .frame(update: 0, name: "new_r"), .lost(update: 0, name: "done"),
                 .frame(update: 1, name: "key_i"), .frame(update: 1, name: "key_r"), .frame(update: 1, name: "new_i"),
                 .lost(update: 1, name: "new_r"), .voice]),
        ]
        var out: [[String: Any]] = []
        for (n, (what, steps)) in scenarios.enumerated() {
            func side(_ me: Party, _ peer: Party, mine: [UInt8], theirs: [UInt8]) throws -> PairSide {
                let store = try ContactStore(path: dir + "/\(n)-\(me.name).db", identity: me.identity)
                let id = try store.add(name: peer.name, publicKey: peer.publicKey, seed: try SecretBytes(copying: seed), method: .qr, now: now)
                try store.setDeviceSecrets(id: id, mine: try SecretBytes(copying: mine), theirs: try SecretBytes(copying: theirs))
                try store.setState(id: id, .degraded, acknowledged: false, now: now)
                return PairSide(identity: me.identity, store: store, contactID: id)
            }
            let sa = try side(pa, pb, mine: oldA, theirs: oldB), sb = try side(pb, pa, mine: oldB, theirs: oldA)
            func snapshot(_ s: PairSide, me: Party, peer: Party) throws -> [String: Any] {
                let d = try s.store.deviceSecrets(id: s.contactID)
                let (mine, theirs) = (d.mine.unsafeExportedArray(), d.theirs.unsafeExportedArray())
                let (pMine, pTheirs) = (d.pendingMine.unsafeExportedArray(), d.pendingTheirs.unsafeExportedArray())
                let previous = d.previousTheirs.unsafeExportedArray()
                let says = d.committed ? pMine : mine
                let accepts = [theirs, previous, pTheirs].filter { !$0.isEmpty }
                let shows: [UInt8]? = d.committed && !pTheirs.isEmpty ? pTheirs : (theirs.isEmpty ? nil : theirs)
                func tag(_ pid: [UInt8], _ secret: [UInt8]) throws -> Int {
                    Int(try VoiceProtocol.tag(seed: seed, window: tagWindow, speaker: pid, deviceSecret: secret))
                }
                let state = "\(try s.store.contact(id: s.contactID).state)"
                return [
                    "mine": hex(mine), "theirs": hex(theirs), "pending_mine": hex(pMine), "pending_theirs": hex(pTheirs),
                    "committed": d.committed, "previous_theirs": hex(previous), "says": hex(says), "accepts": accepts.map(hex),
                    "shows": shows.map { hex($0) as Any } ?? NSNull(), "state_text": state,
                    "says_tag": try tag(me.publicKey, says), "accepts_tags": try accepts.map { try tag(peer.publicKey, $0) },
                    "shows_tag": try shows.map { try tag(peer.publicKey, $0) as Any } ?? NSNull(),
                ]
            }
            /// What a voice session shows agrees with the snapshot: it says
            /// `says` and shows `shows`.
            func checkShown(_ x: VoiceSession, _ snap: [String: Any], me: Party, peer: Party) throws {
                let w = x.window
                expectEqual(
                    x.yourTag, try VoiceProtocol.tag(seed: seed, window: w, speaker: me.publicKey, deviceSecret: bytes(snap, "says")), what)
                let shows = (snap["shows"] as? String).map { Hex.decode($0)! }
                expectEqual(
                    x.theirTag, try shows.map { try VoiceProtocol.tag(seed: seed, window: w, speaker: peer.publicKey, deviceSecret: $0) },
                    what)
            }
            var running: [Int: (a: PinUpdate, b: PinUpdate)] = [:]
            var clock = now + 10_000
            var stepsJSON: [[String: Any]] = [
                ["step_text": "before", "a": try snapshot(sa, me: pa, peer: pb), "b": try snapshot(sb, me: pb, peer: pa)]
            ]
            for step in steps {
                var json: [String: Any] = [:]
                switch step {
                case .frame(let u, let name), .lost(let u, let name):
                    let t = updates[u].window * VoiceProtocol.windowSeconds
                    if running[u] == nil {
                        var ga = DeterministicRandom(seed: updates[u].a), gb = DeterministicRandom(seed: updates[u].b)
                        running[u] = (
                            try PinUpdate(store: sa.store, contactID: sa.contactID, window: updates[u].window, now: t, random: &ga),
                            try PinUpdate(store: sb.store, contactID: sb.contactID, window: updates[u].window, now: t, random: &gb)
                        )
                    }
                    let (ua, ub) = running[u]!
                    let fromInitiator = name.hasSuffix("_i") || name == "done"
                    let fromA = fromInitiator == aInit
                    let (from, to) = fromA ? (ua, ub) : (ub, ua)
                    let f = try unwrap(from.peekOutgoing(), "\(what): \(name)")
                    from.markSent()
                    var lost = true
                    if case .frame = step {
                        lost = false
                        try to.receive(f, now: t)
                    }
                    if u == 0 { expectEqual(hex(f), v[name] as? String, "\(what): \(name)") }
                    json = [
                        "update": u, "frame_text": name, "frame": hex(f), "to_text": fromA ? "b" : "a",
                        "step_text": (lost ? "lost: " : "delivered: ") + name,
                    ]
                case .voice:
                    let before = (a: try snapshot(sa, me: pa, peer: pb), b: try snapshot(sb, me: pb, peer: pa))
                    let (va, vb) = try voiceCodes(sa, sb, now: clock)
                    clock += 1000
                    try checkShown(va, before.a, me: pa, peer: pb)
                    try checkShown(vb, before.b, me: pb, peer: pa)
                    let end = va.window * 30 + 10
                    let oa = try va.check(heardCode: VoiceProtocol.codeText(vb.yourCode!), heardTag: vb.yourTag!, now: end)
                    let ob = try vb.check(heardCode: VoiceProtocol.codeText(va.yourCode!), heardTag: va.yourTag!, now: end)
                    json = [
                        "step_text": "a voice verification, each hearing the tag the other says",
                        "voice": [
                            "window": Int(va.window), "a_says_tag": Int(va.yourTag!), "a_shows_tag": va.theirTag.map { Int($0) as Any } ?? NSNull(),
                            "b_says_tag": Int(vb.yourTag!), "b_shows_tag": vb.theirTag.map { Int($0) as Any } ?? NSNull(),
                            "a_outcome_text": "\(oa)", "b_outcome_text": "\(ob)",
                        ] as [String: Any],
                    ]
                }
                json["a"] = try snapshot(sa, me: pa, peer: pb)
                json["b"] = try snapshot(sb, me: pb, peer: pa)
                stepsJSON.append(json)
            }
            out.append([
                "case_text": what, "session": 0, "a_device_secret": hex(oldA), "b_device_secret": hex(oldB), "tag_window": Int(tagWindow),
                "updates": updates.map { u -> [String: Any] in
                    func secret(_ r: [UInt8]) -> String {
                        var g = DeterministicRandom(seed: r)
                        return hex(Array(g.bytes(48)[32..<48]))
                    }
                    return [
                        "window": Int(u.window), "a_random_seed": hex(u.a), "b_random_seed": hex(u.b),
                        "a_new_device_secret": secret(u.a), "b_new_device_secret": secret(u.b),
                    ]
                },
                "steps": stepsJSON,
            ])
        }
        return out
    }

    // MARK: Section 9.3's reading procedure

    /// Byte streams read as section 9.3 reads the blocks (block_0 || block_1
    /// || ...), and the five indices each yields, sorted; none when the
    /// stream falls short.
    func wordReadingVectors() -> [[String: Any]] {
        // 32 bytes (one block) that give only four indices: repeats and
        // bytes of 234 and above, then a second block that completes them.
        let first: [UInt8] = [0, 26, 52, 78, 234, 255, 1, 27, 2, 28, 3] + [UInt8](repeating: 240, count: 21)
        let second: [UInt8] = [233, 4, 5, 6] + [UInt8](repeating: 0, count: 28)
        let streams: [(String, [UInt8])] = [
            ("one block giving five indices", Array(0..<32).map { UInt8($0 * 7) }),
            ("four indices in the first block, the fifth in the second", first + second),
            ("every byte skipped or repeated in the first block", [UInt8](repeating: 0xff, count: 31) + [25] + [25, 234, 24, 23, 0, 22] + [UInt8](repeating: 9, count: 26)),
            ("256 blocks that fall short", [UInt8](repeating: 0, count: 32 * 255) + [UInt8](repeating: 26, count: 32)),
        ]
        return streams.map { what, stream in
            var reader = VoiceProtocol.WordReader()
            let complete = reader.read(stream)
            // Read block by block, as the derivation does, it is the same.
            var byBlock = VoiceProtocol.WordReader()
            for i in stride(from: 0, to: stream.count, by: 32) where !byBlock.isComplete { byBlock.read(stream[i..<min(i + 32, stream.count)]) }
            expectEqual(byBlock.words, reader.words, what)
            return ["case_text": what, "stream": hex(stream), "words": complete ? reader.words as Any : NSNull()]
        }
    }
}

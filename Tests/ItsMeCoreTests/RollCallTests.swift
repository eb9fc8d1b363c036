import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives
import ItsMeRelayProtocol

/// The roll call (PROTOCOL.md 20) among several people in memory, through a
/// simulated group room that delivers every message to every other device
/// with the sender's slot, as the relay's group room does (15.9).
final class RollCallTests: XCTestCase {
    private var directory: String!
    private let t0: Int64 = 1_800_000_000
    private lazy var now = t0 + 100

    override func setUpWithError() throws {
        try Sodium.initialize()
        directory = NSTemporaryDirectory() + "itsme-rc-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: directory) }

    /// One person: an identity, its secret store and its contact store.
    final class Person {
        let name: String
        var identity: Identity
        var store: ContactStore
        var random: DeterministicRandom

        init(_ name: String, directory: String) throws {
            self.name = name
            random = DeterministicRandom(seed: SHA256.hash(Array("rc-\(name)".utf8)))
            identity = try Identity.create(store: MemorySecretStore(), name: name, random: &random)
            store = try ContactStore(path: directory + "/\(name).db", identity: identity)
        }

        /// The contact id of `other` here.
        func id(of other: Person) throws -> Int64 {
            guard let contact = try store.contacts(fingerprint: other.identity.fingerprint).first else {
                throw ItsMeError(.notFound, "\(other.name) is not a contact of \(name)")
            }
            return contact.id
        }

        /// The same person on a new device: a new secret store (new device
        /// key), the same contact file.
        func moveToNewDevice() throws {
            let moved = MemorySecretStore()
            try moved.put(Identity.itemName, bytes: try identity.store.get(Identity.itemName)!)
            identity = try Identity.load(store: moved)
            store = try ContactStore(path: store.path, identity: identity)
        }
    }

    private func person(_ name: String) throws -> Person { try Person(name, directory: directory) }

    /// `a` and `b` add each other by QR code (both confirm).
    private func exchange(_ a: Person, _ b: Person) throws {
        let xa = try Exchange.qr(identity: a.identity, store: a.store, now: t0, random: &a.random)
        let xb = try Exchange.qr(identity: b.identity, store: b.store, now: t0, random: &b.random)
        try xa.receive(xb.peekOutgoing()!, now: t0)
        try xb.receive(xa.peekOutgoing()!, now: t0)
        _ = try xa.confirm(now: t0)
        _ = try xb.confirm(now: t0)
    }

    /// A group room as the relay's (15.9): slots given in order, the
    /// events (`joined`, `peer-joined`, `peer-left`), and every message
    /// forwarded to every other peer with the sender's slot. `tamper` may
    /// change, drop (no delivery) or repeat (several) a message on its way
    /// to one receiver, and `delay` holds one back for some seconds (so
    /// later ones overtake it). A raw slot is a bare connection that knows
    /// only the meeting code: what it receives is kept, what it sends is
    /// injected by the test. Each device's clock is the room's plus its
    /// offset. With `asFrames`, each device is given what the relay sends
    /// as it comes (`roomText` with the event's JSON, `roomBinary` with the
    /// sender's slot before the message), as a host that parses nothing.
    final class Room {
        var asFrames = false
        var present: [(slot: Int, call: RollCall?)] = []
        var nextSlot = 1
        var now: Int64
        var offsets: [ObjectIdentifier: Int64] = [:]
        var log: [(slot: Int, message: [UInt8])] = []
        var received: [Int: [(slot: Int, message: [UInt8])]] = [:]
        var tamper: ((_ from: Int, _ to: Int, _ message: [UInt8]) -> [[UInt8]])?
        var delay: ((_ from: Int, _ to: Int, _ message: [UInt8]) -> Int64)?
        private var held: [(at: Int64, from: Int, to: Int, message: [UInt8])] = []
        var refusals: [ItsMeError.Kind] = []

        init(now: Int64) { self.now = now }

        func time(_ call: RollCall) -> Int64 { now + (offsets[ObjectIdentifier(call)] ?? 0) }

        @discardableResult
        func join(_ call: RollCall?) throws -> Int {
            let slot = nextSlot
            nextSlot += 1
            for case (_, let other?) in present { try event(.peerJoined(slot: slot), to: other) }
            if let call { try event(.joined(slot: slot, peers: present.map(\.slot)), to: call) }
            present.append((slot, call))
            try pump()
            return slot
        }

        func leave(_ slot: Int) throws {
            present.removeAll { $0.slot == slot }
            held.removeAll { $0.from == slot || $0.to == slot }
            for case (_, let other?) in present { try event(.peerLeft(slot: slot), to: other) }
            try pump()
        }

        private func event(_ event: RoomEvent, to call: RollCall) throws {
            guard asFrames else {
                switch event {
                case .joined(let slot, let peers): return try call.joined(slot: slot, peers: peers, now: time(call))
                case .peerJoined(let slot?): return try call.peerJoined(slot: slot, now: time(call))
                case .peerLeft(let slot?): return try call.peerLeft(slot: slot, now: time(call))
                default: return XCTFail("a group room sends no \(event.type)")
                }
            }
            try call.roomText(Array(event.json.utf8), now: time(call))
        }

        /// A bare connection sends `message`.
        func inject(_ message: [UInt8], from slot: Int) throws {
            forward(message, from: slot)
            try pump()
        }

        private func forward(_ message: [UInt8], from slot: Int) {
            guard present.count > 1 else { return }  // alone: refused by the relay
            log.append((slot, message))
            for (other, _) in present where other != slot {
                for copy in tamper.map({ $0(slot, other, message) }) ?? [message] {
                    held.append((now + (delay?(slot, other, copy) ?? 0), slot, other, copy))
                }
            }
        }

        func pump() throws {
            var moved = true
            while moved {
                moved = false
                for case (let slot, let call?) in present {
                    while let message = try call.takeOutgoing() {
                        moved = true
                        forward(message, from: slot)
                    }
                }
                while let i = held.firstIndex(where: { $0.at <= now }) {
                    let (_, from, to, message) = held.remove(at: i)
                    moved = true
                    guard let receiver = present.first(where: { $0.slot == to }) else { continue }
                    guard let call = receiver.call else {
                        received[to, default: []].append((from, message))
                        continue
                    }
                    do {
                        if asFrames {
                            try call.roomBinary([UInt8(from >> 8), UInt8(from & 0xff)] + message, now: time(call))
                        } else {
                            try call.receive(message, from: from, now: time(call))
                        }
                    } catch let error as ItsMeError {
                        refusals.append(error.kind)
                    }
                }
            }
        }

        /// `seconds` seconds pass: each device ticks once a second.
        func run(_ seconds: Int) throws {
            for _ in 0..<seconds {
                now += 1
                for case (_, let call?) in present { try call.tick(now: time(call)) }
                try pump()
            }
        }

        func slot(of call: RollCall) -> Int { present.first { $0.call === call }!.slot }
    }

    private func meetingCode(_ n: Int = 1) -> RemoteCode {
        var r = DeterministicRandom(seed: SHA256.hash(Array("meeting-\(n)".utf8)))
        return RemoteCode.random(using: &r)
    }

    private func call(_ person: Person, code: RemoteCode? = nil, binding: [UInt8]? = nil) throws -> RollCall {
        try RollCall(store: person.store, meetingCode: code ?? meetingCode(), binding: binding, now: now, random: &person.random)
    }

    private func join(_ person: Person, _ room: Room, code: RemoteCode? = nil, binding: [UInt8]? = nil) throws -> RollCall {
        let c = try call(person, code: code, binding: binding)
        try room.join(c)
        return c
    }

    /// The participant of `call` that is `other`'s device.
    private func index(in call: RollCall, of other: Person, _ owner: Person) throws -> Int? {
        let id = try owner.id(of: other)
        return call.participants.first { $0.contactID == id }?.index
    }

    private func state(_ call: RollCall, _ owner: Person, of other: Person) throws -> RollCall.ParticipantState? {
        guard let i = try index(in: call, of: other, owner) else { return nil }
        return call.participants[i].state
    }

    private func confirmAll(_ calls: [(Person, RollCall)], _ room: Room) throws {
        for (person, call) in calls where call.phase == .gathering {
            try call.confirmRoster(call.rosterHash, now: room.time(call), random: &person.random)
        }
    }

    private func sayAll(_ calls: [(Person, RollCall)], _ room: Room) throws {
        for (person, call) in calls where call.phase == .confirmed { try call.confirmSaid(now: room.time(call), random: &person.random) }
        try room.pump()
    }

    /// Each listener types the code each of its contacts' devices shows.
    private func hearAll(_ calls: [(Person, RollCall)], _ room: Room) throws {
        for (listener, call) in calls {
            for (speaker, speakerCall) in calls where speaker !== listener {
                guard let i = try? index(in: call, of: speaker, listener), let code = speakerCall.myCode,
                    !call.participants[i].left
                else { continue }
                switch call.participants[i].state {
                case .verified, .deviceChanged, .verifiedTagUnchecked: continue
                default: break
                }
                do {
                    try call.enterHeard(code, from: i, now: room.time(call))
                } catch let error as ItsMeError where error.kind == .authenticationFailed {
                    continue  // a sealed code tampered with: the participant shows `refused`
                }
            }
        }
    }

    /// Everyone confirms, says and hears what is left to check.
    private func rollCall(_ calls: [(Person, RollCall)], _ room: Room) throws {
        try confirmAll(calls, room)
        try sayAll(calls, room)
        try hearAll(calls, room)
    }

    private func sameRoster(_ calls: [RollCall]) -> Bool { Set(calls.map { Hex.encodeUpper($0.rosterHash) }).count == 1 }

    private func wrongCode(for right: String) -> String { right.hasPrefix("ALFA") ? "BRAVO 000" : "ALFA 000" }

    // MARK: Tests

    func testFivePeopleWhereSomeExchangedEachPairThatExchangedVerifies() throws {
        let (a, b, c, d, e) = (try person("Ana"), try person("Ben"), try person("Cai"), try person("Dee"), try person("Eve"))
        try exchange(a, b)
        try exchange(a, c)
        try exchange(b, c)
        try exchange(c, d)
        // Dee has changed phones since she added Cai: Cai's device holds
        // her old device secret.
        try d.moveToNewDevice()
        let room = Room(now: now)
        let calls = try [a, b, c, d, e].map { ($0, try join($0, room)) }
        XCTAssertEqual(room.refusals, [])
        // Every device sees the same five present, so the same roster.
        XCTAssertTrue(sameRoster(calls.map(\.1)))
        for (_, call) in calls {
            XCTAssertEqual(call.participants.count, 5)
            XCTAssertEqual(call.headCount, 5)
        }
        // Ana sees Ben and Cai; Dee and Eve are unknown to her.
        let ana = calls[0].1
        XCTAssertEqual(ana.participants.filter { $0.state == .unknown }.count, 3)  // herself, Dee, Eve
        XCTAssertEqual(try state(ana, a, of: b), .notYet)
        // Eve's device holds no seed with anyone: everyone is unknown to it.
        XCTAssertTrue(calls[4].1.participants.allSatisfy { $0.state == .unknown })
        // A second later every device's VIEW names the same roster: all agree, no split.
        try room.run(6)
        for (_, call) in calls {
            XCTAssertTrue(call.participants.allSatisfy(\.agrees))
            XCTAssertFalse(call.isSplit)
        }

        try confirmAll(calls, room)
        for (_, call) in calls {
            XCTAssertEqual(call.phase, .confirmed)
            XCTAssertNotNil(call.myCode)
        }
        try sayAll(calls, room)
        XCTAssertEqual(room.refusals, [])
        try hearAll(calls, room)

        XCTAssertEqual(try state(ana, a, of: b), .verified)
        XCTAssertEqual(try state(ana, a, of: c), .verified)
        XCTAssertEqual(try state(calls[1].1, b, of: a), .verified)
        XCTAssertEqual(try state(calls[1].1, b, of: c), .verified)
        let cai = calls[2].1
        XCTAssertEqual(try state(cai, c, of: a), .verified)
        XCTAssertEqual(try state(cai, c, of: d), .deviceChanged)
        // Dee's new device holds no device secret of Cai's: the code proves the seed.
        XCTAssertEqual(try state(calls[3].1, d, of: c), .verifiedTagUnchecked)
        // The outcomes are recorded on the contacts.
        XCTAssertEqual(try a.store.contact(id: a.id(of: b)).state, .verified)
        XCTAssertEqual(try c.store.contact(id: c.id(of: d)).state, .degraded)
        // Once all is said and taken, the devices fall quiet.
        try room.run(10)
        let sentBefore = room.log.count
        try room.run(20)
        XCTAssertEqual(room.log.count, sentBefore)
    }

    /// A host that hands the group room's frames to the core as they came
    /// (PROTOCOL.md 15.3's events as JSON text, each message behind its
    /// sender's slot) gets the same roll call; what no group room sends is
    /// refused and changes nothing.
    func testAHostThatParsesNothingGetsTheSameRollCall() throws {
        let (a, b, c) = (try person("Ana"), try person("Ben"), try person("Cai"))
        try exchange(a, b)
        try exchange(b, c)
        let room = Room(now: now)
        room.asFrames = true
        let calls = try [a, b, c].map { ($0, try join($0, room)) }
        XCTAssertEqual(room.refusals, [])
        XCTAssertTrue(sameRoster(calls.map(\.1)))
        XCTAssertEqual(calls[1].1.headCount, 3)
        try room.run(3)

        let ben = calls[1].1
        let (roster, count) = (ben.rosterHash, ben.participants)
        let junk: [(String, [UInt8])] = [
            ("not JSON", Array("hello".utf8)),
            ("a two-person room's event", Array(RoomEvent.peerJoined(slot: nil).json.utf8)),
            ("a two-person room's waiting", Array(RoomEvent.waiting.json.utf8)),
            ("a slot out of range", Array(#"{"type":"peer-joined","slot":0}"#.utf8)),
        ]
        for (what, text) in junk {
            XCTAssertThrowsError(try ben.roomText(text, now: room.time(ben)), what) {
                XCTAssertEqual(($0 as? ItsMeError)?.kind, .malformedMessage, what)
            }
        }
        for frame: [UInt8] in [[], [0]] {
            XCTAssertThrowsError(try ben.roomBinary(frame, now: room.time(ben))) {
                XCTAssertEqual(($0 as? ItsMeError)?.kind, .malformedMessage)
            }
        }
        // A refusal and an event this version does not know change nothing.
        try ben.roomText(Array(RoomEvent.refused(reason: RoomEvent.noPeer).json.utf8), now: room.time(ben))
        try ben.roomText(Array(#"{"type":"later-event"}"#.utf8), now: room.time(ben))
        XCTAssertEqual(ben.rosterHash, roster)
        XCTAssertEqual(ben.participants, count)
        XCTAssertNil(try ben.peekOutgoing())

        try room.pump()
        try rollCall(calls, room)
        XCTAssertEqual(try state(calls[0].1, a, of: b), .verified)
        XCTAssertEqual(try state(ben, b, of: a), .verified)
        XCTAssertEqual(try state(ben, b, of: c), .verified)
        XCTAssertEqual(try state(calls[2].1, c, of: b), .verified)
        XCTAssertEqual(room.refusals, [])
    }

    func testNoSealedCodeLeavesADeviceBeforeItsOwnerSaidIt() throws {
        let (a, b) = (try person("Ana"), try person("Ben"))
        try exchange(a, b)
        let room = Room(now: now)
        let ca = try join(a, room), cb = try join(b, room)
        try room.run(3)
        try ca.confirmRoster(ca.rosterHash, now: now, random: &a.random)
        try cb.confirmRoster(cb.rosterHash, now: now, random: &b.random)
        try room.run(3)
        // Only HELLOs and VIEWs went through the room.
        XCTAssertEqual(Set(room.log.map { $0.message[1] }), [1, 3])
        // Ben types what he expects Ana to say: nothing to compare with yet.
        let i = try index(in: cb, of: a, b)!
        XCTAssertEqual(try cb.enterHeard(ca.myCode!, from: i, now: now), .notYet)
        try ca.confirmSaid(now: room.now, random: &a.random)
        try room.pump()
        XCTAssertEqual(room.log.filter { $0.message[1] == 2 }.count, 1)
        XCTAssertEqual(try state(cb, b, of: a), .verified)
        // Said once per round.
        XCTAssertEqual(errorKind { try ca.confirmSaid(now: room.now, random: &a.random) }, .invalidState)
    }

    func testAWrongCodeIsWrongAndThreeLockTheRound() throws {
        let (a, b) = (try person("Ana"), try person("Ben"))
        try exchange(a, b)
        let room = Room(now: now)
        let ca = try join(a, room), cb = try join(b, room)
        try confirmAll([(a, ca), (b, cb)], room)
        try sayAll([(a, ca), (b, cb)], room)
        let i = try index(in: cb, of: a, b)!
        let right = ca.myCode!
        XCTAssertEqual(try cb.enterHeard(wrongCode(for: right), from: i, now: now), .wrong)
        XCTAssertEqual(try b.store.contact(id: b.id(of: a)).state, .verified)  // from the exchange; unchanged
        XCTAssertEqual(try cb.enterHeard(wrongCode(for: right), from: i, now: now), .wrong)
        XCTAssertEqual(try cb.enterHeard(right, from: i, now: now), .verified)
        XCTAssertEqual(errorKind { try cb.enterHeard(right, from: i, now: self.now) }, .invalidState)
        // Ana: three wrong codes for Ben lock him for the round.
        let j = try index(in: ca, of: b, a)!
        for _ in 0..<3 { XCTAssertEqual(try ca.enterHeard(wrongCode(for: cb.myCode!), from: j, now: now), .wrong) }
        XCTAssertEqual(errorKind { try ca.enterHeard(cb.myCode!, from: j, now: self.now) }, .locked)
        XCTAssertEqual(errorKind { try ca.enterHeard("NOT A CODE", from: j, now: self.now) }, .invalidArgument)
        XCTAssertEqual(errorKind { try ca.enterHeard(cb.myCode!, from: 0, now: self.now) }, .invalidArgument)
        XCTAssertEqual(errorKind { try ca.enterHeard(cb.myCode!, from: 7, now: self.now) }, .invalidArgument)
    }

    func testALateJoinerStartsANewRoundAndTheOldRoundsMessagesAreRefused() throws {
        let (a, b, c) = (try person("Ana"), try person("Ben"), try person("Cai"))
        try exchange(a, b)
        try exchange(a, c)
        let room = Room(now: now)
        let ca = try join(a, room), cb = try join(b, room)
        try rollCall([(a, ca), (b, cb)], room)
        XCTAssertEqual(try state(ca, a, of: b), .verified)
        let oldRoster = ca.rosterHash
        let oldSaid = room.log.first { $0.message[1] == 2 && $0.slot == room.slot(of: cb) }!.message
        // Cai joins late: everyone's round starts again.
        let cc = try join(c, room)
        XCTAssertTrue(sameRoster([ca, cb, cc]))
        XCTAssertNotEqual(ca.rosterHash, oldRoster)
        XCTAssertEqual(ca.phase, .gathering)
        XCTAssertEqual(cb.phase, .gathering)
        XCTAssertNil(ca.myCode)
        // What was checked stays.
        XCTAssertEqual(try state(ca, a, of: b), .verified)
        // Ben's SAID of the old round, replayed: another roster.
        XCTAssertEqual(errorKind { try ca.receive(oldSaid, from: room.slot(of: cb), now: self.now) }, .invalidState)
        XCTAssertEqual(errorKind { try cc.receive(oldSaid, from: room.slot(of: cb), now: self.now) }, .invalidState)
        // Confirming the roster shown before the change is refused.
        XCTAssertEqual(errorKind { try ca.confirmRoster(oldRoster, now: self.now, random: &a.random) }, .invalidState)
        let calls = [(a, ca), (b, cb), (c, cc)]
        try rollCall(calls, room)
        XCTAssertEqual(try state(ca, a, of: c), .verified)
        XCTAssertEqual(try state(cc, c, of: a), .verified)
        XCTAssertEqual(try state(ca, a, of: b), .verified)
        XCTAssertEqual(room.refusals, [])
    }

    /// A malicious colleague who seals a code that is not his for a contact:
    /// refused, never verified nor wrong.
    func testASealedCodeThatDoesNotOpenIsRefusedForTheRound() throws {
        let (a, b) = (try person("Ana"), try person("Ben"))
        try exchange(a, b)
        let room = Room(now: now)
        let ca = try join(a, room), cb = try join(b, room)
        try confirmAll([(a, ca), (b, cb)], room)
        let forged = try RollCallSaid(
            speaker: cb.machine.me.key, roster: cb.rosterHash, entries: [[UInt8](repeating: 7, count: RollCallProtocol.entryCount)],
            rollCallID: cb.machine.rollCallID, signingKey: cb.machine.signingKey)
        let i = try index(in: ca, of: b, a)!
        XCTAssertEqual(try ca.enterHeard("ECHO 042", from: i, now: now), .notYet)
        XCTAssertEqual(errorKind { try ca.receive(forged.bytes, from: room.slot(of: cb), now: self.now) }, .authenticationFailed)
        XCTAssertEqual(try state(ca, a, of: b), .refused)
        XCTAssertEqual(try a.store.contact(id: a.id(of: b)).state, .verified)  // from the exchange; unchanged
    }

    // MARK: What a stranger, an insider and a relay can do (PROTOCOL.md 20.8)

    /// Finding 1: a HELLO extended with more tags, or with one changed, is
    /// refused; its tags copied under another key name nobody.
    func testAnExtendedOrAlteredHelloIsRefusedAndCopiedTagsNameNobody() throws {
        let (a, b) = (try person("Ana"), try person("Ben"))
        try exchange(a, b)
        let room = Room(now: now)
        let ca = try join(a, room), cb = try join(b, room)
        let stranger = try room.join(nil)
        let hello = room.log.first { $0.slot == room.slot(of: ca) && $0.message[1] == 1 }!.message
        var extended = Array(hello.dropLast(64))
        extended.replaceSubrange(67..<69, with: [0, 64])
        extended += (0..<32).flatMap { i in [UInt8](repeating: 0xFF, count: 15) + [UInt8(i)] } + Array(hello.suffix(64))
        var altered = hello
        altered[80] ^= 1
        XCTAssertEqual(errorKind { try cb.receive(extended, from: stranger, now: self.now) }, .authenticationFailed)
        XCTAssertEqual(errorKind { try cb.receive(altered, from: stranger, now: self.now) }, .authenticationFailed)
        // Ana's tags under the stranger's own key, signed by him: nobody's contact, and not present without a VIEW.
        let parsed = try RollCallHello(parsing: hello, rollCallID: ca.machine.rollCallID)
        var r = DeterministicRandom(seed: SHA256.hash(Array("stranger".utf8)))
        let pair = try Ed25519.keyPair(seed: try SecretBytes(randomCount: 32, using: &r))
        let key = SecretBox(try pair.secretKey.copy())
        let copy = try RollCallHello(
            bound: false, key: pair.publicKey, bindingCheck: parsed.bindingCheck, tags: parsed.tags, rollCallID: ca.machine.rollCallID,
            signingKey: key)
        try room.inject(copy.bytes, from: stranger)
        let view = try RollCallView(
            key: pair.publicKey, seq: 1, slot: stranger, roster: cb.rosterHash, said: false,
            names: ([copy.name] + ca.machine.round.names).sorted { $0.lexicographicallyPrecedes($1) }, have: [false, false, false],
            rollCallID: ca.machine.rollCallID, signingKey: key)
        try room.inject(view.bytes, from: stranger)
        XCTAssertEqual(cb.headCount, 3)
        XCTAssertEqual(cb.participants.filter { $0.contactID != nil }.count, 1)  // Ana only
        XCTAssertEqual(cb.participants.last?.state, .unknown)
        XCTAssertTrue(sameRoster([ca, cb]))
    }

    /// A relay that admits more joins than 15.9's 200, for an insider who
    /// comes back under a new key each time: a device shows at most 200
    /// participants over the roll call, itself included (20.3), and refuses
    /// the 200th newcomer; one already shown may still come back.
    func testAtMostTwoHundredParticipantsOverTheRollCall() throws {
        let a = try person("Ana")
        let room = Room(now: now)
        let ca = try join(a, room)
        let rcid = ca.machine.rollCallID
        let tags = try RollCallHello(parsing: ca.machine.me.bytes, rollCallID: rcid).tags
        var r = DeterministicRandom(seed: SHA256.hash(Array("churn".utf8)))
        func comeAndGo(_ key: SecretBox, _ publicKey: [UInt8]) throws {
            let slot = try room.join(nil)
            let hello = try RollCallHello(
                bound: false, key: publicKey, bindingCheck: [UInt8](repeating: 0, count: 32), tags: tags, rollCallID: rcid,
                signingKey: key)
            try room.inject(hello.bytes, from: slot)
            let view = try RollCallView(
                key: publicKey, seq: 1, slot: slot, roster: ca.rosterHash, said: false,
                names: [hello.name, ca.machine.me.name].sorted { $0.lexicographicallyPrecedes($1) }, have: [false, false],
                rollCallID: rcid, signingKey: key)
            try room.inject(view.bytes, from: slot)
            try room.leave(slot)
        }
        var first: (SecretBox, [UInt8])?
        for n in 1...200 {
            let pair = try Ed25519.keyPair(seed: try SecretBytes(randomCount: 32, using: &r))
            let key = SecretBox(try pair.secretKey.copy())
            if first == nil { first = (key, pair.publicKey) }
            room.refusals = []
            try comeAndGo(key, pair.publicKey)
            XCTAssertEqual(ca.participants.count, min(n + 1, 200), "newcomer \(n)")
            XCTAssertEqual(room.refusals, n < 200 ? [] : [.invalidArgument], "newcomer \(n)")
        }
        // The first one comes back: already shown, so present again.
        room.refusals = []
        try comeAndGo(first!.0, first!.1)
        XCTAssertEqual(room.refusals, [])
        XCTAssertEqual(ca.participants.count, 200)
    }

    /// Finding 2: a participant's HELLO and VIEW from an earlier roll call
    /// with the same meeting code, replayed while that person is absent:
    /// never shown, never counted.
    func testAHelloAndViewOfAnEarlierRollCallNeverMakeAnyonePresent() throws {
        let (a, b, c) = (try person("Ana"), try person("Ben"), try person("Cai"))
        try exchange(a, b)
        try exchange(a, c)
        try exchange(b, c)
        let earlier = Room(now: now - 300)
        let oldA = try RollCall(store: a.store, meetingCode: meetingCode(), now: earlier.now, random: &a.random)
        let oldB = try RollCall(store: b.store, meetingCode: meetingCode(), now: earlier.now, random: &b.random)
        try earlier.join(oldA)
        try earlier.join(oldB)
        let old = earlier.log.filter { $0.slot == earlier.slot(of: oldB) }.map(\.message)
        // Now Ana and Cai hold a new roll call with the same code; a stranger replays Ben's messages.
        let room = Room(now: now)
        let ca = try join(a, room), cc = try join(c, room)
        let stranger = try room.join(nil)
        for message in old { try room.inject(message, from: stranger) }
        try room.run(8)
        for call in [ca, cc] {
            XCTAssertEqual(call.headCount, 2)
            XCTAssertEqual(call.participants.count, 2)
            XCTAssertNil(try index(in: call, of: b, call === ca ? a : c))
        }
        // The stale HELLO re-sent by Ben's own device, restored from an old image (its roll call gone): the same.
        for message in old where message[1] == 1 { try room.inject(message, from: stranger) }
        XCTAssertEqual(ca.headCount, 2)
        XCTAssertTrue(sameRoster([ca, cc]))
    }

    /// Finding 3: a bare connection answers a newcomer first with Ana's
    /// HELLO, then sends a SAID in her name: it blocks nobody, and Ana's
    /// real SAID counts whoever carries it.
    func testAStrangerWhoAnswersFirstBlocksNobody() throws {
        let (a, b) = (try person("Ana"), try person("Ben"))
        try exchange(a, b)
        let room = Room(now: now)
        let ca = try join(a, room)
        let stranger = try room.join(nil)
        try room.run(2)
        let anaHello = room.received[stranger]!.first { $0.message[1] == 1 }!.message
        // Ben arrives; the stranger's copy of Ana's HELLO reaches him first.
        let cb = try call(b)
        let benSlot = room.nextSlot
        room.tamper = { from, to, message in from == 1 && to == benSlot && message[1] == 1 ? [] : [message] }
        try room.join(cb)
        try room.inject(anaHello, from: stranger)
        room.tamper = nil
        try room.run(4)
        XCTAssertTrue(sameRoster([ca, cb]))
        XCTAssertEqual(cb.headCount, 2)
        try confirmAll([(a, ca), (b, cb)], room)
        // A SAID in Ana's name, signed by the stranger: refused, and changes nothing.
        var r = DeterministicRandom(seed: SHA256.hash(Array("blocker".utf8)))
        let pair = try Ed25519.keyPair(seed: try SecretBytes(randomCount: 32, using: &r))
        let forged = try RollCallSaid(
            speaker: ca.machine.me.key, roster: cb.rosterHash, entries: [[UInt8](repeating: 1, count: RollCallProtocol.entryCount)],
            rollCallID: ca.machine.rollCallID, signingKey: SecretBox(try pair.secretKey.copy()))
        XCTAssertEqual(errorKind { try cb.receive(forged.bytes, from: stranger, now: self.now) }, .authenticationFailed)
        // Ana's real SAID, carried by the stranger's slot first: taken.
        room.tamper = { from, _, message in from == 1 && message[1] == 2 ? [] : [message] }
        try ca.confirmSaid(now: room.now, random: &a.random)
        try room.pump()
        let said = room.log.last { $0.message[1] == 2 }!.message
        try cb.receive(said, from: stranger, now: now)
        XCTAssertEqual(try cb.enterHeard(ca.myCode!, from: try index(in: cb, of: a, b)!, now: now), .verified)
    }

    /// Finding 4: clocks seconds apart, around a window boundary: no clock
    /// decides who is present; every device holds the same roster.
    func testClocksSecondsApartAroundAWindowBoundaryConverge() throws {
        let people = try ["Ana", "Ben", "Cai", "Dee"].map(person)
        for i in 1..<4 { try exchange(people[0], people[i]) }
        let boundary = (now / 30 + 1) * 30
        let room = Room(now: boundary - 2)
        var calls: [(Person, RollCall)] = []
        for (i, p) in people.enumerated() {
            let c = try RollCall(store: p.store, meetingCode: meetingCode(), now: room.now + Int64(i * 3 - 4), random: &p.random)
            room.offsets[ObjectIdentifier(c)] = Int64(i * 3 - 4)
            try room.join(c)
            calls.append((p, c))
        }
        try room.run(4)
        XCTAssertTrue(sameRoster(calls.map(\.1)))
        XCTAssertEqual(room.refusals, [])
        try rollCall(calls, room)
        for i in 1..<4 { XCTAssertEqual(try state(calls[0].1, people[0], of: people[i]), .verified) }
    }

    /// Finding 5: one meeting code in two calls, a relay joining them, each
    /// victim seeing a deepfake of the other who repeats what the other
    /// says. Without a call binding both are verified (PROTOCOL.md 20.8
    /// says so); with each call's binding nobody is, and each shows the
    /// other as in another call. A device that binds beside one that does
    /// not shows the difference.
    func testRelayingBothWaysBetweenTwoCalls() throws {
        let (a, b) = (try person("Ana"), try person("Ben"))
        try exchange(a, b)
        // Unbound: the limit the document states.
        let open = Room(now: now)
        let ca = try join(a, open), cb = try join(b, open)
        try rollCall([(a, ca), (b, cb)], open)
        XCTAssertEqual(try state(ca, a, of: b), .verified)
        // Bound to two different calls: nobody verified.
        let bound = Room(now: now)
        let call1 = SHA256.hash(Array("call one".utf8)), call2 = SHA256.hash(Array("call two".utf8))
        let ba = try join(a, bound, code: meetingCode(2), binding: call1)
        let bb = try join(b, bound, code: meetingCode(2), binding: call2)
        XCTAssertTrue(sameRoster([ba, bb]))  // both see both: the roster names devices, the binding keys
        XCTAssertEqual(ba.participants[1].state, .otherCall)
        XCTAssertEqual(bb.participants[1].state, .otherCall)
        XCTAssertNil(ba.participants[1].contactID)
        try confirmAll([(a, ba), (b, bb)], bound)
        try sayAll([(a, ba), (b, bb)], bound)
        XCTAssertEqual(errorKind { try ba.enterHeard(bb.myCode!, from: 1, now: self.now) }, .invalidState)
        XCTAssertFalse(ba.participants.contains { $0.state == .verified })
        // One bound, one not: shown as such on both.
        let mixed = Room(now: now)
        let ma = try join(a, mixed, code: meetingCode(3), binding: call1)
        let mb = try join(b, mixed, code: meetingCode(3))
        XCTAssertEqual(ma.participants[1].state, .bindingDiffers)
        XCTAssertEqual(mb.participants[1].state, .bindingDiffers)
        // The same binding on both: verified as without.
        let same = Room(now: now)
        let sa = try join(a, same, code: meetingCode(4), binding: call1)
        let sb = try join(b, same, code: meetingCode(4), binding: call1)
        try rollCall([(a, sa), (b, sb)], same)
        XCTAssertEqual(try state(sa, a, of: b), .verified)
        XCTAssertEqual(errorKind { _ = try self.call(a, binding: [1, 2, 3]) }, .invalidArgument)
        XCTAssertEqual(errorKind { _ = try self.call(a, binding: [UInt8](repeating: 1, count: 65)) }, .invalidArgument)
    }

    /// Finding 6: after Cai leaves, Dee joins: Ana, Ben and Dee hold the
    /// same roster and every pair is checkable.
    func testLeaveThenJoinKeepsEveryoneCheckable() throws {
        let (a, b, c, d) = (try person("Ana"), try person("Ben"), try person("Cai"), try person("Dee"))
        try exchange(a, b)
        try exchange(a, d)
        try exchange(b, d)
        let room = Room(now: now)
        let ca = try join(a, room), cb = try join(b, room), cc = try join(c, room)
        try room.leave(room.slot(of: cc))
        let cd = try join(d, room)
        try room.run(3)
        XCTAssertTrue(sameRoster([ca, cb, cd]))
        XCTAssertEqual(ca.headCount, 3)
        XCTAssertEqual(ca.participants.count, 4)
        XCTAssertTrue(ca.participants[2].left)  // Cai, shown as gone
        try rollCall([(a, ca), (b, cb), (d, cd)], room)
        XCTAssertEqual(room.refusals, [])
        XCTAssertEqual(try state(cd, d, of: a), .verified)
        XCTAssertEqual(try state(cd, d, of: b), .verified)
        XCTAssertEqual(try state(ca, a, of: d), .verified)
    }

    /// Finding 6: a device whose connection drops and comes back (a new
    /// slot) keeps its place: the round comes back, its SAID and the codes
    /// already heard stay good, nobody confirms again.
    func testADeviceThatDropsAndRejoinsKeepsItsPlaceAndTheRound() throws {
        let (a, b, c) = (try person("Ana"), try person("Ben"), try person("Cai"))
        try exchange(a, b)
        try exchange(a, c)
        let room = Room(now: now)
        let ca = try join(a, room), cb = try join(b, room), cc = try join(c, room)
        try confirmAll([(a, ca), (b, cb), (c, cc)], room)
        try sayAll([(a, ca), (b, cb)], room)
        let roster = ca.rosterHash
        // Ben's connection drops; Ana sees him gone (a new round), then back under a new slot.
        try room.leave(room.slot(of: cb))
        XCTAssertEqual(ca.headCount, 2)
        XCTAssertEqual(ca.phase, .gathering)
        try room.join(cb)
        try room.run(2)
        XCTAssertEqual(ca.rosterHash, roster)
        XCTAssertEqual(ca.phase, .said)  // the round came back
        XCTAssertEqual(cb.phase, .said)
        XCTAssertEqual(cc.phase, .confirmed)
        XCTAssertEqual(try ca.enterHeard(cb.myCode!, from: try index(in: ca, of: b, a)!, now: room.now), .verified)
        XCTAssertEqual(try cb.enterHeard(ca.myCode!, from: try index(in: cb, of: a, b)!, now: room.now), .verified)
        try cc.confirmSaid(now: room.now, random: &c.random)
        try room.pump()
        XCTAssertEqual(try ca.enterHeard(cc.myCode!, from: try index(in: ca, of: c, a)!, now: room.now), .verified)
        XCTAssertEqual(room.refusals, [])
        // An app restart is a new participant: a new key, and the old one stays gone.
        try room.leave(room.slot(of: cc))
        let restarted = try join(c, room)
        try room.run(2)
        XCTAssertTrue(sameRoster([ca, cb, restarted]))
        XCTAssertEqual(ca.participants.count, 4)
        XCTAssertTrue(ca.participants[2].left)
        XCTAssertEqual(ca.participants[3].state, .notYet)
    }

    /// Finding 7: after a new round, a participant that was wrong three
    /// times reads "not yet" when a new code is typed before its SAID.
    func testANewRoundShowsNotYetForOneThatWasWrong() throws {
        let (a, b, c) = (try person("Ana"), try person("Ben"), try person("Cai"))
        try exchange(a, b)
        let room = Room(now: now)
        let ca = try join(a, room), cb = try join(b, room)
        try confirmAll([(a, ca), (b, cb)], room)
        try sayAll([(a, ca), (b, cb)], room)
        let i = try index(in: cb, of: a, b)!
        for _ in 0..<3 { XCTAssertEqual(try cb.enterHeard(wrongCode(for: ca.myCode!), from: i, now: now), .wrong) }
        _ = try join(c, room)
        XCTAssertEqual(cb.participants[i].state, .notYet)
        try cb.confirmRoster(cb.rosterHash, now: now, random: &b.random)
        XCTAssertEqual(try cb.enterHeard("ECHO 042", from: i, now: now), .notYet)
    }

    /// A relay (or network) that drops, repeats, reorders and delays
    /// messages at random: every run ends with one roster everywhere, no
    /// false verified, and every pair of contacts verified.
    func testALossyRoomConvergesAndEveryPairVerifies() throws {
        let people = try (0..<6).map { try person("P\($0)") }
        for i in 0..<6 { for j in (i + 1)..<6 where (i + j) % 3 != 0 { try exchange(people[i], people[j]) } }
        for seed in 0..<8 {
            var rng = DeterministicRandom(seed: SHA256.hash(Array("lossy-\(seed)".utf8)))
            func chance(_ percent: Int) -> Bool { Int(rng.bytes(1)[0]) * 100 < percent * 256 }
            let room = Room(now: now + Int64(seed) * 1_000)
            room.tamper = { _, _, message in chance(20) ? [] : chance(10) ? [message, message] : [message] }
            room.delay = { _, _, _ in chance(30) ? Int64(rng.bytes(1)[0] % 3) : 0 }
            let code = meetingCode(100 + seed)
            var calls: [(Person, RollCall)] = []
            for p in people {
                let c = try RollCall(store: p.store, meetingCode: code, now: room.now, random: &p.random)
                try room.join(c)
                calls.append((p, c))
                try room.run(1)
            }
            try room.run(30)
            XCTAssertTrue(sameRoster(calls.map(\.1)), "run \(seed)")
            for _ in 0..<3 {
                try rollCall(calls, room)
                try room.run(20)
            }
            try hearAll(calls, room)
            for (p, call) in calls {
                for (q, _) in calls where q !== p {
                    let expected: RollCall.ParticipantState? = (try? p.id(of: q)) == nil ? nil : .verified
                    XCTAssertEqual(try? state(call, p, of: q), expected, "run \(seed): \(p.name) of \(q.name)")
                }
                XCTAssertEqual(call.participants.filter { $0.state == .verified }.count, call.participants.filter { $0.contactID != nil }.count)
            }
        }
    }

    /// A relay that hides Cai from Ana and Ana from Cai, and shows both to
    /// Ben: every device shows a split once its roster has not changed for
    /// 5 seconds.
    func testARelayThatShowsDifferentParticipantsToDifferentDevicesIsShownAsASplit() throws {
        let (a, b, c) = (try person("Ana"), try person("Ben"), try person("Cai"))
        try exchange(a, b)
        try exchange(b, c)
        let room = Room(now: now)
        room.tamper = { from, to, message in Set([from, to]) == [1, 3] ? [] : [message] }
        let ca = try join(a, room), cb = try join(b, room), cc = try join(c, room)
        try room.run(2)
        XCTAssertFalse(ca.isSplit)
        try room.run(5)
        for call in [ca, cb, cc] { XCTAssertTrue(call.isSplit) }
        XCTAssertEqual(ca.headCount, 2)
        XCTAssertEqual(cb.headCount, 3)
    }

    /// What a join costs: at most 3M + 3 messages with M present (20.6).
    func testAJoinCostsAtMostThreeMessagesPerParticipantPresent() throws {
        let people = try (0..<8).map { try person("J\($0)") }
        let room = Room(now: now)
        for (m, p) in people.enumerated() {
            let before = room.log.count
            try room.join(try call(p))
            try room.run(2)
            XCTAssertLessThanOrEqual(room.log.count - before, 3 * m + 3, "join with \(m) present")
        }
    }

    /// The HELLOs the present participants send a newcomer (rule 2) reach
    /// one another too. Arriving after the tick that sent their due VIEWs,
    /// they make no VIEW due again (20.6, rule 5: a HELLO after a join
    /// answers the newcomer): the join still costs at most 3M + 3.
    func testHellosAnsweringANewcomerMakeNoViewDueAgain() throws {
        let people = try (0..<6).map { try person("K\($0)") }
        let room = Room(now: now)
        for p in people.prefix(5) {
            try room.join(try call(p))
            try room.run(2)
        }
        let newcomer = room.nextSlot
        room.delay = { from, to, message in message[1] == 1 && from != newcomer && to != newcomer ? 1 : 0 }
        let before = room.log.count
        let last = try call(people[5])
        try room.join(last)
        try room.run(4)
        XCTAssertEqual(last.headCount, 6)
        XCTAssertLessThanOrEqual(room.log.count - before, 3 * 5 + 3)
    }

    func testMessageSizesSayOnlyTheBucketAndTheRoster() throws {
        let (a, b, c) = (try person("Ana"), try person("Ben"), try person("Cai"))
        try exchange(a, b)  // Ana: 1 contact, Cai: none
        let room = Room(now: now)
        let calls = try [a, b, c].map { ($0, try join($0, room)) }
        let hellos = room.log.filter { $0.message[1] == 1 }.map(\.message.count)
        XCTAssertEqual(Set(hellos), [133 + 32 * 16])
        try confirmAll(calls, room)
        try sayAll(calls, room)
        let saids = room.log.filter { $0.message[1] == 2 }.map(\.message.count)
        XCTAssertEqual(Set(saids), [131 + 2 * 50])
        let views = room.log.filter { $0.message[1] == 3 }.map(\.message.count)
        XCTAssertTrue(views.allSatisfy { [138 + 32 + 1, 138 + 64 + 1, 138 + 96 + 1].contains($0) })
        XCTAssertEqual(try RollCallProtocol.paddedTagCount(33), 64)
        XCTAssertEqual(try RollCallProtocol.paddedTagCount(2048), 2048)
        XCTAssertEqual(errorKind { _ = try RollCallProtocol.paddedTagCount(2049) }, .invalidArgument)
        XCTAssertEqual(RollCallProtocol.messageMax, 32901)
    }

    func testARollCallPastItsLifetimeEnds() throws {
        let (a, b) = (try person("Ana"), try person("Ben"))
        try exchange(a, b)
        let room = Room(now: now)
        let ca = try join(a, room)
        // Alone, there is no roster to confirm.
        XCTAssertEqual(errorKind { try ca.confirmRoster(ca.rosterHash, now: self.now, random: &a.random) }, .invalidState)
        XCTAssertEqual(errorKind { try ca.tick(now: self.now + 601) }, .expired)
        XCTAssertEqual(ca.phase, .expired)
        XCTAssertEqual(errorKind { try ca.peerJoined(slot: 2, now: self.now) }, .expired)
        XCTAssertEqual(errorKind { try ca.joined(slot: 0, peers: [], now: self.now) }, .expired)
        let cb = try call(b)
        XCTAssertEqual(errorKind { try cb.joined(slot: 0, peers: [], now: self.now) }, .invalidArgument)
        XCTAssertEqual(errorKind { try cb.joined(slot: 1, peers: [70_000], now: self.now) }, .invalidArgument)
        // Nothing goes out before the relay's `joined`.
        XCTAssertNil(try cb.takeOutgoing())
    }
}

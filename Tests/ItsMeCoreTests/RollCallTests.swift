import Foundation
import XCTest

@testable import ItsMeKit

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

    /// A group room: devices in slots 1, 2, ...; `pump` delivers what each
    /// sends to every other, in order, until all are quiet. `tamper` may
    /// change or drop (nil) a message on its way to one receiver.
    final class Room {
        var devices: [(slot: Int, call: RollCall)] = []
        var log: [(slot: Int, message: [UInt8])] = []
        var tamper: ((_ from: Int, _ to: Int, _ message: [UInt8]) -> [UInt8]?)?
        var refusals: [ItsMeError.Kind] = []
        let now: Int64

        init(now: Int64) { self.now = now }

        /// The relay gives the newcomer the next slot and tells the others.
        func join(_ call: RollCall) {
            let slot = devices.count + 1
            for (_, other) in devices { other.peerJoined(slot: slot) }
            devices.append((slot, call))
        }

        func pump() throws {
            var moved = true
            while moved {
                moved = false
                for (slot, call) in devices {
                    while let message = call.takeOutgoing() {
                        moved = true
                        log.append((slot, message))
                        for (other, receiver) in devices where other != slot {
                            guard let delivered = tamper.map({ $0(slot, other, message) }) ?? message else { continue }
                            do {
                                try receiver.receive(delivered, from: slot, now: now)
                            } catch let error as ItsMeError {
                                refusals.append(error.kind)
                            }
                        }
                    }
                }
            }
        }

        func slot(of call: RollCall) -> Int { devices.first { $0.call === call }!.slot }
    }

    private func meetingCode(_ n: Int = 1) -> RemoteCode {
        var r = DeterministicRandom(seed: SHA256.hash(Array("meeting-\(n)".utf8)))
        return RemoteCode.random(using: &r)
    }

    private func join(_ person: Person, _ room: Room, code: RemoteCode? = nil, at time: Int64? = nil) throws -> RollCall {
        let call = try RollCall(store: person.store, meetingCode: code ?? meetingCode(), now: time ?? now, random: &person.random)
        room.join(call)
        return call
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

    private func confirmAll(_ calls: [(Person, RollCall)]) throws {
        for (person, call) in calls { try call.confirmRoster(call.rosterHash, now: now, random: &person.random) }
    }

    private func sayAll(_ calls: [(Person, RollCall)], _ room: Room) throws {
        for (person, call) in calls { try call.confirmSaid(now: now, random: &person.random) }
        try room.pump()
    }

    /// Each listener types the code each of its contacts' devices shows.
    private func hearAll(_ calls: [(Person, RollCall)]) throws {
        for (listener, call) in calls {
            for (speaker, speakerCall) in calls where speaker !== listener {
                guard let i = try? index(in: call, of: speaker, listener), let code = speakerCall.myCode else { continue }
                do {
                    try call.enterHeard(code, from: i, now: now)
                } catch let error as ItsMeError where error.kind == .authenticationFailed {
                    continue  // a sealed code tampered with: the participant shows `refused`
                }
            }
        }
    }

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
        try room.pump()
        XCTAssertEqual(room.refusals, [])
        // Every device sees the same five HELLOs, so the same roster.
        XCTAssertEqual(Set(calls.map { Hex.encodeUpper($0.1.rosterHash) }).count, 1)
        for (_, call) in calls { XCTAssertEqual(call.participants.count, 5) }
        // Ana sees Ben and Cai; Dee and Eve are unknown to her.
        let ana = calls[0].1
        XCTAssertEqual(ana.participants.filter { $0.state == .unknown }.count, 3)  // herself, Dee, Eve
        XCTAssertEqual(try state(ana, a, of: b), .notYet)
        XCTAssertEqual(try state(ana, a, of: c), .notYet)
        // Eve's device holds no seed with anyone: everyone is unknown to it.
        XCTAssertTrue(calls[4].1.participants.allSatisfy { $0.state == .unknown })

        try confirmAll(calls)
        for (_, call) in calls {
            XCTAssertEqual(call.phase, .confirmed)
            XCTAssertNotNil(call.myCode)
        }
        try sayAll(calls, room)
        XCTAssertEqual(room.refusals, [])
        try hearAll(calls)

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
    }

    func testNoSealedCodeLeavesADeviceBeforeItsOwnerSaidIt() throws {
        let (a, b) = (try person("Ana"), try person("Ben"))
        try exchange(a, b)
        let room = Room(now: now)
        let ca = try join(a, room), cb = try join(b, room)
        try room.pump()
        try ca.confirmRoster(ca.rosterHash, now: now, random: &a.random)
        try cb.confirmRoster(cb.rosterHash, now: now, random: &b.random)
        try room.pump()
        // Only HELLOs went through the room (Ana's twice: again for Ben, who came after it).
        XCTAssertEqual(room.log.map { $0.message[1] }, [1, 1, 1])
        XCTAssertNil(ca.peekOutgoing())
        // Ben types what he expects Ana to say: nothing to compare with yet.
        let i = try index(in: cb, of: a, b)!
        XCTAssertEqual(try cb.enterHeard(ca.myCode!, from: i, now: now), .notYet)
        try ca.confirmSaid(now: now, random: &a.random)
        try room.pump()
        XCTAssertEqual(room.log.map { $0.message[1] }, [1, 1, 1, 2])
        XCTAssertEqual(try state(cb, b, of: a), .verified)
        // Said once per round.
        XCTAssertEqual(errorKind { try ca.confirmSaid(now: self.now, random: &a.random) }, .invalidState)
    }

    func testAWrongCodeIsWrongAndThreeLockTheRound() throws {
        let (a, b) = (try person("Ana"), try person("Ben"))
        try exchange(a, b)
        let room = Room(now: now)
        let ca = try join(a, room), cb = try join(b, room)
        try room.pump()
        try confirmAll([(a, ca), (b, cb)])
        try sayAll([(a, ca), (b, cb)], room)
        let i = try index(in: cb, of: a, b)!
        let right = ca.myCode!
        let wrong = right.hasPrefix("ALFA") ? "BRAVO 000" : "ALFA 000"
        XCTAssertEqual(try cb.enterHeard(wrong, from: i, now: now), .wrong)
        XCTAssertEqual(try b.store.contact(id: b.id(of: a)).state, .verified)  // from the exchange; unchanged
        XCTAssertEqual(try cb.enterHeard(wrong, from: i, now: now), .wrong)
        XCTAssertEqual(try cb.enterHeard(right, from: i, now: now), .verified)
        XCTAssertEqual(errorKind { try cb.enterHeard(right, from: i, now: self.now) }, .invalidState)
        // A fresh pair: three wrong codes lock that participant for the round.
        let (x, y) = (try person("Xia"), try person("Yan"))
        try exchange(x, y)
        let room2 = Room(now: now)
        let cx = try join(x, room2), cy = try join(y, room2)
        try room2.pump()
        try confirmAll([(x, cx), (y, cy)])
        try sayAll([(x, cx), (y, cy)], room2)
        let j = try index(in: cy, of: x, y)!
        let bad = cx.myCode!.hasPrefix("ALFA") ? "BRAVO 000" : "ALFA 000"
        for _ in 0..<3 { XCTAssertEqual(try cy.enterHeard(bad, from: j, now: now), .wrong) }
        XCTAssertEqual(errorKind { try cy.enterHeard(cx.myCode!, from: j, now: self.now) }, .locked)
        XCTAssertEqual(errorKind { try cy.enterHeard("NOT A CODE", from: j, now: self.now) }, .invalidArgument)
        XCTAssertEqual(errorKind { try cy.enterHeard(bad, from: 0, now: self.now) }, .invalidArgument)
    }

    func testALateJoinerStartsANewRoundAndTheOldRoundsMessagesAreRefused() throws {
        let (a, b, c) = (try person("Ana"), try person("Ben"), try person("Cai"))
        try exchange(a, b)
        try exchange(a, c)
        let room = Room(now: now)
        let ca = try join(a, room), cb = try join(b, room)
        try room.pump()
        try confirmAll([(a, ca), (b, cb)])
        try sayAll([(a, ca), (b, cb)], room)
        try hearAll([(a, ca), (b, cb)])
        XCTAssertEqual(try state(ca, a, of: b), .verified)
        let oldRoster = ca.rosterHash
        let oldSaid = room.log.first { $0.message[1] == 2 && $0.slot == room.slot(of: cb) }!.message
        // Cai joins late: everyone's round starts again.
        let cc = try join(c, room)
        try room.pump()
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
        try confirmAll(calls)
        try sayAll(calls, room)
        try hearAll(calls)
        XCTAssertEqual(try state(ca, a, of: c), .verified)
        XCTAssertEqual(try state(cc, c, of: a), .verified)
        XCTAssertEqual(try state(ca, a, of: b), .verified)
    }

    func testARelayThatTampersDropsReplaysOrMovesMessagesCausesRefusalsNeverAWrongVerified() throws {
        let (a, b, c) = (try person("Ana"), try person("Ben"), try person("Cai"))
        try exchange(a, b)
        try exchange(a, c)
        let room = Room(now: now)
        let ca = try join(a, room), cb = try join(b, room), cc = try join(c, room)
        try room.pump()
        let calls = [(a, ca), (b, cb), (c, cc)]
        try confirmAll(calls)
        // On its way to Ana, Ben's SAID has a byte of every entry flipped;
        // Cai's is dropped.
        room.tamper = { from, to, message in
            guard to == 1, message[1] == 2 else { return message }
            if from == 3 { return nil }
            var changed = message
            for i in stride(from: RollCallProtocol.saidHeaderCount, to: changed.count, by: RollCallProtocol.entryCount) {
                changed[i + 5] ^= 0x01
            }
            return changed
        }
        try sayAll(calls, room)
        try hearAll(calls)
        XCTAssertEqual(try state(ca, a, of: b), .refused)
        XCTAssertEqual(try state(ca, a, of: c), .notYet)
        XCTAssertEqual(try state(cb, b, of: a), .verified)
        // A replay of a SAID already taken is ignored; a SAID moved to
        // another roll call (another meeting code) is refused there.
        let said = room.log.first { $0.message[1] == 2 && $0.slot == 1 }!.message
        XCTAssertNoThrow(try cb.receive(said, from: 1, now: now))
        let other = Room(now: now)
        let ob = try join(b, other, code: meetingCode(2)), oa = try join(a, other, code: meetingCode(2))
        try other.pump()
        XCTAssertEqual(errorKind { try ob.receive(said, from: other.slot(of: oa), now: self.now) }, .invalidState)
        // A HELLO moved from the first roll call into the second: none of its
        // tags is a tag of the second, so it is nobody's contact there.
        let helloOfA = room.log.first { $0.message[1] == 1 && $0.slot == 1 }!.message
        try ob.receive(helloOfA, from: 9, now: now)
        XCTAssertEqual(ob.participants.last?.state, .unknown)
        // A message cut short, or of another version.
        XCTAssertEqual(errorKind { try cb.receive(Array(said.dropLast()), from: 1, now: self.now) }, .malformedMessage)
        XCTAssertEqual(errorKind { try cb.receive([2] + said.dropFirst(), from: 1, now: self.now) }, .malformedMessage)
        XCTAssertEqual(errorKind { try cb.receive([1], from: 1, now: self.now) }, .malformedMessage)
        // Nothing the relay did made anyone verified at Ana's; the others,
        // whose messages it left alone, verified.
        XCTAssertFalse(ca.participants.contains { $0.state == .verified })
        XCTAssertEqual(try state(cc, c, of: a), .verified)
    }

    func testHelloSizesSayOnlyTheBucketAndSaidSizesOnlyTheRoster() throws {
        let (a, b, c) = (try person("Ana"), try person("Ben"), try person("Cai"))
        try exchange(a, b)  // Ana: 1 contact, Cai: none
        let room = Room(now: now)
        let ca = try join(a, room), cb = try join(b, room), cc = try join(c, room)
        try room.pump()
        let hellos = room.log.filter { $0.message[1] == 1 }.map(\.message.count)
        XCTAssertEqual(Set(hellos), [RollCallProtocol.helloHeaderCount + 32 * 16])
        try confirmAll([(a, ca), (b, cb), (c, cc)])
        try sayAll([(a, ca), (b, cb), (c, cc)], room)
        let saids = room.log.filter { $0.message[1] == 2 }.map(\.message.count)
        XCTAssertEqual(Set(saids), [RollCallProtocol.saidHeaderCount + 2 * RollCallProtocol.entryCount])
        XCTAssertEqual(try RollCallProtocol.paddedTagCount(33), 64)
        XCTAssertEqual(try RollCallProtocol.paddedTagCount(2048), 2048)
        XCTAssertEqual(errorKind { _ = try RollCallProtocol.paddedTagCount(2049) }, .invalidArgument)
    }

    func testAHelloOutsideTheTimeAndARollCallPastItsLifetimeAreRefused() throws {
        let (a, b) = (try person("Ana"), try person("Ben"))
        try exchange(a, b)
        let room = Room(now: now)
        let ca = try join(a, room)
        // Alone, there is no roster to confirm.
        XCTAssertEqual(errorKind { try ca.confirmRoster(ca.rosterHash, now: self.now, random: &a.random) }, .invalidState)
        let early = Room(now: now)
        _ = try join(b, early, at: now - 30 * 21)
        let staleHello = early.devices[0].call.takeOutgoing()!
        XCTAssertEqual(errorKind { try ca.receive(staleHello, from: 2, now: self.now) }, .invalidArgument)
        XCTAssertEqual(ca.participants.count, 1)
        XCTAssertEqual(errorKind { try ca.confirmRoster(ca.rosterHash, now: self.now + 601, random: &a.random) }, .expired)
        XCTAssertEqual(ca.phase, .expired)
        XCTAssertEqual(errorKind { try ca.receive(staleHello, from: 2, now: self.now) }, .expired)
    }
}

import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

/// Every flow, one table: each call of the flow is made first with every
/// write failing (the contact store's commits, and the secret store's puts
/// for the exchange's PAKE scalar). A call that throws then must leave its
/// session and the stores exactly as they were, and the same call, made
/// again once writes work, must succeed (`Driver`, ARCHITECTURE.md). Each
/// flow counts the calls that hit a failed write, so that none of the rows
/// passes without reaching one.
final class FailedWriteTests: XCTestCase {
    private var directory: String!
    private let t0: Int64 = 1_800_000_000

    override func setUpWithError() throws {
        try Sodium.initialize()
        directory = NSTemporaryDirectory() + "itsme-failed-write-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A secret store whose puts of pending PAKE scalars fail while `failing`
    /// (everything else, the store's mark among it, goes through). Used
    /// from the test's thread alone: `allowsLibraryThreads` stays false.
    final class FaultySecretStore: SecretStore, @unchecked Sendable {
        let inner = MemorySecretStore()
        var failing = false
        var names: Set<String> = []

        func get(_ name: String) throws -> SecretBytes? { try inner.get(name) }
        func put(_ name: String, _ value: UnsafeRawBufferPointer, accessibility: Accessibility) throws {
            if failing, name.hasPrefix("itsme.pake") { throw ItsMeError(.secretStore, "the secret store refused a write (test)") }
            try inner.put(name, value, accessibility: accessibility)
            names.insert(name)
        }
        func remove(_ name: String) throws -> Bool {
            names.remove(name)
            return try inner.remove(name)
        }
        func withExclusiveAccess<R: ~Copyable>(_ body: () throws -> R) throws -> R { try inner.withExclusiveAccess(body) }
    }

    /// One person: identity, faulty secret store, contact store.
    struct Person {
        let identity: Identity
        let secrets: FaultySecretStore
        let store: ContactStore
    }

    private var people = 0
    private func person(_ name: String) throws -> Person {
        people += 1
        let secrets = FaultySecretStore()
        var r = DeterministicRandom(seed: SHA256.hash(Array("failed-write-\(name)-\(people)".utf8)))
        let identity = try Identity.create(store: secrets, name: name, random: &r)
        return Person(identity: identity, secrets: secrets, store: try ContactStore(path: "\(directory!)/\(people).db", identity: identity))
    }

    /// Makes the calls of one flow, each first with writes failing.
    final class Writes {
        let stores: [ContactStore]
        let secrets: [FaultySecretStore]
        /// Calls that threw because a write failed, and were then repeated.
        var hits: [String] = []

        init(stores: [ContactStore], secrets: [FaultySecretStore] = []) {
            self.stores = stores
            self.secrets = secrets
        }

        convenience init(_ people: [Person]) { self.init(stores: people.map(\.store), secrets: people.map(\.secrets)) }

        /// Every commit of the contact stores fails (a temporary trigger on
        /// the manifest every commit rewrites), and so does every put of a
        /// PAKE scalar.
        func fail() throws {
            for store in stores {
                for event in ["INSERT", "UPDATE"] {
                    try store.db.execute(
                        "CREATE TEMP TRIGGER fail_\(event.lowercased()) BEFORE \(event) ON main.meta BEGIN SELECT RAISE(ABORT, 'test: the disk is full'); END"
                    )
                }
            }
            secrets.forEach { $0.failing = true }
        }

        func allow() throws {
            for store in stores { try store.db.execute("DROP TRIGGER temp.fail_insert; DROP TRIGGER temp.fail_update") }
            secrets.forEach { $0.failing = false }
        }

        /// What the stores hold: every contact's row and device secrets, and
        /// the secret store's item names.
        func held() throws -> String {
            let contacts = try stores.map { store in
                try store.list().map { c in
                    let s = try store.tagSecrets(id: c.id)
                    let secrets = [s.speaking, s.theirs, s.theirsPending, s.theirsPrevious].map { box in
                        box.withBytes { Hex.encodeUpper(SHA256.hash(Array($0))) }
                    }
                    return "\(c.id) \(c.name) \(c.state) \(String(describing: c.lastWindow)) \(secrets) \(s.committed)"
                }
            }
            return "\(contacts) \(secrets.map { $0.names.sorted() })"
        }

        /// Makes `call` with writes failing; if it throws a write's error,
        /// `session()` and the stores must read as before, and the call is
        /// made again with writes working. Returns the call's result.
        @discardableResult
        func attempt<T>(
            _ what: String, _ session: () -> String, file: StaticString = #filePath, line: UInt = #line, _ call: () throws -> T
        ) throws -> T {
            let before = (session(), try held())
            try fail()
            do {
                let result = try call()
                try allow()
                return result
            } catch let e as ItsMeError where e.kind == .database || e.kind == .secretStore {
                try allow()
                XCTAssertEqual(session(), before.0, "\(what): the session changed although its write failed", file: file, line: line)
                XCTAssertEqual(try held(), before.1, "\(what): a store changed although the write failed", file: file, line: line)
                hits.append(what)
                return try call()
            } catch {
                try? allow()
                throw error
            }
        }
    }

    private func rng(_ label: String) -> DeterministicRandom { DeterministicRandom(seed: SHA256.hash(Array(label.utf8))) }

    private func describe(_ x: Exchange) -> String {
        "\(x.state) \(String(describing: x.contactID)) \(x.flags.rawValue) \(x.peekOutgoing().map(Hex.encodeUpper) ?? "-") \(String(describing: x.failure))"
    }

    /// Two people who exchanged by QR code (`exchangedPair`), each with the
    /// other verified, and their stores' writes.
    private func pair(_ label: String) throws -> (PairSide, PairSide, Writes) {
        let (a, b) = try exchangedPair(in: directory, label: label, now: t0)
        return (a, b, Writes(stores: [a.store, b.store]))
    }

    // MARK: The table

    /// The flows: each runs to its end through `Writes.attempt` and says how
    /// many of its calls must have hit a failed write at least.
    private var flows: [(name: String, minimumHits: Int, run: () throws -> Writes)] {
        [
            ("QR exchange: save, then confirm", 2, qrSaveConfirm),
            ("QR exchange: save, then reject", 2, qrSaveReject),
            ("QR exchange: save, expire, then reject to delete", 2, qrFailedReject),
            ("invite exchange: start, both confirm, settle", 5, inviteExchange),
            ("real-time exchange: the peer saves and rejects, settle", 4, realtimeRejected),
            ("Online Verify: confirm", 2, onlineVerify),
            ("PIN Update: the pending and committed secrets", 3, pinUpdate),
            ("voice verification: start (the window) and check", 4, voice),
            ("roll call: a heard code checked on entry and on arrival", 2, rollCall),
        ]
    }

    func testEveryFlowSurvivesAFailedWriteAndTheCallCanBeRepeated() throws {
        for flow in flows {
            let writes = try flow.run()
            XCTAssertGreaterThanOrEqual(
                writes.hits.count, flow.minimumHits, "\(flow.name): only \(writes.hits) hit a failed write")
        }
    }

    /// A device transfer makes no write: the new device installs what came
    /// itself (`IdentityExport.install`), so a store that refuses writes
    /// changes nothing in it.
    func testADeviceTransferMakesNoWrite() throws {
        let a = try person("Old")
        let writes = Writes([a])
        var rr = rng("transfer-r"), rs = rng("transfer-s")
        try PIN(store: a.identity.store).set("135790")
        let receiver = try DeviceTransfer(receiverAt: t0, random: &rr)
        try writes.fail()
        let sender = try DeviceTransfer(sending: a.identity, pin: "135790", offer: receiver.offerText, now: t0, random: &rs)
        try receiver.receive(sender.takeOutgoing()!, now: t0)
        try sender.confirm(now: t0)
        try receiver.confirm(now: t0)
        while let m = sender.takeOutgoing() { try receiver.receive(m, now: t0) }
        try writes.allow()
        XCTAssertEqual(receiver.state, .done)
        XCTAssertEqual(try receiver.takeIdentity().fingerprint, a.identity.fingerprint)
    }

    // MARK: The flows

    private func qrSaveConfirm() throws -> Writes {
        let a = try person("Alice"), b = try person("Bob")
        let w = Writes([a, b])
        var ra = rng("qr-a"), rb = rng("qr-b")
        let xa = try Exchange.qr(identity: a.identity, store: a.store, now: t0, random: &ra)
        let xb = try Exchange.qr(identity: b.identity, store: b.store, now: t0, random: &rb)
        try w.attempt("receive", { self.describe(xa) }) { try xa.receive(xb.peekOutgoing()!, now: t0) }
        try w.attempt("save", { self.describe(xa) }) { try xa.save(now: t0) }
        let id = try w.attempt("confirm", { self.describe(xa) }) { try xa.confirm(now: t0) }
        XCTAssertEqual(xa.state, .confirmed)
        XCTAssertEqual(try a.store.contact(id: id).state, .verified)
        return w
    }

    private func qrSaveReject() throws -> Writes {
        let a = try person("Alice"), b = try person("Bob")
        let w = Writes([a, b])
        var ra = rng("qrr-a"), rb = rng("qrr-b")
        let xa = try Exchange.qr(identity: a.identity, store: a.store, now: t0, random: &ra)
        let xb = try Exchange.qr(identity: b.identity, store: b.store, now: t0, random: &rb)
        try xa.receive(xb.peekOutgoing()!, now: t0)
        try w.attempt("save", { self.describe(xa) }) { try xa.save(now: t0) }
        try w.attempt("reject", { self.describe(xa) }) { try xa.reject() }
        XCTAssertEqual(xa.state, .rejected)
        XCTAssertEqual(try a.store.list().count, 0)
        return w
    }

    private func qrFailedReject() throws -> Writes {
        let a = try person("Alice"), b = try person("Bob")
        let w = Writes([a, b])
        var ra = rng("qrf-a"), rb = rng("qrf-b")
        let xa = try Exchange.qr(identity: a.identity, store: a.store, now: t0, random: &ra)
        let xb = try Exchange.qr(identity: b.identity, store: b.store, now: t0, random: &rb)
        try xa.receive(xb.peekOutgoing()!, now: t0)
        try w.attempt("save", { self.describe(xa) }) { try xa.save(now: t0) }
        XCTAssertEqual(errorKind { try xa.confirm(now: self.t0 + Exchange.lifetime + 1) }, .expired)
        XCTAssertEqual(xa.state, .failed)
        try w.attempt("reject a failed exchange", { self.describe(xa) }) { try xa.reject() }
        XCTAssertEqual(try a.store.list().count, 0, "rejecting the failed exchange deleted what it saved")
        XCTAssertEqual(errorKind { try xa.reject() }, .invalidState, "and only once")
        return w
    }

    /// Delivers every message `next` takes from either side to the other,
    /// until none is left; each `receive` is an attempt.
    private func pump<S: AnyObject>(
        _ w: Writes, _ x: S, _ y: S, next: (S) throws -> [UInt8]?, describe: @escaping (S) -> String,
        receive: (S, S, [UInt8]) throws -> Void
    ) throws {
        var moved = true
        while moved {
            moved = false
            for (from, to) in [(x, y), (y, x)] {
                while let m = try next(from) {
                    try w.attempt("receive", { describe(to) }) { try receive(from, to, m) }
                    moved = true
                }
            }
        }
    }

    /// Takes the next message a side queued.
    private func take<S>(_ peek: @escaping (S) -> [UInt8]?, _ mark: @escaping (S) -> Void) -> (S) -> [UInt8]? {
        { side in
            guard let m = peek(side) else { return nil }
            mark(side)
            return m
        }
    }

    private func pump(_ w: Writes, _ x: Exchange, _ y: Exchange) throws {
        try pump(w, x, y, next: take({ $0.peekOutgoing() }, { $0.markSent() }), describe: describe) { _, to, m in
            try to.receive(m, now: t0 + 1)
        }
    }

    private func inviteExchange() throws -> Writes {
        let a = try person("Alice"), b = try person("Bob")
        let w = Writes([a, b])
        var ra = rng("invite-a"), rb = rng("invite-b")
        // Starting keeps the PAKE scalar: a failed put creates nothing.
        let xa = try w.attempt("invite", { "\(a.secrets.names.sorted())" }) {
            try Exchange.invite(identity: a.identity, store: a.store, realtime: false, now: t0, random: &ra)
        }
        let xb = try w.attempt("accept", { "\(b.secrets.names.sorted())" }) {
            try Exchange.acceptInvite(
                identity: b.identity, store: b.store, inviteCode: xa.inviteCode!.text, encryptionCode: xa.encryptionCode!.text,
                realtime: false, now: t0, random: &rb)
        }
        try pump(w, xa, xb)
        XCTAssertEqual(xa.state, .compareSAS)
        try w.attempt("confirm (awaiting the peer)", { self.describe(xb) }) { try xb.confirm(now: t0 + 2) }
        XCTAssertEqual(xb.state, .awaitingDecision)
        try pump(w, xa, xb)
        try w.attempt("confirm (the peer's decision in)", { self.describe(xa) }) { try xa.confirm(now: t0 + 2) }
        try pump(w, xa, xb)
        try w.attempt("settle", { self.describe(xb) }) { try xb.settle(now: t0 + 3) }
        XCTAssertEqual(xa.state, .confirmed)
        XCTAssertEqual(xb.state, .confirmed)
        XCTAssertEqual(try a.store.contact(id: xa.contactID!).state, .verified)
        XCTAssertEqual(try b.store.contact(id: xb.contactID!).state, .verified)
        XCTAssertEqual(a.secrets.names.filter { $0.hasPrefix("itsme.pake.") }, [], "the scalar is forgotten at the end")
        return w
    }

    private func realtimeRejected() throws -> Writes {
        let a = try person("Alice"), b = try person("Bob")
        let w = Writes([a, b])
        var ra = rng("rt-a"), rb = rng("rt-b")
        let xa = try Exchange.invite(identity: a.identity, store: a.store, realtime: true, now: t0, random: &ra)
        let xb = try Exchange.acceptInvite(
            identity: b.identity, store: b.store, inviteCode: xa.inviteCode!.text, encryptionCode: xa.encryptionCode!.text,
            realtime: true, now: t0, random: &rb)
        try pump(w, xa, xb)
        try w.attempt("confirm", { self.describe(xa) }) { try xa.confirm(now: t0 + 2) }
        try w.attempt("save", { self.describe(xb) }) { try xb.save(now: t0 + 2) }
        try w.attempt("reject", { self.describe(xb) }) { try xb.reject() }
        try pump(w, xa, xb)
        try w.attempt("settle (rejected)", { self.describe(xa) }) { try xa.settle(now: t0 + 3) }
        XCTAssertEqual(xa.state, .rejected)
        XCTAssertEqual(try a.store.list().count, 0, "the contact saved while awaiting the peer is gone")
        XCTAssertEqual(try b.store.list().count, 0)
        return w
    }

    private func onlineVerify() throws -> Writes {
        let (a, b, w) = try pair("ov")
        let (idA, idB) = (a.contactID, b.contactID)
        let now = t0 + 600
        var ra = rng("ov-a"), rb = rng("ov-b")
        let window = VoiceProtocol.window(now)
        let sa = try OnlineVerify(store: a.store, contactID: idA, window: window, now: now, random: &ra)
        let sb = try OnlineVerify(store: b.store, contactID: idB, window: window, now: now, random: &rb)
        let describe = { (s: OnlineVerify) in "\(s.state) \(s.peekOutgoing().map(Hex.encodeUpper) ?? "-") \(String(describing: s.sas))" }
        try pump(w, sa, sb, next: take({ $0.peekOutgoing() }, { $0.markSent() }), describe: describe) { _, to, m in
            try to.receive(m, now: now)
        }
        for s in [sa, sb] {
            XCTAssertEqual(try w.attempt("confirm", { describe(s) }) { try s.confirm(now: now + 5) }, .verified)
            XCTAssertEqual(s.state, .confirmed)
        }
        return w
    }

    private func pinUpdate() throws -> Writes {
        let (a, b, w) = try pair("pin")
        let (idA, idB) = (a.contactID, b.contactID)
        let now = t0 + 600
        var ra = rng("pin-a"), rb = rng("pin-b")
        let window = VoiceProtocol.window(now)
        let ua = try PinUpdate(store: a.store, contactID: idA, window: window, now: now, random: &ra)
        let ub = try PinUpdate(store: b.store, contactID: idB, window: window, now: now, random: &rb)
        let describe = { (u: PinUpdate) in "\(u.state) \(u.peekOutgoing().map(Hex.encodeUpper) ?? "-")" }
        try pump(w, ua, ub, next: take({ $0.peekOutgoing() }, { $0.markSent() }), describe: describe) { _, to, m in
            try to.receive(m, now: now)
        }
        XCTAssertEqual(ua.state, .done)
        XCTAssertEqual(ub.state, .done)
        // The two sides now say and expect the new secrets.
        let (oa, ob) = try voiceVerify(a, b, now: now + 60)
        XCTAssertEqual(oa, .verified)
        XCTAssertEqual(ob, .verified)
        return w
    }

    private func voice() throws -> Writes {
        let (a, b, w) = try pair("voice")
        let (idA, idB) = (a.contactID, b.contactID)
        let now = t0 + 600
        let va = try VoiceSession(store: a.store, contactID: idA, now: now)
        let vb = try VoiceSession(store: b.store, contactID: idB, now: now)
        func describe(_ v: VoiceSession) -> String { "\(v.state) \(v.selections) \(String(describing: v.outcome))" }
        let start = va.window * 30
        try w.attempt("start", { describe(va) }) { try va.start(now: start) }
        try w.attempt("start", { describe(vb) }) { try vb.start(now: start) }
        for _ in 0..<2 {
            let (selector, listener) = va.turn == .mine ? (va, vb) : (vb, va)
            let word = selector.myWords[0]
            try w.attempt("select", { describe(selector) }) { try selector.select(word, now: start + 5) }
            try w.attempt("select", { describe(listener) }) { try listener.select(word, now: start + 5) }
        }
        for (v, other) in [(va, vb), (vb, va)] {
            let outcome = try w.attempt("check", { describe(v) }) {
                try v.check(heardCode: VoiceProtocol.codeText(other.yourCode!), heardTag: other.yourTag!, now: start + 10)
            }
            XCTAssertEqual(outcome, .verified)
        }
        return w
    }

    private func rollCall() throws -> Writes {
        let (a, b, w) = try pair("rc")
        let (idA, idB) = (a.contactID, b.contactID)
        let now = t0 + 600
        var ra = rng("rc-a"), rb = rng("rc-b")
        var rm = rng("rc-meeting")
        let meeting = RemoteCode.random(using: &rm)
        let ca = try RollCall(store: a.store, meetingCode: meeting, now: now, random: &ra)
        let cb = try RollCall(store: b.store, meetingCode: meeting, now: now, random: &rb)
        let describe = { (c: RollCall) in "\(c.phase) \(c.participants.map { "\($0.index):\($0.state)" })" }
        let slots = [ObjectIdentifier(ca): 1, ObjectIdentifier(cb): 2]
        func pump() throws {
            try self.pump(w, ca, cb, next: { try $0.takeOutgoing() }, describe: describe) { from, to, m in
                try to.receive(m, from: slots[ObjectIdentifier(from)]!, now: now + 1)
            }
        }
        try ca.joined(slot: 1, peers: [], now: now)
        try ca.peerJoined(slot: 2, now: now)
        try cb.joined(slot: 2, peers: [1], now: now)
        try pump()
        try ca.confirmRoster(ca.rosterHash, now: now + 1, random: &ra)
        try cb.confirmRoster(cb.rosterHash, now: now + 1, random: &rb)
        // Bob hears Alice's code before her sealed code arrives: it is
        // checked (and written) when it arrives.
        let indexA = cb.participants.first { $0.contactID == idB }!.index
        try cb.enterHeard(ca.myCode!, from: indexA, now: now + 2)
        try ca.confirmSaid(now: now + 2, random: &ra)
        try cb.confirmSaid(now: now + 2, random: &rb)
        try pump()
        // Alice hears Bob's code once his sealed code is in: checked on entry.
        let indexB = ca.participants.first { $0.contactID == idA }!.index
        try w.attempt("enter a heard code", { describe(ca) }) {
            try ca.enterHeard(cb.myCode!, from: indexB, now: now + 3)
        }
        XCTAssertEqual(ca.participants[indexB].state, .verified)
        XCTAssertEqual(cb.participants[indexA].state, .verified)
        XCTAssertEqual(try a.store.contact(id: idA).state, .verified)
        return w
    }
}

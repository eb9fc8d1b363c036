import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

final class ExchangeTests: XCTestCase {
    private var directory: String!
    private let t0: Int64 = 1_800_000_000

    override func setUpWithError() throws {
        try Sodium.initialize()
        directory = NSTemporaryDirectory() + "itsme-exchange-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: Helpers

    private struct Person {
        let identity: Identity
        let store: ContactStore
    }

    private var counter = 0
    private func person(_ name: String) throws -> Person {
        counter += 1
        let identity = try Identity.create(store: MemorySecretStore(), name: name)
        return Person(identity: identity, store: try ContactStore(path: "\(directory!)/\(counter).db", identity: identity))
    }

    private func rng(_ n: Int) -> DeterministicRandom { DeterministicRandom(seed: SHA256.hash(Array("exchange-test-\(n)".utf8))) }

    private func kind(_ body: () throws -> Void) -> ItsMeError.Kind? {
        do {
            try body()
            return nil
        } catch { return (error as? ItsMeError)?.kind }
    }

    private func qr(_ p: Person, _ seed: Int = 1) throws -> Exchange {
        var r = rng(seed)
        return try Exchange.qr(identity: p.identity, store: p.store, now: t0, random: &r)
    }

    private func bluetooth(_ p: Person, code: ShortCode? = nil, _ seed: Int = 2) throws -> Exchange {
        var r = rng(seed)
        return try Exchange.bluetooth(identity: p.identity, store: p.store, sessionCode: code, now: t0, random: &r)
    }

    /// Moves frames both ways until neither side has anything to send.
    /// `tap` may replace a frame in flight (a man in the middle).
    @discardableResult
    private func pump(_ a: Exchange, _ b: Exchange, now: Int64? = nil) throws -> [[UInt8]] {
        var log: [[UInt8]] = []
        var moved = true
        while moved {
            moved = false
            for (from, to) in [(a, b), (b, a)] {
                if let f = from.peekOutgoing() {
                    from.markSent()
                    log.append(f)
                    try to.receive(f, now: now ?? t0)
                    moved = true
                }
            }
        }
        return log
    }

    private func scanEachOther(_ a: Exchange, _ b: Exchange) throws {
        try a.receive(b.peekOutgoing()!, now: t0)
        try b.receive(a.peekOutgoing()!, now: t0)
    }

    // MARK: QR

    func testQRExchangeSavesUnverifiedConfirmsAndBothSidesAgree() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let a = try qr(alice, 1), b = try qr(bob, 2)
        XCTAssertEqual(a.state, .awaitingPeer)
        XCTAssertTrue(String(decoding: a.peekOutgoing()!, as: UTF8.self).hasPrefix("ITSME1:"))
        try scanEachOther(a, b)
        XCTAssertEqual(a.state, .compareSAS)
        XCTAssertNotNil(a.sas)
        XCTAssertEqual(a.sas, b.sas)
        XCTAssertEqual(a.peer?.name, "Bob")
        XCTAssertEqual(a.peer?.publicKey, bob.identity.publicKey)
        XCTAssertEqual(b.peer?.fingerprint, alice.identity.fingerprint)

        let idA = try a.save(now: t0)
        XCTAssertEqual(try alice.store.contact(id: idA).state, .unverified)
        XCTAssertEqual(try a.save(now: t0), idA, "save is idempotent")
        XCTAssertEqual(try a.confirm(now: t0 + 5), idA)
        XCTAssertEqual(a.state, .confirmed)
        let stored = try alice.store.contact(id: idA)
        XCTAssertEqual(stored.state, .verified)
        XCTAssertEqual(stored.verifiedAt, t0 + 5)
        XCTAssertEqual(stored.exchangeMethod, .qr)
        XCTAssertEqual(stored.name, "Bob")

        let idB = try b.confirm(now: t0)
        // Both stored the same seed; each stored its own device secret and the other's.
        XCTAssertTrue(try alice.store.seed(id: idA).constantTimeEquals(try bob.store.seed(id: idB)))
        let dsA = try alice.store.deviceSecrets(id: idA), dsB = try bob.store.deviceSecrets(id: idB)
        XCTAssertTrue(dsA.mine.constantTimeEquals(dsB.theirs))
        XCTAssertTrue(dsA.theirs.constantTimeEquals(dsB.mine))
        XCTAssertEqual(dsA.mine.count, 16)
    }

    func testRejectingDeletesTheSavedContact() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let a = try qr(alice), b = try qr(bob, 3)
        try scanEachOther(a, b)
        let id = try a.save(now: t0)
        try a.reject()
        XCTAssertEqual(a.state, .rejected)
        XCTAssertEqual(kind { _ = try alice.store.contact(id: id) }, .notFound)
        XCTAssertEqual(kind { try a.confirm(now: t0) }, .invalidState)
        XCTAssertEqual(kind { try a.reject() }, .invalidState)
    }

    func testOrderMisuseIsAnInvalidStateAndDoesNotEndTheExchange() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let a = try qr(alice), b = try qr(bob, 3)
        XCTAssertEqual(kind { try a.confirm(now: t0) }, .invalidState)
        XCTAssertEqual(kind { try a.save(now: t0) }, .invalidState)
        XCTAssertEqual(kind { try a.receive(Array("https://example.com".utf8), now: t0) }, .invalidArgument)
        XCTAssertEqual(a.state, .awaitingPeer, "a foreign QR code does not end the exchange")
        try scanEachOther(a, b)
        XCTAssertEqual(kind { try a.receive(b.peekOutgoing()!, now: t0) }, .invalidState, "scanned twice")
        XCTAssertEqual(a.state, .compareSAS)
    }

    func testAFailureIsFinal() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let a = try qr(alice), b = try qr(bob, 3)
        var text = b.peekOutgoing()!
        text[text.count - 2] = text[text.count - 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        XCTAssertNotNil(kind { try a.receive(text, now: t0) })
        XCTAssertEqual(a.state, .failed)
        XCTAssertNil(a.peekOutgoing())
        XCTAssertEqual(kind { try a.receive(b.peekOutgoing()!, now: t0) }, .invalidState)
        XCTAssertEqual(kind { _ = try a.seal() }, .invalidState)
        XCTAssertEqual(kind { try a.reject() }, .invalidState)
    }

    func testEveryByteOfAQRPayloadIsAuthenticated() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let payload = Base64.decode(String(decoding: try qr(bob, 3).peekOutgoing()!.dropFirst(7), as: UTF8.self), .urlUnpadded)!
        func text(_ p: [UInt8]) -> [UInt8] { Array(("ITSME1:" + Base64.encode(p, .urlUnpadded)).utf8) }
        var variants: [[UInt8]] = []
        for i in payload.indices {
            for bit in [0x01, 0x80] as [UInt8] {
                var p = payload
                p[i] ^= bit
                variants.append(p)
            }
        }
        for n in 0..<payload.count { variants.append(Array(payload.prefix(n))) }
        variants.append(payload + [0])
        variants.append(payload + payload)
        var readAgain = 0
        for (n, v) in variants.enumerated() {
            let a = try qr(alice, 10)
            let refusal = kind { try a.receive(text(v), now: t0) }
            XCTAssertNotNil(refusal, "variant \(n) was accepted")
            // Cut short or run on (its length or its name length byte): not
            // a whole reading, and the exchange waits for one (5.2).
            let whole = v.count >= 155 && (v[0] != 1 || v[89] == 0 || v.count == 154 + Int(v[89]))
            if whole {
                XCTAssertNotEqual(refusal, .invalidArgument, "variant \(n)")
                XCTAssertEqual(a.state, .failed, "variant \(n)")
            } else {
                XCTAssertEqual(refusal, .invalidArgument, "variant \(n)")
                XCTAssertEqual(a.state, .awaitingPeer, "variant \(n)")
                try a.receive(text(payload), now: t0)
                XCTAssertEqual(a.state, .compareSAS, "variant \(n): the whole payload is read after it")
                readAgain += 1
            }
        }
        XCTAssertEqual(readAgain, payload.count + 2 + 2, "every truncation, both extensions, the name length byte's two flips")
    }

    func testNonCanonicalBase64IsReadAgain() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let good = String(decoding: try qr(bob, 3).peekOutgoing()!, as: UTF8.self)
        let body = good.dropFirst(7)
        var variants = [good + "=", good + "\n", "ITSME1: " + body, good.replacingOccurrences(of: "_", with: "/")]
        // The last character with non-zero unused bits (when there are any).
        let payloadCount = Base64.decode(body, .urlUnpadded)!.count
        if payloadCount % 3 != 0 {
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
            let last = alphabet.firstIndex(of: body.last!)!
            variants.append(String(good.dropLast()) + String(alphabet[last | 1]))
        }
        // A misread encoding: one exchange refuses each, then reads the right text.
        let a = try qr(alice, 10)
        for v in variants where v != good {
            XCTAssertEqual(kind { try a.receive(Array(v.utf8), now: t0) }, .invalidArgument, v)
            XCTAssertEqual(a.state, .awaitingPeer, v)
        }
        try a.receive(Array(good.utf8), now: t0)
        XCTAssertEqual(a.state, .compareSAS)
    }

    func testOwnPayloadReflectedIsRefused() throws {
        let alice = try person("Alice")
        let a = try qr(alice)
        XCTAssertEqual(kind { try a.receive(a.peekOutgoing()!, now: t0) }, .invalidKey)
        // The same identity on another exchange (another device's copy) too.
        let other = try qr(alice, 7)
        XCTAssertEqual(kind { try other.receive(try qr(alice, 8).peekOutgoing()!, now: t0) }, .invalidKey)
    }

    func testQRManInTheMiddleChangesTheSAS() throws {
        let alice = try person("Alice"), bob = try person("Bob"), mallory = try person("Mallory")
        // Mallory shows Alice her own code, and Bob another one of hers.
        let a = try qr(alice, 1), b = try qr(bob, 2)
        let ma = try qr(mallory, 3), mb = try qr(mallory, 4)
        try scanEachOther(a, ma)
        try scanEachOther(b, mb)
        XCTAssertNotEqual(a.sas, b.sas)
        XCTAssertEqual(a.peer?.name, "Mallory")
        // Substituting only the ephemeral key in Bob's payload breaks his signature.
        var p = Base64.decode(String(decoding: b.peekOutgoing()!.dropFirst(7), as: UTF8.self), .urlUnpadded)!
        let mk = Base64.decode(String(decoding: ma.peekOutgoing()!.dropFirst(7), as: UTF8.self), .urlUnpadded)!
        p.replaceSubrange(41..<73, with: mk[41..<73])
        let a2 = try qr(alice, 5)
        XCTAssertEqual(kind { try a2.receive(Array(("ITSME1:" + Base64.encode(p, .urlUnpadded)).utf8), now: t0) }, .authenticationFailed)
    }

    // MARK: Re-exchange

    func testReExchangeReplacesTheSeedOnlyWhenConfirmed() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        var a = try qr(alice, 1), b = try qr(bob, 2)
        try scanEachOther(a, b)
        let id = try a.confirm(now: t0)
        try alice.store.setName(id: id, "Bobby")
        let oldSeed = try alice.store.seed(id: id).unsafeExportedArray()

        // Second exchange, rejected: nothing changes.
        a = try qr(alice, 3)
        b = try qr(bob, 4)
        try scanEachOther(a, b)
        XCTAssertEqual(try a.save(now: t0 + 10), id)
        XCTAssertTrue(a.flags.contains(.knownContact))
        try a.reject()
        XCTAssertEqual(try alice.store.seed(id: id).unsafeExportedArray(), oldSeed)
        XCTAssertEqual(try alice.store.contact(id: id).name, "Bobby")
        XCTAssertEqual(try alice.store.count(), 1)

        // Third exchange, confirmed: the seed is replaced, the name kept.
        try alice.store.setState(id: id, .unverified, acknowledged: false, now: t0)
        a = try qr(alice, 5)
        b = try qr(bob, 6)
        try scanEachOther(a, b)
        XCTAssertEqual(try a.confirm(now: t0 + 20), id)
        let idB = try b.confirm(now: t0 + 20)
        let c = try alice.store.contact(id: id)
        XCTAssertEqual(c.state, .verified)
        XCTAssertEqual(c.verifiedAt, t0 + 20)
        XCTAssertEqual(c.name, "Bobby")
        XCTAssertNotEqual(try alice.store.seed(id: id).unsafeExportedArray(), oldSeed)
        // The old record's page images left the write-ahead log.
        let wal = try FileManager.default.attributesOfItem(atPath: alice.store.path + "-wal")
        XCTAssertEqual((wal[.size] as? NSNumber)?.intValue, 0)
        XCTAssertTrue(try alice.store.seed(id: id).constantTimeEquals(try bob.store.seed(id: idB)))
        XCTAssertTrue(try alice.store.deviceSecrets(id: id).theirs.constantTimeEquals(try bob.store.deviceSecrets(id: idB).mine))
        XCTAssertEqual(try alice.store.count(), 1)
    }

    // MARK: Source format

    func testSourceFormatImportIsUnauthenticatedAndNeverMerges() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        // Bob already known with his key.
        let a0 = try qr(alice, 1), b0 = try qr(bob, 2)
        try scanEachOther(a0, b0)
        let keyed = try a0.confirm(now: t0)

        let key = Base64.encode(SHA256.hash([1]).withBytes { X25519.publicKey(secretKey: $0) }, .standardPadded)
        for name in ["Bob", "B\\|o\\\\b", "Not Bob"] {
            let a = try qr(alice, 3)
            try a.receive(Array("5|\(name)|\(bob.identity.fingerprint.lowercased())|\(key)|654321".utf8), now: t0)
            XCTAssertEqual(a.state, .imported)
            XCTAssertTrue(a.flags.contains(.unauthenticated))
            XCTAssertNil(a.sas)
            XCTAssertNil(a.peer?.publicKey)
            XCTAssertEqual(a.peer?.fingerprint, bob.identity.fingerprint)
            XCTAssertEqual(kind { try a.confirm(now: t0) }, .invalidState)
            let id = try a.save(now: t0)
            XCTAssertNotEqual(id, keyed)
            XCTAssertFalse(a.flags.contains(.knownContact))
            let c = try alice.store.contact(id: id)
            XCTAssertFalse(c.isAuthenticated)
            XCTAssertEqual(c.state, .unverified)
            XCTAssertEqual(c.name, name.replacingOccurrences(of: "\\|", with: "|").replacingOccurrences(of: "\\\\", with: "\\"))
            XCTAssertEqual(Array(try alice.store.deviceSecrets(id: id).theirs.unsafeExportedArray()), Array("654321".utf8))
        }
        XCTAssertEqual(try alice.store.contact(id: keyed).state, .verified, "the keyed contact is untouched")
        XCTAssertEqual(try alice.store.contacts(fingerprint: bob.identity.fingerprint).count, 4)
        // Rejecting an import deletes it.
        let a = try qr(alice, 4)
        try a.receive(Array("5|Eve|0011223344556677|\(key)|111111".utf8), now: t0)
        let id = try a.save(now: t0)
        try a.reject()
        XCTAssertEqual(kind { _ = try alice.store.contact(id: id) }, .notFound)
    }

    // MARK: Bluetooth

    func testBluetoothExchangeEndToEnd() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let a = try bluetooth(alice, 1)
        let code = try XCTUnwrap(a.sessionCode)
        let b = try bluetooth(bob, code: ShortCode(parsing: code.text.lowercased()), 2)
        let frames = try pump(a, b)
        XCTAssertEqual(frames.count, 6)
        XCTAssertTrue(frames.allSatisfy { $0.count <= ExchangeProtocol.maxFrameCount })
        XCTAssertEqual(a.state, .compareSAS)
        XCTAssertEqual(a.sas, b.sas)
        XCTAssertEqual(a.peer?.publicKey, bob.identity.publicKey)
        XCTAssertEqual(b.peer?.name, "Alice")
        let idA = try a.confirm(now: t0)
        try pump(a, b)
        XCTAssertTrue(b.flags.contains(.peerConfirmed))
        try b.reject()
        try pump(a, b)
        XCTAssertTrue(a.flags.contains(.peerRejected))
        // Alice confirmed first: her contact awaited Bob's decision, which
        // was a rejection; settling it deletes the contact.
        XCTAssertEqual(try alice.store.contact(id: idA).exchangeMethod, .bluetooth)
        XCTAssertEqual(try alice.store.contact(id: idA).state, .awaitingPeer)
        XCTAssertNil(try a.settle(now: t0))
        XCTAssertEqual(a.state, .rejected)
        XCTAssertEqual(try alice.store.count(), 0)
        XCTAssertEqual(try bob.store.count(), 0)
    }

    func testAStrayFrameAfterTheDecisionDoesNotUndoIt() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let a = try bluetooth(alice, 1)
        let b = try bluetooth(bob, code: a.sessionCode, 2)
        let frames = try pump(a, b)
        try a.confirm(now: t0)
        // Every frame of the exchange again, both sides': all refused.
        for f in frames { XCTAssertNotNil(kind { try a.receive(f, now: t0) }) }
        XCTAssertEqual(a.state, .awaitingDecision)
        XCTAssertEqual(kind { _ = try a.settle(now: self.t0) }, .invalidState, "no decision from Bob yet")
        try pump(a, b)
        XCTAssertTrue(b.flags.contains(.peerConfirmed))
        try b.confirm(now: t0)
        try pump(a, b)
        XCTAssertTrue(a.flags.contains(.peerConfirmed))
        XCTAssertEqual(b.state, .confirmed, "Alice's confirmation had arrived: Bob's contact is verified at once")
        XCTAssertEqual(a.state, .awaitingDecision)
        // Bob's CONFIRM again: the peer's decision comes once.
        for f in frames { XCTAssertNotNil(kind { try a.receive(f, now: t0) }) }
        let id = try XCTUnwrap(try a.settle(now: t0))
        XCTAssertEqual(a.state, .confirmed)
        XCTAssertEqual(try alice.store.contact(id: id).state, .verified)
        let q = try qr(alice, 9), r = try qr(bob, 10)
        try scanEachOther(q, r)
        try q.reject()
        XCTAssertEqual(kind { try q.receive(Array("not a payload".utf8), now: t0) }, .invalidState)
    }

    func testBluetoothPeerRejectionBlocksConfirm() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let a = try bluetooth(alice, 1)
        let b = try bluetooth(bob, code: a.sessionCode, 2)
        try pump(a, b)
        try b.reject()
        try pump(a, b)
        XCTAssertEqual(kind { try a.confirm(now: t0) }, .invalidState)
        try a.reject()
    }

    func testBluetoothWrongSessionCodeFails() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let a = try bluetooth(alice, 1)
        let b = try bluetooth(bob, code: ShortCode(value: (a.sessionCode!.value + 1) % 260_000), 2)
        XCTAssertEqual(kind { try pump(a, b) }, .authenticationFailed)
    }

    /// Records the frames of one honest run, then replays them with one
    /// change into a fresh receiver built from the same randomness.
    private func bluetoothTranscript(_ alice: Person, _ bob: Person) throws -> (code: ShortCode, fromA: [[UInt8]]) {
        let a = try bluetooth(alice, 1)
        let b = try bluetooth(bob, code: a.sessionCode, 2)
        var fromA: [[UInt8]] = []
        var moved = true
        while moved {
            moved = false
            if let f = a.peekOutgoing() { a.markSent(); fromA.append(f); try b.receive(f, now: t0); moved = true }
            if let f = b.peekOutgoing() { b.markSent(); try a.receive(f, now: t0); moved = true }
        }
        try a.confirm(now: t0)
        fromA.append(a.peekOutgoing()!)
        return (a.sessionCode!, fromA)
    }

    /// A fresh B, fed `frames` from A (B's own frames are regenerated by the
    /// same randomness, so A's recorded frames stay valid for it).
    private func feedB(_ bob: Person, code: ShortCode, _ frames: [[UInt8]]) throws {
        let b = try bluetooth(bob, code: code, 2)
        for f in frames { try b.receive(f, now: t0) }
    }

    func testEveryByteOfEveryBluetoothFrameIsChecked() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let (code, fromA) = try bluetoothTranscript(alice, bob)
        XCTAssertNoThrow(try feedB(bob, code: code, fromA), "the honest transcript replays")
        for (n, frame) in fromA.enumerated() {
            var variants: [[UInt8]] = []
            for i in frame.indices {
                var f = frame
                f[i] ^= 0x01
                variants.append(f)
            }
            for len in 0..<frame.count { variants.append(Array(frame.prefix(len))) }
            variants.append(frame + [0])
            for v in variants {
                var frames = fromA
                frames[n] = v
                XCTAssertNotNil(kind { try feedB(bob, code: code, frames) }, "frame \(n) variant accepted")
            }
        }
    }

    func testReplayedAndReorderedFramesAreRejected() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let (code, f) = try bluetoothTranscript(alice, bob)  // HELLO, KEY, DATA, CONFIRM
        let cases: [([[UInt8]], String)] = [
            ([f[0], f[0]], "HELLO replayed"),
            ([f[0], f[1], f[1]], "KEY replayed"),
            ([f[0], f[1], f[2], f[2]], "DATA replayed"),
            ([f[1]], "KEY before HELLO"),
            ([f[0], f[2]], "DATA before KEY"),
            ([f[0], f[1], f[3]], "CONFIRM before DATA"),
            ([f[0], f[1], f[3], f[2]], "CONFIRM and DATA swapped"),
            ([f[2]], "DATA first"),
        ]
        for (frames, what) in cases {
            let k = kind { try feedB(bob, code: code, frames) }
            XCTAssertTrue(k == .malformedMessage || k == .authenticationFailed, "\(what): \(String(describing: k))")
        }
        // After the peer's CONFIRM the exchange has every frame: anything
        // more, a replayed CONFIRM included, is invalid_state (7.1).
        XCTAssertEqual(kind { try self.feedB(bob, code: code, [f[0], f[1], f[2], f[3], f[3]]) }, .invalidState, "CONFIRM replayed")
    }

    func testBluetoothReflectionIsRefused() throws {
        let alice = try person("Alice")
        let a = try bluetooth(alice, 1)
        XCTAssertEqual(kind { try a.receive(a.peekOutgoing()!, now: t0) }, .invalidKey)
    }

    /// Section 7.1: a DATA or CONFIRM frame of the wrong length is
    /// `malformed_message`, found before it is decrypted (as HELLO and KEY,
    /// and as in PIN Update, 10.3), not a failed authentication.
    func testBluetoothFramesOfTheWrongLengthAreMalformed() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let (code, f) = try bluetoothTranscript(alice, bob)  // HELLO, KEY, DATA, CONFIRM
        let minData = 2 + 113 + 1 + AEAD.tagCount
        let cases: [([[UInt8]], String)] = [
            ([f[0], f[1], Array(f[2].prefix(minData - 1))], "DATA one byte under the shortest"),
            ([f[0], f[1], Array(f[2].prefix(2))], "DATA of its header only"),
            ([f[0], f[1], Array(f[2].prefix(18))], "DATA of a header and a tag"),
            ([f[0], f[1], f[2], Array(f[3].dropLast())], "CONFIRM one byte short"),
            ([f[0], f[1], f[2], f[3] + [0]], "CONFIRM one byte long"),
            ([f[0], f[1], f[2], Array(f[3].prefix(2))], "CONFIRM of its header only"),
        ]
        XCTAssertEqual(f[3].count, 2 + 1 + AEAD.tagCount)
        for (frames, what) in cases {
            XCTAssertEqual(kind { try feedB(bob, code: code, frames) }, .malformedMessage, what)
        }
    }

    /// Section 7.2: a KEY frame that carries our own ephemeral key back is
    /// a reflection and is refused as 10.3 and 11.2 refuse one
    /// (`invalid_key`), before any key is derived or DATA sent.
    func testBluetoothReflectedKeyIsRefused() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let a = try bluetooth(alice, 1)
        let b = try bluetooth(bob, code: a.sessionCode, 2)
        a.markSent()  // A's HELLO
        try a.receive(try XCTUnwrap(b.peekOutgoing()), now: t0)
        let keyA = try XCTUnwrap(a.peekOutgoing())
        XCTAssertEqual(keyA[1], 2, "A's KEY")
        a.markSent()
        XCTAssertEqual(kind { try a.receive(keyA, now: t0) }, .invalidKey)
        XCTAssertNil(a.peekOutgoing(), "no DATA after a reflected KEY")
        XCTAssertEqual(a.state, .failed)
    }

    func testBluetoothManInTheMiddleChangesTheSAS() throws {
        // Mallory runs one exchange with Alice and one with Bob, choosing
        // her keys in advance as the commitments force her to.
        let alice = try person("Alice"), bob = try person("Bob"), mallory = try person("Mallory")
        for round in 0..<8 {
            let a = try bluetooth(alice, 100 + round)
            let ma = try bluetooth(mallory, code: a.sessionCode, 200 + round)
            let mb = try bluetooth(mallory, 300 + round)
            let b = try bluetooth(bob, code: mb.sessionCode, 400 + round)
            try pump(a, ma)
            try pump(mb, b)
            XCTAssertEqual(a.sas, ma.sas)
            XCTAssertEqual(b.sas, mb.sas)
            XCTAssertNotEqual(a.sas, b.sas, "round \(round)")
            XCTAssertEqual(a.peer?.name, "Mallory")
        }
        // Relaying Bob's HELLO to Alice but substituting her own KEY: the
        // keys no longer match, so Bob's DATA fails to open for Alice.
        let a = try bluetooth(alice, 1)
        let b = try bluetooth(bob, code: a.sessionCode, 2)
        let m = try bluetooth(mallory, code: a.sessionCode, 3)
        let helloA = a.peekOutgoing()!, helloB = b.peekOutgoing()!
        a.markSent()
        b.markSent()
        try a.receive(helloB, now: t0)
        try b.receive(helloA, now: t0)
        try m.receive(helloA, now: t0)
        m.markSent()  // Mallory's own HELLO, not sent
        let keyM = m.peekOutgoing()!
        try a.receive(keyM, now: t0)
        try b.receive(a.peekOutgoing()!, now: t0)
        a.markSent()
        b.markSent()
        let dataB = b.peekOutgoing()!
        XCTAssertEqual(dataB[1], 3)
        XCTAssertEqual(kind { try a.receive(dataB, now: t0) }, .authenticationFailed)
    }

    // MARK: Sealing and expiry

    func testStoresOfAnotherIdentityOrAnotherFileAreRefused() throws {
        let alice = try person("Alice"), bob = try person("Bob"), carol = try person("Carol")
        // An exchange is given a contact store of its own identity, whatever its method.
        var r = rng(7)
        XCTAssertEqual(kind { _ = try Exchange.qr(identity: alice.identity, store: carol.store, now: t0, random: &r) }, .wrongIdentity)
        XCTAssertEqual(
            kind { _ = try Exchange.bluetooth(identity: alice.identity, store: carol.store, sessionCode: nil, now: t0, random: &r) },
            .wrongIdentity)
        XCTAssertEqual(
            kind { _ = try Exchange.invite(identity: alice.identity, store: carol.store, realtime: false, now: t0, random: &r) },
            .wrongIdentity)
        XCTAssertEqual(try carol.store.count(), 0)

        // Sealed before saving, it restores with any store of hers; once it
        // saved its contact, only with the store it saved in.
        let a = try qr(alice), b = try qr(bob, 3)
        try scanEachOther(a, b)
        let unsaved = try a.seal()
        let id = try a.save(now: t0)
        let saved = try a.seal()
        let second = try ContactStore(path: "\(directory!)/alice-second.db", identity: alice.identity)
        XCTAssertEqual(kind { _ = try Exchange.restore(identity: alice.identity, store: second, sealed: saved, now: t0) }, .invalidArgument)
        XCTAssertEqual(
            kind { _ = try Exchange.restore(identity: alice.identity, store: carol.store, sealed: saved, now: t0) }, .wrongIdentity)
        XCTAssertEqual(try Exchange.restore(identity: alice.identity, store: second, sealed: unsaved, now: t0).state, .compareSAS)
        let restored = try Exchange.restore(identity: alice.identity, store: alice.store, sealed: saved, now: t0)
        XCTAssertEqual(try restored.confirm(now: t0), id)
        XCTAssertEqual(try alice.store.contact(id: id).state, .verified)
        XCTAssertEqual(try second.count(), 0)
    }

    func testAFinishedBluetoothExchangeSealsWithItsConfirmFrame() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let a = try bluetooth(alice, 1)
        let b = try bluetooth(bob, code: a.sessionCode, 2)
        try pump(a, b)
        let id = try a.confirm(now: t0)
        // Alice stops before sending her CONFIRM and before Bob's arrives.
        let restored = try Exchange.restore(identity: alice.identity, store: alice.store, sealed: try a.seal(), now: t0 + 30)
        XCTAssertEqual(restored.state, .awaitingDecision)
        XCTAssertEqual(try alice.store.contact(id: id).state, .awaitingPeer)
        try b.reject()
        try pump(restored, b, now: t0 + 30)
        XCTAssertTrue(b.flags.contains(.peerConfirmed))
        XCTAssertTrue(restored.flags.contains(.peerRejected))
        XCTAssertNil(try restored.settle(now: t0 + 30))
        XCTAssertEqual(kind { _ = try alice.store.contact(id: id) }, .notFound, "Bob rejected: Alice's contact is gone")
        // A finished QR exchange has nothing left to do and is not sealed.
        let q = try qr(alice, 5), r = try qr(bob, 6)
        try scanEachOther(q, r)
        try q.reject()
        XCTAssertEqual(kind { _ = try q.seal() }, .invalidState)
    }

    func testSealAndRestoreMidExchange() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        // QR: sealed after scanning, restored, same SAS, then confirmed.
        let a = try qr(alice, 1), b = try qr(bob, 2)
        try scanEachOther(a, b)
        let sealed = try a.seal()
        let restored = try Exchange.restore(identity: alice.identity, store: alice.store, sealed: sealed, now: t0 + 3600)
        XCTAssertEqual(restored.state, .compareSAS)
        XCTAssertEqual(restored.sas, b.sas)
        XCTAssertEqual(restored.peekOutgoing(), a.peekOutgoing())
        try restored.confirm(now: t0 + 3600)

        // Bluetooth: sealed after HELLO, restored, finishes.
        let x = try bluetooth(alice, 3)
        let y = try bluetooth(bob, code: x.sessionCode, 4)
        try x.receive(y.peekOutgoing()!, now: t0)
        y.markSent()
        let x2 = try Exchange.restore(identity: alice.identity, store: alice.store, sealed: try x.seal(), now: t0 + 60)
        XCTAssertEqual(x2.sessionCode, x.sessionCode)
        try pump(x2, y, now: t0 + 60)
        XCTAssertEqual(x2.sas, y.sas)
        XCTAssertNotNil(x2.sas)

        // Tampered, wrong identity, expired.
        for i in sealed.indices {
            var s = sealed
            s[i] ^= 1
            let k = kind { _ = try Exchange.restore(identity: alice.identity, store: alice.store, sealed: s, now: t0) }
            XCTAssertTrue(k == .authenticationFailed || k == .corruptData, "byte \(i)")
        }
        XCTAssertEqual(kind { _ = try Exchange.restore(identity: alice.identity, store: alice.store, sealed: Array(sealed.prefix(20)), now: t0) }, .corruptData)
        XCTAssertEqual(kind { _ = try Exchange.restore(identity: bob.identity, store: bob.store, sealed: sealed, now: t0) }, .authenticationFailed)
        XCTAssertEqual(
            kind { _ = try Exchange.restore(identity: alice.identity, store: alice.store, sealed: sealed, now: t0 + Exchange.lifetime + 1) }, .expired)
        // Another device (another secret store holding the same identity) cannot open it.
        XCTAssertEqual(kind { _ = try restored.seal() }, .invalidState, "a finished exchange is not sealed")
    }

    func testPendingExchangesExpireAfter24Hours() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let a = try qr(alice, 1), b = try qr(bob, 2)
        XCTAssertEqual(kind { try a.receive(b.peekOutgoing()!, now: t0 + Exchange.lifetime + 1) }, .expired)
        XCTAssertEqual(a.state, .failed)
        let c = try qr(alice, 3)
        try c.receive(b.peekOutgoing()!, now: t0 + Exchange.lifetime)
        XCTAssertEqual(kind { try c.confirm(now: t0 + Exchange.lifetime + 1) }, .expired)
        XCTAssertEqual(try alice.store.count(), 0)
    }

    func testDescriptionShowsNoSecrets() throws {
        let alice = try person("Alice"), bob = try person("Bob")
        let a = try qr(alice), b = try qr(bob, 3)
        try scanEachOther(a, b)
        XCTAssertEqual("\(a)", "Exchange(qr, state: compareSAS)")
    }
}

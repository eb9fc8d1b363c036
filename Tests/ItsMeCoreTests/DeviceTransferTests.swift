import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

/// Device transfer (PROTOCOL.md 17): installing an import, the
/// wrong-identity check, the live transfer, and what a contact sees.
final class DeviceTransferTests: XCTestCase {
    private var directory: String!
    private let t0: Int64 = 1_800_000_000
    private let pin = "246810"

    override func setUpWithError() throws {
        try Sodium.initialize()
        directory = NSTemporaryDirectory() + "itsme-transfer-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: directory) }

    private func kind(_ body: () throws -> Void) -> ItsMeError.Kind? { errorKind(body) }

    private func person(_ name: String) throws -> Identity {
        let identity = try Identity.create(store: MemorySecretStore(), name: name)
        try PIN(store: identity.store).set(pin)
        return identity
    }

    private func randomKey() throws -> [UInt8] { try Ed25519.keyPair(seed: try SecretBytes(randomCount: 32, using: &rng)).publicKey }
    private var rng = SystemRandom()

    /// A store at `name` for `identity` with `count` contacts, each with device secrets.
    private func store(_ identity: Identity, _ name: String, contacts count: Int) throws -> ContactStore {
        let store = try ContactStore(path: directory + "/" + name, identity: identity)
        for i in 0..<count {
            let id = try store.add(
                name: "Contact \(i)", publicKey: try randomKey(), seed: try SecretBytes(randomCount: 32, using: &rng), method: .qr,
                now: t0)
            try store.setDeviceSecrets(
                id: id, mine: try SecretBytes(randomCount: 16, using: &rng), theirs: try SecretBytes(randomCount: 16, using: &rng))
        }
        return store
    }

    /// What a live transfer delivers, run to the end.
    private func transferred(_ identity: Identity) throws -> IdentityExport.Contents {
        let receiver = try DeviceTransfer(receiverAt: t0, random: &rng)
        let sender = try DeviceTransfer(sending: identity, pin: pin, offer: receiver.offerText, now: t0, random: &rng)
        try receiver.receive(try XCTUnwrap(sender.takeOutgoing()), now: t0 + 1)
        XCTAssertEqual(receiver.sas, sender.sas)
        try sender.confirm(now: t0 + 5)
        try receiver.confirm(now: t0 + 6)
        try receiver.receive(try XCTUnwrap(sender.takeOutgoing()), now: t0 + 7)
        XCTAssertNil(sender.takeOutgoing(), "no contact store was included")
        return try receiver.takeIdentity()
    }

    // MARK: Install

    func testImportOnANewDeviceReadsEveryContactWithNoDeviceSecret() throws {
        let alice = try person("Alice")
        let old = try store(alice, "old.db", contacts: 3)
        let before = try old.list()
        let blob = try IdentityExport.export(alice, pin: pin, now: t0, password: "ABCD-EFGH-JKMNP", kind: .generated, random: &rng)
        try old.backup(to: directory + "/new.db")
        XCTAssertEqual(kind { try old.backup(to: self.directory + "/new.db") }, .alreadyExists)

        let device = MemorySecretStore()
        let contents = try IdentityExport.open(blob, password: "abcd efgh jkmnp", limiter: IdentityExport.limiter(store: device), now: t0)
        let found = try IdentityExport.check(contents, secretStore: device, contactStorePath: directory + "/new.db")
        XCTAssertFalse(found.isWrongIdentity)
        XCTAssertEqual(found.store, ContactStore.ImportSurvey(exists: true, ownedByKey: true, readable: 3, unreadable: 0, deviceSecrets: 3))
        let (identity, _) = try IdentityExport.install(
            contents, secretStore: device, contactStorePath: directory + "/new.db", replacing: false)
        XCTAssertEqual(identity.fingerprint, alice.fingerprint)
        XCTAssertEqual(try Identity.load(store: device).publicKey, alice.publicKey)
        let moved = try ContactStore(path: directory + "/new.db", identity: identity)
        XCTAssertEqual(try moved.list(), before, "every contact readable, unchanged")
        for c in before {
            XCTAssertEqual(kind { _ = try moved.deviceSecrets(id: c.id) }, .notFound, "no device secret travels")
            XCTAssertTrue(try moved.seed(id: c.id).constantTimeEquals(try old.seed(id: c.id)))
        }
        XCTAssertNotEqual(try stored(device, ContactStore.deviceKeyItem), try stored(alice.store, ContactStore.deviceKeyItem))
        XCTAssertTrue(try moved.integrityCheck())
    }

    func testImportWithoutAContactStoreAndAgainOnTheSameDevice() throws {
        let alice = try person("Alice")
        let device = MemorySecretStore()
        let (first, found) = try IdentityExport.install(
            try transferred(alice), secretStore: device, contactStorePath: nil, replacing: false)
        XCTAssertEqual(first.fingerprint, alice.fingerprint)
        XCTAssertEqual(found.store.exists, false)
        // A missing file is fine, and is not created.
        _ = try IdentityExport.install(try transferred(alice), secretStore: device, contactStorePath: directory + "/none.db", replacing: false)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/none.db"))
        // The same identity again is not a wrong identity; its device secrets are forgotten all the same.
        let s = try store(first, "same.db", contacts: 2)
        let again = try IdentityExport.install(
            try transferred(alice), secretStore: device, contactStorePath: s.path, replacing: false)
        XCTAssertNil(again.found.otherIdentity)
        XCTAssertEqual(again.found.store.deviceSecrets, 2)
        XCTAssertEqual(try ContactStore(path: s.path, identity: again.identity).tagSecrets(id: 1).speaking.count, 0)
    }

    func testWrongIdentityChangesNothingUntilTheHostProceeds() throws {
        let alice = try person("Alice")
        let carol = try person("Carol")
        _ = try store(carol, "carol.db", contacts: 2)
        let fileBefore = try Data(contentsOf: URL(fileURLWithPath: directory + "/carol.db"))
        let contents = try transferred(alice)

        let found = try IdentityExport.check(contents, secretStore: carol.store, contactStorePath: directory + "/carol.db")
        XCTAssertTrue(found.isWrongIdentity)
        XCTAssertEqual(found.otherIdentity, carol.fingerprint)
        XCTAssertEqual(found.store, ContactStore.ImportSurvey(exists: true, ownedByKey: false, readable: 0, unreadable: 2, deviceSecrets: 2))
        do {
            _ = try IdentityExport.install(contents, secretStore: carol.store, contactStorePath: directory + "/carol.db", replacing: false)
            XCTFail("installed over another identity")
        } catch let e as ItsMeError {
            XCTAssertEqual(e.kind, .wrongIdentity)
            XCTAssertTrue(e.message.contains(carol.fingerprint) && e.message.contains("2 contacts"), e.message)
        }
        // Cancelled: Carol is still here, with her contacts, byte for byte.
        XCTAssertEqual(try Identity.load(store: carol.store).fingerprint, carol.fingerprint)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: directory + "/carol.db")), fileBefore)
        XCTAssertEqual(try ContactStore(path: directory + "/carol.db", identity: carol).count(), 2)

        // Proceed: Alice replaces Carol; the unreadable contacts are cleared.
        let (identity, _) = try IdentityExport.install(
            contents, secretStore: carol.store, contactStorePath: directory + "/carol.db", replacing: true)
        XCTAssertEqual(try Identity.load(store: carol.store).fingerprint, alice.fingerprint)
        let adopted = try ContactStore(path: directory + "/carol.db", identity: identity)
        XCTAssertEqual(try adopted.count(), 0)
        XCTAssertTrue(try adopted.integrityCheck())
        XCTAssertEqual(kind { _ = try ContactStore(path: directory + "/carol.db", identity: carol) }, .wrongIdentity)
        XCTAssertNoThrow(try PIN(store: carol.store).verify(pin, now: t0), "the device's PIN stays")
    }

    func testProceedingKeepsTheContactsTheImportedKeyReads() throws {
        // Carol's device, but Alice's own contact store copied onto it.
        let alice = try person("Alice")
        let carol = try person("Carol")
        let before = try store(alice, "alice.db", contacts: 2).list()
        let contents = try transferred(alice)
        let found = try IdentityExport.check(contents, secretStore: carol.store, contactStorePath: directory + "/alice.db")
        XCTAssertTrue(found.isWrongIdentity, "another identity is here")
        XCTAssertEqual(found.store.readable, 2)
        XCTAssertEqual(found.store.unreadable, 0)
        let (identity, _) = try IdentityExport.install(
            contents, secretStore: carol.store, contactStorePath: directory + "/alice.db", replacing: true)
        XCTAssertEqual(try ContactStore(path: directory + "/alice.db", identity: identity).list(), before)
    }

    func testAnotherProgramsFileIsRefusedUntouched() throws {
        let path = directory + "/other.db"
        let db = try Database(path: path)
        try db.execute("CREATE TABLE t (x); INSERT INTO t VALUES (1)")
        let contents = try transferred(try person("Alice"))
        let device = MemorySecretStore()
        XCTAssertEqual(kind { _ = try IdentityExport.install(contents, secretStore: device, contactStorePath: path, replacing: true) }, .database)
        XCTAssertEqual(try Database(path: path).query("SELECT x FROM t"), [[.integer(1)]])
        XCTAssertNil(try stored(device, Identity.itemName), "nothing installed")
    }

    func testExportNeedsThePIN() throws {
        let alice = try person("Alice")
        XCTAssertEqual(
            kind { _ = try IdentityExport.export(alice, pin: "000000", now: self.t0, password: "ABCD-EFGH-JKMNP", kind: .generated, random: &self.rng) },
            .wrongPIN)
        XCTAssertEqual(try PIN(store: alice.store).status(now: t0).failures, 1)
        // A bad password is refused before the PIN is tried: not counted.
        XCTAssertEqual(
            kind { _ = try IdentityExport.export(alice, pin: "000000", now: self.t0, password: "short", kind: .chosen, random: &self.rng) },
            .invalidArgument)
        XCTAssertEqual(try PIN(store: alice.store).status(now: t0).failures, 1)
        let nobody = try Identity.create(store: MemorySecretStore(), name: "No PIN")
        XCTAssertEqual(
            kind { _ = try IdentityExport.export(nobody, pin: self.pin, now: self.t0, password: "ABCD-EFGH-JKMNP", kind: .generated, random: &self.rng) },
            .notFound)
    }

    // MARK: Live transfer

    func testLiveTransferSendsNothingBeforeTheSenderConfirms() throws {
        let alice = try person("Alice")
        let receiver = try DeviceTransfer(receiverAt: t0, random: &rng)
        XCTAssertEqual(receiver.state, .awaitingPeer)
        XCTAssertTrue(receiver.offerText.hasPrefix("ITSMETR2:"))
        XCTAssertEqual(receiver.offerText.count, 75)
        let sender = try DeviceTransfer(sending: alice, pin: pin, offer: " \(receiver.offerText)\n", now: t0, random: &rng)
        XCTAssertEqual(sender.roomName, receiver.roomName)
        XCTAssertEqual(sender.roomName.count, 32)
        let key = try XCTUnwrap(sender.takeOutgoing())
        XCTAssertNil(sender.takeOutgoing(), "only the key before the confirmation")
        try receiver.receive(key, now: t0)
        XCTAssertEqual(receiver.state, .compareSAS)
        XCTAssertEqual(receiver.sas, sender.sas)
        XCTAssertEqual(kind { _ = try receiver.takeIdentity() }, .invalidState)
        try sender.reject()
        XCTAssertEqual(sender.state, .rejected)
        XCTAssertNil(sender.takeOutgoing(), "a rejected transfer sends nothing")
        XCTAssertEqual(kind { try sender.confirm(now: self.t0) }, .invalidState)
        try receiver.reject()
        XCTAssertEqual(receiver.state, .rejected)
        XCTAssertEqual(kind { try receiver.receive(key, now: self.t0) }, .invalidState)
    }

    func testAnotherDeviceAnsweringShowsAnotherSAS() throws {
        let alice = try person("Alice")
        let mallory = try person("Mallory")
        let receiver = try DeviceTransfer(receiverAt: t0, random: &rng)
        let real = try DeviceTransfer(sending: alice, pin: pin, offer: receiver.offerText, now: t0, random: &rng)
        let other = try DeviceTransfer(sending: mallory, pin: pin, offer: receiver.offerText, now: t0, random: &rng)
        try receiver.receive(try XCTUnwrap(other.takeOutgoing()), now: t0)
        XCTAssertNotEqual(receiver.sas, real.sas, "1 in 260000 to collide; fixed by the random draws of this run")
        // The real sender's identity cannot be opened by this receiver.
        try real.confirm(now: t0)
        _ = real.takeOutgoing()
        let identity = try XCTUnwrap(real.takeOutgoing())
        try receiver.confirm(now: t0)
        XCTAssertEqual(kind { try receiver.receive(identity, now: self.t0) }, .authenticationFailed)
        XCTAssertEqual(receiver.state, .failed)
    }

    /// 17.3: an identity message outside 105 to 232 bytes is
    /// `malformed_message`, checked when it arrives and before anything is
    /// opened, even when it is well encrypted under the transfer's key; a
    /// well-encrypted one of a right length with malformed contents stays
    /// `corrupt_data`.
    func testIdentityMessageOfAWrongLengthIsMalformed() throws {
        let alice = try person("Alice")
        let senderSeed = [UInt8](repeating: 0x5A, count: 32)
        // (plaintext bytes or nil for random bytes of that message length, arriving before the confirmation, expected)
        let cases: [(Int?, Int, Bool, ItsMeError.Kind)] = [
            (86, 104, false, .malformedMessage), (86, 104, true, .malformedMessage),
            (215, 233, false, .malformedMessage), (215, 233, true, .malformedMessage),
            (nil, 60, false, .malformedMessage), (nil, 2, true, .malformedMessage), (nil, 300, false, .malformedMessage),
            (87, 105, false, .corruptData), (87, 105, true, .corruptData),
        ]
        for (plainCount, messageCount, early, expected) in cases {
            let label = "\(plainCount.map(String.init) ?? "random") → \(messageCount) bytes, early: \(early)"
            let receiver = try DeviceTransfer(receiverAt: t0, random: &rng)
            var srng = DeterministicRandom(seed: senderSeed)
            let sender = try DeviceTransfer(sending: alice, pin: pin, offer: receiver.offerText, now: t0, random: &srng)
            let keyMessage = try XCTUnwrap(sender.takeOutgoing())
            try receiver.receive(keyMessage, now: t0)
            // The transfer key as both sides derive it (17.3), from the sender's drawn key.
            let offer = try XCTUnwrap(Base64.decode(String(receiver.offerText.dropFirst(DeviceTransfer.offerPrefix.count)), .urlUnpadded))
            let transferID = Array(offer[1..<17]), receiverKey = Array(offer[17...]), senderKey = Array(keyMessage[2...])
            var again = DeterministicRandom(seed: senderSeed)
            let shared = try X25519.sharedSecret(secretKey: try SecretBytes(randomCount: 32, using: &again), peerPublicKey: receiverKey)
            let th = SHA256.hash(LV.cat(LV.b("itsme-transfer-v2"), transferID, receiverKey, senderKey))
            let seed = try HKDF.derive(ikm: shared, salt: transferID, info: LV.b("itsme-transfer-seed-v2"), count: 32)
            let key = try HKDF.derive(ikm: seed, salt: [UInt8](), info: LV.cat(LV.b("itsme-transfer-key-v2"), th), count: 32)
            let message: [UInt8]
            if let plainCount {
                message = [2, 2] + (try AEAD.seal(
                    .aes256GCM, key: key, nonce: [UInt8](repeating: 0, count: 12),
                    plaintext: [UInt8](repeating: 0, count: plainCount), aad: [2, 2] + th))
            } else {
                message = [2, 2] + rng.bytes(messageCount - 2)
            }
            XCTAssertEqual(message.count, messageCount, label)
            if early {
                if expected == .malformedMessage {
                    XCTAssertEqual(kind { try receiver.receive(message, now: self.t0) }, expected, "refused on arrival: \(label)")
                } else {
                    try receiver.receive(message, now: t0)
                    XCTAssertEqual(kind { try receiver.confirm(now: self.t0) }, expected, label)
                }
            } else {
                try receiver.confirm(now: t0)
                XCTAssertEqual(kind { try receiver.receive(message, now: self.t0) }, expected, label)
            }
            XCTAssertEqual(receiver.state, .failed, label)
        }
    }

    // MARK: Contacts that move with the identity

    /// An export with the contacts (format version 2) and a live transfer
    /// that includes them each bring every contact, readable, to a new
    /// device in one step: written as a new file, then installed.
    func testTheContactStoreTravelsWithTheExportAndTheTransfer() throws {
        let alice = try person("Alice")
        let old = try store(alice, "old.db", contacts: 4)
        let before = try old.list()
        let snapshot = try old.snapshot()
        XCTAssertTrue(snapshot.starts(with: Array("SQLite format 3".utf8) + [0]))

        let blob = try IdentityExport.export(
            alice, pin: pin, now: t0, password: "ABCD-EFGH-JKMNP", kind: .generated, contactStore: snapshot, random: &rng)
        XCTAssertEqual(blob[7], 2)
        XCTAssertEqual(blob.count, IdentityExport.blobCount(nameByteCount: 5) + snapshot.count)
        let viaExport = try IdentityExport.open(blob, password: "ABCD-EFGH-JKMNP", limiter: IdentityExport.limiter(store: MemorySecretStore()), now: t0)

        // The live transfer: the sender includes the store before confirming.
        let receiver = try DeviceTransfer(receiverAt: t0, random: &rng)
        let sender = try DeviceTransfer(sending: alice, pin: pin, offer: receiver.offerText, now: t0, random: &rng)
        XCTAssertEqual(kind { try receiver.include(contactStore: snapshot) }, .invalidState, "the receiver sends nothing")
        XCTAssertEqual(kind { try sender.include(contactStore: Array("not sqlite".utf8)) }, .invalidArgument)
        try sender.include(contactStore: snapshot)
        try receiver.receive(try XCTUnwrap(sender.takeOutgoing()), now: t0 + 1)
        try sender.confirm(now: t0 + 2)
        XCTAssertEqual(kind { try sender.include(contactStore: snapshot) }, .invalidState, "too late once confirmed")
        var messages: [[UInt8]] = []
        while let m = sender.takeOutgoing() { messages.append(m) }
        XCTAssertEqual(messages.count, 1 + (snapshot.count + 32_767) / 32_768)
        XCTAssertTrue(messages.allSatisfy { $0.count <= DeviceTransfer.maxMessageCount })
        try receiver.confirm(now: t0 + 3)
        for (i, m) in messages.enumerated() {
            try receiver.receive(m, now: t0 + 4)
            XCTAssertEqual(receiver.state, i == messages.count - 1 ? .done : .awaitingIdentity)
        }
        let viaTransfer = try receiver.takeIdentity()

        func installs(_ label: String, _ contents: borrowing IdentityExport.Contents) throws {
            XCTAssertEqual(contents.contactStore, snapshot, label)
            let path = directory + "/new-\(label).db"
            try contents.writeContactStore(to: path)
            XCTAssertEqual(kind { try contents.writeContactStore(to: path) }, .alreadyExists, "never overwritten")
            var info = stat()
            XCTAssertEqual(stat(path, &info), 0)
            XCTAssertEqual(info.st_mode & 0o777, 0o600, label)
            let device = MemorySecretStore()
            let (identity, found) = try IdentityExport.install(contents, secretStore: device, contactStorePath: path, replacing: false)
            XCTAssertEqual(found.store.readable, 4, label)
            let moved = try ContactStore(path: path, identity: identity)
            XCTAssertEqual(try moved.list(), before, "\(label): every contact, readable")
            for c in before { XCTAssertEqual(kind { _ = try moved.deviceSecrets(id: c.id) }, .notFound, "no device secret travels") }
        }
        try installs("export", viaExport)
        try installs("transfer", viaTransfer)
        let alone = try transferred(alice)
        XCTAssertNil(alone.contactStore)
        XCTAssertEqual(kind { try alone.writeContactStore(to: self.directory + "/nothing.db") }, .notFound)
    }

    func testSenderPINAndOfferAndLifetime() throws {
        let alice = try person("Alice")
        let receiver = try DeviceTransfer(receiverAt: t0, random: &rng)
        XCTAssertEqual(kind { _ = try DeviceTransfer(sending: alice, pin: "111111", offer: receiver.offerText, now: self.t0, random: &self.rng) }, .wrongPIN)
        XCTAssertEqual(kind { _ = try DeviceTransfer(sending: alice, pin: self.pin, offer: "ITSMETR1:AAAA", now: self.t0, random: &self.rng) }, .malformedMessage)
        XCTAssertEqual(kind { _ = try DeviceTransfer(sending: alice, pin: "111111", offer: "hello", now: self.t0, random: &self.rng) }, .malformedMessage)
        XCTAssertEqual(try PIN(store: alice.store).status(now: t0).failures, 1, "a bad offer is refused before the PIN")
        let sender = try DeviceTransfer(sending: alice, pin: pin, offer: receiver.offerText, now: t0, random: &rng)
        try receiver.receive(try XCTUnwrap(sender.takeOutgoing()), now: t0 + DeviceTransfer.lifetime)
        XCTAssertEqual(kind { try receiver.confirm(now: self.t0 + DeviceTransfer.lifetime + 1) }, .expired)
        XCTAssertEqual(receiver.state, .failed)
        XCTAssertEqual(kind { try sender.confirm(now: self.t0 + DeviceTransfer.lifetime + 1) }, .expired)
        XCTAssertNil(sender.takeOutgoing())
    }

    func testDescriptionShowsNoSecret() throws {
        let receiver = try DeviceTransfer(receiverAt: t0, random: &rng)
        XCTAssertEqual(receiver.description, "DeviceTransfer(role: receiver, state: awaitingPeer)")
    }

    // MARK: What a contact sees

    /// Alice moves to a new device (by export and by live transfer); Bob,
    /// her contact, sees her device change at the next verification, and
    /// her degradation code restores the acknowledgement.
    func testAContactSeesTheDeviceChangeAndTheCodeAcknowledgesIt() throws {
        for live in [false, true] {
            let (oldAlice, bob) = try exchangedPair(in: directory, label: "transfer-\(live)", now: t0 - 100)
            try PIN(store: oldAlice.identity.store).set(pin)
            XCTAssertEqual(try voiceVerify(oldAlice, bob, now: t0).1, .verified, "before the move")

            let device = MemorySecretStore()
            let newPath = directory + "/alice-new-\(live).db"
            try oldAlice.store.backup(to: newPath)
            let contents: IdentityExport.Contents
            if live {
                contents = try transferred(oldAlice.identity)
            } else {
                let text = IdentityExport.text(
                    try IdentityExport.export(oldAlice.identity, pin: pin, now: t0, password: "long enough", kind: .chosen, random: &rng))
                contents = try IdentityExport.open(
                    try IdentityExport.blob(text: text), password: "long enough", limiter: IdentityExport.limiter(store: device), now: t0)
            }
            let (identity, _) = try IdentityExport.install(contents, secretStore: device, contactStorePath: newPath, replacing: false)
            let alice = PairSide(identity: identity, store: try ContactStore(path: newPath, identity: identity), contactID: oldAlice.contactID)

            var (fromAlice, fromBob) = try voiceVerify(alice, bob, now: t0 + 100)
            // A tag is two digits: in one window in 100 the new device's is
            // the old one's by chance; the next window's is drawn afresh (10.1).
            var at = t0 + 100
            for _ in 0..<2 where fromBob == .verified {
                at += 30
                (fromAlice, fromBob) = try voiceVerify(alice, bob, now: at)
            }
            XCTAssertEqual(fromBob, .deviceChanged, "Bob sees the new device")
            XCTAssertEqual(fromAlice, .verifiedTagUnchecked, "Alice's new device holds no secret of Bob's")
            XCTAssertEqual(try bob.store.contact(id: bob.contactID).state, .degraded)

            let code = try DegradationCode.create(store: alice.store, contactID: alice.contactID, random: &rng)
            try DegradationCode.accept(store: bob.store, contactID: bob.contactID, code: code, now: t0 + 150)
            XCTAssertTrue(try bob.store.contact(id: bob.contactID).degradationAcknowledged)
            XCTAssertEqual(try voiceVerify(alice, bob, now: t0 + 200).1, .verified, "the new device's tag is known now")
        }
    }
}

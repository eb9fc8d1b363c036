import Foundation
import XCTest

@testable import ItsMeCore

final class ContactStoreTests: XCTestCase {
    private var directory: String!
    private let t0: Int64 = 1_800_000_000

    override func setUpWithError() throws {
        try Sodium.initialize()
        directory = NSTemporaryDirectory() + "itsme-contacts-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func kind(_ body: () throws -> Void) -> ItsMeError.Kind? {
        do {
            try body()
            return nil
        } catch { return (error as? ItsMeError)?.kind }
    }

    private func key(_ n: UInt8) -> [UInt8] { SHA256.hash([n, 1]) }
    private func seed(_ n: UInt8) throws -> SecretBytes { try SecretBytes(copying: SHA256.hash([n, 2])) }

    func testRoundTripAndSeed() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Me")
        let store = try ContactStore(path: directory + "/c.db", identity: identity)
        let id = try store.add(name: "Alice", publicKey: key(1), seed: try seed(1), method: .bluetooth, now: t0, note: "hi")
        let c = try store.contact(id: id)
        XCTAssertEqual(c.name, "Alice")
        XCTAssertEqual(c.fingerprint, Fingerprint.of(publicKey: key(1)))
        XCTAssertEqual(c.publicKey, key(1))
        XCTAssertEqual(c.exchangeMethod, .bluetooth)
        XCTAssertEqual(c.note, "hi")
        XCTAssertTrue(try store.seed(id: id).constantTimeEquals(try seed(1)))
        XCTAssertEqual(try store.contact(publicKey: key(1)), c)
        XCTAssertEqual(kind { _ = try store.contact(id: 99) }, .notFound)
        XCTAssertEqual(kind { _ = try store.seed(id: 99) }, .notFound)
        XCTAssertFalse(String(describing: c).contains("Alice"), "description shows no name")
    }

    func testBatchAddsInOneTransactionAndRollsBackOnError() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Me")
        let store = try ContactStore(path: directory + "/c.db", identity: identity)
        let ids = try store.batch { batch in
            try (1...50).map { n in
                try batch.add(name: "C\(n)", publicKey: key(UInt8(n)), seed: try seed(UInt8(n)), method: .qr, now: t0)
            }
        }
        XCTAssertEqual(ids, Array(1...50).map(Int64.init))
        XCTAssertEqual(try store.count(), 50)
        XCTAssertEqual(
            kind {
                _ = try store.batch { batch in
                    _ = try batch.add(name: "New", publicKey: key(200), seed: try seed(1), method: .qr, now: t0)
                    _ = try batch.add(name: "Dup", publicKey: key(1), seed: try seed(1), method: .qr, now: t0)
                }
            }, .alreadyExists)
        XCTAssertEqual(try store.count(), 50, "nothing of a failed batch is kept")
    }

    func testSwappedAndForeignRecordsFailAuthentication() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Me")
        let path1 = directory + "/one.db", path2 = directory + "/two.db"
        var a: Int64 = 0, b: Int64 = 0
        do {
            let one = try ContactStore(path: path1, identity: identity)
            a = try one.add(name: "A", publicKey: key(1), seed: try seed(1), method: .qr, now: t0)
            b = try one.add(name: "B", publicKey: key(2), seed: try seed(2), method: .qr, now: t0)
            let two = try ContactStore(path: path2, identity: identity)
            _ = try two.add(name: "X", publicKey: key(3), seed: try seed(3), method: .qr, now: t0)
        }
        let db1 = try Database(path: path1), db2 = try Database(path: path2)
        let recordA = try db1.query("SELECT record FROM contacts WHERE id = ?", [.integer(a)])[0][0]
        let recordB = try db1.query("SELECT record FROM contacts WHERE id = ?", [.integer(b)])[0][0]
        // Swap rows inside one store, and move one row into another store
        // under the same contacts key.
        try db1.run("UPDATE contacts SET record = ? WHERE id = ?", [recordB, .integer(a)])
        try db1.run("UPDATE contacts SET record = ? WHERE id = ?", [recordA, .integer(b)])
        try db2.run("UPDATE contacts SET record = ? WHERE id = 1", [recordA])
        let one = try ContactStore(path: path1, identity: identity)
        let two = try ContactStore(path: path2, identity: identity)
        XCTAssertEqual(kind { _ = try one.contact(id: a) }, .authenticationFailed)
        XCTAssertEqual(kind { _ = try one.contact(id: b) }, .authenticationFailed)
        XCTAssertEqual(kind { _ = try one.list() }, .authenticationFailed)
        XCTAssertEqual(kind { _ = try two.contact(id: 1) }, .authenticationFailed)
        XCTAssertEqual(kind { try one.useWindow(id: a, window: 5) }, .authenticationFailed)
    }

    func testACopiedStoreReadsContactsButNotDeviceSecrets() throws {
        let secrets = MemorySecretStore()
        let identity = try Identity.create(store: secrets, name: "Me")
        let path = directory + "/c.db"
        let id: Int64
        do {
            let store = try ContactStore(path: path, identity: identity)
            id = try store.add(name: "A", publicKey: key(1), seed: try seed(1), method: .qr, now: t0)
            XCTAssertEqual(kind { _ = try store.deviceSecrets(id: id) }, .notFound)
            try store.setDeviceSecrets(id: id, mine: try seed(7), theirs: try seed(8))
            let pair = try store.deviceSecrets(id: id)
            XCTAssertTrue(pair.mine.constantTimeEquals(try seed(7)))
            XCTAssertTrue(pair.theirs.constantTimeEquals(try seed(8)))
        }
        // A new device: the identity and contacts key travel, the device key does not.
        let newDevice = MemorySecretStore()
        for name in secrets.names where name != ContactStore.deviceKeyItem {
            try newDevice.put(name, bytes: try XCTUnwrap(try stored(secrets, name)))
        }
        let moved = try ContactStore(path: path, identity: try Identity.load(store: newDevice))
        XCTAssertEqual(try moved.contact(id: id).name, "A")
        XCTAssertEqual(kind { _ = try moved.deviceSecrets(id: id) }, .authenticationFailed)
    }

    func testPhotosAndCascadingDelete() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Me")
        let store = try ContactStore(path: directory + "/c.db", identity: identity)
        let id = try store.add(name: "A", publicKey: key(1), seed: try seed(1), method: .qr, now: t0)
        var rng = SystemRandom()
        let photo = rng.bytes(100 * 1024)
        try store.setPhoto(id: id, photo: photo, filename: "me.jpg")
        let read = try store.photo(id: id)
        XCTAssertEqual(read.photo, photo)
        XCTAssertEqual(read.filename, "me.jpg")
        XCTAssertEqual(kind { try store.setPhoto(id: id, photo: rng.bytes(ContactStore.maxPhotoBytes + 1), filename: "x") }, .invalidArgument)
        try store.setDeviceSecrets(id: id, mine: try seed(7), theirs: try seed(8))
        try store.delete(id: id)
        XCTAssertEqual(kind { _ = try store.photo(id: id) }, .notFound)
        XCTAssertEqual(kind { _ = try store.deviceSecrets(id: id) }, .notFound)
        let other = try store.add(name: "B", publicKey: key(2), seed: try seed(2), method: .qr, now: t0)
        try store.setPhoto(id: other, photo: [1, 2, 3], filename: "b.png")
        try store.setPhoto(id: other, photo: [], filename: "")
        XCTAssertEqual(kind { _ = try store.photo(id: other) }, .notFound)
        XCTAssertTrue(try store.integrityCheck())
    }

    func testUnknownFieldsSurviveDecodeAndUpdate() throws {
        var contact = Contact(
            id: 1, name: "A", fingerprint: Fingerprint.of(publicKey: key(1)), publicKey: key(1), state: .verified,
            degradationAcknowledged: false, exchangeMethod: .qr, createdAt: t0, verifiedAt: t0, lastWindow: 9, note: "n")
        contact.unknownFields = [RecordField(tag: 200, value: [1, 2, 3])]
        let record = try ContactRecord.encode(contact, seed: try seed(1))
        let decoded = try record.withBytes { try ContactRecord.decode($0, id: 1) }
        XCTAssertEqual(decoded, contact)
        XCTAssertEqual(decoded.unknownFields, [RecordField(tag: 200, value: [1, 2, 3])])
        // A record whose key does not match its fingerprint is corrupt.
        contact.fingerprint = "0000000000000000"
        let bad = try ContactRecord.encode(contact, seed: try seed(1))
        XCTAssertEqual(kind { _ = try bad.withBytes { try ContactRecord.decode($0, id: 1) } }, .corruptData)
    }

    func testWrongIdentityAndNonDatabaseFilesAreRefusedUnchanged() throws {
        let path = directory + "/c.db"
        let me = try Identity.create(store: MemorySecretStore(), name: "Me")
        do { _ = try ContactStore(path: path, identity: me) }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let other = try Identity.create(store: MemorySecretStore(), name: "Other")
        XCTAssertEqual(kind { _ = try ContactStore(path: path, identity: other) }, .wrongIdentity)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), before)
        let junk = directory + "/junk"
        let bytes = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try bytes.write(to: URL(fileURLWithPath: junk))
        XCTAssertEqual(kind { _ = try ContactStore(path: junk, identity: me) }, .database)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: junk)), bytes)
    }

    func testATruncatedStoreGivesADatabaseErrorNotACrash() throws {
        let path = directory + "/c.db"
        let me = try Identity.create(store: MemorySecretStore(), name: "Me")
        do {
            let store = try ContactStore(path: path, identity: me)
            _ = try store.batch { batch in
                for n in 1...200 {
                    _ = try batch.add(name: "C\(n)", publicKey: key(UInt8(n)), seed: try seed(1), method: .qr, now: t0, note: String(repeating: "n", count: 500))
                }
            }
        }
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        let size = try handle.seekToEnd()
        try handle.truncate(atOffset: size / 2)
        try handle.close()
        // Opening may succeed (the first pages are intact); reading all of
        // it must then fail cleanly.
        XCTAssertEqual(
            kind {
                let store = try ContactStore(path: path, identity: me)
                _ = try store.list()
            }, .database)
    }

    func testTwoConnectionsRacingForAWindowHaveOneWinner() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Me")
        let path = directory + "/c.db"
        let stores = [try ContactStore(path: path, identity: identity), try ContactStore(path: path, identity: identity)]
        let id = try stores[0].add(name: "A", publicKey: key(1), seed: try seed(1), method: .qr, now: t0)
        for window in Int64(100)..<110 {
            let wins = Counter()
            DispatchQueue.concurrentPerform(iterations: 8) { i in
                if (try? stores[i % 2].useWindow(id: id, window: window)) != nil { wins.add() }
            }
            XCTAssertEqual(wins.value, 1, "window \(window)")
        }
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}

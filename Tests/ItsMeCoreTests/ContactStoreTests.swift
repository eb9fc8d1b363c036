import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

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

    // MARK: Helpers

    private func kind(_ body: () throws -> Void) -> ItsMeError.Kind? {
        do {
            try body()
            return nil
        } catch { return (error as? ItsMeError)?.kind }
    }

    private func itsMeError(_ body: () throws -> Void) -> ItsMeError? {
        do {
            try body()
            return nil
        } catch { return error as? ItsMeError }
    }

    /// Fixed keys and seeds, for tests that need many contacts.
    private func key(_ n: UInt8) -> [UInt8] { SHA256.hash([n, 1]) }
    private func seed(_ n: UInt8) throws -> SecretBytes { try SecretBytes(copying: SHA256.hash([n, 2])) }

    /// A real Ed25519 identity key, from a random seed.
    private func randomKey() throws -> [UInt8] {
        var rng = SystemRandom()
        let seed = try SecretBytes(randomCount: Ed25519.seedCount, using: &rng)
        return try Ed25519.keyPair(seed: seed).publicKey
    }

    private func randomSeed() throws -> SecretBytes {
        var rng = SystemRandom()
        return try SecretBytes(randomCount: ContactRecord.seedCount, using: &rng)
    }

    /// The secret store of the last identity `newIdentity` made, to open a
    /// second handle with a freshly loaded identity.
    private var lastIdentityStore: (any SecretStore)?

    private func newIdentity(_ name: String = "Me", remember: Bool = true) throws -> Identity {
        let identity = try Identity.create(store: MemorySecretStore(), name: name)
        if remember { lastIdentityStore = identity.store }
        return identity
    }

    private func bytes(of path: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        Data(haystack).range(of: Data(needle)) != nil
    }

    /// The database file and whichever of its journal files exist.
    private func storeFiles(_ path: String) -> [String] {
        [path, path + "-wal", path + "-shm", path + "-journal"].filter { FileManager.default.fileExists(atPath: $0) }
    }

    private func record(_ db: Database, _ id: Int64) throws -> [UInt8] {
        guard case .blob(let b) = try db.query("SELECT record FROM contacts WHERE id = ?", [.integer(id)])[0][0] else {
            XCTFail("record \(id) is not a blob")
            return []
        }
        return b
    }

    private func rowCount(_ db: Database, _ table: String, _ id: Int64) throws -> Int64 {
        guard case .integer(let n) = try db.query("SELECT count(*) FROM \(table) WHERE contact_id = ?", [.integer(id)])[0][0]
        else { return -1 }
        return n
    }

    // MARK: 1. Round trips, lookups, ids

    func testAddAndReadBack() throws {
        let identity = try newIdentity()
        let store = try ContactStore(path: directory + "/c.db", identity: identity)
        let publicKey = try randomKey()
        let seedBytes = try randomSeed().unsafeExportedArray()
        let id = try store.add(
            name: "Alice Liddell", publicKey: publicKey, seed: try SecretBytes(copying: seedBytes), method: .bluetooth,
            now: t0, note: "met at the café")
        XCTAssertGreaterThan(id, 0)

        let c = try store.contact(id: id)
        XCTAssertEqual(c.id, id)
        XCTAssertEqual(c.name, "Alice Liddell")
        XCTAssertEqual(c.fingerprint, Fingerprint.of(publicKey: publicKey))
        XCTAssertEqual(c.fingerprint.count, 16)
        XCTAssertEqual(c.publicKey, publicKey)
        XCTAssertTrue(c.isAuthenticated)
        XCTAssertEqual(c.state, .unverified)
        XCTAssertFalse(c.degradationAcknowledged)
        XCTAssertEqual(c.exchangeMethod, .bluetooth)
        XCTAssertEqual(c.createdAt, t0)
        XCTAssertNil(c.verifiedAt)
        XCTAssertNil(c.lastWindow)
        XCTAssertEqual(c.note, "met at the café")
        XCTAssertEqual(c.unknownFields, [])
        XCTAssertEqual(try store.seed(id: id).unsafeExportedArray(), seedBytes)

        XCTAssertEqual(try store.contact(publicKey: publicKey), c)
        XCTAssertEqual(try store.contacts(fingerprint: c.fingerprint), [c])
        XCTAssertEqual(try store.contacts(fingerprint: c.fingerprint.lowercased()), [c])
        XCTAssertEqual(try store.contacts(fingerprint: Fingerprint.of(publicKey: try randomKey())), [])
        XCTAssertEqual(kind { _ = try store.contact(publicKey: try randomKey()) }, .notFound)
        XCTAssertEqual(try store.list(), [c])
        XCTAssertEqual(try store.count(), 1)
        XCTAssertFalse(String(describing: c).contains("Alice"), "a contact's description shows no name")

        // Every method, and a second contact with the default note.
        let other = try randomKey()
        let id2 = try store.add(name: "Bob", publicKey: other, seed: try randomSeed(), method: .realtime, now: 0)
        XCTAssertEqual(try store.contact(id: id2).note, "")
        XCTAssertEqual(try store.contact(id: id2).exchangeMethod, .realtime)
        XCTAssertEqual(try store.contact(id: id2).createdAt, 0)
        for method in [Contact.ExchangeMethod.qr, .invite] {
            let n = try store.add(name: "M", publicKey: try randomKey(), seed: try randomSeed(), method: method, now: t0)
            XCTAssertEqual(try store.contact(id: n).exchangeMethod, method)
        }
        XCTAssertEqual(try store.count(), 4)
        XCTAssertEqual(try store.list().map(\.id), try store.list().map(\.id).sorted())

        // The same data through a new handle.
        let reopened = try ContactStore(path: directory + "/c.db", identity: try Identity.load(store: identity.store))
        XCTAssertEqual(try reopened.contact(id: id), c)
        XCTAssertEqual(try reopened.seed(id: id).unsafeExportedArray(), seedBytes)
    }

    func testIdsIncreaseAndAreNeverReused() throws {
        let store = try ContactStore(path: directory + "/c.db", identity: try newIdentity())
        let a = try store.add(name: "A", publicKey: try randomKey(), seed: try randomSeed(), method: .qr, now: t0)
        let b = try store.add(name: "B", publicKey: try randomKey(), seed: try randomSeed(), method: .qr, now: t0)
        XCTAssertGreaterThan(b, a)
        try store.delete(id: b)
        XCTAssertEqual(kind { _ = try store.contact(id: b) }, .notFound)
        XCTAssertEqual(try store.count(), 1)
        let c = try store.add(name: "C", publicKey: try randomKey(), seed: try randomSeed(), method: .qr, now: t0)
        XCTAssertGreaterThan(c, b, "the deleted last id is not reused")
        // Also across handles.
        try store.delete(id: c)
        let again = try ContactStore(path: directory + "/c.db", identity: try Identity.load(store: try XCTUnwrap(lastIdentityStore)))
        let d = try again.add(name: "D", publicKey: try randomKey(), seed: try randomSeed(), method: .qr, now: t0)
        XCTAssertGreaterThan(d, c)
        XCTAssertEqual(try again.list().map(\.id), [a, d])
    }

    func testListPages() throws {
        let store = try ContactStore(path: directory + "/c.db", identity: try newIdentity())
        let ids = try (1...7).map { n in
            try store.add(name: "C\(n)", publicKey: key(UInt8(n)), seed: try seed(UInt8(n)), method: .qr, now: t0)
        }
        var pages: [[Int64]] = []
        var after: Int64 = 0
        while true {
            let page = try store.list(afterID: after, limit: 3)
            if page.isEmpty { break }
            pages.append(page.map(\.id))
            after = page.last!.id
        }
        XCTAssertEqual(pages, [Array(ids[0..<3]), Array(ids[3..<6]), [ids[6]]])
        XCTAssertEqual(try store.list(limit: 0), [])
        XCTAssertEqual(try store.list(limit: -1), [])
        XCTAssertEqual(try store.list(afterID: ids.last!), [])
    }

    // MARK: 2. Refusals

    func testDuplicateOwnAndMalformedKeysAreRefused() throws {
        let identity = try newIdentity()
        let store = try ContactStore(path: directory + "/c.db", identity: identity)
        let publicKey = try randomKey()
        let id = try store.add(name: "A", publicKey: publicKey, seed: try randomSeed(), method: .qr, now: t0)
        XCTAssertEqual(
            kind { _ = try store.add(name: "Again", publicKey: publicKey, seed: try randomSeed(), method: .qr, now: t0) },
            .alreadyExists)
        XCTAssertEqual(try store.contact(id: id).name, "A", "the first contact is kept")
        XCTAssertEqual(
            kind { _ = try store.add(name: "Me", publicKey: identity.publicKey, seed: try randomSeed(), method: .qr, now: t0) },
            .invalidKey)
        XCTAssertEqual(
            kind { _ = try store.add(name: "Short", publicKey: Array(publicKey.prefix(31)), seed: try randomSeed(), method: .qr, now: t0) },
            .invalidKey)
        XCTAssertEqual(
            kind { _ = try store.add(name: "Long", publicKey: publicKey + [0], seed: try randomSeed(), method: .qr, now: t0) },
            .invalidKey)
        XCTAssertEqual(
            kind { _ = try store.add(name: "Empty", publicKey: [], seed: try randomSeed(), method: .qr, now: t0) }, .invalidKey)
        XCTAssertEqual(try store.count(), 1)
    }

    func testInvalidArgumentsAreRefused() throws {
        let store = try ContactStore(path: directory + "/c.db", identity: try newIdentity())
        for bad in ["", String(repeating: "x", count: 129), "tab\there", "nul\u{0}", "line\nbreak", "bell\u{7}"] {
            XCTAssertEqual(
                kind { _ = try store.add(name: bad, publicKey: try randomKey(), seed: try randomSeed(), method: .qr, now: t0) },
                .invalidArgument, "name \(bad.debugDescription)")
            XCTAssertEqual(
                kind { _ = try store.addUnauthenticated(name: bad, fingerprint: "0123456789ABCDEF", seed: try randomSeed(), method: .qr, now: t0) },
                .invalidArgument, "name \(bad.debugDescription)")
        }
        let longNote = String(repeating: "n", count: Contact.maxNoteBytes + 1)
        XCTAssertEqual(longNote.utf8.count, 4097)
        XCTAssertEqual(
            kind { _ = try store.add(name: "A", publicKey: try randomKey(), seed: try randomSeed(), method: .qr, now: t0, note: longNote) },
            .invalidArgument)
        // Counted in bytes: 2049 two-byte characters are too many.
        XCTAssertEqual(
            kind { _ = try store.add(name: "A", publicKey: try randomKey(), seed: try randomSeed(), method: .qr, now: t0, note: String(repeating: "é", count: 2049)) },
            .invalidArgument)
        XCTAssertEqual(
            kind { _ = try store.add(name: "A", publicKey: try randomKey(), seed: try SecretBytes(count: 31), method: .qr, now: t0) },
            .invalidArgument)
        XCTAssertEqual(
            kind { _ = try store.add(name: "A", publicKey: try randomKey(), seed: try SecretBytes(count: 33), method: .qr, now: t0) },
            .invalidArgument)
        XCTAssertEqual(
            kind { _ = try store.add(name: "A", publicKey: try randomKey(), seed: try randomSeed(), method: .qr, now: -1) },
            .invalidArgument)
        XCTAssertEqual(
            kind { _ = try store.addUnauthenticated(name: "A", fingerprint: "0123456789ABCDEF", seed: try SecretBytes(count: 31), method: .qr, now: t0) },
            .invalidArgument)
        XCTAssertEqual(
            kind { _ = try store.addUnauthenticated(name: "A", fingerprint: "0123456789ABCDEF", seed: try randomSeed(), method: .qr, now: -1) },
            .invalidArgument)
        XCTAssertEqual(try store.count(), 0, "nothing refused was stored")

        // The limits themselves are accepted.
        let id = try store.add(
            name: String(repeating: "é", count: 64), publicKey: try randomKey(), seed: try randomSeed(), method: .qr, now: 0,
            note: String(repeating: "n", count: Contact.maxNoteBytes))
        XCTAssertEqual(try store.contact(id: id).note.utf8.count, 4096)
        XCTAssertEqual(try store.contact(id: id).name, String(repeating: "é", count: 64))
    }

    func testMissingIdsAreNotFound() throws {
        let store = try ContactStore(path: directory + "/c.db", identity: try newIdentity())
        let id = try store.add(name: "A", publicKey: try randomKey(), seed: try randomSeed(), method: .qr, now: t0)
        var ghost = try store.contact(id: id)
        ghost.id = id + 100
        for missing in [Int64(0), -1, id + 100] {
            ghost.id = missing
            XCTAssertEqual(kind { _ = try store.contact(id: missing) }, .notFound)
            XCTAssertEqual(kind { try store.delete(id: missing) }, .notFound)
            XCTAssertEqual(kind { try store.update(ghost) }, .notFound)
            XCTAssertEqual(kind { try store.useWindow(id: missing, window: 1) }, .notFound)
            XCTAssertEqual(kind { _ = try store.seed(id: missing) }, .notFound)
            XCTAssertEqual(kind { try store.setState(id: missing, .verified, acknowledged: false, now: t0) }, .notFound)
            XCTAssertEqual(kind { try store.setPhoto(id: missing, photo: [1], filename: "x") }, .notFound)
            XCTAssertEqual(kind { _ = try store.photo(id: missing) }, .notFound)
            XCTAssertEqual(kind { try store.setDeviceSecrets(id: missing, mine: try seed(1), theirs: try seed(2)) }, .notFound)
            XCTAssertEqual(kind { _ = try store.deviceSecrets(id: missing) }, .notFound)
        }
        try store.delete(id: id)
        XCTAssertEqual(kind { try store.delete(id: id) }, .notFound, "a second delete finds nothing")
        XCTAssertEqual(try store.count(), 0)
    }

    // MARK: 3. Unauthenticated (v5) contacts

    func testUnauthenticatedContactsNeverMergeWithKeyedOnes() throws {
        let store = try ContactStore(path: directory + "/c.db", identity: try newIdentity())
        let publicKey = try randomKey()
        let fingerprint = Fingerprint.of(publicKey: publicKey)

        // The unauthenticated one first, so that order by id alone would be wrong.
        let legacy = try store.addUnauthenticated(
            name: "Old Alice", fingerprint: fingerprint.lowercased(), seed: try seed(9), method: .invite, now: t0)
        let u = try store.contact(id: legacy)
        XCTAssertFalse(u.isAuthenticated)
        XCTAssertNil(u.publicKey)
        XCTAssertEqual(u.fingerprint, fingerprint, "stored as uppercase")
        XCTAssertEqual(u.name, "Old Alice")
        XCTAssertEqual(u.exchangeMethod, .invite)
        XCTAssertEqual(u.state, .unverified)
        XCTAssertTrue(try store.seed(id: legacy).constantTimeEquals(try seed(9)))
        XCTAssertEqual(kind { _ = try store.contact(publicKey: publicKey) }, .notFound)

        let keyed = try store.add(name: "Alice", publicKey: publicKey, seed: try seed(1), method: .qr, now: t0)
        XCTAssertNotEqual(keyed, legacy)
        XCTAssertEqual(try store.count(), 2, "the keyed contact does not replace the unauthenticated one")
        let found = try store.contacts(fingerprint: fingerprint)
        XCTAssertEqual(found.map(\.id), [keyed, legacy], "keyed first")
        XCTAssertEqual(found.map(\.isAuthenticated), [true, false])
        XCTAssertEqual(try store.contacts(fingerprint: fingerprint.lowercased()).map(\.id), [keyed, legacy])
        XCTAssertEqual(try store.contact(publicKey: publicKey).id, keyed)

        // A second unauthenticated one with that fingerprint is another contact too.
        let legacy2 = try store.addUnauthenticated(name: "Old Alice 2", fingerprint: fingerprint, seed: try seed(8), method: .qr, now: t0)
        XCTAssertEqual(try store.contacts(fingerprint: fingerprint).map(\.id), [keyed, legacy, legacy2])
        XCTAssertEqual(try store.count(), 3)
        // Deleting the keyed one leaves the others.
        try store.delete(id: keyed)
        XCTAssertEqual(try store.contacts(fingerprint: fingerprint).map(\.id), [legacy, legacy2])

        for bad in [
            "", "0123456789ABCDE", "0123456789ABCDEF0", "0123456789ABCDEG", "0123456789abcdeg", " 123456789ABCDEF",
            "01234567-9ABCDEF", "ÄÄÄÄÄÄÄÄ", "0123456789ABCDE\u{0}", "0x23456789ABCDEF",
        ] {
            XCTAssertEqual(
                kind { _ = try store.addUnauthenticated(name: "X", fingerprint: bad, seed: try randomSeed(), method: .qr, now: t0) },
                .invalidArgument, "fingerprint \(bad.debugDescription)")
            XCTAssertEqual(kind { _ = try store.contacts(fingerprint: bad) }, .invalidArgument, "fingerprint \(bad.debugDescription)")
        }
        XCTAssertEqual(try store.count(), 2)
    }

    // MARK: 4. Updates

    func testUpdateChangesOnlyTheEditableFields() throws {
        let store = try ContactStore(path: directory + "/c.db", identity: try newIdentity())
        let publicKey = try randomKey()
        let seedBytes = try randomSeed().unsafeExportedArray()
        let id = try store.add(
            name: "Alice", publicKey: publicKey, seed: try SecretBytes(copying: seedBytes), method: .bluetooth, now: t0, note: "n")
        try store.useWindow(id: id, window: 42)
        let before = try store.contact(id: id)

        var changed = before
        changed.name = "Alice B."
        changed.note = "new note"
        changed.state = .degraded
        changed.degradationAcknowledged = true
        changed.verifiedAt = t0 + 5
        // Fields that update must not change, even if the caller alters them.
        changed.createdAt = 7
        changed.exchangeMethod = .invite
        changed.lastWindow = 1
        changed.fingerprint = "0000000000000000"
        changed.publicKey = try randomKey()
        try store.update(changed)

        let after = try store.contact(id: id)
        XCTAssertEqual(after.name, "Alice B.")
        XCTAssertEqual(after.note, "new note")
        XCTAssertEqual(after.state, .degraded)
        XCTAssertTrue(after.degradationAcknowledged)
        XCTAssertEqual(after.verifiedAt, t0 + 5)
        XCTAssertEqual(after.createdAt, t0)
        XCTAssertEqual(after.exchangeMethod, .bluetooth)
        XCTAssertEqual(after.lastWindow, 42)
        XCTAssertEqual(after.fingerprint, Fingerprint.of(publicKey: publicKey))
        XCTAssertEqual(after.publicKey, publicKey)
        XCTAssertEqual(try store.seed(id: id).unsafeExportedArray(), seedBytes)
        XCTAssertEqual(try store.contact(publicKey: publicKey).id, id, "still found by its key")
        XCTAssertEqual(try store.contacts(fingerprint: before.fingerprint).map(\.id), [id])

        // Clearing optional fields.
        var cleared = after
        cleared.verifiedAt = nil
        cleared.note = ""
        cleared.state = .unverified
        cleared.degradationAcknowledged = false
        try store.update(cleared)
        XCTAssertNil(try store.contact(id: id).verifiedAt)
        XCTAssertEqual(try store.contact(id: id).note, "")
        XCTAssertEqual(try store.contact(id: id).state, .unverified)

        // Invalid values change nothing.
        var bad = after
        bad.name = ""
        XCTAssertEqual(kind { try store.update(bad) }, .invalidArgument)
        bad = after
        bad.note = String(repeating: "x", count: Contact.maxNoteBytes + 1)
        XCTAssertEqual(kind { try store.update(bad) }, .invalidArgument)
        XCTAssertEqual(try store.contact(id: id).name, "Alice B.")
        XCTAssertEqual(try store.contact(id: id).note, "")
    }

    func testSetState() throws {
        let store = try ContactStore(path: directory + "/c.db", identity: try newIdentity())
        let id = try store.add(name: "A", publicKey: try randomKey(), seed: try seed(1), method: .qr, now: t0)
        try store.setState(id: id, .verified, acknowledged: false, now: t0 + 10)
        var c = try store.contact(id: id)
        XCTAssertEqual(c.state, .verified)
        XCTAssertEqual(c.verifiedAt, t0 + 10)
        XCTAssertFalse(c.degradationAcknowledged)

        try store.setState(id: id, .degraded, acknowledged: false, now: t0 + 20)
        c = try store.contact(id: id)
        XCTAssertEqual(c.state, .degraded)
        XCTAssertFalse(c.degradationAcknowledged)
        XCTAssertEqual(c.verifiedAt, t0 + 10, "only verifying sets the verification time")

        try store.setState(id: id, .degraded, acknowledged: true, now: t0 + 30)
        c = try store.contact(id: id)
        XCTAssertEqual(c.state, .degraded)
        XCTAssertTrue(c.degradationAcknowledged)

        // Acknowledgement only means something for a degraded contact.
        try store.setState(id: id, .verified, acknowledged: true, now: t0 + 40)
        c = try store.contact(id: id)
        XCTAssertEqual(c.state, .verified)
        XCTAssertFalse(c.degradationAcknowledged)
        XCTAssertEqual(c.verifiedAt, t0 + 40)

        XCTAssertEqual(kind { try store.setState(id: id, .verified, acknowledged: false, now: -1) }, .invalidArgument)
        XCTAssertEqual(try store.contact(id: id).verifiedAt, t0 + 40)
        XCTAssertTrue(try store.seed(id: id).constantTimeEquals(try seed(1)))
    }

    // MARK: 5. Voice-verification windows

    func testWindowsOnlyMoveForward() throws {
        let store = try ContactStore(path: directory + "/c.db", identity: try newIdentity())
        let id = try store.add(name: "A", publicKey: try randomKey(), seed: try seed(1), method: .qr, now: t0)
        let other = try store.add(name: "B", publicKey: try randomKey(), seed: try seed(2), method: .qr, now: t0)
        XCTAssertEqual(kind { try store.useWindow(id: id, window: -1) }, .invalidArgument)
        try store.useWindow(id: id, window: 100)
        XCTAssertEqual(try store.contact(id: id).lastWindow, 100)
        XCTAssertEqual(kind { try store.useWindow(id: id, window: 100) }, .windowUsed)
        XCTAssertEqual(kind { try store.useWindow(id: id, window: 99) }, .windowUsed)
        XCTAssertEqual(kind { try store.useWindow(id: id, window: 0) }, .windowUsed)
        XCTAssertEqual(try store.contact(id: id).lastWindow, 100)
        try store.useWindow(id: id, window: 101)
        XCTAssertEqual(try store.contact(id: id).lastWindow, 101)
        try store.useWindow(id: id, window: 5000)
        XCTAssertEqual(try store.contact(id: id).lastWindow, 5000)
        XCTAssertEqual(kind { try store.useWindow(id: id, window: 4999) }, .windowUsed)
        XCTAssertEqual(kind { try store.useWindow(id: id, window: -5) }, .invalidArgument)
        // Windows are per contact, and window 0 is usable.
        XCTAssertNil(try store.contact(id: other).lastWindow)
        try store.useWindow(id: other, window: 0)
        XCTAssertEqual(try store.contact(id: other).lastWindow, 0)
        XCTAssertEqual(kind { try store.useWindow(id: other, window: 0) }, .windowUsed)
        // The seed is kept across window updates.
        XCTAssertTrue(try store.seed(id: id).constantTimeEquals(try seed(1)))
        // And a reopened store remembers.
        let reopened = try ContactStore(path: directory + "/c.db", identity: try Identity.load(store: try XCTUnwrap(lastIdentityStore)))
        XCTAssertEqual(kind { try reopened.useWindow(id: id, window: 5000) }, .windowUsed)
    }

    /// Several SQLite connections to one file racing for one window, from
    /// threads: exactly one wins and every other gets `.windowUsed`. (The
    /// same race between processes is covered by the Python binding's tests,
    /// which can fork.)
    func testConnectionsRacingForAWindowHaveOneWinner() throws {
        let identity = try newIdentity()
        let path = directory + "/c.db"
        for handles in [2, 8] {
            let stores = try (0..<handles).map { _ in try ContactStore(path: path, identity: identity) }
            let id = try stores[0].add(name: "A", publicKey: try randomKey(), seed: try seed(1), method: .qr, now: t0)
            for window in Int64(100)..<120 {
                let wins = Counter()
                let failures = Log<String>()
                DispatchQueue.concurrentPerform(iterations: 8) { i in
                    do {
                        try stores[i % handles].useWindow(id: id, window: window)
                        wins.add()
                    } catch let error as ItsMeError where error.kind == .windowUsed {
                    } catch {
                        failures.append("\(error)")
                    }
                }
                XCTAssertEqual(wins.value, 1, "\(handles) handles, window \(window)")
                XCTAssertEqual(failures.values, [], "losers only see windowUsed")
                XCTAssertEqual(try stores[handles - 1].contact(id: id).lastWindow, window)
            }
        }
    }

    // MARK: 6. Nothing readable at rest

    func testAPhotoFilenameFollowsTheProfileRecordsRule() throws {
        let store = try ContactStore(path: directory + "/photo-names.db", identity: try newIdentity())
        let id = try store.add(name: "A", publicKey: key(1), seed: try seed(1), method: .qr, now: t0)
        for bad in ["../../etc/passwd", "a/b", ".", "..", "a\\b", "bell\u{7}.jpg", String(repeating: "x", count: 256)] {
            XCTAssertEqual(kind { try store.setPhoto(id: id, photo: [1, 2, 3], filename: bad) }, .invalidArgument, bad)
        }
        try store.setPhoto(id: id, photo: [1, 2, 3], filename: "..photo.jpg")
        try store.setPhoto(id: id, photo: [1, 2, 3], filename: String(repeating: "é", count: 127))
        XCTAssertEqual(try store.photo(id: id).filename, String(repeating: "é", count: 127))
    }

    func testTheStoreAndItsLogsAreReadableByTheirOwnerOnly() throws {
        func mode(_ path: String) throws -> Int {
            (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
        }
        let identity = try newIdentity()
        let path = directory + "/modes.db"
        let old = umask(0)
        defer { umask(old) }
        do {
            let store = try ContactStore(path: path, identity: identity)
            _ = try store.add(name: "A", publicKey: key(1), seed: try seed(1), method: .qr, now: t0)
            for file in [path, path + "-wal", path + "-shm"] {
                XCTAssertEqual(try mode(file), 0o600, "\(file), created under umask 0")
            }
        }
        // A store left readable by others (an older version, a copy) is
        // narrowed when it is opened, its logs with it.
        for file in [path, path + "-wal", path + "-shm"] where FileManager.default.fileExists(atPath: file) {
            XCTAssertEqual(chmod(file, 0o644), 0)
        }
        let reopened = try ContactStore(path: path, identity: identity)
        XCTAssertEqual(try reopened.count(), 1)
        for file in [path, path + "-wal", path + "-shm"] where FileManager.default.fileExists(atPath: file) {
            XCTAssertEqual(try mode(file), 0o600, file)
        }
        // A FIFO in the store's place is refused at once, not waited on.
        let fifo = directory + "/fifo.db"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        XCTAssertEqual(kind { _ = try ContactStore(path: fifo, identity: identity) }, .database)
    }

    func testNoPlaintextInTheFilesWhileOpenAndAfterClose() throws {
        let identity = try newIdentity()
        let path = directory + "/c.db"
        let name = "Zebediah Quonset-Marlowe"
        let note = "Prefers calls after 6pm; sister is Philippa Quonset-Marlowe"
        let publicKey = try randomKey()
        let fingerprint = Fingerprint.of(publicKey: publicKey)
        var rng = SystemRandom()
        let seedBytes = rng.bytes(ContactRecord.seedCount)
        let legacyName = "Ottoline Fairweather-Vane"
        let legacyFingerprint = Hex.encodeUpper(rng.bytes(8))
        let legacySeed = rng.bytes(ContactRecord.seedCount)
        let mine = rng.bytes(16), theirs = rng.bytes(16)
        let photo = rng.bytes(2048)
        let photoName = "zebediah-portrait.jpg"

        let needles: [(String, [UInt8])] = [
            ("name", Array(name.utf8)),
            ("note", Array(note.utf8)),
            ("fingerprint text", Array(fingerprint.utf8)),
            ("fingerprint text, lowercase", Array(fingerprint.lowercased().utf8)),
            ("fingerprint bytes", try XCTUnwrap(Hex.decode(fingerprint))),
            ("public key", publicKey),
            ("seed", seedBytes),
            ("unauthenticated name", Array(legacyName.utf8)),
            ("unauthenticated fingerprint text", Array(legacyFingerprint.utf8)),
            ("unauthenticated fingerprint bytes", try XCTUnwrap(Hex.decode(legacyFingerprint))),
            ("unauthenticated seed", legacySeed),
            ("my device secret", mine),
            ("their device secret", theirs),
            ("photo", Array(photo.prefix(64))),
            ("photo filename", Array(photoName.utf8)),
        ]
        func checkFiles(_ when: String) throws {
            let files = storeFiles(path)
            XCTAssertTrue(files.contains(path))
            for file in files {
                let data = try bytes(of: file)
                for (what, needle) in needles {
                    XCTAssertFalse(contains(data, needle), "\(what) found in \(file) (\(when))")
                }
            }
        }

        var sealed: [UInt8] = []
        do {
            let store = try ContactStore(path: path, identity: identity)
            let id = try store.add(
                name: name, publicKey: publicKey, seed: try SecretBytes(copying: seedBytes), method: .qr, now: t0, note: note)
            let legacy = try store.addUnauthenticated(
                name: legacyName, fingerprint: legacyFingerprint, seed: try SecretBytes(copying: legacySeed), method: .qr, now: t0)
            try store.setDeviceSecrets(id: id, mine: try SecretBytes(copying: mine), theirs: try SecretBytes(copying: theirs))
            try store.setPhoto(id: id, photo: photo, filename: photoName)
            try store.setState(id: id, .verified, acknowledged: false, now: t0 + 1)
            try store.useWindow(id: id, window: 7)
            try store.setState(id: legacy, .verified, acknowledged: false, now: t0 + 1)
            XCTAssertEqual(try store.contact(id: id).name, name)

            XCTAssertTrue(FileManager.default.fileExists(atPath: path + "-wal"), "the store is in WAL mode")
            sealed = try record(try Database(path: path), id)
            // The scan would find a record if it were there: the sealed bytes are.
            XCTAssertTrue(
                try storeFiles(path).contains { contains(try bytes(of: $0), Array(sealed.suffix(32))) },
                "the sealed record is somewhere in the files")
            try checkFiles("store open")
        }
        try checkFiles("store closed")
        XCTAssertTrue(try storeFiles(path).contains { contains(try bytes(of: $0), Array(sealed.suffix(32))) })
    }

    // MARK: 7. Files that are not this identity's store

    func testAnotherIdentitysStoreIsRefusedUnchanged() throws {
        let path = directory + "/c.db"
        let a = try newIdentity("A")
        let id: Int64
        do {
            let store = try ContactStore(path: path, identity: a)
            id = try store.add(name: "Friend", publicKey: try randomKey(), seed: try seed(1), method: .qr, now: t0)
        }
        let before = try bytes(of: path)
        let filesBefore = storeFiles(path)
        let b = try newIdentity("B", remember: false)
        let error = itsMeError { _ = try ContactStore(path: path, identity: b) }
        XCTAssertEqual(error?.kind, .wrongIdentity)
        XCTAssertTrue(try bytes(of: path) == before, "the refused file is unchanged")
        XCTAssertEqual(storeFiles(path), filesBefore)
        // Also while A has it open.
        do {
            let open = try ContactStore(path: path, identity: a)
            XCTAssertEqual(kind { _ = try ContactStore(path: path, identity: b) }, .wrongIdentity)
            XCTAssertEqual(try open.contact(id: id).name, "Friend")
        }
        XCTAssertTrue(try bytes(of: path) == before)
        XCTAssertEqual(try ContactStore(path: path, identity: a).contact(id: id).name, "Friend")
    }

    func testFilesThatAreNotSQLiteAreRefusedUnchanged() throws {
        let me = try newIdentity()
        var rng = SystemRandom()
        let candidates: [(String, [UInt8])] = [
            ("random", rng.bytes(4096)),
            ("text", Array(String(repeating: "This is a text file, not a database.\n", count: 120).utf8)),
            ("short text", Array("hello\n".utf8)),
            ("almost SQLite", Array("SQLite format 2\u{0}".utf8) + rng.bytes(4080)),
        ]
        for (what, content) in candidates {
            let path = directory + "/\(what).db"
            try Data(content).write(to: URL(fileURLWithPath: path))
            let error = itsMeError { _ = try ContactStore(path: path, identity: me) }
            XCTAssertEqual(error?.kind, .database, what)
            XCTAssertTrue(
                error?.message.contains("not a SQLite database") ?? false, "\(what): \(error.map(String.init(describing:)) ?? "no error")")
            XCTAssertTrue(error?.message.contains(path) ?? false, "\(what): the message names the file")
            XCTAssertTrue(try bytes(of: path) == content, "\(what) is not modified")
            XCTAssertEqual(storeFiles(path), [path], "\(what): no journal files left behind")
        }
    }

    /// Another program's SQLite database at the path is refused, not adopted
    /// (no tables added, not switched to WAL).
    func testAnotherProgramsSQLiteDatabaseIsRefusedUnchanged() throws {
        let path = directory + "/other.db"
        do {
            let db = try Database(path: path)
            try db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('keep me')")
        }
        let before = try bytes(of: path)
        let error = itsMeError { _ = try ContactStore(path: path, identity: try newIdentity()) }
        XCTAssertEqual(error?.kind, .database, "\(error.map(String.init(describing:)) ?? "opened")")
        XCTAssertTrue(try bytes(of: path) == before, "the other database is not modified")
        XCTAssertEqual(storeFiles(path), [path])
        // An empty file is a new, empty store.
        let empty = directory + "/empty.db"
        FileManager.default.createFile(atPath: empty, contents: Data())
        XCTAssertEqual(try ContactStore(path: empty, identity: try newIdentity()).count(), 0)
    }

    func testATruncatedStoreGivesADatabaseErrorNotACrash() throws {
        let path = directory + "/c.db"
        let me = try newIdentity()
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

    // MARK: 8. Tampering

    func testAFlippedByteFailsAuthenticationEverywhere() throws {
        let identity = try newIdentity()
        let path = directory + "/c.db"
        let publicKey = try randomKey()
        let id: Int64, other: Int64
        do {
            let store = try ContactStore(path: path, identity: identity)
            other = try store.add(name: "Other", publicKey: try randomKey(), seed: try seed(2), method: .qr, now: t0)
            id = try store.add(name: "Target", publicKey: publicKey, seed: try seed(1), method: .qr, now: t0)
        }
        let fingerprint = Fingerprint.of(publicKey: publicKey)
        let db = try Database(path: path)
        let original = try record(db, id)
        XCTAssertEqual(original.count, AEAD.nonceCount + (try contentLength(identity, path, id)) + AEAD.tagCount)
        // The nonce, the first ciphertext byte, one in the middle, the last tag byte.
        for offset in [0, AEAD.nonceCount, original.count / 2, original.count - 1] {
            var tampered = original
            tampered[offset] ^= 0x01
            try db.run("UPDATE contacts SET record = ? WHERE id = ?", [.blob(tampered), .integer(id)])
            let store = try ContactStore(path: path, identity: identity)
            let error = itsMeError { _ = try store.contact(id: id) }
            XCTAssertEqual(error?.kind, .authenticationFailed, "offset \(offset)")
            XCTAssertTrue(error?.message.contains("\(id)") ?? false, "the failure names the record: \(String(describing: error))")
            XCTAssertEqual(kind { _ = try store.list() }, .authenticationFailed, "offset \(offset): reported, not skipped")
            XCTAssertEqual(kind { _ = try store.list(afterID: other) }, .authenticationFailed)
            XCTAssertEqual(try store.list(limit: 1).map(\.id), [other], "records before it still read")
            XCTAssertEqual(kind { _ = try store.contact(publicKey: publicKey) }, .authenticationFailed)
            XCTAssertEqual(kind { _ = try store.contacts(fingerprint: fingerprint) }, .authenticationFailed)
            XCTAssertEqual(kind { _ = try store.seed(id: id) }, .authenticationFailed)
            XCTAssertEqual(kind { try store.useWindow(id: id, window: 1) }, .authenticationFailed)
            XCTAssertEqual(kind { try store.setState(id: id, .verified, acknowledged: false, now: t0) }, .authenticationFailed)
            var edited = try store.contact(id: other)
            edited.id = id
            XCTAssertEqual(kind { try store.update(edited) }, .authenticationFailed)
            XCTAssertEqual(try record(db, id), tampered, "a failed update writes nothing")
            XCTAssertEqual(try store.count(), 2)
        }
        // Restored, it reads again: the failures came from the flipped bytes.
        try db.run("UPDATE contacts SET record = ? WHERE id = ?", [.blob(original), .integer(id)])
        let store = try ContactStore(path: path, identity: identity)
        XCTAssertEqual(try store.contact(id: id).name, "Target")
        XCTAssertEqual(try store.list().count, 2)
        // Truncated records, down to nothing.
        for count in [0, 1, AEAD.nonceCount, AEAD.nonceCount + AEAD.tagCount - 1, AEAD.nonceCount + AEAD.tagCount] {
            try db.run("UPDATE contacts SET record = ? WHERE id = ?", [.blob(Array(original.prefix(count))), .integer(id)])
            let k = kind { _ = try store.contact(id: id) }
            XCTAssertTrue(k == .authenticationFailed || k == .corruptData, "\(count) bytes: \(String(describing: k))")
        }
    }

    /// Plaintext size of a sealed record, by opening it with the identity's
    /// contacts key and the documented associated data.
    private func contentLength(_ identity: Identity, _ path: String, _ id: Int64) throws -> Int {
        let plain = try openRecord(identity, path, id)
        return plain.count
    }

    private func storeID(_ path: String) throws -> [UInt8] {
        guard case .blob(let id) = try Database(path: path).query("SELECT value FROM meta WHERE name = 'store_id'")[0][0]
        else { throw ItsMeError(.corruptData, "no store id") }
        return id
    }

    /// The associated data of docs/STORAGE.md for a contacts row.
    private func contactAAD(_ path: String, _ id: Int64) throws -> [UInt8] {
        Array("itsme-contact-record-v1".utf8) + (try storeID(path)) + [1] + ContactRecord.bigEndian(id) + [1]
    }

    private func openRecord(_ identity: Identity, _ path: String, _ id: Int64) throws -> SecretBytes {
        let sealed = try record(try Database(path: path), id)
        return try AEAD.open(
            .aes256GCM, key: identity.contactsKey, nonce: Array(sealed.prefix(AEAD.nonceCount)),
            ciphertext: Array(sealed.dropFirst(AEAD.nonceCount)), aad: try contactAAD(path, id))
    }

    private func sealRecord(_ identity: Identity, _ path: String, _ id: Int64, _ plain: borrowing SecretBytes) throws -> [UInt8] {
        var rng = SystemRandom()
        let nonce = rng.bytes(AEAD.nonceCount)
        return nonce + (try AEAD.seal(.aes256GCM, key: identity.contactsKey, nonce: nonce, plaintext: plain, aad: try contactAAD(path, id)))
    }

    func testSwappedAndForeignRecordsFailAuthentication() throws {
        let identity = try newIdentity()
        let path1 = directory + "/one.db", path2 = directory + "/two.db"
        var a: Int64 = 0, b: Int64 = 0, x: Int64 = 0
        do {
            let one = try ContactStore(path: path1, identity: identity)
            a = try one.add(name: "A", publicKey: key(1), seed: try seed(1), method: .qr, now: t0)
            b = try one.add(name: "B", publicKey: key(2), seed: try seed(2), method: .qr, now: t0)
            try one.setPhoto(id: a, photo: [1, 2, 3], filename: "a.png")
            try one.setDeviceSecrets(id: a, mine: try seed(5), theirs: try seed(6))
            try one.setPhoto(id: b, photo: [4, 5, 6], filename: "b.png")
            let two = try ContactStore(path: path2, identity: identity)
            x = try two.add(name: "X", publicKey: key(3), seed: try seed(3), method: .qr, now: t0)
            try two.setPhoto(id: x, photo: [7], filename: "x.png")
            XCTAssertEqual(x, a, "the same row id in both stores")
        }
        let db1 = try Database(path: path1), db2 = try Database(path: path2)
        let recordA = try record(db1, a), recordB = try record(db1, b)
        // (b) Swap two rows inside one store.
        try db1.run("UPDATE contacts SET record = ? WHERE id = ?", [.blob(recordB), .integer(a)])
        try db1.run("UPDATE contacts SET record = ? WHERE id = ?", [.blob(recordA), .integer(b)])
        // (c) Move a row into the same row id of another store of the same identity.
        try db2.run("UPDATE contacts SET record = ? WHERE id = ?", [.blob(recordA), .integer(x)])
        // Photos swapped between contacts, and a photo moved into device secrets.
        let photoA = try db1.query("SELECT record FROM photos WHERE contact_id = ?", [.integer(a)])[0][0]
        let photoB = try db1.query("SELECT record FROM photos WHERE contact_id = ?", [.integer(b)])[0][0]
        try db1.run("UPDATE photos SET record = ? WHERE contact_id = ?", [photoB, .integer(a)])
        try db1.run("UPDATE photos SET record = ? WHERE contact_id = ?", [photoA, .integer(b)])
        try db2.run("UPDATE photos SET record = ? WHERE contact_id = ?", [photoA, .integer(x)])

        let one = try ContactStore(path: path1, identity: identity)
        let two = try ContactStore(path: path2, identity: identity)
        XCTAssertEqual(kind { _ = try one.contact(id: a) }, .authenticationFailed)
        XCTAssertEqual(kind { _ = try one.contact(id: b) }, .authenticationFailed)
        XCTAssertEqual(kind { _ = try one.list() }, .authenticationFailed)
        XCTAssertEqual(kind { _ = try one.seed(id: b) }, .authenticationFailed)
        XCTAssertEqual(kind { _ = try one.contact(publicKey: key(1)) }, .authenticationFailed)
        XCTAssertEqual(kind { try one.useWindow(id: a, window: 5) }, .authenticationFailed)
        XCTAssertEqual(kind { _ = try two.contact(id: x) }, .authenticationFailed)
        XCTAssertEqual(kind { _ = try two.list() }, .authenticationFailed)
        XCTAssertEqual(kind { _ = try one.photo(id: a) }, .authenticationFailed)
        XCTAssertEqual(kind { _ = try one.photo(id: b) }, .authenticationFailed)
        XCTAssertEqual(kind { _ = try two.photo(id: x) }, .authenticationFailed)
        XCTAssertEqual(try one.deviceSecrets(id: a).mine.unsafeExportedArray(), try seed(5).unsafeExportedArray(), "untouched rows still read")
        try db1.run("UPDATE device_secrets SET record = ? WHERE contact_id = ?", [photoA, .integer(a)])
        XCTAssertEqual(kind { _ = try one.deviceSecrets(id: a) }, .authenticationFailed)
    }

    /// The lookup columns are not sealed: a swapped index must not make a
    /// lookup by key or fingerprint return another contact.
    func testSwappedIndexColumnsDoNotRedirectLookups() throws {
        let identity = try newIdentity()
        let path = directory + "/c.db"
        let keyA = try randomKey(), keyB = try randomKey()
        let a: Int64, b: Int64
        do {
            let store = try ContactStore(path: path, identity: identity)
            a = try store.add(name: "A", publicKey: keyA, seed: try seed(1), method: .qr, now: t0)
            b = try store.add(name: "B", publicKey: keyB, seed: try seed(2), method: .qr, now: t0)
        }
        let db = try Database(path: path)
        let rows = try db.query("SELECT id, fingerprint_index, key_index FROM contacts ORDER BY id")
        XCTAssertEqual(rows.map { $0[0] }, [.integer(a), .integer(b)])
        try db.execute("BEGIN")
        try db.run("UPDATE contacts SET key_index = NULL WHERE id = ?", [.integer(a)])
        try db.run("UPDATE contacts SET key_index = ?, fingerprint_index = ? WHERE id = ?", [rows[0][2], rows[0][1], .integer(b)])
        try db.run("UPDATE contacts SET key_index = ?, fingerprint_index = ? WHERE id = ?", [rows[1][2], rows[1][1], .integer(a)])
        try db.execute("COMMIT")

        let store = try ContactStore(path: path, identity: identity)
        XCTAssertEqual(try store.contact(id: a).publicKey, keyA, "the records themselves are intact")
        for (wanted, name) in [(keyA, "A"), (keyB, "B")] {
            do {
                let found = try store.contact(publicKey: wanted)
                XCTFail("lookup of \(name)'s key returned contact \(found.name)")
            } catch {
                XCTAssertEqual((error as? ItsMeError)?.kind, .authenticationFailed, "\(error)")
            }
            let fingerprint = Fingerprint.of(publicKey: wanted)
            do {
                let found = try store.contacts(fingerprint: fingerprint)
                XCTAssertTrue(found.allSatisfy { $0.fingerprint == fingerprint }, "fingerprint lookup for \(name) returned \(found.map(\.name))")
                XCTFail("a tampered fingerprint index is reported")
            } catch {
                XCTAssertEqual((error as? ItsMeError)?.kind, .authenticationFailed, "\(error)")
            }
        }
    }

    // MARK: 9. Device secrets

    func testDeviceSecretsStayOnTheirDevice() throws {
        let secrets = MemorySecretStore()
        let identity = try Identity.create(store: secrets, name: "Me")
        let path = directory + "/c.db"
        var rng = SystemRandom()
        let mine = rng.bytes(ContactStore.deviceSecretCount), theirs = rng.bytes(ContactStore.deviceSecretCount)
        let id: Int64, bare: Int64
        do {
            let store = try ContactStore(path: path, identity: identity)
            id = try store.add(name: "A", publicKey: try randomKey(), seed: try seed(1), method: .qr, now: t0)
            bare = try store.add(name: "B", publicKey: try randomKey(), seed: try seed(2), method: .qr, now: t0)
            XCTAssertEqual(kind { _ = try store.deviceSecrets(id: id) }, .notFound)
            try store.setDeviceSecrets(id: id, mine: try SecretBytes(copying: mine), theirs: try SecretBytes(copying: theirs))
            let pair = try store.deviceSecrets(id: id)
            XCTAssertEqual(pair.mine.unsafeExportedArray(), mine)
            XCTAssertEqual(pair.theirs.unsafeExportedArray(), theirs)
            XCTAssertEqual(kind { _ = try store.deviceSecrets(id: bare) }, .notFound)
            // Replacing them.
            try store.setDeviceSecrets(id: id, mine: try SecretBytes(copying: theirs), theirs: try SecretBytes(copying: mine))
            XCTAssertEqual(try store.deviceSecrets(id: id).mine.unsafeExportedArray(), theirs)
            try store.setDeviceSecrets(id: id, mine: try SecretBytes(copying: mine), theirs: try SecretBytes(copying: theirs))
            // An empty secret means unknown (a new device); not both, and not over 64 bytes.
            for (m, t) in [(0, 0), (65, 16), (16, 65)] {
                XCTAssertEqual(
                    kind { try store.setDeviceSecrets(id: id, mine: try SecretBytes(count: m), theirs: try SecretBytes(count: t)) },
                    .invalidArgument, "\(m), \(t)")
            }
            XCTAssertEqual(try store.deviceSecrets(id: id).theirs.unsafeExportedArray(), theirs)
            XCTAssertEqual(try stored(secrets, ContactStore.deviceKeyItem)?.count, AEAD.keyCount, "the device key lives in the secret store")
        }
        // Another device: every item but the device key travels.
        let newDevice = MemorySecretStore()
        for name in secrets.names where name != ContactStore.deviceKeyItem {
            guard let item = try secrets.get(name) else { return XCTFail("item \(name) vanished") }
            try newDevice.put(name, bytes: item)
        }
        XCTAssertEqual(newDevice.names, secrets.names.filter { $0 != ContactStore.deviceKeyItem })
        let moved = try ContactStore(path: path, identity: try Identity.load(store: newDevice))
        XCTAssertEqual(try moved.contact(id: id).name, "A")
        XCTAssertEqual(try moved.list().count, 2)
        XCTAssertTrue(try moved.seed(id: id).constantTimeEquals(try seed(1)))
        let error = itsMeError { _ = try moved.deviceSecrets(id: id) }
        XCTAssertEqual(error?.kind, .authenticationFailed)
        XCTAssertTrue(error?.message.contains("another device") ?? false)
        XCTAssertEqual(kind { _ = try moved.deviceSecrets(id: bare) }, .notFound)
        // The new device has its own key and can store its own secrets.
        let newKey = try XCTUnwrap(try stored(newDevice, ContactStore.deviceKeyItem))
        XCTAssertNotEqual(newKey, try XCTUnwrap(try stored(secrets, ContactStore.deviceKeyItem)))
        try moved.setDeviceSecrets(id: bare, mine: try seed(3), theirs: try seed(4))
        XCTAssertTrue(try moved.deviceSecrets(id: bare).theirs.constantTimeEquals(try seed(4)))
        // And the old device still reads its own.
        let home = try ContactStore(path: path, identity: try Identity.load(store: secrets))
        XCTAssertEqual(try home.deviceSecrets(id: id).mine.unsafeExportedArray(), mine)
        XCTAssertEqual(kind { _ = try home.deviceSecrets(id: bare) }, .authenticationFailed)
    }

    func testForgettingDeviceSecretsLeavesContactsAsTheyWere() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Me")
        let store = try ContactStore(path: directory + "/forget.db", identity: identity)
        let a = try store.add(name: "A", publicKey: try randomKey(), seed: try seed(1), method: .qr, now: t0)
        let b = try store.add(name: "B", publicKey: try randomKey(), seed: try seed(2), method: .invite, now: t0)
        let c = try store.add(name: "C", publicKey: try randomKey(), seed: try seed(3), method: .qr, now: t0)
        try store.setDeviceSecrets(id: a, mine: try seed(4), theirs: try seed(5))
        try store.setDeviceSecrets(id: b, mine: try seed(6), theirs: try seed(7))
        let before = try store.list()
        XCTAssertEqual(try store.forgetDeviceSecrets(), 2, "two contacts had secrets, C none")
        for id in [a, b, c] {
            XCTAssertEqual(kind { _ = try store.deviceSecrets(id: id) }, .notFound, "contact \(id)")
            XCTAssertTrue(try store.seed(id: id).constantTimeEquals(try seed(UInt8(id))), "the seed stays")
        }
        XCTAssertEqual(try store.list(), before, "names, states and methods stay")
        XCTAssertEqual(try store.forgetDeviceSecrets(), 0)
        // The device can learn secrets again (a degradation code, an update).
        try store.setDeviceSecrets(id: a, mine: try seed(8), theirs: try SecretBytes(count: 0))
        XCTAssertTrue(try store.deviceSecrets(id: a).mine.constantTimeEquals(try seed(8)))
        XCTAssertTrue(try store.integrityCheck())
    }

    // MARK: 10. Photos

    func testPhotosAndCascadingDelete() throws {
        let identity = try newIdentity()
        let path = directory + "/c.db"
        let store = try ContactStore(path: path, identity: identity)
        let id = try store.add(name: "A", publicKey: try randomKey(), seed: try seed(1), method: .qr, now: t0)
        XCTAssertEqual(kind { _ = try store.photo(id: id) }, .notFound)
        var rng = SystemRandom()
        let photo = rng.bytes(100 * 1024)
        try store.setPhoto(id: id, photo: photo, filename: "me.jpg")
        var read = try store.photo(id: id)
        XCTAssertEqual(read.photo, photo)
        XCTAssertEqual(read.filename, "me.jpg")
        // Replace, then the largest allowed, then refusals that keep the old one.
        try store.setPhoto(id: id, photo: [9, 9], filename: "ü.png")
        read = try store.photo(id: id)
        XCTAssertEqual(read.photo, [9, 9])
        XCTAssertEqual(read.filename, "ü.png")
        let largest = rng.bytes(ContactStore.maxPhotoBytes)
        try store.setPhoto(id: id, photo: largest, filename: String(repeating: "f", count: 255))
        XCTAssertEqual(try store.photo(id: id).photo, largest)
        XCTAssertEqual(
            kind { try store.setPhoto(id: id, photo: rng.bytes(ContactStore.maxPhotoBytes + 1), filename: "x") }, .invalidArgument)
        XCTAssertEqual(kind { try store.setPhoto(id: id, photo: [1], filename: String(repeating: "f", count: 256)) }, .invalidArgument)
        try store.setPhoto(id: id, photo: photo, filename: "me.jpg")
        XCTAssertEqual(try store.photo(id: id).photo, photo)

        // A photo with no filename, and a filename with no photo, are kept.
        let other = try store.add(name: "B", publicKey: try randomKey(), seed: try seed(2), method: .qr, now: t0)
        try store.setPhoto(id: other, photo: [1, 2, 3], filename: "")
        XCTAssertEqual(try store.photo(id: other).photo, [1, 2, 3])
        XCTAssertEqual(try store.photo(id: other).filename, "")
        // Empty photo and filename remove it.
        try store.setPhoto(id: other, photo: [], filename: "")
        XCTAssertEqual(kind { _ = try store.photo(id: other) }, .notFound)
        try store.setPhoto(id: other, photo: [], filename: "")
        XCTAssertEqual(kind { _ = try store.photo(id: other) }, .notFound)

        // Deleting the contact deletes its photo and device secrets.
        try store.setDeviceSecrets(id: id, mine: try seed(7), theirs: try seed(8))
        let db = try Database(path: path)
        XCTAssertEqual(try rowCount(db, "photos", id), 1)
        XCTAssertEqual(try rowCount(db, "device_secrets", id), 1)
        try store.delete(id: id)
        XCTAssertEqual(try rowCount(db, "photos", id), 0)
        XCTAssertEqual(try rowCount(db, "device_secrets", id), 0)
        XCTAssertEqual(try db.query("SELECT count(*) FROM photos"), [[.integer(0)]])
        XCTAssertEqual(try db.query("SELECT count(*) FROM device_secrets"), [[.integer(0)]])
        XCTAssertEqual(kind { _ = try store.photo(id: id) }, .notFound)
        XCTAssertEqual(kind { _ = try store.deviceSecrets(id: id) }, .notFound)
        XCTAssertEqual(kind { try store.setPhoto(id: id, photo: photo, filename: "me.jpg") }, .notFound)
        XCTAssertTrue(try store.integrityCheck())
    }

    // MARK: 11. One handle, many threads

    func testOneStoreFromEightThreads() throws {
        let store = try ContactStore(path: directory + "/c.db", identity: try newIdentity())
        let perThread = 25
        let keys = try (0..<8).map { _ in try (0..<perThread).map { _ in try randomKey() } }
        let failures = Log<String>()
        let added = Log<Int64>()
        let t0 = self.t0
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            do {
                for (n, publicKey) in keys[thread].enumerated() {
                    var rng = SystemRandom()
                    let seedBytes = rng.bytes(32)
                    let id = try store.add(
                        name: "T\(thread)-\(n)", publicKey: publicKey, seed: try SecretBytes(copying: seedBytes), method: .qr,
                        now: t0, note: "thread \(thread)")
                    added.append(id)
                    var c = try store.contact(id: id)
                    guard c.publicKey == publicKey, c.name == "T\(thread)-\(n)" else {
                        failures.append("thread \(thread): read back the wrong contact")
                        continue
                    }
                    c.name = "U\(thread)-\(n)"
                    c.state = .verified
                    try store.update(c)
                    try store.useWindow(id: id, window: Int64(n))
                    guard try store.contact(publicKey: publicKey).name == "U\(thread)-\(n)",
                        try store.seed(id: id).unsafeExportedArray() == seedBytes,
                        try store.contacts(fingerprint: c.fingerprint).map(\.id) == [id]
                    else {
                        failures.append("thread \(thread): lookup after update disagrees")
                        continue
                    }
                    _ = try store.count()
                    if n % 10 == 0 { _ = try store.list(limit: 5) }
                }
            } catch {
                failures.append("thread \(thread): \(error)")
            }
        }
        XCTAssertEqual(failures.values, [])
        XCTAssertEqual(try store.count(), 8 * perThread)
        XCTAssertEqual(Set(added.values).count, 8 * perThread, "every id distinct")
        let all = try store.list()
        XCTAssertEqual(all.count, 8 * perThread)
        XCTAssertTrue(all.allSatisfy { $0.name.hasPrefix("U") && $0.state == .verified && $0.lastWindow != nil })
        XCTAssertTrue(try store.integrityCheck())
    }

    func testBatchAddsInOneTransactionAndRollsBackOnError() throws {
        let store = try ContactStore(path: directory + "/c.db", identity: try newIdentity())
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
        XCTAssertEqual(kind { _ = try store.contact(publicKey: key(200)) }, .notFound)
        let next = try store.add(name: "After", publicKey: key(200), seed: try seed(1), method: .qr, now: t0)
        XCTAssertGreaterThan(next, 50)
    }

    // MARK: 12. Fields from later versions

    func testUnknownFieldsSurviveDecodeAndReencode() throws {
        var contact = Contact(
            id: 1, name: "A", fingerprint: Fingerprint.of(publicKey: key(1)), publicKey: key(1), state: .verified,
            degradationAcknowledged: false, exchangeMethod: .qr, createdAt: t0, verifiedAt: t0, lastWindow: 9, note: "n")
        contact.unknownFields = [RecordField(tag: 200, value: [1, 2, 3]), RecordField(tag: 99, value: [])]
        let record = try ContactRecord.encode(contact, seed: try seed(1))
        var seedOut = [UInt8](repeating: 0, count: ContactRecord.seedCount)
        let decoded = try record.withBytes { b in
            try seedOut.withUnsafeMutableBytes { try ContactRecord.decode(b, id: 1, seedInto: $0) }
        }
        XCTAssertEqual(decoded, contact)
        XCTAssertEqual(decoded.unknownFields, [RecordField(tag: 200, value: [1, 2, 3]), RecordField(tag: 99, value: [])])
        XCTAssertEqual(seedOut, try seed(1).unsafeExportedArray())
        // Re-encoding the decoded contact gives the same bytes.
        let again = try ContactRecord.encode(decoded, seed: try seed(1))
        XCTAssertTrue(again.constantTimeEquals(record))

        // A record whose key does not match its fingerprint is corrupt.
        contact.fingerprint = "0000000000000000"
        let bad = try ContactRecord.encode(contact, seed: try seed(1))
        XCTAssertEqual(kind { _ = try bad.withBytes { try ContactRecord.decode($0, id: 1) } }, .corruptData)
        // And one of an unknown format version.
        var wrongVersion = record.unsafeExportedArray()
        wrongVersion[0] = 2
        XCTAssertEqual(kind { _ = try wrongVersion.withUnsafeBytes { try ContactRecord.decode($0, id: 1) } }, .corruptData)
    }

    /// A row written by a later version (sealed as docs/STORAGE.md says, with
    /// a field this version does not know) reads, and updates keep the field.
    func testUnknownFieldsInAStoredRowSurviveUpdates() throws {
        let identity = try newIdentity()
        let path = directory + "/c.db"
        let store = try ContactStore(path: path, identity: identity)
        let publicKey = try randomKey()
        let id = try store.add(name: "A", publicKey: publicKey, seed: try seed(1), method: .qr, now: t0)
        var later = try store.contact(id: id)
        later.unknownFields = [RecordField(tag: 200, value: [1, 2, 3])]
        let plain = try ContactRecord.encode(later, seed: try seed(1))
        let sealed = try sealRecord(identity, path, id, plain)
        try Database(path: path).run("UPDATE contacts SET record = ? WHERE id = ?", [.blob(sealed), .integer(id)])

        XCTAssertEqual(try store.contact(id: id).unknownFields, [RecordField(tag: 200, value: [1, 2, 3])])
        var edited = try store.contact(id: id)
        edited.name = "A2"
        edited.unknownFields = []
        try store.update(edited)
        try store.useWindow(id: id, window: 3)
        try store.setState(id: id, .verified, acknowledged: false, now: t0)
        let stored = try openRecord(identity, path, id)
        let decoded = try stored.withBytes { try ContactRecord.decode($0, id: id) }
        XCTAssertEqual(decoded.unknownFields, [RecordField(tag: 200, value: [1, 2, 3])])
        XCTAssertEqual(decoded.name, "A2")
        XCTAssertEqual(decoded.lastWindow, 3)
        XCTAssertEqual(decoded.state, .verified)
        XCTAssertTrue(try store.seed(id: id).constantTimeEquals(try seed(1)))
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}

final class Log<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [T] = []
    func append(_ item: T) { lock.lock(); items.append(item); lock.unlock() }
    var values: [T] { lock.lock(); defer { lock.unlock() }; return items }
}

import Foundation
import Synchronization
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

/// A contact store that lost rows, was rolled back, emptied or replaced is
/// noticed when opened, never read as a smaller store; and the person can
/// accept the loss, being told what it is (docs/STORAGE.md, "Commits and
/// rollback").
final class StoreIntegrityTests: XCTestCase {
    private var directory: String!
    private let t0: Int64 = 1_800_000_000

    override func setUpWithError() throws {
        try Sodium.initialize()
        directory = NSTemporaryDirectory() + "itsme-integrity-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func error(_ body: () throws -> Void) -> ItsMeError? {
        do {
            try body()
            return nil
        } catch { return error as? ItsMeError }
    }

    private func randomKey() throws -> [UInt8] {
        var rng = SystemRandom()
        return try Ed25519.keyPair(seed: try SecretBytes(randomCount: Ed25519.seedCount, using: &rng)).publicKey
    }

    private func seed() throws -> SecretBytes {
        var rng = SystemRandom()
        return try SecretBytes(randomCount: ContactRecord.seedCount, using: &rng)
    }

    @discardableResult
    private func add(_ store: ContactStore, _ name: String) throws -> Int64 {
        try store.add(name: name, publicKey: try randomKey(), seed: try seed(), method: .qr, now: t0)
    }

    /// The same identity in a secret store of its own: another device, or
    /// this one before it kept marks.
    private func elsewhere(_ identity: Identity) throws -> Identity {
        let store = MemorySecretStore()
        guard let item = try identity.store.get(Identity.itemName) else { throw ItsMeError(.notFound, "no identity") }
        try store.put(Identity.itemName, bytes: item)
        return try Identity.load(store: store)
    }

    private func removeStore(_ path: String) {
        for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
    }

    private func copy(_ from: String, _ to: String) throws {
        try Data(contentsOf: URL(fileURLWithPath: from)).write(to: URL(fileURLWithPath: to))
    }

    // MARK: Photos bound to their contact

    func testAPhotoRowMovedToAnotherContactIsAnErrorNotAMissingPhoto() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Me")
        let path = directory + "/c.db"
        let withPhoto: Int64, without: Int64
        do {
            let store = try ContactStore(path: path, identity: identity)
            withPhoto = try add(store, "Has a photo")
            without = try add(store, "Has none")
            try store.setPhoto(id: withPhoto, photo: [1, 2, 3], filename: "a.jpg")
            XCTAssertTrue(try store.contact(id: withPhoto).hasPhoto)
            XCTAssertFalse(try store.contact(id: without).hasPhoto)
        }
        // A changed row id (one flipped bit in the key of the photo's cell)
        // keeps every count: only the records can tell.
        try Database(path: path).run("UPDATE photos SET contact_id = ? WHERE contact_id = ?", [.integer(without), .integer(withPhoto)])
        let store = try ContactStore(path: path, identity: identity)
        XCTAssertEqual(error { _ = try store.photo(id: withPhoto) }?.kind, .corruptData, "a lost photo is not 'no photo'")
        XCTAssertEqual(error { _ = try store.photo(id: without) }?.kind, .corruptData, "nor is a photo the record does not claim")
        XCTAssertEqual(try store.list().count, 2)

        // Accepting the loss clears both: the contacts stay, without photos.
        let loss = try ContactStore.acceptLoss(path: path, identity: identity)
        XCTAssertEqual(loss.photosMissing, 1)
        XCTAssertFalse(loss.replaced)
        XCTAssertEqual(loss.commitsLost, 0)
        let accepted = try ContactStore(path: path, identity: identity)
        XCTAssertEqual(error { _ = try accepted.photo(id: withPhoto) }?.kind, .notFound)
        XCTAssertEqual(error { _ = try accepted.photo(id: without) }?.kind, .notFound)
        try accepted.setPhoto(id: withPhoto, photo: [4, 5], filename: "b.png")
        XCTAssertEqual(try accepted.photo(id: withPhoto).photo, [4, 5])
    }

    func testRemovingAPhotoClearsTheRecordsClaim() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Me")
        let store = try ContactStore(path: directory + "/c.db", identity: identity)
        let id = try add(store, "Friend")
        try store.setPhoto(id: id, photo: [9], filename: "f.jpg")
        try store.setPhoto(id: id, photo: [], filename: "")
        XCTAssertFalse(try store.contact(id: id).hasPhoto)
        XCTAssertEqual(error { _ = try store.photo(id: id) }?.kind, .notFound)
        var rng = SystemRandom()
        let profile = try ProfileRecord.create(
            ownerKey: try randomKey(), name: "", photo: [7, 7], photoFilename: "p.jpg", random: &rng)
        try store.applyProfile(id: id, profile)
        XCTAssertTrue(try store.contact(id: id).hasPhoto)
        XCTAssertEqual(try store.photo(id: id).filename, "p.jpg")
    }

    func testRowsThatVanishedMakeOpeningFail() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Me")
        let path = directory + "/c.db"
        let ids: [Int64]
        do {
            let store = try ContactStore(path: path, identity: identity)
            ids = try (0..<3).map { try add(store, "Friend \($0)") }
            try store.setPhoto(id: ids[0], photo: [1], filename: "1.jpg")
            try store.setDeviceSecrets(id: ids[1], mine: try SecretBytes(copying: [UInt8](repeating: 1, count: 16)),
                                       theirs: try SecretBytes(copying: [UInt8](repeating: 2, count: 16)))
        }
        // A row lost in a damaged page: gone, with nothing else told.
        for (table, column, id) in [("photos", "contact_id", ids[0]), ("device_secrets", "contact_id", ids[1]), ("contacts", "id", ids[2])] {
            let scratch = directory + "/damaged-\(table).db"
            try copy(path, scratch)
            let db = try Database(path: scratch)
            try db.execute("DROP TRIGGER \(table)_deleted")
            try db.run("DELETE FROM \(table) WHERE \(column) = ?", [.integer(id)])
            let opening = error { _ = try ContactStore(path: scratch, identity: identity) }
            XCTAssertEqual(opening?.kind, .corruptData, table)
            XCTAssertTrue(opening?.message.contains("lacks rows") ?? false, "\(String(describing: opening))")
            let loss = try ContactStore.acceptLoss(path: scratch, identity: identity)
            XCTAssertEqual(loss.missing.contacts, table == "contacts" ? 1 : 0)
            XCTAssertEqual(loss.missing.photos, table == "photos" ? 1 : 0)
            XCTAssertEqual(loss.missing.deviceSecrets, table == "device_secrets" ? 1 : 0)
            XCTAssertEqual(loss.photosMissing, table == "photos" ? 1 : 0, "the contact that lost its photo is counted")
            let store = try ContactStore(path: scratch, identity: identity)
            XCTAssertEqual(try store.count(), table == "contacts" ? 2 : 3)
            if table == "photos" { XCTAssertEqual(error { _ = try store.photo(id: ids[0]) }?.kind, .notFound) }
            // And it stays consistent as it changes again.
            try add(store, "Later")
            _ = try ContactStore(path: scratch, identity: identity)
        }
    }

    /// Every byte of the photos table's page flipped in turn: the store
    /// refuses to open, or fails a read, or gives the photo back; a contact
    /// that had a photo is never answered "no photo".
    func testAFlippedByteInThePhotoPageNeverDropsAPhotoSilently() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Me")
        let path = directory + "/c.db"
        var ids: [Int64] = []
        do {
            let store = try ContactStore(path: path, identity: identity)
            for i in 0..<4 {
                let id = try add(store, "Friend \(i)")
                if i % 2 == 0 { try store.setPhoto(id: id, photo: [UInt8](repeating: UInt8(i), count: 40), filename: "\(i).jpg") }
                ids.append(id)
            }
        }
        let db = try Database(path: path)
        try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        guard case .integer(let page) = try db.query("SELECT rootpage FROM sqlite_master WHERE name = 'photos'")[0][0],
            case .integer(let pageSize) = try db.query("PRAGMA page_size")[0][0]
        else { return XCTFail("no photos page") }
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        let start = Int((page - 1) * pageSize)
        let scratch = directory + "/flipped.db"
        var opened = 0, refused = 0
        // The used part of the page: its header and the cells at its end.
        for offset in Array(start..<(start + 64)) + Array((start + Int(pageSize) - 192)..<(start + Int(pageSize))) {
            removeStore(scratch)
            var copy = original
            copy[offset] ^= 0x10
            try copy.write(to: URL(fileURLWithPath: scratch))
            // Each copy is a store of its own to this device: no mark yet.
            let fresh = try elsewhere(identity)
            let store: ContactStore
            do { store = try ContactStore(path: scratch, identity: fresh) } catch {
                refused += 1
                continue
            }
            opened += 1
            for (i, id) in ids.enumerated() where i % 2 == 0 {
                do {
                    let photo = try store.photo(id: id)
                    XCTAssertEqual(photo.photo, [UInt8](repeating: UInt8(i), count: 40), "offset \(offset)")
                } catch let e as ItsMeError {
                    XCTAssertNotEqual(e.kind, .notFound, "offset \(offset): a photo dropped silently")
                }
            }
        }
        XCTAssertGreaterThan(opened, 0)
        XCTAssertGreaterThan(refused, 0)
    }

    // MARK: Rollback, emptied and replaced stores

    func testAnOlderCopyPutBackIsRefusedUntilTheLossIsAccepted() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Me")
        let path = directory + "/c.db"
        let old = directory + "/old.db"
        do {
            let store = try ContactStore(path: path, identity: identity)
            for i in 0..<3 { try add(store, "Early \(i)") }
            try store.backup(to: old)
            for i in 0..<5 { try add(store, "Late \(i)") }
        }
        removeStore(path)
        try copy(old, path)
        let refused = error { _ = try ContactStore(path: path, identity: identity) }
        XCTAssertEqual(refused?.kind, .rolledBack)
        XCTAssertTrue(refused?.message.contains("5 committed changes behind") ?? false, "\(String(describing: refused))")
        XCTAssertTrue(refused?.message.contains("8 contacts then, 3 now") ?? false, "\(String(describing: refused))")

        let loss = try ContactStore.acceptLoss(path: path, identity: identity)
        XCTAssertEqual(loss, StoreLoss(replaced: false, commitsLost: 5, contactsBefore: 8, contactsNow: 3,
                                       missing: RowCounts.zero, photosMissing: 0))
        XCTAssertEqual(loss.description, "5 committed changes lost; 8 contacts then, 3 now")
        let store = try ContactStore(path: path, identity: identity)
        XCTAssertEqual(try store.count(), 3)
        try add(store, "After")
        XCTAssertTrue(try ContactStore.acceptLoss(path: path, identity: identity).isEmpty, "nothing more to accept")
    }

    /// The store's committed changes still in the -wal file when the process
    /// died, and the -wal file lost: the main file alone is behind.
    func testALostWriteAheadLogIsNoticed() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Me")
        let path = directory + "/c.db"
        let mainOnly = directory + "/main-only.db"
        do {
            let store = try ContactStore(path: path, identity: identity)
            try add(store, "Checkpointed")
            try Database(path: path).execute("PRAGMA wal_checkpoint(TRUNCATE)")
            for i in 0..<4 { try add(store, "In the log \(i)") }
            XCTAssertGreaterThan((try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0, 0)
            try copy(path, mainOnly)  // what a crash leaves once the -wal file is gone
        }
        removeStore(path)
        try copy(mainOnly, path)
        let refused = error { _ = try ContactStore(path: path, identity: identity) }
        XCTAssertEqual(refused?.kind, .rolledBack, "\(String(describing: refused))")
        let loss = try ContactStore.acceptLoss(path: path, identity: identity)
        XCTAssertEqual(loss.commitsLost, 4)
        XCTAssertEqual(loss.contactsBefore, 5)
        XCTAssertEqual(loss.contactsNow, 1)
    }

    func testAnEmptiedOrDeletedStoreIsNotTakenForANewOne() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Me")
        let path = directory + "/c.db"
        do {
            let store = try ContactStore(path: path, identity: identity)
            for i in 0..<41 { try add(store, "Friend \(i)") }
        }
        let kept = directory + "/kept.db"
        try copy(path, kept)
        for damage in ["truncated", "deleted"] {
            removeStore(path)
            if damage == "truncated" { XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data())) }
            let refused = error { _ = try ContactStore(path: path, identity: identity) }
            XCTAssertEqual(refused?.kind, .rolledBack, damage)
            XCTAssertTrue(refused?.message.contains("41 contacts") ?? false, "\(String(describing: refused))")
            XCTAssertEqual(
                (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? nil, damage == "truncated" ? 0 : nil,
                "nothing was written in its place")
            // Refused again: nothing became the store by itself.
            XCTAssertEqual(error { _ = try ContactStore(path: path, identity: identity) }?.kind, .rolledBack)
        }
        // Put back, the real store opens: nothing was lost.
        try copy(kept, path)
        XCTAssertEqual(try ContactStore(path: path, identity: identity).count(), 41)
        removeStore(path)
        let loss = try ContactStore.acceptLoss(path: path, identity: identity)
        XCTAssertTrue(loss.replaced)
        XCTAssertEqual(loss.contactsBefore, 41)
        XCTAssertEqual(loss.contactsNow, 0)
        XCTAssertTrue(loss.description.hasPrefix("the file is not the store last seen here (which had 41 contacts)"))
        XCTAssertEqual(try ContactStore(path: path, identity: identity).count(), 0)
    }

    func testMarksAreKeptPerPathAndPerIdentity() throws {
        let me = try Identity.create(store: MemorySecretStore(), name: "Me")
        let one = directory + "/one.db", two = directory + "/two.db"
        try add(try ContactStore(path: one, identity: me), "A")
        try add(try ContactStore(path: two, identity: me), "B")
        // The same file reached through another name has the same mark.
        try FileManager.default.createDirectory(atPath: directory + "/sub", withIntermediateDirectories: false)
        XCTAssertEqual(try ContactStore(path: directory + "/sub/../one.db", identity: me).count(), 1)
        removeStore(one)
        XCTAssertEqual(error { _ = try ContactStore(path: directory + "/sub/../one.db", identity: me) }?.kind, .rolledBack)
        XCTAssertEqual(try ContactStore(path: two, identity: me).count(), 1, "another path is another store")
        // Another identity (one installed in place of this one) has marks of its own.
        let other = try Identity.create(store: MemorySecretStore(), name: "Other")
        XCTAssertNotEqual(
            try StoreMark.item(path: one, contactsKey: me.contactsKey), try StoreMark.item(path: one, contactsKey: other.contactsKey))
    }

    func testAStoreFromAnEarlierVersionGetsAManifestAndKeepsItsPhotos() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Me")
        let path = directory + "/c.db"
        let id: Int64
        do {
            let store = try ContactStore(path: path, identity: identity)
            id = try add(store, "Friend")
            try store.setPhoto(id: id, photo: [3, 3, 3], filename: "f.jpg")
            _ = try add(store, "No photo")
        }
        // The schema and meta of version 1: no row counts, no manifest.
        let db = try Database(path: path)
        try db.execute(
            """
            DROP TRIGGER contacts_inserted; DROP TRIGGER contacts_deleted; DROP TRIGGER photos_inserted;
            DROP TRIGGER photos_deleted; DROP TRIGGER device_secrets_inserted; DROP TRIGGER device_secrets_deleted;
            DROP TABLE row_counts; DELETE FROM meta WHERE name = 'manifest'; PRAGMA user_version = 1
            """)
        // Opened on a device that has no mark for it (as after an upgrade).
        let upgraded = try elsewhere(identity)
        let store = try ContactStore(path: path, identity: upgraded)
        XCTAssertEqual(try store.photo(id: id).photo, [3, 3, 3])
        XCTAssertEqual(try store.count(), 2)
        try add(store, "Third")
        XCTAssertEqual(try ContactStore(path: path, identity: upgraded).count(), 3)
        // On the device that knew it, the same change is a rollback.
        XCTAssertEqual(error { _ = try ContactStore(path: path, identity: identity) }?.kind, .rolledBack)
    }

    /// A secret store the library may call only on its callers' threads, as
    /// a host's is.
    final class CallersThreadsOnly: SecretStore {
        let inner = MemorySecretStore()
        func get(_ name: String) throws -> SecretBytes? { try inner.get(name) }
        func put(_ name: String, _ value: UnsafeRawBufferPointer, accessibility: Accessibility) throws {
            try inner.put(name, value, accessibility: accessibility)
        }
        func remove(_ name: String) throws -> Bool { try inner.remove(name) }
    }

    /// Commits in quick succession raise the mark once per interval and at
    /// close: the bound on what a rollback can hide (docs/STORAGE.md). With a
    /// store the library may call from its own thread, the newest waiting
    /// commit is raised there when the interval is up, with no commit to
    /// carry it; with a host's, at the next commit after the interval.
    func testCommitsInQuickSuccessionRaiseTheMarkOncePerIntervalAndAtClose() throws {
        for secrets in [MemorySecretStore(), CallersThreadsOnly()] as [any SecretStore] {
            let background = secrets.allowsLibraryThreads
            let identity = try Identity.create(store: secrets, name: "Me")
            let path = directory + "/c-\(background).db"
            let item = try StoreMark.item(path: path, contactsKey: identity.contactsKey)
            func commits() throws -> UInt64? {
                guard let bytes = try secrets.get(item) else { return nil }
                return try bytes.withBytes { try StoreMark.decode($0) }.commits
            }
            do {
                let store = try ContactStore(path: path, identity: identity)
                XCTAssertEqual(store.markInterval, .milliseconds(50))
                store.markInterval = .seconds(3600)
                try add(store, "First")
                XCTAssertEqual(try commits(), 1, "the first commit raises it at once")
                try add(store, "Second")
                try add(store, "Third")
                XCTAssertEqual(try commits(), 1, "later ones within the interval wait")
                store.markInterval = .zero
                if background {
                    // The library's thread raises it, no commit needed.
                    let deadline = ContinuousClock.now + .seconds(10)
                    while try commits() != 3, ContinuousClock.now < deadline { usleep(1_000) }
                    XCTAssertEqual(try commits(), 3, "raised when the interval is up")
                    store.markInterval = .seconds(3600)
                    try add(store, "Fourth")
                    XCTAssertEqual(try commits(), 3)
                } else {
                    XCTAssertEqual(try commits(), 1, "nothing raises it between commits")
                    try add(store, "Fourth")
                    XCTAssertEqual(try commits(), 4, "the next after the interval raises it to the newest")
                    store.markInterval = .seconds(3600)
                }
                try add(store, "Fifth")
                XCTAssertEqual(try commits(), background ? 3 : 4)
            }
            XCTAssertEqual(try commits(), 5, "closing raises what waited")
        }
    }

    /// Handles opening while others commit never mistake a commit they
    /// have not read yet for a rollback.
    func testOpeningWhileOthersCommitIsNoRollback() throws {
        let identity = try Identity.create(store: MemorySecretStore(), name: "Me")
        let path = directory + "/c.db"
        _ = try ContactStore(path: path, identity: identity)
        let failures = Mutex<[String]>([])
        nonisolated(unsafe) let shared = identity
        let keys = try (0..<60).map { _ in try randomKey() }
        let t0 = self.t0
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for i in 0..<15 {
                do {
                    let store = try ContactStore(path: path, identity: shared)
                    _ = try store.add(
                        name: "Worker \(worker) \(i)", publicKey: keys[worker * 15 + i],
                        seed: try SecretBytes(copying: [UInt8](repeating: 1, count: 32)), method: .qr, now: t0)
                } catch { failures.withLock { $0.append("\(error)") } }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, [])
        XCTAssertEqual(try ContactStore(path: path, identity: identity).count(), 60)
    }

    func testEveryCommitRaisesTheMarkAndReadsDoNot() throws {
        let secrets = MemorySecretStore()
        let identity = try Identity.create(store: secrets, name: "Me")
        let path = directory + "/c.db"
        let item = try StoreMark.item(path: path, contactsKey: identity.contactsKey)
        func mark() throws -> StoreMark? {
            guard let bytes = try secrets.get(item) else { return nil }
            return try bytes.withBytes { try StoreMark.decode($0) }
        }
        let store = try ContactStore(path: path, identity: identity)
        store.markInterval = .zero
        XCTAssertEqual(try mark()?.commits, 0)
        let id = try add(store, "A")
        XCTAssertEqual(try mark()?.commits, 1)
        XCTAssertEqual(try mark()?.contacts, 1)
        _ = try store.list()
        _ = try store.contact(id: id)
        XCTAssertEqual(try store.expireAwaiting(now: t0), 0)
        XCTAssertEqual(try mark()?.commits, 1, "reads, and writes that change nothing, commit nothing")
        try store.setNote(id: id, "n")
        try store.useWindow(id: id, window: 5)
        try store.delete(id: id)
        XCTAssertEqual(try mark()?.commits, 4)
        XCTAssertEqual(try mark()?.contacts, 0)
        XCTAssertEqual(item.count, "itsme.store-mark.".count + 32)
    }
}

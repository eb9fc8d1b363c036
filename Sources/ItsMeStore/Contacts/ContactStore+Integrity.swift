// The contact store's commits, its manifest and mark, and what it does when
// a file was rolled back or lost rows (docs/STORAGE.md); backup and check.
import Glibc
import CSQLite
import CSodium
import Synchronization
import ItsMePrimitives
import ItsMeBase

extension ContactStore {
    // MARK: Commits, rollback and lost rows

    /// Runs `body` in one write transaction which, if it changed anything,
    /// also counts the commit in the manifest; then raises the store's mark
    /// in the secret store. The only way this class writes.
    func write<R>(_ body: () throws -> R) throws -> R {
        let (result, manifest) = try withLock {
            try db.transaction(.immediate) { () -> (R, StoreManifest?) in
                let before = db.totalChanges
                let result = try body()
                return (result, db.totalChanges == before ? nil : try commitManifestLocked())
            }
        }
        if let manifest { markRaiser.committed(manifest) }
        return result
    }

    /// The sealed manifest, nil if the file has none (made by an earlier
    /// version, or installed from an import).
    private func readManifestLocked() throws -> StoreManifest? {
        guard let row = try db.query("SELECT value FROM meta WHERE name = 'manifest'").first else { return nil }
        guard case .blob(let sealed) = row[0] else { throw ItsMeError(.corruptData, "the contact store manifest is malformed") }
        return try open(sealed, table: .meta, row: 0, key: contactsKey) { try StoreManifest.decode($0) }
    }

    private func writeManifestLocked(_ manifest: StoreManifest) throws {
        let sealed = try seal(manifest.encoded(), table: .meta, row: 0, key: contactsKey)
        try db.run(
            "INSERT INTO meta (name, value) VALUES ('manifest', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            [.blob(sealed)])
    }

    /// Rows each table holds, counted.
    private func actualCountsLocked() throws -> RowCounts { try Self.actualCounts(db) }

    /// Rows each table holds, as the triggers kept count.
    private func trackedCountsLocked() throws -> RowCounts {
        var counts: [String: UInt64] = [:]
        for row in try db.query("SELECT name, n FROM row_counts") {
            guard case .text(let name) = row[0], case .integer(let n) = row[1], n >= 0 else {
                throw ItsMeError(.corruptData, "the contact store's row counts are malformed")
            }
            counts[name] = UInt64(n)
        }
        guard let c = counts["contacts"], let p = counts["photos"], let d = counts["device_secrets"] else {
            throw ItsMeError(.corruptData, "the contact store's row counts are missing")
        }
        return RowCounts(contacts: c, photos: p, deviceSecrets: d)
    }

    private func setTrackedCountsLocked(_ counts: RowCounts) throws {
        for (name, n) in [("contacts", counts.contacts), ("photos", counts.photos), ("device_secrets", counts.deviceSecrets)] {
            try db.run("UPDATE row_counts SET n = ? WHERE name = ?", [.integer(Int64(n)), .text(name)])
        }
    }

    /// Counts one more commit in the manifest, with the rows each table
    /// now holds; inside the committing transaction.
    private func commitManifestLocked() throws -> StoreManifest {
        guard var manifest = try readManifestLocked() else {
            throw ItsMeError(.corruptData, "the contact store manifest is missing: the file was altered")
        }
        manifest.commits += 1
        manifest.counts = try trackedCountsLocked()
        try writeManifestLocked(manifest)
        return manifest
    }

    /// Makes each contact record's photo field agree with the photo rows,
    /// inside a write transaction. `adoptingRows`: a row the record does not
    /// claim gives it a photo (records written before the field existed);
    /// otherwise such a row is deleted. A record claiming a missing row
    /// loses its photo. Returns how many contacts lost their photo.
    private func reconcilePhotosLocked(adoptingRows: Bool) throws -> UInt64 {
        var rows = Set<Int64>()
        for row in try db.query("SELECT contact_id FROM photos") {
            if case .integer(let id) = row[0] { rows.insert(id) }
        }
        var lost: UInt64 = 0
        for row in try db.query("SELECT id, record FROM contacts") {
            guard case .integer(let id) = row[0], case .blob(let sealed) = row[1] else {
                throw ItsMeError(.corruptData, "contact store row is malformed")
            }
            let claimed = try decode(id: id, sealed: sealed).hasPhoto
            let present = rows.contains(id)
            if claimed == present { continue }
            if claimed { lost += 1 }
            if present && !adoptingRows {
                try db.run("DELETE FROM photos WHERE contact_id = ?", [.integer(id)])
            } else {
                try modifyLocked(id, newSeed: nil) { $0.hasPhoto = present }
            }
        }
        return lost
    }

    /// Gives a file without a manifest one (commit count 0), after setting
    /// each record's photo field from the photo rows; in a write transaction.
    private func createManifestLocked() throws -> StoreManifest {
        _ = try reconcilePhotosLocked(adoptingRows: true)
        let counts = try actualCountsLocked()
        try setTrackedCountsLocked(counts)
        let manifest = StoreManifest(commits: 0, counts: counts)
        try writeManifestLocked(manifest)
        return manifest
    }

    /// Before opening: a missing or empty file where this device last saw a
    /// store is refused, and nothing is created in its place.
    static func checkNotMissing(path: String, markItem: String, secretStore: any SecretStore) throws {
        var st = stat()
        let exists = stat(path, &st) == 0
        if exists, st.st_size > 0 { return }
        guard let bytes = try secretStore.get(markItem) else { return }
        let mark = try bytes.withBytes { try StoreMark.decode($0) }
        throw ItsMeError(
            .rolledBack,
            "the contact store at \(path) is \(exists ? "empty" : "missing"), but this device "
                + "last saw one there with \(mark.contacts) contacts: it was deleted or emptied. Accepting the loss "
                + "starts an empty store")
    }

    /// On open: the manifest (made now if the file has none), the rows it
    /// counts, and the file against the mark this device keeps.
    func checkOnOpen() throws {
        let manifest = try withLock { () -> StoreManifest in
            let (found, actual, tracked) = try db.transaction(.deferred) {
                (try readManifestLocked(), try actualCountsLocked(), try trackedCountsLocked())
            }
            guard let manifest = found else {
                return try db.transaction(.immediate) { try readManifestLocked() ?? createManifestLocked() }
            }
            if let refusal = Self.refusal(path: path, storeID: storeID, manifest: manifest, actual: actual, mark: nil) { throw refusal }
            // The plain counts only feed the next commit: mend them.
            if tracked != actual { try db.transaction(.immediate) { try setTrackedCountsLocked(actual) } }
            return manifest
        }
        try secretStore.withExclusiveAccess {
            let mark = try readMark()
            // Another handle may have committed, and raised the mark, since
            // the manifest was read: it raises the mark only after its
            // commit, so the file read again now is at least at the mark,
            // unless it was rolled back.
            var manifest = manifest
            if let mark, manifest.commits < mark.commits, let again = try withLock({ try readManifestLocked() }) {
                manifest = again
            }
            if let refusal = Self.refusal(path: path, storeID: storeID, manifest: manifest, actual: manifest.counts, mark: mark) {
                throw refusal
            }
            if let mark, manifest.commits == mark.commits { return }
            try writeMark(StoreMark(storeID: storeID, commits: manifest.commits, contacts: manifest.counts.contacts))
        }
    }

    private func readMark() throws -> StoreMark? { try Self.readMark(secretStore, item: markItem) }

    private func writeMark(_ mark: StoreMark) throws {
        try secretStore.put(markItem, bytes: mark.encoded(), accessibility: .whenUnlockedThisDeviceOnly)
    }

    /// Opens the store at `path` as it is, after a rollback, a replaced file
    /// or lost rows made opening fail, and says what was lost: the file's
    /// manifest and photo fields are made to agree with the rows it holds,
    /// and this device's mark is set to it. The person decides; a host calls
    /// this only after showing them what opening refused.
    /// Throws `.wrongIdentity` if the file belongs to another identity,
    /// `.database` if it is not a contact store or SQLite fails, or the secret
    /// store's error when the new mark cannot be saved.
    public static func acceptLoss(path: String, identity: Identity) throws -> StoreLoss {
        let store = try ContactStore(path: path, identity: identity, checking: false)
        return try store.acceptLoss()
    }

    private func acceptLoss() throws -> StoreLoss {
        var missing = RowCounts.zero
        var photosLost: UInt64 = 0
        var recorded: UInt64 = 0
        let manifest = try withLock {
            try db.transaction(.immediate) { () -> StoreManifest in
                // A manifest that does not open is as good as none.
                guard var manifest = (try? readManifestLocked()) ?? nil else {
                    let created = try createManifestLocked()
                    recorded = created.counts.contacts
                    return created
                }
                recorded = manifest.counts.contacts
                let before = db.totalChanges
                photosLost = try reconcilePhotosLocked(adoptingRows: false)
                let actual = try actualCountsLocked()
                func lack(_ a: UInt64, _ b: UInt64) -> UInt64 { a > b ? a - b : 0 }
                missing = RowCounts(
                    contacts: lack(manifest.counts.contacts, actual.contacts), photos: lack(manifest.counts.photos, actual.photos),
                    deviceSecrets: lack(manifest.counts.deviceSecrets, actual.deviceSecrets))
                if actual != manifest.counts || db.totalChanges != before {
                    try setTrackedCountsLocked(actual)
                    manifest.commits += 1
                    manifest.counts = actual
                    try writeManifestLocked(manifest)
                }
                return manifest
            }
        }
        return try secretStore.withExclusiveAccess {
            let mark = (try? readMark()) ?? nil
            let replaced = mark.map { $0.storeID != storeID } ?? false
            let lost = mark.map { !replaced && $0.commits > manifest.commits ? $0.commits - manifest.commits : 0 } ?? 0
            try writeMark(StoreMark(storeID: storeID, commits: manifest.commits, contacts: manifest.counts.contacts))
            return StoreLoss(
                replaced: replaced, commitsLost: lost,
                contactsBefore: mark.map { replaced || lost > 0 ? $0.contacts : recorded } ?? recorded,
                contactsNow: manifest.counts.contacts, missing: missing, photosMissing: photosLost)
        }
    }

    /// Writes a consistent copy of the whole store, as one file, to `path`
    /// (a backup, or the file that moves to a new device with an identity
    /// export: PROTOCOL.md 17.4). Safe while the store is in use; the copy
    /// holds what was committed when it started. The records stay sealed;
    /// the device secrets in it open only on this device. `.alreadyExists`
    /// if `path` exists: nothing is overwritten.
    package func backup(to path: String) throws {
        var st = stat()
        guard stat(path, &st) != 0 else { throw ItsMeError(.alreadyExists, "\(path) exists: a backup never overwrites a file") }
        try withLock { try db.run("VACUUM INTO ?", [.text(path)]) }
    }

    /// The largest store an export or a transfer carries, and so the
    /// largest `snapshot`: 64 MiB.
    package static let maxSnapshotCount = 64 << 20

    /// The whole store as one file's bytes, as an export of format version
    /// 2 or a device transfer carries it (PROTOCOL.md 17): a `backup` into
    /// a private temporary directory, read back and removed. `.invalidArgument`
    /// if it is larger than the 64 MiB they carry, `.database` if SQLite
    /// or the temporary directory fails.
    public func snapshot() throws -> [UInt8] {
        let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array((base + "/itsme-snapshot-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw ItsMeError(.database, "cannot make a private temporary directory in \(base): \(String(cString: strerror(errno)))")
        }
        let directory = String(cString: made)
        let path = directory + "/contacts.db"
        defer {
            unlink(path)
            rmdir(directory)
        }
        try backup(to: path)
        let limit = ContactStore.maxSnapshotCount
        let bytes: [UInt8]
        do {
            guard let read = try RegularFile.contents(of: path, limit: limit) else {
                throw ItsMeError(.database, "the snapshot of the contact store vanished")
            }
            bytes = read
        } catch let error as RegularFileError {
            if case .tooLarge = error.problem {
                throw ItsMeError(
                    .invalidArgument, "the contact store is larger than the \(limit >> 20) MiB an export or a transfer carries: copy the file instead")
            }
            throw ItsMeError(.database, "cannot read the snapshot of the contact store: \(error.reason)")
        }
        return bytes
    }

    /// Runs `PRAGMA integrity_check`; true when SQLite reports "ok".
    package func integrityCheck() throws -> Bool {
        try withLock { try db.query("PRAGMA integrity_check") == [[.text("ok")]] }
    }

    func field(_ tag: UInt8, _ value: [UInt8]) -> [UInt8] {
        [tag] + withUnsafeBytes(of: UInt16(value.count).bigEndian) { Array($0) } + value
    }

    func fieldLong(_ tag: UInt8, _ value: [UInt8]) -> [UInt8] {
        [tag] + withUnsafeBytes(of: UInt32(value.count).bigEndian) { Array($0) } + value
    }
}

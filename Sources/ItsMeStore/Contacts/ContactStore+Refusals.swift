// Every refusal opening a contact store can make, found before anything is
// written (docs/STORAGE.md, "A refused open changes nothing").
import Glibc
import CSQLite
import ItsMePrimitives
import ItsMeBase

extension ContactStore {
    /// Reads the file at `path` where it lies, without writing to it or
    /// creating anything beside it, and throws what opening would refuse:
    /// `.database` (not a contact store), `.wrongIdentity`, `.corruptData`
    /// (rows missing, a manifest that does not open), `.rolledBack`. Runs
    /// under the secret store's exclusive access, so no other handle raises
    /// the mark while the file is read. A missing, empty or non-regular file
    /// is left to `checkNotMissing` and `openFile`.
    ///
    /// The file is read with SQLite's `immutable=1` (no lock, no `-wal` or
    /// `-shm` opened or created) unless its `-wal` holds commits; then
    /// read-only, which sees them and creates nothing when the `-shm` is
    /// there (a log without its index, left by a crash and a removed `-shm`,
    /// makes SQLite create the index even to read).
    static func refuseBeforeOpening(path: String, identity: Identity, markItem: String) throws {
        var st = stat()
        guard stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_size >= 100 else { return }
        try identity.store.withExclusiveAccess {
            let mark = try readMark(identity.store, item: markItem)
            guard let found = try mappingDatabaseErrors({ try inspect(path: path, contactsKey: identity.contactsKey) }) else {
                // No store in the file yet (an empty database).
                if let mark { throw replaced(path: path, mark: mark, contactsNow: 0) }
                return
            }
            if let refusal = refusal(path: path, storeID: found.storeID, manifest: found.manifest, actual: found.actual, mark: mark) {
                throw refusal
            }
        }
    }

    /// What the file says of itself: nil when it holds no store yet.
    private static func inspect(
        path: String, contactsKey: borrowing SecretBytes
    ) throws -> (storeID: [UInt8], manifest: StoreManifest, actual: RowCounts)? {
        var st = stat()
        let logged = stat(path + "-wal", &st) == 0 && st.st_size > 0
        let db = try Database(path: path, mode: logged ? .readOnly : .immutable)
        return try db.transaction(.deferred) { () -> (storeID: [UInt8], manifest: StoreManifest, actual: RowCounts)? in
            let schema: [[SQLValue]]
            do {
                schema = try db.query(
                    "SELECT EXISTS (SELECT 1 FROM sqlite_master), EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta')")
            } catch let error as DatabaseError where error.code == SQLITE_NOTADB {
                throw notAStore(path, "not a SQLite database")
            }
            guard schema != [[.integer(0), .integer(0)]] else { return nil }
            guard schema == [[.integer(1), .integer(1)]] else { throw notAStore(path, "a SQLite database but not an ItsMe contact store") }
            guard let row = try db.query("SELECT value FROM meta WHERE name = 'store_id'").first, case .blob(let storeID) = row[0] else {
                return nil  // created and never finished: opening makes it a store
            }
            guard try ownerMatches(db, storeID: storeID, contactsKey: contactsKey) else { throw wrongOwner }
            let actual = try actualCounts(db)
            // No manifest (an earlier version's file, or one installed from
            // an import): opening gives it one, at commit 0, with these rows.
            var manifest = StoreManifest(commits: 0, counts: actual)
            if let row = try db.query("SELECT value FROM meta WHERE name = 'manifest'").first {
                guard case .blob(let sealed) = row[0] else { throw ItsMeError(.corruptData, "the contact store manifest is malformed") }
                manifest = try openManifest(sealed, storeID: storeID, key: contactsKey)
            }
            return (storeID, manifest, actual)
        }
    }

    static func notAStore(_ path: String, _ why: String) -> ItsMeError {
        ItsMeError(.database, "\(path) is not an ItsMe contact store (\(why))")
    }

    static let wrongOwner = ItsMeError(.wrongIdentity, "this contact store belongs to another identity")

    /// The manifest sealed in the file of the store `storeID`.
    private static func openManifest(_ sealed: [UInt8], storeID: [UInt8], key: borrowing SecretBytes) throws -> StoreManifest {
        guard sealed.count == AEAD.nonceCount + StoreManifest.size + AEAD.tagCount else {
            throw ItsMeError(.corruptData, "the contact store manifest has an impossible size \(sealed.count)")
        }
        let plain = try naming(.meta, 0) {
            try AEAD.open(
                .aes256GCM, key: key, nonce: Array(sealed[..<AEAD.nonceCount]), ciphertext: sealed[AEAD.nonceCount...],
                aad: aad(storeID: storeID, .meta, 0, version: ContactRecord.version))
        }
        return try plain.withBytes { try StoreManifest.decode($0) }
    }

    /// Rows each table of `db` holds, counted.
    static func actualCounts(_ db: Database) throws -> RowCounts {
        let row = try db.query(
            "SELECT (SELECT count(*) FROM contacts), (SELECT count(*) FROM photos), (SELECT count(*) FROM device_secrets)")
        guard row.count == 1, case .integer(let c) = row[0][0], case .integer(let p) = row[0][1], case .integer(let d) = row[0][2]
        else { throw ItsMeError(.corruptData, "contact store is malformed") }
        return RowCounts(contacts: UInt64(c), photos: UInt64(p), deviceSecrets: UInt64(d))
    }

    static func readMark(_ secretStore: any SecretStore, item: String) throws -> StoreMark? {
        guard let bytes = try secretStore.get(item) else { return nil }
        return try bytes.withBytes { try StoreMark.decode($0) }
    }

    /// Why a file whose manifest and rows are these, against the mark this
    /// device keeps for its path, may not be opened: nil if it may.
    static func refusal(path: String, storeID: [UInt8], manifest: StoreManifest, actual: RowCounts, mark: StoreMark?) -> ItsMeError? {
        guard actual == manifest.counts else {
            return ItsMeError(
                .corruptData,
                "the contact store at \(path) lacks rows its last commit recorded (it has \(actual), the commit \(manifest.counts)): "
                    + "the file was damaged or altered; accepting the loss opens it as it is")
        }
        guard let mark else { return nil }
        guard mark.storeID == storeID else { return replaced(path: path, mark: mark, contactsNow: manifest.counts.contacts) }
        guard manifest.commits >= mark.commits else {
            return ItsMeError(
                .rolledBack,
                "the contact store at \(path) is \(mark.commits - manifest.commits) committed changes behind the last "
                    + "this device saw (\(mark.contacts) contacts then, \(manifest.counts.contacts) now): it was rolled back "
                    + "(an older copy put in its place, or its -wal file lost). Accepting the loss "
                    + "opens it as it is")
        }
        return nil
    }

    private static func replaced(path: String, mark: StoreMark, contactsNow: UInt64) -> ItsMeError {
        ItsMeError(
            .rolledBack,
            "the contact store at \(path) is not the one this identity last used there (which had "
                + "\(mark.contacts) contacts); this one has \(contactsNow): it was replaced or emptied. "
                + "Accepting the loss makes it the store")
    }
}

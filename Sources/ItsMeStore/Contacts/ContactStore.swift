#if canImport(Glibc)
import Glibc
#endif
import CSQLite
import CSodium
import Synchronization
import ItsMePrimitives
import ItsMeBase

/// The encrypted contact store: one SQLite file, one sealed row per contact.
///
/// Every record is sealed with AES-256-GCM under the identity's contacts
/// key; its associated data binds it to this store (a random store id), its
/// table, its row id and its format version, so rows cannot be swapped or
/// moved into another store. Lookups go through keyed index columns (HMAC of
/// the fingerprint or identity key), never plaintext. Device secrets are
/// sealed under a separate device key that the secret store keeps "this
/// device only": a store copied to another device opens, but its device
/// secrets do not.
///
/// The file is in WAL mode with `synchronous=FULL`: a committed change
/// survives a process crash and a power loss. One serialised connection per
/// store; an instance may be used from several threads.
public final class ContactStore: @unchecked Sendable {
    package static let deviceKeyItem = "itsme.device-key"
    static let recordLabel = Array("itsme-contact-record-v1".utf8)

    enum Table: UInt8 {
        case contacts = 1
        case photos = 2
        case deviceSecrets = 3
        /// The manifest (row 0): the commit count and row counts.
        case meta = 4
    }

    /// Serialises the handle; refuses, rather than traps on, a call made
    /// from inside one of its own secret store callbacks (CheckedLock).
    private let lock = CheckedLock()
    let db: Database
    /// 16 random bytes drawn when the file was created (meta `store_id`).
    package let storeID: [UInt8]
    let contactsKey: SecretBytes
    private let indexKey: SecretBytes
    let deviceKey: SecretBytes
    let ownPublicKey: [UInt8]
    /// The secret store of the identity this store belongs to (attempt
    /// limits on typed codes live there).
    let secretStore: any SecretStore
    /// The identity key of the identity this store belongs to.
    package var ownerPublicKey: [UInt8] { ownPublicKey }
    /// Guarded scratch for decrypting records on the hot paths.
    private var scratch: SecretBytes
    /// The path of the store's SQLite file, as given to `init(path:identity:)`.
    package let path: String
    /// The secret-store item holding this store's high-water mark.
    let markItem: String
    /// Raises the mark after this handle's commits (docs/STORAGE.md, "When
    /// the mark is raised").
    let markRaiser: StoreMarkRaiser
    /// Commits closer together than this raise the mark once per interval,
    /// and at close; others raise it at once. A crash that also loses the
    /// -wal can lose unnoticed only the commits of about one interval.
    package static let markInterval = Duration.milliseconds(50)
    /// `markInterval`, or another for tests and the benchmark.
    package var markInterval: Duration {
        get { markRaiser.interval }
        set { markRaiser.interval = newValue }
    }

    static let maxRecordSize = 64 * 1024

    /// Opens (creating if missing) the store at `path` for `identity`.
    /// Fails with `.wrongIdentity` if the file belongs to another identity,
    /// `.database` if it is not a usable SQLite database or is another
    /// program's database (which is left untouched), `.corruptData` if rows
    /// its last commit recorded are missing, and `.rolledBack` if it is
    /// behind the last commit this device saw of the store at `path`, or is
    /// another store than that one (`acceptLoss` accepts either).
    public convenience init(path: String, identity: Identity) throws {
        try self.init(path: path, identity: identity, checking: true)
    }

    init(path: String, identity: Identity, checking: Bool) throws {
        self.path = path
        self.markItem = try StoreMark.item(path: path, contactsKey: identity.contactsKey)
        if checking {
            try Self.checkNotMissing(path: path, markItem: markItem, secretStore: identity.store)
            try Self.refuseBeforeOpening(path: path, identity: identity, markItem: markItem)
        }
        (db, storeID) = try Self.mappingDatabaseErrors { try Self.openDatabase(path: path, identity: identity) }
        self.contactsKey = try identity.contactsKey.copy()
        self.indexKey = try HKDF.derive(
            ikm: identity.contactsKey, salt: storeID, info: Array("itsme-store-index-v1".utf8), count: 32)
        self.deviceKey = try Self.loadOrCreateDeviceKey(identity.store)
        self.ownPublicKey = identity.publicKey
        self.secretStore = identity.store
        self.scratch = try SecretBytes(count: Self.maxRecordSize)
        self.markRaiser = StoreMarkRaiser(secretStore: identity.store, item: markItem, storeID: storeID, interval: Self.markInterval)
        if checking { try checkOnOpen() }
    }

    /// Opens the file, migrates it, and checks that it belongs to `identity`.
    private static func openDatabase(path: String, identity: Identity) throws -> (Database, [UInt8]) {
        let db = try openFile(path: path)
        // The store id and the owner check: who may open this file.
        var rng = SystemRandom()
        let freshID = rng.bytes(16)
        let storeID: [UInt8] = try db.transaction {
            if let row = try db.query("SELECT value FROM meta WHERE name = 'store_id'").first, case .blob(let id) = row[0] {
                return id
            }
            try db.run("INSERT INTO meta (name, value) VALUES ('store_id', ?)", [.blob(freshID)])
            let check = try ownerCheck(contactsKey: identity.contactsKey, storeID: freshID)
            try db.run("INSERT INTO meta (name, value) VALUES ('owner_check', ?)", [.blob(check)])
            return freshID
        }
        guard try ownerMatches(db, storeID: storeID, contactsKey: identity.contactsKey) else {
            throw wrongOwner
        }
        return (db, storeID)
    }

    /// Whether the store's owner check was made with `contactsKey`.
    static func ownerMatches(_ db: Database, storeID: [UInt8], contactsKey: borrowing SecretBytes) throws -> Bool {
        guard storeID.count == 16,
            let row = try db.query("SELECT value FROM meta WHERE name = 'owner_check'").first, case .blob(let check) = row[0]
        else { throw ItsMeError(.corruptData, "contact store metadata is missing or malformed") }
        return ConstantTime.equal(try ownerCheck(contactsKey: contactsKey, storeID: storeID), check)
    }

    /// Opens an existing store file or creates one, refusing anything that
    /// is not an ItsMe contact store, and migrates it.
    private static func openFile(path: String) throws -> Database {
        // SQLite takes a file shorter than its 100-byte header for an empty
        // database and would overwrite it: such a file is not ours.
        var st = stat()
        if stat(path, &st) == 0, st.st_size > 0, st.st_size < 100 {
            throw ItsMeError(.database, "\(path) is not an ItsMe contact store (not a SQLite database: only \(st.st_size) bytes)")
        }
        let db = try Database(path: path)
        do {
            // Another program's database is refused before anything changes:
            // a store has our meta table, a new file has no schema at all.
            guard try db.query(
                "SELECT NOT EXISTS (SELECT 1 FROM sqlite_master) OR EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta')"
            ) == [[.integer(1)]] else {
                throw notAStore(path, "a SQLite database but not an ItsMe contact store")
            }
            try db.execute("PRAGMA journal_mode = WAL")
            try db.execute("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA secure_delete = ON")
        } catch let error as DatabaseError where error.code == SQLITE_NOTADB {
            throw notAStore(path, "not a SQLite database")
        }
        try db.migrate(migrations)
        return db
    }

    deinit {
        markRaiser.close()
    }

    // MARK: Identity import

    /// What importing an identity whose contacts key is `contactsKey` finds
    /// in (and, with `adopting`, does to) the store file at `path`
    /// (PROTOCOL.md 17.4). A missing or empty file is left alone.
    public struct ImportSurvey: Equatable, Sendable {
        /// Whether the file exists and is a contact store.
        package let exists: Bool
        /// Whether the store was made for this contacts key.
        package let ownedByKey: Bool
        /// Contacts the key opens.
        public let readable: Int
        /// Contacts the key does not open (sealed under another key:
        /// deleted when adopting).
        public let unreadable: Int
        /// Contacts with device secrets, all of which adopting forgets.
        public let deviceSecrets: Int

        /// What there is to survey where no store exists.
        package static let none = ImportSurvey(exists: false, ownedByKey: true, readable: 0, unreadable: 0, deviceSecrets: 0)
    }

    /// Surveys the store at `path` for `contactsKey`; with `adopting`, also
    /// makes it the store of that key in one write transaction: contacts the
    /// key cannot open are deleted (with their photos), every device secret
    /// is deleted (they were sealed on another device, or belong to the
    /// device before the import), and the owner check is rewritten. A file
    /// that is not a contact store is refused (`.database`), untouched.
    package static func survey(path: String, contactsKey: borrowing SecretBytes, adopting: Bool) throws -> ImportSurvey {
        var st = stat()
        guard stat(path, &st) == 0, st.st_size > 0 else {
            return .none
        }
        return try mappingDatabaseErrors {
            let db = try openFile(path: path)
            return try db.transaction(adopting ? .immediate : .deferred) { () -> ImportSurvey in
                guard let row = try db.query("SELECT value FROM meta WHERE name = 'store_id'").first, case .blob(let storeID) = row[0]
                else { return ImportSurvey(exists: true, ownedByKey: true, readable: 0, unreadable: 0, deviceSecrets: 0) }
                let owned = try ownerMatches(db, storeID: storeID, contactsKey: contactsKey)
                var readable = 0
                var unreadable: [Int64] = []
                for row in try db.query("SELECT id, record FROM contacts ORDER BY id") {
                    guard case .integer(let id) = row[0], case .blob(let sealed) = row[1] else {
                        throw ItsMeError(.corruptData, "contact store row is malformed")
                    }
                    if owned || opens(sealed, storeID: storeID, row: id, key: contactsKey) {
                        readable += 1
                    } else {
                        unreadable.append(id)
                    }
                }
                guard case .integer(let secrets) = try db.query("SELECT count(*) FROM device_secrets")[0][0] else {
                    throw ItsMeError(.corruptData, "contact store is malformed")
                }
                if adopting {
                    for id in unreadable { try db.run("DELETE FROM contacts WHERE id = ?", [.integer(id)]) }
                    try db.run("DELETE FROM device_secrets", [])
                    // Sealed under the store's previous key, perhaps: the
                    // installed identity writes a new one (`acceptLoss`).
                    try db.run("DELETE FROM meta WHERE name = 'manifest'", [])
                    if !owned {
                        let check = try ownerCheck(contactsKey: contactsKey, storeID: storeID)
                        try db.run("UPDATE meta SET value = ? WHERE name = 'owner_check'", [.blob(check)])
                    }
                }
                return ImportSurvey(
                    exists: true, ownedByKey: owned, readable: readable, unreadable: unreadable.count, deviceSecrets: Int(secrets))
            }
        }
    }

    /// Whether `key` opens a sealed contact record of the store `storeID`.
    private static func opens(_ sealed: [UInt8], storeID: [UInt8], row: Int64, key: borrowing SecretBytes) -> Bool {
        guard sealed.count >= AEAD.nonceCount + AEAD.tagCount else { return false }
        let ad = aad(storeID: storeID, .contacts, row, version: ContactRecord.version)
        do {
            _ = try AEAD.open(
                .aes256GCM, key: key, nonce: Array(sealed[..<AEAD.nonceCount]), ciphertext: sealed[AEAD.nonceCount...], aad: ad)
            return true
        } catch { return false }
    }

    /// Reports SQLite's failures as the core's `.database` errors.
    static func mappingDatabaseErrors<R: ~Copyable>(_ body: () throws -> R) throws -> R {
        do { return try body() } catch let error as DatabaseError { throw error.asItsMeError }
    }

    static var migrations: [Database.Migration] {[
        Database.Migration(
            version: 1,
            sql: """
                CREATE TABLE meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);
                CREATE TABLE contacts (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    fingerprint_index BLOB NOT NULL,
                    key_index BLOB UNIQUE,
                    record BLOB NOT NULL
                );
                CREATE INDEX contacts_by_fingerprint ON contacts (fingerprint_index);
                CREATE TABLE photos (
                    contact_id INTEGER PRIMARY KEY REFERENCES contacts (id) ON DELETE CASCADE,
                    record BLOB NOT NULL
                );
                CREATE TABLE device_secrets (
                    contact_id INTEGER PRIMARY KEY REFERENCES contacts (id) ON DELETE CASCADE,
                    record BLOB NOT NULL
                );
                """),
        // Row counts kept by triggers, so that a commit can seal them in the
        // manifest without counting rows (docs/STORAGE.md).
        Database.Migration(
            version: 2,
            sql: """
                CREATE TABLE row_counts (name TEXT PRIMARY KEY, n INTEGER NOT NULL);
                INSERT INTO row_counts (name, n) VALUES
                    ('contacts', (SELECT count(*) FROM contacts)),
                    ('photos', (SELECT count(*) FROM photos)),
                    ('device_secrets', (SELECT count(*) FROM device_secrets));
                """ + ["contacts", "photos", "device_secrets"].map { table in
                    """
                    CREATE TRIGGER \(table)_inserted AFTER INSERT ON \(table)
                        BEGIN UPDATE row_counts SET n = n + 1 WHERE name = '\(table)'; END;
                    CREATE TRIGGER \(table)_deleted AFTER DELETE ON \(table)
                        BEGIN UPDATE row_counts SET n = n - 1 WHERE name = '\(table)'; END;
                    """
                }.joined()),
    ]}

    private static func ownerCheck(contactsKey: borrowing SecretBytes, storeID: [UInt8]) throws -> [UInt8] {
        let key = try HKDF.derive(ikm: contactsKey, salt: storeID, info: Array("itsme-store-owner-v1".utf8), count: 32)
        return HMACSHA256.mac(key: key, message: storeID)
    }

    /// The device-only key (never exported), created on first use.
    package static func loadOrCreateDeviceKey(_ store: any SecretStore) throws -> SecretBytes {
        try store.withExclusiveAccess {
            if let key = try store.get(deviceKeyItem) {
                guard key.count == AEAD.keyCount else {
                    throw ItsMeError(.corruptData, "the stored device key has the wrong size")
                }
                return key
            }
            var rng = SystemRandom()
            let key = try SecretBytes(randomCount: AEAD.keyCount, using: &rng)
            try store.put(deviceKeyItem, bytes: key, accessibility: .whenUnlockedThisDeviceOnly)
            return key
        }
    }

    // MARK: Sealing

    func aad(_ table: Table, _ row: Int64, version: UInt8) -> [UInt8] {
        Self.aad(storeID: storeID, table, row, version: version)
    }

    static func aad(storeID: [UInt8], _ table: Table, _ row: Int64, version: UInt8) -> [UInt8] {
        recordLabel + storeID + [table.rawValue] + ContactRecord.bigEndian(row) + [version]
    }

    /// nonce (12) | ciphertext | tag (16)
    func seal<P: ByteView & ~Copyable>(
        _ plaintext: borrowing P, table: Table, row: Int64, key: borrowing SecretBytes
    ) throws -> [UInt8] {
        var rng = SystemRandom()
        let nonce = rng.bytes(AEAD.nonceCount)
        return nonce
            + (try AEAD.seal(.aes256GCM, key: key, nonce: nonce, plaintext: plaintext, aad: aad(table, row, version: ContactRecord.version)))
    }

    /// Opens a sealed blob into the scratch buffer and hands the plaintext to
    /// `body`; the scratch is wiped afterwards. Caller holds the lock.
    func open<R: ~Copyable>(
        _ sealed: [UInt8], table: Table, row: Int64, key: borrowing SecretBytes,
        _ body: (UnsafeRawBufferPointer) throws -> R
    ) throws -> R {
        guard sealed.count >= AEAD.nonceCount + AEAD.tagCount, sealed.count - AEAD.nonceCount <= scratch.count + AEAD.tagCount
        else { throw ItsMeError(.corruptData, "sealed record \(row) has an impossible size \(sealed.count)") }
        let nonce = Array(sealed[..<AEAD.nonceCount])
        let ad = aad(table, row, version: ContactRecord.version)
        let count = try Self.naming(table, row) {
            try scratch.withMutableBytes { out in
                try AEAD.open(.aes256GCM, key: key, nonce: nonce, ciphertext: sealed[AEAD.nonceCount...], aad: ad, into: out)
            }
        }
        defer { scratch.withMutableBytes { sodium_memzero($0.baseAddress!, count) } }
        return try scratch.withBytes { try body(UnsafeRawBufferPointer(rebasing: $0.prefix(count))) }
    }

    /// Names the row in an authentication failure, so the caller can tell
    /// which record is bad.
    static func naming<R: ~Copyable>(_ table: Table, _ row: Int64, _ body: () throws -> R) throws -> R {
        do { return try body() } catch let error as ItsMeError where error.kind == .authenticationFailed {
            throw ItsMeError(
                .authenticationFailed, "\(table) record \(row) failed authentication: altered, moved, or sealed under another key")
        }
    }

    private func index(_ label: String, _ bytes: [UInt8]) -> [UInt8] {
        HMACSHA256.mac(key: indexKey, message: Array(label.utf8) + bytes)
    }

    func fingerprintIndex(_ fingerprint: String) -> [UInt8] {
        index("fingerprint:", Hex.decode(fingerprint) ?? [])
    }

    func keyIndex(_ key: [UInt8]) -> [UInt8] { index("key:", key) }

    func withLock<R: ~Copyable>(_ body: () throws -> R) throws -> R {
        try lock.withLock(reentered: ItsMeError(.invalidState, "the contact store was used from inside one of its own secret store callbacks")) {
            do { return try body() } catch let error as DatabaseError { throw error.asItsMeError }
        }
    }

}

/// This device's secret for a contact, and the contact's; during a
/// Security PIN Update also the new ones (empty when none is pending).
package struct DeviceSecrets: ~Copyable {
    package let mine: SecretBytes
    package let theirs: SecretBytes
    package let pendingMine: SecretBytes
    package let pendingTheirs: SecretBytes
    /// This side has committed: its tags use `pendingMine`.
    package let committed: Bool
    /// The peer's new secret from an earlier, interrupted update (empty
    /// when none), still accepted in its tags.
    package let previousTheirs: SecretBytes

    package var hasPending: Bool { pendingTheirs.count > 0 }

}

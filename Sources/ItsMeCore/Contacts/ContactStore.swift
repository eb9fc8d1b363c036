#if canImport(Glibc)
import Glibc
#endif
import CSQLite
import CSodium
import Synchronization

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
    public static let deviceKeyItem = "itsme.device-key"
    static let recordLabel = Array("itsme-contact-record-v1".utf8)

    enum Table: UInt8 {
        case contacts = 1
        case photos = 2
        case deviceSecrets = 3
        /// The manifest (row 0): the commit count and row counts.
        case meta = 4
    }

    private let lock = Mutex<Void>(())
    private let db: Database
    /// 16 random bytes drawn when the file was created (meta `store_id`).
    let storeID: [UInt8]
    private let contactsKey: SecretBytes
    private let indexKey: SecretBytes
    private let deviceKey: SecretBytes
    private let ownPublicKey: [UInt8]
    /// The secret store of the identity this store belongs to (attempt
    /// limits on typed codes live there).
    let secretStore: any SecretStore
    /// The identity key of the identity this store belongs to.
    var ownerPublicKey: [UInt8] { ownPublicKey }
    /// Guarded scratch for decrypting records on the hot paths.
    private var scratch: SecretBytes
    public let path: String
    /// The secret-store item holding this store's high-water mark.
    private let markItem: String
    /// When this handle last raised the mark, and the newest commit it has
    /// not raised it to yet (docs/STORAGE.md, "Commits and rollback").
    private let markState = Mutex<(lastRaise: ContinuousClock.Instant?, pending: StoreManifest?)>((nil, nil))
    /// Commits closer together than this raise the mark once per interval,
    /// and at close; others raise it at once.
    static let markInterval = Duration.seconds(2)
    /// `markInterval`, or another for tests.
    var markInterval = ContactStore.markInterval

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

    private init(path: String, identity: Identity, checking: Bool) throws {
        self.path = path
        self.markItem = try StoreMark.item(path: path, contactsKey: identity.contactsKey)
        if checking { try Self.checkNotMissing(path: path, markItem: markItem, secretStore: identity.store) }
        (db, storeID) = try Self.mappingDatabaseErrors { try Self.openDatabase(path: path, identity: identity) }
        self.contactsKey = try identity.contactsKey.copy()
        self.indexKey = try HKDF.derive(
            ikm: identity.contactsKey, salt: storeID, info: Array("itsme-store-index-v1".utf8), count: 32)
        self.deviceKey = try Self.loadOrCreateDeviceKey(identity.store)
        self.ownPublicKey = identity.publicKey
        self.secretStore = identity.store
        self.scratch = try SecretBytes(count: Self.maxRecordSize)
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
            throw ItsMeError(.wrongIdentity, "this contact store belongs to another identity")
        }
        return (db, storeID)
    }

    /// Whether the store's owner check was made with `contactsKey`.
    private static func ownerMatches(_ db: Database, storeID: [UInt8], contactsKey: borrowing SecretBytes) throws -> Bool {
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
                throw ItsMeError(.database, "\(path) is a SQLite database but not an ItsMe contact store")
            }
            try db.execute("PRAGMA journal_mode = WAL")
            try db.execute("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA secure_delete = ON")
        } catch let error as DatabaseError where error.code == SQLITE_NOTADB {
            throw ItsMeError(.database, "\(path) is not an ItsMe contact store (not a SQLite database)")
        }
        try db.migrate(migrations)
        return db
    }

    // MARK: Identity import

    /// What importing an identity whose contacts key is `contactsKey` finds
    /// in (and, with `adopting`, does to) the store file at `path`
    /// (PROTOCOL.md 17.4). A missing or empty file is left alone.
    public struct ImportSurvey: Equatable, Sendable {
        /// Whether the file exists and is a contact store.
        public let exists: Bool
        /// Whether the store was made for this contacts key.
        public let ownedByKey: Bool
        /// Contacts the key opens, and contacts it does not (sealed under
        /// another key: cleared when adopting).
        public let readable: Int
        public let unreadable: Int
        /// Contacts with device secrets, all of which adopting forgets.
        public let deviceSecrets: Int
    }

    /// Surveys the store at `path` for `contactsKey`; with `adopting`, also
    /// makes it the store of that key in one write transaction: contacts the
    /// key cannot open are deleted (with their photos), every device secret
    /// is deleted (they were sealed on another device, or belong to the
    /// device before the import), and the owner check is rewritten. A file
    /// that is not a contact store is refused (`.database`), untouched.
    static func survey(path: String, contactsKey: borrowing SecretBytes, adopting: Bool) throws -> ImportSurvey {
        var st = stat()
        guard stat(path, &st) == 0, st.st_size > 0 else {
            return ImportSurvey(exists: false, ownedByKey: true, readable: 0, unreadable: 0, deviceSecrets: 0)
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
    private static func mappingDatabaseErrors<R: ~Copyable>(_ body: () throws -> R) throws -> R {
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
    static func loadOrCreateDeviceKey(_ store: any SecretStore) throws -> SecretBytes {
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

    private func aad(_ table: Table, _ row: Int64, version: UInt8) -> [UInt8] {
        Self.aad(storeID: storeID, table, row, version: version)
    }

    private static func aad(storeID: [UInt8], _ table: Table, _ row: Int64, version: UInt8) -> [UInt8] {
        recordLabel + storeID + [table.rawValue] + ContactRecord.bigEndian(row) + [version]
    }

    /// nonce (12) | ciphertext | tag (16)
    private func seal<P: ByteView & ~Copyable>(
        _ plaintext: borrowing P, table: Table, row: Int64, key: borrowing SecretBytes
    ) throws -> [UInt8] {
        var rng = SystemRandom()
        let nonce = rng.bytes(AEAD.nonceCount)
        return nonce
            + (try AEAD.seal(.aes256GCM, key: key, nonce: nonce, plaintext: plaintext, aad: aad(table, row, version: ContactRecord.version)))
    }

    /// Opens a sealed blob into the scratch buffer and hands the plaintext to
    /// `body`; the scratch is wiped afterwards. Caller holds the lock.
    private func open<R: ~Copyable>(
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
    private static func naming<R: ~Copyable>(_ table: Table, _ row: Int64, _ body: () throws -> R) throws -> R {
        do { return try body() } catch let error as ItsMeError where error.kind == .authenticationFailed {
            throw ItsMeError(
                .authenticationFailed, "\(table) record \(row) failed authentication: altered, moved, or sealed under another key")
        }
    }

    private func index(_ label: String, _ bytes: [UInt8]) -> [UInt8] {
        HMACSHA256.mac(key: indexKey, message: Array(label.utf8) + bytes)
    }

    private func fingerprintIndex(_ fingerprint: String) -> [UInt8] {
        index("fingerprint:", Hex.decode(fingerprint) ?? [])
    }

    private func keyIndex(_ key: [UInt8]) -> [UInt8] { index("key:", key) }

    private func withLock<R: ~Copyable>(_ body: () throws -> R) throws -> R {
        try lock.withLock { _ in
            do { return try body() } catch let error as DatabaseError { throw error.asItsMeError }
        }
    }

    // MARK: Contacts

    /// Adds a contact identified by its identity key. `.alreadyExists` if
    /// a contact with that key exists; `.invalidKey` for our own key.
    public func add(
        name: String, publicKey: [UInt8], seed: borrowing SecretBytes, method: Contact.ExchangeMethod, now: Int64,
        note: String = ""
    ) throws -> Int64 {
        let new = try prepareKeyed(name: name, publicKey: publicKey, seed: seed, method: method, now: now, note: note)
        return try write { try insertLocked(new.record, fingerprint: new.fingerprint, publicKey: publicKey) }
    }

    private func prepareKeyed(
        name: String, publicKey: [UInt8], seed: borrowing SecretBytes, method: Contact.ExchangeMethod, now: Int64,
        note: String
    ) throws -> Prepared {
        try checkPeerKey(publicKey)
        let fingerprint = Fingerprint.of(publicKey: publicKey)
        let record = try prepare(
            name: name, fingerprint: fingerprint, publicKey: publicKey, seed: seed, method: method, now: now, note: note)
        return Prepared(record: record, fingerprint: fingerprint)
    }

    private func checkPeerKey(_ publicKey: [UInt8]) throws {
        guard publicKey.count == Ed25519.publicKeyCount else {
            throw ItsMeError(.invalidKey, "an identity key is \(Ed25519.publicKeyCount) bytes")
        }
        guard !ConstantTime.equal(publicKey, ownPublicKey) else {
            throw ItsMeError(.invalidKey, "a contact cannot have our own identity key")
        }
    }

    /// A validated new contact: its record, not yet sealed.
    private struct Prepared: ~Copyable {
        let record: SecretBytes
        let fingerprint: String
    }

    /// Adds a contact from the source's v5 format, which has no identity
    /// key: flagged unauthenticated, never merged with a keyed contact.
    public func addUnauthenticated(
        name: String, fingerprint: String, seed: borrowing SecretBytes, method: Contact.ExchangeMethod, now: Int64
    ) throws -> Int64 {
        guard fingerprint.utf8.count == Fingerprint.textCount, let bytes = Hex.decode(fingerprint) else {
            throw ItsMeError(.invalidArgument, "a fingerprint is 16 hex digits")
        }
        let fingerprint = Hex.encodeUpper(bytes)
        let record = try prepare(
            name: name, fingerprint: fingerprint, publicKey: nil, seed: seed, method: method, now: now, note: "")
        return try write { try insertLocked(record, fingerprint: fingerprint, publicKey: nil) }
    }

    /// Validates a new contact and builds its record.
    private func prepare(
        name: String, fingerprint: String, publicKey: [UInt8]?, seed: borrowing SecretBytes,
        method: Contact.ExchangeMethod, now: Int64, note: String
    ) throws -> SecretBytes {
        try UnixTime.check(now)
        let name = try DisplayName.validated(name)
        try Self.checkNote(note)
        guard seed.count == ContactRecord.seedCount else {
            throw ItsMeError(.invalidArgument, "a verification seed is \(ContactRecord.seedCount) bytes")
        }
        let contact = Contact(
            id: 0, name: name, fingerprint: fingerprint, publicKey: publicKey, state: .unverified,
            degradationAcknowledged: false, exchangeMethod: method, createdAt: now, verifiedAt: nil, lastWindow: nil,
            awaitingUntil: nil, note: note)
        return try ContactRecord.encode(contact, seed: seed)
    }

    /// Inserts a sealed record; the caller holds the lock inside a write transaction.
    private func insertLocked(_ record: borrowing SecretBytes, fingerprint: String, publicKey: [UInt8]?) throws -> Int64 {
        if let key = publicKey,
            !(try db.query("SELECT id FROM contacts WHERE key_index = ?", [.blob(keyIndex(key))]).isEmpty)
        {
            throw ItsMeError(.alreadyExists, "a contact with this identity key exists")
        }
        // AUTOINCREMENT: the next id is above every id ever used, so the row
        // binding is never reused.
        let last = try db.query("SELECT seq FROM sqlite_sequence WHERE name = 'contacts'").first
        let id: Int64
        if case .integer(let seq)? = last?.first { id = seq + 1 } else { id = 1 }
        let sealed = try seal(record, table: .contacts, row: id, key: contactsKey)
        try db.run(
            "INSERT INTO contacts (id, fingerprint_index, key_index, record) VALUES (?, ?, ?, ?)",
            [.integer(id), .blob(fingerprintIndex(fingerprint)), publicKey.map { .blob(keyIndex($0)) } ?? .null, .blob(sealed)])
        return id
    }

    /// Adds in one write transaction, for bulk imports: one commit (one
    /// fsync) for all. If `body` throws, nothing it added is kept.
    public func batch<R>(_ body: (borrowing Batch) throws -> R) throws -> R {
        try write { try body(Batch(store: self)) }
    }

    /// Adds contacts inside `ContactStore.batch`.
    public struct Batch: ~Copyable {
        fileprivate let store: ContactStore

        public func add(
            name: String, publicKey: [UInt8], seed: borrowing SecretBytes, method: Contact.ExchangeMethod, now: Int64,
            note: String = ""
        ) throws -> Int64 {
            let new = try store.prepareKeyed(
                name: name, publicKey: publicKey, seed: seed, method: method, now: now, note: note)
            return try store.insertLocked(new.record, fingerprint: new.fingerprint, publicKey: publicKey)
        }
    }

    static func checkNote(_ note: String) throws {
        guard note.utf8.count <= Contact.maxNoteBytes else {
            throw ItsMeError(.invalidArgument, "a note is at most \(Contact.maxNoteBytes) bytes")
        }
    }

    private func decode(id: Int64, sealed: [UInt8]) throws -> Contact {
        try open(sealed, table: .contacts, row: id, key: contactsKey) { try ContactRecord.decode($0, id: id) }
    }

    private func sealedRecord(_ id: Int64) throws -> [UInt8] {
        guard let row = try db.query("SELECT record FROM contacts WHERE id = ?", [.integer(id)]).first,
            case .blob(let sealed) = row[0]
        else { throw ItsMeError(.notFound, "no contact with id \(id)") }
        return sealed
    }

    public func contact(id: Int64) throws -> Contact {
        try withLock { try decode(id: id, sealed: try sealedRecord(id)) }
    }

    public func contact(publicKey: [UInt8]) throws -> Contact {
        guard publicKey.count == Ed25519.publicKeyCount else {
            throw ItsMeError(.invalidArgument, "an identity key is \(Ed25519.publicKeyCount) bytes, got \(publicKey.count)")
        }
        return try withLock {
            guard let row = try db.query("SELECT id, record FROM contacts WHERE key_index = ?", [.blob(keyIndex(publicKey))]).first,
                case .integer(let id) = row[0], case .blob(let sealed) = row[1]
            else { throw ItsMeError(.notFound, "no contact with this identity key") }
            // The index columns are not sealed: check the record agrees.
            let contact = try decode(id: id, sealed: sealed)
            guard contact.publicKey == publicKey else { throw Self.indexMismatch(id) }
            return contact
        }
    }

    /// Contacts with this fingerprint: keyed contacts first, then any
    /// unauthenticated ones.
    public func contacts(fingerprint: String) throws -> [Contact] {
        guard fingerprint.utf8.count == Fingerprint.textCount, Hex.decode(fingerprint) != nil else {
            throw ItsMeError(.invalidArgument, "a fingerprint is 16 hex digits")
        }
        return try withLock {
            let statement = try db.prepare(
                "SELECT id, record FROM contacts WHERE fingerprint_index = ? ORDER BY key_index IS NULL, id")
            try statement.bind([.blob(fingerprintIndex(fingerprint.uppercased()))])
            var found: [Contact] = []
            while try statement.step() {
                let contact = try decode(id: statement.int64(0), sealed: statement.blob(1) ?? [])
                guard contact.fingerprint == fingerprint.uppercased() else { throw Self.indexMismatch(contact.id) }
                found.append(contact)
            }
            return found
        }
    }

    private static func indexMismatch(_ id: Int64) -> ItsMeError {
        ItsMeError(.authenticationFailed, "the lookup index of contact \(id) does not match its record: the file was altered")
    }

    /// Up to `limit` contacts with ids above `afterID`, in id order: pass
    /// the last id of one page to get the next. A record that fails
    /// authentication fails the call (with its id); it is never skipped.
    public func list(afterID: Int64 = 0, limit: Int = Int.max) throws -> [Contact] {
        try withLock {
            let statement = try db.prepare("SELECT id, record FROM contacts WHERE id > ? ORDER BY id LIMIT ?")
            try statement.bind([.integer(afterID), .integer(Int64(clamping: max(limit, 0)))])
            var page: [Contact] = []
            while try statement.step() {
                page.append(try decode(id: statement.int64(0), sealed: statement.blob(1) ?? []))
            }
            return page
        }
    }

    public func count() throws -> Int {
        try withLock {
            guard case .integer(let n)? = try db.query("SELECT count(*) FROM contacts").first?.first else { return 0 }
            return Int(n)
        }
    }

    /// Reads, changes and re-seals one record in one write transaction; the
    /// seed and fields unknown to this version are kept.
    private func modify(_ id: Int64, _ change: (inout Contact) throws -> Void) throws {
        try write { try modifyLocked(id, newSeed: nil, change) }
    }

    /// `modify` for a caller that holds the lock inside a write transaction;
    /// `newSeed`, when given, replaces the stored seed.
    private func modifyLocked(
        _ id: Int64, newSeed: UnsafeRawBufferPointer?, _ change: (inout Contact) throws -> Void
    ) throws {
        let sealed = try sealedRecord(id)
        var seed = try SecretBytes(count: ContactRecord.seedCount)
        var contact = try seed.withMutableBytes { s in
            try open(sealed, table: .contacts, row: id, key: contactsKey) {
                try ContactRecord.decode($0, id: id, seedInto: s)
            }
        }
        if let newSeed {
            guard newSeed.count == ContactRecord.seedCount else {
                throw ItsMeError(.invalidArgument, "a verification seed is \(ContactRecord.seedCount) bytes")
            }
            seed.withMutableBytes { $0.copyMemory(from: newSeed) }
        }
        try change(&contact)
        let record = try ContactRecord.encode(contact, seed: seed)
        try db.run(
            "UPDATE contacts SET record = ? WHERE id = ?",
            [.blob(try seal(record, table: .contacts, row: id, key: contactsKey)), .integer(id)])
    }

    /// Saves name, state, acknowledgement, verification time and note.
    /// The identity key, fingerprint, exchange method, creation time and
    /// last window cannot change this way.
    public func update(_ contact: Contact) throws {
        let name = try DisplayName.validated(contact.name)
        try Self.checkNote(contact.note)
        try modify(contact.id) { stored in
            try Self.checkStateChange(stored, to: contact.state)
            stored.name = name
            stored.state = contact.state
            stored.degradationAcknowledged = contact.degradationAcknowledged
            stored.verifiedAt = contact.verifiedAt
            stored.note = contact.note
        }
    }

    /// Renames a contact, changing nothing else (one read-modify-write).
    public func setName(id: Int64, _ name: String) throws {
        let name = try DisplayName.validated(name)
        try modify(id) { $0.name = name }
    }

    /// Replaces a contact's note, changing nothing else.
    public func setNote(id: Int64, _ note: String) throws {
        try Self.checkNote(note)
        try modify(id) { $0.note = note }
    }

    /// Sets the state; `verified` also records `now` as the verification time.
    /// `.invalidState` for `awaitingPeer`, into or out of: only the
    /// exchange that added the contact moves it (PROTOCOL.md 8.1).
    public func setState(id: Int64, _ state: Contact.State, acknowledged: Bool, now: Int64) throws {
        try UnixTime.check(now)
        try modify(id) { c in
            try Self.checkStateChange(c, to: state)
            c.state = state
            c.degradationAcknowledged = state == .degraded && acknowledged
            if state == .verified { c.verifiedAt = now }
        }
    }

    static func checkStateChange(_ c: Contact, to state: Contact.State) throws {
        guard c.state != .awaitingPeer || state == .awaitingPeer else {
            throw ItsMeError(.invalidState, "contact \(c.id) awaits the peer's decision on the SAS; only its exchange can settle it")
        }
        guard state != .awaitingPeer || c.state == .awaitingPeer else {
            throw ItsMeError(.invalidState, "only an exchange puts a contact in the state awaiting the peer")
        }
    }

    /// Refuses a contact awaiting the peer for verification (voice, Online
    /// Verify, PIN Update, degradation code): it is not a contact yet.
    static func checkSettled(_ c: Contact) throws {
        guard c.state != .awaitingPeer else {
            throw ItsMeError(
                .invalidState, "contact \(c.id) is awaiting the peer's confirmation of the SAS: it cannot be used until it arrives")
        }
    }

    /// Deletes every contact still awaiting the peer after its deadline
    /// (`now` more than `awaitingUntil`): the peer's confirmation did not
    /// come within the exchange's lifetime (PROTOCOL.md 8.1). Returns how
    /// many were deleted. Exchanges call it; a host may too, at any time.
    @discardableResult
    public func expireAwaiting(now: Int64) throws -> Int {
        try UnixTime.check(now)
        return try write {
            var expired: [Int64] = []
            for row in try db.query("SELECT id, record FROM contacts") {
                guard case .integer(let id) = row[0], case .blob(let sealed) = row[1] else { continue }
                let c = try decode(id: id, sealed: sealed)
                if c.state == .awaitingPeer, let until = c.awaitingUntil, now > until { expired.append(id) }
            }
            for id in expired { try db.run("DELETE FROM contacts WHERE id = ?", [.integer(id)]) }
            return expired.count
        }
    }

    /// An exchange's side confirmed a new contact before the peer did.
    func setAwaiting(id: Int64, until: Int64) throws {
        try modify(id) { c in
            guard c.state == .unverified || c.state == .awaitingPeer else {
                throw ItsMeError(.invalidState, "contact \(id) is \(c.state), not newly added")
            }
            c.state = .awaitingPeer
            c.awaitingUntil = until
        }
    }

    /// The peer's confirmation arrived: a contact awaiting it (or one the
    /// QR exchange added unverified) becomes verified.
    func settleVerified(id: Int64, now: Int64) throws {
        try UnixTime.check(now)
        try modify(id) { c in
            c.state = .verified
            c.awaitingUntil = nil
            c.degradationAcknowledged = false
            c.verifiedAt = now
        }
    }

    /// Marks voice-verification window `window` used for this contact:
    /// succeeds only if it is greater than the last window used, atomically
    /// (a write transaction), so two handles or processes racing for one
    /// window cannot both win. `.windowUsed` otherwise.
    public func useWindow(id: Int64, window: Int64) throws {
        guard window >= 0, window <= VoiceProtocol.maxWindow else {
            throw ItsMeError(.invalidArgument, "a window is 0 to \(VoiceProtocol.maxWindow) (the year 9999)")
        }
        try modify(id) { c in
            if let last = c.lastWindow, window <= last {
                throw ItsMeError(.windowUsed, "window \(window) is not after the last one used (\(last))")
            }
            c.lastWindow = window
        }
    }

    public func delete(id: Int64) throws {
        try write {
            try db.run("DELETE FROM contacts WHERE id = ?", [.integer(id)])
            guard db.changes == 1 else { throw ItsMeError(.notFound, "no contact with id \(id)") }
        }
    }

    /// The contact's verification seed.
    public func seed(id: Int64) throws -> SecretBytes {
        try withLock {
            let sealed = try sealedRecord(id)
            var seed = try SecretBytes(count: ContactRecord.seedCount)
            _ = try seed.withMutableBytes { s in
                try open(sealed, table: .contacts, row: id, key: contactsKey) { try ContactRecord.decode($0, id: id, seedInto: s) }
            }
            return seed
        }
    }

    // MARK: Photos and device secrets

    public static let maxPhotoBytes = 512 * 1024

    /// Sets (or with an empty photo and filename, removes) the photo.
    public func setPhoto(id: Int64, photo: [UInt8], filename: String) throws {
        guard photo.count <= Self.maxPhotoBytes else {
            throw ItsMeError(.invalidArgument, "a photo is at most \(Self.maxPhotoBytes) bytes")
        }
        guard PhotoFilename.isValid(filename) else { throw ItsMeError(.invalidArgument, PhotoFilename.rule) }
        try write {
            _ = try sealedRecord(id)
            try setPhotoLocked(id: id, photo: photo, filename: filename)
        }
    }

    /// Writes or deletes the photo row and sets the contact record's photo
    /// field to match, in the caller's write transaction.
    private func setPhotoLocked(id: Int64, photo: [UInt8], filename: String) throws {
        let has = !(photo.isEmpty && filename.isEmpty)
        if has {
            let plain = [ContactRecord.version] + field(1, Array(filename.utf8)) + fieldLong(2, photo)
            let sealed = try seal(plain, table: .photos, row: id, key: contactsKey)
            try db.run(
                "INSERT INTO photos (contact_id, record) VALUES (?, ?) ON CONFLICT (contact_id) DO UPDATE SET record = excluded.record",
                [.integer(id), .blob(sealed)])
        } else {
            try db.run("DELETE FROM photos WHERE contact_id = ?", [.integer(id)])
        }
        try modifyLocked(id, newSeed: nil) { $0.hasPhoto = has }
    }

    /// Applies a profile the contact shared (PROTOCOL.md 18.4), in one
    /// transaction: its name, if it has one, and its photo and filename, if
    /// it has a photo. The host asks the person first.
    public func applyProfile(id: Int64, _ profile: ProfileRecord) throws {
        try write {
            _ = try sealedRecord(id)
            if !profile.name.isEmpty { try modifyLocked(id, newSeed: nil) { $0.name = profile.name } }
            if !profile.photo.isEmpty { try setPhotoLocked(id: id, photo: profile.photo, filename: profile.photoFilename) }
        }
    }

    /// The photo and its filename; `.notFound` if the contact has none.
    /// `.corruptData` if the contact's record and the photo rows disagree
    /// (a photo row lost or moved): a lost photo is never taken for none.
    public func photo(id: Int64) throws -> (photo: [UInt8], filename: String) {
        try withLock {
            let claimed = try decode(id: id, sealed: try sealedRecord(id)).hasPhoto
            let row = try db.query("SELECT record FROM photos WHERE contact_id = ?", [.integer(id)]).first
            guard let row, case .blob(let sealed) = row[0] else {
                if claimed {
                    throw ItsMeError(.corruptData, "the photo of contact \(id) is missing from the store: the file was damaged or altered")
                }
                throw ItsMeError(.notFound, "contact \(id) has no photo")
            }
            guard claimed else {
                throw ItsMeError(.corruptData, "contact \(id) has a photo row its record does not claim: the file was damaged or altered")
            }
            // Photos can exceed the scratch buffer: open into fresh memory.
            let nonce = Array(sealed.prefix(AEAD.nonceCount))
            let plain = try Self.naming(.photos, id) {
                try AEAD.open(
                    .aes256GCM, key: contactsKey, nonce: nonce, ciphertext: sealed.dropFirst(AEAD.nonceCount),
                    aad: aad(.photos, id, version: ContactRecord.version))
            }
            return try plain.withBytes { b in
                var r = RecordReader(b, what: "photo record")
                guard try r.byte() == ContactRecord.version, try r.byte() == 1 else {
                    throw ItsMeError(.corruptData, "photo record \(id) is malformed")
                }
                let filename = String(decoding: try r.slice(Int(try r.uint16())), as: UTF8.self)
                guard try r.byte() == 2 else { throw ItsMeError(.corruptData, "photo record \(id) is malformed") }
                let photo = try r.array(Int(try r.uint32()))
                try r.finish()
                return (photo, filename)
            }
        }
    }

    public static let deviceSecretCount = 16

    /// Stores this device's secret for the contact and theirs, sealed under
    /// the device key (never exported).
    public func setDeviceSecrets(id: Int64, mine: borrowing SecretBytes, theirs: borrowing SecretBytes) throws {
        try Self.checkDeviceSecrets(mine, theirs)
        try write {
            _ = try sealedRecord(id)
            try writeDeviceSecretsLocked(id: id, mine: mine, theirs: theirs)
        }
    }

    /// Forgets every device secret of every contact, as a new device holds
    /// none: each peer then sees a changed device at the next verification
    /// (PROTOCOL.md 10.1), and this device checks no tags until a
    /// degradation code or a Security PIN Update gives it secrets again.
    /// The freed pages are zeroed (secure_delete) and the log truncated.
    /// Returns how many contacts had secrets.
    @discardableResult
    public func forgetDeviceSecrets() throws -> Int {
        let count = try write { () -> Int in
            guard case .integer(let n) = try db.query("SELECT count(*) FROM device_secrets")[0][0] else { return 0 }
            try db.run("DELETE FROM device_secrets", [])
            return Int(n)
        }
        try checkpoint()
        return count
    }

    private func writeDeviceSecretsLocked(id: Int64, mine: borrowing SecretBytes, theirs: borrowing SecretBytes) throws {
        try writeDeviceSecretsLocked(
            id: id, mine: mine, theirs: theirs, pendingMine: try SecretBytes(count: 0),
            pendingTheirs: try SecretBytes(count: 0), committed: false, previousTheirs: try SecretBytes(count: 0))
    }

    /// Record (version 1): fields tag (1) | length (2) | value: 1 mine,
    /// 2 theirs; during a Security PIN Update 3 new mine, 4 new theirs,
    /// 5 committed (one byte); and 6 the peer's new secret from an earlier,
    /// interrupted update, still accepted.
    private func writeDeviceSecretsLocked(
        id: Int64, mine: borrowing SecretBytes, theirs: borrowing SecretBytes, pendingMine: borrowing SecretBytes,
        pendingTheirs: borrowing SecretBytes, committed: Bool, previousTheirs: borrowing SecretBytes
    ) throws {
        let pending = pendingTheirs.count > 0 || pendingMine.count > 0
        let previous = previousTheirs.count > 0
        var w = try RecordWriter(
            count: 1 + 3 + mine.count + 3 + theirs.count + (pending ? 3 + pendingMine.count + 3 + pendingTheirs.count + 4 : 0)
                + (previous ? 3 + previousTheirs.count : 0))
        w.append(ContactRecord.version)
        w.append(UInt8(1))
        w.append(UInt16(mine.count))
        w.append(mine)
        w.append(UInt8(2))
        w.append(UInt16(theirs.count))
        w.append(theirs)
        if pending {
            w.append(UInt8(3))
            w.append(UInt16(pendingMine.count))
            w.append(pendingMine)
            w.append(UInt8(4))
            w.append(UInt16(pendingTheirs.count))
            w.append(pendingTheirs)
            w.append(UInt8(5))
            w.append(UInt16(1))
            w.append(UInt8(committed ? 1 : 0))
        }
        if previous {
            w.append(UInt8(6))
            w.append(UInt16(previousTheirs.count))
            w.append(previousTheirs)
        }
        let plain = w.finish()
        let sealed = try seal(plain, table: .deviceSecrets, row: id, key: deviceKey)
        try db.run(
            "INSERT INTO device_secrets (contact_id, record) VALUES (?, ?) ON CONFLICT (contact_id) DO UPDATE SET record = excluded.record",
            [.integer(id), .blob(sealed)])
    }

    /// Empty means unknown: a device that lost its secrets (a new one)
    /// and has not learnt the other side's yet.
    private static func checkDeviceSecrets(_ mine: borrowing SecretBytes, _ theirs: borrowing SecretBytes) throws {
        guard mine.count <= 64, theirs.count <= 64, mine.count + theirs.count > 0 else {
            throw ItsMeError(.invalidArgument, "a device secret is at most 64 bytes, and not both may be empty")
        }
    }

    // MARK: Exchange results

    /// Adds the contact an exchange produced, with its device secrets, in one
    /// write transaction. `publicKey` nil adds an unauthenticated contact
    /// (source format) under `fingerprint`.
    func addExchanged(
        name: String, publicKey: [UInt8]?, fingerprint: String, seed: borrowing SecretBytes, mine: borrowing SecretBytes,
        theirs: borrowing SecretBytes, method: Contact.ExchangeMethod, now: Int64
    ) throws -> Int64 {
        try Self.checkDeviceSecrets(mine, theirs)
        if let publicKey { try checkPeerKey(publicKey) }
        let fp = publicKey.map { Fingerprint.of(publicKey: $0) } ?? fingerprint
        let record = try prepare(name: name, fingerprint: fp, publicKey: publicKey, seed: seed, method: method, now: now, note: "")
        return try write {
            let id = try insertLocked(record, fingerprint: fp, publicKey: publicKey)
            try writeDeviceSecretsLocked(id: id, mine: mine, theirs: theirs)
            return id
        }
    }

    /// Replaces the seed, device secrets and exchange method of the stored
    /// contact with identity key `publicKey` after a confirmed re-exchange,
    /// and marks it verified, in one write transaction. The old seed is
    /// overwritten (secure_delete zeroes the freed pages, and the log is
    /// checkpointed and truncated).
    func replaceExchanged(
        id: Int64, publicKey: [UInt8], seed: borrowing SecretBytes, mine: borrowing SecretBytes,
        theirs: borrowing SecretBytes, method: Contact.ExchangeMethod, now: Int64
    ) throws {
        try UnixTime.check(now)
        try Self.checkDeviceSecrets(mine, theirs)
        try write {
            try seed.withBytes { newSeed in
                try modifyLocked(id, newSeed: newSeed) { c in
                    guard let key = c.publicKey, ConstantTime.equal(key, publicKey) else {
                        throw ItsMeError(.invalidState, "contact \(id) no longer has the exchanged identity key")
                    }
                    c.exchangeMethod = method
                    c.state = .verified
                    c.awaitingUntil = nil
                    c.degradationAcknowledged = false
                    c.verifiedAt = now
                }
            }
            try writeDeviceSecretsLocked(id: id, mine: mine, theirs: theirs)
        }
        try checkpoint()
    }

    /// Copies the log back into the file and truncates it, so that the old
    /// page images in it (zeroed in the file by secure_delete) go too. Best
    /// effort: a reader may hold the log.
    private func checkpoint() throws {
        try withLock { _ = try? db.query("PRAGMA wal_checkpoint(TRUNCATE)") }
    }

    /// This device's and the contact's device secrets. `.notFound` if none
    /// were stored; `.authenticationFailed` if they were sealed on another
    /// device (a store copied along with an identity export).
    public func deviceSecrets(id: Int64) throws -> DeviceSecrets {
        try withLock { try deviceSecretsLocked(id: id) }
    }

    private func deviceSecretsLocked(id: Int64) throws -> DeviceSecrets {
        guard let row = try db.query("SELECT record FROM device_secrets WHERE contact_id = ?", [.integer(id)]).first,
            case .blob(let sealed) = row[0]
        else { throw ItsMeError(.notFound, "no device secrets for contact \(id)") }
        do {
            return try open(sealed, table: .deviceSecrets, row: id, key: deviceKey) { b in
                func bad() -> ItsMeError { ItsMeError(.corruptData, "device secrets record \(id) is malformed") }
                var r = RecordReader(b, what: "device secrets record")
                guard try r.byte() == ContactRecord.version, try r.byte() == 1 else { throw bad() }
                let mine = try r.secret(Int(try r.uint16()))
                guard try r.byte() == 2 else { throw bad() }
                let theirs = try r.secret(Int(try r.uint16()))
                var pendingMine = try SecretBytes(count: 0), pendingTheirs = try SecretBytes(count: 0)
                var previousTheirs = try SecretBytes(count: 0)
                var committed: UInt8 = 0
                var tag = r.isAtEnd ? nil : try r.byte()
                if tag == 3 {
                    pendingMine = try r.secret(Int(try r.uint16()))
                    guard try r.byte() == 4 else { throw bad() }
                    pendingTheirs = try r.secret(Int(try r.uint16()))
                    guard try r.byte() == 5, try r.uint16() == 1 else { throw bad() }
                    committed = try r.byte()
                    guard committed <= 1 else { throw bad() }
                    tag = r.isAtEnd ? nil : try r.byte()
                }
                if tag == 6 {
                    previousTheirs = try r.secret(Int(try r.uint16()))
                    tag = nil
                }
                guard tag == nil else { throw bad() }
                try r.finish()
                return DeviceSecrets(
                    mine: mine, theirs: theirs, pendingMine: pendingMine, pendingTheirs: pendingTheirs, committed: committed == 1,
                    previousTheirs: previousTheirs)
            }
        } catch let error as ItsMeError where error.kind == .authenticationFailed {
            throw ItsMeError(
                .authenticationFailed, "the device secrets of contact \(id) were sealed on another device or tampered with")
        }
    }

    /// The secrets for tags; all empty on a device that cannot read them
    /// (a new one) or for a contact added without them.
    func tagSecrets(id: Int64) throws -> TagSecrets {
        var found: DeviceSecrets?
        do { found = try deviceSecrets(id: id) } catch let e as ItsMeError where e.kind == .notFound || e.kind == .authenticationFailed {
            found = nil
        }
        guard let d = found.take() else {
            return try TagSecrets.none()
        }
        return TagSecrets(
            speaking: try SecretBox(copying: d.committed ? d.pendingMine : d.mine), theirs: try SecretBox(copying: d.theirs),
            theirsPending: try SecretBox(copying: d.pendingTheirs), theirsPrevious: try SecretBox(copying: d.previousTheirs),
            committed: d.committed)
    }

    // MARK: Security PIN Update

    /// Stores new device secrets from a Security PIN Update as pending,
    /// beside the current ones (unknown, empty, on a device that cannot
    /// read them), in one transaction. `committed`: this side says the new
    /// secret from now on.
    func setPendingDeviceSecrets(id: Int64, mine: borrowing SecretBytes, theirs: borrowing SecretBytes, committed: Bool)
        throws
    {
        guard (1...64).contains(mine.count), (1...64).contains(theirs.count) else {
            throw ItsMeError(.invalidArgument, "a new device secret is 1 to 64 bytes")
        }
        try write {
            _ = try sealedRecord(id)
            var current: DeviceSecrets?
            do { current = try deviceSecretsLocked(id: id) } catch let e as ItsMeError
                where e.kind == .notFound || e.kind == .authenticationFailed
            { current = nil }
            guard let c = current.take() else {
                let none = try SecretBytes(count: 0)
                return try writeDeviceSecretsLocked(
                    id: id, mine: none, theirs: none, pendingMine: mine, pendingTheirs: theirs, committed: committed,
                    previousTheirs: none)
            }
            // An earlier update may be unresolved: keep saying what this
            // side says now, and keep accepting the new secret the peer
            // may already say (PROTOCOL.md 10.3).
            let saying = try c.committed ? c.pendingMine.copy() : c.mine.copy()
            let previous = try c.hasPending ? c.pendingTheirs.copy() : c.previousTheirs.copy()
            try writeDeviceSecretsLocked(
                id: id, mine: saying, theirs: c.theirs, pendingMine: mine, pendingTheirs: theirs, committed: committed,
                previousTheirs: previous)
        }
    }

    /// Marks a pending update committed (this side now says its new secret).
    func commitPendingDeviceSecrets(id: Int64) throws {
        try write {
            let d = try deviceSecretsLocked(id: id)
            guard d.hasPending else { throw ItsMeError(.invalidState, "no Security PIN Update is pending for contact \(id)") }
            try writeDeviceSecretsLocked(
                id: id, mine: d.mine, theirs: d.theirs, pendingMine: d.pendingMine, pendingTheirs: d.pendingTheirs,
                committed: true, previousTheirs: d.previousTheirs)
        }
    }

    /// The peer was heard using the new secret of an earlier, interrupted
    /// update: it becomes their current one.
    func adoptPreviousDeviceSecret(id: Int64) throws {
        try write {
            let d = try deviceSecretsLocked(id: id)
            guard d.previousTheirs.count > 0 else { return }
            try writeDeviceSecretsLocked(
                id: id, mine: d.mine, theirs: d.previousTheirs, pendingMine: d.pendingMine, pendingTheirs: d.pendingTheirs,
                committed: d.committed, previousTheirs: try SecretBytes(count: 0))
        }
    }

    /// The peer was heard using its new secret: the new secrets replace the
    /// old ones and nothing is pending any more.
    func finalizePendingDeviceSecrets(id: Int64) throws {
        try write {
            let d = try deviceSecretsLocked(id: id)
            guard d.hasPending else { return }
            try writeDeviceSecretsLocked(id: id, mine: d.pendingMine, theirs: d.pendingTheirs)
        }
    }

    // MARK: Commits, rollback and lost rows

    /// Runs `body` in one write transaction which, if it changed anything,
    /// also counts the commit in the manifest; then raises the store's mark
    /// in the secret store. The only way this class writes.
    private func write<R>(_ body: () throws -> R) throws -> R {
        let (result, manifest) = try withLock {
            try db.transaction(.immediate) { () -> (R, StoreManifest?) in
                let before = db.totalChanges
                let result = try body()
                return (result, db.totalChanges == before ? nil : try commitManifestLocked())
            }
        }
        if let manifest { markCommitted(manifest) }
        return result
    }

    /// After a commit: raises the mark now, unless this handle raised it
    /// less than `markInterval` ago; then the commit waits for the next
    /// commit after the interval, or for the handle's close.
    private func markCommitted(_ manifest: StoreManifest) {
        let now = ContinuousClock.now
        let due: StoreManifest? = markState.withLock { state in
            let newest = state.pending.map { $0.commits > manifest.commits ? $0 : manifest } ?? manifest
            if let last = state.lastRaise, now - last < markInterval {
                state.pending = newest
                return nil
            }
            state.lastRaise = now
            state.pending = nil
            return newest
        }
        if let due { raiseMark(due) }
    }

    deinit {
        if let pending = markState.withLock({ $0.pending }) { raiseMark(pending) }
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
    private func actualCountsLocked() throws -> RowCounts {
        let row = try db.query(
            "SELECT (SELECT count(*) FROM contacts), (SELECT count(*) FROM photos), (SELECT count(*) FROM device_secrets)")
        guard row.count == 1, case .integer(let c) = row[0][0], case .integer(let p) = row[0][1], case .integer(let d) = row[0][2]
        else { throw ItsMeError(.corruptData, "contact store is malformed") }
        return RowCounts(contacts: UInt64(c), photos: UInt64(p), deviceSecrets: UInt64(d))
    }

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
    private static func checkNotMissing(path: String, markItem: String, secretStore: any SecretStore) throws {
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
    private func checkOnOpen() throws {
        let manifest = try withLock { () -> StoreManifest in
            let (found, actual, tracked) = try db.transaction(.deferred) {
                (try readManifestLocked(), try actualCountsLocked(), try trackedCountsLocked())
            }
            guard let manifest = found else {
                return try db.transaction(.immediate) { try readManifestLocked() ?? createManifestLocked() }
            }
            guard actual == manifest.counts else {
                throw ItsMeError(
                    .corruptData,
                    "the contact store at \(path) lacks rows its last commit recorded (it has \(actual), the commit \(manifest.counts)): "
                        + "the file was damaged or altered; accepting the loss opens it as it is")
            }
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
            if let mark {
                guard mark.storeID == storeID else {
                    throw ItsMeError(
                        .rolledBack,
                        "the contact store at \(path) is not the one this identity last used there (which had "
                            + "\(mark.contacts) contacts); this one has \(manifest.counts.contacts): it was replaced or emptied. "
                            + "Accepting the loss makes it the store")
                }
                guard manifest.commits >= mark.commits else {
                    throw ItsMeError(
                        .rolledBack,
                        "the contact store at \(path) is \(mark.commits - manifest.commits) committed changes behind the last "
                            + "this device saw (\(mark.contacts) contacts then, \(manifest.counts.contacts) now): it was rolled back "
                            + "(an older copy put in its place, or its -wal file lost). Accepting the loss "
                            + "opens it as it is")
                }
                if manifest.commits == mark.commits { return }
            }
            try writeMark(StoreMark(storeID: storeID, commits: manifest.commits, contacts: manifest.counts.contacts))
        }
    }

    private func readMark() throws -> StoreMark? {
        guard let bytes = try secretStore.get(markItem) else { return nil }
        return try bytes.withBytes { try StoreMark.decode($0) }
    }

    private func writeMark(_ mark: StoreMark) throws {
        try secretStore.put(markItem, bytes: mark.encoded(), accessibility: .whenUnlockedThisDeviceOnly)
    }

    /// Raises the mark after a commit. Best effort: the commit stands if the
    /// secret store fails, and the mark then trails until the next commit
    /// or open raises it (a file ahead of its mark is fine).
    private func raiseMark(_ manifest: StoreManifest) {
        try? secretStore.withExclusiveAccess {
            if let mark = try readMark(), mark.storeID != storeID || mark.commits >= manifest.commits { return }
            try writeMark(StoreMark(storeID: storeID, commits: manifest.commits, contacts: manifest.counts.contacts))
        }
    }

    /// Opens the store at `path` as it is, after a rollback, a replaced file
    /// or lost rows made opening fail, and says what was lost: the file's
    /// manifest and photo fields are made to agree with the rows it holds,
    /// and this device's mark is set to it. The person decides; a host calls
    /// this only after showing them what opening refused.
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
    public func backup(to path: String) throws {
        var st = stat()
        guard stat(path, &st) != 0 else { throw ItsMeError(.alreadyExists, "\(path) exists: a backup never overwrites a file") }
        try withLock { try db.run("VACUUM INTO ?", [.text(path)]) }
    }

    /// Runs `PRAGMA integrity_check`; true when SQLite reports "ok".
    public func integrityCheck() throws -> Bool {
        try withLock { try db.query("PRAGMA integrity_check") == [[.text("ok")]] }
    }

    private func field(_ tag: UInt8, _ value: [UInt8]) -> [UInt8] {
        [tag] + withUnsafeBytes(of: UInt16(value.count).bigEndian) { Array($0) } + value
    }

    private func fieldLong(_ tag: UInt8, _ value: [UInt8]) -> [UInt8] {
        [tag] + withUnsafeBytes(of: UInt32(value.count).bigEndian) { Array($0) } + value
    }
}

/// This device's secret for a contact, and the contact's; during a
/// Security PIN Update also the new ones (empty when none is pending).
public struct DeviceSecrets: ~Copyable {
    public let mine: SecretBytes
    public let theirs: SecretBytes
    public let pendingMine: SecretBytes
    public let pendingTheirs: SecretBytes
    /// This side has committed: its tags use `pendingMine`.
    public let committed: Bool
    /// The peer's new secret from an earlier, interrupted update (empty
    /// when none), still accepted in its tags.
    public let previousTheirs: SecretBytes

    public var hasPending: Bool { pendingTheirs.count > 0 }

}

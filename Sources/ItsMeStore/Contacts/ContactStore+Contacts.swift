// The contact store's contacts: adding, reading, listing, changing and
// deleting them, their states and windows (docs/STORAGE.md).
import Glibc
import CSQLite
import CSodium
import Synchronization
import ItsMePrimitives
import ItsMeBase

extension ContactStore {
    // MARK: Contacts

    /// Adds a contact identified by its identity key. `.alreadyExists` if
    /// a contact with that key exists; `.invalidKey` for our own key.
    package func add(
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

    func checkPeerKey(_ publicKey: [UInt8]) throws {
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
    package func addUnauthenticated(
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
    func prepare(
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
    func insertLocked(_ record: borrowing SecretBytes, fingerprint: String, publicKey: [UInt8]?) throws -> Int64 {
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
    package func batch<R>(_ body: (borrowing Batch) throws -> R) throws -> R {
        try write { try body(Batch(store: self)) }
    }

    /// Adds contacts inside `ContactStore.batch`.
    package struct Batch: ~Copyable {
        fileprivate let store: ContactStore

        package func add(
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

    func decode(id: Int64, sealed: [UInt8]) throws -> Contact {
        try open(sealed, table: .contacts, row: id, key: contactsKey) { try ContactRecord.decode($0, id: id) }
    }

    func sealedRecord(_ id: Int64) throws -> [UInt8] {
        guard let row = try db.query("SELECT record FROM contacts WHERE id = ?", [.integer(id)]).first,
            case .blob(let sealed) = row[0]
        else { throw ItsMeError(.notFound, "no contact with id \(id)") }
        return sealed
    }

    /// The contact with row id `id`. Throws `.notFound` if there is none,
    /// `.corruptData` or `.authenticationFailed` if its sealed record does not
    /// open under this identity's contacts key, `.database` if SQLite fails.
    public func contact(id: Int64) throws -> Contact {
        try withLock { try decode(id: id, sealed: try sealedRecord(id)) }
    }

    /// The contact whose identity key is `publicKey` (32 bytes, else
    /// `.invalidArgument`). Throws `.notFound` if there is none.
    package func contact(publicKey: [UInt8]) throws -> Contact {
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
    /// Throws `.invalidArgument` unless `fingerprint` is 16 hex digits,
    /// `.corruptData` or `.authenticationFailed` for a record that does not open,
    /// `.database` if SQLite fails.
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

    /// The number of contacts in the store, in every state. Throws `.database`
    /// if SQLite fails.
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
    func modifyLocked(
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
    /// Throws `.invalidArgument` for an invalid name or a note over 4096 bytes,
    /// `.invalidState` for a change into or out of `.awaitingPeer`, `.notFound`
    /// if the contact is gone, `.database` if SQLite fails; nothing changes then.
    package func update(_ contact: Contact) throws {
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
    /// Throws `.invalidArgument` for an invalid name, `.notFound` for an unknown
    /// id, `.database` if SQLite fails.
    public func setName(id: Int64, _ name: String) throws {
        let name = try DisplayName.validated(name)
        try modify(id) { $0.name = name }
    }

    /// Replaces a contact's note, changing nothing else.
    package func setNote(id: Int64, _ note: String) throws {
        try Self.checkNote(note)
        try modify(id) { $0.note = note }
    }

    /// Sets the state; `verified` also records `now` as the verification time.
    /// `.invalidState` for `awaitingPeer`, into or out of: only the
    /// exchange that added the contact moves it (PROTOCOL.md 8.1).
    package func setState(id: Int64, _ state: Contact.State, acknowledged: Bool, now: Int64) throws {
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
    package static func checkSettled(_ c: Contact) throws {
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
    package func expireAwaiting(now: Int64) throws -> Int {
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
    package func useWindow(id: Int64, window: Int64) throws {
        guard window >= 0, window <= UnixTime.maxWindow else {
            throw ItsMeError(.invalidArgument, "a window is 0 to \(UnixTime.maxWindow) (the year 9999)")
        }
        try modify(id) { c in
            if let last = c.lastWindow, window <= last {
                throw ItsMeError(.windowUsed, "window \(window) is not after the last one used (\(last))")
            }
            c.lastWindow = window
        }
    }

    /// Deletes the contact with row id `id`, with its seed, device secrets and
    /// photo. Throws `.notFound` if there is none.
    public func delete(id: Int64) throws {
        try write {
            try db.run("DELETE FROM contacts WHERE id = ?", [.integer(id)])
            guard db.changes == 1 else { throw ItsMeError(.notFound, "no contact with id \(id)") }
        }
    }

    /// The contact's verification seed.
    /// In guarded memory, owned by the caller. Throws `.notFound` for an unknown
    /// id, `.corruptData` or `.authenticationFailed` if the record does not open.
    package func seed(id: Int64) throws -> SecretBytes {
        try withLock {
            let sealed = try sealedRecord(id)
            var seed = try SecretBytes(count: ContactRecord.seedCount)
            _ = try seed.withMutableBytes { s in
                try open(sealed, table: .contacts, row: id, key: contactsKey) { try ContactRecord.decode($0, id: id, seedInto: s) }
            }
            return seed
        }
    }

}

// The contact store's photos and device secrets, the results of exchanges,
// and the pending secrets of a Security PIN Update (PROTOCOL.md 10.3).
import Glibc
import CSQLite
import CSodium
import Synchronization
import ItsMePrimitives
import ItsMeBase

extension ContactStore {
    // MARK: Photos and device secrets

    package static let maxPhotoBytes = 512 * 1024

    /// Sets (or with an empty photo and filename, removes) the photo.
    package func setPhoto(id: Int64, photo: [UInt8], filename: String) throws {
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
    /// Throws `.notFound` for an unknown id, `.database` if SQLite fails; the
    /// transaction then leaves the contact as it was.
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
    package func photo(id: Int64) throws -> (photo: [UInt8], filename: String) {
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

    package static let deviceSecretCount = 16

    /// Stores this device's secret for the contact and theirs, sealed under
    /// the device key (never exported).
    package func setDeviceSecrets(id: Int64, mine: borrowing SecretBytes, theirs: borrowing SecretBytes) throws {
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
    /// Returns how many rows were deleted. Throws `.database` if SQLite fails
    /// (nothing is deleted then).
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
    package func deviceSecrets(id: Int64) throws -> DeviceSecrets {
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
    package func tagSecrets(id: Int64) throws -> TagSecrets {
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

}

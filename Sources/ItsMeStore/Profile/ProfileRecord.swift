import ItsMePrimitives
import ItsMeBase

/// A profile record (docs/PROTOCOL.md section 18): a person's name, photo
/// and photo filename, each field sealed with ChaCha20 and its own MAC under
/// keys derived from a random 128-bit record key, all authenticated together
/// with the owner's identity key. The first 16 bytes of that record MAC are
/// the record ID, under which the record is stored on the relay.
///
/// The same type serves the owner (`create`) and a contact (`open`). It
/// holds the record key, a secret: `reference` gives it out only into
/// guarded memory, and `description` never shows it.
public final class ProfileRecord: CustomStringConvertible, @unchecked Sendable {
    /// The format version of records this library writes and reads.
    package static let version: UInt8 = 1
    /// The largest record: the relay's default record limit.
    public static let maxRecordBytes = 262_144
    /// Bytes around the three values: the version, three nonces, lengths
    /// and field MACs, the record MAC.
    public static let overhead = 1 + 3 * (ChaCha20.nonceCount + 4 + HMACSHA256.byteCount) + HMACSHA256.byteCount
    package static let maxFilenameBytes = PhotoFilename.maxBytes
    /// The length of a record ID in bytes.
    public static let recordIDCount = 16
    package static let recordKeyCount = 16
    /// reference = record ID (16) || record key (16).
    public static let referenceCount = recordIDCount + recordKeyCount

    static let label = "itsme-profile-record-v1"
    static let fieldNames = ["name", "photo", "photo-filename"]

    /// The name, or "" if the profile has none.
    public let name: String
    /// The photo's bytes (JPEG or PNG as the owner gave them), or empty if none.
    public let photo: [UInt8]
    /// The photo's filename, or "" if none.
    public let photoFilename: String
    /// The sealed record, as stored on the relay.
    public let record: [UInt8]
    package let recordID: [UInt8]
    private let recordKey: SecretBytes

    /// The relay's name for the record: the ID as 32 lowercase hex digits.
    public var recordName: String { Hex.encodeUpper(recordID).lowercased() }

    public var description: String {
        "ProfileRecord(id: \(recordName), \(record.count) bytes, photo: \(photo.count) bytes)"
    }

    private init(name: String, photo: [UInt8], photoFilename: String, record: [UInt8], recordID: [UInt8], recordKey: consuming SecretBytes) {
        self.name = name
        self.photo = photo
        self.photoFilename = photoFilename
        self.record = record
        self.recordID = recordID
        self.recordKey = recordKey
    }

    /// The reference a contact needs to fetch and open the record (record
    /// ID || record key), in guarded memory. Give it only through an
    /// encrypted, authenticated channel (PROTOCOL.md 18.3).
    /// Throws `.outOfMemory` if guarded memory cannot be allocated.
    public func reference() throws -> SecretBytes {
        var out = try SecretBytes(count: Self.referenceCount)
        out.withMutableBytes { o in
            recordID.withUnsafeBytes { o.copyMemory(from: $0) }
            recordKey.withBytes { UnsafeMutableRawBufferPointer(rebasing: o[Self.recordIDCount...]).copyMemory(from: $0) }
        }
        return out
    }

    // MARK: Creating

    /// A new record for the owner whose Ed25519 public key is `ownerKey`:
    /// a fresh record key and nonces from `random`. `name` and
    /// `photoFilename` may be "" (none); a name or a photo is required, a
    /// filename needs a photo, and the record must fit `maxRecordBytes`.
    public static func create<R: RandomSource>(
        ownerKey: [UInt8], name: String, photo: [UInt8], photoFilename: String, random: inout R
    ) throws -> ProfileRecord {
        try checkValues(name: name, photoCount: photo.count, filename: photoFilename, kind: .invalidArgument)
        try checkOwnerKey(ownerKey)
        let key = try SecretBytes(randomCount: recordKeyCount, using: &random)
        let nonces = (0..<3).map { _ in random.bytes(ChaCha20.nonceCount) }
        return try seal(ownerKey: ownerKey, name: name, photo: photo, photoFilename: photoFilename, recordKey: key, nonces: nonces)
    }

    /// Sealing with every random input given (the vectors use it).
    package static func seal(
        ownerKey: [UInt8], name: String, photo: [UInt8], photoFilename: String, recordKey: consuming SecretBytes, nonces: [[UInt8]]
    ) throws -> ProfileRecord {
        precondition(nonces.count == 3 && nonces.allSatisfy { $0.count == ChaCha20.nonceCount })
        guard Set(nonces).count == 3 else { throw ItsMeError(.internal, "the random source gave two equal nonces") }
        let values = [Array(name.utf8), photo, Array(photoFilename.utf8)]
        let keys = try subkeys(recordKey)
        var record: [UInt8] = [version]
        record.reserveCapacity(overhead + values.reduce(0) { $0 + $1.count })
        var macs: [[UInt8]] = []
        try keys.withBytes { k in
            for i in 0..<3 {
                let ciphertext = values[i].withUnsafeBytes { ChaCha20.xor($0, key: subkey(k, 0), nonce: nonces[i]) }
                let mac = fieldMAC(subkey(k, 1), field: i, nonce: nonces[i], ciphertext: ciphertext)
                record += nonces[i] + u32(ciphertext.count) + ciphertext + mac
                macs.append(mac)
            }
            let recordMAC = try Self.recordMAC(subkey(k, 2), fieldMACs: macs, ownerKey: ownerKey)
            record += recordMAC
        }
        precondition(record.count <= maxRecordBytes, "checked by checkValues")
        let id = Array(record.suffix(HMACSHA256.byteCount).prefix(recordIDCount))
        return ProfileRecord(name: name, photo: photo, photoFilename: photoFilename, record: record, recordID: id, recordKey: recordKey)
    }

    // MARK: Opening

    /// Opens record bytes fetched from the relay, with the `reference` the
    /// owner sent and the owner's identity key (the contact's public key),
    /// in the order of PROTOCOL.md 18.4: size and shape; every MAC and the
    /// record ID, in constant time, before anything is decrypted; then the
    /// values.
    /// Throws `.invalidArgument` for a reference or key of the wrong size,
    /// `.malformedMessage` for a record of the wrong size or shape,
    /// `.authenticationFailed` if a MAC or the record ID does not match.
    public static func open<Ref: ByteView & ~Copyable>(
        record: [UInt8], reference: borrowing Ref, ownerKey: [UInt8]
    ) throws -> ProfileRecord {
        guard reference.withBytes({ $0.count }) == referenceCount else {
            throw ItsMeError(.invalidArgument, "a profile reference is \(referenceCount) bytes: record ID and record key")
        }
        try checkOwnerKey(ownerKey)
        guard record.count <= maxRecordBytes else {
            throw ItsMeError(.malformedMessage, "the profile record is \(record.count) bytes, larger than the limit of \(maxRecordBytes)")
        }
        // 1. Shape.
        var fields: [(nonce: [UInt8], ciphertext: [UInt8], mac: [UInt8])] = []
        let storedMAC: [UInt8] = try record.withUnsafeBytes { b in
            var r = RecordReader(b, what: "the profile record", kind: .malformedMessage)
            guard try r.byte() == version else {
                throw ItsMeError(.malformedMessage, "the profile record is of an unknown version")
            }
            for _ in 0..<3 {
                let nonce = try r.array(ChaCha20.nonceCount)
                let length = Int(try r.uint32())
                fields.append((nonce, try r.array(length), try r.array(HMACSHA256.byteCount)))
            }
            let mac = try r.array(HMACSHA256.byteCount)
            try r.finish()
            return mac
        }
        // 2. Every MAC and the ID, before decrypting.
        let recordKey = try reference.withBytes { try SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[recordIDCount...])) }
        let expectedID = reference.withBytes { Array($0[0..<recordIDCount]) }
        let keys = try subkeys(recordKey)
        let values: [[UInt8]] = try keys.withBytes { k in
            var macs: [[UInt8]] = [], fieldsGood = [Bool]()
            for (i, f) in fields.enumerated() {
                let mac = fieldMAC(subkey(k, 1), field: i, nonce: f.nonce, ciphertext: f.ciphertext)
                fieldsGood.append(ConstantTime.equal(mac, f.mac))
                macs.append(mac)
            }
            let recordMAC = try Self.recordMAC(subkey(k, 2), fieldMACs: macs, ownerKey: ownerKey)
            let macGood = ConstantTime.equal(recordMAC, storedMAC)
            let idGood = ConstantTime.equal(Array(recordMAC.prefix(recordIDCount)), expectedID)
            if let bad = fieldsGood.firstIndex(of: false) {
                throw ItsMeError(.authenticationFailed, "the profile record's \(fieldNames[bad]) field fails its MAC: it was changed")
            }
            guard macGood else {
                throw ItsMeError(
                    .authenticationFailed, "the profile record's MAC does not verify: it was changed, or it is not this contact's record")
            }
            guard idGood else {
                throw ItsMeError(.authenticationFailed, "the profile record is not the one the reference names (another record ID)")
            }
            // 3. Decrypt.
            return fields.map { f in f.ciphertext.withUnsafeBytes { ChaCha20.xor($0, key: subkey(k, 0), nonce: f.nonce) } }
        }
        guard let name = String(validating: values[0], as: UTF8.self),
            let filename = String(validating: values[2], as: UTF8.self)
        else { throw ItsMeError(.malformedMessage, "the profile record's name or filename is not UTF-8") }
        try checkValues(name: name, photoCount: values[1].count, filename: filename, kind: .malformedMessage)
        return ProfileRecord(
            name: name, photo: values[1], photoFilename: filename, record: record, recordID: expectedID, recordKey: recordKey)
    }

    // MARK: Rules and derivations

    /// The value rules of PROTOCOL.md 18.1. `kind`: `.invalidArgument` for
    /// the owner's input, `.malformedMessage` for a record received.
    static func checkValues(name: String, photoCount: Int, filename: String, kind: ItsMeError.Kind) throws {
        guard name.isEmpty || DisplayName.isValid(name) else {
            throw ItsMeError(kind, "a profile name is empty or 1 to \(DisplayName.maxBytes) bytes of UTF-8 without control, invisible or bidi-override characters")
        }
        guard !name.isEmpty || photoCount > 0 else { throw ItsMeError(kind, "a profile has a name or a photo") }
        if !filename.isEmpty {
            guard PhotoFilename.isValid(filename) else { throw ItsMeError(kind, PhotoFilename.rule) }
            guard photoCount > 0 else { throw ItsMeError(kind, "a photo filename needs a photo") }
        }
        let total = overhead + name.utf8.count + photoCount + filename.utf8.count
        guard total <= maxRecordBytes else {
            throw ItsMeError(kind, "the profile record would be \(total) bytes, larger than the limit of \(maxRecordBytes): use a smaller photo")
        }
    }

    private static func checkOwnerKey(_ key: [UInt8]) throws {
        guard key.count == Ed25519.publicKeyCount else {
            throw ItsMeError(.invalidArgument, "an identity key is \(Ed25519.publicKeyCount) bytes")
        }
    }

    /// k1 || k2 || k3 = HKDF(record key, empty salt, label, 96).
    package static func subkeys(_ recordKey: borrowing SecretBytes) throws -> SecretBytes {
        try HKDF.derive(ikm: recordKey, salt: [UInt8](), info: LV.b(label), count: 96)
    }

    private static func subkey(_ keys: UnsafeRawBufferPointer, _ i: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: keys[(32 * i)..<(32 * i + 32)])
    }

    package static func fieldMAC(_ k2: UnsafeRawBufferPointer, field: Int, nonce: [UInt8], ciphertext: [UInt8]) -> [UInt8] {
        HMACSHA256.mac(key: k2, message: LV.cat([version], LV.b(fieldNames[field]), nonce, ciphertext))
    }

    package static func recordMAC(_ k3: UnsafeRawBufferPointer, fieldMACs: [[UInt8]], ownerKey: [UInt8]) throws -> [UInt8] {
        HMACSHA256.mac(key: k3, message: LV.cat([[version]] + fieldMACs + [ownerKey]))
    }

    private static func u32(_ n: Int) -> [UInt8] { withUnsafeBytes(of: UInt32(n).bigEndian) { Array($0) } }
}

/// A photo's filename, one rule for the contact store and profile records
/// (PROTOCOL.md 18.1): empty, or 1 to 255 bytes of UTF-8 without control
/// characters, `/` or `\`, and not `.` or `..`, so that a host may store
/// the photo under it as given without leaving its directory.
package enum PhotoFilename {
    package static let maxBytes = 255
    static let rule = "a photo filename is 1 to \(maxBytes) bytes of UTF-8, without control characters, / or \\, not . or .."

    package static func isValid(_ name: String) -> Bool {
        name.isEmpty
            || (name.utf8.count <= maxBytes && name != "." && name != ".."
                && !name.unicodeScalars.contains { $0.properties.generalCategory == .control || $0 == "/" || $0 == "\\" })
    }
}

#if canImport(Glibc)
import Glibc
#endif
import ItsMePrimitives
import ItsMeBase

/// What a contact store file says about itself at its last commit: how many
/// write transactions it has committed, and how many rows each table held.
/// Kept sealed in the file's `meta` table (`manifest`); every committing
/// transaction rewrites it. See docs/STORAGE.md, "Commits and rollback".
struct StoreManifest: Equatable {
    static let version: UInt8 = 1
    static let size = 1 + 4 * 8

    var commits: UInt64
    var counts: RowCounts

    func encoded() -> [UInt8] {
        [Self.version] + Self.bigEndian(commits) + Self.bigEndian(counts.contacts) + Self.bigEndian(counts.photos)
            + Self.bigEndian(counts.deviceSecrets)
    }

    static func decode(_ b: UnsafeRawBufferPointer) throws -> StoreManifest {
        var r = RecordReader(b, what: "contact store manifest")
        guard try r.byte() == version else { throw ItsMeError(.corruptData, "the contact store manifest has an unknown version") }
        let commits = try r.uint64()
        let counts = RowCounts(contacts: try r.uint64(), photos: try r.uint64(), deviceSecrets: try r.uint64())
        try r.finish()
        return StoreManifest(commits: commits, counts: counts)
    }

    static func bigEndian(_ v: UInt64) -> [UInt8] { withUnsafeBytes(of: v.bigEndian) { Array($0) } }
}

/// Rows in the store's three tables.
public struct RowCounts: Equatable, Sendable, CustomStringConvertible {
    /// Rows of the contacts table: one per contact.
    public package(set) var contacts: UInt64
    /// Rows of the photos table: one per contact with a photo.
    public package(set) var photos: UInt64
    /// Rows of the device secrets table: one per contact with device secrets.
    public package(set) var deviceSecrets: UInt64

    /// No rows at all.
    package static let zero = RowCounts(contacts: 0, photos: 0, deviceSecrets: 0)

    /// The three counts in words, such as "3 contacts, 1 photos, 3 device secrets".
    public var description: String { "\(contacts) contacts, \(photos) photos, \(deviceSecrets) device secrets" }
}

/// The high-water mark of one contact store, kept in the identity's secret
/// store (which the store file does not hold): the store it last saw at a
/// path, and that store's commit count and contacts then. A file behind it
/// has been rolled back or replaced.
struct StoreMark: Equatable {
    static let version: UInt8 = 1
    static let itemPrefix = "itsme.store-mark."

    var storeID: [UInt8]
    var commits: UInt64
    var contacts: UInt64

    func encoded() -> [UInt8] {
        [Self.version] + storeID + StoreManifest.bigEndian(commits) + StoreManifest.bigEndian(contacts)
    }

    static func decode(_ b: UnsafeRawBufferPointer) throws -> StoreMark {
        var r = RecordReader(b, what: "contact store mark")
        guard try r.byte() == version else { throw ItsMeError(.corruptData, "the contact store mark has an unknown version") }
        let id = try r.array(16)
        let commits = try r.uint64(), contacts = try r.uint64()
        try r.finish()
        return StoreMark(storeID: id, commits: commits, contacts: contacts)
    }

    /// The secret-store item that holds the mark of the store at `path` for
    /// the identity whose contacts key is `contactsKey`:
    /// `itsme.store-mark.` and 32 hex digits of
    /// HMAC-SHA256(HKDF(contacts key, info "itsme-store-mark-v1"), absolute path).
    /// Another identity, or another path, has a mark of its own.
    static func item(path: String, contactsKey: borrowing SecretBytes) throws -> String {
        let key = try HKDF.derive(ikm: contactsKey, salt: [], info: Array("itsme-store-mark-v1".utf8), count: 32)
        let mac = HMACSHA256.mac(key: key, message: Array(try canonicalPath(path).utf8))
        return itemPrefix + Hex.encodeUpper(mac.prefix(16)).lowercased()
    }

    /// `path` with its directory resolved (links, `..`, relative parts), so
    /// that one file has one mark however it is named. The file itself may
    /// not exist yet.
    static func canonicalPath(_ path: String) throws -> String {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        guard let resolved = realpath(directory, nil) else {
            throw ItsMeError(.database, "cannot resolve the directory of \(path): \(String(cString: strerror(errno)))")
        }
        defer { free(resolved) }
        let dir = String(cString: resolved)
        return (dir == "/" ? "" : dir) + "/" + name
    }
}

/// What accepting a rolled-back, replaced or damaged contact store gives
/// up (`ContactStore.acceptLoss`).
public struct StoreLoss: Equatable, Sendable, CustomStringConvertible {
    /// The file is another store than the one last seen at its path (a new,
    /// emptied or swapped file): `commitsLost` is then unknown (0).
    public let replaced: Bool
    /// Commits the file is behind the last one seen (same store).
    public let commitsLost: UInt64
    /// Contacts at the last commit seen.
    public let contactsBefore: UInt64
    /// Contacts in the file now.
    public let contactsNow: UInt64
    /// Rows the file's own manifest counts but the file lacks (a damaged
    /// file), per table; 0 when the rows are all there.
    public let missing: RowCounts
    /// Contacts whose photo row went missing (the contact is kept without
    /// a photo).
    public let photosMissing: UInt64

    /// Whether anything at all was lost.
    package var isEmpty: Bool {
        !replaced && commitsLost == 0 && missing == RowCounts.zero && photosMissing == 0
    }

    public var description: String {
        var parts: [String] = []
        if replaced {
            parts.append("the file is not the store last seen here (which had \(contactsBefore) contacts); it has \(contactsNow)")
        } else if commitsLost > 0 {
            parts.append("\(commitsLost) committed changes lost; \(contactsBefore) contacts then, \(contactsNow) now")
        }
        if missing != RowCounts.zero { parts.append("rows missing: \(missing)") }
        if photosMissing > 0 { parts.append("\(photosMissing) contacts lost their photo") }
        return parts.isEmpty ? "nothing lost" : parts.joined(separator: "; ")
    }
}

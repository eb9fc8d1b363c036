import ItsMePrimitives
import ItsMeBase

/// A person's identity on this device: an Ed25519 key pair (signing only;
/// key agreement always uses fresh X25519 keys), a random 32-byte contacts
/// encryption key, and a display name, all kept in the secret store.
///
/// Not thread-safe: serialise calls on one instance (the C layer does).
public final class Identity: CustomStringConvertible {
    /// Secret store item holding the identity record.
    public static let itemName = "itsme.identity"
    static let recordVersion: UInt8 = 1
    package static let contactsKeyCount = 32

    /// The secret store holding the identity's record (and, with it, the PIN's
    /// verifier and the contact store's high-water marks).
    public let store: any SecretStore
    /// The Ed25519 public key (32 bytes) that identifies this person to contacts.
    public let publicKey: [UInt8]
    /// The first 8 bytes of SHA-256 of `publicKey` as 16 upper-case hex digits,
    /// for people to compare and for display.
    public let fingerprint: String
    /// The display name sent to peers in exchanges; changed with `setName`.
    public private(set) var name: String
    private let seed: SecretBytes
    private let signingKey: SecretBytes
    package let contactsKey: SecretBytes

    private init(store: any SecretStore, seed: consuming SecretBytes, contactsKey: consuming SecretBytes, name: String) throws {
        let pair = try Ed25519.keyPair(seed: seed)
        self.store = store
        self.publicKey = pair.publicKey
        self.fingerprint = Fingerprint.of(publicKey: pair.publicKey)
        self.signingKey = try pair.secretKey.copy()
        self.seed = seed
        self.contactsKey = contactsKey
        self.name = name
    }

    /// Creates a new identity and saves it. Fails with `.alreadyExists` if
    /// the store holds one.
    package static func create<R: RandomSource>(store: any SecretStore, name: String, random: inout R) throws -> Identity {
        let name = try DisplayName.validated(name)
        guard try store.get(itemName) == nil else {
            throw ItsMeError(.alreadyExists, "this secret store already holds an identity")
        }
        let identity = try Identity(
            store: store, seed: try SecretBytes(randomCount: Ed25519.seedCount, using: &random),
            contactsKey: try SecretBytes(randomCount: contactsKeyCount, using: &random), name: name)
        try identity.save()
        return identity
    }

    /// Creates a new identity from the system's random generator and saves it in
    /// `store`. Throws `.invalidArgument` for an invalid display name (see
    /// `DisplayName`), `.alreadyExists` if the store holds an identity,
    /// `.secretStore` if the store fails. The keys stay in guarded memory and in
    /// the store; no secret leaves this object.
    public static func create(store: any SecretStore, name: String) throws -> Identity {
        var rng = SystemRandom()
        return try create(store: store, name: name, random: &rng)
    }

    /// Saves an identity carried by an export or a live transfer, replacing
    /// whatever identity the store held (IdentityExport.install decides
    /// whether that is allowed).
    package static func install(
        store: any SecretStore, seed: borrowing SecretBytes, contactsKey: borrowing SecretBytes, name: String
    ) throws -> Identity {
        let identity = try Identity(store: store, seed: try seed.copy(), contactsKey: try contactsKey.copy(), name: name)
        try identity.save()
        return identity
    }

    /// Loads the stored identity: `.notFound` if there is none,
    /// `.corruptData` if its record is malformed or of an unknown version.
    public static func load(store: any SecretStore) throws -> Identity {
        guard let record = try store.get(itemName) else {
            throw ItsMeError(.notFound, "no identity in this secret store")
        }
        return try record.withBytes { bytes in
            var r = RecordReader(bytes, what: "stored identity")
            let version = try r.byte()
            guard version == recordVersion else {
                throw ItsMeError(.corruptData, "stored identity has unknown format version \(version)")
            }
            let seed = try r.secret(Ed25519.seedCount)
            let contactsKey = try r.secret(contactsKeyCount)
            let nameLength = Int(try r.uint16())
            let nameBytes = try r.array(nameLength)
            try r.finish()
            guard let name = String(validating: nameBytes, as: UTF8.self), DisplayName.isValid(name) else {
                throw ItsMeError(.corruptData, "stored identity has an invalid display name")
            }
            return try Identity(store: store, seed: seed, contactsKey: contactsKey, name: name)
        }
    }

    /// Record v1: version (1) | Ed25519 seed (32) | contacts key (32) |
    /// name length (2, big-endian) | name (UTF-8).
    private func save() throws {
        let nameBytes = Array(name.utf8)
        var w = try RecordWriter(count: 1 + Ed25519.seedCount + Self.contactsKeyCount + 2 + nameBytes.count)
        w.append(Self.recordVersion)
        w.append(seed)
        w.append(contactsKey)
        w.append(UInt16(nameBytes.count))
        w.append(nameBytes)
        let record = w.finish()
        try store.put(Self.itemName, bytes: record)
    }

    /// Changes the display name and saves it. Throws `.invalidArgument` for an
    /// invalid name, or the store's error; on any error the name is unchanged.
    package func setName(_ newName: String) throws {
        let validated = try DisplayName.validated(newName)
        let old = name
        name = validated
        do { try save() } catch {
            name = old
            throw error
        }
    }

    /// Signs with the identity key. Internal: every signature the protocol
    /// makes covers a labelled transcript built by the protocol code, never
    /// bytes chosen by a host.
    package func sign<M: ByteView & ~Copyable>(_ message: borrowing M) throws -> [UInt8] {
        try Ed25519.sign(message, secretKey: signingKey)
    }

    /// What an identity export carries (IdentityExport): seed (32) |
    /// contacts key (32) | name length (2, big-endian) | name | fingerprint (16).
    package func exportContents() throws -> SecretBytes {
        let nameBytes = Array(name.utf8)
        var w = try RecordWriter(count: Ed25519.seedCount + Self.contactsKeyCount + 2 + nameBytes.count + 16)
        w.append(seed)
        w.append(contactsKey)
        w.append(UInt16(nameBytes.count))
        w.append(nameBytes)
        w.append(Array(fingerprint.utf8))
        return w.finish()
    }

    /// Shows the fingerprint only: never a key.
    public var description: String { "Identity(fingerprint: \(fingerprint))" }
}

/// Fingerprints: the short, human-comparable form of an identity key.
public enum Fingerprint {
    /// Hex digits in a fingerprint.
    public static let textCount = 16

    /// The first 8 bytes of SHA-256 of the public key, as 16 uppercase hex
    /// digits.
    package static func of(publicKey: [UInt8]) -> String {
        Hex.encodeUpper(SHA256.hash(publicKey).prefix(8))
    }
}

/// A display name (PROTOCOL.md section 1): 1 to 128 bytes of UTF-8 with
/// none of the refused code points, named as code points so that the rule
/// does not depend on a Unicode version.
public enum DisplayName {
    package static let maxBytes = 128

    /// The code points a name may not contain: the C0 and C1 controls
    /// (general category Cc), and the invisible characters and bidi
    /// overrides that could hide or reorder text beside a code on screen.
    /// U+200C and U+200D (zero-width non-joiner and joiner) are allowed:
    /// Persian and Indic names and emoji sequences need them.
    package static let refusedScalars: [ClosedRange<UInt32>] = [
        0x0000...0x001F, 0x007F...0x009F,  // controls
        0x200B...0x200B,  // ZERO WIDTH SPACE
        0x202A...0x202E,  // bidi embeddings and overrides
        0x2060...0x2064,  // WORD JOINER, invisible operators
        0x2066...0x2069,  // bidi isolates
        0xFEFF...0xFEFF,  // ZERO WIDTH NO-BREAK SPACE (byte order mark)
    ]

    package static func isRefused(_ scalar: Unicode.Scalar) -> Bool {
        refusedScalars.contains { $0.contains(scalar.value) }
    }

    /// Whether `name` is a valid display name: 1 to 128 bytes of UTF-8 with no
    /// refused code point.
    package static func isValid(_ name: String) -> Bool {
        let count = name.utf8.count
        guard count > 0, count <= maxBytes else { return false }
        return !name.unicodeScalars.contains(where: isRefused)
    }

    /// `name` itself if valid; else throws `.invalidArgument` saying why.
    public static func validated(_ name: String) throws -> String {
        guard isValid(name) else {
            throw ItsMeError(
                .invalidArgument,
                "a display name is 1 to \(maxBytes) bytes of UTF-8 without control, invisible or bidi-override characters")
        }
        return name
    }
}

import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// The password-protected identity export (device transfer): the identity
/// key, the contacts key, the name and the fingerprint, sealed with
/// AES-256-GCM under a key Argon2id derives from a password; the header
/// (format version, KDF and its parameters, password kind, salt, nonce) is
/// the associated data. Device secrets never travel.
///
///     header = magic "ITSMEXP" (7) | version (1) = 1 | kdf (1) = 1 (Argon2id 1.3)
///            | passes (4, BE) | memory KiB (4, BE) | password kind (1) | salt (16) | nonce (12)
///     body   = AES-256-GCM(key, nonce, contents, aad = header)
///     contents = identity seed (32) | contacts key (32) | name length (2) | name | fingerprint (16 ASCII)
///
/// The text form, `ITSMEXP1:` and the blob in unpadded base64url, fits in
/// one QR code. The header is parsed and its parameters checked against a
/// fixed window before any key derivation, so a crafted blob can neither
/// hang an importer nor exhaust its memory.
public enum IdentityExport {
    /// How an export's password was made; the header says which, so the importer
    /// knows how to read what the person types.
    public enum PasswordKind: UInt8, Sendable {
        /// Drawn by the library: 13 characters of `RemoteCode.alphabet`
        /// (64.4 bits), typed in any case, spaces and `-` ignored.
        case generated = 1
        /// Chosen by the person (at least 8 characters), used exactly as typed.
        case chosen = 2
    }

    /// The bytes every export starts with, "ITSMEXP".
    public static let magic = Array("ITSMEXP".utf8)
    /// The export format's version.
    package static let version: UInt8 = 1
    /// The format version of an export that carries the contact store too
    /// (PROTOCOL.md 17.1, "With the contacts"): a file only, no text form.
    package static let contactsVersion: UInt8 = 2
    /// The largest contact store an export or a transfer carries: 64 MiB.
    public static let maxContactStoreCount = ContactStore.maxSnapshotCount
    /// How every carried store begins: SQLite's header.
    static let sqliteHeader = Array("SQLite format 3".utf8) + [0]
    static let kdfArgon2id: UInt8 = 1
    package static let headerCount = 7 + 1 + 1 + 4 + 4 + 1 + Argon2id.saltCount + AEAD.nonceCount
    /// How an export's text form (`text(_:)`, the export's QR code) begins.
    public static let textPrefix = "ITSMEXP1:"
    package static let generatedPasswordCount = 13
    /// The fewest characters a chosen password may have.
    public static let minimumChosenPasswordCount = 8
    /// Parameters accepted on import: at least libsodium's moderate level,
    /// at most 10 passes over 1 GiB.
    package static let acceptedPasses: ClosedRange<UInt32> = 3...10
    package static let acceptedMemoryKiB: ClosedRange<UInt32> = (256 * 1024)...(1024 * 1024)

    /// What an export's header says, read before any expensive work.
    public struct Header: Equatable, Sendable {
        /// 1: the identity only; 2: the identity and the contact store.
        package let formatVersion: UInt8
        /// The export carries the contact store too (format version 2).
        public var carriesContacts: Bool { formatVersion == IdentityExport.contactsVersion }
        /// Argon2id's passes (its time cost).
        package let passes: UInt32
        /// Argon2id's memory in KiB.
        package let memoryKiB: UInt32
        /// Whether the password was generated or chosen.
        public let passwordKind: PasswordKind
        let salt: [UInt8]
        let nonce: [UInt8]

        var parameters: Argon2id.Parameters {
            Argon2id.Parameters(opsLimit: UInt64(passes), memLimit: UInt64(memoryKiB) * 1024)
        }

        package var bytes: [UInt8] {
            var out = IdentityExport.magic + [formatVersion, IdentityExport.kdfArgon2id]
            out += withUnsafeBytes(of: passes.bigEndian, Array.init)
            out += withUnsafeBytes(of: memoryKiB.bigEndian, Array.init)
            out += [passwordKind.rawValue] + salt + nonce
            return out
        }

        /// Parses and range-checks a header: `.malformedMessage` for a
        /// truncated or foreign blob, `.invalidArgument` for an unknown
        /// version or parameters outside the accepted window.
        public init(parsing blob: [UInt8]) throws {
            // The name's length is sealed, but any export is 145 to 272 bytes
            // (with the contacts, 146 to 272 + 64 MiB): one cut or padded
            // outside that is refused before it costs a guess.
            guard blob.count >= IdentityExport.blobCount(nameByteCount: 1) else {
                throw ItsMeError(
                    .malformedMessage,
                    "this export is truncated (\(blob.count) bytes; an export is at least \(IdentityExport.blobCount(nameByteCount: 1)))")
            }
            guard Array(blob.prefix(7)) == IdentityExport.magic else {
                throw ItsMeError(
                    .malformedMessage,
                    "this is not an ItsMe identity export (it lacks the ITSMEXP header; the older app's exports, which have none, are never accepted)")
            }
            guard blob[7] == IdentityExport.version || blob[7] == IdentityExport.contactsVersion else {
                throw ItsMeError(.invalidArgument, "this export has format version \(blob[7]); this library reads versions 1 and 2")
            }
            let sizes = IdentityExport.blobCounts(version: blob[7])
            guard sizes.contains(blob.count) else {
                throw ItsMeError(
                    .malformedMessage,
                    "this export is damaged (\(blob.count) bytes; an export of format version \(blob[7]) is \(sizes.lowerBound) to \(sizes.upperBound))")
            }
            formatVersion = blob[7]
            guard blob[8] == IdentityExport.kdfArgon2id else {
                throw ItsMeError(.invalidArgument, "this export uses an unknown key derivation (\(blob[8]))")
            }
            func u32(_ at: Int) -> UInt32 { blob[at..<at + 4].reduce(0) { $0 << 8 | UInt32($1) } }
            passes = u32(9)
            memoryKiB = u32(13)
            guard IdentityExport.acceptedPasses.contains(passes), IdentityExport.acceptedMemoryKiB.contains(memoryKiB) else {
                throw ItsMeError(
                    .invalidArgument,
                    "this export asks for Argon2id with \(passes) passes over \(memoryKiB / 1024) MiB, outside the accepted 3-10 passes over 256-1024 MiB")
            }
            guard let kind = PasswordKind(rawValue: blob[17]) else {
                throw ItsMeError(.invalidArgument, "this export has an unknown password kind (\(blob[17]))")
            }
            passwordKind = kind
            salt = Array(blob[18..<18 + Argon2id.saltCount])
            nonce = Array(blob[(18 + Argon2id.saltCount)..<IdentityExport.headerCount])
        }

        init(formatVersion: UInt8, parameters: Argon2id.Parameters, kind: PasswordKind, salt: [UInt8], nonce: [UInt8]) {
            self.formatVersion = formatVersion
            passes = UInt32(parameters.opsLimit)
            memoryKiB = UInt32(parameters.memLimit / 1024)
            passwordKind = kind
            self.salt = salt
            self.nonce = nonce
        }
    }

    // MARK: Passwords

    /// A new generated password, "ABCD-EFGH-JKMNP" (64.4 bits): random
    /// bytes drawn 16 at a time, used in order, each below 248 (= 8 x 31)
    /// giving the character at its value mod 31, the others skipped.
    public static func generatePassword<R: RandomSource>(using random: inout R) -> String {
        var characters: [UInt8] = []
        while characters.count < generatedPasswordCount {
            characters += password(fromRandom: random.bytes(16)).prefix(generatedPasswordCount - characters.count)
        }
        return shown(characters)
    }

    /// The characters rejection sampling takes from `bytes`, in order.
    package static func password(fromRandom bytes: [UInt8]) -> [UInt8] {
        bytes.filter { $0 < 248 }.map { RemoteCode.alphabet[Int($0 % 31)] }
    }

    /// "ABCD-EFGH-JKMNP" from the 13 characters.
    package static func shown(_ characters: [UInt8]) -> String {
        let text = String(decoding: characters, as: UTF8.self)
        return text.prefix(4) + "-" + text.dropFirst(4).prefix(4) + "-" + text.dropFirst(8)
    }

    /// Checks that `password` is one of `kind` (as export and open read
    /// it): `.invalidArgument` if not. Derives nothing.
    package static func checkPassword(_ password: String, kind: PasswordKind) throws {
        var secret = try passwordBytes(password, kind: kind)
        wipe(&secret)
    }

    /// The size of an export of an identity whose name is `nameByteCount`
    /// bytes of UTF-8: the header, the sealed contents and the tag.
    package static func blobCount(nameByteCount: Int) -> Int {
        headerCount + Ed25519.seedCount + Identity.contactsKeyCount + 2 + nameByteCount + Fingerprint.textCount
            + AEAD.tagCount
    }

    /// The largest export of any version (one with the contacts): the most
    /// an importer reads of a file.
    public static var maxBlobCount: Int { blobCounts(version: contactsVersion).upperBound }

    /// The sizes an export of `version` may have: 145 to 272 bytes, or with
    /// the contacts 146 to 272 + 64 MiB.
    package static func blobCounts(version: UInt8) -> ClosedRange<Int> {
        let identityOnly = blobCount(nameByteCount: 1)...blobCount(nameByteCount: DisplayName.maxBytes)
        if version == contactsVersion { return (identityOnly.lowerBound + 1)...(identityOnly.upperBound + maxContactStoreCount) }
        return identityOnly
    }

    /// `.invalidArgument` unless `store` is a contact store an export or a
    /// transfer may carry: 1 byte to 64 MiB, beginning with SQLite's header.
    package static func checkContactStore(_ store: [UInt8]) throws {
        guard store.count <= maxContactStoreCount else {
            throw ItsMeError(
                .invalidArgument,
                "the contact store is \(store.count) bytes, more than the \(maxContactStoreCount >> 20) MiB an export or a transfer carries: copy the file instead")
        }
        guard store.starts(with: sqliteHeader) else {
            throw ItsMeError(.invalidArgument, "the contact store to carry is not a SQLite database file")
        }
    }

    /// The attempt limiter of export passwords in `store` (PROTOCOL.md 17.2).
    public static func limiter(store: any SecretStore) -> AttemptLimiter {
        AttemptLimiter(store: store, purpose: "export-password")
    }

    /// The bytes Argon2id hashes: a generated password in canonical form
    /// (uppercase, no spaces or `-`; `.invalidArgument` for a character
    /// outside the alphabet or a wrong count), a chosen one as typed.
    package static func passwordBytes(_ password: String, kind: PasswordKind) throws -> [UInt8] {
        switch kind {
        case .generated:
            return try RemoteCode.typedValues(password, count: generatedPasswordCount, what: "export password")
                .map { RemoteCode.alphabet[$0] }
        case .chosen:
            let bytes = Array(password.utf8)
            guard password.unicodeScalars.count >= minimumChosenPasswordCount else {
                throw ItsMeError(.invalidArgument, "a chosen export password is at least \(minimumChosenPasswordCount) characters")
            }
            return bytes
        }
    }

    // MARK: Export

    /// Seals `identity` under `password` of `kind` (a generated one from
    /// `generatePassword`, or a chosen one of at least 8 characters), after
    /// checking the identity's PIN at `now` (a counted attempt: `.wrongPIN`,
    /// `.locked`; `.notFound` if no PIN is set). The password is checked
    /// before the PIN, so a bad one costs no attempt.
    ///
    /// With `contactStore` (`ContactStore.snapshot`: 1 byte to 64 MiB, a
    /// SQLite file, else `.invalidArgument` before the PIN), the export is
    /// of format version 2 and carries the store too: a file only, with no
    /// text form (PROTOCOL.md 17.1).
    public static func export<R: RandomSource>(
        _ identity: Identity, pin: String, now: Int64, password: String, kind: PasswordKind,
        contactStore: [UInt8]? = nil, parameters: Argon2id.Parameters = .moderate, random: inout R
    ) throws -> [UInt8] {
        _ = try passwordBytes(password, kind: kind)
        if let contactStore { try checkContactStore(contactStore) }
        try PIN(store: identity.store).verify(pin, now: now)
        return try export(
            identity, password: password, kind: kind, contactStore: contactStore, parameters: parameters, random: &random)
    }

    /// The export itself, for callers that checked the PIN.
    package static func export<R: RandomSource>(
        _ identity: Identity, password: String, kind: PasswordKind, contactStore: [UInt8]? = nil,
        parameters: Argon2id.Parameters = .moderate, random: inout R
    ) throws -> [UInt8] {
        if let contactStore { try checkContactStore(contactStore) }
        var secret = try passwordBytes(password, kind: kind)
        defer { wipe(&secret) }
        guard acceptedPasses.contains(UInt32(clamping: parameters.opsLimit)),
            acceptedMemoryKiB.contains(UInt32(clamping: parameters.memLimit / 1024))
        else {
            throw ItsMeError(.invalidArgument, "export parameters \(parameters) are outside the accepted window")
        }
        let header = Header(
            formatVersion: contactStore == nil ? version : contactsVersion, parameters: parameters, kind: kind,
            salt: random.bytes(Argon2id.saltCount), nonce: random.bytes(AEAD.nonceCount))
        let key = try Argon2id.deriveKey(password: secret, salt: header.salt, parameters: header.parameters)
        let headerBytes = header.bytes
        let contents = try identity.exportContents()
        guard let contactStore else {
            return headerBytes + (try AEAD.seal(.aes256GCM, key: key, nonce: header.nonce, plaintext: contents, aad: headerBytes))
        }
        let plain = try contents.withBytes { c in
            var buffer = try SecretBytes(count: c.count + contactStore.count)
            buffer.withMutableBytes { b in
                b.copyMemory(from: c)
                contactStore.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: b[c.count...]).copyMemory(from: $0) }
            }
            return buffer
        }
        return headerBytes + (try AEAD.seal(.aes256GCM, key: key, nonce: header.nonce, plaintext: plain, aad: headerBytes))
    }

    /// The text form of an export, for a QR code or a file.
    public static func text(_ blob: [UInt8]) -> String { textPrefix + Base64.encode(blob, .urlUnpadded) }

    /// An export from its text form (surrounding ASCII white space ignored:
    /// tab, line feed, carriage return and space).
    /// The source's exports are recognised and refused with the reason
    /// (PROTOCOL.md 17.1): its version 3 sealed the identity under an
    /// unsalted SHA-256 of a PIN, which anyone holding the QR code can
    /// reverse by trying every PIN; its version 5 used PBKDF2 of an unstated
    /// count.
    /// Throws `.malformedMessage` for a damaged text, `.invalidArgument` for a
    /// text this library does not read (another version, the source format).
    public static func blob(text: String) throws -> [UInt8] {
        let s = TypedInput.withoutASCIIWhitespaceAround(text)
        if s.hasPrefix(textPrefix) {
            guard let blob = Base64.decode(String(s.dropFirst(textPrefix.count)), .urlUnpadded) else {
                throw ItsMeError(.malformedMessage, "this ItsMe identity export is damaged (its text is not valid base64url)")
            }
            // The text form is of format version 1 only (PROTOCOL.md 17.1).
            if blob.count > 7, blob.starts(with: magic), blob[7] != version {
                throw ItsMeError(
                    .invalidArgument, "this identity export text holds an export of format version \(blob[7]); a text holds format version 1 only")
            }
            return blob
        }
        if s.hasPrefix("ITSMEXP") {
            throw ItsMeError(.invalidArgument, "this identity export has a text format this library does not read (\(s.prefix(9)))")
        }
        let compact = TypedInput.withoutASCIIWhitespace(s)
        if compact.hasPrefix("{"), compact.contains("\"version\":3") || compact.contains("\"privateKey\"") {
            throw ItsMeError(.invalidArgument, sourceExportRefusal)
        }
        // A sealed box of the source: nonce, tag and a JSON payload, far more than 64 bytes.
        if let bytes = Base64.decode(compact, .standardPadded) ?? Base64.decode(compact, .urlUnpadded), bytes.count >= 64 {
            throw ItsMeError(.invalidArgument, sourceExportRefusal)
        }
        throw ItsMeError(.malformedMessage, "this is not the text of an ItsMe identity export (ITSMEXP1:...)")
    }

    static let sourceExportRefusal =
        "this looks like an identity export of the older app format (a bare sealed box with no ItsMe header). "
        + "Its version 3 derived the key from an unsalted SHA-256 of a PIN and its version 5 from PBKDF2, "
        + "which a stolen QR code gives up to offline guessing; such exports are never accepted. "
        + "Make a new export, or a live transfer, on the old device"

    // MARK: Import

    /// Opens an export with `password`: the header is checked first, then
    /// the password, as a typed secret under `limiter` (a wrong password is
    /// a counted failure, `.authenticationFailed`; `.locked` after too
    /// many), then the contents (the fingerprint must match the key).
    public static func open(_ blob: [UInt8], password: String, limiter: AttemptLimiter, now: Int64) throws -> Contents {
        let header = try Header(parsing: blob)
        var secret = try passwordBytes(password, kind: header.passwordKind)
        defer { wipe(&secret) }
        let headerBytes = Array(blob.prefix(headerCount))
        let body = Array(blob.dropFirst(headerCount))
        var opened: SecretBytes? = nil
        try limiter.attempt(now: now, failure: .authenticationFailed, what: "export password") {
            let key = try Argon2id.deriveKey(password: secret, salt: header.salt, parameters: header.parameters)
            do {
                opened = try AEAD.open(.aes256GCM, key: key, nonce: header.nonce, ciphertext: body, aad: headerBytes)
                return true
            } catch let error as ItsMeError where error.kind == .authenticationFailed {
                return false
            }
        }
        guard let opened else { throw ItsMeError(.internal, "the export opened without contents") }
        return try Contents(opened, withStore: header.formatVersion == contactsVersion)
    }

    /// What an export carries, opened.
    public struct Contents: ~Copyable {
        let seed: SecretBytes
        let contactsKey: SecretBytes
        /// The identity's display name.
        public let name: String
        /// The identity's fingerprint, for the person to compare before installing.
        package let fingerprint: String
        /// The contact store an export of format version 2 or a transfer
        /// carried (a SQLite file, PROTOCOL.md 17): write it with
        /// `writeContactStore` and install with that path. Nil if none came.
        /// (Spelled `Optional`, which has no implicit nil: `init` assigns
        /// `self` whole, as a noncopyable type must.)
        public internal(set) var contactStore: Optional<[UInt8]>

        /// The contents alone (`withStore` false), or followed by the
        /// contact store (an export of format version 2): `.corruptData`
        /// for anything malformed, a store included.
        package init(_ plain: borrowing SecretBytes, withStore: Bool = false) throws {
            self = try plain.withBytes { bytes -> Contents in
                var store: [UInt8]? = nil
                var r = RecordReader(bytes, what: "identity export")
                let seed = try r.secret(Ed25519.seedCount)
                let contactsKey = try r.secret(Identity.contactsKeyCount)
                let nameBytes = try r.array(Int(try r.uint16()))
                let fingerprintBytes = try r.array(16)
                if withStore {
                    let rest = try r.array(r.remaining)
                    guard !rest.isEmpty, rest.starts(with: IdentityExport.sqliteHeader) else {
                        throw ItsMeError(.corruptData, "the contact store in this export is not a SQLite database file")
                    }
                    guard rest.count <= IdentityExport.maxContactStoreCount else {
                        throw ItsMeError(.corruptData, "the contact store in this export is larger than 64 MiB")
                    }
                    store = rest
                }
                try r.finish()
                guard let name = String(validating: nameBytes, as: UTF8.self), DisplayName.isValid(name) else {
                    throw ItsMeError(.corruptData, "the export's name is not a valid display name")
                }
                return try Contents(
                    seed: seed, contactsKey: contactsKey, name: name,
                    fingerprint: String(decoding: fingerprintBytes, as: UTF8.self), contactStore: store)
            }
        }

        /// Writes the carried contact store as a new file at `path` (mode
        /// 0600; `.alreadyExists` if anything is there), for `install`'s
        /// `contactStorePath`. `.notFound` if no store came.
        public func writeContactStore(to path: String) throws {
            guard let contactStore else { throw ItsMeError(.notFound, "no contact store came with this identity") }
            try RegularFile.writeNew(path, contactStore)
        }

        private init(
            seed: consuming SecretBytes, contactsKey: consuming SecretBytes, name: String, fingerprint: String, contactStore: [UInt8]?
        ) throws {
            let publicKey = try Ed25519.keyPair(seed: seed).publicKey
            guard Fingerprint.of(publicKey: publicKey) == fingerprint else {
                throw ItsMeError(.corruptData, "the export's fingerprint does not match its key")
            }
            self.seed = seed
            self.contactsKey = contactsKey
            self.name = name
            self.fingerprint = fingerprint
            self.contactStore = contactStore
        }
    }
}

// MARK: Installing an import

extension IdentityExport {
    /// What installing an imported identity would do on this device
    /// (PROTOCOL.md 17.4), found without changing anything.
    public struct ImportCheck: Equatable, Sendable {
        /// The fingerprint of another identity the secret store holds
        /// ("unreadable" if its record cannot be read), nil if none or the
        /// same identity.
        public let otherIdentity: String?
        /// The contact store file, as the imported contacts key finds it.
        public let store: ContactStore.ImportSurvey

        /// Installing would replace another identity or clear contacts the
        /// imported key cannot read: the host must ask before proceeding.
        package var isWrongIdentity: Bool { otherIdentity != nil || store.unreadable > 0 }
    }

    /// Looks at `secretStore` and the contact store at `contactStorePath`
    /// (nil: none) as installing `contents` would, changing nothing.
    /// Throws `.database` if the contact store file is not a contact store or
    /// SQLite fails, or the secret store's error.
    public static func check(
        _ contents: borrowing Contents, secretStore: any SecretStore, contactStorePath: String?
    ) throws -> ImportCheck {
        var other: String? = nil
        do {
            let existing = try Identity.load(store: secretStore)
            if existing.fingerprint != contents.fingerprint || !existing.contactsKey.constantTimeEquals(contents.contactsKey) {
                other = existing.fingerprint
            }
        } catch let e as ItsMeError where e.kind == .notFound {
        } catch let e as ItsMeError where e.kind == .corruptData {
            other = "unreadable"
        }
        let survey =
            try contactStorePath.map { try ContactStore.survey(path: $0, contactsKey: contents.contactsKey, adopting: false) }
            ?? .none
        return ImportCheck(otherIdentity: other, store: survey)
    }

    /// Installs an imported identity: saves it in `secretStore` and makes
    /// the contact store at `contactStorePath` (nil: none; a missing file
    /// is fine) its store, with every device secret forgotten, so each
    /// contact sees a changed device at the next verification.
    ///
    /// If `check` finds a wrong identity (another identity in the secret
    /// store, or contacts the imported key cannot read), nothing changes
    /// and `.wrongIdentity` is thrown, unless `replacing`: then the other
    /// identity is overwritten and the unreadable contacts are deleted; the
    /// rest of the store is kept. Returns the identity and what `check`
    /// found before the change.
    public static func install(
        _ contents: borrowing Contents, secretStore: any SecretStore, contactStorePath: String?, replacing: Bool
    ) throws -> (identity: Identity, found: ImportCheck) {
        let found = try check(contents, secretStore: secretStore, contactStorePath: contactStorePath)
        if found.isWrongIdentity, !replacing {
            var what: [String] = []
            if let other = found.otherIdentity { what.append("another identity (\(other))") }
            if found.store.unreadable > 0 {
                what.append("\(found.store.unreadable) contact\(found.store.unreadable == 1 ? "" : "s") sealed under another contacts key")
            }
            throw ItsMeError(
                .wrongIdentity,
                "this device holds \(what.joined(separator: " and ")); nothing was changed. "
                    + "Cancel, or proceed to replace the identity and clear the unreadable contacts")
        }
        if let path = contactStorePath {
            _ = try ContactStore.survey(path: path, contactsKey: contents.contactsKey, adopting: true)
        }
        let identity = try Identity.install(
            store: secretStore, seed: contents.seed, contactsKey: contents.contactsKey, name: contents.name)
        // The installed store is this device's store from now on: its
        // manifest is made for the installed key and the mark set to it.
        if let path = contactStorePath, found.store.exists {
            _ = try ContactStore.acceptLoss(path: path, identity: identity)
        }
        return (identity, found)
    }
}

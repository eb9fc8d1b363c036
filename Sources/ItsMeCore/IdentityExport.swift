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
    public enum PasswordKind: UInt8, Sendable {
        /// Drawn by the library: 13 characters of `RemoteCode.alphabet`
        /// (64.4 bits), typed in any case, spaces and `-` ignored.
        case generated = 1
        /// Chosen by the person (at least 8 characters), used exactly as typed.
        case chosen = 2
    }

    public static let magic = Array("ITSMEXP".utf8)
    public static let version: UInt8 = 1
    static let kdfArgon2id: UInt8 = 1
    public static let headerCount = 7 + 1 + 1 + 4 + 4 + 1 + Argon2id.saltCount + AEAD.nonceCount
    public static let textPrefix = "ITSMEXP1:"
    public static let generatedPasswordCount = 13
    public static let minimumChosenPasswordCount = 8
    /// Parameters accepted on import: at least libsodium's moderate level,
    /// at most 10 passes over 1 GiB.
    public static let acceptedPasses: ClosedRange<UInt32> = 3...10
    public static let acceptedMemoryKiB: ClosedRange<UInt32> = (256 * 1024)...(1024 * 1024)

    /// What an export's header says, read before any expensive work.
    public struct Header: Equatable, Sendable {
        public let passes: UInt32
        public let memoryKiB: UInt32
        public let passwordKind: PasswordKind
        let salt: [UInt8]
        let nonce: [UInt8]

        var parameters: Argon2id.Parameters {
            Argon2id.Parameters(opsLimit: UInt64(passes), memLimit: UInt64(memoryKiB) * 1024)
        }

        var bytes: [UInt8] {
            var out = IdentityExport.magic + [IdentityExport.version, IdentityExport.kdfArgon2id]
            out += withUnsafeBytes(of: passes.bigEndian, Array.init)
            out += withUnsafeBytes(of: memoryKiB.bigEndian, Array.init)
            out += [passwordKind.rawValue] + salt + nonce
            return out
        }

        /// Parses and range-checks a header: `.malformedMessage` for a
        /// truncated or foreign blob, `.invalidArgument` for an unknown
        /// version or parameters outside the accepted window.
        public init(parsing blob: [UInt8]) throws {
            guard blob.count >= IdentityExport.headerCount + AEAD.tagCount else {
                throw ItsMeError(.malformedMessage, "this export is truncated (\(blob.count) bytes)")
            }
            guard Array(blob.prefix(7)) == IdentityExport.magic else {
                throw ItsMeError(.malformedMessage, "this is not an ItsMe identity export")
            }
            guard blob[7] == IdentityExport.version else {
                throw ItsMeError(.invalidArgument, "this export has format version \(blob[7]); this library reads version 1")
            }
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

        init(parameters: Argon2id.Parameters, kind: PasswordKind, salt: [UInt8], nonce: [UInt8]) {
            passes = UInt32(parameters.opsLimit)
            memoryKiB = UInt32(parameters.memLimit / 1024)
            passwordKind = kind
            self.salt = salt
            self.nonce = nonce
        }
    }

    // MARK: Passwords

    /// A new generated password, "ABCD-EFGH-JKLMN" (64.4 bits).
    public static func generatePassword<R: RandomSource>(using random: inout R) -> String {
        var characters: [UInt8] = []
        while characters.count < generatedPasswordCount {
            // Rejection sampling: 248 = 8 x 31, so every character is equally likely.
            let byte = random.bytes(1)[0]
            if byte < 248 { characters.append(RemoteCode.alphabet[Int(byte % 31)]) }
        }
        let text = String(decoding: characters, as: UTF8.self)
        return text.prefix(4) + "-" + text.dropFirst(4).prefix(4) + "-" + text.dropFirst(8)
    }

    /// The bytes Argon2id hashes: a generated password in canonical form
    /// (uppercase, no spaces or `-`; `.invalidArgument` for a character
    /// outside the alphabet or a wrong count), a chosen one as typed.
    static func passwordBytes(_ password: String, kind: PasswordKind) throws -> [UInt8] {
        switch kind {
        case .generated:
            var out: [UInt8] = []
            for byte in password.utf8 where byte != 0x20 && byte != 0x2D {
                let upper = (0x61...0x7A).contains(byte) ? byte - 0x20 : byte
                guard RemoteCode.alphabet.contains(upper) else {
                    throw ItsMeError(.invalidArgument, "an export password is 13 letters and digits 2-9 (no 0, 1, I, L or O)")
                }
                out.append(upper)
            }
            guard out.count == generatedPasswordCount else {
                throw ItsMeError(.invalidArgument, "an export password is 13 letters and digits 2-9 (no 0, 1, I, L or O)")
            }
            return out
        case .chosen:
            let bytes = Array(password.utf8)
            guard password.count >= minimumChosenPasswordCount else {
                throw ItsMeError(.invalidArgument, "a chosen export password is at least \(minimumChosenPasswordCount) characters")
            }
            return bytes
        }
    }

    // MARK: Export

    /// Seals `identity` under `password` of `kind` (a generated one from
    /// `generatePassword`, or a chosen one of at least 8 characters).
    public static func export<R: RandomSource>(
        _ identity: Identity, password: String, kind: PasswordKind, parameters: Argon2id.Parameters = .moderate,
        random: inout R
    ) throws -> [UInt8] {
        var secret = try passwordBytes(password, kind: kind)
        defer { wipe(&secret) }
        guard acceptedPasses.contains(UInt32(clamping: parameters.opsLimit)),
            acceptedMemoryKiB.contains(UInt32(clamping: parameters.memLimit / 1024))
        else {
            throw ItsMeError(.invalidArgument, "export parameters \(parameters) are outside the accepted window")
        }
        let header = Header(
            parameters: parameters, kind: kind, salt: random.bytes(Argon2id.saltCount), nonce: random.bytes(AEAD.nonceCount))
        let key = try Argon2id.deriveKey(password: secret, salt: header.salt, parameters: header.parameters)
        let headerBytes = header.bytes
        let contents = try identity.exportContents()
        let sealed = try AEAD.seal(.aes256GCM, key: key, nonce: header.nonce, plaintext: contents, aad: headerBytes)
        return headerBytes + sealed
    }

    /// The text form of an export, for a QR code or a file.
    public static func text(_ blob: [UInt8]) -> String { textPrefix + Base64.encode(blob, .urlUnpadded) }

    /// An export from its text form (surrounding white space ignored).
    public static func blob(text: String) throws -> [UInt8] {
        var s = Substring(text)
        while let c = s.first, c == " " || c == "\n" || c == "\r" || c == "\t" { s.removeFirst() }
        while let c = s.last, c == " " || c == "\n" || c == "\r" || c == "\t" { s.removeLast() }
        guard s.hasPrefix(textPrefix), let blob = Base64.decode(String(s.dropFirst(textPrefix.count)), .urlUnpadded) else {
            throw ItsMeError(.malformedMessage, "this is not the text of an ItsMe identity export (ITSMEXP1:...)")
        }
        return blob
    }

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
        return try Contents(opened)
    }

    /// What an export carries, opened.
    public struct Contents: ~Copyable {
        let seed: SecretBytes
        let contactsKey: SecretBytes
        public let name: String
        public let fingerprint: String

        init(_ plain: borrowing SecretBytes) throws {
            self = try plain.withBytes { bytes -> Contents in
                var r = RecordReader(bytes, what: "identity export")
                let seed = try r.secret(Ed25519.seedCount)
                let contactsKey = try r.secret(Identity.contactsKeyCount)
                let nameBytes = try r.array(Int(try r.uint16()))
                let fingerprintBytes = try r.array(16)
                try r.finish()
                guard let name = String(validating: nameBytes, as: UTF8.self), DisplayName.isValid(name) else {
                    throw ItsMeError(.corruptData, "the export's name is not a valid display name")
                }
                return try Contents(
                    seed: seed, contactsKey: contactsKey, name: name,
                    fingerprint: String(decoding: fingerprintBytes, as: UTF8.self))
            }
        }

        private init(seed: consuming SecretBytes, contactsKey: consuming SecretBytes, name: String, fingerprint: String) throws {
            let publicKey = try Ed25519.keyPair(seed: seed).publicKey
            guard Fingerprint.of(publicKey: publicKey) == fingerprint else {
                throw ItsMeError(.corruptData, "the export's fingerprint does not match its key")
            }
            self.seed = seed
            self.contactsKey = contactsKey
            self.name = name
            self.fingerprint = fingerprint
        }
    }
}

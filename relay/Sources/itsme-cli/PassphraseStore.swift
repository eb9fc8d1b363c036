import Foundation
import ItsMeCore

/// The optional passphrase wrap of the file secret store (`itsme init
/// --passphrase`), as ssh does for keys: every item is sealed with
/// ChaCha20-Poly1305 under a key derived from the passphrase by Argon2id
/// (libsodium's moderate level: 3 passes over 256 MiB), with the item's
/// name as associated data; so a copy of the files is useless without the
/// passphrase. The parameters, salt and a check value live in
/// `secrets.wrap` beside the store (docs/CLI.md).
final class PassphraseSecretStore: SecretStore, @unchecked Sendable {
    /// The wrap file: its format version, the KDF and its parameters, the
    /// salt, and an AEAD of nothing that tells a wrong passphrase.
    struct WrapFile: Codable {
        var version: Int
        var kdf: String
        var opsLimit: UInt64
        var memLimit: UInt64
        var salt: String
        var check: String
    }

    static let fileName = "secrets.wrap"
    private static let itemLabel = Array("itsme-cli-secret-v1".utf8)
    private static let checkLabel = Array("itsme-cli-passphrase-check-v1".utf8)

    let inner: FileSecretStore
    private let key: SecretBytes

    private init(inner: FileSecretStore, key: consuming SecretBytes) {
        self.inner = inner
        self.key = key
    }

    /// Wraps a new, empty store under `passphrase` and writes the wrap file.
    static func create(inner: FileSecretStore, wrapPath: String, passphrase: String) throws -> PassphraseSecretStore {
        var random = SystemRandom()
        let salt = random.bytes(Argon2id.saltCount)
        let parameters = Argon2id.Parameters.moderate
        let key = try derive(passphrase, salt: salt, parameters: parameters)
        let nonce = random.bytes(AEAD.nonceCount)
        let check = try AEAD.seal(.chacha20Poly1305, key: key, nonce: nonce, plaintext: [UInt8](), aad: checkLabel)
        let file = WrapFile(
            version: 1, kdf: "argon2id13", opsLimit: parameters.opsLimit, memLimit: parameters.memLimit,
            salt: Hex.encodeUpper(salt).lowercased(), check: Hex.encodeUpper(nonce + check).lowercased())
        try writePrivateFile(wrapPath, try JSONEncoder().encode(file))
        return PassphraseSecretStore(inner: inner, key: key)
    }

    /// Opens a wrapped store: the wrap file is checked (version, parameters
    /// inside the accepted window) before the passphrase is hashed.
    static func open(inner: FileSecretStore, wrapPath: String, passphrase: String) throws -> PassphraseSecretStore {
        guard let data = try readDataFile(wrapPath, advice: "restore it from a backup, or the secret items cannot be opened") else {
            throw CLIError("cannot read \(wrapPath)")
        }
        guard let file = try? JSONDecoder().decode(WrapFile.self, from: data), file.version == 1, file.kdf == "argon2id13",
            let salt = Hex.decode(file.salt.uppercased()), salt.count == Argon2id.saltCount,
            let check = Hex.decode(file.check.uppercased()), check.count == AEAD.nonceCount + AEAD.tagCount
        else { throw CLIError("\(wrapPath) is damaged or of an unknown version") }
        let parameters = Argon2id.Parameters(opsLimit: file.opsLimit, memLimit: file.memLimit)
        guard parameters.isAccepted else {
            throw CLIError("\(wrapPath) asks for Argon2id parameters outside the accepted range (\(parameters))")
        }
        let key = try derive(passphrase, salt: salt, parameters: parameters)
        do {
            _ = try AEAD.open(
                .chacha20Poly1305, key: key, nonce: Array(check.prefix(AEAD.nonceCount)),
                ciphertext: Array(check.dropFirst(AEAD.nonceCount)), aad: checkLabel)
        } catch {
            throw CLIError("wrong passphrase", exit: .checkFailed)
        }
        return PassphraseSecretStore(inner: inner, key: key)
    }

    private static func derive(_ passphrase: String, salt: [UInt8], parameters: Argon2id.Parameters) throws -> SecretBytes {
        var bytes = Array(passphrase.utf8)
        defer { for i in bytes.indices { bytes[i] = 0 } }
        return try Argon2id.deriveKey(password: bytes, salt: salt, parameters: parameters)
    }

    private static func aad(_ name: String) -> [UInt8] { itemLabel + [0] + Array(name.utf8) }

    func get(_ name: String) throws -> SecretBytes? {
        guard let sealed = try inner.get(name) else { return nil }
        return try sealed.withBytes { raw -> SecretBytes in
            guard raw.count >= 1 + AEAD.nonceCount + AEAD.tagCount, raw[0] == 1 else {
                throw ItsMeError(.corruptData, "secret item \(name) is not sealed with the passphrase")
            }
            let nonce = Array(raw[1...AEAD.nonceCount])
            let body = UnsafeRawBufferPointer(rebasing: raw[(1 + AEAD.nonceCount)...])
            return try AEAD.open(.chacha20Poly1305, key: key, nonce: nonce, ciphertext: body, aad: Self.aad(name))
        }
    }

    func put(_ name: String, _ value: UnsafeRawBufferPointer, accessibility: Accessibility) throws {
        var random = SystemRandom()
        let nonce = random.bytes(AEAD.nonceCount)
        let sealed = try AEAD.seal(.chacha20Poly1305, key: key, nonce: nonce, plaintext: value, aad: Self.aad(name))
        try inner.put(name, bytes: [1] + nonce + sealed, accessibility: accessibility)
    }

    func remove(_ name: String) throws -> Bool { try inner.remove(name) }

    func withExclusiveAccess<R: ~Copyable>(_ body: () throws -> R) throws -> R {
        try inner.withExclusiveAccess(body)
    }
}

/// Writes a file readable by its owner only, atomically (a temporary file
/// renamed over it).
func writePrivateFile(_ path: String, _ data: Data) throws {
    let temporary = path + ".tmp"
    let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
    guard fd >= 0 else { throw CLIError("cannot write \(temporary): \(String(cString: strerror(errno)))") }
    let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    let synced = fsync(fd) == 0
    close(fd)
    guard written == data.count, synced, rename(temporary, path) == 0 else {
        unlink(temporary)
        throw CLIError("cannot write \(path): \(String(cString: strerror(errno)))")
    }
}

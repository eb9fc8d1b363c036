#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import ItsMeRelayProtocol
import ItsMePrimitives
import ItsMeBase

/// The file secret store wrapped by a passphrase, as ssh does for keys:
/// every item is sealed with ChaCha20-Poly1305 under a key Argon2id derives
/// from the passphrase (libsodium's moderate level: 3 passes over 256 MiB),
/// with the item's name as associated data, so a copy of the files is
/// useless without the passphrase and items cannot be swapped.
///
/// Layout (docs/STORAGE.md, "The passphrase-wrapped file store"): the items
/// are files in `directory`, as `FileSecretStore` keeps them; the wrap file
/// sits beside the directory, named after it with `.wrap` appended
/// (`data/secrets` → `data/secrets.wrap`). It holds the format version, the
/// KDF and its parameters, the salt, and an AEAD of nothing under the key,
/// which tells a wrong passphrase before any item is read.
///
/// Thread safety: as `FileSecretStore`; the key is read-only once opened.
public final class PassphraseSecretStore: SecretStore {
    /// The file store that holds the sealed items.
    package let inner: FileSecretStore
    /// Where the wrap file is: `directory` + `.wrap`.
    package let wrapPath: String
    private let key: SecretBytes

    /// What every new wrap uses: libsodium's moderate level (3 passes over
    /// 256 MiB, about a second).
    package static let parameters = Argon2id.Parameters.moderate
    /// The longest passphrase taken, in bytes.
    package static let maxPassphraseCount = 4096
    /// The largest wrap file read (a real one is about 200 bytes).
    static let maxWrapFileCount = 4096

    // The labels of the format's first version, which the command-line
    // client introduced: kept as they are so that its stores still open.
    private static let itemLabel = Array("itsme-cli-secret-v1".utf8)
    private static let checkLabel = Array("itsme-cli-passphrase-check-v1".utf8)
    /// The first byte of a sealed item.
    static let itemVersion: UInt8 = 1

    /// The library may call it from its own threads.
    public var allowsLibraryThreads: Bool { true }

    private init(inner: FileSecretStore, wrapPath: String, key: consuming SecretBytes) {
        self.inner = inner
        self.wrapPath = wrapPath
        self.key = key
    }

    // MARK: Paths

    /// The wrap file's path for a store in `directory`: the directory's
    /// path (without trailing slashes) and `.wrap`. Throws
    /// `.invalidArgument` for an empty path, a NUL byte, or a path whose
    /// last component is not a name (`/`, `.`, `..`).
    public static func wrapPath(directory: String) throws -> String {
        guard !directory.isEmpty, !directory.utf8.contains(0) else {
            throw ItsMeError(.invalidArgument, "secret store directory must be a non-empty path")
        }
        var path = directory
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        let last = path.split(separator: "/", omittingEmptySubsequences: false).last ?? ""
        guard !last.isEmpty, last != ".", last != ".." else {
            throw ItsMeError(
                .invalidArgument, "a wrapped store's directory must end in a name: its wrap file sits beside it, named after it")
        }
        return path + ".wrap"
    }

    /// Whether the store in `directory` is wrapped: anything at its wrap
    /// path (even a link or a FIFO, which `open` then refuses) says so, so
    /// that a damaged wrap file is never mistaken for a plain store.
    /// Throws `.invalidArgument` for an unusable directory path, `.secretStore`
    /// if the wrap path cannot be inspected.
    public static func isWrapped(directory: String) throws -> Bool {
        let path = try wrapPath(directory: directory)
        var info = stat()
        if lstat(path, &info) == 0 { return true }
        guard errno == ENOENT || errno == ENOTDIR else {
            throw ItsMeError(.secretStore, "cannot inspect \(path): \(errnoText())")
        }
        return false
    }

    // MARK: Create and open

    /// Wraps a new, empty store in `directory` (created with mode 0700 if
    /// missing) under `passphrase` (1 to `maxPassphraseCount` bytes), and
    /// writes its wrap file. Costs one Argon2id derivation (`parameters`).
    ///
    /// Throws `.invalidArgument` (the directory or passphrase),
    /// `.alreadyExists` (something is at the wrap path, or the directory
    /// already holds items), `.secretStore` (a file system failure),
    /// `.outOfMemory` (Argon2id could not allocate its memory).
    public static func create<P: ByteView & ~Copyable>(directory: String, passphrase: borrowing P) throws
        -> PassphraseSecretStore
    {
        var random = SystemRandom()
        return try create(directory: directory, passphrase: passphrase, random: &random)
    }

    /// `create`, drawing the salt and nonces from `random`.
    package static func create<P: ByteView & ~Copyable, R: RandomSource>(
        directory: String, passphrase: borrowing P, random: inout R
    ) throws -> PassphraseSecretStore {
        let wrapPath = try wrapPath(directory: directory)
        let count = passphrase.withBytes { $0.count }
        guard count >= 1, count <= maxPassphraseCount else {
            throw ItsMeError(.invalidArgument, "a passphrase is 1 to \(maxPassphraseCount) bytes, got \(count)")
        }
        guard try !isWrapped(directory: directory) else {
            throw ItsMeError(.alreadyExists, "\(wrapPath) exists: the store is wrapped already")
        }
        let inner = try FileSecretStore(directory: directory)
        if let item = try firstItem(in: inner.directory) {
            throw ItsMeError(
                .alreadyExists, "\(inner.directory) holds secret items already (\(item)): only a new, empty store can be wrapped")
        }
        let salt = random.bytes(Argon2id.saltCount)
        let key = try Argon2id.deriveKey(password: passphrase, salt: salt, parameters: parameters)
        let nonce = random.bytes(AEAD.nonceCount)
        let check = try AEAD.seal(.chacha20Poly1305, key: key, nonce: nonce, plaintext: [UInt8](), aad: checkLabel)
        let file = WrapFile(parameters: parameters, salt: salt, check: nonce + check)
        try writeNewFile(wrapPath, file.encoded)
        return PassphraseSecretStore(inner: inner, wrapPath: wrapPath, key: key)
    }

    /// Opens the wrapped store in `directory` with `passphrase`. The wrap
    /// file is checked (version, KDF, parameters inside the accepted
    /// window) before the passphrase is hashed, with the parameters the
    /// file names.
    ///
    /// Throws `.invalidArgument` (the directory, or a passphrase longer
    /// than `maxPassphraseCount` bytes), `.notFound` (no wrap file: the
    /// store is not wrapped), `.secretStore` (something else than a
    /// regular file at the wrap path, or a file system failure),
    /// `.corruptData` (a damaged wrap file, an unknown version, parameters
    /// outside the window), `.authenticationFailed` (a wrong passphrase),
    /// `.outOfMemory`.
    public static func open<P: ByteView & ~Copyable>(directory: String, passphrase: borrowing P) throws
        -> PassphraseSecretStore
    {
        let wrapPath = try wrapPath(directory: directory)
        let count = passphrase.withBytes { $0.count }
        guard count <= maxPassphraseCount else {
            throw ItsMeError(.invalidArgument, "a passphrase is at most \(maxPassphraseCount) bytes, got \(count)")
        }
        let bytes: [UInt8]
        do {
            guard let read = try RegularFile.contents(of: wrapPath, limit: maxWrapFileCount) else {
                throw ItsMeError(.notFound, "\(wrapPath) is missing: the store in \(directory) is not wrapped")
            }
            bytes = read
        } catch let error as RegularFileError {
            let advice = error.isDamage ? "; restore it from a backup, or the secret items cannot be opened" : ""
            throw ItsMeError(.secretStore, "\(wrapPath) \(error.reason)\(advice)")
        }
        guard let file = WrapFile(parsing: bytes) else {
            throw ItsMeError(.corruptData, "\(wrapPath) is damaged or of an unknown version")
        }
        guard file.parameters.isAccepted else {
            throw ItsMeError(.corruptData, "\(wrapPath) asks for Argon2id parameters outside the accepted range (\(file.parameters))")
        }
        let inner = try FileSecretStore(directory: directory)
        let key = try Argon2id.deriveKey(password: passphrase, salt: file.salt, parameters: file.parameters)
        do {
            _ = try AEAD.open(
                .chacha20Poly1305, key: key, nonce: Array(file.check.prefix(AEAD.nonceCount)),
                ciphertext: Array(file.check.dropFirst(AEAD.nonceCount)), aad: checkLabel)
        } catch {
            throw ItsMeError(.authenticationFailed, "wrong passphrase")
        }
        return PassphraseSecretStore(inner: inner, wrapPath: wrapPath, key: key)
    }

    // MARK: SecretStore

    private static func aad(_ name: String) -> [UInt8] { itemLabel + [0] + Array(name.utf8) }

    /// An item: `.corruptData` if it is not sealed by this format, and
    /// `.authenticationFailed` if it does not open (altered, or moved from
    /// another name or another store).
    public func get(_ name: String) throws -> SecretBytes? {
        guard let sealed = try inner.get(name) else { return nil }
        return try sealed.withBytes { raw -> SecretBytes in
            guard raw.count >= 1 + AEAD.nonceCount + AEAD.tagCount, raw[0] == Self.itemVersion else {
                throw ItsMeError(.corruptData, "secret item \(name) is not sealed with the passphrase")
            }
            let nonce = Array(raw[1...AEAD.nonceCount])
            let body = UnsafeRawBufferPointer(rebasing: raw[(1 + AEAD.nonceCount)...])
            return try AEAD.open(.chacha20Poly1305, key: key, nonce: nonce, ciphertext: body, aad: Self.aad(name))
        }
    }

    /// Seals `value` with ChaCha20-Poly1305 under the passphrase's key (bound to
    /// `name`) and stores it in the inner store, replacing any item of that name.
    /// Throws `.invalidArgument` for an invalid item name, the inner store's error.
    public func put(_ name: String, _ value: UnsafeRawBufferPointer, accessibility: Accessibility) throws {
        try SecretStoreName.check(name)
        var random = SystemRandom()
        let nonce = random.bytes(AEAD.nonceCount)
        let sealed = try AEAD.seal(.chacha20Poly1305, key: key, nonce: nonce, plaintext: value, aad: Self.aad(name))
        try inner.put(name, bytes: [Self.itemVersion] + nonce + sealed, accessibility: accessibility)
    }

    /// Removes the item `name`; false if there was none.
    /// Throws the inner store's error (`.invalidArgument` for an invalid name).
    public func remove(_ name: String) throws -> Bool { try inner.remove(name) }

    /// Runs `body` under the inner store's exclusive access.
    /// Throws what the inner store's lock or `body` throws.
    public func withExclusiveAccess<R: ~Copyable>(_ body: () throws -> R) throws -> R {
        try inner.withExclusiveAccess(body)
    }

    // MARK: Files

    /// The first item name in `directory` (entries starting with a dot are
    /// the store's own: its lock and temporary files), nil if none.
    private static func firstItem(in directory: String) throws -> String? {
        guard let dir = opendir(directory) else {
            throw ItsMeError(.secretStore, "cannot list \(directory): \(errnoText())")
        }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if !name.hasPrefix(".") { return name }
        }
        return nil
    }

    /// Writes a file that must not exist yet, readable by its owner only:
    /// a temporary file, fsync'd, linked to `path` (which fails if anything
    /// took the name meanwhile), and the directory fsync'd.
    private static func writeNewFile(_ path: String, _ bytes: [UInt8]) throws {
        var random = SystemRandom()
        let temporary = path + ".tmp-" + Hex.encodeUpper(random.bytes(8))
        let fd = openFile(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw ItsMeError(.secretStore, "cannot write \(temporary): \(errnoText())") }
        defer { unlink(temporary) }
        var done = 0
        var failure: String? = nil
        while failure == nil && done < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { failure = errnoText() } else { done += n }
        }
        if failure == nil && fsync(fd) != 0 { failure = errnoText() }
        close(fd)
        if let failure { throw ItsMeError(.secretStore, "cannot write \(path): \(failure)") }
        guard link(temporary, path) == 0 else {
            if errno == EEXIST { throw ItsMeError(.alreadyExists, "\(path) exists: the store is wrapped already") }
            throw ItsMeError(.secretStore, "cannot write \(path): \(errnoText())")
        }
        let parent = path.lastIndex(of: "/").map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let dfd = openFile(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0)
        guard dfd >= 0 else { throw ItsMeError(.secretStore, "cannot open \(parent) for sync: \(errnoText())") }
        defer { close(dfd) }
        guard fsync(dfd) == 0 else { throw ItsMeError(.secretStore, "cannot sync \(parent): \(errnoText())") }
    }
}

/// `open(2)`, out of reach of the store's own `open`.
private func openFile(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    open(path, flags, mode)
}

/// The wrap file, version 1: one JSON object (the form the command-line
/// client wrote), `{"version":1,"kdf":"argon2id13","opsLimit":N,
/// "memLimit":N,"salt":"<32 hex>","check":"<56 hex>"}`, the hex in lower
/// case; `check` is the nonce and the tag of an AEAD of nothing. A reader
/// takes the keys in any order with any JSON white space between tokens,
/// ignores other keys whose values are strings or integers, and refuses
/// anything else.
struct WrapFile: Equatable {
    static let version: Int = 1
    static let kdf = "argon2id13"

    var parameters: Argon2id.Parameters
    var salt: [UInt8]
    var check: [UInt8]

    init(parameters: Argon2id.Parameters, salt: [UInt8], check: [UInt8]) {
        self.parameters = parameters
        self.salt = salt
        self.check = check
    }

    var encoded: [UInt8] {
        let text =
            "{\"version\":\(Self.version),\"kdf\":\"\(Self.kdf)\",\"opsLimit\":\(parameters.opsLimit),"
            + "\"memLimit\":\(parameters.memLimit),\"salt\":\"\(Hex.encodeUpper(salt).lowercased())\","
            + "\"check\":\"\(Hex.encodeUpper(check).lowercased())\"}"
        return Array(text.utf8)
    }

    /// One object (read by the core's one JSON reader, `JSONValue`) with
    /// each key once and every value a string or a non-negative integer.
    init?(parsing bytes: [UInt8]) {
        guard let fields = Self.fields(bytes),
            let version = fields.integers["version"], version == UInt64(Self.version),
            fields.strings["kdf"] == Self.kdf,
            let ops = fields.integers["opsLimit"], let mem = fields.integers["memLimit"],
            let saltText = fields.strings["salt"], let salt = Hex.decode(saltText), salt.count == Argon2id.saltCount,
            let checkText = fields.strings["check"], let check = Hex.decode(checkText),
            check.count == AEAD.nonceCount + AEAD.tagCount
        else { return nil }
        self.init(parameters: Argon2id.Parameters(opsLimit: ops, memLimit: mem), salt: salt, check: check)
    }

    private static func fields(_ bytes: [UInt8]) -> (strings: [String: String], integers: [String: UInt64])? {
        guard let text = String(validating: bytes, as: UTF8.self), let value = JSONValue.parse(text, maxDepth: 1) else {
            return nil
        }
        guard case .object(let members) = value else { return nil }
        var strings: [String: String] = [:]
        var integers: [String: UInt64] = [:]
        for (key, member) in members {
            guard strings[key] == nil, integers[key] == nil else { return nil }
            switch member {
            case .string(let s): strings[key] = s
            case .int(let n) where n >= 0: integers[key] = UInt64(n)
            case .int, .null, .bool, .fraction, .array, .object: return nil
            }
        }
        return (strings, integers)
    }
}

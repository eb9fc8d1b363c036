#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization
import ItsMePrimitives
import ItsMeBase

/// How strictly a host should keep an item (mapped by an iOS host to its
/// Keychain accessibility classes). Raw values are the C constants
/// `ITSME_ACCESSIBLE_*`.
public enum Accessibility: UInt32, Sendable {
    /// Readable only while the device is unlocked, never moved to another device
    /// (the default, and the identity's class).
    case whenUnlockedThisDeviceOnly = 0
    /// Readable after the first unlock since boot, never moved to another device:
    /// for background work.
    case afterFirstUnlockThisDeviceOnly = 1
    /// Readable only while the device is unlocked; the host may let its backups
    /// carry it to another device.
    case whenUnlocked = 2
}

/// Where every secret of the library lives. The host owns it: the library
/// asks for items by name and never keeps secrets in files of its own.
///
/// Contract: `put` replaces atomically (after a crash the old or the new
/// value is there); `get` returns nil for a missing item; `remove` returns
/// false for a missing item. Implementations are called from one thread at
/// a time per store (callers serialise), but may be called from any thread.
public protocol SecretStore: AnyObject, Sendable {
    /// The item `name` in guarded memory, owned by the caller; nil if there is
    /// none. Throws `.invalidArgument` for an invalid item name, `.secretStore`
    /// if the store fails.
    func get(_ name: String) throws -> SecretBytes?
    /// Stores a copy of `value` as item `name`, atomically replacing any old
    /// value; the caller keeps and wipes its buffer. Throws `.invalidArgument`
    /// for an invalid item name, `.secretStore` if the store fails.
    func put(_ name: String, _ value: UnsafeRawBufferPointer, accessibility: Accessibility) throws
    /// Removes the item `name`: true if it existed, false if not. Throws
    /// `.invalidArgument` for an invalid item name, `.secretStore` if the store
    /// fails.
    func remove(_ name: String) throws -> Bool

    /// Runs `body` with exclusive access for a read-modify-write of items
    /// (the attempt counters). The default serialises within the process;
    /// a store shared between processes must also lock across them.
    /// Throws what `body` throws, or `.secretStore` if the lock cannot be taken.
    func withExclusiveAccess<R: ~Copyable>(_ body: () throws -> R) throws -> R

    /// Whether the library may call this store from a thread of its own: a
    /// contact store then raises its mark after a burst of commits there,
    /// off the committing thread (docs/STORAGE.md). False by default: a
    /// host's store is called only on the threads that call the library.
    var allowsLibraryThreads: Bool { get }
}

extension SecretStore {
    public var allowsLibraryThreads: Bool { false }
}

/// The process-wide lock behind the default `withExclusiveAccess` and the
/// file store's. It only ever covers a few item reads and writes, never a
/// password hash. The thread holding it is refused, not trapped, when it
/// asks again: that happens when a host releases a handle from inside a
/// secret store callback (Python's garbage collector does) and the release
/// closes a contact store, which raises its mark.
private let readModifyWriteLock = CheckedLock()

private func readModifyWriteAgain() -> ItsMeError {
    ItsMeError(.secretStore, "exclusive access to the secret store was asked for again by the thread that holds it")
}

extension SecretStore {
    /// The default: runs `body` under one lock shared by every store of the
    /// process. Rethrows what `body` throws; `.secretStore` if the calling
    /// thread holds the lock already (a call from inside `body`, or from a
    /// secret store callback it made), which waiting would never end.
    public func withExclusiveAccess<R: ~Copyable>(_ body: () throws -> R) throws -> R {
        try readModifyWriteLock.withLock(reentered: readModifyWriteAgain(), body)
    }

    /// Stores `bytes` (public bytes or a `SecretBytes`, borrowed, not copied to
    /// the heap) as item `name`, as `put(_:_:accessibility:)`.
    package func put<B: ByteView & ~Copyable>(
        _ name: String, bytes: borrowing B, accessibility: Accessibility = .whenUnlockedThisDeviceOnly
    ) throws {
        try bytes.withBytes { try put(name, $0, accessibility: accessibility) }
    }
}

/// Item names: 1 to 128 characters from [a-z0-9._-], not starting with a
/// dot, so that any host can use them as file or account names.
package enum SecretStoreName {
    package static let maxLength = 128

    package static func isValid(_ name: String) -> Bool {
        let u = Array(name.utf8)
        guard !u.isEmpty, u.count <= maxLength, u[0] != UInt8(ascii: ".") else { return false }
        return u.allSatisfy { c in
            (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
                || c == UInt8(ascii: ".") || c == UInt8(ascii: "_") || c == UInt8(ascii: "-")
        }
    }

    package static func check(_ name: String) throws {
        guard isValid(name) else {
            throw ItsMeError(.invalidArgument, "invalid secret item name")
        }
    }

    /// Largest item we read back: our records are far smaller; anything
    /// bigger is not ours.
    package static let maxItemSize = 1 << 20
}

/// Items in guarded memory, wiped when removed or when the store dies.
public final class MemorySecretStore: SecretStore {
    private final class Item: @unchecked Sendable {
        let bytes: SecretBytes
        init(_ bytes: consuming SecretBytes) { self.bytes = bytes }
    }

    private let items = Mutex<[String: Item]>([:])

    /// An empty store, for tests, examples and identities that need not outlive
    /// the process.
    public init() {}

    /// The library may call it from its own threads.
    public var allowsLibraryThreads: Bool { true }

    /// A copy of the item in guarded memory, owned by the caller; nil if none.
    /// Throws `.invalidArgument` for an invalid item name.
    public func get(_ name: String) throws -> SecretBytes? {
        try SecretStoreName.check(name)
        guard let item = items.withLock({ $0[name] }) else { return nil }
        return try item.bytes.copy()
    }

    /// Keeps a copy of `value` in guarded memory (the accessibility class does
    /// not apply in memory). Throws `.invalidArgument` for an invalid item name.
    public func put(_ name: String, _ value: UnsafeRawBufferPointer, accessibility: Accessibility) throws {
        try SecretStoreName.check(name)
        let item = Item(try SecretBytes(copying: value))
        items.withLock { $0[name] = item }
    }

    /// Removes and wipes the item; false if there was none. Throws
    /// `.invalidArgument` for an invalid item name.
    public func remove(_ name: String) throws -> Bool {
        try SecretStoreName.check(name)
        return items.withLock { $0.removeValue(forKey: name) } != nil
    }

    /// Item names, sorted (for tests).
    package var names: [String] { items.withLock { $0.keys.sorted() } }
}

/// Items as files in one directory: mode 0600 in a 0700 directory, written
/// to a temporary file, fsync'd, renamed over the old one, and the directory
/// fsync'd, so a crash leaves either the old or the new value. Protected by
/// file permissions only (like an ssh key without a passphrase).
public final class FileSecretStore: SecretStore {
    /// The directory holding the item files.
    package let directory: String

    /// The library may call it from its own threads.
    public var allowsLibraryThreads: Bool { true }

    /// Opens the directory, creating it (and missing parents) with mode 0700.
    /// Throws `.invalidArgument` for an empty path or one holding a NUL byte,
    /// `.secretStore` if the path is not a directory or cannot be created.
    public init(directory: String) throws {
        guard !directory.isEmpty, !directory.utf8.contains(0) else {
            throw ItsMeError(.invalidArgument, "secret store directory must be a non-empty path")
        }
        var path = directory
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        self.directory = path
        try Self.makeDirectory(path)
    }

    private static func makeDirectory(_ path: String) throws {
        var st = stat()
        if stat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFDIR else {
                throw ItsMeError(.secretStore, "secret store path exists and is not a directory: \(path)")
            }
            return
        }
        guard errno == ENOENT else {
            throw ItsMeError(.secretStore, "cannot inspect \(path): \(errnoText())")
        }
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            try makeDirectory(String(path[..<slash]))
        }
        guard mkdir(path, 0o700) == 0 || errno == EEXIST else {
            throw ItsMeError(.secretStore, "cannot create directory \(path): \(errnoText())")
        }
    }

    private func path(_ name: String) -> String { directory + "/" + name }

    /// An item's bytes, nil if it is missing. Only a regular file is an
    /// item (`RegularFile`): a symbolic link is not followed, and a FIFO,
    /// a directory or a device in its place is refused (`.secretStore`)
    /// without waiting on it, as is a file larger than any item
    /// (`.corruptData`); none of them is taken as missing.
    public func get(_ name: String) throws -> SecretBytes? {
        try SecretStoreName.check(name)
        do {
            guard let file = try RegularFile(path: path(name), limit: SecretStoreName.maxItemSize) else { return nil }
            var out = try SecretBytes(count: file.size)
            try out.withMutableBytes { try file.read(into: $0) }
            return out
        } catch let error as RegularFileError {
            let kind: ItsMeError.Kind
            if case .tooLarge = error.problem { kind = .corruptData } else { kind = .secretStore }
            throw ItsMeError(kind, "secret item \(name) \(error.reason)")
        }
    }

    /// Writes `value` to a temporary file (mode 0600), fsyncs it, renames it
    /// over the item and fsyncs the directory. The accessibility class is not
    /// enforced: files are protected by their permissions only. Throws
    /// `.invalidArgument` for an invalid name or an item over 1 MiB,
    /// `.secretStore` if a file operation fails.
    public func put(_ name: String, _ value: UnsafeRawBufferPointer, accessibility: Accessibility) throws {
        try SecretStoreName.check(name)
        guard value.count <= SecretStoreName.maxItemSize else {
            throw ItsMeError(.invalidArgument, "secret item larger than \(SecretStoreName.maxItemSize) bytes")
        }
        var rng = SystemRandom()
        // A dot name is never a valid item name, so it cannot collide.
        let temp = directory + "/." + name + ".tmp-" + Hex.encodeUpper(rng.bytes(8))
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw ItsMeError(.secretStore, "cannot create temporary file for \(name): \(errnoText())")
        }
        var ok = true
        var done = 0
        while ok && done < value.count {
            let n = write(fd, value.baseAddress!.advanced(by: done), value.count - done)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { ok = false } else { done += n }
        }
        let failure = ok ? nil : errnoText()
        let synced = ok && fsync(fd) == 0
        let syncFailure = synced || !ok ? nil : errnoText()
        close(fd)
        guard ok, synced else {
            unlink(temp)
            throw ItsMeError(.secretStore, "cannot write secret item \(name): \(failure ?? syncFailure ?? "unknown error")")
        }
        guard rename(temp, path(name)) == 0 else {
            let text = errnoText()
            unlink(temp)
            throw ItsMeError(.secretStore, "cannot replace secret item \(name): \(text)")
        }
        try syncDirectory()
    }

    /// The process-wide lock, plus an exclusive `flock` on `.lock` in the
    /// directory, so that processes sharing the directory take turns too.
    /// `.secretStore` as the default's when this thread holds the lock.
    public func withExclusiveAccess<R: ~Copyable>(_ body: () throws -> R) throws -> R {
        try readModifyWriteLock.withLock(reentered: readModifyWriteAgain()) {
            let fd = open(directory + "/.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard fd >= 0 else {
                throw ItsMeError(.secretStore, "cannot open the store's lock file: \(errnoText())")
            }
            defer { close(fd) }  // closing releases the lock
            while flock(fd, LOCK_EX) != 0 {
                guard errno == EINTR else {
                    throw ItsMeError(.secretStore, "cannot lock the store: \(errnoText())")
                }
            }
            return try body()
        }
    }

    /// Deletes the item's file and fsyncs the directory; false if there was
    /// none. Throws `.invalidArgument` for an invalid name, `.secretStore` if
    /// the file cannot be removed.
    public func remove(_ name: String) throws -> Bool {
        try SecretStoreName.check(name)
        guard unlink(path(name)) == 0 else {
            if errno == ENOENT { return false }
            throw ItsMeError(.secretStore, "cannot remove secret item \(name): \(errnoText())")
        }
        try syncDirectory()
        return true
    }

    private func syncDirectory() throws {
        let dfd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dfd >= 0 else {
            throw ItsMeError(.secretStore, "cannot open directory for sync: \(errnoText())")
        }
        defer { close(dfd) }
        guard fsync(dfd) == 0 else {
            throw ItsMeError(.secretStore, "cannot sync directory: \(errnoText())")
        }
    }
}

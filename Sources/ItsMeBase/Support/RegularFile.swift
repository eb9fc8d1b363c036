#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import ItsMePrimitives

/// A file opened for reading that is a regular file, of at most `limit`
/// bytes: the one way this project reads a file it did not just write (the
/// file secret store's items, and the command-line client's data files and
/// the files named on its command line).
///
/// The rule: the path is opened with `O_NONBLOCK` (a FIFO never blocks the
/// open), `O_NOCTTY`, `O_CLOEXEC` and, unless links are to be followed,
/// `O_NOFOLLOW` (a symbolic link is refused, not followed); the opened
/// descriptor is `fstat`ed and anything but a regular file (a FIFO, a
/// directory, a device, a socket) is refused; then `O_NONBLOCK` is cleared
/// and no more than `limit` bytes are read. A device is also refused before
/// it is opened (an `lstat`, or a `stat` when links are followed), so that
/// opening it has no effect. Only a missing path is "absent" (nil).
public final class RegularFile {
    /// The path as given to `init(path:followLinks:limit:)`.
    package let path: String
    /// The size `fstat` gave when the file was opened.
    package let size: Int
    /// The most bytes this file may hold and `read` will take.
    package let limit: Int
    private let fd: Int32

    /// Opens `path`; nil if nothing is there (for a followed link: nor at
    /// its end). Throws `RegularFileError` for anything else that is not a
    /// regular file of at most `limit` bytes, or that cannot be opened.
    package init?(path: String, followLinks: Bool = false, limit: Int) throws {
        self.path = path
        self.limit = limit
        guard !path.isEmpty, !path.utf8.contains(0) else { throw RegularFileError(path, .system(call: "open", code: ENOENT)) }

        var before = stat()
        let inspected = followLinks ? stat(path, &before) : lstat(path, &before)
        if inspected != 0 {
            if errno == ENOENT { return nil }
        } else if let problem = Self.problem(before.st_mode) {
            throw RegularFileError(path, problem)
        }

        var flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC
        if !followLinks { flags |= O_NOFOLLOW }
        var opened: Int32
        repeat { opened = open(path, flags) } while opened < 0 && errno == EINTR
        if opened < 0 {
            let code = errno
            if code == ENOENT { return nil }
            // Between the look and the open, something else may have
            // taken the path's place: say what it is if it is not a file.
            var now = stat()
            if lstat(path, &now) == 0, let problem = Self.problem(now.st_mode),
                problem != .symbolicLink || !followLinks
            {
                throw RegularFileError(path, problem)
            }
            throw RegularFileError(path, .system(call: "open", code: code))
        }
        var info = stat()
        guard fstat(opened, &info) == 0 else {
            let code = errno
            close(opened)
            throw RegularFileError(path, .system(call: "fstat", code: code))
        }
        if let problem = Self.problem(info.st_mode) {
            close(opened)
            throw RegularFileError(path, problem)
        }
        let size = Int(info.st_size)
        guard size <= limit else {
            close(opened)
            throw RegularFileError(path, .tooLarge(size: size, limit: limit))
        }
        let status = fcntl(opened, F_GETFL)
        guard status >= 0, status & O_NONBLOCK == 0 || fcntl(opened, F_SETFL, status & ~O_NONBLOCK) == 0 else {
            let code = errno
            close(opened)
            throw RegularFileError(path, .system(call: "fcntl", code: code))
        }
        self.size = size
        self.fd = opened
    }

    deinit { close(fd) }

    /// What is wrong with what has the mode `mode`: nil for a regular file.
    private static func problem(_ mode: mode_t) -> RegularFileError.Problem? {
        switch mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFLNK: return .symbolicLink
        case S_IFDIR: return .notRegular(kind: "a directory")
        case S_IFIFO: return .notRegular(kind: "a FIFO")
        case S_IFCHR: return .notRegular(kind: "a character device")
        case S_IFBLK: return .notRegular(kind: "a block device")
        case S_IFSOCK: return .notRegular(kind: "a socket")
        default: return .notRegular(kind: "of an unknown kind")
        }
    }

    /// Reads exactly `buffer.count` bytes (the caller passes `size`): a
    /// file that ends sooner, or goes on after them, changed while it was
    /// read.
    /// Throws `RegularFileError` (`.changed` or `.system`).
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws {
        var done = 0
        while done < buffer.count {
            let n = systemRead(fd, buffer.baseAddress!.advanced(by: done), buffer.count - done)
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw RegularFileError(path, .system(call: "read", code: errno)) }
            if n == 0 { throw RegularFileError(path, .changed) }
            done += n
        }
        var extra: UInt8 = 0
        while true {
            let n = systemRead(fd, &extra, 1)
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw RegularFileError(path, .system(call: "read", code: errno)) }
            if n > 0 { throw RegularFileError(path, .changed) }
            return
        }
    }

    /// Every byte to the end of the file, at most `limit` (some regular
    /// files, as those of /proc, say 0 for their size and still have
    /// bytes). Buffers the bytes passed through are zeroed before they
    /// are freed.
    package func readAll() throws -> [UInt8] {
        var capacity = min(size, limit) + 1
        var buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1)
        var count = 0
        defer {
            wipe(buffer)
            buffer.deallocate()
        }
        while true {
            if count == capacity {
                // Full: the bytes go on past what fstat said.
                let grown = min(capacity * 2, limit + 1)
                let larger = UnsafeMutableRawBufferPointer.allocate(byteCount: grown, alignment: 1)
                larger.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                wipe(buffer)
                buffer.deallocate()
                buffer = larger
                capacity = grown
            }
            let n = systemRead(fd, buffer.baseAddress!.advanced(by: count), capacity - count)
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw RegularFileError(path, .system(call: "read", code: errno)) }
            if n == 0 { break }
            count += n
            if count > limit { throw RegularFileError(path, .tooLarge(size: nil, limit: limit)) }
        }
        return Array(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
    }

    /// The bytes of the regular file at `path` (at most `limit`), or nil if
    /// nothing is there.
    /// Throws `RegularFileError` as `init(path:followLinks:limit:)` and `read` do.
    public static func contents(of path: String, followLinks: Bool = false, limit: Int) throws -> [UInt8]? {
        guard let file = try RegularFile(path: path, followLinks: followLinks, limit: limit) else { return nil }
        return try file.readAll()
    }

    /// Writes `bytes` as a new file at `path`, readable and writable by its
    /// owner only (0600), synced before it returns: `.alreadyExists` if
    /// anything is at `path` (a link is not followed), `.database` if it
    /// cannot be written (the partial file is removed).
    package static func writeNew(_ path: String, _ bytes: [UInt8]) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0o600)
        guard fd >= 0 else {
            let code = errno
            if code == EEXIST { throw ItsMeError(.alreadyExists, "\(path) exists: it is never overwritten") }
            throw ItsMeError(.database, "cannot create \(path): \(String(cString: strerror(code)))")
        }
        var written = 0
        var failure: Int32 = 0
        bytes.withUnsafeBytes { buffer in
            while written < buffer.count {
                let n = write(fd, buffer.baseAddress!.advanced(by: written), buffer.count - written)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 {
                    failure = n < 0 ? errno : EIO
                    return
                }
                written += n
            }
        }
        if failure == 0, fsync(fd) != 0 { failure = errno }
        close(fd)
        if failure != 0 {
            unlink(path)
            throw ItsMeError(.database, "cannot write \(path): \(String(cString: strerror(failure)))")
        }
    }
}

/// Why a path was not read as a regular file: `reason` says it in a few
/// words to follow the path or the item's name ("is a FIFO, not a regular
/// file").
public struct RegularFileError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What was found instead of a readable regular file.
    public enum Problem: Equatable, Sendable {
        /// Something other than a regular file is there.
        case notRegular(kind: String)
        /// A symbolic link, where links are not followed.
        case symbolicLink
        /// More than `limit` bytes (`size` as `fstat` gave it, or nil when
        /// the bytes went on past the limit).
        case tooLarge(size: Int?, limit: Int)
        /// The file changed while it was read.
        case changed
        /// A system call failed with `code` (an errno value).
        case system(call: String, code: Int32)
    }

    /// The path that was refused.
    package let path: String
    /// What was found there.
    public let problem: Problem

    /// An error for `path`: what `problem` says was found there.
    package init(_ path: String, _ problem: Problem) {
        self.path = path
        self.problem = problem
    }

    /// Refused for what is there (not for a failing system call).
    public var isDamage: Bool {
        if case .system = problem { return false }
        return true
    }

    /// A few words to follow the path, such as "is a FIFO, not a regular file".
    public var reason: String {
        switch problem {
        case .notRegular(let kind): return "is \(kind), not a regular file"
        case .symbolicLink: return "is a symbolic link, not a regular file (links are not followed)"
        case .tooLarge(let size?, let limit): return "is \(size) bytes, larger than the \(limit) allowed"
        case .tooLarge(nil, let limit): return "is larger than the \(limit) bytes allowed"
        case .changed: return "changed while it was read"
        case .system(let call, let code): return "cannot be read (\(call): \(errnoText(code)))"
        }
    }

    /// The path followed by the reason.
    public var description: String { "\(path) \(reason)" }
}

/// read(2), by a name the methods named `read` do not hide.
private func systemRead(_ fd: Int32, _ into: UnsafeMutableRawPointer, _ count: Int) -> Int {
    read(fd, into, count)
}

/// The text of an errno value, for error messages.
package func errnoText(_ code: Int32 = errno) -> String {
    guard let s = strerror(code) else { return "errno \(code)" }
    return String(cString: s)
}

import CSQLite
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed SQLite call, with SQLite's own codes.
public struct DatabaseError: Error, Equatable, CustomStringConvertible {
    /// The primary result code (`SQLITE_CONSTRAINT` = 19, ...).
    public let code: Int32
    /// The extended result code (`SQLITE_CONSTRAINT_UNIQUE` = 2067, ...).
    public let extendedCode: Int32
    /// SQLite's message, with what we were doing.
    public let message: String

    /// SQLite's codes, the name of the extended code and the message.
    public var description: String {
        let name = String(cString: sqlite3_errstr(extendedCode))
        return "SQLite error \(code)/\(extendedCode) (\(name)): \(message)"
    }

    /// The core's error for the C interface.
    package var asItsMeError: ItsMeError { ItsMeError(.database, description) }
}

/// A value to bind or read.
public enum SQLValue: Equatable, Sendable {
    /// SQL NULL.
    case null
    /// A 64-bit signed integer.
    case integer(Int64)
    /// A double-precision floating-point number.
    case real(Double)
    /// UTF-8 text.
    case text(String)
    /// Bytes, stored as they are.
    case blob([UInt8])
}

/// One SQLite connection: the small wrapper the contact store and the relay
/// build on. Opened in serialized mode with extended result codes; not
/// `Sendable` (give each thread its own connection or serialise access).
public final class Database {
    /// How `init(path:mode:busyTimeoutMilliseconds:)` opens the file.
    public enum Mode: Sendable {
        /// Reads only; the file must exist.
        case readOnly
        /// Reads and writes; the file must exist.
        case readWrite
        /// Read-write, creating the file if missing (the default).
        case readWriteCreate
        /// Reads the database file alone, as SQLite's `immutable=1` does: no
        /// lock, no `-wal` or `-shm` file opened or created, whatever its
        /// journal mode. What a `-wal` file holds is not seen: for a file
        /// whose log is absent or empty, read without changing its directory.
        case immutable
    }

    let handle: OpaquePointer
    /// The path the connection was opened with (`:memory:` for a private
    /// in-memory database).
    public let path: String
    /// Prepared statements of `run` and `query`, by SQL text, kept between
    /// calls (reset, bindings cleared): preparing costs more than running
    /// the small statements the store and the relay use.
    private let statementCache = Mutex<[String: CachedStatement]>([:])
    /// A statement handle, used by one caller at a time (taken out of the
    /// cache while in use).
    private struct CachedStatement: @unchecked Sendable { let handle: OpaquePointer }
    private static let statementCacheLimit = 64

    /// `:memory:` opens a private in-memory database.
    /// Throws `DatabaseError` if the file cannot be opened, is missing (modes
    /// other than `.readWriteCreate`) or is not a regular file.
    public init(path: String, mode: Mode = .readWriteCreate, busyTimeoutMilliseconds: Int32 = 5000) throws {
        var flags = SQLITE_OPEN_FULLMUTEX | SQLITE_OPEN_EXRESCODE
        var name = path
        switch mode {
        case .readOnly: flags |= SQLITE_OPEN_READONLY
        case .readWrite: flags |= SQLITE_OPEN_READWRITE
        case .readWriteCreate: flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        case .immutable:
            flags |= SQLITE_OPEN_READONLY | SQLITE_OPEN_URI
            name = "file:" + Self.uriEscaped(path) + "?immutable=1"
        }
        if mode != .readOnly, mode != .immutable, path != ":memory:", !path.hasPrefix("file:") {
            try Self.prepareFile(path, create: mode == .readWriteCreate)
        }
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(name, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(db)
            throw DatabaseError(code: rc & 0xFF, extendedCode: rc, message: "cannot open \(path): \(message)")
        }
        handle = db
        self.path = path
        sqlite3_busy_timeout(db, busyTimeoutMilliseconds)
    }

    /// `path` as the path of a URI filename: every byte but unreserved
    /// characters and `/` percent-encoded (so `?`, `#` and `%` in a name
    /// stay part of it).
    private static func uriEscaped(_ path: String) -> String {
        var out = ""
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                out += "%"
                out.unicodeScalars.append(hex[Int(byte >> 4)])
                out.unicodeScalars.append(hex[Int(byte & 15)])
            }
        }
        return out
    }

    deinit {
        for statement in statementCache.withLock({ Array($0.values) }) { sqlite3_finalize(statement.handle) }
        sqlite3_close_v2(handle)
    }

    /// Makes the database file readable by its owner only, whatever the
    /// umask: creates it with mode 0600 (SQLite then gives its -wal and
    /// -shm files the database's mode) and narrows an existing one, and the
    /// logs beside it, to 0600. Opened without blocking and checked to be a
    /// regular file, so a FIFO or a device in its place is refused instead
    /// of hanging the caller.
    private static func prepareFile(_ path: String, create: Bool) throws {
        let fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK | (create ? O_CREAT : 0), 0o600)
        guard fd >= 0 else {
            if errno == ENOENT, !create { return }  // sqlite3_open_v2 reports it
            throw DatabaseError(code: SQLITE_CANTOPEN, extendedCode: SQLITE_CANTOPEN, message: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw DatabaseError(code: SQLITE_CANTOPEN, extendedCode: SQLITE_CANTOPEN, message: "cannot open \(path): not a regular file")
        }
        // Best effort: a file of another owner keeps its mode (fchmod fails).
        if info.st_mode & 0o077 != 0 { _ = fchmod(fd, 0o600) }
        for suffix in ["-wal", "-shm", "-journal"] { _ = chmod(path + suffix, 0o600) }
    }

    package func error(_ rc: Int32, _ context: String) -> DatabaseError {
        let extended = sqlite3_extended_errcode(handle)
        let message = String(cString: sqlite3_errmsg(handle))
        // Some failures (misuse) leave no error in the connection.
        let code = extended == SQLITE_OK ? rc : extended
        return DatabaseError(code: code & 0xFF, extendedCode: code, message: "\(context): \(message)")
    }

    /// Runs one or more statements that take no parameters.
    /// Throws `DatabaseError` with SQLite's message if a statement fails; the
    /// statements before it have run.
    public func execute(_ sql: String) throws {
        var errmsg: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &errmsg)
        if rc != SQLITE_OK {
            let message = errmsg.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_free(errmsg)
            let extended = sqlite3_extended_errcode(handle)
            throw DatabaseError(code: rc & 0xFF, extendedCode: extended == SQLITE_OK ? rc : extended, message: message)
        }
    }

    /// Prepares one SQL statement (not cached) for the caller to bind and step.
    /// Throws `DatabaseError` if SQLite refuses it, or if `sql` holds more than one
    /// statement (use `execute` for several).
    package func prepare(_ sql: String) throws -> Statement {
        Statement(try prepareHandle(sql), database: self)
    }

    /// A statement for `sql` from the cache, or newly prepared; it goes
    /// back to the cache when released.
    private func cachedStatement(_ sql: String) throws -> Statement {
        let handle = try statementCache.withLock({ $0.removeValue(forKey: sql) })?.handle ?? prepareHandle(sql)
        return Statement(handle, database: self, cacheKey: sql)
    }

    /// Takes back a cached statement: reset, its bindings cleared (bound
    /// values are freed), kept unless one for the same text is kept already.
    fileprivate func giveBack(_ statement: OpaquePointer, sql: String) {
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
        let kept = statementCache.withLock { cache -> Bool in
            guard cache[sql] == nil, cache.count < Self.statementCacheLimit else { return false }
            cache[sql] = CachedStatement(handle: statement)
            return true
        }
        if !kept { sqlite3_finalize(statement) }
    }

    private func prepareHandle(_ sql: String) throws -> OpaquePointer {
        var stmt: OpaquePointer?
        // `tail` points into the C string, so inspect it while it lives.
        let (rc, trailing) = sql.withCString { cSQL -> (Int32, Bool) in
            var tail: UnsafePointer<CChar>?
            let rc = sqlite3_prepare_v3(handle, cSQL, -1, 0, &stmt, &tail)
            guard rc == SQLITE_OK, let tail else { return (rc, false) }
            return (rc, !String(cString: tail).allSatisfy { $0.isWhitespace || $0 == ";" })
        }
        guard rc == SQLITE_OK else { throw error(rc, "cannot prepare statement") }
        guard let stmt else {
            throw DatabaseError(code: SQLITE_MISUSE, extendedCode: SQLITE_MISUSE, message: "empty statement")
        }
        if trailing {
            sqlite3_finalize(stmt)
            throw DatabaseError(
                code: SQLITE_MISUSE, extendedCode: SQLITE_MISUSE,
                message: "prepare() takes one statement; use execute() for several")
        }
        return stmt
    }

    /// Prepares, binds and runs a statement that returns no rows.
    /// Throws `DatabaseError` if SQLite refuses the statement, a value or a step.
    public func run(_ sql: String, _ values: [SQLValue] = []) throws {
        let statement = try cachedStatement(sql)
        try statement.bind(values)
        while try statement.step() {}
    }

    /// All rows of a query.
    /// Throws `DatabaseError` if SQLite refuses the statement, a value or a step.
    public func query(_ sql: String, _ values: [SQLValue] = []) throws -> [[SQLValue]] {
        let statement = try cachedStatement(sql)
        try statement.bind(values)
        var rows: [[SQLValue]] = []
        while try statement.step() { rows.append(statement.row()) }
        return rows
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    public var changes: Int { Int(sqlite3_changes64(handle)) }
    /// Rows changed on this connection since it opened, triggers included.
    package var totalChanges: Int64 { sqlite3_total_changes64(handle) }
    package var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }
    package var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// How a transaction takes SQLite's locks (`BEGIN DEFERRED`, `IMMEDIATE`,
    /// `EXCLUSIVE`).
    public enum TransactionKind: String, Sendable {
        /// Takes locks only when the first statement needs them.
        case deferred = "DEFERRED"
        /// Takes the write lock at once: the usual choice for read-modify-write.
        case immediate = "IMMEDIATE"
        /// Takes the write lock at once and keeps other connections from reading
        /// (except in WAL mode).
        case exclusive = "EXCLUSIVE"
    }

    /// Runs `body` in a transaction: committed if it returns, rolled back if
    /// it throws. Inside another transaction it nests as a savepoint.
    public func transaction<R>(_ kind: TransactionKind = .immediate, _ body: () throws -> R) throws -> R {
        if isInTransaction {
            try execute("SAVEPOINT itsme_nested")
            do {
                let result = try body()
                try execute("RELEASE itsme_nested")
                return result
            } catch {
                try? execute("ROLLBACK TO itsme_nested; RELEASE itsme_nested")
                throw error
            }
        }
        try execute("BEGIN \(kind.rawValue)")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            // A failed COMMIT may already have rolled back.
            if isInTransaction { try? execute("ROLLBACK") }
            throw error
        }
    }

    /// `PRAGMA user_version`: the schema version.
    package func userVersion() throws -> Int32 {
        let statement = try prepare("PRAGMA user_version")
        guard try statement.step() else { return 0 }
        return Int32(truncatingIfNeeded: statement.int64(0))
    }

    /// A forward migration to schema version `version`.
    public struct Migration {
        package let version: Int32
        package let apply: (Database) throws -> Void

        /// A migration to schema `version` that runs `apply` on the connection.
        public init(version: Int32, apply: @escaping (Database) throws -> Void) {
            self.version = version
            self.apply = apply
        }

        /// A migration to schema `version` that executes the statements in `sql`.
        public init(version: Int32, sql: String) {
            self.init(version: version) { try $0.execute(sql) }
        }
    }

    /// Brings the schema up to the last migration's version. Each migration
    /// runs in its own transaction together with its `user_version` update,
    /// so a crash leaves the schema at a whole version. A database newer
    /// than every migration is refused rather than misread.
    /// Throws `DatabaseError` for migrations not numbered 1, 2, 3..., for a
    /// database newer than the last one, or when a migration fails (its
    /// transaction is rolled back).
    public func migrate(_ migrations: [Migration]) throws {
        var previous: Int32 = 0
        for m in migrations {
            guard m.version == previous + 1 else {
                throw DatabaseError(
                    code: SQLITE_MISUSE, extendedCode: SQLITE_MISUSE,
                    message: "migrations must be numbered 1, 2, 3... without gaps")
            }
            previous = m.version
        }
        let latest = migrations.last?.version ?? 0
        let current = try userVersion()
        guard current <= latest else {
            throw DatabaseError(
                code: SQLITE_ERROR, extendedCode: SQLITE_ERROR,
                message: "database schema version \(current) is newer than this library supports (\(latest))")
        }
        for m in migrations where m.version > current {
            try transaction(.immediate) {
                // Re-read inside the write lock: another connection may have migrated.
                guard try userVersion() < m.version else { return }
                try m.apply(self)
                try execute("PRAGMA user_version = \(m.version)")
            }
        }
    }
}

/// A prepared statement. Finalised when it dies (or, from the cache of
/// `run` and `query`, given back to it).
package final class Statement {
    let handle: OpaquePointer
    private let database: Database
    private let cacheKey: String?

    fileprivate init(_ handle: OpaquePointer, database: Database, cacheKey: String? = nil) {
        self.handle = handle
        self.database = database
        self.cacheKey = cacheKey
    }

    deinit {
        if let cacheKey { database.giveBack(handle, sql: cacheKey) } else { sqlite3_finalize(handle) }
    }

    package var parameterCount: Int { Int(sqlite3_bind_parameter_count(handle)) }
    package var columnCount: Int { Int(sqlite3_column_count(handle)) }

    /// Binds `values` to parameters 1...n after resetting the statement.
    package func bind(_ values: [SQLValue]) throws {
        guard values.count == parameterCount else {
            throw DatabaseError(
                code: SQLITE_RANGE, extendedCode: SQLITE_RANGE,
                message: "statement takes \(parameterCount) parameters, \(values.count) given")
        }
        reset()
        sqlite3_clear_bindings(handle)
        for (i, value) in values.enumerated() {
            try bind(value, at: Int32(i + 1))
        }
    }

    /// SQLite copies bound text and blobs (SQLITE_TRANSIENT).
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    package func bind(_ value: SQLValue, at index: Int32) throws {
        let rc: Int32
        switch value {
        case .null:
            rc = sqlite3_bind_null(handle, index)
        case .integer(let v):
            rc = sqlite3_bind_int64(handle, index, v)
        case .real(let v):
            rc = sqlite3_bind_double(handle, index, v)
        case .text(let s):
            rc = sqlite3_bind_text64(handle, index, s, UInt64(s.utf8.count), Self.transient, UInt8(SQLITE_UTF8))
        case .blob(let b):
            rc = b.withUnsafeBytes { p in
                // A zero-length blob needs a non-NULL pointer to stay a blob.
                sqlite3_bind_blob64(handle, index, p.baseAddress ?? UnsafeRawPointer(bitPattern: 1), UInt64(b.count), Self.transient)
            }
        }
        guard rc == SQLITE_OK else { throw database.error(rc, "cannot bind parameter \(index)") }
    }

    /// Advances: true when a row is available, false when done.
    package func step() throws -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = database.error(rc, "statement failed")
            reset()
            throw error
        }
    }

    package func reset() { sqlite3_reset(handle) }

    package func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }
    package func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    package func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }

    package func text(_ column: Int32) -> String? {
        guard let p = sqlite3_column_text(handle, column) else { return nil }
        let n = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
    }

    package func blob(_ column: Int32) -> [UInt8]? {
        if isNull(column) { return nil }
        let n = Int(sqlite3_column_bytes(handle, column))
        guard n > 0, let p = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }

    package func value(_ column: Int32) -> SQLValue {
        switch sqlite3_column_type(handle, column) {
        case SQLITE_INTEGER: return .integer(int64(column))
        case SQLITE_FLOAT: return .real(double(column))
        case SQLITE_TEXT: return .text(text(column) ?? "")
        case SQLITE_BLOB: return .blob(blob(column) ?? [])
        default: return .null
        }
    }

    package func row() -> [SQLValue] {
        (0..<Int32(columnCount)).map { value($0) }
    }
}

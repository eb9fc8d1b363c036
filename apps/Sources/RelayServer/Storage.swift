import Foundation
import ItsMePrimitives
import NIOPosix

/// The two sides of an invite.
public enum InviteSide: Int64, Sendable {
    case inviter = 0
    case invitee = 1

    var other: InviteSide { self == .inviter ? .invitee : .inviter }
}

public struct StoredMessage: Sendable, Equatable {
    public let seq: Int64
    public let body: [UInt8]

    public init(seq: Int64, body: [UInt8]) {
        self.seq = seq
        self.body = body
    }
}

public enum CreateInviteResult: Sendable, Equatable { case created, exists, full }
public enum AcceptInviteResult: Sendable, Equatable { case accepted(expires: Int64), alreadyAccepted, notFound }
public enum PostResult: Sendable, Equatable { case posted(seq: Int64), limit, notFound }
public enum PutRecordResult: Sendable, Equatable { case created, same, conflict }
public enum DeleteRecordResult: Sendable, Equatable { case deleted, forbidden, notFound }

/// What the relay keeps. One small interface with two backends: SQLite (one
/// relay, this file) and PostgreSQL (several relays sharing one database,
/// the RelayServerPostgres target). Every method is one atomic step; an
/// expired invite is treated as absent. Methods are async so that no
/// backend blocks an event loop: SQLite runs on a thread of its own,
/// PostgreSQL over its own connections.
public protocol RelayStorage: Sendable {
    func createInvite(id: String, tokenHash: [UInt8], now: Int64, expires: Int64, maxInvites: Int) async throws -> CreateInviteResult
    func acceptInvite(id: String, tokenHash: [UInt8], now: Int64) async throws -> AcceptInviteResult
    /// The side a token holds in a live invite, and whether an invitee is bound.
    func side(invite id: String, tokenHash: [UInt8], now: Int64) async throws -> (side: InviteSide, accepted: Bool)?
    func post(invite id: String, side: InviteSide, body: [UInt8], maxMessages: Int, now: Int64) async throws -> PostResult
    /// The messages `side` posted with a sequence number above `after`.
    func messages(invite id: String, from side: InviteSide, after: Int64) async throws -> [StoredMessage]
    /// Erases an invite and its messages; false if there was none.
    func deleteInvite(id: String) async throws -> Bool
    /// Erases every invite expired at `now`; returns how many. Safe to run
    /// on several relays sharing one store at once.
    func sweep(now: Int64) async throws -> Int
    func liveInvites(now: Int64) async throws -> Int

    func putRecord(id: String, bytes: [UInt8], tokenHash: [UInt8], now: Int64) async throws -> PutRecordResult
    func record(id: String) async throws -> [UInt8]?
    func deleteRecord(id: String, tokenHash: [UInt8]) async throws -> DeleteRecordResult

    /// Throws if the store does not answer.
    func check() async throws

    /// Reports invites changed by another relay sharing this store (a post,
    /// an accept, an end), until the calling task is cancelled:
    /// `changed(id)` for one invite, `changed(nil)` when changes may have
    /// been missed (the feed was down), so that every held fetch reads
    /// again. A store only one relay uses returns at once.
    func watchInvites(_ changed: @escaping @Sendable (String?) -> Void) async
}

extension RelayStorage {
    public func watchInvites(_ changed: @escaping @Sendable (String?) -> Void) async {}
}

/// The store did not answer (a database server down or unreachable): the
/// request is refused with `503 unavailable` and the relay keeps serving;
/// the next request tries again. `reason` never carries a secret of the
/// connection string.
public struct StorageUnavailable: Error, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { "the database does not answer: \(reason)" }
}

/// The embedded backend: one SQLite file, in WAL mode, with `secure_delete`
/// on, so that erased rows are overwritten in the file. A deletion leaves
/// the erased bytes in the write-ahead log until a checkpoint copies the
/// log into the file and truncates it; one truncating checkpoint per
/// deletion would cost a sync of the file each time, so deletions mark the
/// log dirty and one checkpoint follows within `checkpointDelay` for all
/// of them (docs/PROTOCOL.md 15.2: gone within a second).
///
/// One connection, used only on a thread of its own (never on an event
/// loop: every call is a few small blocking statements).
public final class SQLiteRelayStorage: RelayStorage, @unchecked Sendable {
    private let db: Database
    /// Serialises the connection: calls arrive from the worker thread, and
    /// the batched checkpoint too.
    private let lock = NSLock()
    private let worker: NIOThreadPool
    /// Set by a deletion; cleared by the checkpoint that follows it. Under `lock`.
    private var checkpointScheduled = false
    static let checkpointDelay: Duration = .milliseconds(200)

    public init(path: String) throws {
        db = try Database(path: path)
        worker = NIOThreadPool(numberOfThreads: 1)
        if path != ":memory:" {
            _ = try db.query("PRAGMA journal_mode=WAL")
        }
        try db.execute("PRAGMA secure_delete=ON; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON")
        try db.migrate([
            .init(
                version: 1,
                sql: """
                    CREATE TABLE invites(
                        id TEXT PRIMARY KEY,
                        inviter_token BLOB NOT NULL,
                        invitee_token BLOB,
                        created INTEGER NOT NULL,
                        expires INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    CREATE INDEX invites_by_expiry ON invites(expires);
                    CREATE TABLE messages(
                        invite TEXT NOT NULL REFERENCES invites(id) ON DELETE CASCADE,
                        side INTEGER NOT NULL,
                        seq INTEGER NOT NULL,
                        body BLOB NOT NULL,
                        PRIMARY KEY(invite, side, seq)
                    ) WITHOUT ROWID;
                    CREATE TABLE records(
                        id TEXT PRIMARY KEY,
                        digest BLOB NOT NULL,
                        bytes BLOB NOT NULL,
                        delete_token BLOB NOT NULL,
                        created INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    """),
        ])
        // A relay stopped less than `checkpointDelay` after a deletion left
        // the erased bytes in the log: they go now.
        try checkpoint()
        worker.start()
    }

    deinit {
        worker.shutdownGracefully { _ in }
    }

    /// Runs `body` on the storage thread, alone on the connection.
    private func run<R: Sendable>(_ body: @escaping @Sendable (Database) throws -> R) async throws -> R {
        try await worker.runIfActive { [self] in
            lock.lock()
            defer { lock.unlock() }
            return try body(db)
        }
    }

    /// Pushes the log into the file and empties it.
    private func checkpoint() throws {
        if db.path != ":memory:" {
            _ = try db.query("PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }

    /// A deletion happened: one checkpoint within `checkpointDelay` takes it
    /// (and every other deletion until then) out of the log. Under `lock`.
    private func erased() {
        guard db.path != ":memory:", !checkpointScheduled else { return }
        checkpointScheduled = true
        Task { [self] in
            try? await Task.sleep(for: Self.checkpointDelay)
            do {
                try await run { _ in
                    self.checkpointScheduled = false
                    try self.checkpoint()
                }
            } catch {
                // Busy or failing: tried again after the next delay.
                lock.withLock { checkpointScheduled = false; erased() }
            }
        }
    }

    private func purgeExpired(_ id: String, now: Int64) throws {
        try db.run("DELETE FROM invites WHERE id = ? AND expires <= ?", [.text(id), .integer(now)])
        if db.changes > 0 { erased() }
    }

    public func createInvite(id: String, tokenHash: [UInt8], now: Int64, expires: Int64, maxInvites: Int) async throws
        -> CreateInviteResult
    {
        try await run { db in
            try self.purgeExpired(id, now: now)
            return try db.transaction {
                if try !db.query("SELECT 1 FROM invites WHERE id = ?", [.text(id)]).isEmpty { return .exists }
                let live = try db.query("SELECT count(*) FROM invites WHERE expires > ?", [.integer(now)])
                if case .integer(let n) = live.first?.first, n >= maxInvites { return .full }
                try db.run(
                    "INSERT INTO invites(id, inviter_token, created, expires) VALUES (?, ?, ?, ?)",
                    [.text(id), .blob(tokenHash), .integer(now), .integer(expires)])
                return .created
            }
        }
    }

    public func acceptInvite(id: String, tokenHash: [UInt8], now: Int64) async throws -> AcceptInviteResult {
        try await run { db in
            try db.transaction {
                let rows = try db.query(
                    "SELECT invitee_token IS NOT NULL, expires FROM invites WHERE id = ? AND expires > ?",
                    [.text(id), .integer(now)])
                guard let row = rows.first, case .integer(let bound) = row[0], case .integer(let expires) = row[1] else {
                    return .notFound
                }
                if bound != 0 { return .alreadyAccepted }
                try db.run("UPDATE invites SET invitee_token = ? WHERE id = ?", [.blob(tokenHash), .text(id)])
                return .accepted(expires: expires)
            }
        }
    }

    public func side(invite id: String, tokenHash: [UInt8], now: Int64) async throws -> (side: InviteSide, accepted: Bool)? {
        let found: SideFound? = try await run { db in
            let rows = try db.query(
                "SELECT inviter_token, invitee_token FROM invites WHERE id = ? AND expires > ?", [.text(id), .integer(now)])
            guard let row = rows.first, case .blob(let inviter) = row[0] else { return nil }
            var invitee: [UInt8]? = nil
            if case .blob(let b) = row[1] { invitee = b }
            return SideFound.match(tokenHash, inviter: inviter, invitee: invitee)
        }
        return found.map { ($0.side, $0.accepted) }
    }

    public func post(invite id: String, side: InviteSide, body: [UInt8], maxMessages: Int, now: Int64) async throws -> PostResult {
        try await run { db in
            try db.transaction {
                guard try !db.query("SELECT 1 FROM invites WHERE id = ? AND expires > ?", [.text(id), .integer(now)]).isEmpty
                else { return .notFound }
                let rows = try db.query(
                    "SELECT count(*) FROM messages WHERE invite = ? AND side = ?", [.text(id), .integer(side.rawValue)])
                guard case .integer(let count) = rows.first?.first else { return .notFound }
                if count >= maxMessages { return .limit }
                try db.run(
                    "INSERT INTO messages(invite, side, seq, body) VALUES (?, ?, ?, ?)",
                    [.text(id), .integer(side.rawValue), .integer(count + 1), .blob(body)])
                return .posted(seq: count + 1)
            }
        }
    }

    public func messages(invite id: String, from side: InviteSide, after: Int64) async throws -> [StoredMessage] {
        try await run { db in
            try db.query(
                "SELECT seq, body FROM messages WHERE invite = ? AND side = ? AND seq > ? ORDER BY seq",
                [.text(id), .integer(side.rawValue), .integer(after)]
            ).compactMap { row in
                guard case .integer(let seq) = row[0] else { return nil }
                if case .blob(let body) = row[1] { return StoredMessage(seq: seq, body: body) }
                return StoredMessage(seq: seq, body: [])
            }
        }
    }

    public func deleteInvite(id: String) async throws -> Bool {
        try await run { db in
            try db.run("DELETE FROM invites WHERE id = ?", [.text(id)])
            let deleted = db.changes > 0
            if deleted { self.erased() }
            return deleted
        }
    }

    public func sweep(now: Int64) async throws -> Int {
        try await run { db in
            try db.run("DELETE FROM invites WHERE expires <= ?", [.integer(now)])
            let n = db.changes
            if n > 0 { self.erased() }
            return n
        }
    }

    public func liveInvites(now: Int64) async throws -> Int {
        try await run { db in
            let rows = try db.query("SELECT count(*) FROM invites WHERE expires > ?", [.integer(now)])
            if case .integer(let n) = rows.first?.first { return Int(n) }
            return 0
        }
    }

    public func putRecord(id: String, bytes: [UInt8], tokenHash: [UInt8], now: Int64) async throws -> PutRecordResult {
        let digest = SHA256.hash(bytes)
        return try await run { db in
            try db.transaction {
                let rows = try db.query("SELECT digest FROM records WHERE id = ?", [.text(id)])
                if let row = rows.first, case .blob(let stored) = row[0] {
                    return stored == digest ? .same : .conflict
                }
                try db.run(
                    "INSERT INTO records(id, digest, bytes, delete_token, created) VALUES (?, ?, ?, ?, ?)",
                    [.text(id), .blob(digest), .blob(bytes), .blob(tokenHash), .integer(now)])
                return .created
            }
        }
    }

    public func record(id: String) async throws -> [UInt8]? {
        try await run { db in
            let rows = try db.query("SELECT bytes FROM records WHERE id = ?", [.text(id)])
            guard let row = rows.first, case .blob(let bytes) = row[0] else { return nil }
            return bytes
        }
    }

    public func deleteRecord(id: String, tokenHash: [UInt8]) async throws -> DeleteRecordResult {
        try await run { db in
            let rows = try db.query("SELECT delete_token FROM records WHERE id = ?", [.text(id)])
            guard let row = rows.first, case .blob(let stored) = row[0] else { return .notFound }
            guard Token.equal(stored, tokenHash) else { return .forbidden }
            try db.run("DELETE FROM records WHERE id = ?", [.text(id)])
            self.erased()
            return .deleted
        }
    }

    public func check() async throws {
        try await run { db in _ = try db.query("SELECT 1") }
    }
}

/// Which side a presented token holds, given the stored token hashes of an
/// invite; shared by the backends so that both compare the same way.
public struct SideFound: Sendable {
    public let side: InviteSide
    public let accepted: Bool

    /// Both hashes compared, in constant time, whichever matches.
    public static func match(_ presented: [UInt8], inviter: [UInt8], invitee: [UInt8]?) -> SideFound? {
        let isInviter = Token.equal(inviter, presented)
        let isInvitee = invitee.map { Token.equal($0, presented) } ?? false
        if isInviter { return SideFound(side: .inviter, accepted: invitee != nil) }
        if isInvitee { return SideFound(side: .invitee, accepted: true) }
        return nil
    }
}

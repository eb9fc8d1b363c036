import Foundation
import ItsMeCore

/// The two sides of an invite.
public enum InviteSide: Int64, Sendable {
    case inviter = 0
    case invitee = 1

    var other: InviteSide { self == .inviter ? .invitee : .inviter }
}

public struct StoredMessage: Sendable, Equatable {
    public let seq: Int64
    public let body: [UInt8]
}

public enum CreateInviteResult: Sendable, Equatable { case created, exists, full }
public enum AcceptInviteResult: Sendable, Equatable { case accepted(expires: Int64), alreadyAccepted, notFound }
public enum PostResult: Sendable, Equatable { case posted(seq: Int64), limit, notFound }
public enum PutRecordResult: Sendable, Equatable { case created, same, conflict }
public enum DeleteRecordResult: Sendable, Equatable { case deleted, forbidden, notFound }

/// What the relay keeps. One small interface so that a second backend
/// (several relays sharing PostgreSQL) can be added beside SQLite. Every
/// method is one atomic step; an expired invite is treated as absent.
public protocol RelayStorage: Sendable {
    func createInvite(id: String, tokenHash: [UInt8], now: Int64, expires: Int64, maxInvites: Int) throws -> CreateInviteResult
    func acceptInvite(id: String, tokenHash: [UInt8], now: Int64) throws -> AcceptInviteResult
    /// The side a token holds in a live invite, and whether an invitee is bound.
    func side(invite id: String, tokenHash: [UInt8], now: Int64) throws -> (side: InviteSide, accepted: Bool)?
    func post(invite id: String, side: InviteSide, body: [UInt8], maxMessages: Int, now: Int64) throws -> PostResult
    /// The messages `side` posted with a sequence number above `after`.
    func messages(invite id: String, from side: InviteSide, after: Int64) throws -> [StoredMessage]
    /// Erases an invite and its messages; false if there was none.
    func deleteInvite(id: String) throws -> Bool
    /// Erases every invite expired at `now`; returns how many.
    func sweep(now: Int64) throws -> Int
    func liveInvites(now: Int64) throws -> Int

    func putRecord(id: String, bytes: [UInt8], tokenHash: [UInt8], now: Int64) throws -> PutRecordResult
    func record(id: String) throws -> [UInt8]?
    func deleteRecord(id: String, tokenHash: [UInt8]) throws -> DeleteRecordResult

    /// Throws if the store does not answer.
    func check() throws
}

/// The embedded backend: one SQLite file, in WAL mode, with
/// `secure_delete` on and a truncating checkpoint after every deletion, so
/// erased bytes leave both the file and its log (docs/PROTOCOL.md 15.2).
/// One connection behind a lock: each call is a few small statements.
public final class SQLiteRelayStorage: RelayStorage, @unchecked Sendable {
    private let db: Database
    private let lock = NSLock()

    public init(path: String) throws {
        db = try Database(path: path)
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
    }

    private func locked<R>(_ body: () throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// Pushes the log into the file and empties it, after a deletion.
    private func checkpoint() throws {
        if db.path != ":memory:" {
            _ = try db.query("PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }

    private func purgeExpired(_ id: String, now: Int64) throws {
        try db.run("DELETE FROM invites WHERE id = ? AND expires <= ?", [.text(id), .integer(now)])
        if db.changes > 0 { try checkpoint() }
    }

    public func createInvite(id: String, tokenHash: [UInt8], now: Int64, expires: Int64, maxInvites: Int) throws
        -> CreateInviteResult
    {
        try locked {
            try purgeExpired(id, now: now)
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

    public func acceptInvite(id: String, tokenHash: [UInt8], now: Int64) throws -> AcceptInviteResult {
        try locked {
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

    public func side(invite id: String, tokenHash: [UInt8], now: Int64) throws -> (side: InviteSide, accepted: Bool)? {
        try locked {
            let rows = try db.query(
                "SELECT inviter_token, invitee_token FROM invites WHERE id = ? AND expires > ?", [.text(id), .integer(now)])
            guard let row = rows.first, case .blob(let inviter) = row[0] else { return nil }
            var invitee: [UInt8]? = nil
            if case .blob(let b) = row[1] { invitee = b }
            // Both compared, in constant time, whichever matches.
            let isInviter = Token.equal(inviter, tokenHash)
            let isInvitee = invitee.map { Token.equal($0, tokenHash) } ?? false
            if isInviter { return (.inviter, invitee != nil) }
            if isInvitee { return (.invitee, true) }
            return nil
        }
    }

    public func post(invite id: String, side: InviteSide, body: [UInt8], maxMessages: Int, now: Int64) throws -> PostResult {
        try locked {
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

    public func messages(invite id: String, from side: InviteSide, after: Int64) throws -> [StoredMessage] {
        try locked {
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

    public func deleteInvite(id: String) throws -> Bool {
        try locked {
            try db.run("DELETE FROM invites WHERE id = ?", [.text(id)])
            let deleted = db.changes > 0
            if deleted { try checkpoint() }
            return deleted
        }
    }

    public func sweep(now: Int64) throws -> Int {
        try locked {
            try db.run("DELETE FROM invites WHERE expires <= ?", [.integer(now)])
            let n = db.changes
            if n > 0 { try checkpoint() }
            return n
        }
    }

    public func liveInvites(now: Int64) throws -> Int {
        try locked {
            let rows = try db.query("SELECT count(*) FROM invites WHERE expires > ?", [.integer(now)])
            if case .integer(let n) = rows.first?.first { return Int(n) }
            return 0
        }
    }

    public func putRecord(id: String, bytes: [UInt8], tokenHash: [UInt8], now: Int64) throws -> PutRecordResult {
        let digest = SHA256.hash(bytes)
        return try locked {
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

    public func record(id: String) throws -> [UInt8]? {
        try locked {
            let rows = try db.query("SELECT bytes FROM records WHERE id = ?", [.text(id)])
            guard let row = rows.first, case .blob(let bytes) = row[0] else { return nil }
            return bytes
        }
    }

    public func deleteRecord(id: String, tokenHash: [UInt8]) throws -> DeleteRecordResult {
        try locked {
            let rows = try db.query("SELECT delete_token FROM records WHERE id = ?", [.text(id)])
            guard let row = rows.first, case .blob(let stored) = row[0] else { return .notFound }
            guard Token.equal(stored, tokenHash) else { return .forbidden }
            try db.run("DELETE FROM records WHERE id = ?", [.text(id)])
            try checkpoint()
            return .deleted
        }
    }

    public func check() throws {
        try locked { _ = try db.query("SELECT 1") }
    }
}

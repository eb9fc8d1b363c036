import Foundation
import ItsMePrimitives
import RelayServer
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// The backend for several relays sharing one PostgreSQL database
/// (docs/PROTOCOL.md 15.8). The same semantics as SQLite: each call is one
/// atomic step, mostly one statement, so that two relays acting on one
/// invite at once cannot both win (two accepts, two posts with one
/// sequence number). A post, an accept or an end sends `NOTIFY` on
/// `itsme_relay_invites` with the invite's ID in the same statement, and
/// every relay LISTENs there to wake the fetches it holds.
///
/// When the database does not answer within `answerTimeout` (down,
/// restarting, unreachable), a call throws `StorageUnavailable`: the
/// request gets 503 and the relay keeps running; the connection pool
/// reconnects by itself and the listener reconnects every second.
public final class PostgresRelayStorage: RelayStorage, Sendable {
    static let channel = "itsme_relay_invites"
    static let answerTimeout: Duration = .seconds(5)
    static let answerTimeoutNIO: TimeAmount = .seconds(5)

    let url: DatabaseURL
    private let client: PostgresClient
    private let runner: Task<Void, Never>
    private let logger: Logger
    /// The event loops whose timers bound each call (`answer`).
    private let deadlines: any EventLoopGroup = PostgresClient.defaultEventLoopGroup
    /// PostgresNIO's own logs stay off: its debug output carries queries
    /// and binds, never wanted in the relay's logs.
    private static let quiet = Logger(label: "itsme-relay.postgres", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Connects, brings the schema up to date (once, under an advisory lock,
    /// whatever the number of relays starting together) and checks that the
    /// database answers. Throws with the URL's redacted form on failure.
    public static func open(_ text: String, logger: Logger) async throws -> PostgresRelayStorage {
        let url = try DatabaseURL(text)
        // A connection of its own first: the pool retries a refused
        // connection or a wrong password in silence, this one says why.
        do {
            let configuration = try url.connectionConfiguration()
            let connection = try await withDeadline(.seconds(10)) {
                try await PostgresConnection.connect(configuration: configuration, id: 0, logger: quiet)
            }
            do {
                try await withDeadline(.seconds(60)) {
                    try await Schema.migrate(connection, logger: logger, redacted: url.redacted)
                }
            } catch {
                try? await connection.close()
                throw error
            }
            try? await connection.close()
        } catch {
            throw OpenFailed(description: "cannot open the database \(url.redacted): \(PostgresRelayStorage.reason(error))")
        }
        let storage = try PostgresRelayStorage(url: url, logger: logger)
        logger.info("database ready", metadata: ["database": "\(url.redacted)", "schema": "\(Schema.migrations.count)"])
        return storage
    }

    public struct OpenFailed: Error, CustomStringConvertible {
        public let description: String
    }

    private init(url: DatabaseURL, logger: Logger) throws {
        self.url = url
        self.logger = logger
        var configuration = try url.clientConfiguration()
        configuration.options.maximumConnections = 16
        let client = PostgresClient(configuration: configuration, backgroundLogger: Self.quiet)
        self.client = client
        // Detached: the pool lives as long as the relay, and finishes the
        // requests of a graceful shutdown before the process exits.
        runner = Task.detached { await client.run() }
    }

    deinit { runner.cancel() }

    // MARK: Errors and deadlines

    static func withDeadline<R: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> R) async throws -> R {
        try await withThrowingTaskGroup(of: R?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else {
                throw StorageUnavailable("no answer within \(limit)")
            }
            return value
        }
    }

    /// Runs `body` with a deadline; a database that does not answer, or
    /// answers that it cannot serve, becomes `StorageUnavailable`.
    ///
    /// Every request makes a call or two, so the deadline must be cheap:
    /// one task for the body and a timer on an event loop that cancels it.
    /// `withDeadline` (a task group, a second task and a sleep on the
    /// concurrency runtime's timers) cost the relay about a third of its
    /// invite throughput on PostgreSQL. As with the group, the caller waits
    /// for the cancelled body: PostgresNIO ends a waiting lease at once.
    func answer<R: Sendable>(_ body: @escaping @Sendable () async throws -> R) async throws -> R {
        let work = Task { try await body() }
        let late = Flag()
        let timer = deadlines.next().scheduleTask(in: Self.answerTimeoutNIO) {
            late.set()
            work.cancel()
        }
        do {
            let value = try await withTaskCancellationHandler {
                try await work.value
            } onCancel: {
                work.cancel()
            }
            timer.cancel()
            if late.isSet { throw StorageUnavailable("no answer within \(Self.answerTimeout)") }
            return value
        } catch let error as StorageUnavailable {
            timer.cancel()
            throw error
        } catch let error as PSQLError where error.code == .server && !Self.isOutage(error) && !late.isSet {
            timer.cancel()
            // A statement the database refused: a fault of the relay's, 500.
            throw error
        } catch {
            timer.cancel()
            if late.isSet { throw StorageUnavailable("no answer within \(Self.answerTimeout)") }
            throw StorageUnavailable(Self.reason(error))
        }
    }

    /// SQLSTATE classes of a database that cannot serve now: 08 connection
    /// exception, 53 insufficient resources, 57 operator intervention (a
    /// shutdown, a restart, "the database system is starting up").
    static func isOutage(_ error: PSQLError) -> Bool {
        guard let state = error.serverInfo?[.sqlState] else { return true }
        return state.hasPrefix("08") || state.hasPrefix("53") || state.hasPrefix("57")
    }

    /// One line on why, without the query, its binds or the password.
    static func reason(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if error.code == .server, let info = error.serverInfo {
                return "\(info[.message] ?? "refused") (SQLSTATE \(info[.sqlState] ?? "?"))"
            }
            if let underlying = error.underlying { return "\(error.code): \(underlying)" }
            return "\(error.code)"
        }
        if let error = error as? DatabaseURL.Invalid { return error.description }
        if let error = error as? StorageUnavailable { return error.reason }
        if error is CancellationError { return "cancelled" }
        return "\(error)"
    }

    // MARK: Invites

    public func createInvite(id: String, tokenHash: [UInt8], now: Int64, expires: Int64, maxInvites: Int) async throws
        -> CreateInviteResult
    {
        let create = Statements.CreateInvite(
            id: id, token: ByteBuffer(bytes: tokenHash), now: now, expires: expires, maxInvites: Int64(maxInvites))
        return try await answer { [client] in
            // A new ID, the usual case, takes one statement. An expired
            // invite under this ID goes first, with its messages: only when
            // the insertion found the ID taken or the relay full.
            if try await client.execute(create).hasRow() { return .created }
            if try await client.execute(Statements.PurgeExpired(id: id, now: now)).hasRow(),
                try await client.execute(create).hasRow()
            {
                return .created
            }
            return try await client.execute(Statements.InviteExists(id: id)).hasRow() ? .exists : .full
        }
    }

    public func acceptInvite(id: String, tokenHash: [UInt8], now: Int64) async throws -> AcceptInviteResult {
        let accept = Statements.AcceptInvite(id: id, token: ByteBuffer(bytes: tokenHash), now: now)
        return try await answer { [client] in
            for try await expires in try await client.execute(accept) { return .accepted(expires: expires) }
            return try await client.execute(Statements.InviteLive(id: id, now: now)).hasRow() ? .alreadyAccepted : .notFound
        }
    }

    public func side(invite id: String, tokenHash: [UInt8], now: Int64) async throws -> (side: InviteSide, accepted: Bool)? {
        let found: SideFound? = try await answer { [client] in
            for try await (inviter, invitee) in try await client.execute(Statements.Tokens(id: id, now: now)) {
                return SideFound.match(tokenHash, inviter: inviter.bytes, invitee: invitee?.bytes)
            }
            return nil
        }
        return found.map { ($0.side, $0.accepted) }
    }

    public func post(invite id: String, side: InviteSide, body: [UInt8], maxMessages: Int, now: Int64) async throws -> PostResult {
        // The side's counter is raised under the invite's row lock, so
        // concurrent posts on two relays get distinct numbers in order.
        let post = Statements.Post(
            id: id, side: Int16(side.rawValue), body: ByteBuffer(bytes: body), maxMessages: Int64(maxMessages), now: now)
        return try await answer { [client] in
            if side == .inviter {
                for try await seq in try await client.execute(Statements.PostInviter(post: post)) { return .posted(seq: seq) }
            } else {
                for try await seq in try await client.execute(Statements.PostInvitee(post: post)) { return .posted(seq: seq) }
            }
            return try await client.execute(Statements.InviteLive(id: id, now: now)).hasRow() ? .limit : .notFound
        }
    }

    public func messages(invite id: String, from side: InviteSide, after: Int64) async throws -> [StoredMessage] {
        let query = Statements.Messages(id: id, side: Int16(side.rawValue), after: after)
        return try await answer { [client] in
            var found: [StoredMessage] = []
            for try await (seq, body) in try await client.execute(query) {
                found.append(StoredMessage(seq: seq, body: body.bytes))
            }
            return found
        }
    }

    public func deleteInvite(id: String) async throws -> Bool {
        try await answer { [client] in
            try await client.execute(Statements.DeleteInvite(id: id)).hasRow()
        }
    }

    /// Row locks make concurrent sweeps on several relays safe: each
    /// expired row is deleted by one of them, the others skip it.
    public func sweep(now: Int64) async throws -> Int {
        try await answer { [client] in
            let rows = try await client.query(
                "WITH swept AS (DELETE FROM invites WHERE expires <= \(now) RETURNING 1) SELECT count(*) FROM swept")
            for try await count in rows.decode(Int64.self) { return Int(count) }
            return 0
        }
    }

    public func liveInvites(now: Int64) async throws -> Int {
        try await answer { [client] in
            let rows = try await client.query("SELECT count(*) FROM invites WHERE expires > \(now)")
            for try await count in rows.decode(Int64.self) { return Int(count) }
            return 0
        }
    }

    // MARK: Records

    public func putRecord(id: String, bytes: [UInt8], tokenHash: [UInt8], now: Int64) async throws -> PutRecordResult {
        let digest = SHA256.hash(bytes)
        return try await answer { [client] in
            let inserted = try await client.query(
                """
                INSERT INTO records(id, digest, bytes, delete_token, created)
                VALUES (\(id), \(ByteBuffer(bytes: digest)), \(ByteBuffer(bytes: bytes)), \(ByteBuffer(bytes: tokenHash)), \(now))
                ON CONFLICT (id) DO NOTHING RETURNING 1
                """)
            if try await inserted.hasRow() { return .created }
            let rows = try await client.query("SELECT digest FROM records WHERE id = \(id)")
            for try await stored in rows.decode(ByteBuffer.self) { return stored.bytes == digest ? .same : .conflict }
            // Deleted between the two statements: the ID is free again, but
            // this PUT lost the race; the client's retry creates it.
            return .conflict
        }
    }

    public func record(id: String) async throws -> [UInt8]? {
        try await answer { [client] in
            let rows = try await client.query("SELECT bytes FROM records WHERE id = \(id)")
            for try await bytes in rows.decode(ByteBuffer.self) { return bytes.bytes }
            return nil
        }
    }

    public func deleteRecord(id: String, tokenHash: [UInt8]) async throws -> DeleteRecordResult {
        try await answer { [client] in
            let rows = try await client.query("SELECT delete_token FROM records WHERE id = \(id)")
            var stored: [UInt8]?
            for try await token in rows.decode(ByteBuffer.self) { stored = token.bytes }
            guard let stored else { return .notFound }
            guard Self.constantTimeEqual(stored, tokenHash) else { return .forbidden }
            let deleted = try await client.query(
                "DELETE FROM records WHERE id = \(id) AND delete_token = \(ByteBuffer(bytes: stored)) RETURNING 1")
            return try await deleted.hasRow() ? .deleted : .notFound
        }
    }

    public func check() async throws {
        try await answer { [client] in
            try await client.query("SELECT 1").drain()
        }
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }

    // MARK: Notifications

    /// LISTENs on a connection of its own (a pooled one would be handed to
    /// queries), reconnecting every second while the database is away.
    /// After each (re)connection every held fetch reads again: posts made
    /// while the feed was down were not heard.
    public func watchInvites(_ changed: @escaping @Sendable (String?) -> Void) async {
        let configuration: PostgresConnection.Configuration
        do {
            configuration = try url.connectionConfiguration()
        } catch {
            logger.error("invite notifications unavailable", metadata: ["error": "\(Self.reason(error))"])
            return
        }
        var down = false
        while !Task.isCancelled {
            do {
                let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: Self.quiet)
                do {
                    try await connection.listen(on: Self.channel) { notifications in
                        if down { logger.notice("invite notifications resumed") }
                        down = false
                        changed(nil)
                        for try await notification in notifications { changed(notification.payload) }
                    }
                } catch {
                    try? await connection.close()
                    throw error
                }
                try? await connection.close()
            } catch {
                if Task.isCancelled { break }
                if !down {
                    logger.warning(
                        "invite notifications interrupted; retrying every second", metadata: ["error": "\(Self.reason(error))"])
                }
                down = true
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }
}

/// Set once, read from any thread: whether a call's deadline passed.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}

extension AsyncSequence {
    /// True when the result has a row; the rest is read and dropped.
    func hasRow() async throws -> Bool {
        var found = false
        for try await _ in self { found = true }
        return found
    }
}

extension PostgresRowSequence {
    /// Reads and drops every row.
    func drain() async throws {
        for try await _ in self {}
    }

}

extension ByteBuffer {
    var bytes: [UInt8] { Array(readableBytesView) }
}

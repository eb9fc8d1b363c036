import Logging
import PostgresNIO

/// The relay's tables in PostgreSQL, as numbered migrations. Every relay
/// runs `migrate` as it starts; an advisory lock makes the ones starting
/// together wait for the first, so each migration runs once, in its own
/// transaction, and `relay_schema` records it. A database whose schema is
/// newer than this relay knows is refused: an older relay must not write
/// into tables it does not understand (docs/OPERATIONS.md, upgrades).
enum Schema {
    /// Any 64-bit number unlikely to be used by another program on the same
    /// database: "itsmerel" in ASCII.
    static let lockKey: Int64 = 0x6974_736D_6572_656C

    /// Statements of each version, in order; never edit a published one,
    /// add the next.
    static let migrations: [[String]] = [
        [
            """
            CREATE TABLE invites(
                id text PRIMARY KEY,
                inviter_token bytea NOT NULL,
                invitee_token bytea,
                created bigint NOT NULL,
                expires bigint NOT NULL,
                inviter_posts integer NOT NULL DEFAULT 0,
                invitee_posts integer NOT NULL DEFAULT 0)
            """,
            "CREATE INDEX invites_by_expiry ON invites(expires)",
            """
            CREATE TABLE messages(
                invite text NOT NULL REFERENCES invites(id) ON DELETE CASCADE,
                side smallint NOT NULL,
                seq integer NOT NULL,
                body bytea NOT NULL,
                PRIMARY KEY(invite, side, seq))
            """,
            """
            CREATE TABLE records(
                id text PRIMARY KEY,
                digest bytea NOT NULL,
                bytes bytea NOT NULL,
                delete_token bytea NOT NULL,
                created bigint NOT NULL)
            """,
        ]
    ]

    struct TooNew: Error, CustomStringConvertible {
        let found: Int
        var description: String {
            "the database's schema is version \(found), newer than this relay knows (\(Schema.migrations.count)): run a newer itsme-relay"
        }
    }

    static func migrate(_ connection: PostgresConnection, logger: Logger, redacted: String) async throws {
        try await connection.query("SELECT pg_advisory_lock(\(lockKey))", logger: logger).drain()
        do {
            try await apply(connection, logger: logger, redacted: redacted)
        } catch {
            _ = try? await connection.query("SELECT pg_advisory_unlock(\(lockKey))", logger: logger).drain()
            throw error
        }
        try await connection.query("SELECT pg_advisory_unlock(\(lockKey))", logger: logger).drain()
    }

    private static func apply(_ connection: PostgresConnection, logger: Logger, redacted: String) async throws {
        try await connection.query(
            "CREATE TABLE IF NOT EXISTS relay_schema(version integer PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())",
            logger: logger
        ).drain()
        var current = 0
        for try await version in try await connection.query("SELECT coalesce(max(version), 0) FROM relay_schema", logger: logger)
            .decode(Int32.self)
        {
            current = Int(version)
        }
        guard current <= migrations.count else { throw TooNew(found: current) }
        for (index, statements) in migrations.enumerated() where index + 1 > current {
            let version = Int32(index + 1)
            try await connection.withTransaction(logger: logger) { connection in
                for statement in statements {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger).drain()
                }
                try await connection.query("INSERT INTO relay_schema(version) VALUES (\(version))", logger: logger).drain()
            }
            logger.notice("database schema migrated", metadata: ["database": "\(redacted)", "version": "\(version)"])
        }
    }
}

import NIOCore
import PostgresNIO

/// The statements of the invite calls, prepared: PostgresNIO prepares each
/// once per connection, by name, and then only binds and executes it, so
/// PostgreSQL parses and plans an invite's statements once per connection
/// rather than on every call (and it shares the relay's cores). Every
/// parameter has an explicit type: a prepared statement's types are fixed
/// when it is parsed, and a bigint bound where PostgreSQL inferred an
/// integer would be refused.
enum Statements {
    static let notify = "pg_notify('\(PostgresRelayStorage.channel)', $1::text)"

    /// A new invite, when the ID is free and the relay holds fewer than
    /// `maxInvites` live ones; a row when it was created.
    struct CreateInvite: RowlessStatement {
        static let sql = """
            INSERT INTO invites(id, inviter_token, created, expires)
            SELECT $1::text, $2::bytea, $3::bigint, $4::bigint
            WHERE (SELECT count(*) FROM invites WHERE expires > $3::bigint) < $5::bigint
            ON CONFLICT (id) DO NOTHING RETURNING 1
            """
        let id: String
        let token: ByteBuffer
        let now: Int64
        let expires: Int64
        let maxInvites: Int64

        func makeBindings() throws -> PostgresBindings { try .of(id, token, now, expires, maxInvites) }
    }

    /// Erases an expired invite under this ID, with its messages; a row when
    /// there was one.
    struct PurgeExpired: RowlessStatement {
        static let sql = "DELETE FROM invites WHERE id = $1::text AND expires <= $2::bigint RETURNING 1"
        let id: String
        let now: Int64

        func makeBindings() throws -> PostgresBindings { try .of(id, now) }
    }

    /// A row when an invite, expired or not, has this ID.
    struct InviteExists: RowlessStatement {
        static let sql = "SELECT 1 FROM invites WHERE id = $1::text"
        let id: String

        func makeBindings() throws -> PostgresBindings { try .of(id) }
    }

    /// A row when a live invite has this ID.
    struct InviteLive: RowlessStatement {
        static let sql = "SELECT 1 FROM invites WHERE id = $1::text AND expires > $2::bigint"
        let id: String
        let now: Int64

        func makeBindings() throws -> PostgresBindings { try .of(id, now) }
    }

    /// Binds the invitee's token to a live, unaccepted invite and notifies;
    /// its expiry when it did.
    struct AcceptInvite: PostgresPreparedStatement {
        static let sql = """
            WITH bound AS (
                UPDATE invites SET invitee_token = $2::bytea
                WHERE id = $1::text AND expires > $3::bigint AND invitee_token IS NULL RETURNING expires)
            SELECT expires, \(notify) IS NULL FROM bound
            """
        let id: String
        let token: ByteBuffer
        let now: Int64

        func makeBindings() throws -> PostgresBindings { try .of(id, token, now) }
        func decodeRow(_ row: PostgresRow) throws -> Int64 { try row.decode((Int64, Bool).self).0 }
    }

    /// The token hashes of a live invite.
    struct Tokens: PostgresPreparedStatement {
        static let sql = "SELECT inviter_token, invitee_token FROM invites WHERE id = $1::text AND expires > $2::bigint"
        let id: String
        let now: Int64

        func makeBindings() throws -> PostgresBindings { try .of(id, now) }
        func decodeRow(_ row: PostgresRow) throws -> (ByteBuffer, ByteBuffer?) {
            try row.decode((ByteBuffer, ByteBuffer?).self)
        }
    }

    /// A side's next message, numbered under the invite's row lock, and
    /// its notification; the sequence number when it was stored. One
    /// statement per side: a prepared statement cannot name its column.
    struct PostInviter: PostgresPreparedStatement {
        static let sql = Statements.post(counter: "inviter_posts")
        let post: Post
        func makeBindings() throws -> PostgresBindings { try post.bindings() }
        func decodeRow(_ row: PostgresRow) throws -> Int64 { try row.decode((Int64, Bool).self).0 }
    }

    struct PostInvitee: PostgresPreparedStatement {
        static let sql = Statements.post(counter: "invitee_posts")
        let post: Post
        func makeBindings() throws -> PostgresBindings { try post.bindings() }
        func decodeRow(_ row: PostgresRow) throws -> Int64 { try row.decode((Int64, Bool).self).0 }
    }

    struct Post: Sendable {
        let id: String
        let side: Int16
        let body: ByteBuffer
        let maxMessages: Int64
        let now: Int64

        func bindings() throws -> PostgresBindings { try .of(id, side, body, maxMessages, now) }
    }

    static func post(counter: String) -> String {
        """
        WITH counted AS (
            UPDATE invites SET \(counter) = \(counter) + 1
            WHERE id = $1::text AND expires > $5::bigint AND \(counter) < $4::bigint
            RETURNING \(counter) AS seq),
        stored AS (
            INSERT INTO messages(invite, side, seq, body)
            SELECT $1::text, $2::smallint, seq, $3::bytea FROM counted RETURNING seq)
        SELECT seq::bigint, \(notify) IS NULL FROM stored
        """
    }

    /// The messages a side posted after a sequence number, in order.
    struct Messages: PostgresPreparedStatement {
        static let sql = """
            SELECT seq::bigint, body FROM messages
            WHERE invite = $1::text AND side = $2::smallint AND seq > $3::bigint ORDER BY seq
            """
        let id: String
        let side: Int16
        let after: Int64

        func makeBindings() throws -> PostgresBindings { try .of(id, side, after) }
        func decodeRow(_ row: PostgresRow) throws -> (Int64, ByteBuffer) { try row.decode((Int64, ByteBuffer).self) }
    }

    /// Erases an invite and its messages, and notifies; a row when there was one.
    struct DeleteInvite: RowlessStatement {
        static let sql = """
            WITH ended AS (DELETE FROM invites WHERE id = $1::text RETURNING id)
            SELECT \(notify.replacingOccurrences(of: "$1::text", with: "id")) IS NULL FROM ended
            """
        let id: String

        func makeBindings() throws -> PostgresBindings { try .of(id) }
    }
}

/// A statement whose rows say only that there were some (`hasRow`).
protocol RowlessStatement: PostgresPreparedStatement where Row == Void {}

extension RowlessStatement {
    func decodeRow(_ row: PostgresRow) throws {}
}

extension PostgresBindings {
    /// `values` bound in order, as $1, $2, ...
    static func of(_ values: any PostgresThrowingDynamicTypeEncodable...) throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values { try bindings.append(value) }
        return bindings
    }
}

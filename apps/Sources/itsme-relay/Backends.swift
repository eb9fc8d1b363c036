import RelayServer
import RelayServerPostgres
import Logging

/// The store `--database` names: a `postgres://` or `postgresql://` URL
/// opens PostgreSQL (several relays sharing one database), anything else is
/// the SQLite file of one relay (or `:memory:`). Here rather than in
/// RelayServer so that only this executable links PostgresNIO.
func openStorage(_ configuration: RelayConfiguration) async throws -> any RelayStorage {
    let database = configuration.databasePath
    if DatabaseURL.isPostgres(database) {
        return try await PostgresRelayStorage.open(database, logger: Logger(label: "itsme-relay"))
    }
    return try SQLiteRelayStorage(path: database)
}

import Foundation

/// Where the relay keeps its database when `--database` says nowhere: the
/// service's state directory, never the directory it happens to be started
/// in. A `postgres://` URL and `:memory:` are taken as they are.
enum DatabaseLocation {
    static let fileName = "itsme-relay.db"
    static let fallbackDirectory = "/var/lib/itsme-relay"

    /// The database to open: `given` (the flag or ITSME_RELAY_DATABASE), else
    /// `itsme-relay.db` in $STATE_DIRECTORY (its first entry: systemd joins
    /// several with colons), else in /var/lib/itsme-relay when that can be
    /// written. The chosen directory is created if missing and made 0700.
    static func resolve(_ given: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String {
        if let given, !given.isEmpty { return given }
        if let state = environment["STATE_DIRECTORY"]?.split(separator: ":").first.map(String.init), !state.isEmpty {
            try prepare(state, why: "$STATE_DIRECTORY")
            return state + "/" + fileName
        }
        do {
            try prepare(fallbackDirectory, why: "the default directory")
        } catch let error as DatabaseLocationError {
            throw DatabaseLocationError(
                "no database given, $STATE_DIRECTORY is not set, and \(error.message); "
                    + "pass --database PATH (or set ITSME_RELAY_DATABASE)")
        }
        return fallbackDirectory + "/" + fileName
    }

    /// Creates `directory` if missing (its parent must exist), checks it can
    /// be written, and narrows it to 0700 whatever the umask.
    private static func prepare(_ directory: String, why: String) throws {
        var status = stat()
        if stat(directory, &status) != 0 {
            guard errno == ENOENT else { throw failure(directory, why, errno) }
            guard mkdir(directory, 0o700) == 0 else { throw failure(directory, why, errno) }
            guard stat(directory, &status) == 0 else { throw failure(directory, why, errno) }
        }
        guard status.st_mode & S_IFMT == S_IFDIR else {
            throw DatabaseLocationError("\(why) \(directory) is not a directory")
        }
        guard access(directory, W_OK | X_OK) == 0 else { throw failure(directory, why, errno) }
        if status.st_mode & 0o777 != 0o700, status.st_uid == geteuid() {
            guard chmod(directory, 0o700) == 0 else { throw failure(directory, why, errno) }
        }
    }

    private static func failure(_ directory: String, _ why: String, _ code: Int32) -> DatabaseLocationError {
        DatabaseLocationError("\(why) \(directory) cannot be written (\(String(cString: strerror(code))))")
    }

    static func isURL(_ database: String) -> Bool {
        let lower = database.lowercased()
        return lower.hasPrefix("postgres://") || lower.hasPrefix("postgresql://")
    }

    /// The database as logs may show it: a URL's password (in the user
    /// part or a `password` parameter) replaced by `***`.
    static func shown(_ database: String) -> String {
        guard isURL(database), let password = password(in: database) else { return database }
        return database.replacingOccurrences(of: ":\(password)@", with: ":***@")
            .replacingOccurrences(of: "=\(password)", with: "=***")
    }

    /// `text` with the database URL's password, if any, replaced by `***`.
    static func scrubbed(_ text: String, _ database: String) -> String {
        guard isURL(database), let password = password(in: database) else { return text }
        return text.replacingOccurrences(of: password, with: "***")
    }

    /// The password a PostgreSQL URL carries, as written (percent-encoded
    /// or not), or nil.
    static func password(in url: String) -> String? {
        guard let scheme = url.range(of: "://") else { return nil }
        let rest = url[scheme.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" }
        if let at = authority.lastIndex(of: "@") {
            let user = authority[..<at]
            if let colon = user.firstIndex(of: ":") {
                let password = user[user.index(after: colon)...]
                if !password.isEmpty { return String(password) }
            }
        }
        if let query = rest.firstIndex(of: "?") {
            for pair in rest[rest.index(after: query)...].split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0].lowercased().contains("password"), !parts[1].isEmpty { return String(parts[1]) }
            }
        }
        return nil
    }
}

struct DatabaseLocationError: Error, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

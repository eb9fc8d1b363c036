import CSQLite
import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

final class SQLiteTests: XCTestCase {
    private var directory: String!

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "itsme-sqlite-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func testBindsAndReadsEveryType() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t (i INTEGER, r REAL, s TEXT, b BLOB, n)")
        let values: [SQLValue] = [.integer(-42), .real(1.5), .text("Zoë 🌍"), .blob([0, 1, 255]), .null]
        try db.run("INSERT INTO t VALUES (?, ?, ?, ?, ?)", values)
        XCTAssertEqual(db.changes, 1)
        XCTAssertEqual(try db.query("SELECT * FROM t"), [values])
        // An empty blob stays a blob, not NULL.
        try db.run("INSERT INTO t (b) VALUES (?)", [.blob([])])
        XCTAssertEqual(try db.query("SELECT typeof(b) FROM t WHERE i IS NULL"), [[.text("blob")]])
        XCTAssertEqual(try db.query("SELECT ? + 1", [.integer(Int64.max - 1)]), [[.integer(Int64.max)]])
    }

    func testStatementIsReusableAfterReset() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t (x INTEGER)")
        let insert = try db.prepare("INSERT INTO t VALUES (?)")
        for x in 1...5 {
            try insert.bind([.integer(Int64(x))])
            XCTAssertFalse(try insert.step())
        }
        XCTAssertEqual(try db.query("SELECT sum(x) FROM t"), [[.integer(15)]])
    }

    func testWrongParameterCountIsAnError() throws {
        let db = try Database(path: ":memory:")
        let statement = try db.prepare("SELECT ?, ?")
        XCTAssertThrowsError(try statement.bind([.integer(1)])) { error in
            XCTAssertEqual((error as? DatabaseError)?.code, SQLITE_RANGE)
        }
    }

    func testConstraintErrorCarriesSQLiteCodes() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t (x INTEGER UNIQUE)")
        try db.run("INSERT INTO t VALUES (1)")
        XCTAssertThrowsError(try db.run("INSERT INTO t VALUES (1)")) { error in
            let e = error as? DatabaseError
            XCTAssertEqual(e?.code, SQLITE_CONSTRAINT)
            XCTAssertEqual(e?.extendedCode, 2067)  // SQLITE_CONSTRAINT_UNIQUE
            XCTAssertTrue(e?.description.contains("UNIQUE constraint failed") ?? false, "\(String(describing: e))")
            XCTAssertEqual(e?.asItsMeError.kind, .database)
        }
    }

    func testSyntaxErrorAndMultipleStatementsInPrepare() throws {
        let db = try Database(path: ":memory:")
        XCTAssertThrowsError(try db.prepare("SELEC 1")) { error in
            XCTAssertEqual((error as? DatabaseError)?.code, SQLITE_ERROR)
        }
        XCTAssertThrowsError(try db.prepare("SELECT 1; SELECT 2")) { error in
            XCTAssertEqual((error as? DatabaseError)?.code, SQLITE_MISUSE)
        }
        XCTAssertNoThrow(try db.prepare("SELECT 1;  "))
    }

    func testOpenFailuresAreErrors() throws {
        XCTAssertThrowsError(try Database(path: directory + "/missing.db", mode: .readOnly)) { error in
            XCTAssertEqual((error as? DatabaseError)?.code, SQLITE_CANTOPEN)
        }
        XCTAssertThrowsError(try Database(path: directory + "/no/such/dir/x.db")) { error in
            XCTAssertEqual((error as? DatabaseError)?.code, SQLITE_CANTOPEN)
        }
    }

    func testTransactionCommitsOrRollsBack() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t (x INTEGER)")
        try db.transaction { try db.run("INSERT INTO t VALUES (1)") }
        struct Boom: Error {}
        XCTAssertThrowsError(
            try db.transaction {
                try db.run("INSERT INTO t VALUES (2)")
                throw Boom()
            })
        XCTAssertFalse(db.isInTransaction)
        XCTAssertEqual(try db.query("SELECT x FROM t"), [[.integer(1)]])
    }

    func testNestedTransactionRollsBackOnlyItsPart() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t (x INTEGER)")
        struct Boom: Error {}
        try db.transaction {
            try db.run("INSERT INTO t VALUES (1)")
            XCTAssertThrowsError(
                try db.transaction {
                    try db.run("INSERT INTO t VALUES (2)")
                    throw Boom()
                })
            try db.run("INSERT INTO t VALUES (3)")
        }
        XCTAssertEqual(try db.query("SELECT x FROM t ORDER BY x"), [[.integer(1)], [.integer(3)]])
    }

    func testMigrationsRunOnceInOrderAndSurviveReopen() throws {
        let path = directory + "/m.db"
        var applied: [Int32] = []
        func migrations() -> [Database.Migration] {
            [
                Database.Migration(version: 1) { db in
                    applied.append(1)
                    try db.execute("CREATE TABLE a (x INTEGER)")
                },
                Database.Migration(version: 2) { db in
                    applied.append(2)
                    try db.execute("ALTER TABLE a ADD COLUMN y TEXT")
                },
            ]
        }
        do {
            let db = try Database(path: path)
            try db.migrate(Array(migrations().prefix(1)))
            XCTAssertEqual(try db.userVersion(), 1)
            try db.migrate(migrations())
            XCTAssertEqual(try db.userVersion(), 2)
        }
        let db = try Database(path: path)
        try db.migrate(migrations())
        XCTAssertEqual(applied, [1, 2])
        try db.run("INSERT INTO a (x, y) VALUES (1, 'ok')")
    }

    func testFailedMigrationLeavesPreviousVersion() throws {
        let db = try Database(path: ":memory:")
        let migrations = [
            Database.Migration(version: 1, sql: "CREATE TABLE a (x INTEGER)"),
            Database.Migration(version: 2, sql: "CREATE TABLE b (x INTEGER); CREATE TABLE a (x INTEGER)"),
        ]
        XCTAssertThrowsError(try db.migrate(migrations))
        XCTAssertEqual(try db.userVersion(), 1)
        XCTAssertEqual(try db.query("SELECT count(*) FROM sqlite_master WHERE name = 'b'"), [[.integer(0)]])
    }

    func testNewerSchemaAndBadNumberingAreRefused() throws {
        let db = try Database(path: ":memory:")
        try db.execute("PRAGMA user_version = 7")
        XCTAssertThrowsError(try db.migrate([Database.Migration(version: 1, sql: "SELECT 1")])) { error in
            XCTAssertTrue(String(describing: error).contains("newer"))
        }
        XCTAssertThrowsError(try db.migrate([Database.Migration(version: 2, sql: "SELECT 1")]))
        XCTAssertEqual(try db.userVersion(), 7)
    }

    func testConcurrentWriterGetsBusyAfterTimeout() throws {
        let path = directory + "/busy.db"
        let a = try Database(path: path)
        try a.execute("PRAGMA journal_mode = WAL; CREATE TABLE t (x INTEGER)")
        let b = try Database(path: path, busyTimeoutMilliseconds: 0)
        try a.execute("BEGIN IMMEDIATE")
        XCTAssertThrowsError(try b.run("INSERT INTO t VALUES (1)")) { error in
            XCTAssertEqual((error as? DatabaseError)?.code, SQLITE_BUSY)
        }
        try a.execute("COMMIT")
        try b.run("INSERT INTO t VALUES (1)")
        XCTAssertEqual(try a.query("SELECT count(*) FROM t"), [[.integer(1)]])
    }
}

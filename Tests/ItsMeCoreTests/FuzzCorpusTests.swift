import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeFuzzing
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

/// Replays each fuzz target's corpus (Tests/FuzzCorpus/<target>, grown by
/// scripts/fuzz) through the target's own body: every input must give a
/// result or an error, never a crash (a body also stops the process when
/// what a reader accepted does not hold together).
final class FuzzCorpusTests: XCTestCase {
    static let corpora = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("FuzzCorpus")

    /// The inputs of `target`'s corpus, in name order; at least `minimum`.
    func corpus(_ target: String, minimum: Int) throws -> [[UInt8]] {
        let dir = Self.corpora.appendingPathComponent(target)
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        XCTAssertGreaterThanOrEqual(files.count, minimum, "the \(target) corpus is missing")
        return try files.map { Array(try Data(contentsOf: dir.appendingPathComponent($0))) }
    }

    func testExchangeCorpusReplays() throws {
        try Sodium.initialize()
        let work = try fuzzDirectory()
        defer { try? FileManager.default.removeItem(atPath: work) }
        let context = try ExchangeFuzzing(directory: work)
        for input in try corpus("exchange", minimum: 50) { context.run(input) }
    }

    func testVerifyCorpusReplays() throws {
        try Sodium.initialize()
        let work = try fuzzDirectory()
        defer { try? FileManager.default.removeItem(atPath: work) }
        let context = try VerifyFuzzing(directory: work)
        for input in try corpus("verify", minimum: 20) { context.run(input) }
    }

    func testRecordsCorpusReplays() throws {
        try Sodium.initialize()
        let context = try RecordsFuzzing()
        let accepted = try corpus("records", minimum: 20).filter { context.run($0) }.count
        XCTAssertGreaterThan(accepted, 0, "no record of the corpus is read")
    }

    func testCodesCorpusReplays() throws {
        try Sodium.initialize()
        let accepted = try corpus("codes", minimum: 20).filter { CodesFuzzing.run($0) }.count
        XCTAssertGreaterThan(accepted, 0, "no code of the corpus is read")
    }

    func testSealedCorpusReplays() throws {
        try Sodium.initialize()
        let work = try fuzzDirectory()
        defer { try? FileManager.default.removeItem(atPath: work) }
        let context = try SealedFuzzing(directory: work)
        let accepted = try corpus("sealed", minimum: 20).filter { context.run($0) }.count
        XCTAssertGreaterThan(accepted, 0, "no sealed exchange of the corpus restores")
    }
}

/// A new empty directory for a fuzz body's contact stores; the caller
/// removes it.
func fuzzDirectory() throws -> String {
    let work = NSTemporaryDirectory() + "itsme-fuzz-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
    return work
}

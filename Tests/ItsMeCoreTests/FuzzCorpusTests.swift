import Foundation
import XCTest

@testable import ItsMeCore

/// Replays the exchange fuzz corpus (Tests/FuzzCorpus/exchange, grown by
/// scripts/fuzz) through the fuzz target's own body: every input must give
/// a result or an error, never a crash.
final class FuzzCorpusTests: XCTestCase {
    func testExchangeCorpusReplays() throws {
        try Sodium.initialize()
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("FuzzCorpus/exchange")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        XCTAssertGreaterThan(files.count, 50, "the corpus is missing")
        var r1 = DeterministicRandom(seed: [UInt8](repeating: 1, count: 32))
        var r2 = DeterministicRandom(seed: [UInt8](repeating: 2, count: 32))
        let a = try Identity.create(store: MemorySecretStore(), name: "Fuzz A", random: &r1)
        let b = try Identity.create(store: MemorySecretStore(), name: "Fuzz B", random: &r2)
        for name in files {
            ExchangeFuzzing.run(Array(try Data(contentsOf: dir.appendingPathComponent(name))), a, b)
        }
    }

    func testVerifyCorpusReplays() throws {
        try Sodium.initialize()
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("FuzzCorpus/verify")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        XCTAssertGreaterThan(files.count, 20, "the corpus is missing")
        let work = NSTemporaryDirectory() + "itsme-fuzz-replay-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let context = try VerifyFuzzing(directory: work)
        for name in files { context.run(Array(try Data(contentsOf: dir.appendingPathComponent(name)))) }
    }
}

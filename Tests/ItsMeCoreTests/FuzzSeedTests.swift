import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeFuzzing
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

/// The honest inputs the fuzz corpora are seeded with: real export texts,
/// transfer offers and messages, profile records, approval requests,
/// approvals and enrollments, typed codes of every kind, sealed exchanges
/// in every state. Each must be accepted by its target's body (so the
/// corpus starts from what the readers take, not from their refusals).
///
/// With ITSME_FUZZ_SEEDS set to a directory, each target's seeds are also
/// written to <directory>/<target>/; `scripts/fuzz` (without --check)
/// merges those that add coverage into Tests/FuzzCorpus.
final class FuzzSeedTests: XCTestCase {
    func write(_ seeds: [[UInt8]], target: String) throws {
        guard let root = ProcessInfo.processInfo.environment["ITSME_FUZZ_SEEDS"], !root.isEmpty else { return }
        let dir = URL(fileURLWithPath: root).appendingPathComponent(target)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for (i, seed) in seeds.enumerated() {
            try Data(seed).write(to: dir.appendingPathComponent(String(format: "seed-%03d", i)))
        }
    }

    func testExchangeSeedsAreAccepted() throws {
        try Sodium.initialize()
        let work = try fuzzDirectory()
        defer { try? FileManager.default.removeItem(atPath: work) }
        let context = try ExchangeFuzzing(directory: work)
        let seeds = try context.seeds()
        // QR (ours and the source format), Bluetooth after 0 to 2 honest
        // frames (after 3 the peer waits for the person), the three remote steps.
        XCTAssertEqual(seeds.count, 8)
        for seed in seeds { XCTAssertTrue(context.run(seed), "exchange seed with selector \(seed[0]) refused") }
        try write(seeds, target: "exchange")
    }

    func testVerifySeedsAreAccepted() throws {
        try Sodium.initialize()
        let work = try fuzzDirectory()
        defer { try? FileManager.default.removeItem(atPath: work) }
        let context = try VerifyFuzzing(directory: work)
        let seeds = context.seeds()
        XCTAssertEqual(Set(seeds.map { $0[0] & 1 }), [0, 1], "Online Verify and PIN Update both have seeds")
        for seed in seeds { XCTAssertTrue(context.run(seed), "verify seed with selector \(seed[0]) refused") }
        try write(seeds, target: "verify")
    }

    func testRecordsSeedsAreAccepted() throws {
        try Sodium.initialize()
        let context = try RecordsFuzzing()
        let seeds = try context.seeds()
        let kinds = Set(seeds.map { Int($0[0]) % RecordsFuzzing.Kind.allCases.count })
        XCTAssertEqual(kinds.count, RecordsFuzzing.Kind.allCases.count, "a kind of record has no seed")
        for seed in seeds {
            XCTAssertTrue(context.run(seed), "records seed of kind \(RecordsFuzzing.Kind(rawValue: Int(seed[0]) % 10)!) refused")
        }
        try write(seeds, target: "records")
    }

    func testCodesSeedsAreAccepted() throws {
        try Sodium.initialize()
        let seeds = try CodesFuzzing.seeds()
        XCTAssertEqual(Set(seeds.map { Int($0[0]) }).count, CodesFuzzing.kinds, "a kind of code has no seed")
        for seed in seeds {
            XCTAssertTrue(CodesFuzzing.run(seed), "code of kind \(seed[0]) refused: \(String(decoding: seed.dropFirst(), as: UTF8.self))")
        }
        try write(seeds, target: "codes")
    }

    func testSealedSeedsAreAccepted() throws {
        try Sodium.initialize()
        let work = try fuzzDirectory()
        defer { try? FileManager.default.removeItem(atPath: work) }
        let context = try SealedFuzzing(directory: work)
        let seeds = try context.seeds()
        // Every method (the record's first byte), both as sealed and as the record.
        let methods = Set(seeds.filter { $0[0] == 0 }.map { $0[1] })
        XCTAssertEqual(methods, [0, 1, 2, 3], "a method has no sealed exchange")
        XCTAssertGreaterThanOrEqual(seeds.count, 20)
        for seed in seeds { XCTAssertTrue(context.run(seed), "sealed exchange \(seed.count) bytes, selector \(seed[0]) refused") }
        // A sealed exchange changed by one bit is refused.
        var changed = seeds.first { $0[0] == 1 }!
        changed[changed.count - 1] ^= 1
        XCTAssertFalse(context.run(changed))
        try write(seeds, target: "sealed")
    }
}

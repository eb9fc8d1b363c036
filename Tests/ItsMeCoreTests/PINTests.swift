import Foundation
import Synchronization
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

final class PINTests: XCTestCase {
    /// Cheap parameters keep the many attempts below fast; the real
    /// default is checked once.
    private let cheap = Argon2id.Parameters(opsLimit: 1, memLimit: 8192)
    private let t0: Int64 = 1_800_000_000

    override func setUpWithError() throws { try Sodium.initialize() }

    private func kind(_ body: () throws -> Void) -> ItsMeError.Kind? {
        do {
            try body()
            return nil
        } catch { return (error as? ItsMeError)?.kind }
    }

    func testSetVerifyChange() throws {
        let store = MemorySecretStore()
        let pin = PIN(store: store)  // default (interactive) parameters
        XCTAssertFalse(try pin.isSet())
        XCTAssertEqual(kind { try pin.verify("123456", now: t0) }, .notFound)
        try pin.set("123456")
        XCTAssertTrue(try pin.isSet())
        XCTAssertEqual(kind { try pin.set("654321") }, .alreadyExists)
        try pin.verify("123456", now: t0)
        XCTAssertEqual(kind { try pin.verify("123457", now: t0) }, .wrongPIN)
        try pin.change(old: "123456", new: "000000", now: t0)
        XCTAssertEqual(kind { try pin.verify("123456", now: t0) }, .wrongPIN)
        try pin.verify("000000", now: t0)
        XCTAssertEqual(try pin.status(now: t0).failures, 0)
    }

    func testMalformedPINsAreNotCounted() throws {
        let pin = PIN(store: MemorySecretStore(), parameters: cheap)
        try pin.set("123456")
        for bad in ["", "12345", "1234567", "12a456", "１２３４５６", "١٢٣٤٥٦", " 12345", "123456\n"] {
            XCTAssertEqual(kind { try pin.verify(bad, now: t0) }, .invalidPIN, bad)
            XCTAssertEqual(kind { try pin.set(bad) }, .invalidPIN, bad)
        }
        XCTAssertEqual(try pin.status(now: t0), AttemptLimiter.Status(failures: 0, waitSeconds: 0))
        XCTAssertEqual(kind { try pin.change(old: "123456", new: "12", now: t0) }, .invalidPIN)
        try pin.verify("123456", now: t0)  // the malformed new PIN did not replace it
    }

    func testLockoutScheduleDoublesAndCaps() throws {
        XCTAssertEqual((0...4).map { AttemptLimiter.lockSeconds(failures: UInt32($0)) }, [0, 0, 0, 0, 0])
        XCTAssertEqual(
            (5...11).map { AttemptLimiter.lockSeconds(failures: UInt32($0)) },
            [300, 600, 1200, 2400, 4800, 9600, 19200])
        XCTAssertEqual(AttemptLimiter.lockSeconds(failures: 13), 76800)
        XCTAssertEqual(AttemptLimiter.lockSeconds(failures: 14), 86400)
        XCTAssertEqual(AttemptLimiter.lockSeconds(failures: UInt32.max), 86400)
    }

    func testLockoutAfterFiveFailuresSurvivesRestart() throws {
        let directory = NSTemporaryDirectory() + "itsme-pin-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var pin = PIN(store: try FileSecretStore(directory: directory), parameters: cheap)
        try pin.set("123456")
        for i in 1...4 {
            XCTAssertEqual(kind { try pin.verify("000000", now: t0) }, .wrongPIN)
            XCTAssertEqual(try pin.status(now: t0), AttemptLimiter.Status(failures: UInt32(i), waitSeconds: 0))
        }
        XCTAssertEqual(kind { try pin.verify("000000", now: t0) }, .wrongPIN)
        XCTAssertEqual(try pin.status(now: t0), AttemptLimiter.Status(failures: 5, waitSeconds: 300))
        // "Restart": a new store object over the same directory.
        pin = PIN(store: try FileSecretStore(directory: directory), parameters: cheap)
        XCTAssertEqual(kind { try pin.verify("123456", now: t0 + 299) }, .locked)
        XCTAssertEqual(try pin.status(now: t0 + 299).failures, 5, "a refused attempt is not counted")
        XCTAssertEqual(kind { try pin.verify("000000", now: t0 + 300) }, .wrongPIN)
        XCTAssertEqual(try pin.status(now: t0 + 300), AttemptLimiter.Status(failures: 6, waitSeconds: 600))
        try pin.verify("123456", now: t0 + 900)
        XCTAssertEqual(try pin.status(now: t0 + 900), AttemptLimiter.Status(failures: 0, waitSeconds: 0))
    }

    func testClockSetBackCannotStretchTheWait() throws {
        let pin = PIN(store: MemorySecretStore(), parameters: cheap)
        try pin.set("123456")
        for _ in 1...5 { _ = kind { try pin.verify("000000", now: t0) } }
        XCTAssertEqual(try pin.status(now: t0 - 1_000_000).waitSeconds, 300)
        XCTAssertEqual(try pin.status(now: t0 + 100).waitSeconds, 200)
        XCTAssertEqual(try pin.status(now: t0 + 10_000).waitSeconds, 0)
    }

    func testCountIsSavedBeforeTheCheck() throws {
        // While the secret is being checked, the failure is already on disk:
        // killing the process at that point cannot erase the attempt.
        let store = MemorySecretStore()
        let limiter = AttemptLimiter(store: store, purpose: "test")
        var seenDuringCheck: UInt32?
        try limiter.attempt(now: t0, failure: .wrongPIN, what: "code") {
            seenDuringCheck = try AttemptLimiter(store: store, purpose: "test").status(now: t0).failures
            return true
        }
        XCTAssertEqual(seenDuringCheck, 1)
        XCTAssertEqual(try limiter.status(now: t0).failures, 0, "a success clears the count")
    }

    func testACheckThatThrowsLeavesTheLimiterAsItWas() throws {
        let limiter = AttemptLimiter(store: MemorySecretStore(), purpose: "test")
        for _ in 1...5 {
            _ = kind { try limiter.attempt(now: t0, failure: .wrongPIN, what: "code") { false } }
        }
        XCTAssertEqual(try limiter.status(now: t0 + 300), AttemptLimiter.Status(failures: 5, waitSeconds: 0))
        struct StoreDown: Error {}
        XCTAssertThrowsError(try limiter.attempt(now: t0 + 300, failure: .wrongPIN, what: "code") { throw StoreDown() })
        // Neither counted nor a new lock started.
        XCTAssertEqual(try limiter.status(now: t0 + 300), AttemptLimiter.Status(failures: 5, waitSeconds: 0))
    }

    func testStoreFailureIsNotAGuess() throws {
        let store = MemorySecretStore()
        let pin = PIN(store: store, parameters: cheap)
        try pin.set("123456")
        let failing = FailingStore(inner: store)
        let gated = PIN(store: failing, parameters: cheap)
        failing.failPuts = true
        // The counter cannot be saved, so the PIN is not even checked.
        XCTAssertEqual(kind { try gated.verify("123456", now: t0) }, .secretStore)
        XCTAssertEqual(kind { try gated.verify("000000", now: t0) }, .secretStore)
        XCTAssertEqual(try pin.status(now: t0).failures, 0)
    }

    func testNegativeTimeAndCorruptRecords() throws {
        let store = MemorySecretStore()
        let pin = PIN(store: store, parameters: cheap)
        try pin.set("123456")
        XCTAssertEqual(kind { try pin.verify("123456", now: -1) }, .invalidArgument)
        XCTAssertEqual(kind { _ = try pin.status(now: -1) }, .invalidArgument)
        let good = try XCTUnwrap(try stored(store, PIN.itemName))
        var hugeMemory = good
        hugeMemory.replaceSubrange(10..<18, with: [0, 0, 0, 1, 0, 0, 0, 0])  // 4 GiB
        var badAlgorithm = good
        badAlgorithm[1] = 9
        for bad in [Array(good.prefix(10)), good + [1], hugeMemory, badAlgorithm] {
            try store.put(PIN.itemName, bytes: bad)
            XCTAssertEqual(kind { try pin.verify("123456", now: t0) }, .corruptData)
        }
        try store.put("itsme.limiter.pin", bytes: [1, 2, 3])
        XCTAssertEqual(kind { _ = try pin.status(now: t0) }, .corruptData)
    }
}

/// Passes reads through and fails writes on demand.
final class FailingStore: SecretStore, @unchecked Sendable {
    let inner: any SecretStore
    var failPuts = false
    init(inner: any SecretStore) { self.inner = inner }
    func get(_ name: String) throws -> SecretBytes? { try inner.get(name) }
    func put(_ name: String, _ value: UnsafeRawBufferPointer, accessibility: Accessibility) throws {
        if failPuts { throw ItsMeError(.secretStore, "disk full") }
        try inner.put(name, value, accessibility: accessibility)
    }
    func remove(_ name: String) throws -> Bool { try inner.remove(name) }
}

final class PINConcurrencyTests: XCTestCase {
    override func setUpWithError() throws { try Sodium.initialize() }

    /// Eight guesses at the same moment through eight PIN objects on one
    /// store: exactly five are checked and counted, the rest are locked out.
    private func assertEveryAttemptCounted(_ makeStore: () throws -> any SecretStore) throws {
        let cheap = Argon2id.Parameters(opsLimit: 1, memLimit: 8192)
        let first = try makeStore()
        try PIN(store: first, parameters: cheap).set("123456")
        let pins = try (0..<8).map { _ in PIN(store: try makeStore(), parameters: cheap) }
        let outcomes = Mutex<[ItsMeError.Kind]>([])
        DispatchQueue.concurrentPerform(iterations: pins.count) { i in
            do {
                try pins[i].verify("000000", now: 1_800_000_000)
            } catch {
                let kind = (error as? ItsMeError)?.kind ?? .internal
                outcomes.withLock { $0.append(kind) }
            }
        }
        let kinds = outcomes.withLock { $0 }
        XCTAssertEqual(kinds.filter { $0 == .wrongPIN }.count, 5, "\(kinds)")
        XCTAssertEqual(kinds.filter { $0 == .locked }.count, 3, "\(kinds)")
        XCTAssertEqual(try pins[0].status(now: 1_800_000_000).failures, 5)
    }

    /// Right PINs entered at the same moment must not lock the person out:
    /// an attempt in flight is not a failure for the others.
    func testConcurrentRightPINsAllSucceed() throws {
        let cheap = Argon2id.Parameters(opsLimit: 1, memLimit: 8192)
        let store = MemorySecretStore()
        try PIN(store: store, parameters: cheap).set("123456")
        let failures = Mutex<[ItsMeError.Kind]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            do { try PIN(store: store, parameters: cheap).verify("123456", now: 1_800_000_000) } catch {
                failures.withLock { $0.append((error as? ItsMeError)?.kind ?? .internal) }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, [])
        XCTAssertEqual(try PIN(store: store).status(now: 1_800_000_000).failures, 0)
    }

    func testConcurrentAttemptsOnOneMemoryStoreAreAllCounted() throws {
        let store = MemorySecretStore()
        try assertEveryAttemptCounted { store }
    }

    func testConcurrentAttemptsThroughSeveralFileStoreObjectsAreAllCounted() throws {
        let directory = NSTemporaryDirectory() + "itsme-pin-race-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try assertEveryAttemptCounted { try FileSecretStore(directory: directory) }
    }
}

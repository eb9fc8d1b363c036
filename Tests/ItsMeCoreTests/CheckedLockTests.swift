import Foundation
import ItsMePrimitives
import Synchronization
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore

/// The lock behind every handle a host callback can call back into: the
/// thread holding it is refused, other threads wait their turn.
final class CheckedLockTests: XCTestCase {
    private func again() -> ItsMeError { ItsMeError(.invalidState, "again") }

    func testTheHoldingThreadIsRefusedInsteadOfTrapping() throws {
        let lock = CheckedLock()
        var innerRan = false
        let refusal: ItsMeError? = try lock.withLock(reentered: again()) {
            do {
                try lock.withLock(reentered: again()) { innerRan = true }
                return nil
            } catch let error as ItsMeError {
                return error
            }
        }
        XCTAssertFalse(innerRan)
        XCTAssertEqual(refusal?.kind, .invalidState)
        XCTAssertEqual(refusal?.message, "again")
        // Released after the outer call, and after a body that threw.
        XCTAssertThrowsError(try lock.withLock(reentered: again()) { throw ItsMeError(.database, "inside") }) {
            XCTAssertEqual(($0 as? ItsMeError)?.kind, .database)
        }
        XCTAssertEqual(try lock.withLock(reentered: again()) { 7 }, 7)
    }

    func testOtherThreadsTakeTurns() throws {
        final class Shared: @unchecked Sendable {
            let lock = CheckedLock()
            var count = 0
            let refusals = Mutex(0)
        }
        let shared = Shared()
        let rounds = 20_000
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<rounds {
                do {
                    try shared.lock.withLock(reentered: ItsMeError(.invalidState, "again")) {
                        let seen = shared.count
                        shared.count = seen + 1
                    }
                } catch {
                    shared.refusals.withLock { $0 += 1 }
                }
            }
        }
        XCTAssertEqual(shared.refusals.withLock { $0 }, 0, "a thread waiting for another is never refused")
        XCTAssertEqual(shared.count, 4 * rounds)
    }

    func testExclusiveAccessAskedAgainOnTheSameThreadIsASecretStoreError() throws {
        let directory = NSTemporaryDirectory() + "itsme-checked-lock-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let stores: [any SecretStore] = [MemorySecretStore(), try FileSecretStore(directory: directory)]
        for store in stores {
            let inner: ItsMeError? = try store.withExclusiveAccess {
                do {
                    try store.withExclusiveAccess {}
                    return nil
                } catch let error as ItsMeError {
                    return error
                }
            }
            XCTAssertEqual(inner?.kind, .secretStore, "\(type(of: store))")
            // Another store of the process shares the one lock.
            let other: ItsMeError? = try store.withExclusiveAccess {
                do {
                    try MemorySecretStore().withExclusiveAccess {}
                    return nil
                } catch let error as ItsMeError {
                    return error
                }
            }
            XCTAssertEqual(other?.kind, .secretStore, "\(type(of: store))")
            XCTAssertEqual(try store.withExclusiveAccess { 1 }, 1, "released")
        }
    }
}

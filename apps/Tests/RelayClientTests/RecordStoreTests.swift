import Foundation
import ItsMeKit
import ItsMePrimitives
import RelayServer
import RelayClient
import XCTest

/// Records through a relay run in this process (docs/PROTOCOL.md 15.4, 18).
final class RecordStoreTests: RelayTestCase {

    private func randomID() -> String {
        var random = SystemRandom()
        return Hex.encodeUpper(random.bytes(16)).lowercased()
    }

    func testPutGetDelete() async throws {
        let url = try await startRelay()
        let store = RecordStore(url, timeout: 5)
        let id = randomID()
        let bytes: [UInt8] = Array("a record".utf8)

        let token = try await store.put(id: id, bytes: bytes)
        let deleteToken = try XCTUnwrap(token, "a new record gives a delete token")
        XCTAssertEqual(deleteToken.count, 43)
        // The same bytes again: stored already, no token.
        let again = try await store.put(id: id, bytes: bytes)
        XCTAssertNil(again)
        let fetched = try await store.get(id: id)
        XCTAssertEqual(fetched, bytes)

        // Other bytes under the ID: refused, the record unchanged.
        let conflict = await relayError { _ = try await store.put(id: id, bytes: [1, 2, 3]) }
        XCTAssertEqual(conflict?.status, 409)
        XCTAssertEqual(conflict?.kind, "conflict")
        let unchanged = try await store.get(id: id)
        XCTAssertEqual(unchanged, bytes)

        // A wrong token (well formed): forbidden, the record stays.
        var random = SystemRandom()
        let wrong = Base64.encode(random.bytes(32), .urlUnpadded)
        let forbidden = await relayError { try await store.delete(id: id, token: wrong) }
        XCTAssertEqual(forbidden?.status, 403)
        XCTAssertEqual(forbidden?.kind, "forbidden")
        let still = try await store.get(id: id)
        XCTAssertEqual(still, bytes)

        try await store.delete(id: id, token: deleteToken)
        let gone = await relayError { _ = try await store.get(id: id) }
        XCTAssertEqual(gone?.status, 404)
        XCTAssertEqual(gone?.kind, "not-found")
        XCTAssertEqual(gone?.inviteEnded, false, "a record is not an invite")
        let twice = await relayError { try await store.delete(id: id, token: deleteToken) }
        XCTAssertEqual(twice?.status, 404)
        XCTAssertFalse("\(String(describing: twice))".contains(deleteToken), "an error never shows the token")
    }

    func testProfileRecordRoundTrip() async throws {
        let url = try await startRelay()
        let store = RecordStore(url, timeout: 5)
        let alice = try Person("Alice", in: directory)
        var random = SystemRandom()
        let made = try ProfileRecord.create(
            ownerKey: alice.identity.publicKey, name: "Alice Liddell", photo: random.bytes(5000), photoFilename: "alice.jpg",
            random: &random)
        let token = try await store.put(id: made.recordName, bytes: made.record)
        XCTAssertNotNil(token)

        let reference = try made.reference()
        let fetched = try await store.get(id: made.recordName)
        let opened = try ProfileRecord.open(record: fetched, reference: reference, ownerKey: alice.identity.publicKey)
        XCTAssertEqual(opened.name, "Alice Liddell")
        XCTAssertEqual(opened.photo, made.photo)
        XCTAssertEqual(opened.photoFilename, "alice.jpg")

        // Read as someone else's record, it fails.
        let bob = try Person("Bob", in: directory)
        XCTAssertThrowsError(try ProfileRecord.open(record: fetched, reference: reference, ownerKey: bob.identity.publicKey)) {
            XCTAssertEqual(($0 as? ItsMeError)?.kind, .authenticationFailed)
        }
    }

    func testLimitAndArguments() async throws {
        let url = try await startRelay { $0.maxRecord = 100 }
        let store = RecordStore(url, timeout: 5)
        let large = await relayError { _ = try await store.put(id: self.randomID(), bytes: [UInt8](repeating: 7, count: 101)) }
        XCTAssertEqual(large?.status, 413)
        XCTAssertEqual(large?.kind, "too-large")
        let fits = try await store.put(id: randomID(), bytes: [UInt8](repeating: 7, count: 100))
        XCTAssertNotNil(fits)

        // Refused before any network call.
        let badID = await coreErrorKind { _ = try await store.get(id: "ABCDEF") }
        XCTAssertEqual(badID, .invalidArgument)
        let upper = await coreErrorKind { _ = try await store.put(id: String(repeating: "A", count: 32), bytes: [1]) }
        XCTAssertEqual(upper, .invalidArgument)
        let empty = await coreErrorKind { _ = try await store.put(id: self.randomID(), bytes: []) }
        XCTAssertEqual(empty, .invalidArgument)
        let badToken = await coreErrorKind { try await store.delete(id: self.randomID(), token: "not-a-token") }
        XCTAssertEqual(badToken, .invalidArgument)
    }

    func testRelayDown() async throws {
        let port = try closedPort()
        let store = RecordStore(try RelayURL("http://127.0.0.1:\(port)"), timeout: 5)
        let put = await relayError { _ = try await store.put(id: self.randomID(), bytes: [1]) }
        XCTAssertEqual(put?.kind, "connection")
        XCTAssertNil(put?.status)
        let get = await relayError { _ = try await store.get(id: self.randomID()) }
        XCTAssertEqual(get?.kind, "connection")
    }
}

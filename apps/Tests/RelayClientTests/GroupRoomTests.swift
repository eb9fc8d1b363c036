import Foundation
import ItsMeKit
import ItsMePrimitives
import RelayServer
import RelayClient
import XCTest

/// Group rooms (docs/PROTOCOL.md 15.9) through the client, against a relay
/// in this process.
final class GroupRoomTests: RelayTestCase {

    private func randomID() -> String {
        var random = SystemRandom()
        return Hex.encodeUpper(random.bytes(16)).lowercased()
    }

    /// The next event of `room`, which must not be a message.
    private func event(_ room: GroupRoom, file: StaticString = #filePath, line: UInt = #line) async throws -> GroupEvent {
        let event = try await room.nextEvent(timeout: 5)
        if case .message = event { XCTFail("expected an event, got \(event)", file: file, line: line) }
        return event
    }

    func testSlotsEventsAndMessages() async throws {
        let url = try await startRelay()
        let id = randomID()
        let first = try await GroupRoom.join(url, groupID: id, timeout: 5)
        XCTAssertEqual(first.groupID, id)
        XCTAssertNil(first.slot)
        var got = try await event(first)
        XCTAssertEqual(got, .joined(slot: 1, peers: []))
        XCTAssertEqual(first.slot, 1)
        XCTAssertEqual(first.peers, [])

        // Alone, a message is not forwarded.
        try await first.send([1, 2, 3])
        got = try await event(first)
        XCTAssertEqual(got, .refused(reason: "no-peer"))

        let second = try await GroupRoom.join(url, groupID: id, timeout: 5)
        got = try await event(second)
        XCTAssertEqual(got, .joined(slot: 2, peers: [1]))
        got = try await event(first)
        XCTAssertEqual(got, .peerJoined(slot: 2))
        let third = try await GroupRoom.join(url, groupID: id, timeout: 5)
        got = try await event(third)
        XCTAssertEqual(got, .joined(slot: 3, peers: [1, 2]))
        for room in [first, second] {
            got = try await event(room)
            XCTAssertEqual(got, .peerJoined(slot: 3))
        }
        XCTAssertEqual(first.peers, [2, 3])
        XCTAssertEqual(third.peers, [1, 2])

        // A message reaches each other peer, with its sender's slot, up to
        // the largest the relay forwards.
        try await second.send([0, 255, 7])
        for room in [first, third] {
            got = try await room.nextEvent(timeout: 5)
            XCTAssertEqual(got, .message(from: 2, [0, 255, 7]))
        }
        let large = (0..<GroupRoom.maxFrame).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try await third.send(large)
        for room in [first, second] {
            got = try await room.nextEvent(timeout: 5)
            XCTAssertEqual(got, .message(from: 3, large))
        }
        let tooLarge = await coreErrorKind { try await first.send([UInt8](repeating: 0, count: GroupRoom.maxFrame + 1)) }
        XCTAssertEqual(tooLarge, .invalidArgument)
        let empty = await coreErrorKind { try await first.send([]) }
        XCTAssertEqual(empty, .invalidArgument)
        let quiet = await relayError { _ = try await second.nextEvent(timeout: 0.1) }
        XCTAssertEqual(quiet?.kind, "timeout", "the sender does not get its own message")
        try await first.ping()

        // The second leaves: the others are told and go on.
        await second.leave()
        await second.leave()  // idempotent
        for room in [first, third] {
            got = try await event(room)
            XCTAssertEqual(got, .peerLeft(slot: 2))
        }
        XCTAssertEqual(first.peers, [3])
        try await first.send([9])
        got = try await third.nextEvent(timeout: 5)
        XCTAssertEqual(got, .message(from: 1, [9]))
        let afterLeave = await relayError { try await second.send([1]) }
        XCTAssertEqual(afterLeave?.kind, "closed")

        // A slot is not given again while the room exists.
        let fourth = try await GroupRoom.join(url, groupID: id, timeout: 5)
        got = try await event(fourth)
        XCTAssertEqual(got, .joined(slot: 4, peers: [1, 3]))
        XCTAssertEqual(fourth.description, "GroupRoom(\(id.prefix(8))..., slot: 4, peers: [1, 3])")
        for room in [first, third, fourth] { await room.leave() }
    }

    func testAFullRoomAndAllItsJoinsTurnAPeerAway() async throws {
        let url = try await startRelay {
            $0.maxGroup = 2
            $0.maxGroupJoins = 3
        }
        let id = randomID()
        let first = try await GroupRoom.join(url, groupID: id, timeout: 5)
        _ = try await event(first)
        let second = try await GroupRoom.join(url, groupID: id, timeout: 5)
        _ = try await event(second)
        _ = try await event(first)

        // Beyond --max-group.
        let third = try await GroupRoom.join(url, groupID: id, timeout: 5)
        let full = await relayError { _ = try await third.nextEvent(timeout: 5) }
        XCTAssertEqual(full?.kind, "room-full")
        await third.leave()

        // Room again, for the third and last join.
        await second.leave()
        var got = try await event(first)
        XCTAssertEqual(got, .peerLeft(slot: 2))
        let last = try await GroupRoom.join(url, groupID: id, timeout: 5)
        got = try await event(last)
        XCTAssertEqual(got, .joined(slot: 3, peers: [1]))
        _ = try await event(first)
        await last.leave()
        _ = try await event(first)

        // Beyond --max-group-joins, though a place is free.
        let beyond = try await GroupRoom.join(url, groupID: id, timeout: 5)
        let spent = await relayError { _ = try await beyond.nextEvent(timeout: 5) }
        XCTAssertEqual(spent?.kind, "room-full")
        await beyond.leave()
        await first.leave()
    }

    func testAGroupRoomAndARoomWithTheSameIDDoNotMeet() async throws {
        let url = try await startRelay()
        let id = randomID()
        let room = try await RelayRoom.join(url, roomID: id, timeout: 5)
        let roomEvent = try await room.nextEvent(timeout: 5)
        XCTAssertEqual(roomEvent, .waiting)
        let group = try await GroupRoom.join(url, groupID: id, timeout: 5)
        let got = try await event(group)
        XCTAssertEqual(got, .joined(slot: 1, peers: []))
        let quiet = await relayError { _ = try await room.nextEvent(timeout: 0.2) }
        XCTAssertEqual(quiet?.kind, "timeout")
        await room.close()
        await group.leave()
    }

    func testAnIdleGroupRoomIsClosedUnlessPinged() async throws {
        let url = try await startRelay { $0.roomIdleSeconds = 1 }
        let id = randomID()
        let first = try await GroupRoom.join(url, groupID: id, timeout: 5)
        _ = try await event(first)
        let second = try await GroupRoom.join(url, groupID: id, timeout: 5)
        _ = try await event(second)
        _ = try await event(first)
        // Pings every 0.3 s keep the room past its idle limit.
        let start = Date()
        while Date().timeIntervalSince(start) < 2.5 {
            try await first.ping()
            try await Task.sleep(nanoseconds: 300_000_000)
        }
        try await first.send([1])
        let got = try await second.nextEvent(timeout: 5)
        XCTAssertEqual(got, .message(from: 1, [1]))
        // Then silence closes it.
        for room in [first, second] {
            let closed = await relayError { _ = try await room.nextEvent(timeout: 5) }
            XCTAssertEqual(closed?.kind, "closed")
        }
        await first.leave()
        await second.leave()
    }

    func testAMalformedIDIsRefusedBeforeConnecting() async throws {
        let url = try await startRelay()
        let kind = await coreErrorKind { _ = try await GroupRoom.join(url, groupID: "not-an-id", timeout: 5) }
        XCTAssertEqual(kind, .invalidArgument)
    }
}

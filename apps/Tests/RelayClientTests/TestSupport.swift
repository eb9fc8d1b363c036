import Foundation
import ItsMeKit
import RelayServer
import RelayClient
import Logging
import XCTest

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A relay run in this process on a free port of 127.0.0.1, with its
/// database in memory, until `stop`.
final class TestRelay {
    let url: String
    let port: Int
    private let task: Task<Void, Never>

    private init(url: String, task: Task<Void, Never>) {
        self.url = url
        self.port = Int(url.split(separator: ":").last ?? "") ?? 0
        self.task = task
    }

    static func start(_ configure: (inout RelayConfiguration) -> Void = { _ in }) async throws -> TestRelay {
        var configuration = RelayConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.databasePath = ":memory:"
        configure(&configuration)
        let server = RelayServer(configuration: configuration, logger: Logger(label: "test-relay", factory: { _ in SwiftLogNoOpLogHandler() }))
        let (stream, continuation) = AsyncStream<String?>.makeStream()
        let task = Task {
            do {
                try await server.run { url in continuation.yield(url) }
            } catch {}
            continuation.yield(nil)
            continuation.finish()
        }
        var iterator = stream.makeAsyncIterator()
        guard let first = await iterator.next(), let url = first else {
            task.cancel()
            throw RelayError("the test relay did not start")
        }
        return TestRelay(url: url, task: task)
    }

    /// Stops the relay (cancellation ends its service group).
    func stop() async {
        task.cancel()
        await task.value
    }

    func relayURL() throws -> RelayURL { try RelayURL(url) }
}

/// One person: an identity and a contact store in `directory`.
struct Person {
    let identity: Identity
    let contacts: ContactStore

    init(_ name: String, in directory: String) throws {
        identity = try Identity.create(store: MemorySecretStore(), name: name)
        contacts = try ContactStore(path: directory + "/\(name)-\(UUID().uuidString).db", identity: identity)
    }
}

/// A port of 127.0.0.1 on which nothing listens: bound, then released.
func closedPort() throws -> Int {
    #if canImport(Glibc)
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #else
    let fd = socket(AF_INET, SOCK_STREAM, 0)
    #endif
    guard fd >= 0 else { throw XCTSkip("no socket") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { throw XCTSkip("cannot bind a socket") }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// The error `body` throws, or nil.
func thrownError(_ body: () async throws -> Void) async -> (any Error)? {
    do {
        try await body()
        return nil
    } catch {
        return error
    }
}

/// The relay error `body` throws; fails the test for anything else.
func relayError(
    _ body: () async throws -> Void, file: StaticString = #filePath, line: UInt = #line
) async -> RelayError? {
    let error = await thrownError(body)
    guard let relay = error as? RelayError else {
        XCTFail("expected a RelayError, got \(String(describing: error))", file: file, line: line)
        return nil
    }
    return relay
}

/// The core error kind `body` throws; fails the test for anything else.
func coreErrorKind(
    _ body: () async throws -> Void, file: StaticString = #filePath, line: UInt = #line
) async -> ItsMeError.Kind? {
    let error = await thrownError(body)
    guard let core = error as? ItsMeError else {
        XCTFail("expected an ItsMeError, got \(String(describing: error))", file: file, line: line)
        return nil
    }
    return core.kind
}

/// The current Unix time.
func unixNow() -> Int64 { Int64(Date().timeIntervalSince1970) }

/// A test case with a temporary directory and, once `startRelay` is called,
/// a relay in this process; both go at tear-down.
class RelayTestCase: XCTestCase {
    var directory: String!
    var relay: TestRelay?

    override func setUp() async throws {
        try Sodium.initialize()
        directory = NSTemporaryDirectory() + "itsme-relay-client-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDown() async throws {
        if let relay { await relay.stop() }
        relay = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    func startRelay(_ configure: (inout RelayConfiguration) -> Void = { _ in }) async throws -> RelayURL {
        let started = try await TestRelay.start(configure)
        relay = started
        return try started.relayURL()
    }
}

/// One side of a real-time exchange (`realtimeExchange`), for the tests that
/// run both sides at once, each in a task of its own (`async let`): the
/// exchange is handed to the task and back with how the run ended, so that
/// the test reads it afterwards without sharing it between tasks.
func realtimeSide(
    _ url: RelayURL, _ exchange: sending Exchange, timeout: Double = 10, pingInterval: Double = 30,
    now: Int64, decide: @Sendable (Exchange) async throws -> Bool = { _ in true }
) async -> (exchange: Exchange, end: Result<Exchange.State, any Error>) {
    do {
        let state = try await realtimeExchange(
            url, exchange: exchange, timeout: timeout, pingInterval: pingInterval, now: { now }, decide: decide)
        return (exchange, .success(state))
    } catch {
        return (exchange, .failure(error))
    }
}

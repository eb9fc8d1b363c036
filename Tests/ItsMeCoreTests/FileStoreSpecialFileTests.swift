import Foundation
import ItsMeKit
import ItsMePrimitives
import Synchronization
import XCTest

/// The file secret store reads only regular files: a FIFO, a directory, a
/// symbolic link (to anything, /dev/zero included) or a device in place of
/// an item is refused with a clear error, never followed, never waited on,
/// never taken as absent.
final class FileStoreSpecialFileTests: XCTestCase {
    private var directory: String!

    override func setUpWithError() throws {
        try Sodium.initialize()
        directory = NSTemporaryDirectory() + "itsme-special-\(UUID().uuidString)"
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs `body` on a thread of its own and fails the test if it has not
    /// returned after `seconds` (a read that blocks forever fails instead
    /// of hanging the suite). The result, or nil after the limit.
    private func returning<T: Sendable>(
        within seconds: Double = 10, file: StaticString = #filePath, line: UInt = #line,
        _ body: @escaping @Sendable () -> T
    ) -> T? {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        thread.start()
        guard done.wait(timeout: .now() + seconds) == .success else {
            XCTFail("did not return within \(Int(seconds)) s (blocked)", file: file, line: line)
            return nil
        }
        return result.withLock { $0 }
    }

    /// What `get` of `name` gives: the bytes, nil, or the error's kind and
    /// message.
    private enum Outcome: Sendable, Equatable {
        case bytes([UInt8])
        case absent
        case error(ItsMeError.Kind, String)
    }

    private func get(_ store: FileSecretStore, _ name: String, file: StaticString = #filePath, line: UInt = #line)
        -> Outcome?
    {
        returning(file: file, line: line) {
            do {
                guard let item = try store.get(name) else { return .absent }
                return .bytes(item.unsafeExportedArray())
            } catch let error as ItsMeError {
                return .error(error.kind, error.message)
            } catch {
                return .error(.internal, "\(error)")
            }
        }
    }

    private func assertRefused(
        _ outcome: Outcome?, kind: ItsMeError.Kind = .secretStore, saying fragments: [String],
        file: StaticString = #filePath, line: UInt = #line
    ) {
        guard let outcome else { return }  // already failed: blocked
        guard case .error(let got, let message) = outcome else {
            XCTFail("expected an error, got \(outcome)", file: file, line: line)
            return
        }
        XCTAssertEqual(got, kind, message, file: file, line: line)
        for fragment in fragments {
            XCTAssertTrue(message.contains(fragment), "\(message) does not say \(fragment)", file: file, line: line)
        }
    }

    func testFIFOInPlaceOfAnItemIsRefusedWithoutBlocking() throws {
        let store = try FileSecretStore(directory: directory)
        XCTAssertEqual(mkfifo(directory + "/" + Identity.itemName, 0o600), 0)
        XCTAssertEqual(mkfifo(directory + "/" + PIN.itemName, 0o600), 0)
        assertRefused(get(store, Identity.itemName), saying: [Identity.itemName, "FIFO", "not a regular file"])
        assertRefused(get(store, PIN.itemName), saying: [PIN.itemName, "FIFO", "not a regular file"])
        // Loading the identity goes through the same read.
        let loaded = returning { () -> ItsMeError.Kind? in
            do {
                _ = try Identity.load(store: store)
                return nil
            } catch {
                return (error as? ItsMeError)?.kind
            }
        }
        if let loaded { XCTAssertEqual(loaded, .secretStore) }
        // Nothing was replaced or removed.
        var info = stat()
        XCTAssertEqual(lstat(directory + "/" + Identity.itemName, &info), 0)
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFIFO)
    }

    func testDirectoryInPlaceOfAnItemIsRefused() throws {
        let store = try FileSecretStore(directory: directory)
        try FileManager.default.createDirectory(atPath: directory + "/" + Identity.itemName, withIntermediateDirectories: false)
        assertRefused(get(store, Identity.itemName), saying: [Identity.itemName, "a directory", "not a regular file"])
    }

    func testSymbolicLinksAreNotFollowed() throws {
        let store = try FileSecretStore(directory: directory)
        let item: [UInt8] = [1, 2, 3]
        try store.put("real", bytes: item)
        XCTAssertEqual(get(store, "real"), .bytes(item))
        // A link to a readable item of the same store, a link to /dev/zero
        // and a dangling link: each is refused as a link, none is absent.
        try FileManager.default.createSymbolicLink(atPath: directory + "/to-real", withDestinationPath: directory + "/real")
        try FileManager.default.createSymbolicLink(atPath: directory + "/to-zero", withDestinationPath: "/dev/zero")
        try FileManager.default.createSymbolicLink(atPath: directory + "/dangling", withDestinationPath: directory + "/none")
        for name in ["to-real", "to-zero", "dangling"] {
            assertRefused(get(store, name), saying: [name, "symbolic link", "not followed"])
        }
    }

    func testFIFOBehindALinkIsRefused() throws {
        let store = try FileSecretStore(directory: directory)
        XCTAssertEqual(mkfifo(directory + "/fifo-target", 0o600), 0)
        try FileManager.default.createSymbolicLink(atPath: directory + "/" + PIN.itemName, withDestinationPath: directory + "/fifo-target")
        assertRefused(get(store, PIN.itemName), saying: [PIN.itemName, "symbolic link", "not followed"])
    }

    func testItemLargerThanTheBoundIsRefused() throws {
        let store = try FileSecretStore(directory: directory)
        let big = directory + "/big"
        XCTAssertTrue(FileManager.default.createFile(atPath: big, contents: Data()))
        XCTAssertEqual(truncate(big, off_t(SecretStoreName.maxItemSize + 1)), 0)
        assertRefused(get(store, "big"), kind: .corruptData, saying: ["big", "larger than"])
        // At the bound, it is read.
        XCTAssertEqual(truncate(big, off_t(SecretStoreName.maxItemSize)), 0)
        guard case .bytes(let bytes)? = get(store, "big") else { return XCTFail("an item at the bound is read") }
        XCTAssertEqual(bytes.count, SecretStoreName.maxItemSize)
    }

    func testAbsentAndRegularItemsAreUnchanged() throws {
        let store = try FileSecretStore(directory: directory)
        XCTAssertEqual(get(store, "missing"), .absent)
        try store.put("empty", bytes: [UInt8]())
        XCTAssertEqual(get(store, "empty"), .bytes([]))
        try store.put("item", bytes: [9, 8, 7])
        XCTAssertEqual(get(store, "item"), .bytes([9, 8, 7]))
    }

    // MARK: The shared reader

    private func problem(_ body: () throws -> Any?) -> RegularFileError.Problem? {
        do {
            _ = try body()
            return nil
        } catch let error as RegularFileError {
            return error.problem
        } catch {
            XCTFail("unexpected \(error)")
            return nil
        }
    }

    func testReaderFollowsLinksOnlyWhenAskedAndStillRefusesDevices() throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let plain = directory + "/plain"
        XCTAssertTrue(FileManager.default.createFile(atPath: plain, contents: Data("123456\n".utf8)))
        try FileManager.default.createSymbolicLink(atPath: directory + "/link", withDestinationPath: plain)
        try FileManager.default.createSymbolicLink(atPath: directory + "/zero", withDestinationPath: "/dev/zero")
        XCTAssertEqual(try RegularFile.contents(of: plain, limit: 64), Array("123456\n".utf8))
        XCTAssertEqual(try RegularFile.contents(of: directory + "/link", followLinks: true, limit: 64), Array("123456\n".utf8))
        XCTAssertEqual(problem { try RegularFile.contents(of: directory + "/link", limit: 64) }, .symbolicLink)
        XCTAssertEqual(
            problem { try RegularFile.contents(of: directory + "/zero", followLinks: true, limit: 64) },
            .notRegular(kind: "a character device"))
        XCTAssertEqual(problem { try RegularFile.contents(of: "/dev/zero", followLinks: true, limit: 64) }, .notRegular(kind: "a character device"))
        XCTAssertEqual(problem { try RegularFile.contents(of: directory, limit: 64) }, .notRegular(kind: "a directory"))
        XCTAssertEqual(problem { try RegularFile.contents(of: plain, limit: 6) }, .tooLarge(size: 7, limit: 6))
        XCTAssertNil(try RegularFile.contents(of: directory + "/missing", limit: 64))
        XCTAssertNil(try RegularFile.contents(of: directory + "/missing", followLinks: true, limit: 64))
    }

    func testReaderBoundsAFileLongerThanItsSize() throws {
        // /proc files are regular files whose size says 0: the bytes are
        // read to their end, never past the limit.
        let proc = "/proc/self/status"
        guard FileManager.default.fileExists(atPath: proc) else { throw XCTSkip("no /proc") }
        XCTAssertGreaterThan(try RegularFile.contents(of: proc, limit: 1 << 20)?.count ?? 0, 10)
        XCTAssertEqual(problem { try RegularFile.contents(of: proc, limit: 10) }, .tooLarge(size: nil, limit: 10))
    }
}

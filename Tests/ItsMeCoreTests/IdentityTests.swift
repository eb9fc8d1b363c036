import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

final class IdentityTests: XCTestCase {
    private var directory: String!

    override func setUpWithError() throws {
        try Sodium.initialize()
        directory = NSTemporaryDirectory() + "itsme-identity-\(UUID().uuidString)"
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func testCreateLoadRoundTrip() throws {
        let store = MemorySecretStore()
        let created = try Identity.create(store: store, name: "Alice")
        let loaded = try Identity.load(store: store)
        XCTAssertEqual(loaded.publicKey, created.publicKey)
        XCTAssertEqual(loaded.fingerprint, created.fingerprint)
        XCTAssertEqual(loaded.name, "Alice")
        XCTAssertTrue(loaded.contactsKey.constantTimeEquals(created.contactsKey))
        XCTAssertEqual(store.names, [Identity.itemName])
    }

    func testFingerprintIsFirstEightBytesOfSHA256UppercaseHex() throws {
        var rng = DeterministicRandom(seed: [UInt8](repeating: 7, count: 32))
        let identity = try Identity.create(store: MemorySecretStore(), name: "A", random: &rng)
        XCTAssertEqual(identity.fingerprint.count, 16)
        XCTAssertEqual(identity.fingerprint, identity.fingerprint.uppercased())
        XCTAssertEqual(identity.fingerprint, Hex.encodeUpper(SHA256.hash(identity.publicKey).prefix(8)))
        // RFC 8032 test 1: the key of seed 9d61b19d... and its SHA-256 prefix.
        let pk = Hex.decode("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")!
        XCTAssertEqual(Fingerprint.of(publicKey: pk), Hex.encodeUpper(SHA256.hash(pk).prefix(8)))
    }

    func testDeterministicRandomGivesReproducibleIdentity() throws {
        var r1 = DeterministicRandom(seed: [UInt8](repeating: 1, count: 32))
        var r2 = DeterministicRandom(seed: [UInt8](repeating: 1, count: 32))
        let a = try Identity.create(store: MemorySecretStore(), name: "A", random: &r1)
        let b = try Identity.create(store: MemorySecretStore(), name: "A", random: &r2)
        XCTAssertEqual(a.publicKey, b.publicKey)
        XCTAssertFalse(a.publicKey.constantTimeEqualsZero)
    }

    func testCreateTwiceAndLoadEmpty() throws {
        let store = MemorySecretStore()
        XCTAssertThrowsError(try Identity.load(store: store)) { XCTAssertEqual(($0 as? ItsMeError)?.kind, .notFound) }
        _ = try Identity.create(store: store, name: "A")
        XCTAssertThrowsError(try Identity.create(store: store, name: "B")) {
            XCTAssertEqual(($0 as? ItsMeError)?.kind, .alreadyExists)
        }
        XCTAssertEqual(try Identity.load(store: store).name, "A")
    }

    func testNamesAreValidated() throws {
        let store = MemorySecretStore()
        for bad in ["", String(repeating: "x", count: 129), "tab\there", "nul\u{0}", "bell\u{7}"] {
            XCTAssertThrowsError(try Identity.create(store: store, name: bad)) {
                XCTAssertEqual(($0 as? ItsMeError)?.kind, .invalidArgument)
            }
        }
        let identity = try Identity.create(store: store, name: String(repeating: "é", count: 64))
        XCTAssertThrowsError(try identity.setName("")) { XCTAssertEqual(($0 as? ItsMeError)?.kind, .invalidArgument) }
        XCTAssertEqual(identity.name, String(repeating: "é", count: 64))
        try identity.setName("Zoë")
        XCTAssertEqual(try Identity.load(store: store).name, "Zoë")
    }

    /// PROTOCOL.md section 1: a name refuses exactly the listed code points
    /// (controls, invisible characters, bidi overrides) and allows the
    /// joiners that Persian and Indic names and emoji sequences need.
    func testNameRuleIsByCodePoint() throws {
        let refused: [UInt32] =
            Array(0x0000...0x001F) + Array(0x007F...0x009F)
            + [0x200B] + Array(0x202A...0x202E) + Array(0x2060...0x2064) + Array(0x2066...0x2069) + [0xFEFF]
        for value in refused {
            let scalar = Unicode.Scalar(value)!
            for name in ["A" + String(scalar) + "B", String(scalar), "Alice" + String(scalar)] {
                XCTAssertFalse(DisplayName.isValid(name), String(format: "U+%04X", value))
                XCTAssertThrowsError(try Identity.create(store: MemorySecretStore(), name: name)) {
                    XCTAssertEqual(($0 as? ItsMeError)?.kind, .invalidArgument)
                }
            }
        }
        // Neighbours of the refused ranges, the joiners, and names in other scripts.
        let allowed = [
            "Zoë", "محمد", "नमस्ते", "Zoe\u{0301}", "\u{A0}Ann", "Ann\u{2065}", "a\u{200A}b", "a\u{200E}b", "a\u{2029}b",
            "a\u{206A}b", "a\u{FEFE}b", "a\u{FFFD}b",
            "می\u{200C}خواهم",  // Persian, ZERO WIDTH NON-JOINER
            "क\u{94D}\u{200D}ष",  // Devanagari, ZERO WIDTH JOINER
            "\u{1F469}\u{200D}\u{1F4BB}",  // woman technologist: an emoji ZWJ sequence
            "\u{1F3F3}\u{FE0F}\u{200D}\u{1F308}",  // rainbow flag
            String(repeating: "x", count: 128), String(repeating: "é", count: 64),
        ]
        for name in allowed {
            XCTAssertTrue(DisplayName.isValid(name), name)
            let identity = try Identity.create(store: MemorySecretStore(), name: name)
            XCTAssertEqual(identity.name, name)
            XCTAssertEqual(Array(identity.name.utf8), Array(name.utf8))
        }
        XCTAssertFalse(DisplayName.isValid(String(repeating: "é", count: 64) + "x"))  // 129 bytes
    }

    func testCorruptRecordsAreRefused() throws {
        let store = MemorySecretStore()
        _ = try Identity.create(store: store, name: "Alice")
        let good = try XCTUnwrap(try stored(store, Identity.itemName))
        var wrongVersion = good
        wrongVersion[0] = 2
        var badName = good
        badName[badName.count - 1] = 0xFF
        for bad in [[], Array(good.dropLast()), good + [0], wrongVersion, badName] {
            try store.put(Identity.itemName, bytes: bad)
            XCTAssertThrowsError(try Identity.load(store: store)) {
                XCTAssertEqual(($0 as? ItsMeError)?.kind, .corruptData, "\(bad.count) bytes")
            }
        }
    }

    func testDescriptionShowsNoSecret() throws {
        let store = MemorySecretStore()
        let identity = try Identity.create(store: store, name: "Alice")
        let record = try XCTUnwrap(try stored(store, Identity.itemName))
        let text = String(describing: identity) + "\(identity)" + String(reflecting: identity)
        XCTAssertTrue(text.contains(identity.fingerprint))
        let seedHex = Hex.encodeUpper(record[1..<33])
        let keyHex = Hex.encodeUpper(record[33..<65])
        for secret in [seedHex, keyHex, seedHex.lowercased(), keyHex.lowercased()] {
            XCTAssertFalse(text.contains(secret))
        }
        XCTAssertFalse(text.contains("Alice"))
    }

    func testFileStoreRoundTripPermissionsAndAtomicity() throws {
        let store = try FileSecretStore(directory: directory + "/nested/store")
        let identity = try Identity.create(store: store, name: "Bob")
        let reopened = try FileSecretStore(directory: directory + "/nested/store/")
        XCTAssertEqual(try Identity.load(store: reopened).fingerprint, identity.fingerprint)
        let fm = FileManager.default
        let dirMode = try fm.attributesOfItem(atPath: store.directory)[.posixPermissions] as? Int
        let fileMode = try fm.attributesOfItem(atPath: store.directory + "/" + Identity.itemName)[.posixPermissions] as? Int
        XCTAssertEqual(dirMode, 0o700)
        XCTAssertEqual(fileMode, 0o600)
        // No temporary files left behind.
        XCTAssertEqual(try fm.contentsOfDirectory(atPath: store.directory), [Identity.itemName])
        XCTAssertTrue(try store.remove(Identity.itemName))
        XCTAssertFalse(try store.remove(Identity.itemName))
        XCTAssertNil(try stored(store, Identity.itemName))
    }

    func testFileStoreRefusesBadNamesAndNonDirectories() throws {
        let store = try FileSecretStore(directory: directory)
        for bad in ["", ".hidden", "../escape", "a/b", "UPPER", String(repeating: "a", count: 129)] {
            XCTAssertThrowsError(try store.put(bad, bytes: [1], accessibility: .whenUnlockedThisDeviceOnly)) {
                XCTAssertEqual(($0 as? ItsMeError)?.kind, .invalidArgument, bad)
            }
        }
        FileManager.default.createFile(atPath: directory + "/plain", contents: Data([1]))
        XCTAssertThrowsError(try FileSecretStore(directory: directory + "/plain")) {
            XCTAssertEqual(($0 as? ItsMeError)?.kind, .secretStore)
        }
        try FileManager.default.createSymbolicLink(atPath: directory + "/link", withDestinationPath: directory + "/plain")
        XCTAssertThrowsError(try stored(store, "link")) { XCTAssertEqual(($0 as? ItsMeError)?.kind, .secretStore) }
    }
}

private extension Array where Element == UInt8 {
    var constantTimeEqualsZero: Bool { ConstantTime.equal(self, [UInt8](repeating: 0, count: count)) }
}

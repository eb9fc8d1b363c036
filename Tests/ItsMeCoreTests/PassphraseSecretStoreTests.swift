import Foundation
import ItsMeKit
import ItsMePrimitives
import XCTest

/// The passphrase-wrapped file store: it opens the stores the command-line
/// client wrapped before the wrap moved into the library (their wrap file
/// and items are built here exactly as that client built them), and the
/// stores it wraps open with that client's reading too.
final class PassphraseSecretStoreTests: XCTestCase {
    private var root: String!
    private var directory: String { root + "/secrets" }
    private var wrapPath: String { root + "/secrets.wrap" }

    private let passphrase = Array("correct horse battery staple".utf8)
    private let wrong = Array("incorrect horse battery staple".utf8)
    /// Parameters far below the default, for the tests that only need a
    /// wrap file (the reader honours what the file names, within the window).
    private let cheap = Argon2id.Parameters(opsLimit: 1, memLimit: 8 * 1024)

    override func setUpWithError() throws {
        try Sodium.initialize()
        root = NSTemporaryDirectory() + "itsme-wrap-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: root)
    }

    // MARK: The command-line client's format, as its code wrote it

    /// The command-line client's `PassphraseSecretStore.WrapFile`, verbatim.
    struct LegacyWrapFile: Codable {
        var version: Int
        var kdf: String
        var opsLimit: UInt64
        var memLimit: UInt64
        var salt: String
        var check: String
    }

    private static let legacyItemLabel = Array("itsme-cli-secret-v1".utf8)
    private static let legacyCheckLabel = Array("itsme-cli-passphrase-check-v1".utf8)

    /// What the client's `create` did: a salt, the key, an AEAD of nothing
    /// under the check label, and the JSON written with `JSONEncoder`.
    private func legacyCreate(
        _ passphrase: [UInt8], parameters: Argon2id.Parameters, encoder: JSONEncoder = JSONEncoder()
    ) throws -> SecretBytes {
        var random = SystemRandom()
        let salt = random.bytes(Argon2id.saltCount)
        let key = try Argon2id.deriveKey(password: passphrase, salt: salt, parameters: parameters)
        let nonce = random.bytes(AEAD.nonceCount)
        let check = try AEAD.seal(
            .chacha20Poly1305, key: key, nonce: nonce, plaintext: [UInt8](), aad: Self.legacyCheckLabel)
        let file = LegacyWrapFile(
            version: 1, kdf: "argon2id13", opsLimit: parameters.opsLimit, memLimit: parameters.memLimit,
            salt: Hex.encodeUpper(salt).lowercased(), check: Hex.encodeUpper(nonce + check).lowercased())
        try encoder.encode(file).write(to: URL(fileURLWithPath: wrapPath))
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return key
    }

    /// What the client's `put` did: version 1, a nonce, the AEAD with the
    /// item label, a zero byte and the name as associated data.
    private func legacyPut(_ name: String, _ value: [UInt8], key: borrowing SecretBytes) throws {
        var random = SystemRandom()
        let nonce = random.bytes(AEAD.nonceCount)
        let sealed = try AEAD.seal(
            .chacha20Poly1305, key: key, nonce: nonce, plaintext: value, aad: Self.legacyItemLabel + [0] + Array(name.utf8))
        try Data([1] + nonce + sealed).write(to: URL(fileURLWithPath: directory + "/" + name))
    }

    /// What the client's `open` and `get` did, for a wrap file and an item
    /// the library wrote.
    private func legacyRead(_ name: String, passphrase: [UInt8]) throws -> [UInt8] {
        let file = try JSONDecoder().decode(LegacyWrapFile.self, from: Data(contentsOf: URL(fileURLWithPath: wrapPath)))
        XCTAssertEqual(file.version, 1)
        XCTAssertEqual(file.kdf, "argon2id13")
        let salt = try XCTUnwrap(Hex.decode(file.salt.uppercased()))
        let check = try XCTUnwrap(Hex.decode(file.check.uppercased()))
        let key = try Argon2id.deriveKey(
            password: passphrase, salt: salt, parameters: Argon2id.Parameters(opsLimit: file.opsLimit, memLimit: file.memLimit))
        _ = try AEAD.open(
            .chacha20Poly1305, key: key, nonce: Array(check.prefix(AEAD.nonceCount)),
            ciphertext: Array(check.dropFirst(AEAD.nonceCount)), aad: Self.legacyCheckLabel)
        let raw = [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name)))
        XCTAssertEqual(raw.first, 1)
        let plain = try AEAD.open(
            .chacha20Poly1305, key: key, nonce: Array(raw[1...AEAD.nonceCount]),
            ciphertext: Array(raw[(1 + AEAD.nonceCount)...]), aad: Self.legacyItemLabel + [0] + Array(name.utf8))
        return plain.unsafeExportedArray()
    }

    // MARK: Tests

    func testOpensAStoreTheCommandLineClientWrapped() throws {
        // As the client made it: the moderate level, its JSON, its items.
        let key = try legacyCreate(passphrase, parameters: .moderate)
        try legacyPut("itsme.identity", Array("the identity".utf8), key: key)
        try legacyPut("itsme.pin", [1, 2, 3], key: key)

        XCTAssertTrue(try PassphraseSecretStore.isWrapped(directory: directory))
        let store = try PassphraseSecretStore.open(directory: directory, passphrase: passphrase)
        XCTAssertEqual(store.wrapPath, wrapPath)
        XCTAssertEqual(try stored(store, "itsme.identity"), Array("the identity".utf8))
        XCTAssertEqual(try stored(store, "itsme.pin"), [1, 2, 3])
        XCTAssertNil(try stored(store, "itsme.limiter.pin"))

        // Items it writes now read back, and with the client's code too.
        try store.put("itsme.limiter.pin", bytes: [9, 9])
        XCTAssertEqual(try stored(store, "itsme.limiter.pin"), [9, 9])
        XCTAssertEqual(try legacyRead("itsme.limiter.pin", passphrase: passphrase), [9, 9])
    }

    func testWrongPassphraseAndOtherSpellingsOfTheJSON() throws {
        // Sorted keys, line breaks and indentation: still the same file.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let key = try legacyCreate(passphrase, parameters: cheap, encoder: encoder)
        try legacyPut("itsme.identity", [42], key: key)

        let store = try PassphraseSecretStore.open(directory: directory, passphrase: passphrase)
        XCTAssertEqual(try stored(store, "itsme.identity"), [42])

        do {
            _ = try PassphraseSecretStore.open(directory: directory, passphrase: wrong)
            XCTFail("a wrong passphrase opened the store")
        } catch let error as ItsMeError {
            XCTAssertEqual(error.kind, .authenticationFailed)
            XCTAssertEqual(error.message, "wrong passphrase")
        }
        XCTAssertEqual(errorKind { _ = try PassphraseSecretStore.open(directory: self.directory, passphrase: [UInt8]()) }, .authenticationFailed)
    }

    func testCreateReopenAndTheClientsReading() throws {
        XCTAssertFalse(try PassphraseSecretStore.isWrapped(directory: directory))
        let created = try PassphraseSecretStore.create(directory: directory, passphrase: passphrase)
        XCTAssertTrue(try PassphraseSecretStore.isWrapped(directory: directory))
        try created.put("itsme.identity", bytes: Array("Zebulon Quince".utf8))

        // The wrap file: the client's JSON, at the moderate level, mode 0600.
        let attributes = try FileManager.default.attributesOfItem(atPath: wrapPath)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        let file = try JSONDecoder().decode(LegacyWrapFile.self, from: Data(contentsOf: URL(fileURLWithPath: wrapPath)))
        XCTAssertEqual(file.opsLimit, Argon2id.Parameters.moderate.opsLimit)
        XCTAssertEqual(file.memLimit, Argon2id.Parameters.moderate.memLimit)
        XCTAssertEqual(try legacyRead("itsme.identity", passphrase: passphrase), Array("Zebulon Quince".utf8))

        // No name in plain text on disk.
        let raw = [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/itsme.identity")))
        XCTAssertNil(raw.firstRange(of: Array("Zebulon".utf8)))

        let reopened = try PassphraseSecretStore.open(directory: directory + "/", passphrase: passphrase)
        XCTAssertEqual(try stored(reopened, "itsme.identity"), Array("Zebulon Quince".utf8))
        XCTAssertTrue(try reopened.remove("itsme.identity"))
        XCTAssertNil(try stored(reopened, "itsme.identity"))

        // A second wrap never replaces the first.
        XCTAssertEqual(errorKind { _ = try PassphraseSecretStore.create(directory: self.directory, passphrase: self.wrong) }, .alreadyExists)
    }

    func testItemsAreBoundToTheirNames() throws {
        let key = try legacyCreate(passphrase, parameters: cheap)
        try legacyPut("itsme.pin", [1], key: key)
        let store = try PassphraseSecretStore.open(directory: directory, passphrase: passphrase)
        // Moved under another name, an item does not open.
        try FileManager.default.copyItem(atPath: directory + "/itsme.pin", toPath: directory + "/itsme.identity")
        XCTAssertEqual(errorKind { _ = try store.get("itsme.identity") }, .authenticationFailed)
        // A plain item in a wrapped store, or a flipped byte, is refused.
        try Data([2, 3, 4]).write(to: URL(fileURLWithPath: directory + "/itsme.device-key"))
        XCTAssertEqual(errorKind { _ = try store.get("itsme.device-key") }, .corruptData)
        var sealed = [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/itsme.pin")))
        sealed[sealed.count - 1] ^= 1
        try Data(sealed).write(to: URL(fileURLWithPath: directory + "/itsme.pin"))
        XCTAssertEqual(errorKind { _ = try store.get("itsme.pin") }, .authenticationFailed)
    }

    func testRefusedBeforeAnyHashing() throws {
        // Nothing at the wrap path: not wrapped.
        XCTAssertEqual(errorKind { _ = try PassphraseSecretStore.open(directory: self.directory, passphrase: self.passphrase) }, .notFound)

        // Damaged or unknown wrap files (the Argon2id memory asked for is
        // huge where it matters: refused before it is allocated).
        let salt = String(repeating: "ab", count: 16), check = String(repeating: "cd", count: 28)
        let damaged = [
            "{}", "", "[]", "not json",
            #"{"version":2,"kdf":"argon2id13","opsLimit":3,"memLimit":268435456,"salt":"\#(salt)","check":"\#(check)"}"#,
            #"{"version":1,"kdf":"scrypt","opsLimit":3,"memLimit":268435456,"salt":"\#(salt)","check":"\#(check)"}"#,
            #"{"version":1,"kdf":"argon2id13","opsLimit":3,"memLimit":268435456,"salt":"abcd","check":"\#(check)"}"#,
            #"{"version":1,"kdf":"argon2id13","opsLimit":3,"memLimit":268435456,"salt":"\#(salt)","check":"cd"}"#,
            #"{"version":1,"kdf":"argon2id13","opsLimit":3,"memLimit":268435456,"salt":"\#(salt)"}"#,
            #"{"version":1,"version":1,"kdf":"argon2id13","opsLimit":3,"memLimit":268435456,"salt":"\#(salt)","check":"\#(check)"}"#,
            #"{"version":1,"kdf":"argon2id13","opsLimit":-3,"memLimit":268435456,"salt":"\#(salt)","check":"\#(check)"}"#,
            #"{"version":1,"kdf":"argon2id13","opsLimit":3,"memLimit":268435456,"salt":"\#(salt)","check":"\#(check)"} x"#,
            #"{"version":1,"kdf":"argon2id13","opsLimit":3,"memLimit":99999999999999999999,"salt":"\#(salt)","check":"\#(check)"}"#,
            #"{"version":1,"kdf":"argon2id13","opsLimit":3,"memLimit":1099511627776,"salt":"\#(salt)","check":"\#(check)"}"#,
            #"{"version":1,"kdf":"argon2id13","opsLimit":100,"memLimit":268435456,"salt":"\#(salt)","check":"\#(check)"}"#,
        ]
        for text in damaged {
            try Data(text.utf8).write(to: URL(fileURLWithPath: wrapPath))
            XCTAssertTrue(try PassphraseSecretStore.isWrapped(directory: directory), text)
            XCTAssertEqual(
                errorKind { _ = try PassphraseSecretStore.open(directory: self.directory, passphrase: self.passphrase) },
                .corruptData, text)
        }

        // Not a regular file: refused, never followed nor waited on.
        try FileManager.default.removeItem(atPath: wrapPath)
        XCTAssertEqual(mkfifo(wrapPath, 0o600), 0)
        XCTAssertEqual(errorKind { _ = try PassphraseSecretStore.open(directory: self.directory, passphrase: self.passphrase) }, .secretStore)
        XCTAssertEqual(errorKind { _ = try PassphraseSecretStore.create(directory: self.directory, passphrase: self.passphrase) }, .alreadyExists)
        try FileManager.default.removeItem(atPath: wrapPath)
        try FileManager.default.createSymbolicLink(atPath: wrapPath, withDestinationPath: "/dev/zero")
        XCTAssertTrue(try PassphraseSecretStore.isWrapped(directory: directory))
        XCTAssertEqual(errorKind { _ = try PassphraseSecretStore.open(directory: self.directory, passphrase: self.passphrase) }, .secretStore)
        try FileManager.default.removeItem(atPath: wrapPath)

        // Arguments.
        for bad in ["", "/", ".", "..", "a/.", "a/..", "a\u{0}b"] {
            XCTAssertEqual(errorKind { _ = try PassphraseSecretStore.isWrapped(directory: bad) }, .invalidArgument, bad)
            XCTAssertEqual(errorKind { _ = try PassphraseSecretStore.create(directory: bad, passphrase: self.passphrase) }, .invalidArgument, bad)
        }
        XCTAssertEqual(errorKind { _ = try PassphraseSecretStore.create(directory: self.directory, passphrase: [UInt8]()) }, .invalidArgument)
        let long = [UInt8](repeating: 0x61, count: PassphraseSecretStore.maxPassphraseCount + 1)
        XCTAssertEqual(errorKind { _ = try PassphraseSecretStore.create(directory: self.directory, passphrase: long) }, .invalidArgument)
        XCTAssertEqual(errorKind { _ = try PassphraseSecretStore.open(directory: self.directory, passphrase: long) }, .invalidArgument)

        // Only a new, empty store is wrapped: plain items already there
        // would stay readable by anyone who copies the files.
        let plain = try FileSecretStore(directory: directory)
        try plain.put("itsme.identity", bytes: [1])
        XCTAssertEqual(errorKind { _ = try PassphraseSecretStore.create(directory: self.directory, passphrase: self.passphrase) }, .alreadyExists)
        XCTAssertFalse(try PassphraseSecretStore.isWrapped(directory: directory))
    }
}

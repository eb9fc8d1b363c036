import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

final class ProfileRecordTests: XCTestCase {
    private var directory: String!
    private let t0: Int64 = 1_800_000_000
    private var random = DeterministicRandom(seed: SHA256.hash(Array("profile-tests".utf8)))

    override func setUpWithError() throws {
        try Sodium.initialize()
        directory = NSTemporaryDirectory() + "itsme-profile-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: directory) }

    private let photo = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 31) }

    private func make(_ owner: [UInt8], name: String = "Alice", photo: [UInt8]? = nil, filename: String = "alice.jpg") throws
        -> ProfileRecord
    {
        try ProfileRecord.create(ownerKey: owner, name: name, photo: photo ?? self.photo, photoFilename: filename, random: &random)
    }

    private func open(_ record: [UInt8], _ made: ProfileRecord, owner: [UInt8]) throws -> ProfileRecord {
        try ProfileRecord.open(record: record, reference: try made.reference(), ownerKey: owner)
    }

    private func failure(_ body: () throws -> Void) -> (ItsMeError.Kind, String)? {
        do { try body() } catch let e as ItsMeError { return (e.kind, e.message) } catch { return (.internal, "\(error)") }
        return nil
    }

    func testRoundTripAndLayout() throws {
        let (a, _) = try exchangedPair(in: directory, label: "profile", now: t0)
        let made = try make(a.identity.publicKey)
        XCTAssertEqual(made.record.count, ProfileRecord.overhead + 5 + photo.count + 9)
        XCTAssertEqual(ProfileRecord.overhead, 177)
        XCTAssertEqual(made.record[0], 1)
        XCTAssertEqual(made.recordID, Array(made.record.suffix(32).prefix(16)))
        XCTAssertEqual(made.recordName.count, 32)
        XCTAssertFalse(made.description.contains("Alice"))
        // The plaintext appears nowhere in the record.
        XCTAssertNil(made.record.firstRange(of: Array("Alice".utf8)))
        XCTAssertNil(made.record.firstRange(of: Array(photo.prefix(64))))
        let opened = try open(made.record, made, owner: a.identity.publicKey)
        XCTAssertEqual(opened.name, "Alice")
        XCTAssertEqual(opened.photo, photo)
        XCTAssertEqual(opened.photoFilename, "alice.jpg")
        XCTAssertEqual(opened.recordID, made.recordID)
        XCTAssertEqual(try opened.reference().unsafeExportedArray(), try made.reference().unsafeExportedArray())
        // Name only, photo only.
        let nameOnly = try make(a.identity.publicKey, photo: [], filename: "")
        XCTAssertEqual(try open(nameOnly.record, nameOnly, owner: a.identity.publicKey).photo, [])
        let photoOnly = try make(a.identity.publicKey, name: "", filename: "")
        let o = try open(photoOnly.record, photoOnly, owner: a.identity.publicKey)
        XCTAssertEqual(o.name, "")
        XCTAssertEqual(o.photo, photo)
        // Every record is new: new key, nonces and ID for the same values.
        let again = try make(a.identity.publicKey)
        XCTAssertNotEqual(again.recordID, made.recordID)
        XCTAssertNotEqual(try again.reference().unsafeExportedArray(), try made.reference().unsafeExportedArray())
    }

    func testEveryTamperedByteIsRefusedBeforeDecrypting() throws {
        let owner = Array(repeating: UInt8(7), count: 32)
        let made = try make(owner, photo: Array(photo.prefix(40)), filename: "a.png")
        // Every single byte of the record, flipped, is refused as an
        // authentication failure or a malformed record, never opened.
        for i in 0..<made.record.count {
            var r = made.record
            r[i] ^= 0x01
            let f = failure { _ = try self.open(r, made, owner: owner) }
            XCTAssertNotNil(f, "byte \(i) changed and the record opened")
            XCTAssertTrue([.authenticationFailed, .malformedMessage].contains(f!.0), "byte \(i): \(f!)")
        }
        // Named regions give named errors.
        let nameCiphertext = 1 + 12 + 4
        var r = made.record
        r[nameCiphertext] ^= 0x80
        XCTAssertEqual(failure { _ = try self.open(r, made, owner: owner) }?.1.contains("name field fails its MAC"), true)
        r = made.record
        let photoMAC = 1 + (12 + 4 + 5 + 32) + (12 + 4 + 40)
        r[photoMAC] ^= 0x80
        XCTAssertEqual(failure { _ = try self.open(r, made, owner: owner) }?.1.contains("photo field fails its MAC"), true)
        r = made.record
        r[r.count - 1] ^= 0x80
        let tamperedMAC = failure { _ = try self.open(r, made, owner: owner) }
        XCTAssertEqual(tamperedMAC?.0, .authenticationFailed)
        XCTAssertEqual(tamperedMAC?.1.contains("record's MAC does not verify"), true)
    }

    func testWrongIDKeyOwnerAndSizeAreRefused() throws {
        let owner = Array(repeating: UInt8(7), count: 32), other = Array(repeating: UInt8(8), count: 32)
        let made = try make(owner)
        let second = try make(owner, name: "Alice B")
        // Another record of the same owner, under this reference's ID.
        var reference = try made.reference().unsafeExportedArray()
        let wrongID = failure { _ = try ProfileRecord.open(record: second.record, reference: reference, ownerKey: owner) }
        XCTAssertEqual(wrongID?.0, .authenticationFailed)
        // The right record, but the reference names another ID.
        reference[0] ^= 1
        let f = failure { _ = try ProfileRecord.open(record: made.record, reference: reference, ownerKey: owner) }
        XCTAssertEqual(f?.0, .authenticationFailed)
        XCTAssertEqual(f?.1.contains("not the one the reference names"), true)
        // A wrong record key, another owner.
        reference = try made.reference().unsafeExportedArray()
        reference[31] ^= 1
        XCTAssertEqual(failure { _ = try ProfileRecord.open(record: made.record, reference: reference, ownerKey: owner) }?.0, .authenticationFailed)
        XCTAssertEqual(failure { _ = try self.open(made.record, made, owner: other) }?.0, .authenticationFailed)
        // Oversize: refused by its size alone, before any parsing.
        let big = failure { _ = try self.open([1] + [UInt8](repeating: 0, count: ProfileRecord.maxRecordBytes), made, owner: owner) }
        XCTAssertEqual(big?.0, .malformedMessage)
        XCTAssertEqual(big?.1.contains("larger than the limit"), true)
        // Truncated, extended, another version, empty.
        for bad in [Array(made.record.dropLast()), made.record + [0], [2] + made.record.dropFirst(), []] {
            XCTAssertEqual(failure { _ = try self.open(bad, made, owner: owner) }?.0, .malformedMessage)
        }
        // A reference or key of the wrong size.
        XCTAssertEqual(
            failure { _ = try ProfileRecord.open(record: made.record, reference: [UInt8](repeating: 0, count: 16), ownerKey: owner) }?.0,
            .invalidArgument)
        XCTAssertEqual(
            failure { _ = try ProfileRecord.open(record: made.record, reference: try made.reference(), ownerKey: [1]) }?.0, .invalidArgument)
    }

    func testTheValueRules() throws {
        let owner = Array(repeating: UInt8(7), count: 32)
        let biggest = ProfileRecord.maxRecordBytes - ProfileRecord.overhead - 5
        XCTAssertEqual(try make(owner, photo: [UInt8](repeating: 1, count: biggest), filename: "").record.count, ProfileRecord.maxRecordBytes)
        for (name, photo, filename) in [
            ("", [UInt8](), ""),  // nothing
            ("A\u{7}", [1], ""),  // control character
            (String(repeating: "n", count: 129), [1], ""),
            ("A", [], "a.jpg"),  // filename without a photo
            ("A", [1], "a/b.jpg"), ("A", [1], "a\\b"), ("A", [1], ".."), ("A", [1], "."), ("A", [1], "a\nb"),
            ("A", [1], String(repeating: "f", count: 256)),
            ("Alice", [UInt8](repeating: 1, count: biggest + 1), ""),
        ] {
            XCTAssertEqual(errorKind { _ = try self.make(owner, name: name, photo: photo, filename: filename) }, .invalidArgument, "\(name) \(filename)")
        }
        // A record that breaks the rules but carries good MACs (its owner
        // made it) is refused when opened, as malformed.
        var r = DeterministicRandom(seed: [UInt8](repeating: 3, count: 32))
        let key = try SecretBytes(randomCount: 16, using: &r)
        let nonces = (0..<3).map { _ in r.bytes(12) }
        let bad = try ProfileRecord.seal(ownerKey: owner, name: "A", photo: [], photoFilename: "x.jpg", recordKey: key, nonces: nonces)
        let f = failure { _ = try ProfileRecord.open(record: bad.record, reference: try bad.reference(), ownerKey: owner) }
        XCTAssertEqual(f?.0, .malformedMessage)
        XCTAssertEqual(f?.1.contains("needs a photo"), true)
    }

    func testSharedInOnlineVerifyAndAppliedToTheContact() throws {
        let (a, b) = try exchangedPair(in: directory, label: "profile-ov", now: t0)
        let profile = try make(a.identity.publicKey, name: "Alice Smith")
        var ra = DeterministicRandom(seed: [1] + [UInt8](repeating: 0, count: 31))
        var rb = DeterministicRandom(seed: [2] + [UInt8](repeating: 0, count: 31))
        let w = VoiceProtocol.window(t0 + 100)
        let va = try OnlineVerify(store: a.store, contactID: a.contactID, window: w, now: t0 + 100, random: &ra)
        let vb = try OnlineVerify(store: b.store, contactID: b.contactID, window: w, now: t0 + 100, random: &rb)
        try va.shareProfile(reference: try profile.reference())
        XCTAssertEqual(errorKind { try va.shareProfile(reference: [UInt8](repeating: 0, count: 31)) }, .invalidArgument)
        var proofSizes: [Int] = []
        var moved = true
        while moved {
            moved = false
            for (from, to) in [(va, vb), (vb, va)] {
                if let m = from.takeOutgoing() {
                    if m[1] == 3 { proofSizes.append(m.count) }
                    try to.receive(m, now: t0 + 101)
                    moved = true
                }
            }
        }
        XCTAssertEqual(proofSizes.sorted(), [82, 114])
        XCTAssertEqual(errorKind { try va.shareProfile(reference: try profile.reference()) }, .invalidState, "too late: the PROOF is out")
        XCTAssertEqual(errorKind { _ = try vb.peerProfileReference() }, .invalidState, "not before the SAS is confirmed")
        try va.confirm(now: t0 + 102)
        try vb.confirm(now: t0 + 102)
        XCTAssertEqual(errorKind { _ = try va.peerProfileReference() }, .notFound, "Bob shared none")
        let reference = try vb.peerProfileReference()
        // Bob fetches the record (here: the bytes as published) and opens it
        // with Alice's key as his contact store knows it.
        let alice = try b.store.contact(id: b.contactID)
        let opened = try ProfileRecord.open(record: profile.record, reference: reference, ownerKey: alice.pid)
        XCTAssertEqual(opened.name, "Alice Smith")
        try b.store.applyProfile(id: b.contactID, opened)
        XCTAssertEqual(try b.store.contact(id: b.contactID).name, "Alice Smith")
        XCTAssertEqual(try b.store.photo(id: b.contactID).photo, photo)
        XCTAssertEqual(try b.store.photo(id: b.contactID).filename, "alice.jpg")
        // A profile without a photo keeps the stored photo.
        let renamed = try make(a.identity.publicKey, name: "Alice S.", photo: [], filename: "")
        try b.store.applyProfile(id: b.contactID, try ProfileRecord.open(record: renamed.record, reference: try renamed.reference(), ownerKey: alice.pid))
        XCTAssertEqual(try b.store.contact(id: b.contactID).name, "Alice S.")
        XCTAssertEqual(try b.store.photo(id: b.contactID).photo, photo)
        XCTAssertEqual(errorKind { try b.store.applyProfile(id: 999, opened) }, .notFound)
    }

    func testAPROOFOfAnotherSizeIsMalformed() throws {
        let (a, b) = try exchangedPair(in: directory, label: "profile-ov-size", now: t0)
        var ra = DeterministicRandom(seed: [1] + [UInt8](repeating: 0, count: 31))
        var rb = DeterministicRandom(seed: [2] + [UInt8](repeating: 0, count: 31))
        let w = VoiceProtocol.window(t0 + 100)
        let va = try OnlineVerify(store: a.store, contactID: a.contactID, window: w, now: t0 + 100, random: &ra)
        let vb = try OnlineVerify(store: b.store, contactID: b.contactID, window: w, now: t0 + 100, random: &rb)
        let (i, r) = va.isInitiator ? (va, vb) : (vb, va)
        try r.receive(i.takeOutgoing()!, now: t0 + 101)  // COMMIT
        try i.receive(r.takeOutgoing()!, now: t0 + 101)  // KEY_R
        _ = i.takeOutgoing()  // KEY_I
        let proof = i.takeOutgoing()!
        XCTAssertEqual(proof.count, 82)
        XCTAssertEqual(errorKind { try r.receive(proof + [0], now: t0 + 101) }, .malformedMessage)
    }
}

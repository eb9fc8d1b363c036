import CItsMe
import Foundation
import ItsMeKit
import ItsMePrimitives
import XCTest

@testable import ItsMeFFI

/// The device transfer through the exported C functions: the password
/// export and its import, the live transfer, and the install.
final class TransferABITests: XCTestCase {
    private let t0: Int64 = 1_800_000_000
    private var directory = ""
    private var cleanups: [() -> Void] = []

    override func setUpWithError() throws {
        XCTAssertEqual(ffiInit(), ITSME_OK)
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("itsme-transfer-abi-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        for cleanup in cleanups.reversed() { cleanup() }
        cleanups = []
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: Constants

    func testConstantsAgreeWithTheCore() {
        XCTAssertEqual(DeviceTransfer.State.awaitingPeer.rawValue, UInt32(ITSME_TRANSFER_STATE_AWAITING_PEER))
        XCTAssertEqual(DeviceTransfer.State.compareSAS.rawValue, UInt32(ITSME_TRANSFER_STATE_COMPARE_SAS))
        XCTAssertEqual(DeviceTransfer.State.awaitingIdentity.rawValue, UInt32(ITSME_TRANSFER_STATE_AWAITING_IDENTITY))
        XCTAssertEqual(DeviceTransfer.State.done.rawValue, UInt32(ITSME_TRANSFER_STATE_DONE))
        XCTAssertEqual(DeviceTransfer.State.rejected.rawValue, UInt32(ITSME_TRANSFER_STATE_REJECTED))
        XCTAssertEqual(DeviceTransfer.State.failed.rawValue, UInt32(ITSME_TRANSFER_STATE_FAILED))
        XCTAssertEqual(UInt32(IdentityExport.PasswordKind.generated.rawValue), UInt32(ITSME_EXPORT_PASSWORD_GENERATED))
        XCTAssertEqual(UInt32(IdentityExport.PasswordKind.chosen.rawValue), UInt32(ITSME_EXPORT_PASSWORD_CHOSEN))
        XCTAssertEqual(Int(ITSME_EXPORT_PASSWORD_SIZE), "ABCD-EFGH-JKMNP".utf8.count + 1)
        XCTAssertEqual(Int(ITSME_EXPORT_CHOSEN_PASSWORD_MIN), IdentityExport.minimumChosenPasswordCount)
        // The buffer sizes hold the largest export and its text.
        let largest = IdentityExport.blobCount(nameByteCount: Int(ITSME_NAME_MAX_BYTES))
        XCTAssertEqual(largest, 144 + Int(ITSME_NAME_MAX_BYTES))
        XCTAssertGreaterThanOrEqual(Int(ITSME_EXPORT_MAX), largest)
        let largestText = IdentityExport.text([UInt8](repeating: 0, count: largest)).utf8.count
        XCTAssertEqual(largestText, 372)
        XCTAssertGreaterThanOrEqual(Int(ITSME_EXPORT_TEXT_SIZE), largestText + 1)
        XCTAssertEqual(Int(ITSME_TRANSFER_OFFER_SIZE), DeviceTransfer.offerPrefix.utf8.count + 66 + 1)
        // The report's layout is part of the ABI.
        XCTAssertEqual(MemoryLayout<itsme_import_report>.size, 56)
        XCTAssertEqual(MemoryLayout<itsme_import_report>.offset(of: \.wrong_identity), 8)
        XCTAssertEqual(MemoryLayout<itsme_import_report>.offset(of: \.other_fingerprint), 9)
        XCTAssertEqual(MemoryLayout<itsme_import_report>.offset(of: \.store_exists), 26)
        XCTAssertEqual(MemoryLayout<itsme_import_report>.offset(of: \.contacts_readable), 32)
        XCTAssertEqual(MemoryLayout<itsme_import_report>.offset(of: \.device_secrets), 48)
    }

    // MARK: The password export

    /// Export, text and back, then the import's limiter: each wrong password
    /// is counted, the fifth locks, a locked attempt is neither checked nor
    /// counted, and after the wait the right password opens the export.
    /// Seven Argon2id runs at 256 MiB: the export, five wrong passwords and
    /// the right one.
    func testExportRoundTripAndThePasswordLimiter() throws {
        let olivia = person("Olivia")
        let password = text { ffiExportGeneratePassword(nil, $0, $1, $2) }
        XCTAssertEqual(password.utf8.count, 15)

        let blob = bytes(Int(ITSME_EXPORT_MAX)) {
            ffiIdentityExport(olivia.identity, "123456", t0, password, UInt32(ITSME_EXPORT_PASSWORD_GENERATED), nil, $0, $1, $2)
        }
        XCTAssertEqual(blob.count, 144 + "Olivia".utf8.count)
        var passes: UInt32 = 0
        var memory: UInt32 = 0
        var kind: UInt32 = 0
        XCTAssertEqual(ffiExportHeader(blob, UInt(blob.count), &passes, &memory, &kind), ITSME_OK)
        XCTAssertEqual([passes, memory, kind], [3, 256 * 1024, UInt32(ITSME_EXPORT_PASSWORD_GENERATED)])
        let exportText = text { ffiExportToText(blob, UInt(blob.count), $0, $1, $2) }
        XCTAssertTrue(exportText.hasPrefix("ITSMEXP1:"))
        let carried = bytes(Int(ITSME_EXPORT_MAX)) { ffiExportFromText("\r\n" + exportText + "\r\n", $0, $1, $2) }
        XCTAssertEqual(carried, blob)

        let device = memoryStore()
        XCTAssertEqual(importStatus(device, t0).failures, 0)
        var wrong = Array(password)
        wrong[0] = wrong[0] == "A" ? "B" : "A"
        var opened: UnsafeMutablePointer<itsme_import>?
        XCTAssertEqual(ffiImportOpen(device, carried, UInt(carried.count), String(wrong), t0, &opened), ITSME_E_AUTHENTICATION_FAILED)
        XCTAssertNil(opened)
        XCTAssertEqual(importStatus(device, t0).failures, 1, "a wrong password is counted")
        XCTAssertEqual(importStatus(device, t0).wait, 0)
        let message = text { ffiSecretStoreLastError(device, $0, $1, $2) }
        XCTAssertTrue(message.contains("wrong export password"), message)
        XCTAssertFalse(message.contains(password) || message.contains(String(wrong)), "no password in the message")
        for _ in 2...5 {
            XCTAssertEqual(ffiImportOpen(device, carried, UInt(carried.count), String(wrong), t0, &opened), ITSME_E_AUTHENTICATION_FAILED)
        }
        XCTAssertEqual(importStatus(device, t0).failures, 5)
        XCTAssertEqual(importStatus(device, t0).wait, 300)
        // Locked: even the right password is refused, unchecked and uncounted.
        XCTAssertEqual(ffiImportOpen(device, carried, UInt(carried.count), password, t0 + 10, &opened), ITSME_E_LOCKED)
        XCTAssertNil(opened)
        XCTAssertEqual(importStatus(device, t0 + 10).failures, 5)
        XCTAssertEqual(importStatus(device, t0 + 10).wait, 290)
        // The PIN's limiter is another one: the identity's store is untouched.
        var pinFailures: UInt32 = 9
        var pinWait: UInt64 = 9
        XCTAssertEqual(ffiPinStatus(olivia.identity, t0, &pinFailures, &pinWait), ITSME_OK)
        XCTAssertEqual(pinFailures, 0)

        // After the wait, the password typed in lowercase without dashes.
        let typed = password.lowercased().replacingOccurrences(of: "-", with: "")
        XCTAssertEqual(ffiImportOpen(device, carried, UInt(carried.count), typed, t0 + 300, &opened), ITSME_OK)
        defer { ffiImportFree(opened) }
        XCTAssertEqual(importStatus(device, t0 + 300).failures, 0, "a success clears the count")
        XCTAssertEqual(text { ffiImportFingerprint(opened, $0, $1, $2) }, fingerprint(olivia.identity))
        XCTAssertEqual(text { ffiImportName(opened, $0, $1, $2) }, "Olivia")

        var report = itsme_import_report()
        report.size = MemoryLayout<itsme_import_report>.size
        XCTAssertEqual(ffiImportCheck(opened, device, nil, &report), ITSME_OK)
        XCTAssertFalse(report.wrong_identity)
        XCTAssertEqual(otherFingerprint(report), "")
        XCTAssertFalse(report.store_exists)
        var installed: UnsafeMutablePointer<itsme_identity>?
        XCTAssertEqual(ffiImportInstall(opened, device, nil, 0, &installed), ITSME_OK)
        defer { ffiIdentityFree(installed) }
        XCTAssertEqual(fingerprint(installed), fingerprint(olivia.identity))
        XCTAssertEqual(publicKey(installed), publicKey(olivia.identity))
        XCTAssertEqual(text { ffiIdentityName(installed, $0, $1, $2) }, "Olivia")
        var loaded: UnsafeMutablePointer<itsme_identity>?
        XCTAssertEqual(ffiIdentityLoad(device, &loaded), ITSME_OK)
        XCTAssertEqual(fingerprint(loaded), fingerprint(olivia.identity))
        ffiIdentityFree(loaded)
    }

    /// The source app's exports are recognised and refused with the reason.
    func testTheSourceFormatsAreRefused() {
        var out = [UInt8](repeating: 0xAA, count: Int(ITSME_EXPORT_MAX))
        var length: UInt = 777
        let v3 = #"{"version":3,"name":"Olivia","privateKey":"q83vEjRWeJCrze8SNFZ4kA==","iv":"AAECAwQFBgcICQoL"}"#
        XCTAssertEqual(ffiExportFromText(v3, &out, UInt(out.count), &length), ITSME_E_INVALID_ARGUMENT)
        XCTAssertEqual(length, 777, "nothing written")
        XCTAssertTrue(out.allSatisfy { $0 == 0xAA })
        let why = text { ffiLastError($0, $1, $2) }
        XCTAssertTrue(why.contains("never accepted") && why.contains("version 3"), why)
        // The source's QR text: a bare base64 sealed box (nonce, tag, JSON).
        let box = String(repeating: "q83vEjRWeJCrze8SNFZ4kAABAgMEBQYHCAkKCw==".dropLast(2) + "AA", count: 3)
        XCTAssertEqual(ffiExportFromText(box, &out, UInt(out.count), &length), ITSME_E_INVALID_ARGUMENT)
        // Too short to be one: not an export at all.
        XCTAssertEqual(ffiExportFromText("q83vEjRWeJCrze8SNFZ4kAABAgMEBQYHCAkKCw==", &out, UInt(out.count), &length), ITSME_E_MALFORMED_MESSAGE)
        XCTAssertEqual(ffiExportFromText("ITSMEXP1:***", &out, UInt(out.count), &length), ITSME_E_MALFORMED_MESSAGE)
        XCTAssertEqual(ffiExportFromText("not an export: hello, world.", &out, UInt(out.count), &length), ITSME_E_MALFORMED_MESSAGE)
        XCTAssertEqual(length, 777)
    }

    // MARK: The live transfer and the install

    /// The new device holds another identity (Nina) and a contact store
    /// with contacts of both: Olivia's import is refused with
    /// ITSME_E_WRONG_IDENTITY, changing nothing, until the host proceeds;
    /// then Nina's contacts are gone, Olivia's kept, every device secret
    /// forgotten, and the device's PIN stays.
    func testWrongIdentityThenAReplacingInstall() throws {
        let olivia = person("Olivia")
        let nina = person("Nina", pin: "222222")
        let path = directory + "/contacts.db"
        let oliviasCopy = directory + "/olivias-copy.db"
        // One file with both identities' contacts. The file, made by Olivia
        // and still empty, is copied; Nina's install adopts it. Olivia adds
        // to the copy (same store id, still hers), and her rows are moved
        // into the file as they are, between commits of Nina's handle.
        var olivias: UnsafeMutablePointer<itsme_store>?
        XCTAssertEqual(ffiStoreOpen(olivia.identity, path, &olivias), ITSME_OK)
        ffiStoreFree(olivias)
        try FileManager.default.copyItem(atPath: path, toPath: oliviasCopy)
        XCTAssertEqual(ffiImportInstall(transferred(nina.identity, pin: "222222"), nina.secrets, path, 0, nil), ITSME_OK)
        var ninas: UnsafeMutablePointer<itsme_store>?
        XCTAssertEqual(ffiStoreOpen(nina.identity, path, &ninas), ITSME_OK)
        XCTAssertEqual(ffiStoreOpen(olivia.identity, oliviasCopy, &olivias), ITSME_OK)
        let ann = add(olivias, "Ann", key: 0x41)
        let ben = add(olivias, "Ben", key: 0x42)
        _ = text(Int(ITSME_DEGRADATION_CODE_SIZE)) { ffiStoreDegradationCode(olivias, ann, nil, $0, $1, $2) }
        ffiStoreFree(olivias)
        do {
            let db = try Database(path: path)
            try db.execute("ATTACH DATABASE '\(oliviasCopy)' AS olivia")
            try db.execute(
                """
                INSERT INTO contacts SELECT * FROM olivia.contacts;
                INSERT INTO device_secrets SELECT * FROM olivia.device_secrets
                """)
        }
        let nickID = add(ninas, "Nick", key: 0x4E)
        _ = add(ninas, "Nora", key: 0x4F)
        _ = text(Int(ITSME_DEGRADATION_CODE_SIZE)) { ffiStoreDegradationCode(ninas, nickID, nil, $0, $1, $2) }
        ffiStoreFree(ninas)

        let imported = transferred(olivia.identity)
        var report = itsme_import_report()
        report.size = MemoryLayout<itsme_import_report>.size
        XCTAssertEqual(ffiImportCheck(imported, nina.secrets, path, &report), ITSME_OK)
        XCTAssertTrue(report.wrong_identity)
        XCTAssertEqual(otherFingerprint(report), fingerprint(nina.identity))
        XCTAssertTrue(report.store_exists)
        XCTAssertEqual(report.contacts_readable, 2)
        XCTAssertEqual(report.contacts_unreadable, 2)
        XCTAssertEqual(report.device_secrets, 2)

        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        var installed: UnsafeMutablePointer<itsme_identity>?
        XCTAssertEqual(ffiImportInstall(imported, nina.secrets, path, 0, &installed), ITSME_E_WRONG_IDENTITY)
        XCTAssertNil(installed)
        let why = text { ffiImportLastError(imported, $0, $1, $2) }
        XCTAssertTrue(why.contains(fingerprint(nina.identity)) && why.contains("2 contacts"), why)
        // Cancelled: Nina and the file are as they were.
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), before)
        var loaded: UnsafeMutablePointer<itsme_identity>?
        XCTAssertEqual(ffiIdentityLoad(nina.secrets, &loaded), ITSME_OK)
        XCTAssertEqual(fingerprint(loaded), fingerprint(nina.identity))
        ffiIdentityFree(loaded)
        XCTAssertEqual(ffiImportInstall(imported, nina.secrets, path, 2, &installed), ITSME_E_INVALID_ARGUMENT, "unknown flag")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), before)

        // Proceed.
        XCTAssertEqual(ffiImportInstall(imported, nina.secrets, path, UInt32(ITSME_IMPORT_REPLACE), &installed), ITSME_OK)
        defer { ffiIdentityFree(installed) }
        XCTAssertEqual(fingerprint(installed), fingerprint(olivia.identity))
        XCTAssertEqual(ffiIdentityLoad(nina.secrets, &loaded), ITSME_OK)
        XCTAssertEqual(fingerprint(loaded), fingerprint(olivia.identity), "the stored identity is replaced")
        ffiIdentityFree(loaded)
        XCTAssertEqual(ffiPinVerify(installed, "222222", t0), ITSME_OK, "the device's PIN stays")

        XCTAssertEqual(ffiImportCheck(imported, nina.secrets, path, &report), ITSME_OK)
        XCTAssertFalse(report.wrong_identity)
        XCTAssertEqual(otherFingerprint(report), "")
        XCTAssertEqual(report.contacts_readable, 2)
        XCTAssertEqual(report.contacts_unreadable, 0, "the unreadable contacts are gone")
        XCTAssertEqual(report.device_secrets, 0, "every device secret is forgotten")

        var store: UnsafeMutablePointer<itsme_store>?
        XCTAssertEqual(ffiStoreOpen(installed, path, &store), ITSME_OK)
        defer { ffiStoreFree(store) }
        XCTAssertEqual(names(store), ["Ann", "Ben"], "the readable contacts are kept")
        var contact: UnsafeMutablePointer<itsme_contact>?
        XCTAssertEqual(ffiStoreGet(store, ben, &contact), ITSME_OK)
        ffiContactFree(contact)
        let nick = [UInt8](repeating: 0x4E, count: 32)
        XCTAssertEqual(ffiStoreGetByKey(store, nick, 32, &contact), ITSME_E_NOT_FOUND)
        var other: UnsafeMutablePointer<itsme_store>?
        XCTAssertEqual(ffiStoreOpen(nina.identity, path, &other), ITSME_E_WRONG_IDENTITY)
        XCTAssertNil(other)
    }

    /// An identity message changed on the way, or sealed by another sender
    /// that read the same offer, fails the transfer.
    func testATamperedIdentityMessageFailsTheTransfer() {
        let olivia = person("Olivia")
        let (receiver, sender) = startTransfer(olivia.identity)
        XCTAssertEqual(move(sender, receiver, now: t0 + 1), 1)
        XCTAssertEqual(ffiTransferConfirm(sender, t0 + 2), ITSME_OK)
        XCTAssertEqual(ffiTransferConfirm(receiver, t0 + 2), ITSME_OK)
        XCTAssertEqual(state(receiver), UInt32(ITSME_TRANSFER_STATE_AWAITING_IDENTITY))
        var message = bytes(Int(ITSME_TRANSFER_MESSAGE_MAX)) { ffiTransferNextOutgoing(sender, $0, $1, $2) }
        XCTAssertEqual(message.count, 2 + 82 + "Olivia".utf8.count + 4 + 16)
        message[40] ^= 0x01
        XCTAssertEqual(ffiTransferReceive(receiver, message, UInt(message.count), t0 + 3), ITSME_E_AUTHENTICATION_FAILED)
        XCTAssertEqual(state(receiver), UInt32(ITSME_TRANSFER_STATE_FAILED))
        XCTAssertFalse(text { ffiTransferLastError(receiver, $0, $1, $2) }.isEmpty)
        message[40] ^= 0x01
        XCTAssertEqual(ffiTransferReceive(receiver, message, UInt(message.count), t0 + 3), ITSME_E_INVALID_STATE, "a failure is final")
        var taken: UnsafeMutablePointer<itsme_import>?
        XCTAssertEqual(ffiTransferTakeImport(receiver, &taken), ITSME_E_INVALID_STATE)
        XCTAssertNil(taken)
        var sas = [CChar](repeating: 0, count: Int(ITSME_SHORT_CODE_SIZE))
        var length: UInt = 0
        XCTAssertEqual(ffiTransferSAS(receiver, &sas, UInt(sas.count), &length), ITSME_E_INVALID_STATE)

        // Two senders answer one offer: the receiver hears the first one's
        // key, then the second one's identity, which does not open.
        let (receiver2, first) = startTransfer(olivia.identity)
        let offer = text { ffiTransferOffer(receiver2, $0, $1, $2) }
        var second: UnsafeMutablePointer<itsme_transfer>?
        XCTAssertEqual(ffiTransferNewSender(olivia.identity, "123456", offer, nil, t0, &second), ITSME_OK)
        defer { ffiTransferFree(second) }
        XCTAssertEqual(move(first, receiver2, now: t0 + 1), 1)
        XCTAssertNotEqual(text { ffiTransferSAS(receiver2, $0, $1, $2) }, text { ffiTransferSAS(second, $0, $1, $2) })
        XCTAssertEqual(ffiTransferConfirm(second, t0 + 1), ITSME_OK)
        _ = bytes(Int(ITSME_TRANSFER_MESSAGE_MAX)) { ffiTransferNextOutgoing(second, $0, $1, $2) }  // its key
        let foreign = bytes(Int(ITSME_TRANSFER_MESSAGE_MAX)) { ffiTransferNextOutgoing(second, $0, $1, $2) }
        XCTAssertEqual(ffiTransferConfirm(receiver2, t0 + 2), ITSME_OK)
        XCTAssertEqual(ffiTransferReceive(receiver2, foreign, UInt(foreign.count), t0 + 2), ITSME_E_AUTHENTICATION_FAILED)
        XCTAssertEqual(state(receiver2), UInt32(ITSME_TRANSFER_STATE_FAILED))
    }

    // MARK: Helpers

    // MARK: The contacts, carried

    /// An export with the contacts and a live transfer that includes them,
    /// through the C interface: the import carries the store, writes it as
    /// a new file, and the install finds every contact there.
    func testTheContactStoreTravelsThroughTheCInterface() throws {
        let olivia = person("Olivia")
        let nina = person("Nina", pin: "222222")
        var store: UnsafeMutablePointer<itsme_store>?
        XCTAssertEqual(ffiStoreOpen(olivia.identity, directory + "/olivia.db", &store), ITSME_OK)
        defer { ffiStoreFree(store) }
        _ = add(store, "Ann", key: 0x41)
        _ = add(store, "Ben", key: 0x42)
        var ninas: UnsafeMutablePointer<itsme_store>?
        XCTAssertEqual(ffiStoreOpen(nina.identity, directory + "/nina.db", &ninas), ITSME_OK)
        defer { ffiStoreFree(ninas) }

        // The export: its size first (no PIN tried), then the blob.
        let password = text { ffiExportGeneratePassword(nil, $0, $1, $2) }
        var needed: UInt = 0
        var tiny = [UInt8](repeating: 0, count: 8)
        XCTAssertEqual(
            ffiIdentityExportWithContacts(
                olivia.identity, "123456", t0, password, UInt32(ITSME_EXPORT_PASSWORD_GENERATED), store, nil, &tiny, 8, &needed),
            ITSME_E_BUFFER_TOO_SMALL)
        XCTAssertGreaterThan(needed, UInt(ITSME_EXPORT_MAX))
        var pinFailures: UInt32 = 99
        var wait: UInt64 = 0
        XCTAssertEqual(ffiPinStatus(olivia.identity, t0, &pinFailures, &wait), ITSME_OK)
        XCTAssertEqual(pinFailures, 0, "the size query tries no PIN")
        XCTAssertEqual(
            ffiIdentityExportWithContacts(
                olivia.identity, "123456", t0, password, UInt32(ITSME_EXPORT_PASSWORD_GENERATED), ninas, nil, &tiny, 8, &needed),
            ITSME_E_WRONG_IDENTITY, "a store of another identity")
        let blob = bytes(Int(needed)) {
            ffiIdentityExportWithContacts(
                olivia.identity, "123456", t0, password, UInt32(ITSME_EXPORT_PASSWORD_GENERATED), store, nil, $0, $1, $2)
        }
        XCTAssertEqual(blob[7], 2)
        var textLength: UInt = 0
        var textBuffer = [CChar](repeating: 0, count: 64)
        XCTAssertEqual(ffiExportToText(blob, UInt(blob.count), &textBuffer, 64, &textLength), ITSME_E_INVALID_ARGUMENT, "no text form")
        var opened: UnsafeMutablePointer<itsme_import>?
        XCTAssertEqual(ffiImportOpen(memoryStore(), blob, UInt(blob.count), password, t0, &opened), ITSME_OK)
        cleanups.append { ffiImportFree(opened) }

        // The live transfer, with the contacts included before confirming.
        let (receiver, sender) = startTransfer(olivia.identity)
        XCTAssertEqual(ffiTransferIncludeContacts(receiver, store), ITSME_E_INVALID_STATE, "the receiver sends nothing")
        XCTAssertEqual(ffiTransferIncludeContacts(sender, ninas), ITSME_E_WRONG_IDENTITY)
        XCTAssertEqual(ffiTransferIncludeContacts(sender, nil), ITSME_E_INVALID_ARGUMENT)
        XCTAssertEqual(ffiTransferIncludeContacts(sender, store), ITSME_OK)
        XCTAssertEqual(move(sender, receiver, now: t0 + 1), 1)
        XCTAssertEqual(ffiTransferConfirm(sender, t0 + 2), ITSME_OK)
        XCTAssertEqual(ffiTransferIncludeContacts(sender, store), ITSME_E_INVALID_STATE, "once confirmed")
        XCTAssertEqual(ffiTransferConfirm(receiver, t0 + 2), ITSME_OK)
        XCTAssertGreaterThanOrEqual(move(sender, receiver, now: t0 + 3), 2)
        XCTAssertEqual(state(receiver), UInt32(ITSME_TRANSFER_STATE_DONE))
        var received: UnsafeMutablePointer<itsme_import>?
        XCTAssertEqual(ffiTransferTakeImport(receiver, &received), ITSME_OK)
        cleanups.append { ffiImportFree(received) }

        for (label, imported) in [("export", opened), ("transfer", received)] {
            var size: UInt64 = 0
            XCTAssertEqual(ffiImportContactsSize(imported, &size), ITSME_OK)
            XCTAssertGreaterThan(size, 0, label)
            let path = directory + "/new-\(label).db"
            XCTAssertEqual(ffiImportWriteContacts(imported, path), ITSME_OK, label)
            XCTAssertEqual(ffiImportWriteContacts(imported, path), ITSME_E_ALREADY_EXISTS, "never overwritten")
            XCTAssertEqual(ffiImportWriteContacts(imported, ""), ITSME_E_INVALID_ARGUMENT)
            XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: path)[.size] as? UInt64, size)
            let device = memoryStore()
            var installed: UnsafeMutablePointer<itsme_identity>?
            XCTAssertEqual(ffiImportInstall(imported, device, path, 0, &installed), ITSME_OK, label)
            defer { ffiIdentityFree(installed) }
            var moved: UnsafeMutablePointer<itsme_store>?
            XCTAssertEqual(ffiStoreOpen(installed, path, &moved), ITSME_OK)
            XCTAssertEqual(names(moved), ["Ann", "Ben"], label)
            ffiStoreFree(moved)
        }
        // A transfer without the contacts carries none.
        let alone = transferred(olivia.identity)
        var size: UInt64 = 99
        XCTAssertEqual(ffiImportContactsSize(alone, &size), ITSME_OK)
        XCTAssertEqual(size, 0)
        XCTAssertEqual(ffiImportWriteContacts(alone, directory + "/none.db"), ITSME_E_NOT_FOUND)
    }

    private func memoryStore() -> UnsafeMutablePointer<itsme_secret_store>? {
        var store: UnsafeMutablePointer<itsme_secret_store>?
        XCTAssertEqual(ffiSecretStoreNewMemory(&store), ITSME_OK)
        cleanups.append { ffiSecretStoreFree(store) }
        return store
    }

    private func person(_ name: String, pin: String = "123456")
        -> (secrets: UnsafeMutablePointer<itsme_secret_store>?, identity: UnsafeMutablePointer<itsme_identity>?)
    {
        let secrets = memoryStore()
        var identity: UnsafeMutablePointer<itsme_identity>?
        XCTAssertEqual(ffiIdentityCreate(secrets, name, &identity), ITSME_OK)
        cleanups.append { ffiIdentityFree(identity) }
        XCTAssertEqual(ffiPinSet(identity, pin), ITSME_OK)
        return (secrets, identity)
    }

    /// A text output read through the buffer protocol.
    private func text(
        _ capacity: Int = 1024, file: StaticString = #filePath, line: UInt = #line,
        _ call: (UnsafeMutablePointer<CChar>?, UInt, UnsafeMutablePointer<UInt>?) -> itsme_result
    ) -> String {
        var buffer = [CChar](repeating: 0, count: capacity)
        var length: UInt = 0
        let rc = buffer.withUnsafeMutableBufferPointer { call($0.baseAddress, UInt($0.count), &length) }
        XCTAssertEqual(rc, ITSME_OK, file: file, line: line)
        guard rc == ITSME_OK else { return "" }
        let result = String(cString: buffer)
        XCTAssertEqual(Int(length), result.utf8.count + 1, "out_len counts the NUL", file: file, line: line)
        return result
    }

    /// A byte output read through the buffer protocol.
    private func bytes(
        _ capacity: Int, file: StaticString = #filePath, line: UInt = #line,
        _ call: (UnsafeMutablePointer<UInt8>?, UInt, UnsafeMutablePointer<UInt>?) -> itsme_result
    ) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: capacity)
        var length: UInt = 0
        let rc = buffer.withUnsafeMutableBufferPointer { call($0.baseAddress, UInt($0.count), &length) }
        XCTAssertEqual(rc, ITSME_OK, file: file, line: line)
        return rc == ITSME_OK ? Array(buffer.prefix(Int(length))) : []
    }

    private func fingerprint(_ identity: UnsafeMutablePointer<itsme_identity>?) -> String {
        text { ffiIdentityFingerprint(identity, $0, $1, $2) }
    }

    private func publicKey(_ identity: UnsafeMutablePointer<itsme_identity>?) -> [UInt8] {
        bytes(Int(ITSME_PUBLIC_KEY_BYTES)) { ffiIdentityPublicKey(identity, $0, $1, $2) }
    }

    private func otherFingerprint(_ report: itsme_import_report) -> String {
        withUnsafeBytes(of: report.other_fingerprint) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
    }

    private func importStatus(_ store: UnsafeMutablePointer<itsme_secret_store>?, _ now: Int64) -> (failures: UInt32, wait: UInt64) {
        var failures: UInt32 = 99
        var wait: UInt64 = 99
        XCTAssertEqual(ffiImportStatus(store, now, &failures, &wait), ITSME_OK)
        return (failures, wait)
    }

    private func state(_ transfer: UnsafeMutablePointer<itsme_transfer>?) -> UInt32 {
        var state: itsme_transfer_state = 0
        XCTAssertEqual(ffiTransferStatus(transfer, &state), ITSME_OK)
        return state
    }

    /// A receiver and a sender (`identity`, its PIN) that read its offer.
    private func startTransfer(_ identity: UnsafeMutablePointer<itsme_identity>?, pin: String = "123456")
        -> (receiver: UnsafeMutablePointer<itsme_transfer>?, sender: UnsafeMutablePointer<itsme_transfer>?)
    {
        var receiver: UnsafeMutablePointer<itsme_transfer>?
        var sender: UnsafeMutablePointer<itsme_transfer>?
        XCTAssertEqual(ffiTransferNewReceiver(nil, t0, &receiver), ITSME_OK)
        cleanups.append { ffiTransferFree(receiver) }
        let offer = text(Int(ITSME_TRANSFER_OFFER_SIZE)) { ffiTransferOffer(receiver, $0, $1, $2) }
        XCTAssertEqual(ffiTransferNewSender(identity, pin, offer, nil, t0, &sender), ITSME_OK)
        cleanups.append { ffiTransferFree(sender) }
        XCTAssertEqual(
            text(Int(ITSME_ROOM_NAME_SIZE)) { ffiTransferRoom(receiver, $0, $1, $2) },
            text(Int(ITSME_ROOM_NAME_SIZE)) { ffiTransferRoom(sender, $0, $1, $2) })
        return (receiver, sender)
    }

    /// Moves every queued message from `sender` to `receiver`.
    private func move(
        _ sender: UnsafeMutablePointer<itsme_transfer>?, _ receiver: UnsafeMutablePointer<itsme_transfer>?, now: Int64
    ) -> Int {
        var count = 0
        while true {
            let message = bytes(Int(ITSME_TRANSFER_MESSAGE_MAX)) { ffiTransferNextOutgoing(sender, $0, $1, $2) }
            if message.isEmpty { return count }
            XCTAssertEqual(ffiTransferReceive(receiver, message, UInt(message.count), now), ITSME_OK)
            count += 1
        }
    }

    /// `identity` carried by a live transfer: the import the receiver takes.
    private func transferred(_ identity: UnsafeMutablePointer<itsme_identity>?, pin: String = "123456")
        -> UnsafeMutablePointer<itsme_import>?
    {
        let (receiver, sender) = startTransfer(identity, pin: pin)
        XCTAssertEqual(move(sender, receiver, now: t0 + 1), 1)
        XCTAssertEqual(text { ffiTransferSAS(receiver, $0, $1, $2) }, text { ffiTransferSAS(sender, $0, $1, $2) })
        XCTAssertEqual(ffiTransferConfirm(sender, t0 + 2), ITSME_OK)
        XCTAssertEqual(ffiTransferConfirm(receiver, t0 + 2), ITSME_OK)
        XCTAssertEqual(move(sender, receiver, now: t0 + 3), 1)
        XCTAssertEqual(state(sender), UInt32(ITSME_TRANSFER_STATE_DONE))
        XCTAssertEqual(state(receiver), UInt32(ITSME_TRANSFER_STATE_DONE))
        var imported: UnsafeMutablePointer<itsme_import>?
        XCTAssertEqual(ffiTransferTakeImport(receiver, &imported), ITSME_OK)
        cleanups.append { ffiImportFree(imported) }
        XCTAssertEqual(text { ffiImportFingerprint(imported, $0, $1, $2) }, fingerprint(identity))
        return imported
    }

    private func add(_ store: UnsafeMutablePointer<itsme_store>?, _ name: String, key byte: UInt8) -> Int64 {
        let key = [UInt8](repeating: byte, count: 32)
        let seed = [UInt8](repeating: 7, count: 32)
        var id: Int64 = 0
        XCTAssertEqual(ffiStoreAdd(store, name, key, 32, seed, 32, itsme_exchange_method(ITSME_EXCHANGE_METHOD_QR), t0, &id), ITSME_OK)
        return id
    }

    private func names(_ store: UnsafeMutablePointer<itsme_store>?) -> [String] {
        var list: UnsafeMutablePointer<itsme_contact_list>?
        XCTAssertEqual(ffiStoreList(store, 0, 0, &list), ITSME_OK)
        defer { ffiContactListFree(list) }
        var count: UInt = 0
        XCTAssertEqual(ffiContactListCount(list, &count), ITSME_OK)
        return (0..<count).map { i in
            var contact: UnsafeMutablePointer<itsme_contact>?
            XCTAssertEqual(ffiContactListGet(list, i, &contact), ITSME_OK)
            defer { ffiContactFree(contact) }
            return text { ffiContactName(contact, $0, $1, $2) }
        }
    }
}

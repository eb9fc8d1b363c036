// Exported functions for the device transfer (the password export, the
// import, the live transfer), in the order of include/itsme.h.
import CItsMe
import ItsMeKit
import ItsMePrimitives
import Synchronization

// MARK: - Handles

/// Box of an `itsme_import`: an opened export or a received identity.
/// Calls are serialised; the contents are wiped when the box is freed.
final class ImportHandle: @unchecked Sendable {
    private let lock = CheckedLock()
    private let contents: IdentityExport.Contents
    let lastError = LastError()

    init(_ contents: consuming IdentityExport.Contents) { self.contents = contents }

    func run(_ body: (borrowing IdentityExport.Contents) throws -> Void) -> itsme_result {
        guarded(lastError.set) { try lock.withLock(reentered: reentered("the import")) { try body(contents) } }
    }
}

/// Box of an `itsme_transfer`. Calls are serialised.
final class TransferHandle: @unchecked Sendable {
    private let lock = CheckedLock()
    private let transfer: DeviceTransfer
    let lastError = LastError()

    init(_ transfer: DeviceTransfer) { self.transfer = transfer }

    func run(_ body: (DeviceTransfer) throws -> Void) -> itsme_result {
        guarded(lastError.set) { try locked(body) }
    }

    /// `body` under the transfer's lock (a room session's calls run there).
    func locked<T>(_ body: (DeviceTransfer) throws -> T) throws -> T {
        try lock.withLock(reentered: reentered("the transfer")) { try body(transfer) }
    }
}

private func onImport(_ p: UnsafeRawPointer?, _ body: (borrowing IdentityExport.Contents) throws -> Void) -> itsme_result {
    guard let handle = unbox(p, as: ImportHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("import is NULL") }
    }
    return handle.run(body)
}

private func onTransfer(_ p: UnsafeRawPointer?, _ body: (DeviceTransfer) throws -> Void) -> itsme_result {
    guard let handle = unbox(p, as: TransferHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("transfer is NULL") }
    }
    return handle.run(body)
}

// MARK: - Arguments

private func passwordKind(_ kind: UInt32) throws -> IdentityExport.PasswordKind {
    guard kind <= UInt32(UInt8.max), let known = IdentityExport.PasswordKind(rawValue: UInt8(kind)) else {
        throw invalid("unknown password kind \(kind): ITSME_EXPORT_PASSWORD_GENERATED or ITSME_EXPORT_PASSWORD_CHOSEN")
    }
    return known
}

/// An optional contact store path: NULL is none; an empty one is refused.
private func storePath(_ p: UnsafePointer<CChar>?) throws -> String? {
    guard p != nil else { return nil }
    let path = try text(p, "store_path")
    guard !path.isEmpty else { throw invalid("store_path is empty (pass NULL for none)") }
    return path
}

private func secretStore(_ p: UnsafeMutablePointer<itsme_secret_store>?) throws -> any SecretStore {
    guard let handle = unbox(p, as: SecretStoreHandle.self) else { throw invalid("store is NULL") }
    return handle.store
}

// MARK: - The password export

@c(itsme_export_generate_password)
public func ffiExportGeneratePassword(
    _ rng: UnsafeMutablePointer<itsme_random>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        try checkOutput(out, cap, outLen)
        // Nothing is drawn unless the password fits.
        let needed = UInt(ITSME_EXPORT_PASSWORD_SIZE)
        guard cap >= needed else {
            outLen!.pointee = needed
            throw ItsMeError(.bufferTooSmall, "buffer of \(cap) bytes is too small: \(needed) needed")
        }
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        try writeText(IdentityExport.generatePassword(using: &random), to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_identity_export)
public func ffiIdentityExport(
    _ identity: UnsafeMutablePointer<itsme_identity>?, _ pin: UnsafePointer<CChar>?, _ now: Int64,
    _ password: UnsafePointer<CChar>?, _ kind: UInt32, _ rng: UnsafeMutablePointer<itsme_random>?,
    _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onIdentity(identity) { id in
        let pin = try pinText(pin, "pin")
        let password = try text(password, "password")
        let kind = try passwordKind(kind)
        try checkOutput(out, cap, outLen)
        // The password and the buffer before the PIN: neither costs an attempt.
        try IdentityExport.checkPassword(password, kind: kind)
        let needed = UInt(IdentityExport.blobCount(nameByteCount: id.name.utf8.count))
        guard cap >= needed else {
            outLen!.pointee = needed
            throw ItsMeError(.bufferTooSmall, "buffer of \(cap) bytes is too small: \(needed) needed")
        }
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        let blob = try IdentityExport.export(id, pin: pin, now: now, password: password, kind: kind, random: &random)
        try blob.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

@c(itsme_identity_export_with_contacts)
public func ffiIdentityExportWithContacts(
    _ identity: UnsafeMutablePointer<itsme_identity>?, _ pin: UnsafePointer<CChar>?, _ now: Int64,
    _ password: UnsafePointer<CChar>?, _ kind: UInt32, _ contacts: UnsafeMutablePointer<itsme_store>?,
    _ rng: UnsafeMutablePointer<itsme_random>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onIdentity(identity) { id in
        let pin = try pinText(pin, "pin")
        let password = try text(password, "password")
        let kind = try passwordKind(kind)
        guard let storeHandle = unbox(contacts, as: ContactStoreHandle.self) else { throw invalid("contacts is NULL") }
        guard ConstantTime.equal(storeHandle.store.ownerPublicKey, id.publicKey) else {
            throw ItsMeError(.wrongIdentity, "the contact store belongs to another identity than the one exported")
        }
        try checkOutput(out, cap, outLen)
        // The password, the store and the buffer before the PIN: none costs an attempt.
        try IdentityExport.checkPassword(password, kind: kind)
        let snapshot = try storeHandle.store.snapshot()
        let needed = UInt(IdentityExport.blobCount(nameByteCount: id.name.utf8.count) + snapshot.count)
        guard cap >= needed else {
            outLen!.pointee = needed
            throw ItsMeError(.bufferTooSmall, "buffer of \(cap) bytes is too small: \(needed) needed")
        }
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        let blob = try IdentityExport.export(
            id, pin: pin, now: now, password: password, kind: kind, contactStore: snapshot, random: &random)
        try blob.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

@c(itsme_export_to_text)
public func ffiExportToText(
    _ blob: UnsafePointer<UInt8>?, _ len: UInt, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let blob = try bytes(blob, len, "blob")
        try checkOutput(out, cap, outLen)
        let header = try IdentityExport.Header(parsing: blob)
        guard header.formatVersion == IdentityExport.version else {
            throw invalid("an export with the contacts (format version 2) is a file only: it has no text form")
        }
        try writeText(IdentityExport.text(blob), to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_export_from_text)
public func ffiExportFromText(
    _ text: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let text = try ItsMeFFI.text(text, "text", max: TextLimit.exportText)
        try checkOutput(out, cap, outLen)
        let blob = try IdentityExport.blob(text: text)
        try blob.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

@c(itsme_export_header)
public func ffiExportHeader(
    _ blob: UnsafePointer<UInt8>?, _ len: UInt, _ outPasses: UnsafeMutablePointer<UInt32>?,
    _ outMemoryKiB: UnsafeMutablePointer<UInt32>?, _ outPasswordKind: UnsafeMutablePointer<UInt32>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let blob = try bytes(blob, len, "blob")
        let passes = try required(outPasses, "out_passes")
        let memory = try required(outMemoryKiB, "out_memory_kib")
        let kind = try required(outPasswordKind, "out_password_kind")
        let header = try IdentityExport.Header(parsing: blob)
        passes.pointee = header.passes
        memory.pointee = header.memoryKiB
        kind.pointee = UInt32(header.passwordKind.rawValue)
    }
}

// MARK: - The import

@c(itsme_import_open)
public func ffiImportOpen(
    _ store: UnsafeMutablePointer<itsme_secret_store>?, _ blob: UnsafePointer<UInt8>?, _ len: UInt,
    _ password: UnsafePointer<CChar>?, _ now: Int64, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_import>?>?
) -> itsme_result {
    onStore(store) { handle in
        let blob = try bytes(blob, len, "blob")
        let password = try text(password, "password")
        let out = try required(out, "out")
        let contents = try IdentityExport.open(
            blob, password: password, limiter: IdentityExport.limiter(store: handle.store), now: now)
        out.pointee = box(ImportHandle(contents), as: itsme_import.self)
    }
}

@c(itsme_import_status)
public func ffiImportStatus(
    _ store: UnsafeMutablePointer<itsme_secret_store>?, _ now: Int64, _ outFailures: UnsafeMutablePointer<UInt32>?,
    _ outWaitSeconds: UnsafeMutablePointer<UInt64>?
) -> itsme_result {
    onStore(store) { handle in
        let failures = try required(outFailures, "out_failures")
        let wait = try required(outWaitSeconds, "out_wait_seconds")
        let status = try IdentityExport.limiter(store: handle.store).status(now: now)
        failures.pointee = status.failures
        wait.pointee = status.waitSeconds
    }
}

@c(itsme_import_free)
public func ffiImportFree(_ handle: UnsafeMutablePointer<itsme_import>?) {
    release(handle, as: ImportHandle.self)
}

@c(itsme_import_last_error)
public func ffiImportLastError(
    _ handle: UnsafePointer<itsme_import>?, _ buf: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guard let handle = unbox(handle, as: ImportHandle.self) else { return ITSME_E_INVALID_ARGUMENT }
    return copyLastError(handle.lastError.get(), buf, cap, outLen)
}

@c(itsme_import_fingerprint)
public func ffiImportFingerprint(
    _ handle: UnsafePointer<itsme_import>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onImport(handle) { c in try writeText(c.fingerprint, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_import_name)
public func ffiImportName(
    _ handle: UnsafePointer<itsme_import>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onImport(handle) { c in try writeText(c.name, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_import_contacts_size)
public func ffiImportContactsSize(_ handle: UnsafePointer<itsme_import>?, _ outSize: UnsafeMutablePointer<UInt64>?) -> itsme_result {
    onImport(handle) { c in
        let out = try required(outSize, "out_size")
        out.pointee = UInt64(c.contactStore?.count ?? 0)
    }
}

@c(itsme_import_write_contacts)
public func ffiImportWriteContacts(_ handle: UnsafeMutablePointer<itsme_import>?, _ path: UnsafePointer<CChar>?) -> itsme_result {
    onImport(handle) { c in
        guard let path = try storePath(path) else { throw invalid("path is NULL") }
        try c.writeContactStore(to: path)
    }
}

@c(itsme_import_check)
public func ffiImportCheck(
    _ handle: UnsafeMutablePointer<itsme_import>?, _ store: UnsafeMutablePointer<itsme_secret_store>?,
    _ path: UnsafePointer<CChar>?, _ outReport: UnsafeMutablePointer<itsme_import_report>?
) -> itsme_result {
    onImport(handle) { c in
        let secrets = try secretStore(store)
        let path = try storePath(path)
        let out = try required(outReport, "out_report")
        try checkStructSize(out, "out_report")
        let found = try IdentityExport.check(c, secretStore: secrets, contactStorePath: path)
        var report = itsme_import_report()
        report.size = out.pointee.size
        report.wrong_identity = found.isWrongIdentity
        let other = Array((found.otherIdentity ?? "").utf8.prefix(Int(ITSME_FINGERPRINT_CHARS)))
        withUnsafeMutableBytes(of: &report.other_fingerprint) { buffer in
            buffer.copyBytes(from: other)
            buffer[other.count] = 0
        }
        report.store_exists = found.store.exists
        report.contacts_readable = UInt64(found.store.readable)
        report.contacts_unreadable = UInt64(found.store.unreadable)
        report.device_secrets = UInt64(found.store.deviceSecrets)
        out.pointee = report
    }
}

@c(itsme_import_install)
public func ffiImportInstall(
    _ handle: UnsafeMutablePointer<itsme_import>?, _ store: UnsafeMutablePointer<itsme_secret_store>?,
    _ path: UnsafePointer<CChar>?, _ flags: UInt32, _ outIdentity: UnsafeMutablePointer<UnsafeMutablePointer<itsme_identity>?>?
) -> itsme_result {
    onImport(handle) { c in
        let secrets = try secretStore(store)
        let path = try storePath(path)
        guard flags & ~UInt32(ITSME_IMPORT_REPLACE) == 0 else { throw invalid("unknown install flags \(flags)") }
        let installed = try IdentityExport.install(
            c, secretStore: secrets, contactStorePath: path, replacing: flags & UInt32(ITSME_IMPORT_REPLACE) != 0)
        outIdentity?.pointee = box(IdentityHandle(installed.identity), as: itsme_identity.self)
    }
}

// MARK: - The live transfer

@c(itsme_transfer_new_receiver)
public func ffiTransferNewReceiver(
    _ rng: UnsafeMutablePointer<itsme_random>?, _ now: Int64, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_transfer>?>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let out = try required(out, "out")
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        let transfer = try DeviceTransfer(receiverAt: now, random: &random)
        out.pointee = box(TransferHandle(transfer), as: itsme_transfer.self)
    }
}

@c(itsme_transfer_new_sender)
public func ffiTransferNewSender(
    _ identity: UnsafeMutablePointer<itsme_identity>?, _ pin: UnsafePointer<CChar>?, _ offer: UnsafePointer<CChar>?,
    _ rng: UnsafeMutablePointer<itsme_random>?, _ now: Int64, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_transfer>?>?
) -> itsme_result {
    onIdentity(identity) { id in
        let pin = try pinText(pin, "pin")
        let offer = try text(offer, "offer", max: TextLimit.exportText)
        let out = try required(out, "out")
        var random = HostRandom(handle: unbox(rng, as: RandomHandle.self))
        let transfer = try DeviceTransfer(sending: id, pin: pin, offer: offer, now: now, random: &random)
        out.pointee = box(TransferHandle(transfer), as: itsme_transfer.self)
    }
}

@c(itsme_transfer_free)
public func ffiTransferFree(_ transfer: UnsafeMutablePointer<itsme_transfer>?) {
    release(transfer, as: TransferHandle.self)
}

@c(itsme_transfer_last_error)
public func ffiTransferLastError(
    _ transfer: UnsafePointer<itsme_transfer>?, _ buf: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guard let handle = unbox(transfer, as: TransferHandle.self) else { return ITSME_E_INVALID_ARGUMENT }
    return copyLastError(handle.lastError.get(), buf, cap, outLen)
}

@c(itsme_transfer_status)
public func ffiTransferStatus(
    _ transfer: UnsafePointer<itsme_transfer>?, _ outState: UnsafeMutablePointer<itsme_transfer_state>?
) -> itsme_result {
    onTransfer(transfer) { t in try required(outState, "out_state").pointee = t.state.rawValue }
}

@c(itsme_transfer_offer)
public func ffiTransferOffer(
    _ transfer: UnsafePointer<itsme_transfer>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onTransfer(transfer) { t in try writeText(t.offerText, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_transfer_room)
public func ffiTransferRoom(
    _ transfer: UnsafePointer<itsme_transfer>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onTransfer(transfer) { t in try writeText(t.roomName, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_transfer_next_outgoing)
public func ffiTransferNextOutgoing(
    _ transfer: UnsafeMutablePointer<itsme_transfer>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onTransfer(transfer) { t in try writeNextMessage(t.peekOutgoing(), { _ = t.takeOutgoing() }, out, cap, outLen) }
}

@c(itsme_transfer_receive)
public func ffiTransferReceive(
    _ transfer: UnsafeMutablePointer<itsme_transfer>?, _ bytesIn: UnsafePointer<UInt8>?, _ len: UInt, _ now: Int64
) -> itsme_result {
    onTransfer(transfer) { t in
        let message = try bytes(bytesIn, len, "bytes")
        guard t.role == .receiver else { throw ItsMeError(.invalidState, "the sending device receives no messages") }
        try t.receive(message, now: now)
    }
}

@c(itsme_transfer_sas)
public func ffiTransferSAS(
    _ transfer: UnsafePointer<itsme_transfer>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onTransfer(transfer) { t in
        try checkOutput(out, cap, outLen)
        try writeText(try t.requireSAS().text, to: out, cap: cap, outLen: outLen)
    }
}

@c(itsme_transfer_include_contacts)
public func ffiTransferIncludeContacts(
    _ transfer: UnsafeMutablePointer<itsme_transfer>?, _ contacts: UnsafeMutablePointer<itsme_store>?
) -> itsme_result {
    onTransfer(transfer) { t in
        guard let storeHandle = unbox(contacts, as: ContactStoreHandle.self) else { throw invalid("contacts is NULL") }
        guard t.role == .sender, t.state == .compareSAS else {
            throw ItsMeError(.invalidState, "only the sending device, before the confirmation, includes the contacts")
        }
        guard let sender = t.senderPublicKey, ConstantTime.equal(storeHandle.store.ownerPublicKey, sender) else {
            throw ItsMeError(.wrongIdentity, "the contact store belongs to another identity than the one sent")
        }
        try t.include(contactStore: try storeHandle.store.snapshot())
    }
}

@c(itsme_transfer_confirm)
public func ffiTransferConfirm(_ transfer: UnsafeMutablePointer<itsme_transfer>?, _ now: Int64) -> itsme_result {
    onTransfer(transfer) { t in try t.confirm(now: now) }
}

@c(itsme_transfer_reject)
public func ffiTransferReject(_ transfer: UnsafeMutablePointer<itsme_transfer>?) -> itsme_result {
    onTransfer(transfer) { t in try t.reject() }
}

@c(itsme_transfer_take_import)
public func ffiTransferTakeImport(
    _ transfer: UnsafeMutablePointer<itsme_transfer>?, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_import>?>?
) -> itsme_result {
    onTransfer(transfer) { t in
        let out = try required(out, "out")
        out.pointee = box(ImportHandle(try t.takeIdentity()), as: itsme_import.self)
    }
}

// Every function exported by libitsme, in the order of include/itsme.h.
// Each one checks its arguments, calls the core and maps errors; see the
// header for the contract.
import CItsMe
import ItsMeKit
import ItsMePrimitives

// MARK: - Version and result codes

@c(itsme_version_string)
public func ffiVersionString() -> UnsafePointer<CChar> {
    cString(Version.string)
}

@c(itsme_version_number)
public func ffiVersionNumber() -> UInt32 {
    Version.number
}

@c(itsme_result_message)
public func ffiResultMessage(_ code: itsme_result) -> UnsafePointer<CChar> {
    if code == ITSME_OK { return cString("ok") }
    guard let kind = ItsMeError.Kind.all.first(where: { $0.code == code }) else {
        return cString("unknown result code")
    }
    return cString(kind.message)
}

// MARK: - Initialisation and sizes

@c(itsme_init)
public func ffiInit() -> itsme_result {
    do {
        try Sodium.initialize()
        return ITSME_OK
    } catch let error as ItsMeError {
        ThreadLastError.set(error.message)
        return error.kind.code
    } catch {
        return ITSME_E_INTERNAL
    }
}

@c(itsme_last_error)
public func ffiLastError(_ buf: UnsafeMutablePointer<CChar>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?)
    -> itsme_result
{
    copyLastError(ThreadLastError.get(), buf, cap, outLen)
}

@c(itsme_fingerprint_from_public_key)
public func ffiFingerprintFromPublicKey(
    _ publicKey: UnsafePointer<UInt8>?, _ keyLen: UInt,
    _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let key = try required(publicKey, "public_key")
        guard keyLen == UInt(Ed25519.publicKeyCount) else {
            throw invalid("a public key is \(Ed25519.publicKeyCount) bytes, got \(keyLen)")
        }
        let fingerprint = Fingerprint.of(publicKey: Array(UnsafeBufferPointer(start: key, count: Int(keyLen))))
        try writeText(fingerprint, to: out, cap: cap, outLen: outLen)
    }
}

// MARK: - Secret store

@c(itsme_secret_store_new_callbacks)
public func ffiSecretStoreNewCallbacks(
    _ callbacks: UnsafePointer<itsme_secret_store_callbacks>?,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_secret_store>?>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let table = try required(callbacks, "callbacks")
        guard table.pointee.version == UInt32(ITSME_SECRET_STORE_CALLBACKS_VERSION) else {
            throw invalid("callbacks->version is \(table.pointee.version): this library knows version \(ITSME_SECRET_STORE_CALLBACKS_VERSION)")
        }
        let out = try required(out, "out")
        guard let store = CallbackSecretStore(table.pointee) else {
            throw invalid("callbacks get, put and remove must all be set")
        }
        out.pointee = box(SecretStoreHandle(store), as: itsme_secret_store.self)
    }
}

@c(itsme_secret_store_new_memory)
public func ffiSecretStoreNewMemory(_ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_secret_store>?>?)
    -> itsme_result
{
    guarded(ThreadLastError.set) {
        let out = try required(out, "out")
        out.pointee = box(SecretStoreHandle(MemorySecretStore()), as: itsme_secret_store.self)
    }
}

@c(itsme_secret_store_open_file)
public func ffiSecretStoreOpenFile(
    _ directory: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_secret_store>?>?
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let path = try text(directory, "directory")
        let out = try required(out, "out")
        let store = try FileSecretStore(directory: path)
        out.pointee = box(SecretStoreHandle(store), as: itsme_secret_store.self)
    }
}

/// A passphrase argument, checked for its length before a byte is read
/// and copied into guarded memory.
private func passphraseArgument(_ p: UnsafePointer<UInt8>?, _ count: UInt) throws -> SecretBytes {
    let p = try required(p, "passphrase")
    guard count <= UInt(PassphraseSecretStore.maxPassphraseCount) else {
        throw invalid("a passphrase is at most \(PassphraseSecretStore.maxPassphraseCount) bytes, got \(count)")
    }
    return try SecretBytes(copying: UnsafeRawBufferPointer(start: p, count: Int(count)))
}

/// A wrapped file store made by `make` from the checked arguments, boxed.
private func wrappedStore(
    _ directory: UnsafePointer<CChar>?, _ passphrase: UnsafePointer<UInt8>?, _ passphraseLen: UInt,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_secret_store>?>?,
    _ make: (String, borrowing SecretBytes) throws -> PassphraseSecretStore
) -> itsme_result {
    guarded(ThreadLastError.set) {
        let path = try text(directory, "directory")
        let secret = try passphraseArgument(passphrase, passphraseLen)
        let out = try required(out, "out")
        out.pointee = box(SecretStoreHandle(try make(path, secret)), as: itsme_secret_store.self)
    }
}

@c(itsme_secret_store_create_file_passphrase)
public func ffiSecretStoreCreateFilePassphrase(
    _ directory: UnsafePointer<CChar>?, _ passphrase: UnsafePointer<UInt8>?, _ passphraseLen: UInt,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_secret_store>?>?
) -> itsme_result {
    wrappedStore(directory, passphrase, passphraseLen, out) { try PassphraseSecretStore.create(directory: $0, passphrase: $1) }
}

@c(itsme_secret_store_open_file_passphrase)
public func ffiSecretStoreOpenFilePassphrase(
    _ directory: UnsafePointer<CChar>?, _ passphrase: UnsafePointer<UInt8>?, _ passphraseLen: UInt,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_secret_store>?>?
) -> itsme_result {
    wrappedStore(directory, passphrase, passphraseLen, out) { try PassphraseSecretStore.open(directory: $0, passphrase: $1) }
}

@c(itsme_secret_store_is_passphrase_wrapped)
public func ffiSecretStoreIsPassphraseWrapped(_ directory: UnsafePointer<CChar>?, _ outWrapped: UnsafeMutablePointer<Bool>?)
    -> itsme_result
{
    guarded(ThreadLastError.set) {
        let path = try text(directory, "directory")
        let out = try required(outWrapped, "out_wrapped")
        out.pointee = try PassphraseSecretStore.isWrapped(directory: path)
    }
}

@c(itsme_secret_store_free)
public func ffiSecretStoreFree(_ store: UnsafeMutablePointer<itsme_secret_store>?) {
    release(store, as: SecretStoreHandle.self)
}

@c(itsme_secret_store_last_error)
public func ffiSecretStoreLastError(
    _ store: UnsafePointer<itsme_secret_store>?, _ buf: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guard let handle = unbox(store, as: SecretStoreHandle.self) else { return ITSME_E_INVALID_ARGUMENT }
    return copyLastError(handle.lastError.get(), buf, cap, outLen)
}

// MARK: - Identity

@c(itsme_identity_create)
public func ffiIdentityCreate(
    _ store: UnsafeMutablePointer<itsme_secret_store>?, _ name: UnsafePointer<CChar>?,
    _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_identity>?>?
) -> itsme_result {
    onStore(store) { handle in
        let name = try text(name, "name")
        let out = try required(out, "out")
        let identity = try Identity.create(store: handle.store, name: name)
        out.pointee = box(IdentityHandle(identity), as: itsme_identity.self)
    }
}

@c(itsme_identity_load)
public func ffiIdentityLoad(
    _ store: UnsafeMutablePointer<itsme_secret_store>?, _ out: UnsafeMutablePointer<UnsafeMutablePointer<itsme_identity>?>?
) -> itsme_result {
    onStore(store) { handle in
        let out = try required(out, "out")
        let identity = try Identity.load(store: handle.store)
        out.pointee = box(IdentityHandle(identity), as: itsme_identity.self)
    }
}

@c(itsme_identity_free)
public func ffiIdentityFree(_ identity: UnsafeMutablePointer<itsme_identity>?) {
    release(identity, as: IdentityHandle.self)
}

@c(itsme_identity_last_error)
public func ffiIdentityLastError(
    _ identity: UnsafePointer<itsme_identity>?, _ buf: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guard let handle = unbox(identity, as: IdentityHandle.self) else { return ITSME_E_INVALID_ARGUMENT }
    return copyLastError(handle.lastError.get(), buf, cap, outLen)
}

@c(itsme_identity_fingerprint)
public func ffiIdentityFingerprint(
    _ identity: UnsafePointer<itsme_identity>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onIdentity(identity) { try writeText($0.fingerprint, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_identity_public_key)
public func ffiIdentityPublicKey(
    _ identity: UnsafePointer<itsme_identity>?, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onIdentity(identity) { id in
        try id.publicKey.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    }
}

@c(itsme_identity_name)
public func ffiIdentityName(
    _ identity: UnsafePointer<itsme_identity>?, _ out: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    onIdentity(identity) { try writeText($0.name, to: out, cap: cap, outLen: outLen) }
}

@c(itsme_identity_set_name)
public func ffiIdentitySetName(_ identity: UnsafeMutablePointer<itsme_identity>?, _ name: UnsafePointer<CChar>?)
    -> itsme_result
{
    onIdentity(identity) { try $0.setName(try text(name, "name")) }
}

// MARK: - PIN

@c(itsme_pin_is_set)
public func ffiPinIsSet(_ identity: UnsafeMutablePointer<itsme_identity>?, _ outIsSet: UnsafeMutablePointer<Bool>?)
    -> itsme_result
{
    onIdentity(identity) { id in
        let out = try required(outIsSet, "out_is_set")
        out.pointee = try PIN(store: id.store).isSet()
    }
}

@c(itsme_pin_set)
public func ffiPinSet(_ identity: UnsafeMutablePointer<itsme_identity>?, _ pin: UnsafePointer<CChar>?) -> itsme_result {
    onIdentity(identity) { id in
        try PIN(store: id.store).set(try pinText(pin, "pin"))
    }
}

@c(itsme_pin_verify)
public func ffiPinVerify(_ identity: UnsafeMutablePointer<itsme_identity>?, _ pin: UnsafePointer<CChar>?, _ now: Int64)
    -> itsme_result
{
    onIdentity(identity) { id in
        let pin = try pinText(pin, "pin")
        try PIN(store: id.store).verify(pin, now: now)
    }
}

@c(itsme_pin_change)
public func ffiPinChange(
    _ identity: UnsafeMutablePointer<itsme_identity>?, _ oldPin: UnsafePointer<CChar>?, _ newPin: UnsafePointer<CChar>?,
    _ now: Int64
) -> itsme_result {
    onIdentity(identity) { id in
        let old = try pinText(oldPin, "old_pin")
        let new = try pinText(newPin, "new_pin")
        try PIN(store: id.store).change(old: old, new: new, now: now)
    }
}

@c(itsme_pin_status)
public func ffiPinStatus(
    _ identity: UnsafeMutablePointer<itsme_identity>?, _ now: Int64, _ outFailures: UnsafeMutablePointer<UInt32>?,
    _ outWaitSeconds: UnsafeMutablePointer<UInt64>?
) -> itsme_result {
    onIdentity(identity) { id in
        let failures = try required(outFailures, "out_failures")
        let wait = try required(outWaitSeconds, "out_wait_seconds")
        let status = try PIN(store: id.store).status(now: now)
        failures.pointee = status.failures
        wait.pointee = status.waitSeconds
    }
}

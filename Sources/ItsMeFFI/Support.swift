// The bridging layer is not API: it checks arguments, boxes handles and
// maps errors. No protocol logic lives here.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import CItsMe
import ItsMeKit
import ItsMePrimitives
import Synchronization

/// A per-handle last-error message. Only the message lives behind this
/// lock; serialising a handle's calls is the handle's business.
final class LastError: Sendable {
    private let text = Mutex<String>("")
    func set(_ message: String) { text.withLock { $0 = message } }
    func get() -> String { text.withLock { $0 } }
}

/// The last error of constructors that have no handle yet, per thread
/// (pthread-specific data: the core has no Foundation).
package enum ThreadLastError {
    private final class Box {
        var message = ""
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key) { raw in
            if let raw { Unmanaged<AnyObject>.fromOpaque(raw).release() }
        }
        precondition(rc == 0, "pthread_key_create failed")
        return key
    }()

    private static var box: Box {
        if let raw = pthread_getspecific(key) {
            return Unmanaged<AnyObject>.fromOpaque(raw).takeUnretainedValue() as! Box
        }
        let box = Box()
        pthread_setspecific(key, Unmanaged<AnyObject>.passRetained(box).toOpaque())
        return box
    }

    package static func set(_ message: String) { box.message = message }
    package static func get() -> String { box.message }
}

/// Runs an exported function's body: refuses to run before itsme_init(),
/// maps errors to result codes and records their message.
/// Every failure's detail goes to the handle's record (`lastError`) and to
/// the calling thread's slot, so itsme_last_error() right after any failing
/// call reads it whatever handle was involved.
package func guarded(_ lastError: (String) -> Void, _ body: () throws -> Void) -> itsme_result {
    func fail(_ message: String, _ code: itsme_result) -> itsme_result {
        lastError(message)
        ThreadLastError.set(message)
        return code
    }
    guard Sodium.isInitialized else {
        return fail(ItsMeError.Kind.notInitialized.message.description, ITSME_E_NOT_INITIALIZED)
    }
    do {
        try body()
        return ITSME_OK
    } catch let error as ItsMeError {
        return fail(error.message, error.kind.code)
    } catch let error as DatabaseError {
        return fail(error.description, error.asItsMeError.kind.code)
    } catch {
        return fail("unexpected error", ITSME_E_INTERNAL)
    }
}

/// A struct the caller passes starts with `size_t size`, set to its sizeof
/// (include/itsme.h, conventions): a smaller one is refused.
package func checkStructSize<T>(_ p: UnsafeMutablePointer<T>, _ what: String) throws {
    let size = UnsafeRawPointer(p).load(as: UInt.self)
    guard size >= UInt(MemoryLayout<T>.size) else {
        throw invalid("\(what)->size is \(size): set it to sizeof the struct (\(MemoryLayout<T>.size))")
    }
}

package func invalid(_ message: String) -> ItsMeError { ItsMeError(.invalidArgument, message) }

/// The refusal of a call on a handle made from inside one of the host's
/// callbacks (a secret store or a random source) that a call on the same
/// handle is running, on its thread: waiting would never end, and Swift's
/// lock would trap (CheckedLock).
func reentered(_ handle: String) -> ItsMeError {
    ItsMeError(.invalidState, "\(handle) was used from inside one of the host's callbacks of a call already using it")
}

/// A required NUL-terminated UTF-8 argument.
/// Reads at most `max` bytes before the NUL, so an overlong input is
/// refused before any other work (include/itsme.h: ITSME_TEXT_MAX, and the
/// smaller bounds of typed codes and texts).
package func text(_ p: UnsafePointer<CChar>?, _ what: String, max: Int = TextLimit.any) throws -> String {
    guard let p else { throw invalid("\(what) is NULL") }
    guard strnlen(p, max + 1) <= max else { throw invalid("\(what) is longer than \(max) bytes") }
    guard let s = String(validatingCString: p) else { throw invalid("\(what) is not valid UTF-8") }
    return s
}

/// A PIN argument: NULL is an invalid argument; anything else is decoded
/// leniently (invalid UTF-8 cannot be six digits), and the core refuses all
/// but six ASCII digits as an invalid PIN. One longer than
/// ITSME_TYPED_CODE_MAX is not read at all and comes back empty, which the
/// core refuses the same way.
package func pinText(_ p: UnsafePointer<CChar>?, _ what: String) throws -> String {
    guard let p else { throw invalid("\(what) is NULL") }
    return strnlen(p, TextLimit.typedCode + 1) <= TextLimit.typedCode ? String(cString: p) : ""
}

/// The longest text inputs (include/itsme.h).
package enum TextLimit {
    /// ITSME_TEXT_MAX: any text argument.
    package static let any = 65_536
    /// ITSME_TYPED_CODE_MAX: a code a person typed (short code, session
    /// code, heard voice code, invite or encryption code, degradation code),
    /// surrounding spaces included.
    package static let typedCode = 64
    /// ITSME_EXPORT_TEXT_MAX: an export text or a transfer offer text,
    /// surrounding white space included.
    package static let exportText = 1024
}

/// A call binding argument (PROTOCOL.md 9.7, 11.4, 20.1): NULL with length
/// 0 is none; anything else is read as bytes (an empty one that is not NULL,
/// or a length outside 16 to 64, is refused by the session).
package func callBinding(_ p: UnsafePointer<UInt8>?, _ count: UInt) throws -> [UInt8]? {
    p == nil && count == 0 ? nil : try bytes(p, count, "binding")
}

/// A copy of an input buffer, which must not be NULL.
package func bytes(_ p: UnsafePointer<UInt8>?, _ count: UInt, _ what: String) throws -> [UInt8] {
    let p = try required(p, what)
    guard count <= UInt(1 << 20) else { throw invalid("\(what) is too long") }
    return Array(UnsafeBufferPointer(start: p, count: Int(count)))
}

/// An optional text argument: NULL is "".
package func optionalText(_ p: UnsafePointer<CChar>?, _ what: String) throws -> String {
    p == nil ? "" : try text(p, what)
}

/// A byte argument that may be NULL when its length is 0.
package func optionalBytes(_ p: UnsafePointer<UInt8>?, _ count: UInt, _ what: String) throws -> [UInt8] {
    count == 0 ? [] : try bytes(p, count, what)
}

package func required<T>(_ p: T?, _ what: String) throws -> T {
    guard let p else { throw invalid("\(what) is NULL") }
    return p
}

/// Writes bytes with the buffer protocol: `*outLen` gets the size needed;
/// the bytes are written only if they fit.
package func writeBytes(
    _ bytes: UnsafeRawBufferPointer, to out: UnsafeMutablePointer<UInt8>?, cap: UInt, outLen: UnsafeMutablePointer<UInt>?
) throws {
    let outLen = try required(outLen, "out_len")
    // NULL is allowed only with cap 0: a query for the size needed.
    guard out != nil || cap == 0 else { throw invalid("out is NULL but cap is \(cap)") }
    guard let out, cap >= UInt(bytes.count) else {
        outLen.pointee = UInt(bytes.count)
        throw ItsMeError(.bufferTooSmall, "buffer of \(cap) bytes is too small: \(bytes.count) needed")
    }
    if bytes.count > 0 { UnsafeMutableRawPointer(out).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
    outLen.pointee = UInt(bytes.count)
}

/// Writes NUL-terminated text; `*outLen` counts the NUL.
/// Checks an output triple before any work is done, so an argument error
/// is reported as such whatever else is wrong.
package func checkOutput<T>(_ out: UnsafeMutablePointer<T>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?) throws {
    _ = try required(outLen, "out_len")
    guard out != nil || cap == 0 else { throw invalid("out is NULL but cap is \(cap)") }
}

package func writeText(_ s: String, to out: UnsafeMutablePointer<CChar>?, cap: UInt, outLen: UnsafeMutablePointer<UInt>?) throws {
    var bytes = Array(s.utf8)
    bytes.append(0)
    try bytes.withUnsafeBytes { b in
        try writeBytes(b, to: UnsafeMutableRawPointer(out)?.assumingMemoryBound(to: UInt8.self), cap: cap, outLen: outLen)
    }
}

package func cString(_ s: StaticString) -> UnsafePointer<CChar> {
    UnsafeRawPointer(s.utf8Start).assumingMemoryBound(to: CChar.self)
}

// MARK: - Handles

/// Box of an `itsme_secret_store`.
package final class SecretStoreHandle: Sendable {
    package let store: any SecretStore
    let lastError = LastError()
    package init(_ store: any SecretStore) { self.store = store }
}

/// Box of an `itsme_identity`. Calls on one handle are serialised by `lock`.
package final class IdentityHandle: @unchecked Sendable {
    private let lock = CheckedLock()
    private let identity: Identity
    let lastError = LastError()

    package init(_ identity: Identity) { self.identity = identity }

    func run(_ body: (Identity) throws -> Void) -> itsme_result {
        guarded(lastError.set) { try locked(body) }
    }

    /// Runs `body` holding this identity's lock, for other handles (an
    /// exchange) that use the identity; `.invalidState` from inside a
    /// callback of a call holding it (`reentered`).
    func locked<R>(_ body: (Identity) throws -> R) throws -> R {
        try lock.withLock(reentered: reentered("the identity")) { try body(identity) }
    }
}

package func box<T: AnyObject, H>(_ object: T, as: H.Type) -> UnsafeMutablePointer<H> {
    Unmanaged.passRetained(object).toOpaque().assumingMemoryBound(to: H.self)
}

package func unbox<T: AnyObject>(_ p: UnsafeRawPointer?, as: T.Type) -> T? {
    guard let p else { return nil }
    return Unmanaged<T>.fromOpaque(p).takeUnretainedValue()
}

package func release<T: AnyObject>(_ p: UnsafeRawPointer?, as: T.Type) {
    guard let p else { return }
    Unmanaged<T>.fromOpaque(p).release()
}

/// Runs a call on a store handle; a NULL handle is an invalid argument.
package func onStore(_ p: UnsafeRawPointer?, _ body: (SecretStoreHandle) throws -> Void) -> itsme_result {
    guard let handle = unbox(p, as: SecretStoreHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("store is NULL") }
    }
    return guarded(handle.lastError.set) { try body(handle) }
}

/// Box of an `itsme_store`: the contact store is itself serialised.
final class ContactStoreHandle: Sendable {
    let store: ContactStore
    let lastError = LastError()
    init(_ store: ContactStore) { self.store = store }
}

/// Box of an `itsme_contact`: an immutable snapshot.
final class ContactHandle: Sendable {
    let contact: Contact
    init(_ contact: Contact) { self.contact = contact }
}

/// Box of an `itsme_contact_list`: immutable snapshots.
final class ContactListHandle: Sendable {
    let contacts: [Contact]
    init(_ contacts: [Contact]) { self.contacts = contacts }
}

package func onContactStore(_ p: UnsafeRawPointer?, _ body: (ContactStore) throws -> Void) -> itsme_result {
    guard let handle = unbox(p, as: ContactStoreHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("store is NULL") }
    }
    return guarded(handle.lastError.set) { try body(handle.store) }
}

/// Reads a snapshot; the getters keep no last-error message.
package func onContact(_ p: UnsafeRawPointer?, _ body: (Contact) throws -> Void) -> itsme_result {
    guarded(ThreadLastError.set) {
        guard let handle = unbox(p, as: ContactHandle.self) else { throw invalid("contact is NULL") }
        try body(handle.contact)
    }
}

package func onIdentity(_ p: UnsafeRawPointer?, _ body: (Identity) throws -> Void) -> itsme_result {
    guard let handle = unbox(p, as: IdentityHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("identity is NULL") }
    }
    return handle.run(body)
}

/// Copies a handle's last error with the buffer protocol. Needs no init.
package func copyLastError(_ message: String, _ buf: UnsafeMutablePointer<CChar>?, _ cap: UInt, _ outLen: UnsafeMutablePointer<UInt>?)
    -> itsme_result
{
    do {
        try writeText(message, to: buf, cap: cap, outLen: outLen)
        return ITSME_OK
    } catch let error as ItsMeError {
        return error.kind.code
    } catch {
        return ITSME_E_INTERNAL
    }
}

// MARK: - Host-implemented secret store

/// A secret store whose items live wherever the host's callbacks put them.
/// Callbacks of one store never run concurrently.
final class CallbackSecretStore: SecretStore, @unchecked Sendable {
    typealias GetFunction = @convention(c) (
        UnsafeMutableRawPointer?, UnsafePointer<CChar>?, UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?
    ) -> itsme_result
    typealias PutFunction = @convention(c) (
        UnsafeMutableRawPointer?, UnsafePointer<CChar>?, UnsafePointer<UInt8>?, Int, itsme_accessibility
    ) -> itsme_result
    typealias RemoveFunction = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> itsme_result

    private let ctx: UnsafeMutableRawPointer?
    private let getFunction: GetFunction
    private let putFunction: PutFunction
    private let removeFunction: RemoveFunction
    private let destroy: (@convention(c) (UnsafeMutableRawPointer?) -> Void)?
    private let lock = CheckedLock()
    private static let firstGuess = 256

    /// Copies the table; nil unless get, put and remove are all set.
    init?(_ callbacks: itsme_secret_store_callbacks) {
        guard let get = callbacks.get, let put = callbacks.put, let remove = callbacks.remove else { return nil }
        ctx = callbacks.ctx
        getFunction = get
        putFunction = put
        removeFunction = remove
        destroy = callbacks.destroy
    }

    deinit { destroy?(ctx) }

    /// A callback of this store that uses the store again, on its thread.
    private func calledBack(_ name: String) -> ItsMeError {
        ItsMeError(.secretStore, "secret store item \(name) was asked for from inside one of the same store's callbacks")
    }

    private func failure(_ operation: String, _ rc: itsme_result, _ name: String) -> ItsMeError {
        ItsMeError(.secretStore, "secret store callback \(operation)(\(name)) failed with result code \(rc)")
    }

    func get(_ name: String) throws -> SecretBytes? {
        try SecretStoreName.check(name)
        return try lock.withLock(reentered: calledBack(name)) { () -> SecretBytes? in
            var cap = Self.firstGuess
            for _ in 0..<2 {
                var buffer = try SecretBytes(count: cap)
                var length = 0
                let rc = name.withCString { n in
                    buffer.withMutableBytes { b in
                        getFunction(ctx, n, b.bindMemory(to: UInt8.self).baseAddress, cap, &length)
                    }
                }
                switch rc {
                case ITSME_OK:
                    guard length >= 0, length <= cap else {
                        throw ItsMeError(.secretStore, "secret store callback get(\(name)) reported \(length) bytes for a \(cap)-byte buffer")
                    }
                    return try buffer.withBytes { try SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0.prefix(length))) }
                case ITSME_E_NOT_FOUND:
                    return nil
                case ITSME_E_BUFFER_TOO_SMALL:
                    guard length > cap, length <= SecretStoreName.maxItemSize else {
                        throw ItsMeError(.secretStore, "secret store callback get(\(name)) asked for an invalid size \(length)")
                    }
                    cap = length
                default:
                    throw failure("get", rc, name)
                }
            }
            throw ItsMeError(.secretStore, "secret store callback get(\(name)) kept reporting a too-small buffer")
        }
    }

    func put(_ name: String, _ value: UnsafeRawBufferPointer, accessibility: Accessibility) throws {
        try SecretStoreName.check(name)
        try lock.withLock(reentered: calledBack(name)) {
            let rc = name.withCString { n in
                withNonNilBytes(value) { putFunction(ctx, n, $0, value.count, accessibility.rawValue) }
            }
            guard rc == ITSME_OK else { throw failure("put", rc, name) }
        }
    }

    func remove(_ name: String) throws -> Bool {
        try SecretStoreName.check(name)
        return try lock.withLock(reentered: calledBack(name)) {
            let rc = name.withCString { removeFunction(ctx, $0) }
            switch rc {
            case ITSME_OK: return true
            case ITSME_E_NOT_FOUND: return false
            default: throw failure("remove", rc, name)
            }
        }
    }
}

private func withNonNilBytes<R>(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafePointer<UInt8>) -> R) -> R {
    if let p = bytes.baseAddress { return body(p.assumingMemoryBound(to: UInt8.self)) }
    var zero: UInt8 = 0
    return body(&zero)
}

// MARK: - Sessions on a contact store

/// A session object (voice verification, Online Verify, PIN Update) behind
/// a C handle: calls are serialised, the contact store it was made on is
/// kept alive, and failures are recorded on the handle.
final class SessionHandle<Session>: @unchecked Sendable {
    private let lock = CheckedLock()
    private let session: Session
    let store: ContactStoreHandle
    let lastError = LastError()

    init(_ session: Session, _ store: ContactStoreHandle) {
        self.session = session
        self.store = store
    }

    func run(_ body: (Session) throws -> Void) -> itsme_result {
        guarded(lastError.set) { try locked(body) }
    }

    /// Runs `body` under the session's lock, for a handle that drives this
    /// session and records its own errors (a room session).
    func locked<T>(_ body: (Session) throws -> T) throws -> T {
        try lock.withLock(reentered: reentered("the session")) { try body(session) }
    }
}

package func onSession<Session>(_ p: UnsafeRawPointer?, _ what: String, _ body: (Session) throws -> Void) -> itsme_result {
    guard let handle = unbox(p, as: SessionHandle<Session>.self) else {
        return guarded(ThreadLastError.set) { throw invalid("\(what) is NULL") }
    }
    return handle.run(body)
}

/// Creates a session on `store` and boxes it as `H`; the constructor's
/// failure is recorded on the store.
package func newSession<Session, H>(
    _ store: UnsafeMutablePointer<itsme_store>?, _ out: UnsafeMutablePointer<UnsafeMutablePointer<H>?>?,
    _ make: (ContactStore) throws -> Session
) -> itsme_result {
    guard let handle = unbox(store, as: ContactStoreHandle.self) else {
        return guarded(ThreadLastError.set) { throw invalid("store is NULL") }
    }
    return guarded(handle.lastError.set) {
        let out = try required(out, "out")
        out.pointee = box(SessionHandle(try make(handle.store), handle), as: H.self)
    }
}

package func sessionLastError<Session>(
    _ p: UnsafeRawPointer?, _: Session.Type, _ buf: UnsafeMutablePointer<CChar>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) -> itsme_result {
    guard let handle = unbox(p, as: SessionHandle<Session>.self) else { return ITSME_E_INVALID_ARGUMENT }
    return copyLastError(handle.lastError.get(), buf, cap, outLen)
}

/// Writes the next queued message of a session: OK with *out_len 0 when
/// there is none; the message is removed only once written.
package func writeNextMessage(
    _ next: [UInt8]?, _ markSent: () -> Void, _ out: UnsafeMutablePointer<UInt8>?, _ cap: UInt,
    _ outLen: UnsafeMutablePointer<UInt>?
) throws {
    try checkOutput(out, cap, outLen)
    guard let next else {
        outLen!.pointee = 0
        return
    }
    try next.withUnsafeBytes { try writeBytes($0, to: out, cap: cap, outLen: outLen) }
    markSent()
}

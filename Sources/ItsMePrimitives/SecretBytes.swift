import CSodium
#if canImport(Glibc)
import Glibc
#endif

/// Anything whose bytes can be borrowed for the duration of a call: public
/// data (`[UInt8]`, slices, raw buffers) and secrets (`SecretBytes`) alike,
/// so one crypto API serves both without copying secrets into the heap.
public protocol ByteView: ~Copyable {
    /// Calls `body` with the bytes, valid only for the duration of the call; the
    /// buffer must not escape it. Rethrows what `body` throws.
    func withBytes<R: ~Copyable>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
}

// The conformances are inlined so that generic code in another module (the
// core's, over any ByteView) is specialised for them rather than paying for
// generic metadata on every call.
extension Array: ByteView where Element == UInt8 {
    /// The array's bytes, borrowed for the duration of `body`.
    @inlinable
    public func withBytes<R: ~Copyable>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        // The standard library's closure APIs require a copyable result.
        var result: R? = nil
        try withUnsafeBytes { result = try body($0) }
        return result.take()!
    }
}

extension ArraySlice: ByteView where Element == UInt8 {
    /// The slice's bytes, borrowed for the duration of `body`.
    @inlinable
    public func withBytes<R: ~Copyable>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var result: R? = nil
        try withUnsafeBytes { result = try body($0) }
        return result.take()!
    }
}

extension UnsafeRawBufferPointer: ByteView {
    /// The buffer itself, for the duration of `body`.
    @inlinable
    public func withBytes<R: ~Copyable>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(self)
    }
}

/// Secret bytes in guarded memory (`sodium_malloc`: guard pages, locked
/// against swapping where the system allows), wiped when the value dies.
///
/// The type is `~Copyable`: a secret cannot be duplicated by accident, only
/// by an explicit `copy()`. It has no `description` and cannot be passed to
/// string interpolation, so it cannot end up in a log.
public struct SecretBytes: ~Copyable, ByteView, @unchecked Sendable {
    @usableFromInline let base: UnsafeMutableRawPointer
    /// The number of secret bytes.
    public let count: Int

    /// `count` zero bytes in guarded memory, owned by the new value and wiped
    /// when it dies. Throws `.invalidArgument` for a negative count,
    /// `.outOfMemory` if guarded memory cannot be allocated.
    public init(count: Int) throws {
        guard count >= 0 else { throw ItsMeError(.invalidArgument, "a secret of \(count) bytes") }
        #if ITSME_FUZZING
        // The fuzz targets (scripts/fuzz): plain memory, which AddressSanitizer
        // checks byte by byte (guard pages only catch a run past the page),
        // and no mmap and mprotect for every secret.
        guard let p = malloc(max(count, 1)) else {
            throw ItsMeError(.outOfMemory, "cannot allocate \(count) bytes")
        }
        #else
        // sodium_malloc(0) is legal but not every platform agrees on it.
        guard let p = sodium_malloc(max(count, 1)) else {
            throw ItsMeError(.outOfMemory, "cannot allocate \(count) bytes of guarded memory")
        }
        #endif
        sodium_memzero(p, max(count, 1))
        base = p
        self.count = count
    }

    /// A copy of `bytes` in guarded memory: how a host's `SecretStore`
    /// returns an item it read. The caller remains responsible for wiping
    /// its own copy (`wipe(_:)`). Throws `.outOfMemory` if guarded memory
    /// cannot be allocated.
    public init<B: ByteView & ~Copyable>(copying bytes: borrowing B) throws {
        let n = bytes.withBytes { $0.count }
        try self.init(count: n)
        let dst = base
        bytes.withBytes { src in
            if let s = src.baseAddress, n > 0 { dst.copyMemory(from: s, byteCount: n) }
        }
    }

    /// `count` bytes from a random source.
    package init<R: RandomSource>(randomCount count: Int, using rng: inout R) throws {
        try self.init(count: count)
        rng.fill(UnsafeMutableRawBufferPointer(start: base, count: count))
    }

    deinit {
        #if ITSME_FUZZING
        sodium_memzero(base, max(count, 1))
        free(base)
        #else
        sodium_free(base)  // wipes before unmapping
        #endif
    }

    /// The secret, borrowed for the duration of `body`: the buffer must not
    /// escape it, and any copy `body` makes is the caller's to wipe (`wipe(_:)`).
    @inlinable
    public func withBytes<R: ~Copyable>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    @inlinable
    package mutating func withMutableBytes<R: ~Copyable>(
        _ body: (UnsafeMutableRawBufferPointer) throws -> R
    ) rethrows -> R {
        try body(UnsafeMutableRawBufferPointer(start: base, count: count))
    }

    /// An explicit copy, for the few places that need two owners.
    /// The copy is a new owner, wiped when it dies. Throws `.outOfMemory` if
    /// guarded memory cannot be allocated.
    package func copy() throws -> SecretBytes {
        try SecretBytes(copying: self)
    }

    /// Constant-time equality (`sodium_memcmp`). Lengths are not secret:
    /// values of different lengths are unequal.
    package func constantTimeEquals<B: ByteView & ~Copyable>(_ other: borrowing B) -> Bool {
        withBytes { a in other.withBytes { b in ConstantTime.equal(a, b) } }
    }

    /// The bytes as a plain array. Only for tests and for values that stop
    /// being secret (a public key derived from a secret).
    package func unsafeExportedArray() -> [UInt8] {
        withBytes { Array($0) }
    }
}

/// Comparison whose running time depends only on the length.
public enum ConstantTime {
    /// Whether `a` and `b` hold the same bytes (`sodium_memcmp`). Buffers of
    /// different lengths are unequal at once: lengths are not secret.
    public static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        guard a.count > 0 else { return true }
        return sodium_memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0
    }

    /// Whether `a` and `b` hold the same bytes, in time that depends only on
    /// their length; either may be a `SecretBytes`, borrowed, not copied.
    @inlinable
    public static func equal<A: ByteView & ~Copyable, B: ByteView & ~Copyable>(
        _ a: borrowing A, _ b: borrowing B
    ) -> Bool {
        a.withBytes { x in b.withBytes { y in equal(x, y) } }
    }
}

/// Wipes a plain array in place (for the rare transient copy a C API forces).
public func wipe(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { buf in
        if let p = buf.baseAddress { sodium_memzero(p, buf.count) }
    }
}

/// Wipes memory in place (a secret's buffer that must be cleared early).
package func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
    if let p = buffer.baseAddress, buffer.count > 0 { sodium_memzero(p, buffer.count) }
}

/// A source of random bytes. Every operation that draws randomness takes
/// one, so tests can replace the system generator with a reproducible one.
public protocol RandomSource {
    /// Fills `buffer` with random bytes. Must not fail: a source that cannot
    /// produce randomness must stop the process rather than return.
    mutating func fill(_ buffer: UnsafeMutableRawBufferPointer)
}

extension RandomSource {
    /// `count` random bytes in a new array: for values that are not secret
    /// (nonces, identifiers, keys sent in the clear), since an array is not
    /// wiped. Secrets go to `SecretBytes` instead.
    public mutating func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { fill($0) }
        return out
    }
}

/// The operating system's generator, through libsodium (`randombytes_buf`).
public struct SystemRandom: RandomSource {
    /// The system generator; it needs no state of its own.
    public init() {}
    /// Fills `buffer` from the operating system's generator (`randombytes_buf`).
    public mutating func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let p = buffer.baseAddress, buffer.count > 0 else { return }
        randombytes_buf(p, buffer.count)
    }
}

/// A reproducible stream for tests and test vectors: the ChaCha20 key
/// stream under a 32-byte seed (libsodium's `randombytes_buf_deterministic`
/// on a seed that is ratcheted with SHA-256 after each call). Never use it
/// for real keys.
package struct DeterministicRandom: RandomSource {
    private var seed: [UInt8]

    package init(seed: [UInt8]) {
        precondition(seed.count == Int(randombytes_SEEDBYTES), "seed must be 32 bytes")
        self.seed = seed
    }

    package mutating func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let p = buffer.baseAddress, buffer.count > 0 else { return }
        seed.withUnsafeBufferPointer { randombytes_buf_deterministic(p, buffer.count, $0.baseAddress!) }
        seed = SHA256.hash(seed)
    }
}

/// A `SecretBytes` behind a reference, so that values carrying a secret (a
/// state machine's `State`, an action it returns) stay copyable. The bytes
/// are zeroed and freed when the last reference goes.
package final class SecretBox: ByteView, @unchecked Sendable {
    package private(set) var bytes: SecretBytes

    package init(_ bytes: consuming SecretBytes) { self.bytes = bytes }

    package init<B: ByteView & ~Copyable>(copying source: borrowing B) throws { bytes = try SecretBytes(copying: source) }

    package var count: Int { bytes.count }

    /// Zeroes the bytes now, for every holder (a machine that failed).
    package func wipe() { bytes.withMutableBytes { ItsMePrimitives.wipe($0) } }

    /// Writes into the bytes, for every holder: a value derived into the
    /// slot its allocation keeps for it.
    package func withMutableBytes<R: ~Copyable>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withMutableBytes(body)
    }

    /// The slice's bytes, borrowed for the duration of `body`.
    package func withBytes<R: ~Copyable>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withBytes(body)
    }
}

/// A range of a `SecretBox`: one guarded allocation holds several secrets
/// drawn or derived together (an exchange's ephemeral and device secrets, a
/// session's direction keys), each read through its own named range.
package struct SecretRange: ByteView, @unchecked Sendable {
    package let box: SecretBox
    package let range: Range<Int>

    /// `range` must lie within the box (a programming error otherwise: the
    /// ranges are constants of the types that make them).
    package init(_ box: SecretBox, _ range: Range<Int>) {
        precondition(range.lowerBound >= 0 && range.upperBound <= box.count, "a secret range outside its box")
        self.box = box
        self.range = range
    }

    /// The whole box as one range.
    package init(_ box: SecretBox) { self.init(box, 0..<box.count) }

    package var count: Int { range.count }

    package func withBytes<R: ~Copyable>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try box.withBytes { try body(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// Zeroes the whole box (every range of it), for every holder.
    package func wipe() { box.wipe() }
}

/// Bytes that are wiped when the last reference goes, in ordinary memory:
/// for a value the peer sees too (a QR payload, the device secret a peer
/// sent), where a guarded allocation costs more than it protects.
package final class SensitiveBytes: ByteView, @unchecked Sendable {
    private var bytes: [UInt8]

    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    deinit { wipe(&bytes) }

    package var count: Int { bytes.count }

    package func withBytes<R: ~Copyable>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try bytes.withBytes(body)
    }
}

import ItsMePrimitives

/// Builds the binary records the library stores (big-endian integers,
/// explicit lengths). The bytes go to guarded memory when they are secret:
/// write into a `SecretBytes` of the known final size with `RecordWriter`.
package struct RecordWriter: ~Copyable {
    private(set) var buffer: SecretBytes
    private var offset = 0

    package init(count: Int) throws { buffer = try SecretBytes(count: count) }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        let at = offset
        precondition(at + bytes.count <= buffer.count, "record overflow")
        buffer.withMutableBytes { dst in
            if bytes.count > 0 { dst.baseAddress!.advanced(by: at).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
        }
        offset += bytes.count
    }

    package mutating func append<B: ByteView & ~Copyable>(_ bytes: borrowing B) {
        bytes.withBytes { append($0) }
    }

    package mutating func append(_ byte: UInt8) { withUnsafeBytes(of: byte) { append($0) } }
    package mutating func append(_ value: UInt16) { withUnsafeBytes(of: value.bigEndian) { append($0) } }
    package mutating func append(_ value: UInt32) { withUnsafeBytes(of: value.bigEndian) { append($0) } }
    package mutating func append(_ value: UInt64) { withUnsafeBytes(of: value.bigEndian) { append($0) } }
    package mutating func append(_ value: Int64) { withUnsafeBytes(of: value.bigEndian) { append($0) } }

    package consuming func finish() -> SecretBytes {
        precondition(offset == buffer.count, "record underflow")
        return buffer
    }
}

/// Reads a stored record, throwing `.corruptData` on any shortfall.
package struct RecordReader {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0
    private let what: String
    private let kind: ItsMeError.Kind

    /// `kind` is the error for a shortfall: `.corruptData` for what we
    /// stored, `.malformedMessage` for what a peer sent.
    package init(_ bytes: UnsafeRawBufferPointer, what: String, kind: ItsMeError.Kind = .corruptData) {
        self.bytes = bytes
        self.what = what
        self.kind = kind
    }

    private mutating func take(_ n: Int) throws -> UnsafeRawBufferPointer {
        guard n >= 0, bytes.count - offset >= n else {
            throw ItsMeError(kind, "\(what) is truncated")
        }
        defer { offset += n }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + n])
    }

    package mutating func byte() throws -> UInt8 { try take(1)[0] }

    package mutating func uint16() throws -> UInt16 {
        try take(2).reduce(0) { $0 << 8 | UInt16($1) }
    }

    package mutating func uint32() throws -> UInt32 {
        try take(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    package mutating func uint64() throws -> UInt64 {
        try take(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    package mutating func int64() throws -> Int64 { Int64(bitPattern: try uint64()) }

    package mutating func array(_ n: Int) throws -> [UInt8] { Array(try take(n)) }

    /// Borrowed bytes, valid as long as the record's buffer.
    package mutating func slice(_ n: Int) throws -> UnsafeRawBufferPointer { try take(n) }

    package var isAtEnd: Bool { offset == bytes.count }

    /// How many bytes are left to read.
    package var remaining: Int { bytes.count - offset }

    package mutating func secret(_ n: Int) throws -> SecretBytes { try SecretBytes(copying: try take(n)) }

    package func finish() throws {
        guard offset == bytes.count else {
            throw ItsMeError(kind, "\(what) has \(bytes.count - offset) unexpected trailing bytes")
        }
    }
}

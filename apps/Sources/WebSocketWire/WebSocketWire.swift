// The client side of a WebSocket (RFC 6455) on the wire, shared by the relay
// client's RoomSocket and the load generator's connections: the opening
// handshake (the request, its key, the check of the answer) and frames in
// and out (the header, the client's mask). No I/O and no state: each
// channel handler keeps its own buffers and decides what a frame means.
//
// The frame functions are @inlinable and always inlined, so that the load
// generator's per-frame path compiles them in place as if they were its own:
// sharing them costs that path no call and no allocation (the optimizer,
// left to itself, called frameHeader once per frame, which cost the
// generator about a sixth more CPU per frame in `make bench-relay`).
import NIOCore

public enum WebSocketWire {
    // MARK: The opening handshake

    /// The GUID a server appends to the key (RFC 6455 1.3).
    public static let acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// The longest answer to the upgrade request a client reads.
    public static let maxHead = 16_384

    /// A fresh `Sec-WebSocket-Key`: 16 random bytes in base64.
    public static func newKey() -> String {
        var generator = SystemRandomNumberGenerator()
        return base64((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// The `Sec-WebSocket-Accept` a server must answer to `key`:
    /// base64(SHA-1(key + GUID)).
    public static func accept(forKey key: String) -> String {
        base64(SHA1.hash(Array((key + acceptGUID).utf8)))
    }

    /// The HTTP/1.1 upgrade request for `path` at `host` (the Host header's
    /// value), with `key` from `newKey()`.
    public static func upgradeRequest(host: String, path: String, key: String, userAgent: String? = nil) -> String {
        "GET \(path) HTTP/1.1\r\nHost: \(host)\r\n" + (userAgent.map { "User-Agent: \($0)\r\n" } ?? "")
            + "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n"
    }

    /// The length of the HTTP head at the front of `bytes`, blank line
    /// included, or nil while it is incomplete.
    public static func headLength(_ bytes: ByteBufferView) -> Int? {
        var i = bytes.startIndex
        while i + 3 < bytes.endIndex {
            if bytes[i] == 13, bytes[i + 1] == 10, bytes[i + 2] == 13, bytes[i + 3] == 10 { return i + 4 - bytes.startIndex }
            i += 1
        }
        return nil
    }

    /// What is wrong with the answer to an upgrade request.
    public enum UpgradeProblem: Error, Equatable, Sendable {
        /// The answer is not an HTTP/1.x response.
        case notHTTP
        /// A status other than 101 (the answer's `Retry-After` in seconds, if
        /// it had a plain one).
        case refused(status: Int, retryAfter: Int?)
        /// A 101 without the headers RFC 6455 4.1 requires, or with an
        /// accept value that does not match the key.
        case malformed
        /// A 101 that turned on an extension the request did not offer.
        case unrequestedExtension
    }

    /// Checks the answer `head` (without its blank line) to a request made
    /// with `key`: nil if the WebSocket is open.
    public static func checkUpgrade(head: String, key: String) -> UpgradeProblem? {
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)[...]
        guard let statusLine = lines.popFirst() else { return .notHTTP }
        let status = statusLine.split(separator: " ", maxSplits: 2)
        guard status.count >= 2, status[0].hasPrefix("HTTP/1."), let code = Int(status[1]) else { return .notHTTP }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = trimmed(line[..<colon]).lowercased()
            let value = trimmed(line[line.index(after: colon)...])
            headers[name] = headers[name].map { $0 + ", " + value } ?? value
        }
        guard code == 101 else {
            var retryAfter: Int?
            if let text = headers["retry-after"], text.count <= 9, text.allSatisfy({ $0.isASCII && $0.isNumber }) {
                retryAfter = Int(text)
            }
            return .refused(status: code, retryAfter: retryAfter)
        }
        guard headers["upgrade"]?.lowercased() == "websocket",
            headers["connection"]?.lowercased().contains("upgrade") == true,
            headers["sec-websocket-accept"] == accept(forKey: key)
        else { return .malformed }
        guard headers["sec-websocket-extensions"] == nil else { return .unrequestedExtension }
        return nil
    }

    private static func trimmed(_ text: Substring) -> String {
        String(text.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }

    // MARK: Frames in

    /// A frame's header (RFC 6455 5.2).
    public struct FrameHeader {
        /// The FIN bit.
        public var fin: Bool
        /// RSV1 to RSV3, in place (0x70 of the first byte).
        public var reserved: UInt8
        public var opcode: UInt8
        /// The masking key, if the MASK bit is set (never, from a server).
        public var mask: UInt32?
        /// The payload's length.
        public var length: UInt64
        /// The header's own length in bytes (2 to 14).
        public var size: Int

        @inlinable
        init(fin: Bool, reserved: UInt8, opcode: UInt8, mask: UInt32?, length: UInt64, size: Int) {
            self.fin = fin
            self.reserved = reserved
            self.opcode = opcode
            self.mask = mask
            self.length = length
            self.size = size
        }
    }

    /// The header of the frame at the front of `buffer`, nothing consumed,
    /// or nil while the header is incomplete. The payload may be incomplete
    /// still: it is whole once `buffer.readableBytes >= size + length`.
    @inlinable @inline(__always)
    public static func frameHeader(_ buffer: ByteBuffer) -> FrameHeader? {
        let available = buffer.readableBytes
        guard available >= 2 else { return nil }
        let start = buffer.readerIndex
        let b0: UInt8 = buffer.getInteger(at: start)!
        let b1: UInt8 = buffer.getInteger(at: start + 1)!
        var length = UInt64(b1 & 0x7F)
        var size = 2
        if length == 126 {
            guard available >= 4 else { return nil }
            length = UInt64(buffer.getInteger(at: start + 2, as: UInt16.self)!)
            size = 4
        } else if length == 127 {
            guard available >= 10 else { return nil }
            length = buffer.getInteger(at: start + 2, as: UInt64.self)!
            size = 10
        }
        var mask: UInt32?
        if b1 & 0x80 != 0 {
            guard available >= size + 4 else { return nil }
            mask = buffer.getInteger(at: start + size, as: UInt32.self)!
            size += 4
        }
        return FrameHeader(fin: b0 & 0x80 != 0, reserved: b0 & 0x70, opcode: b0 & 0x0F, mask: mask, length: length, size: size)
    }

    // MARK: Frames out

    /// Writes a final frame's header, masked with `mask` as a client must.
    @inlinable @inline(__always)
    public static func writeFrameHeader(opcode: UInt8, length: Int, mask: UInt32, into buffer: inout ByteBuffer) {
        buffer.writeInteger(0x80 | opcode)
        if length < 126 {
            buffer.writeInteger(UInt8(0x80 | length))
        } else if length <= 0xFFFF {
            buffer.writeInteger(UInt8(0x80 | 126))
            buffer.writeInteger(UInt16(length))
        } else {
            buffer.writeInteger(UInt8(0x80 | 127))
            buffer.writeInteger(UInt64(length))
        }
        buffer.writeInteger(mask)
    }

    /// Writes a final client frame: its header, then `payload` masked with
    /// `mask` (its bytes XORed in turn with the mask's, high byte first).
    @inlinable
    public static func writeFrame<Bytes: Collection>(opcode: UInt8, payload: Bytes, mask: UInt32, into buffer: inout ByteBuffer)
    where Bytes.Element == UInt8 {
        let count = payload.count
        buffer.reserveCapacity(minimumWritableBytes: count + 14)
        writeFrameHeader(opcode: opcode, length: count, mask: mask, into: &buffer)
        let key = mask.bigEndian
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { raw in
            withUnsafeBytes(of: key) { k in
                var i = 0
                for byte in payload {
                    raw[i] = byte ^ k[i & 3]
                    i += 1
                }
            }
            return count
        }
    }

    /// A random masking key.
    public static func randomMask() -> UInt32 {
        var generator = SystemRandomNumberGenerator()
        return UInt32.random(in: 0...UInt32.max, using: &generator)
    }
}

// MARK: - base64 and SHA-1, for the handshake only

private let base64Alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

/// Standard base64 with padding (RFC 4648 4).
func base64(_ bytes: [UInt8]) -> String {
    var out = [UInt8]()
    out.reserveCapacity((bytes.count + 2) / 3 * 4)
    var i = 0
    while i < bytes.count {
        let b0 = Int(bytes[i])
        let b1 = i + 1 < bytes.count ? Int(bytes[i + 1]) : 0
        let b2 = i + 2 < bytes.count ? Int(bytes[i + 2]) : 0
        out.append(base64Alphabet[b0 >> 2])
        out.append(base64Alphabet[((b0 & 3) << 4) | (b1 >> 4)])
        out.append(i + 1 < bytes.count ? base64Alphabet[((b1 & 15) << 2) | (b2 >> 6)] : UInt8(ascii: "="))
        out.append(i + 2 < bytes.count ? base64Alphabet[b2 & 63] : UInt8(ascii: "="))
        i += 3
    }
    return String(decoding: out, as: UTF8.self)
}

/// SHA-1, for the handshake's accept value only (RFC 6455 4.2.2).
enum SHA1 {
    static func hash(_ message: [UInt8]) -> [UInt8] {
        var h: [UInt32] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0]
        var data = message
        let bitLength = UInt64(message.count) * 8
        data.append(0x80)
        while data.count % 64 != 56 { data.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { data.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        var w = [UInt32](repeating: 0, count: 80)
        for chunk in stride(from: 0, to: data.count, by: 64) {
            for i in 0..<16 {
                let j = chunk + i * 4
                w[i] = UInt32(data[j]) << 24 | UInt32(data[j + 1]) << 16 | UInt32(data[j + 2]) << 8 | UInt32(data[j + 3])
            }
            for i in 16..<80 {
                let x = w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]
                w[i] = x << 1 | x >> 31
            }
            var (a, b, c, d, e) = (h[0], h[1], h[2], h[3], h[4])
            for i in 0..<80 {
                let (f, k): (UInt32, UInt32)
                switch i {
                case 0..<20: (f, k) = ((b & c) | (~b & d), 0x5A82_7999)
                case 20..<40: (f, k) = (b ^ c ^ d, 0x6ED9_EBA1)
                case 40..<60: (f, k) = ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC)
                default: (f, k) = (b ^ c ^ d, 0xCA62_C1D6)
                }
                let t = (a << 5 | a >> 27) &+ f &+ e &+ k &+ w[i]
                (e, d, c, b, a) = (d, c, b << 30 | b >> 2, a, t)
            }
            h[0] &+= a
            h[1] &+= b
            h[2] &+= c
            h[3] &+= d
            h[4] &+= e
        }
        return h.flatMap { v in [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: v >> UInt32($0)) } }
    }
}

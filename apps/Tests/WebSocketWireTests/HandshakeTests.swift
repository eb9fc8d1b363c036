import NIOCore
import XCTest

@testable import WebSocketWire

/// The opening handshake: SHA-1 and base64 against the standards' own
/// examples, the accept value of RFC 6455, and the check of the answer.
final class HandshakeTests: XCTestCase {
    private func hex(_ bytes: [UInt8]) -> String { bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() }

    func testSHA1MatchesTheStandardsVectors() {
        // RFC 3174 section 7.3 (FIPS 180-1 appendices A and B), and the empty message.
        XCTAssertEqual(hex(SHA1.hash(Array("abc".utf8))), "a9993e364706816aba3e25717850c26c9cd0d89d")
        XCTAssertEqual(
            hex(SHA1.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
        XCTAssertEqual(hex(SHA1.hash(Array(repeating: UInt8(ascii: "a"), count: 1_000_000))), "34aa973cd4c4daa4f61eeb2bdbad27316534016f")
        XCTAssertEqual(hex(SHA1.hash([])), "da39a3ee5e6b4b0d3255bfef95601890afd80709")
    }

    func testBase64MatchesRFC4648() {
        // RFC 4648 section 10.
        let cases = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy"]
        for (input, output) in cases { XCTAssertEqual(base64(Array(input.utf8)), output, input) }
    }

    func testAcceptKeyOfRFC6455() {
        // RFC 6455 section 1.3: the server's answer to the sample nonce.
        XCTAssertEqual(WebSocketWire.accept(forKey: "dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    func testKeysAreSixteenFreshBytes() {
        let keys = (0..<8).map { _ in WebSocketWire.newKey() }
        XCTAssertEqual(Set(keys).count, keys.count)
        for key in keys { XCTAssertEqual(key.count, 24); XCTAssertTrue(key.hasSuffix("==")) }
    }

    func testTheRequest() {
        XCTAssertEqual(
            WebSocketWire.upgradeRequest(host: "relay.example:8443", path: "/v1/rooms/ab", key: "k", userAgent: "ua"),
            "GET /v1/rooms/ab HTTP/1.1\r\nHost: relay.example:8443\r\nUser-Agent: ua\r\nUpgrade: websocket\r\n"
                + "Connection: Upgrade\r\nSec-WebSocket-Key: k\r\nSec-WebSocket-Version: 13\r\n\r\n")
    }

    func testTheAnswerIsChecked() {
        let key = "dGhlIHNhbXBsZSBub25jZQ=="
        let good = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: WebSocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Accept:  s3pPLMBiTxaQ9kYGzzhZRbK+xOo= "
        XCTAssertNil(WebSocketWire.checkUpgrade(head: good, key: key))
        XCTAssertEqual(WebSocketWire.checkUpgrade(head: good, key: "another"), .malformed)
        XCTAssertEqual(WebSocketWire.checkUpgrade(head: good + "\r\nSec-WebSocket-Extensions: permessage-deflate", key: key), .unrequestedExtension)
        XCTAssertEqual(
            WebSocketWire.checkUpgrade(head: "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", key: key),
            .malformed)
        XCTAssertEqual(WebSocketWire.checkUpgrade(head: "HTTP/1.1 503 Busy\r\nRetry-After: 7", key: key), .refused(status: 503, retryAfter: 7))
        XCTAssertEqual(WebSocketWire.checkUpgrade(head: "HTTP/1.1 429 Slow\r\nRetry-After: soon", key: key), .refused(status: 429, retryAfter: nil))
        XCTAssertEqual(WebSocketWire.checkUpgrade(head: "SSH-2.0-OpenSSH", key: key), .notHTTP)
        XCTAssertEqual(WebSocketWire.checkUpgrade(head: "", key: key), .notHTTP)
    }

    func testTheHeadEndsAtTheBlankLine() {
        let buffer = ByteBuffer(string: "HTTP/1.1 101 OK\r\nA: b\r\n\r\n\u{82}\u{0}")
        XCTAssertEqual(WebSocketWire.headLength(buffer.readableBytesView), 25)
        XCTAssertNil(WebSocketWire.headLength(ByteBuffer(string: "HTTP/1.1 101 OK\r\nA: b\r\n\r").readableBytesView))
        // Counted from the reader index.
        var later = ByteBuffer(string: "xxHTTP/1.1 101 OK\r\n\r\n")
        later.moveReaderIndex(forwardBy: 2)
        XCTAssertEqual(WebSocketWire.headLength(later.readableBytesView), 19)
    }
}

/// Frames: what the writer writes, the header reader reads back, at each
/// of the three length forms.
final class FrameTests: XCTestCase {
    func testWrittenFramesReadBack() throws {
        for count in [0, 1, 125, 126, 65_535, 65_536, 70_000] {
            let payload = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            var buffer = ByteBuffer()
            WebSocketWire.writeFrame(opcode: 0x2, payload: payload, mask: 0x0102_0304, into: &buffer)
            let header = try XCTUnwrap(WebSocketWire.frameHeader(buffer))
            XCTAssertEqual(header.size, (count < 126 ? 2 : count <= 0xFFFF ? 4 : 10) + 4, "\(count)")
            XCTAssertEqual(header.length, UInt64(count))
            XCTAssertTrue(header.fin)
            XCTAssertEqual(header.reserved, 0)
            XCTAssertEqual(header.opcode, 0x2)
            XCTAssertEqual(header.mask, 0x0102_0304)
            XCTAssertEqual(buffer.readableBytes, header.size + count)
            let masked = buffer.getBytes(at: header.size, length: count)!
            let key: [UInt8] = [1, 2, 3, 4]
            XCTAssertEqual(masked.enumerated().map { $0.element ^ key[$0.offset & 3] }, payload)
            // Every shorter prefix of the header is incomplete.
            for cut in 0..<header.size {
                XCTAssertNil(WebSocketWire.frameHeader(buffer.getSlice(at: 0, length: cut)!), "\(count) cut at \(cut)")
            }
        }
    }

    func testAServerFrame() throws {
        // RFC 6455 5.7: an unmasked text frame "Hello", and a fragment's start.
        let hello = ByteBuffer(bytes: [0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F])
        let header = try XCTUnwrap(WebSocketWire.frameHeader(hello))
        XCTAssertEqual([header.fin ? 1 : 0, Int(header.opcode), Int(header.length), header.size], [1, 1, 5, 2])
        XCTAssertNil(header.mask)
        let start = try XCTUnwrap(WebSocketWire.frameHeader(ByteBuffer(bytes: [0x41, 0x03, 0x48, 0x65, 0x6C])))
        XCTAssertFalse(start.fin)
        XCTAssertEqual(start.reserved, 0x40)
        XCTAssertEqual(start.opcode, 0x1)
    }
}

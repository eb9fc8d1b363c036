import ItsMeCore
@testable import RelayClient
import XCTest

/// The SHA-1 of the WebSocket handshake's accept key, against the
/// standards' own examples.
final class HandshakeTests: XCTestCase {
    private func hex(_ bytes: [UInt8]) -> String { Hex.encodeUpper(bytes).lowercased() }

    func testSHA1MatchesTheStandardsVectors() {
        // RFC 3174 section 7.3 (FIPS 180-1 appendices A and B), and the empty message.
        XCTAssertEqual(hex(SHA1.hash(Array("abc".utf8))), "a9993e364706816aba3e25717850c26c9cd0d89d")
        XCTAssertEqual(
            hex(SHA1.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
        XCTAssertEqual(hex(SHA1.hash(Array(repeating: UInt8(ascii: "a"), count: 1_000_000))), "34aa973cd4c4daa4f61eeb2bdbad27316534016f")
        XCTAssertEqual(hex(SHA1.hash([])), "da39a3ee5e6b4b0d3255bfef95601890afd80709")
    }

    func testAcceptKeyOfRFC6455() {
        // RFC 6455 section 1.3: the server's answer to the sample nonce.
        let key = "dGhlIHNhbXBsZSBub25jZQ=="
        let accept = Base64.encode(SHA1.hash(Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)), .standardPadded)
        XCTAssertEqual(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }
}

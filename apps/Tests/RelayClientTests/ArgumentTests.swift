import Foundation
import ItsMeKit
import RelayServer
import RelayClient
import XCTest

/// Relay URLs and arguments refused before any network call.
final class ArgumentTests: XCTestCase {
    override func setUpWithError() throws {
        try Sodium.initialize()
    }

    func testRelayURLsAreParsed() throws {
        let plain = try RelayURL("http://127.0.0.1:8080")
        XCTAssertFalse(plain.isSecure)
        XCTAssertEqual(plain.host, "127.0.0.1")
        XCTAssertEqual(plain.port, 8080)
        XCTAssertEqual(plain.pathPrefix, "")
        XCTAssertEqual(plain.text, "http://127.0.0.1:8080")

        let secure = try RelayURL(" https://Relay.Example/itsme/ ")
        XCTAssertTrue(secure.isSecure)
        XCTAssertEqual(secure.host, "relay.example")
        XCTAssertEqual(secure.port, 443)
        XCTAssertEqual(secure.pathPrefix, "/itsme")
        XCTAssertEqual(secure.text, "https://Relay.Example/itsme/")

        XCTAssertEqual(try RelayURL("http://relay.example/").pathPrefix, "")
        XCTAssertEqual(try RelayURL("http://relay.example").port, 80)
        XCTAssertTrue(try RelayURL("wss://relay.example").isSecure)
        XCTAssertFalse(try RelayURL("WS://relay.example:1").isSecure)
        XCTAssertEqual(try RelayURL("http://relay.example/a%20b").pathPrefix, "/a%20b")
    }

    func testBadRelayURLsAreRefused() {
        let bad = [
            "", "relay.example", "ftp://relay.example", "http://", "http:///path", "http://user:secret@relay.example",
            "http://relay.example?x=1", "http://relay.example/#top", "http://relay.example:0", "http://relay.example:70000",
            "http://relay.example:", "http://relay.example:8o", "http://[::1]:8080", "http://re lay.example",
            "http://relay.example/a b", "http://relay.example/%zz", "http://relay\u{e9}.example", "mailto:someone@relay.example",
            "http://:80", "http://-relay.example",
        ]
        for text in bad {
            XCTAssertThrowsError(try RelayURL(text), text) { error in
                XCTAssertEqual((error as? RelayError)?.kind, "bad-url", text)
                XCTAssertNil((error as? RelayError)?.status)
            }
        }
        // The refusal names what is wrong and does not echo a password.
        XCTAssertThrowsError(try RelayURL("https://relay.example:99999")) {
            XCTAssertTrue("\($0)".contains("port"))
        }
    }

    func testMalformedArgumentsAreRefusedBeforeAnyRequest() async throws {
        // Nothing listens on port 1: an argument that got through would fail
        // with a connection error instead.
        let url = try RelayURL("http://127.0.0.1:1")
        let mailbox = InviteMailbox(url, timeout: 5)
        let id = String(repeating: "0f", count: 16)
        let token = String(repeating: "x", count: 42) + "w"
        let calls: [(String, () async throws -> Void)] = [
            ("upper-case ID", { _ = try await mailbox.create(inviteID: id.uppercased()) }),
            ("short ID", { _ = try await mailbox.accept(inviteID: "abc") }),
            ("path in ID", { _ = try await mailbox.accept(inviteID: "../" + String(id.dropFirst(3))) }),
            ("short token", { _ = try await mailbox.post(inviteID: id, token: "abc", body: [1]) }),
            ("token of unused bits", { _ = try await mailbox.post(inviteID: id, token: String(repeating: "x", count: 43), body: [1]) }),
            ("token with a space", { try await mailbox.delete(inviteID: id, token: String(token.dropLast()) + " ") }),
            ("negative after", { _ = try await mailbox.fetch(inviteID: id, token: token, after: -1, wait: 0) }),
            ("long wait", { _ = try await mailbox.fetch(inviteID: id, token: token, after: 0, wait: 31) }),
            ("NaN wait", { _ = try await mailbox.fetch(inviteID: id, token: token, after: 0, wait: .nan) }),
            ("room ID", { _ = try await RelayRoom.join(url, roomID: "room", timeout: 1) }),
            ("negative timeout", { _ = try await RelayRoom.join(url, roomID: id, timeout: -1) }),
        ]
        for (what, call) in calls {
            let kind = await coreErrorKind(call)
            XCTAssertEqual(kind, .invalidArgument, what)
        }
    }

    func testRelayErrorDescriptions() {
        XCTAssertEqual(RelayError("no such invite", status: 404, kind: "not-found").description, "no such invite (404 not-found)")
        XCTAssertEqual(RelayError("the relay did not answer in time", kind: "timeout").description, "the relay did not answer in time (timeout)")
        XCTAssertEqual(RelayError("plain").description, "plain")
        XCTAssertEqual(RelayError("plain").localizedDescription, "plain")
        XCTAssertFalse(RelayError("x").inviteEnded)
    }

    func testTrustRootFilesThatCannotBeUsedAreNamed() throws {
        var url = try RelayURL("https://relay.example")
        let missing = NSTemporaryDirectory() + "itsme-no-such-ca-\(UUID().uuidString).pem"
        XCTAssertThrowsError(try url.addTrustRoots(pemFile: missing)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains(missing) && text.contains("No such file"), text)
        }
        let garbage = NSTemporaryDirectory() + "itsme-garbage-\(UUID().uuidString).pem"
        try Data("not a certificate\n".utf8).write(to: URL(fileURLWithPath: garbage))
        defer { try? FileManager.default.removeItem(atPath: garbage) }
        XCTAssertThrowsError(try url.addTrustRoots(pemFile: garbage)) { error in
            XCTAssertTrue("\(error)".contains(garbage), "\(error)")
        }
    }

    /// `--trusted-proxy` (the relay's): addresses and ranges, the client
    /// behind them, and entries refused with the reason.
    func testTrustedProxies() throws {
        let proxies = try TrustedProxies(parsing: ["10.0.0.0/8, 127.0.0.1", "fd00::/8"])
        for inside in ["10.1.2.3", "127.0.0.1", "fd12::1", "::ffff:10.9.9.9", "[fd00::2]", "fd00::3%eth0"] {
            XCTAssertTrue(proxies.contains(inside), inside)
        }
        for outside in ["11.0.0.1", "127.0.0.2", "fe80::1%lo", "::1", "", "relay.example"] {
            XCTAssertFalse(proxies.contains(outside), outside)
        }
        XCTAssertEqual(proxies.description, "10.0.0.0/8,127.0.0.1,fd00::/8")
        XCTAssertTrue(TrustedProxies().isEmpty)
        XCTAssertEqual(TrustedProxies().clientAddress(peer: "127.0.0.1", forwardedFor: "192.0.2.1"), "127.0.0.1")

        XCTAssertEqual(proxies.clientAddress(peer: "198.51.100.7", forwardedFor: "192.0.2.1"), "198.51.100.7")
        XCTAssertEqual(proxies.clientAddress(peer: "127.0.0.1", forwardedFor: nil), "127.0.0.1")
        XCTAssertEqual(proxies.clientAddress(peer: "127.0.0.1", forwardedFor: " , "), "127.0.0.1")
        XCTAssertEqual(proxies.clientAddress(peer: "127.0.0.1", forwardedFor: "203.0.113.9, 192.0.2.1"), "192.0.2.1")
        XCTAssertEqual(proxies.clientAddress(peer: "127.0.0.1", forwardedFor: "192.0.2.1, 10.0.0.5, 10.0.0.6"), "192.0.2.1")
        XCTAssertEqual(proxies.clientAddress(peer: "127.0.0.1", forwardedFor: "10.0.0.5, 10.0.0.6"), "10.0.0.5")
        XCTAssertEqual(proxies.clientAddress(peer: "127.0.0.1", forwardedFor: "2001:DB8:0:0::1"), "2001:db8::1")
        XCTAssertEqual(proxies.clientAddress(peer: "127.0.0.1", forwardedFor: "not-an-address"), "not-an-address")

        let refused: [(String, String)] = [
            ("10.0.0.300", "is not an IPv4 or IPv6 address"), ("10.0.0.0/33", "prefix length"), ("fd00::/129", "prefix length"),
            ("10.0.0.1/8", "10.0.0.0/8"), ("10.0.0.0/-1", "prefix length"), ("1.2.3.4,,5.6.7.8", "empty entry"),
            ("proxy.example", "is not an IPv4"), ("10.0.0.0/", "prefix length"),
        ]
        for (entry, reason) in refused {
            XCTAssertThrowsError(try TrustedProxies(parsing: [entry]), entry) { error in
                let text = "\(error)"
                XCTAssertTrue(text.hasPrefix("--trusted-proxy \"") && text.contains(reason), text)
            }
        }
    }
}

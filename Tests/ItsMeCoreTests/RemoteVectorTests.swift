import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

/// remote.json (section 16) and reexchange.json (section 8.2), played
/// through the library.
extension ProtocolVectorTests {
    func testRemote() throws {
        let v = try object("remote")
        let codes = list(v, "codes")
        XCTAssertFalse(codes.isEmpty)
        for e in codes {
            let input = text(e, "input_text")
            if e["error_text"] != nil {
                XCTAssertEqual(text(e, "error_text"), "invalid")
                XCTAssertThrowsError(try RemoteCode(parsing: input), input)
            } else {
                let code = try RemoteCode(parsing: input)
                XCTAssertEqual(code.canonical, text(e, "canonical_text"), input)
                XCTAssertEqual(code.text, text(e, "shown_text"), input)
            }
        }
        let exchanges = list(v, "exchanges")
        XCTAssertEqual(exchanges.count, 2)
        for e in exchanges {
            let realtime = flag(e, "realtime")
            let pa = sub(e, "inviter"), pb = sub(e, "invitee")
            var (a, ra) = try party(pa)
            var (b, rb) = try party(pb)
            let xa = try Exchange.invite(identity: a, store: try contacts(a), realtime: realtime, now: now, random: &ra)
            XCTAssertEqual(xa.inviteCode?.text, text(e, "invite_code_text"))
            XCTAssertEqual(xa.encryptionCode?.text, text(e, "encryption_code_text"))
            XCTAssertEqual(xa.relayID.map(hex), text(e, realtime ? "room_id" : "invite_id"))
            // The invite code as a person may type it (lower case).
            let xb = try Exchange.acceptInvite(
                identity: b, store: try contacts(b), inviteCode: text(e, "invite_code_text").lowercased(), encryptionCode: text(e, "encryption_code_text"),
                realtime: realtime, now: now, random: &rb)
            var sent: [[UInt8]] = []
            for (from, to) in [(xa, xb), (xb, xa), (xa, xb)] {
                let m = try XCTUnwrap(from.peekOutgoing())
                from.markSent()
                sent.append(m)
                try to.receive(m, now: now)
            }
            XCTAssertEqual(sent.map(hex), ["invite_message", "accept_message", "reply_message"].map { text(e, $0) })
            checkSAS(xa.sas, e)
            checkSAS(xb.sas, e)
            XCTAssertEqual(xa.peer?.name, text(pb, "name_text"))
            XCTAssertEqual(xb.peer?.name, text(pa, "name_text"))
            try checkSeed(
                e, secretA: bytes(pa, "ephemeral_secret"), publicA: bytes(pa, "ephemeral_public"), secretB: bytes(pb, "ephemeral_secret"),
                publicB: bytes(pb, "ephemeral_public"), fa: text(pa, "fingerprint_text"), fb: text(pb, "fingerprint_text"))
            // The decisions (16.3 step 5).
            let inviteeConfirms = int(pb, "decision") == 1
            XCTAssertEqual(int(pa, "decision"), 1)
            try xa.confirm(now: now)
            if inviteeConfirms { try xb.confirm(now: now) } else { try xb.reject() }
            let outB = try XCTUnwrap(xb.peekOutgoing())
            xb.markSent()
            XCTAssertEqual(hex(outB), text(pb, "decision_message"))
            try xa.receive(outB, now: now)
            let outA = try XCTUnwrap(xa.peekOutgoing())
            xa.markSent()
            XCTAssertEqual(hex(outA), text(pa, "decision_message"))
            XCTAssertEqual(try xa.settle(now: now) != nil, inviteeConfirms)
            try xb.receive(outA, now: now)
            XCTAssertTrue(xb.flags.contains(.peerConfirmed))
        }
        // Refusals (16.3), each against a fresh side of the invite exchange.
        let invite = exchanges[0]
        XCTAssertFalse(flag(invite, "realtime"))
        let rejections = list(v, "rejections")
        XCTAssertFalse(rejections.isEmpty)
        for r in rejections {
            let what = text(r, "case_text")
            let side: Exchange
            if text(r, "receiver_text") == "inviter" {
                var (a, ra) = try party(sub(invite, "inviter"))
                side = try Exchange.invite(identity: a, store: try contacts(a), realtime: false, now: now, random: &ra)
                _ = side.peekOutgoing()  // its INVITE, drawn at creation, is not needed
            } else {
                XCTAssertEqual(text(r, "receiver_text"), "invitee")
                var (b, rb) = try party(sub(invite, "invitee"))
                side = try Exchange.acceptInvite(
                    identity: b, store: try contacts(b), inviteCode: text(invite, "invite_code_text"), encryptionCode: text(invite, "encryption_code_text"),
                    realtime: false, now: now, random: &rb)
            }
            let messages = hexList(r, "messages")
            var got = "accepted"
            for (n, m) in messages.enumerated() {
                let kind = errorKind { try side.receive(m, now: now) }
                if n < messages.count - 1 { XCTAssertNil(kind, "\(what): message \(n)") } else { got = kind.map(Self.errorName) ?? "accepted" }
            }
            XCTAssertEqual(got, text(r, "result"), what)
        }
    }

    func testReexchange() throws {
        let v = try object("reexchange")
        let pa = sub(v, "a"), pb = sub(v, "b")
        var (a, ra) = try party(pa)
        var (b, rb) = try party(pb)
        let dir = try temporaryDirectory()
        let storeA = try ContactStore(path: dir + "/a.db", identity: a)
        let storeB = try ContactStore(path: dir + "/b.db", identity: b)
        let rounds = list(v, "exchanges")
        XCTAssertEqual(rounds.count, 2)
        var contactID: Int64?
        for e in rounds {
            let t = Int64(int(e, "now"))
            if b.name != text(e, "b_name_text") { try b.setName(text(e, "b_name_text")) }
            let xa = try Exchange.qr(identity: a, store: storeA, now: t, random: &ra)
            let xb = try Exchange.qr(identity: b, store: storeB, now: t, random: &rb)
            XCTAssertEqual(xa.outgoingText, text(e, "a_payload_text"))
            XCTAssertEqual(xb.outgoingText, text(e, "b_payload_text"))
            try xa.receive(Array(xb.outgoingText.utf8), now: t)
            try xb.receive(Array(xa.outgoingText.utf8), now: t)
            XCTAssertEqual(xa.sas?.text, text(e, "sas_text"))
            XCTAssertEqual(xb.sas?.text, text(e, "sas_text"))
            let idA = try xa.confirm(now: t)
            try xb.confirm(now: t)
            XCTAssertEqual(xa.flags.contains(.knownContact), flag(e, "known_contact"))
            if let contactID { XCTAssertEqual(idA, contactID, "the same contact, its id kept") }
            contactID = idA
            let expected = sub(e, "a_stored")
            let stored = try storeA.contact(id: idA)
            XCTAssertEqual(stored.name, text(expected, "name_text"))
            XCTAssertEqual(stored.state, .verified)
            XCTAssertEqual(Int(stored.verifiedAt ?? -1), int(expected, "verified_at"))
            XCTAssertEqual("\(stored.exchangeMethod)", text(expected, "method_text"))
            XCTAssertEqual(hex(try storeA.seed(id: idA).unsafeExportedArray()), text(expected, "seed"))
            XCTAssertEqual(text(expected, "seed"), text(e, "seed"))
            XCTAssertTrue(try storeB.seed(id: try storeB.contact(publicKey: a.publicKey).id).constantTimeEquals(bytes(e, "seed")))
            let secrets = try storeA.deviceSecrets(id: idA)
            XCTAssertEqual(hex(secrets.mine.unsafeExportedArray()), text(e, "a_device_secret"))
            XCTAssertEqual(hex(secrets.theirs.unsafeExportedArray()), text(e, "b_device_secret"))
        }
        XCTAssertEqual(try storeA.count(), 1)
    }
}

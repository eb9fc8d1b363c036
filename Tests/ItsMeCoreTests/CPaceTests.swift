import Foundation
import XCTest

@testable import ItsMeBase
@testable import ItsMeFlows
@testable import ItsMeKit
@testable import ItsMeStore
import ItsMePrimitives

/// CPACE-RISTR255-SHA512 against the CFRG draft's own vectors (a copy of
/// ../shared/vectors/cpace-testvectors.json, key G_Coffee25519).
final class CPaceTests: XCTestCase {
    private var v: [String: Any] = [:]
    private var points: [String: Any] = [:]

    override func setUpWithError() throws {
        try Sodium.initialize()
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Vectors/cpace-ristretto255.json")
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as! [String: Any]
        v = json["G_Coffee25519"] as! [String: Any]
        points = json["G_Coffee25519_points"] as! [String: Any]
    }

    private func hex(_ key: String, in d: [String: Any]? = nil) -> [UInt8] {
        Hex.decode((d ?? v)[key] as! String)!
    }

    func testGeneratorSharesAndISKMatchTheDraft() throws {
        let g = try CPace.generator(prs: hex("PRS"), ci: hex("CI"), sid: hex("sid"))
        XCTAssertEqual(g.unsafeExportedArray(), hex("g"))
        let ya = hex("ya"), yb = hex("yb")
        let sharA = g.withBytes { gp in ya.withUnsafeBytes { CPace.scalarMult(scalar: $0, point: gp) } }
        let sharB = g.withBytes { gp in yb.withUnsafeBytes { CPace.scalarMult(scalar: $0, point: gp) } }
        XCTAssertEqual(sharA, hex("Ya"))
        XCTAssertEqual(sharB, hex("Yb"))
        let kA = ya.withUnsafeBytes { s in hex("Yb").withUnsafeBytes { CPace.scalarMult(scalar: s, point: $0) } }
        let kB = yb.withUnsafeBytes { s in hex("Ya").withUnsafeBytes { CPace.scalarMult(scalar: s, point: $0) } }
        XCTAssertEqual(kA, hex("K"))
        XCTAssertEqual(kB, hex("K"))
        let isk = try CPace.isk(sid: hex("sid"), k: hex("K"), ya: hex("Ya"), ada: hex("ADa"), yb: hex("Yb"), adb: hex("ADb"))
        XCTAssertEqual(isk.unsafeExportedArray(), hex("ISK_IR"))
        // A different transcript (swapped associated data) gives another key.
        let other = try CPace.isk(sid: hex("sid"), k: hex("K"), ya: hex("Ya"), ada: hex("ADb"), yb: hex("Yb"), adb: hex("ADa"))
        XCTAssertNotEqual(other.unsafeExportedArray(), hex("ISK_IR"))
    }

    func testTheGeneratorStringMatchesTheDraftLayout() throws {
        // The draft prints generator_string for PRS "Password": 170 bytes,
        // DSI and PRS padded to fill SHA-512's first 128-byte block.
        let s = CPace.generatorString(prs: hex("PRS"), ci: hex("CI"), sid: hex("sid"))!.unsafeExportedArray()
        XCTAssertEqual(s.count, 170)
        XCTAssertEqual(Array(s.prefix(28)), [0x11] + Array("CPaceRistretto255".utf8) + [0x08] + Array("Password".utf8) + [0x64])
        XCTAssertEqual(Array(s[28..<128]), [UInt8](repeating: 0, count: 100))
        XCTAssertEqual(Array(s[128...]), LV.cat(hex("CI"), hex("sid")))
    }

    func testScalarMultVfyMatchesTheDraftAndRefusesInvalidPoints() throws {
        let valid = points["Valid"] as! [String: Any]
        let s = hex("s", in: valid), x = hex("X", in: valid)
        let r = s.withUnsafeBytes { sp in x.withUnsafeBytes { CPace.scalarMult(scalar: sp, point: $0) } }
        XCTAssertEqual(r, hex("G.scalar_mult_vfy(s,X)", in: valid))
        for name in ["Invalid Y1", "Invalid Y2"] {
            let y = Hex.decode(points[name] as! String)!
            XCTAssertNil(s.withUnsafeBytes { sp in y.withUnsafeBytes { CPace.scalarMult(scalar: sp, point: $0) } }, name)
        }
        // RFC 9496: an encoding with the top bit set is not canonical, even
        // where the library underneath would decode it as the same element.
        var high = x
        high[31] |= 0x80
        XCTAssertNil(s.withUnsafeBytes { sp in high.withUnsafeBytes { CPace.scalarMult(scalar: sp, point: $0) } })
    }

    func testSampledScalarsFitTheGroupSize() {
        var rng = DeterministicRandom(seed: [UInt8](repeating: 7, count: 32))
        for _ in 0..<64 {
            var s = [UInt8](repeating: 0xff, count: 32)
            s.withUnsafeMutableBytes { CPace.sampleScalar(into: $0, using: &rng) }
            XCTAssertLessThan(s[31], 0x10)
        }
    }
}

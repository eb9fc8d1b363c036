import Foundation
import ItsMePrimitives
import QRCode
import XCTest

final class QRCodeTests: XCTestCase {
    private let payload = "ITSME1:AYSoNF2LFyxq5ohwDDpyhvByzo8x9bUCG1a0MfVuyz_zESb1rtJCc" + String(repeating: "Q", count: 150)
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "itsme-qrcode-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func testPixelsDecodeToTheText() throws {
        let code = try QRCode(encoding: payload)
        for scale in [2, 5] {
            let image = code.pixels(scale: scale)
            XCTAssertEqual(image.width, (code.size + 2 * QRCode.quietZone) * scale)
            let texts = try image.pixels.withUnsafeBufferPointer { try QRCode.scan(pixels: $0, width: image.width) }
            XCTAssertEqual(texts, [payload], "scale \(scale)")
        }
    }

    func testPNGWrittenAndReadBack() throws {
        let path = directory + "/code.png"
        try QRCode(encoding: payload).writePNG(to: path, scale: 6)
        let bytes = try XCTUnwrap(FileManager.default.contents(atPath: path))
        XCTAssertEqual(try QRCode.scan(image: Array(bytes), named: path), [payload])
        XCTAssertThrowsError(try QRCode(encoding: payload).writePNG(to: path, scale: 0))
        XCTAssertThrowsError(try QRCode(encoding: payload).writePNG(to: directory + "/missing/code.png")) { error in
            XCTAssertEqual((error as? ItsMeError)?.kind, .invalidArgument)
        }
    }

    func testTheDrawingSetsItsColoursOnEveryLineWithAQuietZone() throws {
        let code = try QRCode(encoding: payload)
        let lines = code.terminalDrawing().split(separator: "\n", omittingEmptySubsequences: false)
        let side = code.size + 2 * QRCode.quietZone
        XCTAssertEqual(lines.count, (side + 1) / 2)
        let colours = "\u{1B}[38;5;16;48;5;231m", reset = "\u{1B}[0m"
        func cells(_ line: Substring) -> Substring { line.dropFirst(colours.count).dropLast(reset.count) }
        for line in lines {
            XCTAssertTrue(line.hasPrefix(colours), "dark on light, explicitly")
            XCTAssertTrue(line.hasSuffix(reset))
            XCTAssertEqual(cells(line).count, side)
            XCTAssertTrue(cells(line).allSatisfy { " \u{2580}\u{2584}\u{2588}".contains($0) })
        }
        // The first two lines (four rows) are quiet zone: blank cells.
        XCTAssertEqual(Set(cells(lines[0])), [" "])
        XCTAssertEqual(Set(cells(lines[1])), [" "])
        // Then the finder pattern's top edge: dark (the foreground) from the
        // fifth module on.
        XCTAssertEqual(Array(cells(lines[2]))[QRCode.quietZone], "\u{2588}")
    }

    func testTextsThatDoNotFitAreRefused() {
        XCTAssertThrowsError(try QRCode(encoding: String(repeating: "x", count: 3000))) { error in
            XCTAssertEqual((error as? ItsMeError)?.kind, .invalidArgument)
        }
    }

    func testFilesThatAreNoImageAreRefusedWithTheReason() throws {
        let cases: [(String, [UInt8], String)] = [
            ("text.png", Array("ITSME1:hello".utf8), "neither a PNG nor a JPEG"),
            ("empty.png", [], "neither a PNG nor a JPEG"),
            ("cut.png", [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13], "PNG"),
            ("cut.jpg", [0xFF, 0xD8, 0xFF, 0xE0, 0, 16], "JPEG"),
        ]
        for (name, bytes, reason) in cases {
            XCTAssertThrowsError(try QRCode.scan(image: bytes, named: name), name) { error in
                XCTAssertEqual((error as? ItsMeError)?.kind, .invalidArgument, name)
                XCTAssertTrue("\(error)".contains(name) && "\(error)".contains(reason), "\(name): \(error)")
            }
        }
    }

    func testAnImageWithoutACodeGivesNoText() throws {
        let blank = [UInt8](repeating: 255, count: 200 * 100)
        XCTAssertEqual(try blank.withUnsafeBufferPointer { try QRCode.scan(pixels: $0, width: 200) }, [])
        XCTAssertThrowsError(try blank.withUnsafeBufferPointer { try QRCode.scan(pixels: $0, width: 300) })
    }
}

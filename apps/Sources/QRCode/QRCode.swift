import CQRImage
import CQRencode
import ItsMePrimitives

/// A QR code's modules as libqrencode lays them out, drawn for a terminal
/// or written as a PNG image; and the QR codes read from a photo or a
/// screenshot (zbar). The command-line client shows and reads exchange,
/// export and transfer codes with it.
public struct QRCode: Sendable {
    /// Modules per side, without the quiet zone.
    public let size: Int
    private let dark: [Bool]

    /// The light border around the symbol, in modules: the 4 that ISO/IEC
    /// 18004 asks for, without which many scanners find no code.
    public static let quietZone = 4

    /// Encodes `text` in byte mode at error correction level M.
    /// Throws `.invalidArgument` if it does not fit in a QR code.
    public init(encoding text: String) throws {
        guard let code = QRcode_encodeString(text, 0, QR_ECLEVEL_M, QR_MODE_8, 1) else {
            throw ItsMeError(.invalidArgument, "the text does not fit in a QR code")
        }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width)
        guard width > 0, let data = code.pointee.data else {
            throw ItsMeError(.internal, "libqrencode returned an empty code")
        }
        size = width
        dark = (0..<width * width).map { data[$0] & 1 == 1 }
    }

    /// Whether the module at (`row`, `column`) is dark; a module of the
    /// quiet zone or beyond (negative or past `size`) is light.
    public func isDark(row: Int, column: Int) -> Bool {
        guard row >= 0, row < size, column >= 0, column < size else { return false }
        return dark[row * size + column]
    }

    /// Black foreground on a white background as explicit 256-colour
    /// codes: the colour cube's corners, which terminal themes leave alone
    /// (they remap the 16 basic colours), so the code reads dark on light on
    /// a light and on a dark theme alike.
    static let colours = "\u{1B}[38;5;16;48;5;231m"
    static let reset = "\u{1B}[0m"

    /// The code drawn with Unicode half blocks, two modules a character
    /// cell, dark modules in the foreground colour, inside the quiet zone;
    /// each line sets its colours and resets them at its end.
    public func terminalDrawing() -> String {
        let z = Self.quietZone
        let rows = stride(from: -z, to: size + z, by: 2).map { row -> String in
            var line = Self.colours
            for column in -z..<size + z {
                switch (isDark(row: row, column: column), isDark(row: row + 1, column: column)) {
                case (true, true): line += "\u{2588}"
                case (true, false): line += "\u{2580}"
                case (false, true): line += "\u{2584}"
                case (false, false): line += " "
                }
            }
            return line + Self.reset
        }
        return rows.joined(separator: "\n")
    }

    /// The code as 8-bit grey pixels, `scale` pixels a module, with the
    /// quiet zone: (width, pixels), the image being square.
    public func pixels(scale: Int) -> (width: Int, pixels: [UInt8]) {
        let width = (size + 2 * Self.quietZone) * scale
        var pixels = [UInt8](repeating: 255, count: width * width)
        for row in 0..<size {
            for column in 0..<size where dark[row * size + column] {
                let top = (row + Self.quietZone) * scale, left = (column + Self.quietZone) * scale
                for y in top..<top + scale {
                    for x in left..<left + scale { pixels[y * width + x] = 0 }
                }
            }
        }
        return (width, pixels)
    }

    /// Writes the code to `path` as a PNG image, `scale` pixels a module
    /// (1 to 64). Throws `.invalidArgument` for another scale, or if the
    /// file cannot be written (libpng's reason in the message).
    public func writePNG(to path: String, scale: Int = 8) throws {
        guard (1...64).contains(scale) else {
            throw ItsMeError(.invalidArgument, "a QR image has 1 to 64 pixels a module, not \(scale)")
        }
        let image = pixels(scale: scale)
        try image.pixels.withUnsafeBufferPointer { p in
            try imageCall { error, cap in
                qrimage_write_png_gray(path, p.baseAddress, UInt32(image.width), UInt32(image.width), error, cap)
            }
        }
    }

    /// The texts of the QR codes in the PNG or JPEG image `image` (a photo
    /// or a screenshot, its file's bytes; `name` names it in messages), in
    /// the order zbar found them; empty if it found none. Throws
    /// `.invalidArgument` for bytes that are not such an image, with the
    /// reason. It opens no file: the caller reads it as a regular file.
    public static func scan(image: [UInt8], named name: String) throws -> [String] {
        var pixels: UnsafeMutablePointer<UInt8>?
        var width: UInt32 = 0, height: UInt32 = 0
        try image.withUnsafeBufferPointer { data in
            try imageCall { error, cap in
                qrimage_load_gray(data.baseAddress, data.count, name, &pixels, &width, &height, error, cap)
            }
        }
        defer { qrimage_free(pixels) }
        guard let pixels else { throw ItsMeError(.internal, "the image loader returned no pixels") }
        return try scan(pixels: UnsafeBufferPointer(start: pixels, count: Int(width) * Int(height)), width: Int(width))
    }

    /// The texts of the QR codes in a grey image, `width` pixels a row.
    public static func scan(pixels: UnsafeBufferPointer<UInt8>, width: Int) throws -> [String] {
        guard width > 0, pixels.count % width == 0, let base = pixels.baseAddress else {
            throw ItsMeError(.invalidArgument, "an image of \(pixels.count) pixels is not \(width) pixels wide")
        }
        final class Found { var texts: [String] = [] }
        let found = Found()
        var count: Int32 = 0
        try withExtendedLifetime(found) {
            let context = Unmanaged.passUnretained(found).toOpaque()
            try imageCall { error, cap in
                qrimage_scan(
                    base, UInt32(width), UInt32(pixels.count / width),
                    { context, data, length in
                        guard let context, let data else { return }
                        // A code whose bytes are not UTF-8 is no code of ours.
                        let bytes = UnsafeRawBufferPointer(start: data, count: length).bindMemory(to: UInt8.self)
                        guard let text = String(validating: bytes, as: UTF8.self) else { return }
                        Unmanaged<Found>.fromOpaque(context).takeUnretainedValue().texts.append(text)
                    }, context, &count, error, cap)
            }
        }
        return found.texts
    }
}

/// Runs a qrimage function with an error buffer; its reason becomes the
/// message of an `.invalidArgument`.
private func imageCall(_ body: (UnsafeMutablePointer<CChar>, Int) -> Int32) throws {
    try withUnsafeTemporaryAllocation(of: CChar.self, capacity: 512) { error in
        guard let base = error.baseAddress else { throw ItsMeError(.outOfMemory, "no room for an error message") }
        base.initialize(repeating: 0, count: error.count)
        guard body(base, error.count) == 0 else {
            base[error.count - 1] = 0
            throw ItsMeError(.invalidArgument, String(cString: base))
        }
    }
}

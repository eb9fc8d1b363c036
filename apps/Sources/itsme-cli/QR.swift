import CQRencode
import ItsMeKit

/// A QR code drawn with Unicode half blocks, two modules a character cell,
/// light modules as blocks (as `qrencode -t UTF8` draws them: on a dark
/// terminal the code shows dark on light, as scanners expect), inside a
/// quiet zone of two modules.
enum QRDrawing {
    static func draw(_ text: String) throws -> String {
        guard let code = QRcode_encodeString(text, 0, QR_ECLEVEL_M, QR_MODE_8, 1) else {
            throw ItsMeError(.invalidArgument, "the text does not fit in a QR code")
        }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width)
        let data = code.pointee.data!
        let margin = 2
        let size = width + 2 * margin
        // Light (true) outside the symbol and for modules whose bit 0 is clear.
        func light(_ row: Int, _ column: Int) -> Bool {
            let r = row - margin, c = column - margin
            guard r >= 0, r < width, c >= 0, c < width else { return true }
            return data[r * width + c] & 1 == 0
        }
        var lines: [String] = []
        for row in stride(from: 0, to: size, by: 2) {
            var line = ""
            for column in 0..<size {
                let top = light(row, column)
                let bottom = row + 1 < size ? light(row + 1, column) : false
                switch (top, bottom) {
                case (true, true): line += "\u{2588}"
                case (true, false): line += "\u{2580}"
                case (false, true): line += "\u{2584}"
                case (false, false): line += " "
                }
            }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }
}

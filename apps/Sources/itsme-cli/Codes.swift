import ArgumentParser
import Foundation
import ItsMeKit
import QRCode

/// How a command that shows a code (an exchange payload, an export, a
/// transfer offer) shows it: drawn in the terminal unless --text-only, and
/// as a PNG image with --png.
struct CodeDisplay: ParsableArguments {
    @Flag(help: "Only the text line (no QR code).") var textOnly = false
    @Option(help: ArgumentHelp("Also write the QR code to this PNG image (a new file).", valueName: "file"))
    var png: String?

    /// Draws `text` as a QR code (dark on light on any terminal theme)
    /// and writes the image; the caller prints the text line.
    func show(_ text: String, _ output: Output) throws {
        let code = try QRCode(encoding: text)
        if !textOnly { output.line(code.terminalDrawing()) }
        if let png {
            guard !FileManager.default.fileExists(atPath: png) else {
                throw CLIError("\(png) exists already: give a new file for the QR image")
            }
            do { try code.writePNG(to: png) } catch let error as ItsMeError { throw CLIError(error.message) }
            output.notice("Wrote the QR code to \(png).")
        }
    }
}

/// The ItsMe code in a photo or screenshot at `path`: the one text among
/// the QR codes found there that starts with one of `prefixes`. `what`
/// names the code for the messages ("the other person's code").
func readCode(imageAt path: String, prefixes: [String], what: String) throws -> String {
    let texts: [String]
    // Read as every file named on the command line is: a FIFO, a device or
    // a directory is refused at once, never waited on.
    let image = try readNamedFile(path, what: "the image \(path)", limit: FileLimit.image)
    do { texts = try QRCode.scan(image: image, named: path) } catch let error as ItsMeError { throw CLIError(error.message) }
    let ours = Array(Set(texts.filter { text in prefixes.contains { text.hasPrefix($0) } })).sorted()
    switch ours.count {
    case 1:
        return ours[0]
    case 0 where texts.isEmpty:
        throw CLIError(
            "no QR code found in \(path): take the picture again, closer, steadier and with the whole code in it, or paste the text line")
    case 0:
        throw CLIError("the QR code in \(path) is not \(what) (its text does not start with \(prefixes.joined(separator: " or ")))")
    default:
        throw CLIError("\(path) holds \(ours.count) different ItsMe codes: crop the picture to \(what)")
    }
}

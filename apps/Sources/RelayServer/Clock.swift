import Foundation

/// Wall-clock Unix seconds, or, for tests, the number written in a file
/// (so a test can move time forward by a day without waiting).
public struct RelayClock: Sendable {
    private let file: String?

    public init(file: String?) { self.file = file }

    public func now() -> Int64 {
        if let file, let text = try? String(contentsOfFile: file, encoding: .utf8),
            let value = Double(text.trimmingCharacters(in: .whitespacesAndNewlines))
        {
            return Int64(value.rounded(.down))
        }
        return Int64(Date().timeIntervalSince1970)
    }
}

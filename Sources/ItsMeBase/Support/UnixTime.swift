import ItsMePrimitives

/// Times are unix seconds passed in by the caller; the library never reads
/// the clock.
package enum UnixTime {
    /// The latest time any function accepts: the end of the year 9999.
    /// Keeping times in range keeps every window and deadline computed
    /// from them far from overflow.
    package static let max: Int64 = 253_402_300_799

    /// `.invalidArgument` for a time before 1970 or after the year 9999.
    package static func check(_ now: Int64) throws {
        guard now >= 0 else { throw ItsMeError(.invalidArgument, "time must not be negative") }
        guard now <= max else { throw ItsMeError(.invalidArgument, "time is after the year 9999") }
    }

    /// The length of a verification window (PROTOCOL.md 9.1).
    package static let windowSeconds: Int64 = 30
    /// The window of the latest time accepted.
    package static let maxWindow: Int64 = max / windowSeconds
}

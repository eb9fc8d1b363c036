import ItsMePrimitives

/// The library version; include/itsme.h carries the same numbers as macros,
/// and a test checks that they agree.
public enum Version {
    /// The major version: 0 while the protocol and the API may still change.
    package static let major: UInt32 = 0
    /// The minor version.
    package static let minor: UInt32 = 3
    /// The patch version.
    package static let patch: UInt32 = 0
    /// The version as text, "major.minor.patch".
    public static let string: StaticString = "0.3.0"
    /// major * 10000 + minor * 100 + patch
    package static var number: UInt32 { major * 10000 + minor * 100 + patch }
}

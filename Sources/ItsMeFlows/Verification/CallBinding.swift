import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// A call binding (docs/PROTOCOL.md 20.1, and 9.7 and 11.4 for the two-person
/// verifications): 16 to 64 bytes that every participant of the host's own
/// call holds, that stay the same for the whole call and that the relay
/// never sees. It enters the session identifiers and the keys, so a
/// verification relayed between two calls verifies nobody, and a device
/// bound differently is told apart from an impostor.
///
/// The bytes are a secret of the call: a session keeps them in guarded
/// memory only as long as it needs them.
public enum CallBinding {
    /// The lengths a binding may have.
    public static let counts = 16...64

    /// `.invalidArgument` for a binding outside 16 to 64 bytes (nil is no binding).
    package static func check(_ binding: [UInt8]?) throws {
        if let binding, !counts.contains(binding.count) {
            throw ItsMeError(
                .invalidArgument,
                "a call binding is \(counts.lowerBound) to \(counts.upperBound) bytes that every participant of the call holds")
        }
    }

    /// The binding checked, in guarded memory (nil for none).
    package static func box(_ binding: [UInt8]?) throws -> SecretBox? {
        try check(binding)
        return try binding.map { try SecretBox(copying: $0) }
    }

    /// What a bound voice derivation appends to its lv_cat items (`u8(1)`
    /// and `cb`, 9.7); nothing without a binding. Wipe the items after use.
    static func items(_ binding: SecretBox?) -> [[UInt8]] {
        guard let binding else { return [] }
        return [[1], binding.withBytes { Array($0) }]
    }
}

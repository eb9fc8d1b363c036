import ItsMePrimitives
import ItsMeBase

/// The two direction keys of a session, in one allocation, as the key this
/// side seals with and the key it opens the peer's frames with.
final class DirectionKeys: @unchecked Sendable {
    private let both: SecretBox
    private let isInitiator: Bool

    /// `both` is the initiator's key then the responder's (32 bytes each).
    init(_ both: consuming SecretBytes, isInitiator: Bool) throws {
        guard both.count == 64 else { throw ItsMeError(.invalidArgument, "two 32-byte keys") }
        self.both = SecretBox(both)
        self.isInitiator = isInitiator
    }

    private var sending: SecretRange { SecretRange(both, isInitiator ? 0..<32 : 32..<64) }
    private var receiving: SecretRange { SecretRange(both, isInitiator ? 32..<64 : 0..<32) }

    func seal(type: UInt8, counter: UInt64, _ plain: [UInt8]) throws -> [UInt8] {
        try sending.withBytes { try SessionFrames.seal(type: type, key: $0, counter: counter, plain) }
    }

    /// `.authenticationFailed` naming `what` if any byte changed.
    func open(_ frame: [UInt8], counter: UInt64, what: String) throws -> [UInt8] {
        try receiving.withBytes { try SessionFrames.open(frame, key: $0, counter: counter, what: what) }
    }
}

/// The encrypted frames of a session (PROTOCOL.md 7.3, 10.3, 11.3), which
/// the Bluetooth exchange, the exchange at a distance, Online Verify and PIN
/// Update share: their direction keys, and how a frame is sealed under one.
package enum SessionFrames {
    /// The protocol version, every message's first byte.
    package static let version: UInt8 = 1

    /// k_I || k_R (64 bytes) into `out`, as sections 7.3, 10.3 and 11.3
    /// derive them: HKDF-Extract(salt, shared), then HKDF-Expand with
    /// lv_cat(label, role) for each role.
    static func directionKeys(
        shared: UnsafeRawBufferPointer, salt: [UInt8], label: String, into out: UnsafeMutableRawBufferPointer
    ) throws {
        guard out.count == 64 else { throw ItsMeError(.invalidArgument, "two 32-byte keys") }
        let prk = try HKDF.extract(salt: salt, ikm: shared)
        for (i, role) in ["initiator", "responder"].enumerated() {
            let k = try HKDF.expand(prk: prk, info: LV.cat(LV.b(label), LV.b(role)), count: 32)
            k.withBytes { UnsafeMutableRawBufferPointer(rebasing: out[(32 * i)..<(32 * i + 32)]).copyMemory(from: $0) }
        }
    }

    /// The direction keys from our ephemeral secret and the peer's key
    /// (an all-zero shared secret is refused).
    static func directionKeys(
        ephemeralSecret: UnsafeRawBufferPointer, peerEphemeralKey: [UInt8], salt: [UInt8], label: String,
        into out: UnsafeMutableRawBufferPointer
    ) throws {
        guard ephemeralSecret.count == X25519.keyCount else {
            throw ItsMeError(.invalidArgument, "an X25519 secret key is 32 bytes")
        }
        try withScratch(X25519.keyCount) { shared in
            try X25519.sharedSecret(secretKey: ephemeralSecret, peerPublicKey: peerEphemeralKey, into: shared)
            try directionKeys(shared: UnsafeRawBufferPointer(shared), salt: salt, label: label, into: out)
        }
    }

    /// An encrypted frame: its two header bytes, then ChaCha20-Poly1305
    /// under `key` with nonce `00 00 00 00 || u64(counter)` and the header
    /// as associated data (sections 7.3, 10.3, 11.3).
    static func seal(type: UInt8, key: UnsafeRawBufferPointer, counter: UInt64, _ plaintext: [UInt8]) throws -> [UInt8] {
        let header = [version, type]
        return header + (try AEAD.seal(.chacha20Poly1305, key: key, nonce: nonce(counter), plaintext: plaintext, aad: header))
    }

    /// Opens a frame `seal` made; `.authenticationFailed` saying `what`
    /// failed if any byte changed or the counter differs.
    static func open(_ frame: [UInt8], key: UnsafeRawBufferPointer, counter: UInt64, what: String) throws -> [UInt8] {
        guard frame.count >= 2 else { throw ItsMeError(.malformedMessage, "\(what) is truncated") }
        do {
            return try AEAD.open(
                .chacha20Poly1305, key: key, nonce: nonce(counter), ciphertext: Array(frame[2...]), aad: Array(frame[0..<2])
            ).unsafeExportedArray()
        } catch let e as ItsMeError where e.kind == .authenticationFailed {
            throw ItsMeError(.authenticationFailed, "\(what) failed authentication (tampered, replayed or reordered)")
        }
    }

    package static func nonce(_ counter: UInt64) -> [UInt8] {
        [0, 0, 0, 0] + withUnsafeBytes(of: counter.bigEndian) { Array($0) }
    }
}

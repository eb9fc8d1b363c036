import CSodium
import Synchronization

/// Library initialisation: libsodium first, then the CPU check for
/// AES-256-GCM, which libsodium implements only with hardware support.
public enum Sodium {
    private static let ready = Atomic<Bool>(false)

    /// Idempotent and thread-safe (`sodium_init` is both).
    /// Call it once before any other function of the library. Throws
    /// `.internal` if libsodium fails to initialise, `.unsupportedPlatform` if
    /// the CPU lacks hardware AES-GCM.
    public static func initialize() throws {
        if ready.load(ordering: .acquiring) { return }
        guard sodium_init() >= 0 else {
            throw ItsMeError(.internal, "libsodium failed to initialise")
        }
        guard crypto_aead_aes256gcm_is_available() == 1 else {
            throw ItsMeError(
                .unsupportedPlatform,
                "this CPU has no hardware AES-GCM (AES-NI and PCLMUL, or ARMv8 crypto), which libsodium's AES-256-GCM requires")
        }
        ready.store(true, ordering: .releasing)
    }

    package static var isInitialized: Bool { ready.load(ordering: .acquiring) }
}

// MARK: - Hashes and MACs

/// Calls `body` with a non-nil pointer to the bytes: an empty Swift buffer
/// may have a nil base address, which some C functions do not accept.
package func withNonNilPointer<R: ~Copyable>(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafePointer<UInt8>) throws -> R) rethrows -> R {
    if let p = bytes.baseAddress { return try body(p.assumingMemoryBound(to: UInt8.self)) }
    var zero: UInt8 = 0
    return try body(&zero)
}

/// SHA-256 (libsodium's `crypto_hash_sha256`).
public enum SHA256 {
    /// The length of a digest in bytes.
    package static let byteCount = 32

    // The generic entry points of this file are inlined so that a caller
    // in another module gets them specialised for its types; the work is
    // in the functions over raw bytes they call.
    /// The 32-byte digest of `data`, which may be public bytes or a `SecretBytes`
    /// (borrowed, not copied). Never fails.
    @inlinable
    public static func hash<B: ByteView & ~Copyable>(_ data: borrowing B) -> [UInt8] {
        data.withBytes { hash(bytes: $0) }
    }

    /// The 32-byte digest of the bytes in `d`. Never fails.
    public static func hash(bytes d: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: byteCount)
        withNonNilPointer(d) { dp in
            _ = crypto_hash_sha256(&out, dp, UInt64(d.count))
        }
        return out
    }
}

package enum HMACSHA256 {
    package static let byteCount = 32

    /// HMAC-SHA256 over the concatenation of `parts`, written to `out`
    /// (exactly 32 bytes). Keys of any length are accepted (RFC 2104).
    package static func authenticate(
        key: UnsafeRawBufferPointer, parts: [UnsafeRawBufferPointer], into out: UnsafeMutableRawBufferPointer
    ) {
        precondition(out.count == byteCount)
        var state = crypto_auth_hmacsha256_state()
        withNonNilPointer(key) { _ = crypto_auth_hmacsha256_init(&state, $0, key.count) }
        for part in parts where part.count > 0 {
            _ = crypto_auth_hmacsha256_update(&state, part.bindMemory(to: UInt8.self).baseAddress!, UInt64(part.count))
        }
        _ = crypto_auth_hmacsha256_final(&state, out.bindMemory(to: UInt8.self).baseAddress!)
        sodium_memzero(&state, MemoryLayout<crypto_auth_hmacsha256_state>.size)
    }

    /// A MAC that is not itself secret (a tag to send or compare).
    @inlinable
    package static func mac<K: ByteView & ~Copyable, M: ByteView & ~Copyable>(
        key: borrowing K, message: borrowing M
    ) -> [UInt8] {
        key.withBytes { k in message.withBytes { m in mac(keyBytes: k, messageBytes: m) } }
    }

    package static func mac(keyBytes k: UnsafeRawBufferPointer, messageBytes m: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: byteCount)
        out.withUnsafeMutableBytes { authenticate(key: k, parts: [m], into: $0) }
        return out
    }

    /// Checks a tag in constant time.
    package static func verify<K: ByteView & ~Copyable, M: ByteView & ~Copyable>(
        tag: [UInt8], key: borrowing K, message: borrowing M
    ) -> Bool {
        ConstantTime.equal(mac(key: key, message: message), tag)
    }
}

/// HKDF-SHA256 (RFC 5869), built on libsodium's HMAC-SHA256 since
/// libsodium 1.0.18 has no HKDF. Only the result goes to guarded memory;
/// intermediates (PRK, T(n)) live in stack scratch wiped before return, as
/// libsodium keeps its own hash states.
package enum HKDF {
    package static let maxOutputCount = 255 * HMACSHA256.byteCount

    /// PRK = HMAC(salt, IKM). An empty salt means 32 zero bytes (RFC 5869
    /// 2.2), which HMAC's key padding makes identical.
    package static func extract<S: ByteView & ~Copyable, I: ByteView & ~Copyable>(
        salt: borrowing S, ikm: borrowing I
    ) throws -> SecretBytes {
        var prk = try SecretBytes(count: HMACSHA256.byteCount)
        salt.withBytes { s in
            ikm.withBytes { i in
                prk.withMutableBytes { HMACSHA256.authenticate(key: s, parts: [i], into: $0) }
            }
        }
        return prk
    }

    /// OKM = T(1) | T(2) | ... truncated to `count` bytes, where
    /// T(n) = HMAC(PRK, T(n-1) | info | n).
    package static func expand<P: ByteView & ~Copyable, I: ByteView & ~Copyable>(
        prk: borrowing P, info: borrowing I, count: Int
    ) throws -> SecretBytes {
        try checkCount(count)
        guard prk.withBytes({ $0.count }) >= HMACSHA256.byteCount else {
            throw ItsMeError(.invalidArgument, "HKDF pseudorandom key shorter than 32 bytes")
        }
        var okm = try SecretBytes(count: count)
        prk.withBytes { p in
            info.withBytes { i in
                okm.withMutableBytes { expand(prk: p, info: i, into: $0) }
            }
        }
        return okm
    }

    package static func derive<K: ByteView & ~Copyable, S: ByteView & ~Copyable, I: ByteView & ~Copyable>(
        ikm: borrowing K, salt: borrowing S, info: borrowing I, count: Int
    ) throws -> SecretBytes {
        try checkCount(count)
        var okm = try SecretBytes(count: count)
        try okm.withMutableBytes { try derive(ikm: ikm, salt: salt, info: info, into: $0) }
        return okm
    }

    /// Derives `out.count` bytes into memory the caller owns (for hot paths
    /// that reuse one guarded buffer instead of allocating per derivation).
    @inlinable
    package static func derive<K: ByteView & ~Copyable, S: ByteView & ~Copyable, I: ByteView & ~Copyable>(
        ikm: borrowing K, salt: borrowing S, info: borrowing I, into out: UnsafeMutableRawBufferPointer
    ) throws {
        try ikm.withBytes { k in
            try salt.withBytes { s in
                try info.withBytes { i in try derive(ikmBytes: k, saltBytes: s, infoBytes: i, into: out) }
            }
        }
    }

    package static func derive(
        ikmBytes k: UnsafeRawBufferPointer, saltBytes s: UnsafeRawBufferPointer, infoBytes i: UnsafeRawBufferPointer,
        into out: UnsafeMutableRawBufferPointer
    ) throws {
        try checkCount(out.count)
        withScratch(HMACSHA256.byteCount) { prk in
            HMACSHA256.authenticate(key: s, parts: [k], into: prk)
            expand(prk: UnsafeRawBufferPointer(prk), info: i, into: out)
        }
    }

    private static func checkCount(_ count: Int) throws {
        guard count >= 0, count <= maxOutputCount else {
            throw ItsMeError(.invalidArgument, "HKDF output of \(count) bytes is outside 0...\(maxOutputCount)")
        }
    }

    private static func expand(prk: UnsafeRawBufferPointer, info: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) {
        // T(n) is computed in place over T(n-1): HMAC absorbs every part
        // before it writes its output.
        withScratch(HMACSHA256.byteCount) { t in
            var produced = 0
            var counter: UInt8 = 1
            while produced < out.count {
                let previous = UnsafeRawBufferPointer(start: t.baseAddress, count: counter == 1 ? 0 : t.count)
                withUnsafeBytes(of: counter) { c in
                    HMACSHA256.authenticate(key: prk, parts: [previous, info, c], into: t)
                }
                let take = min(t.count, out.count - produced)
                out.baseAddress!.advanced(by: produced).copyMemory(from: t.baseAddress!, byteCount: take)
                produced += take
                counter &+= 1
            }
        }
    }
}

/// Stack scratch for short-lived secret intermediates, wiped on return.
/// Inlinable, so that its callers in other modules (the voice codes,
/// HKDF) get it specialised rather than as a generic call.
@inlinable
package func withScratch<R>(_ count: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
    try withUnsafeTemporaryAllocation(byteCount: count, alignment: 16) { buffer in
        defer { sodium_memzero(buffer.baseAddress!, buffer.count) }
        return try body(buffer)
    }
}

// MARK: - Signatures and key agreement

/// The ChaCha20 stream cipher, IETF variant (RFC 8439 section 2.4: 96-bit
/// nonce, 32-bit block counter from 0), as libsodium's
/// `crypto_stream_chacha20_ietf_xor`. Unauthenticated: callers add a MAC.
package enum ChaCha20 {
    package static let keyCount = 32
    package static let nonceCount = 12

    /// `data` XOR the key stream of (key, nonce) from block 0.
    package static func xor(_ data: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, nonce: [UInt8]) -> [UInt8] {
        precondition(key.count == keyCount && nonce.count == nonceCount, "ChaCha20 key or nonce of the wrong size")
        var out = [UInt8](repeating: 0, count: data.count)
        guard !data.isEmpty else { return out }
        out.withUnsafeMutableBytes { o in
            _ = crypto_stream_chacha20_ietf_xor(
                o.baseAddress!.assumingMemoryBound(to: UInt8.self), data.baseAddress!.assumingMemoryBound(to: UInt8.self),
                UInt64(data.count), nonce, key.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        return out
    }
}

package enum Ed25519 {
    package static let seedCount = 32
    package static let publicKeyCount = 32
    package static let secretKeyCount = 64
    package static let signatureCount = 64

    package struct KeyPair: ~Copyable {
        package let publicKey: [UInt8]
        /// libsodium's 64-byte form: seed followed by the public key.
        package let secretKey: SecretBytes
    }

    package static func keyPair<S: ByteView & ~Copyable>(seed: borrowing S) throws -> KeyPair {
        guard seed.withBytes({ $0.count }) == seedCount else {
            throw ItsMeError(.invalidArgument, "an Ed25519 seed is 32 bytes")
        }
        var pk = [UInt8](repeating: 0, count: publicKeyCount)
        var sk = try SecretBytes(count: secretKeyCount)
        seed.withBytes { s in
            sk.withMutableBytes { skp in
                _ = crypto_sign_seed_keypair(
                    &pk, skp.bindMemory(to: UInt8.self).baseAddress!, s.bindMemory(to: UInt8.self).baseAddress!)
            }
        }
        return KeyPair(publicKey: pk, secretKey: sk)
    }

    package static func sign<M: ByteView & ~Copyable>(
        _ message: borrowing M, secretKey: borrowing SecretBytes
    ) throws -> [UInt8] {
        guard secretKey.count == secretKeyCount else {
            throw ItsMeError(.invalidArgument, "an Ed25519 secret key is 64 bytes")
        }
        var sig = [UInt8](repeating: 0, count: signatureCount)
        message.withBytes { m in
            secretKey.withBytes { sk in
                _ = crypto_sign_detached(
                    &sig, nil, m.bindMemory(to: UInt8.self).baseAddress, UInt64(m.count),
                    sk.bindMemory(to: UInt8.self).baseAddress!)
            }
        }
        return sig
    }

    /// Strict verification: libsodium rejects non-canonical encodings of S,
    /// small-order public keys and small-order R.
    package static func verify<M: ByteView & ~Copyable>(
        signature: [UInt8], message: borrowing M, publicKey: [UInt8]
    ) -> Bool {
        guard signature.count == signatureCount, publicKey.count == publicKeyCount else { return false }
        return message.withBytes { m in
            crypto_sign_verify_detached(signature, m.bindMemory(to: UInt8.self).baseAddress, UInt64(m.count), publicKey) == 0
        }
    }
}

package enum X25519 {
    package static let keyCount = 32

    package static func publicKey(secretKey: borrowing SecretBytes) throws -> [UInt8] {
        guard secretKey.count == keyCount else {
            throw ItsMeError(.invalidArgument, "an X25519 secret key is 32 bytes")
        }
        var pk = [UInt8](repeating: 0, count: keyCount)
        secretKey.withBytes { sk in
            _ = crypto_scalarmult_base(&pk, sk.bindMemory(to: UInt8.self).baseAddress!)
        }
        return pk
    }

    /// The public key of a raw 32-byte secret key held by the caller.
    package static func publicKey(secretKey sk: UnsafeRawBufferPointer) -> [UInt8] {
        precondition(sk.count == keyCount)
        var pk = [UInt8](repeating: 0, count: keyCount)
        _ = crypto_scalarmult_base(&pk, sk.bindMemory(to: UInt8.self).baseAddress!)
        return pk
    }

    /// The shared secret into memory the caller owns (guarded or scratch).
    package static func sharedSecret(
        secretKey sk: UnsafeRawBufferPointer, peerPublicKey: [UInt8], into out: UnsafeMutableRawBufferPointer
    ) throws {
        precondition(sk.count == keyCount && out.count == keyCount)
        guard peerPublicKey.count == keyCount else {
            throw ItsMeError(.invalidKey, "an X25519 public key is 32 bytes, got \(peerPublicKey.count)")
        }
        let rc = crypto_scalarmult(
            out.bindMemory(to: UInt8.self).baseAddress!, sk.bindMemory(to: UInt8.self).baseAddress!, peerPublicKey)
        guard rc == 0 else {
            throw ItsMeError(.invalidKey, "the peer's ephemeral key is a low-order point (all-zero shared secret)")
        }
    }

    /// The raw X25519 shared secret. A peer key of the wrong size, or one
    /// that yields the all-zero secret (a low-order point), is refused.
    package static func sharedSecret(secretKey: borrowing SecretBytes, peerPublicKey: [UInt8]) throws -> SecretBytes {
        guard secretKey.count == keyCount else {
            throw ItsMeError(.invalidArgument, "an X25519 secret key is 32 bytes")
        }
        guard peerPublicKey.count == keyCount else {
            throw ItsMeError(.invalidKey, "an X25519 public key is 32 bytes, got \(peerPublicKey.count)")
        }
        var shared = try SecretBytes(count: keyCount)
        let rc = secretKey.withBytes { sk in
            shared.withMutableBytes { out in
                crypto_scalarmult(
                    out.bindMemory(to: UInt8.self).baseAddress!, sk.bindMemory(to: UInt8.self).baseAddress!, peerPublicKey)
            }
        }
        // libsodium returns -1 exactly when the result is all zeros.
        guard rc == 0 else {
            throw ItsMeError(.invalidKey, "X25519 peer key is a low-order point (all-zero shared secret)")
        }
        return shared
    }
}

// MARK: - Authenticated encryption

/// The two AEADs libsodium offers with a 96-bit nonce and 128-bit tag.
package enum AEAD {
    package static let keyCount = 32
    package static let nonceCount = 12
    package static let tagCount = 16

    package enum Algorithm: Sendable {
        case chacha20Poly1305
        case aes256GCM
    }

    /// ciphertext || tag.
    package static func seal<K: ByteView & ~Copyable, P: ByteView & ~Copyable, A: ByteView & ~Copyable>(
        _ algorithm: Algorithm, key: borrowing K, nonce: [UInt8], plaintext: borrowing P, aad: borrowing A
    ) throws -> [UInt8] {
        try checkKeyAndNonce(key: key, nonce: nonce)
        return try key.withBytes { k in
            try plaintext.withBytes { p in
                try aad.withBytes { a in
                    // Both AEADs limit a message to about 2^36 bytes.
                    guard p.count <= Int(UInt32.max) else {
                        throw ItsMeError(.invalidArgument, "message too large to encrypt")
                    }
                    var out = [UInt8](repeating: 0, count: p.count + tagCount)
                    var outLen: UInt64 = 0
                    let kp = k.bindMemory(to: UInt8.self).baseAddress!
                    let pp = p.bindMemory(to: UInt8.self).baseAddress
                    let ap = a.bindMemory(to: UInt8.self).baseAddress
                    let rc: Int32
                    switch algorithm {
                    case .chacha20Poly1305:
                        rc = crypto_aead_chacha20poly1305_ietf_encrypt(
                            &out, &outLen, pp, UInt64(p.count), ap, UInt64(a.count), nil, nonce, kp)
                    case .aes256GCM:
                        rc = crypto_aead_aes256gcm_encrypt(
                            &out, &outLen, pp, UInt64(p.count), ap, UInt64(a.count), nil, nonce, kp)
                    }
                    guard rc == 0, outLen == UInt64(out.count) else {
                        throw ItsMeError(.internal, "encryption failed")
                    }
                    return out
                }
            }
        }
    }

    /// Opens ciphertext || tag. Any change to key, nonce, ciphertext, tag or
    /// associated data gives `.authenticationFailed`. The plaintext goes to
    /// guarded memory, since what we encrypt is usually secret.
    package static func open<K: ByteView & ~Copyable, C: ByteView & ~Copyable, A: ByteView & ~Copyable>(
        _ algorithm: Algorithm, key: borrowing K, nonce: [UInt8], ciphertext: borrowing C, aad: borrowing A
    ) throws -> SecretBytes {
        try checkKeyAndNonce(key: key, nonce: nonce)
        return try key.withBytes { k in
            try ciphertext.withBytes { c in
                try aad.withBytes { a in
                    guard c.count >= tagCount else {
                        throw ItsMeError(.authenticationFailed, "ciphertext shorter than its tag")
                    }
                    var out = try SecretBytes(count: c.count - tagCount)
                    var outLen: UInt64 = 0
                    let kp = k.bindMemory(to: UInt8.self).baseAddress!
                    let cp = c.bindMemory(to: UInt8.self).baseAddress!
                    let ap = a.bindMemory(to: UInt8.self).baseAddress
                    let rc = out.withMutableBytes { o -> Int32 in
                        let op = o.bindMemory(to: UInt8.self).baseAddress!
                        switch algorithm {
                        case .chacha20Poly1305:
                            return crypto_aead_chacha20poly1305_ietf_decrypt(
                                op, &outLen, nil, cp, UInt64(c.count), ap, UInt64(a.count), nonce, kp)
                        case .aes256GCM:
                            return crypto_aead_aes256gcm_decrypt(
                                op, &outLen, nil, cp, UInt64(c.count), ap, UInt64(a.count), nonce, kp)
                        }
                    }
                    guard rc == 0 else {
                        throw ItsMeError(.authenticationFailed, "decryption failed: wrong key or tampered data")
                    }
                    return out
                }
            }
        }
    }

    /// Opens ciphertext || tag into `out` (at least the plaintext's size),
    /// for hot paths that reuse one guarded buffer. Returns the plaintext
    /// size; on failure `out` holds nothing of the plaintext.
    package static func open<K: ByteView & ~Copyable, C: ByteView & ~Copyable, A: ByteView & ~Copyable>(
        _ algorithm: Algorithm, key: borrowing K, nonce: [UInt8], ciphertext: borrowing C, aad: borrowing A,
        into out: UnsafeMutableRawBufferPointer
    ) throws -> Int {
        try checkKeyAndNonce(key: key, nonce: nonce)
        return try key.withBytes { k in
            try ciphertext.withBytes { c in
                try aad.withBytes { a in
                    guard c.count >= tagCount else {
                        throw ItsMeError(.authenticationFailed, "ciphertext shorter than its tag")
                    }
                    guard out.count >= c.count - tagCount else {
                        throw ItsMeError(.invalidArgument, "output buffer too small for the plaintext")
                    }
                    var outLen: UInt64 = 0
                    let kp = k.bindMemory(to: UInt8.self).baseAddress!
                    let cp = c.bindMemory(to: UInt8.self).baseAddress!
                    let ap = a.bindMemory(to: UInt8.self).baseAddress
                    let op = out.bindMemory(to: UInt8.self).baseAddress!
                    let rc: Int32
                    switch algorithm {
                    case .chacha20Poly1305:
                        rc = crypto_aead_chacha20poly1305_ietf_decrypt(
                            op, &outLen, nil, cp, UInt64(c.count), ap, UInt64(a.count), nonce, kp)
                    case .aes256GCM:
                        rc = crypto_aead_aes256gcm_decrypt(op, &outLen, nil, cp, UInt64(c.count), ap, UInt64(a.count), nonce, kp)
                    }
                    guard rc == 0 else {
                        throw ItsMeError(.authenticationFailed, "decryption failed: wrong key or tampered data")
                    }
                    return Int(outLen)
                }
            }
        }
    }

    private static func checkKeyAndNonce<K: ByteView & ~Copyable>(key: borrowing K, nonce: [UInt8]) throws {
        guard key.withBytes({ $0.count }) == keyCount else {
            throw ItsMeError(.invalidArgument, "an AEAD key is 32 bytes")
        }
        guard nonce.count == nonceCount else {
            throw ItsMeError(.invalidArgument, "an AEAD nonce is 12 bytes")
        }
    }
}

// MARK: - Password hashing

/// Argon2id password hashing (libsodium's `crypto_pwhash`). Public for its
/// cost parameters, which the core's PIN and identity export take.
public enum Argon2id {
    package static let saltCount = 16

    /// Cost parameters, stored beside every hash so they can be raised.
    public struct Parameters: Equatable, Sendable, CustomStringConvertible {
        package let opsLimit: UInt64
        package let memLimit: UInt64

        package init(opsLimit: UInt64, memLimit: UInt64) {
            self.opsLimit = opsLimit
            self.memLimit = memLimit
        }

        /// libsodium's interactive level: 2 passes over 64 MiB.
        public static let interactive = Parameters(
            opsLimit: UInt64(crypto_pwhash_opslimit_interactive()), memLimit: UInt64(crypto_pwhash_memlimit_interactive()))
        /// libsodium's moderate level: 3 passes over 256 MiB.
        public static let moderate = Parameters(
            opsLimit: UInt64(crypto_pwhash_opslimit_moderate()), memLimit: UInt64(crypto_pwhash_memlimit_moderate()))

        /// The window of parameters we accept from stored or received data,
        /// so a crafted record can neither hang us nor exhaust memory.
        package static let acceptedOps: ClosedRange<UInt64> = 1...10
        package static let acceptedMem: ClosedRange<UInt64> = 8 * 1024...(1 << 30)

        package var isAccepted: Bool {
            Self.acceptedOps.contains(opsLimit) && Self.acceptedMem.contains(memLimit)
        }

        /// The parameters for logs, such as `argon2id(t=2, m=65536 KiB)`.
        public var description: String { "argon2id(t=\(opsLimit), m=\(memLimit / 1024) KiB)" }
    }

    package static func deriveKey<P: ByteView & ~Copyable>(
        password: borrowing P, salt: [UInt8], parameters: Parameters, count: Int = 32
    ) throws -> SecretBytes {
        guard salt.count == saltCount else {
            throw ItsMeError(.invalidArgument, "an Argon2id salt is 16 bytes")
        }
        guard parameters.isAccepted else {
            throw ItsMeError(.invalidArgument, "Argon2id parameters \(parameters) are outside the accepted range")
        }
        guard count >= 16, count <= 64 else {
            throw ItsMeError(.invalidArgument, "Argon2id output of \(count) bytes is outside 16...64")
        }
        var out = try SecretBytes(count: count)
        let rc = password.withBytes { p in
            out.withMutableBytes { o in
                withNonNilPointer(p) { pp in
                    UnsafeRawPointer(pp).withMemoryRebound(to: CChar.self, capacity: max(p.count, 1)) { pc in
                        crypto_pwhash(
                            o.bindMemory(to: UInt8.self).baseAddress!, UInt64(count), pc, UInt64(p.count),
                            salt, parameters.opsLimit, Int(parameters.memLimit), crypto_pwhash_alg_argon2id13())
                    }
                }
            }
        }
        guard rc == 0 else {
            throw ItsMeError(.outOfMemory, "Argon2id could not allocate \(parameters.memLimit / 1024) KiB")
        }
        return out
    }
}

// MARK: - Encodings

/// Upper-case hexadecimal encoding, as fingerprints and identifiers are shown.
public enum Hex {
    private static let upper = Array("0123456789ABCDEF".utf8)

    /// Inlined so that a caller in another module gets it specialised for
    /// its sequence (an `ArraySlice`, most often) rather than going through
    /// the generic one; the work is `encodeUpper(bytes:)`.
    @inlinable
    public static func encodeUpper(_ bytes: some Sequence<UInt8>) -> String { encodeUpper(bytes: Array(bytes)) }

    /// Two upper-case hex digits per byte, most significant first. Never fails.
    public static func encodeUpper(bytes: [UInt8]) -> String {
        var chars: [UInt8] = []
        chars.reserveCapacity(bytes.count * 2)
        for b in bytes {
            chars.append(upper[Int(b >> 4)])
            chars.append(upper[Int(b & 0x0F)])
        }
        return String(decoding: chars, as: UTF8.self)
    }

    /// Strict: an even number of hex digits, either case; nil otherwise.
    public static func decode(_ text: String) -> [UInt8]? {
        let u = Array(text.utf8)
        guard u.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(u.count / 2)
        var i = 0
        while i < u.count {
            guard let h = nibble(u[i]), let l = nibble(u[i + 1]) else { return nil }
            out.append(h << 4 | l)
            i += 2
        }
        return out
    }
}

import Foundation
import XCTest

import ItsMeKit
import ItsMePrimitives

/// The crypto wrappers against Wycheproof, RFC and FIPS vectors, plus the
/// unit behaviour of the helpers around them.
///
/// Wycheproof rules: a `valid` vector must be accepted and give the expected
/// output, an `invalid` one must be refused; `acceptable` may go either way
/// and is recorded. Vectors outside what a primitive supports (libsodium's
/// AES-GCM and ChaCha20-Poly1305 take only 256-bit keys, 96-bit nonces and
/// 128-bit tags) are counted as not applicable, never silently dropped. The
/// expected counts below were observed from the vector files and checked by
/// hand against their group parameters; they guard against regressions.
final class CryptoVectorTests: XCTestCase {
    override func setUpWithError() throws {
        try Sodium.initialize()
    }

    // MARK: - Wycheproof: AEAD

    func testWycheproofAESGCM() throws {
        // 316 tests: only the 256-bit-key, 96-bit-IV group fits libsodium
        // (39 valid, 27 invalid). Not applicable: 211 with 128- or 192-bit
        // keys, 39 with a 256-bit key and another IV size (0 to 2056 bits).
        try runAEAD(
            "aes_gcm", .aes256GCM,
            expected: .init(valid: 39, invalid: 27, notApplicable: 250),
            expectedReasons: ["n/a key not 256 bits": 211, "n/a nonce not 96 bits": 39])
    }

    func testWycheproofChaCha20Poly1305() throws {
        // 325 tests: the 96-bit-nonce group (256 valid, 60 invalid) fits
        // the IETF construction; 9 tests use other nonce sizes.
        try runAEAD(
            "chacha20_poly1305", .chacha20Poly1305,
            expected: .init(valid: 256, invalid: 60, notApplicable: 9),
            expectedReasons: ["n/a nonce not 96 bits": 9])
    }

    private func runAEAD(
        _ name: String, _ algorithm: AEAD.Algorithm, expected: WycheproofTally.Expected,
        expectedReasons: [String: Int]
    ) throws {
        let file = try Wycheproof.load(name)
        var tally = WycheproofTally(name)
        for group in file.groups {
            let keySize = try group.int("keySize")
            let ivSize = try group.int("ivSize")
            let tagSize = try group.int("tagSize")
            for t in group.tests {
                let key = try t.bytes("key"), iv = try t.bytes("iv"), aad = try t.bytes("aad")
                let msg = try t.bytes("msg"), ct = try t.bytes("ct"), tag = try t.bytes("tag")
                XCTAssertEqual(key.count * 8, keySize, t.label)
                XCTAssertEqual(iv.count * 8, ivSize, t.label)

                // Applicability is decided on what the primitive would see.
                if key.count != AEAD.keyCount || iv.count != AEAD.nonceCount || tagSize != AEAD.tagCount * 8
                    || tag.count != AEAD.tagCount
                {
                    tally.notApplicable += 1
                    if key.count != AEAD.keyCount {
                        tally.note("n/a key not 256 bits")
                    } else if iv.count != AEAD.nonceCount {
                        tally.note("n/a nonce not 96 bits")
                    } else {
                        tally.note("n/a tag not 128 bits")
                    }
                    // The wrapper must refuse such parameters rather than
                    // process them some other way.
                    if key.count != AEAD.keyCount || iv.count != AEAD.nonceCount {
                        XCTAssertEqual(
                            thrownKind { _ = try AEAD.seal(algorithm, key: key, nonce: iv, plaintext: msg, aad: aad) },
                            .invalidArgument, "seal \(t.label)")
                        XCTAssertEqual(
                            thrownKind { _ = try AEAD.open(algorithm, key: key, nonce: iv, ciphertext: ct + tag, aad: aad) },
                            .invalidArgument, "open \(t.label)")
                    }
                    continue
                }

                let sealed = try? AEAD.seal(algorithm, key: key, nonce: iv, plaintext: msg, aad: aad)
                var opened: [UInt8]? = nil
                var openError: ItsMeError.Kind? = nil
                do {
                    opened = try AEAD.open(algorithm, key: key, nonce: iv, ciphertext: ct + tag, aad: aad)
                        .unsafeExportedArray()
                } catch {
                    openError = itsMeKind(error)
                }

                tally.record(t, accepted: opened != nil, correct: sealed == ct + tag && opened == msg)
                if t.result == .invalid, opened == nil {
                    XCTAssertEqual(openError, .authenticationFailed, "\(name) \(t.label)")
                }
            }
        }
        tally.check(against: file, expected: expected)
        for (reason, count) in expectedReasons {
            XCTAssertEqual(tally.noteCount(reason), count, "\(name): \(reason)")
        }
    }

    // MARK: - Wycheproof: signatures and key agreement

    func testWycheproofEd25519() throws {
        let file = try Wycheproof.load("ed25519")
        var tally = WycheproofTally("ed25519")
        for group in file.groups {
            guard let key = group.fields["publicKey"] as? [String: Any], let pkHex = key["pk"] as? String,
                let pk = Hex.decode(pkHex)
            else {
                XCTFail("ed25519 group without publicKey.pk")
                continue
            }
            for t in group.tests {
                let msg = try t.bytes("msg"), sig = try t.bytes("sig")
                let verified = Ed25519.verify(signature: sig, message: msg, publicKey: pk)
                tally.record(t, accepted: verified)
            }
        }
        // 151 tests, 78 groups: 88 valid, 63 invalid (bad lengths, altered
        // or non-canonical signatures); no acceptable ones.
        tally.check(against: file, expected: .init(valid: 88, invalid: 63))
    }

    func testWycheproofX25519() throws {
        let file = try Wycheproof.load("x25519")
        var tally = WycheproofTally("x25519")
        for group in file.groups {
            for t in group.tests {
                let pub = try t.bytes("public"), priv = try t.bytes("private"), shared = try t.bytes("shared")
                let zeroShared = shared.allSatisfy { $0 == 0 }
                var output: [UInt8]? = nil
                var errorKind: ItsMeError.Kind? = nil
                do {
                    let secret = try SecretBytes(copying: priv)
                    output = try X25519.sharedSecret(secretKey: secret, peerPublicKey: pub).unsafeExportedArray()
                } catch {
                    errorKind = itsMeKind(error)
                }

                if t.result == .acceptable, zeroShared {
                    // Low-order peer keys: we must refuse them, whatever the vector allows.
                    XCTAssertNil(output, "x25519 all-zero shared secret returned: \(t.label)")
                    XCTAssertEqual(errorKind, .invalidKey, "x25519 \(t.label)")
                    if output == nil { tally.note("zero shared secret refused") }
                }
                tally.record(t, accepted: output != nil, correct: output == shared)
            }
        }
        // 518 tests: 264 valid; 254 acceptable, of which 31 give the
        // all-zero secret (refused) and 223 (twist points, non-canonical
        // encodings, ...) are computed as RFC 7748 says.
        tally.check(against: file, expected: .init(valid: 264, invalid: 0, acceptableAccepted: 223, acceptableRejected: 31))
        XCTAssertEqual(tally.noteCount("zero shared secret refused"), 31)
    }

    // MARK: - Wycheproof: HKDF and HMAC

    func testWycheproofHKDFSHA256() throws {
        let file = try Wycheproof.load("hkdf_sha256")
        var tally = WycheproofTally("hkdf_sha256")
        for group in file.groups {
            for t in group.tests {
                let ikm = try t.bytes("ikm"), salt = try t.bytes("salt"), info = try t.bytes("info")
                let okm = try t.bytes("okm"), size = try t.int("size")
                var output: [UInt8]? = nil
                var errorKind: ItsMeError.Kind? = nil
                do {
                    output = try HKDF.derive(ikm: ikm, salt: salt, info: info, count: size).unsafeExportedArray()
                } catch {
                    errorKind = itsMeKind(error)
                }
                if t.result == .invalid {
                    // The invalid vectors ask for more than 255 * 32 bytes.
                    XCTAssertGreaterThan(size, HKDF.maxOutputCount, t.label)
                    if output == nil { XCTAssertEqual(errorKind, .invalidArgument, t.label) }
                }
                tally.record(t, accepted: output != nil, correct: output == okm)
            }
        }
        // 86 tests: 83 valid (23 with an empty salt), 3 asking for 8161 bytes.
        tally.check(against: file, expected: .init(valid: 83, invalid: 3))
    }

    func testWycheproofHMACSHA256() throws {
        let file = try Wycheproof.load("hmac_sha256")
        var tally = WycheproofTally("hmac_sha256")
        for group in file.groups {
            let tagSize = try group.int("tagSize")
            for t in group.tests {
                let key = try t.bytes("key"), msg = try t.bytes("msg"), tag = try t.bytes("tag")
                XCTAssertEqual(tag.count * 8, tagSize, t.label)
                let verified: Bool
                if tag.count == HMACSHA256.byteCount {
                    verified = HMACSHA256.verify(tag: tag, key: key, message: msg)
                    if t.result == .valid {
                        XCTAssertEqual(HMACSHA256.mac(key: key, message: msg), tag, t.label)
                    }
                } else if tag.count > 0, tag.count < HMACSHA256.byteCount, tagSize % 8 == 0 {
                    // A truncated tag: the leftmost bytes of the full MAC
                    // (RFC 2104 section 5), compared in constant time.
                    let full = HMACSHA256.mac(key: key, message: msg)
                    verified = ConstantTime.equal(Array(full.prefix(tag.count)), tag)
                    tally.note("truncated \(tagSize)-bit tags")
                } else {
                    tally.notApplicable += 1
                    continue
                }
                tally.record(t, accepted: verified)
            }
        }
        // 174 tests in 6 groups (keys of 128, 256 and 520 bits; tags of 256
        // and 128 bits): 66 valid, 108 invalid; the 87 tests of the three
        // 128-bit-tag groups are checked on the truncated prefix.
        tally.check(against: file, expected: .init(valid: 66, invalid: 108))
        XCTAssertEqual(tally.noteCount("truncated 128-bit tags"), 87)
    }

    // MARK: - RFC 5869 (HKDF-SHA256), Appendix A.1 to A.3

    private struct HKDFCase {
        let name: String
        let ikm: String, salt: String, info: String
        let length: Int
        let prk: String, okm: String
    }

    private static let rfc5869: [HKDFCase] = [
        HKDFCase(
            name: "A.1 basic",
            ikm: "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b",
            salt: "000102030405060708090a0b0c",
            info: "f0f1f2f3f4f5f6f7f8f9",
            length: 42,
            prk: "077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5",
            okm: "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"),
        HKDFCase(
            name: "A.2 longer inputs and outputs",
            ikm: "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
                + "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
                + "404142434445464748494a4b4c4d4e4f",
            salt: "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
                + "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
                + "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf",
            info: "b0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecf"
                + "d0d1d2d3d4d5d6d7d8d9dadbdcdddedfe0e1e2e3e4e5e6e7e8e9eaebecedeeef"
                + "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff",
            length: 82,
            prk: "06a6b88c5853361a06104c9ceb35b45cef760014904671014a193f40c15fc244",
            okm: "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c"
                + "59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71"
                + "cc30c58179ec3e87c14c01d5c1f3434f1d87"),
        HKDFCase(
            name: "A.3 zero-length salt and info",
            ikm: "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b",
            salt: "",
            info: "",
            length: 42,
            prk: "19ef24a32c717b167f33a91d6f648bdf96596776afdb6377ac434c1c293ccb04",
            okm: "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"),
    ]

    func testHKDFRFC5869() throws {
        for c in Self.rfc5869 {
            let ikm = try XCTUnwrap(Hex.decode(c.ikm)), salt = try XCTUnwrap(Hex.decode(c.salt))
            let info = try XCTUnwrap(Hex.decode(c.info))
            let prk = try HKDF.extract(salt: salt, ikm: ikm)
            XCTAssertEqual(Hex.encodeUpper(prk.unsafeExportedArray()), c.prk.uppercased(), "PRK \(c.name)")
            let okm = try HKDF.expand(prk: prk, info: info, count: c.length)
            XCTAssertEqual(okm.count, c.length, c.name)
            XCTAssertEqual(Hex.encodeUpper(okm.unsafeExportedArray()), c.okm.uppercased(), "OKM \(c.name)")
            let derived = try HKDF.derive(ikm: ikm, salt: salt, info: info, count: c.length)
            XCTAssertTrue(derived.constantTimeEquals(okm), "derive \(c.name)")
        }
    }

    func testHKDFLimits() throws {
        let prk = [UInt8](repeating: 1, count: 32)
        XCTAssertEqual(try HKDF.expand(prk: prk, info: [UInt8](), count: HKDF.maxOutputCount).count, 8160)
        XCTAssertEqual(try HKDF.expand(prk: prk, info: [UInt8](), count: 0).count, 0)
        XCTAssertEqual(thrownKind { _ = try HKDF.expand(prk: prk, info: [UInt8](), count: 8161) }, .invalidArgument)
        XCTAssertEqual(thrownKind { _ = try HKDF.expand(prk: prk, info: [UInt8](), count: -1) }, .invalidArgument)
        XCTAssertEqual(
            thrownKind { _ = try HKDF.expand(prk: [UInt8](repeating: 1, count: 31), info: [UInt8](), count: 32) },
            .invalidArgument)
        // A shorter output is a prefix of a longer one.
        let long = try HKDF.expand(prk: prk, info: [1, 2, 3], count: 100).unsafeExportedArray()
        let short = try HKDF.expand(prk: prk, info: [1, 2, 3], count: 33).unsafeExportedArray()
        XCTAssertEqual(Array(long.prefix(33)), short)
    }

    // MARK: - Hashes and comparison

    func testSHA256FIPS180() {
        // FIPS 180-2 appendix B.1 and B.2, and the empty message.
        XCTAssertEqual(
            Hex.encodeUpper(SHA256.hash(Array("abc".utf8))),
            "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD")
        XCTAssertEqual(
            Hex.encodeUpper(SHA256.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))),
            "248D6A61D20638B8E5C026930C3E6039A33CE45964FF2167F6ECEDD419DB06C1")
        XCTAssertEqual(
            Hex.encodeUpper(SHA256.hash([UInt8]())),
            "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855")
    }

    func testConstantTimeEqual() {
        XCTAssertTrue(ConstantTime.equal([UInt8]([1, 2, 3]), [UInt8]([1, 2, 3])))
        XCTAssertFalse(ConstantTime.equal([UInt8]([1, 2, 3]), [UInt8]([1, 2, 4])))
        XCTAssertFalse(ConstantTime.equal([UInt8]([0, 2, 3]), [UInt8]([1, 2, 3])))
        // Different lengths, even when one is a prefix of the other.
        XCTAssertFalse(ConstantTime.equal([UInt8]([1, 2]), [UInt8]([1, 2, 3])))
        XCTAssertFalse(ConstantTime.equal([UInt8]([1, 2, 3]), [UInt8]()))
        // Empty values are equal, including buffers with no base address.
        XCTAssertTrue(ConstantTime.equal([UInt8](), [UInt8]()))
        XCTAssertTrue(ConstantTime.equal(UnsafeRawBufferPointer(start: nil, count: 0), UnsafeRawBufferPointer(start: nil, count: 0)))
        // Mixed views of the same bytes.
        let bytes: [UInt8] = Array(0..<64)
        XCTAssertTrue(ConstantTime.equal(bytes, bytes[0..<64]))
        XCTAssertTrue(ConstantTime.equal(bytes[8..<16], Array(8..<16) as [UInt8]))
    }

    func testHexDecodeAndRoundTrip() {
        XCTAssertEqual(Hex.decode(""), [])
        XCTAssertEqual(Hex.decode("00ff7F80"), [0x00, 0xFF, 0x7F, 0x80])
        XCTAssertEqual(Hex.decode("abcdef"), Hex.decode("ABCDEF"))
        // Odd length.
        XCTAssertNil(Hex.decode("0"))
        XCTAssertNil(Hex.decode("abc"))
        // Non-hex characters, anywhere.
        XCTAssertNil(Hex.decode("zz"))
        XCTAssertNil(Hex.decode("0g"))
        XCTAssertNil(Hex.decode("g0"))
        XCTAssertNil(Hex.decode("00 1"))
        XCTAssertNil(Hex.decode(" 001"))
        XCTAssertNil(Hex.decode("0x00"))
        XCTAssertNil(Hex.decode("éé"))  // four UTF-8 bytes, none hex
        // Every byte value survives encode then decode.
        let all = (0...255).map { UInt8($0) }
        let encoded = Hex.encodeUpper(all)
        XCTAssertEqual(encoded.count, 512)
        XCTAssertEqual(encoded, encoded.uppercased())
        XCTAssertEqual(Hex.decode(encoded), all)
        XCTAssertEqual(Hex.decode(encoded.lowercased()), all)
        XCTAssertEqual(Hex.encodeUpper(Hex.decode("deadBEEF")!), "DEADBEEF")
    }

    // MARK: - SecretBytes and random sources

    func testSecretBytes() throws {
        let zeros = try SecretBytes(count: 16)
        XCTAssertEqual(zeros.count, 16)
        XCTAssertEqual(zeros.unsafeExportedArray(), [UInt8](repeating: 0, count: 16))
        // A negative size is an argument error, not a trap.
        do {
            _ = try SecretBytes(count: -1)
            XCTFail("a secret of -1 bytes was made")
        } catch {
            XCTAssertEqual((error as? ItsMeError)?.kind, .invalidArgument)
        }

        let source: [UInt8] = Array(1...40)
        var secret = try SecretBytes(copying: source)
        XCTAssertEqual(secret.count, 40)
        XCTAssertTrue(secret.constantTimeEquals(source))
        XCTAssertFalse(secret.constantTimeEquals(Array(source.dropLast())))
        XCTAssertFalse(secret.constantTimeEquals(Array(source.reversed())))

        let copy = try secret.copy()
        XCTAssertEqual(copy.count, secret.count)
        XCTAssertTrue(copy.constantTimeEquals(secret))
        // The copy is independent of the original.
        secret.withMutableBytes { $0[0] ^= 0xFF }
        XCTAssertFalse(copy.constantTimeEquals(secret))
        XCTAssertTrue(copy.constantTimeEquals(source))
        XCTAssertEqual(secret.unsafeExportedArray()[0], 1 ^ 0xFF)

        let empty = try SecretBytes(copying: [UInt8]())
        XCTAssertEqual(empty.count, 0)
        XCTAssertTrue(empty.constantTimeEquals([UInt8]()))
        XCTAssertTrue(try empty.copy().constantTimeEquals(empty))
        XCTAssertFalse(empty.constantTimeEquals([UInt8](repeating: 0, count: 1)))
    }

    func testDeterministicRandom() throws {
        let seed = [UInt8](repeating: 0x42, count: 32)
        var a = DeterministicRandom(seed: seed)
        var b = DeterministicRandom(seed: seed)
        let a1 = a.bytes(64), a2 = a.bytes(64), a3 = a.bytes(7)
        XCTAssertEqual(a1, b.bytes(64))
        XCTAssertEqual(a2, b.bytes(64))
        XCTAssertEqual(a3, b.bytes(7))
        // Successive calls give different bytes.
        XCTAssertNotEqual(a1, a2)
        XCTAssertNotEqual(Array(a2.prefix(7)), a3)
        // Another seed gives another stream.
        var c = DeterministicRandom(seed: [UInt8](repeating: 0x43, count: 32))
        XCTAssertNotEqual(c.bytes(64), a1)
        // Secrets drawn from it are reproducible too.
        var r1 = DeterministicRandom(seed: seed), r2 = DeterministicRandom(seed: seed)
        let s1 = try SecretBytes(randomCount: 32, using: &r1)
        let s2 = try SecretBytes(randomCount: 32, using: &r2)
        XCTAssertTrue(s1.constantTimeEquals(s2))
        XCTAssertEqual(s1.unsafeExportedArray(), Array(a1.prefix(32)))
    }

    // MARK: - X25519 and Ed25519

    func testX25519RFC7748AndRoundTrip() throws {
        // RFC 7748 section 6.1.
        let alice = try SecretBytes(copying: Hex.decode("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")!)
        let bob = try SecretBytes(copying: Hex.decode("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")!)
        let alicePublic = try X25519.publicKey(secretKey: alice)
        let bobPublic = try X25519.publicKey(secretKey: bob)
        XCTAssertEqual(Hex.encodeUpper(alicePublic), "8520F0098930A754748B7DDCB43EF75A0DBF3A0D26381AF4EBA4A98EAA9B4E6A")
        XCTAssertEqual(Hex.encodeUpper(bobPublic), "DE9EDB7D7B7DC1B4D35B61C2ECE435373F8343C85B78674DADFC7E146F882B4F")
        let k1 = try X25519.sharedSecret(secretKey: alice, peerPublicKey: bobPublic)
        let k2 = try X25519.sharedSecret(secretKey: bob, peerPublicKey: alicePublic)
        XCTAssertEqual(Hex.encodeUpper(k1.unsafeExportedArray()), "4A5D9D5BA4CE2DE1728E3BF480350F25E07E21C947D19E3376F09B3C1E161742")
        XCTAssertTrue(k1.constantTimeEquals(k2))

        // Two fresh key pairs agree.
        var rng = SystemRandom()
        let a = try SecretBytes(randomCount: 32, using: &rng)
        let b = try SecretBytes(randomCount: 32, using: &rng)
        let ab = try X25519.sharedSecret(secretKey: a, peerPublicKey: X25519.publicKey(secretKey: b))
        let ba = try X25519.sharedSecret(secretKey: b, peerPublicKey: X25519.publicKey(secretKey: a))
        XCTAssertTrue(ab.constantTimeEquals(ba))
        XCTAssertFalse(ab.constantTimeEquals([UInt8](repeating: 0, count: 32)))

        // Wrong sizes, and a low-order point (zero).
        XCTAssertEqual(thrownKind { _ = try X25519.sharedSecret(secretKey: a, peerPublicKey: Array(bobPublic.prefix(31))) }, .invalidKey)
        XCTAssertEqual(thrownKind { _ = try X25519.sharedSecret(secretKey: a, peerPublicKey: [UInt8](repeating: 0, count: 32)) }, .invalidKey)
        let shortSecret = try SecretBytes(count: 31)
        XCTAssertEqual(thrownKind { _ = try X25519.sharedSecret(secretKey: shortSecret, peerPublicKey: bobPublic) }, .invalidArgument)
        XCTAssertEqual(thrownKind { _ = try X25519.publicKey(secretKey: shortSecret) }, .invalidArgument)
    }

    func testEd25519RFC8032AndRoundTrip() throws {
        // RFC 8032 section 7.1, test 1 (empty message).
        let seed = Hex.decode("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")!
        let rfcPair = try Ed25519.keyPair(seed: seed)
        XCTAssertEqual(Hex.encodeUpper(rfcPair.publicKey), "D75A980182B10AB7D54BFED3C964073A0EE172F3DAA62325AF021A68F707511A")
        let rfcSignature = try Ed25519.sign([UInt8](), secretKey: rfcPair.secretKey)
        XCTAssertEqual(
            Hex.encodeUpper(rfcSignature),
            "E5564300C360AC729086E2CC806E828A84877F1EB8E5D974D873E065224901555FB8821590A33BACC61E39701CF9B46BD25BF5F0595BBE24655141438E7A100B")
        XCTAssertTrue(Ed25519.verify(signature: rfcSignature, message: [UInt8](), publicKey: rfcPair.publicKey))

        var rng = DeterministicRandom(seed: [UInt8](repeating: 9, count: 32))
        let pair = try Ed25519.keyPair(seed: rng.bytes(32))
        let message = Array("attack at dawn".utf8)
        let signature = try Ed25519.sign(message, secretKey: pair.secretKey)
        XCTAssertEqual(signature.count, Ed25519.signatureCount)
        XCTAssertTrue(Ed25519.verify(signature: signature, message: message, publicKey: pair.publicKey))

        // Any flipped bit in the signature, message or key fails.
        for bit in [0, 7, 100, 255, 256, 400, 511] {
            var tampered = signature
            tampered[bit / 8] ^= UInt8(1 << (bit % 8))
            XCTAssertFalse(Ed25519.verify(signature: tampered, message: message, publicKey: pair.publicKey), "signature bit \(bit)")
        }
        var otherMessage = message
        otherMessage[0] ^= 1
        XCTAssertFalse(Ed25519.verify(signature: signature, message: otherMessage, publicKey: pair.publicKey))
        var otherKey = pair.publicKey
        otherKey[5] ^= 0x10
        XCTAssertFalse(Ed25519.verify(signature: signature, message: message, publicKey: otherKey))
        XCTAssertFalse(Ed25519.verify(signature: signature, message: message, publicKey: rfcPair.publicKey))
        XCTAssertFalse(Ed25519.verify(signature: Array(signature.dropLast()), message: message, publicKey: pair.publicKey))
        XCTAssertFalse(Ed25519.verify(signature: signature, message: message, publicKey: Array(pair.publicKey.dropLast())))

        XCTAssertEqual(thrownKind { _ = try Ed25519.keyPair(seed: [UInt8](repeating: 1, count: 31)) }, .invalidArgument)
        let shortKey = try SecretBytes(count: 32)
        XCTAssertEqual(thrownKind { _ = try Ed25519.sign(message, secretKey: shortKey) }, .invalidArgument)
    }

    // MARK: - AEAD

    func testAEADRoundTripAndTampering() throws {
        var rng = DeterministicRandom(seed: [UInt8](repeating: 3, count: 32))
        for algorithm in [AEAD.Algorithm.chacha20Poly1305, .aes256GCM] {
            let key = try SecretBytes(randomCount: AEAD.keyCount, using: &rng)
            let nonce = rng.bytes(AEAD.nonceCount)
            let plaintext = Array("the quick brown fox".utf8)
            let aad = Array("header v1".utf8)
            let sealed = try AEAD.seal(algorithm, key: key, nonce: nonce, plaintext: plaintext, aad: aad)
            XCTAssertEqual(sealed.count, plaintext.count + AEAD.tagCount)
            let opened = try AEAD.open(algorithm, key: key, nonce: nonce, ciphertext: sealed, aad: aad)
            XCTAssertTrue(opened.constantTimeEquals(plaintext), "\(algorithm)")

            // Wrong associated data.
            XCTAssertEqual(
                thrownKind { _ = try AEAD.open(algorithm, key: key, nonce: nonce, ciphertext: sealed, aad: Array("header v2".utf8)) },
                .authenticationFailed, "\(algorithm) wrong aad")
            XCTAssertEqual(
                thrownKind { _ = try AEAD.open(algorithm, key: key, nonce: nonce, ciphertext: sealed, aad: [UInt8]()) },
                .authenticationFailed, "\(algorithm) missing aad")
            // Altered ciphertext, tag, nonce or key.
            for index in [0, plaintext.count - 1, plaintext.count, sealed.count - 1] {
                var altered = sealed
                altered[index] ^= 0x01
                XCTAssertEqual(
                    thrownKind { _ = try AEAD.open(algorithm, key: key, nonce: nonce, ciphertext: altered, aad: aad) },
                    .authenticationFailed, "\(algorithm) byte \(index)")
            }
            var otherNonce = nonce
            otherNonce[11] ^= 0x80
            XCTAssertEqual(
                thrownKind { _ = try AEAD.open(algorithm, key: key, nonce: otherNonce, ciphertext: sealed, aad: aad) },
                .authenticationFailed, "\(algorithm) nonce")
            let otherKey = try SecretBytes(randomCount: AEAD.keyCount, using: &rng)
            XCTAssertEqual(
                thrownKind { _ = try AEAD.open(algorithm, key: otherKey, nonce: nonce, ciphertext: sealed, aad: aad) },
                .authenticationFailed, "\(algorithm) key")
            // Truncated below the tag size.
            XCTAssertEqual(
                thrownKind { _ = try AEAD.open(algorithm, key: key, nonce: nonce, ciphertext: Array(sealed.prefix(15)), aad: aad) },
                .authenticationFailed, "\(algorithm) short")
            // Empty plaintext still carries a tag.
            let emptySealed = try AEAD.seal(algorithm, key: key, nonce: nonce, plaintext: [UInt8](), aad: [UInt8]())
            XCTAssertEqual(emptySealed.count, AEAD.tagCount)
            XCTAssertEqual(try AEAD.open(algorithm, key: key, nonce: nonce, ciphertext: emptySealed, aad: [UInt8]()).count, 0)
            // Parameter sizes.
            XCTAssertEqual(
                thrownKind { _ = try AEAD.seal(algorithm, key: [UInt8](repeating: 0, count: 16), nonce: nonce, plaintext: plaintext, aad: aad) },
                .invalidArgument)
            XCTAssertEqual(
                thrownKind { _ = try AEAD.seal(algorithm, key: key, nonce: Array(nonce.prefix(8)), plaintext: plaintext, aad: aad) },
                .invalidArgument)
        }
    }

    // MARK: - Argon2id

    func testArgon2idRefusesParametersOutsideTheWindow() throws {
        let salt = [UInt8](repeating: 1, count: Argon2id.saltCount)
        let password = Array("password".utf8)
        let refused: [Argon2id.Parameters] = [
            .init(opsLimit: 1, memLimit: 2 << 30),  // 2 GiB
            // Would trap converting to Int if it ever reached libsodium: the
            // check comes first.
            .init(opsLimit: 1, memLimit: .max),
            .init(opsLimit: .max, memLimit: 8192),
            .init(opsLimit: 0, memLimit: 8192),
            .init(opsLimit: 11, memLimit: 8192),
            .init(opsLimit: 1, memLimit: 8191),
            .init(opsLimit: 1, memLimit: (1 << 30) + 1),
        ]
        for parameters in refused {
            XCTAssertFalse(parameters.isAccepted, "\(parameters)")
            XCTAssertEqual(
                thrownKind { _ = try Argon2id.deriveKey(password: password, salt: salt, parameters: parameters) },
                .invalidArgument, "\(parameters)")
        }

        XCTAssertTrue(Argon2id.Parameters.interactive.isAccepted)
        XCTAssertTrue(Argon2id.Parameters.moderate.isAccepted)
        XCTAssertTrue(Argon2id.Parameters(opsLimit: 10, memLimit: 1 << 30).isAccepted)

        // Salt and output sizes.
        let small = Argon2id.Parameters(opsLimit: 1, memLimit: 8192)
        XCTAssertEqual(thrownKind { _ = try Argon2id.deriveKey(password: password, salt: Array(salt.prefix(15)), parameters: small) }, .invalidArgument)
        XCTAssertEqual(thrownKind { _ = try Argon2id.deriveKey(password: password, salt: salt, parameters: small, count: 15) }, .invalidArgument)
        XCTAssertEqual(thrownKind { _ = try Argon2id.deriveKey(password: password, salt: salt, parameters: small, count: 65) }, .invalidArgument)
    }

    func testArgon2idSmallCostIsDeterministic() throws {
        let small = Argon2id.Parameters(opsLimit: 1, memLimit: 8192)
        let password = Array("correct horse battery staple".utf8)
        let salt: [UInt8] = Array(0..<16)
        let k1 = try Argon2id.deriveKey(password: password, salt: salt, parameters: small)
        let k2 = try Argon2id.deriveKey(password: password, salt: salt, parameters: small)
        XCTAssertEqual(k1.count, 32)
        XCTAssertTrue(k1.constantTimeEquals(k2))
        // Argon2id v1.3, t=1, m=8 KiB, p=1, 32-byte output, as computed by
        // an independent implementation (OpenSSL's).
        XCTAssertEqual(
            Hex.encodeUpper(k1.unsafeExportedArray()), "D17EA6341CA93DA6079EA2F64DC4AA31DD1AAF9CAA67FB42AC4AFD0714706F26")

        var otherSalt = salt
        otherSalt[15] ^= 1
        let k3 = try Argon2id.deriveKey(password: password, salt: otherSalt, parameters: small)
        XCTAssertFalse(k1.constantTimeEquals(k3))
        let k4 = try Argon2id.deriveKey(password: Array("correct horse battery stapler".utf8), salt: salt, parameters: small)
        XCTAssertFalse(k1.constantTimeEquals(k4))
        let k5 = try Argon2id.deriveKey(password: password, salt: salt, parameters: .init(opsLimit: 2, memLimit: 8192))
        XCTAssertFalse(k1.constantTimeEquals(k5))
        // The empty password is allowed and deterministic as well.
        let e1 = try Argon2id.deriveKey(password: [UInt8](), salt: salt, parameters: small, count: 16)
        let e2 = try Argon2id.deriveKey(password: [UInt8](), salt: salt, parameters: small, count: 16)
        XCTAssertEqual(e1.count, 16)
        XCTAssertTrue(e1.constantTimeEquals(e2))
    }
}

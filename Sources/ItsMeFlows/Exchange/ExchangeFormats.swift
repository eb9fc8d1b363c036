import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// The derivations and wire formats of the in-person exchanges
/// (docs/PROTOCOL.md sections 3, 5, 6 and 7), as pure functions.
package enum ExchangeProtocol {
    package static let version: UInt8 = SessionFrames.version
    package static let deviceSecretCount = 16
    package static let seedCount = 32
    package static let hashCount = 32

    // MARK: Seed (section 3)

    /// The ASCII salt: both fingerprints, ascending.
    package static func seedSalt(_ a: String, _ b: String) -> [UInt8] {
        let x = Array(a.utf8), y = Array(b.utf8)
        return x.lexicographicallyPrecedes(y) ? x + y : y + x
    }

    package static func deriveSeed(
        ephemeralSecret: UnsafeRawBufferPointer, peerEphemeralKey: [UInt8], fingerprints a: String, _ b: String,
        into out: UnsafeMutableRawBufferPointer
    ) throws {
        guard ephemeralSecret.count == X25519.keyCount, out.count == seedCount else {
            throw ItsMeError(.invalidArgument, "an X25519 secret key and a seed are 32 bytes")
        }
        try withScratch(X25519.keyCount) { shared in
            try X25519.sharedSecret(secretKey: ephemeralSecret, peerPublicKey: peerEphemeralKey, into: shared)
            try HKDF.derive(
                ikm: UnsafeRawBufferPointer(shared), salt: seedSalt(a, b), info: LV.b("itsme-verification-seed-v1"),
                into: out)
        }
    }

    // MARK: QR (section 5)

    package static let qrPrefix = "ITSME1:"
    static let qrFixedCount = 1 + 32 + 8 + 32 + 16 + 1 + 64
    /// The longest payload text of each format (5.1, section 6): the prefix
    /// and the base64url of a payload with a 128-byte name; the five fields
    /// of a source text with a 128-byte name of escaped characters. A longer
    /// text is a reading run on, refused before any of it is decoded (5.2).
    static let qrTextMaxCount = qrPrefix.utf8.count + (4 * (qrFixedCount + 128) + 2) / 3
    static let sourceTextMaxCount = 2 + 256 + 1 + 16 + 1 + 44 + 1 + 6

    /// Step 1 of 5.2 for a text with a known prefix: no longer than its
    /// format's longest payload text, else `.invalidArgument` (read it again).
    static func checkQRTextLength(_ bytes: [UInt8]) throws {
        let source = bytes.starts(with: Array("5|".utf8))
        let limit = source ? sourceTextMaxCount : qrTextMaxCount
        guard bytes.count <= limit else {
            throw ItsMeError(
                .invalidArgument,
                "the \(source ? "source-format " : "")QR text runs on past the longest payload (\(bytes.count) bytes, at most \(limit)); read it again")
        }
    }

    /// A verified peer payload of our QR format.
    struct QRPayload {
        let raw: [UInt8]
        let identityKey: [UInt8]
        let ephemeralKey: [UInt8]
        let deviceSecret: [UInt8]
        let name: String
        var fingerprint: String { Fingerprint.of(publicKey: identityKey) }
    }

    static func buildQRPayload(
        identity: Identity, ephemeralKey: [UInt8], deviceSecret: UnsafeRawBufferPointer
    ) throws -> [UInt8] {
        let name = Array(identity.name.utf8)
        var body: [UInt8] = [version]
        body.reserveCapacity(qrFixedCount + name.count)
        body += identity.publicKey
        guard let fingerprint = Hex.decode(identity.fingerprint) else { throw ItsMeError(.internal, "our fingerprint is not hex") }
        body += fingerprint
        body += ephemeralKey
        body += deviceSecret
        body.append(UInt8(name.count))
        body += name
        body += try identity.sign(LV.cat(LV.b("itsme-qr-payload-v1"), body))
        return body
    }

    static func qrText(_ payload: [UInt8]) -> String { qrPrefix + Base64.encode(payload, .urlUnpadded) }

    /// Checks 2 to 6 of section 5.2 (the own-key and X25519 checks need the
    /// receiver and are made by the exchange). A text that is not a whole
    /// payload (not canonical base64url, or shorter or longer than its name
    /// length says: a paste cut short or run on, a partial read) is
    /// `.invalidArgument`, which the exchange survives; the rest are
    /// `.malformedMessage` or `.authenticationFailed`, which end it.
    static func parseQR(_ text: Substring) throws -> QRPayload {
        guard let raw = Base64.decode(text, .urlUnpadded) else {
            throw ItsMeError(
                .invalidArgument, "the QR payload is not whole: its text is not canonical base64url (cut short or misread); read it again")
        }
        guard raw.count >= qrFixedCount + 1 else {
            throw ItsMeError(.invalidArgument, "the QR payload is cut short (\(raw.count) bytes); read it again")
        }
        guard raw[0] == version else { throw ItsMeError(.malformedMessage, "the QR payload has unknown version \(raw[0])") }
        let nameCount = Int(raw[1 + 32 + 8 + 32 + 16])
        guard nameCount >= 1 else { throw ItsMeError(.malformedMessage, "the QR payload's name is empty") }
        guard raw.count == qrFixedCount + nameCount else {
            throw ItsMeError(
                .invalidArgument,
                raw.count < qrFixedCount + nameCount
                    ? "the QR payload is cut short (\(raw.count) of \(qrFixedCount + nameCount) bytes); read it again"
                    : "the QR payload runs on past its end (\(raw.count) bytes, \(qrFixedCount + nameCount) expected); read it again")
        }
        let identityKey = Array(raw[1..<33])
        let fingerprint = Array(raw[33..<41])
        let ephemeralKey = Array(raw[41..<73])
        let deviceSecret = Array(raw[73..<89])
        let nameBytes = raw[90..<90 + nameCount]
        guard let name = String(validating: nameBytes, as: UTF8.self), DisplayName.isValid(name) else {
            throw ItsMeError(.malformedMessage, "the QR payload's name is not valid UTF-8 without control, invisible or bidi-override characters")
        }
        guard Array(SHA256.hash(identityKey).prefix(8)) == fingerprint else {
            throw ItsMeError(.authenticationFailed, "the QR payload's fingerprint does not match its identity key")
        }
        let signed = raw.count - Ed25519.signatureCount
        guard
            Ed25519.verify(
                signature: Array(raw[signed...]), message: LV.cat(LV.b("itsme-qr-payload-v1"), Array(raw[..<signed])),
                publicKey: identityKey)
        else { throw ItsMeError(.authenticationFailed, "the QR payload's signature does not verify") }
        return QRPayload(raw: raw, identityKey: identityKey, ephemeralKey: ephemeralKey, deviceSecret: deviceSecret, name: name)
    }

    /// th of section 5.3: the payload whose identity key is lower first.
    package static func qrTranscriptHash(_ a: [UInt8], keyA: [UInt8], _ b: [UInt8], keyB: [UInt8]) -> [UInt8] {
        let (low, high) = keyA.lexicographicallyPrecedes(keyB) ? (a, b) : (b, a)
        return SHA256.hash(LV.cat(LV.b("itsme-qr-transcript-v1"), low, high))
    }

    /// th of section 5.3 from two payload texts, for the C function.
    package static func qrTranscriptHash(texts a: String, _ b: String) throws -> [UInt8] {
        func raw(_ t: String) throws -> [UInt8] {
            guard t.hasPrefix(qrPrefix) else { throw ItsMeError(.invalidArgument, "not an ITSME1 payload text") }
            return try parseQR(t.dropFirst(qrPrefix.count)).raw
        }
        let x = try raw(a), y = try raw(b)
        return qrTranscriptHash(x, keyA: Array(x[1..<33]), y, keyB: Array(y[1..<33]))
    }

    // MARK: Source format (section 6)

    struct SourcePayload {
        let name: String
        let fingerprint: String
        let ephemeralKey: [UInt8]
        /// The 6 ASCII digits, as sent.
        let deviceSecret: [UInt8]
    }

    static func parseSource(_ text: String) throws -> SourcePayload {
        func bad(_ why: String) -> ItsMeError { ItsMeError(.malformedMessage, "source-format payload: \(why)") }
        var fields: [[UInt8]] = [[]]
        var escaped = false
        for c in text.utf8 {
            if escaped {
                guard fields.count == 2, c == UInt8(ascii: "|") || c == UInt8(ascii: "\\") else {
                    throw bad("a backslash may only escape | or \\ in the name")
                }
                fields[fields.count - 1].append(c)
                escaped = false
            } else if c == UInt8(ascii: "\\") {
                escaped = true
            } else if c == UInt8(ascii: "|") {
                fields.append([])
            } else {
                fields[fields.count - 1].append(c)
            }
        }
        guard !escaped else { throw bad("it ends in a lone backslash") }
        guard fields.count == 5, fields[0] == [UInt8(ascii: "5")] else { throw bad("it does not have 5 fields starting with 5") }
        guard let name = String(validating: fields[1], as: UTF8.self), DisplayName.isValid(name) else {
            throw bad("the name is not valid UTF-8 without control, invisible or bidi-override characters")
        }
        guard fields[2].count == 16, let fp = Hex.decode(String(decoding: fields[2], as: UTF8.self)) else {
            throw bad("the fingerprint is not 16 hex digits")
        }
        guard let key = Base64.decode(String(decoding: fields[3], as: UTF8.self), .standardPadded), key.count == 32 else {
            throw bad("the ephemeral key is not canonical base64 of 32 bytes")
        }
        guard fields[4].count == 6, fields[4].allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw bad("the device secret is not 6 digits")
        }
        return SourcePayload(name: name, fingerprint: Hex.encodeUpper(fp), ephemeralKey: key, deviceSecret: fields[4])
    }

    // MARK: Bluetooth (section 7)

    package enum FrameType: UInt8 {
        case hello = 1
        case key = 2
        case data = 3
        case confirm = 4
    }

    package static let maxFrameCount = 2 + 113 + DisplayName.maxBytes + AEAD.tagCount

    package static func commitment(
        identityKey: [UInt8], ephemeralKey: [UInt8], name: [UInt8], deviceSecret: UnsafeRawBufferPointer
    ) -> [UInt8] {
        let rest = LV.cat(name, Array(deviceSecret))
        return SHA256.hash(
            LV.cat(LV.b("itsme-sas-commit-v1"), [version], identityKey, ephemeralKey, SHA256.hash(rest)))
    }

    package static func bluetoothTH1(
        sessionCode: ShortCode, helloI: [UInt8], helloR: [UInt8], keyI: [UInt8], keyR: [UInt8]
    ) -> [UInt8] {
        SHA256.hash(LV.cat(LV.b("itsme-bluetooth-v1"), LV.b(sessionCode.text), helloI, helloR, keyI, keyR))
    }

    /// key_I || key_R (64 bytes) of section 7.3 into `out`.
    package static func bluetoothKeys(
        ephemeralSecret: UnsafeRawBufferPointer, peerEphemeralKey: [UInt8], th1: [UInt8],
        into out: UnsafeMutableRawBufferPointer
    ) throws {
        try SessionFrames.directionKeys(
            ephemeralSecret: ephemeralSecret, peerEphemeralKey: peerEphemeralKey, salt: th1, label: "itsme-bluetooth-key-v1",
            into: out)
    }

    package static func bluetoothTranscriptHash(th1: [UInt8], plaintextI: [UInt8], plaintextR: [UInt8]) -> [UInt8] {
        SHA256.hash(LV.cat(LV.b("itsme-bluetooth-transcript-v1"), th1, plaintextI, plaintextR))
    }
}

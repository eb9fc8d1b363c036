import ItsMePrimitives
import ItsMeBase

/// The degradation code (docs/PROTOCOL.md section 10.2): how a person who
/// changed devices tells each contact that the change is theirs.
public enum DegradationCode {
    package static let secretCount = 10
    package static let macCount = 5
    /// 24 base-32 characters, shown in six groups of four.
    package static let characterCount = 24
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)
    /// The attempt limiter that counts wrong codes, per identity.
    public static func limiter(store: any SecretStore) -> AttemptLimiter {
        AttemptLimiter(store: store, purpose: limiterPurpose)
    }
    static let limiterPurpose = "degradation-code"

    /// The MAC over the interim device secret `r` of the person `pid`.
    package static func mac<S: ByteView & ~Copyable>(seed: borrowing S, pid: [UInt8], secret r: UnsafeRawBufferPointer) throws
        -> [UInt8]
    {
        try withScratch(32) { k in
            try HKDF.derive(ikm: seed, salt: [UInt8](), info: LV.b("itsme-degradation-code-v1"), into: k)
            var message = LV.cat(pid, Array(r))
            defer { wipe(&message) }
            return Array(HMACSHA256.mac(key: UnsafeRawBufferPointer(k), message: message).prefix(macCount))
        }
    }

    /// Base-32 (RFC 4648 alphabet) of 15 bytes, in groups of four joined by "-".
    package static func format(_ bytes: [UInt8]) -> String {
        precondition(bytes.count == secretCount + macCount)
        var chars: [UInt8] = []
        var acc: UInt32 = 0, bits = 0
        for b in bytes {
            acc = acc << 8 | UInt32(b)
            bits += 8
            while bits >= 5 {
                bits -= 5
                chars.append(alphabet[Int(acc >> UInt32(bits) & 31)])
            }
        }
        var out = ""
        for (i, c) in chars.enumerated() {
            if i > 0, i % 4 == 0 { out += "-" }
            out.append(Character(Unicode.Scalar(c)))
        }
        return out
    }

    /// Typed input: any case, spaces and "-" ignored; exactly 24 characters
    /// of the alphabet.
    public static func parse(_ text: String) -> [UInt8]? {
        guard case .success(let values) = TypedInput.alphabetValues(text, alphabet: alphabet) else { return nil }
        var acc: UInt32 = 0, bits = 0, count = 0
        var out: [UInt8] = []
        for v in values {
            acc = acc << 5 | UInt32(v)
            bits += 5
            count += 1
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
            }
        }
        guard count == characterCount, out.count == secretCount + macCount else { return nil }
        return out
    }

    /// The code this device gives contact `contactID` after a device change:
    /// draws a new interim device secret, stores it as this device's secret
    /// for the contact (keeping theirs if this device can still read it,
    /// else unknown), and returns the code to send them.
    /// Throws `.notFound` for an unknown contact, `.invalidState` for one
    /// awaiting the peer's confirmation, `.corruptData` or
    /// `.authenticationFailed` if its record does not open, `.database` if the
    /// new device secret cannot be written.
    public static func create<R: RandomSource>(store: ContactStore, contactID: Int64, random: inout R) throws -> String {
        // A contact awaiting the peer's confirmation is used for nothing (8.1).
        try ContactStore.checkSettled(try store.contact(id: contactID))
        let seed = try store.seed(id: contactID)
        let r = try SecretBytes(randomCount: secretCount, using: &random)
        let tag = try r.withBytes { try mac(seed: seed, pid: store.ownerPublicKey, secret: $0) }
        var theirs = try SecretBytes(count: 0)
        do { theirs = try store.deviceSecrets(id: contactID).theirs.copy() } catch let e as ItsMeError
            where e.kind == .notFound || e.kind == .authenticationFailed
        {}
        try store.setDeviceSecrets(id: contactID, mine: r, theirs: theirs)
        var raw = r.unsafeExportedArray()
        defer { wipe(&raw) }
        return format(raw + tag)
    }

    /// Checks a code contact `contactID` sent after changing devices, in
    /// constant time and through the attempt limiter (a wrong code is a
    /// counted failure, `.authenticationFailed`; `.locked` after too many).
    /// A right code stores their interim device secret and marks the
    /// contact degraded with the change acknowledged; it never restores
    /// "verified". A code that does not parse is `.invalidArgument`, not
    /// counted.
    public static func accept(store: ContactStore, contactID: Int64, code: String, now: Int64) throws {
        try UnixTime.check(now)
        guard var bytes = parse(code) else {
            throw ItsMeError(.invalidArgument, "a degradation code is 24 letters and digits 2-7 (groups of four)")
        }
        defer { wipe(&bytes) }
        let contact = try store.contact(id: contactID)
        try ContactStore.checkSettled(contact)
        let seed = try store.seed(id: contactID)
        let r = try SecretBytes(copying: bytes.prefix(secretCount))
        let limiter = AttemptLimiter(store: store.secretStore, purpose: limiterPurpose)
        try limiter.attempt(now: now, failure: .authenticationFailed, what: "degradation code") {
            let expected = try r.withBytes { try mac(seed: seed, pid: contact.pid, secret: $0) }
            return ConstantTime.equal(expected, Array(bytes.suffix(macCount)))
        }
        // This device keeps the secret it says now: the new one of a
        // Security PIN Update it has committed (10.3), else its current one.
        var mine = try SecretBytes(count: 0)
        do {
            let secrets = try store.deviceSecrets(id: contactID)
            mine = try (secrets.committed && secrets.pendingMine.count > 0 ? secrets.pendingMine : secrets.mine).copy()
        } catch let e as ItsMeError where e.kind == .notFound || e.kind == .authenticationFailed {}
        try store.setDeviceSecrets(id: contactID, mine: mine, theirs: r)
        try store.setState(id: contactID, .degraded, acknowledged: true, now: now)
    }
}

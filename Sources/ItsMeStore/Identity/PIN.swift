import ItsMePrimitives
import ItsMeBase

/// The 6-digit access PIN: hashed with Argon2id (parameters stored beside
/// the hash), checked in constant time, guarded by the attempt limiter.
///
/// The PIN is an access gate, not encryption: it is only as strong as the
/// secret store holding its hash, since whoever reads that store can try
/// all 10^6 PINs offline.
public struct PIN: Sendable {
    /// The number of digits of a PIN.
    public static let length = 6
    /// The secret store item holding the PIN's verifier (an Argon2id hash).
    package static let itemName = "itsme.pin"
    static let recordVersion: UInt8 = 1
    static let algorithmArgon2id13: UInt8 = 1
    static let hashCount = 32
    static let recordCount = 1 + 1 + 8 + 8 + Argon2id.saltCount + hashCount

    let store: any SecretStore
    let parameters: Argon2id.Parameters
    /// The attempt limiter of PIN checks (`itsme.limiter.pin` in the store).
    package var limiter: AttemptLimiter { AttemptLimiter(store: store, purpose: "pin") }

    /// The PIN kept in `store`, hashed with `parameters` when set or changed
    /// (a stored verifier keeps the parameters it was made with). Reads nothing
    /// until used.
    public init(store: any SecretStore, parameters: Argon2id.Parameters = .interactive) {
        self.store = store
        self.parameters = parameters
    }

    /// Exactly six ASCII digits, copied to guarded memory.
    package static func validated(_ pin: String) throws -> SecretBytes {
        let digits = Array(pin.utf8)
        defer { var d = digits; wipe(&d) }
        guard digits.count == length, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw ItsMeError(.invalidPIN, "a PIN is exactly \(length) digits 0-9")
        }
        return try SecretBytes(copying: digits)
    }

    /// Whether a PIN is set. Throws `.corruptData` if the stored verifier is
    /// malformed, `.secretStore` if the store fails.
    public func isSet() throws -> Bool {
        guard let record = try store.get(Self.itemName) else { return false }
        _ = try Self.parse(record)
        return true
    }

    /// Sets the first PIN; `.alreadyExists` if one is set.
    public func set(_ pin: String) throws {
        let secret = try Self.validated(pin)
        guard try store.get(Self.itemName) == nil else {
            throw ItsMeError(.alreadyExists, "a PIN is already set: change it with the old PIN")
        }
        try write(secret)
        try limiter.reset()
    }

    /// Checks `pin` at `now` (Unix seconds) through the attempt limiter. Throws
    /// `.invalidPIN` if it is not six digits (not counted), `.notFound` if no PIN
    /// is set, `.locked` while a lock lasts (nothing checked), `.wrongPIN` if it
    /// does not match (counted). A right PIN resets the count.
    public func verify(_ pin: String, now: Int64) throws {
        try UnixTime.check(now)
        let secret = try Self.validated(pin)
        guard let record = try store.get(Self.itemName) else {
            throw ItsMeError(.notFound, "no PIN is set")
        }
        let stored = try Self.parse(record)
        try limiter.attempt(now: now, failure: .wrongPIN, what: "PIN") {
            let hash = try Argon2id.deriveKey(
                password: secret, salt: stored.salt, parameters: stored.parameters, count: Self.hashCount)
            return hash.constantTimeEquals(stored.hash)
        }
    }

    /// Replaces the PIN after verifying `old` as `verify` does (with its errors);
    /// `.invalidPIN` if `new` is not six digits, checked first.
    package func change(old: String, new: String, now: Int64) throws {
        let newSecret = try Self.validated(new)
        try verify(old, now: now)
        try write(newSecret)
    }

    /// The failed attempts so far and the wait at `now`, as `AttemptLimiter.status`.
    public func status(now: Int64) throws -> AttemptLimiter.Status {
        try limiter.status(now: now)
    }

    private struct Stored: ~Copyable {
        let parameters: Argon2id.Parameters
        let salt: [UInt8]
        let hash: SecretBytes
    }

    /// Record v1: version (1) | algorithm (1, 1 = Argon2id v1.3) |
    /// opslimit (8) | memlimit (8) | salt (16) | hash (32), big-endian.
    private static func parse(_ record: borrowing SecretBytes) throws -> Stored {
        try record.withBytes { bytes in
            var r = RecordReader(bytes, what: "stored PIN")
            let version = try r.byte()
            guard version == recordVersion else {
                throw ItsMeError(.corruptData, "stored PIN has unknown format version \(version)")
            }
            guard try r.byte() == algorithmArgon2id13 else {
                throw ItsMeError(.corruptData, "stored PIN uses an unknown hash algorithm")
            }
            let parameters = Argon2id.Parameters(opsLimit: try r.uint64(), memLimit: try r.uint64())
            guard parameters.isAccepted else {
                throw ItsMeError(.corruptData, "stored PIN has out-of-range hash parameters")
            }
            let stored = Stored(parameters: parameters, salt: try r.array(Argon2id.saltCount), hash: try r.secret(hashCount))
            try r.finish()
            return stored
        }
    }

    private func write(_ pin: borrowing SecretBytes) throws {
        var rng = SystemRandom()
        let salt = rng.bytes(Argon2id.saltCount)
        let hash = try Argon2id.deriveKey(password: pin, salt: salt, parameters: parameters, count: Self.hashCount)
        var w = try RecordWriter(count: Self.recordCount)
        w.append(Self.recordVersion)
        w.append(Self.algorithmArgon2id13)
        w.append(parameters.opsLimit)
        w.append(parameters.memLimit)
        w.append(salt)
        w.append(hash)
        let record = w.finish()
        try store.put(Self.itemName, bytes: record)
    }
}

import CSodium
import Synchronization
import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// Service approvals (docs/PROTOCOL.md 19): a service (a web site, a bank)
/// lets a person approve a login or a transaction on their device.
///
/// Device side: `enroll` makes a fresh Ed25519 key for one service, kept in
/// the secret store (item `itsme.credential.<hash>`, docs/STORAGE.md), and
/// the enrollment message the service keeps; `Request(parsing:now:)` reads a
/// request to show it; `sign` answers it (approve with some of the requested
/// scopes, or deny).
///
/// Service side: `verifyEnrollment` checks an enrollment against the
/// service's own ID and the nonce it issued; `Request.create` makes a
/// request (its bytes are the service's record); `verify` checks an answer
/// against that record, the user's enrolled keys, the service's clock and a
/// `ReplayStore`, in the order of PROTOCOL.md 19.5.
///
/// Every function is thread-safe; calls on one secret store should be
/// serialised by the caller (the C layer does).
public enum ServiceApproval {
    /// The version byte of enrollments, requests and approvals.
    public static let version: UInt8 = 1
    /// The length of a credential ID in bytes.
    public static let credentialIDCount = 16
    /// The longest service ID in bytes (printable ASCII).
    public static let serviceIDMaxBytes = 255
    /// The longest session ID in bytes (printable ASCII).
    public static let sessionIDMaxBytes = 128
    /// An OTP is exactly this many ASCII digits.
    public static let otpCount = 6
    /// The most scopes a request may ask for.
    public static let maxScopes = 32
    /// The longest scope in bytes (printable ASCII, no space).
    public static let scopeMaxBytes = 64
    /// The longest scope list as text: 32 scopes of 64 bytes and 31 spaces
    /// (the C layer adds its NUL: ITSME_SCOPES_TEXT_SIZE = 2080).
    public static let scopesTextMaxBytes = maxScopes * scopeMaxBytes + maxScopes - 1
    /// The nonce a service issues for an enrollment.
    public static let enrollmentNonceCounts: ClosedRange<Int> = 16...64
    /// The nonce of a request.
    public static let requestNonceCount = 32
    /// A request lives 1 to 600 seconds.
    public static let lifetimes: ClosedRange<Int64> = 1...600
    /// The longest lifetime of a request in seconds.
    public static let maxLifetime: Int64 = 600

    /// `scopes(...)` at its longest: u8(32) and 32 scopes of 64 bytes.
    static let scopesMaxCount = 1 + maxScopes * (1 + scopeMaxBytes)
    /// u8(1) || credential_pk || u8(len(label)) || signature, without the label.
    static let enrollmentFixedCount = 1 + Ed25519.publicKeyCount + 1 + Ed25519.signatureCount
    /// The largest enrollment, with a label of 128 bytes (226).
    public static let enrollmentMaxCount = enrollmentFixedCount + DisplayName.maxBytes
    /// The largest request (2650).
    public static let requestMaxCount =
        1 + (1 + serviceIDMaxBytes) + (1 + DisplayName.maxBytes) + (1 + sessionIDMaxBytes) + otpCount + requestNonceCount + 8 + 8
        + scopesMaxCount
    /// An approval without its scopes: version, credential ID, decision,
    /// timestamp, OTP, signature.
    static let approvalFixedCount = 1 + credentialIDCount + 1 + 8 + otpCount + Ed25519.signatureCount
    /// The largest approval (2177).
    public static let approvalMaxCount = approvalFixedCount + scopesMaxCount

    /// Secret store items of credentials start with this.
    public static let credentialItemPrefix = "itsme.credential."
    static let credentialRecordVersion: UInt8 = 1

    static let credentialIDLabel = "itsme-credential-id-v1"
    static let credentialNameLabel = "itsme-credential-name-v1"
    static let enrollLabel = "itsme-enroll-v1"
    static let approvalLabel = "itsme-approval-v1"
    static let replayLabel = "itsme-approval-replay-v1"

    /// What the person decided on the device. The raw values are encoded in the
    /// approval and are the C interface's constants.
    public enum Decision: UInt8, Sendable {
        /// The request is approved with the scopes it asked for.
        case approve = 1
        /// No scope is granted with a denial.
        case deny = 2
    }

    // MARK: Values

    /// Why `bytes` is not 1 to `max` bytes of printable ASCII (0x21 to
    /// 0x7E), or nil if it is.
    static func asciiProblem<C: Collection<UInt8>>(_ bytes: C, _ what: String, max: Int) -> String? {
        guard !bytes.isEmpty, bytes.count <= max else {
            return "\(what) must be 1 to \(max) bytes, got \(bytes.count)"
        }
        guard bytes.allSatisfy({ $0 >= 0x21 && $0 <= 0x7e }) else {
            return "\(what) must be printable ASCII (0x21 to 0x7E, no space)"
        }
        return nil
    }

    static func invalid(_ message: String) -> ItsMeError { ItsMeError(.invalidArgument, message) }
    static func malformed(_ message: String) -> ItsMeError { ItsMeError(.malformedMessage, message) }

    /// `.invalidArgument` unless `text` is 1 to `max` bytes of printable ASCII.
    static func checkedASCII(_ text: String, _ what: String, max: Int) throws -> [UInt8] {
        let bytes = Array(text.utf8)
        if let problem = asciiProblem(bytes, what, max: max) { throw invalid(problem) }
        return bytes
    }

    static func checkedServiceID(_ serviceID: String) throws -> [UInt8] {
        try checkedASCII(serviceID, "a service ID", max: serviceIDMaxBytes)
    }

    static func checkedName(_ name: String, _ what: String) throws -> [UInt8] {
        guard DisplayName.isValid(name) else {
            throw invalid("\(what) is 1 to \(DisplayName.maxBytes) bytes of UTF-8 without control, invisible or bidi-override characters")
        }
        return Array(name.utf8)
    }

    static func precedes(_ a: [UInt8], _ b: [UInt8]) -> Bool { a.lexicographicallyPrecedes(b) }

    // MARK: Scope lists

    /// Checks scopes given in any order (`.invalidArgument` for an invalid
    /// one, a repeated one, or more than 32) and sorts them in increasing
    /// byte order.
    static func checkedScopes(_ scopes: [String], what: String = "scope") throws -> [[UInt8]] {
        guard scopes.count <= maxScopes else {
            throw invalid("at most \(maxScopes) scopes, got \(scopes.count)")
        }
        var sorted: [[UInt8]] = []
        for scope in scopes {
            let bytes = try checkedASCII(scope, "a \(what)", max: scopeMaxBytes)
            sorted.append(bytes)
        }
        sorted.sort(by: precedes)
        for i in sorted.indices.dropFirst() where sorted[i] == sorted[i - 1] {
            throw invalid("the \(what) '\(String(decoding: sorted[i], as: UTF8.self))' is given twice")
        }
        return sorted
    }

    /// `scopes(s_1, ..., s_n) = u8(n) || u8(len(s_1)) || s_1 || ...`.
    static func encodeScopes(_ scopes: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = [UInt8(scopes.count)]
        for s in scopes { out += [UInt8(s.count)] + s }
        return out
    }

    /// Reads `scopes(...)`: at most 32, each 1 to 64 bytes of printable
    /// ASCII, in strictly increasing byte order; `.malformedMessage` else.
    static func readScopes(_ r: inout RecordReader, _ what: String) throws -> [[UInt8]] {
        let count = Int(try r.byte())
        guard count <= maxScopes else { throw malformed("\(what) has \(count) scopes; at most \(maxScopes)") }
        var scopes: [[UInt8]] = []
        for i in 0..<count {
            let scope = try r.array(Int(try r.byte()))
            if let problem = asciiProblem(scope, "\(what): scope \(i + 1)", max: scopeMaxBytes) {
                throw malformed(problem)
            }
            if let previous = scopes.last {
                guard previous != scope else {
                    throw malformed("\(what) repeats the scope '\(String(decoding: scope, as: UTF8.self))'")
                }
                guard precedes(previous, scope) else {
                    throw malformed("\(what) are not in increasing byte order")
                }
            }
            scopes.append(scope)
        }
        return scopes
    }

    /// A scope list as text, scopes separated by single spaces ("email
    /// profile"; "" for none), in any order: sorted in increasing byte
    /// order. `.invalidArgument` for an empty item (two spaces, a space at
    /// either end), an invalid scope, a repeated one, or more than 32.
    public static func scopes(parsing text: String) throws -> [String] {
        if text.isEmpty { return [] }
        let items = text.utf8.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard !items.contains(where: \.isEmpty) else {
            throw invalid("scopes are separated by single spaces, with none at either end")
        }
        return try checkedScopes(items.map { String(decoding: $0, as: UTF8.self) }).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Scopes as text: in increasing byte order, separated by single spaces.
    public static func scopesText(_ scopes: [String]) -> String {
        scopes.map { Array($0.utf8) }.sorted(by: precedes).map { String(decoding: $0, as: UTF8.self) }.joined(separator: " ")
    }

    // MARK: Identifiers and messages

    /// `credential_id = SHA-256(lv_cat("itsme-credential-id-v1", credential_pk))[0..16]`.
    public static func credentialID(publicKey: [UInt8]) -> [UInt8] {
        Array(SHA256.hash(LV.cat(LV.b(credentialIDLabel), publicKey)).prefix(credentialIDCount))
    }

    /// The secret store item of the credential for `serviceID`:
    /// `itsme.credential.` and 32 lowercase hex digits of the first 16 bytes
    /// of SHA-256(lv_cat("itsme-credential-name-v1", service_id)).
    public static func credentialItemName(serviceID: String) -> String {
        credentialItemPrefix
            + Hex.encodeUpper(SHA256.hash(LV.cat(LV.b(credentialNameLabel), LV.b(serviceID))).prefix(16)).lowercased()
    }

    /// What the enrollment signature covers.
    static func enrollmentMessage(serviceID: [UInt8], nonce: [UInt8], publicKey: [UInt8], label: [UInt8]) -> [UInt8] {
        LV.cat(LV.b(enrollLabel), serviceID, nonce, publicKey, label)
    }

    /// What an approval's signature covers (19.4): every value but the
    /// credential ID, timestamp, granted scopes and decision from the request.
    static func approvalMessage(
        request: Request, credentialID: [UInt8], timestamp: Int64, granted: [[UInt8]], decision: Decision
    ) -> [UInt8] {
        LV.cat(
            LV.b(approvalLabel), LV.b(request.serviceID), credentialID, request.nonce, SHA256.hash(request.bytes),
            LV.b(request.sessionID), LV.b(request.otp), VoiceProtocol.u64(timestamp), LV.cat(granted), [decision.rawValue])
    }

    // MARK: The request

    /// A request (19.3), as the service made it or the device read it.
    public struct Request: Equatable, Sendable, CustomStringConvertible {
        /// The service's ID (printable ASCII), which binds credentials and requests.
        public let serviceID: String
        /// The service's name as shown to the person (a display name).
        public let serviceName: String
        /// The service's session this request belongs to (printable ASCII).
        public let sessionID: String
        /// Six ASCII digits, shown on both screens.
        public let otp: String
        /// The request's 32 random bytes, which make it single-use.
        public let nonce: [UInt8]
        /// When the service issued the request, in Unix seconds.
        public let issuedAt: Int64
        /// The last second at which an approval of the request is accepted.
        public let expiresAt: Int64
        /// In increasing byte order.
        public let scopes: [String]
        /// The exact encoding: the service's record.
        public let bytes: [UInt8]

        /// Parses a request strictly (every rule of 19.1 and 19.3):
        /// `.malformedMessage`, saying which rule failed, else.
        public init(parsing bytes: [UInt8]) throws {
            guard bytes.count <= ServiceApproval.requestMaxCount else {
                throw malformed("an approval request is at most \(ServiceApproval.requestMaxCount) bytes, got \(bytes.count)")
            }
            typealias Fields = (
                serviceID: String, serviceName: String, sessionID: String, otp: String, nonce: [UInt8], issuedAt: Int64,
                expiresAt: Int64, scopes: [String]
            )
            let f = try bytes.withUnsafeBytes { raw -> Fields in
                var r = RecordReader(raw, what: "the approval request", kind: .malformedMessage)
                let version = try r.byte()
                guard version == ServiceApproval.version else {
                    throw malformed("the approval request has version \(version); this library reads version 1")
                }
                let serviceID = try r.array(Int(try r.byte()))
                if let problem = asciiProblem(serviceID, "the approval request's service ID", max: serviceIDMaxBytes) {
                    throw malformed(problem)
                }
                let nameBytes = try r.array(Int(try r.byte()))
                guard let serviceName = String(validating: nameBytes, as: UTF8.self), DisplayName.isValid(serviceName) else {
                    throw malformed("the approval request's service name is not 1 to 128 bytes of UTF-8 without control, invisible or bidi-override characters")
                }
                let sessionID = try r.array(Int(try r.byte()))
                if let problem = asciiProblem(sessionID, "the approval request's session ID", max: sessionIDMaxBytes) {
                    throw malformed(problem)
                }
                let otp = try r.array(otpCount)
                guard otp.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
                    throw malformed("the approval request's OTP is not six ASCII digits")
                }
                let nonce = try r.array(requestNonceCount)
                let issued = try r.uint64(), expires = try r.uint64()
                guard issued <= UInt64(UnixTime.max), expires <= UInt64(UnixTime.max) else {
                    throw malformed("the approval request's times are after the year 9999")
                }
                guard issued < expires else {
                    throw malformed("the approval request expires before it is issued (or at the same second)")
                }
                guard expires - issued <= UInt64(maxLifetime) else {
                    throw malformed("the approval request lives \(expires - issued) seconds; at most \(maxLifetime)")
                }
                let scopes = try readScopes(&r, "the approval request's scopes")
                try r.finish()
                func text(_ b: [UInt8]) -> String { String(decoding: b, as: UTF8.self) }
                return (
                    text(serviceID), serviceName, text(sessionID), text(otp), nonce, Int64(issued), Int64(expires), scopes.map(text)
                )
            }
            serviceID = f.serviceID
            serviceName = f.serviceName
            sessionID = f.sessionID
            otp = f.otp
            nonce = f.nonce
            issuedAt = f.issuedAt
            expiresAt = f.expiresAt
            scopes = f.scopes
            self.bytes = bytes
        }

        /// The device's reading (itsme_approval_request_parse): parses
        /// strictly (`.malformedMessage`), then refuses the request once `now`
        /// is past its expiry (`.expired`). `.invalidArgument` for a time
        /// out of range.
        public init(parsing bytes: [UInt8], now: Int64) throws {
            try UnixTime.check(now)
            try self.init(parsing: bytes)
            try checkNotExpired(now: now)
        }

        func checkNotExpired(now: Int64) throws {
            guard now <= expiresAt else {
                throw ItsMeError(.expired, "the approval request expired \(now - expiresAt) seconds ago")
            }
        }

        /// Seconds until it expires at `now` (0 once expired).
        public func secondsLeft(now: Int64) -> Int64 { Swift.max(0, expiresAt - now) }

        /// The requested scopes as text ("" for none).
        public var scopesText: String { scopes.joined(separator: " ") }

        /// SHA-256(lv_cat("itsme-approval-replay-v1", service_id, nonce)).
        package var replayKey: [UInt8] { SHA256.hash(LV.cat(LV.b(replayLabel), LV.b(serviceID), nonce)) }

        /// Neither the OTP, the nonce nor the session ID.
        public var description: String {
            "ServiceApproval.Request(service: \(serviceID), scopes: \(scopes.count), issued: \(issuedAt), expires: \(expiresAt))"
        }

        /// Makes a request (itsme_approval_request_create): a fresh nonce
        /// (32 bytes, one draw), then a uniform six-digit OTP (4 bytes at a
        /// time, values at or above 4,294,000,000 rejected, the rest modulo
        /// 10^6), issued at `now` and expiring `lifetime` seconds later
        /// (1 to 600). Scopes may come in any order and are encoded sorted.
        /// `.invalidArgument` for any invalid input; nothing is drawn then.
        public static func create<R: RandomSource>(
            serviceID: String, serviceName: String, sessionID: String, scopes: [String], lifetime: Int64, now: Int64,
            random: inout R
        ) throws -> Request {
            try UnixTime.check(now)
            let service = try checkedServiceID(serviceID)
            let name = try checkedName(serviceName, "a service name")
            let session = try checkedASCII(sessionID, "a session ID", max: sessionIDMaxBytes)
            let sorted = try checkedScopes(scopes)
            guard lifetimes.contains(lifetime) else {
                throw invalid("a request lives 1 to \(maxLifetime) seconds, got \(lifetime)")
            }
            guard now <= UnixTime.max - lifetime else { throw invalid("the request would expire after the year 9999") }
            let nonce = random.bytes(requestNonceCount)
            let otp = randomOTP(using: &random)
            var bytes: [UInt8] = [ServiceApproval.version]
            bytes += [UInt8(service.count)] + service + [UInt8(name.count)] + name + [UInt8(session.count)] + session
            bytes += Array(otp.utf8) + nonce + VoiceProtocol.u64(now) + VoiceProtocol.u64(now + lifetime) + encodeScopes(sorted)
            return try Request(parsing: bytes)
        }

        /// `create` with the operating system's random source.
        public static func create(
            serviceID: String, serviceName: String, sessionID: String, scopes: [String], lifetime: Int64, now: Int64
        ) throws -> Request {
            var random = SystemRandom()
            return try create(
                serviceID: serviceID, serviceName: serviceName, sessionID: sessionID, scopes: scopes, lifetime: lifetime, now: now,
                random: &random)
        }
    }

    /// A uniform six-digit OTP by rejection sampling: 4 bytes at a time as a
    /// big-endian integer, rejected at or above 4,294,000,000 (the largest
    /// multiple of 10^6 below 2^32), else taken modulo 10^6.
    static func randomOTP<R: RandomSource>(using rng: inout R) -> String {
        let limit: UInt32 = 4_294_000_000
        while true {
            let r = rng.bytes(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            if r < limit {
                let digits = String(r % 1_000_000)
                return String(repeating: "0", count: otpCount - digits.count) + digits
            }
        }
    }

    // MARK: The approval

    /// An approval (19.4) as parsed: every rule of 19.1 and 19.5 step 1.
    struct Approval {
        let credentialID: [UInt8]
        let decision: Decision
        let timestamp: Int64
        let otp: [UInt8]
        let granted: [[UInt8]]
        let signature: [UInt8]

        init(parsing bytes: [UInt8]) throws {
            guard bytes.count <= approvalMaxCount else {
                throw malformed("an approval is at most \(approvalMaxCount) bytes, got \(bytes.count)")
            }
            let f = try bytes.withUnsafeBytes { raw in
                var r = RecordReader(raw, what: "the approval", kind: .malformedMessage)
                let version = try r.byte()
                guard version == ServiceApproval.version else {
                    throw malformed("the approval has version \(version); this library reads version 1")
                }
                let credentialID = try r.array(credentialIDCount)
                let rawDecision = try r.byte()
                guard let decision = Decision(rawValue: rawDecision) else {
                    throw malformed("the approval's decision is \(rawDecision); 1 approves, 2 denies")
                }
                let timestamp = try r.uint64()
                guard timestamp <= UInt64(UnixTime.max) else { throw malformed("the approval's timestamp is after the year 9999") }
                let otp = try r.array(otpCount)
                guard otp.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
                    throw malformed("the approval's OTP is not six ASCII digits")
                }
                let granted = try readScopes(&r, "the approval's granted scopes")
                guard decision == .approve || granted.isEmpty else { throw malformed("a denial grants no scope") }
                let signature = try r.array(Ed25519.signatureCount)
                try r.finish()
                return (credentialID, decision, Int64(timestamp), otp, granted, signature)
            }
            (credentialID, decision, timestamp, otp, granted, signature) = f
        }

        static func encode(
            credentialID: [UInt8], decision: Decision, timestamp: Int64, otp: String, granted: [[UInt8]], signature: [UInt8]
        ) -> [UInt8] {
            [version] + credentialID + [decision.rawValue] + VoiceProtocol.u64(timestamp) + Array(otp.utf8) + encodeScopes(granted) + signature
        }
    }

}

extension Ed25519 {
    /// A canonical encoding of a point of the prime-order subgroup, not of
    /// small order (libsodium's `crypto_core_ed25519_is_valid_point`): every
    /// honest public key is one.
    static func isValidPublicKey(_ key: [UInt8]) -> Bool {
        key.count == publicKeyCount && crypto_core_ed25519_is_valid_point(key) == 1
    }
}

// MARK: - Replay stores

/// A service's record of spent single-use values (the replay keys of
/// answered approval requests, PROTOCOL.md 19.5 step 7). May be used by
/// several threads at once: `insert` must be atomic across every verifier
/// sharing the store.
public protocol ReplayStore: AnyObject, Sendable {
    /// Records `key` (32 bytes) until `expiresAt` (it may be forgotten
    /// after that), and returns true if it was recorded already (leaving
    /// it as it was), false if it is new. `now` is the verifier's clock.
    func insert(key: [UInt8], expiresAt: Int64, now: Int64) throws -> Bool
}

/// A replay store in memory, for one process. An entry is live while `now`
/// is at most its expiry and dropped after. It holds at most `capacity`
/// live entries: an insert into a full store is refused with `.locked`
/// rather than forgetting a live entry (which would let its approval be
/// presented again).
public final class MemoryReplayStore: ReplayStore {
    /// The capacity used when `init(capacity:)` is given 0.
    public static let defaultCapacity = 1_000_000
    /// The most live entries the store holds.
    public let capacity: Int

    private struct Key: Hashable {
        let a: UInt64, b: UInt64, c: UInt64, d: UInt64

        init(_ bytes: [UInt8]) {
            func word(_ at: Int) -> UInt64 { bytes[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) } }
            (a, b, c, d) = (word(0), word(8), word(16), word(24))
        }
    }

    private struct Entry {
        let expiresAt: Int64
        let key: Key
    }

    /// The live keys and their expiry, and a min-heap of the same entries
    /// by expiry, so expired ones are dropped in O(log n) each.
    private struct State {
        var expiries: [Key: Int64] = [:]
        var heap: [Entry] = []

        mutating func dropExpired(now: Int64) {
            while let first = heap.first, first.expiresAt < now {
                expiries.removeValue(forKey: first.key)
                let last = heap.removeLast()
                guard !heap.isEmpty else { break }
                heap[0] = last
                var i = 0
                while true {
                    let l = 2 * i + 1, r = l + 1
                    var smallest = i
                    if l < heap.count, heap[l].expiresAt < heap[smallest].expiresAt { smallest = l }
                    if r < heap.count, heap[r].expiresAt < heap[smallest].expiresAt { smallest = r }
                    if smallest == i { break }
                    heap.swapAt(i, smallest)
                    i = smallest
                }
            }
        }

        mutating func add(_ entry: Entry) {
            expiries[entry.key] = entry.expiresAt
            heap.append(entry)
            var i = heap.count - 1
            while i > 0 {
                let parent = (i - 1) / 2
                guard heap[i].expiresAt < heap[parent].expiresAt else { break }
                heap.swapAt(i, parent)
                i = parent
            }
        }
    }

    private let state = Mutex<State>(State())

    /// `capacity` 0 (or less) means `defaultCapacity`, 1,000,000.
    public init(capacity: Int = 0) {
        self.capacity = capacity > 0 ? capacity : Self.defaultCapacity
    }

    public func insert(key: [UInt8], expiresAt: Int64, now: Int64) throws -> Bool {
        guard key.count == SHA256.byteCount else {
            throw ItsMeError(.invalidArgument, "a replay key is \(SHA256.byteCount) bytes, got \(key.count)")
        }
        let k = Key(key)
        let capacity = self.capacity
        return try state.withLock { s throws(ItsMeError) -> Bool in
            s.dropExpired(now: now)
            if s.expiries[k] != nil { return true }
            // Already expired: nothing to keep.
            guard expiresAt >= now else { return false }
            guard s.expiries.count < capacity else {
                throw ItsMeError(
                    .locked,
                    "the replay store is full (\(capacity) live entries): wait for some to expire, or use a larger or shared store")
            }
            s.add(Entry(expiresAt: expiresAt, key: k))
            return false
        }
    }

    /// How many entries it holds (expired ones are dropped at the next insert).
    public var count: Int { state.withLock { $0.expiries.count } }
}

/// An error from the ItsMe core: a kind that callers switch on, and a
/// human-readable detail that never contains secret material.
public struct ItsMeError: Error, Equatable, CustomStringConvertible {
    /// What went wrong, as an extensible set of kinds (new kinds may be
    /// added; treat unknown ones as errors). The raw value of each kind is
    /// the result code the C interface returns for it (include/itsme.h).
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        /// The kind's result code in the C interface (`ITSME_E_*` in include/itsme.h).
        public let code: Int32
        private init(_ code: Int32) { self.code = code }

        /// An argument is out of range or malformed: a bad name, code, time or size.
        public static let invalidArgument = Kind(1)
        /// An output buffer is too small (the C interface; Swift callers get arrays).
        public static let bufferTooSmall = Kind(2)
        /// libsodium is not initialised: `Sodium.initialize()` was not called or failed.
        public static let notInitialized = Kind(3)
        /// The CPU lacks what a required primitive needs (AES-256-GCM in hardware).
        public static let unsupportedPlatform = Kind(4)
        /// The item asked for does not exist: no identity, no such contact, no such row.
        public static let notFound = Kind(5)
        /// The item to create exists already, such as an identity in a secret store.
        public static let alreadyExists = Kind(6)
        /// A PIN that is not exactly six ASCII digits.
        public static let invalidPIN = Kind(7)
        /// A well-formed PIN that does not match the stored verifier.
        public static let wrongPIN = Kind(8)
        /// Too many failed attempts: the operation is refused until the wait the
        /// attempt limiter set has passed.
        public static let locked = Kind(9)
        /// The secret store failed to read, write or lock an item.
        public static let secretStore = Kind(10)
        /// Stored or imported data fails its checks (malformed, unknown version, bad seal).
        public static let corruptData = Kind(11)
        /// A signature, MAC or AEAD tag did not verify: the data was forged or altered,
        /// or the key is wrong.
        public static let authenticationFailed = Kind(12)
        /// A key that is not a valid point or has the wrong length.
        public static let invalidKey = Kind(13)
        /// A call in the wrong order for the session or exchange's current state;
        /// nothing changed.
        public static let invalidState = Kind(14)
        /// SQLite failed; the message carries SQLite's own text.
        public static let database = Kind(15)
        /// An allocation failed (guarded memory for secrets, or Argon2id's buffer).
        public static let outOfMemory = Kind(16)
        /// A broken internal invariant: a bug, not a bad input.
        public static let `internal` = Kind(17)
        /// The contact store belongs to another identity than the one opening it.
        public static let wrongIdentity = Kind(18)
        /// The verification window was used already for this contact: wait for the next.
        public static let windowUsed = Kind(19)
        /// A peer's message is invalid, of an unknown version, or out of order.
        public static let malformedMessage = Kind(20)
        /// Too late: an exchange older than 24 hours, or a session or request past its
        /// lifetime.
        public static let expired = Kind(21)
        /// A single-use message (an approval, a request) was presented already.
        public static let replayed = Kind(22)
        /// The contact store is older than, or not, the one this device last saw.
        public static let rolledBack = Kind(23)

        /// Every kind, in code order. The C header, the bindings and this
        /// list are checked against each other by the tests.
        public static let all: [Kind] = [
            .invalidArgument, .bufferTooSmall, .notInitialized, .unsupportedPlatform,
            .notFound, .alreadyExists, .invalidPIN, .wrongPIN, .locked, .secretStore,
            .corruptData, .authenticationFailed, .invalidKey, .invalidState, .database,
            .outOfMemory, .internal, .wrongIdentity, .windowUsed, .malformedMessage, .expired,
            .replayed, .rolledBack,
        ]

        /// The constant's name in include/itsme.h.
        public var symbol: String {
            switch code {
            case 0: return "ITSME_OK"
            case 1: return "ITSME_E_INVALID_ARGUMENT"
            case 2: return "ITSME_E_BUFFER_TOO_SMALL"
            case 3: return "ITSME_E_NOT_INITIALIZED"
            case 4: return "ITSME_E_UNSUPPORTED_PLATFORM"
            case 5: return "ITSME_E_NOT_FOUND"
            case 6: return "ITSME_E_ALREADY_EXISTS"
            case 7: return "ITSME_E_INVALID_PIN"
            case 8: return "ITSME_E_WRONG_PIN"
            case 9: return "ITSME_E_LOCKED"
            case 10: return "ITSME_E_SECRET_STORE"
            case 11: return "ITSME_E_CORRUPT_DATA"
            case 12: return "ITSME_E_AUTHENTICATION_FAILED"
            case 13: return "ITSME_E_INVALID_KEY"
            case 14: return "ITSME_E_INVALID_STATE"
            case 15: return "ITSME_E_DATABASE"
            case 16: return "ITSME_E_OUT_OF_MEMORY"
            case 17: return "ITSME_E_INTERNAL"
            case 18: return "ITSME_E_WRONG_IDENTITY"
            case 19: return "ITSME_E_WINDOW_USED"
            case 20: return "ITSME_E_MALFORMED_MESSAGE"
            case 21: return "ITSME_E_EXPIRED"
            case 22: return "ITSME_E_REPLAYED"
            case 23: return "ITSME_E_ROLLED_BACK"
            default: return "ITSME_E_UNKNOWN"
            }
        }

        /// The static English text for this kind (itsme_result_message).
        public var message: StaticString {
            switch code {
            case 0: return "ok"
            case 1: return "invalid argument"
            case 2: return "buffer too small"
            case 3: return "library not initialised: call itsme_init() first"
            case 4: return "unsupported platform: this CPU lacks AES-256-GCM support"
            case 5: return "not found"
            case 6: return "already exists"
            case 7: return "invalid PIN: a PIN is exactly 6 digits"
            case 8: return "wrong PIN"
            case 9: return "locked: too many failed attempts, wait and try again"
            case 10: return "secret store error"
            case 11: return "corrupt data"
            case 12: return "authentication failed"
            case 13: return "invalid key"
            case 14: return "invalid state"
            case 15: return "database error"
            case 16: return "out of memory"
            case 17: return "internal error"
            case 18: return "this store belongs to another identity"
            case 19: return "verification window already used"
            case 20: return "malformed message: the peer's message is invalid, of an unknown version, or out of order"
            case 21: return "expired: too late (an exchange older than 24 hours, a session or request past its lifetime)"
            case 22: return "replayed: this single-use message was presented already"
            case 23: return "rolled back: the contact store is older than, or not, the one this device last saw"
            default: return "unknown result code"
            }
        }

        /// The C constant's name, as `symbol`.
        public var description: String { symbol }
    }

    /// What went wrong, for callers to switch on.
    public let kind: Kind
    /// A detail for people and logs; never contains secrets.
    public let message: String

    /// An error of `kind` with a detail for people and logs; the detail must not
    /// contain secret material.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// The C constant's name and the detail, such as
    /// `ITSME_E_NOT_FOUND: no identity in this secret store`.
    public var description: String { "\(kind.symbol): \(message)" }
}

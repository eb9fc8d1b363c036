/// An error from the ItsMe core: a kind that callers switch on, and a
/// human-readable detail that never contains secret material.
public struct ItsMeError: Error, Equatable, CustomStringConvertible {
    /// What went wrong, as an extensible set of kinds (new kinds may be
    /// added; treat unknown ones as errors). The raw value of each kind is
    /// the result code the C interface returns for it (include/itsme.h).
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        public let code: Int32
        private init(_ code: Int32) { self.code = code }

        public static let invalidArgument = Kind(1)
        public static let bufferTooSmall = Kind(2)
        public static let notInitialized = Kind(3)
        public static let unsupportedPlatform = Kind(4)
        public static let notFound = Kind(5)
        public static let alreadyExists = Kind(6)
        public static let invalidPIN = Kind(7)
        public static let wrongPIN = Kind(8)
        public static let locked = Kind(9)
        public static let secretStore = Kind(10)
        public static let corruptData = Kind(11)
        public static let authenticationFailed = Kind(12)
        public static let invalidKey = Kind(13)
        public static let invalidState = Kind(14)
        public static let database = Kind(15)
        public static let outOfMemory = Kind(16)
        public static let `internal` = Kind(17)
        public static let wrongIdentity = Kind(18)
        public static let windowUsed = Kind(19)
        public static let malformedMessage = Kind(20)
        public static let expired = Kind(21)
        public static let replayed = Kind(22)
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

        public var description: String { symbol }
    }

    public let kind: Kind
    /// A detail for people and logs; never contains secrets.
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { "\(kind.symbol): \(message)" }
}

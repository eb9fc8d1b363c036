import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// The live device transfer's offer and messages (docs/PROTOCOL.md 17.3),
/// parsed into typed values. Every byte offset of them is in this file.

/// The offer the new device shows: `ITSMETR2:` and, in unpadded base64url,
/// version (2) | transfer id (16) | the receiver's one-time key (32).
package struct TransferOffer: Equatable {
    static let prefix = "ITSMETR2:"
    static let byteCount = 1 + 16 + X25519.keyCount

    package let transferID: [UInt8]
    package let receiverKey: [UInt8]
    /// The offer without the white space around it.
    package let text: String

    package init(transferID: [UInt8], receiverKey: [UInt8]) {
        self.transferID = transferID
        self.receiverKey = receiverKey
        text = Self.prefix + Base64.encode([DeviceTransfer.version] + transferID + receiverKey, .urlUnpadded)
    }

    /// `.malformedMessage` if `text` is not an offer of this version.
    package init(parsing text: String) throws {
        let s = TypedInput.withoutASCIIWhitespaceAround(text)
        guard s.hasPrefix(Self.prefix), let bytes = Base64.decode(String(s.dropFirst(Self.prefix.count)), .urlUnpadded) else {
            throw ItsMeError(
                .malformedMessage,
                s.hasPrefix("ITSMETR") && !s.hasPrefix(Self.prefix)
                    ? "this device transfer code is of another version (\(s.prefix(9))); this device reads ITSMETR2: update the other device"
                    : "this is not a device transfer code (ITSMETR2:...)")
        }
        guard bytes.count == Self.byteCount, bytes[0] == DeviceTransfer.version else {
            throw ItsMeError(.malformedMessage, "this device transfer code is damaged or of another version")
        }
        transferID = Array(bytes[1..<17])
        receiverKey = Array(bytes[17...])
        self.text = String(s)
    }

    /// The relay room: lowercase hex of 16 bytes derived from the transfer id.
    var roomName: String {
        Hex.encodeUpper(SHA256.hash(LV.cat(LV.b("itsme-transfer-room-v1"), transferID)).prefix(16)).lowercased()
    }
}

/// A message from the old device to the new one.
enum TransferMessage: Equatable {
    /// The sender's one-time key.
    case key(senderKey: [UInt8])
    /// The identity and the length of the contact store that follows,
    /// sealed (without the two header bytes).
    case identity(sealed: [UInt8])
    /// One chunk of the contact store, sealed.
    case store(sealed: [UInt8])

    enum Kind: UInt8 {
        case key = 1
        case identity = 2
        case store = 3
    }

    static let keyCount = 2 + X25519.keyCount
    /// An identity message: the header and the sealed contents of a 1- to
    /// 128-byte name and the store's length, 105 to 232 bytes (PROTOCOL.md 17.3).
    static let identityCounts = identityCount(nameByteCount: 1)...identityCount(nameByteCount: DisplayName.maxBytes)
    /// The contact store travels in chunks of this many bytes (the last
    /// one holds the rest).
    static let chunkCount = 32_768
    /// A store message: the header and one sealed chunk of 1 to 32,768 bytes.
    static let storeCounts = (2 + 1 + AEAD.tagCount)...(2 + chunkCount + AEAD.tagCount)

    static func identityCount(nameByteCount: Int) -> Int {
        2 + IdentityExport.blobCount(nameByteCount: nameByteCount) - IdentityExport.headerCount + 4
    }

    /// How many bytes chunk `index` of a store of `total` bytes holds.
    static func chunkLength(_ index: Int, total: Int) -> Int { min(chunkCount, total - index * chunkCount) }

    /// How many chunks a store of `total` bytes travels in.
    static func chunks(total: Int) -> Int { (total + chunkCount - 1) / chunkCount }

    /// `.malformedMessage` for a message of another version, an unknown
    /// type, or a wrong length (found before any decryption).
    init(parsing m: [UInt8]) throws {
        guard m.count >= 2, m[0] == DeviceTransfer.version else {
            throw ItsMeError(.malformedMessage, "not a device transfer message of version \(DeviceTransfer.version)")
        }
        switch Kind(rawValue: m[1]) {
        case .key:
            guard m.count == Self.keyCount else {
                throw ItsMeError(.malformedMessage, "a transfer key message is \(Self.keyCount) bytes, got \(m.count)")
            }
            self = .key(senderKey: Array(m[2...]))
        case .identity:
            guard Self.identityCounts.contains(m.count) else {
                throw ItsMeError(
                    .malformedMessage,
                    "a transfer identity message is \(Self.identityCounts.lowerBound) to \(Self.identityCounts.upperBound) bytes, got \(m.count)")
            }
            self = .identity(sealed: Array(m[2...]))
        case .store:
            guard Self.storeCounts.contains(m.count) else {
                throw ItsMeError(
                    .malformedMessage,
                    "a transfer store message is \(Self.storeCounts.lowerBound) to \(Self.storeCounts.upperBound) bytes, got \(m.count)")
            }
            self = .store(sealed: Array(m[2...]))
        case nil:
            throw ItsMeError(.malformedMessage, "a transfer message of unknown type \(m[1])")
        }
    }

    var bytes: [UInt8] {
        switch self {
        case .key(let key): [DeviceTransfer.version, Kind.key.rawValue] + key
        case .identity(let sealed): [DeviceTransfer.version, Kind.identity.rawValue] + sealed
        case .store(let sealed): [DeviceTransfer.version, Kind.store.rawValue] + sealed
        }
    }
}

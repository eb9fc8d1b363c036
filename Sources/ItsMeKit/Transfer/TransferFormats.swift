/// The live device transfer's offer and messages (docs/PROTOCOL.md 17.3),
/// parsed into typed values. Every byte offset of them is in this file.

/// The offer the new device shows: `ITSMETR1:` and, in unpadded base64url,
/// version (1) | transfer id (16) | the receiver's one-time key (32).
struct TransferOffer: Equatable {
    static let prefix = "ITSMETR1:"
    static let byteCount = 1 + 16 + X25519.keyCount

    let transferID: [UInt8]
    let receiverKey: [UInt8]
    /// The offer without the white space around it.
    let text: String

    init(transferID: [UInt8], receiverKey: [UInt8]) {
        self.transferID = transferID
        self.receiverKey = receiverKey
        text = Self.prefix + Base64.encode([DeviceTransfer.version] + transferID + receiverKey, .urlUnpadded)
    }

    /// `.malformedMessage` if `text` is not an offer of this version.
    init(parsing text: String) throws {
        let s = TypedInput.withoutASCIIWhitespaceAround(text)
        guard s.hasPrefix(Self.prefix), let bytes = Base64.decode(String(s.dropFirst(Self.prefix.count)), .urlUnpadded) else {
            throw ItsMeError(.malformedMessage, "this is not a device transfer code (ITSMETR1:...)")
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
    /// The identity, sealed (without the two header bytes).
    case identity(sealed: [UInt8])

    enum Kind: UInt8 {
        case key = 1
        case identity = 2
    }

    static let keyCount = 2 + X25519.keyCount
    /// An identity message: the header and the sealed contents of a 1- to
    /// 128-byte name, 101 to 228 bytes (PROTOCOL.md 17.3).
    static let identityCounts = identityCount(nameByteCount: 1)...identityCount(nameByteCount: DisplayName.maxBytes)

    static func identityCount(nameByteCount: Int) -> Int {
        2 + IdentityExport.blobCount(nameByteCount: nameByteCount) - IdentityExport.headerCount
    }

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
        case nil:
            throw ItsMeError(.malformedMessage, "a transfer message of unknown type \(m[1])")
        }
    }

    var bytes: [UInt8] {
        switch self {
        case .key(let key): [DeviceTransfer.version, Kind.key.rawValue] + key
        case .identity(let sealed): [DeviceTransfer.version, Kind.identity.rawValue] + sealed
        }
    }
}

import CItsMe
import Dispatch
import Foundation
import ItsMeKit
import ItsMePrimitives
import XCTest

@testable import ItsMeFFI
@testable import ItsMeTestingFFI

final class ABITests: XCTestCase {
    override func setUp() {
        XCTAssertEqual(ffiInit(), ITSME_OK)
    }

    /// Windows are non-negative (PROTOCOL.md 9.1): the pure derivations
    /// refuse a negative one rather than encode its two's complement.
    func testDerivationsRefuseANegativeWindow() {
        let seed = [UInt8](repeating: 7, count: 32), pid = [UInt8](repeating: 1, count: 32), other = [UInt8](repeating: 2, count: 32)
        var text = [CChar](repeating: 0, count: 64)
        var textLen: UInt = 0
        var words = [UInt8](repeating: 0, count: 5)
        var wordsLen: UInt = 0
        var flag = false
        var tag: UInt32 = 0
        var derivation = itsme_voice_derivation()
        derivation.size = MemoryLayout<itsme_voice_derivation>.size
        for w: Int64 in [-1, Int64.min] {
            XCTAssertEqual(ffiDeriveSessionID(seed, 32, w, &text, 64, &textLen), ITSME_E_INVALID_ARGUMENT, "\(w)")
            XCTAssertEqual(ffiDeriveWords(seed, 32, w, pid, 32, &words, 5, &wordsLen), ITSME_E_INVALID_ARGUMENT, "\(w)")
            XCTAssertEqual(ffiDeriveLowerSelectsFirst(seed, 32, w, &flag), ITSME_E_INVALID_ARGUMENT, "\(w)")
            XCTAssertEqual(
                ffiDeriveCode(seed, 32, w, pid, 32, 1, other, 32, 2, pid, 32, &text, 64, &textLen), ITSME_E_INVALID_ARGUMENT, "\(w)")
            XCTAssertEqual(ffiDeriveDeviceTag(seed, 32, w, pid, 32, nil, 0, &tag), ITSME_E_INVALID_ARGUMENT, "\(w)")
            XCTAssertEqual(
                ffiDeriveVoice(seed, 32, w, pid, 32, other, 32, nil, 0, nil, 0, 1, 2, &derivation), ITSME_E_INVALID_ARGUMENT, "\(w)")
        }
        XCTAssertEqual(ffiDeriveSessionID(seed, 32, 0, &text, 64, &textLen), ITSME_OK)
        XCTAssertEqual(ffiDeriveDeviceTag(seed, 32, 0, pid, 32, nil, 0, &tag), ITSME_OK)
    }

    /// The header's codes as the C compiler sees them, next to the core's kinds.
    private let headerCodes: [(String, Int32, ItsMeError.Kind)] = [
        ("ITSME_E_INVALID_ARGUMENT", ITSME_E_INVALID_ARGUMENT, .invalidArgument),
        ("ITSME_E_BUFFER_TOO_SMALL", ITSME_E_BUFFER_TOO_SMALL, .bufferTooSmall),
        ("ITSME_E_NOT_INITIALIZED", ITSME_E_NOT_INITIALIZED, .notInitialized),
        ("ITSME_E_UNSUPPORTED_PLATFORM", ITSME_E_UNSUPPORTED_PLATFORM, .unsupportedPlatform),
        ("ITSME_E_NOT_FOUND", ITSME_E_NOT_FOUND, .notFound),
        ("ITSME_E_ALREADY_EXISTS", ITSME_E_ALREADY_EXISTS, .alreadyExists),
        ("ITSME_E_INVALID_PIN", ITSME_E_INVALID_PIN, .invalidPIN),
        ("ITSME_E_WRONG_PIN", ITSME_E_WRONG_PIN, .wrongPIN),
        ("ITSME_E_LOCKED", ITSME_E_LOCKED, .locked),
        ("ITSME_E_SECRET_STORE", ITSME_E_SECRET_STORE, .secretStore),
        ("ITSME_E_CORRUPT_DATA", ITSME_E_CORRUPT_DATA, .corruptData),
        ("ITSME_E_AUTHENTICATION_FAILED", ITSME_E_AUTHENTICATION_FAILED, .authenticationFailed),
        ("ITSME_E_INVALID_KEY", ITSME_E_INVALID_KEY, .invalidKey),
        ("ITSME_E_INVALID_STATE", ITSME_E_INVALID_STATE, .invalidState),
        ("ITSME_E_DATABASE", ITSME_E_DATABASE, .database),
        ("ITSME_E_OUT_OF_MEMORY", ITSME_E_OUT_OF_MEMORY, .outOfMemory),
        ("ITSME_E_INTERNAL", ITSME_E_INTERNAL, .internal),
        ("ITSME_E_WRONG_IDENTITY", ITSME_E_WRONG_IDENTITY, .wrongIdentity),
        ("ITSME_E_WINDOW_USED", ITSME_E_WINDOW_USED, .windowUsed),
        ("ITSME_E_MALFORMED_MESSAGE", ITSME_E_MALFORMED_MESSAGE, .malformedMessage),
        ("ITSME_E_EXPIRED", ITSME_E_EXPIRED, .expired),
        ("ITSME_E_REPLAYED", ITSME_E_REPLAYED, .replayed),
        ("ITSME_E_ROLLED_BACK", ITSME_E_ROLLED_BACK, .rolledBack),
    ]

    func testExchangeConstantsAgreeWithTheCore() {
        XCTAssertEqual(Exchange.Method.qr.rawValue, UInt32(ITSME_EXCHANGE_METHOD_QR))
        XCTAssertEqual(Exchange.Method.bluetooth.rawValue, UInt32(ITSME_EXCHANGE_METHOD_BLUETOOTH))
        XCTAssertEqual(Exchange.State.awaitingPeer.rawValue, UInt32(ITSME_EXCHANGE_STATE_AWAITING_PEER))
        XCTAssertEqual(Exchange.State.compareSAS.rawValue, UInt32(ITSME_EXCHANGE_STATE_COMPARE_SAS))
        XCTAssertEqual(Exchange.State.imported.rawValue, UInt32(ITSME_EXCHANGE_STATE_IMPORTED))
        XCTAssertEqual(Exchange.State.confirmed.rawValue, UInt32(ITSME_EXCHANGE_STATE_CONFIRMED))
        XCTAssertEqual(Exchange.State.rejected.rawValue, UInt32(ITSME_EXCHANGE_STATE_REJECTED))
        XCTAssertEqual(Exchange.State.failed.rawValue, UInt32(ITSME_EXCHANGE_STATE_FAILED))
        XCTAssertEqual(Exchange.Flags.unauthenticated.rawValue, UInt32(ITSME_EXCHANGE_FLAG_UNAUTHENTICATED))
        XCTAssertEqual(Exchange.Flags.knownContact.rawValue, UInt32(ITSME_EXCHANGE_FLAG_KNOWN_CONTACT))
        XCTAssertEqual(Exchange.Flags.peerConfirmed.rawValue, UInt32(ITSME_EXCHANGE_FLAG_PEER_CONFIRMED))
        XCTAssertEqual(Exchange.Flags.peerRejected.rawValue, UInt32(ITSME_EXCHANGE_FLAG_PEER_REJECTED))
        XCTAssertEqual(Int(ITSME_SHORT_CODE_VALUES), Int(ShortCode.valueCount))
        XCTAssertEqual(Int(ITSME_BLUETOOTH_FRAME_MAX), ExchangeProtocol.maxFrameCount)
        XCTAssertEqual(Int(ITSME_SHORT_CODE_SIZE), "NOVEMBER 0000".utf8.count + 1)
        XCTAssertEqual(OnlineVerify.State.running.rawValue, UInt32(ITSME_ONLINE_VERIFY_STATE_RUNNING))
        XCTAssertEqual(OnlineVerify.State.compareSAS.rawValue, UInt32(ITSME_ONLINE_VERIFY_STATE_COMPARE_SAS))
        XCTAssertEqual(OnlineVerify.State.confirmed.rawValue, UInt32(ITSME_ONLINE_VERIFY_STATE_CONFIRMED))
        XCTAssertEqual(OnlineVerify.State.rejected.rawValue, UInt32(ITSME_ONLINE_VERIFY_STATE_REJECTED))
        XCTAssertEqual(OnlineVerify.State.failed.rawValue, UInt32(ITSME_ONLINE_VERIFY_STATE_FAILED))
        XCTAssertEqual(VoiceSession.State.waiting.rawValue, UInt32(ITSME_VOICE_STATE_WAITING))
        XCTAssertEqual(VoiceSession.State.selecting.rawValue, UInt32(ITSME_VOICE_STATE_SELECTING))
        XCTAssertEqual(VoiceSession.State.comparing.rawValue, UInt32(ITSME_VOICE_STATE_COMPARING))
        XCTAssertEqual(VoiceSession.State.finished.rawValue, UInt32(ITSME_VOICE_STATE_FINISHED))
        XCTAssertEqual(VoiceSession.State.failed.rawValue, UInt32(ITSME_VOICE_STATE_FAILED))
        XCTAssertEqual(VoiceSession.Turn.mine.rawValue, UInt32(ITSME_VOICE_TURN_MINE))
        XCTAssertEqual(VoiceSession.Turn.theirs.rawValue, UInt32(ITSME_VOICE_TURN_THEIRS))
        XCTAssertEqual(VoiceSession.Outcome.verified.rawValue, UInt32(ITSME_VOICE_OUTCOME_VERIFIED))
        XCTAssertEqual(VoiceSession.Outcome.deviceChanged.rawValue, UInt32(ITSME_VOICE_OUTCOME_DEVICE_CHANGED))
        XCTAssertEqual(VoiceSession.Outcome.mismatch.rawValue, UInt32(ITSME_VOICE_OUTCOME_MISMATCH))
        XCTAssertEqual(VoiceSession.Outcome.verifiedTagUnchecked.rawValue, UInt32(ITSME_VOICE_OUTCOME_VERIFIED_TAG_UNCHECKED))
        XCTAssertEqual(PinUpdate.State.running.rawValue, UInt32(ITSME_PIN_UPDATE_STATE_RUNNING))
        XCTAssertEqual(PinUpdate.State.done.rawValue, UInt32(ITSME_PIN_UPDATE_STATE_DONE))
        XCTAssertEqual(PinUpdate.State.failed.rawValue, UInt32(ITSME_PIN_UPDATE_STATE_FAILED))
        // The struct's layout is part of the ABI: its size first, no padding
        // after the word indices and the flag, 40 bytes.
        XCTAssertEqual(MemoryLayout<itsme_voice_derivation>.size, 40)
        XCTAssertEqual(MemoryLayout<itsme_voice_derivation>.offset(of: \.session_id), 8)
        XCTAssertEqual(MemoryLayout<itsme_voice_derivation>.offset(of: \.my_code), 24)
    }

    func testResultCodesAgreeBetweenHeaderAndCore() throws {
        XCTAssertEqual(ITSME_OK, 0)
        XCTAssertEqual(headerCodes.count, ItsMeError.Kind.all.count)
        for (name, code, kind) in headerCodes {
            XCTAssertEqual(code, kind.code, name)
            XCTAssertEqual(kind.symbol, name)
            XCTAssertEqual(String(cString: ffiResultMessage(code)), kind.message.description)
        }
        // Every code #defined in the header text is in the table above.
        let header = try String(contentsOfFile: Self.headerPath, encoding: .utf8)
        let regex = try NSRegularExpression(pattern: #"#define (ITSME_E_\w+) (\d+)"#)
        let matches = regex.matches(in: header, range: NSRange(header.startIndex..., in: header))
        let defined = matches.map { m -> (String, Int32) in
            let name = String(header[Range(m.range(at: 1), in: header)!])
            return (name, Int32(header[Range(m.range(at: 2), in: header)!])!)
        }
        XCTAssertEqual(defined.map(\.0), headerCodes.map(\.0))
        XCTAssertEqual(defined.map(\.1), headerCodes.map(\.1))
        XCTAssertEqual(Set(defined.map(\.1)).count, defined.count, "codes are unique")
    }

    func testVersionMacrosMatchRuntime() {
        XCTAssertEqual(String(cString: ffiVersionString()), ITSME_VERSION_STRING)
        XCTAssertEqual(ffiVersionNumber(), UInt32(ITSME_VERSION_NUMBER))
        XCTAssertEqual(
            UInt32(ITSME_VERSION_NUMBER),
            UInt32(ITSME_VERSION_MAJOR * 10000 + ITSME_VERSION_MINOR * 100 + ITSME_VERSION_PATCH))
        XCTAssertEqual(ITSME_VERSION_STRING, "\(ITSME_VERSION_MAJOR).\(ITSME_VERSION_MINOR).\(ITSME_VERSION_PATCH)")
    }

    /// The macros agree with the core's own constants (each size function
    /// returns its macro: the C contract suite checks every pair).
    func testSizeFunctionsMatchMacros() {
        XCTAssertEqual(ffiPublicKeyBytes(), UInt(Ed25519.publicKeyCount))
        XCTAssertEqual(ffiFingerprintSize(), UInt(Fingerprint.textCount + 1))
        XCTAssertEqual(ffiNameMaxBytes(), UInt(DisplayName.maxBytes))
        XCTAssertEqual(ffiPassphraseMaxBytes(), UInt(PassphraseSecretStore.maxPassphraseCount))
        XCTAssertEqual(ffiVoiceWordCount(), 5)
        XCTAssertEqual(Int(ITSME_FINGERPRINT_CHARS), Fingerprint.textCount)
        XCTAssertEqual(Int(ITSME_PIN_LENGTH), PIN.length)
        XCTAssertEqual(Accessibility.whenUnlocked.rawValue, UInt32(ITSME_ACCESSIBLE_WHEN_UNLOCKED))
        XCTAssertEqual(
            Accessibility.afterFirstUnlockThisDeviceOnly.rawValue,
            UInt32(ITSME_ACCESSIBLE_AFTER_FIRST_UNLOCK_THIS_DEVICE_ONLY))
        XCTAssertEqual(
            Accessibility.whenUnlockedThisDeviceOnly.rawValue, UInt32(ITSME_ACCESSIBLE_WHEN_UNLOCKED_THIS_DEVICE_ONLY))
    }

    /// A failure on a handle leaves its detail on the handle and in the
    /// calling thread's slot alike; another thread's slot stays as it was.
    func testEveryFailureLeavesItsDetailInTheThreadSlot() throws {
        var store: UnsafeMutablePointer<itsme_secret_store>?
        XCTAssertEqual(ffiSecretStoreNewMemory(&store), ITSME_OK)
        defer { ffiSecretStoreFree(store) }
        var identity: UnsafeMutablePointer<itsme_identity>?
        XCTAssertEqual(ffiIdentityCreate(store, "Slot", &identity), ITSME_OK)
        defer { ffiIdentityFree(identity) }
        XCTAssertEqual(ffiPinSet(identity, "123456"), ITSME_OK)
        XCTAssertEqual(ffiPinVerify(identity, "654321", 1_800_000_000), ITSME_E_WRONG_PIN)
        let onHandle = Self.read { ffiIdentityLastError(identity, $0, $1, $2) }
        XCTAssertFalse(onHandle.isEmpty)
        XCTAssertEqual(Self.read { ffiLastError($0, $1, $2) }, onHandle)
        let elsewhere = Box()
        let other = Thread { elsewhere.text = Self.read { ffiLastError($0, $1, $2) } }
        other.start()
        while !other.isFinished { usleep(1000) }
        XCTAssertEqual(elsewhere.text, "")
    }

    private final class Box: @unchecked Sendable { var text = "unread" }

    private static func read(
        _ body: (UnsafeMutablePointer<CChar>?, UInt, UnsafeMutablePointer<UInt>?) -> itsme_result
    ) -> String {
        var buffer = [CChar](repeating: 0, count: 512)
        var length: UInt = 0
        guard body(&buffer, 512, &length) == ITSME_OK else { return "(read failed)" }
        return String(cString: buffer)
    }

    /// One identity handle used from several threads at once: calls are
    /// serialised, results stay consistent, nothing crashes (run under
    /// `swift test --sanitize=thread` to check for races).
    func testOneHandleFromManyThreads() throws {
        var store: UnsafeMutablePointer<itsme_secret_store>?
        XCTAssertEqual(ffiSecretStoreNewMemory(&store), ITSME_OK)
        defer { ffiSecretStoreFree(store) }
        var identity: UnsafeMutablePointer<itsme_identity>?
        XCTAssertEqual(ffiIdentityCreate(store, "Threads", &identity), ITSME_OK)
        defer { ffiIdentityFree(identity) }
        let expected = Self.fingerprint(identity)
        let handle = UInt(bitPattern: identity)
        let failures = Atomic(0)
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            let id = UnsafeMutablePointer<itsme_identity>(bitPattern: handle)
            for j in 0..<200 {
                if Self.fingerprint(id) != expected { failures.add() }
                if j % 50 == 0, ffiIdentitySetName(id, "T\(i)-\(j)") != ITSME_OK { failures.add() }
                var n: UInt32 = 0
                var w: UInt64 = 0
                if ffiPinStatus(id, 1_800_000_000, &n, &w) != ITSME_OK { failures.add() }
            }
        }
        XCTAssertEqual(failures.value, 0)
    }

    private static func fingerprint(_ id: UnsafeMutablePointer<itsme_identity>?) -> String {
        var buffer = [CChar](repeating: 0, count: Int(ITSME_FINGERPRINT_SIZE))
        var length: UInt = 0
        guard ffiIdentityFingerprint(id, &buffer, UInt(buffer.count), &length) == ITSME_OK else { return "" }
        return String(cString: buffer)
    }

    static let headerPath = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("include/itsme.h").path
}

/// A tiny lock-protected counter for the thread test.
final class Atomic: @unchecked Sendable {
    private let lock = NSLock()
    private var count: Int
    init(_ value: Int) { count = value }
    func add() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}

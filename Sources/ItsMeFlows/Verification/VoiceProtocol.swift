import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// The derivations of voice verification and device tags
/// (docs/PROTOCOL.md sections 9 and 10), as pure functions.
public enum VoiceProtocol {
    /// The length of a verification window in seconds.
    public static let windowSeconds: Int64 = UnixTime.windowSeconds
    /// How early, by its own clock, a device may start a planned session.
    package static let skewSeconds: Int64 = 15
    package static let sessionIDValues: UInt64 = 2600
    package static let codeValues: UInt64 = 26_000
    package static let tagValues: UInt64 = 100
    package static let wordCount = 5

    /// The window of the latest time accepted.
    package static let maxWindow: Int64 = UnixTime.maxWindow

    /// The window holding Unix time `t` (floor of `t / 30`, negative times too).
    public static func window(_ t: Int64) -> Int64 { t >= 0 ? t / windowSeconds : (t - windowSeconds + 1) / windowSeconds }

    /// Online Verify and PIN Update meet in the window of `now` or the one
    /// before (a host that finds no peer in the current one tries it).
    static func checkMeetingWindow(_ window: Int64, now: Int64) throws {
        try UnixTime.check(now)
        try checkWindow(window)
        let current = self.window(now)
        guard window == current || window == current - 1 else {
            throw ItsMeError(.invalidArgument, "the window is the current one (\(current)) or the one before")
        }
    }

    /// The window a session planned at `now` uses, and the seconds until
    /// it begins (section 9.1).
    package static func plan(now: Int64, lastWindow: Int64?) -> (window: Int64, startsIn: Int64) {
        var w = window(now) + 1
        if let last = lastWindow, last + 1 > w { w = last + 1 }
        return (w, w * windowSeconds - now)
    }

    package static func u64(_ v: Int64) -> [UInt8] { withUnsafeBytes(of: UInt64(bitPattern: v).bigEndian) { Array($0) } }

    /// Windows are non-negative (section 9.1): `.invalidArgument` for a
    /// negative one, which `u64` would encode as its two's complement.
    package static func checkWindow(_ window: Int64) throws {
        guard window >= 0 else { throw ItsMeError(.invalidArgument, "a window is not negative (got \(window))") }
    }

    /// `u64(window)` of a window checked to be non-negative.
    static func windowBytes(_ window: Int64) throws -> [UInt8] {
        try checkWindow(window)
        return u64(window)
    }

    static func prefix64<K: ByteView & ~Copyable>(key: borrowing K, _ message: [UInt8]) -> UInt64 {
        HMACSHA256.mac(key: key, message: message).prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }

    /// Section 9.2: a NATO word and two digits, as its value; a bound
    /// session's (9.7) takes `u8(1) || cb` as well.
    package static func sessionID<S: ByteView & ~Copyable>(seed: borrowing S, window: Int64, binding: SecretBox? = nil) throws
        -> UInt32
    {
        var items = [LV.b("itsme-session-id-v1"), try windowBytes(window)] + CallBinding.items(binding)
        var message = LV.cat(items)
        defer {
            for i in items.indices { wipe(&items[i]) }
            wipe(&message)
        }
        return UInt32(prefix64(key: seed, message) % sessionIDValues)
    }

    /// A session ID (0 to 2599) as shown: a NATO word and two digits.
    package static func sessionIDText(_ v: UInt32) -> String {
        NATO.words[Int(v / 100)] + " " + pad(Int(v % 100), 2)
    }

    static func pad(_ n: Int, _ width: Int) -> String {
        let s = String(n)
        return String(repeating: "0", count: max(0, width - s.count)) + s
    }

    /// The blocks of section 9.3: block_0 to block_255.
    static let wordBlockCount = 256

    /// Section 9.3's reading procedure: bytes read in order, a byte below
    /// 234 gives the index `b mod 26`, kept unless already chosen, other
    /// bytes skipped, until five indices are chosen.
    package struct WordReader {
        private(set) var chosen: [Int] = []
        package var isComplete: Bool { chosen.count == wordCount }
        /// The five indices sorted (the order they are shown in).
        package var words: [Int] { chosen.sorted() }

        package init() {}

        /// Reads `bytes` in order, stopping at the fifth index; returns
        /// whether five are chosen.
        @discardableResult
        package mutating func read<C: Collection<UInt8>>(_ bytes: C) -> Bool {
            for b in bytes where !isComplete && b < 234 {
                let index = Int(b % 26)
                if !chosen.contains(index) { chosen.append(index) }
            }
            return isComplete
        }
    }

    /// Section 9.3: the selector's five word indices, sorted.
    /// Throws `.invalidArgument` for a window out of range.
    package static func words<S: ByteView & ~Copyable>(seed: borrowing S, window: Int64, pid: [UInt8]) throws -> [Int] {
        try withScratch(32) { k in
            try HKDF.derive(ikm: seed, salt: LV.cat(try windowBytes(window), pid), info: LV.b("itsme-word-options-v1"), into: k)
            let key = UnsafeRawBufferPointer(k)
            var reader = WordReader()
            for block in 0..<wordBlockCount {
                let message = LV.b("word-options") + (block == 0 ? [] : [UInt8(block)])
                if reader.read(HMACSHA256.mac(key: key, message: message)) { return reader.words }
            }
            // Probability below 2^-1000 (section 9.3).
            throw ItsMeError(.internal, "the \(wordBlockCount) word blocks gave fewer than \(wordCount) words")
        }
    }

    /// Section 9.4: whether the party with the lower id selects first.
    package static func lowerSelectsFirst<S: ByteView & ~Copyable>(seed: borrowing S, window: Int64) throws -> Bool {
        HMACSHA256.mac(key: seed, message: LV.cat(LV.b("itsme-first-selector-v1"), try windowBytes(window)))[0] & 1 == 0
    }

    /// Section 9.6: the code of `speaker` as its value in [0, 26000).
    /// Throws `.invalidArgument` for a window out of range.
    package static func code<S: ByteView & ~Copyable>(
        seed: borrowing S, window: Int64, first: [UInt8], firstWord: Int, second: [UInt8], secondWord: Int, speaker: [UInt8]
    ) throws -> UInt32 {
        try codes(
            seed: seed, window: window, first: first, firstWord: firstWord, second: second, secondWord: secondWord,
            speakers: [speaker])[0]
    }

    /// The codes of several speakers under one derived key.
    /// Throws `.invalidArgument` for a window out of range.
    /// A bound session's (9.7) key info ends with `u8(1) || cb`.
    package static func codes<S: ByteView & ~Copyable>(
        seed: borrowing S, window: Int64, first: [UInt8], firstWord: Int, second: [UInt8], secondWord: Int,
        speakers: [[UInt8]], binding: SecretBox? = nil
    ) throws -> [UInt32] {
        var bound = CallBinding.items(binding)
        var info = LV.cat([LV.b("itsme-interactive-code-v1"), first, [UInt8(firstWord)], second, [UInt8(secondWord)]] + bound)
        defer {
            for i in bound.indices { wipe(&bound[i]) }
            wipe(&info)
        }
        return try withScratch(32) { k in
            try HKDF.derive(ikm: seed, salt: try windowBytes(window), info: info, into: k)
            return speakers.map {
                UInt32(prefix64(key: UnsafeRawBufferPointer(k), LV.cat(LV.b("itsme-code-v1"), $0)) % codeValues)
            }
        }
    }

    /// A voice code (0 to 25,999) as spoken: a NATO word and three digits, such
    /// as "ECHO 042".
    public static func codeText(_ v: UInt32) -> String { NATO.words[Int(v / 1000)] + " " + pad(Int(v % 1000), 3) }

    /// Parses a heard code (TypedInput.wordAndNumber): a NATO word, one
    /// space or "-", three ASCII digits.
    public static func parseCode(_ input: String) -> UInt32? {
        guard let (word, number) = TypedInput.wordAndNumber(input, digits: 3) else { return nil }
        return UInt32(word) * 1000 + number
    }

    /// Section 10.1: the speaker's two-digit device tag.
    /// Throws `.invalidArgument` for a window out of range.
    package static func tag<S: ByteView & ~Copyable, D: ByteView & ~Copyable>(
        seed: borrowing S, window: Int64, speaker: [UInt8], deviceSecret: borrowing D
    ) throws -> UInt32 {
        try deviceSecret.withBytes { try tags(seed: seed, window: window, [(speaker, $0)])[0] }
    }

    /// The tags of several (speaker, device secret) pairs under one key.
    /// Throws `.invalidArgument` for a window out of range.
    package static func tags<S: ByteView & ~Copyable>(
        seed: borrowing S, window: Int64, _ speakers: [([UInt8], UnsafeRawBufferPointer)]
    ) throws -> [UInt32] {
        try checkWindow(window)
        return try withTagKey(seed: seed) { t in
            speakers.map { speaker, secret in
                var message = LV.cat(speaker, u64(window), Array(secret))
                defer { wipe(&message) }
                return UInt32(prefix64(key: t, message) % tagValues)
            }
        }
    }

    /// Runs `body` with the device tag key T of section 10.1 (also the key
    /// of Online Verify's device tags), in scratch memory wiped after.
    static func withTagKey<S: ByteView & ~Copyable, R>(seed: borrowing S, _ body: (UnsafeRawBufferPointer) throws -> R) throws
        -> R
    {
        try withScratch(32) { t in
            try HKDF.derive(ikm: seed, salt: [UInt8](), info: LV.b("itsme-device-tag-v1"), into: t)
            return try body(UnsafeRawBufferPointer(t))
        }
    }

    /// Everything one side derives in a session (sections 9.2 to 10.1),
    /// each key derived once: for `itsme_derive_voice` and the benchmark.
    package struct Derivation: Sendable, Equatable {
        package var sessionID: UInt32
        package var myWords: [Int]
        package var theirWords: [Int]
        package var iSelectFirst: Bool
        package var myCode: UInt32
        package var theirCode: UInt32
        package var myTag: UInt32
        package var theirTag: UInt32
    }

    /// `firstWord` and `secondWord` are the selections in order (the first
    /// selector's word first).
    package static func derive<S: ByteView & ~Copyable>(
        seed: borrowing S, window: Int64, myPID: [UInt8], theirPID: [UInt8], mySecret: UnsafeRawBufferPointer,
        theirSecret: UnsafeRawBufferPointer, firstWord: Int, secondWord: Int
    ) throws -> Derivation {
        let iFirst = myPID.lexicographicallyPrecedes(theirPID) == (try lowerSelectsFirst(seed: seed, window: window))
        let (first, second) = iFirst ? (myPID, theirPID) : (theirPID, myPID)
        let c = try codes(
            seed: seed, window: window, first: first, firstWord: firstWord, second: second, secondWord: secondWord,
            speakers: [myPID, theirPID])
        let t = try tags(seed: seed, window: window, [(myPID, mySecret), (theirPID, theirSecret)])
        return Derivation(
            sessionID: try sessionID(seed: seed, window: window), myWords: try words(seed: seed, window: window, pid: myPID),
            theirWords: try words(seed: seed, window: window, pid: theirPID), iSelectFirst: iFirst, myCode: c[0],
            theirCode: c[1], myTag: t[0], theirTag: t[1])
    }
}

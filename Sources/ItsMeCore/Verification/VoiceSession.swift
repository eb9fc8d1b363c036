/// One voice verification with a stored contact (docs/PROTOCOL.md sections
/// 9 and 10): a sans-I/O state machine driven by the current time and by
/// what the two people say and enter.
///
///     waiting --start--> selecting --select x2--> comparing --check--> finished
///
/// Any state can end in `failed`: a word that is not the selector's, a
/// window that ran out. A failure is final; calls in the wrong order get
/// `.invalidState` and change nothing.
///
/// Not thread-safe: serialise calls on one instance (the C layer does).
public final class VoiceSession: CustomStringConvertible {
    public enum State: UInt32, Sendable {
        /// Planned: waiting for the window to begin (`startsIn`).
        case waiting = 1
        /// Started (the window is used): the two selections.
        case selecting = 2
        /// Codes ready: read yours aloud, enter what you heard.
        case comparing = 3
        case finished = 4
        case failed = 5
    }

    public enum Turn: UInt32, Sendable {
        case none = 0
        case mine = 1
        case theirs = 2
    }

    /// What `check` found (PROTOCOL.md 10.1).
    public enum Outcome: UInt32, Sendable {
        /// Code and device tag as expected.
        case verified = 1
        /// The code is right, the device tag is not: their device changed.
        /// The contact is now degraded.
        case deviceChanged = 2
        /// The code is wrong: not the person, or a mistake. Nothing stored
        /// changed; start again at a new window.
        case mismatch = 3
        /// The code is right; this device holds no device secret for the
        /// contact (it is new, or the contact was added without one), so
        /// the tag could not be checked.
        case verifiedTagUnchecked = 4
    }

    public let contactID: Int64
    public let window: Int64
    public private(set) var state: State = .waiting
    public private(set) var outcome: Outcome?
    public private(set) var failure: ItsMeError?
    /// Section 9.2, as its value (text: `sessionIDText`).
    public let sessionID: UInt32
    /// This person's five word indices, sorted.
    public let myWords: [Int]
    public let iSelectFirst: Bool
    public private(set) var selections: [Int] = []
    public private(set) var yourCode: UInt32?
    public private(set) var yourTag: UInt32?
    public private(set) var theirCode: UInt32?
    /// The tag the peer is expected to say, as the screen shows it
    /// (PROTOCOL.md 10.3): of its new secret once this side has committed a
    /// Security PIN Update, else of its current one. nil when this device
    /// holds no secret of the peer's to show.
    public private(set) var theirTag: UInt32?

    private let storeID: [UInt8]
    private let seed: SecretBytes
    /// Empty when this device holds no device secret for that side.
    /// `myDevice` is the one this side says (the new one once a Security
    /// PIN Update is committed); `theirPending`, the peer's new one while
    /// an update is pending, is accepted too.
    private let myDevice: SecretBytes
    private let theirDevice: SecretBytes
    private let theirPending: SecretBytes
    /// The peer's new secret from an earlier, interrupted update.
    private let theirPrevious: SecretBytes
    private let hasDeviceSecrets: Bool
    /// This side has committed the pending update: the peer says its new secret.
    private let peerSaysPending: Bool
    /// The tag of the peer's current secret (nil when this device holds
    /// none), and those it says if it already uses a new secret.
    private var theirCurrentTag: UInt32?, theirPendingTag: UInt32?, theirPreviousTag: UInt32?
    private let myPID: [UInt8]
    private let peerPID: [UInt8]
    private let peerWords: [Int]

    public var sessionIDText: String { VoiceProtocol.sessionIDText(sessionID) }
    public var lastMoment: Int64 { (window + 2) * VoiceProtocol.windowSeconds }

    /// Plans a session with contact `contactID` at `now`: fixes the window
    /// (the next one after `now` and after the last one used).
    public init(store: ContactStore, contactID: Int64, now: Int64) throws {
        try UnixTime.check(now)
        let contact = try store.contact(id: contactID)
        try ContactStore.checkSettled(contact)
        if let last = contact.lastWindow, last < 0 || last >= VoiceProtocol.maxWindow {
            throw ItsMeError(.invalidState, "contact \(contactID) has used its last possible window (\(last))")
        }
        self.contactID = contactID
        self.storeID = store.storeID
        window = VoiceProtocol.plan(now: now, lastWindow: contact.lastWindow).window
        seed = try store.seed(id: contactID)
        myPID = store.ownerPublicKey
        peerPID = contact.pid
        let tagSecrets = try store.tagSecrets(id: contactID)
        myDevice = tagSecrets.speaking
        theirDevice = tagSecrets.theirs
        theirPending = tagSecrets.theirsPending
        theirPrevious = tagSecrets.theirsPrevious
        // An empty secret of theirs is unknown (this device is new).
        hasDeviceSecrets = theirDevice.count > 0
        peerSaysPending = tagSecrets.committed && theirPending.count > 0
        sessionID = try VoiceProtocol.sessionID(seed: seed, window: window)
        myWords = try VoiceProtocol.words(seed: seed, window: window, pid: myPID)
        peerWords = try VoiceProtocol.words(seed: seed, window: window, pid: peerPID)
        let lowerFirst = try VoiceProtocol.lowerSelectsFirst(seed: seed, window: window)
        iSelectFirst = myPID.lexicographicallyPrecedes(peerPID) == lowerFirst
    }

    public var description: String { "VoiceSession(contact: \(contactID), window: \(window), state: \(state))" }

    /// Seconds until the window begins (negative once it has).
    public func startsIn(now: Int64) -> Int64 { window * VoiceProtocol.windowSeconds - now }

    private func checkStore(_ store: ContactStore) throws {
        guard store.storeID == storeID else {
            throw ItsMeError(.invalidArgument, "this session belongs to another contact store")
        }
    }

    private func checkUsable(now: Int64) throws {
        try UnixTime.check(now)
        if state == .failed {
            throw ItsMeError(.invalidState, "the session has failed (\(failure?.message ?? "")); plan a new one")
        }
        if state != .finished, now >= lastMoment {
            let error = ItsMeError(.expired, "the session's time ran out (it lasts until the end of the next window)")
            fail(error)
            throw error
        }
    }

    private func fail(_ error: ItsMeError) {
        state = .failed
        failure = error
    }

    /// Starts the session when its window begins (up to 15 s early by this
    /// clock): uses the window for the contact, atomically in the store.
    /// `.windowUsed` if another session took it; `.invalidState` if it is
    /// too early.
    public func start(store: ContactStore, now: Int64) throws {
        try checkStore(store)
        try checkUsable(now: now)
        guard state == .waiting else { throw ItsMeError(.invalidState, "the session has started already") }
        let wait = startsIn(now: now)
        guard wait <= VoiceProtocol.skewSeconds else {
            throw ItsMeError(.invalidState, "the window begins in \(wait) s; start when it does")
        }
        do {
            try store.useWindow(id: contactID, window: window)
        } catch let e as ItsMeError where e.kind == .windowUsed {
            fail(e)
            throw e
        }
        state = .selecting
    }

    /// Whose word comes next.
    public var turn: Turn {
        guard state == .selecting else { return .none }
        let mineFirst = iSelectFirst
        return (selections.isEmpty == mineFirst) ? .mine : .theirs
    }

    /// Enters the next selection: on my turn one of `myWords`; on theirs
    /// the word I heard, from all 26. A heard word that is not among
    /// theirs ends the session (`.authenticationFailed`), with no retry.
    public func select(_ word: Int, now: Int64) throws {
        try checkUsable(now: now)
        guard state == .selecting else { throw ItsMeError(.invalidState, "no selection is expected now (\(state))") }
        guard (0..<26).contains(word) else { throw ItsMeError(.invalidArgument, "a word index is 0 to 25") }
        switch turn {
        case .mine:
            guard myWords.contains(word) else {
                throw ItsMeError(.invalidArgument, "\(NATO.words[word]) is not one of your five words")
            }
        case .theirs:
            guard peerWords.contains(word) else {
                let error = ItsMeError(.authenticationFailed, "\(NATO.words[word]) is not one of their words: the session failed")
                fail(error)
                throw error
            }
        case .none:
            throw ItsMeError(.invalidState, "no selection is expected now")
        }
        selections.append(word)
        guard selections.count == 2 else { return }
        let (first, second) = iSelectFirst ? (myPID, peerPID) : (peerPID, myPID)
        let codes = try VoiceProtocol.codes(
            seed: seed, window: window, first: first, firstWord: selections[0], second: second,
            secondWord: selections[1], speakers: [myPID, peerPID])
        let tags = try myDevice.withBytes { mine in
            try theirDevice.withBytes { theirs in
                try theirPending.withBytes { pending in
                    try theirPrevious.withBytes { previous in
                        try VoiceProtocol.tags(
                            seed: seed, window: window,
                            [(myPID, mine), (peerPID, theirs), (peerPID, pending), (peerPID, previous)])
                    }
                }
            }
        }
        yourCode = codes[0]
        theirCode = codes[1]
        yourTag = tags[0]
        theirCurrentTag = hasDeviceSecrets ? tags[1] : nil
        theirPendingTag = theirPending.count > 0 ? tags[2] : nil
        theirPreviousTag = theirPrevious.count > 0 ? tags[3] : nil
        theirTag = peerSaysPending ? theirPendingTag : theirCurrentTag
        state = .comparing
    }

    /// Checks what I heard: their code ("ECHO 512") and tag (0-99), in
    /// constant time, and records the outcome on the contact (PROTOCOL.md
    /// 10.1). A code that does not parse is `.invalidArgument` and changes
    /// nothing.
    @discardableResult
    public func check(heardCode: String, heardTag: UInt32, store: ContactStore, now: Int64) throws -> Outcome {
        try checkStore(store)
        try checkUsable(now: now)
        guard state == .comparing, let expected = theirCode else {
            throw ItsMeError(.invalidState, "there are no codes to compare yet (\(state))")
        }
        guard let heard = VoiceProtocol.parseCode(heardCode) else {
            throw ItsMeError(.invalidArgument, "a code is a NATO word and three digits (\"ECHO 512\")")
        }
        guard heardTag < UInt32(VoiceProtocol.tagValues) else { throw ItsMeError(.invalidArgument, "a tag is 0 to 99") }
        let codeMatches = ConstantTime.equal(bigEndian(heard), bigEndian(expected))
        let matchesOld = theirCurrentTag.map { ConstantTime.equal(bigEndian(heardTag), bigEndian($0)) } ?? false
        let matchesNew = theirPendingTag.map { ConstantTime.equal(bigEndian(heardTag), bigEndian($0)) } ?? false
        let matchesPrevious = theirPreviousTag.map { ConstantTime.equal(bigEndian(heardTag), bigEndian($0)) } ?? false
        let result: Outcome
        if !codeMatches {
            result = .mismatch
        } else if matchesOld || matchesNew || matchesPrevious {
            result = .verified
        } else {
            result = theirCurrentTag == nil ? .verifiedTagUnchecked : .deviceChanged
        }
        // The tag of one of the peer's new secrets (PROTOCOL.md 10.3): the
        // current one wins a tie, then the previous, then the pending one.
        // Without a current secret a two-digit tag could match by chance
        // one this device never held, so it then changes nothing (a 32-byte
        // Online Verify tag may).
        if theirCurrentTag != nil, codeMatches, !matchesOld, matchesPrevious || matchesNew {
            if matchesPrevious {
                try store.adoptPreviousDeviceSecret(id: contactID)
            } else {
                try store.finalizePendingDeviceSecrets(id: contactID)
            }
            try store.setState(id: contactID, .verified, acknowledged: false, now: now)
        }
        switch result {
        case .verified, .verifiedTagUnchecked:
            if try store.contact(id: contactID).state != .degraded {
                try store.setState(id: contactID, .verified, acknowledged: false, now: now)
            }
        case .deviceChanged:
            try store.setState(id: contactID, .degraded, acknowledged: false, now: now)
        case .mismatch:
            break
        }
        outcome = result
        state = .finished
        return result
    }

    private func bigEndian(_ v: UInt32) -> [UInt8] { withUnsafeBytes(of: v.bigEndian) { Array($0) } }
}

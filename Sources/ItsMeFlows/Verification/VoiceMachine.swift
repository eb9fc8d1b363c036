import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// The voice verification state machine (docs/PROTOCOL.md sections 9 and
/// 10), as a value. It reads and writes no store: `start` asks its driver
/// to use the window, `check` to record the outcome.
///
///     waiting --start--> selecting --select x2--> comparing --check--> finished
///
/// Any state but `finished` can end in `failed`: a heard word that is not
/// the peer's, a window that ran out, a window another session took. A
/// failure is final; a call the state does not allow throws
/// `.invalidState` and changes nothing.
struct VoiceMachine: SteppedMachine {
    /// What the session fixes when it is planned.
    struct Plan {
        let contactID: Int64
        let window: Int64
        let sessionID: UInt32
        /// This person's five word indices, sorted, and the peer's.
        let myWords: [Int]
        let peerWords: [Int]
        let iSelectFirst: Bool
        let myPID: [UInt8]
        let peerPID: [UInt8]
        let seed: SecretBox
        let tagSecrets: TagSecrets
        /// The call binding (9.7), nil for none.
        let binding: SecretBox?

        /// The session lasts until the end of the window after its own.
        var lastMoment: Int64 { (window + 2) * VoiceProtocol.windowSeconds }

        func startsIn(now: Int64) -> Int64 { window * VoiceProtocol.windowSeconds - now }
    }

    /// The codes and tags of both sides, once both words are selected.
    struct Codes {
        let yourCode: UInt32
        let yourTag: UInt32
        let theirCode: UInt32
        /// What the screen shows as the peer's tag (PROTOCOL.md 10.3).
        let theirTag: UInt32?
        /// The tags of the peer's current, pending and previous secrets,
        /// nil where this device holds none.
        let theirCurrentTag: UInt32?
        let theirPendingTag: UInt32?
        let theirPreviousTag: UInt32?
    }

    enum State {
        /// Planned: waiting for the window to begin.
        case waiting
        /// Started (the window is used): the selections so far.
        case selecting([Int])
        /// Codes ready: read yours aloud, enter what you heard.
        case comparing([Int], Codes)
        case finished([Int], Codes, VoiceSession.Outcome)
        case failed(ItsMeError, [Int])
    }

    let plan: Plan
    private(set) var state: State = .waiting

    /// Plans a session with `contact`, as the store holds it, at `now`: the
    /// next window after `now` and after the last one the contact used.
    /// `.invalidState` for a contact still awaiting the peer, or one that
    /// used the last window there is.
    init(contact: Contact, now: Int64, seed: SecretBox, myPID: [UInt8], tagSecrets: TagSecrets, binding: SecretBox? = nil) throws {
        try UnixTime.check(now)
        try ContactStore.checkSettled(contact)
        let contactID = contact.id
        let lastWindow = contact.lastWindow
        let peerPID = contact.pid
        if let last = lastWindow, last < 0 || last >= VoiceProtocol.maxWindow {
            throw ItsMeError(.invalidState, "contact \(contactID) has used its last possible window (\(last))")
        }
        let window = VoiceProtocol.plan(now: now, lastWindow: lastWindow).window
        let lowerFirst = try VoiceProtocol.lowerSelectsFirst(seed: seed, window: window)
        plan = Plan(
            contactID: contactID, window: window,
            sessionID: try VoiceProtocol.sessionID(seed: seed, window: window, binding: binding),
            myWords: try VoiceProtocol.words(seed: seed, window: window, pid: myPID),
            peerWords: try VoiceProtocol.words(seed: seed, window: window, pid: peerPID),
            iSelectFirst: myPID.lexicographicallyPrecedes(peerPID) == lowerFirst, myPID: myPID, peerPID: peerPID, seed: seed,
            tagSecrets: tagSecrets, binding: binding)
    }

    // MARK: What the state shows

    var selections: [Int] {
        switch state {
        case .waiting: []
        case .selecting(let s), .comparing(let s, _), .finished(let s, _, _), .failed(_, let s): s
        }
    }

    /// The codes, while comparing and once finished.
    var codes: Codes? {
        switch state {
        case .comparing(_, let codes), .finished(_, let codes, _): codes
        case .waiting, .selecting, .failed: nil
        }
    }

    var outcome: VoiceSession.Outcome? {
        if case .finished(_, _, let outcome) = state { return outcome }
        return nil
    }

    var failure: ItsMeError? {
        if case .failed(let error, _) = state { return error }
        return nil
    }

    /// Whose word comes next.
    var turn: VoiceSession.Turn {
        guard case .selecting(let selections) = state else { return .none }
        return (selections.isEmpty == plan.iSelectFirst) ? .mine : .theirs
    }

    private var stateName: String {
        switch state {
        case .waiting: "waiting"
        case .selecting: "selecting"
        case .comparing: "comparing"
        case .finished: "finished"
        case .failed: "failed"
        }
    }

    // MARK: Transitions

    mutating func fail(_ error: ItsMeError) {
        state = .failed(error, selections)
    }

    /// Another session took the window (`.windowUsed`): this one can
    /// never start, so it fails; any other failed write changes nothing.
    static func failedWriteEnds(_ error: ItsMeError) -> Bool { error.kind == .windowUsed }

    /// `.invalidState` once failed; `.expired` (and failed) once the time
    /// ran out before the session finished.
    private mutating func checkUsable(now: Int64) throws {
        try UnixTime.check(now)
        switch state {
        case .failed(let error, _):
            throw ItsMeError(.invalidState, "the session has failed (\(error.message)); plan a new one")
        case .finished:
            return
        case .waiting, .selecting, .comparing:
            if now >= plan.lastMoment {
                let error = ItsMeError(.expired, "the session's time ran out (it lasts until the end of the next window)")
                fail(error)
                throw error
            }
        }
    }

    /// Starts the session when its window begins (up to 15 s early by this
    /// clock); asks the driver to use the window.
    mutating func start(now: Int64) throws -> [Action] {
        try checkUsable(now: now)
        guard case .waiting = state else { throw ItsMeError(.invalidState, "the session has started already") }
        let wait = plan.startsIn(now: now)
        guard wait <= VoiceProtocol.skewSeconds else {
            throw ItsMeError(.invalidState, "the window begins in \(wait) s; start when it does")
        }
        state = .selecting([])
        return [.contact(.useWindow(contactID: plan.contactID, window: plan.window))]
    }

    /// The next selection: on my turn one of my words; on theirs the word I
    /// heard, which must be one of theirs (else the session fails).
    mutating func select(_ word: Int, now: Int64) throws {
        try checkUsable(now: now)
        guard case .selecting(var selections) = state else {
            throw ItsMeError(.invalidState, "no selection is expected now (\(stateName))")
        }
        guard let name = NATO.words[safe: word] else { throw ItsMeError(.invalidArgument, "a word index is 0 to 25") }
        switch turn {
        case .mine:
            guard plan.myWords.contains(word) else {
                throw ItsMeError(.invalidArgument, "\(name) is not one of your five words")
            }
        case .theirs:
            guard plan.peerWords.contains(word) else {
                let error = ItsMeError(.authenticationFailed, "\(name) is not one of their words: the session failed")
                fail(error)
                throw error
            }
        case .none:
            throw ItsMeError(.invalidState, "no selection is expected now")
        }
        selections.append(word)
        guard selections.count == 2 else {
            state = .selecting(selections)
            return
        }
        state = .comparing(selections, try codes(selections))
    }

    private func codes(_ selections: [Int]) throws -> Codes {
        let p = plan
        let (first, second) = p.iSelectFirst ? (p.myPID, p.peerPID) : (p.peerPID, p.myPID)
        let codes = try VoiceProtocol.codes(
            seed: p.seed, window: p.window, first: first, firstWord: selections[0], second: second,
            secondWord: selections[1], speakers: [p.myPID, p.peerPID], binding: p.binding)
        let s = p.tagSecrets
        let tags = try s.speaking.withBytes { mine in
            try s.theirs.withBytes { theirs in
                try s.theirsPending.withBytes { pending in
                    try s.theirsPrevious.withBytes { previous in
                        try VoiceProtocol.tags(
                            seed: p.seed, window: p.window,
                            [(p.myPID, mine), (p.peerPID, theirs), (p.peerPID, pending), (p.peerPID, previous)])
                    }
                }
            }
        }
        // An empty secret of theirs is unknown (this device is new).
        let current = s.theirs.count > 0 ? tags[1] : nil
        let pending = s.theirsPending.count > 0 ? tags[2] : nil
        // This side has committed the pending update: the peer says its new secret.
        let peerSaysPending = s.committed && s.theirsPending.count > 0
        return Codes(
            yourCode: codes[0], yourTag: tags[0], theirCode: codes[1], theirTag: peerSaysPending ? pending : current,
            theirCurrentTag: current, theirPendingTag: pending, theirPreviousTag: s.theirsPrevious.count > 0 ? tags[3] : nil)
    }

    /// Checks what I heard, in constant time: the outcome, and the write
    /// that records it. A code that does not parse is `.invalidArgument`
    /// and changes nothing.
    mutating func check(heardCode: String, heardTag: UInt32, now: Int64) throws -> (VoiceSession.Outcome, [Action]) {
        try checkUsable(now: now)
        guard case .comparing(let selections, let codes) = state else {
            throw ItsMeError(.invalidState, "there are no codes to compare yet (\(stateName))")
        }
        guard let heard = VoiceProtocol.parseCode(heardCode) else {
            throw ItsMeError(.invalidArgument, "a code is a NATO word and three digits (\"ECHO 512\")")
        }
        guard heardTag < UInt32(VoiceProtocol.tagValues) else { throw ItsMeError(.invalidArgument, "a tag is 0 to 99") }
        func same(_ a: UInt32, _ b: UInt32?) -> Bool {
            guard let b else { return false }
            return ConstantTime.equal(withUnsafeBytes(of: a.bigEndian) { Array($0) }, withUnsafeBytes(of: b.bigEndian) { Array($0) })
        }
        let codeMatches = same(heard, codes.theirCode)
        let matchesCurrent = same(heardTag, codes.theirCurrentTag)
        let matchesPending = same(heardTag, codes.theirPendingTag)
        let matchesPrevious = same(heardTag, codes.theirPreviousTag)
        let outcome: VoiceSession.Outcome
        if !codeMatches {
            outcome = .mismatch
        } else if matchesCurrent || matchesPending || matchesPrevious {
            outcome = .verified
        } else {
            outcome = codes.theirCurrentTag == nil ? .verifiedTagUnchecked : .deviceChanged
        }
        // The tag of one of the peer's new secrets (PROTOCOL.md 10.3): the
        // current one wins a tie, then the previous, then the pending one.
        // Without a current secret a two-digit tag could match by chance
        // one this device never held, so it then changes nothing (a 32-byte
        // Online Verify tag may).
        var peerSecret = PeerDeviceSecret.current
        if codes.theirCurrentTag != nil, codeMatches, !matchesCurrent {
            peerSecret = matchesPrevious ? .previous : matchesPending ? .pending : .current
        }
        state = .finished(selections, codes, outcome)
        return (outcome, [.contact(.verification(contactID: plan.contactID, outcome: outcome, peerSecret: peerSecret))])
    }
}

extension Array {
    /// The element at `index`, or nil outside the array.
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}

import ItsMeKit
import ItsMePrimitives
import XCTest

/// A stored item as a plain array (XCTest's helpers need copyable values).
func stored(_ store: any SecretStore, _ name: String) throws -> [UInt8]? {
    guard let item = try store.get(name) else { return nil }
    return item.unsafeExportedArray()
}

/// One side of a pair of people who added each other.
struct PairSide {
    let identity: Identity
    let store: ContactStore
    let contactID: Int64
}

/// Alice and Bob, each with the other as a verified contact after a real QR
/// exchange at `now`. Their keys come from `label`, so every value the
/// tests see (codes, tags) is fixed and no assertion can collide by chance.
func exchangedPair(in directory: String, label: String, now: Int64) throws -> (PairSide, PairSide) {
    var ra = DeterministicRandom(seed: SHA256.hash(Array("\(label)-alice".utf8)))
    var rb = DeterministicRandom(seed: SHA256.hash(Array("\(label)-bob".utf8)))
    let a = try Identity.create(store: MemorySecretStore(), name: "Alice", random: &ra)
    let b = try Identity.create(store: MemorySecretStore(), name: "Bob", random: &rb)
    let sa = try ContactStore(path: directory + "/a-\(label)-\(UInt64.random(in: 0...UInt64.max)).db", identity: a)
    let sb = try ContactStore(path: directory + "/b-\(label)-\(UInt64.random(in: 0...UInt64.max)).db", identity: b)
    let xa = try Exchange.qr(identity: a, store: sa, now: now, random: &ra)
    let xb = try Exchange.qr(identity: b, store: sb, now: now, random: &rb)
    try xa.receive(xb.peekOutgoing()!, now: now)
    try xb.receive(xa.peekOutgoing()!, now: now)
    return (
        PairSide(identity: a, store: sa, contactID: try xa.confirm(now: now)),
        PairSide(identity: b, store: sb, contactID: try xb.confirm(now: now))
    )
}

/// The same person on a new device: the identity item in a new secret
/// store (so a new device key), and the same contact file.
func onNewDevice(_ side: PairSide) throws -> PairSide {
    let moved = MemorySecretStore()
    try moved.put(Identity.itemName, bytes: try side.identity.store.get(Identity.itemName)!)
    let identity = try Identity.load(store: moved)
    return PairSide(identity: identity, store: try ContactStore(path: side.store.path, identity: identity), contactID: side.contactID)
}

/// The kind of error `body` throws, or nil.
func errorKind(_ body: () throws -> Void) -> ItsMeError.Kind? {
    do {
        try body()
        return nil
    } catch { return (error as? ItsMeError)?.kind }
}

/// Runs both voice sessions to the codes: each selector picks the word at
/// `pick` of their five; the listener enters the same.
func voiceCodes(
    _ a: PairSide, _ b: PairSide, now: Int64, pick: Int = 0, bindings: ([UInt8]?, [UInt8]?) = (nil, nil)
) throws -> (VoiceSession, VoiceSession) {
    let va = try VoiceSession(store: a.store, contactID: a.contactID, binding: bindings.0, now: now)
    let vb = try VoiceSession(store: b.store, contactID: b.contactID, binding: bindings.1, now: now)
    let start = va.window * 30
    try va.start(now: start)
    try vb.start(now: start)
    for _ in 0..<2 {
        let (selector, listener) = va.turn == .mine ? (va, vb) : (vb, va)
        XCTAssertEqual(listener.turn, .theirs)
        let word = selector.myWords[pick]
        try selector.select(word, now: start + 5)
        try listener.select(word, now: start + 5)
    }
    return (va, vb)
}

/// A whole voice verification between `x` and `y`: each side's outcome.
func voiceVerify(_ x: PairSide, _ y: PairSide, now: Int64) throws -> (VoiceSession.Outcome, VoiceSession.Outcome) {
    let (vx, vy) = try voiceCodes(x, y, now: now)
    let end = vx.window * 30 + 10
    return (
        try vx.check(heardCode: VoiceProtocol.codeText(vy.yourCode!), heardTag: vy.yourTag!, now: end),
        try vy.check(heardCode: VoiceProtocol.codeText(vx.yourCode!), heardTag: vx.yourTag!, now: end)
    )
}

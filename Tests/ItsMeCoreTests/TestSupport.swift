import ItsMeCore

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
    let xa = try Exchange.qr(identity: a, now: now, random: &ra)
    let xb = try Exchange.qr(identity: b, now: now, random: &rb)
    try xa.receive(xb.peekOutgoing()!, now: now)
    try xb.receive(xa.peekOutgoing()!, now: now)
    return (
        PairSide(identity: a, store: sa, contactID: try xa.confirm(store: sa, now: now)),
        PairSide(identity: b, store: sb, contactID: try xb.confirm(store: sb, now: now))
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

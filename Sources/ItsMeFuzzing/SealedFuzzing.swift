import ItsMePrimitives
import ItsMeBase
import ItsMeStore
import ItsMeFlows

/// The body of the sealed-exchange fuzz target (fuzz/SealedFuzz.swift),
/// here so the tests replay its corpus through exactly the same code.
///
/// A sealed exchange is what a host keeps between the steps of an
/// exchange and gives back to `Exchange.restore`. The first byte's bit 0
/// picks what the rest is: 1, the sealed bytes themselves; 0, the record a
/// sealed exchange encrypts, sealed here under this device's key (format
/// version 2, or 1 if bit 1 is set) so that the record's reader is reached.
/// Whatever restores must seal again and restore to the same exchange.
final class SealedFuzzing {
    static let now: Int64 = 1_800_000_000
    static let deviceKey = [UInt8](repeating: 0x44, count: AEAD.keyCount)
    /// The seeds of this device's pending exchanges at a distance: as the
    /// inviter (through the mailbox, in real time), and as the invitee of
    /// the peer's invites (the peer's seed, then this device's).
    static let inviterSeeds: [(realtime: Bool, seed: UInt8)] = [(false, 51), (true, 52)]
    static let inviteeSeeds: [(realtime: Bool, peer: UInt8, seed: UInt8)] = [(false, 53, 54), (true, 55, 56)]

    let store = MemorySecretStore()
    let identity: Identity
    let peer: Identity
    /// The identities' contact stores (a restored exchange that saved its
    /// contact in another store is refused before anything is written).
    let contacts: ContactStore
    let peerContacts: ContactStore
    private let sealKey: SecretBytes
    /// The pending PAKE scalars (and their index) after setup: every run
    /// leaves the store as it found it.
    private var pending: [(String, [UInt8])] = []

    /// This device and its peer, their contact stores in `directory`.
    init(directory: String) throws {
        var r1 = DeterministicRandom(seed: [UInt8](repeating: 41, count: 32))
        var r2 = DeterministicRandom(seed: [UInt8](repeating: 42, count: 32))
        identity = try Identity.create(store: store, name: "Fuzz A", random: &r1)
        peer = try Identity.create(store: MemorySecretStore(), name: "Fuzz B", random: &r2)
        contacts = try ContactStore(path: directory + "/fuzz-a.db", identity: identity)
        peerContacts = try ContactStore(path: directory + "/fuzz-b.db", identity: peer)
        try store.put(ContactStore.deviceKeyItem, bytes: Self.deviceKey)
        sealKey = try HKDF.derive(
            ikm: Self.deviceKey, salt: [UInt8](), info: LV.b(Exchange.sealLabel), count: AEAD.keyCount)
        for (realtime, seed) in Self.inviterSeeds { _ = try inviter(realtime: realtime, seed: seed) }
        for (realtime, peerSeed, seed) in Self.inviteeSeeds {
            _ = try invitee(realtime: realtime, peerSeed: peerSeed, seed: seed)
        }
        for name in store.names where name.hasPrefix("itsme.pake") {
            guard let bytes = try store.get(name) else { continue }
            pending.append((name, bytes.unsafeExportedArray()))
        }
    }

    /// This device's invite (the same codes and PAKE secret every time).
    private func inviter(realtime: Bool, seed: UInt8) throws -> Exchange {
        var random = DeterministicRandom(seed: [UInt8](repeating: seed, count: 32))
        return try Exchange.invite(identity: identity, store: contacts, realtime: realtime, now: Self.now, random: &random)
    }

    /// The peer's invite and this device's side of it.
    private func invitee(realtime: Bool, peerSeed: UInt8, seed: UInt8) throws -> (peer: Exchange, mine: Exchange) {
        var rp = DeterministicRandom(seed: [UInt8](repeating: peerSeed, count: 32))
        var rm = DeterministicRandom(seed: [UInt8](repeating: seed, count: 32))
        let theirs = try Exchange.invite(identity: peer, store: peerContacts, realtime: realtime, now: Self.now, random: &rp)
        let mine = try Exchange.acceptInvite(
            identity: identity, store: contacts, inviteCode: theirs.inviteCode!.text, encryptionCode: theirs.encryptionCode!.text,
            realtime: realtime, now: Self.now, random: &rm)
        return (theirs, mine)
    }

    @discardableResult
    func run(_ input: [UInt8]) -> Bool {
        guard let selector = input.first else { return false }
        let rest = Array(input.dropFirst())
        // Only an exchange at a distance touches the store (its PAKE secret).
        defer { if selector & 1 == 1 || rest.first.map({ $0 >= 2 }) ?? false { reset() } }
        let sealed = selector & 1 == 1 ? rest : seal(rest, version: selector & 2 == 0 ? Exchange.sealVersion : 1)
        guard let restored = try? Exchange.restore(identity: identity, store: contacts, sealed: sealed, now: Self.now) else {
            return false
        }
        _ = restored.peer
        if let again = try? restored.seal() {
            guard let back = try? Exchange.restore(identity: identity, store: contacts, sealed: again, now: Self.now) else {
                fatalError("sealed fuzz: a restored exchange, sealed again, does not restore")
            }
            guard
                back.method == restored.method && back.state == restored.state && back.sas == restored.sas
                    && back.flags == restored.flags && back.peekOutgoing() == restored.peekOutgoing()
                    && back.contactID == restored.contactID
            else { fatalError("sealed fuzz: a restored exchange, sealed again, restores to another") }
            _ = try? back.reject()
        }
        _ = try? restored.reject()
        return true
    }

    /// Puts the pending PAKE scalars back as they were after setup.
    private func reset() {
        let kept = Set(pending.map(\.0))
        for name in store.names where name.hasPrefix("itsme.pake") && !kept.contains(name) { _ = try? store.remove(name) }
        for (name, bytes) in pending { try? store.put(name, bytes: bytes) }
    }

    /// `plain` sealed as `Exchange.seal` seals its record (a fixed nonce).
    func seal(_ plain: [UInt8], version: UInt8) -> [UInt8] {
        let nonce = [UInt8](repeating: 0, count: AEAD.nonceCount)
        let aad = LV.cat(LV.b(Exchange.sealLabel), [version], identity.publicKey)
        return [version] + nonce + (try! AEAD.seal(.chacha20Poly1305, key: sealKey, nonce: nonce, plaintext: plain, aad: aad))
    }

    /// The record inside a sealed exchange.
    func open(_ sealed: [UInt8]) throws -> [UInt8] {
        let aad = LV.cat(LV.b(Exchange.sealLabel), [sealed[0]], identity.publicKey)
        return try AEAD.open(
            .chacha20Poly1305, key: sealKey, nonce: Array(sealed[1..<13]), ciphertext: Array(sealed[13...]), aad: aad
        ).unsafeExportedArray()
    }

    /// Honest sealed exchanges of every method, in every state one can be
    /// sealed in, for the seed corpus: each as sealed, and as its record.
    func seeds() throws -> [[UInt8]] {
        defer { reset() }
        var out: [[UInt8]] = []
        func keep(_ ex: Exchange) {
            guard let sealed = try? ex.seal() else { return }
            out.append([1] + sealed)
            if let plain = try? open(sealed) { out.append([0] + plain) }
        }
        /// Delivers messages between `a` (this device) and `b` until neither
        /// has more, sealing `a` after each step.
        func converse(_ a: Exchange, _ b: Exchange) {
            keep(a)
            for _ in 0..<8 {
                var moved = false
                if let m = b.peekOutgoing() {
                    b.markSent()
                    _ = try? a.receive(m, now: Self.now)
                    keep(a)
                    moved = true
                }
                if let m = a.peekOutgoing() {
                    a.markSent()
                    _ = try? b.receive(m, now: Self.now)
                    moved = true
                }
                if !moved { break }
            }
        }
        var ra = DeterministicRandom(seed: [UInt8](repeating: 61, count: 32))
        var rb = DeterministicRandom(seed: [UInt8](repeating: 62, count: 32))

        // QR: pending, then comparing the SAS; and a source-format payload.
        let qrA = try Exchange.qr(identity: identity, store: contacts, now: Self.now, random: &ra)
        keep(qrA)
        let qrB = try Exchange.qr(identity: peer, store: peerContacts, now: Self.now, random: &rb)
        try qrA.receive(Array(qrB.outgoingText.utf8), now: Self.now)
        keep(qrA)
        let source = try Exchange.qr(identity: identity, store: contacts, now: Self.now, random: &ra)
        let key = Base64.encode(rb.bytes(32), .standardPadded)
        try source.receive(Array("5|Ol\\|d Phone|\(peer.fingerprint)|\(key)|123456".utf8), now: Self.now)
        keep(source)

        // Bluetooth (twice, so that this device takes either role), then a
        // rejection after the SAS.
        for _ in 0..<2 {
            let code = ShortCode.random(using: &ra)
            let a = try Exchange.bluetooth(identity: identity, store: contacts, sessionCode: code, now: Self.now, random: &ra)
            let b = try Exchange.bluetooth(identity: peer, store: peerContacts, sessionCode: code, now: Self.now, random: &rb)
            converse(a, b)
            try a.reject()
            keep(a)
        }

        // At a distance, as the inviter and as the invitee.
        for (realtime, seed) in Self.inviterSeeds {
            let mine = try inviter(realtime: realtime, seed: seed)
            keep(mine)
            guard let invite = mine.peekOutgoing() else { continue }
            mine.markSent()
            let theirs = try Exchange.acceptInvite(
                identity: peer, store: peerContacts, inviteCode: mine.inviteCode!.text, encryptionCode: mine.encryptionCode!.text,
                realtime: realtime, now: Self.now, random: &rb)
            try theirs.receive(invite, now: Self.now)
            converse(mine, theirs)
        }
        for (realtime, peerSeed, seed) in Self.inviteeSeeds {
            let (theirs, mine) = try invitee(realtime: realtime, peerSeed: peerSeed, seed: seed)
            converse(mine, theirs)
        }
        return out
    }
}

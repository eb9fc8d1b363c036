import ItsMePrimitives
import ItsMeBase
import ItsMeStore
import ItsMeFlows

/// The body of the exchange fuzz target (fuzz/ExchangeFuzz.swift), here so
/// the tests can replay the fuzz corpus through exactly the same code.
final class ExchangeFuzzing {
    let a: Identity, b: Identity
    let storeA: ContactStore, storeB: ContactStore

    /// Two people and their contact stores, in `directory` (nothing is
    /// saved to them: no exchange here gets as far as `save`).
    init(directory: String) throws {
        var r1 = DeterministicRandom(seed: [UInt8](repeating: 1, count: 32))
        var r2 = DeterministicRandom(seed: [UInt8](repeating: 2, count: 32))
        a = try Identity.create(store: MemorySecretStore(), name: "Fuzz A", random: &r1)
        b = try Identity.create(store: MemorySecretStore(), name: "Fuzz B", random: &r2)
        storeA = try ContactStore(path: directory + "/fuzz-a.db", identity: a)
        storeB = try ContactStore(path: directory + "/fuzz-b.db", identity: b)
    }

    /// The first byte picks what the rest is fed to: a QR exchange's
    /// `receive`, a Bluetooth exchange after zero to three honest frames
    /// from a real peer, or an exchange at a distance at one of its three
    /// steps (the invitee's INVITE, the inviter's ACCEPT, the invitee's REPLY).
    /// True if the exchange took it.
    @discardableResult
    func run(_ input: [UInt8]) -> Bool {
        guard let selector = input.first else { return false }
        let rest = Array(input.dropFirst())
        return play(selector) { _ in rest }
    }

    /// Plays the exchange `selector` picks up to the fuzzed message, which
    /// `message` gives from the message an honest peer would send there
    /// (nil for a QR exchange, whose peer payload is not made here).
    private func play(_ selector: UInt8, _ message: ([UInt8]?) -> [UInt8]) -> Bool {
        let now: Int64 = 1_800_000_000
        var ra = DeterministicRandom(seed: [UInt8](repeating: 3, count: 32))
        var rb = DeterministicRandom(seed: [UInt8](repeating: 4, count: 32))
        if selector & 3 == 2 {
            return remote(step: Int(selector >> 2) % 3, message, now: now, &ra, &rb)
        }
        if selector & 1 == 0 {
            guard let ex = try? Exchange.qr(identity: a, store: storeA, now: now, random: &ra) else { return false }
            let taken = (try? ex.receive(message(nil), now: now)) != nil
            _ = ex.sas
            _ = try? ex.seal()
            return taken
        }
        guard let x = try? Exchange.bluetooth(identity: a, store: storeA, sessionCode: ShortCode(value: 1), now: now, random: &ra),
            let y = try? Exchange.bluetooth(identity: b, store: storeB, sessionCode: ShortCode(value: 1), now: now, random: &rb)
        else { return false }
        // Honest frames from y first, then the fuzzed one.
        var honest = Int(selector >> 1) % 4
        while honest > 0, let f = y.peekOutgoing() {
            y.markSent()
            guard (try? x.receive(f, now: now)) != nil else { return false }
            if let g = x.peekOutgoing() {
                x.markSent()
                _ = try? y.receive(g, now: now)
            }
            honest -= 1
        }
        let taken = (try? x.receive(message(y.peekOutgoing()), now: now)) != nil
        _ = try? x.seal()
        return taken
    }

    private func remote(
        step: Int, _ message: ([UInt8]?) -> [UInt8], now: Int64, _ ra: inout DeterministicRandom,
        _ rb: inout DeterministicRandom
    ) -> Bool {
        guard let inviter = try? Exchange.invite(identity: a, store: storeA, realtime: step == 1, now: now, random: &ra),
            let invitee = try? Exchange.acceptInvite(
                identity: b, store: storeB, inviteCode: inviter.inviteCode!.text, encryptionCode: inviter.encryptionCode!.text,
                realtime: step == 1, now: now, random: &rb)
        else { return false }
        // End both, so that their PAKE scalars leave the secret stores.
        defer {
            try? inviter.reject()
            try? invitee.reject()
        }
        if step > 0, let invite = inviter.peekOutgoing() {
            inviter.markSent()
            guard (try? invitee.receive(invite, now: now)) != nil else { return false }
        }
        if step == 2, let accept = invitee.peekOutgoing() {
            invitee.markSent()
            guard (try? inviter.receive(accept, now: now)) != nil else { return false }
        }
        let (target, peer) = step == 1 ? (inviter, invitee) : (invitee, inviter)
        let taken = (try? target.receive(message(peer.peekOutgoing()), now: now)) != nil
        _ = target.sas
        _ = try? target.seal()
        return taken
    }

    /// Honest inputs for every selector, for the seed corpus: the peer's
    /// QR payload, a source-format one, and the message the honest peer
    /// sends at each step of a Bluetooth exchange and an exchange at a
    /// distance.
    func seeds() throws -> [[UInt8]] {
        var random = DeterministicRandom(seed: [UInt8](repeating: 22, count: 32))
        let peer = try Exchange.qr(identity: b, store: storeB, now: 1_800_000_000, random: &random)
        let key = Base64.encode(random.bytes(32), .standardPadded)
        var out: [[UInt8]] = [
            [0] + Array(peer.outgoingText.utf8),
            [0] + Array("5|Fuzz \\|B\\\\|\(b.fingerprint)|\(key)|042117".utf8),
        ]
        for selector in [1, 3, 5, 7, 2, 6, 10] as [UInt8] {
            var honest: [UInt8]?
            _ = play(selector) {
                honest = $0
                return $0 ?? []
            }
            if let honest { out.append([selector] + honest) }
        }
        return out
    }
}

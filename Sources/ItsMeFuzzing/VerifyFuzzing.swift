import ItsMePrimitives
import ItsMeBase
import ItsMeStore
import ItsMeFlows

/// The body of the verification fuzz target (fuzz/VerifyFuzz.swift), here
/// so the tests can replay its corpus through exactly the same code.
final class VerifyFuzzing {
    let a: Identity, b: Identity
    let storeA: ContactStore, storeB: ContactStore
    let idAtA: Int64, idAtB: Int64
    let now: Int64 = 1_800_000_000

    /// Two people who hold each other as contacts, in `directory`.
    init(directory: String) throws {
        var r1 = DeterministicRandom(seed: [UInt8](repeating: 5, count: 32))
        var r2 = DeterministicRandom(seed: [UInt8](repeating: 6, count: 32))
        a = try Identity.create(store: MemorySecretStore(), name: "Fuzz A", random: &r1)
        b = try Identity.create(store: MemorySecretStore(), name: "Fuzz B", random: &r2)
        storeA = try ContactStore(path: directory + "/fuzz-a.db", identity: a)
        storeB = try ContactStore(path: directory + "/fuzz-b.db", identity: b)
        let seed = try SecretBytes(copying: [UInt8](repeating: 9, count: 32))
        func contact(_ store: ContactStore, _ peer: Identity, _ seed: borrowing SecretBytes) throws -> Int64 {
            do { return try store.contact(publicKey: peer.publicKey).id } catch let e as ItsMeError where e.kind == .notFound {
                return try store.add(name: peer.name, publicKey: peer.publicKey, seed: seed, method: .qr, now: 1_800_000_000)
            }
        }
        idAtA = try contact(storeA, b, seed)
        idAtB = try contact(storeB, a, seed)
    }

    /// The first byte picks Online Verify or PIN Update (bit 0) and how many
    /// honest messages from the peer come first (bits 1-2); the rest is a
    /// list of messages, each a length byte and that many bytes, fed to A.
    /// True if A took every one (and there was one).
    @discardableResult
    func run(_ input: [UInt8]) -> Bool {
        guard let selector = input.first else { return false }
        var messages: [[UInt8]] = []
        var i = 1
        while i < input.count {
            let n = Int(input[i])
            let end = min(input.count, i + 1 + n)
            messages.append(Array(input[(i + 1)..<end]))
            i = end
        }
        return play(selector) { _ in messages }
    }

    /// Plays the session `selector` picks up to the fuzzed messages, which
    /// `messages` gives from the message the honest peer would send next.
    private func play(_ selector: UInt8, _ messages: ([UInt8]?) -> [[UInt8]]) -> Bool {
        var ra = DeterministicRandom(seed: [UInt8](repeating: 7, count: 32))
        var rb = DeterministicRandom(seed: [UInt8](repeating: 8, count: 32))
        let w = VoiceProtocol.window(now)
        let honest = Int(selector >> 1) % 4
        var taken = 0, fed: [[UInt8]] = []
        if selector & 1 == 0 {
            guard let x = try? OnlineVerify(store: storeA, contactID: idAtA, window: w, now: now, random: &ra),
                let y = try? OnlineVerify(store: storeB, contactID: idAtB, window: w, now: now, random: &rb)
            else { return false }
            Self.interleave(honest, peer: { y.takeOutgoing() }, to: { try x.receive($0, now: self.now) },
                back: { x.takeOutgoing() }, into: { try y.receive($0, now: self.now) })
            fed = messages(y.peekOutgoing())
            for m in fed where (try? x.receive(m, now: now)) != nil { taken += 1 }
            _ = x.sas
        } else {
            guard let x = try? PinUpdate(store: storeA, contactID: idAtA, window: w, now: now, random: &ra),
                let y = try? PinUpdate(store: storeB, contactID: idAtB, window: w, now: now, random: &rb)
            else { return false }
            Self.interleave(honest, peer: { defer { y.markSent() }; return y.peekOutgoing() },
                to: { try x.receive($0, now: self.now) }, back: { defer { x.markSent() }; return x.peekOutgoing() },
                into: { try y.receive($0, now: self.now) })
            fed = messages(y.peekOutgoing())
            for m in fed where (try? x.receive(m, now: now)) != nil { taken += 1 }
        }
        return !fed.isEmpty && taken == fed.count
    }

    /// Honest inputs for every selector, for the seed corpus: the message
    /// the honest peer sends after each number of honest steps.
    func seeds() -> [[UInt8]] {
        var out: [[UInt8]] = []
        for selector in 0..<8 as Range<UInt8> {
            var honest: [UInt8]?
            _ = play(selector) {
                honest = $0
                return $0.map { [$0] } ?? []
            }
            if let honest, honest.count <= 255 { out.append([selector, UInt8(honest.count)] + honest) }
        }
        return out
    }

    private static func interleave(
        _ count: Int, peer: () -> [UInt8]?, to: ([UInt8]) throws -> Void, back: () -> [UInt8]?,
        into: ([UInt8]) throws -> Void
    ) {
        for _ in 0..<count {
            if let m = peer() { guard (try? to(m)) != nil else { return } }
            if let m = back() { _ = try? into(m) }
        }
    }
}

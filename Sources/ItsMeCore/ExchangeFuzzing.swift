/// The body of the exchange fuzz target (fuzz/ExchangeFuzz.swift), here so
/// the tests can replay the fuzz corpus through exactly the same code.
enum ExchangeFuzzing {
    /// The first byte picks what the rest is fed to: a QR exchange's
    /// `receive`, a Bluetooth exchange after zero to three honest frames
    /// from a real peer, or an exchange at a distance at one of its three
    /// steps (the invitee's INVITE, the inviter's ACCEPT, the invitee's REPLY).
    static func run(_ input: [UInt8], _ a: Identity, _ b: Identity) {
        guard let selector = input.first else { return }
        let rest = Array(input.dropFirst())
        let now: Int64 = 1_800_000_000
        var ra = DeterministicRandom(seed: [UInt8](repeating: 3, count: 32))
        var rb = DeterministicRandom(seed: [UInt8](repeating: 4, count: 32))
        if selector & 3 == 2 {
            remote(step: Int(selector >> 2) % 3, rest, a, b, now: now, &ra, &rb)
            return
        }
        if selector & 1 == 0 {
            guard let ex = try? Exchange.qr(identity: a, now: now, random: &ra) else { return }
            _ = try? ex.receive(rest, now: now)
            _ = ex.sas
            _ = try? ex.seal()
            return
        }
        guard let x = try? Exchange.bluetooth(identity: a, sessionCode: ShortCode(value: 1), now: now, random: &ra),
            let y = try? Exchange.bluetooth(identity: b, sessionCode: ShortCode(value: 1), now: now, random: &rb)
        else { return }
        // Honest frames from y first, then the fuzzed one.
        var honest = Int(selector >> 1) % 4
        while honest > 0, let f = y.peekOutgoing() {
            y.markSent()
            guard (try? x.receive(f, now: now)) != nil else { return }
            if let g = x.peekOutgoing() {
                x.markSent()
                _ = try? y.receive(g, now: now)
            }
            honest -= 1
        }
        _ = try? x.receive(rest, now: now)
        _ = try? x.seal()
    }

    private static func remote(
        step: Int, _ fuzzed: [UInt8], _ a: Identity, _ b: Identity, now: Int64, _ ra: inout DeterministicRandom,
        _ rb: inout DeterministicRandom
    ) {
        guard let inviter = try? Exchange.invite(identity: a, realtime: step == 1, now: now, random: &ra),
            let invitee = try? Exchange.acceptInvite(
                identity: b, inviteCode: inviter.inviteCode!.text, encryptionCode: inviter.encryptionCode!.text,
                realtime: step == 1, now: now, random: &rb)
        else { return }
        // End both, so that their PAKE scalars leave the secret stores.
        defer {
            try? inviter.reject(store: nil)
            try? invitee.reject(store: nil)
        }
        if step > 0, let invite = inviter.peekOutgoing() {
            inviter.markSent()
            guard (try? invitee.receive(invite, now: now)) != nil else { return }
        }
        if step == 2, let accept = invitee.peekOutgoing() {
            invitee.markSent()
            guard (try? inviter.receive(accept, now: now)) != nil else { return }
        }
        let target = step == 1 ? inviter : invitee
        _ = try? target.receive(fuzzed, now: now)
        _ = target.sas
        _ = try? target.seal()
    }
}

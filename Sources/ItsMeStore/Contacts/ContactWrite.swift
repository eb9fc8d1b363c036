import ItsMePrimitives
import ItsMeBase

/// The device secrets a verification session uses for tags (PROTOCOL.md
/// 10.1, 10.3), each empty when this device does not know it.
package struct TagSecrets {
    /// The one this side says: its new one once a PIN Update is committed.
    package let speaking: SecretBox
    package let theirs: SecretBox
    /// The peer's new one while a PIN Update is pending.
    package let theirsPending: SecretBox
    /// The peer's new one from an earlier, interrupted update.
    package let theirsPrevious: SecretBox
    /// This side has committed the pending update, so the peer, which
    /// committed first or commits on DONE, says `theirsPending`.
    package let committed: Bool

    /// None known (a new device, or a contact added without them).
    static func none() throws -> TagSecrets {
        TagSecrets(
            speaking: SecretBox(try SecretBytes(count: 0)), theirs: SecretBox(try SecretBytes(count: 0)),
            theirsPending: SecretBox(try SecretBytes(count: 0)), theirsPrevious: SecretBox(try SecretBytes(count: 0)),
            committed: false)
    }
}

/// Which of the peer's device secrets its tag matched (PROTOCOL.md 10.1,
/// 10.3): the current one wins a tie, then the previous, then the pending.
package enum PeerDeviceSecret: Equatable, Sendable {
    /// The current one, or none matched.
    case current
    /// Its new one from an earlier, interrupted update: adopt it.
    case previous
    /// Its new one of the pending update: the update is complete.
    case pending
}

/// A change to one contact that a protocol machine asks its driver to make.
/// The machines write to no store; the driver applies these in order, and a
/// failed write ends the step (and, on a message's path, the machine).
package enum ContactWrite {
    /// Records a verification's outcome (PROTOCOL.md 10.1): verified
    /// (unless the contact is degraded), degraded on a changed device,
    /// nothing on a mismatch; then, if the peer used one of its new
    /// secrets, adopts it and marks the contact verified.
    case verification(contactID: Int64, outcome: VerificationOutcome, peerSecret: PeerDeviceSecret)
    /// Uses `window` for the contact, atomically (`.windowUsed` if taken).
    case useWindow(contactID: Int64, window: Int64)
    /// Stores a Security PIN Update's new secrets as pending; `committed`:
    /// this side says its new one from now on (and the contact is marked
    /// verified).
    case pendingDeviceSecrets(contactID: Int64, mine: SecretRange, theirs: SecretRange, committed: Bool)
    /// Commits the pending update and marks the contact verified.
    case commitPendingDeviceSecrets(contactID: Int64)
    /// A new contact an exchange saved: verified, as both decisions are in
    /// (PROTOCOL.md 8.1).
    case settleExchanged(contactID: Int64)
    /// A contact that was known before the exchange: the new seed and
    /// device secrets, verified.
    case replaceExchanged(contactID: Int64, ExchangedContact)
    /// A new contact an exchange saved waits for the peer's decision until then.
    case awaitPeer(contactID: Int64, until: Int64)
    /// Deletes the new contact an exchange saved; one already deleted (by
    /// the person, or a sweep of contacts whose peer did not decide in
    /// time) counts as deleted.
    case deleteExchanged(contactID: Int64)
}

extension ContactStore {
    package func apply(_ write: ContactWrite, now: Int64) throws {
        switch write {
        case .verification(let id, let outcome, let peerSecret):
            switch outcome {
            case .verified, .verifiedTagUnchecked:
                if try contact(id: id).state != .degraded {
                    try setState(id: id, .verified, acknowledged: false, now: now)
                }
            case .deviceChanged:
                try setState(id: id, .degraded, acknowledged: false, now: now)
            case .mismatch:
                break
            }
            switch peerSecret {
            case .current:
                break
            case .previous:
                try adoptPreviousDeviceSecret(id: id)
                try setState(id: id, .verified, acknowledged: false, now: now)
            case .pending:
                try finalizePendingDeviceSecrets(id: id)
                try setState(id: id, .verified, acknowledged: false, now: now)
            }
        case .useWindow(let id, let window):
            try useWindow(id: id, window: window)
        case .pendingDeviceSecrets(let id, let mine, let theirs, let committed):
            try setPendingDeviceSecrets(
                id: id, mine: try SecretBytes(copying: mine), theirs: try SecretBytes(copying: theirs), committed: committed)
            if committed { try setState(id: id, .verified, acknowledged: false, now: now) }
        case .commitPendingDeviceSecrets(let id):
            try commitPendingDeviceSecrets(id: id)
            try setState(id: id, .verified, acknowledged: false, now: now)
        case .settleExchanged(let id):
            try settleVerified(id: id, now: now)
        case .replaceExchanged(let id, let contact):
            guard let key = contact.publicKey else { throw ItsMeError(.internal, "a known contact without its key") }
            try replaceExchanged(
                id: id, publicKey: key, seed: try SecretBytes(copying: contact.seed), mine: try SecretBytes(copying: contact.mine),
                theirs: try SecretBytes(copying: contact.theirs), method: contact.method, now: now)
        case .awaitPeer(let id, let until):
            try setAwaiting(id: id, until: until)
        case .deleteExchanged(let id):
            do {
                try delete(id: id)
            } catch let e as ItsMeError where e.kind == .notFound {
                // Already deleted: by the person while comparing the SAS or
                // awaiting the peer, or by expireAwaiting.
            }
        }
    }

    /// Saves what an exchange agreed on (PROTOCOL.md 8.1): first deletes the
    /// contacts of other exchanges whose peer's decision did not come in
    /// time (`expireAwaiting`); then a contact with the peer's identity key
    /// is found and kept as it is (`known`: it is replaced only once the
    /// exchange is confirmed), or a new one is added unverified. Returns its id.
    package func saveExchanged(_ contact: ExchangedContact, now: Int64) throws -> (id: Int64, known: Bool) {
        try expireAwaiting(now: now)
        if let key = contact.publicKey {
            do {
                return (try self.contact(publicKey: key).id, true)
            } catch let e as ItsMeError where e.kind == .notFound {}
        }
        let id = try addExchanged(
            name: contact.name, publicKey: contact.publicKey, fingerprint: contact.fingerprint,
            seed: try SecretBytes(copying: contact.seed), mine: try SecretBytes(copying: contact.mine),
            theirs: try SecretBytes(copying: contact.theirs), method: contact.method, now: now)
        return (id, false)
    }
}

/// The contact an exchange adds or replaces (PROTOCOL.md 8.1): the peer as
/// the exchange authenticated it, the seed and both device secrets.
package struct ExchangedContact {
    package let name: String
    package let fingerprint: String
    /// nil for a source-format peer.
    package let publicKey: [UInt8]?
    package let seed: SecretRange
    package let mine: SecretRange
    package let theirs: SensitiveBytes
    package let method: Contact.ExchangeMethod

    package init(
        name: String, fingerprint: String, publicKey: [UInt8]?, seed: SecretRange, mine: SecretRange,
        theirs: SensitiveBytes, method: Contact.ExchangeMethod
    ) {
        self.name = name
        self.fingerprint = fingerprint
        self.publicKey = publicKey
        self.seed = seed
        self.mine = mine
        self.theirs = theirs
        self.method = method
    }
}

import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// What a protocol machine's step asks its driver to do, in order. Every
/// machine speaks this one vocabulary; the driver makes the writes and
/// queues the messages (`Driver.step`).
enum Action {
    /// Send these bytes to the peer, once every write of the step succeeded.
    case send([UInt8])
    /// Make this change to a contact of the driver's contact store.
    case contact(ContactWrite)
    /// Make this change to the identity's secret store.
    case secret(SecretWrite)
    /// Make this change to the contact an exchange saved (its machine says
    /// what that means for the store: `ExchangeMachine.contactWrites`).
    case exchanged(ExchangedWrite)
    /// Drop the messages still queued: the peer must get none of them
    /// (a transfer the person rejected).
    case discardQueued
}

/// A change to the identity's secret store that a machine asks for.
enum SecretWrite {
    /// Keep the PAKE scalar (a pending exchange at a distance is restored
    /// with it).
    case keepPAKEScalar(inviteID: [UInt8], inviter: Bool, createdAt: Int64, scalar: SecretBox)
    /// Wipe it: the exchange ended, a copy of the sealed one cannot be restored.
    case forgetPAKEScalar(inviteID: [UInt8], inviter: Bool)
}

/// A change to the contact an exchange saved (PROTOCOL.md 8.1).
enum ExchangedWrite {
    /// Save the contact unverified if it is not saved yet (`Exchange.save`).
    case save(ExchangedContact)
    /// Make the saved contact verified: a new one as it is, a known one
    /// with the new seed and device secrets.
    case keep(ExchangedContact)
    /// A new contact waits for the peer's decision until then.
    case awaitPeer(until: Int64)
    /// Delete the contact `save` added (a known contact stays as it was);
    /// one already deleted, by the person or a sweep, counts as deleted.
    case drop
}

/// A protocol machine as `Driver` steps it: a value whose transitions
/// return `Action`s, and which decides for itself what a failure ends.
protocol SteppedMachine {
    /// Why the machine failed for good; nil while it has not.
    var failure: ItsMeError? { get }
    /// Ends the machine for good.
    mutating func fail(_ error: ItsMeError)
    /// What is done, as well as it can be, once the machine failed (the
    /// exchange forgets its PAKE scalar).
    var actionsOnFailure: [Action] { get }
    /// Whether a step that threw `error` without failing the machine is
    /// kept all the same (a roll call records a refused sealed code).
    func keepsStep(throwing error: ItsMeError) -> Bool
    /// Whether a write that failed with `error` ends the machine (a voice
    /// session whose window another session took); otherwise the machine
    /// stays as it was before the step and the call can be repeated.
    static func failedWriteEnds(_ error: ItsMeError) -> Bool
}

extension SteppedMachine {
    var actionsOnFailure: [Action] { [] }
    func keepsStep(throwing error: ItsMeError) -> Bool { false }
    static func failedWriteEnds(_ error: ItsMeError) -> Bool { false }
}

/// The one skeleton every driver steps its machine with: a step runs on a
/// copy; its writes are made in order; its messages are queued only once
/// every write succeeded (a message never goes out ahead of the write it
/// follows: PROTOCOL.md 10.3, 8.1); then the copy is kept. A step that
/// fails the machine is kept failed, with nothing left to send. A write
/// that fails leaves the machine and the queue as they were, so the call
/// can be repeated, unless the machine says that failure ends it.
///
/// A class: a write may read the driver that owns it (its store, its
/// machine as it was before the step) while the step runs, which the
/// exclusive access of a struct's mutating step would forbid. Not
/// thread-safe: its owner serialises calls.
final class Driver<Machine: SteppedMachine> {
    private(set) var machine: Machine
    private var queue: [[UInt8]] = []
    /// How many messages were handed to the transport (`markSent`).
    private(set) var sent = 0

    /// How a driver makes one write of a step: on the step's copy of the
    /// machine, which a write may tell what it did (the exchange's save
    /// gives the contact's id).
    typealias Write = (Action, inout Machine) throws -> Void

    /// A driver of `machine`, whose first actions are `actions`.
    init(_ machine: Machine, actions: [Action] = [], write: Write = { _, _ in }) throws {
        self.machine = machine
        try step({ _ in ((), actions) }, write: write)
    }

    /// The next message to send, left in the queue; nil if none (and
    /// always once the machine failed).
    var nextOutgoing: [UInt8]? { machine.failure == nil ? queue.first : nil }

    /// The message `nextOutgoing` gave was handed to the transport.
    func markSent() {
        guard !queue.isEmpty else { return }
        queue.removeFirst()
        sent += 1
    }

    /// The first `count` messages queued were handed over before (a
    /// sealed exchange, restored by replaying what it received).
    func skipSent(_ count: Int) {
        for _ in 0..<min(count, queue.count) { markSent() }
    }

    /// Runs `body` on a copy of the machine, makes the writes it returns
    /// through `write` (every action but `.send` and `.discardQueued`), in
    /// order, then queues its messages and keeps the copy.
    @discardableResult
    func step<T>(_ body: (inout Machine) throws -> (T, [Action]), write: Write) throws -> T {
        let wasFailed = machine.failure != nil
        var copy = machine
        let result: T
        let actions: [Action]
        do {
            (result, actions) = try body(&copy)
        } catch {
            if !wasFailed, copy.failure != nil {
                keepFailed(copy, write: write)
            } else if let e = error as? ItsMeError, copy.keepsStep(throwing: e) {
                machine = copy
            }
            throw error
        }
        var messages: [[UInt8]] = []
        var discard = false
        do {
            for action in actions {
                switch action {
                case .send(let bytes): messages.append(bytes)
                case .discardQueued:
                    discard = true
                    messages = []
                case .contact, .secret, .exchanged: try write(action, &copy)
                }
            }
        } catch let e as ItsMeError where Machine.failedWriteEnds(e) {
            copy.fail(e)
            keepFailed(copy, write: write)
            throw e
        }
        if discard { queue = [] }
        queue += messages
        machine = copy
        return result
    }

    /// A step that returns no actions.
    @discardableResult
    func plainStep<T>(_ body: (inout Machine) throws -> T) throws -> T {
        try step({ ((try body(&$0)), []) }, write: { _, _ in })
    }

    private func keepFailed(_ failed: Machine, write: Write) {
        var failed = failed
        for action in failed.actionsOnFailure { try? write(action, &failed) }
        machine = failed
        queue = []
    }

    /// Changes the machine outside a step: transport bookkeeping that no
    /// rule of the protocol depends on (the roll call's own queue).
    func withMachine<T>(_ body: (inout Machine) throws -> T) rethrows -> T { try body(&machine) }
}

extension ContactStore {
    /// A driver's `write` for `Driver.step` that makes a machine's writes
    /// to this store at `now`. Only `.contact` writes are this store's.
    func writer<M>(now: Int64) -> (Action, inout M) throws -> Void {
        { action, _ in
            guard case .contact(let write) = action else {
                throw ItsMeError(.internal, "a write the contact store does not make")
            }
            try self.apply(write, now: now)
        }
    }
}

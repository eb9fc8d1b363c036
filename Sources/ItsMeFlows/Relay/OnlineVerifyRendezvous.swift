import ItsMePrimitives
import ItsMeBase
import ItsMeStore

/// The room rule of docs/PROTOCOL.md 11.1, without I/O: which relay rooms
/// an Online Verify with a contact joins, and which session goes on.
///
/// Two people who start at about the same time may straddle a window
/// boundary, so each side makes a session for the current window and one
/// for the window before (both drawn from `random` now, in that order). The
/// host joins `roomsToJoin` (at first the current window's room only); when
/// the first event of that room is not the peer's arrival it reports
/// `alone(in:)`, and the previous window's room is to be joined too. The
/// first `peerJoined(in:)` picks the session of that room: the host runs it
/// (`OnlineVerify`'s messages through that room) and leaves the others
/// (`dropped`).
///
/// Not for use by two threads at once.
public final class OnlineVerifyRendezvous: CustomStringConvertible {
    /// A room and the session that runs in it.
    public struct Candidate {
        /// The room ID (32 lowercase hex digits, `OnlineVerify.roomName`).
        package let room: String
        /// The Online Verify session for that room's window.
        public let session: OnlineVerify
    }

    /// The current window's candidate, then the previous window's.
    public let candidates: [Candidate]
    /// Whether the previous window's room is to be joined as well.
    package private(set) var widened = false
    /// The index in `candidates` of the room where the two met.
    package private(set) var chosenIndex: Int?

    /// Makes the two sessions with contact `contactID` for the window of
    /// `now` and the one before, both bound to the host's call when
    /// `binding` is given (`OnlineVerify.init`). Throws what
    /// `OnlineVerify.init` throws (an unknown or unsettled contact, a time
    /// out of range, a binding of another length).
    public init<R: RandomSource>(
        store: ContactStore, contactID: Int64, binding: [UInt8]? = nil, now: Int64, random: inout R
    ) throws {
        try UnixTime.check(now)
        let window = VoiceProtocol.window(now)
        var made: [Candidate] = []
        for w in [window, window - 1] {
            let session = try OnlineVerify(
                store: store, contactID: contactID, window: w, binding: binding, now: now, random: &random)
            made.append(Candidate(room: session.roomName, session: session))
        }
        candidates = made
    }

    /// The rooms to be in now, in order of joining.
    public var roomsToJoin: [String] {
        if let chosenIndex { return [candidates[chosenIndex].room] }
        return widened ? candidates.map(\.room) : [candidates[0].room]
    }

    /// The session chosen, once the peer joined one of the rooms.
    public var chosen: OnlineVerify? { chosenIndex.map { candidates[$0].session } }

    /// The candidates to drop (leave their rooms, free their sessions) once
    /// a session was chosen; empty before.
    package var dropped: [Candidate] {
        guard let chosenIndex else { return [] }
        return candidates.indices.filter { $0 != chosenIndex }.map { candidates[$0] }
    }

    /// The first event in the current window's room was not the peer's
    /// arrival: the previous window's room is to be joined too. Nothing
    /// happens once a session was chosen or for another room.
    public func alone(in room: String) {
        if chosenIndex == nil, room == candidates[0].room { widened = true }
    }

    /// The peer joined `room`: the first such report picks that room's
    /// session, which it returns; later ones return the session chosen.
    /// `.invalidArgument` for a room that is not one to be in.
    @discardableResult
    public func peerJoined(in room: String) throws -> OnlineVerify {
        if let chosenIndex { return candidates[chosenIndex].session }
        guard let index = candidates.firstIndex(where: { $0.room == room }), roomsToJoin.contains(room) else {
            throw ItsMeError(.invalidArgument, "not a room of this rendezvous")
        }
        chosenIndex = index
        return candidates[index].session
    }

    public var description: String {
        "OnlineVerifyRendezvous(contact: \(candidates[0].session.contactID), widened: \(widened), chosen: \(chosenIndex.map(String.init) ?? "none"))"
    }
}

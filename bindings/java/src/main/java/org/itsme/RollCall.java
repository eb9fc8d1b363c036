package org.itsme;

import com.sun.jna.ptr.ByteByReference;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.PointerByReference;
import java.util.ArrayList;
import java.util.List;
import org.itsme.raw.ItsMeLibrary;
import org.itsme.raw.ItsMeLibrary.RollcallPhase;
import org.itsme.raw.ItsMeLibrary.RollcallState;
import org.itsme.raw.ItsMeLibrary.SizeT;
import org.itsme.raw.ItsMeLibrary.SizeTByReference;
import org.itsme.raw.ItsMeLibrary.itsme_rollcall;
import org.itsme.raw.ItsMeLibrary.itsme_rollcall_participant_info;

/**
 * A roll call on this device ({@code itsme_rollcall}, docs/PROTOCOL.md section
 * 20): everyone on a conference call checks at once which participants are
 * contacts whose devices hold the seed exchanged with them.
 *
 * <p>Everyone enters one meeting code ({@link #newMeetingCode} draws one);
 * each device takes every contact of its store, and may bind the roll call
 * to the host's own call ({@link #create(ContactStore, String, byte[], long,
 * DeterministicRandom)}). The library does no I/O and decides every message:
 * the host joins the relay's group room {@link #room} and reports its events
 * ({@link #joined}, at the first join and after every reconnection;
 * {@link #peerJoined}; {@link #peerLeft}), feeds every message of the room
 * with the slot that carried it to {@link #receive}, calls {@link #tick}
 * about once a second, and after each call sends what {@link #nextOutgoing}
 * gives until it gives nothing. The owner, shown the {@link #participants}
 * (with the {@link #headCount} to compare with the faces on the call, and a
 * {@link #split} when there is one), confirms them with the {@link #roster}
 * read then ({@link #confirmRoster}), reads {@link #code} aloud, says so
 * ({@link #confirmSaid}), and types what each contact read
 * ({@link #enterHeard}).
 *
 * <p>A participant is present once its signed VIEW lists this device. A new
 * roster starts a new round ({@link RollcallPhase#GATHERING} again); checks
 * made stay, and a roster that comes back (a participant's connection
 * dropped and came back) brings its round back. A refused message changes
 * nothing and the roll call goes on. It lasts 10 minutes from its creation
 * ({@link ItsMeException.Expired} after that). Times are unix seconds; relay
 * slots are 1 to 65535. The library keeps the roll call's contact store
 * alive. Calls on one roll call are serialised.
 */
public final class RollCall extends Handle<itsme_rollcall> {
    private RollCall(itsme_rollcall pointer) {
        super("roll call", pointer, ItsMe.library()::itsme_rollcall_free,
                p -> ItsMe.readDetail((out, cap, len) -> ItsMe.library().itsme_rollcall_last_error(p, out, cap, len)));
    }

    /**
     * One device of the roll call as this device sees it: every device ever present stays in
     * the list.
     *
     * @param index 0 for this device; the others in the order they became present
     * @param slot the relay slot it speaks from, null for this device
     * @param contactId the contact it is, null for this device and for a device that is not a contact
     * @param state what to show beside it
     * @param left whether it is not present now (its connection left; it may come back under the same place)
     * @param agrees whether its device holds the same roster as this one (always for this
     *     device): show the others as "not agreeing yet"
     */
    public record Participant(long index, Integer slot, Long contactId, RollcallState state, boolean left,
            boolean agrees) {
    }

    /**
     * A new meeting code, as shown ("ABCD-EFGH"), to share on the call: the form of an invite
     * code (docs/PROTOCOL.md 16.1), drawn from {@code random} (tests only; null: the operating
     * system).
     */
    public static String newMeetingCode(DeterministicRandom random) {
        return DeterministicRandom.with(random, r -> ItsMe.text(
                (out, cap, len) -> ItsMe.library().itsme_meeting_code_new(r, out, cap, len),
                ItsMeLibrary.ITSME_REMOTE_CODE_SIZE, ItsMe::threadLastError));
    }

    /** A new meeting code from the operating system's random source. */
    public static String newMeetingCode() {
        return newMeetingCode(null);
    }

    /**
     * A roll call named by {@code meetingCode} (as typed: either case, spaces and '-' ignored)
     * at {@code now}, with every contact of {@code store} but those awaiting the peer.
     * {@code binding} binds it to the host's own call: {@link ItsMeLibrary#ITSME_CALL_BINDING_MIN}
     * to {@link ItsMeLibrary#ITSME_CALL_BINDING_MAX} bytes that every participant of that
     * call holds, the same for the whole call, that the relay never sees (docs/PROTOCOL.md 20.1
     * says which values qualify); null: not bound. A device bound to another call checks nobody
     * of this one. The roll-call key and the HELLO's padding are drawn from {@code random} (tests
     * only; null: the operating system). Nothing is queued before {@link #joined}. Throws
     * ItsMeException.InvalidArgument for a code with a typo, a binding of another length or a
     * store of more than 2048 contacts, with the store's detail.
     */
    public static RollCall create(ContactStore store, String meetingCode, byte[] binding, long now,
            DeterministicRandom random) {
        String checked = ItsMe.textArgument(meetingCode, "meeting code");
        byte[] bound = ItsMe.callBinding(binding);
        SizeT boundLength = new SizeT(bound == null ? 0 : bound.length);
        return store.use(s -> DeterministicRandom.with(random, r -> {
            PointerByReference out = new PointerByReference();
            int code = ItsMe.library().itsme_rollcall_new(s, checked, bound, boundLength, r, now, out);
            return new RollCall(new itsme_rollcall(ItsMe.created(code, out, store.detail(s))));
        }));
    }

    /** A roll call at {@code now}, bound by {@code binding} (null: not bound), drawing from the operating system. */
    public static RollCall create(ContactStore store, String meetingCode, byte[] binding, long now) {
        return create(store, meetingCode, binding, now, null);
    }

    /** A roll call now, bound by {@code binding} (null: not bound). */
    public static RollCall create(ContactStore store, String meetingCode, byte[] binding) {
        return create(store, meetingCode, binding, ItsMe.now(), null);
    }

    /** Where the roll call stands; EXPIRED from the first call with a time past the lifetime. */
    public RollcallPhase phase() {
        IntByReference phase = new IntByReference();
        call(p -> ItsMe.library().itsme_rollcall_status(p, phase));
        RollcallPhase known = RollcallPhase.of(phase.getValue());
        if (known == null) {
            throw ItsMeException.internal("unknown roll call phase " + phase.getValue());
        }
        return known;
    }

    /** The relay group room's name: 32 lowercase hex digits, the same on every device for one code. */
    public String room() {
        return text(ItsMeLibrary.ITSME_ROOM_NAME_SIZE, ItsMe.library()::itsme_rollcall_room);
    }

    /**
     * The next message to send to the group room, removed from the queue; empty when there is
     * none. A VIEW is made when it is taken, from the state at that moment.
     */
    public byte[] nextOutgoing() {
        return bytes(ItsMeLibrary.ITSME_ROLLCALL_MESSAGE_MAX, ItsMe.library()::itsme_rollcall_next_outgoing);
    }

    /**
     * The relay's "joined" event at {@code now}: this device's {@code slot}, and the slots of
     * the {@code peers} already in the room (empty or null when alone). Called at the first join
     * and again after every reconnection (a new slot): the HELLO and a VIEW are queued, and the
     * roll call goes on in its place. InvalidArgument for a slot out of 1 to 65535 or a time out
     * of range; Expired.
     */
    public void joined(int slot, int[] peers, long now) {
        int count = peers == null ? 0 : peers.length;
        // Each slot in 2 bytes, big-endian, as in the relay's message prefix.
        byte[] list = new byte[count * ItsMeLibrary.ITSME_ROLLCALL_SLOT_BYTES];
        for (int i = 0; i < count; i++) {
            int peer = peers[i];
            if (peer < 0 || peer > 0xFFFF) {
                throw ItsMeException.of(ItsMeLibrary.ITSME_E_INVALID_ARGUMENT,
                        "a relay slot is 1 to 65535, not " + peer);
            }
            list[2 * i] = (byte) (peer >>> 8);
            list[2 * i + 1] = (byte) peer;
        }
        byte[] bytes = list.length == 0 ? null : list;
        call(p -> ItsMe.library().itsme_rollcall_joined(p, slot, bytes, new SizeT(count), now));
    }

    /**
     * Feeds one message of the group room carried by relay slot {@code slot} (1 to 65535; the
     * relay's 2-byte prefix removed). A HELLO already held, an older VIEW or a SAID already taken
     * is ignored. A refused message changes nothing: MalformedMessage (not a roll-call message
     * of this version, a second HELLO for one key or from one slot, a second SAID in a round),
     * AuthenticationFailed (a signature that does not verify; or a contact's sealed code that
     * does not open against the code typed: the participant is REFUSED for the round),
     * InvalidState (a VIEW or SAID from a participant not held or not present here, a VIEW
     * carried by another slot than its sender's, a SAID of another roster), InvalidKey (this
     * device's own message reflected), InvalidArgument (a slot out of range, a HELLO beyond the
     * 100 held, a 51st participant), Expired, Database.
     */
    public void receive(byte[] message, int slot, long now) {
        byte[] checked = ItsMe.bytesArgument(message, "message");
        call(p -> ItsMe.library().itsme_rollcall_receive(p, checked, new SizeT(checked.length), slot, now));
    }

    /**
     * A text frame of the group room at {@code now}, as the relay sent it (one of its events):
     * "joined", "peer-joined" and "peer-left" are applied as {@link #joined}, {@link #peerJoined}
     * and {@link #peerLeft} apply them, with their errors; "refused" and an event this version
     * does not know change nothing. MalformedMessage for a text that is not a group room's event
     * (nothing changes).
     */
    public void roomText(byte[] text, long now) {
        byte[] checked = ItsMe.bytesArgument(text, "text");
        call(p -> ItsMe.library().itsme_rollcall_room_text(p, checked, new SizeT(checked.length), now));
    }

    /**
     * A binary frame of the group room at {@code now}, as the relay sent it: the sender's relay
     * slot (2 bytes, big-endian), then its message, fed as {@link #receive} feeds it.
     * MalformedMessage for a frame shorter than a slot (nothing changes), then the errors of
     * {@link #receive}.
     */
    public void roomBinary(byte[] frame, long now) {
        byte[] checked = ItsMe.bytesArgument(frame, "frame");
        call(p -> ItsMe.library().itsme_rollcall_room_binary(p, checked, new SizeT(checked.length), now));
    }

    /** The relay announced a new peer in {@code slot} at {@code now}: this device's HELLO is queued for it. */
    public void peerJoined(int slot, long now) {
        call(p -> ItsMe.library().itsme_rollcall_peer_joined(p, slot, now));
    }

    /**
     * The peer of {@code slot} left the room at {@code now}: its participant is no longer present
     * (marked left; a new round), and comes back if it rejoins.
     */
    public void peerLeft(int slot, long now) {
        call(p -> ItsMe.library().itsme_rollcall_peer_left(p, slot, now));
    }

    /**
     * Called about once a second: a VIEW that is due, and what may have been lost
     * (docs/PROTOCOL.md 20.6), are queued; send them. InvalidArgument for a time out of range;
     * Expired.
     */
    public void tick(long now) {
        call(p -> ItsMe.library().itsme_rollcall_tick(p, now));
    }

    /** How many devices are present now, this one included (1 to 50): compare it with the faces on the call. */
    public long headCount() {
        SizeTByReference count = new SizeTByReference();
        call(p -> ItsMe.library().itsme_rollcall_head_count(p, count));
        return count.getValue();
    }

    /**
     * Whether the roster has not changed for 5 seconds while a present participant holds another
     * one: someone (the relay) shows different participants to different devices. Show it: a
     * split that stays is not a slow network.
     */
    public boolean split() {
        ByteByReference split = new ByteByReference();
        call(p -> ItsMe.library().itsme_rollcall_split(p, split));
        return split.getValue() != 0;
    }

    /** The hash of the roster held now (32 bytes): read it when showing the participants. */
    public byte[] roster() {
        return bytes(ItsMeLibrary.ITSME_ROLLCALL_ROSTER_BYTES, ItsMe.library()::itsme_rollcall_roster);
    }

    /**
     * The owner confirmed that the contacts listed are on their call: {@code roster} is the
     * {@link #roster} read when the list was shown. Draws this round's code from {@code random}
     * (tests only; null: the operating system). InvalidState if no one else is present yet, if
     * the roster changed since (show the participants again) or if it is confirmed already in
     * this round.
     */
    public void confirmRoster(byte[] roster, long now, DeterministicRandom random) {
        byte[] checked = ItsMe.bytesArgument(roster, "roster");
        call(p -> DeterministicRandom.with(random,
                r -> ItsMe.library().itsme_rollcall_confirm_roster(p, checked, new SizeT(checked.length), r, now)));
    }

    /** {@link #confirmRoster(byte[], long, DeterministicRandom)} drawing from the operating system. */
    public void confirmRoster(byte[] roster, long now) {
        confirmRoster(roster, now, null);
    }

    /** This device's code for this round, to read aloud ("ECHO 042"); InvalidState before the roster is confirmed. */
    public String code() {
        return text(ItsMeLibrary.ITSME_VOICE_CODE_SIZE, ItsMe.library()::itsme_rollcall_code);
    }

    /**
     * The owner read {@link #code} aloud: the SAID, with the code sealed for each contact
     * present, is queued ({@link #nextOutgoing}); the entries of the others are drawn from
     * {@code random} (tests only; null: the operating system). Nothing derived from the code
     * leaves the device before. InvalidState before the roster is confirmed or once this round's
     * SAID went out.
     */
    public void confirmSaid(long now, DeterministicRandom random) {
        call(p -> DeterministicRandom.with(random, r -> ItsMe.library().itsme_rollcall_confirm_said(p, r, now)));
    }

    /** {@link #confirmSaid(long, DeterministicRandom)} drawing from the operating system. */
    public void confirmSaid(long now) {
        confirmSaid(now, null);
    }

    /** Participant {@code index} (0, this device, to the count less one); InvalidArgument out of range. */
    public Participant participant(long index) {
        return use(p -> read(p, index));
    }

    /** Every device ever present in the roll call, this one first (those that left: {@link Participant#left}). */
    public List<Participant> participants() {
        return use(p -> {
            SizeTByReference count = new SizeTByReference();
            ItsMe.check(ItsMe.library().itsme_rollcall_participant_count(p, count), detail(p));
            List<Participant> all = new ArrayList<>();
            for (long index = 0; index < count.getValue(); index++) {
                all.add(read(p, index));
            }
            return all;
        });
    }

    private Participant read(itsme_rollcall p, long index) {
        itsme_rollcall_participant_info info = new itsme_rollcall_participant_info();
        ItsMe.check(ItsMe.library().itsme_rollcall_participant(p, new SizeT(index), info), detail(p));
        RollcallState state = RollcallState.of(info.state);
        if (state == null) {
            throw ItsMeException.internal("unknown roll call state " + info.state);
        }
        return new Participant(info.index.longValue(), info.slot == 0 ? null : info.slot,
                info.contact_id == 0 ? null : info.contact_id, state, info.left != 0, info.agrees != 0);
    }

    /**
     * The owner typed {@code code} ("ECHO 042", the word in any case), the code participant
     * {@code index} read aloud. Compared at once if their sealed code is in, else when it
     * arrives; the outcome is recorded on the contact. Returns the participant's state
     * (NOT_YET while their sealed code is to come, WRONG: type again). Throws InvalidArgument
     * (not a NATO word and three digits, no such participant, this device), InvalidState (the
     * roster of this round is not confirmed; not a contact, or not present now; checked
     * already), Locked (three wrong codes in this round), AuthenticationFailed (their sealed code
     * does not open: REFUSED), Expired.
     */
    public RollcallState enterHeard(long index, String code, long now) {
        String checked = ItsMe.textArgument(code, "code");
        IntByReference state = new IntByReference();
        call(p -> ItsMe.library().itsme_rollcall_enter_heard(p, new SizeT(index), checked, now, state));
        RollcallState known = RollcallState.of(state.getValue());
        if (known == null) {
            throw ItsMeException.internal("unknown roll call state " + state.getValue());
        }
        return known;
    }
}

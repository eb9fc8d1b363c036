package org.itsme;

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
 * each device takes every contact of its store. The library does no I/O:
 * the host joins the relay's group room {@link #room}, sends what
 * {@link #nextOutgoing} gives (the HELLO at once and again after
 * {@link #peerJoined}, the SAID after {@link #confirmSaid}), feeds every
 * message of the room with its slot to {@link #receive}, and reports
 * {@link #peerLeft}. The owner, shown the {@link #participants}, confirms
 * them with the {@link #roster} read then ({@link #confirmRoster}), reads
 * {@link #code} aloud, says so, and types what each contact read
 * ({@link #enterHeard}).
 *
 * <p>A new participant starts a new round ({@link RollcallPhase#GATHERING}
 * again); checks made stay. A refused message changes nothing and the roll
 * call goes on. It lasts 10 minutes from its creation
 * ({@link ItsMeException.Expired} after that). The library keeps the roll
 * call's contact store alive. Calls on one roll call are serialised.
 */
public final class RollCall extends Handle<itsme_rollcall> {
    private RollCall(itsme_rollcall pointer) {
        super("roll call", pointer, ItsMe.library()::itsme_rollcall_free,
                p -> ItsMe.readDetail((out, cap, len) -> ItsMe.library().itsme_rollcall_last_error(p, out, cap, len)));
    }

    /**
     * One device of the roll call as this device sees it.
     *
     * @param index 0 for this device; the others in the order their HELLOs arrived
     * @param slot the relay slot it speaks from, null for this device
     * @param contactId the contact it is, null for this device and for a device that is not a contact
     * @param state what to show beside it
     * @param left whether its slot left the room (it stays in the roster)
     */
    public record Participant(long index, Integer slot, Long contactId, RollcallState state, boolean left) {
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
     * at {@code now}, with every contact of {@code store} but those awaiting the peer; the
     * HELLO's nonce and padding are drawn from {@code random} (tests only; null: the operating
     * system). Throws ItsMeException.InvalidArgument for a code with a typo or a store of more
     * than 2048 contacts, with the store's detail.
     */
    public static RollCall create(ContactStore store, String meetingCode, long now, DeterministicRandom random) {
        String checked = ItsMe.textArgument(meetingCode, "meeting code");
        return store.use(s -> DeterministicRandom.with(random, r -> {
            PointerByReference out = new PointerByReference();
            int code = ItsMe.library().itsme_rollcall_new(s, checked, r, now, out);
            return new RollCall(new itsme_rollcall(ItsMe.created(code, out, store.detail(s))));
        }));
    }

    /** A roll call at {@code now} drawing from the operating system. */
    public static RollCall create(ContactStore store, String meetingCode, long now) {
        return create(store, meetingCode, now, null);
    }

    /** A roll call now. */
    public static RollCall create(ContactStore store, String meetingCode) {
        return create(store, meetingCode, ItsMe.now(), null);
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

    /** The next message to send to the group room, removed from the queue; empty when there is none. */
    public byte[] nextOutgoing() {
        return bytes(ItsMeLibrary.ITSME_ROLLCALL_MESSAGE_MAX, ItsMe.library()::itsme_rollcall_next_outgoing);
    }

    /**
     * Feeds one message of the group room from relay slot {@code slot} (1 to 65535; the relay's
     * 2-byte prefix removed). A HELLO or SAID already taken is ignored. A refused message changes
     * nothing: MalformedMessage, InvalidArgument (a slot out of range, a HELLO of another time, a
     * 51st participant), InvalidState (a SAID of a device without a HELLO here, or of another
     * roster), InvalidKey (this device's own SAID), AuthenticationFailed (a contact's sealed code
     * that does not open against the code typed: the participant is REFUSED), Expired.
     */
    public void receive(byte[] message, int slot, long now) {
        byte[] checked = ItsMe.bytesArgument(message, "message");
        call(p -> ItsMe.library().itsme_rollcall_receive(p, checked, new SizeT(checked.length), slot, now));
    }

    /** The relay announced a new participant in {@code slot}: this device's HELLO is queued again. */
    public void peerJoined(int slot) {
        call(p -> ItsMe.library().itsme_rollcall_peer_joined(p, slot));
    }

    /** The participant of {@code slot} left the room: it is marked left and stays in the roster. */
    public void peerLeft(int slot) {
        call(p -> ItsMe.library().itsme_rollcall_peer_left(p, slot));
    }

    /** The hash of the roster held now (32 bytes): read it when showing the participants. */
    public byte[] roster() {
        return bytes(ItsMeLibrary.ITSME_ROLLCALL_ROSTER_BYTES, ItsMe.library()::itsme_rollcall_roster);
    }

    /**
     * The owner confirmed that the contacts listed are on their call: {@code roster} is the
     * {@link #roster} read when the list was shown. Draws this round's code from {@code random}
     * (tests only; null: the operating system). InvalidState if no one else has joined yet, if
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
     * present, is queued ({@link #nextOutgoing}). InvalidState before the roster is confirmed or
     * once this round's SAID went out.
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

    /** Every device in the roll call, this one first. */
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
                info.contact_id == 0 ? null : info.contact_id, state, info.left != 0);
    }

    /**
     * The owner typed {@code code} ("ECHO 042", the word in any case), the code participant
     * {@code index} read aloud. Compared at once if their sealed code is in, else when it
     * arrives; the outcome is recorded on the contact. Returns the participant's state
     * (NOT_YET while their sealed code is to come, WRONG: type again). Throws InvalidArgument
     * (not a NATO word and three digits, no such participant, this device), InvalidState (the
     * roster is not confirmed; not a contact; checked already in this round), Locked (three
     * wrong codes in this round), AuthenticationFailed (their sealed code does not open:
     * REFUSED), Expired.
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

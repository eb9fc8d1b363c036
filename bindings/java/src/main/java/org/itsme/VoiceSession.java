package org.itsme;

import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.LongByReference;
import com.sun.jna.ptr.PointerByReference;
import org.itsme.raw.ItsMeLibrary;
import org.itsme.raw.ItsMeLibrary.SizeT;
import org.itsme.raw.ItsMeLibrary.VoiceOutcome;
import org.itsme.raw.ItsMeLibrary.VoiceState;
import org.itsme.raw.ItsMeLibrary.itsme_voice;

/**
 * Voice verification during a call ({@code itsme_voice}): both people run a
 * session with each other's contact. {@link #create} plans it for the next
 * unused window, {@link #start} at the window; both read {@link #sessionId}
 * aloud; each {@link #select}s words in turn ({@link #status}); each reads
 * {@link #yourCode} aloud and {@link #check}s what they heard.
 *
 * <p>A host that embeds ItsMe in the call itself binds the session to that call
 * ({@link #create(ContactStore, long, byte[], long)}, docs/PROTOCOL.md 9.7): the session ID
 * and the codes take the binding, so a device bound to another call, or not bound, reads
 * another session ID, and codes repeated from another call do not match. Show beside the
 * session ID that the session is bound.
 */
public final class VoiceSession extends Handle<itsme_voice> {
    private VoiceSession(itsme_voice pointer) {
        super("voice session", pointer, ItsMe.library()::itsme_voice_free,
                p -> ItsMe.readDetail((out, cap, len) -> ItsMe.library().itsme_voice_last_error(p, out, cap, len)));
    }

    /** Whose word is next. */
    public enum Turn {
        /** Not selecting (before the start, or both words entered). */
        NONE,
        /** Choose one of your five words and say it. */
        MINE,
        /** Enter the word the other person said, from all 26. */
        THEIRS
    }

    /** The session's state and whose turn it is. */
    public record Status(VoiceState state, Turn turn) {
    }

    /** The session's window and the seconds from now until it begins (negative once it has) and until it ends. */
    public record Timing(long window, long startsIn, long endsIn) {
    }

    /** A code to say or to hear, with its device tag (0-99; ITSME_VOICE_TAG_UNKNOWN if unknown). */
    public record Code(String text, int tag) {
    }

    /**
     * Plans a session with contact {@code contactId} of {@code store} at {@code now}, bound to
     * the host's own call by {@code binding}: {@link ItsMeLibrary#ITSME_CALL_BINDING_MIN} to
     * {@link ItsMeLibrary#ITSME_CALL_BINDING_MAX} bytes that both devices of the call hold, the
     * same for the whole call, that the relay and the call's server never see (docs/PROTOCOL.md
     * 20.1 says which values qualify); null: not bound. Throws ItsMeException.InvalidArgument for
     * a binding of another length, ItsMeException.NotFound without such a contact, with the
     * store's detail.
     */
    public static VoiceSession create(ContactStore store, long contactId, byte[] binding, long now) {
        byte[] bound = ItsMe.callBinding(binding);
        SizeT boundLength = new SizeT(bound == null ? 0 : bound.length);
        return store.use(s -> {
            PointerByReference out = new PointerByReference();
            int code = ItsMe.library().itsme_voice_new(s, contactId, bound, boundLength, now, out);
            return new VoiceSession(new itsme_voice(ItsMe.created(code, out, store.detail(s))));
        });
    }

    /** Plans a session with contact {@code contactId} of {@code store} at {@code now}, not bound to a call. */
    public static VoiceSession create(ContactStore store, long contactId, long now) {
        return create(store, contactId, null, now);
    }

    /** The state and the turn. */
    public Status status() {
        IntByReference state = new IntByReference();
        IntByReference turn = new IntByReference();
        call(p -> ItsMe.library().itsme_voice_status(p, state, turn));
        VoiceState known = VoiceState.of(state.getValue());
        Turn whose = turn.getValue() == ItsMeLibrary.ITSME_VOICE_TURN_MINE ? Turn.MINE
                : turn.getValue() == ItsMeLibrary.ITSME_VOICE_TURN_THEIRS ? Turn.THEIRS : Turn.NONE;
        if (known == null) {
            throw ItsMeException.internal("unknown voice state " + state.getValue());
        }
        return new Status(known, whose);
    }

    /** The window and the countdowns at {@code now}. */
    public Timing timing(long now) {
        LongByReference window = new LongByReference();
        LongByReference startsIn = new LongByReference();
        LongByReference endsIn = new LongByReference();
        call(p -> ItsMe.library().itsme_voice_timing(p, now, window, startsIn, endsIn));
        return new Timing(window.getValue(), startsIn.getValue(), endsIn.getValue());
    }

    /** Starts the session (from 15 s before its window), using the window for the contact in the session's store. */
    public void start(long now) {
        call(p -> ItsMe.library().itsme_voice_start(p, now));
    }

    /** The session ID both read aloud ("KILO 07"). */
    public String sessionId() {
        return text(ItsMeLibrary.ITSME_VOICE_SESSION_ID_SIZE, ItsMe.library()::itsme_voice_session_id);
    }

    /** This person's five word indices (0-25), sorted; show them with {@link ItsMe#natoWord}. */
    public int[] words() {
        byte[] out = bytes(5, ItsMe.library()::itsme_voice_words);
        int[] words = new int[out.length];
        for (int i = 0; i < out.length; i++) {
            words[i] = Byte.toUnsignedInt(out[i]);
        }
        return words;
    }

    /** Enters the next selection: on my turn one of my words, on theirs the word heard. */
    public void select(int word, long now) {
        call(p -> ItsMe.library().itsme_voice_select(p, word, now));
    }

    /** "Your Code" to read aloud, and your device tag to say after it. */
    public Code yourCode() {
        return code(true);
    }

    /** "Their Code": what you should hear, and the tag they will say. */
    public Code theirCode() {
        return code(false);
    }

    private Code code(boolean yours) {
        IntByReference tag = new IntByReference();
        String text = text(ItsMeLibrary.ITSME_VOICE_CODE_SIZE, (p, out, cap, len) -> yours
                ? ItsMe.library().itsme_voice_your_code(p, out, cap, len, tag)
                : ItsMe.library().itsme_voice_their_code(p, out, cap, len, tag));
        return new Code(text, tag.getValue());
    }

    /** Checks what was heard (code text and tag), records the outcome on the contact and finishes. */
    public VoiceOutcome check(String heardCode, int heardTag, long now) {
        String checked = ItsMe.textArgument(heardCode, "heard code");
        IntByReference outcome = new IntByReference();
        call(p -> ItsMe.library().itsme_voice_check(p, checked, heardTag, now, outcome));
        VoiceOutcome known = VoiceOutcome.of(outcome.getValue());
        if (known == null) {
            throw ItsMeException.internal("unknown voice outcome " + outcome.getValue());
        }
        return known;
    }
}

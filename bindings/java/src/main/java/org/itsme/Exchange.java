package org.itsme;

import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.LongByReference;
import com.sun.jna.ptr.PointerByReference;
import org.itsme.raw.ItsMeLibrary;
import org.itsme.raw.ItsMeLibrary.ExchangeMethod;
import org.itsme.raw.ItsMeLibrary.ExchangeState;
import org.itsme.raw.ItsMeLibrary.SizeT;
import org.itsme.raw.ItsMeLibrary.itsme_exchange;
import org.itsme.raw.ItsMeLibrary.itsme_random;

/**
 * A contact exchange in person ({@code itsme_exchange}). By QR code: each side
 * shows {@link #nextOutgoing} as a QR code, the other scans it into
 * {@link #receive}; both then show the same {@link #sas}, which the two people
 * compare aloud before each side {@link #confirm}s (or {@link #reject}s).
 * An exchange is made with its identity and a contact store of that identity,
 * and saves the new contact there; the library keeps both alive while the
 * exchange lives.
 */
public final class Exchange extends Handle<itsme_exchange> {
    private Exchange(itsme_exchange pointer) {
        super("exchange", pointer, ItsMe.library()::itsme_exchange_free,
                p -> ItsMe.readDetail((out, cap, len) -> ItsMe.library().itsme_exchange_last_error(p, out, cap, len)));
    }

    /** The state of an exchange and its flags (ITSME_EXCHANGE_FLAG_*). */
    public record Status(ExchangeState state, int flags) {
        /** Whether the flag (an ITSME_EXCHANGE_FLAG_* value) is set. */
        public boolean has(int flag) {
            return (flags & flag) != 0;
        }
    }

    /**
     * Starts a QR exchange for {@code identity} at {@code now}, saving to
     * {@code store}, a contact store of that identity (else
     * {@link ItsMeException.WrongIdentity}).
     */
    public static Exchange qr(Identity identity, ContactStore store, long now) {
        return identity.use(i -> store.use(s -> {
            PointerByReference out = new PointerByReference();
            int code = ItsMe.library().itsme_exchange_new_qr(i, s, (itsme_random) null, now, out);
            return new Exchange(new itsme_exchange(ItsMe.created(code, out, identity.detail(i))));
        }));
    }

    /** Starts a QR exchange now. */
    public static Exchange qr(Identity identity, ContactStore store) {
        return qr(identity, store, ItsMe.now());
    }

    /** The state and flags. */
    public Status status() {
        IntByReference state = new IntByReference();
        IntByReference flags = new IntByReference();
        call(p -> ItsMe.library().itsme_exchange_status(p, state, flags));
        ExchangeState known = ExchangeState.of(state.getValue());
        if (known == null) {
            throw ItsMeException.internal("unknown exchange state " + state.getValue());
        }
        return new Status(known, flags.getValue());
    }

    /** How the exchange was started. */
    public ExchangeMethod method() {
        IntByReference method = new IntByReference();
        call(p -> ItsMe.library().itsme_exchange_get_method(p, method));
        return ExchangeMethod.of(method.getValue());
    }

    /**
     * The next bytes to send, empty when there is nothing. QR: this side's payload
     * text (ASCII), to show as a QR code until the exchange ends; it is not consumed.
     */
    public byte[] nextOutgoing() {
        return bytes(ItsMeLibrary.ITSME_QR_PAYLOAD_MAX, ItsMe.library()::itsme_exchange_next_outgoing);
    }

    /** Feeds the peer's bytes (the scanned QR text) at {@code now}. */
    public void receive(byte[] bytes, long now) {
        byte[] checked = ItsMe.bytesArgument(bytes, "bytes");
        call(p -> ItsMe.library().itsme_exchange_receive(p, checked, new SizeT(checked.length), now));
    }

    /** Feeds the peer's bytes now. */
    public void receive(byte[] bytes) {
        receive(bytes, ItsMe.now());
    }

    /** The short authentication string both people compare ("ECHO 0042"). */
    public String sas() {
        return text(ItsMeLibrary.ITSME_SHORT_CODE_SIZE, ItsMe.library()::itsme_exchange_sas);
    }

    /** The peer's name, as the peer sent it. */
    public String peerName() {
        return text(ItsMeLibrary.ITSME_NAME_MAX_BYTES + 1, ItsMe.library()::itsme_exchange_peer_name);
    }

    /** The peer's fingerprint. */
    public String peerFingerprint() {
        return text(ItsMeLibrary.ITSME_FINGERPRINT_SIZE, ItsMe.library()::itsme_exchange_peer_fingerprint);
    }

    /** The peer's identity public key. */
    public byte[] peerPublicKey() {
        return bytes(ItsMeLibrary.ITSME_PUBLIC_KEY_BYTES, ItsMe.library()::itsme_exchange_peer_public_key);
    }

    private long contactCall(ContactCall body) {
        LongByReference id = new LongByReference();
        call(p -> body.call(p, id));
        return id.getValue();
    }

    private interface ContactCall {
        int call(itsme_exchange exchange, LongByReference id);
    }

    /**
     * Stores the new contact unverified in the exchange's store; returns its id
     * (a known contact's id if it exists).
     */
    public long save(long now) {
        return contactCall((p, id) -> ItsMe.library().itsme_exchange_save(p, now, id));
    }

    /**
     * The people said the SAS matches: saves if needed and decides; QR: the contact
     * is verified at once (state CONFIRMED). Returns the contact's id.
     */
    public long confirm(long now) {
        return contactCall((p, id) -> ItsMe.library().itsme_exchange_confirm(p, now, id));
    }

    /** Confirms now. */
    public long confirm() {
        return confirm(ItsMe.now());
    }

    /**
     * Applies the peer's decision after this side confirmed (state AWAITING_DECISION;
     * Bluetooth, invite, real-time): the contact's id, or 0 if the peer rejected.
     */
    public long settle(long now) {
        return contactCall((p, id) -> ItsMe.library().itsme_exchange_settle(p, now, id));
    }

    /** The SAS differs or the person gave up: deletes what save added (a known contact is left as it was). */
    public void reject() {
        call(p -> ItsMe.library().itsme_exchange_reject(p));
    }
}

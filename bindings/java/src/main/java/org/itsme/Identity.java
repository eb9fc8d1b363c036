package org.itsme;

import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.LongByReference;
import com.sun.jna.ptr.PointerByReference;
import org.itsme.raw.ItsMeLibrary;
import org.itsme.raw.ItsMeLibrary.itsme_identity;

/** This person's identity: its key pair, name and PIN ({@code itsme_identity}). */
public final class Identity extends Handle<itsme_identity> {
    private Identity(itsme_identity pointer) {
        super("identity", pointer, ItsMe.library()::itsme_identity_free,
                p -> ItsMe.readDetail((out, cap, len) -> ItsMe.library().itsme_identity_last_error(p, out, cap, len)));
    }

    /** How many failed PIN attempts are counted, and how long until the next is allowed. */
    public record PinStatus(long failures, long waitSeconds) {
    }

    /** Creates a new identity named {@code name} in {@code store} (ITSME_E_ALREADY_EXISTS if it holds one). */
    public static Identity create(SecretStore store, String name) {
        String checked = ItsMe.textArgument(name, "name");
        return store.use(s -> {
            PointerByReference out = new PointerByReference();
            int code = ItsMe.library().itsme_identity_create(s, checked, out);
            return new Identity(new itsme_identity(ItsMe.created(code, out, store.detail(s))));
        });
    }

    /**
     * {@link #create} drawing the identity's keys from {@code random} (null: the operating
     * system), for tests and test vectors. A test-build function (include/itsme_testing.h).
     */
    public static Identity createWithRandom(SecretStore store, String name, DeterministicRandom random) {
        String checked = ItsMe.textArgument(name, "name");
        return store.use(s -> DeterministicRandom.with(random, r -> {
            PointerByReference out = new PointerByReference();
            int code = ItsMe.testing().itsme_identity_create_with_random(s, checked, r, out);
            return new Identity(new itsme_identity(ItsMe.created(code, out, store.detail(s))));
        }));
    }

    /** Loads the identity {@code store} holds (ITSME_E_NOT_FOUND if none). */
    public static Identity load(SecretStore store) {
        return store.use(s -> {
            PointerByReference out = new PointerByReference();
            int code = ItsMe.library().itsme_identity_load(s, out);
            return new Identity(new itsme_identity(ItsMe.created(code, out, store.detail(s))));
        });
    }

    /** The fingerprint people compare: 16 characters. */
    public String fingerprint() {
        return text(ItsMeLibrary.ITSME_FINGERPRINT_SIZE, ItsMe.library()::itsme_identity_fingerprint);
    }

    /** The identity public key (32 bytes). */
    public byte[] publicKey() {
        return bytes(ItsMeLibrary.ITSME_PUBLIC_KEY_BYTES, ItsMe.library()::itsme_identity_public_key);
    }

    /** The display name. */
    public String name() {
        return text(ItsMeLibrary.ITSME_NAME_MAX_BYTES + 1, ItsMe.library()::itsme_identity_name);
    }

    /** Renames the identity. */
    public void setName(String name) {
        String checked = ItsMe.textArgument(name, "name");
        call(p -> ItsMe.library().itsme_identity_set_name(p, checked));
    }

    /** Sets the first PIN: six ASCII digits (ITSME_E_INVALID_PIN otherwise, ITSME_E_ALREADY_EXISTS if set). */
    public void setPin(String pin) {
        String checked = ItsMe.textArgument(pin, "pin");
        call(p -> ItsMe.library().itsme_pin_set(p, checked));
    }

    /** Checks a PIN at {@code now}: raises WrongPin (counted), InvalidPin, Locked or NotFound. */
    public void verifyPin(String pin, long now) {
        String checked = ItsMe.textArgument(pin, "pin");
        call(p -> ItsMe.library().itsme_pin_verify(p, checked, now));
    }

    /** Checks a PIN now. */
    public void verifyPin(String pin) {
        verifyPin(pin, ItsMe.now());
    }

    /** Replaces the PIN, checking the old one as {@link #verifyPin} does. */
    public void changePin(String oldPin, String newPin, long now) {
        String oldChecked = ItsMe.textArgument(oldPin, "old pin");
        String newChecked = ItsMe.textArgument(newPin, "new pin");
        call(p -> ItsMe.library().itsme_pin_change(p, oldChecked, newChecked, now));
    }

    /** The failed attempts counted and the seconds to wait, at {@code now}. */
    public PinStatus pinStatus(long now) {
        IntByReference failures = new IntByReference();
        LongByReference wait = new LongByReference();
        call(p -> ItsMe.library().itsme_pin_status(p, now, failures, wait));
        return new PinStatus(Integer.toUnsignedLong(failures.getValue()), wait.getValue());
    }

    /** The PIN status now. */
    public PinStatus pinStatus() {
        return pinStatus(ItsMe.now());
    }
}

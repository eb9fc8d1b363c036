package org.itsme;

import com.sun.jna.ptr.ByteByReference;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.LongByReference;
import java.util.Arrays;
import java.util.Objects;
import org.itsme.raw.ItsMeLibrary;
import org.itsme.raw.ItsMeLibrary.ExchangeMethod;
import org.itsme.raw.ItsMeLibrary.VerificationState;
import org.itsme.raw.ItsMeLibrary.itsme_contact;

/**
 * A contact as read from a {@link ContactStore}: a snapshot (the library's
 * {@code itsme_contact} is read whole and released at once).
 *
 * @param id the contact's id in its store
 * @param name the display name
 * @param fingerprint 16 uppercase hex digits
 * @param publicKey the identity public key, null for an unauthenticated (version-5) contact
 * @param state its verification state
 * @param acknowledged whether a degradation was acknowledged
 * @param method how the contact was exchanged
 * @param createdAt when it was added (unix seconds)
 * @param verifiedAt when it was last verified (unix seconds), null if never
 * @param note the note, empty if none
 */
public record Contact(long id, String name, String fingerprint, byte[] publicKey, VerificationState state,
        boolean acknowledged, ExchangeMethod method, long createdAt, Long verifiedAt, String note) {

    /** Reads every field of a contact handle, then frees it. */
    static Contact read(itsme_contact handle) {
        ItsMeLibrary lib = ItsMe.library();
        try {
            LongByReference id = new LongByReference();
            ItsMe.check(lib.itsme_contact_id(handle, id), null);
            String name = ItsMe.text((out, cap, len) -> lib.itsme_contact_name(handle, out, cap, len),
                    ItsMeLibrary.ITSME_NAME_MAX_BYTES + 1, null);
            String fingerprint = ItsMe.text((out, cap, len) -> lib.itsme_contact_fingerprint(handle, out, cap, len),
                    ItsMeLibrary.ITSME_FINGERPRINT_SIZE, null);
            byte[] publicKey;
            try {
                publicKey = ItsMe.fill((out, cap, len) -> lib.itsme_contact_public_key(handle, out, cap, len),
                        ItsMeLibrary.ITSME_PUBLIC_KEY_BYTES, null);
            } catch (ItsMeException.NotFound unauthenticated) {
                publicKey = null;
            }
            IntByReference state = new IntByReference();
            ByteByReference acknowledged = new ByteByReference();
            ItsMe.check(lib.itsme_contact_state(handle, state, acknowledged), null);
            IntByReference method = new IntByReference();
            ItsMe.check(lib.itsme_contact_exchange_method(handle, method), null);
            LongByReference created = new LongByReference();
            ItsMe.check(lib.itsme_contact_created_at(handle, created), null);
            Long verifiedAt;
            LongByReference verified = new LongByReference();
            int code = lib.itsme_contact_verified_at(handle, verified);
            if (code == ItsMeLibrary.ITSME_E_NOT_FOUND) {
                verifiedAt = null;
            } else {
                ItsMe.check(code, null);
                verifiedAt = verified.getValue();
            }
            String note = ItsMe.text((out, cap, len) -> lib.itsme_contact_note(handle, out, cap, len), 64, null);
            return new Contact(id.getValue(), name, fingerprint, publicKey, known(VerificationState.of(state.getValue())),
                    acknowledged.getValue() != 0, known(ExchangeMethod.of(method.getValue())), created.getValue(),
                    verifiedAt, note);
        } finally {
            lib.itsme_contact_free(handle);
        }
    }

    private static <T> T known(T value) {
        if (value == null) {
            throw ItsMeException.internal("library returned a value this binding does not know");
        }
        return value;
    }

    @Override
    public byte[] publicKey() {
        return publicKey == null ? null : publicKey.clone();
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof Contact c && id == c.id && acknowledged == c.acknowledged && createdAt == c.createdAt
                && name.equals(c.name) && fingerprint.equals(c.fingerprint) && Arrays.equals(publicKey, c.publicKey)
                && state == c.state && method == c.method && Objects.equals(verifiedAt, c.verifiedAt)
                && note.equals(c.note);
    }

    @Override
    public int hashCode() {
        return Objects.hash(id, name, fingerprint, Arrays.hashCode(publicKey), state, acknowledged, method, createdAt,
                verifiedAt, note);
    }

    @Override
    public String toString() {
        return "Contact[" + id + ", " + name + ", " + fingerprint + ", " + state + "]";
    }
}

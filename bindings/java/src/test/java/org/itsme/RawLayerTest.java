package org.itsme;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.jna.Native;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.PointerByReference;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.itsme.raw.ItsMeLibrary;
import org.itsme.raw.ItsMeLibrary.SizeT;
import org.itsme.raw.ItsMeLibrary.SizeTByReference;
import org.itsme.raw.ItsMeLibrary.itsme_identity;
import org.itsme.raw.ItsMeLibrary.itsme_secret_store;
import org.itsme.raw.ItsMeLibrary.itsme_secret_store_callbacks;
import org.junit.jupiter.api.Test;

/** The generated layer used directly: a callback table, buffers, handles. */
class RawLayerTest {
    private final ItsMeLibrary lib = ItsMe.library();

    /** A host secret store in a map, through the generated callback table. */
    private static final class MapStore {
        final Map<String, byte[]> items = new HashMap<>();
        final List<String> calls = new java.util.ArrayList<>();
        boolean destroyed;
        final itsme_secret_store_callbacks table = new itsme_secret_store_callbacks();

        MapStore() {
            table.get = (ctx, name, out, cap, outLen) -> {
                String key = name.getString(0, "UTF-8");
                calls.add("get " + key);
                byte[] value = items.get(key);
                if (value == null) {
                    return ItsMeLibrary.ITSME_E_NOT_FOUND;
                }
                setSize(outLen, value.length);
                if (cap.longValue() < value.length) {
                    return ItsMeLibrary.ITSME_E_BUFFER_TOO_SMALL;
                }
                out.write(0, value, 0, value.length);
                return ItsMeLibrary.ITSME_OK;
            };
            table.put = (ctx, name, value, len, accessibility) -> {
                String key = name.getString(0, "UTF-8");
                calls.add("put " + key);
                items.put(key, value.getByteArray(0, (int) len.longValue()));
                return ItsMeLibrary.ITSME_OK;
            };
            table.remove = (ctx, name) -> {
                String key = name.getString(0, "UTF-8");
                calls.add("remove " + key);
                return items.remove(key) == null ? ItsMeLibrary.ITSME_E_NOT_FOUND : ItsMeLibrary.ITSME_OK;
            };
            table.destroy = ctx -> destroyed = true;
        }

        private static void setSize(Pointer target, long value) {
            if (Native.SIZE_T_SIZE == 8) {
                target.setLong(0, value);
            } else {
                target.setInt(0, (int) value);
            }
        }
    }

    private String fingerprint(itsme_identity identity) {
        byte[] out = new byte[ItsMeLibrary.ITSME_FINGERPRINT_SIZE];
        SizeTByReference length = new SizeTByReference();
        assertEquals(ItsMeLibrary.ITSME_OK, lib.itsme_identity_fingerprint(identity, out, new SizeT(out.length), length));
        assertEquals(out.length, length.getValue());
        return new String(out, 0, out.length - 1, StandardCharsets.US_ASCII);
    }

    @Test
    void hostSecretStoreThroughTheGeneratedCallbackTable() {
        MapStore host = new MapStore();
        PointerByReference out = new PointerByReference();
        assertEquals(ItsMeLibrary.ITSME_OK, lib.itsme_secret_store_new_callbacks(host.table, out));
        itsme_secret_store store = new itsme_secret_store(out.getValue());

        PointerByReference created = new PointerByReference();
        assertEquals(ItsMeLibrary.ITSME_OK, lib.itsme_identity_create(store, "Carol", created));
        itsme_identity carol = new itsme_identity(created.getValue());
        String fingerprint = fingerprint(carol);
        lib.itsme_identity_free(carol);
        assertFalse(host.items.isEmpty());
        assertTrue(host.calls.stream().anyMatch(call -> call.startsWith("put ")), host.calls.toString());

        PointerByReference loaded = new PointerByReference();
        assertEquals(ItsMeLibrary.ITSME_OK, lib.itsme_identity_load(store, loaded));
        itsme_identity again = new itsme_identity(loaded.getValue());
        assertEquals(fingerprint, fingerprint(again));
        assertTrue(host.calls.stream().anyMatch(call -> call.startsWith("get ")), host.calls.toString());

        // A second identity in the same store is refused.
        PointerByReference second = new PointerByReference();
        assertEquals(ItsMeLibrary.ITSME_E_ALREADY_EXISTS, lib.itsme_identity_create(store, "Dave", second));
        assertEquals(null, second.getValue());

        lib.itsme_identity_free(again);
        assertFalse(host.destroyed);
        lib.itsme_secret_store_free(store);
        assertTrue(host.destroyed);
    }

    @Test
    void bufferTooSmallGivesTheSizeNeeded() {
        try (SecretStore secrets = SecretStore.memory(); Identity alice = Identity.create(secrets, "Alice")) {
            alice.use(identity -> {
                // out NULL with cap 0 asks for the size.
                SizeTByReference length = new SizeTByReference();
                assertEquals(ItsMeLibrary.ITSME_E_BUFFER_TOO_SMALL,
                        lib.itsme_identity_name(identity, null, new SizeT(0), length));
                assertEquals("Alice".length() + 1, length.getValue());
                length.setValue(0);
                byte[] small = new byte[2];
                assertEquals(ItsMeLibrary.ITSME_E_BUFFER_TOO_SMALL,
                        lib.itsme_identity_name(identity, small, new SizeT(small.length), length));
                assertEquals("Alice".length() + 1, length.getValue());
                return null;
            });
        }
    }

    @Test
    void resultMessagesAndTheResultEnumAgree() {
        for (ItsMeLibrary.Result result : ItsMeLibrary.Result.values()) {
            assertEquals(result, ItsMeLibrary.Result.of(result.value()));
            assertFalse(ItsMe.resultMessage(result.value()).isEmpty());
        }
        assertEquals(null, ItsMeLibrary.Result.of(-1));
        ItsMeException unknown = ItsMeException.of(9999, "");
        assertEquals(ItsMeException.class, unknown.getClass());
        assertEquals(null, unknown.result());
    }
}

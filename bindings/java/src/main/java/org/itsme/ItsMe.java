package org.itsme;

import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.Arrays;
import java.util.function.Supplier;
import org.itsme.raw.ItsMeLibrary;
import org.itsme.raw.ItsMeLibrary.SizeT;
import org.itsme.raw.ItsMeLibrary.SizeTByReference;
import org.itsme.raw.ItsMeTestingLibrary;

/**
 * The loaded library, and what needs no handle.
 *
 * <p>The library is loaded on first use: the file named by the system
 * property {@code itsme.library} or the environment variable
 * {@code ITSME_LIBRARY}, else {@code itsme} looked up by JNA
 * ({@code jna.library.path}, then the system's search path, LD_LIBRARY_PATH
 * included). It is initialised ({@code itsme_init}) and refused when its
 * MAJOR.MINOR differs from the header this binding was generated from.
 */
public final class ItsMe {
    private static ItsMeLibrary library;
    private static ItsMeTestingLibrary testing;

    private ItsMe() {
    }

    /** The library this binding loads: a path, or the name "itsme" for JNA to look up. */
    public static String libraryName() {
        String name = System.getProperty("itsme.library");
        if (name == null || name.isEmpty()) {
            name = System.getenv("ITSME_LIBRARY");
        }
        return name == null || name.isEmpty() ? "itsme" : name;
    }

    /** The raw interface, loaded and initialised. */
    public static synchronized ItsMeLibrary library() {
        if (library == null) {
            String name = libraryName();
            ItsMeLibrary loaded = ItsMeLibrary.load(name);
            int number = loaded.itsme_version_number();
            if (number / 100 != ItsMeLibrary.ITSME_VERSION_NUMBER / 100) {
                throw new UnsatisfiedLinkError("libitsme " + loaded.itsme_version_string() + " (" + name
                        + ") is not the " + ItsMeLibrary.ITSME_VERSION_MAJOR + "." + ItsMeLibrary.ITSME_VERSION_MINOR
                        + " this binding was written for");
            }
            check(loaded.itsme_init(), null);
            library = loaded;
        }
        return library;
    }

    /**
     * The test-only functions (include/itsme_testing.h) of the library loaded: only a test build
     * exports them; against a release build a call throws UnsatisfiedLinkError naming the function.
     */
    static synchronized ItsMeTestingLibrary testing() {
        if (testing == null) {
            library();
            testing = ItsMeTestingLibrary.load(libraryName());
        }
        return testing;
    }

    /** The version of the library loaded, "MAJOR.MINOR.PATCH". */
    public static String version() {
        return library().itsme_version_string();
    }

    /** The NATO word of index 0 to 25 ("ALFA" ... "ZULU"). */
    public static String natoWord(int index) {
        String word = library().itsme_nato_word(index);
        if (word == null) {
            throw ItsMeException.of(ItsMeLibrary.ITSME_E_INVALID_ARGUMENT, "no NATO word of index " + index);
        }
        return word;
    }

    /** The library's static English text for a result code. */
    public static String resultMessage(int code) {
        return library().itsme_result_message(code);
    }

    /** The current unix time, in seconds: the {@code now} of the calls that take none. */
    public static long now() {
        return Instant.now().getEpochSecond();
    }

    // --- shared machinery ------------------------------------------------

    /** A C call that fills (out, cap, out_len). */
    interface BufferCall {
        int call(byte[] out, SizeT cap, SizeTByReference outLen);
    }

    /** Raises the exception for {@code code} unless it is ITSME_OK. */
    static void check(int code, Supplier<String> detail) {
        if (code != ItsMeLibrary.ITSME_OK) {
            throw ItsMeException.of(code, detail == null ? "" : detail.get());
        }
    }

    /** The detail of this thread's last failed call that had no handle (itsme_last_error). */
    static String threadLastError() {
        return readDetail((out, cap, len) -> library().itsme_last_error(out, cap, len));
    }

    /** Runs {@code call} with the too-small protocol: the bytes written (*out_len of them). */
    static byte[] fill(BufferCall call, int guess, Supplier<String> detail) {
        int cap = Math.max(guess, 1);
        for (int attempt = 0; ; attempt++) {
            byte[] out = new byte[cap];
            SizeTByReference length = new SizeTByReference();
            int code = call.call(out, new SizeT(cap), length);
            long needed = length.getValue();
            if (code == ItsMeLibrary.ITSME_E_BUFFER_TOO_SMALL && needed > cap && needed <= Integer.MAX_VALUE
                    && attempt < 3) {
                cap = (int) needed;
                continue;
            }
            check(code, detail);
            if (needed < 0 || needed > cap) {
                throw ItsMeException.internal("library reported a length of " + needed);
            }
            return Arrays.copyOf(out, (int) needed);
        }
    }

    /** A NUL-terminated UTF-8 output. */
    static String text(BufferCall call, int guess, Supplier<String> detail) {
        byte[] bytes = fill(call, guess, detail);
        if (bytes.length == 0 || bytes[bytes.length - 1] != 0) {
            throw ItsMeException.internal("library returned a text without its NUL");
        }
        return new String(bytes, 0, bytes.length - 1, StandardCharsets.UTF_8);
    }

    /** The handle a constructor wrote, once its result is checked: never null. */
    static com.sun.jna.Pointer created(int code, com.sun.jna.ptr.PointerByReference out, Supplier<String> detail) {
        check(code, detail);
        if (out.getValue() == null) {
            throw ItsMeException.internal("library returned no handle");
        }
        return out.getValue();
    }

    /** A last-error message; empty if it cannot be read. */
    static String readDetail(BufferCall call) {
        try {
            return text(call, 256, null);
        } catch (RuntimeException e) {
            return "";
        }
    }

    /** A text argument: refused with a NUL in it (C would cut it there). */
    static String textArgument(String value, String what) {
        if (value == null) {
            throw ItsMeException.of(ItsMeLibrary.ITSME_E_INVALID_ARGUMENT, what + " is null");
        }
        if (value.indexOf('\0') >= 0) {
            throw ItsMeException.of(ItsMeLibrary.ITSME_E_INVALID_ARGUMENT, what + " contains a NUL character");
        }
        return value;
    }

    /** A bytes argument: never null. */
    static byte[] bytesArgument(byte[] value, String what) {
        if (value == null) {
            throw ItsMeException.of(ItsMeLibrary.ITSME_E_INVALID_ARGUMENT, what + " is null");
        }
        return value;
    }

    /**
     * A call binding argument (docs/PROTOCOL.md 9.7, 11.4, 20.1): a copy of it, or null (with
     * length 0) for none. The library checks the length ({@link ItsMeLibrary#ITSME_CALL_BINDING_MIN}
     * to {@link ItsMeLibrary#ITSME_CALL_BINDING_MAX} bytes); an empty array is refused here, since
     * JNA may pass it as NULL, which the library reads as "not bound".
     */
    static byte[] callBinding(byte[] binding) {
        if (binding != null && binding.length == 0) {
            throw ItsMeException.of(ItsMeLibrary.ITSME_E_INVALID_ARGUMENT,
                    "a call binding is " + ItsMeLibrary.ITSME_CALL_BINDING_MIN + " to "
                            + ItsMeLibrary.ITSME_CALL_BINDING_MAX + " bytes, not 0");
        }
        return binding == null ? null : binding.clone();
    }
}

package org.itsme;

import com.sun.jna.ptr.PointerByReference;
import org.itsme.raw.ItsMeLibrary.SizeT;
import org.itsme.raw.ItsMeLibrary.itsme_random;

/**
 * A deterministic random stream under a 32-byte seed ({@code itsme_random}),
 * for tests and the protocol's test vectors only: the same seed replays the
 * same bytes. Only a test build of the library makes one
 * (include/itsme_testing.h; against a release build {@link #of} throws
 * UnsatisfiedLinkError naming the function). <b>Never use one for real
 * keys</b>: anyone who knows the seed knows every key drawn from it. Calls
 * drawing from one source are serialised.
 */
public final class DeterministicRandom extends Handle<itsme_random> {
    private DeterministicRandom(itsme_random pointer) {
        super("random source", pointer, ItsMe.library()::itsme_random_free, null);
    }

    /** A stream seeded with {@code seed}: exactly 32 bytes (ItsMeException.InvalidArgument otherwise). */
    public static DeterministicRandom of(byte[] seed) {
        byte[] checked = ItsMe.bytesArgument(seed, "seed");
        PointerByReference out = new PointerByReference();
        int code = ItsMe.testing().itsme_random_new_deterministic(checked, new SizeT(checked.length), out);
        return new DeterministicRandom(new itsme_random(ItsMe.created(code, out, ItsMe::threadLastError)));
    }

    /** Runs {@code body} with the raw source of {@code random}, or null (the operating system's) for null. */
    static <T> T with(DeterministicRandom random, java.util.function.Function<itsme_random, T> body) {
        return random == null ? body.apply(null) : random.use(body);
    }
}

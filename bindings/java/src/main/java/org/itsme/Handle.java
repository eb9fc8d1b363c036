package org.itsme;

import com.sun.jna.PointerType;
import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * A library handle: closed exactly once, by {@link #close} (any number of
 * calls) or, if it is never closed, when it is garbage collected. A call
 * after close raises {@link IllegalStateException}; calls on one handle are
 * serialised (the library's handles must not be used by two threads at once).
 */
abstract class Handle<P extends PointerType> implements AutoCloseable {
    private static final Cleaner CLEANER = Cleaner.create();

    private final String kind;
    private final Function<P, String> lastError;
    private final Cleaner.Cleanable cleanable;
    private P pointer;

    /**
     * @param kind what the handle is, for messages
     * @param pointer the handle the library gave (never null)
     * @param release its _free function
     * @param lastError its _last_error reader, or null for a handle without one
     */
    Handle(String kind, P pointer, Consumer<P> release, Function<P, String> lastError) {
        if (pointer == null || pointer.getPointer() == null) {
            throw ItsMeException.internal("library returned no " + kind);
        }
        this.kind = kind;
        this.pointer = pointer;
        this.lastError = lastError;
        this.cleanable = CLEANER.register(this, new Release<>(pointer, release));
    }

    /** The release action; holds no reference to the handle object. */
    private static final class Release<P> implements Runnable {
        private final P pointer;
        private final Consumer<P> release;

        Release(P pointer, Consumer<P> release) {
            this.pointer = pointer;
            this.release = release;
        }

        @Override
        public void run() {
            release.accept(pointer);
        }
    }

    /** Whether {@link #close} has been called. */
    public final synchronized boolean isClosed() {
        return pointer == null;
    }

    /** Releases the handle; later calls do nothing. */
    @Override
    public final synchronized void close() {
        if (pointer != null) {
            pointer = null;
            cleanable.clean();
        }
    }

    /** The detail of the last failed call made on this handle (empty when there is none). */
    public final synchronized String lastError() {
        return lastError == null ? "" : lastError.apply(open());
    }

    final P open() {
        if (pointer == null) {
            throw new IllegalStateException("this " + kind + " is closed");
        }
        return pointer;
    }

    /** Runs {@code body} on the open handle, which stays alive and unused by others meanwhile. */
    final synchronized <T> T use(Function<P, T> body) {
        try {
            return body.apply(open());
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** A C call on the handle whose failure raises, with this handle's detail. */
    final void call(Function<P, Integer> body) {
        use(p -> {
            ItsMe.check(body.apply(p), detail(p));
            return null;
        });
    }

    /** A text output of the handle. */
    final String text(int guess, CallOn<P> body) {
        return use(p -> ItsMe.text((out, cap, len) -> body.call(p, out, cap, len), guess, detail(p)));
    }

    /** A byte-string output of the handle. */
    final byte[] bytes(int guess, CallOn<P> body) {
        return use(p -> ItsMe.fill((out, cap, len) -> body.call(p, out, cap, len), guess, detail(p)));
    }

    final Supplier<String> detail(P p) {
        return lastError == null ? null : () -> lastError.apply(p);
    }

    /** A C call on the handle that fills (out, cap, out_len). */
    interface CallOn<P> {
        int call(P handle, byte[] out, org.itsme.raw.ItsMeLibrary.SizeT cap,
                org.itsme.raw.ItsMeLibrary.SizeTByReference outLen);
    }
}

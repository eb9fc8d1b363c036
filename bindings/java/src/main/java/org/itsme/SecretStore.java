package org.itsme;

import com.sun.jna.ptr.PointerByReference;
import java.nio.file.Path;
import org.itsme.raw.ItsMeLibrary;
import org.itsme.raw.ItsMeLibrary.itsme_secret_store;

/** Where an identity's secrets are kept ({@code itsme_secret_store}). */
public final class SecretStore extends Handle<itsme_secret_store> {
    private SecretStore(itsme_secret_store pointer) {
        super("secret store", pointer, ItsMe.library()::itsme_secret_store_free,
                p -> ItsMe.readDetail((out, cap, len) -> ItsMe.library().itsme_secret_store_last_error(p, out, cap, len)));
    }

    /** A store in guarded memory, wiped when it is closed: for tests and examples. */
    public static SecretStore memory() {
        ItsMeLibrary lib = ItsMe.library();
        PointerByReference out = new PointerByReference();
        int code = lib.itsme_secret_store_new_memory(out);
        return new SecretStore(new itsme_secret_store(ItsMe.created(code, out, ItsMe::threadLastError)));
    }

    /** The file store in {@code directory} (created if missing). */
    public static SecretStore openFile(Path directory) {
        ItsMeLibrary lib = ItsMe.library();
        PointerByReference out = new PointerByReference();
        int code = lib.itsme_secret_store_open_file(ItsMe.textArgument(directory.toString(), "directory"), out);
        return new SecretStore(new itsme_secret_store(ItsMe.created(code, out, ItsMe::threadLastError)));
    }
}

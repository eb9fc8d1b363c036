package org.itsme;

import com.sun.jna.ptr.ByteByReference;
import com.sun.jna.ptr.PointerByReference;
import java.nio.file.Path;
import org.itsme.raw.ItsMeLibrary;
import org.itsme.raw.ItsMeLibrary.SizeT;
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

    /**
     * Wraps a new, empty file store in {@code directory} under {@code passphrase} (1 to
     * {@link ItsMeLibrary#ITSME_PASSPHRASE_MAX_BYTES} bytes): every item is then sealed under a key
     * Argon2id derives from it (256 MiB, about a second: this call and {@link #openWrappedFile}
     * take that long); the wrap file is written beside the directory, named after it with
     * {@code .wrap} appended (docs/STORAGE.md). The library wipes its copy of the passphrase; wipe
     * yours ({@code Arrays.fill}) when done. Throws ItsMeException.AlreadyExists if the store is
     * wrapped already or holds items.
     */
    public static SecretStore createWrappedFile(Path directory, byte[] passphrase) {
        ItsMeLibrary lib = ItsMe.library();
        String path = ItsMe.textArgument(directory.toString(), "directory");
        byte[] secret = ItsMe.bytesArgument(passphrase, "passphrase");
        PointerByReference out = new PointerByReference();
        int code = lib.itsme_secret_store_create_file_passphrase(path, secret, new SizeT(secret.length), out);
        return new SecretStore(new itsme_secret_store(ItsMe.created(code, out, ItsMe::threadLastError)));
    }

    /**
     * Opens the file store in {@code directory} wrapped by {@code passphrase}. Throws
     * ItsMeException.AuthenticationFailed for a wrong passphrase, ItsMeException.NotFound if the
     * store is not wrapped, ItsMeException.CorruptData for a damaged wrap file.
     */
    public static SecretStore openWrappedFile(Path directory, byte[] passphrase) {
        ItsMeLibrary lib = ItsMe.library();
        String path = ItsMe.textArgument(directory.toString(), "directory");
        byte[] secret = ItsMe.bytesArgument(passphrase, "passphrase");
        PointerByReference out = new PointerByReference();
        int code = lib.itsme_secret_store_open_file_passphrase(path, secret, new SizeT(secret.length), out);
        return new SecretStore(new itsme_secret_store(ItsMe.created(code, out, ItsMe::threadLastError)));
    }

    /** Whether the file store in {@code directory} is wrapped by a passphrase (reads no file). */
    public static boolean isWrappedFile(Path directory) {
        ItsMeLibrary lib = ItsMe.library();
        ByteByReference wrapped = new ByteByReference();
        ItsMe.check(lib.itsme_secret_store_is_passphrase_wrapped(
                ItsMe.textArgument(directory.toString(), "directory"), wrapped), ItsMe::threadLastError);
        return wrapped.getValue() != 0;
    }
}

package org.itsme;

import com.sun.jna.ptr.LongByReference;
import com.sun.jna.ptr.PointerByReference;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.itsme.raw.ItsMeLibrary;
import org.itsme.raw.ItsMeLibrary.ExchangeMethod;
import org.itsme.raw.ItsMeLibrary.SizeT;
import org.itsme.raw.ItsMeLibrary.SizeTByReference;
import org.itsme.raw.ItsMeLibrary.itsme_contact;
import org.itsme.raw.ItsMeLibrary.itsme_contact_list;
import org.itsme.raw.ItsMeLibrary.itsme_store;

/** An identity's encrypted contact store, a SQLite file ({@code itsme_store}). */
public final class ContactStore extends Handle<itsme_store> {
    private static final int PAGE = 100;

    private ContactStore(itsme_store pointer) {
        super("contact store", pointer, ItsMe.library()::itsme_store_free,
                p -> ItsMe.readDetail((out, cap, len) -> ItsMe.library().itsme_store_last_error(p, out, cap, len)));
    }

    /** Opens (or creates) the contact store of {@code identity} at {@code path}. */
    public static ContactStore open(Identity identity, Path path) {
        String checked = ItsMe.textArgument(path.toString(), "path");
        return identity.use(i -> {
            PointerByReference out = new PointerByReference();
            int code = ItsMe.library().itsme_store_open(i, checked, out);
            return new ContactStore(new itsme_store(ItsMe.created(code, out, identity.detail(i))));
        });
    }

    /**
     * Adds a contact by its identity public key, name and 32-byte seed, exchanged by
     * {@code method}, at {@code now}; returns its id.
     */
    public long add(String name, byte[] publicKey, byte[] seed, ExchangeMethod method, long now) {
        String checkedName = ItsMe.textArgument(name, "name");
        byte[] key = ItsMe.bytesArgument(publicKey, "public key");
        byte[] checkedSeed = ItsMe.bytesArgument(seed, "seed");
        LongByReference id = new LongByReference();
        call(p -> ItsMe.library().itsme_store_add(p, checkedName, key, new SizeT(key.length), checkedSeed,
                new SizeT(checkedSeed.length), method.value(), now, id));
        return id.getValue();
    }

    /** The contact of id {@code id} (ItsMeException.NotFound if there is none). */
    public Contact get(long id) {
        return use(p -> {
            PointerByReference out = new PointerByReference();
            int code = ItsMe.library().itsme_store_get(p, id, out);
            return Contact.read(new itsme_contact(ItsMe.created(code, out, detail(p))));
        });
    }

    /** Every contact, in id order. */
    public List<Contact> list() {
        List<Contact> contacts = new ArrayList<>();
        long after = 0;
        while (true) {
            List<Contact> page = page(after, PAGE);
            contacts.addAll(page);
            if (page.size() < PAGE) {
                return contacts;
            }
            after = page.get(page.size() - 1).id();
        }
    }

    /** Up to {@code limit} contacts with ids above {@code afterId}, in id order. */
    public List<Contact> page(long afterId, int limit) {
        if (limit <= 0) {
            throw ItsMeException.of(ItsMeLibrary.ITSME_E_INVALID_ARGUMENT, "limit must be positive");
        }
        return use(p -> {
            ItsMeLibrary lib = ItsMe.library();
            PointerByReference out = new PointerByReference();
            int code = lib.itsme_store_list(p, afterId, new SizeT(limit), out);
            itsme_contact_list list = new itsme_contact_list(ItsMe.created(code, out, detail(p)));
            try {
                SizeTByReference count = new SizeTByReference();
                ItsMe.check(lib.itsme_contact_list_count(list, count), null);
                List<Contact> contacts = new ArrayList<>();
                for (long index = 0; index < count.getValue(); index++) {
                    PointerByReference contact = new PointerByReference();
                    int got = lib.itsme_contact_list_get(list, new SizeT(index), contact);
                    contacts.add(Contact.read(new itsme_contact(ItsMe.created(got, contact, null))));
                }
                return contacts;
            } finally {
                lib.itsme_contact_list_free(list);
            }
        });
    }

    /** How many contacts the store holds. */
    public long count() {
        LongByReference count = new LongByReference();
        call(p -> ItsMe.library().itsme_store_count(p, count));
        return count.getValue();
    }

    /**
     * Stores the device secrets of contact {@code id} as an exchange leaves them: this device's
     * for the contact ({@code mine}) and the contact's ({@code theirs}), each at most 64 bytes,
     * not both empty; they replace the contact's secrets. For tests and vectors that rebuild a
     * store holding given secrets: a test-build function (include/itsme_testing.h).
     */
    public void setDeviceSecrets(long id, byte[] mine, byte[] theirs) {
        byte[] checkedMine = ItsMe.bytesArgument(mine, "mine");
        byte[] checkedTheirs = ItsMe.bytesArgument(theirs, "theirs");
        call(p -> ItsMe.testing().itsme_store_set_device_secrets(p, id, checkedMine, new SizeT(checkedMine.length),
                checkedTheirs, new SizeT(checkedTheirs.length)));
    }

    /** Deletes contact {@code id} (ItsMeException.NotFound if there is none). */
    public void delete(long id) {
        call(p -> ItsMe.library().itsme_store_delete(p, id));
    }
}

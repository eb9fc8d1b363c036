package org.itsme;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.itsme.raw.ItsMeLibrary;
import org.itsme.raw.ItsMeLibrary.ExchangeMethod;
import org.itsme.raw.ItsMeLibrary.ExchangeState;
import org.itsme.raw.ItsMeLibrary.Result;
import org.itsme.raw.ItsMeLibrary.VerificationState;
import org.itsme.raw.ItsMeLibrary.VoiceOutcome;
import org.itsme.raw.ItsMeLibrary.VoiceState;
import org.itsme.raw.ItsMeTestingLibrary;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ItsMeTest {
    /** A simulated clock, as examples/python/voice_example.py uses. */
    private static final long START = 1_800_000_007L;

    @TempDir
    Path directory;

    private final List<AutoCloseable> opened = new ArrayList<>();

    private <T extends AutoCloseable> T keep(T handle) {
        opened.add(handle);
        return handle;
    }

    @AfterEach
    void closeAll() throws Exception {
        for (int i = opened.size() - 1; i >= 0; i--) {
            opened.get(i).close();
        }
    }

    /** A person: an identity in a memory secret store, and its contact store. */
    private record Person(SecretStore secrets, Identity identity, ContactStore contacts) {
    }

    private Person person(String name) {
        SecretStore secrets = keep(SecretStore.memory());
        Identity identity = keep(Identity.create(secrets, name));
        ContactStore contacts = keep(ContactStore.open(identity, directory.resolve(name + ".db")));
        return new Person(secrets, identity, contacts);
    }

    /** The QR exchange between two people, both confirming: each one's contact id for the other. */
    private long[] exchange(Person a, Person b, long now) {
        try (Exchange atA = Exchange.qr(a.identity(), a.contacts(), now); Exchange atB = Exchange.qr(b.identity(), b.contacts(), now)) {
            atA.receive(atB.nextOutgoing(), now);
            atB.receive(atA.nextOutgoing(), now);
            assertEquals(atA.sas(), atB.sas());
            return new long[] {atA.confirm(now), atB.confirm(now)};
        }
    }

    @Test
    void structLayoutsMatchTheHeader() {
        assertEquals(List.of(), ItsMeLibrary.layoutMismatches());
    }

    @Test
    void loadsTheLibraryThisBindingWasGeneratedFor() {
        String expected = ItsMeLibrary.ITSME_VERSION_MAJOR + "." + ItsMeLibrary.ITSME_VERSION_MINOR + ".";
        assertTrue(ItsMe.version().startsWith(expected), ItsMe.version());
        assertEquals("ALFA", ItsMe.natoWord(0));
        assertEquals("ZULU", ItsMe.natoWord(25));
        assertThrows(ItsMeException.InvalidArgument.class, () -> ItsMe.natoWord(26));
    }

    @Test
    void testOnlyFunctionsAreBoundOnRequestAndLazily() throws Exception {
        // Loads against any build; a release library lacks every test-only function.
        ItsMeTestingLibrary testing = assertDoesNotThrow(() -> ItsMeTestingLibrary.load(ItsMe.libraryName()));
        List<String> missing = ItsMeTestingLibrary.missingFunctions(ItsMe.libraryName());
        assertTrue(ItsMeTestingLibrary.FUNCTIONS.containsAll(missing));
        for (Method method : ItsMeTestingLibrary.class.getDeclaredMethods()) {
            if (!missing.contains(method.getName())) {
                continue;
            }
            // Calling one the library lacks is a clear error naming it, not a crash.
            Object[] arguments = new Object[method.getParameterCount()];
            Class<?>[] types = method.getParameterTypes();
            for (int i = 0; i < arguments.length; i++) {
                arguments[i] = types[i] == long.class ? (Object) 0L : types[i] == int.class ? (Object) 0
                        : types[i] == byte.class ? (Object) (byte) 0 : null;
            }
            InvocationTargetException thrown = assertThrows(InvocationTargetException.class,
                    () -> method.invoke(testing, arguments));
            assertTrue(thrown.getCause() instanceof UnsatisfiedLinkError, String.valueOf(thrown.getCause()));
            assertTrue(thrown.getCause().getMessage().contains(method.getName()), thrown.getCause().getMessage());
        }
    }

    @Test
    void identityIsCreatedLoadedAndNamed() {
        try (SecretStore secrets = SecretStore.memory()) {
            assertThrows(ItsMeException.NotFound.class, () -> Identity.load(secrets));
            String fingerprint;
            byte[] key;
            try (Identity alice = Identity.create(secrets, "Alice")) {
                fingerprint = alice.fingerprint();
                key = alice.publicKey();
                assertEquals(ItsMeLibrary.ITSME_FINGERPRINT_CHARS, fingerprint.length());
                assertTrue(fingerprint.matches("[0-9A-F]{16}"), fingerprint);
                assertEquals(ItsMeLibrary.ITSME_PUBLIC_KEY_BYTES, key.length);
                assertEquals("Alice", alice.name());
                alice.setName("Alice Ünlü");
                assertEquals("Alice Ünlü", alice.name());
            }
            ItsMeException exists = assertThrows(ItsMeException.AlreadyExists.class,
                    () -> Identity.create(secrets, "Again"));
            assertEquals(ItsMeLibrary.ITSME_E_ALREADY_EXISTS, exists.code());
            assertEquals(Result.E_ALREADY_EXISTS, exists.result());
            try (Identity again = Identity.load(secrets)) {
                assertEquals(fingerprint, again.fingerprint());
                assertArrayEquals(key, again.publicKey());
                assertEquals("Alice Ünlü", again.name());
            }
        }
    }

    @Test
    void fileSecretStoreKeepsTheIdentity() {
        Path store = directory.resolve("secrets");
        String fingerprint;
        try (SecretStore secrets = SecretStore.openFile(store); Identity bob = Identity.create(secrets, "Bob")) {
            fingerprint = bob.fingerprint();
        }
        try (SecretStore secrets = SecretStore.openFile(store); Identity bob = Identity.load(secrets)) {
            assertEquals(fingerprint, bob.fingerprint());
        }
    }

    @Test
    void wrappedFileStoreOpensOnlyWithItsPassphrase() throws Exception {
        Path store = directory.resolve("secrets");
        byte[] passphrase = "correct horse battery staple".getBytes(StandardCharsets.UTF_8);
        assertFalse(SecretStore.isWrappedFile(store));
        String fingerprint;
        try (SecretStore secrets = SecretStore.createWrappedFile(store, passphrase);
                Identity bob = Identity.create(secrets, "Bob Quince")) {
            fingerprint = bob.fingerprint();
        }
        assertTrue(SecretStore.isWrappedFile(store));
        byte[] item = java.nio.file.Files.readAllBytes(store.resolve("itsme.identity"));
        assertFalse(new String(item, StandardCharsets.ISO_8859_1).contains("Bob Quince"));
        try (SecretStore secrets = SecretStore.openWrappedFile(store, passphrase); Identity bob = Identity.load(secrets)) {
            assertEquals(fingerprint, bob.fingerprint());
            assertEquals("Bob Quince", bob.name());
        }
        ItsMeException wrong = assertThrows(ItsMeException.AuthenticationFailed.class,
                () -> SecretStore.openWrappedFile(store, "incorrect horse".getBytes(StandardCharsets.UTF_8)));
        assertFalse(wrong.getMessage().contains("horse"), wrong.getMessage());
        assertThrows(ItsMeException.AlreadyExists.class, () -> SecretStore.createWrappedFile(store, passphrase));
        assertThrows(ItsMeException.NotFound.class,
                () -> SecretStore.openWrappedFile(directory.resolve("plain"), passphrase));
        assertThrows(ItsMeException.InvalidArgument.class,
                () -> SecretStore.createWrappedFile(directory.resolve("other"), new byte[0]));
        assertThrows(ItsMeException.InvalidArgument.class, () -> SecretStore.openWrappedFile(store, null));
    }

    @Test
    void pinIsSetVerifiedAndCounted() {
        Identity alice = person("Alice").identity();
        assertThrows(ItsMeException.NotFound.class, () -> alice.verifyPin("123456", START));
        assertThrows(ItsMeException.InvalidPin.class, () -> alice.setPin("12ab56"));
        alice.setPin("123456");
        assertThrows(ItsMeException.AlreadyExists.class, () -> alice.setPin("654321"));
        alice.verifyPin("123456", START);
        assertEquals(new Identity.PinStatus(0, 0), alice.pinStatus(START));

        ItsMeException wrong = assertThrows(ItsMeException.WrongPin.class, () -> alice.verifyPin("000000", START));
        assertEquals(ItsMeLibrary.ITSME_E_WRONG_PIN, wrong.code());
        assertEquals(Result.E_WRONG_PIN, wrong.result());
        assertTrue(wrong.getMessage().startsWith(ItsMe.resultMessage(ItsMeLibrary.ITSME_E_WRONG_PIN)),
                wrong.getMessage());
        assertEquals(1, alice.pinStatus(START).failures());
        // Not six digits: refused and not counted.
        assertThrows(ItsMeException.InvalidPin.class, () -> alice.verifyPin("12345", START));
        assertEquals(1, alice.pinStatus(START).failures());

        alice.changePin("123456", "246810", START);
        assertThrows(ItsMeException.WrongPin.class, () -> alice.verifyPin("123456", START));
        alice.verifyPin("246810", START);
    }

    @Test
    void pinLocksAfterRepeatedFailures() {
        Identity alice = person("Alice").identity();
        alice.setPin("123456");
        ItsMeException last = null;
        for (int attempt = 0; attempt < 20 && !(last instanceof ItsMeException.Locked); attempt++) {
            last = assertThrows(ItsMeException.class, () -> alice.verifyPin("000000", START));
        }
        assertTrue(last instanceof ItsMeException.Locked, String.valueOf(last));
        assertTrue(alice.pinStatus(START).waitSeconds() > 0);
        // While locked even the right PIN is refused, without being checked.
        assertThrows(ItsMeException.Locked.class, () -> alice.verifyPin("123456", START));
    }

    @Test
    void contactStoreAddsListsGetsAndDeletes() {
        Person alice = person("Alice");
        Person bob = person("Bob");
        Person carol = person("Carol");
        byte[] seed = new byte[ItsMeLibrary.ITSME_SEED_BYTES];
        Arrays.fill(seed, (byte) 7);
        assertEquals(0, alice.contacts().count());
        assertEquals(List.of(), alice.contacts().list());

        long bobId = alice.contacts().add("Bob", bob.identity().publicKey(), seed, ExchangeMethod.QR, START);
        long carolId = alice.contacts().add("Carol", carol.identity().publicKey(), seed, ExchangeMethod.INVITE,
                START + 1);
        assertTrue(carolId > bobId);
        assertEquals(2, alice.contacts().count());

        Contact got = alice.contacts().get(bobId);
        assertEquals(bobId, got.id());
        assertEquals("Bob", got.name());
        assertEquals(bob.identity().fingerprint(), got.fingerprint());
        assertArrayEquals(bob.identity().publicKey(), got.publicKey());
        assertEquals(VerificationState.UNVERIFIED, got.state());
        assertEquals(ExchangeMethod.QR, got.method());
        assertEquals(START, got.createdAt());
        assertNull(got.verifiedAt());
        assertEquals("", got.note());

        List<Contact> all = alice.contacts().list();
        assertEquals(List.of(bobId, carolId), all.stream().map(Contact::id).toList());
        assertEquals(got, all.get(0));
        assertEquals(List.of(carolId), alice.contacts().page(bobId, 10).stream().map(Contact::id).toList());

        assertThrows(ItsMeException.AlreadyExists.class,
                () -> alice.contacts().add("Bob again", bob.identity().publicKey(), seed, ExchangeMethod.QR, START));
        assertThrows(ItsMeException.InvalidKey.class,
                () -> alice.contacts().add("Me", alice.identity().publicKey(), seed, ExchangeMethod.QR, START));
        assertThrows(ItsMeException.InvalidArgument.class,
                () -> alice.contacts().add("Short seed", carol.identity().publicKey(), new byte[3], ExchangeMethod.QR,
                        START));
        assertThrows(ItsMeException.InvalidArgument.class,
                () -> alice.contacts().add("Nul\0name", new byte[32], seed, ExchangeMethod.QR, START));

        alice.contacts().delete(bobId);
        assertThrows(ItsMeException.NotFound.class, () -> alice.contacts().get(bobId));
        assertThrows(ItsMeException.NotFound.class, () -> alice.contacts().delete(bobId));
        assertEquals(List.of(carolId), alice.contacts().list().stream().map(Contact::id).toList());
    }

    @Test
    void contactStoreOfAnotherIdentityIsRefused() {
        Person alice = person("Alice");
        try (SecretStore secrets = SecretStore.memory(); Identity mallory = Identity.create(secrets, "Mallory")) {
            ItsMeException refused = assertThrows(ItsMeException.WrongIdentity.class,
                    () -> ContactStore.open(mallory, directory.resolve("Alice.db")));
            assertFalse(refused.detail().isEmpty());
        }
        assertEquals(0, alice.contacts().count());
    }

    @Test
    void qrExchangeBetweenTwoIdentities() {
        Person alice = person("Alice");
        Person bob = person("Bob");
        Exchange atAlice = keep(Exchange.qr(alice.identity(), alice.contacts(), START));
        Exchange atBob = keep(Exchange.qr(bob.identity(), bob.contacts(), START));
        assertEquals(ExchangeMethod.QR, atAlice.method());
        assertEquals(ExchangeState.AWAITING_PEER, atAlice.status().state());
        assertThrows(ItsMeException.InvalidState.class, atAlice::sas);

        byte[] alicePayload = atAlice.nextOutgoing();
        byte[] bobPayload = atBob.nextOutgoing();
        assertTrue(alicePayload.length > 0 && alicePayload.length <= ItsMeLibrary.ITSME_QR_PAYLOAD_MAX);
        assertTrue(new String(alicePayload, StandardCharsets.US_ASCII).chars().allMatch(c -> c >= 0x20 && c < 0x7f));
        assertArrayEquals(alicePayload, atAlice.nextOutgoing()); // QR: not consumed

        // A text that is not a payload: refused, and the exchange goes on.
        assertThrows(ItsMeException.InvalidArgument.class,
                () -> atAlice.receive("not a payload".getBytes(StandardCharsets.US_ASCII), START));
        atAlice.receive(bobPayload, START);
        atBob.receive(alicePayload, START + 2);
        assertThrows(ItsMeException.InvalidState.class, () -> atAlice.receive(bobPayload, START));

        assertEquals(ExchangeState.COMPARE_SAS, atAlice.status().state());
        assertEquals(atAlice.sas(), atBob.sas());
        assertTrue(atAlice.sas().matches("[A-Z]+ [0-9]{4}"), atAlice.sas());
        assertEquals("Bob", atAlice.peerName());
        assertEquals("Alice", atBob.peerName());
        assertEquals(bob.identity().fingerprint(), atAlice.peerFingerprint());
        assertArrayEquals(alice.identity().publicKey(), atBob.peerPublicKey());

        // Settling is for an exchange awaiting the peer's decision, not a QR one.
        assertThrows(ItsMeException.InvalidState.class, () -> atAlice.settle(START + 5));

        long saved = atAlice.save(START + 5);
        assertEquals(saved, atAlice.save(START + 5));
        assertEquals(VerificationState.UNVERIFIED, alice.contacts().get(saved).state());
        long bobAtAlice = atAlice.confirm(START + 6);
        long aliceAtBob = atBob.confirm(START + 6);
        assertEquals(saved, bobAtAlice);
        assertEquals(ExchangeState.CONFIRMED, atAlice.status().state());
        assertEquals(ExchangeState.CONFIRMED, atBob.status().state());

        Contact bobContact = alice.contacts().get(bobAtAlice);
        assertEquals("Bob", bobContact.name());
        assertEquals(VerificationState.VERIFIED, bobContact.state());
        assertEquals(bob.identity().fingerprint(), bobContact.fingerprint());
        assertEquals(START + 6, bobContact.verifiedAt());
        Contact aliceContact = bob.contacts().get(aliceAtBob);
        assertEquals("Alice", aliceContact.name());
        assertEquals(VerificationState.VERIFIED, aliceContact.state());
        assertArrayEquals(alice.identity().publicKey(), aliceContact.publicKey());
        assertThrows(ItsMeException.InvalidState.class, () -> atAlice.reject());
    }

    @Test
    void rejectedExchangeDeletesTheSavedContact() {
        Person alice = person("Alice");
        Person bob = person("Bob");
        try (Exchange atAlice = Exchange.qr(alice.identity(), alice.contacts(), START);
                Exchange atBob = Exchange.qr(bob.identity(), bob.contacts(), START)) {
            atAlice.receive(atBob.nextOutgoing(), START);
            long saved = atAlice.save(START);
            assertEquals(1, alice.contacts().count());
            atAlice.reject();
            assertEquals(ExchangeState.REJECTED, atAlice.status().state());
            assertEquals(0, alice.contacts().count());
            assertThrows(ItsMeException.NotFound.class, () -> alice.contacts().get(saved));
        }
    }

    /** Both sides of a voice session, run to the codes; returns [Alice's, Bob's] sessions. */
    private VoiceSession[] voiceToCodes(Person alice, long bobAtAlice, Person bob, long aliceAtBob, long[] clock) {
        return voiceToCodes(alice, bobAtAlice, null, bob, aliceAtBob, null, clock);
    }

    /**
     * Both sides of a voice session, each bound to its call binding (null: not bound), run to
     * the codes; returns [Alice's, Bob's] sessions.
     */
    private VoiceSession[] voiceToCodes(Person alice, long bobAtAlice, byte[] aliceBinding, Person bob,
            long aliceAtBob, byte[] bobBinding, long[] clock) {
        VoiceSession atAlice = keep(VoiceSession.create(alice.contacts(), bobAtAlice, aliceBinding, clock[0]));
        VoiceSession atBob = keep(VoiceSession.create(bob.contacts(), aliceAtBob, bobBinding, clock[0]));
        VoiceSession.Timing timing = atAlice.timing(clock[0]);
        assertEquals(timing.window(), atBob.timing(clock[0]).window());
        assertTrue(timing.endsIn() > timing.startsIn());
        assertEquals(VoiceState.WAITING, atAlice.status().state());
        if (timing.startsIn() > 15) {
            assertThrows(ItsMeException.InvalidState.class, () -> atAlice.start(clock[0]));
        }
        clock[0] += Math.max(0, timing.startsIn());
        atAlice.start(clock[0]);
        atBob.start(clock[0]);
        // Bound alike (or both not bound): the same session ID; bound differently: another one.
        assertEquals(Arrays.equals(aliceBinding, bobBinding), atAlice.sessionId().equals(atBob.sessionId()));
        for (int round = 0; round < 2; round++) {
            VoiceSession speaker = atAlice.status().turn() == VoiceSession.Turn.MINE ? atAlice : atBob;
            VoiceSession listener = speaker == atAlice ? atBob : atAlice;
            assertEquals(VoiceSession.Turn.THEIRS, listener.status().turn());
            int[] words = speaker.words();
            assertEquals(5, words.length);
            speaker.select(words[0], clock[0]);
            listener.select(words[0], clock[0]);
            clock[0] += 3;
        }
        assertEquals(VoiceState.COMPARING, atAlice.status().state());
        assertEquals(VoiceSession.Turn.NONE, atAlice.status().turn());
        return new VoiceSession[] {atAlice, atBob};
    }

    @Test
    void voiceVerificationBetweenTwoStores() {
        Person alice = person("Alice");
        Person bob = person("Bob");
        long[] ids = exchange(alice, bob, START);
        long[] clock = {START + 60};
        VoiceSession[] sessions = voiceToCodes(alice, ids[0], bob, ids[1], clock);
        VoiceSession atAlice = sessions[0];
        VoiceSession atBob = sessions[1];

        VoiceSession.Code aliceSays = atAlice.yourCode();
        VoiceSession.Code bobSays = atBob.yourCode();
        assertEquals(aliceSays, atBob.theirCode());
        assertEquals(bobSays, atAlice.theirCode());
        assertTrue(aliceSays.text().matches("[A-Z]+ [0-9]{3}"), aliceSays.text());
        assertTrue(aliceSays.tag() >= 0 && aliceSays.tag() <= 99);
        int[] aliceWords = atAlice.words();
        for (int i = 1; i < aliceWords.length; i++) {
            assertTrue(aliceWords[i - 1] < aliceWords[i]);
        }

        clock[0] += 5;
        assertEquals(VoiceOutcome.VERIFIED, atAlice.check(bobSays.text(), bobSays.tag(), clock[0]));
        assertEquals(VoiceOutcome.VERIFIED, atBob.check(aliceSays.text(), aliceSays.tag(), clock[0]));
        assertEquals(VoiceState.FINISHED, atAlice.status().state());
        assertEquals(VerificationState.VERIFIED, alice.contacts().get(ids[0]).state());
        assertEquals(VerificationState.VERIFIED, bob.contacts().get(ids[1]).state());
    }

    @Test
    void voiceCheckOfAWrongCodeIsAMismatch() {
        Person alice = person("Alice");
        Person bob = person("Bob");
        long[] ids = exchange(alice, bob, START);
        long[] clock = {START + 60};
        VoiceSession atAlice = voiceToCodes(alice, ids[0], bob, ids[1], clock)[0];
        VoiceSession.Code expected = atAlice.theirCode();
        String wrong = expected.text().startsWith("ALFA ") ? "BRAVO 123" : "ALFA 123";
        assertThrows(ItsMeException.InvalidArgument.class,
                () -> atAlice.check("not a code", expected.tag(), clock[0]));
        assertEquals(VoiceOutcome.MISMATCH, atAlice.check(wrong, expected.tag(), clock[0]));
        assertNotEquals(VerificationState.DEGRADED, alice.contacts().get(ids[0]).state());
    }

    /** A call binding of {@code length} bytes of {@code value}. */
    private static byte[] binding(int length, int value) {
        byte[] binding = new byte[length];
        Arrays.fill(binding, (byte) value);
        return binding;
    }

    @Test
    void voiceBoundToOneCallVerifies() {
        Person alice = person("Alice");
        Person bob = person("Bob");
        long[] ids = exchange(alice, bob, START);
        long[] clock = {START + 60};
        for (byte[] ours : new byte[][] {binding(32, 1), binding(ItsMeLibrary.ITSME_CALL_BINDING_MIN, 2),
                binding(ItsMeLibrary.ITSME_CALL_BINDING_MAX, 3)}) {
            VoiceSession[] sessions = voiceToCodes(alice, ids[0], ours, bob, ids[1], ours.clone(), clock);
            VoiceSession.Code aliceSays = sessions[0].yourCode();
            VoiceSession.Code bobSays = sessions[1].yourCode();
            assertEquals(aliceSays, sessions[1].theirCode());
            assertEquals(VoiceOutcome.VERIFIED, sessions[0].check(bobSays.text(), bobSays.tag(), clock[0]));
            assertEquals(VoiceOutcome.VERIFIED, sessions[1].check(aliceSays.text(), aliceSays.tag(), clock[0]));
            clock[0] += 60;
        }
        assertEquals(VerificationState.VERIFIED, alice.contacts().get(ids[0]).state());
    }

    @Test
    void voiceBoundDifferentlyReadsAnotherSessionIdAndTheCodesDoNotMatch() {
        Person alice = person("Alice");
        Person bob = person("Bob");
        long[] ids = exchange(alice, bob, START);
        long[] clock = {START + 60};
        byte[] ours = binding(32, 1);
        byte[] theirs = binding(16, 2);
        for (byte[][] bindings : new byte[][][] {{ours, null}, {null, ours}, {ours, theirs}}) {
            // voiceToCodes checks that the session IDs differ.
            VoiceSession[] sessions = voiceToCodes(alice, ids[0], bindings[0], bob, ids[1], bindings[1], clock);
            VoiceSession.Code aliceSays = sessions[0].yourCode();
            VoiceSession.Code bobSays = sessions[1].yourCode();
            assertNotEquals(aliceSays.text(), sessions[1].theirCode().text());
            assertNotEquals(bobSays.text(), sessions[0].theirCode().text());
            Contact before = alice.contacts().get(ids[0]);
            assertEquals(VoiceOutcome.MISMATCH, sessions[0].check(bobSays.text(), bobSays.tag(), clock[0]));
            assertEquals(VoiceOutcome.MISMATCH, sessions[1].check(aliceSays.text(), aliceSays.tag(), clock[0]));
            assertEquals(before, alice.contacts().get(ids[0]), "a mismatch records nothing");
            clock[0] += 60;
        }
    }

    @Test
    void voiceBindingOfAnotherLengthIsRefused() {
        Person alice = person("Alice");
        Person bob = person("Bob");
        long[] ids = exchange(alice, bob, START);
        assertEquals(16, ItsMeLibrary.ITSME_CALL_BINDING_MIN);
        assertEquals(64, ItsMeLibrary.ITSME_CALL_BINDING_MAX);
        assertEquals(16, ItsMe.library().itsme_call_binding_min().longValue());
        assertEquals(64, ItsMe.library().itsme_call_binding_max().longValue());
        for (int length : new int[] {0, 1, ItsMeLibrary.ITSME_CALL_BINDING_MIN - 1,
                ItsMeLibrary.ITSME_CALL_BINDING_MAX + 1}) {
            ItsMeException refused = assertThrows(ItsMeException.InvalidArgument.class,
                    () -> VoiceSession.create(alice.contacts(), ids[0], new byte[length], START));
            assertTrue(refused.detail().contains("binding"), refused.detail());
        }
        for (int length : new int[] {ItsMeLibrary.ITSME_CALL_BINDING_MIN, ItsMeLibrary.ITSME_CALL_BINDING_MAX}) {
            keep(VoiceSession.create(alice.contacts(), ids[0], new byte[length], START));
        }
        // The binding is copied: changing the caller's array afterwards changes nothing.
        byte[] ours = binding(32, 1);
        long[] clock = {START + 60};
        VoiceSession atAlice = keep(VoiceSession.create(alice.contacts(), ids[0], ours, clock[0]));
        Arrays.fill(ours, (byte) 9);
        VoiceSession atBob = keep(VoiceSession.create(bob.contacts(), ids[1], binding(32, 1), clock[0]));
        long start = 30 * atAlice.timing(clock[0]).window();
        atAlice.start(start);
        atBob.start(start);
        assertEquals(atAlice.sessionId(), atBob.sessionId());
    }

    @Test
    void voiceSessionForAnUnknownContactIsNotFound() {
        Person alice = person("Alice");
        assertThrows(ItsMeException.NotFound.class, () -> VoiceSession.create(alice.contacts(), 4242, START));
    }

    @Test
    void closeTwiceAndUseAfterClose() {
        SecretStore secrets = SecretStore.memory();
        Identity alice = Identity.create(secrets, "Alice");
        ContactStore contacts = ContactStore.open(alice, directory.resolve("closing.db"));
        Exchange exchange = Exchange.qr(alice, contacts, START);
        for (Handle<?> handle : List.of(exchange, contacts, alice, secrets)) {
            assertFalse(handle.isClosed());
            handle.close();
            handle.close();
            assertTrue(handle.isClosed());
        }
        IllegalStateException closed = assertThrows(IllegalStateException.class, alice::fingerprint);
        assertTrue(closed.getMessage().contains("identity is closed"), closed.getMessage());
        assertThrows(IllegalStateException.class, () -> alice.verifyPin("123456", START));
        assertThrows(IllegalStateException.class, contacts::list);
        assertThrows(IllegalStateException.class, exchange::nextOutgoing);
        assertThrows(IllegalStateException.class, () -> Identity.load(secrets));
        assertThrows(IllegalStateException.class, alice::lastError);
    }

    @Test
    void closedArgumentIsRefusedCleanly() {
        Person alice = person("Alice");
        Person bob = person("Bob");
        ContactStore other = ContactStore.open(alice.identity(), directory.resolve("other.db"));
        other.close();
        assertThrows(IllegalStateException.class, () -> Exchange.qr(alice.identity(), other, START));
        assertThrows(ItsMeException.WrongIdentity.class, () -> Exchange.qr(alice.identity(), bob.contacts(), START));
        try (Exchange atAlice = Exchange.qr(alice.identity(), alice.contacts(), START);
                Exchange atBob = Exchange.qr(bob.identity(), bob.contacts(), START)) {
            atAlice.receive(atBob.nextOutgoing(), START);
            assertEquals(ExchangeState.COMPARE_SAS, atAlice.status().state());
            assertTrue(atAlice.confirm(START) > 0);
        }
    }
}

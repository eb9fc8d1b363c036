/*
 * ExchangeAndVoice: Alice and Bob exchange contacts in person by QR code,
 * then verify each other during a call by voice.
 *
 * Each phone shows a payload (as a QR code) that the other scans; both then
 * show the same SAS, which the two people compare aloud before confirming.
 * Later, on a call, both plan a voice session for the next unused 30-second
 * window; each chooses one of five words in turn and the other enters it,
 * then each reads a code and a device tag aloud and enters what the other
 * said. The clock is simulated (it starts at 1,800,000,007 and jumps to the
 * window), so the example runs at once.
 *
 *     scripts/test-java        (builds and runs it), or by hand:
 *     java -cp build/java/classes:build/java/example:/usr/share/java/jna.jar \
 *         -Ditsme.library=PATH/TO/libitsme.so ExchangeAndVoice
 */

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.itsme.ContactStore;
import org.itsme.Exchange;
import org.itsme.Identity;
import org.itsme.ItsMe;
import org.itsme.SecretStore;
import org.itsme.VoiceSession;
import org.itsme.raw.ItsMeLibrary.VoiceOutcome;

public final class ExchangeAndVoice {
    private long now = 1_800_000_007L;

    /** One person's phone: an identity in a memory secret store, and its contact store. */
    private record Phone(String owner, SecretStore secrets, Identity identity, ContactStore contacts)
            implements AutoCloseable {
        static Phone open(String owner, Path directory) {
            SecretStore secrets = SecretStore.memory();
            Identity identity = Identity.create(secrets, owner);
            return new Phone(owner, secrets, identity, ContactStore.open(identity, directory.resolve(owner + ".db")));
        }

        @Override
        public void close() {
            contacts.close();
            identity.close();
            secrets.close();
        }
    }

    public static void main(String[] args) throws Exception {
        Path directory = Files.createTempDirectory("itsme-example-");
        int status;
        try {
            status = new ExchangeAndVoice().run(directory);
        } finally {
            try (Stream<Path> files = Files.walk(directory)) {
                for (Path file : files.sorted(Comparator.reverseOrder()).toList()) {
                    Files.delete(file);
                }
            }
        }
        System.exit(status);
    }

    private int run(Path directory) {
        System.out.println("libitsme " + ItsMe.version());
        try (Phone alice = Phone.open("Alice", directory); Phone bob = Phone.open("Bob", directory)) {
            long bobAtAlice;
            long aliceAtBob;
            try (Exchange atAlice = Exchange.qr(alice.identity(), alice.contacts(), now);
                    Exchange atBob = Exchange.qr(bob.identity(), bob.contacts(), now)) {
                byte[] alicePayload = atAlice.nextOutgoing();
                byte[] bobPayload = atBob.nextOutgoing();
                System.out.println("Alice's payload: " + alicePayload.length + " characters");
                System.out.println("Bob's payload: " + bobPayload.length + " characters");
                atAlice.receive(bobPayload, now);
                atBob.receive(alicePayload, now);
                System.out.println("Alice's phone: " + atAlice.peerName() + ", SAS " + atAlice.sas());
                System.out.println("Bob's phone: " + atBob.peerName() + ", SAS " + atBob.sas());
                if (!atAlice.sas().equals(atBob.sas())) {
                    atAlice.reject();
                    atBob.reject();
                    System.err.println("the SAS values differ: rejected");
                    return 1;
                }
                bobAtAlice = atAlice.confirm(now);
                aliceAtBob = atBob.confirm(now);
            }
            for (Phone phone : new Phone[] {alice, bob}) {
                var contact = phone.contacts().list().get(0);
                System.out.println(phone.owner() + "'s new contact: " + contact.name() + " " + contact.fingerprint()
                        + " " + contact.state().name().toLowerCase());
            }

            now += 3600; // later, on a call
            try (VoiceSession atAlice = VoiceSession.create(alice.contacts(), bobAtAlice, now);
                    VoiceSession atBob = VoiceSession.create(bob.contacts(), aliceAtBob, now)) {
                VoiceSession.Timing timing = atAlice.timing(now);
                System.out.println("both phones: window " + timing.window() + " begins in " + timing.startsIn()
                        + " s, the session ends in " + timing.endsIn() + " s");
                now += Math.max(0, timing.startsIn());
                atAlice.start(now);
                atBob.start(now);
                System.out.println("Alice's phone: session ID " + atAlice.sessionId() + "; Alice's words: "
                        + words(atAlice.words()));
                System.out.println("Bob's phone: session ID " + atBob.sessionId() + "; Bob's words: "
                        + words(atBob.words()));
                for (int round = 0; round < 2; round++) {
                    boolean aliceSpeaks = atAlice.status().turn() == VoiceSession.Turn.MINE;
                    VoiceSession speaker = aliceSpeaks ? atAlice : atBob;
                    VoiceSession listener = aliceSpeaks ? atBob : atAlice;
                    int word = speaker.words()[0];
                    speaker.select(word, now);
                    listener.select(word, now);
                    System.out.println((aliceSpeaks ? "Alice" : "Bob") + " chooses and says " + ItsMe.natoWord(word)
                            + "; " + (aliceSpeaks ? "Bob" : "Alice") + " enters it");
                    now += 3;
                }
                VoiceSession.Code aliceSays = atAlice.yourCode();
                VoiceSession.Code bobSays = atBob.yourCode();
                System.out.printf("Alice says: %s, %02d%n", aliceSays.text(), aliceSays.tag());
                System.out.printf("Bob says: %s, %02d%n", bobSays.text(), bobSays.tag());
                now += 5;
                VoiceOutcome atAliceOutcome = atAlice.check(bobSays.text(), bobSays.tag(), now);
                VoiceOutcome atBobOutcome = atBob.check(aliceSays.text(), aliceSays.tag(), now);
                System.out.println("Alice's check: " + atAliceOutcome + " (Bob is "
                        + alice.contacts().get(bobAtAlice).state().name().toLowerCase() + ")");
                System.out.println("Bob's check: " + atBobOutcome + " (Alice is "
                        + bob.contacts().get(aliceAtBob).state().name().toLowerCase() + ")");
                return atAliceOutcome == VoiceOutcome.VERIFIED && atBobOutcome == VoiceOutcome.VERIFIED ? 0 : 1;
            }
        }
    }

    private static String words(int[] words) {
        return Arrays.stream(words).mapToObj(ItsMe::natoWord).collect(Collectors.joining(", "));
    }
}

package org.itsme;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.BiFunction;
import org.itsme.raw.ItsMeLibrary;
import org.itsme.raw.ItsMeLibrary.ExchangeMethod;
import org.itsme.raw.ItsMeLibrary.RollcallPhase;
import org.itsme.raw.ItsMeLibrary.RollcallState;
import org.itsme.raw.ItsMeLibrary.VerificationState;
import org.itsme.raw.ItsMeTestingLibrary;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The roll call through the JVM binding (docs/PROTOCOL.md section 20, version 2): rollcall.json
 * replayed by its three devices in a group room (identities from their random seeds, contacts
 * with the vectors' seeds and device secrets), bound to two calls, and each rejection's result;
 * then people who exchanged by QR in an in-memory group room that delivers in order and reports
 * the relay's events: verified, a device changed, a stranger unknown; a late joiner; one who
 * leaves and starts again; a connection that drops and comes back with its round; the call
 * binding; a split when the room hides one device from another; a SAID tampered with on the way,
 * wrong and locked codes; the lifetime and argument errors. The same cases as the Rust binding's
 * tests/rollcall.rs and tests/vectors.rs.
 */
class RollCallTest {
    private static final long NOW = 1_800_000_500L;
    private static final HexFormat HEX = HexFormat.of();
    /** Bytes of a HELLO of 32 tags (PROTOCOL.md 20.2). */
    private static final int HELLO_BYTES = 133 + 16 * 32;

    @TempDir
    Path directory;

    private final List<AutoCloseable> opened = new ArrayList<>();

    private <T extends AutoCloseable> T keep(T handle) {
        opened.add(handle);
        return handle;
    }

    /** The test build's deterministic random source and device secrets: a
     * release library lacks them (CI runs these tests against both). */
    private static void assumeTestBuild() {
        Assumptions.assumeTrue(ItsMeTestingLibrary.missingFunctions(ItsMe.libraryName()).isEmpty(),
                "needs the test build (itsme_testing.h)");
    }

    @AfterEach
    void closeAll() throws Exception {
        for (int i = opened.size() - 1; i >= 0; i--) {
            opened.get(i).close();
        }
    }

    /** Bytes of a VIEW listing {@code k} names (PROTOCOL.md 20.3). */
    private static int viewBytes(int k) {
        return 138 + 32 * k + (k + 7) / 8;
    }

    /** Bytes of a SAID for a roster of {@code m + 1} (PROTOCOL.md 20.5). */
    private static int saidBytes(int m) {
        return 131 + 50 * m;
    }

    // --- the relay's group room in memory -------------------------------------------

    /** A message a receiver refused: its seat and the error. */
    record Refusal(int seat, ItsMeException error) {
        @Override
        public String toString() {
            return "seat " + seat + ": " + error;
        }
    }

    /** A message delivered to someone, with its sender's slot. */
    record Sent(int slot, byte[] message) {
    }

    /**
     * The relay's group room (docs/PROTOCOL.md 15.9) in memory: each connection gets the next
     * slot from 1; a join is announced to those present (peerJoined) and the newcomer told its
     * slot and theirs (joined); a departure is announced (peerLeft); every message goes, in order,
     * to every other member present with its sender's slot. As the vector generator's room does,
     * each message is handed to the others as soon as it is taken, and what a member sends while
     * alone goes nowhere. It may also lie: two seats it hides from each other see neither the
     * other's join nor its messages.
     */
    static final class GroupRoom {
        final List<RollCall> calls = new ArrayList<>();
        /** Each seat's slot while connected, else null. */
        final List<Integer> slots = new ArrayList<>();
        final List<Sent> sent = new ArrayList<>();
        private final Set<List<Integer>> hidden = new HashSet<>();
        private int nextSlot;

        /** Takes {@code call} in and connects it, asserting that no message is refused: its seat. */
        int enter(RollCall call, long now) {
            calls.add(call);
            slots.add(null);
            int seat = calls.size() - 1;
            List<Refusal> refused = connect(seat, now);
            assertTrue(refused.isEmpty(), "seat " + seat + " entering: " + refused);
            return seat;
        }

        RollCall at(int seat) {
            return calls.get(seat);
        }

        /** Connects seat {@code seat} (again) under a new slot, and delivers until quiet. */
        List<Refusal> connect(int seat, long now) {
            assertNull(slots.get(seat), "seat " + seat + " is connected already");
            int slot = ++nextSlot;
            List<Integer> visible = visibleTo(seat);
            int[] peers = new int[visible.size()];
            for (int i = 0; i < peers.length; i++) {
                calls.get(visible.get(i)).peerJoined(slot, now);
                peers[i] = slots.get(visible.get(i));
            }
            calls.get(seat).joined(slot, peers, now);
            slots.set(seat, slot);
            return pump(now);
        }

        /** Seat {@code seat}'s connection ends: the others see its slot leave. */
        List<Refusal> disconnect(int seat, long now) {
            int slot = slots.get(seat);
            slots.set(seat, null);
            for (int other : visibleTo(seat)) {
                calls.get(other).peerLeft(slot, now);
            }
            return pump(now);
        }

        /** Seats {@code a} and {@code b} see neither each other's joins nor messages (set before they join). */
        void hide(int a, int b) {
            hidden.add(List.of(Math.min(a, b), Math.max(a, b)));
        }

        private List<Integer> visibleTo(int seat) {
            List<Integer> out = new ArrayList<>();
            for (int other = 0; other < calls.size(); other++) {
                if (other != seat && slots.get(other) != null
                        && !hidden.contains(List.of(Math.min(seat, other), Math.max(seat, other)))) {
                    out.add(other);
                }
            }
            return out;
        }

        /** Delivers until quiet: what receivers refused. */
        List<Refusal> pump(long now) {
            return pumpThrough(now, (seat, message) -> message);
        }

        /** {@link #pump}, each message passing through {@code tamper} (given its sender's seat). */
        List<Refusal> pumpThrough(long now, BiFunction<Integer, byte[], byte[]> tamper) {
            List<Refusal> refused = new ArrayList<>();
            boolean moved = true;
            while (moved) {
                moved = false;
                for (int seat = 0; seat < calls.size(); seat++) {
                    Integer slot = slots.get(seat);
                    if (slot == null) {
                        continue;
                    }
                    for (byte[] m = calls.get(seat).nextOutgoing(); m.length > 0; m = calls.get(seat).nextOutgoing()) {
                        moved = true;
                        List<Integer> others = visibleTo(seat);
                        if (others.isEmpty()) {
                            continue; // alone: it goes nowhere
                        }
                        byte[] message = tamper.apply(seat, m);
                        for (int other : others) {
                            try {
                                calls.get(other).receive(message, slot, now);
                            } catch (ItsMeException e) {
                                refused.add(new Refusal(other, e));
                            }
                        }
                        sent.add(new Sent(slot, message));
                    }
                }
            }
            return refused;
        }

        /** Every connected member's tick, then delivery until quiet. */
        List<Refusal> tick(long now) {
            for (int seat = 0; seat < calls.size(); seat++) {
                if (slots.get(seat) != null) {
                    calls.get(seat).tick(now);
                }
            }
            return pump(now);
        }

        /** Ticks once a second from {@code from} to {@code to}, both included; nothing refused. */
        void run(long from, long to) {
            for (long now = from; now <= to; now++) {
                List<Refusal> refused = tick(now);
                assertTrue(refused.isEmpty(), "at " + now + ": " + refused);
            }
        }

        /** The first message of type {@code kind} (1 HELLO, 2 SAID, 3 VIEW) sent from {@code slot}. */
        byte[] firstSent(int slot, int kind) {
            return sent.stream().filter(s -> s.slot() == slot && s.message()[1] == kind).findFirst().orElseThrow()
                    .message();
        }

        /** Every member confirms the roster it holds, then says its code: the codes, by seat. */
        List<String> confirmAndSay(long now) {
            List<String> codes = new ArrayList<>();
            for (RollCall call : calls) {
                call.confirmRoster(call.roster(), now);
                assertEquals(RollcallPhase.CONFIRMED, call.phase());
                codes.add(call.code());
                call.confirmSaid(now);
                assertEquals(RollcallPhase.SAID, call.phase());
            }
            return codes;
        }

        /** One roster everywhere, everyone present agreeing, no split. */
        void assertSettled(long headCount) {
            byte[] roster = calls.get(0).roster();
            for (RollCall call : calls) {
                assertArrayEquals(roster, call.roster(), "one roster everywhere");
                assertEquals(headCount, call.headCount());
                assertFalse(call.split());
                List<RollCall.Participant> present = call.participants().stream().filter(p -> !p.left()).toList();
                assertEquals(headCount, present.size());
                assertTrue(present.stream().allMatch(RollCall.Participant::agrees), present.toString());
            }
        }
    }

    // --- rollcall.json ------------------------------------------------------------

    /** The vector file, found from the working directory up (scripts/test-java runs at the root). */
    private static Map<String, Object> vectors() throws IOException {
        Path here = Path.of("").toAbsolutePath();
        for (Path dir = here; dir != null; dir = dir.getParent()) {
            Path file = dir.resolve("Tests/ProtocolVectors/rollcall.json");
            if (Files.isRegularFile(file)) {
                return Json.object(Json.parse(Files.readString(file, StandardCharsets.UTF_8)));
            }
        }
        throw new IOException("Tests/ProtocolVectors/rollcall.json not found above " + here);
    }

    private static byte[] hex(Map<String, Object> v, String key) {
        return HEX.parseHex(Json.text(v, key));
    }

    private static RollcallState state(String text) {
        return RollcallState.valueOf(text.toUpperCase(Locale.ROOT));
    }

    /** The three devices: each contact store, and the contact id each holds for each peer. */
    private record Devices(Map<String, ContactStore> stores, Map<String, Map<String, Long>> ids) {
    }

    private Devices devices(Map<String, Object> v) {
        Map<String, ContactStore> stores = new LinkedHashMap<>();
        Map<String, byte[]> keys = new HashMap<>();
        for (Map<String, Object> party : Json.objects(v, "participants")) {
            String name = Json.text(party, "name_text");
            SecretStore secrets = keep(SecretStore.memory());
            DeterministicRandom random = keep(DeterministicRandom.of(hex(party, "identity_random_seed")));
            Identity identity = keep(Identity.createWithRandom(secrets, name, random));
            assertArrayEquals(hex(party, "identity_public"), identity.publicKey(), name);
            keys.put(name, identity.publicKey());
            stores.put(name, keep(ContactStore.open(identity, directory.resolve(name + ".db"))));
        }
        Map<String, Map<String, Long>> ids = new HashMap<>();
        long t = Json.integer(v, "now");
        for (Map<String, Object> contact : Json.objects(v, "contacts")) {
            String owner = Json.text(contact, "owner_text");
            String peer = Json.text(contact, "peer_text");
            ContactStore store = stores.get(owner);
            long id = store.add(peer, keys.get(peer), hex(contact, "seed"), ExchangeMethod.QR, t - 7000);
            byte[] mine = hex(contact, "device_secret_mine");
            if (mine.length > 0) {
                store.setDeviceSecrets(id, mine, hex(contact, "device_secret_theirs"));
            }
            ids.computeIfAbsent(owner, k -> new HashMap<>()).put(peer, id);
        }
        return new Devices(stores, ids);
    }

    /**
     * The whole roll call made again as the generator made it: each device's random_seed, the
     * three joining the group room one after the other (slots 1, 2, 3) with every message
     * delivered in order; the HELLOs, the roster, the codes and SAIDs byte for byte; a second
     * later each one's due VIEW; then each listener's outcome for each contact's code.
     */
    @Test
    void rollcallVectorsReplay() throws IOException {
        assumeTestBuild();
        Map<String, Object> v = vectors();
        long t = Json.integer(v, "now");
        String code = Json.text(v, "meeting_code_text");
        Devices devices = devices(v);
        List<Map<String, Object>> people = Json.objects(v, "participants");
        List<DeterministicRandom> sources = new ArrayList<>();
        GroupRoom room = new GroupRoom();
        for (Map<String, Object> party : people) {
            DeterministicRandom random = keep(DeterministicRandom.of(hex(party, "random_seed")));
            sources.add(random);
            room.enter(keep(RollCall.create(devices.stores().get(Json.text(party, "name_text")), code, null, t,
                    random)), t);
        }
        assertEquals(Json.integer(v, "join_messages"), room.sent.size(), "messages of the joins");
        for (int i = 0; i < people.size(); i++) {
            Map<String, Object> party = people.get(i);
            String name = Json.text(party, "name_text");
            int slot = (int) Json.integer(party, "slot");
            assertEquals(slot, (int) room.slots.get(i), name);
            assertEquals(Json.text(v, "room_id"), room.at(i).room());
            byte[] hello = room.firstSent(slot, 1);
            assertEquals(Json.text(party, "hello"), HEX.formatHex(hello), name);
            assertEquals(Json.text(party, "hello_body"), HEX.formatHex(hello, 0, hello.length - 64), name);
            assertEquals(Json.text(party, "roll_call_key"), HEX.formatHex(hello, 3, 35), name);
            String tags = HEX.formatHex(hello, 69, hello.length - 64);
            for (Map<String, Object> tag : Json.objects(party, "tags_for_contacts")) {
                int at = tags.indexOf(Json.text(tag, "tag"));
                assertTrue(at >= 0 && at % 32 == 0, name + ": a tag for " + Json.text(tag, "to_text"));
            }
        }
        for (int i = 0; i < people.size(); i++) {
            RollCall call = room.at(i);
            assertEquals(Json.text(v, "roster"), HEX.formatHex(call.roster()));
            assertEquals(3, call.headCount());
            assertEquals(RollcallPhase.GATHERING, call.phase());
            call.confirmRoster(call.roster(), t, sources.get(i));
        }
        for (int i = 0; i < people.size(); i++) {
            room.at(i).confirmSaid(t, sources.get(i));
            assertEquals(RollcallPhase.SAID, room.at(i).phase());
            assertTrue(room.pump(t).isEmpty());
        }
        List<Map<String, Object>> saids = Json.objects(v, "saids");
        Map<String, String> codes = new HashMap<>();
        for (int i = 0; i < people.size(); i++) {
            Map<String, Object> said = saids.get(i);
            String name = Json.text(said, "name_text");
            assertEquals(Json.text(people.get(i), "name_text"), name);
            byte[] bytes = room.firstSent((int) Json.integer(people.get(i), "slot"), 2);
            assertEquals(Json.text(said, "said"), HEX.formatHex(bytes), name);
            assertEquals(Json.text(said, "code_text"), room.at(i).code());
            codes.put(name, Json.text(said, "code_text"));
        }
        // A second later each one's VIEW is due (it took SAIDs): the last VIEW each sends says who said.
        int before = room.sent.size();
        assertTrue(room.tick(t + 1).isEmpty());
        for (Map<String, Object> view : Json.objects(v, "views")) {
            int slot = (int) Json.integer(view, "slot");
            byte[] last = null;
            for (Sent s : room.sent.subList(before, room.sent.size())) {
                if (s.slot() == slot && s.message()[1] == 3) {
                    last = s.message();
                }
            }
            assertTrue(last != null, Json.text(view, "name_text"));
            assertEquals(Json.text(view, "view"), HEX.formatHex(last), Json.text(view, "name_text"));
        }
        List<String> names = people.stream().map(p -> Json.text(p, "name_text")).toList();
        List<Map<String, Object>> outcomes = Json.objects(v, "outcomes");
        assertFalse(outcomes.isEmpty());
        for (Map<String, Object> outcome : outcomes) {
            String listener = Json.text(outcome, "listener_text");
            String speaker = Json.text(outcome, "speaker_text");
            RollCall call = room.at(names.indexOf(listener));
            long index = indexOf(call, devices.ids().get(listener).get(speaker));
            assertEquals(state(Json.text(outcome, "state_text")), call.enterHeard(index, codes.get(speaker), t + 1),
                    listener + " hearing " + speaker);
        }
        // Ben and Cai share nothing: each is unknown to the other.
        for (int[] pair : new int[][] {{1, 2}, {2, 1}}) {
            RollCall.Participant other = atSlot(room.at(pair[0]), (int) Json.integer(people.get(pair[1]), "slot"));
            assertEquals(RollcallState.UNKNOWN, other.state());
            assertNull(other.contactId());
        }
    }

    /** Ana and Ben bound to one call, Cai to another: each HELLO, and what each device shows of the others. */
    @Test
    void rollcallBindingVectors() throws IOException {
        assumeTestBuild();
        Map<String, Object> v = vectors();
        long t = Json.integer(v, "now");
        Devices devices = devices(v);
        List<Map<String, Object>> bound = Json.objects(Json.object(v.get("bound")), "participants");
        GroupRoom room = new GroupRoom();
        for (Map<String, Object> party : bound) {
            DeterministicRandom random = keep(DeterministicRandom.of(hex(party, "random_seed")));
            room.enter(keep(RollCall.create(devices.stores().get(Json.text(party, "name_text")),
                    Json.text(v, "meeting_code_text"), hex(party, "binding"), t, random)), t);
        }
        for (int i = 0; i < bound.size(); i++) {
            Map<String, Object> party = bound.get(i);
            String name = Json.text(party, "name_text");
            byte[] hello = room.firstSent(room.slots.get(i), 1);
            assertEquals(Json.text(party, "hello"), HEX.formatHex(hello), name);
            assertEquals(1, hello[2], name + ": bound");
            assertEquals(Json.text(party, "bind"), HEX.formatHex(hello, 35, 67), name);
            List<String> seen = room.at(i).participants().stream().skip(1).map(p -> p.slot() + " " + p.state())
                    .toList();
            List<String> expected = Json.objects(party, "sees").stream()
                    .map(s -> Json.integer(s, "slot") + " " + state(Json.text(s, "state_text"))).toList();
            assertEquals(expected, seen, name);
        }
    }

    /**
     * Each case's messages fed, with the slots that carried them, to a fresh roll call of Ben's
     * (the same random seed: the same key and HELLO as in the roll call above) joined in slot 2
     * beside slots 1 and 3: all but the last are accepted, the last gives its result.
     */
    @Test
    void rollcallVectorRejections() throws IOException {
        assumeTestBuild();
        Map<String, Object> v = vectors();
        long t = Json.integer(v, "now");
        Devices devices = devices(v);
        Map<String, Map<String, Object>> people = new HashMap<>();
        for (Map<String, Object> party : Json.objects(v, "participants")) {
            people.put(Json.text(party, "name_text"), party);
        }
        List<Map<String, Object>> rejections = Json.objects(v, "rejections");
        assertFalse(rejections.isEmpty());
        for (Map<String, Object> rejection : rejections) {
            String context = Json.text(rejection, "case_text");
            Map<String, Object> receiver = people.get(Json.text(rejection, "receiver_text"));
            try (DeterministicRandom random = DeterministicRandom.of(hex(receiver, "random_seed"));
                    RollCall call = RollCall.create(devices.stores().get(Json.text(receiver, "name_text")),
                            Json.text(v, "meeting_code_text"), null, t, random)) {
                call.joined(2, new int[] {1, 3}, t);
                assertEquals(Json.text(receiver, "hello"), HEX.formatHex(call.nextOutgoing()), context);
                List<Map<String, Object>> messages = Json.objects(rejection, "messages");
                String result = Json.text(rejection, "result");
                for (int n = 0; n < messages.size(); n++) {
                    byte[] bytes = hex(messages.get(n), "message");
                    int slot = (int) Json.integer(messages.get(n), "slot");
                    if (n + 1 < messages.size() || result.equals("accepted")) {
                        call.receive(bytes, slot, t);
                    } else {
                        ItsMeException error = assertThrows(ItsMeException.class, () -> call.receive(bytes, slot, t),
                                context);
                        assertEquals("E_" + result.toUpperCase(Locale.ROOT), error.result().name(), context);
                    }
                }
            }
        }
    }

    // --- people in a group room -------------------------------------------------------

    /** A person: an identity in a memory secret store, its contacts, and the ids of its peers by name. */
    private record Person(String name, Identity identity, ContactStore contacts, Map<String, Long> ids) {
    }

    private Person person(String name) {
        SecretStore secrets = keep(SecretStore.memory());
        Identity identity = keep(Identity.create(secrets, name));
        ContactStore contacts = keep(ContactStore.open(identity, directory.resolve(name + "-contacts.db")));
        return new Person(name, identity, contacts, new HashMap<>());
    }

    /** A whole QR exchange, both confirming. */
    private static void befriend(Person a, Person b) {
        long when = NOW - 3600;
        try (Exchange atA = Exchange.qr(a.identity(), a.contacts(), when);
                Exchange atB = Exchange.qr(b.identity(), b.contacts(), when)) {
            atA.receive(atB.nextOutgoing(), when);
            atB.receive(atA.nextOutgoing(), when);
            assertEquals(atA.sas(), atB.sas());
            a.ids().put(b.name(), atA.confirm(when));
            b.ids().put(a.name(), atB.confirm(when));
        }
    }

    /** Ana knows Ben and Cai (verified by QR); Ben and Cai do not know each other; Dee knows no one. */
    private List<Person> people() {
        List<Person> people = List.of(person("Ana"), person("Ben"), person("Cai"), person("Dee"));
        befriend(people.get(0), people.get(1));
        befriend(people.get(0), people.get(2));
        return people;
    }

    /** Everyone's roll call, unbound, entering the room at {@code now} in this order. */
    private GroupRoom roomOf(List<Person> people, String code, long now) {
        GroupRoom room = new GroupRoom();
        for (Person p : people) {
            room.enter(keep(RollCall.create(p.contacts(), code, null, now)), now);
        }
        return room;
    }

    /** The participant that is contact {@code contactId}, present now. */
    private static RollCall.Participant participantOf(RollCall call, long contactId) {
        RollCall.Participant found = null;
        for (RollCall.Participant p : call.participants()) {
            if (Long.valueOf(contactId).equals(p.contactId()) && !p.left()) {
                found = p;
            }
        }
        assertTrue(found != null, "the contact, present");
        return found;
    }

    private static long indexOf(RollCall call, long contactId) {
        return participantOf(call, contactId).index();
    }

    /** The participant speaking from relay slot {@code slot}. */
    private static RollCall.Participant atSlot(RollCall call, int slot) {
        return call.participants().stream().filter(p -> Integer.valueOf(slot).equals(p.slot())).findFirst()
                .orElseThrow();
    }

    /** A well-formed code that is not {@code code}. */
    private static String otherThan(String code) {
        return code.equals("ALFA 000") ? "ALFA 001" : "ALFA 000";
    }

    @Test
    void meetingCodes() {
        String code = RollCall.newMeetingCode();
        assertTrue(code.matches("[2-9A-HJKMNP-Z]{4}-[2-9A-HJKMNP-Z]{4}"), code);
        assertEquals(16, ItsMeLibrary.ITSME_CALL_BINDING_MIN);
        assertEquals(64, ItsMeLibrary.ITSME_CALL_BINDING_MAX);
        assertEquals(133 + 16 * 2048, ItsMeLibrary.ITSME_ROLLCALL_MESSAGE_MAX);
        assumeTestBuild();
        try (DeterministicRandom one = DeterministicRandom.of(new byte[32]);
                DeterministicRandom two = DeterministicRandom.of(new byte[32])) {
            assertEquals(RollCall.newMeetingCode(one), RollCall.newMeetingCode(two));
        }
    }

    @Test
    void severalPeopleVerifiedADeviceChangedAndAStrangerUnknown() {
        assumeTestBuild();
        List<Person> people = people();
        Person ana = people.get(0);
        Person ben = people.get(1);
        Person cai = people.get(2);
        // Cai's device changed: it speaks with a device secret Ana does not hold, and holds none
        // of Ana's (the test build's itsme_store_set_device_secrets).
        cai.contacts().setDeviceSecrets(cai.ids().get("Ana"), new byte[16], new byte[0]);
        String code = RollCall.newMeetingCode();
        GroupRoom room = roomOf(people, code.toLowerCase(Locale.ROOT), NOW);
        assertEquals(room.at(0).room(), room.at(3).room());
        room.run(NOW + 1, NOW + 3);
        room.assertSettled(4);
        for (RollCall call : room.calls) {
            assertEquals(4, call.participants().size());
            assertEquals(new RollCall.Participant(0, null, null, RollcallState.UNKNOWN, false, true),
                    call.participant(0));
            assertEquals(RollcallPhase.GATHERING, call.phase());
        }
        RollCall atAna = room.at(0);
        assertEquals(new RollCall.Participant(atSlot(atAna, 2).index(), 2, ana.ids().get("Ben"),
                RollcallState.NOT_YET, false, true), atSlot(atAna, 2));
        assertEquals(ana.ids().get("Cai"), atSlot(atAna, 3).contactId());
        RollCall.Participant dee = atSlot(atAna, 4);
        assertEquals(RollcallState.UNKNOWN, dee.state());
        assertNull(dee.contactId());
        RollCall.Participant caiAtBen = atSlot(room.at(1), 3);
        assertEquals(RollcallState.UNKNOWN, caiAtBen.state());
        assertTrue(room.at(3).participants().stream().allMatch(p -> p.state() == RollcallState.UNKNOWN));

        List<String> codes = room.confirmAndSay(NOW + 4);
        assertTrue(room.pump(NOW + 4).isEmpty());
        List<String> names = List.of("Ana", "Ben", "Cai", "Dee");
        Object[][] expected = {
            {"Ana", "Ben", RollcallState.VERIFIED},
            {"Ana", "Cai", RollcallState.DEVICE_CHANGED},
            {"Ben", "Ana", RollcallState.VERIFIED},
            {"Cai", "Ana", RollcallState.VERIFIED_TAG_UNCHECKED},
        };
        for (Object[] row : expected) {
            int listener = names.indexOf((String) row[0]);
            RollCall call = room.at(listener);
            long index = indexOf(call, people.get(listener).ids().get((String) row[1]));
            String spoken = codes.get(names.indexOf((String) row[1])).toLowerCase(Locale.ROOT);
            assertEquals(row[2], call.enterHeard(index, spoken, NOW + 5), row[0] + " hearing " + row[1]);
            assertEquals(row[2], call.participant(index).state());
        }
        // Each outcome is recorded on the contact, as Online Verify records one.
        assertEquals(VerificationState.VERIFIED, ana.contacts().get(ana.ids().get("Ben")).state());
        assertEquals(VerificationState.DEGRADED, ana.contacts().get(ana.ids().get("Cai")).state());
        // A stranger's code; a contact checked already.
        assertThrows(ItsMeException.InvalidState.class, () -> room.at(1).enterHeard(caiAtBen.index(), codes.get(2),
                NOW + 5));
        assertThrows(ItsMeException.InvalidState.class,
                () -> room.at(0).enterHeard(atSlot(atAna, 2).index(), codes.get(1), NOW + 5));
        assertThrows(ItsMeException.InvalidState.class, () -> room.at(0).enterHeard(dee.index(), codes.get(3),
                NOW + 5));
        assertEquals(VerificationState.VERIFIED, ben.contacts().get(ben.ids().get("Ana")).state());
    }

    @Test
    void aLateJoinerStartsANewRoundAndTheChecksStay() {
        List<Person> people = people();
        Person ana = people.get(0);
        String code = RollCall.newMeetingCode();
        GroupRoom room = roomOf(people.subList(0, 3), code, NOW);
        room.run(NOW + 1, NOW + 2);
        room.assertSettled(3);
        byte[] firstRoster = room.at(0).roster();
        List<String> codes = room.confirmAndSay(NOW + 2);
        assertTrue(room.pump(NOW + 2).isEmpty());
        long ben = indexOf(room.at(0), ana.ids().get("Ben"));
        assertEquals(RollcallState.VERIFIED, room.at(0).enterHeard(ben, codes.get(1), NOW + 3));
        long cai = indexOf(room.at(0), ana.ids().get("Cai"));
        assertEquals(RollcallState.WRONG, room.at(0).enterHeard(cai, otherThan(codes.get(2)), NOW + 3));

        // Dee joins: a new roster, a new round for everyone.
        int dee = room.enter(keep(RollCall.create(people.get(3).contacts(), code, null, NOW + 4)), NOW + 4);
        room.run(NOW + 5, NOW + 6);
        room.assertSettled(4);
        assertFalse(Arrays.equals(firstRoster, room.at(0).roster()));
        for (RollCall call : room.calls) {
            assertEquals(4, call.participants().size());
            assertEquals(RollcallPhase.GATHERING, call.phase());
            assertThrows(ItsMeException.InvalidState.class, call::code);
        }
        assertTrue(room.at(dee).participants().stream().allMatch(p -> p.state() == RollcallState.UNKNOWN));
        // Typing before this round's roster is confirmed.
        assertThrows(ItsMeException.InvalidState.class, () -> room.at(0).enterHeard(cai, codes.get(2), NOW + 6));
        // The check made stays, shown and not to be typed again; a wrong code was of its round.
        assertEquals(RollcallState.VERIFIED, room.at(0).participant(ben).state());
        assertEquals(RollcallState.NOT_YET, room.at(0).participant(cai).state());
        List<String> again = room.confirmAndSay(NOW + 7);
        assertTrue(room.pump(NOW + 7).isEmpty());
        assertThrows(ItsMeException.InvalidState.class, () -> room.at(0).enterHeard(ben, again.get(1), NOW + 7));
        assertEquals(RollcallState.VERIFIED, room.at(0).enterHeard(cai, again.get(2), NOW + 7));
        long anaAtCai = indexOf(room.at(2), people.get(2).ids().get("Ana"));
        assertEquals(RollcallState.VERIFIED, room.at(2).enterHeard(anaAtCai, again.get(0), NOW + 8));
    }

    @Test
    void oneWhoLeavesAndStartsAgainIsANewParticipant() {
        List<Person> people = people();
        Person ana = people.get(0);
        String code = RollCall.newMeetingCode();
        GroupRoom room = roomOf(people.subList(0, 2), code, NOW);
        room.run(NOW + 1, NOW + 2);
        room.assertSettled(2);
        RollCall.Participant first = participantOf(room.at(0), ana.ids().get("Ben"));

        // Ben leaves (his application stops: his roll-call key is gone).
        assertTrue(room.disconnect(1, NOW + 3).isEmpty());
        room.at(1).close();
        RollCall atAna = room.at(0);
        assertEquals(1, atAna.headCount());
        RollCall.Participant gone = atAna.participant(first.index());
        assertTrue(gone.left());
        assertEquals(ana.ids().get("Ben"), gone.contactId());
        assertEquals(2, (int) gone.slot());
        assertEquals(RollcallPhase.GATHERING, atAna.phase());
        assertThrows(ItsMeException.InvalidState.class, () -> atAna.confirmRoster(atAna.roster(), NOW + 3));

        // He starts the roll call again: a new participant in a new slot, the old one listed as left.
        room.calls.set(1, keep(RollCall.create(people.get(1).contacts(), code, null, NOW + 4)));
        assertTrue(room.connect(1, NOW + 4).isEmpty());
        room.run(NOW + 5, NOW + 6);
        room.assertSettled(2);
        List<RollCall.Participant> all = atAna.participants();
        assertEquals(3, all.size());
        assertTrue(all.get((int) first.index()).left());
        RollCall.Participant again = participantOf(atAna, ana.ids().get("Ben"));
        assertNotEquals(first.index(), again.index());
        assertEquals(3, (int) again.slot());
        assertEquals(RollcallState.NOT_YET, again.state());
        assertEquals(2, room.at(1).participants().size(), "Ben's new roll call knows only Ana");
        List<String> codes = room.confirmAndSay(NOW + 7);
        assertTrue(room.pump(NOW + 7).isEmpty());
        assertThrows(ItsMeException.InvalidState.class, () -> atAna.enterHeard(first.index(), codes.get(1), NOW + 7));
        assertEquals(RollcallState.VERIFIED, atAna.enterHeard(again.index(), codes.get(1), NOW + 7));
    }

    @Test
    void aDroppedConnectionThatComesBackBringsItsRoundBack() {
        List<Person> people = people();
        Person ana = people.get(0);
        String code = RollCall.newMeetingCode();
        GroupRoom room = roomOf(people.subList(0, 3), code, NOW);
        room.run(NOW + 1, NOW + 2);
        room.assertSettled(3);
        byte[] roster = room.at(0).roster();
        List<String> codes = room.confirmAndSay(NOW + 3);
        assertTrue(room.pump(NOW + 3).isEmpty());
        room.run(NOW + 4, NOW + 5);
        long ben = indexOf(room.at(0), ana.ids().get("Ben"));

        // Ben's connection drops before Ana typed his code.
        assertTrue(room.disconnect(1, NOW + 6).isEmpty());
        for (int seat : new int[] {0, 2}) {
            RollCall call = room.at(seat);
            assertEquals(2, call.headCount());
            assertEquals(RollcallPhase.GATHERING, call.phase(), "a new roster, a new round");
            assertFalse(Arrays.equals(roster, call.roster()));
        }
        assertTrue(room.at(0).participant(ben).left());
        assertThrows(ItsMeException.InvalidState.class, () -> room.at(0).enterHeard(ben, codes.get(1), NOW + 6));
        room.run(NOW + 7, NOW + 8);

        // It comes back in a new slot, under the same name: the round is back, with its
        // confirmation, its code and the SAIDs taken.
        assertTrue(room.connect(1, NOW + 9).isEmpty());
        room.run(NOW + 10, NOW + 11);
        room.assertSettled(3);
        for (int seat = 0; seat < 3; seat++) {
            assertArrayEquals(roster, room.at(seat).roster());
            assertEquals(RollcallPhase.SAID, room.at(seat).phase());
            assertEquals(codes.get(seat), room.at(seat).code());
        }
        RollCall.Participant back = room.at(0).participant(ben);
        assertFalse(back.left());
        assertEquals(4, (int) back.slot());
        assertEquals(RollcallState.NOT_YET, back.state());
        assertEquals(RollcallState.VERIFIED, room.at(0).enterHeard(ben, codes.get(1), NOW + 12));
        long anaAtBen = indexOf(room.at(1), people.get(1).ids().get("Ana"));
        assertEquals(RollcallState.VERIFIED, room.at(1).enterHeard(anaAtBen, codes.get(0), NOW + 12));
    }

    @Test
    void theCallBindingSameCallOtherCallAndABindingOnOneSide() {
        List<Person> people = people();
        Person ana = people.get(0);
        String code = RollCall.newMeetingCode();
        byte[] one = new byte[32];
        Arrays.fill(one, (byte) 0x11);
        byte[] other = new byte[16];
        Arrays.fill(other, (byte) 0x22);
        // Ana and Ben bound to one call, Cai to another, Dee not bound.
        byte[][] bindings = {one, one, other, null};
        GroupRoom room = new GroupRoom();
        for (int i = 0; i < 4; i++) {
            room.enter(keep(RollCall.create(people.get(i).contacts(), code, bindings[i], NOW)), NOW);
        }
        room.run(NOW + 1, NOW + 3);
        room.assertSettled(4);
        assertEquals(List.of(
                new RollCall.Participant(atSlot(room.at(0), 2).index(), 2, ana.ids().get("Ben"), RollcallState.NOT_YET,
                        false, true),
                new RollCall.Participant(atSlot(room.at(0), 3).index(), 3, null, RollcallState.OTHER_CALL, false, true),
                new RollCall.Participant(atSlot(room.at(0), 4).index(), 4, null, RollcallState.BINDING_DIFFERS, false,
                        true)),
                bySlot(room.at(0)));
        assertEquals(List.of(RollcallState.OTHER_CALL, RollcallState.OTHER_CALL, RollcallState.BINDING_DIFFERS),
                bySlot(room.at(2)).stream().map(RollCall.Participant::state).toList());
        assertTrue(room.at(3).participants().stream().skip(1)
                .allMatch(p -> p.state() == RollcallState.BINDING_DIFFERS));

        List<String> codes = room.confirmAndSay(NOW + 4);
        assertTrue(room.pump(NOW + 4).isEmpty());
        long ben = indexOf(room.at(0), ana.ids().get("Ben"));
        assertEquals(RollcallState.VERIFIED, room.at(0).enterHeard(ben, codes.get(1), NOW + 5));
        // Cai, Ana's contact in another call: nothing to check his code against.
        long cai = atSlot(room.at(0), 3).index();
        assertThrows(ItsMeException.InvalidState.class, () -> room.at(0).enterHeard(cai, codes.get(2), NOW + 5));
        assertEquals(VerificationState.VERIFIED, ana.contacts().get(ana.ids().get("Cai")).state(), "as the QR left it");
    }

    /** The participants but this device, by slot. */
    private static List<RollCall.Participant> bySlot(RollCall call) {
        return call.participants().stream().skip(1).sorted(Comparator.comparing(RollCall.Participant::slot)).toList();
    }

    @Test
    void aDeviceHiddenFromAnotherShowsASplitAfterFiveSeconds() {
        List<Person> people = people();
        String code = RollCall.newMeetingCode();
        // The room hides Cai from Ben, and Ben from Cai; Ana sees both.
        GroupRoom room = new GroupRoom();
        room.hide(1, 2);
        for (Person p : people.subList(0, 3)) {
            room.enter(keep(RollCall.create(p.contacts(), code, null, NOW)), NOW);
        }
        assertEquals(List.of(3L, 2L, 2L), room.calls.stream().map(RollCall::headCount).toList());
        room.run(NOW + 1, NOW + 4);
        assertTrue(room.calls.stream().noneMatch(RollCall::split), "not yet: the roster changed less than 5 s ago");
        room.run(NOW + 5, NOW + 5);
        assertTrue(room.calls.stream().allMatch(RollCall::split), "every device sees the split");
        List<RollCall.Participant> atAna = room.at(0).participants();
        assertTrue(atAna.stream().skip(1).noneMatch(p -> p.left() || p.agrees()), atAna.toString());

        // The same three in an honest room: no split, however long it lasts.
        GroupRoom honest = roomOf(people.subList(0, 3), code, NOW);
        honest.run(NOW + 1, NOW + 9);
        honest.assertSettled(3);
    }

    @Test
    void aTamperedSaidIsRefusedAndWrongCodesLockARound() {
        List<Person> people = people();
        Person ana = people.get(0);
        String code = RollCall.newMeetingCode();
        GroupRoom room = roomOf(people.subList(0, 3), code, NOW);
        room.run(NOW + 1, NOW + 2);
        List<String> codes = room.confirmAndSay(NOW + 2);
        // Cai types Ana's code first; her SAID reaches everyone with one bit of an entry
        // flipped: its signature no longer verifies.
        long anaAtCai = indexOf(room.at(2), people.get(2).ids().get("Ana"));
        assertEquals(RollcallState.NOT_YET, room.at(2).enterHeard(anaAtCai, codes.get(0), NOW + 2));
        List<Refusal> refused = room.pumpThrough(NOW + 2, (seat, message) -> {
            if (seat == 0 && message[1] == 2) {
                assertEquals(saidBytes(2), message.length);
                byte[] copy = message.clone();
                copy[67 + 49] ^= 1;
                return copy;
            }
            return message;
        });
        assertEquals(List.of(1, 2), refused.stream().map(Refusal::seat).sorted().toList(), refused.toString());
        assertTrue(refused.stream().allMatch(r -> r.error() instanceof ItsMeException.AuthenticationFailed));
        // It changed nothing; the SAID sent again gets through and is checked.
        assertEquals(RollcallState.NOT_YET, room.at(2).participant(anaAtCai).state());
        room.run(NOW + 3, NOW + 6);
        assertEquals(RollcallState.VERIFIED, room.at(2).participant(anaAtCai).state());
        // Three wrong codes lock the round; wrong codes record nothing.
        long benAtAna = indexOf(room.at(0), ana.ids().get("Ben"));
        for (int i = 0; i < 3; i++) {
            assertEquals(RollcallState.WRONG, room.at(0).enterHeard(benAtAna, otherThan(codes.get(1)), NOW + 7));
        }
        assertEquals(RollcallState.WRONG, room.at(0).participant(benAtAna).state());
        assertThrows(ItsMeException.Locked.class, () -> room.at(0).enterHeard(benAtAna, codes.get(1), NOW + 7));
        assertEquals(VerificationState.VERIFIED, ana.contacts().get(ana.ids().get("Ben")).state());
    }

    /** The messages queued now, in order. */
    private static List<byte[]> drain(RollCall call) {
        List<byte[]> out = new ArrayList<>();
        for (byte[] m = call.nextOutgoing(); m.length > 0; m = call.nextOutgoing()) {
            out.add(m);
        }
        return out;
    }

    @Test
    void refusalsAndArgumentErrorsChangeNothingAndAClosedRollCallRefusesCalls() {
        List<Person> people = people();
        String code = RollCall.newMeetingCode();
        RollCall a = keep(RollCall.create(people.get(0).contacts(), code, null, NOW));
        RollCall b = keep(RollCall.create(people.get(1).contacts(), code, null, NOW));
        // Nothing is queued before the relay's "joined"; a tick does nothing.
        assertEquals(0, a.nextOutgoing().length);
        a.tick(NOW);
        assertEquals(0, a.nextOutgoing().length);
        assertEquals(1, a.headCount());
        assertFalse(a.split());
        // Slots are 1 to 65535: 0 is no slot.
        for (int slot : new int[] {0, 65536, -1}) {
            assertThrows(ItsMeException.InvalidArgument.class, () -> a.joined(slot, null, NOW));
            assertThrows(ItsMeException.InvalidArgument.class, () -> a.joined(1, new int[] {2, slot}, NOW));
            assertThrows(ItsMeException.InvalidArgument.class, () -> a.peerJoined(slot, NOW));
            assertThrows(ItsMeException.InvalidArgument.class, () -> a.peerLeft(slot, NOW));
        }
        assertThrows(ItsMeException.InvalidArgument.class, () -> a.joined(1, new int[0], -1));
        assertEquals(0, a.nextOutgoing().length, "a refused join queues nothing");
        a.joined(1, new int[0], NOW);
        a.peerJoined(2, NOW);
        b.joined(2, new int[] {1}, NOW);
        List<byte[]> fromA = drain(a);
        // The HELLO for the newcomer is still waiting: not queued twice (PROTOCOL.md 20.6).
        assertEquals(2, fromA.size());
        byte[] helloA = fromA.get(0);
        assertEquals(HELLO_BYTES, helloA.length);
        assertArrayEquals(new byte[] {2, 1, 0}, Arrays.copyOf(helloA, 3), "version 2, HELLO, not bound");
        assertEquals(viewBytes(1), fromA.get(1).length);
        List<byte[]> fromB = drain(b);
        // Its VIEW waits for the HELLO of slot 1, on its way (PROTOCOL.md 20.6, rule 4), or for the tick.
        assertEquals(1, fromB.size());
        byte[] helloB = fromB.get(0);
        b.tick(NOW);
        byte[] viewB = b.nextOutgoing();
        assertEquals(viewBytes(1), viewB.length);
        for (byte[] garbage : List.of(new byte[0], new byte[] {2}, new byte[] {1, 1}, new byte[] {2, 9},
                Arrays.copyOf(helloB, helloB.length - 1), "hello, roll call".getBytes(StandardCharsets.UTF_8))) {
            assertThrows(ItsMeException.MalformedMessage.class, () -> a.receive(garbage, 2, NOW));
        }
        byte[] forged = helloB.clone();
        forged[100] ^= 1;
        assertThrows(ItsMeException.AuthenticationFailed.class, () -> a.receive(forged, 2, NOW));
        assertThrows(ItsMeException.InvalidKey.class, () -> a.receive(helloA, 2, NOW));
        assertThrows(ItsMeException.InvalidState.class, () -> a.receive(viewB, 2, NOW)); // before its HELLO
        for (int slot : new int[] {0, 65536, -1}) {
            assertThrows(ItsMeException.InvalidArgument.class, () -> a.receive(helloB, slot, NOW));
        }
        assertThrows(ItsMeException.InvalidArgument.class, () -> a.receive(helloB, 2, -1));
        assertThrows(ItsMeException.InvalidArgument.class, () -> a.receive(null, 2, NOW));
        assertThrows(ItsMeException.InvalidArgument.class, () -> a.tick(-1));
        assertEquals(1, a.participants().size());
        assertThrows(ItsMeException.InvalidState.class, () -> a.confirmRoster(a.roster(), NOW)); // alone
        byte[] alone = a.roster();
        a.receive(helloB, 2, NOW);
        a.receive(helloB, 2, NOW); // a repeat: ignored
        assertEquals(1, a.headCount(), "a HELLO makes no one present");
        assertThrows(ItsMeException.InvalidState.class, () -> a.receive(viewB, 3, NOW)); // another slot's
        a.receive(viewB, 2, NOW);
        assertEquals(1, a.headCount(), "Bob's VIEW does not list Ana yet");
        byte[] viewA = a.nextOutgoing();
        assertEquals(viewBytes(2), viewA.length);
        b.receive(helloA, 1, NOW);
        b.receive(viewA, 1, NOW);
        assertEquals(2, b.headCount());
        byte[] listing = drain(b).stream().filter(m -> m[1] == 3).reduce((x, y) -> y).orElseThrow();
        a.receive(listing, 2, NOW);
        assertEquals(2, a.headCount());
        assertEquals(2, a.participants().size());
        assertThrows(ItsMeException.InvalidState.class, a::code);
        assertThrows(ItsMeException.InvalidState.class, () -> a.confirmSaid(NOW));
        assertThrows(ItsMeException.InvalidState.class, () -> a.enterHeard(1, "ECHO 042", NOW));
        assertThrows(ItsMeException.InvalidArgument.class, () -> a.confirmRoster(new byte[31], NOW));
        assertThrows(ItsMeException.InvalidArgument.class, () -> a.confirmRoster(null, NOW));
        assertThrows(ItsMeException.InvalidState.class, () -> a.confirmRoster(alone, NOW)); // no longer the roster
        a.confirmRoster(a.roster(), NOW);
        assertThrows(ItsMeException.InvalidState.class, () -> a.confirmRoster(a.roster(), NOW));
        for (String bad : List.of("ECHO 42", "ECHO 0042", "", "NOPE 042", "ECHO\0 042")) {
            assertThrows(ItsMeException.InvalidArgument.class, () -> a.enterHeard(1, bad, NOW));
        }
        assertThrows(ItsMeException.InvalidArgument.class, () -> a.enterHeard(1, null, NOW));
        for (long index : new long[] {0, 2, -1}) {
            assertThrows(ItsMeException.InvalidArgument.class, () -> a.enterHeard(index, "ECHO 042", NOW));
        }
        assertThrows(ItsMeException.InvalidArgument.class, () -> a.participant(2));
        a.confirmSaid(NOW);
        assertThrows(ItsMeException.InvalidState.class, () -> a.confirmSaid(NOW));
        byte[] said = drain(a).stream().filter(m -> m[1] == 2).findFirst().orElseThrow();
        assertEquals(saidBytes(1), said.length);
        assertThrows(ItsMeException.InvalidKey.class, () -> a.receive(said, 2, NOW));
        b.receive(said, 1, NOW); // kept until Bob's owner confirms and types
        b.receive(said, 1, NOW); // a repeat: ignored

        // The lifetime: 600 seconds, and a clock set back more than 30.
        assertThrows(ItsMeException.Expired.class, () -> b.tick(NOW - 31));
        assertEquals(RollcallPhase.EXPIRED, b.phase());
        assertThrows(ItsMeException.Expired.class, () -> a.receive(helloB, 2, NOW + 601));
        assertEquals(RollcallPhase.EXPIRED, a.phase());
        assertThrows(ItsMeException.Expired.class, () -> a.enterHeard(1, "ECHO 042", NOW + 1));
        assertThrows(ItsMeException.Expired.class, () -> a.tick(NOW + 1));
        assertFalse(a.lastError().isEmpty());

        // A meeting code with a typo; a NUL; bindings of the wrong length.
        ContactStore contacts = people.get(0).contacts();
        ItsMeException typo = assertThrows(ItsMeException.InvalidArgument.class,
                () -> RollCall.create(contacts, (code.charAt(0) == 'A' ? "B" : "A") + code.substring(1), null, NOW));
        assertTrue(typo.detail().contains("typo"), typo.detail());
        assertThrows(ItsMeException.InvalidArgument.class, () -> RollCall.create(contacts, "ABCD\0EFGH", null, NOW));
        for (int length : new int[] {0, ItsMeLibrary.ITSME_CALL_BINDING_MIN - 1,
                ItsMeLibrary.ITSME_CALL_BINDING_MAX + 1}) {
            assertThrows(ItsMeException.InvalidArgument.class,
                    () -> RollCall.create(contacts, code, new byte[length], NOW));
        }
        for (int length : new int[] {ItsMeLibrary.ITSME_CALL_BINDING_MIN,
                ItsMeLibrary.ITSME_CALL_BINDING_MAX}) {
            try (RollCall bound = RollCall.create(contacts, code, new byte[length], NOW)) {
                bound.joined(1, null, NOW);
                assertArrayEquals(new byte[] {2, 1, 1}, Arrays.copyOf(bound.nextOutgoing(), 3), "bound");
            }
        }
        assertThrows(ItsMeException.InvalidArgument.class, () -> RollCall.create(contacts, code, null, -1));
        a.close();
        a.close();
        assertThrows(IllegalStateException.class, a::nextOutgoing);
        assertThrows(IllegalStateException.class, () -> a.tick(NOW));
    }

    @Test
    void theRollCallOutlivesItsStoreHandle() {
        List<Person> people = people();
        Person ana = people.get(0);
        String code = RollCall.newMeetingCode();
        // A store handle of Ana's own, closed while the roll call goes on.
        ContactStore contacts = ContactStore.open(ana.identity(), directory.resolve("Ana-contacts.db"));
        GroupRoom room = new GroupRoom();
        room.enter(keep(RollCall.create(contacts, code, null, NOW)), NOW);
        contacts.close();
        room.enter(keep(RollCall.create(people.get(1).contacts(), code, null, NOW)), NOW);
        room.run(NOW + 1, NOW + 1);
        List<String> codes = room.confirmAndSay(NOW + 2);
        assertTrue(room.pump(NOW + 2).isEmpty());
        assertEquals(RollcallState.VERIFIED, room.at(0).enterHeard(1, codes.get(1), NOW + 2));
        assertEquals(VerificationState.VERIFIED, ana.contacts().get(ana.ids().get("Ben")).state());
    }

    // --- a JSON reader for the vectors (the binding has no dependency for one) -------

    /** Just enough JSON for the vector files: objects, arrays, strings, integers, true, false, null. */
    static final class Json {
        private final String text;
        private int at;

        private Json(String text) {
            this.text = text;
        }

        static Object parse(String text) {
            Json json = new Json(text);
            Object value = json.value();
            json.space();
            if (json.at != text.length()) {
                throw new IllegalArgumentException("JSON: text after the value at " + json.at);
            }
            return value;
        }

        @SuppressWarnings("unchecked")
        static Map<String, Object> object(Object value) {
            return (Map<String, Object>) value;
        }

        @SuppressWarnings("unchecked")
        static List<Object> array(Map<String, Object> v, String key) {
            return (List<Object>) v.get(key);
        }

        static List<Map<String, Object>> objects(Map<String, Object> v, String key) {
            return array(v, key).stream().map(Json::object).toList();
        }

        static String text(Map<String, Object> v, String key) {
            return (String) v.get(key);
        }

        static long integer(Map<String, Object> v, String key) {
            return (Long) v.get(key);
        }

        private void space() {
            while (at < text.length() && Character.isWhitespace(text.charAt(at))) {
                at++;
            }
        }

        private Object value() {
            space();
            char c = text.charAt(at);
            if (c == '{') {
                Map<String, Object> map = new LinkedHashMap<>();
                at++;
                space();
                if (text.charAt(at) == '}') {
                    at++;
                    return map;
                }
                while (true) {
                    space();
                    String key = string();
                    space();
                    expect(':');
                    map.put(key, value());
                    space();
                    if (text.charAt(at) == ',') {
                        at++;
                        continue;
                    }
                    expect('}');
                    return map;
                }
            }
            if (c == '[') {
                List<Object> list = new ArrayList<>();
                at++;
                space();
                if (text.charAt(at) == ']') {
                    at++;
                    return list;
                }
                while (true) {
                    list.add(value());
                    space();
                    if (text.charAt(at) == ',') {
                        at++;
                        continue;
                    }
                    expect(']');
                    return list;
                }
            }
            if (c == '"') {
                return string();
            }
            for (String word : new String[] {"true", "false", "null"}) {
                if (text.startsWith(word, at)) {
                    at += word.length();
                    return word.equals("null") ? null : Boolean.valueOf(word);
                }
            }
            int start = at;
            if (c == '-') {
                at++;
            }
            while (at < text.length() && Character.isDigit(text.charAt(at))) {
                at++;
            }
            return Long.parseLong(text.substring(start, at));
        }

        private String string() {
            expect('"');
            StringBuilder out = new StringBuilder();
            while (true) {
                char c = text.charAt(at++);
                if (c == '"') {
                    return out.toString();
                }
                if (c != '\\') {
                    out.append(c);
                    continue;
                }
                char e = text.charAt(at++);
                switch (e) {
                    case 'n' -> out.append('\n');
                    case 't' -> out.append('\t');
                    case 'r' -> out.append('\r');
                    case 'b' -> out.append('\b');
                    case 'f' -> out.append('\f');
                    case 'u' -> {
                        out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
                        at += 4;
                    }
                    default -> out.append(e);
                }
            }
        }

        private void expect(char c) {
            if (text.charAt(at) != c) {
                throw new IllegalArgumentException("JSON: expected " + c + " at " + at);
            }
            at++;
        }
    }
}

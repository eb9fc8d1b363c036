package org.itsme;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
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
 * The roll call through the JVM binding (docs/PROTOCOL.md section 20): rollcall.json replayed by
 * its three devices (identities from their random seeds, contacts with the vectors' seeds and
 * device secrets), each rejection's result; then three people who exchanged by QR, and a fourth
 * who is no one's contact, in an in-memory group room that gives each message its sender's slot.
 */
class RollCallTest {
    private static final long NOW = 1_800_000_500L;
    private static final HexFormat HEX = HexFormat.of();

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

    @Test
    void rollcallVectorsReplay() throws IOException {
        assumeTestBuild();
        Map<String, Object> v = vectors();
        long t = Json.integer(v, "now");
        String code = Json.text(v, "meeting_code_text");
        Devices devices = devices(v);
        List<Map<String, Object>> people = Json.objects(v, "participants");
        List<DeterministicRandom> sources = new ArrayList<>();
        List<RollCall> calls = new ArrayList<>();
        for (Map<String, Object> party : people) {
            DeterministicRandom random = keep(DeterministicRandom.of(hex(party, "random_seed")));
            sources.add(random);
            RollCall call = keep(RollCall.create(devices.stores().get(Json.text(party, "name_text")), code, t, random));
            assertEquals(Json.text(v, "room_id"), call.room());
            calls.add(call);
        }
        List<byte[]> hellos = new ArrayList<>();
        for (int i = 0; i < calls.size(); i++) {
            byte[] hello = calls.get(i).nextOutgoing();
            assertEquals(Json.text(people.get(i), "hello"), HEX.formatHex(hello), Json.text(people.get(i), "name_text"));
            hellos.add(hello);
        }
        for (int i = 0; i < calls.size(); i++) {
            int slot = (int) Json.integer(people.get(i), "slot");
            for (int j = 0; j < calls.size(); j++) {
                if (j != i) {
                    calls.get(j).receive(hellos.get(i), slot, t);
                }
            }
        }
        for (int i = 0; i < calls.size(); i++) {
            RollCall call = calls.get(i);
            byte[] roster = call.roster();
            assertEquals(Json.text(v, "roster"), HEX.formatHex(roster));
            assertEquals(RollcallPhase.GATHERING, call.phase());
            call.confirmRoster(roster, t, sources.get(i));
            call.confirmSaid(t, sources.get(i));
            assertEquals(RollcallPhase.SAID, call.phase());
        }
        List<Map<String, Object>> saids = Json.objects(v, "saids");
        Map<String, String> codes = new HashMap<>();
        for (int i = 0; i < calls.size(); i++) {
            Map<String, Object> said = saids.get(i);
            assertEquals(Json.text(people.get(i), "name_text"), Json.text(said, "name_text"));
            byte[] bytes = calls.get(i).nextOutgoing();
            assertEquals(Json.text(said, "said"), HEX.formatHex(bytes), Json.text(said, "name_text"));
            assertEquals(Json.text(said, "code_text"), calls.get(i).code());
            codes.put(Json.text(said, "name_text"), Json.text(said, "code_text"));
            int slot = (int) Json.integer(people.get(i), "slot");
            for (int j = 0; j < calls.size(); j++) {
                if (j != i) {
                    calls.get(j).receive(bytes, slot, t);
                }
            }
        }
        List<String> names = people.stream().map(p -> Json.text(p, "name_text")).toList();
        List<Map<String, Object>> outcomes = Json.objects(v, "outcomes");
        assertFalse(outcomes.isEmpty());
        for (Map<String, Object> outcome : outcomes) {
            String listener = Json.text(outcome, "listener_text");
            String speaker = Json.text(outcome, "speaker_text");
            RollCall call = calls.get(names.indexOf(listener));
            long id = devices.ids().get(listener).get(speaker);
            long index = call.participants().stream().filter(p -> Long.valueOf(id).equals(p.contactId())).findFirst()
                    .orElseThrow().index();
            RollcallState state = call.enterHeard(index, codes.get(speaker), t);
            assertEquals(Json.text(outcome, "state_text").toUpperCase(Locale.ROOT), state.name(),
                    listener + " hearing " + speaker);
        }
        // Ben and Cai share nothing: each is unknown to the other.
        for (int[] pair : new int[][] {{1, 2}, {2, 1}}) {
            int slot = (int) Json.integer(people.get(pair[1]), "slot");
            RollCall.Participant other = calls.get(pair[0]).participants().stream()
                    .filter(p -> Integer.valueOf(slot).equals(p.slot())).findFirst().orElseThrow();
            assertEquals(RollcallState.UNKNOWN, other.state());
            assertNull(other.contactId());
        }
    }

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
        String caiHello = Json.text(people.get("Cai"), "hello");
        List<Map<String, Object>> rejections = Json.objects(v, "rejections");
        assertFalse(rejections.isEmpty());
        for (Map<String, Object> rejection : rejections) {
            String context = Json.text(rejection, "case_text");
            Map<String, Object> receiver = people.get(Json.text(rejection, "receiver_text"));
            try (DeterministicRandom random = DeterministicRandom.of(hex(receiver, "random_seed"));
                    RollCall call = RollCall.create(devices.stores().get(Json.text(receiver, "name_text")),
                            Json.text(v, "meeting_code_text"), t, random)) {
                assertEquals(Json.text(receiver, "hello"), HEX.formatHex(call.nextOutgoing()), context);
                List<Object> messages = Json.array(rejection, "messages");
                String result = Json.text(rejection, "result");
                for (int n = 0; n < messages.size(); n++) {
                    String message = (String) messages.get(n);
                    int slot = message.equals(caiHello) ? 3 : 1;
                    byte[] bytes = HEX.parseHex(message);
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

    // --- three people in a group room ----------------------------------------------

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

    /** The relay's group room in memory: slots from 1 in the order of joining. */
    private static final class GroupRoom {
        final List<RollCall> members = new ArrayList<>();

        int join(RollCall call) {
            int slot = members.size() + 1;
            for (RollCall other : members) {
                other.peerJoined(slot);
            }
            members.add(call);
            return slot;
        }

        RollCall at(int slot) {
            return members.get(slot - 1);
        }

        /** Sends every queued message until quiet. */
        void pump(long now) {
            while (true) {
                List<byte[]> sent = new ArrayList<>();
                List<Integer> from = new ArrayList<>();
                for (int i = 0; i < members.size(); i++) {
                    for (byte[] m = members.get(i).nextOutgoing(); m.length > 0; m = members.get(i).nextOutgoing()) {
                        sent.add(m);
                        from.add(i + 1);
                    }
                }
                if (sent.isEmpty()) {
                    return;
                }
                for (int k = 0; k < sent.size(); k++) {
                    for (int i = 0; i < members.size(); i++) {
                        if (i + 1 != from.get(k)) {
                            members.get(i).receive(sent.get(k), from.get(k), now);
                        }
                    }
                }
            }
        }

        /** Every member confirms the roster it holds and says its code: the codes by slot, from 1. */
        List<String> confirmAndSay(long now) {
            List<String> codes = new ArrayList<>();
            for (RollCall call : members) {
                call.confirmRoster(call.roster(), now);
                assertEquals(RollcallPhase.CONFIRMED, call.phase());
                codes.add(call.code());
                call.confirmSaid(now);
            }
            return codes;
        }
    }

    private static long indexOf(RollCall call, long contactId) {
        return call.participants().stream().filter(p -> Long.valueOf(contactId).equals(p.contactId())).findFirst()
                .orElseThrow().index();
    }

    @Test
    void threePeopleCheckEachOtherAndAStrangerIsUnknown() {
        assumeTestBuild();
        Person ana = person("Ana");
        Person ben = person("Ben");
        Person cai = person("Cai");
        Person dee = person("Dee");
        befriend(ana, ben);
        befriend(ana, cai);
        String code = RollCall.newMeetingCode();
        assertTrue(code.matches("[2-9A-HJKMNP-Z]{4}-[2-9A-HJKMNP-Z]{4}"), code);
        try (DeterministicRandom one = DeterministicRandom.of(new byte[32]);
                DeterministicRandom two = DeterministicRandom.of(new byte[32])) {
            assertEquals(RollCall.newMeetingCode(one), RollCall.newMeetingCode(two));
        }
        GroupRoom room = new GroupRoom();
        for (Person p : List.of(ana, ben, cai)) {
            room.join(keep(RollCall.create(p.contacts(), code.toLowerCase(Locale.ROOT), NOW)));
        }
        assertEquals(room.at(1).room(), room.at(3).room());
        room.pump(NOW);
        for (RollCall call : room.members) {
            assertEquals(3, call.participants().size());
            assertEquals(new RollCall.Participant(0, null, null, RollcallState.UNKNOWN, false), call.participant(0));
            assertArrayEquals(room.at(1).roster(), call.roster());
        }
        RollCall.Participant caiAtBen = room.at(2).participants().stream()
                .filter(p -> Integer.valueOf(3).equals(p.slot())).findFirst().orElseThrow();
        assertEquals(RollcallState.UNKNOWN, caiAtBen.state());
        List<String> codes = room.confirmAndSay(NOW);
        room.pump(NOW);
        List<Person> people = List.of(ana, ben, cai);
        for (int listener = 0; listener < 3; listener++) {
            for (Map.Entry<String, Long> known : people.get(listener).ids().entrySet()) {
                RollCall call = room.members.get(listener);
                int speaker = List.of("Ana", "Ben", "Cai").indexOf(known.getKey());
                assertEquals(RollcallState.VERIFIED, call.enterHeard(indexOf(call, known.getValue()),
                        codes.get(speaker).toLowerCase(Locale.ROOT), NOW + 1));
            }
        }
        assertEquals(VerificationState.VERIFIED, ana.contacts().get(ana.ids().get("Ben")).state());
        assertThrows(ItsMeException.InvalidState.class, () -> room.at(2).enterHeard(caiAtBen.index(), codes.get(2), NOW + 1));

        // Dee joins late: a new round; the checks made stay.
        room.join(keep(RollCall.create(dee.contacts(), code, NOW + 2)));
        room.pump(NOW + 2);
        for (RollCall call : room.members) {
            assertEquals(4, call.participants().size());
            assertEquals(RollcallPhase.GATHERING, call.phase());
            assertThrows(ItsMeException.InvalidState.class, call::code);
        }
        long benAtAna = indexOf(room.at(1), ana.ids().get("Ben"));
        assertEquals(RollcallState.VERIFIED, room.at(1).participant(benAtAna).state());
        List<String> again = room.confirmAndSay(NOW + 3);
        room.pump(NOW + 3);
        // Three wrong codes lock the round.
        long anaAtBen = indexOf(room.at(2), ben.ids().get("Ana"));
        String wrong = again.get(0).equals("ALFA 000") ? "ALFA 001" : "ALFA 000";
        for (int i = 0; i < 3; i++) {
            assertEquals(RollcallState.WRONG, room.at(2).enterHeard(anaAtBen, wrong, NOW + 4));
        }
        assertThrows(ItsMeException.Locked.class, () -> room.at(2).enterHeard(anaAtBen, again.get(0), NOW + 4));
        // Ben leaves: he stays, marked.
        room.at(1).peerLeft(2);
        assertTrue(room.at(1).participant(benAtAna).left());
    }

    @Test
    void refusalsChangeNothingAndAClosedRollCallRefusesCalls() {
        Person ana = person("Ana");
        Person ben = person("Ben");
        befriend(ana, ben);
        String code = RollCall.newMeetingCode();
        RollCall a = keep(RollCall.create(ana.contacts(), code, NOW));
        RollCall b = keep(RollCall.create(ben.contacts(), code, NOW));
        byte[] helloA = a.nextOutgoing();
        byte[] helloB = b.nextOutgoing();
        assertEquals(28 + 16 * 32, helloA.length);
        assertEquals(0, a.nextOutgoing().length);
        for (byte[] garbage : List.of(new byte[0], new byte[] {1, 9}, Arrays.copyOf(helloB, helloB.length - 1),
                "hello, roll call".getBytes(StandardCharsets.UTF_8))) {
            assertThrows(ItsMeException.MalformedMessage.class, () -> a.receive(garbage, 2, NOW));
        }
        for (int slot : new int[] {0, 65536, -1}) {
            assertThrows(ItsMeException.InvalidArgument.class, () -> a.receive(helloB, slot, NOW));
            assertThrows(ItsMeException.InvalidArgument.class, () -> a.peerJoined(slot));
        }
        assertThrows(ItsMeException.InvalidArgument.class, () -> a.receive(null, 2, NOW));
        assertEquals(1, a.participants().size());
        assertThrows(ItsMeException.InvalidState.class, () -> a.confirmRoster(a.roster(), NOW)); // alone
        assertThrows(ItsMeException.InvalidState.class, a::code);
        assertThrows(ItsMeException.InvalidState.class, () -> a.confirmSaid(NOW));
        a.receive(helloB, 2, NOW);
        b.receive(helloA, 1, NOW);
        assertThrows(ItsMeException.InvalidArgument.class, () -> a.confirmRoster(new byte[31], NOW));
        assertThrows(ItsMeException.InvalidState.class, () -> a.confirmRoster(new byte[32], NOW));
        a.confirmRoster(a.roster(), NOW);
        for (String bad : List.of("ECHO 42", "ECHO 0042", "", "NOPE 042")) {
            assertThrows(ItsMeException.InvalidArgument.class, () -> a.enterHeard(1, bad, NOW));
        }
        assertThrows(ItsMeException.InvalidArgument.class, () -> a.enterHeard(1, "ECHO\0 042", NOW));
        assertThrows(ItsMeException.InvalidArgument.class, () -> a.enterHeard(0, "ECHO 042", NOW));
        assertThrows(ItsMeException.InvalidArgument.class, () -> a.participant(2));
        a.confirmSaid(NOW);
        byte[] said = a.nextOutgoing();
        assertEquals(67 + 50, said.length);
        assertThrows(ItsMeException.InvalidKey.class, () -> a.receive(said, 2, NOW));
        assertThrows(ItsMeException.Expired.class, () -> a.receive(helloB, 2, NOW + 601));
        assertEquals(RollcallPhase.EXPIRED, a.phase());
        assertFalse(a.lastError().isEmpty());
        ItsMeException typo = assertThrows(ItsMeException.InvalidArgument.class,
                () -> RollCall.create(ana.contacts(), (code.charAt(0) == 'A' ? "B" : "A") + code.substring(1), NOW));
        assertTrue(typo.detail().contains("typo"), typo.detail());
        a.close();
        a.close();
        assertThrows(IllegalStateException.class, a::nextOutgoing);
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

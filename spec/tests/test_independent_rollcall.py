"""Replay Tests/ProtocolVectors/rollcall.json through spec/independent/rollcall.py, the roll call
of docs/PROTOCOL.md section 20 written from that document alone, and test what the document
states that the vectors do not show, with the independent implementation on every side.

From the vectors: rcid and room_id from the meeting code; each presence tag from the seed, and
that it is in its HELLO; each HELLO byte for byte from its window, nonce, tags and padding tags,
and its hello_hash; the roster, on every device; each SAID byte for byte from its code and the
padding entries given, with each key, device tag and plaintext; the three devices rebuilt from
`contacts` and played through the whole roll call to the `outcomes`; and each `rejections` case
fed to a fresh roll call of its receiver.
"""

from __future__ import annotations

import itertools
import os
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from independent import protocol as P  # noqa: E402
from independent import rollcall as R  # noqa: E402
from test_protocol_independent import _cases, expect_keys, h, load, needs_vectors  # noqa: E402

OUTCOME_NAMES = {"verified": R.VERIFIED, "device_changed": R.DEVICE_CHANGED,
                 "verified_tag_unchecked": R.TAG_UNCHECKED}


def refused(code: str, fn, *args, **kwargs):
    """``fn`` raises a ProtocolError whose result code (1.1) is ``code``."""
    with pytest.raises(P.ProtocolError) as caught:
        fn(*args, **kwargs)
    assert P.result_code(caught.value) == code, f"expected {code}, got {caught.value!r}"


# --------------------------------------------------------------------------------------------
# The vectors
# --------------------------------------------------------------------------------------------

def _data():
    return load("rollcall.json")


def _participants(data):
    return {p["name_text"]: p for p in data["participants"]}


def _tags(hello: bytes) -> list[bytes]:
    return [hello[28 + 16 * i:44 + 16 * i] for i in range((len(hello) - 28) // 16)]


def _contacts(data, name):
    parts = _participants(data)
    return [R.RollCallContact(c["peer_text"], h(parts[c["peer_text"]]["identity_public"]),
                              h(c["seed"]),
                              P.ContactSecrets(h(c["device_secret_mine"]) or None,
                                               h(c["device_secret_theirs"]) or None))
            for c in data["contacts"] if c["owner_text"] == name]


def _device(data, name) -> R.RollCall:
    """A device of the vectors, rebuilt from `contacts`, its nonce and its padding tags."""
    p = _participants(data)[name]
    real = {h(t["tag"]) for t in p["tags_for_contacts"]}
    padding = [t for t in _tags(h(p["hello"])) if t not in real]
    return R.RollCall(data["meeting_code_text"], h(p["identity_public"]), _contacts(data, name),
                      data["now"], nonce=h(p["nonce"]), padding_tags=padding)


@needs_vectors
def test_rollcall_fields():
    data = _data()
    expect_keys(data, "contacts meeting_code_text now outcomes participants rcid rejections "
                      "room_id roster saids")
    for c in _cases(data, "contacts"):
        expect_keys(c, "owner_text peer_text seed device_secret_mine device_secret_theirs")
    for p in _cases(data, "participants"):
        expect_keys(p, "name_text slot identity_public identity_random_seed random_seed window "
                       "nonce tags_for_contacts hello hello_hash")
        for t in p["tags_for_contacts"]:
            expect_keys(t, "to_text tag")
    for s in _cases(data, "saids"):
        expect_keys(s, "name_text code code_text said entries")
        for e in s["entries"]:
            expect_keys(e, "for_text padding entry" if e["padding"] else
                        "for_text padding entry key device_secret device_tag plaintext")
    for o in _cases(data, "outcomes"):
        expect_keys(o, "listener_text speaker_text state_text")
    for r in _cases(data, "rejections"):
        expect_keys(r, "case_text receiver_text messages result")


@needs_vectors
def test_rollcall_ids():
    data = _data()
    code = data["meeting_code_text"]
    assert R.meeting_code(code) == code
    assert R.meeting_code(code[:4].lower() + "-" + code[4:]) == code
    assert R.rcid(code).hex() == data["rcid"]
    assert R.room_id(code).hex() == data["room_id"]
    assert R.room_name(code) == data["room_id"]
    refused("invalid_argument", R.meeting_code, code[:7] + ("2" if code[7] != "2" else "3"))


@needs_vectors
def test_rollcall_hellos():
    data = _data()
    parts = _participants(data)
    rc = h(data["rcid"])
    for name, p in parts.items():
        hello = h(p["hello"])
        w = P.window_of(data["now"])
        assert p["window"] == w
        contacts = _contacts(data, name)
        assert sorted(t["to_text"] for t in p["tags_for_contacts"]) == sorted(
            c.name for c in contacts)
        tags = _tags(hello)
        for t in p["tags_for_contacts"]:
            tag = R.presence_tag(h(_seed(data, name, t["to_text"])), rc, w, h(p["nonce"]),
                                 h(p["identity_public"]), h(parts[t["to_text"]]["identity_public"]))
            assert tag.hex() == t["tag"]
            assert tag in tags
        assert len(tags) == R.tag_count(len(contacts)) == 32
        assert len(hello) == 28 + 16 * len(tags)
        parsed = R.parse_hello(hello)
        assert (parsed.window, parsed.nonce) == (w, h(p["nonce"]))
        dev = _device(data, name)
        assert dev.hello(data["now"]) == hello
        assert dev.contact_tags == [h(t["tag"]) for t in sorted(
            p["tags_for_contacts"], key=lambda t: [c.name for c in contacts].index(t["to_text"]))]
        assert dev.hello_hash.hex() == p["hello_hash"] == P.sha256(hello).hex()


def _seed(data, owner, peer):
    (c,) = [c for c in data["contacts"] if c["owner_text"] == owner and c["peer_text"] == peer]
    return c["seed"]


def _meet(data) -> dict[str, R.RollCall]:
    """The three devices, each holding every HELLO."""
    parts = _participants(data)
    devs = {name: _device(data, name) for name in parts}
    for name, dev in devs.items():
        for other, p in parts.items():
            if other != name:
                assert dev.receive(p["slot"], h(p["hello"]), data["now"]) == "hello"
    return devs


@needs_vectors
def test_rollcall_roster():
    data = _data()
    parts = _participants(data)
    hashes = [h(p["hello_hash"]) for p in parts.values()]
    assert R.roster_hash(h(data["rcid"]), hashes).hex() == data["roster"]
    assert R.roster_hash(h(data["rcid"]), reversed(hashes)).hex() == data["roster"]
    devs = _meet(data)
    contacts_of = {name: {c.name for c in _contacts(data, name)} for name in parts}
    for name, dev in devs.items():
        assert dev.roster.hex() == data["roster"]
        view = dev.view(data["now"])
        assert set(view.contacts_present) == contacts_of[name]
        assert view.unknown == 2 - len(contacts_of[name])
        for other, p in parts.items():
            if other == name:
                continue
            c = dev.contact_of(h(p["hello_hash"]))
            assert (c.name if c else None) == (other if other in contacts_of[name] else None)


@needs_vectors
def test_rollcall_saids():
    data = _data()
    parts = _participants(data)
    devs = _meet(data)
    roster, rc = h(data["roster"]), h(data["rcid"])
    for s in _cases(data, "saids"):
        name = s["name_text"]
        dev = devs[name]
        me = parts[name]
        assert R.code_text(s["code"]) == s["code_text"]
        assert dev.confirm(roster, data["now"], code=s["code"]) == s["code_text"]
        order = [e["for_text"] for e in s["entries"]]
        assert order == sorted(order, key=lambda n: h(parts[n]["hello_hash"]))
        padding = {}
        for e in s["entries"]:
            peer = parts[e["for_text"]]
            assert e["padding"] == (dev.contact_of(h(peer["hello_hash"])) is None)
            assert len(h(e["entry"])) == 50
            if e["padding"]:
                padding[h(peer["hello_hash"])] = h(e["entry"])
                continue
            seed = h(_seed(data, name, e["for_text"]))
            key = R.code_key(seed, rc, roster, h(me["hello_hash"]), h(peer["hello_hash"]),
                             h(me["identity_public"]), h(peer["identity_public"]))
            assert key.hex() == e["key"] == dev.key_for(h(peer["hello_hash"])).hex()
            (c,) = [c for c in data["contacts"]
                    if c["owner_text"] == name and c["peer_text"] == e["for_text"]]
            assert e["device_secret"] == c["device_secret_mine"]
            dtag = R.device_tag(seed, h(me["identity_public"]), roster, h(e["device_secret"]))
            assert dtag.hex() == e["device_tag"] == dev.device_tag_for(h(peer["hello_hash"])).hex()
            plain = R.entry_plaintext(s["code"], dtag)
            assert plain.hex() == e["plaintext"]
            assert R.seal_entry(key, roster, s["code"], dtag).hex() == e["entry"]
            assert R.open_entry(key, roster, h(e["entry"])) == (s["code"], dtag)
        said = dev.said(data["now"], padding=padding)
        assert said.hex() == s["said"]
        assert len(said) == 67 + 50 * len(s["entries"])
        parsed = R.parse_said(said)
        assert parsed.speaker.hex() == me["hello_hash"] and parsed.roster == roster
        assert [e.hex() for e in parsed.entries] == [e["entry"] for e in s["entries"]]


def _play(data, typed_first: bool):
    parts = _participants(data)
    devs = _meet(data)
    now = data["now"]
    saids = {}
    for s in data["saids"]:
        dev = devs[s["name_text"]]
        dev.confirm(dev.roster, now, code=s["code"])
        padding = {h(parts[e["for_text"]]["hello_hash"]): h(e["entry"])
                   for e in s["entries"] if e["padding"]}
        saids[s["name_text"]] = dev.said(now, padding=padding)
    codes = {s["name_text"]: s["code_text"] for s in data["saids"]}

    def type_all():
        shown = {}
        for listener, dev in devs.items():
            for c in dev.contacts:
                hh = h(parts[c.name]["hello_hash"])
                shown[listener, c.name] = dev.hear(hh, codes[c.name], now)
        return shown

    if typed_first:
        shown = type_all()
        assert set(shown.values()) == {R.NOT_YET}
    for listener, dev in devs.items():
        for speaker, said in saids.items():
            if speaker != listener:
                assert dev.receive(parts[speaker]["slot"], said, now) == "said"
    if not typed_first:
        type_all()
    return devs


@needs_vectors
@pytest.mark.parametrize("typed_first", [False, True], ids=["said-then-typed", "typed-then-said"])
def test_rollcall_outcomes(typed_first):
    data = _data()
    parts = _participants(data)
    devs = _play(data, typed_first)
    expected = {(o["listener_text"], o["speaker_text"]): OUTCOME_NAMES[o["state_text"]]
                for o in _cases(data, "outcomes")}
    got = {}
    for listener, dev in devs.items():
        for speaker, p in parts.items():
            if speaker == listener:
                continue
            state = dev.state_of(h(p["hello_hash"]))
            if state == R.UNKNOWN:
                assert speaker not in {c.name for c in dev.contacts}
            else:
                got[listener, speaker] = state
    assert got == expected
    # The outcome is recorded on the contact as 10.1 says: device changed leaves it degraded.
    states = {(name, c.name): c.secrets.state for name, dev in devs.items() for c in dev.contacts}
    assert states == {("Ana", "Ben"): P.VERIFIED, ("Ana", "Cai"): P.DEGRADED,
                      ("Ben", "Ana"): P.VERIFIED, ("Cai", "Ana"): P.VERIFIED}
    # Once checked in a round, typing again for that participant is invalid_state.
    ana = devs["Ana"]
    refused("invalid_state", ana.hear, h(parts["Ben"]["hello_hash"]), "ALFA 000", data["now"])


def _rejection_ids():
    try:
        return [r["case_text"] for r in load("rollcall.json")["rejections"]]
    except (AssertionError, FileNotFoundError):
        return []


@needs_vectors
@pytest.mark.parametrize("case_text", _rejection_ids())
def test_rollcall_rejections(case_text):
    data = _data()
    parts = _participants(data)
    (case,) = [r for r in data["rejections"] if r["case_text"] == case_text]
    receiver = _device(data, case["receiver_text"])
    cai_hello = parts["Cai"]["hello"]
    *before, last = case["messages"]
    assert case["receiver_text"] == "Ben"

    def feed(m):
        return receiver.receive(3 if m == cai_hello else 1, h(m), data["now"])

    for m in before:
        feed(m)
    if case["result"] == "accepted":
        feed(last)
        return
    roster, held = receiver.roster, dict(receiver.participants)
    refused(case["result"], feed, last)
    # "each refusal leaves its state as it was"
    assert receiver.roster == roster and receiver.participants == held


# --------------------------------------------------------------------------------------------
# What the document states and the vectors do not show
# --------------------------------------------------------------------------------------------

NOW = 1_800_007_000
CODE = "WEFHTGWY"


class Person:
    """An identity with its contacts, made here."""

    def __init__(self, name: str):
        self.name = name
        self.pid = os.urandom(32)
        self.contacts: list[R.RollCallContact] = []

    def device(self, now: int = NOW, **kw) -> R.RollCall:
        return R.RollCall(CODE, self.pid, self.contacts, now, **kw)


def befriend(a: Person, b: Person, *, a_holds_b=True, b_holds_a=True):
    seed = os.urandom(32)
    sa, sb = os.urandom(16), os.urandom(16)
    a.contacts.append(R.RollCallContact(b.name, b.pid, seed,
                                        P.ContactSecrets(sa, sb if a_holds_b else None)))
    b.contacts.append(R.RollCallContact(a.name, a.pid, seed,
                                        P.ContactSecrets(sb, sa if b_holds_a else None)))
    return seed


_slots = itertools.count(1)


def join(*devices: R.RollCall, now: int = NOW):
    """Deliver every device's HELLO to every other device."""
    slot = {id(d): next(_slots) for d in devices}
    for d in devices:
        for e in devices:
            if d is not e:
                e.receive(slot[id(d)], d.hello(now), now)
    return slot


def slot_of(listener: R.RollCall, speaker: R.RollCall):
    """The relay slot ``listener`` took ``speaker``'s HELLO from: the one its SAID comes from."""
    return listener.participant(speaker.hello_hash).slot


def say(speaker: R.RollCall, *listeners: R.RollCall, now: int = NOW, confirm=True) -> bytes:
    if confirm:
        speaker.confirm(speaker.roster, now)
    said = speaker.said(now)
    for listener in listeners:
        listener.receive(slot_of(listener, speaker), said, now)
    return said


def trio():
    ana, ben, cai = Person("Ana"), Person("Ben"), Person("Cai")
    befriend(ana, ben)
    befriend(ana, cai)
    return ana, ben, cai


def test_hello_and_said_sizes_and_padding():
    ana, ben, cai = trio()
    d_ana, d_ben, d_cai = ana.device(), ben.device(), cai.device()
    for d in (d_ana, d_ben, d_cai):
        assert len(d.hello(NOW)) == 28 + 16 * 32
    join(d_ana, d_ben, d_cai)
    assert d_ben.roster == d_ana.roster == d_cai.roster
    s_ben = say(d_ben)
    s_ana = say(d_ana)
    # Every SAID of a round has the same size: Ben's entry for Cai (not his contact) is padding.
    assert len(s_ben) == len(s_ana) == 67 + 50 * 2
    parsed = R.parse_said(s_ben)
    cai_at = d_ben.others().index(d_cai.hello_hash)
    ana_at = d_ben.others().index(d_ana.hello_hash)
    assert len(parsed.entries[cai_at]) == 50
    assert parsed.entries[ana_at] == d_ben.entry_for(d_ana.hello_hash)
    # Cai's device can open neither entry of Ben's: Ben is not its contact, it keeps nothing.
    d_cai.receive(slot_of(d_cai, d_ben), s_ben, NOW)
    assert d_cai.state_of(d_ben.hello_hash) == R.UNKNOWN
    refused("invalid_state", d_cai.hear, d_ben.hello_hash, "ALFA 000", NOW)


def test_tag_count_and_store_limit():
    assert [R.tag_count(n) for n in (0, 1, 32, 33, 64, 65, 1025, 2048)] == [
        32, 32, 32, 64, 64, 128, 2048, 2048]
    refused("invalid_argument", R.tag_count, 2049)
    p = Person("Many")
    for i in range(33):
        p.contacts.append(R.RollCallContact(str(i), os.urandom(32), os.urandom(32),
                                            P.ContactSecrets(None, None)))
    hello = p.device().hello(NOW)
    assert len(hello) == 28 + 16 * 64
    tags = R.parse_hello(hello).tags
    assert list(tags) == sorted(tags)
    big = Person("Too many")
    big.contacts = [R.RollCallContact(str(i), os.urandom(32), os.urandom(32),
                                      P.ContactSecrets(None, None)) for i in range(2049)]
    refused("invalid_argument", big.device)


def test_contact_awaiting_confirmation_is_left_out():
    ana, ben = Person("Ana"), Person("Ben")
    befriend(ana, ben)
    ana.contacts[0].awaiting_confirmation = True
    d_ana, d_ben = ana.device(), ben.device()
    c = ana.contacts[0]
    assert d_ana.contact_tags == []
    tag = R.presence_tag(c.seed, d_ana.rcid, d_ana.window, d_ana.nonce, ana.pid, ben.pid)
    assert tag not in R.parse_hello(d_ana.hello(NOW)).tags
    join(d_ana, d_ben)
    assert d_ben.state_of(d_ana.hello_hash) == R.UNKNOWN
    assert d_ana.state_of(d_ben.hello_hash) == R.UNKNOWN


def test_given_padding_and_drawn_values():
    ana, ben = Person("Ana"), Person("Ben")
    befriend(ana, ben)
    pad = [bytes([i]) * 16 for i in range(1, 32)]
    d = ana.device(nonce=bytes(16), padding_tags=pad)
    assert sorted(R.parse_hello(d.hello(NOW)).tags) == sorted(pad + d.contact_tags)
    with pytest.raises(ValueError):
        ana.device(padding_tags=pad[:30])
    # The code: two bytes, the top bit cleared, drawn again while v >= 26000.
    assert R.draw_code_value([bytes.fromhex("6590"), bytes.fromhex("1393")]) == 5011
    assert R.draw_code_value([bytes.fromhex("ffff"), bytes.fromhex("e58f")]) == 25999
    assert R.draw_code_value([bytes.fromhex("8000")]) == 0
    d_ben = ben.device()
    join(d, d_ben)
    assert d.confirm(d.roster, NOW, draws=[bytes.fromhex("7fff"), bytes.fromhex("9393")]) \
        == "FOXTROT 011"
    assert R.draw_meeting_code(iter([0] * 7)) == "22222222"


def test_late_joiner_starts_a_new_round():
    ana, ben, cai = trio()
    d_ana, d_ben = ana.device(), ben.device()
    join(d_ana, d_ben)
    first = d_ben.roster
    d_ben.confirm(first, NOW)
    said_ana = say(d_ana, d_ben)
    assert d_ben.hear(d_ana.hello_hash, R.code_text(d_ana.code), NOW) == R.VERIFIED
    # Cai joins: his HELLO reaches both, and each sends its HELLO again for him.
    d_cai = cai.device(NOW + 40)
    for d in (d_ana, d_ben):
        assert d.receive(3, d_cai.hello(NOW + 40), NOW + 40) == "hello"
        d_cai.receive(1 if d is d_ana else 2, d.hello(NOW + 40), NOW + 40)
    assert d_ben.roster != first and d_ben.roster == d_ana.roster == d_cai.roster
    # The new round: nothing confirmed, no code, and a SAID of the old roster is refused.
    assert not d_ben.confirmed and d_ben.code is None
    refused("invalid_state", d_ben.receive, slot_of(d_ben, d_ana), said_ana, NOW + 41)
    refused("invalid_state", d_ben.confirm, first, NOW + 41)
    refused("invalid_state", d_ben.hear, d_ana.hello_hash, "ALFA 000", NOW + 41)
    refused("invalid_state", d_ana.said, NOW + 41)
    # Checks already made stay.
    assert d_ben.state_of(d_ana.hello_hash) == R.VERIFIED
    # A new confirmation, a new code, a new SAID; Ben checks Ana again in the new round.
    d_ben.confirm(d_ben.roster, NOW + 42)
    said2 = say(d_ana, d_ben, d_cai, now=NOW + 42)
    assert said2 != said_ana and len(said2) == 67 + 50 * 2
    assert d_ben.hear(d_ana.hello_hash, R.code_text(d_ana.code), NOW + 43) == R.VERIFIED
    d_cai.confirm(d_cai.roster, NOW + 43)
    assert d_cai.hear(d_ana.hello_hash, R.code_text(d_ana.code), NOW + 43) == R.VERIFIED


def test_codes_heard_and_received_are_forgotten_in_a_new_round():
    ana, ben, cai = trio()
    d_ana, d_ben, d_cai = ana.device(), ben.device(), cai.device()
    join(d_ana, d_ben)
    d_ben.confirm(d_ben.roster, NOW)
    d_ana.confirm(d_ana.roster, NOW)
    spoken = R.code_text(d_ana.code)
    assert d_ben.hear(d_ana.hello_hash, spoken, NOW) == R.NOT_YET  # typed before the SAID
    d_ben.receive(9, d_cai.hello(NOW), NOW)
    d_ana.receive(9, d_cai.hello(NOW), NOW)
    d_cai.receive(1, d_ana.hello(NOW), NOW)
    d_cai.receive(2, d_ben.hello(NOW), NOW)
    assert d_ana.code is None  # the round's code is gone with it
    d_ben.confirm(d_ben.roster, NOW)
    d_ana.confirm(d_ana.roster, NOW, code=(P.parse_voice_code(spoken) + 1) % R.CODE_VALUES)
    d_ben.receive(slot_of(d_ben, d_ana), d_ana.said(NOW), NOW)
    # The code typed in the round before was forgotten: nothing is compared yet.
    assert d_ben.state_of(d_ana.hello_hash) == R.NOT_YET
    assert d_ben.hear(d_ana.hello_hash, R.code_text(d_ana.code), NOW) == R.VERIFIED


def test_typing_rules():
    ana, ben, cai = trio()
    d_ana, d_ben, d_cai = ana.device(), ben.device(), cai.device()
    join(d_ana, d_ben, d_cai)
    # Before the roster is confirmed, typing is refused.
    refused("invalid_state", d_ben.hear, d_ana.hello_hash, "ECHO 042", NOW)
    d_ben.confirm(d_ben.roster, NOW)
    # Not a contact (Cai is unknown to Ben), this device itself, no participant at all.
    refused("invalid_state", d_ben.hear, d_cai.hello_hash, "ECHO 042", NOW)
    refused("invalid_state", d_ben.hear, d_ben.hello_hash, "ECHO 042", NOW)
    refused("invalid_state", d_ben.hear, bytes(32), "ECHO 042", NOW)
    # Not a NATO word and three digits: invalid_argument, never counted.
    for text in ("ECHO 42", "ECHO 0042", "EKKO 042", "ECHO\t042", "ＥCHO 042", "ECHO  042"):
        refused("invalid_argument", d_ben.hear, d_ana.hello_hash, text, NOW)
    say(d_ana, d_ben)
    right = R.code_text(d_ana.code)
    wrong = R.code_text((d_ana.code + 1) % R.CODE_VALUES)
    assert d_ben.hear(d_ana.hello_hash, wrong, NOW) == R.WRONG
    for _ in range(4):
        refused("invalid_argument", d_ben.hear, d_ana.hello_hash, "nope", NOW)
    assert d_ben.hear(d_ana.hello_hash, "  " + right.lower().replace(" ", "-") + " ", NOW) \
        == R.VERIFIED


def test_three_wrong_codes_lock_until_a_new_round():
    ana, ben, cai = trio()
    d_ana, d_ben = ana.device(), ben.device()
    join(d_ana, d_ben)
    d_ben.confirm(d_ben.roster, NOW)
    say(d_ana, d_ben)
    right = R.code_text(d_ana.code)
    for i in range(1, 4):
        assert d_ben.hear(d_ana.hello_hash, R.code_text((d_ana.code + i) % R.CODE_VALUES),
                          NOW) == R.WRONG
    assert d_ben.locked(d_ana.hello_hash)
    refused("locked", d_ben.hear, d_ana.hello_hash, right, NOW)
    refused("locked", d_ben.hear, d_ana.hello_hash, "not even a code", NOW)
    assert ben.contacts[0].secrets.state == P.UNVERIFIED  # a wrong code records nothing
    # A new participant, a new round: the limit starts again.
    d_cai = cai.device()
    d_ben.receive(5, d_cai.hello(NOW), NOW)
    d_ana.receive(5, d_cai.hello(NOW), NOW)
    assert not d_ben.locked(d_ana.hello_hash)
    assert d_ben.state_of(d_ana.hello_hash) == R.WRONG
    d_ben.confirm(d_ben.roster, NOW)
    say(d_ana, d_ben)
    assert d_ben.hear(d_ana.hello_hash, R.code_text(d_ana.code), NOW) == R.VERIFIED


def test_confirm_and_said_rules():
    ana, ben = Person("Ana"), Person("Ben")
    befriend(ana, ben)
    d_ana, d_ben = ana.device(), ben.device()
    refused("invalid_state", d_ana.said, NOW)  # nothing confirmed: no code to say
    join(d_ana, d_ben)
    refused("invalid_state", d_ana.confirm, os.urandom(32), NOW)
    refused("invalid_state", d_ana.said, NOW)
    d_ana.confirm(d_ana.roster, NOW)
    refused("invalid_state", d_ana.confirm, d_ana.roster, NOW)  # twice in one round
    said = d_ana.said(NOW)
    refused("invalid_state", d_ana.said, NOW)  # one SAID per round
    assert d_ben.receive(slot_of(d_ben, d_ana), said, NOW) == "said"
    assert d_ben.receive(slot_of(d_ben, d_ana), said, NOW) is None  # a repeat is ignored


def test_refused_entries():
    ana, ben = Person("Ana"), Person("Ben")
    befriend(ana, ben)
    d_ana, d_ben = ana.device(), ben.device()
    join(d_ana, d_ben)
    d_ben.confirm(d_ben.roster, NOW)
    d_ana.confirm(d_ana.roster, NOW)
    said = bytearray(d_ana.said(NOW))
    said[-1] ^= 1  # altered by the relay
    d_ben.receive(slot_of(d_ben, d_ana), bytes(said), NOW)
    assert d_ben.hear(d_ana.hello_hash, R.code_text(d_ana.code), NOW) == R.REFUSED
    assert R.OUTCOME_RESULT[R.REFUSED] == "authentication_failed"
    assert ben.contacts[0].secrets.state == P.UNVERIFIED
    refused("invalid_state", d_ben.hear, d_ana.hello_hash, R.code_text(d_ana.code), NOW)
    # An entry that opens but carries a value of 26000 or more is refused too.
    key = d_ana.key_for(d_ben.hello_hash)
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
    bad = ChaCha20Poly1305(key).encrypt(bytes(12), (26000).to_bytes(2, "big") + bytes(32),
                                        R.entry_aad(d_ana.roster))
    refused("authentication_failed", R.open_entry, key, d_ana.roster, bad)
    # An entry sealed for another participant does not open for this one.
    refused("authentication_failed", R.open_entry, os.urandom(32), d_ana.roster,
            d_ana.entry_for(d_ben.hello_hash))


def test_hello_refusals_and_repeats():
    ana, ben, cai = trio()
    d_ana, d_ben, d_cai = ana.device(), ben.device(), cai.device()
    assert d_ana.receive(1, d_ana.hello(NOW), NOW) is None  # its own HELLO reflected
    assert d_ana.receive(2, d_ben.hello(NOW), NOW) == "hello"
    assert d_ana.receive(7, d_ben.hello(NOW), NOW) is None  # a replay from another slot
    refused("malformed_message", d_ana.receive, 2, d_cai.hello(NOW), NOW)  # second from slot 2
    refused("malformed_message", d_ana.receive, 3, b"", NOW)
    refused("malformed_message", d_ana.receive, 3, b"\x01", NOW)
    # The window: at most 20 windows before the receiver's, at most 1 after.
    w = P.window_of(NOW)
    for dw, ok in ((-20, True), (-21, False), (1, True), (2, False)):
        other = Person("x").device(NOW + 30 * dw)
        assert other.window == w + dw
        fn = d_cai.receive
        if ok:
            assert fn(100 + dw, other.hello(NOW + 30 * dw), NOW) == "hello"
        else:
            refused("invalid_argument", fn, 100 + dw, other.hello(NOW + 30 * dw), NOW)


def test_at_most_fifty_participants():
    host = Person("Host").device()
    for i in range(49):
        assert host.receive(i, Person(str(i)).device().hello(NOW), NOW) == "hello"
    assert len(host.participants) == 50
    refused("invalid_argument", host.receive, 49, Person("51st").device().hello(NOW), NOW)
    assert len(host.participants) == 50
    host.confirm(host.roster, NOW)
    assert len(host.said(NOW)) == 67 + 50 * 49  # all padding: none is a contact


def test_said_refusals():
    ana, ben, cai = trio()
    d_ana, d_ben, d_cai = ana.device(), ben.device(), cai.device()
    join(d_ana, d_ben, d_cai)
    d_ana.confirm(d_ana.roster, NOW)
    said = d_ana.said(NOW)
    a = slot_of(d_ben, d_ana)
    refused("malformed_message", d_ben.receive, a, said + bytes(50), NOW)
    no_entry = said[:66] + b"\x00"
    refused("malformed_message", d_ben.receive, a, no_entry, NOW)
    for at, value in ((0, 2), (1, 3)):  # version 2; type 3
        forged = bytearray(said)
        forged[at] = value
        refused("malformed_message", d_ben.receive, a, bytes(forged), NOW)
    # k other than the roster's size minus one, on this device's roster.
    short = R.said_message(d_ana.hello_hash, d_ana.roster, R.parse_said(said).entries[:1])
    refused("malformed_message", d_ben.receive, a, short, NOW)
    assert d_ben.receive(a, said, NOW) == "said"
    # A device alone has nothing to confirm (no SAID of 0 entries).
    alone = Person("Alone").device()
    assert alone.roster == R.roster_hash(alone.rcid, [alone.hello_hash])
    refused("invalid_state", alone.confirm, alone.roster, NOW)


def test_said_from_another_slot_is_refused_and_blocks_nothing():
    """20.4: "a SAID that came from another relay slot than its speaker's HELLO:
    invalid_state" -- another participant cannot speak for one, nor block one by sending a
    SAID in its name first."""
    ana, ben, cai = trio()
    d_ana, d_ben, d_cai = ana.device(), ben.device(), cai.device()
    join(d_ana, d_ben, d_cai)
    assert slot_of(d_ana, d_ben) != slot_of(d_ana, d_cai)
    d_ana.confirm(d_ana.roster, NOW)
    d_cai.confirm(d_cai.roster, NOW)
    cai_said = d_cai.said(NOW)
    # Ben, from his own slot, sends a SAID in Cai's name before Cai's own arrives at Ana's
    # device: Cai's real SAID, replayed, and one with an entry of Ben's making in it.
    forged = R.said_message(d_cai.hello_hash, d_cai.roster,
                            [os.urandom(R.ENTRY_BYTES) for _ in range(2)])
    for impostor in (forged, cai_said):
        roster, held = d_ana.roster, dict(d_ana.participants)
        refused("invalid_state", d_ana.receive, slot_of(d_ana, d_ben), impostor, NOW)
        assert d_ana.roster == roster and d_ana.participants == held
        assert d_ana.state_of(d_cai.hello_hash) == R.NOT_YET
    # Ana typed Cai's code meanwhile: nothing is compared, nothing counted.
    assert d_ana.hear(d_cai.hello_hash, R.code_text(d_cai.code), NOW) == R.NOT_YET
    assert not d_ana.locked(d_cai.hello_hash)
    # Cai's real SAID, from his slot, is taken (not a "second, different SAID") and verified.
    assert d_ana.receive(slot_of(d_ana, d_cai), cai_said, NOW) == "said"
    assert d_ana.state_of(d_cai.hello_hash) == R.VERIFIED
    assert ana.contacts[1].name == "Cai" and ana.contacts[1].secrets.state == P.VERIFIED
    # The forged one from Cai's slot is now a second, different SAID of his round.
    refused("malformed_message", d_ana.receive, slot_of(d_ana, d_cai), forged, NOW)


def test_expired_after_600_seconds():
    ana, ben = Person("Ana"), Person("Ben")
    befriend(ana, ben)
    d_ana, d_ben = ana.device(), ben.device()
    join(d_ana, d_ben, now=NOW + 600)
    d_ana.confirm(d_ana.roster, NOW + 600)
    said = d_ana.said(NOW + 600)
    for call in (lambda: d_ben.hello(NOW + 601), lambda: d_ben.receive(slot_of(d_ben, d_ana), said, NOW + 601),
                 lambda: d_ben.confirm(d_ben.roster, NOW + 601), lambda: d_ben.view(NOW + 601),
                 lambda: d_ben.said(NOW + 601),
                 lambda: d_ben.hear(d_ana.hello_hash, "ECHO 042", NOW + 601)):
        refused("expired", call)
    refused("invalid_argument", d_ben.hello, -1)


def test_device_secrets_of_a_pin_update():
    """20.5 step 3: dtag(S) against the contact's current, pending and previous secrets, as
    Online Verify does (11.3 with 10.3)."""
    ana, ben = Person("Ana"), Person("Ben")
    befriend(ana, ben)
    a_c, b_c = ana.contacts[0].secrets, ben.contacts[0].secrets
    # Ben (initiator) committed new secrets; Ana (responder) holds them pending, not
    # committed (her DONE was lost).
    a_new, b_new = os.urandom(16), os.urandom(16)
    b_c.store_pending(b_new, a_new, committed=True)
    a_c.store_pending(a_new, b_new, committed=False)
    d_ana, d_ben = ana.device(), ben.device()
    join(d_ana, d_ben)
    d_ana.confirm(d_ana.roster, NOW)
    say(d_ben, d_ana)
    assert d_ana.hear(d_ben.hello_hash, R.code_text(d_ben.code), NOW) == R.VERIFIED
    # Ben says his new secret; Ana heard her pending one: the update completes on her side.
    assert a_c.pending is None and a_c.theirs == b_new and a_c.mine == a_new
    # Ben hears Ana's old secret, which he still accepts as current.
    say(d_ana, d_ben, confirm=False)
    assert d_ben.hear(d_ana.hello_hash, R.code_text(d_ana.code), NOW) == R.VERIFIED


def test_group_room_forwarding():
    """15.9: the relay forwards u16(slot) || payload; a device sends its HELLO again on every
    peer-joined."""
    ana, ben = Person("Ana"), Person("Ben")
    befriend(ana, ben)
    d_ana, d_ben = ana.device(), ben.device()
    hello = d_ana.peer_joined(NOW)
    assert hello == d_ana.hello(NOW)
    assert d_ben.receive_forwarded((1).to_bytes(2, "big") + hello, NOW) == "hello"
    refused("malformed_message", d_ben.receive_forwarded,
            (1).to_bytes(2, "big") + Person("x").device().hello(NOW), NOW)
    refused("malformed_message", d_ben.receive_forwarded, b"\x00", NOW)
    assert d_ben.state_of(d_ana.hello_hash) == R.NOT_YET

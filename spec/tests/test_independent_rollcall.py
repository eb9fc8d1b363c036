"""Replay Tests/ProtocolVectors/rollcall.json through spec/independent/rollcall.py, the roll call
of docs/PROTOCOL.md section 20 (message version 2) written from that document alone, and test
what the document states that the vectors do not show, with the independent implementation on
every side.

From the vectors: rcid, room_id and sid from the meeting code; each presence tag, HELLO body,
signature and name from the roll-call key seeds (Ed25519 is deterministic: byte for byte); the
roster; each VIEW; each SAID entry (key, device tag, plaintext, entry) and each SAID; the three
devices rebuilt from `contacts` and played through an in-order group room to the `outcomes`,
with the messages of Cai's join counted; the bound part's sid, bind, HELLOs and what each device
shows; and each `rejections` case fed to a fresh roll call of Ben's joined in slot 2 beside
slots 1 and 3.

Beyond the vectors: the claims of section 20 (refusals, copies and replays, a stranger answering
first, leaving and rejoining, clocks apart, relaying both ways, rounds, the sending rules of 20.6
and their costs) with in-memory group rooms, one in order and one that drops, duplicates,
reorders and delays at random (seeded).
"""

from __future__ import annotations

import heapq
import pathlib
import random
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from independent import protocol as P  # noqa: E402
from independent import rollcall as R  # noqa: E402
from test_protocol_independent import _cases, expect_keys, h, load, needs_vectors  # noqa: E402


def refused(code: str, fn, *args, **kwargs):
    """``fn`` raises a ProtocolError whose result code (1.1) is ``code``."""
    with pytest.raises(P.ProtocolError) as caught:
        fn(*args, **kwargs)
    assert P.result_code(caught.value) == code, f"expected {code}, got {caught.value!r}"


def resign(rk_seed: bytes, rc: bytes, body: bytes) -> bytes:
    return R.sign_body(rk_seed, rc, body)


# --------------------------------------------------------------------------------------------
# In-memory group rooms (15.9)
# --------------------------------------------------------------------------------------------

NOW = 1_800_007_000
CODE = "WEFHTGWY"


class Room:
    """A group room: slots from 1, the events of 15.9, each binary message forwarded to every
    other peer.  With the defaults it delivers everything at once and in order; ``drop``,
    ``dup`` and ``delays`` (seconds, chosen at random per copy) make it lossy, with duplicates
    and reordering.  Events are never lost, and a message from a slot is delivered only while
    the receiver has been told of that slot (as 15.9's order guarantees).  ``hide`` is a set
    of (a, b) slot pairs whose devices are never told of each other nor get each other's
    messages.  Each device is fed everything due before it sends (20.6: one VIEW for all)."""

    def __init__(self, t: float = NOW, *, rng: random.Random | None = None, drop: float = 0.0,
                 dup: float = 0.0, delays: tuple = (0,)):
        self.t = t
        self.rng = rng or random.Random(0)
        self.drop, self.dup, self.delays = drop, dup, delays
        self.devices: dict[int, R.RollCall] = {}
        self.offset: dict[int, float] = {}
        self.known: dict[int, set] = {}
        self.pending: dict[int, list] = {}
        self.next_slot = 1
        self.counter = 0
        self.sent = 0
        self.log: list = []  # (time, slot, message) of every message sent
        self.errors: list = []  # (receiver slot, sender slot, result code)
        self.hide: set = set()
        self.on_message = None  # a stranger's hook: called with (slot, message)

    def hidden(self, a: int, b: int) -> bool:
        return (a, b) in self.hide or (b, a) in self.hide

    def now(self, slot: int) -> float:
        return self.t + self.offset[slot]

    def _push(self, to: int, at: float, item) -> None:
        self.counter += 1
        heapq.heappush(self.pending[to], (at, self.counter, item))

    def join(self, device: R.RollCall, offset: float = 0, settle: bool = True) -> int:
        slot = self.next_slot
        self.next_slot += 1
        peers = [s for s in sorted(self.devices) if not self.hidden(slot, s)]
        self.devices[slot], self.offset[slot] = device, offset
        self.known[slot], self.pending[slot] = set(), []
        self._push(slot, self.t, ("joined", slot, peers))
        for s in peers:
            self._push(s, self.t, ("peer-joined", slot))
        if settle:
            self.settle()
        return slot

    def leave(self, slot: int, settle: bool = True) -> None:
        """A peer leaves (or its connection drops): the others get peer-left."""
        del self.devices[slot]
        for s in self.devices:
            if slot in self.known[s] or any(i[2] == ("peer-joined", slot) for i in self.pending[s]):
                self._push(s, self.t, ("peer-left", slot))
        if settle:
            self.settle()

    def send_raw(self, slot: int, message: bytes, to: list[int] | None = None) -> None:
        """A message sent from ``slot`` (a stranger's, or a copy)."""
        for r in (to if to is not None else self.devices):
            if r != slot and not self.hidden(r, slot):
                self._push(r, self.t, ("msg", slot, message))

    def _forward(self, slot: int, message: bytes) -> None:
        self.sent += 1
        self.log.append((self.t, slot, message))
        for r in self.devices:
            if r == slot or self.hidden(r, slot):
                continue
            copies = 0 if self.rng.random() < self.drop else 1
            if copies and self.rng.random() < self.dup:
                copies = 2
            for _ in range(copies):
                self._push(r, self.t + self.rng.choice(self.delays), ("msg", slot, message))
        if self.on_message is not None:
            self.on_message(slot, message)

    def _deliver(self) -> bool:
        any_delivered = False
        for r in list(self.devices):
            queue, due = self.pending[r], []
            while queue and queue[0][0] <= self.t + 1e-9:
                due.append(heapq.heappop(queue)[2])
            device = self.devices[r]
            for item in due:
                any_delivered = True
                if item[0] == "joined":
                    self.known[r] = set(item[2])
                    device.joined(item[1], item[2], self.now(r))
                elif item[0] == "peer-joined":
                    self.known[r].add(item[1])
                    device.peer_joined(item[1], self.now(r))
                elif item[0] == "peer-left":
                    self.known[r].discard(item[1])
                    device.peer_left(item[1], self.now(r))
                elif item[1] in self.known[r]:
                    try:
                        device.receive(item[2], item[1], self.now(r))
                    except P.ProtocolError as exc:
                        self.errors.append((r, item[1], P.result_code(exc)))
        return any_delivered

    def _flush(self) -> bool:
        any_sent = False
        for slot, device in list(self.devices.items()):
            while (m := device.next_outgoing()) is not None:
                any_sent = True
                self._forward(slot, m)
        return any_sent

    def settle(self) -> None:
        """Deliver what is due and send what that makes, until nothing moves."""
        while self._deliver() | self._flush():
            pass

    def tick(self) -> None:
        for slot, device in list(self.devices.items()):
            device.tick(self.now(slot))
        self.settle()

    def run(self, seconds: float, step: float = 1.0, each=None) -> None:
        """Advance the virtual clock by ``step`` at a time; tick every device each whole
        second; call ``each(room)`` after every step."""
        end = self.t + seconds - 1e-9
        while self.t < end:
            self.t += step
            self.settle()
            if abs(self.t - round(self.t)) < 1e-9:
                self.tick()
            if each is not None:
                each(self)


class Person:
    """An identity with its contacts, made here."""

    def __init__(self, name: str, rng: random.Random):
        self.name = name
        self.rng = rng
        self.pid = rng.randbytes(32)
        self.contacts: list[R.Contact] = []

    def device(self, now: float = NOW, **kw) -> R.RollCall:
        kw.setdefault("random_bytes", self.rng.randbytes)
        return R.RollCall(CODE, self.contacts, self.pid, now, **kw)


def befriend(a: Person, b: Person, *, a_holds_b=True, b_holds_a=True, a_says=None):
    """Make ``a`` and ``b`` contacts with a shared seed and device secrets (``a_says``: the
    device secret a's device says, when it is not the one b stored)."""
    seed = a.rng.randbytes(32)
    sa, sb = a.rng.randbytes(16), a.rng.randbytes(16)
    if a_holds_b:
        a.contacts.append(R.Contact(b.name, b.pid, seed, P.ContactSecrets(a_says or sa, sb)))
    if b_holds_a:
        b.contacts.append(R.Contact(a.name, a.pid, seed, P.ContactSecrets(sb, sa)))
    return seed


def same_rosters(*devices: R.RollCall) -> bool:
    return len({d.roster for d in devices}) == 1


def verify_all(room: Room, pairs=None, now_of=None) -> None:
    """Every device confirms its roster, says its code; every listener types what each
    contact said (``pairs``: restrict to these (listener, speaker) devices)."""
    devices = list(room.devices.items())
    spoken = {}
    for slot, d in devices:
        if not d.confirmed:
            d.confirm_roster(d.roster, room.now(slot))
        if d.own_said() is None:
            d.confirm_said(room.now(slot))
        spoken[d.name] = R.code_text(d.code)
    room.settle()
    for slot, d in devices:
        for n in d.members:
            if n == d.name or d.participant(n).relation != R.CONTACT:
                continue
            if pairs is not None and (d.name, n) not in pairs:
                continue
            if d.state_of(n) == R.NOT_YET:
                d.enter_heard(n, spoken[n], room.now(slot))


# --------------------------------------------------------------------------------------------
# The vectors
# --------------------------------------------------------------------------------------------

def _data():
    return load("rollcall.json")


def _participants(data):
    return {p["name_text"]: p for p in data["participants"]}


def _contacts(data, name):
    parts = _participants(data)
    return [R.Contact(c["peer_text"], h(parts[c["peer_text"]]["identity_public"]), h(c["seed"]),
                      P.ContactSecrets(h(c["device_secret_mine"]) or None,
                                       h(c["device_secret_theirs"]) or None))
            for c in data["contacts"] if c["owner_text"] == name]


def _real_tags(data, name, sid: bytes, rk: bytes) -> dict[str, bytes]:
    parts = _participants(data)
    me = parts[name]
    return {c.name: R.presence_tag(c.seed, sid, rk, h(me["identity_public"]), c.pid)
            for c in _contacts(data, name)}


def _device(data, name, **kw) -> R.RollCall:
    """A device of the vectors: its contacts, roll-call key seed and padding tags."""
    p = _participants(data)[name]
    rk = h(p["roll_call_key"])
    real = set(_real_tags(data, name, h(data["sid"]), rk).values())
    padding = [t for t in R.parse_hello(h(p["hello"])).tags if t not in real]
    return R.RollCall(data["meeting_code_text"], _contacts(data, name), h(p["identity_public"]),
                      data["now"], rk_seed=h(p["roll_call_key_seed"]), padding_tags=padding, **kw)


@needs_vectors
def test_rollcall_fields():
    data = _data()
    expect_keys(data, "bound contacts join_messages meeting_code_text now outcomes participants "
                      "rcid rejections room_id roster saids sid views")
    for c in _cases(data, "contacts"):
        expect_keys(c, "owner_text peer_text seed device_secret_mine device_secret_theirs")
    for p in _cases(data, "participants"):
        # identity_random_seed and random_seed seed the library's own test random source
        # (section 13: an implementation detail); everything they drew is given.
        expect_keys(p, "hello hello_body identity_public identity_random_seed name name_text "
                       "random_seed roll_call_key roll_call_key_seed slot tags_for_contacts")
        for t in _cases(p, "tags_for_contacts"):
            expect_keys(t, "tag to_text")
    for v in _cases(data, "views"):
        expect_keys(v, "have name_text names said seq slot view")
    for s in _cases(data, "saids"):
        expect_keys(s, "code code_text entries name_text said")
        for e in _cases(s, "entries"):
            expect_keys(e, "entry for_text padding" if e["padding"] else
                        "device_secret device_tag entry for_text key padding plaintext")
    for o in _cases(data, "outcomes"):
        expect_keys(o, "listener_text speaker_text state_text")
    expect_keys(data["bound"], "participants")
    for p in _cases(data["bound"], "participants"):
        expect_keys(p, "bind binding hello name_text random_seed sees sid")
        for s in _cases(p, "sees"):
            expect_keys(s, "slot state_text")
    for r in _cases(data, "rejections"):
        expect_keys(r, "case_text messages receiver_text result")
        for m in _cases(r, "messages"):
            expect_keys(m, "message slot")


@needs_vectors
def test_rollcall_ids():
    data = _data()
    code = R.meeting_code(data["meeting_code_text"])
    rc = R.rcid(code)
    assert rc == h(data["rcid"])
    assert R.room_id(code) == h(data["room_id"])
    assert R.room_name(code) == data["room_id"]
    assert R.session_id(rc, None) == h(data["sid"])
    assert R.binding_hash(rc, None) == bytes(32)


@needs_vectors
def test_rollcall_hellos():
    data = _data()
    rc, sid = h(data["rcid"]), h(data["sid"])
    for p in data["participants"]:
        rk = R.roll_call_public(h(p["roll_call_key_seed"]))
        assert rk == h(p["roll_call_key"])
        real = _real_tags(data, p["name_text"], sid, rk)
        assert {t["to_text"]: h(t["tag"]) for t in p["tags_for_contacts"]} == real
        hello = R.parse_hello(h(p["hello"]))
        assert (hello.b, hello.rk, hello.bind) == (0, rk, bytes(32))
        assert set(real.values()) <= set(hello.tags) and len(hello.tags) == 32
        padding = [t for t in hello.tags if t not in real.values()]
        body = R.hello_body(0, rk, bytes(32), list(real.values()) + padding)
        assert body == h(p["hello_body"])
        assert resign(h(p["roll_call_key_seed"]), rc, body) == h(p["hello"])
        assert len(h(p["hello"])) == 133 + 16 * 32
        assert R.name_of(body) == h(p["name"])
        # The device rebuilt from the vectors says exactly this HELLO.
        device = _device(data, p["name_text"])
        assert device.hello == h(p["hello"]) and device.name == h(p["name"])


@needs_vectors
def test_rollcall_roster_and_views():
    data = _data()
    rc = h(data["rcid"])
    parts = _participants(data)
    names = sorted(h(p["name"]) for p in data["participants"])
    assert R.roster_hash(rc, names) == h(data["roster"])
    for v in data["views"]:
        p = parts[v["name_text"]]
        assert [h(n) for n in v["names"]] == names
        body = R.view_body(h(p["roll_call_key"]), v["seq"], v["slot"], h(data["roster"]),
                           v["said"], names, h(v["have"]))
        assert resign(h(p["roll_call_key_seed"]), rc, body) == h(v["view"])
        view = R.parse_view(h(v["view"]))
        assert (view.seq, view.slot, view.said, view.have) == (v["seq"], v["slot"], v["said"],
                                                                 h(v["have"]))
        assert len(h(v["view"])) == 138 + 32 * 3 + 1
        # have: the SAIDs of the two others, never its own bit.
        assert [view.holds(n) for n in names] == [n != h(p["name"]) for n in names]


@needs_vectors
def test_rollcall_saids():
    data = _data()
    rc, sid, roster = h(data["rcid"]), h(data["sid"]), h(data["roster"])
    parts = _participants(data)
    seeds = {(c["owner_text"], c["peer_text"]): h(c["seed"]) for c in data["contacts"]}
    for s in data["saids"]:
        me = parts[s["name_text"]]
        assert R.code_text(s["code"]) == s["code_text"]
        others = sorted((p for p in data["participants"] if p is not me), key=lambda p: p["name"])
        assert [e["for_text"] for e in s["entries"]] == [p["name_text"] for p in others]
        for e, peer in zip(s["entries"], others):
            if e["padding"]:
                assert (s["name_text"], e["for_text"]) not in seeds
                continue
            seed = seeds[(s["name_text"], e["for_text"])]
            key = R.code_key(seed, sid, roster, h(me["name"]), h(peer["name"]),
                             h(me["identity_public"]), h(peer["identity_public"]))
            assert key == h(e["key"])
            dtag = R.device_tag(seed, h(me["identity_public"]), roster,
                                h(e["device_secret"]) or None)
            assert dtag == h(e["device_tag"])
            assert R.entry_plaintext(s["code"], dtag) == h(e["plaintext"])
            assert R.seal_entry(key, roster, s["code"], dtag) == h(e["entry"])
            assert R.open_entry(key, roster, h(e["entry"])) == (s["code"], dtag)
        body = R.said_body(h(me["roll_call_key"]), roster, [h(e["entry"]) for e in s["entries"]])
        assert resign(h(me["roll_call_key_seed"]), rc, body) == h(s["said"])
        assert len(h(s["said"])) == 131 + 50 * 2


def _vector_room(data):
    """The three devices of the vectors joined in order (slots 1, 2, 3) through an in-order
    room, each second ticked; returns the room, the devices and the messages of Cai's join."""
    devices = {p["name_text"]: _device(data, p["name_text"],
                                       codes=[s["code"] for s in data["saids"]
                                              if s["name_text"] == p["name_text"]])
               for p in data["participants"]}
    room = Room(data["now"])
    for p in sorted(data["participants"], key=lambda p: p["slot"]):
        before = room.sent
        assert room.join(devices[p["name_text"]]) == p["slot"]
        room.run(12)
        join_messages = room.sent - before
    return room, devices, join_messages


@needs_vectors
@pytest.mark.parametrize("typed_first", [False, True], ids=["said-first", "typed-first"])
def test_rollcall_outcomes(typed_first):
    data = _data()
    parts = _participants(data)
    room, devices, join_messages = _vector_room(data)
    # 20.6, "Cost of a join": the vectors count Cai's join (M = 2 present).
    assert join_messages == data["join_messages"] <= 4 * 2 + 2
    assert not room.errors
    for name, d in devices.items():
        assert d.roster == h(data["roster"]) and d.head_count == 3
        assert not d.split(room.t) and all(r.agrees and r.present for r in d.rows())
    saids = {s["name_text"]: s for s in data["saids"]}
    spoken = {}
    for name, d in devices.items():
        assert d.confirm_roster(d.roster, room.t) == saids[name]["code_text"]
        spoken[name] = saids[name]["code_text"]
    if typed_first:
        for o in data["outcomes"]:
            d = devices[o["listener_text"]]
            assert d.enter_heard(h(parts[o["speaker_text"]]["name"]), spoken[o["speaker_text"]],
                                 room.t) == R.NOT_YET
    for name, d in devices.items():
        padding = {h(parts[e["for_text"]]["name"]): h(e["entry"])
                   for e in saids[name]["entries"] if e["padding"]}
        d.confirm_said(room.t, padding=padding)
        assert d.own_said() == h(saids[name]["said"])
    room.settle()
    for o in data["outcomes"]:
        d = devices[o["listener_text"]]
        speaker = h(parts[o["speaker_text"]]["name"])
        if not typed_first:
            assert d.state_of(speaker) == R.NOT_YET
            d.enter_heard(speaker, spoken[o["speaker_text"]], room.t)
        assert d.state_of(speaker) == o["state_text"]
    # Everyone else stays as the vectors leave them: padding entries are nobody's.
    assert devices["Ben"].state_of(h(parts["Cai"]["name"])) == R.UNKNOWN
    assert devices["Cai"].state_of(h(parts["Ben"]["name"])) == R.UNKNOWN
    # The last VIEW each device sent is the vectors' VIEW but for its seq (which counts the
    # VIEWs of the library's own run).
    room.run(3)
    last = {}
    for _, slot, m in room.log:
        if m[1] == R.VIEW_TYPE:
            last[slot] = R.parse_view(m)
    for v in data["views"]:
        view = last[v["slot"]]
        assert view.rk == h(parts[v["name_text"]]["roll_call_key"])
        assert (view.roster, view.said, view.have, list(view.names)) == (
            h(data["roster"]), v["said"], h(v["have"]), [h(n) for n in v["names"]])


@needs_vectors
def test_rollcall_bound():
    data = _data()
    rc = h(data["rcid"])
    bound = {p["name_text"]: p for p in data["bound"]["participants"]}
    parts = _participants(data)
    for name, p in bound.items():
        cb = h(p["binding"])
        assert R.session_id(rc, cb) == h(p["sid"])
        assert R.binding_hash(rc, cb) == h(p["bind"])
        hello = R.parse_hello(h(p["hello"]))
        assert (hello.b, hello.bind) == (1, h(p["bind"]))
        assert R.verify_strict(hello.rk, hello.signature, R.signed_input(rc, hello.body))
        # Its tags are over the bound sid and its own RK (the vectors give no roll-call key
        # seed here, so the HELLO is checked, not rebuilt).
        for peer, tag in _real_tags(data, name, h(p["sid"]), hello.rk).items():
            assert tag in hello.tags
    # What each device shows, from the HELLOs alone ...
    for name, p in bound.items():
        for seen in p["sees"]:
            other = next(q for q in bound.values()
                         if parts[q["name_text"]]["slot"] == seen["slot"])
            d = R.RollCall(data["meeting_code_text"], _contacts(data, name),
                           h(parts[name]["identity_public"]), data["now"], binding=h(p["binding"]))
            d.joined(parts[name]["slot"], [1, 2, 3], data["now"])
            d.receive(h(other["hello"]), seen["slot"], data["now"])
            assert d.state_of(R.name_of(R.parse_hello(h(other["hello"])).body)) == \
                seen["state_text"]
    # ... and after a roll call of the three, bound so, through a room.
    room = Room(data["now"])
    devices = {}
    for name in sorted(bound, key=lambda n: parts[n]["slot"]):
        devices[name] = R.RollCall(data["meeting_code_text"], _contacts(data, name),
                                   h(parts[name]["identity_public"]), data["now"],
                                   binding=h(bound[name]["binding"]))
        assert room.join(devices[name]) == parts[name]["slot"]
    room.run(5)
    assert same_rosters(*devices.values()) and not room.errors
    for name, p in bound.items():
        d = devices[name]
        shown = {d.slot_of(r.name): r.state for r in d.rows()}
        assert shown == {seen["slot"]: seen["state_text"] for seen in p["sees"]}
    verify_all(room)
    # Ana and Ben share the binding and verify each other; Cai, bound to another call, is shown
    # as such and cannot be typed for.
    ana, cai = devices["Ana"], devices["Cai"]
    assert ana.state_of(devices["Ben"].name) == R.VERIFIED
    refused("invalid_state", ana.enter_heard, cai.name, "ALFA 000", room.t)
    refused("invalid_state", cai.enter_heard, ana.name, "ALFA 000", room.t)


def _rejection_ids():
    try:
        return [c["case_text"] for c in _data()["rejections"]]
    except (AssertionError, OSError):
        return []


def _snapshot(d: R.RollCall):
    return (d.roster, {n: (frozenset(p.bringers), p.view, p.live) for n, p in d.held().items()},
            {n: dict(d._round.taken) for n in [0]}, list(d._queue))


@needs_vectors
@pytest.mark.parametrize("case_text", _rejection_ids())
def test_rollcall_rejections(case_text):
    data = _data()
    case = next(c for c in data["rejections"] if c["case_text"] == case_text)
    assert case["receiver_text"] == "Ben"
    ben = _device(data, "Ben")
    ben.joined(2, [1, 3], data["now"])
    *before, last = case["messages"]
    for m in before:
        assert ben.receive(h(m["message"]), m["slot"], data["now"]) in (
            "hello", "hello repeat", "view", "said")
    if case["result"] == "accepted":
        ben.receive(h(last["message"]), last["slot"], data["now"])
        return
    state = _snapshot(ben)
    refused(case["result"], ben.receive, h(last["message"]), last["slot"], data["now"])
    assert _snapshot(ben) == state  # "each refusal leaves its state as it was"

"""docs/PROTOCOL.md's test vectors (Tests/ProtocolVectors/*.json) replayed
through the C interface.

Whole QR and Bluetooth exchanges are rerun from each party's
``random_seed``: the library's deterministic random source draws the
identity first, then (from the same source) the exchange's keys, so every
payload, frame and SAS must come out byte for byte as listed.  The seed, SAS
and Bluetooth derivations are checked through the pure functions, and so are
the voice sessions and degradation codes of voice.json; its plans and heard
codes go through real voice sessions, and its sessions bound to a call are
checked from the documented formulas and read their session ID through two
real sessions bound by the vector's binding.  The Online Verify and PIN
Update sessions are rerun whole from each side's random seeds, between
contacts added with the vector's seed (the bound ones with each side's
binding, to the vector's end state); such contacts have no device secrets,
so the Online Verify PROOF messages (which carry device tags) are not
compared whole: they are opened with the vector's keys, and their proofs
and profile references (shared where a side carries one) compared.  The profile records
of profile.json are opened through the binding and made again from their
random sources (by an identity of another key, so all but the record MAC
must match, and that is recomputed from the vector's ``k3``); every refusal
is replayed.  approval.json's enrollments, requests and approvals are made
again from their random sources (the secret store item checked too) and
verified, and every refusal is replayed against a replay store in Python
that must stay empty for a forgery.
The device transfer's password exports are made again from the identity's
``random_seed`` and the export's own random source, opened with the password
as typed, and every rejection is replayed on a fresh secret store with its
attempt counter checked; the exports with the contacts (format version 2),
whose stores are stand-ins no identity could export, are opened and the
store they carry written out byte for byte (and an export of a real store
from the same random source has the vector's header).  The live transfers
are rerun from both sides' random sources (the stand-in store's identity
and store messages are fed to the receiver, whose import must carry the
store), and their rejections step by step.  The roll call of rollcall.json
is made again by its three devices (contacts with the vectors' seeds and
device secrets) joining one after the other through an in-order group room:
its HELLOs, roster, codes, SAIDs and VIEWs byte for byte, each listener's
outcome, the bound roll call's HELLOs and states, and each rejection's
result at a fresh roll call of Ben's joined in slot 2.  Where the
``cryptography`` package is installed, the sealed messages are opened with
the vectors' keys (and the roll call's signatures checked).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import pathlib
import re

import pytest

import itsme
from itsme import (
    ContactStore,
    DeterministicRandom,
    Exchange,
    ExchangeFlags,
    ExchangeState,
    Identity,
    Import,
    InvalidArgumentError,
    ItsMeError,
    NotFoundError,
    OnlineVerify,
    OnlineVerifyState,
    PinUpdate,
    PinUpdateState,
    Profile,
    ReplayStore,
    RollCall,
    RollCallPhase,
    RollCallState,
    SecretStore,
    Transfer,
    TransferState,
    VerificationState,
    VoiceOutcome,
)

VECTORS = pathlib.Path(__file__).resolve().parents[3] / "Tests" / "ProtocolVectors"
T0 = 1_800_000_000
FRAME_TYPES = {1: "hello", 2: "key", 3: "data_frame", 4: "confirm_frame"}


def load(name):
    path = VECTORS / name
    assert path.is_file(), f"missing test vectors {path}"
    return json.loads(path.read_text(encoding="utf-8"))


def h(text):
    return bytes.fromhex(text)


def lv_cat(*parts):
    """lv_cat (section 1): each part prefixed with its length as unsigned LEB128."""
    out = bytearray()
    for part in parts:
        n = len(part)
        while True:
            byte, n = n & 0x7F, n >> 7
            out.append(byte | (0x80 if n else 0))
            if not n:
                break
        out += part
    return bytes(out)


def check_prk(vector, salt, label, keys):
    """``prk`` of 7.3, 10.3 and 11.3: HKDF-Extract(salt, shared), whose
    HKDF-Expand of lv_cat(label, role) (one block) is each role's key."""
    prk = hmac.new(salt, h(vector["shared"]), "sha256").digest()
    assert prk == h(vector["prk"])
    for role, key in zip((b"initiator", b"responder"), keys):
        assert hmac.new(prk, lv_cat(label, role) + b"\x01", "sha256").digest() == h(vector[key]), role


def ids(vectors, key=lambda v: None):
    return [key(v) or f"#{index}" for index, v in enumerate(vectors)]


class Parties:
    """Identities rebuilt from vector parties; closed at the end."""

    def __init__(self, directory):
        self.directory = directory
        self.handles = []

    def make(self, party):
        """(identity, random) for a vector party: the identity drawn first.

        A party without a name (the v5 receiver) gets one: names do not
        enter the keys drawn."""
        random = DeterministicRandom(h(party["random_seed"]))
        secrets = SecretStore.memory()
        identity = Identity.create(secrets, party.get("name_text", "Receiver"), random=random)
        self.handles += [identity, secrets, random]
        assert identity.public_key == h(party["identity_public"])
        assert identity.fingerprint == party["fingerprint_text"]
        return identity, random

    def contacts(self, identity):
        store = ContactStore.open(identity, self.directory / f"contacts-{len(self.handles)}.db")
        self.handles.append(store)
        return store

    def close(self):
        for handle in reversed(self.handles):
            handle.close()


@pytest.fixture
def parties(tmp_path):
    made = Parties(tmp_path)
    yield made
    made.close()


def is_exchange_payload(text):
    """Section 5.2: texts starting with neither prefix are not payloads."""
    return text.startswith("ITSME1:") or text.startswith("5|")


def assert_rejected(exchange, text):
    """Feeds a text the vectors say to reject; checks how it was refused."""
    if is_exchange_payload(text):
        with pytest.raises(ItsMeError) as caught:
            exchange.receive(text, T0)
        assert not isinstance(caught.value, InvalidArgumentError), caught.value
        assert exchange.state == ExchangeState.FAILED
    else:  # another QR code: scan again, the exchange goes on
        with pytest.raises(InvalidArgumentError):
            exchange.receive(text, T0)
        assert exchange.state == ExchangeState.AWAITING_PEER


# -- encoding.json -----------------------------------------------------------------------

ENCODING = load("encoding.json")


@pytest.mark.parametrize("vector", ENCODING["short_code"]["format"], ids=lambda v: v["text"])
def test_short_code_format(vector):
    assert itsme.short_code_format(vector["value"]) == vector["text"]
    assert itsme.short_code_parse(vector["text"]) == vector["value"]


@pytest.mark.parametrize("vector", ENCODING["short_code"]["parse_valid"], ids=lambda v: v["input_text"])
def test_short_code_parse(vector):
    assert itsme.short_code_parse(vector["input_text"]) == vector["value"]


@pytest.mark.parametrize("text", ENCODING["short_code"]["parse_invalid"])
def test_short_code_parse_invalid(text):
    with pytest.raises(InvalidArgumentError):
        itsme.short_code_parse(text)


@pytest.mark.parametrize("text", ENCODING["names"]["valid"])
def test_valid_name(text):
    # Section 1's name rule, through identity creation.
    identity = Identity.create(SecretStore.memory(), text)
    assert identity.name == text


@pytest.mark.parametrize("vector", ENCODING["names"]["invalid"], ids=lambda v: f"U+{v['code_point']:04X}")
def test_invalid_name(vector):
    text = vector["text"]
    assert chr(vector["code_point"]) in text
    with pytest.raises(InvalidArgumentError):
        Identity.create(SecretStore.memory(), text)


def test_name_vectors_cover_every_refused_code_point():
    refused = {v["code_point"] for v in ENCODING["names"]["invalid"]}
    expected = set(range(0x00, 0x20)) | set(range(0x7F, 0xA0)) | {0x200B, 0xFEFF}
    expected |= set(range(0x202A, 0x202F)) | set(range(0x2060, 0x2065)) | set(range(0x2066, 0x206A))
    assert refused == expected
    assert any("\u200d" in t for t in ENCODING["names"]["valid"])
    assert any("\u200c" in t for t in ENCODING["names"]["valid"])


@pytest.mark.parametrize("text", ENCODING["base64url"]["invalid"])
def test_invalid_base64url_payload_is_read_again(parties, text):
    # Section 1's strict decoding, seen through a QR payload: not a whole
    # payload, so the exchange waits for one (5.2).
    identity, random = parties.make(load("qr.json")["exchanges"][0]["a"])
    exchange = Exchange.qr(identity, parties.contacts(identity), T0, random=random)
    with pytest.raises(itsme.InvalidArgumentError):
        exchange.receive("ITSME1:" + text, T0)
    assert exchange.state == ExchangeState.AWAITING_PEER


# -- seed.json, sas.json ------------------------------------------------------------------


@pytest.mark.parametrize("vector", load("seed.json"), ids=ids(load("seed.json")))
def test_seed(vector):
    a, b = vector["a_fingerprint_text"], vector["b_fingerprint_text"]
    assert vector["salt_text"] == "".join(sorted([a, b]))
    from_a = itsme.derive_seed(h(vector["a_ephemeral_secret"]), h(vector["b_ephemeral_public"]), a, b)
    from_b = itsme.derive_seed(h(vector["b_ephemeral_secret"]), h(vector["a_ephemeral_public"]), b, a)
    assert from_a == from_b == h(vector["seed"])
    # Fingerprints are hex digits in either case.
    assert itsme.derive_seed(h(vector["a_ephemeral_secret"]), h(vector["b_ephemeral_public"]), a.lower(), b) == from_a


@pytest.mark.parametrize("vector", load("sas.json"), ids=lambda v: v["text"])
def test_sas(vector):
    assert itsme.derive_sas(h(vector["seed"]), h(vector["transcript_hash"])) == vector["text"]
    assert int.from_bytes(h(vector["okm"]), "big") % itsme.SHORT_CODE_VALUES == vector["value"]
    assert itsme.short_code_format(vector["value"]) == vector["text"]
    assert itsme.short_code_parse(vector["text"]) == vector["value"]


# -- qr.json ------------------------------------------------------------------------------

QR = load("qr.json")


@pytest.mark.parametrize("vector", QR["exchanges"], ids=ids(QR["exchanges"], lambda v: v["sas_text"]))
def test_qr_exchange(parties, vector):
    a, b = vector["a"], vector["b"]
    exchanges = {}
    for side, party in (("a", a), ("b", b)):
        identity, random = parties.make(party)
        exchange = Exchange.qr(identity, parties.contacts(identity), T0, random=random)  # the same source, after the identity
        text = exchange.next_outgoing().decode("ascii")
        assert text == party["payload_text"], f"{side}: payload text"
        assert base64.urlsafe_b64decode(text[7:] + "=" * (-len(text[7:]) % 4)) == h(party["payload"])
        assert h(party["payload"]) == h(party["body"]) + h(party["signature"])
        exchanges[side] = exchange
    xa, xb = exchanges["a"], exchanges["b"]
    xa.receive(b["payload_text"], T0)
    xb.receive(a["payload_text"], T0)
    for exchange, peer in ((xa, b), (xb, a)):
        assert exchange.state == ExchangeState.COMPARE_SAS
        assert exchange.sas == vector["sas_text"]
        assert exchange.peer_name == peer["name_text"]
        assert exchange.peer_fingerprint == peer["fingerprint_text"]
        assert exchange.peer_public_key == h(peer["identity_public"])
    # The same values through the pure functions.
    assert vector["salt_text"] == "".join(sorted([a["fingerprint_text"], b["fingerprint_text"]]))
    seed = itsme.derive_seed(
        h(a["ephemeral_secret"]), h(b["ephemeral_public"]), a["fingerprint_text"], b["fingerprint_text"]
    )
    assert seed == h(vector["seed"])
    assert seed == itsme.derive_seed(
        h(b["ephemeral_secret"]), h(a["ephemeral_public"]), b["fingerprint_text"], a["fingerprint_text"]
    )
    th = itsme.qr_transcript_hash(a["payload_text"], b["payload_text"])
    assert th == itsme.qr_transcript_hash(b["payload_text"], a["payload_text"]) == h(vector["transcript_hash"])
    assert itsme.derive_sas(seed, th) == vector["sas_text"]
    assert itsme.short_code_format(vector["sas_value"]) == vector["sas_text"]


def test_qr_vectors_cover_non_ascii_names():
    names = [v[side]["name_text"] for v in QR["exchanges"] for side in "ab"]
    assert any("\u200d" in name for name in names), "a name joined by U+200D (ZWJ)"
    assert any(any("\u0600" <= c <= "\u06ff" for c in name) for name in names), "a name in Arabic script"


def _qr_receiver(parties, receiver):
    """The vector exchange party whose identity key the rejection's receiver has."""
    for vector in QR["exchanges"]:
        for party in (vector["a"], vector["b"]):
            if party["identity_public"] == receiver["identity_public"]:
                identity, random = parties.make(party)
                exchange = Exchange.qr(identity, parties.contacts(identity), T0, random=random)
                assert exchange.next_outgoing().decode() == party["payload_text"]
                return exchange
    pytest.fail("the rejection's receiver is none of the exchange parties")


@pytest.mark.parametrize("vector", QR["rejections"], ids=lambda v: v["case_text"])
def test_qr_rejection(parties, vector):
    exchange = _qr_receiver(parties, vector["receiver"])
    with pytest.raises(ItsMeError) as caught:
        exchange.receive(vector["payload_text"], T0)
    assert caught.value.name == _error_name(vector["error_text"])
    # A text that is not a whole payload (another code, a reading cut short
    # or run on) leaves the exchange as it was; the rest end it (5.2).
    assert vector["ends_exchange"] == (vector["error_text"] != "invalid_argument")
    assert exchange.state == (ExchangeState.FAILED if vector["ends_exchange"] else ExchangeState.AWAITING_PEER)
    # Section 5.2 checks 5 and 7: our own key, an all-zero shared secret.
    if vector["case_text"].startswith("own ") or "low-order" in vector["case_text"]:
        assert exchange.last_error() and exchange.state == ExchangeState.FAILED
        with pytest.raises(itsme.InvalidKeyError):
            _qr_receiver(parties, vector["receiver"]).receive(vector["payload_text"], T0)


# -- source-v5.json -----------------------------------------------------------------------

SOURCE = load("source-v5.json")


def _v5_receiver(parties, receiver):
    """The v5 receiver's QR exchange, drawn from its random source; checks
    that its ephemeral key is the one whose secret the vector gives."""
    identity, random = parties.make(receiver)
    exchange = Exchange.qr(identity, parties.contacts(identity), T0, random=random)
    text = exchange.next_outgoing().decode("ascii")
    payload = base64.urlsafe_b64decode(text[7:] + "=" * (-len(text[7:]) % 4))
    ephemeral_public = payload[41:73]
    # X25519 agrees both ways: with another known key pair, the receiver's
    # secret and the public key in its payload give the same seed.
    other = QR["exchanges"][0]["a"]
    fingerprints = (receiver["fingerprint_text"], other["fingerprint_text"])
    assert itsme.derive_seed(h(receiver["ephemeral_secret"]), h(other["ephemeral_public"]), *fingerprints) == (
        itsme.derive_seed(h(other["ephemeral_secret"]), ephemeral_public, *fingerprints)
    )
    return identity, exchange


@pytest.mark.parametrize("vector", SOURCE["imports"], ids=lambda v: v["name_text"])
def test_source_import(parties, vector):
    receiver = vector["receiver"]
    fields = vector["text"].split("|")
    assert base64.b64decode(fields[-2], validate=True) == h(vector["ephemeral_public"])
    assert fields[-1] == vector["device_secret_text"]
    assert vector["salt_text"] == "".join(sorted([vector["fingerprint_text"], receiver["fingerprint_text"]]))
    seed = itsme.derive_seed(
        h(receiver["ephemeral_secret"]),
        h(vector["ephemeral_public"]),
        receiver["fingerprint_text"],
        vector["fingerprint_text"],
    )
    assert seed == h(vector["seed"])
    identity, exchange = _v5_receiver(parties, receiver)
    exchange.receive(vector["text"], T0)
    assert exchange.state == ExchangeState.IMPORTED
    assert exchange.flags == ExchangeFlags.UNAUTHENTICATED
    assert exchange.peer_name == vector["name_text"]
    assert exchange.peer_fingerprint == vector["fingerprint_text"]
    assert exchange.peer_public_key is None
    with pytest.raises(itsme.InvalidStateError):
        exchange.sas
    contacts = exchange.store
    contact = contacts.get(exchange.save(T0))
    assert (contact.name, contact.fingerprint, contact.authenticated) == (
        vector["name_text"],
        vector["fingerprint_text"],
        False,
    )


@pytest.mark.parametrize("vector", SOURCE["rejections"], ids=lambda v: v["case_text"])
def test_source_rejection(parties, vector):
    # Each is received by the receiver of the first import.
    identity, exchange = _v5_receiver(parties, SOURCE["imports"][0]["receiver"])
    with pytest.raises(ItsMeError) as caught:
        exchange.receive(vector["text"], T0)
    assert caught.value.name == _error_name(vector["error_text"])
    assert exchange.state == (ExchangeState.FAILED if vector["ends_exchange"] else ExchangeState.AWAITING_PEER)
    assert_rejected(_v5_receiver(parties, SOURCE["imports"][0]["receiver"])[1], vector["text"])
    # Our own fingerprint is a reflection, found once the text's form is good (section 6).
    if identity.fingerprint in vector["text"].upper() and "form first" not in vector["case_text"]:
        assert vector["error_text"] == "invalid_key"


# -- bluetooth.json -------------------------------------------------------------------------

BLUETOOTH = load("bluetooth.json")


@pytest.mark.parametrize("vector", BLUETOOTH["exchanges"], ids=lambda v: v["session_code_text"])
def test_bluetooth_exchange(parties, vector):
    a, b = vector["a"], vector["b"]
    identity_a, random_a = parties.make(a)
    identity_b, random_b = parties.make(b)
    xa = Exchange.bluetooth(identity_a, parties.contacts(identity_a), T0, random=random_a)  # a draws the session code
    assert xa.session_code == vector["session_code_text"]
    assert itsme.short_code_parse(vector["session_code_text"]) == vector["session_code_value"]
    xb = Exchange.bluetooth(identity_b, parties.contacts(identity_b), T0, session_code=vector["session_code_text"], random=random_b)
    sent = {"a": {}, "b": {}}

    def pump():
        moved = True
        while moved:
            moved = False
            for side, sender, receiver in (("a", xa, xb), ("b", xb, xa)):
                frame = sender.next_outgoing()
                if frame:
                    moved = True
                    assert frame[1] not in sent[side], "each frame type is sent once"
                    sent[side][frame[1]] = frame
                    receiver.receive(frame, T0)

    pump()
    for exchange, peer in ((xa, b), (xb, a)):
        assert exchange.state == ExchangeState.COMPARE_SAS
        assert exchange.sas == vector["sas_text"]
        assert exchange.peer_name == peer["name_text"]
        assert exchange.peer_fingerprint == peer["fingerprint_text"]
        assert exchange.peer_public_key == h(peer["identity_public"])
    # Both confirm; each settles the other's CONFIRM (8.1).
    store_a, store_b = parties.contacts(identity_a), parties.contacts(identity_b)
    xa.confirm(T0)
    xb.confirm(T0)
    pump()
    for exchange, store in ((xa, store_a), (xb, store_b)):
        assert exchange.flags == ExchangeFlags.PEER_CONFIRMED
        assert exchange.state == ExchangeState.AWAITING_DECISION
        exchange.settle(T0)
        assert exchange.state == ExchangeState.CONFIRMED
    for side, party in (("a", a), ("b", b)):
        assert set(sent[side]) == set(FRAME_TYPES)
        for frame_type, key in FRAME_TYPES.items():
            assert sent[side][frame_type].hex() == party[key], f"{side}: {key}"


@pytest.mark.parametrize("vector", BLUETOOTH["exchanges"], ids=lambda v: v["session_code_text"])
def test_bluetooth_derivations(vector):
    a, b = vector["a"], vector["b"]
    for party in (a, b):
        commitment = itsme.bluetooth_commitment(
            h(party["identity_public"]), h(party["ephemeral_public"]), party["name_text"], h(party["device_secret"])
        )
        assert commitment == h(party["commitment"])
        assert h(party["hello"]) == bytes([1, 1]) + h(party["fingerprint_text"]) + commitment
        assert h(party["key"]) == bytes([1, 2]) + h(party["ephemeral_public"])
        assert h(party["plaintext"]) == h(party["data"]) + h(party["signature"])
    initiator, responder = (a, b) if a["role_text"] == "initiator" else (b, a)
    assert (initiator["role_text"], responder["role_text"]) == ("initiator", "responder")
    assert initiator["fingerprint_text"] < responder["fingerprint_text"], "the lower fingerprint initiates"
    th1 = itsme.bluetooth_th1(
        vector["session_code_text"],
        h(initiator["hello"]),
        h(responder["hello"]),
        h(initiator["key"]),
        h(responder["key"]),
    )
    assert th1 == h(vector["th1"])
    keys = (h(vector["key_initiator"]), h(vector["key_responder"]))
    check_prk(vector, th1, b"itsme-bluetooth-key-v1", ("key_initiator", "key_responder"))
    assert itsme.bluetooth_session_keys(h(a["ephemeral_secret"]), h(b["ephemeral_public"]), th1) == keys
    assert itsme.bluetooth_session_keys(h(b["ephemeral_secret"]), h(a["ephemeral_public"]), th1) == keys
    seed = itsme.derive_seed(
        h(a["ephemeral_secret"]), h(b["ephemeral_public"]), a["fingerprint_text"], b["fingerprint_text"]
    )
    assert seed == h(vector["seed"])
    th = itsme.bluetooth_transcript_hash(th1, h(initiator["plaintext"]), h(responder["plaintext"]))
    assert th == h(vector["transcript_hash"])
    # The final transcript's lv_cat input, and the seed's salt (sections 3, 7.4).
    transcript = lv_cat(b"itsme-bluetooth-transcript-v1", th1, h(initiator["plaintext"]), h(responder["plaintext"]))
    assert transcript == h(vector["transcript_input"])
    assert hashlib.sha256(transcript).digest() == th
    assert vector["salt_text"] == "".join(sorted([a["fingerprint_text"], b["fingerprint_text"]]))
    # The session code's draws (4.2): every one but the last at or above
    # 4294940000, the last taken modulo 260000.
    draws = [int(d, 16) for d in vector["session_code_draws"]]
    assert all(len(h(d)) == 4 for d in vector["session_code_draws"])
    assert all(d >= 4_294_940_000 for d in draws[:-1]) and draws[-1] < 4_294_940_000
    assert draws[-1] % itsme.SHORT_CODE_VALUES == vector["session_code_value"]
    assert itsme.derive_sas(seed, th) == vector["sas_text"]
    assert itsme.short_code_format(vector["sas_value"]) == vector["sas_text"]


def test_bluetooth_vectors_cover_a_redrawn_session_code():
    assert any(len(v["session_code_draws"]) > 1 for v in BLUETOOTH["exchanges"])


# -- voice.json ---------------------------------------------------------------------------

VOICE = load("voice.json")


def _code_text(value):
    return f"{itsme.nato_word(value // 1000)} {value % 1000:03d}"


@pytest.mark.parametrize("vector", VOICE["sessions"], ids=lambda v: v["session_id_text"])
def test_voice_session(vector):
    seed, window = h(vector["seed"]), vector["window"]
    a, b = h(vector["a_pid"]), h(vector["b_pid"])
    value = vector["session_id_value"]
    assert vector["session_id_text"] == f"{itsme.nato_word(value // 100)} {value % 100:02d}"
    assert itsme.derive_session_id(seed, window) == vector["session_id_text"]
    assert itsme.derive_words(seed, window, a) == vector["a_words"]
    assert itsme.derive_words(seed, window, b) == vector["b_words"]
    lower_first = itsme.derive_lower_selects_first(seed, window)
    assert lower_first == vector["lower_selects_first"]
    assert lower_first == (vector["first_selector_byte"] & 1 == 0)
    first_input = lv_cat(b"itsme-first-selector-v1", window.to_bytes(8, "big"))
    assert first_input == h(vector["first_selector_input"])
    first_hmac = hmac.new(seed, first_input, "sha256").digest()
    assert first_hmac == h(vector["first_selector_hmac"])
    # The HMAC messages of 9.2 and 10.1.
    session_input = lv_cat(b"itsme-session-id-v1", window.to_bytes(8, "big"))
    assert session_input == h(vector["session_id_input"])
    assert int.from_bytes(hmac.new(seed, session_input, "sha256").digest()[:8], "big") % 2600 == value
    for pid, side in ((a, "a"), (b, "b")):
        tag_input = lv_cat(pid, window.to_bytes(8, "big"), h(vector[side + "_device_secret"]))
        assert tag_input == h(vector[side + "_tag_input"]), side
        tag_mac = hmac.new(h(vector["tag_key"]), tag_input, "sha256").digest()
        assert int.from_bytes(tag_mac[:8], "big") % 100 == vector[side + "_tag"], side
    assert first_hmac[0] == vector["first_selector_byte"]
    # Section 9.4: the lower pid selects first when f = 0.
    a_first = (a < b) == lower_first
    assert vector["first_text"] == ("a" if a_first else "b")
    first, second = (a, b) if a_first else (b, a)
    first_words, second_words = (
        (vector["a_words"], vector["b_words"]) if a_first else (vector["b_words"], vector["a_words"])
    )
    w1, w2 = vector["w1"], vector["w2"]
    assert w1 in first_words and w2 in second_words
    for speaker, side in ((a, "a"), (b, "b")):
        text = itsme.derive_code(seed, window, first, w1, second, w2, speaker)
        assert text == vector[f"{side}_code_text"] == _code_text(vector[f"{side}_code_value"]), side
        tag = itsme.derive_device_tag(seed, window, speaker, h(vector[f"{side}_device_secret"]))
        assert tag == vector[f"{side}_tag"], side
    # The selections in the other order give other codes.
    if w1 != w2:
        assert itsme.derive_code(seed, window, first, w2, second, w1, a) != vector["a_code_text"]


def _hkdf(ikm, salt, info, length=32):
    """HKDF-SHA256 (RFC 5869), for the documented formulas."""
    prk = hmac.new(salt, ikm, "sha256").digest()
    out, block = b"", b""
    for counter in range(1, -(-length // 32) + 1):
        block = hmac.new(prk, block + info + bytes([counter]), "sha256").digest()
        out += block
    return out[:length]


def _session_id_text(value):
    return f"{itsme.nato_word(value // 100)} {value % 100:02d}"


def _be64_mod(digest, modulus):
    return int.from_bytes(digest[:8], "big") % modulus


@pytest.mark.parametrize("vector", VOICE["bound_sessions"], ids=lambda v: v["session_id_text"])
def test_voice_bound_session_formulas(vector):
    """A session bound to a call (9.7) from the documented formulas: the
    session ID and the code key take u8(1) and cb as two more items; words
    and the first selector do not change; the unbound values are the pure
    derivations' (9.2, 9.6)."""
    seed, window, cb = h(vector["seed"]), vector["window"], h(vector["binding"])
    a, b = h(vector["a_pid"]), h(vector["b_pid"])
    assert itsme.CALL_BINDING_MIN <= len(cb) <= itsme.CALL_BINDING_MAX
    u64 = window.to_bytes(8, "big")
    session_input = lv_cat(b"itsme-session-id-v1", u64, b"\1", cb)
    assert session_input == h(vector["session_id_input"])
    value = _be64_mod(hmac.new(seed, session_input, "sha256").digest(), 2600)
    assert value == vector["session_id_value"]
    assert _session_id_text(value) == vector["session_id_text"]
    # Unbound: 9.2 unchanged, as the library derives it.
    unbound = _be64_mod(hmac.new(seed, lv_cat(b"itsme-session-id-v1", u64), "sha256").digest(), 2600)
    assert unbound == vector["unbound_session_id_value"] != value
    assert itsme.derive_session_id(seed, window) == _session_id_text(unbound)
    # Words and the first selector: 9.3 and 9.4.
    assert itsme.derive_words(seed, window, a) == vector["a_words"]
    assert itsme.derive_words(seed, window, b) == vector["b_words"]
    a_first = (a < b) == itsme.derive_lower_selects_first(seed, window)
    assert vector["first_text"] == ("a" if a_first else "b")
    first, second = (a, b) if a_first else (b, a)
    w1, w2 = vector["w1"], vector["w2"]
    info = lv_cat(b"itsme-interactive-code-v1", first, bytes([w1]), second, bytes([w2]), b"\1", cb)
    assert info == h(vector["code_info"])
    key = _hkdf(seed, u64, info)
    assert key == h(vector["code_key"])
    for speaker, side in ((a, "a"), (b, "b")):
        code = _be64_mod(hmac.new(key, lv_cat(b"itsme-code-v1", speaker), "sha256").digest(), 26000)
        assert code == vector[f"{side}_code_value"]
        assert _code_text(code) == vector[f"{side}_code_text"]
        # Unbound: 9.6 unchanged, as the library derives it.
        plain = itsme.derive_code(seed, window, first, w1, second, w2, speaker)
        assert plain == _code_text(vector[f"unbound_{side}_code_value"]) != vector[f"{side}_code_text"]


def _voice_devices(parties, seed, names):
    """Devices of new identities, each holding all the others as contacts
    with ``seed``: {name: (contacts, {other name: contact id})}.  The
    session ID depends on no pid, so the vector's pids are not needed."""
    identities = {}
    for name in names:
        secrets = SecretStore.memory()
        identities[name] = Identity.create(secrets, name)
        parties.handles += [secrets, identities[name]]
    devices = {}
    for name in names:
        contacts = parties.contacts(identities[name])
        others = {
            other: contacts.add(other, identities[other].public_key, seed, now=T0) for other in names if other != name
        }
        devices[name] = (contacts, others)
    return devices


@pytest.mark.parametrize("vector", VOICE["bound_sessions"], ids=lambda v: v["session_id_text"])
def test_voice_bound_session_reads_its_session_id(parties, vector):
    """Two real sessions planned for the vector's window, both bound by its
    binding, read its session ID and go on to codes that match; a session
    of the same seed not bound reads the unbound one."""
    seed, window, cb = h(vector["seed"]), vector["window"], h(vector["binding"])
    plan, start = 30 * window - 1, 30 * window
    devices = _voice_devices(parties, seed, ("A", "B", "C"))
    sides = {"a": (devices["A"][0], devices["A"][1]["B"]), "b": (devices["B"][0], devices["B"][1]["A"])}
    bound = {}
    for side, (contacts, contact_id) in sides.items():
        session = itsme.VoiceSession(contacts, contact_id, plan, binding=cb)
        parties.handles.append(session)
        assert session.window == window
        session.start(start)
        assert session.session_id == vector["session_id_text"], side
        bound[side] = session
    # Another device of the same seed, not bound, in the same window.
    contacts, others = devices["C"]
    unbound = itsme.VoiceSession(contacts, others["A"], plan)
    parties.handles.append(unbound)
    unbound.start(start)
    assert unbound.session_id == _session_id_text(vector["unbound_session_id_value"]) != vector["session_id_text"]
    # The two bound sides go on to codes that match.
    x, y = bound["a"], bound["b"]
    first, second = (x, y) if x.turn == itsme.VoiceTurn.MINE else (y, x)
    for speaker, listener in ((first, second), (second, first)):
        word = speaker.words[0]
        speaker.select(word, start)
        listener.select(word, start)
    assert x.your_code.text == y.their_code.text and y.your_code.text == x.their_code.text
    # Contacts added without device secrets: the tags are not checked.
    assert x.check(*y.your_code, start) == VoiceOutcome.VERIFIED_TAG_UNCHECKED
    assert y.check(*x.your_code, start) == VoiceOutcome.VERIFIED_TAG_UNCHECKED


def test_voice_bound_sessions_cover_the_lengths_of_a_binding():
    assert {len(h(v["binding"])) for v in VOICE["bound_sessions"]} >= {16, 32}


def test_voice_sessions_cover_both_kinds_of_pid():
    sizes = {len(h(s[f"{side}_pid"])) for s in VOICE["sessions"] for side in "ab"}
    assert sizes == {8, 32}


class VoiceContact:
    """A contact stored with a known seed and no device secrets, so that one
    side can run a voice session alone: the pure derivations give the other
    side's words."""

    SEED = bytes(range(32))

    def __init__(self, parties):
        self.identity, _ = parties.make(QR["exchanges"][0]["a"])
        peer = QR["exchanges"][0]["b"]
        self.peer_pid = h(peer["identity_public"])
        self.contacts = parties.contacts(self.identity)
        self.id = self.contacts.add(peer["name_text"], self.peer_pid, self.SEED, now=T0)

    def comparing(self, now):
        """A session planned at ``now``, started and with both words entered."""
        session = itsme.VoiceSession(self.contacts, self.id, now)
        start = 30 * session.window
        session.start(start)
        theirs = itsme.derive_words(self.SEED, session.window, self.peer_pid)
        for _ in range(2):
            mine = session.turn == itsme.VoiceTurn.MINE
            session.select(session.words[0] if mine else theirs[0], start)
        assert session.state == itsme.VoiceState.COMPARING
        return session, start


@pytest.mark.parametrize("vector", VOICE["plans"], ids=lambda v: f"{v['now']}-{v['last_window']}")
def test_voice_plan(parties, vector):
    contact = VoiceContact(parties)
    if vector["last_window"] is not None:
        contact.contacts.use_window(contact.id, vector["last_window"])
    now, window = vector["now"], vector["window"]
    with itsme.VoiceSession(contact.contacts, contact.id, now) as session:
        assert session.timing(now) == (window, vector["starts_in"], 30 * (window + 2) - now)
        assert 30 * window - now == vector["starts_in"]


def _in_the_form_of(typed, text):
    """``text`` ("ECHO 512") typed the way ``typed`` is: the same spaces
    around it, separator and letter case."""
    match = re.fullmatch(r"(\s*)([A-Za-z]+)([ -])(\d{3})(\s*)", typed)
    assert match, typed
    lead, word, separator, _, trail = match.groups()
    new_word, digits = text.split(" ")
    if word.islower():
        new_word = new_word.lower()
    elif word.istitle():
        new_word = new_word.title()
    return f"{lead}{new_word}{separator}{digits}{trail}"


@pytest.mark.parametrize("vector", VOICE["code_parse"]["valid"], ids=lambda v: repr(v["input_text"]))
def test_voice_heard_code_parses(parties, vector):
    typed = vector["input_text"]
    word, digits = re.split(r"[ -]", typed.strip())
    assert itsme.NATO_WORDS.index(word.upper()) * 1000 + int(digits) == vector["value"]
    contact = VoiceContact(parties)
    # The input as it is: accepted, and a match only if its value is the one expected.
    session, now = contact.comparing(T0)
    with session:
        their = session.their_code
        assert their.tag is None, "no device secrets: the tag is not checked"
        outcome = session.check(typed, 0, now)
        matches = _code_text(vector["value"]) == their.text
        assert outcome == (itsme.VoiceOutcome.VERIFIED_TAG_UNCHECKED if matches else itsme.VoiceOutcome.MISMATCH)
    # The expected code typed in the same form: a match.
    session, now = contact.comparing(T0)
    with session:
        same_form = _in_the_form_of(typed, session.their_code.text)
        outcome = session.check(same_form, 0, now)
        assert outcome == itsme.VoiceOutcome.VERIFIED_TAG_UNCHECKED, same_form


@pytest.mark.parametrize("text", VOICE["code_parse"]["invalid"])
def test_voice_heard_code_parse_invalid(parties, text):
    contact = VoiceContact(parties)
    session, now = contact.comparing(T0)
    with session:
        with pytest.raises(InvalidArgumentError):
            session.check(text, 0, now)
        assert session.state == itsme.VoiceState.COMPARING


# -- voice.json: the degradation code ---------------------------------------------------


def _degradation_text(letters):
    """24 base-32 letters in six groups of four."""
    return "-".join(letters[i : i + 4] for i in range(0, 24, 4))


@pytest.mark.parametrize("vector", VOICE["degradation"], ids=lambda v: v["code_text"])
def test_degradation_code(vector):
    seed, pid, secret = h(vector["seed"]), h(vector["pid"]), h(vector["secret"])
    assert itsme.derive_degradation_code(seed, pid, secret) == vector["code_text"]
    assert len(h(vector["mac"])) == 5
    assert lv_cat(pid, secret) == h(vector["mac_input"])
    assert hmac.new(h(vector["key"]), h(vector["mac_input"]), "sha256").digest()[:5] == h(vector["mac"])
    assert base64.b32decode(vector["code_text"].replace("-", "")) == secret + h(vector["mac"])


@pytest.mark.parametrize("vector", VOICE["degradation_parse"]["valid"], ids=lambda v: repr(v["input_text"]))
def test_degradation_code_parses(parties, vector):
    raw = h(vector["bytes"])
    letters = vector["input_text"].replace(" ", "").replace("-", "").upper()
    assert base64.b32decode(letters) == raw
    # The first 16 letters carry the 10-byte secret alone: a code derived
    # from it starts with them, whatever the seed and the person.
    example = VOICE["degradation"][0]
    code = itsme.derive_degradation_code(h(example["seed"]), h(example["pid"]), raw[:10])
    assert code[:19] == _degradation_text(letters)[:19]
    # Typed to a contact it parses: refused as a wrong code, not as junk.
    contact = VoiceContact(parties)
    with pytest.raises(itsme.AuthenticationFailedError):
        contact.contacts.accept_degradation_code(contact.id, vector["input_text"], T0)


@pytest.mark.parametrize("text", VOICE["degradation_parse"]["invalid"])
def test_degradation_code_parse_invalid(parties, text):
    contact = VoiceContact(parties)
    with pytest.raises(InvalidArgumentError):
        contact.contacts.accept_degradation_code(contact.id, text, T0)


# -- online-verify.json, pin-update.json ----------------------------------------------------

ONLINE = load("online-verify.json")
PIN_UPDATE = load("pin-update.json")
_OTHER = {"a": "b", "b": "a"}


def _vector_contacts(parties, vector):
    """The two sides of a session vector, each holding the other as a
    contact with the vector's seed: {side: (contacts, contact id)}.  The
    identities are drawn from ``identity_random_seed``."""
    identities = {}
    for side in "ab":
        party = vector[side]
        secrets = SecretStore.memory()
        random = DeterministicRandom(h(party["identity_random_seed"]))
        identity = Identity.create(secrets, side.upper(), random=random)
        parties.handles += [secrets, identity, random]
        assert identity.public_key == h(party["pid"]), f"{side}: pid"
        identities[side] = identity
    people = {}
    for side in "ab":
        contacts = parties.contacts(identities[side])
        other = _OTHER[side]
        people[side] = (contacts, contacts.add(other.upper(), h(vector[other]["pid"]), h(vector["seed"]), now=T0))
    return people


def _lv_cat(*parts):
    """lv_cat (section 1) of parts shorter than 128 bytes."""
    return b"".join(bytes([len(part)]) + part for part in parts)


def _play_online_verify(parties, vector):
    """Both sides of a session vector, each from its random seed (bound to
    its ``*_binding`` where the vector has one), play every message; the
    COMMIT and KEYs must be the vector's, the PROOFs open with its keys to
    its proofs.  Returns {side: session} once both PROOFs are in."""
    window = vector["window"]
    now = 30 * window
    # 11.1's room message and 11.3's prk.
    room_input = lv_cat(b"itsme-room-id-v1", window.to_bytes(8, "big"))
    assert room_input == h(vector["room_input"])
    assert hmac.new(h(vector["seed"]), room_input, "sha256").digest()[:16] == h(vector["room"])
    check_prk(vector, h(vector["salt"]), b"itsme-ov-key-v1", ("k_i", "k_r"))
    sessions = {}
    for side, (contacts, contact_id) in _vector_contacts(parties, vector).items():
        random = DeterministicRandom(h(vector[side]["random_seed"]))
        binding = vector.get(f"{side}_binding")
        sessions[side] = OnlineVerify(
            contacts, contact_id, window, now, random=random, binding=None if binding is None else h(binding)
        )
        parties.handles += [random, sessions[side]]
        assert sessions[side].room == vector["room"], side
        if "profile_reference" in vector[side]:
            sessions[side].share_profile(h(vector[side]["profile_reference"]))
    i_text, r_text = vector["initiator_text"], _OTHER[vector["initiator_text"]]
    initiator, responder = sessions[i_text], sessions[r_text]
    i_side, r_side = vector[i_text], vector[r_text]
    # 11.4: a bound side appends bind to its KEY.
    i_bind, r_bind = (h(vector.get(f"{side}_bind") or "") for side in (i_text, r_text))
    assert h(i_side["pid"]) < h(r_side["pid"]), "the lower pid initiates"
    assert responder.next_outgoing() == b"", "the responder waits for the COMMIT"
    commit = initiator.next_outgoing()
    assert commit.hex() == vector["commit"]
    commitment = hashlib.sha256(_lv_cat(b"itsme-ov-commit-v1", h(i_side["ephemeral_public"]), h(i_side["challenge"])))
    assert commit == b"\x01\x01" + commitment.digest()
    responder.receive(commit, now)
    key_r = responder.next_outgoing()
    assert key_r.hex() == vector["key_r"]
    assert key_r == b"\x01\x02" + h(r_side["ephemeral_public"]) + h(r_side["challenge"]) + r_bind
    initiator.receive(key_r, now)
    key_i = initiator.next_outgoing()
    assert key_i.hex() == vector["key_i"]
    assert key_i == b"\x01\x02" + h(i_side["ephemeral_public"]) + h(i_side["challenge"]) + i_bind
    proof_i = initiator.next_outgoing()
    responder.receive(key_i, now)
    proof_r = responder.next_outgoing()
    # The PROOFs carry device tags: these contacts have no device secrets,
    # so they are not the vector's; they must still be of its length, and
    # open with its keys to its proofs (and profile references).
    assert len(proof_i) == len(h(vector["proof_message_i"]))
    assert len(proof_r) == len(h(vector["proof_message_r"]))
    for message, key, proof, side, pid in (
        (proof_i, "k_i", "proof_i", i_side, i_side["pid"]),
        (proof_r, "k_r", "proof_r", r_side, r_side["pid"]),
    ):
        plain = _open_proof(message, h(vector[key]))
        assert plain[:32] == h(vector[proof])
        empty_secret_tag = hmac.new(
            h(vector["tag_key"]), _lv_cat(b"itsme-ov-device-v1", h(pid), h(vector["th"]), b""), "sha256"
        ).digest()
        assert plain[32:64] == empty_secret_tag, "a contact without device secrets tags with the empty string"
        assert plain[64:] == h(side.get("profile_reference", ""))
        # The vector's own PROOF opens the same way, to the same proof and reference.
        theirs = _open_proof(h(vector["proof_message_" + key[-1]]), h(vector[key]))
        assert theirs[:32] == plain[:32] and theirs[64:] == plain[64:]
    responder.receive(proof_i, now)
    initiator.receive(proof_r, now)
    assert hashlib.sha256(h(vector["th_input"])).digest() == h(vector["th"])
    return sessions


@pytest.mark.parametrize("vector", ONLINE["sessions"], ids=lambda v: v["sas_text"])
def test_online_verify_session(parties, vector):
    now = 30 * vector["window"]
    sessions = _play_online_verify(parties, vector)
    for session in sessions.values():
        assert session.state == OnlineVerifyState.COMPARE_SAS
        assert session.sas == vector["sas_text"]
    assert itsme.derive_sas(h(vector["seed"]), h(vector["th"])) == vector["sas_text"]
    assert itsme.short_code_format(vector["sas_value"]) == vector["sas_text"]
    # Without device secrets the tags are not checked.
    for session in sessions.values():
        assert session.confirm(now) == VoiceOutcome.VERIFIED_TAG_UNCHECKED
    # Each side reads the reference the other shared, once the SAS is confirmed.
    for side in "ab":
        peer = vector[_OTHER[side]]
        if "profile_reference" in peer:
            assert sessions[side].peer_profile() == h(peer["profile_reference"])
        else:
            with pytest.raises(NotFoundError):
                sessions[side].peer_profile()


_OV_END_STATES = {
    "compare_sas": OnlineVerifyState.COMPARE_SAS,
    "binding_differs": OnlineVerifyState.BINDING_DIFFERS,
    "other_call": OnlineVerifyState.OTHER_CALL,
}


@pytest.mark.parametrize("vector", ONLINE["bound_sessions"], ids=lambda v: v["state_text"])
def test_online_verify_bound_session(parties, vector):
    """A session bound to a call (11.4), played from both sides' random
    seeds and bindings: the KEYs carry bind, and both sides end in the
    vector's state; a SAS only when both are bound to one call."""
    now, window = 30 * vector["window"], vector["window"]
    for side in "ab":
        binding, bind = vector[f"{side}_binding"], vector[f"{side}_bind"]
        if binding is None:
            assert bind is None
        else:
            expected = hmac.new(
                h(vector["seed"]), lv_cat(b"itsme-ov-binding-v1", window.to_bytes(8, "big"), h(binding)), "sha256"
            )
            assert expected.hexdigest() == bind, side
    sessions = _play_online_verify(parties, vector)
    state = _OV_END_STATES[vector["state_text"]]
    for side, session in sessions.items():
        assert session.state == state, side
    if state == OnlineVerifyState.COMPARE_SAS:
        for session in sessions.values():
            assert session.sas == vector["sas_text"]
        assert itsme.derive_sas(h(vector["seed"]), h(vector["th"])) == vector["sas_text"]
        assert itsme.short_code_format(vector["sas_value"]) == vector["sas_text"]
        for session in sessions.values():
            assert session.confirm(now) == VoiceOutcome.VERIFIED_TAG_UNCHECKED
    else:
        assert "sas_text" not in vector
        for session in sessions.values():
            with pytest.raises(itsme.InvalidStateError):
                session.sas
            with pytest.raises(itsme.InvalidStateError):
                session.confirm(now)
            assert session.state == state
            # Nothing recorded: the contact is as added, never verified.
            assert session.store.get(session.contact_id).verified_at is None


def test_online_verify_bound_sessions_cover_every_end_state():
    assert sorted(v["state_text"] for v in ONLINE["bound_sessions"]) == sorted(_OV_END_STATES)


def _open_proof(message, key):
    """A PROOF's plaintext (section 11.3): ChaCha20-Poly1305 under the sender's
    role key, nonce 00 00 00 00 || u64(0), the two header bytes as associated data."""
    aead = pytest.importorskip("cryptography.hazmat.primitives.ciphers.aead")
    assert message[:2] == b"\x01\x03"
    return aead.ChaCha20Poly1305(key).decrypt(bytes(12), message[2:], message[:2])


def test_online_verify_vectors_cover_a_profile_reference():
    shared = [v for v in ONLINE["sessions"] if "profile_reference" in v["a"] or "profile_reference" in v["b"]]
    assert shared, "a session whose PROOFs carry profile references"
    for vector in shared:
        for side in "ab":
            if "profile_reference" in vector[side]:
                assert len(h(vector[side]["profile_reference"])) == itsme.PROFILE_REFERENCE_BYTES
        assert len(h(vector["proof_message_i"])) == itsme.ONLINE_VERIFY_MESSAGE_MAX


@pytest.mark.parametrize("vector", ONLINE["rejections"], ids=lambda v: v["case_text"])
def test_online_verify_rejection(parties, vector):
    """Each message list played against a fresh side of its session: every
    message but the last is accepted, the last refused with ``result``."""
    session_vector = ONLINE["sessions"][vector["session"]]
    window = session_vector["window"]
    now = 30 * window
    contacts, contact_id = _vector_contacts(parties, session_vector)[vector["receiver_text"]]
    random = DeterministicRandom(h(session_vector[vector["receiver_text"]]["random_seed"]))
    session = OnlineVerify(contacts, contact_id, window, now, random=random)
    parties.handles += [random, session]
    for message in vector["messages"][:-1]:
        session.receive(h(message), now)
    with pytest.raises(ItsMeError) as caught:
        session.receive(h(vector["messages"][-1]), now)
    assert caught.value.name == _error_name(vector["result"]), caught.value


@pytest.mark.parametrize("vector", PIN_UPDATE["sessions"], ids=lambda v: v["session_code_text"])
def test_pin_update_session(parties, vector):
    window = vector["window"]
    now = 30 * window
    updates = {}
    for side, (contacts, contact_id) in _vector_contacts(parties, vector).items():
        random = DeterministicRandom(h(vector[side]["random_seed"]))
        updates[side] = PinUpdate(contacts, contact_id, window, now, random=random)
        parties.handles += [random, updates[side]]
        assert updates[side].session_code == vector["session_code_text"], side
    assert itsme.short_code_parse(vector["session_code_text"]) == vector["session_code_value"]
    # 10.3's session code message, HMAC'd with the seed, and prk.
    code_input = lv_cat(b"itsme-pin-update-code-v1", window.to_bytes(8, "big"))
    assert code_input == h(vector["session_code_input"])
    assert int.from_bytes(hmac.new(h(vector["seed"]), code_input, "sha256").digest()[:8], "big") % 260_000 == (
        vector["session_code_value"]
    )
    check_prk(vector, h(vector["salt"]), b"itsme-pin-update-key-v1", ("k_i", "k_r"))
    i_name = vector["initiator_text"]
    initiator, responder = updates[i_name], updates[_OTHER[i_name]]
    assert h(vector[i_name]["pid"]) < h(vector[_OTHER[i_name]]["pid"]), "the lower pid initiates"
    key_i, key_r = initiator.next_outgoing(), responder.next_outgoing()
    assert key_i.hex() == vector["key_i"]
    assert key_r.hex() == vector["key_r"]
    assert key_i == b"\x01\x01" + h(vector[i_name]["ephemeral_public"])
    responder.receive(key_i, now)
    initiator.receive(key_r, now)
    new_i = initiator.next_outgoing()
    assert new_i.hex() == vector["new_i"]
    assert responder.next_outgoing() == b"", "the responder waits for the initiator's NEW"
    responder.receive(new_i, now)
    new_r = responder.next_outgoing()
    assert new_r.hex() == vector["new_r"]
    initiator.receive(new_r, now)
    done = initiator.next_outgoing()
    assert done.hex() == vector["done"]
    responder.receive(done, now)
    assert hashlib.sha256(h(vector["th_input"])).digest() == h(vector["th"])
    # The NEW plaintexts: new device secret || confirmation, sealed under the sender's role key.
    aead = pytest.importorskip("cryptography.hazmat.primitives.ciphers.aead")
    for role, side in (("i", vector[i_name]), ("r", vector[_OTHER[i_name]])):
        plain = h(vector["new_plaintext_" + role])
        assert plain == h(side["new_device_secret"]) + h(vector["confirm_" + role])
        frame = h(vector["new_" + role])
        assert aead.ChaCha20Poly1305(h(vector["k_" + role])).decrypt(bytes(12), frame[2:], frame[:2]) == plain
    for update in (initiator, responder):
        assert update.state == PinUpdateState.DONE
        assert update.next_outgoing() == b""
        assert update.store.get(update.contact_id).state == itsme.VerificationState.VERIFIED


# -- remote.json ----------------------------------------------------------------------------

REMOTE = load("remote.json")


@pytest.mark.parametrize("vector", REMOTE["exchanges"], ids=lambda v: "realtime" if v["realtime"] else "invite")
def test_remote_exchange_with_its_decisions(parties, vector):
    vi, vr = vector["inviter"], vector["invitee"]
    identity_i, random_i = parties.make(vi)
    identity_r, random_r = parties.make(vr)
    realtime = vector["realtime"]
    store_i, store_r = parties.contacts(identity_i), parties.contacts(identity_r)
    inviter = Exchange.invite(identity_i, store_i, T0, realtime=realtime, random=random_i)
    assert (inviter.invite_code, inviter.encryption_code) == (vector["invite_code_text"], vector["encryption_code_text"])
    assert inviter.relay_id == vector["room_id" if realtime else "invite_id"]
    invitee = Exchange.accept_invite(
        identity_r, store_r, vector["invite_code_text"].lower(), vector["encryption_code_text"], T0, realtime=realtime, random=random_r
    )
    for key, sender, receiver in (
        ("invite_message", inviter, invitee),
        ("accept_message", invitee, inviter),
        ("reply_message", inviter, invitee),
    ):
        message = sender.next_outgoing()
        assert message.hex() == vector[key], key
        receiver.receive(message, T0)
    assert inviter.sas == invitee.sas == vector["sas_text"]
    # The decisions (16.3 step 5): each message is the vector's, and each
    # side settles the other's.
    id_i = inviter.confirm(T0)
    if vr["decision"] == 1:
        invitee.confirm(T0)
    else:
        invitee.reject()
    decision_r = invitee.next_outgoing()
    assert decision_r.hex() == vr["decision_message"]
    inviter.receive(decision_r, T0)
    decision_i = inviter.next_outgoing()
    assert decision_i.hex() == vi["decision_message"]
    assert inviter.settle(T0) == (id_i if vr["decision"] == 1 else None)
    invitee.receive(decision_i, T0)
    assert invitee.flags & ExchangeFlags.PEER_CONFIRMED
    if vr["decision"] == 1:
        invitee.settle(T0)
        assert store_i.get(id_i).state == store_r.list()[0].state == VerificationState.VERIFIED
    else:
        assert store_i.count() == store_r.count() == 0


@pytest.mark.parametrize("vector", REMOTE["rejections"], ids=lambda v: v["case_text"])
def test_remote_rejection(parties, vector):
    """A fresh side of the invite exchange (the first of remote.json) accepts
    every message but the last, and refuses the last with ``result``."""
    first = REMOTE["exchanges"][0]
    identity_i, random_i = parties.make(first["inviter"])
    identity_r, random_r = parties.make(first["invitee"])
    inviter = Exchange.invite(identity_i, parties.contacts(identity_i), T0, random=random_i)
    invitee = Exchange.accept_invite(
        identity_r, parties.contacts(identity_r), first["invite_code_text"], first["encryption_code_text"], T0, random=random_r
    )
    receiver = inviter if vector["receiver_text"] == "inviter" else invitee
    *accepted, last = [bytes.fromhex(m) for m in vector["messages"]]
    for message in accepted:
        receiver.receive(message, T0)
    with pytest.raises(ItsMeError) as caught:
        receiver.receive(last, T0)
    assert caught.value.name == _error_name(vector["result"]), caught.value


# -- reexchange.json -------------------------------------------------------------------------

REEXCHANGE = load("reexchange.json")


def test_reexchange_keeps_the_contact_and_replaces_its_seed(parties):
    """8.2: the same two exchange by QR twice (Bob renamed between); the
    second finds the stored contact, keeps its id and name, and both
    confirmations replace its seed (the SAS of each round is the vector's)."""
    identity_a, random_a = parties.make(REEXCHANGE["a"])
    identity_b, random_b = parties.make(REEXCHANGE["b"])
    store_a, store_b = parties.contacts(identity_a), parties.contacts(identity_b)
    contact_id = None
    for vector in REEXCHANGE["exchanges"]:
        now = vector["now"]
        identity_b.name = vector["b_name_text"]
        xa = Exchange.qr(identity_a, store_a, now, random=random_a)
        xb = Exchange.qr(identity_b, store_b, now, random=random_b)
        assert xa.next_outgoing().decode() == vector["a_payload_text"]
        assert xb.next_outgoing().decode() == vector["b_payload_text"]
        xa.receive(xb.next_outgoing(), now)
        xb.receive(xa.next_outgoing(), now)
        assert xa.sas == xb.sas == vector["sas_text"]
        got = xa.confirm(now)
        xb.confirm(now)
        assert bool(xa.flags & ExchangeFlags.KNOWN_CONTACT) == vector["known_contact"]
        contact_id = contact_id or got
        assert got == contact_id
        contact = store_a.get(got)
        stored = vector["a_stored"]
        assert (contact.name, contact.state, contact.verified_at) == (
            stored["name_text"], VerificationState.VERIFIED, stored["verified_at"])
        assert contact.method == itsme.ExchangeMethod.QR
    assert store_a.count() == store_b.count() == 1


# -- export.json ----------------------------------------------------------------------------

EXPORT = load("export.json")
TRANSFER = load("transfer.json")
# Section 16.1's alphabet, of which generated export passwords are made.
CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
# Section 17.3: the contact store travels in chunks of 32 KiB.
CHUNK = 32768


def _aead():
    """AES-256-GCM of the ``cryptography`` package, for the checks that open
    sealed messages with a vector's key; skips the test without it."""
    return pytest.importorskip("cryptography.hazmat.primitives.ciphers.aead")


def _write_store(received, directory, store):
    """The store an import carries, written and read back (None if none)."""
    assert received.contacts_size == len(store)
    path = directory / f"written-{received.fingerprint}.db"
    if not store:
        with pytest.raises(NotFoundError):
            received.write_contacts(path)
        assert not path.exists()
        return None
    received.write_contacts(path)
    with pytest.raises(itsme.AlreadyExistsError):
        received.write_contacts(path)
    return path.read_bytes()


def _error_name(error_text):
    """A result code's header name from the vectors' ``error_text``."""
    return "ITSME_E_" + error_text.upper()


def _contents(party):
    """Section 17: seed | contacts key | be16(len(name)) | name | fingerprint."""
    name = party["name_text"].encode()
    return (
        h(party["identity_seed"])
        + h(party["contacts_key"])
        + len(name).to_bytes(2, "big")
        + name
        + party["fingerprint_text"].encode()
    )


def _canonical(typed):
    """A typed generated password as hashed: uppercase, no spaces or dashes."""
    return typed.replace(" ", "").replace("-", "").upper()


def _without_pin():
    """An identity with no PIN: an export with it checks the password, then
    stops at the PIN (``NotFoundError``) before any key derivation."""
    secrets = SecretStore.memory()
    return secrets, Identity.create(secrets, "No PIN")


@pytest.mark.parametrize("vector", EXPORT["passwords"], ids=lambda v: v["password_text"])
def test_export_password(vector):
    taken = [CODE_ALPHABET[byte % 31] for byte in h(vector["random"]) if byte < 248][:13]
    assert len(taken) == 13
    letters = "".join(taken)
    assert vector["password_text"] == f"{letters[:4]}-{letters[4:8]}-{letters[8:]}"
    secrets, identity = _without_pin()
    with secrets, identity:
        with pytest.raises(itsme.NotFoundError):
            identity.export("123456", vector["password_text"], itsme.PasswordKind.GENERATED, T0)


@pytest.mark.parametrize("vector", EXPORT["typed"], ids=lambda v: repr(v["input_text"]))
def test_export_typed_password(vector):
    secrets, identity = _without_pin()
    with secrets, identity:
        if "error_text" in vector:
            with pytest.raises(ItsMeError) as caught:
                identity.export("123456", vector["input_text"], itsme.PasswordKind.GENERATED, T0)
            assert caught.value.name == _error_name(vector["error_text"])
        else:
            assert _canonical(vector["input_text"]) == vector["canonical_text"]
            with pytest.raises(itsme.NotFoundError):  # the password passed; no PIN is set
                identity.export("123456", vector["input_text"], itsme.PasswordKind.GENERATED, T0)


@pytest.mark.parametrize("vector", EXPORT["exports"], ids=lambda v: v["case_text"])
def test_export(parties, vector):
    identity, _ = parties.make(vector)
    identity.set_pin(vector["pin_text"])
    with DeterministicRandom(h(vector["export_random_seed"])) as random:
        blob = identity.export(vector["pin_text"], vector["password_text"], vector["password_kind"], T0, random=random)
    assert blob.hex() == vector["export"]
    # The parts, as section 17.1 lays them out.
    header = (
        b"ITSMEXP\x01\x01"
        + vector["passes"].to_bytes(4, "big")
        + vector["memory_kib"].to_bytes(4, "big")
        + bytes([vector["password_kind"]])
        + h(vector["salt"])
        + h(vector["nonce"])
    )
    assert header == h(vector["header"]) == blob[: len(header)]
    assert h(vector["contents"]) == _contents(vector)
    assert len(blob) == len(header) + len(h(vector["contents"])) + 16
    assert itsme.export_header(blob) == (vector["passes"], vector["memory_kib"], vector["password_kind"])
    assert itsme.export_to_text(blob) == vector["text"]
    assert itsme.export_from_text(vector["text"]) == blob
    if vector["password_kind"] == itsme.PasswordKind.GENERATED:
        assert h(vector["password_bytes"]).decode() == _canonical(vector["password_text"])
        assert _canonical(vector["typed_text"]) == _canonical(vector["password_text"])
    else:
        assert h(vector["password_bytes"]) == vector["password_text"].encode() == vector["typed_text"].encode()
    # Opened on another device with the password as the person typed it.
    secrets = SecretStore.memory()
    parties.handles.append(secrets)
    with Import.open(secrets, blob, vector["typed_text"], T0) as received:
        assert received.fingerprint == vector["fingerprint_text"]
        assert received.name == vector["name_text"]
        installed = received.install(secrets, None)
        parties.handles.append(installed)
    assert installed.public_key == h(vector["identity_public"])
    assert itsme.import_status(secrets, T0) == (0, 0)


@pytest.mark.parametrize("vector", EXPORT["rejections"], ids=lambda v: v["case_text"])
def test_export_rejection(vector):
    with SecretStore.memory() as secrets:
        with pytest.raises(ItsMeError) as caught:
            blob = itsme.export_from_text(vector["text"]) if "text" in vector else h(vector["export"])
            Import.open(secrets, blob, vector["password_text"], T0).close()
        assert caught.value.name == _error_name(vector["error_text"]), caught.value
        counted = 1 if vector["error_text"] == "authentication_failed" else 0
        assert itsme.import_status(secrets, T0) == (counted, 0)


@pytest.mark.parametrize("vector", EXPORT["exports_with_contacts"], ids=lambda v: v["case_text"])
def test_export_with_contacts(parties, vector):
    """17.1, format version 2: a vector's store is a stand-in, not a contact
    store the identity could export, so the vector's blob is opened (and the
    store it carries written out byte for byte); an export of this identity
    with a real store, from the vector's random source, has the vector's
    header."""
    blob = h(vector["export"])
    store = h(vector["store"])
    header = (
        b"ITSMEXP\x02\x01"
        + vector["passes"].to_bytes(4, "big")
        + vector["memory_kib"].to_bytes(4, "big")
        + bytes([vector["password_kind"]])
        + h(vector["salt"])
        + h(vector["nonce"])
    )
    assert header == h(vector["header"]) == blob[: len(header)]
    assert h(vector["contents"]) == _contents(vector)
    assert store.startswith(b"SQLite format 3\0")
    assert len(blob) == len(header) + len(h(vector["contents"])) + len(store) + 16
    assert "text" not in vector
    assert itsme.export_header(blob) == (vector["passes"], vector["memory_kib"], vector["password_kind"])
    with pytest.raises(InvalidArgumentError):
        itsme.export_to_text(blob)  # a file only
    secrets = SecretStore.memory()
    parties.handles.append(secrets)
    with Import.open(secrets, blob, vector["typed_text"], T0) as received:
        assert received.fingerprint == vector["fingerprint_text"]
        assert received.name == vector["name_text"]
        assert _write_store(received, parties.directory, store) == store
        installed = received.install(secrets, None)
        parties.handles.append(installed)
    assert installed.public_key == h(vector["identity_public"])
    assert itsme.import_status(secrets, T0) == (0, 0)
    # The identity exports its own (real) store under the same header.
    identity, _ = parties.make(vector)
    identity.set_pin(vector["pin_text"])
    contacts = parties.contacts(identity)
    with DeterministicRandom(h(vector["export_random_seed"])) as random:
        made = identity.export_with_contacts(
            vector["pin_text"], vector["password_text"], contacts, vector["password_kind"], T0, random=random
        )
    assert made[: len(header)] == header
    sealed = _aead().AESGCM(h(vector["key"])).decrypt(h(vector["nonce"]), made[len(header):], header)
    assert sealed.startswith(h(vector["contents"]))
    assert sealed[len(h(vector["contents"])):].startswith(b"SQLite format 3\0")


def test_export_with_contacts_vectors_open_with_the_vector_key():
    aead = _aead()
    for vector in EXPORT["exports_with_contacts"]:
        blob = h(vector["export"])
        plain = aead.AESGCM(h(vector["key"])).decrypt(h(vector["nonce"]), blob[46:], blob[:46])
        assert plain == h(vector["contents"]) + h(vector["store"])


# -- transfer.json --------------------------------------------------------------------------


def _receiver(vector):
    with DeterministicRandom(h(vector["receiver_random_seed"])) as random:
        receiver = Transfer.receiver(T0, random=random)
    assert receiver.offer == vector["offer_text"]
    assert receiver.room == vector["room_text"]
    return receiver


def _identity_plaintext(vector):
    """Section 17.3: the identity message seals contents || u32(len(store))."""
    return h(vector["contents"]) + len(h(vector["store"])).to_bytes(4, "big")


def test_transfer_vectors_cover_a_store_of_several_chunks():
    first, second = TRANSFER["transfers"]
    store = h(first["store"])
    assert len(first["store_messages"]) == -(-len(store) // CHUNK) >= 3
    assert len(store) % CHUNK, "the last chunk is short"
    assert store.startswith(b"SQLite format 3\0")
    assert second["store"] == "" and second["store_messages"] == []


@pytest.mark.parametrize("vector", TRANSFER["transfers"], ids=lambda v: v["case_text"])
def test_transfer(parties, vector):
    """Reruns the transfer from both sides' random sources.  The sender
    draws the same keys and key message; its identity message is the
    vector's when no store travels.  A vector's store is a stand-in (not a
    contact store a sender could copy), so the receiver is given the
    vector's identity and store messages and its import must carry the
    store byte for byte."""
    receiver = _receiver(vector)
    parties.handles.append(receiver)
    offer = h(vector["offer"])
    assert offer == b"\x02" + h(vector["transfer_id"]) + h(vector["receiver_public"])
    text = vector["offer_text"]
    assert text == "ITSMETR2:" + base64.urlsafe_b64encode(offer).decode().rstrip("=")
    room = hashlib.sha256(_lv_cat(b"itsme-transfer-room-v1", h(vector["transfer_id"]))).digest()[:16]
    assert room.hex() == vector["room_text"]
    party = vector["sender"]
    identity, _ = parties.make(party)
    identity.set_pin(party["pin_text"])
    with DeterministicRandom(h(vector["sender_random_seed"])) as random:
        sender = Transfer.sender(identity, party["pin_text"], text, T0, random=random)
    parties.handles.append(sender)
    assert sender.room == vector["room_text"]
    key_message = sender.next_outgoing()
    assert key_message.hex() == vector["key_message"]
    assert key_message == b"\x02\x01" + h(vector["sender_public"])
    assert sender.sas == vector["sas_text"]
    receiver.receive(key_message, T0)
    assert receiver.state == TransferState.COMPARE_SAS
    assert receiver.sas == vector["sas_text"]
    transcript = _lv_cat(b"itsme-transfer-v2", h(vector["transfer_id"]), h(vector["receiver_public"]), key_message[2:])
    assert transcript == h(vector["transcript_input"])
    assert hashlib.sha256(transcript).digest() == h(vector["transcript_hash"])
    assert itsme.derive_sas(h(vector["seed"]), h(vector["transcript_hash"])) == vector["sas_text"]
    assert itsme.short_code_format(vector["sas_value"]) == vector["sas_text"]
    store = h(vector["store"])
    assert h(vector["contents"]) == _contents(party)
    assert h(vector["identity_plaintext"]) == _identity_plaintext(vector)
    identity_message = h(vector["identity_message"])
    assert identity_message[:2] == b"\x02\x02"
    assert len(identity_message) == 2 + len(h(vector["identity_plaintext"])) + 16
    assert 105 <= len(identity_message) <= 232
    store_messages = [h(message) for message in vector["store_messages"]]
    assert len(store_messages) == -(-len(store) // CHUNK)
    for index, message in enumerate(store_messages):
        assert message[:2] == b"\x02\x03"
        assert len(message) == 2 + len(store[index * CHUNK:(index + 1) * CHUNK]) + 16 <= itsme.TRANSFER_MESSAGE_MAX
    sender.confirm(T0)
    sent = sender.next_outgoing()
    if not store:
        # With no store included, the sender's message is the vector's, and alone.
        assert sent == identity_message
    else:
        # The same key and transcript seal this sender's contents with no store.
        assert sent[:2] == b"\x02\x02" and len(sent) == len(identity_message)
    assert sender.next_outgoing() == b""
    receiver.confirm(T0)
    receiver.receive(identity_message, T0)
    for message in store_messages:
        assert receiver.state == TransferState.AWAITING_IDENTITY
        receiver.receive(message, T0)
    assert receiver.state == TransferState.DONE
    secrets = SecretStore.memory()
    parties.handles.append(secrets)
    with receiver.take_import() as received:
        assert received.fingerprint == party["fingerprint_text"]
        assert received.name == party["name_text"]
        assert _write_store(received, parties.directory, store) == (store or None)
        installed = received.install(secrets, None)
        parties.handles.append(installed)
    assert installed.public_key == h(party["identity_public"])


@pytest.mark.parametrize("vector", TRANSFER["transfers"], ids=lambda v: v["case_text"])
def test_transfer_messages_open_with_the_vector_key(vector):
    """17.3's sealing, checked with another AES-GCM: the identity message
    under nonce 0, store message i under u96(i + 1), each with its header
    bytes, the transcript hash (and i) as associated data."""
    aead = _aead().AESGCM(h(vector["key"]))
    th = h(vector["transcript_hash"])
    identity_message = h(vector["identity_message"])
    assert aead.decrypt(bytes(12), identity_message[2:], b"\x02\x02" + th) == h(vector["identity_plaintext"])
    chunks = []
    for index, message in enumerate(h(m) for m in vector["store_messages"]):
        nonce = (index + 1).to_bytes(12, "big")
        chunks.append(aead.decrypt(nonce, message[2:], b"\x02\x03" + th + index.to_bytes(4, "big")))
    assert b"".join(chunks) == h(vector["store"])
    assert all(len(chunk) == CHUNK for chunk in chunks[:-1])


@pytest.mark.parametrize("vector", TRANSFER["rejections"], ids=lambda v: v["case_text"])
def test_transfer_rejection(vector):
    with _receiver(TRANSFER["transfers"][0]) as receiver:

        def play(step):
            if "receive" in step:
                receiver.receive(h(step["receive"]), T0)
            else:
                assert step == {"confirm": True}
                receiver.confirm(T0)

        for step in vector["steps"][:-1]:
            play(step)
        with pytest.raises(ItsMeError) as caught:
            play(vector["steps"][-1])
        assert caught.value.name == _error_name(vector["error_text"]), caught.value


@pytest.mark.parametrize("vector", TRANSFER["offer_rejections"], ids=lambda v: v["case_text"])
def test_transfer_offer_rejection(parties, vector):
    first = TRANSFER["transfers"][0]
    party = first["sender"]
    identity, _ = parties.make(party)
    identity.set_pin(party["pin_text"])
    with DeterministicRandom(h(first["sender_random_seed"])) as random:
        with pytest.raises(ItsMeError) as caught:
            Transfer.sender(identity, party["pin_text"], vector["offer_text"], T0, random=random)
    assert caught.value.name == _error_name(vector["error_text"]), caught.value


# -- profile.json ---------------------------------------------------------------------------

PROFILE = load("profile.json")
_ERRORS = {"authentication_failed": itsme.AuthenticationFailedError, "malformed_message": itsme.MalformedMessageError}


def test_profile_constants_and_owner():
    assert PROFILE["max_record_bytes"] == itsme.PROFILE_RECORD_MAX
    ed25519 = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")
    owner = ed25519.Ed25519PrivateKey.from_private_bytes(h(PROFILE["owner_seed"])).public_key()
    raw = owner.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert raw == h(PROFILE["owner_public"])


@pytest.mark.parametrize("vector", PROFILE["records"], ids=lambda v: v["record_name_text"])
def test_profile_record_opens(vector):
    photo = h(vector["fields"][1]["value"])
    assert [f["field_name_text"] for f in vector["fields"]] == ["name", "photo", "photo-filename"]
    assert vector["fields"][0]["value"] == vector["name_text"].encode().hex()
    assert vector["fields"][2]["value"] == vector["photo_filename_text"].encode().hex()
    record, reference = h(vector["record"]), h(vector["reference"])
    assert len(record) == vector["size"]
    assert reference == h(vector["record_id"]) + h(vector["record_key"])
    with Profile.open(record, reference, h(PROFILE["owner_public"])) as opened:
        assert opened.name == vector["name_text"]
        assert opened.photo == photo
        assert opened.photo_filename == vector["photo_filename_text"]
        assert opened.record == record
        assert opened.record_id.hex() == vector["record_id"]
        assert opened.record_name == vector["record_name_text"]
        assert opened.reference == reference


@pytest.mark.parametrize("vector", PROFILE["records"], ids=lambda v: v["record_name_text"])
def test_profile_record_is_made_again(parties, vector):
    """The library's random source draws the record key, then the three
    nonces: the same random seed seals the same fields.  The identity is
    another key than the vector's owner, so only the record MAC differs,
    and it is the vector's HMAC with k3 over the record MAC input ending in
    this identity's key."""
    secrets = SecretStore.memory()
    identity = Identity.create(secrets, "Owner")
    parties.handles += [secrets, identity]
    with DeterministicRandom(h(vector["random_seed"])) as random:
        made = Profile.create(
            identity, vector["name_text"], h(vector["fields"][1]["value"]), vector["photo_filename_text"], rng=random
        )
    parties.handles.append(made)
    record, expected = made.record, h(vector["record"])
    assert len(record) == len(expected) == vector["size"]
    assert record[:-32] == expected[:-32], "the same version, nonces, lengths, ciphertexts and field MACs"
    assert made.reference[16:] == h(vector["record_key"])
    mac_input = h(vector["record_mac_input"])
    owner = h(PROFILE["owner_public"])
    assert mac_input.endswith(bytes([32]) + owner)
    ours = mac_input[:-32] + identity.public_key
    record_mac = hmac.new(h(vector["k3"]), ours, "sha256").digest()
    assert record[-32:] == record_mac
    assert made.record_id == record_mac[:16] == made.reference[:16]
    assert made.record_name == record_mac[:16].hex()
    # As the vector's owner would check it: with this identity's key it opens,
    # with the vector's owner's it does not.
    with Profile.open(record, made.reference, identity.public_key) as opened:
        assert opened.name == vector["name_text"]
    with pytest.raises(itsme.AuthenticationFailedError):
        Profile.open(record, made.reference, owner)


@pytest.mark.parametrize("vector", PROFILE["refusals"], ids=lambda v: v["case_text"])
def test_profile_refusal(vector):
    if "record_zero_bytes" in vector:
        record = bytes(vector["record_zero_bytes"])
    else:
        record = h(vector["record"])
    with pytest.raises(ItsMeError) as caught:
        Profile.open(record, h(vector["reference"]), h(vector["owner_public"])).close()
    assert caught.value.name == _error_name(vector["error_text"]), caught.value
    assert isinstance(caught.value, _ERRORS[vector["error_text"]])


# -- approval.json --------------------------------------------------------------------------

APPROVAL = load("approval.json")


class _ReplayTable:
    """A replay store in a dict, through the callback interface, so that the
    replay keys can be read and a forgery seen to leave it empty."""

    def __init__(self):
        self.entries = {}

    def __call__(self, key, expires_at, now):
        if key in self.entries:
            return True
        self.entries[key] = expires_at
        return False


def _device(backend, vector):
    """A device's secret store enrolled as the vector's: (store, enrollment)."""
    store = SecretStore.from_callbacks(backend)
    with DeterministicRandom(h(vector["random_seed"])) as random:
        enrollment = itsme.enroll(store, vector["service_id_text"], vector["label_text"], h(vector["nonce"]), rng=random)
    return store, enrollment


@pytest.mark.parametrize("vector", APPROVAL["enrollments"], ids=lambda v: v["label_text"])
def test_enrollment(vector):
    items = {}

    class Backend:
        def get(self, name):
            return items.get(name)

        def put(self, name, value, accessibility):
            items[name] = value

        def remove(self, name):
            return items.pop(name, None) is not None

    store, enrollment = _device(Backend(), vector)
    with store:
        assert enrollment.hex() == vector["enrollment"]
        assert itsme.credential_id(store, vector["service_id_text"]).hex() == vector["credential_id"]
    label = vector["label_text"].encode()
    assert enrollment == b"\x01" + h(vector["public_key"]) + bytes([len(label)]) + label + h(vector["signature"])
    assert h(vector["signed_message"]) == _lv_cat(
        b"itsme-enroll-v1", vector["service_id_text"].encode(), h(vector["nonce"]), h(vector["public_key"]), label
    )
    credential_id = hashlib.sha256(_lv_cat(b"itsme-credential-id-v1", h(vector["public_key"]))).digest()[:16]
    assert credential_id.hex() == vector["credential_id"]
    # What the device keeps (docs/STORAGE.md).
    assert items == {vector["credential_item_text"]: h(vector["credential_item"])}
    credential = itsme.verify_enrollment(vector["service_id_text"], h(vector["nonce"]), enrollment)
    assert credential == itsme.Credential(h(vector["credential_id"]), h(vector["public_key"]), vector["label_text"])


def test_two_enrollments_of_one_user():
    first, second = APPROVAL["enrollments"]
    assert first["service_id_text"] == second["service_id_text"]
    assert first["public_key"] != second["public_key"]


@pytest.mark.parametrize("vector", APPROVAL["requests"], ids=lambda v: v["session_id_text"])
def test_approval_request(vector):
    with DeterministicRandom(h(vector["random_seed"])) as random:
        request = itsme.create_approval_request(
            vector["service_id_text"],
            vector["service_name_text"],
            vector["session_id_text"],
            vector["scopes_given_text"].split(),
            vector["lifetime"],
            vector["now"],
            rng=random,
        )
    assert request.hex() == vector["request"]
    assert hashlib.sha256(request).digest() == h(vector["request_hash"])
    shown = itsme.ApprovalRequest.parse(request, vector["now"])
    assert shown == itsme.ApprovalRequest(
        vector["service_id_text"],
        vector["service_name_text"],
        vector["session_id_text"],
        vector["otp_text"],
        vector["issued_at"],
        vector["expires_at"],
        tuple(vector["scopes_text"].split()),
    )
    assert (vector["issued_at"], vector["expires_at"]) == (vector["now"], vector["now"] + vector["lifetime"])
    # The OTP: the first 4-byte big-endian value below 4,294,000,000, modulo 10^6.
    values = [int(chunk, 16) for chunk in vector["otp_random"]]
    assert all(value >= 4_294_000_000 for value in values[:-1]) and values[-1] < 4_294_000_000
    assert "%06d" % (values[-1] % 10**6) == vector["otp_text"]
    assert h(vector["nonce"]) in request
    replay_key = hashlib.sha256(
        _lv_cat(b"itsme-approval-replay-v1", vector["service_id_text"].encode(), h(vector["nonce"]))
    ).digest()
    assert replay_key.hex() == vector["replay_key"]


@pytest.mark.parametrize("vector", APPROVAL["approvals"], ids=lambda v: v["case_text"])
def test_approval(backend, vector):
    enrolled = APPROVAL["enrollments"][vector["enrollment"]]
    asked = APPROVAL["requests"][vector["request"]]
    request = h(asked["request"])
    store, _ = _device(backend, enrolled)
    with store:
        granted = vector["granted_given_text"].split()
        approval = itsme.sign_approval(
            store, request, itsme.ApprovalDecision(vector["decision"]), granted, vector["timestamp"]
        )
    assert approval.hex() == vector["approval"]
    assert hashlib.sha256(request).digest() == h(vector["request_hash"])
    assert approval.endswith(h(vector["signature"]))
    table = _ReplayTable()
    with ReplayStore.from_callback(table) as replay:
        result = itsme.verify_approval(
            request, approval, [h(key) for key in vector["public_keys"]], replay, vector["verify_now"]
        )
    assert result == itsme.ApprovalResult(
        itsme.ApprovalDecision(vector["decision"]),
        h(vector["credential_id"]),
        vector["timestamp"],
        tuple(vector["granted_text"].split()),
    )
    assert table.entries == {h(asked["replay_key"]): asked["expires_at"]}


@pytest.mark.parametrize("vector", APPROVAL["refusals"], ids=lambda v: v["case_text"])
def test_approval_refusal(vector):
    table = _ReplayTable()
    keys = [h(key) for key in vector["public_keys"]]
    with ReplayStore.from_callback(table) as replay:
        for answer in vector["approvals"][:-1]:
            before = dict(table.entries)
            try:
                itsme.verify_approval(h(vector["request"]), h(answer), keys, replay, vector["now"])
            except ItsMeError:
                assert table.entries == before, "a forgery leaves the replay store as it was"
        with pytest.raises(ItsMeError) as caught:
            itsme.verify_approval(h(vector["request"]), h(vector["approvals"][-1]), keys, replay, vector["now"])
    assert caught.value.name == _error_name(vector["error_text"]), caught.value
    # Only a verified answer was recorded, under the request's replay key.
    assert len(table.entries) <= 1


@pytest.mark.parametrize("vector", APPROVAL["request_refusals"], ids=lambda v: v["case_text"])
def test_approval_request_refusal(vector):
    with pytest.raises(ItsMeError) as caught:
        itsme.ApprovalRequest.parse(h(vector["request"]), vector["now"])
    assert caught.value.name == _error_name(vector["error_text"]), caught.value


@pytest.mark.parametrize("vector", APPROVAL["enrollment_refusals"], ids=lambda v: v["case_text"])
def test_enrollment_refusal(vector):
    with pytest.raises(ItsMeError) as caught:
        itsme.verify_enrollment(vector["service_id_text"], h(vector["nonce"]), h(vector["enrollment"]))
    assert caught.value.name == _error_name(vector["error_text"]), caught.value


# -- the roll call (rollcall.json, section 20) -----------------------------------------

ROLLCALL = load("rollcall.json")
_ROLLCALL_STATES = {
    "not_yet": RollCallState.NOT_YET,
    "verified": RollCallState.VERIFIED,
    "wrong": RollCallState.WRONG,
    "device_changed": RollCallState.DEVICE_CHANGED,
    "verified_tag_unchecked": RollCallState.VERIFIED_TAG_UNCHECKED,
    "refused": RollCallState.REFUSED,
    "unknown": RollCallState.UNKNOWN,
    "binding_differs": RollCallState.BINDING_DIFFERS,
    "other_call": RollCallState.OTHER_CALL,
}
_RC_HELLO, _RC_SAID, _RC_VIEW = 1, 2, 3
_RC_SIGNATURE = 64


def _rollcall_parties(parties):
    """The three devices of rollcall.json: each identity drawn from its
    ``identity_random_seed``, each contact added with its seed and, where the
    vectors list them, its device secrets (a test-build function).  Returns
    ({name: contact store}, {owner: {peer: contact id}})."""
    vectors = ROLLCALL
    stores, keys = {}, {}
    for party in vectors["participants"]:
        secrets = SecretStore.memory()
        random = DeterministicRandom(h(party["identity_random_seed"]))
        identity = Identity.create(secrets, party["name_text"], random=random)
        parties.handles += [secrets, identity, random]
        assert identity.public_key == h(party["identity_public"]), party["name_text"]
        stores[party["name_text"]] = parties.contacts(identity)
        keys[party["name_text"]] = identity.public_key
    ids = {}
    for contact in vectors["contacts"]:
        owner, peer = contact["owner_text"], contact["peer_text"]
        store = stores[owner]
        contact_id = store.add(peer, keys[peer], h(contact["seed"]), now=vectors["now"] - 7000)
        if contact["device_secret_mine"]:
            store.set_device_secrets(contact_id, h(contact["device_secret_mine"]), h(contact["device_secret_theirs"]))
        ids.setdefault(owner, {})[peer] = contact_id
    return stores, ids


class _VectorRoom:
    """The group room the vectors were made in (15.9): the relay's events,
    and every message forwarded in order to the others with its sender's
    slot (a message sent alone goes nowhere).  ``sent`` keeps each message
    that was forwarded, as (slot, bytes)."""

    def __init__(self, now):
        self.now = now
        self.present = []  # (slot, roll call), in the order of joining
        self.sent = []

    def join(self, call, slot):
        for _, other in self.present:
            other.peer_joined(slot, self.now)
        call.joined(slot, [s for s, _ in self.present], self.now)
        self.present.append((slot, call))
        self.pump()

    def pump(self):
        moved = True
        while moved:
            moved = False
            for slot, call in self.present:
                while message := call.next_outgoing():
                    moved = True
                    if len(self.present) < 2:
                        continue  # alone: the relay refuses it
                    self.sent.append((slot, message))
                    for other, receiver in self.present:
                        if other != slot:
                            receiver.receive(message, slot, self.now)

    def first(self, slot, kind):
        return next(m for s, m in self.sent if s == slot and m[1] == kind)

    def last(self, slot, kind):
        return [m for s, m in self.sent if s == slot and m[1] == kind][-1]


def _rc_signed(message, key_hex):
    """Checks a roll-call message's signature (20.1) where the
    ``cryptography`` package is installed."""
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:  # pragma: no cover - the library checked it already
        return
    rcid = h(ROLLCALL["rcid"])
    Ed25519PublicKey.from_public_bytes(h(key_hex)).verify(
        message[-_RC_SIGNATURE:], lv_cat(b"itsme-rc-sign-v2", rcid, message[:-_RC_SIGNATURE])
    )


def test_rollcall_vectors_formulas():
    """The identifiers of 20.1 and the roster of 20.3 from the documented
    formulas, and the shapes of the HELLOs, VIEWs and SAIDs."""
    vectors = ROLLCALL
    code = vectors["meeting_code_text"]
    assert itsme.check_remote_code(code) == code[:4] + "-" + code[4:]
    rcid = hashlib.sha256(lv_cat(b"itsme-rollcall-v2", code.encode())).digest()
    assert rcid.hex() == vectors["rcid"]
    assert hashlib.sha256(lv_cat(b"itsme-rollcall-room-v1", code.encode())).digest()[:16].hex() == vectors["room_id"]
    assert hashlib.sha256(lv_cat(b"itsme-rc-session-v2", rcid, b"\0", b"")).hexdigest() == vectors["sid"]
    names = sorted(h(p["name"]) for p in vectors["participants"])
    assert hashlib.sha256(lv_cat(b"itsme-rc-roster-v2", rcid, *names)).hexdigest() == vectors["roster"]
    for p in vectors["participants"]:
        hello, body = h(p["hello"]), h(p["hello_body"])
        assert hello[: len(body)] == body and len(hello) == len(body) + _RC_SIGNATURE
        assert hashlib.sha256(body).hexdigest() == p["name"]
        assert hello[:3] == bytes([2, _RC_HELLO, 0]) and hello[3:35] == h(p["roll_call_key"])
        count = int.from_bytes(hello[67:69], "big")
        assert len(hello) == 133 + 16 * count
        tags = [hello[69 + 16 * i : 85 + 16 * i] for i in range(count)]
        assert tags == sorted(tags)
        for tag in p["tags_for_contacts"]:
            assert h(tag["tag"]) in tags
        _rc_signed(hello, p["roll_call_key"])
    keys = {p["name_text"]: p["roll_call_key"] for p in vectors["participants"]}
    for view in vectors["views"]:
        message = h(view["view"])
        k = message[73]
        assert len(message) == 138 + 32 * k + (k + 7) // 8
        assert int.from_bytes(message[34:38], "big") == view["seq"]
        assert int.from_bytes(message[38:40], "big") == view["slot"]
        assert message[40:72].hex() == vectors["roster"] and message[72] == int(view["said"])
        assert [message[74 + 32 * i : 106 + 32 * i].hex() for i in range(k)] == view["names"]
        _rc_signed(message, keys[view["name_text"]])
    for said in vectors["saids"]:
        message = h(said["said"])
        assert message[34:66].hex() == vectors["roster"]
        assert len(message) == 131 + 50 * message[66]
        for position, entry in enumerate(said["entries"]):
            assert message[67 + 50 * position : 117 + 50 * position].hex() == entry["entry"]
        _rc_signed(message, keys[said["name_text"]])


def test_rollcall_vectors_open_the_sealed_codes():
    """Each SAID entry for a contact opens with the vectors' key (20.5):
    the code and the device tag."""
    aead = pytest.importorskip("cryptography.hazmat.primitives.ciphers.aead")
    roster = h(ROLLCALL["roster"])
    for said in ROLLCALL["saids"]:
        for entry in said["entries"]:
            if entry["padding"]:
                continue
            plain = aead.ChaCha20Poly1305(h(entry["key"])).decrypt(bytes(12), h(entry["entry"]), bytes([2, 2]) + roster)
            assert plain.hex() == entry["plaintext"]
            assert int.from_bytes(plain[:2], "big") == said["code"] and plain[2:].hex() == entry["device_tag"]


def test_rollcall_vectors_replay(parties):
    """The whole roll call made again from each device's ``random_seed``,
    joining one after the other (slots 1, 2, 3) through a room that
    delivers in order: the HELLOs, the number of messages of the joins, the
    roster, the codes and SAIDs, the VIEWs of the tick a second later byte
    for byte, then each listener's outcome for each contact's code."""
    vectors = ROLLCALL
    t = vectors["now"]
    stores, ids = _rollcall_parties(parties)
    people = vectors["participants"]
    names = [p["name_text"] for p in people]
    sources = [DeterministicRandom(h(p["random_seed"])) for p in people]
    parties.handles += sources
    calls = []
    for party, random in zip(people, sources):
        call = RollCall(stores[party["name_text"]], vectors["meeting_code_text"], t, random=random)
        parties.handles.append(call)
        assert call.room == vectors["room_id"]
        assert call.next_outgoing() == b"", "nothing is queued before joined"
        calls.append(call)
    room = _VectorRoom(t)
    for party, call in zip(people, calls):
        room.join(call, party["slot"])
    for party in people:
        assert room.first(party["slot"], _RC_HELLO).hex() == party["hello"], party["name_text"]
    assert len(room.sent) == vectors["join_messages"]
    for call, random in zip(calls, sources):
        assert call.roster.hex() == vectors["roster"]
        assert call.head_count == 3
        assert call.phase == RollCallPhase.GATHERING
        call.confirm_roster(call.roster, t, random=random)
        assert call.phase == RollCallPhase.CONFIRMED
    codes = [call.code for call in calls]
    for call, random in zip(calls, sources):
        call.confirm_said(t, random=random)
        assert call.phase == RollCallPhase.SAID
        room.pump()
    for party, said_vector, code in zip(people, vectors["saids"], codes):
        assert said_vector["name_text"] == party["name_text"]
        assert room.first(party["slot"], _RC_SAID).hex() == said_vector["said"], said_vector["name_text"]
        assert code == said_vector["code_text"]
    # A second later each one's VIEW is due (it took SAIDs).
    room.now = t + 1
    for call in calls:
        call.tick(t + 1)
    room.pump()
    for party, view in zip(people, vectors["views"]):
        assert view["name_text"] == party["name_text"]
        assert room.last(party["slot"], _RC_VIEW).hex() == view["view"], view["name_text"]
    for call in calls:
        assert all(p.agrees and not p.left for p in call.participants)
        assert not call.split
    for outcome in vectors["outcomes"]:
        listener, speaker = outcome["listener_text"], outcome["speaker_text"]
        call = calls[names.index(listener)]
        contact_id = ids[listener][speaker]
        index = next(p.index for p in call.participants if p.contact_id == contact_id)
        state = call.enter_heard(index, codes[names.index(speaker)], t + 1)
        assert state == _ROLLCALL_STATES[outcome["state_text"]], (listener, speaker)
    # Ben and Cai share nothing: each is unknown to the other.
    for listener, speaker in (("Ben", "Cai"), ("Cai", "Ben")):
        call = calls[names.index(listener)]
        slot = people[names.index(speaker)]["slot"]
        assert [(p.state, p.contact_id) for p in call.participants if p.slot == slot] == [(RollCallState.UNKNOWN, None)]


def test_rollcall_vectors_bound(parties):
    """Ana and Ben bound to one call, Cai to another (20.1): their HELLOs,
    and what each shows of the others."""
    vectors = ROLLCALL
    t = vectors["now"]
    stores, _ = _rollcall_parties(parties)
    room = _VectorRoom(t)
    bound = vectors["bound"]["participants"]
    for slot, party in enumerate(bound, 1):
        random = DeterministicRandom(h(party["random_seed"]))
        call = RollCall(
            stores[party["name_text"]], vectors["meeting_code_text"], t, binding=h(party["binding"]), random=random
        )
        parties.handles += [random, call]
        room.join(call, slot)
    for slot, party in enumerate(bound, 1):
        rcid = h(vectors["rcid"])
        binding = h(party["binding"])
        assert hashlib.sha256(lv_cat(b"itsme-rc-session-v2", rcid, b"\1", binding)).hexdigest() == party["sid"]
        assert hashlib.sha256(lv_cat(b"itsme-rc-binding-v2", rcid, binding)).hexdigest() == party["bind"]
        hello = room.first(slot, _RC_HELLO)
        assert hello.hex() == party["hello"], party["name_text"]
        assert hello[2] == 1 and hello[35:67].hex() == party["bind"]
        call = room.present[slot - 1][1]
        seen = [{"slot": p.slot, "state_text": p.state.name.lower()} for p in call.participants[1:]]
        assert seen == party["sees"], party["name_text"]
        for p in call.participants[1:]:
            if p.state in (RollCallState.OTHER_CALL, RollCallState.BINDING_DIFFERS):
                assert p.contact_id is None


@pytest.mark.parametrize("vector", ROLLCALL["rejections"], ids=lambda v: v["case_text"])
def test_rollcall_rejection(parties, vector):
    """Each message list fed, each from its slot, to a fresh roll call of
    the receiver's (the same random seed: the same key and HELLO as in the
    roll call), joined in slot 2 beside slots 1 and 3: all but the last are
    accepted, the last gives ``result``."""
    t = ROLLCALL["now"]
    stores, _ = _rollcall_parties(parties)
    people = {p["name_text"]: p for p in ROLLCALL["participants"]}
    receiver = people[vector["receiver_text"]]
    random = DeterministicRandom(h(receiver["random_seed"]))
    call = RollCall(stores[vector["receiver_text"]], ROLLCALL["meeting_code_text"], t, random=random)
    parties.handles += [random, call]
    call.joined(receiver["slot"], [1, 3], t)
    assert call.next_outgoing().hex() == receiver["hello"]
    messages = [(h(m["message"]), m["slot"]) for m in vector["messages"]]
    for message, slot in messages[:-1]:
        call.receive(message, slot, t)
    last, slot = messages[-1]
    before = (call.roster, call.head_count, call.participants)
    if vector["result"] == "accepted":
        call.receive(last, slot, t)
        return
    with pytest.raises(ItsMeError) as caught:
        call.receive(last, slot, t)
    assert caught.value.name == _error_name(vector["result"]), caught.value
    assert (call.roster, call.head_count, call.participants) == before, "a refused message changes nothing"

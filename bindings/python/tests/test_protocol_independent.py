"""Replay Tests/ProtocolVectors/*.json through tests/independent/protocol.py.

That module follows docs/PROTOCOL.md only, so agreement here shows that the document determines
every value in the vectors.  Each vector's outputs are recomputed from its inputs alone (identity
seeds, ephemeral secrets, device secrets, names, session code); every listed rejection must be
rejected.  Section numbers refer to PROTOCOL.md.
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from independent import protocol as P  # noqa: E402


def _vector_dir() -> pathlib.Path:
    """Tests/ProtocolVectors of the repository holding this file."""
    here = pathlib.Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "Tests" / "ProtocolVectors"
        if candidate.is_dir():
            return candidate
    return here.parents[3] / "Tests" / "ProtocolVectors"


VECTORS = _vector_dir()
_HAVE_VECTORS = any(VECTORS.glob("*.json"))
needs_vectors = pytest.mark.skipif(
    not _HAVE_VECTORS, reason=f"no protocol test vectors (*.json) in {VECTORS}"
)


def load(name: str):
    path = VECTORS / name
    assert path.exists(), f"{path} is missing although other vector files exist"
    return json.loads(path.read_text(encoding="utf-8"))


def h(s: str) -> bytes:
    return bytes.fromhex(s)


def expect_keys(obj, keys: str):
    """Fail on a vector field this file does not check (or a missing one), so that a field
    added to the vectors later cannot go unchecked."""
    changed = sorted(set(obj) ^ set(keys.split()))
    assert not changed, f"vector fields added or removed: {changed}"


def _cases(data, key=None):
    items = data if key is None else data[key]
    assert items, f"empty vector list {key!r}"
    return items


# --------------------------------------------------------------------------------------------
# Section 1: lv_cat, from the document and from the CPace draft
# --------------------------------------------------------------------------------------------

def test_lv_cat_document_example():
    assert P.lv_cat(b"1234", b"5", b"", b"678") == h("04" "31323334" "01" "35" "00" "03" "363738")


@pytest.mark.parametrize(
    "arg, prefix",
    [(b"", "00"), (b"1234", "04"), (b"x" * 127, "7f"), (b"x" * 128, "8001")],
)
def test_lv_cat_cpace_prepend_len(arg, prefix):
    assert P.lv_cat(arg) == h(prefix) + arg


def test_leb128_more_groups():
    assert P.leb128(0) == b"\x00"
    assert P.leb128(300) == h("ac02")
    assert P.leb128(16384) == h("808001")


# --------------------------------------------------------------------------------------------
# encoding.json (sections 1 and 4)
# --------------------------------------------------------------------------------------------

@needs_vectors
def test_encoding_lv_cat():
    for case in _cases(load("encoding.json"), "lv_cat"):
        assert P.lv_cat(*[h(a) for a in case["args"]]).hex() == case["output"]


@needs_vectors
def test_encoding_base64url():
    vec = load("encoding.json")["base64url"]
    for case in _cases(vec, "valid"):
        assert P.b64url_encode(h(case["bytes"])) == case["text"]
        assert P.b64url_decode(case["text"]).hex() == case["bytes"]
    for text in _cases(vec, "invalid"):
        with pytest.raises(P.ProtocolError):
            P.b64url_decode(text)


@needs_vectors
def test_encoding_base64():
    vec = load("encoding.json")["base64"]
    for case in _cases(vec, "valid"):
        assert P.b64_encode(h(case["bytes"])) == case["text"]
        assert P.b64_decode(case["text"]).hex() == case["bytes"]
    for text in _cases(vec, "invalid"):
        with pytest.raises(P.ProtocolError):
            P.b64_decode(text)


@needs_vectors
def test_encoding_short_codes():
    vec = load("encoding.json")["short_code"]
    for case in _cases(vec, "format"):
        assert P.format_short_code(case["value"]) == case["text"]
        assert P.parse_short_code(case["text"]) == case["value"]
    for case in _cases(vec, "parse_valid"):
        assert P.parse_short_code(case["input_text"]) == case["value"], case
    for text in _cases(vec, "parse_invalid"):
        with pytest.raises(P.ProtocolError):
            P.parse_short_code(text)


def test_strict_base64_own_cases():
    # One accepted text per byte string (section 1).
    for n in range(0, 40):
        data = bytes(range(n))
        assert P.b64url_decode(P.b64url_encode(data)) == data
        assert P.b64_decode(P.b64_encode(data)) == data
    for bad in ["A", "AB=", "AB==", "AB+/", "AB C", "AB\n", "AF", "AAB", "QUJ", " QUI"]:
        # "AF" and "AAB" have non-zero unused bits; "QUJ" too (canonical is "QUI").
        with pytest.raises(P.ProtocolError):
            P.b64url_decode(bad)
    for bad in ["AB", "AB=", "AF==", "AAB=", "A===", "AB=A", "QUI=\n", "-_==", "QQ=="[:3]]:
        with pytest.raises(P.ProtocolError):
            P.b64_decode(bad)
    assert P.b64_decode("QQ==") == b"A"


def test_short_code_examples():
    assert P.format_short_code(40042) == "ECHO 0042"
    assert P.parse_short_code("  echo-0042 ") == 40042
    assert P.parse_short_code("Zulu 9999") == 259_999
    for bad in ["ECHO0042", "ECHO  0042", "ECHO 042", "ECHO 00042", "ECHO\t0042", "X-RAY 0001",
                "ECHO 00٤2", "\tECHO 0042", "ECHO_0042"]:
        with pytest.raises(P.ProtocolError):
            P.parse_short_code(bad)


def test_session_code_drawing():
    # 4.2: r >= 4294940000 is drawn again; v = r mod 260000.
    limit = P.SESSION_CODE_LIMIT
    assert limit % 260_000 == 0 and limit <= 2**32 < limit + 260_000
    draws = [(limit + k).to_bytes(4, "big") for k in (0, 1, 2**32 - 1 - limit)]
    assert P.draw_session_code(draws + [(limit - 1).to_bytes(4, "big")]) == 259_999
    assert P.draw_session_code([(40042).to_bytes(4, "big")]) == 40042
    assert P.draw_session_code([(260_000 + 7).to_bytes(4, "big")]) == 7


# --------------------------------------------------------------------------------------------
# seed.json (section 3) and sas.json (section 4.1)
# --------------------------------------------------------------------------------------------

@needs_vectors
def test_seed_vectors():
    for case in _cases(load("seed.json")):
        expect_keys(case, "a_ephemeral_secret a_ephemeral_public b_ephemeral_secret "
                          "b_ephemeral_public a_fingerprint_text b_fingerprint_text shared "
                          "salt_text seed")
        a_sk, b_sk = h(case["a_ephemeral_secret"]), h(case["b_ephemeral_secret"])
        assert P.x25519_public(a_sk).hex() == case["a_ephemeral_public"]
        assert P.x25519_public(b_sk).hex() == case["b_ephemeral_public"]
        shared_a = P.x25519_shared(a_sk, P.x25519_public(b_sk))
        shared_b = P.x25519_shared(b_sk, P.x25519_public(a_sk))
        assert shared_a == shared_b
        assert shared_a.hex() == case["shared"]
        fa, fb = case["a_fingerprint_text"], case["b_fingerprint_text"]
        assert P.seed_salt(fa, fb).decode("ascii") == case["salt_text"]
        assert P.derive_seed(a_sk, P.x25519_public(b_sk), fa, fb).hex() == case["seed"]
        assert P.derive_seed(b_sk, P.x25519_public(a_sk), fb, fa).hex() == case["seed"]


@needs_vectors
def test_sas_vectors():
    for case in _cases(load("sas.json")):
        expect_keys(case, "seed transcript_hash info okm value text")
        seed, th = h(case["seed"]), h(case["transcript_hash"])
        assert P.sas_info(th).hex() == case["info"]
        assert P.sas_okm(seed, th).hex() == case["okm"]
        assert P.sas_value(seed, th) == case["value"]
        assert P.sas_text(seed, th) == case["text"]


def test_zero_shared_secret_rejected():
    # A low-order peer key (u = 0 or 1) gives an all-zero X25519 output (sections 1 and 3).
    sk = bytes(range(32))
    for low_order in (bytes(32), b"\x01" + bytes(31)):
        with pytest.raises(P.ProtocolError):
            P.x25519_shared(sk, low_order)


# --------------------------------------------------------------------------------------------
# qr.json (section 5)
# --------------------------------------------------------------------------------------------

def _check_qr_party(party) -> P.QrBuilt:
    """Recompute every field of a QR party from its seed, secrets and name.  The random_seed
    drives the library's own test random source, which is not part of the protocol."""
    expect_keys(party, "random_seed identity_seed identity_public fingerprint_text name_text "
                       "ephemeral_secret ephemeral_public device_secret body signed_message "
                       "signature payload payload_text")
    seed = h(party["identity_seed"])
    pk = P.ed25519_public(seed)
    assert pk.hex() == party["identity_public"]
    assert P.fingerprint(pk) == party["fingerprint_text"]
    assert P.x25519_public(h(party["ephemeral_secret"])).hex() == party["ephemeral_public"]
    built = P.build_qr(seed, h(party["ephemeral_secret"]), h(party["device_secret"]),
                       party["name_text"].encode("utf-8"))
    assert built.body.hex() == party["body"]
    assert built.signed_message.hex() == party["signed_message"]
    assert built.signature.hex() == party["signature"]
    assert built.payload.hex() == party["payload"]
    assert built.text == party["payload_text"]
    assert len(built.payload) == 154 + len(party["name_text"].encode("utf-8"))
    return built


@needs_vectors
def test_qr_exchanges():
    for ex in _cases(load("qr.json"), "exchanges"):
        expect_keys(ex, "a b shared seed salt_text transcript_input transcript_hash sas_value "
                        "sas_text")
        a, b = ex["a"], ex["b"]
        built = {"a": _check_qr_party(a), "b": _check_qr_party(b)}
        for me, peer_key in (("a", "b"), ("b", "a")):
            mine, theirs = ex[me], ex[peer_key]
            own_pk = P.ed25519_public(h(mine["identity_seed"]))
            own_esk = h(mine["ephemeral_secret"])
            # The receiver parses the peer's text (5.2) ...
            peer = P.parse_qr_text(theirs["payload_text"], own_pk, own_esk)
            assert peer.identity_pk.hex() == theirs["identity_public"]
            assert peer.fingerprint_text == theirs["fingerprint_text"]
            assert peer.ephemeral_pk.hex() == theirs["ephemeral_public"]
            assert peer.device_secret.hex() == theirs["device_secret"]
            assert peer.name.decode("utf-8") == theirs["name_text"]
            # ... and derives the seed, transcript and SAS (5.3).
            res = P.qr_finish(built[me].payload, own_esk, peer)
            assert res.shared.hex() == ex["shared"]
            assert res.salt.decode("ascii") == ex["salt_text"]
            assert res.seed.hex() == ex["seed"]
            assert res.transcript_input.hex() == ex["transcript_input"]
            assert res.transcript_hash.hex() == ex["transcript_hash"]
            assert res.sas_value == ex["sas_value"]
            assert res.sas_text == ex["sas_text"]


@needs_vectors
def test_qr_rejections():
    for case in _cases(load("qr.json"), "rejections"):
        expect_keys(case, "case_text receiver payload_text")
        rec = case["receiver"]
        own_pk = P.ed25519_public(h(rec["identity_seed"]))
        assert own_pk.hex() == rec["identity_public"], case["case_text"]
        with pytest.raises(P.ProtocolError):
            P.parse_qr_text(case["payload_text"], own_pk, h(rec["ephemeral_secret"]))


def _own_qr_pair():
    alice_seed, bob_seed = bytes([1]) * 32, bytes([2]) * 32
    bob_esk = bytes([4]) * 32
    built = P.build_qr(alice_seed, bytes([3]) * 32, bytes([5]) * 16, "Alice ü".encode())
    return built, P.ed25519_public(bob_seed), bob_esk


def test_qr_parser_rejects_every_flip_and_truncation():
    built, bob_pk, bob_esk = _own_qr_pair()
    P.parse_qr_text(built.text, bob_pk, bob_esk)  # the untouched payload is accepted
    # Every other value of every byte of the signed part (the body), and of the signature.
    payload = built.payload
    for i in range(len(payload)):
        masks = range(1, 256) if i < len(built.body) else (0x01, 0x80, 0xFF)
        for mask in masks:
            tampered = bytearray(payload)
            tampered[i] ^= mask
            with pytest.raises(P.ProtocolError):
                P.parse_qr_payload(bytes(tampered), bob_pk, bob_esk)
    for n in range(len(payload)):
        with pytest.raises(P.ProtocolError):
            P.parse_qr_payload(payload[:n], bob_pk, bob_esk)
    for n in range(len(built.text)):
        with pytest.raises(P.ProtocolError):
            P.parse_qr_text(built.text[:n], bob_pk, bob_esk)
    # Own key (reflection) and a text that is no payload at all.
    with pytest.raises(P.ProtocolError):
        P.parse_qr_text(built.text, P.ed25519_public(bytes([1]) * 32), bob_esk)
    with pytest.raises(P.NotAnExchangePayload):
        P.parse_qr_text("https://example.org/", bob_pk, bob_esk)
    with pytest.raises(P.ProtocolError):
        P.parse_qr_text("itsme1:" + built.text[7:], bob_pk, bob_esk)


# --------------------------------------------------------------------------------------------
# source-v5.json (section 6)
# --------------------------------------------------------------------------------------------

@needs_vectors
def test_source_v5_imports():
    for case in _cases(load("source-v5.json"), "imports"):
        expect_keys(case, "text name_text fingerprint_text ephemeral_public device_secret_text "
                          "receiver shared salt_text seed")
        rec = case["receiver"]
        own_pk = P.ed25519_public(h(rec["identity_seed"]))
        assert own_pk.hex() == rec["identity_public"]
        assert P.fingerprint(own_pk) == rec["fingerprint_text"]
        imp = P.import_v5(case["text"], own_pk, h(rec["ephemeral_secret"]))
        assert imp.peer.name.decode("utf-8") == case["name_text"]
        assert imp.peer.fingerprint_text == case["fingerprint_text"]
        assert imp.peer.ephemeral_pk.hex() == case["ephemeral_public"]
        assert imp.peer.device_secret.decode("ascii") == case["device_secret_text"]
        assert imp.shared.hex() == case["shared"]
        assert imp.salt.decode("ascii") == case["salt_text"]
        assert imp.seed.hex() == case["seed"]


@needs_vectors
def test_source_v5_rejections():
    data = load("source-v5.json")
    # The schema gives rejections no receiver; the first import's receiver stands in for the
    # own-fingerprint check and the shared-secret computation.
    default = _cases(data, "imports")[0]["receiver"]
    for case in _cases(data, "rejections"):
        rec = case.get("receiver", default)
        own_pk = P.ed25519_public(h(rec["identity_seed"]))
        with pytest.raises(P.ProtocolError):
            P.import_v5(case["text"], own_pk, h(rec["ephemeral_secret"]))


def test_source_v5_escapes():
    key = P.b64_encode(P.x25519_public(bytes([9]) * 32))
    fp = "0123456789abcdef"
    assert P.parse_v5(f"5|a\\|b\\\\c|{fp}|{key}|123456").name == b"a|b\\c"
    assert P.parse_v5(f"5|a\\\\|{fp}|{key}|123456").name == b"a\\"
    assert P.parse_v5(f"5|x|{fp}|{key}|123456").fingerprint_text == fp.upper()
    for bad in [f"5|a\\n|{fp}|{key}|123456", f"5||{fp}|{key}|123456",
                f"5|a\\|{fp}|{key}|123456", f"6|a|{fp}|{key}|123456",
                f"5|a|{fp}|{key}|12345", f"5|a|{fp}|{key}|1234567",
                f"5|a|{fp}|{key.rstrip('=')}|123456", f"5|a|{fp[:-1]}|{key}|123456",
                f"5|a|{fp}|{key}|123456|", f"5|a\x07|{fp}|{key}|123456"]:
        with pytest.raises(P.ProtocolError):
            P.parse_v5(bad)
    with pytest.raises(P.ProtocolError):
        P.parse_v5(f"5|a|{fp}|{key}|123456", own_fingerprint=fp.upper())


# --------------------------------------------------------------------------------------------
# bluetooth.json (section 7)
# --------------------------------------------------------------------------------------------

class _Side:
    """One device of a Bluetooth exchange, computed from a vector party's inputs."""

    def __init__(self, party):
        expect_keys(party, "random_seed identity_seed identity_public fingerprint_text name_text "
                           "ephemeral_secret ephemeral_public device_secret role_text rest "
                           "commitment hello key data signed_message signature plaintext "
                           "data_frame confirm_frame")
        self.v = party
        self.seed = h(party["identity_seed"])
        self.pk = P.ed25519_public(self.seed)
        self.esk = h(party["ephemeral_secret"])
        self.epk = P.x25519_public(self.esk)
        self.ds = h(party["device_secret"])
        self.name = party["name_text"].encode("utf-8")
        self.commitment = P.bt_commitment(self.pk, self.epk, self.name, self.ds)
        self.hello = P.hello_frame(self.pk, self.commitment)
        self.key = P.key_frame(self.epk)


def _bt_run(ex):
    a, b = _Side(ex["a"]), _Side(ex["b"])
    code_text = ex["session_code_text"]
    for side in (a, b):
        v = side.v
        assert side.pk.hex() == v["identity_public"]
        assert P.fingerprint(side.pk) == v["fingerprint_text"]
        assert side.epk.hex() == v["ephemeral_public"]
        assert P.bt_rest(side.name, side.ds).hex() == v["rest"]
        assert side.commitment.hex() == v["commitment"]
        assert side.hello.hex() == v["hello"]
        assert side.key.hex() == v["key"]
    # Each device receives the other's HELLO and KEY, fixes roles and derives keys (7.2, 7.3).
    results = {}
    for me, peer in ((a, b), (b, a)):
        peer_hello_body = P.parse_frame(peer.hello, P.HELLO)
        role = P.bt_role(me.pk, peer_hello_body[:8])
        assert role == me.v["role_text"]
        peer_role = P.RESPONDER if role == P.INITIATOR else P.INITIATOR
        ini, res = (me, peer) if role == P.INITIATOR else (peer, me)
        th1_in = P.bt_th1_input(code_text, ini.hello, res.hello, ini.key, res.key)
        assert th1_in.hex() == ex["th1_input"]
        th1 = P.sha256(th1_in)
        assert th1.hex() == ex["th1"]
        shared = P.x25519_shared(me.esk, P.parse_frame(peer.key, P.KEY))
        assert shared.hex() == ex["shared"]
        key_i, key_r = P.bt_session_keys(shared, th1)
        assert key_i.hex() == ex["key_initiator"]
        assert key_r.hex() == ex["key_responder"]
        my_key, peer_key = (key_i, key_r) if role == P.INITIATOR else (key_r, key_i)
        # Own DATA and CONFIRM (7.4, 7.1).
        data = P.bt_data(me.pk, me.ds, me.name)
        assert data.hex() == me.v["data"]
        msg = P.bt_signed_message(th1, role, data)
        assert msg.hex() == me.v["signed_message"]
        plaintext = P.bt_plaintext(me.seed, th1, role, me.ds, me.name)
        assert plaintext[len(data):].hex() == me.v["signature"]
        assert plaintext.hex() == me.v["plaintext"]
        assert len(plaintext) == 113 + len(me.name)
        assert P.data_frame(my_key, plaintext).hex() == me.v["data_frame"]
        assert P.confirm_frame(my_key, True).hex() == me.v["confirm_frame"]
        # The peer's DATA, as received: decrypt with the peer's key, check (7.4).
        peer_plain = P.open_frame(h(peer.v["data_frame"]), P.DATA, peer_key, P.DATA_COUNTER)
        assert peer_plain.hex() == peer.v["plaintext"]
        got = P.parse_bt_plaintext(peer_plain, th1, peer_role, peer.hello, peer.key, me.pk)
        assert got.identity_pk == peer.pk and got.device_secret == peer.ds
        assert got.name == peer.name
        # Seed (section 3), transcript and SAS (7.4, 4.1).
        seed = P.derive_seed(me.esk, peer.epk, P.fingerprint(me.pk), P.fingerprint(peer.pk))
        assert seed.hex() == ex["seed"]
        plain_i, plain_r = (plaintext, peer_plain) if role == P.INITIATOR else (peer_plain,
                                                                                plaintext)
        th = P.bt_transcript_hash(th1, plain_i, plain_r)
        assert th.hex() == ex["transcript_hash"]
        assert P.sas_value(seed, th) == ex["sas_value"]
        assert P.sas_text(seed, th) == ex["sas_text"]
        # Both confirm.
        assert P.open_confirm(h(peer.v["confirm_frame"]), peer_key) is True
        results[role] = (th1, my_key, peer_key, plaintext, me, peer)
    assert set(results) == {P.INITIATOR, P.RESPONDER}
    return results


@needs_vectors
def test_bluetooth_exchanges():
    for ex in _cases(load("bluetooth.json"), "exchanges"):
        expect_keys(ex, "session_code_text session_code_value a b th1_input th1 shared "
                        "key_initiator key_responder seed transcript_hash sas_value sas_text")
        assert P.parse_short_code(ex["session_code_text"]) == ex["session_code_value"]
        assert P.format_short_code(ex["session_code_value"]) == ex["session_code_text"]
        _bt_run(ex)


def _own_bt_exchange():
    """A Bluetooth exchange built entirely by this module (no vectors)."""
    parties = {}
    for tag, name in ((1, "Alice"), (2, "Bob ☎")):
        parties[tag] = {
            "identity_seed": bytes([0x10 + tag]) * 32, "ephemeral_secret": bytes([0x20 + tag]) * 32,
            "device_secret": bytes([0x30 + tag]) * 16, "name": name.encode(),
        }
    sides = []
    for p in parties.values():
        pk = P.ed25519_public(p["identity_seed"])
        epk = P.x25519_public(p["ephemeral_secret"])
        c = P.bt_commitment(pk, epk, p["name"], p["device_secret"])
        sides.append(dict(p, pk=pk, epk=epk, hello=P.hello_frame(pk, c), key=P.key_frame(epk)))
    x, y = sides
    ini, res = (x, y) if P.fingerprint_bytes(x["pk"]) < P.fingerprint_bytes(y["pk"]) else (y, x)
    th1 = P.bt_th1("ECHO 0042", ini["hello"], res["hello"], ini["key"], res["key"])
    plain = P.bt_plaintext(ini["identity_seed"], th1, P.INITIATOR, ini["device_secret"],
                           ini["name"])
    return th1, ini, res, plain


def test_bluetooth_data_rejects_every_flip_and_truncation():
    th1, ini, res, plain = _own_bt_exchange()
    check = lambda p: P.parse_bt_plaintext(p, th1, P.INITIATOR, ini["hello"], ini["key"],  # noqa
                                           res["pk"])
    check(plain)
    signed_len = len(plain) - 64  # `data`, signed together with th1 and the role
    for i in range(len(plain)):
        masks = range(1, 256) if i < signed_len else (0x01, 0x80, 0xFF)
        for mask in masks:
            tampered = bytearray(plain)
            tampered[i] ^= mask
            with pytest.raises(P.ProtocolError):
                check(bytes(tampered))
    for n in range(len(plain)):
        with pytest.raises(P.ProtocolError):
            check(plain[:n])
    # Wrong role, wrong th1, own key, wrong HELLO: all rejected.
    with pytest.raises(P.ProtocolError):
        P.parse_bt_plaintext(plain, th1, P.RESPONDER, ini["hello"], ini["key"], res["pk"])
    with pytest.raises(P.ProtocolError):
        P.parse_bt_plaintext(plain, bytes(32), P.INITIATOR, ini["hello"], ini["key"], res["pk"])
    with pytest.raises(P.ProtocolError):
        P.parse_bt_plaintext(plain, th1, P.INITIATOR, ini["hello"], ini["key"], ini["pk"])
    with pytest.raises(P.ProtocolError):
        P.parse_bt_plaintext(plain, th1, P.INITIATOR, res["hello"], ini["key"], res["pk"])
    with pytest.raises(P.ProtocolError):
        P.parse_bt_plaintext(plain, th1, P.INITIATOR, ini["hello"], res["key"], res["pk"])


def test_bluetooth_frames_reject_tampering():
    th1, ini, res, plain = _own_bt_exchange()
    shared = P.x25519_shared(ini["ephemeral_secret"], res["epk"])
    key_i, key_r = P.bt_session_keys(shared, th1)
    frame = P.data_frame(key_i, plain)
    assert len(frame) <= 259
    assert P.open_frame(frame, P.DATA, key_i, P.DATA_COUNTER) == plain
    for i in range(len(frame)):
        tampered = bytearray(frame)
        tampered[i] ^= 0x01
        with pytest.raises(P.ProtocolError):
            P.open_frame(bytes(tampered), P.DATA, key_i, P.DATA_COUNTER)
    for n in range(len(frame)):
        with pytest.raises(P.ProtocolError):
            P.open_frame(frame[:n], P.DATA, key_i, P.DATA_COUNTER)
    # Wrong key, wrong counter, or a DATA body presented as CONFIRM.
    for args in ((P.DATA, key_r, 0), (P.DATA, key_i, 1), (P.CONFIRM, key_i, 0)):
        with pytest.raises(P.ProtocolError):
            P.open_frame(frame, *args)
    confirm = P.confirm_frame(key_i, False)
    assert len(confirm) == 19 and P.open_confirm(confirm, key_i) is False
    with pytest.raises(P.ProtocolError):
        P.open_confirm(P.seal_frame(P.CONFIRM, key_i, 1, b"\x02"), key_i)
    for bad in (ini["hello"][:-1], b"\x02" + ini["hello"][1:], ini["key"]):
        with pytest.raises(P.ProtocolError):
            P.parse_frame(bad, P.HELLO)
    with pytest.raises(P.ProtocolError):
        P.bt_role(ini["pk"], P.fingerprint_bytes(ini["pk"]))

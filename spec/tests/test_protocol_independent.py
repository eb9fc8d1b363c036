"""Replay Tests/ProtocolVectors/*.json through spec/independent/protocol.py.

That module follows docs/PROTOCOL.md only, so agreement here shows that the document determines
every value in the vectors.  Each vector's outputs are recomputed from its inputs alone (identity
seeds, ephemeral secrets, device secrets, names, session code; for voice.json the seed, window,
ids, selections and device secrets (and, for its bound sessions, 9.7, the call binding), and
for its degradation codes the seed, id and interim secret; for online-verify.json the seed,
window, identity seeds, ephemeral secrets, challenges and device secrets (and, for its bound
sessions, 11.4, each side's call binding, with the state both sides end in), and for
pin-update.json the seed, window, identity seeds, ephemeral secrets
and new device secrets, with both sides of each session run against each other; for
remote.json the identity seeds, ephemeral secrets, device secrets, names, codes as typed, sid,
CPace scalars and each side's decision, the inviter and the invitee run against each other
through their DECISIONs; for reexchange.json the identity keys, ephemeral secrets, device
secrets, names and times, its two QR exchanges run against a model of each side's contacts
(8.1, 8.2); for export.json the
identity seed, contacts key, name, salt, nonce and password (and the contact store, for the
exports of format version 2), and for transfer.json the ephemeral secrets, transfer id and the
sender's identity and contact store, each transfer replayed through the independent receiver,
through spec/independent/transfer.py);
every listed rejection must be rejected, with the same reason class where the vectors name one.
Section numbers refer to PROTOCOL.md.

The CPace primitive of section 16.2 and its ristretto255 group, which the ``cryptography``
package does not offer, are checked against the CFRG draft's own vectors (a copy under
Tests/ItsMeCoreTests/Vectors) and RFC 9496's.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import pathlib
import random
import sys

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from independent import cpace as C  # noqa: E402
from independent import protocol as P  # noqa: E402
from independent import ristretto255 as R  # noqa: E402
from independent import transfer as T  # noqa: E402


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


# Section 1, names: the refused code points as the document lists them.
_NAME_REFUSED_RANGES = ((0x0000, 0x001F), (0x007F, 0x009F), (0x200B, 0x200B), (0x202A, 0x202E),
                        (0x2060, 0x2064), (0x2066, 0x2069), (0xFEFF, 0xFEFF))


def _name_refuses(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _NAME_REFUSED_RANGES)


@needs_vectors
def test_encoding_names():
    """Section 1: names accepted (and kept byte for byte: validate_name returns the text of the
    very bytes, no normalisation), and for each refused code point a name containing it."""
    vec = load("encoding.json")["names"]
    expect_keys(vec, "valid invalid")
    for text in _cases(vec, "valid"):
        raw = text.encode("utf-8")
        assert 1 <= len(raw) <= 128
        assert P.validate_name(raw).encode("utf-8") == raw
    refused = set()
    for case in _cases(vec, "invalid"):
        expect_keys(case, "text code_point")
        cp = case["code_point"]
        assert chr(cp) in case["text"] and _name_refuses(cp)
        with pytest.raises(P.ProtocolError):
            P.validate_name(case["text"].encode("utf-8"))
        refused.add(cp)
    # One name for every refused code point, and no other.
    assert refused == {cp for lo, hi in _NAME_REFUSED_RANGES for cp in range(lo, hi + 1)}


def test_name_rule_by_code_point():
    """Section 1: the rule is by code points, whatever their Unicode category or assignment."""
    for cp in range(0x0000, 0x3000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        name = ("a" + chr(cp) + "b").encode("utf-8")
        if _name_refuses(cp):
            with pytest.raises(P.ProtocolError):
                P.validate_name(name)
        else:
            assert P.validate_name(name) == "a" + chr(cp) + "b"
    for cp in (0xFEFF, 0xFEFE, 0xFFFE, 0xFFFF, 0xE000, 0x10FFFF, 0x1F468, 0xF0000):
        name = chr(cp).encode("utf-8")
        if _name_refuses(cp):
            with pytest.raises(P.ProtocolError):
                P.validate_name(name)
        else:  # "Every other code point is allowed, assigned or not"
            assert P.validate_name(name) == chr(cp)
    # Lengths are bytes: 1 to 128.
    assert P.validate_name(b"x") == "x" and P.validate_name("é".encode() * 64)
    for bad in (b"", b"x" * 129, "é".encode() * 64 + b"x"):
        with pytest.raises(P.ProtocolError):
            P.validate_name(bad)
    # Not valid UTF-8: a lone continuation byte, an overlong form, an encoded surrogate, a code
    # point above U+10FFFF, a cut sequence.
    for bad in (b"\x80", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"a\xe2\x80"):
        with pytest.raises(P.ProtocolError):
            P.validate_name(bad)


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
                "ECHO 00٤2", "\tECHO 0042", "ECHO_0042", "ECHO -0042", "ECHO- 0042",
                "ECHO 0042\u00a0", "ECHO 0042\n"]:
        with pytest.raises(P.TypingError) as err:
            P.parse_short_code(bad)
        assert P.result_code(err.value) == "invalid_argument"
    # Section 4: "any number of them (none, one or many on either side)".
    for spaces in range(0, 70, 7):
        assert P.parse_short_code(" " * spaces + "ECHO 0042" + " " * (69 - spaces)) == 40042


def test_typed_tags_and_heard_codes():
    """Section 1 and 9.6: a typed tag is one or two digits, surrounding spaces ignored (`5` and
    `05` are both 5); a heard code takes any number of surrounding spaces; a heard tag is a
    number 0 to 99, checked after the heard code's form; each typing error is
    ``invalid_argument``."""
    for text, value in (("5", 5), ("05", 5), ("  07 ", 7), ("99", 99), ("0", 0)):
        assert P.parse_typed_tag(text) == value
    for bad in ("", " ", "100", "5a", "-1", "+5", "5 5", "\uff15", "٥"):
        with pytest.raises(P.TypingError):
            P.parse_typed_tag(bad)
    assert P.parse_voice_code("    ALFA 123      ") == 123
    assert P.check_heard("  alfa-123 ", 99, 123) is True
    assert P.check_heard("ALFA 124", 0, 123) is False
    for tag in (100, -1, 1000):
        with pytest.raises(P.TypingError) as err:
            P.check_heard("ALFA 123", tag, 123)
        assert "tag" in str(err.value)
    with pytest.raises(P.TypingError) as err:  # the code's form first
        P.check_heard("ALFA 12", 100, 123)
    assert "tag" not in str(err.value)
    with pytest.raises(P.TypingError):
        P.ContactSecrets(b"a" * 16, b"b" * 16).hear_voice_tag(bytes(32), 1, b"p" * 32, 100)


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


# 5.2's result codes of the payload checks, as qr.json's rejections name them (`error_text`).
_QR_REFUSAL_CODES = ("invalid_argument", "malformed_message", "authentication_failed",
                     "invalid_key")


def _whole_qr_peer() -> P.QrBuilt:
    """A whole payload from an identity of no vector, which any receiver of this file accepts."""
    return P.build_qr(bytes([0x42]) * 32, bytes([0x43]) * 32, bytes([0x44]) * 16, b"Peer")


def _assert_qr_refusal_left(side: P.QrExchange, ends: bool, whole: P.QrBuilt, what) -> None:
    """5.2, "What a refusal ends", on an exchange that has just refused a text: it ended, and
    every later payload is ``invalid_state``; or it changed nothing, and the exchange still
    awaits a payload and accepts a whole one."""
    assert side.failed is ends, what
    assert side.awaiting_payload is not ends, what
    assert side.store.contacts == {}, what
    if ends:
        with pytest.raises(P.InvalidState):
            side.receive(whole.text, side.created_at)
        assert side.peer is None and side.store.contacts == {}, what
    else:
        peer = P.parse_qr_text(whole.text, side.identity_pk, side.ephemeral_secret)
        expected = P.qr_finish(side.own_payload, side.ephemeral_secret, peer)
        assert side.receive(whole.text, side.created_at) == expected, what
        assert side.peer.payload == whole.payload and not side.awaiting_payload, what
        assert side.store.contacts == {}, what  # 8.1, "Saving": stored when the host saves
        side.save(side.created_at)
        assert len(side.store.contacts) == 1, what


@needs_vectors
def test_qr_rejections():
    """5.2: every rejection of qr.json is refused with the result code its `error_text` names,
    by the parser and by an exchange of its receiver, and ends that exchange exactly when
    `ends_exchange` says (false exactly for ``invalid_argument``, a text that is not a whole
    payload): after it, the exchange answers every payload ``invalid_state``, or it still
    awaits a payload and accepts a whole one."""
    whole = _whole_qr_peer()
    for case in _cases(load("qr.json"), "rejections"):
        expect_keys(case, "case_text receiver payload_text error_text ends_exchange")
        what = case["case_text"]
        rec = case["receiver"]
        expect_keys(rec, "identity_seed identity_public ephemeral_secret")
        seed, esk = h(rec["identity_seed"]), h(rec["ephemeral_secret"])
        own_pk = P.ed25519_public(seed)
        assert own_pk.hex() == rec["identity_public"], what
        assert case["error_text"] in _QR_REFUSAL_CODES, what
        assert case["ends_exchange"] is (case["error_text"] != "invalid_argument"), what
        # The parser ...
        with pytest.raises(P.ProtocolError) as err:
            P.parse_qr_text(case["payload_text"], own_pk, esk)
        assert P.result_code(err.value) == case["error_text"], what
        assert P.qr_refusal_ends_exchange(err.value) is case["ends_exchange"], what
        # ... and an exchange of the receiver (its own payload's device secret and name are
        # not in the file and play no part in 5.2's checks).
        side = P.QrExchange.create(seed, esk, bytes(16), b"Receiver", 0, P.ContactStore())
        with pytest.raises(P.ProtocolError) as err:
            side.receive(case["payload_text"], 0)
        assert P.result_code(err.value) == case["error_text"], what
        _assert_qr_refusal_left(side, case["ends_exchange"], whole, what)


# --------------------------------------------------------------------------------------------
# reexchange.json (sections 5, 8.1 and 8.2)
# --------------------------------------------------------------------------------------------

def _reexchange_payload(party, ex, me: str, name_text: str) -> bytes:
    """Check one payload text of reexchange.json against the party's values (5.1).  The file
    gives each party's ``random_seed`` and ``identity_public`` but no identity seed: the random
    source is the library's (13), not the document's, so the signature cannot be made here.
    Every byte of the body is rebuilt from the party's key, ephemeral secret, device secret
    and name, and the signature is verified under the party's key."""
    text = ex[f"{me}_payload_text"]
    assert text.startswith(P.QR_PREFIX)
    payload = P.b64url_decode(text[len(P.QR_PREFIX):])
    body = P.qr_body(h(party["identity_public"]), P.x25519_public(h(ex[f"{me}_ephemeral_secret"])),
                     h(ex[f"{me}_device_secret"]), name_text.encode("utf-8"))
    assert payload[:len(body)] == body
    assert len(payload) == len(body) + 64 == 154 + len(name_text.encode("utf-8"))
    assert P.ed25519_verify(h(party["identity_public"]), payload[len(body):],
                            P.qr_signed_message(body))
    assert P.b64url_encode(payload) == text[len(P.QR_PREFIX):]
    return payload


def _reexchange_round(data, ex, stores):
    """One QR exchange of reexchange.json between fresh QrExchange objects of ``a`` and ``b``
    over their stores; returns the two exchanges, each having received the other's text and
    saved (8.1, "Saving")."""
    names = {"a": data["a"]["name_text"], "b": ex["b_name_text"]}
    sides = {}
    for me in ("a", "b"):
        payload = _reexchange_payload(data[me], ex, me, names[me])
        sides[me] = P.QrExchange(payload, h(ex[f"{me}_ephemeral_secret"]), ex["now"], stores[me])
        assert sides[me].own_text == ex[f"{me}_payload_text"]
    for me, peer in (("a", "b"), ("b", "a")):
        res = sides[me].receive(ex[f"{peer}_payload_text"], ex["now"])
        got = sides[me].peer
        assert got.identity_pk.hex() == data[peer]["identity_public"]
        assert got.fingerprint_text == data[peer]["fingerprint_text"]
        assert got.ephemeral_pk == P.x25519_public(h(ex[f"{peer}_ephemeral_secret"]))
        assert got.device_secret.hex() == ex[f"{peer}_device_secret"]
        assert got.name.decode("utf-8") == names[peer]
        assert res.seed.hex() == ex["seed"]
        assert res.sas_text == ex["sas_text"]
        assert res.sas_text == P.format_short_code(res.sas_value)
        sides[me].save(ex["now"])
    return sides


@needs_vectors
def test_reexchange():
    """8.2: the same two exchange twice by QR (5); after the first, ``a`` stores a new contact;
    after the second, the same contact (known), its stored name kept, its seed and device
    secrets replaced by the second exchange's and verified at that exchange's ``now``.  Each
    side's own confirmation suffices (8.1's table, QR).  The parties' ``random_seed`` drives the
    library's test random source only (13); the ephemeral and device secrets it drew are taken
    from the file."""
    data = load("reexchange.json")
    expect_keys(data, "a b exchanges")
    for me in ("a", "b"):
        party = data[me]
        expect_keys(party, "random_seed identity_public fingerprint_text name_text")
        assert len(h(party["random_seed"])) == 32
        assert P.fingerprint(h(party["identity_public"])) == party["fingerprint_text"]
        P.validate_name(party["name_text"].encode("utf-8"))
    exchanges = _cases(data, "exchanges")
    assert len(exchanges) == 2
    assert data["b"]["name_text"] == exchanges[0]["b_name_text"] != exchanges[1]["b_name_text"]
    stores = {"a": P.ContactStore(), "b": P.ContactStore()}
    first_id = {}
    for n, ex in enumerate(exchanges):
        expect_keys(ex, "now b_name_text a_ephemeral_secret a_device_secret b_ephemeral_secret "
                        "b_device_secret a_payload_text b_payload_text seed sas_text "
                        "known_contact a_stored")
        before = copy.deepcopy(stores)
        sides = _reexchange_round(data, ex, stores)
        for me, peer in (("a", "b"), ("b", "a")):
            assert sides[me].known_contact is ex["known_contact"] is (n > 0)
            if ex["known_contact"]:
                # 8.2: "the stored contact is not touched until the new SAS is confirmed"
                assert stores[me].contacts == before[me].contacts
            else:
                # 8.1: "The new contact is saved **unverified** once the SAS is shown"
                (new,) = stores[me].contacts.values()
                assert new.state == P.UNVERIFIED and new.verified_at is None
                assert new.seed.hex() == ex["seed"]
        decided = {me: sides[me].decide(True, ex["now"]) for me in ("a", "b")}
        # 8.2: "the host is given the name the peer sent"
        assert decided["a"].peer_name.decode("utf-8") == ex["b_name_text"]
        assert decided["b"].peer_name.decode("utf-8") == data["a"]["name_text"]
        expect_keys(ex["a_stored"], "name_text seed verified_at method_text")
        for me, peer in (("a", "b"), ("b", "a")):
            assert decided[me].known_contact is ex["known_contact"]
            (stored,) = stores[me].contacts.values()
            assert decided[me].contact == stored
            first_id.setdefault(me, stored.contact_id)
            assert stored.contact_id == first_id[me]  # the same contact, its id kept
            assert stored.identity_pk.hex() == data[peer]["identity_public"]
            assert stored.state == P.VERIFIED
            assert stored.seed.hex() == ex["seed"]
            assert stored.mine.hex() == ex[f"{me}_device_secret"]
            assert stored.theirs.hex() == ex[f"{peer}_device_secret"]
            assert stored.method == P.QR_METHOD
            assert stored.verified_at == ex["now"]
        # What the file says `a` stores: the name it stored first, kept (8.2).
        stored = stores["a"].contacts[first_id["a"]]
        assert stored.name.decode("utf-8") == ex["a_stored"]["name_text"]
        assert ex["a_stored"]["name_text"] == exchanges[0]["b_name_text"]
        assert stored.seed.hex() == ex["a_stored"]["seed"]
        assert stored.verified_at == ex["a_stored"]["verified_at"]
        assert stored.method == ex["a_stored"]["method_text"]
        assert stores["b"].contacts[first_id["b"]].name.decode("utf-8") == data["a"]["name_text"]
    assert exchanges[0]["seed"] != exchanges[1]["seed"]


@pytest.mark.parametrize("state", [P.UNVERIFIED, P.VERIFIED, P.DEGRADED,
                                   P.DEGRADED_ACKNOWLEDGED])
def test_reexchange_keeps_what_8_2_says(state):
    """8.2: a confirmed re-exchange replaces seed, device secrets and method, keeps the name,
    note, photo, creation time and last voice window, and makes the contact verified whatever
    its state (a degraded one's acknowledgement cleared); a PIN Update's pending and previous
    secrets are dropped for the exchange's two."""
    store = P.ContactStore()
    peer = _whole_qr_peer()
    old = store.add(peer.payload[1:33], b"Kept", bytes(32), b"m" * 16, b"t" * 16, P.QR_METHOD)
    old.state, old.note, old.photo, old.created_at, old.last_window = (
        state, "a note", b"\x89PNG", 1_000, 60_000_123)
    me = P.QrExchange.create(bytes([7]) * 32, bytes([9]) * 32, b"n" * 16, b"Me", 2_000, store)
    result = me.receive(peer.text, 2_000)
    decided = me.decide(True, 2_001)
    c = decided.contact
    assert decided.known_contact and c.contact_id == old.contact_id
    assert (c.name, c.note, c.photo, c.created_at, c.last_window) == (
        b"Kept", "a note", b"\x89PNG", 1_000, 60_000_123)
    assert (c.seed, c.mine, c.theirs) == (result.seed, b"n" * 16, peer.payload[73:89])
    assert c.state == P.VERIFIED and c.verified_at == 2_001
    secrets = P.ContactSecrets(b"m" * 16, b"t" * 16, state)
    secrets.store_pending(b"M" * 16, b"T" * 16, True)
    secrets.previous = b"p" * 16
    secrets.replace_by_exchange(b"n" * 16, b"x" * 16)
    assert (secrets.mine, secrets.theirs, secrets.pending, secrets.previous) == (
        b"n" * 16, b"x" * 16, None, None)
    assert not secrets.committed and secrets.state == P.VERIFIED
    assert secrets.accepts() == (b"x" * 16, None, None) and secrets.says() == b"n" * 16


@needs_vectors
def test_reexchange_rejected_or_unfinished_leaves_the_stored_contact():
    """8.2: "Rejecting, the peer's rejection, or no decision from the peer, leaves the stored
    contact exactly as it was, with its old seed"; a second payload is ``invalid_state`` and
    changes nothing (5.2); a new contact that is rejected is deleted (8.1)."""
    data = load("reexchange.json")
    first, second = _cases(data, "exchanges")
    stores = {"a": P.ContactStore(), "b": P.ContactStore()}
    sides = _reexchange_round(data, first, stores)
    with pytest.raises(P.InvalidState):
        sides["a"].receive(first["b_payload_text"], first["now"])
    for me in ("a", "b"):
        sides[me].decide(True, first["now"])
    with pytest.raises(P.InvalidState):
        sides["a"].decide(True, first["now"])
    after_first = copy.deepcopy(stores)
    # The second exchange, rejected by a: its stored contact as it was.
    trial = copy.deepcopy(after_first)
    sides = _reexchange_round(data, second, trial)
    decided = sides["a"].decide(False, second["now"])
    assert decided.known_contact and decided.contact == after_first["a"].contacts[1]
    assert trial["a"].contacts == after_first["a"].contacts
    assert trial["a"].contacts[1].seed.hex() == first["seed"]
    # ... left undecided past its lifetime: it can only fail, the stored contact as it was.
    trial = copy.deepcopy(after_first)
    sides = _reexchange_round(data, second, trial)
    with pytest.raises(P.Expired):
        sides["a"].decide(True, second["now"] + P.EXCHANGE_LIFETIME_SECONDS + 1)
    assert trial["a"].contacts == after_first["a"].contacts
    with pytest.raises(P.InvalidState):
        sides["a"].decide(True, second["now"])
    # Rejecting it then is invalid_state too: it saved no new contact (8.1, "Rejecting a
    # failed exchange"), and the stored one stays as it was.
    with pytest.raises(P.InvalidState):
        sides["a"].decide(False, second["now"])
    assert trial["a"].contacts == after_first["a"].contacts
    # The first exchange, rejected by a: the new contact is deleted.
    trial = {"a": P.ContactStore(), "b": P.ContactStore()}
    sides = _reexchange_round(data, first, trial)
    assert sides["a"].decide(False, first["now"]).contact is None
    assert trial["a"].contacts == {}


@needs_vectors
def test_qr_exchange_refusals_and_what_they_end():
    """5.2, "What a refusal ends": a text that is not a whole payload (``invalid_argument``:
    no prefix, an encoding that is not UTF-8 and strict base64url, a payload shorter than 155
    bytes or other than 154 + its name length) changes nothing, and the exchange then accepts
    the whole payload; every other refusal (another version, a name length of 0, an invalid
    name, a bad fingerprint or signature, a reflected or low-order key) ends the exchange, every
    later call ``invalid_state``; a payload more than 24 hours after the creation is
    ``expired``; each with 5.2's result code, in step 3's order."""
    data = load("reexchange.json")
    ex = _cases(data, "exchanges")[0]
    a_payload = _reexchange_payload(data["a"], ex, "a", data["a"]["name_text"])
    b_text = ex["b_payload_text"]

    def fresh(created_at=ex["now"]):
        return P.QrExchange(a_payload, h(ex["a_ephemeral_secret"]), created_at, P.ContactStore())

    side = fresh()
    with pytest.raises(P.NotAnExchangePayload) as err:
        side.receive("https://example.org/", ex["now"])
    assert P.result_code(err.value) == "invalid_argument"
    assert side.awaiting_payload and not side.failed
    assert side.receive(b_text, ex["now"]).sas_text == ex["sas_text"]
    assert not side.awaiting_payload
    b_payload = P.b64url_decode(b_text[len(P.QR_PREFIX):])
    name_len = b_payload[89]

    def text_of(payload: bytes) -> str:
        return "ITSME1:" + P.b64url_encode(payload)

    def with_name(name: bytes, length: int | None = None) -> bytes:
        """b's payload with another name (and name-length byte), its signature kept."""
        length = len(name) if length is None else length
        return b_payload[:89] + bytes([length]) + name + b_payload[-64:]

    cut = P.CutReading
    cases = [
        # Not a whole payload (steps 1 to 3): changes nothing.
        ("ITSME1:", cut, "invalid_argument"),  # the prefix alone
        ("ITSME1:" + b_text[7:-1], cut, "invalid_argument"),  # a truncated encoding
        (b_text + "A", cut, "invalid_argument"),  # an encoding run on
        (b_text[:-4] + "+" + b_text[-3:], cut, "invalid_argument"),  # a misread character
        (b_text[:20] + "\n" + b_text[20:], cut, "invalid_argument"),  # a line break inside
        (b_text + "=", cut, "invalid_argument"),  # padding
        ("ITSME1:" + b_text[7:20] + "\u00e9" + b_text[21:], cut, "invalid_argument"),
        (b"ITSME1:" + b"\xff" + b_text[8:].encode(), cut, "invalid_argument"),  # not UTF-8
        ("ITSME1:" + b_text[7:20] + "\ud800" + b_text[21:], cut, "invalid_argument"),
        (text_of(b_payload[:-1]), cut, "invalid_argument"),  # one byte short
        (text_of(b_payload[:154]), cut, "invalid_argument"),  # shorter than 155 bytes
        (text_of(b"\x02" + b_payload[1:154]), cut, "invalid_argument"),  # size before version
        (text_of(b_payload + b"\x00"), cut, "invalid_argument"),  # one byte more
        (text_of(b_payload[:89] + bytes([name_len + 1]) + b_payload[90:]), cut,
         "invalid_argument"),  # a name length one more than the name
        (text_of(with_name(b"x" * 129, 129)[:-1]), cut, "invalid_argument"),
        # Whole payloads this exchange cannot use (steps 3 to 8): end the exchange.
        (text_of(b"\x02" + b_payload[1:]), P.MalformedMessage, "malformed_message"),
        (text_of(b"\x02" + b_payload[1:-1]), P.MalformedMessage, "malformed_message"),
        (text_of(b_payload[:89] + b"\x00" + b_payload[90:]), P.MalformedMessage,
         "malformed_message"),  # a name length of 0, before the length it gives
        (text_of(b"\x02" + b_payload[1:89] + b"\x00" + b_payload[90:]), P.MalformedMessage,
         "malformed_message"),  # version before the name length
        # A name of 129 bytes or more makes a text past 383 bytes: run on, unread (step 1);
        # one of 128 bytes, the longest, makes a text of exactly 383 bytes, which is read.
        (text_of(with_name(b"x" * 129)), cut, "invalid_argument"),  # 385 bytes
        (text_of(with_name(b"x" * 255)), cut, "invalid_argument"),
        (text_of(with_name(b"x" * 128)), P.AuthenticationFailed, "authentication_failed"),
        (text_of(with_name(b"\x01" * name_len)), P.MalformedMessage, "malformed_message"),
        (text_of(with_name(b"\xff" * name_len)), P.MalformedMessage, "malformed_message"),
        (text_of(b_payload[:33] + bytes(8) + b_payload[41:]), P.AuthenticationFailed,
         "authentication_failed"),
        (text_of(b_payload[:-1] + bytes([b_payload[-1] ^ 1])), P.AuthenticationFailed,
         "authentication_failed"),
        (text_of(with_name(b"y" * name_len)), P.AuthenticationFailed, "authentication_failed"),
        (ex["a_payload_text"], P.InvalidKey, "invalid_key"),  # a's own payload sent back
    ]
    for text, kind, code in cases:
        side = fresh()
        with pytest.raises(kind) as err:
            side.receive(text, ex["now"])
        assert P.result_code(err.value) == code, text
        ends = code != "invalid_argument"
        assert P.qr_refusal_ends_exchange(err.value) is ends, text
        assert isinstance(err.value, P.NotAWholePayload) is not ends, text
        assert side.failed is ends and side.awaiting_payload is not ends, text
        assert side.store.contacts == {}, text
        if ends:
            with pytest.raises(P.InvalidState):
                side.receive(b_text, ex["now"])
            assert side.store.contacts == {}
        else:
            # The person reads the code again: the same exchange accepts the whole payload.
            assert side.receive(b_text, ex["now"]).sas_text == ex["sas_text"], text
            assert side.save(ex["now"]) and len(side.store.contacts) == 1
    # Several readings cut short, then the whole one, on one exchange.
    side = fresh()
    for n in range(len(b_text)):
        with pytest.raises(P.NotAWholePayload):
            side.receive(b_text[:n], ex["now"])
    assert side.receive(b_text, ex["now"]).sas_text == ex["sas_text"]
    side = fresh()
    assert side.receive(b_text, ex["now"] + P.EXCHANGE_LIFETIME_SECONDS).sas_text == ex["sas_text"]
    side = fresh()
    with pytest.raises(P.Expired):
        side.receive(b_text, ex["now"] + P.EXCHANGE_LIFETIME_SECONDS + 1)
    with pytest.raises(P.InvalidState):
        side.receive(b_text, ex["now"])
    # A failed or finished exchange answers invalid_state and an expired one expired "whatever
    # the text" (before step 1), a text that is not a whole payload included.
    side = fresh()
    with pytest.raises(P.Expired):
        side.receive("ITSME1:", ex["now"] + P.EXCHANGE_LIFETIME_SECONDS + 1)
    side = fresh()
    side.receive(b_text, ex["now"])
    with pytest.raises(P.InvalidState):
        side.receive("ITSME1:", ex["now"])


def _own_qr_pair():
    alice_seed, bob_seed = bytes([1]) * 32, bytes([2]) * 32
    bob_esk = bytes([4]) * 32
    built = P.build_qr(alice_seed, bytes([3]) * 32, bytes([5]) * 16, "Alice ü".encode())
    return built, P.ed25519_public(bob_seed), bob_esk


def _expected_qr_flip_code(tampered: bytes, i: int) -> str:
    """5.2's code for the payload with byte ``i`` changed: the version byte is
    ``malformed_message``; the name-length byte is ``malformed_message`` when it becomes 0, else
    ``invalid_argument`` (the payload is no longer 154 + its name length); a name byte is
    ``malformed_message`` when the name is no longer valid; any other change, of the identity
    key (its fingerprint field no longer matches), of the fingerprint field, or of anything the
    signature covers or the signature itself, is ``authentication_failed``."""
    if i == 0:
        return "malformed_message"
    if i == 89:
        return "malformed_message" if tampered[89] == 0 else "invalid_argument"
    if 90 <= i < 90 + tampered[89]:
        try:
            P.validate_name(tampered[90:90 + tampered[89]])
        except P.ProtocolError:
            return "malformed_message"
    return "authentication_failed"


def test_qr_parser_rejects_every_flip_and_truncation():
    """Every change of one byte of a payload is refused with 5.2's code; every truncation of the
    payload or of its text is ``invalid_argument`` (not a whole payload: a reading cut short),
    which leaves an exchange awaiting a payload, and the same exchange then accepts the whole
    one."""
    built, bob_pk, bob_esk = _own_qr_pair()
    P.parse_qr_text(built.text, bob_pk, bob_esk)  # the untouched payload is accepted

    def bob_exchange() -> P.QrExchange:
        return P.QrExchange.create(bytes([2]) * 32, bob_esk, bytes([6]) * 16, b"Bob", 0,
                                   P.ContactStore())

    # Every other value of every byte of the signed part (the body), and of the signature.
    payload = built.payload
    seen = set()
    for i in range(len(payload)):
        masks = range(1, 256) if i < len(built.body) else (0x01, 0x80, 0xFF)
        for mask in masks:
            tampered = bytearray(payload)
            tampered[i] ^= mask
            with pytest.raises(P.ProtocolError) as err:
                P.parse_qr_payload(bytes(tampered), bob_pk, bob_esk)
            code = _expected_qr_flip_code(bytes(tampered), i)
            assert P.result_code(err.value) == code, (i, mask)
            assert P.qr_refusal_ends_exchange(err.value) is (code != "invalid_argument")
            seen.add(code)
    assert seen == {"malformed_message", "invalid_argument", "authentication_failed"}
    # A changed name length (not 0) on an exchange: refused, then the whole payload accepted.
    for length in (1, len(built.body) - 90 - 1, len(built.body) - 90 + 1, 128, 255):
        side = bob_exchange()
        tampered = payload[:89] + bytes([length]) + payload[90:]
        with pytest.raises(P.CutReading):
            side.receive("ITSME1:" + P.b64url_encode(tampered), 0)
        assert side.awaiting_payload and not side.failed
        assert side.receive(built.text, 0).seed
    for n in range(len(payload)):
        with pytest.raises(P.CutReading) as err:
            P.parse_qr_payload(payload[:n], bob_pk, bob_esk)
        assert P.result_code(err.value) == "invalid_argument"
    for n in range(len(built.text)):
        # Within the prefix, no prefix: another QR code; after it, a reading cut short.
        kind = P.NotAnExchangePayload if n < len(P.QR_PREFIX) else P.CutReading
        with pytest.raises(kind) as err:
            P.parse_qr_text(built.text[:n], bob_pk, bob_esk)
        assert P.result_code(err.value) == "invalid_argument"
        assert not P.qr_refusal_ends_exchange(err.value)
        side = bob_exchange()
        with pytest.raises(kind):
            side.receive(built.text[:n], 0)
        assert side.awaiting_payload and not side.failed and side.store.contacts == {}
        assert side.receive(built.text, 0).seed, n
        assert side.save(0) and len(side.store.contacts) == 1
    # Own key (reflection) and a text that is no payload at all.
    with pytest.raises(P.InvalidKey):
        P.parse_qr_text(built.text, P.ed25519_public(bytes([1]) * 32), bob_esk)
    with pytest.raises(P.NotAnExchangePayload):
        P.parse_qr_text("https://example.org/", bob_pk, bob_esk)
    with pytest.raises(P.NotAnExchangePayload):
        P.parse_qr_text("itsme1:" + built.text[7:], bob_pk, bob_esk)
    # The bytes scanned read as their text does.
    assert P.parse_qr_text(built.text.encode(), bob_pk, bob_esk).payload == payload
    with pytest.raises(P.CutReading):
        P.parse_qr_text(built.text.encode()[:-1], bob_pk, bob_esk)


# --------------------------------------------------------------------------------------------
# source-v5.json (section 6)
# --------------------------------------------------------------------------------------------


def test_ed25519_verification_is_strict():
    """Section 1: "Verification is cofactorless and strict, as libsodium's
    crypto_sign_verify_detached: S must be below the group order, and the public key and R must
    be canonical encodings of points not of small order."  The identity as public key, with R
    the identity and S = 0, passes a cofactorless check for every message (S*B = R + h*A); it is
    refused here, and so is a QR payload (5.2) signed so, as a signature that does not verify."""
    identity = (1).to_bytes(32, "little")
    forged = identity + bytes(32)
    for message in (b"", b"any message", P.qr_signed_message(b"x" * 90)):
        assert P._ed25519_verify_cofactorless(identity, forged, message)
        assert not P.ed25519_verify(identity, forged, message)
    # Every small-order point, whatever its sign bit or a non-canonical y, as key or as R.
    seed = bytes([9]) * 32
    pk, sig = P.ed25519_public(seed), P.ed25519_sign(seed, b"m")
    assert P.ed25519_verify(pk, sig, b"m")
    assert len(P.ED25519_SMALL_ORDER_Y) == 5 + 2  # 1, -1, 0, the two of order 8; 0 + p, 1 + p
    for y in P.ED25519_SMALL_ORDER_Y:
        for enc in (y.to_bytes(32, "little"), (y | 1 << 255).to_bytes(32, "little")):
            assert P.ed25519_small_order(enc)
            assert not P.ed25519_verify(enc, enc + bytes(32), b"m")
            assert not P.ed25519_verify(pk, enc + sig[32:], b"m")
    # S not below L; a public key whose y is not below p.
    s_plus_l = (int.from_bytes(sig[32:], "little") + P.ristretto255.L).to_bytes(32, "little")
    assert not P.ed25519_verify(pk, sig[:32] + s_plus_l, b"m")
    assert not P.ed25519_point_canonical((P.ristretto255.P + 3).to_bytes(32, "little"))
    # A QR payload in the identity key, its fingerprint field right, signed with the forgery.
    _, bob_pk, bob_esk = _own_qr_pair()
    body = P.qr_body(identity, P.x25519_public(bytes([3]) * 32), bytes([5]) * 16, b"Eve")
    assert P._ed25519_verify_cofactorless(identity, forged, P.qr_signed_message(body))
    with pytest.raises(P.ProtocolError) as err:
        P.parse_qr_payload(body + forged, bob_pk, bob_esk)
    assert P.result_code(err.value) == "authentication_failed"
    assert "signature" in str(err.value)


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
    """Section 6 and 13: each refusal of source-v5.json, fed to a new QR exchange of the first
    import's `receiver` waiting for the peer's payload, is refused with the result code its
    `error_text` names, in section 6's order (the texts that break two rules fix it: the key's
    form before the fingerprint's comparison, the comparison before the shared secret), and
    leaves the exchange failed where `ends_exchange` says, else still waiting for a payload."""
    data = load("source-v5.json")
    rec = _cases(data, "imports")[0]["receiver"]
    seed, esk = h(rec["identity_seed"]), h(rec["ephemeral_secret"])
    own_pk = P.ed25519_public(seed)
    assert own_pk.hex() == rec["identity_public"]
    whole = _whole_qr_peer()
    codes = set()
    for case in _cases(data, "rejections"):
        expect_keys(case, "case_text text error_text ends_exchange")
        what = case["case_text"]
        assert case["ends_exchange"] is (case["error_text"] != "invalid_argument"), what
        codes.add(case["error_text"])
        with pytest.raises(P.ProtocolError) as err:
            P.import_v5(case["text"], own_pk, esk)
        assert P.result_code(err.value) == case["error_text"], (what, str(err.value))
        assert P.qr_refusal_ends_exchange(err.value) is case["ends_exchange"], what
        side = P.QrExchange.create(seed, esk, bytes(16), b"Receiver", 0, P.ContactStore())
        with pytest.raises(P.ProtocolError) as err:
            side.receive(case["text"], 0)
        assert P.result_code(err.value) == case["error_text"], what
        _assert_qr_refusal_left(side, case["ends_exchange"], whole, what)
    assert codes == {"malformed_message", "invalid_key", "invalid_argument"}


def test_source_v5_order_and_length():
    """Section 6's order on texts of this file's own, and 5.2 step 1's bound: a `5|` text of
    more than 327 bytes is the retryable ``invalid_argument`` unread (even one that is not
    UTF-8 past the bound), one of 327 bytes is read; each check before the fingerprint's
    comparison is ``malformed_message`` even with the receiver's own fingerprint."""
    seed = bytes([7]) * 32
    own_pk = P.ed25519_public(seed)
    own_fp = P.fingerprint(own_pk)
    esk = bytes([9]) * 32
    key = P.b64_encode(P.x25519_public(bytes([5]) * 32))
    other = "0123456789ABCDEF"
    name = "\\\\" * 128  # 128 escaped backslashes: the longest name field, 256 bytes
    longest = f"5|{name}|{other}|{key}|123456"
    assert len(longest.encode()) == P.V5_TEXT_MAX
    assert P.import_v5(longest, own_pk, esk).peer.name == b"\\" * 128
    for over in (longest + "x", longest.encode() + b"\xff"):
        with pytest.raises(P.CutReading):
            P.import_v5(over, own_pk, esk)
    with pytest.raises(P.CutReading):  # bounded before UTF-8 is checked
        P.parse_v5(b"5|" + b"\xff" * 326)
    with pytest.raises(P.MalformedMessage):
        P.parse_v5(b"5|\xff|" + other.encode() + b"|" + key.encode() + b"|123456")
    bad_forms = [f"5|a\\x|{own_fp}|{key}|123456", f"5|a|{own_fp}\\|{key}|123456",
                 f"5|a|{own_fp}|{key}|123456\\", f"5|a|{own_fp}|{key}",
                 f"5||{own_fp}|{key}|123456", f"5|a|{own_fp}|{key[:-2]}=|123456",
                 f"5|a|{own_fp}|{key}|12345", f"5|a|{own_fp}|{key}|1234567"]
    for text in bad_forms:
        with pytest.raises(P.MalformedMessage):
            P.import_v5(text, own_pk, esk)
    with pytest.raises(P.InvalidKey):
        P.import_v5(f"5|a|{own_fp.lower()}|{key}|123456", own_pk, esk)
    zero = P.b64_encode(bytes(32))
    with pytest.raises(P.InvalidKey) as err:
        P.import_v5(f"5|a|{own_fp}|{zero}|123456", own_pk, esk)
    assert "own" in str(err.value)
    with pytest.raises(P.InvalidKey) as err:
        P.import_v5(f"5|a|{other}|{zero}|123456", own_pk, esk)
    assert "zero" in str(err.value)


def _imported(store=None, at=0):
    """A QR exchange created at 0 that accepted a `5|` text at ``at`` (section 6)."""
    store = P.ContactStore() if store is None else store
    side = P.QrExchange.create(bytes([7]) * 32, bytes([9]) * 32, bytes(16), b"Me", 0, store)
    key = P.b64_encode(P.x25519_public(bytes([5]) * 32))
    imp = side.receive(f"5|Ann|0123456789abcdef|{key}|123456", at)
    return side, imp, store


def test_source_v5_within_a_qr_exchange():
    """5.2 and 6: a `5|` text is read by section 6 within the QR exchange, which then is
    imported (not comparing a SAS) and takes no second payload.  "Accepting the text saves
    nothing": the contact is stored when the host saves it, unverified, flagged
    unauthenticated, with the fingerprint from the text; saving again gives the same
    contact."""
    side, imp, store = _imported()
    assert imp.peer.fingerprint_text == "0123456789ABCDEF" and not side.awaiting_payload
    assert side.state == "imported" and store.contacts == {}
    with pytest.raises(P.InvalidState):
        side.receive(_whole_qr_peer().text, 0)
    contact = side.save(10)
    assert store.contacts == {contact.contact_id: contact}
    assert contact.unauthenticated and contact.state == P.UNVERIFIED
    assert contact.fingerprint_text == "0123456789ABCDEF" and contact.seed == imp.seed
    assert contact.theirs == b"123456" and contact.method == P.QR_METHOD
    assert side.save(20) is contact and len(store.contacts) == 1
    assert side.state == "imported"


def test_the_exchange_after_an_import():
    """Section 6, "The exchange after an import", and 8.1's settling: confirming and settling
    an import are invalid_state and change nothing, saved or not; rejecting sends nothing,
    deletes the contact if it was saved, and ends the exchange as rejected (a second
    rejection, a confirmation, a save or a settling after it is invalid_state); it expires
    like any pending exchange, more than 24 hours after its creation, which leaves a saved
    contact in place, unverified, until the failed exchange is rejected."""
    for saved in (False, True):
        side, imp, store = _imported()
        contact = side.save(5) if saved else None
        for call in (lambda: side.decide(True, 86_400), lambda: side.settle(86_400)):
            with pytest.raises(P.InvalidState):
                call()
            assert side.state == "imported"
            assert list(store.contacts.values()) == ([contact] if saved else [])
            assert contact is None or contact.state == P.UNVERIFIED
        decided = side.decide(False, 86_400)  # the last second of its 24 hours
        assert decided.contact is None and decided.peer_name == b"Ann"
        assert side.state == "rejected" and store.contacts == {}
        for call in (lambda: side.decide(False, 9), lambda: side.decide(True, 9),
                     lambda: side.save(9), lambda: side.settle(9),
                     lambda: side.receive(_whole_qr_peer().text, 9)):
            with pytest.raises(P.InvalidState):
                call()
        assert side.state == "rejected" and store.contacts == {}
    # Rejecting deletes only the import's contact: another stored contact stays.
    store = P.ContactStore()
    other, _, _ = _imported(store)
    kept = other.save(0)
    side, _, _ = _imported(store)
    side.save(0)
    side.decide(False, 1)
    assert list(store.contacts.values()) == [kept]
    # Expiry, through each call (a failed one answers invalid_state first): a saved contact
    # stays, unverified; rejecting the failed exchange then deletes it, once.
    for late in ("save", "settle", "confirm", "reject"):
        for saved in (False, True):
            side, imp, store = _imported(at=86_400)
            contact = side.save(86_400) if saved else None
            call = {"save": lambda: side.save(86_401), "settle": lambda: side.settle(86_401),
                    "confirm": lambda: side.decide(True, 86_401),
                    "reject": lambda: side.decide(False, 86_401)}[late]
            with pytest.raises(P.Expired):
                call()
            assert side.state == "failed"
            assert list(store.contacts.values()) == ([contact] if saved else [])
            assert contact is None or contact.state == P.UNVERIFIED
            for again in (lambda: side.save(1), lambda: side.settle(1),
                          lambda: side.decide(True, 1)):
                with pytest.raises(P.InvalidState):
                    again()
            if saved:
                assert side.decide(False, 1).contact is None and store.contacts == {}
            with pytest.raises(P.InvalidState):  # saved nothing, or rejected already
                side.decide(False, 1)
            assert side.state == "failed" and store.contacts == {}
    # A payload accepted at 0 may be saved up to 86,400 s after the exchange's creation.
    side, _, store = _imported()
    assert side.save(86_400).state == P.UNVERIFIED


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
        prk = P.bt_prk(shared, th1)
        assert prk.hex() == ex["prk"]
        assert P.hkdf_expand(prk, P.lv_cat(P.BT_KEY_LABEL, P.INITIATOR), 32).hex() \
            == ex["key_initiator"]
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
        # Section 3's salt, as this side builds it from its own and the peer's fingerprint.
        salt = P.seed_salt(P.fingerprint(me.pk), P.fingerprint(got.identity_pk))
        assert salt.decode("ascii") == ex["salt_text"]
        assert seed == P.hkdf(shared, salt, P.SEED_LABEL, 32)
        plain_i, plain_r = (plaintext, peer_plain) if role == P.INITIATOR else (peer_plain,
                                                                                plaintext)
        # 7.4's final transcript input, from this side's own th1 and the two plaintexts.
        assert P.bt_transcript_input(th1, plain_i, plain_r).hex() == ex["transcript_input"]
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
        expect_keys(ex, "session_code_text session_code_value session_code_draws a b th1_input "
                        "th1 shared salt_text key_initiator key_responder seed transcript_input "
                        "transcript_hash sas_value sas_text prk")
        assert P.parse_short_code(ex["session_code_text"]) == ex["session_code_value"]
        # 4.2: the session code drawn by this module from the listed 4-byte draws, which it
        # must consume to the last (each one before it refused and drawn again).  salt_text
        # and transcript_input are checked inside _bt_run, as each side computes them.
        draws = [h(d) for d in ex["session_code_draws"]]
        taken = []

        def next_draw():
            taken.append(draws[len(taken)])
            return taken[-1]

        assert P.draw_session_code(next_draw) == ex["session_code_value"]
        assert taken == draws
        assert P.format_short_code(ex["session_code_value"]) == ex["session_code_text"]
        _bt_run(ex)


def _bt_device(party, code_text) -> P.BluetoothExchange:
    return P.BluetoothExchange(h(party["identity_seed"]), h(party["ephemeral_secret"]),
                               h(party["device_secret"]), party["name_text"].encode("utf-8"),
                               code_text)


def _bt_at_sas(ex):
    """Both devices of a bluetooth.json exchange, played through this module's own state
    machine (7.2) up to the SAS; the frames each sent are the vector's."""
    a, b = _bt_device(ex["a"], ex["session_code_text"]), _bt_device(ex["b"], ex["session_code_text"])
    assert a.start() == [h(ex["a"]["hello"])] and b.start() == [h(ex["b"]["hello"])]
    for me, peer, who in ((a, b, "a"), (b, a, "b")):
        assert me.receive(peer.hello) == [h(ex[who]["key"])]
    for me, peer, who in ((a, b, "a"), (b, a, "b")):
        assert me.receive(peer.key) == [h(ex[who]["data_frame"])]
    for me, who in ((a, "a"), (b, "b")):
        assert me.role == ex[who]["role_text"]
    assert a.receive(h(ex["b"]["data_frame"])) == [] and b.receive(h(ex["a"]["data_frame"])) == []
    for me in (a, b):
        assert me.seed.hex() == ex["seed"] and me.th.hex() == ex["transcript_hash"]
        assert (me.sas_value, me.sas_text) == (ex["sas_value"], ex["sas_text"])
        assert me.contact_state == P.UNVERIFIED
    return a, b


@needs_vectors
def test_bluetooth_state_machine():
    """7.2 and 8.1 on each vector exchange: the frames are the vector's; both confirm (the
    vector's CONFIRM frames) and the contact is verified; anything after is invalid_state.
    The peer's rejection before this side decided makes it reject and send its own
    rejection; a second CONFIRM is malformed_message, ending the exchange unless this side
    decided."""
    for ex in _cases(load("bluetooth.json"), "exchanges"):
        a, b = _bt_at_sas(ex)
        assert a.decide(True) == [h(ex["a"]["confirm_frame"])]
        assert a.contact_state == P.AWAITING_PEER
        assert b.receive(a.confirm_message) == [] and b.contact_state == P.UNVERIFIED
        # b confirms after a's confirmation arrived: verified at once, at that call's time.
        assert b.decide(True, now=1_000) == [h(ex["b"]["confirm_frame"])]
        assert b.contact_state == P.VERIFIED and b.verified_at == 1_000
        # a's peer confirmation arrives after its own: awaiting the peer until the host
        # settles the exchange, whose time is the one recorded (8.1).
        assert a.receive(b.confirm_message) == []
        assert a.contact_state == P.AWAITING_PEER and a.verified_at is None
        a.settle(now=1_005)
        assert a.contact_state == P.VERIFIED and a.verified_at == 1_005
        for me, m in ((a, b.confirm_message), (b, a.confirm_message)):
            with pytest.raises(P.InvalidState):  # settled, or verified at once: nothing to do
                me.settle(now=1_010)
            assert me.complete and me.contact_state == P.VERIFIED
            with pytest.raises(P.InvalidState):
                me.receive(m)
            with pytest.raises(P.InvalidState):
                me.decide(True)
        # The peer's rejection arrives first: the library does not reject by itself (the
        # person is told first); this side cannot confirm any more, and the host's rejection
        # sends this side's rejection (8.1).
        a, b = _bt_at_sas(ex)
        reject = a.decide(False)
        assert a.contact_state == P.DELETED
        assert b.receive(reject[0]) == [] and b.own_decision is None
        assert b.peer_decision == P.DECISION_REJECTED and not b.complete
        assert b.contact_state == P.UNVERIFIED
        for _ in range(2):
            with pytest.raises(P.InvalidState):
                b.decide(True)
            assert b.own_decision is None and b.contact_state == P.UNVERIFIED
        answer = b.decide(False)
        assert answer == [P.confirm_frame(b.my_key, False)] and b.own_decision == 0
        assert b.contact_state == P.DELETED and b.complete
        for confirmed in (True, False):
            with pytest.raises(P.InvalidState):
                b.decide(confirmed)
        assert a.receive(answer[0]) == [] and a.complete and a.contact_state == P.DELETED
        # A second CONFIRM: malformed_message; before this side decided, the exchange fails.
        a, b = _bt_at_sas(ex)
        m = a.decide(True)[0]
        b.receive(m)
        with pytest.raises(P.MalformedMessage):
            b.receive(m)
        assert b.failed and b.contact_state is None
        # The session ends before the peer's CONFIRM: not a state of the exchange (8.1), which
        # stays awaiting the peer's decision until the host rejects it.
        a, b = _bt_at_sas(ex)
        a.decide(True)
        a.end_session()
        assert a.contact_state == P.AWAITING_PEER and not a.complete and not a.failed
        # A side that confirmed may still reject: nothing is sent (its confirmation is out)
        # and the exchange ends rejected (8.1).
        assert a.decide(False) == [] and a.rejected_after_confirming
        assert a.contact_state == P.DELETED and not a.failed
        for confirmed in (True, False):
            with pytest.raises(P.InvalidState):
                a.decide(confirmed)


def _bt_refusals(ex, me: str):
    """Frames the device ``me`` of a vector exchange must refuse, each with the step it arrives
    at (how many of the peer's frames came before) and 7.1's code."""
    peer = "b" if me == "a" else "a"
    p, q = ex[peer], ex[me]
    hello, key, data, confirm = (h(p[k]) for k in ("hello", "key", "data_frame",
                                                   "confirm_frame"))
    flip = lambda m, i: m[:i] + bytes([m[i] ^ 1]) + m[i + 1:]  # noqa: E731
    own_hello = h(q["hello"])
    return [
        ("HELLO of 41 bytes", [], hello[:-1], "malformed_message"),
        ("HELLO of version 2", [], b"\x02" + hello[1:], "malformed_message"),
        ("a KEY first", [], key, "malformed_message"),
        ("HELLO of type 5", [], b"\x01\x05" + hello[2:], "malformed_message"),
        ("its own HELLO reflected", [], own_hello, "invalid_key"),
        ("its own fingerprint, another commitment", [], own_hello[:10] + hello[10:],
         "invalid_key"),
        ("HELLO twice", [hello], hello, "malformed_message"),
        ("its own KEY reflected", [hello], h(q["key"]), "invalid_key"),
        ("a low-order KEY", [hello], b"\x01\x02" + bytes(32), "invalid_key"),
        ("KEY of 33 bytes", [hello], key[:-1], "malformed_message"),
        ("DATA with a flipped tag", [hello, key], flip(data, len(data) - 1),
         "authentication_failed"),
        ("DATA with a flipped header", [hello, key], flip(data, 1), "malformed_message"),
        ("DATA of 260 bytes", [hello, key], data + bytes(260 - len(data)), "malformed_message"),
        ("its own DATA reflected", [hello, key], h(q["data_frame"]), "authentication_failed"),
        ("CONFIRM before DATA", [hello, key], confirm, "malformed_message"),
        ("CONFIRM with a flipped tag", [hello, key, data], flip(confirm, 18),
         "authentication_failed"),
        ("CONFIRM of 20 bytes", [hello, key, data], confirm + b"\x00", "malformed_message"),
        ("its own CONFIRM reflected", [hello, key, data], h(q["confirm_frame"]),
         "authentication_failed"),
        ("DATA twice", [hello, key, data], data, "malformed_message"),
    ]


@needs_vectors
def test_bluetooth_frame_refusals():
    """7.1's checks and codes, on each device of each vector exchange: before this side
    decided a refusal ends the exchange as failed; after (where the device has a SAS), it is
    refused with the same code and the device goes on waiting for a valid CONFIRM (7.2 step
    5), which the vector's CONFIRM then is."""
    for ex in _cases(load("bluetooth.json"), "exchanges"):
        for me, peer in (("a", "b"), ("b", "a")):
            for why, before, bad, code in _bt_refusals(ex, me):
                for decides_first in (False, True):
                    dev = _bt_device(ex[me], ex["session_code_text"])
                    dev.start()
                    for m in before:
                        dev.receive(m)
                    if decides_first:
                        if dev.sas_value is None:
                            continue
                        dev.decide(True)
                    with pytest.raises(P.ProtocolError) as info:
                        dev.receive(bad)
                    assert P.result_code(info.value) == code, (why, decides_first, info.value)
                    if decides_first:
                        assert not dev.failed and dev.contact_state == P.AWAITING_PEER, why
                        assert dev.receive(h(ex[peer]["confirm_frame"])) == []
                        assert dev.contact_state == P.AWAITING_PEER, why
                        dev.settle()
                        assert dev.contact_state == P.VERIFIED, why
                    else:
                        assert dev.failed and dev.contact_state is None, why
                        with pytest.raises(P.InvalidState):
                            dev.receive(bad)


@needs_vectors
def test_bluetooth_data_checks_in_order():
    """7.4's checks in the order the document gives, on each vector exchange's DATA as the
    other device receives it (its th1, keys, HELLO and KEY): plaintexts that break several
    rules are refused by the first: 1. length and name (malformed_message) before 2. the
    fingerprint, 3. the commitment and 4. the signature (authentication_failed, each named),
    then 5. the own-key guard (invalid_key), reachable only when the receiver's own key is the
    one the HELLO, commitment and signature carry.  Each refused plaintext is also sealed as a
    DATA frame under the sender's key and fed to a fresh device at that step."""
    for ex in _cases(load("bluetooth.json"), "exchanges"):
        for sender, receiver in (("a", "b"), ("b", "a")):
            s, r = ex[sender], ex[receiver]
            th1 = h(ex["th1"])
            role = s["role_text"]
            s_key = h(ex["key_initiator"] if role == P.INITIATOR else ex["key_responder"])
            hello, key = h(s["hello"]), h(s["key"])
            plain = h(s["plaintext"])
            seed, ds = h(s["identity_seed"]), h(s["device_secret"])
            name = s["name_text"].encode("utf-8")
            other_seed = h(r["identity_seed"])  # a key whose fingerprint is not the HELLO's

            def signed(identity_seed, device_secret=ds, name=name, th=th1, role=role):
                return P.bt_plaintext(identity_seed, th, role, device_secret, name)

            bad_name = P.bt_data(P.ed25519_public(seed), ds, b"x")[:-1] + b"\x07"
            bad_name_plain = bad_name + P.ed25519_sign(
                seed, P.bt_signed_message(th1, role, bad_name))
            cases = [
                # 1 before 2-4: a plaintext one byte short, of another key, unsigned.
                ("length", signed(other_seed)[:-1], "malformed_message", "wrong length"),
                ("length byte 0", plain[:48] + b"\x00" + plain[49:], "malformed_message",
                 "wrong length"),
                # 1 (the name) before 2: a control character, under another key.
                ("name", P.ed25519_public(other_seed) + bad_name_plain[32:],
                 "malformed_message", "name"),
                # 2 before 3 and 4: another identity (fingerprint, commitment and signature
                # all wrong).
                ("fingerprint", signed(other_seed), "authentication_failed", "fingerprint"),
                # 3 before 4: the committed key, another device secret, and a bad signature.
                ("commitment", plain[:32] + bytes(16) + plain[48:-1] + bytes([plain[-1] ^ 1]),
                 "authentication_failed", "commitment"),
                # 4: everything committed, signed for another th1 or the other role.
                ("signature th1", signed(seed, th=bytes(32)), "authentication_failed",
                 "signature"),
                ("signature role", signed(seed, role=P.RESPONDER if role == P.INITIATOR
                                          else P.INITIATOR), "authentication_failed",
                 "signature"),
            ]
            for why, bad, code, named in cases:
                with pytest.raises(P.ProtocolError, match=named) as info:
                    P.parse_bt_plaintext(bad, th1, role, hello, key, P.ed25519_public(other_seed))
                assert P.result_code(info.value) == code, why
                # The same through the state machine, as a DATA frame that opens.
                dev = _bt_device(r, ex["session_code_text"])
                dev.start()
                dev.receive(hello)
                dev.receive(key)
                frame = P.seal_frame(P.DATA, s_key, P.DATA_COUNTER, bad)
                with pytest.raises(P.ProtocolError, match=named) as info:
                    dev.receive(frame)
                assert P.result_code(info.value) == code and dev.failed, why
            # 5, the guard: only a receiver holding the sender's own key reaches it.
            with pytest.raises(P.InvalidKey):
                P.parse_bt_plaintext(plain, th1, role, hello, key, P.ed25519_public(seed))
            # The genuine plaintext passes.
            got = P.parse_bt_plaintext(plain, th1, role, hello, key, P.ed25519_public(other_seed))
            assert got.identity_pk.hex() == s["identity_public"]


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
    with pytest.raises(P.InvalidKey):  # 7.1: a reflected HELLO
        P.bt_role(ini["pk"], P.fingerprint_bytes(ini["pk"]))


# --------------------------------------------------------------------------------------------
# voice.json (sections 9 and 10.1)
# --------------------------------------------------------------------------------------------

_VOICE_SESSION_KEYS = (
    "seed window a_pid b_pid session_id_value session_id_text "
    "a_words_key a_words_blocks a_words b_words_key b_words_blocks b_words "
    "first_selector_hmac first_selector_byte lower_selects_first first_text w1 w2 code_info code_key "
    "a_code_value a_code_text b_code_value b_code_text tag_key a_device_secret b_device_secret "
    "a_tag b_tag session_id_input first_selector_input a_tag_input b_tag_input"
)


def _voice_session(seed: bytes, window: int, a_pid: bytes, b_pid: bytes, w1: int, w2: int,
                   a_ds: bytes, b_ds: bytes, me: str) -> dict:
    """Every field of a voice.json session, as the device of party ``me`` ("a" or "b") derives
    it from the seed, the window, both ids, the two selections and both device secrets."""
    peer = "b" if me == "a" else "a"
    pids = {"a": a_pid, "b": b_pid}
    secrets = {"a": a_ds, "b": b_ds}
    view = P.voice_view(seed, window, pids[me], pids[peer])
    codes = P.voice_codes(view, w1, w2)
    my_tag, their_tag = P.voice_tags(view, secrets[me], secrets[peer])
    out = {
        "seed": seed.hex(), "window": window, "a_pid": a_pid.hex(), "b_pid": b_pid.hex(),
        "w1": w1, "w2": w2, "a_device_secret": a_ds.hex(), "b_device_secret": b_ds.hex(),
        "session_id_value": view.session_id_value, "session_id_text": view.session_id_text,
        "first_selector_byte": P.first_selector_byte(seed, window),
        "first_selector_hmac": P.first_selector_hmac(seed, window).hex(),
        "lower_selects_first": P.lower_selects_first(seed, window),
        "first_text": me if view.i_select_first else peer,
        "code_info": codes.info.hex(), "code_key": codes.key.hex(),
        "tag_key": P.tag_key(seed).hex(),
        # The HMAC messages of 9.2, 9.4 and 10.1, as this device builds them.
        "session_id_input": P.session_id_input(window).hex(),
        "first_selector_input": P.first_selector_input(window).hex(),
    }
    for who, draw, code, tag in ((me, view.my_words, codes.my_code, my_tag),
                                 (peer, view.their_words, codes.their_code, their_tag)):
        out[f"{who}_words_key"] = draw.key.hex()
        out[f"{who}_words_blocks"] = [block.hex() for block in draw.blocks]
        out[f"{who}_words"] = list(draw.words)
        out[f"{who}_code_value"] = code
        out[f"{who}_code_text"] = P.format_voice_code(code)
        out[f"{who}_tag"] = tag
        out[f"{who}_tag_input"] = P.device_tag_input(pids[who], window, secrets[who]).hex()
    # Each message, keyed as its section says, gives the value the document derives from it.
    assert P._be64_head(P.hmac_sha256(seed, h(out["session_id_input"]))) % 2600 \
        == out["session_id_value"]
    assert P.hmac_sha256(seed, h(out["first_selector_input"])).hex() == out["first_selector_hmac"]
    for who in ("a", "b"):
        assert P._be64_head(P.hmac_sha256(P.tag_key(seed), h(out[f"{who}_tag_input"]))) % 100 \
            == out[f"{who}_tag"]
    return out


@needs_vectors
def test_voice_vector_file_fields():
    expect_keys(load("voice.json"), "plans code_parse sessions bound_sessions degradation "
                                    "degradation_parse word_reading")


@needs_vectors
def test_voice_word_reading():
    """9.3's reading procedure on given byte streams (none reached by a real input), read as
    block_0 || block_1 || ... of 32 bytes each, at most 256 blocks; null: the derivation
    fails."""
    for case in _cases(load("voice.json"), "word_reading"):
        expect_keys(case, "case_text stream words")
        stream = h(case["stream"])
        assert len(stream) % 32 == 0 and len(stream) <= 256 * 32
        try:
            words = sorted(P.read_word_stream(stream))
        except P.ProtocolError:
            # "Should all 256 blocks fall short [...] the derivation fails": only a stream of
            # all 256 blocks can fall short.
            assert len(stream) == 256 * 32, case["case_text"]
            words = None
        assert words == case["words"], case["case_text"]
        # Reading stops at five indices: the blocks after the one that gave the fifth are
        # never read, so anything may follow them.
        if words is not None:
            assert sorted(P.read_word_stream(stream + bytes(32))) == words


@needs_vectors
def test_voice_plans():
    for case in _cases(load("voice.json"), "plans"):
        expect_keys(case, "now last_window window starts_in")
        now, last = case["now"], case["last_window"]
        plan = P.plan_session(now, last)
        assert plan.window == case["window"], case
        assert plan.starts_in == case["starts_in"], case
        assert plan.starts_at == now + plan.starts_in == 30 * plan.window
        assert P.record_window(last, plan.window) == plan.window
        with pytest.raises(P.ProtocolError):
            P.record_window(plan.window, plan.window)


def test_windows_given_and_checked_against_the_time():
    """9.1: a window given to a pure derivation is 0 to 2^63 - 1, a negative one
    ``invalid_argument`` (never its two's complement); 10.3 and 11.1: a session's window is
    window(now) or window(now) - 1, else ``invalid_argument``, so none beyond the last."""
    seed, pid = bytes([3]) * 32, bytes([4]) * 32
    for w in (0, 2**63 - 1):
        P.session_id_value(seed, w), P.room_id(seed, w), P.pin_update_code_value(seed, w)
        P.device_tag(P.tag_key(seed), pid, w, b"x" * 16), P.first_selector_byte(seed, w)
    for w in (-1, 2**63, 2**64 - 1):
        for derive in (lambda: P.session_id_value(seed, w), lambda: P.room_id(seed, w),
                       lambda: P.pin_update_code_value(seed, w),
                       lambda: P.device_tag(P.tag_key(seed), pid, w, b"x" * 16),
                       lambda: P.first_selector_byte(seed, w)):
            with pytest.raises(P.InvalidArgument):
                derive()
    now = 1_800_000_015
    for w in (P.window_of(now), P.window_of(now) - 1):
        P.check_session_window(w, now)
    for w in (P.window_of(now) + 1, P.window_of(now) - 2, -1):
        with pytest.raises(P.InvalidArgument):
            P.check_session_window(w, now)
    P.check_session_window(0, 5)
    with pytest.raises(P.InvalidArgument):  # at a time in window 0 there is none before
        P.check_session_window(-1, 5)
    with pytest.raises(P.InvalidArgument):  # beyond the last window: no time reaches it
        P.check_session_window(P.LAST_WINDOW + 1, P.LAST_TIME)
    P.check_session_window(P.LAST_WINDOW, P.LAST_TIME)


def test_voice_timing_edges():
    """9.1's timing edges: the last window a time reaches, planning for a contact at it,
    planning within it (made, but not started: invalid_state too early, invalid_argument from
    15 seconds before 30 W), times outside 0 to 253402300799, and starting's other refusals."""
    assert P.LAST_WINDOW == P.window_of(253402300799) == 8_446_743_359
    for t in (-1, 253402300800):
        with pytest.raises(P.InvalidArgument):
            P.window_of(t)
    with pytest.raises(P.InvalidState):
        P.plan_session(0, P.LAST_WINDOW)
    t = 30 * P.LAST_WINDOW + 3
    plan = P.plan_session(t, P.LAST_WINDOW - 1)
    assert plan.window == P.LAST_WINDOW + 1
    with pytest.raises(P.InvalidState):  # too early: more than 15 s before 30 W
        P.start_session(plan.window, t, P.LAST_WINDOW - 1)
    with pytest.raises(P.InvalidArgument):  # from 15 s before 30 W: beyond the last window
        P.start_session(plan.window, 30 * plan.window - 15 - 1 + 1, P.LAST_WINDOW - 1)
    # An ordinary plan: started from 15 s before, window_used if taken, expired at 30 (W + 2).
    plan = P.plan_session(1_000_000, 40)
    w = plan.window
    with pytest.raises(P.InvalidState):
        P.start_session(w, 30 * w - 16, 40)
    assert P.start_session(w, 30 * w - 15, 40) == w
    assert P.start_session(w, 30 * (w + 2) - 1, 40) == w
    with pytest.raises(P.WindowUsed) as err:
        P.start_session(w, 30 * w, w)
    assert P.result_code(err.value) == "window_used"
    with pytest.raises(P.Expired):
        P.start_session(w, 30 * (w + 2), 40)
    # 9.1: at 30 (W + 2) or later the time is checked first: expired even if the store has
    # recorded L >= W meanwhile (where window_used came one second before).
    for taken in (w, w + 1, w + 5):
        with pytest.raises(P.WindowUsed):
            P.start_session(w, 30 * (w + 2) - 1, taken)
        for t in (30 * (w + 2), 30 * (w + 2) + 1, 30 * (w + 9)):
            with pytest.raises(P.Expired) as err:
                P.start_session(w, t, taken)
            assert P.result_code(err.value) == "expired"


@needs_vectors
def test_voice_code_parse():
    vec = load("voice.json")["code_parse"]
    expect_keys(vec, "valid invalid")
    for case in _cases(vec, "valid"):
        expect_keys(case, "input_text value")
        assert P.parse_voice_code(case["input_text"]) == case["value"], case
        assert P.parse_voice_code(P.format_voice_code(case["value"])) == case["value"]
        assert P.heard_code_matches(case["input_text"], case["value"])
    for text in _cases(vec, "invalid"):
        # A typing error, which does not end the session (9.6).
        with pytest.raises(P.TypingError):
            P.parse_voice_code(text)


@needs_vectors
def test_voice_sessions():
    for case in _cases(load("voice.json"), "sessions"):
        expect_keys(case, _VOICE_SESSION_KEYS)
        inputs = (h(case["seed"]), case["window"], h(case["a_pid"]), h(case["b_pid"]),
                  case["w1"], case["w2"], h(case["a_device_secret"]), h(case["b_device_secret"]))
        # Both devices, each from its own side, derive every field of the vector.
        for me in ("a", "b"):
            assert _voice_session(*inputs, me=me) == case, (me, case["seed"])
        # The heard codes parse back to their values.
        for who in ("a", "b"):
            assert P.parse_voice_code(case[f"{who}_code_text"]) == case[f"{who}_code_value"]


_VOICE_BOUND_KEYS = (
    "seed window a_pid b_pid binding session_id_input session_id_value session_id_text "
    "unbound_session_id_value a_words b_words first_text w1 w2 code_info code_key a_code_value "
    "a_code_text b_code_value b_code_text unbound_a_code_value unbound_b_code_value"
)


def _voice_bound_session(seed: bytes, window: int, a_pid: bytes, b_pid: bytes, w1: int, w2: int,
                         binding: bytes, me: str) -> dict:
    """Every field of a voice.json bound session (9.7), as the device of party ``me`` derives
    it, bound to the call by ``binding``; the unbound values from the same device unbound."""
    peer = _OTHER[me]
    pids = {"a": a_pid, "b": b_pid}
    view = P.voice_view(seed, window, pids[me], pids[peer], binding)
    codes = P.voice_codes(view, w1, w2)
    unbound = P.voice_view(seed, window, pids[me], pids[peer])
    unbound_codes = P.voice_codes(unbound, w1, w2)
    out = {
        "seed": seed.hex(), "window": window, "a_pid": a_pid.hex(), "b_pid": b_pid.hex(),
        "binding": binding.hex(), "w1": w1, "w2": w2,
        "session_id_input": P.session_id_input(window, binding).hex(),
        "session_id_value": view.session_id_value, "session_id_text": view.session_id_text,
        "unbound_session_id_value": unbound.session_id_value,
        "first_text": me if view.i_select_first else peer,
        "code_info": codes.info.hex(), "code_key": codes.key.hex(),
    }
    for who, draw, code, unbound_code in (
            (me, view.my_words, codes.my_code, unbound_codes.my_code),
            (peer, view.their_words, codes.their_code, unbound_codes.their_code)):
        out[f"{who}_words"] = list(draw.words)
        out[f"{who}_code_value"] = code
        out[f"{who}_code_text"] = P.format_voice_code(code)
        out[f"unbound_{who}_code_value"] = unbound_code
    # Words and the first selector are 9.3's and 9.4's, unchanged by the binding.
    assert (view.my_words, view.their_words, view.i_select_first) == (
        unbound.my_words, unbound.their_words, unbound.i_select_first)
    return out


@needs_vectors
def test_voice_bound_sessions():
    """voice.json's `bound_sessions` (9.7): each device, from its own side, bound by `binding`,
    derives every field (the session ID's HMAC message, value and text, the code info with
    the two more items u8(1) and cb, the code key and both codes), and the unbound values the
    same device gives without the binding, all different from the bound ones."""
    lengths = set()
    for case in _cases(load("voice.json"), "bound_sessions"):
        expect_keys(case, _VOICE_BOUND_KEYS)
        seed, window, binding = h(case["seed"]), case["window"], h(case["binding"])
        a_pid, b_pid = h(case["a_pid"]), h(case["b_pid"])
        lengths.add(len(binding))
        for me in ("a", "b"):
            assert _voice_bound_session(seed, window, a_pid, b_pid, case["w1"], case["w2"],
                                        binding, me) == case, (me, case["seed"])
        # The formulas of 9.7 one by one.
        message = P.lv_cat(b"itsme-session-id-v1", P.u64(window), P.u8(1), binding)
        assert message.hex() == case["session_id_input"]
        # "no u8(0) item: the items' count tells the two forms apart": the bound message is
        # the unbound one with the two items appended.
        assert message == P.lv_cat(b"itsme-session-id-v1", P.u64(window)) + P.lv_cat(
            b"\x01", binding)
        v = P.be64(P.hmac_sha256(seed, message)[:8]) % 2600
        assert v == case["session_id_value"]
        assert P.format_session_id(v) == case["session_id_text"]
        assert P.session_id_value(seed, window) == case["unbound_session_id_value"] != v
        first, second = (a_pid, b_pid) if case["first_text"] == "a" else (b_pid, a_pid)
        info = P.lv_cat(b"itsme-interactive-code-v1", first, P.u8(case["w1"]), second,
                        P.u8(case["w2"]), P.u8(1), binding)
        assert info.hex() == case["code_info"]
        assert info == P.code_info(first, case["w1"], second, case["w2"]) + P.lv_cat(
            b"\x01", binding)
        key = P.hkdf(seed, P.u64(window), info, 32)
        assert key.hex() == case["code_key"]
        assert key == P.code_key(seed, window, first, case["w1"], second, case["w2"], binding)
        unbound_key = P.code_key(seed, window, first, case["w1"], second, case["w2"])
        for who, pid in (("a", a_pid), ("b", b_pid)):
            value = P.be64(P.hmac_sha256(key, P.lv_cat(b"itsme-code-v1", pid))[:8]) % 26000
            assert value == case[f"{who}_code_value"]
            assert P.format_voice_code(value) == case[f"{who}_code_text"]
            assert P.parse_voice_code(case[f"{who}_code_text"]) == value
            assert P.code_value(unbound_key, pid) == case[f"unbound_{who}_code_value"] != value
        # The words are 9.3's, and the first selector 9.4's.
        for who, pid in (("a", a_pid), ("b", b_pid)):
            assert list(P.draw_words(seed, window, pid).words) == case[f"{who}_words"]
        low_first = P.lower_selects_first(seed, window)
        assert (first == min(a_pid, b_pid)) == low_first
        # The screen marks the bound session beside its ID.
        view = P.voice_view(seed, window, a_pid, b_pid, binding)
        assert view.bound
        assert view.session_id_shown == f"{case['session_id_text']}, bound to this call"
        assert P.voice_view(seed, window, a_pid, b_pid).session_id_shown == P.format_session_id(
            case["unbound_session_id_value"])
    # "cb, 32 and 16 bytes"
    assert lengths == {32, 16}


# Own checks of sections 9 and 10.1 -----------------------------------------------------------

def _random_inputs(rng: random.Random):
    """A random seed, window and pair of ids; one in four peers is a source-format contact
    (an 8-byte id, with a 6-digit device secret)."""
    seed = rng.randbytes(32)
    # 9.1: "The pure derivations take any window from 0 to 2^63 - 1".
    window = rng.randrange(1 << 63) if rng.random() < 0.3 else 60_000_000 + rng.randrange(10**6)
    a_pid = rng.randbytes(32)
    short = rng.random() < 0.25
    b_pid = rng.randbytes(8) if short else rng.randbytes(32)
    a_ds = rng.randbytes(16)
    b_ds = f"{rng.randrange(10**6):06d}".encode() if short else rng.randbytes(16)
    return seed, window, a_pid, b_pid, a_ds, b_ds


def _selections(rng, seed, window, a_pid, b_pid):
    """A legal pair of selections: the first selector's word from their five, then the
    second's from theirs."""
    first, second = P.first_and_second(seed, window, a_pid, b_pid)
    w1 = rng.choice(P.draw_words(seed, window, first).words)
    w2 = rng.choice(P.draw_words(seed, window, second).words)
    return first, second, w1, w2


def test_voice_both_parties_agree():
    rng = random.Random(9001)
    trials, a_first, echoes = 400, 0, 0
    for _ in range(trials):
        seed, window, a_pid, b_pid, a_ds, b_ds = _random_inputs(rng)
        va = P.voice_view(seed, window, a_pid, b_pid)
        vb = P.voice_view(seed, window, b_pid, a_pid)
        assert va.session_id_value == vb.session_id_value < 2600
        assert va.session_id_text == vb.session_id_text
        assert va.my_words == vb.their_words and va.their_words == vb.my_words
        for draw in (va.my_words, va.their_words):
            assert len(set(draw.words)) == 5 and list(draw.words) == sorted(draw.words)
            assert all(0 <= w < 26 for w in draw.words)
        assert va.i_select_first != vb.i_select_first
        a_first += va.i_select_first
        _, _, w1, w2 = _selections(rng, seed, window, a_pid, b_pid)
        ca, cb = P.voice_codes(va, w1, w2), P.voice_codes(vb, w1, w2)
        assert ca.info == cb.info and ca.key == cb.key
        assert ca.my_code == cb.their_code and ca.their_code == cb.my_code
        for value in (ca.my_code, ca.their_code):
            assert P.parse_voice_code(P.format_voice_code(value)) == value
        echoes += ca.my_code == ca.their_code  # echoing the other's code back
        assert P.voice_tags(va, a_ds, b_ds) == P.voice_tags(vb, b_ds, a_ds)[::-1]
    assert echoes <= 3
    assert trials // 3 < a_first < 2 * trials // 3  # f is neither constant nor stuck


def test_voice_codes_change_with_every_input():
    rng = random.Random(4242)
    trials = 2000
    same = {k: 0 for k in ("seed", "window", "w1", "w2", "swap order", "swap words")}
    swapped_words = 0

    def codes(seed, window, first, w1, second, w2):
        key = P.code_key(seed, window, first, w1, second, w2)
        return P.code_value(key, first), P.code_value(key, second)

    for _ in range(trials):
        seed, window, a_pid, b_pid, _, _ = _random_inputs(rng)
        first, second, w1, w2 = _selections(rng, seed, window, a_pid, b_pid)
        base = codes(seed, window, first, w1, second, w2)
        other_w1 = rng.choice([w for w in P.draw_words(seed, window, first).words if w != w1])
        other_w2 = rng.choice([w for w in P.draw_words(seed, window, second).words if w != w2])
        variants = {
            "seed": codes(rng.randbytes(32), window, first, w1, second, w2),
            "window": codes(seed, (window + 1) % (1 << 64), first, w1, second, w2),
            "w1": codes(seed, window, first, other_w1, second, w2),
            "w2": codes(seed, window, first, w1, second, other_w2),
            # The other person selects first, with the same two words.
            "swap order": codes(seed, window, second, w2, first, w1)[::-1],
        }
        if w1 != w2:
            swapped_words += 1
            variants["swap words"] = codes(seed, window, first, w2, second, w1)
        for name, changed in variants.items():
            # Each speaker's code is compared separately; each collides with chance 1/26000.
            same[name] += (changed[0] == base[0]) + (changed[1] == base[1])
    assert swapped_words > trials // 2
    assert all(count <= 3 for count in same.values()), same


def test_voice_device_secret_changes_only_the_tag():
    rng = random.Random(77)
    trials, tag_same = 500, 0
    for _ in range(trials):
        seed, window, a_pid, b_pid, a_ds, b_ds = _random_inputs(rng)
        _, _, w1, w2 = _selections(rng, seed, window, a_pid, b_pid)
        new_ds = rng.randbytes(16)
        for me in ("a", "b"):
            before = _voice_session(seed, window, a_pid, b_pid, w1, w2, a_ds, b_ds, me)
            after = _voice_session(seed, window, a_pid, b_pid, w1, w2, new_ds, b_ds, me)
            changed = {k for k in before if before[k] != after[k]}
            assert changed <= {"a_device_secret", "a_tag", "a_tag_input"}, changed
            assert {"a_device_secret", "a_tag_input"} <= changed
            if me == "a":
                tag_same += "a_tag" not in changed
    assert tag_same <= 25  # a tag has 100 values: about 5 of 500 collide


def test_voice_tag_depends_on_window_and_speaker():
    rng = random.Random(5)
    trials, same_window, same_speaker = 500, 0, 0
    for _ in range(trials):
        seed, window, a_pid, b_pid, a_ds, _ = _random_inputs(rng)
        t = P.tag_key(seed)
        tag = P.device_tag(t, a_pid, window, a_ds)
        assert P.format_device_tag(tag) == f"{tag:02d}" and len(P.format_device_tag(tag)) == 2
        same_window += P.device_tag(t, a_pid, window + 1, a_ds) == tag
        same_speaker += P.device_tag(t, b_pid, window, a_ds) == tag
    assert same_window <= 25 and same_speaker <= 25


def test_voice_plan_properties():
    rng = random.Random(30)
    for _ in range(2000):
        now = rng.randrange(0, 4 * 10**9)  # times before 1970 are refused (9.1)
        last = None if rng.random() < 0.3 else P.window_of(now) + rng.randrange(-5, 6)
        plan = P.plan_session(now, last)
        assert plan.window > P.window_of(now)  # a window that has not started yet
        assert last is None or plan.window > last
        assert plan.starts_at == 30 * plan.window and plan.starts_in == plan.starts_at - now > 0
        if last is None or last <= P.window_of(now):
            assert plan.starts_in <= 30 and plan.window == P.window_of(now) + 1
        assert P.record_window(last, plan.window) == plan.window
        for reused in range(plan.window - 3, plan.window + 1):
            with pytest.raises(P.ProtocolError):
                P.record_window(plan.window, reused)
    # The start and finish limits of 9.1.
    w = 60_000_001
    assert not P.session_may_start(w, 30 * w - 16) and P.session_may_start(w, 30 * w - 15)
    assert P.session_may_finish(w, 30 * (w + 2) - 1) and not P.session_may_finish(w, 30 * (w + 2))
    # "at 30 * (W + 2) it has expired", and so it stays.
    assert not P.session_expired(w, 30 * (w + 2) - 1)
    assert all(P.session_expired(w, 30 * (w + 2) + d) for d in (0, 1, 30, 10**6))
    # Clock skew: at true time 30 W + 15, devices up to 15 s off can both start and finish.
    for skew in range(-15, 16):
        clock = 30 * w + 15 + skew
        assert P.session_may_start(w, clock) and P.session_may_finish(w, clock)


def test_voice_session_id_and_code_texts():
    assert P.format_session_id(1007) == "KILO 07"
    assert P.format_session_id(0) == "ALFA 00" and P.format_session_id(2599) == "ZULU 99"
    assert P.format_voice_code(4512) == "ECHO 512"
    assert P.format_voice_code(25_000) == "ZULU 000" and P.format_voice_code(7) == "ALFA 007"
    for value in (-1, 2600):
        with pytest.raises(ValueError):
            P.format_session_id(value)
    for value in (-1, 26_000):
        with pytest.raises(ValueError):
            P.format_voice_code(value)
    assert P.parse_voice_code(" xray-001") == 23_001
    for bad in ["ECHO\t512", "\tECHO 512", "ECHO512", "ECHO -512", "X-RAY 512", "ECHO 5 12",
                "ECHO 512, 47", "ECHO 5١2", "ECHO 0512", "ÉCHO 512", "ECHO 512\n",
                "\u00a0ECHO 512", "ECHO--512", "ECHO- 512", "KİLO 512", "ſIERRA 512", "ＥCHO 512", "FOO 512"]:
        with pytest.raises(P.TypingError):
            P.parse_voice_code(bad)
    # A well-formed code that differs is no typing error: it fails the session (10.1).
    assert P.heard_code_matches("echo 512", 4512) and not P.heard_code_matches("ECHO 513", 4512)
    with pytest.raises(P.TypingError):
        P.heard_code_matches("ECHO 51", 4512)


def test_voice_word_rejection_sampling():
    # Bytes >= 234 are skipped, repeats (b mod 26) are skipped, reading stops at five.
    stream = [234, 255, 0, 26, 1, 233, 52, 2, 27, 3, 4, 5]
    assert P.pick_words(stream) == [0, 1, 25, 2, 3]
    with pytest.raises(P.ProtocolError):
        P.pick_words([0, 26, 52, 1, 2, 3])
    key = bytes(range(32))
    assert P.words_block(key, 0) == P.hmac_sha256(key, b"word-options")
    assert P.words_block(key, 1) == P.hmac_sha256(key, b"word-options\x01")
    assert P.words_block(key, 255) == P.hmac_sha256(key, b"word-options\xff")
    for beyond in (-1, 256):  # "for i = 1, 2, ..., 255"
        with pytest.raises(ValueError):
            P.words_block(key, beyond)
    # The key's salt is lv_cat(u64(W), pid): the window and the id both matter.
    seed, pid = bytes([7]) * 32, bytes([8]) * 32
    assert P.words_key(seed, 1, pid) == P.hkdf(seed, P.lv_cat(P.u64(1), pid),
                                               b"itsme-word-options-v1", 32)
    assert P.words_key(seed, 1, pid) != P.words_key(seed, 2, pid)
    assert P.words_key(seed, 1, pid) != P.words_key(seed, 1, pid[:8])
    # Every index is drawn: over many windows all 26 words appear, none far more than others.
    counts = [0] * 26
    for window in range(2000):
        for w in P.draw_words(seed, window, pid).words:
            counts[w] += 1
    assert min(counts) > 250 and max(counts) < 520  # mean 10000 / 26 = 385


def test_voice_selection_check_and_first_selector():
    seed, window = bytes([3]) * 32, 60_000_000
    low, high = bytes([1]) * 32, bytes([2]) * 32
    view = P.voice_view(seed, window, low, high)
    first, second = P.first_and_second(seed, window, high, low)
    assert (first == low) == P.lower_selects_first(seed, window) == view.i_select_first
    assert {first, second} == {low, high}
    mine = view.my_words.words
    outside = next(w for w in range(26) if w not in mine)
    with pytest.raises(P.ProtocolError):
        P.check_selection(outside, mine)
    with pytest.raises(P.ProtocolError):
        P.check_selection(26, range(26))
    theirs = view.their_words.words
    w1, w2 = (mine[0], theirs[0]) if view.i_select_first else (theirs[0], mine[0])
    P.voice_codes(view, w1, w2)
    with pytest.raises(P.ProtocolError):  # the second selection is not the second's word
        P.voice_codes(view, w1, next(w for w in range(26) if w not in
                                     (theirs if view.i_select_first else mine)))
    with pytest.raises(P.ProtocolError):  # a party facing its own id
        P.voice_view(seed, window, low, low)
    # An 8-byte id orders as a byte string against 32-byte ones.
    assert P.order_pids(bytes([0xFF]) * 8, bytes([0x01]) * 32) == (bytes([0x01]) * 32,
                                                                  bytes([0xFF]) * 8)


def test_voice_pid_order_is_lexicographic_with_prefix_first():
    rng = random.Random(11)
    for _ in range(500):
        long = rng.randbytes(32)
        short = long[:8] if rng.random() < 0.5 else rng.randbytes(8)
        p0, p1 = P.order_pids(long, short)
        assert (p0, p1) == P.order_pids(short, long)
        # Byte by byte, the first difference decides; a proper prefix sorts first.
        k = next((i for i in range(8) if long[i] != short[i]), None)
        expected_short_first = True if k is None else short[k] < long[k]
        assert (p0 == short) == expected_short_first
    # A fingerprint id that is a proper prefix of the other party's key selects first exactly
    # when the lower id does.
    seed, window, key = bytes([6]) * 32, 60_000_123, bytes(range(32))
    first, _ = P.first_and_second(seed, window, key, key[:8])
    assert (first == key[:8]) == P.lower_selects_first(seed, window)


def test_voice_word_blocks_stop_at_255(monkeypatch):
    # Were every byte of every block rejected, reading stops after block_255 (256 blocks).
    asked = []

    def useless_block(key, i):
        asked.append(i)
        if not 0 <= i <= 255:
            raise ValueError("block index out of range")
        return b"\xff" * 32

    monkeypatch.setattr(P, "words_block", useless_block)
    with pytest.raises(P.ProtocolError):
        P.draw_words(bytes(32), 1, bytes(32))
    assert asked == list(range(256))


def test_voice_outcomes():
    for state in P.CONTACT_STATES:
        for tag_matches in (True, False, None):  # "differs | any"
            assert P.session_outcome(False, tag_matches, state) == (P.FAILED, state)
        # "degraded, not acknowledged", whatever the state before.
        assert P.session_outcome(True, False, state) == (P.VERIFIED_DEVICE_CHANGED, P.DEGRADED)
        # "not checked (no secret here)": "verified, tag unchecked", and "unverified or
        # verified → verified; degraded stays degraded", as in the "matches" row.
        outcome, after = P.session_outcome(True, None, state)
        assert outcome == P.VERIFIED_TAG_UNCHECKED
        assert after == P.session_outcome(True, True, state)[1]
        assert after == (state if state in (P.DEGRADED, P.DEGRADED_ACKNOWLEDGED) else P.VERIFIED)
    assert P.session_outcome(True, True, P.UNVERIFIED) == (P.VERIFIED, P.VERIFIED)
    assert P.session_outcome(True, True, P.VERIFIED) == (P.VERIFIED, P.VERIFIED)
    assert P.session_outcome(True, True, P.DEGRADED) == (P.VERIFIED, P.DEGRADED)
    assert P.session_outcome(True, True, P.DEGRADED_ACKNOWLEDGED) == (P.VERIFIED,
                                                                       P.DEGRADED_ACKNOWLEDGED)
    with pytest.raises(ValueError):
        P.session_outcome(True, True, "trusted")


def test_voice_tags_without_device_secret():
    rng = random.Random(606)
    for _ in range(200):
        seed, window, a_pid, b_pid, a_ds, b_ds = _random_inputs(rng)
        t = P.tag_key(seed)
        # A device holding no secret says the tag of the empty string ...
        assert P.device_tag(t, a_pid, window, None) == P.device_tag(t, a_pid, window, b"")
        assert P.device_tag(t, a_pid, window, b"") == (
            P.be64(P.hmac_sha256(t, P.lv_cat(a_pid, P.u64(window), b""))[:8]) % 100)
        # ... and a listener holding none checks no tag.
        assert P.expected_device_tag(t, b_pid, window, None) is None
        assert P.expected_device_tag(t, b_pid, window, b"") is None
        assert P.expected_device_tag(t, b_pid, window, b_ds) == P.device_tag(t, b_pid, window,
                                                                              b_ds)
        va = P.voice_view(seed, window, a_pid, b_pid)  # a new device: no secrets at all
        vb = P.voice_view(seed, window, b_pid, a_pid)  # b still holds a's old secret
        a_says, a_expects = P.voice_tags(va, None, None)
        b_says, b_expects = P.voice_tags(vb, b_ds, a_ds)
        assert a_expects is None and a_says == P.device_tag(t, a_pid, window, b"")
        assert b_expects == P.device_tag(t, a_pid, window, a_ds)
        assert a_says == P.device_tag(t, a_pid, window, None)
    assert P.format_device_tag(6) == "06" and P.format_device_tag(47) == "47"
    assert P.format_device_tag(0) == "00" and P.format_device_tag(99) == "99"
    for bad in (-1, 100):
        with pytest.raises(ValueError):
            P.format_device_tag(bad)


def test_voice_call_binding_lengths():
    """9.7: cb is 16 to 64 bytes; "a binding of another length is invalid_argument" (15 and
    65 bytes, and none at all given as an empty string), wherever a bound session is
    planned or derived."""
    rng = random.Random(970)
    seed, window, a_pid, b_pid, _, _ = _random_inputs(rng)
    first, second, w1, w2 = _selections(rng, seed, window, a_pid, b_pid)
    for n in (0, 1, 15, 65, 100):
        cb = rng.randbytes(n)
        for call in (lambda: P.check_call_binding(cb),
                     lambda: P.voice_view(seed, window, a_pid, b_pid, cb),
                     lambda: P.session_id_input(window, cb),
                     lambda: P.session_id_value(seed, window, cb),
                     lambda: P.session_id_text(seed, window, cb),
                     lambda: P.code_info(first, w1, second, w2, cb),
                     lambda: P.code_key(seed, window, first, w1, second, w2, cb)):
            with pytest.raises(P.ProtocolError) as info:
                call()
            assert P.result_code(info.value) == "invalid_argument", n
    for n in (16, 17, 32, 63, 64):
        cb = rng.randbytes(n)
        assert P.check_call_binding(cb) == cb
        view = P.voice_view(seed, window, a_pid, b_pid, cb)
        assert view.binding == cb and view.bound
        assert P.voice_codes(view, w1, w2).info.endswith(P.lv_cat(b"\x01", cb))
    assert P.check_call_binding(None) is None
    assert not P.voice_view(seed, window, a_pid, b_pid).bound


def test_voice_bound_beside_unbound_reads_different_session_ids():
    """9.7: "two devices bound to different calls, or one bound and one not, read different
    session IDs (equal by chance once in 2,600) before anyone chooses a word", the mark beside
    the ID shown by one and not the other; "Should the people go on regardless, the codes
    differ too: the check gives 'failed' (10.1), never 'verified'".  Two devices bound to one
    call agree on everything, and words and the first selector never depend on the binding."""
    rng = random.Random(971)
    trials, equal_ids = 600, {"one bound": 0, "two calls": 0}
    for _ in range(trials):
        seed, window, a_pid, b_pid, a_ds, b_ds = _random_inputs(rng)
        cb, other_cb = rng.randbytes(rng.randrange(16, 65)), rng.randbytes(32)
        first, second, w1, w2 = _selections(rng, seed, window, a_pid, b_pid)
        # Both bound to one call: one session, as 9.2 to 9.6 say, with the bound values.
        va = P.voice_view(seed, window, a_pid, b_pid, cb)
        vb = P.voice_view(seed, window, b_pid, a_pid, cb)
        assert va.session_id_text == vb.session_id_text
        assert va.session_id_shown == vb.session_id_shown == (
            va.session_id_text + ", bound to this call")
        ca, cb_codes = P.voice_codes(va, w1, w2), P.voice_codes(vb, w1, w2)
        assert (ca.my_code, ca.their_code) == (cb_codes.their_code, cb_codes.my_code)
        for kind, vb_wrong in (("one bound", P.voice_view(seed, window, b_pid, a_pid)),
                               ("two calls", P.voice_view(seed, window, b_pid, a_pid, other_cb))):
            # Words and the first selector are unchanged: the people can go on.
            assert vb_wrong.my_words == vb.my_words and vb_wrong.their_words == vb.their_words
            assert vb_wrong.i_select_first == vb.i_select_first
            if vb_wrong.session_id_value == va.session_id_value:
                equal_ids[kind] += 1
            if kind == "one bound":  # the mark shows on one screen and not on the other
                assert va.session_id_shown != vb_wrong.session_id_shown
                assert vb_wrong.session_id_shown == vb_wrong.session_id_text
            cw = P.voice_codes(vb_wrong, w1, w2)
            assert cw.key != ca.key
            # Each types the code the other reads aloud: the check gives "failed" (a code
            # equal by chance, once in 26,000, on one side at most, never on both).
            a_ok = P.heard_code_matches(P.format_voice_code(cw.my_code), ca.their_code)
            b_ok = P.heard_code_matches(P.format_voice_code(ca.my_code), cw.their_code)
            assert not (a_ok and b_ok)
            for ok in (a_ok, b_ok):
                if not ok:
                    assert P.session_outcome(ok, True, P.VERIFIED) == (P.FAILED, P.VERIFIED)
    # Equal by chance once in 2,600 (600 trials each: about 0.23 expected).
    assert equal_ids["one bound"] <= 2 and equal_ids["two calls"] <= 2
    # A fixed pair that does not collide: the bound device and the unbound one read different
    # IDs and their screens differ.
    seed, window = bytes(range(32)), 60_000_000
    a_pid, b_pid = bytes([1]) * 32, bytes([2]) * 32
    bound = P.voice_view(seed, window, a_pid, b_pid, bytes([9]) * 32)
    unbound = P.voice_view(seed, window, b_pid, a_pid)
    assert bound.session_id_value != unbound.session_id_value
    assert bound.session_id_shown.endswith(", bound to this call")
    assert "bound" not in unbound.session_id_shown


def test_be64():
    assert P.be64(bytes(8)) == 0 and P.be64(b"\xff" * 8) == 2**64 - 1
    assert P.be64(bytes(range(1, 9))) == 0x0102030405060708
    rng = random.Random(64)
    for _ in range(200):
        n = rng.randrange(2**64)
        assert P.be64(P.u64(n)) == n
    for bad in (b"", bytes(7), bytes(9)):
        with pytest.raises(ValueError):
            P.be64(bad)


# --------------------------------------------------------------------------------------------
# voice.json: degradation codes (section 10.2)
# --------------------------------------------------------------------------------------------

def _compact(code_text: str) -> str:
    return code_text.replace("-", "")


@needs_vectors
def test_degradation_vectors():
    for case in _cases(load("voice.json"), "degradation"):
        expect_keys(case, "seed pid secret key mac_input mac code_text")
        seed, pid, secret = h(case["seed"]), h(case["pid"]), h(case["secret"])
        assert len(secret) == 10 and len(pid) in (8, 32)
        assert P.degradation_key(seed).hex() == case["key"]
        assert P.hkdf(seed, b"", b"itsme-degradation-code-v1", 32).hex() == case["key"]
        assert P.degradation_mac_input(pid, secret).hex() == case["mac_input"]
        mac = P.degradation_mac(seed, pid, secret)
        assert mac.hex() == case["mac"] and len(mac) == 5
        assert P.hmac_sha256(h(case["key"]), h(case["mac_input"]))[:5] == mac
        assert P.degradation_code(seed, pid, secret) == case["code_text"]
        assert P.format_degradation_code(secret + mac) == case["code_text"]
        # C's side: the shown code parses to r || m and is accepted, giving back r.
        assert P.parse_degradation_code(case["code_text"]) == secret + mac
        assert P.check_degradation_code(seed, pid, case["code_text"]) == secret
        assert P.check_degradation_code(seed, pid, case["code_text"].lower()) == secret
        # The same code for another contact id, or under another seed, is wrong.
        assert P.check_degradation_code(seed, pid[::-1], case["code_text"]) is None
        assert P.check_degradation_code(seed[::-1], pid, case["code_text"]) is None


@needs_vectors
def test_degradation_parse_vectors():
    vec = load("voice.json")["degradation_parse"]
    expect_keys(vec, "valid invalid")
    for case in _cases(vec, "valid"):
        expect_keys(case, "input_text bytes")
        raw = P.parse_degradation_code(case["input_text"])
        assert raw.hex() == case["bytes"], case
        assert len(raw) == 15
        assert P.parse_degradation_code(P.format_degradation_code(raw)) == raw
    for text in _cases(vec, "invalid"):
        # A code of the wrong form is rejected without counting (TypingError, not a None).
        with pytest.raises(P.TypingError):
            P.parse_degradation_code(text)
        with pytest.raises(P.TypingError):
            P.check_degradation_code(bytes(32), bytes(32), text)


def test_degradation_code_form():
    raw = bytes(range(15))
    text = P.format_degradation_code(raw)
    groups = text.split("-")
    assert len(text) == 29 and len(groups) == 6 and all(len(g) == 4 for g in groups)
    assert set(_compact(text)) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
    # The alphabet is RFC 4648's: the standard library's encoder agrees (15 bytes, no padding).
    rng = random.Random(32)
    for n in (5, 10, 15, 20):
        for _ in range(50):
            data = rng.randbytes(n)
            assert P.base32_encode(data) == base64.b32encode(data).decode("ascii")
            assert P.base32_decode(P.base32_encode(data)) == data
    for bad in (bytes(14), bytes(16)):
        with pytest.raises(ValueError):
            P.format_degradation_code(bad)
    for bad in (bytes(9), bytes(11)):
        with pytest.raises(ValueError):
            P.degradation_mac(bytes(32), bytes(32), bad)
    compact = _compact(text)
    for bad in [
        compact + "=",  # padding
        compact[:-1] + "=",
        compact[:23], compact + "A",  # 23 and 25 characters
        compact[:-1] + "8", compact[:-1] + "9", compact[:-1] + "0", compact[:-1] + "1",
        compact[:12] + "\t" + compact[12:],  # only U+0020 and '-' are ignored
        compact[:12] + "_" + compact[12:], compact[:12] + "." + compact[12:],
        compact + "\n", "\u00a0" + compact, compact[:12] + "\u2010" + compact[12:],
        compact[:-1] + "ı",  # dotless i: upper() would give 'I'
        compact[:-1] + "ſ",  # long s: upper() would give 'S'
        compact[:-1] + "Ａ",  # fullwidth A
        "-" * 29, " " * 24,
    ]:
        with pytest.raises(P.TypingError):
            P.parse_degradation_code(bad)


def _random_spacing(rng: random.Random, compact: str) -> str:
    """The compact code with random case and any number of spaces and '-' anywhere."""
    out = []
    for c in compact:
        out.append(rng.choice(" -") * rng.choice((0, 0, 0, 1, 2)))
        out.append(c.lower() if rng.random() < 0.5 else c)
    out.append(rng.choice(" -") * rng.choice((0, 1, 3)))
    return "".join(out)


def test_degradation_format_parse_round_trip():
    rng = random.Random(1015)
    for _ in range(2000):
        raw = rng.randbytes(15)
        text = P.format_degradation_code(raw)
        assert P.parse_degradation_code(text) == raw
        compact = _compact(text)
        assert P.format_degradation_code(P.parse_degradation_code(compact)) == text
        # Spaces, dashes and lower case are accepted.
        for variant in (compact.lower(), text.lower(), text.replace("-", " "),
                        " ".join(compact), _random_spacing(rng, compact)):
            assert P.parse_degradation_code(variant) == raw, variant
    # Every 24-character text over the alphabet is the code of exactly one byte string.
    for _ in range(500):
        compact = "".join(rng.choice(P.BASE32_ALPHABET) for _ in range(24))
        assert _compact(P.format_degradation_code(P.parse_degradation_code(compact))) == compact


def test_degradation_any_single_change_fails_the_mac():
    rng = random.Random(1002)
    for trial in range(6):
        seed = rng.randbytes(32)
        pid = rng.randbytes(8 if trial % 3 == 2 else 32)
        secret = rng.randbytes(10)
        text = P.degradation_code(seed, pid, secret)
        assert P.check_degradation_code(seed, pid, text) == secret
        compact = _compact(text)
        # Characters 0-15 carry r (80 bits), 16-23 carry m (40 bits): no character is shared.
        assert P.base32_encode(secret) == compact[:16]
        for pos in range(24):
            for c in P.BASE32_ALPHABET:
                if c == compact[pos]:
                    continue
                changed = compact[:pos] + c + compact[pos + 1:]
                grouped = "-".join(changed[i:i + 4] for i in range(0, 24, 4))
                assert P.check_degradation_code(seed, pid, grouped) is None, (pos, c)
        # Under typing variants the right code still passes.
        assert P.check_degradation_code(seed, pid, _random_spacing(rng, compact)) == secret


def test_degradation_acceptance_state_and_limiter():
    for state in P.CONTACT_STATES:
        assert P.degradation_accepted_state(state) == P.DEGRADED_ACKNOWLEDGED
        assert P.degradation_accepted_state(state) != P.VERIFIED  # never restores verified
    # r becomes D's device secret: D's tags, computed by D and expected by C, match again.
    seed, window = bytes([9]) * 32, 60_000_500
    d_pid, c_pid, r = bytes([0xD0]) * 32, bytes([0xC0]) * 32, bytes(range(10))
    stored = P.check_degradation_code(seed, d_pid, P.degradation_code(seed, d_pid, r))
    d_says, _ = P.voice_tags(P.voice_view(seed, window, d_pid, c_pid), r, None)
    _, c_expects = P.voice_tags(P.voice_view(seed, window, c_pid, d_pid), None, stored)
    assert stored == r and d_says == c_expects
    outcome, after = P.session_outcome(True, d_says == c_expects, P.DEGRADED_ACKNOWLEDGED)
    assert (outcome, after) == (P.VERIFIED, P.DEGRADED_ACKNOWLEDGED)
    # A later session that finds a wrong tag ends the acknowledgement.
    assert P.session_outcome(True, False, P.DEGRADED_ACKNOWLEDGED) == (P.VERIFIED_DEVICE_CHANGED,
                                                                        P.DEGRADED)


@pytest.mark.parametrize("committed", [False, True])
def test_degradation_code_ends_a_pending_pin_update(committed):
    """10.2: issuing or accepting a code ends any Security PIN Update pending with the contact
    on that device: issuing writes r and the peer's current secret, accepting writes r as the
    peer's and this device's current one (the one from before the update, even committed);
    nothing pending or previous, the committed flag cleared."""
    r = bytes(range(10))
    for issuing in (True, False):
        c = P.ContactSecrets(b"m" * 16, b"t" * 16, P.DEGRADED)
        c.store_pending(b"M" * 16, b"T" * 16, committed)
        c.previous = b"p" * 16
        assert c.says() == (b"M" * 16 if committed else b"m" * 16)
        if issuing:
            c.issue_degradation(r)
            assert (c.mine, c.theirs) == (r, b"t" * 16)
        else:
            c.accept_degradation(r)
            assert (c.mine, c.theirs) == (b"m" * 16, r)
            assert c.state == P.DEGRADED_ACKNOWLEDGED
        assert c.pending is None and c.previous is None and c.committed is False
        assert c.accepts() == (c.theirs, None, None) and c.says() == c.mine


def test_degradation_limiter_delays():
    # "the n-th failure, for n of 5 or more, locks further attempts for 300 x 2^(n-5) seconds,
    # at most 24 hours (so five wrong codes lock for 5 minutes)".
    delays = [P.limiter_delay(n) for n in range(0, 40)]
    assert delays[:5] == [0] * 5
    assert delays[5:14] == [300, 600, 1200, 2400, 4800, 9600, 19200, 38400, 76800]
    assert delays[14:] == [86_400] * 26
    for n in range(5, 40):
        assert delays[n] == min(300 * 2 ** (n - 5), 24 * 3600)
    assert P.limiter_delay(10**9) == 86_400
    with pytest.raises(ValueError):
        P.limiter_delay(-1)


def test_degradation_limiter_counts_wrong_codes_only():
    seed, d_pid, r = bytes([0x44]) * 32, bytes([0xD1]) * 32, bytes(range(10, 20))
    right = P.degradation_code(seed, d_pid, r)
    wrong = P.degradation_code(seed, d_pid, bytes(10))[:-1] + "A"
    assert P.check_degradation_code(seed, d_pid, wrong) is None
    limiter, t = P.AttemptLimiter(), 1_000_000
    for n in range(1, 5):  # four wrong codes: no lock yet
        assert P.attempt_degradation_code(limiter, t, seed, d_pid, wrong) is None
        assert limiter.failures == n and limiter.locked_until is None
    # A typing error is rejected without counting, before and during a lock.
    with pytest.raises(P.TypingError):
        P.attempt_degradation_code(limiter, t, seed, d_pid, "ABCD")
    assert limiter.failures == 4
    # The fifth wrong code locks for 5 minutes: refused until then, even a right code.
    assert P.attempt_degradation_code(limiter, t, seed, d_pid, wrong) is None
    assert limiter.failures == 5 and limiter.locked_until == t + 300
    for at in (t, t + 299):
        with pytest.raises(P.Locked) as err:
            P.attempt_degradation_code(limiter, at, seed, d_pid, right)
        assert P.result_code(err.value) == "locked"
        # A typing error while locked is the typing error, uncounted (10.2).
        with pytest.raises(P.TypingError):
            P.attempt_degradation_code(limiter, at, seed, d_pid, "ABCD")
        # A contact awaiting the peer: invalid_state after the typing check, before the
        # limiter (8.1, 10.2), and nothing counted.
        with pytest.raises(P.InvalidState):
            P.attempt_degradation_code(limiter, at, seed, d_pid, right, awaiting_peer=True)
        with pytest.raises(P.TypingError):
            P.attempt_degradation_code(limiter, at, seed, d_pid, "ABCD", awaiting_peer=True)
    assert limiter.failures == 5 and limiter.locked_until == t + 300
    # The sixth, after the lock, locks for 10 minutes.
    t += 300
    assert P.attempt_degradation_code(limiter, t, seed, d_pid, wrong) is None
    assert limiter.locked_until == t + 600
    # A right code resets the count: the next wrong code is the first again.
    t += 600
    assert P.attempt_degradation_code(limiter, t, seed, d_pid, right.lower()) == r
    assert limiter.failures == 0 and limiter.locked_until is None
    assert P.attempt_degradation_code(limiter, t, seed, d_pid, wrong) is None
    assert limiter.failures == 1 and limiter.locked_until is None
    # The cap: from the 14th failure on, 24 hours.
    capped = P.AttemptLimiter(failures=13)
    assert capped.failure(t) == 86_400 and capped.locked_until == t + 86_400


# --------------------------------------------------------------------------------------------
# online-verify.json (section 11)
# --------------------------------------------------------------------------------------------

_OV_SESSION_KEYS = (
    "seed window room initiator_text a b commit key_r key_i th_input th salt shared k_i k_r "
    "proof_i proof_r tag_key dtag_i dtag_r proof_message_i proof_message_r sas_value sas_text "
    "room_input prk"
)
_OV_SIDE_KEYS = ("random_seed identity_random_seed identity_seed pid ephemeral_secret "
                 "ephemeral_public challenge device_secret")
# 11.3: a side whose PROOF carries a profile reference has one more field.
_OV_SIDE_REFERENCE_KEY = "profile_reference"
_OTHER = {"a": "b", "b": "a"}


def _ov_sessions(seed, window, pids, esks, chals, own_ds, stored_ds, created_at=None, refs=None,
                 bindings=None):
    """The two sides "a" and "b" of one session.  own_ds[x] is the device secret x gave the
    other (None: a new device holding none); stored_ds[x] the one x stored for the other;
    refs[x] the profile reference x puts in its PROOF (11.3; None or missing: none);
    bindings[x] the call binding cb x is bound by (11.4; None or missing: not bound)."""
    refs, bindings = refs or {}, bindings or {}
    return {x: P.OnlineVerifySession(seed, window, pids[x], pids[_OTHER[x]], esks[x], chals[x],
                                     own_ds[x], stored_ds[x], created_at=created_at,
                                     profile_reference=refs.get(x), binding=bindings.get(x))
            for x in ("a", "b")}


def _ov_run(sessions, tamper=None, rng=None):
    """Run both sides through an in-memory relay that keeps each direction in order and, with
    ``rng``, interleaves the two directions at random.  ``tamper(index, message)`` may replace
    the index-th message sent (None drops it).  Returns (sent messages, failures by side)."""
    sides = list(sessions)
    queues = {x: [] for x in sides}  # messages waiting for delivery to x
    sent, failures = [], {}

    def send(sender, messages):
        for m in messages:
            index = len(sent)
            sent.append((sender, m))
            if tamper is not None:
                m = tamper(index, m)
            if m is not None:
                queues[_OTHER[sender]].append(m)

    for x in sides:
        send(x, sessions[x].start())
    while any(queues.values()):
        ready = [x for x in sides if queues[x]]
        dst = rng.choice(ready) if rng is not None else ready[0]
        m = queues[dst].pop(0)
        try:
            send(dst, sessions[dst].receive(m))
        except P.ProtocolError as exc:
            failures.setdefault(dst, exc)
    return sent, failures


def _ov_fields(sessions, seed, window, ids, esks, chals, own_ds, refs=None,
               bound: bool = False) -> dict:
    """Every field of an online-verify.json session, as the vector names them, taken from one
    run of both sides; each side's own view must agree with the other's.  A side's
    ``profile_reference`` is the one its PROOF carried, as the two sides read it.  With
    ``bound``, the fields of a `bound_sessions` entry (11.4): each side's binding and bind, the
    state both ended in, and the SAS only in compare_sas (the end states show none)."""
    ini = next(x for x in ("a", "b") if sessions[x].role == P.INITIATOR)
    res = _OTHER[ini]
    views = {x: sessions[x].result for x in ("a", "b")}
    out = {}
    for x, r in views.items():
        fields = {
            "seed": seed.hex(), "window": window, "room": r.room.hex(), "initiator_text": ini,
            "commit": r.commit.hex(), "key_r": r.key_r.hex(), "key_i": r.key_i.hex(),
            "th_input": r.th_input.hex(), "th": r.th.hex(), "salt": r.salt.hex(),
            "shared": r.shared.hex(), "k_i": r.k_i.hex(), "k_r": r.k_r.hex(),
            "proof_i": r.proof_i.hex(), "proof_r": r.proof_r.hex(),
            "tag_key": P.tag_key(seed).hex(), "dtag_i": r.dtag_i.hex(),
            "dtag_r": r.dtag_r.hex(), "proof_message_i": r.proof_message_i.hex(),
            "proof_message_r": r.proof_message_r.hex(), "sas_value": r.sas_value,
            "sas_text": r.sas_text,
            # 11.1's HMAC message of the room and 11.3's prk, each giving what follows from it.
            "room_input": P.room_input(window).hex(), "prk": P.ov_prk(r.salt, r.shared).hex(),
        }
        assert P.hmac_sha256(seed, P.room_input(window))[:16] == r.room
        prk = P.ov_prk(r.salt, r.shared)
        assert P.hkdf_expand(prk, P.lv_cat(P.OV_KEY_LABEL, P.INITIATOR), 32) == r.k_i
        assert P.hkdf_expand(prk, P.lv_cat(P.OV_KEY_LABEL, P.RESPONDER), 32) == r.k_r
        assert (r.sas_value is None) == (r.state != P.OV_COMPARE_SAS)
        if bound:
            binds = {ini: r.bind_i, res: r.bind_r}
            for y in ("a", "b"):
                cb = sessions[y].binding
                fields[f"{y}_binding"] = None if cb is None else cb.hex()
                fields[f"{y}_bind"] = None if binds[y] is None else binds[y].hex()
            fields["state_text"] = r.state
            if r.state != P.OV_COMPARE_SAS:
                del fields["sas_value"], fields["sas_text"]
        else:
            assert r.state == P.OV_COMPARE_SAS and r.bind_i is None and r.bind_r is None
        for y in ("a", "b"):
            fields[y] = {
                "identity_seed": ids[y]["identity_seed"], "pid": ids[y]["pid"],
                "random_seed": ids[y]["random_seed"],
                "identity_random_seed": ids[y]["identity_random_seed"],
                "ephemeral_secret": esks[y].hex(),
                "ephemeral_public": P.x25519_public(esks[y]).hex(),
                "challenge": chals[y].hex(),
                "device_secret": (own_ds[y] or b"").hex(),
            }
            sent_ref = r.reference_i if y == ini else r.reference_r
            assert sent_ref == (refs or {}).get(y)
            if sent_ref is not None:
                fields[y]["profile_reference"] = sent_ref.hex()
        if out:
            assert fields == out, f"the two sides disagree ({x})"
        out = fields
    assert sessions[ini].role == P.INITIATOR and sessions[res].role == P.RESPONDER
    return out


@needs_vectors
def test_online_verify_vector_file_fields():
    expect_keys(load("online-verify.json"), "sessions bound_sessions rejections")


@needs_vectors
def test_online_verify_rejections():
    """online-verify.json's rejections, played against a fresh side of this module: the side
    ``receiver_text`` of session ``session`` (its pid, the seed, both device secrets, its
    ephemeral secret and challenge) receives ``messages`` in order; every one but the last is
    accepted, and the last is refused with the result code of 11.2 and 11.3."""
    data = load("online-verify.json")
    for case in _cases(data, "rejections"):
        expect_keys(case, "case_text session receiver_text messages result")
        session = data["sessions"][case["session"]]
        x = case["receiver_text"]
        assert x in ("a", "b")
        me, peer = session[x], session[_OTHER[x]]
        side = P.OnlineVerifySession(
            h(session["seed"]), session["window"], h(me["pid"]), h(peer["pid"]),
            h(me["ephemeral_secret"]), h(me["challenge"]), h(me["device_secret"]),
            h(peer["device_secret"]))
        side.start()
        messages = [h(m) for m in case["messages"]]
        for m in messages[:-1]:
            side.receive(m)
        with pytest.raises(P.ProtocolError) as info:
            side.receive(messages[-1])
        assert P.result_code(info.value) == case["result"], case["case_text"]
        # 11.2: every refusal but invalid_state ends the session; invalid_state does not.
        assert side.failed == (case["result"] != "invalid_state"), case["case_text"]
        if side.failed:
            with pytest.raises(P.InvalidState):
                side.receive(messages[-1])


def _ov_case_inputs(case):
    """The inputs of an online-verify.json session's two sides: (ids, pids, esks, chals, ds,
    refs), each checked for its form."""
    ids, pids, esks, chals, ds, refs = {}, {}, {}, {}, {}, {}
    for x in ("a", "b"):
        side = case[x]
        if _OV_SIDE_REFERENCE_KEY in side:
            expect_keys(side, f"{_OV_SIDE_KEYS} {_OV_SIDE_REFERENCE_KEY}")
            refs[x] = h(side[_OV_SIDE_REFERENCE_KEY])
            assert len(refs[x]) == P.OV_REFERENCE_BYTES
        else:
            expect_keys(side, _OV_SIDE_KEYS)
        # The pid is the identity public key of the RFC 8032 seed (section 9).
        pids[x] = P.ed25519_public(h(side["identity_seed"]))
        assert len(pids[x]) == 32
        # random_seed and identity_random_seed drive the library's own test random source,
        # which is no part of the protocol (section 13): only their form can be checked.
        for k in ("random_seed", "identity_random_seed"):
            assert len(h(side[k])) == 32
        ids[x] = {"identity_seed": side["identity_seed"], "pid": pids[x].hex(),
                  "random_seed": side["random_seed"],
                  "identity_random_seed": side["identity_random_seed"]}
        esks[x], chals[x], ds[x] = (h(side["ephemeral_secret"]), h(side["challenge"]),
                                    h(side["device_secret"]))
    assert case["a"]["random_seed"] != case["b"]["random_seed"]
    return ids, pids, esks, chals, ds, refs


@needs_vectors
def test_online_verify_sessions():
    seen_reference = False
    for case in _cases(load("online-verify.json"), "sessions"):
        expect_keys(case, _OV_SESSION_KEYS)
        seen_reference |= any(_OV_SIDE_REFERENCE_KEY in case[x] for x in ("a", "b"))
        seed, window = h(case["seed"]), case["window"]
        ids, pids, esks, chals, ds, refs = _ov_case_inputs(case)
        # "a and b hold each other as contacts with seed and those device secrets".
        sessions = _ov_sessions(seed, window, pids, esks, chals, ds, {"a": ds["b"], "b": ds["a"]},
                                refs=refs)
        sent, failures = _ov_run(sessions)
        assert failures == {}
        fields = _ov_fields(sessions, seed, window, ids, esks, chals, ds, refs)
        assert fields == case
        # 11.3: each side offers the peer's reference only once the SAS is confirmed.
        for x in ("a", "b"):
            with pytest.raises(P.ProtocolError):
                sessions[x].peer_profile()
            sessions[x].confirm_sas()
            assert sessions[x].peer_profile() == refs.get(_OTHER[x])
        ini = case["initiator_text"]
        res = _OTHER[ini]
        # The messages on the wire, in the order of 11.2.
        assert [(x, m.hex()) for x, m in sent] == [
            (ini, case["commit"]), (res, case["key_r"]), (ini, case["key_i"]),
            (ini, case["proof_message_i"]), (res, case["proof_message_r"])]
        # Both sides reach the same SAS; each finds the other's tag right (10.1).
        for x in ("a", "b"):
            r = sessions[x].result
            assert (r.sas_value, r.sas_text) == (case["sas_value"], case["sas_text"])
            assert r.tag_outcome == P.VERIFIED
            assert r.expected_peer_dtag.hex() == case["dtag_r" if x == ini else "dtag_i"]
        _ov_recompute(case, seed, window, pids, esks, chals, ds, refs)
    assert seen_reference, "online-verify.json has a session whose PROOFs carry profile references"


def _ov_recompute(case, seed, window, pids, esks, chals, ds, refs, bindings=None):
    """The same fields again, from the formulas of 11.1 to 11.4 one by one (not through the
    session object); ``bindings``: each side's call binding cb (11.4; None: not bound)."""
    ini = case["initiator_text"]
    res = _OTHER[ini]
    bindings = bindings or {}
    # 11.4: bind = HMAC(seed, lv_cat("itsme-ov-binding-v1", u64(W), cb)), appended to the KEY.
    binds = {x: (None if bindings.get(x) is None else P.hmac_sha256(
        seed, P.lv_cat(b"itsme-ov-binding-v1", P.u64(window), bindings[x])))
        for x in ("a", "b")}
    for x in ("a", "b"):
        if binds[x] is not None:
            assert binds[x] == P.ov_bind(seed, window, bindings[x])
            assert binds[x].hex() == case[f"{x}_bind"] and len(binds[x]) == 32
        elif f"{x}_bind" in case:
            assert case[f"{x}_bind"] is None
    assert P.order_pids(pids["a"], pids["b"])[0] == pids[ini]
    room_input = P.lv_cat(b"itsme-room-id-v1", P.u64(window))
    assert room_input.hex() == case["room_input"]
    room = P.room_id(seed, window)
    assert room == P.hmac_sha256(seed, room_input)[:16]
    assert room.hex() == case["room"] and P.room_name(room) == case["room"]
    assert P.room_name(room) == P.hmac_sha256(seed, P.lv_cat(b"itsme-room-id-v1",
                                                             P.u64(window)))[:16].hex()
    epk = {x: P.x25519_public(esks[x]) for x in ("a", "b")}
    commit = P.commit_message(epk[ini], chals[ini])
    assert commit.hex() == case["commit"]
    assert commit == b"\x01\x01" + P.sha256(P.lv_cat(b"itsme-ov-commit-v1", epk[ini], chals[ini]))
    key_r = P.ov_key_message(epk[res], chals[res], binds[res])
    key_i = P.ov_key_message(epk[ini], chals[ini], binds[ini])
    assert key_r.hex() == case["key_r"] and key_i.hex() == case["key_i"]
    assert key_i == b"\x01\x02" + epk[ini] + chals[ini] + (binds[ini] or b"")
    assert key_r == b"\x01\x02" + epk[res] + chals[res] + (binds[res] or b"")
    # 11.2: a KEY is 66 bytes, or 98 in a session bound to a call.
    assert (len(key_i), len(key_r)) == tuple(66 if binds[x] is None else 98 for x in (ini, res))
    th_input = P.ov_th_input(room, window, pids[ini], pids[res], commit, key_r, key_i)
    assert th_input.hex() == case["th_input"]
    th = P.sha256(th_input)
    assert th.hex() == case["th"]
    salt = P.ov_salt(seed, th)
    assert salt.hex() == case["salt"]
    shared = P.x25519_shared(esks[ini], epk[res])
    assert shared == P.x25519_shared(esks[res], epk[ini])
    assert shared.hex() == case["shared"]
    k_i, k_r = P.ov_session_keys(salt, shared)
    assert k_i.hex() == case["k_i"] and k_r.hex() == case["k_r"]
    prk = P.hkdf_extract(salt, shared)
    assert prk.hex() == case["prk"]
    assert k_i == P.hkdf_expand(prk, P.lv_cat(b"itsme-ov-key-v1", b"initiator"), 32)
    proof_i, proof_r = P.ov_proof(seed, P.INITIATOR, th), P.ov_proof(seed, P.RESPONDER, th)
    assert proof_i.hex() == case["proof_i"] and proof_r.hex() == case["proof_r"]
    t = P.tag_key(seed)
    assert t.hex() == case["tag_key"]
    assert t == P.hkdf(seed, b"", b"itsme-device-tag-v1", 32)
    dtag_i = P.ov_device_tag(t, pids[ini], th, ds[ini])
    dtag_r = P.ov_device_tag(t, pids[res], th, ds[res])
    assert dtag_i.hex() == case["dtag_i"] and dtag_r.hex() == case["dtag_r"]
    ref_i, ref_r = refs.get(ini), refs.get(res)
    pm_i, pm_r = P.seal_proof(k_i, proof_i, dtag_i, ref_i), P.seal_proof(k_r, proof_r, dtag_r, ref_r)
    assert pm_i.hex() == case["proof_message_i"] and pm_r.hex() == case["proof_message_r"]
    # 11.3: the plaintext is proof || device tag [|| reference]: 64 or 96 bytes.
    for pm, ref in ((pm_i, ref_i), (pm_r, ref_r)):
        assert len(pm) == 2 + 64 + 16 + (0 if ref is None else 32)
    assert P.open_proof(pm_i, k_i) == (proof_i, dtag_i)
    assert P.open_proof(pm_r, k_r) == (proof_r, dtag_r)
    assert P.open_proof_with_reference(pm_i, k_i) == (proof_i, dtag_i, ref_i)
    assert P.open_proof_with_reference(pm_r, k_r) == (proof_r, dtag_r, ref_r)
    plain_i = P.ChaCha20Poly1305(k_i).decrypt(bytes(4) + P.u64(0), pm_i[2:], b"\x01\x03")
    assert plain_i == proof_i + dtag_i + (ref_i or b"")
    # 11.4: the state once the peer's PROOF is checked; the SAS of 4.1 only in compare_sas.
    if binds["a"] is None and binds["b"] is None:
        state = "compare_sas"
    elif binds["a"] is None or binds["b"] is None:
        state = "binding_differs"
    else:
        state = "compare_sas" if binds["a"] == binds["b"] else "other_call"
    assert state == case.get("state_text", "compare_sas")
    assert P.ov_binding_state(binds[ini], binds[res]) == P.ov_binding_state(
        binds[res], binds[ini]) == state
    if state == "compare_sas":
        assert P.sas_value(seed, th) == case["sas_value"]
        assert P.sas_text(seed, th) == case["sas_text"]
    else:
        assert "sas_value" not in case and "sas_text" not in case


_OV_BOUND_KEYS = _OV_SESSION_KEYS + " a_binding b_binding a_bind b_bind state_text"


@needs_vectors
def test_online_verify_bound_sessions():
    """online-verify.json's `bound_sessions` (11.4): both sides driven against each other
    through the messages, every value recomputed (the KEYs byte for byte, 98 bytes for a bound
    side, th over them whole, the PROOF messages), and the state both end in: compare_sas
    with the SAS, or binding_differs / other_call, final, with no SAS, nothing recorded, no
    profile, and every later message invalid_state."""
    states = []
    for case in _cases(load("online-verify.json"), "bound_sessions"):
        state = case["state_text"]
        states.append(state)
        keys = _OV_BOUND_KEYS if state == "compare_sas" else " ".join(
            k for k in _OV_BOUND_KEYS.split() if k not in ("sas_value", "sas_text"))
        expect_keys(case, keys)
        seed, window = h(case["seed"]), case["window"]
        ids, pids, esks, chals, ds, refs = _ov_case_inputs(case)
        assert refs == {}
        bindings = {x: None if case[f"{x}_binding"] is None else h(case[f"{x}_binding"])
                    for x in ("a", "b")}
        for cb in bindings.values():
            assert cb is None or P.CALL_BINDING_MIN <= len(cb) <= P.CALL_BINDING_MAX
        stored = {"a": ds["b"], "b": ds["a"]}
        sessions = _ov_sessions(seed, window, pids, esks, chals, ds, stored, bindings=bindings)
        sent, failures = _ov_run(sessions)
        assert failures == {}
        assert _ov_fields(sessions, seed, window, ids, esks, chals, ds, bound=True) == case
        ini = case["initiator_text"]
        res = _OTHER[ini]
        assert [(x, m.hex()) for x, m in sent] == [
            (ini, case["commit"]), (res, case["key_r"]), (ini, case["key_i"]),
            (ini, case["proof_message_i"]), (res, case["proof_message_r"])]
        _ov_recompute(case, seed, window, pids, esks, chals, ds, {}, bindings)
        # Both sides end in the state of the vector, each having checked the peer's proof and
        # device tag first (11.4: "once the peer's PROOF is checked ... never before").
        for x in ("a", "b"):
            side, r = sessions[x], sessions[x].result
            assert side.state == r.state == state and side.done and not side.failed
            assert r.tag_outcome == P.VERIFIED
            assert r.expected_peer_dtag.hex() == case["dtag_r" if x == ini else "dtag_i"]
            contact = P.ContactSecrets(ds[x], stored[x])
            if state == "compare_sas":
                assert (r.sas_value, r.sas_text) == (case["sas_value"], case["sas_text"])
                side.confirm_sas()
                assert side.peer_profile() is None
                assert P.ov_record(contact, r, True) == P.VERIFIED
                assert contact.state == P.VERIFIED
            else:
                # "Both end states are final and record nothing, show no SAS and offer no
                # profile; later messages are invalid_state."
                assert r.sas_value is None and r.sas_text is None
                with pytest.raises(P.InvalidState):
                    side.confirm_sas()
                with pytest.raises(P.InvalidState):
                    side.peer_profile()
                assert P.ov_record(contact, r, True) is None
                assert contact == P.ContactSecrets(ds[x], stored[x])
                for _, m in sent:
                    with pytest.raises(P.ProtocolError) as info:
                        side.receive(m)
                    assert P.result_code(info.value) == "invalid_state"
                    assert side.state == state and side.result is r and not side.failed
    assert sorted(states) == ["binding_differs", "compare_sas", "other_call"]
    by_state = {c["state_text"]: c for c in load("online-verify.json")["bound_sessions"]}
    # The README's cases: binding_differs with Alice bound and Bob not; other_call with each
    # bound to its own call; compare_sas with both bound to one call.
    differs = by_state["binding_differs"]
    assert differs["a_binding"] and differs["b_binding"] is None
    other = by_state["other_call"]
    assert other["a_binding"] and other["b_binding"] and other["a_binding"] != other["b_binding"]
    same = by_state["compare_sas"]
    assert same["a_binding"] == same["b_binding"] and same["a_bind"] == same["b_bind"]


_REPLAYED = {"encoding.json", "seed.json", "sas.json", "qr.json", "source-v5.json",
             "bluetooth.json", "voice.json", "online-verify.json", "pin-update.json",
             "remote.json", "export.json", "transfer.json", "reexchange.json"}
# Vector files this module does not replay yet, each with the reason.  A new file must be added
# to one of the two sets, so none goes unnoticed.
_NOT_REPLAYED: dict[str, str] = {
    "profile.json": "replayed by test_independent_18_19.py through independent/profile.py",
    "approval.json": "replayed by test_independent_18_19.py through independent/approval.py",
    "rollcall.json": "replayed by test_independent_rollcall.py through independent/rollcall.py",
}


@needs_vectors
def test_every_vector_file_is_replayed_or_listed():
    names = {p.name for p in VECTORS.glob("*.json")}
    assert _REPLAYED <= names
    assert names - _REPLAYED <= set(_NOT_REPLAYED), sorted(names - _REPLAYED)


# Own checks of section 11 --------------------------------------------------------------------

def _ov_random(rng: random.Random, short_pid: bool = False):
    """Random inputs of a session: seed, window, pids, ephemeral secrets, challenges, device
    secrets given and stored."""
    seed = rng.randbytes(32)
    window = 60_000_000 + rng.randrange(10**6)
    pids = {"a": rng.randbytes(32), "b": rng.randbytes(8 if short_pid else 32)}
    esks = {x: rng.randbytes(32) for x in "ab"}
    chals = {x: rng.randbytes(32) for x in "ab"}
    ds = {x: rng.randbytes(16) for x in "ab"}
    return seed, window, pids, esks, chals, ds, {"a": ds["b"], "b": ds["a"]}


def _ov_ids(pids):
    return {x: {"identity_seed": "", "pid": pids[x].hex(), "random_seed": "",
                "identity_random_seed": ""} for x in "ab"}


def test_online_verify_both_sides_agree():
    rng = random.Random(1101)
    sas_seen, initiators = set(), {"a": 0, "b": 0}
    for trial in range(300):
        seed, window, pids, esks, chals, ds, stored = _ov_random(rng, short_pid=trial % 4 == 3)
        sessions = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
        sent, failures = _ov_run(sessions, rng=rng)  # the PROOFs cross in either order
        assert failures == {}
        fields = _ov_fields(sessions, seed, window, _ov_ids(pids), esks, chals, ds)
        ra, rb = sessions["a"].result, sessions["b"].result
        assert ra.sas_text == rb.sas_text == P.format_short_code(ra.sas_value)
        assert ra.tag_outcome == rb.tag_outcome == P.VERIFIED
        assert [len(m) for _, m in sent] == [34, 66, 66, 82, 82]
        ini = fields["initiator_text"]
        initiators[ini] += 1
        assert P.order_pids(pids["a"], pids["b"])[0] == pids[ini]  # the lower pid
        sas_seen.add(ra.sas_value)
        # A new session (fresh keys and challenges) between the same two changes th and SAS.
        esks2 = {x: rng.randbytes(32) for x in "ab"}
        chals2 = {x: rng.randbytes(32) for x in "ab"}
        again = _ov_sessions(seed, window, pids, esks2, chals2, ds, stored)
        assert _ov_run(again)[1] == {}
        assert again["a"].result.th != ra.th and again["a"].result.room == ra.room
    assert len(sas_seen) >= 295
    assert min(initiators.values()) > 100


def test_online_verify_rooms():
    rng = random.Random(1111)
    for _ in range(200):
        seed = rng.randbytes(32)
        now = rng.randrange(1_700_000_000, 2_000_000_000)
        w = P.window_of(now)
        (w0, r0), (w1, r1) = P.rooms_to_join(seed, now)
        assert (w0, w1) == (w, w - 1)
        for win, name in ((w0, r0), (w1, r1)):
            assert len(name) == 32 and name == name.lower()
            assert bytes.fromhex(name) == P.room_id(seed, win)
        assert r0 != r1  # the name changes every 30 seconds ...
        assert P.room_id(rng.randbytes(32), w) != P.room_id(seed, w)  # ... and with the seed
        # Two people starting a few seconds apart across a boundary: the later one's second
        # room is the earlier one's first.
        start = 30 * w + 30 - rng.randrange(1, 10)
        later = 30 * (w + 1) + rng.randrange(0, 10)
        assert P.window_of(later) == P.window_of(start) + 1
        assert P.rooms_to_join(seed, later)[1] == P.rooms_to_join(seed, start)[0]
    with pytest.raises(ValueError):
        P.room_name(bytes(15))


def _flips(message: bytes):
    for i in range(len(message)):
        for mask in (0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xFF):
            changed = bytearray(message)
            changed[i] ^= mask
            yield bytes(changed)
    for n in range(len(message)):
        yield message[:n]
    yield message + b"\x00"


def test_online_verify_rejects_every_flipped_byte():
    seed, window, pids, esks, chals, ds, stored = _ov_random(random.Random(1102))
    clean = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
    sent, failures = _ov_run(clean)
    assert failures == {} and len(sent) == 5
    runs = 0
    for index, (sender, message) in enumerate(sent):
        receiver = _OTHER[sender]
        for changed in _flips(message):
            sessions = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
            _, failures = _ov_run(sessions, lambda i, m: changed if i == index else m)
            # The receiver of the changed message ends failed, with no result and no SAS.
            assert receiver in failures, (index, changed.hex())
            assert sessions[receiver].result is None and sessions[receiver].failed
            runs += 1
    assert runs > 2500


def test_online_verify_rejects_reflected_and_own_keys():
    seed, window, pids, esks, chals, ds, stored = _ov_random(random.Random(1103))
    ini_x = "a" if pids["a"] < pids["b"] else "b"
    res_x = _OTHER[ini_x]

    def fresh():
        s = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
        return s[ini_x], s[res_x]

    # The initiator gets its own KEY back (reflected), or a KEY echoing its eph or its chal.
    ini, res = fresh()
    ini.start()
    own_eph, own_chal = ini.ephemeral_pk, ini.challenge
    other_eph, other_chal = P.x25519_public(bytes([7]) * 32), bytes([8]) * 32
    for body in (own_eph + own_chal, own_eph + other_chal, other_eph + own_chal):
        ini, _ = fresh()
        ini.start()
        with pytest.raises(P.ProtocolError, match="reflected"):
            ini.receive(P.ov_message(P.OV_KEY, body))
        assert ini.failed and ini.result is None
    ini, _ = fresh()
    ini.start()
    ini.receive(P.ov_message(P.OV_KEY, other_eph + other_chal))  # an unrelated KEY passes here
    # The responder gets its own KEY_R back as KEY_I: refused, even with a COMMIT that it
    # opens (so the reflection check, not the commitment, refuses it).
    ini, res = fresh()
    res.start()
    key_r = res.receive(ini.start()[0])[0]
    with pytest.raises(P.ProtocolError):
        res.receive(key_r)
    _, res = fresh()
    res.start()
    key_r = res.receive(P.commit_message(res.ephemeral_pk, res.challenge))[0]
    assert key_r == res.key_message
    with pytest.raises(P.ProtocolError, match="reflected"):
        res.receive(key_r)
    for body in (res.ephemeral_pk + other_chal, other_eph + res.challenge):
        _, res = fresh()
        res.start()
        res.receive(P.commit_message(body[:32], body[32:]))
        with pytest.raises(P.ProtocolError, match="reflected"):
            res.receive(P.ov_message(P.OV_KEY, body))
    # A KEY that does not open the COMMIT, and low-order keys (all-zero shared secret).
    ini, res = fresh()
    res.start()
    res.receive(ini.start()[0])
    with pytest.raises(P.ProtocolError, match="COMMIT"):
        res.receive(P.ov_message(P.OV_KEY, other_eph + other_chal))
    for low in (bytes(32), b"\x01" + bytes(31)):
        ini, _ = fresh()
        ini.start()
        with pytest.raises(P.ProtocolError, match="zero"):
            ini.receive(P.ov_message(P.OV_KEY, low + other_chal))
        _, res = fresh()
        res.start()
        res.receive(P.commit_message(low, other_chal))
        with pytest.raises(P.ProtocolError, match="zero"):
            res.receive(P.ov_message(P.OV_KEY, low + other_chal))


def test_online_verify_rejects_proofs_of_other_sessions_and_roles():
    rng = random.Random(1104)
    for _ in range(20):
        seed, window, pids, esks, chals, ds, stored = _ov_random(rng)
        one = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
        sent_one, failures = _ov_run(one)
        assert failures == {}
        # Another session of the same two people, same window, fresh keys and challenges.
        esks2 = {x: rng.randbytes(32) for x in "ab"}
        chals2 = {x: rng.randbytes(32) for x in "ab"}
        two = _ov_sessions(seed, window, pids, esks2, chals2, ds, stored)
        sent_two, failures = _ov_run(two)
        assert failures == {}
        ini_x = next(x for x in "ab" if one[x].role == P.INITIATOR)
        res_x = _OTHER[ini_x]
        r1, r2 = one[ini_x].result, two[ini_x].result
        # Replaying session two's PROOF into session one, on either side.
        for receiver, replay in ((ini_x, r2.proof_message_r), (res_x, r2.proof_message_i)):
            s = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
            _, failures = _ov_run(s, lambda i, m: replay if m[1] == P.OV_PROOF
                                  and i == (4 if receiver == ini_x else 3) else m)
            assert receiver in failures and s[receiver].result is None
        # Session two's proof and tag, sealed under session one's own keys: the proof is
        # wrong for this th.  Also the proof of the receiver's own role (a reflection).
        for receiver, key, proof, dtag in (
                (ini_x, r1.k_r, r2.proof_r, r2.dtag_r), (res_x, r1.k_i, r2.proof_i, r2.dtag_i),
                (ini_x, r1.k_r, r1.proof_i, r1.dtag_r), (res_x, r1.k_i, r1.proof_r, r1.dtag_i)):
            forged = P.seal_proof(key, proof, dtag)
            index = 4 if receiver == ini_x else 3
            s = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
            _, failures = _ov_run(s, lambda i, m: forged if i == index else m)
            assert receiver in failures and "proof is wrong" in str(failures[receiver])
        # A side's own PROOF sent back to it does not even decrypt (the other role's key).
        s = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
        _, failures = _ov_run(s, lambda i, m: sent_one[3][1] if i == 4 else m)
        assert ini_x in failures and "decrypt" in str(failures[ini_x])
        # The whole initiator side of session one replayed to a new responder: its KEY_R and
        # so th are new; the old PROOF fails.
        esk_new, chal_new = rng.randbytes(32), rng.randbytes(32)
        res_new = P.OnlineVerifySession(seed, window, pids[res_x], pids[ini_x], esk_new,
                                        chal_new, ds[res_x], stored[res_x])
        res_new.start()
        res_new.receive(r1.commit)
        res_new.receive(r1.key_i)
        with pytest.raises(P.ProtocolError):
            res_new.receive(r1.proof_message_i)


def test_online_verify_needs_the_seed():
    rng = random.Random(1105)
    for _ in range(30):
        seed, window, pids, esks, chals, ds, stored = _ov_random(rng)
        ini_x = "a" if pids["a"] < pids["b"] else "b"
        for impostor in "ab":
            # The impostor has the pids, the window and even the honest side's device secret,
            # but a wrong seed.  The honest side refuses its PROOF.
            s = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
            s[impostor] = P.OnlineVerifySession(
                rng.randbytes(32), window, pids[impostor], pids[_OTHER[impostor]],
                esks[impostor], chals[impostor], ds[impostor], stored[impostor])
            _, failures = _ov_run(s, rng=rng)
            honest = _OTHER[impostor]
            assert honest in failures and s[honest].result is None
        # Even one handed both session keys (the salt needs the seed) cannot make a proof:
        # every proof it can compute without the seed is refused.
        honest_run = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
        assert _ov_run(honest_run)[1] == {}
        r = honest_run[ini_x].result
        t_wrong = P.tag_key(rng.randbytes(32))
        for guess_seed in (rng.randbytes(32), r.th, r.salt, r.k_r, bytes(32)):
            forged = P.seal_proof(r.k_r, P.ov_proof(guess_seed, P.RESPONDER, r.th),
                                  P.ov_device_tag(t_wrong, pids[_OTHER[ini_x]], r.th, None))
            s = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
            _, failures = _ov_run(s, lambda i, m: forged if i == 4 else m)
            assert ini_x in failures and "proof is wrong" in str(failures[ini_x])
        # A relay that substitutes the responder's KEY with its own: the initiator's th and
        # keys differ from the responder's, so the honest PROOFs it forwards are refused on
        # both sides.  (It cannot substitute the initiator's KEY: the COMMIT binds it.)
        relay_eph = P.x25519_public(rng.randbytes(32))
        s = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
        _, failures = _ov_run(s, lambda i, m: (P.ov_message(P.OV_KEY, relay_eph + m[34:])
                                               if i == 1 else m))
        assert set(failures) == {"a", "b"}


def test_online_verify_device_secret_changes_only_the_tag_outcome():
    rng = random.Random(1106)
    changed_dtags = 0
    for trial in range(100):
        seed, window, pids, esks, chals, ds, stored = _ov_random(rng, short_pid=trial % 5 == 4)
        base = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
        assert _ov_run(base)[1] == {}
        base_fields = _ov_fields(base, seed, window, _ov_ids(pids), esks, chals, ds)
        for changer in "ab":
            role = "i" if base[changer].role == P.INITIATOR else "r"
            listener = _OTHER[changer]
            # The changer now gives another device secret (or none: a new device); the
            # listener still holds the old one.
            for new in (rng.randbytes(16), None, rng.randbytes(10)):
                ds2 = dict(ds, **{changer: new})
                s = _ov_sessions(seed, window, pids, esks, chals, ds2, stored)
                assert _ov_run(s)[1] == {}
                fields = _ov_fields(s, seed, window, _ov_ids(pids), esks, chals, ds2)
                diff = {k for k in fields if fields[k] != base_fields[k]}
                assert diff == {changer, f"dtag_{role}", f"proof_message_{role}"}, diff
                assert {k for k in fields[changer]
                        if fields[changer][k] != base_fields[changer][k]} == {"device_secret"}
                changed_dtags += 1
                assert s[listener].result.tag_outcome == P.VERIFIED_DEVICE_CHANGED
                assert s[changer].result.tag_outcome == P.VERIFIED
                assert s[listener].result.sas_text == base[listener].result.sas_text
                # Confirming records it as 10.1 does: degraded, not acknowledged.
                for state in P.CONTACT_STATES:
                    assert P.ov_confirmed_state(s[listener].result.tag_outcome,
                                                state) == P.DEGRADED
                    assert P.ov_confirmed_state(s[changer].result.tag_outcome, state) == (
                        state if state in (P.DEGRADED, P.DEGRADED_ACKNOWLEDGED) else P.VERIFIED)
        # A listener that holds no device secret for the other checks no tag.
        s = _ov_sessions(seed, window, pids, esks, chals, ds, dict(stored, a=None))
        assert _ov_run(s)[1] == {}
        assert s["a"].result.tag_outcome == P.VERIFIED_TAG_UNCHECKED
        assert s["a"].result.expected_peer_dtag is None
        assert s["b"].result.tag_outcome == P.VERIFIED
        assert _ov_fields(s, seed, window, _ov_ids(pids), esks, chals, ds) == base_fields
        assert P.ov_confirmed_state(P.VERIFIED_TAG_UNCHECKED, P.UNVERIFIED) == P.VERIFIED
    assert changed_dtags == 600
    # A device holding no secret uses the empty string (10.1).
    t, pid, th = bytes([1]) * 32, bytes([2]) * 32, bytes([3]) * 32
    assert P.ov_device_tag(t, pid, th, None) == P.ov_device_tag(t, pid, th, b"")
    assert P.ov_device_tag(t, pid, th, None) == P.hmac_sha256(
        t, P.lv_cat(b"itsme-ov-device-v1", pid, th, b""))
    with pytest.raises(ValueError):
        P.ov_confirmed_state("failed", P.VERIFIED)


def test_online_verify_message_order_type_version_length():
    seed, window, pids, esks, chals, ds, stored = _ov_random(random.Random(1107))
    clean = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
    sent, failures = _ov_run(clean)
    assert failures == {}
    commit, key_r, key_i, proof_i, proof_r = (m for _, m in sent)
    ini_x = next(x for x in "ab" if clean[x].role == P.INITIATOR)

    def fresh():
        s = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
        return s[ini_x], s[_OTHER[ini_x]]

    def fails(session, *messages):
        for m in messages[:-1]:
            session.receive(m)
        with pytest.raises(P.ProtocolError):
            session.receive(messages[-1])
        assert session.failed and session.result is None
        with pytest.raises(P.ProtocolError):  # a failed session stays failed
            session.receive(messages[0])

    def refused_after_both_proofs(session, *messages):
        """11.2: "Once both PROOFs are in, further messages are refused without ending the
        session": each is refused, and the result (outcome and SAS) stays."""
        result = session.result
        assert result is not None
        for m in messages:
            with pytest.raises(P.ProtocolError, match="refused"):
                session.receive(m)
            assert not session.failed and session.done and session.result is result

    # The initiator: expects KEY_R, then PROOF_R; never a COMMIT.
    for bad in ([commit], [proof_r], [key_r, key_r], [key_r, commit], [key_r, key_i]):
        ini, _ = fresh()
        ini.start()
        fails(ini, *bad)
    ini, _ = fresh()
    ini.start()
    ini.receive(key_r)
    ini.receive(proof_r)
    assert ini.done
    refused_after_both_proofs(ini, proof_r, key_r, commit, proof_i, b"", b"\x02" + proof_r[1:])
    # The responder: expects COMMIT, then KEY_I, then PROOF_I.
    for bad in ([key_i], [proof_i], [commit, commit], [commit, proof_i],
                [commit, key_i, key_i], [commit, key_i, commit]):
        _, res = fresh()
        res.start()
        fails(res, *bad)
    _, res = fresh()
    res.start()
    res.receive(commit)
    res.receive(key_i)
    res.receive(proof_i)
    assert res.done
    refused_after_both_proofs(res, proof_i, commit, key_i, proof_r, proof_i[:-1])
    # Nothing is taken before start().
    _, res = fresh()
    with pytest.raises(P.ProtocolError):
        res.receive(commit)
    # Another version, another type, the wrong length.
    for m in (b"\x02" + commit[1:], b"\x00" + commit[1:], commit[:1] + b"\x00" + commit[2:],
              commit[:1] + b"\x04" + commit[2:], commit[:-1], commit + b"\x00", b"", b"\x01"):
        _, res = fresh()
        res.start()
        fails(res, m)
    assert P.parse_ov_message(commit, P.OV_COMMIT) == commit[2:]
    assert {len(commit), len(key_r), len(key_i), len(proof_i), len(proof_r)} == {34, 66, 82}
    with pytest.raises(ValueError):
        P.ov_message(P.OV_KEY, bytes(63))
    # Roles follow the pids; equal pids never meet.
    with pytest.raises(P.ProtocolError):
        P.ov_role(pids["a"], pids["a"])
    assert P.ov_role(b"\x01" * 8, b"\x01" * 8 + b"\x00") == P.INITIATOR  # a prefix sorts first


def test_online_verify_profile_references():
    """11.3, "A profile reference in the PROOF": either side, both or neither may append one;
    the plaintext is then 96 bytes and the message 114; it is decided before the PROOF is
    sent; the receiver reads it only after the proof and the device tag are checked, and
    offers it only once the SAS is confirmed; a PROOF of any other length is malformed."""
    rng = random.Random(1109)
    for trial in range(40):
        seed, window, pids, esks, chals, ds, stored = _ov_random(rng, short_pid=trial % 4 == 3)
        refs = {x: rng.randbytes(32) for x in "ab" if rng.random() < 0.6}
        sessions = _ov_sessions(seed, window, pids, esks, chals, ds, stored, refs=refs)
        sent, failures = _ov_run(sessions, rng=rng)
        assert failures == {}
        proofs = {x: m for x, m in sent if m[1] == P.OV_PROOF}
        for x in "ab":
            assert len(proofs[x]) == (114 if x in refs else 82)
            with pytest.raises(P.ProtocolError):
                sessions[x].peer_profile()  # not before the SAS is confirmed
            sessions[x].confirm_sas()
            assert sessions[x].peer_profile() == refs.get(_OTHER[x])
            # Too late to share: the PROOF is out (11.3: "a reference offered later is
            # invalid_state, one of another length than 32 bytes invalid_argument").
            with pytest.raises(P.InvalidState):
                sessions[x].share_profile(bytes(32))
            with pytest.raises(P.InvalidArgument):
                sessions[x].share_profile(bytes(31))
        # The same session without references: the same th and SAS, the same proof and tag.
        plain = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
        assert _ov_run(plain)[1] == {}
        for x in "ab":
            assert plain[x].result.sas_text == sessions[x].result.sas_text
            assert plain[x].result.th == sessions[x].result.th
            assert plain[x].result.dtag_i == sessions[x].result.dtag_i
    # Before the PROOF: a reference of another length than 32 bytes is invalid_argument and
    # changes nothing; one of 32 bytes is taken.
    fresh = _ov_sessions(seed, window, pids, esks, chals, ds, stored)["a"]
    for n in (0, 31, 33):
        with pytest.raises(P.InvalidArgument):
            fresh.share_profile(bytes(n))
        assert fresh.profile_reference is None
    fresh.share_profile(bytes(range(32)))
    assert fresh.profile_reference == bytes(range(32))
    # A PROOF whose plaintext has another length (a reference of 16 or 48 bytes, a device tag
    # alone) is malformed, even though it decrypts under the right key.
    seed, window, pids, esks, chals, ds, stored = _ov_random(random.Random(1110))
    s = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
    ini_x = next(x for x in "ab" if s[x].role == P.INITIATOR)
    sent, _ = _ov_run(s)
    r = s[ini_x].result
    for extra in (16, 31, 33, 48):
        header = b"\x01\x03"
        body = P.ChaCha20Poly1305(r.k_r).encrypt(bytes(4) + P.u64(0), r.proof_r + r.dtag_r + bytes(extra), header)
        fresh = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
        fresh[ini_x].start()
        fresh[ini_x].receive(sent[1][1])  # KEY_R
        with pytest.raises(P.ProtocolError, match="length"):
            fresh[ini_x].receive(header + body)
        assert fresh[ini_x].failed
    with pytest.raises(ValueError):
        P.seal_proof(r.k_r, r.proof_r, r.dtag_r, bytes(31))
    # A reference behind a wrong proof is never read: the session fails.
    fresh = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
    fresh[ini_x].start()
    fresh[ini_x].receive(sent[1][1])
    forged = P.seal_proof(r.k_r, bytes(32), r.dtag_r, bytes(range(32)))
    with pytest.raises(P.ProtocolError, match="proof"):
        fresh[ini_x].receive(forged)
    assert fresh[ini_x].result is None
    with pytest.raises(P.ProtocolError):
        fresh[ini_x].confirm_sas()


def test_online_verify_session_lifetime():
    seed, window, pids, esks, chals, ds, stored = _ov_random(random.Random(1108))
    created = 1_800_000_000
    # 11.3: "A session that has not ended ... expires more than 600 seconds after its
    # creation".
    assert not P.ov_session_expired(created, created + 599)
    assert not P.ov_session_expired(created, created + 600)
    assert P.ov_session_expired(created, created + 601)
    for late, ok in ((599, True), (600, True), (601, False)):
        s = _ov_sessions(seed, window, pids, esks, chals, ds, stored, created_at=created)
        ini_x = next(x for x in "ab" if s[x].role == P.INITIATOR)
        res = s[_OTHER[ini_x]]
        res.start()
        commit = s[ini_x].start()[0]
        if ok:
            res.receive(commit, now=created + late)
        else:
            with pytest.raises(P.ProtocolError):
                res.receive(commit, now=created + late)
            assert res.failed


def test_online_verify_ended_sessions_do_not_expire():
    """11.3: "A session that has not ended (its messages running, or its SAS compared) expires
    more than 600 seconds after its creation: a message or a confirmation later than that is
    expired (checked first: before the message is read, before the state is looked at) and
    ends it as failed.  Once it has ended
    (confirmed, rejected, failed, or in an end state of 11.4), a later message, confirmation
    or rejection is invalid_state, at any time."  Each ended state is played with messages,
    confirmations and rejections before and after the 600 seconds: invalid_state, the state
    unchanged.  A session not ended: a message, or a confirmation, at 600 seconds is taken, at
    601 it is expired and ends the session as failed (which then records nothing and refuses
    what follows as an ended one)."""
    rng = random.Random(1109)
    created = 1_800_000_000
    times = (None, created, created + 10, created + 600, created + 601, created + 86_400)

    def session(bindings=None):
        seed, window, pids, esks, chals, ds, stored = _ov_random(rng)
        s = _ov_sessions(seed, window, pids, esks, chals, ds, stored, created_at=created,
                         bindings=bindings)
        sent, failures = _ov_run(s)
        assert failures == {}
        return s, [m for _, m in sent], (seed, window, pids, esks, chals, ds, stored)

    def failed_session():
        # A wrong proof (a PROOF of another session's keys) fails the receiving side.
        s, sent, (seed, window, pids, esks, chals, ds, stored) = session()
        fresh = _ov_sessions(seed, window, pids, esks, chals, ds, stored, created_at=created)
        ini_x = next(x for x in "ab" if fresh[x].role == P.INITIATOR)
        fresh[ini_x].start()
        fresh[ini_x].receive(sent[1], now=created + 5)  # KEY_R
        with pytest.raises(P.ProtocolError):
            fresh[ini_x].receive(bytes([1, P.OV_PROOF]) + bytes(80), now=created + 6)
        return fresh[ini_x], sent

    def malformed_session():
        s, sent, (seed, window, pids, esks, chals, ds, stored) = session()
        fresh = _ov_sessions(seed, window, pids, esks, chals, ds, stored, created_at=created)
        res_x = next(x for x in "ab" if fresh[x].role == P.RESPONDER)
        fresh[res_x].start()
        with pytest.raises(P.ProtocolError) as info:
            fresh[res_x].receive(sent[0][:-1], now=created + 5)
        assert P.result_code(info.value) == "malformed_message"
        return fresh[res_x], sent

    ended = []
    for decide, state in (("confirm", "confirmed"), ("reject", "rejected")):
        for when in (created + 1, created + 600):
            s, sent, _ = session()
            for x in "ab":
                if decide == "confirm":
                    s[x].confirm_sas(now=when)
                else:
                    s[x].reject_sas()
                ended.append((s[x], state, sent))
    # A rejection is taken after the 600 seconds too (11.3 expires "a message or a
    # confirmation"); the session ends rejected either way and records nothing.
    s, sent, _ = session()
    for x in "ab":
        s[x].reject_sas()
        ended.append((s[x], "rejected", sent))
    for side, sent in (failed_session(), malformed_session()):
        ended.append((side, "failed", sent))
    for bindings, state in (({"a": rng.randbytes(32)}, "binding_differs"),
                            ({"a": rng.randbytes(32), "b": rng.randbytes(32)}, "other_call")):
        s, sent, _ = session(bindings)
        for x in "ab":
            ended.append((s[x], state, sent))
    assert {state for _, state, _ in ended} == {"confirmed", "rejected", "failed",
                                                 "binding_differs", "other_call"}
    for side, state, sent in ended:
        assert side.ended and side.state == state
        result, confirmed = side.result, side.sas_confirmed
        for m in sent + [b"", bytes([1, P.OV_KEY]) + bytes(64), bytes(200)]:
            for now in times:
                with pytest.raises(P.ProtocolError) as info:
                    side.receive(m, now=now)
                assert P.result_code(info.value) == "invalid_state", (state, now)
                assert side.state == state and side.result is result and side.ended
        # Nor can the SAS be decided on again, at any time.
        for now in times:
            with pytest.raises(P.InvalidState):
                side.confirm_sas(now=now)
            with pytest.raises(P.InvalidState):
                side.reject_sas()
            assert side.state == state and side.sas_confirmed == confirmed
        if state == "confirmed":
            side.peer_profile()  # the confirmed session's profile is still offered
        else:
            with pytest.raises(P.InvalidState):
                side.peer_profile()

    # Not ended, the SAS compared: a message at 600 seconds is invalid_state without ending
    # it (11.2), at 601 expired, ending it; so is a confirmation at 601.
    s, sent, _ = session()
    for x in "ab":
        side = s[x]
        assert side.state == "compare_sas" and not side.ended
        with pytest.raises(P.ProtocolError) as info:
            side.receive(sent[-1], now=created + 600)
        assert P.result_code(info.value) == "invalid_state"
        assert side.state == "compare_sas" and not side.ended
    with pytest.raises(P.ProtocolError) as info:
        s["a"].receive(sent[-1], now=created + 601)
    assert P.result_code(info.value) == "expired"
    with pytest.raises(P.ProtocolError) as info:
        s["b"].confirm_sas(now=created + 601)
    assert P.result_code(info.value) == "expired"
    for x in "ab":
        side = s[x]
        assert side.state == "failed" and side.ended and side.result is None
        assert not side.sas_confirmed
        for now in times:
            with pytest.raises(P.ProtocolError) as info:
                side.receive(sent[-1], now=now)
            assert P.result_code(info.value) == "invalid_state"
        with pytest.raises(P.InvalidState):
            side.confirm_sas(now=created + 1)
        with pytest.raises(P.InvalidState):
            side.reject_sas()
        assert side.state == "failed"
    # Not ended, its messages running: a message at 600 seconds is taken, one at 601 expired.
    for late, code in ((600, None), (601, "expired")):
        _, sent, (seed, window, pids, esks, chals, ds, stored) = session()
        fresh = _ov_sessions(seed, window, pids, esks, chals, ds, stored, created_at=created)
        ini_x = next(x for x in "ab" if fresh[x].role == P.INITIATOR)
        fresh[ini_x].start()
        if code is None:
            fresh[ini_x].receive(sent[1], now=created + late)
            assert fresh[ini_x].state == "running" and not fresh[ini_x].ended
        else:
            with pytest.raises(P.ProtocolError) as info:
                fresh[ini_x].receive(sent[1], now=created + late)
            assert P.result_code(info.value) == code
            assert fresh[ini_x].state == "failed" and fresh[ini_x].ended


def _ov_steps(s):
    """The deliveries of one session, in the order of 11.2 (COMMIT, KEY_R, KEY_I and the
    initiator's PROOF, then the responder's PROOF), as (receiver, message) once each is sent:
    a generator driven one delivery at a time, so that a test may stop after any of them."""
    ini = next(x for x in "ab" if s[x].role == P.INITIATOR)
    res = _OTHER[ini]
    commit = s[ini].start()[0]
    assert s[res].start() == []
    key_r = yield res, commit
    key_i, proof_i = yield ini, key_r[0]
    (proof_r,) = yield res, key_i
    yield res, proof_i
    yield ini, proof_r


def _ov_play(s, stop, now=None):
    """Deliver the first ``stop`` messages of ``_ov_steps`` (at ``now``); returns the next
    delivery (a list of one (receiver, message), empty once all are made) and the generator,
    to go on with ``steps.send(answer)``."""
    steps = _ov_steps(s)
    pending = [next(steps)]
    made = 0
    while made < stop:
        dst, m = pending.pop(0)
        out = s[dst].receive(m, now=now)
        made += 1
        try:
            pending.append(steps.send(out))
        except StopIteration:
            pass
    return pending, steps


def _assert_everything_refused(side, messages, times, stop):
    """11.3: once a session has ended, "a later message, confirmation or
    rejection is `invalid_state`, at any time" (and so is starting it or
    offering or reading a profile), and its state stays."""
    state = side.state
    for m in messages:
        for now in times:
            with pytest.raises(P.ProtocolError) as info:
                side.receive(m, now=now)
            assert P.result_code(info.value) == "invalid_state", (stop, now)
            assert side.state == state
    for now in times:
        with pytest.raises(P.InvalidState):
            side.confirm_sas(now=now)
        with pytest.raises(P.InvalidState):
            side.reject_sas()
    with pytest.raises(P.InvalidState):
        side.start()
    with pytest.raises(P.InvalidState):
        side.share_profile(bytes(32))
    with pytest.raises(P.InvalidState):
        side.peer_profile()
    assert side.state == state


def test_online_verify_rejected_before_the_proof():
    """11.3: "A session that has not ended (its messages running, or its SAS compared) may be
    rejected at any time (the SAS differs, or the host gives up), which ends it; ... rejecting
    the SAS, or a failed session, changes nothing"; "Once it has ended (confirmed, rejected,
    ...), a later message, confirmation or rejection is invalid_state, at any time".  Each side
    gives up at every point before the peer's PROOF is in (not started, and after each message
    it took): the session ends rejected with no result, and every later message (the peer's
    next one, its PROOF, one malformed, one past 600 seconds), confirmation, rejection, start
    or profile reference is invalid_state, the state unchanged; nothing is recorded.  The peer
    is not told (nothing is sent) and runs on.  Before that, at each of those points:
    "Confirming before the peer's PROOF is in (within the 600 seconds) is invalid_state and
    changes nothing"; past the 600 seconds the same confirmation is expired ("checked first:
    ... before the state is looked at") and ends the session as failed, with no result,
    nothing recorded, everything later invalid_state."""
    rng = random.Random(1110)
    created = 1_800_000_000
    times = (None, created, created + 10, created + 600, created + 601, created + 86_400)
    within = (None, created, created + 10, created + 600)
    rejected_at = set()
    expired_at = set()
    for trial in range(12):
        seed, window, pids, esks, chals, ds, stored = _ov_random(rng, short_pid=trial % 3 == 2)
        # Full run first, for every message of the session.
        whole = _ov_sessions(seed, window, pids, esks, chals, ds, stored, created_at=created)
        sent, failures = _ov_run(whole)
        assert failures == {}
        messages = [m for _, m in sent]
        ini = next(x for x in "ab" if whole[x].role == P.INITIATOR)
        # The peer's PROOF is in for the responder after 4 deliveries, for the initiator after
        # 5; before that, a side has taken 0, 1, 2 or 3 (responder) or up to 4 (initiator).
        for x in "ab":
            last = 4 if x == ini else 3
            for stop in range(-1, last + 1):  # -1: rejected before start()
                s = _ov_sessions(seed, window, pids, esks, chals, ds, stored,
                                 created_at=created)
                if stop >= 0:
                    rest, _ = _ov_play(s, stop, now=created + 5)
                side, peer = s[x], s[_OTHER[x]]
                assert side.state == "running" and not side.ended and not side.done
                # Confirming before the peer's PROOF (within the 600 seconds) is invalid_state
                # and changes nothing.
                for now in within:
                    with pytest.raises(P.ProtocolError) as info:
                        side.confirm_sas(now=now)
                    assert P.result_code(info.value) == "invalid_state", (stop, now)
                    assert side.state == "running" and not side.ended
                # Past them, the same confirmation is expired and fails the session (on a
                # copy played to the same point).
                for late in (created + 601, created + 86_400):
                    e = _ov_sessions(seed, window, pids, esks, chals, ds, stored,
                                     created_at=created)
                    if stop >= 0:
                        _ov_play(e, stop, now=created + 5)
                    e_side, e_peer = e[x], e[_OTHER[x]]
                    assert e_side.state == "running" and not e_side.done
                    e_peer_state = e_peer.state
                    with pytest.raises(P.ProtocolError) as info:
                        e_side.confirm_sas(now=late)
                    assert P.result_code(info.value) == "expired", (stop, late)
                    expired_at.add((x == ini, stop))
                    assert e_side.state == "failed" and e_side.ended and e_side.failed
                    assert e_side.result is None and not e_side.sas_confirmed
                    assert e_peer.state == e_peer_state  # the peer is told nothing
                    _assert_everything_refused(e_side, messages, times, stop)
                    assert e_side.state == "failed"
                    contact = P.ContactSecrets(ds[x], stored[x])
                    assert P.ov_record(contact, e_side.result, False) is None
                    assert contact == P.ContactSecrets(ds[x], stored[x])
                peer_state = peer.state
                side.reject_sas()
                rejected_at.add((x == ini, stop))
                assert side.state == "rejected" and side.ended and side.result is None
                assert not side.failed and not side.sas_confirmed
                assert peer.state == peer_state  # the peer is told nothing
                _assert_everything_refused(side, messages + [b"", bytes([1, P.OV_KEY]) + bytes(64), bytes(200)], times, stop)
                assert side.state == "rejected" and side.ended and not side.failed and side.result is None
                contact = P.ContactSecrets(ds[x], stored[x])
                assert P.ov_record(contact, side.result, False) is None
                assert contact == P.ContactSecrets(ds[x], stored[x])
    assert len(rejected_at) == 6 + 5
    assert expired_at == rejected_at


def test_online_verify_rejected_at_any_time():
    """11.3: a session not ended "may be rejected at any time", and it is "a message or a
    confirmation" later than 600 seconds that is expired, not a rejection: a session whose
    messages ran (a message at 600 seconds taken), or whose SAS is compared, is rejected past
    the 600 seconds, ending it rejected, not failed; a message or confirmation later is then
    invalid_state, not expired.  And a confirmation before the peer's PROOF is in is
    invalid_state within the 600 seconds, without ending the session (confirming once the SAS
    is compared still works after such a refusal); past them it is expired ("checked first:
    ... before the state is looked at") and ends the session as failed, after which a message
    is invalid_state (not expired) and so is a rejection."""
    rng = random.Random(1112)
    created = 1_800_000_000
    seed, window, pids, esks, chals, ds, stored = _ov_random(rng)
    # Running, a message taken at 600 seconds, rejected later (the host gives up).
    s = _ov_sessions(seed, window, pids, esks, chals, ds, stored, created_at=created)
    rest, _ = _ov_play(s, 2, now=created + 600)
    (dst, m), = rest
    s[dst].reject_sas()
    assert s[dst].state == "rejected"
    for now in (created + 600, created + 601):
        with pytest.raises(P.ProtocolError) as info:
            s[dst].receive(m, now=now)
        assert P.result_code(info.value) == "invalid_state"
        with pytest.raises(P.ProtocolError) as info:
            s[dst].confirm_sas(now=now)
        assert P.result_code(info.value) == "invalid_state"
    assert s[dst].state == "rejected" and not s[dst].failed
    # The SAS compared, past 600 seconds: rejected, not failed.
    s = _ov_sessions(seed, window, pids, esks, chals, ds, stored, created_at=created)
    assert _ov_run(s)[1] == {}
    for x in "ab":
        assert s[x].state == "compare_sas"
        s[x].reject_sas()
        assert s[x].state == "rejected" and not s[x].failed and s[x].result is not None
        with pytest.raises(P.ProtocolError) as info:
            s[x].confirm_sas(now=created + 601)
        assert P.result_code(info.value) == "invalid_state"
        assert P.ov_record(P.ContactSecrets(ds[x], stored[x]), s[x].result,
                           s[x].sas_confirmed) is None
    # A confirmation before the PROOF is refused, the session runs on and is confirmed.
    s = _ov_sessions(seed, window, pids, esks, chals, ds, stored, created_at=created)
    rest, steps = _ov_play(s, 3, now=created + 5)
    for x in "ab":
        with pytest.raises(P.ProtocolError) as info:
            s[x].confirm_sas(now=created + 5)
        assert P.result_code(info.value) == "invalid_state"
        assert s[x].state == "running" and not s[x].ended
    (dst, m), = rest
    out = s[dst].receive(m, now=created + 6)
    dst, m = steps.send(out)
    assert s[dst].receive(m, now=created + 6) == []
    for x in "ab":
        assert s[x].state == "compare_sas"
        s[x].confirm_sas(now=created + 7)
        assert s[x].state == "confirmed"
        contact = P.ContactSecrets(ds[x], stored[x])
        assert P.ov_record(contact, s[x].result, True) == P.VERIFIED
    # Within 600 seconds (at 600), a confirmation before the PROOF is invalid_state and
    # changes nothing; at 601 it is expired, checked before the state is looked at, and fails
    # the session; the next message is then invalid_state (the session has ended, it does
    # not expire again), and so is a rejection.
    s = _ov_sessions(seed, window, pids, esks, chals, ds, stored, created_at=created)
    rest, _ = _ov_play(s, 1, now=created + 5)
    (dst, m), = rest
    with pytest.raises(P.ProtocolError) as info:
        s[dst].confirm_sas(now=created + 600)
    assert P.result_code(info.value) == "invalid_state"
    assert s[dst].state == "running" and not s[dst].ended
    with pytest.raises(P.ProtocolError) as info:
        s[dst].confirm_sas(now=created + 601)
    assert P.result_code(info.value) == "expired"
    assert s[dst].state == "failed" and s[dst].ended and s[dst].result is None
    for now in (created + 5, created + 601):
        with pytest.raises(P.ProtocolError) as info:
            s[dst].receive(m, now=now)
        assert P.result_code(info.value) == "invalid_state"
    with pytest.raises(P.InvalidState):
        s[dst].reject_sas()
    assert s[dst].state == "failed"
    # Before start() too: past 600 seconds a confirmation (or a message) is expired, checked
    # before anything else, and fails the session.
    for act in ("confirm", "message"):
        s = _ov_sessions(seed, window, pids, esks, chals, ds, stored, created_at=created)
        res_x = next(x for x in "ab" if s[x].role == P.RESPONDER)
        ini_x = _OTHER[res_x]
        commit = s[ini_x].start()[0]
        with pytest.raises(P.ProtocolError) as info:
            if act == "confirm":
                s[res_x].confirm_sas(now=created + 601)
            else:
                s[res_x].receive(commit, now=created + 601)
        assert P.result_code(info.value) == "expired"
        assert s[res_x].state == "failed"


# Section 11.4, the call binding, beyond the vectors ---------------------------------------

def _ov_bound_random(rng: random.Random, short_pid: bool = False):
    seed, window, pids, esks, chals, ds, stored = _ov_random(rng, short_pid=short_pid)
    return seed, window, pids, esks, chals, ds, stored, rng.randbytes(rng.randrange(16, 65))


def test_online_verify_bound_sessions_end_states():
    """11.4 with random inputs: both bound to one call compare the SAS (a th, and so a SAS,
    other than the unbound session's); one bound and the other not end in binding differs,
    whichever is bound; each bound to its own call, in other call; the same state on both
    sides, whatever the order the PROOFs cross in.  A bound side's KEY is 98 bytes."""
    rng = random.Random(1140)
    for trial in range(60):
        seed, window, pids, esks, chals, ds, stored, cb = _ov_bound_random(
            rng, short_pid=trial % 4 == 3)
        plain = _ov_sessions(seed, window, pids, esks, chals, ds, stored)
        assert _ov_run(plain)[1] == {}
        other_cb = rng.randbytes(32)
        for bindings, state in (({"a": cb, "b": cb}, "compare_sas"),
                                ({"a": cb}, "binding_differs"), ({"b": cb}, "binding_differs"),
                                ({"a": cb, "b": other_cb}, "other_call")):
            s = _ov_sessions(seed, window, pids, esks, chals, ds, stored, bindings=bindings)
            sent, failures = _ov_run(s, rng=rng)
            assert failures == {}
            keys = [(x, m) for x, m in sent if m[1] == P.OV_KEY]
            assert [len(m) for _, m in keys] == [98 if x in bindings else 66 for x, _ in keys]
            fields = _ov_fields(s, seed, window, _ov_ids(pids), esks, chals, ds, bound=True)
            assert fields["state_text"] == state
            for x in "ab":
                r = s[x].result
                assert s[x].state == state and r.tag_outcome == P.VERIFIED
                # The KEYs differ from the unbound session's, so th and the SAS do too.
                assert r.th != plain[x].result.th
                if state == "compare_sas":
                    assert r.sas_text == s[_OTHER[x]].result.sas_text != plain[x].result.sas_text
                else:
                    assert r.sas_value is None
        # Both bound, same binding, both with profile references: offered after the SAS.
        refs = {x: rng.randbytes(32) for x in "ab"}
        s = _ov_sessions(seed, window, pids, esks, chals, ds, stored, refs=refs,
                         bindings={"a": cb, "b": cb})
        assert _ov_run(s)[1] == {}
        for x in "ab":
            s[x].confirm_sas()
            assert s[x].peer_profile() == refs[_OTHER[x]]
        # An end state offers no profile, even one the peer's PROOF carried.
        s = _ov_sessions(seed, window, pids, esks, chals, ds, stored, refs=refs,
                         bindings={"a": cb})
        assert _ov_run(s)[1] == {}
        for x in "ab":
            assert s[x].state == "binding_differs"
            with pytest.raises(P.InvalidState):
                s[x].confirm_sas()
            with pytest.raises(P.InvalidState):
                s[x].peer_profile()


def test_online_verify_a_relay_that_alters_a_bind_makes_the_proofs_fail():
    """11.4: "A relay that changes a bind on the way changes one side's th, and the PROOFs do
    not open (authentication_failed)": every byte of either bind altered, a bind removed (a
    bound KEY forwarded as an unbound one), one added, or replaced by the other side's (to
    make two calls look like one): both sides fail, neither reaches a SAS or an end state."""
    rng = random.Random(1141)
    seed, window, pids, esks, chals, ds, stored, cb = _ov_bound_random(rng)
    other_cb = rng.randbytes(32)
    cases = []
    for bindings in ({"a": cb, "b": cb}, {"a": cb, "b": other_cb}, {"a": cb}, {"b": cb}):
        clean = _ov_sessions(seed, window, pids, esks, chals, ds, stored, bindings=bindings)
        sent, failures = _ov_run(clean)
        assert failures == {}
        for index, (sender, m) in enumerate(sent):
            if m[1] != P.OV_KEY:
                continue
            changed = []
            if len(m) == 98:
                for i in range(66, 98):
                    for mask in (0x01, 0x80, 0xFF):
                        forged = bytearray(m)
                        forged[i] ^= mask
                        changed.append(bytes(forged))
                changed.append(m[:66])  # the bind removed
            else:
                changed.append(m + P.ov_bind(seed, window, cb))  # a bind added
            peer_key = next(k for x, k in sent if k[1] == P.OV_KEY and x != sender)
            if len(peer_key) == 98 and len(m) == 98 and peer_key[66:] != m[66:]:
                changed.append(m[:66] + peer_key[66:])  # the other side's bind
            for forged in changed:
                cases.append((bindings, index, forged))
    for bindings, index, forged in cases:
        s = _ov_sessions(seed, window, pids, esks, chals, ds, stored, bindings=bindings)
        _, failures = _ov_run(s, lambda i, m: forged if i == index else m)
        assert set(failures) == {"a", "b"}, (bindings, index, forged.hex())
        for x in "ab":
            assert P.result_code(failures[x]) == "authentication_failed"
            assert "does not decrypt" in str(failures[x])
            assert s[x].failed and s[x].result is None and s[x].state == "failed"
    # Per bound KEY 96 alterations and its bind removed (and, on two calls, the other's bind
    # put in its place); per unbound KEY a bind added: 2 * 97 + 2 * 98 + 98 + 98.
    assert len(cases) == 586


def test_online_verify_messages_after_an_end_state_are_invalid_state():
    """11.4: "Both end states are final ...; later messages are invalid_state": any message
    (one of the session's, a malformed one, one past the session's 600 seconds) is refused
    with invalid_state, and the session stays in its end state."""
    rng = random.Random(1142)
    created = 1_800_000_000
    for bindings, state in (({"a": rng.randbytes(16)}, "binding_differs"),
                            ({"b": rng.randbytes(64)}, "binding_differs"),
                            ({"a": rng.randbytes(20), "b": rng.randbytes(40)}, "other_call")):
        seed, window, pids, esks, chals, ds, stored = _ov_random(rng)
        s = _ov_sessions(seed, window, pids, esks, chals, ds, stored, created_at=created,
                         bindings=bindings)
        sent, failures = _ov_run(s)
        assert failures == {}
        later = [m for _, m in sent] + [b"", b"\x02", b"\x01\x09" + bytes(32),
                                        sent[0][1][:-1], bytes(200)]
        for x in "ab":
            r = s[x].result
            assert s[x].state == state
            for m in later:
                for now in (None, created + 10, created + 601):
                    with pytest.raises(P.ProtocolError) as info:
                        s[x].receive(m, now=now)
                    assert P.result_code(info.value) == "invalid_state", (state, m.hex(), now)
                    assert s[x].state == state and s[x].result is r and not s[x].failed
            with pytest.raises(P.InvalidState):
                s[x].confirm_sas()
            with pytest.raises(P.ProtocolError):
                s[x].share_profile(bytes(32))


def test_online_verify_call_binding_lengths_and_key_lengths():
    """11.4: cb is 16 to 64 bytes, "another length is invalid_argument" (15 and 65 bytes);
    11.2: a KEY is 66 or 98 bytes, either accepted whatever this side's own binding ("A
    receiver checks a KEY as 11.2 says, whatever its length"), any other length
    malformed_message."""
    rng = random.Random(1143)
    seed, window, pids, esks, chals, ds, stored = _ov_random(rng)
    contact = P.ContactSecrets(ds["a"], stored["a"])
    for n in (0, 1, 15, 65, 128):
        cb = rng.randbytes(n)
        for call in (
                lambda: P.OnlineVerifySession(seed, window, pids["a"], pids["b"], esks["a"],
                                              chals["a"], ds["a"], stored["a"], binding=cb),
                lambda: P.OnlineVerifySession.for_contact(seed, window, pids["a"], pids["b"],
                                                          esks["a"], chals["a"], contact,
                                                          binding=cb),
                lambda: P.ov_bind(seed, window, cb)):
            with pytest.raises(P.ProtocolError) as info:
                call()
            assert P.result_code(info.value) == "invalid_argument", n
    for n in (16, 64):
        cb = rng.randbytes(n)
        side = P.OnlineVerifySession(seed, window, pids["a"], pids["b"], esks["a"], chals["a"],
                                     ds["a"], stored["a"], binding=cb)
        assert side.bind == P.ov_bind(seed, window, cb) and len(side.key_message) == 98
        assert P.ov_key_bind(side.key_message) == side.bind
    # bind depends on the window and the binding.
    cb = rng.randbytes(32)
    assert P.ov_bind(seed, window, cb) != P.ov_bind(seed, window + 1, cb)
    assert P.ov_bind(seed, window, cb) != P.ov_bind(seed, window, cb[:-1])
    assert P.ov_bind(seed, window, cb) != P.ov_bind(rng.randbytes(32), window, cb)
    # KEY lengths, for an unbound and a bound receiver, initiator and responder.
    ini_x = "a" if pids["a"] < pids["b"] else "b"
    res_x = _OTHER[ini_x]
    for receiver_bound in (False, True):
        bindings = {ini_x: cb, res_x: cb} if receiver_bound else {}
        for peer_bound in (False, True):
            peer_bindings = {ini_x: cb, res_x: cb} if peer_bound else {}
            peers = _ov_sessions(seed, window, pids, esks, chals, ds, stored,
                                 bindings=peer_bindings)
            commit = peers[ini_x].start()[0]
            peers[res_x].start()
            key_r = peers[res_x].receive(commit)[0]
            key_i = peers[ini_x].receive(key_r)[0]
            assert len(key_r) == len(key_i) == (98 if peer_bound else 66)
            for cut in (-1, +1):
                for to, before, key in ((ini_x, [], key_r), (res_x, [commit], key_i)):
                    s = _ov_sessions(seed, window, pids, esks, chals, ds, stored,
                                     bindings=bindings)
                    s[to].start()
                    for m in before:
                        s[to].receive(m)
                    bad = key[:cut] if cut < 0 else key + b"\x00"
                    with pytest.raises(P.ProtocolError) as info:
                        s[to].receive(bad)
                    assert P.result_code(info.value) == "malformed_message"
            # Whole KEYs of either length are taken.
            s = _ov_sessions(seed, window, pids, esks, chals, ds, stored, bindings=bindings)
            s[ini_x].start()
            assert [m[1] for m in s[ini_x].receive(key_r)] == [P.OV_KEY, P.OV_PROOF]
            s[res_x].start()
            s[res_x].receive(commit)
            assert [m[1] for m in s[res_x].receive(key_i)] == [P.OV_PROOF]


def test_online_verify_bindings_are_compared_only_after_the_proof():
    """11.4: the bindings are compared "once the peer's PROOF is checked (its proof, then its
    device tag ...), never before": a peer without the seed fails on its proof
    (authentication_failed) whatever it is bound by, never ending in binding differs or other
    call; the device tag is read before the end state (a changed device still ends in it)."""
    rng = random.Random(1144)
    for _ in range(20):
        seed, window, pids, esks, chals, ds, stored, cb = _ov_bound_random(rng)
        for honest_cb, impostor_cb in ((cb, None), (None, cb), (cb, rng.randbytes(32)),
                                       (cb, cb)):
            for impostor in "ab":
                honest = _OTHER[impostor]
                s = _ov_sessions(seed, window, pids, esks, chals, ds, stored,
                                 bindings={honest: honest_cb})
                s[impostor] = P.OnlineVerifySession(
                    rng.randbytes(32), window, pids[impostor], pids[honest], esks[impostor],
                    chals[impostor], ds[impostor], stored[impostor], binding=impostor_cb)
                _, failures = _ov_run(s, rng=rng)
                assert P.result_code(failures[honest]) == "authentication_failed"
                assert s[honest].state == "failed"
        # A peer on a new device, bound differently: its tag is read, then the end state.
        s = _ov_sessions(seed, window, pids, esks, chals, ds, stored, bindings={"a": cb})
        s["b"] = P.OnlineVerifySession(seed, window, pids["b"], pids["a"], esks["b"], chals["b"],
                                       rng.randbytes(16), stored["b"])
        assert _ov_run(s)[1] == {}
        assert s["a"].state == s["b"].state == "binding_differs"
        assert s["a"].result.tag_outcome == P.VERIFIED_DEVICE_CHANGED
        assert s["b"].result.tag_outcome == P.VERIFIED


# --------------------------------------------------------------------------------------------
# pin-update.json (section 10.3)
# --------------------------------------------------------------------------------------------

_PU_SESSION_KEYS = (
    "seed window session_code_value session_code_text initiator_text a b key_i key_r th_input "
    "th salt shared k_i k_r confirm_i confirm_r new_i new_r done new_plaintext_i new_plaintext_r "
    "session_code_input prk"
)
_PU_SIDE_KEYS = ("random_seed identity_random_seed identity_seed pid ephemeral_secret "
                 "ephemeral_public new_device_secret")


def _pu_sessions(seed, window, pids, esks, news, contacts, created_at=None):
    """The two sides "a" and "b" of one Security PIN Update, each with its contact record."""
    return {x: P.PinUpdateSession(seed, window, pids[x], pids[_OTHER[x]], esks[x], news[x],
                                  contacts[x], created_at=created_at)
            for x in ("a", "b")}


def _run_link(sessions, order, deliver=None, tamper=None):
    """Run two sides (``sessions``: name to session) through an in-memory link that delivers
    messages one at a time in the order they were sent (each whole, each direction in order,
    as 7, 10.3 and 16.5 ask of the host's transport).  The sides start in ``order``.  Only the
    first ``deliver`` messages are delivered (None: all), the rest are lost: an interruption.
    ``tamper(index, message)`` may replace the index-th message sent (None drops it).
    Returns (sent messages as (sender, message), failures by side)."""
    first, second = order
    other = {first: second, second: first}
    queue, sent, failures = [], [], {}

    def send(sender, messages):
        for m in messages:
            index = len(sent)
            sent.append((sender, m))
            if tamper is not None:
                m = tamper(index, m)
            if m is not None:
                queue.append((other[sender], m))

    for x in order:
        send(x, sessions[x].start())
    delivered = 0
    while queue and (deliver is None or delivered < deliver):
        dst, m = queue.pop(0)
        delivered += 1
        try:
            send(dst, sessions[dst].receive(m))
        except P.ProtocolError as exc:
            failures.setdefault(dst, exc)
    return sent, failures


def _pu_run(sessions, deliver=None, tamper=None, first=None):
    """A PIN Update run (sides "a" and "b") through ``_run_link``; ``first`` starts first
    (its KEY goes first; default "a")."""
    return _run_link(sessions, [first or "a", _OTHER[first or "a"]], deliver, tamper)


def _pu_initiator(pids):
    return "a" if P.order_pids(pids["a"], pids["b"])[0] == pids["a"] else "b"


def _pu_fields(sessions, seed, window, ids, esks, news) -> dict:
    """Every field of a pin-update.json session, as the vector names them, from one run of
    both sides; each side's own view must agree with the other's."""
    ini = next(x for x in ("a", "b") if sessions[x].role == P.INITIATOR)
    out = {}
    for x in ("a", "b"):
        r = sessions[x].result
        fields = {
            "seed": seed.hex(), "window": window,
            "session_code_value": P.parse_short_code(r.code_text),
            "session_code_text": r.code_text, "initiator_text": ini,
            "key_i": r.key_i.hex(), "key_r": r.key_r.hex(), "th_input": r.th_input.hex(),
            "th": r.th.hex(), "salt": r.salt.hex(), "shared": r.shared.hex(),
            "k_i": r.k_i.hex(), "k_r": r.k_r.hex(), "confirm_i": r.confirm_i.hex(),
            "confirm_r": r.confirm_r.hex(), "new_i": r.new_i.hex(), "new_r": r.new_r.hex(),
            "done": r.done.hex(),
            # 10.3's HMAC message of the session code and prk, each giving what follows from it.
            "session_code_input": P.pin_update_code_input(window).hex(),
            "prk": P.pu_prk(r.salt, r.shared).hex(),
        }
        assert P._be64_head(P.hmac_sha256(seed, P.pin_update_code_input(window))) % 260000 \
            == P.parse_short_code(r.code_text)
        prk = P.pu_prk(r.salt, r.shared)
        assert P.hkdf_expand(prk, P.lv_cat(P.PU_KEY_LABEL, P.INITIATOR), 32) == r.k_i
        assert P.hkdf_expand(prk, P.lv_cat(P.PU_KEY_LABEL, P.RESPONDER), 32) == r.k_r
        # The NEW plaintexts (new device secret || confirmation), as this side opens the two
        # NEW frames it sent and received, each with its sender's role key.
        fields["new_plaintext_i"] = b"".join(P.open_new(r.new_i, r.k_i)).hex()
        fields["new_plaintext_r"] = b"".join(P.open_new(r.new_r, r.k_r)).hex()
        mine_sent = r.new_i if x == ini else r.new_r
        assert P.open_new(mine_sent, r.k_i if x == ini else r.k_r) == (
            r.my_new_secret, r.confirm_i if x == ini else r.confirm_r)
        # Each side's own new secret, and the one it received from the other.
        secrets = {x: r.my_new_secret, _OTHER[x]: r.their_new_secret}
        for y in ("a", "b"):
            fields[y] = {
                "identity_seed": ids[y]["identity_seed"], "pid": ids[y]["pid"],
                "random_seed": ids[y]["random_seed"],
                "identity_random_seed": ids[y]["identity_random_seed"],
                "ephemeral_secret": esks[y].hex(),
                "ephemeral_public": P.x25519_public(esks[y]).hex(),
                "new_device_secret": secrets[y].hex(),
            }
            assert secrets[y] == news[y]
        if out:
            assert fields == out, f"the two sides disagree ({x})"
        out = fields
    return out


@needs_vectors
def test_pin_update_vector_file_fields():
    expect_keys(load("pin-update.json"), "sessions commit_order")


_PU_FRAME_NAMES = {(P.PU_KEY, P.INITIATOR): "key_i", (P.PU_KEY, P.RESPONDER): "key_r",
                   (P.PU_NEW, P.INITIATOR): "new_i", (P.PU_NEW, P.RESPONDER): "new_r",
                   (P.PU_DONE, P.INITIATOR): "done"}
_PU_FRAME_BYTES = {"key_i": 34, "key_r": 34, "new_i": 66, "new_r": 66, "done": 18}


def _pu_state_view(contact: P.ContactSecrets, seed: bytes, window: int, my_pid: bytes,
                   their_pid: bytes) -> dict:
    """One side's record as commit_order's steps name it: its stored secrets, what it says,
    accepts (in the order a tie is broken: current, previous, pending) and shows (10.3), and
    those as voice tags in ``window`` (10.1)."""
    t = P.tag_key(seed)
    current, pending, previous = contact.accepts()
    accepts = [x for x in (current, previous, pending) if x]
    says, shows = contact.says(), contact.shows()
    hexed = lambda b: b.hex() if b else ""  # noqa: E731
    return {
        "mine": hexed(contact.mine), "theirs": hexed(contact.theirs),
        "pending_mine": hexed(contact.pending[0] if contact.pending else None),
        "pending_theirs": hexed(contact.pending[1] if contact.pending else None),
        "committed": contact.committed, "previous_theirs": hexed(contact.previous),
        "says": hexed(says), "accepts": [x.hex() for x in accepts],
        "shows": shows.hex() if shows else None, "state_text": contact.state,
        "says_tag": P.device_tag(t, my_pid, window, says),
        "accepts_tags": [P.device_tag(t, their_pid, window, x) for x in accepts],
        "shows_tag": None if not shows else P.device_tag(t, their_pid, window, shows),
    }


@needs_vectors
def test_pin_update_commit_order_replayed():
    """commit_order (10.3): the steps replayed through this module's records.  The session's
    own update runs as two PinUpdateSession objects (each frame of the vector must be the one
    its sender made); a later update, whose ephemeral secrets the vectors do not give, is
    replayed by the commit order alone (a delivered NEW or DONE stores or commits what 10.3's
    steps 1 to 3 say).  A voice step: each side says its tag, and hears the other's.  After
    each step both records must read as the vector's."""
    data = load("pin-update.json")
    for case in _cases(data, "commit_order"):
        expect_keys(case, "case_text session a_device_secret b_device_secret tag_window "
                          "updates steps")
        session = data["sessions"][case["session"]]
        seed, tag_window = h(session["seed"]), case["tag_window"]
        pids = {x: P.ed25519_public(h(session[x]["identity_seed"])) for x in "ab"}
        assert all(pids[x].hex() == session[x]["pid"] for x in "ab")
        ini = _pu_initiator(pids)
        contacts = {x: P.ContactSecrets(h(case[f"{x}_device_secret"]),
                                        h(case[f"{_OTHER[x]}_device_secret"]), P.DEGRADED)
                    for x in "ab"}
        updates = case["updates"]
        for u in updates:
            expect_keys(u, "window a_random_seed b_random_seed a_new_device_secret "
                           "b_new_device_secret")
        # "the first is the session's own"
        first = updates[0]
        assert first["window"] == session["window"]
        for x in "ab":
            assert first[f"{x}_new_device_secret"] == session[x]["new_device_secret"]
            assert first[f"{x}_random_seed"] == session[x]["random_seed"]
        live = _pu_sessions(seed, session["window"], pids,
                            {x: h(session[x]["ephemeral_secret"]) for x in "ab"},
                            {x: h(session[x]["new_device_secret"]) for x in "ab"}, contacts)
        made = {}  # frame name -> frame, as update 0's sides made them

        def note(sender, frames):
            for f in frames:
                made[_PU_FRAME_NAMES[(f[1], live[sender].role)]] = f

        for x in "ab":
            note(x, live[x].start())
        steps = case["steps"]
        assert steps[0]["step_text"] == "before"
        for step in steps:
            if "voice" in step:
                expect_keys(step, "step_text voice a b")
                v = step["voice"]
                expect_keys(v, "window a_says_tag a_shows_tag b_says_tag b_shows_tag "
                               "a_outcome_text b_outcome_text")
                t = P.tag_key(seed)
                said = {}
                for x in "ab":
                    said[x] = P.voice_tag_said(seed, v["window"], pids[x], contacts[x])
                    shows = contacts[x].shows()
                    assert v[f"{x}_says_tag"] == said[x]
                    assert v[f"{x}_shows_tag"] == (
                        None if not shows else P.device_tag(t, pids[_OTHER[x]], v["window"],
                                                            shows))
                for x in "ab":  # both tags are said before either record changes
                    outcome = contacts[x].hear_voice_tag(seed, v["window"], pids[_OTHER[x]],
                                                         said[_OTHER[x]])
                    assert outcome == v[f"{x}_outcome_text"], (case["case_text"], x)
            elif step["step_text"] != "before":
                expect_keys(step, "update frame_text frame to_text step_text a b")
                name, frame, to = step["frame_text"], h(step["frame"]), step["to_text"]
                sender_role = P.INITIATOR if name in ("key_i", "new_i", "done") else P.RESPONDER
                assert (ini if sender_role == P.INITIATOR else _OTHER[ini]) == _OTHER[to]
                assert len(frame) == _PU_FRAME_BYTES[name] and frame[0] == 1
                assert _PU_FRAME_NAMES[(frame[1], sender_role)] == name
                delivered = step["step_text"] == f"delivered: {name}"
                assert delivered or step["step_text"] == f"lost: {name}"
                u = updates[step["update"]]
                if step["update"] == 0:
                    assert made.get(name) == frame, name  # the frame its sender made
                    if delivered:
                        note(to, live[to].receive(frame))
                elif delivered:
                    news = {x: h(u[f"{x}_new_device_secret"]) for x in "ab"}
                    other = _OTHER[to]
                    if name == "new_i":  # 10.3 step 1, the responder
                        contacts[to].store_pending(news[to], news[other], committed=False)
                    elif name == "new_r":  # step 2, the initiator
                        contacts[to].store_pending(news[to], news[other], committed=True)
                    elif name == "done":  # step 3, the responder
                        contacts[to].commit()
            for x in "ab":
                view = _pu_state_view(contacts[x], seed, tag_window, pids[x], pids[_OTHER[x]])
                assert view == step[x], (case["case_text"], step["step_text"], x)


@needs_vectors
def test_pin_update_sessions():
    rng = random.Random(1030)
    for case in _cases(load("pin-update.json"), "sessions"):
        expect_keys(case, _PU_SESSION_KEYS)
        seed, window = h(case["seed"]), case["window"]
        ids, pids, esks, news = {}, {}, {}, {}
        for x in ("a", "b"):
            side = case[x]
            expect_keys(side, _PU_SIDE_KEYS)
            pids[x] = P.ed25519_public(h(side["identity_seed"]))  # the pid (section 9)
            # random_seed and identity_random_seed drive the library's own test random source,
            # which is no part of the protocol (section 13): only their form can be checked.
            for k in ("random_seed", "identity_random_seed"):
                assert len(h(side[k])) == 32
            ids[x] = {"identity_seed": side["identity_seed"], "pid": pids[x].hex(),
                      "random_seed": side["random_seed"],
                      "identity_random_seed": side["identity_random_seed"]}
            esks[x], news[x] = h(side["ephemeral_secret"]), h(side["new_device_secret"])
            assert len(news[x]) == 16
        assert case["a"]["random_seed"] != case["b"]["random_seed"]
        ini = _pu_initiator(pids)
        res = _OTHER[ini]
        # The vectors carry no old device secrets; the two sides hold each other's (own ones
        # here) on a degraded contact, which the update restores.
        old = {x: rng.randbytes(16) for x in "ab"}
        for first in (ini, res):  # "both, at once": either KEY may go first on the wire
            contacts = {x: P.ContactSecrets(old[x], old[_OTHER[x]], P.DEGRADED) for x in "ab"}
            sessions = _pu_sessions(seed, window, pids, esks, news, contacts)
            sent, failures = _pu_run(sessions, first=first)
            assert failures == {}
            assert _pu_fields(sessions, seed, window, ids, esks, news) == case
            keys = [(ini, case["key_i"]), (res, case["key_r"])]
            assert [(x, f.hex()) for x, f in sent] == (keys if first == ini else keys[::-1]) + [
                (ini, case["new_i"]), (res, case["new_r"]), (ini, case["done"])]
            # Commit order: both committed and verified; the old pair still current until
            # each hears the other's new secret (10.3).
            for x in "ab":
                c = contacts[x]
                assert c.pending == (news[x], news[_OTHER[x]]) and c.committed
                assert c.state == P.VERIFIED
                assert (c.mine, c.theirs) == (old[x], old[_OTHER[x]])
                assert c.says() == news[x]
        _pu_recompute(case, seed, window, pids, esks, news)


def _pu_recompute(case, seed, window, pids, esks, news):
    """The same fields again, from the formulas of 10.3 one by one."""
    ini = case["initiator_text"]
    res = _OTHER[ini]
    assert P.pu_role(pids[ini], pids[res]) == P.INITIATOR
    assert P.pu_role(pids[res], pids[ini]) == P.RESPONDER
    code_input = P.lv_cat(b"itsme-pin-update-code-v1", P.u64(window))
    assert code_input.hex() == case["session_code_input"]
    value = P.be64(P.hmac_sha256(seed, code_input)[:8]) % 260_000
    assert value == case["session_code_value"] == P.pin_update_code_value(seed, window)
    assert P.format_short_code(value) == case["session_code_text"]
    assert P.parse_short_code(case["session_code_text"]) == value
    epk = {x: P.x25519_public(esks[x]) for x in "ab"}
    for x in "ab":
        assert epk[x].hex() == case[x]["ephemeral_public"]
        assert P.ed25519_public(h(case[x]["identity_seed"])).hex() == case[x]["pid"]
    key_i, key_r = P.pu_key_frame(epk[ini]), P.pu_key_frame(epk[res])
    assert key_i == b"\x01\x01" + epk[ini] and key_r == b"\x01\x01" + epk[res]
    assert key_i.hex() == case["key_i"] and key_r.hex() == case["key_r"]
    th_input = P.pu_th_input(case["session_code_text"], window, pids[ini], pids[res], key_i,
                             key_r)
    assert th_input == P.lv_cat(b"itsme-pin-update-v1", case["session_code_text"].encode(),
                                P.u64(window), pids[ini], pids[res], key_i, key_r)
    assert th_input.hex() == case["th_input"]
    th = P.sha256(th_input)
    assert th.hex() == case["th"]
    salt = P.pu_salt(seed, th)
    assert salt == P.hmac_sha256(seed, P.lv_cat(b"itsme-pin-update-salt-v1", th))
    assert salt.hex() == case["salt"]
    shared = P.x25519_shared(esks[ini], epk[res])
    assert shared == P.x25519_shared(esks[res], epk[ini])
    assert shared.hex() == case["shared"]
    k_i, k_r = P.pu_session_keys(salt, shared)
    prk = P.hkdf_extract(salt, shared)
    assert prk.hex() == case["prk"]
    assert k_i == P.hkdf_expand(prk, P.lv_cat(b"itsme-pin-update-key-v1", b"initiator"), 32)
    assert k_r == P.hkdf_expand(prk, P.lv_cat(b"itsme-pin-update-key-v1", b"responder"), 32)
    assert k_i.hex() == case["k_i"] and k_r.hex() == case["k_r"]
    confirm_i, confirm_r = P.pu_confirm(seed, P.INITIATOR, th), P.pu_confirm(seed, P.RESPONDER, th)
    assert confirm_i == P.hmac_sha256(seed, P.lv_cat(b"itsme-pin-update-confirm-v1",
                                                     b"initiator", th))
    assert confirm_i.hex() == case["confirm_i"] and confirm_r.hex() == case["confirm_r"]
    new_i = P.new_frame(k_i, news[ini], confirm_i)
    new_r = P.new_frame(k_r, news[res], confirm_r)
    assert new_i.hex() == case["new_i"] and new_r.hex() == case["new_r"]
    assert new_i == b"\x01\x02" + P.ChaCha20Poly1305(k_i).encrypt(
        bytes(4) + P.u64(0), news[ini] + confirm_i, b"\x01\x02")
    assert len(new_i) == len(new_r) == 2 + 16 + 32 + 16
    assert P.open_new(new_i, k_i) == (news[ini], confirm_i)
    assert P.open_new(new_r, k_r) == (news[res], confirm_r)
    done = P.done_frame(k_i)
    assert done.hex() == case["done"]
    assert done == b"\x01\x03" + P.ChaCha20Poly1305(k_i).encrypt(bytes(4) + P.u64(1), b"",
                                                                 b"\x01\x03")
    assert len(done) == 18
    P.open_done(done, k_i)
    with pytest.raises(P.ProtocolError):
        P.open_done(done, k_r)


# Own checks of section 10.3 ------------------------------------------------------------------

def _pu_random(rng: random.Random, short_pid: bool = False):
    """Random inputs of an update: seed, window, pids, ephemeral secrets, new secrets."""
    seed = rng.randbytes(32)
    window = 60_000_000 + rng.randrange(10**6)
    pids = {"a": rng.randbytes(32), "b": rng.randbytes(8 if short_pid else 32)}
    esks = {x: rng.randbytes(32) for x in "ab"}
    news = {x: rng.randbytes(16) for x in "ab"}
    return seed, window, pids, esks, news


def _pu_contacts(rng: random.Random, state=P.DEGRADED):
    """The two records of one contact, each holding the other's current secret."""
    old = {x: rng.randbytes(16) for x in "ab"}
    return {x: P.ContactSecrets(old[x], old[_OTHER[x]], state) for x in "ab"}


def _snapshot(contacts):
    return {x: (c.mine, c.theirs, c.state, c.pending, c.committed, c.previous)
            for x, c in contacts.items()}


def _copy(contacts):
    return {x: P.ContactSecrets(c.mine, c.theirs, c.state, c.pending, c.committed, c.previous)
            for x, c in contacts.items()}


def test_pin_update_session_codes():
    rng = random.Random(1031)
    for _ in range(200):
        seed = rng.randbytes(32)
        now = 1_800_000_000 + rng.randrange(10**7)
        (w, text), (w1, text1) = P.pin_update_codes(seed, now)
        assert w == now // 30 and w1 == w - 1
        assert text == P.pin_update_code_text(seed, w) and text1 == P.pin_update_code_text(seed,
                                                                                         w - 1)
        assert P.parse_short_code(text) == P.pin_update_code_value(seed, w) < 260_000
        # The code depends on the seed and the window only: the next window's W - 1 is W.
        assert P.pin_update_codes(seed, now + 30)[1] == (w, text)
    # A session built for a window uses that window's code, in th: "code_text: the session
    # code's canonical text, 'ECHO 0042'" (section 4), whatever form it was typed in.
    seed, window, pids, esks, news = _pu_random(rng)
    s = _pu_sessions(seed, window, pids, esks, news, _pu_contacts(rng))
    text = P.pin_update_code_text(seed, window)
    assert s["a"].code_text == text == s["b"].code_text
    assert P.format_short_code(40042) == "ECHO 0042"
    word, digits = text.split(" ")
    assert len(digits) == 4 and word == word.upper() and word in P.NATO_WORDS
    for typed in (text, text.lower(), f"  {word.lower()}-{digits} ", f"{word.title()} {digits}"):
        t = P.PinUpdateSession(seed, window, pids["a"], pids["b"], esks["a"], news["a"],
                               code_text=typed)
        assert t.code_text == text
    sent, failures = _pu_run(s)
    assert failures == {}
    r = s["a"].result
    pid_i, pid_r = P.order_pids(pids["a"], pids["b"])
    assert r.code_text == text and r.th_input == P.lv_cat(
        b"itsme-pin-update-v1", text.encode("ascii"), P.u64(window), pid_i, pid_r, r.key_i,
        r.key_r)


def test_pin_update_both_sides_agree():
    rng = random.Random(1032)
    initiators = {"a": 0, "b": 0}
    for trial in range(200):
        seed, window, pids, esks, news = _pu_random(rng, short_pid=trial % 4 == 3)
        contacts = _pu_contacts(rng)
        s = _pu_sessions(seed, window, pids, esks, news, contacts)
        sent, failures = _pu_run(s, first=rng.choice("ab"))
        assert failures == {} and len(sent) == 5
        fields = _pu_fields(s, seed, window, _ov_ids(pids), esks, news)
        ini = fields["initiator_text"]
        initiators[ini] += 1
        assert ini == _pu_initiator(pids)
        assert [x for x, _ in sent][2:] == [ini, _OTHER[ini], ini]
        assert {len(f) for _, f in sent} == {34, 66, 18}
    assert min(initiators.values()) > 50


def test_pin_update_commit_order():
    """10.3 steps 1 to 3, checked at the moment each frame is sent."""
    rng = random.Random(1033)
    for _ in range(20):
        seed, window, pids, esks, news = _pu_random(rng)
        contacts = _pu_contacts(rng)
        before = _snapshot(contacts)
        s = _pu_sessions(seed, window, pids, esks, news, contacts)
        ini_x = _pu_initiator(pids)
        res_x = _OTHER[ini_x]
        ini, res = s[ini_x], s[res_x]
        key_i, key_r = ini.start()[0], res.start()[0]
        assert res.receive(key_i) == []  # the responder waits for the initiator's NEW
        [new_i] = ini.receive(key_r)  # "initiator once it has both KEYs"
        assert _snapshot(contacts) == before  # nobody has stored anything yet
        [new_r] = res.receive(new_i)
        # 1. The responder stored the pair as pending, not committed, before sending NEW.
        c = contacts[res_x]
        assert c.pending == (news[res_x], news[ini_x]) and not c.committed
        assert c.state == P.DEGRADED and c.says() == c.mine  # still says its old secret
        assert _snapshot(contacts)[ini_x] == before[ini_x]
        [done] = ini.receive(new_r)
        # 2. The initiator: pending and committed, verified, before DONE.
        c = contacts[ini_x]
        assert c.pending == (news[ini_x], news[res_x]) and c.committed
        assert c.state == P.VERIFIED and c.says() == news[ini_x]
        assert ini.done and not contacts[res_x].committed
        # 3. The responder, on DONE, commits and marks the contact verified.
        assert res.receive(done) == []
        c = contacts[res_x]
        assert c.committed and c.state == P.VERIFIED and c.says() == news[res_x]
        assert res.done
        # Nothing completed yet: the old pair stays current until the new secrets are heard.
        for x in "ab":
            assert (contacts[x].mine, contacts[x].theirs) == before[x][:2]


def test_pin_update_rejects_every_flipped_byte():
    """Every frame with a byte flipped, cut short, or one byte longer is rejected.  Frames 3 to
    5 (NEW, NEW, DONE) are authenticated: their receiver fails on them.  A KEY carries no
    authentication of its own; a changed one is refused on arrival when its header or length
    is wrong and otherwise changes th and the keys, so the responder fails on the initiator's
    NEW.  Either way the two records end exactly as after an interruption before the changed
    frame (10.3), and a changed frame never makes anyone store a secret it did not send."""
    rng = random.Random(1034)
    seed, window, pids, esks, news = _pu_random(rng)
    base = _pu_contacts(rng)
    clean = _pu_sessions(seed, window, pids, esks, news, _copy(base))
    sent, failures = _pu_run(clean)
    assert failures == {} and len(sent) == 5
    ini_x = _pu_initiator(pids)
    res_x = _OTHER[ini_x]
    after_k = {}
    for k in range(6):
        contacts = _copy(base)
        _pu_run(_pu_sessions(seed, window, pids, esks, news, contacts), deliver=k)
        after_k[k] = _snapshot(contacts)
    runs = 0
    for index, (sender, frame) in enumerate(sent):
        receiver = _OTHER[sender]
        for changed in _flips(frame):
            contacts = _copy(base)
            s = _pu_sessions(seed, window, pids, esks, news, contacts)
            _, failures = _pu_run(s, tamper=lambda i, f: changed if i == index else f)
            if index >= 2 or changed[:2] != frame[:2] or len(changed) != len(frame):
                assert receiver in failures, (index, changed.hex())
                assert s[receiver].failed and s[receiver].result is None
            else:
                assert res_x in failures, (index, changed.hex())
                assert "NEW does not decrypt" in str(failures[res_x]) or "zero" in str(
                    failures.get(receiver, ""))
            assert _snapshot(contacts) == after_k[index], (index, changed.hex())
            for x in "ab":
                if contacts[x].pending is not None:
                    assert contacts[x].pending[1] == news[_OTHER[x]]
            runs += 1
    assert runs > 1500


def test_pin_update_rejects_reflected_key():
    rng = random.Random(1035)
    seed, window, pids, esks, news = _pu_random(rng)
    for x in "ab":
        contacts = _pu_contacts(rng)
        before = _snapshot(contacts)
        s = _pu_sessions(seed, window, pids, esks, news, contacts)
        own = s[x].start()[0]
        with pytest.raises(P.ProtocolError, match="reflected"):
            s[x].receive(own)
        assert s[x].failed and _snapshot(contacts) == before
        with pytest.raises(P.ProtocolError):
            s[x].receive(s[_OTHER[x]].start()[0])  # a failed update stays failed
    # A relay in the middle of a run sends a's KEY back to a instead of b's: a refuses it;
    # b gets a's KEY, and nothing from a follows.
    contacts = _pu_contacts(rng)
    before = _snapshot(contacts)
    s = _pu_sessions(seed, window, pids, esks, news, contacts)
    _, failures = _pu_run(s, tamper=lambda i, f: s["a"].key_frame if i == 1 else f)
    assert list(failures) == ["a"] and "reflected" in str(failures["a"])
    assert _snapshot(contacts) == before and not s["a"].done and not s["b"].done
    # Low-order keys give an all-zero shared secret, which is rejected.
    for low in (bytes(32), b"\x01" + bytes(31)):
        for x in "ab":
            s = _pu_sessions(seed, window, pids, esks, news, _pu_contacts(rng))
            s[x].start()
            with pytest.raises(P.ProtocolError, match="zero"):
                s[x].receive(P.pu_key_frame(low))


def test_pin_update_needs_the_seed():
    rng = random.Random(1036)
    for _ in range(20):
        seed, window, pids, esks, news = _pu_random(rng)
        ini_x = _pu_initiator(pids)
        res_x = _OTHER[ini_x]
        code_text = P.pin_update_code_text(seed, window)
        for impostor in "ab":
            # The impostor met on the right code (it is on the air) and knows both pids and
            # the window, but not the seed: the honest side fails and stores nothing.
            contacts = _pu_contacts(rng)
            before = _snapshot(contacts)
            s = _pu_sessions(seed, window, pids, esks, news, contacts)
            s[impostor] = P.PinUpdateSession(rng.randbytes(32), window, pids[impostor],
                                             pids[_OTHER[impostor]], esks[impostor],
                                             news[impostor], P.ContactSecrets(None, None),
                                             code_text=code_text)
            _, failures = _pu_run(s, first=rng.choice("ab"))
            honest = _OTHER[impostor]
            if impostor == ini_x:
                # Its NEW is sealed under a key that needs the seed: refused.
                assert "NEW does not decrypt" in str(failures[honest])
            else:
                # The honest initiator's NEW does not open for the impostor, which answers
                # anyway with a NEW of its own keys (the th is right, the salt is not).
                assert "NEW does not decrypt" in str(failures[impostor])
                fake = s[impostor]
                th = P.pu_th(code_text, window, pids[ini_x], pids[res_x],
                             s[ini_x].key_frame, fake.key_frame)
                k_r = P.pu_session_keys(P.pu_salt(fake.seed, th),
                                        P.x25519_shared(esks[res_x], s[ini_x].ephemeral_pk))[1]
                with pytest.raises(P.ProtocolError, match="NEW does not decrypt"):
                    s[honest].receive(P.new_frame(k_r, news[res_x],
                                                  P.pu_confirm(fake.seed, P.RESPONDER, th)))
            assert s[honest].failed and s[honest].result is None
            assert _snapshot(contacts)[honest] == before[honest]
        # Even one handed both frame keys (the salt needs the seed) cannot confirm: a NEW
        # sealed under the right key with any confirmation it can compute is refused, in
        # constant time, and nothing is stored.
        honest = _pu_sessions(seed, window, pids, esks, news, _pu_contacts(rng))
        assert _pu_run(honest)[1] == {}
        r = honest[ini_x].result
        guesses = [P.pu_confirm(g, role, r.th) for g in (rng.randbytes(32), r.th, r.salt,
                                                         r.k_i, r.k_r, bytes(32))
                   for role in (P.INITIATOR, P.RESPONDER)]
        guesses += [r.confirm_i, r.confirm_r]  # each is wrong for the other role
        for confirmation in guesses:
            # To the responder, as the initiator's NEW (the initiator's own confirmation is
            # right there: skip it); to the initiator, as the responder's NEW.
            for receiver, key, index in ((res_x, r.k_i, 2), (ini_x, r.k_r, 3)):
                right = r.confirm_i if receiver == res_x else r.confirm_r
                if confirmation == right:
                    continue
                forged = P.new_frame(key, rng.randbytes(16), confirmation)
                contacts = _pu_contacts(rng)
                before = _snapshot(contacts)
                s = _pu_sessions(seed, window, pids, esks, news, contacts)
                _, failures = _pu_run(s, tamper=lambda i, f: forged if i == index else f)
                assert "confirmation is wrong" in str(failures[receiver])
                assert _snapshot(contacts)[receiver] == before[receiver]
        # A side's own NEW sent back to it does not decrypt (the other role's key); the
        # responder's confirmation under the initiator's key is refused too (a reflection).
        s = _pu_sessions(seed, window, pids, esks, news, _pu_contacts(rng))
        _, failures = _pu_run(s, tamper=lambda i, f: r.new_i if i == 3 else f)
        assert "NEW does not decrypt" in str(failures[ini_x])
        forged = P.new_frame(r.k_i, rng.randbytes(16), r.confirm_r)
        s = _pu_sessions(seed, window, pids, esks, news, _pu_contacts(rng))
        _, failures = _pu_run(s, tamper=lambda i, f: forged if i == 2 else f)
        assert "confirmation is wrong" in str(failures[res_x])


def test_pin_update_frame_order_type_version_length():
    rng = random.Random(1037)
    seed, window, pids, esks, news = _pu_random(rng)
    clean = _pu_sessions(seed, window, pids, esks, news, _pu_contacts(rng))
    sent, failures = _pu_run(clean, first=_pu_initiator(pids))
    assert failures == {}
    key_i, key_r, new_i, new_r, done = (f for _, f in sent)
    ini_x = _pu_initiator(pids)

    def fresh():
        s = _pu_sessions(seed, window, pids, esks, news, _pu_contacts(random.Random(7)))
        s[ini_x].start()
        s[_OTHER[ini_x]].start()
        return s[ini_x], s[_OTHER[ini_x]]

    def fails(session, *frames):
        for f in frames[:-1]:
            session.receive(f)
        with pytest.raises(P.ProtocolError):
            session.receive(frames[-1])
        assert session.failed and session.result is None
        with pytest.raises(P.ProtocolError):  # a failed update stays failed
            session.receive(frames[0])

    # The initiator: expects KEY_R, then NEW_R; never DONE; nothing twice.
    for bad in ([new_r], [done], [key_r, key_r], [key_r, done], [key_r, new_i]):
        fails(fresh()[0], *bad)
    # The responder: expects KEY_I, then NEW_I, then DONE.
    for bad in ([new_i], [done], [key_i, key_i], [key_i, done], [key_i, new_i, new_i],
                [key_i, new_i, key_i], [key_i, new_r]):
        fails(fresh()[1], *bad)
    # "once a side is done (the initiator after sending DONE, the responder after receiving
    # it) further frames are refused without changing anything": every frame, of any kind,
    # even of another version or length, or late (past the expiry); the side stays done, not
    # failed, with the same result and the same record.
    ini, res = fresh()
    ini.receive(key_r)
    assert ini.receive(new_r) == [done]
    res.receive(key_i)
    res.receive(new_i)
    assert res.receive(done) == []
    for side in (ini, res):
        assert side.done and not side.failed
        side.created_at = 0
        stored, result = _snapshot({"x": side.contact}), side.result
        for f in (key_i, key_r, new_i, new_r, done, done[:-1], b"\x02" + done[1:], b""):
            with pytest.raises(P.ProtocolError, match="refused"):
                side.receive(f, now=10**9)
            assert side.done and not side.failed and side.result is result
            assert _snapshot({"x": side.contact}) == stored
        with pytest.raises(P.ProtocolError):
            side.start()
    # Before it is done, a frame received twice still ends the update as failed.
    ini, res = fresh()
    res.receive(key_i)
    res.receive(new_i)
    fails(res, key_i)
    # Nothing is taken before start().
    s = _pu_sessions(seed, window, pids, esks, news, _pu_contacts(rng))
    with pytest.raises(P.ProtocolError):
        s["a"].receive(key_i)
    # Another version, another type, the wrong length.
    for f in (b"\x02" + key_i[1:], b"\x00" + key_i[1:], key_i[:1] + b"\x00" + key_i[2:],
              key_i[:1] + b"\x04" + key_i[2:], key_i[:-1], key_i + b"\x00", b"", b"\x01"):
        fails(fresh()[1], f)
    assert P.parse_pu_frame(key_i, P.PU_KEY) == key_i[2:]
    with pytest.raises(ValueError):
        P.pu_frame(P.PU_NEW, bytes(63))
    with pytest.raises(ValueError):
        P.new_frame(bytes(32), bytes(15), bytes(32))
    with pytest.raises(P.ProtocolError):
        P.pu_role(pids["a"], pids["a"])
    assert P.pu_role(b"\x01" * 8, b"\x01" * 8 + b"\x00") == P.INITIATOR  # a prefix sorts first


def test_pin_update_lifetime():
    rng = random.Random(1038)
    seed, window, pids, esks, news = _pu_random(rng)
    created = 1_800_000_000
    # "An update expires more than 600 seconds after its creation".
    assert not P.pu_expired(created, created + 600) and P.pu_expired(created, created + 601)
    for late, ok in ((599, True), (600, True), (601, False)):
        contacts = _pu_contacts(rng)
        before = _snapshot(contacts)
        s = _pu_sessions(seed, window, pids, esks, news, contacts, created_at=created)
        ini_x = _pu_initiator(pids)
        ini, res = s[ini_x], s[_OTHER[ini_x]]
        key_i, key_r = ini.start()[0], res.start()[0]
        res.receive(key_i, now=created + 1)
        [new_i] = ini.receive(key_r, now=created + 1)
        if ok:
            [new_r] = res.receive(new_i, now=created + late)
            ini.receive(new_r, now=created + late)
            assert ini.done
        else:
            with pytest.raises(P.ProtocolError, match="expired"):
                res.receive(new_i, now=created + late)
            assert res.failed and _snapshot(contacts) == before


# The commit-order state model: interruptions and tag checks (10.1, 10.3, 11.3) --------------

_SLOT = {P.HEARD_CURRENT: 0, P.HEARD_NEW: 1, P.HEARD_PREVIOUS: 2}


def _voice_round(seed, window, pids, contacts, mode, collided=None):
    """One voice session whose codes match: each side says its tag (10.1 with 10.3) and
    checks the other's.  mode "together": both tags are fixed before either is checked;
    "a"/"b": that side speaks first and the other says its tag after checking.  A side whose
    heard tag is read as another accepted secret than the one said, or as an accepted secret
    when the one said is not accepted (two-digit tags coincide), is added to ``collided``,
    when given."""
    def say(x):
        return contacts[x].says(), P.voice_tag_said(seed, window, pids[x], contacts[x])

    def hear(x, said):  # x hears the other's tag
        secret, tag = said
        if collided is not None:
            t = P.tag_key(seed)
            heard = contacts[x].classify(
                lambda s: P.device_tag(t, pids[_OTHER[x]], window, s) == tag)
            accepted = contacts[x].accepts()
            slot = accepted.index(secret) if secret and secret in accepted else None
            if _SLOT.get(heard) != slot:
                collided.add(x)
        return contacts[x].hear_voice_tag(seed, window, pids[_OTHER[x]], tag)

    if mode == "together":
        said = {x: say(x) for x in "ab"}
        return [hear(x, said[_OTHER[x]]) for x in "ab"]
    first = mode
    out = [hear(_OTHER[first], say(first))]
    out.append(hear(first, say(_OTHER[first])))
    return out


def _ov_round(seed, window, pids, contacts, rng):
    """One Online Verify session between the two records, SAS confirmed on both sides."""
    s = {x: P.OnlineVerifySession.for_contact(seed, window, pids[x], pids[_OTHER[x]],
                                              rng.randbytes(32), rng.randbytes(32), contacts[x])
         for x in "ab"}
    _, failures = _ov_run(s, rng=rng)
    assert failures == {}
    return [P.ov_record(contacts[x], s[x].result, True) for x in "ab"]


def _tag_round(seed, window, pids, contacts, mode, rng, collided=None):
    """One round of tag checks: a voice session (mode "together", "a" or "b") or an Online
    Verify session ("ov"; its 32-byte device tags never coincide, so ``collided`` stays as
    it is)."""
    if mode == "ov":
        return _ov_round(seed, window, pids, contacts, rng)
    return _voice_round(seed, window, pids, contacts, mode, collided)


def _each_said_is_accepted(contacts):
    """The invariant that keeps every later tag check clean: what each side says, the other
    accepts (as its current secret or as the new one of a pending pair)."""
    for x in "ab":
        assert contacts[x].says() in contacts[_OTHER[x]].accepts(), x


_TAG_MODES = ("together", "a", "b", "ov")


def test_pin_update_every_interruption_recovers():
    """For every interruption point (the first k of the 5 frames delivered, k = 0..5), two
    rounds of tag checks never report "their device changed", and a later complete update,
    followed by the tag checks that let each side hear the other's new secret, leaves nothing
    pending, both sides verified and holding each other's newest secrets."""
    rng = random.Random(1039)
    device_changed = 0
    completions = {k: 0 for k in range(6)}
    for trial in range(60):
        seed, window, pids, esks, news = _pu_random(rng, short_pid=trial % 6 == 5)
        ini_x = _pu_initiator(pids)
        res_x = _OTHER[ini_x]
        for k in range(6):
            for mode in _TAG_MODES:
                start_state = rng.choice(P.CONTACT_STATES)
                contacts = _pu_contacts(rng, start_state)
                old = {x: contacts[x].mine for x in "ab"}
                s = _pu_sessions(seed, window, pids, esks, news, contacts)
                _pu_run(s, deliver=k, first=rng.choice("ab"))
                # Who stored what, by the commit order.
                assert (contacts[res_x].pending is not None) == (k >= 3)
                assert (contacts[ini_x].pending is not None) == (k >= 4)
                assert contacts[ini_x].committed == (k >= 4)
                assert contacts[res_x].committed == (k >= 5)
                _each_said_is_accepted(contacts)
                w = window
                for _ in range(2):
                    w += 1 + rng.randrange(3)
                    outcomes = _tag_round(seed, w, pids, contacts, mode, rng)
                    device_changed += outcomes.count(P.VERIFIED_DEVICE_CHANGED)
                    assert P.VERIFIED_DEVICE_CHANGED not in outcomes, (k, mode)
                    _each_said_is_accepted(contacts)
                if k <= 3:  # nobody ever said a new secret
                    for x in "ab":
                        assert contacts[x].says() == old[x]
                        assert contacts[x].state == P.session_outcome(True, True,
                                                                      start_state)[1]
                elif all(c.pending is None for c in contacts.values()):
                    completions[k] += 1
                    for x in "ab":
                        assert (contacts[x].mine, contacts[x].theirs) == (news[x],
                                                                          news[_OTHER[x]])
                        assert contacts[x].state == P.VERIFIED
                # A later complete update with fresh secrets and keys.
                news2 = {x: rng.randbytes(16) for x in "ab"}
                esks2 = {x: rng.randbytes(32) for x in "ab"}
                w += 1
                s2 = _pu_sessions(seed, w, pids, esks2, news2, contacts)
                assert _pu_run(s2, first=rng.choice("ab"))[1] == {}
                for _ in range(4):  # two-digit tags of old and new coincide 1 time in 100
                    if all(c.pending is None for c in contacts.values()):
                        break
                    w += 1
                    outcomes = _tag_round(seed, w, pids, contacts, mode, rng)
                    assert P.VERIFIED_DEVICE_CHANGED not in outcomes, (k, mode)
                for x in "ab":
                    c = contacts[x]
                    assert c.pending is None and not c.committed, (k, mode)
                    assert (c.mine, c.theirs) == (news2[x], news2[_OTHER[x]])
                    assert c.state == P.VERIFIED
    assert device_changed == 0
    # Two rounds complete the update from the responder's NEW on, except when a two-digit
    # tag of a new secret equals the old one's (then the old reading only postpones it).
    assert completions[0] == completions[1] == completions[2] == completions[3] == 0
    assert completions[4] > 200 and completions[5] > 200


def test_pin_update_interruption_then_direct_update():
    """A stale pending pair is harmless and a later update replaces it: every interruption
    point followed at once by a complete update and tag checks."""
    rng = random.Random(1040)
    for trial in range(40):
        seed, window, pids, esks, news = _pu_random(rng)
        for k in range(6):
            contacts = _pu_contacts(rng)
            _pu_run(_pu_sessions(seed, window, pids, esks, news, contacts), deliver=k)
            news2 = {x: rng.randbytes(16) for x in "ab"}
            s = _pu_sessions(seed, window + 1, pids, {x: rng.randbytes(32) for x in "ab"},
                             news2, contacts)
            assert _pu_run(s)[1] == {}
            for x in "ab":
                assert contacts[x].pending == (news2[x], news2[_OTHER[x]])
            for r in range(4):
                if all(c.pending is None for c in contacts.values()):
                    break
                outcomes = _tag_round(seed, window + 2 + r, pids, contacts, "ov", rng)
                assert outcomes == [P.VERIFIED, P.VERIFIED]
            assert r == 1  # with 32-byte device tags, one session completes both sides
            for x in "ab":
                assert (contacts[x].mine, contacts[x].theirs) == (news2[x], news2[_OTHER[x]])


def test_pin_update_tag_collision_reads_as_current():
    """A two-digit tag of the peer's old secret and one of its new secret coincide in about
    one window of 100.  After an interruption at k = 3 the responder holds the initiator's new
    secret as pending, while the initiator (which stored nothing) keeps saying its old one.
    Hearing a coinciding tag must read as the old secret: reading it as the new one would
    complete the responder, which would then say its new secret to an initiator that never
    learned it ("their device changed")."""
    rng = random.Random(1041)
    seed, window, pids, esks, news = _pu_random(rng)
    ini_x = _pu_initiator(pids)
    res_x = _OTHER[ini_x]
    contacts = _pu_contacts(rng, P.VERIFIED)
    _pu_run(_pu_sessions(seed, window, pids, esks, news, contacts), deliver=3)
    t = P.tag_key(seed)
    old_i = contacts[ini_x].mine
    w = next(w for w in range(window, window + 10_000)
             if P.device_tag(t, pids[ini_x], w, old_i) == P.device_tag(t, pids[ini_x], w,
                                                                       news[ini_x]))
    outcomes = _voice_round(seed, w, pids, contacts, ini_x)
    assert outcomes == [P.VERIFIED, P.VERIFIED]
    assert contacts[res_x].pending is not None and contacts[res_x].says() != news[res_x]
    outcomes = _voice_round(seed, w + 1, pids, contacts, "together")
    assert P.VERIFIED_DEVICE_CHANGED not in outcomes
    # Reading it the other way round shows the failure this avoids.
    wrong = _copy(contacts)
    wrong[res_x].complete()  # as if the coinciding tag had been read as the new secret
    assert P.VERIFIED_DEVICE_CHANGED in _voice_round(seed, w + 2, pids, wrong, "together")


def test_contact_record_outcomes():
    """10.1 with 10.3 on one record: the current secret keeps the table of 10.1; the pending
    new secret completes the update (nothing pending or previous) and marks the contact
    verified, degraded or not; the previous new secret becomes the peer's current one, the
    pending pair stays and the contact is verified; when several accepted secrets give the
    tag, the current one wins, then the previous one, then the pending one; a failed code
    changes nothing; a tag of none degrades and keeps the pending pair; a record without a
    current secret accepts a pending or previous match and otherwise checks no tag."""
    old_mine, old_theirs, new_mine, new_theirs, prev_theirs = (bytes([i]) * 16
                                                               for i in range(1, 6))
    for state in P.CONTACT_STATES:
        for committed in (False, True):
            for previous in (None, prev_theirs):
                def rec():
                    return P.ContactSecrets(old_mine, old_theirs, state, (new_mine, new_theirs),
                                            committed, previous)
                c = rec()
                assert c.says() == (new_mine if committed else old_mine)
                assert c.accepts() == (old_theirs, new_theirs, previous)
                for heard in P.HEARD_CLASSES:
                    c = rec()
                    assert c.record(False, heard) == P.FAILED
                    assert _snapshot({"x": c}) == _snapshot({"x": rec()})
                c = rec()
                assert c.classify(lambda s: s == new_theirs) == P.HEARD_NEW
                assert c.record(True, P.HEARD_NEW) == P.VERIFIED
                assert (c.mine, c.theirs, c.pending, c.committed, c.previous, c.state) == (
                    new_mine, new_theirs, None, False, None, P.VERIFIED)
                # The current secret first: alone, or giving the same tag as another one.
                for also in ((), (new_theirs,), (prev_theirs,), (new_theirs, prev_theirs)):
                    c = rec()
                    assert c.classify(lambda s: s in (old_theirs,) + also) == P.HEARD_CURRENT
                    assert c.record(True, P.HEARD_CURRENT) == P.VERIFIED
                    assert c.state == P.session_outcome(True, True, state)[1]
                    assert _snapshot({"x": c})["x"][3:] == _snapshot({"x": rec()})["x"][3:]
                    assert (c.mine, c.theirs) == (old_mine, old_theirs)
                c = rec()
                if previous is None:
                    assert c.classify(lambda s: s == prev_theirs) == P.HEARD_OTHER
                    with pytest.raises(P.ProtocolError):
                        c.adopt_previous()
                else:
                    assert c.classify(lambda s: s == prev_theirs) == P.HEARD_PREVIOUS
                    assert c.record(True, P.HEARD_PREVIOUS) == P.VERIFIED
                    assert (c.mine, c.theirs, c.pending, c.committed, c.previous, c.state) == (
                        old_mine, prev_theirs, (new_mine, new_theirs), committed, None,
                        P.VERIFIED)
                    assert c.says() == rec().says()
                    # The pending and the previous one alike, the current one not: "the
                    # current one wins, then the previous one, then the pending one".
                    c = rec()
                    assert c.classify(lambda s: s in (new_theirs, prev_theirs)) == (
                        P.HEARD_PREVIOUS)
                    assert c.record(True, P.HEARD_PREVIOUS) == P.VERIFIED
                    assert (c.mine, c.theirs, c.pending, c.committed, c.previous, c.state) == (
                        old_mine, prev_theirs, (new_mine, new_theirs), committed, None,
                        P.VERIFIED)
                c = rec()
                assert c.classify(lambda s: False) == P.HEARD_OTHER
                assert c.record(True, P.HEARD_OTHER) == P.VERIFIED_DEVICE_CHANGED
                assert c.state == P.DEGRADED and c.pending == (new_mine, new_theirs)
                assert c.previous == previous
        # No secret at all for the peer: no tag is checked.
        c = P.ContactSecrets(None, None, state)
        assert c.accepts() == (None, None, None)
        assert c.classify(lambda s: True) == P.HEARD_UNCHECKED and c.says() is None
        assert c.record(True, P.HEARD_UNCHECKED) == P.VERIFIED_TAG_UNCHECKED
        assert c.state == P.session_outcome(True, None, state)[1]
        assert P.ContactSecrets(b"", b"", state).accepts() == (None, None, None)
        # "A listener that holds no current secret for the peer accepts a match with a pending
        # or previous one and otherwise reports the tag as not checked (never "their device
        # changed")", with or without a secret of its own.
        for mine in (None, old_mine):
            for previous in (None, prev_theirs):
                for pending in (None, (new_mine, new_theirs)):
                    for committed in (False, True):
                        if pending is None and committed:
                            continue

                        def rec():
                            return P.ContactSecrets(mine, None, state, pending, committed,
                                                    previous)
                        c = rec()
                        assert c.accepts() == (None, pending and new_theirs, previous)
                        if pending is not None:
                            assert c.classify(lambda s: s == new_theirs) == P.HEARD_NEW
                            assert c.record(True, P.HEARD_NEW) == P.VERIFIED
                            assert (c.mine, c.theirs, c.pending, c.previous, c.state) == (
                                new_mine, new_theirs, None, None, P.VERIFIED)
                        if previous is not None:
                            c = rec()
                            assert c.classify(lambda s: s == prev_theirs) == P.HEARD_PREVIOUS
                            assert c.classify(lambda s: s != b"") == P.HEARD_PREVIOUS
                            assert c.record(True, P.HEARD_PREVIOUS) == P.VERIFIED
                            assert (c.mine, c.theirs, c.pending, c.committed, c.previous,
                                    c.state) == (mine, prev_theirs, pending, committed, None,
                                                 P.VERIFIED)
                        # "a voice tag then changes none of its stored device secrets (the
                        # contact's state still follows the table of 10.1): only an Online
                        # Verify device tag (32 bytes) completes or adopts there".
                        for heard in (P.HEARD_NEW, P.HEARD_PREVIOUS):
                            c = rec()
                            assert c.record(True, heard, voice_tag=True) == P.VERIFIED
                            fresh = rec()
                            assert (c.mine, c.theirs, c.pending, c.committed, c.previous) == (
                                fresh.mine, fresh.theirs, fresh.pending, fresh.committed, fresh.previous)
                            assert c.state == P.session_outcome(True, True, state)[1]
                        c = rec()
                        assert c.classify(lambda s: False) == P.HEARD_UNCHECKED
                        assert c.record(True, P.HEARD_UNCHECKED) == P.VERIFIED_TAG_UNCHECKED
                        assert _snapshot({"x": c})["x"][3:] == _snapshot({"x": rec()})["x"][3:]
                        assert (c.mine, c.theirs) == (mine, None)
                        assert c.state == P.session_outcome(True, None, state)[1]
        # The order alone, every combination of matches.
        for cur in (False, True):
            for pen in (False, True):
                for prev in (False, True):
                    for holds in (False, True):
                        if cur and not holds:
                            continue
                        want = (P.HEARD_CURRENT if cur else P.HEARD_PREVIOUS if prev else
                                P.HEARD_NEW if pen else
                                P.HEARD_OTHER if holds else P.HEARD_UNCHECKED)
                        assert P.read_heard_tag(cur, pen, prev, holds) == want
        c = P.ContactSecrets(None, None, state, None, False, prev_theirs)
        assert c.record(True, P.HEARD_PREVIOUS) == P.VERIFIED
        assert (c.theirs, c.previous, c.state) == (prev_theirs, None, P.VERIFIED)
    with pytest.raises(P.ProtocolError):
        P.ContactSecrets(old_mine, old_theirs).complete()
    with pytest.raises(P.ProtocolError):
        P.ContactSecrets(old_mine, old_theirs).commit()
    with pytest.raises(ValueError):
        P.ContactSecrets(old_mine, old_theirs).record(True, "nonsense")


def test_store_pending_keeps_what_either_side_may_say():
    """10.3: "Storing a new pending pair while an earlier update is unresolved must not lose a
    secret either side may be saying: the side's current secret becomes the one it says now
    (its earlier new secret if it had committed), and the peer's earlier pending new secret
    becomes the previous one (or the previous one is kept if nothing was pending)"."""
    m0, t0, m1, t1, m2, t2, p0 = (bytes([i]) * 16 for i in range(1, 8))
    for state in P.CONTACT_STATES:
        for committed in (False, True):  # how the new pair is stored (responder, initiator)
            then = P.VERIFIED if committed else state
            # Nothing pending: the previous one (none, or one kept) stays.
            for previous in (None, p0):
                c = P.ContactSecrets(m0, t0, state, None, False, previous)
                c.store_pending(m2, t2, committed)
                assert (c.mine, c.theirs, c.pending, c.committed, c.previous, c.state) == (
                    m0, t0, (m2, t2), committed, previous, then)
            # An earlier pair pending, committed or not; a previous one is replaced.
            for earlier_committed in (False, True):
                for previous in (None, p0):
                    c = P.ContactSecrets(m0, t0, state, (m1, t1), earlier_committed, previous)
                    said = c.says()
                    c.store_pending(m2, t2, committed)
                    assert c.mine == said == (m1 if earlier_committed else m0)
                    assert (c.theirs, c.pending, c.committed, c.previous, c.state) == (
                        t0, (m2, t2), committed, t1, then)
                    assert c.accepts() == (t0, t2, t1)


def test_online_verify_hears_the_previous_new_secret():
    """The case (4, 0, 3) and (5, 0, 3) of two updates in a row, by hand.  The first update
    reaches the initiator's commit (k1 = 4) or ends (k1 = 5); the second stops after the
    initiator's NEW, so only the responder stores its pair: over an unresolved one, so it
    keeps saying what it said (its old secret, or its first new one if it had committed) and
    keeps the initiator's first new secret, which the initiator says, as the previous one.
    An Online Verify session checks the initiator's device tag against it (HEARD_PREVIOUS)
    and, once the SAS is confirmed, makes it the initiator's current secret."""
    rng = random.Random(1045)
    for k1 in (4, 5):
        for _ in range(10):
            seed, window, pids, esks, news = _pu_random(rng)
            ini_x = _pu_initiator(pids)
            res_x = _OTHER[ini_x]
            contacts = _pu_contacts(rng)
            old = {x: contacts[x].mine for x in "ab"}
            _pu_run(_pu_sessions(seed, window, pids, esks, news, contacts), deliver=k1)
            news2 = {x: rng.randbytes(16) for x in "ab"}
            _pu_run(_pu_sessions(seed, window + 1, pids, {x: rng.randbytes(32) for x in "ab"},
                                 news2, contacts), deliver=3)
            r = contacts[res_x]
            said = news[res_x] if k1 == 5 else old[res_x]
            assert (r.mine, r.theirs, r.pending, r.committed, r.previous) == (
                said, old[ini_x], (news2[res_x], news2[ini_x]), False, news[ini_x])
            assert contacts[ini_x].says() == news[ini_x]
            assert contacts[ini_x].pending == (news[ini_x], news[res_x])
            s = {x: P.OnlineVerifySession.for_contact(seed, window + 2, pids[x],
                                                      pids[_OTHER[x]], rng.randbytes(32),
                                                      rng.randbytes(32), contacts[x])
                 for x in "ab"}
            assert _ov_run(s)[1] == {}
            heard = s[res_x].result
            t = P.tag_key(seed)
            assert heard.expected_peer_previous_dtag == P.ov_device_tag(
                t, pids[ini_x], heard.th, news[ini_x]) == heard.dtag_i
            assert heard.peer_tag_heard == P.HEARD_PREVIOUS
            assert heard.tag_outcome == P.VERIFIED
            assert s[ini_x].result.peer_tag_heard == (P.HEARD_NEW if k1 == 5 else
                                                      P.HEARD_CURRENT)
            assert P.ov_record(contacts[res_x], heard, True) == P.VERIFIED
            assert (r.mine, r.theirs, r.pending, r.committed, r.previous, r.state) == (
                said, news[ini_x], (news2[res_x], news2[ini_x]), False, None, P.VERIFIED)
            assert P.ov_record(contacts[ini_x], s[ini_x].result, True) == P.VERIFIED
            _each_said_is_accepted(contacts)


def test_online_verify_tags_during_a_pin_update():
    """11.3: the peer's device tag is compared with the ones of its current secret and, after
    a Security PIN Update, its pending and previous new ones; a tag of the new one, once the
    SAS is confirmed,
    completes the update (10.1, 10.3); rejecting the SAS, or a failed session, changes
    nothing."""
    rng = random.Random(1042)
    for _ in range(20):
        seed, window, pids, esks, news = _pu_random(rng)
        ini_x = _pu_initiator(pids)
        res_x = _OTHER[ini_x]
        contacts = _pu_contacts(rng)
        _pu_run(_pu_sessions(seed, window, pids, esks, news, contacts), deliver=4)
        # The initiator says its new secret; the responder its old one.
        s = {x: P.OnlineVerifySession.for_contact(seed, window + 1, pids[x], pids[_OTHER[x]],
                                                  rng.randbytes(32), rng.randbytes(32),
                                                  contacts[x]) for x in "ab"}
        assert _ov_run(s)[1] == {}
        assert s[res_x].result.peer_tag_heard == P.HEARD_NEW
        assert s[ini_x].result.peer_tag_heard == P.HEARD_CURRENT
        r = s[res_x].result
        t = P.tag_key(seed)
        assert r.expected_peer_new_dtag == P.ov_device_tag(t, pids[ini_x], r.th, news[ini_x])
        assert r.dtag_i == r.expected_peer_new_dtag != r.expected_peer_dtag
        for x in "ab":
            assert s[x].result.tag_outcome == P.VERIFIED
        before = _snapshot(contacts)
        # Rejected SAS, or a failed session: nothing changes.
        assert P.ov_record(contacts[res_x], r, False) is None
        assert P.ov_record(contacts[res_x], None, True) is None
        assert _snapshot(contacts) == before
        # Confirmed: the responder completes; the initiator heard the old secret.
        assert P.ov_record(contacts[res_x], r, True) == P.VERIFIED
        assert P.ov_record(contacts[ini_x], s[ini_x].result, True) == P.VERIFIED
        assert contacts[res_x].pending is None and contacts[ini_x].pending is not None
        assert contacts[res_x].says() == news[res_x]
    # The comparison alone (11.3 with 10.3): current, pending new, previous new.
    one, two, three, other = (bytes([i]) * 32 for i in range(1, 5))
    heard, outcome = P.ov_tag_heard, P.ov_tag_outcome
    assert heard(one, one, two, three) == P.HEARD_CURRENT
    assert heard(two, one, two, three) == P.HEARD_NEW
    assert heard(three, one, two, three) == P.HEARD_PREVIOUS
    # "the current one wins, then the previous one, then the pending one".
    assert heard(one, one, one, one) == P.HEARD_CURRENT
    assert heard(one, one, one, None) == heard(one, one, None, one) == P.HEARD_CURRENT
    assert heard(two, one, two, two) == P.HEARD_PREVIOUS
    assert heard(two, None, two, two) == P.HEARD_PREVIOUS
    # A dtag of none of them: their device changed with a current secret stored; without one,
    # "otherwise reports the tag as not checked (never "their device changed")".
    for expected in ((one, two, three), (one, None, None), (one, two, None), (one, None, three)):
        assert outcome(other, *expected) == P.VERIFIED_DEVICE_CHANGED
    for expected in ((None, None, None), (None, two, None), (None, None, three),
                     (None, two, three)):
        assert heard(other, *expected) == P.HEARD_UNCHECKED
        assert outcome(other, *expected) == P.VERIFIED_TAG_UNCHECKED
    assert heard(two, None, two) == P.HEARD_NEW and heard(three, None, None, three) == (
        P.HEARD_PREVIOUS)
    assert outcome(two, None, two) == P.VERIFIED and outcome(three, None, None, three) == (
        P.VERIFIED)


_TWO_UPDATES_TRIALS = 4


@pytest.mark.parametrize("k2", range(6))
@pytest.mark.parametrize("between", (0, 1))
@pytest.mark.parametrize("k1", range(6))
def test_pin_update_two_interrupted_updates(k1, between, k2):
    """10.3: "every pair of interruption points of two updates in a row, with or without a
    verification between them, recovers" (6 x 2 x 6 = 72 cases).  A first update interrupted
    after k1 of its 5 frames, ``between`` rounds of tag checks, a second update with fresh
    keys and secrets interrupted after k2 frames; then three rounds of tag checks never say
    "their device changed", and a complete update followed by two rounds leaves nothing
    pending or previous, both sides verified and holding each other's newest secrets.  Each
    case runs with every kind of tag check (voice tags said together or one side first, and
    Online Verify), random starting states and either KEY first.

    With one pending pair and nothing else (10.3 before the previous new secret), among
    others (4, 0, 3), (5, 0, 3) and (4, 1, 4) ended in "their device changed": the responder
    replaced the pending pair holding the initiator's committed secret, or the initiator the
    one holding the responder's adopted secret.  The rule for storing a pair over an
    unresolved one keeps those as this side's current secret or the peer's previous one."""
    rng = random.Random(1043 + 100 * k1 + 10 * between + k2)
    postponed = [0]
    for trial in range(_TWO_UPDATES_TRIALS):
        for mode in _TAG_MODES:
            seed, window, pids, esks, news = _pu_random(rng, short_pid=trial % 4 == 3)
            ini_x = _pu_initiator(pids)
            res_x = _OTHER[ini_x]
            contacts = _pu_contacts(rng, rng.choice(P.CONTACT_STATES))
            _pu_run(_pu_sessions(seed, window, pids, esks, news, contacts), deliver=k1,
                    first=rng.choice("ab"))
            w = window
            for _ in range(between):
                w += 1 + rng.randrange(3)
                outcomes = _tag_round(seed, w, pids, contacts, mode, rng)
                assert P.VERIFIED_DEVICE_CHANGED not in outcomes, (mode, "between")
                _each_said_is_accepted(contacts)
            before = _snapshot(contacts)
            news2 = {x: rng.randbytes(16) for x in "ab"}
            w += 1
            s2 = _pu_sessions(seed, w, pids, {x: rng.randbytes(32) for x in "ab"}, news2,
                              contacts)
            _pu_run(s2, deliver=k2, first=rng.choice("ab"))
            # The second update stored by the commit order, over what the first left.
            assert (contacts[res_x].pending == (news2[res_x], news2[ini_x])) == (k2 >= 3)
            assert (contacts[ini_x].pending == (news2[ini_x], news2[res_x])) == (k2 >= 4)
            assert contacts[ini_x].committed == (k2 >= 4 or before[ini_x][4])
            for x, stored_from in ((res_x, 3), (ini_x, 4)):
                if k2 < stored_from:
                    assert _snapshot(contacts)[x] == before[x]
            _each_said_is_accepted(contacts)
            for _ in range(3):
                w += 1 + rng.randrange(3)
                outcomes = _tag_round(seed, w, pids, contacts, mode, rng)
                assert P.VERIFIED_DEVICE_CHANGED not in outcomes, (mode, trial)
                assert set(outcomes) == {P.VERIFIED}, (mode, trial)
                _each_said_is_accepted(contacts)
            # A complete update, then two rounds.
            news3 = {x: rng.randbytes(16) for x in "ab"}
            w += 1
            s3 = _pu_sessions(seed, w, pids, {x: rng.randbytes(32) for x in "ab"}, news3,
                              contacts)
            assert _pu_run(s3, first=rng.choice("ab"))[1] == {}
            for x in "ab":
                assert contacts[x].says() == news3[x]
            collided = {x: 0 for x in "ab"}
            for _ in range(2):
                w += 1 + rng.randrange(3)
                misread = set()
                outcomes = _tag_round(seed, w, pids, contacts, mode, rng, misread)
                assert P.VERIFIED_DEVICE_CHANGED not in outcomes, (mode, trial)
                for x in misread:
                    collided[x] += 1
            # Two rounds complete both sides, except one whose every check read the peer's
            # new secret as its current or previous one because the two-digit tags coincided
            # ("the current one wins, then the previous one, then the pending one"; 1 in 100
            # a round for voice tags): for it, later rounds do.
            for x in "ab":
                if contacts[x].pending is not None:
                    assert mode != "ov" and collided[x] == 2, (mode, trial, x)
                    postponed[0] += 1
            for _ in range(4):
                if all(c.pending is None for c in contacts.values()):
                    break
                w += 1
                outcomes = _tag_round(seed, w, pids, contacts, mode, rng)
                assert P.VERIFIED_DEVICE_CHANGED not in outcomes, (mode, trial)
            for x in "ab":
                c = contacts[x]
                assert (c.pending, c.committed, c.previous) == (None, False, None), (mode, x)
                assert (c.mine, c.theirs) == (news3[x], news3[_OTHER[x]])
                assert c.state == P.VERIFIED
    assert postponed[0] <= 1


@pytest.mark.parametrize("new_device", (P.INITIATOR, P.RESPONDER))
def test_pin_update_interruption_without_a_current_secret(new_device):
    """10.3 "every interruption leaves a recoverable state", for the contact a Security PIN
    Update is typically run for: D's device changed (an identity transfer left the device
    secrets behind) and D gave C a degradation code (10.2), so D's device holds its interim
    secret r as its own and no secret of C's, and C holds r for D, degraded with the change
    acknowledged.  For every interruption point, two rounds of tag checks never say "their
    device changed": D, holding no current secret for C, "accepts a match with a pending or
    previous one and otherwise reports the tag as not checked (never "their device
    changed")", and "a voice tag then changes nothing in its record: only an Online Verify
    device tag (32 bytes) completes or adopts there".  A later complete update and tag checks
    leave C holding D's new secret, verified; D completes at its first Online Verify session
    and, "until then it keeps accepting the pending and previous secrets, which is safe"."""
    rng = random.Random(1044)
    unchecked = {k: 0 for k in range(6)}
    for k in range(6):
        for mode in _TAG_MODES:
            seed, window, pids, esks, news = _pu_random(rng)
            ini_x = _pu_initiator(pids)
            d = ini_x if new_device == P.INITIATOR else _OTHER[ini_x]
            c = _OTHER[d]
            r = rng.randbytes(P.DEGRADATION_SECRET_BYTES)
            contacts = {d: P.ContactSecrets(r, None, P.VERIFIED),
                        c: P.ContactSecrets(rng.randbytes(16), r, P.DEGRADED_ACKNOWLEDGED)}
            _pu_run(_pu_sessions(seed, window, pids, esks, news, contacts), deliver=k)
            stored = _snapshot(contacts)[d]
            w = window
            for i in range(2):
                w += 1 + rng.randrange(3)
                outcomes = _tag_round(seed, w, pids, contacts, mode, rng)
                assert P.VERIFIED_DEVICE_CHANGED not in outcomes, (k, mode, i)
                unchecked[k] += outcomes.count(P.VERIFIED_TAG_UNCHECKED)
                if mode != "ov":  # voice tags change nothing in D's record
                    assert _snapshot(contacts)[d] == stored, (k, mode, i)
                # D never says anything C does not accept, and C what D does not check.
                assert contacts[d].says() in contacts[c].accepts()
                assert contacts[d].state == P.VERIFIED
            # A later complete update, then tag checks until nothing is pending at C, then
            # (after voice sessions) one Online Verify session, which completes D.
            news2 = {x: rng.randbytes(16) for x in "ab"}
            w += 1
            s2 = _pu_sessions(seed, w, pids, {x: rng.randbytes(32) for x in "ab"}, news2,
                              contacts)
            assert _pu_run(s2, first=rng.choice("ab"))[1] == {}
            for _ in range(6):
                if contacts[c].pending is None and (mode != "ov" or
                                                    contacts[d].pending is None):
                    break
                w += 1
                outcomes = _tag_round(seed, w, pids, contacts, mode, rng)
                assert P.VERIFIED_DEVICE_CHANGED not in outcomes, (k, mode)
            assert (contacts[c].mine, contacts[c].theirs) == (news2[c], news2[d]), (k, mode)
            if mode != "ov":
                assert contacts[d].theirs is None and contacts[d].pending is not None
                assert contacts[d].says() in contacts[c].accepts()
                w += 1
                assert P.VERIFIED_DEVICE_CHANGED not in _ov_round(seed, w, pids, contacts, rng)
            for x in "ab":
                assert contacts[x].pending is None and contacts[x].previous is None, (k, mode)
                assert (contacts[x].mine, contacts[x].theirs) == (news2[x], news2[_OTHER[x]])
                assert contacts[x].state == P.VERIFIED
    # Before anybody says a new secret (k <= 3) C says its old one, which D never held: D
    # reports the tag as not checked.
    assert unchecked[0] > 0 and unchecked[3] > 0


def _collision_window(seed, window, pid, secrets_alike, secret_apart=None):
    """The first window after ``window`` in which the two-digit tags of the secrets in
    ``secrets_alike`` (spoken by ``pid``) coincide, and the one of ``secret_apart``, if
    given, differs from them."""
    t = P.tag_key(seed)
    for w in range(window + 1, window + 100_000):
        tags = {P.device_tag(t, pid, w, x) for x in secrets_alike}
        if len(tags) == 1 and (not secret_apart or
                               P.device_tag(t, pid, w, secret_apart) not in tags):
            return w
    raise AssertionError("no such window")


def test_pin_update_tie_break_previous_before_pending():
    """10.3: "When several secrets give the heard tag (1 in 100 for voice tags), the current
    one wins, then the previous one, then the pending one: a wrong guess of the current or
    previous one is corrected by a later session, a wrong completion would not be."

    Two updates in a row, the first interrupted after k1 frames and the second after k2,
    leave a side holding the peer's previous new secret and a pending pair.  In a window
    chosen so that the peer's previous and pending new secrets give the same two-digit tag
    (and its current one another), the peer speaks first: the tag reads as the previous one,
    which becomes the peer's current one, the pending pair stays and the contact is
    verified.  When the peer said its previous-slot secret this is right, and reading it as
    the pending one would have completed this side wrongly ("their device changed" at once
    or later); when the peer said its pending new secret it is a wrong guess, corrected by
    the next session.  Either way no check says "their device changed" and a later complete
    update ends clean."""
    rng = random.Random(1046)
    cases = said_previous = said_pending = wrong_completion_fails = 0
    for k1 in range(3, 6):
        for k2 in range(3, 6):
            for listener_role, stores_from in ((P.RESPONDER, 3), (P.INITIATOR, 4)):
                if k1 < stores_from or k2 < stores_from:
                    continue  # this side never holds both a previous and a pending secret
                for trial in range(3):
                    seed, window, pids, esks, news = _pu_random(rng)
                    ini_x = _pu_initiator(pids)
                    x = ini_x if listener_role == P.INITIATOR else _OTHER[ini_x]
                    y = _OTHER[x]
                    contacts = _pu_contacts(rng, rng.choice(P.CONTACT_STATES))
                    _pu_run(_pu_sessions(seed, window, pids, esks, news, contacts), deliver=k1)
                    news2 = {z: rng.randbytes(16) for z in "ab"}
                    _pu_run(_pu_sessions(seed, window + 1, pids,
                                         {z: rng.randbytes(32) for z in "ab"}, news2,
                                         contacts), deliver=k2)
                    lx = contacts[x]
                    current, pending_new, previous = lx.accepts()
                    assert (previous, pending_new) == (news[y], news2[y]), (k1, k2)
                    said = contacts[y].says()
                    w = _collision_window(seed, window + 1, pids[y], (previous, pending_new),
                                          current)
                    if said == previous:
                        # Reading the tag as the pending one instead would complete this
                        # side while the peer never learns its new secret, or never said it.
                        wrong = _copy(contacts)
                        wrong[x].complete()
                        found = []
                        ww = w
                        for _ in range(3):
                            ww += 1
                            found += _voice_round(seed, ww, pids, wrong, "together")
                        wrong_completion_fails += P.VERIFIED_DEVICE_CHANGED in found
                    before = _snapshot(contacts)[x]
                    t = P.tag_key(seed)
                    tag = P.voice_tag_said(seed, w, pids[y], contacts[y])
                    heard = lx.classify(lambda s: P.device_tag(t, pids[y], w, s) == tag)
                    outcomes = _voice_round(seed, w, pids, contacts, y)
                    assert P.VERIFIED_DEVICE_CHANGED not in outcomes, (k1, k2, trial)
                    if said == current:
                        assert heard == P.HEARD_CURRENT
                        continue
                    cases += 1
                    assert said in (previous, pending_new), (k1, k2)
                    assert heard == P.HEARD_PREVIOUS, (k1, k2)
                    said_previous += said == previous
                    said_pending += said == pending_new
                    # The previous one is the peer's current one; the pending pair stays.
                    assert (lx.mine, lx.theirs, lx.pending, lx.committed, lx.previous,
                            lx.state) == (before[0], previous, before[3], before[4], None,
                                          P.VERIFIED)
                    # The next session (Online Verify: its device tags do not coincide)
                    # corrects a wrong guess: the peer's pending new secret completes this
                    # side.  A right one stays until the peer says its pending new secret
                    # (it may have moved on in the voice session, on hearing this side).
                    said_next = contacts[y].says()
                    assert said_next in (previous, pending_new)
                    w += 1
                    outcomes = _tag_round(seed, w, pids, contacts, "ov", rng)
                    assert P.VERIFIED_DEVICE_CHANGED not in outcomes, (k1, k2, trial)
                    if said_next == pending_new:
                        assert (lx.mine, lx.theirs, lx.pending, lx.previous) == (
                            before[3][0], pending_new, None, None)
                    else:
                        assert lx.theirs == previous and lx.pending == before[3]
                    # Later sessions of every kind: never "their device changed".
                    for _ in range(3):
                        w += 1 + rng.randrange(3)
                        outcomes = _tag_round(seed, w, pids, contacts,
                                              rng.choice(_TAG_MODES), rng)
                        assert P.VERIFIED_DEVICE_CHANGED not in outcomes, (k1, k2, trial)
                        _each_said_is_accepted(contacts)
                    # A complete update ends clean.
                    news3 = {z: rng.randbytes(16) for z in "ab"}
                    w += 1
                    s3 = _pu_sessions(seed, w, pids, {z: rng.randbytes(32) for z in "ab"},
                                      news3, contacts)
                    assert _pu_run(s3, first=rng.choice("ab"))[1] == {}
                    for _ in range(6):
                        if all(c.pending is None for c in contacts.values()):
                            break
                        w += 1
                        outcomes = _tag_round(seed, w, pids, contacts, "ov", rng)
                        assert P.VERIFIED_DEVICE_CHANGED not in outcomes
                    for z in "ab":
                        c = contacts[z]
                        assert (c.pending, c.committed, c.previous) == (None, False, None)
                        assert (c.mine, c.theirs) == (news3[z], news3[_OTHER[z]])
                        assert c.state == P.VERIFIED
    assert said_previous > 0 and said_pending > 0
    assert wrong_completion_fails == said_previous


@pytest.mark.parametrize("mode", ("together", "c first"))
def test_pin_update_no_current_secret_tag_collision(mode):
    """The case a listener without a current secret must not misread, forced: D (a new
    device: its interim secret r, no secret of C's) is the responder, the update is
    interrupted after k = 3 frames (C stored nothing), and the voice sessions take place in
    windows where C's old secret (which D never held) and C's new secret (pending at D) give
    the same two-digit tag.  10.3: "since the peer may be saying a secret this listener never
    held, whose two-digit tag can match by chance, a voice tag then changes nothing in its
    record: only an Online Verify device tag (32 bytes) completes or adopts there".  So D
    accepts the tag and does not complete; no check says "their device changed"; an Online
    Verify session reads C's old secret as not checked, and after a later complete update
    the next Online Verify session completes D: both end clean."""
    rng = random.Random(1047)
    for _ in range(5):
        seed, window, pids, esks, news = _pu_random(rng)
        c = _pu_initiator(pids)
        d = _OTHER[c]
        r = rng.randbytes(P.DEGRADATION_SECRET_BYTES)
        contacts = {d: P.ContactSecrets(r, None, P.VERIFIED),
                    c: P.ContactSecrets(rng.randbytes(16), r, P.DEGRADED_ACKNOWLEDGED)}
        _pu_run(_pu_sessions(seed, window, pids, esks, news, contacts), deliver=3)
        assert contacts[d].pending == (news[d], news[c]) and contacts[c].pending is None
        stored = _snapshot(contacts)[d]
        w = window
        for i in range(2):
            w = _collision_window(seed, w, pids[c], (contacts[c].mine, news[c]))
            collided = set()
            outcomes = _voice_round(seed, w, pids, contacts,
                                    "together" if mode == "together" or i else c, collided)
            assert collided == {d}, (mode, i)  # the tag reads as C's pending new secret
            assert outcomes == [P.VERIFIED, P.VERIFIED], (mode, i)
            assert _snapshot(contacts)[d] == stored, (mode, i)  # D changed nothing
            assert contacts[c].state == P.DEGRADED_ACKNOWLEDGED  # "degraded stays degraded"
        # An Online Verify session: C's old secret, which D never held, is not checked.
        w += 1
        outcomes = _ov_round(seed, w, pids, contacts, rng)
        assert outcomes["ab".index(d)] == P.VERIFIED_TAG_UNCHECKED
        assert outcomes["ab".index(c)] == P.VERIFIED
        assert _snapshot(contacts)[d] == stored
        # A later complete update: a voice session completes C, Online Verify completes D.
        news2 = {x: rng.randbytes(16) for x in "ab"}
        w += 1
        s2 = _pu_sessions(seed, w, pids, {x: rng.randbytes(32) for x in "ab"}, news2,
                          contacts)
        assert _pu_run(s2, first=rng.choice("ab"))[1] == {}
        w += 1
        outcomes = _voice_round(seed, w, pids, contacts, "together" if mode == "together" else c)
        assert P.VERIFIED_DEVICE_CHANGED not in outcomes
        assert contacts[c].pending is None and contacts[d].pending is not None
        assert contacts[d].theirs is None
        w += 1
        assert _ov_round(seed, w, pids, contacts, rng) == [P.VERIFIED, P.VERIFIED]
        for x in "ab":
            cx = contacts[x]
            assert (cx.pending, cx.committed, cx.previous) == (None, False, None), (mode, x)
            assert (cx.mine, cx.theirs) == (news2[x], news2[_OTHER[x]])
            assert cx.state == P.VERIFIED


# --------------------------------------------------------------------------------------------
# ristretto255 (RFC 9496) and CPace (the CFRG draft), for section 16.2
# --------------------------------------------------------------------------------------------

def _cpace_vector_file() -> pathlib.Path:
    """Tests/ItsMeCoreTests/Vectors/cpace-ristretto255.json of the repository holding this file:
    the draft's ristretto255 vectors, copied unchanged."""
    tail = pathlib.Path("Tests", "ItsMeCoreTests", "Vectors", "cpace-ristretto255.json")
    here = pathlib.Path(__file__).resolve()
    for parent in here.parents:
        if (parent / tail).is_file():
            return parent / tail
    return here.parents[3] / tail


CPACE_VECTORS = _cpace_vector_file()
needs_cpace_vectors = pytest.mark.skipif(
    not CPACE_VECTORS.is_file(), reason=f"no CPace draft vectors at {CPACE_VECTORS}"
)

# RFC 9496 appendix A.1: the encodings of 0 * B to 15 * B.
_RFC9496_MULTIPLES = """
0000000000000000000000000000000000000000000000000000000000000000
e2f2ae0a6abc4e71a884a961c500515f58e30b6aa582dd8db6a65945e08d2d76
6a493210f7499cd17fecb510ae0cea23a110e8d5b901f8acadd3095c73a3b919
94741f5d5d52755ece4f23f044ee27d5d1ea1e2bd196b462166b16152a9d0259
da80862773358b466ffadfe0b3293ab3d9fd53c5ea6c955358f568322daf6a57
e882b131016b52c1d3337080187cf768423efccbb517bb495ab812c4160ff44e
f64746d3c92b13050ed8d80236a7f0007c3b3f962f5ba793d19a601ebb1df403
44f53520926ec81fbd5a387845beb7df85a96a24ece18738bdcfa6a7822a176d
903293d8f2287ebe10e2374dc1a53e0bc887e592699f02d077d5263cdd55601c
02622ace8f7303a31cafc63f8fc48fdc16e1c8c8d234b2f0d6685282a9076031
20706fd788b2720a1ed2a5dad4952b01f413bcf0e7564de8cdc816689e2db95f
bce83f8ba5dd2fa572864c24ba1810f9522bc6004afe95877ac73241cafdab42
e4549ee16b9aa03099ca208c67adafcafa4c3f3e4e5303de6026e3ca8ff84460
aa52e000df2e16f55fb1032fc33bc42742dad6bd5a8fc0be0167436c5948501f
46376b80f409b29dc2b5f6f0c52591990896e5716f41477cd30085ab7f10301e
e0c418f7c8d9c4cdd7395b93ea124f3ad99021bb681dfc3302a9d99a2e53e64e
""".split()

# RFC 9496 appendix A.2: invalid encodings, by the check of section 4.3.1 that rejects them.
_RFC9496_BAD = {
    "non-canonical": """
        00ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff
        ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f
        f3ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f
        edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f""",
    "negative": """
        0100000000000000000000000000000000000000000000000000000000000000
        01ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f
        ed57ffd8c914fb201471d1c3d245ce3c746fcbe63a3679d51b6a516ebebe0e20
        c34c4e1826e5d403b78e246e88aa051c36ccf0aafebffe137d148a2bf9104562
        c940e5a4404157cfb1628b108db051a8d439e1a421394ec4ebccb9ec92a8ac78
        47cfc5497c53dc8e61c91d17fd626ffb1c49e2bca94eed052281b510b1117a24
        f1c6165d33367351b0da8f6e4511010c68174a03b6581212c71c0e1d026c3c72
        87260f7a2f12495118360f02c26a470f450dadf34a413d21042b43b9d93e1309""",
    "not-square": """
        26948d35ca62e643e26a83177332e6b6afeb9d08e4268b650f1f5bbd8d81d371
        4eac077a713c57b4f4397629a4145982c661f48044dd3f96427d40b147d9742f
        de6a7b00deadc788eb6b6c8d20c0ae96c2f2019078fa604fee5b87d6e989ad7b
        bcab477be20861e01e4a0e295284146a510150d9817763caf1a6f4b422d67042
        2a292df7e32cababbd9de088d1d1abec9fc0440f637ed2fba145094dc14bea08
        f4a9e534fc0d216c44b218fa0c42d99635a0127ee2e53c712f70609649fdff22
        8268436f8c4126196cf64b3c7ddbda90746a378625f9813dd9b8457077256731
        2810e5cbc2cc4d4eece54f61c6f69758e289aa7ab440b3cbeaa21995c2f4232b""",
    "negative-xy": """
        3eb858e78f5a7254d8c9731174a94f76755fd3941c0ac93735c07ba14579630e
        a45fdc55c76448c049a1ab33f17023edfb2be3581e9c7aade8a6125215e04220
        d483fe813c6ba647ebbfd3ec41adca1c6130c2beeee9d9bf065c8d151c5f396e
        8a2e1d30050198c65a54483123960ccc38aef6848e1ec8f5f780e8523769ba32
        32888462f8b486c68ad7dd9610be5192bbeaf3b443951ac1a8118419d9fa097b
        227142501b9d4355ccba290404bde41575b037693cef1f438c47f8fbf35d1165
        5c37cc491da847cfeb9281d407efc41e15144c876e0170b499a96a22ed31e01e
        445425117cb8c90edcbc7c1cc0e74f747f2c1efa5630a967c64f287792a48a4b""",
    "y-zero": """
        ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f""",
}

# RFC 9496 appendix A.3: the element derivation of SHA-512 of each label.
_RFC9496_FROM_HASH = [
    ("Ristretto is traditionally a short shot of espresso coffee",
     "3066f82a1a747d45120d1740f14358531a8f04bbffe6a819f86dfe50f44a0a46"),
    ("made with the normal amount of ground coffee but extracted with",
     "f26e5b6f7d362d2d2a94c5d0e7602cb4773c95a2e5c31a64f133189fa76ed61b"),
    ("about half the amount of water in the same amount of time",
     "006ccd2a9e6867e6a2c5cea83d3302cc9de128dd2a9a57dd8ee7b9d7ffe02826"),
    ("by using a finer grind.",
     "f8f0c87cf237953c5890aec3998169005dae3eca1fbb04548c635953c817f92a"),
    ("This produces a concentrated shot of coffee per volume.",
     "ae81e7dedf20a497e10c304a765c1767a42d6e06029758d2d7e8ef7cc4c41179"),
    ("Just pulling a normal shot short will produce a weaker shot",
     "e2705652ff9f5e44d3e841bf1c251cf7dddb77d140870d1ab2ed64f1a9ce8628"),
    ("and is not a Ristretto as some believe.",
     "80bd07262511cdde4863f8a7434cef696750681cb9510eea557088f76d9e5065"),
]


def test_ristretto255_generator_multiples():
    assert len(_RFC9496_MULTIPLES) == 16
    acc = R.IDENTITY
    for n, expected in enumerate(_RFC9496_MULTIPLES):
        assert R.encode(R.scalar_mult(n, R.GENERATOR)).hex() == expected, n
        assert R.encode(acc).hex() == expected, n  # by repeated addition too
        point = R.decode(h(expected))
        assert R.on_curve(point) and R.equal(point, acc)
        assert R.encode(point).hex() == expected
        acc = R.add(acc, R.GENERATOR)


def test_ristretto255_bad_encodings():
    counted = 0
    for reason, block in _RFC9496_BAD.items():
        for text in block.split():
            assert R.decode_failure(h(text)) == reason, text
            with pytest.raises(R.DecodeError):
                R.decode(h(text))
            # G.scalar_mult_vfy returns G.I for an encoding that does not decode.
            assert C.scalar_mult_vfy(h("01" + "00" * 31), h(text)) == C.IDENTITY
            counted += 1
    assert counted == 29
    for bad in (b"", bytes(31), bytes(33)):
        with pytest.raises(R.DecodeError):
            R.decode(bad)


def test_ristretto255_non_canonical_forms_of_valid_encodings():
    """A valid encoding with the top bit set, or with s + p in place of s, names the same field
    element but is not canonical: RFC 9496 rejects both (some versions of libsodium, 1.0.18
    among them, accept the top bit set)."""
    rng = random.Random(1602)
    for n in list(range(16)) + [rng.randrange(R.L) for _ in range(40)]:
        e = R.encode(R.scalar_mult(n, R.GENERATOR))
        assert R.decode_failure(e) is None
        top = e[:31] + bytes([e[31] | 0x80])
        assert R.decode_failure(top) == "non-canonical"
        s = int.from_bytes(e, "little")
        assert R.decode_failure((s + R.P).to_bytes(32, "little")) == "non-canonical"


def test_ristretto255_from_hash():
    for label, expected in _RFC9496_FROM_HASH:
        point = R.from_uniform_bytes(hashlib.sha512(label.encode("ascii")).digest())
        assert R.on_curve(point)
        assert R.encode(point).hex() == expected, label
    with pytest.raises(ValueError):
        R.from_uniform_bytes(bytes(63))
    # Only the low 255 bits of each half count: the top bit of bytes 31 and 63 is ignored.
    data = hashlib.sha512(b"x").digest()
    flipped = bytearray(data)
    flipped[31] ^= 0x80
    flipped[63] ^= 0x80
    assert R.encode(R.from_uniform_bytes(bytes(flipped))) == R.encode(R.from_uniform_bytes(data))


def test_ristretto255_group_laws():
    """The edwards25519 points standing for one element differ by a 4-torsion point, and the
    encoding (and equality) must not see the difference; the group has order L."""
    rng = random.Random(1603)
    b = R.GENERATOR
    t2 = R.Point(0, R.P - 1, 1, 0)  # (0, -1), of order 2
    t4 = R.Point(R.SQRT_M1, 0, 1, 0)  # (sqrt(-1), 0), of order 4
    for t in (t2, t4):
        assert R.on_curve(t)
        four = R.scalar_mult(4, t)
        assert four.x % R.P == 0 and (four.y - four.z) % R.P == 0
    assert R.encode(t2) == R.encode(t4) == R.IDENTITY_ENCODING
    assert R.encode(R.scalar_mult(R.L, b)) == R.IDENTITY_ENCODING
    assert R.encode(R.scalar_mult(R.L + 7, b)) == R.encode(R.scalar_mult(7, b))
    for _ in range(25):
        x, y = rng.randrange(R.L), rng.randrange(R.L)
        px, py = R.scalar_mult(x, b), R.scalar_mult(y, b)
        assert R.encode(R.add(px, py)) == R.encode(R.scalar_mult((x + y) % R.L, b))
        assert R.encode(R.scalar_mult(y, px)) == R.encode(R.scalar_mult(x, py))
        assert R.encode(R.add(px, R.negate(px))) == R.IDENTITY_ENCODING
        e = R.encode(px)
        assert R.encode(R.negate(px)) != e
        for t in (t2, t4, R.add(t2, t4)):
            moved = R.add(px, t)
            assert R.on_curve(moved) and R.equal(moved, px)
            assert R.encode(moved) == e
        assert not R.equal(px, py)
        u = R.from_uniform_bytes(rng.randbytes(64))
        eu = R.encode(u)
        assert R.decode_failure(eu) is None and R.encode(R.decode(eu)) == eu
        assert R.equal(R.decode(eu), u)
        # The encoding's s is non-negative and canonical.
        s = int.from_bytes(eu, "little")
        assert s < R.P and s % 2 == 0


def test_cpace_string_functions():
    """The draft's appendix: prepend_len, lv_cat, o_cat, transcript_ir, transcript_oc."""
    assert C.prepend_len(b"") == h("00")
    assert C.prepend_len(b"1234") == h("0431323334")
    assert C.prepend_len(bytes(range(127))) == h("7f") + bytes(range(127))
    assert C.prepend_len(bytes(range(128))) == h("8001") + bytes(range(128))
    assert C.lv_cat(b"1234", b"5", b"", b"678") == h("043132333401350003363738")
    for args in ((b"",), (b"x" * 300, b"y"), (bytes(range(200)),)):
        assert C.lv_cat(*args) == P.lv_cat(*args)
    assert C.o_cat(b"ABCD", b"BCD") == h("6f6342434441424344")
    assert C.o_cat(b"BCD", b"ABCDE") == h("6f634243444142434445")
    # lexiographically_larger of the draft is Python's ordering of bytes.
    for a, b_, larger in ((b"\0", b"\0\0", False), (b"\1", b"\0\0", True),
                          (b"\0\0", b"\0", True), (b"\0\0", b"\1", False),
                          (b"\0\1", b"\1", False), (b"ABCD", b"BCD", False)):
        assert (a > b_) is larger
    assert C.transcript_ir(b"123", b"PartyA", b"234", b"PartyB") == h(
        "03313233065061727479410332333406506172747942")
    assert C.transcript_ir(b"3456", b"PartyA", b"2345", b"PartyB") == h(
        "043334353606506172747941043233343506506172747942")
    assert C.transcript_oc(b"123", b"PartyA", b"234", b"PartyB") == h(
        "6f6303323334065061727479420331323306506172747941")
    assert C.transcript_oc(b"3456", b"PartyA", b"2345", b"PartyB") == h(
        "6f63043334353606506172747941043233343506506172747942")


# The draft's "Test vectors for calculate_generator with group ristretto255" (not in the JSON).
_DRAFT_GENERATOR_STRING = (
    "11435061636552697374726574746f3235350850617373776f726464" + "00" * 28 * 3
    + "00000000000000000000000000000000180b415f696e69746961746f"
    "720b425f726573706f6e646572107e4b4791d6a8ef019b936c79fb7f"
    "2c57")
_DRAFT_GENERATOR_HASH = (
    "da6d3ddc8802fca9058755ffd3ebde08a9c2c74945901a258482a288"
    "b6663af06bf645c93cd1c51512307199c80e84908916d983b34af772"
    "05f90851a657ee27")
_DRAFT_TRANSCRIPT_IR = (
    "20d6bac480f2c386c394efc7c47adb9925dcd2630b64f240c50f8d0e"
    "ec482b915703414461203ea7e0b19560d7c0b0f5734f63b955286dfa"
    "8232b5ebe63324e2d9e7433f725803414462")


def _load_cpace_vectors():
    data = json.loads(CPACE_VECTORS.read_text(encoding="utf-8"))
    expect_keys(data, "source G_Coffee25519 G_Coffee25519_points")
    return data


@needs_cpace_vectors
def test_cpace_draft_vectors():
    v = _load_cpace_vectors()["G_Coffee25519"]
    expect_keys(v, "PRS CI sid g ya ADa Ya yb ADb Yb K ISK_IR ISK_SY sid_output_ir "
                   "sid_output_oc")
    prs, ci, sid = h(v["PRS"]), h(v["CI"]), h(v["sid"])
    assert prs == b"Password"
    gen_str = C.generator_string(C.DSI, prs, ci, sid, C.H_S_IN_BYTES)
    assert len(gen_str) == 170 and gen_str.hex() == _DRAFT_GENERATOR_STRING
    assert C.generator_hash(prs, ci, sid).hex() == _DRAFT_GENERATOR_HASH
    g = C.calculate_generator(prs, ci, sid)
    assert R.encode(g) == h(v["g"])
    ya, yb, ada, adb = h(v["ya"]), h(v["yb"]), h(v["ADa"]), h(v["ADb"])
    assert (ada, adb) == (b"ADa", b"ADb")
    # The draft's scalars are already sample_scalar outputs (below 2^252).
    assert C.sample_scalar(ya) == ya and C.sample_scalar(yb) == yb
    big_ya, big_yb = C.scalar_mult(ya, g), C.scalar_mult(yb, g)
    assert big_ya == h(v["Ya"]) and big_yb == h(v["Yb"])
    k = C.shared_point(ya, big_yb)
    assert k == C.shared_point(yb, big_ya) == h(v["K"])
    assert C.transcript_ir(big_ya, ada, big_yb, adb).hex() == _DRAFT_TRANSCRIPT_IR
    assert C.isk(sid, k, big_ya, ada, big_yb, adb) == h(v["ISK_IR"])
    assert C.isk(sid, k, big_ya, ada, big_yb, adb, ordered=False) == h(v["ISK_SY"])
    assert C.isk_input(sid, k, big_ya, ada, big_yb, adb)[:21 + 1] == b"\x15" + C.DSI_ISK
    assert C.sid_output(big_ya, ada, big_yb, adb) == h(v["sid_output_ir"])
    assert C.sid_output(big_ya, ada, big_yb, adb, ordered=False) == h(v["sid_output_oc"])


@needs_cpace_vectors
def test_cpace_draft_invalid_points():
    """The draft's "Invalid inputs for scalar_mult_vfy": Y_i1 does not decode and Y_i2 is G.I;
    scalar_mult_vfy gives G.I for both, and a party receiving either MUST abort."""
    v = _load_cpace_vectors()["G_Coffee25519_points"]
    expect_keys({k.replace(" ", "_"): None for k in v}, "Valid Invalid_Y1 Invalid_Y2")
    valid = v["Valid"]
    expect_keys(valid, "s X G.scalar_mult(s,decode(X)) G.scalar_mult_vfy(s,X)")
    s, x = h(valid["s"]), h(valid["X"])
    assert C.scalar_mult(s, R.decode(x)) == h(valid["G.scalar_mult(s,decode(X))"])
    assert C.scalar_mult_vfy(s, x) == h(valid["G.scalar_mult_vfy(s,X)"])
    y1, y2 = h(v["Invalid Y1"]), h(v["Invalid Y2"])
    assert R.decode_failure(y1) is not None  # X with its first byte changed
    assert R.decode_failure(y2) is None and y2 == C.IDENTITY  # the neutral element decodes
    for bad in (y1, y2):
        assert C.scalar_mult_vfy(s, bad) == C.IDENTITY
        with pytest.raises(C.CPaceAbort):
            C.shared_point(s, bad)
    # A scalar that is a multiple of the group order gives G.I from a valid share too.
    with pytest.raises(C.CPaceAbort):
        C.shared_point(bytes(32), x)
    with pytest.raises(C.CPaceAbort):
        C.shared_point(C.GROUP_ORDER.to_bytes(32, "little"), x)


# --------------------------------------------------------------------------------------------
# remote.json (section 16)
# --------------------------------------------------------------------------------------------

_REMOTE_EXCHANGE_KEYS = (
    "invite_code_text encryption_code_text realtime invite_id room_id sid prs ci "
    "generator_string generator_hash generator inviter invitee k isk_input isk kc_i kc_r kp_i "
    "kp_r kd_i kd_r tpake_input tpake tag_i tag_r invite_message accept_message reply_message shared seed "
    "transcript_input transcript_hash sas_value sas_text")
_REMOTE_PARTY_KEYS = (
    "random_seed identity_seed identity_public fingerprint_text name_text ephemeral_secret "
    "ephemeral_public device_secret scalar share payload_data payload signed_message aad "
    "sealed_payload decision decision_aad decision_message")
_REMOTE_INVITER_KEYS = _REMOTE_PARTY_KEYS + " commitment rest"


def _remote_sides(inputs, realtime=False):
    """The inviter and the invitee of one exchange from their inputs: ``inputs`` holds, for
    "inviter" and "invitee", identity_seed, ephemeral_secret, device_secret, name and scalar
    (bytes), and the codes as each side holds them (invite_code and encryption_code) and the
    inviter's sid."""
    i, r = inputs["inviter"], inputs["invitee"]
    return (P.RemoteExchange.inviter(i["identity_seed"], i["ephemeral_secret"],
                                     i["device_secret"], i["name"], i["invite_code"],
                                     i["encryption_code"], i["sid"], i["scalar"],
                                     realtime=realtime),
            P.RemoteExchange.invitee(r["identity_seed"], r["ephemeral_secret"],
                                     r["device_secret"], r["name"], r["invite_code"],
                                     r["encryption_code"], r["scalar"], realtime=realtime))


def _remote_run(inviter, invitee, tamper=None):
    """Run an exchange through an in-memory relay: INVITE, ACCEPT, REPLY in turn
    (``_run_link``).  Returns (messages sent, failures by side: 'inviter' or 'invitee')."""
    return _run_link({"inviter": inviter, "invitee": invitee}, ["inviter", "invitee"], tamper=tamper)


def _remote_inputs(ex) -> dict:
    out = {}
    for who in ("inviter", "invitee"):
        party = ex[who]
        out[who] = {"identity_seed": h(party["identity_seed"]),
                    "ephemeral_secret": h(party["ephemeral_secret"]),
                    "device_secret": h(party["device_secret"]),
                    "name": party["name_text"].encode("utf-8"), "scalar": h(party["scalar"])}
    # The inviter holds the codes it drew (canonical); the invitee types what it was sent.
    out["inviter"].update(invite_code=P.parse_code(ex["invite_code_text"]),
                          encryption_code=P.parse_code(ex["encryption_code_text"]),
                          sid=h(ex["sid"]))
    out["invitee"].update(invite_code=ex["invite_code_text"],
                          encryption_code=ex["encryption_code_text"])
    return out


def _remote_fields(res: P.RemoteResult) -> dict:
    """The values of a remote.json exchange as one side's result names them (of the party
    fields, those a side holds: its own, or what it received)."""
    return {
        "invite_code_text": P.format_code(res.invite_code),
        "encryption_code_text": P.format_code(res.encryption_code),
        "realtime": res.realtime, "invite_id": res.invite_id.hex(),
        "room_id": res.room_id.hex(), "sid": res.sid.hex(), "prs": res.prs.hex(),
        "ci": res.ci.hex(), "generator_string": res.generator_string.hex(),
        "generator_hash": res.generator_hash.hex(), "generator": res.generator.hex(),
        "k": res.k.hex(), "isk_input": res.isk_input.hex(), "isk": res.isk.hex(),
        "kc_i": res.keys.kc_i.hex(), "kc_r": res.keys.kc_r.hex(), "kp_i": res.keys.kp_i.hex(),
        "kp_r": res.keys.kp_r.hex(), "kd_i": res.keys.kd_i.hex(), "kd_r": res.keys.kd_r.hex(),
        "tpake_input": res.tpake_input.hex(),
        "tpake": res.tpake.hex(), "tag_i": res.tag_i.hex(), "tag_r": res.tag_r.hex(),
        "invite_message": res.invite.hex(), "accept_message": res.accept.hex(),
        "reply_message": res.reply.hex(), "shared": res.shared.hex(), "seed": res.seed.hex(),
        "transcript_input": res.transcript_input.hex(),
        "transcript_hash": res.transcript_hash.hex(), "sas_value": res.sas_value,
        "sas_text": res.sas_text,
        "inviter": {"share": res.ya.hex(), "commitment": res.commitment.hex(),
                    "payload": res.payload_i.hex(), "sealed_payload": res.box_i.hex()},
        "invitee": {"share": res.yb.hex(), "payload": res.payload_r.hex(),
                    "sealed_payload": res.box_r.hex()},
    }


def _subset(full: dict, part: dict) -> dict:
    """``full`` restricted to the keys of ``part`` (one level of nesting)."""
    return {k: _subset(full[k], v) if isinstance(v, dict) else full[k] for k, v in part.items()}


@needs_vectors
def test_remote_vector_file_fields():
    expect_keys(load("remote.json"), "codes exchanges rejections")


@needs_vectors
def test_remote_codes():
    """16.1: each typed text gives the canonical form and the shown one, or is refused."""
    for case in _cases(load("remote.json"), "codes"):
        text = case["input_text"]
        if "error_text" in case:
            expect_keys(case, "input_text error_text")
            assert case["error_text"] == "invalid"
            with pytest.raises(P.ProtocolError):
                P.parse_code(text)
            continue
        expect_keys(case, "input_text canonical_text shown_text")
        canonical = P.parse_code(text)
        assert canonical == case["canonical_text"]
        assert P.format_code(canonical) == case["shown_text"]
        assert P.parse_code(case["shown_text"]) == canonical
        _check_canonical_code(canonical)


_REMOTE_RESULTS = ("malformed_message", "authentication_failed", "invalid_key", "invalid_state")


def _remote_fresh_side(ex, who: str) -> P.RemoteExchange:
    """A fresh side of ``ex`` made from its party of role ``who`` (README: its random seed, here
    the values that seed gave, and the codes as shown), started."""
    party = ex[who]
    args = (h(party["identity_seed"]), h(party["ephemeral_secret"]), h(party["device_secret"]),
            party["name_text"].encode("utf-8"), ex["invite_code_text"],
            ex["encryption_code_text"])
    if who == "inviter":
        side = P.RemoteExchange.inviter(*args, h(ex["sid"]), h(party["scalar"]),
                                        realtime=ex["realtime"])
        assert side.start() == [h(ex["invite_message"])]
    else:
        side = P.RemoteExchange.invitee(*args, h(party["scalar"]), realtime=ex["realtime"])
        assert side.start() == []
    return side


@needs_vectors
def test_remote_rejections():
    """remote.json ``rejections``: each case played through this module's own state machine
    (16.3): a fresh side of the first exchange receives the messages in order, every one but
    the last accepted and the last refused with the vector's result code.  What the refusal
    does follows 16.3's "Checks and result codes": before this side decided it ends the
    exchange as failed (no contact); once this side decided it changes nothing and the side
    goes on waiting (played a second time with this side deciding, where it has the SAS);
    ``invalid_state`` (the peer's DECISION is in) changes nothing either."""
    data = load("remote.json")
    ex = data["exchanges"][0]
    assert not ex["realtime"]  # "the first (invite) exchange"
    cases = _cases(data, "rejections")
    assert cases
    seen = set()
    for case in cases:
        expect_keys(case, "case_text receiver_text messages result")
        why, who, code = case["case_text"], case["receiver_text"], case["result"]
        assert who in ("inviter", "invitee") and code in _REMOTE_RESULTS, why
        messages = [h(m) for m in case["messages"]]
        assert messages, why
        seen.add(code)
        for decides_first in (False, True):
            side = _remote_fresh_side(ex, who)
            for m in messages[:-1]:
                out = side.receive(m)
                # The exchange's own messages give the exchange's own answers.
                if m.hex() == ex["invite_message"]:
                    assert out == [h(ex["accept_message"])], why
                elif m.hex() == ex["accept_message"]:
                    assert out == [h(ex["reply_message"])], why
            assert not side.failed, why
            if decides_first:
                if side.result is None or side.own_decision is not None \
                        or side.peer_decision is not None:
                    continue  # no SAS to decide on yet, or nothing left to decide
                side.decide(ex[who]["decision"] == 1)
            before = (side.own_decision, side.peer_decision, side.contact_state,
                      side.decision_message)
            with pytest.raises(P.ProtocolError) as info:
                side.receive(messages[-1])
            assert P.result_code(info.value) == code, (why, decides_first, info.value)
            if code == "invalid_state" or decides_first:
                # "changes nothing": the side goes on as it was.
                assert not side.failed, why
                assert (side.own_decision, side.peer_decision, side.contact_state,
                        side.decision_message) == before, why
            else:
                # "Until a side decided, any refusal ends the exchange as failed".
                assert side.failed and side.result is None and side.contact_state is None, why
                with pytest.raises(P.InvalidState):
                    side.receive(messages[-1])
    assert seen == set(_REMOTE_RESULTS)  # every code of 16.3's checks is exercised


def _check_canonical_code(canonical: str):
    """The canonical code's check character recomputed from its first seven (16.1)."""
    values = [P.CODE_ALPHABET.index(c) for c in canonical]
    assert len(values) == 8 and P.code_sum_ok(values)
    assert P.code_check_value(values[:7]) == values[7]
    assert P.code_from_values(values[:7]) == canonical
    assert sum(i * v for i, v in enumerate(values, 1)) % 31 == 0


@needs_vectors
def test_remote_exchanges():
    for ex in _cases(load("remote.json"), "exchanges"):
        expect_keys(ex, _REMOTE_EXCHANGE_KEYS)
        expect_keys(ex["inviter"], _REMOTE_INVITER_KEYS)
        expect_keys(ex["invitee"], _REMOTE_PARTY_KEYS)
        for who in ("inviter", "invitee"):
            # random_seed drives the library's own test random source, no part of the
            # protocol (section 13): only its form can be checked.
            assert len(h(ex[who]["random_seed"])) == 32
        inviter, invitee = _remote_sides(_remote_inputs(ex), realtime=ex["realtime"])
        sent, failures = _remote_run(inviter, invitee)
        assert failures == {}
        # The messages on the wire, in the order of 16.3.
        assert [(x, m.hex()) for x, m in sent] == [
            ("inviter", ex["invite_message"]), ("invitee", ex["accept_message"]),
            ("inviter", ex["reply_message"])]
        # Each side's own view holds every value of the vector.
        views = {}
        for who, side in (("inviter", inviter), ("invitee", invitee)):
            assert side.done and not side.failed
            res = side.result
            assert res.role == (P.INITIATOR if who == "inviter" else P.RESPONDER)
            fields = _remote_fields(res)
            assert fields == _subset(ex, fields), who
            views[who] = fields
            # 16.5: the relay ID is the mailbox, or in a real-time exchange the room.
            assert side.relay_id == res.relay_id == (res.room_id if ex["realtime"]
                                                     else res.invite_id)
        assert views["inviter"] == views["invitee"]
        # What each side learned of the other.
        for side, party in ((inviter, ex["invitee"]), (invitee, ex["inviter"])):
            peer = side.result.peer
            assert peer.identity_pk.hex() == party["identity_public"]
            assert peer.fingerprint_text == party["fingerprint_text"]
            assert peer.ephemeral_pk.hex() == party["ephemeral_public"]
            assert peer.device_secret.hex() == party["device_secret"]
            assert peer.name.decode("utf-8") == party["name_text"]
            assert peer.payload.hex() == party["payload"]
        _remote_decisions(ex, inviter, invitee)
        _remote_recompute(ex)


def _remote_decisions(ex, inviter, invitee):
    """16.3 step 5 on a vector exchange: each side decides as its party's ``decision`` says,
    its DECISION (aad and the 19-byte message) is the vector's, and the peer opens it and reads
    the decision; then 8.1's outcome on both sides."""
    th = inviter.result.transcript_hash
    assert invitee.result.transcript_hash == th
    d_i, d_r = ex["inviter"]["decision"], ex["invitee"]["decision"]
    assert d_i in (0, 1) and d_r in (0, 1)
    both = d_i == d_r == 1
    final = P.VERIFIED if both else P.DELETED
    for side, party in ((inviter, ex["inviter"]), (invitee, ex["invitee"])):
        assert side.contact_state == P.UNVERIFIED and side.own_decision is None
        assert P.decision_aad(side.role, th).hex() == party["decision_aad"]
    # Order 1: both decide, then each DECISION is delivered.  Through the mailbox a confirming
    # inviter holds its DECISION until it has read the invitee's (16.3 step 5).
    holds = d_i == 1 and not ex["realtime"]
    i_out = inviter.decide(d_i == 1)
    assert inviter.decision_message.hex() == ex["inviter"]["decision_message"]
    assert [m.hex() for m in i_out] == ([] if holds else [ex["inviter"]["decision_message"]])
    r_out = invitee.decide(d_r == 1)
    assert [m.hex() for m in r_out] == [ex["invitee"]["decision_message"]]
    assert len(r_out[0]) == P.DECISION_BYTES == 19
    for side, d in ((inviter, d_i), (invitee, d_r)):
        assert side.contact_state == (P.AWAITING_PEER if d == 1 else P.DELETED)
    released = inviter.receive(r_out[0])
    assert inviter.peer_decision == d_r
    assert [m.hex() for m in released] == ([ex["inviter"]["decision_message"]] if holds
                                           else [])
    assert invitee.receive((released or i_out)[0]) == []
    assert invitee.peer_decision == d_i
    for side in (inviter, invitee):
        if both:  # each confirmed before the peer's confirmation arrived: the host settles
            assert side.contact_state == P.AWAITING_PEER
            side.settle(now=77)
            assert side.verified_at == 77
        elif side.own_decision == P.DECISION_CONFIRMED:  # the peer rejected: settled as
            assert side.settle() == P.DELETED             # rejected (8.1, "Settling")
            assert side.settled_rejected and side.verified_at is None
        else:
            with pytest.raises(P.InvalidState):  # this side rejected: nothing to settle
                side.settle()
        with pytest.raises(P.InvalidState):  # settled, or rejected: once only
            side.settle()
        assert side.complete and not side.failed and side.contact_state == final
        with pytest.raises(P.InvalidState):  # nothing more is read
            side.receive(side.decision_message)
    # Order 2: the invitee's DECISION is read before the inviter decides.  A side that has read
    # the peer's rejection "cannot confirm any more (invalid_state); the host then rejects it,
    # which deletes the contact it saved and sends this side's rejection (the library does
    # not reject by itself: the person is told first)" (8.1): the receive that read the
    # peer's rejection sends nothing, and the rejection comes out of the host's.
    i2, r2 = _remote_sides(_remote_inputs(ex), realtime=ex["realtime"])
    assert _remote_run(i2, r2)[1] == {}
    r_msgs = r2.decide(d_r == 1)
    assert [m.hex() for m in r_msgs] == [ex["invitee"]["decision_message"]]
    answered = i2.receive(r_msgs[0])
    if d_r == 0:
        assert answered == [] and i2.own_decision is None and not i2.complete
        assert i2.contact_state == P.UNVERIFIED and i2.save(3) == P.UNVERIFIED
        for _ in range(2):
            with pytest.raises(P.InvalidState):
                i2.decide(True)
            assert i2.own_decision is None and i2.contact_state == P.UNVERIFIED
        with pytest.raises(P.InvalidState):  # before this side confirmed: nothing to settle
            i2.settle()
        answered = i2.decide(False)
        assert answered == [P.seal_decision(i2.result.keys.kd_i, P.INITIATOR,
                                            i2.result.transcript_hash, 0)]
        assert i2.own_decision == 0 and i2.contact_state == P.DELETED and i2.complete
        for confirmed in (True, False):
            with pytest.raises(P.InvalidState):
                i2.decide(confirmed)
        assert not i2.failed and i2.contact_state == P.DELETED
        i_msgs = answered
    else:
        assert answered == [] and i2.contact_state == P.UNVERIFIED
        i_msgs = i2.decide(d_i == 1)
        assert [m.hex() for m in i_msgs] == [ex["inviter"]["decision_message"]]
    assert len(i_msgs) == 1 and r2.receive(i_msgs[0]) == []
    if final == P.VERIFIED:
        # The inviter confirmed after the invitee's confirmation arrived: verified at once;
        # the invitee confirmed first: awaiting the peer until settled (8.1).
        assert i2.contact_state == P.VERIFIED and r2.contact_state == P.AWAITING_PEER
        r2.settle()
    for side in (i2, r2):
        assert side.complete and side.contact_state == final
    # Order 3: the inviter's DECISION is read before the invitee decides (the real-time
    # exchange, where the inviter does not wait): anything after it is invalid_state and
    # changes nothing, yet the invitee's person still decides.
    if ex["realtime"]:
        i3, r3 = _remote_sides(_remote_inputs(ex), realtime=True)
        assert _remote_run(i3, r3)[1] == {}
        i_msgs = i3.decide(d_i == 1)
        assert [m.hex() for m in i_msgs] == [ex["inviter"]["decision_message"]]
        assert r3.receive(i_msgs[0]) == [] and r3.own_decision is None
        for again in (i_msgs[0], h(ex["reply_message"]), b""):
            with pytest.raises(P.InvalidState):
                r3.receive(again)
        assert not r3.failed and r3.contact_state == P.UNVERIFIED
        r_msgs = r3.decide(d_r == 1)
        assert [m.hex() for m in r_msgs] == [ex["invitee"]["decision_message"]]
        assert i3.receive(r_msgs[0]) == []
        for side in (i3, r3):
            assert side.complete and side.contact_state == final


def _remote_recompute(ex):
    """Every value again, from the formulas of 16.1 to 16.4 one by one (not through the
    exchange objects), on the CPace and ristretto255 modules directly."""
    i, r = ex["inviter"], ex["invitee"]
    ic_text, ec_text = ex["invite_code_text"], ex["encryption_code_text"]
    invite_code, encryption_code = P.parse_code(ic_text), P.parse_code(ec_text)
    for code, text in ((invite_code, ic_text), (encryption_code, ec_text)):
        assert P.format_code(code) == text  # the vector shows codes as they are shown
        _check_canonical_code(code)
    assert invite_code != encryption_code  # "the two must differ"
    # 16.1: IDs.
    iid = P.sha256(P.lv_cat(b"itsme-invite-id-v1", invite_code.encode("ascii")))[:16]
    assert iid.hex() == ex["invite_id"] and P.invite_id(invite_code) == iid
    room = P.sha256(P.lv_cat(b"itsme-realtime-room-v1", invite_code.encode("ascii")))[:16]
    assert room.hex() == ex["room_id"] and P.realtime_room_id(invite_code) == room
    assert iid != room
    # 16.2: CPace.
    sid = h(ex["sid"])
    assert len(sid) == 16
    prs = encryption_code.encode("ascii")
    assert prs.hex() == ex["prs"] and P.remote_prs(encryption_code) == prs
    ci = P.lv_cat(b"itsme-online-exchange-v1", invite_code.encode("ascii"))
    assert ci.hex() == ex["ci"] and P.remote_ci(invite_code) == ci
    gen_str = C.generator_string(b"CPaceRistretto255", prs, ci, sid, 128)
    assert gen_str.hex() == ex["generator_string"]
    # DSI and PRS with the zero padding fill SHA-512's first 128-byte block exactly.
    assert len(C.lv_cat(b"CPaceRistretto255", prs, bytes(128 - 1 - 9 - 18))) == 128
    gen_hash = hashlib.sha512(gen_str).digest()
    assert gen_hash.hex() == ex["generator_hash"]
    g = R.from_uniform_bytes(gen_hash)
    assert R.encode(g).hex() == ex["generator"]
    ya, yb = h(i["scalar"]), h(r["scalar"])
    for y in (ya, yb):
        assert y[31] & 0xF0 == 0 and C.sample_scalar(y) == y  # below 2^252
    share_a = R.encode(R.scalar_mult(int.from_bytes(ya, "little"), g))
    share_b = R.encode(R.scalar_mult(int.from_bytes(yb, "little"), g))
    assert share_a.hex() == i["share"] and share_b.hex() == r["share"]
    assert share_a != share_b
    k = C.scalar_mult_vfy(ya, share_b)
    assert k == C.scalar_mult_vfy(yb, share_a) and k != C.IDENTITY
    assert k.hex() == ex["k"]
    i_pk, r_pk = P.ed25519_public(h(i["identity_seed"])), P.ed25519_public(h(r["identity_seed"]))
    i_epk, r_epk = P.x25519_public(h(i["ephemeral_secret"])), P.x25519_public(
        h(r["ephemeral_secret"]))
    for party, pk, epk in ((i, i_pk, i_epk), (r, r_pk, r_epk)):
        assert pk.hex() == party["identity_public"]
        assert P.fingerprint(pk) == party["fingerprint_text"]
        assert epk.hex() == party["ephemeral_public"]
    i_name, r_name = i["name_text"].encode("utf-8"), r["name_text"].encode("utf-8")
    i_ds, r_ds = h(i["device_secret"]), h(r["device_secret"])
    # 16.3: the commitment (7.3's) is ADa.
    rest = P.lv_cat(i_name, i_ds)
    assert rest.hex() == i["rest"]
    commitment = P.sha256(P.lv_cat(b"itsme-sas-commit-v1", b"\x01", i_pk, i_epk,
                                   P.sha256(rest)))
    assert commitment.hex() == i["commitment"]
    isk_input = (P.lv_cat(b"CPaceRistretto255_ISK", sid, k) + P.lv_cat(share_a, commitment)
                 + P.lv_cat(share_b, b""))
    assert isk_input.hex() == ex["isk_input"]
    isk = hashlib.sha512(isk_input).digest()
    assert isk.hex() == ex["isk"]
    assert isk == C.isk(sid, k, share_a, commitment, share_b, b"")
    prk = P.hkdf_extract(b"itsme-online-exchange-v1", isk)
    keys = {}
    for name, label, role in (("kc_i", b"itsme-online-confirm-v1", b"initiator"),
                              ("kc_r", b"itsme-online-confirm-v1", b"responder"),
                              ("kp_i", b"payload-encryption", b"initiator"),
                              ("kp_r", b"payload-encryption", b"responder")):
        keys[name] = P.hkdf_expand(prk, P.lv_cat(label, role), 32)
        assert keys[name].hex() == ex[name], name
    for name, role in (("kd_i", b"initiator"), ("kd_r", b"responder")):
        keys[name] = P.hkdf_expand(prk, P.lv_cat(b"itsme-online-decision-v1", role), 32)
        assert keys[name].hex() == ex[name], name
    assert len(set(keys.values())) == 6  # "Each of the six keys seals or authenticates one"
    invite = b"\x01\x01" + sid + share_a + commitment
    assert len(invite) == 82 and invite.hex() == ex["invite_message"]
    t_in = P.lv_cat(b"itsme-online-transcript-v1", iid, invite, share_b)
    assert t_in.hex() == ex["tpake_input"]
    tpake = P.sha256(t_in)
    assert tpake.hex() == ex["tpake"]
    tag_r = P.hmac_sha256(keys["kc_r"], P.lv_cat(b"itsme-online-confirm-v1", b"responder", tpake))
    assert tag_r.hex() == ex["tag_r"]
    payloads, boxes = {}, {}
    for party, role, pk, epk, ds, name in ((i, b"initiator", i_pk, i_epk, i_ds, i_name),
                                           (r, b"responder", r_pk, r_epk, r_ds, r_name)):
        data = pk + epk + ds + bytes([len(name)]) + name
        assert data.hex() == party["payload_data"]
        signed = P.lv_cat(b"itsme-online-payload-v1", tpake, role, data)
        assert signed.hex() == party["signed_message"]
        payload = data + P.ed25519_sign(h(party["identity_seed"]), signed)
        assert payload.hex() == party["payload"] and len(payload) == 145 + len(name)
        aad = P.lv_cat(b"itsme-online-payload-v1", b"\x01", role, iid)
        assert aad.hex() == party["aad"]
        kp = keys["kp_i" if role == b"initiator" else "kp_r"]
        box = AESGCM(kp).encrypt(bytes(12), payload, aad)
        assert box.hex() == party["sealed_payload"] and len(box) == len(payload) + 16
        assert AESGCM(kp).decrypt(bytes(12), box, aad) == payload
        payloads[role], boxes[role] = payload, box
    accept = b"\x01\x02" + share_b + tag_r + boxes[b"responder"]
    assert accept.hex() == ex["accept_message"] and 228 <= len(accept) <= 355
    tag_i = P.hmac_sha256(keys["kc_i"], P.lv_cat(b"itsme-online-confirm-v1", b"initiator", tpake,
                                                 P.sha256(accept)))
    assert tag_i.hex() == ex["tag_i"]
    reply = b"\x01\x03" + tag_i + boxes[b"initiator"]
    assert reply.hex() == ex["reply_message"]
    # 16.4: seed (section 3) and SAS (4.1).
    shared = P.x25519_shared(h(i["ephemeral_secret"]), r_epk)
    assert shared == P.x25519_shared(h(r["ephemeral_secret"]), i_epk)
    assert shared.hex() == ex["shared"]
    seed = P.hkdf(shared, P.seed_salt(i["fingerprint_text"], r["fingerprint_text"]),
                  b"itsme-verification-seed-v1", 32)
    assert seed.hex() == ex["seed"]
    th_in = P.lv_cat(b"itsme-online-sas-transcript-v1", tpake, payloads[b"initiator"],
                     payloads[b"responder"])
    assert th_in.hex() == ex["transcript_input"]
    th = P.sha256(th_in)
    assert th.hex() == ex["transcript_hash"]
    assert P.sas_value(seed, th) == ex["sas_value"]
    assert P.sas_text(seed, th) == ex["sas_text"]
    # 16.3: decision_X = AES-256-GCM(kd_X, 12 zero bytes, aad = lv_cat(label, u8(1), role_X,
    # th), u8(d)); DECISION = u8(1) || u8(4) || decision_X, 19 bytes.
    for party, role, kd in ((i, b"initiator", keys["kd_i"]), (r, b"responder", keys["kd_r"])):
        aad = P.lv_cat(b"itsme-online-decision-v1", b"\x01", role, th)
        assert aad.hex() == party["decision_aad"]
        message = b"\x01\x04" + AESGCM(kd).encrypt(bytes(12), bytes([party["decision"]]), aad)
        assert message.hex() == party["decision_message"] and len(message) == 19
        assert AESGCM(kd).decrypt(bytes(12), message[2:], aad) == bytes([party["decision"]])
    assert ex["inviter"]["decision"] == 1
    assert ex["invitee"]["decision"] == (0 if ex["realtime"] else 1)  # README: the real-time
    # exchange's invitee rejects


def _replace(message: bytes, at: int, new: bytes) -> bytes:
    return message[:at] + new + message[at + len(new):]


@needs_vectors
def test_remote_vector_shares_checked():
    """16.2: "A side MUST abort if the peer's share does not decode as a canonical ristretto255
    element, if K is the identity, or if Yb = Ya (a reflected share)", on each vector exchange:
    INVITE's Ya and ACCEPT's Yb replaced by the identity, the draft's invalid point, encodings
    the RFC rejects, the share with its top bit set (not canonical), and (ACCEPT) Ya itself."""
    y1 = h("2b3c6b8c4f3800e7aef6864025b4ed79bd599117e427c41bd47d93d654b4a51c")
    for ex in _cases(load("remote.json"), "exchanges"):
        inputs = _remote_inputs(ex)
        invite, accept = h(ex["invite_message"]), h(ex["accept_message"])
        ya, yb = h(ex["inviter"]["share"]), h(ex["invitee"]["share"])
        common = [C.IDENTITY, y1, h(_RFC9496_BAD["negative"].split()[2]),
                  h(_RFC9496_BAD["not-square"].split()[0]),
                  h(_RFC9496_BAD["non-canonical"].split()[1])]
        for bad in common + [ya[:31] + bytes([ya[31] | 0x80])]:
            inviter, invitee = _remote_sides(inputs)
            invitee.start()
            with pytest.raises(P.AuthenticationFailed):  # 16.3: CPace's abort
                invitee.receive(_replace(invite, 2 + 16, bad))
            assert invitee.failed and invitee.result is None
        for bad in common + [yb[:31] + bytes([yb[31] | 0x80]), ya]:
            inviter, invitee = _remote_sides(inputs)
            inviter.start()
            with pytest.raises(P.ProtocolError) as info:
                inviter.receive(_replace(accept, 2, bad))
            # 16.3: CPace's abort is authentication_failed, a reflected share invalid_key.
            assert P.result_code(info.value) == ("invalid_key" if bad == ya
                                                 else "authentication_failed")
            assert inviter.failed and inviter.result is None
        # The untouched messages pass, so each failure above is the share's.
        inviter, invitee = _remote_sides(inputs)
        inviter.start()
        invitee.start()
        assert invitee.receive(invite) == [accept]
        assert inviter.receive(accept) == [h(ex["reply_message"])]
        # An invitee whose share would equal Ya (a reflected INVITE: the inviter's own
        # scalar) refuses too.
        twin = dict(inputs["invitee"], scalar=inputs["inviter"]["scalar"])
        _, reflecting = _remote_sides({"inviter": inputs["inviter"], "invitee": twin})
        reflecting.start()
        with pytest.raises(P.InvalidKey, match="reflected"):
            reflecting.receive(invite)


# Own checks of section 16 --------------------------------------------------------------------

def test_remote_code_parsing():
    code = "K7X2M9PM"
    for text in ("K7X2M9PM", "k7x2m9pm", "K7X2-M9PM", " K7X2 M9PM ", "k-7-x-2-m-9-p-m",
                 "K7X2--M9PM", "  k7X2m9Pm", "K7X2M9PM-"):
        assert P.parse_code(text) == code, text
    # Other separators and characters, and non-ASCII look-alikes, are refused.
    for text in ("K7X2\tM9PM", "K7X2_M9PM", "K7X2.M9PM", "K7X2\u00a0M9PM", "K7X2\u2011M9PM",
                 "\uff2b7X2M9PM", "K7X2M9PM\n", "", "--------", "K7X2M9P", "K7X2M9PMM",
                 "K7X2M9PM2"):
        with pytest.raises(P.ProtocolError):
            P.parse_code(text)
    # U+017F (long s) upper-cases to "S": still refused, only ASCII is case-folded.
    with_s = P.code_from_values([P.CODE_ALPHABET.index("S")] + [0] * 6)
    assert P.parse_code(with_s) == with_s
    with pytest.raises(P.ProtocolError):
        P.parse_code("\u017f" + with_s[1:])
    for c in "01ILO":
        assert c not in P.CODE_ALPHABET
        assert c.lower() not in P.CODE_ALPHABET.lower()
    assert len(P.CODE_ALPHABET) == len(set(P.CODE_ALPHABET)) == 31
    assert 8 * P.CODE_CHECK_FACTOR % 31 == 1
    assert P.format_code(code) == "K7X2-M9PM"
    with pytest.raises(ValueError):
        P.format_code("k7x2m9pm")


def test_remote_code_check_catches_single_errors_and_swaps():
    """16.1: every single wrong character and every swap of two different characters,
    adjacent or not, breaks the sum."""
    rng = random.Random(1611)
    codes = ["K7X2M9PM", "8YM5TBQU", "GK3N9NN9", "Z8WF7MUQ", "RYNXA5A7"]
    codes += [P.draw_code(lambda: rng.randrange(256)) for _ in range(20)]
    for code in codes:
        _check_canonical_code(code)
        for pos in range(8):
            for c in P.CODE_ALPHABET:
                if c != code[pos]:
                    with pytest.raises(P.ProtocolError):
                        P.parse_code(code[:pos] + c + code[pos + 1:])
        for a in range(8):
            for b in range(a + 1, 8):
                if code[a] != code[b]:
                    swapped = list(code)
                    swapped[a], swapped[b] = swapped[b], swapped[a]
                    with pytest.raises(P.ProtocolError):
                        P.parse_code("".join(swapped))
    # Every 7-character prefix has exactly one check character.
    for _ in range(200):
        values = [rng.randrange(31) for _ in range(7)]
        ok = [v for v in range(31) if P.code_sum_ok(values + [v])]
        assert ok == [P.code_check_value(values)]


def test_remote_code_drawing():
    """16.1: one byte per character, r >= 248 drawn again, v = r mod 31, then the check; the
    invite code first, then the encryption code, which must differ."""
    stream = [248, 255, 0, 30, 31, 247, 250, 62, 100, 249, 1]
    code = P.draw_code(stream)
    values = [0, 30, 0, 247 % 31, 0, 100 % 31, 1]
    assert code == P.code_from_values(values)
    assert code[:7] == "".join(P.CODE_ALPHABET[v] for v in values)
    # Each accepted byte value maps to each character value exactly 8 times.
    counts = [0] * 31
    for r in range(248):
        counts[r % 31] += 1
    assert counts == [8] * 31 and P.CODE_DRAW_BELOW == 248 == 31 * 8
    # Equal codes: the encryption code is drawn again.
    same = [5, 6, 7, 8, 9, 10, 11]
    other = [12, 13, 14, 15, 16, 17, 18]
    invite, encryption = P.draw_codes(same + [255] + same + other)
    assert invite == P.code_from_values(same) and encryption == P.code_from_values(other)
    with pytest.raises(ValueError):
        P.draw_code([256] * 7)
    rng = random.Random(1612)
    seen = set()
    for _ in range(300):
        a, b = P.draw_codes(lambda: rng.randrange(256))
        assert a != b and P.parse_code(a) == a and P.parse_code(b) == b
        seen.update(a[:7])
    assert seen == set(P.CODE_ALPHABET)


_REMOTE_NAMES = ("Alice", "Bob ☎", "Ćarol", "Dave the Builder", "Ève")


def _remote_random_inputs(rng: random.Random, name_lengths=None) -> dict:
    """Random inputs of an exchange; names of the given byte lengths, or from a short list."""
    invite_code, encryption_code = P.draw_codes(lambda: rng.randrange(256))
    out = {}
    for k, who in enumerate(("inviter", "invitee")):
        name = (b"n" * name_lengths[k] if name_lengths else
                rng.choice(_REMOTE_NAMES).encode("utf-8"))
        out[who] = {"identity_seed": rng.randbytes(32), "ephemeral_secret": rng.randbytes(32),
                    "device_secret": rng.randbytes(16), "name": name,
                    "scalar": rng.randbytes(32), "invite_code": invite_code,
                    "encryption_code": encryption_code}
    out["inviter"]["sid"] = rng.randbytes(16)
    # The invitee types the codes: shown form, any case, stray spaces.
    out["invitee"]["invite_code"] = P.format_code(invite_code).lower()
    out["invitee"]["encryption_code"] = " " + P.format_code(encryption_code).replace("-", " ")
    return out


def test_remote_both_sides_agree():
    rng = random.Random(1613)
    sas_seen = set()
    for trial in range(25):
        realtime = trial % 2 == 1
        inputs = _remote_random_inputs(rng)
        inviter, invitee = _remote_sides(inputs, realtime=realtime)
        sent, failures = _remote_run(inviter, invitee)
        assert failures == {}
        a, b = inviter.result, invitee.result
        fa, fb = _remote_fields(a), _remote_fields(b)
        assert fa == fb
        assert a.sas_text == b.sas_text == P.format_short_code(a.sas_value)
        assert a.peer.identity_pk == P.ed25519_public(inputs["invitee"]["identity_seed"])
        assert b.peer.identity_pk == P.ed25519_public(inputs["inviter"]["identity_seed"])
        assert a.relay_id == (a.room_id if realtime else a.invite_id)
        assert [len(m) for _, m in sent][0] == 82
        sas_seen.add(a.sas_value)
        # The same two, a new exchange (new scalars and sid): new tpake and SAS.
        again = {w: dict(inputs[w], scalar=rng.randbytes(32)) for w in inputs}
        again["inviter"]["sid"] = rng.randbytes(16)
        i2, r2 = _remote_sides(again)
        assert _remote_run(i2, r2)[1] == {}
        assert i2.result.tpake != a.tpake and i2.result.seed == a.seed
    assert len(sas_seen) == 25


def test_remote_message_lengths():
    """ACCEPT is 228 to 355 bytes, REPLY 196 to 323: names of 1 and 128 bytes reach both
    ends; one byte more or less is refused: ``malformed_message`` outside the type's row,
    checked before any key is used, and ``authentication_failed`` inside it (16.3)."""
    rng = random.Random(1614)
    for n in (1, 128):
        inputs = _remote_random_inputs(rng, name_lengths=(n, n))
        inviter, invitee = _remote_sides(inputs)
        sent, failures = _remote_run(inviter, invitee)
        assert failures == {}
        lengths = [len(m) for _, m in sent]
        assert lengths == ([82, 228, 196] if n == 1 else [82, 355, 323])
        invite, accept, reply = (m for _, m in sent)
        rows = {id(invite): (82, 82), id(accept): (228, 355), id(reply): (196, 323)}
        for m, at in ((invite, "invitee"), (accept, "inviter"), (reply, "invitee")):
            low, high = rows[id(m)]
            for changed in (m[:-1], m + b"\x00"):
                code = ("malformed_message" if not low <= len(changed) <= high
                        else "authentication_failed")
                i2, r2 = _remote_sides(inputs)
                i2.start()
                r2.start()
                if at == "inviter":
                    r2.receive(invite)
                    with pytest.raises(P.ProtocolError) as err:
                        i2.receive(changed)
                elif m is invite:
                    with pytest.raises(P.ProtocolError) as err:
                        r2.receive(changed)
                else:
                    i2.receive(r2.receive(invite)[0])
                    with pytest.raises(P.ProtocolError) as err:
                        r2.receive(changed)
                assert P.result_code(err.value) == code, (len(changed), str(err.value))
    # "2 to 355 bytes when the type is unknown": shorter, longer or of an unknown type, each
    # is malformed_message.
    for bad in (b"", b"\x01", b"\x01\x09", b"\x01\x09" + bytes(353), b"\x01\x09" + bytes(354),
                b"\x01\x02" + bytes(354), b"\x01\x03" + bytes(322), b"\x01\x04" + bytes(18)):
        with pytest.raises(P.MalformedMessage):
            P.parse_remote_message(bad, P.REMOTE_ACCEPT)


def test_remote_wrong_code_fails_and_spends_the_invite():
    """16.3: a wrong encryption code (or invite code) is seen by the inviter on tag_R; it never
    answers, so the invitee never completes either."""
    rng = random.Random(1615)
    for wrong in ("encryption", "invite"):
        inputs = _remote_random_inputs(rng)
        code = inputs["inviter"][f"{wrong}_code"]
        # A one-character typo passes the check with probability 1/31: use another valid code.
        other = code
        while other == code or other in (inputs["inviter"]["invite_code"],
                                         inputs["inviter"]["encryption_code"]):
            other = P.draw_code(lambda: rng.randrange(256))
        inputs["invitee"][f"{wrong}_code"] = other
        inviter, invitee = _remote_sides(inputs)
        sent, failures = _remote_run(inviter, invitee)
        assert list(failures) == ["inviter"] and "tag_R" in str(failures["inviter"])
        assert [x for x, _ in sent] == ["inviter", "invitee"]  # no REPLY
        assert not invitee.done and not inviter.done
        with pytest.raises(P.ProtocolError):  # the invite is spent
            inviter.receive(sent[1][1])


def _flip_every_byte(message: bytes):
    """The message with one bit of one byte changed, for every byte (the bit moving along)."""
    for i in range(len(message)):
        changed = bytearray(message)
        changed[i] ^= 1 << (i % 8)
        yield bytes(changed)


def test_remote_rejects_every_flipped_byte():
    """Any changed byte of any message ends the exchange as failed on the side that reads it
    or, for INVITE, at the latest on the inviter's tag_R check: no side shows a SAS the other
    does not."""
    rng = random.Random(1616)
    inputs = _remote_random_inputs(rng)
    inviter, invitee = _remote_sides(inputs)
    sent, _ = _remote_run(inviter, invitee)
    invite, accept, reply = (m for _, m in sent)
    for changed in _flip_every_byte(invite):
        i2, r2 = _remote_sides(inputs)
        _, failures = _remote_run(i2, r2, tamper=lambda k, m: changed if k == 0 else m)
        assert failures and not i2.done and not r2.done
    for changed in _flip_every_byte(accept):
        i2, r2 = _remote_sides(inputs)
        _, failures = _remote_run(i2, r2, tamper=lambda k, m: changed if k == 1 else m)
        assert list(failures) == ["inviter"] and not i2.done and not r2.done
    for changed in _flip_every_byte(reply):
        i2, r2 = _remote_sides(inputs)
        _, failures = _remote_run(i2, r2, tamper=lambda k, m: changed if k == 2 else m)
        assert list(failures) == ["invitee"] and i2.done and not r2.done


def test_remote_message_order_type_version():
    rng = random.Random(1617)
    inputs = _remote_random_inputs(rng)
    inviter, invitee = _remote_sides(inputs)
    sent, _ = _remote_run(inviter, invitee)
    invite, accept, reply = (m for _, m in sent)

    def fresh():
        i2, r2 = _remote_sides(inputs)
        i2.start()
        r2.start()
        return i2, r2

    cases = [
        ("invitee", [], accept),  # an ACCEPT sent to the invitee
        ("invitee", [], reply),  # a REPLY before INVITE
        ("invitee", [invite], invite),  # a second INVITE
        ("invitee", [invite], accept),
        ("inviter", [], invite),  # an INVITE sent to the inviter
        ("inviter", [], reply),  # a REPLY before an ACCEPT
        ("inviter", [accept], accept),  # a message after the last
        ("invitee", [invite, reply], reply),
        ("invitee", [], b"\x02" + invite[1:]),  # another version
        ("invitee", [], b"\x01\x04" + invite[2:]),  # another type
        ("invitee", [], b"\x01"),
        ("invitee", [], b""),
        ("inviter", [], b"\x02" + accept[1:]),
    ]
    for who, before, message in cases:
        i2, r2 = fresh()
        side = i2 if who == "inviter" else r2
        for m in before:
            side.receive(m)
        with pytest.raises(P.MalformedMessage):  # 16.3: each is malformed_message
            side.receive(message)
        assert side.failed and side.result is None
        with pytest.raises(P.InvalidState):  # a failed exchange stays failed (1.1)
            side.receive(accept if who == "inviter" else invite)
    # A message before start() is refused too.
    i2, r2 = _remote_sides(inputs)
    with pytest.raises(P.ProtocolError):
        r2.receive(invite)
    # Codes are checked before anything else: a bad code refuses the invitee at once.
    bad = dict(inputs["invitee"], encryption_code="K7X2-M9PN")
    with pytest.raises(P.InvalidArgument):
        _remote_sides({"inviter": inputs["inviter"], "invitee": bad})
    # The same code typed for both is invalid_argument too (16.3).
    same = dict(inputs["invitee"], encryption_code=inputs["invitee"]["invite_code"])
    with pytest.raises(P.InvalidArgument):
        _remote_sides({"inviter": inputs["inviter"], "invitee": same})


@needs_vectors
def test_a_failed_exchange_may_be_rejected():
    """8.1 and 16.3: a refusal before this side decided ends the exchange as failed; "a
    confirmation that follows is `invalid_state`; the host rejects the failed exchange, which
    deletes the contact it saved" (here: nothing is sent, and once only)."""
    rng = random.Random(1603)
    i2, r2, _ = _remote_at_sas(_remote_random_inputs(rng))
    assert r2.save() == P.UNVERIFIED  # 8.1, "Saving": what the failed exchange then deletes
    with pytest.raises(P.MalformedMessage):
        r2.receive(b"\x01\x09")
    assert r2.failed
    with pytest.raises(P.InvalidState):
        r2.decide(True)
    assert r2.decide(False) == [] and r2.saved_contact_deleted
    with pytest.raises(P.InvalidState):
        r2.decide(False)
    # QR: an exchange expired at its decision (which leaves the new contact unverified) may
    # still be rejected, once, which deletes it; confirming it is invalid_state.  One failed
    # by a forged payload saved no new contact: rejecting it is invalid_state.
    whole = _whole_qr_peer()
    forged = P.QR_PREFIX + P.b64url_encode(whole.payload[:-1] + bytes([whole.payload[-1] ^ 1]))
    store = P.ContactStore()
    side = P.QrExchange.create(bytes([7]) * 32, bytes([9]) * 32, bytes(16), b"Me", 0, store)
    with pytest.raises(P.AuthenticationFailed):
        side.receive(forged, 0)
    expired = P.QrExchange.create(bytes([7]) * 32, bytes([9]) * 32, bytes(16), b"Me", 0, store)
    expired.receive(whole.text, 0)
    expired.save(0)
    assert len(store.contacts) == 1
    with pytest.raises(P.Expired):
        expired.decide(True, 86_401)
    (contact,) = store.contacts.values()
    assert contact.state == P.UNVERIFIED
    for failed in (side, expired):
        with pytest.raises(P.InvalidState):
            failed.decide(True, 1)
        if failed is expired:
            assert failed.decide(False, 1).contact is None
        with pytest.raises(P.InvalidState):
            failed.decide(False, 1)
        assert failed.state == "failed"
    assert store.contacts == {}
    for ex in _cases(load("bluetooth.json"), "exchanges"):
        a, b = _bt_at_sas(ex)
        a.save()
        with pytest.raises(P.ProtocolError):
            a.receive(b"\x01\x04" + bytes(17))  # a CONFIRM that does not open
        assert a.failed
        with pytest.raises(P.InvalidState):
            a.decide(True)
        assert a.decide(False) == [] and a.saved_contact_deleted
        with pytest.raises(P.InvalidState):
            a.decide(False)
        # Failed before its SAS: it saved no contact, so rejecting it is invalid_state.
        a = _bt_device(ex["a"], ex["session_code_text"])
        a.start()
        with pytest.raises(P.MalformedMessage):
            a.receive(h(ex["b"]["key"]))  # a KEY first
        for confirmed in (False, True):
            with pytest.raises(P.InvalidState):
                a.decide(confirmed)
        assert a.failed and not a.saved_contact_deleted
    inviter, invitee = _remote_sides(_remote_random_inputs(rng))
    inviter.start()
    invitee.start()
    with pytest.raises(P.MalformedMessage):
        invitee.receive(b"\x01\x09")
    for confirmed in (False, True):
        with pytest.raises(P.InvalidState):
            invitee.decide(confirmed)
    assert invitee.failed and not invitee.saved_contact_deleted


def _settle_cases(at_sas):
    """Each state of 8.1's settling list for one exchange method, from ``at_sas()`` (both
    sides at the SAS, and ``send(x, y, m)``, which delivers the messages ``m`` to ``y`` and
    y's answers to ``x``), as (name, side, what settling gives: VERIFIED, DELETED, or the
    refusal's class)."""
    cases = []
    a, b, send = at_sas()
    a.decide(True, now=1)
    cases.append(("before the peer's decision", a, P.InvalidState))
    a, b, send = at_sas()
    send(a, b, a.decide(True, now=1))
    send(b, a, b.decide(True, now=2))
    cases.append(("the peer's confirmation arrived", a, P.VERIFIED))
    cases.append(("its confirmation came after the peer's", b, P.InvalidState))
    a, b, send = at_sas()
    send(a, b, a.decide(True, now=1))
    send(b, a, b.decide(False, now=2))
    cases.append(("the peer's rejection arrived", a, P.DELETED))
    cases.append(("this side rejected", b, P.InvalidState))
    a, b, send = at_sas()
    send(b, a, b.decide(True, now=2))  # held by a mailbox inviter (16.3 step 5)
    cases.append(("comparing the SAS, the peer's confirmation sent", a, P.InvalidState))
    a, b, send = at_sas()
    send(b, a, b.decide(False, now=2))  # a is told; it does not reject on its own (8.1)
    cases.append(("comparing the SAS, the peer's rejection in", a, P.InvalidState))
    a, b, send = at_sas()
    cases.append(("comparing the SAS", a, P.InvalidState))
    a, b, send = at_sas()
    with pytest.raises(P.MalformedMessage):
        a.receive(b"\x01\x09")  # refused before this side decided: failed
    a.created_at = 0
    cases.append(("failed (past 24 hours too)", a, P.InvalidState))
    return cases


def _bt_send(x, y, frames):
    for f in frames:
        for back in y.receive(f):
            x.receive(back)


@needs_vectors
def test_settling_in_every_state():
    """8.1, "Settling": it applies the peer's decision, once arrived, to an exchange this side
    confirmed: a confirmation makes the contact verified, at the settling's time; a rejection
    deletes the new contact and ends the exchange as rejected.  Any other settling is
    invalid_state and changes nothing (before the peer's decision, before this side
    confirmed, once settled, confirmed at once or rejected, once failed); a pending exchange
    more than 24 hours old is expired instead and fails (a failed one answers invalid_state
    first), and may then be rejected, which deletes the contact it saved."""
    ex = _cases(load("bluetooth.json"), "exchanges")[0]
    inputs = _remote_random_inputs(random.Random(81))

    def bt():
        a, b = _bt_at_sas(ex)
        return a, b, _bt_send

    def remote(realtime):
        def at_sas():
            i, r, _ = _remote_at_sas(inputs, realtime=realtime)

            def send(x, y, msgs):
                for m in msgs:
                    for back in y.receive(m):
                        x.receive(back)
            # The invitee plays `a`, whose decision is sent at once (16.3 step 5).
            return r, i, send
        return at_sas

    for method, at_sas in (("bluetooth", bt), ("invite", remote(False)),
                           ("realtime", remote(True))):
        for name, side, want in _settle_cases(at_sas):
            if want in (P.VERIFIED, P.DELETED):
                assert side.settle(now=50) == want, (method, name)
                assert side.contact_state == want, (method, name)
                assert side.verified_at == (50 if want == P.VERIFIED else None)
                assert side.settled_rejected is (want == P.DELETED)
                for call in (lambda: side.settle(now=60), lambda: side.decide(False),
                             lambda: side.settle(now=90_000)):  # settled: not pending
                    with pytest.raises(P.InvalidState):
                        call()
                assert side.contact_state == want and not side.failed
            else:
                before = (side.contact_state, side.settled, side.settled_rejected,
                          side.verified_at, side.failed)
                with pytest.raises(want):
                    side.settle(now=90_000 if side.failed else 50)
                assert (side.contact_state, side.settled, side.settled_rejected,
                        side.verified_at, side.failed) == before, (method, name)
        # A pending exchange more than 24 hours old (comparing the SAS, awaiting the peer's
        # decision, or with it in, unsettled): expired, and fails; rejecting it then deletes
        # the contact it saved, once.  At 86,400 s after its start it has not expired.
        for stage in ("comparing", "awaiting", "peer's decision in"):
            a, b, send = at_sas()
            a.created_at = 1_000
            if stage == "comparing":
                assert a.save(now=1_001) == P.UNVERIFIED  # what rejecting it then deletes
            else:
                m = a.decide(True, now=1_001)
                if stage == "peer's decision in":
                    send(a, b, m)
                    send(b, a, b.decide(True, now=1_002))
                    assert a.peer_decision == P.DECISION_CONFIRMED
            late = copy.copy(a)
            if stage == "peer's decision in":
                assert a.settle(now=87_400) == P.VERIFIED and a.verified_at == 87_400
            else:
                with pytest.raises(P.InvalidState):
                    a.settle(now=87_400)
                assert not a.failed
            with pytest.raises(P.Expired):
                late.settle(now=87_401)
            assert late.failed and late.contact_state is None and late.verified_at is None
            with pytest.raises(P.InvalidState):  # failed: invalid_state first
                late.settle(now=87_402)
            with pytest.raises(P.InvalidState):
                late.decide(True)
            assert late.decide(False) == [] and late.saved_contact_deleted
            with pytest.raises(P.InvalidState):
                late.decide(False)
            assert late.failed
    # QR: there is nothing to settle, in any state; past 24 hours a pending one is expired.
    store = P.ContactStore()
    peer = _whole_qr_peer()
    me = P.QrExchange.create(bytes([7]) * 32, bytes([9]) * 32, b"n" * 16, b"Me", 0, store)
    with pytest.raises(P.InvalidState):
        me.settle(10)  # awaiting the payload
    me.receive(peer.text, 10)
    with pytest.raises(P.InvalidState):
        me.settle(20)  # comparing the SAS
    me.decide(True, 30)
    with pytest.raises(P.InvalidState):
        me.settle(40)  # confirmed
    with pytest.raises(P.InvalidState):
        me.settle(90_000)  # settled: not pending, so not expired
    (contact,) = store.contacts.values()
    assert contact.state == P.VERIFIED and contact.verified_at == 30 and me.state == "confirmed"
    store = P.ContactStore()
    me = P.QrExchange.create(bytes([7]) * 32, bytes([9]) * 32, b"n" * 16, b"Me", 0, store)
    me.receive(peer.text, 10)
    me.save(10)
    with pytest.raises(P.Expired):
        me.settle(86_401)
    (contact,) = store.contacts.values()  # left in place, unverified (8.1)
    assert me.state == "failed" and contact.state == P.UNVERIFIED
    with pytest.raises(P.InvalidState):
        me.settle(86_402)
    assert me.decide(False, 86_402).contact is None and store.contacts == {}


def _remote_at_sas(inputs, realtime=False):
    """A fresh inviter and invitee of ``inputs``, both holding the SAS (INVITE, ACCEPT, REPLY
    delivered)."""
    inviter, invitee = _remote_sides(inputs, realtime=realtime)
    sent, failures = _remote_run(inviter, invitee)
    assert failures == {} and inviter.done and invitee.done
    return inviter, invitee, [m for _, m in sent]


def _decision_forgeries(sender, receiver, d):
    """DECISIONs of ``sender`` (deciding ``d``) that ``receiver`` must refuse, each with the
    result code 16.3 step 5 gives it."""
    th = sender.result.transcript_hash
    keys = sender.result.keys
    genuine = P.seal_decision(keys.kd(sender.role), sender.role, th, d)
    out = []
    # Another length: malformed before anything is decrypted.
    for bad in (b"", genuine[:1], genuine[:2], genuine[:-1], genuine + b"\x00",
                genuine + bytes(16), genuine[:2] + genuine[3:]):
        out.append(("length %d" % len(bad), bad, "malformed_message"))
    # A flipped bit anywhere: the header's give another version or type, the box's do not open.
    for i in range(len(genuine)):
        for bit in range(8):
            bad = bytearray(genuine)
            bad[i] ^= 1 << bit
            out.append((f"bit {bit} of byte {i}", bytes(bad),
                        "malformed_message" if i < 2 else "authentication_failed"))
    # Under the other role's key, or with the other role or another th in the aad, or the
    # receiver's own DECISION sent back: the box does not open.
    other = receiver.role
    out += [
        ("under the receiver's role key", P.seal_decision(keys.kd(other), sender.role, th, d),
         "authentication_failed"),
        ("with the receiver's role in the aad", P.seal_decision(keys.kd(sender.role), other, th,
                                                                d), "authentication_failed"),
        ("the receiver's own DECISION reflected", P.seal_decision(keys.kd(other), other, th, d),
         "authentication_failed"),
        ("another exchange's th", P.seal_decision(keys.kd(sender.role), sender.role,
                                                  P.sha256(th), d), "authentication_failed"),
        ("the payload key in place of the decision key",
         b"\x01\x04" + AESGCM(keys.kp_i if sender.role == P.INITIATOR else keys.kp_r).encrypt(
             bytes(12), bytes([d]), P.decision_aad(sender.role, th)), "authentication_failed"),
    ]
    # A box that opens, of a plaintext that is not 0 or 1: malformed.
    for value in (2, 0xFF):
        box = AESGCM(keys.kd(sender.role)).encrypt(bytes(12), bytes([value]),
                                                    P.decision_aad(sender.role, th))
        out.append((f"plaintext {value}", b"\x01\x04" + box, "malformed_message"))
    return genuine, out


def _decision_cases():
    """The vector exchanges' inputs (with their decisions), and random ones."""
    cases = []
    if _HAVE_VECTORS:
        for ex in load("remote.json")["exchanges"]:
            cases.append((_remote_inputs(ex), ex["realtime"],
                          {"inviter": ex["inviter"]["decision"],
                           "invitee": ex["invitee"]["decision"]}))
    rng = random.Random(1631)
    for k in range(2):
        cases.append((_remote_random_inputs(rng), k == 1, {"inviter": 1, "invitee": k}))
    return cases


def test_remote_decision_refusals():
    """16.3 step 5: a DECISION of another length, with a flipped bit, under the other role's key
    (or another aad), or whose plaintext is not 0 or 1, is refused with its result code.
    Received before this side decided, the refusal ends the exchange as failed (no contact);
    received after, it is refused and the side keeps waiting, and the genuine DECISION is then
    accepted (8.1)."""
    for inputs, realtime, decisions in _decision_cases():
        base_i, base_r, _ = _remote_at_sas(inputs, realtime)
        for who in ("inviter", "invitee"):
            sender = base_i if who == "inviter" else base_r
            receiver_name = "invitee" if who == "inviter" else "inviter"
            genuine, forgeries = _decision_forgeries(sender, base_r if who == "inviter"
                                                     else base_i, decisions[who])
            assert len(genuine) == 19
            for why, bad, code in forgeries:
                for decided_first in (False, True):
                    i2, r2 = copy.deepcopy((base_i, base_r))  # fresh sides at the SAS
                    receiver = r2 if receiver_name == "invitee" else i2
                    if decided_first:
                        receiver.decide(decisions[receiver_name] == 1)
                    with pytest.raises(P.ProtocolError) as info:
                        receiver.receive(bad)
                    assert P.result_code(info.value) == code, (why, decided_first)
                    if not decided_first:
                        # "Received before this side decided, a failure ends the exchange".
                        assert receiver.failed and receiver.contact_state is None, why
                        with pytest.raises(P.InvalidState):
                            receiver.receive(genuine)
                        with pytest.raises(P.InvalidState):
                            receiver.decide(True)
                        continue
                    # "received after, it is refused and the side keeps waiting".
                    assert not receiver.failed and receiver.peer_decision is None, why
                    assert receiver.contact_state == (
                        P.AWAITING_PEER if decisions[receiver_name] == 1 else P.DELETED)
                    receiver.receive(genuine)
                    assert receiver.peer_decision == decisions[who] and receiver.complete
                    both = decisions[who] == decisions[receiver_name] == 1
                    if both:
                        assert receiver.contact_state == P.AWAITING_PEER
                        receiver.settle()
                    assert receiver.contact_state == (P.VERIFIED if both else P.DELETED)


def test_remote_decision_order():
    """16.3: a DECISION before the SAS ends the exchange as failed (malformed_message); anything
    once the peer's DECISION is in is invalid_state, changing nothing; so is deciding before the
    SAS or twice.  After this side decided, any message is read as the
    peer's DECISION: a refusal leaves the decision and the wait as they were."""
    rng = random.Random(1632)
    inputs = _remote_random_inputs(rng)
    i0, r0, (invite, accept, reply) = _remote_at_sas(inputs)
    d_r = P.seal_decision(r0.result.keys.kd_r, P.RESPONDER, r0.result.transcript_hash, 1)
    d_i = P.seal_decision(i0.result.keys.kd_i, P.INITIATOR, i0.result.transcript_hash, 1)
    # Before the SAS: the invitee after INVITE, the inviter before ACCEPT.
    i2, r2 = _remote_sides(inputs)
    i2.start()
    r2.start()
    with pytest.raises(P.InvalidState):
        r2.decide(True)
    r2.receive(invite)
    with pytest.raises(P.MalformedMessage):
        r2.receive(d_i)
    assert r2.failed
    with pytest.raises(P.MalformedMessage):
        i2.receive(d_r)
    assert i2.failed
    # A second DECISION, or any message, once the peer's is in, even before this side decided:
    # invalid_state, changing nothing (16.3 "Checks and result codes"); the person still
    # decides.
    i2, r2, _ = _remote_at_sas(inputs)
    assert r2.receive(d_i) == [] and r2.peer_decision == 1
    for m in (d_i, reply, invite, b"", d_r):
        with pytest.raises(P.InvalidState):
            r2.receive(m)
    assert not r2.failed and r2.contact_state == P.UNVERIFIED and r2.peer_decision == 1
    assert r2.decide(True) == [d_r] and r2.contact_state == P.VERIFIED
    # After both decisions: invalid_state, nothing changes; confirming twice too (rejecting
    # after confirming is allowed until settled, 8.1: test_rejecting_after_confirming), and
    # any decision once settled.
    i2, r2, _ = _remote_at_sas(inputs, realtime=True)
    assert i2.decide(True) == [d_i] and r2.decide(True) == [d_r]
    with pytest.raises(P.InvalidState):
        i2.decide(True)
    assert i2.receive(d_r) == [] and r2.receive(d_i) == []
    for side, m in ((i2, d_r), (r2, d_i)):
        with pytest.raises(P.InvalidState):
            side.receive(m)
        assert not side.failed and side.contact_state == P.AWAITING_PEER
        side.settle()
        assert side.contact_state == P.VERIFIED
        for confirmed in (True, False):
            with pytest.raises(P.InvalidState):
                side.decide(confirmed)
        assert side.contact_state == P.VERIFIED
    # Another type after this side decided: refused as malformed (out of order), and the side
    # keeps waiting (8.1: a refusal "does not change that decision"; 7.2 likewise).
    i2, r2, _ = _remote_at_sas(inputs)
    r2.decide(True)
    for m in (reply, invite, b"", b"\x01"):
        with pytest.raises(P.MalformedMessage):
            r2.receive(m)
    assert not r2.failed and r2.contact_state == P.AWAITING_PEER
    with pytest.raises(P.InvalidState):  # nothing to settle before the peer's confirmation
        r2.settle()
    assert r2.receive(d_i) == [] and r2.contact_state == P.AWAITING_PEER
    r2.settle()
    assert r2.contact_state == P.VERIFIED
    # A wait that ends is not a state of the exchange (8.1): the contact stays awaiting the
    # peer until the host rejects, which sends nothing, drops the confirmation the mailbox
    # inviter held, and deletes the contact.
    i2, r2, _ = _remote_at_sas(inputs)
    assert i2.decide(True) == []  # held: the mailbox
    i2.end_wait()
    assert i2.contact_state == P.AWAITING_PEER and not i2.complete
    assert i2.decide(False) == [] and i2.contact_state == P.DELETED
    assert i2.receive(d_r) == []  # the held confirmation is not sent
    r2.decide(True)
    r2.end_wait()
    assert r2.contact_state == P.AWAITING_PEER
    assert r2.decide(False) == [] and r2.contact_state == P.DELETED
    # The DECISION keys are the exchange's own: another exchange's keys do not open it.
    other = _remote_random_inputs(rng)
    i3, r3, _ = _remote_at_sas(other)
    with pytest.raises(P.AuthenticationFailed):
        r3.receive(d_i)


def _remote_keys_of(inputs, invite: bytes, yb: bytes):
    """What a holder of the codes derives from INVITE and Yb, with the inviter's scalar: the
    keys and tpake (for building messages a dishonest party could send)."""
    ic, ec = (P.parse_code(inputs["inviter"][k]) for k in ("invite_code", "encryption_code"))
    sid, ya, commitment = P.parse_invite(invite)
    k = C.shared_point(C.sample_scalar(inputs["inviter"]["scalar"]), yb)
    keys = P.remote_keys(P.remote_isk(sid, k, ya, commitment, yb))
    return keys, P.tpake_hash(P.invite_id(ic), invite, yb), P.invite_id(ic)


def _signed_payload(identity_seed, ephemeral_pk, device_secret, name, tpake, role):
    data = P.ed25519_public(identity_seed) + ephemeral_pk + device_secret + bytes([len(name)]) \
        + name
    return data + P.ed25519_sign(identity_seed, P.remote_signed_message(tpake, role, data))


def test_remote_payload_checks():
    """16.3 "Checking a payload", and the commitment check of step 4, against a peer who holds
    the codes and signs what it sends: each departure from the rules is refused."""
    rng = random.Random(1618)
    inputs = _remote_random_inputs(rng)
    inviter, invitee = _remote_sides(inputs)
    sent, _ = _remote_run(inviter, invitee)
    invite, accept, _ = (m for _, m in sent)
    yb = accept[2:34]
    keys, tpake, iid = _remote_keys_of(inputs, invite, yb)
    me = inputs["inviter"]
    r_seed = inputs["invitee"]["identity_seed"]
    epk = P.x25519_public(me["ephemeral_secret"])

    def reply_with(payload_i):
        box = P.seal_remote_payload(keys.kp_i, P.INITIATOR, iid, payload_i)
        return P.reply_message(P.remote_tag_i(keys.kc_i, tpake, accept), box)

    def invitee_reads(reply):
        _, r2 = _remote_sides(inputs)
        r2.start()
        assert r2.receive(invite) == [accept]
        r2.receive(reply)
        return r2

    honest = _signed_payload(me["identity_seed"], epk, me["device_secret"], me["name"], tpake,
                             P.INITIATOR)
    assert invitee_reads(reply_with(honest)).done
    bad_payloads = {
        "wrong role": _signed_payload(me["identity_seed"], epk, me["device_secret"], me["name"],
                                      tpake, P.RESPONDER),
        "other tpake": _signed_payload(me["identity_seed"], epk, me["device_secret"],
                                       me["name"], bytes(32), P.INITIATOR),
        "control character in the name": _signed_payload(
            me["identity_seed"], epk, me["device_secret"], b"Al\x07ce", tpake, P.INITIATOR),
        "invalid UTF-8 name": _signed_payload(me["identity_seed"], epk, me["device_secret"],
                                              b"Al\xffce", tpake, P.INITIATOR),
        "the receiver's own identity key": _signed_payload(
            r_seed, epk, me["device_secret"], me["name"], tpake, P.INITIATOR),
        "another ephemeral key than committed": _signed_payload(
            me["identity_seed"], P.x25519_public(rng.randbytes(32)), me["device_secret"],
            me["name"], tpake, P.INITIATOR),
        "another device secret than committed": _signed_payload(
            me["identity_seed"], epk, rng.randbytes(16), me["name"], tpake, P.INITIATOR),
        "another name than committed": _signed_payload(
            me["identity_seed"], epk, me["device_secret"], me["name"] + b"!", tpake,
            P.INITIATOR),
        "a low-order ephemeral key": _signed_payload(
            me["identity_seed"], bytes(32), me["device_secret"], me["name"], tpake, P.INITIATOR),
        "name length byte 0": honest[:80] + b"\x00" + honest[81:],
        "one byte more": honest + b"\x00",
        "one byte less": honest[:-1],
        "bad signature": honest[:-1] + bytes([honest[-1] ^ 1]),
    }
    # 16.3 "Checks and result codes": the code of each, on REPLY (where the commitment is
    # checked after the signature and before the own-key check) and by the payload check
    # alone (without INVITE's commitment).  A payload signed with the receiver's own key does
    # not open the commitment, which comes first on REPLY.
    codes = {
        "wrong role": ("authentication_failed",) * 2,
        "other tpake": ("authentication_failed",) * 2,
        "control character in the name": ("malformed_message",) * 2,
        "invalid UTF-8 name": ("malformed_message",) * 2,
        "the receiver's own identity key": ("authentication_failed", "invalid_key"),
        "another ephemeral key than committed": ("authentication_failed", None),
        "another device secret than committed": ("authentication_failed", None),
        "another name than committed": ("authentication_failed", None),
        "a low-order ephemeral key": ("authentication_failed", None),
        "name length byte 0": ("malformed_message",) * 2,
        "one byte more": ("malformed_message",) * 2,
        "one byte less": ("malformed_message",) * 2,
        "bad signature": ("authentication_failed",) * 2,
    }
    assert set(codes) == set(bad_payloads)
    for why, payload in bad_payloads.items():
        on_reply, alone = codes[why]
        with pytest.raises(P.ProtocolError) as info:
            invitee_reads(reply_with(payload))
        assert P.result_code(info.value) == on_reply, why
        if alone is None:
            P.parse_remote_payload(payload, P.INITIATOR, tpake, P.ed25519_public(r_seed))
        else:
            with pytest.raises(P.ProtocolError) as info:
                P.parse_remote_payload(payload, P.INITIATOR, tpake, P.ed25519_public(r_seed))
            assert P.result_code(info.value) == alone, why
    # The right payload under the wrong key, nonce role or invite ID does not open.
    for box in (P.seal_remote_payload(keys.kp_r, P.INITIATOR, iid, honest),
                P.seal_remote_payload(keys.kp_i, P.RESPONDER, iid, honest),
                P.seal_remote_payload(keys.kp_i, P.INITIATOR, bytes(16), honest)):
        with pytest.raises(P.ProtocolError):
            invitee_reads(P.reply_message(P.remote_tag_i(keys.kc_i, tpake, accept), box))
    # tag_I must cover this very ACCEPT.
    with pytest.raises(P.ProtocolError, match="tag_I"):
        invitee_reads(P.reply_message(P.remote_tag_i(keys.kc_i, tpake, accept + b"x"),
                                      P.seal_remote_payload(keys.kp_i, P.INITIATOR, iid,
                                                            honest)))
    # The inviter's side: a code holder's ACCEPT whose payload carries the inviter's own key.
    r = inputs["invitee"]
    own = _signed_payload(me["identity_seed"], P.x25519_public(r["ephemeral_secret"]),
                          r["device_secret"], r["name"], tpake, P.RESPONDER)
    forged = P.accept_message(yb, accept[34:66],
                              P.seal_remote_payload(keys.kp_r, P.RESPONDER, iid, own))
    i2, _ = _remote_sides(inputs)
    i2.start()
    with pytest.raises(P.InvalidKey, match="own identity"):
        i2.receive(forged)
    assert i2.failed
    # A code holder's ACCEPT whose (signed) payload carries a low-order ephemeral key: nothing
    # in 16.3's list refuses it, and the X25519 of the seed gives all zeros, which section 1
    # refuses and 1.1 calls invalid_key (the assumption of this implementation: 16.3 does not
    # name this check).
    low = _signed_payload(r["identity_seed"], bytes(32), r["device_secret"], r["name"], tpake,
                          P.RESPONDER)
    forged = P.accept_message(yb, accept[34:66],
                              P.seal_remote_payload(keys.kp_r, P.RESPONDER, iid, low))
    i2, _ = _remote_sides(inputs)
    i2.start()
    with pytest.raises(P.InvalidKey, match="all zero"):
        i2.receive(forged)
    assert i2.failed and not i2.done


def test_remote_ids_and_cpace_inputs():
    rng = random.Random(1619)
    for _ in range(50):
        a, b = P.draw_codes(lambda: rng.randrange(256))
        assert len(P.invite_id(a)) == len(P.realtime_room_id(a)) == 16
        assert len({P.invite_id(a), P.realtime_room_id(a), P.invite_id(b)}) == 3
        assert P.remote_ci(a) == b"\x18itsme-online-exchange-v1\x08" + a.encode()
        assert P.remote_prs(b) == b.encode()
        # 8-byte PRS: 100 bytes of zero padding in the generator string.
        sid = rng.randbytes(16)
        gs = P.remote_generator_string(b, a, sid)
        assert gs[:18 + 9] == b"\x11CPaceRistretto255\x08" + b.encode()
        assert gs[27] == 100 and gs[28:128] == bytes(100)
        assert gs[128:] == P.lv_cat(P.remote_ci(a), sid)
    for not_canonical in ("k7x2m9pm", "K7X2-M9PM"):
        with pytest.raises(ValueError):
            P.invite_id(not_canonical)


def test_remote_scalar_is_sampled():
    """16.2: ya and yb are 32 random bytes with the 4 high bits of the last byte cleared (the
    draft's sample_scalar): those bits of the drawn bytes do not count."""
    rng = random.Random(1620)
    for _ in range(5):
        inputs = _remote_random_inputs(rng)
        raw = inputs["inviter"]["scalar"]
        invites = set()
        for top in (0x00, 0x0F, 0xF0, 0xFF):
            drawn = raw[:31] + bytes([raw[31] & 0x0F | top & 0xF0])
            inviter, _ = _remote_sides({"inviter": dict(inputs["inviter"], scalar=drawn),
                                        "invitee": inputs["invitee"]})
            invites.add(inviter.start()[0])
        assert len(invites) == 1
        sid, ya, _ = P.parse_invite(invites.pop())
        g = P.remote_generator(inputs["inviter"]["encryption_code"],
                               inputs["inviter"]["invite_code"], sid)
        cleared = raw[:31] + bytes([raw[31] & 0x0F])
        assert ya == C.scalar_mult(cleared, g)
        assert int.from_bytes(cleared, "little") < 2**252 < C.GROUP_ORDER


# --------------------------------------------------------------------------------------------
# export.json (sections 17, 17.1, 17.2)
# --------------------------------------------------------------------------------------------

# The reason classes of the vectors' error_text, as independent/transfer.py raises them.
_ERROR_CLASSES = {
    "malformed_message": T.Malformed,
    "invalid_argument": T.InvalidInput,
    "authentication_failed": T.AuthenticationFailed,
    "corrupt_data": T.CorruptContents,
    "invalid_key": T.InvalidKey,
    "invalid_state": T.InvalidState,
}


def _reason(exc: Exception) -> str:
    """The one error_text whose class ``exc`` belongs to."""
    names = [n for n, cls in _ERROR_CLASSES.items() if isinstance(exc, cls)]
    assert len(names) == 1, (exc, names)
    return names[0]


_ARGON2_KEYS: dict = {}


class _Argon2:
    """Argon2id of 17.1 through ``cryptography``, each distinct input derived once per run
    (each costs about a second and 256 MiB); ``calls`` counts the derivations asked for."""

    def __init__(self):
        self.calls = 0
        self.inputs: set = set()

    def __call__(self, password: bytes, salt: bytes, passes: int, memory_kib: int) -> bytes:
        self.calls += 1
        args = (password, salt, passes, memory_kib)
        self.inputs.add(args)
        if args not in _ARGON2_KEYS:
            _ARGON2_KEYS[args] = T.argon2id(*args)
        return _ARGON2_KEYS[args]


def _no_kdf(*_args):
    raise AssertionError("a key was derived for an export refused by its header")


def _fake_kdf(password: bytes, salt: bytes, passes: int, memory_kib: int) -> bytes:
    """A cheap stand-in for Argon2id in tests of the format around it (not of the key)."""
    return P.sha256(P.lv_cat(b"test-kdf", password, salt, P.u64(passes), P.u64(memory_kib)))


_EXPORT_KEYS = (
    "case_text random_seed identity_seed identity_public contacts_key fingerprint_text name_text "
    "pin_text export_random_seed password_text typed_text password_kind password_bytes passes "
    "memory_kib salt nonce header key contents export text")
# exports_with_contacts: the same fields but text (format version 2 has none), and store.
_EXPORT_WITH_CONTACTS_KEYS = _EXPORT_KEYS.replace(" text", "") + " store"
_SQLITE_HEADER = b"SQLite format 3\x00"  # 17: the first 16 bytes of a contact store


@needs_vectors
def test_export_vector_file_fields():
    expect_keys(load("export.json"), "passwords typed exports exports_with_contacts rejections")
    assert set(_EXPORT_KEYS.split()) - set(_EXPORT_WITH_CONTACTS_KEYS.split()) == {"text"}
    assert set(_EXPORT_WITH_CONTACTS_KEYS.split()) - set(_EXPORT_KEYS.split()) == {"store"}


@needs_vectors
def test_export_passwords():
    """17.1: 13 characters of 16.1's alphabet, each from a byte below 248, index byte mod 31,
    shown ABCD-EFGH-JKMNP."""
    for case in _cases(load("export.json"), "passwords"):
        expect_keys(case, "random password_text")
        random_bytes = h(case["random"])
        canonical = T.draw_password(iter(random_bytes))
        assert T.format_password(canonical) == case["password_text"]
        by_hand = "".join(P.CODE_ALPHABET[b % 31] for b in random_bytes if b < 248)[:13]
        assert canonical == by_hand and len(canonical) == 13
        assert case["password_text"] == "-".join((by_hand[:4], by_hand[4:8], by_hand[8:]))
        assert T.canonical_password(case["password_text"]) == canonical
        # Running out of bytes before 13 characters is not a password.
        used = [i for i, b in enumerate(random_bytes) if b < 248][12]
        with pytest.raises(StopIteration):
            T.draw_password(iter(random_bytes[:used]))


@needs_vectors
def test_export_typed_passwords():
    """17.1: any case, spaces and '-' ignored, 13 characters of the alphabet; anything else is
    refused before any key is derived."""
    for case in _cases(load("export.json"), "typed"):
        text = case["input_text"]
        if "error_text" in case:
            expect_keys(case, "input_text error_text")
            with pytest.raises(P.ProtocolError) as caught:
                T.canonical_password(text)
            assert _reason(caught.value) == case["error_text"] == "invalid_argument"
            with pytest.raises(T.InvalidInput):
                T.password_bytes(T.KIND_GENERATED, text)
            continue
        expect_keys(case, "input_text canonical_text")
        canonical = T.canonical_password(text)
        assert canonical == case["canonical_text"]
        assert T.password_bytes(T.KIND_GENERATED, text) == canonical.encode("ascii")
        assert T.canonical_password(T.format_password(canonical)) == canonical
        # A chosen password is hashed exactly as typed.
        assert T.password_bytes(T.KIND_CHOSEN, text) == text.encode("utf-8")


def _header_by_hand(kind: int, passes: int, memory_kib: int, salt: bytes, nonce: bytes,
                    version: int = 1) -> bytes:
    """17.1's field list: "ITSMEXP" | u8(1) | u8(1) | be32(passes) | be32(memory) | u8(kind)
    | salt (16) | nonce (12); header2 (format version 2) is the same with u8(2) first."""
    return (b"ITSMEXP" + bytes([version, 1]) + passes.to_bytes(4, "big")
            + memory_kib.to_bytes(4, "big") + bytes([kind]) + salt + nonce)


@needs_vectors
def test_export_exports():
    """Every value of each export from its inputs (identity seed, contacts key, name, salt,
    nonce, password), through the module and again by hand; then opened back, from the blob and
    from the text, with the password as shown and as typed."""
    kdf = _Argon2()
    for ex in _cases(load("export.json"), "exports"):
        expect_keys(ex, _EXPORT_KEYS)
        for key in ("random_seed", "export_random_seed"):  # the library's test source only
            assert len(h(ex[key])) == 32
        assert ex["pin_text"].isdigit()  # the PIN is checked by the host before an export
        seed, contacts_key = h(ex["identity_seed"]), h(ex["contacts_key"])
        name = ex["name_text"].encode("utf-8")
        salt, nonce = h(ex["salt"]), h(ex["nonce"])
        kind = ex["password_kind"]
        pk = P.ed25519_public(seed)
        assert pk.hex() == ex["identity_public"]
        assert P.fingerprint(pk) == ex["fingerprint_text"]
        # Written parameters: libsodium's moderate level.
        assert (ex["passes"], ex["memory_kib"]) == (3, 256 * 1024)
        assert len(salt) == 16 and len(nonce) == 12
        secret = T.password_bytes(kind, ex["password_text"])
        assert secret.hex() == ex["password_bytes"]
        assert T.password_bytes(kind, ex["typed_text"]) == secret
        if kind == T.KIND_GENERATED:
            assert secret == T.canonical_password(ex["password_text"]).encode("ascii")
            assert T.format_password(secret.decode("ascii")) == ex["password_text"]
        else:
            assert kind == T.KIND_CHOSEN and secret == ex["password_text"].encode("utf-8")
        made = T.make_export(seed, contacts_key, name, ex["password_text"], kind, salt, nonce,
                             kdf=kdf)
        assert made.header.hex() == ex["header"]
        assert made.key.hex() == ex["key"]
        assert made.contents.hex() == ex["contents"]
        assert made.export.hex() == ex["export"]
        assert made.text == ex["text"]
        # By hand, from the formulas of 17 and 17.1.
        contents = (seed + contacts_key + len(name).to_bytes(2, "big") + name
                    + ex["fingerprint_text"].encode("ascii"))
        assert contents.hex() == ex["contents"] and len(contents) == 82 + len(name)
        header = _header_by_hand(kind, 3, 262144, salt, nonce)
        assert header.hex() == ex["header"]
        assert len(header) == 46  # the fields listed, 46 bytes as 17.1 says
        key = kdf(secret, salt, 3, 262144)
        assert key.hex() == ex["key"]
        export = header + AESGCM(key).encrypt(nonce, contents, header)
        assert export.hex() == ex["export"]
        assert len(export) == 144 + len(name)  # 17.1: 144 bytes plus the name's length
        assert ex["text"] == "ITSMEXP1:" + base64.urlsafe_b64encode(export).decode().rstrip("=")
        assert P.b64url_decode(ex["text"][len("ITSMEXP1:"):]) == export
        # Opened back, with the password as shown and as typed, from the blob and the text.
        for data in (export, ex["text"]):
            for typed in (ex["password_text"], ex["typed_text"]):
                limiter = P.AttemptLimiter(failures=3)
                opened = T.open_export(data, typed, limiter=limiter, now=1000, kdf=kdf)
                assert limiter.failures == 0  # a right password resets the count
                assert opened.key == key
                assert opened.header == T.ExportHeader(1, 1, 3, 262144, kind, salt, nonce)
                c = opened.contents
                assert (c.identity_seed, c.contacts_key, c.name) == (seed, contacts_key, name)
                assert c.fingerprint_text == ex["fingerprint_text"]
                assert c.identity_pk == pk and c.encoded == contents
    # Every opening derived the key from the same Argon2id input as the export.
    assert len(kdf.inputs) == len(load("export.json")["exports"])


@needs_vectors
def test_export_exports_with_contacts():
    """17.1, format version 2: every value of each export with contacts from its inputs
    (identity seed, contacts key, name, salt, nonce, password, store), through the module and
    again by hand: header2 (the header with u8(2) first), the key as in version 1, and
    header2 || AES-256-GCM(key, nonce, contents || store, header2); then opened back, with the
    password as shown and as typed, giving the contents and the store.  No text form."""
    vec = load("export.json")
    kdf = _Argon2()
    for ex in _cases(vec, "exports_with_contacts"):
        expect_keys(ex, _EXPORT_WITH_CONTACTS_KEYS)
        for key in ("random_seed", "export_random_seed"):  # the library's test source only
            assert len(h(ex[key])) == 32
        assert ex["pin_text"].isdigit()
        # "made with the password of passwords[2]"
        assert ex["password_text"] == vec["passwords"][2]["password_text"]
        seed, contacts_key = h(ex["identity_seed"]), h(ex["contacts_key"])
        name = ex["name_text"].encode("utf-8")
        salt, nonce, store = h(ex["salt"]), h(ex["nonce"]), h(ex["store"])
        kind = ex["password_kind"]
        pk = P.ed25519_public(seed)
        assert pk.hex() == ex["identity_public"]
        assert P.fingerprint(pk) == ex["fingerprint_text"]
        assert (ex["passes"], ex["memory_kib"]) == (3, 256 * 1024)
        assert len(salt) == 16 and len(nonce) == 12
        # The store: a stand-in beginning with SQLite's header, 1 to 64 MiB; its size is named.
        assert store.startswith(_SQLITE_HEADER) and 1 <= len(store) <= 64 * 1024 * 1024
        assert f"{len(store)} bytes" in ex["case_text"]
        secret = T.password_bytes(kind, ex["password_text"])
        assert secret.hex() == ex["password_bytes"]
        assert T.password_bytes(kind, ex["typed_text"]) == secret
        if kind == T.KIND_GENERATED:
            assert secret == T.canonical_password(ex["password_text"]).encode("ascii")
        else:
            assert kind == T.KIND_CHOSEN and secret == ex["password_text"].encode("utf-8")
        made = T.make_export(seed, contacts_key, name, ex["password_text"], kind, salt, nonce,
                             kdf=kdf, store=store)
        assert made.version == 2 and made.text is None and made.store == store
        assert made.header.hex() == ex["header"]
        assert made.key.hex() == ex["key"]
        assert made.contents.hex() == ex["contents"]
        assert made.export.hex() == ex["export"]
        # By hand, from the formulas of 17 and 17.1.
        contents = (seed + contacts_key + len(name).to_bytes(2, "big") + name
                    + ex["fingerprint_text"].encode("ascii"))
        assert contents.hex() == ex["contents"] and len(contents) == 82 + len(name)
        header2 = _header_by_hand(kind, 3, 262144, salt, nonce, version=2)
        assert header2.hex() == ex["header"] and len(header2) == 46
        assert header2[7] == 2 and header2[8:] == _header_by_hand(kind, 3, 262144, salt,
                                                                  nonce)[8:]
        key = kdf(secret, salt, 3, 262144)
        assert key.hex() == ex["key"]
        export2 = header2 + AESGCM(key).encrypt(nonce, contents + store, header2)
        assert export2.hex() == ex["export"]
        # 17.1: 144 bytes plus the name's length plus the store's, in 146 to 67,109,136.
        assert len(export2) == 144 + len(name) + len(store)
        assert T.EXPORT2_MIN <= len(export2) <= T.EXPORT2_MAX
        assert AESGCM(key).decrypt(nonce, export2[46:], header2) == contents + store
        # Opened back, from the blob, with the password as shown and as typed.
        for typed in (ex["password_text"], ex["typed_text"]):
            limiter = P.AttemptLimiter(failures=3)
            opened = T.open_export(export2, typed, limiter=limiter, now=1000, kdf=kdf)
            assert limiter.failures == 0
            assert opened.key == key and opened.store == store
            assert opened.header == T.ExportHeader(2, 1, 3, 262144, kind, salt, nonce)
            c = opened.contents
            assert (c.identity_seed, c.contacts_key, c.name) == (seed, contacts_key, name)
            assert c.fingerprint_text == ex["fingerprint_text"]
            assert c.identity_pk == pk and c.encoded == contents
        # A file holding it holds the blob itself, told from a text by its eighth byte.
        assert T.read_export_file(export2) == export2 and export2[7] == 0x02
        # No text form: none is made, and a text holding it is refused (invalid_argument)
        # before any key is derived or anything counted.
        with pytest.raises(ValueError):
            T.export_text(export2)
        text = "ITSMEXP1:" + P.b64url_encode(export2)
        assert T.decode_export_text(text) == export2
        for given in (text, " " + text + "\r\n", T.read_export_file(text.encode())):
            limiter = P.AttemptLimiter(failures=2)
            with pytest.raises(T.UnsupportedExport):
                T.open_export(given, ex["typed_text"], limiter=limiter, now=1000, kdf=_no_kdf)
            assert limiter.failures == 2
    assert len(kdf.inputs) == len(vec["exports_with_contacts"])


@needs_vectors
def test_export_rejections():
    """Each rejection refused with its reason class.  Refusals of the header, the text or the
    typed password derive no key and count nothing; a tag that fails counts one failure;
    contents that do not parse leave the count as it was."""
    vec = load("export.json")
    for case in _cases(vec, "rejections"):
        if "export" in case:
            expect_keys(case, "case_text export password_text error_text")
            data = h(case["export"])
        else:
            expect_keys(case, "case_text text password_text error_text")
            data = case["text"]
        kdf = _Argon2()
        limiter = P.AttemptLimiter(failures=2)
        with pytest.raises(P.ProtocolError) as caught:
            T.open_export(data, case["password_text"], limiter=limiter, now=1000, kdf=kdf)
        reason = _reason(caught.value)
        assert reason == case["error_text"], (case["case_text"], caught.value)
        if reason in ("malformed_message", "invalid_argument"):
            assert kdf.calls == 0, case["case_text"]
            # Checked before any key: the same refusal with no key derivation at all.
            with pytest.raises(_ERROR_CLASSES[reason]):
                T.open_export(data, case["password_text"], kdf=_no_kdf)
        else:
            assert kdf.calls == 1, case["case_text"]
        assert limiter.failures == (3 if reason == "authentication_failed" else 2), \
            case["case_text"]
    # The source's exports are refused with their own explanation.
    source = [c for c in vec["rejections"] if c["case_text"].startswith("the source's")]
    assert len(source) == 2
    for case in source:
        with pytest.raises(T.SourceFormatExport, match="new export on the old device"):
            T.open_export(case["text"], case["password_text"], kdf=_no_kdf)
    _export_rejections_of_format_version_2(vec)


def _export_rejections_of_format_version_2(vec):
    """The rejections of format version 2, each rebuilt from the first export (with contacts,
    or identity-only where it says so) as its case says, so that its code is the document's
    for that very change."""
    cases = {c["case_text"]: c for c in vec["rejections"]}
    first = vec["exports"][0]
    ex = vec["exports_with_contacts"][0]
    export1, export2 = h(first["export"]), h(ex["export"])
    key, nonce, header2 = h(ex["key"]), h(ex["nonce"]), h(ex["header"])
    contents, store = h(ex["contents"]), h(ex["store"])

    def blob(name: str) -> bytes:
        case = cases[name]
        assert case["password_text"] == ex["password_text"], name
        return h(case["export"])

    relabelled = blob("an identity-only export relabelled format version 2 (the header is "
                      "authenticated)")
    assert relabelled == export1[:7] + b"\x02" + export1[8:]
    assert cases["an identity-only export relabelled format version 2 (the header is "
                 "authenticated)"]["error_text"] == "authentication_failed"
    # Sealed under the right key: contents only (no store), or a store that is no SQLite file.
    no_store = blob("format version 2 with no contact store")
    assert no_store == header2 + AESGCM(key).encrypt(nonce, contents, header2)
    assert cases["format version 2 with no contact store"]["error_text"] == "corrupt_data"
    not_sqlite = blob("format version 2 whose store is not a SQLite file")
    opened = AESGCM(key).decrypt(nonce, not_sqlite[46:], header2)
    assert not_sqlite[:46] == header2 and opened[:len(contents)] == contents
    rest = opened[len(contents):]
    assert rest and not rest.startswith(_SQLITE_HEADER)
    assert cases["format version 2 whose store is not a SQLite file"]["error_text"] == \
        "corrupt_data"
    # Cut: inside version 2's window the tag fails; below it, malformed_message.
    name = "format version 2 cut to the size of an identity-only export of a 128-byte name"
    assert blob(name) == export2[:T.EXPORT_MAX] and cases[name]["error_text"] == \
        "authentication_failed"
    name = "format version 2, 145 bytes (the shortest is 146)"
    assert blob(name) == export2[:145] and cases[name]["error_text"] == "malformed_message"
    name = "format version 2 with the last byte of its store altered"
    altered = blob(name)
    assert len(altered) == len(export2) and cases[name]["error_text"] == "authentication_failed"
    # One byte of the sealed part differs (the vector alters the export's last byte, which is
    # the tag's, not the store's ciphertext: the code is the same, authentication_failed).
    changed = [i for i in range(len(export2)) if altered[i] != export2[i]]
    assert len(changed) == 1 and changed[0] >= 46
    # A text holding the first export with contacts: version 2 has no text form.
    name = "a text holding an export of format version 2 (which has no text form)"
    assert cases[name]["text"] == "ITSMEXP1:" + P.b64url_encode(export2)
    assert cases[name]["error_text"] == "invalid_argument"


@needs_vectors
def test_export_rejections_rejected_without_the_right_password_too():
    """A header refusal does not depend on the password: the right one gets the same answer."""
    vec = load("export.json")
    right = vec["exports"][0]["password_text"]
    for case in _cases(vec, "rejections"):
        if case["error_text"] not in ("malformed_message", "invalid_argument"):
            continue
        if case["case_text"] == "password not of the header's kind":
            continue
        data = h(case["export"]) if "export" in case else case["text"]
        with pytest.raises(_ERROR_CLASSES[case["error_text"]]):
            T.open_export(data, right, kdf=_no_kdf)


# Own checks of 17.1 and 17.2 -----------------------------------------------------------------

def _some_export(rng: random.Random, name_len: int = 5, kind: int = T.KIND_GENERATED,
                 password: str | None = None, passes: int = 3, memory_kib: int = 262144,
                 store: bytes | None = None):
    if password is None:
        password = (T.format_password(T.draw_password(lambda: rng.randrange(256)))
                    if kind == T.KIND_GENERATED else "chosen password")
    name = ("é" * (name_len // 2) + "x" * (name_len % 2)).encode("utf-8")
    assert len(name) == name_len
    return password, T.make_export(rng.randbytes(32), rng.randbytes(32), name, password, kind,
                                   rng.randbytes(16), rng.randbytes(12), passes=passes,
                                   memory_kib=memory_kib, kdf=_fake_kdf, store=store)


def _some_store(rng: random.Random, length: int) -> bytes:
    """A stand-in contact store: SQLite's 16-byte header, then random bytes."""
    assert length >= 16
    return _SQLITE_HEADER + rng.randbytes(length - 16)


def test_export_sizes():
    """An export is the 46-byte header, the contents (82 bytes and the name) and the tag: 145
    to 272 bytes, a text of at most 372 characters, within a version-15-L QR code (412 bytes)."""
    rng = random.Random(1701)
    for n in (1, 10, 127, 128):
        password, made = _some_export(rng, n)
        assert len(made.header) == T.HEADER_BYTES == 46
        assert len(made.export) == 46 + 82 + n + 16
        assert len(made.text) == 9 + -(-len(made.export) * 4 // 3)
        assert T.open_export(made.export, password, kdf=_fake_kdf).contents.name == made.contents[
            66:66 + n]
    assert T.EXPORT_MIN == 145 and T.EXPORT_MAX == 272
    assert len(_some_export(rng, 128)[1].text) == 372 <= 412


def test_export_parameter_window():
    """17.1: 3 to 10 passes over 256 MiB to 1 GiB are read; anything else is refused from the
    header alone, before a key is derived."""
    rng = random.Random(1702)
    password, made = _some_export(rng)
    body = made.export[T.HEADER_BYTES:]
    salt, nonce = made.salt, made.nonce
    for passes in range(0, 14):
        for memory in (0, 131072, 262143, 262144, 524288, 1048576, 1048577, 2**32 - 1):
            data = _header_by_hand(1, passes, memory, salt, nonce) + body
            inside = 3 <= passes <= 10 and 262144 <= memory <= 1048576
            if inside:
                header = T.parse_export_header(data)
                assert (header.passes, header.memory_kib) == (passes, memory)
            else:
                with pytest.raises(T.UnsupportedExport):
                    T.parse_export_header(data)
                with pytest.raises(T.UnsupportedExport):
                    T.open_export(data, password, kdf=_no_kdf)
    # The parameters are authenticated: read within the window, they change the key or the tag.
    for passes, memory in ((4, 262144), (3, 524288), (10, 1048576)):
        data = _header_by_hand(1, passes, memory, salt, nonce) + body
        with pytest.raises(T.AuthenticationFailed):
            T.open_export(data, password, kdf=_fake_kdf)
    made10 = _some_export(rng, passes=10, memory_kib=1048576)
    assert T.open_export(made10[1].text, made10[0], kdf=_fake_kdf).header.passes == 10


def test_export_every_altered_byte_is_refused():
    """Each byte of an export changed: refused by the header check, or by the tag (which
    counts), never opened."""
    rng = random.Random(1703)
    password, made = _some_export(rng, 7)
    for at in range(len(made.export)):
        data = bytearray(made.export)
        data[at] ^= 0x01
        limiter = P.AttemptLimiter()
        with pytest.raises(P.ProtocolError) as caught:
            T.open_export(bytes(data), password, limiter=limiter, kdf=_fake_kdf)
        reason = _reason(caught.value)
        passes, memory = int.from_bytes(data[9:13], "big"), int.from_bytes(data[13:17], "big")
        if at < 7:  # the magic
            expected = "malformed_message"
        elif at in (7, 8, 17):  # version, key derivation, password kind
            expected = "invalid_argument"
        elif 9 <= at < 17 and not (3 <= passes <= 10 and 262144 <= memory <= 1048576):
            expected = "invalid_argument"
        else:  # a parameter still in the window, the salt, the nonce, the sealed contents
            expected = "authentication_failed"
        assert reason == expected, at
        assert limiter.failures == (1 if reason == "authentication_failed" else 0)
    # Cut short: below the shortest export, refused from the length alone; otherwise (the
    # name's length is sealed) by the tag.
    for cut in range(len(made.export)):
        if cut < T.EXPORT_MIN:
            with pytest.raises(T.Malformed):
                T.open_export(made.export[:cut], password, kdf=_no_kdf)
        else:
            with pytest.raises(T.AuthenticationFailed):
                T.open_export(made.export[:cut], password, kdf=_fake_kdf)
    with pytest.raises(T.AuthenticationFailed):
        T.open_export(made.export + b"\x00", password, kdf=_fake_kdf)
    longest = _some_export(rng, 128)
    assert len(longest[1].export) == T.EXPORT_MAX
    with pytest.raises(T.Malformed):
        T.open_export(longest[1].export + b"\x00", longest[0], kdf=_no_kdf)


def test_export_passwords_of_each_kind():
    rng = random.Random(1704)
    # Kind 1: what is typed is read in the header's kind, and refused before any key.
    password, made = _some_export(rng)
    canonical = T.canonical_password(password)
    for typed in (canonical.lower(), " " + canonical[:5] + " - " + canonical[5:] + " "):
        assert T.open_export(made.export, typed, kdf=_fake_kdf).contents.encoded == made.contents
    for typed in (canonical[:12], canonical + "2", canonical[:12] + "O", canonical[:12] + "ı",
                  canonical[:6] + "_" + canonical[6:], canonical[:6] + "\t" + canonical[6:]):
        limiter = P.AttemptLimiter()
        with pytest.raises(T.InvalidInput):
            T.open_export(made.export, typed, limiter=limiter, kdf=_no_kdf)
        assert limiter.failures == 0
    # Kind 2: at least 8 characters, hashed exactly as typed (no case folding, no trimming).
    chosen = "Pässwort 1"
    password, made = _some_export(rng, kind=T.KIND_CHOSEN, password=chosen)
    assert made.password_bytes == chosen.encode("utf-8")
    assert T.open_export(made.text, chosen, kdf=_fake_kdf).contents.encoded == made.contents
    for typed in ("pässwort 1", " Pässwort 1", "Pässwort 1 "):
        with pytest.raises(T.AuthenticationFailed):
            T.open_export(made.text, typed, kdf=_fake_kdf)
    with pytest.raises(T.InvalidInput):
        T.open_export(made.text, "short", kdf=_no_kdf)
    with pytest.raises(T.InvalidInput):
        T.make_export(bytes(32), bytes(32), b"A", "1234567", T.KIND_CHOSEN, bytes(16),
                      bytes(12), kdf=_no_kdf)
    assert T.password_bytes(T.KIND_CHOSEN, "12345678") == b"12345678"


def test_export_attempts_are_limited():
    """17.2: wrong passwords count under 10.2's limiter: the fifth failure locks for 5 minutes,
    and a locked attempt derives no key."""
    rng = random.Random(1705)
    password, made = _some_export(rng)
    wrong = T.format_password(T.draw_password(lambda: rng.randrange(256)))
    limiter = P.AttemptLimiter()
    for i in range(5):
        with pytest.raises(T.AuthenticationFailed):
            T.open_export(made.text, wrong, limiter=limiter, now=100, kdf=_fake_kdf)
    assert limiter.failures == 5 and limiter.locked_until == 100 + 300
    with pytest.raises(P.Locked):
        T.open_export(made.text, password, limiter=limiter, now=399, kdf=_no_kdf)
    # A header refusal is still answered while locked, and counts nothing.
    with pytest.raises(T.UnsupportedExport):
        T.open_export(b"ITSMEXP\x03" + made.export[8:], password, limiter=limiter, now=399,
                      kdf=_no_kdf)
    # Relabelled format version 2 the header is one this version reads: the attempt is locked.
    with pytest.raises(P.Locked):
        T.open_export(b"ITSMEXP\x02" + made.export[8:], password, limiter=limiter, now=399,
                      kdf=_no_kdf)
    assert limiter.failures == 5
    assert T.open_export(made.text, password, limiter=limiter, now=400, kdf=_fake_kdf)
    assert limiter.failures == 0 and limiter.locked_until is None


def test_export_contents_parsed_strictly():
    """17: exact lengths, a valid name, the fingerprint recomputed from the key."""
    rng = random.Random(1706)
    seed, ck = rng.randbytes(32), rng.randbytes(32)
    good = T.build_contents(seed, ck, b"Alice")
    parsed = T.parse_contents(good)
    assert (parsed.identity_seed, parsed.contacts_key, parsed.name) == (seed, ck, b"Alice")
    fp = P.fingerprint(P.ed25519_public(seed)).encode()
    bad = [
        good[:-1], good + b"\x00", good[:64] + b"\x00\x06" + good[66:],
        good[:64] + b"\x00\x00" + good[71:],  # an empty name, lengths consistent
        seed + ck + b"\x00\x05" + b"Al\x07ce" + fp,  # a control character
        seed + ck + b"\x00\x05" + b"Al\xffce" + fp,  # not UTF-8
        seed + ck + b"\x00\x05" + b"Alice" + fp.lower(),  # lower-case fingerprint
        seed + ck + b"\x00\x05" + b"Alice" + P.fingerprint(P.ed25519_public(ck)).encode(),
        seed + ck + b"\x00\x81" + b"x" * 129 + fp,  # a 129-byte name
    ]
    for data in bad:
        with pytest.raises(T.CorruptContents):
            T.parse_contents(data)
    # Sealed under the right key, such contents are corrupt data, not a wrong password.
    salt, nonce = rng.randbytes(16), rng.randbytes(12)
    header = _header_by_hand(2, 3, 262144, salt, nonce)
    for data in bad[2:]:
        key = _fake_kdf(b"a chosen one", salt, 3, 262144)
        export = header + AESGCM(key).encrypt(nonce, data, header)
        if not T.EXPORT_MIN <= len(export) <= T.EXPORT_MAX:
            continue
        limiter = P.AttemptLimiter(failures=1)
        with pytest.raises(T.CorruptContents):
            T.open_export(export, "a chosen one", limiter=limiter, kdf=_fake_kdf)
        assert limiter.failures == 1


def test_export_texts():
    """17.1: 'ITSMEXP1:' then strict base64url; a text starting 'ITSMEXP' but not 'ITSMEXP1:'
    is another version (invalid_argument); the source's formats are refused with their own
    explanation (invalid_argument); anything else, or damaged base64url, is malformed_message.
    Surrounding tabs, line feeds, carriage returns and spaces are dropped; nothing inside."""
    rng = random.Random(1707)
    password, made = _some_export(rng)
    assert made.text.startswith("ITSMEXP1:")
    assert T.decode_export_text(made.text) == made.export
    payload = made.text[len("ITSMEXP1:"):]
    damaged = ["itsmexp1:" + payload, "ITSMEXP1: " + payload, "ITSMEXP1:\n" + payload,
               "ITSMEXP1:" + payload[:40] + " " + payload[40:],
               "ITSMEXP1:" + payload[:40] + "\r\n" + payload[40:],
               "ITSMEXP1:" + payload + "=", "ITSMEXP1:" + payload[:-1] + "+",
               "ITSMEXP1:" + payload[:-1] + "/", "", " \t\r\n ", "ITSMEXP1:",
               "ITSMEXP1:" + payload + "AA", "ITSMEX", "ITSMETR1:" + payload,
               "\u00a0ITSMEXP1:" + payload, "ITSMEXP1:" + payload + "\u00a0"]
    for text in damaged:  # "ITSMEXP1:" holds an empty export, refused by its size
        with pytest.raises(T.Malformed):
            T.open_export(text, password, kdf=_no_kdf)
    for text in ("ITSMEXP2:" + payload, "ITSMEXP10:" + payload, "ITSMEXP0:" + payload,
                 "ITSMEXP:" + payload, "ITSMEXP1" + payload, "ITSMEXP", "ITSMEXP1",
                 "ITSMEXPX:" + payload, "ITSMEXP 1:" + payload, "ITSMEXP\u00a01:" + payload,
                 "ITSMEXP2:" + payload + "\u00a0"):
        with pytest.raises(T.UnsupportedExport) as caught:
            T.decode_export_text(text)
        assert not isinstance(caught.value, T.SourceFormatExport), text
    # The source's formats: base64 or base64url (its QR text) of at least 64 bytes, whole; JSON
    # recognised textually, with tabs, line feeds, carriage returns and spaces removed.
    for text in (base64.b64encode(rng.randbytes(70)).decode(),
                 base64.b64encode(rng.randbytes(64)).decode(),
                 P.b64url_encode(rng.randbytes(64)), '{"version":3}',
                 ' {"version": 3, "privateKey": "AAAA"} ', '{ "version"\t:\r\n3 }',
                 '{"version":30}', '{"version": 3', '{"privateKey"', '\n{"a": 1, "privateKey": 2}',
                 '{"version":3}\u00a0'):
        with pytest.raises(T.SourceFormatExport, match="new export on the old device"):
            T.decode_export_text(text)
    # An export text without its prefix is, whole, strict base64url of at least 64 bytes: by
    # the rule of shape, the source's QR text.
    with pytest.raises(T.SourceFormatExport):
        T.decode_export_text(" " + payload + "\n")
    for text in ('{"version": 4}', '{"version": "3"}', "[3]", "hello", "QUJD=", "QUJ", "QUJD",
                 base64.b64encode(rng.randbytes(63)).decode(), P.b64url_encode(rng.randbytes(63)),
                 base64.b64encode(rng.randbytes(70)).decode().rstrip("="),
                 P.b64url_encode(rng.randbytes(70)) + "=",
                 base64.b64encode(rng.randbytes(69))[:40].decode() + " "
                 + base64.b64encode(rng.randbytes(69))[40:].decode(),
                 "\u00a0" + base64.b64encode(rng.randbytes(69)).decode(),
                 '{"version":\u00a03}', '\u00a0{"version":3}', '{"Version":3}', '{"privatekey"',
                 '"version":3'):
        with pytest.raises(T.Malformed):
            T.decode_export_text(text)


# The characters 17.1 drops around an export text, and characters it does not: other controls
# and Unicode white space, the separators and the invisible ones.
_TEXT_AROUND = ("\t", "\n", "\r", " ")
_NOT_AROUND = ("\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\u00a0", "\u1680", "\u2000", "\u2007",
               "\u200b", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff")


def _wrapped(text: str):
    """The text with each allowed character before it, after it, on both sides, and with all
    four repeated on both sides."""
    for c in _TEXT_AROUND:
        yield c + text
        yield text + c
        yield c + text + c
    yield " \t\r\n" + text + "\r\n\t  \n"
    yield "\r\n" + text + "\r\n"


@needs_vectors
def test_export_texts_surrounding_characters():
    """17.1: "A text is read with its surrounding tabs, line feeds, carriage returns and spaces
    (U+0009, U+000A, U+000D, U+0020) dropped, and no other character (a no-break space or a line
    separator around it makes it no export); nothing inside it is dropped."  Each vector
    export's text, so wrapped, is the same export and opens; with any other character around
    it, it is no export (malformed_message), refused before any key or count."""
    vec = load("export.json")
    kdf = _Argon2()
    for ex in _cases(vec, "exports"):
        export, text = h(ex["export"]), ex["text"]
        for wrapped in _wrapped(text):
            assert T.decode_export_text(wrapped) == export, repr(wrapped[:3])
        # 17.1: an implementation "MUST NOT refuse a shorter one [than 1,024 bytes, surrounding
        # white space included] for its length": wrapped to exactly 1,024 bytes, it is read.
        pad = 1024 - len(text)
        padded = " \t" * (pad // 4) + text + "\r\n" * (pad // 4)
        padded = padded + " " * (1024 - len(padded))
        assert len(padded.encode()) == 1024
        assert T.decode_export_text(padded) == export
        limiter = P.AttemptLimiter(failures=2)
        opened = T.open_export("\r\n\t " + text + " \n", ex["typed_text"], limiter=limiter,
                               now=1000, kdf=kdf)
        assert opened.contents.encoded == h(ex["contents"]) and limiter.failures == 0
        for c in _NOT_AROUND:
            for bad in (c + text, text + c, c + text + c, " " + c + text, text + c + "\n"):
                limiter = P.AttemptLimiter(failures=2)
                with pytest.raises(P.ProtocolError) as caught:
                    T.open_export(bad, ex["typed_text"], limiter=limiter, now=1000, kdf=_no_kdf)
                assert _reason(caught.value) == "malformed_message", (hex(ord(c)), bad[:12])
                assert limiter.failures == 2
        # Nothing inside is dropped: an allowed character within the prefix or the base64url
        # makes no export; after 'ITSMEXP' it makes a prefix other than 'ITSMEXP1:', which is
        # another version (invalid_argument).
        for c in _TEXT_AROUND:
            for at in (3, 7, 8, 9, 60, len(text) - 1):
                with pytest.raises(P.ProtocolError) as caught:
                    T.open_export(text[:at] + c + text[at:], ex["typed_text"], kdf=_no_kdf)
                expected = "invalid_argument" if at in (7, 8) else "malformed_message"
                assert _reason(caught.value) == expected, (at, repr(c))


@needs_vectors
def test_export_rejection_texts_wrapped():
    """export.json's text rejections keep their code when wrapped in the characters 17.1 drops;
    with a no-break space (or another character it does not drop) before them, none starts with
    'ITSMEXP', '{' or a base64 character, so each is malformed_message."""
    vec = load("export.json")
    texts = [c for c in _cases(vec, "rejections") if "text" in c]
    assert {c["error_text"] for c in texts} == {"malformed_message", "invalid_argument"}
    for case in texts:
        for wrapped in _wrapped(case["text"]):
            limiter = P.AttemptLimiter(failures=2)
            with pytest.raises(P.ProtocolError) as caught:
                T.open_export(wrapped, case["password_text"], limiter=limiter, now=1000,
                              kdf=_no_kdf)
            assert _reason(caught.value) == case["error_text"], (case["case_text"], wrapped)
            assert (isinstance(caught.value, T.SourceFormatExport)
                    == case["case_text"].startswith("the source's")), case["case_text"]
            assert limiter.failures == 2
        for c in ("\u00a0", "\u2028", "\u3000", "\ufeff", "\x0b"):
            for bad in (c + case["text"], c + case["text"] + c):
                with pytest.raises(P.ProtocolError) as caught:
                    T.open_export(bad, case["password_text"], kdf=_no_kdf)
                assert _reason(caught.value) == "malformed_message", (case["case_text"], bad)


@needs_vectors
def test_export_text_prefix_variants():
    """17.1: "a text with another digit is refused as an unknown version"; "A text that starts
    with ITSMEXP but not ITSMEXP1: is invalid_argument (another version); anything else is
    malformed_message."  Built from export.json's 'another text version' rejection and the
    first export's text: every prefix starting 'ITSMEXP' other than 'ITSMEXP1:' is
    invalid_argument whatever follows, wrapped or not; a prefix not starting 'ITSMEXP' (in
    another case, cut, or behind a character 17.1 does not drop) is malformed_message."""
    vec = load("export.json")
    other = [c for c in vec["rejections"] if c["case_text"] == "another text version"]
    assert len(other) == 1 and other[0]["text"].startswith("ITSMEXP2:")
    assert other[0]["error_text"] == "invalid_argument"
    payload = vec["exports"][0]["text"][len("ITSMEXP1:"):]
    assert other[0]["text"][len("ITSMEXP2:"):] == payload
    password = vec["exports"][0]["password_text"]
    unsupported = ["ITSMEXP" + d + ":" for d in "02345678"] + [
        "ITSMEXP10:", "ITSMEXP01:", "ITSMEXP1;", "ITSMEXP1", "ITSMEXP:", "ITSMEXP", "ITSMEXPx:",
        "ITSMEXP1 :", "ITSMEXP 1:", "ITSMEXP\t1:", "ITSMEXP\u00b9:", "ITSMEXP\uff11:",
        "ITSMEXP\u0661:"]
    # (Each has a character outside base64url, so that with a base64url tail it is not, whole,
    # the source's base64url QR text, which would be invalid_argument.)
    malformed = ["itsmexp1:", "Itsmexp1:", "ITSMExp1:", "ITSMEX1:", "ITSME:", "TSMEXP1:",
                 "ITSMETR1:", "\u00a0ITSMEXP1:", "\u00a0ITSMEXP2:", "\ufeffITSMEXP1:",
                 "\uff29TSMEXP1:", "I TSMEXP1:"]
    for tail in (payload, "", payload[:10], "!!"):
        for prefix in unsupported:
            for text in (prefix + tail, *_wrapped(prefix + tail)):
                limiter = P.AttemptLimiter(failures=2)
                with pytest.raises(P.ProtocolError) as caught:
                    T.open_export(text, password, limiter=limiter, now=1000, kdf=_no_kdf)
                assert _reason(caught.value) == "invalid_argument", repr(text[:14])
                assert not isinstance(caught.value, T.SourceFormatExport)
                assert limiter.failures == 2
        for prefix in malformed:
            for text in (prefix + tail, " " + prefix + tail + "\n"):
                with pytest.raises(P.ProtocolError) as caught:
                    T.open_export(text, password, kdf=_no_kdf)
                assert _reason(caught.value) == "malformed_message", repr(text[:14])
    # The right prefix and the vector's payload, wrapped, is the vector's export.
    for text in _wrapped("ITSMEXP1:" + payload):
        assert T.decode_export_text(text) == h(vec["exports"][0]["export"])


@needs_vectors
def test_export_typed_passwords_are_not_texts():
    """export.json's typed passwords: spaces (and '-') are ignored anywhere in a generated
    password, but a tab, line feed or carriage return is a character outside the alphabet
    (17.1, Passwords): the dropping of 17.1's texts does not apply to what is typed."""
    for case in _cases(load("export.json"), "typed"):
        if "error_text" in case:
            continue
        text = case["input_text"]
        assert T.canonical_password(" " + text + "  ") == case["canonical_text"]
        for c in ("\t", "\n", "\r", "\u00a0"):
            for bad in (c + text, text + c):
                with pytest.raises(T.InvalidInput):
                    T.canonical_password(bad)


def test_export_size_checked_before_the_header():
    """17.2's order: at least 145 bytes and the `ITSMEXP` magic (else malformed_message); then
    format version 1 or 2 (else invalid_argument, whatever the length); then the size window
    of that version (145 to 272 bytes for version 1, else malformed_message); then the key
    derivation, the parameters and the password kind (invalid_argument).  Through the text
    too."""
    rng = random.Random(1708)
    password, made = _some_export(rng, 7)
    header, body = made.export[:T.HEADER_BYTES], made.export[T.HEADER_BYTES:]
    unknown_versions = {
        "version 3": b"ITSMEXP\x03" + header[8:],
        "version 0": b"ITSMEXP\x00" + header[8:],
        "version 255": b"ITSMEXP\xff" + header[8:],
    }
    version_1 = {
        "key derivation 2": header[:8] + b"\x02" + header[9:],
        "2 passes": _header_by_hand(1, 2, 262144, made.salt, made.nonce),
        "2 GiB": _header_by_hand(1, 3, 2 * 1048576, made.salt, made.nonce),
        "kind 3": _header_by_hand(3, 3, 262144, made.salt, made.nonce),
    }
    for what, bad_header in {**unknown_versions, **version_1}.items():
        for n in (0, 1, 7, 8, 45, 46, 144, 145, 200, 272, 273, 300, 1000):
            data = (bad_header + body + bytes(1000))[:n]
            if n < len(bad_header):
                data = bad_header[:n]
            assert len(data) == n
            if n < 145:
                expected = "malformed_message"
            elif what in unknown_versions:
                expected = "invalid_argument"  # "whatever the length"
            else:
                expected = "invalid_argument" if n <= 272 else "malformed_message"
            for given in (data, "ITSMEXP1:" + P.b64url_encode(data),
                          "\n ITSMEXP1:" + P.b64url_encode(data) + "\r\n"):
                with pytest.raises(P.ProtocolError) as caught:
                    T.open_export(given, password, kdf=_no_kdf)
                assert _reason(caught.value) == expected, (what, n)
    # A foreign magic in the window is malformed_message, even with an unknown version too.
    for magic in (b"ITSMEXQ", b"itsmexp", b"\x00" * 7):
        for rest in (header[7:], b"\x02" + header[8:], b"\x03" + header[8:],
                     b"\x09\x09" + header[9:]):
            data = magic + rest + body
            assert T.EXPORT_MIN <= len(data) <= T.EXPORT_MAX
            with pytest.raises(T.Malformed):
                T.open_export(data, password, kdf=_no_kdf)
    # Format version 2 has its own window, 146 to 67,109,136 bytes: outside it
    # malformed_message whatever else its header says (here, also 2 passes), inside it the
    # header's other fields are read (invalid_argument) or the tag is tried.
    header2 = b"ITSMEXP\x02" + header[8:]
    bad2 = _header_by_hand(1, 2, 262144, made.salt, made.nonce, version=2)
    for n in (0, 1, 7, 8, 45, 46, 144, 145):
        for h2 in (header2, bad2):
            data = (h2 + body + bytes(1000))[:n] if n >= len(h2) else h2[:n]
            for given in (data, "ITSMEXP1:" + P.b64url_encode(data)):
                with pytest.raises(P.ProtocolError) as caught:
                    T.open_export(given, password, kdf=_no_kdf)
                assert _reason(caught.value) == "malformed_message", n
    for n in (146, 200, 272, 273, 300, 1000):
        data = (header2 + body + bytes(1000))[:n]
        with pytest.raises(T.AuthenticationFailed):
            T.open_export(data, password, kdf=_fake_kdf)
        with pytest.raises(T.UnsupportedExport):
            T.open_export((bad2 + body + bytes(1000))[:n], password, kdf=_no_kdf)
        # In a text, a blob of version 2 is another version (it has no text form).
        with pytest.raises(T.UnsupportedExport):
            T.open_export("ITSMEXP1:" + P.b64url_encode(data), password, kdf=_no_kdf)


# Own checks of format version 2 (17, 17.1: with the contacts) ---------------------------------

def test_export_with_contacts_sizes():
    """17.1: an export2 is 144 bytes plus the name's length plus the store's, 146 to
    67,109,136 bytes, with no text form; opened, it gives the contents and the store."""
    rng = random.Random(1711)
    assert (T.EXPORT2_MIN, T.EXPORT2_MAX) == (146, 67109136)
    assert T.EXPORT2_MAX == 144 + 128 + 64 * 1024 * 1024
    for name_len, store_len in ((1, 16), (1, 17), (128, 16), (5, 32768), (7, 100000)):
        store = _some_store(rng, store_len)
        password, made = _some_export(rng, name_len, store=store)
        assert made.version == 2 and made.text is None and made.store == store
        assert made.header[:8] == b"ITSMEXP\x02" and len(made.header) == 46
        assert len(made.export) == 144 + name_len + store_len
        opened = T.open_export(made.export, password, kdf=_fake_kdf)
        assert opened.store == store and opened.contents.encoded == made.contents
        assert opened.header.version == 2
    # An identity-only export keeps format version 1, its text and an empty store.
    password, made = _some_export(rng)
    assert made.version == 1 and made.text.startswith("ITSMEXP1:") and made.store == b""
    assert T.open_export(made.text, password, kdf=_fake_kdf).store == b""
    # The largest: a 128-byte name and a store of 64 MiB; one byte more is malformed_message,
    # refused from its size alone.
    store = _some_store(rng, 64 * 1024 * 1024)
    password, made = _some_export(rng, 128, store=store)
    assert len(made.export) == T.EXPORT2_MAX
    assert T.open_export(made.export, password, kdf=_fake_kdf).store == store
    with pytest.raises(T.Malformed):
        T.open_export(made.export + b"\x00", password, kdf=_no_kdf)
    # The exporter refuses a store over 64 MiB (invalid_argument), an empty one or one that is
    # no SQLite file, before any key is derived.
    for bad in (store + b"\x00", b"", b"SQLite format 3", b"sqlite format 3\x00" + bytes(10),
                bytes(100)):
        with pytest.raises(T.InvalidInput):
            T.make_export(bytes(32), bytes(32), b"A", "a chosen one", T.KIND_CHOSEN, bytes(16),
                          bytes(12), kdf=_no_kdf, store=bad)
    del store, made


def _sealed_export2(rng: random.Random, plaintext: bytes, password: str = "a chosen one"):
    """header2 || AES-256-GCM(key, nonce, plaintext, header2) by hand, under _fake_kdf."""
    salt, nonce = rng.randbytes(16), rng.randbytes(12)
    header2 = _header_by_hand(T.KIND_CHOSEN, 3, 262144, salt, nonce, version=2)
    key = _fake_kdf(password.encode("utf-8"), salt, 3, 262144)
    return header2 + AESGCM(key).encrypt(nonce, plaintext, header2)


def test_export_with_contacts_store_checked_on_opening():
    """17.1: "After the tag verifies, contents is parsed as in version 1 (the name's length
    says where it ends) and the rest is store: empty, or not beginning with SQLite's header, is
    corrupt_data."  (Also a store over 64 MiB, which 17 says a store is not, when a short name
    leaves room for it in the window.)  Corrupt contents leave the count as it was."""
    rng = random.Random(1712)
    seed, ck = rng.randbytes(32), rng.randbytes(32)
    contents = T.build_contents(seed, ck, b"Alice")
    for rest in (b"", b"S", _SQLITE_HEADER[:15], b"sqlite format 3\x00",
                 b"SQLite format 3 ", bytes(16), b"\x00" + _SQLITE_HEADER):
        export = _sealed_export2(rng, contents + rest)
        assert T.EXPORT2_MIN <= len(export)
        limiter = P.AttemptLimiter(failures=1)
        with pytest.raises(T.CorruptContents):
            T.open_export(export, "a chosen one", limiter=limiter, kdf=_fake_kdf)
        assert limiter.failures == 1
    # The store begins right after the name the contents announce: exactly SQLite's header is
    # a store (of 16 bytes); the same bytes read with a name one byte longer are not.
    export = _sealed_export2(rng, contents + _SQLITE_HEADER)
    assert T.open_export(export, "a chosen one", kdf=_fake_kdf).store == _SQLITE_HEADER
    longer = contents[:64] + b"\x00\x06" + contents[66:]
    with pytest.raises(T.CorruptContents):
        T.open_export(_sealed_export2(rng, longer + _SQLITE_HEADER), "a chosen one",
                      kdf=_fake_kdf)
    # Contents malformed before the store: a name length past the end, a bad fingerprint.
    for plaintext in (contents[:64] + b"\xff\xff" + contents[66:] + _SQLITE_HEADER,
                      contents[:-1] + b"x" + _SQLITE_HEADER, contents[:65]):
        data = _sealed_export2(rng, plaintext)
        if len(data) < T.EXPORT2_MIN:
            with pytest.raises(T.Malformed):
                T.open_export(data, "a chosen one", kdf=_no_kdf)
            continue
        with pytest.raises(T.CorruptContents):
            T.open_export(data, "a chosen one", kdf=_fake_kdf)
    # A 1-byte name leaves room for a store of 64 MiB + 127 bytes in the window: over 64 MiB,
    # not a store.
    one = T.build_contents(seed, ck, b"A")
    big = _some_store(rng, 64 * 1024 * 1024 + 127)
    export = _sealed_export2(rng, one + big)
    assert len(export) == T.EXPORT2_MAX
    with pytest.raises(T.CorruptContents):
        T.open_export(export, "a chosen one", kdf=_fake_kdf)
    del big, export


def test_export_with_contacts_every_altered_byte_is_refused():
    """Each byte of an export2 changed: refused by the header check (its version byte becomes
    3, an unknown version), or by the tag (which counts); cut within version 2's window or
    padded, by the tag; cut below it, by its size."""
    rng = random.Random(1713)
    password, made = _some_export(rng, 3, store=_some_store(rng, 40))
    export = made.export
    for at in range(len(export)):
        data = bytearray(export)
        data[at] ^= 0x01
        limiter = P.AttemptLimiter()
        with pytest.raises(P.ProtocolError) as caught:
            T.open_export(bytes(data), password, limiter=limiter, kdf=_fake_kdf)
        passes, memory = int.from_bytes(data[9:13], "big"), int.from_bytes(data[13:17], "big")
        if at < 7:
            expected = "malformed_message"
        elif at in (7, 8, 17):
            expected = "invalid_argument"
        elif 9 <= at < 17 and not (3 <= passes <= 10 and 262144 <= memory <= 1048576):
            expected = "invalid_argument"
        else:
            expected = "authentication_failed"
        assert _reason(caught.value) == expected, at
        assert limiter.failures == (1 if expected == "authentication_failed" else 0)
    for cut in range(len(export)):
        if cut < T.EXPORT2_MIN:
            with pytest.raises(T.Malformed):
                T.open_export(export[:cut], password, kdf=_no_kdf)
        else:
            with pytest.raises(T.AuthenticationFailed):
                T.open_export(export[:cut], password, kdf=_fake_kdf)
    with pytest.raises(T.AuthenticationFailed):
        T.open_export(export + b"\x00", password, kdf=_fake_kdf)
    # Relabelled version 1 (in version 1's window here), the header no longer authenticates.
    with pytest.raises(T.AuthenticationFailed):
        T.open_export(export[:7] + b"\x01" + export[8:], password, kdf=_fake_kdf)


def test_export_files():
    """17.1: a file holds the blob or (format version 1 only) the text; "an importer tells a
    blob from a text by its eighth byte, 0x01 or 0x02 after ITSMEXP, where a text has 1 =
    0x31"."""
    rng = random.Random(1714)
    password1, made1 = _some_export(rng)
    password2, made2 = _some_export(rng, store=_some_store(rng, 500))
    assert T.read_export_file(made1.export) == made1.export
    assert T.read_export_file(made2.export) == made2.export
    for text in (made1.text, made1.text + "\n", "\r\n" + made1.text + "\r\n"):
        read = T.read_export_file(text.encode("ascii"))
        assert read == text
        assert T.open_export(read, password1, kdf=_fake_kdf).contents.encoded == made1.contents
    assert T.open_export(T.read_export_file(made2.export), password2,
                         kdf=_fake_kdf).store == made2.store
    with pytest.raises(T.UnsupportedExport):
        T.open_export(T.read_export_file(b"ITSMEXP2:" + made1.text[9:].encode()), password1,
                      kdf=_no_kdf)
    with pytest.raises(T.Malformed):
        T.read_export_file(b"\xff\xfe" + made1.text.encode())


# --------------------------------------------------------------------------------------------
# transfer.json (section 17.3)
# --------------------------------------------------------------------------------------------

_TRANSFER_KEYS = (
    "case_text receiver_random_seed receiver_ephemeral_secret receiver_public transfer_id offer "
    "offer_text room_text sender sender_random_seed sender_ephemeral_secret sender_public "
    "key_message shared transcript_input transcript_hash seed sas_value sas_text key contents "
    "store identity_plaintext identity_message store_messages")
_TRANSFER_SENDER_KEYS = (
    "random_seed identity_seed identity_public contacts_key fingerprint_text name_text pin_text")
_CHUNK = 32768  # 17.3: the store's chunks


def _transfer_sides(tr):
    receiver = T.TransferReceiver(h(tr["receiver_ephemeral_secret"]), h(tr["transfer_id"]))
    s = tr["sender"]
    sender = T.TransferSender(receiver.offer_text, h(tr["sender_ephemeral_secret"]),
                              h(s["identity_seed"]), h(s["contacts_key"]),
                              s["name_text"].encode("utf-8"), store=h(tr["store"]))
    return receiver, sender


def _transfer_fields(keys: T.TransferKeys) -> dict:
    return {"transfer_id": keys.transfer_id.hex(), "receiver_public": keys.receiver_public.hex(),
            "sender_public": keys.sender_public.hex(), "shared": keys.shared.hex(),
            "transcript_input": keys.transcript_input.hex(),
            "transcript_hash": keys.transcript_hash.hex(), "seed": keys.seed.hex(),
            "sas_value": keys.sas_value, "sas_text": keys.sas_text, "key": keys.key.hex()}


def _transfer_messages(tr) -> list[bytes]:
    """What the sender sends after the key message: the identity message, then the store's."""
    return [h(tr["identity_message"])] + [h(m) for m in tr["store_messages"]]


def _assert_transferred(receiver, tr):
    s = tr["sender"]
    assert receiver.done
    opened = receiver.contents
    assert opened.encoded.hex() == tr["contents"]
    assert opened.identity_seed.hex() == s["identity_seed"]
    assert opened.identity_pk.hex() == s["identity_public"]
    assert opened.contacts_key.hex() == s["contacts_key"]
    assert opened.name.decode("utf-8") == s["name_text"]
    assert opened.fingerprint_text == s["fingerprint_text"]
    assert receiver.store == h(tr["store"])


@needs_vectors
def test_transfer_vector_file_fields():
    expect_keys(load("transfer.json"), "transfers rejections offer_rejections")


@needs_vectors
def test_transfer_offer_rejections():
    """transfer.json's offer_rejections: offers the first transfer's sender (its identity and
    its ephemeral secret) refuses to read, with the result code of 17.3 (and of section 1 for
    a low-order key: an all-zero X25519 result is invalid_key)."""
    vec = load("transfer.json")
    tr = vec["transfers"][0]
    sender = tr["sender"]
    for case in _cases(vec, "offer_rejections"):
        expect_keys(case, "case_text offer_text error_text")
        with pytest.raises(P.ProtocolError) as info:
            T.TransferSender(case["offer_text"], h(tr["sender_ephemeral_secret"]),
                             h(sender["identity_seed"]), h(sender["contacts_key"]),
                             sender["name_text"].encode("utf-8"), store=h(tr["store"]))
        assert _reason(info.value) == case["error_text"], case["case_text"]
    # Version 1's offers (ITSMETR1:, or version byte 1) are refused as another version.
    cases = {c["case_text"]: c for c in vec["offer_rejections"]}
    v1 = cases["offer text of version 1 (ITSMETR1:), the transfer of the identity only"]
    assert v1["offer_text"] == "ITSMETR1:" + P.b64url_encode(b"\x01" + h(tr["offer"])[1:])
    assert v1["error_text"] == "malformed_message"
    v1_bytes = cases["offer of version 1 (under the prefix of version 2)"]
    assert v1_bytes["offer_text"] == "ITSMETR2:" + P.b64url_encode(b"\x01" + h(tr["offer"])[1:])
    # The first transfer's own offer text is read, also with tabs, line feeds, carriage
    # returns and spaces around it (17.3 reads it "as 17.1 reads an export text"), and
    # refused with any other character around it.
    for text in (tr["offer_text"], " \t" + tr["offer_text"] + "\r\n "):
        got = T.TransferSender(text, h(tr["sender_ephemeral_secret"]),
                               h(sender["identity_seed"]), h(sender["contacts_key"]),
                               sender["name_text"].encode("utf-8"))
        assert got.key_message.hex() == tr["key_message"]
    for text in ("\u00a0" + tr["offer_text"], tr["offer_text"] + "\u2028",
                 tr["offer_text"] + "\x0b", tr["offer_text"][:12] + " " + tr["offer_text"][12:]):
        with pytest.raises(T.Malformed):
            T.parse_offer(text)


@needs_vectors
def test_transfers():
    """Each transfer from its inputs (the ephemeral secrets, the transfer id, the sender's
    identity and store), both sides run against each other, then replayed through a fresh
    receiver in every place the confirmation can take: it is done, with the contents and the
    store, exactly when the identity message and every store message it announced have
    opened."""
    vec = load("transfer.json")
    for tr in _cases(vec, "transfers"):
        expect_keys(tr, _TRANSFER_KEYS)
        expect_keys(tr["sender"], _TRANSFER_SENDER_KEYS)
        for key in (tr["receiver_random_seed"], tr["sender_random_seed"],
                    tr["sender"]["random_seed"]):
            assert len(h(key)) == 32  # the library's test source only
        receiver, sender = _transfer_sides(tr)
        assert receiver.public.hex() == tr["receiver_public"]
        assert receiver.offer.hex() == tr["offer"]
        assert receiver.offer_text == tr["offer_text"] and len(tr["offer_text"]) == 75
        assert receiver.room == tr["room_text"]
        assert T.parse_offer(tr["offer_text"]) == T.parse_offer(h(tr["offer"])) == (
            h(tr["transfer_id"]), h(tr["receiver_public"]))
        assert sender.public.hex() == tr["sender_public"]
        assert sender.key_message.hex() == tr["key_message"]
        # The sender shows the SAS once it sent the key; the receiver once it received it.
        assert receiver.receive(sender.key_message) is None
        for side in (sender, receiver):
            assert _transfer_fields(side.keys) == _subset(tr, _transfer_fields(side.keys))
        assert sender.identity_plaintext.hex() == tr["identity_plaintext"]
        messages = sender.confirm()
        assert messages[0].hex() == tr["identity_message"]
        assert [m.hex() for m in messages[1:]] == tr["store_messages"]
        assert sender.contents.hex() == tr["contents"]
        assert sender.store.hex() == tr["store"]
        # The receiver holds everything until its own confirmation.
        for m in messages:
            receiver.receive(m)
            assert receiver.contents is None and receiver.store is None and not receiver.done
        opened = receiver.confirm()
        assert receiver.done and opened is receiver.contents
        _assert_transferred(receiver, tr)
        _transfer_replayed(tr)
        _transfer_recompute(tr)
    first, second = vec["transfers"]
    # The README's two transfers: a store of 69,536 bytes (three chunks, the last of 4,000
    # bytes), and none.
    assert len(h(first["store"])) == 69536 and len(first["store_messages"]) == 3
    assert [len(h(m)) for m in first["store_messages"]] == [32786, 32786, 4018]
    assert second["store"] == "" and second["store_messages"] == []


def _transfer_replayed(tr):
    """The vector's messages through a fresh receiver, the confirmation after k of them for
    every k: done once all have arrived and the confirmation was made, not before."""
    messages = _transfer_messages(tr)
    for k in range(len(messages) + 1):
        receiver = T.TransferReceiver(h(tr["receiver_ephemeral_secret"]), h(tr["transfer_id"]))
        receiver.receive(h(tr["key_message"]))
        for i, m in enumerate(messages):
            if i == k:
                assert receiver.confirm() is None
            assert not receiver.done
            receiver.receive(m)
        if k == len(messages):
            assert receiver.confirm() is receiver.contents
        _assert_transferred(receiver, tr)
        # Done: any further message is invalid_state and changes nothing.
        for m in (h(tr["key_message"]), *messages):
            with pytest.raises(T.InvalidState):
                receiver.receive(m)
        with pytest.raises(T.InvalidState):
            receiver.confirm()
        _assert_transferred(receiver, tr)
        assert not receiver.failed


def _transfer_recompute(tr):
    """Every value of 17.3 from its formula, one by one."""
    r, s_ = h(tr["receiver_ephemeral_secret"]), h(tr["sender_ephemeral_secret"])
    tid = h(tr["transfer_id"])
    R, S = P.x25519_public(r), P.x25519_public(s_)
    assert (R.hex(), S.hex()) == (tr["receiver_public"], tr["sender_public"])
    offer = b"\x02" + tid + R
    assert offer.hex() == tr["offer"] and len(offer) == 49
    assert tr["offer_text"] == "ITSMETR2:" + base64.urlsafe_b64encode(offer).decode().rstrip("=")
    assert tr["key_message"] == (b"\x02\x01" + S).hex()
    assert len(h(tr["key_message"])) == 34
    t_in = P.lv_cat(b"itsme-transfer-v2", tid, R, S)
    assert t_in.hex() == tr["transcript_input"]
    th = hashlib.sha256(t_in).digest()
    assert th.hex() == tr["transcript_hash"]
    shared = P.x25519_shared(r, S)
    assert shared == P.x25519_shared(s_, R) and shared.hex() == tr["shared"]
    seed = P.hkdf(shared, tid, b"itsme-transfer-seed-v2", 32)
    assert seed.hex() == tr["seed"]
    okm = P.hkdf(seed, b"", P.lv_cat(b"itsme-sas-v1", th), 8)
    assert int.from_bytes(okm, "big") % 260000 == tr["sas_value"]
    assert P.format_short_code(tr["sas_value"]) == tr["sas_text"]
    key = P.hkdf(seed, b"", P.lv_cat(b"itsme-transfer-key-v2", th), 32)
    assert key.hex() == tr["key"]
    snd = tr["sender"]
    name = snd["name_text"].encode("utf-8")
    contents = (h(snd["identity_seed"]) + h(snd["contacts_key"]) + len(name).to_bytes(2, "big")
                + name + snd["fingerprint_text"].encode("ascii"))
    assert contents.hex() == tr["contents"]
    store = h(tr["store"])
    assert store == b"" or (store.startswith(_SQLITE_HEADER) and len(store) <= 64 * 1024 * 1024)
    plaintext = contents + len(store).to_bytes(4, "big")  # contents || u32(len(store))
    assert plaintext.hex() == tr["identity_plaintext"]
    aad = b"\x02\x02" + th  # concatenated, not lv_cat
    message = b"\x02\x02" + AESGCM(key).encrypt(bytes(12), plaintext, aad)
    assert message.hex() == tr["identity_message"]
    assert 105 <= len(message) <= 232 and len(message) == 2 + len(plaintext) + 16
    # The store in chunks of 32,768 bytes, the last holding the rest; chunk i sealed under
    # nonce u96(i + 1) with associated data u8(2) || u8(3) || th || u32(i).
    chunks = [store[at:at + _CHUNK] for at in range(0, len(store), _CHUNK)]
    assert len(chunks) == -(-len(store) // _CHUNK) == len(tr["store_messages"])
    assert b"".join(chunks) == store
    for i, (chunk, got) in enumerate(zip(chunks, tr["store_messages"])):
        assert 1 <= len(chunk) <= _CHUNK and (len(chunk) == _CHUNK or i == len(chunks) - 1)
        nonce = (i + 1).to_bytes(12, "big")
        aad_i = b"\x02\x03" + th + i.to_bytes(4, "big")
        sealed = b"\x02\x03" + AESGCM(key).encrypt(nonce, chunk, aad_i)
        assert sealed.hex() == got and len(sealed) == 2 + len(chunk) + 16 <= 32786
    room = hashlib.sha256(P.lv_cat(b"itsme-transfer-room-v1", tid)).digest()[:16].hex()
    assert room == tr["room_text"] and len(room) == 32


def _play_steps(receiver, steps):
    """Play ``steps`` ({receive: hex} or {confirm: true}) against ``receiver``; returns the
    index of the step that raised and its exception, or (None, None)."""
    for i, step in enumerate(steps):
        try:
            if "receive" in step:
                assert set(step) == {"receive"}
                receiver.receive(h(step["receive"]))
            else:
                assert step == {"confirm": True}
                receiver.confirm()
        except P.ProtocolError as exc:
            return i, exc
    return None, None


def _receiver_view(receiver) -> tuple:
    return (receiver.failed, receiver.keys, receiver.confirmed, list(receiver.held),
            receiver.identity_received, receiver.identity, list(receiver.chunks),
            receiver.contents, receiver.store)


@needs_vectors
def test_transfer_rejections():
    """Each rejection played against a fresh receiver of the first transfer: every step but
    the last accepted, the last refused with its code.  A refusal ends the transfer (every
    later step is invalid_state, nothing installed unless it was before), except invalid_state
    itself, which changes nothing: after a confirmation with no SAS yet the transfer goes on,
    and after the transfer is done the contents and the store stay."""
    vec = load("transfer.json")
    first = vec["transfers"][0]
    for case in _cases(vec, "rejections"):
        expect_keys(case, "case_text steps error_text")
        receiver = T.TransferReceiver(h(first["receiver_ephemeral_secret"]),
                                      h(first["transfer_id"]))
        at, exc = _play_steps(receiver, case["steps"])
        assert at == len(case["steps"]) - 1, (case["case_text"], at, exc)
        assert _reason(exc) == case["error_text"], (case["case_text"], exc)
        before = T.TransferReceiver(h(first["receiver_ephemeral_secret"]),
                                    h(first["transfer_id"]))
        assert _play_steps(before, case["steps"][:-1]) == (None, None)
        if case["error_text"] == "invalid_state":
            # Nothing changed: the receiver is as it was before the refused step.
            assert _receiver_view(receiver) == _receiver_view(before), case["case_text"]
            assert not receiver.failed
            if before.done:
                _assert_transferred(receiver, first)
                with pytest.raises(T.InvalidState):
                    receiver.confirm()
            else:
                # The confirmation came before the key: the transfer goes on from there.
                assert receiver.keys is None
                receiver.receive(h(first["key_message"]))
                assert receiver.confirm() is None
                for m in _transfer_messages(first):
                    receiver.receive(m)
                _assert_transferred(receiver, first)
            continue
        # A failure ends the transfer: every later step is refused.  Nothing is installed
        # unless the transfer was done before the refused step.
        assert receiver.failed
        assert (receiver.contents is None) == (not before.done), case["case_text"]
        assert (receiver.store is None) == (not before.done), case["case_text"]
        with pytest.raises(T.InvalidState):
            receiver.confirm()
        with pytest.raises(T.InvalidState):
            receiver.receive(h(first["key_message"]))
    _transfer_rejections_rebuilt(vec)


def _transfer_rejections_rebuilt(vec):
    """The rejections of the store messages, each rebuilt from the first transfer's messages
    as its case says, so that its code is the document's for that very change."""
    first, second = vec["transfers"]
    key, th = h(first["key"]), h(first["transcript_hash"])
    km, idm = h(first["key_message"]), h(first["identity_message"])
    sm = [h(m) for m in first["store_messages"]]
    store = h(first["store"])
    cases = {c["case_text"]: c for c in vec["rejections"]}

    def steps(name: str) -> list:
        return [h(s["receive"]) if "receive" in s else "confirm" for s in cases[name]["steps"]]

    assert steps("the chunks in another order") == [km, "confirm", idm, sm[1]]
    assert steps("a chunk twice") == [km, "confirm", idm, sm[0], sm[0]]
    assert steps("a store message before the identity") == [km, "confirm", sm[0]]
    assert steps("a store message before the identity, before the confirmation") == [km, sm[0]]
    assert steps("identity twice, the second while the store comes") == [km, "confirm", idm,
                                                                          idm]
    assert steps("a message after the transfer is done") == [km, "confirm", idm, *sm, sm[0]]
    assert steps("identity message cut to 105 bytes (the shortest length: it is opened, "
                 "and fails)")[-1] == idm[:105]
    # Lengths just outside: 2 bytes, 32,787 bytes, and a last chunk one byte too long.
    assert steps("store message of its header only (2 bytes)") == [km, "confirm", idm,
                                                                    b"\x02\x03"]
    too_long = steps("store message too long (32,787 bytes)")[-1]
    assert len(too_long) == 32787 and too_long[:-1] == sm[0]
    last = steps("the last chunk one byte longer than the store's length leaves")
    assert last[:-1] == [km, "confirm", idm, sm[0], sm[1]]
    assert len(last[-1]) == len(sm[2]) + 1 and last[-1][:len(sm[2])] == sm[2]
    # Altered: one byte of chunk 1 (after or before the confirmation).
    altered = steps("a chunk altered")
    assert altered[:-1] == [km, "confirm", idm, sm[0]] and len(altered[-1]) == len(sm[1])
    assert sum(a != b for a, b in zip(altered[-1], sm[1])) == 1
    early = steps("a chunk altered, arriving before the confirmation")
    assert early[:3] == [km, idm, sm[0]] and early[3] == altered[-1] and early[4] == "confirm"
    # The last chunk of the first transfer's store sealed as chunk 2 under the second
    # transfer's key and transcript: well formed, it does not open under the first's.
    other = steps("a last chunk sealed under another transfer's key")
    assert other[:-1] == [km, "confirm", idm, sm[0], sm[1]] and len(other[-1]) == len(sm[2])
    opened = T.open_store_message(other[-1], h(second["key"]), h(second["transcript_hash"]), 2,
                                  len(store))
    assert len(opened) == len(store) - 2 * _CHUNK
    with pytest.raises(T.AuthenticationFailed):
        T.open_store_message(other[-1], key, th, 2, len(store))
    # Sealed under the first transfer's key: an identity announcing 64 MiB + 1 byte, and one
    # announcing a store of 14 bytes that is not a SQLite file.
    over = steps("an identity announcing a store over 64 MiB")
    assert over[:-1] == [km, "confirm"]
    plaintext = AESGCM(key).decrypt(bytes(12), over[-1][2:], b"\x02\x02" + th)
    assert plaintext == h(first["contents"]) + (64 * 1024 * 1024 + 1).to_bytes(4, "big")
    not_sqlite = steps("a store that is not a SQLite file")
    assert not_sqlite[:2] == [km, "confirm"]
    plaintext = AESGCM(key).decrypt(bytes(12), not_sqlite[2][2:], b"\x02\x02" + th)
    length = int.from_bytes(plaintext[-4:], "big")
    assert plaintext[:-4] == h(first["contents"]) and 0 < length <= _CHUNK
    chunk = AESGCM(key).decrypt((1).to_bytes(12, "big"), not_sqlite[3][2:],
                                b"\x02\x03" + th + bytes(4))
    assert len(chunk) == length and not chunk.startswith(_SQLITE_HEADER)
    # Version 1's messages are another version.
    v1 = steps("message version 1 (the transfer of the identity only, no longer spoken)")
    assert v1 == [b"\x01" + km[1:]]


# Own checks of 17.3 -------------------------------------------------------------------------

def _random_transfer(rng: random.Random, name: bytes = b"Alice", store: bytes = b""):
    receiver = T.TransferReceiver(rng.randbytes(32), rng.randbytes(16))
    sender = T.TransferSender(receiver.offer_text, rng.randbytes(32), rng.randbytes(32),
                              rng.randbytes(32), name, store=store)
    return receiver, sender


def test_transfer_both_orders_of_confirmation():
    rng = random.Random(1731)
    for name in (b"A", "Zoë".encode(), b"x" * 128):
        receiver, sender = _random_transfer(rng, name)
        receiver.receive(sender.key_message)
        assert receiver.keys == sender.keys
        assert receiver.confirm() is None  # confirmed first: opens when the identity arrives
        messages = sender.confirm()
        assert len(messages) == 1  # no store: the identity message alone, announcing 0
        message = messages[0]
        assert len(message) == 2 + 82 + len(name) + 4 + 16
        receiver.receive(message)
        assert receiver.done and receiver.contents.encoded == sender.contents
        assert receiver.store == b""
    assert T.IDENTITY_MESSAGE_MIN == 105 and T.IDENTITY_MESSAGE_MAX == 232
    # With stores of every shape of its last chunk, the confirmation anywhere among them.
    for length in (16, 17, _CHUNK - 1, _CHUNK, _CHUNK + 1, 2 * _CHUNK, 3 * _CHUNK + 5):
        store = _some_store(rng, length)
        receiver, sender = _random_transfer(rng, store=store)
        receiver.receive(sender.key_message)
        messages = sender.confirm()
        assert len(messages) == 1 + -(-length // _CHUNK)
        assert [len(m) for m in messages[1:]] == [
            2 + min(_CHUNK, length - i * _CHUNK) + 16 for i in range(len(messages) - 1)]
        for k in (0, 1, len(messages)):
            r = T.TransferReceiver(receiver.ephemeral_secret, receiver.transfer_id)
            r.receive(sender.key_message)
            for i, m in enumerate(messages):
                if i == k:
                    r.confirm()
                assert not r.done
                r.receive(m)
            if k == len(messages):
                r.confirm()
            assert r.done and r.store == store and r.contents.encoded == sender.contents


def test_transfer_every_altered_identity_byte_is_refused():
    rng = random.Random(1732)
    receiver0, sender = _random_transfer(rng)
    message = sender.confirm()[0]
    for at in range(len(message)):
        receiver = T.TransferReceiver(receiver0.ephemeral_secret, receiver0.transfer_id)
        receiver.receive(sender.key_message)
        receiver.confirm()
        altered = bytearray(message)
        altered[at] ^= 0x80
        with pytest.raises(P.ProtocolError) as caught:
            receiver.receive(bytes(altered))
        assert _reason(caught.value) == ("malformed_message" if at < 2
                                         else "authentication_failed")
        assert receiver.contents is None
    for cut in (0, 1, 2, 100, 104, 105, len(message) - 1):
        receiver = T.TransferReceiver(receiver0.ephemeral_secret, receiver0.transfer_id)
        receiver.receive(sender.key_message)
        with pytest.raises(T.Malformed if cut < 105 else T.AuthenticationFailed):
            receiver.receive(message[:cut])
            receiver.confirm()


def test_transfer_every_altered_store_byte_is_refused():
    """Each byte of a store message changed: its header (another version or type) is
    malformed_message, anything else fails its tag; before the confirmation it is held and
    refused when opened.  Nothing is installed."""
    rng = random.Random(1737)
    store = _some_store(rng, 60)
    receiver0, sender = _random_transfer(rng, store=store)
    identity, chunk = sender.confirm()
    for at in range(len(chunk)):
        altered = bytearray(chunk)
        altered[at] ^= 0x80
        for early in (False, True):
            receiver = T.TransferReceiver(receiver0.ephemeral_secret, receiver0.transfer_id)
            receiver.receive(sender.key_message)
            if not early:
                receiver.confirm()
            receiver.receive(identity)
            with pytest.raises(P.ProtocolError) as caught:
                receiver.receive(bytes(altered))
                receiver.confirm()
            assert _reason(caught.value) == ("malformed_message" if at < 2
                                             else "authentication_failed"), (at, early)
            assert receiver.contents is None and receiver.store is None and receiver.failed


def test_transfer_store_chunks_and_their_order():
    """17.3: chunk i under nonce u96(i + 1) and associated data u8(2) || u8(3) || th || u32(i);
    a chunk dropped, moved or repeated does not open (authentication_failed), where its length
    is right; one of another length than len(store) gives it is malformed_message, also when
    well encrypted."""
    rng = random.Random(1738)
    store = _some_store(rng, 4 * _CHUNK)  # four full chunks: any of them has the right length
    receiver0, sender = _random_transfer(rng, store=store)
    identity, *chunks = sender.confirm()
    key, th = sender.keys.key, sender.keys.transcript_hash
    for i, (c, m) in enumerate(zip(T.store_chunks(store), chunks)):
        assert m == b"\x02\x03" + AESGCM(key).encrypt((i + 1).to_bytes(12, "big"), c,
                                                      b"\x02\x03" + th + i.to_bytes(4, "big"))
        assert T.open_store_message(m, key, th, i, len(store)) == c
    orders = {"dropped": [0, 2, 3], "moved": [1, 0, 2, 3], "repeated": [0, 0, 1, 2, 3],
              "the last first": [3]}
    for what, order in orders.items():
        receiver = T.TransferReceiver(receiver0.ephemeral_secret, receiver0.transfer_id)
        receiver.receive(sender.key_message)
        receiver.confirm()
        receiver.receive(identity)
        with pytest.raises(T.AuthenticationFailed):
            for i in order:
                receiver.receive(chunks[i])
        assert not receiver.done and receiver.failed, what
    # The identity message sealed again as a chunk does not open, nor a chunk as the identity.
    with pytest.raises(P.ProtocolError):
        T.open_store_message(b"\x02\x03" + identity[2:], key, th, 0, len(store))
    # A chunk of the right contents but sealed as another index, or with the identity's nonce.
    for nonce, aad in (((1).to_bytes(12, "big"), b"\x02\x03" + th + (1).to_bytes(4, "big")),
                       (bytes(12), b"\x02\x03" + th + bytes(4)),
                       ((2).to_bytes(12, "big"), b"\x02\x03" + th + bytes(4))):
        forged = b"\x02\x03" + AESGCM(key).encrypt(nonce, T.store_chunks(store)[0], aad)
        with pytest.raises(T.AuthenticationFailed):
            T.open_store_message(forged, key, th, 0, len(store))
    # Well encrypted under the right nonce and index but one byte longer or shorter than
    # len(store) gives: malformed_message, before any decryption.
    store = _some_store(rng, _CHUNK + 100)
    receiver0, sender = _random_transfer(rng, store=store)
    identity, c0, c1 = sender.confirm()
    key, th = sender.keys.key, sender.keys.transcript_hash
    for chunk in (store[_CHUNK:] + b"\x00", store[_CHUNK:-1]):
        forged = b"\x02\x03" + AESGCM(key).encrypt((2).to_bytes(12, "big"), chunk,
                                                   b"\x02\x03" + th + (1).to_bytes(4, "big"))
        receiver = T.TransferReceiver(receiver0.ephemeral_secret, receiver0.transfer_id)
        receiver.receive(sender.key_message)
        receiver.confirm()
        receiver.receive(identity)
        receiver.receive(c0)
        with pytest.raises(T.Malformed):
            receiver.receive(forged)
    # Sizes: ceil(len / 32768) chunks, each of 32,768 bytes but the last (1 to 32,768).
    for length, count, last in ((1, 1, 1), (_CHUNK, 1, _CHUNK), (_CHUNK + 1, 2, 1),
                                (64 * 1024 * 1024, 2048, _CHUNK)):
        assert T.chunk_count(length) == count
        assert T.chunk_length(length, count - 1) == last
    assert T.chunk_count(0) == 0 and T.store_chunks(b"") == []
    assert T.STORE_MESSAGE_MAX == 32786 and T.STORE_CHUNKS_MAX == 2048


def _with_identity(sender, plaintext: bytes) -> bytes:
    """An identity message the sender's key seals around ``plaintext`` (contents ||
    u32(len(store)), or anything else)."""
    return T.identity_message(sender.keys.key, sender.keys.transcript_hash, plaintext)


def test_transfer_identity_announces_the_store():
    """17.3: len(store) is 0 or 1 to 64 MiB (over it: corrupt_data, when the identity opens);
    the store must begin with SQLite's header (corrupt_data once every chunk has opened); the
    contents are parsed strictly (corrupt_data)."""
    rng = random.Random(1739)
    receiver0, sender = _random_transfer(rng)
    contents = sender.contents

    def fresh():
        r = T.TransferReceiver(receiver0.ephemeral_secret, receiver0.transfer_id)
        r.receive(sender.key_message)
        r.confirm()
        return r

    for length in (64 * 1024 * 1024 + 1, 2**32 - 1):
        r = fresh()
        with pytest.raises(T.CorruptContents):
            r.receive(_with_identity(sender, contents + length.to_bytes(4, "big")))
    # Exactly 64 MiB announced is read: the first chunk is then due.
    r = fresh()
    r.receive(_with_identity(sender, contents + (64 * 1024 * 1024).to_bytes(4, "big")))
    assert r.identity.chunks == 2048 and not r.done
    # Malformed contents around a valid length.
    for bad in (contents[:-1] + b"x", contents[:64] + b"\x00\x06" + contents[66:],
                contents[:64] + b"\x00\x00" + contents[71:] + b"Alice"):
        r = fresh()
        with pytest.raises(T.CorruptContents):
            r.receive(_with_identity(sender, bad + bytes(4)))
    # A store that is not a SQLite file, checked once it is whole.
    key, th = sender.keys.key, sender.keys.transcript_hash
    for store in (b"x", b"SQLite format 3", b"sqlite format 3\x00" + bytes(40),
                  bytes(_CHUNK) + _SQLITE_HEADER):
        r = fresh()
        r.receive(_with_identity(sender, contents + len(store).to_bytes(4, "big")))
        ms = T.store_messages(key, th, store)
        for m in ms[:-1]:
            r.receive(m)
        with pytest.raises(T.CorruptContents):
            r.receive(ms[-1])
        assert r.contents is None and r.store is None
    # The sender refuses to carry such a store, or one over 64 MiB (invalid_argument).
    for store in (b"x", bytes(100), _some_store(rng, 64 * 1024 * 1024 + 1)):
        with pytest.raises(T.InvalidInput):
            _random_transfer(rng, store=store)


def test_transfer_messages_held_before_the_confirmation():
    """17.3: what arrives before the receiver's confirmation is held unopened, in order: the
    identity message and at most 2,048 store messages (more is malformed_message on arrival);
    at the confirmation more than the identity announced is malformed_message, and a held one
    whose length is not its chunk's is malformed_message, even if well encrypted.  A store
    message before the identity, a second identity or key message are malformed_message."""
    rng = random.Random(1740)
    store = _some_store(rng, 2 * _CHUNK + 10)
    receiver0, sender = _random_transfer(rng, store=store)
    identity, *chunks = sender.confirm()

    def fresh():
        r = T.TransferReceiver(receiver0.ephemeral_secret, receiver0.transfer_id)
        r.receive(sender.key_message)
        return r

    # Held in order, opened in order at the confirmation.
    r = fresh()
    for m in (identity, *chunks):
        r.receive(m)
    assert r.held == [identity, *chunks] and r.identity is None and r.chunks == []
    r.confirm()
    assert r.done and r.store == store and r.held == []
    # Out of order before the confirmation.
    for seq in ([chunks[0]], [identity, identity], [identity, sender.key_message],
                [sender.key_message]):
        r = fresh()
        with pytest.raises(T.Malformed):
            for m in seq:
                r.receive(m)
        assert r.failed
    # More store messages held than announced: refused at the confirmation, nothing installed.
    r = fresh()
    for m in (identity, *chunks, chunks[-1]):
        r.receive(m)
    with pytest.raises(T.Malformed):
        r.confirm()
    assert r.contents is None and r.failed
    receiver1, plain = _random_transfer(rng)
    r = T.TransferReceiver(receiver1.ephemeral_secret, receiver1.transfer_id)
    r.receive(plain.key_message)
    r.receive(plain.confirm()[0])  # announces no store
    r.receive(b"\x02\x03" + bytes(17))  # held: its length is not checked against 0 chunks yet
    with pytest.raises(T.Malformed):
        r.confirm()
    assert r.contents is None
    # A held chunk of the wrong length (well formed, within 19 to 32,786 bytes): refused at
    # the confirmation, before its tag is tried.
    r = fresh()
    for m in (identity, chunks[0], chunks[1][:-1]):
        r.receive(m)
    with pytest.raises(T.Malformed):
        r.confirm()
    # Longer than any store message, or shorter: refused on arrival.
    for bad in (b"\x02\x03" + bytes(32785), b"\x02\x03" + bytes(16), b"\x02\x03"):
        r = fresh()
        r.receive(identity)
        with pytest.raises(T.Malformed):
            r.receive(bad)
    # At most 2,048 store messages held: the 2,049th is refused when it arrives.
    r = fresh()
    r.receive(identity)
    filler = b"\x02\x03" + bytes(17)
    for _i in range(2048):
        r.receive(filler)
    assert len(r.held) == 1 + 2048
    with pytest.raises(T.Malformed):
        r.receive(filler)
    assert r.failed


def test_transfer_invalid_state_changes_nothing():
    """17.3: "A confirmation with no SAS yet, and any message after the transfer is done, are
    refused as invalid_state without changing anything"; a second confirmation too."""
    rng = random.Random(1741)
    store = _some_store(rng, 5000)
    receiver, sender = _random_transfer(rng, store=store)
    with pytest.raises(T.InvalidState):
        receiver.confirm()
    assert not receiver.failed and receiver.keys is None
    receiver.receive(sender.key_message)
    receiver.confirm()
    with pytest.raises(T.InvalidState):
        receiver.confirm()
    assert not receiver.failed
    messages = sender.confirm()
    for m in messages:
        receiver.receive(m)
    assert receiver.done and receiver.store == store
    for m in (sender.key_message, *messages, b"", b"\x02\x03"):
        with pytest.raises(T.InvalidState):
            receiver.receive(m)
    assert receiver.done and receiver.store == store and not receiver.failed


def test_transfer_other_keys_do_not_open():
    """A wrong device answering: another sender's key gives another SAS, and that sender's
    identity message does not open under this receiver's key for the first sender."""
    rng = random.Random(1733)
    receiver, sender = _random_transfer(rng)
    intruder = T.TransferSender(receiver.offer, rng.randbytes(32), rng.randbytes(32),
                                rng.randbytes(32), b"Mallory")
    receiver.receive(sender.key_message)
    assert receiver.keys.sas_value == sender.keys.sas_value
    assert intruder.keys.transcript_hash != sender.keys.transcript_hash
    receiver.confirm()
    with pytest.raises(T.AuthenticationFailed):
        receiver.receive(intruder.confirm()[0])


def test_transfer_offers():
    rng = random.Random(1734)
    receiver, _ = _random_transfer(rng)
    text = receiver.offer_text
    assert len(text) == 75 and text.startswith("ITSMETR2:")
    assert receiver.offer[0] == 2
    for bad in (text[:-1], text + "A", text.replace("ITSMETR2:", "ITSMETR1:"),
                text.replace("ITSMETR2:", "ITSMETR3:"), text.replace("ITSMETR2:", "itsmetr2:"),
                "ITSMETR2:" + P.b64url_encode(b"\x01" + receiver.offer[1:]),
                "ITSMETR1:" + P.b64url_encode(b"\x01" + receiver.offer[1:]),
                "ITSMETR2:" + P.b64url_encode(b"\x03" + receiver.offer[1:]),
                text + "=", "ITSMEXP1:" + text[9:]):
        with pytest.raises(T.Malformed):
            T.parse_offer(bad)
    for bad in (receiver.offer[:-1], receiver.offer + b"\x00", b"\x01" + receiver.offer[1:],
                b"\x03" + receiver.offer[1:]):
        with pytest.raises(T.Malformed):
            T.parse_offer(bad)
    # A sender refuses a low-order R, and its own key as R.
    low_order = b"\x02" + receiver.transfer_id + bytes(32)
    with pytest.raises(T.InvalidKey):
        T.TransferSender(low_order, rng.randbytes(32), rng.randbytes(32), rng.randbytes(32),
                         b"A")
    s = rng.randbytes(32)
    with pytest.raises(T.InvalidKey):
        T.TransferSender(T.offer(receiver.transfer_id, P.x25519_public(s)), s,
                         rng.randbytes(32), rng.randbytes(32), b"A")


def test_transfer_receiver_refuses_version_1():
    """17.3: version 1's messages are refused as another version (malformed_message)."""
    rng = random.Random(1742)
    receiver0, sender = _random_transfer(rng, store=_some_store(rng, 100))
    identity, chunk = sender.confirm()
    for seq in ([b"\x01" + sender.key_message[1:]],
                [sender.key_message, b"\x01" + identity[1:]],
                [sender.key_message, identity, b"\x01" + chunk[1:]],
                [sender.key_message, b"\x02\x04" + identity[2:]],
                [sender.key_message, b"\x02\x00" + identity[2:]]):
        r = T.TransferReceiver(receiver0.ephemeral_secret, receiver0.transfer_id)
        with pytest.raises(T.Malformed):
            for m in seq:
                r.receive(m)


def test_transfer_sender_steps():
    rng = random.Random(1735)
    receiver, sender = _random_transfer(rng)
    sender.confirm()
    with pytest.raises(T.InvalidState):
        sender.confirm()  # the key is used once
    receiver, sender = _random_transfer(rng)
    sender.cancel()
    with pytest.raises(T.InvalidState):
        sender.confirm()  # a cancel sends nothing


def test_transfer_store_message_beyond_the_count():
    """17.3: a store message beyond the count the identity announced (or any, when it announced
    none) is refused by when it comes: after the confirmation, once done, invalid_state and the
    transfer stays done; held from before it, opened in turn after the transfer completed,
    malformed_message, which ends it as failed; an earlier held chunk that does not open is
    reported first."""
    rng = random.Random(1745)
    store = _some_store(rng, _CHUNK + 10)
    receiver0, sender = _random_transfer(rng, store=store)
    identity, *chunks = sender.confirm()
    assert len(chunks) == 2

    def fresh():
        r = T.TransferReceiver(receiver0.ephemeral_secret, receiver0.transfer_id)
        r.receive(sender.key_message)
        return r

    r = fresh()
    r.confirm()
    for m in (identity, *chunks):
        r.receive(m)
    assert r.done
    with pytest.raises(T.InvalidState):
        r.receive(chunks[-1])
    assert r.done and not r.failed and r.store == store
    r = fresh()
    for m in (identity, chunks[0], chunks[1], chunks[1]):
        r.receive(m)
    with pytest.raises(T.Malformed) as err:
        r.confirm()
    assert "beyond" in str(err.value) and r.failed and r.contents is None
    r = fresh()  # a chunk that does not open, then one beyond the count: the first is reported
    bad = chunks[0][:-1] + bytes([chunks[0][-1] ^ 1])
    for m in (identity, bad, chunks[1], chunks[1]):
        r.receive(m)
    with pytest.raises(T.AuthenticationFailed):
        r.confirm()
    assert r.failed


def test_transfer_ended_before_the_time_and_rejections():
    """17.3: "A transfer that has ended (done, rejected or failed) answers `invalid_state`
    instead, at any time, and a rejection is not checked against the time"; at 600 seconds
    it is still on time, at 601 `expired`."""
    rng = random.Random(1746)
    receiver, sender = _random_transfer(rng)
    receiver.created_at = sender.created_at = 1000
    receiver.receive(sender.key_message, now=1600)
    (identity,) = sender.confirm(now=1600)
    receiver.confirm(now=1600)
    receiver.receive(identity, now=1600)
    assert receiver.done
    for now in (1600, 1601, 99_999):
        with pytest.raises(T.InvalidState):
            receiver.receive(identity, now=now)
        with pytest.raises(T.InvalidState):
            receiver.confirm(now=now)
        with pytest.raises(T.InvalidState):
            sender.confirm(now=now)
    assert receiver.done and not receiver.failed
    for side_of in (lambda r, s: r, lambda r, s: s):
        r, s = _random_transfer(rng)
        r.created_at = s.created_at = 1000
        r.receive(s.key_message, now=1000)
        side = side_of(r, s)
        side.reject()  # long after 600 seconds would be the same: no time is given or checked
        assert side.rejected and side.ended
        for call in (lambda: side.reject(), lambda: side.confirm(now=1001),
                     lambda: side.confirm(now=5000)):
            with pytest.raises(T.InvalidState):
                call()
    r, s = _random_transfer(rng)
    r.created_at = 1000
    with pytest.raises(T.TransferExpired):
        r.receive(s.key_message, now=1601)
    assert r.failed
    with pytest.raises(T.InvalidState):
        r.receive(s.key_message, now=1601)


def test_transfer_lasts_at_most_ten_minutes():
    rng = random.Random(1736)
    receiver, sender = _random_transfer(rng)
    receiver.created_at = 1000
    receiver.receive(sender.key_message, now=1000 + 600)
    with pytest.raises(T.TransferExpired):
        receiver.confirm(now=1000 + 601)
    with pytest.raises(T.InvalidState):
        receiver.confirm(now=1000 + 10)


# 8.1, "Saving": what `save` does in every state and for every method ------------------------

def _qr_comparing(store=None, created_at=0):
    """A QR exchange created at ``created_at`` showing its SAS, nothing saved yet."""
    store = P.ContactStore() if store is None else store
    side = P.QrExchange.create(bytes([7]) * 32, bytes([9]) * 32, b"n" * 16, b"Me", created_at,
                               store)
    result = side.receive(_whole_qr_peer().text, created_at)
    return side, result, store


def _stale_awaiting(store, began_at=0):
    """A contact awaiting the peer whose exchange began at ``began_at`` (8.1's sweep)."""
    c = store.add(bytes([0x60 + len(store.contacts)]) * 32, b"Old", bytes(32), b"m" * 16,
                  b"t" * 16, "invite")
    c.state, c.exchange_began_at = P.AWAITING_PEER, began_at
    return c


def test_saving_checks_the_time_then_a_failure_then_expiry():
    """8.1, "Saving": "First the time is checked (`invalid_argument` if out of range), a failed
    exchange answers `invalid_state`, and a pending exchange more than 24 hours old fails with
    `expired`; a contact it had saved stays in place"."""
    side, _, store = _qr_comparing()
    with pytest.raises(P.InvalidArgument):
        side.save(-1)  # a time before 1970 (1.1), even once the exchange is 24 hours old
    assert side.state == "comparing" and store.contacts == {} and store.sweeps == 0
    contact = side.save(86_400)  # the last second of its 24 hours
    with pytest.raises(P.InvalidArgument):
        side.save(-1)
    with pytest.raises(P.Expired):
        side.save(86_401)
    assert side.state == "failed" and list(store.contacts.values()) == [contact]
    assert contact.state == P.UNVERIFIED
    for now in (-1, 90_000, 1):  # failed: the time first, then invalid_state, never expired
        with pytest.raises(P.InvalidArgument if now < 0 else P.InvalidState):
            side.save(now)
    assert list(store.contacts.values()) == [contact] and store.sweeps == 1
    # Expired before any save: fails, nothing stored, nothing swept.
    side, _, store = _qr_comparing()
    with pytest.raises(P.Expired):
        side.save(86_401)
    assert side.state == "failed" and store.contacts == {} and store.sweeps == 0


def test_saving_is_allowed_only_comparing_the_sas_or_imported():
    """8.1, "Saving": allowed comparing the SAS and imported; awaiting the peer's data,
    confirmed and rejected are `invalid_state` and change nothing (QR has no wait for the
    peer's decision)."""
    store = P.ContactStore()
    side = P.QrExchange.create(bytes([7]) * 32, bytes([9]) * 32, b"n" * 16, b"Me", 0, store)
    with pytest.raises(P.InvalidState):
        side.save(1)  # awaiting the peer's data: nothing to save yet
    assert side.awaiting_payload and store.contacts == {} and store.sweeps == 0
    for confirmed in (True, False):
        side, _, store = _qr_comparing()
        contact = side.save(1)
        side.decide(confirmed, 2)
        before = copy.deepcopy(store.contacts)
        with pytest.raises(P.InvalidState):
            side.save(3)
        assert store.contacts == before and store.sweeps == 1
        assert side.state == ("confirmed" if confirmed else "rejected")
        assert (store.contacts == {contact.contact_id: contact}) is confirmed
    side, _, store = _imported()
    assert side.save(1).unauthenticated and side.state == "imported"


def test_the_first_save_sweeps_then_stores_a_new_contact_unverified():
    """8.1, "Saving": the first save runs the sweep of contacts awaiting the peer, then stores
    the new contact unverified (never awaiting the peer) with the seed, both device secrets
    and the method; saving again gives the same id and writes and sweeps nothing."""
    store = P.ContactStore()
    stale = _stale_awaiting(store, began_at=0)
    fresh = _stale_awaiting(store, began_at=50_000)
    side, result, _ = _qr_comparing(store, created_at=80_000)
    assert store.sweeps == 0 and len(store.contacts) == 2  # receiving stores nothing
    contact = side.save(90_000)  # the stale one began more than 24 hours before
    assert store.sweeps == 1 and stale.contact_id not in store.contacts
    assert store.contacts[fresh.contact_id] is fresh
    peer = _whole_qr_peer()
    assert side.known_contact is False and store.contacts[contact.contact_id] is contact
    assert (contact.identity_pk, contact.name, contact.state) == (
        peer.payload[1:33], b"Peer", P.UNVERIFIED)
    assert (contact.seed, contact.mine, contact.theirs, contact.method) == (
        result.seed, b"n" * 16, peer.payload[73:89], P.QR_METHOD)
    again = _stale_awaiting(store, began_at=0)
    before = copy.deepcopy(store.contacts)
    assert side.save(90_001) is contact and side.save(100_000) is contact
    assert store.sweeps == 1 and store.contacts == before  # nothing written or swept
    assert again.contact_id in store.contacts
    # An import's first save sweeps too, and stores a new contact each time (no identity key).
    side, _, store = _imported(at=100)
    stale = _stale_awaiting(store, began_at=0)
    other, _, _ = _imported(store, at=100)
    side.created_at = other.created_at = 80_000  # begun later: still pending at 90,000
    first = side.save(90_000)
    second = other.save(90_000)
    assert stale.contact_id not in store.contacts and store.sweeps == 2
    assert first.contact_id != second.contact_id
    assert set(store.contacts) == {first.contact_id, second.contact_id}


@pytest.mark.parametrize("state", [P.UNVERIFIED, P.VERIFIED, P.DEGRADED])
def test_saving_with_the_peer_already_stored(state):
    """8.1, "Saving" and 8.2: with a contact of the peer's identity key stored, save stores
    nothing, sets the known-contact flag and gives that contact's id, its state, seed and data
    as they were; confirming then gives it the new seed, verified; rejecting leaves it."""
    for confirmed in (True, False):
        store = P.ContactStore()
        old = store.add(_whole_qr_peer().payload[1:33], b"Kept", bytes(32), b"m" * 16,
                        b"t" * 16, "bluetooth")
        old.state, old.note = state, "a note"
        before = copy.deepcopy(store.contacts)
        side, result, _ = _qr_comparing(store)
        assert side.save(5) is old and side.known_contact is True
        assert side.save(6) is old and store.contacts == before and store.sweeps == 1
        decided = side.decide(confirmed, 7)
        assert decided.known_contact and list(store.contacts) == [old.contact_id]
        c = store.contacts[old.contact_id]
        if confirmed:
            assert (c.state, c.seed, c.method, c.name, c.note, c.verified_at) == (
                P.VERIFIED, result.seed, P.QR_METHOD, b"Kept", "a note", 7)
        else:
            assert store.contacts == before and decided.contact == before[old.contact_id]
        assert store.sweeps == 1  # confirming after a save saves nothing again


def test_confirm_saves_first_and_reject_deletes_what_was_saved():
    """8.1, "Saving": "`confirm` saves first when the host has not (so a host need not call
    `save`) and otherwise acts on the contact `save` gave"; "`reject` deletes the new contact
    it saved"."""
    store = P.ContactStore()
    stale = _stale_awaiting(store)
    side, result, _ = _qr_comparing(store, created_at=86_000)
    decided = side.decide(True, 86_500)  # no save: confirming saves, with the sweep
    assert store.sweeps == 1 and stale.contact_id not in store.contacts
    (c,) = store.contacts.values()
    assert decided.contact is c and not decided.known_contact
    assert (c.state, c.verified_at, c.seed) == (P.VERIFIED, 86_500, result.seed)
    side, _, store = _qr_comparing()
    saved = side.save(1)
    assert side.decide(True, 2).contact is saved and saved.state == P.VERIFIED
    assert list(store.contacts.values()) == [saved] and store.sweeps == 1
    side, _, store = _qr_comparing()
    side.save(1)
    assert side.decide(False, 2).contact is None and store.contacts == {}
    side, _, store = _qr_comparing()  # rejected unsaved: nothing stored, nothing swept
    assert side.decide(False, 2).contact is None and side.state == "rejected"
    assert store.contacts == {} and store.sweeps == 0


def test_a_saved_contact_the_person_deleted_is_not_saved_again():
    """8.1, "Saving": a contact the exchange saved and the person then deleted while the SAS is
    compared is not saved again: `save` still gives its id, and confirming is `not_found` and
    changes nothing; rejecting counts that contact as deleted and rejects as usual (it ends
    rejected), so the person can always end the exchange."""
    side, _, store = _qr_comparing()
    contact = side.save(1)
    store.delete(contact.contact_id)
    assert side.save(2).contact_id == contact.contact_id and store.contacts == {}
    for _ in range(2):
        with pytest.raises(P.NotFound) as err:
            side.decide(True, 3)
        assert P.result_code(err.value) == "not_found"
        assert side.state == "comparing" and store.contacts == {} and store.sweeps == 1
    decided = side.decide(False, 4)  # not not_found: rejected as usual
    assert decided.contact is None and not decided.known_contact
    assert side.state == "rejected" and store.contacts == {} and store.sweeps == 1
    for confirmed in (True, False):
        with pytest.raises(P.InvalidState):
            side.decide(confirmed, 5)  # rejected: decided once
        with pytest.raises(P.InvalidState):
            side.save(5)
    # Another contact stored meanwhile is not touched by the rejection.
    side, _, store = _qr_comparing()
    contact = side.save(1)
    store.delete(contact.contact_id)
    other = _stale_awaiting(store, began_at=1)
    before = copy.deepcopy(store.contacts)
    assert side.decide(False, 2).contact is None and side.state == "rejected"
    assert store.contacts == before and other.contact_id in store.contacts
    # A stored contact exchanged again (8.2) that the person deleted: confirming is
    # not_found, rejecting rejects as usual.
    store = P.ContactStore()
    old = store.add(_whole_qr_peer().payload[1:33], b"Kept", bytes(32), b"m" * 16,
                    b"t" * 16, "bluetooth")
    side, _, _ = _qr_comparing(store)
    assert side.save(1) is old and side.known_contact
    store.delete(old.contact_id)
    with pytest.raises(P.NotFound):
        side.decide(True, 2)
    assert side.state == "comparing" and store.contacts == {}
    decided = side.decide(False, 3)
    assert decided.contact is None and side.state == "rejected" and store.contacts == {}
    # Left comparing until it expires, then rejected: one already deleted counts as deleted.
    side, _, store = _qr_comparing()
    contact = side.save(1)
    store.delete(contact.contact_id)
    with pytest.raises(P.Expired):
        side.save(86_401)
    assert side.state == "failed" and store.contacts == {}
    assert side.decide(False, 86_402).contact is None


@needs_vectors
def test_a_contact_the_person_deleted_in_a_bluetooth_or_remote_exchange():
    """8.1, "Saving", for the methods whose decisions travel: while the SAS is compared,
    confirming a contact the exchange saved and the person deleted is `not_found` and changes
    nothing, and rejecting counts it as deleted and rejects as usual (sends this side's
    rejection, ends rejected).  Once this side confirmed, settling the peer's confirmation is
    `not_found` (changing nothing), while the peer's rejection, and rejecting, count it as
    deleted."""
    ex = _cases(load("bluetooth.json"), "exchanges")[0]
    inputs = _remote_random_inputs(random.Random(81))

    def bt():
        a, b = _bt_at_sas(ex)
        return a, b, _bt_send

    def remote(realtime):
        def at_sas():
            i, r, _ = _remote_at_sas(inputs, realtime=realtime)
            return r, i, _bt_send
        return at_sas

    for method, at_sas in (("bluetooth", bt), ("invite", remote(False)),
                           ("realtime", remote(True))):
        a, b, send = at_sas()
        with pytest.raises(P.NotFound):
            a.person_deletes()  # nothing saved: nothing to delete
        assert a.save(1) == P.UNVERIFIED
        a.person_deletes()
        assert a.contact_state == P.DELETED, method
        assert a.save(2) == P.UNVERIFIED and a.sweeps == 1  # not saved again
        for _ in range(2):
            with pytest.raises(P.NotFound) as err:
                a.decide(True, now=3)
            assert P.result_code(err.value) == "not_found", method
            assert (a.own_decision, a.sweeps, a.contact_state) == (None, 1, P.DELETED), method
        sent = a.decide(False, now=4)  # rejected as usual: this side's rejection sent
        assert len(sent) == 1 and a.own_decision == P.DECISION_REJECTED, method
        send(a, b, sent)
        # The peer, undecided, is told and not rejected for (8.1): its host rejects.
        assert b.peer_decision == P.DECISION_REJECTED and b.own_decision is None, method
        assert b.contact_state == P.UNVERIFIED, method
        with pytest.raises(P.InvalidState):
            a.decide(False, now=5)
        with pytest.raises(P.InvalidState):
            a.settle(now=5)
        # Once this side confirmed: the peer's confirmation cannot be settled.
        a, b, send = at_sas()
        send(a, b, a.decide(True, now=1))
        a.person_deletes()
        send(b, a, b.decide(True, now=2))
        assert a.peer_decision == P.DECISION_CONFIRMED, method
        for _ in range(2):
            with pytest.raises(P.NotFound) as err:
                a.settle(now=3)
            assert P.result_code(err.value) == "not_found", method
            assert not a.settled and a.verified_at is None, method
            assert not a.settled_rejected and a.contact_state == P.DELETED, method
        # Once this side confirmed: the peer's rejection settles as rejected.
        a, b, send = at_sas()
        send(a, b, a.decide(True, now=1))
        a.person_deletes()
        send(b, a, b.decide(False, now=2))
        assert a.settle(now=3) == P.DELETED and a.settled_rejected, method
        with pytest.raises(P.InvalidState):
            a.settle(now=4)
        # Once this side confirmed and the exchange expired: rejecting counts it as deleted.
        a, b, send = at_sas()
        a.created_at = 1_000
        send(a, b, a.decide(True, now=1_001))
        a.person_deletes()
        with pytest.raises(P.Expired):
            a.settle(now=87_401)
        assert a.failed and a.decide(False) == [] and a.saved_contact_deleted, method
        # The peer's rejection before this side decided: confirming is invalid_state; the
        # host's rejection counts the contact as deleted and sends this side's rejection.
        a, b, send = at_sas()
        a.save(1)
        a.person_deletes()
        send(b, a, b.decide(False, now=2))
        assert a.own_decision is None and a.contact_state == P.DELETED, method
        with pytest.raises(P.InvalidState):
            a.decide(True, now=3)
        sent = a.decide(False, now=3)
        assert len(sent) == 1 and a.own_decision == P.DECISION_REJECTED, method
        assert a.contact_state == P.DELETED, method


def _decision_methods(ex, inputs):
    """``at_sas()`` for each method whose decisions travel, as (method, at_sas): both sides at
    the SAS and ``send(x, y, m)`` (as :func:`_settle_cases`); for invite and real-time, once
    with the invitee as ``a`` and once with the inviter."""
    def bt():
        a, b = _bt_at_sas(ex)
        return a, b, _bt_send

    def remote(realtime, invitee_first):
        def at_sas():
            i, r, _ = _remote_at_sas(inputs, realtime=realtime)
            return (r, i, _bt_send) if invitee_first else (i, r, _bt_send)
        return at_sas

    return [("bluetooth", bt),
            ("invite, a the invitee", remote(False, True)),
            ("invite, a the inviter", remote(False, False)),
            ("realtime, a the invitee", remote(True, True)),
            ("realtime, a the inviter", remote(True, False))]


def _end_wait(side) -> None:
    """The host reports that the wait ended: the Bluetooth session, or the room (16.5),
    closed."""
    if isinstance(side, P.BluetoothExchange):
        side.end_session()
    else:
        side.end_wait()


def _rejecting_states(at_sas):
    """This side (``a``) confirmed and no decision is settled: (name, a, b, send), the
    peer's decision not in, its confirmation in, its rejection in."""
    cases = []
    a, b, send = at_sas()
    send(a, b, a.decide(True, now=1))
    cases.append(("the peer's decision not in", a, b, send))
    for peer_confirms in (True, False):
        a, b, send = at_sas()
        send(a, b, a.decide(True, now=1))
        send(b, a, b.decide(peer_confirms, now=2))
        assert a.peer_decision == (1 if peer_confirms else 0)
        cases.append((f"the peer's {'confirmation' if peer_confirms else 'rejection'} in",
                      a, b, send))
    return cases


@needs_vectors
def test_rejecting_after_confirming():
    """8.1: "Rejecting is allowed in every state before a decision is settled (comparing the
    SAS, or awaiting the peer's decision), whether or not the peer's decision is in: [...] a
    side that confirmed sends nothing (its confirmation is already out); either way the new
    contact is deleted (a stored one stays as it was) and the exchange ends *rejected*."
    Once rejected, deciding, settling and saving are `invalid_state`; once settled (the
    peer's confirmation settled, confirmed at once, or the peer's rejection settled),
    rejecting is `invalid_state` and changes nothing."""
    ex = _cases(load("bluetooth.json"), "exchanges")[0]
    inputs = _remote_random_inputs(random.Random(81))
    for method, at_sas in _decision_methods(ex, inputs):
        for name, a, b, send in _rejecting_states(at_sas):
            where = (method, name)
            # (the peer's rejection, once this side confirmed, deletes the contact, 8.1)
            state = P.DELETED if a.peer_decision == P.DECISION_REJECTED else P.AWAITING_PEER
            assert a.saved and a.contact_state == state, where
            with pytest.raises(P.InvalidState):  # confirming twice
                a.decide(True, now=2)
            assert a.contact_state == state and not a.saved_contact_deleted, where
            peer_in = a.peer_decision
            assert a.decide(False, now=3) == [], where  # nothing sent
            assert a.rejected_after_confirming and a.saved_contact_deleted, where
            assert not a.failed and not a.settled and a.verified_at is None, where
            assert a.contact_state == P.DELETED and a.peer_decision == peer_in, where
            for confirmed in (False, True):
                with pytest.raises(P.InvalidState):
                    a.decide(confirmed, now=4)
            with pytest.raises(P.InvalidState):
                a.settle(now=4)
            with pytest.raises(P.InvalidState):
                a.save(4)
            if peer_in is None:
                # The peer's decision is still read once (8.1) and changes nothing.
                sent = b.decide(True, now=4)
                for m in sent:
                    assert a.receive(m) == [], where
                assert a.peer_decision == P.DECISION_CONFIRMED and a.complete, where
                assert a.contact_state == P.DELETED, where
                with pytest.raises(P.InvalidState):
                    a.settle(now=5)
            assert a.contact_state == P.DELETED and not a.failed, where
            # Once rejected, even past 24 hours, the exchange is not pending: settling is
            # invalid_state, not expired, and it does not fail.
            a.created_at = 0
            with pytest.raises(P.InvalidState):
                a.settle(now=86_401)
            assert not a.failed, where
        # A contact the person deleted counts as deleted (8.1, "Saving"), the peer's
        # confirmation in or not.
        for name, a, b, send in _rejecting_states(at_sas):
            a.person_deletes()
            assert a.decide(False, now=3) == [] and a.rejected_after_confirming, (method, name)
            assert a.contact_state == P.DELETED, (method, name)
        # Settled: rejecting is invalid_state and changes nothing.
        for peer_confirms, settled in ((True, P.VERIFIED), (False, P.DELETED)):
            a, b, send = at_sas()
            send(a, b, a.decide(True, now=1))
            send(b, a, b.decide(peer_confirms, now=2))
            assert a.settle(now=3) == settled, method
            for confirmed in (False, True):
                with pytest.raises(P.InvalidState):
                    a.decide(confirmed, now=4)
            assert a.contact_state == settled and not a.rejected_after_confirming, method
        # Confirmed at once (the peer's confirmation came first; the mailbox inviter's never
        # does, 16.3 step 5): settled, nothing to reject.
        a, b, send = at_sas()
        send(b, a, b.decide(True, now=1))
        if a.peer_decision == P.DECISION_CONFIRMED:
            send(a, b, a.decide(True, now=2))
            assert a.settled and a.contact_state == P.VERIFIED, method
            with pytest.raises(P.InvalidState):
                a.decide(False, now=3)
            assert a.contact_state == P.VERIFIED and not a.saved_contact_deleted, method
        else:
            assert method == "invite, a the invitee"
        # A side that rejected has nothing more to reject.
        a, b, send = at_sas()
        assert len(a.decide(False, now=1)) == 1, method
        with pytest.raises(P.InvalidState):
            a.decide(False, now=2)
        assert not a.rejected_after_confirming, method


def _wait_states(at_sas):
    """States in which the wait may end, each built by ``make()`` (deterministic: the same
    inputs give the same messages): (name, make), ``make()`` giving (a, b, send)."""
    def comparing():
        return at_sas()

    def comparing_saved():
        a, b, send = at_sas()
        a.save(1)
        return a, b, send

    def comparing_peer(peer_confirms):
        def make():
            a, b, send = at_sas()
            send(b, a, b.decide(peer_confirms, now=1))
            return a, b, send
        return make

    def awaiting():
        a, b, send = at_sas()
        send(a, b, a.decide(True, now=1))
        return a, b, send

    def awaiting_peer(peer_confirms):
        def make():
            a, b, send = awaiting()
            send(b, a, b.decide(peer_confirms, now=2))
            return a, b, send
        return make

    def awaiting_deleted():
        a, b, send = awaiting()
        a.person_deletes()
        return a, b, send

    return [("comparing the SAS", comparing), ("comparing the SAS, saved", comparing_saved),
            ("comparing the SAS, the peer's confirmation in", comparing_peer(True)),
            ("comparing the SAS, the peer's rejection in", comparing_peer(False)),
            ("awaiting the peer's decision", awaiting),
            ("awaiting, the peer's confirmation in", awaiting_peer(True)),
            ("awaiting, the peer's rejection in", awaiting_peer(False)),
            ("awaiting, the contact deleted by the person", awaiting_deleted)]


def _outcome(side, call):
    """What ``call(side)`` gives (its value or its refusal's class) and the state after."""
    try:
        got = call(side)
    except P.ProtocolError as err:
        got = type(err)
    return (got, side.contact_state, side.own_decision, side.peer_decision, side.saved,
            side.sweeps, side.settled, side.settled_rejected, side.verified_at,
            side.saved_contact_deleted, side.failed, side.complete)


_WAIT_CALLS = {
    "save": [lambda s: s.save(5)],
    "confirm": [lambda s: s.decide(True, now=6)],
    "reject": [lambda s: s.decide(False, now=6)],
    "settle": [lambda s: s.settle(now=7)],
    "confirm, settle, reject": [lambda s: s.decide(True, now=6), lambda s: s.settle(now=7),
                                lambda s: s.decide(False, now=8)],
    "save, reject, save": [lambda s: s.save(5), lambda s: s.decide(False, now=6),
                           lambda s: s.save(7)],
}


@needs_vectors
def test_a_wait_that_ends_is_not_a_state_of_the_exchange():
    """8.1: "**A wait that ends** (the Bluetooth session lost, `peer-left`, the room closed) is
    not a state of the exchange: the library learns of it only from its host, and the
    exchange stays in its state until the host rejects it [...].  Until then saving and
    confirming act as in that state; a confirmation that cannot reach the peer leaves the new
    contact *awaiting the peer*".  In every state, saving, confirming, rejecting and
    settling give the same after the host reports the end of the wait as without it."""
    ex = _cases(load("bluetooth.json"), "exchanges")[0]
    inputs = _remote_random_inputs(random.Random(81))
    for method, at_sas in _decision_methods(ex, inputs):
        for name, make in _wait_states(at_sas):
            for calls_name, calls in _WAIT_CALLS.items():
                where = (method, name, calls_name)
                ended, _, _ = make()
                kept, _, _ = make()
                before = _outcome(ended, lambda s: None)
                _end_wait(ended)
                assert _outcome(ended, lambda s: None) == before, where
                assert not ended.complete or kept.complete, where
                for call in calls:
                    assert _outcome(ended, call) == _outcome(kept, call), where
        # What that means, in absolute terms: comparing the SAS once the wait ended, saving
        # saves, confirming sends the confirmation (nowhere to go) and leaves the contact
        # awaiting the peer, and the host's rejection then deletes it, sending nothing.
        a, b, send = at_sas()
        _end_wait(a)
        assert a.contact_state == P.UNVERIFIED and a.save(1) == P.UNVERIFIED, method
        sent = a.decide(True, now=2)
        assert a.own_decision == P.DECISION_CONFIRMED and a.saved, method
        assert a.contact_state == P.AWAITING_PEER and not a.complete, method
        mailbox_inviter = isinstance(a, P.RemoteExchange) and a.role == P.INITIATOR \
            and not a.realtime
        assert len(sent) == (0 if mailbox_inviter else 1), method
        with pytest.raises(P.InvalidState):  # nothing to settle: the peer's decision not in
            a.settle(now=3)
        assert a.decide(False, now=4) == [] and a.contact_state == P.DELETED, method
        # Undecided once the wait ended: the host's rejection sends this side's rejection.
        a, b, send = at_sas()
        _end_wait(a)
        assert len(a.decide(False, now=1)) == 1 and a.contact_state == P.DELETED, method
        # The peer's rejection in, then the wait ended: saving is still allowed, confirming
        # invalid_state (before the saved contact is looked up), rejecting sends it.
        a, b, send = at_sas()
        a.save(1)
        a.person_deletes()
        send(b, a, b.decide(False, now=2))
        _end_wait(a)
        assert a.save(3) == P.UNVERIFIED and a.sweeps == 1, method
        with pytest.raises(P.InvalidState) as err:
            a.decide(True, now=4)
        assert P.result_code(err.value) == "invalid_state", method
        assert len(a.decide(False, now=5)) == 1 and a.own_decision == 0, method


@needs_vectors
def test_the_peers_rejection_before_this_side_decided():
    """8.1: "A side whose person has not decided yet when the peer's rejection arrives cannot
    confirm any more (`invalid_state`); the host then rejects it, which deletes the contact it
    saved and sends this side's rejection (the library does not reject by itself: the person
    is told first)."  Until the host rejects, the exchange is comparing the SAS with the
    peer's decision in: it may be saved (8.1, "Saving"), not settled."""
    ex = _cases(load("bluetooth.json"), "exchanges")[0]
    inputs = _remote_random_inputs(random.Random(81))
    for method, at_sas in _decision_methods(ex, inputs):
        a, b, send = at_sas()
        rejection = b.decide(False, now=1)
        assert len(rejection) == 1, method
        assert a.receive(rejection[0]) == [], method  # nothing sent by itself
        assert a.peer_decision == P.DECISION_REJECTED and a.own_decision is None, method
        assert not a.complete and not a.failed and a.contact_state == P.UNVERIFIED, method
        assert a.save(2) == P.UNVERIFIED and a.saved and a.sweeps == 1, method
        for _ in range(2):
            with pytest.raises(P.InvalidState) as err:
                a.decide(True, now=3)
            assert P.result_code(err.value) == "invalid_state", method
            assert a.own_decision is None and a.contact_state == P.UNVERIFIED, method
            assert a.sweeps == 1 and not a.settled, method
        with pytest.raises(P.InvalidState):  # before this side confirmed
            a.settle(now=3)
        sent = a.decide(False, now=4)  # the host rejects: this side's rejection is sent
        assert len(sent) == 1 and a.own_decision == P.DECISION_REJECTED, method
        if isinstance(a, P.BluetoothExchange):
            assert sent == [P.confirm_frame(a.my_key, False)]
        else:
            assert sent == [P.seal_decision(a.result.keys.kd(a.role), a.role,
                                            a.result.transcript_hash, P.DECISION_REJECTED)]
        assert a.contact_state == P.DELETED and a.complete and not a.failed, method
        assert b.receive(sent[0]) == [], method
        assert b.peer_decision == P.DECISION_REJECTED and b.contact_state == P.DELETED, method
        for confirmed in (True, False):
            with pytest.raises(P.InvalidState):
                a.decide(confirmed, now=5)
        with pytest.raises(P.InvalidState):
            a.save(5)
        with pytest.raises(P.InvalidState):
            a.settle(now=5)
        # Unsaved, the host's rejection saves nothing and still sends this side's rejection.
        a, b, send = at_sas()
        send(b, a, b.decide(False, now=1))
        with pytest.raises(P.InvalidState):
            a.decide(True, now=2)
        assert not a.saved and a.sweeps == 0, method
        assert len(a.decide(False, now=3)) == 1 and not a.saved, method

def _save_states(at_sas):
    """8.1, "Saving", for a Bluetooth or remote exchange from ``at_sas()`` (as
    :func:`_settle_cases`): each state, and whether saving is allowed in it."""
    cases = []
    a, b, send = at_sas()
    cases.append(("comparing the SAS", a, True))
    a, b, send = at_sas()
    send(b, a, b.decide(True, now=2))
    cases.append(("comparing the SAS, the peer's confirmation in or held", a, True))
    a, b, send = at_sas()
    send(b, a, b.decide(False, now=2))  # the library does not reject by itself (8.1)
    cases.append(("comparing the SAS, the peer's rejection in", a, True))
    a, b, send = at_sas()
    a.decide(True, now=1)
    cases.append(("awaiting the peer's decision", a, False))
    a, b, send = at_sas()
    send(a, b, a.decide(True, now=1))
    send(b, a, b.decide(True, now=2))
    a.settle(now=3)
    cases.append(("confirmed", a, False))
    cases.append(("confirmed at once", b, False))
    a, b, send = at_sas()
    a.decide(False, now=1)
    cases.append(("rejected", a, False))
    return cases


@needs_vectors
def test_saving_a_bluetooth_or_remote_exchange():
    """8.1, "Saving", "the same for the four methods": before the peer's data
    `invalid_state`; comparing the SAS (the peer's decision in or not) it saves the new
    contact unverified, once (a second save sweeps nothing); awaiting the peer's decision,
    confirmed and rejected `invalid_state`, changing nothing; the time first, then a failure,
    then expiry; confirm saves first; a failed exchange never saved has nothing to reject."""
    ex = _cases(load("bluetooth.json"), "exchanges")[0]
    inputs = _remote_random_inputs(random.Random(81))

    def bt():
        a, b = _bt_at_sas(ex)
        return a, b, _bt_send

    def remote(realtime):
        def at_sas():
            i, r, _ = _remote_at_sas(inputs, realtime=realtime)

            def send(x, y, msgs):
                for m in msgs:
                    for back in y.receive(m):
                        x.receive(back)
            return r, i, send
        return at_sas

    a = _bt_device(ex["a"], ex["session_code_text"])
    a.start()
    with pytest.raises(P.InvalidState):
        a.save(0)  # awaiting the peer's data
    inviter, invitee = _remote_sides(inputs)
    inviter.start()
    for side in (inviter, invitee):
        with pytest.raises(P.InvalidState):
            side.save(0)
        assert side.sweeps == 0 and not side.saved
    for method, at_sas in (("bluetooth", bt), ("invite", remote(False)),
                           ("realtime", remote(True))):
        for name, side, allowed in _save_states(at_sas):
            saved, sweeps = side.saved, side.sweeps
            state = side.contact_state
            with pytest.raises(P.InvalidArgument):
                side.save(-1)
            if allowed:
                assert side.save(5) == P.UNVERIFIED and side.saved, (method, name)
                assert side.save(6) == P.UNVERIFIED and side.sweeps == 1, (method, name)
            else:
                with pytest.raises(P.InvalidState):
                    side.save(5)
                assert (side.saved, side.sweeps, side.contact_state) == (
                    saved, sweeps, state), (method, name)
        # Confirming saves first; rejecting unsaved saves nothing.
        a, b, send = at_sas()
        a.decide(True, now=1)
        assert a.saved and a.sweeps == 1
        a, b, send = at_sas()
        a.decide(False, now=1)
        assert not a.saved and a.sweeps == 0
        # Failed: the time first, then invalid_state; never saved, rejecting it is
        # invalid_state; saved, rejecting it deletes the contact, once.
        for save_first in (False, True):
            a, b, send = at_sas()
            if save_first:
                a.save(1)
            with pytest.raises(P.MalformedMessage):
                a.receive(b"\x01\x09")
            with pytest.raises(P.InvalidArgument):
                a.save(-1)
            with pytest.raises(P.InvalidState):
                a.save(2)
            if save_first:
                assert a.decide(False) == [] and a.saved_contact_deleted
            with pytest.raises(P.InvalidState):
                a.decide(False)
            assert a.failed
        # More than 24 hours after the exchange began: expired, and fails.
        a, b, send = at_sas()
        a.created_at = 1_000
        assert a.save(87_400) == P.UNVERIFIED
        with pytest.raises(P.Expired):
            a.save(87_401)
        assert a.failed

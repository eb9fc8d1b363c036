"""Voice verification through the Python binding (docs/PROTOCOL.md sections 9
and 10): two people who added each other by a real QR exchange run
sessions at fixed times, and everything that can go wrong does: a wrong
code, an echoed code, a changed device, a word that is not the selector's,
words entered in the wrong order, a used window, a session that ran out,
badly typed codes, sessions bound to different calls (or one bound and one
not).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Optional

import pytest

import itsme
from itsme import (
    AuthenticationFailedError,
    ContactStore,
    DeterministicRandom,
    Exchange,
    ExpiredError,
    Identity,
    InvalidArgumentError,
    InvalidStateError,
    NotFoundError,
    SecretStore,
    VerificationState,
    VoiceOutcome,
    VoiceSession,
    VoiceState,
    VoiceTurn,
    WindowUsedError,
)

# A window boundary: the window W0 begins at T0.
T0 = 1_800_000_000
assert T0 % 30 == 0
W0 = T0 // 30
# The two met an hour earlier; they plan 20 seconds before W0 begins.
EXCHANGED = T0 - 3600
PLAN = T0 - 20
# A session lasts until the end of the window after its own.
END = 30 * (W0 + 2)


def rng(label: str) -> DeterministicRandom:
    """A deterministic random source named by a label."""
    return DeterministicRandom(hashlib.sha256(label.encode()).digest())


@dataclass
class Party:
    """A person: an identity in its own memory secret store, its contacts,
    and the id under which it stored the other person."""

    name: str
    secrets: SecretStore
    identity: Identity
    contacts: ContactStore
    peer: Optional[int] = None

    def contact(self) -> itsme.Contact:
        return self.contacts.get(self.peer)

    def plan(self, now: int = PLAN, binding: Optional[bytes] = None) -> VoiceSession:
        return VoiceSession(self.contacts, self.peer, now, binding=binding)


@pytest.fixture
def make_party(tmp_path):
    made = []

    def make(name: str) -> Party:
        secrets = SecretStore.memory()
        identity = Identity.create(secrets, name, random=rng(f"identity {name}"))
        contacts = ContactStore.open(identity, tmp_path / f"contacts-{len(made)}.db")
        party = Party(name, secrets, identity, contacts)
        made.append(party)
        return party

    yield make
    for party in made:
        party.contacts.close()
        party.identity.close()
        party.secrets.close()


def befriend(a: Party, b: Party, confirm: bool = True) -> None:
    """A whole QR exchange: each scans the other's code, the SAS match,
    both confirm (or only save, leaving the contact unverified)."""
    with Exchange.qr(a.identity, a.contacts, EXCHANGED, random=rng(f"qr {a.name}")) as xa, Exchange.qr(
        b.identity, b.contacts, EXCHANGED, random=rng(f"qr {b.name}")
    ) as xb:
        xa.receive(xb.next_outgoing(), EXCHANGED)
        xb.receive(xa.next_outgoing(), EXCHANGED)
        assert xa.sas == xb.sas
        finish = "confirm" if confirm else "save"
        a.peer = getattr(xa, finish)(EXCHANGED)
        b.peer = getattr(xb, finish)(EXCHANGED)


@pytest.fixture
def pair(make_party):
    """Alice and Bob, verified contacts of each other."""
    alice, bob = make_party("Alice"), make_party("Bob")
    befriend(alice, bob)
    return alice, bob


@pytest.fixture
def sessions():
    """Closes the sessions a test registers."""
    made = []
    yield made
    for session in made:
        session.close()


def plan_both(pair, sessions, now: int = PLAN, bindings=(None, None)):
    """Alice's and Bob's sessions planned at ``now``, each bound to its
    call binding of ``bindings`` (None: not bound)."""
    alice, bob = pair
    pair_sessions = alice.plan(now, bindings[0]), bob.plan(now, bindings[1])
    sessions.extend(pair_sessions)
    return pair_sessions


def start_both(pair, sa: VoiceSession, sb: VoiceSession) -> int:
    """Starts both sessions when their window begins; returns that time."""
    alice, bob = pair
    assert sa.window == sb.window
    now = 30 * sa.window
    sa.start(now)
    sb.start(now)
    return now


def first_and_second(sa: VoiceSession, sb: VoiceSession):
    """(first selector, second selector)."""
    turns = {sa.turn, sb.turn}
    assert turns == {VoiceTurn.MINE, VoiceTurn.THEIRS}, turns
    return (sa, sb) if sa.turn == VoiceTurn.MINE else (sb, sa)


def select_both(sa: VoiceSession, sb: VoiceSession, now: int, w1=None, w2=None):
    """The two selections: each selector picks (their first word unless
    told) and says it; the other enters what they heard.  Returns (w1, w2)."""
    first, second = first_and_second(sa, sb)
    w1 = first.words[0] if w1 is None else w1
    first.select(w1, now)
    second.select(w1, now)
    assert (first.turn, second.turn) == (VoiceTurn.THEIRS, VoiceTurn.MINE)
    w2 = second.words[0] if w2 is None else w2
    second.select(w2, now)
    first.select(w2, now)
    return w1, w2


def to_codes(pair, sessions, now: int = PLAN, bindings=(None, None)):
    """Two sessions planned at ``now`` (bound by ``bindings``), started, and
    with both words entered."""
    sa, sb = plan_both(pair, sessions, now, bindings)
    started = start_both(pair, sa, sb)
    select_both(sa, sb, started)
    assert sa.state == sb.state == VoiceState.COMPARING
    return sa, sb, started


def other_code(text: str) -> str:
    """A well-formed code that differs from ``text``."""
    word, digits = text.split(" ")
    return f"{word} {(int(digits) + 1) % 1000:03d}"


# -- planning and starting -------------------------------------------------------------


def test_both_plan_the_same_window(pair, sessions):
    sa, sb = plan_both(pair, sessions)
    assert sa.timing(PLAN) == sb.timing(PLAN) == (W0, 20, END - PLAN)
    assert sa.timing(T0 + 5) == (W0, -5, END - T0 - 5)
    assert sa.window == sb.window == W0
    for session in (sa, sb):
        assert (session.state, session.turn) == (VoiceState.WAITING, VoiceTurn.NONE)
    # Planned exactly at a boundary: the window that begins then has begun.
    at_boundary = pair[0].plan(T0)
    sessions.append(at_boundary)
    assert at_boundary.timing(T0) == (W0 + 1, 30, 90)


def test_a_session_keeps_its_store_open_after_the_store_is_freed(pair, sessions):
    # itsme_store_free releases the caller's reference; the session keeps its
    # own (include/itsme.h, itsme_store_free), so it goes on working.
    alice, _ = pair
    session = alice.plan(PLAN)
    sessions.append(session)
    words = session.words
    alice.contacts.close()
    assert alice.contacts.closed
    assert session.words == words
    assert session.timing(PLAN) == (W0, 20, END - PLAN)
    assert session.session_id


def test_start_too_early_is_invalid_state_not_failed(pair, sessions):
    alice, bob = pair
    sa, sb = plan_both(pair, sessions)
    with pytest.raises(InvalidStateError) as caught:
        sa.start(PLAN)  # 20 s early
    assert caught.value.detail and sa.last_error()
    assert sa.state == VoiceState.WAITING
    with pytest.raises(InvalidStateError):
        sa.start(T0 - 16)
    assert alice.contact().last_window is None, "no window used"
    # From 15 s before the window, for clock skew.
    sa.start(T0 - 15)
    assert (sa.state, alice.contact().last_window) == (VoiceState.SELECTING, W0)
    with pytest.raises(InvalidStateError):
        sa.start(T0)  # started already
    assert sa.state == VoiceState.SELECTING
    sb.start(T0)


def test_a_session_needs_a_contact(pair, sessions):
    alice, _ = pair
    with pytest.raises(NotFoundError) as caught:
        VoiceSession(alice.contacts, alice.peer + 1, PLAN)
    assert caught.value.detail == alice.contacts.last_error() != ""
    with pytest.raises(TypeError):
        VoiceSession(alice.identity, alice.peer, PLAN)
    with pytest.raises(InvalidArgumentError):
        VoiceSession(alice.contacts, alice.peer, -1)


# -- a whole verification ------------------------------------------------------------------


def test_end_to_end_verified(pair, sessions):
    alice, bob = pair
    sa, sb = plan_both(pair, sessions)
    now = start_both(pair, sa, sb)
    assert alice.contact().last_window == bob.contact().last_window == W0
    # Both read the session ID aloud: the same.
    assert sa.session_id == sb.session_id
    word, digits = sa.session_id.split(" ")
    assert word in itsme.NATO_WORDS and len(digits) == 2 and digits.isdigit()
    # Each sees five sorted words of their own.
    for session in (sa, sb):
        words = session.words
        assert len(words) == itsme.VOICE_WORDS and words == sorted(set(words)) and max(words) < 26
        assert session.state == VoiceState.SELECTING
    # Whose turn it is agrees: exactly one selects first.
    first, second = first_and_second(sa, sb)
    with pytest.raises(InvalidStateError):
        first.your_code
    w1 = first.words[0]
    first.select(w1, now)
    second.select(w1, now + 1)  # as heard
    assert (first.turn, second.turn) == (VoiceTurn.THEIRS, VoiceTurn.MINE)
    w2 = second.words[-1]
    second.select(w2, now + 2)
    first.select(w2, now + 3)
    for session in (sa, sb):
        assert (session.state, session.turn) == (VoiceState.COMPARING, VoiceTurn.NONE)
    # What each reads aloud is what the other expects, tags included.
    assert sa.your_code == sb.their_code
    assert sb.your_code == sa.their_code
    assert sa.your_code != sb.your_code
    for session in (sa, sb):
        text, tag = session.your_code
        assert 0 <= tag <= 99 and session.their_code.tag is not None
        word, digits = text.split(" ")
        assert word in itsme.NATO_WORDS and len(digits) == 3 and digits.isdigit()
    heard_by_alice, heard_by_bob = sb.your_code, sa.your_code
    assert sa.check(*heard_by_alice, now + 10) == VoiceOutcome.VERIFIED
    assert sb.check(*heard_by_bob, now + 11) == VoiceOutcome.VERIFIED
    for party, session, checked in ((alice, sa, now + 10), (bob, sb, now + 11)):
        contact = party.contact()
        assert (contact.state, contact.verified_at, contact.last_window) == (VerificationState.VERIFIED, checked, W0)
        assert (session.state, session.turn) == (VoiceState.FINISHED, VoiceTurn.NONE)
        # Finished: the codes stay readable, nothing else happens.
        assert session.your_code
        with pytest.raises(InvalidStateError):
            session.check(*heard_by_alice, now + 12)
        with pytest.raises(InvalidStateError):
            session.select(w1, now + 12)


def test_an_unverified_contact_becomes_verified(make_party, sessions):
    alice, bob = make_party("Alice"), make_party("Bob")
    befriend(alice, bob, confirm=False)
    assert alice.contact().state == bob.contact().state == VerificationState.UNVERIFIED
    sa, sb, now = to_codes((alice, bob), sessions)
    assert sa.check(*sb.your_code, now) == VoiceOutcome.VERIFIED
    assert alice.contact().state == VerificationState.VERIFIED
    assert bob.contact().state == VerificationState.UNVERIFIED, "until Bob checks too"


def test_a_wrong_code_is_a_mismatch(pair, sessions):
    alice, bob = pair
    sa, sb, now = to_codes(pair, sessions)
    before = alice.contact()
    text, tag = sb.your_code
    assert sa.check(other_code(text), tag, now) == VoiceOutcome.MISMATCH
    assert alice.contact() == before, "nothing changed"
    assert sa.state == VoiceState.FINISHED
    # Bob, who heard right, is not affected.
    assert sb.check(*sa.your_code, now) == VoiceOutcome.VERIFIED


def test_echoing_the_other_code_is_a_mismatch(pair, sessions):
    alice, bob = pair
    sa, sb, now = to_codes(pair, sessions)
    before = alice.contact()
    # Bob repeats what Alice said: Alice hears her own code.
    assert sa.check(*sa.your_code, now) == VoiceOutcome.MISMATCH
    assert alice.contact() == before


def test_right_code_wrong_tag_is_a_changed_device(pair, sessions):
    alice, bob = pair
    sa, sb, now = to_codes(pair, sessions)
    text, tag = sb.your_code
    assert sa.check(text, (tag + 1) % 100, now) == VoiceOutcome.DEVICE_CHANGED
    contact = alice.contact()
    assert (contact.state, contact.acknowledged) == (VerificationState.DEGRADED, False)
    # A degraded contact still verifies with the right tag, and stays degraded.
    sa2, sb2, later = to_codes(pair, sessions, PLAN + 30)
    assert sa2.window == W0 + 1
    assert sa2.check(*sb2.your_code, later) == VoiceOutcome.VERIFIED
    assert alice.contact().state == VerificationState.DEGRADED
    assert sb2.check(*sa2.your_code, later) == VoiceOutcome.VERIFIED
    assert bob.contact().state == VerificationState.VERIFIED


# -- selections ----------------------------------------------------------------------------


def test_a_word_not_among_the_selectors_five_fails_the_session(pair, sessions):
    alice, bob = pair
    sa, sb = plan_both(pair, sessions)
    now = start_both(pair, sa, sb)
    first, second = first_and_second(sa, sb)
    # On my turn, a word that is not mine changes nothing.
    not_mine = next(word for word in range(26) if word not in first.words)
    with pytest.raises(InvalidArgumentError):
        first.select(not_mine, now)
    assert (first.state, first.turn) == (VoiceState.SELECTING, VoiceTurn.MINE)
    # On their turn, a word that is not theirs ends the session: no retry.
    with pytest.raises(AuthenticationFailedError) as caught:
        second.select(not_mine, now)
    assert caught.value.detail
    assert (second.state, second.turn) == (VoiceState.FAILED, VoiceTurn.NONE)
    with pytest.raises(InvalidStateError):
        second.select(first.words[0], now)
    with pytest.raises(InvalidStateError):
        second.your_code
    with pytest.raises(InvalidStateError):
        second.check("ECHO 512", 47, now)
    with pytest.raises(InvalidStateError):
        second.start(now)


def test_words_entered_in_the_wrong_order_give_codes_that_differ(pair, sessions):
    alice, bob = pair
    # A window in which both have two words in common, so that either order
    # can be entered: planning uses no window, so look ahead.
    for k in range(300):
        sa, sb = alice.plan(PLAN + 30 * k), bob.plan(PLAN + 30 * k)
        common = sorted(set(sa.words) & set(sb.words))
        if len(common) >= 2:
            break
        sa.close()
        sb.close()
    else:
        pytest.fail("no window with two common words")
    sessions.extend([sa, sb])
    now = start_both(pair, sa, sb)
    x, y = common[:2]
    # Alice enters x then y, as said; Bob enters y then x.
    for session, order in ((sa, (x, y)), (sb, (y, x))):
        for word in order:
            session.select(word, now)
    assert sa.state == sb.state == VoiceState.COMPARING
    assert sa.your_code.text != sb.their_code.text
    assert sb.your_code.text != sa.their_code.text
    assert sa.check(*sb.your_code, now) == VoiceOutcome.MISMATCH
    assert sb.check(*sa.your_code, now) == VoiceOutcome.MISMATCH


# -- windows and time ---------------------------------------------------------------------


def test_a_window_is_used_once(pair, sessions):
    alice, bob = pair
    one, two = alice.plan(), alice.plan()
    sessions.extend([one, two])
    assert one.window == two.window == W0
    one.start(T0)
    with pytest.raises(WindowUsedError):
        two.start(T0)
    assert two.state == VoiceState.FAILED and two.last_error()
    with pytest.raises(InvalidStateError):
        two.start(T0)
    # Planned at the same time again: the next window.
    three = alice.plan()
    sessions.append(three)
    assert three.timing(PLAN) == (W0 + 1, 50, 30 * (W0 + 3) - PLAN)
    # Even with the clock set back.
    back = alice.plan(PLAN - 3600)
    sessions.append(back)
    assert back.window == W0 + 1
    three.start(30 * (W0 + 1))
    assert alice.contact().last_window == W0 + 1


def test_a_session_runs_out_at_the_end_of_the_next_window(pair, sessions):
    alice, bob = pair
    sa, sb = plan_both(pair, sessions)
    start_both(pair, sa, sb)
    first, second = first_and_second(sa, sb)
    first.select(first.words[0], END - 1)  # still in time
    with pytest.raises(ExpiredError):
        second.select(first.words[0], END)
    assert second.state == VoiceState.FAILED
    with pytest.raises(InvalidStateError):
        second.select(first.words[0], END - 1)
    # Starting too late fails as well.
    late = alice.plan()
    sessions.append(late)
    assert late.window == W0 + 1
    with pytest.raises(ExpiredError):
        late.start(30 * (W0 + 3))
    assert late.state == VoiceState.FAILED


def test_a_check_after_the_end_is_expired(pair, sessions):
    alice, bob = pair
    sa, sb, now = to_codes(pair, sessions)
    before = alice.contact()
    heard_by_alice, heard_by_bob = sb.your_code, sa.your_code
    with pytest.raises(ExpiredError):
        sa.check(*heard_by_alice, END)
    assert sa.state == VoiceState.FAILED
    assert alice.contact() == before
    with pytest.raises(InvalidStateError):
        sa.your_code  # a failed session shows no codes
    assert sb.check(*heard_by_bob, END - 1) == VoiceOutcome.VERIFIED


def test_clocks_twelve_seconds_apart_still_agree(pair, sessions):
    alice, bob = pair
    skew = 12  # Bob's clock is ahead
    sa, sb = alice.plan(T0 - 25), bob.plan(T0 - 25 + skew)
    sessions.extend([sa, sb])
    assert sa.window == sb.window == W0
    sa.start(T0 - 13)
    sb.start(T0 - 13 + skew)
    assert sa.session_id == sb.session_id
    first, second = first_and_second(sa, sb)
    for selector, listener in ((first, second), (second, first)):
        word = selector.words[2]
        for session in (selector, listener):
            session.select(word, T0 + (skew if session is sb else 0))
    assert sa.check(*sb.your_code, T0) == VoiceOutcome.VERIFIED
    assert sb.check(*sa.your_code, T0 + skew) == VoiceOutcome.VERIFIED


# -- heard codes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spoken",
    ["{word} {digits}", "{lower}-{digits}", "  {title} {digits}  ", "{lower} {digits}", "{word}-{digits} "],
)
def test_heard_codes_are_parsed_leniently(pair, sessions, spoken):
    alice, _ = pair
    sa, sb, now = to_codes(pair, sessions)
    text, tag = sb.your_code
    word, digits = text.split(" ")
    typed = spoken.format(word=word, lower=word.lower(), title=word.title(), digits=digits)
    assert sa.check(typed, tag, now) == VoiceOutcome.VERIFIED


def test_junk_heard_codes_are_refused_without_failing(pair, sessions):
    alice, _ = pair
    sa, sb, now = to_codes(pair, sessions)
    text, tag = sb.your_code
    word, digits = text.split(" ")
    before = alice.contact()
    junk = [
        "",
        "   ",
        word,
        digits,
        f"{word} {digits[:2]}",
        f"{word} {digits}0",
        f"{word}  {digits}",
        f"{word}_{digits}",
        f"{word[:-1]} {digits}",
        f"OMEGA {digits}",
        f"{word} {digits[:2]}x",
        f"{text}, {tag}",
        f"{word}\u00a0{digits}",
        f"{word} \u0661\u0662\u0663",
    ]
    for typed in junk:
        with pytest.raises(InvalidArgumentError):
            sa.check(typed, tag, now)
        assert sa.state == VoiceState.COMPARING, typed
    for bad_tag in (100, 2**32 - 1):
        with pytest.raises(InvalidArgumentError):
            sa.check(text, bad_tag, now)
    with pytest.raises(InvalidArgumentError):
        sa.check(text, -1, now)
    with pytest.raises(InvalidArgumentError):
        sa.check("ECHO\0 512", tag, now)
    assert alice.contact() == before and sa.state == VoiceState.COMPARING
    assert sa.check(text, tag, now) == VoiceOutcome.VERIFIED


# -- contacts without device secrets, and the pure derivations --------------------------------


def test_a_contact_without_device_secrets_is_verified_with_the_tag_unchecked(make_party, sessions):
    alice, bob = make_party("Alice"), make_party("Bob")
    seed = bytes(range(32))
    alice.peer = alice.contacts.add("Bob", bob.identity.public_key, seed, now=EXCHANGED)
    bob.peer = bob.contacts.add("Alice", alice.identity.public_key, seed, now=EXCHANGED)
    sa, sb, now = to_codes((alice, bob), sessions)
    assert sa.their_code.tag is None and sb.their_code.tag is None
    assert sa.your_code.text == sb.their_code.text
    # The session derives what the pure functions derive.
    pa, pb = alice.identity.public_key, bob.identity.public_key
    assert sa.session_id == sb.session_id == itsme.derive_session_id(seed, W0)
    assert sa.words == itsme.derive_words(seed, W0, pa)
    assert sb.words == itsme.derive_words(seed, W0, pb)
    lower_first = itsme.derive_lower_selects_first(seed, W0)
    alice_first = (pa < pb) == lower_first
    assert (sa.turn, sb.turn) == (VoiceTurn.NONE, VoiceTurn.NONE)
    first, second = (pa, pb) if alice_first else (pb, pa)
    w1 = (sa if alice_first else sb).words[0]
    w2 = (sb if alice_first else sa).words[0]
    assert sa.your_code.text == itsme.derive_code(seed, W0, first, w1, second, w2, pa)
    assert sb.your_code.text == itsme.derive_code(seed, W0, first, w1, second, w2, pb)
    # Without a device secret, the tag uses the empty one.
    assert sa.your_code.tag == itsme.derive_device_tag(seed, W0, pa)
    assert sb.your_code.tag == itsme.derive_device_tag(seed, W0, pb, b"")
    outcome = sa.check(sb.your_code.text, 0, now)
    assert outcome == VoiceOutcome.VERIFIED_TAG_UNCHECKED
    assert alice.contact().state == VerificationState.VERIFIED


def test_pure_derivations_check_their_arguments():
    seed, key = bytes(32), bytes(range(32))
    with pytest.raises(InvalidArgumentError):
        itsme.derive_session_id(seed[:31], W0)
    with pytest.raises(InvalidArgumentError):
        itsme.derive_words(seed, W0, key[:16])
    with pytest.raises(InvalidArgumentError):
        itsme.derive_code(seed, W0, key, 26, key, 0, key)
    with pytest.raises(InvalidArgumentError):
        itsme.derive_device_tag(seed, W0, key, bytes(65))
    with pytest.raises(InvalidArgumentError):
        itsme.derive_session_id(seed, 2**63)
    with pytest.raises(TypeError):
        itsme.derive_words(seed, W0, "key")
    fingerprint = key[:8]
    assert len(itsme.derive_words(seed, W0, fingerprint)) == 5
    assert 0 <= itsme.derive_device_tag(seed, W0, fingerprint, bytes(64)) <= 99
    assert itsme.derive_lower_selects_first(seed, W0) in (True, False)


def test_nato_words():
    assert itsme.NATO_WORDS[0] == itsme.nato_word(0) == "ALFA"
    assert itsme.nato_word(25) == "ZULU" and len(itsme.NATO_WORDS) == 26
    for index in (26, -1, 2**32):
        with pytest.raises(InvalidArgumentError):
            itsme.nato_word(index)


# -- bound to a call (docs/PROTOCOL.md 9.7) ------------------------------------------------

# Two call bindings: what the host of each call holds (the DTLS-SRTP exporter
# of the call, 32 bytes, in a real host).
OUR_CALL = hashlib.sha256(b"our call").digest()
OTHER_CALL = hashlib.sha256(b"another call").digest()[:16]


def test_both_bound_to_one_call_agree_and_verify(pair, sessions):
    alice, bob = pair
    # bytes, bytearray and memoryview alike.
    sa, sb, now = to_codes(pair, sessions, bindings=(OUR_CALL, bytearray(OUR_CALL)))
    assert sa.session_id == sb.session_id
    assert sa.your_code == sb.their_code and sb.your_code == sa.their_code
    assert sa.check(*sb.your_code, now) == VoiceOutcome.VERIFIED
    assert sb.check(*sa.your_code, now) == VoiceOutcome.VERIFIED
    assert alice.contact().state == bob.contact().state == VerificationState.VERIFIED
    # A memoryview, at the longest and the shortest length.
    for binding in (memoryview(bytes(range(itsme.CALL_BINDING_MAX))), bytes(itsme.CALL_BINDING_MIN)):
        xa, xb, later = to_codes(pair, sessions, now + 60, bindings=(binding, bytes(binding)))
        assert xa.session_id == xb.session_id
        assert xa.check(*xb.your_code, later) == VoiceOutcome.VERIFIED
        now = later


@pytest.mark.parametrize("bindings", [(OUR_CALL, None), (None, OUR_CALL), (OUR_CALL, OTHER_CALL)],
                         ids=["alice bound", "bob bound", "two calls"])
def test_bound_differently_the_session_ids_differ_and_the_codes_do_not_match(pair, sessions, bindings):
    alice, bob = pair
    sa, sb = plan_both(pair, sessions, bindings=bindings)
    now = start_both(pair, sa, sb)
    # The two read different session IDs before anyone chooses a word.
    assert sa.session_id != sb.session_id
    # The words and who selects first do not change (9.3, 9.4): people who
    # go on regardless get to the codes, and they do not match.
    select_both(sa, sb, now)
    assert sa.state == sb.state == VoiceState.COMPARING
    assert sa.your_code.text != sb.their_code.text
    assert sb.your_code.text != sa.their_code.text
    before = alice.contact(), bob.contact()
    assert sa.check(*sb.your_code, now) == VoiceOutcome.MISMATCH
    assert sb.check(*sa.your_code, now) == VoiceOutcome.MISMATCH
    assert (alice.contact(), bob.contact()) == before, "a mismatch records nothing"


@pytest.mark.parametrize("length", [0, 1, itsme.CALL_BINDING_MIN - 1, itsme.CALL_BINDING_MAX + 1, 1000])
def test_a_binding_of_another_length_is_refused(pair, length):
    alice, _ = pair
    with pytest.raises(InvalidArgumentError) as caught:
        VoiceSession(alice.contacts, alice.peer, PLAN, binding=bytes(length))
    assert f"not {length}" in str(caught.value)
    assert alice.contact().last_window is None


def test_binding_argument_types(pair):
    alice, _ = pair
    with pytest.raises(TypeError):
        VoiceSession(alice.contacts, alice.peer, PLAN, binding="our call, 16+ chars")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        VoiceSession(alice.contacts, alice.peer, PLAN, OUR_CALL)  # type: ignore[misc]  # binding is keyword-only
    assert itsme.CALL_BINDING_MIN == 16 == itsme._ffi.lib.itsme_call_binding_min()
    assert itsme.CALL_BINDING_MAX == 64 == itsme._ffi.lib.itsme_call_binding_max()


# -- the handle -------------------------------------------------------------------------


def test_close_and_context_manager(pair):
    alice, _ = pair
    with alice.plan() as session:
        assert not session.closed
        assert f"window={W0}" in repr(session) and "WAITING" in repr(session)
        assert session.contact_id == alice.peer and session.store is alice.contacts
    assert session.closed and repr(session) == "<VoiceSession closed>"
    with pytest.raises(ValueError):
        session.state
    session.close()  # twice is fine


def test_the_session_keeps_its_store_alive(pair, sessions, tmp_path):
    alice, bob = pair
    sa, sb = plan_both(pair, sessions)
    # Close Alice's store handle: the session still works on another handle
    # to the same file.
    alice.contacts.close()
    alice.contacts = ContactStore.open(alice.identity, tmp_path / "contacts-0.db")
    start_both(pair, sa, sb)
    assert alice.contact().last_window == W0

"""Security PIN Update through the Python binding (docs/PROTOCOL.md section
10.3): two people who exchanged by QR replace their device secrets over an
in-memory link standing in for Bluetooth.  A whole update, every point at
which the link can break, a degraded contact restored, tampered, replayed
and reflected frames, a peer without the seed, the window rule and expiry.
"""

from __future__ import annotations

import pytest

import itsme
from itsme import (
    AuthenticationFailedError,
    ExpiredError,
    InvalidArgumentError,
    InvalidKeyError,
    InvalidStateError,
    ItsMeError,
    MalformedMessageError,
    NotFoundError,
    PinUpdate,
    PinUpdateState,
    VerificationState,
    VoiceOutcome,
)
from test_degradation import make_person  # noqa: F401  (a fixture)
from test_voice import T0, befriend, make_party, pair, rng, sessions, to_codes  # noqa: F401  (fixtures)

# Both start the update at NOW; voice verifications follow.
NOW = T0 + 300
WINDOW = NOW // 30
KEY, NEW, DONE = 1, 2, 3
FRAMES = 5
LIFETIME = 600
# What a refused frame may raise (the update then has failed).
REJECTED = (MalformedMessageError, AuthenticationFailedError, InvalidKeyError)


def start(party, sessions, label=None, now=NOW, window=None):
    """An update of ``party`` with its peer; deterministic when labelled."""
    random = None if label is None else rng(f"{label} {party.name}")
    update = PinUpdate(party.contacts, party.peer, window, now, random=random)
    sessions.append(update)
    return update


def initiator_first(pair, sessions, label=None, now=NOW):
    """The two updates, the initiator's (the lower pid's) first."""
    alice, bob = pair
    ua, ub = start(alice, sessions, label, now), start(bob, sessions, label, now)
    return (ua, ub) if alice.identity.public_key < bob.identity.public_key else (ub, ua)


def pump(initiator, responder, now=NOW, limit=None, tamper=None):
    """The link: moves frames both ways, one at a time, the initiator's
    first, until neither side has one to send.  Only the first ``limit``
    frames are delivered (None: all); then the link breaks.
    ``tamper(index, frame)`` may replace the index-th frame.  Returns the
    frames delivered as (sender, frame), and the first error each receiver
    raised."""
    log, errors = [], {}
    moved = True
    while moved:
        moved = False
        for sender, receiver in ((initiator, responder), (responder, initiator)):
            if limit is not None and len(log) >= limit:
                return log, errors
            frame = sender.next_outgoing()
            if not frame:
                continue
            moved = True
            if tamper is not None:
                frame = tamper(len(log), frame)
            log.append((sender, frame))
            try:
                receiver.receive(frame, now)
            except ItsMeError as error:
                errors.setdefault(receiver, error)
    return log, errors


def verify(pair, sessions, plan):
    """A whole voice verification planned at ``plan``: (Alice's outcome, Bob's)."""
    alice, bob = pair
    sa, sb, now = to_codes(pair, sessions, plan)
    return sa.check(*sb.your_code, now), sb.check(*sa.your_code, now)


def assert_failed(update, error, what=""):
    assert isinstance(error, REJECTED), f"{what}: {error!r}"
    assert update.state == PinUpdateState.FAILED, what
    assert update.last_error(), what


# -- a whole update -----------------------------------------------------------------------


def test_end_to_end(pair, sessions):
    alice, bob = pair
    initiator, responder = initiator_first(pair, sessions)
    # Both show the same session code, from the seed and the window.
    assert initiator.session_code == responder.session_code
    word, digits = initiator.session_code.split(" ")
    assert word in itsme.NATO_WORDS and len(digits) == 4
    assert initiator.window == responder.window == WINDOW
    assert initiator.state == responder.state == PinUpdateState.RUNNING
    log, errors = pump(initiator, responder)
    assert errors == {}
    # Both KEYs, the initiator's NEW, the responder's NEW, DONE.
    assert [(sender is initiator, frame[1]) for sender, frame in log] == [
        (True, KEY),
        (False, KEY),
        (True, NEW),
        (False, NEW),
        (True, DONE),
    ]
    assert [len(frame) for _, frame in log] == [34, 34, 66, 66, 18]
    assert max(len(frame) for _, frame in log) == itsme.PIN_UPDATE_FRAME_MAX
    assert initiator.state == responder.state == PinUpdateState.DONE
    assert initiator.next_outgoing() == responder.next_outgoing() == b""
    for party in pair:
        assert party.contact().state == VerificationState.VERIFIED
    # Done on this side: no more frames.
    with pytest.raises(InvalidStateError):
        responder.receive(log[-1][1], NOW)
    assert responder.state == PinUpdateState.DONE
    # The new device secrets are in use on both sides.
    assert verify(pair, sessions, NOW + 60) == (VoiceOutcome.VERIFIED, VoiceOutcome.VERIFIED)
    assert verify(pair, sessions, NOW + 150) == (VoiceOutcome.VERIFIED, VoiceOutcome.VERIFIED)


@pytest.mark.parametrize("delivered", range(FRAMES + 1))
def test_every_interruption_point_leaves_both_able_to_verify(make_party, sessions, delivered):
    alice, bob = make_party("Alice"), make_party("Bob")
    pair = (alice, bob)
    befriend(alice, bob)
    initiator, responder = initiator_first(pair, sessions)
    log, errors = pump(initiator, responder, limit=delivered)
    assert (len(log), errors) == (delivered, {})
    # The initiator is done once the responder's NEW arrived, the responder
    # once DONE did.
    assert initiator.state == (PinUpdateState.DONE if delivered >= 4 else PinUpdateState.RUNNING)
    assert responder.state == (PinUpdateState.DONE if delivered == 5 else PinUpdateState.RUNNING)
    # Two verifications in a row: both verified, never a false "device changed".
    for plan in (NOW + 60, NOW + 150):
        outcomes = verify(pair, sessions, plan)
        assert outcomes == (VoiceOutcome.VERIFIED, VoiceOutcome.VERIFIED), (delivered, plan, outcomes)
    for party in pair:
        assert party.contact().state == VerificationState.VERIFIED
    # A whole update afterwards, and verification still works.
    later = NOW + 600
    initiator, responder = initiator_first(pair, sessions, now=later)
    log, errors = pump(initiator, responder, now=later)
    assert (len(log), errors) == (FRAMES, {})
    assert verify(pair, sessions, later + 60) == (VoiceOutcome.VERIFIED, VoiceOutcome.VERIFIED)


def test_an_update_restores_a_degraded_contact(make_person, sessions):
    alice, bob = make_person("Alice"), make_person("Bob")
    befriend(alice.party, bob.party)
    new_alice = make_person.move(alice).party
    pair = (new_alice, bob.party)
    # Alice's new device: Bob's sees a changed device.
    assert verify(pair, sessions, NOW - 120) == (VoiceOutcome.VERIFIED_TAG_UNCHECKED, VoiceOutcome.DEVICE_CHANGED)
    assert bob.party.contact().state == VerificationState.DEGRADED
    initiator, responder = initiator_first(pair, sessions)
    assert initiator.session_code == responder.session_code
    log, errors = pump(initiator, responder)
    assert (len(log), errors) == (FRAMES, {})
    for party in pair:
        assert party.contact().state == VerificationState.VERIFIED
    # Both check each other's tags again.
    assert verify(pair, sessions, NOW + 60) == (VoiceOutcome.VERIFIED, VoiceOutcome.VERIFIED)
    assert bob.party.contact().state == VerificationState.VERIFIED


# -- tampering, replay, reflection, the seed ----------------------------------------------


def test_a_flipped_byte_in_any_frame_fails(pair, sessions):
    honest_i, honest_r = initiator_first(pair, sessions, "flip")
    log, errors = pump(honest_i, honest_r)
    assert errors == {} and len(log) == FRAMES
    for index, (sender, frame) in enumerate(log):
        from_initiator = sender is honest_i
        for position in range(len(frame)):
            initiator, responder = initiator_first(pair, sessions, "flip")
            flipped = frame[:position] + bytes([frame[position] ^ 0xFF]) + frame[position + 1 :]
            _, errors = pump(initiator, responder, tamper=lambda i, f: flipped if i == index else f)
            what = f"frame {index}, byte {position}"
            # A changed KEY is only found out by the NEW that follows: then
            # one side or the other refuses a frame.
            receiver = responder if from_initiator else initiator
            if frame[1] == KEY:
                assert errors, what
                for update, error in errors.items():
                    assert_failed(update, error, what)
            else:
                assert receiver in errors, what
                assert_failed(receiver, errors[receiver], what)
            assert receiver.state != PinUpdateState.DONE, what
            for update in (initiator, responder):
                update.close()
                sessions.remove(update)


def test_frames_replayed_from_another_update_fail(pair, sessions):
    old_i, old_r = initiator_first(pair, sessions, "earlier")
    old_log, errors = pump(old_i, old_r)
    assert errors == {}
    for index, (sender, old_frame) in enumerate(old_log):
        if old_frame[1] == KEY:
            continue  # a KEY is not authenticated by itself: see the NEW frames
        initiator, responder = initiator_first(pair, sessions, f"later {index}")
        _, errors = pump(initiator, responder, tamper=lambda i, f: old_frame if i == index else f)
        receiver = responder if sender is old_i else initiator
        assert isinstance(errors.get(receiver), AuthenticationFailedError), (index, errors)
        assert receiver.state == PinUpdateState.FAILED
    # An old KEY in a new update: the keys differ, so the NEW frames fail.
    initiator, responder = initiator_first(pair, sessions, "latest")
    _, errors = pump(initiator, responder, tamper=lambda i, f: old_log[1][1] if i == 1 else f)
    assert errors and all(isinstance(error, AuthenticationFailedError) for error in errors.values())


def test_a_reflected_key_fails(pair, sessions):
    initiator, responder = initiator_first(pair, sessions)
    for update in (initiator, responder):
        key = update.next_outgoing()
        with pytest.raises(InvalidKeyError):
            update.receive(key, NOW)
        assert update.state == PinUpdateState.FAILED
        assert update.next_outgoing() == b""
        with pytest.raises(InvalidStateError):
            update.receive(key, NOW)


def test_frames_out_of_order_or_twice_fail(pair, sessions):
    initiator, responder = initiator_first(pair, sessions, "order")
    key_i = initiator.next_outgoing()
    responder.receive(key_i, NOW)
    with pytest.raises(MalformedMessageError):
        responder.receive(key_i, NOW)  # twice
    assert responder.state == PinUpdateState.FAILED
    # A NEW or a DONE before the KEYs; junk.
    frames = [bytes([1, NEW]) + bytes(64), bytes([1, DONE]) + bytes(16), bytes([2, KEY]) + bytes(32), bytes([1, 9]), b"", b"\x01"]
    for frame in frames:
        initiator, responder = initiator_first(pair, sessions)
        with pytest.raises(MalformedMessageError):
            responder.receive(frame, NOW)
        assert responder.state == PinUpdateState.FAILED
    # A KEY of the wrong length.
    initiator, responder = initiator_first(pair, sessions)
    with pytest.raises(MalformedMessageError):
        responder.receive(initiator.next_outgoing()[:-1], NOW)


def test_a_peer_without_the_seed_fails(make_party, sessions):
    alice, bob = make_party("Alice"), make_party("Bob")
    alice.peer = alice.contacts.add("Bob", bob.identity.public_key, bytes(32), now=T0)
    bob.peer = bob.contacts.add("Alice", alice.identity.public_key, bytes([1]) * 32, now=T0)
    pair = (alice, bob)
    initiator, responder = initiator_first(pair, sessions)
    assert initiator.session_code != responder.session_code, "the two would not even find each other"
    _, errors = pump(initiator, responder)
    assert errors and all(isinstance(error, AuthenticationFailedError) for error in errors.values())
    assert PinUpdateState.DONE not in (initiator.state, responder.state)


# -- windows, time, arguments -------------------------------------------------------------


def test_the_current_window_or_the_one_before(pair, sessions):
    alice, bob = pair
    assert start(alice, sessions).window == WINDOW
    before = start(alice, sessions, window=WINDOW - 1)
    assert before.window == WINDOW - 1
    assert before.session_code != start(alice, sessions).session_code, "another window, another code"
    # Two who meet on the code of the window before still complete.
    initiator, responder = (start(party, sessions, window=WINDOW - 1) for party in pair)
    if bob.identity.public_key < alice.identity.public_key:
        initiator, responder = responder, initiator
    assert initiator.session_code == responder.session_code
    assert pump(initiator, responder)[1] == {}
    assert initiator.state == responder.state == PinUpdateState.DONE
    for window in (WINDOW + 1, WINDOW - 2, 0):
        with pytest.raises(InvalidArgumentError) as caught:
            PinUpdate(alice.contacts, alice.peer, window, NOW)
        assert caught.value.detail == alice.contacts.last_error() != ""


def test_an_update_expires_after_ten_minutes(pair, sessions):
    initiator, responder = initiator_first(pair, sessions)
    responder.receive(initiator.next_outgoing(), NOW + LIFETIME)  # still in time
    with pytest.raises(ExpiredError):
        initiator.receive(responder.next_outgoing(), NOW + LIFETIME + 1)
    assert initiator.state == PinUpdateState.FAILED
    for party in pair:
        assert party.contact().state == VerificationState.VERIFIED


def test_constructor_arguments(pair, sessions):
    alice, bob = pair
    with pytest.raises(NotFoundError) as caught:
        PinUpdate(alice.contacts, alice.peer + 100, now=NOW)
    assert caught.value.detail == alice.contacts.last_error() != ""
    with pytest.raises(TypeError):
        PinUpdate(alice.identity, alice.peer, now=NOW)
    with pytest.raises(TypeError):
        PinUpdate(alice.contacts, alice.peer, now=NOW, random=b"\0" * 32)
    with pytest.raises(InvalidArgumentError):
        PinUpdate(alice.contacts, alice.peer, now=-1)
    with pytest.raises(InvalidArgumentError):
        PinUpdate(alice.contacts, alice.peer, window=-(2**63) - 1, now=NOW)
    # The same random source draws the same key.
    one, two, three = start(alice, sessions, "same"), start(alice, sessions, "same"), start(alice, sessions)
    key = one.next_outgoing()
    assert len(key) == 34 and key == two.next_outgoing() != three.next_outgoing()
    with pytest.raises(TypeError):
        one.receive("a text", NOW)


def test_close_and_context_manager(pair):
    alice, _ = pair
    with PinUpdate(alice.contacts, alice.peer, now=NOW) as update:
        assert update.store is alice.contacts and update.contact_id == alice.peer
        assert f"window={WINDOW}" in repr(update) and "RUNNING" in repr(update)
    assert update.closed and repr(update) == "<PinUpdate closed>"
    with pytest.raises(ValueError):
        update.state
    update.close()

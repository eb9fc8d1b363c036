"""Online Verify through the Python binding (docs/PROTOCOL.md section 11):
two people who exchanged by QR meet in a relay room, here an in-memory
pipe; their devices prove to each other that each holds the seed, and both
read the SAS aloud.  Tampered, replayed and reflected messages, a changed
device, a rejected SAS, the window rule, expiry and calls in the wrong state.
Sessions bound to a call (11.4): bound alike, bound differently, one bound
and one not, here and through itsme.relay's helpers against a real relay
(skipped without the relay binary).
"""

from __future__ import annotations

import hashlib
import threading
import time

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
    OnlineVerify,
    Profile,
    OnlineVerifyState,
    VerificationState,
    VoiceOutcome,
)
from test_degradation import make_person  # noqa: F401  (a fixture)
from test_relay_records import relay_url  # noqa: F401  (a fixture: a real relay, or the test is skipped)
from test_voice import T0, befriend, make_party, pair, rng, sessions  # noqa: F401  (fixtures)

# Both start a session at NOW, in the room of its window.
NOW = T0 + 100
WINDOW = NOW // 30
COMMIT, KEY, PROOF = 1, 2, 3
# What a refused message may raise (the session then has failed).
REJECTED = (MalformedMessageError, AuthenticationFailedError, InvalidKeyError)
LIFETIME = 600


def start(party, sessions, label=None, now=NOW, window=None, binding=None):
    """A session of ``party`` with its peer, bound to the call ``binding``
    (None: not bound); deterministic when labelled."""
    random = None if label is None else rng(f"{label} {party.name}")
    session = OnlineVerify(party.contacts, party.peer, window, now, random=random, binding=binding)
    sessions.append(session)
    return session


def start_both(pair, sessions, label=None, now=NOW, bindings=(None, None)):
    """Alice's and Bob's sessions, bound by ``bindings`` (None: not bound)."""
    alice, bob = pair
    return (
        start(alice, sessions, label, now, binding=bindings[0]),
        start(bob, sessions, label, now, binding=bindings[1]),
    )


def pump(a, b, now=NOW, tamper=None):
    """The relay room: moves messages both ways, one at a time, until
    neither session has one to send.  ``tamper(index, message)`` may replace
    the index-th message in transit.  Returns the messages delivered as
    (sender, receiver, message), and the first error each receiver raised.
    """
    log, errors = [], {}
    moved = True
    while moved:
        moved = False
        for sender, receiver in ((a, b), (b, a)):
            message = sender.next_outgoing()
            if not message:
                continue
            moved = True
            if tamper is not None:
                message = tamper(len(log), message)
            log.append((sender, receiver, message))
            try:
                receiver.receive(message, now)
            except ItsMeError as error:
                errors.setdefault(receiver, error)
    return log, errors


def initiator_of(pair, sa, sb):
    """The session of the party with the lower pid."""
    alice, bob = pair
    return sa if alice.identity.public_key < bob.identity.public_key else sb


def assert_failed(session, error, what=""):
    assert isinstance(error, REJECTED), f"{what}: {error!r}"
    assert session.state == OnlineVerifyState.FAILED, what
    assert session.last_error(), what


# -- a whole session ------------------------------------------------------------------


def test_end_to_end(pair, sessions):
    alice, bob = pair
    sa, sb = start_both(pair, sessions)
    # Both join the same room, named by the seed and the window.
    assert sa.room == sb.room
    assert len(sa.room) == 32 and int(sa.room, 16) >= 0 and sa.room == sa.room.lower()
    assert sa.window == sb.window == WINDOW
    for session in (sa, sb):
        assert session.state == OnlineVerifyState.RUNNING
        with pytest.raises(InvalidStateError):
            session.sas
    log, errors = pump(sa, sb)
    assert errors == {}
    # COMMIT, the responder's KEY, the initiator's KEY, the two PROOFs.
    initiator = initiator_of(pair, sa, sb)
    assert len(log) == 5
    assert [(sender is initiator, message[1]) for sender, _, message in log[:3]] == [
        (True, COMMIT),
        (False, KEY),
        (True, KEY),
    ]
    assert sorted((sender is initiator, message[1]) for sender, _, message in log[3:]) == [(False, PROOF), (True, PROOF)]
    assert [len(message) for _, _, message in log] == [34, 66, 66, 82, 82]
    # The longest message is a PROOF carrying a profile reference (below).
    assert max(len(message) for _, _, message in log) == itsme.ONLINE_VERIFY_MESSAGE_MAX - itsme.PROFILE_REFERENCE_BYTES
    for _, _, message in log:
        assert message[0] == 1, "protocol version 1"
    # Both show the same SAS.
    assert sa.state == sb.state == OnlineVerifyState.COMPARE_SAS
    assert sa.sas == sb.sas
    word, digits = sa.sas.split(" ")
    assert word in itsme.NATO_WORDS and len(digits) == 4
    # It matched: both confirm.
    assert sa.confirm(NOW + 20) == VoiceOutcome.VERIFIED
    assert sb.confirm(NOW + 21) == VoiceOutcome.VERIFIED
    for party, session, when in ((alice, sa, NOW + 20), (bob, sb, NOW + 21)):
        contact = party.contact()
        assert (contact.state, contact.verified_at) == (VerificationState.VERIFIED, when)
        assert contact.last_window is None, "Online Verify uses no window"
        assert session.state == OnlineVerifyState.CONFIRMED
        assert session.next_outgoing() == b""
        with pytest.raises(InvalidStateError):
            session.confirm(NOW + 22)
        with pytest.raises(InvalidStateError):
            session.reject()


def test_an_unverified_contact_becomes_verified(make_party, sessions):
    alice, bob = make_party("Alice"), make_party("Bob")
    befriend(alice, bob, confirm=False)
    sa, sb = start_both((alice, bob), sessions)
    pump(sa, sb)
    assert sa.confirm(NOW) == VoiceOutcome.VERIFIED
    assert alice.contact().state == VerificationState.VERIFIED
    assert bob.contact().state == VerificationState.UNVERIFIED, "until Bob confirms too"


def test_a_rejected_sas_records_nothing(pair, sessions):
    alice, bob = pair
    sa, sb = start_both(pair, sessions)
    pump(sa, sb)
    before = alice.contact()
    sa.reject()
    assert sa.state == OnlineVerifyState.REJECTED
    assert alice.contact() == before
    with pytest.raises(InvalidStateError):
        sa.confirm(NOW)
    with pytest.raises(InvalidStateError):
        sa.reject()
    # A session may be given up before the SAS, too.
    sc = start(alice, sessions)
    sc.reject()
    assert sc.state == OnlineVerifyState.REJECTED


def test_a_changed_device_is_detected_inside_the_session(make_person, sessions):
    alice, bob = make_person("Alice"), make_person("Bob")
    befriend(alice.party, bob.party)
    new_alice = make_person.move(alice).party
    sa, sb = start(new_alice, sessions), start(bob.party, sessions)
    _, errors = pump(sa, sb)
    assert errors == {}
    assert sa.sas == sb.sas, "the seed is the same: so is the SAS"
    # The new device holds no device secret: it checks no tag.  Bob's sees
    # a tag from a device secret it does not know.
    assert sa.confirm(NOW) == VoiceOutcome.VERIFIED_TAG_UNCHECKED
    assert sb.confirm(NOW) == VoiceOutcome.DEVICE_CHANGED
    contact = bob.party.contact()
    assert (contact.state, contact.acknowledged) == (VerificationState.DEGRADED, False)


def test_without_the_seed_the_rooms_differ_and_the_proofs_fail(make_party, sessions):
    alice, bob = make_party("Alice"), make_party("Bob")
    alice.peer = alice.contacts.add("Bob", bob.identity.public_key, bytes(32), now=T0)
    bob.peer = bob.contacts.add("Alice", alice.identity.public_key, bytes([1]) * 32, now=T0)
    sa, sb = start_both((alice, bob), sessions)
    assert sa.room != sb.room, "the two would not even meet"
    # Put together anyway, neither gets to the SAS.
    _, errors = pump(sa, sb)
    assert errors and all(isinstance(error, REJECTED) for error in errors.values())
    assert OnlineVerifyState.COMPARE_SAS not in (sa.state, sb.state)


# -- tampering, replay, reflection ------------------------------------------------------


def honest_log(pair, sessions, label):
    """The messages of a whole deterministic session pair."""
    sa, sb = start_both(pair, sessions, label)
    log, errors = pump(sa, sb)
    assert errors == {} and len(log) == 5
    return sa, sb, log


def test_a_flipped_byte_in_any_message_fails_its_receiver(pair, sessions):
    alice, bob = pair
    sa, sb, log = honest_log(pair, sessions, "flip")
    names = {sa: "alice", sb: "bob"}
    receivers = [names[receiver] for _, receiver, _ in log]
    for index, (_, _, message) in enumerate(log):
        for position in range(len(message)):
            # The same random sources: the same messages, up to this one.
            xa, xb = start_both(pair, sessions, "flip")
            flipped = message[:position] + bytes([message[position] ^ 0xFF]) + message[position + 1 :]

            def tamper(i, m, index=index, flipped=flipped):
                return flipped if i == index else m

            _, errors = pump(xa, xb, tamper=tamper)
            receiver = {"alice": xa, "bob": xb}[receivers[index]]
            what = f"message {index}, byte {position}"
            assert receiver in errors, what
            assert_failed(receiver, errors[receiver], what)
            for session in (xa, xb):
                session.close()
            sessions.remove(xa)
            sessions.remove(xb)


@pytest.mark.parametrize("change", ["truncated", "extended"])
def test_a_message_of_the_wrong_length_fails_its_receiver(pair, sessions, change):
    sa, sb, log = honest_log(pair, sessions, "length")
    for index, (sender, _, message) in enumerate(log):
        xa, xb = start_both(pair, sessions, "length")
        changed = message[:-1] if change == "truncated" else message + b"\0"
        _, errors = pump(xa, xb, tamper=lambda i, m: changed if i == index else m)
        receiver = xb if sender is sa else xa
        assert isinstance(errors.get(receiver), MalformedMessageError), (index, errors)
        assert receiver.state == OnlineVerifyState.FAILED


def test_a_message_replayed_from_another_session_fails_its_receiver(pair, sessions):
    old_a, old_b, old_log = honest_log(pair, sessions, "earlier")
    for index, (sender, _, old_message) in enumerate(old_log):
        xa, xb = start_both(pair, sessions, f"later {index}")
        _, errors = pump(xa, xb, tamper=lambda i, m: old_message if i == index else m)
        receiver = xb if sender is old_a else xa
        assert receiver in errors, f"message {index}"
        assert_failed(receiver, errors[receiver], f"message {index}")
    # A whole old PROOF, at the point where a PROOF is due: the keys differ.
    xa, xb = start_both(pair, sessions, "latest")
    initiator = initiator_of(pair, xa, xb)
    responder = xb if initiator is xa else xa
    responder.receive(initiator.next_outgoing(), NOW)  # COMMIT
    initiator.receive(responder.next_outgoing(), NOW)  # the responder's KEY
    old_proof = next(m for s, _, m in old_log if m[1] == PROOF and s is not initiator_of(pair, old_a, old_b))
    with pytest.raises(AuthenticationFailedError):
        initiator.receive(old_proof, NOW)
    assert initiator.state == OnlineVerifyState.FAILED


def test_reflected_messages_fail(pair, sessions):
    sa, sb = start_both(pair, sessions, "reflect")
    initiator = initiator_of(pair, sa, sb)
    responder = sb if initiator is sa else sa
    # The initiator's own COMMIT: an initiator takes none.
    commit = initiator.next_outgoing()
    with pytest.raises(MalformedMessageError):
        initiator.receive(commit, NOW)
    assert initiator.state == OnlineVerifyState.FAILED
    assert initiator.next_outgoing() == b"", "a failed session sends nothing"
    with pytest.raises(InvalidStateError):
        initiator.receive(commit, NOW)
    # The responder's own KEY: the commitment is checked before the
    # reflection (PROTOCOL.md 1.1, 11.2), and the initiator's COMMIT does not
    # match it. (online-verify.json's refusals hold a COMMIT made over the
    # reflected values, which gives invalid_key.)
    responder.receive(commit, NOW)
    key = responder.next_outgoing()
    with pytest.raises(AuthenticationFailedError):
        responder.receive(key, NOW)
    assert responder.state == OnlineVerifyState.FAILED
    # An initiator given its own KEY as the responder's (the same random
    # source, so the same key and challenge).
    ia, ib = start_both(pair, sessions, "reflect")
    i2 = initiator_of(pair, ia, ib)
    r2 = ib if i2 is ia else ia
    r2.receive(i2.next_outgoing(), NOW)
    i2.receive(r2.next_outgoing(), NOW)
    own_key = i2.next_outgoing()
    assert own_key[1] == KEY
    ic, id_ = start_both(pair, sessions, "reflect")
    i3 = initiator_of(pair, ic, id_)
    i3.next_outgoing()
    with pytest.raises(InvalidKeyError):
        i3.receive(own_key, NOW)


def test_messages_out_of_order_or_twice_fail(pair, sessions):
    sa, sb = start_both(pair, sessions, "order")
    initiator = initiator_of(pair, sa, sb)
    responder = sb if initiator is sa else sa
    commit = initiator.next_outgoing()
    responder.receive(commit, NOW)
    with pytest.raises(MalformedMessageError):
        responder.receive(commit, NOW)  # twice
    assert responder.state == OnlineVerifyState.FAILED
    # A KEY before the COMMIT.
    xa, xb = start_both(pair, sessions, "order 2")
    x_init = initiator_of(pair, xa, xb)
    x_resp = xb if x_init is xa else xa
    key = bytes([1, KEY]) + bytes(range(64))
    with pytest.raises(MalformedMessageError):
        x_resp.receive(key, NOW)
    # Unknown version and type.
    for junk in (bytes([2, COMMIT]) + bytes(32), bytes([1, 9]) + bytes(32), b"", b"\x01"):
        ya, yb = start_both(pair, sessions)
        y_resp = yb if initiator_of(pair, ya, yb) is ya else ya
        with pytest.raises(MalformedMessageError):
            y_resp.receive(junk, NOW)


def test_once_both_proofs_are_in_further_messages_are_refused_without_failing(pair, sessions):
    alice, _ = pair
    sa, sb = start_both(pair, sessions)
    log, _ = pump(sa, sb)
    with pytest.raises(InvalidStateError):
        sa.receive(log[-1][2], NOW)
    assert sa.state == OnlineVerifyState.COMPARE_SAS
    assert sa.confirm(NOW) == VoiceOutcome.VERIFIED


# -- windows, time, arguments -------------------------------------------------------------


def test_the_current_window_or_the_one_before(pair, sessions):
    alice, bob = pair
    assert start(alice, sessions).window == WINDOW
    before = start(alice, sessions, window=WINDOW - 1)
    assert before.window == WINDOW - 1
    assert before.room != start(alice, sessions).room, "another window, another room"
    # Two who meet in the room of the window before still agree.
    sa, sb = start(alice, sessions, window=WINDOW - 1), start(bob, sessions, window=WINDOW - 1)
    assert sa.room == sb.room
    pump(sa, sb)
    assert sa.sas == sb.sas
    for window in (WINDOW + 1, WINDOW - 2, 0):
        with pytest.raises(InvalidArgumentError) as caught:
            OnlineVerify(alice.contacts, alice.peer, window, NOW)
        assert caught.value.detail == alice.contacts.last_error() != ""


def test_the_window_of_a_time_is_the_librarys_arithmetic():
    # floor(now / 30), from itsme_window_of: no binding divides by itself.
    assert [itsme.window_of(t) for t in (0, 29, 30, 59, 60, NOW)] == [0, 0, 1, 1, 2, NOW // 30]
    before = int(time.time()) // 30
    assert before <= itsme.window_of() <= int(time.time()) // 30
    for bad in (-1, 253402300800):
        with pytest.raises(InvalidArgumentError):
            itsme.window_of(bad)


def test_a_session_expires_after_ten_minutes(pair, sessions):
    alice, bob = pair
    sa, sb = start_both(pair, sessions)
    initiator = initiator_of(pair, sa, sb)
    responder = sb if initiator is sa else sa
    commit = initiator.next_outgoing()
    responder.receive(commit, NOW + LIFETIME)  # still in time
    with pytest.raises(ExpiredError):
        initiator.receive(responder.next_outgoing(), NOW + LIFETIME + 1)
    assert initiator.state == OnlineVerifyState.FAILED
    # A SAS confirmed too late is refused, and changes nothing.
    xa, xb = start_both(pair, sessions)
    pump(xa, xb)
    before = alice.contact()
    with pytest.raises(ExpiredError):
        xa.confirm(NOW + LIFETIME + 1)
    assert alice.contact() == before
    assert xa.state == OnlineVerifyState.FAILED


def test_constructor_arguments(pair, sessions):
    alice, bob = pair
    with pytest.raises(NotFoundError) as caught:
        OnlineVerify(alice.contacts, alice.peer + 100, now=NOW)
    assert caught.value.detail == alice.contacts.last_error() != ""
    with pytest.raises(TypeError):
        OnlineVerify(alice.identity, alice.peer, now=NOW)
    with pytest.raises(TypeError):
        OnlineVerify(alice.contacts, alice.peer, now=NOW, random=b"\0" * 32)
    with pytest.raises(InvalidArgumentError):
        OnlineVerify(alice.contacts, alice.peer, now=-1)
    with pytest.raises(InvalidArgumentError):
        OnlineVerify(alice.contacts, alice.peer, window=2**63, now=NOW)
    # The same random source draws the same key and challenge: the same
    # COMMIT from the initiator.
    initiator = alice if alice.identity.public_key < bob.identity.public_key else bob
    one, two, three = start(initiator, sessions, "same"), start(initiator, sessions, "same"), start(initiator, sessions)
    commit = one.next_outgoing()
    assert len(commit) == 34 and commit == two.next_outgoing() != three.next_outgoing()


def test_confirm_argument_types(pair, sessions):
    alice, bob = pair
    sa, sb = start_both(pair, sessions)
    pump(sa, sb)
    with pytest.raises(TypeError):
        sa.confirm(alice.identity, NOW)
    assert sa.state == OnlineVerifyState.COMPARE_SAS
    with pytest.raises(TypeError):
        sa.receive("a text", NOW)
    assert sa.confirm(NOW) == VoiceOutcome.VERIFIED


def test_close_and_context_manager(pair):
    alice, _ = pair
    with OnlineVerify(alice.contacts, alice.peer, now=NOW) as session:
        assert session.store is alice.contacts and session.contact_id == alice.peer
        assert f"window={WINDOW}" in repr(session) and "RUNNING" in repr(session)
    assert session.closed and repr(session) == "<OnlineVerify closed>"
    with pytest.raises(ValueError):
        session.state
    session.close()


# -- bound to a call (docs/PROTOCOL.md 11.4) --------------------------------------------------

# Two call bindings: what the host of each call holds (the DTLS-SRTP exporter
# of the call, 32 bytes, in a real host).
OUR_CALL = hashlib.sha256(b"our call").digest()
OTHER_CALL = hashlib.sha256(b"another call").digest()[:16]


def test_both_bound_to_one_call_compare_the_sas_and_confirm(pair, sessions):
    alice, bob = pair
    # bytes and bytearray alike: the same binding.
    sa, sb = start_both(pair, sessions, bindings=(OUR_CALL, bytearray(OUR_CALL)))
    assert sa.room == sb.room, "the room does not depend on the binding"
    log, errors = pump(sa, sb)
    assert errors == {}
    # A bound KEY carries bind (32 bytes): 98 bytes.
    assert [len(message) for _, _, message in log] == [34, 98, 98, 82, 82]
    assert sa.state == sb.state == OnlineVerifyState.COMPARE_SAS
    assert sa.sas == sb.sas
    assert sa.confirm(NOW) == VoiceOutcome.VERIFIED
    assert sb.confirm(NOW) == VoiceOutcome.VERIFIED
    assert alice.contact().state == bob.contact().state == VerificationState.VERIFIED
    assert sa.state == sb.state == OnlineVerifyState.CONFIRMED


@pytest.mark.parametrize(
    "bindings, ends",
    [
        ((OUR_CALL, None), OnlineVerifyState.BINDING_DIFFERS),
        ((None, OUR_CALL), OnlineVerifyState.BINDING_DIFFERS),
        ((OUR_CALL, OTHER_CALL), OnlineVerifyState.OTHER_CALL),
    ],
    ids=["alice bound", "bob bound", "two calls"],
)
def test_bound_differently_both_end_without_a_sas_and_record_nothing(pair, sessions, bindings, ends):
    alice, bob = pair
    before = alice.contact(), bob.contact()
    sa, sb = start_both(pair, sessions, bindings=bindings)
    sa.share_profile(bytes(range(32)))
    log, errors = pump(sa, sb)
    # Not a failure: each device proved it holds the seed.
    assert errors == {}
    assert len(log) == 5
    keys = {sender: len(message) for sender, _, message in log if message[1] == KEY}
    assert keys == {sa: 66 if bindings[0] is None else 98, sb: 66 if bindings[1] is None else 98}
    for session in (sa, sb):
        assert session.state == ends, session
        # Final: no SAS, nothing to confirm, reject or read, nothing more to send.
        with pytest.raises(InvalidStateError):
            session.sas
        with pytest.raises(InvalidStateError):
            session.confirm(NOW)
        with pytest.raises(InvalidStateError):
            session.reject()
        with pytest.raises(InvalidStateError):
            session.peer_profile()
        with pytest.raises(InvalidStateError):
            session.receive(log[-1][2], NOW)
        assert session.next_outgoing() == b""
        assert session.state == ends, "still, after the refused calls"
        assert ends.name in repr(session)
    assert (alice.contact(), bob.contact()) == before, "nothing recorded"


def test_the_end_states_are_the_headers():
    assert OnlineVerifyState.BINDING_DIFFERS == itsme._abi.ITSME_ONLINE_VERIFY_STATE_BINDING_DIFFERS == 6
    assert OnlineVerifyState.OTHER_CALL == itsme._abi.ITSME_ONLINE_VERIFY_STATE_OTHER_CALL == 7


@pytest.mark.parametrize("length", [0, 1, itsme.CALL_BINDING_MIN - 1, itsme.CALL_BINDING_MAX + 1])
def test_a_binding_of_another_length_is_refused(pair, length):
    alice, _ = pair
    with pytest.raises(InvalidArgumentError) as caught:
        OnlineVerify(alice.contacts, alice.peer, now=NOW, binding=bytes(length))
    assert f"not {length}" in str(caught.value)


def test_binding_arguments(pair, sessions):
    alice, bob = pair
    for length in (itsme.CALL_BINDING_MIN, itsme.CALL_BINDING_MAX):
        session = start(alice, sessions, binding=memoryview(bytes(length)))
        assert session.state == OnlineVerifyState.RUNNING
    with pytest.raises(TypeError):
        OnlineVerify(alice.contacts, alice.peer, now=NOW, binding="our call, 16+ chars")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        OnlineVerify(alice.contacts, alice.peer, None, NOW, None, OUR_CALL)  # type: ignore[misc]  # keyword-only
    # The binding is checked before the contact and the window.
    with pytest.raises(InvalidArgumentError):
        OnlineVerify(alice.contacts, alice.peer + 100, now=NOW, binding=b"")
    with pytest.raises(NotFoundError):
        OnlineVerify(alice.contacts, alice.peer + 100, now=NOW, binding=OUR_CALL)


def _run_threads(*calls):
    """Runs the calls at once; their (result, error) pairs, in order."""
    results = [(None, None)] * len(calls)

    def run(index, call):
        try:
            results[index] = (call(), None)
        except BaseException as error:  # noqa: B036  (reported to the test)
            results[index] = (None, error)

    threads = [threading.Thread(target=run, args=(index, call), daemon=True) for index, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive(), "a side did not finish"
    return results


@pytest.mark.parametrize(
    "bindings, ends",
    [
        ((OUR_CALL, OUR_CALL), OnlineVerifyState.COMPARE_SAS),
        ((OUR_CALL, None), OnlineVerifyState.BINDING_DIFFERS),
        ((OUR_CALL, OTHER_CALL), OnlineVerifyState.OTHER_CALL),
    ],
    ids=["one call", "one bound", "two calls"],
)
def test_through_a_relay_the_helpers_end_in_the_states_of_the_bindings(relay_url, pair, sessions, bindings, ends):
    """itsme.relay's helpers through a real relay: start_online_verify binds
    the rendezvous' sessions, online_verify runs a bound session; both stop
    once the peer's PROOF is in, whatever the state it gave, and report it."""
    alice, bob = pair
    before = alice.contact(), bob.contact()
    alice_session = start(alice, sessions, binding=bindings[0])
    (state_a, error_a), (session_b, error_b) = _run_threads(
        lambda: itsme.relay.online_verify(relay_url, alice_session, timeout=20, now=NOW),
        lambda: itsme.relay.start_online_verify(
            relay_url, bob.contacts, bob.peer, now=NOW, timeout=20, binding=bindings[1]
        ),
    )
    assert error_a is None and error_b is None, (error_a, error_b)
    sessions.append(session_b)
    assert state_a == alice_session.state == session_b.state == ends
    if ends == OnlineVerifyState.COMPARE_SAS:
        assert alice_session.sas == session_b.sas
        assert alice_session.confirm(NOW) == session_b.confirm(NOW) == VoiceOutcome.VERIFIED
    else:
        with pytest.raises(InvalidStateError):
            session_b.sas
        assert (alice.contact(), bob.contact()) == before, "nothing recorded"


def test_start_online_verify_checks_the_binding_before_joining(pair):
    _, bob = pair
    with pytest.raises(InvalidArgumentError):
        # No relay listens there: the binding is refused first.
        itsme.relay.start_online_verify("http://127.0.0.1:9", bob.contacts, bob.peer, now=NOW, binding=bytes(15))


# -- a profile reference in the PROOF (docs/PROTOCOL.md 11.3, 18.3) -------------------------


def test_a_shared_profile_reference_arrives_once_the_sas_is_confirmed(pair, sessions):
    alice, bob = pair
    profile = Profile.create(alice.identity, "Alice Smith", b"\x89PNG photo", "alice.png")
    reference = profile.reference
    sa, sb = start_both(pair, sessions, "profile")
    sa.share_profile(reference)
    for session in (sa, sb):
        with pytest.raises(InvalidStateError):
            session.peer_profile()
    log, errors = pump(sa, sb)
    assert errors == {}
    proofs = {sender: message for sender, _, message in log if message[1] == PROOF}
    assert len(proofs[sa]) == itsme.ONLINE_VERIFY_MESSAGE_MAX == 114, "a PROOF with a reference"
    assert len(proofs[sb]) == 82, "a PROOF without"
    assert reference not in proofs[sa] and reference[16:] not in proofs[sa], "sealed"
    assert sa.sas == sb.sas
    # The PROOF is in, but the SAS is not confirmed yet.
    for session in (sa, sb):
        assert session.state == OnlineVerifyState.COMPARE_SAS
        with pytest.raises(InvalidStateError):
            session.peer_profile()
        with pytest.raises(InvalidStateError):
            session.share_profile(reference)
        assert session.state == OnlineVerifyState.COMPARE_SAS, "refused without failing"
    assert sb.confirm(NOW) == VoiceOutcome.VERIFIED
    assert sa.confirm(NOW) == VoiceOutcome.VERIFIED
    received = sb.peer_profile()
    assert received == reference
    with pytest.raises(NotFoundError):
        sa.peer_profile()  # Bob shared none
    # Bob fetches the record the reference names and opens it with Alice's key.
    assert received[: itsme.RECORD_ID_BYTES].hex() == profile.record_name
    contact = bob.contact()
    with Profile.open(profile.record, received, contact.public_key) as opened:
        assert (opened.name, opened.photo, opened.photo_filename) == ("Alice Smith", b"\x89PNG photo", "alice.png")
        bob.contacts.apply_profile(bob.peer, opened)
    assert bob.contact().name == "Alice Smith"
    assert bob.contacts.photo(bob.peer) == (b"\x89PNG photo", "alice.png")
    profile.close()


def test_both_may_share_and_the_last_reference_counts(pair, sessions):
    alice, bob = pair
    first, second, theirs = bytes(range(32)), bytes(range(32, 64)), bytes(range(64, 96))
    sa, sb = start_both(pair, sessions)
    sa.share_profile(first)
    sa.share_profile(second)
    sb.share_profile(theirs)
    log, errors = pump(sa, sb)
    assert errors == {}
    assert [len(message) for _, _, message in log[3:]] == [114, 114]
    sa.confirm(NOW)
    sb.confirm(NOW)
    assert sb.peer_profile() == second
    assert sa.peer_profile() == theirs


def test_share_profile_only_before_the_proof(pair, sessions):
    sa, sb = start_both(pair, sessions)
    initiator = initiator_of(pair, sa, sb)
    responder = sb if initiator is sa else sa
    reference = bytes(range(32))
    responder.receive(initiator.next_outgoing(), NOW)  # COMMIT
    responder.share_profile(reference)  # its PROOF is not made yet
    initiator.receive(responder.next_outgoing(), NOW)  # the responder's KEY: the initiator's PROOF is made
    with pytest.raises(InvalidStateError):
        initiator.share_profile(reference)
    assert initiator.state == OnlineVerifyState.RUNNING, "refused without failing"
    log, errors = pump(sa, sb)
    assert errors == {}
    with pytest.raises(InvalidStateError):
        responder.share_profile(reference)


@pytest.mark.parametrize("size", [0, 16, 31, 33, 64])
def test_share_profile_needs_a_reference_of_32_bytes(pair, sessions, size):
    sa, _ = start_both(pair, sessions)
    with pytest.raises(InvalidArgumentError):
        sa.share_profile(bytes(size))
    assert sa.state == OnlineVerifyState.RUNNING
    with pytest.raises(TypeError):
        sa.share_profile("0" * 32)


def test_no_reference_from_a_rejected_or_failed_session(pair, sessions):
    sa, sb = start_both(pair, sessions)
    sa.share_profile(bytes(range(32)))
    pump(sa, sb)
    sb.reject()
    with pytest.raises(InvalidStateError):
        sb.peer_profile()
    # A tampered PROOF with a reference fails its receiver.
    xa, xb = start_both(pair, sessions, "tampered")
    xa.share_profile(bytes(range(32)))

    def tamper(index, message):
        if message[1] == PROOF and len(message) == 114:
            return message[:-20] + bytes([message[-20] ^ 1]) + message[-19:]
        return message

    _, errors = pump(xa, xb, tamper=tamper)
    assert isinstance(errors.get(xb), AuthenticationFailedError)
    assert xb.state == OnlineVerifyState.FAILED
    with pytest.raises(InvalidStateError):
        xb.peer_profile()


def test_a_proof_of_another_length_is_malformed(pair, sessions):
    for change in (lambda m: m[:-1], lambda m: m + b"\0", lambda m: m + bytes(31), lambda m: m + bytes(33)):
        xa, xb = start_both(pair, sessions, "lengths")
        xa.share_profile(bytes(range(32)))

        def tamper(index, message, change=change):
            return change(message) if message[1] == PROOF and len(message) == 114 else message

        _, errors = pump(xa, xb, tamper=tamper)
        assert isinstance(errors.get(xb), MalformedMessageError)

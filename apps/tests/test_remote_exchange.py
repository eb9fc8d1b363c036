"""The exchange at a distance (PROTOCOL.md 16) through a real relay, with the
Python binding's relay client (itsme.relay): the invite mailbox with both
sides going offline between steps, a wrong encryption code, expired and
completed invites, relays that swap, drop, replay or reorder messages or
answer in someone's place, someone who read both codes, what the relay's
files hold, real-time exchanges through a room and a tampering room, and
Online Verify through a room.  Helpers are in remotetest.py.
"""

import hashlib
import time

import pytest

from relaytest import assert_error
from remotetest import (
    ACCEPT,
    DECISION,
    INVITE,
    REPLY,
    ForgedInviter,
    HostileMailbox,
    RedirectingMailbox,
    RoomProxy,
    device,  # noqa: F401  (a fixture)
    drive,
    drop_first,
    flip_first,
    found_in,
    other_valid_code,
    run_threads,
    stored_bytes,
    to_the_end,
)
from test_expiry import START, set_clock, start_with_clock

# After remotetest, which finds the binding and its library.
import itsme  # noqa: E402
from itsme import (
    AuthenticationFailedError,
    Exchange,
    ExchangeFlags,
    ExchangeMethod,
    ExchangeState,
    InvalidStateError,
    ItsMeError,
    MalformedMessageError,
    OnlineVerifyState,
    VerificationState,
    VoiceOutcome,
)
from itsme.relay import (
    InviteEndedError,
    InviteMailbox,
    InviteSession,
    RelayError,
    online_verify,
    realtime_exchange,
    start_online_verify,
)

COMPARE = ExchangeState.COMPARE_SAS
AWAITING = ExchangeState.AWAITING_PEER
DECIDING = ExchangeState.AWAITING_DECISION


def random(label: bytes):
    return itsme.DeterministicRandom(hashlib.sha256(label).digest())


def invite(alice, url, mailbox=None, **options):
    """Alice's invite, created on the relay with its INVITE posted."""
    exchange = Exchange.invite(alice.identity, alice.contacts, **options)
    session = InviteSession(mailbox or InviteMailbox(url), exchange)
    assert session.step() == AWAITING
    return exchange, session


def accept(bob, inviter, url, mailbox=None, code=None):
    """Bob's side, with the codes he was given (or another encryption code)."""
    exchange = Exchange.accept_invite(bob.identity, bob.contacts, inviter.invite_code, code or inviter.encryption_code)
    return exchange, InviteSession(mailbox or InviteMailbox(url), exchange)


def assert_gone(relay, invite_id, token):
    """The invite is no longer on the relay."""
    assert_error(relay.api().fetch(invite_id, token), 404, "not-found")


def assert_no_contacts(*devices):
    for d in devices:
        assert d.contacts.count() == 0, f"{d.name} saved a contact"


# -- the invite mailbox --------------------------------------------------------------------


def test_invite_exchange_with_both_sides_offline_between_steps(relay, device):
    r = relay()
    alice, bob = device("Alice"), device("Bob")
    inviter, session_a = invite(alice, r.url)
    assert session_a.token and session_a.last_seq == 0 and session_a.accepted is False
    codes = (inviter.invite_code, inviter.encryption_code)
    relay_id = inviter.relay_id
    # Alice tells Bob the codes and goes offline; her device restarts before
    # the ACCEPT arrives.
    alice.park(inviter, session_a)
    alice.restart()

    invitee = Exchange.accept_invite(bob.identity, bob.contacts, *codes)
    session_b = InviteSession(InviteMailbox(r.url), invitee)
    assert session_b.step() == AWAITING  # accepted, read the INVITE, posted the ACCEPT
    assert (session_b.last_seq, session_b.accepted) == (1, True)
    bob.park(invitee, session_b)
    bob.restart()

    inviter, session_a = alice.resume(InviteMailbox(r.url))
    assert session_a.step() == COMPARE  # read the ACCEPT, posted the REPLY
    assert not session_a.done and session_a.last_seq == 1, "the decisions are still to come"
    sas = inviter.sas
    alice.park(inviter, session_a)  # comparing, sealed again until the call
    alice.restart()

    invitee, session_b = bob.resume(InviteMailbox(r.url))
    assert session_b.step() == COMPARE
    assert not session_b.done

    inviter, session_a = alice.resume(InviteMailbox(r.url))
    assert session_a.step() == COMPARE
    assert inviter.sas == invitee.sas == sas
    assert (inviter.peer_name, inviter.peer_public_key) == ("Bob", bob.public_key)
    assert (invitee.peer_name, invitee.peer_public_key) == ("Alice", alice.public_key)
    # They compare the SAS on a call, and both confirm, each on their own
    # time: Alice first, then she goes offline.
    id_a = inviter.confirm()
    assert session_a.step() == DECIDING, "her confirmation waits for Bob's decision"
    alice.park(inviter, session_a)
    alice.restart()
    id_b = invitee.confirm()
    assert session_b.step() == DECIDING  # posted Bob's decision; Alice's has not come
    assert alice.contacts.get(id_a).state == bob.contacts.get(id_b).state == VerificationState.AWAITING_PEER

    inviter, session_a = alice.resume(InviteMailbox(r.url))
    assert session_a.step() == DECIDING  # read Bob's, posted hers
    assert session_a.done and inviter.flags & ExchangeFlags.PEER_CONFIRMED
    assert inviter.settle() == id_a
    assert session_b.step() == DECIDING
    assert session_b.done and invitee.flags & ExchangeFlags.PEER_CONFIRMED
    assert invitee.settle() == id_b
    # The invitee ended the invite once it had read both decisions.
    assert_gone(r, relay_id, session_b.token)
    for d, contact_id, peer in ((alice, id_a, bob), (bob, id_b, alice)):
        contact = d.contacts.get(contact_id)
        assert (contact.public_key, contact.state, contact.method) == (
            peer.public_key, VerificationState.VERIFIED, ExchangeMethod.INVITE)


def test_both_online_the_exchange_runs_at_network_speed(relay, device):
    r = relay()
    alice, bob = device("Alice"), device("Bob")
    inviter, session_a = invite(alice, r.url)
    invitee, session_b = accept(bob, inviter, r.url)

    def until_sas(session):
        while session.step(wait=10) == AWAITING:
            pass
        return session.exchange.state

    # Long-polls on both sides: each step returns as soon as the other posts.
    results = run_threads(lambda: until_sas(session_a), lambda: until_sas(session_b))
    assert results == [(COMPARE, None), (COMPARE, None)]
    assert inviter.sas == invitee.sas


def test_a_dropped_keep_alive_connection_is_replaced(relay, device):
    # The relay closes a connection that sends no request for request_timeout.
    r = relay(request_timeout=0.5)
    alice, bob = device("Alice"), device("Bob")
    mailbox = InviteMailbox(r.url)
    inviter, session_a = invite(alice, r.url, mailbox=mailbox)
    invitee, session_b = accept(bob, inviter, r.url)
    session_b.step()
    idle = mailbox._connection
    assert idle is not None, "the connection is kept alive"
    time.sleep(2.0)  # offline for four times as long as the relay keeps an idle connection
    assert session_a.step() == COMPARE
    assert mailbox._connection is not idle, "a new connection replaced the dropped one"
    assert session_b.step() == COMPARE


def test_wrong_encryption_code_fails_both_sides_and_spends_the_invite(relay, device):
    r = relay()
    alice, bob, carol = device("Alice"), device("Bob"), device("Carol")
    inviter, session_a = invite(alice, r.url)
    wrong = other_valid_code(inviter.encryption_code)
    invitee, session_b = accept(bob, inviter, r.url, code=wrong)
    assert session_b.step() == AWAITING  # the ACCEPT made with the wrong code is posted

    with pytest.raises(AuthenticationFailedError, match="wrong encryption code"):
        session_a.step()
    assert inviter.state == ExchangeState.FAILED and session_a.done
    assert_gone(r, inviter.relay_id, session_a.token)

    with pytest.raises(InviteEndedError, match="no longer on the relay") as ended:
        session_b.step()
    assert (ended.value.status, ended.value.kind) == (404, "not-found")
    assert invitee.state == ExchangeState.REJECTED and session_b.done

    # The invite is spent: the right code comes too late.
    late, session_c = accept(carol, inviter, r.url)
    with pytest.raises(InviteEndedError):
        session_c.step()
    assert late.state == ExchangeState.REJECTED
    assert_no_contacts(alice, bob, carol)


def test_an_expired_invite_answers_like_an_unknown_one(relay, device, tmp_path):
    r, clock = start_with_clock(relay, tmp_path)
    alice, bob = device("Alice"), device("Bob")
    inviter, session_a = invite(alice, r.url)
    set_clock(clock, START + 86401)
    invitee, session_b = accept(bob, inviter, r.url)
    with pytest.raises(InviteEndedError):
        session_b.step()
    with pytest.raises(InviteEndedError):
        session_a.step()
    assert inviter.state == invitee.state == ExchangeState.REJECTED
    assert_no_contacts(alice, bob)


def test_an_invite_is_accepted_once_and_gone_once_completed(relay, device):
    r = relay()
    alice, bob, carol, dave = device("Alice"), device("Bob"), device("Carol"), device("Dave")
    inviter, session_a = invite(alice, r.url)
    invitee, session_b = accept(bob, inviter, r.url)
    session_b.step()
    # Someone else with the same codes, while Bob's exchange runs: refused.
    second, session_c = accept(carol, inviter, r.url)
    with pytest.raises(RelayError, match="already accepted") as conflict:
        session_c.step()
    assert (conflict.value.status, conflict.value.kind) == (409, "conflict")
    assert second.state == ExchangeState.REJECTED
    assert to_the_end([session_a, session_b]) == {}
    assert inviter.sas == invitee.sas
    assert inviter.state == invitee.state == ExchangeState.CONFIRMED
    # Completed: the invitee ended it, so a later one finds nothing.
    third, session_d = accept(dave, inviter, r.url)
    with pytest.raises(InviteEndedError):
        session_d.step()
    assert_no_contacts(carol, dave)


def test_relay_refusals_carry_status_kind_message_and_retry_after(relay):
    r = relay(lookup_rate=1)
    mailbox = InviteMailbox(r.url)
    token = mailbox.create("2" * 32)
    with pytest.raises(RelayError) as conflict:
        mailbox.create("2" * 32)
    assert (conflict.value.status, conflict.value.kind) == (409, "conflict")
    assert mailbox.post("2" * 32, token, b"x") == 1
    assert mailbox.fetch("2" * 32, token) == (False, [])
    mailbox.delete("2" * 32, token)
    with pytest.raises(InviteEndedError) as missing:
        mailbox.accept("0" * 32)
    assert (missing.value.status, missing.value.kind, missing.value.retry_after) == (404, "not-found", None)
    assert missing.value.message and "\n" not in missing.value.message
    with pytest.raises(RelayError) as limited:
        mailbox.accept("1" * 32)
    assert (limited.value.status, limited.value.kind) == (429, "rate-limited")
    assert not isinstance(limited.value, InviteEndedError)
    assert isinstance(limited.value.retry_after, int) and limited.value.retry_after >= 1


def test_a_session_state_of_another_exchange_is_refused(relay, device):
    r = relay()
    alice = device("Alice")
    first, session = invite(alice, r.url)
    other = Exchange.invite(alice.identity, alice.contacts)
    with pytest.raises(ValueError, match="another exchange"):
        InviteSession.from_dict(InviteMailbox(r.url), other, session.to_dict())
    with pytest.raises(ValueError):
        InviteSession(InviteMailbox(r.url), Exchange.invite(alice.identity, alice.contacts, realtime=True))


# -- relays that lie ----------------------------------------------------------------------


def flip(message_type, index=60):
    """on_fetch: one bit of the first fetched message of that type flipped."""

    def hook(invite_id, messages):
        out = []
        for seq, body in messages:
            if not hook.done and body[1] == message_type:
                hook.done = True
                body = body[:index] + bytes([body[index] ^ 1]) + body[index + 1:]
            out.append((seq, body))
        return out

    hook.done = False
    return hook


def duplicate(invite_id, messages):
    """on_fetch (inviter): every message twice, the copy under the next number."""
    return [item for seq, body in messages for item in ((seq, body), (seq + 1, body))]


def reflect(invite_id, messages):
    """on_fetch (inviter): its own INVITE handed back as the invitee's message."""
    return [(1, reflect.own)] if reflect.own else messages


reflect.own = None


CASES = {
    # case: (whose mailbox lies, how, who must fail with the library's error)
    "INVITE changed": ("invitee", dict(on_fetch=flip(INVITE, 70)), "either"),
    "INVITE share changed": ("invitee", dict(on_fetch=flip(INVITE, 20)), "either"),
    "ACCEPT changed": ("inviter", dict(on_fetch=flip(ACCEPT, 100)), "inviter"),
    "ACCEPT tag changed": ("inviter", dict(on_fetch=flip(ACCEPT, 40)), "inviter"),
    "REPLY changed": ("invitee", dict(on_fetch=flip(REPLY, 100)), "invitee"),
    "ACCEPT changed before the relay stored it": (
        "invitee", dict(on_post=lambda i, body: body[:80] + bytes([body[80] ^ 4]) + body[81:]), "inviter"),
    "ACCEPT replayed": ("inviter", dict(on_fetch=duplicate), "inviter"),
    "INVITE reflected to the inviter": ("inviter", dict(on_fetch=reflect), "inviter"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_relay_that_changes_replays_or_reflects_a_message_ends_in_a_clear_failure(relay, device, case):
    r = relay()
    alice, bob = device("Alice"), device("Bob")
    side, hooks, failing = CASES[case]
    liar = HostileMailbox(r.url, **hooks)
    reflect.own = None
    inviter, session_a = invite(alice, r.url, mailbox=liar if side == "inviter" else None)
    reflect.own = liar.posted[0] if side == "inviter" else None
    invitee, session_b = accept(bob, inviter, r.url, mailbox=liar if side == "invitee" else None)

    errors = drive([session_b, session_a])
    library_errors = {s: e for s, e in errors.items() if isinstance(e, ItsMeError)}
    assert library_errors, f"{case}: nobody saw the change ({errors})"
    if failing != "either":
        assert list(library_errors) == [session_a if failing == "inviter" else session_b], errors
    for session, error in errors.items():
        assert isinstance(error, (ItsMeError, InviteEndedError)), error
        assert session.exchange.state in (ExchangeState.FAILED, ExchangeState.REJECTED)
    if failing == "invitee":
        # The inviter had its SAS before the changed REPLY reached Bob. She
        # waits for his decision; he ends the invite instead, which she
        # hears as an ended invite: no decision, so she keeps nothing.
        assert isinstance(errors.get(session_a), InviteEndedError), errors
        assert inviter.state == ExchangeState.REJECTED
    else:
        assert set(errors) == {session_a, session_b}, f"{case}: both sides must fail ({errors})"
    assert_gone(r, inviter.relay_id, session_a.token)
    assert_no_contacts(alice, bob)


def test_the_invitee_replayed_invite_fails_it(relay, device):
    r = relay()
    alice, bob = device("Alice"), device("Bob")
    inviter, session_a = invite(alice, r.url)
    seen = []

    def again(invite_id, messages):
        if not seen:
            seen.extend(body for _, body in messages)
            return messages
        return [(2, seen[0])]

    invitee, session_b = accept(bob, inviter, r.url, mailbox=HostileMailbox(r.url, on_fetch=again))
    session_b.step()  # the INVITE, once
    with pytest.raises(MalformedMessageError, match="out of order"):
        session_b.step()  # and again
    with pytest.raises(InviteEndedError):
        session_a.step()
    assert inviter.state == ExchangeState.REJECTED
    assert_no_contacts(alice, bob)


def test_a_relay_that_reorders_messages_fails_the_invitee(relay, device):
    """A relay that keeps old traffic gives Bob, before Alice's INVITE, the
    REPLY of an earlier exchange between the same two people: the messages
    out of order end the exchange."""
    r = relay()
    alice, bob = device("Alice"), device("Bob")
    recorder = HostileMailbox(r.url)
    earlier, session_a = invite(alice, r.url, mailbox=recorder)
    earlier_b, session_b = accept(bob, earlier, r.url)
    assert drive([session_b, session_a]) == {}
    old_reply = recorder.posted[1]
    assert old_reply[1] == REPLY

    inviter, session_a = invite(alice, r.url)
    reorder = HostileMailbox(r.url, on_fetch=lambda i, messages: [(1, old_reply)] + [(s + 1, b) for s, b in messages])
    invitee, session_b = accept(bob, inviter, r.url, mailbox=reorder)
    with pytest.raises(MalformedMessageError, match="out of order"):
        session_b.step()
    with pytest.raises(InviteEndedError):
        session_a.step()
    assert_no_contacts(alice, bob)


def test_a_relay_that_swaps_the_accepts_of_two_invites(relay, device):
    """Alice invites Bob and Carol at once; the relay hands each of her
    exchanges the other one's ACCEPT.  Both fail on the ACCEPT's tag."""
    r = relay()
    alice, bob, carol = device("Alice"), device("Bob"), device("Carol")
    pair = {}

    class Swapping(HostileMailbox):
        """Keeps what it reads; answers for each invite with the other's."""

        kept = {}

        def fetch(self, invite_id, token, after=0, wait=0):
            accepted, mine = InviteMailbox.fetch(self, invite_id, token, after, wait)
            self.kept.setdefault(invite_id, []).extend(mine)
            other = pair.get(invite_id)
            if other is None:
                return accepted, mine
            if not self.kept.get(other):
                self.kept[other] = InviteMailbox.fetch(self, other, self.tokens[other])[1]
            return accepted, [(seq, body) for seq, body in self.kept[other] if seq > after]

    swapping = Swapping(r.url)
    to_bob, session_ab = invite(alice, r.url, mailbox=swapping)
    to_carol, session_ac = invite(alice, r.url, mailbox=swapping)
    pair.update({to_bob.relay_id: to_carol.relay_id, to_carol.relay_id: to_bob.relay_id})
    bobs, session_b = accept(bob, to_bob, r.url)
    carols, session_c = accept(carol, to_carol, r.url)
    session_b.step()
    session_c.step()
    for session in (session_ab, session_ac):
        with pytest.raises(AuthenticationFailedError):
            session.step()
    for session in (session_b, session_c):
        with pytest.raises(InviteEndedError):
            session.step()
    assert bobs.state == carols.state == ExchangeState.REJECTED
    assert_no_contacts(alice, bob, carol)


@pytest.mark.parametrize("dropped", ["ACCEPT", "REPLY"])
def test_a_relay_that_drops_a_message_makes_no_progress(relay, device, dropped):
    r = relay()
    alice, bob = device("Alice"), device("Bob")
    if dropped == "ACCEPT":  # never shown to Alice
        liar_a = HostileMailbox(r.url, on_fetch=lambda i, messages: [])
    else:  # Alice's REPLY never stored
        liar_a = HostileMailbox(r.url, on_post=lambda i, body: None if body[1] == REPLY else body)
    inviter, session_a = invite(alice, r.url, mailbox=liar_a)
    invitee, session_b = accept(bob, inviter, r.url)
    assert drive([session_b, session_a], rounds=4) == {}
    assert invitee.state == AWAITING and not session_b.done, "Bob never gets the REPLY"
    assert inviter.state == (AWAITING if dropped == "ACCEPT" else COMPARE)
    if inviter.state == COMPARE:
        # Alice has a SAS, Bob none: nothing to compare on the call.
        with pytest.raises(InvalidStateError):
            invitee.sas
    assert_no_contacts(alice, bob)
    # Either gives up: the invite ends on the relay, the other side learns it.
    session_b.cancel()
    assert invitee.state == ExchangeState.REJECTED
    if dropped == "ACCEPT":
        with pytest.raises(InviteEndedError):
            session_a.step()
    assert_gone(r, inviter.relay_id, session_a.token)


def test_a_relay_answering_as_the_invitee_gets_one_guess_per_side(relay, device):
    """The relay knows the invite code (it can search the codes for one
    matching the ID) but not the encryption code.  It accepts Alice's invite
    itself and answers with an ACCEPT made with a guessed code: Alice fails
    and the invite is spent, so that guess cannot be repeated.  Its only
    other guess is against the invitee of another invite: a false INVITE
    with a guessed code, answered by Bob's ACCEPT (whose tag tells the relay
    its guess was wrong), then a REPLY Bob refuses; Bob's exchange, and his
    invite, are spent too."""
    r = relay()
    alice, bob, mallory = device("Alice"), device("Bob"), device("Mallory")
    api = r.api()

    # Guess 1, against the inviter.
    inviter, session_a = invite(alice, r.url)
    sealed = inviter.seal()
    token = api.accept(inviter.relay_id).json()["token"]
    [(seq, invite_message)] = api.messages(inviter.relay_id, token)
    guess = Exchange.accept_invite(mallory.identity, mallory.contacts, inviter.invite_code, other_valid_code(inviter.encryption_code, 3))
    guess.receive(invite_message)
    assert api.post(inviter.relay_id, token, guess.next_outgoing()).status_code == 201
    with pytest.raises(AuthenticationFailedError):
        session_a.step()
    assert_error(api.post(inviter.relay_id, token, b"\x01\x02another guess"), 404, "not-found")
    with pytest.raises(InvalidStateError):
        Exchange.restore(alice.identity, alice.contacts, sealed)  # no copy of Alice's side takes a second ACCEPT
    late, session_b = accept(bob, inviter, r.url)
    with pytest.raises(InviteEndedError):
        session_b.step()

    # Guess 2, against the invitee of a new invite.
    inviter, session_a = invite(alice, r.url)
    forged = ForgedInviter("Alice", inviter.invite_code, other_valid_code(inviter.encryption_code, 5), b"guess 2")
    liar = HostileMailbox(
        r.url,
        on_fetch=lambda i, messages: [(1, forged.invite)] + ([(2, liar.reply)] if liar.reply else []),
        on_post=lambda i, body: None,  # kept by the relay, never shown to Alice
    )
    liar.reply = None
    invitee, session_b = accept(bob, inviter, r.url, mailbox=liar)
    assert session_b.step() == AWAITING
    proven, liar.reply = forged.answer(liar.posted[0])
    assert not proven, "the ACCEPT's tag tells the relay its guess was wrong"
    sealed_b = invitee.seal()
    with pytest.raises(AuthenticationFailedError, match="confirmation does not verify"):
        session_b.step()
    assert invitee.state == ExchangeState.FAILED
    with pytest.raises(InvalidStateError):
        Exchange.restore(bob.identity, bob.contacts, sealed_b)
    assert_gone(r, inviter.relay_id, session_a.token)
    with pytest.raises(InviteEndedError):
        session_a.step()
    assert_no_contacts(alice, bob, mallory)


def test_the_forged_inviter_is_a_faithful_one(relay, device):
    """Control for the two tests around it: the inviter built outside the
    library, given the right codes, completes an exchange with the library's
    invitee through the relay, and both compute the same SAS."""
    r = relay()
    alice, bob = device("Alice"), device("Bob")
    codes = Exchange.invite(alice.identity, alice.contacts)
    forged = ForgedInviter("Eve", codes.invite_code, codes.encryption_code, b"faithful")
    mailbox = InviteMailbox(r.url)
    token = mailbox.create(forged.invite_id.hex())
    mailbox.post(forged.invite_id.hex(), token, forged.invite)
    invitee, session_b = accept(bob, codes, r.url)
    assert invitee.relay_id == forged.invite_id.hex()
    session_b.step()
    [(seq, accept_message)] = mailbox.fetch(forged.invite_id.hex(), token)[1]
    proven, reply = forged.answer(accept_message)
    assert proven and forged.peer_public_key == bob.public_key
    mailbox.post(forged.invite_id.hex(), token, reply)
    assert session_b.step() == COMPARE
    assert invitee.sas == forged.sas
    assert (invitee.peer_name, invitee.peer_public_key) == ("Eve", forged.public_key)


def test_someone_who_read_both_codes_in_the_middle_changes_the_sas(relay, device):
    """Eve read both codes and runs the relay.  She answers Alice's invite
    with her own invitee (an exchange she completes: she has the code), and
    sends Bob, who typed the same codes, to a mailbox of hers where an
    inviter with those codes waits (built outside the library, whose public
    API always draws fresh codes).  Both exchanges complete, each with Eve
    (who names herself "Bob" towards Alice): Alice's SAS is the one she
    shares with Eve, Bob's the one he shares with Eve, and the two differ,
    so comparing them on the call exposes her; both reject."""
    r = relay()
    # Fixed randomness everywhere: the SAS values are those of one run, not
    # a draw that would match 1 time in 260,000.
    alice, bob, eve = device("Alice", seed=b"alice"), device("Bob", seed=b"bob"), device("Bob", seed=b"eve")
    inviter, session_a = invite(alice, r.url, random=random(b"alice's invite"))
    codes = (inviter.invite_code, inviter.encryption_code)

    # Eve, as the invitee, towards Alice.
    eve_invitee = Exchange.accept_invite(eve.identity, eve.contacts, *codes, random=random(b"eve's accept"))
    session_e = InviteSession(InviteMailbox(r.url), eve_invitee)
    # Eve, as an inviter with the same codes, towards Bob, in her own mailbox.
    eve_inviter = ForgedInviter("Alice", *codes, b"eve")
    eve_mailbox = "e" * 32
    eve_api = InviteMailbox(r.url)
    eve_token = eve_api.create(eve_mailbox)
    eve_api.post(eve_mailbox, eve_token, eve_inviter.invite)
    invitee = Exchange.accept_invite(bob.identity, bob.contacts, *codes, random=random(b"bob's accept"))
    session_b = InviteSession(RedirectingMailbox(r.url, {inviter.relay_id: eve_mailbox}), invitee)

    assert drive([session_e, session_a]) == {}
    assert session_b.step() == AWAITING
    [(seq, bobs_accept)] = eve_api.fetch(eve_mailbox, eve_token)[1]
    proven, reply = eve_inviter.answer(bobs_accept)
    assert proven, "Eve has the code: Bob's ACCEPT proves the same one"
    eve_api.post(eve_mailbox, eve_token, reply)
    assert session_b.step() == COMPARE

    assert inviter.state == invitee.state == COMPARE
    assert inviter.sas == eve_invitee.sas, "Alice shares her SAS with Eve"
    assert invitee.sas == eve_inviter.sas, "and Bob his"
    assert inviter.sas != invitee.sas, "so the two people's SAS differ"
    assert inviter.peer_name == "Bob" and inviter.peer_public_key == eve.public_key != bob.public_key
    assert invitee.peer_public_key == eve_inviter.public_key != alice.public_key
    inviter.reject()
    invitee.reject()
    assert_no_contacts(alice, bob)


# -- what the relay keeps -------------------------------------------------------------------


def test_the_relay_files_hold_only_opaque_messages_and_nothing_once_done(relay, device):
    r = relay()
    alice, bob = device("Alice Liddell"), device("Bob Marley")
    recorder_a, recorder_b = HostileMailbox(r.url), HostileMailbox(r.url)
    inviter, session_a = invite(alice, r.url, mailbox=recorder_a)
    invitee, session_b = accept(bob, inviter, r.url, mailbox=recorder_b)
    session_b.step()

    # During the exchange: the INVITE and the ACCEPT are there (control)...
    during = stored_bytes(r)
    for message in (recorder_a.posted[0], recorder_b.posted[0]):
        assert "raw" in found_in(during, message), "control: a posted message is in the files"
    # ...and nothing that names a person or a code.
    secrets = {
        "Alice's name": b"Alice Liddell",
        "Bob's name": b"Bob Marley",
        "Alice's key": alice.public_key,
        "Bob's key": bob.public_key,
        "Alice's fingerprint": alice.fingerprint.encode(),
        "Bob's fingerprint": bob.fingerprint.encode(),
    }
    for code in (inviter.invite_code, inviter.encryption_code):
        for form in (code, code.replace("-", ""), code.lower(), code.replace("-", "").lower()):
            secrets[f"code {form}"] = form.encode()
    for what, value in secrets.items():
        assert not found_in(during, value), f"{what} is in the relay's files"
        assert value not in r.stderr_bytes(), f"{what} is in the relay's log"

    assert to_the_end([session_a, session_b]) == {}
    assert inviter.sas == invitee.sas
    assert inviter.state == invitee.state == ExchangeState.CONFIRMED

    # Done: the invitee ended the invite; no byte of it is left a second
    # later (PROTOCOL.md 15.2: one checkpoint for the deletions of a moment).
    time.sleep(1.0)
    after = stored_bytes(r)
    for message in recorder_a.posted + recorder_b.posted:
        assert not found_in(after, message), "a message of the finished exchange is in the files"
        assert not found_in(after, message[2:40]), "a piece of a message is in the files"
    relay_id = inviter.relay_id
    assert relay_id.encode() not in after, "the relay ID is in the files"
    assert not found_in(after, bytes.fromhex(relay_id))
    for what, value in secrets.items():
        assert not found_in(after, value), f"{what} is in the relay's files"


# -- real-time, through a room ------------------------------------------------------------------


def realtime_pair(alice, bob):
    inviter = Exchange.invite(alice.identity, alice.contacts, realtime=True)
    invitee = Exchange.accept_invite(bob.identity, bob.contacts, inviter.invite_code, inviter.encryption_code, realtime=True)
    return inviter, invitee


def test_realtime_exchange_through_a_room(relay, device):
    r = relay()
    alice, bob = device("Alice"), device("Bob")
    inviter, invitee = realtime_pair(alice, bob)
    assert inviter.relay_id == invitee.relay_id
    seen = {}

    def decide(who):
        def answer(exchange):
            seen[who] = exchange.sas
            return True
        return answer

    results = run_threads(
        lambda: realtime_exchange(r.url, inviter, decide=decide("a"), timeout=20),
        lambda: realtime_exchange(r.url, invitee, decide=decide("b"), timeout=20),
    )
    assert results == [(ExchangeState.CONFIRMED, None), (ExchangeState.CONFIRMED, None)]
    assert seen["a"] == seen["b"] == inviter.sas == invitee.sas
    [contact_a], [contact_b] = alice.contacts.list(), bob.contacts.list()
    assert contact_a.method == contact_b.method == ExchangeMethod.REALTIME
    assert contact_a.state == contact_b.state == VerificationState.VERIFIED


def test_realtime_either_sides_rejection_reaches_the_other(relay, device):
    r = relay()
    for rejecting in ("inviter", "invitee"):
        alice, bob = device(f"Alice {rejecting}"), device(f"Bob {rejecting}")
        inviter, invitee = realtime_pair(alice, bob)
        results = run_threads(
            lambda: realtime_exchange(
                r.url, inviter, decide=lambda _: rejecting != "inviter", timeout=20),
            lambda: realtime_exchange(
                r.url, invitee, decide=lambda _: rejecting != "invitee", timeout=20),
        )
        assert results == [(ExchangeState.REJECTED, None), (ExchangeState.REJECTED, None)], rejecting
        assert_no_contacts(alice, bob)


def test_realtime_a_dropped_decision_counts_as_none(relay, device):
    # A room that swallows Bob's DECISION: Alice confirmed, but never hears
    # Bob's; when Bob leaves, her contact is deleted, not verified.
    r = relay()
    alice, bob = device("Alice"), device("Bob")
    hook = drop_first(DECISION)
    proxy = RoomProxy(r, hook)
    try:
        inviter, invitee = realtime_pair(alice, bob)
        results = run_threads(
            lambda: realtime_exchange(proxy.url, inviter, decide=lambda _: True, timeout=20),
            lambda: realtime_exchange(proxy.url, invitee, decide=lambda _: True, timeout=20),
        )
    finally:
        proxy.close()
    assert hook.dropped
    states = sorted(state for state, _ in results)
    assert ExchangeState.REJECTED in states, results
    # Whoever lost the peer's decision kept nothing.
    for exchange, d in ((inviter, alice), (invitee, bob)):
        if exchange.state == ExchangeState.REJECTED:
            assert d.contacts.count() == 0


@pytest.mark.parametrize("changed", ["INVITE", "ACCEPT", "REPLY"])
def test_a_room_that_changes_a_frame_fails_the_exchange(relay, device, changed):
    r = relay()
    alice, bob = device("Alice"), device("Bob")
    hook = flip_first({"INVITE": INVITE, "ACCEPT": ACCEPT, "REPLY": REPLY}[changed])
    proxy = RoomProxy(r, hook)
    try:
        inviter, invitee = realtime_pair(alice, bob)
        (state_a, error_a), (state_b, error_b) = run_threads(
            lambda: realtime_exchange(proxy.url, inviter, decide=lambda _: True, timeout=20),
            lambda: realtime_exchange(proxy.url, invitee, decide=lambda _: True, timeout=20),
        )
    finally:
        proxy.close()
    assert hook.flipped, "the proxy changed a frame"
    if changed == "REPLY":
        # Alice had her SAS before Bob saw the changed REPLY, and confirmed;
        # Bob left without a decision, so hers counts for nothing.
        assert (state_a, error_a) == (ExchangeState.REJECTED, None)
        assert isinstance(error_b, AuthenticationFailedError), error_b
    else:
        errors = [error_a, error_b]
        assert any(isinstance(e, (AuthenticationFailedError, MalformedMessageError)) for e in errors), errors
        for error in errors:
            assert isinstance(error, ItsMeError) or (isinstance(error, RelayError) and error.kind == "peer-left"), error
        assert inviter.state in (ExchangeState.FAILED, ExchangeState.REJECTED)
    assert invitee.state in (ExchangeState.FAILED, ExchangeState.REJECTED)
    assert_no_contacts(alice, bob)


def test_realtime_alone_in_the_room_times_out(relay, device):
    r = relay()
    alice = device("Alice")
    inviter = Exchange.invite(alice.identity, alice.contacts, realtime=True)
    with pytest.raises(RelayError) as caught:
        realtime_exchange(r.url, inviter, decide=lambda _: True, timeout=0.5)
    assert caught.value.kind == "timeout"
    assert inviter.state == ExchangeState.REJECTED


# -- Online Verify through a room -----------------------------------------------------------------


def befriend(alice, bob):
    """Alice and Bob exchanged in person (QR) and confirmed."""
    xa, xb = Exchange.qr(alice.identity, alice.contacts), Exchange.qr(bob.identity, bob.contacts)
    xa.receive(xb.next_outgoing())
    xb.receive(xa.next_outgoing())
    return xa.confirm(), xb.confirm()


def test_online_verify_through_a_room(relay, device):
    r = relay()
    alice, bob = device("Alice"), device("Bob")
    id_a, id_b = befriend(alice, bob)
    now = int(time.time())
    (session_a, error_a), (session_b, error_b) = run_threads(
        lambda: start_online_verify(r.url, alice.contacts, id_a, now=now, timeout=20),
        lambda: start_online_verify(r.url, bob.contacts, id_b, now=now, timeout=20),
    )
    assert error_a is None and error_b is None, (error_a, error_b)
    assert session_a.state == session_b.state == OnlineVerifyState.COMPARE_SAS
    assert session_a.room == session_b.room and session_a.window == session_b.window == now // 30
    assert session_a.sas == session_b.sas
    assert session_a.confirm(now) == VoiceOutcome.VERIFIED
    assert session_b.confirm(now) == VoiceOutcome.VERIFIED


def test_online_verify_meets_in_the_room_of_the_window_before(relay, device):
    """Alice starts in one window and Bob in the next: Bob finds nobody in
    his window's room and meets her in the one before."""
    r = relay()
    alice, bob = device("Alice"), device("Bob")
    id_a, id_b = befriend(alice, bob)
    now = (int(time.time()) // 30) * 30
    alice_session = itsme.OnlineVerify(alice.contacts, id_a, now // 30 - 1, now - 1)
    (state_a, error_a), (session_b, error_b) = run_threads(
        lambda: online_verify(r.url, alice_session, timeout=20, now=now - 1),
        lambda: start_online_verify(r.url, bob.contacts, id_b, now=now, timeout=20),
    )
    assert error_a is None and error_b is None, (error_a, error_b)
    assert session_b.window == now // 30 - 1
    assert alice_session.sas == session_b.sas


CALL_1, CALL_2 = bytes(range(32)), bytes(range(100, 148))


@pytest.mark.parametrize(
    "bindings, expected",
    [
        ((CALL_1, CALL_1), OnlineVerifyState.COMPARE_SAS),
        ((CALL_1, None), OnlineVerifyState.BINDING_DIFFERS),
        ((CALL_1, CALL_2), OnlineVerifyState.OTHER_CALL),
    ],
    ids=["one-call", "one-side-bound", "two-calls"],
)
def test_online_verify_bound_to_the_call_through_a_room(relay, device, bindings, expected):
    """PROTOCOL.md 11.4 through a real relay. Alice's and Bob's devices meet
    in the room their seed names whatever call each is on, so an attacker on
    two calls at once can bring them together and repeat the SAS across:
    bound to two different calls, both end as OTHER_CALL (no SAS, nothing
    recorded); one bound beside one not, BINDING_DIFFERS; bound to one
    call, the SAS, and confirming records the verification."""
    r = relay()
    alice, bob = device("Alice"), device("Bob")
    id_a, id_b = befriend(alice, bob)
    before = (alice.contacts.get(id_a).verified_at, bob.contacts.get(id_b).verified_at)
    now = int(time.time())
    (session_a, error_a), (session_b, error_b) = run_threads(
        lambda: start_online_verify(r.url, alice.contacts, id_a, now=now, timeout=20, binding=bindings[0]),
        lambda: start_online_verify(r.url, bob.contacts, id_b, now=now, timeout=20, binding=bindings[1]),
    )
    assert error_a is None and error_b is None, (error_a, error_b)
    assert session_a.state == session_b.state == expected
    if expected == OnlineVerifyState.COMPARE_SAS:
        assert session_a.sas == session_b.sas
        assert session_a.confirm(now + 1) == VoiceOutcome.VERIFIED
        return
    for session in (session_a, session_b):
        with pytest.raises(itsme.InvalidStateError):
            session.sas
        with pytest.raises(itsme.InvalidStateError):
            session.confirm(now + 1)
    assert (alice.contacts.get(id_a).verified_at, bob.contacts.get(id_b).verified_at) == before


@pytest.mark.parametrize("changed", ["COMMIT", "KEY", "PROOF"])
def test_online_verify_through_a_tampering_room_fails(relay, device, changed):
    r = relay()
    alice, bob = device("Alice"), device("Bob")
    id_a, id_b = befriend(alice, bob)
    before = (alice.contacts.get(id_a), bob.contacts.get(id_b))
    hook = flip_first({"COMMIT": 1, "KEY": 2, "PROOF": 3}[changed], index=20)
    proxy = RoomProxy(r, hook)
    now = int(time.time())
    try:
        (session_a, error_a), (session_b, error_b) = run_threads(
            lambda: start_online_verify(proxy.url, alice.contacts, id_a, now=now, timeout=20),
            lambda: start_online_verify(proxy.url, bob.contacts, id_b, now=now, timeout=20),
        )
    finally:
        proxy.close()
    assert hook.flipped
    errors = [e for e in (error_a, error_b) if e is not None]
    assert any(isinstance(e, ItsMeError) for e in errors), (error_a, error_b)
    for error in errors:
        assert isinstance(error, ItsMeError) or (isinstance(error, RelayError) and error.kind == "peer-left"), error
    # A side that did get its SAS has nothing to compare it with: the other failed.
    for session in (session_a, session_b):
        if session is not None:
            assert session.state == OnlineVerifyState.COMPARE_SAS
            session.reject()
    assert (alice.contacts.get(id_a), bob.contacts.get(id_b)) == before, "nothing recorded"

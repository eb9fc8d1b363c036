"""The library's invite-mailbox driver (docs/PROTOCOL.md 16.5) and Online
Verify room rule (11.1) through the C API, as itsme.relay uses them: a
whole invite exchange whose requests go to an in-memory double of the
relay's invite routes, a refusal, an ended invite, saved state, and two
sides that meet across a window boundary; the room driver (16.5, 15.3)
through a room played in memory; the relay's paths.  The same drivers
against a real relay are in apps/tests/test_remote_exchange.py.
"""

from __future__ import annotations

import base64
import json
from typing import Dict, List, Optional, Tuple

import pytest

from itsme import ContactStore, Exchange, ExchangeState, Identity, InvalidArgumentError, ItsMeError, SecretStore
from itsme._mailbox import (
    ROOM_PING_INTERVAL,
    MailboxOutcome,
    MailboxRequest,
    MailboxSession,
    OnlineVerifyRendezvous,
    RelayRoute,
    RoomFailure,
    RoomSession,
    RoomStep,
    relay_path,
    relay_record_stored,
)
from itsme._online_verify import OnlineVerifyState
from test_exchange import T0, rng


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class FakeRelay:
    """One invite on the relay's routes (15.2), in memory."""

    def __init__(self) -> None:
        self.id: Optional[str] = None
        self.gone = False
        self.tokens: Dict[str, bool] = {}  # token -> is the inviter's
        self.messages: List[Tuple[int, bool, bytes]] = []
        self.deletes = 0

    def handle(self, method: str, path: str, token: Optional[str], body: bytes) -> Tuple[int, bytes]:
        invite_id, tail = path[len("/v1/invites/") :][:32], path[len("/v1/invites/") + 32 :]
        if (method, tail) == ("POST", ""):
            if self.id is not None:
                return 409, b'{"error": "conflict"}'
            self.id, t = invite_id, b64(b"\1" * 32)
            self.tokens[t] = True
            return 201, json.dumps({"token": t, "expires": 1800086400.5}).encode()
        if self.id != invite_id or self.gone:
            return 404, b'{"error": "not-found"}'
        if (method, tail) == ("POST", "/accept"):
            if len(self.tokens) > 1:
                return 409, b'{"error": "conflict"}'
            t = b64(b"\2" * 32)
            self.tokens[t] = False
            return 200, json.dumps({"token": t}).encode()
        inviter = self.tokens[token or ""]
        if (method, tail) == ("POST", "/messages"):
            self.messages.append((len(self.messages) + 1, inviter, body))
            return 201, json.dumps({"seq": len(self.messages)}).encode()
        if method == "GET":
            after = int(tail.split("after=")[1].split("&")[0])
            items = [{"seq": s, "body": b64(b)} for s, i, b in self.messages if i != inviter and s > after]
            return 200, json.dumps({"accepted": len(self.tokens) > 1, "messages": items}).encode()
        self.deletes += 1
        self.gone = True
        return 204, b""


def step(session: MailboxSession, relay: FakeRelay) -> Tuple[List[MailboxRequest], MailboxOutcome]:
    session.begin(0)
    made = []
    while True:
        request = session.next_request()
        if request in (MailboxRequest.IDLE, MailboxRequest.DONE):
            return made, MailboxOutcome.PROCEED
        made.append(request)
        method = {MailboxRequest.FETCH: "GET", MailboxRequest.DELETE: "DELETE"}.get(request, "POST")
        status, body = relay.handle(method, session.request_path(), session.token(), session.request_body())
        outcome = session.answer(status, body, T0)
        if outcome != MailboxOutcome.PROCEED:
            return made, outcome


@pytest.fixture
def people(tmp_path):
    made = []
    for name in ("Alice", "Bob"):
        secrets = SecretStore.memory()
        identity = Identity.create(secrets, name, random=rng(f"mailbox {name}"))
        made.append((secrets, identity, ContactStore.open(identity, tmp_path / f"{name}.db")))
    yield made
    for secrets, identity, contacts in made:
        contacts.close()
        identity.close()
        secrets.close()


def exchanges(people):
    inviter = Exchange.invite(people[0][1], people[0][2], T0, random=rng("mailbox invite"))
    invitee = Exchange.accept_invite(
        people[1][1], people[1][2], inviter.invite_code, inviter.encryption_code, T0, random=rng("mailbox accept")
    )
    return inviter, invitee


def test_a_whole_invite_exchange_through_a_fake_relay(people):
    inviter, invitee = exchanges(people)
    relay = FakeRelay()
    a, b = MailboxSession(inviter), MailboxSession(invitee)
    assert step(a, relay)[0] == [MailboxRequest.CREATE, MailboxRequest.POST, MailboxRequest.FETCH]
    assert step(b, relay)[0][:2] == [MailboxRequest.ACCEPT, MailboxRequest.FETCH]
    for _ in range(4):
        step(a, relay)
        step(b, relay)
    assert inviter.state == invitee.state == ExchangeState.COMPARE_SAS
    assert inviter.sas == invitee.sas
    invitee.confirm(T0)
    inviter.confirm(T0)
    for _ in range(4):
        step(b, relay)
        step(a, relay)
    assert a.next_request() == b.next_request() == MailboxRequest.DONE
    assert relay.gone and relay.deletes == 1
    inviter.settle(T0)
    invitee.settle(T0)
    assert inviter.state == invitee.state == ExchangeState.CONFIRMED


def test_a_refusal_ends_the_invite_and_saved_state_resumes(people):
    inviter, invitee = exchanges(people)
    relay = FakeRelay()
    a, b = MailboxSession(inviter), MailboxSession(invitee)
    step(a, relay)
    saved = json.loads(a.save())
    assert saved == {
        "version": 1,
        "relay_id": inviter.relay_id,
        "inviter": True,
        "token": b64(b"\1" * 32),
        "last_seq": 0,
        "unsent": [],
        "done": False,
        "accepted": False,
    }
    resumed = MailboxSession(inviter, json.dumps(saved))
    with pytest.raises(InvalidArgumentError, match="another exchange"):
        MailboxSession(invitee, json.dumps(saved))

    relay.messages[0] = (1, True, b"\xee" * 40)
    with pytest.raises(ItsMeError):
        step(b, relay)
    assert invitee.state == ExchangeState.FAILED
    assert b.next_request() == MailboxRequest.DELETE
    status, body = relay.handle("DELETE", b.request_path(), b.token(), b"")
    assert b.answer(status, body, T0) == MailboxOutcome.PROCEED
    assert b.next_request() == MailboxRequest.DONE
    assert step(resumed, relay)[1] == MailboxOutcome.INVITE_ENDED
    assert inviter.state == ExchangeState.REJECTED


def test_the_room_rule_across_a_window_boundary(people):
    (_, alice, at_alice), (_, bob, at_bob) = people
    seed = bytes([9]) * 32
    bob_id = at_alice.add("Bob", bob.public_key, seed, now=T0)
    alice_id = at_bob.add("Alice", alice.public_key, seed, now=T0)
    boundary = (T0 // 30 + 1) * 30
    a = OnlineVerifyRendezvous(at_alice, bob_id, boundary - 2, random=rng("rendezvous a"))
    b = OnlineVerifyRendezvous(at_bob, alice_id, boundary + 1, random=rng("rendezvous b"))
    [a_room] = a.rooms()
    [b_first] = b.rooms()
    b.alone(b_first)
    assert b.rooms() == [b_first, a_room]
    with pytest.raises(InvalidArgumentError):
        a.peer_joined(b_first)
    sa, sb = a.peer_joined(a_room), b.peer_joined(a_room)
    assert sb.window == boundary // 30 - 1 and sa.room == sb.room == a_room
    moved = True
    while moved:
        moved = False
        for x, y in ((sa, sb), (sb, sa)):
            message = x.next_outgoing()
            if message:
                y.receive(message, boundary + 2)
                moved = True
    assert sa.state == sb.state == OnlineVerifyState.COMPARE_SAS
    assert sa.sas == sb.sas


def _meet(people, bindings):
    """Alice's and Bob's rendezvous at one time, bound by ``bindings``: the
    sessions of the room where they meet, run to their end."""
    (_, alice, at_alice), (_, bob, at_bob) = people
    seed = bytes([9]) * 32
    bob_id = at_alice.add("Bob", bob.public_key, seed, now=T0)
    alice_id = at_bob.add("Alice", alice.public_key, seed, now=T0)
    a = OnlineVerifyRendezvous(at_alice, bob_id, T0, random=rng("bound a"), binding=bindings[0])
    b = OnlineVerifyRendezvous(at_bob, alice_id, T0, random=rng("bound b"), binding=bindings[1])
    [room] = a.rooms()
    assert b.rooms() == [room], "the rooms do not depend on the binding"
    sa, sb = a.peer_joined(room), b.peer_joined(room)
    moved = True
    while moved:
        moved = False
        for x, y in ((sa, sb), (sb, sa)):
            message = x.next_outgoing()
            if message:
                y.receive(message, T0)
                moved = True
    return sa, sb


@pytest.mark.parametrize(
    "bindings, ends",
    [
        ((b"our call" * 4, b"our call" * 4), OnlineVerifyState.COMPARE_SAS),
        ((b"our call" * 4, None), OnlineVerifyState.BINDING_DIFFERS),
        ((None, b"our call" * 4), OnlineVerifyState.BINDING_DIFFERS),
        ((b"our call" * 4, b"other call" * 2), OnlineVerifyState.OTHER_CALL),
    ],
    ids=["one call", "alice bound", "bob bound", "two calls"],
)
def test_the_room_rule_binds_both_sessions(people, bindings, ends):
    sa, sb = _meet(people, bindings)
    assert sa.state == sb.state == ends
    if ends == OnlineVerifyState.COMPARE_SAS:
        assert sa.sas == sb.sas


def test_the_room_rule_checks_the_binding(people):
    (_, _, at_alice), (_, bob, _) = people
    bob_id = at_alice.add("Bob", bob.public_key, bytes([9]) * 32, now=T0)
    for length in (0, 15, 65):
        with pytest.raises(InvalidArgumentError, match=f"not {length}"):
            OnlineVerifyRendezvous(at_alice, bob_id, T0, binding=bytes(length))
    with pytest.raises(TypeError):
        OnlineVerifyRendezvous(at_alice, bob_id, T0, binding="our call, 16+ chars")  # type: ignore[arg-type]
    for length in (16, 64):
        OnlineVerifyRendezvous(at_alice, bob_id, T0, binding=bytes(length)).close()


# -- the room driver ---------------------------------------------------------------------


def test_the_relay_paths_come_from_the_library():
    rid = "00112233445566778899aabbccddeeff"
    assert [relay_path(route, rid) for route in RelayRoute] == [
        f"/v1/invites/{rid}",
        f"/v1/invites/{rid}/accept",
        f"/v1/invites/{rid}/messages",
        f"/v1/rooms/{rid}",
        f"/v1/groups/{rid}",
        f"/v1/records/{rid}",
    ]
    for bad in ("", rid.upper(), rid[:-1], rid + "0", "g" * 32):
        with pytest.raises(InvalidArgumentError, match="32 lower-case hex"):
            relay_path(RelayRoute.ROOM, bad)
    with pytest.raises(ValueError):
        relay_path(7, rid)  # type: ignore[arg-type]


def test_a_records_put_answer_is_read_by_the_library():
    from itsme import MalformedMessageError

    token = "A" * 42 + "E"
    assert relay_record_stored(json.dumps({"delete_token": token}).encode()) == token
    assert relay_record_stored(b"{}") is None, "the same bytes stored again"
    for junk in (b"", b"[]", b'{"delete_token": "short"}', json.dumps({"token": token}).encode()):
        with pytest.raises(MalformedMessageError):
            relay_record_stored(junk)


def test_the_room_enumerations_are_the_headers():
    import itsme._abi as abi

    assert {m.name: m.value for m in RoomStep} == {
        n[len("ITSME_ROOM_STEP_") :]: v for n, v in vars(abi).items() if n.startswith("ITSME_ROOM_STEP_")
    }
    assert {m.name: m.value for m in RoomFailure} == {
        n[len("ITSME_ROOM_FAILURE_") :]: v for n, v in vars(abi).items() if n.startswith("ITSME_ROOM_FAILURE_")
    }
    assert {m.name: m.value for m in RelayRoute} == {
        n[len("ITSME_RELAY_ROUTE_") :]: v for n, v in vars(abi).items() if n.startswith("ITSME_RELAY_ROUTE_")
    }
    assert ROOM_PING_INTERVAL == abi.ITSME_ROOM_PING_INTERVAL


def _room_run(sides, decide=(True, True), leave_at_sas=None, after=None, steps=None):
    """Steps two room drivers through a room played in memory as the relay
    plays it: events as it writes them, frames forwarded in order, a side's
    last frames before its peer-left.  ``sides`` pairs each session with its
    flow (an exchange or a transfer: ``confirm(now)``, ``reject()``);
    ``after``: the side whose person decides only once the other side is
    done; a CHECK_PEER reads what is there, then times out; each side's
    steps are appended to ``steps`` when given."""
    inbox = [[b'{"type":"waiting"}', b'{"type":"peer-joined"}'], [b'{"type":"peer-joined"}']]
    left = [False, False]
    done = [False, False]
    errors = [None, None]
    for _ in range(400):
        if all(done):
            break
        for i, (session, exchange) in enumerate(sides):
            if done[i]:
                continue
            try:
                step = session.next(T0 + 1)
            except ItsMeError as error:
                errors[i] = error
                continue
            if step == RoomStep.DECIDE and after == i and not done[1 - i]:
                continue
            if steps is not None:
                steps[i].append(step)
            if step == RoomStep.CHECK_PEER and not inbox[i]:
                session.timed_out()
            elif step == RoomStep.SEND:
                if left[1 - i]:
                    session.send_failed()
                else:
                    inbox[1 - i].append(("binary", session.message()))
                    session.sent()
            elif step in (RoomStep.RECEIVE, RoomStep.CHECK_PEER) and inbox[i]:
                item = inbox[i].pop(0)
                if isinstance(item, bytes):
                    session.text(item)
                elif item[0] == "binary":
                    try:
                        session.binary(item[1], T0 + 1)
                    except ItsMeError as error:
                        errors[i] = error
                else:
                    session.connection_closed(item[1])
            elif step == RoomStep.DECIDE:
                if leave_at_sas == i:
                    session.abandon()
                elif decide[i]:
                    exchange.confirm(T0 + 1)
                else:
                    exchange.reject()
            elif step == RoomStep.LEAVE:
                if not left[i]:
                    left[i] = True
                    if not left[1 - i]:
                        inbox[1 - i] += [b'{"type":"peer-left"}', ("closed", 1000)]
                session.left()
            elif step == RoomStep.DONE:
                done[i] = True
    assert all(done), "both sessions end"
    return errors


def _realtime(people):
    inviter = Exchange.invite(people[0][1], people[0][2], T0, realtime=True, random=rng("room invite"))
    invitee = Exchange.accept_invite(
        people[1][1], people[1][2], inviter.invite_code, inviter.encryption_code, T0, realtime=True,
        random=rng("room accept"),
    )
    return inviter, invitee


def test_a_realtime_exchange_through_the_room_driver(people):
    inviter, invitee = _realtime(people)
    sessions = [RoomSession(inviter), RoomSession(invitee)]
    assert sessions[0].path() == sessions[1].path() == f"/v1/rooms/{inviter.relay_id}"
    assert _room_run(list(zip(sessions, (inviter, invitee)))) == [None, None]
    assert inviter.state == invitee.state == ExchangeState.CONFIRMED
    assert sessions[0].failure() == RoomFailure.NONE and sessions[0].failure_kind() == ""


def test_the_peer_leaving_at_the_sas_rejects_the_exchange(people):
    inviter, invitee = _realtime(people)
    sessions = [RoomSession(inviter), RoomSession(invitee)]
    _room_run(list(zip(sessions, (inviter, invitee))), leave_at_sas=1)
    assert inviter.state == invitee.state == ExchangeState.REJECTED
    assert people[0][2].count() == 0, "the contact saved at the SAS is deleted"


def test_a_room_that_fails_says_how(people):
    inviter, _ = _realtime(people)
    session = RoomSession(inviter)
    assert session.next(T0) == RoomStep.RECEIVE
    session.text(b'{"type":"waiting"}')
    assert not session.peer_present()
    session.connection_closed(4009)
    assert session.failure() == RoomFailure.ROOM_FULL
    assert session.failure_kind() == "room-full"
    assert session.failure_message() == "the room already holds two people"
    assert inviter.state == ExchangeState.REJECTED
    assert session.next(T0) == RoomStep.LEAVE
    session.left()
    assert session.next(T0) == RoomStep.DONE
    with pytest.raises(ItsMeError):
        session.sent()
    with pytest.raises(TypeError):
        RoomSession("not a flow")
    with pytest.raises(InvalidArgumentError):
        RoomSession(exchanges(people)[0])  # an invite goes through the mailbox

"""Helpers of the remote-exchange tests (test_remote_exchange.py): devices
that restart, relays that lie (wrappers around the binding's mailbox client,
and a WebSocket proxy in front of the real relay's rooms and group rooms,
which the roll-call tests use too), and an inviter built outside the library
for an attacker who chose its codes.

The exchanges run through the Python binding (bindings/python) and the
library it loads: ITSME_LIBRARY, or the repository's release build.
"""

import base64
import hashlib
import json
import os
import sys
import threading
import urllib.parse
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_BUILT = REPO / ".build" / "release" / "libitsme.so"
if not os.environ.get("ITSME_LIBRARY") and _BUILT.exists():
    os.environ["ITSME_LIBRARY"] = str(_BUILT)
try:
    import itsme
except ImportError:  # not on PYTHONPATH: the repository's binding
    sys.path.insert(0, str(REPO / "bindings" / "python"))
    import itsme
from itsme import ContactStore, Exchange, Identity, SecretStore  # noqa: E402
from itsme.relay import InviteEndedError, InviteMailbox, InviteSession, RelayError  # noqa: E402

ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
INVITE, ACCEPT, REPLY, DECISION = 1, 2, 3, 4


# ---------------------------------------------------------------------------
# Devices


class Device:
    """A person's device: an identity in a file secret store and a contact
    database, both in ``directory``, so that it can restart: everything in
    memory is dropped and reopened from the files."""

    def __init__(self, name: str, directory: Path, seed: bytes = None):
        self.name = name
        self.dir = directory
        self.dir.mkdir(parents=True)
        self.secrets = SecretStore.file(self.dir / "secrets")
        random = None if seed is None else itsme.DeterministicRandom(hashlib.sha256(seed).digest())
        self.identity = Identity.create(self.secrets, name, random=random)
        self.contacts = ContactStore.open(self.identity, self.dir / "contacts.db")
        self.public_key = self.identity.public_key
        self.fingerprint = self.identity.fingerprint

    def park(self, exchange: Exchange, session: InviteSession) -> None:
        """Goes offline: the sealed exchange and the session's state go to
        disk, the exchange is closed."""
        (self.dir / "exchange.sealed").write_bytes(exchange.seal())
        (self.dir / "session.json").write_text(json.dumps(session.to_dict()))
        exchange.close()
        session.mailbox.close()

    def resume(self, mailbox: InviteMailbox):
        """Back online: the exchange and its session from disk."""
        exchange = Exchange.restore(self.identity, self.contacts, (self.dir / "exchange.sealed").read_bytes())
        state = json.loads((self.dir / "session.json").read_text())
        return exchange, InviteSession.from_dict(mailbox, exchange, state)

    def restart(self) -> None:
        """The device restarts: nothing survives but the files."""
        self.close()
        self.secrets = SecretStore.file(self.dir / "secrets")
        self.identity = Identity.load(self.secrets)
        self.contacts = ContactStore.open(self.identity, self.dir / "contacts.db")
        assert self.identity.public_key == self.public_key

    def close(self) -> None:
        self.contacts.close()
        self.identity.close()
        self.secrets.close()


@pytest.fixture
def device(tmp_path):
    made = []

    def make(name: str, seed: bytes = None) -> Device:
        made.append(Device(name, tmp_path / f"device-{len(made)}-{name.split()[0].lower()}", seed))
        return made[-1]

    yield make
    for d in made:
        d.close()


def other_valid_code(code: str, shift: int = 1) -> str:
    """A code that passes the typo check but is not ``code``."""
    values = [ALPHABET.index(c) for c in code.replace("-", "")[:7]]
    values[0] = (values[0] + shift) % 31
    check = ((31 - sum((i + 1) * v for i, v in enumerate(values)) % 31) % 31) * 4 % 31
    text = "".join(ALPHABET[v] for v in values + [check])
    return f"{text[:4]}-{text[4:]}"


# ---------------------------------------------------------------------------
# Relays that lie: the mailbox


class HostileMailbox(InviteMailbox):
    """A relay that changes what one side sees, as a man in the middle
    between that side's client and the real relay.

    ``on_fetch(invite_id, messages)`` returns the ``[(seq, body)]`` the side
    gets instead of what the relay holds; ``on_post(invite_id, body)``
    returns the body to store instead, or None to drop it (the side is told
    it was stored).  ``posted`` records what the side posted, ``fetched``
    what it was given.
    """

    def __init__(self, base_url, *, on_fetch=None, on_post=None, **kwargs):
        super().__init__(base_url, **kwargs)
        self.on_fetch = on_fetch
        self.on_post = on_post
        self.posted = []
        self.fetched = []
        self.tokens = {}
        self._dropped = {}
        self._answering = False

    def _request(self, method, path, *, headers, body=None, timeout=None):
        """The library's request (InviteSession makes what its mailbox
        driver says), answered as a relay would through this class's route
        methods, which the hostile hooks override; their own requests go to
        the real relay."""
        if self._answering:
            return super()._request(method, path, headers=headers, body=body, timeout=timeout)
        self._answering = True
        try:
            where = urllib.parse.urlsplit(path)
            parts = where.path.split("/")
            invite_id, tail = parts[3], "/".join(parts[4:])
            token = headers.get("Authorization", "").partition(" ")[2] or None
            if (method, tail) == ("POST", ""):
                return 201, {}, json.dumps({"token": self.create(invite_id)}).encode()
            if (method, tail) == ("POST", "accept"):
                return 200, {}, json.dumps({"token": self.accept(invite_id)}).encode()
            if (method, tail) == ("POST", "messages"):
                return 201, {}, json.dumps({"seq": self.post(invite_id, token, body)}).encode()
            if method == "GET":
                query = urllib.parse.parse_qs(where.query)
                accepted, messages = self.fetch(invite_id, token, int(query["after"][0]), int(query["wait"][0]))
                items = [{"seq": seq, "body": base64.urlsafe_b64encode(b).rstrip(b"=").decode()} for seq, b in messages]
                return 200, {}, json.dumps({"accepted": accepted, "messages": items}).encode()
            self.delete(invite_id, token)
            return 204, {}, b""
        except RelayError as error:
            if error.status is None and not isinstance(error, InviteEndedError):
                raise  # no answer came: the real relay could not be reached
            status = 404 if isinstance(error, InviteEndedError) else error.status
            return status, {}, json.dumps({"error": error.kind, "message": error.message}).encode()
        finally:
            self._answering = False

    def create(self, invite_id):
        self.tokens[invite_id] = super().create(invite_id)
        return self.tokens[invite_id]

    def accept(self, invite_id):
        self.tokens[invite_id] = super().accept(invite_id)
        return self.tokens[invite_id]

    def post(self, invite_id, token, body):
        self.posted.append(bytes(body))
        if self.on_post is not None:
            body = self.on_post(invite_id, bytes(body))
            if body is None:
                self._dropped[invite_id] = self._dropped.get(invite_id, 0) + 1
                return len(self.posted)
        return super().post(invite_id, token, body)

    def fetch(self, invite_id, token, after=0, wait=0):
        accepted, messages = super().fetch(invite_id, token, after, wait)
        if self.on_fetch is not None:
            messages = self.on_fetch(invite_id, messages)
        self.fetched.extend(messages)
        return accepted, messages


class RedirectingMailbox(HostileMailbox):
    """A relay that sends one side to another mailbox than the one its codes
    name: ``routes`` maps the ID the side asks for to the one it gets."""

    def __init__(self, base_url, routes, **kwargs):
        super().__init__(base_url, **kwargs)
        self.routes = routes

    def create(self, invite_id):
        return super().create(self.routes.get(invite_id, invite_id))

    def accept(self, invite_id):
        return super().accept(self.routes.get(invite_id, invite_id))

    def post(self, invite_id, token, body):
        return super().post(self.routes.get(invite_id, invite_id), token, body)

    def fetch(self, invite_id, token, after=0, wait=0):
        return super().fetch(self.routes.get(invite_id, invite_id), token, after, wait)

    def delete(self, invite_id, token):
        return super().delete(self.routes.get(invite_id, invite_id), token)


def drive(sessions, rounds=6, wait=0):
    """Steps each session in turn, ``rounds`` times, until every one is done.
    Returns {session: first exception it raised} (the drivers' failures are
    final: a failed session is not stepped again)."""
    errors = {}
    for _ in range(rounds):
        for session in sessions:
            if session in errors or session.done:
                continue
            try:
                session.step(wait=wait)
            except Exception as error:  # noqa: BLE001 - recorded for the test to judge
                errors[session] = error
        if all(session.done or session in errors for session in sessions):
            break
    return errors


def to_the_end(sessions, rounds=8, wait=0, decide=lambda exchange: True):
    """Carries each session to the end: at its SAS the exchange is
    confirmed (or rejected, by ``decide``), the decisions cross through the
    mailbox, and each side settles the peer's.  Returns {session: first
    exception it raised}."""
    from itsme import ExchangeFlags, ExchangeState

    decided = ExchangeFlags.PEER_CONFIRMED | ExchangeFlags.PEER_REJECTED
    errors = {}
    for _ in range(rounds):
        for session in sessions:
            if session in errors:
                continue
            exchange = session.exchange
            try:
                if exchange.state == ExchangeState.COMPARE_SAS:
                    exchange.save()
                    if decide(exchange) and not exchange.flags & ExchangeFlags.PEER_REJECTED:
                        exchange.confirm()
                    else:
                        exchange.reject()
                if not session.done:
                    session.step(wait=wait)
                if exchange.state == ExchangeState.AWAITING_DECISION and exchange.flags & decided:
                    exchange.settle()
            except Exception as error:  # noqa: BLE001 - recorded for the test to judge
                errors[session] = error
        if all(
            session in errors or (session.done and session.exchange.state != ExchangeState.AWAITING_DECISION)
            for session in sessions
        ):
            break
    return errors


# ---------------------------------------------------------------------------
# Relays that lie: rooms


class RoomProxy:
    """A WebSocket proxy in front of the real relay's rooms (15.3) and group
    rooms (15.9): every connection made to it is relayed to the same path on
    the relay; every binary frame a client sends passes through
    ``tamper(frame)`` on its way up (None drops it), and every message the
    relay sends a client through ``deliver(link, message)`` on its way down,
    which returns the messages the client gets instead (none drops it).
    ``links`` holds a :class:`ProxyLink` per connection, in the order they
    came.  ``url`` is the base URL to give the binding's clients,
    ``ws_base`` the one for WebSocket clients."""

    def __init__(self, relay, tamper=None, deliver=None):
        from websockets.sync.server import serve

        self.upstream_base = relay.ws_base
        self.tamper = tamper or (lambda frame: frame)
        self.deliver = deliver or (lambda link, message: [message])
        self.lock = threading.RLock()  # re-entrant: a hook may look up links
        self.links: list = []
        self.server = serve(self._handle, "127.0.0.1", 0, compression=None, max_size=None, ping_interval=None)
        self.port = self.server.socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_base = f"ws://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _handle(self, client):
        from websockets.sync.client import connect

        link = ProxyLink(client.request.path, client)
        with self.lock:
            self.links.append(link)
        with connect(
            self.upstream_base + client.request.path, compression=None, max_size=None, ping_interval=None
        ) as upstream:
            self._relay(link, upstream)

    def _relay(self, link, upstream):
        from websockets.exceptions import ConnectionClosed

        client = link.client

        def client_to_relay():
            try:
                for message in client:
                    if isinstance(message, bytes):
                        link.sent.append(message)
                        with self.lock:
                            message = self.tamper(message)
                        if message is None:
                            continue  # dropped by the hook
                    upstream.send(message)
            except ConnectionClosed:
                pass
            finally:
                upstream.close()

        forward = threading.Thread(target=client_to_relay, daemon=True)
        forward.start()
        try:
            for message in upstream:
                with self.lock:
                    messages = list(self.deliver(link, message))
                for message in messages:
                    link.send(message)
        except ConnectionClosed:
            pass
        finally:
            client.close()
            forward.join(5)

    def close(self):
        self.server.shutdown()
        self.thread.join(5)


class ProxyLink:
    """One client's connection through a :class:`RoomProxy`: its ``path``,
    the binary frames it ``sent`` (as the client sent them, before
    ``tamper``), its relay ``slot`` in a group room (from the relay's
    ``joined``), and :meth:`send` to give it a message of the proxy's own."""

    def __init__(self, path: str, client):
        self.path = path
        self.client = client
        self.sent: list = []
        self.slot = None
        self._send_lock = threading.Lock()

    def send(self, message) -> None:
        with self._send_lock:
            self.client.send(message)


def flip_first(message_type, index=60):
    """A tamper hook flipping one bit of byte ``index`` of the first binary
    frame whose second byte is ``message_type``; ``hook.flipped`` lists it."""

    def hook(frame):
        if not hook.flipped and len(frame) > index and frame[1] == message_type:
            hook.flipped.append(frame)
            return frame[:index] + bytes([frame[index] ^ 0x01]) + frame[index + 1:]
        return frame

    hook.flipped = []
    return hook


def drop_first(message_type):
    """A tamper hook dropping the first binary frame whose second byte is
    ``message_type``; ``hook.dropped`` lists it."""

    def hook(frame):
        if not hook.dropped and len(frame) > 1 and frame[1] == message_type:
            hook.dropped.append(frame)
            return None
        return frame

    hook.dropped = []
    return hook


def run_threads(*calls, timeout=30):
    """Runs each call in its own thread; returns [(result, exception)]."""
    results = [(None, None)] * len(calls)

    def runner(i, call):
        try:
            results[i] = (call(), None)
        except BaseException as error:  # noqa: BLE001 - handed to the test
            results[i] = (None, error)

    threads = [threading.Thread(target=runner, args=(i, call), daemon=True) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
        assert not thread.is_alive(), "a side did not finish"
    return results


# ---------------------------------------------------------------------------
# The relay's files


def stored_bytes(relay) -> bytes:
    """The raw bytes of the relay's database and its logs."""
    data = b""
    for suffix in ("", "-wal", "-journal", "-shm"):
        path = relay.database.with_name(relay.database.name + suffix)
        if path.exists():
            data += path.read_bytes()
    return data


def forms(value: bytes) -> dict:
    """The forms in which bytes could have been stored."""
    return {
        "raw": value,
        "hex": value.hex().encode(),
        "HEX": value.hex().upper().encode(),
        "base64url": base64.urlsafe_b64encode(value).rstrip(b"="),
        "base64": base64.b64encode(value).rstrip(b"="),
    }


def found_in(data: bytes, value: bytes) -> list:
    return [name for name, form in forms(value).items() if form in data]


# ---------------------------------------------------------------------------
# An inviter built outside the library

# The independent implementation of docs/PROTOCOL.md (spec/), which the
# public API cannot replace here: it always draws fresh codes.
sys.path.insert(0, str(REPO / "spec"))
from independent import protocol as spec  # noqa: E402


class ForgedInviter:
    """The inviter's side of PROTOCOL.md 16, from the independent
    implementation rather than the library, with codes its user chose: what
    someone who read (or guessed) the codes would run.  Its identity is its
    own Ed25519 key (``name`` may claim to be anyone).  Deterministic from
    ``seed``.

    ``invite`` is its INVITE; :meth:`answer` takes an ACCEPT and returns
    (whether the ACCEPT's tag proves the same encryption code, the REPLY);
    with a proven code it also sets ``sas`` and ``peer_public_key``.  With a
    wrong code it still answers (a relay guessing against the invitee),
    which an honest inviter never does.
    """

    def __init__(self, name: str, invite_code: str, encryption_code: str, seed: bytes):
        def draw(label: bytes, n: int) -> bytes:
            return hashlib.sha256(seed + label).digest()[:n]

        self._side = spec.RemoteExchange.inviter(
            draw(b"identity", 32), draw(b"ephemeral", 32), draw(b"device", 16), name.encode(),
            invite_code, encryption_code, sid=draw(b"sid", 16), scalar=draw(b"scalar", 32))
        [self.invite] = self._side.start()
        self.invite_id = self._side.invite_id
        self.public_key = self._side.identity_pk
        self.sas = None
        self.peer_public_key = None

    def answer(self, accept: bytes):
        side = self._side
        try:
            [reply] = side.receive(accept)
        except spec.ProtocolError:
            # A wrong code: the keys are those of this run all the same.
            v = side._v
            payload = side._own_payload()
            box = spec.seal_remote_payload(v["keys"].kp_i, spec.INITIATOR, self.invite_id, payload)
            return False, spec.reply_message(spec.remote_tag_i(v["keys"].kc_i, v["tpake"], accept), box)
        self.sas = side.result.sas_text
        self.peer_public_key = side.result.peer.identity_pk
        return True, reply

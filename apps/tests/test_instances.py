"""Several relays on one PostgreSQL database behind the shipped nginx config
(PROTOCOL.md 15.8, deploy/nginx/itsme-relay.conf).

Real servers: PostgreSQL and nginx from the system's packages
(scripts/install-deps), started by services.py on loopback, and two
itsme-relay processes, A and B, on fixed ports so that nginx keeps
addressing them across a kill and a restart. Missing PostgreSQL or nginx
skips these tests, or fails them when ITSME_RELAY_REQUIRE_SERVICES=1 (as
scripts/test-all sets).
"""

import asyncio
import concurrent.futures
import os
import signal
import ssl
import time

import httpx
import pytest

from relaytest import (
    GENEROUS,
    ConnectionClosed,
    Relay,
    assert_error,
    metric,
    new_id,
    recv_binary,
    recv_event,
    run,
    unb64url,
    ws_connect,
)
from services import NGINX_CONF, Nginx, Postgres, ServiceMissing, free_port


def services_or_skip(make):
    try:
        return make()
    except ServiceMissing as missing:
        if os.environ.get("ITSME_RELAY_REQUIRE_SERVICES") == "1":
            pytest.fail(str(missing), pytrace=False)
        pytest.skip(str(missing))


class Cluster:
    """Relays A and B on one database, nginx in front of both."""

    def __init__(self, relay_bin, workdir, postgres):
        self.relay_bin = relay_bin
        self.workdir = workdir
        self.postgres = postgres
        self.database = postgres.create_database()
        self.ports = {"A": free_port(), "B": free_port()}
        self.relays = {}
        self.starts = 0
        for name in self.ports:
            self.start(name)
        self.nginx = Nginx(NGINX_CONF, upstreams=[self.ports["A"], self.ports["B"]]).start()
        self.clients = []

    def start(self, name) -> Relay:
        self.starts += 1
        workdir = self.workdir / f"{name}{self.starts}"
        workdir.mkdir()
        flags = dict(GENEROUS, database=self.database, port=self.ports[name], trusted_proxy="127.0.0.1")
        self.relays[name] = Relay(self.relay_bin, workdir, flags)
        return self.relays[name]

    def direct(self, name) -> httpx.Client:
        client = httpx.Client(base_url=self.relays[name].url, timeout=30)
        self.clients.append(client)
        return client

    def proxied(self) -> httpx.Client:
        client = httpx.Client(base_url=self.nginx.url, timeout=30, verify=False)
        self.clients.append(client)
        return client

    def room_url(self, room_id, query="") -> str:
        return f"{self.nginx.ws_base}/v1/rooms/{room_id}{query}"

    def group_url(self, group_id, query="") -> str:
        return f"{self.nginx.ws_base}/v1/groups/{group_id}{query}"

    def close(self):
        for client in self.clients:
            client.close()
        self.nginx.close()
        for relay in self.relays.values():
            relay.close()


@pytest.fixture(scope="module")
def postgres():
    server = services_or_skip(Postgres)
    yield server
    server.close()


@pytest.fixture
def cluster(relay_bin, tmp_path, postgres):
    services_or_skip(lambda: __import__("services").nginx_binary())
    c = Cluster(relay_bin, tmp_path, postgres)
    yield c
    c.close()


def tls_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def auth(token) -> dict:
    return {"Authorization": f"Bearer {token}"}


def open_invite(create_on: httpx.Client, accept_on: httpx.Client):
    invite_id = new_id()
    created = create_on.post(f"/v1/invites/{invite_id}")
    assert created.status_code == 201, created.text
    accepted = accept_on.post(f"/v1/invites/{invite_id}/accept")
    assert accepted.status_code == 200, accepted.text
    return invite_id, created.json()["token"], accepted.json()["token"]


def post(client, invite_id, token, body: bytes) -> httpx.Response:
    return client.post(f"/v1/invites/{invite_id}/messages", content=body, headers=auth(token))


def fetch(client, invite_id, token, after=0, wait=None) -> httpx.Response:
    params = {"after": after}
    if wait is not None:
        params["wait"] = wait
    return client.get(f"/v1/invites/{invite_id}/messages", params=params, headers=auth(token))


def bodies(response) -> list:
    assert response.status_code == 200, response.text
    return [unb64url(m["body"]) for m in response.json()["messages"]]


def held(client, invite_id, token, wait=25):
    """Starts a held fetch in a thread; returns its future."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    future = pool.submit(fetch, client, invite_id, token, 0, wait)
    pool.shutdown(wait=False)
    return future


def until_held() -> None:
    """Gives a held fetch the time to reach the relay and wait there (its
    result does not depend on it: a fetch that arrives after the post
    answers at once)."""
    time.sleep(0.3)


# ---------------------------------------------------------------------------
# nginx


def test_nginx_accepts_the_shipped_config(tmp_path):
    services_or_skip(lambda: __import__("services").nginx_binary())
    proxy = Nginx(NGINX_CONF, upstreams=[free_port(), free_port()])
    try:
        result = proxy.test()
        assert result.returncode == 0, result.stderr
        assert "syntax is ok" in result.stderr and "test is successful" in result.stderr, result.stderr
    finally:
        proxy.close()


def test_the_shipped_config_hashes_rooms_by_the_path_alone():
    text = NGINX_CONF.read_text()
    directives = [line.split("#")[0] for line in text.splitlines()]
    assert any("map $uri $itsme_relay_key" in line for line in directives)
    assert any("rooms|groups" in line for line in directives), "group rooms must be hashed as rooms are"
    assert any("hash $itsme_relay_key consistent" in line for line in directives)
    assert not any("$request_uri" in line for line in directives), "the room hash must not include the query"
    assert any(line.strip().startswith("zone ") for line in directives)


# ---------------------------------------------------------------------------
# Invites and records across instances


def test_an_invite_between_two_instances_wakes_each_held_fetch(cluster):
    a, b = cluster.direct("A"), cluster.direct("B")
    invite_id, inviter, invitee = open_invite(a, b)

    # The inviter waits on A; the invitee posts on B.
    waiting = held(a, invite_id, inviter)
    until_held()
    assert post(b, invite_id, invitee, b"from the invitee on B").status_code == 201
    assert bodies(waiting.result(40)) == [b"from the invitee on B"]

    # The invitee waits on B; the inviter posts on A.
    waiting = held(b, invite_id, invitee)
    until_held()
    assert post(a, invite_id, inviter, b"from the inviter on A").status_code == 201
    assert bodies(waiting.result(40)) == [b"from the inviter on A"]

    # Both sides' numbers come from one counter per side, whichever instance.
    assert post(a, invite_id, invitee, b"second, on A").json() == {"seq": 2}

    # An end on A answers a fetch held on B with 404.
    waiting = held(b, invite_id, invitee, wait=25)
    until_held()
    assert fetch(b, invite_id, invitee, after=1).status_code == 200
    assert a.delete(f"/v1/invites/{invite_id}", headers=auth(inviter)).status_code == 204
    ended = waiting.result(40)
    # Either it was held and woken by the end, or it arrived after: both 404.
    if ended.status_code == 200:
        assert bodies(ended) == [b"from the inviter on A"]
        ended = fetch(b, invite_id, invitee, after=1, wait=5)
    assert_error(ended, 404, "not-found")


def test_an_invite_through_nginx_completes(cluster):
    proxy = cluster.proxied()
    invite_id, inviter, invitee = open_invite(proxy, proxy)
    waiting = held(proxy, invite_id, invitee)
    until_held()
    assert post(proxy, invite_id, inviter, b"hello through nginx").status_code == 201
    assert bodies(waiting.result(40)) == [b"hello through nginx"]
    assert post(proxy, invite_id, invitee, b"answer").status_code == 201
    assert bodies(fetch(proxy, invite_id, inviter)) == [b"answer"]
    assert proxy.delete(f"/v1/invites/{invite_id}", headers=auth(invitee)).status_code == 204
    assert_error(fetch(proxy, invite_id, inviter), 404, "not-found")


def test_two_accepts_on_two_instances_bind_one_invitee(cluster):
    a, b = cluster.direct("A"), cluster.direct("B")
    for _ in range(5):
        invite_id = new_id()
        assert a.post(f"/v1/invites/{invite_id}").status_code == 201
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda c: c.post(f"/v1/invites/{invite_id}/accept"), [a, b]))
        assert sorted(r.status_code for r in answers) == [200, 409], [r.text for r in answers]


# ---------------------------------------------------------------------------
# Rooms through nginx


async def meet(cluster, room_id, second_query=""):
    """Both peers of `room_id` through nginx; a frame each way."""
    context = tls_context()
    first = await ws_connect(cluster.room_url(room_id), ssl=context)
    try:
        assert await recv_event(first) == {"type": "waiting"}
        second = await ws_connect(cluster.room_url(room_id, second_query), ssl=context)
        try:
            assert await recv_event(second) == {"type": "peer-joined"}
            assert await recv_event(first) == {"type": "peer-joined"}
            await first.send(b"\x01\x02 first")
            assert await recv_binary(second) == b"\x01\x02 first"
            await second.send(b"\x03\x04 second")
            assert await recv_binary(first) == b"\x03\x04 second"
        finally:
            await second.close()
    finally:
        await first.close()


def rooms_open(relay: Relay) -> float:
    from relaytest import metric, parse_metrics

    with httpx.Client(base_url=relay.url, timeout=5) as client:
        return metric(parse_metrics(client.get("/metrics").text), "itsme_relay_rooms_open")


def test_both_peers_of_each_room_meet_on_one_instance(cluster):
    # Twelve rooms over two instances: without the room hash, about half
    # would put their peers on different instances.
    async def main():
        for i in range(12):
            # The query is not part of the hash: it cannot move a peer.
            await meet(cluster, new_id(), second_query="?x=1" if i % 2 else "")

    run(main())


def test_rooms_are_spread_over_both_instances(cluster):
    async def main():
        context = tls_context()
        peers = []
        try:
            for _ in range(16):
                peer = await ws_connect(cluster.room_url(new_id()), ssl=context)
                assert await recv_event(peer) == {"type": "waiting"}
                peers.append(peer)
            return rooms_open(cluster.relays["A"]), rooms_open(cluster.relays["B"])
        finally:
            for peer in peers:
                await peer.close()

    on_a, on_b = run(main())
    assert on_a + on_b == 16
    assert on_a > 0 and on_b > 0, f"all 16 rooms on one instance: A {on_a}, B {on_b}"


def group_rooms_open(relay: Relay) -> float:
    from relaytest import metric, parse_metrics

    with httpx.Client(base_url=relay.url, timeout=5) as client:
        return metric(parse_metrics(client.get("/metrics").text), "itsme_relay_group_rooms_open")


def test_every_peer_of_each_group_room_meets_on_one_instance(cluster):
    # Sixteen group rooms of three peers over two instances (PROTOCOL.md
    # 15.9): without the hash, most would scatter their peers. The query is
    # not part of the hash: it cannot move a peer.
    async def main():
        context = tls_context()
        groups = []
        try:
            for i in range(16):
                group_id, peers = new_id(), []
                groups.append(peers)
                for slot in range(1, 4):
                    query = f"?peer={slot}" if i % 2 else ""
                    ws = await ws_connect(cluster.group_url(group_id, query), ssl=context)
                    peers.append(ws)
                    assert await recv_event(ws) == {"type": "joined", "slot": slot, "peers": list(range(1, slot))}
                    for other in peers[:-1]:
                        assert await recv_event(other) == {"type": "peer-joined", "slot": slot}
                await peers[2].send(b"to everyone")
                for ws in peers[:2]:
                    assert await recv_binary(ws) == b"\x00\x03to everyone"
            return group_rooms_open(cluster.relays["A"]), group_rooms_open(cluster.relays["B"])
        finally:
            for peers in groups:
                for ws in peers:
                    await ws.close()

    on_a, on_b = run(main())
    assert on_a + on_b == 16
    assert on_a > 0 and on_b > 0, f"all 16 group rooms on one instance: A {on_a}, B {on_b}"


# ---------------------------------------------------------------------------
# An instance dies


def test_after_an_instance_is_killed_nothing_is_lost_and_rooms_meet_on_the_other(cluster):
    proxy = cluster.proxied()
    invites = []
    for i in range(8):
        invite_id, inviter, invitee = open_invite(proxy, proxy)
        assert post(proxy, invite_id, inviter, f"message {i}".encode()).status_code == 201
        invites.append((invite_id, inviter, invitee, f"message {i}".encode()))
    records = {}
    for i in range(8):
        record_id = new_id()
        assert proxy.put(f"/v1/records/{record_id}", content=f"record {i}".encode()).status_code == 201
        records[record_id] = f"record {i}".encode()

    async def main():
        context = tls_context()
        room_id = new_id()
        # A peer waits in a room; find its instance, and kill that one.
        waiting = await ws_connect(cluster.room_url(room_id), ssl=context)
        assert await recv_event(waiting) == {"type": "waiting"}
        victim = "A" if rooms_open(cluster.relays["A"]) == 1 else "B"
        survivor = "B" if victim == "A" else "A"
        assert rooms_open(cluster.relays[victim]) == 1
        cluster.relays[victim].signal(signal.SIGKILL)
        cluster.relays[victim].wait(10)

        # The connection drops: no peer-left, no close frame from the relay.
        try:
            message = await asyncio.wait_for(waiting.recv(), 10)
            pytest.fail(f"a killed instance's room sent {message!r}")
        except ConnectionClosed as closed:
            assert closed.rcvd is None or closed.rcvd.code != 1000, closed

        # A new attempt on the same room meets on the survivor.
        await meet(cluster, room_id)
        return victim, survivor

    victim, survivor = run(main())

    # Every invite and record is there, through nginx and on the survivor.
    survivor_client = cluster.direct(survivor)
    for client in (proxy, survivor_client):
        for invite_id, inviter, invitee, body in invites:
            assert bodies(fetch(client, invite_id, invitee)) == [body]
        for record_id, body in records.items():
            response = client.get(f"/v1/records/{record_id}")
            assert response.status_code == 200 and response.content == body
    # New invites through nginx while one instance is down.
    invite_id, inviter, invitee = open_invite(proxy, proxy)
    assert post(proxy, invite_id, invitee, b"while one is down").status_code == 201
    assert bodies(fetch(proxy, invite_id, inviter)) == [b"while one is down"]

    # It comes back on its port: it serves the same data.
    back = cluster.start(victim)
    with httpx.Client(base_url=back.url, timeout=10) as client:
        for invite_id, inviter, invitee, body in invites:
            assert bodies(fetch(client, invite_id, invitee)) == [body]
    run(meet(cluster, new_id()))


# ---------------------------------------------------------------------------
# PostgreSQL restarts


def eventually_healthy(client: httpx.Client, timeout: float = 90) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        response = client.get("/health")
        if response.status_code == 200 or time.monotonic() > deadline:
            return response
        time.sleep(0.25)


def test_a_postgresql_restart_is_survived(cluster):
    a, b = cluster.direct("A"), cluster.direct("B")
    invite_id, inviter, invitee = open_invite(a, b)
    assert post(a, invite_id, inviter, b"before the restart").status_code == 201
    record_id = new_id()
    assert a.put(f"/v1/records/{record_id}", content=b"a record").status_code == 201

    cluster.postgres.stop("fast")
    try:
        # While it is down: clean 503s, never a hang or a crash (each after
        # the relay's 5 s deadline at most: sent together).
        requests = []
        for client in (a, b):
            requests += [
                lambda c=client: c.get("/health"),
                lambda c=client: fetch(c, invite_id, invitee),
                lambda c=client: c.post(f"/v1/invites/{new_id()}"),
                lambda c=client: c.get(f"/v1/records/{record_id}"),
            ]
        with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
            answers = list(pool.map(lambda request: request(), requests))
        for answer in answers:
            body = assert_error(answer, 503, "unavailable")
            assert answer.headers.get("retry-after"), body
        for relay in cluster.relays.values():
            assert relay.alive()
            # Counted, so that an alert can watch it.
            assert metric(relay.api().metrics(), "itsme_relay_rejections_total", reason="unavailable") >= 4
    finally:
        cluster.postgres.start()

    # Back without restarting the relays.
    for client in (a, b):
        assert eventually_healthy(client).status_code == 200
        assert bodies(fetch(client, invite_id, invitee)) == [b"before the restart"]
        assert client.get(f"/v1/records/{record_id}").content == b"a record"

    # LISTEN is back too: a fetch held on A is woken by a post on B. The
    # relays re-LISTEN within a second of the database's return; a post
    # made before would wake nobody, so the test waits for the feed first.
    deadline = time.monotonic() + 30
    while "invite notifications resumed" not in cluster.relays["A"].stderr_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    waiting = held(a, invite_id, inviter)
    until_held()
    assert post(b, invite_id, invitee, b"after the restart").status_code == 201
    assert bodies(waiting.result(40)) == [b"after the restart"]

    # The connection string's password never reached the logs.
    for relay in cluster.relays.values():
        assert cluster.postgres.password not in relay.stderr_text()

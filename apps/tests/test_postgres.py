"""The PostgreSQL backend as an operator meets it (PROTOCOL.md 15.8): the
connection string, its errors, the schema's migrations.

A real PostgreSQL server (services.py). Missing PostgreSQL skips these
tests, or fails them when ITSME_RELAY_REQUIRE_SERVICES=1.
"""

import concurrent.futures
import os
import subprocess

import pytest

from relaytest import GENEROUS, Relay, new_id
from services import Postgres, ServiceMissing, free_port


@pytest.fixture(scope="module")
def postgres():
    try:
        server = Postgres()
    except ServiceMissing as missing:
        if os.environ.get("ITSME_RELAY_REQUIRE_SERVICES") == "1":
            pytest.fail(str(missing), pytrace=False)
        pytest.skip(str(missing))
    yield server
    server.close()


def refused(relay_bin, database: str) -> subprocess.CompletedProcess:
    """Runs a relay that must refuse to start; returns its result."""
    result = subprocess.run(
        [str(relay_bin), "--host", "127.0.0.1", "--port", "0", "--database", database],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 1, f"exit {result.returncode}: {result.stdout} {result.stderr[-2000:]}"
    assert "listening" not in result.stdout
    return result


def last_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("itsme-relay: ")]
    assert lines, result.stderr[-2000:]
    return lines[-1]


def test_a_wrong_password_is_named_and_not_shown(relay_bin, postgres):
    secret = "Wr0ngPassw0rd-" + new_id()[:8]
    database = f"postgres://itsme:{secret}@127.0.0.1:{postgres.port}/postgres?sslmode=disable"
    result = refused(relay_bin, database)
    line = last_line(result)
    assert f"postgres://itsme@127.0.0.1:{postgres.port}/postgres" in line, line
    assert "password authentication failed" in line, line
    assert secret not in result.stderr + result.stdout


def test_a_database_that_is_not_there_is_named(relay_bin, postgres):
    port = free_port()
    database = f"postgres://itsme:{postgres.password}@127.0.0.1:{port}/postgres?sslmode=disable"
    result = refused(relay_bin, database)
    line = last_line(result)
    assert f"127.0.0.1:{port}" in line and "cannot open the database" in line, line
    assert postgres.password not in result.stderr + result.stdout


@pytest.mark.parametrize(
    "database, complaint",
    [
        ("postgres://itsme:pw@127.0.0.1:5432/db?sslmode=maybe", "sslmode"),
        ("postgres://itsme:pw@127.0.0.1:5432/db?colour=blue", "unknown parameter colour"),
        ("postgres://127.0.0.1:5432/db", "names no user"),
        ("postgres://itsme:pw@127.0.0.1:99999/db", "port"),
    ],
    ids=["sslmode", "parameter", "user", "port"],
)
def test_a_malformed_url_gets_one_clear_line(relay_bin, database, complaint):
    result = refused(relay_bin, database)
    line = last_line(result)
    assert "the database URL is not valid" in line and complaint in line, line
    assert ":pw@" not in line


def test_relays_starting_together_migrate_the_schema_once(relay_bin, postgres, tmp_path):
    database = postgres.create_database()

    def start(i):
        workdir = tmp_path / f"relay{i}"
        workdir.mkdir()
        return Relay(relay_bin, workdir, dict(GENEROUS, database=database))

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        relays = list(pool.map(start, range(3)))
    try:
        for relay in relays:
            relay.assert_serving()
        name = database.rsplit("/", 1)[1].split("?")[0]
        assert postgres.psql("SELECT version FROM relay_schema ORDER BY version", name).split() == ["1"]
        api = relays[0].api()
        invite = api.open_invite()
        assert api.post(invite.id, invite.inviter, b"shared").status_code == 201
        assert relays[2].api().messages(invite.id, invite.invitee) == [(1, b"shared")]
    finally:
        for relay in relays:
            relay.close()


def test_a_schema_newer_than_the_relay_is_refused(relay_bin, postgres):
    database = postgres.create_database()
    name = database.rsplit("/", 1)[1].split("?")[0]
    postgres.psql(
        "CREATE TABLE relay_schema(version integer PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now());"
        "INSERT INTO relay_schema(version) VALUES (1), (2), (99)", name)
    line = last_line(refused(relay_bin, database))
    assert "schema is version 99" in line and "newer" in line, line


def test_relays_sweeping_together_erase_each_expired_invite_once(relay_bin, postgres, tmp_path):
    # Every relay sweeps as it starts (and each minute): three sweeping one
    # database at once all succeed, and between them erase every expired
    # invite, each once.
    database = postgres.create_database()
    name = database.rsplit("/", 1)[1].split("?")[0]
    clock = tmp_path / "clock"
    clock.write_text("1800000000")
    first_dir = tmp_path / "first"
    first_dir.mkdir()
    first = Relay(relay_bin, first_dir, dict(GENEROUS, database=database, clock_file=clock))
    try:
        api = first.api()
        for _ in range(30):
            invite = api.open_invite()
            assert api.post(invite.id, invite.inviter, b"soon expired").status_code == 201
        live = api.open_invite(accept=False)
    finally:
        first.close()
    # Two days later, but the last invite made a day and a half later.
    postgres.psql(f"UPDATE invites SET expires = 1800000000 + 3 * 86400 WHERE id = '{live.id}'", name)
    clock.write_text(str(1800000000 + 2 * 86400))

    def start(i):
        workdir = tmp_path / f"sweeper{i}"
        workdir.mkdir()
        return Relay(relay_bin, workdir, dict(GENEROUS, database=database, clock_file=clock))

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        relays = list(pool.map(start, range(3)))
    try:
        for relay in relays:
            relay.assert_serving()
        assert postgres.psql("SELECT count(*) FROM invites", name).split() == ["1"]
        assert postgres.psql("SELECT count(*) FROM messages", name).split() == ["0"]
        erased = 0
        for relay in relays:
            for line in relay.stderr_text().splitlines():
                if "expired invites erased" in line:
                    erased += int(line.split("count=")[1].split()[0])
        assert erased == 30, f"the sweeps erased {erased} invites in all"
        accepted = relays[1].api().accept(live.id)
        assert accepted.status_code == 200, accepted.text
    finally:
        for relay in relays:
            relay.close()

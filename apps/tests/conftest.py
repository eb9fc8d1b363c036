"""Fixtures of the black-box tests of itsme-relay; helpers are in relaytest.py.

Every test starts a real relay process on 127.0.0.1 with a fresh database
(`relay(**flags)`) and stops it at teardown. The contract is
docs/PROTOCOL.md section 15.

The database is a SQLite file in the test's directory, unless
ITSME_RELAY_TEST_DATABASE says PostgreSQL: `local` starts a private
PostgreSQL server for the session (services.py), a `postgres://` URL uses
that server (its user must be allowed to CREATE DATABASE). Each relay then
gets a database of its own, and the tests about the SQLite file are
skipped.
"""

import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from relaytest import GENEROUS, Relay, relay_binary

TEST_DATABASE = os.environ.get("ITSME_RELAY_TEST_DATABASE", "").strip()

# Tests that read the SQLite file and its logs byte by byte, or check their
# modes: PostgreSQL keeps no file of the relay's (its deletion guarantee is
# PROTOCOL.md 15.8).
SQLITE_FILE_TESTS = {
    "test_database_files.py": "the modes of the SQLite file and its logs",
    "test_remote_exchange.py::test_the_relay_files_hold_only_opaque_messages_and_nothing_once_done":
        "the bytes of the SQLite file and its logs",
}


def pytest_configure(config):
    config.addinivalue_line("markers", "sqlite_file: reads the relay's SQLite file; skipped on PostgreSQL")


def pytest_collection_modifyitems(config, items):
    if not TEST_DATABASE:
        return
    for item in items:
        module = Path(str(item.fspath)).name
        reason = None
        if item.get_closest_marker("sqlite_file"):
            reason = "the relay's SQLite file"
        for key, why in SQLITE_FILE_TESTS.items():
            if key == module or key == f"{module}::{item.originalname}":
                reason = why
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"about {reason}; the relay runs on PostgreSQL"))


@pytest.fixture(scope="session")
def relay_bin() -> Path:
    binary = relay_binary()
    if not binary.exists():
        pytest.fail(
            f"relay binary {binary} not found: run `swift build --package-path apps` "
            f"(or set ITSME_RELAY_BIN)",
            pytrace=False,
        )
    return binary


class ExternalPostgres:
    """A PostgreSQL server given by URL: databases made with psql."""

    def __init__(self, url: str):
        from services import postgres_bindir

        self.admin = url
        self.psql = str(postgres_bindir() / "psql")

    def create_database(self) -> str:
        import secrets
        import subprocess

        name = "relay_" + secrets.token_hex(6)
        result = subprocess.run([self.psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", f"CREATE DATABASE {name}", self.admin],
                                capture_output=True, text=True)
        if result.returncode != 0:
            pytest.fail(f"cannot create a test database on ITSME_RELAY_TEST_DATABASE: {result.stderr.strip()}")
        return urlsplit(self.admin)._replace(path="/" + name).geturl()

    def close(self) -> None:
        pass


@pytest.fixture(scope="session")
def test_postgres():
    """The PostgreSQL server of ITSME_RELAY_TEST_DATABASE, or None for SQLite."""
    if not TEST_DATABASE:
        yield None
        return
    if TEST_DATABASE == "local":
        from services import Postgres

        server = Postgres()
    elif TEST_DATABASE.startswith(("postgres://", "postgresql://")):
        server = ExternalPostgres(TEST_DATABASE)
    else:
        pytest.fail("ITSME_RELAY_TEST_DATABASE is `local` or a postgres:// URL", pytrace=False)
    yield server
    server.close()


@pytest.fixture
def relay(relay_bin, tmp_path, test_postgres):
    """Factory: `relay(**flags)` starts a relay (flags as keyword arguments,
    underscores for dashes, None to drop a default) and stops it at teardown."""
    started: list = []

    def start(**flags) -> Relay:
        merged = dict(GENEROUS)
        merged.update(flags)
        if test_postgres is not None and merged.get("database") is None:
            merged["database"] = test_postgres.create_database()
        workdir = tmp_path / f"relay{len(started)}"
        workdir.mkdir()
        instance = Relay(relay_bin, workdir, merged)
        started.append(instance)
        return instance

    yield start
    for instance in started:
        instance.close()

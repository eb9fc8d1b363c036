"""Fixtures of the black-box tests of itsme-relay; helpers are in relaytest.py.

Every test starts a real relay process on 127.0.0.1 with a fresh database
(`relay(**flags)`) and stops it at teardown. The contract is
docs/PROTOCOL.md section 15.
"""

from pathlib import Path

import pytest

from relaytest import GENEROUS, Relay, relay_binary


@pytest.fixture(scope="session")
def relay_bin() -> Path:
    binary = relay_binary()
    if not binary.exists():
        pytest.fail(
            f"relay binary {binary} not found: run `swift build --package-path relay` "
            f"(or set ITSME_RELAY_BIN)",
            pytrace=False,
        )
    return binary


@pytest.fixture
def relay(relay_bin, tmp_path):
    """Factory: `relay(**flags)` starts a relay (flags as keyword arguments,
    underscores for dashes, None to drop a default) and stops it at teardown."""
    started: list = []

    def start(**flags) -> Relay:
        merged = dict(GENEROUS)
        merged.update(flags)
        workdir = tmp_path / f"relay{len(started)}"
        workdir.mkdir()
        instance = Relay(relay_bin, workdir, merged)
        started.append(instance)
        return instance

    yield start
    for instance in started:
        instance.close()

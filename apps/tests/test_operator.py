"""itsme-relay as an operator runs it (docs/OPERATIONS.md): every default in
--help, a fixed port, loopback by default, the database in the state
directory (never the current directory), a warning when listening beyond
loopback without TLS, SIGHUP that never ends it, and a PostgreSQL URL
whose password never shows."""

import ctypes
import os
import re
import shutil
import signal
import stat
import subprocess

import httpx
import pytest

from operatortest import Launched, run_relay
from relaytest import new_id, recv_binary, recv_event, relay_binary, run, ws_connect


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def open_umask():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def launched():
    started = []

    def start(workdir, args, env=None, **kwargs):
        relay = Launched(workdir, args, env, **kwargs)
        started.append(relay)
        return relay

    yield start
    for relay in started:
        relay.stop()


def use(url: str) -> None:
    """A record, an invite and a deletion: the database and its logs are written."""
    with httpx.Client(base_url=url, timeout=10) as client:
        assert client.put(f"/v1/records/{new_id()}", content=b"record").status_code == 201
        invite = new_id()
        token = client.post(f"/v1/invites/{invite}").json()["token"]
        headers = {"Authorization": f"Bearer {token}"}
        assert client.post(f"/v1/invites/{invite}/messages", content=b"m", headers=headers).status_code == 201
        assert client.delete(f"/v1/invites/{invite}", headers=headers).status_code == 204


# ---------------------------------------------------------------------------
# --help


def test_help_shows_every_flag_with_its_default():
    result = run_relay(["--help"])
    assert result.code == 0, result.stderr
    text = result.stdout
    # Each option's help, joined across its wrapped lines.
    options = {}
    current = None
    for line in text.splitlines():
        match = re.match(r"^\s+(--[a-z-]+)", line)
        if match:
            current = match.group(1)
            options[current] = line
        elif current and line.startswith("      "):
            options[current] += " " + line.strip()
        else:
            current = None
    flags = set(options) - {"--help", "--version"}
    assert len(flags) >= 20, f"too few flags found in --help: {sorted(flags)}"
    missing = sorted(flag for flag in flags if "default:" not in re.sub(r"\s+", " ", options[flag]))
    assert not missing, f"flags whose default --help does not show: {missing}"
    flat = re.sub(r"\s+", " ", text)
    assert "(default: 4863)" in flat
    assert "(default: 127.0.0.1)" in flat
    assert "$STATE_DIRECTORY" in flat and "/var/lib/itsme-relay" in flat
    assert "SIGHUP" in flat


# ---------------------------------------------------------------------------
# The port and the host


def test_without_flags_it_listens_on_loopback_port_4863(launched, tmp_path):
    relay = launched(tmp_path, ["--database", ":memory:"])
    try:
        url = relay.wait_listening()
    except AssertionError:
        if "Address already in use" in relay.stderr() or "in use" in relay.stderr():
            pytest.skip("port 4863 is taken on this machine")
        raise
    assert url == "http://127.0.0.1:4863"
    assert httpx.get(url + "/health", timeout=10).status_code == 200
    assert "without TLS" not in relay.stderr()


def test_listening_beyond_loopback_without_tls_is_warned_about(launched, tmp_path):
    relay = launched(tmp_path, ["--host", "0.0.0.0", "--port", "0", "--database", ":memory:"])
    relay.wait_listening()
    assert httpx.get(f"http://127.0.0.1:{relay.port}/health", timeout=10).status_code == 200
    warnings = [line for line in relay.stderr().splitlines() if "without TLS" in line]
    assert len(warnings) == 1, relay.stderr()
    assert "warning" in warnings[0].lower() and "0.0.0.0" in warnings[0]


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost"])
def test_loopback_without_tls_is_not_warned_about(launched, tmp_path, host):
    relay = launched(tmp_path, ["--host", host, "--port", "0", "--database", ":memory:"])
    relay.wait_listening()
    assert "without TLS" not in relay.stderr()


# ---------------------------------------------------------------------------
# The database


def test_the_database_goes_into_the_first_state_directory(launched, tmp_path, open_umask):
    first, second = tmp_path / "state", tmp_path / "other"
    first.mkdir(mode=0o755)
    os.chmod(first, 0o755)
    second.mkdir()
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    relay = launched(tmp_path, ["--port", "0"], env={"STATE_DIRECTORY": f"{first}:{second}"}, cwd=workdir)
    relay.wait_listening()
    use(relay.url)
    database = first / "itsme-relay.db"
    assert database.exists(), f"no database in $STATE_DIRECTORY: {os.listdir(first)}"
    assert mode(first) == 0o700, f"the state directory has mode {mode(first):o}"
    for path in (database, first / "itsme-relay.db-wal", first / "itsme-relay.db-shm"):
        assert path.exists(), f"{path.name} was not created"
        assert mode(path) == 0o600, f"{path.name} has mode {mode(path):o}"
    assert os.listdir(second) == [], "the second state directory was written to"
    assert not list(workdir.iterdir())


def test_a_missing_state_directory_is_created_0700(launched, tmp_path, open_umask):
    state = tmp_path / "new-state"
    relay = launched(tmp_path, ["--port", "0"], env={"STATE_DIRECTORY": str(state)})
    relay.wait_listening()
    use(relay.url)
    assert mode(state) == 0o700
    assert mode(state / "itsme-relay.db") == 0o600


def test_the_database_flag_wins_over_the_state_directory(launched, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    database = tmp_path / "given.sqlite"
    relay = launched(tmp_path, ["--port", "0", "--database", database], env={"STATE_DIRECTORY": str(state)})
    relay.wait_listening()
    use(relay.url)
    assert database.exists()
    assert not (state / "itsme-relay.db").exists()


def _nobody_can_run_the_relay() -> bool:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return False
    check = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(relay_binary()), "--version"],
        capture_output=True,
    )
    return check.returncode == 0 or b"Permission denied" not in check.stderr


def test_without_a_place_for_the_database_it_refuses_naming_the_flag(tmp_path):
    """As a user who cannot write /var/lib, with no $STATE_DIRECTORY."""
    if os.geteuid() == 0:
        if not _nobody_can_run_the_relay():
            pytest.skip("the relay binary cannot be run as nobody here")
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(relay_binary()), "--port", "0"]
    elif os.access("/var/lib", os.W_OK) or os.path.isdir("/var/lib/itsme-relay"):
        pytest.skip("/var/lib can be written by this user")
    else:
        command = [str(relay_binary()), "--port", "0"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITSME_RELAY_") and k != "STATE_DIRECTORY"}
    done = subprocess.run(command, capture_output=True, env=env, cwd=tmp_path, timeout=30)
    stderr = done.stderr.decode("utf-8", "replace")
    assert done.returncode != 0, "the relay started without a place for its database"
    assert "--database" in stderr and "/var/lib/itsme-relay" in stderr and "STATE_DIRECTORY" in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, f"not one line: {stderr!r}"
    assert list(tmp_path.iterdir()) == [], "a database was written into the current directory"


def test_a_postgres_url_never_shows_its_password(launched, tmp_path):
    secret = "S3cret-" + new_id()[:12]
    # Nothing listens on port 1: the relay fails (or waits for the database).
    relay = launched(tmp_path, ["--port", "0", "--database", f"postgres://itsme:{secret}@127.0.0.1:1/itsme"])
    try:
        relay.proc.wait(15)
    except subprocess.TimeoutExpired:
        relay.signal(signal.SIGTERM)
        relay.proc.wait(15)
    output = relay.stderr() + "".join(relay.lines)
    assert secret not in output, "the database password was printed"
    assert not any(p.name.startswith("postgres") for p in tmp_path.iterdir()), "the URL was taken as a file name"


# ---------------------------------------------------------------------------
# Signals and hardening


def test_sighup_without_tls_does_not_stop_the_relay(launched, tmp_path):
    relay = launched(tmp_path, ["--port", "0", "--database", ":memory:"])
    relay.wait_listening()
    relay.signal(signal.SIGHUP)
    assert relay.eventually_in_stderr("SIGHUP"), relay.stderr()
    assert relay.alive(), f"SIGHUP ended the relay: {relay.stderr()[-2000:]}"
    assert httpx.get(relay.url + "/health", timeout=10).status_code == 200


PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 1


def _refuse_writable_executable_memory():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0:
        os._exit(97)


def test_the_relay_runs_without_writable_executable_memory(launched, tmp_path):
    """What MemoryDenyWriteExecute=yes in the systemd unit asks: the kernel's
    PR_SET_MDWE refuses any mapping that is writable and executable, or
    made executable later; the relay serves HTTP and rooms under it."""
    probe = subprocess.run(["true"], preexec_fn=_refuse_writable_executable_memory)
    if probe.returncode == 97:
        pytest.skip("this kernel has no PR_SET_MDWE (Linux 6.3 or later)")
    relay = launched(tmp_path, ["--port", "0", "--database", str(tmp_path / "db.sqlite")],
                     preexec_fn=_refuse_writable_executable_memory)
    relay.wait_listening()
    use(relay.url)

    async def room():
        url = f"ws://127.0.0.1:{relay.port}/v1/rooms/{new_id()}"
        async with ws_connect(url) as first:
            assert await recv_event(first) == {"type": "waiting"}
            async with ws_connect(url) as second:
                assert await recv_event(second) == {"type": "peer-joined"}
                assert await recv_event(first) == {"type": "peer-joined"}
                await first.send(b"\x01frame")
                assert await recv_binary(second) == b"\x01frame"

    run(room())
    assert relay.alive()


# ---------------------------------------------------------------------------
# Backups (docs/OPERATIONS.md)


def test_vacuum_into_backs_up_a_running_relay_without_deleted_data(launched, tmp_path):
    import sqlite3

    database = tmp_path / "live.db"
    relay = launched(tmp_path, ["--port", "0", "--database", database])
    relay.wait_listening()
    kept_id, gone_id = new_id(), new_id()
    kept, gone = b"KEPT-" + os.urandom(16), b"GONE-" + os.urandom(16)
    with httpx.Client(base_url=relay.url, timeout=10) as client:
        assert client.put(f"/v1/records/{kept_id}", content=kept).status_code == 201
        token = client.put(f"/v1/records/{gone_id}", content=gone).json()["delete_token"]
        assert client.delete(f"/v1/records/{gone_id}", headers={"Authorization": f"Bearer {token}"}).status_code == 204

        backup = tmp_path / "backup.db"
        connection = sqlite3.connect(database)
        try:
            connection.execute("VACUUM INTO ?", (str(backup),))
        finally:
            connection.close()
        # The relay goes on serving while and after the backup is made.
        assert client.get(f"/v1/records/{kept_id}").content == kept
    data = backup.read_bytes()
    assert kept in data
    assert gone not in data, "the backup holds a deleted record"

    relay.stop()
    restored = launched(tmp_path, ["--port", "0", "--database", backup])
    restored.wait_listening()
    with httpx.Client(base_url=restored.url, timeout=10) as client:
        assert client.get(f"/v1/records/{kept_id}").content == kept
        assert client.get(f"/v1/records/{gone_id}").status_code == 404

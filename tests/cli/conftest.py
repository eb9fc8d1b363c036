"""Fixtures of the black-box tests of the `itsme` command-line client.

The tests drive the real binaries as a person at a terminal would: pexpect
runs `itsme` in a pseudo-terminal and types at its prompts, a real
`itsme-relay` process (one per test session, in-memory database) carries the
exchanges at a distance, and `--test-clock FILE` stands in for the time where
a test must control it (voice verification windows, PIN lockouts).

Binaries: $ITSME_CLI_BIN and $ITSME_RELAY_BIN, by default the debug builds
of `swift build --package-path apps` under apps/.build/debug.

Helpers are given to the tests as fixtures (no test imports this module):
`relay_url`, `people` (a factory of `Person`), `clock` (a `Clock` file),
`run` (a non-interactive run with separate stdout and stderr).
"""

from __future__ import annotations

import io
import os
import re
import select
import shutil
import subprocess
import time
from pathlib import Path

import pexpect
import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI_BIN = Path(os.environ.get("ITSME_CLI_BIN") or ROOT / "apps" / ".build" / "debug" / "itsme-cli")
RELAY_BIN = Path(os.environ.get("ITSME_RELAY_BIN") or ROOT / "apps" / ".build" / "debug" / "itsme-relay")

# Debug Swift binaries can be slow to start on a busy machine.
TIMEOUT = 30
DEFAULT_PIN = "482916"

# The relay is shared by all tests: limits high enough for one address
# running the whole suite.
RELAY_FLAGS = [
    "--max-connections", "4096",
    "--max-connections-per-address", "4096",
    "--lookup-rate", "100000",
    "--create-rate", "100000",
    "--group-join-rate", "100000",
]

LISTENING = re.compile(r"itsme-relay listening on (https?://\S+)")


def _require(binary: Path, what: str) -> None:
    if not binary.exists():
        pytest.fail(
            f"{what} {binary} not found: run `swift build --package-path apps` (or set the environment variable)",
            pytrace=False,
        )


def read_until(stream, pattern: str, timeout: float = TIMEOUT) -> str:
    """Reads a pipe until `pattern` appears (or its end, or `timeout`
    seconds); returns all that was read."""
    deadline = time.monotonic() + timeout
    data = b""
    fd = stream.fileno()
    while not re.search(pattern, data.decode("utf-8", "replace")):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace")


def read_line(stream, timeout: float) -> str:
    """The first line of a pipe, or what arrived before `timeout` seconds."""
    return read_until(stream, "\n", timeout)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def base_env(home: Path) -> dict:
    """The environment of every `itsme` run: no data directory, relay or
    locale from the machine running the tests."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITSME_") and k != "XDG_DATA_HOME"}
    env["HOME"] = str(home)
    env["TERM"] = "dumb"
    env["LC_ALL"] = "C.UTF-8"
    # No unlock agent outlives a test, except in the tests about it
    # (test_cli_unlock.py), which take this away.
    env["ITSME_NO_CACHE"] = "1"
    return env


@pytest.fixture(scope="session")
def cli_bin() -> Path:
    _require(CLI_BIN, "CLI binary")
    return CLI_BIN


@pytest.fixture(scope="session")
def relay_bin() -> Path:
    _require(RELAY_BIN, "relay binary")
    return RELAY_BIN


@pytest.fixture(scope="session")
def relay_url(relay_bin, tmp_path_factory) -> str:
    """A real relay on 127.0.0.1 (a free port, in-memory database) for the
    whole session; its URL is read from the line it prints."""
    log = tmp_path_factory.mktemp("relay") / "relay.log"
    with open(log, "wb") as errors:
        process = subprocess.Popen(
            [str(relay_bin), "--host", "127.0.0.1", "--port", "0", "--database", ":memory:", *RELAY_FLAGS],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors,
        )
    try:
        line = read_line(process.stdout, TIMEOUT)
        match = LISTENING.search(line)
        if not match:
            stop(process)
            pytest.fail(f"the relay printed {line!r}, not its listening line; log: {log.read_text()[-2000:]}")
        yield match.group(1)
    finally:
        stop(process)


class Clock:
    """A `--test-clock` file: the current Unix time as an integer."""

    def __init__(self, path: Path, start: int):
        self.path = path
        self.set(start)

    def get(self) -> int:
        return int(self.path.read_text().strip())

    def set(self, value: int) -> None:
        # Atomic: a reader never sees a half-written number (the CLI falls
        # back to the real clock on a file it cannot parse).
        temporary = self.path.with_name(self.path.name + ".tmp")
        temporary.write_text(f"{int(value)}\n")
        os.replace(temporary, self.path)

    def advance(self, seconds: int) -> int:
        self.set(self.get() + seconds)
        return self.get()

    def __str__(self) -> str:
        return str(self.path)


@pytest.fixture
def clocks(tmp_path):
    """Factory: `clocks(start=None)` is a new clock file (at the real time
    unless `start` is given)."""
    made: list[Clock] = []

    def make(start: int | None = None) -> Clock:
        clock = Clock(tmp_path / f"clock{len(made)}", int(time.time()) if start is None else start)
        made.append(clock)
        return clock

    return make


@pytest.fixture
def clock(clocks) -> Clock:
    """A clock file starting at the real time."""
    return clocks()


class Terminal:
    """One `itsme` run in a pseudo-terminal, with its whole transcript
    (stdout and stderr, as a person sees them) for failure messages."""

    def __init__(self, argv: list[str], env: dict, cwd: Path, label: str):
        self.label = label
        self.argv = argv
        self.log = io.StringIO()
        self.child = pexpect.spawn(
            argv[0], argv[1:], env=env, cwd=str(cwd), encoding="utf-8", codec_errors="replace",
            timeout=TIMEOUT, dimensions=(50, 250), echo=True,
        )
        self.child.logfile_read = self.log
        self.exit: int | None = None

    @property
    def transcript(self) -> str:
        return self.log.getvalue()

    def _fail(self, what: str, pattern) -> None:
        raise AssertionError(
            f"[{self.label}] {what} while waiting for {pattern!r}\n"
            f"command: {' '.join(self.argv)}\n--- transcript ---\n{self.transcript}\n--- end ---"
        )

    def expect(self, pattern, timeout: float = TIMEOUT):
        """Waits for `pattern` (a regex, or a list: returns the index);
        returns the match (or index)."""
        try:
            index = self.child.expect(pattern, timeout=timeout)
        except pexpect.TIMEOUT:
            self._fail("timed out", pattern)
        except pexpect.EOF:
            self._fail("the program ended", pattern)
        return index if isinstance(pattern, list) else self.child.match

    def expect_exact(self, text: str, timeout: float = TIMEOUT):
        try:
            self.child.expect_exact(text, timeout=timeout)
        except pexpect.TIMEOUT:
            self._fail("timed out", text)
        except pexpect.EOF:
            self._fail("the program ended", text)

    def sendline(self, text: str = "") -> None:
        self.child.sendline(text)

    def sendeof(self) -> None:
        self.child.sendeof()

    def finish(self, timeout: float = TIMEOUT) -> int:
        """Waits for the program to end; returns its exit code."""
        try:
            self.child.expect(pexpect.EOF, timeout=timeout)
        except pexpect.TIMEOUT:
            self._fail("timed out", "the end of the program")
        self.child.close()
        if self.child.signalstatus is not None:
            raise AssertionError(
                f"[{self.label}] killed by signal {self.child.signalstatus}\n{self.transcript}"
            )
        self.exit = self.child.exitstatus
        return self.exit

    def kill(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)


class Person:
    """One person's data directory, PIN (and its file) and the commands
    they run. Global options go after the subcommand (as ArgumentParser
    wants them)."""

    def __init__(self, name: str, root: Path, env: dict, started: list, pin: str = DEFAULT_PIN):
        self.name = name
        self.root = root
        self.dir = root / name.lower()
        self.pin = pin
        self.pin_file = root / f"{name.lower()}.pin"
        self.pin_file.write_text(pin + "\n")
        self.env = env
        self._started = started

    def argv(self, args, pin_file: bool = True, data_dir: bool = True) -> list[str]:
        argv = [str(CLI_BIN), *map(str, args)]
        if data_dir:
            argv += ["--data-dir", str(self.dir)]
        if pin_file:
            argv += ["--pin-file", str(self.pin_file)]
        return argv

    def spawn(self, *args, pin_file: bool = True) -> Terminal:
        """Runs a command in a pseudo-terminal (pexpect)."""
        terminal = Terminal(self.argv(args, pin_file), self.env, self.root, f"{self.name}: {args[0]}")
        self._started.append(terminal)
        return terminal

    def run(self, *args, pin_file: bool = True, input: str | None = None, timeout: float = TIMEOUT, pass_fds=()):
        """Runs a command with pipes (no terminal); stdout and stderr apart.
        Standard input is `input`, or closed (empty). `pass_fds` are file
        descriptors the command inherits (for the `--...-fd N` options)."""
        return subprocess.run(
            self.argv(args, pin_file), env=self.env, cwd=self.root, input=input if input is not None else "",
            capture_output=True, text=True, timeout=timeout, pass_fds=pass_fds,
        )

    def ok(self, *args, pin_file: bool = True) -> str:
        """Runs a command that must succeed; returns its stdout."""
        result = self.run(*args, pin_file=pin_file)
        assert result.returncode == 0, (
            f"{self.name}: itsme {' '.join(map(str, args))} exited {result.returncode}\n"
            f"stdout: {result.stdout}\nstderr: {result.stderr}"
        )
        return result.stdout

    def json(self, *args, pin_file: bool = True):
        import json

        return json.loads(self.ok(*args, "--json", pin_file=pin_file))

    def init(self) -> dict:
        return self.json("init", "--name", self.name)


@pytest.fixture
def env(tmp_path) -> dict:
    home = tmp_path / "home"
    home.mkdir()
    return base_env(home)


@pytest.fixture
def people(cli_bin, tmp_path, env):
    """Factory: `people("Alice", init=True)` is a Person with a data
    directory under tmp_path (created with `itsme init` when `init`)."""
    started: list[Terminal] = []

    def make(name: str, init: bool = False, pin: str = DEFAULT_PIN) -> Person:
        person = Person(name, tmp_path, env, started, pin)
        if init:
            person.init()
        return person

    yield make
    for terminal in started:
        terminal.kill()


@pytest.fixture
def run(cli_bin, tmp_path, env):
    """`run(*args)`: itsme with pipes, no data directory added."""

    def go(*args, stdin=subprocess.DEVNULL, timeout: float = TIMEOUT):
        return subprocess.run(
            [str(cli_bin), *map(str, args)], env=env, cwd=tmp_path, stdin=stdin, capture_output=True, text=True,
            timeout=timeout,
        )

    return go


@pytest.fixture(scope="session")
def pair_made_once(cli_bin, tmp_path_factory) -> Path:
    """Alice and Bob as `pair` gives them, made once per test process (eight
    commands, each opening a PIN-sealed store: about 5 s); `pair` copies
    their data directories."""
    root = tmp_path_factory.mktemp("pair")
    home = root / "home"
    home.mkdir()
    env = base_env(home)
    alice = Person("Alice", root, env, [])
    bob = Person("Bob", root, env, [])
    alice.init()
    bob.init()
    payload_a = alice.json("qr", "show")["payload"]
    payload_b = bob.json("qr", "show")["payload"]
    sas_a = alice.json("qr", "scan", payload_b)["sas"]
    sas_b = bob.json("qr", "scan", payload_a)["sas"]
    assert sas_a == sas_b
    alice.ok("sas", "confirm")
    bob.ok("sas", "confirm")
    return root


@pytest.fixture
def pair(people, pair_made_once):
    """Alice and Bob, each with an identity, who added each other by QR
    code (`qr show --json`, `qr scan PAYLOAD`, `sas confirm`, PIN files);
    each test has its own copy of them."""
    alice = people("Alice")
    bob = people("Bob")
    for person in (alice, bob):
        shutil.copytree(pair_made_once / person.dir.name, person.dir, symlinks=True)
        # The store's mark is kept per path (docs/STORAGE.md): the first
        # open at the new path sets it, as after `sas confirm` there.
        person.ok("contacts", "list")
    return alice, bob


@pytest.fixture
def server(env, tmp_path):
    """Factory: `server(argv)` starts a long-running process with pipes and
    returns it and the first line it prints (within TIMEOUT); it is stopped
    (SIGTERM, then SIGKILL) at teardown."""
    started: list[subprocess.Popen] = []

    def start(argv):
        process = subprocess.Popen(
            [str(a) for a in argv], env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        started.append(process)
        return process, read_line(process.stdout, TIMEOUT)

    yield start
    for process in started:
        stop(process)

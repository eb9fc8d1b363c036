"""The unlock window: the PIN once per sitting at one terminal, through an
agent process that runs later commands of the same terminal session
(docs/CLI.md, "The unlock window").

Every test here runs with a runtime directory of its own (the agent's
socket lives there) and without ITSME_NO_CACHE, which every other test
sets; agents left at the end are locked and then killed. A window belongs
to one terminal session, so the commands of a test run one after another
in a shell in a pseudo-terminal (`Shell`), as a person types them; another
`Shell` is another terminal.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import socket
import stat
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import pexpect
import pytest

END = re.compile(r"__END_(\d+)__")


class Shell:
    """A terminal session: /bin/sh in a pseudo-terminal of its own (pexpect
    makes it a session leader with that terminal as its controlling
    terminal), running commands one after another."""

    def __init__(self, env: dict, cwd: Path):
        self.log = io.StringIO()
        self.child = pexpect.spawn(
            "/bin/sh", [], env=dict(env, PS1="$ "), cwd=str(cwd), encoding="utf-8", codec_errors="replace",
            timeout=60, dimensions=(50, 250), echo=True,
        )
        self.child.logfile_read = self.log
        self.child.expect_exact("$ ")

    def start(self, command: str) -> int:
        """Types `command` (a shell line) and a marker that prints its exit
        code; returns where its transcript starts."""
        mark = len(self.log.getvalue())
        self.child.sendline(f"{command}; echo __END_$?__")
        return mark

    def finish(self, mark: int, timeout: float = 60) -> tuple[str, int]:
        self.child.expect(END, timeout=timeout)
        code = int(self.child.match.group(1))
        self.child.expect_exact("$ ")
        return self.log.getvalue()[mark:], code

    def close(self) -> None:
        if self.child.isalive():
            self.child.sendline("exit")
            try:
                self.child.expect(pexpect.EOF, timeout=10)
            except (pexpect.TIMEOUT, pexpect.EOF):
                pass
        self.child.close(force=True)


def command_line(person, args, prefix: str = "") -> str:
    return (prefix + " " if prefix else "") + shlex.join(person.argv(args, pin_file=False))


@pytest.fixture
def runtime(env):
    """The agent's runtime directory (short: a socket path has at most 107
    bytes), set in `env`, with ITSME_NO_CACHE taken away."""
    directory = Path(tempfile.mkdtemp(prefix="itr", dir="/tmp"))
    os.chmod(directory, 0o700)
    env["XDG_RUNTIME_DIR"] = str(directory)
    env.pop("ITSME_NO_CACHE", None)
    yield directory
    subprocess.run(["rm", "-rf", str(directory)], check=False)


SHELLS: list[Shell] = []


@pytest.fixture
def agents(runtime, cli_bin, env, tmp_path):
    """Ends every shell and agent of the test: the shells exit, `itsme lock
    --all`, then a kill of any agent process serving a directory under
    tmp_path."""
    yield
    while SHELLS:
        SHELLS.pop().close()
    subprocess.run([str(cli_bin), "lock", "--all"], env=env, cwd=tmp_path, capture_output=True, timeout=60)
    for pid in _agent_pids(tmp_path):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


def new_shell(person) -> Shell:
    shell = Shell(person.env, person.root)
    SHELLS.append(shell)
    return shell


def shell_of(person) -> Shell:
    """The person's terminal for this test (made at first use)."""
    if getattr(person, "_unlock_shell", None) is None or person._unlock_shell not in SHELLS:
        person._unlock_shell = new_shell(person)
    return person._unlock_shell


def _agent_pids(under: Path) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(argv) >= 3 and argv[1] == b"__unlock-agent" and argv[2].startswith(str(under).encode()):
            pids.append(int(entry.name))
    return pids


def at_terminal(person, *args, answers=None, timeout=60, shell=None, prefix=""):
    """Runs `itsme ARGS` at the person's terminal (or `shell`) without a PIN
    file, typing the PIN (and, from `answers`, the answer to any other
    prompt: a regex to its reply); returns (what it asked, transcript,
    exit code)."""
    answers = answers or {}
    shell = shell or shell_of(person)
    mark = shell.start(command_line(person, args, prefix))
    patterns = ["PIN: ", r"Passphrase of [^\n]*: ", *answers.keys()]
    asked = []
    while True:
        index = shell.child.expect([*patterns, END], timeout=timeout)
        if index == len(patterns):
            code = int(shell.child.match.group(1))
            shell.child.expect_exact("$ ")
            break
        if index == 0:
            asked.append("pin")
            shell.child.sendline(person.pin)
        elif index == 1:
            asked.append("passphrase")
            shell.child.sendline(person.passphrase)
        else:
            asked.append(list(answers.keys())[index - 2])
            shell.child.sendline(list(answers.values())[index - 2])
    return asked, shell.log.getvalue()[mark:], code


def json_at_terminal(person, *args, shell=None):
    asked, transcript, code = at_terminal(person, *args, "--json", shell=shell)
    assert code == 0, transcript
    output = transcript[transcript.index("__END_$?__") :]
    return json.JSONDecoder().raw_decode(output[output.index("{") :])[0]


def _socket_directories(base: Path) -> list[Path]:
    return sorted(p for p in base.glob("itsme-*") if p.is_dir())


def _agent_sockets(base: Path) -> list[Path]:
    return [d / "agent.sock" for d in _socket_directories(base) if (d / "agent.sock").exists()]


def test_pin_once_across_five_commands_and_again_after_lock(pair, runtime, agents):
    alice, bob = pair
    commands = [
        ("contacts", "list"),
        ("contacts", "show", "Bob"),
        ("whoami",),
        ("device-change-code", "Bob"),
        ("contacts", "list", "--json"),
    ]
    asked_by = []
    for command in commands:
        asked, transcript, code = at_terminal(alice, *command)
        assert code == 0, transcript
        asked_by.append(asked)
    assert asked_by == [["pin"], [], [], [], []], asked_by
    # The commands inside the window did their work (output through the agent).
    asked, transcript, code = at_terminal(alice, "contacts", "show", "Bob")
    assert asked == [] and "Bob" in transcript and code == 0, transcript

    result = alice.run("lock", pin_file=False)
    assert result.returncode == 0 and "Locked" in result.stdout, result
    asked, transcript, code = at_terminal(alice, "contacts", "list")
    assert asked == ["pin"] and code == 0, transcript
    asked, transcript, code = at_terminal(alice, "contacts", "list")
    assert asked == [] and code == 0, transcript
    # `lock` when nothing is unlocked says so.
    alice.ok("lock", pin_file=False)
    result = alice.run("lock", pin_file=False)
    assert "Nothing to lock" in result.stdout, result


def test_exit_codes_and_errors_come_back_from_the_agent(pair, runtime, agents):
    alice, _ = pair
    at_terminal(alice, "contacts", "list")
    asked, transcript, code = at_terminal(alice, "contacts", "show", "Nobody")
    assert asked == [] and code == 2 and 'no contact "Nobody"' in transcript, transcript


def test_pin_asked_again_after_the_idle_time(pair, runtime, agents):
    alice, _ = pair
    alice.ok("unlock-time", "5s", "1h", pin_file=False)
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    assert at_terminal(alice, "contacts", "list")[0] == []
    time.sleep(7)
    asked, transcript, _ = at_terminal(alice, "contacts", "list")
    assert asked == ["pin"], transcript


def test_pin_asked_again_after_the_longest_time_even_when_busy(pair, runtime, agents):
    alice, _ = pair
    alice.ok("unlock-time", "5s", "8s", pin_file=False)
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    unlocked_at = time.monotonic()
    asked_before = []
    while time.monotonic() - unlocked_at < 6:
        started = time.monotonic() - unlocked_at
        asked_before.append((round(started, 1), at_terminal(alice, "contacts", "list")[0]))
        time.sleep(0.5)
    # Never idle 5 s, so only the longest time can end it.
    assert all(asked == [] for _, asked in asked_before), asked_before
    time.sleep(max(0.0, 9 - (time.monotonic() - unlocked_at)))
    asked, transcript, _ = at_terminal(alice, "contacts", "list")
    assert asked == ["pin"], transcript


def test_the_agent_refuses_another_users_connection(pair, runtime, agents):
    if os.geteuid() != 0:
        pytest.skip("connecting as another user needs root")
    alice, _ = pair
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    _lock_files(alice)
    sockets = _agent_sockets(runtime)
    assert len(sockets) == 1, sockets
    path = sockets[0]
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    # Past the directory's and the socket's modes (as root could open
    # them up): the agent itself checks who connects.
    os.chmod(runtime, 0o755)
    os.chmod(path.parent, 0o755)
    os.chmod(path, 0o777)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connection.settimeout(20)
            connection.connect(str(path))
            received = b""
            while True:
                chunk = connection.recv(65536)
                if not chunk:
                    break
                received += chunk
            os.write(write_end, received)
        finally:
            os._exit(0)
    os.close(write_end)
    received = b""
    while True:
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        received += chunk
    os.waitpid(child, 0)
    (length,) = struct.unpack(">I", received[:4])
    reply = json.loads(received[4 : 4 + length])
    assert "refused" in reply and "fingerprint" not in reply, reply
    assert len(received) == 4 + length
    # A client does not use an agent whose directory others may enter...
    asked, transcript, code = at_terminal(alice, "contacts", "list")
    assert asked == ["pin"] and code == 0 and "may be used by others (mode 755)" in transcript, transcript
    # ...nor one whose socket others may use...
    os.chmod(path.parent, 0o700)
    asked, transcript, code = at_terminal(alice, "contacts", "list")
    assert asked == ["pin"] and code == 0 and "may be used by others (mode 777)" in transcript, transcript
    # ...nor one that belongs to another user...
    os.chmod(path, 0o600)
    os.chown(path, 65534, -1)
    asked, transcript, code = at_terminal(alice, "contacts", "list")
    assert asked == ["pin"] and code == 0 and "belongs to user 65534, not to you" in transcript, transcript
    os.chown(path, os.getuid(), -1)
    # ...and, the modes put back, the agent still serves its own user.
    asked, transcript, code = at_terminal(alice, "contacts", "list")
    assert asked == [] and code == 0, transcript


def test_a_wrapped_store_asks_the_passphrase_once_too(people, runtime, agents):
    carol = people("Carol")
    carol.passphrase = "correct horse battery"
    passphrase_file = carol.root / "carol.passphrase"
    passphrase_file.write_text(carol.passphrase + "\n")
    carol.ok("init", "--name", "Carol", "--passphrase", "--passphrase-file", str(passphrase_file))
    asked, transcript, code = at_terminal(carol, "contacts", "list")
    assert asked == ["passphrase", "pin"] and code == 0, transcript
    for command in [("whoami",), ("contacts", "list")]:
        asked, transcript, code = at_terminal(carol, *command)
        assert asked == [] and code == 0, transcript
    assert "Carol" in at_terminal(carol, "whoami")[1]


def test_ctrl_c_reaches_the_command_the_agent_runs(pair, runtime, agents):
    alice, _ = pair
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    shell = shell_of(alice)
    mark = shell.start(command_line(alice, ["acknowledge-device-change", "Bob"]))
    shell.child.expect(r"Bob's device-change code: ")
    shell.child.sendintr()
    shell.child.expect(r"itsme: interrupted")
    transcript, code = shell.finish(mark)
    assert code == 5 and "PIN:" not in transcript, transcript
    # The window is still open.
    assert at_terminal(alice, "contacts", "list")[0] == []


def test_no_cache_and_unlock_time_off_ask_every_time(pair, runtime, agents):
    alice, _ = pair
    assert at_terminal(alice, "contacts", "list", "--no-cache")[0] == ["pin"]
    assert at_terminal(alice, "contacts", "list", "--no-cache")[0] == ["pin"]
    assert not _agent_sockets(runtime)
    # Within a window, --no-cache still asks (the command runs on its own).
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    assert at_terminal(alice, "contacts", "list", "--no-cache")[0] == ["pin"]
    assert at_terminal(alice, "contacts", "list")[0] == []
    # Off: the window open now ends, and none opens again.
    out = alice.ok("unlock-time", "off", pin_file=False)
    assert "off" in out and "ended" in out, out
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    alice.ok("unlock-time", "default", pin_file=False)
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    assert at_terminal(alice, "contacts", "list")[0] == []
    shown = json_at_terminal(alice, "unlock-time")
    assert shown["unlocked"] is True and shown["idle"] == 300 and shown["absolute"] == 1800, shown


def test_scripts_never_start_an_agent(pair, runtime, agents):
    alice, _ = pair
    # A PIN file at a terminal, and a PIN at no terminal: no agent.
    term = alice.spawn("contacts", "list")
    assert term.finish() == 0
    result = alice.run("contacts", "list", pin_file=False, input=alice.pin + "\n")
    assert result.returncode != 0 and "--pin-fd" in result.stderr, result
    assert not _agent_sockets(runtime) and not list(alice.dir.glob(".unlock-agent-*"))
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]


def test_a_pipe_does_not_wait_for_the_agent(pair, runtime, agents):
    alice, _ = pair
    shell = shell_of(alice)
    mark = shell.start(command_line(alice, ["contacts", "list"]) + " | cat")
    shell.child.expect("PIN: ")
    shell.child.sendline(alice.pin)
    started = time.monotonic()
    transcript, code = shell.finish(mark, timeout=30)
    assert code == 0 and time.monotonic() - started < 15, transcript
    # The agent it started lives on, and the next command needs no PIN.
    assert json_at_terminal(alice, "unlock-time")["unlocked"] is True
    assert at_terminal(alice, "contacts", "list")[0] == []


def test_a_changed_identity_ends_the_window(pair, runtime, agents, people):
    alice, _ = pair
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    # Once the agent has unlocked (it writes its lock file in the directory).
    assert at_terminal(alice, "contacts", "list")[0] == []
    subprocess.run(["rm", "-rf", str(alice.dir)], check=True)
    alice.ok("init", "--name", "Alice Again")
    asked, transcript, code = at_terminal(alice, "whoami")
    assert code == 0 and "Alice Again" in transcript, transcript
    asked, transcript, code = at_terminal(alice, "contacts", "list")
    assert asked == ["pin"] and code == 0, transcript


def test_unlock_time_refuses_bad_times(pair, runtime, agents):
    alice, _ = pair
    for args, message in [
        (("soon",), "is not a time"),
        (("10m", "5m"), "shorter than the idle time"),
        (("13h",), "longest unlock time"),
        (("off", "5m"), "takes no second time"),
        (("0",), "is not a time"),
    ]:
        result = alice.run("unlock-time", *args, pin_file=False)
        assert result.returncode == 2 and message in result.stderr, (args, result)
    assert alice.json("unlock-time", pin_file=False)["idle"] == 300


def _wait_for(found, what: str, seconds: float = 20):
    """What `found()` returns once it is true (an agent starts after the
    command that checked the PIN has ended)."""
    deadline = time.monotonic() + seconds
    while True:
        value = found()
        if value or time.monotonic() > deadline:
            assert value, f"no {what} after {seconds} s"
            return value
        time.sleep(0.05)


def _lock_files(person, count: int = 1) -> list[Path]:
    """The agents' lock files in the person's data directory, once `count`
    of them name their socket."""

    def ready():
        files = sorted(person.dir.glob(".unlock-agent-*"))
        return files if len(files) == count and all(f.read_text() for f in files) else None

    return _wait_for(ready, f"{count} unlock agent(s) of {person.name}")


def _agent_socket(person) -> Path:
    (lock,) = _lock_files(person)
    return Path(lock.read_text())


def _framed(obj) -> bytes:
    body = json.dumps(obj).encode()
    return struct.pack(">I", len(body)) + body


def test_hostile_messages_neither_crash_nor_stall_the_agent(pair, runtime, agents):
    alice, _ = pair
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    path = str(_agent_socket(alice))
    pid = _agent_pids(alice.root)[0]
    fds_before = len(os.listdir(f"/proc/{pid}/fd"))
    # Numbers out of range, unknown operations, a request without
    # descriptors, broken framing, and descriptors sent with 2 bytes.
    for payload in [
        _framed({"op": "signal", "signal": 2**40}),
        _framed({"op": "run", "argv": ["whoami"], "cwd": "/", "env": {}}),
        _framed({"op": 7}),
        struct.pack(">I", 2**31) + b"x",
        b"\x00\x00\x00\x05{}",
    ]:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(path)
        connection.sendall(payload)
        connection.close()
    for _ in range(20):
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(path)
        socket.send_fds(connection, [b"\x00\x00"], [0, 1, 2])
        connection.close()
    # A connection that says nothing does not hold up the next command.
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.connect(path)
    started = time.monotonic()
    asked, transcript, code = at_terminal(alice, "contacts", "list")
    assert asked == [] and code == 0, transcript
    assert time.monotonic() - started < 8
    silent.close()
    time.sleep(1)
    assert _agent_pids(alice.root) == [pid]
    assert len(os.listdir(f"/proc/{pid}/fd")) <= fds_before + 1


def test_one_agent_per_data_directory_whatever_the_environment(pair, runtime, agents, env):
    alice, _ = pair
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    # Without XDG_RUNTIME_DIR in the same terminal: a command finds the same
    # agent through the data directory, and its `lock` ends it.
    other = "env -u XDG_RUNTIME_DIR"
    assert at_terminal(alice, "contacts", "list", prefix=other)[0] == []
    asked, transcript, code = at_terminal(alice, "lock", prefix=other)
    assert code == 0 and "Locked" in transcript, transcript
    assert at_terminal(alice, "contacts", "list", "--no-cache", prefix=other)[0] == ["pin"]
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    assert len(_agent_pids(alice.root)) == 1


def test_a_command_dies_with_its_agent(pair, runtime, agents):
    alice, _ = pair
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    _lock_files(alice)
    pid = _agent_pids(alice.root)[0]
    shell = shell_of(alice)
    mark = shell.start(command_line(alice, ["acknowledge-device-change", "Bob"]))
    shell.child.expect(r"Bob's device-change code: ")
    children = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    assert len(children) == 1
    os.kill(pid, 9)
    shell.child.expect(r"the unlock agent ended")
    transcript, code = shell.finish(mark)
    assert code == 2, transcript
    for _ in range(50):
        if not Path(f"/proc/{children[0]}").exists() or "Z" in Path(f"/proc/{children[0]}/stat").read_text().split()[2]:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the command the agent ran outlived it")
    assert [c["name"] for c in alice.json("contacts", "list")["contacts"]] == ["Bob"]


def test_a_fifo_in_the_secrets_does_not_hang_a_client(pair, runtime, agents):
    alice, _ = pair
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    os.mkfifo(alice.dir / "secrets.wrap")
    started = time.monotonic()
    # The agent's stamp cannot be read: the command runs here, which takes
    # the store for a wrapped one, asks, and then refuses the FIFO.
    shell = shell_of(alice)
    mark = shell.start(command_line(alice, ["contacts", "list"]))
    shell.child.expect("Passphrase of", timeout=20)
    assert time.monotonic() - started < 20
    shell.child.sendline("not the passphrase")
    shell.child.expect("secrets.wrap")
    transcript, code = shell.finish(mark)
    assert code == 2, transcript


# Where the socket lives: a directory nobody can hold in advance.


def test_a_squatted_predictable_directory_does_not_block_the_window(pair, runtime, agents, env):
    alice, _ = pair
    # No XDG_RUNTIME_DIR: the socket's directory is made under /tmp. The
    # name older versions used, /tmp/itsme-UID, taken in advance (as
    # another local user could: here a file, then a directory others may
    # enter), keeps nothing from working.
    env.pop("XDG_RUNTIME_DIR")
    squatted = Path(f"/tmp/itsme-{os.getuid()}")
    if squatted.exists() or squatted.is_symlink():
        pytest.skip(f"{squatted} exists: not touched by this test")
    try:
        for make in (lambda: squatted.write_text("taken\n"), lambda: (squatted.mkdir(), squatted.chmod(0o777))):
            make()
            assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
            asked, transcript, code = at_terminal(alice, "contacts", "list")
            assert asked == [] and code == 0, transcript
            path = _agent_socket(alice)
            assert path.parent.parent == Path("/tmp") and path.parent != squatted, path
            assert re.fullmatch(r"itsme-[A-Za-z0-9]{6}", path.parent.name), path
            assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
            assert at_terminal(alice, "lock")[2] == 0
            # The agent's directory goes with it.
            assert not path.parent.exists()
            subprocess.run(["rm", "-rf", str(squatted)], check=True)
    finally:
        subprocess.run(["rm", "-rf", str(squatted)], check=False)


# Whose window: one terminal session's.


def test_two_terminal_sessions_do_not_share_a_window(pair, runtime, agents):
    alice, _ = pair
    first, second = new_shell(alice), new_shell(alice)
    assert at_terminal(alice, "contacts", "list", shell=first)[0] == ["pin"]
    assert at_terminal(alice, "contacts", "list", shell=first)[0] == []
    # Another terminal asks, and opens a window of its own.
    assert at_terminal(alice, "contacts", "list", shell=second)[0] == ["pin"]
    assert at_terminal(alice, "contacts", "list", shell=second)[0] == []
    _lock_files(alice, 2)
    assert len(_agent_pids(alice.root)) == 2
    # A process of the user outside the session (here: the test itself)
    # reaches the socket but may not run a command through it.
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(_lock_files(alice, 2)[0].read_text())
    connection.settimeout(20)
    greeting = connection.recv(65536)
    assert b"other_session" in greeting and b"fingerprint" not in greeting, greeting
    socket.send_fds(connection, [_framed({"op": "run", "argv": ["whoami"], "cwd": "/", "env": {}})], [0, 1, 2])
    reply = connection.recv(65536)
    assert b"another terminal session" in reply, reply
    connection.close()
    # `lock` ends the windows of the data directory in every terminal.
    result = alice.run("lock", pin_file=False)
    assert result.returncode == 0 and "Locked in 2 terminal sessions" in result.stdout, result
    assert at_terminal(alice, "contacts", "list", shell=first)[0] == ["pin"]


def test_the_window_ends_with_its_terminal_session(pair, runtime, agents):
    alice, _ = pair
    shell = new_shell(alice)
    assert at_terminal(alice, "contacts", "list", shell=shell)[0] == ["pin"]
    (lock,) = _lock_files(alice)
    (pid,) = _agent_pids(alice.root)
    socket_directory = Path(lock.read_text()).parent
    shell.close()
    for _ in range(100):
        if not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the agent outlived its terminal session")
    assert not lock.exists() and not socket_directory.exists()
    # The next terminal asks again.
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]


def test_a_process_without_a_terminal_uses_no_window(pair, runtime, agents):
    alice, _ = pair
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    # Without a controlling terminal (as from cron, or ssh without a
    # terminal), a command does not run in the window open at the terminal.
    result = alice.run("contacts", "list", pin_file=False)
    assert result.returncode != 0 and "--pin-fd" in result.stderr, result
    shown = alice.json("unlock-time", pin_file=False)
    assert shown["unlocked"] is False, shown
    assert "No terminal" in alice.ok("unlock-time", pin_file=False)
    # Nor does one in a session of its own with the terminal as its standard
    # streams (setsid: no controlling terminal).
    # It asks for the PIN at its standard input, and opens no window.
    asked, transcript, code = at_terminal(alice, "contacts", "list", prefix="setsid -w")
    assert asked == ["pin"] and code == 0, transcript
    assert len(_agent_pids(alice.root)) == 1
    assert at_terminal(alice, "contacts", "list")[0] == []


# What the agent keeps: no PIN.


def _memory_holds(pid: int, needles: list[bytes]) -> dict[bytes, bool]:
    """Whether each of `needles` is anywhere in the readable memory of
    process `pid` (its /proc/PID/maps regions, read through /proc/PID/mem:
    root may, the agent being undumpable)."""
    found = {needle: False for needle in needles}
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if "r" not in fields[1] or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]")):
                continue
            try:
                mem.seek(start)
                data = mem.read(end - start)
            except (OSError, ValueError, OverflowError):
                continue
            for needle in needles:
                found[needle] = found[needle] or needle in data
    return found


def test_the_agent_keeps_no_copy_of_the_pin(pair, runtime, agents):
    """Reads the agent's whole memory (as root may, through /proc/PID/mem)
    for the PIN's six ASCII digits: not there while the window is open, nor
    after `lock` while a command it runs keeps it alive."""
    if os.geteuid() != 0:
        pytest.skip("reading an undumpable process's memory needs root")
    alice, _ = pair
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    # A command run in the window: the agent has unlocked.
    assert at_terminal(alice, "whoami")[0] == []
    (pid,) = _agent_pids(alice.root)
    pin = alice.pin.encode()
    # The reading works: the agent's memory holds its data directory's path.
    marker = str(alice.dir).encode()
    held = _memory_holds(pid, [pin, marker])
    assert held[marker], "the agent's memory could not be read"
    assert not held[pin], "the agent holds the PIN while the window is open"
    # After `lock`, with a command still running in it (the agent lives on
    # until it ends).
    shell = shell_of(alice)
    mark = shell.start(command_line(alice, ["acknowledge-device-change", "Bob"]))
    shell.child.expect(r"Bob's device-change code: ")
    assert alice.run("lock", pin_file=False).returncode == 0
    # The agent, and the child it forked for the command (which has the
    # agent's command line).
    running = _agent_pids(alice.root)
    assert pid in running and len(running) == 2, running
    for process in running:
        held = _memory_holds(process, [pin, marker])
        assert held[marker] and not held[pin], f"process {process} holds the PIN after lock"
    shell.child.sendintr()
    shell.finish(mark)
    for _ in range(50):
        if not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists()


# What asks again: what removes what cannot be had back, or lets the identity leave.


def test_removing_or_exporting_asks_the_pin_inside_the_window(pair, runtime, agents):
    alice, _ = pair
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    # A wrong PIN inside the window removes nothing (and counts).
    right, alice.pin = alice.pin, "000000"
    try:
        asked, transcript, code = at_terminal(alice, "contacts", "remove", "Bob", "--yes")
    finally:
        alice.pin = right
    assert asked == ["pin"] * 3 and code == 1 and "wrong PIN" in transcript, transcript
    asked, transcript, code = at_terminal(alice, "contacts", "list")
    assert asked == [] and "Bob" in transcript, transcript
    # Each asks once, inside the window; the window stays open for the others.
    for command, answers in [
        (("contacts", "accept-loss", "--yes"), {}),
        (("device", "reset", "--yes"), {}),
        (("export", "--output", "alice.export"), {}),
        (("contacts", "remove", "Bob"), {r"Remove Bob .*\[y/n\] ": "y"}),
    ]:
        asked, transcript, code = at_terminal(alice, *command, answers=answers, timeout=120)
        assert code == 0 and asked[:1] == ["pin"] and asked.count("pin") == 1, transcript
        assert at_terminal(alice, "whoami")[0] == []
    assert "Removed Bob" in transcript and "No contacts yet" in at_terminal(alice, "contacts", "list")[1]
    # Outside a window the PIN is asked once, not twice.
    asked, transcript, code = at_terminal(alice, "device", "reset", "--yes", "--no-cache")
    assert asked == ["pin"] and code == 0, transcript


def test_init_at_the_terminal_opens_the_window(people, runtime, agents):
    """The PIN chosen at `itsme init` is a PIN typed at the terminal: the
    window opens, and the next commands ask for nothing."""
    dana = people("Dana")
    answers = {"Your name: ": "Dana", "Choose a PIN: ": dana.pin, "Type the PIN again: ": dana.pin}
    asked, transcript, code = at_terminal(dana, "init", answers=answers)
    assert code == 0 and "Created the identity of Dana" in transcript, transcript
    assert "pin" not in asked, asked
    for command in [("unlock-time",), ("whoami",), ("contacts", "list")]:
        asked, transcript, code = at_terminal(dana, *command)
        assert asked == [] and code == 0, transcript
        if command == ("unlock-time",):
            assert "Unlocked now" in transcript, transcript
    # A script's `init` (the PIN from a file) opens none.
    erin = people("Erin")
    erin.ok("init", "--name", "Erin")
    asked, transcript, code = at_terminal(erin, "contacts", "list")
    assert asked == ["pin"] and code == 0, transcript


def test_import_at_the_terminal_with_a_new_pin_opens_the_window(people, runtime, agents, tmp_path):
    """An import that chooses this device's PIN at the terminal opens the
    window too: the next command asks for nothing."""
    from test_transfer import export_to_file, write_secret

    alice = people("Alice", init=True)
    export = tmp_path / "alice.itsme"
    password = write_secret(tmp_path / "password", export_to_file(alice, export))
    new = people("AliceNew")
    new.pin = alice.pin
    answers = {"Choose a PIN: ": new.pin, "Type the PIN again: ": new.pin}
    asked, transcript, code = at_terminal(new, "import", str(export), "--password-file", str(password), answers=answers)
    assert code == 0 and "Installed the identity of Alice" in transcript, transcript
    assert "pin" not in asked, asked
    asked, transcript, code = at_terminal(new, "contacts", "list")
    assert asked == [] and code == 0, transcript

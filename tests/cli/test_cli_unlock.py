"""The unlock window: the PIN once per sitting, through an agent process
that runs later commands (docs/CLI.md, "The unlock window").

Every test here runs with a runtime directory of its own (the agent's
socket lives there) and without ITSME_NO_CACHE, which every other test
sets; agents left at the end are locked and then killed.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import pexpect
import pytest


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


@pytest.fixture
def agents(runtime, cli_bin, env, tmp_path):
    """Ends every agent of the test: `itsme lock --all`, then a kill of any
    agent process serving a directory under tmp_path."""
    yield
    subprocess.run([str(cli_bin), "lock", "--all"], env=env, cwd=tmp_path, capture_output=True, timeout=60)
    for pid in _agent_pids(tmp_path):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


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


def at_terminal(person, *args, answers=None, timeout=60):
    """Runs `itsme ARGS` at a terminal without a PIN file, typing the PIN
    (and, from `answers`, the answer to any other prompt: a regex to its
    reply); returns (what it asked, transcript, exit code)."""
    answers = answers or {}
    term = person.spawn(*args, pin_file=False)
    patterns = ["PIN: ", r"Passphrase of [^\n]*: ", *answers.keys()]
    asked = []
    while True:
        index = term.expect([*patterns, pexpect.EOF], timeout=timeout)
        if index == len(patterns):
            break
        if index == 0:
            asked.append("pin")
            term.sendline(person.pin)
        elif index == 1:
            asked.append("passphrase")
            term.sendline(person.passphrase)
        else:
            asked.append(list(answers.keys())[index - 2])
            term.sendline(list(answers.values())[index - 2])
    term.child.close()
    return asked, term.transcript, term.child.exitstatus



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
    sockets = list((runtime / "itsme").glob("agent-*.sock"))
    assert len(sockets) == 1, sockets
    path = sockets[0]
    assert stat.S_IMODE(os.stat(runtime / "itsme").st_mode) == 0o700
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    # Past the directory's and the socket's modes (as root could open
    # them up): the agent itself checks who connects.
    os.chmod(runtime, 0o755)
    os.chmod(runtime / "itsme", 0o755)
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
    assert asked == ["pin"] and code == 0 and "may be entered by others" in transcript, transcript
    # ...and, the modes put back, the agent still serves its own user.
    os.chmod(runtime / "itsme", 0o700)
    os.chmod(path, 0o600)
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
    term = alice.spawn("contacts", "remove", "Bob", pin_file=False)
    term.expect(r"Remove Bob")
    term.child.sendintr()
    term.expect(r"itsme: interrupted")
    assert term.finish() == 5
    assert "PIN:" not in term.transcript
    assert [c["name"] for c in alice.json("contacts", "list")["contacts"]] == ["Bob"]
    # The window is still open.
    assert at_terminal(alice, "contacts", "list")[0] == []


def test_no_cache_and_unlock_time_off_ask_every_time(pair, runtime, agents):
    alice, _ = pair
    assert at_terminal(alice, "contacts", "list", "--no-cache")[0] == ["pin"]
    assert at_terminal(alice, "contacts", "list", "--no-cache")[0] == ["pin"]
    assert not list((runtime / "itsme").glob("agent-*.sock"))
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
    shown = alice.json("unlock-time", pin_file=False)
    assert shown["unlocked"] is True and shown["idle"] == 300 and shown["absolute"] == 1800, shown


def test_scripts_never_start_an_agent(pair, runtime, agents):
    alice, _ = pair
    # A PIN file at a terminal, and a PIN at no terminal: no agent.
    term = alice.spawn("contacts", "list")
    assert term.finish() == 0
    result = alice.run("contacts", "list", pin_file=False, input=alice.pin + "\n")
    assert result.returncode != 0 and "--pin-fd" in result.stderr, result
    assert not list((runtime / "itsme").glob("agent-*.sock"))
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]


def test_a_pipe_does_not_wait_for_the_agent(pair, runtime, agents, cli_bin):
    alice, _ = pair
    command = f"{cli_bin} contacts list --data-dir {alice.dir} | cat; echo PIPELINE-DONE"
    term = pexpect.spawn("/bin/sh", ["-c", command], env=alice.env, encoding="utf-8", timeout=30)
    term.expect("PIN: ")
    term.sendline(alice.pin)
    started = time.monotonic()
    term.expect("PIPELINE-DONE")
    assert time.monotonic() - started < 15
    term.expect(pexpect.EOF)
    # The agent it started lives on, and the next command needs no PIN.
    assert alice.json("unlock-time", pin_file=False)["unlocked"] is True
    assert at_terminal(alice, "contacts", "list")[0] == []


def test_a_changed_identity_ends_the_window(pair, runtime, agents, people):
    alice, _ = pair
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
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


def _agent_socket(person) -> Path:
    return Path((person.dir / ".unlock-agent").read_text())


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
    # Another shell, without XDG_RUNTIME_DIR: it finds the same agent through
    # the data directory, and its `lock` ends it.
    other = dict(env)
    other.pop("XDG_RUNTIME_DIR")
    alice.env = other
    try:
        assert at_terminal(alice, "contacts", "list")[0] == []
        assert "Locked" in alice.ok("lock", pin_file=False)
        assert at_terminal(alice, "contacts", "list", "--no-cache")[0] == ["pin"]
    finally:
        alice.env = env
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    assert len(_agent_pids(alice.root)) == 1


def test_a_command_dies_with_its_agent(pair, runtime, agents):
    alice, _ = pair
    assert at_terminal(alice, "contacts", "list")[0] == ["pin"]
    pid = _agent_pids(alice.root)[0]
    term = alice.spawn("contacts", "remove", "Bob", pin_file=False)
    term.expect(r"Remove Bob")
    children = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    assert len(children) == 1
    os.kill(pid, 9)
    term.expect(r"the unlock agent ended")
    assert term.finish() == 2
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
    term = alice.spawn("contacts", "list", pin_file=False)
    term.expect("Passphrase of", timeout=20)
    assert time.monotonic() - started < 20
    term.sendline("not the passphrase")
    term.expect("secrets.wrap")
    assert term.finish() == 2, term.transcript

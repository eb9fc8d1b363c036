"""The shipped systemd unit (deploy/systemd/itsme-relay.service,
docs/OPERATIONS.md): `systemd-analyze verify` finds nothing to say, and
the hardening the operator relies on is there."""

import shutil
import subprocess

import pytest

from relaytest import REPO, relay_binary

UNIT = REPO / "deploy" / "systemd" / "itsme-relay.service"
ENV = REPO / "deploy" / "systemd" / "itsme-relay.env"


def service_section() -> dict:
    """The [Service] settings, each key with the list of its values."""
    settings: dict = {}
    section = None
    for raw in UNIT.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]":
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def test_systemd_analyze_verify_accepts_the_unit(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is not installed (Debian package systemd; scripts/install-deps installs it)")
    binary = relay_binary()
    assert binary.exists(), f"no relay binary at {binary}"
    # verify checks that ExecStart's program exists: point it at the built
    # relay, the rest of the unit as shipped.
    text = UNIT.read_text()
    assert "ExecStart=/usr/local/bin/itsme-relay\n" in text
    unit = tmp_path / "itsme-relay.service"
    unit.write_text(text.replace("ExecStart=/usr/local/bin/itsme-relay", f"ExecStart={binary}"))
    result = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 0 and output == "", f"systemd-analyze verify: exit {result.returncode}\n{output}"


def test_the_unit_is_hardened():
    s = service_section()
    expected = {
        "DynamicUser": "yes",
        "StateDirectory": "itsme-relay",
        "StateDirectoryMode": "0700",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "NoNewPrivileges": "yes",
        "CapabilityBoundingSet": "",
        "MemoryDenyWriteExecute": "yes",
        "Restart": "on-failure",
        "ExecReload": "/bin/kill -HUP $MAINPID",
        "EnvironmentFile": "-/etc/itsme-relay/itsme-relay.env",
    }
    for key, value in expected.items():
        assert value in s.get(key, []), f"{key}={value} is not in the unit (has {s.get(key)})"
    assert "@system-service" in s["SystemCallFilter"]
    families = " ".join(s["RestrictAddressFamilies"]).split()
    assert set(families) == {"AF_INET", "AF_INET6", "AF_UNIX"}, families


def test_the_environment_file_sets_only_known_variables():
    """Every ITSME_RELAY_ variable of the example names a flag of itsme-relay --help."""
    help_text = subprocess.run([str(relay_binary()), "--help"], capture_output=True, text=True, timeout=30).stdout
    flags = set(__import__("re").findall(r"--([a-z][a-z-]+)", help_text))
    for raw in ENV.read_text().splitlines():
        line = raw.strip().lstrip("#").strip()
        if not line.startswith("ITSME_RELAY_") or "=" not in line:
            continue
        name = line.split("=", 1)[0][len("ITSME_RELAY_"):].lower().replace("_", "-")
        assert name in flags, f"{line} sets no flag of itsme-relay"


# ---------------------------------------------------------------------------
# The relay under the unit's system call filter


def _group(name: str, analyze: str, seen: set) -> set:
    """The system calls of a systemd group such as @system-service, nested groups expanded."""
    if name in seen:
        return set()
    seen.add(name)
    listing = subprocess.run([analyze, "syscall-filter", name], capture_output=True, text=True, check=True).stdout
    calls = set()
    for line in listing.splitlines()[1:]:
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        calls |= _group(entry, analyze, seen) if entry.startswith("@") else {entry}
    return calls


def test_the_relay_runs_under_the_units_system_call_filter(tmp_path):
    """SystemCallFilter=@system-service with SystemCallErrorNumber=EPERM,
    applied with libseccomp as systemd applies it: every other system call
    fails with EPERM. The relay starts, serves HTTP, TLS and a room, and
    stops on SIGTERM."""
    import ctypes
    import ctypes.util
    import signal as signals

    import httpx

    from certificates import self_signed
    from operatortest import Launched
    from relaytest import new_id, recv_binary, recv_event, run, ws_connect

    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is not installed (scripts/install-deps installs it)")
    name = ctypes.util.find_library("seccomp")
    if name is None:
        pytest.skip("libseccomp is not installed")
    unit = service_section()
    assert unit["SystemCallFilter"] == ["@system-service"] and unit["SystemCallErrorNumber"] == ["EPERM"]
    allowed = _group("@system-service", analyze, set())

    seccomp = ctypes.CDLL(name, use_errno=True)
    seccomp.seccomp_init.restype = ctypes.c_void_p
    seccomp.seccomp_init.argtypes = [ctypes.c_uint32]
    seccomp.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    seccomp.seccomp_load.argtypes = [ctypes.c_void_p]
    seccomp.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    errno_eperm, allow = 0x00050000 | 1, 0x7FFF0000
    context = seccomp.seccomp_init(errno_eperm)
    assert context
    for call in allowed:
        number = seccomp.seccomp_syscall_resolve_name(call.encode())
        if number >= 0:  # some names are of other architectures
            assert seccomp.seccomp_rule_add(context, allow, number, 0) == 0, call

    def filtered():
        if seccomp.seccomp_load(context) != 0:
            os._exit(98)

    cert, key, _ = self_signed(tmp_path, "relay")
    for args in (["--database", tmp_path / "db.sqlite"], ["--database", ":memory:", "--tls-cert", cert, "--tls-key", key]):
        relay = Launched(tmp_path, ["--port", "0", *args], preexec_fn=filtered)
        try:
            relay.wait_listening()
            import ssl

            verify = ssl.create_default_context(cafile=str(cert)) if relay.scheme == "https" else False
            with httpx.Client(base_url=relay.url, timeout=10, verify=verify) as client:
                assert client.get("/health").status_code == 200
                assert client.put(f"/v1/records/{new_id()}", content=b"bytes").status_code == 201
                assert client.get("/metrics").status_code == 200

            async def room():
                context = ssl.create_default_context(cafile=str(cert)) if relay.scheme == "https" else None
                scheme = "wss" if relay.scheme == "https" else "ws"
                url = f"{scheme}://127.0.0.1:{relay.port}/v1/rooms/{new_id()}"
                async with ws_connect(url, ssl=context) as first:
                    assert await recv_event(first) == {"type": "waiting"}
                    async with ws_connect(url, ssl=context) as second:
                        assert await recv_event(second) == {"type": "peer-joined"}
                        await recv_event(first)
                        await second.send(b"\x02filtered")
                        assert await recv_binary(first) == b"\x02filtered"

            run(room())
            relay.signal(signals.SIGTERM)
            assert relay.proc.wait(20) == 0, relay.stderr()
            assert "Operation not permitted" not in relay.stderr(), relay.stderr()
        finally:
            relay.stop()

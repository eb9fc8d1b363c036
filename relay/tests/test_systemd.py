"""The shipped systemd unit (deploy/systemd/itsme-relay.service,
docs/OPERATIONS.md): `systemd-analyze verify` finds nothing to say, and
the hardening the operator relies on is there."""

import configparser
import shutil
import subprocess
from pathlib import Path

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

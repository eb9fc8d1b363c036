"""Helpers for the tests of itsme-relay as an operator runs it: a relay
started with exactly the arguments and environment a test gives (no
--database or --port added). Certificates are certificates.py's."""

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

from relaytest import relay_binary

LISTENING = re.compile(r"itsme-relay listening on (https?)://(\[[^\]]+\]|[^:/\s]+):(\d+)")


class Launched:
    """itsme-relay with `args` and `env` as given. `url` is set once it
    prints its listening line; `wait_listening()` fails the test (with its
    standard error) if it does not."""

    def __init__(self, workdir: Path, args: list, env: dict = None, preexec_fn=None, cwd: Path = None):
        self.stderr_path = workdir / f"stderr-{time.monotonic_ns()}.log"
        self._stderr = open(self.stderr_path, "wb")
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("ITSME_RELAY_") and k != "STATE_DIRECTORY"}
        full_env.update(env or {})
        self.args = [str(relay_binary())] + [str(a) for a in args]
        self.proc = subprocess.Popen(
            self.args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr, env=full_env,
            preexec_fn=preexec_fn, cwd=cwd or workdir,
        )
        self.lines: list = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.url = None

    def _read(self) -> None:
        for raw in self.proc.stdout:
            self.lines.append(raw.decode("utf-8", "replace"))

    def wait_listening(self, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while not self.lines and self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self.lines:
            code = self.proc.poll()
            self.stop()
            raise AssertionError(
                f"the relay did not print its listening line (exit code {code}); args {self.args[1:]}; "
                f"stderr:\n{self.stderr()[-3000:]}"
            )
        match = LISTENING.fullmatch(self.lines[0].strip())
        assert match, f"unexpected first line {self.lines[0]!r}"
        self.scheme, self.host, self.port = match.group(1), match.group(2), int(match.group(3))
        self.url = match.group(0).split(" on ", 1)[1]
        return self.url

    def exit_code(self, timeout: float = 30):
        """The exit code once the relay has ended (it must end by itself)."""
        try:
            return self.proc.wait(timeout)
        finally:
            self._stderr.close()

    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_bytes().decode("utf-8", "replace")

    def eventually_in_stderr(self, text: str, timeout: float = 10) -> bool:
        deadline = time.monotonic() + timeout
        while text not in self.stderr():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def signal(self, sig) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if not self._stderr.closed:
            self._stderr.close()


def run_relay(args: list, env: dict = None, timeout: float = 30) -> SimpleNamespace:
    """itsme-relay run to its end (a refusal, or --help): exit code, stdout, stderr."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ITSME_RELAY_") and k != "STATE_DIRECTORY"}
    full_env.update(env or {})
    done = subprocess.run(
        [str(relay_binary())] + [str(a) for a in args], stdin=subprocess.DEVNULL, capture_output=True,
        env=full_env, timeout=timeout,
    )
    return SimpleNamespace(code=done.returncode, stdout=done.stdout.decode("utf-8", "replace"),
                           stderr=done.stderr.decode("utf-8", "replace"))

"""Real PostgreSQL and nginx servers on loopback, for the relay's tests.

Both run from Debian's packages (scripts/install-deps installs them) in a
temporary directory of their own, on a free port, and stop at close().
PostgreSQL refuses to run as root: when the tests run as root, both servers
run as an unprivileged user (`postgres`, else `nobody`) through runuser.

    with Postgres() as pg:
        url = pg.create_database()      # postgres://...: a fresh database
        pg.stop(); pg.start()           # a restart, data kept

    with Nginx(NGINX_CONF, upstreams=[port_a, port_b]) as proxy:
        proxy.url                       # https://127.0.0.1:PORT

Nginx runs the shipped deploy/nginx/itsme-relay.conf with only its marked
lines changed (`# itsme:upstream`, `# itsme:listen`, `# itsme:certificate`,
`# itsme:key`, `# itsme:log`): the instances, the port, the certificate and
the log paths.

As a program, it starts a cluster for the relay's benchmark
(`itsme-bench relay --cluster`) and stops it when its stdin closes:

    python3 apps/tests/services.py cluster --relay-bin PATH [--instances 2]

PostgreSQL, the relays on one database with `--trusted-proxy 127.0.0.1`,
and nginx in front of them with the shipped config, its TLS listener
replaced by plain HTTP on loopback. It prints each relay's pid and then
`itsme-relay cluster listening on http://127.0.0.1:PORT`; everything is
stopped and its temporary directories removed at the end of stdin, on
SIGTERM and on Ctrl-C.
"""

import glob
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NGINX_CONF = REPO / "deploy" / "nginx" / "itsme-relay.conf"


class ServiceMissing(Exception):
    """A server program is not installed (scripts/install-deps installs it)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _unprivileged_user():
    """The user to run servers as when we are root; None when we are not."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise ServiceMissing("running as root and no unprivileged user (postgres, nobody) to run servers as")


def _as_user(user, args):
    if user is None:
        return args
    return ["runuser", "-u", user.pw_name, "--"] + args


def _own_dir(prefix: str, user) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    if user is not None:
        os.chown(path, user.pw_uid, user.pw_gid)
    return path


def _wait_port(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


# ---------------------------------------------------------------------------
# PostgreSQL


def postgres_bindir() -> Path:
    for candidate in ("pg_config",):
        found = shutil.which(candidate)
        if found:
            out = subprocess.run([found, "--bindir"], capture_output=True, text=True)
            path = Path(out.stdout.strip())
            if (path / "initdb").exists():
                return path
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if versions:
        return Path(versions[-1]).parent
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise ServiceMissing("PostgreSQL's initdb was not found (Debian: apt-get install postgresql)")


class Postgres:
    """A private PostgreSQL cluster: superuser `itsme` with a random password
    (scram-sha-256 over TCP), fsync off (nothing here must survive a crash
    of the machine)."""

    def __init__(self):
        self.bindir = postgres_bindir()
        self.user = _unprivileged_user()
        self.root = _own_dir("itsme-pg-", self.user)
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self.port = free_port()
        self.password = secrets.token_urlsafe(18)
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        if self.user is not None:
            os.chown(pwfile, self.user.pw_uid, self.user.pw_gid)
        self._run(
            [str(self.bindir / "initdb"), "-D", str(self.data), "-U", "itsme", "--pwfile", str(pwfile),
             "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--no-sync"]
        )
        pwfile.unlink()
        self.start()

    def _run(self, args, **kwargs):
        result = subprocess.run(_as_user(self.user, args), capture_output=True, text=True, cwd=self.root, **kwargs)
        if result.returncode != 0:
            raise RuntimeError(f"{Path(args[0]).name} failed ({result.returncode}): {result.stdout[-2000:]}{result.stderr[-2000:]}")
        return result

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            f"-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start"])

    def stop(self, mode: str = "fast") -> None:
        """Stops the server (`fast`: clients disconnected; `immediate`: as a crash)."""
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"])

    def running(self) -> bool:
        result = subprocess.run(
            _as_user(self.user, [str(self.bindir / "pg_ctl"), "-D", str(self.data), "status"]), capture_output=True
        )
        return result.returncode == 0

    def url(self, database: str = "postgres") -> str:
        return f"postgres://itsme:{self.password}@127.0.0.1:{self.port}/{database}?sslmode=disable"

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Runs `sql` as the superuser; returns psql's unaligned output."""
        env = dict(os.environ, PGPASSWORD=self.password)
        result = subprocess.run(
            [str(self.bindir / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
             "-p", str(self.port), "-U", "itsme", "-d", database, "-c", sql],
            capture_output=True, text=True, env=env,
        )
        if result.returncode != 0:
            raise RuntimeError(f"psql failed: {result.stderr.strip()}")
        return result.stdout

    def create_database(self) -> str:
        """A new, empty database; returns its URL."""
        name = "relay_" + secrets.token_hex(6)
        self.psql(f"CREATE DATABASE {name} STRATEGY FILE_COPY")
        return self.url(name)

    def close(self) -> None:
        if self.running():
            try:
                self.stop("immediate")
            except RuntimeError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def database_of(url: str) -> str:
    """The database name in a postgres:// URL."""
    return re.sub(r"\?.*$", "", url).rsplit("/", 1)[1]


# ---------------------------------------------------------------------------
# nginx


MARK = re.compile(r"#\s*itsme:(\w+)\s*$")


def render_nginx_conf(text: str, upstreams, port: int, cert: Path, key: Path, logs: Path) -> str:
    """The shipped config with only its marked lines changed."""
    out = []
    upstream_done = False
    listen_done = False
    for line in text.splitlines():
        mark = MARK.search(line)
        if not mark:
            out.append(line)
            continue
        kind = mark.group(1)
        indent = line[: len(line) - len(line.lstrip())]
        if kind == "upstream":
            if not upstream_done:
                for upstream in upstreams:
                    out.append(re.sub(r"server \S+", f"server 127.0.0.1:{upstream}", line, count=1))
                upstream_done = True
        elif kind == "listen":
            # One loopback listener in place of the public ones.
            if not listen_done:
                out.append(re.sub(r"listen \S+", f"listen 127.0.0.1:{port}", line, count=1))
                listen_done = True
        elif kind == "certificate":
            out.append(f"{indent}ssl_certificate {cert};")
        elif kind == "key":
            out.append(f"{indent}ssl_certificate_key {key};")
        elif kind == "log":
            directive = line.split()[0]
            out.append(f"{indent}{directive} {logs / (directive + '.log')};")
        else:
            raise ValueError(f"unknown mark itsme:{kind} in the nginx config")
    if not (upstream_done and listen_done):
        raise ValueError("the nginx config lost its itsme:upstream or itsme:listen marks")
    return "\n".join(out) + "\n"


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if not found:
        raise ServiceMissing("nginx was not found (Debian: apt-get install nginx)")
    return found


class Nginx:
    """nginx in the foreground with its own prefix: a main config of its own
    (pid, temp paths, error log) that includes the rendered shipped file."""

    def __init__(self, conf: Path, upstreams, port: int = None):
        self.binary = nginx_binary()
        self.user = _unprivileged_user()
        self.root = _own_dir("itsme-nginx-", self.user)
        self.port = port or free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.ws_base = f"wss://127.0.0.1:{self.port}"
        from certificates import self_signed  # cryptography, only where nginx runs

        cert, key, _ = self_signed(self.root, "nginx")
        logs = self.root / "logs"
        logs.mkdir()
        site = self.root / "itsme-relay.conf"
        site.write_text(render_nginx_conf(Path(conf).read_text(), upstreams, self.port, cert, key, logs))
        temp = self.root / "temp"
        temp.mkdir()
        self.main_conf = self.root / "nginx.conf"
        self.main_conf.write_text(
            f"""pid {self.root / 'nginx.pid'};
error_log {logs / 'main-error.log'};
worker_processes 1;
events {{ worker_connections 1024; }}
http {{
    client_body_temp_path {temp / 'body'};
    proxy_temp_path {temp / 'proxy'};
    fastcgi_temp_path {temp / 'fastcgi'};
    uwsgi_temp_path {temp / 'uwsgi'};
    scgi_temp_path {temp / 'scgi'};
    access_log off;
    include {site};
}}
"""
        )
        if self.user is not None:
            for path in [self.root, *self.root.rglob("*")]:
                os.chown(path, self.user.pw_uid, self.user.pw_gid)
        self.error_log = logs / "main-error.log"
        self.proc = None

    def _args(self, *extra):
        return _as_user(self.user, [self.binary, "-p", str(self.root), "-e", str(self.error_log),
                                    "-c", str(self.main_conf), *extra])

    def test(self) -> subprocess.CompletedProcess:
        """`nginx -t` on the rendered config."""
        return subprocess.run(self._args("-t"), capture_output=True, text=True)

    def start(self) -> "Nginx":
        self.proc = subprocess.Popen(self._args("-g", "daemon off;"), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        if not _wait_port(self.port, 10):
            self.close()
            raise RuntimeError(f"nginx did not listen on {self.port}: {self.logs()[-2000:]}")
        return self

    def logs(self) -> str:
        text = ""
        for path in sorted((self.root / "logs").glob("*.log")):
            text += f"--- {path.name}\n" + path.read_text(errors="replace")
        return text

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------------------
# A cluster for the benchmark


def _cluster(relay_bin: str, instances: int, relay_args) -> int:
    import signal
    import sys

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    root = Path(tempfile.mkdtemp(prefix="itsme-cluster-"))
    pg = proxy = None
    relays = []
    try:
        pg = Postgres()
        database = pg.create_database()
        ports = [free_port() for _ in range(instances)]
        for i, port in enumerate(ports):
            log = open(root / f"relay-{i}.log", "wb")
            relays.append(subprocess.Popen(
                [relay_bin, "--host", "127.0.0.1", "--port", str(port), "--database", database,
                 "--trusted-proxy", "127.0.0.1", *relay_args],
                cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log))
            log.close()
        for i, (port, relay) in enumerate(zip(ports, relays)):
            if not _wait_port(port, 60):
                raise RuntimeError(f"relay {i} did not listen on {port}: {(root / f'relay-{i}.log').read_text()[-2000:]}")
        proxy = Nginx(NGINX_CONF, upstreams=ports)
        # Plain HTTP on loopback: the benchmark measures the relays behind
        # nginx, not TLS. A long keep-alive, so that the benchmark's clients
        # are not closed every 1,000 requests.
        site = proxy.root / "itsme-relay.conf"
        site.write_text(re.sub(rf"listen 127\.0\.0\.1:{proxy.port} ssl;", f"listen 127.0.0.1:{proxy.port};", site.read_text()))
        proxy.main_conf.write_text(proxy.main_conf.read_text().replace("    access_log off;", "    access_log off;\n    keepalive_requests 1000000;"))
        proxy.start()
        for relay in relays:
            print(f"relay pid {relay.pid}")
        print(f"itsme-relay cluster listening on http://127.0.0.1:{proxy.port}", flush=True)
        sys.stdin.read()
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if proxy is not None:
            proxy.close()
        for relay in relays:
            if relay.poll() is None:
                relay.terminate()
        for relay in relays:
            try:
                relay.wait(15)
            except subprocess.TimeoutExpired:
                relay.kill()
                relay.wait()
        if pg is not None:
            pg.close()
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Servers for the relay's benchmark.")
    commands = parser.add_subparsers(dest="command", required=True)
    cluster = commands.add_parser(
        "cluster", help="PostgreSQL, relays on one database and nginx in front; stops when stdin closes")
    cluster.add_argument("--relay-bin", required=True, help="the itsme-relay executable")
    cluster.add_argument("--instances", type=int, default=2)
    cluster.add_argument("relay_args", nargs="*", help="more flags for each relay (after --)")
    args = parser.parse_args()
    return _cluster(os.path.abspath(args.relay_bin), args.instances, args.relay_args)


if __name__ == "__main__":
    raise SystemExit(main())

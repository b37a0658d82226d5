"""The fleet's processes: PostgreSQL, the fakes, N TokenGate instances and nginx, on loopback.

    from fleet.cluster import Stack
    with Stack(instances=3) as stack:          # stops and removes everything on exit
        stack.start()                          # database, fakes, migrate, instances, nginx
        stack.instances[0].restart()           # SIGTERM, wait for exit, start, wait for /readyz
        print(stack.table_counts(), stack.provider_stats())

Every server binds 127.0.0.1 on a free port chosen at construction; an instance keeps its ports
across restarts (nginx's upstream block names them). PostgreSQL comes from scripts/pg.sh (as the
`postgres` user when run as root); pass `database_url=` to use one started elsewhere (the
instances then only migrate it and connect). nginx runs deploy/nginx/tokengate.conf as shipped,
with its upstream `server` line replaced by one per instance and a self-signed certificate for
127.0.0.1, as a child process (`daemon off`) with its own prefix directory.
"""

import base64
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CLIENT_ID = "fleet-app"
REDIRECT_URI = "com.example.fleet:/cb"
UPSTREAM = "items"
PROVIDER_CLIENT_SECRET = "fleet-secret"
# The tables whose row counts the soak follows (and the invariants read).
TABLES = ["sessions", "accounts", "upstream_grants", "upstream_access_tokens", "devices", "pending_logins",
          "handoff_codes", "rate_limit_buckets", "upstream_revocations", "transfer_codes", "revoked_refresh_tokens",
          "logout_token_ids"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_ok(url: str, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return 200 <= answer.status < 300
    except Exception:
        return False


def wait_until(predicate, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise TimeoutError(f"fleet: {what} within {timeout:.0f} s")


def default_binary() -> str:
    """TOKENGATE_BINARY, else the release build bench/lib.sh makes (built beforehand)."""
    if os.environ.get("TOKENGATE_BINARY"):
        return os.environ["TOKENGATE_BINARY"]
    return os.path.join(REPO, ".build", "release", "tokengate")


class Instance:
    """One `tokengate serve` with its own configuration file, log, public and admin ports."""

    def __init__(self, stack: "Stack", index: int):
        self.stack, self.index = stack, index
        self.port, self.admin_port = free_port(), free_port()
        self.config_path = os.path.join(stack.work, f"tokengate-{index}.yaml")
        self.process = None
        self.generation = 0  # starts so far; each start logs to its own file
        self.logs = []  # every log file this instance wrote, oldest first
        self.exits = []  # (signal name or None, exit code) of every stop

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    @property
    def pid(self):
        return self.process.pid if self.process and self.process.poll() is None else None

    @property
    def log_path(self) -> str:
        return self.logs[-1]

    def start(self, wait: bool = True, timeout: float = 30):
        assert self.pid is None, f"instance {self.index} is running"
        self.generation += 1
        log = os.path.join(self.stack.work, f"tokengate-{self.index}.{self.generation}.log")
        self.logs.append(log)
        with open(log, "wb") as out:
            self.process = subprocess.Popen([self.stack.binary, "serve", "--config", self.config_path],
                                            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.stack.record(self.process)
        if wait:
            self.wait_ready(timeout)

    def ready(self) -> bool:
        return http_ok(self.url + "/readyz")

    def wait_ready(self, timeout: float = 30):
        def up():
            if self.process.poll() is not None:
                raise RuntimeError(f"fleet: instance {self.index} exited with {self.process.returncode}: "
                                   + open(self.log_path, errors="replace").read()[-2000:])
            return self.ready()
        wait_until(up, timeout, f"instance {self.index} ready on {self.url}")

    def send_signal(self, number: int):
        if self.pid:
            self.process.send_signal(number)

    def wait_exit(self, timeout: float = 30) -> int:
        code = self.process.wait(timeout)
        return code

    def stop(self, how: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Sends `how` (SIGTERM: a drain; SIGKILL) and waits for the exit; returns the exit code."""
        if self.pid is None:
            return self.process.returncode if self.process else 0
        self.send_signal(how)
        try:
            code = self.wait_exit(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self.exits.append((signal.Signals(how).name, code))
        return code

    def terminate(self, timeout: float = 30) -> int:
        return self.stop(signal.SIGTERM, timeout)

    def kill(self) -> int:
        return self.stop(signal.SIGKILL)

    def restart(self, how: int = signal.SIGTERM, timeout: float = 30) -> float:
        """Stops it (a drain with SIGTERM), starts the replacement on the same ports and waits for
        /readyz; returns the seconds from the signal to ready."""
        started = time.monotonic()
        self.stop(how, timeout)
        self.start(wait=True, timeout=timeout)
        return time.monotonic() - started

    def proc_status(self) -> dict:
        """Resident memory (KiB) and open descriptors, from /proc; {} when not running."""
        pid = self.pid
        if pid is None:
            return {}
        try:
            rss = next(int(line.split()[1]) for line in open(f"/proc/{pid}/status") if line.startswith("VmRSS:"))
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            threads = len(os.listdir(f"/proc/{pid}/task"))
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            return {}
        return {"rss_kib": rss, "fds": fds, "threads": threads}

    def log_lines(self, all_generations: bool = True):
        """The JSON lines of its logs (non-JSON lines as {"raw": line})."""
        for path in (self.logs if all_generations else self.logs[-1:]):
            with open(path, errors="replace") as f:
                for line in f:
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        yield json.loads(line)
                    except ValueError:
                        yield {"raw": line}


class Stack:
    """PostgreSQL, the fakes, `instances` TokenGates and (with `nginx`) nginx in front of them.

    keys: the `encryption` keys as [(id, base64 secret)], the first current; `set_keys` rewrites
    every configuration (a roll then applies it). settings: extra `server:` keys, as YAML flow text.
    """

    def __init__(self, instances: int = 3, nginx: bool = True, access_ttl: int = 20, database_url: str = None,
                 binary: str = None, work: str = None, log_level: str = "info", pool_size: int = 4,
                 sweeper_interval: int = 10, drain_timeout: int = 10, settings: str = "", sessions: str = ""):
        self.work = work or os.environ.get("FLEET_WORK") or tempfile.mkdtemp(prefix="tokengate-fleet.")
        os.chmod(self.work, 0o755)  # PostgreSQL's user reaches its data directory through it
        self.binary = binary or default_binary()
        self.external_database = database_url
        self.database_url = database_url
        self.pg_port = free_port()
        self.provider_port, self.api_port = free_port(), free_port()
        self.nginx_port = free_port() if nginx else None
        self.use_nginx = nginx
        self.access_ttl, self.log_level, self.pool_size = access_ttl, log_level, pool_size
        self.sweeper_interval, self.drain_timeout = sweeper_interval, drain_timeout
        self.settings, self.sessions = settings, sessions
        self.keys = [("k1", base64.b64encode(secrets.token_bytes(32)).decode())]
        self.current_key = "k1"
        self.instances = [Instance(self, i) for i in range(instances)]
        self.fakes = None
        self.nginx = None
        self.pg_started = False

    # Life cycle.
    def record(self, process: subprocess.Popen):
        """Notes a child's pid in WORK/pids, for bench/fleet.sh's cleanup should this process be killed."""
        with open(os.path.join(self.work, "pids"), "a") as f:
            f.write(f"{process.pid}\n")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        self.start_database()
        self.start_fakes()
        self.write_configs()
        self.migrate()
        for instance in self.instances:
            instance.start(wait=False)
        for instance in self.instances:
            instance.wait_ready()
        if self.use_nginx:
            self.start_nginx()
        return self

    def stop(self, keep_work: bool = False):
        for instance in self.instances:
            if instance.pid:
                instance.process.kill()
                instance.process.wait()
        for child in (self.nginx, self.fakes):
            if child and child.poll() is None:
                child.terminate()
                try:
                    child.wait(5)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
        self.nginx = self.fakes = None
        if self.pg_started:
            subprocess.run([os.path.join(REPO, "scripts", "pg.sh"), "stop", os.path.join(self.work, "pg"), str(self.pg_port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.pg_started = False
        if not keep_work and os.environ.get("FLEET_KEEP") != "1":
            shutil.rmtree(self.work, ignore_errors=True)

    @property
    def entry_url(self) -> str:
        """Where apps connect: nginx, or the first instance without nginx."""
        return f"https://127.0.0.1:{self.nginx_port}" if self.use_nginx else self.instances[0].url

    @property
    def public_base_url(self) -> str:
        return self.entry_url

    # PostgreSQL.
    def start_database(self):
        if self.external_database:
            return
        out = subprocess.run([os.path.join(REPO, "scripts", "pg.sh"), "start", os.path.join(self.work, "pg"), str(self.pg_port)],
                             check=True, capture_output=True, text=True)
        self.pg_started = True
        self.database_url = out.stdout.strip().splitlines()[-1]

    def psql(self, sql: str) -> list:
        """Rows of a query (lists of strings), through psql."""
        out = subprocess.run(["psql", self.database_url, "-qAtX", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", sql],
                             check=True, capture_output=True, text=True, timeout=30)
        return [line.split("\t") for line in out.stdout.splitlines() if line]

    def table_counts(self) -> dict:
        present = {r[0] for r in self.psql("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
        tables = [t for t in TABLES if t in present]
        sql = " UNION ALL ".join(f"SELECT '{t}', count(*) FROM {t}" for t in tables)
        return {name: int(count) for name, count in self.psql(sql)}

    def connection_count(self) -> int:
        return int(self.psql("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")[0][0])

    # The fakes.
    def start_fakes(self):
        log = open(os.path.join(self.work, "fakes.log"), "wb")
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(__file__)))
        self.fakes = subprocess.Popen([sys.executable, "-m", "fleet.fakes", str(self.provider_port), str(self.api_port),
                                       "--access-ttl", str(self.access_ttl), "--client-secret", PROVIDER_CLIENT_SECRET],
                                      stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        self.record(self.fakes)
        wait_until(lambda: http_ok(f"{self.provider_url}/.well-known/openid-configuration"), 20, "the fake provider up")

    @property
    def provider_url(self) -> str:
        return f"http://127.0.0.1:{self.provider_port}"

    def provider_stats(self) -> dict:
        with urllib.request.urlopen(self.provider_url + "/stats", timeout=10) as answer:
            return json.load(answer)

    def provider_history(self, sub: str) -> list:
        """The provider's and the API's last 80 events for a user (what a failure report shows)."""
        with urllib.request.urlopen(self.provider_url + "/history?sub=" + urllib.parse.quote(sub), timeout=10) as answer:
            return json.load(answer)

    def provider_control(self, **faults) -> dict:
        request = urllib.request.Request(self.provider_url + "/control", data=json.dumps(faults).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.load(answer)

    # TokenGate's configuration and commands.
    def set_keys(self, keys: list, current: str):
        """The key ring every instance gets at its next start (and `tokengate` commands at once)."""
        self.keys, self.current_key = keys, current
        self.write_configs()

    def config_text(self, instance: Instance) -> str:
        keys = ", ".join(f'{{ id: {k}, secret: "{s}" }}' for k, s in self.keys)
        server = (f'host: 127.0.0.1, port: {instance.port}, public_base_url: "{self.public_base_url}", '
                  f'trusted_proxies: [127.0.0.1], drain_timeout_seconds: {self.drain_timeout}')
        if self.settings:
            server += ", " + self.settings
        return f"""# Written by bench/fleet (fleet/cluster.py) for instance {instance.index}.
server: {{ {server} }}
admin: {{ host: 127.0.0.1, port: {instance.admin_port} }}
database: {{ url: "{self.database_url}", pool_size: {self.pool_size} }}
log: {{ level: {self.log_level}, access_log: false }}
sweeper: {{ interval_seconds: {self.sweeper_interval} }}
{f"sessions: {{ {self.sessions} }}" if self.sessions else ""}
encryption: {{ current_key_id: {self.current_key}, keys: [{keys}] }}
clients: [{{ client_id: {CLIENT_ID}, redirect_uris: ["{REDIRECT_URI}"] }}]
providers:
  - {{ name: fleet, kind: oidc, issuer: "{self.provider_url}", client_id: tokengate, client_secret: {PROVIDER_CLIENT_SECRET},
      scopes: [openid, profile, email, offline_access] }}
upstreams:
  - {{ name: {UPSTREAM}, base_url: "http://127.0.0.1:{self.api_port}", provider: fleet, scopes: [api], path_prefixes: ["/items"] }}
"""

    def write_configs(self):
        for instance in self.instances:
            with open(instance.config_path, "w") as f:
                f.write(self.config_text(instance))

    def tokengate(self, *args, check: bool = False, timeout: float = 120) -> subprocess.CompletedProcess:
        """`tokengate ARGS --config <instance 0's file>` (migrate, sweep, keys rotate, …)."""
        return subprocess.run([self.binary, *args, "--config", self.instances[0].config_path], capture_output=True,
                              text=True, check=check, timeout=timeout)

    def migrate(self):
        self.tokengate("migrate", check=True)

    # nginx.
    def start_nginx(self):
        directory = os.path.join(self.work, "nginx")
        os.makedirs(directory, exist_ok=True)
        cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                       check=True, capture_output=True)
        site = open(os.path.join(REPO, "deploy", "nginx", "tokengate.conf")).read()
        servers = "\n    ".join(f"server 127.0.0.1:{i.port};" for i in self.instances)
        site, replaced = re.subn(r"server __TOKENGATE__;", servers, site)
        assert replaced == 1, "deploy/nginx/tokengate.conf: no `server __TOKENGATE__;` line in its upstream block"
        site = (site.replace("__LISTEN__", f"127.0.0.1:{self.nginx_port}").replace("__SERVER_NAME__", "127.0.0.1")
                .replace("__CERTIFICATE_KEY__", key).replace("__CERTIFICATE__", cert))
        with open(os.path.join(directory, "tokengate.conf"), "w") as f:
            f.write(site)
        temp = {name: os.path.join(directory, name) for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
        main = f"""daemon off;
worker_processes 1;
pid {directory}/nginx.pid;
error_log {directory}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log {directory}/access.log combined;
    # Which instance answered (bench/fleet records it with each failure).
    add_header X-Fleet-Upstream $upstream_addr always;
    client_body_temp_path {temp["body"]};
    proxy_temp_path {temp["proxy"]};
    fastcgi_temp_path {temp["fastcgi"]};
    uwsgi_temp_path {temp["uwsgi"]};
    scgi_temp_path {temp["scgi"]};
    include {directory}/tokengate.conf;
}}
"""
        conf = os.path.join(directory, "nginx.conf")
        with open(conf, "w") as f:
            f.write(main)
        self.nginx = subprocess.Popen(["nginx", "-p", directory, "-c", conf], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=open(os.path.join(directory, "stderr.log"), "wb"))
        self.record(self.nginx)
        import ssl
        context = ssl._create_unverified_context()

        def up():
            if self.nginx.poll() is not None:
                raise RuntimeError("fleet: nginx exited: " + open(os.path.join(directory, "error.log")).read()[-2000:])
            try:
                with urllib.request.urlopen(self.entry_url + "/readyz", timeout=1, context=context) as answer:
                    return answer.status == 200
            except Exception:
                return False
        wait_until(up, 20, "nginx up")

    def nginx_error_log(self) -> str:
        path = os.path.join(self.work, "nginx", "error.log")
        return open(path, errors="replace").read() if os.path.exists(path) else ""

    # Rolls.
    def rolling_restart(self, how: int = signal.SIGTERM, pause: float = 0.0, on_step=None) -> list:
        """Restarts every instance in turn (each ready before the next stops); returns the seconds
        each took from its signal to ready. `on_step(instance, seconds)` hears each."""
        took = []
        for instance in self.instances:
            seconds = instance.restart(how)
            took.append(seconds)
            if on_step:
                on_step(instance, seconds)
            time.sleep(pause)
        return took

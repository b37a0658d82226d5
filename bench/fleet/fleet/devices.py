"""Simulated devices: apps that sign in through TokenGate and use it, each in a thread.

    from fleet.devices import Load
    load = Load(stack.entry_url, devices=24, duration=60, interval=1.0)
    load.start(); load.join()                   # stops by itself after `duration` seconds
    print(load.summary())

Each device is one user (`fleet-<run>-<n>`) on one app installation, with its own client address
(sent as X-Forwarded-For, which nginx and TokenGate pass on: rate limits key on it). It signs in
(GET /auth/login with PKCE → the provider's /authorize, which approves the login_hint → TokenGate's
callback → the app's redirect with a handoff code → POST /auth/token), then every `interval`
seconds (±20 %) does one of `Load.WEIGHTS`:

- `me`: GET /auth/me (200);
- `api`: GET /api/items/items/<n> (200); one in five (`api_slow`) answered 200–800 ms late by
  the API, so that requests are in flight when an instance drains; `api_forced`: the same with ?invalidate=<id>, so the
  fake API refuses the upstream token once and TokenGate refreshes it and retries;
- `api_post`: POST /api/items/items (201);
- `refresh`: POST /auth/token grant_type=refresh_token; the rotated refresh token is kept before
  the new access token is used;
- `transfer`: POST /auth/transfer, then redeem the code as a fresh install would: the device
  continues with the new tokens, and the old access token must stop working;
- `relogin`: POST /auth/logout, then sign in again; the old tokens must stop working.

GETs are idempotent and are not retried by the device (nginx may retry them on another instance).
POSTs are retried as an app does: up to 3 times after a transport error, 502, 503 or 504, after
0.5 s or the answer's Retry-After (at most 2 s), and once at once after an API's 401
`invalid_token` that TokenGate passed on (it retries only idempotent calls itself); such first
attempts are counted as `retried`.
An answer that says the session is over (TokenGate's own 401, `invalid_grant`,
`interaction_required`; an API's 401 passed on is a failed call) when it
should be live counts as `signin_again`, and the device signs in again. Old tokens after a logout
or transfer are checked 2 s later (the `after_logout` and `after_transfer` checks: 401 and
`invalid_grant` expected). At the end every device refreshes once more with the token it holds
(the `final_refresh`: every rotated refresh token the app kept must work).
"""

import base64
import hashlib
import random
import secrets
import threading
import time
import urllib.parse
import uuid
import warnings

import requests
import urllib3

from .cluster import CLIENT_ID, REDIRECT_URI, UPSTREAM

warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)

RETRYABLE = {502, 503, 504}
# TokenGate forces an upstream refresh after an API's 401 at most once per account every 30 s and
# otherwise passes the 401 on (docs/proxy.md): a device makes one such call per 35 s at most,
# counted from when TokenGate forced its refresh. That is the forced call itself when it was
# answered; when it was not (a 503 in a failover's window), TokenGate forces the refresh at the
# device's next API call that finds the token revoked, so the spacing counts from that call's answer.
FORCED_SPACING = 35.0
API_KINDS = {"api", "api_slow", "api_post", "api_forced"}
TRANSFER_GRANT = "urn:tokengate:params:oauth:grant-type:transfer-code"


def pkce():
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def percentile(sorted_values: list, p: float) -> float:
    if not sorted_values:
        return 0.0
    k = min(len(sorted_values) - 1, max(0, int(round(p / 100 * (len(sorted_values) - 1)))))
    return sorted_values[k]


class SignInAgain(Exception):
    """TokenGate said this session is over."""


class Load:
    """`devices` simulated devices against `base_url` for `duration` seconds (then they stop)."""

    WEIGHTS = {"api": 40, "api_forced": 6, "api_post": 6, "me": 14, "refresh": 22, "transfer": 4, "relogin": 4}

    def __init__(self, base_url: str, devices: int = 24, duration: float = 60, interval: float = 1.0,
                 weights: dict = None, seed: int = None, timeout: float = 15, history=None):
        self.base_url, self.count, self.duration, self.interval = base_url.rstrip("/"), devices, duration, interval
        self.weights = dict(weights or self.WEIGHTS)
        self.timeout = timeout
        self.history = history  # user -> the provider's recent events (Stack.provider_history), kept with failures
        self.run_id = secrets.token_hex(3)
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.outcomes = {}  # (kind, outcome) -> count; outcome: ok, failed, retried, signin_again, …
        self.failures = []  # every failure: dict(t, device, kind, method, path, status, body, error)
        self.samples = []  # (t since start, kind, seconds) of every answered request
        self.started = None
        self.stop_event = threading.Event()
        self.devices = [Device(self, i) for i in range(devices)]
        self.threads = []

    # Running.
    def start(self):
        self.started = time.monotonic()
        for device in self.devices:
            thread = threading.Thread(target=device.run, name=f"device-{device.index}", daemon=True)
            self.threads.append(thread)
            thread.start()
            time.sleep(min(0.05, self.interval / max(1, self.count)))
        threading.Thread(target=self.timer, daemon=True).start()
        return self

    def timer(self):
        self.stop_event.wait(self.duration)
        self.stop_event.set()

    def stop(self):
        self.stop_event.set()

    def join(self, timeout: float = None):
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self.threads:
            thread.join(None if deadline is None else max(0.1, deadline - time.monotonic()))

    def elapsed(self) -> float:
        return time.monotonic() - self.started if self.started else 0.0

    # Records.
    def count_outcome(self, kind: str, outcome: str):
        with self.lock:
            self.outcomes[(kind, outcome)] = self.outcomes.get((kind, outcome), 0) + 1

    def sample(self, kind: str, seconds: float):
        with self.lock:
            self.samples.append((self.elapsed(), kind, seconds))

    def fail(self, device, kind: str, outcome: str, method: str, path: str, status, body: str, error: str = None,
             upstream: str = None):
        self.count_outcome(kind, outcome)
        history = None
        if outcome != "retried" and self.history is not None and len(self.failures) < 50:
            try:
                history = self.history(device.user)  # the provider's view, as it was at the failure
            except Exception as problem:
                history = str(problem)
        with self.lock:
            self.failures.append({"t": round(self.elapsed(), 2), "wall": round(time.time(), 3), "device": device.index,
                                  "user": device.user, "kind": kind, "outcome": outcome, "method": method,
                                  "path": path.split("?")[0], "status": status, "body": (body or "")[:300], "error": error,
                                  "upstream": upstream, "recent": list(device.recent), "provider_history": history})

    def total(self, outcome: str, kinds=None) -> int:
        with self.lock:
            return sum(n for (k, o), n in self.outcomes.items() if o == outcome and (kinds is None or k in kinds))

    def latencies(self, since: float = 0.0, until: float = None, kinds=None) -> dict:
        """p50/p90/p99/max in ms and the count of the samples in [since, until)."""
        with self.lock:
            values = sorted(s for t, k, s in self.samples if t >= since and (until is None or t < until)
                            and (kinds is None or k in kinds))
        return {"count": len(values), "p50_ms": round(percentile(values, 50) * 1000, 1),
                "p90_ms": round(percentile(values, 90) * 1000, 1), "p99_ms": round(percentile(values, 99) * 1000, 1),
                "max_ms": round((values[-1] if values else 0) * 1000, 1)}

    def summary(self) -> dict:
        with self.lock:
            outcomes = {f"{k}.{o}": n for (k, o), n in sorted(self.outcomes.items())}
        kinds = sorted({k for k, _ in self.outcomes})
        return {"devices": self.count, "seconds": round(self.elapsed(), 1), "outcomes": outcomes,
                "latency": {k: self.latencies(kinds={k}) for k in kinds}, "latency_all": self.latencies(),
                "failures": list(self.failures)}

    def signed_in_users(self) -> set:
        return {d.user for d in self.devices if d.refresh_token}


class Device:
    def __init__(self, load: Load, index: int):
        self.load, self.index = load, index
        self.user = f"fleet-{load.run_id}-{index}"
        self.address = f"10.77.{index // 250}.{index % 250 + 1}"
        self.random = random.Random(load.random.random())
        self.http = requests.Session()
        self.http.verify = False
        self.http.headers["X-Forwarded-For"] = self.address
        self.access_token = self.refresh_token = None
        self.checks = []  # (due, kind, access token, refresh token): old credentials that must be dead
        self.logins = 0
        self.forced_at = -FORCED_SPACING
        self.forced_pending = False  # a forced call went unanswered: its refresh is still to come
        self.recent = []  # the last answers: (wall time, kind, status, instance), kept with each failure

    # HTTP.
    def request(self, kind: str, method: str, path: str, expect, retry: bool, **kwargs):
        """One call; returns the answer when its status is in `expect`, else records a failure and
        returns None (or raises SignInAgain when the session is over)."""
        url = path if path.startswith("http") else self.load.base_url + path
        attempts = 4 if retry else 1
        for attempt in range(attempts):
            started = time.monotonic()
            try:
                answer = self.http.request(method, url, timeout=self.load.timeout, allow_redirects=False, verify=False,
                                             **kwargs)
            except requests.RequestException as error:
                if attempt + 1 < attempts and not self.load.stop_event.is_set():
                    self.load.fail(self, kind, "retried", method, path, None, "", type(error).__name__)
                    time.sleep(0.5)
                    continue
                self.load.fail(self, kind, "failed", method, path, None, "", f"{type(error).__name__}: {error}")
                return None
            self.load.sample(kind, time.monotonic() - started)
            if kind in API_KINDS and self.forced_pending:
                self.forced_at = time.monotonic()
                self.forced_pending = answer.status_code not in expect
            upstream = answer.headers.get("X-Fleet-Upstream")
            self.recent.append((round(time.time(), 3), kind, answer.status_code, upstream))
            del self.recent[:-8]
            if answer.status_code in expect:
                self.load.count_outcome(kind, "ok")
                return answer
            if answer.status_code in RETRYABLE and attempt + 1 < attempts:
                self.load.fail(self, kind, "retried", method, path, answer.status_code, answer.text, upstream=upstream)
                try:
                    delay = min(2.0, float(answer.headers.get("Retry-After", "0.5")))
                except ValueError:
                    delay = 0.5
                time.sleep(delay)
                continue
            if retry and attempt == 0 and self.api_refused_token(answer):
                # As an app does (and TokenGate itself for idempotent calls): one more try after an
                # API refused the upstream token; TokenGate sends a fresh one, or answers 503 when
                # it cannot get one now.
                self.load.fail(self, kind, "retried", method, path, answer.status_code, answer.text, upstream=upstream)
                continue
            if self.session_over(answer):
                self.load.fail(self, kind, "signin_again", method, path, answer.status_code, answer.text, upstream=upstream)
                raise SignInAgain()
            self.load.fail(self, kind, "failed", method, path, answer.status_code, answer.text, upstream=upstream)
            return None
        return None

    @staticmethod
    def api_refused_token(answer) -> bool:
        """An API's 401 `invalid_token` that TokenGate passed on (a call it does not retry itself)."""
        return (answer.status_code == 401 and "problem+json" not in answer.headers.get("Content-Type", "")
                and "invalid_token" in answer.headers.get("WWW-Authenticate", ""))

    @staticmethod
    def session_over(answer) -> bool:
        # TokenGate's own 401 is problem+json; an API's 401 that TokenGate passed on is not the
        # session's end (the call failed).
        if answer.status_code == 401:
            return "problem+json" in answer.headers.get("Content-Type", "")
        if answer.status_code == 400:
            try:
                error = answer.json().get("error") or answer.json().get("code")
            except ValueError:
                return False
            return error in ("invalid_grant", "interaction_required", "login_required")
        return False

    def bearer(self) -> dict:
        return {"Authorization": f"Bearer {self.access_token}"}

    # The flows.
    def login(self) -> bool:
        verifier, challenge = pkce()
        state = secrets.token_urlsafe(12)
        start = self.request("login", "GET", "/auth/login?" + urllib.parse.urlencode({
            "client_id": CLIENT_ID, "redirect_uri": REDIRECT_URI, "response_type": "code", "state": state,
            "code_challenge": challenge, "code_challenge_method": "S256", "login_hint": self.user}),
            {200}, retry=False, headers={"Accept": "application/json"})
        if start is None:
            return False
        # The browser at the provider (which approves login_hint) and back to TokenGate's callback.
        at_provider = self.request("authorize", "GET", start.json()["authorization_url"], {302}, retry=False)
        if at_provider is None:
            return False
        callback = self.request("callback", "GET", at_provider.headers["Location"], {302}, retry=False)
        if callback is None:
            return False
        app = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(callback.headers["Location"]).query))
        if app.get("state") != state or "code" not in app:
            self.load.fail(self, "callback", "failed", "GET", "/auth/callback", 302, callback.headers["Location"])
            return False
        tokens = self.request("redeem", "POST", "/auth/token", {200}, retry=True, data={
            "grant_type": "authorization_code", "code": app["code"], "code_verifier": verifier,
            "redirect_uri": REDIRECT_URI, "client_id": CLIENT_ID})
        if tokens is None:
            return False
        body = tokens.json()
        self.refresh_token, self.access_token = body["refresh_token"], body["access_token"]
        self.logins += 1
        return True

    def refresh(self, kind: str = "refresh"):
        answer = self.request(kind, "POST", "/auth/token", {200}, retry=True, data={
            "grant_type": "refresh_token", "refresh_token": self.refresh_token, "client_id": CLIENT_ID})
        if answer is not None:
            body = answer.json()
            # The rotated refresh token first: it is the one that must survive.
            self.refresh_token = body["refresh_token"]
            self.access_token = body["access_token"]

    def transfer(self):
        keep, kept = pkce()
        created = self.request("transfer", "POST", "/auth/transfer", {200, 201}, retry=True, headers=self.bearer(),
                               data={"code_challenge": kept, "code_challenge_method": "S256"})
        if created is None:
            return
        redeemed = self.request("transfer_redeem", "POST", "/auth/token", {200}, retry=True, data={
            "grant_type": TRANSFER_GRANT, "transfer_code": created.json()["transfer_code"], "code_verifier": keep,
            "client_id": CLIENT_ID})
        if redeemed is None:
            return
        body = redeemed.json()
        old = (self.access_token, self.refresh_token)
        self.refresh_token, self.access_token = body["refresh_token"], body["access_token"]
        self.checks.append((time.monotonic() + 2, "after_transfer", *old))

    def relogin(self):
        answer = self.request("logout", "POST", "/auth/logout", {200}, retry=True, headers=self.bearer())
        if answer is None:
            return
        self.checks.append((time.monotonic() + 2, "after_logout", self.access_token, self.refresh_token))
        self.access_token = self.refresh_token = None
        self.login()

    def verify_dead(self, kind: str, access: str, refresh: str):
        """Old credentials after a logout or transfer: /auth/me 401, refresh invalid_grant."""
        me = self.request(kind, "GET", "/auth/me", {401}, retry=False, headers={"Authorization": f"Bearer {access}"})
        if kind == "after_logout":
            self.request(kind, "POST", "/auth/token", {400}, retry=True, data={
                "grant_type": "refresh_token", "refresh_token": refresh, "client_id": CLIENT_ID})
        return me

    def step(self):
        now = time.monotonic()
        due = [c for c in self.checks if c[0] <= now]
        self.checks = [c for c in self.checks if c[0] > now]
        for _, kind, access, refresh in due:
            try:
                self.verify_dead(kind, access, refresh)
            except SignInAgain:
                pass  # a 401 or invalid_grant is what these checks expect; any other is recorded
        action = self.random.choices(list(self.load.weights), weights=list(self.load.weights.values()))[0]
        if action == "me":
            self.request("me", "GET", "/auth/me", {200}, retry=False, headers=self.bearer())
        elif action == "api_forced" and now - self.forced_at >= FORCED_SPACING:
            self.forced_at = now
            if self.request("api_forced", "GET", f"/api/{UPSTREAM}/items/forced?invalidate={uuid.uuid4().hex}", {200},
                            retry=False, headers=self.bearer()) is None:
                self.forced_pending = True
        elif action in ("api", "api_forced"):
            # One in five takes the API a while: requests in flight when an instance drains.
            slow = f"?delay_ms={self.random.randrange(200, 800)}" if self.random.random() < 0.2 else ""
            self.request("api_slow" if slow else "api", "GET", f"/api/{UPSTREAM}/items/{self.random.randrange(100)}{slow}",
                         {200}, retry=False, headers=self.bearer())
        elif action == "api_post":
            self.request("api_post", "POST", f"/api/{UPSTREAM}/items", {201}, retry=True, headers=self.bearer(),
                         json={"device": self.index, "at": time.time()})
        elif action == "refresh":
            self.refresh()
        elif action == "transfer":
            self.transfer()
        elif action == "relogin":
            self.relogin()

    def run(self):
        load = self.load
        try:
            while not load.stop_event.is_set():
                try:
                    if self.refresh_token is None:
                        if not self.login():
                            load.stop_event.wait(1.0)
                            continue
                    self.step()
                except SignInAgain:
                    self.access_token = self.refresh_token = None
                    continue
                except Exception as error:  # a bug here must not end the device silently
                    load.fail(self, "device", "failed", "-", "-", None, "", f"{type(error).__name__}: {error}")
                load.stop_event.wait(load.interval * self.random.uniform(0.8, 1.2))
            # Old credentials still to check, and the last rotated refresh token must work.
            for _, kind, access, refresh in self.checks:
                try:
                    self.verify_dead(kind, access, refresh)
                except SignInAgain:
                    pass
            self.checks = []
            if self.refresh_token:
                try:
                    self.refresh("final_refresh")
                except SignInAgain:
                    self.access_token = self.refresh_token = None
        finally:
            self.http.close()

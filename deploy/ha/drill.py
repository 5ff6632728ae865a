"""Failover drill (#34), `make drill`: the four services on the three-node Patroni cluster of
deploy/ha/cluster.sh, through HAProxy, under a write load of every kind that matters (rewards
earned through ads, support grants and spends, purchases, consents, queued answers).

1. failover: the leader's machine dies (kill -9 of Patroni and PostgreSQL); the synchronous
   replica is promoted. Every write the API acknowledged is found afterwards, every refusal during
   the switch is a 503 with the envelope (never a 500), and the services recover without a
   restart. Prints the time to recover and writes acknowledged / found.
2. lagging replica: the leader and its synchronous replica die together; the asynchronous replica
   that is left is not promoted (it may lack acknowledged commits): writes are refused with 503
   until the synchronous one is back, then nothing acknowledged is missing.
3. etcd down: the leader cannot renew its key and demotes itself: writes are refused with 503
   (never acknowledged on two leaders), and come back when etcd does.

Standard library only, plus `openssl` to sign the StoreKit transactions of the purchases.
"""
import base64
import concurrent.futures as cf
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

ROOT = os.path.abspath(os.path.dirname(os.path.abspath(__file__)) + "/../..")
HA = ROOT + "/.data/ha"
CLUSTER = ["bash", ROOT + "/deploy/ha/cluster.sh"]
HA_PORT = os.environ.get("HA_PORT", "25430")
SUPERUSER = os.environ.get("HA_SUPERUSER_PASSWORD", "ha-local-superuser")
PORTS = {"auth": 3001, "subscription": 3002, "offline": 3003, "ads": 3004}
DB = "app_backend"
RECOVERY_LIMIT = 30.0
sys.path.insert(0, ROOT + "/deploy/local")
from stackcall import call  # noqa: E402


REQUEST = threading.local()


def timed_call(*args, **kwargs):
    """`call`, noting in this thread when the request was sent."""
    REQUEST.started = time.time()
    return call(*args, **kwargs)


def node_answers(n):
    """Whether node n's Patroni REST API accepts a connection."""
    try:
        socket.create_connection(("127.0.0.1", 28430 + int(n)), timeout=0.5).close()
        return True
    except OSError:
        return False


def fail(msg):
    print("DRILL FAILED: " + msg, file=sys.stderr)
    sys.exit(1)


def psql(sql, db=DB):
    out = subprocess.run(["psql", "-X", "-tA", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", HA_PORT, "-U", "postgres", "-d", db, "-c", sql],
                         env=dict(os.environ, PGPASSWORD=SUPERUSER, PGCONNECT_TIMEOUT="5"), capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return [line for line in out.stdout.splitlines() if line]


def cluster(*args, check=True):
    out = subprocess.run(CLUSTER + list(args), capture_output=True, text=True)
    if check and out.returncode != 0:
        # What the cluster said is the diagnosis (a CI run that failed here printed only a traceback).
        fail("cluster.sh %s exited %d:\n%s%s" % (" ".join(args), out.returncode, out.stdout, out.stderr))
    return out.stdout.strip()


# ---- StoreKit: a signed transaction as the App Store sends it (the stack's local chain) ----

STOREKIT = ROOT + "/.data/storekit"


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def es256(message):
    der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", STOREKIT + "/leaf.key"], input=message, capture_output=True, check=True).stdout
    # DER SEQUENCE { INTEGER r, INTEGER s } -> r || s, 32 bytes each
    i = 2 if der[1] < 0x80 else 3
    rlen = der[i + 1]
    r = der[i + 2:i + 2 + rlen]
    j = i + 2 + rlen
    s = der[j + 2:j + 2 + der[j + 1]]
    return r.lstrip(b"\0").rjust(32, b"\0") + s.lstrip(b"\0").rjust(32, b"\0")


def signed_transaction(original):
    chain = [open(STOREKIT + "/%s.der.b64" % c).read().strip() for c in ("leaf", "inter", "root")]
    now = int(time.time() * 1000)
    header = b64url(json.dumps({"alg": "ES256", "x5c": chain}).encode())
    payload = b64url(json.dumps({"transactionId": original, "originalTransactionId": original, "bundleId": "com.quiz.geography",
                                 "productId": "com.quiz.premium.monthly", "purchaseDate": now - 5000, "expiresDate": now + 3600_000,
                                 "type": "Auto-Renewable Subscription", "environment": "Xcode", "signedDate": now}).encode())
    return header + "." + payload + "." + b64url(es256((header + "." + payload).encode()))


# ---- the services on the cluster ----

class Stack:
    def __init__(self):
        self.bin = subprocess.run(["swift", "build", "--show-bin-path"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        os.makedirs(HA + "/services", exist_ok=True)
        if not os.path.exists(STOREKIT + "/leaf.p8"):
            subprocess.run(["bash", ROOT + "/deploy/local/storekit_local.sh", STOREKIT], check=True, capture_output=True)
        self.env = dict(os.environ, DATABASE_HOST="127.0.0.1", DATABASE_PORT=HA_PORT, DATABASE_NAME=DB, DATA_DIR=HA + "/services",
                        ENVIRONMENT="local", LOG_LEVEL="warning", ACCESS_LOG_LEVEL="warning")
        self.procs = {}

    def prepare(self):
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", "db=" + DB, "-h", "127.0.0.1", "-p", HA_PORT, "-U", "postgres",
                        "-d", "postgres", "-f", ROOT + "/deploy/local/bootstrap.sql"],
                       env=dict(os.environ, PGPASSWORD=SUPERUSER, PGOPTIONS="-c client_min_messages=warning"), check=True, capture_output=True)
        for s in PORTS:
            subprocess.run([self.bin + "/%s-service" % s, "migrate"], env=self.env, check=True, capture_output=True)
        out = subprocess.run([self.bin + "/auth-service", "admin", "apps", "create", "--name", "Drill", "--env"], env=self.env, check=True,
                             capture_output=True, text=True).stdout
        app = dict(line.split("=", 1) for line in out.split() if "=" in line)
        self.app, self.key = app["APP_ID"], app["API_KEY"]
        subprocess.run([self.bin + "/subscription-service", "admin", "plans", "seed-defaults", "--app-id", self.app], env=self.env, check=True,
                       capture_output=True)
        subprocess.run([self.bin + "/ads-service", "admin", "set-provider", "--app-id", self.app, "--name", "admob", "--priority", "1", "--test-mode",
                        "--rewarded-unit", "test/rewarded"], env=self.env, check=True, capture_output=True)
        root = open(STOREKIT + "/root.der.b64").read().strip()
        self.env["APPLE_IAP_APPS"] = json.dumps({self.app: {"bundle_id": "com.quiz.geography", "environment": "Sandbox",
                                                            "root_certificates_der_base64": [root], "allow_local_environments": True}})
        self.tenant = {"X-App-ID": self.app, "X-API-Key": self.key}
        self.admin = dict(self.tenant, Authorization="Bearer local-admin-token")

    def start(self):
        for s in PORTS:
            log = open(HA + "/services/%s.log" % s, "a")
            self.procs[s] = subprocess.Popen([self.bin + "/%s-service" % s, "serve"], env=self.env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        deadline = time.time() + 60
        for s, port in PORTS.items():
            while call("GET", "http://127.0.0.1:%d/ready" % port, {})[0] != 200:
                if time.time() > deadline:
                    fail("%s is not ready on the cluster" % s)
                time.sleep(0.2)
        self.pids = {s: p.pid for s, p in self.procs.items()}

    def still_running(self):
        return [s for s, p in self.procs.items() if p.poll() is None and p.pid == self.pids[s]]

    def stop(self):
        for p in self.procs.values():
            p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()

    def url(self, service, path):
        return "http://127.0.0.1:%d/%s/v1%s" % (PORTS[service], service, path)

    def guest(self, i, account=False):
        """A player; with an account (e-mail) where the drill saves to the cloud: guests have none."""
        h = dict(self.tenant, **{"X-Forwarded-For": "10.%d.%d.%d" % (90 + i // 62500, (i // 250) % 250, i % 250 + 1)})
        credentials = ({"email": "drill-%s@example.com" % uuid.uuid4().hex[:12], "password": "Tr1cky-Geography-42!"} if account
                       else {"device_id": "drill-%s" % uuid.uuid4()})
        for _ in range(100):
            status, body = call("POST", self.url("auth", "/auth/register"), h, {"provider": "email" if account else "guest", "credentials": credentials})
            if status == 201:
                return body["user"]["id"].lower(), dict(self.tenant, Authorization="Bearer " + body["tokens"]["access_token"], **{"X-Country-Code": "US"})
            time.sleep(0.3)
        fail("sign-up: %s %s" % (status, body))


# ---- the write load ----

class Load:
    """Writers of each kind; every answer is either acknowledged (2xx, recorded to be found
    afterwards) or a 503 with the envelope. Anything else fails the drill."""

    def __init__(self, stack, users):
        self.stack, self.users = stack, users
        self.acked = {k: [] for k in ("consent", "grant", "spend", "purchase", "answer", "impression", "reward")}
        self.refused = 0
        self.bad = []
        self.last_ok = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.counter = 0

    def outcome(self, kind, status, body, record):
        # When the acknowledged request was sent: one sent before the leader died and answered
        # just after is no sign that writes are back.
        started = getattr(REQUEST, "started", time.time())
        if 200 <= status < 300:
            with self.lock:
                self.acked[kind].append(record)
                self.last_ok[kind] = max(self.last_ok.get(kind, 0), started)
            return True
        if status == 503 and isinstance(body.get("error"), str) and "message" in body:
            with self.lock:
                self.refused += 1
            return False
        if status == 0:  # the connection cut mid-answer: not acknowledged, so not counted
            return False
        with self.lock:
            self.bad.append((kind, status, str(body)[:300]))
        return False

    def next_id(self):
        with self.lock:
            self.counter += 1
            return self.counter

    def consents(self, k):
        uid, h = self.users[k]
        value = False
        while not self.stopping.is_set():
            value = not value
            status, body = timed_call("PATCH", self.stack.url("auth", "/auth/privacy"), h, {"consent_analytics": value}, timeout=10)
            self.outcome("consent", status, body, (uid, value))
            time.sleep(0.05)

    def credits(self, k):
        uid, _ = self.users[k]
        while not self.stopping.is_set():
            n = self.next_id()
            for kind, amount in (("grant", 2), ("spend", -1)):
                key = "drill-%s-%d" % (kind, n)
                h = dict(self.stack.admin, **{"Idempotency-Key": key})
                status, body = timed_call("POST", self.stack.url("subscription", "/admin/users/%s/credits" % uid), h,
                                    {"amount": amount, "reason": "failover drill"}, timeout=10)
                if status == 409:  # a spend before its grant came back: nothing taken, said so
                    continue
                self.outcome(kind, status, body, (uid, "support:" + key))
            time.sleep(0.05)

    def purchases(self, k):
        while not self.stopping.is_set():
            n = self.next_id()
            status, body = timed_call("POST", self.stack.url("auth", "/auth/register"),
                                dict(self.stack.tenant, **{"X-Forwarded-For": "10.200.%d.%d" % (n // 250 % 250, n % 250 + 1)}),
                                {"provider": "guest", "credentials": {"device_id": "drill-buyer-%s" % uuid.uuid4()}}, timeout=10)
            if status != 201:
                self.outcome("purchase", status, body, None)
                time.sleep(0.1)
                continue
            h = dict(self.stack.tenant, Authorization="Bearer " + body["tokens"]["access_token"])
            original = "9%014d" % (int(time.time() * 1000) % 10**10 * 1000 + n % 1000)
            tx = signed_transaction(original)
            status, body = timed_call("POST", self.stack.url("subscription", "/subscriptions/purchase"), h, {"store": "apple", "signed_transaction": tx},
                                timeout=10)
            self.outcome("purchase", status, body, original)
            time.sleep(0.05)

    def answers(self, k):
        uid, h = self.users[k]
        while not self.stopping.is_set():
            action = "drill-%d-%s" % (k, uuid.uuid4())
            status, body = timed_call("POST", self.stack.url("offline", "/sync/queue"), h, {"client_action_id": action, "action_type": "stats_ping",
                                "entity_type": "session", "entity_id": "s", "payload": {"k": k}}, timeout=10)
            self.outcome("answer", status, body, action)
            time.sleep(0.03)

    def rewards(self, pending):
        """Completes the rewarded views requested before the load (the ads have played), one
        after another through the switch; a refused completion is tried again, as an app does."""
        for uid, h, ad in pending:
            # The impression first, until it is acknowledged: an app whose impression report was
            # refused (503 during the switch) reports it again before it completes the ad. A
            # completion then refused with ad_not_shown would mean an acknowledged impression lost.
            shown = False
            while not shown and not self.stopping.is_set():
                status, body = timed_call("POST", self.stack.url("ads", "/ads/%s/impression" % ad), h, {"loaded": True, "shown": True}, timeout=10)
                shown = self.outcome("impression", status, body, ad)
                if not shown:
                    time.sleep(0.2)
            while shown and not self.stopping.is_set():
                status, body = timed_call("POST", self.stack.url("ads", "/ads/%s/complete" % ad), h,
                                    {"completed": True, "clicked": False, "display_duration_ms": 24500}, timeout=10)
                # A completion whose answer was lost is answered again (200, the same reward) on retry.
                if 200 <= status < 300 and body.get("reward_granted") is not True:
                    with self.lock:
                        self.bad.append(("reward", status, str(body)[:300]))
                    break
                if self.outcome("reward", status, body, uid):
                    break
                time.sleep(0.2)
            time.sleep(0.15)


def found(stack, load):
    """Every acknowledged write, looked up in the cluster's new leader."""
    out = {}
    consent_users = {}
    for uid, value in load.acked["consent"]:
        consent_users[uid] = value  # the last acknowledged value of each user
    stored = dict(r.split("|") for r in psql("SELECT user_id, consent_analytics FROM auth.privacy_settings WHERE user_id IN (%s)"
                                             % ",".join("'%s'" % u for u in consent_users)))
    out["consent"] = sum(1 for u, v in consent_users.items() if stored.get(u) == ("t" if v else "f"))
    out["consent_of"] = len(consent_users)
    refs = set(psql("SELECT reference_id FROM subscription.credit_ledger WHERE source LIKE 'support%' AND reference_id LIKE 'support:drill-%'"))
    for kind in ("grant", "spend"):
        out[kind] = sum(1 for _, ref in load.acked[kind] if ref in refs)
    originals = set(psql("SELECT store_original_transaction_id FROM subscription.subscriptions WHERE store_original_transaction_id LIKE '9%'"))
    out["purchase"] = sum(1 for o in load.acked["purchase"] if o in originals)
    actions = set(psql("SELECT client_action_id FROM offline.sync_queue WHERE client_action_id LIKE 'drill-%'"))
    out["answer"] = sum(1 for a in load.acked["answer"] if a in actions)
    return out


def agree(stack, load, rewarded_users, deadline_s=60):
    """The facts that cross services agree: each rewarded user's credit arrived (once), each
    buyer's Premium reached ads."""
    deadline = time.time() + deadline_s
    while True:
        credited = set(psql("SELECT user_id FROM subscription.credit_ledger WHERE source = 'ad_reward' AND user_id IN (%s) GROUP BY user_id HAVING count(*) = 1"
                            % ",".join("'%s'" % u for u in rewarded_users))) if rewarded_users else set()
        twice = psql("SELECT user_id FROM subscription.credit_ledger WHERE source = 'ad_reward' GROUP BY user_id HAVING count(*) > 1")
        if twice:
            fail("a reward was credited twice: %s" % twice[:3])
        if len(credited) == len(rewarded_users):
            return len(credited)
        if time.time() > deadline:
            fail("rewards acknowledged by ads but not credited after %d s: %d of %d" % (deadline_s, len(credited), len(rewarded_users)))
        time.sleep(1)


def wait_writes(stack, h, limit):
    """Seconds until a write is acknowledged again (a 503 with the envelope meanwhile)."""
    start = time.time()
    while time.time() - start < limit:
        status, body = timed_call("POST", stack.url("offline", "/sync/queue"), h, {"client_action_id": "probe-%s" % uuid.uuid4(), "action_type": "stats_ping",
                            "entity_type": "session", "entity_id": "probe", "payload": {}}, timeout=5)
        if status == 201:
            return time.time() - start
        if status not in (0, 503) or (status == 503 and "error" not in body):
            fail("a write during the switch: %s %s" % (status, body))
        time.sleep(0.2)
    return None


def failover(stack):
    users = [stack.guest(i, account=True) for i in range(16)]
    # Rewarded views requested now, completed during the load (the server checks the display
    # time against the time since the request: the ads play meanwhile).
    viewers = [stack.guest(100 + i) for i in range(30)]
    pending = []
    for uid, h in viewers:
        status, body = call("POST", stack.url("ads", "/ads/request"), h, {"ad_type": "rewarded", "placement": "earn_credits"})
        if status != 201:
            fail("ad request: %s %s" % (status, body))
        pending.append((uid, h, body["ad_request_id"]))
    time.sleep(21)
    load = Load(stack, users)
    workers = ([lambda k=k: load.consents(k) for k in range(0, 4)] + [lambda k=k: load.credits(k) for k in range(4, 8)]
               + [lambda k=k: load.purchases(k) for k in range(8, 10)] + [lambda k=k: load.answers(k) for k in range(10, 14)]
               + [lambda: load.rewards(pending)])
    leader = cluster("leader")
    with cf.ThreadPoolExecutor(len(workers)) as pool:
        running = [pool.submit(w) for w in workers]
        time.sleep(4)
        acked_before = sum(len(v) for v in load.acked.values())
        killed = time.time()
        cluster("kill-node", leader)
        # Dead for certain before anything is judged: its REST port refuses (killed again if not).
        for attempt in range(50):
            if not node_answers(leader):
                break
            if attempt % 10 == 9:
                cluster("kill-node", leader)
            time.sleep(0.1)
        dead = time.time()
        # Recovered: every kind of write acknowledged again after the kill.
        recovered = None
        while time.time() - killed < RECOVERY_LIMIT + 15:
            with load.lock:
                if all(load.last_ok.get(k, 0) > dead for k in ("consent", "grant", "purchase", "answer")):
                    recovered = max(load.last_ok[k] for k in ("consent", "grant", "purchase", "answer")) - killed
                    break
            time.sleep(0.1)
        time.sleep(3)
        load.stopping.set()
        for f in running:
            f.result()
    # Patroni's view of the cluster may lag the switch by a loop or two: asked until it names
    # a leader other than the dead one (or 30 s pass).
    new_leader = cluster("leader")
    deadline = time.time() + 30
    while (new_leader == leader or not new_leader) and time.time() < deadline:
        time.sleep(0.5)
        new_leader = cluster("leader", check=False)
    if new_leader == leader or not new_leader:
        print(cluster("status", check=False), file=sys.stderr)
    if load.bad:
        fail("answers other than 2xx or a 503 with the envelope during the failover: %s" % load.bad[:5])
    if recovered is None or recovered > RECOVERY_LIMIT:
        fail("writes not back within %.0f s of the leader's death (last acknowledged: %s)" % (RECOVERY_LIMIT, load.last_ok))
    if not load.refused and recovered > 1:
        fail("no request met the switch: the drill tested nothing")
    if new_leader == leader or not new_leader:
        fail("no replica was promoted (leader before pg%s, after %r)" % (leader, new_leader))
    stopped = [s for s in PORTS if s not in stack.still_running()]
    if stopped:
        fail("services that stopped during the failover: %s" % stopped)
    got = found(stack, load)
    lost = {k: (len(load.acked[k]), got[k]) for k in ("grant", "spend", "purchase", "answer") if got[k] != len(load.acked[k])}
    if got["consent"] != got["consent_of"]:
        lost["consent"] = (got["consent_of"], got["consent"])
    if lost:
        fail("acknowledged writes lost (acknowledged, found): %s" % lost)
    rewarded = sorted(set(load.acked["reward"]))
    credited = agree(stack, load, rewarded)
    print("failover: leader pg%s killed (-9, Patroni and PostgreSQL) under load; pg%s promoted; writes of every kind acknowledged again "
          "%.1f s after the kill; %d requests refused meanwhile, each a 503 with the envelope, none 500; acknowledged / found: "
          "grants %d/%d, spends %d/%d, purchases %d/%d, answers %d/%d, consents (last of each user) %d/%d, rewards %d/%d credited once; "
          "%d writes before the kill; no service restarted"
          % (leader, new_leader, recovered, load.refused, len(load.acked["grant"]), got["grant"], len(load.acked["spend"]), got["spend"],
             len(load.acked["purchase"]), got["purchase"], len(load.acked["answer"]), got["answer"], got["consent_of"], got["consent"],
             len(rewarded), credited, acked_before))
    # The dead node comes back as a replica of the new leader (pg_rewind).
    cluster("start-node", leader)
    cluster("wait-healthy", "90")
    return users


def sync_standby():
    members = json.loads(cluster("status"))["members"]
    return next((m["name"][2:] for m in members if m["role"] == "sync_standby"), None)


def lagging_replica_not_promoted(stack, users):
    """The leader and its synchronous replica die together: the asynchronous replica left may
    lack acknowledged commits, so Patroni must not promote it; writes are refused (503) until
    the synchronous one is back."""
    _, h = users[0]
    cluster("wait-healthy", "90")
    leader, sync = cluster("leader"), None
    deadline = time.time() + 30
    while not sync and time.time() < deadline:
        sync = sync_standby()
        time.sleep(0.5)
    if not sync:
        fail("no synchronous standby to drill with")
    others = [n for n in ("1", "2", "3") if n not in (leader, sync)]
    # Acknowledged just before the double failure.
    marks = []
    for i in range(20):
        action = "drill-lag-%d-%s" % (i, uuid.uuid4())
        status, _ = call("POST", stack.url("offline", "/sync/queue"), h, {"client_action_id": action, "action_type": "stats_ping",
                         "entity_type": "session", "entity_id": "lag", "payload": {}})
        if status == 201:
            marks.append(action)
    cluster("kill-node", leader)
    cluster("kill-node", sync)
    time.sleep(20)  # beyond the leader key's 12 s: a lax cluster would have promoted by now
    promoted = cluster("leader", check=False)
    if promoted in others:
        fail("the asynchronous replica pg%s was promoted: acknowledged writes could be lost" % promoted)
    status, body = call("POST", stack.url("offline", "/sync/queue"), h, {"client_action_id": "drill-lag-refused-%s" % uuid.uuid4(),
                        "action_type": "stats_ping", "entity_type": "session", "entity_id": "lag", "payload": {}}, timeout=10)
    if status != 503 or "error" not in body:
        fail("a write with no leader: %s %s (expected a 503 with the envelope)" % (status, body))
    cluster("start-node", sync)
    back = wait_writes(stack, h, 60)
    if back is None:
        fail("writes did not come back after the synchronous replica returned")
    stored = set(psql("SELECT client_action_id FROM offline.sync_queue WHERE client_action_id LIKE 'drill-lag-%'"))
    missing = [m for m in marks if m not in stored]
    if missing:
        fail("acknowledged before the double failure, missing after: %s" % missing[:3])
    print("lagging replica: leader pg%s and synchronous replica pg%s killed together; the asynchronous pg%s was not promoted "
          "(writes refused with 503 for 20 s); pg%s back, writes acknowledged again %.1f s later; %d/%d acknowledged writes found"
          % (leader, sync, others[0], sync, back, len(marks) - len(missing), len(marks)))
    cluster("start-node", leader)
    cluster("wait-healthy", "90")


def etcd_down(stack, users):
    """The store goes: the leader cannot renew its key, demotes itself, and writes are refused
    (503) rather than acknowledged by a leader another node might replace."""
    _, h = users[1]
    cluster("wait-healthy", "90")
    cluster("stop-etcd")
    stopped = time.time()
    refused_after = None
    while time.time() - stopped < 40:
        status, body = call("POST", stack.url("offline", "/sync/queue"), h, {"client_action_id": "drill-etcd-%s" % uuid.uuid4(),
                            "action_type": "stats_ping", "entity_type": "session", "entity_id": "etcd", "payload": {}}, timeout=5)
        if status not in (201, 503, 0) or (status == 503 and "error" not in body):
            fail("a write while etcd is down: %s %s" % (status, body))
        if status in (503, 0):
            refused_after = time.time() - stopped
            break
        time.sleep(0.2)
    if refused_after is None:
        fail("writes still acknowledged 40 s after etcd went down: the leader did not demote itself")
    members = [m for m in (subprocess.run(["curl", "-fsS", "http://127.0.0.1:%d/patroni" % (28430 + n)], capture_output=True, text=True).stdout
                           for n in (1, 2, 3)) if m]
    primaries = [m for m in members if json.loads(m).get("role") in ("master", "primary") and json.loads(m).get("state") == "running"]
    if primaries:
        fail("a node still runs as primary without its store: split brain possible: %s" % primaries)
    restarted = time.time()
    cluster("start-etcd")
    back = wait_writes(stack, h, 60)
    if back is not None:
        back = time.time() - restarted
    if back is None:
        fail("writes did not come back after etcd")
    print("etcd down: the leader demoted itself and writes were refused with 503 after %.1f s (no node ran as primary without the store); "
          "etcd started again, writes acknowledged %.1f s later" % (refused_after, back))


if __name__ == "__main__":
    subprocess.run(["bash", ROOT + "/deploy/local/stack.sh", "stop-services"], capture_output=True)
    cluster("destroy", check=False)
    subprocess.run(CLUSTER + ["up"], check=True)
    stack = Stack()
    try:
        stack.prepare()
        stack.start()
        users = failover(stack)
        wanted = os.environ.get("DRILLS", "failover,lagging,etcd").split(",")
        if "lagging" in wanted:
            lagging_replica_not_promoted(stack, users)
        if "etcd" in wanted:
            etcd_down(stack, users)
    finally:
        stack.stop()
        if not os.environ.get("KEEP_CLUSTER"):
            cluster("down", check=False)

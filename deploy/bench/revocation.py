"""Revocation latency: for N users, the time from auth's answer to `POST /auth/logout
{"all": true}` to the first refusal (401) of the user's old access token at each service.
Each service is polled on its own keep-alive connection every 5 ms. Prints p50/p99/max per
service and over all of them, in ms."""
import http.client
import json
import sys
import threading
import time

app, key, users = sys.argv[1], sys.argv[2], int(sys.argv[3])
probes = {"auth": (3001, "/auth/v1/auth/me"), "subscription": (3002, "/subscription/v1/credits/balance"),
          "offline": (3003, "/offline/v1/sync/profile"), "ads": (3004, "/ads/v1/ads/consent")}
tenant = {"X-App-ID": app, "X-API-Key": key, "Content-Type": "application/json"}
latencies = {s: [] for s in probes}


def call(port, method, path, headers, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def watch(service, port, path, headers, started, out):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        c.request("GET", path, headers=headers)
        r = c.getresponse()
        r.read()
        if r.status == 401:
            out[service] = (time.monotonic() - started()) * 1000
            return
        time.sleep(0.005)
    out[service] = float("inf")


for i in range(users):
    ip = {"X-Forwarded-For": "10.66.%d.%d" % (i // 250, i % 250 + 1)}
    status, body = call(3001, "POST", "/auth/v1/auth/register", {**tenant, **ip},
                        json.dumps({"provider": "guest", "credentials": {"device_id": "bench-revoke-%d-%f" % (i, time.time())}}))
    assert status == 201, body
    token = json.loads(body)["tokens"]["access_token"]
    auth = {**tenant, "Authorization": "Bearer " + token}
    for service, (port, path) in probes.items():
        status, body = call(port, "GET", path, auth)
        assert status == 200, (service, status, body)
    answered = [None]
    out = {}
    threads = [threading.Thread(target=watch, args=(s, p, path, auth, lambda: answered[0] or time.monotonic(), out))
               for s, (p, path) in probes.items()]
    status, body = call(3001, "POST", "/auth/v1/auth/logout", auth, json.dumps({"all": True}))
    answered[0] = time.monotonic()
    assert status == 200, body
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s, ms in out.items():
        latencies[s].append(ms)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


every = [x for xs in latencies.values() for x in xs]
parts = ["%s p50=%.0f p99=%.0f" % (s, pct(xs, 0.5), pct(xs, 0.99)) for s, xs in latencies.items()]
print("n=%d users  all: p50=%.0fms p99=%.0fms max=%.0fms  |  %s" % (users, pct(every, 0.5), pct(every, 0.99), max(every), "  ".join(parts)))

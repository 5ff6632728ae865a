"""The console bench row (#47): the Users page's work with 1,000,000 users in the app, through
the gateway, as the page does it: find a user by e-mail (GET /auth/v1/admin/users?email=), then
their credits and their timeline side by side (the timeline asks the three other services).
A random user each time; prints p50 and p99 of the whole, and the slowest part's p99.

usage: console.py APP_ID GATEWAY_URL USERS [REQUESTS]"""
import json
import random
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

app, gateway, users = sys.argv[1], sys.argv[2], int(sys.argv[3])
requests = int(sys.argv[4]) if len(sys.argv) > 4 else 200
headers = {"X-App-ID": app, "Authorization": "Bearer local-admin-token"}
opener = urllib.request.build_opener()


def get(path):
    req = urllib.request.Request(gateway + path, headers=headers)
    with opener.open(req, timeout=10) as r:
        if r.status != 200:
            raise RuntimeError("%s: %s" % (path, r.status))
        return json.loads(r.read())


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


pool = ThreadPoolExecutor(2)
totals, finds, timelines = [], [], []
for i in range(requests + 10):
    email = "console-%d@bench.example" % random.randint(1, users)
    t0 = time.perf_counter()
    user = get("/auth/v1/admin/users?email=" + email)
    t1 = time.perf_counter()
    credits = pool.submit(get, "/subscription/v1/admin/users/%s/credits" % user["id"])
    timeline = pool.submit(get, "/auth/v1/admin/users/%s/timeline?limit=50" % user["id"])
    credits.result()
    t = timeline.result()
    t2 = time.perf_counter()
    if t.get("incomplete"):
        raise RuntimeError("timeline incomplete: %s" % t["incomplete"])
    if i >= 10:  # the first ten warm the connections
        totals.append((t2 - t0) * 1000)
        finds.append((t1 - t0) * 1000)
        timelines.append((t2 - t1) * 1000)
# The row's figure first (the issue reads `console (…)  X ms`): the p99 of the whole page's work.
print("%.1f ms   (p99 of %d lookups; p50 %.1f ms; find by e-mail p99 %.1f ms, credits + timeline p99 %.1f ms)"
      % (pct(totals, 99), len(totals), pct(totals, 50), pct(finds, 99), pct(timelines, 99)))

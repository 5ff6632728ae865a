"""make bench: N guest users of the bench app, each with an access token, written one per
line to OUT; with --consent each also answers the ad consent (so /ads/available reads a real
record). Straight to auth and ads on their own ports, each sign-up from its own address (the
sign-up limit is per address). Standard library only.
Usage: python3 users.py APP_ID API_KEY N OUT [--consent]"""
import concurrent.futures as cf
import json
import sys
import urllib.request

app, key, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
consent = "--consent" in sys.argv[5:]


def post(url, headers, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers=headers)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def user(i):
    h = {"Content-Type": "application/json", "X-App-ID": app, "X-API-Key": key,
         "X-Forwarded-For": "10.%d.%d.%d" % (100 + i // 62500, (i // 250) % 250, i % 250 + 1)}
    token = post("http://127.0.0.1:3001/auth/v1/auth/register", h,
                 {"provider": "guest", "credentials": {"device_id": "bench-user-%d" % i}})["tokens"]["access_token"]
    if consent:
        post("http://127.0.0.1:3004/ads/v1/ads/consent", dict(h, Authorization="Bearer " + token),
             {"consent_personalized_ads": True, "consent_data_sharing": True, "age_gate_passed": True, "is_under_age": False, "country": "FR"})
    return token


with cf.ThreadPoolExecutor(16) as pool:
    tokens = list(pool.map(user, range(n)))
with open(out, "w") as f:
    f.write("\n".join(tokens) + "\n")

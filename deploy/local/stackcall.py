"""One HTTP call to the stack as a client makes it, for the fault checks (faults.py) and the
failover drill (deploy/ha/drill.py). Standard library only."""
import json
import urllib.error
import urllib.request


def call(method, url, headers, body=None, timeout=15):
    """(status, JSON body). A refusal is its status and envelope; no answer at all (refused, cut
    mid-answer, timed out) is status 0: the outcome is unknown, so never counted as acknowledged."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=dict(headers, **({"Content-Type": "application/json"} if data else {})))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw or b"{}")
        except ValueError:
            return e.code, {"raw": raw.decode(errors="replace")[:300]}
    except Exception as e:
        return 0, {"transport": str(e)}

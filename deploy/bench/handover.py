"""make bench: events handed to auth as the services' outboxes hand them (`POST /internal/events`),
paced to a rate over a few kept-alive connections. Shared by webhooks.py and live.py."""
import http.client
import threading
import time

INTERNAL = {"Authorization": "Bearer local-internal-subscription", "X-Service-Name": "subscription", "Content-Type": "application/json"}


def hand_over(events, rate, senders, body_of):
    """Sends event i (body_of(i) -> (key, json text)) at start + i / rate. Returns ({key: the time
    auth acknowledged it, i.e. committed it}, [failures])."""
    committed, failures, lock = {}, [], threading.Lock()
    start = time.monotonic()

    def sender(k):
        conn = http.client.HTTPConnection("127.0.0.1", 3001, timeout=30)
        mine = {}
        for i in range(k, events, senders):
            wait = start + i / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            key, body = body_of(i)
            try:
                conn.request("POST", "/internal/events", body=body, headers=INTERNAL)
                r = conn.getresponse()
                r.read()
                if r.status >= 300:
                    failures.append(r.status)
                    continue
            except (OSError, http.client.HTTPException) as e:
                failures.append(str(e))
                conn = http.client.HTTPConnection("127.0.0.1", 3001, timeout=30)
                continue
            mine[key] = time.time()
        with lock:
            committed.update(mine)

    threads = [threading.Thread(target=sender, args=(k,)) for k in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return committed, failures

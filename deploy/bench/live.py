"""make bench (#46): STREAMS live streams (SSE) held open through the gateway, one per user, while
RATE events/s are handed to auth as the services' outboxes hand them (`POST /internal/events`,
credits.earned for one of those users each). Prints the p99 of commit -> receipt (from the moment
auth acknowledged the event, i.e. committed it, to its arrival on the user's stream), whether each
event arrived exactly once, auth's RSS with every stream open (and what one idle stream costs) and
auth's CPU per event.

The streams are plain sockets in one asyncio loop (a stream costs the tool a few KB); the events go
over kept-alive connections from a few threads, each paced to its share of the rate.
Usage: python3 live.py APP_ID API_KEY AUTH_PID TOKENS_FILE GATEWAY_PORT [STREAMS] [RATE] [SECONDS]"""
import asyncio
import base64
import json
import os
import random
import resource
import sys
import threading
import time
import uuid

from handover import hand_over

app, key, auth_pid, tokens_file, gateway_port = sys.argv[1:6]
streams = int(sys.argv[6]) if len(sys.argv) > 6 else 10000
rate = int(sys.argv[7]) if len(sys.argv) > 7 else 1000
seconds = int(sys.argv[8]) if len(sys.argv) > 8 else 10
senders = 16
clk = os.sysconf("SC_CLK_TCK")
# One socket per stream: as many as the hard limit allows.
_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (_hard if _hard != resource.RLIM_INFINITY else 65536, _hard))


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / clk


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def user_of(token):
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["user_id"]


tokens = [t.strip() for t in open(tokens_file) if t.strip()][:streams]
users = [user_of(t) for t in tokens]
received = {}  # transaction id -> [receipt times]
refused = []
opened = 0
snapshots = 0


async def stream(token):
    global opened, snapshots
    reader, writer = await asyncio.open_connection("127.0.0.1", int(gateway_port), limit=1 << 16)
    writer.write((f"GET /auth/v1/live/events HTTP/1.0\r\nHost: 127.0.0.1\r\nX-App-ID: {app}\r\nX-API-Key: {key}\r\n"
                  f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n").encode())
    await writer.drain()
    status = await reader.readline()
    if b" 200 " not in status:
        refused.append(status[:40])
        return
    opened += 1
    kind, data = None, None
    while True:
        line = await reader.readline()
        if not line:
            return
        line = line.rstrip(b"\r\n")
        if line.startswith(b"event: "):
            kind = line[7:]
        elif line.startswith(b"data: "):
            data = line[6:]
        elif line == b"":
            if kind == b"credits.updated" and data:
                tid = json.loads(data)["data"]["transaction_id"]
                received.setdefault(tid, []).append(time.time())
            elif kind == b"state.snapshot":
                snapshots += 1
            kind, data = None, None
        # the answer's header lines fall through (HTTP/1.0: the body is not chunked)


events = rate * seconds


def event(i):
    tid = 10_000_000 + i
    return tid, json.dumps({"type": "credits.earned", "id": str(uuid.uuid4()), "app_id": app, "version": tid,
                            "data": {"user_id": random.choice(users), "transaction_id": tid, "amount": 1, "balance": i + 1,
                                     "source": "ad_reward"}})


async def main():
    rss_before = rss_mb(auth_pid)
    # Opened 250 at a time, each batch once the last one has its snapshots (10,000 phones do not
    # connect in the same millisecond; a burst only measures the accept queue).
    tasks = []
    for i in range(0, len(tokens), 250):
        tasks += [asyncio.create_task(stream(t)) for t in tokens[i:i + 250]]
        batch_deadline = time.time() + 30
        while snapshots < len(tasks) and time.time() < batch_deadline:
            await asyncio.sleep(0.01)
    deadline = time.time() + 120
    while snapshots < len(tokens) and time.time() < deadline:
        await asyncio.sleep(0.1)
    # As the other RSS rows: a quiet moment as long as the service's MALLOC_TRIM_SECONDS first,
    # so what the burst of connections freed is given back.
    await asyncio.sleep(int(os.environ.get("MALLOC_TRIM_SECONDS", "10")) + 1)
    rss_open = rss_mb(auth_pid)
    auth_before = cpu_seconds(auth_pid)
    tool_before = cpu_seconds(os.getpid())
    handed = {}
    sending = threading.Thread(target=lambda: handed.update(zip(("committed", "failures"), hand_over(events, rate, senders, event))))
    sending.start()
    while sending.is_alive():
        await asyncio.sleep(0.05)
    committed, failures = handed["committed"], handed["failures"]
    settle = time.time() + 5
    while time.time() < settle and sum(1 for tid in committed if tid in received) < len(committed):
        await asyncio.sleep(0.05)
    auth_cpu = cpu_seconds(auth_pid) - auth_before
    tool_cpu = cpu_seconds(os.getpid()) - tool_before
    lat = sorted((received[tid][0] - at) * 1000 for tid, at in committed.items() if tid in received)
    missing = sum(1 for tid in committed if tid not in received)
    twice = sum(1 for tid in committed if len(received.get(tid, [])) > 1)
    p = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan"))
    per_stream_kb = (rss_open - rss_before) * 1024 / max(1, len(tokens))
    print(f"commit->receipt p99 {p(0.99):.0f} ms  auth RSS {rss_open:.1f} MB   (p50 {p(0.50):.0f} ms; {snapshots} of {len(tokens)} streams open, "
          f"{len(refused)} refused; {len(committed)} events at {rate}/s: missing {missing}, twice {twice}, refused {len(failures)}; "
          f"one idle stream {per_stream_kb:.1f} KB of auth RSS ({rss_before:.1f} MB before); "
          f"auth {auth_cpu * 1e6 / max(1, len(committed)):.0f} us CPU per event; this tool {tool_cpu:.1f} s CPU)")
    for t in tasks:
        t.cancel()


asyncio.run(main())

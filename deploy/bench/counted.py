"""make bench (#49): the instructions a service spends per request, counted by callgrind, so
that two builds or settings compare exactly on a host whose timed runs move by 10 % between
neighbours. The service runs under `valgrind --tool=callgrind` (pid PID, dumps to OUT.PID.N).

One client on one kept-alive connection (valgrind runs one thread at a time, so a load generator
would only queue): every (user, device) first, so that no first meeting is counted; then the
idle cost per second (the job and outbox pollers run on a timer, and valgrind slows the wall
clock's share of them 50-fold); then N requests by users drawn with a fixed seed, and a wait
for the span exporter's batch delay (5 s), less the idle cost of the time it took.

Usage: python3 counted.py PID OUT APP_ID API_KEY PORT PATH METHOD USERS_FILE USERS N
Prints: instructions per request."""
import glob
import http.client
import os
import random
import subprocess
import sys
import time

pid, out, app, key, port, path, method, users_file = sys.argv[1:9]
users, n = int(sys.argv[9]), int(sys.argv[10])
tokens = [line.strip() for line in open(users_file) if line.strip()][:users]
conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=600)


def ask(user, device):
    headers = {"X-App-ID": app, "X-API-Key": key, "Authorization": "Bearer " + tokens[user]}
    body = None
    if method == "POST":
        headers.update({"Content-Type": "application/json", "X-Device-ID": "bench-device-%d" % device})
        body = b"{}"
    conn.request(method, path, body=body, headers=headers)
    answer = conn.getresponse()
    answer.read()
    if answer.status != 200:
        sys.exit("%s %s answered %d" % (method, path, answer.status))


def control(command):
    before = set(glob.glob("%s.%s.*" % (out, pid)))
    subprocess.run(["callgrind_control", command, pid], check=True, stdout=subprocess.DEVNULL)
    if command != "-d":
        return 0
    for _ in range(600):
        new = set(glob.glob("%s.%s.*" % (out, pid))) - before
        if new:
            # The file may be seen before it is whole: it is read again until its totals are in.
            path = new.pop()
            for line in open(path, errors="replace"):
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
        time.sleep(0.1)
    sys.exit("no callgrind dump from %s" % pid)


def devices(user):
    """As random_user.lua plays them: user number i (from 1) on 1 + i % 5 devices, so that no
    check meets the 5-device limit."""
    return 1 + (user + 1) % 5


for user in range(len(tokens)):
    for device in range(1, devices(user) + 1):
        ask(user, device)
control("-z")
start = time.monotonic()
time.sleep(4)
idle = control("-d") / (time.monotonic() - start)
control("-z")
start = time.monotonic()
draw = random.Random(49)
for _ in range(n):
    user = draw.randrange(len(tokens))
    ask(user, 1 + draw.randrange(devices(user)))
time.sleep(6)
total = control("-d")
print("%.0f" % ((total - idle * (time.monotonic() - start)) / n))

"""A light latency probe: one keep-alive connection, one GET every 20 ms, for N seconds.
Prints p50/p99/max in ms. Light enough not to steal the CPU it is measuring."""
import http.client
import sys
import time

host, port, path, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
conn = http.client.HTTPConnection(host, port, timeout=5)
samples = []
end = time.monotonic() + seconds
while time.monotonic() < end:
    t0 = time.perf_counter()
    conn.request("GET", path)
    r = conn.getresponse()
    r.read()
    samples.append((time.perf_counter() - t0) * 1000)
    time.sleep(max(0.0, 0.02 - (time.perf_counter() - t0)))
samples.sort()
def pct(p):
    return samples[min(len(samples) - 1, int(len(samples) * p))]
print(f"n={len(samples)} p50={pct(0.50):.2f}ms p99={pct(0.99):.2f}ms max={samples[-1]:.2f}ms")

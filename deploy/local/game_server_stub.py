"""The quiz's game server, played locally in the test stack (offline's SYNC_UPSTREAMS points
here): it keeps each player's saved entities with a version and refuses a save made on an older
version with 409 and its own copy (`server_data`, `server_version`), as an optimistic-concurrency
API does; a resolution (`resolution` set) is applied as sent. A repeated `Idempotency-Key`
answers {"duplicate": true}. A payload with `hang_seconds` is held that long before any answer (a
player whose calls hang, for the fault checks). Usage: python game_server_stub.py PORT"""
import http.server
import json
import sys
import threading
import time

lock = threading.Lock()
seen = set()
entities = {}


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        except ValueError:
            return self.reply(400, {"error": "bad_json"})
        key = self.headers.get("Idempotency-Key")
        entity = (body.get("app_id"), body.get("user_id"), body.get("entity_type"), body.get("entity_id"))
        payload = body.get("payload")
        based_on = payload.get("based_on_version") if isinstance(payload, dict) else None
        if isinstance(payload, dict) and isinstance(payload.get("hang_seconds"), (int, float)):
            time.sleep(min(payload["hang_seconds"], 120))
        with lock:
            if key in seen:
                return self.reply(200, {"duplicate": True})
            current = entities.get(entity)
            if body.get("resolution") is None and current and isinstance(based_on, int) and based_on < current["version"]:
                return self.reply(409, {"server_data": current["data"], "server_version": current["version"]})
            version = (current["version"] if current else 0) + 1
            entities[entity] = {"version": version, "data": payload}
            if key:
                seen.add(key)
        self.reply(200, {"applied": True, "version": version})

    def reply(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()

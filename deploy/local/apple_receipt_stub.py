"""A stand-in for Apple's verifyReceipt in the test stack (no network): every receipt the
contract and journey tests can send is junk to Apple, which answers status 21003 ("the receipt
could not be authenticated"). Usage: python apple_receipt_stub.py PORT"""
import http.server
import json
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"status": 21003}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()

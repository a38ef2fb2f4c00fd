"""A tiny HTTP server for the examples' workloads: ``GET /healthz`` answers ``ok``; any other GET answers a
JSON line naming the pod, its namespace and ``$ECHO_MESSAGE``. Listens on ``$PORT`` (8080). SIGTERM stops it."""

import json
import os
import signal
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/healthz":
            body = b"ok\n"
            kind = "text/plain"
        else:
            body = json.dumps({"pod": socket.gethostname(), "namespace": os.environ.get("POD_NAMESPACE", ""),
                               "message": os.environ.get("ECHO_MESSAGE", "")}).encode() + b"\n"
            kind = "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def main() -> None:
    server = ThreadingHTTPServer(("0.0.0.0", int(os.environ.get("PORT", "8080"))), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.serve_forever()


if __name__ == "__main__":
    main()

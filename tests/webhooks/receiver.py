"""A webhook receiver for Parley's tests: it verifies every delivery with the Standard Webhooks
library (`standardwebhooks` on PyPI, which Parley did not write), logs it, and answers as the
test scripted it.

    receiver.py --port 0 --log deliveries.jsonl      # prints "ready http://127.0.0.1:<port>"

Any POST to a path is a delivery to that path. Each is verified with every secret the test
gave for the path (`POST /_control/secrets {"path", "secrets": [...]}`), and logged as one JSON
line: the path, the webhook headers, the body, which secrets verified it, the A2A push headers
(`authorization`, `x-a2a-notification-token`) and the status answered. The answer is 200 unless
the test queued others for the path (`POST /_control/script {"path", "responses": [{"status",
"retryAfter", "delay"}]}`): each queued answer is used once, in order, after `delay` seconds.
"""

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

lock = threading.Lock()
secrets: dict[str, list[str]] = {}
scripts: dict[str, list[dict]] = {}
log_path = ""


def verified_with(path: str, body: bytes, headers: dict[str, str]) -> list[int]:
    """The indexes of the path's secrets that verify the delivery."""
    ok = []
    with lock:
        known = list(secrets.get(path, []))
    for i, secret in enumerate(known):
        try:
            Webhook(secret).verify(body, headers)
            ok.append(i)
        except WebhookVerificationError:
            pass
    return ok


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def read_body(self) -> bytes:
        length = int(self.headers.get("content-length", "0") or "0")
        return self.rfile.read(length) if length else b""

    def answer(self, status: int, retry_after=None, body: bytes = b"") -> None:
        self.send_response(status)
        if retry_after is not None:
            self.send_header("Retry-After", str(retry_after))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802 - the base class's name
        body = self.read_body()
        if self.path.startswith("/_control/"):
            command = json.loads(body)
            with lock:
                if self.path == "/_control/secrets":
                    secrets[command["path"]] = command["secrets"]
                elif self.path == "/_control/script":
                    scripts.setdefault(command["path"], []).extend(command["responses"])
            self.answer(200, body=b"{}")
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        with lock:
            queued = scripts.get(self.path) or []
            response = queued.pop(0) if queued else {"status": 200}
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        entry = {
            "path": self.path,
            "webhookId": headers.get("webhook-id"),
            "webhookTimestamp": headers.get("webhook-timestamp"),
            "webhookSignature": headers.get("webhook-signature"),
            "authorization": headers.get("authorization"),
            "notificationToken": headers.get("x-a2a-notification-token"),
            "contentType": headers.get("content-type"),
            "verifiedWith": verified_with(self.path, body, headers),
            "body": parsed,
            "status": response.get("status", 200),
            "at": time.time(),
        }
        with lock, open(log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")
        delay = response.get("delay", 0)
        if delay:
            time.sleep(delay)
        try:
            self.answer(response.get("status", 200), response.get("retryAfter"))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the sender gave up waiting


def main() -> None:
    global log_path
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    log_path = args.log
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"ready http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()

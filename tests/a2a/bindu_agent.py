"""A test A2A agent built on Bindu (bindu 2026.36.7, Python >= 3.12): a plain handler function,
no model, everything in memory, nothing reached but loopback.

The integration tests start it as a delegation target that Parley calls as an A2A client:

    python bindu_agent.py --port PORT --log FILE      # PORT 0: a free port is picked

It binds 127.0.0.1 only and prints `ready http://127.0.0.1:PORT` on stdout once its card
answers (Bindu's own banner and logs go to stderr). Each message the handler receives and
each tasks/cancel that reaches Bindu is appended to FILE as one JSON line. What it does is
chosen by the first data part's data: {"mode": "reply"|"sleep"|"fail"|"text", ...}; a message
whose metadata carries `parley.negotiationId` (`metadata.parley.negotiationId`) is answered as a negotiation turn (action from
BINDU_AGENT_TURN_ACTION, default `accept`, kept within `metadata.parley.allowedActions`).
Bindu wraps the handler's return value: a str becomes a text part, anything else a data part
{"result": value}, both in one artifact named `result`.
Install: pip install bindu==2026.36.7
"""

import argparse
import asyncio
import json
import os
import socket
import tempfile
import threading
import time
import urllib.request

# Nothing that needs a network or credentials: forced off, whatever the caller's env says.
for key in ("BINDU_DEPLOYMENT_URL", "BINDU_HOST", "BINDU_PORT", "PORT", "DATABASE_URL", "REDIS_URL"):
    os.environ.pop(key, None)
os.environ.update({
    "AUTH__ENABLED": "false", "HYDRA__ENABLED": "false", "MTLS__ENABLED": "false",
    "VAULT__ENABLED": "false", "SENTRY_ENABLED": "false", "TELEMETRY_ENABLED": "false",
    "GRPC__ENABLED": "false", "STORAGE_TYPE": "memory", "SCHEDULER_TYPE": "memory",
})

LOG_PATH = None
CANCELED = set()  # task ids whose tasks/cancel reached Bindu


def log(line):
    with open(LOG_PATH, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
        f.flush()


def turn_answer(metadata):
    allowed = (metadata.get("parley") or {}).get("allowedActions")
    action = os.environ.get("BINDU_AGENT_TURN_ACTION", "accept")
    if isinstance(allowed, list) and allowed and action not in allowed:
        action = next((a for a in ("propose", "counter", "accept") if a in allowed), allowed[0])
    if action == "accept":
        return {"action": "accept", "message": "The match fits; I accept.",
                "assessment": {"reasoning": "bindu test agent accepts"}}
    return {"action": action, "message": "Here is why this match fits.",
            "assessment": {"reasoning": f"bindu test agent chose {action}"}}


async def answer(messages):
    """Bindu passes the task's history (snake_case A2A messages); the last one is the new input."""
    msg = messages[-1]
    parts = msg.get("parts") or []
    datas = [p.get("data") for p in parts if p.get("kind") == "data"]
    texts = [p.get("text", "") for p in parts if p.get("kind") == "text"]
    data = datas[0] if datas else None
    metadata = msg.get("metadata") or {}
    log({"event": "message", "messageId": msg.get("message_id"), "taskId": msg.get("task_id"),
         "contextId": msg.get("context_id"), "data": data, "metadata": metadata,
         "text": "\n".join(texts) if texts else None})

    mode = data.get("mode") if isinstance(data, dict) else None
    if "negotiationId" in (metadata.get("parley") or {}):
        return turn_answer(metadata)
    if mode == "reply":
        return data.get("output")
    if mode == "text":
        return json.dumps(data.get("output"))
    if mode == "sleep":
        seconds = data.get("seconds", 1)
        end = time.monotonic() + seconds
        # Bindu runs one task at a time and does not interrupt a running handler on
        # tasks/cancel: the sleep stops early once the cancel has been seen.
        while time.monotonic() < end:
            if str(msg.get("task_id")) in CANCELED:
                return {"canceled": True}
            await asyncio.sleep(0.1)
        return {"slept": seconds}
    if mode == "fail":
        raise RuntimeError(str(data.get("reason", "failed")))
    return {"received": data}


async def handler(messages):
    # An async generator yielding the one final value: Bindu's plain-coroutine path iterates
    # whatever the coroutine returns, so a returned dict would come out as its last key.
    yield await answer(messages)


def watch_cancels():
    """Log each tasks/cancel as Bindu's JSON-RPC handler receives it."""
    from bindu.server.handlers.task_handlers import TaskHandlers

    original = TaskHandlers.cancel_task

    async def cancel_task(self, request, *args, **kwargs):
        task_id = str(request["params"]["task_id"])
        log({"event": "cancel", "taskId": task_id})
        CANCELED.add(task_id)
        return await original(self, request, *args, **kwargs)

    TaskHandlers.cancel_task = cancel_task


def main():
    global LOG_PATH
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    LOG_PATH = os.path.abspath(args.log)

    port = args.port
    if port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"

    # stdout carries only the ready line; Bindu's banner and logs go to stderr.
    ready_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    # Bindu writes DID keys and log files under the working directory: kept beside the log
    # file, out of the repo.
    workdir = tempfile.mkdtemp(prefix="bindu-agent-", dir=os.path.dirname(LOG_PATH))
    os.chdir(workdir)

    def announce():
        while True:
            try:
                urllib.request.urlopen(base + "/.well-known/agent.json", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        ready_out.write(f"ready {base}\n")
        ready_out.flush()

    threading.Thread(target=announce, daemon=True).start()

    from bindu.penguin.bindufy import bindufy

    watch_cancels()
    bindufy({
        "author": "test-agent@example.com",
        "name": "bindu-test-agent",
        "description": "Bindu test agent (reply, sleep, fail, text, negotiation turns).",
        "deployment": {"url": base, "expose": False},
        "telemetry": False,
        "storage": {"type": "memory"},
        "scheduler": {"type": "memory"},
        "enable_system_message": False,
    }, handler, key_dir=workdir)


if __name__ == "__main__":
    main()

"""A test A2A agent served by the official Python A2A SDK's own server (a2a-sdk 1.3.0).

The integration tests start it as a delegation target that Parley calls as an A2A client
(JSON-RPC over HTTP, protocol 1.0 and 0.3 on one endpoint, in-memory task store):

    python sdk_agent.py --port PORT --log FILE      # PORT 0: a free port is picked

It binds 127.0.0.1 only and prints `ready http://127.0.0.1:PORT` once it answers. Each
message its executor receives and each cancel is appended to FILE as one JSON line. What it
does is chosen by the first DataPart's data: {"mode": "reply"|"sleep"|"fail"|"text", ...};
a message whose metadata carries `parley.negotiationId` (`metadata.parley.negotiationId`) is answered as a negotiation turn
(action from SDK_AGENT_TURN_ACTION, default `accept`, kept within `metadata.parley.allowedActions`;
SDK_AGENT_TURN_ANSWER, a JSON object, is answered as it is instead).
Install: pip install -r examples/a2a_agent/requirements.txt (the example agent's pinned packages).
"""

import argparse
import asyncio
import json
import os
import socket
import sys

# The SDK's OpenTelemetry wrappers only add stderr noise here (no exporter is configured).
os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")

import uvicorn
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette

from a2a.helpers import new_data_part, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Task,
    TaskState,
    TaskStatus,
)

LOG_PATH = None


def log(line):
    with open(LOG_PATH, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
        f.flush()


def ints(v):
    """protobuf's Value keeps every number as a double: give whole numbers back as ints."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, dict):
        return {k: ints(x) for k, x in v.items()}
    if isinstance(v, list):
        return [ints(x) for x in v]
    return v


def turn_answer(metadata):
    raw = os.environ.get("SDK_AGENT_TURN_ANSWER")
    if raw:  # an answer given whole, right or wrong (a test of how Parley takes bad answers)
        return json.loads(raw)
    allowed = (metadata.get("parley") or {}).get("allowedActions")
    action = os.environ.get("SDK_AGENT_TURN_ACTION", "accept")
    if isinstance(allowed, list) and allowed and action not in allowed:
        action = next((a for a in ("propose", "counter", "accept") if a in allowed), allowed[0])
    if action == "accept":
        return {"action": "accept", "message": "The match fits; I accept.",
                "assessment": {"reasoning": "sdk test agent accepts"}}
    return {"action": action, "message": "Here is why this match fits.",
            "assessment": {"reasoning": f"sdk test agent chose {action}"}}


class Executor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue) -> None:
        msg = context.message
        datas = [ints(MessageToDict(p.data)) for p in msg.parts if p.HasField("data")]
        texts = [p.text for p in msg.parts if p.HasField("text")]
        data = datas[0] if datas else None
        # Message metadata first; the request's own metadata fills in what it lacks.
        metadata = {**ints(context.metadata), **ints(MessageToDict(msg.metadata))}
        log({"event": "message", "messageId": msg.message_id, "taskId": context.task_id,
             "contextId": context.context_id, "data": data, "metadata": metadata,
             "text": "\n".join(texts) if texts else None})

        # The task exists from the first event on: a non-blocking send returns it here.
        await event_queue.enqueue_event(Task(
            id=context.task_id, context_id=context.context_id,
            status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED), history=[msg]))
        up = TaskUpdater(event_queue, context.task_id, context.context_id)
        await up.start_work()

        mode = data.get("mode") if isinstance(data, dict) else None
        if "negotiationId" in (metadata.get("parley") or {}):
            await up.add_artifact([new_data_part(turn_answer(metadata))], name="result")
            await up.complete()
        elif mode == "reply":
            await up.add_artifact([new_data_part(data.get("output"))], name="result")
            await up.complete()
        elif mode == "text":
            await up.add_artifact([new_text_part(json.dumps(data.get("output")))], name="result")
            await up.complete()
        elif mode == "sleep":
            seconds = data.get("seconds", 1)
            await asyncio.sleep(seconds)  # cancelled by the framework on CancelTask
            await up.add_artifact([new_data_part({"slept": seconds})], name="result")
            await up.complete()
        elif mode == "fail":
            await up.failed(up.new_agent_message([new_text_part(str(data.get("reason", "failed")))]))
        else:
            await up.add_artifact([new_data_part({"received": data})], name="result")
            await up.complete()

    async def cancel(self, context: RequestContext, event_queue) -> None:
        log({"event": "cancel", "taskId": context.task_id})
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def card(url):
    return AgentCard(
        name="sdk-test-agent",
        description="A2A SDK test agent (reply, sleep, fail, text, negotiation turns).",
        version="1.0.0",
        # SDK_AGENT_PROTOCOLS (default "1.0,0.3") lists the interfaces the card offers: "0.3"
        # alone makes a client that prefers 1.0 speak 0.3 to the same endpoint.
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=v)
            for v in os.environ.get("SDK_AGENT_PROTOCOLS", "1.0,0.3").split(",")
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["application/json", "text/plain"],
        default_output_modes=["application/json", "text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="Answers by the input's mode.",
                           tags=["test"])],
    )


async def main():
    global LOG_PATH
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    LOG_PATH = args.log

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"

    agent_card = card(base + "/")
    handler = DefaultRequestHandler(agent_executor=Executor(), task_store=InMemoryTaskStore(),
                                    agent_card=agent_card)
    routes = create_agent_card_routes(agent_card) + create_jsonrpc_routes(
        handler, rpc_url="/", enable_v0_3_compat=True)
    app = Starlette(routes=routes)

    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if serving.done():
            serving.result()
            sys.exit("server stopped before it started")
        await asyncio.sleep(0.05)
    print(f"ready {base}", flush=True)
    await serving


if __name__ == "__main__":
    asyncio.run(main())

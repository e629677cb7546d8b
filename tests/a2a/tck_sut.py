"""The A2A TCK's own agent (`sut/a2a-python/sut_agent.py` of the kit, unchanged) served by the
official Python SDK's server (a2a-sdk 1.3.0), for the conformance run (`tests/api/a2a_tck.rs`):

    python tck_sut.py --kit ../shared/a2a-tck --port PORT    # PORT 0: a free port is picked
        [--name NAME] [--skill 'id|name|description|tag,tag' ...]

(the router's tests, `tests/api/a2a_router.rs`, start it under other names and skills).

It prints `ready http://127.0.0.1:PORT` once it answers. The kit's agent is written for an older
SDK; what this wrapper adapts, outside the kit:
- the server is assembled with `a2a.server.routes` (1.3.0 has no `a2a.server.apps`): the card,
  JSON-RPC at `/` (1.0 and 0.3) and HTTP+JSON at `/a2a/rest`, as the kit's card says; no gRPC;
- 1.3.0 wants a Task enqueued before a task's first status or artifact update: the kit's
  executor gets an event queue that enqueues it first;
- the kit's chunked artifact gives each chunk a new artifact id, all sent with `append`, which
  1.3.0 refuses (no such artifact): that queue sends the first chunk without `append` and the
  next ones to the first one's artifact.
The executor itself, and so the behaviour by `messageId` prefix, is the kit's.
"""

import argparse
import asyncio
import importlib.util
import os
import socket
import sys
import types

os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")

import uvicorn
from starlette.applications import Starlette

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

REST_URL = "/a2a/rest"


def kit_executor(kit):
    """The kit's executor class, its module loaded with `a2a.server.apps` stood in for."""
    apps = types.ModuleType("a2a.server.apps")
    apps.A2ARESTFastAPIApplication = apps.A2AStarletteApplication = object
    sys.modules.setdefault("a2a.server.apps", apps)
    # Names the kit imports from where older SDKs kept them.
    import a2a.server.request_handlers as handlers
    import a2a.server.request_handlers.default_request_handler as default_handler

    default_handler.DefaultRequestHandler = handlers.DefaultRequestHandler
    path = os.path.join(kit, "sut", "a2a-python", "sut_agent.py")
    spec = importlib.util.spec_from_file_location("tck_sut_agent", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TckAgentExecutor


class TaskFirst:
    """An event queue that enqueues the task before its first status or artifact update."""

    def __init__(self, queue, context):
        self._queue = queue
        self._context = context
        self._task_told = context.current_task is not None
        self._artifacts = set()

    async def enqueue_event(self, event):
        if isinstance(event, TaskArtifactUpdateEvent):
            # The kit's chunks each get a new artifact id, and 1.3.0 refuses to append to an
            # artifact not yet made: a chunk goes to the artifact being made, the first makes it.
            if event.append and event.artifact.artifact_id not in self._artifacts:
                if self._artifacts:
                    event.artifact.artifact_id = self._last
                else:
                    event.append = False
            self._artifacts.add(event.artifact.artifact_id)
            self._last = event.artifact.artifact_id
        if not self._task_told and isinstance(event, (TaskStatusUpdateEvent, TaskArtifactUpdateEvent)):
            task = Task(id=self._context.task_id, context_id=self._context.context_id,
                        status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
            if self._context.message is not None:
                task.history.append(self._context.message)
            await self._queue.enqueue_event(task)
        if isinstance(event, (Task, TaskStatusUpdateEvent, TaskArtifactUpdateEvent)):
            self._task_told = True
        await self._queue.enqueue_event(event)

    def __getattr__(self, name):
        return getattr(self._queue, name)


def adapted(executor_class):
    class Executor(executor_class):
        async def execute(self, context, event_queue):
            await super().execute(context, TaskFirst(event_queue, context))

        async def cancel(self, context, event_queue):
            await super().cancel(context, TaskFirst(event_queue, context))

    return Executor


def card(base, name=None, skills=None):
    """The kit's card (its `main()`), without the gRPC interface; `name` and `skills` (each
    `id|name|description|tag,tag`) replace the kit's when given."""
    skills = [AgentSkill(id=i, name=n, description=d, tags=[t for t in tags.split(",") if t])
              for i, n, d, tags in (s.split("|") for s in skills or [])]
    return AgentCard(
        name=name or "A2A Python SDK System Under Test (SUT)",
        description="Auto-generated System Under Test for A2A TCK conformance",
        version="1.0.0",
        provider=AgentProvider(organization="A2A Project", url="https://github.com/a2aproject"),
        supported_interfaces=[
            AgentInterface(url=base, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=base + REST_URL, protocol_binding="HTTP+JSON", protocol_version="1.0"),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text"],
        default_output_modes=["text"],
        skills=skills or [AgentSkill(id="tck", name="TCK Conformance",
                                     description="Handles TCK conformance test messages", tags=["tck"])],
    )


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kit", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--name")
    ap.add_argument("--skill", action="append", help="id|name|description|tag,tag (repeatable)")
    args = ap.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    agent_card = card(base, args.name, args.skill)
    handler = DefaultRequestHandler(agent_executor=adapted(kit_executor(args.kit))(),
                                    task_store=InMemoryTaskStore(), agent_card=agent_card)
    routes = (create_agent_card_routes(agent_card)
              + create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True)
              + create_rest_routes(handler, path_prefix=REST_URL))
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

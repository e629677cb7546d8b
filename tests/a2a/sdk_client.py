"""The official A2A SDK's clients, unchanged, against a live Parley.

Run by the Rust test `a2a_sdk` (tests/api/a2a_sdk.rs), which starts Parley, registers a requester,
a stranger and a polling target (accepting each request, then completing, holding or rejecting it
by its input's `mode`), and passes:

  PARLEY_BASE      the service's base URL
  REQUESTER_KEY    the requester's agent key
  STRANGER_KEY     another agent's key
  STREAMS          how many concurrent streams to open at the end

Each check prints `ok <name>`; the first failure raises (exit status 1). Before cancelling the task
that the concurrent streams follow, it prints `streams-open <taskId>` and waits for a line on
stdin, so that the test can look at the database meanwhile.
"""

import asyncio
import os
import sys
import uuid

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.client.base_client import BaseClient
from a2a.helpers.proto_helpers import new_data_message
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

BASE = os.environ["PARLEY_BASE"]
KEY = os.environ["REQUESTER_KEY"]
STRANGER = os.environ["STRANGER_KEY"]
STREAMS = int(os.environ.get("STREAMS", "200"))


def ok(name):
    print(f"ok {name}", flush=True)


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def work(mode, **extra):
    """A delegation's body: what the data part holds (numbers as the SDK sends them: doubles)."""
    body = {"taskType": "summarization", "input": {"text": "a long text", "words": 20, "mode": mode}, "timeoutMs": 20000}
    body.update(extra)
    return body


def request(mode, message_id=None, blocking=True, **extra):
    message = new_data_message(work(mode, **extra), role=Role.ROLE_USER)
    message.message_id = message_id or str(uuid.uuid4())
    req = SendMessageRequest(message=message)
    req.configuration.return_immediately = not blocking
    return req


async def last_task(events):
    """The task an event iterator ends with: the first event's task, updated by status updates."""
    task, updates = None, []
    async for event in events:
        if event.HasField("task"):
            task = event.task
        updates.append(event)
    return task, updates


async def clients(key):
    """1.0 clients (non-streaming sends, streaming sends) built from the card, and the same two
    over the SDK's 0.3 transport."""
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30)
    card = await A2ACardResolver(http, BASE).get_agent_card()
    v1 = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
    v1_streaming = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
    interface = next(i for i in card.supported_interfaces if i.protocol_version == "0.3")

    def v03(streaming):
        transport = CompatJsonRpcTransport(http, card, interface.url, is_shared_httpx=True)
        return BaseClient(card, ClientConfig(httpx_client=http, streaming=streaming), transport, [])

    return http, card, v1, v1_streaming, (v03(False), v03(True))


async def expect_error(kind, call):
    try:
        await call
    except kind as e:
        return e
    raise AssertionError(f"expected {kind.__name__}")


async def scenario(name, v1, v1_streaming, compat):
    """Send, get, cancel, stream and subscribe, with one client pair (`name` says which)."""
    # Send (blocking): completed, with the output as a data artifact.
    task, _ = await last_task(v1.send_message(request("complete")))
    check(task.status.state == TaskState.TASK_STATE_COMPLETED, f"{name} send: {task}")
    output = MessageToDict(task.artifacts[0].parts[0])["data"]
    check(output == {"summary": "short"}, f"{name} artifact: {output}")
    ok(f"{name} send completes with the output as a data artifact")

    # Get, with history.
    got = await v1.get_task(GetTaskRequest(id=task.id, history_length=1))
    check(got.id == task.id and got.status.state == TaskState.TASK_STATE_COMPLETED, f"{name} get: {got}")
    check(len(got.history) == 1 and got.history[0].role == Role.ROLE_USER, f"{name} history: {got.history}")
    ok(f"{name} get")

    # Cancel of a finished task: not cancelable.
    await expect_error(TaskNotCancelableError, v1.cancel_task(CancelTaskRequest(id=task.id)))
    ok(f"{name} cancel of a finished task is refused")

    # Cancel of a live task.
    held, _ = await last_task(v1.send_message(request("hold", blocking=False)))
    check(held.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING), f"{name} held: {held}")
    canceled = await v1.cancel_task(CancelTaskRequest(id=held.id))
    check(canceled.status.state == TaskState.TASK_STATE_CANCELED, f"{name} cancel: {canceled}")
    ok(f"{name} cancel")

    # Stream: the task, its moves, the artifact and the final status; then the stream closes.
    task, events = await last_task(v1_streaming.send_message(request("slow")))
    kinds = [e.WhichOneof("payload") for e in events]
    check(kinds[0] == "task", f"{name} stream starts with the task: {kinds}")
    check("artifact_update" in kinds, f"{name} stream carries the artifact: {kinds}")
    final = events[-1]
    check(final.HasField("status_update") and final.status_update.status.state == TaskState.TASK_STATE_COMPLETED,
          f"{name} stream ends completed: {final}")
    ok(f"{name} stream closes after the final status")

    # Subscribe to a live task, which the target completes a moment later.
    live, _ = await last_task(v1.send_message(request("slow", blocking=False)))
    _, events = await last_task(v1_streaming.subscribe(SubscribeToTaskRequest(id=live.id)))
    final = events[-1]
    check(final.status_update.status.state == TaskState.TASK_STATE_COMPLETED, f"{name} subscribe: {events}")
    await expect_error(UnsupportedOperationError, last_task(v1_streaming.subscribe(SubscribeToTaskRequest(id=live.id))))
    ok(f"{name} subscribe")

    # The 0.3 clients: send, get, stream, subscribe, cancel.
    v03, v03_streaming = compat
    task, _ = await last_task(v03.send_message(request("complete")))
    check(task.status.state == TaskState.TASK_STATE_COMPLETED, f"0.3 send: {task}")
    got = await v03.get_task(GetTaskRequest(id=task.id))
    check(got.status.state == TaskState.TASK_STATE_COMPLETED and got.artifacts, f"0.3 get: {got}")
    task, events = await last_task(v03_streaming.send_message(request("slow")))
    check(events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED, f"0.3 stream: {events}")
    live = await v03.get_task(GetTaskRequest(id=(await last_task(v1.send_message(request("slow", blocking=False))))[0].id))
    _, events = await last_task(v03_streaming.subscribe(SubscribeToTaskRequest(id=live.id)))
    check(events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED, f"0.3 subscribe: {events}")
    held, _ = await last_task(v1.send_message(request("hold", blocking=False)))
    canceled = await v03.cancel_task(CancelTaskRequest(id=held.id))
    check(canceled.status.state == TaskState.TASK_STATE_CANCELED, f"0.3 cancel: {canceled}")
    await expect_error(TaskNotCancelableError, v03.cancel_task(CancelTaskRequest(id=held.id)))
    ok("0.3 client sends, gets, streams, subscribes and cancels")


async def main():
    # The card, at both paths.
    async with httpx.AsyncClient() as anonymous:
        card = await A2ACardResolver(anonymous, BASE).get_agent_card()
        check(card.capabilities.streaming and card.capabilities.push_notifications, f"card: {card}")
        check({i.protocol_version for i in card.supported_interfaces} == {"1.0", "0.3"}, f"card: {card}")
        check(any(s.id == "summarization" for s in card.skills), f"skills: {card.skills}")
        legacy = await A2ACardResolver(anonymous, BASE).get_agent_card(relative_card_path="/.well-known/agent.json")
        check(legacy.name == card.name, "the card at agent.json")
    ok("the card resolves at both paths")

    http, card, v1, v1_streaming, compat = await clients(KEY)
    await scenario("1.0", v1, v1_streaming, compat)

    # Unknown task; someone else's task; input the schema refuses; a repeated messageId.
    await expect_error(TaskNotFoundError, v1.get_task(GetTaskRequest(id=str(uuid.uuid4()))))
    mine, _ = await last_task(v1.send_message(request("complete")))
    _, _, stranger, _, _ = await clients(STRANGER)
    await expect_error(TaskNotFoundError, stranger.get_task(GetTaskRequest(id=mine.id)))
    ok("an unknown task and another agent's task are not found")
    bad = new_data_message({"taskType": "summarization", "input": {"no_text": True}}, role=Role.ROLE_USER)
    e = await expect_error(InvalidParamsError, last_task(v1.send_message(SendMessageRequest(message=bad))))
    check((e.data or {}).get("code") == "input_invalid", f"refused input: {e!r}")
    ok("input the schema refuses is -32602 with Parley's code")
    message_id = str(uuid.uuid4())
    first, _ = await last_task(v1.send_message(request("complete", message_id=message_id)))
    again, _ = await last_task(v1.send_message(request("complete", message_id=message_id)))
    check(first.id == again.id, f"a repeated messageId: {first.id} then {again.id}")
    ok("a repeated messageId answers the same task")
    listed = await v1.list_tasks(ListTasksRequest(page_size=2))
    check(len(listed.tasks) == 2 and listed.next_page_token, f"list: {listed}")
    ok("list")

    # No credentials.
    async with httpx.AsyncClient() as anonymous:
        nobody = ClientFactory(ClientConfig(httpx_client=anonymous, streaming=False)).create(card)
        e = await expect_error(A2AClientError, nobody.get_task(GetTaskRequest(id=mine.id)))
        check("401" in str(e), f"no credentials: {e!r}")
    ok("no credentials is 401")

    # Many streams on one held task: each holds no database connection; all end when it is canceled.
    held, _ = await last_task(v1.send_message(request("hold", blocking=False)))
    limits = httpx.Limits(max_connections=STREAMS + 10, max_keepalive_connections=STREAMS + 10)
    wide = httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=60, limits=limits)
    many = ClientFactory(ClientConfig(httpx_client=wide, streaming=True)).create(card)
    started = asyncio.Event()
    opened = 0

    async def follow():
        nonlocal opened
        events = []
        async for event in many.subscribe(SubscribeToTaskRequest(id=held.id)):
            events.append(event)
            if len(events) == 1:
                opened += 1
                if opened == STREAMS:
                    started.set()
        return events

    followers = [asyncio.create_task(follow()) for _ in range(STREAMS)]
    await asyncio.wait_for(started.wait(), 60)
    print(f"streams-open {held.id}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    await v1.cancel_task(CancelTaskRequest(id=held.id))
    ends = await asyncio.wait_for(asyncio.gather(*followers), 60)
    states = {e[-1].status_update.status.state for e in ends}
    check(states == {TaskState.TASK_STATE_CANCELED}, f"the streams' last states: {states}")
    ok(f"{STREAMS} concurrent streams all end canceled")
    await wide.aclose()
    await http.aclose()


asyncio.run(main())

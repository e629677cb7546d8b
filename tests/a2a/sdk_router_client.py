"""The official A2A SDK's client, unchanged, sending plain messages through Parley as a router.

Run by the Rust test `a2a_router::the_official_sdks_client_reaches_the_right_agent_through_parley`
(tests/api/a2a_router.rs), which starts two of the A2A TCK's agents under other names and skills
(a translator, skill `translate`; a forecaster, skill `weather`; each answering by `messageId`
prefix), registers both in Parley by their cards and a requester, and passes:

  PARLEY_BASE      the service's base URL
  REQUESTER_KEY    the requester's agent key

Each check prints `ok <name>`; the first failure raises (exit status 1).
"""

import asyncio
import os
import uuid

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import new_text_message
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, Role, SendMessageRequest, TaskState
from a2a.utils.errors import InvalidParamsError

BASE = os.environ["PARLEY_BASE"]
KEY = os.environ["REQUESTER_KEY"]


def ok(name):
    print(f"ok {name}", flush=True)


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def request(prefix, text, skill=None, task_id=None, context_id=None, blocking=True):
    message = new_text_message(text, role=Role.ROLE_USER)
    message.message_id = f"{prefix}-{uuid.uuid4()}"
    if task_id:
        message.task_id = task_id
    if context_id:
        message.context_id = context_id
    if skill:
        message.metadata.update({"skillId": skill})
    req = SendMessageRequest(message=message)
    req.configuration.return_immediately = not blocking
    return req


async def events_of(stream):
    return [event async for event in stream]


def route_of(holder):
    """The skill Parley routed to, from a task's or message's metadata."""
    return MessageToDict(holder.metadata).get("parley", {}).get("route", {}).get("skillId")


async def main():
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    card = await A2ACardResolver(http, BASE).get_agent_card()
    client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
    streaming = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)

    # By meaning: each message reaches the skill whose text fits it.
    for text, skill in [
        ("Please translate good morning into French", "translate"),
        ("Will it rain in Oslo tomorrow? forecast", "weather"),
    ]:
        [event] = await events_of(client.send_message(request("tck-complete-task", text)))
        check(event.HasField("task"), f"a task: {event}")
        check(route_of(event.task) == skill, f"{text!r} went to {route_of(event.task)}, not {skill}")
        check(event.task.status.state == TaskState.TASK_STATE_COMPLETED, f"completed: {event.task}")
    ok("by meaning, each message reaches the skill that fits")

    # By name, whatever the text says.
    [event] = await events_of(
        client.send_message(request("tck-complete-task", "Please translate good morning into French", skill="weather"))
    )
    check(route_of(event.task) == "weather", f"named: {event}")
    ok("by name")

    # Nothing fits: -32602 naming the skills to choose from.
    try:
        await events_of(client.send_message(request("m-none", "quantum chromodynamics lecture notes")))
        raise AssertionError("a message no skill fits was routed")
    except InvalidParamsError as e:
        said = f"{e} {getattr(e, 'message', '')} {e!r}"
        check("translate" in said and "weather" in said, f"the skills named: {e!r}")
    ok("nothing fits: the skills to choose from")

    # A Message answer passes back as a Message.
    [event] = await events_of(client.send_message(request("tck-message-response", "translate this into German")))
    check(event.HasField("message"), f"a message: {event}")
    check(event.message.parts[0].text == "Direct message response", f"its text: {event.message}")
    ok("a message answer")

    # Multi-turn: input-required, then the next message on that task reaches the same task.
    [event] = await events_of(client.send_message(request("tck-input-required", "translate: needs more input")))
    task = event.task
    check(task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, f"input required: {task}")
    [event] = await events_of(
        client.send_message(request("follow-up", "here it is", task_id=task.id, context_id=task.context_id))
    )
    check(event.task.id == task.id and event.task.status.state == TaskState.TASK_STATE_COMPLETED, f"answered: {event}")
    read = await client.get_task(GetTaskRequest(id=task.id, history_length=10))
    check(read.id == task.id and len(read.history) >= 2, f"read: {read}")
    ok("multi-turn input-required, then the task read")

    # A streamed, chunked artifact: the target's events in order.
    events = await events_of(streaming.send_message(request("tck-stream-artifact-chunked", "translate, streaming")))
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    check([c.artifact.parts[0].text for c in chunks] == ["chunk-1 ", "chunk-2"], f"chunks: {events}")
    check(chunks[1].append and chunks[1].last_chunk, f"the last chunk: {chunks[1]}")
    check(events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED, f"the end: {events[-1]}")
    ok("a streamed chunked artifact")

    # A cancel reaches the target's task.
    [event] = await events_of(
        client.send_message(request("test-resubscribe-message-id", "translate, a long task", blocking=False))
    )
    canceled = await client.cancel_task(CancelTaskRequest(id=event.task.id))
    check(canceled.status.state == TaskState.TASK_STATE_CANCELED, f"canceled: {canceled}")
    ok("a cancel forwarded")
    await http.aclose()


if __name__ == "__main__":
    asyncio.run(main())

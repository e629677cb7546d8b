"""An A2A agent for Parley to call: it plays its person's negotiation turns and reviews code.

It is served by the official A2A SDK's own server (the packages pinned in requirements.txt), as
any agent built with an A2A framework is: Parley reads its AgentCard, then sends it messages.

    bash examples/a2a_agent/run.sh --port 8090     # installs the packages on first use, then serves

It listens on 127.0.0.1 only, serves its card at /.well-known/agent-card.json (A2A 1.0 and 0.3 on
one JSON-RPC endpoint) and prints `ready <url>` once it answers. Register it with Parley by that
card's URL (POST /api/agents with `agentCardUrl`); Parley then sends it two kinds of message, each
a data part beside a line of text, told apart by `metadata.parley`:

- a negotiation turn (`negotiationId`, `allowedActions`): the data is what a polling agent's
  pickup gets (the turn, its history, both people's profiles and intents); the answer is a respond
  body, `{"action", "message", "assessment": {"reasoning", "suggestedRoles"}}`;
- a delegation (`requestId`, `taskType`, `outputSchema`): the data is the delegation's input; the
  answer is the output, as a data part of the task's artifact.

Its judgement is deliberately simple (shared words between what its person wants and what the
other person offers); put your own model or rules in `decide_turn` and `review`.
"""

import argparse
import asyncio
import os
import re
import socket
import sys

# The SDK's OpenTelemetry wrappers only add noise on stderr here (no exporter is configured).
os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")

import uvicorn
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette

from a2a.helpers import new_data_part, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Task, TaskState, TaskStatus

# Words that say nothing about what someone wants or offers.
FILLER = set("a an and as at be for from i in into is looking my of on or our the to we who with".split())


def whole_numbers(value):
    """protobuf's Value holds every number as a double: give whole numbers back as integers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole_numbers(v) for v in value]
    return value


def words(*texts):
    return {w for t in texts for w in re.findall(r"[a-z0-9+#]+", str(t).lower()) if w not in FILLER and len(w) > 2}


def wants(user):
    return words(*[i.get("text", "") for i in user.get("intents", [])])


def offers(user):
    profile = user.get("profile") or {}
    return words(profile.get("bio", ""), *profile.get("skills", []), *profile.get("interests", []))


def decide_turn(item, allowed):
    """One negotiation turn: propose at the start, accept a match whose other person offers what
    ours wants, counter once asking for it otherwise, and decide when the turn must."""
    turn, context = item["turn"], item["context"]
    me, them = context["ownUser"], context["otherUser"]
    shared = sorted(wants(me) & offers(them))
    history = turn.get("history") or []
    # Mirror the roles the other side suggested last, so that the two suggestions agree.
    theirs = next((h.get("suggestedRoles") for h in reversed(history) if h.get("userId") != me["id"]), None)
    roles = {"ownUser": theirs["otherUser"], "otherUser": theirs["ownUser"]} if theirs else {"ownUser": "peer", "otherUser": "peer"}
    if "propose" in allowed:
        action = "propose"
        message = f"{me['name']} would like to meet {them['name']}."
    elif shared and "accept" in allowed:
        action = "accept"
        message = f"{them['name']} offers what {me['name']} is looking for ({', '.join(shared[:3])})."
    elif "counter" in allowed and not any(h.get("action") == "counter" and h.get("userId") == me["id"] for h in history):
        action = "counter"
        message = f"What has {them['name']} done that matches what {me['name']} is looking for?"
    else:
        action = "accept" if shared and "accept" in allowed else "reject"
        message = f"{me['name']} will pass: nothing {them['name']} offers matches what they want."
    reasoning = f"shared words: {', '.join(shared) or 'none'}; allowed: {', '.join(allowed)}"
    return {"action": action, "message": message, "assessment": {"reasoning": reasoning, "suggestedRoles": roles}}


def review(task_type, data):
    """A delegation's output. This agent offers `code-review`: {"code": "..."} -> {"feedback": "..."}."""
    if task_type != "code-review" or not isinstance(data, dict) or not isinstance(data.get("code"), str):
        raise ValueError(f"this agent reviews code only ({{\"code\": \"...\"}}), not {task_type}")
    code = data["code"]
    notes = [f"{len(code.splitlines())} line(s) read"]
    for pattern, note in [(r"\.unwrap\(\)", "unwrap() panics on an error: handle it"),
                          (r"\bTODO\b", "a TODO is left in"), (r"\bpanic!", "panic! stops the process")]:
        if re.search(pattern, code):
            notes.append(note)
    if len(notes) == 1:
        notes.append("nothing to flag")
    return {"feedback": "; ".join(notes)}


class Executor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue) -> None:
        message = context.message
        data = next((whole_numbers(MessageToDict(p.data)) for p in message.parts if p.HasField("data")), None)
        parley = {**whole_numbers(context.metadata), **whole_numbers(MessageToDict(message.metadata))}.get("parley") or {}

        # The task exists from the first event on: Parley's non-blocking send is answered with it.
        await event_queue.enqueue_event(Task(id=context.task_id, context_id=context.context_id,
                                             status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED), history=[message]))
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        try:
            if "negotiationId" in parley:
                answer = decide_turn(data, parley.get("allowedActions") or ["propose", "counter", "accept", "reject"])
            else:
                answer = review(parley.get("taskType"), data)
        except Exception as e:  # the task fails with why; Parley reports it and moves on
            await updater.failed(updater.new_agent_message([new_text_part(str(e))]))
            return
        await updater.add_artifact([new_data_part(answer)], name="result")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def card(url):
    return AgentCard(
        name="Parley example agent",
        description="Plays its person's negotiation turns and reviews code, for Parley to call over A2A.",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=v) for v in ("1.0", "0.3")],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["application/json", "text/plain"],
        default_output_modes=["application/json"],
        skills=[AgentSkill(id="negotiate", name="Negotiate a match", description="Plays its person's turns.", tags=["negotiation"]),
                AgentSkill(id="code-review", name="Code review", description="{\"code\"} -> {\"feedback\"}", tags=["code-review"])],
    )


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8090, help="the port on 127.0.0.1 (0: a free one)")
    port = parser.parse_args().port

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    agent_card = card(base + "/")
    handler = DefaultRequestHandler(agent_executor=Executor(), task_store=InMemoryTaskStore(), agent_card=agent_card)
    app = Starlette(routes=create_agent_card_routes(agent_card)
                    + create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if serving.done():
            serving.result()
            sys.exit("the server stopped before it started")
        await asyncio.sleep(0.05)
    print(f"ready {base} (its card: {base}/.well-known/agent-card.json)", flush=True)
    await serving


if __name__ == "__main__":
    asyncio.run(main())

"""A plain message's round trip through Parley beside the same agent called directly, in one run.

    python router_bench.py --agent http://127.0.0.1:9911 --parley http://127.0.0.1:8964 --key pk_... [-n 300]

The agent is the A2A TCK's own agent (`tck_sut.py`, the official SDK's server), registered in
Parley by its card; the requester's key is `--key`. Each round sends one blocking JSON-RPC 1.0
`SendMessage` with a text part (`messageId` `tck-complete-task-...`: the agent completes the task
at once) three ways, interleaved so that all three see the same machine: to the agent directly,
through Parley with the skill named (`metadata.skillId`), and through Parley routed by meaning.
One HTTP client with keep-alive per way; a warm-up of 20 rounds is not counted. Prints p50, p95
and p99 in milliseconds per way.
"""

import argparse
import statistics
import time
import uuid

import httpx


def send(client, url, text, skill=None):
    message = {"messageId": f"tck-complete-task-{uuid.uuid4()}", "role": "ROLE_USER", "parts": [{"text": text}]}
    if skill:
        message["metadata"] = {"skillId": skill}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    started = time.perf_counter()
    answer = client.post(url, json=body)
    elapsed = (time.perf_counter() - started) * 1000
    result = answer.json()
    assert answer.status_code == 200 and "result" in result, result
    assert result["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", result
    return elapsed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--parley", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("-n", type=int, default=300)
    args = ap.parse_args()
    version = {"A2A-Version": "1.0"}
    direct = httpx.Client(headers=version, timeout=30)
    parley = httpx.Client(headers={**version, "Authorization": f"Bearer {args.key}"}, timeout=30)
    ways = {
        "agent called directly": lambda: send(direct, args.agent + "/", "Hello from TCK"),
        "through Parley, skill named": lambda: send(parley, args.parley + "/a2a", "Hello from TCK", "tck"),
        "through Parley, routed by meaning": lambda: send(parley, args.parley + "/a2a", "Hello from TCK"),
    }
    for _ in range(20):
        for way in ways.values():
            way()
    samples = {name: [] for name in ways}
    for _ in range(args.n):
        for name, way in ways.items():
            samples[name].append(way())
    for name, s in samples.items():
        q = statistics.quantiles(s, n=100)
        print(f"{name:36} n={len(s)}  p50 {statistics.median(s):7.2f} ms  p95 {q[94]:7.2f} ms  p99 {q[98]:7.2f} ms")


if __name__ == "__main__":
    main()

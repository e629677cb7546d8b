"""A personal agent's program for `parley agent --exec`: one item on stdin, its answer on stdout.

    export PARLEY_URL=http://127.0.0.1:8080
    read -rsp 'API key: ' PARLEY_AGENT_KEY && export PARLEY_AGENT_KEY   # pasted, never on a command line
    cargo run -q -- agent --exec "python3 examples/my_agent.py"                        # turns
    cargo run -q -- agent --turns --delegations --exec "python3 examples/my_agent.py"  # and delegations

A turn is the pickup answer without its claim token (`turn`, `context`); the answer is a respond
body. A delegation is the request (`requestId`, `taskType`, `input`, `outputSchema`, ...); the
answer is `{"output": ...}`, `{"reject": "why"}` or `{"error": "why"}`. `parley agent` checks the
answer by the service's rules before sending it, and never shows this program its key.
"""

import json
import sys

item = json.load(sys.stdin)

if "turn" in item:
    turn, me, them = item["turn"], item["context"]["ownUser"], item["context"]["otherUser"]
    if turn["number"] == 0:
        action = "propose"  # turn 0 must be a propose (or a reject)
    elif turn["isFinalTurn"] or turn["number"] >= 3:
        action = "accept"
    else:
        action = "counter"
    json.dump({
        "action": action,
        "message": f"{me['name']} would like to hear more about what {them['name']} is building.",
        "assessment": {"reasoning": "Why this action, for my own user only",
                       "suggestedRoles": {"ownUser": "peer", "otherUser": "peer"}},
    }, sys.stdout)
elif item.get("taskType") == "code-review":
    code = item["input"].get("code", "")
    json.dump({"output": {"feedback": f"read {len(code.splitlines())} line(s); looks fine"}}, sys.stdout)
else:
    json.dump({"reject": f"this program does not do {item.get('taskType')}"}, sys.stdout)

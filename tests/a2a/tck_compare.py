"""Compares two A2A TCK compatibility reports (`--compatibility-report`'s JSON): the SDK's own
server's and Parley's, from one run.

    python tck_compare.py SDK.json PARLEY.json

Prints each report's requirements passed and failed per level (MUST, SHOULD, MAY), then every
MUST requirement Parley fails, then every MUST requirement the SDK's server passes and Parley
fails (or does not run); exits 1 when there
is one. One skipped through Parley because Parley declares a capability the kit's agent does not
(push notifications) is listed apart and does not fail.
"""

import json
import sys


def counts(report):
    out = {}
    for req in report["per_requirement"].values():
        level = out.setdefault(req["level"], {"PASS": 0, "FAIL": 0, "other": 0})
        level[req["status"] if req["status"] in ("PASS", "FAIL") else "other"] += 1
    return out


def main():
    sdk, parley = (json.load(open(p)) for p in sys.argv[1:3])
    for name, report in (("sdk", sdk), ("parley", parley)):
        c = counts(report)
        print(name, " ".join(f"{lvl} {v['PASS']} passed/{v['FAIL']} failed" for lvl, v in sorted(c.items())))
    worse, skipped = [], []
    for rid, req in sdk["per_requirement"].items():
        if req["level"] != "MUST":
            continue
        theirs = parley["per_requirement"].get(rid, {})
        for transport, status in req.get("transports", {}).items():
            got = theirs.get("transports", {}).get(transport, "not run")
            if status != "PASS" or got == "PASS":
                continue
            line = f"{rid} [{transport}]: {got} {'; '.join(theirs.get('errors', []))[:300]}"
            # Skipped for a capability Parley declares and the kit's agent does not (push
            # notifications: CORE-CAP-001 checks the error of a service without them).
            (skipped if got == "SKIPPED" else worse).append(line)
    for rid, req in sorted(parley["per_requirement"].items()):
        if req["level"] == "MUST" and req["status"] == "FAIL":
            failed = [t for t, status in req.get("transports", {}).items() if status == "FAIL"]
            print(f"MUST failed through Parley: {rid} [{', '.join(failed)}] {'; '.join(req.get('errors', []))[:200]}")
    for w in skipped:
        print("MUST passed by the SDK's server, skipped through Parley (a capability only Parley declares):", w)
    for w in worse:
        print("MUST passed by the SDK's server, not through Parley:", w)
    sys.exit(1 if worse else 0)


if __name__ == "__main__":
    main()

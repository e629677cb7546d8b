#!/usr/bin/env python3
"""The system negotiator asking its person, measured on labelled negotiation scenarios.

Plays each scenario as the labelled-set harness does (its `run.py` and `harness.py`, imported
from --cases-dir; nothing of them is changed), with two differences: the system side's user has
opted in to be asked (`negotiationPreferences.askWhenUnsure`), and a scripted person answers any
question the system negotiator asks them, as the scenario's label says (`accept`: yes;
`reject` and `not-accept`: no). An `either` scenario (genuinely ambiguous) is played twice, once
answered yes and once no. `--no-opt-in` plays every scenario without the opt-in (no question
may be asked then).

Reports per scenario the questions asked, the answer given, the system side's verdict, and
whether its deciding turn was decided by the answer; the last line is
    ask-person: questions on clear cases Q/N; ambiguous decided by the answer D/M; agree A/S

Usage:
    python3 tests/judgment/ask_person.py --cases-dir DIR [FILE.json ...] [--bin target/debug/parley]
        [--only ID,ID] [--no-opt-in] [-v] [--json OUT]
"""
import argparse
import json
import os
import sys
import time
import uuid


def load_harness(cases_dir):
    sys.path.insert(0, cases_dir)
    import harness as H  # noqa: E402
    import run as R  # noqa: E402
    return H, R


ANSWER = {"accept": "yes", "reject": "no", "not-accept": "no"}


def play(H, R, base, sc, run_tag, limit_s, opt_in, answer):
    """Plays one scenario with the scripted agent and the scripted person; returns its record."""
    svc = H.jwt("platform", "service")
    prefix = f"{run_tag}.{sc['id']}.{answer or 'none'}"
    sys_side = sc["systemSide"]
    agent_side = R.other_side(sys_side)
    users = {"source": R.ctx(sc["sourceUser"], prefix), "candidate": R.ctx(sc["candidateUser"], prefix)}
    if opt_in:
        users[sys_side]["negotiationPreferences"] = {"askWhenUnsure": True}
    person = H.jwt(users[sys_side]["id"])
    agent_user = users[agent_side]["id"]
    r = H.call(base, "POST", "/api/agents", {"name": f"eval agent {sc['id']}"}, token=H.jwt(agent_user))
    if r.status not in (200, 201) or not r.json:
        raise R.ScenarioError(f"register agent: {r}")
    aid = (r.json.get("agent") or r.json)["id"]
    key = (r.json.get("apiKey") or {}).get("key")
    body = {"sourceUser": users["source"], "candidateUser": users["candidate"], "seedAssessment": sc["seedAssessment"]}
    for k in ("indexContext", "discoveryQuery"):
        if sc.get(k) is not None:
            body[k] = sc[k]
    r = H.call(base, "POST", "/api/negotiations", body, token=svc)
    if r.status not in (200, 201) or not r.json:
        raise R.ScenarioError(f"create negotiation: {r}")
    neg_id = r.json["negotiation"]["id"]
    status = r.json["negotiation"].get("status")
    agent = R.Agent(sc.get("agent") or {}, agent_side, sc["seedAssessment"].get("valencyRole") or "peer")
    P = f"/api/agents/{aid}/negotiations"
    questions = []
    deadline = time.time() + limit_s
    while status not in ("completed", "canceled", "failed"):
        if time.time() > deadline:
            H.call(base, "DELETE", f"/api/negotiations/{neg_id}", token=svc, timeout=5)
            raise R.ScenarioError(f"no end within {limit_s}s (status {status})")
        if status == "waiting_for_person":
            view = H.call(base, "GET", f"/api/negotiations/{neg_id}", token=person)
            q = (view.json or {}).get("pendingQuestion")
            if not q:
                raise R.ScenarioError(f"waiting for the person without a question: {view}")
            questions.append(q["question"])
            if answer is None:
                raise R.ScenarioError("a question was asked without opt-in")
            a = H.call(base, "POST", f"/api/negotiations/{neg_id}/questions/{q['id']}/answer", {"answer": answer},
                       token=person)
            if a.status != 200:
                raise R.ScenarioError(f"answer: {a}")
            status = R.get_negotiation(base, neg_id, svc).get("status")
            continue
        p = H.call(base, "POST", f"{P}/pickup?wait={R.PICKUP_WAIT}", token=key, timeout=R.PICKUP_WAIT + 15)
        if p.status == 204:
            status = R.get_negotiation(base, neg_id, svc).get("status")
            continue
        if p.status != 200 or not p.json:
            raise R.ScenarioError(f"pickup: {p}")
        action, message = agent.turn(p.json)
        rr = H.call(base, "POST", f"{P}/{neg_id}/respond", agent.body(p.json, action, message), token=key)
        if rr.status != 200 or not rr.json:
            raise R.ScenarioError(f"respond ({action}): {rr}")
        status = rr.json.get("status")
    final = R.get_negotiation(base, neg_id, svc)
    turns = final.get("turns") or []
    last = turns[-1] if turns else {}
    verdict = last["action"] if last.get("side") == sys_side and last.get("action") in ("accept", "reject") else "none"
    own_view = H.call(base, "GET", f"/api/negotiations/{neg_id}", token=person).json or {}
    own_turns = own_view.get("turns") or []
    deciding = own_turns[-1] if own_turns else {}
    by_answer = deciding.get("side") == sys_side and (deciding.get("reasoning") or "").startswith("decided by")
    return {"negotiationId": neg_id, "verdict": verdict,
            "hasOpportunity": bool((final.get("outcome") or {}).get("hasOpportunity")),
            "questions": questions, "answer": answer if questions else None, "decidedByAnswer": by_answer,
            "turns": len(turns)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--cases-dir", default=os.environ.get("NEG_EVAL_LIB"), help="where run.py and harness.py are")
    ap.add_argument("--bin", default=os.environ.get("PARLEY_BIN"))
    ap.add_argument("--only", default="")
    ap.add_argument("--no-opt-in", action="store_true")
    ap.add_argument("--scenario-timeout", type=float, default=60.0)
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    if not args.cases_dir:
        print("--cases-dir (or NEG_EVAL_LIB) must name the directory of run.py and harness.py")
        return 2
    H, R = load_harness(args.cases_dir)
    if args.bin:
        H.BIN_DIR = os.path.dirname(os.path.abspath(args.bin))
        name = os.path.basename(args.bin)
    else:
        name = "parley"
    H.need_binary(name)
    files = args.files or [os.path.join(args.cases_dir, "public.json")]
    only = {x for x in args.only.split(",") if x}
    opt_in = not args.no_opt_in
    records = []
    for path in files:
        scenarios = [sc for sc in R.load(path) if not only or sc["id"] in only]
        run_tag = uuid.uuid4().hex[:8]
        with H.server(name=name) as base:
            for sc in scenarios:
                answers = [ANSWER.get(sc["label"])] if sc["label"] in ANSWER else ["yes", "no"]
                for answer in answers:
                    try:
                        rec = play(H, R, base, sc, run_tag, args.scenario_timeout, opt_in, answer if opt_in else None)
                    except (R.ScenarioError, OSError) as e:
                        rec = {"error": str(e), "verdict": "error", "hasOpportunity": False, "questions": [],
                               "decidedByAnswer": False}
                    rec.update({"id": sc["id"], "category": sc["category"], "label": sc["label"],
                                "scriptedAnswer": answer if opt_in else None})
                    records.append(rec)
                    if args.verbose:
                        q = rec["questions"][0] if rec["questions"] else "-"
                        print(f"{sc['id']:<14} {sc['label']:<10} answer={rec['scriptedAnswer'] or '-':<4} "
                              f"questions={len(rec['questions'])} verdict={rec['verdict']:<6} "
                              f"by-answer={'yes' if rec['decidedByAnswer'] else 'no':<3} "
                              f"{rec.get('error') or ''}\n    {q}")
    clear = [r for r in records if r["label"] != "either"]
    ambiguous = [r for r in records if r["label"] == "either"]
    asked_clear = [r for r in clear if r["questions"]]
    decided = [r for r in ambiguous if r["decidedByAnswer"] and r["verdict"] == ("accept" if r["scriptedAnswer"] == "yes" else "reject")]
    agree = sum(R.agrees(r["label"], r) for r in clear)
    errors = [r for r in records if r.get("error")]
    for r in asked_clear:
        print(f"asked on a clear case: {r['id']} ({r['label']}): {r['questions'][0]}")
    for r in errors:
        print(f"ERROR {r['id']}: {r['error']}"[:400])
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(records, f, ensure_ascii=False, indent=1)
    print(f"ask-person{'' if opt_in else ' (no opt-in)'}: questions on clear cases "
          f"{sum(len(r['questions']) for r in clear)}/{len(clear)}; ambiguous decided by the answer "
          f"{len(decided)}/{len(ambiguous)}; agree {agree}/{len(clear)}; "
          f"questions in all {sum(len(r['questions']) for r in records)}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

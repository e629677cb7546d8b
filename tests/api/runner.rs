//! `parley agent` end to end: a real service, the real `parley` binary as the runner, a real
//! program (a small Python script) or a stand-in OpenAI-compatible server as the worker.
//!
//! Every runner is killed when its test ends (also on a panic); every program the runner starts
//! records its process id, and the scratch directory stops their process groups when it is
//! dropped. The programs that wait also end on their own as soon as their runner is gone.

use std::{
    path::PathBuf,
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use reqwest::{Method, StatusCode};
use rustix::process::{Pid, Signal, kill_process, kill_process_group};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{
    fixtures,
    helpers::{TestAgent, TestApp},
};

/// The test agent: reads one item on stdin, records it, and answers.
///
/// `python3 agent.py MODE [ARG]`: `answer` answers at once; `ask` asks its person at a later
/// turn, then accepts when they answered yes and rejects otherwise; `slow SECONDS` waits first (ending
/// early if its runner is gone); `fail-for NAME` exits 3 for turns against the user called NAME.
/// Turns: `propose` at turn 0, `counter` until turn 3, then `accept`. Delegations: `{"output":
/// {"feedback": ...}}`, or `{"reject": ...}` / `{"error": ...}` when the code asks for it.
const AGENT: &str = r#"
import json, os, sys, time

here = os.path.dirname(os.path.abspath(__file__))
mode = sys.argv[1] if len(sys.argv) > 1 else "answer"
raw = sys.stdin.read()
item = json.loads(raw)
with open(os.path.join(here, "pids"), "a") as f:
    f.write(f"{os.getpid()}\n")
record = {"t": time.time(), "pid": os.getpid(), "raw": raw,
          "env": {k: v for k, v in os.environ.items() if k.startswith("PARLEY")}}
# What the runner's /proc shows this program (it runs as the runner's user).
for name in ("environ", "cmdline"):
    try:
        with open(f"/proc/{os.getppid()}/{name}", "rb") as f:
            record["runner_" + name] = f.read().decode("latin-1")
    except OSError as e:
        record["runner_" + name] = f"unreadable: {e}"
if "turn" in item:
    record.update(negotiation=item["negotiationId"], turn=item["turn"]["number"],
                  other=item["context"]["otherUser"]["name"])
else:
    record.update(request=item["requestId"])
with open(os.path.join(here, "runs.jsonl"), "a") as f:
    f.write(json.dumps(record) + "\n")

def wait(seconds):
    parent = os.getppid()
    end = time.time() + seconds
    while time.time() < end:
        if os.getppid() != parent:
            sys.exit(0)  # the runner is gone: nobody to answer to
        time.sleep(0.05)

if mode == "fail-for" and record.get("other") == sys.argv[2]:
    print(f"cannot negotiate with {sys.argv[2]}", file=sys.stderr)
    sys.exit(3)
if mode == "slow":
    wait(float(sys.argv[2]))
if mode == "stubborn":
    time.sleep(float(sys.argv[2]))  # never looks whether the runner is still there
if "turn" in item and mode == "ask" and item["turn"]["number"] > 0:
    answers = item["context"].get("personAnswers") or []
    if not answers:
        print(json.dumps({"action": "ask_person", "question": "Is equity instead of salary fine?",
                          "options": ["yes", "no"]}))
        sys.exit(0)
    action = "accept" if answers[-1]["answer"] == "yes" else "reject"
    print(json.dumps({"action": action, "message": "My user answered",
                      "assessment": {"reasoning": "My user said " + str(answers[-1]["answer"])}}))
    sys.exit(0)
if "turn" in item:
    n = item["turn"]["number"]
    action = "propose" if n == 0 else ("accept" if n >= 3 or item["turn"]["isFinalTurn"] else "counter")
    print(json.dumps({"action": action, "message": "Happy to talk about the payments API",
                      "assessment": {"reasoning": "The skills and intents fit",
                                     "suggestedRoles": {"ownUser": "agent", "otherUser": "patient"}}}))
else:
    code = item["input"].get("code", "")
    if "reject" in code:
        print(json.dumps({"reject": "not my kind of code"}))
    elif "crash" in code:
        print(json.dumps({"error": "the linter crashed"}))
    elif "die" in code:
        print("segfault in the parser", file=sys.stderr)
        sys.exit(4)
    elif "shapeless" in code:
        print(json.dumps({"output": {"verdict": "fine"}}))
    else:
        print(json.dumps({"output": {"feedback": f"{len(code)} characters reviewed"}}))
"#;

/// A bound on waits that only keeps a broken test from hanging; never a speed target.
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);

/// A test's scratch directory: the agent script, what its runs recorded, the runners' logs.
pub(crate) struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("parley-runner-{name}-{}", Uuid::now_v7()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("agent.py"), AGENT).unwrap();
        Scratch { dir }
    }

    /// The `--exec` command line of the agent script in `mode`.
    pub(crate) fn program(&self, mode: &str) -> String {
        format!("exec python3 {} {mode}", self.dir.join("agent.py").display())
    }

    /// Every run the program recorded, oldest first.
    fn runs(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("runs.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Runs on `negotiation`'s turn `turn`.
    pub(crate) fn runs_on(&self, negotiation: &str, turn: u64) -> Vec<Value> {
        self.runs().into_iter().filter(|r| r["negotiation"] == negotiation && r["turn"] == turn).collect()
    }

    async fn until_runs(&self, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let runs = self.runs();
            if runs.len() >= n {
                return runs;
            }
            assert!(Instant::now() < deadline, "the program ran {} times, not {n}", runs.len());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let pids = std::fs::read_to_string(self.dir.join("pids")).unwrap_or_default();
        for pid in pids.lines().filter_map(|p| p.trim().parse::<i32>().ok()).filter_map(Pid::from_raw) {
            // Each program leads its own process group; most are long gone (ESRCH).
            let _ = kill_process_group(pid, Signal::KILL);
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A `parley agent` process, killed when dropped.
pub(crate) struct Runner {
    child: Option<Child>,
    log: PathBuf,
}

impl Runner {
    pub(crate) fn start(app: &TestApp, key: &str, args: &[&str], scratch: &Scratch, name: &str) -> Runner {
        Runner::start_with(app, key, args, scratch, name, &[])
    }

    fn start_with(
        app: &TestApp,
        key: &str,
        args: &[&str],
        scratch: &Scratch,
        name: &str,
        env: &[(&str, &str)],
    ) -> Runner {
        let log = scratch.dir.join(format!("{name}.log"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_parley"));
        command
            .arg("agent")
            .args(args)
            .env("PARLEY_URL", &app.base)
            .env("PARLEY_AGENT_KEY", key)
            .env_remove("PARLEY_LLM_API_KEY")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        for (k, v) in env {
            command.env(k, v);
        }
        Runner { child: Some(command.spawn().expect("starting parley agent")), log }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn pid(&self) -> Pid {
        Pid::from_child(self.child.as_ref().expect("running"))
    }

    pub(crate) fn term(&self) {
        kill_process(self.pid(), Signal::TERM).unwrap();
    }

    fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    /// Waits for the runner to exit.
    pub(crate) async fn exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        let child = self.child.as_mut().expect("running");
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the runner did not exit; its log:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the log holds `needle`.
    async fn until_logged(&self, needle: &str) {
        self.until_logged_times(needle, 1).await;
    }

    /// Waits until the log holds `needle` at least `times` times.
    async fn until_logged_times(&self, needle: &str, times: usize) {
        let deadline = Instant::now() + PATIENCE;
        while self.log().matches(needle).count() < times {
            assert!(
                Instant::now() < deadline,
                "the runner never logged {needle:?} {times} times; its log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// `(turn_number, played_by, agent_id, claim_generation)` of every stored turn, in order.
async fn turns(app: &TestApp, negotiation: &str) -> Vec<(i32, String, Option<Uuid>, Option<i64>)> {
    sqlx::query_as(
        "SELECT turn_number, played_by, agent_id, claim_generation FROM messages WHERE task_id = $1 ORDER BY turn_number",
    )
    .bind(negotiation.parse::<Uuid>().unwrap())
    .fetch_all(&app.pool)
    .await
    .unwrap()
}

/// Waits until turn `number` of the negotiation is stored; returns it.
async fn until_turn(app: &TestApp, negotiation: &str, number: i32) -> (i32, String, Option<Uuid>, Option<i64>) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(turn) = turns(app, negotiation).await.into_iter().find(|t| t.0 == number) {
            return turn;
        }
        assert!(Instant::now() < deadline, "turn {number} of {negotiation} was never stored");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(crate) async fn start(app: &TestApp, body: Value) -> String {
    app.start(&body).await["negotiation"]["id"].as_str().unwrap().to_owned()
}

fn id_of(s: &str) -> Uuid {
    s.parse().unwrap()
}

/// Whether process `pid` is gone (or a zombie nobody waits for any more).
fn gone(pid: u64) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.is_empty() || stat.split_whitespace().nth(2) == Some("Z")
}

async fn until_gone(pid: u64) {
    let deadline = Instant::now() + PATIENCE;
    while !gone(pid) {
        assert!(Instant::now() < deadline, "process {pid} is still running");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_program_plays_the_users_turns_end_to_end_and_never_sees_the_claim_token_or_the_key() {
    let app = TestApp::spawn().await;
    let tomas = app.register_agent("user-tomas").await;
    // Tomas opens (turn 0) and answers Maya's system negotiator until one of them ends it.
    let id = start(&app, fixtures::request(fixtures::engineer(), fixtures::founder(), 88.0)).await;
    let scratch = Scratch::new("turns");
    let mut runner = Runner::start(&app, &tomas.key, &["--exec", &scratch.program("answer")], &scratch, "runner");

    let view = app.wait_for(&id, PATIENCE, |v| v["status"] == "completed").await;
    let stored = turns(&app, &id).await;
    let tomas_turns: Vec<_> = stored.iter().filter(|t| t.0 % 2 == 0).collect();
    assert!(!tomas_turns.is_empty());
    for turn in &tomas_turns {
        assert_eq!((turn.1.as_str(), turn.2), ("personal", Some(id_of(&tomas.id))), "{stored:?}");
    }
    assert_eq!(view["turns"][0]["action"], "propose");
    assert_eq!(view["turns"][0]["message"], "Happy to talk about the payments API");

    // The program ran once per turn of Tomas's, saw the turn with its context, and never the
    // claim token or the agent's key (not on stdin, not in its environment).
    let runs = scratch.runs();
    assert_eq!(runs.len(), tomas_turns.len(), "{runs:?}");
    for run in &runs {
        let raw = run["raw"].as_str().unwrap();
        let item: Value = serde_json::from_str(raw).unwrap();
        assert_eq!(item["negotiationId"], id.as_str());
        assert_eq!(item["context"]["ownUser"]["id"], "user-tomas");
        assert!(item.get("claimToken").is_none(), "{raw}");
        assert!(!raw.contains("ct_") && !raw.contains(&tomas.key), "{raw}");
        assert_eq!(run["env"].get("PARLEY_AGENT_KEY"), None, "{run}");
        assert!(!run["env"].to_string().contains(&tomas.key), "{run}");
    }

    // One line per turn (written once the runner has the service's answer), then a summary on
    // a clean stop.
    runner.until_logged_times("turn answered", runs.len()).await;
    let log = runner.log();
    assert_eq!(log.matches("turn answered").count(), runs.len(), "{log}");
    assert!(log.contains(&format!("negotiation={id} turn=0 action=propose")), "{log}");
    runner.term();
    assert_eq!(runner.exit().await.code(), Some(0), "{}", runner.log());
    let log = runner.log();
    assert!(log.contains(&format!("stopped: turns: {} answered", runs.len())), "{log}");
}

#[tokio::test]
async fn a_failing_program_gives_the_turn_back_without_spinning_and_the_runner_serves_the_others() {
    let app = TestApp::spawn().await;
    let tomas = app.register_agent("user-tomas").await;
    // Two turns of Tomas's wait: against Maya (the program fails on it) and against Léa.
    let with_maya = start(&app, fixtures::good_match()).await;
    let with_lea = start(&app, fixtures::request(fixtures::pastry_chef(), fixtures::engineer(), 60.0)).await;
    let scratch = Scratch::new("failing");
    let program = scratch.program("fail-for 'Maya Chen'");
    let mut runner = Runner::start(&app, &tomas.key, &["--exec", &program], &scratch, "runner");

    // The third failure hands Maya's turn to the system negotiator, which plays it for Tomas.
    let handed = until_turn(&app, &with_maya, 1).await;
    assert_eq!((handed.1.as_str(), handed.2), ("system", None), "turn 1 was handed back");
    let failed = scratch.runs_on(&with_maya, 1);
    assert_eq!(failed.len(), 3, "three tries, no more: {failed:?}");
    // Never a tight loop: each try waits at least half its backoff step (1 s, then 2 s).
    let at: Vec<f64> = failed.iter().map(|r| r["t"].as_f64().unwrap()).collect();
    assert!(at[1] - at[0] >= 0.45 && at[2] - at[1] >= 0.95, "tries at {at:?}");
    // Meanwhile the runner served Léa's turn: pickup skipped the turn it was holding back from.
    let lea = until_turn(&app, &with_lea, 1).await;
    assert_eq!((lea.1.as_str(), lea.2), ("personal", Some(id_of(&tomas.id))));
    let lea_run = scratch.runs_on(&with_lea, 1)[0]["t"].as_f64().unwrap();
    assert!(lea_run < at[2], "Léa's turn waited for Maya's to be handed back: {lea_run} vs {at:?}");

    // Each failure is logged with the exit status and the end of stderr; the runner goes on.
    runner.until_logged("handed to the system negotiator").await;
    let log = runner.log();
    let failures: Vec<&str> = log.lines().filter(|l| l.contains(&format!("negotiation={with_maya} turn=1 "))).collect();
    assert_eq!(failures.len(), 3, "{log}");
    for line in &failures {
        assert!(line.contains("exited with status 3") && line.contains("cannot negotiate with Maya Chen"), "{line}");
    }
    assert!(failures[0].contains("outcome=\"released\"") && failures[2].contains("outcome=\"handed_back\""), "{log}");
    assert!(runner.is_running(), "a failing program does not stop the runner:\n{log}");
}

#[tokio::test]
async fn with_no_system_negotiator_to_hand_it_to_a_failing_turn_is_released_again() {
    let app = TestApp::spawn().await;
    let tomas = app.register_agent("user-tomas").await;
    let maya = app.register_agent("user-maya").await;
    // Personal vs personal: Maya's own agent opens; Tomas's program cannot answer her.
    let id = start(&app, fixtures::good_match()).await;
    let maya_turn = app.pickup(&maya, None).await;
    let token = maya_turn.body["claimToken"].as_str().unwrap();
    assert_eq!(app.respond(&maya, &id, &crate::helpers::answer("propose", Some(token))).await.status, StatusCode::OK);
    let scratch = Scratch::new("pvp");
    let runner =
        Runner::start(&app, &tomas.key, &["--exec", &scratch.program("fail-for 'Maya Chen'")], &scratch, "runner");

    runner.until_logged("failures=3").await;
    let log = runner.log();
    let third = log.lines().find(|l| l.contains("failures=3") && l.contains("outcome=")).unwrap();
    assert!(third.contains("outcome=\"released\""), "{log}");
    assert!(!log.contains("handed_back"), "{log}");
    // The log says that nobody can take the turn over, and what ends the wait.
    assert!(log.contains("no one can take this turn over") && log.contains("the negotiation's deadline"), "{log}");
    // The turn waits for an agent of Tomas's again (his runner may hold it once more); nobody
    // played it.
    let (state, turn_count, stored) = app.snapshot(&id).await;
    assert!(matches!(state.as_str(), "waiting_for_agent" | "claimed") && (turn_count, stored) == (1, 1), "{state}");
}

#[tokio::test]
async fn a_program_thinking_past_a_short_claim_timeout_still_answers() {
    let app = TestApp::spawn_with(|c| c.claim_timeout = Duration::from_secs(2)).await;
    let (tomas, id) = app.mixed_negotiation().await;
    let scratch = Scratch::new("thinking");
    let runner =
        Runner::start(&app, &tomas.key, &["--json-logs", "--exec", &scratch.program("slow 5")], &scratch, "runner");

    // The program takes more than twice the claim timeout; the runner kept extending the claim,
    // so the first claim (generation 1) answered, and the program ran once.
    let answered = until_turn(&app, &id, 1).await;
    assert_eq!(answered, (1, "personal".to_owned(), Some(id_of(&tomas.id)), Some(1)));
    assert_eq!(scratch.runs_on(&id, 1).len(), 1);
    // With --json-logs, the item's line is a JSON object a machine reads field by field.
    runner.until_logged("turn answered").await;
    let line = runner
        .log()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["fields"]["message"] == "turn answered")
        .unwrap();
    let fields = &line["fields"];
    assert_eq!((fields["negotiation"].as_str(), fields["turn"].as_u64()), (Some(id.as_str()), Some(1)), "{line}");
    assert_eq!((fields["action"].as_str(), fields["outcome"].as_str()), (Some("counter"), Some("answered")), "{line}");
    assert!(fields["took"].as_str().unwrap().ends_with('s'), "{line}");
}

#[tokio::test]
async fn sigterm_mid_turn_lets_the_turn_finish_within_the_grace_period_and_exits_0() {
    let app = TestApp::spawn().await;
    let (tomas, id) = app.mixed_negotiation().await;
    let scratch = Scratch::new("sigterm");
    let mut runner =
        Runner::start(&app, &tomas.key, &["--exec", &scratch.program("slow 2"), "--grace", "30s"], &scratch, "runner");
    scratch.until_runs(1).await;
    runner.term();

    assert_eq!(runner.exit().await.code(), Some(0), "{}", runner.log());
    assert_eq!(until_turn(&app, &id, 1).await.1, "personal");
    let log = runner.log();
    assert!(log.contains("taking nothing new") && log.contains("turn answered"), "{log}");
    assert!(log.contains("stopped: turns: 1 answered"), "{log}");
    // Nothing new was taken: Tomas's next turn, if the negotiation went on, waits unclaimed.
    assert_eq!(scratch.runs().len(), 1);
    assert_ne!(app.snapshot(&id).await.0, "claimed");
}

#[tokio::test]
async fn sigterm_gives_back_a_turn_its_program_cannot_finish_within_the_grace_period() {
    let app = TestApp::spawn().await;
    let (tomas, id) = app.mixed_negotiation().await;
    let scratch = Scratch::new("grace");
    let mut runner =
        Runner::start(&app, &tomas.key, &["--exec", &scratch.program("slow 120"), "--grace", "1s"], &scratch, "runner");
    let run = scratch.until_runs(1).await.remove(0);
    runner.term();

    assert_eq!(runner.exit().await.code(), Some(0), "{}", runner.log());
    // Given back at once for another pickup, and the program was stopped.
    assert_eq!(app.snapshot(&id).await, ("waiting_for_agent".to_owned(), 1, 1));
    until_gone(run["pid"].as_u64().unwrap()).await;
    let log = runner.log();
    assert!(log.contains("turn given back") && log.contains("1 given back at stop"), "{log}");
}

#[tokio::test]
async fn after_a_runner_is_killed_another_agent_of_the_user_finishes_and_no_turn_is_answered_twice() {
    let app = TestApp::spawn_with(|c| c.claim_timeout = Duration::from_secs(2)).await;
    let laptop = app.register_agent("user-tomas").await;
    let phone = app.register_agent("user-tomas").await;
    let id = start(&app, fixtures::good_match()).await;
    let first_scratch = Scratch::new("killed");
    let mut first =
        Runner::start(&app, &laptop.key, &["--exec", &first_scratch.program("stubborn 120")], &first_scratch, "laptop");
    let run = first_scratch.until_runs(1).await.remove(0);
    assert_eq!(app.snapshot(&id).await.0, "claimed");
    first.kill9();

    // The laptop's claim lapses; the phone's runner takes the turn and plays the rest.
    let second_scratch = Scratch::new("second");
    let _second =
        Runner::start(&app, &phone.key, &["--exec", &second_scratch.program("answer")], &second_scratch, "phone");
    app.wait_for(&id, PATIENCE, |v| v["status"] == "completed").await;
    let stored = turns(&app, &id).await;
    let numbers: Vec<i32> = stored.iter().map(|t| t.0).collect();
    assert_eq!(numbers, (0..stored.len() as i32).collect::<Vec<_>>(), "each turn exactly once: {stored:?}");
    assert_eq!(app.snapshot(&id).await.1, stored.len() as i32);
    // Turn 1 went to the phone under a later claim than the laptop's; the laptop answered none.
    let (_, played_by, agent, generation) = &stored[1];
    assert_eq!((played_by.as_str(), *agent), ("personal", Some(id_of(&phone.id))));
    assert!(generation.unwrap() > 1, "{stored:?}");
    assert!(stored.iter().all(|t| t.2 != Some(id_of(&laptop.id))), "{stored:?}");
    // The killed runner's program, which never looks for its runner, was killed with it.
    until_gone(run["pid"].as_u64().unwrap()).await;
}

#[tokio::test]
async fn an_unknown_revoked_or_inactive_key_stops_the_runner_with_a_clear_message() {
    let app = TestApp::spawn().await;
    let scratch = Scratch::new("keys");
    let agent = app.register_agent("user-tomas").await;
    let tomas = app.user_token("user-tomas");
    let other = app.register_agent("user-lea").await;
    app.call(Method::DELETE, &format!("/api/agents/{}/keys/{}", agent.id, agent.key_id), Some(&tomas), None).await;
    let lea = app.user_token("user-lea");
    app.call(Method::PATCH, &format!("/api/agents/{}", other.id), Some(&lea), Some(&json!({"status": "inactive"})))
        .await;

    for (key, says) in [
        ("pk_no_such_key_0123456789", "unknown, revoked or expired"),
        (agent.key.as_str(), "unknown, revoked or expired"),
        (other.key.as_str(), "inactive"),
    ] {
        let mut runner = Runner::start(&app, key, &["--exec", &scratch.program("answer")], &scratch, "runner");
        let status = runner.exit().await;
        let log = runner.log();
        assert_eq!(status.code(), Some(1), "{log}");
        assert!(log.contains("refused the agent's key") && log.contains(says), "{log}");
        assert_eq!(log.matches("refused the agent's key").count(), 1, "one message, no retry loop:\n{log}");
    }
    assert!(scratch.runs().is_empty());
}

/// The requester's view of a delegation once it ended.
async fn until_ended(app: &TestApp, requester: &TestAgent, request_id: &str) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let path = format!("{}/api/delegations/{request_id}?wait=5", app.base);
        let response = app.client.get(path).header("x-api-key", &requester.key).send().await.unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        if status == StatusCode::OK {
            return body;
        }
        assert!(Instant::now() < deadline, "the delegation never ended: {body}");
    }
}

/// A code-review capability: `{code}` in, `{feedback}` out.
fn review_capability() -> Value {
    json!({
        "taskType": "code-review",
        "inputSchema": {"type": "object", "required": ["code"], "properties": {"code": {"type": "string"}}},
        "outputSchema": {"type": "object", "required": ["feedback"], "properties": {"feedback": {"type": "string"}}},
    })
}

/// An agent of `user` offering code review; returns it and its anonymous id.
async fn reviewer(app: &TestApp, user: &str) -> (TestAgent, String) {
    let agent = app.register_agent(user).await;
    let put = app.agent_call(&agent, Method::PUT, "/capabilities", Some(&review_capability())).await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    let anon = put.body["anonymousAgentId"].as_str().unwrap().to_owned();
    (agent, anon)
}

fn review(requester: &TestAgent, target: &str, code: &str) -> (String, Value) {
    let request_id = Uuid::new_v4().to_string();
    let body = json!({
        "requestId": request_id, "agentId": requester.id, "targetAnonymousId": target,
        "taskType": "code-review", "input": {"code": code}, "fallbackEnabled": false,
    });
    (request_id, body)
}

#[tokio::test]
async fn with_delegations_the_runner_completes_rejects_and_fails_requests_as_the_program_says() {
    let app = TestApp::spawn().await;
    let (ana, anon) = reviewer(&app, "user-ana").await;
    let requester = app.register_agent("user-raj").await;
    // Ana's own turn waits too: a runner serving delegations only must leave it alone.
    let negotiation =
        start(&app, fixtures::request(fixtures::founder(), json!({"id": "user-ana", "name": "Ana"}), 70.0)).await;
    let scratch = Scratch::new("delegations");
    let mut runner = Runner::start(
        &app,
        &ana.key,
        &["--delegations", "--concurrency", "2", "--exec", &scratch.program("answer")],
        &scratch,
        "runner",
    );

    let mut asked = Vec::new();
    for code in ["fn main() {}", "please reject this", "crash now", "die here", "shapeless answer"] {
        let (request_id, body) = review(&requester, &anon, code);
        let answer = app.delegate(&requester, &body).await;
        assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.text);
        asked.push(request_id);
    }
    let done = until_ended(&app, &requester, &asked[0]).await;
    assert_eq!(done["result"]["status"], "success", "{done}");
    assert_eq!(done["result"]["output"], json!({"feedback": "12 characters reviewed"}));
    let rejected = until_ended(&app, &requester, &asked[1]).await;
    assert_eq!(rejected["delegation"]["status"], "rejected", "{rejected}");
    assert_eq!(rejected["delegation"]["attempts"][0]["reason"], "not my kind of code");
    let failed = until_ended(&app, &requester, &asked[2]).await;
    assert_eq!(failed["delegation"]["status"], "error", "{failed}");
    assert_eq!(failed["delegation"]["attempts"][0]["reason"], "the linter crashed");
    // A program that dies, or answers what the output schema refuses, fails the attempt with
    // what went wrong; nothing it printed reaches the requester as output.
    let died = until_ended(&app, &requester, &asked[3]).await;
    assert_eq!(died["delegation"]["status"], "error", "{died}");
    let reason = died["delegation"]["attempts"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("status 4") && reason.contains("segfault in the parser"), "{reason}");
    let shapeless = until_ended(&app, &requester, &asked[4]).await;
    assert_eq!(shapeless["delegation"]["status"], "error", "{shapeless}");
    assert!(shapeless["delegation"]["output"].is_null(), "{shapeless}");
    let reason = shapeless["delegation"]["attempts"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("feedback"), "{reason}");

    // The program saw each request with its capability's output schema, never the claim token.
    let runs = scratch.runs();
    assert_eq!(runs.len(), 5, "{runs:?}");
    for run in &runs {
        let raw = run["raw"].as_str().unwrap();
        let item: Value = serde_json::from_str(raw).unwrap();
        assert_eq!(item["outputSchema"], review_capability()["outputSchema"]);
        assert!(item.get("claimToken").is_none() && !raw.contains("ct_") && !raw.contains(&ana.key), "{raw}");
    }
    for (id, outcome) in asked.iter().zip(["completed", "rejected", "failed", "failed", "failed"]) {
        runner.until_logged(&format!("request={id} task_type=code-review outcome=\"{outcome}\"")).await;
    }
    assert_eq!(app.snapshot(&negotiation).await.0, "waiting_for_agent", "turns are not served without --turns");
    runner.term();
    assert_eq!(runner.exit().await.code(), Some(0), "{}", runner.log());
    assert!(runner.log().contains("delegations: 1 completed, 1 rejected, 3 failed"), "{}", runner.log());
}

#[tokio::test]
async fn sigterm_declines_a_delegation_its_program_cannot_finish_within_the_grace_period() {
    let app = TestApp::spawn().await;
    let (ana, anon) = reviewer(&app, "user-ana").await;
    let requester = app.register_agent("user-raj").await;
    let scratch = Scratch::new("delegation-grace");
    let mut runner = Runner::start(
        &app,
        &ana.key,
        &["--delegations", "--grace", "1s", "--exec", &scratch.program("slow 120")],
        &scratch,
        "runner",
    );
    let (request_id, body) = review(&requester, &anon, "fn main() {}");
    assert_eq!(app.delegate(&requester, &body).await.status, StatusCode::ACCEPTED);
    let run = scratch.until_runs(1).await.remove(0);
    runner.term();

    assert_eq!(runner.exit().await.code(), Some(0), "{}", runner.log());
    let ended = until_ended(&app, &requester, &request_id).await;
    assert_eq!(ended["delegation"]["status"], "rejected", "{ended}");
    assert_eq!(ended["delegation"]["attempts"][0]["reason"], "the agent's runner stopped before its worker answered");
    until_gone(run["pid"].as_u64().unwrap()).await;
    assert!(runner.log().contains("1 given back at stop"), "{}", runner.log());
}

#[tokio::test]
async fn a_delegation_program_past_the_attempts_deadline_is_stopped_and_the_attempt_fails_in_time() {
    let app = TestApp::spawn().await;
    let (ana, anon) = reviewer(&app, "user-ana").await;
    let requester = app.register_agent("user-raj").await;
    let scratch = Scratch::new("delegation-deadline");
    let _runner = Runner::start(
        &app,
        &ana.key,
        &["--delegations", "--exec", &scratch.program("stubborn 120")],
        &scratch,
        "runner",
    );
    let (request_id, mut body) = review(&requester, &anon, "fn main() {}");
    body["timeoutMs"] = json!(10_000);
    assert_eq!(app.delegate(&requester, &body).await.status, StatusCode::ACCEPTED);
    let run = scratch.until_runs(1).await.remove(0);

    // The runner stops its program before the attempt's deadline and reports the failure itself,
    // so the attempt ends `error` with why, not `timeout`.
    let ended = until_ended(&app, &requester, &request_id).await;
    assert_eq!(ended["delegation"]["status"], "error", "{ended}");
    let reason = ended["delegation"]["attempts"][0]["reason"].as_str().unwrap();
    assert!(reason.starts_with("the program did not answer within") && reason.contains("was stopped"), "{reason}");
    until_gone(run["pid"].as_u64().unwrap()).await;
}

#[tokio::test]
async fn the_runner_waits_for_a_service_that_does_not_answer_yet_then_serves() {
    // A port nothing listens on yet.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let scratch = Scratch::new("not-yet");
    let mut command = Command::new(env!("CARGO_BIN_EXE_parley"));
    let log = scratch.dir.join("runner.log");
    command
        .args(["agent", "--url", &format!("http://127.0.0.1:{port}"), "--exec", &scratch.program("answer")])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());

    // The service the runner will find: started on that port once the runner has retried.
    let database_url = crate::helpers::fresh_database().await;
    let setup = TestApp::spawn_on(&database_url, |c| c.bind = "127.0.0.1:0".parse().unwrap()).await;
    let tomas = setup.register_agent("user-tomas").await;
    command.env("PARLEY_AGENT_KEY", &tomas.key);
    let mut runner = Runner { child: Some(command.spawn().unwrap()), log };
    runner.until_logged_times("trying again in", 3).await;
    assert!(runner.is_running(), "network errors are retried, not fatal:\n{}", runner.log());
    let waits: Vec<Duration> = runner
        .log()
        .lines()
        .filter_map(|l| l.split("trying again in ").nth(1))
        .map(|w| waited(w.split_whitespace().next().unwrap()))
        .collect();
    assert!(waits[0] <= Duration::from_millis(500) && waits[2] >= Duration::from_secs(1), "backing off: {waits:?}");

    let app = TestApp::spawn_on(&database_url, |c| c.bind = ([127, 0, 0, 1], port).into()).await;
    let id = start(&app, fixtures::good_match()).await;
    let answered = until_turn(&app, &id, 1).await;
    assert_eq!((answered.1.as_str(), answered.2), ("personal", Some(id_of(&tomas.id))), "{}", runner.log());
}

/// A TCP proxy in front of a service that the test can cut (open connections dropped, new ones
/// refused) and restore: what a service's restart looks like to its clients.
struct Proxy {
    base: String,
    down: Arc<std::sync::atomic::AtomicBool>,
    open: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Proxy {
    async fn start(target: &str) -> Proxy {
        let target = target.trim_start_matches("http://").to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open = Arc::new(Mutex::new(Vec::new()));
        let (is_down, connections) = (down.clone(), open.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if is_down.load(std::sync::atomic::Ordering::SeqCst) {
                    continue; // dropped: the connection closes at once
                }
                let target = target.clone();
                let piping = tokio::spawn(async move {
                    if let Ok(mut upstream) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                    }
                });
                connections.lock().unwrap().push(piping.abort_handle());
            }
        });
        Proxy { base, down, open }
    }

    fn cut(&self) {
        self.down.store(true, std::sync::atomic::Ordering::SeqCst);
        self.open.lock().unwrap().drain(..).for_each(|c| c.abort());
    }

    fn restore(&self) {
        self.down.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test]
async fn the_runner_says_when_the_service_answers_again_and_takes_a_url_ending_in_api() {
    let app = TestApp::spawn().await;
    let tomas = app.register_agent("user-tomas").await;
    let proxy = Proxy::start(&app.base).await;
    let scratch = Scratch::new("reconnect");
    // The API's prefix in the URL names the same service.
    let url = format!("{}/api/", proxy.base);
    let runner =
        Runner::start(&app, &tomas.key, &["--url", &url, "--exec", &scratch.program("answer")], &scratch, "runner");
    runner.until_logged("serving turns").await;

    // The service goes away (its long-poll is cut, new connections refused), then comes back.
    proxy.cut();
    runner.until_logged("pickup failed; trying again in").await;
    proxy.restore();
    let id = start(&app, fixtures::good_match()).await;
    runner.until_logged("pickup works again: the service answers; serving again").await;
    let answered = until_turn(&app, &id, 1).await;
    assert_eq!((answered.1.as_str(), answered.2), ("personal", Some(id_of(&tomas.id))), "{}", runner.log());
    assert!(!runner.log().contains("route not found"), "{}", runner.log());
}

#[tokio::test]
async fn the_program_cannot_read_the_runners_keys_through_proc() {
    let app = TestApp::spawn().await;
    let tomas = app.register_agent("user-tomas").await;
    let id = start(&app, fixtures::good_match()).await;
    let scratch = Scratch::new("proc");
    let runner = Runner::start_with(
        &app,
        &tomas.key,
        &["--exec", &scratch.program("answer")],
        &scratch,
        "runner",
        &[("PARLEY_LLM_API_KEY", "sk-never-seen-4711")],
    );
    let runs = scratch.until_runs(1).await;
    let run = &runs[0];
    let environ = run["runner_environ"].as_str().unwrap();
    eprintln!(
        "the program read /proc/<runner>/environ: {} bytes, or {}",
        environ.len(),
        &environ[..environ.len().min(60)]
    );
    // The same process the test started (re-executed in place, so the same pid) ...
    assert_eq!(run["raw"].as_str().map(|r| r.contains(&id)), Some(true));
    assert!(runner.log().contains("serving turns"), "{}", runner.log());
    // ... and neither key, nor their names, in what the program can read of it.
    for secret in [tomas.key.as_str(), "sk-never-seen-4711", "PARLEY_AGENT_KEY", "PARLEY_LLM_API_KEY"] {
        assert!(!environ.contains(secret), "{secret} in the runner's environ: {environ}");
        assert!(!run["runner_cmdline"].as_str().unwrap().contains(secret), "{run}");
        assert!(!run["env"].to_string().contains(secret), "{run}");
    }
    if !environ.starts_with("unreadable") {
        assert!(environ.contains("PARLEY_URL="), "the runner's own environment is the one shown: {environ}");
    }
    let answered = until_turn(&app, &id, 1).await;
    assert_eq!(answered.1.as_str(), "personal");
}

/// A wait as the runner's log writes it: `850ms` or `2.4s`.
fn waited(text: &str) -> Duration {
    match text.strip_suffix("ms") {
        Some(ms) => Duration::from_millis(ms.parse().unwrap()),
        None => Duration::from_secs_f64(text.strip_suffix('s').unwrap().parse().unwrap()),
    }
}

/// What the stand-in model server was asked.
#[derive(Default)]
struct Asked {
    requests: Vec<(Option<String>, Value)>,
}

/// A stand-in OpenAI-compatible server: answers turns with the first action its schema allows
/// (`accept` once the turn is 3 or later), delegations with a fixed output (or, when the code
/// to review asks to confuse it, always with one the output schema refuses), and its very first
/// request with something that is not JSON. Returns its base URL and what it was asked.
async fn stand_in_model() -> (String, Arc<Mutex<Asked>>) {
    use axum::{Json, Router, http::HeaderMap, routing::post};
    let asked = Arc::new(Mutex::new(Asked::default()));
    let record = asked.clone();
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move |headers: HeaderMap, Json(body): Json<Value>| {
            let record = record.clone();
            async move {
                let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
                let first = {
                    let mut asked = record.lock().unwrap();
                    asked.requests.push((auth, body.clone()));
                    asked.requests.len() == 1
                };
                let format = &body["response_format"]["json_schema"];
                let content = if first {
                    "Sure! Here is my answer: propose".to_owned()
                } else if format["name"] == "turn" {
                    let item: Value = serde_json::from_str(body["messages"][1]["content"].as_str().unwrap()).unwrap();
                    let allowed: Vec<&str> =
                        format["schema"]["properties"]["action"]["enum"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
                    let action = if item["turn"]["number"].as_u64().unwrap() >= 3 && allowed.contains(&"accept") { "accept" } else { allowed[0] };
                    json!({"action": action, "message": "From the model", "assessment": {"reasoning": "The model thinks it fits",
                        "suggestedRoles": {"ownUser": "agent", "otherUser": "patient"}}})
                    .to_string()
                } else if body["messages"][1]["content"].as_str().unwrap().contains("confuse") {
                    json!({"verdict": "unsure"}).to_string()
                } else {
                    json!({"feedback": "reviewed by the model"}).to_string()
                };
                Json(json!({
                    "id": "chatcmpl-stand-in", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
                }))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, asked)
}

#[tokio::test]
async fn with_a_model_the_runner_answers_turns_and_a_delegation_within_the_rules() {
    let app = TestApp::spawn().await;
    let (model_url, asked) = stand_in_model().await;
    let (tomas, anon) = reviewer(&app, "user-tomas").await;
    let requester = app.register_agent("user-raj").await;
    let id = start(&app, fixtures::request(fixtures::engineer(), fixtures::founder(), 88.0)).await;
    let scratch = Scratch::new("model");
    let _runner = Runner::start_with(
        &app,
        &tomas.key,
        &["--turns", "--delegations", "--llm", &model_url, "--model", "stand-in-model"],
        &scratch,
        "runner",
        &[("PARLEY_LLM_API_KEY", "sk-test-123")],
    );
    let (request_id, body) = review(&requester, &anon, "fn main() {}");
    assert_eq!(app.delegate(&requester, &body).await.status, StatusCode::ACCEPTED);

    let view = app.wait_for(&id, PATIENCE, |v| v["status"] == "completed").await;
    assert_eq!(view["turns"][0]["action"], "propose");
    assert_eq!(view["turns"][0]["message"], "From the model");
    let stored = turns(&app, &id).await;
    assert!(
        stored.iter().filter(|t| t.0 % 2 == 0).all(|t| t.1 == "personal" && t.2 == Some(id_of(&tomas.id))),
        "{stored:?}"
    );
    let done = until_ended(&app, &requester, &request_id).await;
    assert_eq!(done["result"]["output"], json!({"feedback": "reviewed by the model"}), "{done}");
    // A model that answers what the output schema refuses, twice: asked once more, then the
    // attempt fails with why, and nothing the model said reaches the requester as output.
    let (confusing_id, confusing) = review(&requester, &anon, "confuse the model");
    assert_eq!(app.delegate(&requester, &confusing).await.status, StatusCode::ACCEPTED);
    let failed = until_ended(&app, &requester, &confusing_id).await;
    assert_eq!(failed["delegation"]["status"], "error", "{failed}");
    assert!(failed["delegation"]["output"].is_null(), "{failed}");
    let reason = failed["delegation"]["attempts"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("feedback"), "{reason}");

    let asked = asked.lock().unwrap();
    let confused: Vec<usize> = asked
        .requests
        .iter()
        .filter(|(_, r)| r["messages"][1]["content"].as_str().is_some_and(|c| c.contains("confuse the model")))
        .map(|(_, r)| r["messages"].as_array().unwrap().len())
        .collect();
    assert_eq!(confused, [2, 4], "asked once, then once more with its answer and why it could not be used");
    for (auth, request) in &asked.requests {
        assert_eq!(request["model"], "stand-in-model");
        assert_eq!(auth.as_deref(), Some("Bearer sk-test-123"));
        let text = request.to_string();
        assert!(!text.contains(&tomas.key) && !text.contains("ct_") && !text.contains("claimToken"), "{text}");
    }
    let turn_schemas: Vec<(u64, &Value)> = asked
        .requests
        .iter()
        .filter(|(_, r)| r["response_format"]["json_schema"]["name"] == "turn")
        .map(|(_, r)| {
            let item: Value = serde_json::from_str(r["messages"][1]["content"].as_str().unwrap()).unwrap();
            (
                item["turn"]["number"].as_u64().unwrap(),
                &r["response_format"]["json_schema"]["schema"]["properties"]["action"]["enum"],
            )
        })
        .collect();
    assert!(turn_schemas.iter().any(|(n, _)| *n == 0));
    for (number, actions) in &turn_schemas {
        // No question was answered at these turns: the model may ask its person.
        let want = if *number == 0 {
            json!(["propose", "reject", "ask_person"])
        } else {
            json!(["counter", "question", "accept", "reject", "ask_person"])
        };
        assert_eq!(**actions, want, "turn {number}");
    }
    // The first answer was not JSON: the same item was asked once more, saying why.
    let first = &asked.requests[0].1["messages"];
    let retried = asked
        .requests
        .iter()
        .map(|(_, r)| &r["messages"])
        .find(|m| m.as_array().unwrap().len() == 4 && m[1] == first[1])
        .expect("the item of the invalid answer was asked again");
    assert_eq!(retried[2]["content"], "Sure! Here is my answer: propose");
    assert!(retried[3]["content"].as_str().unwrap().contains("cannot be used"), "{retried}");
    let delegation = asked
        .requests
        .iter()
        .find(|(_, r)| r["response_format"]["json_schema"]["name"] == "delegation_output")
        .unwrap();
    assert_eq!(delegation.1["response_format"]["json_schema"]["schema"], review_capability()["outputSchema"]);
}

//! Running the agent's program on one item: `sh -c CMD`, one JSON document on its stdin, one
//! JSON document read from its stdout, stopped at a deadline.
//!
//! The program runs in a process group of its own, so that stopping it (at its deadline, or when
//! the runner gives the item back) stops whatever it started too, and a Ctrl-C at the terminal
//! reaches the runner alone, which decides what happens to the items in hand. The agent's key and
//! the model key are taken out of its environment: the program answers, the runner talks to the
//! service. Its stdout is read up to [`MAX_STDOUT`]; the end of its stderr is kept for the log.
//!
//! A runner that is killed outright (`kill -9`, the machine's OOM killer) runs no cleanup, so the
//! program is also asked of the kernel to be killed when its parent dies (Linux's parent-death
//! signal). That reaches the process `sh` runs the command line as, which is the command itself
//! for a simple command (`python3 agent.py`, or anything behind `exec`); the other members of a
//! pipeline, or processes the program started itself, outlive a killed runner.

use std::{process::Stdio, time::Duration};

use rustix::process::{Pid, Signal, kill_process_group};
use serde_json::Value;
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWriteExt},
    process::{Child, Command},
    time::Instant,
};

use super::report;

/// Most bytes of stdout read from a program: an answer is one JSON document.
pub const MAX_STDOUT: usize = 1 << 20;
/// Bytes of stderr kept (the end of it).
const STDERR_KEPT: usize = 4096;
/// Characters of stderr quoted in a failure's reason.
const STDERR_QUOTED: usize = 600;
/// After the program exits, how long its output may take to drain (a process it left behind may
/// hold the pipes open; its group is stopped then).
const DRAIN: Duration = Duration::from_secs(2);

/// Environment variables a program never sees: the keys, and where they were handed over.
const SECRETS: [&str; 3] = [super::secrets::SECRETS[0], super::secrets::SECRETS[1], super::secrets::HANDED_OVER];

/// Why the program gave no usable answer, in words for the log and the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure(pub String);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A command line run once per item.
#[derive(Debug, Clone)]
pub struct Program {
    command: String,
}

/// A started program: its process group is stopped when this is dropped before it was reaped.
struct Running {
    child: Child,
    group: Option<Pid>,
}

impl Running {
    fn stop(&mut self) {
        if let Some(group) = self.group.take() {
            // Gone already (ESRCH) is fine: there is nothing left to stop.
            let _ = kill_process_group(group, Signal::KILL);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // The runner gave the item up (its claim was lost, it is stopping): nothing the program
        // still does can be used. `kill_on_drop` then reaps the shell.
        self.stop();
    }
}

/// Asks that the program be killed when the runner dies without stopping it (see the module docs).
#[cfg(target_os = "linux")]
// `pre_exec` is unsafe by signature: what runs between fork and exec must be async-signal-safe.
#[allow(unsafe_code)]
fn die_with_runner(command: &mut Command) {
    let runner = rustix::process::getpid();
    // SAFETY: the closure runs in the child between fork and exec, where only async-signal-safe
    // calls are allowed; it makes two system calls (prctl, getppid) and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            // The runner may have died before the request was made: then nothing will come.
            if rustix::process::getppid() != Some(runner) {
                return Err(std::io::Error::other("the runner is gone"));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_runner(_: &mut Command) {}

impl Program {
    /// The program `command` (a shell command line).
    pub fn new(command: &str) -> Program {
        Program { command: command.to_owned() }
    }

    /// Runs the program with `input` on stdin until it exits or `deadline` passes; its stdout
    /// parsed as JSON.
    pub async fn run(&self, input: &Value, deadline: Instant) -> Result<Value, Failure> {
        let started = Instant::now();
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(&self.command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        for secret in SECRETS {
            command.env_remove(secret);
        }
        die_with_runner(&mut command);
        let child = command.spawn().map_err(|e| Failure(format!("the program could not be started: {e}")))?;
        let group = child.id().and_then(|id| i32::try_from(id).ok()).and_then(Pid::from_raw);
        let mut running = Running { child, group };

        let mut stdin = running.child.stdin.take().expect("stdin is piped");
        let document = serde_json::to_vec(input).expect("a JSON value serialises");
        let feed = async move {
            // A program that does not read its input may close stdin early: not a failure.
            let _ = stdin.write_all(&document).await;
            let _ = stdin.write_all(b"\n").await;
        };
        let stdout = tokio::spawn(read_capped(running.child.stdout.take().expect("stdout is piped")));
        let stderr = tokio::spawn(read_tail(running.child.stderr.take().expect("stderr is piped")));

        let waited = tokio::select! {
            status = async { tokio::join!(feed, running.child.wait()).1 } => Some(status),
            _ = tokio::time::sleep_until(deadline) => None,
        };
        let status = match waited {
            Some(Ok(status)) => status,
            Some(Err(e)) => return Err(Failure(format!("waiting for the program failed: {e}"))),
            None => {
                running.stop();
                let stderr = drained(stderr).await.unwrap_or_default();
                return Err(failure(
                    format!("the program did not answer within {} and was stopped", report::took(deadline - started)),
                    &stderr,
                ));
            }
        };
        let (out, err) = match tokio::time::timeout(DRAIN, async { (stdout.await, stderr.await) }).await {
            Ok((Ok(out), Ok(err))) => (out, err),
            _ => {
                running.stop();
                return Err(Failure("the program exited but something it started kept its output open".into()));
            }
        };
        running.group = None;
        if !status.success() {
            let how = match (status.code(), std::os::unix::process::ExitStatusExt::signal(&status)) {
                (Some(code), _) => format!("the program exited with status {code}"),
                (None, Some(signal)) => format!("the program was killed by signal {signal}"),
                (None, None) => "the program failed".to_owned(),
            };
            return Err(failure(how, &err));
        }
        let Some(out) = out else {
            return Err(failure(format!("the program wrote more than {} bytes on stdout", MAX_STDOUT), &err));
        };
        let text = String::from_utf8_lossy(&out);
        if text.trim().is_empty() {
            return Err(failure("the program exited with status 0 but wrote nothing on stdout".into(), &err));
        }
        serde_json::from_str(text.trim()).map_err(|e| {
            failure(format!("the program's answer is not one JSON document ({e}): {}", report::tail(&text, 200)), &err)
        })
    }
}

/// A failure with the end of the program's stderr, when it wrote any.
fn failure(what: String, stderr: &str) -> Failure {
    let stderr = report::tail(stderr, STDERR_QUOTED);
    if stderr.is_empty() { Failure(what) } else { Failure(format!("{what}; stderr: {stderr}")) }
}

/// What the stderr reader kept, if it finishes soon after the program was stopped.
async fn drained(reader: tokio::task::JoinHandle<String>) -> Option<String> {
    tokio::time::timeout(DRAIN, reader).await.ok().and_then(Result::ok)
}

/// All of `stream`, or `None` when it is longer than [`MAX_STDOUT`] (read to its end regardless,
/// so that the program is never blocked writing).
async fn read_capped(mut stream: impl AsyncRead + Unpin) -> Option<Vec<u8>> {
    let mut kept = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut too_long = false;
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) if !too_long && kept.len() + n <= MAX_STDOUT => kept.extend_from_slice(&chunk[..n]),
            Ok(_) => {
                too_long = true;
                kept = Vec::new();
            }
        }
    }
    (!too_long).then_some(kept)
}

/// The last [`STDERR_KEPT`] bytes of `stream`, as text.
async fn read_tail(mut stream: impl AsyncRead + Unpin) -> String {
    let mut kept: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                kept.extend_from_slice(&chunk[..n]);
                if kept.len() > STDERR_KEPT {
                    kept.drain(..kept.len() - STDERR_KEPT);
                }
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn soon(secs: u64) -> Instant {
        Instant::now() + Duration::from_secs(secs)
    }

    #[tokio::test]
    async fn the_program_reads_the_item_and_answers_json() {
        let program = Program::new(
            r#"python3 -c 'import json, sys; d = json.load(sys.stdin); print(json.dumps({"got": d["n"] + 1}))'"#,
        );
        assert_eq!(program.run(&json!({"n": 41}), soon(20)).await.unwrap(), json!({"got": 42}));
    }

    #[tokio::test]
    async fn failures_say_what_happened_with_the_end_of_stderr() {
        let failed = Program::new("echo 'something broke' >&2; exit 3").run(&json!({}), soon(20)).await.unwrap_err();
        assert_eq!(failed.0, "the program exited with status 3; stderr: something broke");
        let not_json = Program::new("echo hello").run(&json!({}), soon(20)).await.unwrap_err();
        assert!(not_json.0.contains("not one JSON document") && not_json.0.contains("hello"), "{not_json}");
        let silent = Program::new("true").run(&json!({}), soon(20)).await.unwrap_err();
        assert!(silent.0.contains("wrote nothing"), "{silent}");
        let missing = Program::new("exec /nonexistent/program").run(&json!({}), soon(20)).await.unwrap_err();
        assert!(missing.0.contains("status 127"), "{missing}");
    }

    #[tokio::test]
    async fn a_program_past_its_deadline_is_stopped_with_what_it_started() {
        let dir = std::env::temp_dir().join(format!("parley-program-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&dir).unwrap();
        let marker = dir.join("child.pid");
        // The shell starts a sleeper of its own, then waits: both must be stopped.
        let command = format!("sleep 30 & echo $! > {}; wait", marker.display());
        let started = Instant::now();
        let failed =
            Program::new(&command).run(&json!({}), Instant::now() + Duration::from_millis(800)).await.unwrap_err();
        assert!(failed.0.contains("did not answer within"), "{failed}");
        assert!(started.elapsed() < Duration::from_secs(10), "stopped at its deadline, not when it ended");
        let pid = std::fs::read_to_string(&marker).unwrap().trim().to_owned();
        let mut gone = false;
        for _ in 0..50 {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // Gone, or a zombie waiting for its parent (already killed) to be reaped.
            if state.is_empty() || state.split_whitespace().nth(2) == Some("Z") {
                gone = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = std::fs::remove_dir_all(&dir);
        assert!(gone, "the program's own child {pid} outlived its deadline");
    }
}

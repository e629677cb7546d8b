//! The runner's keys, out of the program's reach.
//!
//! The program `parley agent` runs is started without the keys in its environment, but it runs
//! as the same user as the runner, and Linux shows any process's *initial* environment to that
//! user at `/proc/<pid>/environ`, whatever the process did with its environment since. So a
//! runner started with its keys in the environment (`PARLEY_AGENT_KEY`, `PARLEY_LLM_API_KEY`)
//! first starts itself again ([`hide_from_proc`]): the same executable, arguments and process
//! id, an environment without the keys, and the keys written to a pipe that the new image reads
//! and closes at once ([`handed_over`]). Its `/proc/<pid>/environ` then holds no key. The
//! runner also makes itself not dumpable, so that a program of the same (unprivileged) user
//! cannot read its memory or its `/proc` files at all.

use std::{
    io::{Read, Write},
    os::{fd::AsRawFd, unix::process::CommandExt},
    process::Command,
};

use serde::{Deserialize, Serialize};

/// The variables the keys may come in.
pub const SECRETS: [&str; 2] = ["PARLEY_AGENT_KEY", "PARLEY_LLM_API_KEY"];
/// The variable naming the pipe the keys were handed over on (never a key itself).
pub const HANDED_OVER: &str = "PARLEY_RUNNER_KEYS_FD";

/// The keys the runner was given.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Keys {
    /// The agent's key, when it came in the environment.
    pub agent: Option<String>,
    /// The model's key, when it came in the environment.
    pub llm: Option<String>,
}

/// When the keys are in this process's environment, starts the runner again without them (see
/// the module docs): on success this never returns. `Ok` when there is nothing to hide (the
/// keys were handed over already, or never came in the environment).
pub fn hide_from_proc() -> std::io::Result<()> {
    if std::env::var_os(HANDED_OVER).is_some() {
        return Ok(());
    }
    let keys = Keys { agent: std::env::var(SECRETS[0]).ok(), llm: std::env::var(SECRETS[1]).ok() };
    if keys.agent.is_none() && keys.llm.is_none() {
        return Ok(());
    }
    let (reader, mut writer) = std::io::pipe()?;
    // A pipe holds at least 4 KiB without a reader; two keys are far less.
    writer.write_all(&serde_json::to_vec(&keys).map_err(std::io::Error::other)?)?;
    drop(writer);
    // The reading end stays open across the exec (and only it).
    rustix::io::fcntl_setfd(&reader, rustix::io::FdFlags::empty())?;
    let mut command = Command::new(std::env::current_exe()?);
    command.args(std::env::args_os().skip(1)).env(HANDED_OVER, reader.as_raw_fd().to_string());
    if let Some(arg0) = std::env::args_os().next() {
        command.arg0(arg0);
    }
    for secret in SECRETS {
        command.env_remove(secret);
    }
    Err(command.exec())
}

/// The keys handed over by the runner's first image, read from their pipe (which is closed),
/// or none when the keys never came in the environment.
// The one way to take ownership of a descriptor given by number.
#[allow(unsafe_code)]
pub fn handed_over() -> std::io::Result<Option<Keys>> {
    let Some(fd) = std::env::var_os(HANDED_OVER) else { return Ok(None) };
    let fd: i32 = fd
        .to_str()
        .and_then(|s| s.parse().ok())
        .filter(|fd| *fd > 2)
        .ok_or_else(|| std::io::Error::other(format!("{HANDED_OVER} does not name a pipe")))?;
    // SAFETY: the descriptor is the pipe this process's previous image left open for it and
    // nothing else in this process uses; it is owned (and closed) here.
    let mut pipe = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let mut text = String::new();
    pipe.read_to_string(&mut text)?;
    drop(pipe);
    serde_json::from_str(&text).map(Some).map_err(std::io::Error::other)
}

/// Makes the runner not dumpable (Linux): a program of the same unprivileged user can then
/// neither read its memory nor its `/proc` files.
pub fn not_dumpable() {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable) {
        tracing::warn!(error = %e, "could not make the runner not dumpable");
    }
}

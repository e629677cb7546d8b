//! A private PostgreSQL started from the machine's installed server binaries.
//!
//! This is what lets `parley serve` and the test suite run with nothing set up but PostgreSQL's
//! packages installed. The cluster lives in `<data dir>/pg`, listens on 127.0.0.1 only, on a free
//! port, with trust authentication for the local `postgres` role. PostgreSQL refuses to run as
//! root, so when Parley runs as root the server runs as the unprivileged `postgres` system user
//! (Debian's package creates it), and the cluster directory is owned by that user.

use std::{
    fs,
    net::{SocketAddr, TcpListener, TcpStream},
    os::unix::{fs::PermissionsExt, process::CommandExt},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};

/// The system user the server runs as when Parley runs as root.
const SERVER_USER: &str = "postgres";

/// A running private PostgreSQL; stopped by [`EmbeddedPostgres::stop`] or on drop.
#[derive(Debug)]
pub struct EmbeddedPostgres {
    bin_dir: PathBuf,
    cluster_dir: PathBuf,
    port: u16,
    run_as: Option<(u32, u32)>,
    stopped: bool,
}

impl EmbeddedPostgres {
    /// Starts (initialising on first use) the cluster under `data_dir/pg`.
    pub fn start(data_dir: &Path) -> anyhow::Result<EmbeddedPostgres> {
        let bin_dir = find_bin_dir().context(
            "no PostgreSQL server binaries found: install PostgreSQL (e.g. `apt-get install postgresql`) \
             or set DATABASE_URL to an existing database",
        )?;
        fs::create_dir_all(data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
        let data_dir = data_dir.canonicalize()?;
        let cluster_dir = data_dir.join("pg");
        let run_as = if is_root() { Some(lookup_user(SERVER_USER)?) } else { None };

        // PostgreSQL would refuse with its own words (`lock file "postmaster.pid" already
        // exists`); say what it means here: another Parley runs on this directory.
        if let Some((pid, port)) = running_server(&cluster_dir) {
            bail!(
                "another Parley is already running with the data directory {} (its PostgreSQL, pid {pid}, \
                 listens on 127.0.0.1:{port}): stop it first, or give this one another PARLEY_DATA_DIR",
                data_dir.display()
            );
        }
        if !cluster_dir.join("PG_VERSION").exists() {
            initdb(&bin_dir, &cluster_dir, run_as)?;
        }
        let port = free_port()?;
        let log = cluster_dir.join("server.log");
        let mut cmd = Command::new(bin_dir.join("pg_ctl"));
        cmd.arg("start")
            .arg("-D")
            .arg(&cluster_dir)
            .arg("-l")
            .arg(&log)
            .arg("-w")
            .arg("-t")
            .arg("60")
            .arg("-o")
            .arg(format!(
                "-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c max_connections=300"
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        as_user(&mut cmd, run_as);
        let out = cmd.output().context("running pg_ctl start")?;
        if !out.status.success() {
            let tail = fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(8).collect();
            bail!(
                "the embedded PostgreSQL in {} did not start: {}\n{}",
                cluster_dir.display(),
                String::from_utf8_lossy(&out.stderr).trim(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        let pg = EmbeddedPostgres { bin_dir, cluster_dir, port, run_as, stopped: false };
        pg.wait_ready(Duration::from_secs(30))?;
        Ok(pg)
    }

    /// Like [`EmbeddedPostgres::start`], but when the cluster is already running (a previous
    /// process left it up) attaches to it instead, without ever stopping it. The test suite uses
    /// this so that its private server is started once and shared by every run.
    pub fn start_or_attach(data_dir: &Path) -> anyhow::Result<EmbeddedPostgres> {
        let cluster_dir = data_dir.join("pg");
        if let Some((_, port)) = running_server(&cluster_dir) {
            let bin_dir = find_bin_dir().context("no PostgreSQL server binaries found")?;
            let run_as = if is_root() { Some(lookup_user(SERVER_USER)?) } else { None };
            let pg = EmbeddedPostgres { bin_dir, cluster_dir, port, run_as, stopped: true };
            if pg.wait_ready(Duration::from_secs(2)).is_ok() {
                return Ok(pg);
            }
        }
        let mut pg = EmbeddedPostgres::start(data_dir)?;
        pg.stopped = true;
        Ok(pg)
    }

    /// Stops the server and starts it again on the same port (fault tests restart PostgreSQL
    /// under a running service with this).
    pub fn restart(&mut self) -> anyhow::Result<()> {
        let was_owned = !self.stopped;
        self.stopped = false;
        self.stop()?;
        let log = self.cluster_dir.join("server.log");
        let mut cmd = Command::new(self.bin_dir.join("pg_ctl"));
        cmd.arg("start")
            .arg("-D")
            .arg(&self.cluster_dir)
            .arg("-l")
            .arg(&log)
            .arg("-w")
            .arg("-o")
            .arg(format!(
                "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c max_connections=300",
                self.port
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        as_user(&mut cmd, self.run_as);
        anyhow::ensure!(cmd.status()?.success(), "restarting the embedded PostgreSQL failed");
        self.stopped = !was_owned;
        self.wait_ready(Duration::from_secs(30))
    }

    /// Connection URL for `database` on this server.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// The TCP port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster's data directory.
    pub fn cluster_dir(&self) -> &Path {
        &self.cluster_dir
    }

    /// Stops the server (fast shutdown: open sessions are ended, committed data is kept).
    pub fn stop(&mut self) -> anyhow::Result<()> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        let mut cmd = Command::new(self.bin_dir.join("pg_ctl"));
        cmd.arg("stop").arg("-D").arg(&self.cluster_dir).arg("-m").arg("fast").arg("-w");
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        as_user(&mut cmd, self.run_as);
        let status = cmd.status().context("running pg_ctl stop")?;
        if !status.success() {
            bail!("pg_ctl stop failed for {}", self.cluster_dir.display());
        }
        Ok(())
    }

    fn wait_ready(&self, limit: Duration) -> anyhow::Result<()> {
        let start = Instant::now();
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        while start.elapsed() < limit {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!("the embedded PostgreSQL did not accept connections within {limit:?}")
    }
}

impl Drop for EmbeddedPostgres {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            tracing::warn!(error = %e, "stopping the embedded PostgreSQL");
        }
    }
}

/// The process id and port of a server running on `cluster_dir`, read from its
/// `postmaster.pid` (a file left by a server that is gone names no live process).
fn running_server(cluster_dir: &Path) -> Option<(u32, u16)> {
    let pid_file = fs::read_to_string(cluster_dir.join("postmaster.pid")).ok()?;
    let mut lines = pid_file.lines();
    let pid: u32 = lines.next()?.trim().parse().ok()?;
    if !Path::new("/proc").join(pid.to_string()).exists() {
        return None;
    }
    Some((pid, lines.nth(2)?.trim().parse().ok()?))
}

fn initdb(bin_dir: &Path, cluster_dir: &Path, run_as: Option<(u32, u32)>) -> anyhow::Result<()> {
    fs::create_dir_all(cluster_dir)?;
    fs::set_permissions(cluster_dir, fs::Permissions::from_mode(0o700))?;
    if let Some((uid, gid)) = run_as {
        std::os::unix::fs::chown(cluster_dir, Some(uid), Some(gid))
            .with_context(|| format!("giving {} to the {SERVER_USER} user", cluster_dir.display()))?;
        check_reachable(cluster_dir)?;
    }
    let mut cmd = Command::new(bin_dir.join("initdb"));
    cmd.arg("-D")
        .arg(cluster_dir)
        .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    as_user(&mut cmd, run_as);
    let out = cmd.output().context("running initdb")?;
    if !out.status.success() {
        let _ = fs::remove_dir_all(cluster_dir);
        bail!("initdb failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// When the server runs as another user, every parent directory must let it through.
fn check_reachable(dir: &Path) -> anyhow::Result<()> {
    for ancestor in dir.ancestors().skip(1) {
        let mode = fs::metadata(ancestor)?.permissions().mode();
        if mode & 0o001 == 0 {
            bail!(
                "the {SERVER_USER} user cannot enter {} (mode {:o}); set PARLEY_DATA_DIR to a directory \
                 outside it, or set DATABASE_URL",
                ancestor.display(),
                mode & 0o777
            );
        }
    }
    Ok(())
}

fn as_user(cmd: &mut Command, run_as: Option<(u32, u32)>) {
    if let Some((uid, gid)) = run_as {
        cmd.uid(uid).gid(gid).env("HOME", "/tmp").current_dir("/");
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn is_root() -> bool {
    // The effective uid of this process, read without unsafe code.
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("Uid:")).and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

fn lookup_user(name: &str) -> anyhow::Result<(u32, u32)> {
    let passwd = fs::read_to_string("/etc/passwd").context("reading /etc/passwd")?;
    for line in passwd.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() > 3 && fields[0] == name {
            return Ok((fields[2].parse()?, fields[3].parse()?));
        }
    }
    bail!(
        "PostgreSQL will not run as root and there is no '{name}' user to run it as: \
         create one (`useradd --system {name}`) or set DATABASE_URL"
    )
}

/// Finds `initdb`/`pg_ctl`: `PARLEY_PG_BIN`, then `pg_config --bindir`, then Debian's layout, then `PATH`.
fn find_bin_dir() -> Option<PathBuf> {
    let has_server = |d: &Path| d.join("initdb").exists() && d.join("pg_ctl").exists() && d.join("postgres").exists();
    if let Some(dir) = std::env::var_os("PARLEY_PG_BIN").map(PathBuf::from) {
        return has_server(&dir).then_some(dir);
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if has_server(&dir) {
            return Some(dir);
        }
    }
    let mut debian: Vec<PathBuf> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|d| has_server(d))
        .collect();
    debian.sort_by_key(|d| {
        d.parent().and_then(|v| v.file_name()).and_then(|v| v.to_str()).and_then(|v| v.parse::<u32>().ok())
    });
    if let Some(dir) = debian.pop() {
        return Some(dir);
    }
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .find(|d| has_server(d))
}

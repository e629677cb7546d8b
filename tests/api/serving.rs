//! A `parley serve` process of its own, started as an operator starts it, its log (stderr) read
//! line by line as it comes: for the tests that read what the process itself logs, or measure
//! it from outside.

/// A `parley serve` process whose log lines are collected as they come.
pub struct Serving {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Serving {
    /// Starts `parley serve` with `env` (nothing else of the test's environment that would
    /// change it: no `DATABASE_URL`, no `PARLEY_JWT_SECRET`, no `RUST_LOG`), its log on stderr.
    pub fn start(env: &[(&str, &std::ffi::OsStr)]) -> Serving {
        use std::io::{BufRead, BufReader};
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_parley"));
        command
            .arg("serve")
            .env("PARLEY_BIND", "127.0.0.1:0")
            .env("PARLEY_LOG_FORMAT", "pretty")
            .env_remove("DATABASE_URL")
            .env_remove("PARLEY_JWT_SECRET")
            .env_remove("RUST_LOG")
            .env_remove("CARGO");
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child =
            command.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Serving { child, lines, seen: Vec::new() }
    }

    /// Reads the log until a line contains `needle` (a bound so that a broken start fails the
    /// test instead of hanging it, not a speed check); returns that line.
    pub fn wait_for(&mut self, needle: &str) -> String {
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(120);
        if let Some(line) = self.seen.iter().find(|l| l.contains(needle)) {
            return line.clone();
        }
        while let Ok(line) = self.lines.recv_timeout(give_up.saturating_duration_since(std::time::Instant::now())) {
            self.seen.push(line.clone());
            if line.contains(needle) {
                return line;
            }
        }
        panic!("no log line with {needle:?}:\n{}", self.seen.join("\n"));
    }

    /// The base URL, from the "listening on" line.
    pub fn base(&mut self) -> String {
        let line = self.wait_for("listening on http://");
        let at = line.find("http://").unwrap();
        line[at..].split_whitespace().next().unwrap().to_owned()
    }

    /// SIGTERM, wait for the exit, and return the whole log.
    pub fn stop(mut self) -> String {
        let _ = std::process::Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
        self.seen.extend(self.lines.try_iter());
        while let Ok(line) = self.lines.recv_timeout(std::time::Duration::from_secs(2)) {
            self.seen.push(line);
        }
        self.seen.join("\n")
    }

    /// The process's id (for reading `/proc/<pid>/status`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Serving {
    /// A test that failed before stopping the process does not leave it running.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

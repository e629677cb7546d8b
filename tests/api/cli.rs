//! The `parley` binary's start-up checks and small commands.

use std::process::Command;

fn parley() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_parley"));
    c.env_remove("DATABASE_URL").env("RUST_LOG", "error");
    c
}

#[test]
fn a_bad_configuration_value_stops_the_start_naming_the_variable() {
    let out = parley().arg("serve").env("PARLEY_CLAIM_TIMEOUT", "soon").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("PARLEY_CLAIM_TIMEOUT"), "{err}");
}

#[test]
fn a_malformed_skill_file_stops_the_start_naming_the_file_and_the_field() {
    let dir = std::env::temp_dir().join(format!("parley-skills-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("broken.yaml");
    std::fs::write(&file, "id: x\nname: X\ntags: 5\n").unwrap();
    let out = parley()
        .arg("serve")
        .env("PARLEY_SKILLS", &file)
        .env("PARLEY_DATA_DIR", &dir)
        .env("PARLEY_BIND", "127.0.0.1:0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("broken.yaml") && err.contains("tags"), "{err}");
}

#[test]
fn token_prints_a_jwt_for_the_configured_secret_and_refuses_bad_arguments() {
    let dir = std::env::temp_dir().join(format!("parley-token-{}", uuid::Uuid::now_v7()));
    let out = parley()
        .args(["token", "--sub", "user-maya", "--role", "service", "--ttl", "2h"])
        .env("PARLEY_DATA_DIR", &dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8(out.stdout).unwrap();
    assert_eq!(token.trim().split('.').count(), 3);
    // The secret was generated once into the data dir and is reused.
    let secret = std::fs::read_to_string(dir.join("jwt_secret")).unwrap();
    let again = parley().args(["token", "--sub", "x"]).env("PARLEY_DATA_DIR", &dir).output().unwrap();
    assert!(again.status.success());
    assert_eq!(std::fs::read_to_string(dir.join("jwt_secret")).unwrap(), secret);
    let keys = parley::http::auth::JwtKeys::new(secret.trim().as_bytes());
    let claims = keys.verify(token.trim()).unwrap();
    assert_eq!(claims.sub, "user-maya");
    assert_eq!(claims.role, parley::http::auth::CallerRole::Service);

    let bad = parley().args(["token", "--sub", "x", "--role", "root"]).env("PARLEY_DATA_DIR", &dir).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[tokio::test]
async fn serve_logs_its_address_its_database_without_the_password_and_how_to_mint_a_token() {
    use std::{
        io::{BufRead, BufReader},
        process::Stdio,
        sync::mpsc,
        time::{Duration, Instant},
    };
    // The test server trusts local connections and ignores the password; the log must not show it.
    let password = "pw-must-not-be-logged-7f3a";
    let url = crate::helpers::fresh_database().await;
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, host) = rest.split_once('@').expect("the test database URL names a user");
    let user = user.split(':').next().unwrap();
    let dir = std::env::temp_dir().join(format!("parley-startup-{}", uuid::Uuid::now_v7()));
    let mut child = parley()
        .arg("serve")
        .env("DATABASE_URL", format!("{scheme}://{user}:{password}@{host}"))
        .env("PARLEY_BIND", "127.0.0.1:0")
        .env("PARLEY_DATA_DIR", &dir)
        .env("PARLEY_LOG_FORMAT", "pretty")
        .env("RUST_LOG", "info")
        .env_remove("PARLEY_JWT_SECRET")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    // A bound so that a broken start fails the test instead of hanging it, not a speed check.
    let give_up = Instant::now() + Duration::from_secs(120);
    while !(lines.iter().any(|l: &String| l.contains("listening on")) && lines.iter().any(|l| l.contains("mint a token")))
    {
        match rx.recv_timeout(give_up.saturating_duration_since(Instant::now())) {
            Ok(line) => lines.push(line),
            Err(_) => break,
        }
    }
    let _ = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();
    reader.join().unwrap();
    lines.extend(rx.try_iter());
    let log = lines.join("\n");
    let _ = std::fs::remove_dir_all(&dir);

    assert!(!log.contains(password), "the password was logged:\n{log}");
    assert!(log.contains("listening on http://127.0.0.1:"), "{log}");
    assert!(log.contains(&format!("database: {scheme}://{user}:***@{host}")), "{log}");
    let dir = dir.to_string_lossy();
    assert!(
        log.contains(&format!("mint a token: PARLEY_DATA_DIR={dir} parley token --sub <user id> [--role user|service|admin]")),
        "{log}"
    );
}

//! Logging: `tracing` to stderr, pretty or JSON (`PARLEY_LOG_FORMAT`), filtered by `RUST_LOG`.

use std::io::IsTerminal;

use tracing_subscriber::{EnvFilter, fmt, prelude::*};

use crate::config::LogFormat;

/// What is logged when `RUST_LOG` is unset: Parley's own events at `info`; the libraries below
/// it only when something goes wrong (the MCP library would otherwise log three lines, one
/// with the whole client description, per MCP request).
pub const DEFAULT_FILTER: &str =
    "info,sqlx=warn,tower_http=warn,apalis=warn,apalis_core=warn,apalis_postgres=warn,rmcp=warn";

/// Installs the global subscriber. Safe to call more than once (later calls do nothing).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let registry = tracing_subscriber::registry().with(filter);
    let _ = match format {
        // Colours only on a terminal: a log file or a pipe gets plain text.
        LogFormat::Pretty => registry
            .with(fmt::layer().with_ansi(std::io::stderr().is_terminal()).with_writer(std::io::stderr))
            .try_init(),
        LogFormat::Json => registry
            .with(fmt::layer().json().with_current_span(true).with_span_list(false).with_writer(std::io::stderr))
            .try_init(),
    };
}

/// Logging for `parley agent`: one short line per event for a person (no module paths), or one
/// JSON object per line. `RUST_LOG` filters (default `info`).
pub fn init_runner(json: bool) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let registry = tracing_subscriber::registry().with(filter);
    let _ = if json {
        registry.with(fmt::layer().json().with_target(false).with_writer(std::io::stderr)).try_init()
    } else {
        registry
            .with(
                fmt::layer()
                    .compact()
                    .with_target(false)
                    .with_ansi(std::io::stderr().is_terminal())
                    .with_writer(std::io::stderr),
            )
            .try_init()
    };
}

//! The `parley` binary: everything lives in the library; this only parses arguments.

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    parley::run(parley::Cli::parse()).await
}

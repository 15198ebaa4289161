//! `cargo xtask <task>`: maintainer tasks for this workspace.
//!
//! - `audit`: build, then the static lock-order audit (the strategy registry
//!   is checked by `cargo test`).
//! - `snapshots`: insta snapshot tests in check mode, plus pending and
//!   unreferenced snapshot files.
//! - `package`: the publishable crates' metadata, then `cargo package` over
//!   them.
//! - `ci`: fmt, package, clippy, docs, tests, audit, snapshots, stopping at
//!   the first failure. `.ci/run` calls this.

mod audit;
mod ci;
mod package;
mod snapshots;
mod util;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "Maintainer tasks for the outbox workspace"
)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Build the workspace, then run the lock-order audit.
    Audit,
    /// Run the insta snapshot tests in check mode and look for stray snapshot files.
    Snapshots,
    /// Check the publishable crates' metadata and package them (`cargo package --no-verify`).
    Package,
    /// Everything CI runs: fmt, package, clippy, docs, tests, audit, snapshots.
    Ci,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let root = util::workspace_root();
    let result = match cli.task {
        Task::Audit => audit::run(&root),
        Task::Snapshots => snapshots::run(&root, snapshots::Mode::RunTests),
        Task::Package => package::run(&root),
        Task::Ci => ci::run(&root),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

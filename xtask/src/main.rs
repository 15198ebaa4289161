//! `cargo xtask <task>`: maintainer tasks for this workspace.

fn main() -> anyhow::Result<()> {
    let task = std::env::args().nth(1);
    match task.as_deref() {
        Some("ci") => anyhow::bail!("ci: not available yet"),
        _ => {
            eprintln!("usage: cargo xtask <ci>");
            Ok(())
        }
    }
}

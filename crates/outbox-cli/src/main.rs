//! `outbox`: plan relay routes, list strategies, and measure them. The command is
//! [`outbox_cli::run`]; the library's docs say how to build one with more strategies.

fn main() -> std::process::ExitCode {
    outbox_cli::run()
}

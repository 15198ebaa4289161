//! `outbox`: plan relay routes, list strategies, and measure them. The command is
//! [`nostr_outbox::run`]; the library's docs say how to build one with more strategies.

fn main() -> std::process::ExitCode {
    nostr_outbox::run()
}

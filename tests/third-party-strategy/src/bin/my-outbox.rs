//! The `outbox` command, with `third_party_strategy`'s strategy beside the built-in ones.

use third_party_strategy as _; // named, so the linker keeps the strategy's registration

fn main() -> std::process::ExitCode {
    nostr_outbox::run()
}

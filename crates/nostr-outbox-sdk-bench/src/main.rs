//! The `outbox` command with nostr-sdk's rows in `outbox bench --live`:
//!
//! ```text
//! cargo run --release -p nostr-outbox-sdk-bench -- bench --live --log error
//! ```

use nostr_outbox_sdk_bench as _; // named, so the linker keeps its live bench rows

fn main() -> std::process::ExitCode {
    nostr_outbox::run()
}

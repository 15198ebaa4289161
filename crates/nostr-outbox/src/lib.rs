//! The `outbox` command as a library: plan relay routes, read feeds, list strategies, and
//! measure them.
//!
//! [`run`] is the whole command: it parses the process's arguments, sets up logging, and
//! returns the exit code `main` should return. The `outbox` binary is `main` calling it.
//!
//! Strategies register themselves when their crate is linked, and every command finds them by
//! name (`outbox strategies`, `outbox plan --config`, `outbox bench`, `outbox feed --config`).
//! [`run`] links every built-in strategy; a binary that also names another strategy crate gets
//! an `outbox` that knows that strategy too:
//!
//! ```ignore
//! // src/main.rs of a crate depending on nostr-outbox and on my-strategy
//! use my_strategy as _;
//!
//! fn main() -> std::process::ExitCode {
//!     nostr_outbox::run()
//! }
//! ```
//!
//! The `use my_strategy as _;` line matters: a crate nothing names is not linked, and its
//! registrations are lost with it. The workspace's `tests/third-party-strategy` builds such a
//! binary and runs it.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// `println!` that returns the write's error instead of panicking, so a closed stdout (`| head`,
/// `| true`) ends the command cleanly: [`run`] treats a broken pipe as a normal end.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout(), $($arg)*)
    }};
}

mod bench;
mod chart;
mod churn;
mod dms;
mod duration;
mod feed;
mod files;
mod lists;
mod live;
mod load;
mod log;
mod plan;
mod publish;
mod reader;
mod reads;
mod route;
mod secret;
mod soak;
mod stats;
mod store;
mod strategies;
mod table;
mod text;
mod world;

/// The outbox relay router: which relays to ask, and about whom.
#[derive(Debug, Parser)]
#[command(name = "outbox", version, about)]
struct Cli {
    /// Log filter (e.g. `info`, `nostr_outbox_core=debug`); also read from RUST_LOG.
    #[arg(long, global = true, env = "RUST_LOG", default_value = "warn")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the registered strategies and scorers.
    Strategies(strategies::Args),
    /// Plan which relays to ask about which follows, for a world file.
    Plan(plan::Args),
    /// Where to publish, read the inbox, or find a thread or one event: relays and reasons.
    Route(route::Args),
    /// Send a signed event to the relays its route names (and `--to` relays); one line per relay.
    Publish(publish::Args),
    /// Replay a churn scenario: plain re-planning vs hysteresis, per strategy.
    Churn(churn::Args),
    /// A live feed from real relays, routed by a strategy (`--once` for one pass and a summary).
    Feed(feed::Args),
    /// The reader's direct messages (NIP-17): gift wraps from its DM relays, opened with
    /// `--decrypt`; `outbox dms send` sends one.
    Dms(dms::Args),
    /// The reader's own relay lists (kind:10002, 10050, 10007); `--add-relay` or
    /// `--remove-relay` changes one, signs it and sends it where readers of the old or new
    /// list look.
    Lists(lists::Args),
    /// Run strategies side by side on generated worlds (or one strategy on a world file).
    Bench(bench::Args),
    /// Generate world files and show their headline facts.
    World(world::Args),
    /// The runtime under load: `outbox feed --once` against many local relays and follows,
    /// its peak memory, CPU time, events/s and time to full EOSE.
    Load(load::Args),
    /// A feed left open: a continuing `outbox feed` against local relays while follows post,
    /// relays go down and come back and follows move; what it printed, how late, its memory.
    Soak(soak::Args),
    /// What was learned about relays (stats, set-asides): shown, or edited with `--forget` and
    /// `--clear-set-asides`.
    Stats(stats::Args),
    /// Read any filter from the relays it names: authors' write relays, tagged people's read
    /// relays, hints, the reader's relays (`--stream` keeps it open).
    Req(reads::req::Args),
    /// Count the events matching a filter (NIP-45) on the relays a read of it would ask: each
    /// relay's count, and the largest.
    Count(reads::count::Args),
    /// Get one event, address or profile from its hints and its author's write relays.
    Get(reads::get::GetArgs),
    /// Read an event's thread where NIP-65 puts it: replies, quotes, reactions, reposts, zaps.
    ///
    /// The event first (from its hints and its author's write relays), then what answers it,
    /// from the author's read relays (replies to them are sent there) and write relays, the
    /// read relays of the people it tags and every relay its code and tags hint at; then from
    /// the write relays of the people who replied, for replies kept only there. Each event is
    /// printed once, labelled `root`, `reply`, `quote`, `reaction`, `repost`, `zap` or
    /// `mention` (the field `relation` with `--json`); the last line on stderr counts each.
    Thread(reads::get::ThreadArgs),
    /// Search (NIP-50) on the reader's search relays, else relays whose NIP-11 document lists
    /// NIP 50, else `--search-relays`.
    Search(reads::search::Args),
}

/// Runs the `outbox` command with the process's arguments and returns its exit code.
///
/// Parses the arguments (on a usage error, `--help` or `--version`, clap prints and exits the
/// process, as the binary always has), starts logging at `--log` / `RUST_LOG`, links every
/// built-in strategy and runs the subcommand. A subcommand's error is printed to stderr as
/// `error: ...` and gives [`ExitCode::FAILURE`]; a closed stdout (`outbox ... | head`) ends
/// quietly with [`ExitCode::SUCCESS`]. Call it once per process: logging is process-wide.
pub fn run() -> ExitCode {
    let cli = Cli::parse();
    log::init(&cli.log);
    nostr_outbox_strategies::link();
    let result = match cli.command {
        Command::Strategies(args) => strategies::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Route(args) => route::run(args),
        Command::Publish(args) => publish::run(args),
        Command::Churn(args) => churn::run(args),
        Command::Feed(args) => feed::run(args),
        Command::Dms(args) => dms::run(args),
        Command::Lists(args) => lists::run(args),
        Command::Bench(args) => bench::run(args),
        Command::World(args) => world::run(args),
        Command::Load(args) => load::run(args),
        Command::Soak(args) => soak::run(args),
        Command::Stats(args) => stats::run(args),
        Command::Req(args) => reads::req::run(args),
        Command::Count(args) => reads::count::run(args),
        Command::Get(args) => reads::get::run_get(args),
        Command::Thread(args) => reads::get::run_thread(args),
        Command::Search(args) => reads::search::run(args),
    };
    match result {
        Ok(code) => code,
        // The reader went away: nothing left to say, and nobody to say it to.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            // Error chains quote files and relays: escaped, so they cannot drive the terminal,
            // and with URL credentials hidden.
            eprintln!("error: {}", text::shown_error(&err));
            ExitCode::FAILURE
        }
    }
}

/// Whether an error comes from writing to a closed pipe.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

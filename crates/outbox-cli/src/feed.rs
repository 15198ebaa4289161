//! `outbox feed`: a live feed from real relays, routed by a strategy.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use nostr::event::Kind;
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::types::Timestamp;
use outbox_core::{Router, RouterConfig};
use outbox_runtime::store::{load_json, save_json};
use outbox_runtime::{
    fetch_events, FeedEvent, FeedInput, FeedSummary, PenaltyBox, RuntimeConfig, Status,
};

/// The strategy used when no `--config` is given.
const DEFAULT_CONFIG: &str = "max_connections = 20\n[strategy]\ntype = \"greedy\"\n";

/// Options of `outbox feed`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The reader's own relays (comma-separated or repeated): the residual pool, and where
    /// relay lists and the follow list are looked up.
    #[arg(long, value_delimiter = ',', required = true)]
    relays: Vec<String>,
    /// Follows: npubs or hex keys (comma-separated or repeated), or files of them.
    #[arg(long, value_delimiter = ',', conflicts_with = "npub")]
    follows: Vec<String>,
    /// The reader: fetch their kind:3 follow list from `--relays`.
    #[arg(long)]
    npub: Option<String>,
    /// Router config (TOML): `max_connections`, `url_policy` and a `[strategy]` table.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Learned relay stats (JSON); read at start, written on a timer and at the end. The
    /// penalty box is kept beside it (`FILE.penalties.json`).
    #[arg(long)]
    stats: Option<PathBuf>,
    /// Only notes newer than this (e.g. `7d`, `12h`).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "7d")]
    since: Duration,
    /// Stop when every relay sent EOSE or was set aside, then print a summary.
    #[arg(long)]
    once: bool,
    /// Accept loopback relays (local testing).
    #[arg(long)]
    allow_local: bool,
    /// Longest wait for a connection.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    connect_timeout: Duration,
    /// Longest wait from REQ to EOSE.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "15s")]
    eose_timeout: Duration,
    /// Seed for planning and reconnect jitter.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Do not verify event signatures (trust relays).
    #[arg(long)]
    no_verify: bool,
    /// Print status events (connected, EOSE, failures) to stderr.
    #[arg(long, short)]
    verbose: bool,
    /// Print notes as JSON lines instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(feed(args))
}

fn penalties_path(stats: &Path) -> PathBuf {
    let mut name = stats.as_os_str().to_owned();
    name.push(".penalties.json");
    PathBuf::from(name)
}

fn parse_key(raw: &str) -> anyhow::Result<PublicKey> {
    PublicKey::parse(raw.trim()).with_context(|| format!("not an npub or hex key: {raw:?}"))
}

/// Keys from arguments; an argument naming an existing file contributes every key in it.
fn read_follows(items: &[String]) -> anyhow::Result<Vec<PublicKey>> {
    let mut out = Vec::new();
    for item in items {
        let path = Path::new(item);
        if path.is_file() {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading follows {}", path.display()))?;
            for word in text.split(|c: char| c.is_whitespace() || c == ',') {
                if !word.is_empty() && !word.starts_with('#') {
                    out.push(parse_key(word)?);
                }
            }
        } else {
            out.push(parse_key(item)?);
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

async fn feed(args: Args) -> anyhow::Result<ExitCode> {
    let text = match &args.config {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("reading config {}", path.display()))?,
        None => DEFAULT_CONFIG.to_string(),
    };
    let mut config = RouterConfig::from_toml(&text).context("in router config")?;
    if args.allow_local {
        config.url_policy.allow_loopback = true;
    }
    let policy = config.url_policy.clone();
    let mut relays = Vec::new();
    for raw in &args.relays {
        match policy.canonicalize(raw) {
            Ok(url) => relays.push(url),
            Err(reason) => bail!("relay {raw:?} not usable: {reason} (--allow-local for loopback)"),
        }
    }
    let runtime_config = RuntimeConfig {
        connect_timeout: args.connect_timeout,
        eose_timeout: args.eose_timeout,
        verify_signatures: !args.no_verify,
        since: Some(Timestamp::now() - args.since.as_secs()),
        once: args.once,
        seed: args.seed,
        ..RuntimeConfig::default()
    };

    let follows = match &args.npub {
        Some(npub) => {
            let reader = parse_key(npub)?;
            let filter = Filter::new().author(reader).kind(Kind::ContactList);
            let lists = fetch_events(&relays, &filter, &runtime_config).await;
            let Some(newest) = lists.first() else {
                bail!(
                    "no follow list (kind:3) for {npub} on {}",
                    relays.join(", ")
                );
            };
            let mut follows: Vec<PublicKey> = newest
                .tags
                .iter()
                .filter(|t| t.as_slice().first().map(String::as_str) == Some("p"))
                .filter_map(|t| t.as_slice().get(1))
                .filter_map(|hex| PublicKey::from_hex(hex).ok())
                .collect();
            follows.sort_unstable();
            follows.dedup();
            follows
        }
        None => read_follows(&args.follows)?,
    };
    if follows.is_empty() {
        bail!("no follows: give --follows or --npub");
    }

    let router = Router::from_config(&config);
    let mut input = FeedInput::new(router, follows, relays);
    input.policy = policy;
    if let Some(path) = &args.stats {
        input.store = Arc::new(outbox_stats::FileStore::new(path));
        let (penalties, warnings) = load_json::<PenaltyBox>(&penalties_path(path))?;
        for w in warnings {
            eprintln!("warning: {w}");
        }
        input.penalties = penalties.unwrap_or_default();
    }

    let (handle, mut events) = outbox_runtime::start(input, runtime_config).await;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut stopping = false;
    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            _ = &mut ctrl_c, if !stopping => {
                // Keep draining: the feed closes its slots, saves the stats, then the channel.
                stopping = true;
                handle.request_shutdown();
                continue;
            }
        };
        let Some(event) = event else { break };
        match event {
            FeedEvent::Note { event, relay } => {
                if args.json {
                    println!("{}", serde_json::to_string(&event)?);
                } else {
                    let content: String = event.content.chars().take(280).collect();
                    println!(
                        "{} {} [{}] {}",
                        event.created_at,
                        &event.pubkey.to_hex()[..12],
                        relay,
                        content.replace('\n', " ")
                    );
                }
            }
            FeedEvent::Status(status) if args.verbose => eprintln!("{}", describe(&status)),
            FeedEvent::Status(_) => {}
        }
    }
    let summary = handle.wait().await;
    if let Some(path) = &args.stats {
        save_json(&penalties_path(path), &summary.penalties)?;
    }
    print_summary(&summary);
    if let Some(e) = &summary.stats_error {
        eprintln!("warning: stats not saved: {e}");
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(status: &Status) -> String {
    match status {
        Status::Planned {
            plan,
            strategy,
            connections,
            relay_lists,
            dial,
            replace,
            close,
            unchanged,
        } => format!(
            "plan {plan} ({strategy}): {connections} relays, {relay_lists} lists; \
             dial {dial}, replace {replace}, close {close}, keep {unchanged}"
        ),
        Status::Connected { relay, handshake } => {
            format!("connected {relay} in {} ms", handshake.as_millis())
        }
        Status::Eose {
            relay,
            generation,
            elapsed,
        } => format!(
            "EOSE {relay} (generation {generation}) after {} ms",
            elapsed.as_millis()
        ),
        Status::ListsEose { relay } => format!("relay lists done on {relay}"),
        Status::Failed {
            relay,
            reason,
            strikes,
        } => format!("failed {relay}: {reason} (strike {strikes})"),
        Status::Refused { relay, reason } => format!("refused by {relay}: {reason}"),
        Status::Penalised { relay, reason, .. } => format!("set aside {relay}: {reason}"),
        Status::Dropped { relay, reason } => format!("dropped a frame from {relay}: {reason:?}"),
        Status::Settled => "every relay answered or was set aside".to_string(),
    }
}

fn ms(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".to_string(), |d| format!("{} ms", d.as_millis()))
}

fn print_summary(s: &FeedSummary) {
    eprintln!("events:              {}", s.events);
    eprintln!(
        "relays:              {} asked, {} answered, {} failed",
        s.relays_asked, s.relays_answered, s.relays_failed
    );
    eprintln!("authors covered:     {}/{}", s.authors_covered, s.follows);
    eprintln!("relay lists:         {}", s.relay_lists);
    eprintln!("plans:               {}", s.plans);
    eprintln!("time to first event: {}", ms(s.time_to_first_event));
    eprintln!("time to full EOSE:   {}", ms(s.time_to_full_eose));
    if !s.penalised.is_empty() {
        eprintln!("set aside:           {}", s.penalised.join(", "));
    }
}

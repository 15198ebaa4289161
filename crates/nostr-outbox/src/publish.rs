//! `outbox publish`: send a signed event to the relays its publish route names (the author's
//! write relays and the read relays of everyone it tags, as `outbox route publish` plans them)
//! and to relays given by hand, and report what each relay did.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use nostr::event::Event;
use nostr_outbox_core::UrlPolicy;
use nostr_outbox_runtime::{PublishConfig, PublishReport, RuntimeConfig};

use crate::route::input::MAX_EVENT_BYTES;
use crate::text::{escape, read_bounded};

/// Options of `outbox publish`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The signed event (JSON).
    #[arg(long)]
    event: PathBuf,
    /// A relay to publish to besides the route's (repeatable); enough alone when no relay
    /// lists are known.
    #[arg(long = "to")]
    to: Vec<String>,
    /// Another relay to publish to besides the route's (repeatable; same as `--to`).
    #[arg(long = "relay")]
    relays: Vec<String>,
    /// File holding the secret key to sign in with (NIP-42) where a relay asks; or set
    /// OUTBOX_SECRET_KEY.
    #[arg(long)]
    secret_key_file: Option<PathBuf>,
    /// A remote signer to sign in with instead of a key (`--bunker`, its client key file,
    /// `--signer-timeout`).
    #[command(flatten)]
    remote: crate::secret::BunkerArgs,
    /// Allow loopback relays (ws://127.0.0.1, ws://localhost), for local relays.
    #[arg(long)]
    allow_local: bool,
    /// Send only to the relays that do not have the event yet: each is asked for it first
    /// (e.g. to repair a publish some write relays missed).
    #[arg(long)]
    rebroadcast: bool,
    /// Record in the learned stats that every relay that answered is up, so the next feed's
    /// plans lean towards live relays. Kept where `outbox feed` keeps them: `--stats FILE`,
    /// `--store`, else the data directory (`--data-dir`, OUTBOX_DATA_DIR).
    #[arg(long)]
    learn: bool,
    /// With `--learn`: where to keep the stats, as for `outbox feed`: `file:FILE` (as
    /// `--stats`), `sqlite:PATH`, or `sqlite` (`outbox.sqlite` in the data directory).
    #[arg(long, value_parser = crate::store::parse_store, conflicts_with = "stats")]
    store: Option<crate::store::StoreArg>,
    /// With `--learn`: the data directory the stats are kept in by default, as for
    /// `outbox feed` (default: the platform's data directory, e.g. `~/.local/share/outbox`).
    #[arg(long, env = "OUTBOX_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// The whole publish ends after this many seconds (at most 315360000, ten years).
    #[arg(long, default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(..=crate::duration::MAX_SECS))]
    timeout: u64,
    /// Where the relay lists come from (`--world`, `--lists`), the route's budget and `--json`,
    /// as for `outbox route`.
    #[command(flatten)]
    common: crate::route::Common,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let event = read_signed(&args.event)?;
    let mut targets: Vec<String> = Vec::new();
    if args.common.has_lists() {
        targets = crate::route::publish_targets(&args.common, args.allow_local, &event)?;
    }
    let policy = UrlPolicy {
        allow_loopback: args.allow_local,
        ..UrlPolicy::default()
    };
    for url in
        crate::reader::canonical_relays(&policy, args.to.iter().chain(&args.relays), "relay")?
    {
        if !targets.contains(&url) {
            targets.push(url);
        }
    }
    if targets.is_empty() {
        bail!(
            "no relay to publish to: give --to URL, or --world/--lists with the author's relay list"
        );
    }
    let tagged: Vec<_> = event.tags.public_keys().collect();
    let known = [
        ("the event author's", std::slice::from_ref(&event.pubkey)),
        ("a tagged person's", tagged.as_slice()),
    ];
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let auth = runtime.block_on(crate::secret::signer(
        args.secret_key_file.as_deref(),
        &args.remote,
        &known,
    ))?;
    let client = nostr_outbox_runtime::Client::with(
        RuntimeConfig::default(),
        nostr_outbox_runtime::SocketBudget::default(),
        auth,
    );
    let cfg = PublishConfig {
        deadline: Duration::from_secs(args.timeout.max(1)),
        ..PublishConfig::default()
    };
    let report = if args.rebroadcast {
        runtime.block_on(nostr_outbox_runtime::rebroadcast(
            &event, &targets, &client, &cfg,
        ))
    } else {
        runtime.block_on(nostr_outbox_runtime::publish(
            &event, &targets, &client, &cfg,
        ))
    };
    print(&event, &report, args.common.json())?;
    if args.learn {
        runtime.block_on(learn(&args, &report))?;
    }
    Ok(if report.successes() > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Every relay that answered (an `OK` of any kind, or the event found there) is up: one
/// liveness success each in the stats store, merged with what is stored.
async fn learn(args: &Args, report: &PublishReport) -> anyhow::Result<()> {
    use nostr_outbox_runtime::PublishOutcome as O;
    let keep = crate::store::StoreArgs {
        stats: args.common.stats_path().map(Into::into),
        store: args.store.clone(),
        data_dir: args.data_dir.clone(),
    };
    let store = keep.open()?;
    store
        .check_writable()
        .await
        .context("the stats store cannot be written; run without --learn")?;
    let mut stats = store.load().await.context("reading the stats")?.stats;
    let now = nostr::types::Timestamp::now().as_secs();
    let mut up = 0;
    for r in &report.relays {
        if !matches!(r.outcome, O::Timeout | O::ConnectFailed) {
            stats.record_alive(&r.url, now);
            up += 1;
        }
    }
    // The store folds this into what other runs saved since the load.
    store.save(&stats).await.context("saving the stats")?;
    tracing::info!(relays = up, "recorded as up");
    Ok(())
}

/// Reads a signed event file; an unsigned event or a bad id or signature is refused.
fn read_signed(path: &std::path::Path) -> anyhow::Result<Event> {
    let shown = escape(&path.display().to_string());
    let text = read_bounded(path, MAX_EVENT_BYTES)?;
    let event: Event = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{shown} is not a signed event (JSON with id, pubkey, created_at, kind, tags, content, sig): {}",
            escape(&e.to_string())
        )
    })?;
    if let Err(e) = event.verify() {
        bail!(
            "{shown}: the event's id or signature does not check out ({}); it was not sent",
            escape(&e.to_string())
        );
    }
    Ok(event)
}

fn print(event: &Event, report: &PublishReport, json: bool) -> anyhow::Result<()> {
    if json {
        let value = serde_json::json!({
            "event": event.id.to_hex(),
            "successes": report.successes(),
            "relays": &report.relays,
        });
        out!(
            "{}",
            crate::text::json_safe(&serde_json::to_string_pretty(&value)?)
        )?;
        return Ok(());
    }
    for r in &report.relays {
        out!(
            "{}  {}  {}",
            escape(&r.url),
            r.outcome.as_str(),
            escape(&r.message)
        )?;
    }
    Ok(())
}

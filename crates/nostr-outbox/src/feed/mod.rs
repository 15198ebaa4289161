//! `outbox feed`: a live feed from real relays, routed by a strategy; with `--inbox`, the
//! reader's mentions from the reader's read relays ([`inbox`]).

pub(crate) mod drain;
mod inbox;

use drain::Drain;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use nostr::event::Kind;
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::types::Timestamp;
use nostr_outbox_client::StateStore;
use nostr_outbox_core::{Router, RouterConfig};
use nostr_outbox_runtime::store::{load_kept, save_kept};
use nostr_outbox_runtime::{
    AuthOutcome, Carriers, FeedEvent, FeedInput, FeedSummary, RuntimeConfig, Status,
};

use crate::reader::{canonical_relays, parse_key};
use crate::text::escape;

/// The strategy used when no `--config` is given: the best one measured (README, Results).
pub(crate) const DEFAULT_CONFIG: &str = "max_connections = 20\n[strategy]\ntype = \"recall\"\n";

/// Options of `outbox feed`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    reader: crate::reader::ReaderArgs,
    /// Follows: npubs or hex keys (comma-separated or repeated), or files of them.
    #[arg(long, value_delimiter = ',', conflicts_with = "npub")]
    follows: Vec<String>,
    /// Router config (TOML): `max_connections`, `url_policy` and a `[strategy]` table.
    /// Default: `recall` with 20 routed connections (`outbox strategies` lists the others).
    #[arg(long)]
    config: Option<PathBuf>,
    /// NIP-66 monitor relays (comma-separated): at start, their kind:30166 reports about the
    /// relays of the known lists lean the first plan away from relays not seen online lately.
    /// A relay the kept stats already know is judged by them alone.
    #[arg(long, value_delimiter = ',')]
    monitors: Vec<String>,
    /// Relays you pay for (comma-separated): a relay that says it requires payment (its NIP-11
    /// document, or a NIP-66 monitor) is left out of plans unless it is named here.
    #[arg(long, value_delimiter = ',')]
    paid_relays: Vec<String>,
    /// Carry the follows no routed relay covers when none of `--relays` is usable.
    #[arg(long, value_delimiter = ',')]
    fallback_relays: Vec<String>,
    /// With `--once`: stop this long after the first relay finished instead of waiting for
    /// the slowest (e.g. `2s`; at most 3650 days).
    #[arg(long, value_parser = crate::duration::parse)]
    eose_race: Option<Duration>,
    /// Only notes newer than this (e.g. `7d`, `12h`; at most 3650 days).
    #[arg(long, value_parser = crate::duration::parse, default_value = "7d")]
    since: Duration,
    /// Stop when every relay sent EOSE or was set aside, then print a summary. Without it the
    /// feed stays open: a lost relay is dialled again with backoff and asked, on its return,
    /// since the newest note it delivered (less a minute), so nothing published meanwhile is
    /// lost; a relay set aside (down, or empty in the window) is still heard for its follows'
    /// new notes and comes back; new relay lists of the follows and a new follow list of
    /// `--npub` are re-planned within seconds.
    #[arg(long)]
    once: bool,
    /// With `--once`: end the run this long after it started with what it has, naming the
    /// relays still awaited (default: 90s, far above what a healthy run takes; at most 3650
    /// days).
    #[arg(long, value_parser = crate::duration::parse, requires = "once")]
    deadline: Option<Duration>,
    /// Longest wait for a connection (at most 3650 days).
    #[arg(long, value_parser = crate::duration::parse, default_value = "10s")]
    connect_timeout: Duration,
    /// Longest wait from REQ to EOSE (at most 3650 days).
    #[arg(long, value_parser = crate::duration::parse, default_value = "15s")]
    eose_timeout: Duration,
    /// Base seed for planning and reconnect jitter. Each run draws anew from it and the
    /// runs counted in the stats. Without it, the base drawn at random on the first run with
    /// a store and kept there; without a store either, a random one each run.
    #[arg(long)]
    seed: Option<u64>,
    /// Do not verify event signatures (trust relays).
    #[arg(long)]
    no_verify: bool,
    /// Relays the plan did not ask that are probed after the fetch (a short question each about
    /// the follows who list them, learned from and never shown), instead of the config's
    /// `probe_connections` (default: twice `max_connections`, and at least 120); 0 probes
    /// none. Only a strategy that learns probes.
    #[arg(long, value_parser = clap::value_parser!(u16).range(0..=1000))]
    probes: Option<u16>,
    /// Event kinds of the feed (comma-separated numbers; e.g. `1,6` for notes and reposts).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    kinds: Vec<u16>,
    #[command(flatten)]
    sockets: SocketArgs,
    /// Print status events (connected, EOSE, failures) to stderr.
    #[arg(long, short)]
    verbose: bool,
    /// When the feed ends, also write its summary to this file as one JSON object, for tools:
    /// `{"format": "outbox-feed-summary/1", "summary": {...}}`, the summary's fields named as
    /// in `nostr_outbox_runtime::FeedSummary` (counts as numbers, durations as `{"secs", "nanos"}`,
    /// `null` when unknown). The text summary on stderr is printed as before. FILE must be a
    /// regular file or not exist yet, in a directory that takes a new file, and not the file
    /// stdout or stderr is written to (the summary would overwrite the notes): a FIFO, device,
    /// directory or stdout's own file (`/dev/stdout` with stdout redirected to a file) is
    /// refused before the run starts, and so is a file the run reads or keeps (the stats file
    /// and the files beside it, the SQLite store, the secret key file, the config, a file of
    /// follows).
    #[arg(long, value_name = "FILE")]
    summary_json: Option<PathBuf>,
    /// Stream the reader's mentions instead of the follows' notes: events tagging `--npub`,
    /// asked of the read relays of the reader's relay list (NIP-65), else of `--relays`. Its
    /// summary is the inbox's own, on stderr: `--summary-json` does not go with it.
    #[arg(long, requires = "npub", conflicts_with = "summary_json")]
    inbox: bool,
    /// Forget the notes and per-relay marks kept by earlier runs before this one starts.
    /// Without it, a feed with a store keeps the newest notes of each follow (20, at most
    /// 10000 in all) and per relay up to when it delivered them, in `STORE.notes.sqlite`
    /// beside the store; the next run prints them at once, marked as kept (`[kept]`; in
    /// `--json` `"kept": true`), and a continuing feed asks each relay only since its mark
    /// (less a minute). `--no-stats` keeps nothing.
    #[arg(long, conflicts_with = "no_stats")]
    forget_notes: bool,
}

/// How many sockets a run may hold, for every purpose together.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Profile {
    /// 32 sockets, 4 of them kept for lookups and probes; unused ones close after 30 s.
    Desktop,
    /// 8 sockets, 2 of them kept for lookups and probes; unused ones close after 5 s.
    Mobile,
}

#[derive(clap::Args, Debug)]
pub struct SocketArgs {
    /// The socket budget for everything the run does (the feed's relays, the reader's relays,
    /// lookups, probes and relay documents share it; one socket per relay). When the
    /// config's `max_connections` and the reader's relays do not fit the places left beside
    /// the reserve, the relays take turns, the whole routed budget kept (one more socket never
    /// fetches fewer notes): in a `--once` run a relay that has answered gives its place to
    /// one waiting; in a continuing feed a relay that has answered gives its
    /// place up and is asked again, since then, 30 s later, so a note on a relay without a
    /// place waits at most about 60 s (the summary's `socket places:` line says the bound).
    #[arg(long, value_enum, default_value = "desktop")]
    profile: Profile,
    /// Sockets at most, instead of the profile's. Of them, the profile's reserve (at most
    /// half, at least one) is kept for lookups, probes and relay documents; with one socket,
    /// everything takes turns on it.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1000))]
    max_sockets: Option<u16>,
}

impl SocketArgs {
    /// The socket budget every purpose of this run shares.
    pub fn budget(&self) -> nostr_outbox_runtime::SocketBudget {
        let mut budget = match self.profile {
            Profile::Desktop => nostr_outbox_runtime::SocketBudget::desktop(),
            Profile::Mobile => nostr_outbox_runtime::SocketBudget::mobile(),
        };
        if let Some(max) = self.max_sockets {
            let max = usize::from(max);
            budget.max_sockets = Some(max);
            budget.reserve = budget.reserve.min(max / 2).max(1);
        }
        budget
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(feed(args));
    // What a stop signal left behind (a save waiting for a lock, a write that blocks) is not
    // waited for: the process ends now.
    runtime.shutdown_background();
    result
}

/// Why the relays of a lookup that did not answer gave nothing, one line each, with what
/// would help (`keys`: a key to sign in with was given). Not escaped: errors are shown escaped.
fn lookup_failures(lookup: &nostr_outbox_runtime::Lookup, keys: bool) -> Vec<String> {
    use nostr_outbox_runtime::LookupOutcome;
    lookup
        .unanswered()
        .map(|(url, outcome)| match outcome {
            LookupOutcome::Unreachable(why) => format!("could not connect to {url} ({why})"),
            other => unanswered_why(url, other, keys),
        })
        .collect()
}

/// Why `url` gave nothing in a lookup, in one line, with what would help when it asked for a
/// sign-in and `keys` (a key to sign in with was given) is false. Not escaped.
pub(crate) fn unanswered_why(
    url: &str,
    outcome: &nostr_outbox_runtime::LookupOutcome,
    keys: bool,
) -> String {
    use nostr_outbox_runtime::{LookupOutcome, Refusal};
    match outcome {
        LookupOutcome::Refused {
            refusal: Refusal::SignIn,
            message,
        } if !keys => format!("{url}: relay refused: {message} — give --secret-key-file"),
        other => format!("{url}: {other}"),
    }
}

/// ` and N more` for the N of `total` beyond the [`MAX_PENDING_SHOWN`] shown; empty when all are.
fn and_more(total: usize) -> String {
    match total.saturating_sub(MAX_PENDING_SHOWN) {
        0 => String::new(),
        more => format!(" and {more} more"),
    }
}

/// Ends the process at once after a stop signal that came while `what` was under way (see
/// `drain`): says so, with the status a shell gives a process that signal ended.
fn stopped(signal: &'static str, what: &str) -> ExitCode {
    let _ = writeln!(
        std::io::stderr(),
        "stopped by {signal} while {what}; not waiting any longer"
    );
    ExitCode::from(drain::stopped_status(signal))
}

/// The store learned state is kept in this run: `--store`, `--stats`, else JSON files in the
/// data directory; none with `--no-stats`.
fn open_store(args: &Args) -> anyhow::Result<Option<Arc<dyn StateStore>>> {
    args.reader.open_store()
}

/// Keys from arguments; an argument naming an existing file contributes every key in it.
fn read_follows(items: &[String]) -> anyhow::Result<Vec<PublicKey>> {
    let mut out = Vec::new();
    for item in items {
        let path = Path::new(item);
        if path.is_file() {
            let text = crate::text::read_bounded(path, crate::text::MAX_FOLLOWS_BYTES)
                .context("reading follows")?;
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

/// The router config (`--config` or the default), with `--allow-local` applied.
fn router_config(args: &Args) -> anyhow::Result<RouterConfig> {
    let text = match &args.config {
        Some(path) => crate::text::read_bounded(path, crate::text::MAX_CONFIG_BYTES)
            .context("reading config")?,
        None => DEFAULT_CONFIG.to_string(),
    };
    let mut config = RouterConfig::from_toml(&text).context("in router config")?;
    if args.reader.allow_local {
        config.url_policy.allow_loopback = true;
    }
    if let Some(probes) = args.probes {
        config.probe_connections = Some(usize::from(probes));
    }
    Ok(config)
}

async fn feed(args: Args) -> anyhow::Result<ExitCode> {
    if args.inbox {
        return inbox::run(&args).await;
    }
    // Before anything runs: a summary that could never be written must not cost a run, nor
    // overwrite a file the run reads or keeps.
    let files = run_files(&args)?;
    if let Some(path) = &args.summary_json {
        check_summary_path(path, &files)?;
    }
    let mut config = router_config(&args)?;
    let policy = config.url_policy.clone();
    let relays = canonical_relays(&policy, &args.reader.relays, "relay")?;
    let key_file = args.reader.secret_key_file.as_deref();
    let reader: Vec<PublicKey> = args
        .reader
        .npub
        .as_deref()
        .map(parse_key)
        .transpose()?
        .into_iter()
        .collect();
    // Without --npub the follows are the public keys known before anything is fetched.
    let given = read_follows(&args.follows)?;
    let known = [
        ("the reader's", reader.as_slice()),
        ("a follow's", given.as_slice()),
    ];
    let auth = crate::secret::signer(key_file, &args.reader.remote, &known).await?;
    if let Some(keys) = &auth {
        tracing::info!(pubkey = %keys.public_key(), "signing in where relays require it");
    }
    let store = open_store(&args)?;
    // Before anything is fetched: a store found unwritable at the end loses the run's learning.
    if let Some(store) = &store {
        store.check_writable().await.context(
            "the store cannot be written, so nothing this run learns could be kept \
             (fix it, or give --no-stats to keep nothing)",
        )?;
    }
    // What earlier runs kept: printed now, before anything is asked of the network.
    let kept = match &store {
        Some(_) => Some(kept_notes(&args, (args.reader.npub.is_none()).then_some(&given)).await?),
        None => None,
    };
    // With kept stats the run counter varies the draws of a base drawn once and kept with
    // them, so installations differ; without, only a random base can.
    let seed = match (args.seed, &store) {
        (Some(seed), _) => seed,
        (None, Some(store)) => store
            .base_seed(rand::random())
            .await
            .context("reading the kept base seed")?,
        (None, None) => rand::random(),
    };
    let indexers = canonical_relays(
        &policy,
        config.indexers.iter().chain(&args.reader.indexers),
        "indexer",
    )?;
    let defaults = RuntimeConfig::default();
    let runtime_config = RuntimeConfig {
        deadline: args.deadline.or(defaults.deadline),
        connect_timeout: args.connect_timeout,
        eose_timeout: args.eose_timeout,
        verify_signatures: !args.no_verify,
        since: Some(Timestamp::now() - args.since.as_secs()),
        once: args.once,
        seed,
        fallback_relays: args.fallback_relays.clone(),
        eose_race: args.eose_race,
        indexers: indexers.clone(),
        kinds: args.kinds.iter().map(|k| Kind::from(*k)).collect(),
        paid_relays: canonical_relays(&policy, &args.paid_relays, "paid relay")?,
        ..defaults
    };
    let client = nostr_outbox_runtime::Client::with(runtime_config, args.sockets.budget(), auth);

    // The relays the reader's kind:3 names beside each follow: hints, used when the config
    // says `hints = true`.
    let mut hints = Vec::new();
    // The reader and the date of the follow list the follows came from: a continuing feed
    // keeps them in step with newer ones.
    let mut contact_list = None;
    let follows = match &args.reader.npub {
        Some(npub) => {
            let reader = parse_key(npub)?;
            // The reader's own lists: follows (kind:3) and blocked relays (kind:10006), from
            // their relays and the indexers.
            let mut lookup = relays.clone();
            lookup.extend(indexers.iter().filter(|i| !relays.contains(i)).cloned());
            let filter = Filter::new()
                .author(reader)
                .kinds([Kind::ContactList, Kind::BlockedRelays]);
            let asked = nostr_outbox_runtime::lookup(&lookup, &filter, &client).await;
            let found = &asked.events;
            let newest_of = |kind: Kind| found.iter().find(|e| e.kind == kind);
            if let Some(blocked) = newest_of(Kind::BlockedRelays) {
                let blocked = nostr_outbox_core::blocked_relays(blocked);
                tracing::info!(
                    relays = blocked.len(),
                    "the reader's blocked relays are denied"
                );
                config.url_policy = config.url_policy.denying(blocked);
            }
            let Some(newest) = newest_of(Kind::ContactList) else {
                let why = lookup_failures(&asked, client.signer().is_some());
                if asked.answered() == 0 {
                    bail!(
                        "could not learn the follows of {npub}: no relay answered: {}",
                        why.join("; ")
                    );
                }
                let mut message = format!(
                    "no follow list (kind:3) for {npub} on {}",
                    lookup.join(", ")
                );
                if !why.is_empty() {
                    message.push_str(&format!(" (not answered: {})", why.join("; ")));
                }
                bail!(message);
            };
            hints = nostr_outbox_core::contact_list_hints(newest);
            contact_list = Some((reader, newest.created_at));
            nostr_outbox_core::follows_from_contact_list(newest)
        }
        None => read_follows(&args.follows)?,
    };
    // A remote signer's key is not here to compare; a key read again is.
    if client.signer().is_some() {
        if let Some(keys) = crate::secret::load(key_file, &[])? {
            crate::secret::refuse_public(&keys, key_file, "a follow's", &follows)?;
        }
    }
    if follows.is_empty() {
        bail!("no follows: give --follows or --npub");
    }

    // The router carries the URL policy, the reader's blocked relays denied.
    let router = Router::from_config(&config);
    let carriers = runtime_config_relays(&relays, &args, &policy);
    let mut input = FeedInput::new(router, follows, relays);
    input.monitor_relays = args.monitors.clone();
    input.hints = hints;
    if let Some(store) = &store {
        let kept = load_kept(store.as_ref())
            .await
            .context("reading the relay lists and set-aside relays kept by the last run")?;
        for w in kept.warnings {
            eprintln!("warning: {}", crate::text::shown(&w.to_string()));
        }
        input.penalties = kept.penalties;
        input.relay_lists = kept.lists;
        client.extensions().restore(&kept.extensions);
        input.store = store.clone();
    }
    let mut kept_ids = std::collections::HashSet::new();
    let mut newest = Newest::default();
    if let Some(kept) = kept {
        input.marks = kept.marks;
        kept_ids = kept.ids;
    }

    let (handle, mut events) = nostr_outbox_runtime::start(input, &client).await;
    if let Some((reader, since)) = contact_list {
        // The reader follows or unfollows someone while the feed is open: re-planned at once.
        if let Err(e) = handle.follow_contact_list(reader, since).await {
            tracing::warn!(error = %e, "the reader's follow list is not watched");
        }
    }
    let mut drain = Drain::new()?;
    let shutdown = || handle.request_shutdown();
    while let Some(event) = drain.next(&mut events, shutdown).await {
        match event {
            // A note a probe found after the fetch is a note of the feed like any other.
            FeedEvent::Note { event, relay } | FeedEvent::Found { event, relay } => {
                if kept_ids.contains(&event.id) {
                    // Printed at the start as kept.
                    continue;
                }
                if store.is_some() {
                    newest.add(&event);
                }
                drain
                    .print(&event, &relay, args.reader.json, shutdown)
                    .await;
            }
            FeedEvent::Status(status) if args.verbose => {
                let _ = writeln!(std::io::stderr(), "{}", describe(&status));
            }
            FeedEvent::Status(_) => {}
        }
    }
    if let Some(signal) = drain.forced() {
        return Ok(stopped(signal, "the feed was stopping"));
    }
    // The feed has ended: from here on a stop signal ends the process at once.
    let ended = drain
        .unless_stopped(async {
            let summary = handle.wait().await;
            // Whatever saving does, the summary is printed; what could not be kept follows it.
            let mut not_kept = Vec::new();
            if let Some(e) = &summary.stats_error {
                not_kept.push(format!("stats not saved: {e}"));
            }
            if let Some(store) = &store {
                let extensions = client.extensions().learned();
                let saved = save_kept(
                    store.as_ref(),
                    &summary.lists,
                    &summary.penalties,
                    &extensions,
                );
                if let Err(e) = saved.await {
                    not_kept.push(format!(
                        "the relay lists and set-aside relays not kept: {e:#}"
                    ));
                }
                if let Err(e) = save_notes(&args, newest, &summary.marks).await {
                    not_kept.push(format!("the notes not kept: {e:#}"));
                }
            }
            (summary, not_kept)
        })
        .await;
    let (summary, mut not_kept) = match ended {
        Ok(ended) => ended,
        Err(signal) => {
            return Ok(stopped(
                signal,
                "the relay lists and set-aside relays were being kept",
            ))
        }
    };
    // Queued notes reach stdout before the summary.
    let flushed = drain.finish().await;
    print_summary(&summary);
    if let Err(signal) = flushed {
        return Ok(stopped(signal, "notes were still being written to stdout"));
    }
    if let Some(path) = &args.summary_json {
        let file = path.clone();
        let text = summary_json(&summary);
        let written =
            tokio::task::spawn_blocking(move || write_summary_file(&file, &text?, &files));
        // The write is checked and cannot block on a FIFO; should the disk hang, a stop
        // signal still ends the process.
        match drain.unless_stopped(written).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => not_kept.push(format!("{e:#}")),
            Ok(Err(e)) => not_kept.push(format!("writing the summary: {e}")),
            Err(signal) => return Ok(stopped(signal, "the summary was being written")),
        }
    }
    let mut err = std::io::stderr().lock();
    for line in &not_kept {
        let _ = writeln!(err, "error: {}", crate::text::shown(line));
    }
    if summary.uncovered > 0 {
        let _ = writeln!(
            err,
            "error: {} of {} follows were asked of no relay: none of --relays, \
             --fallback-relays or the follows' listed relays was usable",
            summary.uncovered, summary.follows
        );
        for line in describe_unusable(&summary, &carriers) {
            let _ = writeln!(err, "  {line}");
        }
        return Ok(ExitCode::from(2));
    }
    if !not_kept.is_empty() {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The newest notes of each follow delivered in this run, kept for the next one.
#[derive(Default)]
struct Newest {
    by_author: std::collections::HashMap<PublicKey, Vec<nostr::event::Event>>,
}

impl Newest {
    fn add(&mut self, event: &nostr::event::Event) {
        let notes = self.by_author.entry(event.pubkey).or_default();
        notes.push(event.clone());
        if notes.len() > 2 * nostr_outbox_stats::notes::NOTES_PER_FOLLOW {
            notes.sort_by_key(|e| std::cmp::Reverse(e.created_at));
            notes.truncate(nostr_outbox_stats::notes::NOTES_PER_FOLLOW);
        }
    }
}

/// What earlier runs kept, loaded: the marks for the runtime and the ids printed.
struct Kept {
    marks: Vec<nostr_outbox_runtime::RelayMark>,
    ids: std::collections::HashSet<nostr::event::EventId>,
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Loads the notes kept beside the store (forgotten first with `--forget-notes`) and prints
/// them, oldest first, marked as kept; of `follows` alone when they are known. A file that
/// cannot be read is warned about and the run starts from nothing kept.
async fn kept_notes(args: &Args, follows: Option<&Vec<PublicKey>>) -> anyhow::Result<Kept> {
    let notes =
        nostr_outbox_stats::notes::NotesStore::new(args.reader.keep.location(true)?.notes_path());
    let forget = args.forget_notes;
    let loaded = tokio::task::spawn_blocking(move || {
        if forget {
            notes.clear()?;
        }
        notes.load(unix_now())
    })
    .await
    .context("reading the kept notes")?;
    let loaded = match loaded {
        Ok(loaded) => loaded,
        Err(e) if forget => return Err(e).context("forgetting the kept notes"),
        Err(e) => {
            eprintln!(
                "warning: the kept notes were not read, starting without them: {}",
                crate::text::shown(&e.to_string())
            );
            Default::default()
        }
    };
    if loaded.dropped > 0 {
        tracing::warn!(
            dropped = loaded.dropped,
            "kept notes or marks that did not check out were left out"
        );
    }
    let mut ids = std::collections::HashSet::new();
    let mut out = std::io::stdout().lock();
    for event in &loaded.notes {
        if follows.is_some_and(|f| f.binary_search(&event.pubkey).is_err()) {
            continue;
        }
        if ids.insert(event.id) {
            // A closed stdout is found by the feed's own writes.
            let _ = writeln!(out, "{}", drain::kept_line(event, args.reader.json));
        }
    }
    let _ = out.flush();
    let marks = (loaded.marks.into_iter())
        .map(|m| nostr_outbox_runtime::RelayMark {
            relay: m.relay,
            at: m.at,
            authors: m.authors,
        })
        .collect();
    Ok(Kept { marks, ids })
}

/// Keeps the run's newest notes per follow and its relay marks beside the store.
async fn save_notes(
    args: &Args,
    newest: Newest,
    marks: &[nostr_outbox_runtime::RelayMark],
) -> anyhow::Result<()> {
    let notes =
        nostr_outbox_stats::notes::NotesStore::new(args.reader.keep.location(false)?.notes_path());
    let events: Vec<_> = newest.by_author.into_values().flatten().collect();
    let marks: Vec<_> = (marks.iter())
        .map(|m| nostr_outbox_stats::notes::KeptMark {
            relay: m.relay.clone(),
            at: m.at,
            authors: m.authors.clone(),
        })
        .collect();
    tokio::task::spawn_blocking(move || notes.save(&events, &marks, unix_now()))
        .await
        .context("keeping the notes")?
        .map_err(anyhow::Error::from)
}

/// `summary` as the one JSON object `--summary-json` writes, with its line end: written through
/// `json_safe` as every `--json` output is, so relay text in it (a `CLOSED` reason kept as a
/// set-aside's reason) carries no raw C1 or bidirectional control to a terminal that shows it.
fn summary_json(summary: &FeedSummary) -> anyhow::Result<String> {
    let summary = serde_json::to_value(summary).context("encoding the summary")?;
    let doc = serde_json::json!({
        "format": nostr_outbox_runtime::SUMMARY_FORMAT,
        "summary": summary,
    });
    let mut text = crate::text::json_safe(&doc.to_string());
    text.push('\n');
    Ok(text)
}

/// Every file a feed reads or keeps: the store's, the secret key file, the config and the
/// files of follows.
fn run_files(args: &Args) -> anyhow::Result<crate::files::RunFiles> {
    let mut files = args.reader.files()?;
    if let Some(config) = &args.config {
        files.add("the router config (--config)", config);
    }
    for item in &args.follows {
        if Path::new(item).is_file() {
            files.add("a file of follows (--follows)", item);
        }
    }
    Ok(files)
}

/// Refuses a `--summary-json` path the summary could not be written to when the run ends:
/// anything but a regular file (a FIFO would block the write, a device or directory never
/// holds it), or a directory that takes no new file (the check `--stats` gets before a run);
/// the file stdout or stderr writes to, which the summary would overwrite; and any of `files`,
/// which the run reads or keeps.
fn check_summary_path(path: &Path, files: &crate::files::RunFiles) -> anyhow::Result<()> {
    files.refuse_output("--summary-json", path)?;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.is_file() {
            refuse_standard_stream(path, &meta)?;
        }
    }
    nostr_outbox_stats::check_writable_file(path).map_err(|e| match e {
        nostr_outbox_client::StatsStoreError::Io { path, source } => {
            anyhow::anyhow!("--summary-json {}: {source}", path.display())
        }
        other => anyhow::anyhow!("--summary-json {}: {other}", path.display()),
    })
}

/// Writes the summary `text` to `path` (blocking). The path is checked again (it may have
/// been replaced since the run started), then opened without truncating, and only a regular
/// file is truncated and written.
fn write_summary_file(
    path: &Path,
    text: &str,
    files: &crate::files::RunFiles,
) -> anyhow::Result<()> {
    check_summary_path(path, files).context("the summary was not written")?;
    let context = || format!("writing the summary to {}", path.display());
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(context)?;
    let meta = file.metadata().with_context(context)?;
    if !meta.is_file() {
        bail!(
            "the summary was not written: --summary-json {}: not a regular file",
            path.display()
        );
    }
    refuse_standard_stream(path, &meta).context("the summary was not written")?;
    file.set_len(0).with_context(context)?;
    file.write_all(text.as_bytes()).with_context(context)
}

/// An error when `meta` (of `path`) is the file stdout or stderr writes to: the same device
/// and inode (Unix). Truncating it for the summary would wipe the notes or the text summary
/// written there.
fn refuse_standard_stream(path: &Path, meta: &std::fs::Metadata) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use std::os::fd::{AsFd, BorrowedFd};
        use std::os::unix::fs::MetadataExt;
        let same = |fd: BorrowedFd<'_>| {
            fd.try_clone_to_owned()
                .map(std::fs::File::from)
                .and_then(|f| f.metadata())
                .is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
        };
        for (name, written_here) in [
            ("stdout", same(std::io::stdout().as_fd())),
            ("stderr", same(std::io::stderr().as_fd())),
        ] {
            if written_here {
                bail!(
                    "--summary-json {}: {name} is written to this file, and the summary would \
                     overwrite it: give another file",
                    path.display()
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (path, meta);
    Ok(())
}

/// The relays a run could have carried the residual with: `--relays`, then the usable
/// `--fallback-relays`, canonical.
fn runtime_config_relays(
    relays: &[String],
    args: &Args,
    policy: &nostr_outbox_core::UrlPolicy,
) -> Vec<String> {
    let mut out = relays.to_vec();
    for raw in &args.fallback_relays {
        if let Ok(url) = policy.canonicalize(raw) {
            if !out.contains(&url) {
                out.push(url);
            }
        }
    }
    out
}

/// One line per relay of `relays`: why it carried nothing (set aside until when, and the last
/// reason, escaped), from the penalty box the run ended with.
fn describe_unusable(s: &FeedSummary, relays: &[String]) -> Vec<String> {
    relays
        .iter()
        .map(|url| match s.penalties.get(url) {
            Some(e) if e.needs_sign_in => format!(
                "{}: needs sign-in (NIP-42) and no key was given ({}); \
                 give --secret-key-file to read it",
                escape(url),
                escape(&e.last_reason)
            ),
            Some(e) => match e.until {
                Some(until) => format!(
                    "{}: set aside until {} ({})",
                    escape(url),
                    when(until),
                    escape(&e.last_reason)
                ),
                None => format!("{}: failed ({})", escape(url), escape(&e.last_reason)),
            },
            None => format!("{}: answered nothing", escape(url)),
        })
        .collect()
}

/// Unix seconds as an RFC 3339 time (UTC); beyond what it can show, the number.
fn when(secs: u64) -> String {
    match std::time::UNIX_EPOCH.checked_add(Duration::from_secs(secs)) {
        Some(t) if secs < 253_402_300_800 => humantime::format_rfc3339_seconds(t).to_string(),
        _ => format!("unix time {secs}"),
    }
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
        } => format!(
            "failed {relay}: {} ({})",
            escape(&reason.to_string()),
            failures_in_a_row(*strikes)
        ),
        Status::Authenticated { relay } => format!("signed in to {} (NIP-42)", escape(relay)),
        Status::Refused { relay, reason } => format!("refused by {relay}: {}", escape(reason)),
        Status::Penalised { relay, reason, .. } => {
            format!("set aside {relay}: {}", escape(reason))
        }
        Status::Dropped { relay, reason } => format!("dropped a frame from {relay}: {reason:?}"),
        Status::Settled => "every relay answered or was set aside".to_string(),
        Status::Carriers { carriers, relays } => {
            let mut line = format!(
                "no reader relay usable; the follows no routed relay covers are {}",
                carried_by(*carriers)
            );
            if !relays.is_empty() {
                line.push_str(&format!(": {}", relays.join(", ")));
            }
            line
        }
        Status::PlanRejected { reason } => {
            format!("plan rejected, the last good one stays: {reason}")
        }
        Status::Probed {
            relays,
            answered,
            events,
            found,
        } => format!("probed {relays} relays the plan did not ask: {answered} answered, {events} notes learned from, {found} new ones passed on"),
    }
}

/// A failure's place in its relay's run of failures, from the runtime's strike count: the
/// count goes back to 0 when a failure sets the relay aside (a `set aside` line follows).
fn failures_in_a_row(strikes: u32) -> String {
    match strikes {
        0 => "too many failures in a row: set aside for a while".to_string(),
        1 => "first failure in a row; retried after a pause".to_string(),
        n => format!("{n} failures in a row; retried after a pause"),
    }
}

/// Who is asked about the follows no routed relay covers (the residual), in plain words.
fn carried_by(carriers: Carriers) -> &'static str {
    match carriers {
        Carriers::Reader => "asked of the reader's relays",
        Carriers::Fallback => {
            "asked of the fallback relays (--fallback-relays), since no reader relay was usable"
        }
        Carriers::Routed => {
            "asked of the best-known live relays of the follows' lists, since no reader or \
             fallback relay was usable"
        }
        Carriers::Nobody => {
            "asked of no relay: no reader, fallback or list relay was usable (give --relays \
             or --fallback-relays that answer)"
        }
    }
}

/// The relays that asked for sign-in (NIP-42): how many signed in, then one line each.
fn describe_auth(s: &FeedSummary) -> Vec<String> {
    if s.auth.is_empty() {
        return Vec::new();
    }
    let signed_in = s
        .auth
        .values()
        .filter(|o| **o == AuthOutcome::SignedIn)
        .count();
    let mut lines = vec![format!(
        "sign-in (NIP-42):    {} relays required it, {signed_in} signed in",
        s.auth.len()
    )];
    for (relay, outcome) in &s.auth {
        let how = match outcome {
            AuthOutcome::SignedIn => "signed in".to_string(),
            AuthOutcome::NoKeys => "needs sign-in: no key (--secret-key-file or \
                 OUTBOX_SECRET_KEY); skipped until a run has one"
                .to_string(),
            AuthOutcome::Failed(why) => format!("set aside: {}", escape(why)),
        };
        lines.push(format!("  {}: {how}", escape(relay)));
    }
    lines
}

/// Most pending relays named in the summary; the rest are counted.
const MAX_PENDING_SHOWN: usize = 10;

/// One line when the run stopped early (its deadline, its EOSE race): the relays still
/// awaited, escaped.
/// The follows with nowhere to be read, named (at most [`MAX_PENDING_SHOWN`]).
fn describe_unreadable(s: &FeedSummary) -> Option<String> {
    if s.unreadable.is_empty() {
        return None;
    }
    use nostr::nips::nip19::ToBech32;
    let shown: Vec<String> = (s.unreadable.iter())
        .take(MAX_PENDING_SHOWN)
        .map(|pk| pk.to_bech32().unwrap_or_else(|_| pk.to_hex()))
        .collect();
    let more = and_more(s.unreadable.len());
    Some(format!(
        "{:<21}{}{more}",
        "nowhere to be read:",
        shown.join(", ")
    ))
}

fn describe_pending(s: &FeedSummary) -> Option<String> {
    if !s.deadline_reached && s.pending.is_empty() {
        return None;
    }
    let why = if s.deadline_reached {
        "deadline reached"
    } else {
        "stopped early"
    };
    if s.pending.is_empty() {
        return Some(format!("{:<21}nothing pending", format!("{why}:")));
    }
    let shown: Vec<String> = s
        .pending
        .iter()
        .take(MAX_PENDING_SHOWN)
        .map(|url| escape(url))
        .collect();
    let more = and_more(s.pending.len());
    Some(format!(
        "{:<21}{} relays pending: {}{more}",
        format!("{why}:"),
        s.pending.len(),
        shown.join(", ")
    ))
}

/// One line: what probing did (relays the plan did not ask, probed after the fetch), with the
/// first failure's reason, escaped.
fn describe_probes(s: &FeedSummary) -> String {
    let p = &s.probes;
    if p.probed() == 0 {
        return "probes:              none".to_string();
    }
    let failed = p.relays.iter().find_map(|(url, r)| {
        let why: String = r.failure.as_deref()?.chars().take(120).collect();
        Some(format!(
            "; {} failed, e.g. {}: {}",
            p.probed() - p.answered(),
            escape(url),
            escape(&why)
        ))
    });
    format!(
        "probes:              {} relays probed, {} answered, {} notes learned from, {} new ones shown after the fetch{}",
        p.probed(),
        p.answered(),
        p.events(),
        p.found(),
        failed.unwrap_or_default()
    )
}

fn ms(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".to_string(), |d| format!("{} ms", d.as_millis()))
}

fn print_summary(s: &FeedSummary) {
    let mut lines = vec![
        format!("events:              {}", s.events),
        format!(
            "relays:              {} asked, {} answered, {} failed{}{}",
            s.relays_asked,
            s.relays_answered,
            s.relays_failed,
            match s.relays_refused {
                0 => String::new(),
                n => format!(", {n} refused (payment, sign-in)"),
            },
            match s.relays_replanned_away {
                0 => String::new(),
                n => format!(", {n} replanned away before answering"),
            }
        ),
        format!("disclosure:          {}", s.disclosure),
        format!(
            "authors covered:     {}/{}{}",
            s.authors_covered,
            s.follows,
            match s.unreadable.len() {
                0 => String::new(),
                n => format!(
                    "; {n} with nowhere to be read (every relay they write to refused or failed)"
                ),
            }
        ),
        {
            let mut notes = Vec::new();
            if s.lists_from_indexers > 0 {
                notes.push(format!("{} first from indexers", s.lists_from_indexers));
            }
            if s.lists_reconciled > 0 {
                notes.push(format!("reconciled on {} relays", s.lists_reconciled));
            }
            match notes.is_empty() {
                true => format!("relay lists:         {}", s.relay_lists),
                false => format!(
                    "relay lists:         {} ({})",
                    s.relay_lists,
                    notes.join(", ")
                ),
            }
        },
        format!("plans:               {} (seed {:#x})", s.plans, s.seed),
        format!(
            "transfer:            {} REQ pages, {} events received",
            s.round_trips, s.events_received
        ),
        format!("time to first event: {}", ms(s.time_to_first_event)),
        format!("time to 90% events:  {}", ms(s.time_to_90_percent)),
        format!(
            "time to full EOSE:   {}{}",
            ms(s.time_to_full_eose),
            if s.raced {
                " (EOSE race: stopped early)"
            } else {
                ""
            }
        ),
    ];
    lines.extend(describe_pending(s));
    lines.extend(describe_unreadable(s));
    lines.push(describe_probes(s));
    lines.push(format!(
        "sockets:             {} at most open at once, {} dialled, {} shared, {} for relay documents",
        s.sockets.peak, s.sockets.dials, s.sockets.joins, s.sockets.documents
    ));
    if s.places != nostr_outbox_runtime::Places::Enough {
        lines.push(format!("socket places:       {}", s.places));
    }
    if s.carriers != Carriers::Reader {
        lines.push(format!("not routed:          {}", carried_by(s.carriers)));
    }
    if s.relays_incomplete > 0 {
        lines.push(format!(
            "incomplete:          {} relays hit the page budget (older notes may remain)",
            s.relays_incomplete
        ));
    }
    if s.plans_rejected > 0 {
        lines.push(format!("plans rejected:      {}", s.plans_rejected));
    }
    if !s.penalised.is_empty() {
        lines.push(format!("set aside:           {}", s.penalised.join(", ")));
    }
    lines.extend(describe_auth(s));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let skipped: Vec<String> = s
        .penalties
        .entries()
        .filter(|(url, e)| e.needs_sign_in && !s.auth.contains_key(*url))
        .filter(|(_, e)| e.until.is_some_and(|u| u > now))
        .map(|(url, _)| escape(url))
        .collect();
    if !skipped.is_empty() {
        lines.push(format!(
            "needs sign-in:       {} (skipped: no key; give --secret-key-file)",
            skipped.join(", ")
        ));
    }
    let mut err = std::io::stderr().lock();
    for line in lines {
        // Nothing useful to do if stderr is gone.
        let _ = writeln!(err, "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_says_how_many_came_in_a_row_and_when_it_sets_a_relay_aside() {
        let failed = |strikes| {
            describe(&Status::Failed {
                relay: "wss://a.example".into(),
                reason: nostr_outbox_runtime::Failure::ConnectTimeout,
                strikes,
            })
        };
        let aside = failed(0);
        assert!(!aside.contains("strike"), "{aside}");
        assert!(aside.contains("set aside"), "{aside}");
        assert!(
            failed(1).contains("first failure in a row"),
            "{}",
            failed(1)
        );
        assert!(failed(2).contains("2 failures in a row"), "{}", failed(2));
    }

    #[test]
    fn who_carries_the_uncovered_follows_is_said_in_plain_words() {
        for carriers in [
            Carriers::Reader,
            Carriers::Fallback,
            Carriers::Routed,
            Carriers::Nobody,
        ] {
            let line = describe(&Status::Carriers {
                carriers,
                relays: Vec::new(),
            });
            assert!(!line.contains(&format!("{carriers:?}")), "{line}");
            assert!(line.contains("follows no routed relay covers"), "{line}");
        }
        assert!(carried_by(Carriers::Nobody).contains("no relay"));
    }
}

//! `outbox feed --inbox`: the reader's mentions (events tagging the reader), asked of the read
//! relays of the reader's own relay list (NIP-65), else of `--relays`, as the routes library's
//! inbox route plans it with the learned relay stats.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;

use anyhow::bail;
use nostr::event::Kind;
use nostr::filter::Filter;
use nostr::types::Timestamp;
use nostr_outbox_client::RelayDirectoryBuilder;
use nostr_outbox_client::{
    routes::InboxQuery, routes::Route, routes::RouteBudget, routes::RouteContext, routes::RoutePlan,
};
use nostr_outbox_core::DeliveryStats;
use nostr_outbox_runtime::{Client, Refusal, RouteEvent, RuntimeConfig};

use super::{lookup_failures, open_store, parse_key, router_config, stopped, Args, Drain};
use crate::reader::canonical_relays;
use crate::text::escape;

/// Plans the inbox route, streams what its relays deliver, and prints a summary.
pub(super) async fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let Some(npub) = &args.reader.npub else {
        bail!("--inbox needs --npub: whose mentions to stream");
    };
    let reader = parse_key(npub)?;
    let config = router_config(args)?;
    let mut policy = config.url_policy.clone();
    let relays = canonical_relays(&policy, &args.reader.relays, "relay")?;
    let indexers = canonical_relays(
        &policy,
        config.indexers.iter().chain(&args.reader.indexers),
        "indexer",
    )?;
    let known = [("the reader's", std::slice::from_ref(&reader))];
    let auth = crate::secret::signer(
        args.reader.secret_key_file.as_deref(),
        &args.reader.remote,
        &known,
    )
    .await?;
    if let Some(keys) = &auth {
        tracing::info!(pubkey = %keys.public_key(), "signing in where relays require it");
    }
    let runtime_config = RuntimeConfig {
        connect_timeout: args.connect_timeout,
        eose_timeout: args.eose_timeout,
        verify_signatures: !args.no_verify,
        once: args.once,
        seed: args.seed.unwrap_or_else(rand::random),
        ..RuntimeConfig::default()
    };
    let client = nostr_outbox_runtime::Client::with(runtime_config, args.sockets.budget(), auth);

    // The reader's relay list (read relays) and blocked relays, from their relays and the
    // indexers.
    let mut lookup = relays.clone();
    lookup.extend(indexers.iter().filter(|i| !relays.contains(i)).cloned());
    let filter = Filter::new()
        .author(reader)
        .kinds([Kind::RelayList, Kind::BlockedRelays]);
    let asked = nostr_outbox_runtime::lookup(&lookup, &filter, &client).await;
    let found = &asked.events;
    if !found.iter().any(|e| e.kind == Kind::RelayList) {
        // No list: the reader has none, or the relays that may hold it did not say.
        let why = lookup_failures(&asked, client.signer().is_some());
        if asked.answered() == 0 {
            bail!(
                "could not learn where {npub} reads (its relay list, kind:10002): no relay \
                 answered: {}",
                why.join("; ")
            );
        }
        if !why.is_empty() {
            eprintln!(
                "warning: no relay list (kind:10002) for {npub}; asking --relays, though these \
                 did not answer: {}",
                crate::text::shown(&why.join("; "))
            );
        }
    }
    if let Some(blocked) = found.iter().find(|e| e.kind == Kind::BlockedRelays) {
        policy = policy.denying(nostr_outbox_core::blocked_relays(blocked));
    }
    let mut directory = RelayDirectoryBuilder::new(policy.clone());
    // The lookup verified signatures unless --no-verify asked it not to.
    for list in found.iter().filter(|e| e.kind == Kind::RelayList) {
        directory.add_verified(list);
    }
    let directory = directory.build();

    let store = open_store(args)?;
    let stats = match &store {
        Some(store) => store
            .load()
            .await
            .map(|loaded| loaded.stats)
            .unwrap_or_else(|e| {
                eprintln!(
                    "warning: stats unreadable, planning without them: {}",
                    crate::text::shown(&e.to_string())
                );
                DeliveryStats::new()
            }),
        None => DeliveryStats::new(),
    };
    let now = Timestamp::now().as_secs();
    let mut query = InboxQuery::new(reader);
    query.reader_relays = relays;
    query.since = Some(now.saturating_sub(args.since.as_secs()));
    let ctx = RouteContext {
        directory: &directory,
        stats: &stats,
        now,
        budget: RouteBudget {
            max_relays: config.max_connections,
            ..RouteBudget::default()
        },
    };
    let (plan, violations) = query.plan_checked(&ctx);
    if !violations.is_empty() {
        let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
        bail!("the inbox route is unsound: {}", list.join("; "));
    }
    if plan.targets.is_empty() {
        bail!(
            "no relay to ask for mentions: the reader's relay list names no read relay and no \
             --relays entry is usable"
        );
    }
    describe_plan(&plan);
    stream(args, &plan, &client).await
}

/// One line per relay and why it was chosen, on stderr.
fn describe_plan(plan: &RoutePlan) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "inbox: {} relays", plan.targets.len());
    for target in &plan.targets {
        let reasons: Vec<String> = target.reasons.iter().map(ToString::to_string).collect();
        let _ = writeln!(err, "  {} ({})", escape(&target.url), reasons.join(", "));
    }
}

/// Per relay: events delivered first, whether it finished, why it failed.
#[derive(Default)]
struct Tally {
    notes: usize,
    eose: bool,
    failure: Option<String>,
    refusal: Option<Refusal>,
}

async fn stream(args: &Args, plan: &RoutePlan, client: &Client) -> anyhow::Result<ExitCode> {
    let (feed, mut events) = nostr_outbox_runtime::start_route(plan, client);
    let mut tally: BTreeMap<String, Tally> = plan
        .urls()
        .map(|u| (u.to_string(), Tally::default()))
        .collect();
    let mut drain = Drain::new()?;
    let shutdown = || feed.request_shutdown();
    while let Some(event) = drain.next(&mut events, shutdown).await {
        match event {
            RouteEvent::Note { event, relay } => {
                tally.entry(relay.clone()).or_default().notes += 1;
                drain
                    .print(&event, &relay, args.reader.json, shutdown)
                    .await;
            }
            RouteEvent::Eose { relay, .. } => {
                if args.verbose {
                    eprintln!("EOSE {}", escape(&relay));
                }
                tally.entry(relay).or_default().eose = true;
            }
            RouteEvent::Failed {
                relay,
                reason,
                refusal,
            } => {
                if args.verbose {
                    eprintln!("failed {}: {}", escape(&relay), escape(&reason));
                }
                let t = tally.entry(relay).or_default();
                t.failure = Some(reason);
                t.refusal = refusal;
            }
        }
    }
    if let Some(signal) = drain.forced() {
        return Ok(stopped(signal, "the inbox was stopping"));
    }
    // The feed has ended: from here on a stop signal ends the process at once.
    if let Err(signal) = drain.unless_stopped(feed.wait()).await {
        return Ok(stopped(signal, "the inbox was stopping"));
    }
    let flushed = drain.finish().await;
    let notes: usize = tally.values().map(|t| t.notes).sum();
    let answered = tally.values().filter(|t| t.eose).count();
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "mentions:            {notes}");
    let _ = writeln!(
        err,
        "relays:              {} asked, {answered} answered, {} failed",
        tally.len(),
        tally
            .values()
            .filter(|t| !t.eose && t.failure.is_some())
            .count()
    );
    for (relay, t) in tally.iter().filter(|(_, t)| !t.eose) {
        if let Some(why) = &t.failure {
            let _ = writeln!(err, "  {}: {}", escape(relay), escape(why));
        }
    }
    drop(err);
    if let Err(signal) = flushed {
        return Ok(stopped(
            signal,
            "mentions were still being written to stdout",
        ));
    }
    if answered == 0 && !tally.is_empty() {
        // Nothing was read: zero mentions would say the inbox is empty when it was not seen.
        let sign_in = tally.values().any(|t| t.refusal == Some(Refusal::SignIn));
        let hint = if sign_in && client.signer().is_none() {
            ": an inbox relay requires sign-in (NIP-42) — give --secret-key-file"
        } else {
            ""
        };
        eprintln!("error: no inbox relay answered{hint}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

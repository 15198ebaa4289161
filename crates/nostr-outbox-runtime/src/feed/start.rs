//! Starting a feed: the stats loaded, monitors asked, the places fitted, and the coordinator
//! spawned behind a [`FeedHandle`].

use std::collections::BTreeSet;

use nostr_outbox_core::DeliveryStats;
use tokio::sync::mpsc;

use crate::asks::monitor;
use crate::client::Client;
use crate::feed::coordinator;
use crate::feed::event::FeedEvent;
use crate::feed::handle::FeedHandle;
use crate::feed::input::FeedInput;
use crate::feed::places::Places;
use crate::feed::slot;

/// Starts a feed: loads the stats, makes the first plan (before any list is known, unless lists
/// were given) and dials its slots. Drain the returned channel; the feed waits for it.
///
/// A store that cannot be read (the medium failing, not bad content, which stores repair) is
/// logged and the feed starts with fresh stats: a feed is more useful than an error.
pub async fn start(
    mut input: FeedInput,
    client: &Client,
) -> (FeedHandle, mpsc::Receiver<FeedEvent>) {
    let config = client.config();
    let now = config
        .clock
        .unwrap_or_else(|| nostr::types::Timestamp::now().as_secs());
    // A kept deadline is never believed beyond the longest set-aside; with a key, relays that
    // only needed sign-in are asked again.
    input.penalties.clamp(now, &config.penalty);
    let (mut input, places) = fit(input, client);
    if client.signer().is_some() {
        input.penalties.retry_sign_in();
    }
    // A relay the reader now pays for gets a fresh chance, whatever was kept about it.
    for url in &config.paid_relays {
        input.penalties.forget(url);
    }
    let store = input.store.clone();
    // A task of its own: a store that panics costs the stored stats, not the feed.
    let stats = match tokio::spawn(async move { store.load().await }).await {
        Ok(Ok(loaded)) => loaded.stats,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "stats store unreadable; starting with fresh stats");
            DeliveryStats::new()
        }
        Err(e) => {
            tracing::warn!(error = %e, "stats load task failed; starting with fresh stats");
            DeliveryStats::new()
        }
    };
    let mut stats = stats;
    apply_monitors(&mut input, client, &mut stats).await;
    let reader_relays = input.reader_relays.clone();
    let (control, task, events) = coordinator::spawn(input, client.clone(), stats, places);
    let handle = FeedHandle::new(control, task, client.clone(), reader_relays, places);
    (handle, events)
}

/// Fetches the monitor reports about the relays of the known lists and seeds the prior; a
/// monitor that fails or knows nothing leaves the stats as they were.
async fn apply_monitors(input: &mut FeedInput, client: &Client, stats: &mut DeliveryStats) {
    let config = client.config();
    let policy = input.router.policy();
    let monitors: Vec<String> = input
        .monitor_relays
        .iter()
        .filter_map(|m| match policy.canonicalize(m) {
            Ok(url) => Some(url),
            Err(reason) => {
                tracing::warn!(relay = %m, %reason, "monitor relay not usable");
                None
            }
        })
        .collect();
    if monitors.is_empty() {
        return;
    }
    let relays = monitor::list_relays(&input.relay_lists, &input.follows, policy);
    let reports = monitor::fetch_monitor_reports(&monitors, &relays, client).await;
    let now = config
        .clock
        .unwrap_or_else(|| nostr::types::Timestamp::now().as_secs());
    let summary = nostr_outbox_client::apply_monitor_prior(stats, &reports, policy, now);
    tracing::info!(
        reports = reports.len(),
        alive = summary.alive,
        dead = summary.dead,
        own_evidence = summary.own_evidence,
        "monitor reports applied"
    );
    // Relays a monitor says require what the reader lacks are left out of plans.
    let mut left_out = Vec::new();
    for report in &reports {
        let Ok(url) = policy.canonicalize(&report.url) else {
            continue;
        };
        let limits = nostr_outbox_client::paging::RelayLimits {
            payment_required: report.requires_payment == Some(true),
            auth_required: report.requires_auth == Some(true),
            ..Default::default()
        };
        if let Some(lacking) = slot::Requirement::unmet(&limits, &url, client) {
            left_out.push((url, lacking));
        }
    }
    for (url, lacking) in left_out {
        let reason = lacking.reason("NIP-66 monitor");
        tracing::info!(relay = %url, %reason, "left out of plans");
        match lacking {
            slot::Requirement::SignIn => {
                input
                    .penalties
                    .needs_sign_in(&url, &reason, now, &config.penalty);
            }
            slot::Requirement::Payment => {
                input
                    .penalties
                    .needs_payment(&url, &reason, now, &config.penalty);
            }
        }
    }
}

/// Fits `input` to the places `config`'s socket budget leaves the feed: a continuing feed
/// takes them in turns, a one-shot run time-shares them, each with its whole routed budget.
/// Says how.
fn fit(input: FeedInput, client: &Client) -> (FeedInput, Places) {
    let config = client.config();
    let Some(places) = client.sockets().budget().lasting_sockets() else {
        return (input, Places::Enough);
    };
    let fixed = input
        .reader_relays
        .iter()
        .chain(&config.indexers)
        .collect::<BTreeSet<_>>()
        .len();
    let budget = input.router.max_connections();
    let slots = fixed.saturating_add(budget);
    if slots <= places {
        return (input, Places::Enough);
    }
    // The whole routed budget is kept either way: a cut budget asks fewer relays, so one
    // more socket could fetch fewer notes (more places, less cut, a different plan), and it
    // would leave follows on the reader's relays, where their notes may never be.
    let fit = if !config.once {
        // A continuing feed's slots never give a place up by themselves: the coordinator
        // takes them in turns.
        Places::Turns {
            places,
            slots,
            every: config.open.turn_every,
        }
    } else {
        Places::Shared { places, slots }
    };
    tracing::info!(%fit, "the feed's relays do not all fit the socket budget at once");
    (input, fit)
}

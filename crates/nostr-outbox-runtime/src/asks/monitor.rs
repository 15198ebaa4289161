//! NIP-66 monitor reports fetched at the start of a feed, so the first plan can lean away from
//! relays a monitor has not seen online for long (see [`nostr_outbox_client::monitor`]).

use nostr::event::Kind;
use nostr::filter::Filter;
use std::collections::HashSet;

use nostr::key::PublicKey;
use nostr_outbox_client::MonitorReport;
use nostr_outbox_core::{RawRelayList, UrlPolicy};

use crate::asks::lookup::fetch_events;
use crate::client::Client;

/// Relays named in one REQ's `#d` list (each asked in two spellings, see
/// [`fetch_monitor_reports`]).
pub const MONITOR_CHUNK: usize = 100;

/// Most reports kept from the monitor relays (the core reads at most this many).
pub const MAX_FETCHED_REPORTS: usize = nostr_outbox_client::monitor::MAX_MONITOR_REPORTS;

/// Reports (kind:30166) per relay asked for: several monitors may report on one relay.
const REPORTS_PER_RELAY: usize = 4;

/// The canonical URLs of every relay in the follows' `lists` that `policy` accepts, sorted.
pub fn list_relays(
    lists: &[RawRelayList],
    follows: &[PublicKey],
    policy: &UrlPolicy,
) -> Vec<String> {
    let follows: HashSet<&PublicKey> = follows.iter().collect();
    let mut urls: Vec<String> = lists
        .iter()
        .filter(|l| follows.contains(&l.author))
        .flat_map(|l| &l.tags)
        .filter(|t| t.first().map(String::as_str) == Some("r"))
        .filter_map(|t| t.get(1))
        .filter_map(|u| policy.canonicalize(u).ok())
        .collect();
    urls.sort_unstable();
    urls.dedup();
    urls
}

/// Asks the `monitors` relays for the kind:30166 reports about `relays` (canonical URLs), in
/// `#d` chunks of [`MONITOR_CHUNK`]; each relay is asked as written and with a trailing slash,
/// the two spellings monitors use. With no `relays`, the monitors' newest reports up to the
/// bound. Events that do not parse are skipped; at most [`MAX_FETCHED_REPORTS`] are kept.
pub async fn fetch_monitor_reports(
    monitors: &[String],
    relays: &[String],
    client: &Client,
) -> Vec<MonitorReport> {
    let mut filters = Vec::new();
    if relays.is_empty() {
        filters.push(
            Filter::new()
                .kind(Kind::RelayDiscovery)
                .limit(MAX_FETCHED_REPORTS),
        );
    }
    for chunk in relays
        .chunks(MONITOR_CHUNK)
        .take(MAX_FETCHED_REPORTS / MONITOR_CHUNK)
    {
        let names = chunk.iter().flat_map(|u| [u.clone(), format!("{u}/")]);
        filters.push(
            Filter::new()
                .kind(Kind::RelayDiscovery)
                .identifiers(names)
                .limit(chunk.len() * REPORTS_PER_RELAY),
        );
    }
    let mut reports = Vec::new();
    for filter in &filters {
        for event in fetch_events(monitors, filter, client).await {
            if reports.len() == MAX_FETCHED_REPORTS {
                return reports;
            }
            let parsed = if client.config().verify_signatures {
                MonitorReport::try_from(&event)
            } else {
                MonitorReport::from_verified(&event)
            };
            match parsed {
                Ok(report) => reports.push(report),
                Err(err) => tracing::debug!(%err, id = %event.id, "monitor event skipped"),
            }
        }
    }
    reports
}

//! Counts (NIP-45): how many events match a filter, asked of a few relays at once.
//!
//! Each relay is one exchange (`crate::connection::exchange`: sign-in, rate limits and refusals as on every
//! path) with an answer due within the config's EOSE timeout, or sooner where the relay has yet
//! to show it speaks NIP-45 ([`crate::connection::extensions`]). Relays hold overlapping sets, so
//! counts are never added: [`Counts`] keeps each relay's and names the largest, a lower bound
//! of the true number.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use nostr::filter::Filter;
use nostr::message::SubscriptionId;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::asks::lookup::LookupOutcome;
use crate::client::Client;
use crate::connection::exchange::{Answer, Ask, Counted, Exchange};
use crate::connection::extensions::{Extension, Outcome, Verdict};
use crate::connection::sockets::Role;

/// What each relay counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Per relay asked, by URL: its count, or what it did instead (never
    /// [`LookupOutcome::Answered`]).
    pub relays: BTreeMap<String, Result<u64, LookupOutcome>>,
    /// The relays whose count is an estimate (NIP-45 `"approximate": true`).
    pub approximate: BTreeSet<String>,
}

impl Counts {
    /// The largest count any relay gave: at least this many events match. `None` when no
    /// relay counted.
    pub fn largest(&self) -> Option<u64> {
        self.relays
            .values()
            .filter_map(|r| r.as_ref().ok())
            .copied()
            .max()
    }

    /// Relays that answered with a count.
    pub fn counted(&self) -> usize {
        self.relays.values().filter(|r| r.is_ok()).count()
    }
}

/// Asks every relay in `relays` (canonical URLs) how many events match `filters`, at once.
/// A relay that does not speak NIP-45 usually refuses (`CLOSED`) or stays silent; either is
/// said in its entry, and one known not to speak it ([`crate::connection::extensions`]) is not asked.
pub async fn count(relays: &[String], filters: &[Filter], client: &Client) -> Counts {
    let mut tasks = JoinSet::new();
    for (i, url) in relays.iter().enumerate() {
        let (url, filters, client) = (url.clone(), filters.to_vec(), client.clone());
        tasks.spawn(async move {
            let counted = count_one(&url, filters, &client, i).await;
            (url, counted)
        });
    }
    let mut counts = Counts::default();
    while let Some(joined) = tasks.join_next().await {
        if let Ok((url, counted)) = joined {
            let counted = counted.map(|c| {
                if c.approximate {
                    counts.approximate.insert(url.clone());
                }
                c.count
            });
            counts.relays.insert(url, counted);
        }
    }
    for url in relays {
        counts
            .relays
            .entry(url.clone())
            .or_insert_with(|| Err(LookupOutcome::Unanswered("the count task failed".into())));
    }
    counts
}

/// One relay's count.
async fn count_one(
    url: &str,
    filters: Vec<Filter>,
    client: &Client,
    i: usize,
) -> Result<Counted, LookupOutcome> {
    let cfg = client.config();
    let wait = match client.verdict(url, Extension::Count).await {
        Verdict::Ask(wait) => wait,
        Verdict::Skip(why) => return Err(LookupOutcome::Unsupported(why)),
    };
    let dialled = Instant::now();
    let mut link = client
        .sockets()
        .link(url, Role::Lookup, cfg.dial())
        .await
        .map_err(|why| LookupOutcome::Unreachable(why.to_string()))?;
    let wait = wait.bound(cfg.eose_timeout, dialled.elapsed());
    let ask = Ask::Count {
        sub: SubscriptionId::new("outbox-count"),
        filters,
    };
    let seed = crate::asks::route_feed::relay_seed(cfg.seed, i);
    let heard = |outcome| client.extensions().heard(url, Extension::Count, outcome);
    let counted = match Exchange::send(&mut link, ask, client, wait, seed).await {
        Err(ended) => Err(ended.into()),
        Ok(mut exchange) => {
            let counted = loop {
                match exchange.next().await {
                    Answer::Count(n) => {
                        heard(Outcome::Answered);
                        break Ok(n);
                    }
                    Answer::Ended(ended) => {
                        if let Some(outcome) = ended.outcome() {
                            heard(outcome);
                        }
                        break Err(ended.into());
                    }
                    Answer::Event(_) | Answer::Eose | Answer::Ok { .. } | Answer::Reconcile(_) => {}
                }
            };
            exchange.close().await;
            counted
        }
    };
    let _ = tokio::time::timeout(Duration::from_millis(200), link.close()).await;
    counted
}

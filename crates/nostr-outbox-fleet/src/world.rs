//! A test world: where its notes live, what a plan should fetch of them, and the route tables
//! and routers a client would build.

use std::collections::{BTreeSet, HashMap, HashSet};

use nostr::event::{Event, EventId};
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr_outbox_client::routes::{Reason, RouteKind, RoutePlan, RouteTarget};
use nostr_outbox_core::{Plan, RawRelayList, RouteTable, RouteTableBuilder, UrlPolicy};

use crate::relay::RealRelay;

/// Where every note lives: the world the relays are seeded from.
#[derive(Default)]
pub struct World {
    /// Each note with the URLs of the relays holding it.
    pub notes: Vec<(Event, Vec<String>)>,
}

impl World {
    /// Adds a note stored on `relays` and stores it there.
    pub async fn put(&mut self, event: Event, relays: &[&RealRelay]) {
        for r in relays {
            r.store(&event).await;
        }
        self.notes
            .push((event, relays.iter().map(|r| r.url.clone()).collect()));
    }

    /// What a plan fetches from this world: notes whose author some relay is asked about and
    /// that relay stores, at or after `since` (the rule of `docs/formats.md`, every relay up).
    pub fn predict(&self, plan: &Plan, table: &RouteTable, since: u64) -> BTreeSet<EventId> {
        let mut asked: HashMap<PublicKey, HashSet<&str>> = HashMap::new();
        for e in plan.entries(table) {
            for a in &e.authors {
                asked
                    .entry(*table.pubkey(*a))
                    .or_default()
                    .insert(table.url(e.relay));
            }
        }
        self.notes
            .iter()
            .filter(|(e, on)| {
                e.created_at.as_secs() >= since
                    && asked
                        .get(&e.pubkey)
                        .is_some_and(|rs| on.iter().any(|u| rs.contains(u.as_str())))
            })
            .map(|(e, _)| e.id)
            .collect()
    }
}

/// The table a client would build from these lists (loopback relays allowed).
pub fn table(follows: &[PublicKey], readers: &[&str], lists: &[RawRelayList]) -> RouteTable {
    let mut b = RouteTableBuilder::new(UrlPolicy::allow_local())
        .follows(follows.iter().copied())
        .reader_relays(readers);
    for l in lists {
        b.add_list(l.clone());
    }
    b.build()
}

/// A router from TOML with every built-in strategy linked.
pub fn router(toml: &str) -> nostr_outbox_core::Router {
    nostr_outbox_strategies::link();
    nostr_outbox_core::Router::from_toml(toml).expect("valid config")
}

/// A feed input whose router allows loopback relays, as every test's relays are.
pub fn local_input<S: AsRef<str>>(
    router: nostr_outbox_core::Router,
    follows: Vec<PublicKey>,
    reader_relays: impl IntoIterator<Item = S>,
) -> nostr_outbox_runtime::FeedInput {
    let mut input = nostr_outbox_runtime::FeedInput::new(router, follows, reader_relays);
    input.router = input.router.with_policy(UrlPolicy::allow_local());
    input
}

/// An inbox plan for `reader` over `urls`, each asked for what tags the reader.
pub fn inbox_plan(reader: &nostr::key::Keys, urls: &[&str]) -> RoutePlan {
    let tagged = Filter::new().pubkey(reader.public_key());
    plan_over(
        urls.iter()
            .map(|u| reader_target(u, tagged.clone()))
            .collect(),
    )
}

/// A relay of an inbox plan, chosen as a reader's relay and asked `filter`.
pub fn reader_target(url: &str, filter: Filter) -> RouteTarget {
    RouteTarget {
        url: url.to_string(),
        reasons: vec![Reason::ReaderRead],
        quality: 0.25,
        filters: vec![filter],
    }
}

/// An inbox plan over `targets`, with nothing cut off, left out or unknown.
pub fn plan_over(targets: Vec<RouteTarget>) -> RoutePlan {
    RoutePlan {
        kind: RouteKind::Inbox,
        targets,
        cut_off: Vec::new(),
        left_out: Vec::new(),
        unknown: Vec::new(),
    }
}

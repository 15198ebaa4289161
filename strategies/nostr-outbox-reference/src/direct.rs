//! `direct`: ask every declared write relay about its writers. With a connection budget, keep
//! the relays with the most writers among the follows (the published study's "every declared
//! relay, cut to 20"). Deterministic; ties break by URL.

use nostr_outbox_core::serde::{Deserialize, Serialize};
use nostr_outbox_core::{Assignment, PlanInput, RelayId, RouteTable, Selection, Selector};
use rand::RngCore;

/// `[strategy] type = "direct"`: every declared write relay, cut to the budget by popularity.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[serde(crate = "nostr_outbox_core::serde", deny_unknown_fields)]
pub struct DirectConfig {}

nostr_outbox_core::register_strategy! {
    name: "direct",
    summary: "every declared write relay; with a budget, the relays with the most writers first",
    impl StrategyConfig for DirectConfig {
        fn build(&self) -> Box<dyn Selector> {
            Box::new(Direct)
        }
    }
}

/// The `direct` strategy's selector.
#[derive(Clone, Copy, Debug, Default)]
pub struct Direct;

impl Selector for Direct {
    fn per_author_cap(&self) -> Option<usize> {
        None
    }

    fn select(&mut self, input: &PlanInput<'_>, _rng: &mut dyn RngCore) -> Selection {
        let table = input.table;
        let assignments = by_popularity(table)
            .into_iter()
            .take(input.max_connections)
            .map(|relay| Assignment {
                relay,
                authors: table.writers(relay).to_vec(),
            })
            .collect();
        Selection { assignments }
    }
}

/// Relays with at least one writer, most writers first, ties by URL.
pub(crate) fn by_popularity(table: &RouteTable) -> Vec<RelayId> {
    let mut relays: Vec<RelayId> = table
        .relays()
        .filter(|&r| table.popularity(r) > 0)
        .collect();
    relays.sort_by(|&a, &b| {
        table
            .popularity(b)
            .cmp(&table.popularity(a))
            .then_with(|| table.url(a).cmp(table.url(b)))
    });
    relays
}

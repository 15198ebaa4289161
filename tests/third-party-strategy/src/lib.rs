//! How an outside author adds a strategy: one crate that depends only on `nostr-outbox-core`, a config
//! type deriving through `nostr_outbox_core::serde`, and one `register_strategy!` call that names it
//! once. Linked into a binary, it is picked by name from TOML.
//!
//! `most_popular_first` asks each follow of their single most popular write relay (most popular
//! among the reader's follows), then keeps the relays serving the most follows up to the budget.

use nostr_outbox_core::serde::{Deserialize, Serialize};
use nostr_outbox_core::ConfigIssue;
use nostr_outbox_core::{PlanInput, Selection, Selector};

/// `[strategy] type = "most_popular_first"`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(crate = "nostr_outbox_core::serde", deny_unknown_fields)]
pub struct MostPopularFirstConfig {
    /// Skip relays that fewer than this many follows write to.
    #[serde(default)]
    pub min_popularity: u32,
}

nostr_outbox_core::register_strategy! {
    name: "most_popular_first",
    summary: "example third-party strategy: each follow's most popular write relay",
    impl StrategyConfig for MostPopularFirstConfig {
        fn validate(&self) -> Vec<ConfigIssue> {
            if self.min_popularity > 1_000_000 {
                vec![ConfigIssue::new("min_popularity", "absurdly large")]
            } else {
                Vec::new()
            }
        }

        fn build(&self) -> Box<dyn Selector> {
            Box::new(MostPopularFirst {
                min_popularity: self.min_popularity,
            })
        }
    }
}

/// The selector built from [`MostPopularFirstConfig`].
#[derive(Debug)]
pub struct MostPopularFirst {
    min_popularity: u32,
}

impl Selector for MostPopularFirst {
    fn per_author_cap(&self) -> Option<usize> {
        Some(1)
    }

    fn select(
        &mut self,
        input: &PlanInput<'_>,
        _rng: &mut dyn nostr_outbox_core::RngCore,
    ) -> Selection {
        let table = input.table;
        let mut per_relay: Vec<Vec<nostr_outbox_core::AuthorId>> =
            vec![Vec::new(); table.relay_count()];
        for author in table.authors() {
            let best = table
                .write_relays(author)
                .iter()
                .copied()
                .filter(|&r| table.popularity(r) >= self.min_popularity)
                .max_by(|&a, &b| {
                    table
                        .popularity(a)
                        .cmp(&table.popularity(b))
                        .then_with(|| table.url(b).cmp(table.url(a)))
                });
            if let Some(relay) = best {
                per_relay[relay.index()].push(author);
            }
        }
        Selection::busiest_first(table, per_relay, input.max_connections)
    }
}

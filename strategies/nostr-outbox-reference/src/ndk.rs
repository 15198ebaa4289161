//! `ndk_priority`: NDK-like. Per follow, up to `per_author` (default 2) relays, preferring
//! relays already chosen for earlier follows, then the most popular; new relays are opened only
//! while the budget allows. Deterministic; ties break by URL.

use nostr_outbox_core::serde::{Deserialize, Serialize};
use nostr_outbox_core::ConfigIssue;
use nostr_outbox_core::{Assignment, AuthorId, PlanInput, RelayId, Selection, Selector};
use rand::RngCore;

use crate::direct::by_popularity;

/// NDK's relays per author.
pub const DEFAULT_NDK_PER_AUTHOR: usize = 2;

/// `[strategy] type = "ndk_priority"`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(crate = "nostr_outbox_core::serde", default, deny_unknown_fields)]
pub struct NdkPriorityConfig {
    /// Relays per follow (also the per-author cap).
    pub per_author: usize,
}

impl Default for NdkPriorityConfig {
    fn default() -> Self {
        Self {
            per_author: DEFAULT_NDK_PER_AUTHOR,
        }
    }
}

nostr_outbox_core::register_strategy! {
    name: "ndk_priority",
    summary: "per follow up to N relays (NDK): already chosen relays first, then the most popular",
    impl StrategyConfig for NdkPriorityConfig {
        fn validate(&self) -> Vec<ConfigIssue> {
            ConfigIssue::unless_within("per_author", self.per_author, 64)
                .into_iter()
                .collect()
        }

        fn build(&self) -> Box<dyn Selector> {
            Box::new(NdkPriority {
                per_author: self.per_author.max(1),
            })
        }
    }
}

/// The `ndk_priority` strategy's selector.
#[derive(Clone, Copy, Debug)]
pub struct NdkPriority {
    per_author: usize,
}

impl Selector for NdkPriority {
    fn per_author_cap(&self) -> Option<usize> {
        Some(self.per_author)
    }

    fn select(&mut self, input: &PlanInput<'_>, _rng: &mut dyn RngCore) -> Selection {
        let table = input.table;
        // Global preference order: popularity, then URL.
        let order = by_popularity(table);
        let mut rank = vec![u32::MAX; table.relay_count()];
        for (i, r) in order.iter().enumerate() {
            rank[r.index()] = i as u32;
        }
        // Slot of each chosen relay in `assignments`.
        let mut slot: Vec<Option<usize>> = vec![None; table.relay_count()];
        let mut assignments: Vec<Assignment> = Vec::new();
        let mut candidates: Vec<RelayId> = Vec::new();
        for author in table.authors() {
            candidates.clear();
            candidates.extend_from_slice(table.write_relays(author));
            // Already chosen relays first (in the order they were chosen), then by popularity.
            candidates
                .sort_by_key(|r| (slot[r.index()].is_none(), slot[r.index()], rank[r.index()]));
            let mut taken = 0;
            for &relay in &candidates {
                if taken == self.per_author {
                    break;
                }
                let index = match slot[relay.index()] {
                    Some(i) => i,
                    None if assignments.len() < input.max_connections => {
                        assignments.push(Assignment {
                            relay,
                            authors: Vec::new(),
                        });
                        slot[relay.index()] = Some(assignments.len() - 1);
                        assignments.len() - 1
                    }
                    None => continue,
                };
                push_author(&mut assignments[index], author);
                taken += 1;
            }
        }
        Selection { assignments }
    }
}

fn push_author(a: &mut Assignment, author: AuthorId) {
    if a.authors.last() != Some(&author) {
        a.authors.push(author);
    }
}

//! `applesauce`: the relay selection of applesauce-core 6.2.0 as shipped (`selectOptimalRelays`,
//! used by its `OutboxModel`), bug included.
//!
//! The shipped loop: while relays are left and fewer than `maxConnections` are chosen, count for
//! every relay not yet chosen how many follows still in the pool list it, and choose the one
//! listed most (a stable sort, so ties go to the relay first seen walking the pool in follow
//! order and each list in its order). Each follow is then asked of every chosen relay it lists.
//!
//! The per-user cap is meant to take a follow out of the pool once `maxRelaysPerUser` of its
//! relays are chosen, but the shipped code stores the count *before* its post-increment
//! (`selectionCount.set(pubkey, count++)`), so the stored count never grows: a follow leaves the
//! pool on its first chosen relay when the cap is 1, and never otherwise. The cap is optional
//! and unset by default, so the pool never shrinks and the choice is simply the most-listed
//! relays, cut to the budget. Nothing caps how many chosen relays a follow is asked of.
//!
//! Not reproduced: the optional custom `score` callback (no default ships).

use nostr_outbox_core::serde::{Deserialize, Serialize};
use nostr_outbox_core::ConfigIssue;
use nostr_outbox_core::{Assignment, AuthorId, PlanInput, RelayId, Selection, Selector};
use rand::RngCore;

/// The largest `max_relays_per_user` accepted (any value above 1 behaves as no cap anyway).
const MAX_RELAYS_PER_USER: usize = 64;

/// `[strategy] type = "applesauce"`.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[serde(crate = "nostr_outbox_core::serde", deny_unknown_fields)]
pub struct ApplesauceConfig {
    /// applesauce's optional `maxRelaysPerUser`; unset as shipped. Because of the shipped
    /// counting bug only 1 has an effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_relays_per_user: Option<usize>,
}

nostr_outbox_core::register_strategy! {
    name: "applesauce",
    summary: "applesauce-core 6.2.0's selectOptimalRelays as shipped: the most-listed relays (its per-user cap never counts)",
    impl StrategyConfig for ApplesauceConfig {
        fn validate(&self) -> Vec<ConfigIssue> {
            match self.max_relays_per_user {
                Some(n) if !(1..=MAX_RELAYS_PER_USER).contains(&n) => vec![ConfigIssue::new(
                    "max_relays_per_user",
                    format!("must be between 1 and {MAX_RELAYS_PER_USER} (or left out for no cap), got {n}"),
                )],
                _ => Vec::new(),
            }
        }

        fn build(&self) -> Box<dyn Selector> {
            Box::new(Applesauce {
                max_relays_per_user: self.max_relays_per_user.filter(|&n| n > 0),
            })
        }
    }
}

/// The `applesauce` strategy's selector.
#[derive(Clone, Copy, Debug, Default)]
pub struct Applesauce {
    max_relays_per_user: Option<usize>,
}

impl Selector for Applesauce {
    fn per_author_cap(&self) -> Option<usize> {
        None
    }

    fn select(&mut self, input: &PlanInput<'_>, _rng: &mut dyn RngCore) -> Selection {
        let table = input.table;
        let mut pool: Vec<AuthorId> = table
            .authors()
            .filter(|&a| !table.write_relays(a).is_empty())
            .collect();
        let mut chosen: Vec<RelayId> = Vec::new();
        let mut is_chosen = vec![false; table.relay_count()];
        // What the shipped code keeps per follow: always the value before the increment.
        let mut stored_count = vec![0usize; table.follow_count()];
        // Pool follows listing each relay, and the relays in the order first seen.
        let mut coverage = vec![0u32; table.relay_count()];
        let mut seen: Vec<RelayId> = Vec::new();

        while !pool.is_empty() && chosen.len() < input.max_connections {
            for &relay in &seen {
                coverage[relay.index()] = 0;
            }
            seen.clear();
            for &author in &pool {
                for &relay in table.write_relays(author) {
                    if is_chosen[relay.index()] {
                        continue;
                    }
                    if coverage[relay.index()] == 0 {
                        seen.push(relay);
                    }
                    coverage[relay.index()] += 1;
                }
            }
            // The first relay seen among those listed most (what a stable sort puts first).
            let Some(best) = seen.iter().copied().reduce(|best, relay| {
                if coverage[relay.index()] > coverage[best.index()] {
                    relay
                } else {
                    best
                }
            }) else {
                break;
            };
            chosen.push(best);
            is_chosen[best.index()] = true;
            if let Some(cap) = self.max_relays_per_user {
                pool.retain(|&author| {
                    if !table.writes_to(author, best) {
                        return true;
                    }
                    let count = stored_count[author.index()];
                    // Shipped: `selectionCount.set(pubkey, count++)` stores the old value,
                    // then compares the incremented local with the cap.
                    stored_count[author.index()] = count;
                    count + 1 < cap
                });
            }
        }

        let assignments = chosen
            .into_iter()
            .map(|relay| Assignment {
                relay,
                authors: table.writers(relay).to_vec(),
            })
            .collect();
        Selection { assignments }
    }
}

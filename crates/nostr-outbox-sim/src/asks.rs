//! A plan in world terms (which relay is asked about which follows): what every metric is
//! computed from, whether the plan was made here or read from a plan file.

use nostr_outbox_core::{Plan, RouteTable};

use crate::sim_world::SimWorld;

/// One connection of a plan in world terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ask {
    /// The relay URL as planned.
    pub url: String,
    /// The world relay, if the URL is one (otherwise it never answers).
    pub relay: Option<u32>,
    /// Follows named in the filter (indices into
    /// [`World::follows`](nostr_outbox_world::World::follows)), sorted.
    pub authors: Vec<u32>,
}

/// A plan in world terms: what every metric is computed from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Asks {
    /// One entry per connection.
    pub entries: Vec<Ask>,
    /// Follows no routed relay covered before the residual, when known (plans made here).
    pub orphans: Option<usize>,
    /// Authors named in a plan file that are not follows (ignored for recall, counted in
    /// disclosure).
    pub foreign_authors: usize,
}

impl Asks {
    /// The asks of a plan made on another table of the same world (same follows, e.g. with
    /// some relays set aside): relays are matched by URL.
    pub fn from_table_plan(sim: &SimWorld, table: &RouteTable, plan: &Plan) -> Self {
        let entries = plan
            .entries(table)
            .into_iter()
            .map(|e| Ask {
                url: table.url(e.relay).to_string(),
                relay: sim.world.relay_id(table.url(e.relay)),
                authors: e.authors.iter().map(|a| a.0).collect(),
            })
            .collect();
        Self {
            entries,
            orphans: Some(plan.residual().len()),
            foreign_authors: 0,
        }
    }

    /// Adds `later`'s asks: a relay asked in both is asked about both author sets; the
    /// orphans are the later plan's.
    pub fn merge(&mut self, later: Asks) {
        for ask in later.entries {
            match self.entries.iter_mut().find(|a| a.url == ask.url) {
                Some(known) => {
                    known.authors.extend(ask.authors);
                    known.authors.sort_unstable();
                    known.authors.dedup();
                }
                None => self.entries.push(ask),
            }
        }
        self.orphans = later.orphans;
        self.foreign_authors += later.foreign_authors;
    }

    /// The asks of a plan made from `sim.table`.
    pub fn from_plan(sim: &SimWorld, plan: &Plan) -> Self {
        Self::from_table_plan(sim, &sim.table, plan)
    }
}

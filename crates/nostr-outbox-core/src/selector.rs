//! Which relays to ask about whom: the [`Selector`] trait and its input and output.

use std::fmt::Debug;

use rand::RngCore;

use crate::ids::{AuthorId, RelayId};
use crate::issue::ConfigIssue;
use crate::route_table::RouteTable;
use crate::stats::DeliveryStats;

/// Everything a selector may look at in one planning run.
#[derive(Clone, Copy, Debug)]
pub struct PlanInput<'a> {
    /// Who writes where.
    pub table: &'a RouteTable,
    /// The most routed relays the selection may use beyond the reader's pool (see
    /// [`in_pool`](Self::in_pool)).
    pub max_connections: usize,
    /// How many of the reader's relays carry the residual (`None`: all of them).
    pub pool: Option<usize>,
    /// What was learned about relays so far (uniform priors when nothing is known).
    pub stats: &'a DeliveryStats,
    /// The present, in unix seconds (for decaying what was learned).
    pub now: u64,
    /// How far back the fetch asks (its `since`, as seconds before `now`), when known: a
    /// strategy may plan for exactly the notes that will be asked for. `None`: any age.
    pub window_secs: Option<u64>,
}

impl<'a> PlanInput<'a> {
    /// An input for `max_connections` routed relays at `now`, every reader relay carrying the
    /// residual and no bound on the notes' age.
    pub fn new(
        table: &'a RouteTable,
        max_connections: usize,
        stats: &'a DeliveryStats,
        now: u64,
    ) -> Self {
        Self {
            table,
            max_connections,
            pool: None,
            stats,
            now,
            window_secs: None,
        }
    }

    /// Whether `relay` is one of the reader's relays that carry the residual: connected anyway,
    /// so routing follows to it costs none of `max_connections`.
    pub fn in_pool(&self, relay: RelayId) -> bool {
        // Most relays are not the reader's: no scan of the pool for them.
        self.table.is_reader_relay(relay) && self.table.pool(self.pool).contains(&relay)
    }
}

/// One routed relay and the follows it is asked about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    /// The relay.
    pub relay: RelayId,
    /// The follows asked of it; each must write there.
    pub authors: Vec<AuthorId>,
}

/// A selector's answer: routed relays and who is asked of each. Follows that no assignment
/// names become the residual of the plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// The routed relays, in the order the selector chose them.
    pub assignments: Vec<Assignment>,
}

impl Selection {
    /// The selection of the follows `given` each relay of `table` (indexed by relay id): the
    /// relays given the most follows first (ties by URL), at most `budget` of them, each asked
    /// about the follows given it.
    pub fn busiest_first(
        table: &RouteTable,
        mut given: Vec<Vec<AuthorId>>,
        budget: usize,
    ) -> Selection {
        let mut relays: Vec<RelayId> = table
            .relays()
            .filter(|r| !given[r.index()].is_empty())
            .collect();
        relays.sort_by(|&a, &b| {
            given[b.index()]
                .len()
                .cmp(&given[a.index()].len())
                .then_with(|| table.url(a).cmp(table.url(b)))
        });
        relays.truncate(budget);
        let assignments = relays
            .into_iter()
            .map(|relay| Assignment {
                relay,
                authors: std::mem::take(&mut given[relay.index()]),
            })
            .collect();
        Selection { assignments }
    }
}

/// Turns a route table, a budget and (usually) a scorer into a [`Selection`]: what a strategy's
/// config builds ([`StrategyConfig::build`]), one per router.
///
/// Synchronous and object-safe. Randomness comes only from the `rng` passed in, so a
/// (seed, input) pair always gives the same selection. Selectors may keep state across runs
/// (hysteresis does); `&mut self` allows it.
///
/// A selector has no name of its own: plans carry the label of the strategy that built it
/// ([`StrategyConfig::label`]), which starts with the name it is registered under.
pub trait Selector: Debug + Send {
    /// The most routed relays any one follow may be assigned, if the selector promises a cap.
    fn per_author_cap(&self) -> Option<usize>;

    /// Chooses routed relays and their authors.
    fn select(&mut self, input: &PlanInput<'_>, rng: &mut dyn RngCore) -> Selection;

    /// Whether plans depend on [`PlanInput::window_secs`]. A selector that says so plans from
    /// its input alone, remembering nothing of earlier plans, so a client may plan one moment
    /// for several windows (a week's feed and a year's history) without disturbing it.
    fn reads_window(&self) -> bool {
        false
    }

    /// Whether plans depend on learned delivery ([`PlanInput::stats`]): only then is a session
    /// worth probing for ([`crate::probe`]).
    fn learns(&self) -> bool {
        false
    }
}

/// A strategy's config: picked by `type` in the `[strategy]` table of a router config, it
/// builds the strategy's [`Selector`]. Implemented inside
/// [`register_strategy!`](crate::register_strategy), which registers the type under its name
/// and writes [`name`](Self::name).
#[typetag::serde(tag = "type")]
pub trait StrategyConfig: Debug + Send + Sync {
    /// The name the strategy is registered under (its `type` in config). Written by
    /// [`register_strategy!`](crate::register_strategy), never by hand.
    fn name(&self) -> &'static str;

    /// What plans, traces, reports and plan files call this strategy: its registered
    /// [`name`](Self::name), with any non-default scorer or inner strategy appended
    /// (`greedy+fixed_thompson`, `hysteresis+greedy`). The default is the name alone.
    fn label(&self) -> String {
        self.name().to_string()
    }

    /// Checks parameters; every problem names its key relative to the strategy table.
    fn validate(&self) -> Vec<ConfigIssue> {
        Vec::new()
    }

    /// The runtime strategy.
    fn build(&self) -> Box<dyn Selector>;
}

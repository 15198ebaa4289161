//! The router: a configured strategy that turns a route table into checked plans.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::config::{ConfigError, RouterConfig};
use crate::invariants::{check_plan, Limits};
use crate::plan::Plan;
use crate::route_table::RouteTable;
use crate::selector::{PlanInput, Selector};
use crate::stats::DeliveryStats;

/// A strategy with its budget: the thing a client embeds.
#[derive(Debug)]
pub struct Router {
    selector: Box<dyn Selector>,
    max_connections: usize,
    pool: Option<usize>,
}

impl Router {
    /// A router for a selector and budget.
    pub fn new(selector: Box<dyn Selector>, max_connections: usize) -> Self {
        Self {
            selector,
            max_connections,
            pool: None,
        }
    }

    /// The same router with the residual carried by at most `pool` of the reader's relays (the
    /// first ones, in the reader's order; at least one); `None` means all of them.
    pub fn with_pool(mut self, pool: Option<usize>) -> Self {
        self.pool = pool;
        self
    }

    /// A router from a parsed config.
    pub fn from_config(config: &RouterConfig) -> Self {
        Self::new(config.strategy.build(), config.max_connections).with_pool(config.pool)
    }

    /// A router from TOML (see [`RouterConfig`]).
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        RouterConfig::from_toml(text).map(|c| Self::from_config(&c))
    }

    /// The strategy's name.
    pub fn strategy(&self) -> &str {
        self.selector.name()
    }

    /// The routed-relay budget.
    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// How many reader relays may carry the residual (`None`: all of them).
    pub fn pool(&self) -> Option<usize> {
        self.pool
    }

    /// The limits plans from this router must respect.
    pub fn limits(&self) -> Limits {
        Limits {
            max_connections: self.max_connections,
            per_author_cap: self.selector.per_author_cap(),
        }
    }

    /// Plans with no learned stats at time 0 (stateless strategies need nothing more).
    pub fn plan(&mut self, table: &RouteTable, seed: u64) -> Plan {
        self.plan_with(table, &DeliveryStats::new(), 0, seed)
    }

    /// Plans with learned `stats` at time `now`; the same (seed, input) always gives the same
    /// plan. In debug builds every invariant is checked and a violation panics, since it is a
    /// bug in the strategy.
    pub fn plan_with(
        &mut self,
        table: &RouteTable,
        stats: &DeliveryStats,
        now: u64,
        seed: u64,
    ) -> Plan {
        let input = PlanInput {
            table,
            max_connections: self.max_connections,
            stats,
            now,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let selection = self.selector.select(&input, &mut rng);
        let mut plan = Plan::from_selection(table, self.selector.name(), selection);
        if let Some(pool) = self.pool {
            plan = plan.with_pool_limit(pool);
        }
        if cfg!(debug_assertions) && !table.reader_relays().is_empty() {
            let violations = check_plan(&plan, table, self.limits());
            assert!(
                violations.is_empty(),
                "strategy `{}` broke plan invariants: {violations:?}",
                self.selector.name()
            );
        }
        plan
    }

    /// The selector, for strategies with extra state to inspect.
    pub fn selector_mut(&mut self) -> &mut dyn Selector {
        self.selector.as_mut()
    }
}

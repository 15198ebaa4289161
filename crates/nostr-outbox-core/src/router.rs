//! The router: a configured strategy that turns a route table into checked plans.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::config::RouterConfig;
use crate::invariants::{check_plan, Limits, Violation};
use crate::issue::ConfigError;
use crate::plan::Plan;
use crate::route_table::{RouteTable, RouteTableBuilder};
use crate::selector::{PlanInput, Selector, StrategyConfig};
use crate::stats::DeliveryStats;
use crate::url_policy::UrlPolicy;

/// When, for which notes and with which draws a plan is made: named, so the clock and the seed
/// cannot be swapped. `PlanContext::at(now).seed(seed).window(secs)`; the default is time 0,
/// seed 0, any age.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanContext {
    /// Unix seconds: what learned stats decay to.
    pub now: u64,
    /// The planning seed; see [`session_seed`] for one per run.
    pub seed: u64,
    /// How far back the fetch asks, seconds (see [`PlanInput::window_secs`]).
    pub window_secs: Option<u64>,
}

impl PlanContext {
    /// A context at `now` (unix seconds) with seed 0.
    pub fn at(now: u64) -> Self {
        Self {
            now,
            seed: 0,
            window_secs: None,
        }
    }

    /// The same context with `seed`.
    pub fn seed(self, seed: u64) -> Self {
        Self { seed, ..self }
    }

    /// The same context for a fetch that asks for notes up to `secs` old.
    pub fn window(self, secs: u64) -> Self {
        Self {
            window_secs: Some(secs),
            ..self
        }
    }
}

/// A strategy with its budget: the thing a client embeds.
#[derive(Debug)]
pub struct Router {
    selector: Box<dyn Selector>,
    /// The strategy's label ([`StrategyConfig::label`]), carried by every plan.
    label: String,
    max_connections: usize,
    pool: Option<usize>,
    probe_connections: usize,
    policy: UrlPolicy,
    hints: bool,
}

impl Router {
    /// A router for a strategy and budget: it plans with the strategy's selector, and its plans
    /// carry the strategy's label, named as registered.
    pub fn new(strategy: &dyn StrategyConfig, max_connections: usize) -> Self {
        Self::with_selector(strategy.label(), strategy.build(), max_connections)
    }

    /// A router for a selector no strategy registration built (tests, experiments), its plans
    /// carrying `label`.
    pub fn with_selector(
        label: impl Into<String>,
        selector: Box<dyn Selector>,
        max_connections: usize,
    ) -> Self {
        Self {
            selector,
            label: label.into(),
            max_connections,
            pool: None,
            probe_connections: 0,
            policy: UrlPolicy::default(),
            hints: false,
        }
    }

    /// The same router with relay hints given to its route tables or not
    /// ([`RouterConfig::hints`]).
    pub fn with_hints(mut self, hints: bool) -> Self {
        self.hints = hints;
        self
    }

    /// Whether the client gives this router's route tables the relay hints it knows
    /// ([`crate::hints`]): kind:3 and pointer hints, and where notes were seen.
    pub fn hints(&self) -> bool {
        self.hints
    }

    /// The same router probing up to `connections` relays per session after the fetch
    /// ([`crate::probe`]); 0 never probes.
    pub fn with_probes(mut self, connections: usize) -> Self {
        self.probe_connections = connections.min(crate::probe::MAX_PROBE_CONNECTIONS);
        self
    }

    /// What a session may probe: the configured probe connections when the strategy learns from
    /// delivery ([`Selector::learns`]), none otherwise (its plans would not change).
    pub fn probe_budget(&self) -> crate::ProbeBudget {
        let connections = if self.selector.learns() {
            self.probe_connections
        } else {
            0
        };
        crate::ProbeBudget::new(connections)
    }

    /// The same router with the URL policy its route tables filter with.
    pub fn with_policy(mut self, policy: UrlPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// A route-table builder under this router's URL policy, so a table and the router that
    /// plans over it never disagree about which relays are acceptable.
    pub fn table(&self) -> RouteTableBuilder {
        RouteTableBuilder::new(self.policy.clone())
    }

    /// The URL policy route tables are built with.
    pub fn policy(&self) -> &UrlPolicy {
        &self.policy
    }

    /// The same router with a routed-relay budget of `max_connections`: for a client that
    /// holds fewer sockets than the strategy's budget would use.
    pub fn with_max_connections(mut self, max_connections: usize) -> Self {
        self.max_connections = max_connections;
        self
    }

    /// The same router with the residual carried by at most `pool` of the reader's relays (the
    /// first ones, in the reader's order; at least one); `None` means all of them.
    pub fn with_pool(mut self, pool: Option<usize>) -> Self {
        self.pool = pool;
        self
    }

    /// A router from a parsed config.
    pub fn from_config(config: &RouterConfig) -> Self {
        Self::new(&*config.strategy, config.max_connections)
            .with_pool(config.pool)
            .with_probes(
                config
                    .probe_connections
                    .unwrap_or_else(|| crate::default_probes(config.max_connections)),
            )
            .with_policy(config.url_policy.clone())
            .with_hints(config.hints)
    }

    /// A router from TOML (see [`RouterConfig`]).
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        RouterConfig::from_toml(text).map(|c| Self::from_config(&c))
    }

    /// The strategy's label ([`StrategyConfig::label`]): its registered name, with any
    /// non-default scorer or inner strategy appended.
    pub fn strategy(&self) -> &str {
        &self.label
    }

    /// Whether plans depend on the fetch's window ([`Selector::reads_window`]): if not, one
    /// plan serves every window.
    pub fn reads_window(&self) -> bool {
        self.selector.reads_window()
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
            pool: self.pool,
            per_author_cap: self.selector.per_author_cap(),
        }
    }

    /// Plans with no learned stats at time 0 (stateless strategies need nothing more).
    pub fn plan(&mut self, table: &RouteTable, seed: u64) -> Plan {
        self.plan_with(table, &DeliveryStats::new(), PlanContext::at(0).seed(seed))
    }

    /// Plans with learned `stats` at `ctx`'s time and seed; the same (seed, input) always gives
    /// the same plan. Every invariant is checked; in debug builds a violation panics, since it is a bug
    /// (in the strategy, or a table with nobody to carry the residual). Release builds return
    /// the plan as made: callers that send plans to relays use
    /// [`try_plan_with`](Self::try_plan_with) and never apply a broken one.
    pub fn plan_with(
        &mut self,
        table: &RouteTable,
        stats: &DeliveryStats,
        ctx: PlanContext,
    ) -> Plan {
        match self.try_plan_with(table, stats, ctx) {
            Ok(plan) => plan,
            Err(broken) => {
                if cfg!(debug_assertions) {
                    panic!("{broken}");
                }
                *broken.plan
            }
        }
    }

    /// Like [`plan_with`](Self::plan_with), but a plan that breaks an invariant is returned as
    /// an error with every violation, in every build, and never panics.
    pub fn try_plan_with(
        &mut self,
        table: &RouteTable,
        stats: &DeliveryStats,
        ctx: PlanContext,
    ) -> Result<Plan, BrokenPlan> {
        let input = PlanInput {
            table,
            max_connections: self.max_connections,
            pool: self.pool,
            stats,
            now: ctx.now,
            window_secs: ctx.window_secs,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(ctx.seed);
        let selection = {
            let _span = tracing::debug_span!("select", strategy = %self.label).entered();
            self.selector.select(&input, &mut rng)
        };
        let mut plan = Plan::from_selection(table, &self.label, selection);
        if let Some(pool) = self.pool {
            plan = plan.with_pool_limit(pool);
        }
        let violations = check_plan(&plan, table, self.limits());
        if violations.is_empty() {
            Ok(plan)
        } else {
            Err(BrokenPlan {
                strategy: self.label.clone(),
                violations,
                plan: Box::new(plan),
            })
        }
    }

    /// The selector, for strategies with extra state to inspect.
    pub fn selector_mut(&mut self) -> &mut dyn Selector {
        self.selector.as_mut()
    }
}

/// The planning seed of session number `session` (0-based) from a base seed: every session
/// draws differently, and the same (base, session) always draws the same. The runtime plans
/// with `session_seed(base, runs so far)` from its persisted stats, so exploration continues
/// across runs; the simulator's session loop uses the same function.
pub fn session_seed(base: u64, session: u64) -> u64 {
    base.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(session.wrapping_mul(0x2545_f491_4f6c_dd1d))
}

/// A plan that broke its invariants: never to be sent to relays.
#[derive(Clone, Debug)]
pub struct BrokenPlan {
    /// The strategy that made it.
    pub strategy: String,
    /// Every violation found.
    pub violations: Vec<Violation>,
    /// The plan itself, for diagnosis.
    pub plan: Box<Plan>,
}

impl std::fmt::Display for BrokenPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "strategy `{}` made a plan that breaks {} invariant(s)",
            self.strategy,
            self.violations.len()
        )?;
        for v in self.violations.iter().take(5) {
            write!(f, "; {v}")?;
        }
        if self.violations.len() > 5 {
            write!(f, "; …")?;
        }
        Ok(())
    }
}

impl std::error::Error for BrokenPlan {}

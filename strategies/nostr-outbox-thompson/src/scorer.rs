//! The `thompson` and `fixed_thompson` scorers.

use nostr_outbox_core::serde::{Deserialize, Serialize};
use nostr_outbox_core::{PlanInput, RelayId, RelayStats, RelayView, Scorer};
use rand::RngCore;

use nostr_outbox_kit::{draw_or_uniform, popularity_weight};

/// Options shared by both Thompson scorers (the keys of their `[strategy.scorer]` tables).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThompsonOptions {
    /// Multiply by `1 + ln popularity` (welshman's weight). Off by default because `stochastic`
    /// already applies it; turn it on with `per_author` or `greedy`.
    pub popularity_weight: bool,
    /// Multiply by `1 / (1 + latency_ms / 1000)` when a latency estimate is known.
    pub latency_discount: bool,
}

impl Default for ThompsonOptions {
    fn default() -> Self {
        Self {
            popularity_weight: false,
            latency_discount: true,
        }
    }
}

/// What both scorers share: the priors snapshot of the current run and the multipliers.
#[derive(Debug, Default)]
struct Priors {
    options: ThompsonOptions,
    /// Decayed stats per relay id of the table being planned, taken in `prepare`.
    stats: Vec<RelayStats>,
}

impl Priors {
    fn prepare(&mut self, input: &PlanInput<'_>) {
        let table = input.table;
        self.stats.clear();
        self.stats.extend(
            table
                .relays()
                .map(|r| input.stats.get_at(table.url(r), input.now)),
        );
    }

    /// The relay's prior; the uniform prior for a relay not in the prepared table.
    fn get(&self, relay: RelayId) -> RelayStats {
        self.stats.get(relay.index()).copied().unwrap_or_default()
    }

    fn draw(&self, view: &RelayView<'_>, rng: &mut dyn RngCore) -> f64 {
        let s = self.get(view.relay);
        draw_or_uniform(s.alpha, s.beta, view.url, rng)
    }

    /// Coverage times the optional popularity weight and latency discount.
    fn multiplier(&self, view: &RelayView<'_>) -> f64 {
        let mut m = f64::from(view.coverage);
        if self.options.popularity_weight {
            m *= popularity_weight(view.popularity);
        }
        if self.options.latency_discount {
            if let Some(ms) = self.get(view.relay).latency_ms {
                m /= 1.0 + ms.max(0.0) / 1000.0;
            }
        }
        m
    }
}

/// `thompson`: `draw · multiplier`, a fresh Beta(α, β) draw per call.
#[derive(Debug, Default)]
pub struct Thompson {
    priors: Priors,
}

impl Thompson {
    /// A Thompson scorer with these options.
    pub fn new(options: ThompsonOptions) -> Self {
        Self {
            priors: Priors {
                options,
                stats: Vec::new(),
            },
        }
    }
}

impl Scorer for Thompson {
    fn name(&self) -> &str {
        "thompson"
    }

    fn prepare(&mut self, input: &PlanInput<'_>, _rng: &mut dyn RngCore) {
        self.priors.prepare(input);
    }

    fn score(&mut self, relay: RelayView<'_>, rng: &mut dyn RngCore) -> f64 {
        self.priors.draw(&relay, rng) * self.priors.multiplier(&relay)
    }

    /// Every call is a new draw.
    fn supports_lazy_greedy(&self) -> bool {
        false
    }

    fn learns(&self) -> bool {
        true
    }
}

/// `fixed_thompson`: one Beta draw per relay per planning run, taken the first time the relay
/// is scored (lazily, so relays first seen mid-run are covered too) and reused for every later
/// call; the score is `draw · multiplier`, monotone in coverage and stable within the run.
#[derive(Debug, Default)]
pub struct FixedThompson {
    priors: Priors,
    /// The run's draw per relay id, `None` until first scored.
    draws: Vec<Option<f64>>,
}

impl FixedThompson {
    /// A fixed Thompson scorer with these options.
    pub fn new(options: ThompsonOptions) -> Self {
        Self {
            priors: Priors {
                options,
                stats: Vec::new(),
            },
            draws: Vec::new(),
        }
    }

    /// The draw cached for a relay in the current run, if it was scored.
    pub fn cached(&self, relay: RelayId) -> Option<f64> {
        self.draws.get(relay.index()).copied().flatten()
    }
}

impl Scorer for FixedThompson {
    fn name(&self) -> &str {
        "fixed_thompson"
    }

    fn learns(&self) -> bool {
        true
    }

    /// Forgets the previous run's draws; draws nothing yet.
    fn prepare(&mut self, input: &PlanInput<'_>, _rng: &mut dyn RngCore) {
        self.priors.prepare(input);
        self.draws.clear();
        self.draws.resize(input.table.relay_count(), None);
    }

    fn score(&mut self, relay: RelayView<'_>, rng: &mut dyn RngCore) -> f64 {
        let i = relay.relay.index();
        if i >= self.draws.len() {
            self.draws.resize(i + 1, None);
        }
        let draw = match self.draws[i] {
            Some(d) => d,
            None => {
                let d = self.priors.draw(&relay, rng);
                self.draws[i] = Some(d);
                d
            }
        };
        draw * self.priors.multiplier(&relay)
    }
}

/// A scorer config of the two Thompson options, registered as `$name` and building `$scorer`:
/// one definition, so the fresh and the fixed scorer read their options alike.
macro_rules! thompson_config {
    ($(#[$doc:meta])* $config:ident, $name:literal, $summary:literal, $scorer:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Serialize, Deserialize)]
        #[serde(crate = "nostr_outbox_core::serde", deny_unknown_fields)]
        pub struct $config {
            /// Multiply by `1 + ln popularity` (see [`ThompsonOptions::popularity_weight`]).
            #[serde(default)]
            pub popularity_weight: bool,
            /// Multiply by `1 / (1 + latency_ms / 1000)` when a latency is known.
            #[serde(default = "yes")]
            pub latency_discount: bool,
        }

        impl $config {
            /// The scorer options this config asks for.
            pub fn options(&self) -> ThompsonOptions {
                ThompsonOptions {
                    popularity_weight: self.popularity_weight,
                    latency_discount: self.latency_discount,
                }
            }
        }

        impl Default for $config {
            fn default() -> Self {
                let o = ThompsonOptions::default();
                Self {
                    popularity_weight: o.popularity_weight,
                    latency_discount: o.latency_discount,
                }
            }
        }

        nostr_outbox_core::register_scorer! {
            name: $name,
            summary: $summary,
            impl ScorerConfig for $config {
                fn build(&self) -> Box<dyn Scorer> {
                    Box::new($scorer::new(self.options()))
                }
            }
        }
    };
}

thompson_config!(
    /// `[strategy.scorer] type = "thompson"`.
    ThompsonConfig,
    "thompson",
    "coverage · Beta(α, β) draw from learned delivery priors, fresh per call",
    Thompson
);

thompson_config!(
    /// `[strategy.scorer] type = "fixed_thompson"`.
    FixedThompsonConfig,
    "fixed_thompson",
    "coverage · one Beta(α, β) draw per relay per run (stable inside greedy)",
    FixedThompson
);

fn yes() -> bool {
    true
}

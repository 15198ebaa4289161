//! How good a relay is: the [`Scorer`] trait and the default coverage scorer.

use std::fmt::Debug;

use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::ids::RelayId;
use crate::issue::ConfigIssue;
use crate::selector::PlanInput;

/// What a scorer is told about one relay at one moment of a planning run.
#[derive(Clone, Copy, Debug)]
pub struct RelayView<'a> {
    /// The relay.
    pub relay: RelayId,
    /// Its canonical URL.
    pub url: &'a str,
    /// How many follows write there.
    pub popularity: u32,
    /// How many follows choosing this relay now would serve (the selector's current gain).
    pub coverage: u32,
}

/// Scores relays for a selector. Higher is better; `0` or less means "not worth a connection".
///
/// Scorers are synchronous and object-safe. Selectors call [`Scorer::prepare`] once per planning
/// run, then [`Scorer::score`] as often as they need. A scorer whose score for a relay can change
/// between calls with the same `coverage` (a fresh random draw per call) must say so in
/// [`Scorer::supports_lazy_greedy`]: lazy selectors refuse such a scorer when their config is validated,
/// since a cached score no longer bounds the next one.
pub trait Scorer: Debug + Send {
    /// The registered name (for traces and reports).
    fn name(&self) -> &str;

    /// Called once at the start of every planning run, before any `score` call.
    fn prepare(&mut self, input: &PlanInput<'_>, rng: &mut dyn RngCore) {
        let _ = (input, rng);
    }

    /// The relay's score.
    fn score(&mut self, relay: RelayView<'_>, rng: &mut dyn RngCore) -> f64;

    /// Whether lazy greedy evaluation may use this scorer: `score` is a pure, non-decreasing
    /// function of `coverage` for a given relay within one run, so a cached score bounds the
    /// next. A scorer that draws anew on every call says `false`.
    fn supports_lazy_greedy(&self) -> bool {
        true
    }

    /// Whether scores depend on learned delivery ([`PlanInput::stats`]); a selector using
    /// this scorer says so in [`Selector::learns`](crate::Selector::learns).
    fn learns(&self) -> bool {
        false
    }
}

/// Builds a [`Scorer`]; picked by `type` in a `[strategy.scorer]` table. Implemented inside
/// [`register_scorer!`](crate::register_scorer), which registers the type under its name.
#[typetag::serde(tag = "type")]
pub trait ScorerConfig: Debug + Send + Sync {
    /// Checks parameters; every problem names its key relative to the scorer table.
    fn validate(&self) -> Vec<ConfigIssue> {
        Vec::new()
    }

    /// The runtime scorer.
    fn build(&self) -> Box<dyn Scorer>;
}

/// Scores a relay by how many follows it would serve now: plain set cover.
#[derive(Clone, Copy, Debug, Default)]
pub struct CoverageScorer;

impl Scorer for CoverageScorer {
    fn name(&self) -> &str {
        "coverage"
    }

    fn score(&mut self, relay: RelayView<'_>, _rng: &mut dyn RngCore) -> f64 {
        f64::from(relay.coverage)
    }
}

/// Config for [`CoverageScorer`] (`type = "coverage"`); the default scorer.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoverageScorerConfig {}

crate::register_scorer! {
    name: "coverage",
    summary: "score = follows the relay would serve now (plain set cover)",
    impl ScorerConfig for CoverageScorerConfig {
        fn build(&self) -> Box<dyn Scorer> {
            Box::new(CoverageScorer)
        }
    }
}

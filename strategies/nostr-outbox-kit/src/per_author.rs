//! The machinery shared by per-author strategies: one generic selector ([`PerAuthorSelector`]),
//! the ranking by per-relay score, the budget rule ([`select`]) and the config checks.
//!
//! The `stochastic` and `filter_decomposition` strategies (`nostr-outbox-stochastic`) and the
//! `per_author` strategy (`nostr-outbox-thompson`) differ only in their registration, their default scorer
//! (none means list order) and whether draws are multiplied by the popularity weight; each is a
//! [`PerAuthorKind`] marker, so they cannot drift apart.

use std::marker::PhantomData;

use nostr_outbox_core::serde::{Deserialize, Serialize};
use nostr_outbox_core::ConfigIssue;
use nostr_outbox_core::{
    Assignment, AuthorId, PlanInput, RelayId, RelayView, RouteTable, Scorer, ScorerConfig,
    Selection, Selector,
};
use rand::RngCore;

use crate::popularity_weight;

/// The default number of relays each follow keeps.
pub const DEFAULT_PER_AUTHOR: usize = 3;

/// The largest `per_author` a config may ask for (lists are capped well below this anyway).
pub const MAX_PER_AUTHOR: usize = 64;

/// [`DEFAULT_PER_AUTHOR`] as a function, for `#[serde(default = ...)]` on `per_author` keys.
pub fn default_per_author() -> usize {
    DEFAULT_PER_AUTHOR
}

/// Checks a `per_author` value, naming the key.
pub fn validate_per_author(n: usize) -> Option<ConfigIssue> {
    ConfigIssue::unless_within("per_author", n, MAX_PER_AUTHOR)
}

/// Checks the two keys every per-author config has: `per_author` and the optional
/// `[strategy.scorer]` table (its issues are named under `scorer`).
pub fn validate_config(per_author: usize, scorer: Option<&dyn ScorerConfig>) -> Vec<ConfigIssue> {
    let mut issues: Vec<ConfigIssue> = validate_per_author(per_author).into_iter().collect();
    if let Some(scorer) = scorer {
        issues.extend(scorer.validate().into_iter().map(|i| i.under("scorer")));
    }
    issues
}

/// The label of a per-author strategy registered as `name` (what
/// [`StrategyConfig::label`](nostr_outbox_core::StrategyConfig::label) returns): the name, with the
/// scorer appended unless it is the kind's default (`stochastic+thompson`).
pub fn label<K: PerAuthorKind>(name: &str, scorer: Option<&dyn ScorerConfig>) -> String {
    let default = K::default_scorer();
    match (scorer.map(|c| c.build()), default) {
        (Some(s), Some(d)) if s.name() == d.name() => name.to_string(),
        (Some(s), _) => format!("{name}+{}", s.name()),
        (None, _) => name.to_string(),
    }
}

/// What sets one per-author strategy apart from another. Implemented by zero-sized markers;
/// the selector for a kind is [`PerAuthorSelector<Kind>`].
pub trait PerAuthorKind: std::fmt::Debug + 'static {
    /// Whether each draw is multiplied by [`popularity_weight`] (welshman's rule), so popular
    /// relays are favoured on top of whatever the scorer says.
    const POPULARITY_WEIGHT: bool;

    /// The scorer used when the config names none; `None` ranks each list in its own order.
    fn default_scorer() -> Option<Box<dyn Scorer>>;
}

/// How a per-author selector draws and applies the connection budget.
///
/// The published benchmark's per-author algorithms differ from a client's in two ways that
/// matter to its numbers: they draw a fresh factor for every (follow, relay) pair, and their
/// connection cap keeps the relays with the most picks and drops every other pick. `Study`
/// reproduces both, so the benchmark's figures can be checked like for like; `Client` (the
/// default) is what a client does (see [`select`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(crate = "nostr_outbox_core::serde", rename_all = "snake_case")]
pub enum Rules {
    /// One draw per relay per run; a follow whose picks fell to the cap moves to kept relays
    /// it writes to.
    #[default]
    Client,
    /// A draw per (follow, relay); picks on relays the cap drops are lost, and a follow left
    /// with none goes to the residual.
    Study,
}

impl Rules {
    /// Whether these are the default rules (for `skip_serializing_if`).
    pub fn is_client(&self) -> bool {
        *self == Rules::Client
    }
}

/// A per-author selector: every follow keeps its top `per_author` write relays, then the
/// budget is applied by [`select`].
///
/// With a scorer, every relay someone writes to is scored exactly once per run (in relay-id
/// order, `coverage = 1` since a pick serves one follow, times the popularity weight if the
/// kind asks for it) and each follow ranks its write relays by that score, ties by URL.
/// Without one, each follow takes its list in list order and no randomness is used.
#[derive(Debug)]
pub struct PerAuthorSelector<K> {
    per_author: usize,
    scorer: Option<Box<dyn Scorer>>,
    /// The run's score per relay id, reused across runs to avoid reallocating.
    scores: Vec<f64>,
    rules: Rules,
    kind: PhantomData<fn() -> K>,
}

impl<K: PerAuthorKind> PerAuthorSelector<K> {
    /// Keeps `per_author` relays per follow (at least 1), ranked by `scorer`, or by the kind's
    /// default scorer when `None`.
    pub fn new(per_author: usize, scorer: Option<Box<dyn Scorer>>) -> Self {
        Self {
            per_author: per_author.max(1),
            scorer: scorer.or_else(K::default_scorer),
            scores: Vec::new(),
            rules: Rules::Client,
            kind: PhantomData,
        }
    }

    /// The same selector under `rules`.
    pub fn with_rules(mut self, rules: Rules) -> Self {
        self.rules = rules;
        self
    }

    /// The selector a config with these keys describes.
    pub fn from_config(per_author: usize, scorer: Option<&dyn ScorerConfig>) -> Self {
        Self::new(per_author, scorer.map(|c| c.build()))
    }
}

impl<K: PerAuthorKind> Selector for PerAuthorSelector<K> {
    fn per_author_cap(&self) -> Option<usize> {
        Some(self.per_author)
    }

    fn learns(&self) -> bool {
        self.scorer.as_ref().is_some_and(|s| s.learns())
    }

    fn select(&mut self, input: &PlanInput<'_>, rng: &mut dyn RngCore) -> Selection {
        let table = input.table;
        let reassign = self.rules == Rules::Client;
        let Some(scorer) = self.scorer.as_mut() else {
            return select(
                table,
                self.per_author,
                input.max_connections,
                reassign,
                |author, out| out.extend_from_slice(table.write_relays(author)),
            );
        };
        scorer.prepare(input, rng);
        let view = |relay: RelayId| RelayView {
            relay,
            url: table.url(relay),
            popularity: table.popularity(relay),
            coverage: 1,
        };
        let weight = |relay: RelayId| {
            if K::POPULARITY_WEIGHT {
                popularity_weight(table.popularity(relay))
            } else {
                1.0
            }
        };
        self.scores.clear();
        self.scores.resize(table.relay_count(), 0.0);
        if self.rules == Rules::Study {
            // A fresh draw per (follow, relay), follows in id order, each list in its order;
            // a follow's draws are ranked before the next follow's overwrite them.
            let scores = &mut self.scores;
            return select(
                table,
                self.per_author,
                input.max_connections,
                reassign,
                |author, out| {
                    for &r in table.write_relays(author) {
                        scores[r.index()] = weight(r) * scorer.score(view(r), rng);
                    }
                    out.extend_from_slice(table.write_relays(author));
                    rank_by_score(out, scores, table);
                },
            );
        }
        // One draw per relay per run, in relay-id order, before any ranking: the same seed
        // gives the same draws whatever the lists look like.
        for relay in table.relays() {
            if table.popularity(relay) == 0 {
                continue;
            }
            self.scores[relay.index()] = weight(relay) * scorer.score(view(relay), rng);
        }
        let scores = &self.scores;
        select(
            table,
            self.per_author,
            input.max_connections,
            reassign,
            |author, out| {
                out.extend_from_slice(table.write_relays(author));
                rank_by_score(out, scores, table);
            },
        )
    }
}

/// Ranks `relays` in place by precomputed `scores` (indexed by relay id), best first, ties by
/// URL; relays scoring `0` or less (or NaN) are removed. Scores are read, never computed, inside
/// the comparator.
pub fn rank_by_score(relays: &mut Vec<RelayId>, scores: &[f64], table: &RouteTable) {
    let score = |r: &RelayId| scores.get(r.index()).copied().unwrap_or(0.0);
    relays.retain(|r| score(r) > 0.0);
    relays.sort_unstable_by(|a, b| {
        score(b)
            .total_cmp(&score(a))
            .then_with(|| table.url_rank(*a).cmp(&table.url_rank(*b)))
    });
}

/// Per-author selection under a global budget.
///
/// `ranked(author, out)` fills `out` with the author's write relays in preference order (it may
/// leave some out). Then:
///
/// 1. each follow picks the first `n` relays of its ranking;
/// 2. if the picks use more than `budget` distinct relays, the `budget` relays serving the most
///    picks are kept (ties by URL) and the rest dropped;
/// 3. with `reassign`, each follow is then assigned the first `n` relays of its ranking *among
///    the kept ones*, so a follow whose picks were all dropped still uses a kept relay it
///    writes to, and only a follow with none falls to the residual; without it (the published
///    benchmark's cap, [`Rules::Study`]), each follow keeps only those of its `n` picks that
///    were kept.
///
/// The result never names more than `budget` relays nor more than `n` per follow, and only
/// relays the follow writes to (as long as `ranked` only returns those).
pub fn select(
    table: &RouteTable,
    n: usize,
    budget: usize,
    reassign: bool,
    mut ranked: impl FnMut(AuthorId, &mut Vec<RelayId>),
) -> Selection {
    if n == 0 || budget == 0 || table.relay_count() == 0 {
        return Selection::default();
    }
    // Every follow's ranking, flattened.
    let mut offsets = Vec::with_capacity(table.follow_count() + 1);
    let mut flat: Vec<RelayId> = Vec::new();
    let mut buf = Vec::new();
    let mut picks = vec![0u32; table.relay_count()];
    offsets.push(0usize);
    for author in table.authors() {
        buf.clear();
        ranked(author, &mut buf);
        buf.retain(|r| r.index() < picks.len() && table.writes_to(author, *r));
        for r in buf.iter().take(n) {
            picks[r.index()] += 1;
        }
        flat.extend_from_slice(&buf);
        offsets.push(flat.len());
    }

    let mut used: Vec<RelayId> = table.relays().filter(|r| picks[r.index()] > 0).collect();
    used.sort_unstable_by(|a, b| {
        picks[b.index()]
            .cmp(&picks[a.index()])
            .then_with(|| table.url_rank(*a).cmp(&table.url_rank(*b)))
    });
    if used.len() > budget {
        tracing::debug!(
            used = used.len(),
            budget,
            "per-author picks exceed the budget; keeping the relays serving the most picks"
        );
        used.truncate(budget);
    }
    let mut slot = vec![usize::MAX; table.relay_count()];
    for (i, r) in used.iter().enumerate() {
        slot[r.index()] = i;
    }
    let mut assignments: Vec<Assignment> = used
        .iter()
        .map(|&relay| Assignment {
            relay,
            authors: Vec::new(),
        })
        .collect();
    for author in table.authors() {
        let mut ranking = &flat[offsets[author.index()]..offsets[author.index() + 1]];
        if !reassign {
            ranking = &ranking[..ranking.len().min(n)];
        }
        for r in ranking
            .iter()
            .filter(|r| slot[r.index()] != usize::MAX)
            .take(n)
        {
            assignments[slot[r.index()]].authors.push(author);
        }
    }
    assignments.retain(|a| !a.authors.is_empty());
    Selection { assignments }
}

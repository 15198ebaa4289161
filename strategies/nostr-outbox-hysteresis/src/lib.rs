//! Hysteresis around any strategy: keep the current relays unless a challenger is clearly
//! better, and only act on a change that has persisted through a settle window.
//!
//! Relay lists change while a feed is open. Re-planning from scratch on every change redials
//! relays and re-sends every REQ, and a relay that flaps in and out of lists would be dialled and
//! closed on every tick. This wrapper runs its inner strategy on every call and treats the
//! answer as a *proposal*:
//!
//! - **Incumbents stay** while they are alive. A relay the inner strategy no longer wants keeps
//!   its slot until a challenger covers at least `margin` times what it covers (and strictly
//!   more), and that advantage has held on every call for `settle`.
//! - **Coverage first.** An incumbent that left every list is dropped at once, without waiting:
//!   its follows move to other open relays they write to, or to the residual on the reader's
//!   relays, in the same plan. The slots freed that way are refilled at once with the inner
//!   strategy's best challengers, since the plain strategy would have dialled them too.
//! - **Follows move in place.** Each follow keeps the open relays it is already asked of (up to
//!   the inner strategy's per-author cap); newly admitted relays take the follows the inner
//!   strategy assigned to them; anyone short of what the inner strategy wanted is added to other
//!   open relays they write to. Changing a filter re-sends one REQ; it never redials.
//!
//! State is kept per reader: the incumbent selection by canonical URL and public key (route
//! table ids are not stable between ticks) and, for each pending challenger, the time it was
//! first seen. Time is [`PlanInput::now`], in whole seconds: a settle window is rounded up to
//! whole seconds, which is exact for a 30 s window as long as planning ticks are at least a
//! second apart. A clock that goes backwards restarts the pending timers rather than applying
//! changes early.
//!
//! ```toml
//! [strategy]
//! type = "hysteresis"
//! margin = 1.25
//! settle = "30s"
//! [strategy.inner]
//! type = "greedy"
//! ```

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use nostr::key::PublicKey;
use nostr_outbox_core::config::parse_strategy;
use nostr_outbox_core::serde::{Deserialize, Serialize};
use nostr_outbox_core::{
    Assignment, AuthorId, PlanInput, RelayId, RouteTable, Selection, Selector, StrategyConfig,
};
use nostr_outbox_core::{ConfigError, ConfigIssue};
use rand::RngCore;

/// The default margin: a challenger must cover at least 125% of what the incumbent covers.
pub const DEFAULT_MARGIN: f64 = 1.25;

/// The default settle window.
pub const DEFAULT_SETTLE: &str = "30s";

/// `[strategy] type = "hysteresis"`, wrapping the strategy in `[strategy.inner]`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(crate = "nostr_outbox_core::serde", deny_unknown_fields)]
pub struct HysteresisConfig {
    /// How much more a challenger must cover than the incumbent it would replace (≥ 1).
    #[serde(default = "default_margin")]
    pub margin: f64,
    /// How long a change must persist before it is applied (humantime, e.g. `"30s"`).
    #[serde(default = "default_settle")]
    pub settle: String,
    /// The strategy whose proposals are damped.
    pub inner: Box<dyn StrategyConfig>,
}

impl HysteresisConfig {
    /// The registered example: the default margin and settle window around `greedy`. The inner
    /// strategy is looked up by name, since strategy crates do not depend on each other; the
    /// example fails where `greedy` is not linked.
    pub fn example() -> Result<Self, ConfigError> {
        let mut inner = toml::Table::new();
        inner.insert("type".into(), "greedy".into());
        let mut issues = Vec::new();
        match parse_strategy(&toml::Value::Table(inner), "inner", &mut issues) {
            Some(inner) => Ok(Self {
                margin: DEFAULT_MARGIN,
                settle: DEFAULT_SETTLE.to_string(),
                inner,
            }),
            None => Err(ConfigError { issues }),
        }
    }
}

fn default_margin() -> f64 {
    DEFAULT_MARGIN
}

fn default_settle() -> String {
    DEFAULT_SETTLE.to_string()
}

nostr_outbox_core::register_strategy! {
    name: "hysteresis",
    summary: "wraps another strategy: keeps incumbents unless a challenger wins by a margin for a settle window",
    example: HysteresisConfig::example(),
    impl StrategyConfig for HysteresisConfig {
        fn label(&self) -> String {
            format!("{}+{}", self.name(), self.inner.label())
        }

        fn validate(&self) -> Vec<ConfigIssue> {
            let mut issues = Vec::new();
            if !(self.margin.is_finite() && self.margin >= 1.0) {
                issues.push(ConfigIssue::new(
                    "margin",
                    format!("must be a finite number of at least 1, got {}", self.margin),
                ));
            }
            if let Err(err) = humantime::parse_duration(&self.settle) {
                issues.push(ConfigIssue::new(
                    "settle",
                    format!(
                        "not a duration such as \"30s\" or \"2m\" ({:?}: {err})",
                        self.settle
                    ),
                ));
            }
            issues.extend(self.inner.validate().into_iter().map(|i| i.under("inner")));
            issues
        }

        fn build(&self) -> Box<dyn Selector> {
            // `build` cannot fail; an unvalidated bad value falls back to the default, loudly.
            let settle = humantime::parse_duration(&self.settle).unwrap_or_else(|err| {
                tracing::warn!(settle = %self.settle, %err, "unparsable settle window; using 30s");
                Duration::from_secs(30)
            });
            let margin = if self.margin.is_finite() {
                self.margin.max(1.0)
            } else {
                tracing::warn!(margin = self.margin, "non-finite margin; using 1.25");
                DEFAULT_MARGIN
            };
            Box::new(Hysteresis::new(self.inner.build(), margin, settle))
        }
    }
}

/// One relay of the incumbent selection, in table-independent form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// Canonical relay URL.
    pub url: String,
    /// The follows asked of it, sorted.
    pub authors: Vec<PublicKey>,
}

/// The `hysteresis` strategy's selector: state for one reader's feed.
#[derive(Debug)]
pub struct Hysteresis {
    inner: Box<dyn Selector>,
    margin: f64,
    settle_secs: u64,
    /// `None` until the first plan: the first plan adopts the inner proposal as is.
    incumbent: Option<Vec<Held>>,
    /// Challenger URL → unix second it was first seen qualifying, unbroken since.
    pending: BTreeMap<String, u64>,
}

impl Hysteresis {
    /// Wraps `inner` with a `margin` (values below 1 are treated as 1) and a `settle` window
    /// (rounded up to whole seconds, at most `u64::MAX`).
    pub fn new(inner: Box<dyn Selector>, margin: f64, settle: Duration) -> Self {
        // Saturating: the longest window means "never", not a wrap to zero.
        let settle_secs = settle
            .as_secs()
            .saturating_add(u64::from(settle.subsec_nanos() > 0));
        Self {
            inner,
            margin: if margin.is_finite() {
                margin.max(1.0)
            } else {
                DEFAULT_MARGIN
            },
            settle_secs,
            incumbent: None,
            pending: BTreeMap::new(),
        }
    }

    /// The selection currently held (empty before the first plan), sorted by URL.
    pub fn incumbent(&self) -> &[Held] {
        self.incumbent.as_deref().unwrap_or(&[])
    }

    /// Challengers waiting out the settle window, with the second each was first seen.
    pub fn pending(&self) -> impl Iterator<Item = (&str, u64)> {
        self.pending.iter().map(|(u, &t)| (u.as_str(), t))
    }

    /// Forgets the incumbent and every pending change; the next plan adopts the inner proposal.
    pub fn reset(&mut self) {
        self.incumbent = None;
        self.pending.clear();
    }
}

/// An incumbent still usable in the current table.
struct Kept {
    relay: RelayId,
    /// Its previous follows that are still follows and still write there.
    carried: Vec<AuthorId>,
}

impl Selector for Hysteresis {
    fn per_author_cap(&self) -> Option<usize> {
        self.inner.per_author_cap()
    }

    fn learns(&self) -> bool {
        self.inner.learns()
    }

    fn select(&mut self, input: &PlanInput<'_>, rng: &mut dyn RngCore) -> Selection {
        let table = input.table;
        let budget = input.max_connections;
        let now = input.now;
        let proposal = sanitize(table, self.inner.select(input, rng));
        let cap = self.inner.per_author_cap().unwrap_or(usize::MAX);
        let first = self.incumbent.is_none();

        // 1. Repair the incumbent against the current table. A relay that left every list is
        //    dropped now: coverage never waits for a settle window.
        let mut kept: Vec<Kept> = Vec::new();
        let mut died = 0usize;
        for held in self.incumbent.as_deref().unwrap_or(&[]) {
            match table.relay_id(&held.url) {
                Some(relay) if table.candidate_popularity(relay) > 0 => {
                    let carried = held
                        .authors
                        .iter()
                        .filter_map(|pk| table.author_id(pk))
                        .filter(|&a| table.may_route(a, relay))
                        .collect();
                    kept.push(Kept { relay, carried });
                }
                _ => {
                    died += 1;
                    tracing::debug!(url = %held.url, "incumbent left every list; dropped at once");
                }
            }
        }

        let wanted_value: HashMap<RelayId, usize> = proposal
            .iter()
            .map(|a| (a.relay, a.authors.len()))
            .collect();

        // 2. The budget is an invariant, not a preference: if it shrank, shed the incumbents
        //    the inner strategy wants least (not proposed, fewest follows) at once.
        if kept.len() > budget {
            kept.sort_by(|x, y| {
                let key = |k: &Kept| (wanted_value.contains_key(&k.relay), k.carried.len());
                key(y)
                    .cmp(&key(x))
                    .then_with(|| table.url(x.relay).cmp(table.url(y.relay)))
            });
            kept.truncate(budget);
        }

        // 3. Pair challengers (proposed, not held) with victims (held, not proposed).
        let held_relays: HashMap<RelayId, usize> =
            kept.iter().enumerate().map(|(i, k)| (k.relay, i)).collect();
        let mut challengers: Vec<&Assignment> = proposal
            .iter()
            .filter(|a| !held_relays.contains_key(&a.relay))
            .collect();
        challengers.sort_by(|x, y| {
            y.authors
                .len()
                .cmp(&x.authors.len())
                .then_with(|| table.url(x.relay).cmp(table.url(y.relay)))
        });
        let mut victims: Vec<usize> = (0..kept.len())
            .filter(|&i| !wanted_value.contains_key(&kept[i].relay))
            .collect();
        victims.sort_by(|&x, &y| {
            kept[x]
                .carried
                .len()
                .cmp(&kept[y].carried.len())
                .then_with(|| table.url(kept[x].relay).cmp(table.url(kept[y].relay)))
        });

        let mut free = budget - kept.len();
        // Slots that may be filled without waiting: all of them on the first plan, and those
        // freed by incumbents that died this tick.
        let mut immediate = if first { budget } else { died };
        let mut admitted: Vec<RelayId> = Vec::new();
        let mut evicted: Vec<usize> = Vec::new();
        let mut next_victim = 0usize;
        let mut pending = BTreeMap::new();
        for challenger in challengers {
            let url = table.url(challenger.relay);
            let victim = if free > 0 {
                free -= 1;
                if immediate > 0 {
                    immediate -= 1;
                    admitted.push(challenger.relay);
                    continue;
                }
                None
            } else {
                let Some(&v) = victims.get(next_victim) else {
                    break;
                };
                let held = kept[v].carried.len();
                let wins = challenger.authors.len() > held
                    && challenger.authors.len() as f64 >= self.margin * held as f64;
                if !wins {
                    // Challengers come strongest first and victims weakest first: nobody
                    // after this one can win either.
                    break;
                }
                next_victim += 1;
                Some(v)
            };
            let since = match self.pending.get(url) {
                Some(&t) if t <= now => t,
                _ => now,
            };
            if now - since >= self.settle_secs {
                tracing::debug!(
                    url,
                    waited = now - since,
                    victim = victim.map(|v| table.url(kept[v].relay)),
                    "challenger settled; applying"
                );
                admitted.push(challenger.relay);
                evicted.extend(victim);
            } else {
                pending.insert(url.to_string(), since);
            }
        }
        // Whatever did not qualify on this call is forgotten: the advantage must be unbroken.
        self.pending = pending;

        // 4. The relay set: surviving incumbents, then admitted challengers.
        let mut relays: Vec<RelayId> = kept
            .iter()
            .enumerate()
            .filter(|(i, _)| !evicted.contains(i))
            .map(|(_, k)| k.relay)
            .collect();
        let new_from = relays.len();
        relays.extend(admitted);
        let position: HashMap<RelayId, usize> =
            relays.iter().enumerate().map(|(i, &r)| (r, i)).collect();

        // 5. Who is asked where.
        let follows = table.follow_count();
        let mut proposed_for: Vec<Vec<usize>> = vec![Vec::new(); follows];
        let mut proposed_count = vec![0usize; follows];
        for a in &proposal {
            for author in &a.authors {
                proposed_count[author.index()] += 1;
                if let Some(&p) = position.get(&a.relay) {
                    proposed_for[author.index()].push(p);
                }
            }
        }
        let mut carried_for: Vec<Vec<usize>> = vec![Vec::new(); follows];
        for k in &kept {
            if let Some(&p) = position.get(&k.relay) {
                for author in &k.carried {
                    carried_for[author.index()].push(p);
                }
            }
        }
        let mut filters: Vec<Vec<AuthorId>> = vec![Vec::new(); relays.len()];
        let mut chosen: Vec<usize> = Vec::new();
        for author in table.authors() {
            let i = author.index();
            chosen.clear();
            let target = proposed_count[i].max(1).min(cap);
            // Newly admitted relays take the follows the inner strategy gave them; then each
            // follow keeps the relays it is already on; then it is topped up to what the inner
            // strategy wanted, from its proposal first and its other write relays after.
            let admitted_first = proposed_for[i].iter().filter(|&&p| p >= new_from);
            for &p in admitted_first.chain(&carried_for[i]) {
                if chosen.len() < cap && !chosen.contains(&p) {
                    chosen.push(p);
                }
            }
            let others = table
                .write_relays(author)
                .iter()
                .filter_map(|r| position.get(r));
            for &p in proposed_for[i].iter().chain(others) {
                if chosen.len() < target && !chosen.contains(&p) {
                    chosen.push(p);
                }
            }
            for &p in &chosen {
                filters[p].push(author);
            }
        }

        let selection = Selection {
            assignments: relays
                .iter()
                .zip(filters)
                .filter(|(_, authors)| !authors.is_empty())
                .map(|(&relay, authors)| Assignment { relay, authors })
                .collect(),
        };
        self.incumbent = Some(hold(table, &selection));
        selection
    }
}

/// The inner proposal cleaned up: known relays only, each once, authors that are follows and
/// write there, no empty filters. Keeps the wrapper's own invariants independent of the inner
/// strategy's care.
fn sanitize(table: &RouteTable, selection: Selection) -> Vec<Assignment> {
    let mut out: Vec<Assignment> = Vec::with_capacity(selection.assignments.len());
    for a in selection.assignments {
        if a.relay.index() >= table.relay_count() {
            continue;
        }
        let mut authors: Vec<AuthorId> = a
            .authors
            .into_iter()
            .filter(|&x| x.index() < table.follow_count() && table.may_route(x, a.relay))
            .collect();
        match out.iter_mut().find(|o| o.relay == a.relay) {
            Some(existing) => existing.authors.append(&mut authors),
            None => out.push(Assignment {
                relay: a.relay,
                authors,
            }),
        }
    }
    for a in &mut out {
        a.authors.sort_unstable();
        a.authors.dedup();
    }
    out.retain(|a| !a.authors.is_empty());
    out
}

/// The selection in table-independent form, sorted by URL.
fn hold(table: &RouteTable, selection: &Selection) -> Vec<Held> {
    let mut held: Vec<Held> = selection
        .assignments
        .iter()
        .map(|a| {
            let mut authors: Vec<PublicKey> = a.authors.iter().map(|&x| *table.pubkey(x)).collect();
            authors.sort_unstable();
            Held {
                url: table.url(a.relay).to_string(),
                authors,
            }
        })
        .collect();
    held.sort_by(|x, y| x.url.cmp(&y.url));
    held
}

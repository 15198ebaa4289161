//! The churn scenario: relay lists that change between planning ticks, and what each strategy
//! does to the open connections as a result.
//!
//! Built from the core alone (route tables from [`RouteTableBuilder`]), so the simulator, the
//! benchmark and the CLI can all run it. Each tick:
//!
//! - a few authors add a relay to their list or drop one;
//! - a *flapping* relay is in some authors' lists on even ticks and out of them on odd ticks;
//! - at one tick a new relay appears in the lists of a large share of follows and stays (a
//!   sudden, permanent improvement).
//!
//! Every plan is applied to [`Slots`], and the resulting [`PlanDiff`](nostr_outbox_client::PlanDiff)s
//! are counted: dials, closes and in-place replacements. Every plan is also checked against
//! the invariants of its own tick; a follow that no filter names counts as uncovered.

use std::fmt;

use nostr::key::PublicKey;
use nostr_outbox_client::Slots;
use nostr_outbox_core::{
    check_plan, DeliveryStats, Limits, Plan, PlanInput, RawRelayList, RouteTable,
    RouteTableBuilder, StrategyConfig, UrlPolicy, Violation,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The URL of the relay that flaps in and out of lists.
pub const FLAP_URL: &str = "wss://flap.churn.test";
/// The URL of the relay that appears for good at the improvement tick.
pub const IMPROVEMENT_URL: &str = "wss://big.churn.test";

/// The shape of a churn scenario.
#[derive(Clone, Copy, Debug)]
pub struct ChurnShape {
    /// Followed authors.
    pub follows: usize,
    /// Ordinary relays lists draw from (popularity is skewed toward low numbers).
    pub relays: usize,
    /// Share of follows that publish a list.
    pub list_share: f64,
    /// Most write relays in one ordinary list.
    pub max_write_relays: usize,
    /// The reader's own relays.
    pub reader_relays: usize,
    /// Planning ticks.
    pub ticks: usize,
    /// Seconds between ticks.
    pub tick_secs: u64,
    /// Authors whose list changes (one relay added or dropped) on each tick.
    pub changes_per_tick: usize,
    /// Authors whose list carries the flapping relay on even ticks.
    pub flap_authors: usize,
    /// The tick at which the improvement relay appears (never if `>= ticks`).
    pub improvement_tick: usize,
    /// Share of listed follows that add the improvement relay.
    pub improvement_share: f64,
}

impl Default for ChurnShape {
    /// 300 follows over 60 relays, 5 s ticks for 10 minutes, 6 list changes per tick, 25
    /// authors on the flapping relay, and 40% of listed follows moving onto a new relay at
    /// minute 5.
    fn default() -> Self {
        Self {
            follows: 300,
            relays: 60,
            list_share: 0.8,
            max_write_relays: 4,
            reader_relays: 2,
            ticks: 120,
            tick_secs: 5,
            changes_per_tick: 6,
            flap_authors: 25,
            improvement_tick: 60,
            improvement_share: 0.4,
        }
    }
}

/// One planning tick: the time and the route table as the client knows it then.
#[derive(Clone, Debug)]
pub struct Tick {
    /// Unix seconds.
    pub now: u64,
    /// Who writes where at this tick.
    pub table: RouteTable,
}

/// A sequence of ticks.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The shape it was built from.
    pub shape: ChurnShape,
    /// The ticks, in time order.
    pub ticks: Vec<Tick>,
}

/// Builds the scenario for `shape`, deterministic for `seed`.
pub fn scenario(shape: ChurnShape, seed: u64) -> Scenario {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let follows: Vec<PublicKey> = (0..shape.follows)
        .map(|i| outbox_core_key(seed, i as u64))
        .collect();
    let reader: Vec<String> = (0..shape.reader_relays)
        .map(|i| format!("wss://home{i}.churn.test"))
        .collect();
    let relay = |rng: &mut ChaCha8Rng| {
        // Squaring a uniform draw skews choices toward low-numbered (hub) relays.
        let u: f64 = rng.random();
        format!(
            "wss://r{}.churn.test",
            ((u * u) * shape.relays as f64) as usize
        )
    };
    let mut lists: Vec<Option<Vec<String>>> = follows
        .iter()
        .map(|_| {
            if !rng.random_bool(shape.list_share.clamp(0.0, 1.0)) {
                return None;
            }
            let n = rng.random_range(1..=shape.max_write_relays.max(1));
            let mut list: Vec<String> = Vec::with_capacity(n);
            for _ in 0..n {
                let r = relay(&mut rng);
                if !list.contains(&r) {
                    list.push(r);
                }
            }
            Some(list)
        })
        .collect();
    let listed: Vec<usize> = (0..follows.len()).filter(|&i| lists[i].is_some()).collect();
    let flappers: Vec<usize> = pick(&mut rng, &listed, shape.flap_authors);

    let start = 1_767_225_600u64;
    // Bounded: `ticks` comes from the command line, and growing is cheap next to planning.
    let mut ticks = Vec::with_capacity(shape.ticks.min(4096));
    for t in 0..shape.ticks {
        if t > 0 {
            for _ in 0..shape.changes_per_tick {
                let Some(&who) = pick(&mut rng, &listed, 1).first() else {
                    break;
                };
                let Some(list) = lists[who].as_mut() else {
                    continue;
                };
                if list.len() > 1 && (list.len() >= shape.max_write_relays || rng.random_bool(0.5))
                {
                    let i = rng.random_range(0..list.len());
                    list.remove(i);
                } else {
                    let r = relay(&mut rng);
                    if !list.contains(&r) {
                        list.push(r);
                    }
                }
            }
        }
        if t == shape.improvement_tick {
            let n = (listed.len() as f64 * shape.improvement_share.clamp(0.0, 1.0)) as usize;
            for who in pick(&mut rng, &listed, n) {
                if let Some(list) = lists[who].as_mut() {
                    list.push(IMPROVEMENT_URL.to_string());
                }
            }
        }
        let flap_on = t % 2 == 0;
        let mut builder = RouteTableBuilder::new(UrlPolicy::default())
            .follows(follows.iter().copied())
            .reader_relays(&reader);
        for (i, list) in lists.iter().enumerate() {
            let Some(list) = list else { continue };
            let mut tags: Vec<Vec<String>> = list
                .iter()
                .map(|r| vec!["r".to_string(), r.clone()])
                .collect();
            if flap_on && flappers.contains(&i) {
                tags.push(vec!["r".to_string(), FLAP_URL.to_string()]);
            }
            builder.add_list(RawRelayList {
                author: follows[i],
                created_at: start.saturating_add(t as u64),
                tags,
            });
        }
        ticks.push(Tick {
            // Saturating: a huge `tick_secs` stops the clock at the end of time, never wraps.
            now: start.saturating_add((t as u64).saturating_mul(shape.tick_secs)),
            table: builder.build(),
        });
    }
    Scenario { shape, ticks }
}

/// `n` distinct items of `from`, in a seeded random order.
fn pick(rng: &mut ChaCha8Rng, from: &[usize], n: usize) -> Vec<usize> {
    let mut pool = from.to_vec();
    let n = n.min(pool.len());
    for i in 0..n {
        let j = rng.random_range(i..pool.len());
        pool.swap(i, j);
    }
    pool.truncate(n);
    pool
}

/// A deterministic, valid public key per (seed, index), without the testkit feature.
fn outbox_core_key(seed: u64, i: u64) -> PublicKey {
    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i);
    loop {
        let bytes: [u8; 32] = rng.random();
        if let Ok(sk) = nostr::key::SecretKey::from_slice(&bytes) {
            return nostr::key::Keys::new(sk).public_key();
        }
    }
}

/// What one strategy did over a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct ChurnReport {
    /// The label it was run under.
    pub label: String,
    /// The strategy's own name.
    pub strategy: String,
    /// Ticks planned.
    pub ticks: usize,
    /// Connections opened by the first plan (not counted as churn).
    pub initial: usize,
    /// Connections opened after the first plan.
    pub dials: usize,
    /// Connections closed.
    pub closes: usize,
    /// Filters replaced in place (REQ re-sent under the same subscription id).
    pub replacements: usize,
    /// Times the flapping relay was dialled after the first plan.
    pub flap_dials: usize,
    /// The tick (index) at which the improvement relay was first dialled, if ever.
    pub improvement_dialled_at: Option<usize>,
    /// Follow-ticks with a follow named in no filter (must be 0).
    pub uncovered: usize,
    /// Invariant violations of any kind over all ticks (must be 0).
    pub violations: usize,
    /// Σ over ticks and follows of |relays asked about the follow ∩ its write relays|.
    pub pairs: u64,
    /// `pairs` relative to the first report of a [`compare`] run (1.0 for that one).
    pub recall_proxy: f64,
}

impl ChurnReport {
    /// Dials + closes + in-place replacements after the first plan.
    pub fn churn(&self) -> usize {
        self.dials + self.closes + self.replacements
    }
}

/// Plans every tick of `scenario` with a fresh strategy from `config` (one reader, so state
/// carries across ticks) and counts what the plans do to the open slots.
pub fn run(
    scenario: &Scenario,
    label: &str,
    config: &dyn StrategyConfig,
    max_connections: usize,
    seed: u64,
) -> ChurnReport {
    let mut selector = config.build();
    let name = config.label();
    let stats = DeliveryStats::new();
    let mut slots = Slots::new();
    let mut report = ChurnReport {
        label: label.to_string(),
        strategy: name.clone(),
        ticks: scenario.ticks.len(),
        initial: 0,
        dials: 0,
        closes: 0,
        replacements: 0,
        flap_dials: 0,
        improvement_dialled_at: None,
        uncovered: 0,
        violations: 0,
        pairs: 0,
        recall_proxy: 1.0,
    };
    for (t, tick) in scenario.ticks.iter().enumerate() {
        let table = &tick.table;
        let input = PlanInput::new(table, max_connections, &stats, tick.now);
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (t as u64).wrapping_mul(0x2545_f491));
        let selection = selector.select(&input, &mut rng);
        let plan = Plan::from_selection(table, &name, selection);
        let limits = Limits {
            max_connections,
            pool: None,
            per_author_cap: selector.per_author_cap(),
        };
        for v in check_plan(&plan, table, limits) {
            report.violations += 1;
            if matches!(v, Violation::Uncovered(_)) {
                report.uncovered += 1;
            }
        }
        for author in table.authors() {
            report.pairs += plan
                .asked(author)
                .iter()
                .filter(|&&r| table.writes_to(author, r))
                .count() as u64;
        }
        let diff = slots.apply(&plan, table);
        if diff.dial.iter().any(|u| u == IMPROVEMENT_URL) && report.improvement_dialled_at.is_none()
        {
            report.improvement_dialled_at = Some(t);
        }
        if t == 0 {
            report.initial = diff.dial.len();
            continue;
        }
        report.dials += diff.dial.len();
        report.closes += diff.close.len();
        report.replacements += diff.replace.len();
        report.flap_dials += diff.dial.iter().filter(|u| *u == FLAP_URL).count();
    }
    report
}

/// Runs every labelled strategy over the same scenario, with the recall proxy of each relative
/// to the first.
pub fn compare(
    scenario: &Scenario,
    strategies: &[(&str, &dyn StrategyConfig)],
    max_connections: usize,
    seed: u64,
) -> Vec<ChurnReport> {
    let mut reports: Vec<ChurnReport> = strategies
        .iter()
        .map(|(label, config)| run(scenario, label, *config, max_connections, seed))
        .collect();
    let base = reports.first().map(|r| r.pairs).unwrap_or(0);
    for r in &mut reports {
        r.recall_proxy = if base == 0 {
            1.0
        } else {
            r.pairs as f64 / base as f64
        };
    }
    reports
}

/// The reports as an aligned text table, one row per strategy: connections of the first plan,
/// then dials, closes, in-place replacements and their sum after it, dials of the flapping
/// relay, the tick the improvement relay was dialled, uncovered follow-ticks, violations and
/// the recall proxy.
pub struct ReportTable<'a>(pub &'a [ChurnReport]);

impl fmt::Display for ReportTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self
            .0
            .iter()
            .map(|r| r.label.len())
            .max()
            .unwrap_or(0)
            .max(8);
        writeln!(
            f,
            "{:<width$}  {:>4} {:>5} {:>5} {:>6} {:>7} {:>6} {:>5} {:>9} {:>9} {:>7}",
            "strategy",
            "init",
            "dials",
            "close",
            "in-pl.",
            "churn",
            "flapD",
            "impr",
            "uncovered",
            "violation",
            "recall~"
        )?;
        for r in self.0 {
            let impr = r
                .improvement_dialled_at
                .map_or("-".to_string(), |t| format!("t{t}"));
            writeln!(
                f,
                "{:<width$}  {:>4} {:>5} {:>5} {:>6} {:>7} {:>6} {:>5} {:>9} {:>9} {:>7.3}",
                r.label,
                r.initial,
                r.dials,
                r.closes,
                r.replacements,
                r.churn(),
                r.flap_dials,
                impr,
                r.uncovered,
                r.violations,
                r.recall_proxy
            )?;
        }
        Ok(())
    }
}

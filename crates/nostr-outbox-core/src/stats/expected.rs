//! What a plan is expected to fetch under what was learned: one yardstick for comparing plans
//! of different strategies on the same inputs.

use crate::plan::Plan;
use crate::route_table::RouteTable;

use super::{share_younger, AuthorStats, DeliveryStats};

/// Evidence below this many (fractional) observations leaves a pair to its relay's completeness.
const MIN_PAIR_EVIDENCE: f64 = 0.5;

/// What a follow seen posting nothing counts, as a share of the average follow's notes: one
/// empty run is weak evidence (a relay may have lost the follow's writes), so such a follow
/// still counts a little.
pub const SILENT_SHARE: f64 = 0.05;

/// The share of the listed follows' notes of the last `window_secs` that `plan` is expected to
/// fetch at `now`, by what `stats` learned: per follow with declared write relays, the chance
/// that at least one declared relay asked about it (routed, or a reader relay carrying the
/// residual) answers and returns its notes, `1 − Π (1 − live · kept)`, weighted by the notes
/// the follow is expected to have in the window.
///
/// `live` is a relay's liveness mean; `kept` the (relay, follow) pair's mean where there is
/// evidence, else the relay's completeness mean. A follow's notes are its learned volume, of
/// which the share whose ages (spread evenly between its oldest and newest note seen) fall in
/// the window; a follow never learned counts the average, one seen posting nothing (or
/// nothing in the window) [`SILENT_SHARE`] of it. How far back each relay keeps notes is left
/// out: within a week's window relays differ in whether they answer and keep writes. 1 when
/// no follow has a list.
pub fn expected_recall(
    plan: &Plan,
    table: &RouteTable,
    stats: &DeliveryStats,
    now: u64,
    window_secs: u64,
) -> f64 {
    let listed: Vec<_> = table
        .authors()
        .filter(|&a| !table.write_relays(a).is_empty())
        .collect();
    let volumes: Vec<Option<f64>> = listed
        .iter()
        .map(|&a| {
            stats
                .author(table.pubkey(a))
                .map(|s| s.volume * in_window(s, now, window_secs as f64))
        })
        .collect();
    let (sum, n) = volumes
        .iter()
        .flatten()
        .filter(|&&v| v > 0.0)
        .fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    let average = if n == 0 { 1.0 } else { sum / n as f64 };
    let (mut got, mut total) = (0.0, 0.0);
    for (&author, volume) in listed.iter().zip(volumes) {
        let weight = match volume {
            Some(v) if v > 0.0 => v,
            Some(_) => SILENT_SHARE * average,
            None => average,
        };
        let learned = stats.author(table.pubkey(author));
        let declared = table.write_relays(author);
        let mut miss = 1.0;
        for relay in plan.asked(author) {
            if !declared.contains(&relay) {
                continue;
            }
            let url = table.url(relay);
            let s = stats.get_at(url, now);
            let kept = learned
                .and_then(|a| a.relays.get(url))
                .filter(|p| p.hits + p.misses >= MIN_PAIR_EVIDENCE)
                .map_or_else(|| s.completeness_mean(), |p| p.mean());
            miss *= 1.0 - s.live_mean() * kept;
        }
        got += weight * (1.0 - miss);
        total += weight;
    }
    if total > 0.0 {
        got / total
    } else {
        1.0
    }
}

/// The share of a follow's notes seen whose ages fall within `window` seconds of `now`, spread
/// evenly between its oldest and newest note seen (all of them when their ages are unknown).
fn in_window(stats: &AuthorStats, now: u64, window: f64) -> f64 {
    if stats.last == 0 || stats.first > stats.last {
        return 1.0;
    }
    let young = now.saturating_sub(stats.last) as f64;
    let old = now.saturating_sub(stats.first) as f64;
    share_younger(window, young, old)
}

//! What an open feed delivered, when, and at what cost; and the live ceiling.

use serde::{Deserialize, Serialize};

use super::{Feed, OpenWorld};

/// One client's open feed, scored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpenScore {
    /// Notes that arrived while the feed was open on a relay their author listed then, while
    /// that relay was up: what live completeness is measured against.
    pub notes: u64,
    /// Of those, delivered before the feed closed.
    pub delivered: u64,
    /// From a note's arrival on a relay to its delivery, seconds: the median and the 99th
    /// percentile over the notes delivered (`None`: none was).
    pub delay_p50: Option<f64>,
    /// See [`OpenScore::delay_p50`].
    pub delay_p99: Option<f64>,
    /// Gaps: a relay the feed was subscribed to went down and came back while it was open.
    pub gaps: u64,
    /// Of those, the gaps whose notes the feed asked for once the relay was back.
    pub gaps_filled: u64,
    /// From a relay's return to its gap being delivered, seconds, median over filled gaps.
    pub catch_up_p50: Option<f64>,
    /// Sockets held, mean over the time open.
    pub sockets: f64,
    /// REQs sent (subscriptions, catch-ups and polls).
    pub reqs: u64,
    /// Connect attempts, failed ones included.
    pub dials: u64,
    /// Events the relays sent (a note sent by two relays counts twice), at the follows' plain
    /// rates ([`super::OpenModel::rate_scale`]).
    pub events: f64,
    /// Plans made while open.
    pub plans: u64,
    /// The live ceiling only: the notes the best `budget` relays held open for the whole time
    /// deliver, knowing the hour ([`ceiling`]); 0 for a client.
    #[serde(default)]
    pub at_budget: u64,
}

impl OpenScore {
    /// Live completeness: delivered over notes (`None` when no note counts).
    pub fn completeness(&self) -> Option<f64> {
        (self.notes > 0).then(|| self.delivered as f64 / self.notes as f64)
    }
}

/// The `q` quantile of sorted `xs`.
fn quantile(xs: &[f64], q: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let i = ((xs.len() - 1) as f64 * q).round() as usize;
    xs.get(i.min(xs.len() - 1)).copied()
}

/// Scores `feed` on `open`.
pub(crate) fn score(open: &OpenWorld, feed: &Feed) -> OpenScore {
    let mut per_relay: Vec<Vec<usize>> = vec![Vec::new(); open.down.len()];
    for (i, seg) in feed.segments.iter().enumerate() {
        if let Some(v) = per_relay.get_mut(seg.relay as usize) {
            v.push(i);
        }
    }
    let (mut notes, mut delivered, mut events) = (0u64, 0u64, 0u64);
    let scale = open.rate_scale.max(1.0);
    let mut delays = Vec::new();
    for n in &open.notes {
        let mut first: Option<f64> = None;
        for &r in &n.on {
            for &i in per_relay.get(r as usize).into_iter().flatten() {
                let seg = &feed.segments[i];
                if seg.authors.binary_search(&n.author).is_err() {
                    continue;
                }
                let at = if n.t >= seg.since && n.t < seg.start && seg.answered {
                    seg.backfill_at
                } else if n.t >= seg.start && n.t < seg.end {
                    n.t
                } else {
                    continue;
                };
                if at > open.secs {
                    continue;
                }
                events += 1;
                first = Some(first.map_or(at, |f: f64| f.min(at)));
            }
        }
        if n.counted {
            notes += 1;
            if let Some(at) = first {
                delivered += 1;
                delays.push(at - n.t);
            }
        }
    }
    delays.sort_by(f64::total_cmp);
    // Gaps: a subscription ended by its relay going down, the relay back before the end.
    let (mut gaps, mut filled) = (0u64, 0u64);
    let mut catch_up = Vec::new();
    for seg in feed.segments.iter().filter(|s| !s.poll) {
        let Some(&(from, to)) = (open.down.get(seg.relay as usize))
            .and_then(|spans| spans.iter().find(|&&(a, _)| a == seg.end))
        else {
            continue;
        };
        if to >= open.secs {
            continue;
        }
        gaps += 1;
        let next = (per_relay[seg.relay as usize].iter())
            .map(|&i| &feed.segments[i])
            .filter(|s| {
                s.start >= to && s.since <= from && s.answered && s.backfill_at <= open.secs
            })
            .map(|s| s.backfill_at)
            .reduce(f64::min);
        if let Some(at) = next {
            filled += 1;
            catch_up.push(at - to);
        }
    }
    catch_up.sort_by(f64::total_cmp);
    let held: f64 = (feed.segments.iter())
        .filter(|s| !s.poll)
        .map(|s| (s.end.min(open.secs) - s.start).max(0.0))
        .sum();
    OpenScore {
        notes,
        delivered,
        delay_p50: quantile(&delays, 0.5),
        delay_p99: quantile(&delays, 0.99),
        gaps,
        gaps_filled: filled,
        catch_up_p50: quantile(&catch_up, 0.5),
        sockets: if open.secs > 0.0 {
            held / open.secs
        } else {
            0.0
        },
        reqs: feed.reqs,
        dials: feed.dials,
        events: events as f64 / scale,
        plans: feed.plans,
        at_budget: 0,
    }
}

/// Counted notes the best `budget` relays deliver, held open for the whole time and asked
/// about every follow, chosen knowing the hour (greedily: each next relay adds the most notes
/// not yet covered; maximum coverage is submodular, so this is within 1 − 1/e of the best set
/// and in practice close to it).
fn best_at_budget(open: &OpenWorld, budget: usize) -> u64 {
    let counted: Vec<bool> = open.notes.iter().map(|n| n.counted).collect();
    let mut covered = vec![false; open.notes.len()];
    let mut taken = vec![false; open.on_relay.len()];
    let mut total = 0u64;
    for _ in 0..budget.min(open.on_relay.len()) {
        let best = (0..open.on_relay.len())
            .filter(|&r| !taken[r])
            .map(|r| {
                let gain = (open.on_relay[r].iter())
                    .filter(|&&i| counted[i as usize] && !covered[i as usize])
                    .count();
                (gain, std::cmp::Reverse(r))
            })
            .max();
        let Some((gain, std::cmp::Reverse(r))) = best else {
            break;
        };
        if gain == 0 {
            break;
        }
        taken[r] = true;
        total += gain as u64;
        for &i in &open.on_relay[r] {
            covered[i as usize] = true;
        }
    }
    total
}

/// The live ceiling: every note delivered from its first reachable holder at once, every
/// relay that holds one subscribed for the whole time; and beside it
/// ([`OpenScore::at_budget`]) what `budget` relays chosen knowing the hour deliver.
pub fn ceiling(open: &OpenWorld, budget: usize) -> OpenScore {
    let notes = open.notes.iter().filter(|n| n.counted).count() as u64;
    let holders = open.on_relay.iter().filter(|v| !v.is_empty()).count();
    OpenScore {
        notes,
        delivered: notes,
        delay_p50: (notes > 0).then_some(0.0),
        delay_p99: (notes > 0).then_some(0.0),
        sockets: holders as f64,
        reqs: holders as u64,
        dials: holders as u64,
        events: open.notes.iter().filter(|n| !n.on.is_empty()).count() as f64
            / open.rate_scale.max(1.0),
        at_budget: best_at_budget(open, budget),
        ..OpenScore::default()
    }
}

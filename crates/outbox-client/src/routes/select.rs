//! The one selection every route shares: breadth first over the candidate groups, best learned
//! quality first within a group, under the total budget.

use std::collections::HashMap;

use nostr::filter::Filter;

use super::{relay_quality, Candidates, RouteContext, RouteKind, RoutePlan, RouteTarget};

/// Picks relays from `candidates` for a `kind` route and gives each the `filters`.
///
/// In rounds, each group in priority order takes its best relay not yet serving it — highest
/// [`relay_quality`] first, then one already chosen (it costs no connection), then the smaller
/// URL — until its cap. A relay not yet chosen is added only while the total budget
/// (`ctx.budget.max_relays`) lasts; once it is used up a group may still take relays already
/// chosen, and a group left with none is reported as cut off. Deterministic: the same inputs
/// give the same plan.
pub fn select(
    kind: RouteKind,
    candidates: &Candidates,
    filters: Vec<Filter>,
    ctx: &RouteContext<'_>,
) -> RoutePlan {
    let max = ctx.budget.max_relays;
    let mut quality: HashMap<&str, f64> = HashMap::new();
    for group in &candidates.groups {
        for url in &group.urls {
            quality
                .entry(url.as_str())
                .or_insert_with(|| relay_quality(ctx.stats, url, ctx.now));
        }
    }
    let mut targets: Vec<RouteTarget> = Vec::new();
    let mut chosen: HashMap<&str, usize> = HashMap::new();
    // Per group: which of its URLs already serve it, and whether it is finished.
    let mut served: Vec<Vec<bool>> = candidates
        .groups
        .iter()
        .map(|g| vec![false; g.urls.len()])
        .collect();
    let mut taken = vec![0usize; candidates.groups.len()];
    let mut done = vec![false; candidates.groups.len()];
    let mut cut_off = Vec::new();
    let left_out = candidates
        .groups
        .iter()
        .filter(|g| g.cap == 0 && !g.urls.is_empty())
        .map(|g| g.reason)
        .collect();
    loop {
        let mut progressed = false;
        for (gi, group) in candidates.groups.iter().enumerate() {
            if done[gi] {
                continue;
            }
            if taken[gi] >= group.cap {
                // Full; a group capped at zero is left out by its own budget (`left_out`),
                // not cut off.
                done[gi] = true;
                continue;
            }
            let budget_left = targets.len() < max;
            let best = group
                .urls
                .iter()
                .enumerate()
                .filter(|&(ui, url)| {
                    !served[gi][ui] && (budget_left || chosen.contains_key(url.as_str()))
                })
                .max_by(|&(_, a), &(_, b)| {
                    let qa = quality[a.as_str()];
                    let qb = quality[b.as_str()];
                    qa.total_cmp(&qb)
                        .then(
                            chosen
                                .contains_key(a.as_str())
                                .cmp(&chosen.contains_key(b.as_str())),
                        )
                        .then(b.cmp(a))
                });
            let Some((ui, url)) = best else {
                done[gi] = true;
                if taken[gi] == 0 {
                    cut_off.push(group.reason);
                }
                continue;
            };
            served[gi][ui] = true;
            taken[gi] += 1;
            progressed = true;
            match chosen.get(url.as_str()) {
                Some(&ti) => targets[ti].reasons.push(group.reason),
                None => {
                    chosen.insert(url.as_str(), targets.len());
                    targets.push(RouteTarget {
                        url: url.clone(),
                        reasons: vec![group.reason],
                        quality: quality[url.as_str()],
                        filters: filters.clone(),
                    });
                }
            }
        }
        if !progressed {
            break;
        }
    }
    targets.sort_by(|a, b| a.url.cmp(&b.url));
    RoutePlan {
        kind,
        targets,
        cut_off,
        left_out,
        unknown: candidates.unknown.clone(),
    }
}

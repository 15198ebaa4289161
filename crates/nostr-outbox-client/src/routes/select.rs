//! The one selection every route shares: breadth first over the candidate groups, best learned
//! quality first within a group, under the total budget.

use std::collections::HashMap;

use nostr::filter::Filter;

use super::{relay_quality, Candidates, RouteContext, RouteKind, RoutePlan, RouteTarget};

/// Up to this many distinct URLs, a route's URLs are numbered by a scan instead of a hash map
/// (a publish route names a handful).
const LINEAR: usize = 16;

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
    // Every distinct URL numbered once, with its quality; groups hold the numbers.
    let mut numbered: HashMap<&str, usize> = HashMap::new();
    let mut urls: Vec<&String> = Vec::new();
    let mut quality: Vec<f64> = Vec::new();
    let ids: Vec<Vec<usize>> = candidates
        .groups
        .iter()
        .map(|group| {
            group
                .urls
                .iter()
                .map(|url| {
                    let known = if urls.len() <= LINEAR {
                        urls.iter().position(|u| *u == url)
                    } else {
                        if numbered.is_empty() {
                            numbered.extend(urls.iter().enumerate().map(|(i, u)| (u.as_str(), i)));
                        }
                        numbered.get(url.as_str()).copied()
                    };
                    known.unwrap_or_else(|| {
                        if !numbered.is_empty() {
                            numbered.insert(url.as_str(), urls.len());
                        }
                        urls.push(url);
                        quality.push(relay_quality(ctx.stats, url, ctx.now));
                        urls.len() - 1
                    })
                })
                .collect()
        })
        .collect();
    let mut targets: Vec<RouteTarget> = Vec::new();
    // Per URL number, its target once chosen.
    let mut chosen: Vec<Option<usize>> = vec![None; urls.len()];
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
            let best = ids[gi]
                .iter()
                .enumerate()
                .filter(|&(ui, &id)| !served[gi][ui] && (budget_left || chosen[id].is_some()))
                .max_by(|&(_, &a), &(_, &b)| {
                    quality[a]
                        .total_cmp(&quality[b])
                        .then(chosen[a].is_some().cmp(&chosen[b].is_some()))
                        .then_with(|| urls[b].cmp(urls[a]))
                });
            let Some((ui, &id)) = best else {
                done[gi] = true;
                if taken[gi] == 0 {
                    cut_off.push(group.reason);
                }
                continue;
            };
            served[gi][ui] = true;
            taken[gi] += 1;
            progressed = true;
            match chosen[id] {
                Some(ti) => targets[ti].reasons.push(group.reason),
                None => {
                    chosen[id] = Some(targets.len());
                    targets.push(RouteTarget {
                        url: urls[id].clone(),
                        reasons: vec![group.reason],
                        quality: quality[id],
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

//! The selection shared by per-author strategies: rank, pick top N per follow, fit the budget.

use outbox_core::{Assignment, AuthorId, RelayId, RouteTable, Selection};

/// Each relay's position in URL order, so ties compare integers instead of strings.
pub fn url_ranks(table: &RouteTable) -> Vec<u32> {
    let mut order: Vec<RelayId> = table.relays().collect();
    order.sort_unstable_by(|a, b| table.url(*a).cmp(table.url(*b)));
    let mut rank = vec![0u32; order.len()];
    for (i, r) in order.iter().enumerate() {
        rank[r.index()] = i as u32;
    }
    rank
}

/// Ranks `relays` in place by precomputed `scores` (indexed by relay id), best first, ties by
/// URL; relays scoring `0` or less (or NaN) are removed. Scores are read, never computed, inside
/// the comparator.
pub fn rank_by_score(relays: &mut Vec<RelayId>, scores: &[f64], url_rank: &[u32]) {
    let score = |r: &RelayId| scores.get(r.index()).copied().unwrap_or(0.0);
    relays.retain(|r| score(r) > 0.0);
    relays.sort_unstable_by(|a, b| {
        score(b)
            .total_cmp(&score(a))
            .then_with(|| url_rank[a.index()].cmp(&url_rank[b.index()]))
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
/// 3. each follow is then assigned the first `n` relays of its ranking *among the kept ones*,
///    so a follow whose picks were all dropped still uses a kept relay it writes to, and only
///    a follow with none falls to the residual.
///
/// The result never names more than `budget` relays nor more than `n` per follow, and only
/// relays the follow writes to (as long as `ranked` only returns those).
pub fn select(
    table: &RouteTable,
    n: usize,
    budget: usize,
    url_rank: &[u32],
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
            .then_with(|| url_rank[a.index()].cmp(&url_rank[b.index()]))
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
        let ranking = &flat[offsets[author.index()]..offsets[author.index() + 1]];
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

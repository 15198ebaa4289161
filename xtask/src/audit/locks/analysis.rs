//! Third pass: close the per-function summaries over the call graph and turn
//! them into findings.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

use super::program::Program;
use super::walk::{Callee, FnInfo, Walked};
use super::{Config, Finding, Loc, Report, SourceFile, Unseen, UnseenKind};

/// How a function reaches a lock: the chain of calls (not including the
/// starting function) and where the lock is finally taken.
#[derive(Clone)]
struct Reach {
    reentrant: bool,
    chain: Vec<usize>,
    at: Loc,
}

/// A place where `outer` is held while `inner` is taken.
struct Site {
    at: Loc,
    function: String,
    how: String,
}

impl Site {
    fn describe(&self) -> String {
        format!("{} in `{}` ({})", self.at, self.function, self.how)
    }
}

/// Locks each workspace function takes, directly or through calls, with the
/// shortest call chain to each (breadth-first, so the printed path is short).
fn reach_all(
    prog: &Program,
    files: &[SourceFile],
    infos: &[FnInfo],
) -> Vec<BTreeMap<String, Reach>> {
    (0..prog.fns.len())
        .map(|start| {
            let mut out: BTreeMap<String, Reach> = BTreeMap::new();
            let mut seen = HashSet::from([start]);
            let mut queue = VecDeque::from([(start, Vec::new())]);
            while let Some((f, chain)) = queue.pop_front() {
                let info = &infos[f];
                for a in &info.acquires {
                    out.entry(a.lock.clone()).or_insert_with(|| Reach {
                        reentrant: a.reentrant,
                        chain: chain.clone(),
                        at: Loc::new(&files[info.file].display, a.line),
                    });
                }
                for c in &info.calls {
                    if let Callee::Fns(ids) = &c.callee {
                        for &id in ids {
                            if seen.insert(id) {
                                let mut next = chain.clone();
                                next.push(id);
                                queue.push_back((id, next));
                            }
                        }
                    }
                }
            }
            out
        })
        .collect()
}

fn chain_text(prog: &Program, callee: usize, r: &Reach) -> String {
    let mut names = vec![format!("`{}`", prog.fns[callee].display)];
    names.extend(
        r.chain
            .iter()
            .map(|&i| format!("`{}`", prog.fns[i].display)),
    );
    names.join(" -> ")
}

pub(crate) fn analyze(
    prog: &Program,
    files: &[SourceFile],
    cfg: &Config,
    walked: Walked,
) -> Report {
    let Walked {
        infos,
        mut findings,
        mut unseen,
    } = walked;
    let reach = reach_all(prog, files, &infos);
    let mut edges: BTreeMap<(String, String), Vec<Site>> = BTreeMap::new();
    let mut locks = BTreeSet::new();

    for info in &infos {
        let file = &files[info.file].display;
        for a in &info.acquires {
            locks.insert(a.lock.clone());
            let at = Loc::new(file, a.line);
            for h in &a.held {
                if h.lock == a.lock {
                    if !a.reentrant {
                        findings.push(Finding::SelfDeadlock {
                            at: at.clone(),
                            function: info.display.clone(),
                            lock: a.lock.clone(),
                            path: format!("first taken at line {}, taken again directly", h.line),
                        });
                    }
                } else {
                    edges
                        .entry((h.lock.clone(), a.lock.clone()))
                        .or_default()
                        .push(Site {
                            at: at.clone(),
                            function: info.display.clone(),
                            how: "directly".to_string(),
                        });
                }
            }
        }
        for call in info.calls.iter().filter(|c| !c.held.is_empty()) {
            let Callee::Fns(ids) = &call.callee else {
                continue;
            };
            let at = Loc::new(file, call.line);
            let mut paths = Vec::new();
            for &id in ids {
                for (lock, r) in &reach[id] {
                    let chain = chain_text(prog, id, r);
                    if let Some(h) = call.held.iter().find(|h| &h.lock == lock) {
                        if !r.reentrant {
                            findings.push(Finding::SelfDeadlock {
                                at: at.clone(),
                                function: info.display.clone(),
                                lock: lock.clone(),
                                path: format!(
                                    "taken at line {}, then {chain} takes it again at {}",
                                    h.line, r.at
                                ),
                            });
                        }
                        continue;
                    }
                    let how = format!("via {chain}, taken at {}", r.at);
                    paths.push(format!("`{lock}` {how}"));
                    for h in &call.held {
                        edges
                            .entry((h.lock.clone(), lock.clone()))
                            .or_default()
                            .push(Site {
                                at: at.clone(),
                                function: info.display.clone(),
                                how: how.clone(),
                            });
                    }
                }
            }
            if !paths.is_empty() {
                let mut held: Vec<String> = call.held.iter().map(|h| h.lock.clone()).collect();
                held.sort();
                held.dedup();
                findings.push(Finding::HoldAndCall {
                    at,
                    function: info.display.clone(),
                    held,
                    paths,
                });
            }
        }
    }

    for ((a, b), sites) in &edges {
        if a < b {
            if let Some(back) = edges.get(&(b.clone(), a.clone())) {
                findings.push(Finding::Inversion {
                    first: a.clone(),
                    second: b.clone(),
                    first_then_second: sites[0].describe(),
                    second_then_first: back[0].describe(),
                });
            }
        }
        for site in sites {
            let detail = match (cfg.ranks.get(a), cfg.ranks.get(b)) {
                (Some(ra), Some(rb)) if ra < rb => continue,
                (Some(ra), Some(rb)) => {
                    format!("ranks {ra} -> {rb} do not increase ({})", site.how)
                }
                (ra, rb) => {
                    let missing: Vec<&str> = [(a, ra), (b, rb)]
                        .into_iter()
                        .filter(|(_, r)| r.is_none())
                        .map(|(n, _)| n.as_str())
                        .collect();
                    format!(
                        "{} not ranked in xtask/lock-ranks.toml ({})",
                        missing
                            .iter()
                            .map(|m| format!("`{m}`"))
                            .collect::<Vec<_>>()
                            .join(" and "),
                        site.how
                    )
                }
            };
            findings.push(Finding::RankOrder {
                at: site.at.clone(),
                function: site.function.clone(),
                outer: a.clone(),
                inner: b.clone(),
                detail,
            });
        }
    }

    unseen.extend(unseen_calls(prog, files, &infos, &reach));

    let stale_ranks = cfg
        .ranks
        .keys()
        .filter(|k| !locks.contains(*k))
        .cloned()
        .collect();
    Report {
        findings,
        unseen,
        functions: prog.fns.len(),
        lock_takers: infos[..prog.fns.len()]
            .iter()
            .filter(|i| !i.acquires.is_empty())
            .count(),
        locks,
        stale_ranks,
        takers: prog
            .fns
            .iter()
            .zip(&reach)
            .filter(|(_, r)| !r.is_empty())
            .map(|(f, r)| {
                (
                    f.display.clone(),
                    Loc::new(&files[f.file].display, f.line),
                    r.keys().cloned().collect(),
                )
            })
            .collect(),
    }
}

/// Calls the audit could not follow, but only where they matter: in code
/// that runs while a lock is held (directly at the call site, or anywhere in
/// a function called under a lock). Also closures that take locks.
fn unseen_calls(
    prog: &Program,
    files: &[SourceFile],
    infos: &[FnInfo],
    reach: &[BTreeMap<String, Reach>],
) -> Vec<Unseen> {
    // Functions that run (transitively) while some lock is held.
    let mut under_lock: HashSet<usize> = HashSet::new();
    let mut queue: VecDeque<usize> = VecDeque::new();
    for info in infos {
        for c in info.calls.iter().filter(|c| !c.held.is_empty()) {
            if let Callee::Fns(ids) = &c.callee {
                queue.extend(ids);
            }
        }
    }
    while let Some(f) = queue.pop_front() {
        if under_lock.insert(f) {
            for c in &infos[f].calls {
                if let Callee::Fns(ids) = &c.callee {
                    queue.extend(ids);
                }
            }
        }
    }
    // Method names whose workspace definitions take a lock.
    let locking_names: HashSet<&str> = prog
        .fns
        .iter()
        .enumerate()
        .filter(|(i, _)| !reach[*i].is_empty())
        .map(|(_, f)| f.name.as_str())
        .collect();

    let mut out = Vec::new();
    for info in infos {
        let file = &files[info.file].display;
        let runs_under_lock = info.def.is_some_and(|d| under_lock.contains(&d));
        for c in &info.calls {
            let Callee::Unresolved { kind, what, method } = &c.callee else {
                continue;
            };
            if !runs_under_lock && c.held.is_empty() {
                continue;
            }
            if let Some(m) = method {
                if !locking_names.contains(m.as_str()) {
                    continue;
                }
            }
            out.push(Unseen {
                kind: *kind,
                at: Loc::new(file, c.line),
                detail: format!("`{what}` in `{}`", info.display),
            });
        }
        if info.def.is_none() {
            let takes = !info.acquires.is_empty()
                || info.calls.iter().any(|c| match &c.callee {
                    Callee::Fns(ids) => ids.iter().any(|&i| !reach[i].is_empty()),
                    Callee::Unresolved { .. } => false,
                });
            if takes {
                out.push(Unseen {
                    kind: UnseenKind::Closure,
                    at: Loc::new(file, info.line),
                    detail: format!("`{}`", info.display),
                });
            }
        }
    }
    out
}

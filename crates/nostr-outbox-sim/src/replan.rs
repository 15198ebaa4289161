//! In-session re-planning: the runtime's recovery within a run, as the simulator's re-planned
//! sessions (`LoopConfig::replan_on_failure`, `outbox bench --replan`) model it. Relays that do
//! not answer, and relays that answer with none of their follows' notes where others returned
//! some, are set aside and their follows re-planned onto other relays, in the order the world's
//! clock sets them aside ([`crate::clock::Replay`]).

use std::collections::{HashMap, HashSet};

use nostr_outbox_client::{Network, RoundRecorder};
use nostr_outbox_core::{DeliveryStats, PlanContext, RawRelayList, RouteTable, Router};

use crate::asks::{Ask, Asks};
use crate::sim_world::SimWorld;

/// Most re-plans in one session (each sets aside at least one relay, so this only bounds
/// pathological worlds).
pub(crate) const MAX_REPLANS: usize = 64;

/// The runtime's in-session recovery: relays asked in `session` that do not answer are set
/// aside and the plan is made again without them (same stats, same seed), until a plan's relays
/// all answer or nobody is left to ask. Relays that answered with none of their follows' notes
/// where another relay returned some ([`RoundRecorder::empty_answers`]) are set aside too.
/// Set-asides are taken in the order the world's clock puts them, as the runtime meets them:
/// each re-plan goes out `client`'s debounce after the first set-aside it answers, and
/// leaves out the relays set aside by then, no others. Returns every plan's asks in order,
/// `first` first (the waves of a `--once` run).
pub(crate) fn replan_around_failures(
    sim: &SimWorld,
    router: &mut Router,
    stats: &DeliveryStats,
    ctx: PlanContext,
    session: u32,
    first: Asks,
    client: &crate::clock::ClientTiming,
) -> Vec<Asks> {
    let mut waves = vec![first];
    let lists: Vec<RawRelayList> = sim.world.raw_lists().collect();
    let lists: Vec<&RawRelayList> = lists.iter().collect();
    let network = Network {
        policy: &sim.policy,
        follows: &sim.world.follows,
        readers: &sim.world.reader_relays,
        fallback: &[],
        lists: &lists,
        routed_carriers: 2,
    };
    let hints = if router.hints() {
        sim.client_hints(stats)
    } else {
        Vec::new()
    };
    let mut aside: HashSet<String> = HashSet::new();
    let mut asks = waves[0].clone();
    let since = ctx
        .window_secs
        .map_or(0, |secs| sim.world.now.saturating_sub(secs));
    // Who carries the residual in the current plan: never set aside for answering empty.
    let carriers_of = |table: &RouteTable| -> HashSet<String> {
        (table.reader_relays().iter())
            .map(|&r| table.url(r).to_string())
            .collect()
    };
    let mut carriers = carriers_of(&sim.table);
    // What the relays answered, as the runtime's recorder holds it: each relay's answer to the
    // latest plan that asked it, the answers of relays a re-plan dropped kept as evidence.
    let mut recorder = RoundRecorder::new();
    crate::fetch::fetch_recorded(sim, &waves[0], session, since, &mut recorder);
    // Each open relay's current filter.
    let mut filters: HashMap<String, Vec<u32>> = (waves[0].entries.iter())
        .map(|a| (a.url.clone(), a.authors.clone()))
        .collect();
    // When each relay is set aside: the clock's replay of the waves so far.
    let mut clock = crate::clock::Replay::start(sim, session, since, session > 0, client);
    clock.wave(&waves[0], None);
    let mut wave_at = 0f64;
    for _ in 0..MAX_REPLANS {
        let answers = |a: &Ask| a.relay.is_some_and(|r| sim.world.is_up(r, session));
        let mut due: Vec<String> = asks
            .entries
            .iter()
            .filter(|a| !answers(a) && !aside.contains(&a.url))
            .map(|a| a.url.clone())
            .collect();
        let empty = (recorder.empty_answers().into_iter())
            .filter(|url| !aside.contains(*url) && !carriers.contains(*url))
            .map(str::to_string);
        due.extend(empty);
        // One the clock did not set aside (an answer shown up empty only by a later wave's)
        // is found when the fetch settles, where the runtime looks once more.
        let when = |url: &str| clock.asides().get(url).copied().unwrap_or(clock.settled());
        let Some(first) = due.iter().map(|url| when(url)).reduce(f64::min) else {
            break;
        };
        wave_at = (first + client.debounce_ms).max(wave_at);
        due.retain(|url| when(url) <= wave_at);
        aside.extend(due);
        let set_aside: HashSet<&str> = aside.iter().map(String::as_str).collect();
        let (table, _) = network.table_with_hints(&set_aside, stats, ctx.now, &hints);
        // Nobody left to carry the residual: the runtime keeps its last good plan.
        let Ok(plan) = router.try_plan_with(&table, stats, ctx) else {
            break;
        };
        carriers = carriers_of(&table);
        let wave = Asks::from_table_plan(sim, &table, &plan);
        // Relays the re-plan dropped close; those whose filter changed are asked again.
        let kept: HashSet<&str> = wave.entries.iter().map(|a| a.url.as_str()).collect();
        filters.retain(|url, _| {
            let keep = kept.contains(url.as_str());
            if !keep {
                recorder.closed(url);
            }
            keep
        });
        let changed = Asks {
            entries: (wave.entries.iter())
                .filter(|a| filters.get(&a.url) != Some(&a.authors))
                .cloned()
                .collect(),
            ..Asks::default()
        };
        crate::fetch::fetch_recorded(sim, &changed, session, since, &mut recorder);
        filters.extend(changed.entries.into_iter().map(|a| (a.url, a.authors)));
        clock.wave(&wave, Some(wave_at));
        asks.merge(wave.clone());
        waves.push(wave);
    }
    waves
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::Window;

    /// Three follows, each listing one relay of its own: one refuses connections (set aside
    /// within a second or two), one is a black hole (set aside after the connect timeout),
    /// one answers.
    fn two_failures_apart() -> SimWorld {
        let key = |n: u8| {
            let mut sk = [9u8; 32];
            sk[31] = n;
            let secret = nostr::key::SecretKey::from_slice(&sk).expect("valid key");
            nostr::key::Keys::new(secret).public_key().to_hex()
        };
        let list = |f: u8, relay: &str| {
            format!(
                r#"{{"author": "{}", "created_at": 1, "tags": [["r", "{relay}"]]}}"#,
                key(f)
            )
        };
        let json = format!(
            r#"{{"format": "outbox-world/1", "name": "apart", "now": 100000000, "sessions": 1,
  "reader": {{"pubkey": "{}", "follows": ["{}", "{}", "{}"], "relays": ["wss://home.example"]}},
  "relay_lists": [{}, {}, {}],
  "relays": {{"wss://refuses.example": {{"up": [false]}},
    "wss://hole.example": {{"up": [false], "timing": {{"connect_ms": 500, "query_ms": 500, "hangs": true}}}},
    "wss://answers.example": {{"up": [true]}}, "wss://home.example": {{"up": [true]}}}},
  "events": []}}"#,
            key(99),
            key(1),
            key(2),
            key(3),
            list(1, "wss://refuses.example"),
            list(2, "wss://hole.example"),
            list(3, "wss://answers.example"),
        );
        SimWorld::new(nostr_outbox_world::World::from_json(&json).expect("valid world"))
    }

    /// A re-plan leaves out only the relays set aside by the time it goes out, as the
    /// runtime's does: the refusing relay first, the black hole in a re-plan of its own.
    #[test]
    fn set_asides_are_re_planned_around_in_the_order_the_clock_puts_them() {
        nostr_outbox_strategies::link();
        let sim = two_failures_apart();
        let mut router = Router::from_toml(
            "max_connections = 20\n[strategy]\ntype = \"greedy\"\ncoverage_target = 1\n",
        )
        .expect("valid config");
        let ctx = PlanContext::at(sim.world.now).window(Window::D7.secs());
        let stats = DeliveryStats::default();
        let plan = router.plan_with(&sim.table, &stats, ctx);
        let first = Asks::from_table_plan(&sim, &sim.table, &plan);
        let client = crate::clock::ClientTiming::default();
        let waves = replan_around_failures(&sim, &mut router, &stats, ctx, 0, first, &client);
        let urls = |wave: &Asks| -> Vec<String> {
            let mut urls: Vec<String> = wave.entries.iter().map(|a| a.url.clone()).collect();
            urls.sort();
            urls
        };
        let hole = "wss://hole.example".to_string();
        let refuses = "wss://refuses.example".to_string();
        assert_eq!(
            waves.len(),
            3,
            "{:?}",
            waves.iter().map(urls).collect::<Vec<_>>()
        );
        assert!(urls(&waves[0]).contains(&refuses) && urls(&waves[0]).contains(&hole));
        assert!(!urls(&waves[1]).contains(&refuses) && urls(&waves[1]).contains(&hole));
        assert!(!urls(&waves[2]).contains(&hole));
    }
}

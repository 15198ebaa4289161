//! What each way of carrying out a plan faster would buy, measured on the worlds' clock before
//! the runtime is given it: no policy beside each policy of
//! [`nostr_outbox_sim::clock::Policy`] alone, the runtime's own ([`Policy::runtime`]) and all
//! together, for a few strategies.
//!
//! ```text
//! cargo run --release -p nostr-outbox-sim --example clock_policies -- [profiles] [seeds]
//!     [--family decay] [--sessions 5] [--hedge-ms 1500] [--probe-timeout-ms 2000]
//!     [--strategies recall,greedy]
//! cargo run --release -p nostr-outbox-sim --example clock_policies -- --world FILE
//! ```
//!
//! Per strategy and policy, over the worlds: in the first and the last session the first
//! screen and 90% of the run's own fetch as multiples of the same notes' time on the time
//! ceiling, the share of the own fetch in after two seconds, when the run ends, and how many
//! notes the run fetched (hedges fetch more than the plan's relays hold). Recall as scored is
//! the same under every policy: the plan does not change, only how it is carried out.

mod common;

use common::{fail, Args};
use nostr_outbox_core::Router;
use nostr_outbox_sim::bench::resolve;
use nostr_outbox_sim::clock::{ClientTiming, Policy, TimeScore};
use nostr_outbox_sim::{default_suite, run_sessions, LoopConfig, MeanSe, Window};

fn main() {
    nostr_outbox_strategies::link();
    let args = Args::parse(&[
        "--family",
        "--sessions",
        "--world",
        "--hedge-ms",
        "--probe-timeout-ms",
        "--strategies",
    ]);
    let worlds = args.config_worlds(("small,medium,large", "1001-1003"));
    let hedge: f64 = (args.parsed("--hedge-ms").unwrap_or_else(|e| fail(e))).unwrap_or(1_500.0);
    let probe: f64 = (args
        .parsed("--probe-timeout-ms")
        .unwrap_or_else(|e| fail(e)))
    .unwrap_or(2_000.0);
    if !(hedge.is_finite() && hedge >= 0.0 && probe.is_finite() && probe >= 0.0) {
        fail("--hedge-ms and --probe-timeout-ms: a number of milliseconds ≥ 0");
    }
    let wanted: Vec<String> = args
        .value("--strategies")
        .unwrap_or("recall,stochastic+thompson,greedy")
        .split(',')
        .map(str::to_string)
        .collect();
    let (rows, _) = resolve(&default_suite());
    let rows: Vec<_> = rows
        .into_iter()
        .filter(|(l, _)| wanted.contains(l))
        .collect();
    if rows.is_empty() {
        fail("--strategies: none of these is in the suite");
    }
    let policies: Vec<(&str, Policy)> = vec![
        ("none", Policy::default()),
        (
            "aside on timeout",
            Policy {
                aside_on_timeout: true,
                ..Policy::default()
            },
        ),
        (
            "early waves",
            Policy {
                early_waves: true,
                ..Policy::default()
            },
        ),
        (
            "short probes",
            Policy {
                probe_timeout_ms: Some(probe),
                ..Policy::default()
            },
        ),
        (
            "hedge",
            Policy {
                hedge_after_ms: Some(hedge),
                ..Policy::default()
            },
        ),
        ("runtime", Policy::runtime()),
        (
            "all",
            Policy {
                aside_on_timeout: true,
                early_waves: true,
                probe_timeout_ms: Some(probe),
                hedge_after_ms: Some(hedge),
            },
        ),
    ];
    println!(
        "{:<22} {:<17} {:>9} {:>7} {:>7} {:>7} {:>9} {:>7} {:>7} {:>7} {:>7}",
        "strategy",
        "policy",
        "s1 screen",
        "s1 90%",
        "s1 @2s",
        "s1 end",
        "sN screen",
        "sN 90%",
        "sN @2s",
        "sN end",
        "notes"
    );
    for (label, config) in &rows {
        for (name, policy) in &policies {
            let (mut first, mut last) = (Vec::new(), Vec::new());
            worlds.each(|_, sim| {
                let mut router = Router::from_config(config);
                let cfg = LoopConfig {
                    sessions: worlds.sessions,
                    windows: vec![Window::D7],
                    timing_repeats: 0,
                    // Re-plans around set-aside relays, in waves, as the runtime runs.
                    replan_on_failure: true,
                    clock: Some(Window::D7),
                    client: ClientTiming {
                        policy: policy.clone(),
                        ..ClientTiming::default()
                    },
                    ..LoopConfig::default()
                };
                let run = run_sessions(sim, &mut router, &cfg, |_, _, _| {});
                let time = |s: Option<&nostr_outbox_sim::SessionOutcome>| {
                    s.and_then(|s| s.score.time.clone())
                };
                first.extend(time(run.sessions.first()));
                last.extend(time(run.sessions.last()));
            });
            let f = Figures::of(&first);
            let l = Figures::of(&last);
            println!(
                "{label:<22} {name:<17} {:>9} {:>7} {:>7} {:>7} {:>9} {:>7} {:>7} {:>7} {:>7.0}",
                f.screen, f.p90, f.at_2s, f.end, l.screen, l.p90, l.at_2s, l.end, l.notes
            );
        }
    }
    println!(
        "screen and 90%: × the same notes' time on the time ceiling; @2s: % of the run's own fetch \
         in after two seconds; end: seconds until the run ends; notes: the last session's fetch; \
         means over worlds (first session s1, last sN). Hedge after {hedge} ms, probes give up \
         after {probe} ms."
    );
}

/// One session's figures over worlds, formatted.
struct Figures {
    screen: String,
    p90: String,
    at_2s: String,
    end: String,
    notes: f64,
}

impl Figures {
    fn of(scores: &[TimeScore]) -> Self {
        let mean = |f: &dyn Fn(&TimeScore) -> Option<f64>| {
            MeanSe::of(&scores.iter().filter_map(f).collect::<Vec<_>>())
        };
        let show = |m: MeanSe, scale: f64, digits: usize| {
            if m.n == 0 {
                "-".to_string()
            } else {
                format!("{:.*}", digits, m.mean * scale)
            }
        };
        Self {
            screen: show(mean(&|s| s.screen_ratio()), 1.0, 2),
            p90: show(mean(&|s| s.p90_ratio()), 1.0, 2),
            at_2s: show(mean(&|s| s.at(2_000).map(|c| c.own)), 100.0, 1),
            end: show(mean(&|s| Some(s.end_ms)), 0.001, 1),
            notes: mean(&|s| Some(s.fetched as f64)).mean,
        }
    }
}

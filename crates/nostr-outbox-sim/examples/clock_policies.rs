//! What each way of carrying out a plan faster would buy, measured on the worlds' clock before
//! the runtime is given it: no policy beside each of the runtime's ([`Policy::runtime`]) alone,
//! and the runtime's together, for a few strategies.
//!
//! ```text
//! cargo run --release -p nostr-outbox-sim --example clock_policies -- [profiles] [seeds]
//!     [--family decay] [--sessions 5] [--probe-timeout-ms 2000]
//!     [--strategies recall,greedy]
//! cargo run --release -p nostr-outbox-sim --example clock_policies -- --world FILE
//! ```
//!
//! Per strategy and policy, over the worlds: in the first and the last session the first
//! screen and 90% of the run's own fetch as multiples of the same notes' time on the time
//! ceiling, the share of the own fetch in after two seconds, when the run ends, and how many
//! notes the run fetched. Recall as scored is the same under every policy: the plan does not
//! change, only how it is carried out.

mod common;

use common::{fail, Args};
use nostr_outbox_core::Router;
use nostr_outbox_sim::bench::resolve;
use nostr_outbox_sim::clock::{ClientTiming, Policy, TimeScore, Wait};
use nostr_outbox_sim::{default_suite, run_sessions, LoopConfig, MeanSe, Window};

fn main() {
    nostr_outbox_strategies::link();
    let args = Args::parse(&[
        "--family",
        "--sessions",
        "--world",
        "--probe-timeout-ms",
        "--strategies",
    ]);
    let arg = |i: usize| args.positional.get(i).map(String::as_str);
    let worlds = (args.worlds(arg(0), arg(1), ("small,medium,large", "1001-1003")))
        .unwrap_or_else(|e| fail(e));
    let probe: f64 = (args
        .parsed("--probe-timeout-ms")
        .unwrap_or_else(|e| fail(e)))
    .unwrap_or(2_000.0);
    if !(probe.is_finite() && probe >= 0.0) {
        fail("--probe-timeout-ms: a number of milliseconds ≥ 0");
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
            "runtime",
            Policy {
                probe_timeout_ms: Some(probe),
                ..Policy::runtime()
            },
        ),
    ];
    println!(
        "{:<22} {:<18} {:>9} {:>7} {:>7} {:>7} {:>11} {:>9} {:>7} {:>7} {:>7} {:>11} {:>7}",
        "strategy",
        "policy",
        "s1 screen",
        "s1 90%",
        "s1 @2s",
        "s1 end",
        "s1 waits",
        "sN screen",
        "sN 90%",
        "sN @2s",
        "sN end",
        "sN waits",
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
                "{label:<22} {name:<18} {:>9} {:>7} {:>7} {:>7} {:>11} {:>9} {:>7} {:>7} {:>7} {:>11} {:>7.0}",
                f.screen, f.p90, f.at_2s, f.end, f.waits, l.screen, l.p90, l.at_2s, l.end, l.waits,
                l.notes
            );
        }
    }
    println!(
        "screen and 90%: × the same notes' time on the time ceiling; @2s: % of the run's own fetch \
         in after two seconds; end: seconds until the run ends; waits: what held each world's \
         first screen back, counted as on time/unlisted/not asked/late socket/slow page \
         (`clock::Wait`); notes: \
         the last session's fetch; means over worlds (first session s1, last sN). Probes give up \
         after {probe} ms."
    );
}

/// One session's figures over worlds, formatted.
struct Figures {
    screen: String,
    p90: String,
    at_2s: String,
    end: String,
    waits: String,
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
            waits: (Wait::ALL.iter())
                .map(|w| {
                    scores
                        .iter()
                        .filter(|s| s.wait == Some(*w))
                        .count()
                        .to_string()
                })
                .collect::<Vec<_>>()
                .join("/"),
            notes: mean(&|s| Some(s.fetched as f64)).mean,
        }
    }
}

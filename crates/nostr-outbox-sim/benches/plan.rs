//! Planning time of every registered strategy on the huge profile, so speed regressions show:
//! with nothing learned (`plan/huge`), and with what five sessions of its own taught it, for a
//! one-year fetch (`plan/huge-learned`, what a client pays on every re-plan).
// criterion's group macro defines an undocumented public function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use nostr_outbox_core::{DeliveryStats, PlanContext, Router, RouterConfig};
use nostr_outbox_sim::{run_sessions, LoopConfig, SimWorld, Window};
use nostr_outbox_world::{generate, Profile};

/// Times each strategy's plans: `prepare` gives its router the stats to plan with.
fn bench_group(
    c: &mut Criterion,
    name: &str,
    sim: &SimWorld,
    ready: &[(String, RouterConfig)],
    ctx: PlanContext,
    mut prepare: impl FnMut(&mut Router) -> DeliveryStats,
) {
    let mut group = c.benchmark_group(name);
    group.sample_size(20);
    for (label, config) in ready {
        let mut router = Router::new(&*config.strategy, 20);
        let stats = prepare(&mut router);
        let mut seed = 0u64;
        group.bench_function(BenchmarkId::from_parameter(label), |b| {
            b.iter(|| {
                seed = seed.wrapping_add(1);
                router.plan_with(&sim.table, &stats, ctx.seed(seed))
            })
        });
    }
    group.finish();
}

fn plan_huge(c: &mut Criterion) {
    nostr_outbox_strategies::link();
    let sim = SimWorld::new(generate(Profile::Huge, 1));
    let (ready, skipped) = nostr_outbox_sim::bench::resolve(&nostr_outbox_sim::default_suite());
    for s in skipped {
        eprintln!("skipping {}: {}", s.label, s.reason);
    }
    let cold = PlanContext::at(sim.world.now);
    bench_group(c, "plan/huge", &sim, &ready, cold, |_| DeliveryStats::new());

    let sessions = LoopConfig {
        timing_repeats: 0,
        ..LoopConfig::default()
    };
    let now = sim.world.now + u64::from(sessions.sessions) * sessions.session_interval_secs;
    let learned = PlanContext::at(now).window(Window::Y1.secs());
    bench_group(c, "plan/huge-learned", &sim, &ready, learned, |router| {
        run_sessions(&sim, router, &sessions, |_, _, _| {}).stats
    });
}

criterion_group!(benches, plan_huge);
criterion_main!(benches);

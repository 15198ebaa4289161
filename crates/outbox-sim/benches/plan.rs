//! Planning time of every registered strategy on the huge profile, so speed regressions show:
//! with nothing learned (`plan/huge`), and with what five sessions of its own taught it, for a
//! one-year fetch (`plan/huge-learned`, what a client pays on every re-plan).
// criterion's group macro defines an undocumented public function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use outbox_core::{DeliveryStats, PlanContext, Router};
use outbox_sim::{generate, run_sessions, LoopConfig, Profile, SimWorld, Window};

fn plan_huge(c: &mut Criterion) {
    outbox_strategies::link();
    let sim = SimWorld::new(generate(Profile::Huge, 1));
    let (ready, skipped) = outbox_sim::bench::resolve(&outbox_sim::default_suite());
    for s in skipped {
        eprintln!("skipping {}: {}", s.label, s.reason);
    }
    let stats = DeliveryStats::new();
    let mut group = c.benchmark_group("plan/huge");
    group.sample_size(20);
    for (label, config) in &ready {
        let mut router = Router::new(config.strategy.build(), 20);
        let mut seed = 0u64;
        group.bench_function(BenchmarkId::from_parameter(label), |b| {
            b.iter(|| {
                seed = seed.wrapping_add(1);
                router.plan_with(
                    &sim.table,
                    &stats,
                    PlanContext::at(sim.world.now).seed(seed),
                )
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("plan/huge-learned");
    group.sample_size(20);
    let sessions = LoopConfig {
        timing_repeats: 0,
        ..LoopConfig::default()
    };
    let now = sim.world.now + u64::from(sessions.sessions) * sessions.session_interval_secs;
    for (label, config) in &ready {
        let mut router = Router::new(config.strategy.build(), 20);
        let learned = run_sessions(&sim, &mut router, &sessions, |_, _, _| {}).stats;
        let mut seed = 0u64;
        group.bench_function(BenchmarkId::from_parameter(label), |b| {
            b.iter(|| {
                seed = seed.wrapping_add(1);
                router.plan_with(
                    &sim.table,
                    &learned,
                    PlanContext::at(now).seed(seed).window(Window::Y1.secs()),
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, plan_huge);
criterion_main!(benches);

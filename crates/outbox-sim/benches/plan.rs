//! Planning time of every registered strategy on the huge profile, so speed regressions show.
// criterion's group macro defines an undocumented public function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use outbox_core::{DeliveryStats, PlanContext, Router};
use outbox_sim::{generate, Profile, SimWorld};

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
}

criterion_group!(benches, plan_huge);
criterion_main!(benches);

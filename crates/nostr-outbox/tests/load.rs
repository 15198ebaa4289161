//! `outbox load`'s harness end to end on a small point: the measurements of a real
//! `outbox feed --once` child are there and plausible.

use std::path::PathBuf;
use std::time::Duration;

use nostr_outbox_live::load::{run_point, LoadConfig, LoadPoint, LoadProgress};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_load_point_is_measured() {
    let mut cfg = LoadConfig::new(PathBuf::from(env!("CARGO_BIN_EXE_outbox")));
    cfg.timeout = Duration::from_secs(60);
    cfg.port_hint = 26_000;
    let point = LoadPoint {
        relays: 4,
        follows: 300,
    };
    let mut prepared = 0;
    let r = run_point(point, &cfg, |p| match p {
        LoadProgress::Prepared { relays, .. } => {
            assert_eq!(relays, 4);
            prepared += 1;
        }
    })
    .await
    .unwrap();
    let m = &r.measured;
    eprintln!("{r:#?}");
    assert_eq!(prepared, 1);
    assert!(!m.timed_out, "{:?}", m.stderr_tail);
    assert_eq!(m.exit_code, Some(0), "{:?}", m.stderr_tail);
    let report = m.report.as_ref().expect("a summary");
    assert!(r.notes > 0 && r.copies >= r.notes);
    assert!(report.events > 0 && report.events_received >= report.events);
    assert_eq!(m.stdout_lines, report.events, "one line per note");
    assert_eq!(report.relays_asked, 4, "every relay routed");
    let eose = report.time_to_full_eose.expect("time to full EOSE");
    assert!(eose > Duration::ZERO && eose <= m.wall);
    // A Rust process with a runtime and a few hundred notes: more than 1 MiB, less than 1 GiB.
    let rss = m.peak_rss_kib.expect("peak RSS");
    assert!((1_024..1_048_576).contains(&rss), "{rss} KiB");
    let cpu = m.cpu().expect("CPU time");
    assert!(cpu > Duration::ZERO && cpu < m.wall * 4);
    assert!(m.events_per_sec().is_some_and(|e| e > 0.0));
    assert!(m.samples > 1);
}

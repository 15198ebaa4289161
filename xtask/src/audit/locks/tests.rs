//! The audit must be able to fail: each fixture in `xtask/fixtures/` plants
//! one kind of problem, and these tests pin the exact findings. `clean.rs`
//! holds the safe variants, which must produce none.

use std::path::Path;

use super::{analyze, Config, Report, SourceFile};

fn fixture(name: &str) -> SourceFile {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    SourceFile::read(&path, format!("fixtures/{name}")).expect("fixture exists")
}

fn ranked(pairs: &[(&str, i64)]) -> Config {
    Config {
        ranks: pairs.iter().map(|(k, v)| ((*k).to_string(), *v)).collect(),
        ..Config::default()
    }
}

fn run(name: &str, cfg: &Config) -> Report {
    analyze(&[fixture(name)], cfg)
}

fn findings(report: &Report) -> Vec<String> {
    report.findings.iter().map(ToString::to_string).collect()
}

fn inline(text: &str, cfg: &Config) -> Report {
    analyze(
        &[SourceFile {
            display: "inline.rs".to_string(),
            text: text.to_string(),
        }],
        cfg,
    )
}

fn statics_ranked() -> Config {
    ranked(&[("A", 1), ("B", 2)])
}

#[test]
fn hold_and_call_is_flagged() {
    let r = run("hold_and_call.rs", &statics_ranked());
    assert_eq!(
        findings(&r),
        [
            "hold-and-call at fixtures/hold_and_call.rs:13: `hold_a_call_b` holds `A` while calling a lock-taker: `B` via `take_b`, taken at fixtures/hold_and_call.rs:8",
            "hold-and-call at fixtures/hold_and_call.rs:19: `match_scrutinee_holds` holds `A` while calling a lock-taker: `B` via `take_b`, taken at fixtures/hold_and_call.rs:8",
        ]
    );
    assert!(r.unseen.is_empty(), "{:?}", r.unseen);
    let takers: Vec<String> = r
        .takers
        .iter()
        .map(|(f, at, locks)| format!("{f} {at} {}", locks.join(",")))
        .collect();
    assert_eq!(
        takers,
        [
            "take_b fixtures/hold_and_call.rs:7 B",
            "hold_a_call_b fixtures/hold_and_call.rs:11 A,B",
            "match_scrutinee_holds fixtures/hold_and_call.rs:17 A,B",
        ]
    );
}

#[test]
fn unranked_nesting_is_flagged() {
    let r = run("hold_and_call.rs", &Config::default());
    assert_eq!(
        findings(&r),
        [
            "hold-and-call at fixtures/hold_and_call.rs:13: `hold_a_call_b` holds `A` while calling a lock-taker: `B` via `take_b`, taken at fixtures/hold_and_call.rs:8",
            "hold-and-call at fixtures/hold_and_call.rs:19: `match_scrutinee_holds` holds `A` while calling a lock-taker: `B` via `take_b`, taken at fixtures/hold_and_call.rs:8",
            "rank order at fixtures/hold_and_call.rs:13: `hold_a_call_b` takes `B` while holding `A`: `A` and `B` not ranked in xtask/lock-ranks.toml (via `take_b`, taken at fixtures/hold_and_call.rs:8)",
            "rank order at fixtures/hold_and_call.rs:19: `match_scrutinee_holds` takes `B` while holding `A`: `A` and `B` not ranked in xtask/lock-ranks.toml (via `take_b`, taken at fixtures/hold_and_call.rs:8)",
        ]
    );
}

#[test]
fn inversion_is_flagged() {
    let r = run(
        "inversion.rs",
        &ranked(&[("Book.accounts", 1), ("Book.journal", 2)]),
    );
    assert_eq!(
        findings(&r),
        [
            "lock-order inversion between `Book.accounts` and `Book.journal`: `Book.accounts` then `Book.journal` at fixtures/inversion.rs:13 in `Book::post` (directly); `Book.journal` then `Book.accounts` at fixtures/inversion.rs:19 in `Book::audit` (directly)",
            "rank order at fixtures/inversion.rs:19: `Book::audit` takes `Book.accounts` while holding `Book.journal`: ranks 2 -> 1 do not increase (directly)",
        ]
    );
}

#[test]
fn self_deadlock_through_call_chain_is_flagged() {
    let r = run("self_deadlock.rs", &Config::default());
    assert_eq!(
        findings(&r),
        ["self-deadlock at fixtures/self_deadlock.rs:14: `Cache::refresh` takes non-reentrant `Cache.entries` again while holding it: taken at line 12, then `Cache::rebuild` -> `Cache::fill` takes it again at fixtures/self_deadlock.rs:23"]
    );
}

#[test]
fn guard_across_await_is_flagged() {
    let r = run("across_await.rs", &Config::default());
    assert_eq!(
        findings(&r),
        [
            "guard held across .await at fixtures/across_await.rs:14: `Peers::ping_all` holds `Peers.list` (taken at line 12)",
            "guard held across .await at fixtures/across_await.rs:19: `Peers::ping_first` holds `Peers.list` (taken at line 19)",
        ]
    );
}

#[test]
fn clean_fixture_passes() {
    let r = run("clean.rs", &statics_ranked());
    assert_eq!(findings(&r), Vec::<String>::new());
    assert!(r.unseen.is_empty(), "{:?}", r.unseen);
    // It did see the locks (a pass because nothing was recognised would
    // prove nothing) and did not mistake `file.read(..)` or
    // `Sensor::read()` for one.
    let locks: Vec<&str> = r.locks.iter().map(String::as_str).collect();
    assert_eq!(locks, ["A", "B", "Sensor.table"]);
}

#[test]
fn clean_fixture_still_needs_ranks_for_nesting() {
    let r = run("clean.rs", &Config::default());
    assert_eq!(
        findings(&r),
        ["rank order at fixtures/clean.rs:89: `nested_in_rank_order` takes `B` while holding `A`: `A` and `B` not ranked in xtask/lock-ranks.toml (directly)"]
    );
}

#[test]
fn what_cannot_be_seen_is_listed() {
    let r = run("unseen.rs", &ranked(&[("A", 1)]));
    assert_eq!(findings(&r), Vec::<String>::new());
    let unseen: Vec<String> = r
        .unseen
        .iter()
        .map(|u| format!("{:?} {} {}", u.kind, u.at, u.detail))
        .collect();
    assert_eq!(
        unseen,
        [
            "MacroDefinition fixtures/unseen.rs:36 macro_rules! lock_a body is not analysed",
            "Closure fixtures/unseen.rs:29 `closure_run_elsewhere::{closure@29}`",
            "DynamicDispatch fixtures/unseen.rs:20 `(dyn Hook).fire()` in `through_trait_object`",
            "FnPointer fixtures/unseen.rs:25 `f(..)` in `through_fn_pointer`",
            "UnresolvedLockReceiver fixtures/unseen.rs:33 `m.get(&1).unwrap().lock()` in `unknown_receiver`",
        ]
    );
}

#[test]
fn reentrant_mutex_may_be_taken_again() {
    let src = r#"
        struct S { m: parking_lot::ReentrantMutex<()> }
        impl S {
            fn outer(&self) { let _g = self.m.lock(); self.inner(); }
            fn inner(&self) { let _g = self.m.lock(); }
        }
    "#;
    let r = inline(src, &Config::default());
    assert_eq!(findings(&r), Vec::<String>::new());
}

#[test]
fn async_lock_is_not_held_across_its_own_await() {
    let src = r#"
        struct S { m: tokio::sync::Mutex<u32> }
        async fn io() {}
        impl S {
            async fn fine(&self) { let g = self.m.lock().await; drop(g); io().await; }
            async fn held(&self) { let g = self.m.lock().await; io().await; }
        }
    "#;
    let r = inline(src, &Config::default());
    assert_eq!(
        findings(&r),
        ["guard held across .await at inline.rs:6: `S::held` holds `S.m` (taken at line 6)"]
    );
}

#[test]
fn configured_lock_types_and_names_count() {
    let src = r#"
        struct S { a: SpinLock<u32>, b: external::Thing }
        impl S {
            fn f(&self) { let _x = self.a.lock(); let _y = self.b.write(); }
        }
    "#;
    let mut cfg = Config::parse(
        "[extra_lock_types]\ntypes = [\"SpinLock\"]\nnames = [\"b\"]\n[ranks]\n\"S.a\" = 1\n",
    )
    .unwrap();
    let r = inline(src, &cfg);
    let locks: Vec<&str> = r.locks.iter().map(String::as_str).collect();
    assert_eq!(locks, ["S.a", "b"]);
    assert_eq!(
        findings(&r),
        ["rank order at inline.rs:4: `S::f` takes `b` while holding `S.a`: `b` not ranked in xtask/lock-ranks.toml (directly)"]
    );
    cfg.ranks.insert("b".to_string(), 2);
    assert!(inline(src, &cfg).findings.is_empty());
}

#[test]
fn shipped_rank_table_parses() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("lock-ranks.toml");
    Config::load(&path).expect("xtask/lock-ranks.toml parses");
}

#[test]
fn workspace_scan_skips_fixtures() {
    let files = crate::audit::workspace_sources(&crate::util::workspace_root()).unwrap();
    assert!(files.iter().any(|f| f.display == "xtask/src/main.rs"));
    assert!(!files
        .iter()
        .any(|f| f.display.starts_with("xtask/fixtures/")));
    assert!(!files.iter().any(|f| f.display.starts_with("target/")));
}

#[test]
fn locks_returned_by_workspace_functions_are_followed() {
    let src = r#"
        use std::sync::{Arc, Mutex};
        struct S { inner: Mutex<u32> }
        fn collector() -> Arc<Mutex<Vec<u32>>> { Arc::new(Mutex::new(Vec::new())) }
        impl S {
            fn inner(&self) -> &Mutex<u32> { &self.inner }
            fn f(&self) {
                let out = collector();
                let _a = out.lock().unwrap();
                let _b = self.inner().lock().unwrap();
            }
        }
    "#;
    let r = inline(src, &ranked(&[("collector()", 1), ("S::inner()", 2)]));
    let locks: Vec<&str> = r.locks.iter().map(String::as_str).collect();
    assert_eq!(locks, ["S::inner()", "collector()"]);
    assert_eq!(findings(&r), Vec::<String>::new());
}

#[test]
fn if_let_guard_lives_through_else() {
    let src = r#"
        use std::sync::Mutex;
        static A: Mutex<Vec<u32>> = Mutex::new(Vec::new());
        fn other() { A.lock().unwrap(); }
        fn held_in_else() {
            if let Some(_x) = A.lock().unwrap().first() { } else { other(); }
        }
        fn failed_try_holds_nothing() {
            if let Ok(_g) = A.try_lock() { } else { other(); }
            let Ok(_g) = A.try_lock() else { other(); return; };
        }
    "#;
    let r = inline(src, &Config::default());
    assert_eq!(
        findings(&r),
        ["self-deadlock at inline.rs:6: `held_in_else` takes non-reentrant `A` again while holding it: taken at line 6, then `other` takes it again at inline.rs:4"]
    );
}

//! The outside strategy is picked by name from TOML, without touching the project's crates.

use nostr_outbox_core::testkit::{check_config_toml, random_table, WorldShape};
use nostr_outbox_core::{check_plan, registry, Router};

// Linking the crate is what registers its strategy.
use third_party_strategy as _;

const CONFIG: &str = "max_connections = 3\n[strategy]\ntype = \"most_popular_first\"\n";

#[test]
fn registered_and_listed() {
    let d = registry::strategy("most_popular_first").expect("registered by linking the crate");
    assert!(d.summary.contains("third-party"));
    assert_eq!(d.package, "third-party-strategy");
}

#[test]
fn the_example_is_the_default_config_and_runs() {
    let d = registry::strategy("most_popular_first").unwrap();
    let table = d.example_table().expect("the example serialises");
    assert_eq!(
        table.get("type").and_then(|t| t.as_str()),
        Some("most_popular_first")
    );
    assert_eq!(
        table.get("min_popularity").and_then(|v| v.as_integer()),
        Some(0)
    );
    let failures = check_config_toml(&d.example_router_toml(3).unwrap());
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The extension story: the macro brings everything registration needs, so the crate's own
/// manifest names no serde, typetag or inventory. `nostr-outbox` is there only for the binary,
/// behind the `cli` feature: the strategy itself needs `nostr-outbox-core` alone.
#[test]
fn the_manifest_depends_on_outbox_core_only() {
    let manifest: toml::Table = toml::from_str(include_str!("../Cargo.toml")).unwrap();
    let deps = manifest["dependencies"].as_table().unwrap();
    let optional =
        |spec: &toml::Value| spec.get("optional").and_then(toml::Value::as_bool) == Some(true);
    let required: Vec<&String> = deps
        .iter()
        .filter(|(_, s)| !optional(s))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(required, ["nostr-outbox-core"]);
    let for_the_binary: Vec<&String> = deps
        .iter()
        .filter(|(_, s)| optional(s))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(for_the_binary, ["nostr-outbox"]);
    let strings = |v: &toml::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(strings(&manifest["features"]["cli"]), ["dep:nostr-outbox"]);
    let bins = manifest["bin"].as_array().unwrap();
    assert!(!bins.is_empty());
    for bin in bins {
        assert_eq!(strings(&bin["required-features"]), ["cli"], "{bin}");
    }
}

#[test]
fn selected_from_toml_and_plans_soundly() {
    let mut router = Router::from_toml(CONFIG).expect("config parses");
    assert_eq!(router.strategy(), "most_popular_first");
    let table = random_table(WorldShape::small(), 11);
    let plan = router.plan(&table, 0);
    assert_eq!(plan.routed().len(), 3);
    assert!(!plan.residual().is_empty());
    assert!(check_plan(&plan, &table, router.limits()).is_empty());
}

#[test]
fn bad_parameters_name_the_key() {
    let err =
        Router::from_toml("[strategy]\ntype = \"most_popular_first\"\nmin_popularity = \"high\"\n")
            .unwrap_err()
            .to_string();
    assert!(err.contains("strategy.min_popularity"), "{err}");
}

#[test]
fn passes_the_conformance_suite() {
    let failures = check_config_toml(CONFIG);
    assert!(failures.is_empty(), "{failures:#?}");
}

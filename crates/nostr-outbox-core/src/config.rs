//! Router configuration from TOML: a connection budget, a URL policy and a strategy by name.
//!
//! ```toml
//! max_connections = 20
//! [strategy]
//! type = "greedy"
//! coverage_target = 2
//! ```
//!
//! Parsing collects every problem it can find, each naming its key, before failing.

use std::collections::{BTreeMap, BTreeSet};

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::issue::{ConfigError, ConfigIssue};
use crate::registry;
use crate::selector::StrategyConfig;
use crate::url_policy::UrlPolicy;

/// The budget used when a config does not set `max_connections` (browsers cap sockets near 30;
/// the published measurements use 20).
pub const DEFAULT_MAX_CONNECTIONS: usize = 20;

/// A parsed router config.
#[derive(Debug)]
pub struct RouterConfig {
    /// Routed relays allowed per plan (the reader's own relays are not counted).
    pub max_connections: usize,
    /// How many of the reader's relays carry the residual (`pool = 4`); all of them when
    /// absent. A separate count from the routed budget, since a client with its own relays
    /// sizes the two independently.
    pub pool: Option<usize>,
    /// Relays probed per session after the fetch ([`crate::probe`]); when not set, two waves
    /// of [`probes_at_once`](crate::probes_at_once) (twice the routed budget, and at least 120:
    /// [`default_probes`](crate::default_probes)): short connections, opened at most
    /// `probes_at_once` at once. 0 never probes (the published benchmark's model: a session
    /// learns only what its plan fetched). Only a strategy that learns from delivery
    /// ([`crate::Selector::learns`]) is probed for.
    pub probe_connections: Option<usize>,
    /// Which relay-list entries are accepted.
    pub url_policy: UrlPolicy,
    /// The strategy, as picked by `[strategy] type = "..."`.
    pub strategy: Box<dyn StrategyConfig>,
    /// Relays asked for relay lists besides the reader's own (`indexers = ["wss://…"]`):
    /// lists that live only on an indexer route their authors from the first run on.
    pub indexers: Vec<String>,
    /// Give route tables the relay hints the client knows (`hints = true`; [`crate::hints`]):
    /// kind:3 and pointer hints, and the relays learned stats saw each follow's notes arrive
    /// on. Off by default: tables hold the declared lists alone. The simulator's session loop
    /// honours it, and so does the live runtime: its coordinator offers the client's hints
    /// (`FeedInput::hints`; `outbox feed --npub` gives the reader's kind:3 relays) and the
    /// relays its stats saw notes arrive on to every route table it plans on.
    pub hints: bool,
}

/// The most indexer relays a config may name: each is one more connection per run.
pub const MAX_INDEXERS: usize = 32;

impl RouterConfig {
    /// Parses a TOML config, collecting every problem before failing.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| ConfigError {
            issues: vec![ConfigIssue::new(
                "",
                format!("not valid toml: {}", e.message()),
            )],
        })?;
        let mut issues = Vec::new();
        let unknown: Vec<&String> = table
            .keys()
            .filter(|key| {
                !matches!(
                    key.as_str(),
                    "max_connections"
                        | "pool"
                        | "probe_connections"
                        | "url_policy"
                        | "strategy"
                        | "indexers"
                        | "hints"
                )
            })
            .collect();
        for key in unknown.iter().take(MAX_NAMED_KEYS) {
            issues.push(ConfigIssue::new(
                key.as_str(),
                "unknown key (expected max_connections, pool, probe_connections, url_policy, strategy, indexers, hints)",
            ));
        }
        if unknown.len() > MAX_NAMED_KEYS {
            issues.push(ConfigIssue::new(
                "",
                format!(
                    "and {} more unknown keys, not listed",
                    unknown.len() - MAX_NAMED_KEYS
                ),
            ));
        }
        let max_connections = match table.get("max_connections") {
            None => Some(DEFAULT_MAX_CONNECTIONS),
            Some(toml::Value::Integer(n)) if *n >= 0 => Some(*n as usize),
            Some(other) => {
                issues.push(ConfigIssue::new(
                    "max_connections",
                    format!("expected a non-negative integer, found {}", describe(other)),
                ));
                None
            }
        };
        let probe_connections = match table.get("probe_connections") {
            None => Some(None),
            Some(toml::Value::Integer(n))
                if (0..=crate::probe::MAX_PROBE_CONNECTIONS as i64).contains(n) =>
            {
                Some(Some(*n as usize))
            }
            Some(other) => {
                issues.push(ConfigIssue::new(
                    "probe_connections",
                    format!(
                        "expected an integer from 0 to {}, found {}",
                        crate::probe::MAX_PROBE_CONNECTIONS,
                        describe(other)
                    ),
                ));
                None
            }
        };
        // Zero would leave the residual with nobody to ask: rejected rather than clamped.
        let pool = match table.get("pool") {
            None => Some(None),
            Some(toml::Value::Integer(n)) if *n >= 1 => Some(Some(*n as usize)),
            Some(other) => {
                issues.push(ConfigIssue::new(
                    "pool",
                    format!("expected a positive integer, found {}", describe(other)),
                ));
                None
            }
        };
        let url_policy = match table.get("url_policy") {
            None => Some(UrlPolicy::default()),
            Some(value) => deserialize_at::<UrlPolicy>(value, "url_policy", &mut issues),
        };
        let indexers = match table.get("indexers") {
            None => Some(Vec::new()),
            Some(toml::Value::Array(items)) if items.len() > MAX_INDEXERS => {
                issues.push(ConfigIssue::new(
                    "indexers",
                    format!(
                        "{} relays; at most {MAX_INDEXERS} indexers may be named",
                        items.len()
                    ),
                ));
                None
            }
            Some(value) => deserialize_at::<Vec<String>>(value, "indexers", &mut issues),
        };
        let hints = match table.get("hints") {
            None => Some(false),
            Some(toml::Value::Boolean(b)) => Some(*b),
            Some(other) => {
                issues.push(ConfigIssue::new(
                    "hints",
                    format!("expected true or false, found {}", describe(other)),
                ));
                None
            }
        };
        let strategy = match table.get("strategy") {
            None => {
                issues.push(ConfigIssue::new(
                    "strategy",
                    format!("missing; pick one of: {}", strategy_names()),
                ));
                None
            }
            Some(value) => parse_strategy(value, "strategy", &mut issues),
        };
        match (max_connections, pool, url_policy, strategy, indexers, hints) {
            (
                Some(max_connections),
                Some(pool),
                Some(url_policy),
                Some(strategy),
                Some(indexers),
                Some(hints),
            ) if issues.is_empty() => Ok(Self {
                max_connections,
                pool,
                probe_connections: probe_connections.flatten(),
                url_policy,
                strategy,
                indexers,
                hints,
            }),
            _ => Err(ConfigError { issues }),
        }
    }
}

/// Parses a strategy table found at `key` (also used by strategies that wrap another, such as
/// a `[strategy.inner]` table): checks the `type` against the registry, deserialises, and runs
/// the strategy's own validation. Problems are appended to `issues`.
pub fn parse_strategy(
    value: &toml::Value,
    key: &str,
    issues: &mut Vec<ConfigIssue>,
) -> Option<Box<dyn StrategyConfig>> {
    let Some(table) = value.as_table() else {
        issues.push(ConfigIssue::new(
            key,
            format!("expected a table, found {}", describe(value)),
        ));
        return None;
    };
    match table.get("type") {
        None => {
            issues.push(ConfigIssue::new(
                format!("{key}.type"),
                format!("missing; pick one of: {}", strategy_names()),
            ));
            return None;
        }
        Some(toml::Value::String(name)) if registry::strategy(name).is_none() => {
            issues.push(ConfigIssue::new(
                format!("{key}.type"),
                format!("unknown strategy `{name}`; known: {}", strategy_names()),
            ));
            return None;
        }
        Some(toml::Value::String(_)) => {}
        Some(other) => {
            issues.push(ConfigIssue::new(
                format!("{key}.type"),
                format!("expected a strategy name, found {}", describe(other)),
            ));
            return None;
        }
    }
    let config = match Box::<dyn StrategyConfig>::deserialize(value.clone()) {
        Ok(config) => config,
        Err(err) => {
            issues.extend(locate_errors(table, key, &err.to_string()));
            return None;
        }
    };
    let own: Vec<ConfigIssue> = config
        .validate()
        .into_iter()
        .map(|i| i.under(key))
        .collect();
    if own.is_empty() {
        Some(config)
    } else {
        issues.extend(own);
        None
    }
}

/// Deserialises `value` as `T`, recording a failure as an issue at `key` (with the inner path
/// when serde can tell it).
pub fn deserialize_at<T: DeserializeOwned>(
    value: &toml::Value,
    key: &str,
    issues: &mut Vec<ConfigIssue>,
) -> Option<T> {
    match serde_path_to_error::deserialize::<_, T>(value.clone()) {
        Ok(v) => Some(v),
        Err(err) => {
            let path = err.path().to_string();
            let full = if path == "." || path.is_empty() {
                key.to_string()
            } else {
                format!("{key}.{path}")
            };
            issues.push(ConfigIssue::new(full, err.into_inner().to_string()));
            None
        }
    }
}

/// Keys named one by one in a report; the rest are counted in one "and N more" issue.
const MAX_NAMED_KEYS: usize = 20;

/// Deserialisations spent probing keys for one strategy table. Probing one key costs one
/// deserialisation of the whole table, so an unbounded search over a table with thousands of
/// bad keys would never finish.
const MAX_PROBES: usize = 64;

/// Deserialises a strategy table with some keys left out, counting the attempts.
struct Prober<'a> {
    table: &'a toml::Table,
    probes: usize,
}

impl Prober<'_> {
    /// The error of the table without `without`, or `None` if it deserialises.
    fn attempt(&mut self, without: &BTreeSet<&str>) -> Option<String> {
        self.probes += 1;
        let t: toml::Table = self
            .table
            .iter()
            .filter(|(k, _)| !without.contains(k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Box::<dyn StrategyConfig>::deserialize(toml::Value::Table(t))
            .err()
            .map(|e| e.to_string())
    }
}

/// Finds which keys of a strategy table a deserialisation error is about.
///
/// Strategy configs are trait objects picked by their `type` tag; the tag dispatch buffers the
/// table, so serde cannot report the path of a bad value. Unknown keys are found in one pass
/// from serde's own message (it names the fields it expects); any other bad key is found by
/// probing: a key is to blame when leaving it out changes the error, and it is then
/// deserialised without the other blamed keys to get its own message. Probing is bounded by
/// [`MAX_PROBES`] and the report by [`MAX_NAMED_KEYS`].
fn locate_errors(table: &toml::Table, key: &str, original: &str) -> Vec<ConfigIssue> {
    locate_errors_counted(table, key, original).0
}

/// [`locate_errors`], also returning how many deserialisations it spent.
fn locate_errors_counted(
    table: &toml::Table,
    key: &str,
    original: &str,
) -> (Vec<ConfigIssue>, usize) {
    let mut prober = Prober { table, probes: 0 };
    // Blamed key → its own message, when already known.
    let mut blamed: BTreeMap<&str, Option<String>> = BTreeMap::new();
    let mut current = Some(original.to_string());

    // 1. Unknown keys, all at once. The message may come from a nested table whose unknown
    //    field shares a name with a key here, so the guess is kept only if leaving those keys
    //    out changes the error without making a required key go missing.
    if let Some((name, tail)) = unknown_field(table, original) {
        let unknown: Vec<&str> = match expected_fields(tail) {
            Some(expected) => table
                .keys()
                .map(String::as_str)
                .filter(|k| *k != "type" && !expected.contains(k))
                .collect(),
            None => vec![name],
        };
        let set: BTreeSet<&str> = unknown.iter().copied().collect();
        let next = prober.attempt(&set);
        let made_missing = next.as_deref().is_some_and(|m| {
            unknown
                .iter()
                .any(|u| m.starts_with(&format!("missing field `{u}`")))
        });
        if set.contains(name) && next.as_deref() != Some(original) && !made_missing {
            for u in unknown {
                blamed.insert(u, Some(format!("unknown field `{u}`{tail}")));
            }
            current = next;
        }
    }

    // 2. Whatever is still wrong, by probing. Errors surface one at a time, so probe again
    //    with the blamed keys left out until the rest deserialises (or nothing more can be
    //    blamed, or the budget is spent).
    'rounds: while let Some(error) = current.take() {
        if error.starts_with("missing field") {
            break;
        }
        let left_out: BTreeSet<&str> = blamed.keys().copied().collect();
        let mut fresh = Vec::new();
        for k in table.keys().map(String::as_str) {
            if k == "type" || left_out.contains(k) {
                continue;
            }
            if prober.probes >= MAX_PROBES {
                blamed.extend(fresh.into_iter().map(|k| (k, None)));
                break 'rounds;
            }
            let mut without = left_out.clone();
            without.insert(k);
            if prober.attempt(&without).as_deref() != Some(error.as_str()) {
                fresh.push(k);
            }
        }
        if fresh.is_empty() || prober.probes >= MAX_PROBES {
            blamed.extend(fresh.into_iter().map(|k| (k, None)));
            break;
        }
        blamed.extend(fresh.into_iter().map(|k| (k, None)));
        current = prober.attempt(&blamed.keys().copied().collect());
    }

    if blamed.is_empty() {
        return (vec![ConfigIssue::new(key, original)], prober.probes);
    }
    // 3. Each named key's own message: the error with only it left in.
    let all: BTreeSet<&str> = blamed.keys().copied().collect();
    let mut issues = Vec::with_capacity(MAX_NAMED_KEYS + 1);
    for (k, message) in blamed.iter().take(MAX_NAMED_KEYS) {
        let message = match message {
            Some(m) => m.clone(),
            None if prober.probes < MAX_PROBES => {
                let mut others = all.clone();
                others.remove(k);
                match prober.attempt(&others) {
                    Some(m) if !m.starts_with("missing field") => m,
                    _ => original.to_string(),
                }
            }
            None => original.to_string(),
        };
        issues.push(ConfigIssue::new(format!("{key}.{k}"), message));
    }
    if blamed.len() > MAX_NAMED_KEYS {
        issues.push(ConfigIssue::new(
            key,
            format!(
                "and {} more bad keys, not listed",
                blamed.len() - MAX_NAMED_KEYS
            ),
        ));
    }
    (issues, prober.probes)
}

/// For serde's "unknown field `x`, expected ..." about a key of `table`: the key and the rest
/// of the message.
fn unknown_field<'t, 'm>(table: &'t toml::Table, message: &'m str) -> Option<(&'t str, &'m str)> {
    let rest = message.strip_prefix("unknown field `")?;
    // Keys may hold backticks themselves, so match against the real keys.
    table.keys().find_map(|k| {
        let tail = rest.strip_prefix(k.as_str())?.strip_prefix('`')?;
        Some((k.as_str(), tail))
    })
}

/// The field names in the tail of serde's unknown-field message (", expected `a` or `b`",
/// ", expected one of `a`, `b`, `c`", ", there are no fields"); `None` if it has another form.
fn expected_fields(tail: &str) -> Option<Vec<&str>> {
    if tail == ", there are no fields" {
        return Some(Vec::new());
    }
    let list = tail.strip_prefix(", expected ")?;
    let names: Vec<&str> = list.split('`').skip(1).step_by(2).collect();
    (!names.is_empty()).then_some(names)
}

fn strategy_names() -> String {
    let names: Vec<_> = registry::strategies().iter().map(|d| d.name).collect();
    if names.is_empty() {
        "(none registered: link a strategy crate)".to_string()
    } else {
        names.join(", ")
    }
}

fn describe(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => format!("string {s:?}"),
        toml::Value::Integer(i) => format!("integer {i}"),
        toml::Value::Float(x) => format!("float {x}"),
        toml::Value::Boolean(b) => format!("boolean {b}"),
        toml::Value::Datetime(d) => format!("datetime {d}"),
        toml::Value::Array(_) => "an array".to_string(),
        toml::Value::Table(_) => "a table".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::Selector;
    use serde::Serialize;

    #[derive(Debug, Default, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct ProbeConfig {
        #[serde(default)]
        width: u32,
        #[serde(default)]
        depth: u32,
    }

    crate::register_strategy! {
        name: "config_probe",
        summary: "a strategy that exists only in the config tests",
        impl StrategyConfig for ProbeConfig {
            fn validate(&self) -> Vec<ConfigIssue> {
                if self.depth > 10 {
                    vec![ConfigIssue::new("depth", "must be at most 10")]
                } else {
                    Vec::new()
                }
            }
            fn build(&self) -> Box<dyn Selector> {
                unimplemented!("never built in these tests")
            }
        }
    }

    fn issues(text: &str) -> Vec<String> {
        RouterConfig::from_toml(text)
            .unwrap_err()
            .issues
            .into_iter()
            .map(|i| i.key)
            .collect()
    }

    #[test]
    fn every_problem_is_collected_and_names_its_key() {
        let keys = issues(
            "max_connections = -1\nbudget = 3\n[strategy]\ntype = \"config_probe\"\nwidth = \"wide\"\ndepth = true\n",
        );
        assert_eq!(
            keys,
            [
                "budget",
                "max_connections",
                "strategy.depth",
                "strategy.width"
            ]
        );
    }

    #[test]
    fn indexers_and_a_deny_list_are_read_and_checked() {
        let ok = RouterConfig::from_toml(
            "indexers = [\"wss://index.example\"]\n[url_policy]\ndeny = [\"spam.example\"]\n\
             [strategy]\ntype = \"config_probe\"\n",
        )
        .unwrap();
        assert_eq!(ok.indexers, ["wss://index.example"]);
        assert!(ok.url_policy.deny.denies("wss://spam.example"));
        let many: Vec<String> = (0..=MAX_INDEXERS)
            .map(|i| format!("\"wss://i{i}.example\""))
            .collect();
        let text = format!(
            "indexers = [{}]\n[url_policy]\ndeny = [\"https://x\"]\n[strategy]\ntype = \"config_probe\"\n",
            many.join(",")
        );
        assert_eq!(issues(&text), ["url_policy.deny", "indexers"]);
        assert_eq!(
            issues("indexers = \"wss://one.example\"\n[strategy]\ntype = \"config_probe\"\n"),
            ["indexers"]
        );
    }

    #[test]
    fn unknown_top_level_keys_are_named_up_to_a_cap() {
        let text: String = (0..5_000).map(|i| format!("k{i} = 1\n")).collect();
        let found = issues(&format!("{text}[strategy]\ntype = \"config_probe\"\n"));
        assert_eq!(found.len(), MAX_NAMED_KEYS + 1);
        assert_eq!(found.last().map(String::as_str), Some(""));
    }

    #[test]
    fn unknown_strategy_and_unknown_field_are_named() {
        assert_eq!(issues("[strategy]\ntype = \"nope\"\n"), ["strategy.type"]);
        assert_eq!(
            issues("[strategy]\ntype = \"config_probe\"\nwdith = 2\n"),
            ["strategy.wdith"]
        );
        assert_eq!(issues("max_connections = 3\n"), ["strategy"]);
        assert_eq!(
            issues("[strategy]\ntype = \"config_probe\"\ndepth = 11\n"),
            ["strategy.depth"]
        );
    }

    #[test]
    fn thousands_of_unknown_keys_are_found_in_a_few_deserialisations() {
        let mut text = String::from("[strategy]\ntype = \"config_probe\"\nwidth = 1\n");
        for i in 0..3000 {
            text.push_str(&format!("k{i:04} = {i}\n"));
        }
        let issues = RouterConfig::from_toml(&text).unwrap_err().issues;
        assert_eq!(issues.len(), MAX_NAMED_KEYS + 1);
        assert_eq!(issues[0].key, "strategy.k0000");
        assert!(
            issues[0]
                .message
                .starts_with("unknown field `k0000`, expected"),
            "{}",
            issues[0].message
        );
        assert_eq!(issues[MAX_NAMED_KEYS - 1].key, "strategy.k0019");
        let last = &issues[MAX_NAMED_KEYS];
        assert_eq!(last.key, "strategy");
        assert_eq!(last.message, "and 2980 more bad keys, not listed");

        let value: toml::Value = toml::from_str::<toml::Table>(&text).unwrap()["strategy"].clone();
        let table = value.as_table().unwrap();
        let original = Box::<dyn StrategyConfig>::deserialize(value.clone())
            .unwrap_err()
            .to_string();
        let (_, probes) = locate_errors_counted(table, "strategy", &original);
        assert!(probes <= 2, "{probes} deserialisations");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_reported_together() {
        let err = RouterConfig::from_toml(
            "[strategy]\ntype = \"config_probe\"\nwdith = 2\ndepth = true\nzz = 1\n",
        )
        .unwrap_err();
        let keys: Vec<&str> = err.issues.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(keys, ["strategy.depth", "strategy.wdith", "strategy.zz"]);
        assert!(err.issues[0].message.contains("boolean"), "{err}");
        assert!(
            err.issues[2].message.starts_with("unknown field `zz`"),
            "{err}"
        );
    }

    #[test]
    fn a_valid_config_parses() {
        let c =
            RouterConfig::from_toml("max_connections = 7\n[strategy]\ntype = \"config_probe\"\n")
                .unwrap();
        assert_eq!(c.max_connections, 7);
        assert_eq!(
            c.pool, None,
            "all reader relays carry the residual by default"
        );
    }

    #[test]
    fn pool_is_a_positive_count_separate_from_the_budget() {
        let c = RouterConfig::from_toml(
            "max_connections = 8\npool = 4\n[strategy]\ntype = \"config_probe\"\n",
        )
        .unwrap();
        assert_eq!((c.max_connections, c.pool), (8, Some(4)));
        assert_eq!(
            issues("pool = 0\n[strategy]\ntype = \"config_probe\"\n"),
            ["pool"]
        );
        assert_eq!(
            issues("pool = \"all\"\n[strategy]\ntype = \"config_probe\"\n"),
            ["pool"]
        );
    }

    #[test]
    fn probe_connections_default_to_the_budget_and_are_bounded() {
        let parse = |text: &str| RouterConfig::from_toml(text).unwrap().probe_connections;
        assert_eq!(parse("[strategy]\ntype = \"config_probe\"\n"), None);
        assert_eq!(
            parse("probe_connections = 0\n[strategy]\ntype = \"config_probe\"\n"),
            Some(0)
        );
        for bad in ["-1", "100000", "\"many\""] {
            assert_eq!(
                issues(&format!(
                    "probe_connections = {bad}\n[strategy]\ntype = \"config_probe\"\n"
                )),
                ["probe_connections"],
                "{bad}"
            );
        }
    }

    #[test]
    fn hints_are_off_unless_asked_for_and_must_be_a_boolean() {
        let parse = |text: &str| RouterConfig::from_toml(text).unwrap().hints;
        assert!(!parse("[strategy]\ntype = \"config_probe\"\n"));
        assert!(parse("hints = true\n[strategy]\ntype = \"config_probe\"\n"));
        assert_eq!(
            issues("hints = \"yes\"\n[strategy]\ntype = \"config_probe\"\n"),
            ["hints"]
        );
    }
}

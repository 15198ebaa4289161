//! Strategy registry audit.
//!
//! Strategies register themselves with `inventory::submit!`, and the linker
//! drops a crate nobody references, so a strategy can silently vanish from
//! the registry. The static checks catch that (every `strategies/*` crate is
//! a dependency of the facade *and* referenced from its `lib.rs`) and catch
//! duplicate or badly-formed names. The dynamic check asks the CLI to load,
//! build and conformance-test every registered strategy.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use anyhow::Context as _;
use syn::visit::Visit;

use crate::util;

const FACADE_MANIFEST: &str = "crates/outbox-strategies/Cargo.toml";
const FACADE_LIB: &str = "crates/outbox-strategies/src/lib.rs";

pub fn run(root: &Path) -> anyhow::Result<bool> {
    println!();
    println!("== audit: strategy registry ==");
    let problems = static_checks(root)?;
    for p in &problems {
        println!("  - {p}");
    }
    let static_ok = problems.is_empty();
    if static_ok {
        println!("registry audit (static): every strategy crate is linked; descriptor names are unique snake_case");
    }
    let cli_ok = cli_check(root)?;
    Ok(static_ok && cli_ok)
}

/// A strategy crate found under `strategies/`.
struct StrategyCrate {
    dir: String,
    package: String,
}

fn strategy_crates(root: &Path) -> anyhow::Result<Vec<StrategyCrate>> {
    let mut out = Vec::new();
    let dir = root.join("strategies");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(out);
    };
    for entry in entries {
        let path = entry?.path();
        let manifest = path.join("Cargo.toml");
        if !manifest.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&manifest)
            .with_context(|| format!("reading {}", manifest.display()))?;
        let table: toml::Table =
            toml::from_str(&text).with_context(|| format!("parsing {}", manifest.display()))?;
        let package = table
            .get("package")
            .and_then(|p| p.get("name"))
            .and_then(|n| n.as_str())
            .with_context(|| format!("{} has no package.name", manifest.display()))?;
        out.push(StrategyCrate {
            dir: util::relative(root, &path),
            package: package.to_string(),
        });
    }
    out.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(out)
}

fn static_checks(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut problems = Vec::new();
    let crates = strategy_crates(root)?;
    if crates.is_empty() {
        problems.push("no strategy crates found under strategies/".to_string());
    }

    let manifest_text = std::fs::read_to_string(root.join(FACADE_MANIFEST))
        .with_context(|| format!("reading {FACADE_MANIFEST}"))?;
    let manifest: toml::Table =
        toml::from_str(&manifest_text).with_context(|| format!("parsing {FACADE_MANIFEST}"))?;
    let deps = manifest
        .get("dependencies")
        .and_then(|d| d.as_table())
        .cloned()
        .unwrap_or_default();

    let lib_text = std::fs::read_to_string(root.join(FACADE_LIB))
        .with_context(|| format!("reading {FACADE_LIB}"))?;
    let referenced = match syn::parse_file(&lib_text) {
        Ok(file) => {
            let mut v = CrateRefs::default();
            v.visit_file(&file);
            Some(v.names)
        }
        Err(e) => {
            problems.push(format!("{FACADE_LIB} does not parse: {e}"));
            None
        }
    };

    let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in &crates {
        if !deps.contains_key(&c.package) {
            problems.push(format!(
                "{}: `{}` is not a dependency in {FACADE_MANIFEST}",
                c.dir, c.package
            ));
        }
        let ident = c.package.replace('-', "_");
        if let Some(refs) = &referenced {
            if !refs.contains(&ident) {
                problems.push(format!(
                    "{}: `{ident}` is not referenced in {FACADE_LIB} (add `use {ident} as _;` so its registrations are linked)",
                    c.dir
                ));
            }
        }
        let found = descriptor_names(root, &c.dir, &mut problems)?;
        if found.is_empty() {
            problems.push(format!(
                "{}: no descriptor found (looked for `name: \"..\"` in `register_strategy!`, `register_scorer!`, `inventory::submit!` or a `*Descriptor {{ .. }}` literal)",
                c.dir
            ));
        }
        for (name, at) in found {
            names.entry(name).or_default().push(at);
        }
    }
    for (name, places) in &names {
        let bare = name.split('"').nth(1).unwrap_or(name);
        if !is_snake_case(bare) {
            problems.push(format!("{name} is not snake_case ({})", places.join(", ")));
        }
        if places.len() > 1 {
            problems.push(format!(
                "{name} is registered {} times ({})",
                places.len(),
                places.join(", ")
            ));
        }
    }
    Ok(problems)
}

/// Lower-case ASCII words joined by single underscores, starting with a letter.
fn is_snake_case(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_lowercase())
        && !s.ends_with('_')
        && !s.contains("__")
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// First path segments mentioned in a file: `use x::..`, `x::f()`, `extern crate x`.
#[derive(Default)]
struct CrateRefs {
    names: Vec<String>,
}

impl<'ast> Visit<'ast> for CrateRefs {
    fn visit_use_tree(&mut self, t: &'ast syn::UseTree) {
        match t {
            syn::UseTree::Path(p) => self.names.push(p.ident.to_string()),
            syn::UseTree::Name(n) => self.names.push(n.ident.to_string()),
            syn::UseTree::Rename(r) => self.names.push(r.ident.to_string()),
            syn::UseTree::Group(g) => {
                for item in &g.items {
                    self.visit_use_tree(item);
                }
            }
            syn::UseTree::Glob(_) => {}
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if let Some(first) = p.segments.first() {
            self.names.push(first.ident.to_string());
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_item_extern_crate(&mut self, e: &'ast syn::ItemExternCrate) {
        self.names.push(e.ident.to_string());
    }
}

/// Descriptor names (`strategy "x"` / `scorer "x"`) registered by one
/// strategy crate, with their locations.
fn descriptor_names(
    root: &Path,
    dir: &str,
    problems: &mut Vec<String>,
) -> anyhow::Result<Vec<(String, String)>> {
    let src = root.join(dir).join("src");
    let files = util::walk_files(root, &src, &[], &|p| {
        p.extension().is_some_and(|e| e == "rs")
    })?;
    let mut out = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let file = match syn::parse_file(&text) {
            Ok(file) => file,
            Err(e) => {
                // The build step already passed, so this is syntax `syn` does
                // not know yet; say so rather than skip silently.
                problems.push(format!(
                    "{}: cannot parse to look for descriptors: {e}",
                    util::relative(root, &path)
                ));
                continue;
            }
        };
        let mut v = Descriptors {
            file: util::relative(root, &path),
            found: Vec::new(),
        };
        v.visit_file(&file);
        out.extend(v.found);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

struct Descriptors {
    file: String,
    found: Vec<(String, String)>,
}

/// Which registry a descriptor belongs to: names must be unique per kind
/// (a strategy and a scorer live in different config tables).
fn kind_of(type_or_macro: &str) -> &'static str {
    if type_or_macro.contains("Scorer") || type_or_macro.contains("scorer") {
        "scorer"
    } else {
        "strategy"
    }
}

impl Descriptors {
    fn push(&mut self, kind: &str, lit: &syn::LitStr) {
        let line = lit.span().start().line;
        self.found.push((
            format!("{kind} \"{}\"", lit.value()),
            format!("{}:{line}", self.file),
        ));
    }

    /// `name: "..."` pairs anywhere in a token stream (the registration
    /// macros take `name: "..", summary: ..` and `submit!` takes a struct
    /// literal; both contain the same token pattern).
    fn scan_tokens(&mut self, kind: &str, tokens: proc_macro2::TokenStream) {
        use proc_macro2::TokenTree;
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, tree) in trees.iter().enumerate() {
            match tree {
                TokenTree::Group(g) => self.scan_tokens(kind, g.stream()),
                TokenTree::Ident(id) if id == "name" => {
                    let colon =
                        matches!(trees.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == ':');
                    let not_path = !matches!(trees.get(i + 2), Some(TokenTree::Punct(_)));
                    if let (true, true, Some(TokenTree::Literal(lit))) =
                        (colon, not_path, trees.get(i + 2))
                    {
                        if let Ok(lit) =
                            syn::parse2::<syn::LitStr>(TokenTree::Literal(lit.clone()).into())
                        {
                            self.push(kind, &lit);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

impl<'ast> Visit<'ast> for Descriptors {
    fn visit_expr_struct(&mut self, s: &'ast syn::ExprStruct) {
        if let Some(seg) = s.path.segments.last() {
            let ty = seg.ident.to_string();
            if ty.ends_with("Descriptor") {
                let kind = kind_of(&ty);
                for field in &s.fields {
                    let is_name = matches!(&field.member, syn::Member::Named(id) if id == "name");
                    if let (
                        true,
                        syn::Expr::Lit(syn::ExprLit {
                            lit: syn::Lit::Str(lit),
                            ..
                        }),
                    ) = (is_name, &field.expr)
                    {
                        self.push(kind, lit);
                    }
                }
            }
        }
        syn::visit::visit_expr_struct(self, s);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let Some(last) = m.path.segments.last() else {
            return;
        };
        let name = last.ident.to_string();
        let kind = match name.as_str() {
            "register_strategy" | "register_scorer" => kind_of(&name),
            "submit" => {
                let text = m.tokens.to_string();
                kind_of(
                    text.split_whitespace()
                        .find(|w| w.ends_with("Descriptor"))
                        .unwrap_or(""),
                )
            }
            _ => return,
        };
        self.scan_tokens(kind, m.tokens.clone());
    }
}

fn combined(out: &Output) -> String {
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    s
}

fn echo(out: &Output) {
    let text = combined(out);
    for line in text.lines() {
        println!("  | {line}");
    }
}

/// Whether clap (or a similar parser) rejected the arguments, as opposed to
/// the check itself failing.
fn is_usage_error(out: &Output) -> bool {
    let err = String::from_utf8_lossy(&out.stderr);
    out.status.code() == Some(2)
        || err.contains("unrecognized subcommand")
        || err.contains("unexpected argument")
        || err.contains("unrecognized argument")
}

fn outbox(root: &Path, args: &[&str]) -> anyhow::Result<Output> {
    let mut cmd = util::cargo(root);
    cmd.args(["run", "-q", "-p", "outbox-cli", "--"]).args(args);
    util::run_output(cmd)
}

/// Run `outbox strategies --check`. A CLI that ignores its arguments would
/// "pass" anything, so first make sure it rejects an argument that cannot
/// exist; and a pass must say something.
fn cli_check(root: &Path) -> anyhow::Result<bool> {
    const UNAVAILABLE: &str = "registry audit: invalid: `outbox strategies --check` unavailable";
    let probe = outbox(root, &["strategies", "--xtask-probe-no-such-flag"])?;
    if probe.status.success() {
        echo(&probe);
        println!("{UNAVAILABLE} (the CLI accepted a nonexistent flag, so it does not parse `strategies --check` yet)");
        return Ok(false);
    }
    let out = outbox(root, &["strategies", "--check"])?;
    echo(&out);
    if out.status.success() {
        if combined(&out).trim().is_empty() {
            println!("{UNAVAILABLE} (it exited 0 but printed nothing)");
            return Ok(false);
        }
        println!("registry audit (CLI): passed");
        return Ok(true);
    }
    if is_usage_error(&out) {
        println!("{UNAVAILABLE} (the CLI rejected the arguments)");
    } else {
        println!(
            "registry audit: FAILED: `outbox strategies --check` exited with {}",
            out.status
        );
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case() {
        assert!(is_snake_case("greedy"));
        assert!(is_snake_case("greedy_set_cover2"));
        assert!(!is_snake_case("Greedy"));
        assert!(!is_snake_case("greedy-cover"));
        assert!(!is_snake_case("_greedy"));
        assert!(!is_snake_case("greedy__x"));
        assert!(!is_snake_case("greedy_"));
        assert!(!is_snake_case(""));
    }

    #[test]
    fn finds_descriptor_names() {
        let src = r#"
            outbox_core::register_strategy! {
                name: "greedy",
                summary: "set cover",
                example: "type = \"greedy\"",
            }
            outbox_core::register_scorer! { name: "uniform", summary: "s", example: "e" }
            inventory::submit! {
                StrategyDescriptor { name: "submitted", summary: "", example: "" }
            }
            const D: ScorerDescriptor = ScorerDescriptor { name: "constant", summary: "", example: "" };
            fn unrelated() { let p = Person { name: "bob" }; }
        "#;
        let file = syn::parse_file(src).unwrap();
        let mut v = Descriptors {
            file: "f.rs".into(),
            found: Vec::new(),
        };
        v.visit_file(&file);
        let names: Vec<&str> = v.found.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "strategy \"greedy\"",
                "scorer \"uniform\"",
                "strategy \"submitted\"",
                "scorer \"constant\""
            ]
        );
    }
}

//! Tidy checks: what the docs name exists, and what the code bounds the docs name.
//!
//! - every `MAX_*` constant of the workspace's production sources is named in `docs/limits.md`;
//! - every workspace crate and `outbox <command>` that README.md and ARCHITECTURE.md name exists;
//! - README.md's `rust` blocks run as doctests (of `outbox-strategies`), none of them skipped
//!   but those that are the text of a file the workspace builds and tests.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// Top-level directories holding the workspace's crates.
const CRATE_ROOTS: &[&str] = &["crates", "strategies", "tests", "xtask"];

/// The docs whose crate and command names are checked.
const NAMING_DOCS: &[&str] = &["README.md", "ARCHITECTURE.md"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `.rs` file under `dir`, skipping `target`, test, bench and example directories.
fn production_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(
                name.as_str(),
                "target" | "tests" | "benches" | "examples" | "fixtures"
            ) {
                production_sources(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// The `MAX_*` constants of a file, outside `#[cfg(test)]` modules.
#[derive(Default)]
struct Bounds(Vec<String>);

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta.require_list().is_ok_and(|l| {
                l.tokens
                    .to_string()
                    .split(|c: char| !c.is_alphanumeric())
                    .any(|w| w == "test")
            })
    })
}

impl<'ast> Visit<'ast> for Bounds {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_cfg_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_cfg_test(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }
    fn visit_item_const(&mut self, c: &'ast syn::ItemConst) {
        if c.ident.to_string().starts_with("MAX_") && !is_cfg_test(&c.attrs) {
            self.0.push(c.ident.to_string());
        }
        syn::visit::visit_item_const(self, c);
    }
    fn visit_impl_item_const(&mut self, c: &'ast syn::ImplItemConst) {
        if c.ident.to_string().starts_with("MAX_") {
            self.0.push(c.ident.to_string());
        }
    }
}

/// Whether `word` occurs in `text` as a whole identifier.
fn names(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

/// Bounds in the production sources (of `root`) that `limits` does not name, as `file: NAME`.
fn undocumented_bounds(root: &Path, limits: &str) -> Vec<String> {
    let mut files = Vec::new();
    for dir in CRATE_ROOTS {
        production_sources(&root.join(dir), &mut files);
    }
    files.sort();
    assert!(!files.is_empty(), "no sources under {}", root.display());
    let mut missing = Vec::new();
    for file in files {
        let ast =
            syn::parse_file(&read(&file)).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let mut bounds = Bounds::default();
        bounds.visit_file(&ast);
        for name in bounds.0 {
            if !names(limits, &name) {
                let shown = file.strip_prefix(root).unwrap_or(&file).display();
                missing.push(format!("{shown}: {name}"));
            }
        }
    }
    missing
}

#[test]
fn every_max_bound_is_named_in_the_limits_page() {
    let root = root();
    let limits = read(&root.join("docs/limits.md"));
    let missing = undocumented_bounds(&root, &limits);
    assert!(
        missing.is_empty(),
        "bounds not named in docs/limits.md (add a row saying what is bounded, the value, \
         where, and what happens beyond it):\n{}",
        missing.join("\n")
    );
}

/// The check itself: a bound the page does not name is reported, one it names is not.
#[test]
fn an_undocumented_bound_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("crates/demo/src");
    fs::create_dir_all(&src).unwrap();
    fs::write(
        src.join("lib.rs"),
        "pub const MAX_WIDGETS: usize = 3;\nconst MAX_GADGETS: u8 = 1;\n\
         #[cfg(test)]\nmod tests { const MAX_IN_TESTS: u8 = 1; }\n",
    )
    .unwrap();
    let missing = undocumented_bounds(dir.path(), "| Widgets | 3 (`MAX_WIDGETS`) |");
    assert_eq!(missing, ["crates/demo/src/lib.rs: MAX_GADGETS"]);
}

/// The workspace's package names, from each member's manifest.
fn packages(root: &Path) -> BTreeSet<String> {
    let manifest: toml::Table = toml::from_str(&read(&root.join("Cargo.toml"))).unwrap();
    manifest["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let member: toml::Table =
                toml::from_str(&read(&root.join(m.as_str().unwrap()).join("Cargo.toml"))).unwrap();
            member["package"]["name"].as_str().unwrap().to_string()
        })
        .collect()
}

/// The `outbox` subcommands: the variants of the CLI's `Command` enum, as clap names them.
fn subcommands(root: &Path) -> BTreeSet<String> {
    let main = syn::parse_file(&read(&root.join("crates/outbox-cli/src/lib.rs"))).unwrap();
    let command = main
        .items
        .iter()
        .find_map(|item| match item {
            syn::Item::Enum(e) if e.ident == "Command" => Some(e),
            _ => None,
        })
        .expect("outbox-cli's lib.rs has `enum Command`");
    command
        .variants
        .iter()
        .map(|v| {
            let mut kebab = String::new();
            for (i, c) in v.ident.to_string().chars().enumerate() {
                if c.is_uppercase() && i > 0 {
                    kebab.push('-');
                }
                kebab.push(c.to_ascii_lowercase());
            }
            kebab
        })
        .collect()
}

/// Crate names (`outbox-…`), crate directories and `outbox <command>`s a doc names.
fn named_in(doc: &str) -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
    let (mut crates, mut dirs, mut commands) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '/' | '.' | '*'))
            .collect()
    };
    for (i, _) in doc.match_indices("outbox-") {
        let token = word(&doc[i..]);
        let token = token.trim_end_matches(['.', '-']);
        // Formats (`outbox-world/1`) and subscription ids (`outbox-feed-7`) are not crates.
        if !token.contains(['/', '*']) && !token.chars().any(|c| c.is_ascii_digit()) {
            crates.insert(token.to_string());
        }
    }
    for prefix in ["crates/", "strategies/", "tests/"] {
        for (i, _) in doc.match_indices(prefix) {
            if i > 0 && !matches!(doc.as_bytes()[i - 1], b'`' | b'(' | b'[' | b' ' | b'\n') {
                continue;
            }
            let token = word(&doc[i..]);
            let dir: Vec<&str> = token.splitn(3, '/').take(2).collect();
            if dir.len() == 2 && !dir[1].is_empty() && dir[1] != "*" && !dir[1].contains('.') {
                dirs.insert(dir.join("/"));
            }
        }
    }
    // `outbox X` in code (inline or in blocks), and `-p outbox-cli -- X`.
    for pattern in ["`outbox ", "\noutbox ", "outbox-cli -- ", "release/outbox "] {
        for (i, _) in doc.match_indices(pattern) {
            let rest = doc[i + pattern.len()..].trim_start_matches(' ');
            let rest = skip_global_options(rest);
            let command: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                .collect();
            if !command.is_empty() && !command.starts_with('-') {
                commands.insert(command);
            }
        }
    }
    (crates, dirs, commands)
}

/// Skips `--log LEVEL` and other options given before the subcommand.
fn skip_global_options(mut rest: &str) -> &str {
    while let Some(option) = rest.strip_prefix("--") {
        let mut words = option.splitn(3, ' ');
        words.next();
        words.next();
        rest = words.next().unwrap_or("");
    }
    rest
}

#[test]
fn every_crate_and_command_the_docs_name_exists() {
    let root = root();
    let packages = packages(&root);
    let commands = subcommands(&root);
    assert!(
        commands.contains("feed") && commands.contains("bench"),
        "{commands:?}"
    );
    let mut problems = Vec::new();
    for doc in NAMING_DOCS {
        let (crates, dirs, used) = named_in(&read(&root.join(doc)));
        assert!(
            !crates.is_empty() && !used.is_empty(),
            "{doc}: nothing found"
        );
        for name in crates.difference(&packages) {
            problems.push(format!("{doc}: crate `{name}` is not a workspace package"));
        }
        for dir in dirs {
            if !root.join(&dir).join("Cargo.toml").is_file() {
                problems.push(format!("{doc}: `{dir}` is not a crate directory"));
            }
        }
        for command in used.difference(&commands) {
            problems.push(format!("{doc}: `outbox {command}` is not a subcommand"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The README's fenced blocks whose info string starts with `rust`: (info, text), the text
/// without the fence's indentation.
fn rust_blocks(readme: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        let Some(info) = trimmed.strip_prefix("```") else {
            continue;
        };
        let indent = line.len() - trimmed.len();
        let mut text = String::new();
        for body in lines.by_ref() {
            if body.trim_start().starts_with("```") {
                break;
            }
            text.push_str(body.get(indent..).unwrap_or(body.trim_start()));
            text.push('\n');
        }
        if info.starts_with("rust") {
            blocks.push((info.to_string(), text));
        }
    }
    blocks
}

/// Every README `rust` block runs as a doctest, except a `rust,ignore` block that is the whole
/// text of a source file the workspace builds (a binary that cannot run as a doctest, shown as
/// it is and compiled and tested where it lives).
#[test]
fn the_readme_rust_blocks_run_as_doctests() {
    let root = root();
    let readme = read(&root.join("README.md"));
    let blocks = rust_blocks(&readme);
    assert!(
        blocks.iter().any(|(info, _)| info == "rust"),
        "README.md has no rust block"
    );
    let mut sources = Vec::new();
    for dir in CRATE_ROOTS {
        production_sources(&root.join(dir), &mut sources);
    }
    let texts: Vec<String> = sources.iter().map(|f| read(f)).collect();
    for (info, text) in &blocks {
        match info.as_str() {
            "rust" => {}
            "rust,ignore" => assert!(
                texts.contains(text),
                "a README `rust,ignore` block is not the text of a workspace source file:\n{text}"
            ),
            _ => panic!("a README block is not run: ```{info}"),
        }
    }
    let facade = read(&root.join("crates/outbox-strategies/src/lib.rs"));
    assert!(
        facade.contains("#[cfg(doctest)]")
            && facade.contains("#[doc = include_str!(\"../../../README.md\")]"),
        "outbox-strategies no longer runs README.md's blocks as doctests"
    );
}

#[test]
fn readme_blocks_are_read_without_their_indentation() {
    let readme = "```rust\nlet a = 1;\n```\n\n1. step\n\n   ```rust,ignore\n   fn main() {\n       x();\n   }\n   ```\n```toml\nk = 1\n```\n";
    assert_eq!(
        rust_blocks(readme),
        [
            ("rust".to_string(), "let a = 1;\n".to_string()),
            (
                "rust,ignore".to_string(),
                "fn main() {\n    x();\n}\n".to_string()
            ),
        ]
    );
}

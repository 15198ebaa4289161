//! Tidy checks: what the docs name exists, and what the code bounds the docs name.
//!
//! - every `MAX_*` constant of the workspace's production sources is named in `docs/limits.md`;
//! - every "Where" entry of `docs/limits.md` names a crate that exists, and the modules, files
//!   and names it gives are found in that crate, as are the constants its row's bound names;
//! - every workspace crate and `outbox <command>` that README.md and ARCHITECTURE.md name exists;
//! - every file (`slot/pages.rs`) and Rust name (`Sockets::keep`, `nostr_outbox_client::paging`)
//!   that ARCHITECTURE.md, README.md and docs/usage.md name in a code span is held by the code;
//! - README.md's `rust` blocks run as doctests (of `nostr-outbox-strategies`), none of them skipped
//!   but those that are the text of a file the workspace builds and tests.

use std::collections::{BTreeMap, BTreeSet};
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

/// Runs `check` on the workspace and docs/limits.md; fails saying `what` is wrong, then every
/// problem it found.
fn check_limits_page(check: fn(&Path, &str) -> Vec<String>, what: &str) {
    let root = root();
    let limits = read(&root.join("docs/limits.md"));
    let problems = check(&root, &limits);
    assert!(problems.is_empty(), "{what}:\n{}", problems.join("\n"));
}

#[test]
fn every_max_bound_is_named_in_the_limits_page() {
    check_limits_page(
        undocumented_bounds,
        "bounds not named in docs/limits.md (add a row saying what is bounded, the value, \
         where, and what happens beyond it)",
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

/// The dependencies the workspace declares (`[workspace.dependencies]`): a "Where" entry may
/// name one for a bound that is its own (serde_json's recursion limit).
fn workspace_dependencies(root: &Path) -> BTreeSet<String> {
    let manifest: toml::Table = toml::from_str(&read(&root.join("Cargo.toml"))).unwrap();
    manifest["workspace"]
        .get("dependencies")
        .and_then(|d| d.as_table())
        .map(|d| d.keys().cloned().collect())
        .unwrap_or_default()
}

/// One row of a table of the limits page with a "Where" column.
struct WhereRow {
    /// 1-based line in the page.
    line: usize,
    bound: String,
    place: String,
}

/// The rows of every table of `limits` whose header has a "Bound" and a "Where" column.
fn where_rows(limits: &str) -> Vec<Result<WhereRow, String>> {
    let cells = |line: &str| -> Vec<String> {
        let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
        inner.split('|').map(|c| c.trim().to_string()).collect()
    };
    let mut rows = Vec::new();
    let mut columns: Option<(usize, usize, usize)> = None;
    for (i, line) in limits.lines().enumerate() {
        if !line.starts_with('|') {
            columns = None;
            continue;
        }
        if line.starts_with("|---") {
            continue;
        }
        let row = cells(line);
        if row.first().is_some_and(|c| c == "What") {
            let at = |name: &str| row.iter().position(|c| c == name);
            columns = match (at("Bound"), at("Where")) {
                (Some(b), Some(w)) => Some((row.len(), b, w)),
                _ => None,
            };
            continue;
        }
        let Some((width, bound, place)) = columns else {
            continue;
        };
        rows.push(if row.len() == width {
            Ok(WhereRow {
                line: i + 1,
                bound: row[bound].clone(),
                place: row[place].clone(),
            })
        } else {
            Err(format!(
                "line {}: {} cells, the header has {width}",
                i + 1,
                row.len()
            ))
        });
    }
    rows
}

/// A "Where" cell read as groups, split at the commas outside parentheses: each group's
/// code spans outside parentheses (a crate, then modules or files) and inside them (names).
fn where_groups(cell: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let mut groups = vec![(Vec::new(), Vec::new())];
    let mut depth = 0usize;
    let mut chars = cell.chars();
    while let Some(c) = chars.next() {
        match c {
            '`' => {
                let span: String = chars.by_ref().take_while(|&c| c != '`').collect();
                let group = groups.last_mut().unwrap();
                if depth == 0 {
                    group.0.push(span);
                } else {
                    group.1.push(span);
                }
            }
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => groups.push((Vec::new(), Vec::new())),
            _ => {}
        }
    }
    groups.retain(|(paths, names)| !paths.is_empty() || !names.is_empty());
    groups
}

/// Every `.rs` file under `path` (itself, if it is one).
fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_file() {
        if path.extension().is_some_and(|e| e == "rs") {
            out.push(path.to_path_buf());
        }
        return;
    }
    let Ok(entries) = fs::read_dir(path) else {
        return;
    };
    for entry in entries {
        rust_files(&entry.unwrap().path(), out);
    }
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `token` is found in the crate at `dir`: a file or folder path (`examples/common`)
/// exists; a Rust path (`stats::merge`, `feed::check_summary_path`, `DeliveryStats::prune_at`)
/// is followed through the crate's module files as far as they go (`src/stats/merge.rs`,
/// `src/feed/mod.rs`), and each name left must occur in the module reached.
fn find_in_crate(dir: &Path, token: &str) -> Result<(), String> {
    if token.contains('/') || token.ends_with(".rs") {
        return if dir.join(token).exists() {
            Ok(())
        } else {
            Err(format!("no `{token}` in {}", dir.display()))
        };
    }
    let segments: Vec<&str> = token.split("::").collect();
    if !segments.iter().all(|s| is_ident(s)) {
        return Err(format!("`{token}` is neither a path nor a name"));
    }
    let mut scope = vec![dir.join("src")];
    let mut module = dir.join("src");
    let mut names = &segments[..];
    while let Some((first, rest)) = names.split_first() {
        let (file, folder) = (module.join(format!("{first}.rs")), module.join(first));
        if !file.is_file() && !folder.is_dir() {
            break;
        }
        scope = vec![file, folder.clone()];
        module = folder;
        names = rest;
    }
    let mut files = Vec::new();
    for path in &scope {
        rust_files(path, &mut files);
    }
    let texts: Vec<String> = files.iter().map(|f| read(f)).collect();
    for name in names {
        if !texts.iter().any(|t| defines(t, name)) {
            let place = scope.iter().find(|p| p.exists()).unwrap_or(&scope[0]);
            let place = place.strip_prefix(dir).unwrap_or(place);
            return Err(format!(
                "`{name}` (of `{token}`) is not defined in {}",
                place.display()
            ));
        }
    }
    Ok(())
}

/// Whether a source defines `name`: an item (`fn name`, `struct name`, `const name`, ...), a
/// field (`name:`), or a string literal that is the name alone (a JSON key, an SQL table).
fn defines(text: &str, name: &str) -> bool {
    const ITEMS: &[&str] = &[
        "fn",
        "struct",
        "enum",
        "trait",
        "type",
        "const",
        "static",
        "mod",
        "union",
        "macro_rules!",
    ];
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(name).any(|(i, _)| {
        let (before, after) = (&text[..i], &text[i + name.len()..]);
        if before.chars().next_back().is_some_and(ident) || after.chars().next().is_some_and(ident)
        {
            return false;
        }
        let item = ITEMS.iter().any(|k| {
            before
                .trim_end()
                .strip_suffix(k)
                .is_some_and(|b| !b.chars().next_back().is_some_and(ident))
        });
        let field = after.trim_start().starts_with(':') && !after.trim_start().starts_with("::");
        let literal = before.ends_with('"') && after.starts_with('"');
        item || field || literal
    })
}

/// Whether a source declares the constant `name` (`const NAME` or `static NAME`).
fn declares(text: &str, name: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(name).any(|(i, _)| {
        let before = text[..i].trim_end();
        (before.ends_with("const") || before.ends_with("static"))
            && !text[i + name.len()..].chars().next().is_some_and(ident)
    })
}

/// The constants a bound names: the code spans whose last segment is in upper case
/// (`MAX_SESSIONS`, `nip11::MAX_ENTRIES`), but not a primitive's (`u32::MAX`).
fn named_constants(bound: &str) -> Vec<String> {
    let primitives = [
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
        "f32", "f64",
    ];
    bound
        .split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|span| {
            let segments: Vec<&str> = span.split("::").collect();
            let last = *segments.last()?;
            let constant = is_ident(last)
                && last.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && last
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            (constant && !(segments.len() > 1 && primitives.contains(&segments[0])))
                .then(|| last.to_string())
        })
        .collect()
}

/// What is wrong with the "Where" column of the limits page (of the workspace at `root`): a
/// row that names no crate first, a crate that is neither a workspace package nor a workspace
/// dependency, a module, file or name not found in the crate it follows, or a constant of the
/// row's bound that none of the row's workspace crates declares.
fn where_problems(root: &Path, limits: &str) -> Vec<String> {
    let crates = package_dirs(root);
    let dependencies = workspace_dependencies(root);
    let mut problems = Vec::new();
    let mut rows = 0;
    for row in where_rows(limits) {
        let row = match row {
            Ok(row) => row,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        rows += 1;
        let line = row.line;
        let mut current: Option<(String, Option<PathBuf>)> = None;
        let mut named: Vec<PathBuf> = Vec::new();
        let groups = where_groups(&row.place);
        if groups.is_empty() {
            problems.push(format!("line {line}: the Where cell names nothing"));
        }
        for (paths, names) in groups {
            let mut paths = paths.as_slice();
            if let Some(first) = paths.first() {
                if let Some(dir) = crates.get(first) {
                    current = Some((first.clone(), Some(dir.clone())));
                    named.push(dir.clone());
                    paths = &paths[1..];
                } else if dependencies.contains(first) {
                    current = Some((first.clone(), None));
                    paths = &paths[1..];
                } else if first.starts_with("outbox-") {
                    problems.push(format!("line {line}: `{first}` is not a workspace crate"));
                    continue;
                }
            }
            let Some((name, dir)) = &current else {
                problems.push(format!(
                    "line {line}: the Where cell does not begin with a crate: {}",
                    row.place
                ));
                break;
            };
            let Some(dir) = dir else {
                continue; // a dependency's own code is not checked
            };
            for token in paths.iter().chain(&names) {
                if let Err(e) = find_in_crate(dir, token) {
                    problems.push(format!("line {line}: `{name}`: {e}"));
                }
            }
        }
        if named.is_empty() {
            continue;
        }
        let mut files = Vec::new();
        for dir in &named {
            rust_files(&dir.join("src"), &mut files);
        }
        let texts: Vec<String> = files.iter().map(|f| read(f)).collect();
        for constant in named_constants(&row.bound) {
            if !texts.iter().any(|t| declares(t, &constant)) {
                problems.push(format!(
                    "line {line}: `{constant}` is declared in none of {}",
                    row.place
                ));
            }
        }
    }
    if rows == 0 {
        problems.push("no table with a Where column".into());
    }
    problems
}

#[test]
fn every_where_of_the_limits_page_exists() {
    check_limits_page(
        where_problems,
        "docs/limits.md names places that do not hold the code (the Where column: a crate, \
         then modules, files or `(names)` found in it)",
    );
}

/// The check itself, on a made-up workspace: a row naming the crate and module that hold the
/// bound passes; a wrong crate, module, name or constant is reported, with its line.
#[test]
fn a_wrong_where_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::write(
        root.join("Cargo.toml"),
        "[workspace]\nmembers = [\"crates/demo\", \"crates/other\"]\n\
         [workspace.dependencies]\nserde_json = \"1\"\n",
    )
    .unwrap();
    for (name, files) in [
        (
            "demo",
            &[
                ("lib.rs", "pub mod widgets;\n"),
                (
                    "widgets.rs",
                    "pub const MAX_WIDGETS: usize = 3;\npub fn count_widgets() {}\n",
                ),
            ][..],
        ),
        (
            "other",
            &[("lib.rs", "pub const MAX_GADGETS: u8 = 1;\n")][..],
        ),
    ] {
        let src = root.join("crates").join(name).join("src");
        fs::create_dir_all(&src).unwrap();
        fs::write(
            root.join("crates").join(name).join("Cargo.toml"),
            format!("[package]\nname = \"outbox-{name}\"\n"),
        )
        .unwrap();
        for (file, text) in files {
            fs::write(src.join(file), text).unwrap();
        }
    }
    let page = "\
| What | Bound | Where | When exceeded |
|---|---|---|---|
| Widgets | 3 (`MAX_WIDGETS`) | `outbox-demo` `widgets` (`count_widgets`) | Refused. |
| Nesting | 128 levels, `u32::MAX` | `serde_json` | An error. |
| Gadgets | 1 (`MAX_GADGETS`) | `outbox-other`, `outbox-demo` `widgets::count_widgets` | Refused. |
| Widgets | 3 (`MAX_WIDGETS`) | `outbox-other` | Refused. |
| Widgets | 3 | `outbox-demo` `sprockets` | Refused. |
| Widgets | 3 | `outbox-demo` `widgets::count_sprockets` | Refused. |
| Widgets | 3 | `outbox-gone` `widgets` | Refused. |
| Widgets | 3 | `widgets` | Refused. |

| What | Bound | When exceeded |
|---|---|---|
| Not checked | 1 (`MAX_ANYTHING`) | — |
";
    let problems = where_problems(root, page);
    let lines: Vec<&str> = problems
        .iter()
        .map(|p| p.split(':').next().unwrap())
        .collect();
    assert_eq!(
        lines,
        ["line 6", "line 7", "line 8", "line 9", "line 10"],
        "{problems:#?}"
    );
    assert!(problems[0].contains("MAX_WIDGETS"), "{problems:#?}");
    assert!(problems[1].contains("sprockets"), "{problems:#?}");
    assert!(problems[2].contains("count_sprockets"), "{problems:#?}");
    assert!(problems[3].contains("outbox-gone"), "{problems:#?}");
    assert!(
        problems[4].contains("does not begin with a crate"),
        "{problems:#?}"
    );
}

/// The workspace's package names, from each member's manifest.
fn packages(root: &Path) -> BTreeSet<String> {
    package_dirs(root).into_keys().collect()
}

/// The workspace's packages by name, each with its directory.
fn package_dirs(root: &Path) -> BTreeMap<String, PathBuf> {
    let manifest: toml::Table = toml::from_str(&read(&root.join("Cargo.toml"))).unwrap();
    manifest["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let dir = root.join(m.as_str().unwrap());
            let member: toml::Table = toml::from_str(&read(&dir.join("Cargo.toml"))).unwrap();
            (member["package"]["name"].as_str().unwrap().to_string(), dir)
        })
        .collect()
}

/// The `outbox` subcommands: the variants of the CLI's `Command` enum, as clap names them.
fn subcommands(root: &Path) -> BTreeSet<String> {
    let main = syn::parse_file(&read(&root.join("crates/nostr-outbox/src/lib.rs"))).unwrap();
    let command = main
        .items
        .iter()
        .find_map(|item| match item {
            syn::Item::Enum(e) if e.ident == "Command" => Some(e),
            _ => None,
        })
        .expect("nostr-outbox's lib.rs has `enum Command`");
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

/// Crate names (`nostr-outbox…`), crate directories and `outbox <command>`s a doc names.
fn named_in(doc: &str) -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
    let (mut crates, mut dirs, mut commands) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '/' | '.' | '*'))
            .collect()
    };
    for (i, _) in doc.match_indices("outbox") {
        // `nostr-outbox…` is a package name; a bare `outbox-…` is one too (an old name) unless
        // quoted (a format marker such as `"outbox-stats"`).
        let start = match doc[..i].strip_suffix("nostr-") {
            Some(before) => before.len(),
            None if doc[i..].starts_with("outbox-") && !doc[..i].ends_with(['"', '-']) => i,
            None => continue,
        };
        if doc[..start].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let token = word(&doc[start..]);
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
    // `outbox X` in code (inline or in blocks), and `-p nostr-outbox -- X`.
    for pattern in [
        "`outbox ",
        "\noutbox ",
        "nostr-outbox -- ",
        "release/outbox ",
    ] {
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
    let facade = read(&root.join("crates/nostr-outbox-strategies/src/lib.rs"));
    assert!(
        facade.contains("#[cfg(doctest)]")
            && facade.contains("#[doc = include_str!(\"../../../README.md\")]"),
        "nostr-outbox-strategies no longer runs README.md's blocks as doctests"
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

/// The code spans of a Markdown text (between single backticks, outside fenced blocks), each
/// with the `### \`dir\`` section it is under (`None` before the first).
fn code_spans(doc: &str) -> Vec<(Option<String>, String)> {
    let mut spans = Vec::new();
    let mut section: Option<String> = None;
    let mut fenced = false;
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if let Some(title) = line.strip_prefix("### `") {
            section = title.split('`').next().map(str::to_string);
            continue;
        }
        if line.starts_with("## ") {
            section = None;
        }
        let mut parts = line.split('`');
        parts.next();
        while let (Some(code), Some(_)) = (parts.next(), parts.next()) {
            spans.push((section.clone(), code.to_string()));
        }
    }
    spans
}

/// What of a code span the architecture check verifies: a file or folder (`slot/pages.rs`,
/// `tests/budget.rs`), or a Rust name that starts with a type (`Sockets::keep`, `Places`) or
/// with a workspace crate (`nostr_outbox_client::paging`). Calls lose their arguments
/// (`Client::verdict(…)`); plain words, generics, expressions and commands are left alone.
fn checked_claim(span: &str) -> Option<String> {
    let span = span.split('(').next().unwrap_or(span).trim();
    let span = span.strip_suffix("()").unwrap_or(span);
    if span.ends_with(".rs")
        && span
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_/.-".contains(c))
    {
        return Some(span.to_string());
    }
    let segments: Vec<&str> = span.split("::").collect();
    if !segments.iter().all(|s| is_ident(s)) {
        return None;
    }
    let first = segments[0];
    let typed = first.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && first.chars().any(|c| c.is_ascii_lowercase());
    (typed || first.starts_with("nostr_outbox")).then(|| span.to_string())
}

/// Whether some source holds `name`: defines it (an item or a field), has it as an enum
/// variant (a line that starts with it), brings it in (`use` / `pub use`, from the workspace
/// or outside it) or uses it as a path's member (`BestRelaySelection::Hints`), so a doc may
/// name it.
fn holds(texts: &[String], name: &str) -> bool {
    let word = |w: &str| w == name;
    texts.iter().any(|t| {
        defines(t, name)
            || t.lines().any(|l| {
                let l = l.trim_start();
                let variant = l
                    .strip_prefix(name)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['(', ',', ' ', '{']))
                    && !l.starts_with("//");
                let used =
                    (l.starts_with("use ") || l.contains(" use ") || l.starts_with("pub use"))
                        && l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                            .any(word);
                variant || used
            })
            || t.match_indices(&format!("::{name}")).any(|(i, m)| {
                !t[i + m.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            })
    })
}

/// The claims of `doc` (files, types, members) the workspace does not hold: a file must
/// exist (from the root, or as the end of a path in the crate of its section, or in any
/// crate); a Rust name must have every segment after a workspace crate's name held by some
/// source ([`holds`]).
fn unheld_claims(root: &Path, doc: &str) -> Vec<String> {
    let crates = package_dirs(root);
    let mut files = Vec::new();
    for dir in crates.values() {
        rust_files(dir, &mut files);
    }
    let files: Vec<PathBuf> = files
        .into_iter()
        .filter(|f| !f.components().any(|c| c.as_os_str() == "target"))
        .collect();
    let texts: Vec<String> = files
        .iter()
        .filter(|f| f.components().any(|c| c.as_os_str() == "src"))
        .map(|f| read(f))
        .collect();
    let crate_idents: BTreeSet<String> = crates.keys().map(|k| k.replace('-', "_")).collect();
    let mut problems = BTreeSet::new();
    for (section, span) in code_spans(doc) {
        let Some(claim) = checked_claim(&span) else {
            continue;
        };
        let ok = if claim.ends_with(".rs") {
            let home = section.as_deref().map(|s| root.join(s));
            let tail = format!("/{claim}");
            root.join(&claim).is_file()
                || files.iter().any(|f| {
                    f.to_string_lossy().ends_with(&tail)
                        && home
                            .as_ref()
                            .is_none_or(|h| f.starts_with(h) || !h.is_dir())
                })
                || files.iter().any(|f| f.to_string_lossy().ends_with(&tail))
        } else {
            let segments: Vec<&str> = claim.split("::").collect();
            let names = match segments.split_first() {
                Some((first, rest)) if crate_idents.contains(*first) => rest,
                _ => &segments[..],
            };
            names.iter().all(|n| holds(&texts, n))
        };
        if !ok {
            let place = section.unwrap_or_else(|| "(top)".into());
            problems.insert(format!("`{span}` under {place}"));
        }
    }
    problems.into_iter().collect()
}

#[test]
fn every_file_and_type_the_docs_name_exists() {
    let root = root();
    for doc in ["ARCHITECTURE.md", "README.md", "docs/usage.md"] {
        let problems = unheld_claims(&root, &read(&root.join(doc)));
        assert!(
            problems.is_empty(),
            "{doc} names what the code does not hold:\n{}",
            problems.join("\n")
        );
    }
}

#[test]
fn a_stale_claim_is_reported() {
    let root = root();
    let doc = "### `crates/nostr-outbox-runtime`\n\n`start.rs` fits the feed; `Sockets::keep`, \
               `sockets/gone.rs` and `Sockets::vanished` and `NoSuchType`.\n";
    let problems = unheld_claims(&root, doc);
    assert_eq!(
        problems,
        [
            "`NoSuchType` under crates/nostr-outbox-runtime",
            "`Sockets::vanished` under crates/nostr-outbox-runtime",
            "`sockets/gone.rs` under crates/nostr-outbox-runtime",
        ],
        "{problems:?}"
    );
}

//! `cargo xtask package`: every publishable crate packages as it would be published.
//!
//! A crate is publishable unless its manifest says `publish = false` (xtask and the test-only
//! crates do). For those, two checks:
//!
//! 1. **Metadata.** What crates.io and docs.rs show: a description, a license, a repository,
//!    a documentation link, a readme file that exists, one to five keywords in the form
//!    crates.io accepts, and one to five categories. `cargo package` only warns about most of
//!    these; here a missing one fails.
//!    Its name starts with [`NAME_PREFIX`] (`outbox-core` belongs to another project on
//!    crates.io) and its folder carries its name, so a reader finds a crate where its name
//!    says; every `nostr-outbox…` dependency line in a README names a workspace package.
//! 2. **`cargo package --workspace --no-verify`** over the publishable crates. Cargo packages
//!    them together, resolving the path dependencies among them through a temporary local
//!    registry, so a path dependency without a version, a missing readme or a dependency on
//!    an unpublishable crate fails here.
//!
//! Why `--no-verify`: verifying builds every packaged crate again on its own, outside the
//! workspace and without its profiles, so every dependency is compiled a second time. On the
//! 2-core CI machine that took 12 minutes against half a minute without it, while the test
//! step already builds and tests the same sources. What only verifying catches (a packaged
//! crate that does not build on its own, such as one including a file from outside its
//! directory) is left to `cargo package --workspace` with the same `--exclude`s, run by hand
//! before a release.

use std::path::Path;

use anyhow::Context as _;
use serde::Deserialize;

use crate::util;

/// What every publishable package's name starts with.
pub const NAME_PREFIX: &str = "nostr-outbox";

/// The most keywords and categories crates.io accepts for one crate.
const CRATES_IO_LIST_LEN: usize = 5;
/// The longest keyword crates.io accepts.
const CRATES_IO_KEYWORD_LEN: usize = 20;

/// The part of `cargo metadata --no-deps` this task reads.
#[derive(Debug, Deserialize)]
struct Metadata {
    packages: Vec<Package>,
}

/// One workspace member, with its inherited fields already filled in by cargo.
#[derive(Debug, Deserialize)]
pub struct Package {
    name: String,
    manifest_path: String,
    /// `None`: any registry; `Some([])`: `publish = false`.
    publish: Option<Vec<String>>,
    description: Option<String>,
    license: Option<String>,
    repository: Option<String>,
    documentation: Option<String>,
    readme: Option<String>,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    categories: Vec<String>,
}

impl Package {
    fn publishable(&self) -> bool {
        self.publish.as_ref().is_none_or(|to| !to.is_empty())
    }
}

pub fn run(root: &Path) -> anyhow::Result<bool> {
    let packages = workspace_packages(root)?;
    let (publishable, private): (Vec<&Package>, Vec<&Package>) =
        packages.iter().partition(|p| p.publishable());
    anyhow::ensure!(
        !publishable.is_empty(),
        "no publishable crate in the workspace"
    );
    println!(
        "publishable: {}",
        publishable
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "not published (publish = false): {}",
        private
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );

    let names: Vec<&str> = packages.iter().map(|p| p.name.as_str()).collect();
    let mut problems: Vec<String> = publishable
        .iter()
        .flat_map(|p| metadata_problems(p))
        .collect();
    let readmes =
        std::iter::once(root.join("README.md")).chain(publishable.iter().filter_map(|p| {
            let readme = p.readme.as_deref()?;
            Some(Path::new(&p.manifest_path).parent()?.join(readme))
        }));
    for readme in readmes {
        let text = std::fs::read_to_string(&readme)
            .with_context(|| format!("reading {}", readme.display()))?;
        let shown = readme
            .strip_prefix(root)
            .unwrap_or(&readme)
            .display()
            .to_string();
        problems.extend(readme_dependency_problems(&shown, &text, &names));
    }
    if !problems.is_empty() {
        println!("package: crate metadata crates.io needs is missing or malformed:");
        for problem in &problems {
            println!("  - {problem}");
        }
        println!("(a crate that is not meant to be published says `publish = false`)");
        return Ok(false);
    }

    let mut cmd = util::cargo(root);
    // The check is about what would be published, not about the git state: a local run with
    // uncommitted changes packages them as they are.
    cmd.args(["package", "--workspace", "--no-verify", "--allow-dirty"]);
    for p in &private {
        cmd.args(["--exclude", &p.name]);
    }
    if !util::run_status(cmd)? {
        println!(
            "package: `cargo package` failed for a publishable crate (its error is above): \
             every dependency on a workspace crate needs a version (the [workspace.dependencies] \
             entries have one), and a publishable crate cannot depend on one with \
             `publish = false`"
        );
        return Ok(false);
    }
    println!("package: {} crates packaged", publishable.len());
    Ok(true)
}

fn workspace_packages(root: &Path) -> anyhow::Result<Vec<Package>> {
    let mut cmd = util::cargo(root);
    cmd.args(["metadata", "--no-deps", "--format-version", "1"]);
    let output = cmd.output().context("running `cargo metadata`")?;
    anyhow::ensure!(
        output.status.success(),
        "`cargo metadata` failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Metadata =
        serde_json::from_slice(&output.stdout).context("reading `cargo metadata` output")?;
    Ok(metadata.packages)
}

/// Whether crates.io accepts `word` as a keyword: ASCII letters, digits, `-`, `_` and `+`,
/// starting with a letter, at most 20 characters.
fn valid_keyword(word: &str) -> bool {
    word.len() <= CRATES_IO_KEYWORD_LEN
        && word.starts_with(|c: char| c.is_ascii_alphabetic())
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+'))
}

/// Dependency lines (`nostr-outbox… = …`) of a README that name no workspace package.
pub fn readme_dependency_problems(readme: &str, text: &str, packages: &[&str]) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let (name, _) = line.trim_start().split_once('=')?;
            let name = name.trim();
            let dependency = name.starts_with(NAME_PREFIX)
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            (dependency && !packages.contains(&name))
                .then(|| format!("{readme}: `{name}` is not a package of the workspace"))
        })
        .collect()
}

/// The license texts a package carries for its SPDX `license` expression, as the workspace
/// root names them: `LICENSE-MIT`, `LICENSE-APACHE`.
pub fn license_files(license: &str) -> Vec<&'static str> {
    let mut files = Vec::new();
    for id in license.split(|c: char| c.is_whitespace() || c == '(' || c == ')') {
        let file = match id {
            "MIT" => "LICENSE-MIT",
            "Apache-2.0" => "LICENSE-APACHE",
            _ => continue,
        };
        if !files.contains(&file) {
            files.push(file);
        }
    }
    files
}

/// Every metadata problem of one publishable package, each naming the package.
pub fn metadata_problems(p: &Package) -> Vec<String> {
    let mut problems = Vec::new();
    let name = &p.name;
    if !name.starts_with(NAME_PREFIX) {
        problems.push(format!(
            "{name}: the name does not start with `{NAME_PREFIX}`"
        ));
    }
    let folder = Path::new(&p.manifest_path)
        .parent()
        .and_then(Path::file_name)
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    if folder != *name {
        problems.push(format!("{name}: its folder is `{folder}`, not `{name}`"));
    }
    let blank = |field: &Option<String>| field.as_deref().is_none_or(|v| v.trim().is_empty());
    for (field, value) in [
        ("description", &p.description),
        ("license", &p.license),
        ("repository", &p.repository),
        ("documentation", &p.documentation),
        ("readme", &p.readme),
    ] {
        if blank(value) {
            problems.push(format!("{name}: no `{field}`"));
        }
    }
    if let Some(readme) = p.readme.as_deref().filter(|r| !r.trim().is_empty()) {
        let dir = Path::new(&p.manifest_path)
            .parent()
            .unwrap_or_else(|| Path::new("."));
        if !dir.join(readme).is_file() {
            problems.push(format!("{name}: readme `{readme}` is not a file"));
        }
    }
    if let Some(license) = p.license.as_deref() {
        let dir = Path::new(&p.manifest_path)
            .parent()
            .unwrap_or_else(|| Path::new("."));
        for file in license_files(license) {
            if !dir.join(file).is_file() {
                problems.push(format!(
                    "{name}: `{file}` is not in the package, though its license names it"
                ));
            }
        }
    }
    for (field, list) in [("keywords", &p.keywords), ("categories", &p.categories)] {
        if list.is_empty() || list.len() > CRATES_IO_LIST_LEN {
            problems.push(format!(
                "{name}: {} {field}, crates.io takes 1 to {CRATES_IO_LIST_LEN}",
                list.len()
            ));
        }
    }
    for keyword in p.keywords.iter().filter(|k| !valid_keyword(k)) {
        problems.push(format!(
            "{name}: keyword `{keyword}` is not ASCII letters, digits, `-`, `_` or `+` starting \
             with a letter, at most {CRATES_IO_KEYWORD_LEN} characters"
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn package(dir: &Path) -> Package {
        let dir = dir.join("nostr-outbox-demo");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("README.md"), "# demo\n").unwrap();
        std::fs::write(dir.join("LICENSE-MIT"), "MIT License\n").unwrap();
        Package {
            name: "nostr-outbox-demo".into(),
            manifest_path: dir.join("Cargo.toml").to_string_lossy().into_owned(),
            publish: None,
            description: Some("A demo".into()),
            license: Some("MIT".into()),
            repository: Some("https://example.org/demo".into()),
            documentation: Some("https://docs.rs/demo".into()),
            readme: Some("README.md".into()),
            keywords: vec!["nostr".into()],
            categories: vec!["network-programming".into()],
        }
    }

    #[test]
    fn complete_metadata_passes() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            metadata_problems(&package(dir.path())),
            Vec::<String>::new()
        );
    }

    #[test]
    fn every_missing_field_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = package(dir.path());
        p.description = None;
        p.repository = Some("  ".into());
        p.keywords.clear();
        assert_eq!(
            metadata_problems(&p),
            [
                "nostr-outbox-demo: no `description`",
                "nostr-outbox-demo: no `repository`",
                "nostr-outbox-demo: 0 keywords, crates.io takes 1 to 5",
            ]
        );
    }

    #[test]
    fn the_readme_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = package(dir.path());
        p.readme = Some("MISSING.md".into());
        assert_eq!(
            metadata_problems(&p),
            ["nostr-outbox-demo: readme `MISSING.md` is not a file"]
        );
    }

    #[test]
    fn keywords_follow_crates_io_rules() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = package(dir.path());
        p.keywords = ["a", "b", "c", "d", "e", "f"].map(String::from).to_vec();
        assert_eq!(
            metadata_problems(&p),
            ["nostr-outbox-demo: 6 keywords, crates.io takes 1 to 5"]
        );
        p.keywords = vec!["nip65".into(), "9lives".into(), "two words".into()];
        let problems = metadata_problems(&p);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("`9lives`") && problems[1].contains("`two words`"));
        assert!(!valid_keyword(&"k".repeat(21)) && valid_keyword(&"k".repeat(20)));
    }

    #[test]
    fn the_name_has_the_prefix_and_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = package(dir.path());
        p.name = "outbox-demo".into();
        assert_eq!(
            metadata_problems(&p),
            [
                "outbox-demo: the name does not start with `nostr-outbox`",
                "outbox-demo: its folder is `nostr-outbox-demo`, not `outbox-demo`",
            ]
        );
    }

    #[test]
    fn readme_dependency_lines_name_real_packages() {
        let text = "```toml\n[dependencies]\nnostr-outbox = \"0.1\"\nnostr-outbox-cli = \"0.1\"\nnostr = \"0.45\"\n```\nlet nostr_outbox = 1;\n";
        assert_eq!(
            readme_dependency_problems("README.md", text, &["nostr-outbox", "nostr-outbox-core"]),
            ["README.md: `nostr-outbox-cli` is not a package of the workspace"]
        );
    }

    #[test]
    fn publish_false_is_not_publishable() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = package(dir.path());
        assert!(p.publishable());
        p.publish = Some(vec![]);
        assert!(!p.publishable());
        p.publish = Some(vec!["crates-io".into()]);
        assert!(p.publishable());
    }

    #[test]
    fn a_license_text_missing_from_the_package_is_a_problem() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = package(dir.path());
        p.license = Some("MIT OR Apache-2.0".into());
        assert_eq!(
            metadata_problems(&p),
            ["nostr-outbox-demo: `LICENSE-APACHE` is not in the package, though its license names it"]
        );
        assert_eq!(
            license_files("(MIT OR Apache-2.0) AND MIT"),
            ["LICENSE-MIT", "LICENSE-APACHE"]
        );
    }

    /// Every package of the workspace carries the root's license texts, unchanged, so each
    /// packaged crate holds the license its manifest names.
    #[test]
    fn every_package_carries_the_root_license_texts() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let mut dirs = vec![root.join("xtask"), root.join("tests/third-party-strategy")];
        for parent in ["crates", "strategies"] {
            for entry in std::fs::read_dir(root.join(parent)).unwrap() {
                let dir = entry.unwrap().path();
                if dir.join("Cargo.toml").is_file() {
                    dirs.push(dir);
                }
            }
        }
        let mut wrong = Vec::new();
        for file in license_files("MIT OR Apache-2.0") {
            let text = std::fs::read(root.join(file)).unwrap();
            for dir in &dirs {
                if std::fs::read(dir.join(file)).ok().as_ref() != Some(&text) {
                    wrong.push(format!("{}: {file}", dir.display()));
                }
            }
        }
        assert!(wrong.is_empty(), "missing or different: {wrong:?}");
    }
}

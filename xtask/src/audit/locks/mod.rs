//! Static lock-order audit over Rust sources.
//!
//! Deadlocks in this codebase would come from a few shapes that are visible in
//! the syntax: a guard that is still alive while the code calls something that
//! locks again, two places that nest the same pair of locks in opposite
//! orders, a non-reentrant lock taken again further down a call chain, and a
//! blocking guard kept across an `.await` (which parks the executor thread with
//! the lock held). There is no type checker here, so every rule below is a
//! heuristic, and the report lists the places the heuristics cannot see
//! instead of implying they were checked.
//!
//! # How a lock is recognised
//!
//! A zero-argument `.lock()`, `.read()`, `.write()`, `.try_lock()`,
//! `.try_read()`, `.try_write()`, `.upgradable_read()` or
//! `.blocking_{lock,read,write}()` call (with or without a following `.await`)
//! counts as an acquisition only when its receiver is known to be a lock:
//!
//! - a struct field whose declared type is `Mutex`, `RwLock`, `FairMutex`,
//!   `ReentrantMutex` or a type listed in `[extra_lock_types] types` (looking
//!   through `&`, `Arc`, `Rc`, `Box`, `LazyLock`, `Lazy`, `Pin`);
//! - a `static` of such a type;
//! - a variable bound by a `let` with such a type annotation or initialised
//!   with `Mutex::new(..)`, `Arc::new(Mutex::new(..))`, a clone of a known
//!   lock, or a field that is a lock; a function parameter of such a type;
//! - a field or variable whose name is listed in `[extra_lock_types] names`.
//!
//! Requiring zero arguments keeps `file.write(buf)` and `io::Read::read(buf)`
//! out; requiring a lock-typed receiver keeps out zero-argument `read()`s on
//! other types. A `.lock()` on a receiver the audit cannot type is listed as
//! not seen rather than guessed.
//!
//! # How a lock is named
//!
//! `Type.field` for fields (the struct that declares the field), the bare name
//! for statics, variables and parameters. Parameters are named by the
//! parameter, so two functions that take `a: &Mutex<_>, b: &Mutex<_>` and nest
//! them in opposite orders are reported as an inversion.
//!
//! # How long a guard lives
//!
//! A guard bound by `let` (including `let Ok(g) = m.try_lock() else ..` and
//! `if let`/`while let`) lives to the end of its block or to `drop(g)`.
//! `let _ = m.lock()` and guards used as temporaries live to the end of the
//! statement; temporaries in a `match`, `if let`, `while let` or `for`
//! head live for the whole expression (edition 2021 rules). Branches are
//! walked from the same starting state, so a `drop` in one branch is not
//! assumed to happen in the others.

mod analysis;
mod program;
mod walk;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use anyhow::Context as _;
use serde::Deserialize;

/// One source file to analyse; `display` is what findings print (a path
/// relative to the workspace root).
pub struct SourceFile {
    pub display: String,
    pub text: String,
}

impl SourceFile {
    pub fn read(path: &Path, display: String) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Ok(Self { display, text })
    }
}

/// Contents of `xtask/lock-ranks.toml`.
#[derive(Debug, Default, Clone)]
pub struct Config {
    /// Lock name (as the audit prints it) -> rank. Nested acquisitions must
    /// go from lower to higher rank.
    pub ranks: BTreeMap<String, i64>,
    /// Extra type names (last path segment) that behave like a mutex.
    pub extra_lock_types: Vec<String>,
    /// Field or variable names to treat as locks whatever their declared
    /// type (for lock types the audit cannot recognise from a declaration).
    pub extra_lock_names: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    ranks: BTreeMap<String, i64>,
    #[serde(default)]
    extra_lock_types: RawExtra,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawExtra {
    #[serde(default)]
    types: Vec<String>,
    #[serde(default)]
    names: Vec<String>,
}

impl Config {
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let raw: RawConfig = toml::from_str(text)?;
        Ok(Self {
            ranks: raw.ranks,
            extra_lock_types: raw.extra_lock_types.types,
            extra_lock_names: raw.extra_lock_types.names,
        })
    }

    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("parsing {}", path.display()))
    }
}

/// A file and line.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Loc {
    pub file: String,
    pub line: usize,
}

impl Loc {
    pub fn new(file: &str, line: usize) -> Self {
        Self {
            file: file.to_string(),
            line,
        }
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// A problem the audit is confident enough about to fail on.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Finding {
    /// `function` holds `held` at `at` while calling something that takes
    /// other locks; `paths` shows each lock reached and how.
    HoldAndCall {
        at: Loc,
        function: String,
        held: Vec<String>,
        paths: Vec<String>,
    },
    /// Two places nest the same pair of locks in opposite orders.
    Inversion {
        first: String,
        second: String,
        first_then_second: String,
        second_then_first: String,
    },
    /// A non-reentrant lock taken again while held, directly or via calls.
    SelfDeadlock {
        at: Loc,
        function: String,
        lock: String,
        path: String,
    },
    /// A guard alive at an `.await`.
    AcrossAwait {
        at: Loc,
        function: String,
        lock: String,
        taken_line: usize,
    },
    /// Nested acquisition against the rank table.
    RankOrder {
        at: Loc,
        function: String,
        outer: String,
        inner: String,
        detail: String,
    },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::HoldAndCall {
                at,
                function,
                held,
                paths,
            } => write!(
                f,
                "hold-and-call at {at}: `{function}` holds {} while calling a lock-taker: {}",
                quoted(held),
                paths.join("; ")
            ),
            Finding::Inversion {
                first,
                second,
                first_then_second,
                second_then_first,
            } => write!(
                f,
                "lock-order inversion between `{first}` and `{second}`: `{first}` then `{second}` at {first_then_second}; `{second}` then `{first}` at {second_then_first}"
            ),
            Finding::SelfDeadlock {
                at,
                function,
                lock,
                path,
            } => write!(
                f,
                "self-deadlock at {at}: `{function}` takes non-reentrant `{lock}` again while holding it: {path}"
            ),
            Finding::AcrossAwait {
                at,
                function,
                lock,
                taken_line,
            } => write!(
                f,
                "guard held across .await at {at}: `{function}` holds `{lock}` (taken at line {taken_line})"
            ),
            Finding::RankOrder {
                at,
                function,
                outer,
                inner,
                detail,
            } => write!(
                f,
                "rank order at {at}: `{function}` takes `{inner}` while holding `{outer}`: {detail}"
            ),
        }
    }
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Categories of code the audit does not look into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum UnseenKind {
    ParseError,
    MacroDefinition,
    MacroBody,
    Closure,
    DynamicDispatch,
    FnPointer,
    UnknownReceiver,
    UnresolvedLockReceiver,
    GuardReturned,
}

impl UnseenKind {
    pub fn describe(self) -> &'static str {
        match self {
            UnseenKind::ParseError => "files that did not parse (not analysed at all)",
            UnseenKind::MacroDefinition => "macro_rules! bodies (expansions are not analysed)",
            UnseenKind::MacroBody => {
                "macro invocations whose tokens are not plain expressions and mention lock/read/write"
            }
            UnseenKind::Closure => {
                "closures / async blocks that lock: analysed on their own, but not as part of whoever runs them"
            }
            UnseenKind::DynamicDispatch => {
                "calls through trait objects / generics in code that runs under a lock"
            }
            UnseenKind::FnPointer => {
                "calls through function pointers or closure variables in code that runs under a lock"
            }
            UnseenKind::UnknownReceiver => {
                "method calls on receivers of unknown type, named like a workspace lock-taker, in code that runs under a lock"
            }
            UnseenKind::UnresolvedLockReceiver => {
                ".lock()/.read()/.write() on receivers whose type is not visible (not counted as locks)"
            }
            UnseenKind::GuardReturned => {
                "functions returning a guard (the caller's hold is not tracked)"
            }
        }
    }
}

/// A place the audit could not look into.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Unseen {
    pub kind: UnseenKind,
    pub at: Loc,
    pub detail: String,
}

/// Result of one analysis run.
#[derive(Debug, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
    pub unseen: Vec<Unseen>,
    /// Every lock name the audit saw acquired.
    pub locks: BTreeSet<String>,
    pub functions: usize,
    /// Functions that take a lock directly.
    pub lock_takers: usize,
    /// Every workspace function that takes a lock, directly or through the
    /// functions it calls: where it is defined, and the locks.
    pub takers: Vec<(String, Loc, Vec<String>)>,
    /// Rank-table entries that name no lock seen in the sources.
    pub stale_ranks: Vec<String>,
}

/// Analyse `files` as one program: calls are resolved across all of them.
pub fn analyze(files: &[SourceFile], cfg: &Config) -> Report {
    let mut parse_errors = Vec::new();
    let parsed: Vec<Option<syn::File>> = files
        .iter()
        .map(|f| match syn::parse_file(&f.text) {
            Ok(file) => Some(file),
            Err(e) => {
                parse_errors.push(Unseen {
                    kind: UnseenKind::ParseError,
                    at: Loc::new(&f.display, e.span().start().line),
                    detail: e.to_string(),
                });
                None
            }
        })
        .collect();
    let prog = program::Program::build(files, &parsed, cfg);
    let walked = walk::walk_all(&prog, files, cfg);
    let mut report = analysis::analyze(&prog, files, cfg, walked);
    report.unseen.extend(parse_errors);
    report.unseen.extend(prog.unseen.iter().cloned());
    report.unseen.sort();
    report.unseen.dedup();
    report.findings.sort();
    report.findings.dedup();
    report
}

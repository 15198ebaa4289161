//! Command-line reading shared by the study examples (`informed`, `gaps`, `ablation`): options,
//! flags, the router config, and the worlds to study — generated ones (`--family`, profiles,
//! seeds) or one world file (`--world FILE`, `outbox-world/1`, read with the simulator's
//! streaming reader). Bad input ends the example with a message, never a panic.

// Each example uses part of it.
#![allow(dead_code)]

use std::fmt::Display;
use std::io::Read;
use std::path::{Path, PathBuf};

use nostr_outbox_sim::SimWorld;
use nostr_outbox_world::{generate_in, generate_with, Family, Profile, World, WorldModel};

/// Sessions per world when `--sessions` is not given (generated worlds).
pub const DEFAULT_SESSIONS: u32 = 5;

/// The largest config or suite file read.
const MAX_TEXT_BYTES: u64 = 1 << 20;

/// Prints `message` as an error and ends the example with status 2.
pub fn fail(message: impl Display) -> ! {
    eprintln!("error: {message}");
    std::process::exit(2)
}

/// The arguments: positional ones in order, `--name value` options, and bare flags (any other
/// argument starting with `-`).
#[derive(Debug)]
pub struct Args {
    /// Arguments that are neither options nor flags, in order.
    pub positional: Vec<String>,
    values: Vec<(String, String)>,
    flags: Vec<String>,
}

impl Args {
    /// Reads the process's arguments; `valued` names the options that take a value. `--world`
    /// and `--sessions` always do.
    pub fn parse(valued: &[&str]) -> Self {
        Self::from_args(std::env::args().skip(1), valued).unwrap_or_else(|e| fail(e))
    }

    /// Reads `args` as [`Args::parse`] reads the process's.
    pub fn from_args(
        args: impl IntoIterator<Item = String>,
        valued: &[&str],
    ) -> Result<Self, String> {
        let mut out = Args {
            positional: Vec::new(),
            values: Vec::new(),
            flags: Vec::new(),
        };
        let mut all = args.into_iter();
        while let Some(a) = all.next() {
            if valued.contains(&a.as_str()) || a == "--world" || a == "--sessions" {
                let Some(value) = all.next() else {
                    return Err(format!("{a} needs a value"));
                };
                out.values.push((a, value));
            } else if a.starts_with('-') {
                out.flags.push(a);
            } else {
                out.positional.push(a);
            }
        }
        Ok(out)
    }

    /// The value of option `name`, if given.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of option `name` parsed, if given.
    pub fn parsed<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, String>
    where
        T::Err: Display,
    {
        self.value(name)
            .map(|v| v.parse().map_err(|e| format!("{name} {v:?}: {e}")))
            .transpose()
    }

    /// Whether flag `name` was given.
    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    /// `--family`, the default family when absent.
    pub fn family(&self) -> Family {
        self.parsed("--family")
            .unwrap_or_else(|e| fail(e))
            .unwrap_or(Family::Default)
    }

    /// The router config TOML in the file named by positional argument 0, or plain `recall`;
    /// a config that does not parse ends the example with its problems.
    pub fn config(&self) -> String {
        let toml = self.positional.first().map_or_else(
            || "[strategy]\ntype = \"recall\"\n".into(),
            |p| read_text(Path::new(p)).unwrap_or_else(|e| fail(e)),
        );
        if let Err(e) = nostr_outbox_core::Router::from_toml(&toml) {
            fail(format!("config: {e}"));
        }
        toml
    }

    /// [`worlds`](Self::worlds) with the profiles and seeds of positional arguments 1 and 2,
    /// after the config's path; a bad argument ends the example.
    pub fn config_worlds(&self, defaults: (&str, &str)) -> Worlds {
        let positional = |i: usize| self.positional.get(i).map(String::as_str);
        self.worlds(positional(1), positional(2), defaults)
            .unwrap_or_else(|e| fail(e))
    }

    /// Positional argument `i`, comma-separated and parsed item by item, or `default`.
    pub fn list<T: std::str::FromStr>(&self, i: usize, default: &str) -> Vec<T>
    where
        T::Err: Display,
    {
        parse_list(self.positional.get(i).map_or(default, String::as_str))
            .unwrap_or_else(|e| fail(e))
    }

    /// The worlds to study. With `--world FILE`: that world, with every session it describes
    /// unless `--sessions` asks for fewer (more is an error); `profiles` and `seeds` (what the
    /// example was given of them, if anything) and `--family` must then be absent. Otherwise
    /// the generated worlds of `--family` for `profiles` × `seeds` (or the defaults), with
    /// `--sessions` (default [`DEFAULT_SESSIONS`]).
    pub fn worlds(
        &self,
        profiles: Option<&str>,
        seeds: Option<&str>,
        defaults: (&str, &str),
    ) -> Result<Worlds, String> {
        let requested = self.parsed::<u32>("--sessions")?;
        if let Some(path) = self.value("--world") {
            if profiles.is_some() || seeds.is_some() || self.value("--family").is_some() {
                return Err(
                    "--world FILE takes the place of profiles, seeds and --family".to_string(),
                );
            }
            let path = PathBuf::from(path);
            let world = read_world(&path)?;
            let sessions = world
                .sessions_to_run(requested)
                .map_err(|e| format!("--sessions: {e}"))?;
            return Ok(Worlds {
                sessions,
                source: Source::File {
                    path,
                    sim: Box::new(SimWorld::new(world)),
                },
            });
        }
        let sessions = requested.unwrap_or(DEFAULT_SESSIONS);
        if sessions == 0 || sessions > nostr_outbox_world::MAX_SESSIONS {
            return Err(format!(
                "--sessions {sessions}: between 1 and {}",
                nostr_outbox_world::MAX_SESSIONS
            ));
        }
        Ok(Worlds {
            sessions,
            source: Source::Generated {
                family: self.parsed("--family")?.unwrap_or(Family::Default),
                profiles: parse_list(profiles.unwrap_or(defaults.0))?,
                seeds: parse_seeds(seeds.unwrap_or(defaults.1))?,
            },
        })
    }
}

/// Where the studied worlds come from.
pub enum Source {
    /// Generated worlds: one per profile and seed.
    Generated {
        /// How the worlds' knobs are drawn.
        family: Family,
        /// World sizes.
        profiles: Vec<Profile>,
        /// World seeds.
        seeds: Vec<u64>,
    },
    /// One world file.
    File {
        /// Where it was read from.
        path: PathBuf,
        /// The world, prepared for scoring.
        sim: Box<SimWorld>,
    },
}

/// The worlds an example studies, and the sessions to run on each.
pub struct Worlds {
    /// Sessions per world.
    pub sessions: u32,
    /// Where the worlds come from.
    pub source: Source,
}

impl Worlds {
    /// Calls `f` with each world in turn and a short label for it (`small/3`, or a world
    /// file's name), generating each as it is reached. A generated world describes at least
    /// [`Worlds::sessions`] sessions.
    pub fn each(&self, mut f: impl FnMut(&str, &SimWorld)) {
        match &self.source {
            Source::File { sim, .. } => f(&printable(&sim.world.name), sim),
            Source::Generated {
                family,
                profiles,
                seeds,
            } => {
                for &profile in profiles {
                    for &seed in seeds {
                        let sim = SimWorld::new(generated(*family, profile, seed, self.sessions));
                        f(&format!("{profile}/{seed}"), &sim);
                    }
                }
            }
        }
    }
}

/// The world of `family`, `profile` and `seed`, describing at least `sessions` sessions (drawn
/// again with more sessions when it describes fewer, as the bench does).
fn generated(family: Family, profile: Profile, seed: u64, sessions: u32) -> World {
    let world = generate_in(family, profile, seed);
    if world.sessions >= sessions {
        return world;
    }
    let model = WorldModel {
        sessions,
        ..family.model(&WorldModel::for_profile(profile), seed)
    };
    generate_with(&model, &world.name, seed).unwrap_or_else(|e| fail(e))
}

/// A world file, read with the simulator's streaming reader (regular files only).
fn read_world(path: &Path) -> Result<World, String> {
    regular_file(path)?;
    World::read_path(path).map_err(|e| format!("reading world {}: {e}", path.display()))
}

/// A config or suite file: a regular file of at most [`MAX_TEXT_BYTES`], as UTF-8.
pub fn read_text(path: &Path) -> Result<String, String> {
    regular_file(path)?;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_TEXT_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("reading {}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_TEXT_BYTES {
        return Err(format!(
            "{} is larger than {MAX_TEXT_BYTES} bytes",
            path.display()
        ));
    }
    String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", path.display()))
}

/// Refuses anything but a regular file before it is opened (a FIFO would block the open).
fn regular_file(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    if meta.is_file() {
        Ok(())
    } else {
        Err(format!("{} is not a regular file", path.display()))
    }
}

/// A comma-separated list, each item parsed.
pub fn parse_list<T: std::str::FromStr>(text: &str) -> Result<Vec<T>, String>
where
    T::Err: Display,
{
    text.split(',')
        .map(|x| x.trim().parse().map_err(|e| format!("{x:?}: {e}")))
        .collect()
}

/// Seeds as `A-B` (inclusive, at most 10,000) or a comma-separated list.
pub fn parse_seeds(text: &str) -> Result<Vec<u64>, String> {
    let Some((a, b)) = text.split_once('-') else {
        return parse_list(text);
    };
    let number = |t: &str| {
        t.trim()
            .parse::<u64>()
            .map_err(|e| format!("seeds {text:?}: {e}"))
    };
    let (a, b) = (number(a)?, number(b)?);
    if b < a || b - a >= 10_000 {
        return Err(format!(
            "seeds {text:?}: A-B with A ≤ B, at most 10,000 seeds"
        ));
    }
    Ok((a..=b).collect())
}

/// `text` with control and direction-changing characters escaped, for the terminal.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

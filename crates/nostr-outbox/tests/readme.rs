//! Every command the README shows runs here, and what it prints matches the output shown.
//!
//! The README's `sh` blocks are read in order. Each `outbox …` line (and the quick start's
//! `cargo run … -p nostr-outbox -- …`) runs the binary in one scratch directory holding a copy of
//! `examples/`, with its data directory there too, so `outbox stats` sees what `outbox feed`
//! learned. Relays the README names (`wss://relay.example`, and the follows' relays) are local
//! relays here: their URLs are swapped in for the names on the way in and back on the way out.
//! A `text` block right after an `sh` block is the output of its commands: every line of it must
//! appear in the output, in order, where `…` stands for any text and runs of spaces are one.

use std::path::{Path, PathBuf};

use nostr::event::{Kind, Tag};
use nostr::key::{Keys, SecretKey};

use nostr_outbox_fleet::{cli, signed, RealRelay, RemoteSigner};

/// A fenced block of the README: its language and its lines.
struct Block {
    lang: String,
    lines: Vec<String>,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for line in text.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (fence, open.take()) {
            (Some(_), Some(block)) => out.push(block),
            (Some(lang), None) => {
                open = Some(Block {
                    lang: lang.trim().to_string(),
                    lines: Vec::new(),
                })
            }
            (None, Some(mut block)) => {
                block.lines.push(line.to_string());
                open = Some(block);
            }
            (None, None) => {}
        }
    }
    out
}

/// The `outbox` arguments of a shell line, or `None` for a line that is not an `outbox` command
/// (the quick start's `cargo test`). Comments are dropped; lines ending in `\` continue.
fn commands(block: &Block) -> Vec<Vec<String>> {
    let mut joined = Vec::new();
    let mut pending = String::new();
    for line in &block.lines {
        let line = line.split(" # ").next().unwrap_or("").trim_end();
        match line.strip_suffix('\\') {
            Some(head) => pending.push_str(head),
            None => {
                pending.push_str(line);
                joined.push(std::mem::take(&mut pending));
            }
        }
    }
    joined
        .iter()
        .filter_map(|line| {
            // A word in single quotes (a URL with `?` and `&`) is the word without them.
            let words: Vec<String> = line
                .split_whitespace()
                .map(|w| w.trim_matches('\'').to_string())
                .collect();
            match words.first().map(String::as_str) {
                Some("outbox") => Some(words[1..].to_vec()),
                Some("cargo") if words.get(1).map(String::as_str) == Some("run") => {
                    let at = words.iter().position(|w| w == "--")?;
                    assert!(
                        words.contains(&"nostr-outbox".to_string()),
                        "README runs something other than outbox: {line}"
                    );
                    Some(words[at + 1..].to_vec())
                }
                Some("cargo") => None, // `cargo test`: this is that command.
                Some(other) => panic!("README shows a command this test cannot run: {other}"),
                None => None,
            }
        })
        .collect()
}

fn normalise(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `line` matches `pattern`, where `…` in the pattern matches any text.
fn matches(pattern: &str, line: &str) -> bool {
    let mut parts = pattern.split('…');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = line.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// The first expected line not found in `output`, in order, or `None` when all are.
fn missing(expected: &[String], output: &str) -> Option<String> {
    let mut lines = output.lines().map(normalise);
    expected
        .iter()
        .map(|l| normalise(l))
        .filter(|l| !l.is_empty())
        .find(|want| !lines.any(|got| matches(want, &got)))
}

/// The local relays standing in for the relays the README names.
struct Relays {
    named: Vec<(&'static str, RealRelay)>,
    /// The README's remote signer (`--bunker`), holding the reader's key.
    _signer: RemoteSigner,
}

impl Relays {
    /// `text` with every README relay name replaced by its local relay's URL.
    fn to_local(&self, text: &str) -> String {
        self.named
            .iter()
            .fold(text.to_string(), |t, (name, relay)| {
                t.replace(name, &relay.url)
            })
    }

    /// `text` with every local relay URL replaced by the README's name for it, longest URL
    /// first, so a URL that is a prefix of another (`:4000`, `:40001`) cannot cut it.
    fn to_named(&self, text: &str) -> String {
        let mut named: Vec<_> = self.named.iter().collect();
        named.sort_by_key(|(_, relay)| std::cmp::Reverse(relay.url.len()));
        named
            .into_iter()
            .fold(text.to_string(), |t, (name, relay)| {
                t.replace(&format!("{}/", relay.url), name)
                    .replace(&relay.url, name)
            })
    }
}

/// A note by `keys` at a fixed time, so its id is the same on every run.
fn signed_at(keys: &Keys, content: &str, tags: Vec<Tag>, at: u64) -> nostr::event::Event {
    use nostr::event::{EventBuilder, FinalizeEvent};
    EventBuilder::new(Kind::TextNote, content)
        .tags(tags)
        .custom_created_at(nostr::types::Timestamp::from(at))
        .finalize(keys)
        .unwrap()
}

fn fixed(n: u8) -> Keys {
    Keys::new(SecretKey::from_slice(&[n; 32]).unwrap())
}

/// The README's reader (`npub1rwzv…`, secret key 0x01…01) on `wss://relay.example`, following
/// three people who write to `wss://hub.example` and relays of their own.
async fn network() -> Relays {
    let named = vec![
        ("wss://relay.example", RealRelay::start().await),
        ("wss://hub.example", RealRelay::start().await),
        ("wss://alice.example", RealRelay::start().await),
        ("wss://bob.example", RealRelay::start().await),
        // A DM relay: gift wraps only to the reader they tag, signed in (NIP-42).
        (
            "wss://dm.example",
            RealRelay::start_with(|b| b.auth_dm(true)).await,
        ),
        // Where the README's remote signer listens.
        ("wss://bunker.example", RealRelay::start().await),
    ];
    let url = |name: &str| {
        named
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap()
            .1
            .url
            .clone()
    };
    let relay = |name: &str| &named.iter().find(|(n, _)| *n == name).unwrap().1;
    let r = |name: &str| Tag::parse(["r", url(name).as_str()]).unwrap();
    let reader = fixed(1);
    let (alice, bob, carol) = (fixed(0xa1), fixed(0xb0), fixed(0xc0));
    let follows = [&alice, &bob, &carol]
        .map(|k| Tag::parse(["p", k.public_key().to_hex().as_str()]).unwrap())
        .to_vec();
    let home = relay("wss://relay.example");
    home.store(&signed(&reader, Kind::ContactList, "", follows, 3600))
        .await;
    home.store(&signed(
        &reader,
        Kind::RelayList,
        "",
        vec![r("wss://relay.example")],
        3600,
    ))
    .await;
    let writers = [
        (&alice, "wss://alice.example", "Up early today"),
        (&bob, "wss://bob.example", "Shipping the new release"),
        (&carol, "wss://hub.example", "Reading about relays"),
    ];
    for (keys, own, note) in writers {
        let list = signed(
            keys,
            Kind::RelayList,
            "",
            vec![r(own), r("wss://hub.example")],
            3600,
        );
        home.store(&list).await;
        let note = signed(keys, Kind::TextNote, note, vec![], 7200);
        relay(own).store(&note).await;
    }
    // `outbox thread`'s event (its id fixed by its fields: the README's nevent names it) on
    // Alice's relay, and Bob's reply on the hub, where Alice also writes.
    let root = signed_at(&alice, "Which relays do you read?", vec![], 1_767_000_000);
    relay("wss://alice.example").store(&root).await;
    let e = Tag::parse(["e", root.id.to_hex().as_str(), "", "root"]).unwrap();
    let reply = signed_at(&bob, "The hub, and my own", vec![e], 1_767_000_600);
    relay("wss://hub.example").store(&reply).await;
    // `outbox dms`: the reader's DM relay list on its relay, and a message from Alice there.
    let dm_list = Tag::parse(["relay", url("wss://dm.example").as_str()]).unwrap();
    home.store(&signed(&reader, Kind::InboxRelays, "", vec![dm_list], 3600))
        .await;
    relay("wss://dm.example")
        .store(&gift_wrap(&alice, &reader, "See you at the meetup?"))
        .await;
    // `outbox dms send`: Alice takes messages on the DM relay too.
    let dm_list = Tag::parse(["relay", url("wss://dm.example").as_str()]).unwrap();
    home.store(&signed(&alice, Kind::InboxRelays, "", vec![dm_list], 3600))
        .await;
    // `--bunker`: the reader's key in a remote signer whose own key (0x5e…5e) gives the
    // README's URL.
    let signer =
        RemoteSigner::start_as(fixed(0x5e), reader, relay("wss://bunker.example"), None).await;
    Relays {
        named,
        _signer: signer,
    }
}

/// A NIP-17 chat message from `from` to `to`, gift wrapped for `to`.
fn gift_wrap(from: &Keys, to: &Keys, text: &str) -> nostr::event::Event {
    use nostr::event::{EventBuilder, FinalizeEvent, FinalizeUnsignedEvent};
    let rumor = EventBuilder::new(Kind::PrivateDirectMessage, text)
        .tag(Tag::public_key(to.public_key()))
        .finalize_unsigned(from.public_key());
    nostr::nips::nip59::GiftWrapBuilder::new(to.public_key(), rumor)
        .finalize(from)
        .unwrap()
}

/// `reader.nsec` in `dir`: the README reader's key, readable by its owner alone.
fn reader_key_file(dir: &Path) {
    use nostr::nips::nip19::ToBech32;
    let path = dir.join("reader.nsec");
    std::fs::write(&path, fixed(1).secret_key().to_bech32().unwrap()).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
}

/// A scratch directory with a copy of the files of `examples/` (not its subdirectories, such
/// as `examples/worlds`, which the README's commands do not use) and a data directory.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let examples = workspace().join("examples");
    std::fs::create_dir(dir.path().join("examples")).unwrap();
    for entry in std::fs::read_dir(examples).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_file() {
            continue;
        }
        std::fs::copy(
            &path,
            dir.path().join("examples").join(path.file_name().unwrap()),
        )
        .unwrap();
    }
    dir
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_readme_command_runs_and_prints_what_the_readme_shows() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let relays = network().await;
    let dir = scratch();
    reader_key_file(dir.path());
    let blocks = blocks(&readme);
    let mut ran = 0;
    for (i, block) in blocks.iter().enumerate() {
        if block.lang != "sh" {
            continue;
        }
        let mut output = String::new();
        for args in commands(block) {
            let local: Vec<String> = args.iter().map(|a| relays.to_local(a)).collect();
            let mut cmd = cli::command(env!("CARGO_BIN_EXE_outbox"));
            cmd.args(&local)
                .current_dir(dir.path())
                .env("OUTBOX_DATA_DIR", dir.path().join("data"))
                .env("NO_COLOR", "1");
            if local != args
                && matches!(
                    args[0].as_str(),
                    "feed"
                        | "publish"
                        | "req"
                        | "count"
                        | "get"
                        | "thread"
                        | "search"
                        | "dms"
                        | "lists"
                )
            {
                cmd.arg("--allow-local"); // the named relays are on 127.0.0.1 here
            }
            let started = std::time::Instant::now();
            let out = cli::output_of(cmd).await;
            let printed = relays.to_named(&format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
            eprintln!(
                "$ outbox {} ({:.1?})\n{printed}",
                args.join(" "),
                started.elapsed()
            );
            assert!(
                out.status.success(),
                "`outbox {}` failed:\n{printed}",
                args.join(" ")
            );
            output.push_str(&printed);
            ran += 1;
        }
        if let Some(shown) = blocks.get(i + 1).filter(|b| b.lang == "text") {
            if let Some(line) = missing(&shown.lines, &output) {
                panic!("the README shows `{line}`, which the commands did not print:\n{output}");
            }
        }
    }
    assert!(ran >= 10, "only {ran} README commands found");
}

#[test]
fn the_output_check_can_fail() {
    let shown = ["world  small/seed-3".to_string(), "follows …".to_string()];
    assert_eq!(missing(&shown, "world small/seed-3\nfollows 200\n"), None);
    assert!(missing(&shown, "world small/seed-4\nfollows 200\n").is_some());
    assert!(
        missing(&shown, "follows 200\nworld small/seed-3\n").is_some(),
        "in order"
    );
    assert!(matches("a … c", "a b c") && !matches("a … c", "a b d"));
    assert!(matches("…, tagged-read …", "author-write x, tagged-read y"));
}

/// The first cells of a Markdown table row, without emphasis: the name and its figures.
fn row_cells(line: &str) -> Vec<String> {
    line.trim()
        .trim_matches('|')
        .split('|')
        .map(|c| c.trim().replace("**", ""))
        .collect()
}

/// The README's results are `docs/results.md`'s: every headline row a strategy shares with
/// the benchmark table there has the same 7-day, 1-year and 3-year figures, and the share of
/// the learnable ceiling the README quotes is the one results.md states.
#[test]
fn the_readme_quotes_the_figures_results_md_gives() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let results = std::fs::read_to_string(workspace().join("docs/results.md")).unwrap();
    let rows = |text: &str| -> Vec<Vec<String>> {
        text.lines()
            .filter(|l| l.starts_with("| ") && l.contains('±'))
            .map(row_cells)
            .collect()
    };
    // The benchmark table's section alone: later tables have rows of the same names.
    let table = results
        .split("\n## ")
        .find(|section| section.starts_with("The benchmark table"))
        .expect("results.md has a benchmark table");
    let theirs = rows(table);
    let mut compared = 0;
    for row in rows(&readme) {
        if let Some(same) = theirs.iter().find(|r| r[0] == row[0]) {
            assert_eq!(same[1..4], row[1..4], "README row {row:?}");
            compared += 1;
        }
    }
    assert!(
        compared >= 5,
        "only {compared} README rows found in results.md"
    );

    let quoted = |text: &str, marks: &str| -> Vec<String> {
        let flat = text.replace('\n', " ");
        flat.match_indices("of the learnable ceiling on these worlds")
            .filter_map(|(at, _)| {
                let share = flat[..at]
                    .trim_end()
                    .rsplit(' ')
                    .next()?
                    .trim_matches(|c| marks.contains(c));
                share.ends_with('%').then(|| share.to_string())
            })
            .collect()
    };
    let in_readme = quoted(&readme, "");
    assert!(
        !in_readme.is_empty(),
        "the README quotes no share of the ceiling"
    );
    let in_results = quoted(&results, "*");
    for share in &in_readme {
        assert!(
            in_results.contains(share),
            "the README quotes {share} of the ceiling; results.md says {in_results:?}"
        );
    }
}

/// No README says a workspace crate can be had from crates.io (none is published): their
/// dependency lines name the repository or a path, installing is from the checkout with the
/// lock file, and the quick start warns that the first build is slow.
#[test]
fn no_readme_offers_a_crates_io_release() {
    let root = workspace();
    let mut readmes = vec![root.join("README.md")];
    for parent in ["crates", "strategies"] {
        for entry in std::fs::read_dir(root.join(parent)).unwrap() {
            let readme = entry.unwrap().path().join("README.md");
            if readme.is_file() {
                readmes.push(readme);
            }
        }
    }
    let mut wrong = Vec::new();
    for path in &readmes {
        let text = std::fs::read_to_string(path).unwrap();
        for line in text.lines() {
            let trimmed = line.trim_start();
            let versioned = trimmed.starts_with("nostr-outbox")
                && trimmed
                    .split_once('=')
                    .is_some_and(|(_, v)| v.trim_start().starts_with('"'));
            let from_registry = trimmed.starts_with("cargo install") && !trimmed.contains("--path");
            if versioned || from_registry {
                wrong.push(format!("{}: {line}", path.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains("cargo install --locked --path crates/nostr-outbox"),
        "the README installs without the lock file"
    );
    assert!(
        readme.contains("first build") && readme.contains("minutes"),
        "the quick start does not say the first build is slow"
    );
}

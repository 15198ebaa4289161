//! Who reads and where: the reader options the reading commands share (`outbox req`, `get`,
//! `thread`, `search`), spelled as `outbox feed` spells them, and what they resolve to — the
//! reader's relays, a client to ask them with, the learned stats, and the relay lists of the
//! people a read names.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use nostr::event::{Event, Kind};
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr_outbox_client::{RelayDirectory, RelayDirectoryBuilder, StateStore};
use nostr_outbox_core::{DeliveryStats, UrlPolicy};
use nostr_outbox_runtime::store::Kept;
use nostr_outbox_runtime::{Client, Lookup, RuntimeConfig, Signer, SocketBudget};

/// The reader options, flattened into a command's arguments (`outbox feed` and the reading
/// commands take them alike).
#[derive(Debug, clap::Args)]
pub struct ReaderArgs {
    /// The reader's own relays (comma-separated or repeated): the residual pool, and where
    /// relay lists and the follow list are looked up.
    #[arg(long, value_delimiter = ',', required = true)]
    pub relays: Vec<String>,
    /// The reader: fetch their kind:3 follow list from `--relays`.
    #[arg(long)]
    pub npub: Option<String>,
    #[command(flatten)]
    pub keep: crate::store::StoreArgs,
    /// Keep nothing between runs (every run starts from scratch and explores anew).
    #[arg(long, conflicts_with_all = ["stats", "store"])]
    pub no_stats: bool,
    /// Relays that collect relay lists (comma-separated or repeated), asked for the follows'
    /// kind:10002 lists beside `--relays`; added to the config's `indexers`.
    #[arg(long, value_delimiter = ',')]
    pub indexers: Vec<String>,
    /// Accept loopback relays (local testing).
    #[arg(long)]
    pub allow_local: bool,
    /// Sign in (NIP-42) to relays that require it, with the secret key in this file: an nsec
    /// or 64 hex characters, readable by you alone (`chmod 600`). Only a relay that refuses to
    /// serve without sign-in sees the signed AUTH event. The key may instead come from the
    /// `OUTBOX_SECRET_KEY` environment variable; the two conflict. Without a key, such relays
    /// are set aside.
    #[arg(long, value_name = "PATH")]
    pub secret_key_file: Option<PathBuf>,
    /// A remote signer instead of a key (`--bunker`, its client key file, `--signer-timeout`).
    #[command(flatten)]
    pub remote: crate::secret::BunkerArgs,
    /// Print notes as JSON lines instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What the reader options do for one reading command, shown by its `--help` in place of the
/// feed's texts: a read asks the relays its route names once, ranks them by what `outbox feed`
/// learned and keeps nothing. Applied with `#[command(mut_args(reader::help(&TEXTS)))]`.
pub struct ReaderHelp {
    /// `--relays`.
    pub relays: &'static str,
    /// `--npub`.
    pub npub: &'static str,
    /// `--indexers`.
    pub indexers: &'static str,
    /// `--json`.
    pub json: &'static str,
}

/// `--stats` of a read.
const READ_STATS: &str = "Learned relay stats (the JSON file `outbox feed` keeps), read to rank \
    relays; a read never writes it. Default: `stats.json` in the data directory. Same as \
    `--store file:FILE`";
/// `--store` of a read.
const READ_STORE: &str = "Where `outbox feed` keeps stats and relay lists: `file:FILE` (JSON \
    files, as `--stats`) or `sqlite:PATH` (`sqlite` alone: `outbox.sqlite` in the data \
    directory); read to rank relays and for the relay lists kept there, never written. \
    Default: JSON files in the data directory";
/// `--data-dir` of a read.
const READ_DATA_DIR: &str = "Where `outbox feed` keeps stats and relay lists by default, read \
    from here (default: the platform's data directory, e.g. `~/.local/share/outbox`)";
/// `--no-stats` of a read.
const READ_NO_STATS: &str = "Read no learned stats and no kept relay lists: relays rank alike, \
    and relay lists come from the network alone";
/// `--secret-key-file` of a read.
const READ_SECRET_KEY: &str = "Sign in (NIP-42) to relays that require it, with the secret key \
    in this file: an nsec or 64 hex characters, readable by you alone (`chmod 600`). Only a \
    relay that refuses to answer without sign-in sees the signed AUTH event. The key may \
    instead come from the `OUTBOX_SECRET_KEY` environment variable; the two conflict. Without \
    a key, such a relay is reported as not answering, and why";

/// Gives the reader options `texts` (and the texts every read shares) as their help, for
/// `Command::mut_args`; any other argument is left as it is.
pub fn help(texts: &'static ReaderHelp) -> impl FnMut(clap::Arg) -> clap::Arg {
    move |arg| {
        let text = match arg.get_id().as_str() {
            "relays" => texts.relays,
            "npub" => texts.npub,
            "indexers" => texts.indexers,
            "json" => texts.json,
            "stats" => READ_STATS,
            "store" => READ_STORE,
            "data_dir" => READ_DATA_DIR,
            "no_stats" => READ_NO_STATS,
            "secret_key_file" => READ_SECRET_KEY,
            _ => return arg,
        };
        arg.help(text)
    }
}

impl ReaderArgs {
    /// The store learned state is kept in: `--store`, `--stats`, else JSON files in the data
    /// directory; none with `--no-stats`.
    pub fn open_store(&self) -> anyhow::Result<Option<Arc<dyn StateStore>>> {
        if self.no_stats {
            return Ok(None);
        }
        self.keep.open().map(Some)
    }

    /// The files these options name that a run reads or keeps: the store's (unless
    /// `--no-stats`) and the secret key file.
    pub fn files(&self) -> anyhow::Result<crate::files::RunFiles> {
        let mut files = crate::files::RunFiles::default();
        if !self.no_stats {
            files.add_store(&self.keep.location(false)?);
        }
        if let Some(path) = &self.secret_key_file {
            files.add("the secret key file", path);
        }
        if let Some(path) = &self.remote.bunker_client_key_file {
            files.add("the bunker client key file", path);
        }
        Ok(files)
    }
}

/// The reader options resolved: canonical relays, the reader, and a client holding the key.
pub struct Reader {
    /// The URL policy every relay goes through (loopback with `--allow-local`; the reader's
    /// blocked relays denied once [`Reader::lists`] has read them).
    pub policy: UrlPolicy,
    /// `--relays`, canonical.
    pub relays: Vec<String>,
    /// `--indexers`, canonical.
    pub indexers: Vec<String>,
    /// `--npub`.
    pub pubkey: Option<PublicKey>,
    /// The client every request of the command goes through.
    pub client: Client,
    /// Where learned stats and relay lists are kept (`None` with `--no-stats`).
    pub store: Option<Arc<dyn StateStore>>,
    /// `--json`.
    pub json: bool,
    /// What the store kept, once [`Reader::lists`] read it: saved again with what the
    /// command learned ([`Reader::keep_learned`]).
    kept: Option<Kept>,
}

impl ReaderArgs {
    /// Checks the options and opens a client with `config` (and the secret key, if given: one
    /// that is the reader's public key or one of `named`, the public keys the command was
    /// given, is refused).
    pub async fn open(
        &self,
        config: RuntimeConfig,
        named: &crate::secret::Known<'_>,
    ) -> anyhow::Result<Reader> {
        let policy = UrlPolicy {
            allow_loopback: self.allow_local,
            ..UrlPolicy::default()
        };
        let relays = canonical_relays(&policy, &self.relays, "relay")?;
        let indexers = canonical_relays(&policy, &self.indexers, "indexer")?;
        let pubkey = self.npub.as_deref().map(parse_key).transpose()?;
        let reader: Vec<PublicKey> = pubkey.into_iter().collect();
        let mut known = vec![("the reader's", reader.as_slice())];
        known.extend_from_slice(named);
        let keys =
            crate::secret::signer(self.secret_key_file.as_deref(), &self.remote, &known).await?;
        let store = self.open_store()?;
        Ok(Reader {
            policy,
            relays,
            indexers,
            pubkey,
            client: Client::with(config, SocketBudget::default(), keys),
            store,
            json: self.json,
            kept: None,
        })
    }
}

/// The knobs of a command that asks once and ends: its connect and EOSE waits, a fresh seed.
pub fn one_pass(connect_timeout: Duration, eose_timeout: Duration) -> RuntimeConfig {
    RuntimeConfig {
        connect_timeout,
        eose_timeout,
        once: true,
        seed: rand::random(),
        ..RuntimeConfig::default()
    }
}

/// A public key from an npub or hex, with an error that quotes it unless it may be a secret
/// key ([`crate::text::quoted_arg`]).
pub fn parse_key(raw: &str) -> anyhow::Result<PublicKey> {
    nostr_outbox_core::parse_public_key(raw.trim()).with_context(|| {
        format!(
            "not a valid npub or hex public key: {}",
            crate::text::quoted_arg(raw)
        )
    })
}

/// What [`Reader::lists`] learned: who is where, and what the lookup found and did.
pub struct Lists {
    /// The people's relay lists (kind:10002, and kind:10050 when asked).
    pub directory: RelayDirectory,
    /// The lookup: every event it found (the reader's other lists among them) and what each
    /// relay did.
    pub lookup: Lookup,
}

impl Lists {
    /// The newest event of `kind` by `author` the lookup found.
    pub fn newest(&self, author: &PublicKey, kind: Kind) -> Option<&Event> {
        self.lookup
            .events
            .iter()
            .filter(|e| e.kind == kind && e.pubkey == *author)
            .max_by_key(|e| e.created_at)
    }
}

impl Reader {
    /// `--relays`, then the indexers not among them: where lists are asked.
    pub fn lookup_relays(&self) -> Vec<String> {
        let mut out = self.relays.clone();
        for indexer in &self.indexers {
            if !out.contains(indexer) {
                out.push(indexer.clone());
            }
        }
        out
    }

    /// Whose `what` the command is about: `--npub`, else the signer's; a signer given with
    /// `--npub` must be the reader's, for `why` (what only the reader's key does).
    pub fn owner(&self, what: &str, why: &str) -> anyhow::Result<(PublicKey, Option<Signer>)> {
        let keys = self.client.signer().cloned();
        let pubkey = match (self.pubkey, &keys) {
            (Some(pubkey), _) => pubkey,
            (None, Some(keys)) => keys.public_key(),
            (None, None) => {
                bail!("whose {what}? give --npub, or the reader's --secret-key-file or --bunker")
            }
        };
        if keys.as_ref().is_some_and(|k| k.public_key() != pubkey) {
            bail!("the secret key is not the reader's (--npub): {why}");
        }
        Ok((pubkey, keys))
    }

    /// The learned relay stats (never asked relays rank alike without them); an unreadable
    /// store is a warning, not a failure: a read does not need them.
    pub async fn stats(&self) -> DeliveryStats {
        let Some(store) = &self.store else {
            return DeliveryStats::new();
        };
        match store.load().await {
            Ok(loaded) => loaded.stats,
            Err(e) => {
                eprintln!(
                    "warning: stats unreadable, ranking relays without them: {}",
                    crate::text::shown(&e.to_string())
                );
                DeliveryStats::new()
            }
        }
    }

    /// Asks the reader's relays and the indexers for the `kinds` lists of `people` and the
    /// reader (the reader's kind:10002 and kind:10006 always), and builds the directory from
    /// what came and the lists `outbox feed` kept (the newest per person wins). The reader's
    /// blocked relays (kind:10006) are denied from here on. At most
    /// [`nostr_outbox_client::routes::filter::MAX_ROUTED_PEOPLE`] people are looked up.
    pub async fn lists(&mut self, people: &[PublicKey], kinds: &[Kind]) -> Lists {
        let mut authors: Vec<PublicKey> = people
            .iter()
            .copied()
            .take(nostr_outbox_client::routes::filter::MAX_ROUTED_PEOPLE)
            .collect();
        authors.extend(self.pubkey);
        authors.sort_unstable();
        authors.dedup();
        let mut wanted = vec![Kind::RelayList];
        wanted.extend(kinds.iter().copied().filter(|k| *k != Kind::RelayList));
        if self.pubkey.is_some() {
            wanted.push(Kind::BlockedRelays);
        }
        let lookup = if authors.is_empty() {
            Lookup::default()
        } else {
            let filter = Filter::new().authors(authors).kinds(wanted);
            nostr_outbox_runtime::lookup(&self.lookup_relays(), &filter, &self.client).await
        };
        if let Some(reader) = self.pubkey {
            let blocked = lookup
                .events
                .iter()
                .filter(|e| e.kind == Kind::BlockedRelays && e.pubkey == reader)
                .max_by_key(|e| e.created_at);
            if let Some(blocked) = blocked {
                self.policy = self
                    .policy
                    .clone()
                    .denying(nostr_outbox_core::blocked_relays(blocked));
            }
        }
        let mut builder = RelayDirectoryBuilder::new(self.policy.clone());
        if let Some(store) = &self.store {
            match nostr_outbox_runtime::store::load_kept(store.as_ref()).await {
                Ok(kept) => {
                    for list in &kept.lists {
                        builder.add_relay_list(list.clone());
                    }
                    self.client.extensions().restore(&kept.extensions);
                    self.kept = Some(kept);
                }
                Err(e) => eprintln!(
                    "warning: kept relay lists unreadable: {}",
                    crate::text::shown(&e.to_string())
                ),
            }
        }
        // The lookup verified signatures (the client's config says whether).
        for event in &lookup.events {
            if matches!(event.kind, Kind::RelayList | Kind::InboxRelays) {
                builder.add_verified(event);
            }
        }
        Lists {
            directory: builder.build(),
            lookup,
        }
    }

    /// Keeps what the command learned of the relays it asked (which extensions they speak)
    /// in the store, beside what it kept already; a failure is a warning.
    pub async fn keep_learned(&self) {
        let (Some(store), Some(kept)) = (&self.store, &self.kept) else {
            return;
        };
        let learned = self.client.extensions().learned();
        if learned == kept.extensions {
            return;
        }
        let saved = nostr_outbox_runtime::store::save_kept(
            store.as_ref(),
            &kept.lists,
            &kept.penalties,
            &learned,
        );
        if let Err(e) = saved.await {
            eprintln!(
                "warning: what the relays speak not kept: {}",
                crate::text::shown(&e.to_string())
            );
        }
    }

    /// Fails when no relay of the lookup answered: nothing learned is not the same as nobody
    /// having lists. One line per relay that did not answer, and why.
    pub fn require_answer(&self, lists: &Lists) -> anyhow::Result<()> {
        let lookup = &lists.lookup;
        if lookup.relays.is_empty() || lookup.answered() > 0 {
            return Ok(());
        }
        let why: Vec<String> = lookup
            .unanswered()
            .map(|(url, outcome)| format!("{url}: {outcome}"))
            .collect();
        let hint = if self.client.signer().is_none()
            && lookup.unanswered().any(|(_, o)| {
                matches!(o, nostr_outbox_runtime::LookupOutcome::Refused { refusal, .. }
                    if *refusal == nostr_outbox_runtime::Refusal::SignIn)
            }) {
            " (give --secret-key-file to sign in)"
        } else {
            ""
        };
        bail!(
            "could not learn where anyone reads or writes: no relay answered: {}{hint}",
            why.join("; ")
        )
    }
}

/// `raws` under the policy; a relay that is not usable is an error naming the option, with a
/// word about `--allow-local` only when that is what would let it through: a loopback relay
/// refused by a policy that does not accept loopback.
pub(crate) fn canonical_relays(
    policy: &nostr_outbox_core::UrlPolicy,
    raws: impl IntoIterator<Item = impl AsRef<str>>,
    what: &str,
) -> anyhow::Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for raw in raws {
        let raw = raw.as_ref();
        match policy.canonicalize(raw) {
            Ok(url) if !out.contains(&url) => out.push(url),
            Ok(_) => {}
            Err(reason) => {
                let hint = if reason == nostr_outbox_core::DropReason::Localhost
                    && !policy.allow_loopback
                {
                    " (--allow-local for loopback)"
                } else {
                    ""
                };
                bail!(
                    "{what} {} not usable: {reason}{hint}",
                    crate::text::quoted_arg(raw)
                )
            }
        }
    }
    Ok(out)
}

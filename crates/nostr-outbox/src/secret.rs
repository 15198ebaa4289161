//! The reader's signer: a secret key from a file (`--secret-key-file`) or the
//! `OUTBOX_SECRET_KEY` environment variable, never from the command line (where every user of
//! the machine could read it), or a NIP-46 remote signer (`--bunker`, or `OUTBOX_BUNKER`),
//! which keeps the key out of this process. No error message ever contains the key, the
//! file's text or the bunker URL (it may carry a secret).

use std::path::Path;

use std::time::Duration;

use anyhow::{bail, Context};
use nostr::key::{Keys, PublicKey};
use nostr_outbox_runtime::signer::nip46::Bunker;
use nostr_outbox_runtime::Signer;

/// The environment variable holding the key (an nsec or 64 hex characters).
pub const ENV: &str = "OUTBOX_SECRET_KEY";

/// The largest key file read: an nsec is 63 characters, a hex key 64; comments and
/// whitespace are not expected.
pub const MAX_KEY_FILE_BYTES: u64 = 1024;

/// Public keys a command knows before it signs in, each list with whose they are (e.g. "the
/// reader's"): a secret key equal to one of them is a public key put where the secret belongs.
pub type Known<'a> = [(&'a str, &'a [PublicKey])];

/// The environment variable holding a `bunker://` URL, for `--bunker`.
pub const BUNKER_ENV: &str = "OUTBOX_BUNKER";

/// The remote signer options every signing command shares.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct BunkerArgs {
    /// Sign and decrypt with a NIP-46 remote signer instead of a key: its `bunker://` URL
    /// (the key stays with the signer). Also from `OUTBOX_BUNKER`; conflicts with a key.
    #[arg(
        long,
        value_name = "URL",
        env = "OUTBOX_BUNKER",
        hide_env_values = true
    )]
    pub bunker: Option<String>,
    /// With `--bunker`: keep the key this client speaks NIP-46 with in this file (an nsec,
    /// created readable by you alone on first use), so a signer that accepts its secret once
    /// knows this client on later runs. Without it each run is a new client.
    #[arg(long, value_name = "PATH", requires = "bunker")]
    pub bunker_client_key_file: Option<std::path::PathBuf>,
    /// How long one signer request may take (approving on a phone counts), in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=crate::duration::MAX_SECS))]
    pub signer_timeout: u64,
}

/// The client key in `path`: read when it exists (checked like a secret key file), else
/// made and written owner-only.
fn client_key(path: &Path) -> anyhow::Result<Keys> {
    if path.exists() {
        return read_file(path);
    }
    let keys = Keys::generate();
    let nsec = nostr::nips::nip19::ToBech32::to_bech32(keys.secret_key())
        .context("encoding the client key")?;
    let shown = crate::text::escape(&path.display().to_string());
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .with_context(|| format!("creating the bunker client key file {shown}"))?;
    std::io::Write::write_all(&mut file, nsec.as_bytes())
        .with_context(|| format!("writing the bunker client key file {shown}"))?;
    Ok(keys)
}

/// The signer, if one was given: a secret key ([`load`]) or a remote signer
/// ([`BunkerArgs`]), never both. Every signer call, connecting included, is bounded by
/// `--signer-timeout`.
pub async fn signer(
    file: Option<&Path>,
    remote: &BunkerArgs,
    known: &Known<'_>,
) -> anyhow::Result<Option<Signer>> {
    let bunker = remote.bunker.as_deref();
    let timeout = Duration::from_secs(remote.signer_timeout);
    let keys = load(file, known)?;
    match (keys, bunker) {
        (Some(_), Some(_)) => bail!(
            "a secret key (--secret-key-file or {ENV}) and a remote signer (--bunker or \
             {BUNKER_ENV}) were both given; use one"
        ),
        (Some(keys), None) => Ok(Some(Signer::from_keys(keys).with_timeout(timeout))),
        (None, Some(url)) => {
            tracing::info!("connecting to the remote signer (NIP-46)");
            let client = match &remote.bunker_client_key_file {
                Some(path) => client_key(path)?,
                None => Keys::generate(),
            };
            let signer = Bunker::connect_with(url, client, timeout)
                .await
                .context("connecting to the remote signer (--bunker)")?;
            tracing::info!(signer = %signer.name(), pubkey = %signer.public_key(), "remote signer connected");
            Ok(Some(signer))
        }
        (None, None) => Ok(None),
    }
}

/// The signing identity, if one was given: the file, else the environment variable. Both at
/// once is an error (which one was meant is unclear). Every command reads the key here, so
/// each refuses alike a key that is one of the public keys it was given (`known`).
pub fn load(file: Option<&Path>, known: &Known<'_>) -> anyhow::Result<Option<Keys>> {
    let keys = read_key(file)?;
    if let Some(keys) = &keys {
        for (whose, public) in known {
            refuse_public(keys, file, whose, *public)?;
        }
    }
    Ok(keys)
}

/// The key from the file or the environment variable, unchecked against known public keys.
fn read_key(file: Option<&Path>) -> anyhow::Result<Option<Keys>> {
    let env = std::env::var_os(ENV).filter(|v| !v.is_empty());
    match (file, env) {
        (Some(_), Some(_)) => bail!("--secret-key-file and {ENV} were both given; use one"),
        (Some(path), None) => read_file(path).map(Some),
        (None, Some(value)) => {
            let Some(text) = value.to_str() else {
                bail!("{ENV} is not a secret key: it is not UTF-8 text");
            };
            parse(text).with_context(|| format!("in {ENV}")).map(Some)
        }
        (None, None) => Ok(None),
    }
}

/// Reads a key file: a small regular file, not readable by group or others on Unix.
fn read_file(path: &Path) -> anyhow::Result<Keys> {
    let shown = crate::text::escape(&path.display().to_string());
    check_private(path).with_context(|| format!("secret key file {shown}"))?;
    let text = crate::text::read_bounded(path, MAX_KEY_FILE_BYTES)
        .with_context(|| format!("reading the secret key file {shown}"))?;
    parse(&text).with_context(|| format!("in the secret key file {shown}"))
}

/// Refuses a key file others may read, as ssh does.
#[cfg(unix)]
fn check_private(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).context("cannot read its metadata")?;
    let mode = meta.permissions().mode() & 0o777;
    if meta.is_file() && mode & 0o077 != 0 {
        bail!(
            "is readable or writable by others (mode {mode:03o}); \
             restrict it with `chmod 600`"
        );
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_path: &Path) -> anyhow::Result<()> {
    Ok(())
}

/// Refuses a secret key that is one of the `known` public keys (`whose` they are, e.g. "the
/// reader's"): a key file holding a 64-hex public key parses as the secret key of someone
/// nobody knows, and every sign-in with it would fail as if the relay refused. `file` is where
/// the key came from (else [`ENV`]); the error names it, never the key.
pub fn refuse_public<'a>(
    keys: &Keys,
    file: Option<&Path>,
    whose: &str,
    known: impl IntoIterator<Item = &'a PublicKey>,
) -> anyhow::Result<()> {
    let secret = keys.secret_key().to_secret_hex();
    if known.into_iter().any(|key| key.to_hex() == secret) {
        let source = match file {
            Some(path) => format!(
                "the secret key file {}",
                crate::text::escape(&path.display().to_string())
            ),
            None => ENV.to_string(),
        };
        bail!(
            "{source} holds {whose} public key, not a secret key: \
             give the nsec or the 64 hex characters of the secret key"
        );
    }
    Ok(())
}

/// An nsec or 64 hex characters, surrounding whitespace ignored. The parser's own error is
/// not shown: it may quote the input.
fn parse(text: &str) -> anyhow::Result<Keys> {
    let text = text.trim();
    if text.is_empty() {
        bail!("no secret key: expected an nsec or 64 hex characters");
    }
    if text.starts_with("npub1") {
        bail!("a public key (npub), not a secret key: expected an nsec or 64 hex characters");
    }
    Keys::parse(text)
        .map_err(|_| anyhow::anyhow!("not a secret key: expected an nsec or 64 hex characters"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr::nips::nip19::ToBech32;

    #[test]
    fn nsec_and_hex_parse_to_the_same_keys_and_errors_never_echo_the_text() {
        let keys = Keys::generate();
        let hex = keys.secret_key().to_secret_hex();
        let nsec = keys.secret_key().to_bech32().unwrap();
        assert_eq!(parse(&format!(" {hex}\n")).unwrap(), keys);
        assert_eq!(parse(&nsec).unwrap(), keys);
        for bad in [
            "nsec1notakeyatall",
            &hex[..63],
            "zz-very-secret-zz",
            &nsec[..60],
        ] {
            let err = format!("{:#}", parse(bad).unwrap_err());
            assert!(err.contains("not a secret key"), "{err}");
            assert!(!err.contains(bad), "{err}");
        }
        assert!(format!("{:#}", parse(" \n").unwrap_err()).contains("no secret key"));
    }

    #[test]
    fn public_keys_are_refused_as_secret_keys() {
        let reader = Keys::generate().public_key();
        let err = format!("{:#}", parse(&reader.to_bech32().unwrap()).unwrap_err());
        assert!(err.contains("public key (npub)"), "{err}");
        let as_secret = parse(&reader.to_hex()).expect("any 32 bytes parse");
        let file = Path::new("reader.key");
        let err = refuse_public(&as_secret, Some(file), "the reader's", [&reader]).unwrap_err();
        let err = format!("{err:#}");
        assert!(err.contains("the reader's public key"), "{err}");
        assert!(
            err.contains("reader.key") && !err.contains(&reader.to_hex()),
            "{err}"
        );
        let err = refuse_public(&as_secret, None, "a follow's", [&reader]).unwrap_err();
        assert!(format!("{err:#}").contains(ENV), "{err:#}");
        let own = Keys::generate();
        refuse_public(&own, None, "the reader's", [&own.public_key()]).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn key_files_others_can_read_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        let keys = Keys::generate();
        std::fs::write(&path, keys.secret_key().to_secret_hex()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = format!("{:#}", read_file(&path).unwrap_err());
        assert!(err.contains("chmod 600") && err.contains("644"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_file(&path).unwrap(), keys);
    }
}

//! Which relay URLs a route table accepts, and how they are normalised.
//!
//! Relay lists are written by anyone. A hostile or sloppy list can point a client at its own
//! router, at an intranet host, or at thousands of relays. The policy turns every raw URL into a
//! canonical one or a [`DropReason`] that is counted and can be explained to the user.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use nostr::types::url::{Host, RelayUrl, Url};
use serde::{Deserialize, Serialize};

/// What a route table accepts. Every restriction can be lifted (tests need loopback relays).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UrlPolicy {
    /// Accept `localhost` and loopback addresses.
    pub allow_loopback: bool,
    /// Accept private, link-local, unique-local and other non-global addresses.
    pub allow_private: bool,
    /// Accept public IP literals (relays are normally named by domain).
    pub allow_ip_literals: bool,
    /// Accept `.onion` hosts (only reachable through Tor).
    pub allow_onion: bool,
    /// Longest accepted URL, in bytes.
    pub max_url_len: usize,
    /// Longest accepted list: only the first this many write relays of a list are kept.
    pub max_write_relays: usize,
    /// Relays never to be asked (`deny = ["wss://relay.example", "host.example"]`, plus the
    /// reader's kind:10006 blocked relays): a URL matches one relay, a bare host every relay on
    /// that host.
    pub deny: DenyList,
}

impl Default for UrlPolicy {
    fn default() -> Self {
        Self {
            allow_loopback: false,
            allow_private: false,
            allow_ip_literals: false,
            allow_onion: false,
            max_url_len: 256,
            max_write_relays: 12,
            deny: DenyList::default(),
        }
    }
}

impl UrlPolicy {
    /// A policy for tests and local development: loopback relays are accepted.
    pub fn allow_local() -> Self {
        Self {
            allow_loopback: true,
            ..Self::default()
        }
    }

    /// A policy that accepts any address (loopback, private, IP literals, onion): for naming a
    /// relay someone already chose (a deny list entry, a relay to look up in kept stats) in its
    /// canonical form, never for choosing relays to dial.
    pub fn permissive() -> Self {
        Self {
            allow_loopback: true,
            allow_private: true,
            allow_ip_literals: true,
            allow_onion: true,
            ..Self::default()
        }
    }

    /// Normalises `raw` into a canonical relay URL (`wss://host[:port][/path]`, lower-case host,
    /// no trailing slash), or says why it is not acceptable.
    ///
    /// Credentials, a query or a fragment make two spellings of one relay look like two relays
    /// (and credentials would be sent to whoever reads the plan), and port 0 cannot be dialled:
    /// such URLs are dropped rather than repaired.
    pub fn canonicalize(&self, raw: &str) -> Result<String, DropReason> {
        let trimmed = raw.trim();
        if trimmed.len() > self.max_url_len {
            return Err(DropReason::TooLong);
        }
        if trimmed.is_empty() || trimmed.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(DropReason::Unparsable);
        }
        let scheme_end = trimmed.find("://").ok_or(DropReason::Unparsable)?;
        let scheme = trimmed[..scheme_end].to_ascii_lowercase();
        if scheme != "ws" && scheme != "wss" {
            return Err(DropReason::NotWebSocket);
        }
        let url = RelayUrl::parse(trimmed).map_err(|_| DropReason::Unparsable)?;
        let parts: &Url = (&url).into();
        if !parts.username().is_empty() || parts.password().is_some() {
            return Err(DropReason::Credentials);
        }
        if parts.query().is_some() || parts.fragment().is_some() {
            return Err(DropReason::QueryOrFragment);
        }
        if parts.port() == Some(0) {
            return Err(DropReason::PortZero);
        }
        match url.host() {
            None => return Err(DropReason::Unparsable),
            Some(Host::Domain(domain)) => self.check_domain(domain)?,
            Some(Host::Ipv4(ip)) => self.check_ip(IpAddr::V4(ip))?,
            Some(Host::Ipv6(ip)) => self.check_ip(IpAddr::V6(ip))?,
        }
        let canonical = url.as_str_without_trailing_slash().to_string();
        if self.deny.denies(&canonical) {
            return Err(DropReason::Denied);
        }
        Ok(canonical)
    }

    /// This policy with `relays` added to its deny list (e.g. the reader's kind:10006 list);
    /// entries that are neither a relay URL nor a host name are ignored.
    pub fn denying<S: AsRef<str>>(mut self, relays: impl IntoIterator<Item = S>) -> Self {
        self.deny.extend(relays);
        self
    }

    fn check_domain(&self, domain: &str) -> Result<(), DropReason> {
        let domain = domain.trim_end_matches('.');
        if !domain.is_empty() && !is_host_name(domain) {
            return Err(DropReason::Unparsable);
        }
        if domain.is_empty() || !domain.contains('.') && domain != "localhost" {
            // A single-label name resolves only inside someone's network.
            return if self.allow_private {
                Ok(())
            } else {
                Err(DropReason::PrivateAddress)
            };
        }
        if domain == "localhost" || domain.ends_with(".localhost") {
            return if self.allow_loopback {
                Ok(())
            } else {
                Err(DropReason::Localhost)
            };
        }
        if domain.ends_with(".onion") {
            return if self.allow_onion {
                Ok(())
            } else {
                Err(DropReason::Onion)
            };
        }
        if (domain.ends_with(".local") || domain.ends_with(".internal") || domain.ends_with(".lan"))
            && !self.allow_private
        {
            return Err(DropReason::PrivateAddress);
        }
        Ok(())
    }

    fn check_ip(&self, ip: IpAddr) -> Result<(), DropReason> {
        if ip.is_loopback() {
            return if self.allow_loopback {
                Ok(())
            } else {
                Err(DropReason::Localhost)
            };
        }
        if !is_global(ip) {
            return if self.allow_private {
                Ok(())
            } else {
                Err(DropReason::PrivateAddress)
            };
        }
        if self.allow_ip_literals {
            Ok(())
        } else {
            Err(DropReason::IpLiteral)
        }
    }
}

/// Relays a reader never wants asked: canonical relay URLs and bare host names, kept sorted so
/// each check is a binary search however long the list (a kind:10006 list is written by the
/// reader, a config file by the user; both are bounded by the size of what they come in).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<String>", into = "Vec<String>")]
pub struct DenyList {
    entries: Vec<String>,
}

impl DenyList {
    /// The normal form of one entry: a relay URL in canonical form (any address accepted), or
    /// a lower-case host name; `None` for anything else.
    pub fn normalize(raw: &str) -> Option<String> {
        let raw = raw.trim();
        if raw.contains("://") {
            return UrlPolicy::permissive().canonicalize(raw).ok();
        }
        let host = raw.trim_end_matches('.').to_ascii_lowercase();
        let valid = !host.is_empty()
            && host.len() <= 253
            && host.chars().all(|c| {
                c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']')
            });
        valid.then_some(host)
    }

    /// Adds entries, skipping those [`normalize`](Self::normalize) refuses.
    pub fn extend<S: AsRef<str>>(&mut self, raw: impl IntoIterator<Item = S>) {
        self.entries
            .extend(raw.into_iter().filter_map(|r| Self::normalize(r.as_ref())));
        self.entries.sort_unstable();
        self.entries.dedup();
    }

    /// Whether a canonical relay URL is denied, by its URL or by its host.
    pub fn denies(&self, canonical: &str) -> bool {
        if self.entries.is_empty() {
            return false;
        }
        let found = |key: &str| {
            self.entries
                .binary_search_by(|e| e.as_str().cmp(key))
                .is_ok()
        };
        found(canonical) || host_of(canonical).is_some_and(found)
    }

    /// The entries, normalised and sorted.
    pub fn entries(&self) -> &[String] {
        &self.entries
    }

    /// Whether nothing is denied.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl TryFrom<Vec<String>> for DenyList {
    type Error = String;

    fn try_from(raw: Vec<String>) -> Result<Self, Self::Error> {
        if let Some(bad) = raw.iter().find(|r| Self::normalize(r).is_none()) {
            let shown: String = bad
                .chars()
                .take(80)
                .flat_map(char::escape_default)
                .collect();
            return Err(format!(
                "deny entry \"{shown}\" is neither a ws:// or wss:// relay url nor a host name"
            ));
        }
        let mut list = Self::default();
        list.extend(raw);
        Ok(list)
    }
}

impl From<DenyList> for Vec<String> {
    fn from(list: DenyList) -> Self {
        list.entries
    }
}

/// The most entries taken from one blocked-relays list; a list is one event, so this only
/// guards against absurd ones.
pub const MAX_BLOCKED_RELAYS: usize = 10_000;

/// The relays of a reader's kind:10006 blocked-relays list (its public `relay` tags), for
/// [`UrlPolicy::denying`]; empty for any other kind. Private (encrypted) entries are not read.
pub fn blocked_relays(event: &nostr::event::Event) -> Vec<String> {
    if event.kind != nostr::event::Kind::BlockedRelays {
        return Vec::new();
    }
    event
        .tags
        .iter()
        .map(|t| t.as_slice())
        .filter(|t| t.first().map(String::as_str) == Some("relay"))
        .filter_map(|t| t.get(1).cloned())
        .take(MAX_BLOCKED_RELAYS)
        .collect()
}

/// The host of a canonical relay URL (`wss://host:port/path` → `host`; IPv6 keeps its brackets).
fn host_of(canonical: &str) -> Option<&str> {
    let rest = canonical.split_once("://")?.1;
    let end = if rest.starts_with('[') {
        rest.find(']').map(|i| i + 1)?
    } else {
        rest.find([':', '/']).unwrap_or(rest.len())
    };
    Some(&rest[..end])
}

/// Whether an address is routable on the public internet (a conservative approximation of the
/// unstable `IpAddr::is_global`).
fn is_global(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_global_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_global_v4(v4);
            }
            is_global_v6(v6)
        }
    }
}

fn is_global_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240)
}

fn is_global_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local
        || (first & 0xffc0) == 0xfe80 // link local
        || first == 0x2001 && ip.segments()[1] == 0x0db8) // documentation
}

/// Why a relay-list entry was not used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// Not a `ws://` or `wss://` URL.
    NotWebSocket,
    /// Not a URL at all.
    Unparsable,
    /// A `user:pass@` part (credentials have no place in a public relay list).
    Credentials,
    /// A `?query` or `#fragment` (the same relay spelled another way, or a tracking tag).
    QueryOrFragment,
    /// Port 0, which cannot be connected to.
    PortZero,
    /// Longer than [`UrlPolicy::max_url_len`].
    TooLong,
    /// `localhost` or a loopback address.
    Localhost,
    /// A private, link-local or otherwise non-public address or name.
    PrivateAddress,
    /// A public IP literal.
    IpLiteral,
    /// A `.onion` host.
    Onion,
    /// The same relay appeared earlier in the same list.
    Duplicate,
    /// Beyond [`UrlPolicy::max_write_relays`] write relays in one list.
    OverListCap,
    /// A marker other than `read` or `write`.
    BadMarker,
    /// A tag that is not a well-formed `r` tag.
    MalformedTag,
    /// On the deny list: the config's or the reader's blocked relays (kind:10006).
    Denied,
}

/// Most characters in a host name, and in one of its labels (RFC 1035).
const MAX_HOST_LEN: usize = 253;
const MAX_LABEL_LEN: usize = 63;

/// Whether `domain` (without a trailing dot) is a name DNS can hold: labels of 1 to 63
/// characters that neither start nor end with a hyphen, 253 characters in all. The URL parser
/// accepts `a..example` and `-bad-.example`; no resolver finds them.
fn is_host_name(domain: &str) -> bool {
    domain.len() <= MAX_HOST_LEN
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= MAX_LABEL_LEN
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

impl DropReason {
    /// Every reason, in report order.
    pub const ALL: [DropReason; 15] = [
        DropReason::NotWebSocket,
        DropReason::Unparsable,
        DropReason::Credentials,
        DropReason::QueryOrFragment,
        DropReason::PortZero,
        DropReason::TooLong,
        DropReason::Localhost,
        DropReason::PrivateAddress,
        DropReason::IpLiteral,
        DropReason::Onion,
        DropReason::Duplicate,
        DropReason::OverListCap,
        DropReason::BadMarker,
        DropReason::MalformedTag,
        DropReason::Denied,
    ];

    /// A short human explanation.
    pub fn describe(self) -> &'static str {
        match self {
            DropReason::NotWebSocket => "not a ws:// or wss:// url",
            DropReason::Unparsable => "not a parsable url",
            DropReason::Credentials => "url with user:password credentials",
            DropReason::QueryOrFragment => "url with a query string or fragment",
            DropReason::PortZero => "url with port 0",
            DropReason::TooLong => "url longer than the policy allows",
            DropReason::Localhost => "localhost or loopback address",
            DropReason::PrivateAddress => "private, link-local or intranet address",
            DropReason::IpLiteral => "ip literal instead of a domain",
            DropReason::Onion => ".onion host",
            DropReason::Duplicate => "duplicate within one list",
            DropReason::OverListCap => "list longer than the per-list cap",
            DropReason::BadMarker => "marker is neither read nor write",
            DropReason::MalformedTag => "malformed r tag",
            DropReason::Denied => "on the deny list (config or the reader's blocked relays)",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(raw: &str) -> Result<String, DropReason> {
        UrlPolicy::default().canonicalize(raw)
    }

    #[test]
    fn malformed_host_names_are_dropped() {
        let long_label = format!("wss://{}.example", "a".repeat(64));
        for raw in [
            "wss://a..example",
            "wss://-bad-.example",
            "wss://bad-.example",
            "wss://relay.-x.example",
            long_label.as_str(),
        ] {
            assert_eq!(canon(raw), Err(DropReason::Unparsable), "{raw}");
        }
        let longest_label = format!("wss://{}.example", "a".repeat(63));
        for raw in [
            "wss://relay.example.",
            "wss://re-lay.example",
            "wss://xn--bcher-kva.example",
            longest_label.as_str(),
        ] {
            assert!(canon(raw).is_ok(), "{raw}: {:?}", canon(raw));
        }
    }

    #[test]
    fn normalises_case_slash_and_default_port() {
        assert_eq!(
            canon("WSS://Relay.Example.COM/").unwrap(),
            "wss://relay.example.com"
        );
        assert_eq!(
            canon("wss://relay.example.com:443").unwrap(),
            "wss://relay.example.com"
        );
        assert_eq!(
            canon("  ws://r.example:7777/path/ ").unwrap(),
            "ws://r.example:7777/path"
        );
    }

    #[test]
    fn credentials_query_fragment_and_port_zero_are_dropped() {
        let drops = [
            ("wss://user:pass@r.example", DropReason::Credentials),
            ("wss://user@r.example", DropReason::Credentials),
            ("wss://:secret@r.example/", DropReason::Credentials),
            ("wss://r.example/?token=abc", DropReason::QueryOrFragment),
            ("wss://r.example?", DropReason::QueryOrFragment),
            ("wss://r.example/#frag", DropReason::QueryOrFragment),
            ("wss://r.example/path#", DropReason::QueryOrFragment),
            ("wss://r.example:0", DropReason::PortZero),
            ("ws://r.example:0/path", DropReason::PortZero),
        ];
        for (raw, reason) in drops {
            assert_eq!(canon(raw), Err(reason), "{raw}");
        }
        // The same relays written plainly are kept.
        assert_eq!(
            canon("wss://r.example:1/path").unwrap(),
            "wss://r.example:1/path"
        );
    }

    #[test]
    fn new_reasons_are_counted_in_the_drop_report() {
        use crate::route_table::{RawRelayList, RouteTableBuilder};
        let author = nostr::key::Keys::generate().public_key();
        let tags = [
            "wss://u:p@r.example",
            "wss://r.example/?x=1",
            "wss://r.example/#x",
            "wss://r.example:0",
            "wss://r.example",
        ]
        .iter()
        .map(|u| vec!["r".to_string(), u.to_string()])
        .collect();
        let mut b = RouteTableBuilder::new(UrlPolicy::default()).follows([author]);
        b.add_list(RawRelayList {
            author,
            created_at: 1,
            tags,
        });
        let t = b.build();
        let by = &t.drop_report().by_reason;
        assert_eq!(by.get(&DropReason::Credentials), Some(&1));
        assert_eq!(by.get(&DropReason::QueryOrFragment), Some(&2));
        assert_eq!(by.get(&DropReason::PortZero), Some(&1));
        assert_eq!(t.relay_count(), 1);
    }

    #[test]
    fn every_reason_is_listed_once_in_order_and_described() {
        let mut sorted = DropReason::ALL.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, DropReason::ALL);
        for reason in DropReason::ALL {
            assert!(!reason.describe().is_empty());
        }
    }

    #[test]
    fn rejects_hostile_and_useless_urls() {
        assert_eq!(canon("https://r.example"), Err(DropReason::NotWebSocket));
        assert_eq!(canon("ws://127.0.0.1:7777"), Err(DropReason::Localhost));
        assert_eq!(canon("ws://localhost"), Err(DropReason::Localhost));
        assert_eq!(canon("ws://[::1]:80"), Err(DropReason::Localhost));
        assert_eq!(canon("wss://192.168.1.4"), Err(DropReason::PrivateAddress));
        assert_eq!(canon("wss://169.254.0.9"), Err(DropReason::PrivateAddress));
        assert_eq!(canon("wss://[fe80::1]"), Err(DropReason::PrivateAddress));
        assert_eq!(canon("wss://router"), Err(DropReason::PrivateAddress));
        assert_eq!(canon("wss://8.8.8.8"), Err(DropReason::IpLiteral));
        assert_eq!(canon("wss://abc.onion"), Err(DropReason::Onion));
        assert_eq!(canon("garbage"), Err(DropReason::Unparsable));
        assert_eq!(canon("wss://"), Err(DropReason::Unparsable));
        assert_eq!(canon("wss://a b.example"), Err(DropReason::Unparsable));
        let long = format!("wss://{}.example", "a".repeat(5000));
        assert_eq!(canon(&long), Err(DropReason::TooLong));
    }

    #[test]
    fn denied_relays_are_dropped_by_url_or_by_host() {
        let p = UrlPolicy::default().denying([
            "WSS://Blocked.Example/",
            "spam.example",
            "ws://other.example:7777/path",
            "not a relay",
        ]);
        assert_eq!(
            p.deny.entries(),
            [
                "spam.example",
                "ws://other.example:7777/path",
                "wss://blocked.example"
            ]
        );
        assert_eq!(
            p.canonicalize("wss://blocked.example"),
            Err(DropReason::Denied)
        );
        assert_eq!(
            p.canonicalize("wss://spam.example:443/x/"),
            Err(DropReason::Denied)
        );
        assert_eq!(p.canonicalize("ws://spam.example"), Err(DropReason::Denied));
        assert_eq!(
            p.canonicalize("ws://other.example:7777/path"),
            Err(DropReason::Denied)
        );
        // Other ports, paths and hosts are other relays.
        for kept in [
            "ws://other.example:7777",
            "wss://blocked.example/inbox",
            "wss://not-spam.example",
            "wss://sub.spam.example",
        ] {
            assert!(p.canonicalize(kept).is_ok(), "{kept}");
        }
        assert_eq!(host_of("ws://[::1]:80/x"), Some("[::1]"));
        let local = UrlPolicy::allow_local().denying(["127.0.0.1"]);
        assert_eq!(
            local.canonicalize("ws://127.0.0.1:9"),
            Err(DropReason::Denied)
        );
    }

    #[test]
    fn a_blocked_relays_list_gives_its_relay_tags() {
        use nostr::event::{EventBuilder, FinalizeEvent, Kind, Tag};
        let keys = nostr::key::Keys::generate();
        let tags = [
            Tag::parse(["relay", "wss://blocked.example"]).unwrap(),
            Tag::parse(["r", "wss://not-a-relay-tag.example"]).unwrap(),
            Tag::parse(["relay", "spam.example"]).unwrap(),
        ];
        let list = EventBuilder::new(Kind::BlockedRelays, "")
            .tags(tags.clone())
            .finalize(&keys)
            .unwrap();
        assert_eq!(
            blocked_relays(&list),
            ["wss://blocked.example", "spam.example"]
        );
        let other = EventBuilder::new(Kind::RelayList, "")
            .tags(tags)
            .finalize(&keys)
            .unwrap();
        assert!(blocked_relays(&other).is_empty());
    }

    #[test]
    fn a_deny_list_in_config_names_its_bad_entry() {
        let ok: UrlPolicy = toml::from_str("deny = [\"wss://a.example\", \"b.example\"]").unwrap();
        assert_eq!(ok.deny.entries().len(), 2);
        let err =
            toml::from_str::<UrlPolicy>("deny = [\"wss://a.example\", \"https://\\u001b[31m\"]")
                .unwrap_err()
                .to_string();
        assert!(err.contains("https://\\u{1b}[31m"), "{err}");
    }

    #[test]
    fn allow_local_accepts_loopback_only() {
        let p = UrlPolicy::allow_local();
        assert_eq!(
            p.canonicalize("ws://127.0.0.1:7777/").unwrap(),
            "ws://127.0.0.1:7777"
        );
        assert_eq!(
            p.canonicalize("wss://10.0.0.1"),
            Err(DropReason::PrivateAddress)
        );
    }
}

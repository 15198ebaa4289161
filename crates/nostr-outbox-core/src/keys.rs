//! Public keys from untrusted text, checked to be points on the curve.
//!
//! `nostr::PublicKey::from_hex` and `parse` only decode 32 bytes; about half of all 64-hex
//! strings are not the x coordinate of a secp256k1 point. Such a "key" can never sign an
//! event, so a follow or plan entry holding one can never be served: it is rejected where keys
//! enter (follow lists, world and plan files, stats) instead of being planned for forever.

use nostr::event::{Event, Kind};
use nostr::key::PublicKey;

/// Why a string is not a usable public key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Not 64 hex digits (or, for [`parse_public_key`], an `npub`, `nprofile` or `nostr:` URI).
    #[error("not a public key (expected 64 hex digits or an npub)")]
    Malformed,
    /// Well-formed, but not the x coordinate of a point on secp256k1.
    #[error("not a valid public key: not a point on secp256k1")]
    NotOnCurve,
}

/// Parses 64 hex digits as a public key on the curve.
pub fn public_key_from_hex(hex: &str) -> Result<PublicKey, KeyError> {
    let key = PublicKey::from_hex(hex).map_err(|_| KeyError::Malformed)?;
    on_curve(key)
}

/// Parses a public key given as 64 hex digits, an `npub`/`nprofile` or a `nostr:` URI, and
/// checks that it is on the curve. Surrounding whitespace is not accepted.
pub fn parse_public_key(raw: &str) -> Result<PublicKey, KeyError> {
    let key = PublicKey::parse(raw).map_err(|_| KeyError::Malformed)?;
    on_curve(key)
}

/// Whether `key` is the x coordinate of a secp256k1 point (keys built from bytes are not
/// checked by `nostr`).
pub fn is_on_curve(key: &PublicKey) -> bool {
    key.xonly().is_ok()
}

/// The follows of a reader's kind:3 contact list: its `p` tags' keys, each checked to be on
/// the curve (others are skipped), sorted and without repeats; empty for any other kind.
pub fn follows_from_contact_list(event: &Event) -> Vec<PublicKey> {
    if event.kind != Kind::ContactList {
        return Vec::new();
    }
    let mut follows: Vec<PublicKey> = event
        .tags
        .iter()
        .map(|t| t.as_slice())
        .filter(|t| t.first().map(String::as_str) == Some("p"))
        .filter_map(|t| t.get(1))
        .filter_map(|hex| public_key_from_hex(hex).ok())
        .collect();
    follows.sort_unstable();
    follows.dedup();
    follows
}

fn on_curve(key: PublicKey) -> Result<PublicKey, KeyError> {
    if is_on_curve(&key) {
        Ok(key)
    } else {
        Err(KeyError::NotOnCurve)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr::nips::nip19::ToBech32;

    /// x as 64 hex digits.
    fn x(n: u8) -> String {
        format!("{:064x}", n)
    }

    /// The field prime: the smallest 32-byte value that is no coordinate at all.
    const P: &str = "fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc2f";

    #[test]
    fn a_contact_list_gives_its_p_tags_sorted_without_repeats() {
        use nostr::event::{EventBuilder, FinalizeEvent, Tag};
        let keys = nostr::key::Keys::generate();
        let a = nostr::key::Keys::generate().public_key();
        let b = nostr::key::Keys::generate().public_key();
        let (ha, hb, off) = (a.to_hex(), b.to_hex(), x(5));
        let tags = [
            Tag::parse(["p", hb.as_str()]).unwrap(),
            Tag::parse(["p", ha.as_str(), "wss://hint.example"]).unwrap(),
            Tag::parse(["p", hb.as_str()]).unwrap(),
            Tag::parse(["p", off.as_str()]).unwrap(),
            Tag::parse(["p", "not hex"]).unwrap(),
            Tag::parse(["e", ha.as_str()]).unwrap(),
        ];
        let list = EventBuilder::new(Kind::ContactList, "")
            .tags(tags.clone())
            .finalize(&keys)
            .unwrap();
        let mut want = vec![a, b];
        want.sort_unstable();
        assert_eq!(follows_from_contact_list(&list), want);
        let other = EventBuilder::new(Kind::RelayList, "")
            .tags(tags)
            .finalize(&keys)
            .unwrap();
        assert!(follows_from_contact_list(&other).is_empty());
    }

    #[test]
    fn nostr_alone_accepts_a_coordinate_off_the_curve() {
        // 5³ + 7 = 132 is not a square mod p, so x = 5 is on no point; 1³ + 7 = 8 is.
        assert!(PublicKey::from_hex(&x(5)).is_ok());
        assert!(PublicKey::parse(&x(5)).is_ok());
    }

    #[test]
    fn off_curve_and_out_of_field_coordinates_are_rejected() {
        for bad in [x(0), x(5), x(7), x(9), P.to_string(), "f".repeat(64)] {
            assert_eq!(
                public_key_from_hex(&bad),
                Err(KeyError::NotOnCurve),
                "{bad}"
            );
            assert_eq!(parse_public_key(&bad), Err(KeyError::NotOnCurve), "{bad}");
        }
        let off = PublicKey::from_hex(&x(5)).unwrap();
        assert!(!is_on_curve(&off));
        let npub = off.to_bech32().unwrap();
        assert_eq!(parse_public_key(&npub), Err(KeyError::NotOnCurve));
        assert_eq!(
            parse_public_key(&format!("nostr:{npub}")),
            Err(KeyError::NotOnCurve)
        );
    }

    #[test]
    fn real_keys_are_accepted_in_every_form() {
        assert!(public_key_from_hex(&x(1)).is_ok());
        let key = nostr::key::Keys::generate().public_key();
        assert_eq!(public_key_from_hex(&key.to_hex()), Ok(key));
        assert_eq!(parse_public_key(&key.to_hex()), Ok(key));
        let npub = key.to_bech32().unwrap();
        assert_eq!(parse_public_key(&npub), Ok(key));
        assert_eq!(parse_public_key(&format!("nostr:{npub}")), Ok(key));
        assert!(is_on_curve(&key));
    }

    #[test]
    fn malformed_text_is_an_error_not_a_panic() {
        let key = nostr::key::Keys::generate().public_key();
        for bad in [
            String::new(),
            "xyz".to_string(),
            x(1)[..63].to_string(),
            format!("{}0", x(1)),
            format!(" {}", x(1)),
            "npub1".to_string(),
            "é".repeat(32),
        ] {
            assert_eq!(parse_public_key(&bad), Err(KeyError::Malformed), "{bad:?}");
            assert_eq!(
                public_key_from_hex(&bad),
                Err(KeyError::Malformed),
                "{bad:?}"
            );
        }
        // Only hex is hex.
        let npub = key.to_bech32().unwrap();
        assert_eq!(public_key_from_hex(&npub), Err(KeyError::Malformed));
    }
}

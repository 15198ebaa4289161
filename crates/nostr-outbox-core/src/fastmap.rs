//! The hash map of the planning path.
//!
//! Every plan looks up each follow's learned stats by public key and each relay by URL; with
//! the standard library's SipHash that was a fifth of a plan on 2,800 follows. foldhash is
//! several times faster and still seeded at random per process, so keys chosen to collide
//! cannot be prepared in advance.

use std::collections::HashMap;

/// A `HashMap` with foldhash's seeded fast hasher.
pub(crate) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

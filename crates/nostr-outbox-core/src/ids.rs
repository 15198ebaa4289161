//! Interned identifiers.
//!
//! Planning works on dense `u32` ids instead of public keys and URLs so that the hot loops index
//! plain vectors and allocate little. Ids are only meaningful for the [`RouteTable`] that issued
//! them.
//!
//! [`RouteTable`]: crate::RouteTable

use std::fmt;

/// A followed author, interned by a [`RouteTable`](crate::RouteTable).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AuthorId(pub u32);

/// A relay (canonical URL), interned by a [`RouteTable`](crate::RouteTable).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelayId(pub u32);

impl AuthorId {
    /// The id as a vector index.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl RelayId {
    /// The id as a vector index.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for AuthorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "author#{}", self.0)
    }
}

impl fmt::Display for RelayId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "relay#{}", self.0)
    }
}

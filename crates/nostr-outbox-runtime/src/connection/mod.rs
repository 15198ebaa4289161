//! The connection layer: one socket per relay under one budget (`sockets`), one way to ask a
//! relay and read its answers (`exchange`), TLS, how refusals read (`refusal`), what a relay
//! publishes about itself (`nip11`, `limits`) and what it was learned to speak (`extensions`).
//! Everything above it — the asks and the feed — reaches relays only through here.

pub(crate) mod exchange;
pub mod extensions;
pub mod limits;
pub mod nip11;
pub mod refusal;
pub mod sockets;
pub(crate) mod tls;

//! The process-wide TLS setup every socket of the runtime shares.

/// rustls needs one process-wide crypto provider for `wss://`; installing twice is harmless.
pub(crate) fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

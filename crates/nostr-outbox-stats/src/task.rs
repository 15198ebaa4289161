//! Running a store's blocking IO from its async methods.

use std::path::Path;

use nostr_outbox_client::StatsStoreError;

/// Runs `f` on tokio's blocking threads, so a slow disk or a busy database never stalls the
/// async workers. Outside a tokio runtime (another executor, or none) it runs on the calling
/// thread: the only choice that does not panic there.
pub(crate) async fn blocking<T, F>(path: &Path, f: F) -> Result<T, StatsStoreError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, StatsStoreError> + Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => match handle.spawn_blocking(f).await {
            Ok(result) => result,
            Err(e) => Err(StatsStoreError::Io {
                path: path.to_path_buf(),
                source: std::io::Error::other(format!("store task failed: {e}")),
            }),
        },
        Err(_) => f(),
    }
}

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

/// `StatsStore` and `StateStore` for a store whose own methods of those names block: each call
/// runs them through [`blocking`]. One definition, so the file and SQLite stores cannot drift.
macro_rules! off_thread_stores {
    ($store:ident) => {
        #[async_trait]
        impl StatsStore for $store {
            async fn load(&self) -> Result<Loaded, StatsStoreError> {
                let me = self.clone();
                blocking(self.path(), move || $store::load(&me)).await
            }

            async fn save(&self, stats: &DeliveryStats) -> Result<(), StatsStoreError> {
                let (me, stats) = (self.clone(), stats.clone());
                blocking(self.path(), move || $store::save(&me, &stats)).await
            }

            async fn check_writable(&self) -> Result<(), StatsStoreError> {
                let me = self.clone();
                blocking(self.path(), move || $store::check_writable(&me)).await
            }
        }

        #[async_trait]
        impl StateStore for $store {
            async fn load_lists(&self) -> Result<Restored<Vec<RawRelayList>>, StatsStoreError> {
                let me = self.clone();
                blocking(self.path(), move || $store::load_lists(&me)).await
            }

            async fn save_lists(&self, lists: &[RawRelayList]) -> Result<(), StatsStoreError> {
                let (me, lists) = (self.clone(), lists.to_vec());
                blocking(self.path(), move || $store::save_lists(&me, &lists)).await
            }

            async fn load_penalties(&self) -> Result<Restored<Option<Value>>, StatsStoreError> {
                let me = self.clone();
                blocking(self.path(), move || $store::load_penalties(&me)).await
            }

            async fn save_penalties(&self, penalties: &Value) -> Result<(), StatsStoreError> {
                let (me, penalties) = (self.clone(), penalties.clone());
                blocking(self.path(), move || $store::save_penalties(&me, &penalties)).await
            }

            async fn base_seed(&self, drawn: u64) -> Result<u64, StatsStoreError> {
                let me = self.clone();
                blocking(self.path(), move || $store::base_seed(&me, drawn)).await
            }
        }
    };
}
pub(crate) use off_thread_stores;

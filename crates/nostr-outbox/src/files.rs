//! The files a command reads or keeps, gathered in one place before it starts, so that no
//! output flag can name one of them: a summary written over the secret key file or the SQLite
//! store would lose what is kept there.

use std::path::{Path, PathBuf};

use anyhow::bail;

use crate::store::Location;

/// Symlinks followed at most while resolving a path that does not exist yet (Linux's own
/// limit).
const MAX_LINKS: usize = 40;

/// What a run reads or keeps, each with what it is (for the error).
#[derive(Clone, Debug, Default)]
pub struct RunFiles {
    files: Vec<(String, PathBuf)>,
}

impl RunFiles {
    /// `path`, which the run reads or writes as `what` (e.g. "the secret key file").
    pub fn add(&mut self, what: impl Into<String>, path: impl Into<PathBuf>) {
        self.files.push((what.into(), path.into()));
    }

    /// Every file of the store at `location` (the stats file, its backup, lock, lists and
    /// penalties; or the database and SQLite's files beside it).
    pub fn add_store(&mut self, location: &Location) {
        let (what, files) = match location {
            Location::File(path) => (
                "a file of the store (--stats)",
                nostr_outbox_stats::FileStore::new(path).files(),
            ),
            Location::Sqlite(path) => (
                "a file of the SQLite store (--store)",
                nostr_outbox_stats::SqliteStore::new(path).files(),
            ),
        };
        self.add("the kept notes (beside the store)", location.notes_path());
        for file in files {
            self.add(what, file);
        }
    }

    /// An error when `path`, given to `flag` to be written, is one of these files: the same
    /// file once symlinks are followed (or the same inode, a hard link), or, for a file that
    /// does not exist yet, the same name in the same directory.
    pub fn refuse_output(&self, flag: &str, path: &Path) -> anyhow::Result<()> {
        let target = resolve(path);
        for (what, file) in &self.files {
            if resolve(file) == target || same_inode(path, file) {
                bail!(
                    "{flag} {}: this is {what}, which this run reads or keeps, and writing \
                     there would overwrite it: give another file",
                    path.display()
                );
            }
        }
        Ok(())
    }
}

/// Where writing `path` would land: the file itself when it exists (symlinks followed), else
/// the canonical directory it would be created in and its name (a dangling symlink followed to
/// the file a write would create).
fn resolve(path: &Path) -> PathBuf {
    let mut path = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        if let Ok(real) = std::fs::canonicalize(&path) {
            return real;
        }
        match std::fs::read_link(&path) {
            // A relative target is relative to the link's directory; an absolute one replaces.
            Ok(target) => path = parent_of(&path).join(target),
            Err(_) => break,
        }
    }
    match path.file_name() {
        Some(name) => {
            let dir = parent_of(&path);
            let dir = std::fs::canonicalize(&dir)
                .or_else(|_| std::path::absolute(&dir))
                .unwrap_or(dir);
            dir.join(name)
        }
        None => std::path::absolute(&path).unwrap_or(path),
    }
}

/// The directory `path` is in (`.` for a bare name).
fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether `a` and `b` both exist and are one file (Unix: device and inode).
fn same_inode(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_found_by_any_name_that_leads_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("stats.json");
        let mut files = RunFiles::default();
        files.add_store(&Location::File(store.clone()));
        files.add("the secret key file", dir.path().join("key"));
        std::fs::write(dir.path().join("key"), "k").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let refused = [
            // Not existing yet, by another spelling of its directory.
            dir.path().join("sub/../stats.json.lists.json"),
            dir.path().join("./stats.json.penalties.json"),
            dir.path().join("stats.json.lock"),
            dir.path().join("key"),
        ];
        for path in &refused {
            let err = files.refuse_output("--out", path).unwrap_err();
            assert!(format!("{err}").contains("--out"), "{err}");
        }
        // A symlink to a file not there yet, and a hard link.
        #[cfg(unix)]
        {
            let link = dir.path().join("sub/link");
            std::os::unix::fs::symlink("../stats.json", &link).unwrap();
            assert!(files.refuse_output("--out", &link).is_err());
            let hard = dir.path().join("sub/hard");
            std::fs::hard_link(dir.path().join("key"), &hard).unwrap();
            assert!(files.refuse_output("--out", &hard).is_err());
        }
        for fine in ["summary.json", "stats.json.other", "sub/stats.json"] {
            files
                .refuse_output("--out", &dir.path().join(fine))
                .unwrap();
        }
    }
}

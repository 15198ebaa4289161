//! Small helpers shared by the tasks: locating the workspace, running cargo,
//! and walking the source tree.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;

/// The workspace root: xtask lives one level below it, so this does not
/// depend on the directory `cargo xtask` was started from.
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map_or_else(|| manifest.to_path_buf(), Path::to_path_buf)
}

/// A `cargo` command using the same cargo that runs xtask (the `CARGO` env
/// var), so toolchain overrides carry through.
pub fn cargo(root: &Path) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root);
    cmd
}

fn describe(cmd: &Command) -> String {
    let mut parts = vec!["cargo".to_string()];
    parts.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    let envs: Vec<String> = cmd
        .get_envs()
        .filter_map(|(k, v)| Some(format!("{}={}", k.to_string_lossy(), v?.to_string_lossy())))
        .collect();
    if envs.is_empty() {
        parts.join(" ")
    } else {
        format!("{} {}", envs.join(" "), parts.join(" "))
    }
}

/// Run with inherited stdio; true when it exits successfully.
pub fn run_status(mut cmd: Command) -> anyhow::Result<bool> {
    let text = describe(&cmd);
    println!("$ {text}");
    let status = cmd.status().with_context(|| format!("starting `{text}`"))?;
    Ok(status.success())
}

/// Every file under `dir` whose name satisfies `keep`, skipping build output,
/// VCS metadata, hidden directories and any directory in `skip` (paths
/// relative to `root`). Sorted, so reports are stable.
pub fn walk_files(
    root: &Path,
    dir: &Path,
    skip: &[&str],
    keep: &dyn Fn(&Path) -> bool,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("listing {}", d.display())),
        };
        for entry in entries {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let rel = relative(root, &path);
            if entry.file_type()?.is_dir() {
                if name == "target" || name.starts_with('.') || skip.contains(&rel.as_str()) {
                    continue;
                }
                stack.push(path);
            } else if keep(&path) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// `path` relative to `root` with `/` separators, for printing.
pub fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

//! The warm snapshot: one package's server, started once in a restore of
//! the boot snapshot, saved the moment it has loaded and waits for its first
//! message, and restored by later fetches of exactly the same package.
//!
//! Under TCG nearly all of a Node.js server's fetch is its start-up (V8
//! loading and compiling the SDK's modules under emulation, about 6 to 8
//! CPU-s for server-memory); the boot snapshot ([`super::snapshot`]) only
//! took the kernel boot out. A fetch that finds no warm snapshot for its
//! package restores the boot snapshot with `warm` on the go line: the guest
//! init starts the server in the background, watches the guest's CPU time,
//! and says `idle` once three 0.1 s windows in a row used at most one tick
//! (or `busy` after 60 s, or `ended` when the server exited first: no save). The host then migrates the VM to a file through
//! QMP, resumes it, and sends the go line again on the control port; only
//! then does the MCP session begin, so the saved server has received
//! nothing from the host. The state and the package disk it was saved with
//! are kept under `.warm/` in the snapshot folder, keyed by the boot
//! snapshot and a digest of the whole package tree (files, modes, links,
//! the launcher with its arguments and placeholder environment).
//!
//! A later fetch whose tree has the same digest restores that state with
//! the same disk (read-only) and writes the go line on the control port:
//! the init mixes the fresh random bytes into the kernel RNG, sets the
//! clock to the host's time, and says `resumed`; then the session runs.
//!
//! What a restored server keeps from its one start-up, and so shares with
//! every fetch restored from it: anything it computed while starting, and
//! userspace random generators seeded then (for Node.js, `Math.random` and
//! OpenSSL's generator behind `crypto.randomBytes` once used; only reads
//! from the kernel's generator differ per restore), and the time it read
//! then. Every capture
//! says when its warm snapshot was saved, `MCPLINT_VM_WARM=0` turns them
//! off, and the boot snapshot's isolation argument holds per package: each
//! restore is a new QEMU reading the state read-only, and nothing but the
//! same package's tree ever reaches a given state.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use sha2::{Digest, Sha256};

use super::snapshot;
use super::vm;

/// Bumped whenever the warm protocol or the folder layout changes.
const VERSION: &str = "mcplint-warm-snapshot-v1";
/// The folder, inside the snapshot folder, that holds the warm snapshots
/// (its leading dot keeps the boot snapshot's clean-up away from it).
pub const DIR: &str = ".warm";
/// The package disk a warm state was saved with.
pub const DISK: &str = "app.ext4";
/// How many warm snapshots are kept by default (each is the guest's used
/// memory, about 200 MB for a Node.js server); the least recently used go
/// first. `MCPLINT_VM_WARM_KEEP` changes it.
const KEEP: usize = 4;

/// Whether fetches save and restore warm snapshots: with the boot snapshot,
/// unless `MCPLINT_VM_WARM=0`.
pub fn enabled() -> bool {
    snapshot::enabled() && std::env::var_os("MCPLINT_VM_WARM").is_none_or(|v| v != "0")
}

fn keep() -> usize {
    std::env::var("MCPLINT_VM_WARM_KEEP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(KEEP)
}

/// Where warm snapshots are kept.
pub fn root() -> PathBuf {
    snapshot::root().join(DIR)
}

/// The warm snapshot's key: the boot snapshot's key and a digest of the
/// package tree that goes on the package disk.
pub fn key(boot_key: &str, tree: &Path) -> Result<String, String> {
    let mut h = Sha256::new();
    h.update(VERSION.as_bytes());
    h.update(b"\0");
    h.update(boot_key.as_bytes());
    h.update(b"\0");
    digest_tree(tree, tree, &mut h)?;
    Ok(format!("{:x}", h.finalize()))
}

/// Feeds every entry under `dir` to `h`, in byte order of the names: its
/// path, kind and mode, and a file's contents or a link's target. Links are
/// never followed.
fn digest_tree(base: &Path, dir: &Path, h: &mut Sha256) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let err = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| err(dir, e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort_by(|a, b| a.as_os_str().as_bytes().cmp(b.as_os_str().as_bytes()));
    for p in entries {
        let meta = std::fs::symlink_metadata(&p).map_err(|e| err(&p, e))?;
        let rel = p.strip_prefix(base).unwrap_or(&p);
        h.update(rel.as_os_str().as_bytes());
        h.update(format!("\0{:o}\0", meta.permissions().mode()).as_bytes());
        let ft = meta.file_type();
        if ft.is_symlink() {
            let target = std::fs::read_link(&p).map_err(|e| err(&p, e))?;
            h.update(b"L");
            h.update(target.as_os_str().as_bytes());
        } else if ft.is_dir() {
            h.update(b"D");
            digest_tree(base, &p, h)?;
        } else if ft.is_file() {
            h.update(format!("F{}\0", meta.len()).as_bytes());
            let mut f = std::fs::File::open(&p).map_err(|e| err(&p, e))?;
            std::io::copy(&mut f, h).map_err(|e| err(&p, e))?;
        } else {
            h.update(b"O");
        }
        h.update(b"\n");
    }
    Ok(())
}

fn is_complete(dir: &Path) -> bool {
    dir.join(snapshot::STATE).is_file() && dir.join(DISK).is_file()
}

/// The complete warm snapshot for `key`, marked as just used.
pub fn find(key: &str) -> Option<PathBuf> {
    let dir = root().join(&key[..32]);
    if !is_complete(&dir) {
        return None;
    }
    // Its modification time orders the least recently used for eviction.
    let _ = std::fs::File::open(&dir).and_then(|f| f.set_modified(SystemTime::now()));
    Some(dir)
}

/// When the warm snapshot in `dir` was saved (its state file's time), as
/// an RFC 3339 UTC time.
pub fn saved_at(dir: &Path) -> String {
    std::fs::metadata(dir.join(snapshot::STATE))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| crate::timefmt::rfc3339(i64::try_from(d.as_secs()).unwrap_or(i64::MAX)))
        .unwrap_or_else(|| "at an unknown time".into())
}

/// A folder where a fetch builds its package disk and may save its warm
/// snapshot; installed under its key when both are there, else removed.
pub struct Making {
    /// Always there until [`Making::install`] takes it.
    dir: Option<tempfile::TempDir>,
}

impl Making {
    /// A new folder under [`root`].
    pub fn new() -> Result<Making, String> {
        Ok(Making {
            dir: Some(snapshot::making_dir(&root())?),
        })
    }

    /// The folder: the package disk goes here, and it is the VM's run
    /// folder (QEMU writes the saved state here).
    pub fn path(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new(""), |d| d.path())
    }

    /// Whether the state was saved.
    pub fn saved(&self) -> bool {
        is_complete(self.path())
    }

    /// Installs the saved snapshot under `key` (keeping another fetch's if
    /// one got there first), then evicts the least recently used beyond
    /// the limit. Returns where it now is.
    pub fn install(mut self, key: &str) -> Result<PathBuf, String> {
        let Some(tmp) = self.dir.take() else {
            return Err("already installed".into());
        };
        super::process::unregister_dir(tmp.path());
        let dir = root().join(&key[..32]);
        snapshot::install(tmp, &dir, is_complete)?;
        evict(&root(), keep(), &dir);
        Ok(dir)
    }
}

impl Drop for Making {
    fn drop(&mut self) {
        if let Some(d) = &self.dir {
            super::process::unregister_dir(d.path());
        }
    }
}

/// The kept warm snapshots: folder, bytes on disk, when saved.
pub fn list() -> Vec<(PathBuf, u64, String)> {
    let Ok(rd) = std::fs::read_dir(root()) else {
        return Vec::new();
    };
    let mut v: Vec<_> = rd
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .filter(|p| is_complete(p))
        .map(|p| {
            let bytes = [snapshot::STATE, DISK]
                .iter()
                .map(|f| disk_bytes(&p.join(f)))
                .sum();
            let at = saved_at(&p);
            (p, bytes, at)
        })
        .collect();
    v.sort_by(|a, b| b.2.cmp(&a.2));
    v
}

/// Bytes a file really takes on disk (the package disk is sparse).
pub fn disk_bytes(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).map(|m| m.blocks() * 512).unwrap_or(0)
}

/// Removes every warm snapshot (not the folders of saves in progress):
/// called when the boot snapshot they were saved from is made anew.
pub fn clear() {
    let Ok(rd) = std::fs::read_dir(root()) else {
        return;
    };
    for e in rd.filter_map(Result::ok) {
        if !e.file_name().to_string_lossy().starts_with('.') {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Removes the least recently used warm snapshots beyond `keep` (never
/// `current`) and leftovers of interrupted saves older than an hour.
fn evict(root: &Path, keep: usize, current: &Path) {
    let Ok(rd) = std::fs::read_dir(root) else {
        return;
    };
    let now = SystemTime::now();
    let mut done = Vec::new();
    for e in rd.filter_map(Result::ok) {
        let p = e.path();
        let Ok(t) = e.metadata().and_then(|m| m.modified()) else {
            continue;
        };
        if e.file_name().to_string_lossy().starts_with('.') {
            if now.duration_since(t).unwrap_or_default() > Duration::from_secs(3600) {
                let _ = std::fs::remove_dir_all(&p);
            }
        } else if p != current {
            done.push((t, p));
        }
    }
    done.sort();
    let excess = (done.len() + 1).saturating_sub(keep.max(1));
    for (_, p) in done.into_iter().take(excess) {
        let _ = std::fs::remove_dir_all(p);
    }
}

/// Saves the running VM whose run folder is `run` (QMP socket inside) to
/// `state.bin` there, then resumes it.
pub fn save(run: &Path) -> Result<(), String> {
    let start = Instant::now();
    let mut qmp = snapshot::save_over_qmp(
        &run.join(snapshot::QMP),
        &format!("{}/{}", vm::RUN_DIR, snapshot::STATE),
        start,
    )?;
    qmp.ask(serde_json::json!({"execute": "cont"}))?;
    Ok(())
}

/// Connects to the control port of the VM whose run folder is `run` (QEMU
/// may not have made its socket yet) and writes a fresh go line. The
/// returned connection is kept open for the session.
pub fn send_go(run: &Path, limit: Duration) -> Result<UnixStream, String> {
    let start = Instant::now();
    let sock = run.join(vm::CTL);
    let mut s = loop {
        match UnixStream::connect(&sock) {
            Ok(s) => break s,
            Err(e) if start.elapsed() > limit => {
                return Err(format!("the VM's control port: {e}"));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    let go = snapshot::go_line(false)?;
    s.write_all(&go)
        .map_err(|e| format!("writing to the VM's control port: {e}"))?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree_key(dir: &Path) -> String {
        key("boot", dir).unwrap()
    }

    #[test]
    fn the_key_changes_with_any_file_mode_or_link() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::create_dir(d.join("lib")).unwrap();
        std::fs::write(d.join("lib/a.js"), "a").unwrap();
        std::fs::write(d.join(".mcplint-run.sh"), "exec node a.js\n").unwrap();
        let k0 = tree_key(d);
        assert_eq!(k0, tree_key(d), "the key is stable");
        assert_ne!(k0, key("other boot", d).unwrap());
        std::fs::write(d.join("lib/a.js"), "b").unwrap();
        let k1 = tree_key(d);
        assert_ne!(k0, k1, "contents");
        std::fs::write(d.join(".mcplint-run.sh"), "exec node a.js --x\n").unwrap();
        let k2 = tree_key(d);
        assert_ne!(k1, k2, "launcher arguments");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.join("lib/a.js"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let k3 = tree_key(d);
        assert_ne!(k2, k3, "mode");
        std::os::unix::fs::symlink("a.js", d.join("lib/b.js")).unwrap();
        let k4 = tree_key(d);
        assert_ne!(k3, k4, "a new link");
        std::fs::remove_file(d.join("lib/b.js")).unwrap();
        std::os::unix::fs::symlink("../x", d.join("lib/b.js")).unwrap();
        assert_ne!(k4, tree_key(d), "a link's target");
    }

    #[test]
    fn eviction_keeps_the_most_recently_used() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let mut dirs = Vec::new();
        for (i, age) in [50u64, 10, 30, 40].iter().enumerate() {
            let d = root.join(format!("{i:032}"));
            std::fs::create_dir_all(&d).unwrap();
            let when = SystemTime::now() - Duration::from_secs(*age);
            std::fs::File::open(&d).unwrap().set_modified(when).unwrap();
            dirs.push(d);
        }
        let stale = root.join(".make-old");
        std::fs::create_dir_all(&stale).unwrap();
        std::fs::File::open(&stale)
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(7200))
            .unwrap();
        let fresh = root.join(".make-now");
        std::fs::create_dir_all(&fresh).unwrap();
        // Keep 3: the current one (the oldest here) and the two most
        // recently used of the others.
        evict(root, 3, &dirs[0]);
        let left: Vec<bool> = dirs.iter().map(|d| d.exists()).collect();
        assert_eq!(left, [true, true, true, false]);
        assert!(!stale.exists() && fresh.exists());
    }
}

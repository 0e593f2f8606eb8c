//! Getting an MCPB bundle onto the host without running any of it: a `.mcpb`
//! zip is unpacked (paths checked, sizes capped, links made last so nothing
//! is written through one), a bundle folder is copied (links copied as
//! links, never followed), into the folder the guest mounts at `/app`.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use super::source::{file_sha256, Bundle, Prepared, Runtime};
use super::RunnerError;

/// Most bytes a bundle may unpack to.
const MAX_BYTES: u64 = 2 << 30;
/// Most entries a bundle may hold.
const MAX_ENTRIES: usize = 200_000;

/// Unpacks or copies the bundle into `work` and checks its entry point is there.
pub fn prepare(b: &Bundle, work: &Path) -> Result<Prepared, RunnerError> {
    std::fs::create_dir_all(work).map_err(|e| RunnerError::io("creating the bundle folder", e))?;
    let meta = std::fs::metadata(&b.path)
        .map_err(|e| RunnerError::Usage(format!("{}: {e}", b.path.display())))?;
    let integrity = if meta.is_dir() {
        copy_tree(&b.path, work, &mut Budget::default())?;
        None
    } else {
        unzip(&b.path, work)?;
        Some(file_sha256(&b.path).map_err(|e| RunnerError::io("hashing the bundle", e))?)
    };
    // The file the runtime is asked to start must be in the bundle.
    let start = match b.runtime {
        Runtime::Binary => b.entry.first(),
        Runtime::Node | Runtime::Python => b.entry.iter().find(|a| a.starts_with("{app}/")),
    };
    if let Some(rel) = start.and_then(|a| a.strip_prefix("{app}/")) {
        if !work.join(rel).is_file() {
            return Err(RunnerError::Prepare(format!(
                "{}@{}: the bundle has no {rel} (its manifest's entry point)",
                b.name, b.version
            )));
        }
    }
    let mut env = b.env.clone();
    if b.runtime == Runtime::Python && !env.iter().any(|(k, _)| k == "PYTHONDONTWRITEBYTECODE") {
        // The bundle is mounted read-only.
        env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
    }
    Ok(Prepared::new(
        work.to_path_buf(),
        b.name.clone(),
        b.version.clone(),
        integrity,
        b.runtime,
        b.entry.clone(),
        env,
    ))
}

#[derive(Default)]
struct Budget {
    bytes: u64,
    entries: usize,
}

impl Budget {
    fn take(&mut self, bytes: u64) -> Result<(), RunnerError> {
        self.bytes = self.bytes.saturating_add(bytes);
        self.entries += 1;
        if self.bytes > MAX_BYTES || self.entries > MAX_ENTRIES {
            return Err(RunnerError::Prepare(format!(
                "the bundle is larger than {} GiB or {MAX_ENTRIES} entries",
                MAX_BYTES >> 30
            )));
        }
        Ok(())
    }
}

/// Copies a folder; symbolic links are copied as links (the guest resolves
/// them inside its own file system), never followed on the host.
fn copy_tree(from: &Path, to: &Path, budget: &mut Budget) -> Result<(), RunnerError> {
    let io = |what: &str, p: &Path, e| RunnerError::io(&format!("{what} {}", p.display()), e);
    for entry in std::fs::read_dir(from).map_err(|e| io("listing", from, e))? {
        let entry = entry.map_err(|e| io("listing", from, e))?;
        let src = entry.path();
        let dst = to.join(entry.file_name());
        let ty = entry.file_type().map_err(|e| io("reading", &src, e))?;
        if ty.is_symlink() {
            budget.take(0)?;
            let target = std::fs::read_link(&src).map_err(|e| io("reading", &src, e))?;
            std::os::unix::fs::symlink(&target, &dst).map_err(|e| io("linking", &dst, e))?;
        } else if ty.is_dir() {
            budget.take(0)?;
            std::fs::create_dir(&dst).map_err(|e| io("creating", &dst, e))?;
            copy_tree(&src, &dst, budget)?;
        } else if ty.is_file() {
            let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
            budget.take(len)?;
            std::fs::copy(&src, &dst).map_err(|e| io("copying", &src, e))?;
        }
        // Sockets, fifos and devices are not part of a bundle: skipped.
    }
    Ok(())
}

/// Unpacks a `.mcpb` zip into `to`.
fn unzip(path: &Path, to: &Path) -> Result<(), RunnerError> {
    use std::os::unix::fs::PermissionsExt;
    let bad = |m: String| RunnerError::Prepare(format!("{}: {m}", path.display()));
    let file = std::fs::File::open(path)
        .map_err(|e| RunnerError::Usage(format!("{}: {e}", path.display())))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| bad(format!("not a zip archive: {e}")))?;
    if zip.len() > MAX_ENTRIES {
        return Err(bad(format!("more than {MAX_ENTRIES} entries")));
    }
    let mut budget = Budget::default();
    let mut links: Vec<(PathBuf, String)> = Vec::new();
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| bad(format!("entry {i}: {e}")))?;
        let raw = entry.name().to_owned();
        let rel = safe_relative(&raw).ok_or_else(|| {
            bad(format!(
                "entry {:?} points outside the bundle",
                crate::display::visible_short(&raw, 120)
            ))
        })?;
        let dst = to.join(&rel);
        let mode = entry.unix_mode().unwrap_or(0);
        if entry.is_dir() {
            budget.take(0)?;
            std::fs::create_dir_all(&dst).map_err(|e| RunnerError::io("unpacking", e))?;
            continue;
        }
        if let Some(parent) = dst.parent() {
            std::fs::create_dir_all(parent).map_err(|e| RunnerError::io("unpacking", e))?;
        }
        if mode & 0o170000 == 0o120000 {
            // A link: made after every file, so no later entry is written
            // through it to somewhere outside the bundle.
            let mut target = String::new();
            (&mut entry)
                .take(4096)
                .read_to_string(&mut target)
                .map_err(|e| bad(format!("link {raw:?}: {e}")))?;
            budget.take(0)?;
            links.push((dst, target));
            continue;
        }
        budget.take(entry.size())?;
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&dst)
            .map_err(|e| RunnerError::io(&format!("unpacking {}", rel.display()), e))?;
        // The declared size may lie: copy at most what is left of the budget.
        let left = MAX_BYTES.saturating_sub(budget.bytes.saturating_sub(entry.size()));
        let n = std::io::copy(&mut (&mut entry).take(left + 1), &mut out)
            .map_err(|e| bad(format!("inflating {raw:?}: {e}")))?;
        if n > left {
            return Err(bad(format!(
                "it inflates to more than {} GiB",
                MAX_BYTES >> 30
            )));
        }
        if mode & 0o111 != 0 {
            let _ = std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o755));
        }
    }
    for (dst, target) in links {
        std::os::unix::fs::symlink(&target, &dst)
            .map_err(|e| RunnerError::io(&format!("linking {}", dst.display()), e))?;
    }
    Ok(())
}

/// A zip entry name as a relative path that stays inside the bundle.
fn safe_relative(name: &str) -> Option<PathBuf> {
    let p = Path::new(name);
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!out.as_os_str().is_empty() && !name.contains('\\')).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_stay_inside() {
        assert_eq!(
            safe_relative("server/index.js"),
            Some(PathBuf::from("server/index.js"))
        );
        assert!(safe_relative("../x").is_none());
        assert!(safe_relative("/etc/passwd").is_none());
        assert!(safe_relative("a/../../x").is_none());
        assert!(safe_relative("a\\..\\x").is_none());
        assert!(safe_relative("").is_none());
    }

    #[test]
    fn a_zip_is_unpacked_with_links_last_and_escapes_refused() {
        use std::io::Write;
        let dir = tempfile::tempdir().expect("tempdir");
        let zpath = dir.path().join("b.mcpb");
        let mut w = zip::ZipWriter::new(std::fs::File::create(&zpath).expect("create"));
        let opts = zip::write::SimpleFileOptions::default();
        w.start_file("manifest.json", opts).expect("start");
        w.write_all(b"{}").expect("write");
        w.add_symlink("link", "/etc", opts).expect("link");
        w.start_file("server/index.js", opts.unix_permissions(0o755))
            .expect("start");
        w.write_all(b"//").expect("write");
        w.finish().expect("finish");
        let out = dir.path().join("out");
        std::fs::create_dir(&out).expect("mkdir");
        unzip(&zpath, &out).expect("unzips");
        assert!(out.join("server/index.js").is_file());
        assert_eq!(
            std::fs::read_link(out.join("link")).expect("a link"),
            PathBuf::from("/etc")
        );

        let evil = dir.path().join("evil.mcpb");
        let mut w = zip::ZipWriter::new(std::fs::File::create(&evil).expect("create"));
        w.start_file("../escaped", opts).expect("start");
        w.write_all(b"x").expect("write");
        w.finish().expect("finish");
        let out2 = dir.path().join("out2");
        std::fs::create_dir(&out2).expect("mkdir");
        let err = unzip(&evil, &out2).expect_err("refused").to_string();
        assert!(err.contains("outside the bundle"), "{err}");
        assert!(!dir.path().join("escaped").exists());
    }
}

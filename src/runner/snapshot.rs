//! The boot snapshot: a guest booted once up to the point where it waits for
//! its package, saved, and restored per fetch instead of booting a kernel.
//!
//! Under TCG the kernel boot and the first page-in of Node cost ~3.5 s of
//! every fetch (bench/fetch.sh). Here QEMU boots the image once with
//! `mcplint.snapshot=1`: the guest init mounts the runtime disk, runs
//! `node -e 0` (so Node's pages are in the guest's page cache), opens the MCP
//! port and prints `mcplint-guest: ready`, then blocks reading one "go" line
//! from the port. QEMU's state is migrated to a file (`migrate file:`) and
//! cached, keyed by everything that shapes the machine: the image hash
//! (kernel, initramfs, runtime), the QEMU binary, the accelerator, memory,
//! vCPUs and the whole QEMU command line.
//!
//! A fetch starts the same machine with `-incoming file:` and its own package
//! disk in the slot that held an empty placeholder of the same size (the
//! guest learned the size when it probed the disk; it never read the
//! placeholder's contents beyond the kernel's partition scan, whose cached
//! blocks the init drops before mounting). The host writes
//! `go <64 hex digits>\n` first: the init mixes those fresh random bytes
//! into the kernel's RNG and forces a reseed (`/bin/reseed`), since every
//! restore starts from the same saved RNG state.
//!
//! Isolation: the state is saved before any package exists, from a VM that
//! only ever saw the image; each fetch is a new QEMU process reading the
//! state file read-only, so nothing of one fetch can reach another.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::image::Image;
use super::process::{Heard, Running};
use super::vm::{self, Accel, Boot, VmConfig};

/// Bumped whenever the snapshot protocol (guest init's snapshot mode, the go
/// line, the file layout) changes.
const VERSION: &str = "mcplint-boot-snapshot-v2";
/// The migrated VM state, inside a snapshot folder.
pub const STATE: &str = "state.bin";
/// The placeholder package disk (sparse, [`APP_DISK_BYTES`] long).
pub const PLACEHOLDER: &str = "placeholder.img";
/// QEMU's QMP socket while the snapshot is made.
pub const QMP: &str = "qmp.sock";
/// The size of every package disk used with a snapshot: the guest read the
/// disk's capacity at boot, so the per-fetch disk must have exactly this
/// size. Sparse on the host; packages whose tree does not fit boot cold.
pub const APP_DISK_BYTES: u64 = 2 << 30;
/// How long making a snapshot may take (a TCG boot on a loaded machine).
const MAKE_LIMIT: Duration = Duration::from_secs(180);

/// Whether fetches restore the boot snapshot: on unless the start-up
/// tunings are off (`MCPLINT_VM_BASELINE=1`) or `MCPLINT_VM_SNAPSHOT=0`.
pub fn enabled() -> bool {
    vm::tuned() && std::env::var_os("MCPLINT_VM_SNAPSHOT").is_none_or(|v| v != "0")
}

/// The snapshot's key: a hash of everything the saved machine depends on.
pub fn key(image: &Image, cfg: &VmConfig, accel: Accel) -> Result<String, String> {
    let qemu = vm::qemu_binary().map_err(|e| e.to_string())?;
    let meta = std::fs::metadata(&qemu).map_err(|e| format!("{}: {e}", qemu.display()))?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    // The restore command with fixed paths: its arguments are the machine.
    let cmd = vm::command_boot(
        image,
        Some(Path::new("/key/app.ext4")),
        cfg,
        accel,
        None,
        Boot::Restore(Path::new("/key/snap"), Path::new("/key/run")),
    )
    .map_err(|e| e.to_string())?;
    let mut h = Sha256::new();
    h.update(VERSION.as_bytes());
    h.update(image.hash.as_bytes());
    h.update(format!("\n{} {} {mtime}\n", qemu.display(), meta.len()).as_bytes());
    for a in cmd.get_args() {
        h.update(a.as_encoded_bytes());
        h.update(b"\0");
    }
    Ok(format!("{:x}", h.finalize()))
}

/// Where snapshots are kept: `MCPLINT_VM_SNAPSHOT_DIR`, else `snapshots` in
/// mcplint's cache folder.
pub fn root() -> PathBuf {
    match std::env::var_os("MCPLINT_VM_SNAPSHOT_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => super::image::cache_root().join("snapshots"),
    }
}

/// The snapshot folder for this machine (`key` is [`key`]'s for it), made
/// first if missing (`progress` is told before). Returns the folder and
/// whether it was made now.
pub fn ensure(
    key: &str,
    image: &Image,
    cfg: &VmConfig,
    accel: Accel,
    progress: fn(&str),
) -> Result<(PathBuf, bool), String> {
    let root = root();
    let dir = root.join(&key[..32]);
    if is_complete(&dir) {
        return Ok((dir, false));
    }
    progress(&format!(
        "making the boot snapshot (once per guest image and machine; {})",
        accel.name()
    ));
    let tmp = making_dir(&root)?;
    let made = make(image, cfg, accel, tmp.path());
    super::process::unregister_dir(tmp.path());
    made?;
    install(tmp, &dir, is_complete)?;
    // Snapshots of older images or QEMU builds are unreachable now, and so
    // is every package's warm snapshot (each was saved from a restore of
    // the boot snapshot).
    if let Ok(rd) = std::fs::read_dir(&root) {
        for e in rd.filter_map(Result::ok) {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if !name.starts_with('.') && e.path() != dir {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    super::warm::clear();
    Ok((dir, true))
}

/// A new folder under `root` to make a snapshot in: a dot name (no clean-up
/// takes it for a snapshot), removed on Ctrl-C like every temporary folder.
pub fn making_dir(root: &Path) -> Result<tempfile::TempDir, String> {
    std::fs::create_dir_all(root).map_err(|e| format!("creating {}: {e}", root.display()))?;
    let tmp = tempfile::Builder::new()
        .prefix(".make-")
        .tempdir_in(root)
        .map_err(|e| format!("creating a folder in {}: {e}", root.display()))?;
    super::process::register_dir(tmp.path().to_path_buf());
    Ok(tmp)
}

/// Moves a snapshot made in `tmp` to `dir`, without the run's sockets.
/// Another fetch may have made the same snapshot meanwhile: either is kept,
/// as long as the one in place is `complete`.
pub fn install(
    tmp: tempfile::TempDir,
    dir: &Path,
    complete: fn(&Path) -> bool,
) -> Result<(), String> {
    for f in [QMP, vm::CTL] {
        let _ = std::fs::remove_file(tmp.path().join(f));
    }
    let tmp = tmp.keep();
    if std::fs::rename(&tmp, dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
        if !complete(dir) {
            return Err(format!(
                "could not install the snapshot in {}",
                dir.display()
            ));
        }
    }
    Ok(())
}

fn is_complete(dir: &Path) -> bool {
    dir.join(STATE).is_file()
        && std::fs::metadata(dir.join(PLACEHOLDER)).is_ok_and(|m| m.len() == APP_DISK_BYTES)
}

/// Boots the snapshot guest in `dir` and saves its state there.
fn make(image: &Image, cfg: &VmConfig, accel: Accel, dir: &Path) -> Result<(), String> {
    let placeholder = std::fs::File::create(dir.join(PLACEHOLDER))
        .map_err(|e| format!("creating the placeholder disk: {e}"))?;
    placeholder
        .set_len(APP_DISK_BYTES)
        .map_err(|e| format!("sizing the placeholder disk: {e}"))?;
    drop(placeholder);
    let cmd = vm::command_boot(image, None, cfg, accel, None, Boot::Save(dir))
        .map_err(|e| e.to_string())?;
    let (mut run, stdin, _stdout) =
        Running::spawn(cmd).map_err(|e| format!("could not start QEMU: {e}"))?;
    let start = Instant::now();
    let fail = |run: &mut Running, what: &str| {
        run.finish(Duration::ZERO);
        let tail = run.stderr.text();
        let last: Vec<&str> = tail.lines().rev().take(3).collect();
        format!(
            "{what} (QEMU said: {})",
            crate::display::visible_short(&last.join(" | "), 240)
        )
    };
    match run.wait_for(&["mcplint-guest: ready"], MAKE_LIMIT) {
        Heard::Marker(_) => {}
        Heard::Exited => {
            return Err(fail(
                &mut run,
                "the snapshot guest ended before it was ready",
            ))
        }
        Heard::Silent => return Err(fail(&mut run, "the snapshot guest was not ready in time")),
    }
    let saved = save_over_qmp(&dir.join(QMP), &format!("{}/{STATE}", vm::SNAP_DIR), start)
        .and_then(|qmp| qmp.quit());
    if let Err(e) = saved {
        return Err(fail(&mut run, &format!("saving the VM state: {e}")));
    }
    drop(stdin);
    run.finish(Duration::from_secs(5));
    if !dir.join(STATE).is_file() {
        return Err("QEMU reported the migration complete but wrote no state".into());
    }
    Ok(())
}

/// A QMP connection to a running QEMU.
pub struct Qmp {
    w: UnixStream,
    r: BufReader<UnixStream>,
}

impl Qmp {
    /// Connects and leaves the capabilities negotiation mode.
    pub fn connect(socket: &Path) -> Result<Qmp, String> {
        let stream = UnixStream::connect(socket).map_err(|e| format!("QMP socket: {e}"))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        let w = stream.try_clone().map_err(|e| e.to_string())?;
        let mut q = Qmp {
            w,
            r: BufReader::new(stream),
        };
        // The greeting.
        let mut line = String::new();
        q.r.read_line(&mut line).map_err(|e| format!("QMP: {e}"))?;
        q.ask(serde_json::json!({"execute": "qmp_capabilities"}))?;
        Ok(q)
    }

    /// Runs one command and returns its `return` value.
    pub fn ask(&mut self, cmd: serde_json::Value) -> Result<serde_json::Value, String> {
        self.w
            .write_all(format!("{cmd}\n").as_bytes())
            .map_err(|e| format!("QMP: {e}"))?;
        let mut line = String::new();
        loop {
            line.clear();
            if self
                .r
                .read_line(&mut line)
                .map_err(|e| format!("QMP: {e}"))?
                == 0
            {
                return Err("QMP closed".into());
            }
            let v: serde_json::Value =
                serde_json::from_str(&line).map_err(|e| format!("QMP: {e}"))?;
            // Events are interleaved with replies; skip them.
            if let Some(e) = v.get("error") {
                return Err(format!("QMP error: {e}"));
            }
            if let Some(ret) = v.get("return") {
                return Ok(ret.clone());
            }
        }
    }

    /// Quits QEMU.
    pub fn quit(mut self) -> Result<(), String> {
        let _ = self.ask(serde_json::json!({"execute": "quit"}));
        Ok(())
    }
}

/// Migrates the running VM to `uri_path` (a path inside the sandbox)
/// through QMP and waits until that is complete; QEMU then holds the VM
/// paused. `start` and `MAKE_LIMIT` bound the wait.
pub fn save_over_qmp(socket: &Path, uri_path: &str, start: Instant) -> Result<Qmp, String> {
    let mut qmp = Qmp::connect(socket)?;
    // QEMU caps a migration at 128 MiB/s by default, a limit meant for
    // networks: to a file it only makes the save slower.
    qmp.ask(serde_json::json!({"execute": "migrate-set-parameters",
        "arguments": {"max-bandwidth": 16u64 << 30}}))?;
    // The VM keeps running while it is saved (the guest is blocked on a
    // read): the destination then starts running as soon as it is loaded.
    qmp.ask(serde_json::json!({"execute": "migrate",
        "arguments": {"uri": format!("file:{uri_path}")}}))?;
    loop {
        let st = qmp.ask(serde_json::json!({"execute": "query-migrate"}))?;
        match st.get("status").and_then(|s| s.as_str()) {
            Some("completed") => break,
            Some("failed") | Some("cancelled") => {
                return Err(format!("migration {}", st.get("error-desc").unwrap_or(&st)))
            }
            _ => {}
        }
        if start.elapsed() > MAKE_LIMIT {
            return Err("the migration did not complete in time".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(qmp)
}

/// The line the host writes first to a restored guest: `go`, 32 fresh
/// random bytes (hex) for its RNG, the host's time (Unix seconds) for its
/// clock, and `warm` when the guest should wait for its server to load so
/// that the host can save the package's warm snapshot (else `-`).
pub fn go_line(warm: bool) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut seed = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut seed))
        .map_err(|e| format!("reading /dev/urandom: {e}"))?;
    let hex: String = seed.iter().map(|b| format!("{b:02x}")).collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mode = if warm { "warm" } else { "-" };
    Ok(format!("go {hex} {now} {mode}\n").into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_go_line_carries_a_fresh_seed() {
        let a = String::from_utf8(go_line(false).unwrap()).unwrap();
        let b = String::from_utf8(go_line(true).unwrap()).unwrap();
        let words: Vec<&str> = a.split_whitespace().collect();
        assert_eq!(words.len(), 4, "{a}");
        assert_eq!((words[0], words[1].len(), words[3]), ("go", 64, "-"));
        assert!(words[2].parse::<u64>().unwrap() > 1_700_000_000, "{a}");
        assert!(a.ends_with('\n') && b.ends_with(" warm\n"), "{b}");
        assert_ne!(a.split(' ').nth(1), b.split(' ').nth(1));
    }
}

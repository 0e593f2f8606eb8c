//! The Firecracker backend: the same guest image as QEMU's (kernel, initramfs,
//! read-only runtime and package disks), booted by a `firecracker` binary
//! found on PATH, configured through its API socket.
//!
//! Used only when KVM works: Firecracker has no software emulation. The
//! verdict comes from booting the probe guest under Firecracker itself once,
//! cached per host kernel, image and Firecracker binary; with
//! `--backend firecracker` a bad verdict is an error (never a silent switch to
//! QEMU), with `--backend auto` it means QEMU.
//!
//! The channel. Firecracker has no virtio-serial; its one serial port is the
//! stdin/stdout of the firecracker process, and a tty: using it for MCP would
//! need raw mode set by the guest, a ready signal before the host may write
//! (NOTES §2: bytes sent early were lost), the kernel console kept off it,
//! and the server's stderr sent somewhere else. So the MCP stream goes over
//! **vsock** instead: Firecracker implements virtio-vsock in userspace and
//! proxies it to unix sockets on the host (no vhost-vsock needed on the
//! host). The guest connects out to the host (CID 2) on [`VSOCK_PORT`];
//! Firecracker forwards that to the unix socket `<uds_path>_<port>`, on which
//! mcplint listens before the VM starts, so nothing is lost and no retry
//! loop is needed. Inside the guest a small bridge (`guest/vsock-bridge.py`,
//! Python from the runtime disk: busybox has no AF_VSOCK, and Node cannot use
//! a vsock as its stdio) connects, starts the server with pipes as its
//! stdin/stdout and copies bytes both ways. The serial port stays what it is
//! under QEMU: the guest console and the server's stderr. Firecracker's own
//! log (its stderr) joins that tail.
//!
//! The kernel finds Firecracker's virtio-mmio devices through ACPI (Debian's
//! cloud kernel has no `virtio_mmio.device=` command-line support), which
//! Firecracker provides on x86_64 from version 1.8 (read, not verified). The
//! guest ends with `reboot -f` (`reboot=k`): Firecracker exits on a CPU reset.
//!
//! Confinement: Firecracker runs as uid 65534 inside bubblewrap with no
//! network namespace of its own, seeing only the image, the package disk,
//! `/dev/kvm` and one folder for its sockets, under its own default seccomp
//! filters. The jailer (chroot, cgroups, its own uid switch) is not used.
//! No network interface is ever configured.
//!
//! None of this has run against a real Firecracker: none is installable on
//! the machines this was written on, and their KVM cannot boot a stock guest
//! anyway (NOTES §0). The tests drive a fake `firecracker` that serves the
//! API, records every call, and plays the guest.

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::image::Image;
use super::process::Running;
use super::vm::{self, Accel, AccelChoice, VmConfig};
use super::RunnerError;

/// The guest's vsock port for the MCP stream.
pub const VSOCK_PORT: u32 = 1024;
/// The guest's vsock context id (3 is the first one free for guests).
const GUEST_CID: u32 = 3;
/// How long Firecracker may take to create its API socket.
const API_WAIT: Duration = Duration::from_secs(10);
/// How long one API request may take.
const API_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the probe guest may take to reach /init.
const PROBE_LIMIT: Duration = Duration::from_secs(15);

/// Which VMM runs the microVM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// Firecracker if a `firecracker` binary is on PATH and boots the probe
    /// guest under KVM, else QEMU.
    Auto,
    /// QEMU's microvm machine (KVM or TCG).
    Qemu,
    /// Firecracker only (fails if it is missing or KVM does not work).
    Firecracker,
}

/// The backend chosen for one fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// QEMU with this accelerator.
    Qemu(Accel),
    /// Firecracker (always KVM).
    Firecracker,
}

impl Backend {
    /// The name recorded in captures.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Qemu(_) => "qemu-microvm",
            Backend::Firecracker => "firecracker",
        }
    }
    /// The accelerator recorded in captures.
    pub fn accel(self) -> Accel {
        match self {
            Backend::Qemu(a) => a,
            Backend::Firecracker => Accel::Kvm,
        }
    }
}

/// The `firecracker` binary on PATH, if any.
pub fn binary() -> Option<PathBuf> {
    vm::which("firecracker")
}

/// Decides the backend (and QEMU's accelerator). Returns notes worth
/// recording (why an option was not used).
pub fn choose(
    image: &Image,
    backend: BackendChoice,
    accel: AccelChoice,
) -> Result<(Backend, Vec<String>), RunnerError> {
    let mut notes = Vec::new();
    let qemu = |notes: &mut Vec<String>| -> Result<Backend, RunnerError> {
        let (a, why) = vm::choose_accel(image, accel)?;
        if let Some(why) = why {
            notes.push(format!("KVM not used: {why}"));
        }
        Ok(Backend::Qemu(a))
    };
    match backend {
        BackendChoice::Qemu => Ok((qemu(&mut notes)?, notes)),
        BackendChoice::Firecracker => {
            if accel == AccelChoice::Tcg {
                return Err(RunnerError::Usage(
                    "--backend firecracker runs only with KVM; --accel tcg needs --backend qemu"
                        .into(),
                ));
            }
            let bin = binary().ok_or_else(|| {
                RunnerError::NoVm("--backend firecracker: no `firecracker` binary on PATH".into())
            })?;
            let id = verdict(image, &bin).map_err(|why| {
                RunnerError::NoVm(format!(
                    "--backend firecracker: KVM does not work here for Firecracker: {why}\n\
                     (not falling back to QEMU; use --backend qemu or --backend auto for that)"
                ))
            })?;
            notes.push(id);
            Ok((Backend::Firecracker, notes))
        }
        BackendChoice::Auto => {
            if accel == AccelChoice::Tcg {
                return Ok((qemu(&mut notes)?, notes));
            }
            if let Some(bin) = binary() {
                match verdict(image, &bin) {
                    Ok(id) => {
                        notes.push(id);
                        return Ok((Backend::Firecracker, notes));
                    }
                    Err(why) => notes.push(format!("Firecracker not used: {why}")),
                }
            }
            Ok((qemu(&mut notes)?, notes))
        }
    }
}

/// Whether `/dev/kvm` is there and can be opened.
fn kvm_openable() -> Result<(), String> {
    let kvm = Path::new("/dev/kvm");
    if !kvm.exists() {
        return Err("no /dev/kvm".into());
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(kvm)
        .map(|_| ())
        .map_err(|e| format!("/dev/kvm cannot be opened: {e}"))
}

/// The cached verdict for this host kernel, image and Firecracker binary, or
/// a fresh probe. When it works, returns a note naming the binary (path and
/// sha256) for the capture's provenance.
fn verdict(image: &Image, bin: &Path) -> Result<String, String> {
    kvm_openable()?;
    let host = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let bin_hash = {
        use sha2::{Digest, Sha256};
        let bytes = std::fs::read(bin).map_err(|e| format!("reading {}: {e}", bin.display()))?;
        format!("{:x}", Sha256::digest(&bytes))
    };
    let key = format!("{}|{}|{}", host.trim(), image.hash, bin_hash);
    let id = format!("Firecracker binary {} (sha256:{bin_hash})", bin.display());
    let cache = super::image::cache_root().join("firecracker-verdict.json");
    if let Ok(bytes) = std::fs::read(&cache) {
        if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
            if v.get("key").and_then(Value::as_str) == Some(key.as_str()) {
                return match v.get("works").and_then(Value::as_bool) {
                    Some(true) => Ok(id),
                    _ => Err(v
                        .get("why")
                        .and_then(Value::as_str)
                        .unwrap_or("probe failed")
                        .to_owned()),
                };
            }
        }
    }
    let result = probe(image);
    let record = json!({
        "key": key,
        "binary": bin.display().to_string(),
        "works": result.is_ok(),
        "why": result.as_ref().err(),
        "at": super::capture::utc_now(),
    });
    let _ = super::capture::write_atomic(&cache, &record);
    result.map(|()| id)
}

/// Boots the probe guest under Firecracker: /init prints a marker and ends.
fn probe(image: &Image) -> Result<(), String> {
    let dir = tempfile::Builder::new()
        .prefix("mcplint-fc-probe-")
        .tempdir()
        .map_err(|e| format!("creating a temporary folder: {e}"))?;
    super::process::register_dir(dir.path().to_path_buf());
    let cfg = VmConfig {
        memory_mib: 256,
        cpus: 1,
    };
    let result = (|| {
        let mut vm = start(image, None, &cfg, dir.path()).map_err(|e| e.msg)?;
        let t0 = Instant::now();
        while t0.elapsed() < PROBE_LIMIT {
            if vm.run.stderr.text().contains("mcplint-guest: probe ok") {
                vm.run.finish(Duration::from_secs(1));
                return Ok(());
            }
            if let Some(st) = vm.run.finish_if_exited() {
                // The guest may have printed the marker and reset at once:
                // take the console's last bytes before judging.
                vm.run.finish(Duration::ZERO);
                let text = vm.run.stderr.text();
                if text.contains("mcplint-guest: probe ok") {
                    return Ok(());
                }
                return Err(format!(
                    "a probe guest did not boot under Firecracker ({st}: {})",
                    last_line(&text)
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        vm.run.finish(Duration::ZERO);
        Err(format!(
            "a probe guest did not reach /init under Firecracker within {} s (nested or emulating KVM, e.g. PVM)",
            PROBE_LIMIT.as_secs()
        ))
    })();
    super::process::unregister_dir(dir.path());
    result
}

fn last_line(tail: &str) -> String {
    let l = tail
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no output");
    crate::display::visible_short(l, 200)
}

/// The kernel command line. Firecracker adds nothing we rely on.
pub fn cmdline(probe: bool) -> String {
    let mut s = String::from(
        "console=ttyS0 quiet panic=-1 reboot=k pci=off mitigations=off nokaslr rdinit=/init \
         i8042.noaux i8042.nomux i8042.nopnp i8042.dumbkbd mcplint.vmm=firecracker",
    );
    if probe {
        s.push_str(" mcplint.probe=1");
    } else {
        s.push_str(&format!(" mcplint.chan=vsock mcplint.port={VSOCK_PORT}"));
    }
    s
}

/// Why starting or configuring the VM failed, with its console so far.
#[derive(Debug)]
pub struct StartError {
    /// What went wrong.
    pub msg: String,
    /// The console and Firecracker's log.
    pub tail: String,
}

impl From<StartError> for RunnerError {
    fn from(e: StartError) -> Self {
        RunnerError::Vm {
            msg: e.msg,
            stderr_tail: e.tail,
        }
    }
}

/// A started Firecracker VM.
pub struct Vm {
    /// The firecracker process (inside bubblewrap); its tail is the console.
    pub run: Running,
    /// Where the guest's vsock connection arrives (absent for the probe).
    listener: Option<UnixListener>,
}

/// The paths as Firecracker sees them inside its sandbox.
const IN_IMG: &str = "/img";
const IN_APP: &str = "/disk/app.ext4";
const IN_RUN: &str = "/run/fc";
const IN_BIN: &str = "/vmm/firecracker";

/// bubblewrap around Firecracker: uid 65534, no network, read-only image
/// and disk, `/dev/kvm`, and `sock_dir` (read-write) for its sockets.
fn command(
    bin: &Path,
    image: &Image,
    app_disk: Option<&Path>,
    sock_dir: &Path,
) -> Result<Command, String> {
    let bwrap = vm::which("bwrap").ok_or(
        "bubblewrap (bwrap) is not installed; Firecracker runs inside it (run scripts/install-runner-deps.sh)",
    )?;
    let mut c = vm::bwrap_for_vmm(&bwrap);
    c.args(["--dev-bind", "/dev/kvm", "/dev/kvm"])
        .arg("--ro-bind")
        .arg(&image.dir)
        .arg(IN_IMG);
    if let Some(d) = app_disk {
        c.arg("--ro-bind").arg(d).arg(IN_APP);
    }
    c.arg("--ro-bind").arg(bin).arg(IN_BIN);
    c.arg("--bind").arg(sock_dir).arg(IN_RUN);
    c.arg("--").arg(IN_BIN);
    c.args(["--api-sock", &format!("{IN_RUN}/api.sock")]);
    c.env_clear();
    Ok(c)
}

/// Starts Firecracker in `work`, configures the VM through its API and
/// starts it. With no `app_disk` this is the probe guest (no disks, no
/// vsock).
pub fn start(
    image: &Image,
    app_disk: Option<&Path>,
    cfg: &VmConfig,
    work: &Path,
) -> Result<Vm, StartError> {
    let fail = |msg: String| StartError {
        msg,
        tail: String::new(),
    };
    let bin = binary().ok_or_else(|| fail("no `firecracker` binary on PATH".into()))?;
    let sock_dir = work.join("fc");
    std::fs::create_dir_all(&sock_dir)
        .map_err(|e| fail(format!("creating {}: {e}", sock_dir.display())))?;
    let api = sock_dir.join("api.sock");
    let vsock_host = sock_dir.join(format!("v.sock_{VSOCK_PORT}"));
    // A unix socket path has at most 107 bytes.
    if vsock_host.as_os_str().len() > 100 {
        return Err(fail(format!(
            "the temporary folder's path is too long for a unix socket: {}",
            sock_dir.display()
        )));
    }
    let probe = app_disk.is_none();
    // Listen before the guest exists, so its connection cannot come too early.
    let listener = if probe {
        None
    } else {
        let l = UnixListener::bind(&vsock_host)
            .map_err(|e| fail(format!("listening on {}: {e}", vsock_host.display())))?;
        l.set_nonblocking(true)
            .map_err(|e| fail(format!("listening: {e}")))?;
        Some(l)
    };
    let cmd = command(&bin, image, app_disk, &sock_dir).map_err(fail)?;
    let run = Running::spawn_console(cmd)
        .map_err(|e| fail(format!("starting bubblewrap and firecracker: {e}")))?;
    let mut vm = Vm { run, listener };
    let err = |vm: &mut Vm, msg: String| {
        vm.run.finish(Duration::ZERO);
        StartError {
            msg,
            tail: vm.run.stderr.text(),
        }
    };
    // Wait for the API socket.
    let t0 = Instant::now();
    loop {
        if std::fs::symlink_metadata(&api).is_ok() {
            break;
        }
        if let Some(st) = vm.run.finish_if_exited() {
            vm.run.finish(Duration::ZERO);
            let msg = format!(
                "firecracker exited before its API socket appeared ({st}): {}",
                last_line(&vm.run.stderr.text())
            );
            return Err(err(&mut vm, msg));
        }
        if t0.elapsed() > API_WAIT {
            let msg = format!(
                "firecracker did not create its API socket within {} s",
                API_WAIT.as_secs()
            );
            return Err(err(&mut vm, msg));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut calls: Vec<(String, Value)> = vec![
        (
            "/machine-config".into(),
            json!({"vcpu_count": cfg.cpus.max(1), "mem_size_mib": cfg.memory_mib}),
        ),
        (
            "/boot-source".into(),
            json!({
                "kernel_image_path": format!("{IN_IMG}/vmlinux"),
                "initrd_path": format!("{IN_IMG}/initrd.cpio"),
                "boot_args": cmdline(probe),
            }),
        ),
    ];
    if !probe {
        for (id, path) in [
            ("runtime", format!("{IN_IMG}/runtime.ext4")),
            ("app", IN_APP.to_owned()),
        ] {
            calls.push((
                format!("/drives/{id}"),
                json!({"drive_id": id, "path_on_host": path, "is_root_device": false, "is_read_only": true}),
            ));
        }
        calls.push((
            "/vsock".into(),
            json!({"guest_cid": GUEST_CID, "uds_path": format!("{IN_RUN}/v.sock")}),
        ));
    }
    calls.push(("/actions".into(), json!({"action_type": "InstanceStart"})));
    for (path, body) in &calls {
        if let Err(e) = super::firecracker_api::put(&api, path, body, API_TIMEOUT) {
            return Err(err(&mut vm, format!("configuring Firecracker: {e}")));
        }
    }
    Ok(vm)
}

impl Vm {
    /// Waits for the guest's vsock connection: until `limit`, or until
    /// Firecracker exits.
    pub fn accept(&mut self, limit: Duration) -> Result<UnixStream, StartError> {
        let t0 = Instant::now();
        let Some(listener) = &self.listener else {
            return Err(StartError {
                msg: "the probe VM has no vsock channel".into(),
                tail: String::new(),
            });
        };
        let msg = loop {
            match listener.accept() {
                Ok((s, _)) => {
                    if let Err(e) = s.set_nonblocking(false) {
                        break format!("the guest's vsock connection: {e}");
                    }
                    return Ok(s);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => break format!("waiting for the guest's vsock connection: {e}"),
            }
            if let Some(st) = self.run.finish_if_exited() {
                self.run.finish(Duration::ZERO);
                break format!(
                    "Firecracker exited ({st}) before the guest connected its MCP channel: {}",
                    last_line(&self.run.stderr.text())
                );
            }
            if t0.elapsed() > limit {
                break format!(
                    "the guest did not connect its MCP channel (vsock port {VSOCK_PORT}) within {:.1} s",
                    limit.as_secs_f64()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        self.run.finish(Duration::ZERO);
        Err(StartError {
            msg,
            tail: self.run.stderr.text(),
        })
    }
}

/// The host's end of the MCP stream: writes go to the guest; dropping it
/// shuts the write side down (the reader holds a clone of the socket, so a
/// plain drop would not close it), which the guest bridge passes on to the
/// server as end of input.
pub struct VsockWriter(pub UnixStream);

impl std::io::Write for VsockWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl Drop for VsockWriter {
    fn drop(&mut self) {
        let _ = self.0.shutdown(std::net::Shutdown::Write);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_modes() {
        let run = cmdline(false);
        assert!(run.contains("mcplint.chan=vsock mcplint.port=1024"));
        assert!(run.contains("reboot=k") && run.contains("console=ttyS0"));
        assert!(!run.contains("mcplint.probe"));
        let probe = cmdline(true);
        assert!(probe.contains("mcplint.probe=1"));
        assert!(!probe.contains("mcplint.chan"));
    }

    #[test]
    fn names() {
        assert_eq!(Backend::Firecracker.name(), "firecracker");
        assert_eq!(Backend::Firecracker.accel(), Accel::Kvm);
        assert_eq!(Backend::Qemu(Accel::Tcg).name(), "qemu-microvm");
        assert_eq!(Backend::Qemu(Accel::Tcg).accel(), Accel::Tcg);
    }
}

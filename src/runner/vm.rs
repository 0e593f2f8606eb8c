//! The QEMU `microvm` backend, and the bubblewrap boundary around QEMU itself.
//!
//! Layout of a run (recipe and traps measured in shared/runner/NOTES.md):
//! - the extracted vmlinux boots through PVH with the initramfs (padded to
//!   4 KiB); microvm keeps ACPI on, the only way this kernel finds its
//!   virtio-mmio devices;
//! - the runtime disk and the package disk are read-only virtio-blk devices;
//! - the MCP channel is a virtio-serial port named `mcp` wired to QEMU's own
//!   stdin/stdout (a clean byte pipe); the guest console and the server's
//!   stderr go to the serial port, wired to QEMU's stderr;
//! - no network device at all, unless hosts are allowed (`--allow-host`):
//!   then a restricted user network whose only exits are one `guestfwd` per
//!   host to the egress relay (see [`super::egress`]);
//! - QEMU runs under its seccomp sandbox, as uid 65534, inside bubblewrap
//!   with no network namespace of its own and only the files it needs;
//! - by default the VM is not booted but restored from the boot snapshot
//!   ([`Boot`], [`super::snapshot`]).
//!
//! KVM is used only when a tiny probe guest actually boots under it (on these
//! machines `/dev/kvm` is nested PVM, under which a stock kernel never
//! boots); the verdict is cached per host kernel and image. Otherwise TCG,
//! which needs `tsc_early_khz` because calibration fails without a PIT/HPET.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::image::Image;
use super::process::Running;
use super::RunnerError;

/// Which accelerator to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AccelChoice {
    /// KVM if a probe guest boots under it, else TCG.
    Auto,
    /// KVM only (fails if it does not work).
    Kvm,
    /// Software emulation only.
    Tcg,
}

/// The accelerator a VM ran with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// Hardware virtualisation.
    Kvm,
    /// QEMU's software emulation.
    Tcg,
}

impl Accel {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// Resources of one VM.
#[derive(Debug, Clone)]
pub struct VmConfig {
    /// Guest memory in MiB.
    pub memory_mib: u32,
    /// vCPUs.
    pub cpus: u32,
}

/// The network of a VM whose server may reach some hosts (see
/// [`super::egress`]).
#[derive(Debug, Clone)]
pub struct EgressSpec {
    /// The allowed host names, in guest-address order (10.0.2.100, …).
    pub hosts: Vec<String>,
    /// The host folder holding the proxy's socket.
    pub socket_dir: PathBuf,
    /// The relay program QEMU starts per guest connection (this binary).
    pub relay: PathBuf,
}

/// The QEMU binary.
pub fn qemu_binary() -> Result<PathBuf, RunnerError> {
    which("qemu-system-x86_64").ok_or_else(|| {
        RunnerError::NoVm("qemu-system-x86_64 is not installed (run scripts/install-runner-deps.sh: it comes from bookworm-backports)".into())
    })
}

/// Finds a program on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The host TSC frequency in kHz, from /proc/cpuinfo.
fn tsc_khz() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let mhz: f64 = info
        .lines()
        .find(|l| l.starts_with("cpu MHz"))?
        .split(':')
        .nth(1)?
        .trim()
        .parse()
        .ok()?;
    Some((mhz * 1000.0) as u64)
}

/// Start-up tunings of the guest, on by default. `MCPLINT_VM_BASELINE=1`
/// turns them all off so `bench/fetch.sh` can measure what they buy in the
/// same run; every capture records which ones applied.
pub fn tuned() -> bool {
    std::env::var_os("MCPLINT_VM_BASELINE").is_none_or(|v| v != "1")
}

/// Kernel parameters that only skip work a throwaway guest does not need
/// (measured under TCG, bench/fetch.sh): no zeroing of every kernel
/// allocation (user pages are still zeroed), no crypto self-tests at boot
/// (0.8 s of guest time), no clocksource watchdog that demotes the TSC to
/// jiffies under emulation (with jiffies every clock read of the server is
/// a system call instead of a vDSO read), no PCI probing (microvm has no PCI
/// bus; its virtio-mmio devices come from ACPI, which stays on), no LSMs
/// or audit (one process in a guest that is thrown away).
const FAST_BOOT: &str =
    "init_on_alloc=0 cryptomgr.notests tsc=reliable nowatchdog pci=off lsm=capability audit=0";

/// The names of the tunings [`command`] applies, for the capture.
pub fn tunings() -> Vec<String> {
    if tuned() {
        vec!["kernel-cmdline-fast-boot".into()]
    } else {
        vec![]
    }
}

/// Node.js options for servers in the guest. `--preserve-symlinks` (and
/// `-main`) skip the `realpath` of every module the loader resolves: an
/// `npm install` tree has no symlinked packages, so resolution gives the
/// same files, and under TCG the saved `lstat` walks were 13 % of the
/// server-memory start-up CPU (bench/fetch.sh). Empty when untuned.
pub fn node_flags() -> &'static [&'static str] {
    if tuned() {
        &["--preserve-symlinks", "--preserve-symlinks-main"]
    } else {
        &[]
    }
}

/// The kernel command line.
fn cmdline(accel: Accel, probe: bool) -> String {
    let mut s = String::from("console=ttyS0 quiet panic=-1 mitigations=off nokaslr rdinit=/init");
    if accel == Accel::Tcg {
        if let Some(k) = tsc_khz() {
            s.push_str(&format!(" tsc_early_khz={k}"));
        }
    }
    if tuned() {
        s.push(' ');
        s.push_str(FAST_BOOT);
    }
    if probe {
        s.push_str(" mcplint.probe=1");
    }
    s
}

/// [`cmdline`], plus `mcplint.net=` which tells the guest init to bring up
/// eth0 and map each allowed name to its address in /etc/hosts.
fn cmdline_with(accel: Accel, probe: bool, egress: Option<&EgressSpec>) -> String {
    let mut s = cmdline(accel, probe);
    if let Some(e) = egress {
        // Names were checked by egress::parse_host: letters, digits, `-`, `.`.
        s.push_str(&format!(" mcplint.net={}", e.hosts.join(",")));
    }
    s
}

/// How a VM starts: a cold boot, the boot that saves the snapshot, or a
/// restore from it (see [`super::snapshot`]).
#[derive(Debug, Clone, Copy)]
pub enum Boot<'a> {
    /// Kernel boot from scratch.
    Cold,
    /// Boot with `mcplint.snapshot=1` and a QMP socket, in this writable
    /// folder (which holds the placeholder package disk); the caller saves
    /// the state once the guest says it is ready.
    Save(&'a Path),
    /// Restore the state saved in the first folder (read-only) instead of
    /// booting; the second (writable) gets this run's control and QMP
    /// sockets, and the package's warm state when one is saved.
    Restore(&'a Path, &'a Path),
}

/// Where [`Boot::Save`] and [`Boot::Restore`] see their folder inside the
/// sandbox.
pub const SNAP_DIR: &str = "/snap";
/// Where a snapshot machine sees its writable run folder (for
/// [`Boot::Save`], the snapshot folder itself).
pub const RUN_DIR: &str = "/vmrun";
/// The control port's socket, in the run folder: the host's go line after a
/// restore of a package's warm snapshot (see [`super::warm`]).
pub const CTL: &str = "ctl.sock";

/// The whole command: bubblewrap around QEMU. `app_disk` is the package disk
/// (absent for the probe).
pub fn command(
    image: &Image,
    app_disk: Option<&Path>,
    cfg: &VmConfig,
    accel: Accel,
) -> Result<Command, RunnerError> {
    command_with_egress(image, app_disk, cfg, accel, None)
}

/// [`command`], with a restricted network to the allowed hosts when
/// `egress` is given.
pub fn command_with_egress(
    image: &Image,
    app_disk: Option<&Path>,
    cfg: &VmConfig,
    accel: Accel,
    egress: Option<&EgressSpec>,
) -> Result<Command, RunnerError> {
    command_boot(image, app_disk, cfg, accel, egress, Boot::Cold)
}

/// [`command_with_egress`], started as `boot` says. A snapshot's VM must be
/// the same machine on both sides (same devices, memory, CPU model, kernel
/// command line): [`Boot::Save`] and [`Boot::Restore`] build it here from the
/// same arguments, and the snapshot's key covers them.
pub fn command_boot(
    image: &Image,
    app_disk: Option<&Path>,
    cfg: &VmConfig,
    accel: Accel,
    egress: Option<&EgressSpec>,
    boot: Boot<'_>,
) -> Result<Command, RunnerError> {
    let qemu = qemu_binary()?;
    let bwrap = which("bwrap").ok_or_else(|| {
        RunnerError::NoVm("bubblewrap (bwrap) is not installed; QEMU runs inside it (run scripts/install-runner-deps.sh)".into())
    })?;
    let mut c = bwrap_for_vmm(&bwrap);
    c.arg("--ro-bind").arg(&image.dir).arg("/img");
    if let Some(d) = app_disk {
        c.arg("--ro-bind").arg(d).arg("/disk/app.ext4");
    }
    match boot {
        Boot::Cold => {}
        // QEMU writes the state and its QMP socket there.
        Boot::Save(dir) => {
            c.arg("--bind").arg(dir).arg(SNAP_DIR);
            c.arg("--bind").arg(dir).arg(RUN_DIR);
        }
        Boot::Restore(dir, run) => {
            c.arg("--ro-bind").arg(dir).arg(SNAP_DIR);
            c.arg("--bind").arg(run).arg(RUN_DIR);
        }
    }
    if accel == Accel::Kvm {
        c.args(["--dev-bind", "/dev/kvm", "/dev/kvm"]);
    }
    if let Some(e) = egress {
        // The proxy's socket (a unix socket: QEMU's sandbox has no network
        // of its own) and the relay binary, both read-only.
        c.arg("--ro-bind").arg(&e.socket_dir).arg("/egress");
        c.arg("--ro-bind").arg(&e.relay).arg("/relay/mcplint");
    }
    c.arg("--").arg(qemu);
    // No legacy 8259 PIC. Until the kernel switches to the I/O APIC, the
    // local APIC passes the PIC's interrupts through (virtual wire), and
    // microvm's PIC is never programmed, so a timer tick pending at the
    // kernel's first `sti` arrives as vector 0, which the kernel takes for a
    // divide error (or a triple fault, before the console is up). Whether
    // one is pending is a race: under TCG on a 2026-12 host, 6 boots of 20
    // got through with the PIC and 20 of 20 without (alternated). The PIT
    // stays, polled only.
    c.args(["-M", "microvm,pit=on,pic=off,rtc=on,acpi=on"]);
    match accel {
        Accel::Kvm => c.args(["-accel", "kvm", "-cpu", "host"]),
        Accel::Tcg => c.args(["-accel", "tcg,thread=multi", "-cpu", "max"]),
    };
    c.args([
        "-m",
        &cfg.memory_mib.to_string(),
        "-smp",
        &cfg.cpus.max(1).to_string(),
    ])
    .args([
        "-nodefaults",
        "-no-user-config",
        "-no-reboot",
        "-display",
        "none",
    ])
    // With allowed hosts QEMU must start the relay per guest connection:
    // that needs fork/exec, and setsid (which QEMU files under "elevate
    // privileges") in the child libslirp forks. Nothing is gained by it
    // here: bubblewrap has dropped every capability, set no_new_privs and
    // mapped QEMU to an unprivileged user.
    .args([
        "-sandbox",
        if egress.is_some() {
            "on,obsolete=deny,elevateprivileges=allow,spawn=allow,resourcecontrol=deny"
        } else {
            "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"
        },
    ])
    // Guest console and server stderr -> QEMU's stderr.
    .args([
        "-chardev",
        "file,id=con,path=/proc/self/fd/2",
        "-serial",
        "chardev:con",
    ])
    // The MCP channel -> QEMU's stdin/stdout.
    .args([
        "-chardev",
        "stdio,id=mcp,signal=off",
        "-device",
        "virtio-serial-device",
    ])
    .args(["-device", "virtserialport,chardev=mcp,name=mcp"]);
    if !matches!(boot, Boot::Cold) {
        // A snapshot machine has a control port too (the same devices on
        // both sides of a save), and a QMP socket to save it through.
        c.args([
            "-chardev",
            &format!("socket,id=ctl,path={RUN_DIR}/{CTL},server=on,wait=off"),
            "-device",
            "virtserialport,chardev=ctl,name=ctl",
            "-qmp",
            &format!("unix:{RUN_DIR}/{},server=on,wait=off", super::snapshot::QMP),
        ]);
    }
    c.args(["-device", "virtio-rng-device"])
        .args(["-kernel", "/img/vmlinux", "-initrd", "/img/initrd.cpio"])
        .args([
            "-drive",
            "file=/img/runtime.ext4,if=none,id=rt,format=raw,readonly=on",
        ])
        .args(["-device", "virtio-blk-device,drive=rt"]);
    let app_file = match boot {
        Boot::Save(_) => Some(format!("{SNAP_DIR}/{}", super::snapshot::PLACEHOLDER)),
        _ => app_disk.map(|_| "/disk/app.ext4".to_owned()),
    };
    if let Some(f) = app_file {
        c.args([
            "-drive",
            &format!("file={f},if=none,id=app,format=raw,readonly=on"),
        ])
        .args(["-device", "virtio-blk-device,drive=app"]);
    }
    if let Some(e) = egress {
        c.args([
            "-netdev",
            &netdev(e),
            "-device",
            "virtio-net-device,netdev=n0",
        ]);
    }
    let mut line = cmdline_with(
        accel,
        app_disk.is_none() && matches!(boot, Boot::Cold),
        egress,
    );
    match boot {
        Boot::Cold => {}
        Boot::Save(_) => {
            line.push_str(" mcplint.snapshot=1");
        }
        Boot::Restore(..) => {
            line.push_str(" mcplint.snapshot=1");
            c.args([
                "-incoming",
                &format!("file:{SNAP_DIR}/{}", super::snapshot::STATE),
            ]);
        }
    }
    c.arg("-append").arg(line);
    c.env_clear();
    Ok(c)
}

/// The restricted user network: `restrict=on` drops every guest packet that
/// is not for a `guestfwd` rule (no host, no outside, no DNS), and each
/// allowed host gets one rule on port 443 that starts the relay.
fn netdev(e: &EgressSpec) -> String {
    let mut s = String::from("user,id=n0,restrict=on,ipv6=off");
    for (i, h) in e.hosts.iter().enumerate() {
        s.push_str(&format!(
            ",guestfwd=tcp:{}:{}-cmd:/relay/mcplint runner egress-relay /egress/{} {h}",
            super::egress::guest_ip(i),
            super::egress::UPSTREAM_PORT,
            super::egress::SOCKET_NAME,
        ));
    }
    s
}

/// bubblewrap as every sandbox here starts: all namespaces new (so no
/// network), killed with its parent, its own session (no terminal to push
/// input into), no capabilities, uid and gid 65534.
pub fn bwrap_base(bwrap: &Path) -> Command {
    let mut c = Command::new(bwrap);
    c.args([
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ])
    .args(["--uid", "65534", "--gid", "65534"]);
    c
}

/// [`bwrap_base`] with `usr` read-only as `/usr` and the usual `/lib`,
/// `/lib64`, `/bin` links to it, `/proc`, `/dev` and a tmpfs `/tmp`: the
/// file system both sandboxed runs (a VMM, or the server itself) start from.
pub fn bwrap_with_usr(bwrap: &Path, usr: &Path) -> Command {
    let mut c = bwrap_base(bwrap);
    c.arg("--ro-bind")
        .arg(usr)
        .arg("/usr")
        .args([
            "--symlink",
            "usr/lib",
            "/lib",
            "--symlink",
            "usr/lib64",
            "/lib64",
            "--symlink",
            "usr/bin",
            "/bin",
        ])
        .args(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]);
    c
}

/// What a VMM binary (QEMU, Firecracker) needs to run: the host's `/usr`
/// through [`bwrap_with_usr`], plus `/sbin`. Nothing of the user's home is
/// visible.
pub fn bwrap_for_vmm(bwrap: &Path) -> Command {
    let mut c = bwrap_with_usr(bwrap, Path::new("/usr"));
    c.args(["--symlink", "usr/sbin", "/sbin"]);
    c
}

/// Decides the accelerator: asks for KVM only if it really boots a guest.
/// Returns the accelerator and, when KVM was refused, why.
pub fn choose_accel(
    image: &Image,
    choice: AccelChoice,
) -> Result<(Accel, Option<String>), RunnerError> {
    if choice == AccelChoice::Tcg {
        return Ok((Accel::Tcg, None));
    }
    let verdict = kvm_verdict(image);
    match (choice, verdict) {
        (_, Ok(())) => Ok((Accel::Kvm, None)),
        (AccelChoice::Kvm, Err(why)) => Err(RunnerError::NoVm(format!(
            "--accel kvm: KVM does not work here: {why}"
        ))),
        (_, Err(why)) => Ok((Accel::Tcg, Some(why))),
    }
}

fn kvm_verdict(image: &Image) -> Result<(), String> {
    let kvm = Path::new("/dev/kvm");
    if !kvm.exists() {
        return Err("no /dev/kvm".into());
    }
    if std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(kvm)
        .is_err()
    {
        return Err("/dev/kvm cannot be opened".into());
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let key = format!("{}|{}", host.trim(), image.hash);
    let cache = super::image::cache_root().join("kvm-verdict.json");
    if let Ok(bytes) = std::fs::read(&cache) {
        if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
            if v.get("key").and_then(Value::as_str) == Some(key.as_str()) {
                return match v.get("works").and_then(Value::as_bool) {
                    Some(true) => Ok(()),
                    _ => Err(v
                        .get("why")
                        .and_then(Value::as_str)
                        .unwrap_or("probe failed")
                        .to_owned()),
                };
            }
        }
    }
    let result = probe_kvm(image);
    let record = json!({"key": key, "works": result.is_ok(), "why": result.as_ref().err(), "at": super::capture::utc_now()});
    let _ = super::capture::write_atomic(&cache, &record);
    result
}

/// Boots the probe guest under KVM: it prints a marker from /init and powers off.
fn probe_kvm(image: &Image) -> Result<(), String> {
    const LIMIT: Duration = Duration::from_secs(15);
    let cfg = VmConfig {
        memory_mib: 256,
        cpus: 1,
    };
    let cmd = command(image, None, &cfg, Accel::Kvm).map_err(|e| e.to_string())?;
    let (mut run, stdin, _stdout) =
        Running::spawn(cmd).map_err(|e| format!("could not start QEMU: {e}"))?;
    let start = Instant::now();
    while start.elapsed() < LIMIT {
        if run.stderr.text().contains("mcplint-guest: probe ok") {
            drop(stdin);
            run.finish(Duration::from_secs(2));
            return Ok(());
        }
        if let Some(st) = run.finish_if_exited() {
            let tail = run.stderr.text();
            let last = tail
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .to_owned();
            return Err(format!(
                "a probe guest did not boot under KVM (QEMU {st}: {})",
                crate::display::visible_short(&last, 160)
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(stdin);
    run.finish(Duration::ZERO);
    Err(format!(
        "a probe guest did not reach /init under KVM within {} s (nested or emulating KVM, e.g. PVM)",
        LIMIT.as_secs()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_network_exists_only_for_allowed_hosts() {
        let spec = EgressSpec {
            hosts: vec!["api.example.com".into(), "auth.example.com".into()],
            socket_dir: PathBuf::from("/tmp/x"),
            relay: PathBuf::from("/bin/true"),
        };
        assert_eq!(
            netdev(&spec),
            "user,id=n0,restrict=on,ipv6=off,\
             guestfwd=tcp:10.0.2.100:443-cmd:/relay/mcplint runner egress-relay /egress/egress.sock api.example.com,\
             guestfwd=tcp:10.0.2.101:443-cmd:/relay/mcplint runner egress-relay /egress/egress.sock auth.example.com"
        );
        let with = cmdline_with(Accel::Kvm, false, Some(&spec));
        assert!(with.ends_with(" mcplint.net=api.example.com,auth.example.com"));
        assert!(!cmdline_with(Accel::Kvm, false, None).contains("mcplint.net"));
    }
}

//! The companion runner: fetch a live manifest from a server started in a
//! throwaway microVM (or, when a person asks for it, a weaker boundary).
//!
//! Pieces: [`source`] gets a package onto the host without running any of it
//! ([`bundle`] does it for MCPB bundles); [`spec`] turns a `server.json`,
//! client-config entry or bundle manifest into such a source;
//! [`image`] builds the cached guest image; [`vm`] boots QEMU's microvm inside
//! bubblewrap, or [`firecracker`] boots the same image under Firecracker
//! (configured over [`firecracker_api`]); [`process`] owns child processes
//! (killed on drop and on Ctrl-C); [`client`] speaks MCP over the pipe;
//! [`http`] speaks it to remote servers; [`capture`] writes the result with
//! its provenance.

pub mod bundle;
pub mod capture;
pub mod client;
pub mod egress;
pub mod firecracker;
pub mod firecracker_api;
pub mod http;
pub mod image;
pub mod process;
pub mod sdist;
pub mod snapshot;
pub mod source;
pub mod spec;
pub mod sse;
pub mod vm;
pub mod warm;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use client::{Client, ClientError, ClientOptions, LinePipe, Manifest};
use process::{Heard, Running};
use source::{host_python, Prepared, Source, APP_DIR};

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// Bad arguments.
    #[error("{0}")]
    Usage(String),
    /// Downloading or unpacking the package failed.
    #[error("preparing the package: {0}")]
    Prepare(String),
    /// Building the guest image failed.
    #[error("runner setup: {0}")]
    Setup(String),
    /// No VM can run.
    #[error("no microVM available: {0}")]
    NoVm(String),
    /// The session with the server failed.
    #[error("{error}{}", tail_note(.stderr_tail))]
    Session {
        /// What went wrong.
        error: ClientError,
        /// The last lines of the server's stderr (and guest console).
        stderr_tail: String,
    },
    /// The wall-clock limit was reached.
    #[error("the server did not finish within the {secs} s wall-clock limit; it was killed{}", tail_note(.stderr_tail))]
    WallClock {
        /// The limit.
        secs: u64,
        /// The last lines of stderr.
        stderr_tail: String,
    },
    /// The VM could not be started or configured.
    #[error("{msg}{}", tail_note(.stderr_tail))]
    Vm {
        /// What went wrong.
        msg: String,
        /// The VM's console so far.
        stderr_tail: String,
    },
    /// A file operation failed.
    #[error("{what}: {err}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        err: std::io::Error,
    },
}

fn tail_note(tail: &str) -> String {
    let lines: Vec<&str> = tail.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    let last: Vec<String> = lines[lines.len().saturating_sub(12)..]
        .iter()
        .map(|l| format!("  | {}", crate::display::visible_short(l, 200)))
        .collect();
    format!("\nlast lines of the server's stderr:\n{}", last.join("\n"))
}

impl RunnerError {
    /// An I/O error with context.
    pub fn io(what: &str, err: std::io::Error) -> Self {
        RunnerError::Io {
            what: what.to_owned(),
            err,
        }
    }
}

/// The isolation boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Sandbox {
    /// A throwaway microVM (default).
    Microvm,
    /// Bubblewrap namespaces on the host kernel (weaker, faster).
    Namespaces,
    /// Nothing: the server runs on the host as you (only with --no-sandbox).
    None,
}

impl Sandbox {
    /// The name recorded in captures.
    pub fn name(self) -> &'static str {
        match self {
            Sandbox::Microvm => "microvm",
            Sandbox::Namespaces => "namespaces",
            Sandbox::None => "none",
        }
    }
}

/// What to fetch.
#[derive(Debug, Clone)]
pub enum Target {
    /// A package or remote source.
    Source(Source),
    /// A local command (only without a sandbox).
    Command(Vec<String>),
}

/// Everything `fetch` needs besides the target.
#[derive(Debug, Clone)]
pub struct FetchOptions {
    /// The boundary.
    pub sandbox: Sandbox,
    /// Protocol client options.
    pub client: ClientOptions,
    /// Wall-clock limit for the server's whole life.
    pub timeout: Duration,
    /// VM resources.
    pub vm: vm::VmConfig,
    /// Accelerator choice.
    pub accel: vm::AccelChoice,
    /// Which VMM runs the microVM.
    pub backend: firecracker::BackendChoice,
    /// Environment variables given to the server (placeholders for secrets).
    pub env: Vec<(String, String)>,
    /// Extra arguments after the server's entry point.
    pub server_args: Vec<String>,
    /// HTTP headers for remote servers.
    pub headers: Vec<(String, String)>,
    /// The source as typed, for provenance.
    pub source_text: String,
    /// Notes to record.
    pub notes: Vec<String>,
    /// Hosts the server may reach on port 443 through the egress proxy
    /// (microVM only; empty = no network device at all).
    pub allow_hosts: Vec<String>,
    /// Names of declared secrets: each is given a placeholder value
    /// (whatever `env` says), recorded as such in the capture.
    pub secrets: Vec<String>,
    /// Build a PyPI package that has no wheel from its sdist inside the
    /// sandbox instead of refusing it.
    pub build_in_guest: bool,
    /// The launch spec (server.json, client-config entry, MCPB bundle) the
    /// source was resolved from, recorded in the capture.
    pub origin: Option<spec::Origin>,
    /// Told each step as it begins (installing, booting, restoring, saving),
    /// for a person waiting at a terminal: [`progress_to_terminal`] or
    /// [`no_progress`].
    pub progress: fn(&str),
}

/// A [`FetchOptions::progress`] that says nothing.
pub fn no_progress(_: &str) {}

/// A [`FetchOptions::progress`] that prints each step on standard error
/// when that is a terminal (a fetch under TCG can take tens of seconds;
/// logs and pipes stay as they were). The step may hold text from a config
/// file or a package: it is shown with [`crate::display::visible`].
pub fn progress_to_terminal(step: &str) {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        eprintln!("mcplint: {}", crate::display::visible(step));
    }
}

/// Fetches a manifest and returns the capture document.
pub fn fetch(target: &Target, opts: &FetchOptions) -> Result<Value, RunnerError> {
    process::install_interrupt_handler();
    let r = fetch_once(target, opts);
    // Interrupted (Ctrl-C, SIGTERM): the handler thread is killing what was
    // started and removing its files, and exits 130 itself. The session it
    // broke is no error to report: wait for the handler instead of racing it.
    while r.is_err() && process::interrupted() {
        std::thread::park_timeout(Duration::from_secs(1));
    }
    r
}

/// [`fetch`] without the wait for an interrupt handler.
fn fetch_once(target: &Target, opts: &FetchOptions) -> Result<Value, RunnerError> {
    let t0 = Instant::now();
    // Secrets get placeholders, whatever value came with them.
    let mut env: Vec<(String, String)> = opts
        .env
        .iter()
        .filter(|(k, _)| !opts.secrets.contains(k))
        .cloned()
        .collect();
    for name in &opts.secrets {
        env.push((name.clone(), spec::placeholder(name)));
    }
    let opts = &FetchOptions {
        env,
        ..opts.clone()
    };
    let hosts = checked_hosts(target, opts)?;
    let mut prov = capture::Provenance {
        source: opts.source_text.clone(),
        boundary: opts.sandbox.name().into(),
        notes: opts.notes.clone(),
        env_placeholders: opts.env.iter().map(|(k, _)| k.clone()).collect(),
        secret_placeholders: opts.secrets.clone(),
        origin: opts.origin.clone(),
        ..Default::default()
    };
    let manifest = match target {
        Target::Source(Source::Remote(url)) => {
            prov.boundary = "remote".into();
            prov.backend = "http".into();
            let (m, transport, note) = http::fetch(url, &opts.headers, &opts.client)?;
            prov.transport = Some(transport.into());
            prov.notes.extend(note);
            prov.wall_s = Some(t0.elapsed().as_secs_f64());
            m
        }
        Target::Command(argv) => {
            if opts.sandbox != Sandbox::None {
                return Err(RunnerError::Usage(
                    "--command runs a program on this host: it needs --no-sandbox".into(),
                ));
            }
            prov.backend = "host".into();
            prov.argv = argv.clone();
            let mut cmd = Command::new(&argv[0]);
            cmd.args(&argv[1..]).args(&opts.server_args);
            host_env(&mut cmd, &opts.env, &[]);
            run_stdio(cmd, opts, &mut prov, t0)?
        }
        Target::Source(src) => {
            let work = WorkDir::new()?;
            if opts.build_in_guest && opts.sandbox == Sandbox::None {
                return Err(RunnerError::Usage(
                    "--build-in-guest builds inside the sandbox; with --no-sandbox there is none"
                        .into(),
                ));
            }
            (opts.progress)(&format!(
                "unpacking {} on this host (install scripts off: nothing of it runs here)",
                opts.source_text
            ));
            let prepared = source::prepare(src, &work.path.join("pkg"), opts.build_in_guest)?;
            prov.notes.extend(prepared.notes.iter().cloned());
            prov.package = Some(prepared.name.clone());
            prov.resolved_version = Some(prepared.version.clone());
            prov.integrity = prepared.integrity.clone();
            if matches!(prepared.runtime, source::Runtime::Python) {
                let run_dir = match opts.sandbox {
                    Sandbox::None => prepared.dir.clone(),
                    _ => std::path::PathBuf::from(APP_DIR),
                };
                source::precompile_python(&prepared.dir, &run_dir);
            }
            let result = match opts.sandbox {
                Sandbox::None => {
                    let dir = prepared.dir.display().to_string();
                    let mut argv = prepared.argv(&dir, "node", &host_python());
                    argv.extend(opts.server_args.iter().cloned());
                    prov.backend = "host".into();
                    prov.argv = argv.clone();
                    let mut cmd = Command::new(&argv[0]);
                    cmd.args(&argv[1..]).current_dir(&work.path);
                    host_env(&mut cmd, &opts.env, &prepared.env(&dir));
                    (opts.progress)("starting the server on this host, with no sandbox");
                    prov.prepare_s = Some(t0.elapsed().as_secs_f64());
                    run_stdio(cmd, opts, &mut prov, t0)
                }
                Sandbox::Namespaces => {
                    let image = image::find_cached().ok_or_else(|| {
                        RunnerError::NoVm("no runtime: run `mcplint runner setup` first".into())
                    })?;
                    let mut argv = prepared.argv(APP_DIR, "/usr/bin/node", "/usr/bin/python3");
                    argv.extend(opts.server_args.iter().cloned());
                    prov.backend = "bubblewrap".into();
                    prov.image_hash = Some(image.id());
                    prov.argv = argv.clone();
                    let cmd = namespaces_command(&image, &prepared, &argv, &opts.env)?;
                    (opts.progress)("starting the server in bubblewrap namespaces");
                    prov.prepare_s = Some(t0.elapsed().as_secs_f64());
                    run_stdio(cmd, opts, &mut prov, t0)
                }
                Sandbox::Microvm => {
                    let image = image::find_cached().ok_or_else(|| {
                        RunnerError::NoVm("no guest image: run `mcplint runner setup` first".into())
                    })?;
                    let mut argv = prepared.argv(APP_DIR, "/usr/bin/node", "/usr/bin/python3");
                    if matches!(prepared.runtime, source::Runtime::Node) {
                        let flags = vm::node_flags();
                        argv.splice(1..1, flags.iter().map(|f| (*f).to_owned()));
                        if !flags.is_empty() {
                            prov.tunings.push("node-preserve-symlinks".into());
                        }
                    }
                    let (backend, notes) = firecracker::choose(&image, opts.backend, opts.accel)?;
                    prov.notes.extend(notes);
                    argv.extend(opts.server_args.iter().cloned());
                    write_guest_launcher(&prepared, &argv, &opts.env)?;
                    prov.backend = backend.name().into();
                    prov.accelerator = Some(backend.accel().name().into());
                    if matches!(backend, firecracker::Backend::Qemu(_)) {
                        prov.tunings.extend(vm::tunings());
                    }
                    prov.image_hash = Some(image.id());
                    prov.argv = argv;
                    match backend {
                        firecracker::Backend::Qemu(accel) => run_qemu(
                            &image,
                            &prepared.dir,
                            &work.path,
                            &hosts,
                            accel,
                            opts,
                            &mut prov,
                            t0,
                        ),
                        firecracker::Backend::Firecracker => {
                            if !hosts.is_empty() {
                                // The egress proxy is wired into QEMU's user network
                                // only; Firecracker would need a tap device.
                                return Err(RunnerError::Usage(
                                    "--allow-host works with the QEMU backend only (use --backend qemu)"
                                        .into(),
                                ));
                            }
                            let disk = work.path.join("app.ext4");
                            image::make_ext4(&prepared.dir, &disk, "app")?;
                            (opts.progress)("booting a Firecracker microVM (kvm)");
                            prov.prepare_s = Some(t0.elapsed().as_secs_f64());
                            run_firecracker(&image, &disk, &work.path, opts, &mut prov, t0)
                        }
                    }
                }
            };
            drop(work);
            result?
        }
    };
    Ok(capture::build(&manifest, &prov))
}

/// Whether a QEMU run failed before its server started (so nothing of the
/// package ran): the snapshot it restored is then suspect.
fn unstarted(r: &Result<Manifest, RunnerError>, prov: &capture::Provenance) -> bool {
    matches!(r, Err(RunnerError::Vm { .. } | RunnerError::Session { .. })) && prov.boot_s.is_none()
}

/// `opts` with what is left of its wall-clock limit after `since`.
fn remaining(opts: &FetchOptions, since: Instant) -> FetchOptions {
    let mut rest = opts.clone();
    rest.timeout = opts.timeout.saturating_sub(since.elapsed());
    rest
}

/// Runs the package in `tree` under QEMU, fastest first: a restore of the
/// package's warm snapshot ([`warm`]); else a restore of the boot snapshot
/// ([`snapshot`]), saving the warm one on the way; else a cold boot. A
/// snapshot that fails to restore before the server starts is removed and
/// the next way is tried within what is left of the time limit. With
/// allowed hosts the machine has a network device, which no snapshot has:
/// cold boot.
#[allow(clippy::too_many_arguments)]
fn run_qemu(
    image: &image::Image,
    tree: &std::path::Path,
    work: &std::path::Path,
    hosts: &[String],
    accel: vm::Accel,
    opts: &FetchOptions,
    prov: &mut capture::Provenance,
    t0: Instant,
) -> Result<Manifest, RunnerError> {
    let started = Instant::now();
    let cold_disk = work.join("app.ext4");
    if !hosts.is_empty() {
        image::make_ext4(tree, &cold_disk, "app")?;
        let dir = work.join("egress");
        let proxy = egress::Egress::start(hosts, &dir)
            .map_err(|e| RunnerError::io("starting the egress proxy", e))?;
        let relay = std::env::current_exe()
            .map_err(|e| RunnerError::io("finding the relay (this program)", e))?;
        let spec = vm::EgressSpec {
            hosts: hosts.to_vec(),
            socket_dir: dir,
            relay,
        };
        (opts.progress)(&format!(
            "booting a microVM cold ({}) with a network to {} only",
            accel.name(),
            hosts.join(", ")
        ));
        prov.prepare_s = Some(t0.elapsed().as_secs_f64());
        let boot = || {
            vm::command_boot(
                image,
                Some(&cold_disk),
                &opts.vm,
                accel,
                Some(&spec),
                vm::Boot::Cold,
            )
        };
        let r = boot_cold(boot, opts, started, prov, t0);
        prov.egress = Some(proxy.finish());
        return r.map_err(|e| with_egress_log(e, prov.egress.as_ref()));
    }
    let snapshots = snapshot::enabled() && {
        let current = image.is_current_recipe();
        if !current {
            prov.notes.push(
                "the guest image predates the boot snapshot: cold boot (run `mcplint runner setup`)"
                    .into(),
            );
        }
        current
    };
    // 1. The package's warm snapshot.
    // The boot snapshot's key, which the warm snapshot's key builds on.
    let boot_key = snapshots.then(|| snapshot::key(image, &opts.vm, accel));
    let mut warm_key = None;
    if let (Some(boot), true) = (&boot_key, warm::enabled()) {
        match boot.clone().and_then(|b| warm::key(&b, tree)) {
            Ok(key) => {
                if let Some(dir) = warm::find(&key) {
                    let run = work.join("vmrun");
                    std::fs::create_dir_all(&run)
                        .map_err(|e| RunnerError::io("creating the VM's run folder", e))?;
                    let cmd = vm::command_boot(
                        image,
                        Some(&dir.join(warm::DISK)),
                        &opts.vm,
                        accel,
                        None,
                        vm::Boot::Restore(&dir, &run),
                    )?;
                    let saved = warm::saved_at(&dir);
                    (opts.progress)(&format!(
                        "restoring this package's warm snapshot (saved {saved}; {})",
                        accel.name()
                    ));
                    prov.prepare_s = Some(t0.elapsed().as_secs_f64());
                    let r = run_stdio_after(cmd, None, Warmup::Resume(&run), opts, prov, t0);
                    if !unstarted(&r, prov) {
                        prov.tunings.push("warm-snapshot".into());
                        prov.notes.push(format!(
                            "restored this package's warm snapshot, saved {saved}: its server started then, from the same files, arguments and environment, and had received nothing"
                        ));
                        return r;
                    }
                    let _ = std::fs::remove_dir_all(&dir);
                    prov.notes.push(format!(
                        "the warm snapshot did not start ({}): removed",
                        first_line(&r)
                    ));
                }
                warm_key = Some(key);
            }
            Err(e) => prov.notes.push(format!("no warm snapshot ({e})")),
        }
    }
    // 2. The boot snapshot, saving the warm one on the way.
    let mut making = match &warm_key {
        Some(_) => match warm::Making::new() {
            Ok(m) => Some(m),
            Err(e) => {
                prov.notes.push(format!("no warm snapshot ({e})"));
                None
            }
        },
        None => None,
    };
    let disk = making
        .as_ref()
        .map_or(cold_disk.clone(), |m| m.path().join(warm::DISK));
    let sized = snapshots && image::make_ext4_sized(tree, &disk, "app", snapshot::APP_DISK_BYTES)?;
    if snapshots && !sized {
        prov.notes
            .push("the package does not fit the boot snapshot's disk slot: cold boot".into());
    }
    if let (Some(boot), true) = (&boot_key, sized) {
        match boot
            .clone()
            .and_then(|key| snapshot::ensure(&key, image, &opts.vm, accel, opts.progress))
        {
            Ok((dir, made)) => {
                if made {
                    prov.notes.push(format!(
                        "made the boot snapshot (once per image and machine): {}",
                        dir.display()
                    ));
                }
                let run = match &making {
                    Some(m) => m.path().to_path_buf(),
                    None => work.join("vmrun"),
                };
                std::fs::create_dir_all(&run)
                    .map_err(|e| RunnerError::io("creating the VM's run folder", e))?;
                let go = snapshot::go_line(making.is_some()).map_err(RunnerError::NoVm)?;
                let cmd = vm::command_boot(
                    image,
                    Some(&disk),
                    &opts.vm,
                    accel,
                    None,
                    vm::Boot::Restore(&dir, &run),
                )?;
                let saving = making.is_some();
                (opts.progress)(&format!(
                    "starting the server in a microVM restored from the boot snapshot ({}{}){}",
                    accel.name(),
                    if saving && accel == vm::Accel::Tcg {
                        ": emulated, a first start takes a while"
                    } else {
                        ""
                    },
                    if saving {
                        "; its warm snapshot is saved once it settles"
                    } else {
                        ""
                    }
                ));
                prov.prepare_s = Some(t0.elapsed().as_secs_f64());
                let warmup = match &making {
                    Some(_) => Warmup::Save(&run),
                    None => Warmup::None,
                };
                let r =
                    run_stdio_after(cmd, Some(&go), warmup, &remaining(opts, started), prov, t0);
                if let (Ok(_), Some(key)) = (&r, &warm_key) {
                    if let Some(m) = making.take().filter(warm::Making::saved) {
                        match m.install(key) {
                            Ok(at) => prov.notes.push(format!(
                                "saved this server's warm snapshot for later fetches of the same package: {}",
                                at.display()
                            )),
                            Err(e) => prov.notes.push(format!("the warm snapshot was not kept: {e}")),
                        }
                    }
                }
                if !unstarted(&r, prov) {
                    prov.tunings.push("boot-snapshot".into());
                    return r;
                }
                // A damaged or unloadable state would fail every fetch: drop
                // it (the next fetch makes it anew) and boot cold.
                let _ = std::fs::remove_dir_all(&dir);
                prov.notes.push(format!(
                    "the boot snapshot did not start ({}): removed; booted cold instead",
                    first_line(&r)
                ));
            }
            Err(e) => prov
                .notes
                .push(format!("no boot snapshot ({e}): cold boot")),
        }
    }
    // 3. A cold boot.
    let disk = if sized && disk.exists() {
        disk
    } else {
        image::make_ext4(tree, &cold_disk, "app")?;
        cold_disk
    };
    (opts.progress)(&format!("booting a microVM cold ({})", accel.name()));
    if prov.prepare_s.is_none() {
        prov.prepare_s = Some(t0.elapsed().as_secs_f64());
    }
    let boot = || vm::command_boot(image, Some(&disk), &opts.vm, accel, None, vm::Boot::Cold);
    boot_cold(boot, opts, started, prov, t0)
}

/// How many cold boots a fetch tries when the guest kernel dies before its
/// init runs.
const COLD_BOOTS: u32 = 3;

/// Boots the machine `command` makes, again (at most [`COLD_BOOTS`] in all,
/// within what is left of the time limit) while its guest kernel dies
/// before its init runs. Such a death is the host's or the emulator's
/// fault, not the server's: nothing of the package has run, so booting
/// again repeats nothing the server did.
fn boot_cold(
    command: impl Fn() -> Result<Command, RunnerError>,
    opts: &FetchOptions,
    started: Instant,
    prov: &mut capture::Provenance,
    t0: Instant,
) -> Result<Manifest, RunnerError> {
    let mut boots = 0;
    loop {
        boots += 1;
        let r = run_stdio_after(
            command()?,
            None,
            Warmup::None,
            &remaining(opts, started),
            prov,
            t0,
        );
        if !died_in_boot(&r, &prov.stderr_tail) {
            return r;
        }
        if boots == COLD_BOOTS {
            let console = if prov.stderr_tail.trim().is_empty() {
                "; it printed nothing on its console"
            } else {
                ""
            };
            return Err(RunnerError::Vm {
                msg: format!(
                    "the guest kernel died before its init ran, {COLD_BOOTS} boots in a row \
                     (too little --memory, or an emulation fault on this host){console}"
                ),
                stderr_tail: prov.stderr_tail.clone(),
            });
        }
        prov.notes.push(format!(
            "the guest kernel died before its init ran (boot {boots}): booted again"
        ));
        (opts.progress)("the guest kernel died in early boot; booting again");
    }
}

/// Whether a run failed because the guest died before its init printed
/// its first line: the session ended and the console (`tail`) has neither
/// the init's line nor a complaint from QEMU or bubblewrap themselves
/// (those would fail the same way again).
fn died_in_boot(r: &Result<Manifest, RunnerError>, tail: &str) -> bool {
    matches!(
        r,
        Err(RunnerError::Session {
            error: ClientError::Closed { .. },
            ..
        })
    ) && !tail.contains("mcplint-guest: init")
        && !tail.contains("qemu-system-x86_64:")
        && !tail.contains("bwrap:")
}

/// The first line of a run's error, for a note.
fn first_line(r: &Result<Manifest, RunnerError>) -> String {
    r.as_ref()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Checks `allow_hosts` against the target: only a microVM gets a network.
fn checked_hosts(target: &Target, opts: &FetchOptions) -> Result<Vec<String>, RunnerError> {
    if opts.allow_hosts.is_empty() {
        return Ok(Vec::new());
    }
    let why = match (target, opts.sandbox) {
        (Target::Source(Source::Remote(_)), _) => Some(
            "a remote server runs elsewhere; --allow-host is for servers mcplint starts in a microVM",
        ),
        (Target::Command(_), _) | (_, Sandbox::None) => Some(
            "--no-sandbox gives the server this host's whole network; --allow-host needs the microVM",
        ),
        (_, Sandbox::Namespaces) => Some(
            "--sandbox namespaces has no network at all; --allow-host needs the microVM (the default sandbox)",
        ),
        (_, Sandbox::Microvm) => None,
    };
    if let Some(why) = why {
        return Err(RunnerError::Usage(why.into()));
    }
    let mut hosts: Vec<String> = Vec::new();
    for h in &opts.allow_hosts {
        let h =
            egress::parse_host(h).map_err(|e| RunnerError::Usage(format!("--allow-host {e}")))?;
        if !hosts.contains(&h) {
            hosts.push(h);
        }
    }
    if hosts.len() > egress::MAX_HOSTS {
        return Err(RunnerError::Usage(format!(
            "at most {} --allow-host hosts",
            egress::MAX_HOSTS
        )));
    }
    Ok(hosts)
}

/// A failed session's error, with what the egress proxy saw appended to the
/// stderr tail (a server that fails because a host it needs was refused
/// says so there).
fn with_egress_log(e: RunnerError, log: Option<&Value>) -> RunnerError {
    let Some(attempts) = log
        .and_then(|l| l.get("attempts"))
        .and_then(Value::as_array)
    else {
        return e;
    };
    let lines: Vec<String> = attempts
        .iter()
        .rev()
        .take(5)
        .rev()
        .map(|a| {
            format!(
                "[mcplint egress] {} {}{}",
                a["host"].as_str().unwrap_or("?"),
                a["verdict"].as_str().unwrap_or("?"),
                a["reason"]
                    .as_str()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    if lines.is_empty() {
        return e;
    }
    let add = |tail: String| format!("{tail}\n{}", lines.join("\n"));
    match e {
        RunnerError::Session { error, stderr_tail } => RunnerError::Session {
            error,
            stderr_tail: add(stderr_tail),
        },
        RunnerError::WallClock { secs, stderr_tail } => RunnerError::WallClock {
            secs,
            stderr_tail: add(stderr_tail),
        },
        other => other,
    }
}

/// The environment of a server run on the host: not the user's (which may
/// hold credentials), only what is needed to find programs.
fn host_env(cmd: &mut Command, env: &[(String, String)], extra: &[(String, String)]) {
    cmd.env_clear();
    for k in ["PATH", "HOME", "LANG", "PYENV_ROOT", "PYENV_VERSION"] {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    for (k, v) in extra.iter().chain(env) {
        cmd.env(k, v);
    }
}

/// Single-quotes a string for the guest's shell.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Writes `/app/.mcplint-run.sh` (the guest's launcher) and the marker the
/// guest init looks for.
fn write_guest_launcher(
    p: &Prepared,
    argv: &[String],
    env: &[(String, String)],
) -> Result<(), RunnerError> {
    let mut s = String::from("# written by mcplint fetch\nexport PATH=/usr/bin:/bin HOME=/tmp LANG=C.UTF-8 TMPDIR=/tmp\n");
    for (k, v) in p.env(APP_DIR).iter().chain(env) {
        s.push_str(&format!("export {k}={}\n", sh_quote(v)));
    }
    s.push_str("exec");
    for a in argv {
        s.push(' ');
        s.push_str(&sh_quote(a));
    }
    s.push('\n');
    write_fresh(&p.dir.join(".mcplint-run.sh"), s.as_bytes())
        .map_err(|e| RunnerError::io("writing the launcher", e))?;
    write_fresh(&p.dir.join(".mcplint-app"), b"")
        .map_err(|e| RunnerError::io("writing the marker", e))
}

/// Writes a new file where the package tree may already hold one of that
/// name: removed first (a link is removed, never followed, so a bundle's
/// `.mcplint-run.sh -> ~/.bashrc` cannot redirect the write to the host).
fn write_fresh(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?
        .write_all(bytes)
}

/// bubblewrap around the server itself: no network, read-only runtime and
/// package, an unprivileged user, an empty home.
fn namespaces_command(
    image: &image::Image,
    p: &Prepared,
    argv: &[String],
    env: &[(String, String)],
) -> Result<Command, RunnerError> {
    let bwrap = vm::which("bwrap")
        .ok_or_else(|| RunnerError::NoVm("bubblewrap (bwrap) is not installed".into()))?;
    let mut c = vm::bwrap_with_usr(&bwrap, &image.runtime_dir());
    c.args(["--dir", "/home", "--chdir", "/tmp"])
        .arg("--ro-bind")
        .arg(&p.dir)
        .arg(APP_DIR)
        .arg("--clearenv")
        .args([
            "--setenv",
            "PATH",
            "/usr/bin:/bin",
            "--setenv",
            "HOME",
            "/tmp",
            "--setenv",
            "LANG",
            "C.UTF-8",
        ]);
    for (k, v) in p.env(APP_DIR).iter().chain(env) {
        c.arg("--setenv").arg(k).arg(v);
    }
    c.arg("--").args(argv);
    c.env_clear();
    Ok(c)
}

/// A temporary folder removed on drop and on Ctrl-C.
struct WorkDir {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl WorkDir {
    fn new() -> Result<Self, RunnerError> {
        let dir = tempfile::Builder::new()
            .prefix("mcplint-fetch-")
            .tempdir()
            .map_err(|e| RunnerError::io("creating a temporary folder", e))?;
        let path = dir.path().to_path_buf();
        process::register_dir(path.clone());
        Ok(WorkDir { path, _dir: dir })
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        process::unregister_dir(&self.path);
    }
}

/// Runs one stdio session with a wall-clock watchdog.
fn run_stdio(
    cmd: Command,
    opts: &FetchOptions,
    prov: &mut capture::Provenance,
    t0: Instant,
) -> Result<Manifest, RunnerError> {
    run_stdio_after(cmd, None, Warmup::None, opts, prov, t0)
}

/// What the host does between starting a snapshot machine and its MCP
/// session (see [`warm`]); the field is the VM's run folder.
enum Warmup<'a> {
    /// Nothing.
    None,
    /// Wait until the guest says its server has loaded (or will not
    /// settle), save the machine, resume it, and send the go line on the
    /// control port.
    Save(&'a std::path::Path),
    /// A restored warm snapshot: send the go line on the control port.
    Resume(&'a std::path::Path),
}

/// [`run_stdio`], writing `preamble` (a restored guest's go line) to the
/// child's stdin before the first MCP message, and doing `warmup` before
/// the session.
fn run_stdio_after(
    cmd: Command,
    preamble: Option<&[u8]>,
    warmup: Warmup<'_>,
    opts: &FetchOptions,
    prov: &mut capture::Provenance,
    t0: Instant,
) -> Result<Manifest, RunnerError> {
    prov.transport = Some("stdio".into());
    let program = cmd.get_program().to_string_lossy().into_owned();
    let (run, mut stdin, stdout) =
        Running::spawn(cmd).map_err(|e| RunnerError::io(&format!("starting {program}"), e))?;
    if let Some(p) = preamble {
        use std::io::Write;
        stdin
            .write_all(p)
            .map_err(|e| RunnerError::io(&format!("writing to {program}"), e))?;
    }
    let spawned = Instant::now();
    let mut run = run;
    let watchdog = Watchdog::start(run.id(), opts.timeout);
    // Held open for the session: the guest has read its line by then.
    let _ctl = match warm_up(&mut run, &warmup, prov, opts.progress) {
        Ok(c) => {
            if !matches!(warmup, Warmup::None) {
                prov.warmup_s = Some(spawned.elapsed().as_secs_f64());
            }
            c
        }
        Err(msg) => {
            let fired = watchdog.stop();
            run.finish(Duration::from_millis(200));
            prov.stderr_tail = run.stderr.text();
            return Err(if fired {
                RunnerError::WallClock {
                    secs: opts.timeout.as_secs(),
                    stderr_tail: prov.stderr_tail.clone(),
                }
            } else {
                RunnerError::Vm {
                    msg,
                    stderr_tail: prov.stderr_tail.clone(),
                }
            });
        }
    };
    session(
        run,
        watchdog,
        (Box::new(stdin), Box::new(stdout)),
        spawned,
        opts,
        prov,
        t0,
    )
}

/// Does `warmup` for the VM `run` (under its watchdog): returns the control
/// connection to keep open, or why the VM cannot go on. Saving never fails
/// the fetch: without a warm snapshot the session runs all the same.
fn warm_up(
    run: &mut Running,
    warmup: &Warmup<'_>,
    prov: &mut capture::Provenance,
    progress: fn(&str),
) -> Result<Option<std::os::unix::net::UnixStream>, String> {
    let resumed = ["mcplint-guest: resumed", "mcplint-guest: error"];
    // The guest polls for the go line for 60 s; it takes it in well under a
    // second once sent.
    let go_limit = Duration::from_secs(30);
    match warmup {
        Warmup::None => Ok(None),
        Warmup::Save(dir) => {
            // The guest says idle, busy or ended within about 60 s of the start.
            let settle = Duration::from_secs(120);
            let settled = [
                "mcplint-guest: idle",
                "mcplint-guest: busy",
                "mcplint-guest: ended",
            ];
            match run.wait_for(&settled, settle) {
                // The session that follows reports what the server did.
                Heard::Exited => return Ok(None),
                Heard::Silent => {
                    prov.notes.push(
                        "no warm snapshot: the guest never said whether its server had loaded"
                            .into(),
                    );
                    return Ok(None);
                }
                Heard::Marker(0) => {
                    progress("the server has settled: saving its warm snapshot");
                    let t = Instant::now();
                    let saved = warm::save(dir);
                    prov.warm_save_s = Some(t.elapsed().as_secs_f64());
                    if let Err(e) = saved {
                        // A failed save leaves the VM running (QEMU resumes
                        // it) unless resuming failed too, which the session
                        // then shows.
                        let _ = std::fs::remove_file(dir.join(snapshot::STATE));
                        prov.notes
                            .push(format!("no warm snapshot: saving failed ({e})"));
                    }
                }
                Heard::Marker(1) => prov.notes.push(
                    "no warm snapshot: the server never settled (still using CPU 60 s after it started)".into(),
                ),
                Heard::Marker(_) => prov.notes.push(
                    "no warm snapshot: the server ended before it settled".into(),
                ),
            }
            // Without the go line the saved state would be useless (every
            // restore sends it); the server itself runs on regardless.
            let ctl = warm::send_go(dir, Duration::from_secs(10));
            let took = ctl.is_ok() && run.wait_for(&resumed, go_limit) == Heard::Marker(0);
            if !took {
                if dir.join(snapshot::STATE).exists() {
                    prov.notes.push(
                        "no warm snapshot: the guest did not take its go line after the save"
                            .into(),
                    );
                }
                let _ = std::fs::remove_file(dir.join(snapshot::STATE));
            }
            Ok(ctl.ok())
        }
        Warmup::Resume(dir) => {
            let ctl = warm::send_go(dir, Duration::from_secs(10))?;
            match run.wait_for(&resumed, go_limit) {
                Heard::Marker(0) => Ok(Some(ctl)),
                _ => Err("the guest did not take its go line on the control port".into()),
            }
        }
    }
}

/// Boots the package under Firecracker and runs the session over the
/// guest's vsock connection (the module docs of [`firecracker`] say why).
fn run_firecracker(
    image: &image::Image,
    disk: &std::path::Path,
    work: &std::path::Path,
    opts: &FetchOptions,
    prov: &mut capture::Provenance,
    t0: Instant,
) -> Result<Manifest, RunnerError> {
    let spawned = Instant::now();
    let mut vm = firecracker::start(image, Some(disk), &opts.vm, work)?;
    let watchdog = Watchdog::start(vm.run.id(), opts.timeout);
    // The guest connects when its server is about to start (boot included),
    // so that wait gets the first answer's limit too.
    let limit = opts.client.handshake_timeout.min(opts.timeout);
    let stream = match vm.accept(limit) {
        Ok(s) => s,
        Err(e) => {
            watchdog.stop();
            prov.stderr_tail = e.tail.clone();
            return Err(e.into());
        }
    };
    let reader = stream
        .try_clone()
        .map_err(|e| RunnerError::io("the guest's vsock connection", e))?;
    session(
        vm.run,
        watchdog,
        (Box::new(firecracker::VsockWriter(stream)), Box::new(reader)),
        spawned,
        opts,
        prov,
        t0,
    )
}

/// The server's input and output.
type Stdio = (
    Box<dyn std::io::Write + Send>,
    Box<dyn std::io::Read + Send>,
);

/// One MCP session over `io` with a server (or VM) already running, under
/// its wall-clock watchdog; then the server is ended and its stderr kept.
fn session(
    mut run: Running,
    watchdog: Watchdog,
    io: Stdio,
    spawned: Instant,
    opts: &FetchOptions,
    prov: &mut capture::Provenance,
    t0: Instant,
) -> Result<Manifest, RunnerError> {
    let pipe = LinePipe::new(io.0, io.1, opts.client.max_bytes, opts.client.max_line);
    let mut client = Client::new(pipe, opts.client.clone());
    let result = client.fetch();
    prov.sandbox_cpu_s = tree_cpu_s(run.id());
    // Closing stdin asks the server (and so the guest) to end.
    drop(client.into_transport());
    let fired = watchdog.stop();
    // After a clean session, give the server (or guest) a moment to exit on
    // its own; after a failure, kill it at once.
    run.finish(if result.is_ok() {
        Duration::from_secs(2)
    } else {
        Duration::from_millis(200)
    });
    prov.stderr_tail = run.stderr.text();
    prov.wall_s = Some(t0.elapsed().as_secs_f64());
    // A restored warm snapshot started its server before it was saved:
    // its start is when it resumed.
    let start = run.stderr.seen("mcplint-guest: start");
    if let Some(at) = start.or_else(|| run.stderr.seen("mcplint-guest: resumed")) {
        prov.boot_s = Some(at.duration_since(spawned).as_secs_f64());
    }
    match result {
        Ok(m) => Ok(m),
        Err(_) if fired => Err(RunnerError::WallClock {
            secs: opts.timeout.as_secs(),
            stderr_tail: prov.stderr_tail.clone(),
        }),
        Err(error) => Err(RunnerError::Session {
            error,
            stderr_tail: prov.stderr_tail.clone(),
        }),
    }
}

/// User + system CPU seconds used so far by `root` and all its descendants
/// (bubblewrap, QEMU and QEMU's threads), from `/proc`. Read at the end of the
/// session, while they still run: a reaped QEMU inside bubblewrap's PID
/// namespace is not reliably accounted to us, and the grace period may end
/// in a kill.
fn tree_cpu_s(root: u32) -> Option<f64> {
    let mut parent = Vec::new();
    let mut ticks = std::collections::HashMap::new();
    for e in std::fs::read_dir("/proc").ok()?.filter_map(Result::ok) {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // Fields after the command name (which may hold spaces and parens).
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
        // rest[1] = ppid, rest[11] = utime, rest[12] = stime (proc(5) fields 4, 14, 15).
        if let (Some(ppid), Some(u), Some(s)) = (num(1), num(11), num(12)) {
            parent.push((pid, ppid as u32));
            ticks.insert(pid, u + s);
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(parent.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    let total: u64 = tree.iter().filter_map(|p| ticks.get(p)).sum();
    // /proc reports in USER_HZ, which is 100 on every Linux ABI mcplint runs on.
    ticks.contains_key(&root).then(|| total as f64 / 100.0)
}

/// Kills a process group when its time is up.
struct Watchdog {
    stop: std::sync::mpsc::Sender<()>,
    handle: std::thread::JoinHandle<bool>,
}

impl Watchdog {
    fn start(pid: u32, limit: Duration) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::spawn(move || match rx.recv_timeout(limit) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Ok(raw) = i32::try_from(pid) {
                    let p = nix::unistd::Pid::from_raw(raw);
                    let _ = nix::sys::signal::killpg(p, nix::sys::signal::Signal::SIGKILL);
                    let _ = nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGKILL);
                }
                true
            }
            _ => false,
        });
        Watchdog { stop: tx, handle }
    }

    fn stop(self) -> bool {
        let _ = self.stop.send(());
        self.handle.join().unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_guest_that_never_reached_its_init_counts_as_dead_in_boot() {
        let closed = || -> Result<Manifest, RunnerError> {
            Err(RunnerError::Session {
                error: ClientError::Closed {
                    method: "initialize".into(),
                },
                stderr_tail: String::new(),
            })
        };
        // Nothing on the console, or a kernel oops: booted again.
        assert!(died_in_boot(&closed(), ""));
        assert!(died_in_boot(&closed(), "[ 0.15] divide error: 0000 [#1]\n"));
        // The init ran: the package's own failure, not the boot's.
        assert!(!died_in_boot(
            &closed(),
            "mcplint-guest: init\nmcplint-guest: error: no package disk\n"
        ));
        // QEMU or bubblewrap refused: the same again on every boot.
        assert!(!died_in_boot(
            &closed(),
            "qemu-system-x86_64: -m 1: too small\n"
        ));
        assert!(!died_in_boot(&closed(), "bwrap: execvp: No such file\n"));
        // Any other failure is not a boot's.
        let timeout: Result<Manifest, RunnerError> = Err(RunnerError::WallClock {
            secs: 1,
            stderr_tail: String::new(),
        });
        assert!(!died_in_boot(&timeout, ""));
    }

    #[test]
    fn a_failed_session_shows_what_the_proxy_refused() {
        let log = serde_json::json!({"attempts": [
            {"host": "api.example.com", "verdict": "refused", "reason": "resolves to 10.0.0.1: private (10.0.0.0/8)"}
        ]});
        let e = RunnerError::Session {
            error: ClientError::Closed {
                method: "tools/list".into(),
            },
            stderr_tail: "Error: fetch failed".into(),
        };
        let text = with_egress_log(e, Some(&log)).to_string();
        assert!(
            text.contains("[mcplint egress] api.example.com refused: resolves to 10.0.0.1"),
            "{text}"
        );
        // Without a log, the error is unchanged.
        let e = RunnerError::Usage("x".into());
        assert_eq!(with_egress_log(e, None).to_string(), "x");
    }

    #[test]
    fn the_launcher_is_never_written_through_a_link() {
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").expect("write");
        let link = dir.path().join(".mcplint-run.sh");
        std::os::unix::fs::symlink(&victim, &link).expect("link");
        super::write_fresh(&link, b"launcher").expect("writes");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "keep");
        assert_eq!(std::fs::read_to_string(&link).expect("read"), "launcher");
        assert!(!std::fs::symlink_metadata(&link)
            .expect("meta")
            .file_type()
            .is_symlink());
    }

    use std::os::unix::process::CommandExt;

    #[test]
    fn cpu_of_a_process_tree_counts_its_descendants() {
        assert!(tree_cpu_s(u32::MAX).is_none());
        // The outer shell only waits; the CPU is burnt by its child, which
        // must be counted in the outer one's tree.
        let mut c = Command::new("sh")
            .args(["-c", "sh -c 'while :; do :; done' & wait"])
            .process_group(0)
            .spawn()
            .expect("sh");
        let start = Instant::now();
        let mut seen = 0.0;
        while start.elapsed() < Duration::from_secs(30) && seen < 0.05 {
            std::thread::sleep(Duration::from_millis(100));
            seen = tree_cpu_s(c.id()).unwrap_or(0.0);
        }
        let pg = nix::unistd::Pid::from_raw(c.id() as i32);
        let _ = nix::sys::signal::killpg(pg, nix::sys::signal::Signal::SIGKILL);
        let _ = c.wait();
        assert!(seen >= 0.05, "{seen}");
    }
}

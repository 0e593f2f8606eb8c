//! `mcplint runner setup` / `status` / `clean`: the guest image and the
//! snapshots fetches restore.

use crate::runner::{image, snapshot, vm, warm, RunnerError};

/// Arguments of `mcplint runner`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// `runner` sub-commands.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Build (or find) the guest image from Debian and PyPI packages, cached
    /// under $XDG_CACHE_HOME/mcplint (needs the tools that
    /// scripts/install-runner-deps.sh installs).
    Setup {
        /// Rebuild even if an image with the same inputs exists.
        #[arg(long)]
        force: bool,
        /// Also decide now whether KVM works (boots a probe guest once, and
        /// once more under Firecracker if a `firecracker` binary is on PATH).
        #[arg(long)]
        probe_kvm: bool,
    },
    /// Show the cached image, the accelerator verdict and the snapshots.
    Status,
    /// Remove the boot snapshot and every package's warm snapshot (the next
    /// fetch makes the boot snapshot again).
    Clean,
    /// Internal: the per-connection relay QEMU starts for `fetch
    /// --allow-host` (stdin/stdout = one guest connection; SOCKET = the
    /// fetch's egress proxy).
    #[command(hide = true)]
    EgressRelay {
        /// The proxy's unix socket.
        socket: std::path::PathBuf,
        /// The allowed host this guest address stands for.
        host: String,
    },
}

/// Runs the command.
pub fn run(args: &Args) -> Result<i32, RunnerError> {
    match &args.action {
        Action::Setup { force, probe_kvm } => {
            let img = image::setup(*force, &mut |line| eprintln!("mcplint: {line}"))?;
            println!("image {} (kernel {})", img.id(), img.kernel);
            println!("folder {}", img.dir.display());
            vm::qemu_binary()?;
            if *probe_kvm {
                let (accel, why) = vm::choose_accel(&img, vm::AccelChoice::Auto)?;
                println!(
                    "accelerator {}{}",
                    accel.name(),
                    why.map(|w| format!(" ({w})")).unwrap_or_default()
                );
                let (backend, notes) = crate::runner::firecracker::choose(
                    &img,
                    crate::runner::firecracker::BackendChoice::Auto,
                    vm::AccelChoice::Auto,
                )?;
                println!("backend {}", backend.name());
                for n in notes {
                    println!("  {n}");
                }
            }
            Ok(super::EXIT_OK)
        }
        Action::Clean => {
            let root = snapshot::root();
            match std::fs::remove_dir_all(&root) {
                Ok(()) => println!("removed {}", root.display()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    println!("no snapshots in {}", root.display())
                }
                Err(e) => return Err(RunnerError::io(&format!("removing {}", root.display()), e)),
            }
            Ok(super::EXIT_OK)
        }
        Action::EgressRelay { socket, host } => Ok(crate::runner::egress::relay(socket, host)),
        Action::Status => match image::find_cached() {
            Some(img) => {
                println!("image {} (kernel {})", img.id(), img.kernel);
                println!("folder {}", img.dir.display());
                match vm::qemu_binary() {
                    Ok(q) => println!("qemu {}", q.display()),
                    Err(e) => println!("qemu missing: {e}"),
                }
                match crate::runner::firecracker::binary() {
                    Some(f) => println!(
                        "firecracker {} (used by --backend auto only when it boots a probe guest under KVM)",
                        f.display()
                    ),
                    None => println!("firecracker not on PATH (the backend is QEMU)"),
                }
                let root = snapshot::root();
                let boot: Vec<_> = std::fs::read_dir(&root)
                    .map(|rd| {
                        rd.filter_map(Result::ok)
                            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                            .map(|e| e.path())
                            .collect()
                    })
                    .unwrap_or_default();
                for b in &boot {
                    let mib = warm::disk_bytes(&b.join(snapshot::STATE)) >> 20;
                    println!("boot snapshot {} ({mib} MiB)", b.display());
                }
                if boot.is_empty() {
                    println!("no boot snapshot yet (the next fetch makes it)");
                }
                let kept = warm::list();
                let mib: u64 = kept.iter().map(|w| w.1).sum::<u64>() >> 20;
                println!("{} warm snapshots ({mib} MiB)", kept.len());
                for (dir, bytes, at) in kept {
                    println!("  {} saved {at} ({} MiB)", dir.display(), bytes >> 20);
                }
                Ok(super::EXIT_OK)
            }
            None => {
                eprintln!("mcplint: no guest image yet: run `mcplint runner setup`");
                Ok(super::EXIT_ERROR)
            }
        },
    }
}

//! `mcplint runner setup` / `mcplint runner status`: the guest image.

use crate::runner::{image, vm, RunnerError};

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
    /// Show the cached image and the accelerator verdict.
    Status,
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
                Ok(super::EXIT_OK)
            }
            None => {
                eprintln!("mcplint: no guest image yet: run `mcplint runner setup`");
                Ok(super::EXIT_ERROR)
            }
        },
    }
}

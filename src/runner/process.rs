//! Spawning a server (or QEMU, or bubblewrap) with its stdio as the MCP pipe,
//! keeping the tail of its stderr, and making sure it dies.
//!
//! Every child is registered in a process-wide list so the Ctrl-C handler
//! can kill it and remove the session's temporary files; the [`Running`]
//! guard kills it on drop, so errors and panics clean up too.

use std::collections::VecDeque;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

/// How much of the server's stderr is kept (the tail).
pub const STDERR_TAIL: usize = 64 * 1024;

/// Children and folders to clean up if the user presses Ctrl-C.
#[derive(Default)]
struct Registry {
    pids: Vec<u32>,
    dirs: Vec<PathBuf>,
}

fn registry() -> &'static Mutex<Registry> {
    static R: OnceLock<Mutex<Registry>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(Registry::default()))
}

/// Set by the interrupt handler as it begins.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether an interrupt is being handled. The handler kills the children,
/// so the main thread may meanwhile see its session fail and head for the
/// exit: it should leave that to the handler (which removes the files and
/// exits 130) rather than report the broken session as the error.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Installs the Ctrl-C handler once (SIGINT, and SIGTERM and SIGHUP: a
/// cancelled CI job, a closed terminal): kills every registered child (and
/// its process group), removes registered folders, exits 130.
pub fn install_interrupt_handler() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let _ = ctrlc::set_handler(|| {
            INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
            if let Ok(r) = registry().lock() {
                for &pid in &r.pids {
                    kill_tree(pid);
                }
                for d in &r.dirs {
                    // The main thread may be removing the same folder (its
                    // session just failed: the child is dead): a removal
                    // that met the other's half-done work fails; try again.
                    for _ in 0..20 {
                        if std::fs::remove_dir_all(d).is_ok() || !d.exists() {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
            }
            eprintln!(
                "mcplint: interrupted; what it started was killed and its temporary files removed"
            );
            std::process::exit(130);
        });
    });
}

/// Registers a folder to remove on Ctrl-C (it is removed normally by its
/// owner's drop).
pub fn register_dir(p: PathBuf) {
    if let Ok(mut r) = registry().lock() {
        r.dirs.push(p);
    }
}

/// Forgets a folder registered with [`register_dir`].
pub fn unregister_dir(p: &std::path::Path) {
    if let Ok(mut r) = registry().lock() {
        r.dirs.retain(|d| d != p);
    }
}

/// Runs a host tool of the fetch (npm, pip, compileall, mkfs.ext4) to its
/// end like [`Command::output`], in a process group of its own registered
/// with the interrupt handler: a fetch cancelled while it runs (SIGTERM
/// reaches mcplint alone) kills it too, rather than leaving it writing into
/// the folder the handler removes.
pub fn output(cmd: &mut Command) -> std::io::Result<std::process::Output> {
    use std::os::unix::process::CommandExt;
    install_interrupt_handler();
    cmd.process_group(0);
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let id = child.id();
    register_pid(id);
    let out = child.wait_with_output();
    unregister_pid(id);
    out
}

/// Registers a child (a process group leader) for the interrupt handler to
/// kill.
fn register_pid(id: u32) {
    if let Ok(mut r) = registry().lock() {
        r.pids.push(id);
    }
}

/// Forgets a child registered with [`register_pid`].
fn unregister_pid(id: u32) {
    if let Ok(mut r) = registry().lock() {
        r.pids.retain(|&p| p != id);
    }
}

fn kill_tree(pid: u32) {
    let Ok(raw) = i32::try_from(pid) else { return };
    // Children are started in their own process group: kill all of it.
    let _ = killpg(Pid::from_raw(raw), Signal::SIGKILL);
    let _ = kill(Pid::from_raw(raw), Signal::SIGKILL);
}

/// The last bytes of a stream, kept while the rest is drained and dropped.
#[derive(Clone, Default)]
pub struct Tail(Arc<Mutex<TailInner>>);

#[derive(Default)]
struct TailInner {
    buf: VecDeque<u8>,
    total: u64,
    marks: Vec<(&'static str, Instant)>,
}

/// What came of [`Running::wait_for`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// The marker at this index in the list waited for.
    Marker(usize),
    /// The child exited first.
    Exited,
    /// Nothing within the limit.
    Silent,
}

/// Lines the guest init prints, whose arrival times are kept. (The server's
/// stderr shares the console, so a server can print them too: nothing here
/// trusts them beyond timing its own fetch.)
pub const MARKERS: &[&str] = &[
    "mcplint-guest: init",
    "mcplint-guest: start",
    "mcplint-guest: ready",
    "mcplint-guest: idle",
    "mcplint-guest: busy",
    "mcplint-guest: ended",
    "mcplint-guest: resumed",
    "mcplint-guest: error",
];

impl Tail {
    /// The kept bytes, lossily decoded.
    pub fn text(&self) -> String {
        let Ok(t) = self.0.lock() else {
            return String::new();
        };
        let (a, b) = t.buf.as_slices();
        let mut v = a.to_vec();
        v.extend_from_slice(b);
        String::from_utf8_lossy(&v).into_owned()
    }

    /// When `marker` (one of [`MARKERS`]) first appeared.
    pub fn seen(&self, marker: &str) -> Option<Instant> {
        let t = self.0.lock().ok()?;
        t.marks
            .iter()
            .find(|(m, _)| *m == marker)
            .map(|(_, at)| *at)
    }

    /// How many bytes went by in all.
    pub fn total(&self) -> u64 {
        self.0.lock().map(|t| t.total).unwrap_or(0)
    }

    fn drain(self, mut r: impl Read) {
        let mut buf = [0u8; 8192];
        loop {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if let Ok(mut t) = self.0.lock() {
                        t.total += n as u64;
                        t.buf.extend(&buf[..n]);
                        if t.marks.len() < MARKERS.len() && t.total < 4 * 1024 * 1024 {
                            // Look in the chunk plus what precedes it, so a
                            // marker split across reads is still found.
                            let from = t.buf.len().saturating_sub(n + 64);
                            let window: Vec<u8> = t.buf.range(from..).copied().collect();
                            let now = Instant::now();
                            for m in MARKERS {
                                if !t.marks.iter().any(|(x, _)| x == m)
                                    && window.windows(m.len()).any(|w| w == m.as_bytes())
                                {
                                    t.marks.push((m, now));
                                }
                            }
                        }
                        let over = t.buf.len().saturating_sub(STDERR_TAIL);
                        t.buf.drain(..over);
                    }
                }
            }
        }
    }
}

/// A running child whose stdio is the MCP pipe. Killed on drop.
pub struct Running {
    child: Child,
    /// The tail of its stderr.
    pub stderr: Tail,
    /// When it was spawned.
    pub started: Instant,
    stderr_thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Spawns `cmd` with piped stdio in a new process group.
    pub fn spawn(mut cmd: Command) -> std::io::Result<(Running, ChildStdin, ChildStdout)> {
        use std::os::unix::process::CommandExt;
        install_interrupt_handler();
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd.process_group(0);
        let started = Instant::now();
        let mut child = cmd.spawn()?;
        register_pid(child.id());
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no stdin pipe"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout pipe"))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| std::io::Error::other("no stderr pipe"))?;
        let tail = Tail::default();
        let t2 = tail.clone();
        let handle = std::thread::Builder::new()
            .name("server-stderr".into())
            .spawn(move || t2.drain(stderr))
            .ok();
        Ok((
            Running {
                child,
                stderr: tail,
                started,
                stderr_thread: handle,
            },
            stdin,
            stdout,
        ))
    }

    /// Spawns `cmd` in a new process group with no stdin and its stdout and
    /// stderr both on one pipe, kept as the tail (for a VMM whose stdout is
    /// the guest's serial console and whose stderr is its own log, when the
    /// MCP channel is elsewhere).
    pub fn spawn_console(mut cmd: Command) -> std::io::Result<Running> {
        use std::os::unix::process::CommandExt;
        install_interrupt_handler();
        // A socket pair rather than a pipe: std creates it close-on-exec, so
        // no other child inherits an end of it (std's own pipe() needs a
        // newer Rust than this crate's minimum).
        let (reader, writer) = std::os::unix::net::UnixStream::pair()?;
        let writer = std::os::fd::OwnedFd::from(writer);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(writer.try_clone()?))
            .stderr(Stdio::from(writer));
        cmd.process_group(0);
        let started = Instant::now();
        let child = cmd.spawn();
        // Our copies of the write end must go, or the reader never sees EOF.
        drop(cmd);
        let child = child?;
        register_pid(child.id());
        let tail = Tail::default();
        let t2 = tail.clone();
        let handle = std::thread::Builder::new()
            .name("vmm-console".into())
            .spawn(move || t2.drain(reader))
            .ok();
        Ok(Running {
            child,
            stderr: tail,
            started,
            stderr_thread: handle,
        })
    }

    /// The exit status if the child has exited (without waiting).
    pub fn finish_if_exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits until one of `markers` (each one of [`MARKERS`]) has appeared
    /// on stderr, the child has exited, or `limit` has passed.
    pub fn wait_for(&mut self, markers: &[&str], limit: Duration) -> Heard {
        let start = Instant::now();
        loop {
            if let Some(i) = markers.iter().position(|m| self.stderr.seen(m).is_some()) {
                return Heard::Marker(i);
            }
            if self.finish_if_exited().is_some() {
                return Heard::Exited;
            }
            if start.elapsed() > limit {
                return Heard::Silent;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The child's pid.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `grace` for a clean exit (after stdin was closed), then
    /// kills the whole process group. Returns the exit status if it exited.
    pub fn finish(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + grace;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => break None,
            }
        };
        self.kill();
        // Give the stderr thread a moment to take the last bytes.
        if let Some(h) = self.stderr_thread.take() {
            let until = Instant::now() + Duration::from_millis(500);
            while !h.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
        status
    }

    fn kill(&mut self) {
        kill_tree(self.child.id());
        let _ = self.child.wait();
        unregister_pid(self.child.id());
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

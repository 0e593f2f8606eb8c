//! `--build-in-guest`: a PyPI package published only as an sdist, built
//! inside the sandbox instead of on the host.
//!
//! An sdist runs its build code (setup.py, a build backend) to become
//! installable, and `pip download` of an sdist already runs it to learn its
//! metadata; so the host never hands an sdist to pip. It downloads the
//! `.tar.gz` from PyPI's JSON API (checked against the registry's sha256)
//! and reads its static metadata from the archive (`PKG-INFO`,
//! `pyproject.toml`, `*.egg-info/requires.txt`) without running anything.
//! Then, with wheels only (no code runs): the sdist's dependencies are
//! installed into `site` as for any PyPI package, and pip with the build
//! requirements into `buildenv` (both compiled to bytecode on the host). In
//! the guest (no network), a small launcher runs that pip, offline
//! (`--no-index --no-build-isolation`, `buildenv` on the path), to build and
//! install the sdist into the guest's scratch `/tmp` (a tmpfs), then starts
//! the console script.
//!
//! Only the requested package may be an sdist: a dependency without a wheel
//! is refused with its name.

use std::path::Path;
use std::process::Command;

use super::source::{
    file_sha256, guest_wheels, host_python, python_env, run_tool, Prepared, Runtime,
};
use super::RunnerError;

/// The pip run inside the guest (a wheel runs straight from its zip).
const GUEST_PIP: &str = "pip==24.3.1";

/// The build requirements pip assumes for an sdist without `pyproject.toml`.
const LEGACY_BUILD_REQUIRES: [&str; 2] = ["setuptools>=40.8.0", "wheel"];

/// Downloads the sdist of `name` (version `version`, or the latest) from
/// PyPI and lays it out for a build in the guest.
pub fn from_pypi(
    name: &str,
    version: Option<&str>,
    work: &Path,
    script: Option<&str>,
) -> Result<Prepared, RunnerError> {
    let dl = work.join(".download");
    std::fs::create_dir_all(&dl).map_err(|e| RunnerError::io("creating a folder", e))?;
    let out = run_tool(
        Command::new(host_python())
            .arg("-c")
            .arg(DOWNLOAD_SDIST)
            .arg(name)
            .arg(version.unwrap_or(""))
            .arg(&dl),
        "downloading the sdist from PyPI",
    )?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let (Some(file), Some(sha)) = (lines.next(), lines.next()) else {
        return Err(RunnerError::Prepare(format!(
            "{name}: the sdist download said nothing"
        )));
    };
    let sdist = dl.join(file.trim());
    let prepared = layout(&sdist, Some(format!("sha256:{}", sha.trim())), work, script)?;
    let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '.'], "_");
    if norm(&prepared.name) != norm(name) {
        return Err(RunnerError::Prepare(format!(
            "the sdist of {name} says it is {}",
            crate::display::visible_short(&prepared.name, 80)
        )));
    }
    let _ = std::fs::remove_dir_all(&dl);
    Ok(prepared)
}

/// True if `path` is a Python sdist (a `.tar.gz` with `NAME-VER/PKG-INFO`),
/// not an npm tarball (`package/package.json`).
pub fn is_python_sdist(path: &Path) -> bool {
    listing(path).is_ok_and(|l| {
        top_dir(&l).is_some_and(|top| l.iter().any(|e| e == &format!("{top}/PKG-INFO")))
    })
}

/// A local sdist (`file:NAME-VER.tar.gz`) laid out for a build in the guest.
pub fn from_file(path: &Path, work: &Path) -> Result<Prepared, RunnerError> {
    let integrity = file_sha256(path).map_err(|e| RunnerError::io("hashing the sdist", e))?;
    layout(path, Some(integrity), work, None)
}

fn listing(path: &Path) -> Result<Vec<String>, RunnerError> {
    let out = run_tool(
        Command::new("tar").arg("-tzf").arg(path),
        "listing the sdist",
    )?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim_start_matches("./").to_owned())
        .collect())
}

fn top_dir(listing: &[String]) -> Option<String> {
    let first = listing.first()?.split('/').next()?.to_owned();
    (!first.is_empty() && listing.iter().all(|l| l.split('/').next() == Some(&first)))
        .then_some(first)
}

/// One member of the archive, as text (at most 1 MiB).
fn member(path: &Path, name: &str) -> Result<String, RunnerError> {
    let out = run_tool(
        Command::new("tar").arg("-xOzf").arg(path).arg(name),
        "reading the sdist",
    )?;
    if out.stdout.len() > 1 << 20 {
        return Err(RunnerError::Prepare(format!("{name} is larger than 1 MiB")));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What the sdist says about itself, read without running it.
#[derive(Debug, PartialEq, Eq)]
struct Meta {
    name: String,
    version: String,
    /// Runtime requirements (no extras).
    requires: Vec<String>,
    /// True when the metadata does not pin down the requirements (old
    /// metadata without them, or `Dynamic: Requires-Dist`).
    requires_unknown: bool,
}

/// Reads `PKG-INFO` (RFC 822 headers up to the first blank line).
fn parse_pkg_info(text: &str) -> Meta {
    let mut m = Meta {
        name: String::new(),
        version: String::new(),
        requires: Vec::new(),
        requires_unknown: false,
    };
    let mut metadata_version = String::new();
    let mut dynamic_requires = false;
    for line in text.lines() {
        if line.is_empty() {
            break;
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k.to_ascii_lowercase().as_str() {
            "metadata-version" => metadata_version = v.to_owned(),
            "name" => m.name = v.to_owned(),
            "version" => m.version = v.to_owned(),
            "requires-dist" => {
                let marker = v.split_once(';').map(|(_, mk)| mk).unwrap_or("");
                if !marker.contains("extra") {
                    m.requires.push(v.to_owned());
                }
            }
            "dynamic" if v.eq_ignore_ascii_case("requires-dist") => dynamic_requires = true,
            _ => {}
        }
    }
    // Before metadata 2.2 an sdist's PKG-INFO need not list its requirements.
    let old = metadata_version
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0))
        .collect::<Vec<_>>()
        < vec![2, 2];
    m.requires_unknown = dynamic_requires || (old && m.requires.is_empty());
    m
}

/// Unconditional lines of an egg-info `requires.txt` (before any `[section]`).
fn parse_requires_txt(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with('['))
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// `[build-system] requires` of a `pyproject.toml`, if it says.
fn build_requires(pyproject: &str) -> Option<Vec<String>> {
    let doc = toml_edit::ImDocument::parse(pyproject).ok()?;
    let reqs = doc.get("build-system")?.get("requires")?.as_array()?;
    Some(
        reqs.iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
    )
}

/// A requirement string for a pip command line: no option, no path.
fn safe_requirement(r: &str) -> bool {
    !r.starts_with('-') && !r.contains("://") && !r.contains(" @ ") && !r.starts_with('.')
}

fn layout(
    sdist: &Path,
    integrity: Option<String>,
    work: &Path,
    script: Option<&str>,
) -> Result<Prepared, RunnerError> {
    let fname = sdist
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or("")
        .to_owned();
    if !fname.ends_with(".tar.gz") {
        return Err(RunnerError::Prepare(format!(
            "{fname}: only .tar.gz sdists can be built in the guest"
        )));
    }
    let list = listing(sdist)?;
    let top = top_dir(&list).ok_or_else(|| {
        RunnerError::Prepare(format!("{fname}: not an sdist (no single top folder)"))
    })?;
    let mut meta = parse_pkg_info(&member(sdist, &format!("{top}/PKG-INFO"))?);
    if meta.name.is_empty() || meta.version.is_empty() {
        return Err(RunnerError::Prepare(format!(
            "{fname}: PKG-INFO names no package or version"
        )));
    }
    let mut notes = Vec::new();
    if meta.requires_unknown {
        let egg = list
            .iter()
            .find(|e| e.starts_with(&format!("{top}/")) && e.ends_with(".egg-info/requires.txt"));
        match egg {
            Some(e) => meta.requires = parse_requires_txt(&member(sdist, e)?),
            None => notes.push(
                "its metadata does not list its dependencies; none were installed".to_string(),
            ),
        }
    }
    let pyproject = format!("{top}/pyproject.toml");
    let build = if list.contains(&pyproject) {
        build_requires(&member(sdist, &pyproject)?)
    } else {
        None
    }
    .unwrap_or_else(|| {
        LEGACY_BUILD_REQUIRES
            .iter()
            .map(|s| s.to_string())
            .collect()
    });
    for r in meta.requires.iter().chain(&build) {
        if !safe_requirement(r) {
            return Err(RunnerError::Prepare(format!(
                "{fname}: requirement {:?} is not a plain package requirement",
                crate::display::visible_short(r, 80)
            )));
        }
    }

    let sdist_dir = work.join("sdist");
    let buildenv = work.join("buildenv");
    let site = work.join("site");
    for d in [&sdist_dir, &buildenv, &site] {
        std::fs::create_dir_all(d).map_err(|e| RunnerError::io("creating a folder", e))?;
    }
    std::fs::copy(sdist, sdist_dir.join(&fname))
        .map_err(|e| RunnerError::io("copying the sdist", e))?;
    if !meta.requires.is_empty() {
        run_tool(
            guest_wheels(&["install", "--no-compile"])
                .arg("--target")
                .arg(&site)
                .args(&meta.requires),
            "pip install of the sdist's dependencies (wheels only)",
        )
        .map_err(|e| no_nested_sdists(e, "dependencies"))?;
    }
    // pip and the build requirements, unpacked here (wheels: nothing runs)
    // and compiled with the rest of the tree, so the guest neither creates
    // an isolated build environment nor compiles pip: under emulation each
    // of those costs minutes.
    run_tool(
        guest_wheels(&["install", "--no-compile"])
            .arg("--target")
            .arg(&buildenv)
            .arg(GUEST_PIP)
            .args(&build),
        "pip install of pip and the build requirements (wheels only)",
    )
    .map_err(|e| no_nested_sdists(e, "build requirements"))?;
    let code = launcher(&meta.name, &meta.version, &fname, script);
    let mut p = Prepared::new(
        work.to_path_buf(),
        meta.name,
        meta.version,
        integrity,
        Runtime::Python,
        vec!["-c".into(), code],
        python_env(),
    );
    p.notes = notes;
    Ok(p)
}

fn no_nested_sdists(e: RunnerError, what: &str) -> RunnerError {
    match e {
        RunnerError::Prepare(m) => RunnerError::Prepare(format!(
            "{m}\n(one of the sdist's {what} has no wheel either; --build-in-guest builds only the requested package)"
        )),
        other => other,
    }
}

/// A Python string literal (JSON strings are valid Python literals).
fn py(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "''".into())
}

/// The guest's launcher: build and install the sdist from local files into
/// scratch, then run its console script. pip's output goes to stderr, never
/// to the MCP channel.
fn launcher(name: &str, version: &str, sdist: &str, script: Option<&str>) -> String {
    format!(
        r#"import glob, importlib, os, runpy, subprocess, sys, tempfile
app = '{{app}}'
name, version, script = {name}, {version}, {script}
site = tempfile.mkdtemp(prefix='mcplint-build-')
env = dict(os.environ)
env['PYTHONPATH'] = app + '/buildenv'
sys.stderr.write('mcplint-guest: building %s %s from its sdist, offline\n' % (name, version))
sys.stderr.flush()
r = subprocess.run([sys.executable, '-m', 'pip', 'install', '--quiet', '--no-index',
    '--no-build-isolation', '--no-deps', '--no-compile', '--no-cache-dir',
    '--disable-pip-version-check', '--no-input', '--target', site, app + '/sdist/' + {sdist}],
    stdin=subprocess.DEVNULL, stdout=2, env=env)
if r.returncode:
    sys.exit('mcplint-guest: building the sdist failed (pip exit %d)' % r.returncode)
sys.path.insert(0, site)
norm = lambda s: s.lower().replace('-', '_').replace('.', '_')
scripts = []
for d in glob.glob(site + '/*.dist-info'):
    if norm(os.path.basename(d)).startswith(norm(name) + '_'):
        try:
            text = open(d + '/entry_points.txt').read()
        except OSError:
            text = ''
        section = False
        for line in text.splitlines():
            line = line.strip()
            if line.startswith('['):
                section = line == '[console_scripts]'
            elif section and '=' in line:
                k, v = line.split('=', 1)
                scripts.append((k.strip(), v.strip()))
if script:
    pick = [s for s in scripts if s[0] == script]
else:
    pick = [s for s in scripts if norm(s[0]) == norm(name)] or scripts[:1]
if not pick:
    sys.exit('mcplint-guest: %s has no console script %s' % (name, script or 'to start'))
target = pick[0][1].split()[0]
module, _, attr = target.partition(':')
sys.argv[0] = pick[0][0]
if not attr:
    runpy.run_module(module, run_name='__main__')
    sys.exit(0)
f = importlib.import_module(module)
for part in attr.split('.'):
    f = getattr(f, part)
sys.exit(f())
"#,
        name = py(name),
        version = py(version),
        script = script.map(py).unwrap_or_else(|| "None".into()),
        sdist = py(sdist),
    )
}

/// Finds the sdist of NAME (VERSION, or the latest) through PyPI's JSON API,
/// downloads it into DEST, checks its sha256, prints its file name and
/// sha256. Run by the host's Python (its TLS settings and CA bundle), it
/// only downloads.
const DOWNLOAD_SDIST: &str = r#"import hashlib, json, os, ssl, sys, urllib.request
name, version, dest = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    ctx = ssl.create_default_context(cafile=os.environ.get('PIP_CERT') or None)
    with urllib.request.urlopen('https://pypi.org/pypi/' + name + '/json', context=ctx, timeout=120) as r:
        info = json.load(r)
    version = version or info['info']['version']
    files = [u for u in info.get('releases', {}).get(version, [])
             if u.get('packagetype') == 'sdist' and u.get('filename', '').endswith('.tar.gz')]
    if not files:
        sys.exit('%s %s has no .tar.gz sdist on PyPI' % (name, version))
    f = files[0]
    fname = os.path.basename(f['filename'])
    if fname.startswith('.') or '/' in fname:
        sys.exit('odd file name %r' % fname)
    h = hashlib.sha256()
    with urllib.request.urlopen(f['url'], context=ctx, timeout=300) as r, open(os.path.join(dest, fname), 'wb') as out:
        while True:
            b = r.read(1 << 16)
            if not b:
                break
            h.update(b)
            out.write(b)
except OSError as e:
    sys.exit('PyPI: %s' % e)
except (KeyError, ValueError) as e:
    sys.exit('PyPI answered something unexpected: %r' % e)
if h.hexdigest() != f['digests']['sha256']:
    sys.exit('%s: sha256 %s does not match the registry (%s)' % (fname, h.hexdigest(), f['digests']['sha256']))
print(fname)
print(h.hexdigest())
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkg_info_requirements() {
        let m = parse_pkg_info(
            "Metadata-Version: 2.2\nName: x-y\nVersion: 1.0\nRequires-Dist: anyio>=4\nRequires-Dist: pytest; extra == \"test\"\n\nbody: ignored\n",
        );
        assert_eq!(
            m,
            Meta {
                name: "x-y".into(),
                version: "1.0".into(),
                requires: vec!["anyio>=4".into()],
                requires_unknown: false
            }
        );
        assert!(parse_pkg_info("Metadata-Version: 2.1\nName: a\nVersion: 1\n").requires_unknown);
        assert!(
            parse_pkg_info("Metadata-Version: 2.2\nName: a\nVersion: 1\nDynamic: Requires-Dist\n")
                .requires_unknown
        );
        assert!(!parse_pkg_info("Metadata-Version: 2.2\nName: a\nVersion: 1\n").requires_unknown);
        assert_eq!(
            parse_requires_txt("mcp>=1\n\n[dev]\npytest\n"),
            vec!["mcp>=1".to_string()]
        );
    }

    #[test]
    fn build_requirements_and_safety() {
        assert_eq!(
            build_requires("[build-system]\nrequires = [\"hatchling\", \"x>=1\"]\n"),
            Some(vec!["hatchling".to_string(), "x>=1".to_string()])
        );
        assert_eq!(build_requires("[project]\nname='x'\n"), None);
        assert!(safe_requirement("setuptools>=61"));
        assert!(!safe_requirement("--index-url=http://evil"));
        assert!(!safe_requirement("x @ https://evil/x.whl"));
        assert!(!safe_requirement("./local"));
    }
}

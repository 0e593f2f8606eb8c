//! The capture file `mcplint fetch` writes: what the server said, in the same
//! shape as the shared benign captures (so every loader reads it as kind
//! `capture`), plus a `capture` block saying where it came from and how it
//! was obtained.

use std::io::Write;
use std::path::Path;

use serde_json::{json, Map, Value};

use super::client::Manifest;

/// Where a capture came from and under which boundary it ran.
#[derive(Debug, Clone, Default)]
pub struct Provenance {
    /// The source as given (`npm:pkg@1.2.3`, `file:…`, `https://…`, `command:…`).
    pub source: String,
    /// The package's name, if any.
    pub package: Option<String>,
    /// The exact version that was installed.
    pub resolved_version: Option<String>,
    /// The registry's integrity hash of the artifact (npm `dist.integrity`,
    /// PyPI wheel sha256), or the local file's sha256.
    pub integrity: Option<String>,
    /// The command run (inside the guest or sandbox).
    pub argv: Vec<String>,
    /// Environment variable names given placeholder values.
    pub env_placeholders: Vec<String>,
    /// Declared secrets, each given `mcplint-placeholder-NAME`.
    pub secret_placeholders: Vec<String>,
    /// The egress proxy's hosts and log, when hosts were allowed.
    pub egress: Option<Value>,
    /// The transport used for a remote server (`streamable-http`, `sse`).
    pub transport: Option<String>,
    /// `microvm`, `namespaces` or `none`.
    pub boundary: String,
    /// `qemu-microvm`, `firecracker`, `bubblewrap`, `host`, `http`.
    pub backend: String,
    /// `tcg`, `kvm`, or none.
    pub accelerator: Option<String>,
    /// The guest image's hash, when a VM ran.
    pub image_hash: Option<String>,
    /// Seconds from spawn to the guest's init (VM only, when known).
    pub boot_s: Option<f64>,
    /// Seconds spent preparing the package on the host (download, unpack, disk).
    pub prepare_s: Option<f64>,
    /// Seconds from spawn to the first MCP message: the warm-up of a
    /// snapshot machine (see `runner::warm`); the handshake's and the lists'
    /// times count from there.
    pub warmup_s: Option<f64>,
    /// Seconds the warm snapshot's save took (QMP migration to a file),
    /// within `warmup_s`.
    pub warm_save_s: Option<f64>,
    /// Seconds from spawn to the end of the session.
    pub wall_s: Option<f64>,
    /// CPU seconds the sandbox's processes used (bubblewrap and QEMU, for a
    /// VM) from spawn to the end of the session: far less sensitive to other
    /// load on the machine than wall time, so it is what to compare between
    /// runs on a busy host.
    pub sandbox_cpu_s: Option<f64>,
    /// Start-up tunings that applied (e.g. `kernel-cmdline-fast-boot`,
    /// `node-compile-cache:used`), so a capture says how it was obtained.
    pub tunings: Vec<String>,
    /// The tail of the server's stderr (and the guest console).
    pub stderr_tail: String,
    /// Notes: anything a reader should know (e.g. unpinned source).
    pub notes: Vec<String>,
    /// The launch spec the source was resolved from, if any.
    pub origin: Option<super::spec::Origin>,
}

/// Builds the capture document.
pub fn build(m: &Manifest, p: &Provenance) -> Value {
    let name = m
        .server_info
        .as_ref()
        .and_then(|i| i.get("name"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .or_else(|| p.package.clone())
        .unwrap_or_else(|| "server".into());
    let mut root = Map::new();
    root.insert("server".into(), Value::String(name));
    root.insert("package".into(), Value::String(p.source.clone()));
    root.insert("tools".into(), Value::Array(m.tools.clone()));
    root.insert("prompts".into(), Value::Array(m.prompts.clone()));
    root.insert("resources".into(), Value::Array(m.resources.clone()));
    root.insert(
        "resourceTemplates".into(),
        Value::Array(m.resource_templates.clone()),
    );
    root.insert(
        "serverInfo".into(),
        m.server_info.clone().unwrap_or(Value::Null),
    );
    root.insert(
        "protocolVersion".into(),
        m.protocol_version
            .clone()
            .map(Value::String)
            .unwrap_or(Value::Null),
    );
    root.insert(
        "capabilities".into(),
        m.capabilities.clone().unwrap_or(Value::Null),
    );
    root.insert(
        "instructions".into(),
        m.instructions.clone().unwrap_or(Value::Null),
    );

    let t = &m.timings;
    let mut timings = Map::new();
    if let Some(s) = p.prepare_s {
        timings.insert("prepare_s".into(), round(s));
    }
    if let Some(s) = p.boot_s {
        timings.insert("boot_s".into(), round(s));
    }
    if let Some(s) = p.warmup_s {
        timings.insert("warmup_s".into(), round(s));
    }
    if let Some(s) = p.warm_save_s {
        timings.insert("warm_save_s".into(), round(s));
    }
    timings.insert("handshake_s".into(), round(t.handshake_s));
    for (method, secs, pages) in &t.lists {
        timings.insert(format!("{method}_s"), round(*secs));
        if *pages > 1 {
            timings.insert(format!("{method}_pages"), json!(pages));
        }
    }
    timings.insert("session_s".into(), round(t.total_s));
    if let Some(s) = p.wall_s {
        timings.insert("wall_s".into(), round(s));
    }
    if let Some(s) = p.sandbox_cpu_s {
        timings.insert("sandbox_cpu_s".into(), round(s));
    }
    let skipped: Vec<Value> = m
        .skipped
        .iter()
        .map(|(method, why)| json!({"method": method, "reason": why}))
        .collect();
    let capture = json!({
        "tool": format!("mcplint {}", env!("CARGO_PKG_VERSION")),
        "captured_at": utc_now(),
        "source": p.source,
        "resolved_version": p.resolved_version,
        "integrity": p.integrity,
        "era": m.era.name(),
        "argv": p.argv,
        "env_keys_with_dummy_values": p.env_placeholders,
        "secrets_given_placeholders": p.secret_placeholders,
        "transport": p.transport,
        "network": match (&p.egress, p.boundary.as_str()) {
            (Some(e), _) => e.clone(),
            (None, "remote") => Value::Null,
            (None, "none") => json!("the host's (no sandbox)"),
            (None, _) => json!("none"),
        },
        "sandbox": {
            "boundary": p.boundary,
            "backend": p.backend,
            "accelerator": p.accelerator,
            "guest_image": p.image_hash,
            "tunings": p.tunings,
        },
        "timings": timings,
        "skipped_lists": skipped,
        "stdout_noise": m.stdout_noise,
        "stdout_noise_count": m.stdout_noise_count,
        "server_messages": m.server_messages,
        "stderr_tail": p.stderr_tail,
        "notes": p.notes,
    });
    let mut capture = capture;
    if let (Some(o), Some(c)) = (&p.origin, capture.as_object_mut()) {
        c.insert(
            "launch_spec".into(),
            serde_json::to_value(o).unwrap_or(Value::Null),
        );
    }
    root.insert("capture".into(), capture);
    Value::Object(root)
}

fn round(s: f64) -> Value {
    json!((s * 1000.0).round() / 1000.0)
}

/// Writes `v` to `path` atomically (temporary file in the same folder, then rename).
pub fn write_atomic(path: &Path, v: &Value) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".mcplint-capture")
        .tempfile_in(dir)?;
    let mut text = serde_json::to_vec_pretty(v).map_err(std::io::Error::other)?;
    text.push(b'\n');
    tmp.write_all(&text)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    crate::timefmt::now_rfc3339()
}

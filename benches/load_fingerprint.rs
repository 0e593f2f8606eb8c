//! Load + fingerprint throughput, on one core: the 56 shared benign manifests
//! and a generated 100,000-tool manifest. Reports the median of several runs in
//! MB/s (10^6 bytes of manifest JSON per second) against the 150 MB/s target.
//!
//! ```text
//! cargo bench --bench load_fingerprint                 # run
//! cargo bench --bench load_fingerprint -- --write F    # only write the generated manifest to F
//! ```
//!
//! "Load" is everything `mcplint fingerprint` does after reading the file:
//! strict parse with spans, shape checks, the model; "fingerprint" is the
//! article's ts scheme (the default) over the loaded tools. The file bytes are
//! read into memory first, so disk speed is not measured.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mcplint::fingerprint::{server_fingerprint, Scheme};
use mcplint::manifest::load::{load_bytes, LoadOptions};

/// Deterministic generator (SplitMix64): the same manifest on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
}

const WORDS: &[&str] = &[
    "the",
    "file",
    "path",
    "repository",
    "returns",
    "list",
    "of",
    "issues",
    "for",
    "a",
    "given",
    "user",
    "query",
    "search",
    "results",
    "page",
    "optional",
    "maximum",
    "number",
    "items",
    "to",
    "return",
    "create",
    "update",
    "delete",
    "record",
    "database",
    "table",
    "column",
    "value",
    "filter",
    "by",
    "status",
    "open",
    "closed",
    "identifier",
    "unique",
    "project",
    "workspace",
    "channel",
    "message",
    "send",
    "read",
    "write",
    "directory",
    "content",
    "encoding",
    "utf-8",
    "format",
    "json",
    "markdown",
    "when",
    "omitted",
    "defaults",
    "is",
    "and",
    "or",
    "with",
    "from",
    "in",
    "calendar",
    "event",
    "start",
    "end",
    "time",
    "zone",
    "ISO",
    "8601",
    "URL",
    "request",
    "response",
    "headers",
    "timeout",
    "seconds",
    "retry",
    "token",
    "scope",
    "permission",
    "access",
];

const TYPES: &[&str] = &["string", "integer", "number", "boolean", "array", "object"];

/// Appends a sentence-like text of `lo..=hi` bytes (JSON-safe: words only).
fn text(rng: &mut Rng, lo: usize, hi: usize, out: &mut String) {
    let target = rng.range(lo, hi);
    let start = out.len();
    let mut first = true;
    while out.len() - start < target {
        if !first {
            out.push(' ');
        }
        first = false;
        out.push_str(WORDS[rng.below(WORDS.len())]);
    }
    out.push('.');
}

/// A `tools/list` result with `n` realistic tools: descriptions of 100–400
/// characters, 1–6 parameters with descriptions, some enums, defaults,
/// required lists and annotations, pretty-printed as servers send them often.
pub fn generate(n: usize) -> String {
    let mut rng = Rng(0x006d_6370_6c69_6e74);
    let mut s = String::with_capacity(n * 900);
    s.push_str("{\n  \"tools\": [\n");
    for i in 0..n {
        if i > 0 {
            s.push_str(",\n");
        }
        let verb = WORDS[rng.below(WORDS.len())];
        let noun = WORDS[rng.below(WORDS.len())];
        s.push_str(&format!(
            "    {{\n      \"name\": \"{verb}_{noun}_{i}\",\n      \"description\": \""
        ));
        text(&mut rng, 100, 400, &mut s);
        s.push_str("\",\n      \"inputSchema\": {\n        \"type\": \"object\",\n        \"properties\": {\n");
        let params = rng.range(1, 6);
        let mut required = Vec::new();
        for p in 0..params {
            if p > 0 {
                s.push_str(",\n");
            }
            let pname = format!("{}_{p}", WORDS[rng.below(WORDS.len())]);
            let ty = TYPES[rng.below(TYPES.len())];
            s.push_str(&format!(
                "          \"{pname}\": {{\"type\": \"{ty}\", \"description\": \""
            ));
            text(&mut rng, 20, 120, &mut s);
            s.push('"');
            match (ty, rng.below(4)) {
                ("string", 0) => s.push_str(", \"enum\": [\"asc\", \"desc\", \"relevance\"]"),
                ("integer", _) => s.push_str(&format!(
                    ", \"minimum\": 1, \"maximum\": {}, \"default\": 20",
                    rng.range(50, 1000)
                )),
                ("number", _) => s.push_str(", \"default\": 0.5"),
                ("array", _) => s.push_str(", \"items\": {\"type\": \"string\"}"),
                ("boolean", _) => s.push_str(", \"default\": false"),
                _ => {}
            }
            s.push('}');
            if rng.below(2) == 0 {
                required.push(pname);
            }
        }
        s.push_str("\n        }");
        if !required.is_empty() {
            let list: Vec<String> = required.iter().map(|r| format!("\"{r}\"")).collect();
            s.push_str(&format!(",\n        \"required\": [{}]", list.join(", ")));
        }
        s.push_str("\n      }");
        if rng.below(3) == 0 {
            s.push_str(
                ",\n      \"annotations\": {\"readOnlyHint\": true, \"openWorldHint\": false}",
            );
        }
        s.push_str("\n    }");
    }
    s.push_str("\n  ]\n}\n");
    s
}

/// Loads and fingerprints every input once, from `copies` (the inputs' bytes,
/// made before the clock starts: loading takes the bytes by value); returns
/// the number of tools seen (so nothing can be optimised away).
fn load_and_fingerprint(
    inputs: &[(PathBuf, Vec<u8>)],
    copies: Vec<Vec<u8>>,
    opts: &LoadOptions,
) -> usize {
    let mut tools = 0;
    for ((path, _), bytes) in inputs.iter().zip(copies) {
        let loaded = load_bytes(path, bytes, opts).expect("benchmark input loads");
        for server in &loaded.servers {
            black_box(server_fingerprint(&loaded.doc, server, Scheme::Ts));
            tools += server.tools.len();
        }
    }
    tools
}

/// Fresh copies of the inputs' bytes, for one run.
fn copies(inputs: &[(PathBuf, Vec<u8>)]) -> Vec<Vec<u8>> {
    inputs.iter().map(|(_, b)| b.clone()).collect()
}

/// CPU time this thread has run, from the scheduler (nanoseconds). The machine
/// this runs on is shared, so wall-clock time measures the neighbours too; the
/// thread's own CPU time is what "MB/s on one core" means.
fn thread_cpu() -> Duration {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let ns = text
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn bench(name: &str, inputs: &[(PathBuf, Vec<u8>)], runs: usize) -> f64 {
    let opts = LoadOptions::default();
    let bytes: usize = inputs.iter().map(|(_, b)| b.len()).sum();
    let tools = load_and_fingerprint(inputs, copies(inputs), &opts); // warm-up
    if runs == 0 {
        // `cargo test` runs benches unoptimised: check they work, claim no figures.
        println!(
            "{name}: smoke run ok ({} files, {tools} tools); measure with `cargo bench`",
            inputs.len()
        );
        return 0.0;
    }
    let mut wall = Vec::with_capacity(runs);
    let mut cpu = Vec::with_capacity(runs);
    for _ in 0..runs {
        // The copies are made (and their pages touched) before the clock
        // starts, so neither the copy nor its page faults are measured.
        let bytes = copies(inputs);
        let (w, c) = (Instant::now(), thread_cpu());
        black_box(load_and_fingerprint(inputs, bytes, &opts));
        wall.push(w.elapsed());
        cpu.push(thread_cpu() - c);
    }
    // The split: load alone and fingerprint alone (CPU time).
    let mut load_cpu = Vec::new();
    let mut fp_cpu = Vec::new();
    for _ in 0..runs.min(5) {
        let bytes = copies(inputs);
        let c = thread_cpu();
        let loaded: Vec<_> = inputs
            .iter()
            .zip(bytes)
            .map(|((path, _), b)| load_bytes(path, b, &opts).expect("benchmark input loads"))
            .collect();
        load_cpu.push(thread_cpu() - c);
        let c = thread_cpu();
        for l in &loaded {
            for server in &l.servers {
                black_box(server_fingerprint(&l.doc, server, Scheme::Ts));
            }
        }
        fp_cpu.push(thread_cpu() - c);
    }
    let (load_cpu, fp_cpu) = (median(load_cpu), median(fp_cpu));
    let mb = bytes as f64 / 1e6;
    println!(
        "  {name}: load alone {:.1} ms CPU = {:.0} MB/s; fingerprint alone {:.1} ms CPU = {:.0} MB/s",
        load_cpu.as_secs_f64() * 1e3,
        mb / load_cpu.as_secs_f64(),
        fp_cpu.as_secs_f64() * 1e3,
        mb / fp_cpu.as_secs_f64()
    );
    let (wall, cpu) = (median(wall), median(cpu));
    let mbps = |d: Duration| mb / d.as_secs_f64();
    let cpu_ok = cpu > Duration::ZERO;
    let rate = if cpu_ok { mbps(cpu) } else { mbps(wall) };
    println!(
        "{name}: {} files, {tools} tools, {mb:.1} MB; median of {runs}: {:.1} ms CPU = {:.0} MB/s per core ({:.1} ms wall = {:.0} MB/s); target >= 150 MB/s: {}",
        inputs.len(),
        cpu.as_secs_f64() * 1e3,
        mbps(cpu),
        wall.as_secs_f64() * 1e3,
        mbps(wall),
        if rate >= 150.0 { "met" } else { "MISSED" }
    );
    rate
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--write") {
        let path = args.get(i + 1).expect("--write FILE");
        let tmp = format!("{path}.tmp");
        std::fs::write(&tmp, generate(100_000)).expect("write generated manifest");
        std::fs::rename(&tmp, path).expect("rename generated manifest");
        return;
    }
    // `cargo test --benches` runs this with no `--bench` flag: just a smoke run.
    let quick = !args.iter().any(|a| a == "--bench");

    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets/benign");
    let mut benign: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&shared)
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (the shared datasets must sit next to the crate)",
                shared.display()
            )
        })
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let b = std::fs::read(&p).expect("read dataset");
            (p, b)
        })
        .collect();
    benign.sort();
    let n = if quick { 1_000 } else { 100_000 };
    let generated = vec![(
        PathBuf::from(format!("generated-{n}.json")),
        generate(n).into_bytes(),
    )];

    // `-- benign` or `-- generated` runs one of the two.
    let only = |what: &str| {
        !args.iter().any(|a| a == "benign" || a == "generated") || args.iter().any(|a| a == what)
    };
    if only("benign") {
        bench("benign manifests", &benign, if quick { 0 } else { 15 });
    }
    if only("generated") {
        bench(
            &format!("generated {n}-tool manifest"),
            &generated,
            if quick { 0 } else { 7 },
        );
    }
}

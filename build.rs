//! Embeds `rules/*.toml` in the binary so a plain `cargo install` is never
//! rule-less: writes `$OUT_DIR/builtin_rules.rs` with one `include_str!` per file.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let dir = root.join("rules");
    println!("cargo:rerun-if-changed=rules");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut out = String::from("/// The embedded rule files: (name, text).\npub static BUILTIN_RULES: &[(&str, &str)] = &[\n");
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let name = format!(
            "rules/{}",
            f.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default()
        );
        let _ = writeln!(
            out,
            "    ({name:?}, include_str!({:?})),",
            f.display().to_string()
        );
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("builtin_rules.rs");
    std::fs::write(dest, out).expect("write builtin_rules.rs");
}

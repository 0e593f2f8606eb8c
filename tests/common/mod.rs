//! Helpers shared by the integration tests that check many inputs at once.

use std::path::{Path, PathBuf};

use mcplint::finding::Finding;
use mcplint::manifest::load::{load_all, LoadOptions};
use mcplint::manifest::Loaded;

/// Every `.json` file under `dir`, recursively, sorted.
pub fn json_files(dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            json_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p.display().to_string());
        }
    }
}

/// The corpus, every rule fixture and the shared datasets: the `.json`
/// inputs the whole-check tests run over.
pub fn every_fixture() -> Vec<String> {
    let mut files = Vec::new();
    for dir in ["corpus", "tests/fixtures/rules", "../shared/datasets"] {
        json_files(Path::new(dir), &mut files);
    }
    files
}

/// Loads each file on its own (some fixtures are meant to fail to load) and
/// keeps those that load.
pub fn load_each(files: &[String]) -> Vec<Loaded> {
    files
        .iter()
        .filter_map(|f| load_all(std::slice::from_ref(f), &LoadOptions::default()).ok())
        .flatten()
        .collect()
}

/// The same findings, one by one, in the same order.
pub fn assert_same(one: &[Finding], other: &[Finding], what: &str) {
    assert_eq!(one.len(), other.len(), "{what}: number of findings");
    for (i, (a, b)) in one.iter().zip(other).enumerate() {
        assert_eq!(a, b, "{what}: finding {i}");
    }
}

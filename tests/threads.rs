//! `Engine::check` spread over several threads reports exactly what one
//! thread reports, in the same order: every finding, span and note, the
//! findings over several servers of one client config, and those of all
//! inputs checked as one agent.

mod common;

use std::path::Path;

use common::{assert_same, every_fixture, json_files, load_each};
use mcplint::rules::build_engine;

#[test]
fn threads_change_nothing_but_speed() {
    let mut files = every_fixture();
    // Client configs: several servers in one file.
    for dir in ["claude-desktop", "vscode", "windsurf", "gemini"] {
        json_files(&Path::new("tests/fixtures/loaders").join(dir), &mut files);
    }
    // First and last an input with findings of its own (not a copy of
    // another input, whose findings would be merged with the copy's), so
    // that no server at either end of the list can be lost unnoticed.
    files.insert(0, "tests/fixtures/approval/kitchen-after.json".into());
    files.push("tests/fixtures/approval/rugpull-agentnull-rugpull-calculator-after.json".into());
    let loaded = load_each(&files);
    let servers: usize = loaded.iter().map(|l| l.servers.len()).sum();
    assert!(servers >= 60, "only {servers} servers loaded");
    // Client configs bring several servers in one file: the rules over
    // several servers run on each such file without `together` too.
    assert!(
        loaded.iter().any(|l| l.servers.len() > 1),
        "no input with several servers"
    );
    let mut engine = build_engine(&[], true).expect("rules compile");
    for together in [false, true] {
        engine.set_threads(1);
        let one = engine.check(&loaded, together);
        assert!(one.len() > 100, "only {} findings", one.len());
        if together {
            assert!(
                one.iter().any(|f| f.rule == "cross-server-tool-name"),
                "no finding over several servers"
            );
        }
        // Three threads: more than this machine's cores, and a number that
        // does not divide the servers evenly. (One such count: each check
        // takes seconds in a debug build.)
        engine.set_threads(3);
        let many = engine.check(&loaded, together);
        assert_same(&one, &many, &format!("3 threads, together: {together}"));
    }
}

#!/usr/bin/env bash
# Runs the coverage-guided fuzz target `load` (parser + every loader +
# fingerprints + span mapping) for SECONDS seconds with libFuzzer via cargo-fuzz.
#
#   fuzz/run.sh SECONDS [extra libFuzzer flags...]
#
# Installs cargo-fuzz if it is missing. The toolchain here is stable, and
# cargo-fuzz needs nightly-only flags (-Zsanitizer, -Cpasses=sancov-module), so
# it runs with RUSTC_BOOTSTRAP=1. The seed corpus is built from
# ../shared/datasets (when present) and the repo's examples and test fixtures,
# each file prefixed with every selector byte class the target uses (see
# fuzz_targets/load.rs). Crashes land in fuzz/artifacts/load/; the log in
# fuzz/fuzz-<date>.log. Runs on one core, niced, with a 2 GB RSS limit and a
# 10 s per-input timeout (a hang is reported as a crash).
set -euo pipefail

secs="${1:?usage: fuzz/run.sh SECONDS [libFuzzer flags]}"
shift
here="$(cd "$(dirname "$0")" && pwd)"
crate="$(dirname "$here")"
shared="${MCPLINT_SHARED:-$crate/../shared}"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz/run.sh: installing cargo-fuzz" >&2
    cargo install --locked cargo-fuzz
fi

export RUSTC_BOOTSTRAP=1
corpus="$here/corpus/load"
seeds="$here/seeds"
rm -rf "$seeds"
mkdir -p "$corpus" "$seeds"

# Seeds: each source file once per selector class (auto-detect, forced tools
# list, forced capture, forced JSON-RPC, JSONC name, depth limit 4).
add_seed() {
    local file="$1" name
    name="$(basename "$file")"
    for sel in 0f 00 04 01 9f 4f; do
        { printf "\\x$sel"; cat "$file"; } >"$seeds/$sel-$name"
    done
}
shopt -s nullglob
for f in "$shared"/datasets/benign/*.json "$shared"/datasets/poisoned/*.json \
    "$crate"/examples/*.json "$crate"/tests/fixtures/*.json "$crate"/tests/fixtures/**/*.json; do
    # Files over 64 KB make every execution slow (the target re-checks every
    # node) and teach nothing the smaller ones do not.
    if [ -f "$f" ] && [ "$(stat -c %s "$f")" -le 65536 ]; then add_seed "$f"; fi
done
# Small hand-made seeds for shapes the datasets lack.
printf '\x0f{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}}' >"$seeds/jsonrpc.json"
printf '\x0f[{"jsonrpc":"2.0","id":1,"result":{"tools":[],"nextCursor":"x"}},{"id":2,"result":{"tools":[{"name":"b"}]}}]' >"$seeds/pages.json"
printf '\x0f[{"name":"a","description":"caf\\u00e9 \\ud83d\\ude00 \\ud800 \\n","x":1.0,"y":-0.0,"z":1e400}]' >"$seeds/escapes.json"
printf '\x0f{"tools":[{"name":"a","name":"b"}],"prompts":[],"instructions":"i"}' >"$seeds/dup.json"
printf '\x9f{"servers":{"a":{"command":"x"}}, /* c */ "inputs":[],}' >"$seeds/jsonc.json"
printf '\x2f[mcp_servers.a]\ncommand = "x"\nargs = ["y"]\n' >"$seeds/codex.toml"

log="$here/fuzz-$(date -u +%Y%m%dT%H%M%SZ).log"
echo "fuzz/run.sh: fuzzing for ${secs}s, log $log" >&2
cd "$here"
# No sanitizer (-s none): mcplint forbids unsafe code, so AddressSanitizer
# would find little and costs 2-3x in executions. Debug assertions stay on
# (cargo-fuzz's default), so integer overflow panics.
nice -n 15 cargo fuzz run -s none load "$corpus" "$seeds" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 "$@" 2>&1 | tee "$log"

#!/usr/bin/env bash
# The README's test command: installs what the tests need on a fresh Debian 12 machine (idempotent),
# builds the runner's guest image (cached), then runs the checks and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v node >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs; }
command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq npm; }
command -v python3 >/dev/null || { apt-get update -qq && apt-get install -y -qq python3; }
# Microsoft's SARIF validator, used by the SARIF tests (npm, into .tools/).
[ -x .tools/node_modules/.bin/sarif-multitool ] || npm install --silent --prefix .tools @microsoft/sarif-multitool
export MCPLINT_REQUIRE_SARIF=1
# The runner (mcplint fetch): QEMU, bubblewrap, e2fsprogs...; then the guest image (cached).
bash scripts/install-runner-deps.sh
cargo build --quiet
./target/debug/mcplint runner setup
cargo fmt --check
cargo clippy --all-targets --quiet -- -D warnings
# The learned rule's model is data built from the datasets: it must be what
# training gives now (pure Python, deterministic, about ten seconds).
python3 scripts/train-sentence-model.py --check
cargo test

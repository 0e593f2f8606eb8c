#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian 12 machine, then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v node >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs; }
command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq npm; }
command -v python3 >/dev/null || { apt-get update -qq && apt-get install -y -qq python3; }
# Microsoft's SARIF validator, used by tests/rules.rs (npm, into .tools/).
[ -x .tools/node_modules/.bin/sarif-multitool ] || npm install --silent --prefix .tools @microsoft/sarif-multitool
export MCPLINT_REQUIRE_SARIF=1
cargo test --all-targets

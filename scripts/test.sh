#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian 12 machine, then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v node >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs; }
command -v python3 >/dev/null || { apt-get update -qq && apt-get install -y -qq python3; }
cargo fmt --check
cargo clippy --all-targets --quiet -- -D warnings
cargo test

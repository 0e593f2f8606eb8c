#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian 12 machine, then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v node >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs; }
command -v python3 >/dev/null || { apt-get update -qq && apt-get install -y -qq python3; }
# The runner (mcplint fetch): QEMU, bubblewrap, e2fsprogs...; then the guest image (cached).
bash scripts/install-runner-deps.sh
cargo build --quiet
./target/debug/mcplint runner setup
cargo test --all-targets

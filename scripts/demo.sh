#!/usr/bin/env bash
# The README's first command. On a fresh Debian 12 machine with the Rust toolchain: installs what the
# runner needs (QEMU from bookworm-backports, bubblewrap, e2fsprogs ...), builds mcplint, builds the
# runner's guest image (cached under ~/.cache/mcplint), then runs mcplint on the example in examples/:
# the article's poisoned weather tool, checked, then diffed against the version that was reviewed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-runner-deps.sh
cargo build --release --quiet
./target/release/mcplint runner setup
# Exit code 1 means "findings" or "changes", which is the point of the example; 2 would be an error.
run() { echo "\$ mcplint $*"; ./target/release/mcplint "$@" || [ $? -eq 1 ]; echo; }
run check examples/weather-poisoned.json
run diff examples/weather-reviewed.json examples/weather-poisoned.json
run fingerprint examples/weather-reviewed.json examples/weather-poisoned.json

#!/usr/bin/env bash
# Median wall time of `mcplint fetch` in the microVM, next to the same servers started directly on
# the host (--no-sandbox), in the same run.
#
#   bash bench/fetch.sh [RUNS]        (default 3 runs per server and mode)
#
# Prints, per server and mode: the median of the whole command's wall time, and the medians of
# the parts the capture records: prepare (npm/pip download + unpack + disk image), spawn -> guest
# /init starting the server (boot), and spawn -> tools/list answered (session).
# Needs `mcplint runner setup` first. Run it on an otherwise idle machine for meaningful numbers.
#
# Measured 2026-11-29 23:12-23:29 UTC, 3 runs each, TCG (KVM here is nested PVM and refused by the
# probe), debug build, on the 2-core machine shared with five other agents (load average 7-10, so
# every figure is several times what an idle machine gives; the prototype's idle figures were
# 10.9 / 11.5 / 15.6 s to tools/list):
#   server                                   mode     wall   prepare  boot   session
#   server-memory@2026.8.31                  microvm  71.49  14.42    12.90  45.37
#   server-memory@2026.8.31                  host     19.56  16.57    -       0.93
#   server-everything@2026.8.31              microvm  74.65  19.84    12.69  43.39
#   server-everything@2026.8.31              host     19.50  16.89    -       0.85
#   mcp-server-time==2026.10.19              microvm 116.40  32.50     9.91  75.31
#   mcp-server-time==2026.10.19              host     36.74  31.75    -       3.00
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-3}"
# mcplint's own work is negligible next to npm, pip and the VM: the debug build is enough
# (PROFILE=release to use the release build).
PROFILE="${PROFILE:-debug}"
if [ "$PROFILE" = release ]; then cargo build --quiet --release; else cargo build --quiet; fi
BIN=./target/$PROFILE/mcplint
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
SERVERS=(
  "npm:@modelcontextprotocol/server-memory@2026.8.31"
  "npm:@modelcontextprotocol/server-everything@2026.8.31"
  "pypi:mcp-server-time==2026.10.19"
)
printf '%-56s %-8s %8s %8s %8s %8s %8s\n' server mode wall prepare boot session accel
for src in "${SERVERS[@]}"; do
  for mode in microvm host; do
    flags=()
    [ "$mode" = host ] && flags=(--no-sandbox)
    for i in $(seq 1 "$RUNS"); do
      start=$(date +%s.%N)
      if ! "$BIN" fetch "${flags[@]}" "$src" -o "$OUT/$mode-$i.json" 2>"$OUT/$mode-$i.err"; then
        echo "FAILED: $src ($mode):" >&2; tail -5 "$OUT/$mode-$i.err" >&2; continue
      fi
      end=$(date +%s.%N)
      echo "$start $end" > "$OUT/$mode-$i.time"
    done
    python3 - "$OUT" "$mode" "$RUNS" "$src" <<'PY'
import json, statistics, sys, os
out, mode, runs, src = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
wall, prep, boot, sess, accel = [], [], [], [], set()
for i in range(1, runs + 1):
    t = os.path.join(out, f"{mode}-{i}.time")
    if not os.path.exists(t):
        continue
    a, b = map(float, open(t).read().split())
    wall.append(b - a)
    c = json.load(open(os.path.join(out, f"{mode}-{i}.json")))["capture"]
    tm = c["timings"]
    prep.append(tm.get("prepare_s", 0.0))
    if "boot_s" in tm:
        boot.append(tm["boot_s"])
    # spawn -> tools/list answered = handshake + tools/list.
    sess.append(tm["handshake_s"] + tm.get("tools/list_s", 0.0))
    accel.add(c["sandbox"].get("accelerator") or "-")
    os.remove(t)
med = lambda v: f"{statistics.median(v):8.2f}" if v else "       -"
print(f"{src:<56} {mode:<8} {med(wall)} {med(prep)} {med(boot)} {med(sess)} {','.join(sorted(accel)):>8}  (n={len(wall)})")
PY
  done
done

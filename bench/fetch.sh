#!/usr/bin/env bash
# Median wall time of `mcplint fetch` in the microVM, next to the same servers started directly on
# the host (--no-sandbox), all in the same run, in these modes:
#   baseline  start-up tunings off (MCPLINT_VM_BASELINE=1: no fast-boot kernel parameters, no Node
#             flags, no snapshots);
#   main      the tunings without any snapshot (MCPLINT_VM_SNAPSHOT=0);
#   cold      the boot snapshot, no warm snapshot (MCPLINT_VM_WARM=0): a package's first fetch as it
#             was before warm snapshots;
#   first     a package's first fetch now: the boot snapshot, and the warm snapshot saved on the way
#             (the package's warm snapshot is deleted before each such run);
#   warm      a later fetch of the same package, restoring the warm snapshot `first` saved;
#   host      --no-sandbox.
#
#   bash bench/fetch.sh [RUNS] [SERVER...]   (default 3 runs per server and mode, the three servers below)
#
# The modes alternate within each round (baseline, main, cold, first, warm, host, baseline, ...) so
# a change in the machine's load hits all of them alike. Snapshots live in a folder of the run's own
# (the first fetch makes the boot snapshot: that goes into its prepare time). Prints, per server and
# mode, medians of: the whole command's wall time; prepare (npm/pip download + unpack + disk image);
# boot (spawn -> guest /init starting the server, or resuming it); session (spawn -> tools/list
# answered); cpu (CPU seconds of bubblewrap + QEMU from spawn to exit: on a shared, loaded machine
# this moves far less than wall time, so compare it first); then ratios against `cold` and `main`.
# Needs `mcplint runner setup` first.
#
# Measured 2026-11-30 10:44-10:51 UTC, 3 runs each, TCG, debug build, load average about 2.5, MODES="cold first warm host",
# after the guest image compiled the Python standard library to bytecode:
#   pypi:mcp-server-time==2026.10.19                     cold       37.28   15.84    0.83   20.39   18.31
#   pypi:mcp-server-time==2026.10.19                     first      44.69   18.09    1.00   23.83   21.45
#   pypi:mcp-server-time==2026.10.19                     warm       21.29   18.67    0.81    1.26    1.30
#   pypi:mcp-server-time==2026.10.19                     host       17.11   15.43       -    1.45    1.38
#
# Measured 2026-11-30 08:55-09:03 UTC, 3 runs each, TCG, debug build, quiet machine (load average about 1),
# MODES="cold first warm host":
#   server                                               mode        wall prepare    boot session     cpu
#   npm:@modelcontextprotocol/server-memory@2026.8.31    cold       20.74    8.99    0.76   11.17   11.61
#   npm:@modelcontextprotocol/server-memory@2026.8.31    first      21.98    9.25    0.85   11.99   12.08
#   npm:@modelcontextprotocol/server-memory@2026.8.31    warm       12.63    9.44    0.70    2.57    2.67
#   npm:@modelcontextprotocol/server-memory@2026.8.31    host        9.03    8.46       -    0.37    0.43
#     first/cold: session 1.07, cpu 1.04; warm/cold: session 0.23, cpu 0.23
#   npm:@modelcontextprotocol/server-everything@2026.8.31 cold      21.96    9.58    0.86   11.72   12.24
#   npm:@modelcontextprotocol/server-everything@2026.8.31 first     25.40   11.02    0.88   13.56   13.73
#   npm:@modelcontextprotocol/server-everything@2026.8.31 warm      12.99   10.24    0.73    2.07    2.22
#   npm:@modelcontextprotocol/server-everything@2026.8.31 host      10.35    9.40       -    0.42    0.50
#     first/cold: session 1.16, cpu 1.12; warm/cold: session 0.18, cpu 0.18
# Measured 2026-11-30 08:10-08:50 UTC, 3 runs each, load average about 5 (other agents' builds), before
# the save's bandwidth cap was lifted (saves took 1.4 s instead of 0.4):
#   pypi:mcp-server-time==2026.10.19  main 50.65, cold 49.74, first 58.00, warm 2.18, host 2.34 s
#     (session; cpu 35.49, 32.37, 35.88, 1.41, 1.47); server-memory main 22.61, cold 16.75, first 20.78,
#     warm 3.71, host 0.63; server-everything 28.10, 18.70, 24.40, 3.30, 0.81.
#
# In the runs below, "tuned" is what is now "cold" (the boot snapshot, no warm snapshot).
# Measured 2026-11-30 06:14-06:32 UTC, 3 runs each, TCG, debug build, quiet machine (load average about 1):
#   server                                               mode        wall prepare    boot session     cpu
#   npm:@modelcontextprotocol/server-memory@2026.8.31    baseline   23.75    8.34    4.61   15.25   15.45
#   npm:@modelcontextprotocol/server-memory@2026.8.31    main       22.04    8.31    3.60   13.22   13.57
#   npm:@modelcontextprotocol/server-memory@2026.8.31    tuned      19.25    8.55    0.83   10.19   10.50
#   npm:@modelcontextprotocol/server-memory@2026.8.31    host        8.74    8.22       -    0.36    0.42
#     tuned/main: session 0.77, cpu 0.77, boot 0.23
#   npm:@modelcontextprotocol/server-everything@2026.8.31 baseline  25.84    9.21    4.67   16.01   16.43
#   npm:@modelcontextprotocol/server-everything@2026.8.31 main      24.83    9.60    3.73   14.34   14.80
#   npm:@modelcontextprotocol/server-everything@2026.8.31 tuned     20.74    9.05    0.80   11.11   11.31
#   npm:@modelcontextprotocol/server-everything@2026.8.31 host       9.11    8.23       -    0.41    0.47
#     tuned/main: session 0.77, cpu 0.76, boot 0.22
#   pypi:mcp-server-time==2026.10.19                     baseline   47.92   15.71    4.60   31.07   32.00
#   pypi:mcp-server-time==2026.10.19                     main       46.02   15.50    3.71   29.37   30.16
#   pypi:mcp-server-time==2026.10.19                     tuned      43.00   15.72    0.82   26.38   27.12
#   pypi:mcp-server-time==2026.10.19                     host       16.73   15.03       -    1.34    1.28
#     tuned/main: session 0.90, cpu 0.90, boot 0.22
#
# Measured 2026-11-30 05:35-05:48 UTC, 3 runs each, TCG, debug build, load average 5 to 8 (other
# agents), with the boot snapshot in "tuned":
#   server                          mode      wall  prepare  boot  session   cpu
#   server-memory@2026.8.31         baseline  52.05  14.00   9.89  29.74  15.89
#   server-memory@2026.8.31         main      44.48  12.79   7.10  25.54  13.41
#   server-memory@2026.8.31         tuned     29.60  11.05   1.23  14.12   9.76
#   server-memory@2026.8.31         host      13.64  11.43    -     0.54   0.40
#     tuned/main: session 0.55, cpu 0.73, boot 0.17
#   server-everything@2026.8.31     baseline  40.56  11.78   6.89  24.58  15.72
#   server-everything@2026.8.31     main      37.18  12.08   5.46  22.10  14.26
#   server-everything@2026.8.31     tuned     29.77  12.98   1.20  14.06  10.90
#   server-everything@2026.8.31     host      14.84  11.89    -     0.56   0.46
#     tuned/main: session 0.64, cpu 0.76, boot 0.22
# (An earlier run the same morning, 05:00-05:18: tuned/main session 0.74 and 0.70, cpu 0.76 and 0.75.)
#
# Measured 2026-11-30 02:24-03:04 UTC, before the boot snapshot, 3 runs each, TCG (KVM here is nested PVM and refused by the
# probe), debug build, on the 2-core machine shared with six other agents and their builds and VMs
# (load average 15-20: wall times are several times an idle machine's; the prototype's idle figures
# were 10.9 / 11.5 / 15.6 s to tools/list):
#   server                          mode      wall  prepare  boot  session   cpu
#   server-memory@2026.8.31         baseline 103.78  34.75  19.77  65.06  18.37
#   server-memory@2026.8.31         tuned     87.96  29.77  13.69  53.34  16.22
#   server-memory@2026.8.31         host      32.16  28.06    -     2.79   0.49
#     tuned/baseline: session 0.82, cpu 0.88, boot 0.69
#   server-everything@2026.8.31     baseline 101.49  23.34  15.06  61.12  19.60
#   server-everything@2026.8.31     tuned     93.70  25.49  12.48  54.16  18.70
#   server-everything@2026.8.31     host      27.37  23.38    -     1.13   0.53
#     tuned/baseline: session 0.89, cpu 0.95, boot 0.83
#   mcp-server-time==2026.10.19     baseline 155.28  39.66  12.75 102.47  39.45
#   mcp-server-time==2026.10.19     tuned    135.21  40.91  10.31  81.47  35.68
#   mcp-server-time==2026.10.19     host      42.09  35.24    -     4.46   1.54
#     tuned/baseline: session 0.80, cpu 0.90, boot 0.81
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-3}"
shift || true
# mcplint's own work is negligible next to npm, pip and the VM: the debug build is enough
# (PROFILE=release to use the release build).
PROFILE="${PROFILE:-debug}"
if [ "$PROFILE" = release ]; then cargo build --quiet --release; else cargo build --quiet; fi
BIN=./target/$PROFILE/mcplint
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
export MCPLINT_VM_SNAPSHOT_DIR="$OUT/snapshots"
SERVERS=("$@")
if [ ${#SERVERS[@]} -eq 0 ]; then
  SERVERS=(
    "npm:@modelcontextprotocol/server-memory@2026.8.31"
    "npm:@modelcontextprotocol/server-everything@2026.8.31"
    "pypi:mcp-server-time==2026.10.19"
  )
fi
# MODES="main warm" bash bench/fetch.sh ... runs only those modes.
read -r -a MODES <<< "${MODES:-baseline main cold first warm host}"
for s in "${!SERVERS[@]}"; do
  src="${SERVERS[$s]}"
  for i in $(seq 1 "$RUNS"); do
    for mode in "${MODES[@]}"; do
      flags=()
      envs=()
      case "$mode" in
        host) flags=(--no-sandbox) ;;
        baseline) envs=(MCPLINT_VM_BASELINE=1) ;;
        main) envs=(MCPLINT_VM_BASELINE=0 MCPLINT_VM_SNAPSHOT=0) ;;
        cold) envs=(MCPLINT_VM_BASELINE=0 MCPLINT_VM_WARM=0) ;;
        first) envs=(MCPLINT_VM_BASELINE=0); rm -rf "$MCPLINT_VM_SNAPSHOT_DIR/.warm" ;;
        warm) envs=(MCPLINT_VM_BASELINE=0) ;;
      esac
      f="$OUT/$s-$mode-$i"
      start=$(date +%s.%N)
      if ! env "${envs[@]}" "$BIN" fetch "${flags[@]}" "$src" -o "$f.json" 2>"$f.err"; then
        echo "FAILED: $src ($mode):" >&2; tail -5 "$f.err" >&2; continue
      fi
      end=$(date +%s.%N)
      echo "$start $end" > "$f.time"
    done
  done
done
python3 - "$OUT" "$RUNS" "${SERVERS[@]}" <<'PY'
import json, statistics, sys, os
out, runs, servers = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(f"{'server':<52} {'mode':<8} {'wall':>7} {'prepare':>7} {'boot':>7} {'session':>7} {'cpu':>7}  accel  n")
med = lambda v: statistics.median(v) if v else None
fmt = lambda x: f"{x:7.2f}" if x is not None else "      -"
for s, src in enumerate(servers):
    rows = {}
    for mode in ("baseline", "main", "cold", "first", "warm", "host"):
        if not any(os.path.exists(os.path.join(out, f"{s}-{mode}-{i}.time")) for i in range(1, runs + 1)):
            continue
        wall, prep, boot, sess, cpu, accel = [], [], [], [], [], set()
        for i in range(1, runs + 1):
            f = os.path.join(out, f"{s}-{mode}-{i}")
            if not os.path.exists(f + ".time"):
                continue
            a, b = map(float, open(f + ".time").read().split())
            wall.append(b - a)
            c = json.load(open(f + ".json"))["capture"]
            tm = c["timings"]
            prep.append(tm.get("prepare_s", 0.0))
            if "boot_s" in tm:
                boot.append(tm["boot_s"])
            # spawn -> tools/list answered = warm-up (a snapshot machine's, before the first
            # MCP message) + handshake + tools/list.
            sess.append(tm.get("warmup_s", 0.0) + tm["handshake_s"] + tm.get("tools/list_s", 0.0))
            if "sandbox_cpu_s" in tm:
                cpu.append(tm["sandbox_cpu_s"])
            accel.add(c["sandbox"].get("accelerator") or "-")
        rows[mode] = (med(wall), med(prep), med(boot), med(sess), med(cpu))
        print(f"{src:<52} {mode:<8} {fmt(rows[mode][0])} {fmt(rows[mode][1])} {fmt(rows[mode][2])} {fmt(rows[mode][3])} {fmt(rows[mode][4])}  {','.join(sorted(accel)):>5}  {len(wall)}")
    for mode, ref in (("cold", "main"), ("first", "cold"), ("warm", "cold"), ("warm", "main")):
        b, t = rows.get(ref), rows.get(mode)
        ratio = lambda k: f"{t[k] / b[k]:.2f}" if t and b and t[k] and b[k] else "-"
        print(f"{'':<52} {mode}/{ref}: session {ratio(3)}, cpu {ratio(4)}, boot {ratio(2)}")
PY

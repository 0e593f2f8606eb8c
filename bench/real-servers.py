#!/usr/bin/env python3
"""Fetch real servers from shared/datasets/benign in the microVM and compare fingerprints.

    python3 bench/real-servers.py [--sandbox microvm|namespaces] [--only SUBSTR] [--limit N] [--keep DIR]

For each capture in ../shared/datasets/benign (npm and PyPI), runs `mcplint fetch` with the same
exact version, the same arguments (`capture.argv_tail`, `{DATA}` -> /tmp) and placeholder values for
the same environment variables (`capture.env_keys_with_dummy_values`), then compares the article
fingerprint of the fetched tool list with the shared capture's. Prints one line per server and a
summary. Needs `mcplint runner setup` first. A mismatch is reported with the first differing tool:
some servers embed their environment (a path, the time zone) in tool text.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENIGN = os.path.join(ROOT, "..", "shared", "datasets", "benign")
BIN = os.environ.get("MCPLINT_BIN") or os.path.join(ROOT, "target", "debug", "mcplint")


def dummy(key):
    k = key.upper()
    if k.endswith("_URL") or k.endswith("_URI"):
        return "http://127.0.0.1:9"
    if k.endswith("_PORT"):
        return "9"
    if k.endswith("_HOST"):
        return "127.0.0.1"
    if k.endswith("_REGION"):
        return "us-east-1"
    if "TRANSPORT" in k:
        return "stdio"
    if "LOG_LEVEL" in k:
        return "ERROR"
    return "dummy-not-a-real-credential"


def fingerprint(path):
    out = subprocess.run([BIN, "fingerprint", path], capture_output=True, text=True)
    return out.stdout.split()[0] if out.returncode == 0 and out.stdout else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sandbox", default="microvm")
    ap.add_argument("--only", default="")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--timeout", default="300")
    ap.add_argument("--handshake-timeout", default="240")
    ap.add_argument("--skip", default="", help="comma-separated file names to leave out (already done)")
    ap.add_argument("--keep", default="", help="copy each fetched capture into this folder")
    a = ap.parse_args()
    files = sorted(f for f in os.listdir(BENIGN) if f.endswith(".json") and a.only in f)
    files = [f for f in files if f not in a.skip.split(",")]
    if a.limit:
        files = files[: a.limit]
    ok = bad = failed = 0
    for f in files:
        ref = os.path.join(BENIGN, f)
        d = json.load(open(ref))
        src = d["package"]
        cap = d.get("capture", {})
        args = [x.replace("{DATA}", "/tmp") for x in cap.get("argv_tail", [])]
        env = []
        for k in cap.get("env_keys_with_dummy_values", []):
            env += ["--env", "%s=%s" % (k, dummy(k))]
        with tempfile.TemporaryDirectory() as t:
            out = os.path.join(t, "c.json")
            cmd = [BIN, "fetch", "--sandbox", a.sandbox, "--timeout", a.timeout,
                   "--handshake-timeout", a.handshake_timeout, src, "-o", out] + env
            if args:
                cmd += ["--"] + args
            t0 = time.time()
            r = subprocess.run(cmd, capture_output=True, text=True)
            secs = time.time() - t0
            if r.returncode != 0:
                failed += 1
                lines = [l for l in r.stderr.splitlines() if l.strip() and "note:" not in l and "WARNING" not in l]
                why = next((l for l in lines if "failed" in l), lines[-1] if lines else "")
                print("FAIL  %-60s %6.1fs  %s" % (src, secs, why[:200]), flush=True)
                continue
            if a.keep:
                os.makedirs(a.keep, exist_ok=True)
                shutil.copyfile(out, os.path.join(a.keep, f))
            got, want = fingerprint(out), fingerprint(ref)
            if got == want:
                ok += 1
                print("OK    %-60s %6.1fs  %s" % (src, secs, got), flush=True)
            else:
                bad += 1
                g = json.load(open(out))
                diff = next((x.get("name") for x, y in zip(g["tools"], d["tools"]) if x != y), None)
                print("DIFF  %-60s %6.1fs  %s != %s (%d vs %d tools; first differing: %s)" % (
                    src, secs, got, want, len(g["tools"]), len(d["tools"]), diff), flush=True)
    print("%d same fingerprint, %d different, %d failed, of %d" % (ok, bad, failed, len(files)))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Alternating runs of two or more Google Benchmark binaries, for a noisy shared machine.

    scripts/ab-bench.py FILTER ROUNDS BIN_A BIN_B [BIN_C ...]

Runs every binary ROUNDS times with --benchmark_filter=FILTER (the order reversed every other
round, --benchmark_min_time=0.2), then prints per benchmark the median of each binary's
GFLOP/s counter (bench_gemv; bw_frac where a benchmark has no GFLOP/s) and its ratio to the
first binary's. docs/PERFORMANCE.md quotes its output ("ratio" columns).
"""
import collections
import json
import statistics
import subprocess
import sys


def main() -> int:
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    filt, rounds, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    res = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in range(rounds):
        for b in bins if r % 2 == 0 else bins[::-1]:
            out = subprocess.run([b, f"--benchmark_filter={filt}", "--benchmark_min_time=0.2",
                                  "--benchmark_format=json"], capture_output=True, text=True,
                                 check=True).stdout
            for bm in json.loads(out)["benchmarks"]:
                v = bm.get("GFLOP/s", bm.get("bw_frac"))
                if v is not None:
                    res[bm["name"].replace("/real_time", "")][b].append(v)
    for name, per_bin in res.items():
        meds = [statistics.median(per_bin[b]) if per_bin[b] else float("nan") for b in bins]
        ratios = " ".join(f"{m / meds[0]:.3f}" for m in meds[1:])
        print(f"{name:48s} " + " ".join(f"{m:8.1f}" for m in meds) + f"   ratio {ratios}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

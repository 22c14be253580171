#!/usr/bin/env bash
# Checks the planner's cost model against what `moesplit bench` measures on this machine:
# measures a machine profile (`moesplit topo --measure`), asks `moesplit plan` for the predicted
# decode and prefill tokens/s of each model at each thread count, runs `moesplit bench` (pp512,
# tg128) right after, and prints predicted / measured per model and thread count. The machine's
# bandwidth drifts on shared hosts (the 2-core development VM's probe moves 59-78 GB/s within
# minutes, and a profile taken at one end against a bench at the other is off by 30%): the
# profile is measured again before each model, and -k ROUNDS repeats the whole profile / plan /
# bench round, reporting each round's ratio and their median.
#
#   scripts/validate-cost-model.sh [-t 1,2] [-r 3] [-k 1] [-o DIR] MODEL.gguf...
#
# Writes DIR/ (default validate-out): profile-<model>-k<round>.yaml, topo-<model>-k<round>.txt,
# plan-<model>-t<N>-k<round>.json, bench-<model>-k<round>.json and summary.md (the table
# printed at the end).
set -euo pipefail

threads=1,2
reps=3
rounds=1
out=validate-out
bin=${MOESPLIT:-build/apps/moesplit}
while getopts "t:r:k:o:" opt; do
  case $opt in
    t) threads=$OPTARG ;;
    r) reps=$OPTARG ;;
    k) rounds=$OPTARG ;;
    o) out=$OPTARG ;;
    *) echo "usage: $0 [-t 1,2] [-r 3] [-k 1] [-o DIR] MODEL.gguf..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [[ $# -eq 0 ]]; then
  echo "usage: $0 [-t 1,2] [-r 3] [-k 1] [-o DIR] MODEL.gguf..." >&2
  exit 2
fi
[[ -x $bin ]] || { echo "error: $bin not built (cmake --build build) or set MOESPLIT=" >&2; exit 1; }
mkdir -p "$out"

[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "error: -k $rounds: a round count (1, 2, ...)" >&2; exit 2; }
for model in "$@"; do
  [[ -f $model ]] || { echo "error: $model: no such file" >&2; exit 1; }
done
for ((k = 1; k <= rounds; k++)); do
  for model in "$@"; do
    name=$(basename "$model" .gguf)
    echo "== $name, round $k of $rounds: measuring the machine profile" >&2
    "$bin" topo --measure --save "$out/profile-$name-k$k.yaml" > "$out/topo-$name-k$k.txt"
    for t in ${threads//,/ }; do
      "$bin" plan -m "$model" --profile "$out/profile-$name-k$k.yaml" --threads "$t" \
        --format json > "$out/plan-$name-t$t-k$k.json"
    done
    echo "== $name, round $k of $rounds: moesplit bench -t $threads -p 512 -n 128 -r $reps" >&2
    "$bin" bench -m "$model" -t "$threads" -p 512 -n 128 -r "$reps" -o json \
      > "$out/bench-$name-k$k.json"
  done
done

python3 - "$out" "$rounds" "$@" <<'EOF' | tee "$out/summary.md"
import json, os, statistics, sys
out, rounds, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print("| model | threads | test | predicted t/s | measured t/s | predicted / measured |")
print("| --- | ---: | --- | ---: | ---: | ---: |")
worst = 0.0
for model in models:
    name = os.path.basename(model)[:-5] if model.endswith(".gguf") else os.path.basename(model)
    rows = {}  # (threads, test) -> [(predicted, measured, stddev)], one per round
    for k in range(1, rounds + 1):
        for row in json.load(open(f"{out}/bench-{name}-k{k}.json")):
            t = row["n_threads"]
            plan = json.load(open(f"{out}/plan-{name}-t{t}-k{k}.json"))["predicted"]
            if row["n_prompt"] > 0 and row["n_gen"] == 0:
                test, pred = f"pp{row['n_prompt']}", plan["prefill_tok_s"]
            elif row["n_gen"] > 0 and row["n_prompt"] == 0:
                test, pred = f"tg{row['n_gen']}", plan["decode_tok_s"]
            else:
                continue
            rows.setdefault((t, test), []).append((pred, row["avg_ts"], row["stddev_ts"]))
    for (t, test), runs in rows.items():
        ratios = [p / m for p, m, _ in runs]
        ratio = statistics.median(ratios)
        worst = max(worst, abs(ratio - 1))
        pred = " / ".join(f"{p:.1f}" for p, _, _ in runs)
        meas = " / ".join(f"{m:.1f} ± {s:.1f}" for _, m, s in runs)
        each = f" ({' / '.join(f'{r:.2f}' for r in ratios)})" if len(runs) > 1 else ""
        print(f"| {name} | {t} | {test} | {pred} | {meas} | {ratio:.2f}{each} |")
label = "the median of the rounds' ratios" if rounds > 1 else "one round"
print(f"\nlargest deviation: {worst * 100:.0f}% ({label}; target: within 15%)")
EOF

#!/usr/bin/env bash
# Checks the planner's cost model against what `moesplit bench` measures on this machine:
# measures a machine profile (`moesplit topo --measure`), asks `moesplit plan` for the predicted
# decode and prefill tokens/s of each model at each thread count, runs `moesplit bench` (pp512,
# tg128) right after, and prints predicted / measured per model and thread count. The machine's
# bandwidth drifts on shared hosts: the profile is measured again before each model.
#
#   scripts/validate-cost-model.sh [-t 1,2] [-r 3] [-o DIR] MODEL.gguf...
#
# Writes DIR/ (default validate-out): profile-<model>.yaml, topo-<model>.txt,
# plan-<model>-t<N>.json, bench-<model>.json and summary.md (the table printed at the end).
set -euo pipefail

threads=1,2
reps=3
out=validate-out
bin=${MOESPLIT:-build/apps/moesplit}
while getopts "t:r:o:" opt; do
  case $opt in
    t) threads=$OPTARG ;;
    r) reps=$OPTARG ;;
    o) out=$OPTARG ;;
    *) echo "usage: $0 [-t 1,2] [-r 3] [-o DIR] MODEL.gguf..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [[ $# -eq 0 ]]; then
  echo "usage: $0 [-t 1,2] [-r 3] [-o DIR] MODEL.gguf..." >&2
  exit 2
fi
[[ -x $bin ]] || { echo "error: $bin not built (cmake --build build) or set MOESPLIT=" >&2; exit 1; }
mkdir -p "$out"

for model in "$@"; do
  [[ -f $model ]] || { echo "error: $model: no such file" >&2; exit 1; }
  name=$(basename "$model" .gguf)
  echo "== $name: measuring the machine profile" >&2
  "$bin" topo --measure --save "$out/profile-$name.yaml" > "$out/topo-$name.txt"
  for t in ${threads//,/ }; do
    "$bin" plan -m "$model" --profile "$out/profile-$name.yaml" --threads "$t" --format json \
      > "$out/plan-$name-t$t.json"
  done
  echo "== $name: moesplit bench -t $threads -p 512 -n 128 -r $reps" >&2
  "$bin" bench -m "$model" -t "$threads" -p 512 -n 128 -r "$reps" -o json > "$out/bench-$name.json"
done

python3 - "$out" "$@" <<'EOF' | tee "$out/summary.md"
import json, os, sys
out, models = sys.argv[1], sys.argv[2:]
print("| model | threads | test | predicted t/s | measured t/s | predicted / measured |")
print("| --- | ---: | --- | ---: | ---: | ---: |")
worst = 0.0
for model in models:
    name = os.path.basename(model)[:-5] if model.endswith(".gguf") else os.path.basename(model)
    bench = json.load(open(f"{out}/bench-{name}.json"))
    for row in bench:
        t = row["n_threads"]
        plan = json.load(open(f"{out}/plan-{name}-t{t}.json"))["predicted"]
        if row["n_prompt"] > 0 and row["n_gen"] == 0:
            test, pred = f"pp{row['n_prompt']}", plan["prefill_tok_s"]
        elif row["n_gen"] > 0 and row["n_prompt"] == 0:
            test, pred = f"tg{row['n_gen']}", plan["decode_tok_s"]
        else:
            continue
        ratio = pred / row["avg_ts"]
        worst = max(worst, abs(ratio - 1))
        print(f"| {name} | {t} | {test} | {pred:.1f} | {row['avg_ts']:.1f} ± {row['stddev_ts']:.1f} "
              f"| {ratio:.2f} |")
print(f"\nlargest deviation: {worst * 100:.0f}% (target: within 15%)")
EOF

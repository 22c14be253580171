#!/usr/bin/env bash
# Regenerates the example machines in configs/topologies/ from hwloc synthetic descriptions
# (published specs: configs/topologies/README.md). Needs the hwloc tools (lstopo,
# hwloc-annotate; Debian/Ubuntu package `hwloc`).
#
#   scripts/make-topologies.sh [OUTPUT_DIR]     (default: configs/topologies next to this script)
#
# Per machine: lstopo turns the synthetic string into XML, then hwloc-annotate adds the package
# CPUModel and the ACPI SLIT node distances (synthetic strings cannot carry either).
#
# PU OS indexes follow Linux on these machines: the first hardware thread of every core is
# numbered 0..C-1 in core order across the machine, the second C..2C-1 (C = cores in the
# machine), so core c owns PUs {c, c + C}. hwloc's synthetic `indexes=` interleaving walks the
# OS indexes P#0, P#1, ... in order and gives each a logical slot by nested loops "step*count",
# innermost first: `pu:2(indexes=2*C:1*2)` sends P#j to slot 2*(j % C) + 1*(j / C), i.e. core
# j % C, thread j / C — so core c holds P#c and P#(c + C).
set -euo pipefail

out="${1:-$(cd "$(dirname "$0")/.." && pwd)/configs/topologies}"
mkdir -p "$out"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# make NAME "CPU model" "synthetic description" SAME_PACKAGE OTHER_PACKAGE NODES_PER_PACKAGE
#   The SLIT is 10 on the diagonal, SAME_PACKAGE between two nodes of one package (nodes
#   i and j share a package when i / NODES_PER_PACKAGE == j / NODES_PER_PACKAGE) and
#   OTHER_PACKAGE across packages. A one-node machine gets no matrix.
make() {
  local name="$1" model="$2" synthetic="$3" same="$4" other="$5" per_pkg="$6"
  local xml="$out/$name.xml"
  lstopo --no-io --input "$synthetic" --of xml "$tmp/$name.xml" 2>/dev/null
  hwloc-annotate "$tmp/$name.xml" "$tmp/$name.xml" package:all info CPUModel "$model"
  local nodes
  nodes=$(hwloc-calc --input "$tmp/$name.xml" --number-of numanode all)
  if ((nodes > 1)); then
    {
      echo "name=NUMALatency"
      echo 5  # HWLOC_DISTANCES_KIND_FROM_OS | HWLOC_DISTANCES_KIND_MEANS_LATENCY
      echo "$nodes"
      for ((i = 0; i < nodes; i++)); do echo "numanode:$i"; done
      for ((i = 0; i < nodes; i++)); do
        for ((j = 0; j < nodes; j++)); do
          if ((i == j)); then
            echo 10
          elif ((i / per_pkg == j / per_pkg)); then
            echo "$same"
          else
            echo "$other"
          fi
        done
      done
    } > "$tmp/$name.dist"
    hwloc-annotate "$tmp/$name.xml" "$tmp/$name.xml" root distances "$tmp/$name.dist"
  fi
  cp "$tmp/$name.xml" "$xml"
  echo "$xml: $synthetic"
}

epyc="AMD EPYC 9554 64-Core Processor"
xeon="Intel(R) Xeon(R) Platinum 8480+"
# EPYC 9554: 8 CCDs x 8 Zen 4 cores, 32 MiB L3 per CCD; 12 channels DDR5-4800, 12 x 64 GiB.
make epyc-9554-1s-nps1 "$epyc" \
  "pack:1 numa:1(memory=768GiB) l3:8(size=32MiB) core:8 pu:2(indexes=2*64:1*2)" 10 10 1
make epyc-9554-1s-nps4 "$epyc" \
  "pack:1 numa:4(memory=192GiB) l3:2(size=32MiB) core:8 pu:2(indexes=2*64:1*2)" 12 12 4
make epyc-9554-2s-nps1 "$epyc" \
  "pack:2 numa:1(memory=768GiB) l3:8(size=32MiB) core:8 pu:2(indexes=2*128:1*2)" 32 32 1
make epyc-9554-2s-nps4 "$epyc" \
  "pack:2 numa:4(memory=192GiB) l3:2(size=32MiB) core:8 pu:2(indexes=2*128:1*2)" 12 32 4
# Xeon Platinum 8480+: 56 Golden Cove cores, 105 MiB L3 per socket (1.875 MiB per core), SNC4 =
# 4 nodes x 14 cores; each node gets its share 14 x 1.875 MiB = 26.25 MiB = 26880 KiB.
# 8 channels DDR5-4800 per socket, 8 x 64 GiB = 512 GiB per socket, 128 GiB per SNC node.
make xeon-8480-2s-snc4 "$xeon" \
  "pack:2 numa:4(memory=128GiB) l3:1(size=26880KiB) core:14 pu:2(indexes=2*112:1*2)" 12 21 4

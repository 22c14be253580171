#!/usr/bin/env python3
"""Core cycles per AVX-512 instruction and per IQ2_XXS sub-block, on this machine's core.

    scripts/isa-mix.py [--rounds N] [--cc CC]

Generates a C file of inline-assembly loops (in a temporary folder), compiles it with CC (default
cc) and runs it; nothing of the repository is built or read. Two tables, under a header with
the clock:

  throughput  one instruction, or a pair, repeated with its destination rotating over 28 zmm
              registers, so that no result is waited for: the issue rate alone (cycles per op).
  iq2_xxs     a model of gemv_iq_r16_avx512vbmi.cc's IQ2_XXS decode loop: two 16-row groups, one
              sub-block each (2 x 512 weights), the instruction counts and dependencies its
              compiled loop has (objdump of Gemm<kIQ2XXS>): per group 4 vpermi2b (the 256-entry
              grid lookups), vpmovb2m + 2 masked moves (their blend by bit 7), 3 shifts and 4
              vpternlogq (codes beside signs), 8 vpermb (levels) each feeding one vpdpbusd of one
              accumulator chain, and per sub-block vpmulld + vpaddd (the scale); the loop's
              chains (lookup -> blend -> select -> vpermb -> vpdpbusd), the shifts left off them
              and the index / sign loads left out (L1 hits in the kernel). Rows drop one
              kind of op at a time, so the difference is what that kind costs in the loop; one
              row issues the same ops with no dependencies (the issue rate's bound).
              Cycles per sub-block-group (16 rows x 32 weights); compare bench_gemv's hot
              1408 x 2048 (L2-resident): cycles = clock x 1024 / GFLOP/s. The last two rows
              replace vpmovb2m + the masked moves by two bit selects under a byte mask built
              from bit 7 another way (alternatives measured, not used). The chain rows cut or
              split the loop's two chains (iq2_product): how much of the gap between the mix
              and its no-dependency bound each chain holds, and what the rewrites that shorten
              the accumulator chain would cost.
  (header)    the core clock while the tables ran, from a chain of dependent scalar adds
              (1 cycle each): TSC ticks convert to core cycles by it.

Each figure is the median of --rounds runs (default 5). The machine needs AVX-512 BW / VBMI /
VNNI and GFNI (exit 2 without them). docs/PERFORMANCE.md quotes its output ("IQ2_XXS's loop is
at its instruction mix's bound ...").
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ITERS = 2_000_000
# Destinations rotate over every zmm but the two constant sources (16, 17).
ROTATE = [r for r in range(32) if r not in (16, 17)]

# One instruction; {d} is its destination (rotating), {k} a mask register.
OPS = {
    "vpermb": "vpermb %%zmm16, %%zmm17, %%zmm{d}",
    "vpermi2b": "vpermi2b %%zmm16, %%zmm17, %%zmm{d}",
    "vpshufb": "vpshufb %%zmm16, %%zmm17, %%zmm{d}",
    "vgf2p8affineqb": "vgf2p8affineqb $0, %%zmm16, %%zmm17, %%zmm{d}",
    "vpmultishiftqb": "vpmultishiftqb %%zmm16, %%zmm17, %%zmm{d}",
    "vpdpbusd": "vpdpbusd %%zmm16, %%zmm17, %%zmm{d}",
    "vpmulld": "vpmulld %%zmm16, %%zmm17, %%zmm{d}",
    "vpternlogq": "vpternlogq $0xE4, %%zmm16, %%zmm17, %%zmm{d}",
    "vpandq": "vpandq %%zmm16, %%zmm17, %%zmm{d}",
    "vpsrlw": "vpsrlw $2, %%zmm16, %%zmm{d}",
    "vpmovb2m": "vpmovb2m %%zmm16, %%k{k}",
    "vmovdqu8{k}": "vmovdqu8 %%zmm16, %%zmm{d}%{{%%k1%}}",
    "vpbroadcastd m32": "vpbroadcastd (%0), %%zmm{d}",
}
THROUGHPUT = [[op] for op in OPS] + [
    ["vpermb", "vpdpbusd"], ["vpermb", "vpermi2b"], ["vpermb", "vpternlogq"],
    ["vpermb", "vpsrlw"], ["vpermb", "vpmovb2m"], ["vpermb", "vmovdqu8{k}"],
    ["vpermb", "vgf2p8affineqb"], ["vpdpbusd", "vpternlogq"], ["vpdpbusd", "vpsrlw"],
]


def throughput_asm(names):
    seq = [OPS[n] for n in names]
    copies = max(1, 56 // len(seq))
    body = []
    for c in range(copies):
        for i, ins in enumerate(seq):
            n = c * len(seq) + i
            body.append(ins.format(d=ROTATE[n % len(ROTATE)], k=2 + n % 5))
    return body, copies


def iq2_group(g, parts):
    """The per-group work of one sub-block ahead of its levels (registers 4 + 6 g ..)."""
    b, base = [], 4 + 6 * g
    if "lookup" in parts:  # vpermt2b form: a table copy (a move), then the lookup
        b += [f"vmovdqa64 %%zmm17, %%zmm{base + i}" for i in range(4)]
        b += [f"vpermi2b %%zmm16, %%zmm17, %%zmm{base + i}" for i in range(4)]
    if "movb2m" in parts:
        b.append(f"vpmovb2m %%zmm{base}, %%k{2 + g}")
    if "blend" in parts:
        b += [f"vmovdqu8 %%zmm{base}, %%zmm{base + 1}%{{%%k{2 + g}%}}",
              f"vmovdqu8 %%zmm{base + 2}, %%zmm{base + 3}%{{%%k{2 + g}%}}"]
    if "shiftmask" in parts:  # bit 7 spread to a byte mask by word shifts, then bit selects
        b += [f"vpsllw $8, %%zmm{base}, %%zmm{base + 4}",
              f"vpsraw $15, %%zmm{base + 4}, %%zmm{base + 4}",
              f"vpsraw $15, %%zmm{base}, %%zmm{base + 5}",
              f"vpternlogq $0xE4, %%zmm{base + 4}, %%zmm17, %%zmm{base + 5}"]
    if "gf2mask" in parts:  # bit 7 spread to a byte mask by one vgf2p8affineqb
        b.append(f"vgf2p8affineqb $0, %%zmm16, %%zmm{base}, %%zmm{base + 5}")
    if "shiftmask" in parts or "gf2mask" in parts:
        b += [f"vpternlogq $0xE4, %%zmm{base}, %%zmm{base + 5}, %%zmm{base + 1}",
              f"vpternlogq $0xE4, %%zmm{base + 2}, %%zmm{base + 5}, %%zmm{base + 3}"]
    if "shift" in parts:
        b += [f"vpsrlw $2, %%zmm16, %%zmm{base + 4}", f"vpsrlw $2, %%zmm16, %%zmm{base + 5}",
              f"vpsrlw $2, %%zmm{base + 5}, %%zmm{base + 5}"]
    if "ternlog" in parts:
        b += [f"vpternlogq $0xE4, %%zmm16, %%zmm17, %%zmm{base + i}" for i in range(4)]
    return b


def iq2_product(g, m, act, parts):
    """Value m's level (vpermb) and product (vpdpbusd) for group g; the variants cut or split
    the chains: acc2 (two accumulators, even / odd values), noacc (each product into its own
    register: no accumulator chain), nodecdep (the level indexed by a constant: no lookup ->
    select -> level chain), chainN (products from a zeroed register, N per chain, each chain
    added to the accumulator by vpaddd)."""
    src = 16 if "nodecdep" in parts else 4 + 6 * g + m // 2
    chain = next((int(q[5:]) for q in parts if q.startswith("chain")), 0)
    if chain:
        u, t = 24 + (m * 2 + g) % 8, 20 + 2 * g + (m // chain) % 2
        b = [f"vpermb %%zmm{src}, %%zmm17, %%zmm{u}"]
        b += [f"vpxord %%zmm{t}, %%zmm{t}, %%zmm{t}"] if m % chain == 0 else []
        b.append(f"vpdpbusd {act}, %%zmm{u}, %%zmm{t}")
        return b + ([f"vpaddd %%zmm{t}, %%zmm{g}, %%zmm{g}"] if m % chain == chain - 1 else [])
    variant = any(q in parts for q in ("acc2", "noacc", "nodecdep"))
    u = 20 + (m * 2 + g) % (10 if variant else 12)  # acc2 takes zmm30 / zmm31
    acc = u if "noacc" in parts else (30 + g if "acc2" in parts and m % 2 else g)
    return [f"vpermb %%zmm{src}, %%zmm17, %%zmm{u}", f"vpdpbusd {act}, %%zmm{u}, %%zmm{acc}"]


def iq2_asm(parts):
    groups = 2
    b = [f"vmovdqa64 %%zmm16, %%zmm{g}" for g in range(groups)]  # P = the offset term
    if "acc2" in parts:
        b += [f"vmovdqa64 %%zmm16, %%zmm{30 + g}" for g in range(groups)]
    for g in range(groups):
        b += iq2_group(g, parts)
    for m in range(8):
        act = f"%%zmm{18 + m % 2}"
        if "broadcast" in parts:
            b.append(f"vpbroadcastd (%0), {act}")
        for g in range(groups):
            b += iq2_product(g, m, act, parts)
    for g in range(groups):
        if "acc2" in parts:
            b.append(f"vpaddd %%zmm{30 + g}, %%zmm{g}, %%zmm{g}")
        b += [f"vpmulld %%zmm16, %%zmm{g}, %%zmm{g}", f"vpaddd %%zmm{g}, %%zmm3, %%zmm3"]
    return b * 4, 4 * groups  # 4 sub-blocks per loop pass


ALL = ["lookup", "movb2m", "blend", "shift", "ternlog", "broadcast"]
IQ2_ROWS = [("the loop's mix", ALL)] + [
    (f"without {p}", [q for q in ALL if q != p]) for p in ALL] + [
    ("levels and products only", ["broadcast"]),
    ("two accumulators (even / odd)", ALL + ["acc2"]),
    ("no accumulator chain", ALL + ["noacc"]),
    ("no lookup-to-level chain", ALL + ["nodecdep"]),
    ("neither chain", ALL + ["noacc", "nodecdep"]),
    ("products by 1, then vpaddd", ALL + ["chain1"]),
    ("products by 2, then vpaddd", ALL + ["chain2"]),
    ("products by 4, then vpaddd", ALL + ["chain4"]),
    ("blend by a shift-built byte mask", ["lookup", "shiftmask", "shift", "ternlog", "broadcast"]),
    ("blend by a vgf2p8affineqb byte mask", ["lookup", "gf2mask", "shift", "ternlog", "broadcast"])]


def c_loop(name, body, per):
    text = "\\n\\t".join(body)
    clobbers = ",".join(f'"xmm{r}"' for r in ROTATE) + ',"k1","k2","k3","k4","k5","k6"'
    return (f'  {{ uint64_t s = __rdtsc(); for (long i = 0; i < {ITERS}; ++i) {{\n'
            f'    __asm__ volatile("{text}" :: "r"(buf) : {clobbers}); }}\n'
            f'    printf("%s\\t%.4f\\n", "{name}",\n'
            f'           (double)(__rdtsc() - s) / {ITERS} / {per}); }}\n')


def program():
    src = ['#include <stdint.h>\n#include <stdio.h>\n#include <x86intrin.h>\n',
           'static int buf[64] __attribute__((aligned(64)));\nint main(void) {\n',
           '  __asm__ volatile("vpxord %%zmm16, %%zmm16, %%zmm16\\n\\t'
           'vpxord %%zmm17, %%zmm17, %%zmm17\\n\\tkxnorq %%k1, %%k1, %%k1" ::: '
           '"xmm16", "xmm17", "k1");\n']
    # Clock: 64 dependent adds per pass, 1 cycle each.
    clock = c_loop("clock", ["addq $1, %%rax"] * 64, 64)
    src.append(clock.replace('"r"(buf) :', '"r"(buf) : "rax",'))
    for names in THROUGHPUT:
        body, copies = throughput_asm(names)
        src.append(c_loop("tp " + " + ".join(names), body, copies))
    # The same ops per sub-block-group with no dependencies: the issue rate's bound.
    flat = (["vpermb", "vpdpbusd"] * 8 + ["vpermi2b"] * 4 + ["vpsrlw"] * 3 + ["vpternlogq"] * 4
            + ["vmovdqu8{k}"] * 2 + ["vpmovb2m"] + ["vpbroadcastd m32"] * 4)
    body, copies = throughput_asm(flat)
    src.append(c_loop("iq2 the same ops, no dependencies", body, copies))
    for label, parts in IQ2_ROWS:
        body, per = iq2_asm(parts)
        src.append(c_loop("iq2 " + label, body, per))
    src.append("  return 0;\n}\n")
    return "".join(src)


def cpu_ok():
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return all(f in flags for f in ("avx512bw", "avx512vbmi", "avx512_vnni", "gfni"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error(f"--rounds {args.rounds}: needs at least 1 round")
    if shutil.which(args.cc) is None:
        print(f"isa-mix: cannot run the compiler {args.cc!r}: not found (pass --cc)",
              file=sys.stderr)
        return 1
    if not cpu_ok():
        print("isa-mix: this CPU lacks AVX-512 BW / VBMI / VNNI or GFNI (see /proc/cpuinfo); "
              "the loops would fault", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        c, exe = os.path.join(tmp, "mix.c"), os.path.join(tmp, "mix")
        open(c, "w").write(program())
        flags = ["-O1", "-mavx512f", "-mavx512bw", "-mavx512vbmi", "-mavx512vnni", "-mgfni"]
        cc = subprocess.run([args.cc, *flags, c, "-o", exe], capture_output=True, text=True)
        if cc.returncode != 0:
            print(f"isa-mix: {args.cc} failed:\n{cc.stderr}", file=sys.stderr)
            return 1
        runs = {}
        order = []
        for _ in range(args.rounds):
            out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                name, ticks = line.split("\t")
                if name not in runs:
                    order.append(name)
                runs.setdefault(name, []).append(float(ticks))
    # Per round, ticks per cycle from that round's clock line, then medians.
    tpc = runs["clock"]
    cyc = {n: statistics.median(v / t for v, t in zip(runs[n], tpc)) for n in order}
    tsc_ghz = tsc_rate()
    clock = f", core clock {tsc_ghz / statistics.median(tpc):.2f} GHz" if tsc_ghz else ""
    print(f"# isa-mix: medians of {args.rounds} rounds{clock} (TSC ticks per core cycle "
          f"{statistics.median(tpc):.3f})")
    print("# throughput: cycles per op (pairs: per pair), destinations rotating over 28 zmm")
    for n in order:
        if n.startswith("tp "):
            print(f"{n[3:]:34s} {cyc[n]:7.3f}")
    print("# iq2_xxs model: cycles per sub-block-group (16 rows x 32 weights), two groups")
    for n in order:
        if n.startswith("iq2 "):
            print(f"{n[4:]:34s} {cyc[n]:7.2f}")
    return 0


def tsc_rate():
    """The TSC frequency in GHz from the kernel's log ("tsc: Detected 2096.030 MHz"), or None."""
    try:
        out = subprocess.run(["dmesg"], capture_output=True, text=True).stdout
    except OSError:
        return None
    pattern = r"tsc: (?:Refined TSC clocksource calibration|Detected):? ([0-9.]+) MHz"
    found = re.findall(pattern, out)
    return float(found[-1]) / 1000.0 if found else None


if __name__ == "__main__":
    sys.exit(main())

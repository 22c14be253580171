#!/usr/bin/env python3
"""Copy a GGUF, replacing routed gate / up experts by random IQ2_XXS / IQ1_S bytes and the shared
expert's gate / up by IQ1_M (a finite f16 scale per block; every code pattern decodes to grid
values). A smoke-test model for the lattice-type kernels until make-model can quantize to them:

  moesplit make-model --preset ds-tiny --quant Q8_0 -o q8.gguf
  PYTHONPATH=<llama.cpp>/gguf-py python3 scripts/iq_experts_gguf.py q8.gguf iq.gguf
  for isa in scalar avx2 avx512 avx512vnni; do
    MOESPLIT_MAX_ISA=$isa moesplit run -m iq.gguf -p "Hello" -n 24 --temp 0 --no-display-prompt | md5sum
  done

Only tensors whose rows are a multiple of 256 values can take these types (ds-tiny's down
projections, 128 wide, keep their type).

With a third argument, one of IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, every routed expert
tensor (gate, up, down, where its rows are a multiple of 256) takes that type instead, with
random codes: a timing model for llama.cpp's IQ2_XS / IQ2_M / IQ3_XXS / IQ3_M mixes and the
UD-IQ1 shapes at full size (e.g. from a ds-v2-lite file), whose real quantization takes
llama-quantize (or make-model's IQ1 quantizers) over an hour on 2 cores:

  PYTHONPATH=... python3 scripts/iq_experts_gguf.py ds-v2-lite-iq4xs.gguf v2l-iq3s.gguf IQ3_S
"""
import sys

import numpy as np
from gguf import GGMLQuantizationType as Q, GGUFReader, GGUFValueType, GGUFWriter

# bytes per 256 values of the types a third argument may name (each opens its block with d but
# IQ1_M, whose d random_blocks spreads over its scale words)
ROUTED_BYTES = {'IQ2_XS': 74, 'IQ2_S': 82, 'IQ3_XXS': 98, 'IQ3_S': 110, 'IQ1_S': 50, 'IQ1_M': 56}

# tensor name part -> (type, bytes per 256 values)
TYPES = {'ffn_gate_exps': (Q.IQ2_XXS, 66), 'ffn_up_exps': (Q.IQ1_S, 50),
         'ffn_gate_shexp': (Q.IQ1_M, 56), 'ffn_up_shexp': (Q.IQ1_M, 56)}


def random_blocks(rng, qt, bb, nblk):
    b = rng.integers(0, 256, size=(nblk, bb), dtype=np.uint8)
    d = np.float16(rng.uniform(0.5, 2.0, size=nblk) * 0.02 / 8).view(np.uint16)
    if qt == Q.IQ1_M:  # nibble k of d in the top nibble of scale word k (bytes 48..55)
        sc = b[:, 48:56].copy().view(np.uint16)
        for k in range(4):
            sc[:, k] = (sc[:, k] & 0x0FFF) | (((d >> (4 * k)) & 0xF) << 12)
        b[:, 48:56] = sc.view(np.uint8)
    else:  # IQ2_XXS / IQ1_S: d opens the block
        b[:, 0:2] = d.reshape(-1, 1).view(np.uint8).reshape(-1, 2)
    return b


def main(src, dst, routed=None):
    types = TYPES
    if routed is not None:
        if routed not in ROUTED_BYTES:
            sys.exit(f"iq_experts_gguf: type {routed!r} is not one of {', '.join(ROUTED_BYTES)}")
        types = {k: (Q[routed], ROUTED_BYTES[routed])
                 for k in ('ffn_gate_exps', 'ffn_up_exps', 'ffn_down_exps')}
    r = GGUFReader(src)
    w = GGUFWriter(dst, r.fields['general.architecture'].contents())
    for f in r.fields.values():
        if f.name.startswith('GGUF.') or f.name == 'general.architecture':
            continue
        if f.types[0] == GGUFValueType.ARRAY:
            w.add_key_value(f.name, f.contents(), f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(f.name, f.contents(), f.types[0])
    rng = np.random.default_rng(5)
    for t in r.tensors:
        kind = next((k for k in types if k in t.name), None)
        shape = [int(x) for x in t.shape]  # ne0, ne1, ...
        if kind is None or shape[0] % 256 != 0:
            if t.tensor_type in (Q.F32, Q.F16):
                w.add_tensor(t.name, np.asarray(t.data))
            else:
                w.add_tensor(t.name, np.asarray(t.data), raw_shape=list(t.data.shape),
                             raw_dtype=t.tensor_type)
            continue
        qt, bb = types[kind]
        byte_shape = list(reversed(shape))
        byte_shape[-1] = byte_shape[-1] // 256 * bb
        b = random_blocks(rng, qt, bb, int(np.prod(shape)) // 256)
        w.add_tensor(t.name, b.reshape(byte_shape), raw_shape=byte_shape, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == '__main__':
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: iq_experts_gguf.py SRC.gguf DST.gguf "
                 "[IQ2_XS|IQ2_S|IQ3_XXS|IQ3_S|IQ1_S|IQ1_M]")
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else None)

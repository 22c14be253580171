#!/usr/bin/python3
"""Per position: Pearson correlation of two float32 [n x vocab] logit files, and whether the
argmax agrees where the reference's top-1 leads its top-2 by more than 1% of the row's range
(shared/testdata's acceptance rule; rows with a smaller gap are near-ties and not counted).

    compare_logits.py OURS.f32 REF.f32 VOCAB
"""
import sys

import numpy as np


def main():
    ours = np.fromfile(sys.argv[1], dtype=np.float32)
    ref = np.fromfile(sys.argv[2], dtype=np.float32)
    vocab = int(sys.argv[3])
    ours = ours.reshape(-1, vocab)
    ref = ref.reshape(-1, vocab)
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    pearsons, agree, decided = [], 0, 0
    for o, r in zip(ours.astype(np.float64), ref.astype(np.float64)):
        pearsons.append(np.corrcoef(o, r)[0, 1])
        top = np.argsort(r)[::-1]
        if r[top[0]] - r[top[1]] > 0.01 * (r.max() - r.min()):
            decided += 1
            agree += int(np.argmax(o) == top[0])
    p = np.array(pearsons)
    print(f"positions {len(p)}: Pearson min {p.min():.5f} median {np.median(p):.5f} "
          f"max {p.max():.5f}; >= 0.999 at {int((p >= 0.999).sum())}/{len(p)}; "
          f"argmax agrees at {agree}/{decided} decided positions "
          f"({len(p) - decided} near-ties)")


if __name__ == "__main__":
    main()

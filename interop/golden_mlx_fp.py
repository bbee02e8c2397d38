"""Golden vectors for MLX's microscaling modes (mxfp4, mxfp8, nvfp4), made by
real MLX on its CPU stream. `python interop/golden_mlx_fp.py OUT` writes them;
quant's Go tests read the committed copy, and test_mlx_quant.py checks the copy
is still what the pinned MLX produces."""
import sys

import mlx.core as mx
import numpy as np

MODES = ("mxfp4", "mxfp8", "nvfp4")
MAXV = {"mxfp4": 6.0, "mxfp8": 448.0, "nvfp4": 6.0}


def inputs(mode):
    """Rows that exercise the corner cases: every scale decade, halves between
    codes (ties), all-zero and -0 groups, tiny groups whose scale underflows,
    group maxima just above, at and below a power of two times the largest
    code (where the scale's rounding decides), outliers."""
    rng = np.random.default_rng(20261201)
    rows = [rng.standard_normal(256) * s for s in (1e-4, 0.02, 0.5, 3.0, 40.0)]
    rows += [np.round(rng.standard_normal(256) * 8 * k) / (8 * k) for k in (1, 4, 32)]  # ties after scaling
    rows.append(np.zeros(256))
    rows.append(np.full(256, -0.0))
    rows.append(rng.standard_normal(256) * 1e-30)
    rows.append(np.tile(np.arange(-8, 8, 0.25), 4))  # every half step of fp4 at scale 1
    for d in (1 + 2 ** -7, 1.0, 1 - 2 ** -8, 1 + 2 ** -9):
        r = rng.standard_normal(256) * 0.1
        r[::16] = MAXV[mode] * 2.0 ** rng.integers(-12, 4, 16) * d  # one maximum per group of 16
        rows.append(r)
    out = rng.standard_normal(256) * 0.01
    out[::37] = 40.0
    rows.append(out)
    return np.stack(rows).astype(np.float32)


def golden():
    out = {}
    for mode in MODES:
        w = mx.array(inputs(mode)).astype(mx.bfloat16)
        q, s = mx.quantize(w, mode=mode, stream=mx.cpu)
        out[f"{mode}.input"], out[f"{mode}.weight"], out[f"{mode}.scales"] = w, q, s
        out[f"{mode}.dequant"] = mx.dequantize(q, s, mode=mode, stream=mx.cpu)  # what MLX computes with
    mx.eval(list(out.values()))
    return out


if __name__ == "__main__":
    mx.save_safetensors(sys.argv[1], golden(), metadata={"mlx_version": mx.__version__})

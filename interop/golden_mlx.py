"""Golden vectors for MLX affine quantization, made by real MLX on its CPU
stream. `python interop/golden_mlx.py OUT` writes them; the Go tests in quant/
read the committed copy, and test_mlx_quant.py checks the copy is still what
the pinned MLX produces."""
import sys

import mlx.core as mx
import numpy as np

BITS = (1, 2, 3, 4, 5, 6, 8)  # 1: MLX 0.32.4 quantizes it too, by a rule of its own
GROUPS = (32, 64, 128)
DTYPES = {"bf16": mx.bfloat16, "f16": mx.float16, "f32": mx.float32}


def inputs():
    """Rows that exercise the corner cases: mixed signs, all-negative groups,
    all-zero and constant groups, exact .5 ties, tiny values, outliers."""
    rng = np.random.default_rng(20261129)
    rows = [rng.standard_normal(256) * s for s in (0.02, 0.5, 3.0)]
    rows.append(-np.abs(rng.standard_normal(256)) * 0.1)  # all negative
    rows.append(np.abs(rng.standard_normal(256)) * 0.1)  # all positive
    rows.append(np.zeros(256))
    rows.append(np.full(256, 0.375))
    rows.append(np.full(256, -1.25))
    ties = np.tile(np.arange(16, dtype=np.float64), 16) * 0.5 - 3.75  # lands on .5 steps
    rows.append(ties)
    rows.append(rng.standard_normal(256) * 1e-8)  # below eps
    out = rng.standard_normal(256) * 0.01
    out[::37] = 40.0
    rows.append(out)
    rows.append(np.round(rng.standard_normal(256) * 8) / 8)  # coarse grid, many ties
    return np.stack(rows).astype(np.float32)


def golden():
    x = inputs()
    out = {}
    for dname, dt in DTYPES.items():
        w = mx.array(x).astype(dt)
        out[f"{dname}.input"] = w
        for bits in BITS:
            for gs in GROUPS:
                q, s, b = mx.quantize(w, group_size=gs, bits=bits, stream=mx.cpu)
                out[f"{dname}.b{bits}.g{gs}.weight"] = q
                out[f"{dname}.b{bits}.g{gs}.scales"] = s
                out[f"{dname}.b{bits}.g{gs}.biases"] = b
                # What MLX computes with: the head-health checks decode as this.
                out[f"{dname}.b{bits}.g{gs}.dequant"] = mx.dequantize(q, s, b, group_size=gs, bits=bits, stream=mx.cpu)
    mx.eval(list(out.values()))
    return out


if __name__ == "__main__":
    mx.save_safetensors(sys.argv[1], golden(), metadata={"mlx_version": mx.__version__})

"""Golden vectors for NNCF integer weight compression, made by real NNCF
(nncf.compress_weights on a small OpenVINO model with f16 weights).
`python interop/golden_nncf.py OUT` writes them; quant/nncf_test.go reads
the committed copy, and test_openvino.py checks the copy is still current."""
import sys

import nncf
import numpy as np
import openvino as ov
from openvino import opset13 as ops
from safetensors.numpy import save_file

MODES = [("INT8_ASYM", -1), ("INT8_SYM", -1), ("INT4_ASYM", 64), ("INT4_ASYM", 128), ("INT4_SYM", 64), ("INT4_SYM", 128)]


def weight(rng, rows, cols):
    """Rows that exercise the corner cases: zeros, one-signed rows, .5 ties, tiny values."""
    w = rng.standard_normal((rows, cols)).astype(np.float32) * 0.05
    for r in range(rows):
        k = r % 8
        if k == 1:
            w[r] = 0
        elif k == 2:
            w[r] = np.abs(w[r])
        elif k == 3:
            w[r] = -np.abs(w[r])
        elif k == 4:
            w[r] = rng.integers(-8, 8, cols) * 2.0 ** -6
        elif k == 5:
            w[r] *= 1e-4
        elif k == 6:
            w[r, : cols // 2] = 0
    return w.astype(np.float16)


def unpack(c):
    et, shape = c.get_element_type(), list(c.get_output_shape(0))
    raw = np.asarray(c.get_data())
    if et in (ov.Type.u4, ov.Type.i4):
        b = raw.view(np.uint8).reshape(-1)
        v = np.empty(b.size * 2, np.uint8)
        v[0::2], v[1::2] = b & 0xF, b >> 4
        return v[: int(np.prod(shape))].reshape(shape)  # raw nibbles (i4 in two's complement bits)
    return raw.reshape(shape).view(np.uint8) if et in (ov.Type.i8, ov.Type.u8) else raw.reshape(shape)


def golden():
    w = weight(np.random.default_rng(20261129), 32, 256)
    out = {"input": w}
    for mode, gs in MODES:
        x = ops.parameter([1, 256], ov.Type.f32, name="x")
        c = ops.convert(ops.constant(w, dtype=ov.Type.f16, name="w"), ov.Type.f32)
        model = ov.Model([ops.result(ops.matmul(x, c, False, True))], [x], "m")
        kw = {"mode": getattr(nncf.CompressWeightsMode, mode)}
        if mode.startswith("INT4"):
            kw.update(group_size=gs, ratio=1.0, all_layers=True)
        cm = nncf.compress_weights(model, **kw)
        consts = {op.get_friendly_name(): op for op in cm.get_ops() if op.get_type_name() == "Constant"}
        key = f"{mode}.g{gs}"
        out[key + ".q"] = unpack(consts["w"]).reshape(32, -1)
        out[key + ".scale"] = np.asarray(consts["w/scale"].get_data()).reshape(32, -1)
        if "w/zero_point" in consts:
            out[key + ".zp"] = unpack(consts["w/zero_point"]).reshape(32, -1)
    return {k: np.ascontiguousarray(v) for k, v in out.items()}


if __name__ == "__main__":
    save_file(golden(), sys.argv[1], metadata={"nncf_version": nncf.__version__})

"""Bench-only dense all-experts lowering of our MTP layer IR.

    python bench/dense_moe.py IN_FOLDER OUT_FOLDER

Reads IN_FOLDER/openvino_mtp_model.xml (our export, f16) and writes
OUT_FOLDER/openvino_mtp_model.xml/.bin where each MoE computes all E experts
for every token: the expert input is broadcast to [E, T, H] (instead of the
Tile + Reshape our lowering writes, the pattern the CPU plugin fuses into a
GatherMatmul that runs only the top-k), then the same batched MatMuls over the
[E, I, H] / [E, H, I] stacks and the same dense routing weights (zeros outside
the top-k) summed over the expert axis. Same constants, same result; only the
fusion is defeated, so the compiled model reads every expert each step.
The lm_head IR is not touched (draft_step.py pairs this with ours).
"""
import sys
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset13 as ops


def densify(model):
    n = 0
    for op in model.get_ordered_ops():
        if op.get_type_name() != "Reshape" or not op.get_friendly_name().endswith("experts/tile_reshape"):
            continue
        tile = op.input(0).get_source_output().get_node()
        assert tile.get_type_name() == "Tile", tile
        x2 = tile.input(0).get_source_output()  # [T, H]
        experts = op.get_output_partial_shape(0)[0].get_length()
        shape = ops.concat([ops.constant(np.array([experts], np.int64)), ops.shape_of(x2, "i64")], 0)
        dense = ops.broadcast(ops.unsqueeze(x2, ops.constant(np.int64(0))), shape)
        dense.set_friendly_name(op.get_friendly_name().replace("tile_reshape", "dense_broadcast"))
        op.output(0).replace(dense.output(0))
        n += 1
    assert n, "no experts/tile_reshape in the model"
    return n


def main():
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    dst.mkdir(parents=True, exist_ok=True)
    model = ov.Core().read_model(src / "openvino_mtp_model.xml")
    n = densify(model)
    model.validate_nodes_and_infer_types()
    ov.save_model(model, dst / "openvino_mtp_model.xml", compress_to_fp16=False)
    print(f"{n} MoE block(s) made dense -> {dst}")


if __name__ == "__main__":
    main()

"""The fixtures are faithful: the reference safetensors library agrees with
`mtpconv inspect`, and stock mlx-lm loads fixtures a and c as raw Hugging Face
checkpoints through its own sanitize and runs them."""
import hashlib
import json

import mlx.core as mx
import numpy as np
import pytest
import safetensors
from mlx.utils import tree_flatten
from mlx_lm.utils import load_model

from conftest import run_json


def reference_inventory(folder):
    """Every tensor of the checkpoint as the safetensors library parses it."""
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    out = {}
    for shard in sorted(set(index["weight_map"].values())):
        for name, t in safetensors.deserialize((folder / shard).read_bytes()):
            assert name not in out, f"{name} twice"
            out[name] = (t["dtype"].upper(), list(t["shape"]), hashlib.sha256(bytes(t["data"])).hexdigest(), shard)
    assert set(out) == set(index["weight_map"]), "index and shards disagree"
    return out


@pytest.mark.parametrize("key", ["a", "b", "c"])
def test_inspect_agrees_with_safetensors(key, mtpconv, fixture_dirs):
    folder = fixture_dirs[key]
    ref = reference_inventory(folder)
    rep = run_json(mtpconv, "inspect", "--json", "--hash", folder)
    ours = {t["name"]: (t["dtype"], t["shape"], t["sha256"], t["shard"]) for t in rep["tensors"]}
    assert ours.keys() == ref.keys()
    mismatched = [n for n in ref if ref[n] != ours[n]]
    assert not mismatched, mismatched[:5]
    assert rep["problems"] == []


EXPECTED = {
    # fixture: (mtp tensors, expert layout, experts, F32 tensors)
    "a": (19, "fused", 256, 0),
    "b": (785, "per_expert", 256, 6),
    "c": (1553, "per_expert", 512, 0),
}


@pytest.mark.parametrize("key", ["a", "b", "c"])
def test_inspect_counts(key, mtpconv, fixture_dirs):
    rep = run_json(mtpconv, "inspect", "--json", fixture_dirs[key])
    n, layout, experts, f32 = EXPECTED[key]
    assert rep["mtp"]["tensors"] == n
    assert [(e["layout"], e["count"]) for e in rep["mtp"]["experts"]] == [(layout, experts)]
    assert rep["dtypes"].get("F32", 0) == f32
    ref_mtp = [k for k in reference_inventory(fixture_dirs[key]) if k.startswith("mtp.")]
    assert len(ref_mtp) == n


def raw_tensor(folder, name):
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    for n, t in safetensors.deserialize((folder / index["weight_map"][name]).read_bytes()):
        if n == name:
            assert t["dtype"].upper() == "BF16"
            bits = np.frombuffer(bytes(t["data"]), dtype=np.uint16).astype(np.uint32) << 16
            return bits.view(np.float32).reshape(t["shape"])
    raise KeyError(name)


@pytest.mark.parametrize("key,final_norm", [("a", "model.language_model.norm.weight"), ("c", "model.norm.weight")])
def test_stock_mlx_lm_loads_raw_fixture(key, final_norm, fixture_dirs):
    folder = fixture_dirs[key]
    model, config = load_model(folder, strict=True)
    params = dict(tree_flatten(model.parameters()))
    # mlx-lm's sanitize saw a raw checkpoint: it shifted the zero-centred final norm by +1.
    loaded_norm = np.array(params[[k for k in params if k.endswith("model.norm.weight")][0]].astype(mx.float32))
    np.testing.assert_allclose(loaded_norm, raw_tensor(folder, final_norm) + 1.0, atol=1e-2)
    # and it stacked or split every layer's experts into switch_mlp.
    n_experts = config.get("text_config", config)["num_experts"]
    gates = [k for k in params if k.endswith("switch_mlp.gate_proj.weight")]
    assert len(gates) == 4 and all(params[k].shape[0] == n_experts for k in gates)
    model.set_dtype(mx.float32)  # MLX's CPU gather-matmul runs in float32 only
    logits = model(mx.array([[1, 2, 3, 4, 5, 6, 7]]))
    mx.eval(logits)
    assert logits.shape == (1, 7, 512)
    assert bool(mx.all(mx.isfinite(logits)).item())
    assert float(mx.abs(logits).max()) > 0

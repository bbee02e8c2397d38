"""MLX's 1-bit affine (--head-precision int1, mlx-vlm's --q-bits 1) for the
drafters mlx-vlm 0.7.10 writes with its splitter:

- mlx-vlm loads 1-bit Linear and Embedding modules only (its
  quantization/one_bit.py replace_one_bit_modules raises "1-bit inference
  does not yet support" for any other quantized module): a drafter with
  stacked experts (SwitchLinear) or MLA's stacked heads (MultiLinear) that
  its own splitter writes at 1 bit does not load, and mtpconv refuses int1
  for it, naming why;
- a drafter of Linear modules only (the dense Qwen3.5/3.6 one here; Inkling
  and the Gemma-4 assistant in their own files) is the splitter's, byte for
  byte, and loads as OneBitLinear.
"""
import json
import subprocess

import mlx.core as mx
import pytest
from mlx_vlm.speculative.drafters import load_drafter
from mlx_vlm.split_mtp import split_mtp

from conftest import export
from nextn_gguf import make_fixtures
from test_glm import assert_same_tensors, one_bit

# The fixtures whose drafters hold stacked experts or heads.
STACKED = {"qwen3.6-moe": "qwen3.6-moe-tiny", "qwen3.8-flash-next": "qwen3.8-flash-next-tiny",
           "glm5.3-flash": "glm5.3-flash-tiny", "glm5.2": "glm5.2-tiny", "nemotron-h": "nemotron-h-moe-tiny"}


@pytest.fixture(scope="module")
def dirs():
    return make_fixtures({**STACKED, "qwen3.6-dense": "qwen3.6-dense-tiny"})


@pytest.mark.parametrize("key", list(STACKED))
def test_stacked_drafter_refused_at_one_bit(mtpconv, dirs, tmp_path, key):
    """The splitter writes the 1-bit folder; mlx-vlm's load_drafter refuses
    it; mtpconv refuses int1, naming the stack and mlx-vlm's limit."""
    with mx.stream(mx.cpu):
        ref = split_mtp(str(dirs[key]), str(tmp_path / "ref"), q_bits=1, q_group_size=64)
    with pytest.raises(ValueError, match="1-bit inference does not yet support"):
        load_drafter(str(ref))
    res = subprocess.run([str(mtpconv), "export", "--src", str(dirs[key]), "--out", str(tmp_path / "ours"), "--quiet",
                          "--target", "mlx", "--head-precision", "int1", *one_bit("int1")], capture_output=True, text=True)
    assert res.returncode == 1 and "mlx-vlm 0.7.10 loads 1-bit Linear and Embedding modules only" in res.stderr, res.stderr
    assert not (tmp_path / "ours").exists()


@pytest.mark.parametrize("group", [32, 64, 128])
def test_dense_drafter_at_one_bit_equals_splitter(mtpconv, dirs, tmp_path, group):
    """The dense Qwen3.5/3.6 drafter at 1 bit is the splitter's, every tensor
    and config key, and mlx-vlm loads it as OneBitLinear."""
    src = dirs["qwen3.6-dense"]
    with mx.stream(mx.cpu):
        ref = split_mtp(str(src), str(tmp_path / "ref"), q_bits=1, q_group_size=group)
    ours = export(mtpconv, src, tmp_path / "ours", "--target", "mlx", "--head-precision", "int1", "--group-size", group,
                  *one_bit("int1"))
    got = assert_same_tensors(ours, ref)  # (the fixture has no tokenizer)
    assert json.loads((ours / "config.json").read_text()) == json.loads((ref / "config.json").read_text())
    assert got["fc.scales"].dtype == mx.bfloat16
    drafter, kind = load_drafter(str(ours))
    assert kind == "mtp" and type(drafter.fc).__name__ == "OneBitLinear"

"""DeepSeek-V4-Flash-0731's DSpark stages (family deepseek_v41): the fixture against the pinned consumers, the numpy
reference (interop/reference_dspark.py) against mlx-vlm 0.7.10's own drafter, and mtpconv's --target gguf draft.

mtpconv writes the llama.cpp `dflash` draft and 0731's mlx-vlm deepseek_v4_dspark folder (every other target
refuses, naming the tool that writes what the runtime drafts with: docs/deepseek-v4-dspark.md):

- mtpconv's draft of each fixture (plain at bf16 and f16, rigged, random head) is the converter's `--dspark` file key
  for key, in its order, and tensor for tensor (names, types, dims, sha256), provenance keys aside;
- llama-quantize refuses the converter's draft (its MXFP4 experts: "requantizing from type mxfp4 is disabled"), and
  mtpconv refuses llama-quantize's types by name;
- llama-speculative-simple --spec-type draft-dspark drafts with mtpconv's draft next to the converter's trunk exactly
  as with the converter's: rigged >= 95 % with llama-simple's text, the random head at the converter's rate;
- mtpconv's folder equals the splitter's (every shard's tensors byte for byte, config.json and the index byte for
  byte), verify --src recomputes it, and mlx-vlm's dflash loop drafts with it as with the splitter's (rigged >= 95 %,
  random head rejected);
- DeepSeek-V4.1 is refused (llama.cpp has no deepseek_v41 architecture, mlx-vlm no splitter).

What else is checked here is the ground the other writers will stand on:

- mlx-vlm's splitter registry hands the fixture (a deepseek_v4 config with dspark_* keys) to its DSpark splitter,
  which writes one shard per stage, the FP4 experts and FP8 weights as mxfp4/mxfp8, block_size dspark_block_size + 1;
  load_drafter takes the folder as a dflash-kind deepseek_v4_dspark drafter.
- The numpy reference of the stages agrees with that drafter's base logits and its greedy Markov-chained block,
  fed the same target hidden states: the stages' math (hyper-connections, MLA with sinks, the sqrtsoftplus MoE,
  the Markov head) and the release layout's dequantization are understood.
- llama.cpp 0.3.36's own converter (`convert_hf_to_gguf.py --dspark --target-model-dir`, run with the vLLM venv's
  python: the one venv of CI with torch) takes the fixture and writes the `dflash` draft: the tensors and keys the
  docs page lists, the FP4 experts repacked to MXFP4 holding exactly the release's values, the FP8 weights as Q8_0
  of the exactly dequantized ones.
- Both pinned runtimes draft with DSpark on CPU, each with its own tool's file next to its own trunk of the rigged
  fixture (four trunk layers, one of each compress ratio; the head rigged through its Markov head):
  `llama-speculative-simple --spec-type draft-dspark` and mlx-vlm's dflash loop (`draft_block_size` 5: four
  drafts a round) accept >= 95 % of the rigged head's drafts with the greedy text equal to the undrafted one, and
  fewer than half of a random head's (the same trunk) with the text still equal.
- DeepSeek-V4.1 (`deepseek_v41`): no pinned tool drafts it, as the family's refusals say. llama.cpp's converter
  has no class for it (with or without --dspark); mlx-vlm has no splitter for it and its deepseek_v41 model drops
  every `mtp.*` tensor; vLLM's own configuration class reads the fixture's config (the dspark keys included).
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT
from reference_dspark import DSparkReference, load_release
from test_gguf import PROMPT, llama_bin, run_llama  # noqa: F401 (llama_bin: the session fixture)

FIXTURE = "deepseek-v4-flash-0731-dspark-tiny"
RIGGED, RANDOM_HEAD = FIXTURE + "-rigged", FIXTURE + "-trunk"
V41 = "deepseek-v4.1-flash-dspark-tiny"
LLAMA = Path.home() / ".cache" / "mtpconv" / "llama.cpp-0.3.36" / "src" / "llama_cpp_python-0.3.36" / "vendor" / "llama.cpp"


@pytest.fixture(scope="module")
def fixtures():
    names = [FIXTURE, RIGGED, RANDOM_HEAD, V41]
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", *names], cwd=ROOT, check=True, capture_output=True, text=True)
    return dict(zip(names, map(Path, res.stdout.split())))


@pytest.fixture(scope="module")
def fixture(fixtures):
    return fixtures[FIXTURE]


@pytest.fixture(scope="module")
def split(fixture, tmp_path_factory):
    """mlx-vlm's own DSpark drafter of the fixture, from the splitter its registry picks for the config."""
    from mlx_vlm.speculative.drafters.mtp_split import get_mtp_splitter
    cfg = json.loads((fixture / "config.json").read_text())
    splitter = get_mtp_splitter(source_config=cfg)
    assert type(splitter).__name__ == "DeepseekV4DsparkSplitter"
    return splitter.split(str(fixture), str(tmp_path_factory.mktemp("split") / "drafter"))


def test_mlx_vlm_splits_the_fixture(split):
    from mlx_vlm.speculative.drafters import load_drafter
    cfg = json.loads((split / "config.json").read_text())
    assert cfg["model_type"] == "deepseek_v4_dspark" and cfg["n_mtp_layers"] == 3
    assert cfg["block_size"] == 5 and cfg["target_layer_ids"] == [1, 2, 3] and cfg["mask_token_id"] == 500 and cfg["markov_rank"] == 32
    q = cfg["quantization"]
    assert q["stages.0.ffn.switch_mlp.gate_proj"] == {"group_size": 32, "bits": 4, "mode": "mxfp4"}
    assert q["stages.0.main_proj"] == q["stages.2.attn.wkv"] == {"group_size": 32, "bits": 8, "mode": "mxfp8"}
    assert sorted(p.name for p in split.glob("*.safetensors")) == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    index = json.loads((split / "model.safetensors.index.json").read_text())["weight_map"]
    assert index["markov_head.markov_w1.weight"] == "model-00003-of-00003.safetensors"
    assert not any(k.startswith("confidence_head") or k.startswith("mtp.") for k in index)
    drafter, kind = load_drafter(str(split))
    assert kind == "dflash" and type(drafter).__name__ == "DeepseekV4DsparkDraftModel"


def target_of(ref):
    """A stand-in target for the drafter: the fixture's embedding and head (what bind() takes from a trunk)."""
    import mlx.core as mx
    import mlx.nn as nn

    class Target(nn.Module):
        def __init__(self):
            super().__init__()
            emb, head = ref.w["embed.weight"], ref.w["head.weight"]
            self.embed_tokens = nn.Embedding(*emb.shape)
            self.embed_tokens.weight = mx.array(emb.astype(np.float32))
            self.lm_head = nn.Linear(head.shape[1], head.shape[0], bias=False)
            self.lm_head.weight = mx.array(head.astype(np.float32))
    return Target()


@pytest.mark.parametrize("seed", [0, 1])
def test_reference_agrees_with_mlx_vlm(fixture, split, seed):
    """Fed the same target hidden states (float32), the numpy stages and mlx-vlm's drafter give the same base
    logits (to float32 rounding) and draft the same block."""
    import mlx.core as mx
    from mlx_vlm.speculative.drafters import load_drafter
    ref = DSparkReference(fixture)
    drafter, _ = load_drafter(str(split))
    cache = drafter.reset(target_of(ref))
    rng = np.random.default_rng(seed)
    hidden = rng.standard_normal((6, 3 * ref.cfg["hidden_size"])).astype(np.float32)
    anchor = int(rng.integers(0, 320))
    tokens = [anchor] + [ref.cfg["dspark_noise_token_id"]] * 3
    got = np.array(drafter._logits(drafter._hidden(mx.array([tokens], dtype=mx.int32), mx.array(hidden[None]), cache)).astype(mx.float32))[0]
    want = ref.base_logits(np.array(tokens), hidden.astype(np.float64))
    assert np.abs(got - want).max() < 1e-4 * np.abs(want).max(), np.abs(got - want).max()
    assert (got.argmax(-1) == want.argmax(-1)).all()
    drafted = drafter.draft_block(anchor, mx.array(hidden[None]), drafter.reset(target_of(ref)), 5, lambda x: mx.argmax(x, axis=-1))
    want_tokens, _ = ref.draft(anchor, hidden.astype(np.float64), 4)
    assert np.array(drafted)[0].tolist() == want_tokens
    # The Markov head matters: without it the block is another one (else this test would not see it).
    assert base_argmax_differs(want, want_tokens)


def base_argmax_differs(base, tokens):
    return base.argmax(-1).tolist() != tokens


# Runs the pinned converter; its tokenizer check hashes a test text, which our tiny tokenizer's hash is not in the
# converter's table of: the detection answers the releases' pre-tokenizer (deepseek-v3), as interop/reference_gguf.py.
CONVERT = r'''
import sys, runpy
llama, src, out = sys.argv[1:4]
sys.path.insert(0, llama); sys.path.insert(1, llama + "/gguf-py")
import conversion.base as base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "deepseek-v3"
sys.argv = [llama + "/convert_hf_to_gguf.py", src, "--outtype", "bf16", "--outfile", out] + sys.argv[4:]
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def convert(src, out, *flags):
    """The pinned converter's file of src (the DeepSeek-V4 trunk, or with --dspark the DSpark draft)."""
    from vllm_server import python as vllm_python
    subprocess.run([str(vllm_python()), "-c", CONVERT, str(LLAMA), str(src), str(out), *flags], check=True, capture_output=True)
    return out


def dspark(src, out):
    return convert(src, out, "--dspark", "--target-model-dir", str(src))

# What the file holds, read with the gguf-py vendored with the converter (the PyPI wheel has no dflash): every key,
# every tensor's type and dims, and the values of the tensors named on the command line, dequantized.
DESCRIBE = r'''
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1] + "/gguf-py")
import gguf
r = gguf.GGUFReader(sys.argv[2])
keys = {f.name: f.contents() for f in r.fields.values() if not f.name.startswith("GGUF.") and not f.name.startswith("tokenizer.ggml.")}
keys["tokenizer.ggml.mask_token_id"] = r.fields["tokenizer.ggml.mask_token_id"].contents()
tensors = {t.name: {"type": t.tensor_type.name, "dims": [int(d) for d in t.shape]} for t in r.tensors}
values = {t.name: gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64).ravel().tolist() for t in r.tensors if t.name in sys.argv[3:]}
print(json.dumps({"keys": keys, "tensors": tensors, "values": values}, default=str))
'''


@pytest.fixture(scope="module")
def converted(fixture, tmp_path_factory):
    from vllm_server import python as vllm_python
    py = vllm_python()
    out = dspark(fixture, tmp_path_factory.mktemp("gguf") / "dspark.gguf")
    names = ["blk.0.ffn_gate_exps.weight", "blk.2.ffn_down_exps.weight", "fc.weight", "blk.1.attn_output_a.weight", "markov_w1.weight"]
    res = subprocess.run([str(py), "-c", DESCRIBE, str(LLAMA), str(out), *names], check=True, capture_output=True, text=True)
    return json.loads(res.stdout)


def test_llama_cpp_converter_takes_the_fixture(converted):
    keys, tensors = converted["keys"], converted["tensors"]
    assert keys["general.architecture"] == "dflash" and keys["dflash.block_count"] == 3
    assert keys["dflash.block_size"] == 4 and keys["dflash.target_layers"] == [2, 3, 4]
    assert keys["tokenizer.ggml.mask_token_id"] == 500 and keys["dflash.hyper_connection.count"] == 4
    assert keys["dflash.attention.compress_ratios"] == [0, 0, 0]
    root = {"fc.weight", "enc.output_norm.weight", "markov_w1.weight", "markov_w2.weight", "conf_proj.weight",
            "output_norm.weight", "output_hc_fn.weight", "output_hc_base.weight", "output_hc_scale.weight"}
    assert root <= set(tensors) and "token_embd.weight" not in tensors and "output.weight" not in tensors
    per_block = {n.split(".", 2)[2] for n in tensors if n.startswith("blk.")}
    assert {"attn_q_a.weight", "attn_kv.weight", "attn_output_a.weight", "attn_sinks.weight", "hc_attn_fn.weight", "exp_probs_b.bias",
            "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight", "ffn_gate_shexp.weight"} <= per_block
    assert len(tensors) == len(root) + 3 * len(per_block)
    types = {n: t["type"] for n, t in tensors.items()}
    assert types["blk.0.ffn_gate_exps.weight"] == "MXFP4" and types["fc.weight"] == types["blk.1.attn_q_b.weight"] == "Q8_0"
    assert types["blk.1.hc_attn_fn.weight"] == "F32" and types["blk.1.ffn_gate_inp.weight"] == "BF16" and types["markov_w1.weight"] == "BF16"


def test_llama_cpp_converter_reads_the_release_values(fixture, converted):
    """The release layout is read as the converter reads it: the MXFP4 experts hold exactly the FP4 values, the
    Q8_0 of an FP8 weight is within Q8_0's rounding of the exactly dequantized one."""
    w = load_release(fixture)
    got = {n: np.array(v) for n, v in converted["values"].items()}
    experts = lambda s, k: np.stack([w[f"mtp.{s}.ffn.experts.{e}.{k}.weight"] for e in range(4)]).ravel()
    np.testing.assert_array_equal(got["blk.0.ffn_gate_exps.weight"], experts(0, "w1"))
    np.testing.assert_array_equal(got["blk.2.ffn_down_exps.weight"], experts(2, "w2"))
    for name, src in (("fc.weight", "mtp.0.main_proj.weight"), ("blk.1.attn_output_a.weight", "mtp.1.attn.wo_a.weight")):
        want = w[src].ravel()
        assert np.abs(got[name] - want).max() <= np.abs(want).max() / 127 + 1e-6, name
    np.testing.assert_array_equal(got["markov_w1.weight"], w["mtp.2.markov_head.markov_w1.weight"].ravel())


@pytest.fixture(scope="module")
def llama_files(fixtures, tmp_path_factory):
    """The converter's deepseek4 trunk of the rigged fixture and the DSpark drafts of the rigged and the random head."""
    d = tmp_path_factory.mktemp("llama")
    return (convert(fixtures[RIGGED], d / "trunk.gguf"), dspark(fixtures[RIGGED], d / "dspark-rigged.gguf"),
            dspark(fixtures[RANDOM_HEAD], d / "dspark-random.gguf"))


def speculative_dspark(llama_bin, trunk, draft, n=48):
    """llama-speculative-simple with the DSpark draft: its text and statistics (a run whose statistics the
    log lost, llama.cpp issue 22142, is run again: the output is deterministic)."""
    for _ in range(6):
        out, err = run_llama(llama_bin, "llama-speculative-simple", "-m", trunk, "-md", draft, "--spec-type", "draft-dspark",
                             "-p", PROMPT, "-n", n, "--temp", "0", "-c", "512", "-t", "2")
        stats = {k: float(v) for k, v in re.findall(r"\b(n_drafted|n_accept|accept)\s*=\s*([0-9.]+)", err)}
        if {"n_drafted", "n_accept"} <= stats.keys():
            return out.strip(), stats
    raise AssertionError("llama-speculative-simple never printed its statistics:\n" + err[-3000:])


@pytest.mark.parametrize("head", ["rigged", "random"])
def test_llama_cpp_drafts_with_dspark(llama_bin, llama_files, head):
    trunk, rigged, random = llama_files
    want, _ = run_llama(llama_bin, "llama-simple", "-m", trunk, "-n", 64, PROMPT)
    got, stats = speculative_dspark(llama_bin, trunk, rigged if head == "rigged" else random)
    print(f"llama.cpp draft-dspark, {head} head: drafted {stats['n_drafted']:.0f}, accepted {stats['n_accept']:.0f}")
    assert len(got) > len(PROMPT) + 16 and want.strip().startswith(got)
    assert stats["n_drafted"] >= 30
    if head == "rigged":
        assert stats["n_accept"] / stats["n_drafted"] >= 0.95
    else:
        assert stats["n_accept"] < 0.5 * stats["n_drafted"]


# mtpconv's --target gguf of 0731's stages: the dflash draft the converter writes (keys and tensors read with the
# vendored gguf-py, reference_gguf.describe: every key with its type and value, every tensor's type, dims and sha256).
DESCRIBE_ALL = r'''
import json, sys
sys.path.insert(0, sys.argv[1] + "/gguf-py"); sys.path.insert(0, sys.argv[2])
import gguf
from reference_gguf import describe
print(json.dumps(describe(sys.argv[3], gguf)))
'''
# Keys that name the file rather than describe the model (the converter's general.name from the folder, size_label
# from its parameter count), as interop/test_deepseek_v4.py.
PROVENANCE = {"general.name", "general.size_label"}


def describe_all(path):
    res = subprocess.run([sys.executable, "-c", DESCRIBE_ALL, str(LLAMA), str(ROOT / "interop"), str(path)],
                         check=True, capture_output=True, text=True)
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def ours(fixtures, mtpconv, tmp_path_factory):
    """mtpconv's --target gguf draft of a fixture at a precision (made once each)."""
    made = {}

    def of(name, prec="bf16"):
        if (name, prec) not in made:
            out = tmp_path_factory.mktemp("ours") / "out"
            subprocess.run([str(mtpconv), "export", "--src", str(fixtures[name]), "--out", str(out), "--target", "gguf",
                            "--head-precision", prec, "--quiet"], check=True, capture_output=True)
            (made[name, prec],) = out.glob("*.gguf")
        return made[name, prec]
    return of


@pytest.mark.parametrize("name,prec", [(FIXTURE, "bf16"), (FIXTURE, "f16"), (RIGGED, "bf16"), (RANDOM_HEAD, "bf16")])
def test_mtpconv_draft_equals_converter(fixtures, ours, tmp_path, name, prec):
    """mtpconv's draft is the converter's --dspark file key for key (in its order, with types and values) and tensor
    for tensor (names, types, dims, bytes), provenance aside; one file at bf16 and f16, as the converter writes the
    stored types whatever --outtype says."""
    got = describe_all(ours(name, prec))
    want = describe_all(dspark(fixtures[name], tmp_path / "conv.gguf"))
    strip = lambda md: {k: v for k, v in md.items() if k not in PROVENANCE}  # noqa: E731
    assert list(strip(got["metadata"])) == list(strip(want["metadata"]))
    assert strip(got["metadata"]) == strip(want["metadata"])
    by_name = lambda ts: sorted(ts, key=lambda t: t["name"])  # noqa: E731  (the target's order, not the converter's)
    assert by_name(got["tensors"]) == by_name(want["tensors"])
    assert len(got["tensors"]) == 81 and got["metadata"]["general.architecture"]["value"] == "dflash"
    assert got["metadata"]["tokenizer.ggml.mask_token_id"]["value"] == 500


def test_llama_quantize_refuses_the_draft(llama_bin, llama_files, mtpconv, fixtures, tmp_path):
    """llama-quantize does not take the converter's draft (its MXFP4 experts), so mtpconv writes no quantized draft
    and refuses llama-quantize's types by name."""
    _, rigged, _ = llama_files
    env = dict(os.environ, LD_LIBRARY_PATH=str(llama_bin))
    res = subprocess.run([str(llama_bin / "llama-quantize"), str(rigged), str(tmp_path / "q.gguf"), "Q8_0"], capture_output=True, text=True, env=env)
    assert res.returncode != 0 and "requantizing from type mxfp4 is disabled" in res.stdout + res.stderr, res.stderr[-2000:]
    res = subprocess.run([str(mtpconv), "export", "--src", str(fixtures[RIGGED]), "--out", str(tmp_path / "out"), "--target", "gguf",
                          "--gguf-type", "Q8_0"], capture_output=True, text=True)
    assert res.returncode != 0 and "would requantize the MXFP4 experts" in res.stderr and "V4-Flash-0731" in res.stderr, res.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("head", ["rigged", "random"])
def test_llama_cpp_drafts_with_mtpconv_dspark(llama_bin, llama_files, ours, head):
    """llama.cpp drafts with mtpconv's draft next to the converter's trunk as with the converter's own: the rigged head
    >= 95 % accepted with llama-simple's text, the random head rejected at the converter's draft's rate."""
    trunk, rigged, random = llama_files
    want, _ = run_llama(llama_bin, "llama-simple", "-m", trunk, "-n", 64, PROMPT)
    got, stats = speculative_dspark(llama_bin, trunk, ours(RIGGED if head == "rigged" else RANDOM_HEAD))
    _, theirs = speculative_dspark(llama_bin, trunk, rigged if head == "rigged" else random)
    print(f"llama.cpp draft-dspark, mtpconv's {head} head: drafted {stats['n_drafted']:.0f}, accepted {stats['n_accept']:.0f} "
          f"(the converter's: {theirs['n_drafted']:.0f}, {theirs['n_accept']:.0f})")
    assert len(got) > len(PROMPT) + 16 and want.strip().startswith(got)
    assert stats["n_drafted"] >= 30
    assert (stats["n_drafted"], stats["n_accept"]) == (theirs["n_drafted"], theirs["n_accept"])
    if head == "rigged":
        assert stats["n_accept"] / stats["n_drafted"] >= 0.95
    else:
        assert stats["n_accept"] < 0.5 * stats["n_drafted"]


def test_mtpconv_refuses_v41_gguf(fixtures, mtpconv, tmp_path):
    res = subprocess.run([str(mtpconv), "export", "--src", str(fixtures[V41]), "--out", str(tmp_path / "out"), "--target", "gguf"],
                         capture_output=True, text=True)
    assert res.returncode != 0 and "no DeepSeek-V4.1 (deepseek_v41) architecture" in res.stderr, res.stderr
    assert not (tmp_path / "out").exists()


MLX_PROMPT = [3, 17, 200, 33, 4, 99, 250, 11]


def load_v4_trunk(src, tmp):
    """mlx-vlm's deepseek_v4 model of a raw V4 release folder, in float32. Its quantization is given as
    deepseek_v4's own make_quantization_config: mlx-vlm 0.7.10's load_model takes the release's fp8
    quantization_config for a uniform block-FP8 checkpoint (fp8.py:16-26, utils.py:511-518) and never reaches
    deepseek_v4's mixed FP8/FP4 one, so the FP4 experts do not load (mlx_vlm.convert fails the same way)."""
    import shutil
    import mlx.core as mx
    from mlx_vlm.models.deepseek_v4.language import make_quantization_config
    from mlx_vlm.utils import get_model_and_args, load_model
    dst = Path(tmp)
    shutil.copytree(src, dst, symlinks=True)
    cfg = json.loads((dst / "config.json").read_text())
    cfg.pop("quantization_config")
    arch, _ = get_model_and_args(cfg)
    cfg["quantization"] = make_quantization_config(arch.Model(arch.ModelConfig.from_dict(cfg)))
    (dst / "config.json").unlink()
    (dst / "config.json").write_text(json.dumps(cfg))
    model = load_model(dst, strict=True)
    model.set_dtype(mx.float32)
    return model


def mlx_greedy(model, drafter=None):
    import mlx.core as mx
    from mlx_vlm.generate.ar import generate_step
    kw = dict(draft_model=drafter, draft_kind="dflash", draft_block_size=5) if drafter is not None else {}
    return [int(t.item()) if hasattr(t, "item") else int(t)
            for t, _ in generate_step(mx.array([MLX_PROMPT]), model, None, None, max_tokens=48, temperature=0.0, **kw)]


@pytest.mark.parametrize("head", ["rigged", "random"])
def test_mlx_vlm_drafts_with_dspark(fixtures, tmp_path, head):
    from mlx_vlm.speculative.drafters.mtp_split import get_mtp_splitter
    src = fixtures[RIGGED if head == "rigged" else RANDOM_HEAD]
    model = load_v4_trunk(fixtures[RIGGED], tmp_path / "trunk")
    folder = get_mtp_splitter(source_config=json.loads((src / "config.json").read_text())).split(str(src), str(tmp_path / "drafter"))
    assert_dflash_drafts(model, folder, f"{head} head", head == "rigged")


def assert_dflash_drafts(model, folder, what, rigged):
    """mlx-vlm's dflash loop (draft_block_size 5) drafts with the folder next to the trunk: the greedy tokens equal
    the undrafted ones; a rigged head's drafts >= 95 % accepted, a random head's fewer than half."""
    import mlx.core as mx
    from mlx_vlm.speculative.drafters import load_drafter
    drafter, kind = load_drafter(str(folder))
    drafter.set_dtype(mx.float32)
    assert kind == "dflash"
    assert mlx_greedy(model, drafter) == mlx_greedy(model)
    drafted, accepted = sum(drafter.draft_lens), sum(drafter.accept_lens)
    print(f"mlx-vlm dflash loop, {what}: drafted {drafted}, accepted {accepted}")
    assert drafted >= 30
    if rigged:
        assert accepted / drafted >= 0.95
    else:
        assert accepted < 0.5 * drafted


def python_config_copy(src, dst):
    """src with its config.json as transformers writes it (Python's float literals, 1e-06), so that a drafter's
    text_config compares byte for byte with the splitter's (json.load and json.dump re-spell floats)."""
    import shutil
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    return dst


def assert_same_folder(ours, ref):
    """Two DSpark drafter folders hold the same files: every shard's tensors byte for byte and dtype for dtype,
    in the same shard, with the same metadata; config.json, the index and the tokenizer files byte for byte."""
    import mlx.core as mx
    shards = sorted(p.name for p in ref.glob("*.safetensors"))
    assert sorted(p.name for p in ours.glob("*.safetensors")) == shards
    n = 0
    for name in shards:
        (a, ma), (b, mb) = mx.load(str(ours / name), return_metadata=True), mx.load(str(ref / name), return_metadata=True)
        assert ma == mb and set(a) == set(b), (name, ma, mb, set(a) ^ set(b))
        for k in b:
            assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, (k, a[k].dtype, b[k].dtype, a[k].shape, b[k].shape)
            view = (lambda x: x if x.dtype == mx.float32 else x.view(mx.uint8))
            assert bytes(memoryview(view(a[k]))) == bytes(memoryview(view(b[k]))), k
        n += len(b)
    for f in ("config.json", "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"):
        assert (ours / f).read_bytes() == (ref / f).read_bytes(), f
    return n


@pytest.mark.parametrize("name", [FIXTURE, RIGGED])
def test_mtpconv_drafter_equals_splitter(mtpconv, fixtures, tmp_path, name):
    """mtpconv's --target mlx of 0731 is the folder mlx-vlm's DSpark splitter writes, file for file: a shard per
    stage (the FP8 weights mxfp8, each 128 x 128 ue8m0 scale repeated per 32 inputs; the FP4 experts stacked,
    mxfp4), the Markov head at the root, no confidence head, config.json and the index byte for byte. The splitter
    writes that one form whatever quantization is asked (its quantization_from_source wins), and mtpconv refuses
    any other; verify --src recomputes every tensor from the release's bytes."""
    from conftest import export
    from mlx_vlm.speculative.drafters.deepseek_v4_dspark.split import DeepseekV4DsparkSplitter
    src = python_config_copy(fixtures[name], tmp_path / "src")
    ref = DeepseekV4DsparkSplitter().split(str(src), str(tmp_path / "ref"))
    asked = DeepseekV4DsparkSplitter().split(str(src), str(tmp_path / "q4"), q_bits=4, q_group_size=64)
    assert assert_same_folder(asked, ref) > 0
    ours = export(mtpconv, src, tmp_path / "ours", "--target", "mlx")
    n = assert_same_folder(ours, ref)
    print(f"{name}: mtpconv's deepseek_v4_dspark folder equals the splitter's ({n} stored tensors in 3 shards)")
    res = subprocess.run([str(mtpconv), "verify", "--src", str(src), str(ours)], capture_output=True, text=True)
    assert res.returncode == 0 and f"80 tensors ({n} stored entries) checked, 80 recomputed from the source: OK" in res.stdout, res.stdout + res.stderr
    res = subprocess.run([str(mtpconv), "export", "--src", str(src), "--out", str(tmp_path / "int4"), "--target", "mlx",
                          "--head-precision", "int4"], capture_output=True, text=True)
    assert res.returncode != 0 and "ignores any quantization asked" in res.stderr, res.stderr


@pytest.mark.parametrize("head", ["rigged", "random"])
def test_mlx_vlm_drafts_with_mtpconv_dspark(mtpconv, fixtures, tmp_path, head):
    """mlx-vlm's dflash loop (draft_block_size 5) drafts with mtpconv's folder next to its trunk of the rigged
    fixture: the greedy tokens equal the undrafted ones; the rigged head's drafts >= 95 % accepted, a random
    head's (the -trunk fixture: the same trunk) fewer than half, as with the splitter's own folder."""
    from conftest import export
    src = fixtures[RIGGED if head == "rigged" else RANDOM_HEAD]
    model = load_v4_trunk(fixtures[RIGGED], tmp_path / "trunk")
    assert_dflash_drafts(model, export(mtpconv, src, tmp_path / "ours", "--target", "mlx"), f"mtpconv's {head} head", head == "rigged")


def test_mtpconv_refuses_v41_mlx(mtpconv, fixtures, tmp_path):
    res = subprocess.run([str(mtpconv), "export", "--src", str(fixtures[V41]), "--out", str(tmp_path / "out"), "--target", "mlx"],
                         capture_output=True, text=True)
    assert res.returncode != 0 and "no DSpark splitter for DeepSeek-V4.1" in res.stderr, res.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flags", [(), ("--dspark",)])
def test_llama_cpp_has_no_v41(fixtures, tmp_path, flags):
    from vllm_server import python as vllm_python
    src = fixtures[V41]
    res = subprocess.run([str(vllm_python()), "-c", CONVERT, str(LLAMA), str(src), str(tmp_path / "out.gguf"), *flags,
                          *(("--target-model-dir", str(src)) if flags else ())], capture_output=True, text=True)
    assert res.returncode != 0 and not (tmp_path / "out.gguf").exists()
    # The class lookup fails before --dspark is looked at (convert_hf_to_gguf.py:252, 271).
    assert "Model DeepseekV41ForCausalLM is not supported" in res.stderr, res.stderr[-2000:]


def test_mlx_vlm_drops_v41_stages(fixtures):
    import mlx.core as mx
    from mlx_vlm.models.deepseek_v41 import Model, ModelConfig
    from mlx_vlm.speculative.drafters.mtp_split import get_mtp_splitter
    cfg = json.loads((fixtures[V41] / "config.json").read_text())
    assert get_mtp_splitter(source_config=cfg) is None
    model = Model(ModelConfig.from_dict(cfg))
    weights = {"mtp.0.main_norm.weight": mx.ones((128,)), "mtp.2.markov_head.embed.weight": mx.ones((512, 32)),
               "norm.weight": mx.ones((128,))}
    kept = model.sanitize(dict(weights))
    assert "language_model.norm.weight" in kept and not any("mtp" in k or "markov" in k or "main_norm" in k for k in kept)


V41_CONFIG = r'''
import json, sys
from vllm.transformers_utils.configs.deepseek_v41 import DeepseekV41Config
c = DeepseekV41Config(**json.load(open(sys.argv[1])))
print(json.dumps({"model_type": c.model_type, "targets": list(c.dspark_target_layer_ids), "experts": c.dspark_n_routed_experts,
                  "expert_dtype": c.expert_dtype, "kv_sources": list(c.kv_source_layer_ids), "vision_layers": c.vision_n_layers}))
'''


def test_vllm_reads_v41_config(fixtures):
    from vllm_server import python as vllm_python
    res = subprocess.run([str(vllm_python()), "-c", V41_CONFIG, str(fixtures[V41] / "config.json")], check=True, capture_output=True, text=True)
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got == {"model_type": "deepseek_v41", "targets": [1, 2, 3], "experts": 2, "expert_dtype": "fp4", "kv_sources": [1, 2], "vision_layers": 2}

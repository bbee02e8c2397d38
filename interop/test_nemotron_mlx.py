"""--target mlx for Nemotron-H MoE: mlx-vlm 0.7.10's nemotron_h_mtp drafter.

- our drafter folder equals what mlx-vlm's own splitter (NemotronHMTPSplitter)
  writes, at bf16 and at every quantization the splitter offers: every tensor
  byte for byte (the head's names without mtp., experts stacked as
  switch_mlp.fc1 / fc2, the router float, e_score_correction_bias float32) and
  config.json key for key (byte for byte on a config.json as transformers writes it);
- stock mlx-lm and mlx-vlm load the nemotron_h trunk from the raw fixture, and
  mlx-vlm's own speculative loop (generate with draft_model, draft_kind "mtp")
  drafts with our drafter next to it: greedy text equal to the no-draft text; on
  the rigged twin it accepts >= 95% of the drafts at bf16, int8 and int4.

mlx's CPU GatherMM takes float32 only: the trunk and the drafter are run with
their float weights cast to float32 (quantized weights stay as stored).
"""
import json
import shutil
import subprocess
from pathlib import Path

import mlx.core as mx
import pytest
from mlx.utils import tree_map

from conftest import ROOT, export
from test_glm import QUANTIZED, assert_same_drafter

FX = {"plain": "nemotron-h-moe-tiny", "rigged": "nemotron-h-moe-tiny-rigged"}
PROMPT = "the quick brown fox"
EOS = [322]  # <|im_end|>: the fixtures' config.json has no eos_token_id, which mlx-vlm's generate reads otherwise


@pytest.fixture(scope="module")
def nemo_dirs():
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", *FX.values()], cwd=ROOT, check=True, capture_output=True, text=True)
    return dict(zip(FX, [Path(p) for p in res.stdout.split()]))


def split(src, out, **opts):
    from mlx_vlm.speculative.drafters.nemotron_h_mtp.split import NemotronHMTPSplitter
    with mx.stream(mx.cpu):
        return NemotronHMTPSplitter().split(str(src), str(out), **opts)


def test_drafter_equals_mlx_vlm_splitter(mtpconv, nemo_dirs, tmp_path):
    ref = split(nemo_dirs["plain"], tmp_path / "ref")
    ours = export(mtpconv, nemo_dirs["plain"], tmp_path / "ours", "--target", "mlx")
    got = assert_same_drafter(ours, ref)
    assert "layers.1.mixer.switch_mlp.fc1.weight" in got and got["layers.1.mixer.gate.e_score_correction_bias"].dtype == mx.float32
    assert json.loads((ours / "config.json").read_text())["block_size"] == 2


def test_drafter_config_bytes_equal_splitter(mtpconv, nemo_dirs, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(nemo_dirs["plain"], src)
    cfg = json.loads((src / "config.json").read_text())
    cfg.update(attention_dropout=0.0, routed_scaling_factor=2.5, layer_norm_epsilon=1e-05)
    (src / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    ref = split(src, tmp_path / "ref")
    ours = export(mtpconv, src, tmp_path / "ours", "--target", "mlx")
    want = (ref / "config.json").read_bytes()
    assert b'"layer_norm_epsilon": 1e-05,' in want
    assert (ours / "config.json").read_bytes() == want


@pytest.mark.parametrize("prec,group,opts", QUANTIZED, ids=[f"{p}-g{g or 'default'}" for p, g, _ in QUANTIZED])
def test_quantized_drafter_equals_mlx_vlm_splitter(mtpconv, nemo_dirs, tmp_path, prec, group, opts):
    ref = split(nemo_dirs["plain"], tmp_path / "ref", **opts)
    args = ["--target", "mlx", "--head-precision", prec, "--mlx-rounding", "cpu"]
    if group:
        args += ["--group-size", group]
    ours = export(mtpconv, nemo_dirs["plain"], tmp_path / "ours", *args)
    got = assert_same_drafter(ours, ref)
    q = json.loads((ours / "config.json").read_text())["quantization"]
    assert got["layers.1.mixer.gate.weight"].dtype == mx.bfloat16  # the router float
    assert "layers.0.eh_proj.scales" in got
    # the stacked experts' rows are the latent width (64): quantized when the group divides it
    assert ("layers.1.mixer.switch_mlp.fc1.scales" in got) == (64 % q["group_size"] == 0)


def test_mlx_lm_loads_trunk(nemo_dirs):
    from mlx_lm.utils import load_model
    model, _ = load_model(nemo_dirs["plain"], strict=True)
    out = model(mx.array([[3, 17, 200]]))
    assert out.shape == (1, 3, 512)


def as_f32(m):
    m.update(tree_map(lambda p: p.astype(mx.float32) if p.dtype in (mx.bfloat16, mx.float16) else p, m.parameters()))
    return m


def with_full_vocabulary(src, dst):
    """src with its tokenizer's 323 tokens padded to the 512 rows of the
    embedding (added tokens <pad323>...): the random trunk generates any id,
    which mlx-vlm's detokenizer must know."""
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.name != "tokenizer.json":
            (dst / f.name).symlink_to(f)
    tok = json.loads((src / "tokenizer.json").read_text())
    n = 1 + max(max(tok["model"]["vocab"].values()), max(t["id"] for t in tok["added_tokens"]))
    tok["added_tokens"] += [{"id": i, "content": f"<pad{i}>", "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": False} for i in range(n, 512)]
    (dst / "tokenizer.json").write_text(json.dumps(tok))
    return dst


@pytest.fixture(scope="module")
def trunks(nemo_dirs, tmp_path_factory):
    """mlx-vlm's trunk of each fixture and its greedy text without a drafter."""
    from mlx_vlm import generate, load
    out = {}
    for key, src in nemo_dirs.items():
        if key == "plain":
            src = with_full_vocabulary(src, tmp_path_factory.mktemp("vocab") / src.name)
        model, processor = load(str(src))
        as_f32(model)
        text = generate(model, processor, PROMPT, max_tokens=48, temperature=0.0, verbose=False, eos_tokens=EOS).text
        out[key] = (model, processor, text)
    return out


def drafted(mtpconv, trunks, nemo_dirs, key, out, precision):
    from mlx_vlm import generate
    from mlx_vlm.speculative.drafters import load_drafter
    folder = export(mtpconv, nemo_dirs[key], out, "--target", "mlx", "--head-precision", precision)
    drafter, kind = load_drafter(str(folder))
    assert kind == "mtp"
    as_f32(drafter)
    model, processor, want = trunks[key]
    got = generate(model, processor, PROMPT, max_tokens=48, temperature=0.0, verbose=False, eos_tokens=EOS,
                   draft_model=drafter, draft_kind=kind).text
    return got, want, drafter.speculative_total_drafted, drafter.speculative_total_accepted


def test_mlx_vlm_drafts(mtpconv, trunks, nemo_dirs, tmp_path):
    got, want, n_drafted, _ = drafted(mtpconv, trunks, nemo_dirs, "plain", tmp_path / "out", "bf16")
    assert n_drafted > 0 and len(got) > 20
    assert got == want


@pytest.mark.parametrize("precision", ["bf16", "int8", "int4"])
def test_rigged_acceptance(mtpconv, trunks, nemo_dirs, tmp_path, precision):
    got, want, n_drafted, n_accept = drafted(mtpconv, trunks, nemo_dirs, "rigged", tmp_path / "out", precision)
    print(f"rigged mlx-vlm {FX['rigged']} {precision}: drafted {n_drafted}, accepted {n_accept:.0f}")
    assert got == want
    assert n_drafted >= 20 and n_accept / n_drafted >= 0.95

"""GLM-5.2 and GLM-5.3 (GlmMoeDsaForCausalLM): the NextN layer as llama.cpp's glm-dsa
sidecar and as mlx-vlm's glm_moe_dsa_mtp drafter, on the glm5.2-tiny fixtures
(DeepSeek-V3.2's layout under GLM's tokenizer, indexer_types ["full",
"shared"]: layer 1 has no indexer, the NextN layer has its own; the NextN
layer without its own embedding or shared head, as in the release) and the
glm5.3-tiny ones (the same under GLM-5.3's config keys, stored in block FP8 as
its release; neither llama.cpp's trunk writer here nor mlx-vlm reads FP8, so
their trunks are made from the dequantized twins, the heads from the FP8 files).

llama.cpp (glm-dsa's MTP graph runs dense MLA, the indexer unused; the trunk's
sparse attention is dense at the fixture's index_topk):
- our quantized sidecars are byte for byte what llama-quantize makes of our bf16 one;
- llama.cpp's NextN logits for our sidecar (interop/mtp_logits.cpp) agree with the
  numpy reference (interop/reference_nextn.py), its trunk logits too;
- llama.cpp drafts with the sidecar (-md) and with the head grafted into the trunk
  (one file, every trunk tensor kept): greedy text equal to the no-draft text; on
  the rigged twin it accepts >= 95% of the drafts at bf16, Q8_0 and Q4_K_M.
The sidecar and the graft onto the reference --no-mtp trunk are compared with the
reference converter's files in Go (convert/targets/gguf/glm_moe_dsa_test.go).

mlx-vlm 0.7.10:
- its glm_moe_dsa model loads the raw fixture strictly (the shared layer without
  indexer), and its trunk logits equal the numpy reference's; stock mlx-lm's
  glm_moe_dsa does not load it (it wants an indexer in every layer);
- our drafter folder (--target mlx) is what its own splitter writes, tensor for
  tensor, byte for byte and config.json key for key, at bf16 and every
  quantization the splitter offers;
- its own drafting loop (generate with draft_model) drafts with our folder next to
  the trunk: text equal to the trunk's alone, and on the rigged twin >= 95% of
  the drafts accepted at bf16, int8 and int4.
"""
import json
import shutil

import mlx.core as mx
import numpy as np
import pytest

import nextn_gguf
from conftest import export
from nextn_gguf import every_type, ggtrunk_of, run_mtp_logits
from reference_nextn import GLMReference
from test_glm import QUANTIZED, assert_same_drafter  # what mlx-vlm's splitters offer when asked to quantize
from test_glm_gguf import TOKENS, mtp_logits  # noqa: F401  (session fixture)
from test_gguf import ggtrunk, llama_bin  # noqa: F401  (session fixtures)

GLM = {"plain": "glm5.2-tiny", "rigged": "glm5.2-tiny-rigged", "5.3": "glm5.3-tiny", "5.3-rigged": "glm5.3-tiny-rigged",
       "5.3-dequant": "glm5.3-dequant-tiny", "5.3-dequant-rigged": "glm5.3-dequant-tiny-rigged"}
# The fixture a trunk is made of: an FP8 release's dequantized twin.
TRUNK_OF = {"5.3": "5.3-dequant", "5.3-rigged": "5.3-dequant-rigged"}

family = nextn_gguf.family_fixture(
    GLM, lambda ggtrunk, key, src, d: ggtrunk_of(ggtrunk, src.parent / GLM[TRUNK_OF.get(key, key)], d / "trunk.gguf"))


@pytest.fixture(scope="module")
def dsa_dirs(family):
    return family.srcs


# --- llama.cpp ---

# GLM-5.3's FP8 head at F16 is written from the exact dequantized weights, as the
# converter's --outtype f16 is (the Go reference test compares the two), not
# through bf16 as llama-quantize of our bf16 file would: F16 is left out here.
FP8_QUANTIZED = [(k, a) for k, a in every_type("5.3") if a[2] != "F16"]

test_quantized_equals_llama_quantize, test_llama_drafts, test_rigged_acceptance = nextn_gguf.llama_tests(
    GLM, quantized=every_type("plain") + FP8_QUANTIZED, drafts=["plain", "5.3"], rigged=["rigged", "5.3-rigged"])


@pytest.mark.parametrize("key", ["plain", "5.3"])
def test_llama_nextn_logits_equal_reference(family, mtp_logits, key):
    got = run_mtp_logits(mtp_logits, family.trunk(key), family.bf16(key), TOKENS)
    h, mtp = np.array(got["h"]), np.array(got["mtp"])
    ref = GLMReference(family.src(TRUNK_OF.get(key, key)))
    pos = np.arange(len(TOKENS))
    _, want_trunk = ref.trunk(TOKENS, pos)
    np.testing.assert_allclose(np.array(got["trunk"]), want_trunk, rtol=0, atol=2e-2 * np.abs(want_trunk).max())
    want = ref.nextn_logits(TOKENS[1:], h[:-1], pos[1:])
    np.testing.assert_allclose(mtp, want, rtol=0, atol=1e-2 * np.abs(want).max())
    assert (mtp.argmax(-1) == want.argmax(-1)).all()


# --- mlx-vlm ---

@pytest.mark.parametrize("key", ["plain", "5.3-dequant"])
def test_mlx_vlm_trunk_equals_reference(dsa_dirs, key):
    from mlx.utils import tree_flatten
    from mlx_lm.utils import load_model as mlx_lm_load
    from mlx_vlm.utils import load_model
    folder = dsa_dirs[key]
    model = load_model(folder, strict=True)
    params = dict(tree_flatten(model.parameters()))
    assert [k for k in params if ".indexer.wk." in k] == ["language_model.model.layers.0.self_attn.indexer.wk.weight"]
    assert not [k for k in params if "layers.2." in k]  # the NextN layer is the drafter's
    model.set_dtype(mx.float32)  # MLX's CPU gather-matmul runs in float32 only
    got = np.array(model(mx.array([TOKENS])).logits[0].astype(mx.float32))
    _, want = GLMReference(folder).trunk(TOKENS, np.arange(len(TOKENS)))
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-3 * np.abs(want).max())
    assert (got.argmax(-1) == want.argmax(-1)).all()
    # mlx-lm's glm_moe_dsa builds an indexer in every layer, the shared one's too.
    with pytest.raises(ValueError, match=r"(?s)Missing 5 parameters.*layers\.1\.self_attn\.indexer"):
        mlx_lm_load(folder, strict=True)


def test_rigged_head_predicts_trunk(dsa_dirs):
    """On the rigged twin the reference's NextN layer predicts the trunk's next
    token with a margin; on the plain fixture it does not (the rig is what
    makes the acceptance tests pass)."""
    pos = np.arange(len(TOKENS))
    for key, agree in (("rigged", True), ("plain", False)):
        ref = GLMReference(dsa_dirs[key])
        h, trunk = ref.trunk(TOKENS, pos)
        mtp = ref.nextn_logits(TOKENS[1:], h[:-1], pos[1:])
        assert (mtp.argmax(-1) == trunk[1:].argmax(-1)).all() == agree, key
        if agree:  # with a margin quantization keeps
            top2 = np.sort(mtp, axis=-1)[:, -2:]
            assert (top2[:, 1] - top2[:, 0] > 1.0).all()


def test_drafter_equals_mlx_vlm_splitter(mtpconv, dsa_dirs, tmp_path):
    """Our drafter folder (--target mlx, bf16) holds exactly what mlx-vlm's own
    glm_moe_dsa_mtp splitter writes (the indexer under mtp.self_attn, kv_b_proj
    absorbed, experts stacked, shared_head.norm as shared_head_norm); mlx-vlm's
    load_drafter loads both as its GlmMoeDsaMTPDraftModel."""
    from mlx_vlm.speculative.drafters import load_drafter
    from mlx_vlm.speculative.drafters.glm_moe_dsa_mtp.split import split_glm_moe_dsa_mtp
    src = dsa_dirs["plain"]
    ref = split_glm_moe_dsa_mtp(str(src), str(tmp_path / "ref"))
    ours = export(mtpconv, src, tmp_path / "ours", "--target", "mlx")
    got = assert_same_drafter(ours, ref)
    assert "mtp.self_attn.indexer.weights_proj.weight" in got and "mtp.self_attn.embed_q.weight" in got
    assert got["mtp.mlp.switch_mlp.gate_proj.weight"].shape[0] == 8
    assert json.loads((ours / "config.json").read_text())["block_size"] == 2
    for folder in (ours, ref):
        drafter, kind = load_drafter(str(folder))
        assert kind == "mtp" and type(drafter).__name__ == "GlmMoeDsaMTPDraftModel"


def test_fp8_release_drafter_equals_splitter_of_dequantized(mtpconv, dsa_dirs, tmp_path):
    """GLM-5.3's block-FP8 release: our drafter folder (bf16) is byte for byte
    what mlx-vlm's splitter writes from the release dequantized (each FP8
    weight code x scale, bf16-exact, stored bf16 as the release's other
    weights), config.json key for key; it equals our drafter of the
    dequantized twin. The splitter fed the FP8 files itself writes a folder
    load_drafter refuses (its per-expert .scales are not stacked with the
    experts), which is why the comparison is on the dequantized weights."""
    from safetensors import safe_open
    from mlx_vlm.speculative.drafters import load_drafter
    from mlx_vlm.speculative.drafters.glm_moe_dsa_mtp.split import split_glm_moe_dsa_mtp
    fp8, twin = dsa_dirs["5.3"], dsa_dirs["5.3-dequant"]
    src = tmp_path / "dequant-bf16"
    shutil.copytree(twin, src)
    for shard in fp8.glob("*.safetensors"):
        with safe_open(str(shard), "np") as f:
            codes = {k for k in f.keys() if f.get_slice(k).get_dtype() == "F8_E4M3"}
        w = mx.load(str(src / shard.name))
        assert codes and all(w[k].dtype == mx.float32 for k in codes)
        mx.save_safetensors(str(src / shard.name), {k: v.astype(mx.bfloat16) if k in codes else v for k, v in w.items()},
                            metadata={"format": "pt"})
    ref = split_glm_moe_dsa_mtp(str(src), str(tmp_path / "ref"))
    ours = export(mtpconv, fp8, tmp_path / "ours", "--target", "mlx")
    got = assert_same_drafter(ours, ref)
    assert "mtp.self_attn.indexer.wk.weight" in got and not [k for k in got if "scale" in k]
    twin_out = export(mtpconv, twin, tmp_path / "twin", "--target", "mlx")
    assert (twin_out / "model.safetensors").read_bytes() == (ours / "model.safetensors").read_bytes()
    assert load_drafter(str(ours))[1] == "mtp"
    raw = split_glm_moe_dsa_mtp(str(fp8), str(tmp_path / "raw"))
    with pytest.raises(ValueError, match=r"(?s)parameters not in model.*experts\.0\..*scales"):
        load_drafter(str(raw))


def test_drafter_config_bytes_equal_splitter(mtpconv, dsa_dirs, tmp_path):
    """On a config.json as transformers writes it (sorted, indent 2, floats as
    floats), our drafter's config.json is the splitter's byte for byte."""
    from mlx_vlm.speculative.drafters.glm_moe_dsa_mtp.split import split_glm_moe_dsa_mtp
    src = tmp_path / "src"
    shutil.copytree(dsa_dirs["plain"], src)
    cfg = json.loads((src / "config.json").read_text())
    cfg.update(attention_dropout=0.0, rms_norm_eps=1e-05)
    (src / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    ref = split_glm_moe_dsa_mtp(str(src), str(tmp_path / "ref"))
    ours = export(mtpconv, src, tmp_path / "ours", "--target", "mlx")
    want = (ref / "config.json").read_bytes()
    assert b'"attention_dropout": 0.0,' in want and b'"rms_norm_eps": 1e-05,' in want
    assert (ours / "config.json").read_bytes() == want


@pytest.mark.parametrize("prec,group,opts", QUANTIZED, ids=[f"{p}-g{g or 'default'}" for p, g, _ in QUANTIZED])
def test_quantized_drafter_equals_mlx_vlm_splitter(mtpconv, dsa_dirs, tmp_path, prec, group, opts):
    """Quantized, our drafter folder is what mlx-vlm's splitter writes (mx.quantize
    on the CPU stream, so --mlx-rounding cpu): every tensor byte for byte (the
    router float, every other matrix by its last dimension where the group
    divides it) and config.json key for key, its quantization block included."""
    from mlx_vlm.speculative.drafters.glm_moe_dsa_mtp.split import GlmMoeDsaMTPSplitter
    src = dsa_dirs["plain"]
    with mx.stream(mx.cpu):
        ref = GlmMoeDsaMTPSplitter().split(str(src), str(tmp_path / "ref"), **opts)
    args = ["--target", "mlx", "--head-precision", prec, "--mlx-rounding", "cpu"]
    if group:
        args += ["--group-size", group]
    ours = export(mtpconv, src, tmp_path / "ours", *args)
    got = assert_same_drafter(ours, ref)
    q = json.loads((ours / "config.json").read_text())["quantization"]
    assert got["mtp.mlp.gate.weight"].dtype == mx.bfloat16 and "mtp.eh_proj.scales" in got
    # embed_q is [heads, kv_lora 64, nope 32]: quantized exactly when the group divides 32.
    assert ("mtp.self_attn.embed_q.scales" in got) == (32 % q["group_size"] == 0)


def mlx_drafting(trunk_dir, drafter_dir, prompt="hello world", n=48):
    """mlx-vlm's own greedy generation of n tokens, without and with the drafter:
    (text alone, text drafted, drafted, accepted)."""
    from mlx_vlm import generate, load
    from mlx_vlm.speculative.drafters import load_drafter
    model, processor = load(str(trunk_dir))
    model.set_dtype(mx.float32)  # MLX's CPU gather-matmul runs in float32 only
    drafter, kind = load_drafter(str(drafter_dir))
    drafter.set_dtype(mx.float32)
    alone = generate(model, processor, prompt, max_tokens=n, temperature=0.0)
    res = generate(model, processor, prompt, max_tokens=n, draft_model=drafter, draft_kind=kind, temperature=0.0)
    return alone.text, res.text, sum(drafter.draft_lens), sum(drafter.accept_lens)


@pytest.mark.parametrize("precision", ["bf16", "int8", "int4"])
@pytest.mark.parametrize("key", ["rigged", "5.3-rigged"])
def test_mlx_vlm_drafts_rigged(mtpconv, dsa_dirs, tmp_path, key, precision):
    src = dsa_dirs[key]
    out = export(mtpconv, src, tmp_path / "drafter", "--target", "mlx", "--head-precision", precision)
    alone, text, drafted_n, accepted = mlx_drafting(dsa_dirs[TRUNK_OF.get(key, key)], out)
    print(f"mlx-vlm rigged {GLM[key]} {precision}: drafted {drafted_n}, accepted {accepted}")
    assert text == alone and len(text) > 20
    assert drafted_n >= 20
    assert accepted / drafted_n >= 0.95


@pytest.mark.parametrize("key,trunk", [("plain", "rigged"), ("5.3", "5.3-dequant-rigged")])
def test_mlx_vlm_drafts_plain_head(mtpconv, dsa_dirs, tmp_path, key, trunk):
    """The plain fixture's head next to the rigged trunk (the plain trunk's greedy
    text leaves the tiny tokenizer's vocabulary, which mlx-vlm's detokenizer
    cannot print): mlx-vlm drafts with it, the text is still the trunk's alone,
    and it rejects drafts: the acceptance count above can fail."""
    out = export(mtpconv, dsa_dirs[key], tmp_path / "drafter", "--target", "mlx")
    alone, text, drafted_n, accepted = mlx_drafting(dsa_dirs[trunk], out)
    print(f"mlx-vlm {GLM[key]} head on the rigged trunk, bf16: drafted {drafted_n}, accepted {accepted}")
    assert text == alone and drafted_n > 0
    assert accepted < 0.5 * drafted_n

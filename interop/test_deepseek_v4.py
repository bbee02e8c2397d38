"""DeepSeek-V4 (deepseek_v4): what the pinned consumers do with the release
layout, on the fixtures (cmd/mkfixtures deepseek-v4-tiny and its rigged twin:
FP4 routed experts with E8M0 scales, hash routing, compressing layers, the
mtp.0 head), and what mtpconv writes of it: the reference tools' outputs
are the baselines, each in the runtime's own loop, and mtpconv's sidecar
meets llama.cpp's:

- llama.cpp: the reference converter's `--mtp` sidecar (deepseek4) of the
  fixture is what testdata/gguf_reference records (tensor for tensor, key for
  key), and llama.cpp drafts with it next to the converter's committed
  `--no-mtp` trunk: on the rigged twin >= 95 % of the drafts accepted with
  the greedy text of the trunk alone; on the plain fixture (random weights)
  few accepted.
- mlx-vlm: its own deepseek_v4_mtp splitter's drafter (the FP4 experts kept
  as mxfp4, the only form the splitter writes from an FP4 release) drafts in
  its own speculative loop next to its deepseek_v4 trunk: rigged >= 95 %,
  plain few.
- the numpy reference of the MTP layer with its hyper-connections
  (interop/reference_nextn.py DeepSeekV4Reference) agrees with mlx-vlm's
  drafter (float32, to 1e-4 of the largest logit) and with llama.cpp's MTP
  logits for the converter's sidecar fed llama.cpp's own h_nextn streams
  (interop/mtp_logits.cpp; within 3 %: bf16 weights and the Q8_0 eh_proj the
  converter forces), the same argmax at every position.
- mtpconv's --target gguf sidecar is the converter's record (provenance keys
  aside) and llama.cpp drafts with it as with the converter's: rigged >= 95 %
  with the trunk's greedy text, plain few; so is its sidecar of the block-FP8
  twin (deepseek-v4-fp8-tiny: ue8m0-scaled matrices dequantized into Q8_0),
  which llama.cpp loads and drafts with (few accepted: random weights); its --target mlx drafter is the
  splitter's (tensors, config.json) and drafts in mlx-vlm's loop likewise.
  openvino is refused in one sentence.
- --target hf: the head repo's FP4 experts, decoded to bf16 (a repo of the
  head alone has no quantization config), equal numpy's decode of the
  release's codes and E8M0 scales; vLLM's CPU backend cannot draft with any
  DeepSeek-V4 repo: its MTP class raises "not implemented on CPU"
  (models/deepseek_v4/cpu/mtp.py:15-19), measured on a bf16 copy its trunk
  loads (the rules are checked in test_vllm_rules.py instead).
"""
import json
import subprocess
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

import hf_repos
import reference_gguf
import vllm_server
from conftest import ROOT
from mlx_vlm_loop import NEW_TOKENS, acceptance, greedy as mlx_greedy, load_drafter, make_fixtures
from nextn_gguf import run_mtp_logits
from reference_nextn import DeepSeekV4Reference
from test_glm_gguf import TOKENS, mtp_logits  # noqa: F401  (session fixture)
from test_gguf import greedy, speculative
from test_gguf import llama_bin  # noqa: F401  (session fixture)

FIXTURES = {"plain": "deepseek-v4-tiny", "rigged": "deepseek-v4-tiny-rigged", "fp8": "deepseek-v4-fp8-tiny",
            "fp8-rigged": "deepseek-v4-fp8-tiny-rigged", "fp8-blocks": "deepseek-v4-fp8-blocks-tiny",
            "fp8-blocks-rigged": "deepseek-v4-fp8-blocks-tiny-rigged"}
REFERENCE = ROOT / "testdata" / "gguf_reference"


@pytest.fixture(scope="module")
def dirs():
    return make_fixtures(FIXTURES)


@pytest.mark.parametrize("target,why", [("openvino", "runs Qwen3.5 heads only")])
def test_mtpconv_refuses_deepseek_v4(mtpconv, dirs, tmp_path, target, why):
    res = subprocess.run([str(mtpconv), "export", "--src", str(dirs["plain"]), "--out", str(tmp_path / "out"), "--target", target],
                         capture_output=True, text=True)
    assert res.returncode != 0
    assert why in res.stderr, res.stderr
    assert not (tmp_path / "out").exists()


E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def decode_fp4(tensors, name):
    """numpy's decode of an FP4 weight (I8 codes two to a byte, value 2i in
    the low nibble) with its E8M0 .scale per 32 inputs, as float32."""
    _, shape, data = tensors[name]
    codes = np.frombuffer(data, np.uint8).reshape(shape)
    vals = np.stack([E2M1[codes & 15], E2M1[codes >> 4]], -1).reshape(shape[0], shape[1] * 2)
    _, sshape, sdata = tensors[name[:-len(".weight")] + ".scale"]
    e = np.frombuffer(sdata, np.uint8).reshape(sshape).astype(np.float32)
    return vals * np.repeat(np.exp2(e - 127), vals.shape[1] // sshape[1], axis=1)


def test_hf_head_decodes_fp4_as_numpy(mtpconv, dirs, tmp_path):
    out = tmp_path / "head"
    subprocess.run([str(mtpconv), "export", "--src", str(dirs["plain"]), "--target", "hf", "--out", str(out), "--quiet"], check=True)
    src, got = hf_repos.read_shards(dirs["plain"]), hf_repos.read_shards(out)
    experts = [k for k, (dt, _, _) in src.items() if k.startswith("mtp.") and dt == "I8" and k.endswith(".weight")]
    assert len(experts) == 24, experts  # 8 experts x w1, w2, w3
    for k in experts:
        want = hf_repos.f32_to_bf16(decode_fp4(src, k))
        dt, shape, data = got[k]
        assert dt == "BF16" and list(shape) == list(want.shape), (k, dt, shape)
        assert np.frombuffer(data, np.uint16).tobytes() == want.tobytes(), k
    assert not any(k.endswith(".scale") for k in got)
    print(f"{len(experts)} FP4 expert tensors decoded to bf16 equal numpy's decode")


def test_vllm_cpu_cannot_draft_deepseek_v4(dirs, tmp_path):
    """A bf16 copy of the fixture vLLM's CPU trunk loads (FP4 experts decoded,
    no quantization config, every compress ratio 0: the compressor's fused
    quant+cache takes head_dim 128 or 512, compressor.py:311-314): with
    speculative_config mtp the engine stops on DeepSeekV4MTP's CPU stub."""
    src = hf_repos.read_shards(dirs["plain"])
    cfg = json.loads((dirs["plain"] / "config.json").read_text())
    cfg["compress_ratios"] = [0] * len(cfg["compress_ratios"])
    out = {}
    for k, v in src.items():
        if ".compressor." in k or ".indexer." in k or (k.endswith(".scale") and src.get(k[:-6] + ".weight", ("",))[0] == "I8"):
            continue
        if v[0] == "I8" and k.endswith(".weight") and k[:-7] + ".scale" in src:
            w = decode_fp4(src, k)
            v = ("BF16", list(w.shape), hf_repos.f32_to_bf16(w).tobytes())
        out[k] = v
    repo = tmp_path / "bf16"
    repo.mkdir()
    hf_repos.write_safetensors(repo / "model.safetensors", out)
    (repo / "config.json").write_text(json.dumps(cfg, indent=2))
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        (repo / f).write_bytes((dirs["plain"] / f).read_bytes())
    got = vllm_server.run_jobs([{"id": "mtp", "model": str(repo), "mtp": True}], tmp_path, ["hello"], 4)["mtp"]
    print("vLLM:", got.get("error"))
    assert "DeepSeek-V4 speculative decoding (MTP) is not implemented on CPU" in got.get("error", ""), got


# Keys that name the file rather than describe the model (the converter's
# general.name from the folder, size_label from its parameter count).
PROVENANCE = {"general.name", "general.size_label"}


@pytest.fixture(scope="module")
def our_sidecars(dirs, mtpconv, tmp_path_factory):
    """mtpconv's --target gguf sidecar of each fixture (key -> file)."""
    made = {}

    def of(key):
        if key not in made:
            out = tmp_path_factory.mktemp("ours-" + key) / "out"
            subprocess.run([str(mtpconv), "export", "--src", str(dirs[key]), "--out", str(out), "--target", "gguf"],
                           check=True, capture_output=True)
            (made[key],) = out.glob("mtp-*.gguf")
        return made[key]
    return of


@pytest.mark.parametrize("key", ["plain", "rigged", "fp8", "fp8-rigged"])
def test_llama_drafts_with_mtpconv_sidecar(our_sidecars, llama_bin, key):
    """mtpconv's sidecar is the converter's (the record) tensor for tensor
    and key for key, and llama.cpp drafts with it next to the converter's
    trunk: rigged >= 95 % with the greedy text of the trunk alone, plain few."""
    import gguf
    name = FIXTURES[key]
    sidecar = our_sidecars(key)
    rec = json.loads((REFERENCE / f"{name}-bf16.json").read_text())
    got = reference_gguf.describe(str(sidecar), gguf)
    # In the target's order (every family's sidecar: shared tensors, then
    # the block), not the converter's.
    by_name = lambda ts: sorted(ts, key=lambda t: t["name"])  # noqa: E731
    assert by_name(got["tensors"]) == by_name(rec["tensors"])
    strip = lambda md: {k: v for k, v in md.items() if k not in PROVENANCE}  # noqa: E731
    assert list(strip(got["metadata"])) == list(strip(rec["metadata"])) and strip(got["metadata"]) == strip(rec["metadata"])
    llama_drafts(llama_bin, key, sidecar, "mtpconv sidecar")


@pytest.fixture(scope="module")
def sidecars(dirs, llama_bin, tmp_path_factory):
    """The converter's sidecar of each fixture (key -> file), made once."""
    made = {}

    def of(key):
        if key not in made:
            made[key] = converter_sidecar(llama_bin, dirs[key], tmp_path_factory.mktemp("conv-" + key))
        return made[key]
    return of


def converter_sidecar(llama_bin, src, tmp):
    """The pinned converter's `--mtp` sidecar of src (vendored in the sdist
    scripts/build-llama.sh unpacked next to llama_bin; run by the vLLM venv's
    torch; the pre-tokenizer answered as for DeepSeek-V3's tokenizer, as
    interop/reference_gguf.py records it)."""
    (llama,) = (llama_bin.parent / "src").glob("llama_cpp_python-*/vendor/llama.cpp")
    out = tmp / "conv"
    out.mkdir()
    subprocess.run([str(vllm_server.python()), "-c", reference_gguf.RUNNER, str(llama), "deepseek-v3", str(src),
                    "--mtp", "--outtype", "bf16", "--outfile", str(out)], check=True, capture_output=True)
    (f,) = out.glob("*.gguf")
    return f


@pytest.mark.parametrize("key", ["plain", "rigged"])
def test_llama_drafts_with_converter_sidecar(sidecars, llama_bin, key):
    import gguf
    name = FIXTURES[key]
    sidecar = sidecars(key)
    rec = json.loads((REFERENCE / f"{name}-bf16.json").read_text())
    got = reference_gguf.describe(str(sidecar), gguf)
    assert got["metadata"] == rec["metadata"] and got["tensors"] == rec["tensors"]
    types = {t["name"]: t["type"] for t in rec["tensors"]}
    # The converter's layout of the head, as its DeepseekV4Model writes it.
    assert types["blk.4.ffn_gate_exps.weight"] == "MXFP4" and types["blk.4.nextn.eh_proj.weight"] == "Q8_0"
    assert "output_hc_fn.weight" in types and rec["metadata"]["deepseek4.embedding_length_out"]["value"] == 4 * 128
    llama_drafts(llama_bin, key, sidecar, "converter sidecar")


def llama_drafts(llama_bin, key, sidecar, what):
    """llama.cpp drafts with sidecar next to the converter's --no-mtp trunk:
    rigged >= 95 % accepted with the trunk's greedy text, plain few. The
    FP8 release's sidecar (its block-FP8 matrices Q8_0) drafts next to the
    plain fixture's trunk (the same dimensions; its own weights, so few
    accepted), its rigged twin's next to its own converter trunk."""
    trunk = REFERENCE / f"{FIXTURES['plain' if key == 'fp8' else key]}-nomtp-bf16.gguf"
    want = greedy(llama_bin, trunk, 64)
    text, stats = speculative(llama_bin, trunk, sidecar)
    print(f"deepseek_v4 {key}: {what} in llama.cpp: drafted {stats['n_drafted']:.0f}, "
          f"accepted {stats['n_accept']:.0f} ({stats['accept']:.1f}%)")
    assert stats["n_drafted"] >= 30
    if key.endswith("rigged"):
        assert len(text) > 52 and want.startswith(text)
        assert stats["n_accept"] >= 0.95 * stats["n_drafted"]
    else:
        # No greedy-text check here: on random weights llama.cpp's deepseek4
        # graph verifying a batch of drafts does not compute the logits one-token
        # decoding does bit for bit, and near-ties flip (the text parts after
        # about 45 bytes with the converter's own sidecar).
        assert stats["n_accept"] < 0.5 * stats["n_drafted"]


def load_trunk(src, tmp):
    """mlx-vlm's deepseek_v4 model of the fixture, loaded strictly in float32.
    mlx-vlm's sanitize keeps the FP4 experts as mxfp4 (codes viewed as uint32,
    the E8M0 scales as they are) but reads no quantization from a release's
    config.json: the folder's config names the experts' modules mxfp4, as an
    MLX conversion of the release does."""
    from mlx_vlm.utils import load_model
    folder = tmp / "trunk"
    folder.mkdir()
    for f in src.iterdir():
        if f.name != "config.json":
            (folder / f.name).symlink_to(f)
    cfg = json.loads((src / "config.json").read_text())
    q = {"group_size": 64, "bits": 8, "mode": "affine"}
    for i in range(cfg["num_hidden_layers"]):
        for p in ("gate_proj", "up_proj", "down_proj"):
            q[f"language_model.model.layers.{i}.ffn.switch_mlp.{p}"] = {"group_size": 32, "bits": 4, "mode": "mxfp4"}
    (folder / "config.json").write_text(json.dumps({**cfg, "quantization": q}))
    model = load_model(folder, strict=True)
    model.set_dtype(mx.float32)
    return model


@pytest.mark.parametrize("key", ["plain", "rigged"])
def test_mlx_vlm_drafts_with_splitter_drafter(dirs, tmp_path, key):
    from mlx_vlm.speculative.drafters.deepseek_v4_mtp.split import split_deepseek_v4_mtp
    ref = Path(split_deepseek_v4_mtp(str(dirs[key]), str(tmp_path / "ref")))
    cfg = json.loads((ref / "config.json").read_text())
    assert cfg["model_type"] == "deepseek_v4_mtp" and cfg["block_size"] == 2
    # From the FP4 release the splitter keeps the experts mxfp4 whatever is
    # asked (its quantization_from_source wins over q_bits): one form only.
    assert cfg["quantization"]["decoder.ffn.switch_mlp.gate_proj"] == {"group_size": 32, "bits": 4, "mode": "mxfp4"}
    w = mx.load(str(ref / "model.safetensors"))
    assert w["decoder.ffn.switch_mlp.gate_proj.weight"].dtype == mx.uint32
    assert w["decoder.ffn.switch_mlp.gate_proj.scales"].dtype == mx.uint8
    assert w["hc_head.fn"].shape == (4, 4 * 128) and w["e_proj.weight"].shape == (128, 128)
    mlx_drafts(dirs, tmp_path, key, ref, "mlx-vlm splitter drafter")


def mlx_drafts(dirs, tmp_path, key, folder, what):
    """mlx-vlm's own MTP loop drafts with the drafter folder next to its
    trunk: the no-draft tokens; rigged >= 95 % accepted, plain few. A block-FP8
    trunk is loaded with deepseek_v4's own quantization config (its FP8
    weights mxfp8, as mlx-vlm's sanitize keeps them)."""
    if key.startswith("fp8"):
        from test_dspark import load_v4_trunk
        model = load_v4_trunk(dirs[key], tmp_path / "trunk")
    else:
        model = load_trunk(dirs[key], tmp_path)
    want = mlx_greedy(model)
    drafter = load_drafter(folder)
    got = mlx_greedy(model, drafter)
    drafted, accepted = acceptance(drafter)
    print(f"deepseek_v4 {key}: {what} in mlx-vlm: drafted {drafted}, accepted {accepted} "
          f"({100 * accepted / max(drafted, 1):.1f}%)")
    assert got == want
    assert drafted >= NEW_TOKENS // 2
    if key.endswith("rigged"):
        assert accepted >= 0.95 * drafted
    else:
        assert accepted < 0.5 * drafted


def test_drafter_equals_mlx_vlm_splitter(mtpconv, dirs, tmp_path):
    """Our --target mlx drafter is what mlx-vlm's deepseek_v4_mtp splitter
    writes from the FP4 release, tensor for tensor and byte for byte in
    config.json: the experts' codes and scales the release's own bytes
    (mxfp4), everything else as stored; other precisions are refused."""
    from conftest import export
    from mlx_vlm.speculative.drafters.deepseek_v4_mtp.split import split_deepseek_v4_mtp
    from mlx_vlm_loop import bf16_drafters
    from test_glm import assert_same_drafter
    ours, ref = bf16_drafters(mtpconv, dirs["plain"], tmp_path, split_deepseek_v4_mtp)
    got = assert_same_drafter(ours, Path(ref))
    assert (ours / "config.json").read_bytes() == (Path(ref) / "config.json").read_bytes()
    assert got["decoder.ffn.switch_mlp.down_proj.weight"].dtype == mx.uint32
    assert got["decoder.attn.wo_a.weight"].shape == (2, 32, 128)
    man = json.loads((ours / "mtpconv-manifest.json").read_text())
    moved = {t["name"]: [x["name"] for x in t["transforms"] or []] for t in man["tensors"]}
    assert moved["decoder.ffn.switch_mlp.gate_proj.weight"] == ["stack_experts", "move_mxfp4"]
    res = subprocess.run([str(mtpconv), "export", "--src", str(dirs["plain"]), "--out", str(tmp_path / "int4"), "--target", "mlx",
                          "--head-precision", "int4"], capture_output=True, text=True)
    assert res.returncode != 0 and "ignores any quantization asked" in res.stderr, res.stderr
    assert not (tmp_path / "int4").exists()


def test_fp8_drafter_equals_mlx_vlm_splitter(mtpconv, dirs, tmp_path):
    """From the block-FP8 release (whole 128 x 128 blocks) our --target mlx drafter is what mlx-vlm's
    deepseek_v4_mtp splitter writes, tensor for tensor and config.json byte for byte: every FP8 weight
    mxfp8 (the e4m3 codes as uint32 words, each block's ue8m0 scale repeated per 32 inputs), the FP4
    experts mxfp4; verify --src recomputes every tensor from the release's bytes. In partial blocks (the
    release's widths are whole blocks; deepseek-v4-fp8-tiny's are not) the splitter's repeated scales do
    not fit the weights and its folder does not load: mtpconv refuses, naming the tensor."""
    from mlx_vlm.speculative.drafters import load_drafter as load
    from mlx_vlm.speculative.drafters.deepseek_v4_mtp.split import split_deepseek_v4_mtp
    from mlx_vlm_loop import bf16_drafters
    from test_glm import assert_same_drafter
    from mlx_vlm.speculative.drafters.deepseek_v4_mtp.split import DeepseekV4MTPSplitter
    ours, ref = bf16_drafters(mtpconv, dirs["fp8-blocks"], tmp_path, split_deepseek_v4_mtp)
    got = assert_same_drafter(ours, Path(ref))
    # The one form the splitter writes from the FP8 release too: a quantization asked is ignored (its
    # transform_fp8_weights finds no weight_scale_inv to requantize; quantization_from_source wins).
    asked = DeepseekV4MTPSplitter().split(str(tmp_path / "src"), str(tmp_path / "q4"), q_bits=4, q_group_size=64)
    assert_same_drafter(asked, Path(ref))
    assert (asked / "config.json").read_bytes() == (Path(ref) / "config.json").read_bytes()
    assert (ours / "config.json").read_bytes() == (Path(ref) / "config.json").read_bytes()
    q = json.loads((ours / "config.json").read_text())["quantization"]
    for m in ("e_proj", "h_proj", "decoder.attn.wkv", "decoder.attn.wo_a", "decoder.ffn.shared_experts.down_proj"):
        assert q[m] == {"group_size": 32, "bits": 8, "mode": "mxfp8"}, m
    assert got["decoder.attn.wq_b.weight"].dtype == mx.uint32 and got["decoder.attn.wq_b.scales"].shape == (512, 4)
    assert got["decoder.attn.wo_a.weight"].shape == (2, 128, 64) and got["decoder.attn.wo_a.scales"].shape == (2, 128, 8)
    man = json.loads((ours / "mtpconv-manifest.json").read_text())
    moved = {t["name"]: [x["name"] for x in t["transforms"] or []] for t in man["tensors"]}
    assert moved["e_proj.weight"] == ["move_mxfp8"] and moved["decoder.attn.wkv.weight"] == ["move_mxfp8"]
    res = subprocess.run([str(mtpconv), "verify", "--src", str(tmp_path / "src"), str(ours)], capture_output=True, text=True)
    assert res.returncode == 0 and "32 recomputed from the source: OK" in res.stdout, res.stdout + res.stderr
    load(str(ours))
    partial = tmp_path / "partial-ref"
    split_deepseek_v4_mtp(str(dirs["fp8"]), str(partial))
    with pytest.raises(ValueError, match="Expected shape"):
        load(str(partial))
    res = subprocess.run([str(mtpconv), "export", "--src", str(dirs["fp8"]), "--out", str(tmp_path / "partial"), "--target", "mlx"],
                         capture_output=True, text=True)
    assert res.returncode != 0 and "is not whole 128 × 128 blocks" in res.stderr, res.stderr
    assert not (tmp_path / "partial").exists()


@pytest.mark.parametrize("key", ["plain", "rigged", "fp8-blocks", "fp8-blocks-rigged"])
def test_mlx_vlm_drafts_with_mtpconv_drafter(mtpconv, dirs, tmp_path, key):
    """mlx-vlm's own MTP loop drafts with our drafter next to its trunk: the
    greedy tokens equal the no-draft ones; rigged >= 95 % accepted, plain few."""
    from conftest import export
    mlx_drafts(dirs, tmp_path, key, export(mtpconv, dirs[key], tmp_path / "ours", "--target", "mlx"), "mtpconv drafter")


def test_reference_agrees_with_mlx_vlm_drafter(dirs, tmp_path):
    """mlx-vlm's drafter (the splitter's folder, float32) fed random trunk
    streams: its logits are the numpy reference's."""
    import numpy as np
    from mlx_vlm.speculative.drafters.deepseek_v4_mtp.split import split_deepseek_v4_mtp
    drafter = load_drafter(split_deepseek_v4_mtp(str(dirs["plain"]), str(tmp_path / "ref")))
    ref = DeepSeekV4Reference(dirs["plain"])
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 320, len(TOKENS))
    hidden = rng.standard_normal((len(tokens), 4, 128))
    drafter._next_position = 1  # past the drafter's position 0, whose embedding its loop zeroes
    embed = mx.array(ref.w["embed.weight"].astype(np.float32)[tokens][None])
    h, _ = drafter._forward_hidden(embed, mx.array(hidden[None].astype(np.float32)), mx.array(tokens[None]), None)
    got = np.array(h[0]).astype(np.float64) @ ref.w["head.weight"].T
    want = ref.nextn_logits(tokens, hidden, np.arange(1, len(tokens) + 1))
    err = np.abs(got - want).max() / np.abs(want).max()
    print(f"deepseek_v4: mlx-vlm drafter against the numpy reference: max logit error {err:.1e} of the largest")
    assert (got.argmax(-1) == want.argmax(-1)).all()
    assert err < 1e-4, err


def test_reference_agrees_with_llama_cpp(dirs, sidecars, mtp_logits):
    """llama.cpp's MTP logits for the converter's sidecar, each row fed the
    trunk's h_nextn of the row before (its 4 streams, 512 wide), are the
    numpy reference's."""
    import numpy as np
    got = run_mtp_logits(mtp_logits, REFERENCE / f"{FIXTURES['plain']}-nomtp-bf16.gguf", sidecars("plain"), TOKENS)
    hidden = np.array(got["h"])
    assert hidden.shape == (len(TOKENS), 4 * 128)
    ref = DeepSeekV4Reference(dirs["plain"])
    want = ref.nextn_logits(np.array(TOKENS[1:]), hidden[:-1].reshape(-1, 4, 128), np.arange(1, len(TOKENS)))
    mtp = np.array(got["mtp"])
    err = np.abs(mtp - want).max() / np.abs(want).max()
    print(f"deepseek_v4: llama.cpp MTP logits against the numpy reference: max error {err:.1e} of the largest")
    assert (mtp.argmax(-1) == want.argmax(-1)).all()
    assert err < 0.03, err

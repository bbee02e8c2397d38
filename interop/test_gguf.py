"""--target gguf against llama.cpp itself (built by scripts/build-llama.sh from
the llama-cpp-python 0.3.36 sdist) and gguf-py (gguf 0.19.0), for the MoE
fixtures (qwen35moe, qwen3next) and the dense one (qwen35):

- our bf16/f16 sidecars hold exactly the tensors and metadata of the reference
  converter's `convert_hf_to_gguf.py --mtp` (recorded by interop/reference_gguf.py;
  general.name and general.size_label excepted), read back by gguf-py;
- our quantized sidecars are byte for byte what llama-quantize makes of our bf16 one;
- llama.cpp loads a trunk GGUF with our sidecar and drafts with --spec-type
  draft-mtp: greedy output with MTP equals greedy output without;
- on a rigged checkpoint (residual branches zeroed, norms 1, mtp.fc = [I | 0])
  the MTP head predicts what the trunk will, and llama.cpp accepts >= 95% of
  its drafts at every precision.
"""
import hashlib
import json
import os
import re
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, export

gguf = pytest.importorskip("gguf")  # pinned in interop/requirements.txt

TOKENIZER = ROOT / "testdata" / "tokenizer-tiny"
REFERENCE = ROOT / "testdata" / "gguf_reference"
PROVENANCE = {"general.name", "general.size_label"}
PROMPT = "the quick brown fox"
FIRST_SPECIAL = 320  # testdata/tokenizer-tiny: ids 320.. are special tokens, then [PAD] up to vocab_size


@pytest.fixture(scope="session")
def llama_bin():
    res = subprocess.run([str(ROOT / "scripts" / "build-llama.sh")], cwd=ROOT, check=True, capture_output=True, text=True)
    return Path(res.stdout.split()[-1])


@pytest.fixture(scope="session")
def ggtrunk(tmp_path_factory):
    out = tmp_path_factory.mktemp("bin") / "ggtrunk"
    subprocess.run(["go", "build", "-o", str(out), "./internal/ggtrunk"], cwd=ROOT, check=True)
    return out


def with_tokenizer(src, dst):
    """A folder with the fixture's files and the tiny test tokenizer, linked."""
    dst.mkdir(parents=True)
    for d in (Path(src), TOKENIZER):
        for f in d.iterdir():
            os.symlink(f, dst / f.name)
    return dst


def describe(path):
    """What interop/reference_gguf.py records of a GGUF file."""
    import sys
    sys.path.insert(0, str(ROOT / "interop"))
    from reference_gguf import describe as d
    return d(str(path), gguf)


def sidecar(mtpconv, src, out, precision):
    export(mtpconv, src, out, "--target", "gguf", "--head-precision", precision)
    files = list(Path(out).glob("*.gguf"))
    assert len(files) == 1, files
    return files[0]


@pytest.mark.parametrize("fx", ["a", "b", "c", "dense"])
@pytest.mark.parametrize("precision", ["bf16", "f16"])
def test_sidecar_equals_reference(mtpconv, fixture_dirs, tmp_path, fx, precision):
    name = fixture_dirs[fx].name
    ref = json.loads((REFERENCE / f"{name}-{precision}.json").read_text())
    src = with_tokenizer(fixture_dirs[fx], tmp_path / name)
    ours = describe(sidecar(mtpconv, src, tmp_path / "out", precision))
    assert {t["name"]: t for t in ours["tensors"]} == {t["name"]: t for t in ref["tensors"]}
    strip = lambda m: {k: v for k, v in m.items() if k not in PROVENANCE}
    assert strip(ours["metadata"]) == strip(ref["metadata"])


# What llama.cpp's own gguf-py (the copy vendored with it, which
# convert_hf_to_gguf.py imports: newer than the gguf wheel) writes from
# SpecialVocab, key by key in order. Run apart: the test process has the
# gguf wheel imported under the same name.
SPECIAL_VOCAB = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import gguf
sv = gguf.SpecialVocab(sys.argv[2], load_merges=True)
w = gguf.GGUFWriter(None, "qwen35moe")
sv.add_to_gguf(w, quiet=True)
print(json.dumps([[k, v.value] for k, v in w.kv_data[0].items() if k.startswith("tokenizer.")]))
'''

BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}


def special(tok):
    return {"SpecialToken": {"id": tok, "type_id": 0}}


SEQ_A, SEQ_B = {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}

# (post_processor or "keep", normalizer or "keep", tokenizer_config.json or None (absent) or "keep", extra files)
SPECIAL_CASES = {
    "test tokenizer": ("keep", "keep", "keep", {}),
    "no post_processor": (None, "keep", '{"add_eos_token": true, "bos_token": {"content": "<|im_start|>"}}', {}),
    "ByteLevel in a Sequence, add_bos_token true": ({"type": "Sequence", "processors": [BYTE_LEVEL]}, "keep",
                                                    '{"add_bos_token": true, "eos_token": "<|im_end|>"}', {}),
    "TemplateProcessing bos A eos": ({"type": "TemplateProcessing", "single": [special("<|im_start|>"), SEQ_A, special("<|im_end|>")],
                                      "pair": [special("<|im_start|>"), SEQ_A, special("<|im_end|>"), SEQ_B, special("<|im_end|>")]},
                                     "keep", '{"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "add_bos_token": false}', {}),
    "TemplateProcessing, another trailing token": ({"type": "TemplateProcessing", "single": [SEQ_A, special("<|endoftext|>")]},
                                                   "keep", '{"eos_token": "<|im_end|>"}', {}),
    "TemplateProcessing pair with a separator": ({"type": "TemplateProcessing", "single": [special("<|im_start|>"), SEQ_A],
                                                  "pair": [special("<|im_start|>"), SEQ_A, special("<|im_end|>"), SEQ_B]},
                                                 "keep", '{"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}', {}),
    "RobertaProcessing": ({"type": "RobertaProcessing", "sep": ["<|im_end|>", 322], "cls": ["<|im_start|>", 321]}, "keep",
                          '{"eos_token": "<|im_end|>"}', {}),
    "cls stands in for bos": (None, "keep", '{"eos_token": "<|im_end|>", "cls_token": "<|im_start|>"}', {}),
    "no tokenizer_config.json": ("keep", "keep", None, {"chat_template.jinja": "jinja"}),
    "empty tokenizer_config.json": ("keep", "keep", "{}", {"chat_template.jinja": "jinja"}),
    "chat_template.jinja": ("keep", "keep", '{"eos_token": "<|im_end|>"}', {"chat_template.jinja": "jinja"}),
    "chat_template.json": ("keep", "keep", '{"eos_token": "<|im_end|>"}', {"chat_template.json": '{"chat_template": "json"}'}),
    "named chat templates": ("keep", "keep", json.dumps({"eos_token": "<|im_end|>", "chat_template": [
        {"name": "default", "template": "d"}, {"name": "tool use", "template": "t"}]}), {}),
    "normalizer flags": ("keep", {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"},
                                  {"type": "BertNormalizer", "strip_accents": False}]}, "keep", {}),
}


@pytest.mark.parametrize("case", sorted(SPECIAL_CASES))
def test_special_vocab_equals_gguf_py(mtpconv, fixture_dirs, llama_bin, tmp_path, case):
    """Every tokenizer key the reference converter takes from SpecialVocab --
    merges, special token ids, add_bos/add_eos/add_sep (tokenizer_config.json
    and tokenizer.json's post_processor), chat templates, normalizer flags --
    is in our sidecar with the same value, in the same order."""
    post, norm, tc, extra = SPECIAL_CASES[case]
    src = tmp_path / "src"
    src.mkdir()
    for f in Path(fixture_dirs["a"]).iterdir():
        os.symlink(f, src / f.name)
    tj = json.loads((TOKENIZER / "tokenizer.json").read_text())
    if post != "keep":
        tj["post_processor"] = post
    if norm != "keep":
        tj["normalizer"] = norm
    (src / "tokenizer.json").write_text(json.dumps(tj))
    if tc == "keep":
        tc = (TOKENIZER / "tokenizer_config.json").read_text()
    if tc is not None:
        (src / "tokenizer_config.json").write_text(tc)
    for name, body in extra.items():
        (src / name).write_text(body)
    gguf_py = llama_bin.parent / "src" / "llama_cpp_python-0.3.36" / "vendor" / "llama.cpp" / "gguf-py"
    res = subprocess.run([os.sys.executable, "-c", SPECIAL_VOCAB, str(gguf_py), str(src)], check=True, capture_output=True, text=True)
    want = [tuple(kv) for kv in json.loads(res.stdout)]
    r = gguf.GGUFReader(str(sidecar(mtpconv, src, tmp_path / "out", "bf16")))
    skip = {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type"}
    got = [(f.name, f.contents()) for f in r.fields.values() if f.name.startswith("tokenizer.") and f.name not in skip]
    if case == "named chat templates":  # the writer lists the names of a Python set; we sort them
        want = [(k, sorted(v) if k == "tokenizer.chat_templates" else v) for k, v in want]
    assert got == want


def shards(src):
    """(path, header length, header) of each safetensors shard of a folder."""
    out = []
    for f in sorted(Path(src).glob("*.safetensors")):
        raw = f.read_bytes()
        n = struct.unpack("<Q", raw[:8])[0]
        out.append((f, raw, n, json.loads(raw[8:8 + n])))
    return out


def rig(src, dst):
    """The fixture with every residual branch zeroed (o_proj, out_proj, expert,
    shared-expert and dense MLP down projections), every norm 1 (zero-centred norms stored 0,
    linear_attn.norm 1), mtp.fc = [I | 0], and an lm_head whose row v is the
    embedding of token sigma(v) (a permutation of the normal tokens; special and
    unused tokens get zero rows): the trunk then predicts sigma^-1(t) after t with
    a wide margin, and the head's prediction from the next token's embedding is
    the trunk's own next prediction, robust to quantization noise."""
    dst.mkdir(parents=True)
    for f in Path(src).iterdir():
        if not f.name.endswith(".safetensors"):
            os.symlink(f, dst / f.name)
    parts = shards(src)
    emb = None
    for f, raw, n, hdr in parts:
        for name in ("model.language_model.embed_tokens.weight", "model.embed_tokens.weight"):
            if name not in hdr:
                continue
            v = hdr[name]
            b, e = v["data_offsets"]
            emb = np.frombuffer(raw[8 + n + b:8 + n + e], dtype="<u2").reshape(v["shape"])
    assert emb is not None
    for f, raw, n, hdr in parts:
        body = bytearray(raw[8 + n:])
        for k, v in hdr.items():
            if k == "__metadata__":
                continue
            b, e = v["data_offsets"]
            assert v["dtype"] in ("BF16", "F32"), (k, v["dtype"])
            zero = re.search(r"(o_proj|out_proj|down_proj)(\.weight)?$", k) or k.endswith(("layernorm.weight", "q_norm.weight", "k_norm.weight", "pre_fc_norm_embedding.weight", "pre_fc_norm_hidden.weight")) \
                or k in ("model.language_model.norm.weight", "model.norm.weight", "mtp.norm.weight")
            if k.endswith("linear_attn.norm.weight"):
                one = np.ones(v["shape"], dtype="<f4")
                body[b:e] = (one.view("<u4") >> 16).astype("<u2").tobytes() if v["dtype"] == "BF16" else one.tobytes()
            elif k == "mtp.fc.weight":
                h = v["shape"][0]
                w = np.zeros((h, 2 * h), dtype="<u2")
                w[np.arange(h), np.arange(h)] = 0x3F80  # bf16 1.0
                body[b:e] = w.tobytes()
            elif k == "lm_head.weight":
                w = np.zeros(v["shape"], dtype="<u2")
                sigma = (np.arange(FIRST_SPECIAL) * 7 + 3) % FIRST_SPECIAL
                w[:FIRST_SPECIAL] = emb[sigma]
                body[b:e] = w.tobytes()
            elif zero:
                body[b:e] = bytes(e - b)
        (dst / f.name).write_bytes(raw[:8 + n] + bytes(body))
    return dst


def run_llama(llama_bin, tool, *args):
    env = dict(os.environ, LD_LIBRARY_PATH=str(llama_bin))
    res = subprocess.run([str(llama_bin / tool), *map(str, args)], capture_output=True, env=env, timeout=600)
    err = res.stderr.decode(errors="replace")
    assert res.returncode == 0, err[-3000:]
    return res.stdout, err


def greedy(llama_bin, trunk, n=48):
    out, _ = run_llama(llama_bin, "llama-simple", "-m", trunk, "-n", n, PROMPT)
    return out.strip()  # bytes: random weights generate any bytes


def speculative(llama_bin, trunk, draft, n=48, extra=()):
    # llama.cpp's common log is written by a worker thread that the process does
    # not wait for at exit (llama.cpp issue 22142): the end of the output, with
    # the statistics, is sometimes lost. A run whose statistics are missing is
    # run again (the output is deterministic).
    for _ in range(6):
        out, err = run_llama(llama_bin, "llama-speculative-simple", "-m", trunk, "-md", draft, "--spec-type", "draft-mtp",
                             "-p", PROMPT, "-n", n, "--temp", "0", "-c", "512", "-t", "2", *extra)
        stats = {k: float(v) for k, v in re.findall(r"\b(n_drafted|n_accept|accept|n_draft|n_predict)\s*=\s*([0-9.]+)", err)}
        if {"n_drafted", "n_accept", "accept"} <= stats.keys():
            return out.strip(), stats
    raise AssertionError("llama-speculative-simple never printed its statistics:\n" + err[-3000:])


@pytest.mark.parametrize("fx", ["a", "b", "c", "dense"])
def test_llama_drafts_with_sidecar(mtpconv, fixture_dirs, llama_bin, ggtrunk, tmp_path, fx):
    src = with_tokenizer(fixture_dirs[fx], tmp_path / "src")
    trunk = tmp_path / "trunk.gguf"
    subprocess.run([str(ggtrunk), str(src), str(trunk)], check=True)
    draft = sidecar(mtpconv, src, tmp_path / "out", "bf16")
    want = greedy(llama_bin, trunk, 64)
    got, stats = speculative(llama_bin, trunk, draft)
    assert stats["n_drafted"] > 0
    # Both stop at the end-of-generation token, or llama-speculative-simple stops
    # near -n (it may accept past it): then its text is a prefix of the longer plain run.
    assert len(got) > len(PROMPT)
    assert got == want or (len(got) > len(PROMPT) + 32 and want.startswith(got))


@pytest.fixture(scope="session")
def rigged(fixture_dirs, ggtrunk, tmp_path_factory):
    made = {}

    def make(fx):
        if fx not in made:
            d = tmp_path_factory.mktemp("rigged-" + fx)
            src = rig(fixture_dirs[fx], d / "ck")
            for f in TOKENIZER.iterdir():
                os.symlink(f, src / f.name)
            trunk = d / "trunk.gguf"
            subprocess.run([str(ggtrunk), str(src), str(trunk)], check=True)
            made[fx] = src, trunk
        return made[fx]
    return make


@pytest.mark.parametrize("fx", ["a", "c", "dense"])
@pytest.mark.parametrize("precision", ["bf16", "f16", "int8", "int4"])
def test_rigged_acceptance(mtpconv, llama_bin, rigged, tmp_path, fx, precision):
    src, trunk = rigged(fx)
    draft = sidecar(mtpconv, src, tmp_path / "out", precision)
    want = greedy(llama_bin, trunk, 64)
    got, stats = speculative(llama_bin, trunk, draft)
    print(f"rigged {fx} {precision}: drafted {stats['n_drafted']:.0f}, accepted {stats['n_accept']:.0f} ({stats['accept']:.1f}%)")
    assert len(got) > len(PROMPT) + 32 and want.startswith(got)
    assert stats["n_drafted"] >= 30
    assert stats["n_accept"] / stats["n_drafted"] >= 0.95


@pytest.mark.parametrize("fx", ["a", "b", "c", "dense"])
@pytest.mark.parametrize("args", [("--head-precision", "int8", "Q8_0"), ("--head-precision", "int4", "Q4_K_M")] +
                         [("--gguf-type", t, t) for t in ["F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q6_K"]])
def test_quantized_equals_llama_quantize(mtpconv, fixture_dirs, llama_bin, tmp_path, fx, args):
    """Byte for byte, the whole file: what llama-quantize (no imatrix) makes of our bf16 sidecar."""
    flag, value, ftype = args
    src = with_tokenizer(fixture_dirs[fx], tmp_path / "src")
    bf16 = sidecar(mtpconv, src, tmp_path / "bf16", "bf16")
    export(mtpconv, src, tmp_path / "ours", "--target", "gguf", flag, value)
    (ours,) = list((tmp_path / "ours").glob("*.gguf"))
    ref = tmp_path / "ref.gguf"
    run_llama(llama_bin, "llama-quantize", bf16, ref, ftype)
    assert ours.name.endswith(f"-{ftype}.gguf")
    a, b = describe(ours), describe(ref)
    assert a == b  # tensors (types, dims, sha256) and metadata, for a readable diff
    assert ours.read_bytes() == ref.read_bytes()


def test_fallback_types_are_compared(mtpconv, fixture_dirs, tmp_path):
    """The fixtures' rows are not whole 256-blocks, so the test above compares the 32-value types with
    llama-quantize too: Q4_K_S falls back to Q5_0 and Q5_1, and Q4_0 is its own."""
    src = with_tokenizer(fixture_dirs["a"], tmp_path / "src")
    types = set()
    for ftype in ["Q4_K_S", "Q4_0"]:
        export(mtpconv, src, tmp_path / ftype, "--target", "gguf", "--gguf-type", ftype)
        (out,) = (tmp_path / ftype).glob("*.gguf")
        types |= {t.tensor_type.name for t in gguf.GGUFReader(out).tensors}
    assert {"Q4_0", "Q5_0", "Q5_1"} <= types, types


KERNEL_TYPES = ["Q8_0", "Q4_0", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]


@pytest.fixture(scope="session")
def kernels(llama_bin, tmp_path_factory):
    """Our Go kernels (internal/ggquant) and libggml's (interop/ggml_quant.c, built against the pinned build)."""
    d = tmp_path_factory.mktemp("kernels")
    inc = next(llama_bin.parent.glob("src/llama_cpp_python-*/vendor/llama.cpp/ggml/include"))
    subprocess.run(["cc", "-O2", "-o", str(d / "ggml_quant"), str(ROOT / "interop" / "ggml_quant.c"), f"-I{inc}",
                    f"-L{llama_bin}", "-lggml-base", f"-Wl,-rpath,{llama_bin}"], check=True)
    subprocess.run(["go", "build", "-o", str(d / "ggquant"), "./internal/ggquant"], cwd=ROOT, check=True)
    return d


def kernel_inputs():
    rng = np.random.default_rng(7)
    n = 256 * 64
    normal = rng.standard_normal(n).astype(np.float32)
    return {
        "normal": normal,
        "uniform": rng.uniform(-3, 5, n).astype(np.float32),
        "sparse": (normal * (rng.random(n) < 0.1)).astype(np.float32),
        "tiny": (normal * 1e-6).astype(np.float32),
        "huge": (normal * 1e4).astype(np.float32),
        "positive": np.abs(normal),
        "zeros": np.zeros(n, np.float32),
        "bf16": (normal.view(np.uint32) & 0xFFFF0000).view(np.float32),
        "ties": (np.round(normal * 4) / 4).astype(np.float32),
    }


@pytest.mark.parametrize("typ", KERNEL_TYPES)
def test_kernels_equal_ggml(kernels, tmp_path, typ):
    """Our quantizers give libggml's bytes (ggml_quantize_chunk, no imatrix) on every input kind."""
    for name, x in kernel_inputs().items():
        x.tofile(tmp_path / "in.f32")
        for tool, out in (("ggml_quant", "c.bin"), ("ggquant", "go.bin")):
            subprocess.run([str(kernels / tool), typ, "256", str(tmp_path / "in.f32"), str(tmp_path / out)], check=True)
        c, g = (tmp_path / "c.bin").read_bytes(), (tmp_path / "go.bin").read_bytes()
        assert len(c) == len(g) and c == g, f"{typ} on {name}: {sum(a != b for a, b in zip(c, g))} bytes differ"


def test_mxfp4_dequantizer_equals_ggml(kernels, tmp_path):
    """ggml's MXFP4 blocks (DeepSeek-V4's experts in a sidecar: inspect judges
    them) decode as libggml's to_float does, bit for bit: the blocks libggml
    quantizes and random blocks with every scale byte (0xFF included)."""
    rng = np.random.default_rng(11)
    blocks = rng.integers(0, 256, (256, 17), dtype=np.uint8)
    blocks[:, 0] = np.arange(256, dtype=np.uint8)
    inputs = {"random blocks": blocks}
    for name, x in kernel_inputs().items():
        x.tofile(tmp_path / "in.f32")
        subprocess.run([str(kernels / "ggml_quant"), "MXFP4", "256", str(tmp_path / "in.f32"), str(tmp_path / "q.bin")], check=True)
        inputs[name] = np.fromfile(tmp_path / "q.bin", dtype=np.uint8)
    for name, q in inputs.items():
        q.tofile(tmp_path / "q.bin")
        for tool, out in (("ggml_quant", "c.f32"), ("ggquant", "go.f32")):
            subprocess.run([str(kernels / tool), "-d", "MXFP4", "256", str(tmp_path / "q.bin"), str(tmp_path / out)], check=True)
        c, g = (tmp_path / "c.f32").read_bytes(), (tmp_path / "go.f32").read_bytes()
        assert len(c) == len(g) == 4 * 32 * q.size // 17, f"{name}: {len(c)} and {len(g)} bytes"
        assert c == g, f"{name}: {int((np.frombuffer(c, np.uint32) != np.frombuffer(g, np.uint32)).sum())} values differ"


@pytest.mark.parametrize("typ", KERNEL_TYPES)
def test_dequantizers_equal_ggml(kernels, tmp_path, typ):
    """Our dequantizers (quant.DequantizeGGML, behind the head-health checks) give libggml's float32 bits
    (the type's to_float) for the blocks libggml quantized, on every input kind."""
    for name, x in kernel_inputs().items():
        x.tofile(tmp_path / "in.f32")
        subprocess.run([str(kernels / "ggml_quant"), typ, "256", str(tmp_path / "in.f32"), str(tmp_path / "q.bin")], check=True)
        for tool, out in (("ggml_quant", "c.f32"), ("ggquant", "go.f32")):
            subprocess.run([str(kernels / tool), "-d", typ, "256", str(tmp_path / "q.bin"), str(tmp_path / out)], check=True)
        c, g = (tmp_path / "c.f32").read_bytes(), (tmp_path / "go.f32").read_bytes()
        assert len(c) == len(g) == 4 * x.size, f"{typ} on {name}: {len(c)} and {len(g)} bytes"
        assert c == g, f"{typ} on {name}: {int((np.frombuffer(c, np.uint32) != np.frombuffer(g, np.uint32)).sum())} values differ"

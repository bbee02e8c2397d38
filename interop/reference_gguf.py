"""Records what llama.cpp's reference converter writes for our fixtures, for
interop/test_gguf.py to compare our sidecars against. NOT run in CI: it needs
torch, which lives only in a separate, pinned environment:

    VENV=${MTPCONV_CACHE:-~/.cache/mtpconv}/venv-reference
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install torch==2.11.0 numpy==2.4.6 sentencepiece==0.2.3 \
        transformers==5.24.0 'protobuf<5' safetensors==0.8.0 jinja2
    go run ./cmd/mkfixtures qwen3.6-moe-tiny qwen3.5-moe-tiny qwen3-next-tiny qwen3.6-dense-tiny \
        qwen3.6-moe-genai qwen3.6-dense-genai glm4.5-moe-tiny glm4.7-flash-tiny deepseek-v3-tiny deepseek-v3.2-tiny \
        glm5.2-tiny glm5.3-tiny step3.5-flash-tiny step3.7-flash-tiny hy3-tiny ling3-tiny ling3-tiny-rigged nemotron-h-moe-tiny nemotron-h-moe-tiny-rigged \
        mimo-v2.5-tiny mimo-v2.5-fp8-tiny deepseek-v4-tiny deepseek-v4-tiny-rigged deepseek-v4-fp8-tiny deepseek-v4-fp8-tiny-rigged \
        gemma4-assistant-tiny gemma4-assistant-centroid-tiny gemma4-assistant-tiny-rigged gemma4-trunk-tiny gemma4-trunk-tiny-rigged \
        deepseek-v4-flash-0731-dspark-tiny deepseek-v4-flash-0731-dspark-tiny-rigged
    "$VENV/bin/python" interop/reference_gguf.py LLAMA_CPP_DIR [FIXTURE...]

(deepseek-v3-tiny's, deepseek-v3.2-tiny's, glm5.2-tiny's, glm5-tiny's (a VARIANTS entry: glm5.2-tiny's config edited; 2026-12-03), glm5.3-tiny's (2026-12-03, its block-FP8 weights dequantized by the converter), step3.5-flash-tiny's, step3.7-flash-tiny's, hy3-tiny's, ling3-tiny's and nemotron-h-moe-tiny's
(+ -rigged) records, the mimo-v2.5 ones, deepseek-v4-tiny's (+ -rigged, with their --no-mtp trunks; 2026-12-03), deepseek-v4-fp8-tiny's (+ -rigged with its --no-mtp trunk; 2026-12-03: their block-FP8 weights, ue8m0 .scale, dequantized by the converter) the gemma4-* ones (2026-12-03) and the DSpark drafts of deepseek-v4-flash-0731-dspark-tiny (+ -rigged; 2026-12-03:
`--dspark --target-model-dir` the fixture itself, the dflash draft) were made with torch 2.13.0 and transformers 5.19.0, the vLLM CPU venv of scripts/setup-vllm.sh: the
converter reads the same config keys either way. The Nemotron-H fixtures carry the test tokenizer themselves; their
pre-tokenizer is answered as pixtral, and their --no-mtp trunks, committed, are the Mamba-2 trunks
interop/test_nemotron_gguf.py runs llama.cpp on.)

LLAMA_CPP_DIR is vendor/llama.cpp of the llama-cpp-python 0.3.36 sdist
(scripts/build-llama.sh unpacks it under ~/.cache/mtpconv/llama.cpp-0.3.36/src).
The converter runs as `convert_hf_to_gguf.py --mtp --outtype bf16|f16` on a
copy of each fixture with testdata/tokenizer-tiny added (the GLM fixtures
carry their own tokenizer). One thing is patched: the tokenizer's
pre-tokenizer is detected by hashing how it splits a test text, and our tiny
tokenizer's hash is not in the converter's table, so the detection answers
what it answers for the real checkpoints (qwen35 for Qwen3.5/3.6, MoE and
dense, qwen2 for Qwen3-Next and MiMo-V2.5 (a Qwen2-style tokenizer), glm4 for GLM-4.5 and GLM-4.7-Flash; for Hy3, whose
hash the converter lacks, Hy4-preview's hy_v4, and for Ling-3.0 Ling-2.0's
bailingmoe2, as mtpconv writes). Ling-3.0's rigged twin's --no-mtp trunk is
committed too: its interop test drafts next to the converter's own KDA trunks. A
fixture that carries its own tokenizer (MiMo-V2.5's FP8 one) gets none added. For the
GLM fixtures the converter also runs without --mtp (its default: one file
with the trunk and the NextN block), recorded as
{fixture}-bundled-{outtype}.json. With MTPCONV_KEEP_GGUF=DIR the
converter's GLM files are kept in DIR (for runs of llama.cpp on them outside
CI). For DeepSeek-V3.2 one more thing is patched: its set_vocab's assertion on the
tokenizer object's add_bos_token (see RUNNER); for Step-3.5 and 3.7, transformers' step3p5 and step3p7
configuration classes, which the converter's pinned transformers 4.57.6 lacks (see RUNNER). Named fixtures only are
recorded again when any are given. Writes testdata/gguf_reference/*.json:
per tensor its ggml type, dims and sha256; every metadata key with its type
and value (long arrays by sha256).

For the small GenAI-sized fixtures (TRUNKS) it also records what --graft is
checked against: the converter's `--no-mtp` trunk, committed as the file
itself (FIXTURE-nomtp-bf16.gguf, about a megabyte), and its default output,
the trunk with the head bundled (FIXTURE-bundled-bf16.json, with the whole
file's sha256), next to the --mtp sidecar (FIXTURE-bf16.json). For those in
SPLIT_TRUNKS the converter also writes the --no-mtp trunk as a split set
(--split-max-tensors SPLIT_MAX_TENSORS), committed as its files renamed
FIXTURE-nomtp-bf16-0000N-of-0000M.gguf (the converter names them after the
model card), for the split-set graft (interop/test_gguf_split.py). (The
GenAI records of 2026-12-01 evening were made with torch 2.13.0 and
transformers 5.24.0; every tensor's bytes are those of the earlier records,
which predate the test tokenizer's ByteLevel post-processor: the converter
now writes tokenizer.ggml.add_eos_token false, as mtpconv does.)
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = {"qwen3.6-moe-tiny": "qwen35", "qwen3.5-moe-tiny": "qwen35", "qwen3-next-tiny": "qwen2",
            "qwen3.6-dense-tiny": "qwen35", "glm4.5-moe-tiny": "glm4", "glm4.7-flash-tiny": "glm4",
            "glm4.5-moe-tiny-rigged": "glm4", "glm4.7-flash-tiny-rigged": "glm4", "deepseek-v3.2-tiny": "deepseek-v3",
            "glm5.2-tiny": "glm4", "glm5.3-tiny": "glm4", "step3.5-flash-tiny": "deepseek-v3",
            "step3.7-flash-tiny": "deepseek-v3", "hy3-tiny": "hy_v4", "ling3-tiny": "bailingmoe2", "ling3-tiny-rigged": "bailingmoe2",
            "nemotron-h-moe-tiny": "pixtral", "nemotron-h-moe-tiny-rigged": "pixtral",
            "mimo-v2.5-tiny": "qwen2", "mimo-v2.5-fp8-tiny": "qwen2",
            "deepseek-v4-tiny": "deepseek-v3", "deepseek-v4-tiny-rigged": "deepseek-v3", "deepseek-v4-fp8-tiny": "deepseek-v3",
            "deepseek-v4-fp8-tiny-rigged": "deepseek-v3"}
# Variants: a fixture with its config.json edited, recorded as their own
# (--mtp sidecars only). glm5-tiny is glm5.2-tiny as GLM-5 / GLM-5.1 configure
# it: no indexer_types (its modes from index_topk_freq 2, index_skip_topk_offset 1,
# ["full", "shared"] as the fixture's tensors are).
VARIANTS = {"glm5-tiny": ("glm5.2-tiny", lambda c: {**{k: v for k, v in c.items() if k != "indexer_types"},
                                                     "index_topk_freq": 2, "index_skip_topk_offset": 1})}
FIXTURES["glm5-tiny"] = "glm4"
# Fixtures with their own tokenizer, also converted without --mtp (bundled).
OWN_TOKENIZER = {"glm4.5-moe-tiny", "glm4.7-flash-tiny", "glm4.5-moe-tiny-rigged", "glm4.7-flash-tiny-rigged", "deepseek-v3-tiny",
                 "deepseek-v3.2-tiny", "glm5.2-tiny", "glm5.3-tiny", "step3.5-flash-tiny", "step3.7-flash-tiny", "hy3-tiny", "ling3-tiny", "ling3-tiny-rigged",
                 "nemotron-h-moe-tiny", "nemotron-h-moe-tiny-rigged",
                 "mimo-v2.5-tiny"}
OUTTYPES = ["bf16", "f16"]
# Families whose NextN layer the converter drops (DeepseekV2Model.skip_mtp): only
# its default output, the trunk, is recorded ({fixture}-trunk-{outtype}.json), for
# the keys and the shared tensors (token_embd, output_norm, output) the sidecar
# holds too.
TRUNK_ONLY = {"deepseek-v3-tiny": "deepseek-v3"}
# Fixtures of FIXTURES whose --no-mtp trunk is committed too (FIXTURE-nomtp-bf16.gguf)
# and whose bundled records carry the whole file's sha256, for --graft.
WITH_TRUNK = {"deepseek-v3.2-tiny", "glm5.2-tiny", "glm5.3-tiny", "step3.5-flash-tiny", "step3.7-flash-tiny", "hy3-tiny", "ling3-tiny", "ling3-tiny-rigged",
              "nemotron-h-moe-tiny", "nemotron-h-moe-tiny-rigged", "mimo-v2.5-tiny", "deepseek-v4-tiny", "deepseek-v4-tiny-rigged", "deepseek-v4-fp8-tiny-rigged"}
# Fixtures small enough to commit their --no-mtp trunk GGUF.
TRUNKS = {"qwen3.6-moe-genai": "qwen35", "qwen3.6-dense-genai": "qwen35"}
# ... and as a split set.
SPLIT_TRUNKS = {"qwen3.6-moe-genai"}
SPLIT_MAX_TENSORS = 25
# The Gemma-4 assistant (a separate drafter, converted whole, no --mtp) and the
# Gemma-4 trunks it drafts next to; they carry their own Gemma tokenizer. The
# assistants are recorded at both outtypes; the trunks' bf16 files are
# committed (FIXTURE-bf16.gguf) for interop/test_gemma4_gguf.py's llama.cpp runs.
GEMMA4_DRAFTERS = {"gemma4-assistant-tiny", "gemma4-assistant-centroid-tiny", "gemma4-assistant-tiny-rigged"}
GEMMA4_TRUNKS = {"gemma4-trunk-tiny", "gemma4-trunk-tiny-rigged"}
GEMMA4_KEEP = GEMMA4_TRUNKS
# DeepSeek-V4-Flash-0731's DSpark stages: the converter's --dspark draft (dflash), the fixture folder its own
# --target-model-dir (the stages live in the target's checkpoint, which carries the tokenizer), at both outtypes.
DSPARK = {"deepseek-v4-flash-0731-dspark-tiny": "deepseek-v3", "deepseek-v4-flash-0731-dspark-tiny-rigged": "deepseek-v3"}

RUNNER = r'''
import sys, runpy
sys.path.insert(0, sys.argv[1])
sys.path.insert(1, sys.argv[1] + "/gguf-py")
import conversion.base as base
pre = sys.argv[2]
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
# DeepseekV32Model.set_vocab asserts the AutoTokenizer's add_bos_token, which
# transformers 5 no longer sets from tokenizer_config.json when tokenizer.json is
# there; gguf-py's SpecialVocab reads add_bos_token from the file itself, so the
# vocabulary written is the same. The rest of set_vocab is _set_vocab_gpt2.
import conversion.deepseek as deepseek
deepseek.DeepseekV32Model.set_vocab = lambda self: self._set_vocab_gpt2()
# The converter's requirements pin transformers 4.57.6, which has no step3p5
# configuration class, so it reads Step-3.5's config.json as stored (what
# Step35Model.set_gguf_parameters is written for: num_attention_groups,
# moe_num_experts, attention_other_setting, the per-layer lists with their MTP
# entries). A newer transformers (5.19, 5.24) has one, whose to_dict renames and
# trims those keys: the converter is made to read config.json, as with its pin.
# Likewise Step-3.7's step3p7 (its text_config a step3p5 one). GLM-5.x's
# glm_moe_dsa has no configuration class in the pin either, so the converter
# reads config.json as stored: for a GLM-5 / GLM-5.1 config, without
# indexer_types, it writes no attention.indexer.types, where a newer
# transformers' GlmMoeDsaConfig fills the list in (and the key is written).
# That is the one difference of content (checked on glm5-tiny: every other key
# and tensor alike); reading config.json as stored would also move
# attention.key_length / value_length (no head_dim) without changing a value,
# so only indexer_types is dropped, and the records keep their key order.
import json, pathlib
_AutoConfig = base.AutoConfig
class _PinnedAutoConfig:
    @staticmethod
    def from_pretrained(d, **kw):
        if json.loads((pathlib.Path(d) / "config.json").read_text()).get("model_type") in ("step3p5", "step3p7"):
            raise ValueError("transformers 4.57.6, the converter's pin, has no step3p5 or step3p7 configuration class")
        return _AutoConfig.from_pretrained(d, **kw)
base.AutoConfig = _PinnedAutoConfig
_load_hparams = base.ModelBase.load_hparams
def _pinned_hparams(dir_model, *args, **kw):
    hparams = _load_hparams(dir_model, *args, **kw)
    raw = json.loads((pathlib.Path(dir_model) / "config.json").read_text())
    if raw.get("model_type") == "glm_moe_dsa" and "indexer_types" not in raw:
        hparams.pop("indexer_types", None)
    return hparams
base.ModelBase.load_hparams = staticmethod(_pinned_hparams)
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def describe(path, gguf):
    r = gguf.GGUFReader(path)
    meta = {}
    for f in r.fields.values():
        if f.name.startswith("GGUF."):
            continue
        t = f.types[0]
        if t == gguf.GGUFValueType.ARRAY:
            vals = f.contents()
            enc = json.dumps(vals, ensure_ascii=False)
            v = {"type": "arr", "elem": f.types[-1].name, "len": len(vals),
                 "sha256": hashlib.sha256(enc.encode()).hexdigest()}
            if len(vals) <= 16:
                v["value"] = vals
        else:
            v = {"type": t.name, "value": f.contents()}
        meta[f.name] = v
    tensors = []
    for t in r.tensors:
        tensors.append({"name": t.name, "type": t.tensor_type.name, "dims": [int(d) for d in t.shape],
                        "sha256": hashlib.sha256(bytes(t.data.tobytes())).hexdigest()})
    return {"metadata": meta, "tensors": tensors}


def convert_files(llama, pre, src, tmp, tag, *args):
    """Runs the converter on src with args; returns the files it wrote, in name order."""
    outd = Path(tmp) / ("out-" + tag)
    outd.mkdir()
    subprocess.run([sys.executable, "-c", RUNNER, str(llama), pre, str(src), *args, "--outfile", str(outd)], check=True)
    return sorted(outd.glob("*.gguf"))


def convert(llama, pre, src, tmp, tag, *args):
    """Runs the converter on src with args; returns the one file it wrote."""
    files = convert_files(llama, pre, src, tmp, tag, *args)
    assert len(files) == 1, files
    return files[0]


def record(path, gguf, dest, whole=False):
    rec = describe(str(path), gguf)
    rec["file_name"] = path.name
    if whole:
        rec["file_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    dest.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")
    print(dest.name, path.name, len(rec["tensors"]), "tensors")


def main():
    llama = Path(sys.argv[1]).resolve()
    sys.path.insert(0, str(llama / "gguf-py"))
    import gguf
    out_dir = ROOT / "testdata" / "gguf_reference"
    out_dir.mkdir(parents=True, exist_ok=True)
    chosen = sys.argv[2:] or list(FIXTURES) + list(TRUNKS) + list(TRUNK_ONLY) + sorted(GEMMA4_DRAFTERS | GEMMA4_TRUNKS) + list(DSPARK)
    for fx in chosen:
        if fx in GEMMA4_DRAFTERS | GEMMA4_TRUNKS:
            gemma4(llama, gguf, fx, out_dir)
            continue
        if fx in DSPARK:
            src = ROOT / "testdata" / "fixtures" / fx
            with tempfile.TemporaryDirectory() as tmp:
                for ot in OUTTYPES:
                    f = convert(llama, DSPARK[fx], src, tmp, ot, "--dspark", "--target-model-dir", str(src), "--outtype", ot)
                    record(f, gguf, out_dir / f"{fx}-{ot}.json")
            continue
        pre = FIXTURES.get(fx) or TRUNKS.get(fx) or TRUNK_ONLY[fx]
        base, edit = VARIANTS.get(fx, (fx, None))
        src = ROOT / "testdata" / "fixtures" / base
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp) / fx
            d.mkdir()
            for f in src.iterdir():
                os.symlink(f, d / f.name)
            if edit:
                cfg = edit(json.loads((src / "config.json").read_text()))
                (d / "config.json").unlink()
                (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
            if fx not in OWN_TOKENIZER and not (src / "tokenizer.json").exists():
                for f in (ROOT / "testdata" / "tokenizer-tiny").iterdir():
                    os.symlink(f, d / f.name)
            if fx in TRUNK_ONLY:
                for ot in OUTTYPES:
                    f = convert(llama, pre, d, tmp, "trunk-" + ot, "--outtype", ot)
                    record(f, gguf, out_dir / f"{fx}-trunk-{ot}.json")
                continue
            if fx in TRUNKS:
                trunk = convert(llama, pre, d, tmp, "nomtp", "--no-mtp", "--outtype", "bf16")
                shutil.copyfile(trunk, out_dir / f"{fx}-nomtp-bf16.gguf")
                print(f"{fx}-nomtp-bf16.gguf", trunk.name, trunk.stat().st_size, "bytes")
                bundled = convert(llama, pre, d, tmp, "bundled", "--outtype", "bf16")
                record(bundled, gguf, out_dir / f"{fx}-bundled-bf16.json", whole=True)
                side = convert(llama, pre, d, tmp, "mtp", "--mtp", "--outtype", "bf16")
                record(side, gguf, out_dir / f"{fx}-bf16.json")
                if fx in SPLIT_TRUNKS:
                    files = convert_files(llama, pre, d, tmp, "nomtp-split", "--no-mtp", "--outtype", "bf16",
                                          "--split-max-tensors", str(SPLIT_MAX_TENSORS))
                    assert len(files) > 1, files
                    for old in out_dir.glob(f"{fx}-nomtp-bf16-*-of-*.gguf"):
                        old.unlink()
                    for i, f in enumerate(files):
                        name = f"{fx}-nomtp-bf16-{i + 1:05d}-of-{len(files):05d}.gguf"
                        shutil.copyfile(f, out_dir / name)
                        print(name, f.name, f.stat().st_size, "bytes")
                continue
            if fx in WITH_TRUNK:
                trunk = convert(llama, pre, d, tmp, "nomtp", "--no-mtp", "--outtype", "bf16")
                shutil.copyfile(trunk, out_dir / f"{fx}-nomtp-bf16.gguf")
                print(f"{fx}-nomtp-bf16.gguf", trunk.name, trunk.stat().st_size, "bytes")
            layouts = [("", ["--mtp"])] + ([("-bundled", [])] if fx in OWN_TOKENIZER else [])
            for ot in OUTTYPES:
                for layout, flags in layouts:
                    f = convert(llama, pre, d, tmp, ot + layout, *flags, "--outtype", ot)
                    record(f, gguf, out_dir / f"{fx}{layout}-{ot}.json", whole=fx in WITH_TRUNK and layout == "-bundled")
                    if keep := os.environ.get("MTPCONV_KEEP_GGUF"):
                        Path(keep).mkdir(parents=True, exist_ok=True)
                        shutil.copy(f, Path(keep) / f"{fx}{layout}-{ot}.gguf")


def gemma4(llama, gguf, fx, out_dir):
    """The converter's Gemma-4 files of fixture fx (pre-tokenizer detection is not used by its set_vocab)."""
    src = ROOT / "testdata" / "fixtures" / fx
    with tempfile.TemporaryDirectory() as tmp:
        for ot in OUTTYPES if fx in GEMMA4_DRAFTERS else ["bf16"]:
            f = convert(llama, "default", src, tmp, ot, "--outtype", ot)
            if fx in GEMMA4_DRAFTERS:
                record(f, gguf, out_dir / f"{fx}-{ot}.json")
            if fx in GEMMA4_KEEP and ot == "bf16":
                shutil.copyfile(f, out_dir / f"{fx}-bf16.gguf")
                print(f"{fx}-bf16.gguf", f.name, f.stat().st_size, "bytes")


if __name__ == "__main__":
    main()

"""Makes testdata/genai: optimum-intel exports (image-text-to-text layout,
trunk + optimum's own MTP IR) of the small Qwen3.6 GenAI fixtures, so CI runs
OpenVINO GenAI on them without torch or network.

Not run in CI. Run it from the repository root in the venv that
scripts/optimum-fixture/setup.sh makes:

    scripts/optimum-fixture/setup.sh
    ~/.cache/mtpconv/venv-optimum/bin/python scripts/optimum-fixture/make.py [fixture ...]

(or $OPTIMUM_VENV/bin/python when setup.sh was given OPTIMUM_VENV; it prints the command.)

(no fixture names: all of FIXTURES; naming some leaves the other exports
alone). For each fixture: the checkpoint from internal/fixtures (go run
./cmd/mkfixtures), plus a tokenizer written here (byte-level BPE over the
fixture's whole vocabulary: 256 bytes, merges, the Qwen special tokens in
the last 8 ids), a generation config and image/video processor configs;
then `optimum-cli export openvino --task image-text-to-text --weight-format
fp16`. Two runs give the same text IRs (trunk, embeddings, MTP, tokenizers);
the vision IRs differ, as transformers initialises the vision tensors the
fixture leaves out at random (seeding torch does not pin them) - unused here. The versions that made it are recorded in testdata/genai/VERSIONS.
"""
import json
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "testdata" / "genai"
FIXTURES = ["qwen3.6-moe-genai", "qwen3.6-moe-genai-rigged", "qwen3.6-dense-genai", "qwen3.6-dense-genai-rigged"]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
            "<|vision_start|>", "<|vision_end|>"]
PACKAGES = ["optimum-intel", "optimum", "transformers", "torch", "openvino", "openvino-tokenizers", "nncf", "tokenizers"]


def byte_alphabet():
    """GPT-2's byte-to-unicode map: the byte-level BPE alphabet."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write_tokenizer(folder, vocab_size, eos):
    alpha = byte_alphabet()
    vocab = {alpha[b]: b for b in range(256)}
    letters = "etaoinshrdlcumwfgypb"
    merges = []
    n_merges = vocab_size - 256 - len(SPECIALS)
    candidates = [("Ġ", c) for c in letters] + [(a, b) for a in letters for b in letters]
    for a, b in candidates[:n_merges]:
        merges.append(f"{a} {b}")
        vocab[a + b] = len(vocab)
    assert write_tokenizer_files(folder, vocab, merges, vocab_size, indent=1) == eos


def write_tokenizer_files(folder, vocab, merges, vocab_size, indent=None):
    """Completes a byte-level BPE vocab with the Qwen specials in the last ids
    and writes the tokenizer, generation and processor files optimum needs
    next to a checkpoint. Returns the eos id (<|im_end|>)."""
    assert len(vocab) == vocab_size - len(SPECIALS)
    added = []
    for i, t in enumerate(SPECIALS):
        tid = vocab_size - len(SPECIALS) + i
        vocab[t] = tid
        added.append({"id": tid, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True})
    eos = vocab["<|im_end|>"]
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    (folder / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False, indent=indent))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "bos_token": None, "unk_token": None, "model_max_length": 4096, "clean_up_tokenization_spaces": False,
        "add_prefix_space": False, "errors": "replace", "split_special_tokens": False,
    }, indent=1))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": eos, "pad_token_id": vocab_size - 8, "do_sample": False}, indent=1))
    proc = {"patch_size": 14, "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5], "size": {"shortest_edge": 3136, "longest_edge": 200704}}
    (folder / "preprocessor_config.json").write_text(json.dumps(dict(proc, image_processor_type="Qwen2VLImageProcessorFast"), indent=1))
    (folder / "video_preprocessor_config.json").write_text(json.dumps(dict(proc, video_processor_type="Qwen3VLVideoProcessor"), indent=1))
    return eos


def main():
    names = sys.argv[1:] or FIXTURES
    unknown = set(names) - set(FIXTURES)
    if unknown:
        sys.exit(f"unknown fixtures {sorted(unknown)} (have {FIXTURES})")
    tmp = ROOT / "testdata" / "genai-src"
    shutil.rmtree(tmp, ignore_errors=True)
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", "-out", str(tmp), *names], cwd=ROOT, check=True,
                         capture_output=True, text=True)
    OUT.mkdir(parents=True, exist_ok=True)
    for name, src in zip(names, res.stdout.split()):
        src = Path(src)
        cfg = json.loads((src / "config.json").read_text())
        tc = cfg["text_config"]
        write_tokenizer(src, tc["vocab_size"], tc["eos_token_id"])
        dst = OUT / (name + "-optimum")
        shutil.rmtree(dst, ignore_errors=True)
        # optimum-cli, with torch seeded (which does not pin the random vision tensors).
        cli = ["optimum-cli", "export", "openvino", "--model", str(src), "--task", "image-text-to-text",
               "--weight-format", "fp16", str(dst)]
        subprocess.run([sys.executable, "-c", "import sys, torch; torch.manual_seed(0); sys.argv = sys.argv[1:]; "
                        "from optimum.commands.optimum_cli import main; main()", *cli], check=True)
    exports = sorted(p.name for p in OUT.glob("*-optimum"))
    (OUT / "VERSIONS").write_text("made by scripts/optimum-fixture/make.py with\n" +
                                  "".join(f"{p}=={version(p)}\n" for p in PACKAGES) +
                                  "exports:\n" + "".join(f"{e}\n" for e in exports))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

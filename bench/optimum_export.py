"""optimum-intel's export of the real-size synthetic checkpoint, for the
draft-step comparison (bench/draft_step.py --optimum reads it).

Run in the torch venv scripts/optimum-fixture/setup.sh makes:

    ~/.cache/mtpconv/venv-optimum/bin/python bench/optimum_export.py SRC [fp16|int8|int4 ...]

(or $OPTIMUM_VENV/bin/python, where setup.sh made it).

SRC is the real-size checkpoint (bench/.data/qwen3.6-moe-full). It is not
written to: bench/.data/optimum-src gets symlinks to its shards, its config
and the files optimum needs next to a checkpoint (a byte-level BPE tokenizer
over the whole 248,320-token vocabulary, a generation config, processor
configs; the stub vision tower's position-table size in the config), as scripts/optimum-fixture/make.py does for the small fixtures.
Then `optimum-cli export openvino --task image-text-to-text --weight-format
W` into bench/.data/optimum-W for each W asked (default fp16), tokenizer
conversion off (the MTP IR is what is measured).
"""
import json
import shutil
import string
import subprocess
import sys
from itertools import product
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts" / "optimum-fixture"))
import make  # noqa: E402  (byte_alphabet, SPECIALS, write_tokenizer_files)


def write_tokenizer(folder, vocab_size):
    """A valid byte-level BPE filling vocab_size: 256 bytes, merges building
    lowercase words of 2, 3, 4 letters, the Qwen specials in the last 8 ids
    (written with make.py's files for optimum)."""
    alpha = make.byte_alphabet()
    vocab = {alpha[b]: b for b in range(256)}
    merges = []
    need = vocab_size - 256 - len(make.SPECIALS)
    for n in (2, 3, 4):
        for w in product(string.ascii_lowercase, repeat=n):
            if len(merges) == need:
                break
            a, b = "".join(w[:-1]), w[-1]
            merges.append(f"{a} {b}")
            vocab[a + b] = len(vocab)
    make.write_tokenizer_files(folder, vocab, merges, vocab_size)


# optimum-cli with torch seeded, as make.py runs it, and one change for the
# stub vision tower: optimum traces the vision IR on a 420x420 dummy image,
# which patch 4 / merge 2 (the fixture's) does not tile; a 112x112 one does.
# Only the vision IRs see it; the MTP IR measured here is untouched.
PRELUDE = """
import sys, torch
torch.manual_seed(0)
from optimum.exporters.openvino import input_generators as g
init = g.DummyQwen2VLVisionEmbedInputGenerator.__init__
def small(self, *a, **k):
    k.setdefault("width", 112); k.setdefault("height", 112)
    init(self, *a, **k)
g.DummyQwen2VLVisionEmbedInputGenerator.__init__ = small
sys.argv = sys.argv[1:]
from optimum.commands.optimum_cli import main
main()
"""


def main():
    src = Path(sys.argv[1]).resolve()
    formats = sys.argv[2:] or ["fp16"]
    data = ROOT / "bench" / ".data"
    tmp = data / "optimum-src"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for f in src.iterdir():
        if f.suffix in (".safetensors", ".json") and f.name != "config.json":
            (tmp / f.name).symlink_to(f)
    cfg = json.loads((src / "config.json").read_text())
    # The fixture's vision tower is a stub; tell transformers the size of its
    # position table (its default, 2304, would not load). Text is untouched.
    cfg["vision_config"].setdefault("num_position_embeddings", int(subprocess.run(
        [sys.executable, "-c", "import json, sys; from safetensors import safe_open; "
         "idx = json.load(open(sys.argv[1]))['weight_map']; k = 'model.visual.pos_embed.weight'; "
         "print(safe_open(sys.argv[2] + '/' + idx[k], 'pt').get_slice(k).get_shape()[0])",
         str(src / "model.safetensors.index.json"), str(src)], check=True, capture_output=True, text=True).stdout))
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2))
    write_tokenizer(tmp, cfg["text_config"]["vocab_size"])
    for w in formats:
        dst = data / f"optimum-{w}"
        shutil.rmtree(dst, ignore_errors=True)
        cli = ["optimum-cli", "export", "openvino", "--model", str(tmp), "--task", "image-text-to-text",
               "--weight-format", w, "--disable-convert-tokenizer", str(dst)]
        if w == "int4":
            # optimum's int4 default (asym, group 128) stops on a MatMul whose
            # channel is not divisible by 128 (a rotary-embedding one of 1
            # channel); skip those, as its error message suggests.
            cli[-1:-1] = ["--group-size-fallback", "ignore"]
        subprocess.run([sys.executable, "-c", PRELUDE, *cli], check=True)


if __name__ == "__main__":
    main()

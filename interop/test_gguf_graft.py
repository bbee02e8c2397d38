"""--target gguf --graft (the head written into a trunk GGUF) and a bundled GGUF
as a source (its MTP-only sidecar split off), against llama.cpp itself (the
pinned build) and the reference converter's own files:

- llama.cpp loads the grafted file alone and drafts with --spec-type draft-mtp
  (no -md), exactly as with the trunk and the same head as a sidecar; greedy
  output equals the trunk's without MTP (bf16 trunks; on the rigged checkpoint
  also Q4_K_M) and >= 95% of the rigged drafts are accepted; for a bf16 trunk
  and a Q4_K_M trunk made by llama-quantize; every trunk tensor keeps its bytes
  and type;
- a bf16 graft onto the reference converter's --no-mtp trunk (committed,
  testdata/gguf_reference/*-nomtp-bf16.gguf) is byte for byte the converter's
  bundled file (recorded by interop/reference_gguf.py): tensor for tensor, key
  for key, and the whole file's sha256;
- a Q4_K_M graft's head tensors are those llama-quantize writes from that
  bundled bf16 file;
- the sidecar split from the bundled file is the converter's --mtp sidecar.
"""
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT
from test_gguf import (REFERENCE, PROVENANCE, PROMPT, describe, ggtrunk, greedy, llama_bin,  # noqa: F401 (fixtures)
                       rigged, run_llama, speculative, with_tokenizer)

gguf = pytest.importorskip("gguf")  # pinned in interop/requirements.txt

GENAI = ["qwen3.6-moe-genai", "qwen3.6-dense-genai"]  # reference trunks committed for these


def graft(mtpconv, src, trunk, out, *args):
    subprocess.run([str(mtpconv), "export", "--src", str(src), "--target", "gguf", "--graft", str(trunk),
                    "--out", str(out), "--quiet", *map(str, args)], check=True)
    files = list(Path(out).glob("*.gguf"))
    assert [f.name for f in files] == [Path(trunk).name]
    return files[0]


def tensors(path):
    return {t.name: (t.tensor_type.name, [int(d) for d in t.shape], hashlib.sha256(t.data.tobytes()).hexdigest())
            for t in gguf.GGUFReader(str(path)).tensors}


def assert_trunk_kept(trunk, grafted):
    theirs, ours = tensors(trunk), tensors(grafted)
    for name, t in theirs.items():
        assert ours[name] == t, name


def speculative_alone(llama_bin, model, n=48, extra=()):
    """llama-speculative-simple with the MTP head of the model itself (no -md)."""
    import re
    for _ in range(6):
        out, err = run_llama(llama_bin, "llama-speculative-simple", "-m", model, "--spec-type", "draft-mtp",
                             "-p", PROMPT, "-n", n, "--temp", "0", "-c", "512", "-t", "2", *extra)
        stats = {k: float(v) for k, v in re.findall(r"\b(n_drafted|n_accept|accept|n_draft|n_predict)\s*=\s*([0-9.]+)", err)}
        if {"n_drafted", "n_accept", "accept"} <= stats.keys():
            return out.strip(), stats
    raise AssertionError("llama-speculative-simple never printed its statistics:\n" + err[-3000:])


def quantized(llama_bin, trunk, dest, ftype="Q4_K_M"):
    run_llama(llama_bin, "llama-quantize", trunk, dest, ftype)
    return dest


@pytest.fixture
def trunk_of(llama_bin, ggtrunk, tmp_path):
    def make(src, kind):
        bf16 = tmp_path / "trunk-BF16.gguf"
        subprocess.run([str(ggtrunk), str(src), str(bf16)], check=True)
        if kind == "bf16":
            return bf16
        return quantized(llama_bin, bf16, tmp_path / "trunk-Q4_K_M.gguf")
    return make


def verify(mtpconv, out):
    res = subprocess.run([str(mtpconv), "verify", str(out)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def split(mtpconv, bundled, out):
    subprocess.run([str(mtpconv), "export", "--src", str(bundled), "--target", "gguf", "--out", str(out), "--quiet"], check=True)
    (side,) = list(Path(out).glob("*.gguf"))
    return side


@pytest.mark.parametrize("fx", ["a", "c", "dense"])
@pytest.mark.parametrize("kind", ["bf16", "Q4_K_M"])
def test_graft_drafts_alone(mtpconv, fixture_dirs, llama_bin, trunk_of, tmp_path, fx, kind):
    """The grafted file drafts alone exactly as its trunk with the same head as
    a sidecar (split from it) next to it; with a bf16 trunk that is the trunk's
    greedy text. A Q4_K_M trunk of random weights can flip a near tie between
    the batched verification and one-token decoding (the -md pair flips it
    alike), so its greedy equality is asserted on the rigged checkpoint below."""
    src = with_tokenizer(fixture_dirs[fx], tmp_path / "src")
    trunk = trunk_of(src, kind)
    before = trunk.read_bytes()
    out = graft(mtpconv, src, trunk, tmp_path / "out")
    assert trunk.read_bytes() == before
    assert_trunk_kept(trunk, out)
    verify(mtpconv, out.parent)
    got, stats = speculative_alone(llama_bin, out)
    assert stats["n_drafted"] > 0
    assert len(got) > len(PROMPT)
    paired, paired_stats = speculative(llama_bin, trunk, split(mtpconv, out, tmp_path / "side"))
    assert got == paired and stats == paired_stats
    if kind == "bf16":
        want = greedy(llama_bin, trunk, 64)
        assert got == want or (len(got) > len(PROMPT) + 32 and want.startswith(got))


@pytest.mark.parametrize("fx", ["a", "dense"])
@pytest.mark.parametrize("kind", ["bf16", "Q4_K_M"])
def test_graft_rigged_acceptance(mtpconv, llama_bin, rigged, tmp_path, fx, kind):
    src, trunk = rigged(fx)
    if kind != "bf16":
        trunk = quantized(llama_bin, trunk, tmp_path / "trunk-Q4_K_M.gguf")
    out = graft(mtpconv, src, trunk, tmp_path / "out")
    assert_trunk_kept(trunk, out)
    want = greedy(llama_bin, trunk, 64)
    got, stats = speculative_alone(llama_bin, out)
    print(f"rigged graft {fx} {kind}: drafted {stats['n_drafted']:.0f}, accepted {stats['n_accept']:.0f} ({stats['accept']:.1f}%)")
    assert len(got) > len(PROMPT) + 32 and want.startswith(got)
    assert stats["n_drafted"] >= 30
    assert stats["n_accept"] / stats["n_drafted"] >= 0.95


@pytest.fixture
def reference_graft(mtpconv, fixture_dirs, tmp_path):
    """Our bf16 graft onto the reference converter's --no-mtp trunk of a GenAI-sized fixture."""
    def make(fx):
        subprocess.run(["go", "run", "./cmd/mkfixtures", fx], cwd=ROOT, check=True, capture_output=True)
        src = with_tokenizer(ROOT / "testdata" / "fixtures" / fx, tmp_path / fx / "src")
        trunk = tmp_path / fx / f"{fx}-nomtp-bf16.gguf"
        shutil.copyfile(REFERENCE / trunk.name, trunk)
        return src, trunk, graft(mtpconv, src, trunk, tmp_path / fx / "out")
    return make


@pytest.mark.parametrize("fx", GENAI)
def test_graft_equals_reference_bundled(reference_graft, fx):
    ref = json.loads((REFERENCE / f"{fx}-bundled-bf16.json").read_text())
    src, trunk, out = reference_graft(fx)
    ours = describe(out)
    assert [t["name"] for t in ours["tensors"]] == [t["name"] for t in ref["tensors"]]  # the converter's order
    assert ours["tensors"] == ref["tensors"]
    assert list(ours["metadata"].items()) == list(ref["metadata"].items())  # every key, value and place
    assert hashlib.sha256(out.read_bytes()).hexdigest() == ref["file_sha256"]


@pytest.mark.parametrize("fx", GENAI)
def test_graft_q4km_head_equals_llama_quantize(mtpconv, llama_bin, reference_graft, tmp_path, fx):
    src, trunk, bundled = reference_graft(fx)  # the reference bundled file, byte for byte (test above)
    ref = tensors(quantized(llama_bin, bundled, tmp_path / "ref-Q4_K_M.gguf"))
    trunk_q = quantized(llama_bin, trunk, tmp_path / "trunk-Q4_K_M.gguf")
    ours = graft(mtpconv, src, trunk_q, tmp_path / "ours")
    assert_trunk_kept(trunk_q, ours)
    n_layer = gguf.GGUFReader(str(trunk)).fields["qwen35moe.block_count" if "moe" in fx else "qwen35.block_count"].contents()
    head = {n: t for n, t in ref.items() if n.startswith(f"blk.{n_layer}.")}
    assert head and {n: t for n, t in tensors(ours).items() if n.startswith(f"blk.{n_layer}.")} == head
    assert any(t[0] != "F32" and t[0] != "BF16" for t in head.values())  # quantized, not copied


@pytest.mark.parametrize("fx", GENAI)
def test_split_reference_bundled_equals_reference_sidecar(mtpconv, reference_graft, tmp_path, fx):
    src, trunk, bundled = reference_graft(fx)
    out = tmp_path / "split"
    side = split(mtpconv, bundled, out)
    ref = json.loads((REFERENCE / f"{fx}-bf16.json").read_text())
    ours = describe(side)
    assert ours["tensors"] == ref["tensors"]
    strip = lambda m: [(k, v) for k, v in m.items() if k not in PROVENANCE]
    assert strip(ours["metadata"]) == strip(ref["metadata"])
    verify(mtpconv, out)

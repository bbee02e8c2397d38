"""--graft into a split GGUF set (PREFIX-0000N-of-0000M.gguf) and a split set
as --src, against llama.cpp itself (the pinned build: llama-gguf-split makes
the sets and merges ours, llama-speculative-simple runs them):

- trunks split by llama-gguf-split --split (--split-max-tensors,
  --split-max-size, --no-tensor-first-split): our set has the trunk's file
  names, every trunk tensor keeps its bytes and type in the file that held it,
  and llama.cpp loads it alone by its first file with --spec-type draft-mtp,
  drafting as the merged set: greedy text equal to the trunk's without
  drafts (bf16); on the rigged checkpoint, bf16 and Q4_K_M, greedy text equal
  and >= 95% of the drafts accepted;
- llama-gguf-split --merge of our set, from the reference converter's --no-mtp
  trunk split, is the reference converter's bundled file: tensor for tensor in
  its order, key for key but split.*;
- a grafted set as --src gives the reference converter's --mtp sidecar;
- the reference converter's own split --no-mtp trunk (--split-max-tensors,
  committed: testdata/gguf_reference/*-nomtp-bf16-0000N-of-0000M.gguf, its
  last file a single tensor), grafted: merged, the converter's bundled file;
  loaded alone by its first file, greedy text equal to the trunk's.
"""
import shutil
import json
import subprocess
from pathlib import Path

import pytest

from test_gguf import REFERENCE, PROVENANCE, PROMPT, describe, ggtrunk, greedy, llama_bin, rigged, run_llama, with_tokenizer  # noqa: F401 (fixtures)
from test_gguf_graft import GENAI, quantized, reference_graft, speculative_alone, split, tensors, trunk_of, verify  # noqa: F401 (fixtures)

gguf = pytest.importorskip("gguf")  # pinned in interop/requirements.txt

SPLITS = {"tensors": ["--split-max-tensors", "30"], "size": ["--split-max-size", "20M"],
          "empty-first": ["--split-max-tensors", "40", "--no-tensor-first-split"]}


def gguf_split(llama_bin, trunk, prefix, how):
    """The trunk split by llama-gguf-split; its files in order."""
    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    run_llama(llama_bin, "llama-gguf-split", "--split", *how, trunk, prefix)
    files = sorted(Path(prefix).parent.glob(Path(prefix).name + "-*-of-*.gguf"))
    assert len(files) >= 2, files
    return files


def graft_set(mtpconv, src, member, out):
    subprocess.run([str(mtpconv), "export", "--src", str(src), "--target", "gguf", "--graft", str(member),
                    "--out", str(out), "--quiet"], check=True)
    return sorted(Path(out).glob("*.gguf"))


def assert_set_kept(members, ours):
    assert [f.name for f in ours] == [f.name for f in members]
    for theirs, mine in zip(members, ours):
        kept = tensors(mine)
        for name, t in tensors(theirs).items():
            assert kept[name] == t, (mine.name, name)


def merge(llama_bin, first, dest):
    run_llama(llama_bin, "llama-gguf-split", "--merge", first, dest)
    return dest


@pytest.mark.parametrize("how", list(SPLITS))
def test_graft_split_set_drafts_alone(mtpconv, fixture_dirs, llama_bin, trunk_of, tmp_path, how):
    """BF16 (a Q4_K trunk of random weights may flip a near tie between the
    batched verification and one-token decoding, test_gguf_graft.py: Q4_K_M is
    checked on the rigged checkpoint below)."""
    src = with_tokenizer(fixture_dirs["a"], tmp_path / "src")
    trunk = trunk_of(src, "bf16")
    members = gguf_split(llama_bin, trunk, tmp_path / "set" / "Tiny", SPLITS[how])
    before = [m.read_bytes() for m in members]
    ours = graft_set(mtpconv, src, members[-1], tmp_path / "out")  # any member names the set
    assert [m.read_bytes() for m in members] == before
    assert_set_kept(members, ours)
    verify(mtpconv, tmp_path / "out")
    got, stats = speculative_alone(llama_bin, ours[0])
    assert stats["n_drafted"] > 0
    # The same set bundled into one file drafts the same.
    bundled = merge(llama_bin, ours[0], tmp_path / "merged.gguf")
    assert speculative_alone(llama_bin, bundled) == (got, stats)
    want = greedy(llama_bin, members[0], 64)
    assert got == want or (len(got) > len(PROMPT) + 32 and want.startswith(got))


@pytest.mark.parametrize("kind", ["bf16", "Q4_K_M"])
def test_graft_split_set_rigged_acceptance(mtpconv, llama_bin, rigged, tmp_path, kind):
    src, trunk = rigged("a")
    if kind != "bf16":
        trunk = quantized(llama_bin, trunk, tmp_path / "trunk-Q4_K_M.gguf")
    members = gguf_split(llama_bin, trunk, tmp_path / "set" / "Rigged", SPLITS["size"])
    ours = graft_set(mtpconv, src, members[0], tmp_path / "out")
    assert_set_kept(members, ours)
    if kind != "bf16":  # llama-quantize's order (every quant): the head appended to the last file
        head = [set(tensors(o)) - set(tensors(m)) for m, o in zip(members, ours)]
        assert not any(head[:-1]) and head[-1]
    want = greedy(llama_bin, members[0], 64)
    got, stats = speculative_alone(llama_bin, ours[0])
    print(f"rigged split-set graft {kind} ({len(ours)} files): drafted {stats['n_drafted']:.0f}, "
          f"accepted {stats['n_accept']:.0f} ({stats['accept']:.1f}%)")
    assert len(got) > len(PROMPT) + 32 and want.startswith(got)
    assert stats["n_drafted"] >= 30
    assert stats["n_accept"] / stats["n_drafted"] >= 0.95


def without_split_keys(meta):
    return [(k, v) for k, v in meta.items() if not k.startswith("split.")]


def ggml_dims(ts):
    """Tensors with ggml's n_dims: llama-gguf-split writes a tensor as ggml
    holds it, without trailing unit dimensions (the converter's [64, 1] router
    of the shared expert is [64] in every file it splits or merges)."""
    def strip(d):
        while len(d) > 1 and d[-1] == 1:
            d = d[:-1]
        return d
    return [dict(t, dims=strip(t["dims"])) for t in ts]


# The dense trunk (0.7 MB) is below llama-gguf-split's smallest size, 1M.
@pytest.mark.parametrize("fx,how", [(fx, "tensors") for fx in GENAI] + [("qwen3.6-moe-genai", "size")])
def test_graft_split_set_merges_to_reference_bundled(mtpconv, llama_bin, reference_graft, tmp_path, fx, how):
    src, trunk, _ = reference_graft(fx)
    split_how = {"tensors": ["--split-max-tensors", "25"], "size": ["--split-max-size", "1M"]}[how]
    members = gguf_split(llama_bin, trunk, tmp_path / "set" / fx, split_how)
    ours = graft_set(mtpconv, src, members[0], tmp_path / "out")
    assert_set_kept(members, ours)
    merged = describe(merge(llama_bin, ours[0], tmp_path / "merged.gguf"))
    ref = json.loads((REFERENCE / f"{fx}-bundled-bf16.json").read_text())
    assert [t["name"] for t in merged["tensors"]] == [t["name"] for t in ref["tensors"]]  # the converter's order
    assert merged["tensors"] == ggml_dims(ref["tensors"])
    assert without_split_keys(merged["metadata"]) == list(ref["metadata"].items())
    # Every file's split keys: its number, the count, the new set's tensors.
    for i, f in enumerate(ours):
        fields = gguf.GGUFReader(str(f)).fields
        assert [fields[k].contents() for k in ("split.no", "split.count", "split.tensors.count")] == \
            [i, len(ours), len(ref["tensors"])]
    # The set as --src: the reference converter's --mtp sidecar.
    side = split(mtpconv, ours[1], tmp_path / "side")
    want = json.loads((REFERENCE / f"{fx}-bf16.json").read_text())
    got = describe(side)
    assert got["tensors"] == want["tensors"]  # the head's own, the trunk's top tensors have no unit dimension
    strip = lambda m: [(k, v) for k, v in m.items() if k not in PROVENANCE]
    assert strip(got["metadata"]) == strip(want["metadata"])
    verify(mtpconv, tmp_path / "side")


def test_graft_converter_split_set(mtpconv, fixture_dirs, llama_bin, reference_graft, tmp_path):
    fx = "qwen3.6-moe-genai"
    src, _, _ = reference_graft(fx)
    (tmp_path / "set").mkdir()
    members = []
    for f in sorted(REFERENCE.glob(f"{fx}-nomtp-bf16-*-of-*.gguf")):
        members.append(tmp_path / "set" / f.name)
        shutil.copyfile(f, members[-1])
    assert len(members) == 4
    ours = graft_set(mtpconv, src, members[0], tmp_path / "out")
    assert_set_kept(members, ours)
    verify(mtpconv, tmp_path / "out")
    merged = describe(merge(llama_bin, ours[0], tmp_path / "merged.gguf"))
    ref = json.loads((REFERENCE / f"{fx}-bundled-bf16.json").read_text())
    assert merged["tensors"] == ggml_dims(ref["tensors"])
    assert without_split_keys(merged["metadata"]) == list(ref["metadata"].items())
    got, stats = speculative_alone(llama_bin, ours[0])
    assert stats["n_drafted"] > 0
    want = greedy(llama_bin, members[0], 64)
    assert got == want or (len(got) > len(PROMPT) + 32 and want.startswith(got))

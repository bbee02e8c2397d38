"""The llama.cpp checks every NextN family's --target gguf test shares, in one place.

A family's test file (test_deepseek_gguf.py, test_hy_gguf.py, ...) declares its
table: its fixtures, how their --no-mtp trunks are made, its MTP depth and any
llama.cpp flag its fixtures need. It gets from here a module-scoped Family (the
fixtures, their trunks and our bf16 sidecars, each made once) and, from
llama_tests, the three checks issue 30 asks of every family:

- test_quantized_equals_llama_quantize: every quantization of ours (--gguf-type,
  --head-precision int8/int4) is byte for byte what llama-quantize makes of our
  bf16 sidecar;
- test_llama_drafts: llama.cpp drafts with our sidecar (-md) and with the head
  grafted into the trunk (one file, every trunk tensor kept): greedy text equal
  to the no-draft text;
- test_rigged_acceptance: on the rigged twin (the head predicts the trunk) it
  accepts >= 95% of the drafts at bf16, Q8_0 and Q4_K_M; chained heads (depth >
  1): drafts as long as the depth, every step drafting at every depth.

The family file keeps its own checks only: the numpy reference's logits (run_mtp_logits
runs interop/mtp_logits.cpp for them) and its quirks.
"""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, export
from test_gguf import REFERENCE, describe, greedy, run_llama, sidecar, speculative
from test_gguf_graft import assert_trunk_kept, graft, speculative_alone

GGUF_TYPES = [("--head-precision", "int8", "Q8_0"), ("--head-precision", "int4", "Q4_K_M")] + \
             [("--gguf-type", t, t) for t in ["F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q6_K"]]


def every_type(key):
    """The quantization cases of fixture key: every type we accept."""
    return [(key, args) for args in GGUF_TYPES]


def make_fixtures(names):
    """cmd/mkfixtures' folders of names (key -> fixture name), by key."""
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", *names.values()], cwd=ROOT, check=True, capture_output=True, text=True)
    return dict(zip(names, [Path(p) for p in res.stdout.split()]))


def ggtrunk_of(ggtrunk, src, dst):
    """internal/ggtrunk's trunk GGUF of src (the --no-mtp layout)."""
    subprocess.run([str(ggtrunk), str(src), str(dst)], check=True)
    return dst


def reference_trunk(name, dst):
    """The reference converter's --no-mtp trunk of fixture name (testdata/gguf_reference), copied to dst."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(REFERENCE / f"{name}-nomtp-bf16.gguf", dst)
    return dst


class Family:
    """One family's source folders (key -> folder) with their trunks and our bf16
    sidecars, each made once on first use. trunk(key, src, folder) makes the
    trunk of key in an empty folder of its own."""

    def __init__(self, mtpconv, srcs, tmp, trunk):
        self.mtpconv, self.srcs, self.tmp, self.make_trunk = mtpconv, srcs, Path(tmp), trunk
        self.trunks, self.sidecars = {}, {}

    def src(self, key):
        return self.srcs[key]

    def trunk(self, key):
        if key not in self.trunks:
            d = self.tmp / f"trunk-{key}"
            d.mkdir()
            self.trunks[key] = self.make_trunk(key, self.srcs[key], d)
        return self.trunks[key]

    def bf16(self, key):
        if key not in self.sidecars:
            self.sidecars[key] = sidecar(self.mtpconv, self.srcs[key], self.tmp / f"bf16-{key}", "bf16")
        return self.sidecars[key]


def family_fixture(names, trunk, srcs=None):
    """The module-scoped `family` fixture of a family file: names (key -> fixture
    name) made by cmd/mkfixtures; trunk(ggtrunk, key, src, folder) -> its trunk;
    srcs(folders, folder) -> more source folders by key (derived fixtures)."""
    @pytest.fixture(scope="module", name="family")
    def family(mtpconv, ggtrunk, tmp_path_factory):
        tmp = tmp_path_factory.mktemp("family")
        folders = make_fixtures(names)
        if srcs:
            folders.update(srcs(folders, tmp))
        return Family(mtpconv, folders, tmp, lambda key, src, d: trunk(ggtrunk, key, src, d))
    return family


def run_mtp_logits(mtp_logits, trunk, draft, tokens, depth=None, extra=()):
    """interop/mtp_logits.cpp's JSON for the sidecar draft on trunk (--depth: chained heads; extra: its other flags)."""
    args = [*(["--depth", str(depth)] if depth else []), *extra]
    res = subprocess.run([str(mtp_logits), str(trunk), str(draft), *args, *map(str, tokens)], capture_output=True, text=True,
                         env={"LD_LIBRARY_PATH": str(Path(mtp_logits).parent)}, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


def drafted(mtpconv, llama_bin, src, trunk, out, how, precision, extra=()):
    """llama.cpp's greedy drafting with the head at precision: a sidecar next to
    the trunk (-md), or grafted into it (one file, every trunk tensor kept)."""
    if how == "sidecar":
        return speculative(llama_bin, trunk, sidecar(mtpconv, src, out, precision), extra=extra)
    bundled = graft(mtpconv, src, trunk, out, "--head-precision", precision)
    assert_trunk_kept(trunk, bundled)
    return speculative_alone(llama_bin, bundled, extra=extra)


def llama_tests(names, quantized, drafts, rigged, depth=1, draft_flags=(), flags=lambda key: ()):
    """The shared checks of a family (module docstring), for the module's `family`
    fixture: quantized (key, args) cases (every_type), the keys drafted for text
    equality (with llama-speculative-simple flags draft_flags; plain heads, whose
    drafts must be rejected), the rigged keys;
    names (key -> fixture name) for the printed lines; flags(key): the
    llama-speculative-simple flags of every run on fixture key."""

    @pytest.mark.parametrize("key,args", quantized)
    def test_quantized_equals_llama_quantize(mtpconv, family, llama_bin, tmp_path, key, args):
        flag, value, ftype = args
        export(mtpconv, family.src(key), tmp_path / "ours", "--target", "gguf", flag, value)
        (ours,) = list((tmp_path / "ours").glob("*.gguf"))
        ref = tmp_path / "ref.gguf"
        run_llama(llama_bin, "llama-quantize", family.bf16(key), ref, ftype)
        assert ours.name.endswith(f"-{ftype}.gguf")
        assert describe(ours) == describe(ref)
        assert ours.read_bytes() == ref.read_bytes()

    @pytest.mark.parametrize("how", ["sidecar", "graft"])
    @pytest.mark.parametrize("key", drafts)
    def test_llama_drafts(mtpconv, family, llama_bin, tmp_path, key, how):
        trunk = family.trunk(key)
        want = greedy(llama_bin, trunk, 64)
        got, stats = drafted(mtpconv, llama_bin, family.src(key), trunk, tmp_path / "out", how, "bf16", (*flags(key), *draft_flags))
        print(f"plain {how} {names.get(key, key)}: drafted {stats['n_drafted']:.0f}, accepted {stats['n_accept']:.0f}")
        if depth > 1:
            assert stats["n_draft"] == depth
        assert stats["n_drafted"] > 0
        # The drafted keys are the plain fixtures (random heads): their drafts are
        # rejected, so the rigged acceptance below is one that can fail.
        assert stats["n_accept"] < 0.5 * stats["n_drafted"], stats
        # Both stop at the end-of-generation token, or llama-speculative-simple stops
        # near -n (it may accept past it): then its text is a prefix of the longer plain run.
        assert len(got) > 20
        assert got == want or (len(got) > 52 and want.startswith(got))

    @pytest.mark.parametrize("precision", ["bf16", "int8", "int4"])
    @pytest.mark.parametrize("how", ["sidecar", "graft"])
    @pytest.mark.parametrize("key", rigged)
    def test_rigged_acceptance(mtpconv, family, llama_bin, tmp_path, key, how, precision):
        trunk = family.trunk(key)
        want = greedy(llama_bin, trunk, 64)
        got, stats = drafted(mtpconv, llama_bin, family.src(key), trunk, tmp_path / "out", how, precision, flags(key))
        steps = stats["n_predict"] - stats["n_accept"]  # each verification step samples one token of its own
        print(f"rigged {how} {names[key]} {precision}: n_draft {stats['n_draft']:.0f}, predicted {stats['n_predict']:.0f} "
              f"in {steps:.0f} steps, drafted {stats['n_drafted']:.0f}, accepted {stats['n_accept']:.0f} ({stats['accept']:.1f}%)")
        assert len(got) > 52 and want.startswith(got)
        assert stats["n_drafted"] >= 30
        assert stats["n_accept"] / stats["n_drafted"] >= 0.95
        if depth > 1:  # chained heads: every step drafts at every depth (the last may stop short)
            assert stats["n_draft"] == depth
            assert stats["n_drafted"] >= depth * (steps - 1)
            # n_drafted / n_predict is depth / (depth + 1) then (0.75 at depth 3), 0.5 with one head.
            assert stats["n_drafted"] >= (depth / (depth + 1) - 0.05) * stats["n_predict"]

    return test_quantized_equals_llama_quantize, test_llama_drafts, test_rigged_acceptance

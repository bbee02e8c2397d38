"""mtpconv bench --runtime mlx-vlm against the real mlx-vlm 0.7.10 (its own
generation and speculative loop, run by the driver bench ships in this
Python), on the text-only Qwen3.5-MoE fixtures (a tiny trunk served with
testdata/tokenizer-tiny). On the rigged fixture the trunk is a fixed token
map and a head wired right drafts its next token.

- our --target mlx drafter of the rigged fixture next to its trunk:
  acceptance >= 0.95, `drafting`, `identical`; and bench's counts are
  mlx-vlm's: the same requests made here through mlx-vlm's API give the same
  drafted and accepted counts (its drafter's draft_lens / accept_lens);
- the random fixture's drafter next to the same trunk: `near-zero`, and
  `--min-acceptance 0.5` exits 1 with the report written (counts checked the
  same way);
- a partly right head (the rigged drafter's weights moved 70 % of the way to
  the random one's): bench's drafted, accepted and per-position counts are
  mlx-vlm's for the same requests;
- the rigged drafter with its projection (fc.weight) zeroed, the broken head
  of the kind users hit: `near-zero`;
- a --target combined folder alone (trunk and head in one MLX model, of the
  vision-language GenAI fixture): mlx-vlm's load_drafter takes the head from
  it (its splitter, in memory) and drafts: acceptance >= 0.95.

The text-only fixtures' rope_parameters have no mrope_section (vLLM's CPU
backend aborts with it, see internal/fixtures/text.go); mlx-vlm's text model
defaults it to [11, 11, 10] but its qwen3_5_mtp drafter requires it, so the
sources here carry that default. MLX's CPU gather-matmul runs in float32 only:
bench passes `-- dtype=float32` to the driver (cast after loading)."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import mlx.core as mx
import pytest

import bench_cli
from conftest import ROOT

TOKENIZER = ROOT / "testdata" / "tokenizer-tiny"
GENAI = ROOT / "testdata" / "genai"
FIXTURES = {"rigged": "qwen3.5-moe-text-tiny-rigged", "random": "qwen3.5-moe-text-tiny", "vl": "qwen3.6-moe-genai-rigged"}
PROMPTS = ["the quick brown fox", "once upon a time"]
MAX_TOKENS = 24
DRAFT_TOKENS = 2
RUNTIME_ARGS = ["--", "dtype=float32"]
PARTIAL = 0.7  # the partly right head: the rigged drafter's weights moved 70 % of the way to the random one's


def served(src, dst, tokenizer, mrope=True):
    """src with tokenizer's files beside it, and rope_parameters.mrope_section where it has none."""
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.name != "config.json":
            (dst / f.name).symlink_to(f)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (dst / name).symlink_to(tokenizer / name)
    cfg = json.loads((src / "config.json").read_text())
    if mrope:
        cfg["rope_parameters"].setdefault("mrope_section", [11, 11, 10])
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    return dst


@pytest.fixture(scope="module")
def dirs(mtpconv, tmp_path_factory):
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", *FIXTURES.values()], cwd=ROOT, check=True,
                         capture_output=True, text=True)
    src = dict(zip(FIXTURES, map(Path, res.stdout.split())))
    base = tmp_path_factory.mktemp("bench-mlx")
    trunk = served(src["rigged"], base / "trunk", TOKENIZER)
    random_src = served(src["random"], base / "random-src", TOKENIZER)
    out = {"trunk": trunk, "prompts": bench_cli.prompts_file(base, PROMPTS)}
    for key, s in (("rigged", trunk), ("random", random_src)):
        out[key] = base / f"drafter-{key}"
        subprocess.run([str(mtpconv), "export", "--src", str(s), "--target", "mlx", "--out", str(out[key]), "--quiet"],
                       check=True)
    zeroed = base / "drafter-zeroed-fc"
    shutil.copytree(out["rigged"], zeroed)
    w = mx.load(str(zeroed / "model.safetensors"))
    assert "fc.weight" in w and "fc.scales" not in w
    w["fc.weight"] = mx.zeros_like(w["fc.weight"])
    mx.save_safetensors(str(zeroed / "model.safetensors"), w, metadata={"format": "mlx"})
    out["zeroed"] = zeroed
    out["partial"] = base / "drafter-partial"
    shutil.copytree(out["rigged"], out["partial"])
    bench_cli.blend(out["rigged"] / "model.safetensors", out["random"] / "model.safetensors",
                    out["partial"] / "model.safetensors", PARTIAL, metadata={"format": "mlx"})
    vl = served(src["vl"], base / "vl-src", GENAI / "qwen3.6-moe-genai-rigged-optimum", mrope=False)
    out["combined"] = base / "combined"
    subprocess.run([str(mtpconv), "export", "--src", str(vl), "--target", "combined", "--out", str(out["combined"]),
                    "--quiet"], check=True)
    return out


def bench(mtpconv, dirs, tmp_path, model, *args):
    return bench_cli.run(mtpconv, tmp_path / "bench.json", "--runtime", "mlx-vlm", "--draft-tokens", DRAFT_TOKENS,
                         "--repeats", 1, "--python", sys.executable, "--max-tokens", MAX_TOKENS, "--prompts", dirs["prompts"], *args, "--model", model,
                         *RUNTIME_ARGS)


def direct(trunk, head):
    """The same requests through mlx-vlm's own API: per prompt, (drafted, accepted, accepted per round) as its
    drafter recorded them."""
    from mlx_vlm import generate, load
    from mlx_vlm.speculative.drafters import load_drafter
    model, processor = load(str(trunk))
    drafter, kind = load_drafter(str(head))
    model.set_dtype(mx.float32)
    drafter.set_dtype(mx.float32)
    out = []
    for p in PROMPTS:
        generate(model, processor, p, max_tokens=MAX_TOKENS, temperature=0.0, seed=42, draft_model=drafter,
                 draft_kind=kind, draft_block_size=DRAFT_TOKENS + 1)
        out.append((sum(drafter.draft_lens), sum(drafter.accept_lens), list(drafter.accept_lens)))
    return out


def counts(report):
    return [(r["drafted"], r["accepted"]) for r in bench_cli.mtp_runs(report)]


def test_rigged_head(mtpconv, dirs, tmp_path):
    res, rep = bench(mtpconv, dirs, tmp_path, dirs["trunk"], "--head", dirs["rigged"])
    assert res.returncode == 0, res.stderr[-4000:]
    s = rep["summary"]
    assert rep["runtime"] == "mlx-vlm" and rep["runtime_version"] == "0.7.10", rep
    assert s["acceptance"] >= 0.95 and s["drafted"] >= MAX_TOKENS // 2 * len(PROMPTS), s
    assert s["verdict"]["draft"] == "drafting" and s["verdict"]["output"] == "identical", s["verdict"]
    assert s["acceptance_per_position"] and s["mean_accepted_per_step"] > 1.5, s
    assert all(r["tokens"] == MAX_TOKENS for r in rep["arms"]), rep["arms"]
    assert counts(rep) == [c[:2] for c in direct(dirs["trunk"], dirs["rigged"])]


def test_random_head_fails_the_gate(mtpconv, dirs, tmp_path):
    res, rep = bench(mtpconv, dirs, tmp_path, dirs["trunk"], "--head", dirs["random"], "--min-acceptance", 0.5)
    s = rep["summary"]
    assert s["drafted"] > 0 and s["verdict"]["draft"] == "near-zero", s
    assert res.returncode == 1 and "acceptance" in res.stderr, (res.returncode, res.stderr[-2000:])
    assert counts(rep) == [c[:2] for c in direct(dirs["trunk"], dirs["random"])]


def test_partial_head_counts_are_mlx_vlms(mtpconv, dirs, tmp_path):
    """A head that accepts some drafts and rejects others: bench's drafted, accepted and per-position counts are
    the ones mlx-vlm recorded for the same requests (position j: the rounds that accepted more than j drafts)."""
    res, rep = bench(mtpconv, dirs, tmp_path, dirs["trunk"], "--head", dirs["partial"])
    assert res.returncode == 0, res.stderr[-4000:]
    s = rep["summary"]
    assert 0 < s["accepted"] < s["drafted"] and s["verdict"]["draft"] == "drafting", s
    want = direct(dirs["trunk"], dirs["partial"])
    assert counts(rep) == [c[:2] for c in want]
    per_pos = [[sum(a > j for a in rounds) for j in range(DRAFT_TOKENS)] for _, _, rounds in want]
    assert [r["accepted_per_position"] for r in bench_cli.mtp_runs(rep)] == per_pos
    assert [r["verify_steps"] for r in bench_cli.mtp_runs(rep)] == [len(rounds) for _, _, rounds in want]


def test_zeroed_projection_is_near_zero(mtpconv, dirs, tmp_path):
    res, rep = bench(mtpconv, dirs, tmp_path, dirs["trunk"], "--head", dirs["zeroed"])
    s = rep["summary"]
    assert s["drafted"] > 0 and s["verdict"]["draft"] == "near-zero", s


def test_combined_folder_drafts(mtpconv, dirs, tmp_path):
    res, rep = bench(mtpconv, dirs, tmp_path, dirs["combined"])
    assert res.returncode == 0, res.stderr[-4000:]
    s = rep["summary"]
    assert s["acceptance"] >= 0.95 and s["verdict"]["draft"] == "drafting" and s["verdict"]["output"] == "identical", s


def test_unknown_argument_is_named(mtpconv, dirs, tmp_path):
    """An argument after -- that mlx_vlm.generate does not take stops the first start, named."""
    res = subprocess.run([str(mtpconv), "bench", "--runtime", "mlx-vlm", "--python", sys.executable, "--model", dirs["trunk"],
                          "--head", dirs["rigged"], "--prompts", dirs["prompts"], "--", "dtype=float32", "kv_bitz=8"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 1, res.stderr
    assert "mlx-vlm argument kv_bitz: not a keyword of mlx_vlm.generate 0.7.10" in res.stderr, res.stderr

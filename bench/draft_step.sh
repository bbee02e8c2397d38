#!/usr/bin/env bash
# Draft-step benchmark of the OpenVINO heads at real size: builds mtpconv,
# generates (once, about 10 GB) the real-size synthetic Qwen3.6 checkpoint and
# runs bench/draft_step.py, which prints the table and writes
# bench/results/DATE-draft-step.md. Needs the interop venv.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/.bin
go build -o bench/.bin/mtpconv ./cmd/mtpconv
go run ./cmd/mkfixtures -out bench/.data qwen3.6-moe-full > /dev/null
.venv/bin/python bench/draft_step.py

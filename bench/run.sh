#!/usr/bin/env bash
# Benchmark: builds mtpconv and the read-bound tool, generates (once, about
# 10 GB) the real-size synthetic Qwen3.6 checkpoint, and runs bench.py, which
# prints the table and writes bench/results/DATE.md, and bench/graft.py (the
# --graft row against cp, bench/results/DATE-gguf-graft.md). Needs the interop venv
# (scripts/setup-interop.sh) for the reference quantizers.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/.bin
go build -o bench/.bin/mtpconv ./cmd/mtpconv
go build -o bench/.bin/readbound ./bench/readbound
go run ./cmd/mkfixtures -out bench/.data qwen3.6-moe-full > /dev/null
# BENCH_ONLY=gguf-graft runs only the graft row (bench/graft.py), and
# BENCH_ONLY=gguf-graft-split only the graft into a split set (its trunk set
# replaces the one-file trunk in bench/.data); the graft row runs when
# BENCH_ONLY is unset or names it.
case "${BENCH_ONLY:-}" in
  gguf-graft|gguf-graft-split) ;;
  *) .venv/bin/python bench/bench.py ;;
esac
case ",${BENCH_ONLY:-gguf-graft}," in
  *,gguf-graft,*) python3 bench/graft.py ;;
esac
case ",${BENCH_ONLY:-}," in
  *,gguf-graft-split,*) BENCH_SPLIT=1 python3 bench/graft.py ;;
esac

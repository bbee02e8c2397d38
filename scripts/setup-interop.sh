#!/usr/bin/env bash
# Creates .venv with the pinned consumers of the interop suite, then builds
# the llama.cpp tools (scripts/build-llama.sh) and the vLLM venv
# (scripts/setup-vllm.sh), both cached outside the clone.
# Idempotent: a venv whose stamp matches the requirement files is reused, and
# so is a llama.cpp build whose stamp matches. Installs qemu-user when
# qemu-aarch64 is missing: scripts/test.sh runs the arm64 (NEON) kernels'
# tests under it, and CI must not skip them.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v qemu-aarch64 >/dev/null; then
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y qemu-user || { $sudo apt-get update && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y qemu-user; } || true
  if ! command -v qemu-aarch64 >/dev/null; then
    echo "setup-interop: qemu-aarch64 is missing and apt-get install qemu-user failed" >&2
    exit 1
  fi
fi
PY=${PYTHON:-python3}
stamp=$(cat interop/requirements.txt interop/constraints.txt | sha256sum | cut -c1-16)
if [ ! -f .venv/.stamp ] || [ "$(cat .venv/.stamp)" != "$stamp" ]; then
  rm -rf .venv
  "$PY" -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -r interop/requirements.txt -c interop/constraints.txt
  echo "$stamp" > .venv/.stamp
fi
scripts/build-llama.sh >/dev/null
scripts/setup-vllm.sh >/dev/null

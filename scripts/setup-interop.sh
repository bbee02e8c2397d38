#!/usr/bin/env bash
# Creates .venv with the pinned consumers of the interop suite, then builds
# the llama.cpp tools (scripts/build-llama.sh, cached outside the clone).
# Idempotent: a venv whose stamp matches the requirement files is reused, and
# so is a llama.cpp build whose stamp matches.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
stamp=$(cat interop/requirements.txt interop/constraints.txt | sha256sum | cut -c1-16)
if [ ! -f .venv/.stamp ] || [ "$(cat .venv/.stamp)" != "$stamp" ]; then
  rm -rf .venv
  "$PY" -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -r interop/requirements.txt -c interop/constraints.txt
  echo "$stamp" > .venv/.stamp
fi
scripts/build-llama.sh >/dev/null

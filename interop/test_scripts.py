"""scripts/setup-interop.sh and scripts/test.sh decide on qemu by the host:
an arm64 host (Apple silicon, Linux arm64) runs the NEON kernels natively and
needs no qemu; any other host installs it (apt-get) and runs them under it,
and fails, naming why, where there is no apt-get (an Intel Mac). The case
blocks are run as the scripts hold them, with uname, apt-get, go and
qemu-aarch64 replaced by stubs that record their calls."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def case_block(script):
    text = (ROOT / "scripts" / script).read_text()
    return re.search(r"^case \"\$\(uname -m\)\" in\n.*?^esac\n", text, re.M | re.S).group(0)


def stubs(tmp_path, machine, have):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "calls"
    for name in ["uname", "go", "apt-get", "qemu-aarch64", "id", "env"]:
        if name in ("uname", "id", "env") or name in have:
            body = {"uname": f"echo {machine}", "id": "echo 0", "env": 'shift; "$@"'}.get(name, f'echo "{name} $*" >> {log}')
            if name == "apt-get":  # installing qemu-user provides qemu-aarch64
                body += f'\nprintf "#!/bin/sh\\n" > {bin_}/qemu-aarch64; {shutil.which("chmod")} +x {bin_}/qemu-aarch64'
            (bin_ / name).write_text("#!/bin/sh\n" + body + "\n")
            (bin_ / name).chmod(0o755)
    return bin_, log


def run(block, bin_, tmp_path):
    env = {"PATH": str(bin_), "HOME": str(tmp_path)}  # the stubs only: this host's own qemu and apt-get stay out
    return subprocess.run([shutil.which("bash"), "-c", block], env=env, capture_output=True, text=True)


@pytest.mark.parametrize("machine", ["arm64", "aarch64", "x86_64"])
def test_test_sh_runs_qemu_except_on_arm64(machine, tmp_path):
    bin_, log = stubs(tmp_path, machine, {"go", "qemu-aarch64"})
    r = run(case_block("test.sh"), bin_, tmp_path)
    assert r.returncode == 0, r.stderr
    calls = log.read_text() if log.exists() else ""
    if machine == "x86_64":
        assert "go test -exec qemu-aarch64 ./quant/..." in calls
    else:
        assert calls == "" and "ran natively" in r.stdout


@pytest.mark.parametrize("machine,have,code,called", [
    ("arm64", set(), 0, ""),                       # Apple silicon: nothing to install
    ("aarch64", set(), 0, ""),                     # Linux arm64
    ("x86_64", {"qemu-aarch64"}, 0, ""),           # already there
    ("x86_64", {"apt-get"}, 0, "apt-get install -y qemu-user"),  # Linux amd64 (CI)
    ("x86_64", set(), 1, ""),                      # an Intel Mac: no apt-get, a clear failure
])
def test_setup_installs_qemu_except_on_arm64(machine, have, code, called, tmp_path):
    bin_, log = stubs(tmp_path, machine, have)
    r = run(case_block("setup-interop.sh"), bin_, tmp_path)
    assert r.returncode == code, r.stderr
    calls = log.read_text() if log.exists() else ""
    assert called in calls and (called or calls == "")
    if code:
        assert "no apt-get" in r.stderr and "go test ./..." in r.stderr


TOOLS = ["llama-speculative-simple", "llama-simple", "llama-quantize", "llama-gguf-split", "llama-server"]


@pytest.mark.parametrize("stamp,built,called", [
    # the stamp of an earlier script (tools listed), a tree without llama-server:
    # re-configured in place (LLAMA_BUILD_SERVER=ON) and only the missing tool built
    ("0.3.36 llama-speculative-simple llama-simple llama-quantize native=off", TOOLS[:4], ["configure", "llama-server"]),
    ("0.3.36 native=off", TOOLS[:3], ["configure", "llama-gguf-split llama-server"]),
    ("0.3.36 native=off", TOOLS, []),  # nothing missing: nothing run
])
def test_build_llama_builds_missing_tools_in_the_cached_tree(stamp, built, called, tmp_path):
    """scripts/build-llama.sh with a cached build tree of the same version and
    flags never wipes it: the objects already built stay, cmake re-configures
    the same tree and builds the missing tools only (cmake and pip are stubs
    that record their calls)."""
    cache = tmp_path / "cache" / "llama.cpp-0.3.36"
    (cache / "build").mkdir(parents=True)
    (cache / "build" / "build.ninja").write_text("")
    (cache / "build" / "ggml.o").write_text("an object already built")
    (cache / ".stamp").write_text(stamp + "\n")
    (cache / "bin").mkdir()
    for t in built:
        (cache / "bin" / t).write_text("")
        (cache / "bin" / t).chmod(0o755)
    bin_, log = tmp_path / "stubs", tmp_path / "calls"
    bin_.mkdir()
    (bin_ / "cmake").write_text(f"""#!/bin/sh
echo "cmake $*" >> {log}
if [ "$1" = --build ]; then
  mkdir -p "{cache}/build/bin"; while [ "$1" != --target ]; do shift; done; shift
  for t in "$@"; do : > "{cache}/build/bin/$t"; chmod +x "{cache}/build/bin/$t"; done
fi
""")
    (bin_ / "pip").write_text(f"#!/bin/sh\necho \"pip $*\" >> {log}\nexit 1\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "HOME": str(tmp_path), "MTPCONV_CACHE": str(tmp_path / "cache"),
           "PIP": str(bin_ / "pip")}
    r = subprocess.run([shutil.which("bash"), str(ROOT / "scripts" / "build-llama.sh")], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == str(cache / "bin")
    calls = log.read_text().splitlines() if log.exists() else []
    if not called:
        assert calls == []
    else:
        configure, build = calls
        assert configure.startswith(f"cmake -S {cache}/src/") and f"-B {cache}/build" in configure
        assert "-DLLAMA_BUILD_SERVER=ON" in configure and "-DGGML_NATIVE=OFF" in configure
        assert build == f"cmake --build {cache}/build -j2 --target {called[1]}"
    assert (cache / "build" / "ggml.o").read_text() == "an object already built"
    assert (cache / ".stamp").read_text() == stamp + "\n"
    assert all((cache / "bin" / t).is_file() for t in TOOLS)

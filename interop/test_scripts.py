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

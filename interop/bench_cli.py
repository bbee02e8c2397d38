"""Running `mtpconv bench` from the interop tests: its exit, output and --json report."""
import json
import subprocess
import sys


def run(mtpconv, out, *args, timeout=1800):
    """mtpconv bench with args, its report written to out; (completed process, report)."""
    res = subprocess.run([str(mtpconv), "bench", "--json", str(out), *map(str, args)], capture_output=True, text=True,
                         timeout=timeout)
    print(res.stdout)
    print(res.stderr[-3000:], file=sys.stderr)
    assert out.exists(), res.stderr[-4000:]
    return res, json.loads(out.read_text())


def mtp_runs(report):
    """The MTP arm's runs, in the order bench served them."""
    return [r for r in report["arms"] if r["arm"] == "mtp"]


def prompts_file(folder, prompts):
    path = folder / "prompts.txt"
    path.write_text("\n".join(prompts) + "\n")
    return path

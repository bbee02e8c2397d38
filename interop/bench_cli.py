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


def blend(a, b, out, weight, select=lambda key: True, metadata=None):
    """The safetensors file a with each selected tensor moved weight of the way towards b's (in float32, stored
    back in a's dtype): a head part rigged (a), part random (b) accepts some drafts and rejects others."""
    import mlx.core as mx
    ta, tb = mx.load(str(a)), mx.load(str(b))
    mixed = {k: (v.astype(mx.float32) * (1 - weight) + tb[k].astype(mx.float32) * weight).astype(v.dtype) if select(k) else v
             for k, v in ta.items()}
    mx.save_safetensors(str(out), mixed, metadata=metadata or {"format": "pt"})

"""Benchmark mtpconv on a real-size synthetic Qwen3.6 head (bench/run.sh runs it).

For each target and precision it measures the export's wall time, source
bytes and rate, and peak RSS (the kernel's VmHWM, read by mtpconv from /proc,
and /usr/bin/time's maximum RSS), and prints ratios measured in the same run
against (a) the read bound: reading exactly the same source byte ranges to
nothing, and (b) the reference quantizers on the same tensors: mx.quantize
(MLX CPU) for every quantized MLX precision (affine int8/int4/int3 and the
microscaling modes mxfp4/mxfp8/nvfp4), nncf.compress_weights for OpenVINO int8/int4,
and llama-quantize (2 threads, no imatrix) of our bf16 GGUF sidecar for the
GGUF int8 (Q8_0), int4 (Q4_K_M) and --gguf-type Q4_0 sidecars, whose bytes must be
identical. (Q5_0 and Q5_1, llama-quantize's fallbacks for rows that are not whole
256-blocks, have no row: every row here is whole blocks, and --gguf-type does not
offer them; `go test ./quant -bench GGML` times their kernels.)
The GGUF rows read the same checkpoint with the tiny test tokenizer
(testdata/tokenizer-tiny, padded to the vocabulary) linked in, since a GGUF
carries the vocabulary.
Caches are dropped before every timed read or export when the machine allows
it ("cold"); otherwise every number is with a warm page cache. Every timing is
the median of BENCH_REPEAT runs (default 5), with the range shown, because
the shared 2-core VM we measure on varies by a third or more from run to
run; ratios to the read bound are medians of pairs measured back to back.
"""
import datetime
import filecmp
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "bench" / ".bin"
SRC = ROOT / "bench" / ".data" / "qwen3.6-moe-full"
WORK = ROOT / "bench" / ".data" / "out"
GGUF_SRC = ROOT / "bench" / ".data" / "gguf-src"  # SRC plus a tokenizer (gguf_source)
REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))
# BENCH_ONLY=mlx-bf16,mlx-mxfp4,...: only those rows (mlx-bf16 is the MLX references' input, so keep it);
# BENCH_NAME=x writes bench/results/DATE-x.md.
ONLY = [x for x in os.environ.get("BENCH_ONLY", "").split(",") if x]

CONFIGS = [
    ("mlx", "bf16", ["--target", "mlx", "--head-precision", "bf16"]),
    ("mlx", "f16", ["--target", "mlx", "--head-precision", "f16"]),
    ("mlx", "int8", ["--target", "mlx", "--head-precision", "int8"]),
    ("mlx", "int4", ["--target", "mlx", "--head-precision", "int4"]),
    ("mlx", "int3", ["--target", "mlx", "--head-precision", "int3"]),
    ("mlx", "mxfp4", ["--target", "mlx", "--head-precision", "mxfp4"]),
    ("mlx", "mxfp8", ["--target", "mlx", "--head-precision", "mxfp8"]),
    ("mlx", "nvfp4", ["--target", "mlx", "--head-precision", "nvfp4"]),
    ("openvino", "f16", ["--target", "openvino", "--head-precision", "f16", "--lm-head-precision", "f16"]),
    ("openvino", "int8", ["--target", "openvino", "--head-precision", "int8", "--lm-head-precision", "int8"]),
    ("openvino", "int4", ["--target", "openvino", "--head-precision", "int4", "--lm-head-precision", "int8"]),
    ("combined", "int4 trunk + bf16 head", ["--target", "combined", "--trunk-precision", "int4", "--head-precision", "bf16"]),
    ("gguf", "bf16", ["--target", "gguf", "--head-precision", "bf16"]),
    ("gguf", "int8", ["--target", "gguf", "--head-precision", "int8"]),
    ("gguf", "int4", ["--target", "gguf", "--head-precision", "int4"]),
    ("gguf", "Q4_0", ["--target", "gguf", "--gguf-type", "Q4_0"]),
]
# llama-quantize's file type for each quantized GGUF precision.
GGUF_FTYPES = {"int8": "Q8_0", "int4": "Q4_K_M", "Q4_0": "Q4_0"}


def source(target):
    return GGUF_SRC if target == "gguf" else SRC


def gguf_source():
    """SRC's shards and JSON files linked into GGUF_SRC, with the tiny test tokenizer."""
    shutil.rmtree(GGUF_SRC, ignore_errors=True)
    GGUF_SRC.mkdir(parents=True)
    for d in (SRC, ROOT / "testdata" / "tokenizer-tiny"):
        for f in d.iterdir():
            (GGUF_SRC / f.name).symlink_to(f.resolve())


def drop_caches():
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def read_bound(target, cold):
    if cold:
        drop_caches()
    out = subprocess.run([str(BIN / "readbound"), "--src", str(source(target)), "--target", target], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["seconds"]


def timed(cmd, env=None):
    """Runs cmd under /usr/bin/time -v: stdout, wall seconds, CPU seconds, max RSS bytes."""
    t0 = time.perf_counter()
    res = subprocess.run(["/usr/bin/time", "-v", *cmd], check=True, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    def field(name):
        m = re.search(name + r": ([\d.]+)", res.stderr)
        return float(m.group(1)) if m else 0.0
    cpu = field(r"User time \(seconds\)") + field(r"System time \(seconds\)")
    return res.stdout, wall, cpu, int(field(r"Maximum resident set size \(kbytes\)")) * 1024


def export(target, args, cold):
    out = WORK / "o"
    shutil.rmtree(out, ignore_errors=True)
    if cold:
        drop_caches()
    stdout, wall, cpu, rss = timed([str(BIN / "mtpconv"), "export", "--src", str(source(target)), "--out", str(out), "--json", *args])
    summary = json.loads(stdout)
    summary["time_maxrss"] = rss
    summary["wall"] = wall
    summary["cpu"] = cpu
    return summary, out


def llama_quantize(ftype, bf16_dir, ours_dir, cold):
    """llama-quantize (2 threads) of our bf16 sidecar, timed whole (it reads the
    sidecar and writes its output); checks its bytes equal our sidecar's."""
    bindir = Path(subprocess.run([str(ROOT / "scripts" / "build-llama.sh")], cwd=ROOT, check=True,
                                 capture_output=True, text=True).stdout.split()[-1])
    src = next(bf16_dir.glob("*.gguf"))
    ours = next(ours_dir.glob("*.gguf"))
    ref = WORK / "llama-quantize.gguf"
    ref.unlink(missing_ok=True)
    if cold:
        drop_caches()
    env = dict(os.environ, LD_LIBRARY_PATH=str(bindir))
    _, wall, cpu, rss = timed([str(bindir / "llama-quantize"), str(src), str(ref), ftype, "2"], env=env)
    same = filecmp.cmp(ref, ours, shallow=False)
    ref.unlink()
    return wall, cpu, rss, same


def mlx_reference(prec, out_f16_dir):
    """mx.quantize on the CPU over the tensors our export quantizes, as bf16 inputs
    already fixed (split/stacked), in each tensor's mode — only the quantization is timed."""
    import mlx.core as mx
    ours = mx.load(str(out_f16_dir / "model.safetensors"))
    quant = json.loads((out_f16_dir.parent / f"mlx-{prec}" / "config.json").read_text())["quantization"]
    names = [k[: -len(".scales")] for k in mx.load(str(out_f16_dir.parent / f"mlx-{prec}" / "model.safetensors")) if k.endswith(".scales")]
    ws = {n: ours[n + ".weight"].astype(mx.bfloat16) for n in names}
    mx.eval(list(ws.values()))
    t0 = time.perf_counter()
    outs = []
    for n, w in ws.items():
        q = quant.get(n, quant)
        outs.append(mx.quantize(w, group_size=q["group_size"], bits=q["bits"], mode=q.get("mode", "affine"), stream=mx.cpu))
        mx.eval(outs[-1])
    return time.perf_counter() - t0


def nncf_reference(mode, f16_dir):
    """nncf.compress_weights on our f16 IRs with the modes our export used — only the compression is timed."""
    import nncf
    import openvino as ov
    core = ov.Core()
    layer = core.read_model(f16_dir / "openvino_mtp_model.xml")
    head = core.read_model(f16_dir / "openvino_mtp_lm_head.xml")
    ignored = nncf.IgnoredScope(names=["mtp.layers.0.mlp.experts/router", "mtp.layers.0.mlp.shared_expert_gate"])
    kw = {"mode": getattr(nncf.CompressWeightsMode, mode), "ratio": 1.0}
    if mode.startswith("INT4"):
        kw.update(group_size=64, all_layers=True)
    t0 = time.perf_counter()
    nncf.compress_weights(layer, ignored_scope=ignored, **kw)
    nncf.compress_weights(head, mode=nncf.CompressWeightsMode.INT8_ASYM)
    return time.perf_counter() - t0


def machine():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    mem = next((l.split(":", 1)[1].strip() for l in open("/proc/meminfo") if l.startswith("MemTotal")), "?")
    go = subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip()
    return f"{os.cpu_count()} cores ({cpu}), {mem} RAM, {platform.system()} {platform.release()}, {go}, Python {platform.python_version()}"


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    gguf_source()
    cold = drop_caches()
    rows = []
    keep = {}
    for target, prec, args in CONFIGS:
        if ONLY and f"{target}-{prec.split()[0]}" not in ONLY:
            continue
        bounds, walls, cpus, rss = [], [], [], []
        for _ in range(REPEAT):
            bounds.append(read_bound(target, cold))
            summary, out = export(target, args, cold)
            walls.append(summary["wall"])
            cpus.append(summary["cpu"])
            rss.append((summary["peak_rss_bytes"], summary["time_maxrss"]))
        bound = statistics.median(bounds)
        # The read bound is measured just before each export: the ratio of
        # each pair cancels the storage's drift, and its median is reported.
        summary["ratio"] = statistics.median(w / b for w, b in zip(walls, bounds))
        summary["walls"] = walls
        summary["wall"] = statistics.median(walls)
        summary["cpu"] = statistics.median(cpus)
        summary["peak_rss_bytes"] = max(r[0] for r in rss)
        summary["time_maxrss"] = max(r[1] for r in rss)
        name = f"{target}-{prec.split()[0]}"
        if target in ("mlx", "gguf") or (target == "openvino" and prec in ("bf16", "f16", "int8", "int4")):
            dest = WORK / name
            shutil.rmtree(dest, ignore_errors=True)
            out.rename(dest)
            keep[name] = dest
        rows.append({"target": target, "precision": prec, "summary": summary, "read_bound": bound})
        print(f"{target:9s} {prec:24s} {summary['wall']:7.2f} s  read bound {bound:6.2f} s", flush=True)
    for r in rows:
        ref = None
        if r["target"] == "mlx" and r["precision"] not in ("bf16", "f16"):
            ref = ("mx.quantize (MLX CPU)", statistics.median(mlx_reference(r["precision"], keep["mlx-bf16"]) for _ in range(REPEAT)))
        if r["target"] == "openvino" and r["precision"] in ("int8", "int4"):
            mode = {"int8": "INT8_ASYM", "int4": "INT4_ASYM"}[r["precision"]]
            ref = ("nncf.compress_weights", statistics.median(nncf_reference(mode, keep["openvino-f16"]) for _ in range(REPEAT)))
        if r["target"] == "gguf" and r["precision"] in GGUF_FTYPES:
            ftype = GGUF_FTYPES[r["precision"]]
            runs = [llama_quantize(ftype, keep["gguf-bf16"], keep[f"gguf-{r['precision']}"], cold) for _ in range(REPEAT)]
            same = all(x[3] for x in runs)
            name = (f"llama-quantize {ftype} (2 threads; CPU {statistics.median(x[1] for x in runs):.1f} s; "
                    f"{max(x[2] for x in runs) / 2**20:.0f} MiB; {'bytes identical' if same else 'BYTES DIFFER'})")
            ref = (name, statistics.median(x[0] for x in runs))
        r["reference"] = ref
    lines = [
        f"# mtpconv benchmark, {datetime.date.today().isoformat()}",
        "",
        f"Machine: {machine()}.",
        f"Source: synthetic Qwen3.6-35B-A3B head at real size (hidden 2048, 16/2 heads of 256, 256 experts of 512, fused; "
        f"lm_head 248320 x 2048; 4 trunk layers), generated by `go run ./cmd/mkfixtures qwen3.6-moe-full`.",
        f"Page cache: {'dropped before every timed read and export (cold)' if cold else 'warm (dropping caches is not allowed here)'}.",
        "Peak RSS: the kernel's VmHWM as mtpconv reports it (`--json`), and `/usr/bin/time -v` maximum RSS.",
        "Reference times cover only the quantization call on already-loaded tensors (mx.quantize, NNCF), or the whole "
        "llama-quantize run on our bf16 sidecar (GGUF; cold like ours); ours cover the whole export "
        "(read, fix, quantize, write, hash, manifest). CPU s is user + system time of the export.",
        f"Each time is the median of {REPEAT} runs (the export's range in brackets); peak RSS is the largest seen. "
        "The read bound is measured right before each export; × read bound is the median of those paired ratios.",
        "",
        "| target | precision | wall s | CPU s | source GB | source GB/s | peak RSS MiB (VmHWM / time) | read bound s | × read bound | reference | reference s | × reference |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        s = r["summary"]
        gb = s["bytes_read"] / 1e9
        ref_name, ref_s = r["reference"] or ("", None)
        ref_time = "" if ref_s is None else "%.2f" % ref_s
        ref_ratio = "" if ref_s is None else "%.2f" % (s["wall"] / ref_s)
        lines.append(
            f"| {r['target']} | {r['precision']} | {s['wall']:.2f} ({min(s['walls']):.2f}–{max(s['walls']):.2f}) | {s['cpu']:.1f} | {gb:.2f} | {gb / s['wall']:.2f} | "
            f"{s['peak_rss_bytes'] / 2**20:.0f} / {s['time_maxrss'] / 2**20:.0f} | {r['read_bound']:.2f} | {s['ratio']:.2f} | "
            f"{ref_name} | {ref_time} | {ref_ratio} |")
    text = "\n".join(lines) + "\n"
    print(text)
    dest = ROOT / "bench" / "results" / f"{datetime.date.today().isoformat()}{'-' + os.environ['BENCH_NAME'] if os.environ.get('BENCH_NAME') else ''}.md"
    dest.write_text(text)
    print(f"written to {dest.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())

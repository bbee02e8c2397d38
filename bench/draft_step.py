"""Draft-step latency of the OpenVINO MTP heads at real size (bench/draft_step.sh runs it).

Rows, each measured in REPEAT fresh processes, round robin over the rows
(medians, range in brackets):
  ours f16 / int8 / int4   mtpconv --target openvino --head-precision P
                           --lm-head-precision P from the real-size synthetic
                           Qwen3.6 checkpoint;
  optimum fp16/int8/int4   optimum-intel's openvino_mtp_model.xml of the same
                           checkpoint (bench/optimum_export.py makes them; rows
                           are skipped when absent), with our lm_head IR at the
                           same precision for the "+ lm_head" column (optimum's
                           MTP IR has none);
  dense f16                ours f16 with the MoE computing all experts for
                           every token (bench/dense_moe.py), our f16 lm_head.
Each process: compile with the default CPU configuration (peak RSS after the
layer, then after the lm_head; and after the run, as the CPU plugin repacks
weights at the first inference), a 128-token prefill, then STEPS single-token
steps feeding the output back; the median ms per step of the layer alone and
of layer + lm_head; then the memory bandwidth (numpy copy, best of 5) in the
same process. Beside it the weight bytes one step must read (from the IR:
every constant, the routed-expert stacks at top-k / E unless the row computes
all experts), so the table shows the ratio to the bandwidth floor, and which
precision the compiled model keeps in its FullyConnected / GatherMatmul /
MatMul weights.

Before each timed process the script waits until the 1-minute load average
is below 1.0 (polls every 20 s, out of a budget of BENCH_QUIET_WAIT seconds
for the whole run, default 900) and records whether it got there. Environment: BENCH_SRC (checkpoint folder),
BENCH_STEPS, BENCH_REPEAT, BENCH_ROWS (comma-separated row names),
BENCH_REUSE=1 (keep exports already in bench/.data/draft), BENCH_CONFIG (JSON
of CPU compile properties, e.g. {"DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}),
BENCH_OUT (results file name).
"""
import datetime
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "bench" / ".bin" / "mtpconv"
SRC = Path(os.environ.get("BENCH_SRC", ROOT / "bench" / ".data" / "qwen3.6-moe-full"))
DATA = ROOT / "bench" / ".data"
WORK = DATA / "draft"
STEPS = int(os.environ.get("BENCH_STEPS", "50"))
PREFILL = 128
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
QUIET_WAIT = float(os.environ.get("BENCH_QUIET_WAIT", "900"))
CONFIG = json.loads(os.environ.get("BENCH_CONFIG", "{}"))
PRECISIONS = ["f16", "int8", "int4"]
OPTIMUM = {"fp16": "f16", "int8": "int8", "int4": "int4"}
WEIGHT_OPS = ("FullyConnected", "GatherMatmul", "MatMul")


def step_bytes(xml, experts, routed):
    """Weight bytes one single-token step reads: all constants, expert stacks at routed/experts."""
    total = 0.0
    for layer in ET.parse(xml).getroot().iter("layer"):
        if layer.get("type") != "Const":
            continue
        d = layer.find("data")
        n = int(d.get("size"))
        shape = [int(x) for x in d.get("shape").split(",") if x]
        # Expert stacks (codes, scales, zero points) lead with the expert axis.
        total += n * routed / experts if len(shape) >= 3 and shape[0] == experts else n
    return total


def bandwidth():
    import numpy as np
    a = np.ones(64 << 20, np.float32)
    b = np.empty_like(a)
    best = min(timeit(lambda: np.copyto(b, a)) for _ in range(5))
    return 2 * a.nbytes / best  # read + write


def timeit(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure(layer_xml, head_xml):
    """Runs in a child process: compile, prefill, timed steps, bandwidth; prints JSON."""
    import numpy as np
    import openvino as ov
    core = ov.Core()
    t0 = time.perf_counter()
    layer = core.compile_model(layer_xml, "CPU", CONFIG)
    layer_s, layer_rss = time.perf_counter() - t0, rss()
    head = core.compile_model(head_xml, "CPU", CONFIG)
    compile_s, compile_rss = time.perf_counter() - t0, rss()
    precisions = {}
    for op in layer.get_runtime_model().get_ordered_ops():
        kind = op.get_rt_info()["layerType"].astype(str)
        if kind in WEIGHT_OPS and op.get_input_size() > 1:
            p = weight_precision(op.input(1).get_source_output().get_node())
            if p:
                precisions.setdefault(kind, set()).add(p)
    hidden = layer.inputs[0].get_partial_shape()[2].get_length()
    rng = np.random.default_rng(0)
    req = layer.create_infer_request()
    req.reset_state()

    def call(n, start):
        t = start + n
        return req.infer({"inputs_embeds": rng.standard_normal((1, n, hidden), np.float32),
                          "hidden_states": rng.standard_normal((1, n, hidden), np.float32),
                          "attention_mask": np.ones((1, t), np.int64), "position_ids": np.arange(start, t, dtype=np.int64)[None],
                          "beam_idx": np.zeros(1, np.int32)})["last_hidden_state"]

    call(PREFILL, 0)
    alone, with_head = [], []
    for i in range(STEPS):
        t0 = time.perf_counter()
        h = call(1, PREFILL + 2 * i)
        alone.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        h = call(1, PREFILL + 2 * i + 1)
        head(h)
        with_head.append(time.perf_counter() - t0)
    run_rss = rss()  # the CPU plugin repacks weights at the first inference, so this is the real peak
    print(json.dumps({"layer_compile_s": layer_s, "layer_rss": layer_rss, "compile_s": compile_s, "compile_rss": compile_rss,
                      "layer_ms": 1e3 * statistics.median(alone), "head_ms": 1e3 * statistics.median(with_head),
                      "precisions": {k: sorted(v) for k, v in sorted(precisions.items())},
                      "run_rss": run_rss, "bandwidth": bandwidth()}))


def weight_precision(node):
    """The precision a compiled op's weight input keeps: the Const's, or "X from Y" when a
    Convert / Reorder over a Const (run once, at the first inference) gives it; None for activations."""
    info = lambda n: (n.get_rt_info()["layerType"].astype(str), n.get_rt_info()["outputPrecisions"].astype(str))
    kind, prec = info(node)
    if kind == "Const":
        return prec
    if kind in ("Convert", "Reorder"):
        src = weight_precision(node.input(0).get_source_output().get_node())
        if src:
            return prec if src == prec else f"{prec} from {src.split(' from ')[-1]}"
    return None


QUIET_LEFT = [QUIET_WAIT]


def wait_quiet():
    """Waits for the 1-minute load average to drop below 1.0, polling every 20 s, out of
    a budget of QUIET_WAIT seconds shared by the whole run; returns (load at start, quiet)."""
    while True:
        load = float(Path("/proc/loadavg").read_text().split()[0])
        if load < 1.0:
            return load, True
        if QUIET_LEFT[0] <= 0:
            return load, False
        time.sleep(20)
        QUIET_LEFT[0] -= 20


def export_ours(p):
    out = WORK / f"ours-{p}"
    if os.environ.get("BENCH_REUSE") == "1" and (out / "openvino_mtp_model.xml").exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([str(BIN), "export", "--src", str(SRC), "--target", "openvino", "--out", str(out), "--quiet",
                    "--head-precision", p, "--lm-head-precision", p], check=True)
    return out


def rows(experts, topk):
    """(name, layer xml, lm_head xml, experts read per step) for every row available."""
    out = []
    ours = {p: export_ours(p) for p in PRECISIONS}
    for p in PRECISIONS:
        out.append((f"ours {p}", ours[p] / "openvino_mtp_model.xml", ours[p] / "openvino_mtp_lm_head.xml", topk))
    for w, p in OPTIMUM.items():
        xml = DATA / f"optimum-{w}" / "openvino_mtp_model.xml"
        if xml.exists():
            out.append((f"optimum {w}", xml, ours[p] / "openvino_mtp_lm_head.xml", topk))
    dense = WORK / "dense-f16"
    if not (os.environ.get("BENCH_REUSE") == "1" and (dense / "openvino_mtp_model.xml").exists()):
        subprocess.run([sys.executable, str(ROOT / "bench" / "dense_moe.py"), str(ours["f16"]), str(dense)], check=True)
    out.append(("dense f16 (all experts)", dense / "openvino_mtp_model.xml", ours["f16"] / "openvino_mtp_lm_head.xml", experts))
    only = os.environ.get("BENCH_ROWS")
    if only:
        keep = [s.strip() for s in only.split(",")]
        out = [r for r in out if r[0] in keep]
    return out


def main():
    cfg = json.loads((SRC / "config.json").read_text())
    text = cfg.get("text_config", cfg)
    experts, topk = text["num_experts"], text["num_experts_per_tok"]
    WORK.mkdir(parents=True, exist_ok=True)
    todo = rows(experts, topk)
    runs = {name: [] for name, *_ in todo}
    # Round robin over the rows, so a change in the machine's load hits every row alike.
    for _ in range(REPEAT):
        for name, layer_xml, head_xml, _routed in todo:
            load, quiet = wait_quiet()
            r = json.loads(subprocess.run([sys.executable, __file__, "--measure", str(layer_xml), str(head_xml)], check=True,
                                          capture_output=True, text=True).stdout)
            r["load"], r["quiet"] = load, quiet
            runs[name].append(r)
            print(name, json.dumps(r), file=sys.stderr, flush=True)
    table = []
    for name, layer_xml, head_xml, routed in todo:
        rs = runs[name]
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0] if isinstance(rs[0][k], (int, float)) and not isinstance(rs[0][k], bool)}
        lb, hb = step_bytes(layer_xml, experts, routed), step_bytes(head_xml, experts, topk)
        table.append((name, med, rs, lb, hb))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    import openvino as ov
    allruns = [r for _, _, runs, _, _ in table for r in runs]
    quiet = sum(r["quiet"] for r in allruns)
    loads = [r["load"] for r in allruns]
    lines = [f"# Draft-step latency, OpenVINO CPU ({datetime.date.today().isoformat()})", "",
             f"Machine: {platform.node()}, {os.cpu_count()} cores ({cpu}), {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM, "
             f"Linux {platform.release()}; OpenVINO {ov.get_version()}. Checkpoint: the real-size synthetic Qwen3.6 "
             f"(hidden 2048, {experts} experts of 512, top-{topk}, vocab 248,320). CPU compile config: "
             f"{json.dumps(CONFIG) if CONFIG else 'default'}; {PREFILL}-token prefill, then {STEPS} single-token steps "
             f"(median); medians over {REPEAT} fresh processes per row (range in brackets). "
             f"Quiet machine (1-min load < 1.0) before {quiet} of {len(allruns)} processes (load at start "
             f"{min(loads):.2f}-{max(loads):.2f}; waits polled every 20 s out of a {QUIET_WAIT:.0f} s budget for the run, "
             f"{QUIET_WAIT - max(QUIET_LEFT[0], 0):.0f} s used). Floor = bytes per step / bandwidth.", "",
             "| head | layer ms/step | layer + lm_head ms/step | weights read per step (layer / lm_head) | memory bandwidth | "
             "floor ms (layer / +lm_head) | ratio to floor (layer / +lm_head) | compile peak RSS (layer / +lm_head) | peak RSS after prefill + steps | compile s | compiled weight precisions |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, med, runs, lb, hb in table:
        rng = lambda k: f"[{min(r[k] for r in runs):.1f}-{max(r[k] for r in runs):.1f}]"
        bw = med["bandwidth"]
        fl, fh = 1e3 * lb / bw, 1e3 * (lb + hb) / bw
        precs = "; ".join(f"{k} {', '.join(v)}" for k, v in runs[0]["precisions"].items()) or "-"
        lines.append(f"| {name} | {med['layer_ms']:.2f} {rng('layer_ms')} | {med['head_ms']:.2f} {rng('head_ms')} | "
                     f"{lb / 1e6:.1f} MB / {hb / 1e6:.1f} MB | {bw / 1e9:.1f} GB/s | {fl:.2f} / {fh:.2f} | "
                     f"{med['layer_ms'] / fl:.1f}x / {med['head_ms'] / fh:.1f}x | "
                     f"{med['layer_rss'] / 2**30:.2f} / {med['compile_rss'] / 2**30:.2f} GiB | {med['run_rss'] / 2**30:.2f} GiB | "
                     f"{med['compile_s']:.1f} | {precs} |")
    report = "\n".join(lines) + "\n"
    print(report)
    dest = ROOT / "bench" / "results" / os.environ.get("BENCH_OUT", f"{datetime.date.today().isoformat()}-draft-step.md")
    dest.write_text(report)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--measure":
        measure(sys.argv[2], sys.argv[3])
    else:
        main()

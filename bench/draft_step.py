"""Draft-step latency of our OpenVINO heads at real size (bench/draft_step.sh runs it).

For the head at f16, int8 and int4 (lm_head int8 for all three, the default),
exported from the real-size synthetic Qwen3.6 checkpoint, each in a fresh
process: compile with the default CPU configuration (peak RSS after compile),
a 128-token prefill, then STEPS single-token steps feeding the output back;
the median ms per step of the layer alone and of layer + lm_head. Beside it:
the weight bytes one step must read (from the IR: every constant, the routed
experts at top-k / E of their stacks) and the machine's memory bandwidth
(numpy copy, best of 5, measured in this run), so the table shows the ratio to
the bandwidth floor. Also which precision the compiled model keeps in its
FullyConnected / GatherMatmul weights.
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
SRC = ROOT / "bench" / ".data" / "qwen3.6-moe-full"
WORK = ROOT / "bench" / ".data" / "draft"
STEPS = int(os.environ.get("BENCH_STEPS", "50"))
PREFILL = 128
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
CONFIGS = [("f16", ["--head-precision", "f16"]), ("int8", ["--head-precision", "int8"]), ("int4", ["--head-precision", "int4"])]
BITS = {"f32": 32, "f16": 16, "i64": 64, "i32": 32, "u8": 8, "i8": 8, "u4": 4, "i4": 4, "boolean": 8}


def step_bytes(xml, experts, topk):
    """Weight bytes one single-token step reads: all constants, routed-expert stacks at topk/experts."""
    total = 0.0
    for layer in ET.parse(xml).getroot().iter("layer"):
        if layer.get("type") != "Const":
            continue
        d = layer.find("data")
        n = int(d.get("size"))
        shape = [int(x) for x in d.get("shape").split(",") if x]
        # Expert stacks (codes, scales, zero points) lead with the expert axis.
        total += n * topk / experts if len(shape) >= 3 and shape[0] == experts else n
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


def measure(folder):
    """Runs in a child process: compile, prefill, timed steps; prints JSON."""
    import numpy as np
    import openvino as ov
    folder = Path(folder)
    core = ov.Core()
    t0 = time.perf_counter()
    layer = core.compile_model(folder / "openvino_mtp_model.xml", "CPU")
    head = core.compile_model(folder / "openvino_mtp_lm_head.xml", "CPU")
    compile_s = time.perf_counter() - t0
    compile_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    precisions = sorted({op.input(1).get_source_output().get_node().get_rt_info()["outputPrecisions"].astype(str)
                         for op in layer.get_runtime_model().get_ordered_ops()
                         if op.get_rt_info()["layerType"].astype(str) in ("FullyConnected", "GatherMatmul")})
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
    print(json.dumps({"compile_s": compile_s, "compile_rss": compile_rss, "layer_ms": 1e3 * statistics.median(alone),
                      "head_ms": 1e3 * statistics.median(with_head), "precisions": precisions,
                      "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))


def main():
    cfg = json.loads((SRC / "config.json").read_text())
    text = cfg.get("text_config", cfg)
    experts, topk = text["num_experts"], text["num_experts_per_tok"]
    WORK.mkdir(parents=True, exist_ok=True)
    bw = bandwidth()
    rows = []
    for name, args in CONFIGS:
        out = WORK / name
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([str(BIN), "export", "--src", str(SRC), "--target", "openvino", "--out", str(out), "--quiet", *args], check=True)
        runs = [json.loads(subprocess.run([sys.executable, __file__, "--measure", str(out)], check=True, capture_output=True, text=True).stdout)
                for _ in range(REPEAT)]
        med = {k: statistics.median(r[k] for r in runs) for k in ("compile_s", "compile_rss", "layer_ms", "head_ms", "peak_rss")}
        lb = step_bytes(out / "openvino_mtp_model.xml", experts, topk)
        hb = step_bytes(out / "openvino_mtp_lm_head.xml", experts, topk)
        rows.append((name, med, runs, lb, hb, runs[0]["precisions"]))
        shutil.rmtree(out, ignore_errors=True)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    import openvino as ov
    lines = [f"# Draft-step latency, OpenVINO CPU ({datetime.date.today().isoformat()})", "",
             f"Machine: {os.cpu_count()} cores ({cpu}), OpenVINO {ov.get_version()}; memory bandwidth (numpy copy, best of 5) "
             f"{bw / 1e9:.1f} GB/s. Checkpoint: the real-size synthetic Qwen3.6 head (hidden 2048, {experts} experts, top-{topk}, "
             f"vocab 248,320). Default compile; {PREFILL}-token prefill, then {STEPS} single-token steps; medians over "
             f"{REPEAT} fresh processes (range in brackets). lm_head int8 in every row. Floor = bytes per step / bandwidth.", "",
             "| head | layer ms/step | layer + lm_head ms/step | compile s | peak RSS after compile | weights read per step (layer / lm_head) | floor ms (layer / +lm_head) | ratio to floor (layer / +lm_head) | compiled weight precisions |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, med, runs, lb, hb, precs in rows:
        rng = lambda k: f"[{min(r[k] for r in runs):.1f}–{max(r[k] for r in runs):.1f}]"
        fl, fh = 1e3 * lb / bw, 1e3 * (lb + hb) / bw
        lines.append(f"| {name} | {med['layer_ms']:.2f} {rng('layer_ms')} | {med['head_ms']:.2f} {rng('head_ms')} | {med['compile_s']:.1f} | "
                     f"{med['compile_rss'] / 2**30:.2f} GiB | {lb / 1e6:.1f} MB / {hb / 1e6:.1f} MB | {fl:.2f} / {fh:.2f} | "
                     f"{med['layer_ms'] / fl:.1f}x / {med['head_ms'] / fh:.1f}x | {', '.join(precs)} |")
    report = "\n".join(lines) + "\n"
    print(report)
    dest = ROOT / "bench" / "results" / f"{datetime.date.today().isoformat()}-draft-step.md"
    dest.write_text(report)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--measure":
        measure(sys.argv[2])
    else:
        main()

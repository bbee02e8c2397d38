"""Benchmark --graft on a real-size trunk, one file or a split set (bench/run.sh runs it).

The trunk is a synthetic GGUF of the real-size Qwen3.6 checkpoint that
run.sh generates (bench/synthtrunk: every tensor at its real shape, the
embedding and lm_head F32, the rest BF16; above 10 GB), the source that
checkpoint with the tiny test tokenizer. Each run copies the trunk with `cp`
and grafts the head into it, back to back, and the ratio graft / cp of each
pair is reported (median and range), with the graft's peak RSS. `cp` (GNU
coreutils) copies with copy_file_range too, so the ratio is what the head
(read, cast, written) and the output's sha256 (hashed as the copy lands)
cost on top of the copy. The page cache is left as it is (warm): dropping it
would slow every other process on a shared machine.

With BENCH_SPLIT=1 (bench/run.sh: BENCH_ONLY=gguf-graft-split) the trunk is
first split by the pinned llama-gguf-split --split-max-size 4G into a set of
files, which replaces the one file in bench/.data (disk), and the row is the
graft into that set (given its first file) against `cp` of every file of it.
"""
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import GGUF_SRC as SRC, gguf_source, machine, timed

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "bench" / ".bin"
DATA = ROOT / "bench" / ".data"
TRUNK = DATA / "qwen3.6-moe-full-trunk.gguf"
WORK = DATA / "graft-out"
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
SPLIT = os.environ.get("BENCH_SPLIT") == "1"
SET = DATA / "split-set"


def prepare():
    """The trunk's files: the one file, or (SPLIT) the set made of it."""
    gguf_source()  # the checkpoint with the tiny tokenizer, as bench.py's GGUF rows read it
    members = sorted(SET.glob(TRUNK.stem + "-*-of-*.gguf"))
    if SPLIT and members:
        return members
    if not TRUNK.exists():
        subprocess.run(["go", "run", "./bench/synthtrunk", str(SRC), str(TRUNK) + ".tmp"], cwd=ROOT, check=True)
        os.rename(str(TRUNK) + ".tmp", TRUNK)
    if not SPLIT:
        return [TRUNK]
    llama = Path(subprocess.run([str(ROOT / "scripts" / "build-llama.sh")], cwd=ROOT, check=True,
                                capture_output=True, text=True).stdout.split()[-1])
    shutil.rmtree(SET, ignore_errors=True)
    SET.mkdir()
    subprocess.run([str(llama / "llama-gguf-split"), "--split", "--split-max-size", "4G", str(TRUNK), str(SET / TRUNK.stem)],
                   check=True, env=dict(os.environ, LD_LIBRARY_PATH=str(llama)), stdout=subprocess.DEVNULL)
    TRUNK.unlink()  # the set replaces it (disk); the one-file row makes it again
    return sorted(SET.glob(TRUNK.stem + "-*-of-*.gguf"))


def main():
    files = prepare()
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir()
    size = sum(f.stat().st_size for f in files)
    load = [os.getloadavg()[0]]
    cps, grafts, ratios, rss, out_size = [], [], [], [], 0
    for _ in range(REPEAT):
        copy = WORK / "copy"
        copy.mkdir()
        os.sync()  # the previous command's writeback is not charged to this one
        t0 = time.perf_counter()
        subprocess.run(["cp", *map(str, files), str(copy)], check=True)
        t_cp = time.perf_counter() - t0
        shutil.rmtree(copy)
        out = WORK / "graft"
        os.sync()
        stdout, t_g, _, time_rss = timed([str(BIN / "mtpconv"), "export", "--src", str(SRC), "--target", "gguf",
                                          "--graft", str(files[0]), "--out", str(out), "--json"])
        summary = json.loads(stdout)
        rss.append((summary["peak_rss_bytes"], time_rss))
        out_size = sum((out / f.name).stat().st_size for f in files)
        shutil.rmtree(out)
        cps.append(t_cp)
        grafts.append(t_g)
        ratios.append(t_g / t_cp)
        print(f"cp {t_cp:6.2f} s   graft {t_g:6.2f} s   x{t_g / t_cp:.2f}", flush=True)
    shutil.rmtree(WORK, ignore_errors=True)
    load.append(os.getloadavg()[0])
    fs = subprocess.run(["stat", "-f", "-c", "%T", str(DATA)], capture_output=True, text=True).stdout.strip()
    rng = lambda xs: f"{statistics.median(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})"
    what = (f"a split set of {len(files)} files (llama-gguf-split --split-max-size 4G: "
            + ", ".join(f"{f.stat().st_size / 1e9:.2f}" for f in files) + " GB), given its first file" if SPLIT else "one file")
    lines = [
        f"# mtpconv benchmark: --graft into a real-size trunk GGUF, {what}, {datetime.date.today().isoformat()}",
        "",
        f"Machine: {machine()}; file system {fs}; load average {load[0]:.1f} before, {load[1]:.1f} after "
        "(the graft hashes every byte it writes, sha256 for the manifest: on a loaded machine that CPU time, not the copy, sets the ratio).",
        f"Trunk: {TRUNK.name}, {size / 1e9:.2f} GB (bench/synthtrunk from `go run ./cmd/mkfixtures qwen3.6-moe-full`: "
        "4 layers at Qwen3.6-35B-A3B's real shapes, embedding and lm_head F32, the rest BF16); "
        f"the grafted {'set' if SPLIT else 'file'} {out_size / 1e9:.2f} GB (the BF16 head added).",
        "Each run: `cp` of the trunk's files then `mtpconv export --target gguf --graft` into them, back to back, each after a `sync`; "
        f"the page cache warm. The graft is {out_size / size:.3f}× the trunk's bytes. "
        f"{REPEAT} runs, medians with the range in brackets; × cp is the median of the paired ratios.",
        "",
        "| row | trunk GB | cp s | graft s | × cp | graft peak RSS MiB (VmHWM / time) |",
        "|---|---|---|---|---|---|",
        f"| gguf-graft{'-split' if SPLIT else ''} bf16 head | {size / 1e9:.2f} | {rng(cps)} | {rng(grafts)} | {statistics.median(ratios):.2f} | "
        f"{max(r[0] for r in rss) / 2**20:.0f} / {max(r[1] for r in rss) / 2**20:.0f} |",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    dest = ROOT / "bench" / "results" / f"{datetime.date.today().isoformat()}-gguf-graft{'-split' if SPLIT else ''}.md"
    dest.write_text(text)
    print(f"written to {dest.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())

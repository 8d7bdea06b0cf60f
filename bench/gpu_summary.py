#!/usr/bin/env python3
"""The summary of bench/gpu_check.sh, printed last and kept under 10 KB: the stages, one line per benchmark
family, PyTorch on the same card, 3b-uoe, the bars with PASS/FAIL and their figures, and last every failed,
crashed or hung test or benchmark family with its first error line (at most 40 lines).

  gpu_summary.py SCRATCH   (reads the check's scratch folder: stages.tsv, gpu.txt, build.log, tests.json,
                            failures.json, bench.json, peer-ops.json, peer-train.log, info3b.txt, run3b/)
"""
import json
import os
import re
import sys

MAX_BYTES = 9500  # under the 10 KB the summary may take, with room for the line that names the archive
MAX_FAILURE_LINES = 40
LINE_CHARS = 160
PEAK_TFLOPS = 989  # H200 SXM dense bf16, the MFU denominator
UNITS = ("TFLOP/s", "tokens/s", "GB/s")


def load_json(scratch, name):
    try:
        return json.load(open(os.path.join(scratch, name)))
    except (OSError, ValueError):
        return None


def read(scratch, name):
    try:
        return open(os.path.join(scratch, name), errors="replace").read()
    except OSError:
        return ""


def clip(text, chars=LINE_CHARS):
    return text if len(text) <= chars else text[:chars - 3] + "..."


def figure(value):
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def stages(scratch):
    """stages.tsv: name, status, seconds, note per finished (or skipped) stage, as gpu_check.sh records them."""
    lines = ["== stages"]
    for row in read(scratch, "stages.tsv").splitlines():
        name, status, seconds, note = (row.split("\t") + ["", "", ""])[:4]
        lines.append(clip(f"  {name:13s} {status:11s} {seconds:>4s} s  {note}".rstrip()))
    return lines


def build_errors(scratch):
    """The first compiler or CMake errors of a failed configure or build, for the failure list."""
    text = read(scratch, "build.log") or read(scratch, "configure.log")
    errors = [line.strip() for line in text.splitlines() if re.search(r"\berror\b|Error|FAILED:", line)]
    return [clip("  " + line) for line in errors[:12]]


def benchmark_name(b, family):
    """The part of a benchmark's name after its family, or its label (the training step's preset)."""
    if b.get("label") and family == "BM_GpuTrainStep":
        return b["label"]
    rest = b["name"][len(family) + 1:]
    return re.sub(r"/(manual_time|real_time|iterations:\d+)", "", rest) or "-"


def benchmark_families(runs, families):
    """One line per family: how many ran, how it ended, then each benchmark's figure by its arguments."""
    lines = ["== benchmark families (figure by arguments; errors; bench.json in the archive)"]
    by_family = {}
    for b in runs:
        if b.get("run_type") != "aggregate":
            by_family.setdefault(b["name"].split("/")[0], []).append(b)
    for family in list(families) + [f for f in by_family if f not in families]:
        found = by_family.get(family, [])
        good = [b for b in found if not b.get("error_occurred")]
        unit = next((u for u in UNITS if any(u in b for b in good)), None)
        shown = []
        for b in good:
            value = b.get(unit) if unit else b.get("real_time")
            extra = f"(x{b['ratio']:.2f})" if "ratio" in b else ""
            if value is not None:
                shown.append(f"{benchmark_name(b, family)}={figure(value)}{extra}")
        errors = [b.get("error_message", "?") for b in found if b.get("error_occurred")]
        status = families.get(family, "")
        head = f"  {family:26s} {len(good)}/{len(found)} ok" + (f", {status}" if status and status != "exit 0" else "")
        shown_unit = unit or (found[0].get("time_unit", "") if found else "")
        tail = f" [{shown_unit}] " + " ".join(shown) if shown else ""
        if errors:
            tail += f" {len(errors)} errors: {errors[0]}"
        lines.append(clip(head + tail))
    return lines


def peer(scratch, ops):
    lines = ["== PyTorch on the same card (peer-ops.json, peer-train.log)"]
    if ops:
        gemm = " ".join(f"{g['n']}^3 {g['tflops']:.0f}" for g in ops["gemm_bf16"])
        attn = " ".join(f"{a['dh']}/{a['T']} {a['fwd_tflops']:.0f}/{a['bwd_tflops']:.0f}" for a in ops["attention_bf16"])
        lines.append(clip(f"  torch {ops['torch']} on {ops['device']}: bf16 GEMM TFLOP/s {gemm}"))
        lines.append(clip(f"  SDPA causal bf16 TFLOP/s fwd/bwd by Dh/T: {attn}", 2 * LINE_CHARS))
    else:
        lines.append("  ops: no result")
    train = [line.strip() for line in read(scratch, "peer-train.log").splitlines() if line.startswith("pytorch ")]
    lines += [clip("  " + line) for line in train] or ["  small-preset training: no result"]
    return lines


def run3b(scratch):
    """3b-uoe's tokens/s, MFU and peak memory against `uoe info`'s estimate; (lines, MFU, |drift|)."""
    try:
        steps = [json.loads(line) for line in open(os.path.join(scratch, "run3b", "metrics.jsonl"))]
        last = steps[-1]
        estimate = re.search(r"total\s+([0-9.]+) MiB", read(scratch, "info3b.txt"))
        est = float(estimate.group(1)) if estimate else float("nan")
        peak = last["peak_memory_mib"]
        # steady state: the median of the steps after the first two (cuBLASLt heuristics, allocator growth)
        steady = sorted(s["step_tokens_per_s"] for s in steps[2:]) or [last["tokens_per_s"]]
        tps = steady[len(steady) // 2]
        tflops = tps * last["model_tflops"] / last["tokens_per_s"]
        line = (f"  bf16, activation checkpointing, batch 32 x 1024: {tps:.0f} tokens/s (median of steps 3+), "
                f"{tflops:.1f} model TFLOP/s = {100 * tflops / PEAK_TFLOPS:.1f}% MFU; peak {peak:.0f} MiB vs "
                f"estimate {est:.0f} MiB ({100 * (est - peak) / peak:+.1f}%)")
        return ["== 3b-uoe", clip(line, 2 * LINE_CHARS)], tflops / PEAK_TFLOPS, abs(est - peak) / peak
    except OSError:
        return ["== 3b-uoe", "  no result: no run3b/metrics.jsonl (train3b.log)"], None, None
    except (ValueError, KeyError, IndexError, ZeroDivisionError) as e:
        return ["== 3b-uoe", f"  no result ({type(e).__name__}: {clip(str(e), 100)})"], None, None


def bars(runs, ops, mfu3b, drift3b):
    """The issues' bars, each PASS or FAIL against the figure that decides it (a missing figure says so)."""
    lines = ["== bars (issue 5; issue 6 for 3b-uoe; attention also against PyTorch SDPA on this card)"]

    def bench(pattern, key):
        hits = [b for b in runs if re.search(pattern, b["name"]) and not b.get("error_occurred") and key in b]
        return hits[0][key] if hits else None

    def bar(what, value, goal, unit, more=True, note=""):
        if value is None:
            lines.append(f"  {what:56s} no figure")
            return
        ok = value >= goal if more else value <= goal
        lines.append(clip(f"  {what:56s} {'PASS' if ok else 'FAIL'}  {figure(value)} {unit} "
                          f"(bar {'>=' if more else '<='} {goal:,} {unit}){note}"))

    def sdpa(key):
        hit = [a for a in (ops or {}).get("attention_bf16", []) if a["dh"] == 128 and a["T"] == 4096]
        return hit[0][key] if hit else None

    fwd = bench(r"^BM_GpuAttentionFwdBf16/128/4096/0/0/", "TFLOP/s")
    bwd = bench(r"^BM_GpuAttentionBwdBf16/128/4096/0/0/", "TFLOP/s")
    train = {b.get("label"): b for b in runs if b["name"].startswith("BM_GpuTrainStep") and not b.get("error_occurred")}
    uoe, moe = (train.get(p, {}).get("tokens/s") for p in ("small-uoe", "small-moe"))
    bar("bf16 GEMM 8192^3", bench(r"^BM_GpuGemmBf16/8192/", "TFLOP/s"), 600, "TFLOP/s")
    for direction, mine, goal, key in (("forward", fwd, 250, "fwd_tflops"), ("backward", bwd, 150, "bwd_tflops")):
        bar(f"causal attention {direction}, head dim 128, T 4096", mine, goal, "TFLOP/s")
        theirs = sdpa(key)
        both = mine is not None and bool(theirs)
        bar(f"  the same over PyTorch SDPA's {direction} (same shape)", mine / theirs if both else None, 0.8, "x",
            note=f"; uoe {mine:.0f} vs SDPA {theirs:.0f} TFLOP/s" if both else "")
    with_plan = bench(r"^BM_GpuExpertFfnBf16/512/0/", "with_plan_TFLOP/s")
    bar("expert_ffn / dense GEMMs, 512 tokens per expert", bench(r"^BM_GpuExpertFfnBf16/512/0/", "ratio"), 0.7, "",
        note=f"; with its plan (one host sync) {with_plan:.0f} TFLOP/s" if with_plan is not None else "")
    bar("small-dense training", train.get("small-dense", {}).get("tokens/s"), 250000, "tokens/s")
    bar("small-uoe MFU", train.get("small-uoe", {}).get("MFU"), 0.25, "")
    bar("small-uoe tokens/s over small-moe's", uoe / moe if uoe and moe else None, 1.0, "x")
    bar("3b-uoe MFU (activation checkpointing)", mfu3b, 0.25, "")
    bar("3b-uoe |estimate - peak| / peak", drift3b, 0.10, "", more=False)
    return lines


def failures(scratch, room):
    """Every failed, crashed or hung test and benchmark family with its first error line, as many as fit in
    room bytes and 40 lines; what is cut is counted."""
    listed = load_json(scratch, "failures.json") or []
    build = build_errors(scratch) if re.search(r"^(configure|build)\t(failed|timed out)", read(scratch, "stages.tsv"),
                                               re.M) else []
    counts = (load_json(scratch, "tests.json") or {}).get("counts", {})
    head = [f"== failed, crashed or hung: {len(listed)} (failures.json; logs in the archive); CUDA tests: "
            + (", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "no result")]
    body = (["  build errors:"] + build if build else []) + [
        clip(f"  {f['status'].upper():8s} {f['name']}: {f['error']}") for f in listed]
    kept, size = [], sum(len(line) + 1 for line in head) + 60
    for line in body[:MAX_FAILURE_LINES]:
        if size + len(line) + 1 > room:
            break
        kept.append(line)
        size += len(line) + 1
    if len(kept) < len(body):
        kept.append(f"  ... and {len(body) - len(kept)} more lines: failures.json in the archive")
    return head + kept


def summary(scratch):
    gpu = read(scratch, "gpu.txt").strip() or "no GPU line (preflight did not reach nvidia-smi)"
    bench_json = load_json(scratch, "bench.json") or {}
    runs = bench_json.get("benchmarks", [])
    ops = load_json(scratch, "peer-ops.json")
    lines3b, mfu3b, drift3b = run3b(scratch)
    lines = [f"==== uoe GPU check summary: {clip(gpu, 120)}"] + stages(scratch)
    fatal = [line for line in read(scratch, "preflight.txt").splitlines() if "FATAL" in line]
    if fatal:  # nothing else ran
        return lines + [clip(line) for line in fatal]
    lines += benchmark_families(runs, bench_json.get("families", {}))
    lines += peer(scratch, ops) + lines3b + bars(runs, ops, mfu3b, drift3b)
    room = MAX_BYTES - sum(len(line) + 1 for line in lines)
    return lines + failures(scratch, room)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print("\n".join(summary(sys.argv[1])))

#!/usr/bin/env python3
"""Runs the CUDA tests and the GPU benchmarks so that one crash, hang or sticky CUDA error costs one test or one
benchmark family, not the rest of a device call (bench/gpu_check.sh).

  gpu_runner.py tests BINARY FILTER SECONDS OUTDIR   -> OUTDIR/tests.log, OUTDIR/tests.json
  gpu_runner.py bench BINARY FILTER SECONDS OUTDIR   -> OUTDIR/bench.log, OUTDIR/bench.json (families merged)

tests: GoogleTest runs the tests in listing order; when a process dies (signal, abort, timeout) the test it had
started and not finished is recorded as crashed or hung, and a fresh process goes on with the tests after it. A
failure whose message shows a sticky CUDA error (illegal address, launch failure, ...) poisons the context for
every later test of that process, so those are run again in a fresh process. The first crashed tests run once more
under compute-sanitizer, when the machine has it, to name the kernel and line of a bad access.
bench: each benchmark family (the name up to its first '/') runs in its own process, those that decide the issue's
bars first, each with what is left of the time but for 3 s for every family after it, and at most three times
its fair share (90 s at least), so that a hang leaves time to the families after it. A family killed partway
keeps the benchmarks it had finished (read from its partial JSON).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

STICKY = re.compile(r"illegal memory access|illegal address|unspecified launch failure|misaligned address|"
                    r"illegal instruction|cudaErrorLaunchFailure|cudaErrorIllegal|CUDA_ERROR_ILLEGAL|"
                    r"device-side assert|hardware stack error|uncorrectable ECC")
STALL_SECONDS = 60  # a test that prints nothing for this long is hung


def run(cmd, seconds, log, stall=None):
    """Runs cmd, appending its output to log; returns (its exit code, or 'out of time' when it ran past seconds,
    'stalled' when it printed nothing for stall seconds, 'killed' for a SIGKILL from elsewhere (out of memory);
    and its output)."""
    log.write(f"\n$ {' '.join(cmd)[:300]}\n")
    log.flush()
    lines, last = [], [time.time()]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def read():
        for raw in p.stdout:
            lines.append(raw.decode(errors="replace"))
            last[0] = time.time()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.time() + max(seconds, 1)
    why = None
    while p.poll() is None:
        if time.time() > deadline:
            why = "out of time"
        elif stall and time.time() - last[0] > stall:
            why = "stalled"
        if why:
            p.kill()
            p.wait()
            break
        time.sleep(0.1)
    reader.join(5)
    rc = why or ("killed" if p.returncode == -signal.SIGKILL else p.returncode)
    out = "".join(lines)
    log.write(out)
    log.write(f"\n[gpu_runner] exit {rc}\n")
    log.flush()
    return rc, out


def list_tests(binary, pattern):
    out = subprocess.run([binary, f"--gtest_filter={pattern}", "--gtest_list_tests"], stdout=subprocess.PIPE,
                         check=True).stdout.decode()
    names, suite = [], ""
    for line in out.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            suite = line.split("#")[0].strip()
        else:
            names.append(suite + line.split("#")[0].strip())
    return names


def tests(binary, pattern, seconds, outdir):
    deadline = time.time() + seconds
    pending = list_tests(binary, pattern)
    result = {}  # name -> passed | failed | skipped | crashed | hung | sticky | not run
    messages = {}
    with open(os.path.join(outdir, "tests.log"), "w") as log:
        while pending and time.time() < deadline - 2:
            settled = len(result)
            rc, out = run([binary, "--gtest_filter=" + ":".join(pending), "--gtest_color=no"],
                          deadline - time.time(), log, stall=STALL_SECONDS)
            started, current, body = [], None, []
            sticky_at = None
            for line in out.splitlines():
                m = re.match(r"\[ RUN      \] (\S+)", line)
                if m:
                    current, body = m.group(1), []
                    started.append(current)
                    continue
                m = re.match(r"\[ +(OK|FAILED|SKIPPED) +\] (\S+)", line)
                if m and m.group(2) == current:
                    status = {"OK": "passed", "FAILED": "failed", "SKIPPED": "skipped"}[m.group(1)]
                    text = "\n".join(body)
                    if status == "failed" and sticky_at is None and STICKY.search(text):
                        sticky_at, status = current, "sticky"
                    if sticky_at is None or current == sticky_at:
                        result[current] = status
                        if status != "passed":
                            messages[current] = text[-1500:]
                    current = None
                    continue
                if current:
                    body.append(line)
            # Started, never finished: the process died or hung there. After a sticky error the context was
            # already broken, and out of time it was not the test's fault: those stay pending (run again in a
            # fresh process, or reported as not run).
            if current and current not in result and sticky_at is None and rc != "out of time":
                result[current] = "hung" if rc == "stalled" else "crashed"
                messages[current] = "\n".join(body)[-1500:] + f"\n(process exit {rc})"
            if not started:  # nothing ran: a failure before the first test (listing, CUDA initialisation)
                messages["<process>"] = out[-1500:]
                break
            pending = [n for n in pending if n not in result]
            if len(result) == settled:  # no progress (a listed test the filter does not run): stop
                break
        for n in pending:
            result.setdefault(n, "not run")
        # A bad memory access, located: the first few crashed tests again under compute-sanitizer (where the
        # machine's runtime supports it), whose report names the kernel and, with -lineinfo, the line.
        sanitizer = shutil.which("compute-sanitizer")
        for name in [n for n, status in result.items() if status in ("crashed", "sticky")][:3]:
            if not sanitizer or deadline - time.time() < 20:
                break
            rc, out = run([sanitizer, "--print-limit", "3", binary, "--gtest_filter=" + name],
                          min(60, deadline - time.time()), log)
            report = [line for line in out.splitlines() if line.startswith("=========")]
            messages[name] += "\ncompute-sanitizer:\n" + "\n".join(report[:12])
    counts = {}
    for status in result.values():
        counts[status] = counts.get(status, 0) + 1
    json.dump({"counts": counts, "results": result, "messages": messages},
              open(os.path.join(outdir, "tests.json"), "w"), indent=1)
    print("CUDA tests:", ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    for name, status in result.items():
        if status not in ("passed", "skipped"):
            print(f"--- {status}: {name}")
            print("\n".join(messages.get(name, "").strip().splitlines()[-20:]))
    if "<process>" in messages:
        print("--- the test binary ran no test:\n" + messages["<process>"])
    return 0 if set(result.values()) <= {"passed", "skipped"} and "<process>" not in messages else 1


def benchmarks_of(path):
    """The finished benchmarks of a Google Benchmark JSON file, also of one cut short by a killed process (it is
    written as the benchmarks finish)."""
    try:
        return json.load(open(path))["benchmarks"]
    except (OSError, ValueError, KeyError):
        pass
    try:
        text = open(path).read()
    except OSError:
        return None
    start = text.find('"benchmarks"')
    if start < 0:
        return None
    i, found, decoder = text.find("[", start) + 1, [], json.JSONDecoder()
    while True:
        i = re.compile(r"[\s,]*").match(text, i).end()
        try:
            entry, i = decoder.raw_decode(text, i)
        except ValueError:
            return found
        found.append(entry)


def bench(binary, pattern, seconds, outdir):
    deadline = time.time() + seconds
    listed = subprocess.run([binary, f"--benchmark_filter={pattern}", "--benchmark_list_tests"],
                            stdout=subprocess.PIPE, check=True).stdout.decode().split()
    families = list(dict.fromkeys(n.split("/")[0] for n in listed))
    # the families that decide the bars first; each may take what is left but for 3 s per family after it
    first = ["BM_GpuGemmBf16", "BM_GpuTrainStep", "BM_GpuAttentionFwdBf16", "BM_GpuAttentionBwdBf16",
             "BM_GpuExpertFfnBf16"]
    families.sort(key=lambda f: first.index(f) if f in first else len(first))
    merged, failures = [], []
    with open(os.path.join(outdir, "bench.log"), "w") as log:
        for i, family in enumerate(families):
            left = deadline - time.time()
            share = min(left - 3 * (len(families) - 1 - i), max(90, 3 * left / (len(families) - i)))
            if share < 3:
                failures.append(f"{family}: not run (no time left)")
                continue
            part = os.path.join(outdir, f"bench-{family}.json")
            rc, _ = run([binary, f"--benchmark_filter=^{family}(/|$)", "--benchmark_min_time=0.2",
                         f"--benchmark_out={part}", "--benchmark_out_format=json"], share, log)
            found = benchmarks_of(part)
            if not found:
                failures.append(f"{family}: exit {rc}, no results (bench.log)")
                continue
            if rc != 0:
                failures.append(f"{family}: exit {rc} after {len(found)} benchmarks")
            merged += found
    json.dump({"benchmarks": merged}, open(os.path.join(outdir, "bench.json"), "w"), indent=1)
    for f in failures:
        print("benchmark family", f)
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 6 or sys.argv[1] not in ("tests", "bench"):
        sys.exit(__doc__)
    mode, binary, pattern, seconds, outdir = sys.argv[1:]
    sys.exit((tests if mode == "tests" else bench)(binary, pattern, float(seconds), outdir))

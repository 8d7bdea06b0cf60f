#!/usr/bin/env python3
"""Runs the CUDA tests and the GPU benchmarks so that one crash, hang or sticky CUDA error costs one test or one
benchmark family, not the rest of a device call (bench/gpu_check.sh).

  gpu_runner.py tests --out DIR --seconds S --filter F BINARY...  -> DIR/tests.log, DIR/tests.json
  gpu_runner.py bench --out DIR --seconds S --filter F BINARY     -> DIR/bench.log, DIR/bench.json (families merged)
Both add what went wrong to DIR/failures.json (a list of {kind, name, status, error}; see gpu_failures.py), which
the summary prints last: every failed, crashed or hung test and benchmark family with its first error line.

tests: GoogleTest runs the tests in listing order; when a process dies (signal, abort, timeout) the test it had
started and not finished is recorded as crashed or hung, and a fresh process goes on with the tests after it. A
failure whose message shows a sticky CUDA error (illegal address, launch failure, ...) poisons the context for
every later test of that process, so those are run again in a fresh process. The first crashed tests run once more
under compute-sanitizer, when the machine has it (with UOE_CUDA_NO_CACHING=1, so that it sees every tensor's own
bounds; else with CUDA_LAUNCH_BLOCKING=1, so that the error names the launch that failed), to name the kernel and
line of a bad access. Several binaries run one after the other.
bench: each benchmark family (the name up to its first '/') runs in its own process, those that decide the issue's
bars first, each with what is left of the time but for 3 s for every family after it, and at most three times
its fair share (90 s at least), so that a hang leaves time to the families after it. A family killed partway
keeps the benchmarks it had finished (read from its partial JSON).
A test that prints nothing for UOE_GPU_RUNNER_STALL_SECONDS (60 by default) is hung.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time

import gpu_failures

STICKY = re.compile(r"illegal memory access|illegal address|unspecified launch failure|misaligned address|"
                    r"illegal instruction|cudaErrorLaunchFailure|cudaErrorIllegal|CUDA_ERROR_ILLEGAL|"
                    r"device-side assert|hardware stack error|uncorrectable ECC")
STALL_SECONDS = float(os.environ.get("UOE_GPU_RUNNER_STALL_SECONDS", "60"))
RERUNS = 3  # crashed tests rerun to locate the fault (each up to 60 s)


def run(cmd, seconds, log, stall=None, env=None):
    """Runs cmd, appending its output to log; returns (its exit code, or 'out of time' when it ran past seconds,
    'stalled' when it printed nothing for stall seconds, 'killed' for a SIGKILL from elsewhere (out of memory);
    and its output)."""
    log.write(f"\n$ {' '.join(cmd)[:300]}\n")
    log.flush()
    lines, last = [], [time.time()]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)

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


class ListingFailed(Exception):
    pass


def listing(cmd):
    """A binary's list of tests or benchmarks; raises ListingFailed with its output when it cannot list them (a
    crash at start-up, in CUDA initialisation say)."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ListingFailed(f"{os.path.basename(cmd[0])} could not list its tests: {e}")
    out = p.stdout.decode(errors="replace")
    if p.returncode != 0:
        raise ListingFailed(f"{out[-1200:]}\nlisting: {gpu_failures.describe_exit(p.returncode, 0)}")
    return out


def list_tests(binary, pattern):
    out = listing([binary, f"--gtest_filter={pattern}", "--gtest_list_tests"])
    names, suite = [], ""
    for line in out.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            suite = line.split("#")[0].strip()
        else:
            names.append(suite + line.split("#")[0].strip())
    return names


def run_binary(binary, pattern, deadline, log, result, messages):
    """Runs the tests of one binary matching pattern into result (name -> passed | failed | skipped | crashed |
    hung | sticky | not run) and messages (name -> the test's output; "<binary>" -> why it ran no test)."""
    try:
        pending = list_tests(binary, pattern)
    except ListingFailed as e:
        messages[f"<{os.path.basename(binary)}>"] = str(e)
        return
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
            messages[current] = "\n".join(body)[-1500:] + "\n" + gpu_failures.describe_exit(rc, STALL_SECONDS)
        if not started:  # nothing ran: a failure before the first test (listing, CUDA initialisation)
            messages[f"<{os.path.basename(binary)}>"] = out[-1500:]
            return
        pending = [n for n in pending if n not in result]
        if len(result) == settled:  # no progress (a listed test the filter does not run): stop
            break
    for n in pending:
        result.setdefault(n, "not run")


def locate_crashes(binary, names, deadline, log):
    """Runs each crashed test again, under compute-sanitizer where the machine has it (its report names the
    kernel and, with -lineinfo, the line of a bad access; the caching allocator is off, UOE_CUDA_NO_CACHING=1, so
    that a read past a tensor is not a read of its neighbour in the same segment), else with
    CUDA_LAUNCH_BLOCKING=1 (each launch waits, so the error surfaces at the launch that failed); returns name ->
    the rerun's first error line."""
    sanitizer = shutil.which("compute-sanitizer")
    found = {}
    for name in names[:RERUNS]:
        if deadline - time.time() < 20:
            break
        env = dict(os.environ, **({"UOE_CUDA_NO_CACHING": "1"} if sanitizer else {"CUDA_LAUNCH_BLOCKING": "1"}))
        cmd = ([sanitizer, "--print-limit", "3"] if sanitizer else []) + [binary, "--gtest_filter=" + name]
        rc, out = run(cmd, min(60, deadline - time.time()), log, stall=STALL_SECONDS, env=env)
        how = "compute-sanitizer (UOE_CUDA_NO_CACHING=1)" if sanitizer else "CUDA_LAUNCH_BLOCKING=1"
        found[name] = f"rerun with {how}: " + gpu_failures.rerun_error(out, rc, STALL_SECONDS)
    return found


def tests(binaries, pattern, seconds, outdir):
    deadline = time.time() + seconds
    result, messages, owner, reruns = {}, {}, {}, {}
    with open(os.path.join(outdir, "tests.log"), "w") as log:
        for binary in binaries:
            before = set(result)
            run_binary(binary, pattern, deadline, log, result, messages)
            mine = [n for n in result if n not in before]
            owner.update((n, binary) for n in mine)
            crashed = [n for n in mine if result[n] in ("crashed", "sticky")]
            reruns.update(locate_crashes(binary, crashed, deadline, log))
    counts = {}
    for status in result.values():
        counts[status] = counts.get(status, 0) + 1
    json.dump({"counts": counts, "results": result, "messages": messages},
              open(os.path.join(outdir, "tests.json"), "w"), indent=1)
    failures = [gpu_failures.test_failure(name, status, messages.get(name, ""), reruns.get(name))
                for name, status in result.items() if status in gpu_failures.NOT_PASSED]
    failures += [{"kind": "tests", "name": name, "status": "ran no test",
                  "error": gpu_failures.last_line(text) or "no output"}
                 for name, text in messages.items() if name.startswith("<")]
    gpu_failures.add(outdir, failures)
    print("CUDA tests:", ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "none ran")
    for f in failures:
        print(gpu_failures.one_line(f))
    return 0 if not failures else 1


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
    try:
        listed = listing([binary, f"--benchmark_filter={pattern}", "--benchmark_list_tests"]).split()
    except ListingFailed as e:
        gpu_failures.add(outdir, [{"kind": "benchmarks", "name": os.path.basename(binary), "status": "ran none",
                                   "error": gpu_failures.clip(gpu_failures.last_line(str(e)))}])
        print(e)
        return 1
    families = list(dict.fromkeys(n.split("/")[0] for n in listed))
    # the families that decide the bars first; each may take what is left but for 3 s per family after it
    first = ["BM_GpuGemmBf16", "BM_GpuTrainStep", "BM_GpuAttentionFwdBf16", "BM_GpuAttentionBwdBf16",
             "BM_GpuExpertFfnBf16"]
    families.sort(key=lambda f: first.index(f) if f in first else len(first))
    merged, failures, status = [], [], {}
    with open(os.path.join(outdir, "bench.log"), "w") as log:
        for i, family in enumerate(families):
            left = deadline - time.time()
            share = min(left - 3 * (len(families) - 1 - i), max(90, 3 * left / (len(families) - i)))
            if share < 3:
                status[family] = "not run (no time left)"
                continue
            part = os.path.join(outdir, f"bench-{family}.json")
            rc, out = run([binary, f"--benchmark_filter=^{family}(/|$)", "--benchmark_min_time=0.2",
                           f"--benchmark_out={part}", "--benchmark_out_format=json"], share, log)
            found = benchmarks_of(part) or []
            status[family] = f"exit {rc}" + (f" after {len(found)} benchmarks" if rc != 0 else "")
            if rc != 0:
                failures.append(gpu_failures.bench_failure(family, rc, share, len(found), out))
            merged += found
    json.dump({"benchmarks": merged, "families": status}, open(os.path.join(outdir, "bench.json"), "w"), indent=1)
    gpu_failures.add(outdir, failures)
    for f in failures:
        print(gpu_failures.one_line(f))
    return 1 if failures or any(s.startswith("not run") for s in status.values()) else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["tests", "bench"])
    p.add_argument("--out", required=True, help="folder for the logs and JSON files")
    p.add_argument("--seconds", type=float, required=True, help="time for the whole stage")
    p.add_argument("--filter", required=True, help="gtest filter (tests) or benchmark regex (bench)")
    p.add_argument("binaries", nargs="+")
    a = p.parse_args()
    if a.mode == "bench" and len(a.binaries) != 1:
        p.error("bench takes one binary")
    if a.mode == "tests":
        return tests(a.binaries, a.filter, a.seconds, a.out)
    return bench(a.binaries[0], a.filter, a.seconds, a.out)


if __name__ == "__main__":
    raise SystemExit(main())

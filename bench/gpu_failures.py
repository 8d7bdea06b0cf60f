"""What went wrong in a GPU check, one entry per failed, crashed or hung test or benchmark family, each with its
first error line: written by bench/gpu_runner.py to failures.json in the check's scratch folder, printed last by
bench/gpu_summary.py. An entry: {"kind": "test" | "benchmark" | "tests", "name", "status", "error"}."""
import json
import os
import re
import signal

NOT_PASSED = ("failed", "sticky", "crashed", "hung")
MESSAGE_LINES = 3  # lines after gtest's "Failure" line kept as the error (the message is often a header + values)
LINE_CHARS = 240


def describe_exit(rc, stall_seconds, share=None):
    """A process's end in words: a signal by name, a hang by how long it was silent."""
    if rc == "stalled":
        return f"hung: no output for {stall_seconds:.0f} s"
    if rc == "out of time":
        return f"ran past its {share:.0f} s share" if share else "ran past the deadline"
    if rc == "killed":
        return "killed by SIGKILL (out of memory?)"
    if isinstance(rc, int) and rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit {rc}"


def last_line(text):
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def gtest_error(text):
    """gtest's first "<file>:<line>: Failure" with the message lines after it, as one line; None without one."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"(.*?)(?::(\d+))?: Failure$", line.strip())
        if not m:
            continue
        where = os.path.basename(m.group(1)) + (f":{m.group(2)}" if m.group(2) else "")
        message = []
        for follow in lines[i + 1:i + 1 + MESSAGE_LINES]:
            if not follow.strip() or follow.startswith("["):
                break
            message.append(follow.strip())
        return clip(f"{where}: " + " | ".join(message))
    return None


def clip(text, chars=LINE_CHARS):
    return text if len(text) <= chars else text[:chars - 3] + "..."


def test_failure(name, status, output, rerun=None):
    """A test's entry: a failure's first gtest error; a crash or hang's end (the runner appends it as the last
    line of output) with the test's last line of output before it and the rerun's finding."""
    error = gtest_error(output)
    if status in ("crashed", "hung") or error is None:
        lines = [line.strip() for line in output.splitlines() if line.strip()]
        end = lines.pop() if status in ("crashed", "hung") and lines else ""
        before = error or (lines[-1] if lines else "")
        error = "; ".join(part for part in (end, f"last output: {before}" if before else "") if part)
    if rerun:
        error += "; " + rerun
    return {"kind": "test", "name": name, "status": status, "error": clip(error or "no output", 2 * LINE_CHARS)}


def rerun_error(output, rc, stall_seconds):
    """The first finding of a rerun: a compute-sanitizer error line, else gtest's failure, else how it ended."""
    for line in output.splitlines():
        if line.startswith("========= ") and not re.match(r"========= (COMPUTE-SANITIZER|ERROR SUMMARY|\s*$)", line):
            return clip(line[len("========= "):].strip())
    return gtest_error(output) or describe_exit(rc, stall_seconds) + (
        f"; last output: {last_line(output)}" if last_line(output) else "")


def bench_failure(family, rc, share, finished, output):
    status = "hung" if rc == "out of time" else "crashed" if rc == "killed" or (isinstance(rc, int) and rc < 0) \
        else "failed"
    error = describe_exit(rc, 0, share) + f" after {finished} benchmarks"
    if last_line(output):
        error += f"; last output: {last_line(output)}"
    return {"kind": "benchmark", "name": family, "status": status, "error": clip(error)}


def add(outdir, entries):
    """Appends entries to outdir/failures.json (the tests and the benchmarks each add theirs)."""
    path = os.path.join(outdir, "failures.json")
    try:
        known = json.load(open(path))
    except (OSError, ValueError):
        known = []
    json.dump(known + entries, open(path, "w"), indent=1)


def one_line(entry):
    return clip(f"{entry['status'].upper():8s} {entry['name']}: {entry['error']}", 2 * LINE_CHARS)

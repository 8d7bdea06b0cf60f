#!/usr/bin/env python3
"""DRY RUN ONLY (bench/gpu_check_dryrun.sh): a stand-in GoogleTest binary whose tests pass, fail, crash and hang
on purpose, so that a dry run of bench/gpu_check.sh on a machine without a GPU proves that each is named in the
summary with its first error line. It answers --gtest_list_tests and --gtest_filter (exact names joined by ':',
or '*' patterns) as a gtest binary does, in gtest's output format."""
import fnmatch
import os
import signal
import sys
import time


def passes():
    pass


def fails():
    print("/work/uoe/tests/cuda/test_dry_run.cpp:42: Failure")
    print("The difference between got and want is 0.5, which exceeds 1e-3, where")
    print("got evaluates to 1.5,")
    return False


def crashes():
    print("launching the stand-in kernel", flush=True)
    os.kill(os.getpid(), signal.SIGSEGV)


def hangs():
    print("waiting on a stand-in event that never completes", flush=True)
    time.sleep(3600)


TESTS = {"CudaDryRun.Passes": passes, "CudaDryRun.FailsWithMessage": fails, "CudaDryRun.Crashes": crashes,
         "CudaDryRun.Hangs": hangs, "CudaDryRun.PassesAfterTheHang": passes}


def selected(pattern):
    patterns = pattern.split("-")[0].split(":")
    return [name for name in TESTS if any(fnmatch.fnmatchcase(name, p) for p in patterns)]


def main():
    pattern = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--gtest_filter=")), "*")
    names = selected(pattern)
    if "--gtest_list_tests" in sys.argv:
        print("CudaDryRun.")
        for name in names:
            print("  " + name.split(".", 1)[1])
        return 0
    failed = []
    for name in names:
        print(f"[ RUN      ] {name}", flush=True)
        ok = TESTS[name]() is not False
        print(f"[ {'     OK' if ok else ' FAILED'} ] {name} (0 ms)", flush=True)
        failed += [] if ok else [name]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

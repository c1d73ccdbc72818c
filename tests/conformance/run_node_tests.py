#!/usr/bin/env python3
"""Runs the ONNX backend node tests through `tilefuse run DIR --check --json`.

Each test folder under onnx/backend/test/data/node (from the `onnx` PyPI package) is
classified as
  passed       exit 0: every output within tolerance of output_i.pb
  failed       exit 1 (mismatch), exit 2 with any error other than "unsupported",
               a crash, or a timeout
  unsupported  exit 2 with error code "unsupported" (an op, dtype, attribute or
               opset tilefuse does not support)
and the result is held against two committed lists beside this script:
  expected_failures.txt  one known failure per line: `test_name  reason`
  passing.txt            every test that passed when the list was last written
The run fails (exit 1) when a test fails that is not in expected_failures.txt, when a
listed failure no longer fails (so the list stays true), or when a test in passing.txt
no longer passes. `--write-lists` rewrites both lists from this run, keeping the
reasons already written and using the tool's message for new failures.
"""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED_FAILURES = os.path.join(HERE, "expected_failures.txt")
PASSING = os.path.join(HERE, "passing.txt")


def default_node_dir():
    import onnx  # only needed to find the test data

    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")


def first_failure_reason(report):
    for output in report.get("outputs", []):
        if not output.get("pass", True):
            return "output '%s': %s" % (output.get("name"), output.get("reason", "mismatch"))
    return "mismatch"


def one_line(text, limit=160):
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def classify(tilefuse, test_dir, timeout):
    """Returns (status, reason, seconds) for one backend-test folder."""
    start = time.monotonic()
    try:
        # The reference backend: this run checks import and op semantics against ONNX's
        # own outputs at ONNX's tolerances; the generated kernels are checked against the
        # reference by the compiled-graph and differential fuzz tests.
        proc = subprocess.run([tilefuse, "run", test_dir, "--check", "--json", "--backend", "reference"],
                              capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "failed", "timeout after %d s" % timeout, time.monotonic() - start
    seconds = time.monotonic() - start
    # Messages name the model file; the test's own name says the same in a list, shorter.
    proc.stdout = proc.stdout.replace(test_dir + os.sep, "")
    proc.stderr = proc.stderr.replace(test_dir + os.sep, "")
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = {}
    if proc.returncode == 0 and report.get("status") == "pass":
        return "passed", "", seconds
    if proc.returncode == 1:
        return "failed", one_line(first_failure_reason(report)), seconds
    if proc.returncode == 2:
        error = report.get("error", {})
        message = error.get("message") or proc.stderr.strip() or "exit 2"
        if error.get("code") == "unsupported":
            return "unsupported", one_line(message), seconds
        return "failed", one_line("error: " + message), seconds
    detail = proc.stderr.strip().splitlines()[-1:] or [""]
    return "failed", one_line("crashed with exit code %d %s" % (proc.returncode, detail[0])), seconds


def read_list(path):
    """{test_name: reason} from a list file; '#' starts a comment."""
    entries = {}
    if not os.path.exists(path):
        return entries
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition(" ")
            entries[name] = reason.strip()
    return entries


def unsupported_summary(results, top=8):
    """The commonest reasons for 'unsupported', with node names and opsets folded together."""
    counts = {}
    for status, reason, _ in results.values():
        if status != "unsupported":
            continue
        key = re.sub(r"node '[^']*'", "node", reason)
        key = re.sub(r"(input|tensor) '[^']*'", r"\1", key)
        key = re.sub(r", opset \d+\)", ")", key)
        key = re.sub(r"^'[^']*': ", "", key)
        counts[key] = counts.get(key, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return ["  %4d  %s" % (n, key) for key, n in ranked]


def write_lists(results, old_failures):
    failed = {n: r for n, (s, r, _) in results.items() if s == "failed"}
    with open(EXPECTED_FAILURES, "w") as f:
        f.write("# ONNX backend node tests that fail through `tilefuse run --check`, with the reason.\n"
                "# tests/conformance/run_node_tests.py fails when this list is not exactly true.\n")
        for name in sorted(failed):
            f.write("%s  %s\n" % (name, old_failures.get(name) or failed[name]))
    with open(PASSING, "w") as f:
        f.write("# ONNX backend node tests that pass; none of them may regress.\n")
        for name in sorted(n for n, (s, _, _) in results.items() if s == "passed"):
            f.write(name + "\n")


def compare_with_lists(results, expected_failures, passing):
    """Problems that make the run fail, as printable lines."""
    problems = []
    for name, (status, reason, _) in sorted(results.items()):
        if status == "failed" and name not in expected_failures:
            problems.append("NEW FAILURE %s: %s" % (name, reason))
        if status != "failed" and name in expected_failures:
            problems.append("LISTED FAILURE NOW %s %s: remove it from expected_failures.txt"
                            % (status.upper(), name))
        if status != "passed" and name in passing:
            problems.append("REGRESSION %s (in passing.txt) is now %s: %s" % (name, status, reason))
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tilefuse", default=os.environ.get("TILEFUSE_BINARY", "build/tilefuse"))
    parser.add_argument("--node-dir", help="folder of backend-test folders (default: the onnx package's)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=60, help="seconds per test")
    parser.add_argument("--filter", default="", help="only tests whose name matches this regex")
    parser.add_argument("--write-lists", action="store_true", help="rewrite the committed lists from this run")
    parser.add_argument("--verbose", action="store_true", help="print every test's result")
    args = parser.parse_args()

    node_dir = args.node_dir or default_node_dir()
    names = sorted(n for n in os.listdir(node_dir)
                   if os.path.isdir(os.path.join(node_dir, n)) and re.search(args.filter, n))
    if not names:
        print("error: no node tests found in %s" % node_dir, file=sys.stderr)
        return 2
    tilefuse = os.path.abspath(args.tilefuse)
    start = time.monotonic()
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(classify, tilefuse, os.path.join(node_dir, n), args.timeout): n for n in names}
        for future in concurrent.futures.as_completed(futures):
            results[futures[future]] = future.result()
    counts = {s: sum(1 for r in results.values() if r[0] == s) for s in ("passed", "failed", "unsupported")}
    if args.verbose:
        for name, (status, reason, seconds) in sorted(results.items()):
            print("%-60s %-11s %6.2fs %s" % (name, status, seconds, reason))

    expected_failures = read_list(EXPECTED_FAILURES)
    if args.write_lists:
        write_lists(results, expected_failures)
        print("wrote %s and %s" % (EXPECTED_FAILURES, PASSING))
        expected_failures = read_list(EXPECTED_FAILURES)
    passing = read_list(PASSING)
    if args.filter:  # a partial run can only speak for the tests it ran
        expected_failures = {n: r for n, r in expected_failures.items() if n in results}
        passing = {n: r for n, r in passing.items() if n in results}

    if counts["unsupported"]:
        print("commonest reasons for 'unsupported':")
        print("\n".join(unsupported_summary(results)))
    problems = compare_with_lists(results, expected_failures, passing)
    for line in problems:
        print(line)
    newly_passing = sorted(n for n, r in results.items() if r[0] == "passed" and n not in passing)
    if newly_passing:
        print("%d test(s) pass that passing.txt does not list yet (add them with --write-lists): %s"
              % (len(newly_passing), " ".join(newly_passing[:10]) + (" ..." if len(newly_passing) > 10 else "")))
    print("ONNX node tests: %d passed / %d failed / %d unsupported (of %d, %.0f s; %d known failures listed)"
          % (counts["passed"], counts["failed"], counts["unsupported"], len(results), time.monotonic() - start,
             len(expected_failures)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

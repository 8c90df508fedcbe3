"""What the built-in guardrails cost per check on a typical call.

A typical call is a relative path and a 2 KB text argument (prose and code, no secrets):
``{"path": "src/pkg/module.py", "content": <2 KB>}``. Each guardrail's ``check`` is timed
call by call, in interleaved blocks so that machine noise hits every row alike, and the
table shows the median and p99 in microseconds. Target: at most 20 us at the median for
``PathScope`` and ``SecretScanner``.

Two comparison rows are measured in the same run: ``os.path.realpath`` plus a prefix test
(the naive path check, which walks the root's own components on every call), and one
combined regex of the same secret patterns (the naive scanner, which the regex engine has
to try at every position of the text).

    python benchmarks/bench_guardrails.py [--runs 20000] [--block 1000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clearance import Principal
from clearance.guardrails import (
    GuardrailContext,
    PathScope,
    PiiRedactor,
    SecretScanner,
    SizeLimit,
    UrlAllowlist,
)

CTX = GuardrailContext(
    "files.write_file", "files__write_file", Principal("User", "u"), "s", None, "c", "arguments"
)

PROSE = (
    "The deployment finished at noon. Alice reviewed the change log and asked whether the "
    "migration had run on every shard; Bob said the last two were still catching up and "
    "that he would check the dashboard again after lunch. "
)
CODE = '''
def load_settings(path: str) -> dict[str, str]:
    """Read KEY=VALUE lines, skipping comments and blank lines."""
    settings: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, value = line.partition("=")
            if not sep:
                raise ValueError(f"{path}:{number}: expected NAME=VALUE")
            settings[name.strip()] = value.strip()
    return settings
'''


def typical_text(size: int = 2048) -> str:
    text = ""
    while len(text) < size:
        text += PROSE + CODE
    return text[:size]


def naive_secret_regex() -> re.Pattern[str]:
    """The obvious scanner: the same kinds of pattern, alternated into one regex."""
    return re.compile(
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}|gh[pousr]_[A-Za-z0-9]{36,}|"
        r"github_pat_\w{22,}|xox[abposr]-[A-Za-z0-9-]{10,}|[sr]k_(?:live|test)_\w{16,}|"
        r"AIza[\w-]{35}|sk-(?:ant-)?[\w-]{20,}|eyJ[\w-]+\.eyJ[\w-]+\.[\w-]*|"
        r"-----BEGIN[A-Z ]*PRIVATE KEY-----|://[^\s:/?#@]*:[^\s/?#]+@|"
        r"(?i:password|passwd|secret|token|api_?key)\w*[\"']?\s*[:=]\s*\S{8,}"
    )


def cases(root: str) -> list[tuple[str, str, Callable[[], Any]]]:
    text = typical_text()
    arguments = {"path": "src/pkg/module.py", "content": text}
    with_secret = {
        "path": "src/pkg/module.py",
        "content": text[:1000] + " token = ghp_" + "a1B2c3D4" * 4 + "a1B2 " + text[1000:2000],
    }
    result = {
        "content": [{"type": "text", "text": text}],
        "structured_content": None,
        "is_error": False,
    }
    scope = PathScope(root, fields=["/path"])
    secrets_args = SecretScanner.for_arguments()
    secrets_redact = SecretScanner.for_arguments(action="redact")
    secrets_result = SecretScanner()
    pii = PiiRedactor()
    urls = UrlAllowlist(hosts=["api.example.com"])
    size = SizeLimit(64_000)
    naive = naive_secret_regex()
    real_root = os.path.realpath(root)
    prefix = real_root + os.sep

    def naive_path() -> bool:
        real = os.path.realpath(os.path.join(real_root, arguments["path"]))
        return real.startswith(prefix)

    return [
        ("PathScope", "path argument (file exists)", lambda: scope.check(arguments, CTX)),
        ("  comparison", "os.path.realpath + prefix test", naive_path),
        (
            "SecretScanner",
            "arguments: path + 2 KB text",
            lambda: secrets_args.check(arguments, CTX),
        ),
        ("SecretScanner", "result: 2 KB text block", lambda: secrets_result.check(result, CTX)),
        (
            "SecretScanner",
            "redact: 2 KB with a token",
            lambda: secrets_redact.check(with_secret, CTX),
        ),
        ("  comparison", "one combined regex, 2 KB", lambda: naive.search(text)),
        ("PiiRedactor", "result: 2 KB text block", lambda: pii.check(result, CTX)),
        ("UrlAllowlist", "arguments: path + 2 KB text", lambda: urls.check(arguments, CTX)),
        ("SizeLimit", "arguments: path + 2 KB text", lambda: size.check(arguments, CTX)),
    ]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(runs: int, block: int, root: str) -> list[dict[str, Any]]:
    table = cases(root)
    samples: list[list[float]] = [[] for _ in table]
    for _, _, fn in table:  # warm up caches and the regex engine
        for _ in range(200):
            fn()
    done = 0
    while done < runs:
        n = min(block, runs - done)
        for i, (_, _, fn) in enumerate(table):
            out = samples[i]
            for _ in range(n):
                start = time.perf_counter_ns()
                fn()
                out.append((time.perf_counter_ns() - start) / 1000)
        done += n
    return [
        {
            "guardrail": name,
            "case": case,
            "runs": len(values),
            "median_us": statistics.median(values),
            "p99_us": percentile(values, 0.99),
        }
        for (name, case, _), values in zip(table, samples, strict=True)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=20_000, help="checks per row (>= 20000)")
    parser.add_argument("--block", type=int, default=1000, help="checks per interleaved block")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as base:
        root = Path(base) / "workspace"
        (root / "src" / "pkg").mkdir(parents=True)
        (root / "src" / "pkg" / "module.py").write_text(CODE)
        rows = measure(options.runs, options.block, str(root))
    if options.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'guardrail':<15} {'case':<33} {'runs':>7} {'median us':>10} {'p99 us':>9}")
    for row in rows:
        print(
            f"{row['guardrail']:<15} {row['case']:<33} {row['runs']:>7} "
            f"{row['median_us']:>10.1f} {row['p99_us']:>9.1f}"
        )
    print(f"(load average while running: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()

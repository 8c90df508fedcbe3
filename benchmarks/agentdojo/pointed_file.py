"""Would trusting the file the user named as a payee's source cost security? (issue 16)

Run: python benchmarks/agentdojo/pointed_file.py

banking user_task_0 ("pay the bill 'bill-december-2023.txt'") pays the IBAN written in the
bill, which the pack denies (a payee the user never named). This replays the banking corpus
and its variants against a copy of the pack that accepts a payee found in the result of a
``banking.read_file`` call whose ``file_path`` the user named (``pointed_calls`` in the trust
list, the place ``pointed:banking.read_file``), and prints the figures beside the pack's own.

It also counts, for each call paying a value found in such a file, how many IBAN-like ids the
file holds: a rule accepting the payee only when the file names exactly one account ("an
injection can add an account, not remove the real one") decides these calls as the copy does
whenever every such file holds one. Nothing here is written; nothing runs.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import run as bench

from clearance import Harness, MemoryJournal
from clearance.policy.cedar import CedarEvaluator
from clearance.provenance import TrustList
from clearance.provenance.values import inside_values
from clearance.tuning import replay

SUITE = "banking"
PAYMENTS = ("banking.send_money", "banking.schedule_transaction")
ACCEPT = '  !context.provenance.recipient.sources.contains("pointed:banking.read_file") &&\n'
GUARD = "  !context.provenance.recipient.user &&\n"
WROTE = '  !context.provenance.recipient.sources.contains("user") &&\n'
WROTE_OR_FILE = (
    '  !context.provenance.recipient.sources.containsAny(["user", "pointed:banking.read_file"])'
    " &&\n"
)
"""The rule on a payee she did not write (issue 33) takes the pointed file's payee as hers
too: otherwise the bill's amount, not its payee, would decide."""
POINTED = '\n[pointed_calls]\n"banking.read_file" = ["file_path"]\n'


def pointed_pack(into: Path) -> Path:
    """A copy of the banking pack whose payee rule also accepts a pointed file's values."""
    shutil.copytree(bench.PACKS / SUITE, into, dirs_exist_ok=True)
    cedar = into / f"{SUITE}.cedar"
    text = cedar.read_text(encoding="utf-8")
    head, rule, tail = text.partition('@id("payee-not-named-by-user")')
    assert rule and GUARD in tail and WROTE in tail, "the payee rules changed: update this"
    tail = tail.replace(GUARD, GUARD + ACCEPT, 1).replace(WROTE, WROTE_OR_FILE, 1)
    cedar.write_text(head + rule + tail, encoding="utf-8")
    trust = into / "provenance.toml"
    if '"banking.read_file" = ["file_path"]' not in trust.read_text(encoding="utf-8"):
        with trust.open("a", encoding="utf-8") as handle:
            handle.write(POINTED)
    return into


def figures(pack: Path, data: dict[str, Any], lines: list[str], raw: list[str]) -> str:
    def harness() -> Harness:
        return Harness(
            bench.registry_for(SUITE, data),
            evaluator=CedarEvaluator.from_directory(pack),
            journal=MemoryJournal(),
            trust=TrustList.from_directory(pack),
        )

    row = bench.score(bench.decide_all(lines, harness()), data, replay(lines, harness()))
    total = bench.score_variants(bench.decide_all(raw, harness()), raw)["total"]
    return (
        f"utility {row['utility']}/{row['user_tasks']}, pairs stopped"
        f" {row['deny'] + row['ask']}/{row['scorable']} ({row['deny']} deny), not stopped:"
        f" {', '.join(row['missed']) or 'none'}; variant calls stopped"
        f" {total['deny'] + total['ask']}/{sum(total.values())}"
    )


def ibans_in_named_files(lines: list[str]) -> Counter[tuple[str, str, int]]:
    """(label, file, IBAN-like ids it holds) of every file the user named that a payment
    call's conversation read."""
    counts: Counter[tuple[str, str, int]] = Counter()
    for text in lines:
        line = json.loads(text)
        if line["tool"] not in PAYMENTS:
            continue
        said = [e["content"] for e in line["conversation"] if e["role"] == "user"]
        for entry in line["conversation"]:
            if entry["role"] != "tool" or entry["tool"] != "banking.read_file":
                continue
            path = entry.get("arguments", {}).get("file_path", "")
            if path and any(path in message for message in said):
                ids = {key for _, key in inside_values(entry["content"]) if key.startswith("i:")}
                counts[(line["label"], path, len(ids))] += 1
    return counts


def main() -> None:
    logging.getLogger("clearance").setLevel(logging.ERROR)
    data, lines, raw = bench.load(SUITE)
    print("pack:                      ", figures(bench.PACKS / SUITE, data, lines, raw))
    with tempfile.TemporaryDirectory() as tmp:
        print("pack + pointed read_file:  ", figures(pointed_pack(Path(tmp)), data, lines, raw))
    print("payment calls reading a file the user named (label, file, IBANs in it): calls")
    for (label, path, n), calls in sorted(ibans_in_named_files(lines).items()):
        print(f"  {label:7} {path:24} {n}: {calls}")


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: Apache-2.0
"""One-screen CI summary from build/test-results.xml, build/cycles/*.jsonl, build/waves/*.diff.

    python scripts/ci_summary.py [build]
"""

from collections import defaultdict
import json
from pathlib import Path
import sys
import xml.etree.ElementTree as ET


def main(build="build") -> int:
    build = Path(build)
    junit = build / "test-results.xml"
    if not junit.exists():
        print(f"ci summary: no {junit}")
        return 0
    counts = defaultdict(lambda: defaultdict(int))
    failures = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        block = case.get("classname", "").split(".")[-1].removeprefix("test_")
        name = case.get("name", "")
        sim = "icarus" if "icarus" in name else "verilator" if "verilator" in name else "python"
        if case.find("failure") is not None or case.find("error") is not None:
            state = "failed"
            failures.append(f"{block}::{name}")
        elif case.find("skipped") is not None:
            state = "skipped"
        else:
            state = "passed"
        counts[(block, sim)][state] += 1
    print("=" * 72)
    print(f"{'block':14s} {'simulator':10s} {'passed':>7s} {'failed':>7s} {'skipped':>8s}")
    for (block, sim), c in sorted(counts.items()):
        print(f"{block:14s} {sim:10s} {c['passed']:7d} {c['failed']:7d} {c['skipped']:8d}")
    cycles = []
    for path in sorted((build / "cycles").glob("*.jsonl")):
        cycles += [json.loads(line) for line in path.read_text().splitlines() if line]
    if cycles:
        agree = sum(1 for c in cycles if c["measured"] == c["model"])
        print(f"cycles vs model: {agree}/{len(cycles)} RTL runs equal the cycle model")
        for c in cycles:
            if c["measured"] != c["model"]:
                print(f"  {c['test']}: RTL {c['measured']} != model {c['model']}")
    diffs = sorted((build / "waves").glob("*.diff"))
    print(f"trace diffs: {len(diffs) or 'none'}")
    for path in diffs:
        print(f"  {path}: {path.read_text().splitlines()[0]}")
    if failures:
        print("failed tests:")
        for name in failures[:15]:
            print("  " + name)
    print("=" * 72)
    total = {state: sum(c[state] for c in counts.values())
             for state in ("passed", "failed", "skipped")}
    print(f"tests: {total['passed']} passed, {total['failed']} failed, "
          f"{total['skipped']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

"""One line per device from a pytest JUnit XML file: passed, failed, skipped, and why the skips.

Used by tools/test.sh after the suite: ``python tools/test_summary.py results.xml``.
"""
from __future__ import annotations

import collections
import re
import sys
import xml.etree.ElementTree as ET

PARAM = re.compile(r"\[(?:[^\]]*-)?(cpu|opencl:\d+(?:-gpupaths)?(?:-nofp64)?(?:-checked)?|cuda:\d+(?:-checked)?)"
                   r"(?:-[^\]]*)?\]")
CLASS = re.compile(r"_(opencl_\d+|cuda_\d+|cpu)$")


def device_of(case) -> str:
    m = PARAM.search(case.get("name", ""))
    if m:
        return m.group(1)
    m = CLASS.search(case.get("classname", ""))
    if m:
        return m.group(1).replace("_", ":", 1) if m.group(1) != "cpu" else "cpu"
    return "no device"


def summary(path: str) -> list[str]:
    counts: dict = collections.defaultdict(collections.Counter)
    reasons: dict = collections.defaultdict(collections.Counter)
    for case in ET.parse(path).getroot().iter("testcase"):
        dev = device_of(case)
        skipped = case.find("skipped")
        if skipped is not None:
            counts[dev]["skipped"] += 1
            why = (skipped.get("message") or "").removeprefix("Skipped: ").split(" (HRESULT")[0]
            reasons[dev][why[:110]] += 1
        elif case.find("failure") is not None or case.find("error") is not None:
            counts[dev]["failed"] += 1
        else:
            counts[dev]["passed"] += 1
    lines = []
    for dev in sorted(counts, key=lambda d: (d == "no device", d)):
        c = counts[dev]
        line = f"{dev:18s} {c['passed']:5d} passed, {c['failed']} failed, {c['skipped']:4d} skipped"
        if reasons[dev]:
            line += "; why: " + "; ".join(f"{n} x {why}" for why, n in reasons[dev].most_common(2))
        lines.append(line)
    return lines


if __name__ == "__main__":
    print("per device:")
    for line in summary(sys.argv[1]):
        print("  " + line)

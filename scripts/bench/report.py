#!/usr/bin/env python3
"""Render scripts/bench.sh results as markdown tables with ratios and PASS/FAIL targets.

    report.py RESULTS_TSV META_TSV > report.md

RESULTS_TSV rows (tab separated, no header):
    section  operation  tool  seconds  rss_kib  status  note
status is `ok`, `fail` (the tool ran and failed) or `na` (tool or command not available).
seconds / rss_kib may be empty.

The ratio column is  ours ÷ tool  for the same operation (wall-clock seconds): below 1.00 we
are faster. Targets are written in the same terms, e.g. ">= 2x faster" is "ours/tool <= 0.50".
"""

from __future__ import annotations

import sys
from collections import OrderedDict

OURS = "zeroclaw-bundle"

SECTION_TITLES = OrderedDict(
    [
        ("store", "1. Store: capture and checkout"),
        ("diff", "1b. Diff after 1% of files changed"),
        ("export", "2. Export of a ZeroClaw agent"),
        ("mount", "3. Read-only mount"),
        ("pack", "4. Packs (sizes in MiB in the seconds column)"),
        ("remote", "5. Remote store on a local S3 server (s3s-fs)"),
        ("info", "Informational"),
    ]
)

# Operation order within a section (operations not listed follow in recorded order).
OP_ORDER = {
    "store": ["initial capture", "no-op capture (warm)", "no-op capture (cold)", "capture after 1% changed",
              "checkout into new dir", "store size after all captures (MiB)"],
    "diff": ["diff after 1% changed (cold)", "diff after 1% changed (warm)", "directory vs its snapshot (warm)"],
    "export": ["export (first)", "re-export (unchanged, --force)", "re-export (unchanged, new out dir)"],
    "pack": ["pack (cold)", "pack (warm)", "unpack (cold)", "size (MiB)", "pack --since (1% changed, cold)",
             "incremental pack size (MiB)"],
    "remote": ["push (cold)", "pull (cold)", "pull + checkout (cold)"],
    "mount": ["mount ready", "find | wc -l (cold)", "find | wc -l (warm)", "tar -cf - | wc -c (cold)",
              "tar -cf - | wc -c (warm)", "daemon peak memory (VmHWM)"],
}

# (section, operation, row tool, kind, value, label)
#   ratio_le : ours_seconds / row_tool_seconds <= value
#   self_le  : ours_seconds(operation) / ours_seconds(value[0]) <= value[1]
#   secs_lt  : row tool seconds < value
#   rss_lt   : row tool max RSS (MiB) < value
NOOP_OPS = ["no-op capture (warm)", "no-op capture (cold)"]
FIND_OPS = ["find | wc -l (cold)", "find | wc -l (warm)"]
READ_OPS = ["tar -cf - | wc -c (cold)", "tar -cf - | wc -c (warm)"]
TARGETS = [
    ("store", "initial capture", "rsync -a", "ratio_le", 1.25, "ours <= 1.25x"),
    ("store", "initial capture", "ostree commit", "ratio_le", 0.5, ">= 2x faster"),
    ("store", "initial capture", "restic backup", "ratio_le", 0.5, ">= 2x faster"),
    ("store", "initial capture", "borg create", "ratio_le", 0.5, ">= 2x faster"),
    *[("store", op, "tar level-1 incremental", "ratio_le", 2.0, "ours <= 2x") for op in NOOP_OPS],
    *[("store", op, "restic backup", "ratio_le", 0.2, ">= 5x faster") for op in NOOP_OPS],
    *[("store", op, "borg create", "ratio_le", 0.2, ">= 5x faster") for op in NOOP_OPS],
    ("store", "checkout into new dir", "tar -x", "ratio_le", 1.2, "ours <= 1.2x"),
    # issue 23: the phases that were behind a peer
    ("store", "capture after 1% changed", "tar level-1 incremental", "ratio_le", 1.0, "ours <= 1.0x"),
    ("store", "checkout into new dir", "unsquashfs", "ratio_le", 1.0, "ours <= 1.0x"),
    ("store", "store size after all captures (MiB)", "restic", "ratio_le", 1.1, "size <= 1.1x"),
    ("mount", "mount ready", "squashfuse_ll", "ratio_le", 1.0, "ours <= 1.0x"),
    *[
        ("diff", op, tool, "ratio_le", 1.0, "at or below the fastest")
        for op in ["diff after 1% changed (cold)", "diff after 1% changed (warm)"]
        for tool in ["git diff --stat", "ostree diff", "restic diff", "borg diff"]
    ],
    ("diff", "directory vs its snapshot (warm)", "git status", "ratio_le", 1.5, "ours <= 1.5x"),
    *[
        ("store", op, OURS, "rss_lt", 100, "max RSS < 100 MiB")
        for op in ["initial capture", *NOOP_OPS, "capture after 1% changed", "checkout into new dir"]
    ],
    ("export", "export (first)", "rsync -a", "ratio_le", 1.3, "ours <= 1.3x"),
    ("export", "re-export (unchanged, --force)", OURS, "self_le", ("export (first)", 1 / 3), ">= 3x faster than first export"),
    ("mount", "mount ready", OURS, "secs_lt", 0.1, "< 100 ms"),
    *[("mount", op, "squashfuse_ll", "ratio_le", 1.0, "ours <= 1.0x") for op in FIND_OPS + READ_OPS],
    ("mount", "find | wc -l (warm)", "plain dir", "ratio_le", 3.0, "ours <= 3x"),
    ("mount", "tar -cf - | wc -c (warm)", "plain dir", "ratio_le", 3.0, "ours <= 3x"),
    ("mount", "daemon peak memory (VmHWM)", OURS, "rss_lt", 64, "< 64 MiB"),
    ("pack", "pack (cold)", "tar -c", "ratio_le", 1.5, "ours <= 1.5x"),
    ("pack", "unpack (cold)", "tar -x", "ratio_le", 1.5, "ours <= 1.5x"),
    ("pack", "size (MiB)", "tar | zstd -3", "ratio_le", 1.1, "size <= 1.1x"),
    ("pack", "size (MiB)", "mksquashfs -comp zstd", "ratio_le", 0.9999, "size below"),
    ("pack", "incremental pack size (MiB)", "full pack", "ratio_le", 0.05, ">= 20x smaller"),
    ("remote", "push (cold)", "restic backup", "ratio_le", 2.0, "ours <= 2x"),
    ("remote", "pull (cold)", "restic restore", "ratio_le", 2.0, "ours <= 2x"),
]


def fnum(x: float | None, digits: int = 3) -> str:
    if x is None:
        return ""
    if x >= 100:
        return f"{x:.1f}"
    return f"{x:.{digits}f}"


def load(path: str):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            parts = line.split("\t")
            parts += [""] * (7 - len(parts))
            section, op, tool, secs, rss, status, note = parts[:7]
            rows.append(
                {
                    "section": section,
                    "op": op,
                    "tool": tool,
                    "secs": float(secs) if secs else None,
                    "rss_mib": int(rss) / 1024 if rss else None,
                    "status": status or "ok",
                    "note": note,
                }
            )
    return rows


def load_meta(path: str):
    meta = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if "\t" in line:
                    k, v = line.split("\t", 1)
                    meta.append((k, v))
    except FileNotFoundError:
        pass
    return meta


def esc(s: str) -> str:
    return s.replace("|", "\\|")


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    rows = load(sys.argv[1])
    meta = load_meta(sys.argv[2]) if len(sys.argv) > 2 else []

    # Index: (section, op, tool) -> row (the last one recorded wins).
    idx = {}
    for r in rows:
        idx[(r["section"], r["op"], r["tool"])] = r

    def ok_secs(section, op, tool):
        r = idx.get((section, op, tool))
        if r and r["status"] == "ok" and r["secs"] is not None:
            return r["secs"]
        return None

    targets_by_row: dict = {}
    for t in TARGETS:
        targets_by_row.setdefault((t[0], t[1], t[2]), []).append(t)

    def evaluate(t, row):
        section, op, tool, kind, value, label = t
        if kind == "ratio_le":
            ours = ok_secs(section, op, OURS)
            peer = ok_secs(section, op, tool)
            if ours is None or peer is None or peer <= 0:
                return label, "n/a"
            return label, "PASS" if ours / peer <= value else "FAIL"
        if kind == "self_le":
            base_op, limit = value
            ours = ok_secs(section, op, OURS)
            base = ok_secs(section, base_op, OURS)
            if ours is None or base is None or base <= 0:
                return label, "n/a"
            ratio = ours / base
            return f"{label} (now {base / ours:.1f}x)" if ours > 0 else label, "PASS" if ratio <= limit else "FAIL"
        if kind == "secs_lt":
            if row is None or row["status"] != "ok" or row["secs"] is None:
                return label, "n/a"
            return label, "PASS" if row["secs"] < value else "FAIL"
        if kind == "rss_lt":
            if row is None or row["status"] != "ok" or row["rss_mib"] is None:
                return label, "n/a"
            return label, "PASS" if row["rss_mib"] < value else "FAIL"
        return label, "n/a"

    out = []
    out.append("# zeroclaw-bundle benchmark")
    out.append("")
    for k, v in meta:
        out.append(f"- **{k}**: {v}")
    out.append("")
    out.append(
        "Ratio column: **ours ÷ tool** (wall-clock seconds of zeroclaw-bundle divided by the "
        "tool's, same operation, same tree, same run). Below 1.00 we are faster. "
        "\"≥ 2x faster\" means ours ÷ tool ≤ 0.50."
    )
    out.append("")

    summary = {"PASS": 0, "FAIL": 0, "n/a": 0}
    sections = OrderedDict()
    for r in rows:
        sections.setdefault(r["section"], OrderedDict()).setdefault(r["op"], []).append(r)

    ordered = [s for s in SECTION_TITLES if s in sections] + [s for s in sections if s not in SECTION_TITLES]
    for section in ordered:
        out.append(f"## {SECTION_TITLES.get(section, section)}")
        out.append("")
        out.append("| operation | tool | seconds | max RSS (MiB) | ours ÷ tool | target | result | notes |")
        out.append("|---|---|---:|---:|---:|---|---|---|")
        order = OP_ORDER.get(section, [])
        ops = sorted(sections[section].items(),
                     key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))
        for op, op_rows in ops:
            # ours first, then the peers in recorded order
            op_rows = sorted(op_rows, key=lambda r: 0 if r["tool"] == OURS else 1)
            ours = ok_secs(section, op, OURS)
            for r in op_rows:
                if r["status"] == "ok":
                    secs = fnum(r["secs"])
                elif r["status"] == "na":
                    secs = "not available"
                else:
                    secs = "failed"
                ratio = ""
                if r["status"] == "ok" and r["secs"] and ours is not None:
                    ratio = f"{ours / r['secs']:.2f}"
                rss = fnum(r["rss_mib"], 1) if r["rss_mib"] is not None else ""
                tlabels, results = [], []
                for t in targets_by_row.get((section, op, r["tool"]), []):
                    label, res = evaluate(t, r)
                    tlabels.append(label)
                    results.append(res)
                    summary[res] += 1
                out.append(
                    f"| {esc(op)} | {esc(r['tool'])} | {secs} | {rss} | {ratio} | "
                    f"{esc('; '.join(tlabels))} | {' / '.join(results)} | {esc(r['note'])} |"
                )
        out.append("")

    # Targets whose row never got recorded at all (e.g. a section skipped entirely).
    missing = [t for t in TARGETS if (t[0], t[1], t[2]) not in idx]
    if missing:
        out.append("## Targets with no measurement")
        out.append("")
        out.append("| section | operation | vs | target | result |")
        out.append("|---|---|---|---|---|")
        for t in missing:
            out.append(f"| {t[0]} | {esc(t[1])} | {esc(t[2])} | {esc(t[5])} | n/a |")
            summary["n/a"] += 1
        out.append("")

    out.append(f"**Targets: {summary['PASS']} PASS, {summary['FAIL']} FAIL, {summary['n/a']} n/a.**")
    out.append("")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

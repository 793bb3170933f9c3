#!/usr/bin/env python3
"""Deterministic corpus generator for scripts/bench.sh.

Builds a tree shaped like a ZeroClaw agent workspace that has been used for a while:
nested directories, many markdown notes (1-20 KiB), small source files, JSONL logs,
medium binary attachments, a few large random binaries (tens of MiB) and some duplicate
files (the same bytes at several paths, as separate files, never hard links).

The same --seed and --scale always give the same paths, bytes, modes and mtimes.
At --scale 1.0: about 20,000 files and about 600 MiB.

    gen_corpus.py generate --out DIR [--seed N] [--scale F]
    gen_corpus.py mutate   --dir DIR [--seed N] [--fraction 0.01]
    gen_corpus.py stats    --dir DIR

No names the exporter treats specially are used (no `memory/`, no `MEMORY_SNAPSHOT.md`,
no dotfiles), so every tool sees the same tree.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

KiB = 1024
MiB = 1024 * 1024

# Fixed past timestamp (2024-01-02T00:00:00Z) so mtimes are deterministic and never "racy".
BASE_MTIME = 1704153600

WORDS = (
    "agent tool memory context prompt model provider skill workspace bundle snapshot "
    "store tree blob hash index cache manifest config secret policy risk approval channel "
    "delegate runtime profile session task plan step result error retry timeout latency "
    "token budget summary note idea draft review decision follow up meeting customer "
    "report metric graph query search fetch parse render update delete create list "
    "the a an of to in for on with by from and or but not is are was be this that it "
    "we they you should could would will can may must need use using used make made "
    "data file path directory system process thread lock queue event stream buffer "
    "rust python typescript shell json toml yaml markdown http api request response"
).split()

CODE_TOKENS = (
    "fn let mut pub struct impl enum match return if else for while loop use mod "
    "def class import from self None True False async await yield lambda try except "
    "const function export interface type extends new this null undefined "
    "( ) { } [ ] ; : , . -> => = == != < > + - * / & | ! ? :: "
).split()


def human(n: int) -> str:
    if n >= MiB:
        return f"{n / MiB:.1f} MiB"
    return f"{n / KiB:.1f} KiB"


def make_text_pool(rng: random.Random, words: list[str], size: int, code: bool) -> str:
    """A long pseudo-text buffer; files take slices of it plus unique headers."""
    out: list[str] = []
    total = 0
    while total < size:
        n = rng.randint(6, 18)
        line = " ".join(rng.choices(words, k=n))
        if code:
            line = "    " * rng.randint(0, 3) + line
        else:
            r = rng.random()
            if r < 0.05:
                line = "## " + line
            elif r < 0.15:
                line = "- " + line
            elif r < 0.18:
                line = "```\n" + line + "\n```"
            else:
                line = line.capitalize() + "."
        out.append(line)
        total += len(line) + 1
    return "\n".join(out)


def text_bytes(rng: random.Random, pool: str, header: str, size: int) -> bytes:
    body_len = max(0, size - len(header))
    start = rng.randrange(0, max(1, len(pool) - body_len - 1))
    body = pool[start : start + body_len]
    data = (header + body).encode()
    return data[:size] if len(data) > size else data


def random_bytes(rng: random.Random, size: int):
    """Yield random bytes in bounded chunks (deterministic for the rng state)."""
    left = size
    while left > 0:
        n = min(left, 4 * MiB)
        yield rng.randbytes(n)
        left -= n


class Writer:
    def __init__(self, root: str):
        self.root = root
        self.files = 0
        self.bytes = 0
        self.index = 0
        self.made_dirs: set[str] = set()

    def _prepare(self, rel: str) -> str:
        path = os.path.join(self.root, rel)
        d = os.path.dirname(path)
        if d not in self.made_dirs:
            os.makedirs(d, exist_ok=True)
            while d != self.root and d not in self.made_dirs:
                self.made_dirs.add(d)
                d = os.path.dirname(d)
        return path

    def _finish(self, path: str, size: int, mode: int) -> None:
        os.chmod(path, mode)
        t = BASE_MTIME + self.index * 7
        os.utime(path, (t, t))
        self.index += 1
        self.files += 1
        self.bytes += size

    def write(self, rel: str, data: bytes, mode: int = 0o644) -> None:
        path = self._prepare(rel)
        with open(path, "wb") as f:
            f.write(data)
        self._finish(path, len(data), mode)

    def write_chunks(self, rel: str, chunks, mode: int = 0o644) -> None:
        path = self._prepare(rel)
        size = 0
        with open(path, "wb") as f:
            for c in chunks:
                f.write(c)
                size += len(c)
        self._finish(path, size, mode)


def scaled(n: float, scale: float, minimum: int = 1) -> int:
    return max(minimum, int(round(n * scale)))


def generate(out: str, seed: int, scale: float) -> dict:
    if os.path.exists(out) and os.listdir(out):
        sys.exit(f"error: {out} exists and is not empty")
    os.makedirs(out, exist_ok=True)
    rng = random.Random(seed)
    w = Writer(out)

    prose = make_text_pool(rng, WORDS, 8 * MiB if scale >= 0.2 else 2 * MiB, code=False)
    code = make_text_pool(rng, CODE_TOKENS + WORDS[:40], 2 * MiB if scale >= 0.2 else 512 * KiB, code=True)

    n_md = scaled(12000, scale)
    n_src = scaled(5500, scale)
    n_log = scaled(1200, scale)
    n_att = scaled(150, scale)
    n_big = 8  # count stays; sizes scale
    n_dup = scaled(1000, scale)

    projects = [f"project-{i:02d}" for i in range(scaled(24, scale ** 0.5, 2))]
    topics = [f"topic-{i:02d}" for i in range(scaled(30, scale ** 0.5, 2))]
    small_files: list[str] = []

    # Markdown notes: notes/<year>/<month>/, research/<topic>/<sub>/, projects/<p>/docs/.
    for i in range(n_md):
        r = rng.random()
        if r < 0.45:
            rel = f"notes/{2021 + i % 4}/{1 + (i // 4) % 12:02d}/note-{i:05d}.md"
        elif r < 0.80:
            t = rng.choice(topics)
            rel = f"research/{t}/sub-{rng.randrange(6)}/{t}-{i:05d}.md"
        else:
            p = rng.choice(projects)
            rel = f"projects/{p}/docs/{rng.choice(['design', 'guide', 'adr', 'api'])}/doc-{i:05d}.md"
        size = rng.randint(1 * KiB, 20 * KiB)
        header = f"# Note {i} ({seed})\n\ncreated: 2024-{1 + i % 12:02d}-{1 + i % 28:02d}\n\n"
        w.write(rel, text_bytes(rng, prose, header, size))
        small_files.append(rel)

    # Small source files under projects/<p>/src/<module>/.
    exts = ["py", "rs", "ts", "json", "toml", "sh"]
    for i in range(n_src):
        p = rng.choice(projects)
        ext = rng.choice(exts)
        rel = f"projects/{p}/src/mod{rng.randrange(12)}/sub{rng.randrange(4)}/file_{i:05d}.{ext}"
        size = rng.randint(300, 8 * KiB)
        header = f"// file {i} seed {seed}\n" if ext not in ("py", "sh", "toml") else f"# file {i} seed {seed}\n"
        if ext == "sh":
            header = "#!/bin/sh\n" + header
        w.write(rel, text_bytes(rng, code, header, size), 0o755 if ext == "sh" else 0o644)
        small_files.append(rel)

    # JSONL logs: logs/<yyyy-mm>/<day>/session-N.jsonl
    for i in range(n_log):
        rel = f"logs/2024-{1 + i % 12:02d}/{1 + (i // 12) % 28:02d}/session-{i:05d}.jsonl"
        size = rng.randint(4 * KiB, 96 * KiB)
        lines = []
        total = 0
        j = 0
        while total < size:
            start = rng.randrange(0, len(prose) - 200)
            rec = json.dumps({"seq": j, "session": i, "role": rng.choice(["user", "assistant", "tool"]),
                              "text": prose[start:start + rng.randint(40, 180)]})
            lines.append(rec)
            total += len(rec) + 1
            j += 1
        w.write(rel, ("\n".join(lines) + "\n").encode()[:size])

    # Medium binary attachments (random bytes: incompressible like png/pdf).
    for i in range(n_att):
        rel = f"attachments/{i % 10:02d}/{rng.choice(['img', 'scan', 'doc'])}-{i:04d}.{rng.choice(['png', 'pdf', 'jpg'])}"
        size = max(1024, int(rng.randint(64 * KiB, 1536 * KiB) * (1.0 if scale >= 0.1 else max(scale * 10, 0.05))))
        w.write_chunks(rel, random_bytes(rng, size))

    # A few large random binaries (tens of MiB at full scale).
    big: list[str] = []
    for i in range(n_big):
        rel = f"{rng.choice(['models', 'datasets', 'cache/blobs'])}/blob-{i}.bin"
        size = max(4 * KiB, int(rng.randint(16 * MiB, 48 * MiB) * scale))
        w.write_chunks(rel, random_bytes(rng, size))
        big.append(rel)

    # Duplicates: same bytes at several paths (separate files, not links).
    def copy(src_rel: str, dst_rel: str) -> None:
        with open(os.path.join(out, src_rel), "rb") as f:
            data = f.read()
        w.write(dst_rel, data)

    copy(big[0], "archive/old-models/blob-0-copy.bin")
    for i in range(n_dup):
        src = rng.choice(small_files)
        base = os.path.basename(src)
        dst = f"archive/{rng.choice(['2022', '2023', 'inbox', 'shared'])}/{i % 17:02d}/{base}"
        if os.path.exists(os.path.join(out, dst)):
            dst = f"archive/dups/{i:05d}-{base}"
        copy(src, dst)

    # Directory mtimes too, so a re-generated tree is byte- and metadata-identical.
    for d in sorted(w.made_dirs, key=len, reverse=True):
        os.utime(d, (BASE_MTIME, BASE_MTIME))
    os.utime(out, (BASE_MTIME, BASE_MTIME))

    return {"files": w.files, "bytes": w.bytes, "dirs": len(w.made_dirs)}


def list_files(root: str) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in sorted(filenames):
            out.append(os.path.relpath(os.path.join(dirpath, f), root))
    out.sort()
    return out


def mutate(root: str, seed: int, fraction: float) -> dict:
    """Change `fraction` of the files in place (deterministic for seed and tree).

    Only files under 1 MiB are picked, so the amount of changed bytes stays small like a
    real incremental session: text files get a line appended, binaries get 4 KiB rewritten.
    """
    rng = random.Random(seed * 7919 + 1)
    files = list_files(root)
    candidates = [f for f in files if os.path.getsize(os.path.join(root, f)) < MiB]
    n = max(1, int(round(len(files) * fraction)))
    picked = rng.sample(candidates, min(n, len(candidates)))
    changed_bytes = 0
    for rel in picked:
        path = os.path.join(root, rel)
        if rel.endswith((".png", ".pdf", ".jpg", ".bin")):
            size = os.path.getsize(path)
            off = rng.randrange(0, max(1, size - 4096))
            with open(path, "r+b") as f:
                f.seek(off)
                data = rng.randbytes(min(4096, size))
                f.write(data)
            changed_bytes += len(data)
        else:
            line = f"\nedited in mutation seed={seed}: {rng.random():.12f}\n".encode()
            with open(path, "ab") as f:
                f.write(line)
            changed_bytes += len(line)
    return {"files_total": len(files), "changed": len(picked), "changed_bytes": changed_bytes}


def stats(root: str) -> dict:
    files = list_files(root)
    total = sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return {"files": len(files), "bytes": total}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--out", required=True)
    g.add_argument("--seed", type=int, default=42)
    g.add_argument("--scale", type=float, default=1.0)
    m = sub.add_parser("mutate")
    m.add_argument("--dir", required=True)
    m.add_argument("--seed", type=int, default=42)
    m.add_argument("--fraction", type=float, default=0.01)
    s = sub.add_parser("stats")
    s.add_argument("--dir", required=True)
    a = ap.parse_args()
    if a.cmd == "generate":
        if not (0 < a.scale <= 4):
            sys.exit("error: --scale must be in (0, 4]")
        r = generate(a.out, a.seed, a.scale)
        print(f"corpus: {r['files']} files, {r['dirs']} dirs, {human(r['bytes'])} (seed {a.seed}, scale {a.scale})")
    elif a.cmd == "mutate":
        r = mutate(a.dir, a.seed, a.fraction)
        print(f"mutated {r['changed']} of {r['files_total']} files ({human(r['changed_bytes'])} changed)")
    else:
        r = stats(a.dir)
        print(f"{r['files']} files, {human(r['bytes'])}")


if __name__ == "__main__":
    main()

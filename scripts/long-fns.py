#!/usr/bin/env python3
"""List Rust functions longer than a limit (default 120 lines), tests excluded.

Usage: scripts/long-fns.py [--limit N] PATH...

A function's length counts from the line holding `fn` to the line holding
its closing brace. Nested functions and methods are listed on their own.
Code under `#[cfg(test)]` items, `#[test]` functions, and files named
`tests.rs` or under a `tests/` directory are skipped.
"""
import os
import re
import sys


def tokens(src):
    """Yield (kind, text, line) for the tokens that matter: idents, braces,
    parens, brackets, `;`, `#`. Comments, strings and chars are skipped."""
    i, n, line = 0, len(src), 1
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    line += src[i] == "\n"
                    i += 1
        elif re.match(r'b?r#*"', src[i:i + 40]):
            m = re.match(r'b?r(#*)"', src[i:])
            end = '"' + m.group(1)
            j = src.find(end, i + m.end())
            line += src.count("\n", i, j)
            i = j + len(end)
        elif c == '"' or src.startswith('b"', i):
            i += 2 if c == "b" else 1
            while src[i] != '"':
                if src[i] == "\\":
                    i += 1
                line += src[i] == "\n"
                i += 1
            i += 1
        elif c == "'" or src.startswith("b'", i):
            k = i + (2 if c == "b" else 1)
            m = re.match(r"(\\(x..|u\{[0-9a-fA-F]*\}|.)|[^\\\n])'", src[k:], re.S)
            if m:
                i = k + m.end()
            else:  # a lifetime
                i += 1
        elif c.isalpha() or c == "_":
            m = re.match(r"\w+", src[i:])
            yield ("ident", m.group(0), line)
            i += m.end()
        elif c in "{}()[];#":
            yield (c, c, line)
            i += 1
        else:
            i += 1


def functions(path):
    """Yield (name, first_line, last_line) for every non-test fn with a body."""
    toks = list(tokens(open(path, encoding="utf-8").read()))
    # stack of (kind, start_line, name, is_test) per open brace
    stack = []
    pending_test = False  # an attribute #[test] or #[cfg(test)] seen
    attr_depth = None
    fn_head = None  # (name, line, paren_depth) while reading a signature
    paren = 0
    i = 0
    while i < len(toks):
        kind, text, line = toks[i]
        if kind == "#" and i + 1 < len(toks) and toks[i + 1][0] == "[":
            # read the attribute
            j, depth, words = i + 1, 0, []
            while j < len(toks):
                k = toks[j][0]
                depth += k in "[(" 
                depth -= k in "])"
                if toks[j][0] == "ident":
                    words.append(toks[j][1])
                j += 1
                if depth == 0:
                    break
            if words in (["test"], ["cfg", "test"]) or words[:2] == ["tokio", "test"]:
                pending_test = True
            i = j
            continue
        if kind == "ident" and text == "fn" and i + 1 < len(toks) and toks[i + 1][0] == "ident":
            fn_head = (toks[i + 1][1], line, pending_test)
            pending_test = False
            paren = 0
        elif kind in "([":
            paren += 1
        elif kind in ")]":
            paren -= 1
        elif kind == ";" and paren == 0:
            fn_head = None
            pending_test = False
        elif kind == "{":
            in_test = any(s[3] for s in stack)
            if fn_head and paren == 0:
                stack.append(("fn", fn_head[1], fn_head[0], fn_head[2] or in_test))
                fn_head = None
            else:
                stack.append(("block", line, None, pending_test or in_test))
            pending_test = False
        elif kind == "}":
            k, start, name, is_test = stack.pop()
            if k == "fn" and not is_test:
                yield name, start, line
        i += 1


def main():
    args = sys.argv[1:]
    limit = 120
    if args[:1] == ["--limit"]:
        limit, args = int(args[1]), args[2:]
    found = []
    for root in args:
        paths = [root] if root.endswith(".rs") else [
            os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".rs")]
        for p in sorted(paths):
            parts = p.split(os.sep)
            if "tests" in parts[:-1] or parts[-1] == "tests.rs":
                continue
            for name, a, b in functions(p):
                if b - a + 1 > limit:
                    found.append((b - a + 1, p, a, name))
    for n, p, a, name in sorted(found, reverse=True):
        print(f"{n:5} {p}:{a} {name}")


if __name__ == "__main__":
    main()

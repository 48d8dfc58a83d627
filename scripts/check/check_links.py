#!/usr/bin/env python3
"""Checks every relative link and #anchor in README.md and docs/**/*.md (the book).

    scripts/check/check_links.py [ROOT]     # ROOT: the repository (default: two folders above this script)
    scripts/check/check_links.py --self-test

For each link that is not a URL (http:, https:, mailto:, ...): the target file must exist,
and an #anchor must be the id of a heading in the target (or of an HTML id/name there), as
the page is rendered: mdbook's ids for the book's pages (lowercase; alphanumerics, '-' and '_'
kept; whitespace to '-'; everything else dropped, after smart punctuation has turned '--'
into a dash; repeats get -1, -2, ...), GitHub's for README.md (the same rule without smart
punctuation). A link from a book page must also stay inside docs/ (the book's src), and a
.md page it links to must be listed in docs/SUMMARY.md, or the built book has no such page.
Links inside code blocks and code spans are not links. Prints every broken link as
FILE:LINE: message and exits 1 if there is one; --self-test checks the checker on a
temporary tree with known broken links. Python 3.11, standard library only.
"""

from __future__ import annotations

import html
import re
import sys
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
CUSTOM_ID = re.compile(r"\s*\{#([^}\s]+)\}\s*$")
HTML_ID = re.compile(r"""<[a-zA-Z][^>]*?\s(?:id|name)\s*=\s*["']([^"']+)["']""")
# [text](target "title") and ![alt](target); text may hold one level of brackets and span lines.
INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^()\s]*(?:\([^()\s]*\)[^()\s]*)*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"
)
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.MULTILINE)
HTML_LINK = re.compile(r"""<(?:a|img)\s[^>]*?(?:href|src)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def blank(text: str) -> str:
    """The text with fenced code blocks and code spans replaced by spaces (newlines kept),
    so that offsets and line numbers stay those of the original."""
    out = []
    fence = None
    for line in text.splitlines(keepends=True):
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(2)[0] * len(match.group(2))
            out.append(re.sub(r"[^\n]", " ", line))
        elif fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) <= {fence[0]}:
                fence = None
            out.append(re.sub(r"[^\n]", " ", line))
        elif line.startswith("    ") and (not out or out[-1].strip() == ""):
            # An indented code block after a blank line (not a list's continuation).
            out.append(re.sub(r"[^\n]", " ", line))
        else:
            out.append(line)
    joined = "".join(out)
    return blank_code_spans(joined)


def blank_code_spans(text: str) -> str:
    def spaces(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    # A run of n backticks up to the next run of exactly n backticks.
    return re.sub(r"(?<!`)(`+)(?!`)(?:.|\n)*?(?<!`)\1(?!`)", spaces, text)


def heading_text(raw: str, smart_punctuation: bool) -> str:
    """What a heading's text content is after rendering: code spans' contents, links' text,
    no emphasis markers or HTML tags, entities decoded."""
    parts = re.split(r"(`+[^`]*`+)", raw)
    pieces = []
    for index, part in enumerate(parts):
        if index % 2 == 1:
            inner = part.strip("`")
            if inner.startswith(" ") and inner.endswith(" ") and inner.strip():
                inner = inner[1:-1]
            pieces.append(inner)
            continue
        part = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", part)
        part = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", part)
        part = re.sub(r"<[^>]+>", "", part)
        part = part.replace("\\", "")
        part = re.sub(r"\*+", "", part)
        part = re.sub(r"(?<![\w])_+|_+(?![\w])", "", part)
        if smart_punctuation:
            part = re.sub(r"-{2,}", "\u2013", part)
        pieces.append(html.unescape(part))
    return "".join(pieces)


def slug(text: str) -> str:
    out = []
    for ch in text.strip().lower():
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def anchors(path: Path, book: bool) -> set[str]:
    """The ids a rendered page has: one per heading (mdbook's rule for the book, GitHub's for
    the README), plus HTML id and name attributes."""
    text = path.read_text(encoding="utf-8")
    plain = blank(text)
    lines = plain.splitlines()
    raw_lines = text.splitlines()
    ids: set[str] = set()
    used: dict[str, int] = {}

    def add(heading: str) -> None:
        custom = CUSTOM_ID.search(heading)
        if custom:
            ids.add(custom.group(1))
            return
        base = slug(heading_text(heading, smart_punctuation=book))
        if base not in used:
            used[base] = 0
            ids.add(base)
            return
        while True:
            used[base] += 1
            candidate = f"{base}-{used[base]}"
            if candidate not in used:
                used[candidate] = 0
                ids.add(candidate)
                return

    for number, line in enumerate(lines):
        if not line.strip():
            continue
        raw = raw_lines[number]
        if ATX.match(line):
            add(ATX.match(raw).group(2) or "")
            continue
        following = lines[number + 1] if number + 1 < len(lines) else ""
        underline = re.match(r"^ {0,3}(=+|-+)[ \t]*$", following)
        paragraph = not re.match(r"^\s*([-*+]|\d+[.)])\s", line) and not line.lstrip().startswith(("|", ">"))
        if underline and paragraph:
            add(raw.strip())
    for match in HTML_ID.finditer(text):
        ids.add(match.group(1))
    return ids


@dataclass
class Broken:
    file: Path
    line: int
    target: str
    why: str


def summary_pages(docs: Path) -> set[Path]:
    summary = docs / "SUMMARY.md"
    if not summary.is_file():
        return set()
    text = blank(summary.read_text(encoding="utf-8"))
    pages = set()
    for match in INLINE_LINK.finditer(text):
        target = match.group(1).strip("<>").split("#", 1)[0]
        if target:
            pages.add((docs / urllib.parse.unquote(target)).resolve())
    return pages


def check(root: Path) -> tuple[list[Broken], int]:
    """Every broken link under root (README.md and docs/**/*.md), and how many links were
    checked."""
    root = root.resolve()
    docs = root / "docs"
    files = [root / "README.md"] if (root / "README.md").is_file() else []
    files += sorted(docs.rglob("*.md")) if docs.is_dir() else []
    in_book = summary_pages(docs)
    cache: dict[tuple[Path, bool], set[str]] = {}
    broken: list[Broken] = []
    checked = 0
    for file in files:
        book = docs in file.parents
        text = blank(file.read_text(encoding="utf-8"))
        targets = [(m.start(1), m.group(1)) for m in INLINE_LINK.finditer(text)]
        targets += [(m.start(1), m.group(1)) for m in REFERENCE_DEF.finditer(text)]
        targets += [(m.start(1), m.group(1)) for m in HTML_LINK.finditer(text)]
        for offset, target in sorted(targets):
            target = target.strip().strip("<>")
            if not target or SCHEME.match(target):
                continue
            checked += 1
            line = text.count("\n", 0, offset) + 1
            rel = file.relative_to(root)
            path_part, _, anchor = target.partition("#")
            path_part = urllib.parse.unquote(path_part)
            if path_part.startswith("/"):
                broken.append(Broken(rel, line, target, "absolute paths do not resolve in the book or on GitHub; use a relative one"))
                continue
            dest = (file.parent / path_part).resolve() if path_part else file
            if not dest.exists():
                broken.append(Broken(rel, line, target, f"{dest.relative_to(root) if root in dest.parents else dest} does not exist"))
                continue
            if book and dest != docs and docs not in dest.parents:
                broken.append(Broken(rel, line, target, "leaves docs/, so the built book has no such page; name the file in code instead"))
                continue
            if book and dest.suffix == ".md" and dest.is_file() and dest not in in_book and file.name != "SUMMARY.md":
                broken.append(Broken(rel, line, target, f"{dest.relative_to(root)} is not in docs/SUMMARY.md, so the built book has no such page"))
                continue
            if anchor:
                if dest.suffix != ".md" or not dest.is_file():
                    broken.append(Broken(rel, line, target, "an #anchor into a file that is not a markdown page"))
                    continue
                dest_book = docs in dest.parents
                key = (dest, dest_book)
                if key not in cache:
                    cache[key] = anchors(dest, book=dest_book)
                if urllib.parse.unquote(anchor) not in cache[key]:
                    near = sorted(a for a in cache[key] if a.split("-")[0] == anchor.split("-")[0])[:5]
                    hint = f" (ids there that start alike: {', '.join(near)})" if near else ""
                    broken.append(Broken(rel, line, target, f"no heading with id #{anchor} in {dest.relative_to(root)}{hint}"))
    return broken, checked


def report(broken: list[Broken]) -> None:
    for b in broken:
        print(f"{b.file}:{b.line}: broken link ({b.target}): {b.why}")


def self_test() -> int:
    """The checker on a tree with known good and broken links: it must find exactly the
    broken ones."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "docs" / "img").mkdir(parents=True)
        (root / "docs" / "img" / "a.png").write_bytes(b"")
        (root / "docs" / "SUMMARY.md").write_text(
            "# Summary\n\n- [One](one.md)\n- [Two](two.md)\n- [Gone](gone.md)\n"
        )
        (root / "docs" / "one.md").write_text(
            "# One\n\n## The `headlab train` command\n\n## Sweeps -- and Slurm\n\n## Twice\n\n## Twice\n\n"
            "[ok](two.md#what-it-is) [ok](#the-headlab-train-command) [ok](#twice-1)\n"
            "[ok](#sweeps--and-slurm) ![ok](img/a.png)\n"
            "[bad anchor](two.md#nowhere)\n"
            "```sh\n[not a link](missing.md)\n```\n"
            "`[not a link](missing.md)`\n"
            "[bad file](missing.md)\n"
            "[leaves the book](../README.md)\n"
            "[not in summary](three.md)\n"
            "[bad dash](#sweeps----and-slurm)\n"
        )
        (root / "docs" / "two.md").write_text("# Two\n\n## What it is\n\n[url](https://example.com/x#y)\n")
        (root / "docs" / "three.md").write_text("# Three\n")
        (root / "README.md").write_text(
            "# R\n\n## Sweeps -- and Slurm\n\n[ok](docs/one.md#twice) [ok](#sweeps----and-slurm)\n"
            "[ok](docs/three.md)\n"
            "[bad](#sweeps--and-slurm)\n[bad](docs/one.md#missing)\n"
        )
        broken, checked = check(root)
        found = sorted((str(b.file), b.line) for b in broken)
        want = sorted(
            [
                ("docs/SUMMARY.md", 5),
                ("docs/one.md", 13),
                ("docs/one.md", 18),
                ("docs/one.md", 19),
                ("docs/one.md", 20),
                ("docs/one.md", 21),
                ("README.md", 7),
                ("README.md", 8),
            ]
        )
        if found != want:
            print("check_links self-test FAILED")
            print(f"  expected broken links at {want}")
            print(f"  found {found}:")
            report(broken)
            return 1
        print(f"check_links self-test: {len(want)} planted broken links found, {checked - len(want)} good ones passed")
        return 0


def main(argv: list[str]) -> int:
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith("-")):
        print(__doc__.strip().splitlines()[0])
        print("usage: scripts/check/check_links.py [ROOT] | --self-test", file=sys.stderr)
        return 2
    root = Path(argv[1]) if len(argv) == 2 else Path(__file__).resolve().parents[2]
    broken, checked = check(root)
    report(broken)
    if broken:
        print(f"{len(broken)} broken link(s) of {checked} checked")
        return 1
    print(f"{checked} links checked, none broken")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

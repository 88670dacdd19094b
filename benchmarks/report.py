"""Render the benchmark result records into the docs pages and write benchmarks/README.md.

Reads every ``benchmarks/results/*.json`` (the records the scripts write with ``--out``) and keeps,
per script, the latest record by date. In each page of ``docs/benchmarks/*.md``, the lines between

    <!-- results: SCRIPT_STEM -->
    <!-- /results -->

are replaced by that record's tables as Markdown, each headed by a line with the run's date,
command, commit and a link to the JSON file; a script without a record gets a line saying how to
make one. Pages without markers are not touched. ``benchmarks/README.md`` (the index of the
scripts) is written too. ``--check`` writes nothing and exits 1, naming them, when a page or the
index would change.

    python benchmarks/report.py [--check] [--results DIR] [--pages DIR_OR_PAGE ...] [--readme FILE]
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import math
import os
import re
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
START = re.compile(r"^<!-- results: (?P<stem>[A-Za-z0-9_.-]+) -->[ \t]*$")
END = re.compile(r"^<!-- /results -->[ \t]*$")
NOT_SCRIPTS = {"report"}  # in benchmarks/ but no benchmark


class ReportError(Exception):
    """A record that cannot be read or a page whose markers do not pair up."""


def _shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it (messages and the README)."""
    try:
        return Path(path).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def _when(record: dict) -> dt.datetime:
    return dt.datetime.fromisoformat(str(record["date"]).replace("Z", "+00:00"))


# ---------------------------------------------------------------- records


def load_results(folder: Path) -> dict[str, tuple[Path, dict]]:
    """Per script stem, the latest record of ``folder/*.json`` (by date, then file name) and its path."""
    latest: dict[str, tuple[Path, dict]] = {}
    for path in sorted(Path(folder).glob("*.json")):
        try:
            record = json.loads(path.read_text())
            stem, when = record["script"], _when(record)
            if not isinstance(record.get("tables", []), list):
                raise TypeError("'tables' is not a list")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ReportError(f"{_shown(path)}: not a benchmark record ({exc.__class__.__name__}: {exc})") from None
        if stem not in latest or (when, path.name) >= (_when(latest[stem][1]), latest[stem][0].name):
            latest[stem] = (path, record)
    return latest


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def cell(value, template: str = "{}") -> str:
    """One Markdown cell: the script's printed format for numbers (``template``), 4 significant digits
    for a float it printed without one, "-" for a missing value."""
    if value is None:
        text = "-"
    elif isinstance(value, (list, dict)):
        text = json.dumps(value, separators=(", ", ": "))
    elif isinstance(value, bool) or isinstance(value, str):
        text = str(value)
    elif isinstance(value, float) and template.startswith("{}"):
        text = (format(value, ".4g") if math.isfinite(value) else "-") + template[2:].replace("{{", "{").replace(
            "}}", "}"
        )
    else:
        try:
            text = template.format(value)
        except (ValueError, TypeError, IndexError, KeyError):
            text = str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _text(value) -> str:
    """A title or a note as Markdown text: emphasis and HTML characters shown as they are."""
    return re.sub(r"([\\`*_<>\[\]|])", r"\\\1", str(value)).replace("\n", " ")


def markdown_table(columns: list[str], rows: list[list], formats: list[str] | None = None) -> list[str]:
    formats = formats or ["{}"] * len(columns)
    right = [
        bool(col) and all(_number(v) for v in col)
        for col in ([r[i] for r in rows if i < len(r) and r[i] is not None] for i in range(len(columns)))
    ]
    lines = [
        "| " + " | ".join(cell(c) for c in columns) + " |",
        "| " + " | ".join("---:" if r else ":---" for r in right) + " |",
    ]
    for row in rows:
        cells = [cell(v, formats[i] if i < len(formats) else "{}") for i, v in enumerate(row)]
        lines.append("| " + " | ".join(cells + [""] * (len(columns) - len(cells))) + " |")
    return lines


def heading(record: dict, path: Path, page_dir: Path) -> str:
    """The line above each table: date, command, commit, machine and the link to the record."""
    link = Path(os.path.relpath(Path(path).resolve(), Path(page_dir).resolve())).as_posix()
    cores = (record.get("machine") or {}).get("cores")
    return (
        f"{_when(record):%Y-%m-%d %H:%M} UTC · `{record.get('command', '?')}` · commit "
        f"`{record.get('commit', 'unknown')}`"
        + (f" · {cores} cores" if cores else "")
        + f" · [{Path(path).name}]({link})"
    )


def render_record(stem: str, found: tuple[Path, dict] | None, page_dir: Path) -> list[str]:
    """The Markdown lines of a ``results: stem`` region."""
    out = ["<!-- generated by python benchmarks/report.py from benchmarks/results/: do not edit -->", ""]
    if found is None:
        return out + [f"No result recorded yet: run `python benchmarks/{stem}.py --out`.", ""]
    path, record = found
    head = heading(record, path, page_dir)
    tables = list(record.get("tables") or [])
    if record.get("ratios"):
        tables.append(
            {
                "title": "ratios",
                "columns": ["ratio", "value"],
                "rows": [[k, v] for k, v in sorted(record["ratios"].items())],
            }
        )
    if not tables:
        return out + [head, "", "(the record holds no table)", ""]
    for table in tables:
        out += [head, ""]
        if table.get("title"):
            out += [f"**{_text(table['title'])}**", ""]
        out += markdown_table(list(table.get("columns") or []), list(table.get("rows") or []), table.get("formats"))
        if not table.get("rows"):
            out += ["", "(no rows)"]
        notes = table.get("notes") or []
        if notes:
            out += [""] + [f"- {_text(n)}" for n in notes]
        out.append("")
    return out


# ---------------------------------------------------------------- pages


def rewrite_page(text: str, results: dict[str, tuple[Path, dict]], page_dir: Path, name: str = "page") -> str:
    """``text`` with every results region re-rendered (unchanged when it has no markers)."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        m = START.match(lines[i])
        if END.match(lines[i]):
            raise ReportError(f"{name}:{i + 1}: '<!-- /results -->' without a '<!-- results: SCRIPT -->' before it")
        out.append(lines[i])
        i += 1
        if not m:
            continue
        j = i
        while j < len(lines) and not END.match(lines[j]):
            if START.match(lines[j]):
                raise ReportError(f"{name}:{j + 1}: a results region opens inside the one of line {i}")
            j += 1
        if j == len(lines):
            raise ReportError(f"{name}:{i}: '<!-- results: {m['stem']} -->' is never closed by '<!-- /results -->'")
        out += render_record(m["stem"], results.get(m["stem"]), page_dir)
        out.append(lines[j])
        i = j + 1
    return "\n".join(out)


def pages_in(targets: list[Path]) -> list[Path]:
    pages = []
    for t in targets:
        pages += sorted(Path(t).glob("*.md")) if Path(t).is_dir() else [Path(t)] if Path(t).exists() else []
    return pages


# ---------------------------------------------------------------- the index


def _docstring(path: Path) -> str:
    try:
        return ast.get_docstring(ast.parse(path.read_text())) or ""
    except SyntaxError:
        return ""


def summary(path: Path) -> str:
    """The first line of a script's docstring."""
    doc = _docstring(path)
    return doc.strip().splitlines()[0].strip() if doc.strip() else "(no docstring)"


def is_script(path: Path) -> bool:
    """A benchmark script: not a helper (``_*.py``), not this tool, and runnable (a ``__main__`` block)."""
    return (
        not path.name.startswith("_")
        and path.stem not in NOT_SCRIPTS
        and re.search(r"^if __name__ == .__main__.:", path.read_text(), flags=re.M) is not None
    )


def benchmark_scripts(folder: Path = BENCHMARKS) -> list[Path]:
    return [p for p in sorted(Path(folder).glob("*.py")) if is_script(p)]


README_TAIL = """\
## Result records: `--out`

Every script takes `--out [PATH]` and then, besides printing its tables, writes them to a JSON
record: `--out` alone (or `--out auto`) writes `benchmarks/results/<script>-<YYYY-MM-DD>.json` (UTC
date; a second run on the same day replaces it), `--out PATH` writes PATH. The file is written
atomically. It holds:

* `script`, `command` (the command line as `python benchmarks/<script>.py ...`), `commit` (`git
  rev-parse --short HEAD`, with `-dirty` when a tracked file outside `benchmarks/results/` differs;
  `unknown` outside a git checkout), `date` (ISO 8601, UTC) and `machine` (cores, platform, Python);
* `parameters`: the parsed arguments;
* `tables`: per printed table its `title`, `columns`, `rows` (the values the printed cells were
  formatted from; a missing value, NaN included, is `null`), `formats` (each column's printed
  format, as a `str.format` template without the width) and optional `notes` (the lines printed
  with the table);
* `ratios` (optional): named ratios the script reports.

The scripts build each printed line and the record's row from the same values (`_results.py`).
Timings depend on the machine and on what else runs on it: compare rows of one record, and records
of one machine.

## Tables in the docs: `report.py`

`python benchmarks/report.py` reads every record in `benchmarks/results/`, keeps the latest one per
script (by `date`), and in each `docs/benchmarks/*.md` page replaces what lies between

    <!-- results: SCRIPT -->
    <!-- /results -->

by that record's tables as Markdown (each headed by the run's date, command, commit and a link to
the JSON file; a script without a record gets a line saying how to make one). It also writes this
file. Pages without markers are left alone. `python benchmarks/report.py --check` changes nothing
and exits 1, naming the pages, when one would change; `tests/benchmarks/test_report.py` runs it.

To refresh a page: run the script with `--out`, then `python benchmarks/report.py`, and commit the
record with the pages.
"""


def readme_text(folder: Path, results: dict[str, tuple[Path, dict]], readme_dir: Path) -> str:
    scripts = benchmark_scripts(folder)
    helpers = [p for p in sorted(Path(folder).glob("*.py")) if p not in scripts]
    lines = [
        "# Benchmarks",
        "",
        "<!-- generated by benchmarks/report.py from the scripts' docstrings and benchmarks/results/; do not edit -->",
        "",
        "Each script measures one thing side by side in one run and prints it as tables; run them from the "
        "repository root, e.g. `python benchmarks/backends.py --help` for a script's options. The first line "
        "of each script's docstring says what it measures; the rest of the docstring says how.",
        "",
        "| script | what it measures | latest record |",
        "| :--- | :--- | :--- |",
    ]
    for p in scripts:
        found = results.get(p.stem)
        latest = "-"
        if found:
            link = Path(os.path.relpath(found[0].resolve(), Path(readme_dir).resolve())).as_posix()
            latest = f"[{_when(found[1]):%Y-%m-%d}]({link})"
        lines.append(f"| [`{p.name}`]({p.name}) | {cell(summary(p))} | {latest} |")
    if helpers:
        lines += ["", "The other Python files here (no benchmark tables of their own):", ""]
        lines += [f"* [`{p.name}`]({p.name}): {summary(p)}" for p in helpers]
    return "\n".join(lines) + "\n\n" + README_TAIL


# ---------------------------------------------------------------- main


def run(results_dir: Path, pages: list[Path], readme: Path | None, scripts_dir: Path, check: bool) -> list[Path]:
    """Write (or with ``check`` only compare) every page and the index; returns those that changed."""
    results = load_results(results_dir)
    changed: list[Path] = []
    wanted: list[tuple[Path, str]] = []
    for page in pages_in(pages):
        text = page.read_text()
        if not any(START.match(line) or END.match(line) for line in text.split("\n")):
            continue
        wanted.append((page, rewrite_page(text, results, page.parent, _shown(page))))
    if readme is not None:
        wanted.append((readme, readme_text(scripts_dir, results, readme.parent)))
    for path, text in wanted:
        if not path.exists() or path.read_text() != text:
            changed.append(path)
            if not check:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f".{path.name}.tmp")
                tmp.write_text(text)
                os.replace(tmp, path)
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page or the index would change")
    ap.add_argument("--results", type=Path, default=BENCHMARKS / "results", help="folder of the records")
    ap.add_argument(
        "--pages",
        type=Path,
        nargs="*",
        default=[ROOT / "docs" / "benchmarks"],
        help="pages, or folders of *.md pages (default docs/benchmarks)",
    )
    ap.add_argument("--readme", type=Path, default=BENCHMARKS / "README.md", help="the index to write")
    ap.add_argument("--no-readme", action="store_true", help="do not write the index")
    ap.add_argument("--scripts", type=Path, default=BENCHMARKS, help="folder of the scripts the index lists")
    args = ap.parse_args(argv)
    try:
        changed = run(args.results, args.pages, None if args.no_readme else args.readme, args.scripts, args.check)
    except ReportError as exc:
        print(f"report.py: error: {exc}", file=sys.stderr)
        return 2
    names = ", ".join(_shown(p) for p in changed)
    if args.check:
        if changed:
            print(f"out of date (run python benchmarks/report.py): {names}", file=sys.stderr)
            return 1
        return 0
    print(f"updated {names}" if changed else "all pages up to date", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""docs/README.md, the index of the contract and the manual, lists what docs/ holds, and nothing else: every schema
of docs/schemas/, every document (docs/*.md) and every AsyncAPI document (docs/*.yaml) is linked from it, and
every file it links to exists (check_links.py checks the links of every document; this checks the other way).

    python3 Tests/docs/check_index.py      exit 1 when the index and docs/ disagree"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"
index = (DOCS / "README.md").read_text(encoding="utf-8")
linked = {target.split("#")[0] for target in re.findall(r"(?<!!)\[[^\]]*\]\(([^)\s#][^)\s]*)\)", index)}
linked = {target for target in linked if not re.match(r"^[a-z]+:", target)}

present = {path.relative_to(DOCS).as_posix() for path in DOCS.glob("schemas/*.json")}
present |= {path.name for path in DOCS.glob("*.md") if path.name != "README.md"}
present |= {path.name for path in DOCS.glob("*.yaml")}

problems = [f"docs/README.md does not list {name}" for name in sorted(present - linked)]
problems += [f"docs/README.md lists {name}, which does not exist" for name in sorted(linked)
             if name.startswith("schemas/") and not (DOCS / name).exists()]
schemas = sorted(name for name in present if name.startswith("schemas/"))
if len(schemas) < 10:
    problems.append(f"only {len(schemas)} schemas found in docs/schemas: the pattern no longer finds them")
for problem in problems:
    print("FAIL  " + problem)
if not problems:
    print(f"ok    docs/README.md lists every schema ({len(schemas)}), document and AsyncAPI document of docs/,"
          " and each one it lists exists")
sys.exit(1 if problems else 0)

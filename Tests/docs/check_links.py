#!/usr/bin/env python3
"""Every Markdown link in the repository's documents resolves inside the repository: the file exists and
the #anchor names a heading of it (GitHub's slugs). Links to the web are left alone; a link out of the
repository (../shared, an absolute path) fails.

    python3 Tests/docs/check_links.py        prints one line per document; exit 1 on any broken link"""
import os, re, subprocess, sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
files = subprocess.run(["git", "-C", root, "ls-files", "*.md"], capture_output=True, text=True, check=True).stdout.split()
link = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def slugs(path):
    found, counts = set(), {}
    fence = False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        if fence or not line.startswith("#"):
            continue
        text = line.lstrip("#").strip()
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        n = counts.get(slug, 0)
        counts[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


broken = []
for name in files:
    path = os.path.join(root, name)
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    checked = 0
    for target in link.findall(text):
        if re.match(r"^[a-z]+:", target) or target.startswith("mailto:"):
            continue
        checked += 1
        file_part, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if not resolved.startswith(root + os.sep) and resolved != root:
            broken.append(f"{name}: {target} leaves the repository")
        elif not os.path.exists(resolved):
            broken.append(f"{name}: {target} does not exist")
        elif anchor and resolved.endswith(".md") and anchor not in slugs(resolved):
            broken.append(f"{name}: {target}: no heading #{anchor}")
    print(f"ok    {name}: {checked} link(s)" if not any(b.startswith(name + ":") for b in broken) else f"FAIL  {name}")
for problem in broken:
    print("  " + problem)
sys.exit(1 if broken else 0)

#!/usr/bin/env python3
"""Every Markdown link in the repository's documents resolves inside the repository: the file exists and
the #anchor names a heading of it (GitHub's slugs). Links to the web are left alone; a link out of the
repository (../shared, an absolute path) fails.

The command line's texts (`--help`, and what its commands print) send readers to documents too, in words:
`docs/runbook.md, "Backup and restore"`, `README, "The demo"`, `docs/contract.md, section 2`,
`deploy/README.md, Topics`. Each such reference in the sources of the command line (CLI_SOURCES, comments
aside) must name a document that exists and, when it names one, a heading of it (its text, or `section N` for a
heading numbered `N.`).

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

# The command line's texts. Sources/ReceiptWorker's messages name documents too: add it here once they resolve.
CLI_SOURCES = ["Sources/ReceiptWorkerCLI", "Sources/ReceiptWorker"]
DOCUMENT = r"(README(?:\.md)?|(?:deploy|docs|examples)/[\w./-]*[\w/])"
REFERENCE = re.compile(DOCUMENT + r'(?:,\s+(?:"([^"]+)"|section (\d+)|([A-Z][\w ]*\w)(?=[).])))?')


def headings(path):
    found = set()
    fence = False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        if not fence and line.startswith("#"):
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", line.lstrip("#").strip()).replace("`", "")
            found.add(text.lower())
    return found


cli_broken, cli_checked = [], 0
for directory in CLI_SOURCES:
    for source in sorted(os.listdir(os.path.join(root, directory))):
        if not source.endswith(".swift"):
            continue
        name = f"{directory}/{source}"
        for number, line in enumerate(open(os.path.join(root, name), encoding="utf-8"), 1):
            if line.lstrip().startswith("//"):
                continue
            for match in REFERENCE.finditer(line.replace('\\"', '"')):
                document, quoted, section, bare = match.groups()
                cli_checked += 1
                target = "README.md" if document == "README" else document
                path = os.path.join(root, target)
                where = f"{name}:{number}: {match.group(0)}"
                if not os.path.exists(path):
                    cli_broken.append(f"{where}: {target} does not exist")
                    continue
                heading = quoted or bare
                if section and not any(h.startswith(f"{section}.") for h in headings(path)):
                    cli_broken.append(f"{where}: {target} has no heading numbered {section}.")
                elif heading and heading.lower() not in headings(path):
                    cli_broken.append(f"{where}: {target} has no heading {heading!r}")
print(f"ok    the command line's texts: {cli_checked} reference(s) to documents" if not cli_broken
      else "FAIL  the command line's texts")
if cli_checked == 0:
    cli_broken.append("no reference found in the command line's sources: the pattern no longer finds them")
broken += cli_broken
for problem in broken:
    print("  " + problem)
sys.exit(1 if broken else 0)

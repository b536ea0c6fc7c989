#!/usr/bin/env python3
"""What the SQLite ledger's group commits write, by table and index.

    wal-pages.py COPY [COPY ...]

Each COPY is a directory holding `ledger.sqlite` and `ledger.sqlite-wal`, copied from a running worker's ledger
(scripts/bench-worker.sh does it during a burst with WAL_PAGES=yes). Every commit found in the copies' write-ahead
logs is read once: each commit's frames are pages written whole, and each page belongs to one b-tree
(a table or an index, by SQLite's dbstat table on the copy). Prints, on one line, the pages a commit writes to each
b-tree: what the commit's `pwrite`s and the checkpoints after it cost. A decision whose keys land on pages the other
decisions of its commit did not touch adds a page to each such index.

The copies are not taken atomically: frames after the first whose salts differ from the log's header (the log
restarted after a checkpoint) or after the last commit are ignored, and pages beyond the copied file are counted
as "new pages".
"""
import collections
import os
import shutil
import sqlite3
import struct
import sys
import tempfile


def commits(wal_path):
    """Each complete commit in a WAL file that carries the header's salts: (the salts and the commit's place in
    the log, which name it across copies; its page numbers)."""
    with open(wal_path, "rb") as file:
        raw = file.read()
    if len(raw) < 32:
        return []
    page_size = struct.unpack(">I", raw[8:12])[0]
    salts = raw[16:24]
    found, pages, offset = [], [], 32
    while offset + 24 + page_size <= len(raw):
        page, size_after_commit = struct.unpack(">II", raw[offset : offset + 8])
        if raw[offset + 8 : offset + 16] != salts:
            break
        pages.append(page)
        if size_after_commit:
            found.append(((salts, len(found)), pages))
            pages = []
        offset += 24 + page_size
    return found


def owners(directory):
    """Page number -> the b-tree it belongs to, read from a scratch copy (opening it applies the log)."""
    with tempfile.TemporaryDirectory() as scratch:
        for name in ("ledger.sqlite", "ledger.sqlite-wal"):
            shutil.copy(os.path.join(directory, name), scratch)
        connection = sqlite3.connect(os.path.join(scratch, "ledger.sqlite"))
        pages = {page: name for name, page in connection.execute("SELECT name, pageno FROM dbstat")}
        connection.close()
        return pages


def main(directories):
    found = {}
    for directory in directories:
        found.update(commits(os.path.join(directory, "ledger.sqlite-wal")))
    if not found:
        print("no complete commit in any copy of the write-ahead log")
        return
    # The last copy's file holds the most pages: its owners name the others' too (a page changes b-tree only
    # when freed and reused).
    pages = owners(max(directories, key=lambda d: os.path.getsize(os.path.join(d, "ledger.sqlite"))))
    per_btree = collections.Counter()
    for commit in found.values():
        for page in set(commit):
            per_btree[pages.get(page, "new pages")] += 1
    total = sum(per_btree.values())
    # Those written in fewer than one commit in twenty (the migrations' first commit, a health check) left out.
    by_btree = ", ".join(
        f"{name} {count / len(found):.1f}" for name, count in per_btree.most_common() if count / len(found) >= 0.05)
    print(f"{len(found)} commits of {total / len(found):.1f} pages; a commit's pages by b-tree: {by_btree}")


if __name__ == "__main__":
    main(sys.argv[1:])

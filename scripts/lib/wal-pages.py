#!/usr/bin/env python3
"""What the SQLite ledger's group commits write, by table and index.

    wal-pages.py LEDGER COPIES

LEDGER is the ledger's file (read only, for SQLite's dbstat table: which b-tree each page belongs to); COPIES a
directory of copies of its write-ahead log taken while a burst ran (scripts/bench-worker.sh makes them with
WAL_PAGES=yes). Every commit found in the copies is read once: its frames are the pages it wrote, whole, each
written again to the file by a checkpoint. Prints, on one line, the commits read, the decisions a commit held and
the pages a decision cost, by table and index: a decision whose keys land on pages the other decisions of its
commit did not touch adds a page to each such index.

The decisions of a commit are the grants it added: the rowids on the grants table's leaf pages it wrote, past the
highest the commit before it (in the same log) wrote. Commits that added none (the migrations, a health check) and
those whose predecessor is not in the copies are left out of the decisions and of the pages a decision; all are
in the commits read.

A copy of the log taken while SQLite writes it may end in a torn frame or carry the next generation's first frames
(the log restarts after a checkpoint, with new salts): frames whose salts differ from the copy's header, and
frames after its last commit, are ignored.
"""
import collections
import os
import sqlite3
import struct
import sys


def varint(data, offset):
    """SQLite's variable-length integer at `offset`: (value, the offset after it)."""
    value = 0
    for index in range(8):
        byte = data[offset + index]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, offset + index + 1
    return (value << 8) | data[offset + 8], offset + 9


def last_rowid(page, number):
    """The highest rowid on a table's leaf page (its last cell), or None for another kind of page."""
    header = 100 if number == 1 else 0
    if page[header] != 0x0D:
        return None
    cells = struct.unpack(">H", page[header + 3 : header + 5])[0]
    if cells == 0:
        return None
    pointer = struct.unpack(">H", page[header + 8 + 2 * (cells - 1) : header + 10 + 2 * (cells - 1)])[0]
    _, offset = varint(page, pointer)  # the payload's size
    return varint(page, offset)[0]


def commits(wal_path, grants_leaves):
    """Each complete commit of a log file with its header's salts, as ((salt-1, salt-2, its place in the log), its
    pages, the highest grant rowid it wrote or None)."""
    with open(wal_path, "rb") as file:
        raw = file.read()
    if len(raw) < 32:
        return []
    page_size = struct.unpack(">I", raw[8:12])[0]
    page_size = 65536 if page_size == 1 else page_size
    salts = struct.unpack(">II", raw[16:24])
    found, pages, highest, offset = [], [], None, 32
    while offset + 24 + page_size <= len(raw):
        number, size_after_commit, *frame_salts = struct.unpack(">IIII", raw[offset : offset + 16])
        if tuple(frame_salts) != salts:
            break
        pages.append(number)
        if number in grants_leaves:
            rowid = last_rowid(raw[offset + 24 : offset + 24 + page_size], number)
            if rowid is not None:
                highest = rowid if highest is None else max(highest, rowid)
        if size_after_commit:
            found.append(((salts[0], salts[1], len(found)), pages, highest))
            pages, highest = [], None
        offset += 24 + page_size
    return found


def main(ledger, copies):
    connection = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    owners, grants_leaves = {}, set()
    for name, number, kind in connection.execute("SELECT name, pageno, pagetype FROM dbstat"):
        owners[number] = name
        if name == "grants" and kind == "leaf":
            grants_leaves.add(number)
    connection.close()
    found = {}
    for name in sorted(os.listdir(copies)) if os.path.isdir(copies) else []:
        for key, pages, highest in commits(os.path.join(copies, name), grants_leaves):
            found[key] = (pages, highest)
    if not found:
        print("no complete commit in the copies of the write-ahead log")
        return
    # The decisions of each commit whose predecessor in its log is known (a commit that wrote no grant passes
    # its predecessor's highest rowid on).
    decisions, per_btree, counted = 0, collections.Counter(), 0
    highest_before = {}
    for salt1, salt2, place in sorted(found):
        pages, highest = found[(salt1, salt2, place)]
        before = highest_before.get((salt1, salt2, place - 1))
        now = before if highest is None else highest if before is None else max(before, highest)
        highest_before[(salt1, salt2, place)] = now
        if before is None or now == before:
            continue
        counted += 1
        decisions += now - before
        for page in set(pages):
            per_btree[owners.get(page, "pages no longer in the ledger")] += 1
    pages_read = sum(len(set(pages)) for pages, _ in found.values())
    line = f"{len(found)} commits read, {pages_read / len(found):.1f} pages a commit"
    if decisions > 0:
        # Tables and indexes written less than once in a hundred decisions left out (a health check, offsets).
        by_btree = ", ".join(
            f"{name} {count / decisions:.2f}" for name, count in per_btree.most_common() if count / decisions >= 0.01)
        line += (
            f"; {counted} of them after a commit read and adding grants: {decisions / counted:.1f} decisions a commit,"
            f" {sum(per_btree.values()) / decisions:.2f} pages a decision: {by_btree}")
    print(line)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])

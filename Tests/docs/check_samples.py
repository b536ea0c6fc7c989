#!/usr/bin/env python3
"""Every JSON sample in the documents is a message the contract allows, as the worker writes it today.

    .deps/venv/bin/python Tests/docs/check_samples.py     one line per sample block; exit 1 on any problem

It reads each fenced ```json block of the repository's Markdown documents (docs/, the README, examples/...): one
JSON value, or one JSON object a line. Each object's schema in docs/schemas/ is named by a comment on the line
before the block, `<!-- schema: job.json -->`, or else by its `type` field (`receipt.granted` is
schemas/receipt.granted.json); a sample with neither fails. A result event is validated against the strict variant
of its schema (Tests/contract/check_contract.py: unknown fields refused, known values only) and must carry every
field its schema declares, as the worker writes every one of them (`null` where it has no value): a sample that
leaves out the money fields shows an event no worker sends. Numbers follow the contract's prose rules too
(integers written as integers, percentages with at most three decimals). Anything else (a job, a consumption
answer) is validated against its schema as published.

A code block that shows a file of the repository says so on the line before it, `<!-- file: PATH -->`, and must be
that file, byte for byte (the integration guide's producer and consumer examples, which the test command runs)."""
import json
import pathlib
import re
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "Tests" / "contract"))
from check_contract import Report, check_number_literals, strict  # noqa: E402
from jsonschema import Draft7Validator  # noqa: E402

SCHEMAS = ROOT / "docs" / "schemas"
BLOCK = re.compile(r"^```json[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
MARKER = re.compile(r"<!--\s*schema:\s*([\w.-]+\.json)\s*-->\s*$")
INCLUDE = re.compile(r"^<!--\s*file:\s*(\S+)\s*-->\n```[\w-]*\n(.*?)^```[ \t]*$", re.M | re.S)


def documents():
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "*.md"], capture_output=True, text=True, check=True)
    return [ROOT / name for name in listed.stdout.split()]


def values(body):
    """The block's JSON values with the text each came from: the whole block, or one value a line."""
    try:
        return [(json.loads(body), body)]
    except ValueError:
        pass
    found = []
    for line in body.splitlines():
        if line.strip():
            found.append((json.loads(line), line))  # a ValueError here is the caller's to report
    return found


def validator(name, cache={}):
    if name not in cache:
        schema = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
        produced = name.startswith("receipt.")
        cache[name] = (Draft7Validator(strict(schema) if produced else schema,
                                       format_checker=Draft7Validator.FORMAT_CHECKER),
                       list(schema.get("properties", {})) if produced else [])
    return cache[name]


def check_block(where, marker, body, report):
    try:
        samples = values(body)
    except ValueError as error:
        report.fail(f"{where}: not JSON, nor one JSON value a line: {error}")
        return []
    names = []
    for index, (sample, text) in enumerate(samples, 1):
        at = f"{where}, sample {index}" if len(samples) > 1 else where
        name = marker or (f"{sample['type']}.json" if isinstance(sample, dict) and isinstance(sample.get("type"), str)
                          else None)
        if name is None:
            report.fail(f"{at}: no schema: give it a `type` or a `<!-- schema: NAME.json -->` line before the block")
            continue
        if not (SCHEMAS / name).is_file():
            report.fail(f"{at}: docs/schemas/{name} does not exist")
            continue
        names.append(name)
        checker, every_field = validator(name)
        for error in sorted(checker.iter_errors(sample), key=lambda e: list(e.absolute_path))[:3]:
            path = "/".join(str(part) for part in error.absolute_path) or "(the object)"
            report.fail(f"{at}: {name}: {path}: {error.message}")
        missing = [field for field in every_field if field not in sample]
        if missing:
            report.fail(f"{at}: lacks {', '.join(missing)}, which every {sample.get('type', name)} carries")
        check_number_literals(at, text, report)
    return names


def main():
    report = Report()
    blocks = 0
    for path in documents():
        text = path.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            blocks += 1
            line = text.count("\n", 0, match.start()) + 1
            where = f"{path.relative_to(ROOT)}:{line}"
            before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = MARKER.search(before)
            before_problems = len(report.problems)
            names = check_block(where, marker.group(1) if marker else None, match.group(1), report)
            state = "ok  " if len(report.problems) == before_problems else "FAIL"
            print(f"{state}  {where}: {len(names)} sample(s): {', '.join(sorted(set(names))) or '-'}")
        for match in INCLUDE.finditer(text):
            where = f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 2}"
            shown = ROOT / match.group(1)
            if not shown.is_file():
                report.fail(f"{where}: shows {match.group(1)}, which does not exist")
            elif shown.read_text(encoding="utf-8") != match.group(2):
                report.fail(f"{where}: the block is not {match.group(1)} as it is: copy the file into it again")
            else:
                print(f"ok    {where}: {match.group(1)}, verbatim")
    if blocks == 0:
        report.fail("no ```json block found: the pattern no longer finds the documents' samples")
    status = report.finish()
    if status == 0:
        print(f"every JSON sample of the documents is valid ({blocks} block(s)), every file they show is as it is")
    return status


if __name__ == "__main__":
    sys.exit(main())

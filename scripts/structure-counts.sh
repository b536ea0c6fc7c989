#!/usr/bin/env bash
# The package's structural figures, counted from the tree as it is, so one command gives the before and the
# after: which targets import each C module (and Kafka, Ledger, Runtime), `[String: Any]`, files holding more than
# one type, a job's path from the consumer to the commit, parses of a job's bytes, and the package graph.
#   scripts/structure-counts.sh
# Read-only: it builds nothing. Counts are taken on Sources/**/*.swift with comments and string literals removed
# (so a doc comment that says `[String: Any]`, or a console's JavaScript `class`, is not counted).
# Each figure is one line, `name: value  detail`; lists of files follow on indented lines.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The package graph from the manifest alone. A scratch path of its own: this neither writes .build nor waits on
# the lock of a build running in this clone.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
graph="$scratch/describe.json"
swift package --scratch-path "$scratch/build" describe --type json >"$graph" 2>"$scratch/describe.err" ||
    { cat "$scratch/describe.err" >&2; : >"$graph"; }

# Which tree was counted: a figure from uncommitted changes says so.
if revision="$(git rev-parse --short HEAD 2>/dev/null)"; then
    [ -z "$(git status --porcelain -- Sources Package.swift)" ] || revision+=" with uncommitted changes"
else
    revision="no git"
fi

python3 - "$graph" "$revision" <<'PY'
import json, os, re, sys
from collections import Counter, defaultdict

graph_path, revision = sys.argv[1], sys.argv[2]
C_MODULES = ["CRdKafka", "CCurl", "COpenSSL", "CSQLite", "CPostgres", "CMicroHTTPD", "CLinux", "CBuildInfo"]
LAYERS = ["Kafka", "Ledger", "Runtime"]

# Comments and string literals out, newlines kept. Interpolations with quotes inside are cut roughly, which
# keeps parentheses and braces balanced enough for the scans below.
LITERAL = re.compile(r'(#*)"""[\s\S]*?"""\1|//[^\n]*|/\*[\s\S]*?\*/|(#+)"[^\n]*?"\2|"(?:\\.|[^"\\\n])*"')
def strip(text):
    return LITERAL.sub(lambda m: '""' + "\n" * m.group(0).count("\n"), text)

files = {}  # path -> (raw text, stripped text)
for root, _, names in os.walk("Sources"):
    for name in names:
        if name.endswith(".swift"):
            path = os.path.join(root, name)
            raw = open(path, encoding="utf-8").read()
            files[path] = (raw, strip(raw))
def target(path): return path.split(os.sep)[1]
def short(path): return path[len("Sources/"):]
def per_target(counter): return ", ".join(f"{t} {n}" for t, n in sorted(counter.items(), key=lambda x: (-x[1], x[0])))

print(f"# structure counts at {revision} (scripts/structure-counts.sh)")

# 1 and 6: imports, with any attribute or access level before `import` (`internal import`, `@_exported import`).
IMPORT = re.compile(r"^[ \t]*(?:(?:@\w+(?:\([^)]*\))?|public|package|internal|fileprivate|private)\s+)*import\s+"
                    r"(?:(?:typealias|struct|class|enum|protocol|let|var|func)\s+)?(\w+)", re.M)
importers = defaultdict(Counter)  # module -> target -> files
for path, (_, code) in files.items():
    for module in set(IMPORT.findall(code)):
        importers[module][target(path)] += 1
def importer_line(name, module):
    users = importers.get(module, Counter())
    detail = ", ".join(f"{t} ({n} files)" for t, n in sorted(users.items()))
    print(f"{name} {module}: {len(users)}  {detail}")
for module in C_MODULES:
    importer_line("targets-importing", module)
for module in LAYERS:
    importer_line("targets-importing", module)

# 2 and 6: `[String: Any]` and `@unchecked Sendable`, per target.
def occurrences(pattern):
    found = Counter()
    for path, (_, code) in files.items():
        found[target(path)] += len(re.findall(pattern, code))
    found = +found
    return sum(found.values()), per_target(found)
print("string-any: %d  %s" % occurrences(r"\[\s*String\s*:\s*Any\s*\]"))
print("unchecked-sendable: %d  %s" % occurrences(r"@unchecked\s+Sendable"))

# 3: types per file: named struct, class, enum, actor and protocol declarations, nested ones included
# (`class func` and `class var` are members, not types); extensions do not count.
TYPE = re.compile(r"^([ \t]*)(?:(?:@\w+(?:\([^)]*\))?|public|package|internal|fileprivate|private|open|final|indirect"
                  r"|nonisolated)\s+)*(?:struct|class|enum|actor|protocol)\s+(?!(?:func|var|let|subscript|init)\b)"
                  r"[A-Za-z_]\w*", re.M)
indents = {path: TYPE.findall(code) for path, (_, code) in files.items()}  # a top-level type's is ""
types = {path: len(found) for path, found in indents.items()}
lines = {path: raw.count("\n") for path, (raw, _) in files.items()}
several = [p for p in files if types[p] > 1]
print(f"files-with-more-than-one-type: {len(several)} of {len(files)}  "
      + per_target(Counter(target(p) for p in several)))
# Also counting only unindented (top-level) types: a nested `Settings` or `Code` belongs with its type.
print(f"files-with-more-than-one-top-level-type: {sum(i.count('') > 1 for i in indents.values())} of {len(files)}")
for name, chosen in [("files-over-300-lines", [p for p in files if lines[p] > 300]),
                     ("files-with-more-than-three-types", [p for p in files if types[p] > 3])]:
    print(f"{name}: {len(chosen)}")
    for path in sorted(chosen, key=lambda p: (-lines[p], p)):
        print(f"  {short(path)}: {lines[path]} lines, {types[path]} types")

# 4: parses of a job's bytes before its handler's result. Heuristic: the runtime calls `handler.NAME(...)` for a
# message (Sources/Runtime/ConsumerRuntime*.swift); each call site counts once. NAME is looked up among the
# functions of JobHandler (any file declaring or extending it), and within it every expression reading
# `message.value` is a read of the bytes; a call to another JobHandler function is followed. A read is a parse of the job when the call it is passed to names a job (its type,
# function or argument label: `JobParser.parse`, `apps.app(ofJob:)`); other reads (a hash of a malformed job) are
# listed apart. Bytes read under another name than `message`, or by another type's code, are not seen: hence each
# read is printed with its call chain, to be checked by eye.
def block(code, i):
    """(start, end) of the body of the declaration at `i`: its first `{` outside parentheses, to its match."""
    parens = 0
    while i < len(code) and not (code[i] == "{" and parens == 0):
        parens += {"(": 1, ")": -1}.get(code[i], 0)
        i += 1
    depth, j = 0, i
    while j < len(code):
        depth += {"{": 1, "}": -1}.get(code[j], 0)
        if depth == 0: break
        j += 1
    return i + 1, j
def functions(code):
    """name -> [(body start, body end)] of every `func` in `code`."""
    found = defaultdict(list)
    for m in re.finditer(r"\bfunc\s+(\w+)", code):
        found[m.group(1)].append(block(code, m.end()))
    return found
def callee(code, at):
    """The call a read at `at` is passed to, with the argument's label: `apps.app(ofJob:)`, or `-` for none."""
    depth, i = 0, at - 1
    while i >= 0:
        c = code[i]
        if c in ")]": depth += 1
        elif c in "([" and depth: depth -= 1
        elif c == "(":
            name = re.search(r"([\w.]+)\s*$", code[:i])
            label = re.match(r"\s*(\w+)\s*:", code[i + 1:at])
            return f"{name.group(1) if name else '?'}({label.group(1) + ':' if label else '_:'})"
        elif c in "{};" and not depth: return "-"
        i -= 1
    return "-"

handler_code = "\n".join(code for _, code in files.values()
                         if re.search(r"\b(?:struct|class|enum|actor|extension)\s+JobHandler\b", code))
handler_funcs = functions(handler_code)
def reads(name, chain, seen):
    """(chain, call) for every read of `message.value` in function `name` and the JobHandler functions it calls."""
    found = []
    for start, end in handler_funcs.get(name, []):
        inner = [(s, e) for n, spans in handler_funcs.items() for s, e in spans if start < s and e < end]
        own = lambda p: not any(s <= p < e for s, e in inner)  # a nested function's body is its own
        for m in re.finditer(r"\bmessage\s*\.\s*value\b", handler_code[start:end]):
            if own(start + m.start()):
                found.append((chain, callee(handler_code, start + m.start())))
        for m in re.finditer(r"(?<![\w.])(?:self\.|Self\.)?(\w+)\s*\(", handler_code[start:end]):
            called = m.group(1)
            if (called in handler_funcs and called not in seen and own(start + m.start())
                    and not handler_code[:start + m.start()].rstrip().endswith("func")):
                found += reads(called, chain + [called], seen | {called})
    return found
as_job, other = [], []
for path in sorted(p for p in files if re.match(r"Sources/Runtime/ConsumerRuntime.*\.swift$", p)):
    code = files[path][1]
    spans = functions(code)
    for m in re.finditer(r"\bhandler\.(\w+)\s*\(", code):
        caller = min(((e - s, n) for n, ss in spans.items() for s, e in ss if s <= m.start() < e), default=(0, "?"))[1]
        for chain, call in reads(m.group(1), [caller, m.group(1)], {m.group(1)}):
            (as_job if re.search(r"job", call, re.I) else other).append(f"{'→'.join(chain)}: {call}")
print(f"job-bytes-parses: {len(as_job)}  " + "; ".join(as_job))
print(f"job-bytes-other-reads: {len(other)}  " + ("; ".join(other) or "none"))

# 5: a job's path from the consumer's event to the runtime's commit. A static call graph through protocols and
# closures is out of reach of a script, so the path is this hand-kept list of the steps a valid job takes (the
# job flow, one backend's dialect left out), in order; keep it in step with the code. Each step is found in the
# bodies that declare or extend its type (protocols aside: a requirement is no code a job runs) and define the
# member, so the files and targets follow the tree; a step not found is printed, to be mended here.
PATH = """
    KafkaConsumerEvents.next EventChannel.next ConsumerRuntime.run ConsumerRuntime.take PartitionBook.generation
    PartitionBook.take JobHandler.intake JobParser.parse WaitTracker.began
    GroupScheduler.enqueue ConsumerRuntime.adjustIntake GroupScheduler.next ConsumerRuntime.startMessages
    PartitionBook.holds ConsumerRuntime.handle ConsumerRuntime.processSpan RuntimeHandlingContext.init
    ConsumerRuntime.handled JobHandler.handle JobHandler.storedAnswer RuntimeHandlingContext.retrying
    ServiceRetries.retrying LedgerEngine.storedDecision Batcher.submit JobHandler.verify AppleRetry.run
    HandlingContext.traced AppleVerifier.verify OrderChecks.evaluate JobHandler.record ResultEvent.eventID
    Revenue.ofSale RefundFollowUp.stated ResultEvent.stored LedgerEngine.record LedgerDialect.claimFacts
    ClaimRules.decide LedgerDialect.claimWrite JobHandler.publishing StoredEvent.published
    StoredEvent.record(topic ConsumerRuntime.deliver ConsumerRuntime.publish KafkaProducer.send
    KafkaProducer.enqueue JobHandler.delivered TransactionFinisher.granted ConsumerRuntime.endWait
    WaitTracker.answered PartitionBook.finish GroupScheduler.release ConsumerRuntime.commitLoop
    PartitionBook.committable ConsumerRuntime.commit
""".split()
step_files, missing = [], []
for step in PATH:
    kind, member = step.split(".", 1)
    declares = re.compile(r"^[ \t]*(?:(?:@\w+(?:\([^)]*\))?|public|package|internal|fileprivate|private|final)\s+)*"
                          rf"(?:struct|class|enum|actor|extension)\s+{kind}\b", re.M)
    defines = re.compile(r"\binit\s*[(<]" if member == "init" else
                         r"\b(?:func|var|let)\s+" + re.escape(member) + (r"\b" if member.isidentifier() else ""))
    where = [p for p, (_, code) in files.items()
             if any(defines.search(code, *block(code, d.end())) for d in declares.finditer(code))]
    step_files += [(step, p) for p in where]
    if not where: missing.append(step)
touched = {p for _, p in step_files}
print(f"job-path-steps: {len(PATH)}  through {len({s.split('.')[0] for s in PATH})} types, {len(touched)} files, "
      f"{len({target(p) for p in touched})} targets  (method: the hand-kept list in this script, each step grepped "
      "to the files that define it)")
print("job-path-targets: " + per_target(Counter(target(p) for p in touched)))
print("job-path-missing: " + (" ".join(missing) or "none"))

# 6: size.
print(f"swift-files: {len(files)}  in {len({target(p) for p in files})} targets under Sources/")
print(f"swift-lines: {sum(lines.values())}  in Sources/")

# The package graph: each target's dependencies; what Support, the desk and the worker reach.
try:
    targets = {t["name"]: t for t in json.load(open(graph_path))["targets"]}
except (OSError, ValueError, KeyError):
    print("package-graph: unavailable (swift package describe failed)")
    sys.exit(0)
is_c = lambda name: targets[name]["module_type"] != "SwiftTarget"
deps = {name: t.get("target_dependencies", []) for name, t in targets.items()}
kinds = Counter("C" if is_c(n) else t["type"] for n, t in targets.items())
print(f"targets: {len(targets)}  " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
for name in sorted(targets, key=str.lower):
    if not is_c(name):
        print(f"deps {name}: {len(deps[name])}  " + " ".join(deps[name]))
def reach(name):
    seen, todo = set(), list(deps[name])
    while todo:
        d = todo.pop()
        if d not in seen:
            seen.add(d)
            todo += deps.get(d, [])
    return seen
# Flows and Events are counted once they exist.
for name in ["Support", "DeskService", "ReceiptWorker", "Flows", "Events"]:
    if name not in targets:
        print(f"reaches {name}: no such target")
        continue
    reached = reach(name)
    layers = [layer for layer in LAYERS if layer in reached]
    print(f"reaches {name}: {' '.join(layers) or 'none'} of {' '.join(LAYERS)}  "
          f"(C direct: {' '.join(sorted(d for d in deps[name] if is_c(d))) or 'none'}; "
          f"C reached: {' '.join(sorted(d for d in reached if is_c(d))) or 'none'}; {len(reached)} targets reached)")
PY

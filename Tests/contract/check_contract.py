#!/usr/bin/env python3
"""Checks the published contract in docs/ (docs/README.md describes it).

    .deps/venv/bin/python Tests/contract/check_contract.py [--docs DIR] [--messages DIR]

Without options: docs/asyncapi.yaml is valid against the official AsyncAPI 3.0.0 JSON Schema (vendored beside
this file: asyncapi-3.0.0.schema.json, see README.md here; no PyPI package ships it), every `$ref` in it and in the schemas resolves, every docs/schemas/*.json is a valid
JSON Schema (draft-07, the dialect AsyncAPI 3.0's own schema format extends) whose `examples` validate against it, and
each result event type maps to a schema (whose `type` is that event type).

Two variants of each schema the worker produces (results, their headers, dead-letter and notification headers):
the published one is open, for consumers (unknown fields allowed, lists of values as `x-known-values`, never an
`enum` that a later release's value would break); the strict one, derived here (additionalProperties false on
every object that lists its properties, `x-known-values` as an `enum`), is what the examples and the captured
messages must also meet: the worker's own output cannot drift from the documents unnoticed.

--messages DIR also validates messages captured by the end-to-end tests (RECEIPT_WORKER_CONTRACT_CAPTURE=DIR):
DIR/*.jsonl, one object a line: {"channel": "jobs"|"results"|"dlq"|"notifications"|"consumption", "key":
str|null, "headers": {str: str}, "value": str}. A result is validated against the schema its ce_type names, with
its headers; a dead letter's headers against dlq-headers.json (its value is the original job or consumption
answer, possibly malformed on purpose); a job's headers against job-headers.json, and a job that fails job.json
must have been answered malformed_job (a deny with its job_id, or a dead letter with its value): the schema may
be stricter than nothing, never stricter than the worker. A notification's value is validated against notification.json and its headers against
notification-headers.json, and the headers and the key must say what the (decoded, not verified) signed payload
says. A consumption answer is validated against consumption-answer.json; one that fails it must have been
dead-lettered consumption_not_sent with the same value (the jobs rule, for answers). The check fails when DIR
holds no message at all, or when no real message validated against one of the core schemas (CORE_SCHEMAS,
CORE_EVENT_TYPES below), which the full test run always produces: an empty or partial capture proves nothing.

Exit status: 0 all good, 1 a check failed (the first problems are listed), 2 usage.
"""

import argparse
import base64
import binascii
import hashlib
import json
import pathlib
import sys
from collections import Counter
from urllib.parse import unquote

import yaml
from jsonschema import Draft7Validator
from jsonschema.exceptions import SchemaError

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
ASYNCAPI_SCHEMA = HERE / "asyncapi-3.0.0.schema.json"
ASYNCAPI_SCHEMA_SHA256 = "1786a007ac00344a8f529e5a6fc5db786b0be6757e0b94a8b95a8a6a52b7fe9a"  # README.md: its source
MAX_PROBLEMS_SHOWN = 10
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
# The schemas of what the worker produces: published open, checked strict (the module docstring).
PRODUCED = ("receipt.granted.json", "receipt.denied.json", "receipt.revoked.json", "receipt.reinstated.json",
            "receipt.consumption_requested.json", "receipt.renewed.json", "receipt.expired.json",
            "receipt.billing_issue.json", "receipt.renewal_changed.json", "receipt.unclaimed.json",
            "receipt.consent_rescinded.json", "receipt.extension_failed.json",
            "receipt.extension_completed.json", "player.erased.json", "result-headers.json", "dlq-headers.json", "notification-headers.json")

# The schema of each kind of captured message: results by their ce_type (mapped from the AsyncAPI document).
RESULT_HEADERS = "result-headers.json"
DLQ_HEADERS = "dlq-headers.json"
JOB = "job.json"
JOB_HEADERS = "job-headers.json"
NOTIFICATION = "notification.json"
NOTIFICATION_HEADERS = "notification-headers.json"
CONSUMPTION_ANSWER = "consumption-answer.json"
REQUIRED_SCHEMAS = (JOB, JOB_HEADERS, RESULT_HEADERS, DLQ_HEADERS, NOTIFICATION, NOTIFICATION_HEADERS,
                    CONSUMPTION_ANSWER)
# With --messages, each of these must have validated at least one real message: the end-to-end tests of the full
# run (scripts/test.sh) send jobs, read grants, denials, dead letters, notifications and receipt.revoked events.
# The result events by their ce_type (their schema file comes from the AsyncAPI document).
CORE_SCHEMAS = (JOB, RESULT_HEADERS, DLQ_HEADERS, NOTIFICATION)
CORE_EVENT_TYPES = ("receipt.granted", "receipt.denied", "receipt.revoked")
CHANNELS = ("jobs", "results", "dlq", "notifications", "consumption")
# The field of each event that its ce_time header repeats: verified_at for a job's answer, credited_at for a
# purchase no job claimed, notified_at for an event of a notification.
TIME_FIELDS = ("verified_at", "credited_at", "notified_at", "erased_at")


class Report:
    def __init__(self):
        self.problems = []

    def fail(self, text):
        self.problems.append(text)

    def finish(self):
        if not self.problems:
            return 0
        print(f"FAILED: {len(self.problems)} problem(s); the first {min(len(self.problems), MAX_PROBLEMS_SHOWN)}:")
        for problem in self.problems[:MAX_PROBLEMS_SHOWN]:
            print(f"  - {problem}")
        return 1


def load(path):
    text = path.read_text(encoding="utf-8")
    return yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)


def pointer(document, fragment):
    """The node at a JSON pointer (`/a/b`, `~0`/`~1` escapes); KeyError/IndexError when absent."""
    node = document
    if fragment in ("", "/"):
        return node
    for part in fragment.lstrip("/").split("/"):
        part = unquote(part).replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def refs(node, where=""):
    """Every `$ref` string in a document, with where it was found."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield where or "/", value
            else:
                yield from refs(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from refs(value, f"{where}/{index}")


def shown(path):
    """A path as printed: relative to the repository when inside it."""
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def check_refs(path, document, report, seen):
    """Resolves every `$ref` of a file (relative files followed once); returns how many were resolved."""
    resolved = 0
    for where, ref in refs(document):
        target_file, _, fragment = ref.partition("#")
        if target_file.startswith(("http://", "https://", "urn:")):
            report.fail(f"{shown(path)}{where}: $ref {ref} is not a local file (the contract must be offline)")
            continue
        target_path = (path.parent / target_file).resolve() if target_file else path
        if not target_path.is_file():
            report.fail(f"{shown(path)}{where}: $ref {ref}: no file {target_path}")
            continue
        try:
            target = document if target_path == path else load(target_path)
            pointer(target, fragment)
        except (KeyError, IndexError, ValueError) as error:
            report.fail(f"{shown(path)}{where}: $ref {ref} does not resolve ({error!r})")
            continue
        resolved += 1
        if target_path != path and target_path not in seen:
            seen.add(target_path)
            resolved += check_refs(target_path, target, report, seen)
    return resolved


def first_error(validator, instance):
    error = next(iter(sorted(validator.iter_errors(instance), key=lambda e: e.path)), None)
    if error is None:
        return None
    location = "/".join(str(part) for part in error.absolute_path) or "(root)"
    return f"at {location}: {error.message[:300]}"


def check_asyncapi(docs, report, file="asyncapi.yaml"):
    path = docs / file
    document = load(path)
    raw = ASYNCAPI_SCHEMA.read_bytes()
    if hashlib.sha256(raw).hexdigest() != ASYNCAPI_SCHEMA_SHA256:
        report.fail(f"{ASYNCAPI_SCHEMA.name} is not the vendored official file (sha256 differs; see README.md)")
    schema = json.loads(raw)
    validator = Draft7Validator(schema)
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    for error in errors[:MAX_PROBLEMS_SHOWN]:
        location = "/".join(str(part) for part in error.absolute_path) or "(root)"
        report.fail(f"{file} at {location}: {error.message[:300]}")
    resolved = check_refs(path, document, report, {path})
    status = "valid" if not errors else f"INVALID ({len(errors)} errors)"
    print(f"{file}: {status} against the AsyncAPI {document.get('asyncapi')} schema; {resolved} $ref(s) resolved")
    return document


def strict(node):
    """The strict variant of a produced schema (the module docstring)."""
    if isinstance(node, list):
        return [strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: strict(value) for key, value in node.items() if key != "x-known-values"}
    if "x-known-values" in node:
        types = node.get("type")
        out["enum"] = list(node["x-known-values"]) + ([None] if isinstance(types, list) and "null" in types else [])
    if "properties" in node and "additionalProperties" not in node:
        out["additionalProperties"] = False
    return out


def closed_anywhere(node):
    """Whether a schema closes an object or lists values as an enum anywhere (its examples aside)."""
    if isinstance(node, list):
        return any(closed_anywhere(item) for item in node)
    if not isinstance(node, dict):
        return False
    return node.get("additionalProperties") is False or "enum" in node or any(
        closed_anywhere(value) for key, value in node.items() if key != "examples")


def check_schemas(docs, report):
    """schema file name -> the validator of what the worker's messages must meet (strict for what it produces)."""
    validators = {}
    for path in sorted((docs / "schemas").glob("*.json")):
        name = path.name
        try:
            schema = load(path)
            Draft7Validator.check_schema(schema)
        except (ValueError, SchemaError) as error:
            report.fail(f"schemas/{name}: not a valid draft-07 schema: {str(error)[:300]}")
            continue
        if schema.get("$schema") != DRAFT_07:
            report.fail(f"schemas/{name}: $schema is not draft-07 ({DRAFT_07})")
        for keyword in ("$id", "title", "description"):
            if not schema.get(keyword):
                report.fail(f"schemas/{name}: no {keyword}")
        examples = schema.get("examples") or []
        if not examples:
            report.fail(f"schemas/{name}: no examples")
        published = Draft7Validator(schema, format_checker=Draft7Validator.FORMAT_CHECKER)
        variants = [("", published)]
        if name in PRODUCED:
            if closed_anywhere(schema):
                report.fail(f"schemas/{name}: a consumer's schema must stay open (no additionalProperties false, "
                            "no enum: x-known-values)")
            variants.append((" (strict)", Draft7Validator(strict(schema), format_checker=Draft7Validator.FORMAT_CHECKER)))
        bad = 0
        for index, example in enumerate(examples):
            for label, validator in variants:
                problem = first_error(validator, example)
                if problem:
                    bad += 1
                    report.fail(f"schemas/{name}: example {index} is invalid{label} {problem}")
        check_refs(path, schema, report, {path})
        validators[name] = variants[-1][1]
        shown_variants = "open and strict" if name in PRODUCED else "as published"
        print(f"schemas/{name}: valid draft-07 schema; {len(examples) - bad} of {len(examples)} example(s) valid "
              f"({shown_variants})")
    return validators


def result_schemas(asyncapi, docs, validators, report):
    """ce_type -> schema file name, from the results channel's messages: each message's headers fix ce_type (the
    discriminator, a const) and its payload is a components schema that references a file of docs/schemas."""
    mapping = {}
    try:
        messages = asyncapi["channels"]["results"]["messages"]
    except (KeyError, TypeError):
        report.fail("asyncapi.yaml: no channels/results/messages")
        return mapping

    def resolved(node):
        while isinstance(node, dict) and "$ref" in node and node["$ref"].startswith("#"):
            node = pointer(asyncapi, node["$ref"].partition("#")[2])
        return node or {}

    for key, message in messages.items():
        message = resolved(message)
        name = message.get("name", "")
        if not name.isidentifier():
            report.fail(f"asyncapi.yaml: message {key}'s name {name!r} is not an identifier (generators name types by it)")
        ref = resolved(message.get("payload")).get("$ref", "")
        headers = resolved(message.get("headers"))
        event_type = next((part.get("properties", {}).get("ce_type", {}).get("const")
                           for part in headers.get("allOf", []) if isinstance(part, dict)
                           and part.get("properties", {}).get("ce_type", {}).get("const")), None)
        if not event_type:
            report.fail(f"asyncapi.yaml: message {key}'s headers fix no ce_type (the discriminator of result messages)")
            continue
        mapping[event_type] = pathlib.Path(ref.partition("#")[0]).name
    header_types = set((validators.get(RESULT_HEADERS).schema if RESULT_HEADERS in validators else {})
                       .get("properties", {}).get("ce_type", {}).get("enum", []))
    if header_types != set(mapping):
        report.fail(f"ce_type values of {RESULT_HEADERS} {sorted(header_types)} differ from the results channel's "
                    f"messages {sorted(mapping)}")
    for event_type, name in mapping.items():
        if name not in validators:
            report.fail(f"ce_type {event_type}: its payload schema {name!r} is not in docs/schemas")
            continue
        properties = validators[name].schema.get("properties", {})
        decision = properties.get("decision", {}).get("const")
        expected = {"receipt.granted": "grant", "receipt.denied": "deny"}.get(event_type)
        if expected and decision != expected:
            report.fail(f"ce_type {event_type}: {name} says decision {decision!r}, expected {expected!r}")
        if properties.get("type", {}).get("const") != event_type:
            report.fail(f"ce_type {event_type}: {name}'s field type is not the constant {event_type!r}")
        if not any(field in validators[name].schema.get("required", []) for field in TIME_FIELDS):
            report.fail(f"ce_type {event_type}: {name} requires none of {TIME_FIELDS} (the ce_time header's field)")
    return mapping


class NumberText(float):
    """A JSON number as the worker wrote it (its text kept), for the rules a schema cannot state."""

    def __new__(cls, text):
        number = super().__new__(cls, float(text))
        number.text = text
        return number


# Prose rules of docs/contract.md that JSON Schema cannot say (it calls 1.0 an integer, and a multipleOf of 0.001
# fails on binary floats): integers written as integers, percentages with at most three decimals.
INTEGER_FIELDS = ("quantity", "attempts", "revocation_reason")
THREE_DECIMALS = ("revocation_percentage",)


def check_number_literals(where, value, report):
    def floats(text):
        return NumberText(text)

    def integers(text):
        return NumberText(text)

    try:
        event = json.loads(value, parse_float=floats, parse_int=integers)
    except ValueError:
        return
    if not isinstance(event, dict):
        return
    for field in INTEGER_FIELDS:
        number = event.get(field)
        if isinstance(number, NumberText) and not number.text.lstrip("-").isdigit():
            report.fail(f"{where}: {field} is written {number.text!r}, not as an integer")
    for field in THREE_DECIMALS:
        number = event.get(field)
        if isinstance(number, NumberText):
            whole, _, decimals = number.text.partition(".")
            if not whole.isdigit() or not decimals.isdigit() and decimals or len(decimals) > 3 or decimals.endswith("0"):
                report.fail(f"{where}: {field} is written {number.text!r}, not with at most three decimals")


def read_captures(directory, report):
    files = sorted(directory.glob("*.jsonl"))
    messages = []
    for path in files:
        with path.open(encoding="utf-8", errors="replace") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                where = f"{path.name}:{number}"
                try:
                    message = json.loads(line)
                except ValueError as error:
                    report.fail(f"{where}: not JSON ({error})")
                    continue
                if (not isinstance(message, dict) or message.get("channel") not in CHANNELS
                        or not isinstance(message.get("headers", {}), dict)
                        or not isinstance(message.get("value"), str)
                        or not isinstance(message.get("key"), (str, type(None)))):
                    report.fail(f"{where}: not a capture record (channel {'|'.join(CHANNELS)}, key, headers, value)")
                    continue
                message["where"] = where
                messages.append(message)
    return files, messages


def check_messages(directory, validators, mapping, report):
    files, messages = read_captures(directory, report)
    print(f"captured messages: {len(messages)} in {len(files)} file(s) of {directory}")
    if not messages:
        report.fail(f"--messages {directory}: no captured message (was RECEIPT_WORKER_CONTRACT_CAPTURE set for the "
                    "end-to-end tests?)")
    counts = Counter()
    by_channel = {channel: [] for channel in CHANNELS}
    for message in messages:
        by_channel[message["channel"]].append(message)

    def validate(name, instance, where):
        problem = first_error(validators[name], instance)
        if problem:
            report.fail(f"{where}: {name} {problem}")
            return False
        counts[name] += 1
        return True

    malformed_denies = set()  # job ids answered malformed_job
    for message in by_channel["results"]:
        where, headers = message["where"], message["headers"]
        validate(RESULT_HEADERS, headers, f"{where} headers")
        event_type = headers.get("ce_type")
        try:
            event = json.loads(message["value"])
        except ValueError:
            report.fail(f"{where}: the value is not JSON")
            continue
        if event_type not in mapping or mapping[event_type] not in validators:
            report.fail(f"{where}: ce_type {event_type!r} has no schema")
            continue
        validate(mapping[event_type], event, where)
        check_number_literals(where, message["value"], report)
        if not isinstance(event, dict):
            continue
        if headers.get("ce_id") != event.get("event_id"):
            report.fail(f"{where}: ce_id {headers.get('ce_id')!r} is not event_id {event.get('event_id')!r}")
        time_field = next((field for field in TIME_FIELDS if field in event), TIME_FIELDS[0])
        if headers.get("ce_time") != event.get(time_field):
            report.fail(f"{where}: ce_time {headers.get('ce_time')!r} is not {time_field} {event.get(time_field)!r}")
        # Every event is keyed by its order, but a parent's withdrawn consent (Apple names the download) and a mass
        # extension's end (Apple names the request).
        key_field = {"receipt.consent_rescinded": "app_transaction_id",
                     "receipt.extension_completed": "request_identifier",
                     "player.erased": "user_id"}.get(event_type, "order_id")
        if message["key"] != event.get(key_field):
            report.fail(f"{where}: key {message['key']!r} is not {key_field} {event.get(key_field)!r}")
        if event.get("decision") == "deny" and event.get("reason") == "malformed_job":
            malformed_denies.add(event.get("job_id"))

    malformed_letters = Counter()  # values dead-lettered as malformed_job
    truncated_sizes = set()
    unsent_answers = Counter()  # values dead-lettered as consumption_not_sent
    for message in by_channel["dlq"]:
        where, headers = message["where"], message["headers"]
        validate(DLQ_HEADERS, headers, f"{where} headers")
        if headers.get("dlq_truncated") == "true" and message["value"] != "":
            report.fail(f"{where}: a stub (dlq_truncated) with a value")
        if headers.get("dlq_reason") == "malformed_job":
            if headers.get("dlq_truncated") == "true":
                truncated_sizes.add(headers.get("dlq_original_bytes"))
            else:
                malformed_letters[message["value"]] += 1
        elif headers.get("dlq_reason") == "consumption_not_sent":
            unsent_answers[message["value"]] += 1

    for message in by_channel["notifications"]:
        where, headers = message["where"], message["headers"]
        validate(NOTIFICATION_HEADERS, headers, f"{where} headers")
        try:
            body = json.loads(message["value"])
        except ValueError:
            report.fail(f"{where}: the value is not JSON")
            continue
        if not validate(NOTIFICATION, body, where):
            continue
        if headers.get("source") == "subscription_status":
            check_status_record(where, message["key"], headers, body.get("subscriptionStatus"), report)
        else:
            check_notification(where, message["key"], headers, body["signedPayload"], report)

    unsent_invalid = 0
    unsent_valid = 0
    for message in by_channel["consumption"]:
        where = message["where"]
        try:
            problem = first_error(validators[CONSUMPTION_ANSWER], json.loads(message["value"]))
        except ValueError:
            problem = "not JSON"
        if problem is None:
            counts[CONSUMPTION_ANSWER] += 1
            if message["value"] in unsent_answers:
                unsent_valid += 1
        elif message["value"] in unsent_answers:
            unsent_invalid += 1
        else:
            report.fail(f"{where}: consumption-answer.json rejects an answer that was not dead-lettered "
                        f"consumption_not_sent (the schema is stricter than the worker): {problem}")

    def answered_malformed(message, job):
        value = message["value"]
        if value in malformed_letters or str(len(value.encode("utf-8"))) in truncated_sizes:
            return True
        job_id = job.get("job_id") if isinstance(job, dict) else None
        return isinstance(job_id, str) and job_id in malformed_denies

    rejected_answered = 0
    accepted_but_malformed = 0
    for message in by_channel["jobs"]:
        where = message["where"]
        validate(JOB_HEADERS, message["headers"], f"{where} headers")
        try:
            job = json.loads(message["value"])
            problem = first_error(validators[JOB], job)
        except ValueError:
            job, problem = None, "not JSON"
        if problem is None:
            counts[JOB] += 1
            if answered_malformed(message, job):
                accepted_but_malformed += 1
        elif answered_malformed(message, job):
            rejected_answered += 1
        else:
            report.fail(f"{where}: job.json rejects a job that was not answered malformed_job "
                        f"(the schema is stricter than the worker): {problem}")

    for name in [JOB, JOB_HEADERS, *sorted(set(mapping.values())), RESULT_HEADERS, DLQ_HEADERS, NOTIFICATION,
                 NOTIFICATION_HEADERS, CONSUMPTION_ANSWER]:
        line = f"  {name}: {counts[name]} real message(s) validated"
        if name == JOB:
            line += (f"; {rejected_answered} schema-invalid job(s), each answered malformed_job; "
                     f"{accepted_but_malformed} schema-valid job(s) answered malformed_job (information: the worker "
                     "checks more than the schema can say)")
        if name == CONSUMPTION_ANSWER:
            line += (f"; {unsent_invalid} schema-invalid answer(s), each dead-lettered consumption_not_sent; "
                     f"{unsent_valid} schema-valid answer(s) dead-lettered (information: refused by Apple, late, "
                     "or retries spent)")
        print(line)

    core = [*CORE_SCHEMAS, *(mapping[kind] for kind in CORE_EVENT_TYPES if kind in mapping)]
    for kind in CORE_EVENT_TYPES:
        if kind not in mapping:
            report.fail(f"core event type {kind} has no message in asyncapi.yaml's results channel")
    unvalidated = [name for name in core if counts[name] == 0]
    if unvalidated:
        report.fail(f"no real message validated against {', '.join(unvalidated)} (core schemas: the full test run "
                    "produces each; a capture without them proves nothing)")


def jws_payload(compact):
    """The payload of a compact JWS as JSON, decoded without verifying (the worker verified it); None if unreadable."""
    parts = compact.split(".")
    if len(parts) != 3:
        return None
    try:
        return json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return None


def check_notification(where, key, headers, signed_payload, report):
    """The headers and the key of a notification say what its signed payload says (docs/contract.md)."""
    payload = jws_payload(signed_payload)
    if not isinstance(payload, dict):
        report.fail(f"{where}: the signedPayload's payload is not a JSON object")
        return
    # Apple's data, summary (RENEWAL_EXTENSION) or externalPurchaseToken hold bundleId and environment.
    data = next((payload[k] for k in ("data", "summary", "externalPurchaseToken") if isinstance(payload.get(k), dict)), {})
    expected = {
        "notification_type": payload.get("notificationType"),
        "notification_subtype": payload.get("subtype") or "",
        "notification_uuid": payload.get("notificationUUID"),
        "bundle_id": data.get("bundleId"),
        "environment": data.get("environment"),
        "signed_date": str(int(payload["signedDate"])) if isinstance(payload.get("signedDate"), (int, float)) else None,
    }
    for header, value in expected.items():
        # signed_date is absent from records written by hand (schemas/notification-headers.json).
        if header == "signed_date" and header not in headers:
            continue
        if value is not None and headers.get(header) != value:
            report.fail(f"{where}: header {header} {headers.get(header)!r} is not the payload's {value!r}")
    transaction = jws_payload(data["signedTransactionInfo"]) if isinstance(data.get("signedTransactionInfo"), str) else None
    original = transaction.get("originalTransactionId") if isinstance(transaction, dict) else None
    expected_key = str(original) if original is not None else payload.get("notificationUUID")
    if key != expected_key:
        report.fail(f"{where}: key {key!r} is not the signed transaction's originalTransactionId, else the "
                    f"notificationUUID ({expected_key!r})")


def check_status_record(where, key, headers, status, report):
    """A subscription's status asked of Apple: keyed by its original transaction, its headers the transaction's app
    and environment, its transaction and renewal info of one subscription (docs/contract.md section 9)."""
    if not isinstance(status, dict):
        report.fail(f"{where}: a record with source subscription_status has no subscriptionStatus object")
        return
    transaction = jws_payload(status.get("signedTransactionInfo", ""))
    renewal = jws_payload(status.get("signedRenewalInfo", ""))
    if not isinstance(transaction, dict) or not isinstance(renewal, dict):
        report.fail(f"{where}: the status record's signed values are not JWS of JSON objects")
        return
    original = transaction.get("originalTransactionId")
    if key != str(original) or renewal.get("originalTransactionId") != original:
        report.fail(f"{where}: key {key!r}, the transaction's and the renewal info's original transaction differ")
    for header, value in (("bundle_id", transaction.get("bundleId")), ("environment", transaction.get("environment"))):
        if headers.get(header) != value:
            report.fail(f"{where}: header {header} {headers.get(header)!r} is not the transaction's {value!r}")
    if headers.get("notification_type") not in ("DID_RENEW", "DID_FAIL_TO_RENEW", "EXPIRED", "GRACE_PERIOD_EXPIRED"):
        report.fail(f"{where}: notification_type {headers.get('notification_type')!r} is not one a status stands for")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=pathlib.Path, default=ROOT / "docs", help="the docs directory")
    parser.add_argument("--messages", type=pathlib.Path, help="a directory of captured *.jsonl messages")
    arguments = parser.parse_args()
    if arguments.messages is not None and not arguments.messages.is_dir():
        print(f"check_contract: --messages {arguments.messages}: no such directory", file=sys.stderr)
        return 2
    report = Report()
    asyncapi = check_asyncapi(arguments.docs, report)
    check_asyncapi(arguments.docs, report, "asyncapi-client.yaml")
    validators = check_schemas(arguments.docs, report)
    for required in REQUIRED_SCHEMAS:
        if required not in validators:
            report.fail(f"schemas/{required} is missing or invalid")
    mapping = result_schemas(asyncapi, arguments.docs, validators, report)
    print("result event types: " + ", ".join(f"{kind} -> schemas/{name}" for kind, name in sorted(mapping.items())))
    if arguments.messages is not None and all(name in validators for name in REQUIRED_SCHEMAS):
        check_messages(arguments.messages, validators, mapping, report)
    status = report.finish()
    if status == 0:
        print("contract checks passed")
    return status


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Runs the code generators an integrator reaches for on the published contract, and checks what comes out.

    .deps/venv/bin/python Tests/contract/check_generators.py [--docs DIR]

1. datamodel-code-generator (pydantic v2 models, the common Python choice) on every docs/schemas/*.json: each
   schema's examples load into its model; so does each example with a field added by a later release, and, for a
   field whose values are listed (x-known-values: reason, revocation_type, ce_type, dlq_reason, environment), an
   example with a value added by a later release. A model that rejects either would break every generated
   consumer at the next release.
2. asyncapi-python's generator on docs/asyncapi-client.yaml (the backend's view) and docs/asyncapi.yaml (the
   worker's): every result message comes out as a typed model (a pydantic class with the event's fields, not
   `Any`), the client's results subscriber is typed by the five of them, and each example of each result event
   loads into its message's model, with an added field too.

Exit status: 0 all good, 1 a check failed, 2 usage.
"""

import argparse
import copy
import importlib.util
import json
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BIN = pathlib.Path(sys.executable).parent
ADDED_FIELD = "field_added_by_a_later_release"
ADDED_VALUE = "VALUE_ADDED_BY_A_LATER_RELEASE"
# The result messages of the AsyncAPI documents: message name -> its payload schema file.
RESULT_MESSAGES = {
    "ReceiptGranted": "receipt.granted.json",
    "ReceiptDenied": "receipt.denied.json",
    "ReceiptRevoked": "receipt.revoked.json",
    "ReceiptReinstated": "receipt.reinstated.json",
    "ReceiptConsumptionRequested": "receipt.consumption_requested.json",
    "ReceiptRenewed": "receipt.renewed.json",
    "ReceiptExpired": "receipt.expired.json",
    "ReceiptBillingIssue": "receipt.billing_issue.json",
    "ReceiptRenewalChanged": "receipt.renewal_changed.json",
    "ReceiptUnclaimed": "receipt.unclaimed.json",
    "ReceiptConsentRescinded": "receipt.consent_rescinded.json",
    "ReceiptExtensionFailed": "receipt.extension_failed.json",
    "ReceiptExtensionCompleted": "receipt.extension_completed.json",
    "PlayerErased": "player.erased.json",
}

problems = []


def fail(text):
    problems.append(text)


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=[str(path.parent)]
                                                  if path.name == "__init__.py" else None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run(command, what):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"{what}: exit {done.returncode}: {(done.stderr or done.stdout)[-600:]}")
        return False
    return True


def variants(schema, example):
    """The example as published, with a field a later release adds, and with a value it adds to each list."""
    yield "as published", example
    if not isinstance(example, dict):
        return
    yield "with an added field", {**example, ADDED_FIELD: {"nested": [1, "two"]}}
    for key, prop in (schema.get("properties") or {}).items():
        if "x-known-values" in prop and isinstance(example.get(key), str):
            changed = copy.deepcopy(example)
            changed[key] = ADDED_VALUE
            yield f"with a new {key} value", changed


def loads(model, instance):
    try:
        model.model_validate(instance)
        return None
    except Exception as error:  # pydantic's ValidationError, or anything the generated code raises
        return str(error).splitlines()[0:3]


def check_schema_models(docs, work):
    checked = 0
    for path in sorted((docs / "schemas").glob("*.json")):
        schema = json.loads(path.read_text())
        output = work / f"model_{path.stem.replace('.', '_').replace('-', '_')}.py"
        if not run([str(BIN / "datamodel-codegen"), "--input", str(path), "--input-file-type", "jsonschema",
                    "--output", str(output), "--output-model-type", "pydantic_v2.BaseModel",
                    "--class-name", schema["title"], "--disable-timestamp"],
                   f"datamodel-codegen on schemas/{path.name}"):
            continue
        module = load_module(output, output.stem)
        model = getattr(module, schema["title"], None)
        if model is None:
            fail(f"datamodel-codegen on schemas/{path.name}: no model {schema['title']}")
            continue
        for index, example in enumerate(schema.get("examples", [])):
            for label, instance in variants(schema, example):
                error = loads(model, instance)
                checked += 1
                if error:
                    fail(f"schemas/{path.name}: its generated model rejects example {index} {label}: {error}")
    print(f"datamodel-codegen: {len(list((docs / 'schemas').glob('*.json')))} schemas, {checked} instance(s) loaded "
          "(examples, with an added field, with new values)")


def check_asyncapi(docs, work, document):
    output = work / f"generated_{document.stem.replace('-', '_')}"
    if not run([str(BIN / "asyncapi-python-codegen"), str(docs / document.name), str(output)],
               f"asyncapi-python-codegen on {document.name}"):
        return
    sys.path.insert(0, str(work))
    package = output.name
    messages = load_module(output / "messages" / "json" / "__init__.py", f"{package}_messages")
    router_text = (output / "router.py").read_text()
    from pydantic import BaseModel

    for name, file in RESULT_MESSAGES.items():
        model = getattr(messages, name, None)
        if not (isinstance(model, type) and issubclass(model, BaseModel)) or "event_id" not in model.model_fields:
            fail(f"{document.name}: result message {name} came out untyped ({model!r}), not a model with its fields")
            continue
        schema = json.loads((docs / "schemas" / file).read_text())
        for index, example in enumerate(schema.get("examples", [])):
            for label, instance in variants(schema, example):
                error = loads(model, instance)
                if error:
                    fail(f"{document.name}: generated {name} rejects example {index} of {file} {label}: {error}")
    if "json.Any" in router_text or "[Any]" in router_text:
        fail(f"{document.name}: a generated router carries untyped messages (json.Any)")
    if document.name == "asyncapi-client.yaml":
        subscriber = router_text[router_text.find("class ReceiveresultsRouter"):][:1200]
        if not all(f"json.{name}" in subscriber for name in RESULT_MESSAGES):
            fail(f"{document.name}: the results subscriber is not typed by every result message: {subscriber}")
        if "class SendjobsRouter(Publisher[json.Job])" not in router_text:
            fail(f"{document.name}: no typed publisher of jobs (the client's view sends them)")
    print(f"asyncapi-python-codegen on {document.name}: {len(RESULT_MESSAGES)} result messages typed, "
          "examples loaded with added fields and values")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=pathlib.Path, default=ROOT / "docs")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        work = pathlib.Path(directory)
        check_schema_models(arguments.docs, work)
        for document in ("asyncapi-client.yaml", "asyncapi.yaml"):
            check_asyncapi(arguments.docs, work, arguments.docs / document)
    if problems:
        print(f"FAILED: {len(problems)} problem(s); the first 10:")
        for problem in problems[:10]:
            print(f"  - {problem}")
        sys.exit(1)
    print("generator checks passed")


if __name__ == "__main__":
    main()

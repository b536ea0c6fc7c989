"""Validates custom resources (KEDA's, the Prometheus Operator's) against the CRDs vendored in Tests/deploy/crds/,
each at a pinned release (the comment at the top of each file says which, and where from).

The CRD's openAPIV3Schema is read as the API server reads it, turned into a JSON Schema for `jsonschema`:
- an object that lists its properties accepts no other field (the API server's strict field validation, which
  kubectl applies by default, refuses an unknown field), unless it has x-kubernetes-preserve-unknown-fields;
- x-kubernetes-int-or-string accepts an integer or a string; nullable accepts null;
- OpenAPI 3.0's boolean exclusiveMinimum/exclusiveMaximum become JSON Schema's numbers;
- metadata is checked as the API server checks an object's metadata (a DNS name, string labels and
  annotations; the fields a manifest may set);
- x-kubernetes-validations (CEL rules) are not evaluated: no CEL interpreter here.

    schemas = load(folder)            # {(apiVersion, kind): JSON Schema}
    errors(schemas, resource)         # [] when valid; None when no vendored CRD has the kind
"""
import os
import yaml

METADATA = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "maxLength": 253, "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"},
        "namespace": {"type": "string", "maxLength": 63, "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
        "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 63}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}

DROPPED = {"x-kubernetes-validations", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
           "x-kubernetes-map-type", "x-kubernetes-embedded-resource", "x-kubernetes-preserve-unknown-fields",
           "x-kubernetes-int-or-string", "nullable", "description", "example", "externalDocs"}


def json_schema(node):
    """One openAPIV3Schema node as JSON Schema (draft 2020-12)."""
    if not isinstance(node, dict):
        return node
    out = {k: v for k, v in node.items() if k not in DROPPED}
    for key in ("properties", "patternProperties"):
        if key in out:
            out[key] = {name: json_schema(child) for name, child in out[key].items()}
    for key in ("items", "not"):
        if isinstance(out.get(key), dict):
            out[key] = json_schema(out[key])
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = json_schema(out["additionalProperties"])
    for key in ("anyOf", "oneOf", "allOf"):
        if key in out:
            out[key] = [json_schema(child) for child in out[key]]
    for bound, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if out.get(exclusive) is True:
            out[exclusive] = out.pop(bound)
        elif out.get(exclusive) is False:
            del out[exclusive]
    if node.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
        out.pop("anyOf", None)
    if (out.get("type") == "object" and "properties" in out and "additionalProperties" not in out
            and not node.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    if node.get("nullable"):
        out = {"anyOf": [out, {"type": "null"}]}
    return out


def load(folder):
    schemas = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".yaml"):
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for crd in yaml.safe_load_all(f):
                if not crd or crd.get("kind") != "CustomResourceDefinition":
                    continue
                group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
                for version in crd["spec"]["versions"]:
                    if not version.get("served"):
                        continue
                    schema = json_schema(version["schema"]["openAPIV3Schema"])
                    api_version = f"{group}/{version['name']}"
                    schema["properties"]["metadata"] = METADATA
                    schema["properties"]["apiVersion"] = {"const": api_version}
                    schema["properties"]["kind"] = {"const": kind}
                    schema["required"] = sorted(set(schema.get("required", [])) | {"apiVersion", "kind", "metadata"})
                    schema["additionalProperties"] = False
                    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
                    schemas[(api_version, kind)] = schema
    return schemas


def errors(schemas, resource):
    import jsonschema
    schema = schemas.get((resource.get("apiVersion"), resource.get("kind")))
    if schema is None:
        return None
    return [f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in jsonschema.Draft202012Validator(schema).iter_errors(resource)]

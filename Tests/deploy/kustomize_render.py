"""Renders deploy/kubernetes/kustomization.yaml as `kubectl kustomize` (kustomize v5) does, for the parts
that kustomization uses and no more: resources (files in the folder), namespace, configMapGenerator
(files and literals, with kustomize's content-hash suffix) and the rewriting of references to generated
ConfigMaps in pod templates, and images. Any other field of the kustomization is refused rather than
ignored, so that the check never passes on output kustomize would not produce.

    render(folder) -> list of objects (dicts)

check_deploy.py compares this with `kubectl kustomize` where kubectl is installed."""
import hashlib, json, os
import yaml

SUPPORTED = {"apiVersion", "kind", "namespace", "resources", "configMapGenerator", "images", "replacements", "generatorOptions"}

# Kinds without a namespace, among those a kustomization like ours can hold.
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                  "PriorityClass", "StorageClass", "PersistentVolume", "ValidatingWebhookConfiguration",
                  "MutatingWebhookConfiguration", "APIService"}

POD_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}


class RenderError(Exception):
    pass


def go_json(value):
    """json.Marshal of Go: sorted keys, no spaces, UTF-8 kept, and <, >, &, U+2028, U+2029 escaped."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for raw, escaped in [("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")]:
        text = text.replace(raw, escaped)
    return text


def content_hash(config_map):
    """kustomize's name suffix of a generated ConfigMap (api/hasher, v5): sha256 of the JSON of kind, name,
    data and binaryData (only when present), its first 10 hex digits with 0, 1, 3, a, e replaced so that
    no word forms. kustomize v5 looks the name up with the single path element "metadata/name", which
    finds nothing: the name enters the hash as "" (checked against kubectl kustomize 5.5)."""
    encoded = {"kind": "ConfigMap", "name": "", "data": config_map.get("data", "")}
    if isinstance(config_map.get("binaryData"), dict):
        encoded["binaryData"] = config_map["binaryData"]
    digest = hashlib.sha256(go_json(encoded).encode()).hexdigest()[:10]
    return digest.translate(str.maketrans({"0": "g", "1": "h", "3": "k", "a": "m", "e": "t"}))


def generate_config_map(folder, spec):
    unknown = set(spec) - {"name", "files", "literals"}
    if unknown:
        raise RenderError(f"configMapGenerator fields not supported by this renderer: {sorted(unknown)}")
    data = {}
    for entry in spec.get("files", []):
        key, _, path = entry.partition("=") if "=" in entry else (os.path.basename(entry), "", entry)
        full = os.path.normpath(os.path.join(folder, path))
        if not full.startswith(os.path.abspath(folder) + os.sep):
            raise RenderError(f"{entry}: kustomize loads files only from the kustomization's folder")
        with open(full, encoding="utf-8") as f:
            data[key] = f.read()
    for literal in spec.get("literals", []):
        key, _, value = literal.partition("=")
        data[key] = value
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": spec["name"]}, "data": data}
    return config_map


def split_image(image):
    """name, tag, digest of an image reference (a registry port's colon is not a tag)."""
    name, digest = (image.split("@", 1) + [None])[:2]
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = None
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
    return name, tag, digest


def set_image(container, images):
    name, tag, digest = split_image(container["image"])
    for image in images:
        if image["name"] != name:
            continue
        unknown = set(image) - {"name", "newName", "newTag", "digest"}
        if unknown:
            raise RenderError(f"images fields not supported by this renderer: {sorted(unknown)}")
        name = image.get("newName", name)
        if "digest" in image:
            tag, digest = None, image["digest"]
        elif "newTag" in image:
            tag, digest = str(image["newTag"]), None
        container["image"] = name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")
        return


def pod_spec(resource):
    if resource.get("kind") in POD_TEMPLATE_KINDS:
        return resource.get("spec", {}).get("template", {}).get("spec")
    if resource.get("kind") == "CronJob":
        return resource.get("spec", {}).get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec")
    return None


def rename_config_map_references(spec, renamed):
    """The places a pod spec names a ConfigMap (kustomize's namereference configuration for ConfigMap)."""
    def rename(holder, field):
        if holder and holder.get(field) in renamed:
            holder[field] = renamed[holder[field]]

    for volume in spec.get("volumes", []):
        rename(volume.get("configMap"), "name")
        for source in volume.get("projected", {}).get("sources", []):
            rename(source.get("configMap"), "name")
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        for source in container.get("envFrom", []):
            rename(source.get("configMapRef"), "name")
        for variable in container.get("env", []):
            rename(variable.get("valueFrom", {}).get("configMapKeyRef"), "name")


def field_values(node, path):
    """The (holder, key) pairs a kustomize fieldPath names: dotted, with `*` for every item of a list."""
    head, _, rest = path.partition(".")
    items = node if head == "*" and isinstance(node, list) else None
    if items is not None:
        return [pair for item in items for pair in field_values(item, rest)] if rest else []
    if not isinstance(node, dict) or head not in node:
        return []
    return field_values(node[head], rest) if rest else [(node, head)]


def apply_replacements(objects, replacements, renamed):
    """kustomize's replacements, the subset used here: a source field of one object (by kind and name) copied
    into target fields (by kind), whole or into one part of the target split by `options.delimiter`."""
    for replacement in replacements:
        source = replacement["source"]
        names = {source["name"], renamed.get(source["name"], source["name"])}
        origin = next((o for o in objects if o.get("kind") == source["kind"] and o["metadata"]["name"] in names), None)
        if origin is None:
            raise RenderError(f"replacement source {source['kind']}/{source['name']} not found")
        pairs = field_values(origin, source["fieldPath"])
        if len(pairs) != 1:
            raise RenderError(f"replacement source field {source['fieldPath']} not found")
        value = pairs[0][0][pairs[0][1]]
        for target in replacement["targets"]:
            kind = target["select"]["kind"]
            options = target.get("options", {})
            for resource in (o for o in objects if o.get("kind") == kind):
                for path in target["fieldPaths"]:
                    for holder, key in field_values(resource, path):
                        if "delimiter" in options:
                            parts = str(holder[key]).split(options["delimiter"])
                            parts[options.get("index", 0)] = value
                            holder[key] = options["delimiter"].join(parts)
                        else:
                            holder[key] = value


def render(folder):
    folder = os.path.abspath(folder)
    with open(os.path.join(folder, "kustomization.yaml"), encoding="utf-8") as f:
        kustomization = yaml.safe_load(f)
    unknown = set(kustomization) - SUPPORTED
    if unknown:
        raise RenderError(f"kustomization fields not supported by this renderer: {sorted(unknown)}")

    objects = []
    for name in kustomization.get("resources", []):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            raise RenderError(f"resource {name}: only files in the folder are supported")
        with open(path, encoding="utf-8") as f:
            objects += [d for d in yaml.safe_load_all(f) if d]

    generated = [generate_config_map(folder, spec) for spec in kustomization.get("configMapGenerator", [])]
    objects = generated + objects

    namespace = kustomization.get("namespace")
    if namespace:
        for resource in objects:
            if resource.get("kind") not in CLUSTER_SCOPED:
                resource.setdefault("metadata", {})["namespace"] = namespace

    hashing = not kustomization.get("generatorOptions", {}).get("disableNameSuffixHash", False)
    # The hash is taken once the generated ConfigMap is final (kustomize hashes after the namespace
    # transformer, which does not enter the hash), then references follow the new name.
    renamed = {}
    for config_map in generated:
        base = config_map["metadata"]["name"]
        config_map["metadata"]["name"] = f"{base}-{content_hash(config_map)}" if hashing else base
        renamed[base] = config_map["metadata"]["name"]
    apply_replacements(objects, kustomization.get("replacements", []), renamed)
    for resource in objects:
        spec = pod_spec(resource)
        if spec is None:
            continue
        rename_config_map_references(spec, renamed)
        for container in spec.get("containers", []) + spec.get("initContainers", []):
            set_image(container, kustomization.get("images", []))
    return objects


def identity(resource):
    return (resource.get("kind"), resource.get("metadata", {}).get("namespace"), resource["metadata"]["name"])


if __name__ == "__main__":
    import sys
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "deploy", "kubernetes")
    print(yaml.safe_dump_all(render(folder), sort_keys=True), end="")

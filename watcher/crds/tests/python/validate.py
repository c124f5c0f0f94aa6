"""Validates Kubernetes objects against CRD schemas with the `jsonschema` package.

Reads JSON on stdin: {"schemas": {"<apiVersion>/<kind>": <openAPIV3Schema>}, "documents":
[{"id": str, "object": {...}}]}; prints JSON on stdout: [{"id": str, "errors": [{"path": str,
"message": str}]}], one entry per document, in order.

Each openAPIV3Schema (OpenAPI 3.0, structural) becomes a JSON Schema (draft 4) the way the API
server reads it with strict field validation:
- `nullable: true` allows null;
- `x-kubernetes-int-or-string: true` means integer or string;
- an object with `properties` and neither `additionalProperties` nor
  `x-kubernetes-preserve-unknown-fields` rejects unknown fields (the server would prune them;
  `kubectl apply --validate=strict` rejects them);
- `x-kubernetes-list-type: set` lists must not repeat items;
- the root object also allows `apiVersion`, `kind` and `metadata`.
CEL rules (`x-kubernetes-validations`) are not evaluated here.
"""

import json
import sys

import jsonschema

SKIP = {"description", "default", "example", "title", "format", "nullable", "x-kubernetes-validations",
        "x-kubernetes-list-map-keys", "x-kubernetes-map-type", "x-kubernetes-embedded-resource"}


def convert(schema, root=False):
    out = {}
    for key, value in schema.items():
        if key in SKIP or key.startswith("x-kubernetes-"):
            continue
        if key == "properties":
            out[key] = {name: convert(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = convert(value)
        elif key in ("anyOf", "oneOf", "allOf"):
            out[key] = [convert(sub) for sub in value]
        else:
            out[key] = value
    if schema.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    if root:
        out.setdefault("properties", {})
        out["properties"].setdefault("apiVersion", {"type": "string"})
        out["properties"].setdefault("kind", {"type": "string"})
        out["properties"].setdefault("metadata", {"type": "object"})
    if ("properties" in out and "additionalProperties" not in out
            and not schema.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    if schema.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = list(out["enum"]) + [None]
    return out


def path_of(parts):
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def describe(error):
    """One error per offending field, named by its path from the object's root."""
    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {})
        return [{"path": path_of(path + [name]), "message": f"unknown field \"{name}\""}
                for name in sorted(error.instance) if name not in known]
    if error.validator == "oneOf" and all(set(s) == {"required"} for s in error.validator_value):
        names = [n for s in error.validator_value for n in s["required"]]
        present = [n for n in names if n in error.instance]
        fields = present or names
        return [{"path": path_of(path + [n]),
                 "message": f"exactly one of {names} must be set, found {present}"} for n in fields]
    if error.validator == "required":
        missing = [n for n in error.validator_value if n not in error.instance]
        return [{"path": path_of(path + [n]), "message": f"required field \"{n}\" is missing"}
                for n in missing]
    return [{"path": path_of(path), "message": error.message}]


def main():
    request = json.load(sys.stdin)
    validators = {}
    for key, schema in request["schemas"].items():
        converted = convert(schema, root=True)
        jsonschema.Draft4Validator.check_schema(converted)
        validators[key] = jsonschema.Draft4Validator(converted)
    results = []
    for doc in request["documents"]:
        obj = doc["object"]
        key = f"{obj.get('apiVersion')}/{obj.get('kind')}"
        validator = validators.get(key)
        if validator is None:
            errors = [{"path": "kind", "message": f"no schema for {key}"}]
        else:
            errors = [d for e in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
                      for d in describe(e)]
        results.append({"id": doc["id"], "errors": errors})
    json.dump(results, sys.stdout, indent=1)


if __name__ == "__main__":
    main()

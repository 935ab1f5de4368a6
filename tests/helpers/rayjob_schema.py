"""KubeRay's published RayJob CRD schema (ray.io/v1), as a jsonschema validator.

The schema is the CRD's own ``openAPIV3Schema`` (tests/data/kuberay_rayjob_v1.yaml, with its source
commit), its embedded Kubernetes core types from Kubernetes' OpenAPI (tests/data/k8s_core_defs.json.gz).
The OpenAPI v3 keys are adapted the way the API server reads them: an object that lists its properties
refuses others unless it preserves unknown fields (``kubectl apply`` validates strictly), ``nullable``
admits null, a quantity has the CRD's pattern, and the resource's own metadata is an ObjectMeta; the
``x-kubernetes-*`` keys are left for jsonschema to ignore (``int-or-string`` comes with its ``anyOf``).
"""
from __future__ import annotations

import copy
import functools
import gzip
import json
from pathlib import Path

import jsonschema
import yaml

DATA = Path(__file__).resolve().parents[1] / "data"
CRD_FILE = DATA / "kuberay_rayjob_v1.yaml"
K8S_DEFS_FILE = DATA / "k8s_core_defs.json.gz"


def _adapt(node):
    """The API server's reading of a structural schema node, in jsonschema's terms."""
    if isinstance(node, list):
        return [_adapt(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _adapt(v) for k, v in node.items()}
    closed = "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields")
    if closed and "additionalProperties" not in out:
        out["additionalProperties"] = False
    if out.pop("nullable", False) and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


@functools.lru_cache(maxsize=1)
def rayjob_schema() -> dict:
    crd = yaml.safe_load(CRD_FILE.read_text())
    schema = copy.deepcopy(crd["openAPIV3Schema"])
    schema["properties"]["metadata"] = {"$ref": "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
    with gzip.open(K8S_DEFS_FILE, "rt") as f:
        schema["$defs"] = json.load(f)["$defs"]
    # the CRD renders every resource.Quantity with its pattern (Kubernetes' own OpenAPI has none)
    schema["$defs"]["io.k8s.apimachinery.pkg.api.resource.Quantity"] = crd["x-quantity"]
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return _adapt(schema)


@functools.lru_cache(maxsize=1)
def validator() -> jsonschema.Draft202012Validator:
    schema = rayjob_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors(manifest: dict) -> list[str]:
    """Every way ``manifest`` breaks the CRD, one line each (path: message); empty when it is valid."""
    found = sorted(validator().iter_errors(manifest), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in found]

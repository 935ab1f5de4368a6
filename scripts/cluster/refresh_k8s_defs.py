"""Write tests/data/k8s_core_defs.json.gz: the Kubernetes core types KubeRay's RayJob CRD embeds.

KubeRay's CRD (tests/data/kuberay_rayjob_v1.yaml) inlines the Kubernetes types of the pod templates,
the head service and the autoscaler's container fields; the transcription keeps them as ``$ref`` to
their definitions, taken here from Kubernetes' published OpenAPI schema as the PyPI package
``kubernetes-validate`` ships it (strict: unknown fields refused, as ``kubectl apply`` does). Only the
referenced types and what they reference are kept, without descriptions.

    pip install kubernetes-validate==1.37.0 && python scripts/cluster/refresh_k8s_defs.py
"""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

K8S_VERSION = "v1.31.0"  # the core API KubeRay's CRD of tests/data/kuberay_rayjob_v1.yaml was generated against
ROOTS = ["io.k8s.api.core.v1.PodSpec", "io.k8s.api.core.v1.ServiceSpec", "io.k8s.api.core.v1.ServiceStatus",
         "io.k8s.api.core.v1.EnvVar", "io.k8s.api.core.v1.EnvFromSource", "io.k8s.api.core.v1.ResourceRequirements",
         "io.k8s.api.core.v1.SecurityContext", "io.k8s.api.core.v1.VolumeMount",
         "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "io.k8s.apimachinery.pkg.apis.meta.v1.Condition"]
OUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "k8s_core_defs.json.gz"


def _strip(node):
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k not in ("description", "x-kubernetes-group-version-kind")}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _refs(node, out: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            out.add(ref.removeprefix("#/$defs/"))
        for v in node.values():
            _refs(v, out)
    elif isinstance(node, list):
        for v in node:
            _refs(v, out)


def closure(defs: dict, roots: list[str]) -> dict:
    keep, todo = {}, list(roots)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep[name] = _strip(defs[name])
        found: set[str] = set()
        _refs(keep[name], found)
        todo.extend(found - set(keep))
    return dict(sorted(keep.items()))


def main() -> int:
    from importlib.metadata import version
    from importlib.util import find_spec

    package = Path(find_spec("kubernetes_validate").submodule_search_locations[0])  # its schemas, not its code
    folder = package / "kubernetes-json-schema" / f"{K8S_VERSION}-local-strict"
    defs = json.loads((folder / "_definitions.json").read_text())["$defs"]
    doc = {"source": f"Kubernetes {K8S_VERSION} OpenAPI, strict, from PyPI kubernetes-validate "
                     f"{version('kubernetes-validate')} (Apache-2.0), descriptions removed",
           "$defs": closure(defs, ROOTS)}
    with gzip.GzipFile(OUT, "wb", mtime=0) as f:
        f.write(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())
    print(f"{OUT}: {len(doc['$defs'])} definitions")
    return 0


if __name__ == "__main__":
    sys.exit(main())

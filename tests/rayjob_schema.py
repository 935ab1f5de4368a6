"""A JSON Schema of the KubeRay ``RayJob`` (``ray.io/v1``) fields, and of the Kubernetes pod-template
fields inside it, that a gapfuzz manifest may use: names and types as the CRD and the core API define
them, unknown keys refused (a misspelt ``replica`` is an error, as ``kubectl apply`` would make it)."""
from __future__ import annotations

_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_QUANTITY = {"oneOf": [{"type": "integer"}, {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?([KMGTPE]i?|[mk])?$"}]}
_OBJ = {"type": "object"}
_OBJ_LIST = {"type": "array", "items": {"type": "object"}}
_INT = {"type": "integer", "minimum": 0}


def _closed(required: list[str], **properties) -> dict:
    return {"type": "object", "additionalProperties": False, "required": required, "properties": properties}


RESOURCES = _closed([], limits={"type": "object", "additionalProperties": _QUANTITY},
                    requests={"type": "object", "additionalProperties": _QUANTITY}, claims=_OBJ_LIST)

CONTAINER = _closed(
    ["name"], name={"type": "string"}, image={"type": "string"}, command={"type": "array", "items": {"type": "string"}},
    args={"type": "array", "items": {"type": "string"}}, workingDir={"type": "string"}, ports=_OBJ_LIST,
    env={"type": "array", "items": _closed(["name"], name={"type": "string"}, value={"type": "string"},
                                           valueFrom=_OBJ)},
    envFrom=_OBJ_LIST, resources=RESOURCES, volumeMounts={"type": "array", "items": _closed(
        ["name", "mountPath"], name={"type": "string"}, mountPath={"type": "string"}, readOnly={"type": "boolean"},
        subPath={"type": "string"})},
    imagePullPolicy={"enum": ["Always", "IfNotPresent", "Never"]}, securityContext=_OBJ, lifecycle=_OBJ,
    livenessProbe=_OBJ, readinessProbe=_OBJ, startupProbe=_OBJ, volumeDevices=_OBJ_LIST,
    terminationMessagePath={"type": "string"}, terminationMessagePolicy={"type": "string"})

POD_SPEC = _closed(
    ["containers"], containers={"type": "array", "minItems": 1, "items": CONTAINER},
    initContainers={"type": "array", "items": CONTAINER}, volumes={"type": "array", "items": {
        "type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}},
    nodeSelector=_STR_MAP, tolerations=_OBJ_LIST, affinity=_OBJ, serviceAccountName={"type": "string"},
    imagePullSecrets=_OBJ_LIST, restartPolicy={"enum": ["Always", "OnFailure", "Never"]},
    runtimeClassName={"type": "string"}, priorityClassName={"type": "string"}, securityContext=_OBJ,
    hostNetwork={"type": "boolean"}, schedulerName={"type": "string"})

POD_TEMPLATE = _closed(["spec"], metadata=_closed([], labels=_STR_MAP, annotations=_STR_MAP, name={"type": "string"}),
                       spec=POD_SPEC)

HEAD_GROUP = _closed(["template"], rayStartParams=_STR_MAP, template=POD_TEMPLATE,
                     serviceType={"enum": ["ClusterIP", "NodePort", "LoadBalancer"]}, enableIngress={"type": "boolean"},
                     headService=_OBJ)

WORKER_GROUP = _closed(["groupName", "template"],
                       groupName={"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
                       replicas=_INT, minReplicas=_INT, maxReplicas=_INT, rayStartParams=_STR_MAP,
                       template=POD_TEMPLATE, scaleStrategy=_OBJ, numOfHosts={"type": "integer", "minimum": 1},
                       suspend={"type": "boolean"}, idleTimeoutSeconds={"type": "integer"})

RAY_CLUSTER_SPEC = _closed(["headGroupSpec"], rayVersion={"type": "string"},
                           enableInTreeAutoscaling={"type": "boolean"},
                           autoscalerOptions=_OBJ, headGroupSpec=HEAD_GROUP,
                           workerGroupSpecs={"type": "array", "items": WORKER_GROUP},
                           headServiceAnnotations=_STR_MAP, suspend={"type": "boolean"},
                           gcsFaultToleranceOptions=_OBJ, managedBy={"type": "string"})

RAYJOB = _closed(
    ["apiVersion", "kind", "metadata", "spec"], apiVersion={"const": "ray.io/v1"}, kind={"const": "RayJob"},
    metadata={"type": "object", "required": ["name"], "properties": {"name": {"type": "string"},
                                                                      "namespace": {"type": "string"}}},
    spec=_closed(["entrypoint"], entrypoint={"type": "string", "minLength": 1}, rayClusterSpec=RAY_CLUSTER_SPEC,
                 clusterSelector=_STR_MAP, shutdownAfterJobFinishes={"type": "boolean"},
                 ttlSecondsAfterFinished=_INT, activeDeadlineSeconds=_INT, backoffLimit=_INT,
                 runtimeEnvYAML={"type": "string"}, jobId={"type": "string"},
                 submissionMode={"enum": ["K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"]},
                 submitterPodTemplate=POD_TEMPLATE, submitterConfig=_OBJ, entrypointNumCpus={"type": "number"},
                 entrypointNumGpus={"type": "number"}, entrypointResources={"type": "string"}, metadata=_STR_MAP,
                 suspend={"type": "boolean"}, managedBy={"type": "string"}, deletionStrategy=_OBJ),
    status=_OBJ)

"""deploy/k8s: object structure, the Kubernetes OpenAPI schemas (strict: unknown fields fail),
GPU scheduling, probes, and `kubectl kustomize` where kubectl exists (no cluster needed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.sources import K8S, containers, k8s_documents, k8s_objects, load_yaml, pod_spec

# The oldest Kubernetes still commonly run, and the newest the schemas know.
KUBERNETES_VERSIONS = ["1.30", "1.37"]
OBJECTS = k8s_objects()


def by_kind(kind: str) -> list[dict[str, Any]]:
    return [obj for _, obj in OBJECTS if obj["kind"] == kind]


def deployment(name: str) -> dict[str, Any]:
    (found,) = [d for d in by_kind("Deployment") if d["metadata"]["name"] == name]
    return found


def main_container(obj: dict[str, Any]) -> dict[str, Any]:
    return containers(obj, include_init=False)[0]


def gpu_workers() -> list[dict[str, Any]]:
    return [d for d in by_kind("Deployment") + by_kind("DaemonSet")
            if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "gpu-worker"]  # fmt: skip


def test_every_object_has_api_version_kind_and_metadata() -> None:
    assert OBJECTS
    for path, obj in OBJECTS:
        assert obj.get("apiVersion") and obj.get("kind"), path.name
        assert obj.get("metadata", {}).get("name"), f"{path.name}: {obj['kind']} without a name"
        labels = obj["metadata"].get("labels", {})
        if obj["kind"] != "Namespace":
            assert labels.get("app.kubernetes.io/name") == "kernelfarm", f"{path.name}: {obj['metadata']['name']}"


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_objects_match_the_kubernetes_schema(version: str) -> None:
    validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (dev extra) not installed")
    failures = []
    for path, obj in OBJECTS:
        try:
            validate.validate(obj, version, strict=True)
        except validate.ValidationError as error:
            failures.append(f"{path.name}: {obj['kind']}/{obj['metadata']['name']}: "
                            f"{'.'.join(map(str, error.path))}: {error.message}")  # fmt: skip
    assert not failures, "\n".join(failures)


def test_strict_schema_check_catches_a_misspelt_field() -> None:
    validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (dev extra) not installed")
    broken = yaml.safe_load(yaml.safe_dump(deployment("kernelfarm-api")))
    broken["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {"httpGet": {"path": "/ready"}}
    with pytest.raises(validate.ValidationError):
        validate.validate(broken, KUBERNETES_VERSIONS[-1], strict=True)


def test_selectors_match_their_pod_templates() -> None:
    for obj in by_kind("Deployment") + by_kind("DaemonSet"):
        selector = obj["spec"]["selector"]["matchLabels"]
        labels = obj["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items(), obj["metadata"]["name"]
    api_labels = deployment("kernelfarm-api")["spec"]["template"]["metadata"]["labels"]
    for service in by_kind("Service"):
        assert service["spec"]["selector"].items() <= api_labels.items()


def test_api_probes_and_service() -> None:
    api = main_container(deployment("kernelfarm-api"))
    assert api["command"][:2] == ["kernelfarm", "serve-api"]
    port = int(api["command"][api["command"].index("--port") + 1])
    ports = {p["name"]: p["containerPort"] for p in api["ports"]}
    assert ports["http"] == port
    assert api["livenessProbe"]["httpGet"]["path"] == "/health"
    assert api["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert api["startupProbe"]["httpGet"]["path"] == "/health"
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert api[probe]["httpGet"]["port"] in ("http", port)
    (service,) = by_kind("Service")
    assert service["spec"]["ports"][0]["targetPort"] in ("http", port)


def test_every_long_running_container_has_probes_and_resources() -> None:
    for obj in by_kind("Deployment") + by_kind("DaemonSet"):
        for container in containers(obj, include_init=False):
            name = f"{obj['metadata']['name']}/{container['name']}"
            assert "livenessProbe" in container and "readinessProbe" in container, name
            assert container["resources"]["requests"] and container["resources"]["limits"], name
    for obj in by_kind("Deployment") + by_kind("DaemonSet") + by_kind("Job"):
        for container in containers(obj):
            assert container.get("resources", {}).get("requests"), f"{obj['metadata']['name']}/{container['name']}"


def test_gpu_workers_request_one_gpu_on_a_product_labelled_pool() -> None:
    workers = gpu_workers()
    assert len(workers) >= 2, "expected one worker Deployment per GPU node pool"
    products = set()
    for worker in workers:
        spec = pod_spec(worker)
        assert spec is not None
        name = worker["metadata"]["name"]
        product = spec["nodeSelector"]["nvidia.com/gpu.product"]
        assert product not in products, f"{name}: two pools select {product}"
        products.add(product)
        assert any(t["key"] == "nvidia.com/gpu" for t in spec.get("tolerations", [])), name
        container = main_container(worker)
        # One process per GPU: one GPU per pod, and it is device 0 inside the pod.
        assert container["resources"]["limits"]["nvidia.com/gpu"] == 1, name
        assert container["resources"]["requests"]["nvidia.com/gpu"] == 1, name
        argv = container["command"]
        assert argv[:2] == ["kernelfarm", "worker"] and argv[argv.index("--backend") + 1] == "cuda", name
        assert argv[argv.index("--gpu") + 1] == "0", name
        for probe in ("livenessProbe", "readinessProbe"):
            assert container[probe]["exec"]["command"][:2] == ["kernelfarm-healthcheck", "worker"], name
        # Surging would need a spare GPU that a full pool does not have.
        if worker["kind"] == "Deployment":
            assert worker["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == 0, name


def test_one_coordinator_replaced_not_overlapped() -> None:
    tuner = deployment("kernelfarm-tuner")
    # Its housekeeping schedule runs inside it: two replicas would run two schedules.
    assert tuner["spec"]["replicas"] == 1
    assert tuner["spec"]["strategy"]["type"] == "Recreate"
    assert main_container(tuner)["command"][:2] == ["kernelfarm", "coordinator"]


def test_migration_is_a_job_and_new_pods_wait_for_the_schema() -> None:
    (job,) = by_kind("Job")
    container = main_container(job)
    assert container["command"] == ["kernelfarm", "db", "upgrade"]
    assert pod_spec(job)["restartPolicy"] == "Never"  # type: ignore[index]
    for obj in by_kind("Deployment"):
        init = pod_spec(obj).get("initContainers", [])  # type: ignore[union-attr]
        assert any(c["command"][:2] == ["kernelfarm-healthcheck", "schema"] for c in init), obj["metadata"]["name"]


def test_secrets_and_settings_references_resolve() -> None:
    secrets = {s["metadata"]["name"]: {**s.get("stringData", {}), **s.get("data", {})} for s in by_kind("Secret")}
    config_maps = {c["metadata"]["name"] for c in by_kind("ConfigMap")}
    assert {"DATABASE_URL", "REDIS_URL"} <= secrets["kernelfarm-secrets"].keys()
    assert "KERNELFARM_API_TOKEN" in secrets["kernelfarm-api-token"]
    for obj in by_kind("Deployment") + by_kind("Job"):
        for container in containers(obj):
            refs = container.get("envFrom", [])
            assert {"secretRef": {"name": "kernelfarm-secrets"}} in refs, container["name"]
            for ref in refs:
                if "configMapRef" in ref:
                    assert ref["configMapRef"]["name"] in config_maps
                if "secretRef" in ref:
                    assert ref["secretRef"]["name"] in secrets


def test_kustomization_covers_every_manifest_but_the_secret_example() -> None:
    kustomization = load_yaml(K8S / "kustomization.yaml")
    listed = set(kustomization["resources"])
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml", "secrets.example.yaml"}
    assert listed == on_disk
    images = {image["name"] for image in kustomization["images"]}
    used = {c["image"].split(":")[0] for _, obj in OBJECTS for c in containers(obj)}
    assert used <= images, "every image must be retaggable from the kustomization"


def test_kubectl_kustomize_renders() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed")
    result = subprocess.run([kubectl, "kustomize", str(K8S)], capture_output=True, text=True, timeout=60)
    if result.returncode != 0 and "unknown command" in result.stderr:
        pytest.skip("this kubectl has no kustomize")
    assert result.returncode == 0, result.stderr
    rendered = [d for d in yaml.safe_load_all(result.stdout) if d]
    expected = [d for p, d in k8s_documents() if p.name not in ("kustomization.yaml", "secrets.example.yaml")]
    assert len(rendered) == len(expected)
    for obj in rendered:
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == "kernelfarm", obj["metadata"]["name"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "kernelfarm"


def test_manifests_are_plain_yaml_without_tabs() -> None:
    for path in K8S.glob("*.yaml"):
        assert "\t" not in Path(path).read_text(), path.name

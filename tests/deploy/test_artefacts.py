"""The deployment artefacts (issue 39 §3) checked offline, with neither Docker nor a cluster:
deploy/compose.yaml against the Compose Specification's JSON schema, deploy/k8s rendered as
kustomize does and each object against Kubernetes' JSON schemas, the Dockerfile parsed.

The schemas come from pinned packages (pyproject's dev extras): the Compose Specification's from
check-jsonschema's vendored copy, Kubernetes' from kubernetes-validate. KEDA's two kinds have no
published schema in either: KEDA_SCHEMAS below is written from KEDA's documentation."""

import copy
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import urllib.request
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

import dockerfile
import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.config.test_serve import free_port, listening
from tests.config.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
# The oldest and the newest Kubernetes the manifests are checked against.
KUBERNETES_VERSIONS = ("1.30", "1.37")
SECRET_NAMES = {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "METRICS_TOKEN"}


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


# --- compose --------------------------------------------------------------------------------


def test_the_compose_file_is_valid_against_the_compose_specification():
    schema_file = resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema = json.loads(schema_file.read_text())
    jsonschema.validate(compose(), schema, cls=jsonschema.validators.validator_for(schema))


def test_the_compose_file_is_checked_for_real():
    """The schema refuses what a typo makes (a misspelt key, a port as a mapping)."""
    schema_file = resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema = json.loads(schema_file.read_text())
    broken = compose()
    broken["services"]["web"]["helthcheck"] = broken["services"]["web"].pop("healthcheck")
    with pytest.raises(jsonschema.ValidationError, match="helthcheck"):
        jsonschema.validate(broken, schema, cls=jsonschema.validators.validator_for(schema))


def test_the_compose_services_are_the_pinned_ones_with_pinned_images():
    services = compose()["services"]
    assert {"web", "worker", "beat", "postgres", "redis"} <= set(services)
    assert services["web"]["command"] == ["python", "-m", "config.serve"]
    assert services["worker"]["command"][:4] == ["celery", "-A", "config", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "config", "beat"]
    assert services["beat"]["deploy"]["replicas"] == 1
    for name, service in services.items():
        image = service["image"]
        if "build" in service:
            assert service["build"]["dockerfile"] == "Dockerfile", name
            continue
        repository, _, tag = image.rpartition(":")
        assert repository and tag and tag != "latest", f"{name}: {image} is not pinned"
    # Secrets only from the environment, never written in the file.
    environment = services["web"]["environment"]
    for name in ("SECRET_KEY", "DATABASE_URL", "METRICS_TOKEN"):
        assert "${" in environment[name], name


def test_what_compose_mounts_exists_and_prometheus_reads_it_where_mounted():
    services = compose()["services"]
    mounted = {}
    for service in services.values():
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            if source.startswith("./"):
                assert (DEPLOY / source).is_file(), source
                mounted[target] = DEPLOY / source
    config = yaml.safe_load(mounted["/etc/prometheus/prometheus.yml"].read_text())
    assert all(rule in mounted for rule in config["rule_files"])
    service = config["scrape_configs"][0]
    assert service["authorization"]["credentials_file"] == "/run/secrets/metrics_token"
    assert "metrics_token" in services["prometheus"]["secrets"]
    host = service["static_configs"][0]["targets"][0].split(":")[0]
    assert host in services and host in services["web"]["environment"]["ALLOWED_HOSTS"]


# --- Kubernetes -----------------------------------------------------------------------------

# KEDA's ScaledObject and TriggerAuthentication (keda.sh/v1alpha1), the fields these manifests
# may use, from https://keda.sh/docs/2.17/reference/scaledobject-spec/ and
# https://keda.sh/docs/2.17/scalers/redis-lists/: anything else is refused.
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
    "additionalProperties": False,
}
KEDA_SCHEMAS = {
    "ScaledObject": {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "keda.sh/v1alpha1"},
            "kind": {"const": "ScaledObject"},
            "metadata": _METADATA,
            "spec": {
                "type": "object",
                "required": ["scaleTargetRef", "triggers"],
                "properties": {
                    "scaleTargetRef": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string"},
                            "kind": {"type": "string"},
                            "apiVersion": {"type": "string"},
                        },
                        "additionalProperties": False,
                    },
                    "minReplicaCount": {"type": "integer", "minimum": 0},
                    "maxReplicaCount": {"type": "integer", "minimum": 1},
                    "pollingInterval": {"type": "integer", "minimum": 1},
                    "cooldownPeriod": {"type": "integer", "minimum": 0},
                    "triggers": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["type", "metadata"],
                            "properties": {
                                "type": {"const": "redis"},
                                "metadata": {
                                    "type": "object",
                                    "required": ["listName", "listLength"],
                                    "properties": {
                                        "address": {"type": "string", "pattern": r"^[^:/]+:\d+$"},
                                        "databaseIndex": {"type": "string", "pattern": r"^\d+$"},
                                        "listName": {"type": "string", "minLength": 1},
                                        "listLength": {"type": "string", "pattern": r"^\d+$"},
                                        "activationListLength": {
                                            "type": "string",
                                            "pattern": r"^\d+$",
                                        },
                                        "enableTLS": {"enum": ["true", "false"]},
                                    },
                                    "additionalProperties": False,
                                },
                                "authenticationRef": {
                                    "type": "object",
                                    "required": ["name"],
                                    "properties": {"name": {"type": "string"}},
                                    "additionalProperties": False,
                                },
                            },
                            "additionalProperties": False,
                        },
                    },
                },
                "additionalProperties": False,
            },
        },
        "additionalProperties": False,
    },
    "TriggerAuthentication": {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "keda.sh/v1alpha1"},
            "kind": {"const": "TriggerAuthentication"},
            "metadata": _METADATA,
            "spec": {
                "type": "object",
                "required": ["secretTargetRef"],
                "properties": {
                    "secretTargetRef": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["parameter", "name", "key"],
                            "properties": {
                                "parameter": {"type": "string"},
                                "name": {"type": "string"},
                                "key": {"type": "string"},
                            },
                            "additionalProperties": False,
                        },
                    }
                },
                "additionalProperties": False,
            },
        },
        "additionalProperties": False,
    },
}

# The kustomization fields render() knows; any other fails the test rather than being ignored.
KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "labels", "resources", "components", "images"}
COMPONENT_FIELDS = {"apiVersion", "kind", "resources", "patches"}


def load_all(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def remove(document: dict, pointer: str) -> None:
    """JSON Patch's `remove` (RFC 6902): the path must exist."""
    *parents, last = [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]
    node = document
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    del node[int(last) if isinstance(node, list) else last]


def render(directory: Path, *, components: tuple[str, ...] | None = None) -> list[dict]:
    """What `kubectl kustomize directory` gives, for the fields these kustomizations use:
    resources (files), components (resources and JSON 6902 `remove` patches), labels without
    selectors, images. `components` overrides the kustomization's own list."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    assert set(kustomization) <= KUSTOMIZATION_FIELDS, set(kustomization) - KUSTOMIZATION_FIELDS
    documents = [doc for name in kustomization["resources"] for doc in load_all(directory / name)]
    for name in kustomization.get("components", []) if components is None else components:
        component = yaml.safe_load((directory / name / "kustomization.yaml").read_text())
        assert component["kind"] == "Component"
        assert set(component) <= COMPONENT_FIELDS, set(component) - COMPONENT_FIELDS
        for resource in component.get("resources", []):
            documents += load_all(directory / name / resource)
        for patch in component.get("patches", []):
            target = patch["target"]
            matched = [
                doc
                for doc in documents
                if doc["kind"] == target["kind"] and doc["metadata"]["name"] == target["name"]
            ]
            assert len(matched) == 1, target
            for operation in yaml.safe_load(patch["patch"]):
                assert operation["op"] == "remove", operation
                remove(matched[0], operation["path"])
    for entry in kustomization.get("labels", []):
        assert entry.get("includeSelectors") is False
        for doc in documents:
            doc["metadata"].setdefault("labels", {}).update(entry["pairs"])
    images = {image["name"]: image for image in kustomization.get("images", [])}
    for container in (c for doc in documents for c in containers(doc)):
        image = images.get(container["image"])
        if image:
            container["image"] = f"{image['newName']}:{image['newTag']}"
    return documents


def pod_spec(doc: dict) -> dict | None:
    if doc["kind"] in ("Deployment", "Job"):
        return doc["spec"]["template"]["spec"]
    return None


def containers(doc: dict) -> list[dict]:
    spec = pod_spec(doc) or {}
    return spec.get("initContainers", []) + spec.get("containers", [])


def by_kind(documents: list[dict], kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in documents if doc["kind"] == kind}


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("components", [(), ("keda",)], ids=["base", "keda"])
def test_every_manifest_is_valid_against_the_kubernetes_schemas(version, components):
    documents = render(K8S, components=components)
    kinds = [doc["kind"] for doc in documents]
    assert ("ScaledObject" in kinds) == bool(components)
    for doc in documents:
        if doc["apiVersion"].startswith("keda.sh/"):
            jsonschema.validate(doc, KEDA_SCHEMAS[doc["kind"]])
        else:
            kubernetes_validate.validate(doc, version, strict=True)


def test_the_validation_refuses_what_a_typo_makes():
    deployment = copy.deepcopy(by_kind(render(K8S), "Deployment")["agent-org-web"])
    deployment["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSIONS[-1], strict=True)
    scaled = copy.deepcopy(by_kind(render(K8S, components=("keda",)), "ScaledObject"))
    scaled = next(iter(scaled.values()))
    scaled["spec"]["triggers"][0]["metadata"]["listLenght"] = "5"
    with pytest.raises(jsonschema.ValidationError, match="listLenght"):
        jsonschema.validate(scaled, KEDA_SCHEMAS["ScaledObject"])


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize("components", [(), ("keda",)], ids=["base", "keda"])
def test_the_rendering_is_what_kubectl_kustomize_gives(tmp_path, components):
    """The pure-Python rendering above against kustomize's own, where kubectl is installed."""
    shutil.copytree(K8S, tmp_path / "k8s")
    if components:
        kustomization = tmp_path / "k8s" / "kustomization.yaml"
        text = kustomization.read_text().replace(
            "# components:\n#   - keda", "components:\n  - keda"
        )
        kustomization.write_text(text)
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(tmp_path / "k8s")], capture_output=True, text=True, check=True
    ).stdout

    def key(doc):
        return doc["kind"], doc["metadata"]["name"]

    theirs = sorted((doc for doc in yaml.safe_load_all(rendered) if doc), key=key)
    assert sorted(render(K8S, components=components), key=key) == theirs


def test_the_workloads_are_what_the_deployment_guide_says():
    documents = render(K8S, components=("keda",))
    deployments = by_kind(documents, "Deployment")
    assert set(deployments) == {"agent-org-web", "agent-org-worker-celery", "agent-org-beat"}
    web = deployments["agent-org-web"]["spec"]["template"]["spec"]["containers"][0]
    assert web["command"] == ["python", "-m", "config.serve"]
    # A set ALLOWED_HOSTS is the whole list: the public host and the pod's address (the probes').
    public = urlsplit(by_kind(documents, "ConfigMap")["agent-org"]["data"]["PUBLIC_BASE_URL"])
    hosts = next(v["value"] for v in web["env"] if v["name"] == "ALLOWED_HOSTS").split(",")
    assert public.hostname in hosts and "$(POD_IP)" in hosts
    assert web["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["startupProbe"]["httpGet"]["path"] == "/healthz"
    beat = deployments["agent-org-beat"]["spec"]
    assert beat["replicas"] == 1 and beat["strategy"] == {"type": "Recreate"}
    assert "replicas" not in deployments["agent-org-worker-celery"]["spec"]  # KEDA's to set
    migrate = by_kind(documents, "Job")["agent-org-migrate"]
    assert migrate["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "python",
        "manage.py",
        "migrate",
        "--noinput",
    ]
    scaled = by_kind(documents, "ScaledObject")["agent-org-worker-celery"]
    assert scaled["spec"]["scaleTargetRef"]["name"] in deployments
    assert {t["metadata"]["listName"] for t in scaled["spec"]["triggers"]} == {
        "celery",
        "celery\x06\x166",
    }


def test_every_pod_runs_as_non_root_with_resources_and_secrets_by_reference():
    documents = render(K8S, components=("keda",))
    assert "Secret" not in {doc["kind"] for doc in documents}
    labels_of_pods = []
    for doc in documents:
        spec = pod_spec(doc)
        if spec is None:
            continue
        labels_of_pods.append(doc["spec"]["template"]["metadata"]["labels"])
        assert spec["securityContext"]["runAsNonRoot"] is True, doc["metadata"]["name"]
        for container in containers(doc):
            where = f"{doc['metadata']['name']}/{container['name']}"
            assert container["image"] == "registry.example.com/agent-org:0.1.0", where
            assert {"cpu", "memory"} <= set(container["resources"]["requests"]), where
            assert "memory" in container["resources"]["limits"], where
            assert container["securityContext"]["allowPrivilegeEscalation"] is False, where
            for variable in container.get("env", []):
                if variable["name"] in SECRET_NAMES:
                    assert "value" not in variable, where
                    assert variable["valueFrom"]["secretKeyRef"]["name"] == "agent-org", where
    for budget in by_kind(documents, "PodDisruptionBudget").values():
        selector = budget["spec"]["selector"]["matchLabels"]
        assert any(selector.items() <= labels.items() for labels in labels_of_pods), selector


def test_no_worker_writes_metric_files():
    """PROMETHEUS_MULTIPROC_DIR is the server's (config.serve makes the directory): a worker or
    beat given it would write every statement's sample there, and fail where it does not exist."""
    environments = [service.get("environment", {}) for service in compose()["services"].values()]
    for doc in render(K8S, components=("keda",)):
        environments += [doc.get("data", {})] if doc["kind"] == "ConfigMap" else []
        for container in containers(doc):
            environments.append({v["name"]: v.get("value") for v in container.get("env", [])})
    assert all("PROMETHEUS_MULTIPROC_DIR" not in environment for environment in environments)


# --- Dockerfile -----------------------------------------------------------------------------


def test_the_dockerfile_is_multi_stage_non_root_and_runs_the_server():
    commands = dockerfile.parse_file(str(ROOT / "Dockerfile"))
    stages = [c for c in commands if c.cmd == "FROM"]
    assert len(stages) >= 2
    final = commands[commands.index(stages[-1]) :]
    users = [c.value[0] for c in final if c.cmd == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert any(c.cmd == "COPY" and any(f.startswith("--from=") for f in c.flags) for c in final)
    cmd = [c for c in final if c.cmd == "CMD"]
    assert cmd and cmd[-1].json and list(cmd[-1].value) == ["python", "-m", "config.serve"]
    assert not any("PROMETHEUS_MULTIPROC_DIR" in c.original for c in commands if c.cmd == "ENV"), (
        "for the server alone (config.serve makes it): see test_no_worker_writes_metric_files"
    )
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "var", "tests"} <= set(ignored)


def docker_context(destination: Path) -> None:
    """The repository as `docker build .` sends it: without what .dockerignore names (a name
    matches at the root, `**/name` at any depth; the patterns this file uses)."""
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def ignored(relative: str) -> bool:
        name = relative.rsplit("/", 1)[-1]
        for pattern in patterns:
            if pattern.startswith("**/"):
                if fnmatch.fnmatch(name, pattern[3:]):
                    return True
            elif fnmatch.fnmatch(relative, pattern):
                return True
        return False

    def ignore(directory: str, names: list[str]) -> set[str]:
        base = Path(directory).relative_to(ROOT).as_posix()
        return {n for n in names if ignored(n if base == "." else f"{base}/{n}")}

    shutil.copytree(ROOT, destination, ignore=ignore)


def test_the_code_the_image_holds_collects_its_static_files_and_serves(tmp_path):
    """What the Dockerfile's runtime stage does, on the build context without Docker: static
    files collected, then `python -m config.serve` answers the health check, a page and a static
    file (a path .dockerignore left out that the service needs fails here)."""
    app = tmp_path / "app"
    docker_context(app)
    assert not (app / "tests").exists() and (app / "config" / "serve.py").exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "TEST_DATABASE_NAME"):
        env.pop(name, None)
    env |= {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SECRET_KEY": "image-check",
        "VAR_DIR": str(app / "var"),
        "PYTHONPATH": "",
    }
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=app,
        env=env,
        check=True,
    )
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "config.serve", "--port", str(port), "--workers", "1"],
        cwd=app,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: listening(port), 60, "the server")
        for path in ("/healthz", "/", "/admin/login/", "/static/admin/css/base.css"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as answer:
                assert answer.status == 200, path
    finally:
        server.terminate()
        try:
            server.wait(30)
        finally:
            server.kill()

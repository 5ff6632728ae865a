"""Keeps docker-compose.yml in step with the Makefile stack when no Docker engine is here:
it must parse, run every service binary with its port and readiness check, and mount the
gateway config and database bootstrap the local stack uses."""
import re
import sys
import yaml

doc = yaml.safe_load(open("docker-compose.yml"))
services = doc["services"]
errors = []
for name, port in [("auth", 3001), ("subscription", 3002), ("offline", 3003), ("ads", 3004)]:
    s = services.get(name)
    if not s:
        errors.append(f"missing service {name}")
        continue
    if s.get("command") != [f"/app/{name}-service", "serve"]:
        errors.append(f"{name}: command {s.get('command')}")
    check = " ".join(s.get("healthcheck", {}).get("test", []))
    if f":{port}/ready" not in check:
        errors.append(f"{name}: healthcheck {check!r}")
gateway = services.get("gateway", {})
if "./deploy/gateway/nginx.conf:/etc/nginx/nginx.conf:ro" not in gateway.get("volumes", []):
    errors.append("gateway does not mount deploy/gateway/nginx.conf")
if "./Console:/srv/console:ro" not in gateway.get("volumes", []):
    errors.append("gateway does not mount the console's files (Console/ at /srv/console, where nginx.conf serves them)")
# #48 the shipped gateway uses the cores it is given; the local stack sets its count from one
# setting (GATEWAY_WORKER_PROCESSES) by rewriting that very line.
conf = open("deploy/gateway/nginx.conf").read()
if not re.search(r"^worker_processes auto;$", conf, re.M):
    errors.append("deploy/gateway/nginx.conf: worker_processes must be auto where it ships")
if "s/^worker_processes auto;/worker_processes ${GATEWAY_WORKER_PROCESSES:-1};/" not in open("deploy/local/stack.sh").read():
    errors.append("deploy/local/stack.sh no longer sets the local gateway's workers from GATEWAY_WORKER_PROCESSES")
if "8080:8080" not in gateway.get("ports", []):
    errors.append("gateway does not publish 8080")
pg = services.get("postgres", {})
if not str(pg.get("image", "")).startswith("postgis/postgis:15"):
    errors.append("postgres is not PostGIS on PostgreSQL 15")
if not any("bootstrap.sql" in v for v in pg.get("volumes", [])):
    errors.append("postgres does not run deploy/local/bootstrap.sql")
# The image: the volume on DATA_DIR is writable by the services' user, and it builds the
# dependency versions the tests ran with.
dockerfile = open("deploy/Dockerfile").read()
for needed in ["chown app:app /data", "DATA_DIR=/data", "EXPOSE 3001 3002 3003 3004", "HEALTHCHECK", "CMD [",
               "COPY deploy/dependency-pins.json ./Package.resolved", "--force-resolved-versions", "COPY Console /app/console"]:
    if needed not in dockerfile:
        errors.append(f"deploy/Dockerfile lacks {needed!r}")
# Every folder the manifest builds from is copied in (a target's folder missing breaks the build).
import re
for top in sorted({m.split("/")[0] for m in re.findall(r'path: "([^"]+)"', open("Package.swift").read())} | {"Services"}):
    if f"COPY {top} ./{top}" not in dockerfile:
        errors.append(f"deploy/Dockerfile does not copy {top}/, which Package.swift builds from")
for name in ["auth", "subscription", "offline", "ads"]:
    env = services.get(name, {}).get("environment", {})
    if env.get("DATA_DIR") != "/data" or not any(str(v).endswith(":/data") for v in services.get(name, {}).get("volumes", [])):
        errors.append(f"{name}: DATA_DIR is not the /data volume")
import json, os
pinned = {p["identity"]: p["state"].get("version") for p in json.load(open("deploy/dependency-pins.json"))["pins"]}
if os.path.exists("Package.resolved"):
    resolved = {p["identity"]: p["state"].get("version") for p in json.load(open("Package.resolved"))["pins"]}
    if set(resolved) != set(pinned):
        errors.append("deploy/dependency-pins.json names other packages than the build resolved: copy Package.resolved there "
                      f"(missing {sorted(set(resolved) - set(pinned))}, extra {sorted(set(pinned) - set(resolved))})")
    drift = sorted(k for k in resolved if k in pinned and resolved[k] != pinned[k])
    if drift:
        print("note: the image pins other versions than this build resolved:", ", ".join(f"{k} {pinned[k]} (built {resolved[k]})" for k in drift))
# Kubernetes (kubernetes-validate checks the schemas; this checks what they cannot).
import glob
k8s = [d for f in sorted(glob.glob("deploy/k8s/*.yaml")) for d in yaml.safe_load_all(open(f)) if d]
kinds = lambda kind: {d["metadata"]["name"]: d for d in k8s if d["kind"] == kind}
deployments, pdbs = kinds("Deployment"), kinds("PodDisruptionBudget")
for name, d in deployments.items():
    pod = d["spec"]["template"]["spec"]
    if not pod.get("securityContext", {}).get("runAsNonRoot") or not isinstance(pod["securityContext"].get("runAsUser"), int):
        errors.append(f"k8s {name}: the pod does not run as a numeric non-root user")
    for c in pod["containers"] + pod.get("initContainers", []):
        sc = c.get("securityContext", {})
        if sc.get("allowPrivilegeEscalation") is not False or sc.get("capabilities", {}).get("drop") != ["ALL"]:
            errors.append(f"k8s {name}/{c['name']}: privilege escalation or capabilities left open")
    labels = d["spec"]["selector"]["matchLabels"]
    if not any(p["spec"]["selector"]["matchLabels"] == labels for p in pdbs.values()):
        errors.append(f"k8s {name}: no PodDisruptionBudget")
if "runAsUser: 10001" not in open("deploy/k8s/auth.yaml").read() or "USER 10001:10001" not in dockerfile:
    errors.append("the image's user and the manifests' runAsUser differ")
config = kinds("ConfigMap")
data = config["app-backend-config"]["data"]
if data.get("DATABASE_HOST") != "pgbouncer" or data.get("DATABASE_DIRECT_HOST") in (None, "pgbouncer"):
    errors.append("k8s: the services do not borrow through PgBouncer with a direct host for their sessions")
if "pool_mode = transaction" not in config["pgbouncer-config"]["data"]["pgbouncer.ini"]:
    errors.append("k8s: PgBouncer is not in transaction mode")
if config["app-backend-bootstrap-sql"]["data"]["bootstrap.sql"] != open("deploy/local/bootstrap.sql").read():
    errors.append("k8s: bootstrap.yaml's SQL differs from deploy/local/bootstrap.sql (copy it)")
# #49 the services export their spans to a collector the cluster runs.
endpoint = data.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
if not any(endpoint.startswith(f"http://{name}:") for name in kinds("Service")):
    errors.append(f"k8s: OTEL_EXPORTER_OTLP_ENDPOINT {endpoint!r} names no Service of the manifests")
if "app-backend-db-bootstrap" not in kinds("Job"):
    errors.append("k8s: no bootstrap Job")
ingress = kinds("Ingress")["app-backend"]
if not ingress["spec"].get("tls"):
    errors.append("k8s: the Ingress has no TLS")
if errors:
    print("docker-compose.yml / deploy:", *errors, sep="\n  ")
    sys.exit(1)

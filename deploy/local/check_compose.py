"""Keeps docker-compose.yml in step with the Makefile stack when no Docker engine is here:
it must parse, run every service binary with its port and readiness check, and mount the
gateway config and database bootstrap the local stack uses."""
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
if "8080:8080" not in gateway.get("ports", []):
    errors.append("gateway does not publish 8080")
pg = services.get("postgres", {})
if not str(pg.get("image", "")).startswith("postgis/postgis:15"):
    errors.append("postgres is not PostGIS on PostgreSQL 15")
if not any("bootstrap.sql" in v for v in pg.get("volumes", [])):
    errors.append("postgres does not run deploy/local/bootstrap.sql")
if errors:
    print("docker-compose.yml:", *errors, sep="\n  ")
    sys.exit(1)

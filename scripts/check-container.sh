#!/usr/bin/env bash
# Check the container files (Dockerfile, compose.yaml). With a container engine, build the image
# and run it once. Without one (CI's machine has the docker client but no engine), lint them
# with real tools instead: hadolint for the Dockerfile, the Compose Specification's JSON schema
# (vendored in check-jsonschema) for compose.yaml, and the checks below that tie both to the
# README's configuration table.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/venv.sh
. scripts/venv.sh
ensure_venv

echo "hadolint $("$VENV/bin/hadolint" --version | grep -o '[0-9][0-9.]*' | head -n1): Dockerfile"
"$VENV/bin/hadolint" Dockerfile
echo "check-jsonschema, Compose Specification: compose.yaml"
"$VENV/bin/check-jsonschema" --builtin-schema vendor.compose-spec compose.yaml

# What neither linter knows: the variables are uidgen's, the state directory is the volume,
# the user is not root.
"$VENV/bin/python" - <<'PY'
import re, sys, yaml

dockerfile = open("Dockerfile").read()
compose = yaml.safe_load(open("compose.yaml"))
readme = open("README.md").read()
errors = []

# Every UIDGEN_ variable is one the README documents (a typo would be ignored, or refused).
names = set(re.findall(r"\bUIDGEN_[A-Z0-9_]+", dockerfile))
names |= set(re.findall(r"\bUIDGEN_[A-Z0-9_]+", yaml.safe_dump(compose)))
for name in sorted(names):
    if f"`{name}`" not in readme:
        errors.append(f"{name} is set but README.md does not document it")

volumes = re.findall(r'^VOLUME \["([^"]+)"\]', dockerfile, re.M)
state = re.findall(r"UIDGEN_STATE_DIR=(\S+)", dockerfile)
if volumes != ["/var/lib/uidgen"] or state != volumes:
    errors.append(f"the state dir {state} must be the one VOLUME {volumes}")
user = re.findall(r"^USER (\S+)", dockerfile, re.M)
if not user or user[-1].split(":")[0] in ("0", "root") or not user[-1].split(":")[0].isdigit():
    errors.append(f"the image must run as a numeric non-root user, not {user}")
if len(re.findall(r"^FROM ", dockerfile, re.M)) < 2:
    errors.append("the Dockerfile must build in one stage and run in another")

service = compose["services"]["uidgen"]
if not any(str(v).endswith(":/var/lib/uidgen") for v in service.get("volumes", [])):
    errors.append("compose's uidgen service must keep /var/lib/uidgen in a volume")
for needed in ("postgres", "zookeeper"):
    if needed not in service.get("depends_on", {}):
        errors.append(f"compose's uidgen service must wait for {needed}")
env = service.get("environment", {})
if env.get("UIDGEN_STATE_DIR", "/var/lib/uidgen") != "/var/lib/uidgen":
    errors.append("compose's UIDGEN_STATE_DIR must be the volume /var/lib/uidgen")
if not str(env.get("UIDGEN_STORE", "")).startswith("postgres://") or env.get("UIDGEN_WORKER_ASSIGNER") != "zookeeper":
    errors.append("compose's uidgen must use PostgreSQL as its store and ZooKeeper for worker ids")
# A default admin token in a published file is everyone's: compose must refuse to start without one.
admin = str(env.get("UIDGEN_ADMIN_TOKEN", ""))
if admin and not re.fullmatch(r"\$\{UIDGEN_ADMIN_TOKEN:\?[^}]+\}", admin):
    errors.append(f"compose's UIDGEN_ADMIN_TOKEN must be required (${{UIDGEN_ADMIN_TOKEN:?...}}), not {admin!r}")
# The slim image has no curl: both health checks are `uidgen health`.
if service.get("healthcheck", {}).get("test") != ["CMD", "uidgen", "health"]:
    errors.append("compose's uidgen healthcheck must run [\"CMD\", \"uidgen\", \"health\"]")
if not re.search(r'^HEALTHCHECK .*CMD \["uidgen", "health"\]', dockerfile, re.M):
    errors.append('the Dockerfile must have a HEALTHCHECK running ["uidgen", "health"]')

for error in errors:
    print(f"error: {error}", file=sys.stderr)
sys.exit(1 if errors else 0)
PY
echo "container files: consistent"

if docker info >/dev/null 2>&1; then
  echo "container engine found: building the image"
  docker build -t uidgen:check .
  docker run --rm uidgen:check decode 967194852301217792
  # compose refuses to start without an admin token; any will do to check the file.
  if docker compose version >/dev/null 2>&1; then
    UIDGEN_ADMIN_TOKEN=check-container-admin-token docker compose config --quiet
  fi
else
  echo "no container engine (docker info fails): the image is not built; the files are linted above"
fi

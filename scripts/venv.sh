# Sourced by the scripts that need Python tools (schemathesis, hadolint, check-jsonschema): one
# virtual environment under target/, holding exactly the versions scripts/requirements.txt pins.
VENV=${CI_VENV:-$PWD/target/ci-venv}
ensure_venv() {
  local want; want=$(sha256sum scripts/requirements.txt | cut -d' ' -f1)
  if [ "$(cat "$VENV/.requirements" 2>/dev/null)" != "$want" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -r scripts/requirements.txt
    echo "$want" >"$VENV/.requirements"
  fi
}

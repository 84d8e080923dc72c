#!/usr/bin/env bash
# Creates (once) a Python venv with the official Ankaios Python SDK
# (ankaios-sdk from PyPI, unchanged, with its pinned protobuf==6.33.5 and
# PyYAML) for the container-free SDK tests, and prints the venv's python.
# Usage: tools/sdk-venv.sh [VENV_DIR]   (default: target/sdk-venv)
# Idempotent and quick when the venv imports the SDK already; exits non-zero
# with a reason when it cannot be built.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${1:-target/sdk-venv}
py=$venv/bin/python3
check='import ankaios_sdk, google.protobuf, yaml; from ankaios_sdk._components.control_interface import ControlInterface; ControlInterface.ANKAIOS_CONTROL_INTERFACE_BASE_PATH'

if [ -x "$py" ] && "$py" -c "$check" >/dev/null 2>&1; then
  echo "$py"
  exit 0
fi

command -v python3 >/dev/null || { echo "sdk-venv: python3 not found (apt-get install python3 python3-venv)" >&2; exit 1; }
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "sdk-venv: installing python3-venv" >&2
  $SUDO apt-get update -qq </dev/null >&2
  $SUDO apt-get install -y -qq python3-venv </dev/null >&2
fi

rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
python3 -m venv "$venv" >&2
"$py" -m pip install -q --disable-pip-version-check ankaios-sdk 'protobuf==6.33.5' PyYAML </dev/null >&2 || {
  echo "sdk-venv: pip could not install ankaios-sdk into $venv" >&2
  exit 1
}
"$py" -c "$check" || { echo "sdk-venv: $venv cannot import the SDK's ControlInterface" >&2; exit 1; }
echo "$py"

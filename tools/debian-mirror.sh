#!/usr/bin/env bash
# Prints the Debian mirror the host's apt uses (deb.debian.org if none is
# found), for the debootstrap of the test images.
set -euo pipefail
mirror=$(grep -rhoE '^(URIs:|deb) *https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
  | head -n1 | grep -oE 'https?://[^ ]+' || true)
echo "${mirror:-http://deb.debian.org/debian}"

#!/usr/bin/env bash
# Installs the Debian 12 packages dplace needs to build and test that are
# missing. A no-op when everything is present. Uses sudo when not root.
#   --fixtures   also install what scripts/make-onnx-fixtures.py needs (python3-torch, ...)
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  libtorch-dev libopenblas0
  libonnx-dev libprotobuf-dev protobuf-compiler
  libscotch-dev libmetis-dev coinor-libcbc-dev
  graphviz
  python3  # tests/data/rl/fake_measure.py (the rl measure-cmd test), bench/*.py
)
if [[ "${1:-}" == "--fixtures" ]]; then
  packages+=(python3-torch python3-torchvision python3-onnx)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# The main job on a built-in model and cluster: every default placer on the model, compared.
# Usage: scripts/demo.sh PATH/TO/dplace
set -euo pipefail
dplace=${1:-build/bin/dplace}
model=nmt
if ! "$dplace" models | grep -q "^nmt "; then model=two_tower; fi
echo "\$ dplace info $model"
"$dplace" info "$model"
echo
echo "\$ dplace compare $model --cluster paper-k80x4 --budget-seconds 20"
"$dplace" compare "$model" --cluster paper-k80x4 --budget-seconds 20 --trace build/demo-trace.json \
  --dot build/demo-placement.dot
echo
echo "timeline of the best placement: build/demo-trace.json (open in https://ui.perfetto.dev)"
echo "placed graph: build/demo-placement.dot (render with: dot -Tsvg)"

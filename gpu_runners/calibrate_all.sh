#!/usr/bin/env bash
# On a GPU machine with the course's software already installed (no installs needed):
#   gpu_runners/calibrate_all.sh OUT_DIR [ids...]
# grades every assignment's reference on this GPU (GPU tier included), writes proposed perf bars for
# this hardware tag into solutions/<id>/assignment.toml, and copies results + specs to OUT_DIR.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: calibrate_all.sh OUT_DIR [ids...]}; shift
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
ids=("$@")
[ ${#ids[@]} -gt 0 ] || ids=($(ls solutions | grep -E '^(s[0-9]{2}|p[0-9])_'))
python3 -c "import torch, triton, transformers; print(torch.cuda.get_device_name(0), torch.__version__, triton.__version__, transformers.__version__)"
for id in "${ids[@]}"; do
    echo "=== $id"
    if grep -q '^\[perf\.' "solutions/$id/assignment.toml"; then  # one grading run measures and grades
        python3 -m autograder calibrate "$id" --write --perf-only --json "$out/$id.results.json" 2>&1 | tee "$out/$id.calibrate.txt"
        cp "solutions/$id/assignment.toml" "$out/$id.assignment.toml"
    else
        python3 -m autograder grade "$id" --solution --json "$out/$id.results.json" 2>&1 | tail -40
    fi
done

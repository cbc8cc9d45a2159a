#!/usr/bin/env bash
# Rebuild the course's reference data of the analysis exercises on a CUDA machine (no installs):
#   gpu_runners/analysis_data.sh OUT_DIR [s00|s04|p1]...      (default: all three)
# s00  solutions/s00_hardware/measure_machine.py  -> OUT_DIR/machine_<tag>.json
# s04  solutions/s04_kernels/roofline.py          -> OUT_DIR/kernel_timings_<tag>.json  (ships as kernel_timings_h200.json)
# p1   solutions/p1_minivllm/step_profile.py      -> OUT_DIR/step_profile_<tag>.json
# Each script runs the reference package of its assignment from that assignment's folder (P1 with
# its given packages, kvcache and transformer, from s05 and s01), as a student runs their own.
# Review the files, then copy the ones that replace course data into solutions/ by hand.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: analysis_data.sh OUT_DIR [s00|s04|p1]...}; shift
mkdir -p "$out"; out=$(cd "$out" && pwd)
PY=${PYTHON:-python3}
repo=$PWD
parts=("$@"); [ ${#parts[@]} -gt 0 ] || parts=(s00 s04 p1)
tag=$($PY -c "from autograder.hardware import hardware_tag; print(hardware_tag())" 2>/dev/null || echo unknown)
run() {  # run NAME FOLDER EXTRA_PYTHONPATH SCRIPT ARGS...
    local name=$1 folder=$2 extra=$3; shift 3
    (cd "solutions/$folder" && PYTHONPATH=$repo:$PWD${extra:+:$extra} $PY "$@") > "$out/$name.log" 2>&1
    echo "$name: exit $? ($(tail -1 "$out/$name.log"))" | tee -a "$out/summary.txt"
}
for part in "${parts[@]}"; do
    case $part in
        s00) run s00 s00_hardware "" measure_machine.py --out "$out/machine_$tag.json" ;;
        s04) run s04 s04_kernels "" roofline.py --out "$out/kernel_timings_$tag.json" ;;
        p1)  run p1 p1_minivllm "$repo/solutions/s05_kvcache:$repo/solutions/s01_transformer" \
                 step_profile.py --device cuda --out "$out/step_profile_$tag.json" ;;
        *)   echo "unknown part $part"; exit 2 ;;
    esac
done

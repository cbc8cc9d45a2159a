#!/usr/bin/env bash
# On a CUDA machine with the course's software already installed (no installs needed):
#   gpu_runners/gpu_check.sh OUT_DIR [part...]
# parts: tests   the GPU tier of the project's own tests (the tests that skip without CUDA)
#        refs    every reference graded with its GPU and perf tiers (bars of this hardware tag)
#        stubs   every untouched stub graded the same way (each must score 0)
#        corpus  the wrong-approach corpus on the GPU (tests/test_wrong_approach.py, GPU cases)
#        <id>    one assignment's reference and stub
# Default: tests refs stubs corpus. PYTHON (python3) is the interpreter. Logs and results go to OUT_DIR, also packed into
# OUT_DIR/gpu_check.tar.gz (one file: some runners bring back only a few files).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: gpu_check.sh OUT_DIR [part...]}; shift
mkdir -p "$out"
PY=${PYTHON:-python3}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
parts=("$@"); [ ${#parts[@]} -gt 0 ] || parts=(tests refs stubs corpus)
ids=($(ls solutions | grep -E '^(s[0-9]{2}|p[0-9])_'))
sandbox=$(command -v bwrap >/dev/null && echo auto || echo none)
$PY -c "import torch, triton, transformers; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else \"no CUDA device: the GPU tiers will not run\", torch.__version__, triton.__version__, transformers.__version__)" | tee "$out/device.txt"

grade() {  # grade ID ref|stub
    local flag=""; [ "$2" = ref ] && flag=--solution
    $PY -m autograder grade "$1" $flag --sandbox "$sandbox" --json "$out/$1.$2.json" > "$out/$1.$2.txt" 2>&1
    echo "$1 $2: $(grep -E 'points,' "$out/$1.$2.txt" | tail -1)" | tee -a "$out/summary.txt"
}

for part in "${parts[@]}"; do
    case $part in
        tests)  $PY -m pytest tests -q -rs -p no:cacheprovider -k "cuda or gpu or GPU" \
                    --deselect tests/test_wrong_approach.py > "$out/tests.txt" 2>&1
                echo "tests: $(tail -1 "$out/tests.txt")" | tee -a "$out/summary.txt" ;;
        refs)   for id in "${ids[@]}"; do grade "$id" ref; done ;;
        stubs)  for id in "${ids[@]}"; do grade "$id" stub; done ;;
        corpus) $PY -m pytest tests/test_wrong_approach.py -q -s -p no:cacheprovider -k gpu > "$out/corpus.txt" 2>&1
                echo "corpus: $(tail -1 "$out/corpus.txt")" | tee -a "$out/summary.txt" ;;
        *)      [ -d "solutions/$part" ] || { echo "unknown part $part"; exit 2; }
                grade "$part" ref; grade "$part" stub ;;
    esac
done
tar czf /tmp/gpu_check.tar.gz -C "$out" . && mv /tmp/gpu_check.tar.gz "$out/"

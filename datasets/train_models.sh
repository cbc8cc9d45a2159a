#!/usr/bin/env bash
# Train both course models on the tokenized corpus, then measure them (needs a GPU for speed).
#
#   datasets/train_models.sh        fixed step counts (5550, 1650): repeats the committed run
#   TARGET_BUDGET_S=150 DRAFT_BUDGET_S=50 datasets/train_models.sh
#                                   pick the step counts from time budgets instead
#
# Env: PYTHON (python3), MODELS (datasets/models), LOGS (datasets/training),
#      EXTRA (extra train.py flags, e.g. tiny shapes for a CPU smoke run), EVAL_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
MODELS=${MODELS:-datasets/models}
LOGS=${LOGS:-datasets/training}
EXTRA=${EXTRA:-}
if [ -n "${TARGET_BUDGET_S:-}" ]; then T_LEN="--time-budget $TARGET_BUDGET_S"; else T_LEN="--steps ${TARGET_STEPS:-5550}"; fi
if [ -n "${DRAFT_BUDGET_S:-}" ]; then D_LEN="--time-budget $DRAFT_BUDGET_S"; else D_LEN="--steps ${DRAFT_STEPS:-1650}"; fi

$PY datasets/train.py --model course-llama $T_LEN --lr 2e-3 --dropout 0.1 \
    --out "$MODELS/course-llama" --log-dir "$LOGS" $EXTRA
$PY datasets/train.py --model course-llama-draft $D_LEN --lr 3e-3 \
    --teacher "$MODELS/course-llama" --out "$MODELS/course-llama-draft" --log-dir "$LOGS" $EXTRA
$PY datasets/eval.py --models "$MODELS" --out "$LOGS/eval_results.json" ${EVAL_ARGS:-}

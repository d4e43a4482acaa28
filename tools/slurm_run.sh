#!/usr/bin/env bash
# A tool under slurm (GPU clusters), what tools/slurm_train.sh and tools/slurm_test.sh run:
#   bash tools/slurm_run.sh PARTITION JOB_NAME SCRIPT [SCRIPT args]      (SCRIPT: train.py or test.py of tools/)
set -x
PARTITION=$1
JOB_NAME=$2
SCRIPT=$3
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
source "$(dirname "$0")/_run_env.sh"  # DIR, PYTHON, PYTHONPATH

srun -p ${PARTITION} \
    --job-name=${JOB_NAME} \
    --gres=gpu:${GPUS_PER_NODE} \
    --ntasks=${GPUS} \
    --ntasks-per-node=${GPUS_PER_NODE} \
    --cpus-per-task=${CPUS_PER_TASK} \
    --kill-on-bad-exit=1 \
    ${SRUN_ARGS} \
    "$PYTHON" -u "$DIR/$SCRIPT" "${@:4}" --launcher="slurm"

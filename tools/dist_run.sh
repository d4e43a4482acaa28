#!/usr/bin/env bash
# A tool under torchrun, what tools/dist_train.sh and tools/dist_test.sh run:
#   bash tools/dist_run.sh SCRIPT NUM_PROCS [SCRIPT args]      (SCRIPT: train.py or test.py of tools/)
# On machines without a GPU the processes use the gloo backend (mmrecvit.mm.dist).
SCRIPT=$1
GPUS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
source "$(dirname "$0")/_run_env.sh"  # DIR, PYTHON, PYTHONPATH

"$PYTHON" -m torch.distributed.run \
    --nnodes=$NNODES --node_rank=$NODE_RANK --master_addr=$MASTER_ADDR \
    --nproc_per_node=$GPUS --master_port=$PORT \
    "$DIR/$SCRIPT" "${@:3}" --launcher pytorch

#!/usr/bin/env bash
# APPO on Pong (envpool:Pong-v5) with the learner on one NVIDIA GPU and one env runner
# per remaining CPU core, for a time budget: the run of the tuned `pong` APPO entry
# (distrl/tuned.py). One command, under 10 minutes on a machine with 16 cores; it needs
# no network (the repository's .venv, with distrl[envpool] installed, is used as is).
#
#   bash bench/gpu_pong.sh
#
# Writes under $OUT (default ./bench/out):
#   gpu_pong_metrics.jsonl  every iteration's metrics (metrics.jsonl of the run)
#   gpu_pong_final.json     the run's final result (distrl train --json)
#   gpu_pong_summary.json   frames/s, the last mean return, seconds to a mean return
#                           >= 18 (null when not reached), and what ran
#
# Knobs (environment): GPU_PONG_SECONDS (training budget, default 530: Ray and the
# runners start in the remaining time), DEVICE (cuda; cpu to try the script anywhere),
# RUNNERS (default: cores - 1), ENVS_PER_RUNNER (4), FRAGMENT (32 steps).
set -euo pipefail

cd "$(dirname "$0")/.."
PY=.venv/bin/python
OUT="${OUT:-bench/out}"
SECONDS_BUDGET="${GPU_PONG_SECONDS:-530}"
DEVICE="${DEVICE:-cuda}"
RUNNERS="${RUNNERS:-$(( $(nproc) > 1 ? $(nproc) - 1 : 1 ))}"
ENVS="${ENVS_PER_RUNNER:-4}"
FRAGMENT="${FRAGMENT:-32}"
BATCH=$(( RUNNERS * ENVS * FRAGMENT ))  # one fragment from each runner per update
MINIBATCH=$(( BATCH < 640 ? BATCH : 640 ))
TARGET=18

[[ -x "$PY" ]] || { echo "gpu_pong: $PY not found: carry the repository's .venv" >&2; exit 2; }
"$PY" -c "import envpool" 2>/dev/null \
    || { echo "gpu_pong: envpool is not installed in .venv (pip install 'distrl[envpool]')" >&2; exit 2; }
if [[ "$DEVICE" == cuda ]]; then
    "$PY" -c "import sys, torch; sys.exit(not torch.cuda.is_available())" \
        || { echo "gpu_pong: no CUDA device visible to torch; DEVICE=cpu runs on the CPU" >&2; exit 2; }
fi

mkdir -p "$OUT"
RUN_DIR="$(mktemp -d)"  # checkpoints (frames of pending fragments) stay out of $OUT
trap 'rm -rf "$RUN_DIR"' EXIT

echo "gpu_pong: ${RUNNERS} runners x ${ENVS} envs, learner on ${DEVICE}, ${SECONDS_BUDGET} s" >&2
"$PY" -m distrl train appo --tuned pong --env envpool:Pong-v5 --device "$DEVICE" \
    --num-env-runners "$RUNNERS" --num-envs-per-env-runner "$ENVS" \
    --rollout-fragment-length "$FRAGMENT" --train-batch-size "$BATCH" \
    --minibatch-size "$MINIBATCH" \
    --max-time-s "$SECONDS_BUDGET" --max-env-steps 1000000000 --stop-return "$TARGET" \
    --logdir "$RUN_DIR/run" --no-progress --json | tail -n 1 > "$OUT/gpu_pong_final.json"
cp "$RUN_DIR/run/metrics.jsonl" "$OUT/gpu_pong_metrics.jsonl"

"$PY" - "$OUT" "$RUNNERS" "$ENVS" "$DEVICE" "$TARGET" <<'EOF'
import json
import sys
from pathlib import Path

from distrl.envs.envpool_vec import ale_v5_differences

out, runners, envs, device, target = sys.argv[1:]
FRAME_SKIP = 4  # Pong-v5: each env step is 4 frames
rows = [json.loads(line) for line in (Path(out) / "gpu_pong_metrics.jsonl").open()]
final = json.loads((Path(out) / "gpu_pong_final.json").read_text())
reached = [r["time/total_s"] for r in rows
           if (r.get("env/episode_return_mean") or float("-inf")) >= float(target)]
summary = {
    "env": "envpool:Pong-v5", "device": device, "num_env_runners": int(runners),
    "num_envs_per_env_runner": int(envs), "iterations": final["iteration"],
    "env_steps": final["env/steps_total"], "train_s": final["time/total_s"],
    "frames_per_s": FRAME_SKIP * final["env/steps_total"] / final["time/total_s"],
    "frames_per_s_per_iteration": [FRAME_SKIP * r["env/steps_per_s"] for r in rows],
    "episode_return_mean": final.get("env/episode_return_mean"),
    "seconds_to_return_18": reached[0] if reached else None,
    "stopped_by": final.get("stopped_by"),
    # EnvPool's Pong is not ALE/Pong-v5: name the settings an ALE v5 score assumes.
    "differs_from_ale_v5": ale_v5_differences("envpool:Pong-v5"),
}
(Path(out) / "gpu_pong_summary.json").write_text(json.dumps(summary, indent=1))
print(json.dumps({k: v for k, v in summary.items() if k != "frames_per_s_per_iteration"}))
EOF

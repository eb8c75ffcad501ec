#!/usr/bin/env bash
# The GPU check: on one GPU, train SpyRL for a few steps with vLLM generation and the
# DeepSpeed learner, then print a short table (generated tokens/s, seconds per update,
# generator/learner logprob gap). Run it when a GPU machine is available:
#     bash scripts/gpu_check.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps="${1:-3}"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
make setup
run="$(mktemp -d /tmp/arena-gpu-check.XXXX)"
.venv/bin/python -m arena.train games/spy/spy.yaml \
  --set policies.learner.backend=vllm --set policies.learner.device=cuda \
  --set policies.learner.gpu_memory_utilization=0.35 --set policies.learner.max_model_len=4096 \
  --set policies.learner.sampling.max_new_tokens=256 --set runner.num_envs=32 --set runner.progress=false \
  --set learner.backend=deepspeed --set learner.device=cuda --set learner.deepspeed.zero_stage=2 \
  --set learner.deepspeed.bf16=true --set learner.token_budget=16384 \
  --set train.games_per_step=32 --set train.steps="$steps" --set train.checkpoint_every="$steps" \
  --set train.plot=false --run-dir "$run"
.venv/bin/python - "$run" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(f"{sys.argv[1]}/metrics.jsonl")]
print(f"{'step':>4} {'stage':>8} {'gen tok/s':>10} {'rollout s':>10} {'update s':>9} {'logprob gap':>12} {'parseable':>10}")
for r in rows:
    gap = r.get("logprob_gap")
    print(f"{r['step']:>4} {r['stage']:>8} {r['gen/tokens_per_s']:>10.1f} {r['time/rollout_s']:>10.1f} "
          f"{r['time/update_s']:>9.1f} {('%.4f' % gap) if gap is not None else 'n/a':>12} "
          f"{r.get('game/parseable_vote_rate', float('nan')):>10.2f}")
PY

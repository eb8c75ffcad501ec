"""The training loop: config assembly (each part's own config model composed), building policies and
the runner from it, the trainer, checkpoints, evaluations inside training, the weight-sync canary,
the league and the run's plots. Sits above the runner, policies, learners, games and arena.stats."""

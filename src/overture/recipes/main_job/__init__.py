"""The main job (`overture train CONFIG`, `job.py`): tasks, oracle demonstrations, the
language-model warm-up, SFT, held-out pass@k, async RL and pass@k again, with what only this
recipe needs: its task dealing, edit drills, the copy-circuit initialiser for its tiny model, the
probes it reports (call accuracy, copying), its display and its state."""

"""Layer 5 (beside `overture.rl`): a policy evaluated as a coding agent on held-out tasks —
pass@k, behaviour metrics, and changes paired by task (`held_out`)."""

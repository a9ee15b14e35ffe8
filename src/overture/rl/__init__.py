"""Layer 5: training — optimizer and schedule, run directories, and the language-model warm-up.

The RL pieces (advantages, losses, buffer, trainer, orchestrator) land here next.
"""

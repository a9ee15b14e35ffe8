"""Layer 5 (beside `overture.rl`, whose trainer and checkpoints they use): the supervised
trainers — SFT on demonstration conversations, the language-model warm-up — and the
demonstrations' format."""

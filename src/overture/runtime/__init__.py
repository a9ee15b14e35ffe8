"""Layer 1: the platform runtime the engine and the trainers share — CPU tuning (allocator
thresholds, intra-op threads: `cpu`), device selection and denormal flushing (`devices`)."""

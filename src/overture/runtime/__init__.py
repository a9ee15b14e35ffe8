"""Layer 1: the platform runtime the engine, the trainers and the tools share — CPU tuning
(allocator thresholds, intra-op threads: `cpu`), device selection and denormal flushing
(`devices`), parsing Python from any thread (`python_source`)."""

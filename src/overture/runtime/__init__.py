"""Layer 1: the platform runtime the engine, the trainers and the tools share — CPU tuning
(allocator thresholds, intra-op threads: `cpu`), device selection and denormal flushing
(`devices`), MKL's vector-math dispatch settled before threads race on it (`vector_math`),
parsing Python from any thread (`python_source`)."""

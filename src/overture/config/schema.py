"""The typed run configuration: one pydantic schema for every section of a run.

Every section forbids unknown keys, so a typo in a TOML file is an error naming the key
instead of a silently ignored setting. Defaults describe the tiny CPU model of `configs/tiny.toml`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelConfig(Section):
    """Architecture of the policy: a Qwen3-MoE-family decoder (a dense Qwen3 when num_experts = 0).

    Field names follow the Hugging Face `config.json` of `Qwen3MoeForCausalLM` so that a
    checkpoint's config maps onto this one key for key. When `path` is set the architecture is
    read from that checkpoint and the fields here are ignored.
    """

    path: str | None = None
    vocab_size: int = Field(4096, gt=0)
    hidden_size: int = Field(128, gt=0)
    intermediate_size: int = Field(256, gt=0, description="hidden width of dense (non-MoE) MLP layers")
    num_hidden_layers: int = Field(4, gt=0)
    num_attention_heads: int = Field(4, gt=0)
    num_key_value_heads: int = Field(2, gt=0)
    head_dim: int = Field(32, gt=0)
    rms_norm_eps: float = Field(1e-6, gt=0)
    rope_theta: float = Field(1_000_000.0, gt=0)
    max_position_embeddings: int = Field(4096, gt=0)
    attention_bias: bool = False
    tie_word_embeddings: bool = False
    initializer_range: float = Field(0.02, gt=0)
    # Mixture of experts.
    num_experts: int = Field(8, ge=0, description="0 makes every layer dense (a Qwen3 model)")
    num_experts_per_tok: int = Field(2, gt=0)
    moe_intermediate_size: int = Field(64, gt=0)
    norm_topk_prob: bool = True
    decoder_sparse_step: int = Field(1, gt=0)
    mlp_only_layers: list[int] = Field(default_factory=list)
    router_aux_loss_coef: float = Field(0.001, ge=0)
    shared_expert_intermediate_size: int = Field(
        0, ge=0, description="width of one always-active shared expert; 0 = none (as in Qwen3-MoE)"
    )
    balance_bias: bool = Field(
        False, description="auxiliary-loss-free balancing: a per-expert bias used for selection only"
    )
    balance_bias_rate: float = Field(1e-3, ge=0)
    experts_impl: Literal["auto", "grouped", "loop"] = "auto"
    precision: Literal["fp32", "bf16", "mxfp8"] = Field(
        "fp32",
        description="GEMM precision of attention/MLP/expert projections, forward and backward "
        "(overture.mx); embeddings, norms, router, softmax and LM head stay high precision",
    )

    @model_validator(mode="after")
    def _check_shapes(self) -> ModelConfig:
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )
        if self.num_experts and self.num_experts_per_tok > self.num_experts:
            raise ValueError(
                f"num_experts_per_tok ({self.num_experts_per_tok}) exceeds num_experts ({self.num_experts})"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim ({self.head_dim}) must be even for rotary embeddings")
        bad = [i for i in self.mlp_only_layers if not 0 <= i < self.num_hidden_layers]
        if bad:
            raise ValueError(f"mlp_only_layers {bad} outside 0..{self.num_hidden_layers - 1}")
        return self

    def is_moe_layer(self, layer: int) -> bool:
        """Whether decoder layer `layer` holds experts (the Qwen3-MoE rule)."""
        return (
            self.num_experts > 0
            and layer not in self.mlp_only_layers
            and (layer + 1) % self.decoder_sparse_step == 0
        )


class TokenizerConfig(Section):
    """Where the tokenizer comes from: a model directory's `tokenizer.json`, or trained here."""

    path: str | None = Field(
        None, description="directory holding tokenizer.json; unset = train the built-in BPE"
    )
    vocab_size: int = Field(4096, gt=256, description="size of the BPE trained when path is unset")
    corpus: str = Field(
        "v1",
        pattern=r"^v[0-9]+$",
        description="version of the frozen corpus (shipped data) the BPE is trained on when path is unset, "
        "and the language-model warm-up reads",
    )


class OptimizerConfig(Section):
    """One training phase's optimizer (AdamW) and LR schedule (linear warmup, cosine decay).

    Not a section of the TOML file: each phase builds its own from the sections that own its
    settings — `TrainingConfig.optimizer` (SFT, `overture pretrain`), `LMWarmupConfig.optimizer`
    and `RLConfig.optimizer` (the main job's warm-up and RL phases) — and hands it to the trainer.
    """

    steps: int = Field(gt=0)
    lr: float = Field(gt=0)
    min_lr_ratio: float = Field(ge=0, le=1)
    warmup_steps: int = Field(ge=0)
    weight_decay: float = Field(ge=0)
    betas: tuple[float, float]
    grad_clip: float = Field(gt=0)


class TrainingConfig(Section):
    """How every trainer computes (precision, micro-batches, packing, checkpoints, logging), and
    the optimizer of SFT and of `overture pretrain`. The main job's warm-up and RL phases take
    their steps and LR schedule from `[lm_warmup]` and `[rl]`, the rest of AdamW from here."""

    steps: int = Field(300, gt=0)
    batch_size: int = Field(8, gt=0, description="sequences per optimizer step")
    seq_len: int = Field(256, gt=1)
    lr: float = Field(3e-3, gt=0)
    min_lr_ratio: float = Field(0.1, ge=0, le=1)
    warmup_steps: int = Field(20, ge=0)
    weight_decay: float = Field(0.1, ge=0)
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = Field(1.0, gt=0)
    log_every: int = Field(10, gt=0)
    dtype: Literal["float32", "bfloat16"] = "float32"
    micro_batch_tokens: int = Field(
        2048, gt=1, description="positions per micro-batch (rows x row length, padding included)"
    )
    packing: bool = Field(
        True,
        description="pack sequences into rows (block-diagonal attention); false = a padded row per sequence",
    )
    share_prefixes: bool = Field(
        True,
        description="with packing, samples that begin with the same untrained tokens (an RL group's "
        "prompt, a batch's system message) compute them once (overture.rl.prefix_sharing)",
    )
    checkpoint_every: int = Field(
        0, ge=0, description="optimizer steps between checkpoints; 0 = only at the end"
    )
    keep_checkpoints: int = Field(
        2, gt=0, description="newest complete checkpoints kept; older ones are deleted"
    )

    @property
    def optimizer(self) -> OptimizerConfig:
        """The optimizer of a phase that trains under this section's own settings."""
        return OptimizerConfig(
            steps=self.steps, lr=self.lr, min_lr_ratio=self.min_lr_ratio, warmup_steps=self.warmup_steps,
            weight_decay=self.weight_decay, betas=self.betas, grad_clip=self.grad_clip,
        )  # fmt: skip


class MainJobConfig(Section):
    """What only the main job's recipe (`overture.recipes.main_job`) reads: how it initialises the
    tiny policy it trains from scratch."""

    copy_circuit: bool = Field(
        False,
        description="when the job starts from scratch (model.path unset), its fresh weights get an "
        "induction circuit in layers 0-1, so that the model copies from its context before any "
        "training (overture.recipes.main_job.copy_circuit)",
    )


class LMWarmupConfig(Section):
    """`overture train`'s language-model warm-up before SFT: next-token training (`overture
    pretrain`) on the frozen corpus overture ships, every token of the demonstrations SFT trains on and
    the edit drills cut from them, in the sub-run `RUN/lm-warmup/`; SFT starts from it."""

    steps: int = Field(0, ge=0, description="optimizer steps; 0 = no warm-up, SFT starts from scratch")
    batch_size: int = Field(16, gt=0, description="windows per optimizer step")
    seq_len: int = Field(512, gt=1, description="tokens per window")
    lr: float | None = Field(None, gt=0, description="peak LR; unset = training.lr")
    warmup_steps: int = Field(20, ge=0, description="linear LR warmup, in steps")
    edit_drills: int = Field(
        0,
        ge=0,
        description="also train on up to this many edit drills (overture.recipes.main_job.drills) per read "
        "listing of each demonstration: one synthesized bug shown, the edit_lines that fixes it by "
        "its line numbers; 0 = none",
    )
    repo_code_repeats: int = Field(
        0,
        ge=0,
        description="extra copies of the library source (tests excluded) of the bundled repositories "
        "that are not tasks.heldout_repos, in the warm-up's training split: code the model should know "
        "by heart to see where a listing of it differs; 0 = only the copy the corpus has",
    )

    def optimizer(self, training: TrainingConfig) -> OptimizerConfig:
        """The warm-up's optimizer: its steps, LR and warmup; the rest of `training`'s."""
        own = {"steps": self.steps, "lr": self.lr or training.lr, "warmup_steps": self.warmup_steps}
        return training.optimizer.model_copy(update=own)


class RLConfig(Section):
    """The RL objective and the asynchrony knobs (DESIGN.md decisions 2-4)."""

    advantage: Literal["grpo", "drgrpo", "rloo"] = "rloo"
    steps: int = Field(20, gt=0, description="optimizer steps of the RL phase of `overture train`")
    lr: float | None = Field(None, gt=0, description="peak LR of the RL phase; unset = training.lr")
    warmup_steps: int = Field(0, ge=0, description="linear LR warmup of the RL phase, in steps")
    min_lr_ratio: float | None = Field(
        None, ge=0, le=1, description="the RL phase's final LR / rl.lr (cosine decay between); "
        "1 = constant; unset = training.min_lr_ratio",
    )
    temperature: float | None = Field(
        None,
        gt=0,
        description="`overture train`: the sampling temperature of RL's rollouts (and of the "
        "trainer's logprobs); the evaluations keep engine.temperature; unset = engine.temperature",
    )
    eval_samples: int = Field(
        1, gt=0, description="`overture train`: episodes per held-out task per evaluation (pass@1, pass@n)"
    )
    group_size: int = Field(8, gt=1)
    batch_groups: int = Field(4, gt=0, description="groups per optimizer step (B)")
    staleness: int = Field(
        0, ge=0, description="max policy-version lag of an admitted rollout (eta); 0 = sync"
    )
    overprovision: float = Field(
        1.0, ge=1.0, description="groups in flight / groups per step (partial rollouts)"
    )
    clip_low: float = Field(0.2, gt=0)
    clip_high: float = Field(0.28, gt=0)
    is_correction: Literal["tis", "mis", "none"] = "tis"
    is_level: Literal["token", "sequence"] = "token"
    is_bound: float = Field(2.0, gt=1.0)
    loss_agg: Literal["token_mean", "seq_mean_token_mean", "constant"] = "token_mean"
    kl_coef: float = Field(0.0, ge=0)
    mask_truncated: bool = True
    drop_zero_signal_groups: bool = False
    dynamic_sampling: bool = Field(
        False,
        description="DAPO's dynamic sampling: a complete group whose rewards are all equal is left "
        "out of the batch (counted in the step's report) and a new group takes its place, so a batch "
        "holds groups with signal; up to rl.max_left_out_groups a batch",
    )
    max_left_out_groups: int = Field(
        16,
        ge=0,
        description="dynamic sampling: zero-signal groups a batch may leave out; past that they join "
        "it, so a policy that solves every task or none still reaches its steps",
    )
    constant_normalizer: int = Field(
        4096, gt=0, description="loss_agg = 'constant' (Dr. GRPO): token-loss sum / (sequences x this)"
    )
    minibatches: int = Field(1, gt=0, description="optimizer steps per rollout batch")
    recompute_proximal: bool = Field(
        True,
        description="with minibatches > 1, recompute proximal logprobs before the first update; "
        "false takes the behavior logprobs as proximal (only right for on-policy batches)",
    )

    @model_validator(mode="after")
    def _check_clip(self) -> RLConfig:
        if self.clip_low >= 1:
            raise ValueError(f"clip_low ({self.clip_low}) must be below 1 (the ratio floor is 1 - clip_low)")
        return self

    def optimizer(self, training: TrainingConfig) -> OptimizerConfig:
        """The RL phase's optimizer: its steps, LR, warmup and final LR ratio; the rest of `training`'s."""
        own = {"steps": self.steps, "lr": self.lr or training.lr, "warmup_steps": self.warmup_steps}
        if self.min_lr_ratio is not None:
            own["min_lr_ratio"] = self.min_lr_ratio
        return training.optimizer.model_copy(update=own)

    def sampling_temperature(self, engine: EngineConfig) -> float:
        """The temperature RL's rollouts sample at (and its logprobs are scored at)."""
        return engine.temperature if self.temperature is None else self.temperature


class SFTConfig(Section):
    """Supervised warm start on demonstration conversations (`overture sft`)."""

    data: str | None = Field(
        None, description="JSONL of demonstrations ({'messages': [...]}); unset = the built-in synthetic set"
    )
    synthetic_count: int = Field(256, gt=1, description="demonstrations generated when data is unset")
    val_fraction: float = Field(0.1, gt=0, lt=1, description="share of demonstrations held out")
    eval_every: int = Field(20, gt=0, description="optimizer steps between held-out evaluations")
    patience: int = Field(3, gt=0, description="evaluations without improvement before stopping early")
    min_delta: float = Field(1e-3, ge=0, description="held-out loss decrease that counts as improvement")


class EngineConfig(Section):
    """Rollout generation: batching, KV cache and default sampling."""

    backend: Literal["overture", "vllm"] = Field(
        "overture",
        description="what generates rollouts and evaluation episodes: overture's own engine (in this "
        "process, or the Ray engine actor), or vLLM servers (`make vllm-env` builds vLLM)",
    )
    vllm_urls: list[str] = Field(
        default_factory=list,
        description="backend = 'vllm': running servers to join (a rollout group's requests to one, "
        "the groups spread over them); "
        "empty = start and supervise one on 127.0.0.1, its log in the run directory",
    )
    vllm_dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto", description="backend = 'vllm': the dtype a started server computes in"
    )
    max_batch_size: int = Field(32, gt=0)
    kv_block_size: int = Field(16, gt=0)
    max_new_tokens: int = Field(256, gt=0)
    temperature: float = Field(1.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = Field(0, ge=0)
    max_repeats: int = Field(
        0, ge=0, description="repeat guard: never sample a token that makes a completion end in more "
        "than this many back-to-back copies of a span of up to repeat_span tokens; 0 = off",
    )
    repeat_span: int = Field(8, gt=0, description="longest span (tokens) the repeat guard looks for")
    kv_cache_tokens: int = Field(
        32_768, gt=0, description="KV cache pool size in tokens (rounded up to whole blocks)"
    )
    kv_cache_dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        description="what the KV cache stores; auto = the model's dtype. bfloat16 under a float32 "
        "model halves the bytes a decode step's attention reads (its rounding moves the sampled "
        "tokens' logprobs slightly off the trainer's)",
    )
    max_model_len: int = Field(
        0, ge=0, description="longest prompt + completion; 0 = the model's max_position_embeddings"
    )
    max_prefill_tokens: int = Field(
        4096, gt=0, description="prompt tokens prefilled in one step (a longer prompt runs alone)"
    )
    prefix_sharing: bool = Field(
        True, description="requests admitted together with the same prompt share its prefill and KV blocks"
    )
    prefix_caching: bool = Field(
        True,
        description="full KV blocks stay indexed by their tokens after use, so a request that starts "
        "the same way (a shared system prompt, the next turn of a conversation) prefills only the rest; "
        "forgotten at every weight update",
    )
    precision: Literal["fp32", "bf16", "mxfp8"] | None = Field(
        None, description="GEMM precision to serve in; unset = the model's own (model.precision)"
    )
    keep_freed_host_memory: bool = Field(
        True,
        description="on CPU, raise glibc's malloc thresholds for the process so decode steps reuse "
        "freed memory instead of page-faulting it again (overture.runtime.cpu)",
    )
    decode_threads: int = Field(
        1,
        ge=0,
        description="intra-op threads of decode steps on CPU (prefill keeps torch's setting); "
        "0 = torch's setting too",
    )
    native_attention: bool = Field(
        True,
        description="on CPU under a float32 model, with a float32 or bfloat16 cache, decode attention "
        "reads the paged KV cache in place "
        "through a C kernel built on first use (overture.engine.native_attention); false, or without "
        "a C compiler: gather the blocks and use torch's attention",
    )
    attention_threads: int = Field(
        1,
        ge=1,
        description="threads that share a decode step's attention through the C kernel, each taking "
        "a run of the batch's sequences (overture.engine.native_attention): 1 = the step's own "
        "thread; more use cores the rest of the step leaves idle",
    )
    native_gemm: bool = Field(
        True,
        description="on CPU with float32 weights in fp32, a decode step's GEMMs (projections, routed "
        "experts in one call a layer, LM head) run through a C kernel built on first use "
        "(overture.engine.native_gemm); false, or without a C compiler: torch's",
    )
    native_sampling: bool = Field(
        True,
        description="on CPU, batches of float32 logits that no row truncates (top-k, top-p) are sampled "
        "by a C kernel built on first use (overture.engine.native_sampling); false, or without a C "
        "compiler: torch ops",
    )

    @field_validator("vllm_urls")
    @classmethod
    def _check_vllm_urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            scheme, _, rest = url.partition("://")
            if scheme not in ("http", "https") or not rest.strip("/"):
                raise ValueError(f"{url!r} is not a server's address: expected http://HOST:PORT")
        return urls


class SandboxConfig(Section):
    """Isolation, limits of every sandboxed command, and the pool's bounds."""

    isolation: Literal["bwrap", "none"] = Field(
        "bwrap", description="'none' runs commands unisolated on a copy: for debugging only"
    )
    timeout_s: float = Field(30.0, gt=0, description="default wall-clock limit of one command")
    cpu_seconds: int = Field(60, gt=0)
    memory_mb: int = Field(2048, gt=0, description="address space per process (and the cgroup's memory)")
    max_processes: int = Field(256, gt=0)
    max_file_mb: int = Field(64, gt=0)
    max_open_files: int = Field(256, gt=0)
    max_output_bytes: int = Field(32_768, gt=0, description="per stream; head and tail are kept")
    max_live: int = Field(16, gt=0, description="sandboxes alive at once; further requests queue (FIFO)")
    max_queue: int = Field(100_000, gt=0, description="requests waiting at once before PoolFull")
    prewarm: int = Field(0, ge=0, description="spare sandboxes kept started per base")
    python_env: bool = Field(True, description="bind the running Python (read-only) so commands can use it")
    extra_ro_paths: list[str] = Field(default_factory=list, description="more host paths bound read-only")
    state_dir: str | None = Field(
        None, description="where the pool's state lives; unset = /dev/shm (memory) if usable, else temp dir"
    )
    workspace_bytes: int = Field(
        256 * 1024 * 1024, gt=0, description="size cap of a sandbox's writable layer (ENOSPC past it)"
    )
    host_uid: int = Field(65534, gt=0, description="as root: the host uid sandboxed commands run as, never 0")
    host_gid: int = Field(65534, gt=0, description="as root: the host gid sandboxed commands run as, never 0")


class TasksConfig(Section):
    """Where tasks come from, how they are synthesized and split, and how they are rewarded."""

    source: str = Field("builtin", description="'builtin' or a JSONL file of tasks")
    train_size: int = Field(64, gt=0)
    eval_size: int = Field(16, ge=0)
    reward: Literal["binary", "fraction"] = Field(
        "binary", description="'binary': 1 when resolved; 'fraction': passing share of FAIL_TO_PASS"
    )
    turn_cost: float = Field(
        0.0,
        ge=0,
        description="share of the score taken per assistant turn: a score s after t turns earns "
        "s * (1 - turn_cost * t); a failure earns 0 however long it took",
    )
    invalid_call_cost: float = Field(0.0, ge=0, description="subtracted from the reward per invalid call")
    test_timeout_s: float = Field(
        120.0, gt=0, description="wall-clock limit of one test run of a task without measured run_limits"
    )
    clean_run_timeout_s: float = Field(
        900.0,
        gt=0,
        description="synthesis: wall-clock (and per-process CPU-time) limit of the suite's one run on the "
        "clean code, which measures the limits of every later test run of that repository",
    )
    pass_to_pass: int = Field(
        25, ge=0, description="synthesis: PASS_TO_PASS tests sampled per task from those still passing"
    )
    heldout_function_fraction: float = Field(
        0.2, ge=0, lt=1, description="synthesis: share of functions whose tasks are held out"
    )
    heldout_repos: list[str] = Field(
        default_factory=list, description="synthesis: repositories whose tasks are all held out"
    )
    heldout_task_fraction: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="synthesis: share of the other tasks held out one by one: new bugs in functions "
        "that train tasks have other bugs in",
    )
    max_candidates: int = Field(
        0, ge=0, description="synthesis: candidate mutations to try at most; 0 = as many as it takes"
    )
    max_function_lines: int = Field(
        0,
        ge=0,
        description="synthesis: bugs only in functions of at most this many lines (the innermost "
        "function around the change, `def` to last line); 0 = any length",
    )
    select_tests: bool = Field(
        True,
        description="synthesis: a candidate runs only the test files that call the mutated function on "
        "the clean code (recorded by the baseline run), not the whole suite; the same tasks, faster",
    )
    oracle_parallel_share: float = Field(
        1.0,
        ge=0,
        le=1,
        description="share of the oracle's demonstrations that make a step's independent calls in "
        "one turn (the search: grep + codebase_search; the read of the function with the grep of "
        "its failing test); the others make them one call a turn. Drawn per task, fixed by the seed",
    )
    oracle_edits: Literal["lines", "functions"] = Field(
        "lines",
        description="how the oracle's demonstrations edit: 'lines' = edit_lines on the changed lines "
        "only; 'functions' = edit_lines over the whole function the change is in (the lines its "
        "read_file listed, from the def line), written out as fixed; a run whose rewrite does not "
        "solve the task (a turn cut off) is run again on the changed lines",
    )


class AgentConfig(Section):
    """The agent harness: episode limits, tool caps and the code search backend."""

    max_turns: int = Field(30, gt=0, description="assistant turns before an episode is truncated")
    context_tokens: int = Field(32_768, gt=0, description="conversation length before truncation")
    max_new_tokens: int = Field(2048, gt=0, description="tokens one assistant turn may generate")
    tool_response_tokens: int = Field(
        2048, gt=0, description="tokens of one tool response; longer ones are cut with a note"
    )
    wall_clock_s: float = Field(1800.0, gt=0, description="wall-clock limit of one episode")
    read_file_max_lines: int = Field(250, gt=0, description="lines one read_file call returns at most")
    max_line_chars: int = Field(2000, gt=0, description="characters of one line shown by read_file/grep")
    list_dir_max_entries: int = Field(500, gt=0)
    glob_max_results: int = Field(200, gt=0)
    grep_head_limit: int = Field(200, gt=0, description="grep output lines when the call gives no head_limit")
    command_timeout_s: float = Field(
        60.0, gt=0, description="run_terminal_cmd timeout when the call gives none (also its maximum x 10)"
    )
    refuse_syntax_errors: bool = Field(
        True, description="an edit that would turn a .py file that compiles into one that does not is refused"
    )
    search_backend: Literal["auto", "embedding", "bm25"] = Field(
        "auto", description="codebase_search: 'auto' uses embeddings when installed, BM25 otherwise"
    )
    search_results: int = Field(5, gt=0, description="chunks one codebase_search returns")
    search_cache_dir: str | None = Field(
        None, description="where chunk embeddings persist between runs; unset = the user cache, '' = nowhere"
    )
    tools: list[str] | None = Field(
        None,
        min_length=1,
        description="the tools the agent is given (their schemas fill the system turn), by name; unset = all",
    )

    @field_validator("tools")
    @classmethod
    def _tools_named_once(cls, names: list[str] | None) -> list[str] | None:
        repeated = sorted({name for name in names or [] if names.count(name) > 1})
        if repeated:
            raise ValueError(f"names a tool more than once: {', '.join(repeated)}")
        return names


class RuntimeConfig(Section):
    """Where components run: one process by default, Ray when asked."""

    device: Literal["auto", "cpu", "cuda"] = "auto"
    threads: int | None = Field(None, gt=0, description="torch intra-op threads; unset = torch's default")
    ray: bool = Field(False, description="the RL phase's engine, trainer and rollout workers as Ray actors")
    ray_address: str | None = Field(
        None, description="join this Ray cluster ('auto', 'ray://host:port'); unset = start a local one"
    )
    rollout_workers: int = Field(1, gt=0, description="Ray rollout-worker actors, each with a sandbox pool")

    @property
    def uses_ray(self) -> bool:
        return self.ray or self.ray_address is not None


class ParallelConfig(Section):
    """How training spreads over processes (`overture.distributed`, torchtitan's layout).

    Dense parameters live on a dp_replicate × dp_shard mesh (HSDP: FSDP within a shard group,
    replicated across groups); routed experts live on dp_replicate × expert_shard × ep, where
    ep splits the experts of each shard group and expert_shard = dp_shard / ep shards what is left.
    Every process takes its own slice of the batch.
    """

    nproc: int = Field(1, gt=0, description="training processes (torchrun's WORLD_SIZE); 1 = one process")
    dp_replicate: int = Field(1, gt=0, description="HSDP replica groups; parameters are copied across them")
    dp_shard: int = Field(
        -1, ge=-1, description="processes that shard one copy of the parameters; -1 = nproc / dp_replicate"
    )
    ep: int = Field(
        1, gt=0, description="expert parallelism: routed experts split over this many ranks of a shard group"
    )
    backend: Literal["auto", "gloo", "nccl"] = Field(
        "auto", description="torch.distributed backend; 'auto' = nccl on CUDA, gloo on CPU"
    )

    @model_validator(mode="after")
    def _check_layout(self) -> ParallelConfig:
        if self.dp_shard == 0:
            raise ValueError("parallel.dp_shard must be positive, or -1 for nproc / dp_replicate")
        if self.nproc % self.dp_replicate:
            raise ValueError(
                f"parallel.dp_replicate ({self.dp_replicate}) must divide parallel.nproc ({self.nproc})"
            )
        if self.dp_replicate * self.shard_size != self.nproc:
            raise ValueError(
                f"parallel.dp_replicate ({self.dp_replicate}) x parallel.dp_shard ({self.dp_shard}) = "
                f"{self.dp_replicate * self.shard_size} processes, but parallel.nproc is {self.nproc}"
            )
        if self.shard_size % self.ep:
            raise ValueError(
                f"parallel.ep ({self.ep}) must divide parallel.dp_shard ({self.shard_size}): "
                "expert parallelism splits each shard group"
            )
        return self

    @property
    def shard_size(self) -> int:
        """dp_shard with -1 resolved."""
        return self.nproc // self.dp_replicate if self.dp_shard == -1 else self.dp_shard

    @property
    def expert_shard(self) -> int:
        """How many ranks shard each ep rank's experts (dp_shard / ep)."""
        return self.shard_size // self.ep


class RunConfig(Section):
    """A whole run: its name, where it writes, and every section above."""

    name: str = Field("tiny", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    output_dir: str = "runs"
    seed: int = 0
    model: ModelConfig = Field(default_factory=ModelConfig)
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    rl: RLConfig = Field(default_factory=RLConfig)
    main_job: MainJobConfig = Field(default_factory=MainJobConfig)
    lm_warmup: LMWarmupConfig = Field(default_factory=LMWarmupConfig)
    sft: SFTConfig = Field(default_factory=SFTConfig)
    engine: EngineConfig = Field(default_factory=EngineConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    tasks: TasksConfig = Field(default_factory=TasksConfig)
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    parallel: ParallelConfig = Field(default_factory=ParallelConfig)

    @model_validator(mode="after")
    def _check_turn_cost(self) -> RunConfig:
        if self.tasks.turn_cost * self.agent.max_turns >= 1:
            raise ValueError(
                f"tasks.turn_cost = {self.tasks.turn_cost:g} with agent.max_turns = "
                f"{self.agent.max_turns}: an episode resolved at its last turn would earn nothing; "
                f"keep turn_cost below 1 / max_turns = {1 / self.agent.max_turns:.4g}"
            )
        return self

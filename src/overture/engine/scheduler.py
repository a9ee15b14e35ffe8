"""Continuous batching: which requests run each step, their KV blocks, and when they finish.

Every `step` (1) admits waiting requests while the batch, the KV pool and the prefill budget
allow, prefilling them together (requests admitted together with identical tokens share one
prefill row and its full blocks), (2) runs one decode step for every running request, and
(3) retires the requests that finished. When the pool cannot give a running request the block
its next token needs, the most recently admitted request is preempted: its blocks are freed and
it goes back to the head of the queue, to be re-prefilled (prompt + tokens so far) later.

The scheduler is single-threaded: only the engine's step thread calls it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

import torch

from overture.config import EngineConfig
from overture.engine.kv_cache import PagedKVCache, block_digests
from overture.engine.paged_forward import PagedForward
from overture.engine.params import Completion
from overture.engine.repeat_guard import banned_continuations
from overture.engine.sampling import BatchSampling, sample
from overture.engine.sequence import Sequence
from overture.runtime.cpu import intra_op_threads


class Scheduler:
    def __init__(
        self,
        forward: PagedForward,
        cache: PagedKVCache,
        config: EngineConfig,
        max_model_len: int,
        decode_text: Callable[[list[int]], str] | None = None,
    ) -> None:
        self.forward = forward
        self.cache = cache
        self.config = config
        self.max_model_len = max_model_len
        self.decode_text = decode_text
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.steps = 0  # steps run so far
        self.peak_blocks_used = 0
        self.preemptions = 0
        # Decode steps (forward and sampling) run on fewer intra-op threads on CPU; see cpu_tuning.
        self.decode_threads = config.decode_threads if forward.device.type == "cpu" else 0
        # Prefix cache: blocks are registered only while computed under the weights of this epoch.
        self.cache_epoch = 0
        self.prefill_tokens = 0  # prompt tokens computed by prefills
        self.prefix_hit_tokens = 0  # prompt tokens a prefix-cache hit spared

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    # ------------------------------------------------------------------ control

    def abort(self, request_ids: Iterable[int] | None) -> list[Completion]:
        """Remove the named requests (all when None) wherever they are; their partial outputs."""
        wanted = None if request_ids is None else set(request_ids)
        aborted = []
        for queue in (self.running, self.waiting):
            keep = []
            for seq in queue:
                if wanted is None or seq.request_id in wanted:
                    aborted.append(self._retire(seq, "abort"))
                else:
                    keep.append(seq)
            queue.clear()
            queue.extend(keep)
        return aborted

    def fail_all(self, error: BaseException) -> None:
        """After an internal error: fail every request and give back every block."""
        self.invalidate_prefix_cache()  # a step cut short may have left blocks half written
        for seq in [*self.running, *self.waiting]:
            self._release(seq)
            if not seq.future.done():
                seq.future.set_exception(error)
        self.running.clear()
        self.waiting.clear()

    def invalidate_prefix_cache(self) -> None:
        """New weights: no cached block may be served again, nor one computed until now registered."""
        self.cache.pool.clear_cache()
        self.cache_epoch += 1

    # ------------------------------------------------------------------ the step

    def step(self, version: int) -> None:
        admitted = self._admit()
        if admitted:
            self._prefill(admitted, version)
        self._retire_finished()
        if self.running:
            with intra_op_threads(self.decode_threads):
                self._decode(version)
            self._note_blocks_used()
            self._retire_finished()
        self.steps += 1

    def _note_blocks_used(self) -> None:
        pool = self.cache.pool
        self.peak_blocks_used = max(self.peak_blocks_used, pool.capacity - pool.num_free)

    def _admit(self) -> list[list[Sequence]]:
        """Move waiting requests into the batch; groups of requests that share one prefill row.

        A request whose leading full blocks are in the prefix cache takes them (they are pinned
        at once) and prefills only the rest. One whose next uncached block another request
        admitted in this step will compute waits a step, to find it cached then."""
        groups: dict[tuple[int, ...], list[Sequence]] = {}
        pool = self.cache.pool
        free = pool.num_free
        prefill_tokens = 0
        block = self.cache.block_size
        computing: set[bytes] = set()  # digests of the blocks this step's prefills will fill
        while self.waiting and len(self.running) < self.config.max_batch_size:
            seq = self.waiting[0]
            key = tuple(seq.tokens()) if self.config.prefix_sharing else (seq.request_id, *seq.tokens())
            follower = key in groups  # same tokens as a request admitted earlier in this step
            digests, hit = self._cached_prefix(seq) if not follower else ([], [])
            if len(hit) < len(digests) and digests[len(hit)] in computing:
                break
            # Room for the tokens and the next one; a follower only needs its own copy of the
            # partly filled last block; cached blocks no one holds leave the free count when taken.
            if follower:
                need = 1 if len(seq) % block else 0
            else:
                need = self.cache.blocks_for(len(seq) + 1) - len(hit)
                need += sum(1 for b in hit if pool.refcount(b) == 0)
            new_tokens = 0 if follower else len(seq) - len(hit) * block
            over_budget = prefill_tokens and prefill_tokens + new_tokens > self.config.max_prefill_tokens
            if need > free or over_budget:
                break
            self.waiting.popleft()
            pool.share(hit)
            seq.blocks, seq.cached = hit, len(hit) * block
            computing.update(digests[len(hit) :])
            free -= need
            prefill_tokens += new_tokens
            groups.setdefault(key, []).append(seq)
            self.running.append(seq)
        return list(groups.values())

    def _cached_prefix(self, seq: Sequence) -> tuple[list[bytes], list[int]]:
        """Digests of `seq`'s full blocks before its last token (that one is always computed, for
        its logits), and the cached blocks of the longest run of them in the prefix cache."""
        if not self.config.prefix_caching:
            return [], []
        digests = self._digests(seq, (len(seq) - 1) // self.cache.block_size)
        return digests, self.cache.pool.match(digests)

    def _digests(self, seq: Sequence, count: int) -> list[bytes]:
        """Digests of `seq`'s first `count` full blocks; a sequence only ever appends tokens, so
        those computed before (while it waited, at its prefill) are kept and extended."""
        if len(seq.digests) < count:
            seq.digests = block_digests(seq.tokens(), self.cache.block_size, count, seq.digests)
        return seq.digests[:count]

    def _prefill(self, groups: list[list[Sequence]], version: int) -> None:
        pool, block = self.cache.pool, self.cache.block_size
        leaders = [group[0] for group in groups]
        for seq in leaders:  # blocks from the prefix cache are already theirs
            seq.blocks = seq.blocks + pool.allocate(self.cache.blocks_for(len(seq)) - len(seq.blocks))
        logits = self._prefill_logits(leaders)
        rows, members = [], []
        for row, group in enumerate(groups):
            leader = group[0]
            full = len(leader) // block
            if self.config.prefix_caching:
                pool.register(self._digests(leader, full), leader.blocks[:full])
            for seq in group:
                if seq is not leader:
                    seq.blocks = leader.blocks[:full]
                    pool.share(seq.blocks)
                    if len(leader) % block:
                        (own,) = pool.allocate(1)
                        self.cache.copy_block(leader.blocks[full], own)
                        seq.blocks.append(own)
                seq.cached = len(seq)
                seq.cache_epoch = self.cache_epoch
                rows.append(row)
                members.append(seq)
        self._sample_into(members, logits[rows] if len(rows) != len(groups) else logits, version)

    def _prefill_logits(self, leaders: list[Sequence]) -> torch.Tensor:
        """Logits of each leader's last token: whole prompts through the model's own forward,
        prompts with a cached beginning (`cached` > 0) through the packed path from there."""
        whole = [i for i, seq in enumerate(leaders) if not seq.cached]
        rest = [i for i, seq in enumerate(leaders) if seq.cached]
        logits = None
        for indices, extended in ((whole, False), (rest, True)):
            if not indices:
                continue
            chosen = [leaders[i] for i in indices]
            if extended:
                tokens = [s.tokens()[s.cached :] for s in chosen]
                part = self.forward.extend(tokens, [s.cached for s in chosen], [s.blocks for s in chosen])
            else:
                part = self.forward.prefill([s.tokens() for s in chosen], [s.blocks for s in chosen])
            if logits is None:
                logits = part.new_empty(len(leaders), part.shape[-1])
            logits[indices] = part
        for seq in leaders:
            self.prefix_hit_tokens += seq.cached
            self.prefill_tokens += len(seq) - seq.cached
        return logits

    def _decode(self, version: int) -> None:
        self._reserve_next_slots()
        batch = list(self.running)
        if not batch:
            return
        logits = self.forward.decode(
            [seq.generated[-1] for seq in batch],
            [seq.cached for seq in batch],
            [seq.blocks for seq in batch],
        )
        for seq in batch:
            seq.cached += 1
        self._sample_into(batch, logits, version)

    def _reserve_next_slots(self) -> None:
        """Give every running request a block for its next token, preempting when the pool is dry."""
        block = self.cache.block_size
        for seq in list(self.running):
            if seq not in self.running or seq.cached < len(seq.blocks) * block:
                continue
            while self.cache.pool.num_free == 0:
                victim = self.running[-1]
                self._preempt(victim)
                if victim is seq:
                    break
            if seq in self.running:
                seq.blocks += self.cache.pool.allocate(1)

    def _preempt(self, seq: Sequence) -> None:
        self.preemptions += 1
        self.running.remove(seq)
        self._release(seq)
        self.waiting.appendleft(seq)

    def _sample_into(self, batch: list[Sequence], logits, version: int) -> None:
        logits = self._guard_repeats(batch, logits)
        settings = BatchSampling(
            temperatures=[s.params.temperature for s in batch],
            top_ks=[s.params.top_k for s in batch],
            top_ps=[s.params.top_p for s in batch],
            uniforms=[s.uniform() for s in batch],
        )
        tokens, logprobs = sample(logits, settings, self.config.native_sampling)
        for seq, token, logprob in zip(batch, tokens, logprobs, strict=True):
            seq.append(token, logprob, version)

    @staticmethod
    def _guard_repeats(batch: list[Sequence], logits):
        """`logits` with the repeat guard's banned tokens at -inf in the rows that ask for it."""
        bans = [
            (row, sorted(banned_continuations(seq.generated, seq.params.max_repeats, seq.params.repeat_span)))
            for row, seq in enumerate(batch)
            if seq.params.max_repeats > 0
        ]
        bans = [(row, tokens) for row, tokens in bans if tokens]
        if not bans:
            return logits
        logits = logits.clone()
        for row, tokens in bans:
            logits[row, tokens] = float("-inf")
        return logits

    # ------------------------------------------------------------------ finishing

    def _retire_finished(self) -> None:
        still = []
        for seq in self.running:
            reason = seq.finish_reason(self.max_model_len, self.decode_text)
            if reason is None:
                still.append(seq)
            else:
                self._retire(seq, reason)
        self.running = still

    def _retire(self, seq: Sequence, reason) -> Completion:
        self._release(seq)
        completion = seq.completion(reason)
        if not seq.future.done():
            seq.future.set_result(completion)
        return completion

    def _release(self, seq: Sequence) -> None:
        if self.config.prefix_caching and seq.cache_epoch == self.cache_epoch and seq.blocks:
            # Its full blocks stay findable (prompt and tokens so far) until evicted or invalidated.
            full = seq.cached // self.cache.block_size
            self.cache.pool.register(self._digests(seq, full), seq.blocks[:full])
        self.cache.pool.release(seq.blocks)
        seq.blocks = []
        seq.cached = 0

"""The hf engine's generation loop: continuous batching over a KV cache, no wasted rows.

Input: generation units (one request's prompt, the sample indices it serves, the parsed
parameters) and a loaded :class:`~auditlang.engines.hf.HFEngine`. Output: one ``Sample`` per
(request, sample).

How it runs (docs/engines.md, "Generation"):
- One prefill per distinct prompt. Units are grouped by encoded prompt (a ``_Group``: every
  generate request of the call with that prompt, greedy or sampled, whatever its budget, stop
  strings or window); the prompt is prefilled ONCE and every row of the group (each greedy
  request, each sample of each sampled request) starts from a copy of that prefill's KV cache
  row and its last-position logits. ``GenStats.prefill_rows`` is the number of distinct prompts.
- Groups wait in a queue sorted by their longest token budget, longest first, then by prompt
  length (length buckets: each prefill pads little; on a CPU a prefill stops taking prompts
  where the padding a longer prompt would add costs more than a forward of its own,
  ``HFEngine._batch_cost``). Long generations start first, so the end of a call is not a few
  long rows decoding alone.
- A prefill forward takes waiting prompts while free rows remain. A group with more rows than
  are free (n samples above the batch cap, or a nearly full batch) is split across admissions,
  not prefilled again: its one-row cache and logits (the "seed") are kept at the head of the
  queue and later admissions fork rows from it until all its rows ran. The batch cap is never
  exceeded, and at most one seed is held at a time.
- Every decoding step feeds the live rows' last tokens. A row that finishes (EOS, stop string,
  budget) leaves the batch at once: its cache rows are dropped (``batch_select_indices``), so
  no forward computes a token nobody keeps. When enough rows are free, waiting rows are
  admitted and their caches joined to the running batch (left-padded to a common width;
  columns no live row uses are trimmed). Models whose cache is not plain (sliding-window
  layers, e.g. Gemma 3) refill only when the batch is empty.
- ``choice_logprobs`` riders of any request of a group are served from the group's prefill
  (its last-position log-softmax vector), at prefill time.
- ``GenStats`` counts forward passes, rows computed per forward ("row-steps") and tokens kept:
  row-steps per generated token is 1 when nothing is wasted (below 1 when rows share a prefill).

Per step the host receives the chosen ids, their logprobs and the top-k window in ONE copy.
On a GPU sampled rows are drawn there, all at once (``gen.sample_rows``: the Gumbel-max trick
with counter-based noise keyed by ``sample_seed(seed, i)`` and the token's position), so no
logits travel to the host; on a CPU each sampled row is drawn by ``torch.multinomial`` with its
own generator seeded ``sample_seed(seed, i)``. Either way a sample does not depend on what
shares its prefill or batch.
Left padding, explicit position ids and the attention mask are as in the rest of the engine,
so a row's logits equal its unbatched logits to float tolerance.
"""

from __future__ import annotations

import copy
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from auditlang.engines.gen import _GenState, _sample, sample_rows, sample_seed
from auditlang.core.engine import report_progress
from auditlang.core.requests import Sample, TokenLogprob

log = logging.getLogger("auditlang.engines.hf")


@dataclass
class GenUnit:
    """One generate request: its encoded prompt and the sample indices to compute (greedy: [0])."""

    owner: int  # index into the request list
    prompt: list[int]
    samples: list[int]
    spec: Any  # hf._GenSpec


@dataclass
class GenStats:
    """Counters of the generation loop (cumulative over an engine's life)."""

    forwards: int = 0
    prefill_rows: int = 0  # prompts prefilled (each distinct prompt once per run call)
    prefill_tokens: int = 0  # padded prompt tokens computed
    decode_row_steps: int = 0  # rows fed to decoding steps
    generated_tokens: int = 0  # tokens kept in samples
    refills: int = 0  # prefills joined to a running batch

    @property
    def row_steps(self) -> int:
        return self.prefill_rows + self.decode_row_steps

    @property
    def row_steps_per_token(self) -> float:
        return self.row_steps / self.generated_tokens if self.generated_tokens else 0.0

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["row_steps"] = self.row_steps
        d["row_steps_per_token"] = round(self.row_steps_per_token, 4)
        return d


@dataclass
class _Live:
    """A row being decoded: a (unit, sample) pair and what it produced so far."""

    unit: GenUnit
    sample: int
    gen: Any  # sampled rows: a torch.Generator (CPU) or the noise key sample_seed(seed, i) (GPU); greedy: None
    state: Any  # hf._GenState
    fed: int = 0  # generated tokens already in the KV cache
    credited: float = 0.0  # progress reported for it so far, per decoded token (see _consume)


@dataclass
class _Batch:
    """The running batch: host rows aligned with the device tensors."""

    rows: list[_Live] = field(default_factory=list)
    cache: Any = None
    mask: Any = None  # [rows, width] long
    pos: Any = None  # [rows, 1] next position id
    pending: Any = None  # [rows] last chosen ids, not yet fed


@dataclass
class _Seed:
    """A prompt's prefill kept for rows admitted later: a one-row cache and its step-0 vectors."""

    cache: Any
    logits: Any  # [1, vocab] float32
    lp: Any  # [1, vocab] log-softmax
    mask: Any  # [1, width]
    pos: Any  # [1, 1] next position id


@dataclass
class _Group:
    """One distinct encoded prompt of the call and every unit (request) generating from it."""

    prompt: list[int]
    units: list[GenUnit]
    todo: deque[tuple[GenUnit, int]] = field(default_factory=deque)  # (unit, sample) rows not started
    seed: _Seed | None = None  # set while some rows wait for free rows

    def take(self, k: int) -> list[tuple[GenUnit, int]]:
        return [self.todo.popleft() for _ in range(min(k, len(self.todo)))]


def group_by_prompt(units: list[GenUnit]) -> list[_Group]:
    """Units grouped by encoded prompt, in queue order: longest budget in the group first, then
    shorter prompts first (then plan order). Within a group rows run longest budget first."""
    groups: dict[tuple[int, ...], _Group] = {}
    for u in units:
        groups.setdefault(tuple(u.prompt), _Group(u.prompt, [])).units.append(u)
    for g in groups.values():
        g.units.sort(key=lambda u: (-u.spec.max_tokens, u.owner, u.samples[0]))
        g.todo.extend((u, s) for u in g.units for s in u.samples)
    key = lambda g: (-g.units[0].spec.max_tokens, len(g.prompt), min(u.owner for u in g.units))  # noqa: E731
    return sorted(groups.values(), key=key)


def fork_cache(cache: Any, rows: Any) -> Any:
    """A new cache holding ``cache``'s batch rows ``rows`` (an index tensor; repeats allowed);
    ``cache`` itself is left as it is (its layers' tensors are not modified in place)."""
    new = copy.copy(cache)
    new.layers = [copy.copy(layer) for layer in cache.layers]
    new.batch_select_indices(rows)
    return new


def plain_cache(cache: Any) -> bool:
    """True when every cache layer is a plain dynamic layer (keys/values [B, H, T, D]) that may be
    padded, concatenated and trimmed along T."""
    try:
        from transformers.cache_utils import DynamicLayer  # lazy: transformers only when a model runs
    except ImportError:
        return False
    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


class Decoder:
    """One call's generation: ``run(units)`` fills ``out[(owner, sample)] = Sample``."""

    def __init__(self, engine: Any, cap: int, riders: dict[int, list[Any]], rider_out: dict[int, Any],
                 stats: GenStats, out: dict[tuple[int, int], Any]) -> None:
        self.e, self.torch = engine, engine._torch
        self.cap = max(1, cap)
        self.riders, self.rider_out = riders, rider_out
        self.stats, self.out = stats, out
        # refill when this many rows are free: one prefill forward per refill, so on a GPU (where a
        # forward's cost hardly depends on its rows) wait for a quarter of the batch
        self.min_free = max(1, self.cap // (4 if engine.device.startswith("cuda") else 8))
        self.refill_ok = True
        self.cut_padding = not engine.device.startswith("cuda")  # on a GPU prefills stay full
        self.gpu_sampler = engine.device.startswith("cuda")  # gen.sample_rows; a CPU draws row by row

    def run(self, units: list[GenUnit]) -> None:
        torch = self.torch
        queue = deque(group_by_prompt(units))
        b = _Batch()
        with torch.inference_mode():
            while queue or b.rows:
                while queue and (not b.rows or (self.refill_ok and self.cap - len(b.rows) >= self.min_free)):
                    self._fill(b, queue)
                if b.rows:
                    self._step(b)

    # -- admission

    def _fill(self, b: _Batch, queue: deque[_Group]) -> None:
        """Admit waiting rows into the free rows of ``b``: the rest of a group prefilled earlier
        (forked from its seed, no forward), else one prefill forward of the prompts at the head
        of the queue while free rows remain (the last one taken may not fit: it keeps its seed
        and waits at the head)."""
        free = max(1, self.cap - len(b.rows))
        head = queue[0]
        if head.seed is not None:
            seed, rows = head.seed, head.take(free)
            last = not head.todo
            if last:
                queue.popleft()
                head.seed = None
            self._start(b, rows, [0] * len(rows), seed.logits, seed.lp, seed.cache, seed.mask, seed.pos, fork=not last)
            return
        groups = [queue.popleft()]
        n, width = len(groups[0].todo), len(groups[0].prompt)
        while queue and n < free:
            nxt = queue[0]
            # on a CPU, where padded tokens cost compute: the padding a longer prompt adds to the
            # forward vs a forward of its own (64 token-equivalents)
            if self.cut_padding and (len(nxt.prompt) - width) * len(groups) > self.e._batch_cost:
                break
            groups.append(queue.popleft())
            n, width = n + len(nxt.todo), max(width, len(nxt.prompt))
        self._prefill(b, groups, free, queue)

    def _prefill(self, b: _Batch, groups: list[_Group], free: int, queue: deque[_Group]) -> None:
        torch, e = self.torch, self.e
        dev = e.device
        ids, mask, pos = e._pad([g.prompt for g in groups])
        mask = mask.to(dev)
        out = e.model(input_ids=ids.to(dev), attention_mask=mask, position_ids=pos.to(dev), use_cache=True, logits_to_keep=1)
        self.stats.forwards += 1
        self.stats.prefill_rows += len(groups)
        self.stats.prefill_tokens += int(ids.numel())
        logits = out.logits[:, -1, :].float()
        lp = torch.log_softmax(logits, dim=-1)
        nxt = pos.to(dev)[:, -1:] + 1
        self._serve_riders(groups, lp)
        rows: list[tuple[GenUnit, int]] = []
        src: list[int] = []
        for g, group in enumerate(groups):
            got = group.take(free - len(rows))
            rows += got
            src += [g] * len(got)
        cache = out.past_key_values
        last = groups[-1]
        if last.todo:  # more rows than free ones: keep its prefill (one row) for later admissions
            g = len(groups) - 1
            at = torch.tensor([g], device=mask.device)
            last.seed = _Seed(fork_cache(cache, at), logits[g:g + 1], lp[g:g + 1], mask[g:g + 1], nxt[g:g + 1])
            queue.appendleft(last)
        self._start(b, rows, src, logits, lp, cache, mask, nxt, fork=False)

    def _start(self, b: _Batch, pairs: list[tuple[GenUnit, int]], src: list[int], logits: Any, lp: Any, cache: Any,
               mask: Any, pos: Any, fork: bool) -> None:
        """Start rows ``pairs`` from prefilled rows ``src`` (indices into ``logits``/``lp``/
        ``cache``/``mask``/``pos``): choose their first tokens and join the unfinished ones to
        ``b``. ``fork``: leave ``cache`` as it is (a seed that serves later admissions too)."""
        torch = self.torch
        rows = [_Live(u, s, self._generator(u, s), _new_state()) for u, s in pairs]
        if src != list(range(logits.shape[0])):  # rows share their prompt's prefill
            at = torch.tensor(src, device=logits.device)
            logits, lp = logits.index_select(0, at), lp.index_select(0, at)
        chosen, done = self._consume(rows, logits, lp)
        keep = [j for j, d in enumerate(done) if not d]
        if not keep:
            return
        kept = [src[j] for j in keep]
        sel = torch.tensor(kept, device=mask.device)
        if fork:
            cache = fork_cache(cache, sel)
        elif kept != list(range(mask.shape[0])):
            cache.batch_select_indices(sel)
        new = _Batch([rows[j] for j in keep], cache, mask.index_select(0, sel), pos.index_select(0, sel),
                     chosen.index_select(0, torch.tensor(keep, device=chosen.device)))
        if not b.rows:
            b.rows, b.cache, b.mask, b.pos, b.pending = new.rows, new.cache, new.mask, new.pos, new.pending
            self.refill_ok = plain_cache(b.cache)
            return
        self.stats.refills += 1
        self._join(b, new)

    def _serve_riders(self, groups: list[_Group], lp: Any) -> None:
        """Choice rows riding on a generation are scored from its prompt's prefill vector."""
        if not self.riders:
            return
        pairs = [(g, c) for g, group in enumerate(groups) for u in group.units for c in self.riders.get(u.owner, ())]
        if pairs:
            at = self.torch.tensor([g for g, _ in pairs], device=lp.device)
            self.rider_out.update(self.e._pick_labels(lp.index_select(0, at), [c for _, c in pairs]))

    def _join(self, b: _Batch, new: _Batch) -> None:
        """Append ``new``'s rows to the running batch, left-padding both to one width."""
        torch = self.torch
        F = torch.nn.functional
        wb, wn = b.mask.shape[1], new.mask.shape[1]
        w = max(wb, wn)
        for lb, ln in zip(b.cache.layers, new.cache.layers):
            lb.keys = torch.cat([F.pad(lb.keys, (0, 0, w - wb, 0)), F.pad(ln.keys, (0, 0, w - wn, 0))], dim=0)
            lb.values = torch.cat([F.pad(lb.values, (0, 0, w - wb, 0)), F.pad(ln.values, (0, 0, w - wn, 0))], dim=0)
        b.mask = torch.cat([F.pad(b.mask, (w - wb, 0)), F.pad(new.mask, (w - wn, 0))], dim=0)
        b.pos = torch.cat([b.pos, new.pos], dim=0)
        b.pending = torch.cat([b.pending, new.pending], dim=0)
        b.rows = b.rows + new.rows

    # -- decoding

    def _step(self, b: _Batch) -> None:
        torch, e = self.torch, self.e
        n = len(b.rows)
        b.mask = torch.cat([b.mask, torch.ones((n, 1), dtype=b.mask.dtype, device=b.mask.device)], dim=1)
        out = e.model(input_ids=b.pending[:, None], attention_mask=b.mask, position_ids=b.pos,
                      past_key_values=b.cache, use_cache=True)
        self.stats.forwards += 1
        self.stats.decode_row_steps += n
        b.cache, b.pos = out.past_key_values, b.pos + 1
        for r in b.rows:
            r.fed += 1
        logits = out.logits[:, -1, :].float()
        chosen, done = self._consume(b.rows, logits, torch.log_softmax(logits, dim=-1))
        b.pending = chosen
        if any(done):
            keep = [j for j, d in enumerate(done) if not d]
            b.rows = [b.rows[j] for j in keep]
            if not keep:
                b.cache = b.mask = b.pos = b.pending = None
                return
            at = torch.tensor(keep, device=b.mask.device)
            b.cache.batch_select_indices(at)
            b.mask, b.pos, b.pending = b.mask.index_select(0, at), b.pos.index_select(0, at), b.pending.index_select(0, at)
            self._trim(b)

    def _trim(self, b: _Batch) -> None:
        """Drop leading columns that no live row uses (after rows left or joined)."""
        if not self.refill_ok:
            return
        width = b.mask.shape[1]
        used = max(len(r.unit.prompt) + r.fed for r in b.rows)
        cut = width - used
        if cut < max(16, width // 8):  # slicing is free, but each cut is a new shape: do it in steps
            return
        for layer in b.cache.layers:
            layer.keys, layer.values = layer.keys[:, :, cut:, :], layer.values[:, :, cut:, :]
        b.mask = b.mask[:, cut:]

    def _consume(self, rows: list[_Live], logits: Any, lp: Any) -> tuple[Any, list[bool]]:
        """Choose each row's token (greedy argmax or a draw), record it; returns the chosen ids
        (device) and which rows are done."""
        torch, e = self.torch, self.e
        chosen = lp.argmax(-1)
        sampled = [j for j, r in enumerate(rows) if not r.unit.spec.greedy]
        if sampled and self.gpu_sampler:  # every sampled row at once, on the GPU (engines/gen.py sample_rows)
            at = torch.tensor(sampled, device=logits.device)
            drawn = sample_rows(torch, logits.index_select(0, at), [rows[j].unit.spec for j in sampled],
                                [rows[j].gen for j in sampled], [len(rows[j].state.tokens) for j in sampled])
            chosen[at] = drawn.to(chosen.dtype)
        elif sampled:  # on a CPU: each row by torch.multinomial with the sample's own generator
            host = logits[sampled].cpu()
            draws = [_sample(torch, host[m], rows[j].unit.spec, rows[j].gen) for m, j in enumerate(sampled)]
            chosen[sampled] = torch.tensor(draws, device=chosen.device)
        # the widest window any row needs at ITS position (first_top_logprobs widens position 0 only,
        # so decoding steps past the first token copy no 200-wide windows to the host)
        k = max(r.unit.spec.window_at(len(r.state.tokens)) for r in rows)
        parts = [chosen[:, None].double(), lp.gather(1, chosen[:, None]).double()]
        if k:
            vals, ids = torch.topk(lp, min(k, lp.shape[-1]), dim=-1)
            parts += [vals.double(), ids.double()]
        host = torch.cat(parts, dim=1).cpu().tolist()  # one device->host copy per step
        done: list[bool] = []
        step_work = 0.0  # progress inside long generations: a token is 1/max_tokens of its row's worth
        for r, h in zip(rows, host):
            s, st = r.unit.spec, r.state
            t = int(h[0])
            kk = min(s.window_at(len(st.tokens)), lp.shape[-1])
            # h = [id, logprob, k top values, k top ids]
            window = e._window([int(x) for x in h[2 + k: 2 + k + kk]], h[2: 2 + kk]) if kk else {}
            st.tokens.append(TokenLogprob(e.token_str(t), t, float(h[1]), window))
            st.ids.append(t)
            if t in e.eos_ids:
                st.done, st.reason = True, "stop"
            elif s.stop and e._hit_stop(st, s.stop):
                st.done, st.reason = True, "stop"
            elif len(st.ids) >= s.max_tokens:
                st.done, st.reason = True, "length"
            self.stats.generated_tokens += 1
            if st.done:
                self._finish(r)
            else:
                share = 1.0 / (len(r.unit.samples) * max(s.max_tokens, 1))
                r.credited += share
                step_work += share
            done.append(st.done)
        report_progress(e, step_work)  # so the count moves every step, not only when rows finish
        return chosen, done

    def _finish(self, r: _Live) -> None:
        st = r.state
        text = st.text if st.text is not None else self.e._decode(st.ids)
        self.out[(r.unit.owner, r.sample)] = Sample(text=text, tokens=st.tokens, finish_reason=st.reason)
        # a request's worth per finished request, less what its decoded tokens already reported
        report_progress(self.e, max(1.0 / len(r.unit.samples) - r.credited, 0.0))

    def _generator(self, u: GenUnit, s: int) -> Any:
        if u.spec.greedy:
            return None
        if self.gpu_sampler:  # the noise key of gen.sample_rows
            return sample_seed(u.spec.seed, s)
        return self.torch.Generator(device="cpu").manual_seed(sample_seed(u.spec.seed, s))


def _new_state() -> Any:
    return _GenState()

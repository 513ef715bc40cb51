# SPDX-License-Identifier: Apache-2.0
"""Explicit stream stimulus: one job format for the testbench, the cycle models and the CLI.

A *job* names, per stream port, its data (sources) or its expected transfer count (sinks)
and its own handshake **pattern**: on which clocks a source may raise ``valid`` and on which
clocks a sink raises ``ready``.  A pattern is a function of the clock number alone, so the
testbench and every cycle model read the same bit for the same port and clock, whatever
order they visit ports in, and no port's pattern depends on another's (the per-endpoint
pause generators of cocotbext-axi work the same way).

Patterns (:class:`Pattern`):

* ``Pattern.always()``: every clock (no idle cycles, no back-pressure);
* ``Pattern.bernoulli(prob, seed)``: each clock independently with probability ``prob``,
  from the port's own seeded generator (numpy PCG64, generated in blocks of 4096 clocks);
* ``Pattern.bits(seq)``: an explicit 0/1 sequence, repeated.

Source rule (AXI-Stream-like): a source that is not holding a word and has words left
raises ``valid`` in clock ``c`` iff its pattern allows ``c``; once raised, ``valid`` and the
payload stay until the word is accepted.  A sink drives ``ready`` = its pattern at ``c``.
Clock 0 is the first clock after the initial reset; the clock counter does not advance
during a mid-job reset (``reset_at``), after which sources restart from their first word.

:func:`make_job` is the one place a job dict is written; :func:`port_seed` derives each
port's seed from the job seed and the port name, so ``seed=`` keeps meaning "this run's
random stimulus" while every port draws alone.
"""

from dataclasses import dataclass
import zlib

import numpy as np

__all__ = ["Pattern", "port_seed", "pattern_for", "make_job", "normalise_job",
           "source_pattern", "sink_pattern", "job_patterns", "ModelSource", "rate_of"]

_BLOCK = 4096


def port_seed(seed: int, port: str) -> int:
    """A port's own seed: a stable function of the job seed and the port name."""
    return zlib.crc32(f"{int(seed)}:{port}".encode()) ^ (int(seed) << 32)


@dataclass(frozen=True)
class Pattern:
    """When a port may transfer: ``kind`` is ``always``, ``bernoulli`` or ``bits``."""

    kind: str = "always"
    prob: float = 1.0
    seed: int = 0
    seq: tuple = ()

    def __post_init__(self):
        if self.kind not in ("always", "bernoulli", "bits"):
            raise ValueError(f"pattern kind must be always, bernoulli or bits, not {self.kind!r}")
        if self.kind == "bernoulli" and not 0.0 < self.prob <= 1.0:
            raise ValueError(f"pattern probability must be in (0, 1], not {self.prob}")
        if self.kind == "bits" and (not self.seq or not any(self.seq)):
            raise ValueError("a bits pattern needs at least one 1")
        object.__setattr__(self, "_cache", [])

    @classmethod
    def always(cls):
        return cls("always")

    @classmethod
    def bernoulli(cls, prob: float, seed: int):
        return cls("always") if prob >= 1.0 else cls("bernoulli", float(prob), int(seed))

    @classmethod
    def bits(cls, seq):
        return cls("bits", seq=tuple(int(bool(b)) for b in seq))

    def at(self, cycle: int) -> bool:
        """May the port transfer in clock ``cycle``?"""
        if self.kind == "always":
            return True
        if self.kind == "bits":
            return bool(self.seq[cycle % len(self.seq)])
        cache = self._cache
        while len(cache) * _BLOCK <= cycle:
            rng = np.random.Generator(np.random.PCG64([self.seed, len(cache)]))
            cache.append(rng.random(_BLOCK) < self.prob)
        return bool(cache[cycle // _BLOCK][cycle % _BLOCK])

    def expand(self, n: int) -> np.ndarray:
        """``[self.at(c) for c in range(n)]`` as a bool array (the same bits, computed in
        blocks)."""
        if self.kind == "always":
            return np.ones(n, dtype=bool)
        if self.kind == "bits":
            seq = np.asarray(self.seq, dtype=bool)
            return np.tile(seq, -(-n // len(seq)))[:n]
        if n:
            self.at(n - 1)          # fills the block cache up to clock n - 1
        return np.concatenate(self._cache[:-(-n // _BLOCK)] or [np.zeros(0, bool)])[:n]

    @property
    def rate(self) -> float:
        """The long-run fraction of clocks allowed."""
        if self.kind == "bits":
            return sum(self.seq) / len(self.seq)
        return self.prob if self.kind == "bernoulli" else 1.0

    def to_json(self) -> dict:
        if self.kind == "always":
            return {"kind": "always"}
        if self.kind == "bits":
            return {"kind": "bits", "seq": list(self.seq)}
        return {"kind": "bernoulli", "prob": self.prob, "seed": self.seed}

    @classmethod
    def from_json(cls, spec) -> "Pattern":
        if isinstance(spec, Pattern):
            return spec
        if spec is None:
            return cls.always()
        kind = spec.get("kind", "always")
        if kind == "bits":
            return cls.bits(spec["seq"])
        if kind == "bernoulli":
            return cls.bernoulli(spec["prob"], spec["seed"])
        return cls.always()


def pattern_for(spec, seed, port) -> Pattern:
    """A pattern from a Pattern, a probability (seeded per port) or None (always)."""
    if spec is None:
        return Pattern.always()
    if isinstance(spec, Pattern):
        return spec
    if isinstance(spec, dict):
        return Pattern.from_json(spec)
    return Pattern.bernoulli(float(spec), port_seed(seed, port))


def rate_of(spec) -> float:
    """The long-run rate of a pattern spec (Pattern, probability or None), for timeouts."""
    if spec is None:
        return 1.0
    return spec.rate if isinstance(spec, Pattern) else Pattern.from_json(spec).rate \
        if isinstance(spec, dict) else float(spec)


def source_pattern(spec: dict) -> Pattern:
    """The valid pattern of a source entry of a job dict."""
    return Pattern.from_json(spec.get("valid"))


def sink_pattern(spec: dict) -> Pattern:
    """The ready pattern of a sink entry of a job dict."""
    return Pattern.from_json(spec.get("ready"))


def make_job(sources, sinks, *, seed=0, reset_at=None, max_cycles=100_000, **extra) -> dict:
    """The job dict that :func:`gen.core.sim.run_job` runs and the cycle models read.

    ``sources``: ``[(port, data, valid)]``, ``sinks``: ``[(port, count, ready)]``, where
    ``valid`` / ``ready`` is a :class:`Pattern`, a probability (a Bernoulli pattern with the
    port's own seed, :func:`port_seed`), or ``None`` (every clock).  ``extra`` keys
    (``reset_cycles``, ``drain_cycles``, ``watch``) pass through.
    """
    return {
        "sources": [{"port": p, "data": list(d), "valid": pattern_for(v, seed, p).to_json()}
                    for p, d, v in sources],
        "sinks": [{"port": p, "count": int(n), "ready": pattern_for(r, seed, p).to_json()}
                  for p, n, r in sinks],
        "seed": int(seed), "reset_at": reset_at, "max_cycles": int(max_cycles), **extra,
    }


def normalise_job(job: dict) -> dict:
    """``job`` with an explicit ``valid`` / ``ready`` pattern on every port.

    Entries written with a probability (``valid_prob`` / ``ready_prob``, the job ``seed``)
    get the Bernoulli pattern of their own port (:func:`port_seed`); entries without either
    transfer on every clock; an entry with both a pattern and a probability is an error."""
    seed = job.get("seed", 0)
    for kind, key, old in (("sources", "valid", "valid_prob"), ("sinks", "ready", "ready_prob")):
        for entry in job.get(kind, []):
            if key in entry and old in entry:
                raise ValueError(f"port {entry['port']!r} gives both {key!r} and {old!r}: "
                                 f"give one pattern")
    out = dict(job)
    out["sources"] = [{**{k: v for k, v in s.items() if k != "valid_prob"},
                       "valid": pattern_for(s.get("valid", s.get("valid_prob")), seed,
                                         s["port"]).to_json()}
                      for s in job.get("sources", [])]
    out["sinks"] = [{**{k: v for k, v in s.items() if k != "ready_prob"},
                     "ready": pattern_for(s.get("ready", s.get("ready_prob")), seed,
                                       s["port"]).to_json()}
                    for s in job.get("sinks", [])]
    return out


def job_patterns(job: dict) -> dict:
    """``{port: Pattern}`` of every source and sink of a (normalised or not) job."""
    norm = normalise_job(job)
    pats = {s["port"]: source_pattern(s) for s in norm["sources"]}
    pats.update({s["port"]: sink_pattern(s) for s in norm["sinks"]})
    return pats


class ModelSource:
    """A cycle model's view of one testbench source: its words (a count, or the words
    themselves as ``data`` when the model looks at them) and the port's pattern.

    Each clock: ``drive(cycle)`` (raise valid by the pattern unless holding), then
    ``take(ready, cycle)`` (a transfer when valid and ready), exactly as the testbench."""

    def __init__(self, words, pattern: Pattern):
        self.data = None if isinstance(words, (int, np.integer)) else list(words)
        self.n = int(words) if self.data is None else len(self.data)
        self.pattern = pattern
        self.idx, self.holding, self.cycles = 0, False, []

    def drive(self, cycle: int):
        if not self.holding and self.idx < self.n and self.pattern.at(cycle):
            self.holding = True

    @property
    def valid(self) -> bool:
        return self.holding

    def take(self, ready, cycle: int) -> bool:
        if self.holding and ready:
            self.cycles.append(cycle)
            self.idx += 1
            self.holding = False
            return True
        return False

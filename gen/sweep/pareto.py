# SPDX-License-Identifier: Apache-2.0
"""Pareto fronts of a sweep's summary: objectives, the non-dominated points, the plot.

An objective is a summary column (:mod:`gen.sweep.report`): ``cycles`` (summed over the
workloads), ``compute_cycles``, ``mac_units``, ``xc7.lut``, ``ecp5.fmax_mhz``, ``time_us``
(``cycles`` / the median ECP5 Fmax), ...  Fmax, efficiency and utilisation are maximised,
everything else minimised.  A spec names pairs with ``pareto: [[cycles, xc7.lut], ...]``;
without it the pairs follow the stages: end-to-end cycles against LUTs, DSPs and BRAM
(``synth`` on xc7), Fmax against LUTs and time against LUTs (ECP5), cycles against MAC
units (``model`` alone).
"""

import io

__all__ = ["objectives", "check_pairs", "default_pairs", "maximised", "front", "plot_png"]

_RESOURCES = ("lut", "ff", "dsp", "bram")


def maximised(name: str) -> bool:
    """Whether the objective ``name`` is better larger."""
    return name.endswith("fmax_mhz") or name in ("efficiency", "utilisation")


def _pnr_targets(spec):
    from gen.synth import TARGETS
    if "synth" not in spec.stages:
        return []
    return [t for t in spec.stages["synth"]["targets"] if TARGETS[t]["pnr"]]


def objectives(spec) -> list:
    """The numeric summary columns of a spec (what ``pareto`` pairs may name)."""
    from gen.sweep.blocks import MODEL_FIGURES, adapter
    out = []
    if "model" in spec.stages:
        out += [f for f in (*MODEL_FIGURES, *adapter(spec.block).figures)
                if f != "mapping_used"]
    if "synth" in spec.stages:
        for t in spec.stages["synth"]["targets"]:
            out += [f"{t}.{r}" for r in _RESOURCES]
        out += [f"{t}.fmax_mhz" for t in _pnr_targets(spec)]
        if "model" in spec.stages and _pnr_targets(spec):
            out.append("time_us")
    return out


def default_pairs(spec) -> list:
    """The pairs drawn when the spec names none (module docstring)."""
    model = "model" in spec.stages
    targets = spec.stages["synth"]["targets"] if "synth" in spec.stages else []
    pairs = []
    if "xc7" in targets:
        pairs += [["cycles", f"xc7.{r}"] for r in ("lut", "dsp", "bram")] if model \
            else [["xc7.lut", "xc7.dsp"]]
    for t in _pnr_targets(spec):
        pairs.append([f"{t}.fmax_mhz", f"{t}.lut"])
        if model and t == _pnr_targets(spec)[0]:
            pairs.append(["time_us", f"{t}.lut"])
    if model and not targets:
        pairs.append(["cycles", "mac_units"])
    return pairs


def check_pairs(value, spec) -> list:
    """The spec's ``pareto`` pairs, checked (one-line errors), or the defaults."""
    from gen.core.config import SpnnError
    if value is None:
        return default_pairs(spec)
    allowed = objectives(spec)
    if not isinstance(value, list) or not value:
        raise SpnnError(f"pareto: must be a list of [objective, objective] pairs, not "
                        f"{value!r}")
    for i, pair in enumerate(value):
        if not isinstance(pair, list) or len(pair) != 2 or pair[0] == pair[1]:
            raise SpnnError(f"pareto[{i}]: must be two different objectives, not {pair!r}")
        for name in pair:
            if name not in allowed:
                raise SpnnError(f"pareto[{i}]: {name!r} is not an objective of this sweep; "
                                f"objectives: {', '.join(allowed)}")
    return [list(p) for p in value]


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def front(rows, a: str, b: str) -> list:
    """Indices (into ``rows``, dicts of summary columns) of the points no other point
    beats on both ``a`` and ``b`` (each in its own direction); points lacking either are
    left out.  Equal points are all on the front."""
    pts = []
    for i, row in enumerate(rows):
        va, vb = _number(row.get(a)), _number(row.get(b))
        if va is not None and vb is not None:
            pts.append(((-va if maximised(a) else va), (-vb if maximised(b) else vb), i))
    pts.sort()
    out, best_b, last = [], None, None
    for va, vb, i in pts:
        if best_b is None or vb < best_b or (last is not None and (va, vb) == last):
            out.append(i)
            if best_b is None or vb < best_b:
                best_b = vb
            last = (va, vb)
    return sorted(out)


def _label(row, keys) -> str:
    return ", ".join(f"{k}={row.get(k)}" for k in keys)


def plot_png(rows, pairs, keys, title: str) -> bytes:
    """A PNG with one panel per pair: every point in grey, the front in red, its points
    labelled with their swept values.  Raises ImportError without matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = len(pairs)
    cols = 1 if n == 1 else 2
    nrows = -(-n // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(6.4 * cols, 4.8 * nrows), squeeze=False)
    for ax, (a, b) in zip(axes.ravel(), pairs):
        xs = [(r[a], r[b]) for r in rows if _number(r.get(a)) is not None
              and _number(r.get(b)) is not None]
        if xs:
            ax.scatter([v[0] for v in xs], [v[1] for v in xs], s=14, color="0.6",
                       label="design points")
        idx = front(rows, a, b)
        fr = sorted(((rows[i][a], rows[i][b], rows[i]) for i in idx), key=lambda t: t[:2])
        if fr:
            ax.plot([v[0] for v in fr], [v[1] for v in fr], "o-", color="tab:red",
                    markersize=5, drawstyle="steps-post" if not maximised(a) and
                    not maximised(b) else "default", label="Pareto front")
            for va, vb, row in fr[:12]:
                ax.annotate(_label(row, keys), (va, vb), fontsize=6, xytext=(3, 3),
                            textcoords="offset points")
        ax.set_xlabel(f"{a} ({'higher' if maximised(a) else 'lower'} is better)")
        ax.set_ylabel(f"{b} ({'higher' if maximised(b) else 'lower'} is better)")
        ax.set_title(f"{b} vs {a}", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()

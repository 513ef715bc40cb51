# SPDX-License-Identifier: Apache-2.0
"""Accuracy of the PWL sigmoid/tanh unit vs two common references.

For 8, 16, 32 and 64 segments (16-bit Q4.12 input, Q2.14 output), the golden
model (bit-exact with the RTL) is evaluated on every input code and compared
with scipy.special.expit / numpy.tanh.  References, quantised to the same output
format: a 1024-entry direct lookup table over [-8, 8) (the usual HLS default:
index = top 10 input bits, entry = f at the bin centre) and PLAN (Amin, Curtis
and Hayes-Gill 1997; tanh(x) = 2 * PLAN(2x) - 1).  Also runs the default units'
RTL (Verilator) on every code once to confirm RTL == golden, and the accelerator shell
(AXI4-Stream at 1, 4 and 16 words per beat, started over AXI4-Lite) on every code, end to
end against the bus roofline, with and without output back-pressure.

Writes build/bench/pwl.json, build/bench/pwl.md and build/bench/pwl_shell.md.
"""

import argparse
import json
from pathlib import Path

import numpy as np

from gen.core.fixed import QFormat, decode, quantise
from gen.pwl import PwlConfig, fit_table, float_func, ref_pwl

IN, OUT = QFormat(4, 12), QFormat(2, 14)
CODES = np.arange(IN.min_code, IN.max_code + 1, dtype=np.int64)
X = decode(CODES, IN)
TARGET = {"sigmoid": 2.0 ** -11, "tanh": 2.0 ** -10}


def plan_sigmoid(x):
    a = np.abs(x)
    y = np.select([a >= 5, a >= 2.375, a >= 1],
                  [np.ones_like(a), 0.03125 * a + 0.84375, 0.125 * a + 0.625], 0.25 * a + 0.5)
    return np.where(x < 0, 1 - y, y)


def reference_errors(func, truth):
    f = float_func(func)
    # Direct LUT: 1024 entries over [-8, 8), indexed by the top 10 bits of the code.
    index = (CODES - IN.min_code) >> 6
    centres = (np.arange(1024) * 64 + 32 + IN.min_code) * IN.lsb
    lut = quantise(f(centres), OUT)[index]
    if func == "sigmoid":
        plan = plan_sigmoid(X)
    else:
        plan = 2 * plan_sigmoid(2 * X) - 1
    plan = quantise(plan, OUT)
    out = {}
    for name, codes in (("lut1024", lut), ("plan", plan)):
        err = np.abs(decode(codes, OUT) - truth)
        out[name] = {"max_abs_error": float(err.max()), "mean_abs_error": float(err.mean())}
    return out


def rtl_check(func):
    from gen.pwl.twin import rtl_pwl
    from gen.core.sim import sim_available
    if not sim_available("verilator"):
        return None
    cfg = PwlConfig(func=func)
    y, result = rtl_pwl(CODES, cfg, "verilator", name=f"bench-{func}")
    cycles = result["sinks"]["o"]["cycles"][-1] - result["sources"]["i"]["cycles"][0] + 1
    return {"rtl_equals_golden": bool(np.array_equal(y, ref_pwl(CODES, fit_table(cfg)))),
            "cycles": cycles, "ideal_cycles": len(CODES) + cfg.latency}


def shell_rows():
    """End-to-end runs of the tanh shell on every input code (Verilator)."""
    from gen.core.sim import sim_available
    from gen.pwl.twin import rtl_pwl_axi
    if not sim_available("verilator"):
        return []
    rows = []
    for bus_words in (1, 4, 16):
        for ready in (1.0, 0.5):
            cfg = PwlConfig(func="tanh", bus_words=bus_words)
            print(f"shell: {bus_words} words per beat, output ready {ready}", flush=True)
            y, job = rtl_pwl_axi(CODES, cfg, "verilator", ready_prob=ready, seed=1,
                                 name=f"bench-shell-{bus_words}-{int(ready * 10)}")
            cycles = job["end"] - job["first_in"] + 1
            roof = -(-len(CODES) // bus_words) + cfg.latency
            rows.append({"bus_words": bus_words, "ready_prob": ready, "samples": len(CODES),
                         "cycles": cycles, "roofline_cycles": roof,
                         "roofline_efficiency": roof / cycles,
                         "words_per_clock": len(CODES) / cycles, "counters": job["counters"],
                         "rtl_equals_golden": bool(np.array_equal(
                             y, ref_pwl(CODES, fit_table(cfg))))})
    return rows


def shell_table(rows) -> str:
    lines = ["| words per beat | TDATA bits | output ready | cycles (end to end) | roofline "
             "| efficiency | words / clock | stall_out | RTL == golden |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['bus_words']} | {16 * r['bus_words']} | {r['ready_prob']:g} "
                     f"| {r['cycles']} | {r['roofline_cycles']} "
                     f"| {r['roofline_efficiency']:.3f} | {r['words_per_clock']:.2f} "
                     f"| {r['counters']['stall_out']} | {r['rtl_equals_golden']} |")
    lines += ["", f"tanh shell, all {len(CODES)} Q4.12 codes in one packet; cycles from the "
              "first input beat to the last output beat; roofline = one beat per clock plus "
              "the pipeline latency; output ready 0.5 = a seeded Bernoulli back-pressure "
              "pattern on m_axis_y."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.parse_args(argv)                  # no options: --help, and a typo exits 2
    rows, results = [], {"input_format": str(IN), "output_format": str(OUT), "functions": {}}
    for func in ("sigmoid", "tanh"):
        truth = float_func(func)(X)
        refs = reference_errors(func, truth)
        entry = {"references": refs, "pwl": {}}
        for segments in (8, 16, 32, 64):
            print(f"fitting {func} with {segments} segments", flush=True)
            table = fit_table(PwlConfig(func=func, segments=segments))
            entry["pwl"][segments] = {"max_abs_error": table.max_abs_error,
                                      "mean_abs_error": table.mean_abs_error,
                                      "placement": table.placement}
            rows.append((func, f"PWL {segments} seg ({table.placement})", table.max_abs_error,
                         table.mean_abs_error))
        for name, label in (("lut1024", "LUT 1024 entries"), ("plan", "PLAN")):
            rows.append((func, label, refs[name]["max_abs_error"], refs[name]["mean_abs_error"]))
        entry["target_32_segments"] = TARGET[func]
        entry["meets_target"] = entry["pwl"][32]["max_abs_error"] <= TARGET[func]
        print(f"running the {func} RTL on all {len(CODES)} codes", flush=True)
        entry["rtl"] = rtl_check(func)
        results["functions"][func] = entry

    lines = ["| function | method | max abs error | (log2) | mean abs error |",
             "|---|---|---|---|---|"]
    for func, label, mx, mean in rows:
        lines.append(f"| {func} | {label} | {mx:.3e} | {np.log2(mx):.2f} | {mean:.3e} |")
    lines.append("")
    lines.append("Input Q4.12 (every code in [-8, 8)), output Q2.14; references quantised to Q2.14. "
                 "Targets at 32 segments: sigmoid <= 2^-11, tanh <= 2^-10 — "
                 + ", ".join(f"{f}: {'met' if e['meets_target'] else 'MISSED'}"
                             for f, e in results["functions"].items()) + ".")
    out = Path("build/bench")
    out.mkdir(parents=True, exist_ok=True)
    (out / "pwl.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "pwl.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    shell = shell_rows()
    if shell:
        results["shell"] = shell
        (out / "pwl.json").write_text(json.dumps(results, indent=2) + "\n")
        (out / "pwl_shell.md").write_text(shell_table(shell))
        print(shell_table(shell))
    for func, entry in results["functions"].items():
        if entry["rtl"]:
            print(f"{func}: RTL == golden on every code: {entry['rtl']['rtl_equals_golden']}, "
                  f"cycles {entry['rtl']['cycles']} (ideal {entry['rtl']['ideal_cycles']})")


if __name__ == "__main__":
    main()

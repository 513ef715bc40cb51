# SPDX-License-Identifier: Apache-2.0
"""Train, prune and run a small LSTM digit classifier on the LSTM engine.

scikit-learn's ``load_digits`` (shipped inside the package, never downloaded): each
8x8 image is read as 8 timesteps (rows) of 8 features (pixel / 16).  A one-layer
``nn.LSTM(8, H)`` + ``nn.Linear(H, 10)`` on the last hidden state is trained on CPU,
magnitude-pruned (stacked ``[W_ih W_hh]``) in steps to the target density with
fine-tuning, and evaluated on the held-out 25 % split as:

* float dense, float pruned (PyTorch);
* fixed-point golden (:func:`gen.lstm.ref_lstm` on the quantised layer; the 10-way
  linear read-out is applied in float to the decoded ``h_T``);
* RTL (:func:`gen.lstm.rtl_lstm` under Verilator, every test sequence in one job;
  checked bit-exact against the golden model on every sample).

Writes ``build/bench/lstm_digits.json`` and ``.md``, the pruned model's state dict
``build/bench/lstm_digits.pt`` (loadable by ``spnn run lstm --model``), the pruned network
as ONNX ``build/bench/lstm_digits.onnx`` (``torch.onnx.export(..., dynamo=False)``, input
``x`` of shape (batch, 8, 8), output ``y`` the 10 logits; for ``spnn compile``) and the
data as ``.npy``: ``lstm_digits_test_x.npy`` (450, 8, 8) float32,
``lstm_digits_test_y.npy`` int64 labels, ``lstm_digits_calib_x.npy`` the first 256
training sequences (``spnn compile --calib``; ``scripts/bench_model.py`` runs them).

Usage: ``python scripts/train_lstm_digits.py [--hidden 32] [--density 0.2] [--no-rtl]
[--sim verilator]``
"""

import argparse
import json
from pathlib import Path
import sys
import time

import numpy as np

REPO = Path(__file__).resolve().parents[1]

from gen.core.fixed import decode, quantise
from gen.lstm import LstmConfig, compile_lstm, model_from_dict, prune_lstm, quantise_lstm, ref_lstm
from gen.lstm.twin import rtl_lstm


def log(msg):
    print(msg, flush=True)


def export_onnx(torch, net, example, path):
    """``net`` as ONNX through the TorchScript exporter (input ``x``, batch axis dynamic);
    its warnings about batch-first LSTMs are silenced."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, example, str(path), dynamo=False, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--density", type=float, default=0.18, help="kept fraction (0.18 = 82 %% sparse)")
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--finetune", type=int, default=25, help="fine-tuning epochs per step")
    ap.add_argument("--pes", type=int, default=8)
    ap.add_argument("--no-rtl", action="store_true", help="skip the RTL run")
    ap.add_argument("--sim", default="verilator", choices=["verilator", "icarus"])
    ap.add_argument("--out", default=str(REPO / "build" / "bench"))
    args = ap.parse_args(argv)

    import torch
    from torch import nn
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    t_start = time.time()
    torch.manual_seed(0)
    np.random.seed(0)
    torch.set_num_threads(1)
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)          # (n, 8, 8) in [0, 1]
    xtr, xte, ytr, yte = train_test_split(images, digits.target, test_size=0.25,
                                          random_state=0, stratify=digits.target)
    log(f"[data] load_digits: {len(xtr)} train / {len(xte)} test sequences of 8 x 8")
    xtr_t, ytr_t = torch.tensor(xtr), torch.tensor(ytr)
    xte_t = torch.tensor(xte)
    H = args.hidden

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(8, H, batch_first=True)
            self.fc = nn.Linear(H, 10)

        def forward(self, x):
            out, _ = self.lstm(x)
            return self.fc(out[:, -1])

    net = Net()
    masks = {}

    def apply_masks():
        with torch.no_grad():
            for name, mask in masks.items():
                getattr(net.lstm, name).mul_(mask)

    def train(epochs, lr):
        opt = torch.optim.Adam(net.parameters(), lr=lr)
        gen = torch.Generator().manual_seed(len(masks) * 1000 + epochs)
        for _ in range(epochs):
            perm = torch.randperm(len(xtr_t), generator=gen)
            for k in range(0, len(perm), 64):
                idx = perm[k:k + 64]
                opt.zero_grad()
                loss = nn.functional.cross_entropy(net(xtr_t[idx]), ytr_t[idx])
                loss.backward()
                opt.step()
                apply_masks()

    def accuracy(logits):
        return float((np.argmax(logits, axis=1) == yte).mean() * 100)

    def float_acc():
        with torch.no_grad():
            return accuracy(net(xte_t).numpy())

    train(args.epochs, 1e-2)
    acc_dense = float_acc()
    log(f"[train] float dense: {acc_dense:.2f} % ({time.time() - t_start:.1f} s)")

    # gradual magnitude pruning of the stacked [W_ih W_hh], fine-tuning after each step
    for dens in np.geomspace(0.6, args.density, 4):
        state = {k: v.detach().numpy() for k, v in net.lstm.state_dict().items()}
        pruned = prune_lstm(model_from_dict(state), float(dens))
        masks = {"weight_ih_l0": torch.tensor(pruned.w_ih != 0, dtype=torch.float32),
                 "weight_hh_l0": torch.tensor(pruned.w_hh != 0, dtype=torch.float32)}
        apply_masks()
        train(args.finetune, 3e-3)
        log(f"[prune] density {dens:.3f}: {float_acc():.2f} %")
    train(args.finetune, 1e-3)
    acc_pruned = float_acc()
    layer = model_from_dict({k: v.detach().numpy() for k, v in net.lstm.state_dict().items()})
    sparsity = 1.0 - layer.density
    log(f"[prune] float pruned: {acc_pruned:.2f} % at {sparsity * 100:.1f} % sparsity "
        f"({time.time() - t_start:.1f} s)")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.save(net.lstm.state_dict(), out_dir / "lstm_digits.pt")
    export_onnx(torch, net.eval(), xte_t[:1], out_dir / "lstm_digits.onnx")
    np.save(out_dir / "lstm_digits_test_x.npy", xte.astype(np.float32))
    np.save(out_dir / "lstm_digits_test_y.npy", np.asarray(yte, dtype=np.int64))
    np.save(out_dir / "lstm_digits_calib_x.npy", xtr[:256].astype(np.float32))
    fc_w = net.fc.weight.detach().numpy().astype(np.float64)
    fc_b = net.fc.bias.detach().numpy().astype(np.float64)
    t_train = time.time() - t_start

    # fixed point
    cfg = LstmConfig(pes=args.pes, max_inputs=8, max_hidden=H, fifo_depth=8, mem_depth=512)
    q = quantise_lstm(layer, cfg)
    sat = int(np.sum(np.abs(layer.w_ih) >= cfg.w_fmt.max_value)
              + np.sum(np.abs(layer.w_hh) >= cfg.w_fmt.max_value))
    xq = [quantise(x, cfg.x_fmt) for x in xte]
    golden = [ref_lstm(q, x, cfg)[0] for x in xq]
    h_last = np.array([decode(g[-1], cfg.x_fmt) for g in golden])
    acc_fixed = accuracy(h_last @ fc_w.T + fc_b)
    with torch.no_grad():
        h_float = net.lstm(xte_t)[0].numpy()
    dev = max(float(np.max(np.abs(decode(g, cfg.x_fmt) - hf))) for g, hf in zip(golden, h_float))
    log(f"[fixed] golden: {acc_fixed:.2f} %, max |h - float pruned h| = {dev:.4f}, "
        f"saturated weights {sat}")

    plan = compile_lstm(q, cfg)
    result = {"dataset": "sklearn load_digits (8 steps x 8 features)", "hidden": H,
              "train": len(xtr), "test": len(xte), "density": layer.density,
              "sparsity": sparsity, "nnz": q.nnz, "accuracy": {
                  "float_dense": acc_dense, "float_pruned": acc_pruned,
                  "fixed_golden": acc_fixed, "rtl": None},
              "fixed_vs_float_pruned_points": acc_fixed - acc_pruned,
              "max_abs_h_deviation": dev, "saturated_weights": sat,
              "formats": {k: v["name"] for k, v in cfg.formats().items()},
              "pes": cfg.pes, "load": plan.load_report(), "train_seconds": t_train,
              "rtl_bit_exact": None}
    if not args.no_rtl:
        t0 = time.time()
        log(f"[rtl] {len(xq)} sequences on {args.sim} ...")
        outs, res = rtl_lstm(plan, [(x, None, None) for x in xq], args.sim, name="digits")
        exact = all(np.array_equal(o, g) for o, g in zip(outs, golden))
        h_rtl = np.array([decode(o[-1], cfg.x_fmt) for o in outs])
        acc_rtl = accuracy(h_rtl @ fc_w.T + fc_b)
        steps = len(xq) * 8
        result["accuracy"]["rtl"] = acc_rtl
        result["rtl_bit_exact"] = exact
        result["rtl_sim"] = args.sim
        result["rtl_cycles"] = res["cycles_run"]
        result["rtl_cycles_per_step"] = res["cycles_run"] / steps
        log(f"[rtl] {acc_rtl:.2f} %, bit-exact with golden on every sample: {exact} "
            f"({res['cycles_run']} cycles, {time.time() - t0:.1f} s)")
    (out_dir / "lstm_digits.json").write_text(json.dumps(result, indent=2) + "\n")
    acc = result["accuracy"]
    rtl = f"{acc['rtl']:.2f}" if acc["rtl"] is not None else "not run"
    md = ["# LSTM digits (sklearn load_digits, 8 steps x 8 features)", "",
          f"H = {H}, density {layer.density:.3f} ({sparsity * 100:.1f} % sparse, "
          f"{q.nnz} non-zeros), P = {cfg.pes}, formats: w {cfg.w_fmt}, x/h {cfg.x_fmt}, "
          f"c {cfg.c_fmt}, pre {cfg.pre_fmt}, act {cfg.act_fmt}", "",
          "| model | test accuracy (%) |", "|---|---|",
          f"| float dense | {acc_dense:.2f} |", f"| float pruned | {acc_pruned:.2f} |",
          f"| fixed-point golden | {acc_fixed:.2f} |", f"| RTL ({args.sim}) | {rtl} |", "",
          f"RTL bit-exact with golden on every test sample: {result['rtl_bit_exact']}; "
          f"training + pruning {t_train:.1f} s on CPU."]
    (out_dir / "lstm_digits.md").write_text("\n".join(md) + "\n")
    log(f"[done] wrote {out_dir / 'lstm_digits.json'} and .md ({time.time() - t_start:.1f} s)")
    ok = abs(acc_fixed - acc_pruned) <= 1.0 and sparsity >= 0.8 and (
        args.no_rtl or result["rtl_bit_exact"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

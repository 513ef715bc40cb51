# SPDX-License-Identifier: Apache-2.0
"""Rewrite docs/control-registers.md from hdl/lib/control.rdl (PeakRDL-markdown).

    python -m scripts.write_regs_doc
"""

from pathlib import Path

from gen.core.regmap import compile_rdl, markdown

DOC = Path(__file__).resolve().parents[1] / "docs" / "control-registers.md"
HEAD = ("<!-- Generated from hdl/lib/control.rdl by `python -m scripts.write_regs_doc`; "
        "do not edit. -->\n\n# Control registers of every accelerator shell\n\n")


def text() -> str:
    return HEAD + markdown(compile_rdl())


def main():
    DOC.write_text(text())
    print(DOC)


if __name__ == "__main__":
    main()

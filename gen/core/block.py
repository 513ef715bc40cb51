# SPDX-License-Identifier: Apache-2.0
"""The block contract: what every block provides, once, in its own packages.

A block lives in three packages of the same name:

* ``hdl/<name>/`` -- the gateware.  Its ``__init__`` exports ``GATEWARE``, a
  :class:`Gateware`: how a config becomes the top-level ``wiring.Component``.
* ``gen/<name>/`` -- the config class, golden model and cycle model (re-exported by the
  package), the RTL twin (``twin.py``), the ``spnn run <name>`` command (``cli.py``) and
  ``block.py``, whose ``BLOCK`` (a :class:`Block`) ties them together.
* ``tb/<name>/`` -- the tests; ``docs/<name>.md`` -- the reference.

:mod:`gen.registry` lists every ``BLOCK``; the CLI (``spnn verilog|info|run|synth|vivado``),
``make verilog``, synthesis, the waveform regressions and the tests all read it.  Adding a
block touches its own packages and one line of the registry.

Layering (imports only go downward; ``tb/test_imports.py`` checks it)::

    gen.cli, gen.synth, tb, scripts
    gen.registry
    gen.<name>.block
    gen.<name>.twin, gen.<name>.cli
    hdl.<name>                    (imports gen.<name> and gen.core)
    gen.<name>                    (config, golden model, cycle model: numpy only)
    gen.core                      (fixed point, config parsing, stimulus, simulation runner)
"""

from dataclasses import dataclass, field
from typing import Callable

__all__ = ["Gateware", "Block", "WaveCase", "HEAP_TIMING_DEFAULT"]

# nextpnr's own heap-placer timing settings: --placer-heap-timingweight, --placer-heap-critexp
HEAP_TIMING_DEFAULT = (10, 2)


def _module_name(cfg) -> str:
    return cfg.module_name


@dataclass(frozen=True)
class Gateware:
    """How a block's config becomes its top-level component.

    ``build(cfg)`` returns the Amaranth ``wiring.Component``; it has ``latency``, ``ii`` and
    ``port_info()`` (format and protocol per top-level member) and may have
    ``manifest_extra()`` (block-specific manifest fields, e.g. memory layouts).
    ``module_name(cfg)`` is the Verilog module name.  The simulation runner
    (:func:`gen.core.sim.run_job`) and the emitter (:mod:`gen.core.emit`) need nothing else.
    """

    name: str
    build: Callable
    module_name: Callable = _module_name


@dataclass(frozen=True)
class WaveCase:
    """One waveform regression: ``run(sim)`` returns a :func:`gen.core.sim.run_job` result
    traced with ``watch`` (per-cycle signal values beside every stream transfer); the trace
    is compared with ``tb/golden/<name>.trace`` clock for clock."""

    name: str
    run: Callable
    watch: tuple = ()


@dataclass(frozen=True)
class Block:
    """Everything the tools know about one block.

    Parameters
    ----------
    name : str
        The block's one name: ``hdl/<name>/``, ``gen/<name>/``, ``tb/<name>/``,
        ``docs/<name>.md``, ``spnn run <name>``.
    summary : str
        One line for ``spnn info``.
    config_cls : type
        The frozen config dataclass (every field settable with ``--set``).
    gateware : Gateware
        From ``hdl/<name>``.
    defaults : callable
        ``() -> [config, ...]``: the configurations ``spnn verilog --all`` emits and
        ``make synth`` measures.
    golden : callable
        The bit-exact golden model (codes in, codes out).
    cycle_model : callable
        The exact cycle model (per-port transfer cycles under the job's patterns).
    twin : callable
        The RTL twin of ``golden``: the same call through the generated Verilog.
    cli : module
        ``spnn run <name>``: ``HELP``, ``DESCRIPTION``, ``add_arguments(parser)``,
        ``run(args) -> int``.
    commands : tuple
        Further top-level commands of the block: modules with ``register(subparsers)``.
    waves : tuple of WaveCase
        The block's waveform regressions.
    shell : Gateware or None
        The accelerator shell (AXI4-Stream at the config's ``bus_words``, AXI4-Lite
        control; ``hdl/<name>/shell.py``) that ``spnn vivado`` packages as IP.
    placer, heap_timing :
        nextpnr placer ``spnn synth`` uses unless told otherwise, and the heap placer's
        ``(timing weight, criticality exponent)`` (chosen by measurement, docs/synth.md).
    shell_placer : str or None
        The placer for the accelerator shell (``spnn synth --shell``); None: ``placer``.
    """

    name: str
    summary: str
    config_cls: type
    gateware: Gateware
    defaults: Callable
    golden: Callable
    cycle_model: Callable
    twin: Callable
    cli: object
    commands: tuple = ()
    waves: tuple = field(default=())
    shell: Gateware | None = None
    placer: str = "heap"
    heap_timing: tuple = HEAP_TIMING_DEFAULT
    shell_placer: str | None = None

    def build(self, cfg):
        """The top-level component for ``cfg``."""
        return self.gateware.build(cfg)

    def module_name(self, cfg) -> str:
        return self.gateware.module_name(cfg)

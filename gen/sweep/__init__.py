# SPDX-License-Identifier: Apache-2.0
"""Design-space sweeps on Dask (``spnn sweep``; docs/sweep.md).

``spec`` reads and expands ``SPEC.yaml`` into design points, ``workloads`` loads what the
points run, ``blocks`` is each block's ``model`` / ``rtl`` stage, ``tasks`` the unit of work
and its results key (and what a worker runs), ``results`` the crash-safe ``results.csv``,
``run`` the Dask execution (embedded LocalCluster, an existing scheduler, or serial),
``pareto`` and ``report`` the summary, Pareto fronts and plot, ``cli`` the command.
"""

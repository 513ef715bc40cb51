# SPDX-License-Identifier: Apache-2.0
"""Requantisation of the banked array's jobs in its shell (``BankedConfig.rq_width`` > 0).

The shell's :class:`hdl.lib.requant.RequantStage` maps each output beat to one channel, so a
requantising job uses the channel-aligned output layout (``align``,
:mod:`gen.conv.banked.job`): a strip's channel ``r`` is ``cb = ceil(P / bw)`` beats, the last
one holding ``P - (cb - 1) bw`` results.  A job's beats then run through its channels in the
order ``g = 0`` strip 0 (``r = 0 .. R - 1``), ``g = 0`` strip 1, ..., ``g = 1`` strip 0, ...:
channel ``g R + r`` of the job (layer channel ``oc0 + g R + r``) for ``cb`` beats at a time.
The stage follows that order with its registers ``RQ_POSITIONS = cb``, ``RQ_CHANNELS = G R``
and ``RQ_STRIPS`` (``value = S``, ``group = R``): the biases of the job's ``G R`` channels
are loaded in channel order (:func:`job_biases`).

:func:`requant_fields` gives the register values, :func:`requant_job` the bit-exact golden
(:func:`gen.core.fixed.requant_sums` on the job's exact sums).
"""

import numpy as np

from gen.core.fixed import requant_sums

from gen.conv.banked.job import BankedJob

__all__ = ["requant_fields", "job_biases", "requant_job"]


def requant_fields(job: BankedJob) -> dict:
    """The stage's per-job register values: ``positions`` (``RQ_POSITIONS``: beats per
    channel of a strip), ``channels`` (``RQ_CHANNELS``: ``G R``), ``strips`` and ``group``
    (``RQ_STRIPS``: ``S`` and ``R``).  Needs a job with ``align``."""
    if not job.align:
        raise ValueError("requantisation needs a job with the channel-aligned output layout "
                         "(align)")
    return {"positions": job.cb, "channels": job.G * job.R, "strips": job.S, "group": job.R}


def job_biases(job: BankedJob, bias) -> np.ndarray:
    """The biases of the job's ``G R`` channels in load order: ``bias`` is either those
    (``G R`` values) or the layer's ``Oc`` (sliced from ``oc0``)."""
    b = np.asarray(bias, dtype=np.int64).ravel()
    n = job.G * job.R
    if len(b) == n:
        return b
    if len(b) == job.layer.oc:
        return b[job.oc0:job.oc0 + n]
    raise ValueError(f"{len(b)} biases for a job of {n} channels of a layer of "
                     f"{job.layer.oc}")


def requant_job(y, job: BankedJob, rq, width: int, bias=None) -> np.ndarray:
    """Golden model of the shell's output stage on a job: the layer's exact sums ``y``
    ``(B, Oc, Ho, Wo)`` (or ``(Oc, Ho, Wo)``) requantised at the job's channels and strips
    (zeros elsewhere, as :func:`gen.conv.banked.assemble` leaves them).  ``rq`` a
    :class:`gen.core.fixed.Requant`; ``bias`` the biases in effect when ``rq.bias`` is None
    (the last load's; default zeros), as :func:`job_biases` takes them."""
    y = np.asarray(y, dtype=np.int64)
    if y.ndim == 3:
        y = y[None]
    L = job.layer
    n = job.G * job.R
    src = rq.bias if rq.bias is not None else bias
    b = job_biases(job, src) if src is not None else np.zeros(n, dtype=np.int64)
    out = np.zeros((L.batch, L.oc, L.ho, L.wo), dtype=np.int64)
    c0, c1 = job.oc0, job.oc0 + n
    for im, ys, xs in job.regions():
        out[im, c0:c1, ys, xs] = requant_sums(y[im, c0:c1, ys, xs], b[:, None, None],
                                              mult=rq.mult, shift=rq.shift, width=width,
                                              relu=rq.relu)
    return out

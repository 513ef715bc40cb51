# SPDX-License-Identifier: Apache-2.0
"""The LSTM engine: config, model loading, compiler, golden and cycle models.

The package re-exports the numpy-only layer: ``config`` (:class:`LstmConfig`, gate order,
stream word kinds), ``weights`` (float and integer layers: import, pruning, quantisation),
``golden`` (float reference and bit-exact golden model), ``compile`` (the weight compiler),
``words`` (the ``w`` and ``x`` streams) and ``cycles`` (the exact cycle model).  The RTL
twin is ``twin``, the ``spnn`` command ``cli``, the block contract ``block``.
"""

from gen.lstm import compile, config, cycles, golden, weights, words
from gen.lstm.compile import *  # noqa: F401,F403
from gen.lstm.config import *  # noqa: F401,F403
from gen.lstm.cycles import *  # noqa: F401,F403
from gen.lstm.golden import *  # noqa: F401,F403
from gen.lstm.weights import *  # noqa: F401,F403
from gen.lstm.words import *  # noqa: F401,F403

__all__ = (config.__all__ + weights.__all__ + golden.__all__ + compile.__all__ + words.__all__
           + cycles.__all__)

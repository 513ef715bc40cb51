# SPDX-License-Identifier: Apache-2.0
"""Lane words <-> stream beats: the weight streams that carry several words per transfer
(spmv, lstm, conv), word ``k`` of a beat in bits ``k * width ..`` (lane 0 in the LSBs)."""

__all__ = ["pack_beat", "beat_words", "lane_beats"]


def pack_beat(words, width: int) -> int:
    """One beat from its lane words (unsigned ``width``-bit patterns)."""
    beat = 0
    for k, word in enumerate(words):
        beat |= int(word) << (k * width)
    return beat


def beat_words(beats, lanes: int, width: int) -> list:
    """The lane words of ``beats``, beat by beat, lane 0 first."""
    mask = (1 << width) - 1
    return [(int(beat) >> (k * width)) & mask for beat in beats for k in range(lanes)]


def lane_beats(lanes, width: int, nop: int, end: int) -> list:
    """Per-lane word lists as beats: the lanes padded with ``nop`` to equal length, then one
    beat of ``end`` words."""
    n = max(len(lane) for lane in lanes)
    beats = [pack_beat([lane[i] if i < len(lane) else nop for lane in lanes], width)
             for i in range(n)]
    return beats + [pack_beat([end] * len(lanes), width)]

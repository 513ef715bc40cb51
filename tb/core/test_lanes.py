# SPDX-License-Identifier: Apache-2.0
"""gen.core.lanes: lane words <-> beats."""

from gen.core.lanes import beat_words, lane_beats, pack_beat


def test_lane_beats_pad_and_end():
    beats = lane_beats([[1, 2, 3], [4], []], 4, nop=0xE, end=0xF)
    assert beats == [pack_beat([1, 4, 0xE], 4), pack_beat([2, 0xE, 0xE], 4),
                     pack_beat([3, 0xE, 0xE], 4), pack_beat([0xF] * 3, 4)]
    assert beats[0] == 1 | 4 << 4 | 0xE << 8
    assert beat_words(beats, 3, 4) == [1, 4, 14, 2, 14, 14, 3, 14, 14, 15, 15, 15]
    assert lane_beats([[], []], 4, nop=0, end=7) == [0x77]

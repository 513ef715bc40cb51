# SPDX-License-Identifier: Apache-2.0
"""Convolution-layer shapes of AlexNet, VGG16 and ResNet-18, written out.

Each layer is ``(name, Oc, Ic, H, W, k, stride, pad)`` with square kernels, ``H x W`` the
input map size (before padding).  Only convolutions are listed (pooling and fully connected
layers do not run on the MAC array).

* AlexNet: the single-tower variant with the original channel counts (96, 256, 384, 384,
  256) that the seed quotes, without the two-GPU channel groups (conv2/4/5 see all input
  channels), 227 x 227 input.
* VGG16: configuration D, 224 x 224 input, 13 layers of 3 x 3, stride 1, pad 1.
* ResNet-18: 224 x 224 input; the 7 x 7 stem, 16 layers of 3 x 3 in the basic blocks and
  the three 1 x 1 stride-2 projection shortcuts.
"""

__all__ = ["NETWORKS", "layer_macs"]


def _alexnet():
    return [
        ("conv1", 96, 3, 227, 227, 11, 4, 0),
        ("conv2", 256, 96, 27, 27, 5, 1, 2),
        ("conv3", 384, 256, 13, 13, 3, 1, 1),
        ("conv4", 384, 384, 13, 13, 3, 1, 1),
        ("conv5", 256, 384, 13, 13, 3, 1, 1),
    ]


def _vgg16():
    spec = [(64, 224), (64, 224), (128, 112), (128, 112), (256, 56), (256, 56), (256, 56),
            (512, 28), (512, 28), (512, 28), (512, 14), (512, 14), (512, 14)]
    names = ["conv1_1", "conv1_2", "conv2_1", "conv2_2", "conv3_1", "conv3_2", "conv3_3",
             "conv4_1", "conv4_2", "conv4_3", "conv5_1", "conv5_2", "conv5_3"]
    layers, ic = [], 3
    for name, (oc, size) in zip(names, spec):
        layers.append((name, oc, ic, size, size, 3, 1, 1))
        ic = oc
    return layers


def _resnet18():
    layers = [("conv1", 64, 3, 224, 224, 7, 2, 3)]
    ic, size = 64, 56
    for stage, oc in enumerate((64, 128, 256, 512), start=1):
        for block in range(2):
            stride = 2 if (block == 0 and stage > 1) else 1
            out = size // stride
            layers.append((f"layer{stage}.{block}.conv1", oc, ic, size, size, 3, stride, 1))
            layers.append((f"layer{stage}.{block}.conv2", oc, oc, out, out, 3, 1, 1))
            if stride == 2:
                layers.append((f"layer{stage}.{block}.downsample", oc, ic, size, size, 1, 2, 0))
            ic, size = oc, out
    return layers


NETWORKS = {"alexnet": _alexnet(), "vgg16": _vgg16(), "resnet18": _resnet18()}


def layer_macs(layer) -> int:
    """Multiply-accumulates of one layer tuple."""
    _, oc, ic, h, w, k, s, p = layer
    ho = (h + 2 * p - k) // s + 1
    wo = (w + 2 * p - k) // s + 1
    return oc * ic * k * k * ho * wo

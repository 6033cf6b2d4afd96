"""The published CIFAR-10-C / CIFAR-100-C sets: file names, severity blocks and md5 tables."""
from __future__ import annotations

from typing import Sequence

OFFICIAL_SEVERITIES = (1, 2, 3, 4, 5)
OFFICIAL_BLOCK = 10_000


# md5 of the extracted official files, as published by rai_toolbox (CORRUPTIONS.md section 3; not independently
# verified).
CIFAR10C_MD5 = {
    "brightness": "0a81ef75e0b523c3383219c330a85d48",
    "contrast": "3c8262171c51307f916c30a3308235a8",
    "defocus_blur": "7d1322666342a0702b1957e92f6254bc",
    "elastic_transform": "9421657c6cd452429cf6ce96cc412b5f",
    "fog": "7b397314b5670f825465fbcd1f6e9ccd",
    "frost": "31f6ab3bce1d9934abfb0cc13656f141",
    "gaussian_blur": "c33370155bc9b055fb4a89113d3c559d",
    "gaussian_noise": "ecaf8b9a2399ffeda7680934c33405fd",
    "glass_blur": "7361fb4019269e02dbf6925f083e8629",
    "impulse_noise": "2090e01c83519ec51427e65116af6b1a",
    "jpeg_compression": "2b9cc4c864e0193bb64db8d7728f8187",
    "labels": "c439b113295ed5254878798ffe28fd54",
    "motion_blur": "fffa5f852ff7ad299cfe8a7643f090f4",
    "pixelate": "0f14f7e2db14288304e1de10df16832f",
    "saturate": "1cfae0964219c5102abbb883e538cc56",
    "shot_noise": "3a7239bb118894f013d9bf1984be7f11",
    "snow": "bb238de8555123da9c282dea23bd6e55",
    "spatter": "8a5a3903a7f8f65b59501a6093b4311e",
    "speckle_noise": "ef00b87611792b00df09c0b0237a1e30",
    "zoom_blur": "6ea8e63f1c5cdee1517533840641641b",
}
CIFAR100C_MD5 = {
    "brightness": "f22d7195aecd6abb541e27fca230c171",
    "contrast": "322bb385f1d05154ee197ca16535f71e",
    "defocus_blur": "d923e3d9c585a27f0956e2f2ad832564",
    "elastic_transform": "a0792bd6581f6810878be71acedfc65a",
    "fog": "4efc7ebd5e82b028bdbe13048e3ea564",
    "frost": "3a39c6823bdfaa0bf8b12fe7004b8117",
    "gaussian_blur": "5204ba0d557839772ef5a4196a052c3e",
    "gaussian_noise": "ecc4d366eac432bdf25c024086f5e97d",
    "glass_blur": "0bf384f38e5ccbf8dd479d9059b913e1",
    "impulse_noise": "3b3c210ddfa0b5cb918ff4537a429fef",
    "jpeg_compression": "c851b7f1324e1d2ffddeb76920576d11",
    "labels": "bb4026e9ce52996b95f439544568cdb2",
    "motion_blur": "732a7e2e54152ff97c742d4c388c5516",
    "pixelate": "96c00c60f144539e14cffb02ddbd0640",
    "saturate": "c0697e9fdd646916a61e9c312c77bf6b",
    "shot_noise": "b0a1fa6e1e465a747c1b204b1914048a",
    "snow": "0237be164583af146b7b144e73b43465",
    "spatter": "12ccf41d62564d36e1f6a6ada5022728",
    "speckle_noise": "e3f215b1a0f9fd9fd6f0d1cf94a7ce99",
    "zoom_blur": "0204613400c034a81c4830d5df81cb82",
}
OFFICIAL_MD5 = {"cifar10": CIFAR10C_MD5, "cifar100": CIFAR100C_MD5}
# The 19 file names of the official sets, in the reference script's generation order.
OFFICIAL_NAMES = ("gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur",
                  "zoom_blur", "snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "pixelate",
                  "jpeg_compression", "speckle_noise", "gaussian_blur", "spatter", "saturate")



def is_official_layout(n: int, severities: Sequence[int]) -> bool:
    """True for 10,000 images per block and severities 1..5 in order: the only sets named like the official."""
    return int(n) == OFFICIAL_BLOCK and [int(s) for s in severities] == list(OFFICIAL_SEVERITIES)


def layout_suffix(n: int, severities: Sequence[int]) -> str:
    """``""`` for the official layout, else ``.n<N>.s<severities>`` (e.g. ``.n500.s135``) for file names."""
    if is_official_layout(n, severities):
        return ""
    return f".n{int(n)}.s{''.join(str(int(s)) for s in severities)}"


"""JPEG photos of a QR code in every colour space a camera, a scanner or a
print workflow writes: grey, YCbCr, and CMYK or YCCK, inverted as Adobe
writes them (an Adobe marker: Photoshop, ImageMagick, Pillow) or not. `qr
scan --image` reads each; a JPEG it cannot decode says what is not
supported, and one cut short says it is damaged.

ImageMagick writes the real-world CMYK file (YCCK with an Adobe marker);
the others are written here, by a small baseline JPEG encoder that codes
each 8x8 block as its mean alone: `qr show --png` draws a module as 8x8
pixels on that grid, so the image comes back exactly, in any colour space
and with or without an Adobe marker, which no installed tool chooses."""

from __future__ import annotations

import shutil
import struct
import subprocess

import pytest

from cli_errors import assert_error

pytestmark = pytest.mark.skipif(
    not shutil.which("convert"),
    reason="needs convert (imagemagick): scripts/install-deps installs it",
)


def segment(marker, payload):
    return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload


def dc_only_jpeg(width, height, planes, *, adobe_transform=None, ids=None):
    """A baseline JPEG file of len(planes) components (8-bit samples, each a
    bytes of width * height, both multiples of 8), every block coded as its
    mean, which is exact where each block is one colour. With
    adobe_transform, an Adobe (APP14) marker with that transform (0: none,
    2: YCCK); ids are the components' identifiers (default 1, 2, ...)."""
    assert width % 8 == 0 and height % 8 == 0
    n = len(planes)
    ids = ids or list(range(1, n + 1))
    out = b"\xff\xd8"
    if adobe_transform is not None:
        out += segment(0xEE, b"Adobe" + struct.pack(">HHHB", 100, 0, 0, adobe_transform))
    # Every quantiser 8: a block's DC coefficient, 8 * (mean - 128), is coded as mean - 128.
    out += segment(0xDB, b"\x00" + bytes([8] * 64))
    out += segment(0xC0, struct.pack(">BHHB", 8, height, width, n) + b"".join(bytes([i, 0x11, 0]) for i in ids))
    # DC: categories 0-8, each a 4-bit code equal to it; AC: only end-of-block, the code 0.
    dc_counts = bytes([0, 0, 0, 9] + [0] * 12)
    out += segment(0xC4, b"\x00" + dc_counts + bytes(range(9)))
    out += segment(0xC4, b"\x10" + bytes([1] + [0] * 15) + b"\x00")
    out += segment(0xDA, bytes([n]) + b"".join(bytes([i, 0]) for i in ids) + b"\x00\x3f\x00")
    bits = []
    previous = [0] * n
    for by in range(0, height, 8):
        for bx in range(0, width, 8):
            for c, plane in enumerate(planes):
                block = [plane[(by + y) * width + bx + x] for y in range(8) for x in range(8)]
                assert len(set(block)) == 1, "each block is one colour"
                value = block[0] - 128
                diff, previous[c] = value - previous[c], value
                size = abs(diff).bit_length()
                bits += [int(b) for b in format(size, "04b")]
                if size:
                    extra = diff if diff > 0 else diff + (1 << size) - 1
                    bits += [int(b) for b in format(extra, f"0{size}b")]
                bits.append(0)  # end of block
    bits += [1] * (-len(bits) % 8)
    data = bytearray()
    for i in range(0, len(bits), 8):
        byte = int("".join(map(str, bits[i:i + 8])), 2)
        data.append(byte)
        if byte == 0xFF:
            data.append(0)
    return out + bytes(data) + b"\xff\xd9"


def grey_pixels(png):
    """The PNG's pixels as 8-bit grey: (width, height, bytes)."""
    size = subprocess.run(["identify", "-format", "%w %h", str(png)], capture_output=True, text=True, check=True,
                          timeout=60).stdout.split()
    raw = subprocess.run(["convert", str(png), "-depth", "8", "gray:-"], capture_output=True, check=True,
                         timeout=60).stdout
    width, height = int(size[0]), int(size[1])
    assert len(raw) == width * height
    return width, height, raw


def markers(jpeg: bytes):
    """The components (SOF) and the Adobe transform (None without the
    marker) of a JPEG file."""
    i, components, transform = 2, None, None
    while i + 4 <= len(jpeg) and jpeg[i] == 0xFF:
        kind, length = jpeg[i + 1], struct.unpack(">H", jpeg[i + 2:i + 4])[0]
        body = jpeg[i + 4:i + 2 + length]
        if kind == 0xEE and body.startswith(b"Adobe"):
            transform = body[11]
        if kind in (0xC0, 0xC1, 0xC2):
            components = body[5]
        if kind == 0xDA:
            break
        i += 2 + length
    return components, transform


@pytest.fixture
def code(people, tmp_path):
    """Alice's QR code as `qr show --png` draws it (8x8 pixels a module)."""
    alice = people("Alice", init=True)
    png = tmp_path / "alice.png"
    assert alice.run("qr", "show", "--png", png).returncode == 0
    return png


def test_cmyk_and_ycck_jpegs_of_the_code_are_read(people, code, tmp_path):
    png = code
    width, height, grey = grey_pixels(png)
    assert width % 8 == 0 and set(grey) == {0, 255}
    dark = [g == 0 for g in grey]

    def plane(ink_on_dark, ink_on_light=0):
        return bytes(ink_on_dark if d else ink_on_light for d in dark)

    def inverted(p):
        return bytes(255 - v for v in p)

    images = {}
    # ImageMagick's CMYK, as Photoshop writes it: YCCK, inverted, with an
    # Adobe marker saying so.
    im = tmp_path / "imagemagick-cmyk.jpg"
    subprocess.run(["convert", str(png), "-colorspace", "CMYK", "-quality", "90", str(im)], check=True, timeout=60)
    assert markers(im.read_bytes()) == (4, 2), "ImageMagick writes YCCK with an Adobe marker"
    images["ycck-adobe"] = im
    # Black ink alone, inverted, with an Adobe marker (transform 0: CMYK).
    cmyk_k = [plane(0), plane(0), plane(0), plane(255)]
    images["cmyk-adobe-inverted"] = dc_only_jpeg(width, height, [inverted(p) for p in cmyk_k], adobe_transform=0)
    # Cyan, magenta and yellow without black, not inverted, without the
    # marker; and a light grey background of black ink.
    cmy = [plane(255), plane(255), plane(255), plane(0, 40)]
    images["cmyk-plain"] = dc_only_jpeg(width, height, cmy)
    # Grey and YCbCr (the colour planes neutral) from the same encoder.
    images["grey"] = dc_only_jpeg(width, height, [grey])
    images["ycbcr"] = dc_only_jpeg(width, height, [grey, bytes([128]) * len(grey), bytes([128]) * len(grey)])
    for name, image in images.items():
        if isinstance(image, bytes):
            path = tmp_path / f"{name}.jpg"
            path.write_bytes(image)
            images[name] = path
    assert markers(images["cmyk-adobe-inverted"].read_bytes()) == (4, 0)
    assert markers(images["cmyk-plain"].read_bytes()) == (4, None)
    for n, (name, image) in enumerate(images.items()):
        reader = people(f"Reader{n}", init=True)
        reader.json("qr", "show")
        assert reader.json("qr", "scan", "--image", image)["peer"]["name"] == "Alice", name
    # Without its Adobe marker the inverted file reads as a negative, in
    # which no code is found: the marker is what tells inverted samples.
    adobe = images["cmyk-adobe-inverted"].read_bytes()
    start = adobe.index(b"\xff\xee")
    negative = tmp_path / "cmyk-inverted-without-marker.jpg"
    negative.write_bytes(adobe[:start] + adobe[start + 2 + struct.unpack(">H", adobe[start + 2:start + 4])[0]:])
    assert markers(negative.read_bytes()) == (4, None)
    assert_error(people("Bob", init=True).run("qr", "scan", "--image", negative), 2, "no QR code found")


def test_unsupported_and_cut_jpegs_say_so(people, code, tmp_path):
    png = code
    width, height, grey = grey_pixels(png)
    bob = people("Bob", init=True)
    bob_payload = bob.json("qr", "show")["payload"]
    # Two components: a colour space libjpeg does not know.
    two = tmp_path / "two.jpg"
    two.write_bytes(dc_only_jpeg(width, height, [grey, grey]))
    assert_error(bob.run("qr", "scan", "--image", two), 2, f"{two}: JPEG colour space unknown (2 components) is not supported")
    # A lossless JPEG (SOF3): a process libjpeg lacks.
    lossless = tmp_path / "lossless.jpg"
    lossless.write_bytes(dc_only_jpeg(width, height, [grey]).replace(b"\xff\xc0", b"\xff\xc3", 1))
    assert_error(bob.run("qr", "scan", "--image", lossless), 2, f"{lossless} uses a JPEG feature that is not supported",
                 "SOF type 0xc3")
    # Cut short, in its entropy-coded data and in its headers: damaged, not
    # a picture with the rest filled in grey.
    whole = tmp_path / "whole.jpg"
    subprocess.run(["convert", str(png), "-colorspace", "CMYK", str(whole)], check=True, timeout=60)
    data = whole.read_bytes()
    for cut in (len(data) * 2 // 3, 300):
        truncated = tmp_path / f"cut-{cut}.jpg"
        truncated.write_bytes(data[:cut])
        assert_error(bob.run("qr", "scan", "--image", truncated), 2, f"{truncated} is a damaged JPEG image",
                     "Premature end of JPEG file")
    assert bob.json("qr", "show")["payload"] == bob_payload, "the same exchange goes on"
    assert bob.json("qr", "scan", "--image", whole)["peer"]["name"] == "Alice"

"""Draw the sample images bundled with thumb-tui.

Every picture in ``sample_data/images/`` is drawn here with Pillow's ``ImageDraw``
primitives only (no fonts, no photographs, no downloads), so the images are original
work of this project. The script is deterministic: the only pseudo-random element (the
rain drops) uses a fixed seed, and re-running it rewrites byte-identical PNG files.

Usage::

    python sample_data/make_images.py
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from pathlib import Path

from PIL import Image, ImageDraw

WIDTH = 320
HEIGHT = 240
OUT_DIR = Path(__file__).resolve().parent / "images"

Color = tuple[int, int, int]

SKY: Color = (135, 200, 245)
GRASS: Color = (70, 160, 60)
WHITE: Color = (255, 255, 255)
BLACK: Color = (0, 0, 0)
RED: Color = (215, 30, 35)
YELLOW: Color = (250, 215, 40)
BLUE: Color = (40, 80, 200)
BROWN: Color = (120, 75, 35)
GREY: Color = (110, 110, 115)
ORANGE: Color = (245, 140, 30)


def new_canvas(background: Color) -> tuple[Image.Image, ImageDraw.ImageDraw]:
    """Return a fresh RGB canvas filled with ``background`` and its drawing context."""
    image = Image.new("RGB", (WIDTH, HEIGHT), background)
    return image, ImageDraw.Draw(image)


def sky_and_ground(draw: ImageDraw.ImageDraw, horizon: int, ground: Color) -> None:
    """Paint a plain sky above ``horizon`` and a plain ground below it."""
    draw.rectangle((0, 0, WIDTH, horizon), fill=SKY)
    draw.rectangle((0, horizon, WIDTH, HEIGHT), fill=ground)


def cloud(draw: ImageDraw.ImageDraw, x: int, y: int) -> None:
    """Draw a small white cloud whose left edge is at ``(x, y)``."""
    for dx, dy, r in ((0, 8, 12), (14, 0, 16), (32, 6, 13), (18, 12, 12)):
        draw.ellipse((x + dx - r, y + dy - r, x + dx + r, y + dy + r), fill=WHITE)


def tree(draw: ImageDraw.ImageDraw, x: int, base: int, size: int = 1) -> None:
    """Draw a tree with a brown trunk and a round green crown centred at ``x``."""
    trunk_w = 8 * size
    trunk_h = 40 * size
    draw.rectangle((x - trunk_w // 2, base - trunk_h, x + trunk_w // 2, base), fill=BROWN)
    r = 26 * size
    cy = base - trunk_h - r + 8
    draw.ellipse((x - r, cy - r, x + r, cy + r), fill=(30, 120, 40))


def sun(draw: ImageDraw.ImageDraw, cx: int, cy: int, r: int = 22) -> None:
    """Draw a yellow sun with short rays."""
    for i in range(12):
        angle = i * math.pi / 6
        x0 = cx + int((r + 4) * math.cos(angle))
        y0 = cy + int((r + 4) * math.sin(angle))
        x1 = cx + int((r + 14) * math.cos(angle))
        y1 = cy + int((r + 14) * math.sin(angle))
        draw.line((x0, y0, x1, y1), fill=YELLOW, width=3)
    draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=YELLOW)


def scene_red_balls() -> Image.Image:
    """Two red balls on a green lawn under a blue sky."""
    image, draw = new_canvas(SKY)
    sky_and_ground(draw, 140, GRASS)
    cloud(draw, 40, 30)
    for cx, r in ((110, 32), (215, 26)):
        cy = 175 - r + 20
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=RED, outline=(120, 10, 10), width=2)
        draw.ellipse((cx - r // 2, cy - r // 2, cx - r // 4, cy - r // 4), fill=(255, 150, 150))
    return image


def scene_yellow_house() -> Image.Image:
    """A yellow house with a red door and a brown roof next to a tree."""
    image, draw = new_canvas(SKY)
    sky_and_ground(draw, 190, GRASS)
    draw.rectangle((60, 110, 190, 200), fill=YELLOW, outline=BLACK)
    draw.polygon([(50, 112), (125, 55), (200, 112)], fill=BROWN, outline=BLACK)
    draw.rectangle((110, 150, 140, 200), fill=RED, outline=BLACK)
    draw.ellipse((132, 172, 137, 177), fill=BLACK)
    for wx in (72, 155):
        draw.rectangle((wx, 125, wx + 24, 145), fill=(200, 230, 255), outline=BLACK)
    tree(draw, 255, 200)
    return image


def scene_blue_boxes() -> Image.Image:
    """Three blue boxes stacked on top of each other on a grey floor."""
    image, draw = new_canvas((235, 230, 220))
    draw.rectangle((0, 200, WIDTH, HEIGHT), fill=(150, 150, 150))
    sizes = ((110, 210, 60), (120, 200, 55), (130, 190, 50))
    bottom = 205
    for x0, x1, h in sizes:
        draw.rectangle((x0, bottom - h, x1, bottom), fill=BLUE, outline=(10, 20, 80), width=2)
        draw.line((x0, bottom - h // 2, x1, bottom - h // 2), fill=(90, 130, 230), width=2)
        bottom -= h
    return image


def scene_boat() -> Image.Image:
    """A white sailboat on the blue sea under a yellow sun."""
    image, draw = new_canvas(SKY)
    draw.rectangle((0, 150, WIDTH, HEIGHT), fill=(20, 90, 170))
    for y in range(165, HEIGHT, 18):
        for x in range(10, WIDTH, 40):
            draw.arc((x, y, x + 20, y + 8), 180, 360, fill=(150, 200, 240), width=2)
    sun(draw, 260, 50)
    draw.polygon([(100, 150), (200, 150), (185, 170), (115, 170)], fill=WHITE, outline=BLACK)
    draw.line((150, 150, 150, 60), fill=BROWN, width=3)
    draw.polygon([(153, 62), (153, 145), (205, 145)], fill=WHITE, outline=BLACK)
    draw.polygon([(147, 75), (147, 145), (110, 145)], fill=WHITE, outline=BLACK)
    return image


def scene_snowman() -> Image.Image:
    """A snowman with a black hat and a carrot nose standing in the snow."""
    image, draw = new_canvas((170, 195, 225))
    draw.rectangle((0, 180, WIDTH, HEIGHT), fill=(245, 248, 252))
    body = ((160, 170, 45), (160, 105, 32), (160, 57, 22))
    for cx, cy, r in body:
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=WHITE, outline=(150, 160, 180))
    draw.rectangle((140, 30, 180, 36), fill=BLACK)
    draw.rectangle((147, 5, 173, 32), fill=BLACK)
    draw.ellipse((150, 50, 155, 55), fill=BLACK)
    draw.ellipse((165, 50, 170, 55), fill=BLACK)
    draw.polygon([(160, 58), (160, 64), (182, 62)], fill=ORANGE)
    for y in (95, 108, 121):
        draw.ellipse((157, y, 163, y + 6), fill=BLACK)
    draw.line((130, 100, 90, 80), fill=BROWN, width=3)
    draw.line((190, 100, 230, 80), fill=BROWN, width=3)
    return image


def scene_cat_greyscale() -> Image.Image:
    """A black-and-white (greyscale) picture of a cat's face."""
    image = Image.new("L", (WIDTH, HEIGHT), 200)
    draw = ImageDraw.Draw(image)
    draw.polygon([(100, 90), (115, 30), (150, 70)], fill=90)
    draw.polygon([(220, 90), (205, 30), (170, 70)], fill=90)
    draw.ellipse((90, 55, 230, 200), fill=110)
    for ex in (130, 190):
        draw.ellipse((ex - 14, 100, ex + 14, 125), fill=245)
        draw.ellipse((ex - 4, 102, ex + 4, 123), fill=10)
    draw.polygon([(152, 145), (168, 145), (160, 155)], fill=30)
    draw.line((160, 155, 160, 163), fill=30, width=2)
    draw.arc((142, 155, 160, 172), 0, 180, fill=30, width=2)
    draw.arc((160, 155, 178, 172), 0, 180, fill=30, width=2)
    for dy in (-6, 0, 6):
        draw.line((140, 155 + dy, 70, 148 + 2 * dy), fill=240, width=2)
        draw.line((180, 155 + dy, 250, 148 + 2 * dy), fill=240, width=2)
    return image


def scene_traffic_light() -> Image.Image:
    """A traffic light on a pole showing red."""
    image, draw = new_canvas((190, 200, 210))
    draw.rectangle((0, 205, WIDTH, HEIGHT), fill=(90, 90, 95))
    draw.rectangle((155, 120, 165, 210), fill=GREY)
    draw.rectangle((130, 20, 190, 125), fill=(30, 30, 30))
    lamps = ((RED, 45), ((70, 60, 10), 72), ((10, 60, 20), 99))
    for colour, cy in lamps:
        draw.ellipse((146, cy - 12, 174, cy + 12), fill=colour)
    return image


def scene_table_cups() -> Image.Image:
    """A brown wooden table with four white cups on it."""
    image, draw = new_canvas((240, 225, 200))
    draw.rectangle((0, 200, WIDTH, HEIGHT), fill=(160, 130, 100))
    draw.rectangle((30, 130, 290, 145), fill=BROWN)
    draw.rectangle((45, 145, 57, 225), fill=BROWN)
    draw.rectangle((263, 145, 275, 225), fill=BROWN)
    for i in range(4):
        x = 55 + i * 58
        draw.rectangle((x, 100, x + 30, 130), fill=WHITE, outline=BLACK)
        draw.arc((x + 24, 106, x + 40, 122), 270, 90, fill=BLACK, width=3)
    return image


def scene_umbrella_rain() -> Image.Image:
    """A stick-figure person holding a purple umbrella in the rain."""
    image, draw = new_canvas((150, 160, 175))
    draw.rectangle((0, 210, WIDTH, HEIGHT), fill=(80, 85, 90))
    rng = random.Random(20220607)
    for _ in range(90):
        x = rng.randrange(0, WIDTH)
        y = rng.randrange(0, 200)
        if 95 <= x <= 225 and y >= 50:
            continue
        draw.line((x, y, x - 3, y + 10), fill=(40, 70, 160), width=1)
    draw.pieslice((95, 50, 225, 130), 180, 360, fill=(130, 50, 160), outline=BLACK)
    draw.line((180, 90, 180, 142), fill=BLACK, width=3)
    draw.arc((172, 136, 180, 146), 0, 180, fill=BLACK, width=3)
    draw.ellipse((150, 110, 170, 130), outline=BLACK, width=2)
    draw.line((160, 130, 160, 175), fill=BLACK, width=2)
    draw.line((160, 142, 180, 135), fill=BLACK, width=2)
    draw.line((160, 142, 140, 160), fill=BLACK, width=2)
    draw.line((160, 175, 145, 210), fill=BLACK, width=2)
    draw.line((160, 175, 175, 210), fill=BLACK, width=2)
    return image


def scene_car_road() -> Image.Image:
    """A red car driving on a grey road."""
    image, draw = new_canvas(SKY)
    sky_and_ground(draw, 140, GRASS)
    draw.rectangle((0, 160, WIDTH, 220), fill=(70, 70, 75))
    for x in range(0, WIDTH, 50):
        draw.rectangle((x + 10, 188, x + 35, 192), fill=WHITE)
    draw.rectangle((90, 150, 230, 185), fill=RED, outline=BLACK)
    draw.polygon([(115, 150), (135, 120), (195, 120), (212, 150)], fill=RED, outline=BLACK)
    draw.polygon([(122, 148), (138, 125), (162, 125), (162, 148)], fill=(200, 230, 255))
    draw.polygon([(168, 148), (168, 125), (192, 125), (205, 148)], fill=(200, 230, 255))
    for wx in (120, 200):
        draw.ellipse((wx - 16, 170, wx + 16, 202), fill=BLACK)
        draw.ellipse((wx - 7, 179, wx + 7, 193), fill=GREY)
    return image


def scene_kite() -> Image.Image:
    """An orange diamond kite with a tail flying in a blue sky."""
    image, draw = new_canvas(SKY)
    cloud(draw, 30, 160)
    cloud(draw, 220, 40)
    draw.polygon([(160, 30), (200, 85), (160, 150), (120, 85)], fill=ORANGE, outline=BLACK)
    draw.line((160, 30, 160, 150), fill=BLACK)
    draw.line((120, 85, 200, 85), fill=BLACK)
    points = [(160 + int(12 * math.sin(i / 2)), 150 + i * 6) for i in range(14)]
    draw.line(points, fill=RED, width=2)
    for i, (px, py) in enumerate(points[2::3]):
        bow = (BLUE, YELLOW)[i % 2]
        draw.polygon(
            [(px - 7, py - 4), (px + 7, py + 4), (px + 7, py - 4), (px - 7, py + 4)], fill=bow
        )
    draw.line((160, 150, 40, 240), fill=(60, 60, 60))
    return image


def scene_clock() -> Image.Image:
    """A round wall clock showing three o'clock."""
    image, draw = new_canvas((225, 215, 190))
    cx, cy, r = 160, 120, 95
    draw.ellipse((cx - r - 6, cy - r - 6, cx + r + 6, cy + r + 6), fill=(40, 40, 40))
    draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=WHITE)
    for hour in range(12):
        angle = hour * math.pi / 6
        length = 14 if hour % 3 == 0 else 7
        x0 = cx + int((r - 4) * math.sin(angle))
        y0 = cy - int((r - 4) * math.cos(angle))
        x1 = cx + int((r - 4 - length) * math.sin(angle))
        y1 = cy - int((r - 4 - length) * math.cos(angle))
        draw.line((x0, y0, x1, y1), fill=BLACK, width=4 if hour % 3 == 0 else 2)
    draw.line((cx, cy, cx, cy - 78), fill=BLACK, width=4)
    draw.line((cx, cy, cx + 52, cy), fill=BLACK, width=7)
    draw.ellipse((cx - 6, cy - 6, cx + 6, cy + 6), fill=RED)
    return image


def scene_pizza() -> Image.Image:
    """A round pepperoni pizza cut into eight slices on a checked tablecloth."""
    image, draw = new_canvas(WHITE)
    for row in range(0, HEIGHT, 40):
        for col in range(0, WIDTH, 40):
            if (row // 40 + col // 40) % 2 == 0:
                draw.rectangle((col, row, col + 39, row + 39), fill=(220, 60, 60))
    cx, cy = 160, 120
    draw.ellipse((cx - 105, cy - 105, cx + 105, cy + 105), fill=(235, 235, 235))
    draw.ellipse((cx - 90, cy - 90, cx + 90, cy + 90), fill=(210, 150, 70))
    draw.ellipse((cx - 80, cy - 80, cx + 80, cy + 80), fill=(245, 205, 90))
    for i in range(8):
        angle = i * math.pi / 4 + math.pi / 8
        px = cx + int(50 * math.cos(angle))
        py = cy + int(50 * math.sin(angle))
        draw.ellipse((px - 9, py - 9, px + 9, py + 9), fill=(170, 30, 30))
    for i in range(4):
        angle = i * math.pi / 4
        dx = int(90 * math.cos(angle))
        dy = int(90 * math.sin(angle))
        draw.line((cx - dx, cy - dy, cx + dx, cy + dy), fill=(150, 100, 40), width=2)
    return image


def scene_street_trees() -> Image.Image:
    """A street seen in perspective with one tree on each side."""
    image, draw = new_canvas(SKY)
    sky_and_ground(draw, 110, GRASS)
    draw.polygon([(140, 110), (180, 110), (300, HEIGHT), (20, HEIGHT)], fill=(80, 80, 85))
    draw.polygon([(158, 120), (162, 120), (166, 150), (154, 150)], fill=WHITE)
    draw.polygon([(152, 170), (168, 170), (174, 215), (146, 215)], fill=WHITE)
    draw.polygon(
        [(140, 110), (132, 110), (0, 215), (0, HEIGHT), (20, HEIGHT)], fill=(190, 190, 190)
    )
    draw.polygon(
        [(180, 110), (188, 110), (WIDTH, 215), (WIDTH, HEIGHT), (300, HEIGHT)], fill=(190, 190, 190)
    )
    tree(draw, 55, 190)
    tree(draw, 265, 190)
    return image


def scene_fishbowl() -> Image.Image:
    """An orange goldfish in a round glass fishbowl on a shelf."""
    image, draw = new_canvas((245, 240, 230))
    draw.rectangle((40, 200, 280, 212), fill=BROWN)
    draw.ellipse((85, 50, 235, 200), fill=(190, 225, 245), outline=(90, 130, 160), width=3)
    draw.rectangle((115, 45, 205, 70), fill=(245, 240, 230))
    draw.line((115, 70, 205, 70), fill=(90, 130, 160), width=3)
    draw.ellipse((130, 120, 180, 150), fill=ORANGE)
    draw.polygon([(178, 135), (200, 120), (200, 150)], fill=ORANGE)
    draw.ellipse((140, 128, 146, 134), fill=BLACK)
    for bx, by, br in ((125, 110, 4), (118, 95, 3), (122, 82, 2)):
        draw.ellipse((bx - br, by - br, bx + br, by + br), outline=WHITE)
    draw.rectangle((100, 185, 220, 195), fill=(200, 180, 120))
    return image


SCENES: dict[str, Callable[[], Image.Image]] = {
    "01_red_balls.png": scene_red_balls,
    "02_yellow_house.png": scene_yellow_house,
    "03_blue_boxes.png": scene_blue_boxes,
    "04_sailboat.png": scene_boat,
    "05_snowman.png": scene_snowman,
    "06_cat_greyscale.png": scene_cat_greyscale,
    "07_traffic_light.png": scene_traffic_light,
    "08_table_cups.png": scene_table_cups,
    "09_umbrella_rain.png": scene_umbrella_rain,
    "10_red_car.png": scene_car_road,
    "11_kite.png": scene_kite,
    "12_clock.png": scene_clock,
    "13_pizza.png": scene_pizza,
    "14_street_trees.png": scene_street_trees,
    "15_goldfish.png": scene_fishbowl,
}


def main() -> None:
    """Draw every scene and save it as a PNG in ``OUT_DIR``."""
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for name, draw_scene in SCENES.items():
        image = draw_scene()
        image.save(OUT_DIR / name, format="PNG", optimize=True)
        print(f"wrote images/{name}")


if __name__ == "__main__":
    main()

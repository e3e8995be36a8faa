"""HPD dynamic tiling: grid selection, tiles, thumbnails, normalisation, config reading."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from hpdparse.hpd.tiling import (
    DEFAULT_CONFIG,
    IMAGENET_MEAN,
    IMAGENET_STD,
    TilingConfig,
    assemble_tiles,
    candidate_grids,
    expand_grey,
    grid_image_size,
    normalize_torch,
    num_image_tokens,
    num_tiles,
    select_grid,
    tile_image,
)

# (width, height) -> (cols, rows), from a port tested against the released preprocessing.
FIXTURE_GRIDS = {
    (514, 64): (8, 1),
    (760, 865): (2, 2),
    (248, 193): (5, 4),
    (720, 1150): (2, 3),
}
A4_150_DPI = (1240, 1754)
A4_200_DPI = (1654, 2339)


def stock_internvl_grid(width: int, height: int, min_num: int = 1, max_num: int = 24) -> tuple:
    """Stock InternVL's selector (dynamic_preprocess + find_closest_aspect_ratio), for contrast."""
    aspect = width / height
    ratios = sorted(
        {(i, j) for i in range(1, max_num + 1) for j in range(1, max_num + 1) if i * j <= max_num},
        key=lambda g: g[0] * g[1],
    )
    best, best_diff = (1, 1), float("inf")
    for cols, rows in ratios:
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and width * height > 0.5 * 448 * 448 * cols * rows:
            best = (cols, rows)
    return best


def reference_tiles(image: Image.Image, config: TilingConfig = DEFAULT_CONFIG) -> np.ndarray:
    """The released algorithm written plainly: RGB bicubic resize, crop tile by tile, thumbnail."""
    image = image.convert("RGB")
    cols, rows = select_grid(image.width, image.height, config)
    t = config.tile_size
    resized = image.resize((cols * t, rows * t), Image.Resampling.BICUBIC)
    tiles = [
        resized.crop((c * t, r * t, (c + 1) * t, (r + 1) * t))
        for r in range(rows)
        for c in range(cols)
    ]
    if config.use_thumbnail and cols * rows != 1:
        tiles.append(image.resize((t, t), Image.Resampling.BICUBIC))
    return np.stack([np.asarray(tile) for tile in tiles])


def page_like_image(width: int, height: int, colour: bool, seed: int = 0) -> Image.Image:
    """Text-like noise: mostly white with dark specks, optionally a coloured box."""
    rng = np.random.default_rng(seed)
    grey = np.where(rng.random((height, width)) < 0.1, rng.integers(0, 120, (height, width)), 255)
    arr = np.repeat(grey.astype(np.uint8)[..., None], 3, axis=2)
    if colour:
        arr[height // 3 : height // 2, width // 4 : width // 2] = (200, 30, 60)
    return Image.fromarray(arr)


def quadrant_image(cell: int, colours: list[list[tuple[int, int, int]]]) -> Image.Image:
    rows, cols = len(colours), len(colours[0])
    arr = np.zeros((rows * cell, cols * cell, 3), dtype=np.uint8)
    for r in range(rows):
        for c in range(cols):
            arr[r * cell : (r + 1) * cell, c * cell : (c + 1) * cell] = colours[r][c]
    return Image.fromarray(arr)


@pytest.mark.parametrize(("size", "grid"), FIXTURE_GRIDS.items())
def test_fixture_grids(size, grid):
    assert select_grid(*size) == grid


@pytest.mark.parametrize(
    ("size", "grid", "tokens"),
    [
        (A4_150_DPI, (2, 3), 1792),
        (A4_200_DPI, (4, 6), 6400),
        # The reading taken (max_tiles + 1 candidates, as the port says); stock InternVL caps at 24.
        ((2240, 2240), (5, 5), 26 * 256),
    ],
    ids=["a4_150_dpi", "a4_200_dpi", "plus_one_allows_a_5x5_grid"],
)
def test_grid_and_image_tokens(size, grid, tokens):
    assert select_grid(*size) == grid
    assert num_image_tokens(*size) == tokens


def test_hpd_selector_is_not_stock_internvl():
    assert stock_internvl_grid(760, 865) == (4, 5)
    assert stock_internvl_grid(720, 1150) == (3, 5)
    assert select_grid(760, 865) == (2, 2)
    assert select_grid(720, 1150) == (2, 3)


def test_candidate_grids_bounds_and_order():
    grids = candidate_grids(1, 24)
    assert grids[0] == (1, 1)
    assert (5, 5) in grids  # the "+ 1": 25 tiles allowed
    assert all(1 <= c * r <= 25 for c, r in grids)
    keys = [(c * r, c, r) for c, r in grids]
    assert keys == sorted(keys)
    assert len(grids) == len(set(grids)) == sum(25 // c for c in range(1, 26))
    assert all(c * r >= 4 for c, r in candidate_grids(4, 24))


def test_min_tiles_forces_tiling():
    config = TilingConfig(min_tiles=2)
    cols, rows = select_grid(100, 100, config)
    assert cols * rows >= 2


def test_tile_shapes_dtype_and_count():
    image = Image.new("RGB", A4_200_DPI, "white")
    tiles = tile_image(image)
    assert tiles.dtype == np.uint8
    assert tiles.shape == (25, 448, 448, 1)  # grey: one channel
    assert num_tiles((4, 6)) == 25
    image.putpixel((800, 1200), (255, 254, 255))  # one pixel off grey: three channels
    assert tile_image(image).shape == (25, 448, 448, 3)


def test_thumbnail_rules():
    small = Image.new("RGB", (300, 300), "white")  # 1x1 grid: never a thumbnail
    assert select_grid(300, 300) == (1, 1)
    assert tile_image(small).shape[0] == 1
    wide = Image.new("RGB", (514, 64), "white")
    assert tile_image(wide).shape[0] == 9
    no_thumb = TilingConfig(use_thumbnail=False)
    assert tile_image(wide, no_thumb).shape[0] == 8
    assert num_image_tokens(514, 64, no_thumb) == 8 * 256


def test_tiles_are_row_major_and_thumbnail_is_whole_image():
    colours = [
        [(255, 0, 0), (0, 255, 0), (0, 0, 255)],
        [(255, 255, 0), (0, 255, 255), (255, 0, 255)],
    ]
    image = quadrant_image(400, colours)  # 1200x800, not a multiple of 448: really resized
    assert select_grid(*image.size) == (3, 2)
    tiles = tile_image(image)
    assert tiles.shape[0] == 7
    for r in range(2):
        for c in range(3):
            tile = tiles[r * 3 + c]
            assert tuple(tile[224, 224]) == colours[r][c]
            assert tuple(tile[20, 20]) == colours[r][c]
    thumb = tiles[6]
    for r in range(2):
        for c in range(3):
            y, x = int((r + 0.5) * 448 / 2), int((c + 0.5) * 448 / 3)
            assert tuple(thumb[y, x]) == colours[r][c]


def test_exact_tiles_when_no_resize_is_needed():
    rng = np.random.default_rng(0)
    arr = rng.integers(0, 256, size=(896, 896, 3), dtype=np.uint8)
    tiles = tile_image(Image.fromarray(arr))
    assert select_grid(896, 896) == (2, 2)
    np.testing.assert_array_equal(tiles[0], arr[:448, :448])
    np.testing.assert_array_equal(tiles[1], arr[:448, 448:])
    np.testing.assert_array_equal(tiles[2], arr[448:, :448])
    np.testing.assert_array_equal(tiles[3], arr[448:, 448:])
    expected_thumb = np.asarray(Image.fromarray(arr).resize((448, 448), Image.Resampling.BICUBIC))
    np.testing.assert_array_equal(tiles[4], expected_thumb)


@pytest.mark.parametrize("colour", [False, True])
@pytest.mark.parametrize("size", [(827, 1170), (1240, 1754), (300, 300), (2000, 150)])
def test_tiles_match_plain_released_algorithm(size, colour):
    image = page_like_image(*size, colour=colour)
    tiles = tile_image(image)
    assert tiles.shape[-1] == (3 if colour else 1)
    np.testing.assert_array_equal(expand_grey(tiles), reference_tiles(image))


def test_grey_mode_input_matches_rgb_input():
    image = page_like_image(700, 990, colour=False)
    grey = tile_image(image.convert("L"))
    assert grey.shape[-1] == 1
    np.testing.assert_array_equal(grey, tile_image(image))


def test_expand_grey():
    image = page_like_image(500, 700, colour=False)
    tiles = tile_image(image)
    rgb = expand_grey(tiles)
    assert rgb.shape == (*tiles.shape[:3], 3) and rgb.dtype == np.uint8
    assert (rgb == tiles).all()
    colour = tile_image(page_like_image(500, 700, colour=True))
    assert expand_grey(colour) is colour
    with pytest.raises(ValueError, match="expected tiles"):
        expand_grey(colour[..., :2])


def test_real_page_matches_plain_released_algorithm(corpus_dir):
    pymupdf = pytest.importorskip("pymupdf")
    with pymupdf.open(corpus_dir / "plumber__issue-90-example.pdf") as doc:
        pix = doc[0].get_pixmap(dpi=150, alpha=False, colorspace=pymupdf.csRGB)
    image = Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
    tiles = tile_image(image)
    assert tiles.shape == (7, 448, 448, 1)  # A4 at 150 DPI: 2x3 plus thumbnail; a grey page
    np.testing.assert_array_equal(expand_grey(tiles), reference_tiles(image))


def test_assemble_tiles_from_a_presized_image():
    rng = np.random.default_rng(1)
    grid = (3, 2)
    width, height = grid_image_size(grid, TilingConfig(tile_size=56))
    assert (width, height) == (168, 112)
    arr = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    thumb = rng.integers(0, 256, size=(56, 56, 3), dtype=np.uint8)
    tiles = assemble_tiles(arr, grid, thumb)
    assert tiles.shape == (7, 56, 56, 3)
    np.testing.assert_array_equal(tiles[4], arr[56:, 56:112])
    np.testing.assert_array_equal(tiles[6], thumb)
    assert assemble_tiles(arr, grid).shape == (6, 56, 56, 3)
    with pytest.raises(ValueError, match="cannot be cut"):
        assemble_tiles(arr[:, :100], grid)
    with pytest.raises(ValueError, match="square"):
        assemble_tiles(arr, (3, 1))
    with pytest.raises(ValueError, match="expected an"):
        assemble_tiles(arr[..., 0], grid)
    with pytest.raises(ValueError, match="expected an"):
        assemble_tiles(arr[..., :2], grid)
    with pytest.raises(ValueError, match="thumbnail"):
        assemble_tiles(arr, grid, thumb[..., :1])


def test_assemble_tiles_one_channel():
    rng = np.random.default_rng(2)
    grid = (2, 3)
    arr = rng.integers(0, 256, size=(84, 56, 1), dtype=np.uint8)
    thumb = rng.integers(0, 256, size=(28, 28, 1), dtype=np.uint8)
    tiles = assemble_tiles(arr, grid, thumb)
    assert tiles.shape == (7, 28, 28, 1)
    np.testing.assert_array_equal(tiles[3], arr[28:56, 28:])
    np.testing.assert_array_equal(tiles[6], thumb)
    rgb = assemble_tiles(np.repeat(arr, 3, axis=2), grid, np.repeat(thumb, 3, axis=2))
    np.testing.assert_array_equal(expand_grey(tiles), rgb)


def test_non_rgb_modes_are_converted():
    for mode in ("L", "RGBA", "P", "1", "CMYK"):
        tiles = tile_image(Image.new(mode, (500, 700)))
        assert tiles.shape[1:] == (448, 448, 1)  # all of them a single grey
    for mode in ("RGBA", "P", "CMYK"):
        image = Image.new("RGB", (500, 700))
        image.paste((200, 30, 60), (10, 10, 100, 100))
        image = image.convert(mode)
        tiles = tile_image(image)
        assert tiles.shape[1:] == (448, 448, 3)
        np.testing.assert_array_equal(tiles, reference_tiles(image))


@pytest.mark.parametrize("mode", ["I;16", "I"])
def test_16_bit_greyscale_keeps_its_contrast(mode):
    ramp = np.linspace(0, 65535, 448 * 448).reshape(448, 448).astype(np.uint16)
    image = Image.fromarray(ramp) if mode == "I;16" else Image.fromarray(ramp.astype(np.int32))
    assert image.mode == mode
    tile = tile_image(image)[0]
    np.testing.assert_array_equal(tile[..., 0], ramp >> 8)
    assert tile.min() == 0 and tile.max() == 255


def test_8_bit_values_in_i_mode_are_kept():
    image = Image.fromarray(np.full((448, 448), 200, dtype=np.int32))
    assert (tile_image(image) == 200).all()


@pytest.mark.parametrize("size", [(1, 1), (10000, 10), (10, 10000), (1, 5000), (3, 2)])
def test_degenerate_sizes_do_not_crash(size):
    cols, rows = select_grid(*size)
    assert 1 <= cols * rows <= 25
    tiles = tile_image(Image.new("RGB", size, "gray"))
    assert tiles.shape == (num_tiles((cols, rows)), 448, 448, 1)


def test_empty_image_is_a_clear_error():
    with pytest.raises(ValueError, match="no pixels"):
        tile_image(Image.new("RGB", (0, 10)))
    with pytest.raises(ValueError, match="no pixels"):
        select_grid(0, 0)


def test_normalize_values_shape_dtype():
    pytest.importorskip("torch")
    tiles = np.zeros((2, 4, 4, 3), dtype=np.uint8)
    tiles[1] = 255
    tiles[0, 1, 2] = (10, 100, 200)
    out = normalize_torch(tiles).numpy()
    assert out.shape == (2, 3, 4, 4) and out.dtype == np.float32
    mean, std = np.array(IMAGENET_MEAN), np.array(IMAGENET_STD)
    np.testing.assert_allclose(out[0, :, 0, 0], -mean / std, rtol=1e-6)
    np.testing.assert_allclose(out[1, :, 3, 3], (1 - mean) / std, rtol=1e-6)
    np.testing.assert_allclose(
        out[0, :, 1, 2], (np.array([10, 100, 200]) / 255 - mean) / std, rtol=1e-6
    )


def test_normalize_uses_config_mean_std():
    config = TilingConfig(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))
    pytest.importorskip("torch")
    tiles = np.full((1, 2, 2, 3), 255, dtype=np.uint8)
    np.testing.assert_allclose(normalize_torch(tiles, config).numpy(), 1.0)


def test_grey_tiles_normalise_to_their_rgb_floats_torch():
    torch = pytest.importorskip("torch")
    tiles = tile_image(page_like_image(300, 420, colour=False), TilingConfig(tile_size=56))
    assert tiles.shape[-1] == 1
    rgb = expand_grey(tiles)
    for dtype in (torch.float32, torch.bfloat16):
        got = normalize_torch(tiles, dtype=dtype)
        assert got.shape == (tiles.shape[0], 3, 56, 56) and got.is_contiguous()
        assert torch.equal(got, normalize_torch(rgb, dtype=dtype))
    # A uint8 tensor (what vLLM hands the model) normalises as the array does.
    assert torch.equal(normalize_torch(torch.from_numpy(tiles)), normalize_torch(rgb))
    with pytest.raises(ValueError, match="expected tiles"):
        normalize_torch(np.zeros((4, 4, 3), dtype=np.uint8))
    with pytest.raises(ValueError, match="expected tiles"):
        normalize_torch(np.zeros((1, 4, 4, 2), dtype=np.uint8))


def test_normalize_torch_matches_the_formula():
    torch = pytest.importorskip("torch")
    tiles = tile_image(quadrant_image(100, [[(255, 0, 0), (0, 9, 77)]]), TilingConfig(tile_size=56))
    mean, std = np.array(IMAGENET_MEAN), np.array(IMAGENET_STD)
    ref = ((tiles / 255.0 - mean) / std).transpose(0, 3, 1, 2)
    got = normalize_torch(tiles, TilingConfig(tile_size=56))
    assert got.dtype == torch.float32 and got.is_contiguous()
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-6, atol=1e-6)
    assert normalize_torch(tiles, dtype=torch.bfloat16).dtype == torch.bfloat16


def test_from_model_config_real_layout():
    config = {
        "architectures": ["InternVLChatModel"],
        "downsample_ratio": 0.5,
        "force_image_size": 448,
        "min_dynamic_patch": 1,
        "max_dynamic_patch": 24,
        "use_thumbnail": True,
        "vision_config": {"image_size": 448, "patch_size": 14},
    }
    assert TilingConfig.from_model_config(config) == DEFAULT_CONFIG
    assert DEFAULT_CONFIG.tokens_per_tile == 256


def test_from_model_config_tiny_checkpoint():
    config = {
        "downsample_ratio": 0.5,
        "min_dynamic_patch": 2,
        "max_dynamic_patch": 6,
        "use_thumbnail": False,
        "vision_config": {"image_size": [112, 112], "patch_size": 14},
    }
    tiny = TilingConfig.from_model_config(config)
    assert (tiny.tile_size, tiny.min_tiles, tiny.max_tiles, tiny.use_thumbnail) == (
        112,
        2,
        6,
        False,
    )
    assert tiny.tokens_per_tile == 16  # (112/14)^2 * 0.25
    assert TilingConfig.from_model_config({"force_image_size": 224}).tile_size == 224
    assert TilingConfig.from_model_config({}) == DEFAULT_CONFIG


def test_invalid_config_is_rejected():
    with pytest.raises(ValueError):
        TilingConfig(tile_size=100)  # not a multiple of 14
    with pytest.raises(ValueError):
        TilingConfig(min_tiles=0)
    with pytest.raises(ValueError):
        TilingConfig.from_model_config({"vision_config": {"image_size": [112, 224]}})


def test_small_tile_size_scales_the_selector():
    small = TilingConfig(tile_size=112)
    # The selector only sees areas in tile units: 4x smaller tiles on 4x smaller pages agree.
    for w, h in [*FIXTURE_GRIDS, A4_150_DPI, (333, 4000), (97, 61)]:
        assert select_grid(w, h, small) == select_grid(4 * w, 4 * h)
    assert select_grid(1654 // 4, 2339 // 4, small) == (4, 6)
    tiles = tile_image(Image.new("RGB", (1654 // 4, 2339 // 4), "white"), small)
    assert tiles.shape == (25, 112, 112, 1)


@settings(max_examples=60, deadline=None)
@given(
    width=st.integers(1, 3000),
    height=st.integers(1, 3000),
    max_tiles=st.integers(1, 30),
    use_thumbnail=st.booleans(),
)
def test_selector_and_tiler_agree(width, height, max_tiles, use_thumbnail):
    config = TilingConfig(tile_size=28, max_tiles=max_tiles, use_thumbnail=use_thumbnail)
    cols, rows = select_grid(width, height, config)
    assert 1 <= cols * rows <= max_tiles + 1
    tiles = tile_image(Image.new("RGB", (width, height), "white"), config)
    assert tiles.shape == (num_tiles((cols, rows), config), 28, 28, 1)
    assert num_image_tokens(width, height, config) == tiles.shape[0] * config.tokens_per_tile

"""HPD-Parsing dynamic tiling: grid selection, tiles as uint8, normalisation (every engine uses it).

The grid selector is the one HPD-Parsing runs with ``MAX_PATCHES_WITH_RESIZE=true``, not stock
InternVL's aspect-ratio-only ``find_closest_aspect_ratio``; the two disagree on ordinary page sizes
(e.g. 760x865: HPD 2x2, stock 4x5).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image, ImageChops

if TYPE_CHECKING:
    import torch

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# A candidate grid is kept when |cols/rows - width/height| <= ASPECT_TOLERANCE (absolute difference
# of the ratios). Relative and log-ratio readings were tried: both turn 720x1150 into 3x5 instead of
# the fixture's 2x3, so the absolute reading is the one the released path uses. "<" and "<=" gave
# the same grid on every size tried (50..3000 px in both directions), so that choice is moot.
ASPECT_TOLERANCE = 0.2
# Among the kept grids, this many closest in area compete on aspect difference.
AREA_CANDIDATES = 3


@dataclass(frozen=True)
class TilingConfig:
    """How a page image becomes model input. Defaults are HPD-Parsing's released config."""

    tile_size: int = 448
    min_tiles: int = 1
    max_tiles: int = 24
    use_thumbnail: bool = True
    patch_size: int = 14
    downsample_ratio: float = 0.5
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD

    def __post_init__(self) -> None:
        if self.tile_size < 1:
            raise ValueError(f"tile_size must be positive, got {self.tile_size}")
        if not 1 <= self.min_tiles <= self.max_tiles + 1:
            raise ValueError(
                f"need 1 <= min_tiles <= max_tiles + 1, got min_tiles={self.min_tiles}, "
                f"max_tiles={self.max_tiles}"
            )
        if self.patch_size < 1 or self.tile_size % self.patch_size:
            raise ValueError(
                f"tile_size {self.tile_size} is not a multiple of patch_size {self.patch_size}"
            )
        if len(self.mean) != 3 or len(self.std) != 3 or min(self.std) <= 0:
            raise ValueError("mean and std need 3 values each, std positive")

    @classmethod
    def from_model_config(cls, config: Mapping[str, Any]) -> TilingConfig:
        """Read an InternVL-layout ``config.json`` dict; missing keys keep the defaults."""
        vision = config.get("vision_config") or {}
        kwargs: dict[str, int | float | bool] = {}
        tile = config.get("force_image_size") or vision.get("image_size")
        if tile is not None:
            kwargs["tile_size"] = _single_int(tile, "force_image_size/image_size")
        if vision.get("patch_size") is not None:
            kwargs["patch_size"] = _single_int(vision["patch_size"], "vision_config.patch_size")
        for key, field in (("min_dynamic_patch", "min_tiles"), ("max_dynamic_patch", "max_tiles")):
            if config.get(key) is not None:
                kwargs[field] = int(config[key])
        if config.get("use_thumbnail") is not None:
            kwargs["use_thumbnail"] = bool(config["use_thumbnail"])
        if config.get("downsample_ratio") is not None:
            kwargs["downsample_ratio"] = float(config["downsample_ratio"])
        return cls(**kwargs)

    @property
    def tokens_per_tile(self) -> int:
        """Image tokens one tile becomes after pixel shuffle (256 for 448/14 at ratio 0.5)."""
        # Same expression as InternVL's num_image_token, so a tiny checkpoint agrees with its model.
        return int((self.tile_size // self.patch_size) ** 2 * self.downsample_ratio**2)


DEFAULT_CONFIG = TilingConfig()


def _single_int(value: Any, name: str) -> int:
    # image_size is sometimes written as [448, 448].
    if isinstance(value, (list, tuple)):
        if len(set(value)) != 1:
            raise ValueError(f"{name} must be square, got {value}")
        value = value[0]
    return int(value)


@lru_cache(maxsize=64)
def candidate_grids(min_tiles: int, max_tiles: int) -> tuple[tuple[int, int], ...]:
    """All (cols, rows) with min_tiles <= cols*rows <= max_tiles + 1, by (cols*rows, cols, rows).

    The ``+ 1`` follows the second-hand port of the released path; stock InternVL stops at
    max_tiles. The known fixture grids come out the same with or without it, so it is unverified:
    it changes large near-square images (5x5 becomes possible).
    """
    upper = max_tiles + 1
    grids = [
        (cols, rows)
        for cols in range(1, upper + 1)
        for rows in range(1, upper // cols + 1)
        if cols * rows >= min_tiles
    ]
    return tuple(sorted(grids, key=lambda g: (g[0] * g[1], g[0], g[1])))


def select_grid(width: int, height: int, config: TilingConfig = DEFAULT_CONFIG) -> tuple[int, int]:
    """The (cols, rows) tile grid HPD-Parsing uses for a width x height image."""
    if width < 1 or height < 1:
        raise ValueError(f"image has no pixels ({width}x{height})")
    aspect = width / height
    area = width * height
    tile_area = config.tile_size * config.tile_size
    grids = candidate_grids(config.min_tiles, config.max_tiles)
    close = [g for g in grids if abs(g[0] / g[1] - aspect) <= ASPECT_TOLERANCE] or list(grids)
    # sorted() is stable: equal areas keep the (cols*rows, cols, rows) order, as does min() below.
    by_area = sorted(close, key=lambda g: abs(area - tile_area * g[0] * g[1]))
    return min(by_area[:AREA_CANDIDATES], key=lambda g: abs(g[0] / g[1] - aspect))


def num_tiles(grid: tuple[int, int], config: TilingConfig = DEFAULT_CONFIG) -> int:
    """Tiles the model sees for a grid: cols*rows, plus the thumbnail when one is added."""
    cols, rows = grid
    n = cols * rows
    return n + 1 if config.use_thumbnail and n != 1 else n


def num_image_tokens(width: int, height: int, config: TilingConfig = DEFAULT_CONFIG) -> int:
    """How many ``<IMG_CONTEXT>`` tokens the prompt needs for a width x height image."""
    return num_tiles(select_grid(width, height, config), config) * config.tokens_per_tile


def grid_image_size(
    grid: tuple[int, int], config: TilingConfig = DEFAULT_CONFIG
) -> tuple[int, int]:
    """(width, height) in pixels the image is resized to before it is cut into ``grid`` tiles."""
    return grid[0] * config.tile_size, grid[1] * config.tile_size


def tile_image(image: Image.Image, config: TilingConfig = DEFAULT_CONFIG) -> np.ndarray:
    """Cut an image into HPD tiles: uint8 array (N, tile, tile, C), row-major, thumbnail last.

    C is 1 for a grey page (mode L, or RGB with all three channels equal) and 3 otherwise. Grey
    tiles are the RGB tiles' common channel: ``np.repeat(tiles, 3, axis=3)`` gives exactly the
    RGB tiles, and :func:`normalize_torch` expands them that way, so every engine
    sees the same pixels either way; a grey page costs a third of the bytes in pipes and memory.

    Bytes are identical to a plain PIL bicubic ``resize`` of the RGB image plus crops, which is what
    the released preprocessing is reported to do. A grey page is resized as one band: the same
    bytes at a third of the cost (about half the pages of the shared corpus are pure grey).
    """
    if image.width < 1 or image.height < 1:
        raise ValueError(f"image has no pixels ({image.width}x{image.height})")
    image = _rgb_or_grey(image)
    source = _grey_band(image) or image
    grid = select_grid(image.width, image.height, config)
    t = config.tile_size
    resized = _as_hwc(source.resize(grid_image_size(grid, config), Image.Resampling.BICUBIC))
    thumbnail = None
    if num_tiles(grid, config) > grid[0] * grid[1]:
        thumbnail = _as_hwc(source.resize((t, t), Image.Resampling.BICUBIC))
    return assemble_tiles(resized, grid, thumbnail)


def assemble_tiles(
    resized: np.ndarray, grid: tuple[int, int], thumbnail: np.ndarray | None = None
) -> np.ndarray:
    """Cut an image already at :func:`grid_image_size` (H, W, C), C 1 or 3, into row-major tiles
    (N, t, t, C), then append ``thumbnail`` (t, t, C) if given. For callers that produce the
    resized image themselves (e.g. by rasterising a PDF page straight at that size)."""
    cols, rows = grid
    if resized.ndim != 3 or resized.shape[2] not in (1, 3):
        raise ValueError(f"expected an (H, W, 1) or (H, W, 3) image, got shape {resized.shape}")
    height, width, channels = resized.shape
    if width % cols or height % rows:
        raise ValueError(f"image of shape {resized.shape} cannot be cut into {cols}x{rows} tiles")
    t = width // cols
    if height // rows != t:
        raise ValueError(f"image of shape {resized.shape} does not give square {cols}x{rows} tiles")
    if thumbnail is not None and thumbnail.shape != (t, t, channels):
        raise ValueError(f"thumbnail of shape {thumbnail.shape}, expected {(t, t, channels)}")
    n = cols * rows + (thumbnail is not None)
    out = np.empty((n, t, t, channels), dtype=np.uint8)
    # (rows*t, cols*t, C) -> (rows, cols, t, t, C): tile (r, c) lands at index r*cols + c. One copy,
    # straight into the output (a reshape of the swapped view would copy once more).
    np.copyto(
        out[: cols * rows].reshape(rows, cols, t, t, channels),
        resized.reshape(rows, t, cols, t, channels).swapaxes(1, 2),
    )
    if thumbnail is not None:
        out[-1] = thumbnail
    return out


def expand_grey(tiles: np.ndarray) -> np.ndarray:
    """Tiles (N, t, t, 1) or (N, t, t, 3) -> (N, t, t, 3) uint8: a grey page's RGB tiles."""
    _check_tiles(tiles)
    return np.repeat(tiles, 3, axis=3) if tiles.shape[3] == 1 else tiles


def _rgb_or_grey(image: Image.Image) -> Image.Image:
    if image.mode in ("RGB", "L"):
        return image
    if image.mode.startswith("I;16") or image.mode == "I":
        # 16-bit scans (PNG/TIFF open as I;16 or I): Pillow's convert clips at 255, which would
        # turn almost every pixel white; keep the high byte instead.
        samples = np.asarray(image).astype(np.int64)
        if image.mode == "I" and samples.max(initial=0) <= 255:
            return Image.fromarray(samples.clip(0, 255).astype(np.uint8))
        return Image.fromarray((samples.clip(0, 65535) >> 8).astype(np.uint8))
    return image.convert("RGB")


def _grey_band(image: Image.Image) -> Image.Image | None:
    """The single band of an image whose channels are all equal, else None."""
    if image.mode == "L":
        return image
    red, green, blue = image.split()
    if ImageChops.difference(red, green).getbbox() or ImageChops.difference(green, blue).getbbox():
        return None
    return red


def _as_hwc(image: Image.Image) -> np.ndarray:
    """(H, W, 1) for an L image, (H, W, 3) for RGB, without copying the array again."""
    array = np.asarray(image)
    return array[:, :, None] if array.ndim == 2 else array


def _check_tiles(tiles: np.ndarray) -> None:
    if tiles.ndim != 4 or tiles.shape[-1] not in (1, 3):
        raise ValueError(f"expected tiles of shape (N, t, t, 1) or (N, t, t, 3), got {tiles.shape}")


def normalize_torch(
    tiles: np.ndarray | torch.Tensor,
    config: TilingConfig = DEFAULT_CONFIG,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """uint8 tiles (N, t, t, C) -> normalised floats (N, 3, t, t) as a torch tensor (ImageNet
    mean/std by default): uint8 moves to ``device``, floats made there.

    ``tiles`` may be a numpy array or a uint8 tensor (on any device). Grey tiles (C == 1) cross to
    the device as one channel and are expanded there, to exactly the floats of their RGB tiles.
    """
    import torch

    _check_tiles(tiles)
    dtype = dtype or torch.float32
    # (x/255 - mean)/std == x*scale + bias, one multiply-add per value.
    std = np.asarray(config.std, dtype=np.float64)
    scale, bias = 1.0 / (255.0 * std), -np.asarray(config.mean, dtype=np.float64) / std
    if isinstance(tiles, np.ndarray):
        if not tiles.flags.writeable:  # torch.from_numpy warns on read-only arrays
            tiles = tiles.copy()
        tiles = torch.from_numpy(tiles)
    x = tiles.to(device).permute(0, 3, 1, 2)
    n, _, height, width = x.shape
    # One pass reorders, expands a grey channel and converts to float on the device (faster on
    # CPU than reordering the uint8 first); then scale in place.
    pixels = torch.empty((n, 3, height, width), dtype=torch.float32, device=x.device)
    pixels.copy_(x.expand(n, 3, height, width))
    scale_t = torch.tensor(scale, dtype=torch.float32, device=x.device).view(1, 3, 1, 1)
    bias_t = torch.tensor(bias, dtype=torch.float32, device=x.device).view(1, 3, 1, 1)
    return pixels.mul_(scale_t).add_(bias_t).to(dtype)

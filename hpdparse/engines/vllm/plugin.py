"""vLLM general plugin (entry point ``vllm.general_plugins``): teaches vLLM the HPD-Parsing model.

vLLM calls ``register()`` in every process it starts. It only adds names; nothing stock is replaced:
the ``internvl_chat`` config class is registered only when transformers has none, and the model
goes in under its own architecture name, selected per engine with ``hf_overrides``. On a vLLM
outside the supported range it registers nothing and logs why (other models keep working). In the
engine-core process of hpdparse's own engine with ``engine_core=process``
(``HPDPARSE_ENGINE_PARENT`` set, spawned) it also starts the watch that ends that process with its
parent and keeps the image data on the worker (``core_process``,
``compat.keep_image_data_on_the_worker``). In every process of hpdparse's own engine on a CPU
(``host_memory.ENV`` set to 1 by it) it sets malloc to keep freed memory (``host_memory``).
"""

from __future__ import annotations

import logging
import os

from hpdparse.engines.vllm import compat, core_process, host_memory
from hpdparse.engines.vllm.mtp import DRAFT_ARCHITECTURE, DRAFT_CLASS
from hpdparse.errors import EngineError

ARCHITECTURE = "HpdParsingForConditionalGeneration"
_MODEL_CLASS = f"hpdparse.engines.vllm.model:{ARCHITECTURE}"


def register() -> None:
    try:
        compat.check_supported()
    except EngineError as exc:
        logging.getLogger(__name__).warning("%s; HPD-Parsing is not registered with vLLM", exc)
        return
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from vllm import ModelRegistry

    from hpdparse.engines.vllm.hf_config import HpdChatConfig

    if "internvl_chat" not in CONFIG_MAPPING:
        AutoConfig.register("internvl_chat", HpdChatConfig)
    # The model, and the P-MTP draft head used when speculative decoding is on; a "module:Class"
    # string keeps vLLM from importing either until it is used.
    for architecture, model in ((ARCHITECTURE, _MODEL_CLASS), (DRAFT_ARCHITECTURE, DRAFT_CLASS)):
        if architecture not in ModelRegistry.get_supported_archs():
            ModelRegistry.register_model(architecture, model)
    if os.environ.get(host_memory.ENV) == "1":  # this process's vLLM engine asked for it
        host_memory.keep_freed_memory()
    # In the engine-core process of a process-mode hpdparse engine started with spawn (a fork
    # inherits both from the engine's process): the image-data fix and the parent watch.
    if os.environ.get(core_process.PARENT_ENV) and core_process.watch_parent():
        compat.keep_image_data_on_the_worker()

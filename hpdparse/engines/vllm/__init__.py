"""The vllm engine: HPD-Parsing on in-process stock vLLM, with the model plugin vLLM loads
(plugin, hf_config, model) and the P-MTP draft (mtp). Importing this package does not import vLLM.
"""

"""HPD-Parsing protocol constants: special tokens and prompts (see docs in README)."""

BLOCK = "<BLOCK>"
FORK = "<FORK>"
CHILD = "<CHILD>"
IMG_START = "<img>"
IMG_END = "</img>"
IMG_CONTEXT = "<IMG_CONTEXT>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
ENDOFTEXT = "<|endoftext|>"

PROMPT_FORK = "document parsing with fork."
PROMPT_PLAIN = "document parsing."

DEFAULT_MODEL = "PaddlePaddle/HPD-Parsing"
DEFAULT_MAX_TOKENS = 8000
DEFAULT_MAX_MODEL_LEN = 16384

# How a page (or one of its branches) ended, as in the OpenAI API: a stop token, out of tokens or
# context, or failed.
FINISH_STOP = "stop"
FINISH_LENGTH = "length"
FINISH_ERROR = "error"


def instruction(fork: bool) -> str:
    """The user instruction that selects hierarchical (fork) or plain decoding."""
    return PROMPT_FORK if fork else PROMPT_PLAIN

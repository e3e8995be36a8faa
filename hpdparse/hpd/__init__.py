"""The HPD protocol (tokens, prompts, splicing children) and the raw stream parser."""

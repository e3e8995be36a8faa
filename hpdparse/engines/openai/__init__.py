"""The openai engine: pages sent to an OpenAI-compatible HPD server."""

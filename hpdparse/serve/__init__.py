"""`hpdparse serve`: an OpenAI-compatible HPD server on the in-process engines."""

"""`hpdparse serve`: an HPD server on an in-process engine (vllm or torch): whole documents
converted as `hpdparse convert` converts them (the `documents` package: routes, a durable store,
a web page) and an OpenAI-compatible API for single pages. Both feed one engine thread, so the
pages of documents and of chat requests share its batch.

A chat request flows through these modules in this order:

    hpdparse.wire  the OpenAI chat-completions JSON shapes (shared with --engine openai)
    auth.py        API keys (Bearer, constant-time), before anything else
    app.py         the HTTP app: routes, size limit, a place in the queue, errors
    pages.py       what this server decodes for a request; the page image out of it
    queue.py       the bounded page queue and the engine thread (queue.EngineLoop)
    answers.py     the engine's results back to the request: JSON or a server-sent event stream
                   (a streamed page's text piece by piece, the tokens' logprobs)
    metrics.py     /metrics (Prometheus)
    settings.py    the options and their defaults
    server.py      the lifecycle: socket, uvicorn thread, engine thread, drain at a signal

The command (`hpdparse serve`) is hpdparse.commands.serve. Importing this package is cheap: the
HTTP stack and the engines load only in server.py and app.py.
"""

"""Runners: plan documents, rasterize pages ahead of the engine, schedule pages through it and
finish documents. `scheduler.Converter` is the single-machine runner."""

"""HPD blocks -> Markdown and JSON."""

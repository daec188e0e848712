"""The block: each value's Markdown, a caller's template, the sandbox, the view."""

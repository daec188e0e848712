"""What the host adapters share, importing no host framework: the settings every component takes,
how deep an upstream searches, the hosts' embeddings, tokenizers and model windows, the extras."""

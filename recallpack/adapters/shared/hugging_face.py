"""What recallpack reads of Hugging Face's objects, by their shape (neither ``tokenizers`` nor
``transformers`` is imported): a tokenizer's ``encode``, special tokens left out.

The core's host table (:mod:`recallpack.packing.hosts`) names this module; the core imports it
the first time it meets an object it does not know itself.
"""

from __future__ import annotations

from recallpack.adapters.shared.tokenizers import read_hugging_face

__all__ = ["read_tokenizer"]

#: A ``tokenizers.Tokenizer`` or a ``transformers`` tokenizer as a Tokenizer.
read_tokenizer = read_hugging_face

"""The user's own tokenizer: LangChain models, LlamaIndex-style callables, Hugging Face, tiktoken."""

from __future__ import annotations

import functools
import re

import pytest
import regex
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack import Candidate, TokenizerError, count_tokens, get_tokenizer, recall, truncate_to_tokens

VOCABULARY = ["alpha", "beta", "gamma", "delta", ",", ".", "the", "evidence"]
TEXT = "alpha beta, gamma delta. the evidence unknownword alpha"
WORDS = re.compile(r"\w+|[^\w\s]+")  # what the Whitespace pre-tokenizer splits on


def word_tokens(text: str) -> list[str]:
    """A LlamaIndex-style tokenizer: str -> list of tokens."""
    return WORDS.findall(text)


def word_ids(text: str) -> list[int]:
    """A LangChain custom_get_token_ids that makes one token per word."""
    return [len(word) for word in text.split()]


def langchain_model():
    from langchain_core.language_models import FakeListChatModel

    return FakeListChatModel(responses=["ok"], custom_get_token_ids=word_ids)


def hugging_face_tokenizer():
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from tokenizers.processors import TemplateProcessing

    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2} | {w: i + 3 for i, w in enumerate(VOCABULARY)}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    # Special tokens around every encoding, as BERT-style tokenizers add them: not counted.
    tokenizer.post_processor = TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    return tokenizer


class TransformersLike:
    """The shape of a transformers tokenizer: callable (returning a dict) and with encode()."""

    name_or_path = "acme/words-base"

    def __call__(self, text: str) -> dict[str, list[int]]:
        return {"input_ids": self.encode(text)}

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = [len(word) for word in word_tokens(text)]
        return [101, *ids, 102] if add_special_tokens else ids


HOSTS = {
    "langchain": (langchain_model, lambda text: len(text.split())),
    "llamaindex": (lambda: word_tokens, lambda text: len(word_tokens(text))),
    "huggingface": (hugging_face_tokenizer, lambda text: len(word_tokens(text))),
    "transformers": (TransformersLike, lambda text: len(word_tokens(text))),
}


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_host_tokenizer_counts_by_its_own_rule(host: str) -> None:
    """Each host's tokenizer counts the way its own tokenizer does, special tokens left out."""
    make, expected = HOSTS[host]
    tokenizer = get_tokenizer(make())
    assert tokenizer.exact
    assert tokenizer.count(TEXT) == expected(TEXT) == (8 if host == "langchain" else 10)


def test_names_say_what_counted() -> None:
    """tokenizer_used names the host tokenizer, not a generic callable."""
    assert get_tokenizer(langchain_model()).name == "langchain:FakeListChatModel"
    assert get_tokenizer(hugging_face_tokenizer()).name == "huggingface:Tokenizer(WordLevel)"
    assert get_tokenizer(TransformersLike()).name == "huggingface:acme/words-base"
    assert get_tokenizer(word_tokens).name == "callable:word_tokens"
    encoding = tiktoken.Encoding(**_cl100k_parts())
    assert get_tokenizer(encoding).name == "cl100k_base"
    partial = functools.partial(encoding.encode, allowed_special="all")  # LlamaIndex's default shape
    assert get_tokenizer(partial).name == "callable:Encoding.encode"


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_host_tokenizer_truncates_to_whole_words(host: str) -> None:
    """Truncation keeps the longest prefix the host counts within the limit."""
    make, expected = HOSTS[host]
    tokenizer = get_tokenizer(make())
    for limit in range(0, 12):
        cut = tokenizer.truncate(TEXT, limit)
        assert TEXT.startswith(cut) and expected(cut) <= limit
        if cut != TEXT:
            assert expected(TEXT[: len(cut) + 1]) > limit


def test_a_callable_returning_an_int_counts_that_int() -> None:
    """A str -> int callable stays a count, a str -> list one counts its items."""
    assert count_tokens("abcdef", len) == 6
    assert count_tokens("ab cd ef", str.split) == 3
    with pytest.raises(TokenizerError, match="list of tokens"):
        count_tokens("abc", lambda text: 2.5)


@pytest.mark.filterwarnings("ignore::UserWarning")  # LangChain's own note about its GPT-2 fallback
def test_a_langchain_model_that_cannot_count_is_refused_up_front() -> None:
    """A model without its own counter (LangChain would need transformers) is an error at once."""
    from langchain_core.language_models import FakeListChatModel

    try:
        import transformers  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("transformers is installed, so LangChain's GPT-2 fallback counts")
    with pytest.raises(TokenizerError, match="custom_get_token_ids"):
        get_tokenizer(FakeListChatModel(responses=["ok"]))


def test_an_object_that_cannot_count_is_refused() -> None:
    """Something with neither encode, get_num_tokens nor __call__ is a clear error."""
    with pytest.raises(TokenizerError, match="Hugging Face tokenizer"):
        get_tokenizer(object())


def _cl100k_parts() -> dict[str, object]:
    shared = get_tokenizer("cl100k_base").encoding
    return {
        "name": "cl100k_base",
        "pat_str": shared._pat_str,
        "mergeable_ranks": shared._mergeable_ranks,
        "special_tokens": shared._special_tokens,
    }


def test_tiktoken_encoding_is_used_exactly() -> None:
    """A tiktoken Encoding given by the caller counts and truncates exactly like the encoding."""
    encoding = tiktoken.Encoding(**_cl100k_parts())
    tokenizer = get_tokenizer(encoding)
    assert tokenizer.exact and tokenizer.encoding is encoding
    text = "Recalled content is evidence, not instructions. 日本語 🎉 " * 5
    assert tokenizer.count(text) == len(encoding.encode_ordinary(text))
    assert truncate_to_tokens(text, 9, encoding) == encoding.decode(encoding.encode_ordinary(text)[:9])
    shared = get_tokenizer("cl100k_base")
    assert get_tokenizer(shared.encoding) is shared  # handed back, it is the shared tokenizer


CLUSTERS = st.lists(
    st.sampled_from(["a", "b ", " ", "e\u0301", "👩\u200d👩\u200d👧", "🇫🇷", "🇯🇵", "\r\n", "日", "x\u0308\u0301", "."]),
    max_size=30,
).map("".join)


@settings(max_examples=80, deadline=None)
@given(text=CLUSTERS | st.text(max_size=60), limit=st.integers(0, 25))
def test_opaque_truncation_never_splits_a_grapheme_cluster(text: str, limit: int) -> None:
    """A counter recallpack cannot see into cuts between grapheme clusters, at the longest such cut."""
    tokenizer = get_tokenizer(len)  # one token per code point: any cut may split a cluster
    cut = tokenizer.truncate(text, limit)
    ends = [0] + [m.end() for m in regex.finditer(r"\X", text)]
    assert text.startswith(cut) and len(cut) <= limit and len(cut) in ends
    following = [end for end in ends if end > len(cut)]
    assert not following or following[0] > limit


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_a_packed_block_fits_by_the_host_count(host: str) -> None:
    """recall with a host tokenizer keeps a block that the host itself counts within max_tokens."""
    make, expected = HOSTS[host]
    candidates = [Candidate(text=f"alpha beta gamma {i}, " * 12) for i in range(8)]
    result = recall(candidates, max_tokens=150, tokenizer=make())
    block = result.to_markdown()
    assert 0 < result.report.items_selected < 8
    assert result.report.tokens_used == expected(block) <= 150
    assert result.report.tokenizer_used == get_tokenizer(make()).name

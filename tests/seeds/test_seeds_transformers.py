"""transformers seeds: listed from the auto tables without building, built tiny, captured exactly."""
from __future__ import annotations

import os
import re

import pytest
import torch
import torch.utils._pytree as pytree

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from gapfuzz.seeds import SeedError
from gapfuzz.seeds.capture import capture
from gapfuzz.seeds.sources.transformers import HEADS, TransformersSource, tiny_config

SOURCE = TransformersSource()


def test_listing_is_large_well_formed_and_builds_nothing(monkeypatch):
    import transformers

    def refuse(*a, **k):
        raise AssertionError("listing built a model")

    monkeypatch.setattr(transformers.PreTrainedModel, "__init__", refuse)
    ids = SOURCE.list_ids()
    assert len(ids) >= 400 and len(set(ids)) == len(ids)
    pattern = re.compile(r"^hf/[A-Za-z0-9_.\-]+/(%s)$" % "|".join(map(re.escape, HEADS)))
    assert all(pattern.match(i) for i in ids), [i for i in ids if not pattern.match(i)][:5]
    for expected in ("hf/bert/base", "hf/bert/masked-lm", "hf/gpt2/causal-lm", "hf/vit/image-classification",
                     "hf/whisper/base", "hf/t5/seq2seq-lm"):
        assert expected in ids


def test_tiny_config_keeps_architecture_consistent():
    llama = tiny_config("llama")
    assert llama.num_hidden_layers == 2 and llama.hidden_size <= 64 and llama.vocab_size <= 1024
    assert llama.hidden_size % llama.num_attention_heads == 0
    assert llama.num_attention_heads % llama.num_key_value_heads == 0 and llama.use_cache is False
    gemma = tiny_config("gemma3").text_config  # hybrid sliding/full attention survives the cut
    assert len(gemma.layer_types) == gemma.num_hidden_layers == 2
    assert set(gemma.layer_types) == {"sliding_attention", "full_attention"}
    assert gemma.head_dim * gemma.num_attention_heads <= 4 * gemma.hidden_size


@pytest.mark.parametrize("seed_id, task, kind", [
    ("hf/bert/sequence-classification", "sequence-classification", "class_logits"),
    ("hf/gpt2/causal-lm", "causal-lm", "token_logits"),
    ("hf/vit/image-classification", "image-classification", "class_logits"),
    ("hf/t5/seq2seq-lm", "seq2seq-lm", "token_logits"),
])
def test_seed_builds_captures_and_matches_eager(seed_id, task, kind):
    seed = SOURCE.build(seed_id)
    assert (seed.info.source, seed.info.task, seed.info.output_kind) == ("transformers", task, kind)
    assert seed.info.family == seed_id.split("/")[1] and seed.info.params < 5_000_000
    assert not seed.model.training and seed.args == () and seed.info.input_spec
    with torch.no_grad():
        expected = pytree.tree_leaves(seed.model(**seed.kwargs))[0]
    cap = capture(seed)
    v = cap.variant
    with torch.no_grad():
        got = v.gm(*v.inputs)[0]
    assert got.shape == expected.shape and torch.allclose(got, expected, atol=1e-5, rtol=1e-5)


def test_same_id_builds_identical_weights_and_inputs():
    a, b = SOURCE.build("hf/bert/sequence-classification"), SOURCE.build("hf/bert/sequence-classification")
    sa, sb = a.model.state_dict(), b.model.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert a.kwargs.keys() == b.kwargs.keys() and all(torch.equal(a.kwargs[k], b.kwargs[k]) for k in a.kwargs)
    other = SOURCE.build("hf/bert/token-classification")
    assert not torch.equal(other.kwargs["input_ids"], a.kwargs["input_ids"])


@pytest.mark.parametrize("bad", ["hf/no_such_model/base", "hf/bert/no-such-head", "hf/bert", "hf/vit/causal-lm"])
def test_unknown_ids_raise_seed_error_naming_the_id(bad):
    with pytest.raises(SeedError, match=re.escape(bad)):
        SOURCE.build(bad)

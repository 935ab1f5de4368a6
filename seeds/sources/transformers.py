"""Every transformers model type with its auto heads, shrunk to a tiny config with seeded random weights.

Ids are ``hf/<model_type>/<head>``. The listing reads only the auto mapping tables; a build takes the
model type's default config, shrinks every size attribute it has (recursively through sub-configs)
while keeping head counts and per-layer patterns consistent, and feeds inputs made for the modality.

Sizes (``hf/bert/masked-lm@33``): the sequence length of text models, to both sides of the attention
kernels' blocks (past the tiny config's 64 positions, the model gets as many positions as tokens); a
model whose main input is not token ids is not rebuilt at a size. Widths
(``hf/llama/causal-lm@w2048``): the hidden size, with heads and feed-forward sizes to match
(``tiny_config.widen_config_dict``).
"""
from __future__ import annotations

import inspect

import torch

from gapfuzz.core.ids import SeedId
from gapfuzz.core.seeding import seeded_generator, stable_int

from ..registry import SeedError, SeedSource, register_source
from ..sizes import SizeError
from ..spec import BuiltSeed, SeedInfo, count_params, input_spec_of
from ..tiny_config import BASIC_TOKENS, BATCH, IMAGE, RESERVED_IDS, SEQ, VOCAB, is_int, tiny_config

# head -> (auto mapping table in transformers.models.auto.modeling_auto, task, output_kind)
HEADS = {
    "base": ("MODEL_MAPPING_NAMES", "feature-extraction", "hidden_states"),
    "causal-lm": ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "causal-lm", "token_logits"),
    "masked-lm": ("MODEL_FOR_MASKED_LM_MAPPING_NAMES", "masked-lm", "token_logits"),
    "seq2seq-lm": ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "seq2seq-lm", "token_logits"),
    "sequence-classification": ("MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES", "sequence-classification",
                                "class_logits"),
    "token-classification": ("MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES", "token-classification", "class_logits"),
    "question-answering": ("MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES", "question-answering", "class_logits"),
    "multiple-choice": ("MODEL_FOR_MULTIPLE_CHOICE_MAPPING_NAMES", "multiple-choice", "class_logits"),
    "image-classification": ("MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "image-classification",
                             "class_logits"),
    "semantic-segmentation": ("MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES", "semantic-segmentation", "masks"),
    "universal-segmentation": ("MODEL_FOR_UNIVERSAL_SEGMENTATION_MAPPING_NAMES", "universal-segmentation", "masks"),
    "object-detection": ("MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES", "object-detection", "boxes"),
    "depth-estimation": ("MODEL_FOR_DEPTH_ESTIMATION_MAPPING_NAMES", "depth-estimation", "tensor"),
    "audio-classification": ("MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES", "audio-classification",
                             "class_logits"),
    "ctc": ("MODEL_FOR_CTC_MAPPING_NAMES", "speech-recognition", "token_logits"),
    "speech-seq2seq": ("MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "speech-recognition", "token_logits"),
}


def _find(config, attr: str, default=None):
    """An attribute of the config or of its first sub-config that has it."""
    if getattr(config, attr, None) is not None:
        return getattr(config, attr)
    for key in getattr(config, "sub_configs", {}):
        sub = getattr(config, key, None)
        if sub is not None and getattr(sub, attr, None) is not None:
            return getattr(sub, attr)
    return default


# Sequence lengths: 1, primes and 2^k+-1 up to the tiny configs' 64 positions, then both sides of the
# attention kernels' block lengths (a rebuilt seed past 64 gets as many positions as tokens).
SEQUENCE_LENGTHS = (1, 2, 3, 5, 7, 13, 15, 17, 31, 32, 33, 63, 64,
                    1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097)
POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_target_positions", "n_ctx", "max_length")
TEXT_HEADS = ("base", "causal-lm", "masked-lm", "seq2seq-lm", "sequence-classification", "token-classification",
              "question-answering", "multiple-choice")


def make_inputs(model, config, head: str, gen: torch.Generator, seq: int = SEQ) -> dict:
    """Example inputs for the model's modality, drawn from ``gen``; ``seq`` tokens per text."""
    params = inspect.signature(model.forward).parameters
    main = model.main_input_name
    if main not in params:  # a stale main_input_name: take the first input the forward does accept
        main = next((p for p in params if p in _MAIN_INPUTS), main)
    inputs: dict = {}
    text_cfg = config.get_text_config(decoder=True)
    vocab = getattr(text_cfg, "vocab_size", None) or _find(config, "vocab_size", VOCAB)
    high = vocab - RESERVED_IDS if vocab > 2 * RESERVED_IDS else vocab
    specials = [v for k in BASIC_TOKENS if is_int(v := getattr(text_cfg, k, None)) and v < high // 2]
    low = max(specials, default=-1) + 1  # plain text: no stray bos/eos/pad inside the sequence
    shape = (BATCH, 2, seq) if head == "multiple-choice" else (BATCH, seq)

    def ids(s=shape):
        return torch.randint(low, high, s, generator=gen)

    if main == "input_ids":
        inputs["input_ids"] = ids()
        eos = getattr(text_cfg, "eos_token_id", None)
        if head == "sequence-classification" and is_int(eos) and eos < vocab:
            inputs["input_ids"][..., -1] = eos  # encoder-decoder classifiers pool the final eos
        if "attention_mask" in params:
            inputs["attention_mask"] = torch.ones(shape, dtype=torch.long)
    needs_pixels = "pixel_values" in params and (
        main == "pixel_values" or params["pixel_values"].default is inspect.Parameter.empty
        or (_find(config, "vision_config") is not None or getattr(config, "image_size", None) is not None)
        and not _has_media_tokens(config))
    if needs_pixels:
        size = _find(config, "image_size", IMAGE)
        h, w = (size, size) if is_int(size) else tuple(size)[:2]
        inputs["pixel_values"] = torch.randn(1 if main != "input_ids" else BATCH,
                                             _find(config, "num_channels", 3), h, w, generator=gen)
    if main == "input_features":
        inputs["input_features"] = _audio_features(config, gen)
    if main == "input_values":  # a waveform, or (frames, mel bins) where the config has bins
        frames_by_bins = (getattr(config, "max_length", None), getattr(config, "num_mel_bins", None))
        shape = (1, *frames_by_bins) if all(frames_by_bins) else (1, 3200)
        inputs["input_values"] = torch.randn(shape, generator=gen)
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        inputs["decoder_input_ids"] = ids((inputs[main].shape[0], seq))  # as long as the encoder's
    return inputs


_MAIN_INPUTS = ("input_ids", "pixel_values", "input_features", "input_values")


def _has_media_tokens(config) -> bool:
    return any(k.startswith(("image_token", "video_token")) for k in vars(config))


def _audio_features(config, gen) -> torch.Tensor:
    mels = _find(config, "num_mel_bins") or _find(config, "feature_size", 80)
    source = _find(config, "max_source_positions")
    per_channel = _find(config, "input_feat_per_channel")
    if source and not per_channel:  # whisper-style: (batch, mel bins, 2 * encoder positions)
        return torch.randn(1, mels, 2 * source, generator=gen)
    return torch.randn(1, 64, (per_channel or mels) * (_find(config, "input_channels") or 1), generator=gen)


@register_source
class TransformersSource(SeedSource):
    name = "transformers"
    prefix = "hf"

    def _table(self, head: str) -> dict:
        from transformers.models.auto import modeling_auto

        return getattr(modeling_auto, HEADS[head][0])

    def list_ids(self) -> list[str]:
        import transformers

        known = transformers._class_to_module  # every class the lazy module can import, nothing imported
        ids = [f"hf/{model_type}/{head}" for head in HEADS for model_type, cls in self._table(head).items()
               if _class_name(cls) in known]
        return sorted(ids)

    def size_points(self, seed_id: str, dimension_sizes: list[int]) -> list[int]:
        return list(SEQUENCE_LENGTHS) if seed_id.rsplit("/", 1)[-1] in TEXT_HEADS else []

    def width_points(self, seed_id: str, widths: list[int]) -> list[int]:
        return list(widths)

    def width_params(self, seed_id: str) -> int | None:
        sized = SeedId.parse(seed_id)
        if sized.width is None:
            return None
        try:
            model_cls, config = self._class_and_config(seed_id, sized)
            with torch.device("meta"):
                return count_params(model_cls._from_config(config, dtype=torch.float32, attn_implementation="eager"))
        except Exception:  # noqa: BLE001 - the build says what is wrong, with its own error
            return None

    def _class_and_config(self, seed_id: str, sized: SeedId):
        import transformers

        parts = sized.base.split("/")
        table = self._table(parts[2]) if len(parts) == 3 and parts[2] in HEADS else {}
        if parts[0] != self.prefix or parts[1] not in table:
            raise SeedError(f"unknown transformers seed id {seed_id!r} (expected hf/<model_type>/<head>, "
                            f"head one of {', '.join(HEADS)})")
        _, model_type, head = parts
        model_cls = getattr(transformers, _class_name(table[model_type]))
        try:
            config = tiny_config(model_type, sized.width)
        except Exception as e:
            if sized.width is None:
                raise
            raise SizeError(f"{seed_id}: has no config at width {sized.width}: {type(e).__name__}: "
                            f"{(str(e).strip().splitlines() or [''])[0][:200]}") from e
        wanted = getattr(model_cls, "config_class", None)
        if wanted and not isinstance(config, wanted):  # e.g. the text-only LM head of a multimodal type
            config = config.get_text_config(decoder=True)
        if head == "sequence-classification" and getattr(config, "pad_token_id", None) is None:
            config.pad_token_id = getattr(config.get_text_config(decoder=True), "vocab_size", VOCAB) - 1
        return model_cls, config

    def build(self, seed_id: str) -> BuiltSeed:
        sized = SeedId.parse(seed_id)
        model_cls, config = self._class_and_config(seed_id, sized)
        model_type, head = sized.base.split("/")[1:3]
        for cfg in {id(c): c for c in (config, config.get_text_config(decoder=True))}.values():
            for key in POSITION_KEYS if (sized.size or 0) > SEQ else ():  # as many positions as tokens
                if isinstance(getattr(cfg, key, None), int) and getattr(cfg, key) < sized.size:
                    setattr(cfg, key, sized.size)
        torch.manual_seed(stable_int(sized.base))  # the same weights at every size where shapes allow
        try:
            model = model_cls._from_config(config, dtype=torch.float32, attn_implementation="eager").eval()
        except Exception as e:
            if sized.width is None:
                raise
            raise SizeError(f"{seed_id}: does not build at width {sized.width}: {type(e).__name__}: "
                            f"{(str(e).strip().splitlines() or [''])[0][:200]}") from e
        kwargs = make_inputs(model, model.config, head, seeded_generator(seed_id + "#input"), sized.size or SEQ)
        if sized.size is not None and "input_ids" not in kwargs:
            raise SizeError(f"{seed_id}: its main input is not token ids, so it has no sequence length to change")
        _, task, output_kind = HEADS[head]
        info = SeedInfo(id=seed_id, source=self.name, family=model_type, task=task, output_kind=output_kind,
                        input_spec=input_spec_of((), kwargs), params=count_params(model),
                        extra={"model_class": model_cls.__name__})
        return BuiltSeed(info, model, (), kwargs)


def _class_name(entry) -> str:
    return entry if isinstance(entry, str) else entry[0]

"""Shrink a transformers config to a tiny one that keeps its architecture.

Every size attribute (recursively through sub-configs) is capped, head counts stay powers of two
that divide the widths, per-layer patterns keep one layer of each kind, and special and media token
ids move inside the shrunk vocabulary, so a model built from the result is the same architecture in
a few hundred kilobytes.
"""
from __future__ import annotations

LAYERS, WIDTH, HEADS_N, HEAD_DIM, FFN, VOCAB, POSITIONS, IMAGE = 2, 64, 4, 16, 128, 512, 64, 64
RESERVED_IDS = 32  # top of the vocab: where media/special token ids go, never drawn as inputs
BATCH, SEQ = 2, 16

_LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers",
               "num_encoder_layers", "num_decoder_layers", "depth", "depths", "decoder_num_layers",
               "num_encoder_blocks", "memory_attention_num_layers", "num_decoder_blocks")
# attribute -> tiny value; applied only where the default is larger (ints, and int lists element-wise)
SHRINK = {
    **dict.fromkeys(_LAYER_KEYS, LAYERS),
    **dict.fromkeys(_WIDTH_KEYS := ("hidden_size", "d_model", "n_embd", "embed_dim", "embedding_size",
                     "decoder_hidden_size", "encoder_hidden_size", "out_hidden_size", "projection_dim",
                     "text_hidden_size", "emb_dim",
                     "output_hidden_size", "fpn_hidden_size", "projector_hidden_size", "hidden_sizes",
                     "conv_dim", "tdnn_dim", "encoder_hidden_dim", "word_embed_proj_dim", "neck_hidden_sizes",
                     "embed_dim_per_stage", "stage_out_channels", "stage_in_channels", "stage_mid_channels",
                     "encoder_in_channels", "decoder_in_channels", "backbone_channel_list",
                     "classifier_proj_size", "xvector_output_dim", "codevector_dim", "proj_codevector_dim",
                     "embedding_dim", "latent_dim", "subsampling_conv_channels", "num_filters",
                     "mask_decoder_hidden_size", "memory_attention_hidden_size", "memory_encoder_hidden_size",
                     "memory_fuser_embed_dim", "mask_downsampler_embed_dim", "vision_hidden_size",
                     "hidden_size_per_layer_input", "dim", "mlp_hidden_size", "conv_channels"), WIDTH),
    **dict.fromkeys(_HEAD_KEYS := ("num_attention_heads", "n_head", "n_heads", "encoder_attention_heads",
                     "decoder_attention_heads", "num_heads", "decoder_num_attention_heads", "index_n_heads",
                     "linear_num_value_heads", "linear_num_heads", "swa_num_attention_heads",
                     "num_attention_heads_per_stage", "num_attention_heads_per_layer",
                     "num_key_value_heads_per_layer"), HEADS_N),
    **dict.fromkeys(_HEAD_DIM_KEYS := ("head_dim", "d_kv", "qk_nope_head_dim", "v_head_dim", "linear_key_head_dim",
                     "linear_value_head_dim", "swa_head_dim", "index_head_dim", "linear_head_dim",
                     "attention_head_dim", "mamba_d_head", "d_head"), HEAD_DIM),
    **dict.fromkeys(("qk_rope_head_dim", "rotary_dim", "mamba_d_state", "state_size", "d_state"), 8),
    **dict.fromkeys(("kv_lora_rank", "q_lora_rank", "time_step_rank", "codebook_dim"), 32),
    **dict.fromkeys(_FFN_KEYS := ("intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff",
                     "n_inner", "decoder_intermediate_size", "mlp_dim", "memory_fuser_intermediate_dim",
                     "iou_head_hidden_dim", "encoder_feedforward_dim", "decoder_feedforward_dim",
                     "dim_feedforward", "intermediate_size_mlp"), FFN),
    **dict.fromkeys(("moe_intermediate_size", "shared_expert_intermediate_size", "expert_intermediate_size"),
                    FFN // 2),
    **dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"), 4),
    **dict.fromkeys(("num_experts_per_tok", "moe_topk", "top_k", "moe_k"), 2),
    **dict.fromkeys(("n_shared_experts", "moe_num_shared_experts", "num_shared_experts", "n_group", "topk_group",
                     "first_k_dense_replace", "n_groups", "mamba_n_groups"), 1),
    **dict.fromkeys(("vocab_size", "vocab_size_per_layer_input", "vocab_offset", "num_embeddings",
                     "codebook_size", "n_words", "entity_vocab_size"), VOCAB),
    **dict.fromkeys(("max_position_embeddings", "n_positions", "max_target_positions", "n_ctx",
                     "num_position_embeddings"), POSITIONS),
    **dict.fromkeys(("max_source_positions",), POSITIONS // 2),
    **dict.fromkeys(("image_size", "pretrain_image_size"), IMAGE),
    **dict.fromkeys(("patch_size",), 8),
    **dict.fromkeys(("sliding_window", "attention_window", "chunk_size", "local_attention",
                     "sliding_window_size"), 8),
    **dict.fromkeys(("num_queries", "num_conv_pos_embeddings", "num_codevectors_per_group",
                     "image_seq_length", "mm_tokens_per_image"), 16),
    **dict.fromkeys(("num_conv_pos_embedding_groups",), 2),
    **dict.fromkeys(("context_size",), SEQ),
    **dict.fromkeys(("window_size",), 2),  # shifted windows must fit the last stage's tiny feature map
    **dict.fromkeys(("max_length",), POSITIONS),
}
_PER_LAYER = {"intermediate_size", "num_attention_heads_per_layer", "num_key_value_heads_per_layer"}
# forced regardless of the default: nothing is downloaded, and no Cache object leaves the graph
FORCE = {"use_cache": False, "use_pretrained_backbone": False, "use_timm_backbone": False}
BASIC_TOKENS = ("pad_token_id", "bos_token_id", "eos_token_id", "unk_token_id", "sep_token_id", "cls_token_id",
                 "mask_token_id", "decoder_start_token_id", "forced_bos_token_id", "forced_eos_token_id")
# names the table does not list still shrink by what they end with
SUFFIXES = (("hidden_size", WIDTH), ("_hidden_dim", WIDTH), ("embed_dim", WIDTH), ("_channels", WIDTH),
            ("intermediate_size", FFN), ("ffn_dim", FFN), ("_heads", HEADS_N), ("head_dim", HEAD_DIM),
            ("chunk_length", 8))
_LAYER_INDEX_SUFFIXES = ("layers", "indexes", "indices", "idxs", "layer_ids")


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _tiny(key: str) -> int | None:
    return SHRINK.get(key) or next((v for suffix, v in SUFFIXES if key.endswith(suffix)), None)


def _fit(key: str, value: int, tiny: int) -> int:
    """``value`` capped at ``tiny``; head counts become powers of two so they divide every width."""
    small = min(value, tiny)
    return 1 << (small.bit_length() - 1) if key.endswith("heads") and small > 0 else small


def _layer_count(d: dict) -> int | None:
    for key in ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "depth", "encoder_layers"):
        if is_int(d.get(key)):
            return d[key]
    return None


def _kept_layers(d: dict, n_old: int, n_new: int) -> list[int]:
    """Which layers survive: the first of each distinct per-layer pattern value, then the earliest ones,
    so a hybrid stack (sliding/full attention, mamba/attention, dense/MoE) keeps every kind of layer."""
    keep: list[int] = []
    for value in d.values():
        if isinstance(value, (list, tuple)) and len(value) == n_old and not all(map(is_int, value)):
            for i, v in enumerate(value):
                if v not in [value[k] for k in keep] and len(keep) < n_new:
                    keep.append(i)
            break
    keep += [i for i in range(n_old) if i not in keep][: n_new - len(keep)]
    return sorted(keep)


def _shrink_list(key: str, value: list, n_old: int | None, keep: list[int]):
    tiny = _tiny(key)
    if n_old and len(value) == n_old and n_old > len(keep) and (tiny is None or key in _PER_LAYER):
        value = [value[i] for i in keep]  # one entry per layer
    elif n_old and all(map(is_int, value)) and key.endswith(_LAYER_INDEX_SUFFIXES):
        top = len(keep) if key == "out_indices" else len(keep) - 1  # backbone stage 0 is the stem
        value = sorted({min(v * len(keep) // n_old, top) if v >= 0 else v for v in value if v < n_old + 1})
    if tiny and all(map(is_int, value)):
        value = [_fit(key, v, 1 if key in _LAYER_KEYS else tiny) for v in value]  # per stage: one block each
    return value


def _config_class(d: dict):
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return CONFIG_MAPPING[d["model_type"]] if d.get("model_type") in CONFIG_MAPPING else None


def _derived_keys(d: dict) -> set:
    """Keys that ``__post_init__`` recomputes from the dataclass fields (swin's hidden_size, a backbone's
    out_features): they are dropped so the shrunk fields rebuild them, instead of staying full size."""
    import dataclasses

    cls = _config_class(d)
    if cls is None or not dataclasses.is_dataclass(cls):
        return set()
    fields = {f.name for f in dataclasses.fields(cls)} | {"model_type", "out_indices", "id2label", "label2id"}
    try:
        rebuilt = cls.from_dict({k: v for k, v in d.items() if k in fields}).to_dict()
    except Exception:  # noqa: BLE001 - a config that cannot rebuild from its fields keeps every key
        return set()
    return {k for k, v in d.items() if k not in fields and k in rebuilt and rebuilt[k] == v}


def shrink_config_dict(d: dict) -> dict:
    """A tiny copy of a config dict (``PreTrainedConfig.to_dict()``), sub-configs included."""
    derived = _derived_keys(d)
    d = {k: v for k, v in d.items() if k not in derived}
    n_old = _layer_count(d)
    n_new = min(n_old, max(LAYERS, len(d.get("out_indices") or ()))) if n_old else 0
    keep = _kept_layers(d, n_old, n_new) if n_old else []
    out = {}
    for key, value in d.items():
        if isinstance(value, dict) and key not in ("id2label", "label2id"):
            value = shrink_config_dict(value)
        elif isinstance(value, (list, tuple)) and value and not isinstance(value[0], dict):
            value = type(value)(_shrink_list(key, list(value), n_old, keep))
        elif key in FORCE:
            value = FORCE[key]
        elif key in _LAYER_KEYS and is_int(value) and n_old:
            value = min(value, n_new)
        elif is_int(value) and _tiny(key):
            value = _fit(key, value, _tiny(key))
        out[key] = value
    _make_consistent(d, out)
    _move_special_tokens(out)
    return out


def _make_consistent(old: dict, new: dict) -> None:
    """Fix what the per-attribute table cannot see: head counts, derived dims, rotary sections."""
    for kv_key, q_key in (("num_key_value_heads", "num_attention_heads"), ("linear_num_key_heads",
                          "linear_num_value_heads"), ("swa_num_key_value_heads", "swa_num_attention_heads")):
        if kv_key in new and new[kv_key] is None and is_int(new.get(q_key)):  # None means one per head
            new[kv_key] = new[q_key]
        elif all(is_int(x) for x in (old.get(kv_key), old.get(q_key), new.get(q_key))):
            grouped = old[kv_key] < old[q_key]  # grouped-query attention stays grouped
            new[kv_key] = max(1, min(old[kv_key], new[q_key] // 2)) if grouped else new[q_key]
    if is_int(new.get("qk_nope_head_dim")) and is_int(new.get("qk_rope_head_dim")):  # latent attention
        qk_head_dim = new["qk_nope_head_dim"] + new["qk_rope_head_dim"]
        new.update({"qk_head_dim": qk_head_dim} if "qk_head_dim" in new else {})
        for rope in _rope_dicts(new):
            if "partial_rotary_factor" in rope:
                rope["partial_rotary_factor"] = new["qk_rope_head_dim"] / qk_head_dim
    if "mamba_n_heads" in new and is_int(new.get("mamba_d_head")):
        new["mamba_n_heads"] = max(1, new.get("mamba_expand", 2) * WIDTH // new["mamba_d_head"])
    if "num_experts_per_tok" in new and new["num_experts_per_tok"] is None:  # unset in some defaults
        new["num_experts_per_tok"] = SHRINK["num_experts_per_tok"]
    if is_int(new.get("coordinate_size")) and is_int(new.get("shape_size")):  # layoutlm: 4 coords + 2 sizes
        new["coordinate_size"] = new["hidden_size"] // 6
        new["shape_size"] = (new["hidden_size"] - 4 * new["coordinate_size"]) // 2
    if "backbone_feature_sizes" in new:  # sam: the feature map side of each level at the shrunk image size
        new["backbone_feature_sizes"] = [[IMAGE // 4 >> i] * 2 for i in range(len(new["backbone_feature_sizes"]))]
    if "axial_pos_embds_dim" in new:  # reformer: the axial embedding factors sum to the hidden size
        new["axial_pos_embds_dim"] = [WIDTH // 2, WIDTH // 2]
        new["axial_pos_shape"] = [4, SEQ // 4]
    heads, hidden = new.get("num_attention_heads"), new.get("hidden_size")
    head_dim = new.get("head_dim") if is_int(new.get("head_dim")) else None
    if head_dim is None and is_int(hidden) and is_int(heads) and heads:
        head_dim = hidden // heads
        if "head_dim" in new:  # None means "derive it", which some models forget to do
            new["head_dim"] = head_dim
    wants_sections = "mrope_section" in (getattr(_config_class(new), "ignore_keys_at_rope_validation", None) or ())
    for rope in _rope_dicts(new):  # multimodal rotary sections must sum to half the (new) head dim
        section = rope.get("mrope_section") or ([2, 3, 3] if wants_sections and "rope_type" in rope else None)
        if section and head_dim:
            scaled = [max(1, s * (head_dim // 2) // sum(section)) for s in section]
            rope["mrope_section"] = [scaled[0] + head_dim // 2 - sum(scaled), *scaled[1:]]


def _rope_dicts(d: dict):
    """Flat rope settings, and per-layer-type ones (gemma's {"sliding_attention": {...}})."""
    for key in ("rope_parameters", "rope_scaling"):
        rope = d.get(key)
        if isinstance(rope, dict):
            yield rope
            yield from (v for v in rope.values() if isinstance(v, dict))


def _move_special_tokens(d: dict) -> None:
    """Token ids beyond the shrunk vocab, and every media token, move into the reserved top ids."""
    vocab = d.get("vocab_size") if is_int(d.get("vocab_size")) else VOCAB
    slot = iter(range(vocab - 1, 0, -1))
    for key, value in d.items():
        if not key.endswith(("token_id", "token_index", "token_ids")) or value is None:
            continue

        def move(v):
            return is_int(v) and (v >= vocab or key not in BASIC_TOKENS)

        if isinstance(value, list):
            d[key] = [next(slot, vocab - 1) if move(v) else v for v in value]
        elif move(value):
            d[key] = next(slot, vocab - 1)


def widen_config_dict(old: dict, tiny: dict, width: int) -> dict:
    """The tiny config dict at ``width``: its widths (hidden size and the like) at ``width``, head
    counts that divide it (64 wide where they can), feed-forward sizes at twice it, one layer; the
    vision or audio sub-configs of a multimodal model stay tiny, its text config widens."""
    heads = width // HEAD_DIM_WIDE if width % HEAD_DIM_WIDE == 0 else 1
    n_old = _layer_count(tiny)
    kinds = {**dict.fromkeys(_WIDTH_KEYS, WIDTH), **dict.fromkeys(_FFN_KEYS, FFN), **dict.fromkeys(_HEAD_KEYS, HEADS_N),
             **dict.fromkeys(_HEAD_DIM_KEYS, HEAD_DIM)}
    wide, to = {}, {WIDTH: width, FFN: 2 * width, HEADS_N: heads, HEAD_DIM: width // heads}
    for key, value in tiny.items():
        cap = kinds.get(key) or next((v for suffix, v in SUFFIXES if key.endswith(suffix) and v != 8), None)
        if key in _LAYER_KEYS and is_int(value) and value > 1:
            value = 1
        elif isinstance(value, dict) and key == "text_config":
            value = widen_config_dict(old.get(key) or {}, value, width)
        elif is_int(value) and cap in to and value == cap:  # only what the shrink capped: 3 channels stay 3
            value = to[cap]
        elif isinstance(value, list) and value and all(map(is_int, value)) and cap in to:
            value = [to[cap] if v == cap else v for v in value]
        elif isinstance(value, list) and n_old and len(value) == n_old and not all(map(is_int, value)):
            value = value[:1]  # one layer: its per-layer pattern keeps the first
        wide[key] = value
    _make_consistent(old, wide)
    return wide


HEAD_DIM_WIDE = 64  # the head width of a widened config, where the width is a multiple of it


def tiny_config(model_type: str, width: int | None = None):
    """The tiny config of ``model_type``; at ``width`` (``seeds.sizes``), its widths widened."""
    from transformers import AutoConfig

    default = AutoConfig.for_model(model_type)
    old = default.to_dict()
    tiny = shrink_config_dict(old)
    return type(default).from_dict(tiny if width is None else widen_config_dict(old, tiny, width))
